#define _XOPEN_SOURCE 700 // realpath
#include "plan/rates.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "io/fsutil.h"

static const int dims[LC_RATE_NDIM] = {64, 256, 1024, 4096};
static const int hds[LC_RATE_NHD] = {32, 64, 128};
static const int rows_grid[LC_RATE_NROWS] = {64, 256, 1024, 4096, 16384};
static const int lens[LC_RATE_NLEN] = {1024, 4096, 16384, 65536};
static const char *class_names[LC_RATE_NCLASS] = {"gemm", "attention", "loss", "elementwise", "optimizer"};

const char *lc_rate_class_name(int c) { return (unsigned)c < LC_RATE_NCLASS ? class_names[c] : "?"; }
static const char *coll_names[LC_COLL_N] = {"p2p", "alltoall", "allgather", "reduce_scatter", "allreduce"};

const char *lc_coll_name(lc_coll c) { return (unsigned)c < LC_COLL_N ? coll_names[c] : "?"; }

void lc_rates_default(lc_rates *r, int threads) {
  // `longctx calibrate` on 2 cores of an AMD EPYC Zen 4 (family 25 model 17), 1 rank x 2
  // threads, rounded, by the smaller of K and N (docs/NOTES.md); the compute rates scale
  // with threads / 2 and the links are its 2-rank profile. A machine file replaces them.
  memset(r, 0, sizeof *r);
  const double sc = (threads > 0 ? threads : 2) / 2.0;
  snprintf(r->source, sizeof r->source, "built-in defaults (2 Zen 4 cores; run `longctx calibrate` for this machine)");
  r->builtin = 1;
  static const double g[2][2][LC_RATE_NDIM] = {{{100e9, 170e9, 170e9, 175e9}, {110e9, 160e9, 165e9, 175e9}},
                                               {{95e9, 330e9, 350e9, 360e9}, {100e9, 250e9, 320e9, 320e9}}};
  static const double f[2][2][LC_RATE_NHD] = {{{147e9, 163e9, 172e9}, {149e9, 150e9, 159e9}},
                                              {{214e9, 223e9, 238e9}, {215e9, 232e9, 230e9}}};
  for (int b = 0; b < 2; b++)
    for (int d = 0; d < 2; d++) {
      for (int k = 0; k < LC_RATE_NDIM; k++)
        for (int n = 0; n < LC_RATE_NDIM; n++) r->gemm[b][d][k][n] = sc * g[b][d][k < n ? k : n];
      for (int h = 0; h < LC_RATE_NHD; h++) r->flash[b][d][h] = sc * f[b][d][h];
    }
  r->ew_bw = sc * 58e9;
  r->optim_bw = r->loss_bw = r->ew_bw; // (not measured apart on that machine)
  for (int c = 0; c < LC_COLL_N; c++) r->coll[c] = (lc_link){1e-6, 1.6e9};
  r->coll[LC_COLL_P2P].bw = 4.9e9;
  r->disk_bw = 0.7e9;
  r->small_t_exp = 0.15;
  r->ranks = 1, r->threads = threads > 0 ? threads : 2;
}

// Linear interpolation in log2 of x over the grid g (clamped at its ends): index and weight.
static void grid_pos(const int *g, int n, double x, int *i, double *w) {
  double lx = log2(x > 1 ? x : 1);
  if (lx <= log2(g[0])) { *i = 0, *w = 0; return; }
  for (int k = 0; k + 1 < n; k++)
    if (lx <= log2(g[k + 1])) {
      *i = k, *w = (lx - log2(g[k])) / (log2(g[k + 1]) - log2(g[k]));
      return;
    }
  *i = n - 2, *w = 1;
}

