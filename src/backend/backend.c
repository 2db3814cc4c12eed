// The backend interface's common part (backend.h): the device list, buffers and views, the
// named reads and writes, and the checks in front of every op.
#define _DEFAULT_SOURCE
#include "backend/backend.h"

#include "backend/scratch.h"

#include <stdatomic.h>

#include "core/timer.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/private/private_backend.h"
#ifdef LC_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

// ---- devices: one line per backend this build has. A device named "cuda" also answers
// to "cuda:N"; probe (NULL: always there) says whether this machine can open it.
typedef struct {
  const char *name;
  lc_status (*open)(const char *spec, lc_arena *arena, lc_backend **out);
  lc_status (*probe)(const char *spec);
  int indexed; // "name:N" too
} device_entry;
static lc_status open_cpu(const char *spec, lc_arena *arena, lc_backend **out) { return lc_backend_cpu_open(arena, out); }
static lc_status open_private(const char *spec, lc_arena *arena, lc_backend **out) {
  return lc_backend_private_open(arena, out);
}
static const device_entry devices[] = {
    {"cpu", open_cpu, NULL, 0},
    {"private", open_private, NULL, 0},
#ifdef LC_HAVE_CUDA
    {"cuda", lc_backend_cuda_open, lc_backend_cuda_probe, 1},
#endif
};
#define N_DEVICES (int)(sizeof devices / sizeof devices[0])

const char *lc_device_names(void) {
#ifdef LC_HAVE_CUDA
  return "cpu, private (tests: buffers no host code can reach), cuda or cuda:N (NVIDIA GPUs)";
#else
  return "cpu, private (tests: buffers no host code can reach)";
#endif
}

static const device_entry *find_device(const char *spec) {
  for (int i = 0; i < N_DEVICES; i++) {
    const size_t n = strlen(devices[i].name);
    if (!strcmp(spec, devices[i].name) || (devices[i].indexed && !strncmp(spec, devices[i].name, n) && spec[n] == ':'))
      return &devices[i];
  }
  return NULL;
}

lc_status lc_device_check(const char *spec) {
  const device_entry *d = spec ? find_device(spec) : NULL;
  if (d) return d->probe ? d->probe(spec) : LC_OK;
  if (spec && !strncmp(spec, "cuda", 4))
    return lc_fail(LC_EINVAL, "--device %s: this build has no CUDA backend (CMake found no nvcc; rebuild with the CUDA "
                   "toolkit on PATH, or -DLC_CUDA=on to insist); devices: %s", spec, lc_device_names());
  return lc_fail(LC_EINVAL, "--device %s is not a device of this build; use one of: %s", spec ? spec : "(none)",
                 lc_device_names());
}

// Every entry a backend must fill (destroy may be NULL: storage its caller holds).
#define E_(f) {#f, offsetof(lc_backend_ops, f)},
#define EX_(f, c) E_(f)
static const struct {
  const char *name;
  size_t off;
} required[] = {LC_BE_OPS(EX_, E_)};
#undef EX_
#undef E_

lc_status lc_backend_ops_check(const lc_backend_ops *ops, const char *name) {
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
    void (*fn)(void);
    memcpy(&fn, (const char *)ops + required[i].off, sizeof fn);
    if (!fn) return lc_fail(LC_EINVAL, "the %s backend's table has no %s entry (backend/backend.h lists them)", name, required[i].name);
  }
  return LC_OK;
}

lc_status lc_backend_open(const char *spec, lc_arena *arena, lc_backend **out) {
  *out = NULL;
  LC_TRY(lc_device_check(spec));
  LC_TRY(find_device(spec)->open(spec, arena, out));
  lc_status st = lc_backend_ops_check((*out)->ops, (*out)->name);
  if (st != LC_OK) {
    lc_backend_close(*out);
    *out = NULL;
  }
  return st;
}

const char *lc_backend_describe(const lc_backend *be, char *buf, size_t n) {
  const double gib = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE) / 1073741824.0;
  if (be->about[0])
    snprintf(buf, n, "%s (%.1f GiB)", be->about, gib);
  else if (be->host_memory)
    snprintf(buf, n, "%s: host memory, %.1f GiB (device and host bytes are one memory)", be->name, gib);
  else
    snprintf(buf, n, "%s: its own memory (a private mapping of %.1f GiB reserved), staging in host memory (%.1f GiB)",
             be->name, (double)be->arena->cap / 1073741824.0, gib);
  return buf;
}