double lc_rates_gemm_s(const lc_rates *r, int bf16, int bwd, double T, int K, int N) {
  if (T <= 0 || K <= 0 || N <= 0) return 0;
  int ik, in;
  double wk, wn;
  grid_pos(dims, LC_RATE_NDIM, K, &ik, &wk);
  grid_pos(dims, LC_RATE_NDIM, N, &in, &wn);
  const double (*g)[LC_RATE_NDIM] = r->gemm[bf16 ? 1 : 0][bwd ? 1 : 0];
  // interpolate the time per FLOP (harmonic), so a slow corner is not averaged away
  const double inv = (1 - wk) * (1 - wn) / g[ik][in] + wk * (1 - wn) / g[ik + 1][in] + (1 - wk) * wn / g[ik][in + 1] +
                     wk * wn / g[ik + 1][in + 1];
  double flops = (bwd ? 4.0 : 2.0) * T * K * N;
  // Other row counts than calibrated: the measured row factors (time per FLOP interpolated
  // in log2 rows); without them (older profiles, defaults) the same per-call cost spread
  // over fewer rows.
  const double *rf = r->gemm_rows[bf16 ? 1 : 0][bwd ? 1 : 0];
  if (rf[0] > 0) {
    int it;
    double wt;
    grid_pos(rows_grid, LC_RATE_NROWS, T, &it, &wt);
    return flops * inv * ((1 - wt) / rf[it] + wt / rf[it + 1]);
  }
  return flops * inv * (T < LC_RATE_GEMM_T && r->small_t_exp > 0 ? pow(LC_RATE_GEMM_T / T, r->small_t_exp) : 1.0);
}

double lc_rates_flash_s(const lc_rates *r, int bf16, int bwd, int D, double keys, double flops) {
  int i;
  double w;
  grid_pos(hds, LC_RATE_NHD, D, &i, &w);
  const double *f = r->flash[bf16 ? 1 : 0][bwd ? 1 : 0];
  double s = flops * ((1 - w) / f[i] + w / f[i + 1]);
  const double *lf = r->flash_len[bf16 ? 1 : 0][bwd ? 1 : 0];
  if (lf[0] > 0) { // the length factor at `keys` (time per FLOP interpolated in log2 keys)
    int il;
    double wl;
    grid_pos(lens, LC_RATE_NLEN, keys > 0 ? keys : lens[0], &il, &wl);
    s *= (1 - wl) / lf[il] + wl / lf[il + 1];
  }
  return s;
}

void lc_rates_scale(lc_rates *r, int c, double f) {
  if (!(f > 0) || !isfinite(f) || (unsigned)c >= LC_RATE_NCLASS) return;
  for (int b = 0; b < 2; b++)
    for (int d = 0; d < 2; d++) {
      if (c == LC_RATE_GEMM)
        for (int k = 0; k < LC_RATE_NDIM; k++)
          for (int n = 0; n < LC_RATE_NDIM; n++) r->gemm[b][d][k][n] *= f;
      if (c == LC_RATE_ATTN)
        for (int h = 0; h < LC_RATE_NHD; h++) r->flash[b][d][h] *= f;
    }
  if (c == LC_RATE_LOSS) r->loss_bw = (r->loss_bw > 0 ? r->loss_bw : r->ew_bw) * f;
  if (c == LC_RATE_EW) r->ew_bw *= f;
  if (c == LC_RATE_OPTIM) r->optim_bw = (r->optim_bw > 0 ? r->optim_bw : r->ew_bw) * f;
  r->from_run |= 1u << c;
}

const char *lc_rates_provenance(const lc_rates *r, char *buf, size_t n) {
  size_t k = 0;
  buf[0] = 0;
  for (int c = 0; c < LC_RATE_NCLASS && k < n; c++)
    if (r->from_run >> c & 1u) k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? ", " : "", class_names[c]);
  if (!r->from_run) snprintf(buf, n, "every rate from %s", r->builtin ? "the built-in defaults" : "calibrate");
  else if (k < n)
    snprintf(buf + k, n - k, ": corrected by a training run (--calibrate-from-run); the rest from %s",
             r->builtin ? "the built-in defaults" : "calibrate");
  return buf;
}

double lc_rates_ew_s(const lc_rates *r, double bytes) { return bytes / r->ew_bw; }
double lc_rates_optim_s(const lc_rates *r, double bytes) { return bytes / (r->optim_bw > 0 ? r->optim_bw : r->ew_bw); }
double lc_rates_loss_s(const lc_rates *r, double bytes) { return bytes / (r->loss_bw > 0 ? r->loss_bw : r->ew_bw); }
// (no link: a memcpy, read + write at the element-wise rate)
double lc_rates_host_copy_s(const lc_rates *r, double bytes) {
  return r->host_link_bw > 0 ? bytes / r->host_link_bw : lc_rates_ew_s(r, 2 * bytes);
}
double lc_rates_host_optim_s(const lc_rates *r, double bytes) {
  return r->host_optim_bw > 0 ? bytes / r->host_optim_bw : lc_rates_optim_s(r, bytes);
}