void lc_backend_close(lc_backend *be) {
  if (be && be->ops->destroy) be->ops->destroy(be);
}

// ---- buffers
lc_buf lc_buf_view(lc_buf b, size_t first, size_t n) {
  if (first + n > b.n) abort(); // a view outside its buffer: a programming error
  b.off += lc_bytes(b.dt, first);
  b.n = n;
  return b;
}

lc_status lc_buf_alloc(lc_backend *be, lc_mem_cat cat, lc_dtype dt, size_t n, int zero, const char *what, lc_buf *b) {
  memset(b, 0, sizeof *b);
  const size_t bytes = lc_bytes(dt, n);
  uint64_t h = 0;
  LC_TRY(be->ops->alloc(be, cat, bytes, zero, what, &h));
  *b = (lc_buf){.be = be, .h = h, .off = 0, .n = n, .dt = dt, .cat = cat};
  return LC_OK;
}

void lc_buf_free(lc_buf *b) {
  if (!b->be) return;
  if (b->cat == LC_MEM_NCAT) { // wrapped host memory: the caller's
    memset(b, 0, sizeof *b);
    return;
  }
  if (b->off) abort(); // freeing a view
  b->be->ops->free(b->be, b->cat, lc_buf_bytes(*b), b->h);
  memset(b, 0, sizeof *b);
}

lc_buf lc_buf_part(lc_buf b, size_t byte_off, size_t n, lc_dtype dt) {
  if (byte_off + lc_bytes(dt, n) > lc_buf_bytes(b) || byte_off % lc_dtype_size(dt)) abort(); // a programming error
  b.off += byte_off;
  b.n = n;
  b.dt = dt;
  return b;
}

lc_buf lc_buf_wrap_host(lc_backend *be, const void *p, size_t n, lc_dtype dt) {
  lc_buf b;
  memset(&b, 0, sizeof b);
  if (!be->host_memory) {
    lc_fail(LC_EINVAL, "this step does not run on the %s device yet (it needs host memory); use --device cpu", be->name);
    return b;
  }
  return (lc_buf){.be = be, .h = (uint64_t)(uintptr_t)p, .off = 0, .n = n, .dt = dt, .cat = LC_MEM_NCAT};
}

void *lc_buf_host(lc_buf b) { return b.be && b.be->host_memory ? b.be->ops->host_ptr(b.be, b) : NULL; }

void *lc_buf_host_or_fail(lc_buf b, const char *what) {
  void *p = lc_buf_host(b);
  if (!p && b.be)
    lc_fail(LC_EINVAL, "%s does not run on the %s device yet (it needs host memory); use --device cpu", what,
            b.be->name);
  return p;
}

// ---- named reads and writes
const char *lc_sync_name(lc_sync_kind k) {
  static const char *names[LC_SYNC_N] = {"loss", "grad_norm", "token", "input", "states", "stage", "offload", "test"};
  return k >= 0 && k < LC_SYNC_N ? names[k] : "?";
}

static void count_sync(lc_backend *be, lc_sync_kind why, int write, size_t bytes) {
  be->sync[why][write]++;
  be->sync_bytes[why] += bytes;
}

lc_status lc_buf_read(lc_buf src, void *dst, lc_sync_kind why) {
  if (!src.be) return lc_fail(LC_EINVAL, "lc_buf_read: empty buffer");
  count_sync(src.be, why, 0, lc_buf_bytes(src));
  return src.n ? src.be->ops->read(src.be, src, dst) : LC_OK;
}

lc_status lc_buf_write(lc_buf dst, const void *src, lc_sync_kind why) {
  if (!dst.be) return lc_fail(LC_EINVAL, "lc_buf_write: empty buffer");
  count_sync(dst.be, why, 1, lc_buf_bytes(dst));
  return dst.n ? dst.be->ops->write(dst.be, dst, src) : LC_OK;
}

size_t lc_backend_syncs(const lc_backend *be, lc_sync_kind k) { return be->sync[k][0] + be->sync[k][1]; }