double lc_rates_coll_s(const lc_rates *r, lc_coll c, int g, double bytes, int inter) {
  if (g <= 1 && c != LC_COLL_P2P) return 0;
  const lc_link l = inter && r->inter.bw > 0 ? r->inter : r->coll[c];
  double steps = c == LC_COLL_P2P ? 1 : g - 1, frac = c == LC_COLL_P2P ? 1 : (double)(g - 1) / g;
  if (c == LC_COLL_ALLREDUCE) steps *= 2, frac *= 2;
  return l.lat_s * steps + bytes * frac / l.bw;
}

static void cache_dir(char *buf, size_t n) {
  const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
  if (x && *x) snprintf(buf, n, "%s/longctx", x);
  else snprintf(buf, n, "%s/.cache/longctx", h && *h ? h : ".");
}

const char *lc_rates_cache_path(char *buf, size_t n) {
  char d[4096];
  cache_dir(d, sizeof d);
  snprintf(buf, n, "%s/machine.json", d);
  return buf;
}

const char *lc_rates_default_path(char *buf, size_t n) {
  char d[4096], rec[4200];
  cache_dir(d, sizeof d);
  snprintf(rec, sizeof rec, "%s/last_machine", d);
  FILE *f = fopen(rec, "r");
  if (f) {
    const int got = fgets(buf, (int)n, f) != NULL;
    fclose(f);
    if (got) buf[strcspn(buf, "\n")] = 0;
    if (got && buf[0] && lc_is_file(buf)) return buf;
  }
  return lc_rates_cache_path(buf, n);
}

void lc_rates_note_last(const char *path) {
  char d[4096], rec[4200], abs[PATH_MAX];
  cache_dir(d, sizeof d);
  if (!realpath(path, abs) || lc_mkdir_p(d) != LC_OK) return;
  snprintf(rec, sizeof rec, "%s/last_machine", d);
  char line[PATH_MAX + 2];
  snprintf(line, sizeof line, "%s\n", abs);
  (void)lc_write_file_atomic(rec, line, strlen(line));
}

// A factor table f[2][2][n] (precision, direction, grid point) under `name`, with its grid
// under `axis` (factors_read reads it back).
static void factors_write(cJSON *p, const char *name, const char *axis, const int *grid, int n, const double *f) {
  static const char *pn[2] = {"fp32", "bf16"}, *dn[2] = {"fwd", "bwd"};
  cJSON *t = cJSON_AddObjectToObject(p, name), *g = cJSON_AddArrayToObject(t, axis);
  for (int i = 0; i < n; i++) cJSON_AddItemToArray(g, cJSON_CreateNumber(grid[i]));
  for (int b = 0; b < 2; b++)
    for (int d = 0; d < 2; d++) {
      char key[16];
      snprintf(key, sizeof key, "%s_%s", pn[b], dn[d]);
      cJSON *m = cJSON_AddArrayToObject(t, key);
      for (int i = 0; i < n; i++) cJSON_AddItemToArray(m, cJSON_CreateNumber(round(f[(b * 2 + d) * n + i] * 1e4) / 1e4));
    }
}

// ---- machine files: {"cpu": "...", "profiles": [ {ranks, threads, gemm, flash, ew_bw, coll}, ... ]}
static cJSON *profile_json(const lc_rates *r) {
  cJSON *p = cJSON_CreateObject();
  cJSON_AddNumberToObject(p, "ranks", r->ranks);
  cJSON_AddNumberToObject(p, "threads", r->threads);
  cJSON *gd = cJSON_AddArrayToObject(p, "gemm_dims");
  for (int i = 0; i < LC_RATE_NDIM; i++) cJSON_AddItemToArray(gd, cJSON_CreateNumber(dims[i]));
  const char *pn[2] = {"fp32", "bf16"}, *dn[2] = {"fwd", "bwd"};
  cJSON *g = cJSON_AddObjectToObject(p, "gemm_gflops"); // [K][N]
  for (int b = 0; b < 2; b++)
    for (int d = 0; d < 2; d++) {
      char key[16];
      snprintf(key, sizeof key, "%s_%s", pn[b], dn[d]);
      cJSON *m = cJSON_AddArrayToObject(g, key);
      for (int k = 0; k < LC_RATE_NDIM; k++) {
        cJSON *row = cJSON_CreateArray();
        for (int n = 0; n < LC_RATE_NDIM; n++) cJSON_AddItemToArray(row, cJSON_CreateNumber(round(r->gemm[b][d][k][n] / 1e7) / 100));
        cJSON_AddItemToArray(m, row);
      }
    }
  cJSON *f = cJSON_AddObjectToObject(p, "attention_gflops"); // by head dim 32, 64, 128
  for (int b = 0; b < 2; b++)
    for (int d = 0; d < 2; d++) {
      char key[16];
      snprintf(key, sizeof key, "%s_%s", pn[b], dn[d]);
      cJSON *m = cJSON_AddArrayToObject(f, key);
      for (int h = 0; h < LC_RATE_NHD; h++) cJSON_AddItemToArray(m, cJSON_CreateNumber(round(r->flash[b][d][h] / 1e7) / 100));
    }
  cJSON_AddNumberToObject(p, "elementwise_gbs", round(r->ew_bw / 1e7) / 100);
  cJSON_AddNumberToObject(p, "optimizer_gbs", round(r->optim_bw / 1e7) / 100);
  cJSON_AddNumberToObject(p, "loss_gbs", round(r->loss_bw / 1e7) / 100);
  cJSON *c = cJSON_AddObjectToObject(p, "comm");
  for (int k = 0; k < LC_COLL_N; k++) {
    cJSON *l = cJSON_AddObjectToObject(c, coll_names[k]);
    cJSON_AddNumberToObject(l, "latency_us", round(r->coll[k].lat_s * 1e8) / 100);
    cJSON_AddNumberToObject(l, "bandwidth_gbs", round(r->coll[k].bw / 1e7) / 100);
  }
  if (r->disk_bw > 0) cJSON_AddNumberToObject(p, "disk_gbs", round(r->disk_bw / 1e7) / 100);
  // rate at that many rows / rate at LC_RATE_GEMM_T; rate with that many keys / rate with 1K
  if (r->gemm_rows[0][0][0] > 0) factors_write(p, "gemm_row_factor", "rows", rows_grid, LC_RATE_NROWS, &r->gemm_rows[0][0][0]);
  if (r->flash_len[0][0][0] > 0) factors_write(p, "attention_length_factor", "keys", lens, LC_RATE_NLEN, &r->flash_len[0][0][0]);
  if (r->gemm_shapes.n > 0) { // each measured shape: ta, tb, M, N, K and both libraries' GFLOP/s
    cJSON *gs = cJSON_AddArrayToObject(p, "gemm_shapes");
    for (int i = 0; i < r->gemm_shapes.n; i++) {
      const lc_sgemm_shape *x = &r->gemm_shapes.s[i];
      cJSON *e = cJSON_CreateObject();
      cJSON_AddStringToObject(e, "op", x->ta ? (x->tb ? "tt" : "tn") : (x->tb ? "nt" : "nn"));
      cJSON_AddNumberToObject(e, "m", x->M);
      cJSON_AddNumberToObject(e, "n", x->N);
      cJSON_AddNumberToObject(e, "k", x->K);
      cJSON_AddNumberToObject(e, "openblas_gflops", round(x->gflops[LC_SGEMM_OPENBLAS] * 10) / 10);
      cJSON_AddNumberToObject(e, "onednn_gflops", round(x->gflops[LC_SGEMM_ONEDNN] * 10) / 10);
      cJSON_AddItemToArray(gs, e);
    }
  }
  if (r->from_run) {
    cJSON *fr = cJSON_AddArrayToObject(p, "from_run");
    for (int c = 0; c < LC_RATE_NCLASS; c++)
      if (r->from_run >> c & 1u) cJSON_AddItemToArray(fr, cJSON_CreateString(class_names[c]));
  }
  if (r->cpu[0]) cJSON_AddStringToObject(p, "cpu", r->cpu);
  return p;
}