void lc_backend_sync_reset(lc_backend *be) {
  memset(be->sync, 0, sizeof be->sync);
  memset(be->sync_bytes, 0, sizeof be->sync_bytes);
}

// ---- op timers (backend.h: lc_backend_op_seconds): a clock read either side of each
// entry on a backend whose ops have finished when they return
static double op_clock(const lc_backend *be) { return be->synchronous ? lc_now() : 0; }
// The timed entries' names and classes (backend.h: LC_BE_OPS).
#define NAME_(n, c) #n,
#define CLASS_(n, c) LC_OPC_##c,
#define NONE_(n)
static const char *const op_names[] = {LC_BE_OPS(NAME_, NONE_)};
static const lc_op_class op_classes[] = {LC_BE_OPS(CLASS_, NONE_)};
#undef NAME_
#undef CLASS_
#undef NONE_
static void op_account(lc_backend *be, lc_be_op op, double t0) {
  if (!be->synchronous) return;
  const uint64_t ns = (uint64_t)((lc_now() - t0) * 1e9);
  atomic_fetch_add(&be->op_ns[op_classes[op]], ns);
  atomic_fetch_add(&be->op_ns_by[op], ns);
  atomic_fetch_add(&be->op_calls[op], 1);
}
// Runs entry `op` of be's table on the arguments after be, timed into its class; RUN_ST
// returns the status of an entry that has one.
#define RUN(be, op, ...)                       \
  do {                                         \
    const double t0_ = op_clock(be);           \
    (be)->ops->op((be), __VA_ARGS__);          \
    op_account((be), LC_BEOP_##op, t0_);       \
  } while (0)
#define RUN_ST(be, op, ...)                                        \
  do {                                                             \
    const double t0_ = op_clock(be);                               \
    const lc_status st_ = (be)->ops->op((be), __VA_ARGS__);        \
    op_account((be), LC_BEOP_##op, t0_);                           \
    return st_;                                                    \
  } while (0)

int lc_backend_op_count(void) { return (int)(sizeof op_names / sizeof op_names[0]); }
const char *lc_backend_op_name(int op) { return op_names[op]; }
lc_op_class lc_backend_op_class(int op) { return op_classes[op]; }
void lc_backend_op_totals(const lc_backend *be, double *seconds, uint64_t *calls) {
  for (int i = 0; i < lc_backend_op_count(); i++) {
    seconds[i] = 1e-9 * (double)atomic_load(&be->op_ns_by[i]);
    calls[i] = atomic_load(&be->op_calls[i]);
  }
}

void lc_backend_op_seconds(const lc_backend *be, double out[LC_OPC_N]) {
  for (int c = 0; c < LC_OPC_N; c++) out[c] = 1e-9 * (double)atomic_load(&be->op_ns[c]);
}

const char *lc_op_class_name(lc_op_class c) {
  static const char *n[LC_OPC_N] = {"gemm", "attention", "loss", "elementwise", "optimizer"};
  return c >= 0 && c < LC_OPC_N ? n[c] : "?";
}

// ---- ops: the checks every backend relies on, then its entry
static lc_status need(int ok, const char *op) {
  return ok ? LC_OK : lc_fail(LC_EINVAL, "backend op %s: buffers of another backend, dtype or size", op);
}
static int same_be(lc_buf a, lc_buf b) { return a.be && a.be == b.be; }

lc_status lc_be_copy(lc_buf dst, lc_buf src, lc_stream s) {
  LC_TRY(need(same_be(dst, src) && dst.dt == src.dt && dst.n == src.n, "copy"));
  if (dst.n) RUN(dst.be, copy, dst, src, s);
  return LC_OK;
}

lc_status lc_be_zero(lc_buf dst) {
  LC_TRY(need(dst.be != NULL, "zero"));
  if (dst.n) RUN(dst.be, zero, dst);
  return LC_OK;
}

lc_status lc_be_bf16_pack(lc_buf d, lc_buf s) {
  LC_TRY(need(same_be(d, s) && d.dt == LC_DT_BF16 && s.dt == LC_DT_F32 && d.n == s.n, "bf16_pack"));
  if (d.n) RUN(d.be, bf16_pack, d, s);
  return LC_OK;
}

lc_status lc_be_bf16_unpack(lc_buf d, lc_buf s) {
  LC_TRY(need(same_be(d, s) && d.dt == LC_DT_F32 && s.dt == LC_DT_BF16 && d.n == s.n, "bf16_unpack"));
  if (d.n) RUN(d.be, bf16_unpack, d, s);
  return LC_OK;
}

lc_status lc_be_bf16_round(lc_buf x) {
  LC_TRY(need(x.be && x.dt == LC_DT_F32, "bf16_round"));
  if (x.n) RUN(x.be, bf16_round, x);
  return LC_OK;
}

lc_status lc_be_add(lc_buf y, lc_buf x) {
  LC_TRY(need(same_be(y, x) && y.dt == LC_DT_F32 && (x.dt == LC_DT_F32 || x.dt == LC_DT_BF16) && y.n == x.n, "add"));
  if (y.n) RUN(y.be, add, y, x);
  return LC_OK;
}

lc_status lc_be_scale(lc_buf x, float s) {
  LC_TRY(need(x.be && x.dt == LC_DT_F32, "scale"));
  if (x.n) RUN(x.be, scale, x, s);
  return LC_OK;
}

lc_status lc_be_sumsq_acc(lc_buf acc, lc_buf x) {
  LC_TRY(need(same_be(acc, x) && acc.dt == LC_DT_F64 && acc.n == 1 && x.dt == LC_DT_F32, "sumsq_acc"));
  if (x.n) RUN(x.be, sumsq_acc, acc, x);
  return LC_OK;
}

lc_status lc_be_adamw(lc_buf p, lc_buf g, lc_buf m, lc_buf v, const lc_adamw_args *a) {
  LC_TRY(need(same_be(p, g) && same_be(p, m) && same_be(p, v) && p.dt == LC_DT_F32 && g.dt == LC_DT_F32 &&
                  m.dt == LC_DT_F32 && v.dt == LC_DT_F32 && g.n == p.n && m.n == p.n && v.n == p.n,
              "adamw"));
  if (p.n) RUN(p.be, adamw, p, g, m, v, a);
  return LC_OK;
}

// An operand that may be empty (skipped): of this backend when present.
static int opt_be(lc_buf x, lc_backend *be) { return !x.be || x.be == be; }
static int is_f32(lc_buf x) { return x.dt == LC_DT_F32; }
static int is_act(lc_buf x) { return x.dt == LC_DT_F32 || x.dt == LC_DT_BF16; }
// A GEMM's weight: an activation dtype, or a frozen base's quantized blocks (no gradient).
static int is_wt(lc_buf x) { return is_act(x) || lc_dtype_is_quant(x.dt); }

lc_status lc_be_rmsnorm_fwd(lc_buf out, lc_buf rstd, lc_buf x, lc_buf w, int T, int C, float eps) {
  LC_TRY(need(same_be(out, rstd) && same_be(out, x) && same_be(out, w) && is_act(out) && is_f32(rstd) && is_act(x) &&
                  is_f32(w) && out.n >= (size_t)T * C && x.n >= (size_t)T * C && rstd.n >= (size_t)T && w.n >= (size_t)C,
              "rmsnorm_fwd"));
  if (T > 0) RUN(out.be, rmsnorm_fwd, out, rstd, x, w, T, C, eps);
  return LC_OK;
}

lc_status lc_be_rmsnorm_bwd(lc_buf dinp, lc_buf dw, lc_buf dout, lc_buf inp, lc_buf w, lc_buf rstd, int T, int C, int set) {
  lc_backend *be = dinp.be;
  LC_TRY(need(be && opt_be(dw, be) && same_be(dinp, dout) && same_be(dinp, inp) && same_be(dinp, w) &&
                  same_be(dinp, rstd) && is_f32(dinp) && is_f32(dout) && is_act(inp) && is_f32(w) && is_f32(rstd) &&
                  (!dw.be || is_f32(dw)) && dinp.n >= (size_t)T * C,
              "rmsnorm_bwd"));
  if (T > 0) RUN(be, rmsnorm_bwd, dinp, dw, dout, inp, w, rstd, T, C, set);
  return LC_OK;
}

static lc_status matmul_fwd(lc_buf out, lc_buf inp, lc_buf w, int T, int K, int N, int acc, int bf16, lc_buf scratch);
lc_status lc_be_matmul_fwd(lc_buf out, lc_buf inp, lc_buf w, int T, int K, int N, int bf16, lc_buf scratch) {
  return matmul_fwd(out, inp, w, T, K, N, 0, bf16, scratch);
}
lc_status lc_be_matmul_fwd_acc(lc_buf out, lc_buf inp, lc_buf w, int T, int K, int N, int bf16, lc_buf scratch) {
  return matmul_fwd(out, inp, w, T, K, N, 1, bf16, scratch);
}
static lc_status matmul_fwd(lc_buf out, lc_buf inp, lc_buf w, int T, int K, int N, int acc, int bf16, lc_buf scratch) {
  LC_TRY(need(same_be(out, inp) && same_be(out, w) && opt_be(scratch, out.be) && is_act(out) && is_act(inp) &&
                  is_wt(w) && out.n >= (size_t)T * N && inp.n >= (size_t)T * K && w.n >= (size_t)N * K,
              "matmul_fwd"));
  RUN_ST(out.be, matmul_fwd, out, inp, w, T, K, N, acc, bf16, scratch);
}

lc_status lc_be_matmul_bwd(lc_buf dinp, lc_buf dw, lc_buf dout, lc_buf inp, lc_buf w, int T, int K, int N, int accumulate,
                           int bf16, lc_buf scratch) {
  lc_backend *be = dout.be;
  LC_TRY(need(be && opt_be(dinp, be) && opt_be(dw, be) && same_be(dout, inp) && same_be(dout, w) &&
                  opt_be(scratch, be) && (!dinp.be || is_f32(dinp)) && (!dw.be || is_f32(dw)) && is_act(dout) &&
                  is_act(inp) && is_wt(w) && !(dw.be && lc_dtype_is_quant(w.dt)),
              "matmul_bwd"));
  RUN_ST(be, matmul_bwd, dinp, dw, dout, inp, w, T, K, N, accumulate, bf16, scratch);
}

static int loss_acc(lc_buf acc) { return acc.dt == LC_DT_F64 && acc.n == 2; }

lc_status lc_be_xent_tile(lc_buf logits, lc_buf targets, int T, int V, float scale, lc_buf acc, int count_wrong) {
  LC_TRY(need(same_be(logits, targets) && same_be(logits, acc) && is_f32(logits) && targets.dt == LC_DT_I32 &&
                  loss_acc(acc) && logits.n >= (size_t)T * V && targets.n >= (size_t)T,
              "xent_tile"));
  if (T > 0) RUN(logits.be, xent_tile, logits, targets, T, V, scale, acc, count_wrong);
  return LC_OK;
}

static int stats_ok(lc_buf s, int T) { return s.dt == LC_DT_U8 && s.n >= lc_scratch_xent_stats(T); }

lc_status lc_be_xent_stats_init(lc_buf stats, int T) {
  LC_TRY(need(stats.be && stats_ok(stats, T), "xent_stats_init"));
  RUN(stats.be, xent_stats_init, stats, T);
  return LC_OK;
}

lc_status lc_be_xent_slice_merge(lc_buf stats, int T, lc_buf logits, lc_buf targets, int t0, int m, int v0, int vs) {
  LC_TRY(need(same_be(stats, logits) && same_be(stats, targets) && stats_ok(stats, T) && is_f32(logits) &&
                  targets.dt == LC_DT_I32 && targets.n >= (size_t)T && logits.n >= (size_t)m * vs && t0 + m <= T,
              "xent_slice_merge"));
  RUN(stats.be, xent_slice_merge, stats, T, logits, targets, t0, m, v0, vs);
  return LC_OK;
}

lc_status lc_be_xent_slice_total(lc_buf stats, lc_buf targets, int T, lc_buf acc, int count_wrong) {
  LC_TRY(need(same_be(stats, targets) && same_be(stats, acc) && stats_ok(stats, T) && targets.dt == LC_DT_I32 &&
                  loss_acc(acc),
              "xent_slice_total"));
  RUN(stats.be, xent_slice_total, stats, targets, T, acc, count_wrong);
  return LC_OK;
}

lc_status lc_be_xent_slice_dlogits(lc_buf logits, lc_buf stats, int T, lc_buf targets, int t0, int m, int v0, int vs,
                                   float scale) {
  LC_TRY(need(same_be(stats, logits) && same_be(stats, targets) && stats_ok(stats, T) && is_f32(logits) &&
                  targets.dt == LC_DT_I32 && logits.n >= (size_t)m * vs && t0 + m <= T,
              "xent_slice_dlogits"));
  RUN(stats.be, xent_slice_dlogits, logits, stats, T, targets, t0, m, v0, vs, scale);
  return LC_OK;
}

static int is16(lc_buf x) { return x.dt == LC_DT_BF16; }
static int fits(lc_buf x, size_t n) { return x.n >= n; }

lc_status lc_be_rope(lc_buf x, lc_buf cos_t, lc_buf sin_t, int T, int H, int D, int bwd) {
  const size_t half = (size_t)T * (size_t)(D / 2);
  LC_TRY(need(same_be(x, cos_t) && same_be(x, sin_t) && is_f32(x) && is_f32(cos_t) && is_f32(sin_t) &&
                  fits(x, (size_t)T * H * D) && fits(cos_t, half) && fits(sin_t, half),
              "rope"));
  if (T > 0) RUN(x.be, rope, x, cos_t, sin_t, T, H, D, bwd);
  return LC_OK;
}

lc_status lc_be_swiglu_fwd(lc_buf h, lc_buf g, lc_buf u) {
  LC_TRY(need(same_be(h, g) && same_be(h, u) && is_act(h) && g.dt == h.dt && u.dt == h.dt && g.n == h.n && u.n == h.n,
              "swiglu_fwd"));
  if (h.n) RUN(h.be, swiglu_fwd, h, g, u);
  return LC_OK;
}

lc_status lc_be_swiglu_bwd(lc_buf dg, lc_buf du, lc_buf dh, lc_buf g, lc_buf u) {
  LC_TRY(need(same_be(dg, du) && same_be(dg, dh) && same_be(dg, g) && same_be(dg, u) && is_act(dg) && du.dt == dg.dt &&
                  g.dt == dg.dt && u.dt == dg.dt && is_f32(dh) && du.n == dg.n && dh.n == dg.n && g.n == dg.n &&
                  u.n == dg.n,
              "swiglu_bwd"));
  if (dg.n) RUN(dg.be, swiglu_bwd, dg, du, dh, g, u);
  return LC_OK;
}

lc_status lc_be_bias_fwd(lc_buf y, lc_buf b, int T, int N) {
  LC_TRY(need(same_be(y, b) && is_f32(y) && is_f32(b) && fits(y, (size_t)T * N) && fits(b, (size_t)N), "bias_fwd"));
  if (T > 0) RUN(y.be, bias_fwd, y, b, T, N);
  return LC_OK;
}

lc_status lc_be_bias_bwd(lc_buf db, lc_buf dy, int T, int N) {
  LC_TRY(need(same_be(db, dy) && is_f32(db) && is_act(dy) && fits(dy, (size_t)T * N) && fits(db, (size_t)N), "bias_bwd"));
  if (T > 0) RUN(db.be, bias_bwd, db, dy, T, N);
  return LC_OK;
}

lc_status lc_be_embedding_fwd(lc_buf out, lc_buf tokens, lc_buf wte, int T, int C, int r0) {
  LC_TRY(need(same_be(out, tokens) && same_be(out, wte) && is_f32(out) && tokens.dt == LC_DT_I32 &&
                  (is_act(wte) || (lc_dtype_is_quant(wte.dt) && out.be->host_memory)) && fits(out, (size_t)T * C) && fits(tokens, (size_t)T) && C > 0 && wte.n % (size_t)C == 0,
              "embedding_fwd"));
  if (T > 0) RUN(out.be, embedding_fwd, out, tokens, wte, T, C, r0);
  return LC_OK;
}

lc_status lc_be_embedding_bwd(lc_buf dwte, lc_buf dout, lc_buf tokens, int T, int C, int r0) {
  LC_TRY(need(same_be(dwte, dout) && same_be(dwte, tokens) && is_f32(dwte) && is_f32(dout) && tokens.dt == LC_DT_I32 &&
                  fits(dout, (size_t)T * C) && fits(tokens, (size_t)T) && C > 0 && dwte.n % (size_t)C == 0,
              "embedding_bwd"));
  if (T > 0) RUN(dwte.be, embedding_bwd, dwte, dout, tokens, T, C, r0);
  return LC_OK;
}

static int flash_ok(lc_buf q, lc_buf k, lc_buf v, lc_buf lo, const lc_attn_geom *s) {
  const size_t nq = (size_t)s->Tq * s->Hq * s->D, nk = (size_t)s->Tk * s->Hkv * s->D;
  return same_be(q, k) && same_be(q, v) && opt_be(lo, q.be) && is_act(q) && is_act(k) && v.dt == k.dt && fits(q, nq) &&
         fits(k, nk) && fits(v, nk) && (!lo.be || (lo.dt == LC_DT_I32 && fits(lo, (size_t)s->Tq))) &&
         (s->bf16 || (!is16(q) && !is16(k)));
}

size_t lc_be_flash_kv_bytes(lc_backend *be, const lc_attn_geom *s, int bwd) { return be->ops->flash_kv_bytes(be, s, bwd); }

// A pack buffer: empty, or the backend's U8 of at least lc_be_flash_kv_bytes.
static int pack_ok(lc_buf pack, lc_backend *be, const lc_attn_geom *s, int bwd) {
  return !pack.be || (pack.be == be && pack.dt == LC_DT_U8 && pack.n >= lc_be_flash_kv_bytes(be, s, bwd));
}

lc_status lc_be_flash_fwd_packed(lc_buf out, lc_buf lse, lc_buf q, lc_buf k, lc_buf v, lc_buf lo, lc_buf pack,
                                 const lc_attn_geom *s) {
  LC_TRY(need(flash_ok(q, k, v, lo, s) && same_be(out, q) && same_be(lse, q) && is_act(out) && is_f32(lse) &&
                  (s->bf16 || !is16(out)) && fits(out, (size_t)s->Tq * s->Hq * s->D) &&
                  fits(lse, (size_t)s->Hq * s->Tq) && pack_ok(pack, q.be, s, 0),
              "flash_fwd"));
  RUN_ST(q.be, flash_fwd, out, lse, q, k, v, lo, pack, s);
}

lc_status lc_be_flash_fwd(lc_buf out, lc_buf lse, lc_buf q, lc_buf k, lc_buf v, lc_buf lo, const lc_attn_geom *s) {
  return lc_be_flash_fwd_packed(out, lse, q, k, v, lo, (lc_buf){0}, s);
}

lc_status lc_be_flash_kv_pack(lc_buf pack, lc_buf k, lc_buf v, const lc_attn_geom *s, int bwd) {
  const size_t nk = (size_t)s->Tk * s->Hkv * s->D;
  LC_TRY(need(same_be(k, v) && same_be(pack, k) && pack.dt == LC_DT_U8 && pack.n >= lc_be_flash_kv_bytes(k.be, s, bwd) &&
                  is_act(k) && v.dt == k.dt && fits(k, nk) && fits(v, nk),
              "flash_kv_pack"));
  RUN(k.be, flash_kv_pack, pack, k, v, s, bwd);
  return LC_OK;
}

static int strided_ok(lc_buf dst, size_t ld_dst, lc_buf src, size_t ld_src, size_t rows, size_t n) {
  const size_t need_d = rows ? (rows - 1) * ld_dst + n : 0, need_s = rows ? (rows - 1) * ld_src + n : 0;
  return same_be(dst, src) && dst.dt == src.dt && n <= ld_dst && n <= ld_src && fits(dst, need_d) && fits(src, need_s);
}

lc_status lc_be_copy2d(lc_buf dst, size_t ld_dst, lc_buf src, size_t ld_src, size_t rows, size_t n) {
  LC_TRY(need(strided_ok(dst, ld_dst, src, ld_src, rows, n), "copy2d"));
  RUN(dst.be, copy2d, dst, ld_dst, src, ld_src, rows, n);
  return LC_OK;
}

lc_status lc_be_add2d(lc_buf dst, size_t ld_dst, lc_buf src, size_t ld_src, size_t rows, size_t n) {
  LC_TRY(need(strided_ok(dst, ld_dst, src, ld_src, rows, n) && is_f32(dst), "add2d"));
  RUN(dst.be, add2d, dst, ld_dst, src, ld_src, rows, n);
  return LC_OK;
}

lc_status lc_be_fill(lc_buf x, float v) {
  LC_TRY(need(x.be && is_f32(x), "fill"));
  RUN(x.be, fill, x, v);
  return LC_OK;
}

lc_status lc_be_flash_bwd_packed(lc_buf dq, lc_buf dk, lc_buf dv, lc_buf dout, lc_buf q, lc_buf k, lc_buf v, lc_buf lse,
                                 lc_buf delta, lc_buf lo, lc_buf pack, const lc_attn_geom *s) {
  LC_TRY(need(flash_ok(q, k, v, lo, s) && same_be(dq, q) && same_be(dk, q) && same_be(dv, q) && same_be(dout, q) &&
                  same_be(lse, q) && same_be(delta, q) && is_f32(dq) && is_f32(dk) && is_f32(dv) && dout.dt == q.dt &&
                  is_f32(lse) && is_f32(delta) && pack_ok(pack, q.be, s, 1),
              "flash_bwd"));
  RUN_ST(q.be, flash_bwd, dq, dk, dv, dout, q, k, v, lse, delta, lo, pack, s);
}

lc_status lc_be_flash_bwd(lc_buf dq, lc_buf dk, lc_buf dv, lc_buf dout, lc_buf q, lc_buf k, lc_buf v, lc_buf lse,
                          lc_buf delta, lc_buf lo, const lc_attn_geom *s) {
  return lc_be_flash_bwd_packed(dq, dk, dv, dout, q, k, v, lse, delta, lo, (lc_buf){0}, s);
}

lc_status lc_be_attn_merge(lc_buf out_a, lc_buf lse_a, lc_buf out_b, lc_buf lse_b, int Tq, int Hq, int D) {
  const size_t n = (size_t)Tq * Hq * D, nl = (size_t)Tq * Hq;
  LC_TRY(need(same_be(out_a, lse_a) && same_be(out_a, out_b) && same_be(out_a, lse_b) && is_f32(out_a) &&
                  is_f32(out_b) && is_f32(lse_a) && is_f32(lse_b) && fits(out_a, n) && fits(out_b, n) &&
                  fits(lse_a, nl) && fits(lse_b, nl),
              "attn_merge"));
  if (n) RUN(out_a.be, attn_merge, out_a, lse_a, out_b, lse_b, Tq, Hq, D);
  return LC_OK;
}

lc_status lc_be_attn_delta(lc_buf delta, lc_buf dout, lc_buf out, int Tq, int Hq, int D) {
  const size_t n = (size_t)Tq * Hq * D;
  LC_TRY(need(same_be(delta, dout) && same_be(delta, out) && is_f32(delta) && is_act(dout) && out.dt == dout.dt &&
                  fits(dout, n) && fits(out, n) && fits(delta, (size_t)Tq * Hq),
              "attn_delta"));
  if (n) RUN(delta.be, attn_delta, delta, dout, out, Tq, Hq, D);
  return LC_OK;
}

lc_status lc_be_dropout(lc_buf dst, lc_buf src, int rows, int cols, lc_buf gidx, uint64_t key, uint32_t thr, int accumulate) {
  const size_t n = (size_t)(rows > 0 ? rows : 0) * (size_t)(cols > 0 ? cols : 0);
  LC_TRY(need(same_be(dst, src) && same_be(dst, gidx) && is_act(dst) && src.dt == dst.dt && (!accumulate || is_f32(dst)) &&
                  dst.n == n && src.n == n && gidx.dt == LC_DT_I32 && gidx.n >= (size_t)(rows > 0 ? rows : 0),
              "dropout"));
  if (n) RUN(dst.be, dropout, dst, src, rows, cols, gidx, key, thr, accumulate);
  return LC_OK;
}