// A factor table (gemm_row_factor, attention_length_factor) into f[2][2][n]: absent is fine
// (zeros: not measured); present, it must hold n positive numbers per key.
static int factors_read(const cJSON *o, int n, double *f) {
  if (!o) return 1;
  const char *pn[2] = {"fp32", "bf16"}, *dn[2] = {"fwd", "bwd"};
  for (int b = 0; b < 2; b++)
    for (int d = 0; d < 2; d++) {
      char key[16];
      snprintf(key, sizeof key, "%s_%s", pn[b], dn[d]);
      const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, key);
      if (cJSON_GetArraySize(m) != n) return 0;
      for (int i = 0; i < n; i++) {
        const cJSON *v = cJSON_GetArrayItem(m, i);
        if (!cJSON_IsNumber(v) || !(v->valuedouble > 0 && v->valuedouble < 1e9)) return 0;
        f[(b * 2 + d) * n + i] = v->valuedouble;
      }
    }
  return 1;
}

// A number a machine file may hold: below 1e9 in its unit (GFLOP/s, GB/s, us, a count), so
// scaled to FLOP/s or bytes/s it stays finite and as a count it fits an int (JSON's 1e999
// is inf). A rate must also be > 0, any other number >= 0.
static int in_range(double v, int rate) { return (rate ? v > 0 : v >= 0) && v < 1e9; }

static double num(const cJSON *o, const char *k, int *ok) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
  if (!cJSON_IsNumber(x) || !in_range(x->valuedouble, 0)) {
    *ok = 0;
    return 0;
  }
  return x->valuedouble;
}

static int profile_read(const cJSON *p, lc_rates *r) {
  int ok = 1;
  r->ranks = (int)num(p, "ranks", &ok), r->threads = (int)num(p, "threads", &ok);
  const char *pn[2] = {"fp32", "bf16"}, *dn[2] = {"fwd", "bwd"};
  const cJSON *g = cJSON_GetObjectItemCaseSensitive(p, "gemm_gflops"), *f = cJSON_GetObjectItemCaseSensitive(p, "attention_gflops");
  for (int b = 0; b < 2; b++)
    for (int d = 0; d < 2; d++) {
      char key[16];
      snprintf(key, sizeof key, "%s_%s", pn[b], dn[d]);
      const cJSON *m = cJSON_GetObjectItemCaseSensitive(g, key), *a = cJSON_GetObjectItemCaseSensitive(f, key);
      if (cJSON_GetArraySize(m) != LC_RATE_NDIM || cJSON_GetArraySize(a) != LC_RATE_NHD) return 0;
      for (int k = 0; k < LC_RATE_NDIM; k++)
        for (int n = 0; n < LC_RATE_NDIM; n++) {
          const cJSON *v = cJSON_GetArrayItem(cJSON_GetArrayItem(m, k), n);
          if (!cJSON_IsNumber(v) || !in_range(v->valuedouble, 1)) return 0;
          r->gemm[b][d][k][n] = v->valuedouble * 1e9;
        }
      for (int h = 0; h < LC_RATE_NHD; h++) {
        const cJSON *v = cJSON_GetArrayItem(a, h);
        if (!cJSON_IsNumber(v) || !in_range(v->valuedouble, 1)) return 0;
        r->flash[b][d][h] = v->valuedouble * 1e9;
      }
    }
  r->ew_bw = num(p, "elementwise_gbs", &ok) * 1e9;
  // (profiles written before these rates existed: the element-wise rate stands in; the
  // source line says so, lc_rates_load_machine)
  int ook = 1, lok = 1;
  r->optim_bw = num(p, "optimizer_gbs", &ook) * 1e9;
  r->loss_bw = num(p, "loss_gbs", &lok) * 1e9;
  if (!ook || !(r->optim_bw > 0)) r->optim_bw = 0;
  if (!lok || !(r->loss_bw > 0)) r->loss_bw = 0;
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(p, "comm");
  for (int k = 0; k < LC_COLL_N; k++) {
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(c, coll_names[k]);
    r->coll[k].lat_s = num(l, "latency_us", &ok) * 1e-6;
    r->coll[k].bw = num(l, "bandwidth_gbs", &ok) * 1e9;
    if (!(r->coll[k].bw > 0)) ok = 0;
  }
  r->small_t_exp = 0.15;
  int dok = 1;
  r->disk_bw = num(p, "disk_gbs", &dok) * 1e9;
  if (!factors_read(cJSON_GetObjectItemCaseSensitive(p, "gemm_row_factor"), LC_RATE_NROWS, &r->gemm_rows[0][0][0]) ||
      !factors_read(cJSON_GetObjectItemCaseSensitive(p, "attention_length_factor"), LC_RATE_NLEN, &r->flash_len[0][0][0]))
    return 0;
  const cJSON *gs = cJSON_GetObjectItemCaseSensitive(p, "gemm_shapes"), *x;
  cJSON_ArrayForEach(x, gs) { // (absent: none measured)
    if (r->gemm_shapes.n >= LC_SGEMM_SHAPES) break;
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(x, "op");
    int sok = cJSON_IsString(op) && strlen(op->valuestring) == 2;
    lc_sgemm_shape *y = &r->gemm_shapes.s[r->gemm_shapes.n];
    if (sok) y->ta = op->valuestring[0] == 't', y->tb = op->valuestring[1] == 't';
    y->M = (int)num(x, "m", &sok), y->N = (int)num(x, "n", &sok), y->K = (int)num(x, "k", &sok);
    y->gflops[LC_SGEMM_OPENBLAS] = num(x, "openblas_gflops", &sok), y->gflops[LC_SGEMM_ONEDNN] = num(x, "onednn_gflops", &sok);
    if (!sok || y->M < 1 || y->N < 1 || y->K < 1) return 0;
    r->gemm_shapes.n++;
  }
  const cJSON *fr = cJSON_GetObjectItemCaseSensitive(p, "from_run"), *e;
  cJSON_ArrayForEach(e, fr) {
    for (int c = 0; c < LC_RATE_NCLASS; c++)
      if (cJSON_IsString(e) && !strcmp(e->valuestring, class_names[c])) r->from_run |= 1u << c;
  }
  const cJSON *cpu = cJSON_GetObjectItemCaseSensitive(p, "cpu");
  if (cJSON_IsString(cpu)) snprintf(r->cpu, sizeof r->cpu, "%s", cpu->valuestring);
  return ok && r->ew_bw > 0 && r->ranks > 0 && r->threads > 0;
}

lc_status lc_rates_load_machine(const char *path, int ranks, int threads, lc_rates *r) {
  char *txt = NULL;
  size_t len = 0;
  if (lc_read_file(path, (size_t)4 << 20, &txt, &len) != LC_OK)
    return lc_fail(LC_EIO, "cannot read the machine file %s: run `longctx calibrate --out %s` first", path, path);
  cJSON *j = cJSON_ParseWithLength(txt, len);
  free(txt);
  const cJSON *ps = cJSON_GetObjectItemCaseSensitive(j, "profiles");
  int best = -1;
  double bestd = 1e30;
  lc_rates cand;
  for (int i = 0; i < cJSON_GetArraySize(ps); i++) {
    memset(&cand, 0, sizeof cand);
    if (!profile_read(cJSON_GetArrayItem(ps, i), &cand)) {
      best = -2;
      break;
    }
    // the same threads per rank first, then the nearest number of ranks
    const double d = (cand.threads != threads) * 1e6 + fabs(log2((double)cand.ranks / ranks));
    if (d < bestd) bestd = d, best = i;
  }
  if (best < 0) {
    cJSON_Delete(j);
    return lc_fail(LC_EFORMAT, "the machine file %s is not one `longctx calibrate` wrote (%s); run calibrate again", path,
                   best == -2 ? "a profile lacks a rate, or holds one that is negative, not finite or above 1e9" : "no profiles");
  }
  memset(r, 0, sizeof *r);
  profile_read(cJSON_GetArrayItem(ps, best), r);
  const cJSON *cpu = cJSON_GetObjectItemCaseSensitive(j, "cpu");
  if (!r->cpu[0] && cJSON_IsString(cpu)) snprintf(r->cpu, sizeof r->cpu, "%s", cpu->valuestring); // (older files: the name alone)
  // The CPU it was measured on against this one: the same name, and where the profile has
  // them, the same family, model and L2.
  lc_cpu_info here;
  lc_cpu_detect(&here);
  char hd[160];
  lc_cpu_describe(&here, hd, sizeof hd);
  const size_t nl = strlen(here.model);
  const int full = strstr(r->cpu, "(family ") != NULL;
  if (r->cpu[0] && (full ? strcmp(r->cpu, hd) != 0 : strncmp(r->cpu, here.model, nl) != 0 || (r->cpu[nl] && r->cpu[nl] != ' ')))
    snprintf(r->warning, sizeof r->warning, "rates measured on another CPU, %s; this one is %s: run `longctx calibrate` here",
             r->cpu, hd);
  char note[192] = "";
  if (bestd >= 1e6 && threads > 0) { // other threads per rank: compute rates scaled by the thread ratio
    if (!r->warning[0])
      snprintf(r->warning, sizeof r->warning, "rates measured with %d thread%s per rank, scaled to %d: run `longctx "
               "calibrate --threads %d` for this run's", r->threads, r->threads > 1 ? "s" : "", threads, threads);
    const double sc = (double)threads / r->threads;
    for (int b = 0; b < 2; b++)
      for (int d = 0; d < 2; d++) {
        for (int x = 0; x < LC_RATE_NDIM; x++)
          for (int y = 0; y < LC_RATE_NDIM; y++) r->gemm[b][d][x][y] *= sc;
        for (int h = 0; h < LC_RATE_NHD; h++) r->flash[b][d][h] *= sc;
      }
    r->ew_bw *= sc, r->optim_bw *= sc, r->loss_bw *= sc;
    snprintf(note, sizeof note, ", scaled to %d thread%s per rank: calibrate with those for better rates", threads,
             threads > 1 ? "s" : "");
  } else if (bestd > 0) {
    snprintf(note, sizeof note, ", the nearest rank count");
    if (!r->warning[0])
      snprintf(r->warning, sizeof r->warning, "rates measured with %d rank%s, this run has %d: run `mpirun -np %d longctx "
               "calibrate` for this run's", r->ranks, r->ranks > 1 ? "s" : "", ranks, ranks);
  }
  if (!r->optim_bw || !r->loss_bw) // an older profile
    snprintf(note + strlen(note), sizeof note - strlen(note), "; no optimizer/loss rates: calibrate again");
  if (snprintf(r->source, sizeof r->source, "calibrated %s (%s; profile %d rank%s x %d thread%s%s%s)", path,
               r->cpu[0] ? r->cpu : "?", r->ranks, r->ranks > 1 ? "s" : "", r->threads, r->threads > 1 ? "s" : "", note,
               r->from_run ? "; some rates corrected by a run" : "") >= (int)sizeof r->source)
    memcpy(r->source + sizeof r->source - 4, "...", 4); // a long path: the line cut, not the run
  cJSON_Delete(j);
  return LC_OK;
}

lc_status lc_rates_save_machine(const char *path, const lc_rates *r) {
  char *txt = NULL;
  size_t len = 0;
  cJSON *j = NULL;
  if (lc_is_file(path) && lc_read_file(path, (size_t)4 << 20, &txt, &len) == LC_OK) j = cJSON_ParseWithLength(txt, len);
  free(txt);
  if (!cJSON_IsObject(j) || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(j, "profiles"))) {
    cJSON_Delete(j);
    j = cJSON_CreateObject();
    cJSON_AddArrayToObject(j, "profiles");
  }
  cJSON_DeleteItemFromObjectCaseSensitive(j, "cpu"); // (the last profile's; each profile names its own)
  cJSON_AddStringToObject(j, "cpu", r->cpu);
  cJSON *ps = cJSON_GetObjectItemCaseSensitive(j, "profiles");
  for (int i = cJSON_GetArraySize(ps) - 1; i >= 0; i--) {
    const cJSON *p = cJSON_GetArrayItem(ps, i);
    int ok = 1;
    if ((int)num(p, "ranks", &ok) == r->ranks && (int)num(p, "threads", &ok) == r->threads) cJSON_DeleteItemFromArray(ps, i);
  }
  cJSON_AddItemToArray(ps, profile_json(r));
  char *out = cJSON_Print(j);
  cJSON_Delete(j);
  if (!out) return lc_fail(LC_ENOMEM, "out of memory writing %s", path);
  lc_status st = lc_write_file_atomic(path, out, strlen(out));
  free(out);
  return st;
}

// ---- hardware descriptions
// A positive number below 1e9 in the field's unit (TFLOP/s, GB/s, us, GiB, a count): no
// hardware has more, and scaled to FLOP/s or bytes/s it stays finite (JSON's 1e999 is inf).
static double hw_num(const cJSON *o, const char *k, const char *path, lc_status *st) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
  if (!cJSON_IsNumber(x) || !(x->valuedouble > 0) || !(x->valuedouble < 1e9)) {
    if (*st == LC_OK)
      *st = lc_fail(LC_EFORMAT, "%s: \"%s\" must be a positive number below 1e9 (see hardware/h100-sxm-80gb-8x-node.json)",
                    path, k);
    return 1;
  }
  return x->valuedouble;
}

lc_status lc_rates_load_hardware(const char *path, lc_rates *r) {
  char *txt = NULL;
  size_t len = 0;
  LC_TRY(lc_read_file(path, (size_t)4 << 20, &txt, &len));
  cJSON *j = cJSON_ParseWithLength(txt, len);
  free(txt);
  if (!cJSON_IsObject(j)) {
    cJSON_Delete(j);
    return lc_fail(LC_EFORMAT, "%s is not a JSON object: see hardware/*.json for the format", path);
  }
  lc_status st = LC_OK;
  memset(r, 0, sizeof *r);
  const cJSON *nm = cJSON_GetObjectItemCaseSensitive(j, "name");
  snprintf(r->source, sizeof r->source, "hardware %s (%s)", path, cJSON_IsString(nm) ? nm->valuestring : "unnamed");
  const cJSON *ach = cJSON_GetObjectItemCaseSensitive(j, "achievable_tflops");
  const double t32 = hw_num(ach, "fp32", path, &st) * 1e12, t16 = hw_num(ach, "bf16", path, &st) * 1e12;
  const double af = hw_num(j, "attention_fraction", path, &st);
  for (int k = 0; k < LC_RATE_NDIM; k++)
    for (int n = 0; n < LC_RATE_NDIM; n++)
      for (int d = 0; d < 2; d++) r->gemm[0][d][k][n] = t32, r->gemm[1][d][k][n] = t16;
  for (int h = 0; h < LC_RATE_NHD; h++)
    for (int d = 0; d < 2; d++) r->flash[0][d][h] = af * t32, r->flash[1][d][h] = af * t16;
  r->ew_bw = hw_num(j, "memory_bandwidth_gbs", path, &st) * 1e9;
  const cJSON *in = cJSON_GetObjectItemCaseSensitive(j, "intra_node"), *out = cJSON_GetObjectItemCaseSensitive(j, "inter_node");
  const lc_link li = {hw_num(in, "latency_us", path, &st) * 1e-6, hw_num(in, "bandwidth_gbs", path, &st) * 1e9};
  for (int c = 0; c < LC_COLL_N; c++) r->coll[c] = li;
  r->inter = (lc_link){hw_num(out, "latency_us", path, &st) * 1e-6, hw_num(out, "bandwidth_gbs", path, &st) * 1e9};
  const double dpn = hw_num(j, "devices_per_node", path, &st);
  if (st == LC_OK && dpn != floor(dpn))
    st = lc_fail(LC_EFORMAT, "%s: \"devices_per_node\" must be a whole number, not %g", path, dpn);
  r->devices_per_node = st == LC_OK ? (int)dpn : 1;
  r->mem_bytes = hw_num(j, "memory_per_device_gib", path, &st) * 1073741824.0;
  r->disk_bw = hw_num(j, "disk_bandwidth_gbs", path, &st) * 1e9 / r->devices_per_node;
  // Optional (--offload-optimizer): the host link per device, and the host's memory
  // bandwidth per node, shared by the node's devices for their AdamW steps.
  const cJSON *hl = cJSON_GetObjectItemCaseSensitive(j, "host_link"), *hm = cJSON_GetObjectItemCaseSensitive(j, "host_memory_bandwidth_gbs");
  if (hl) r->host_link_bw = hw_num(hl, "bandwidth_gbs", path, &st) * 1e9;
  if (hm) r->host_optim_bw = hw_num(j, "host_memory_bandwidth_gbs", path, &st) * 1e9 / r->devices_per_node;
  if (cJSON_GetObjectItemCaseSensitive(j, "host_memory_per_node_gib"))
    r->host_mem_bytes = hw_num(j, "host_memory_per_node_gib", path, &st) * 1073741824.0;
  cJSON_Delete(j);
  return st;
}
