#include "model/loss.h"

#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "ops/ops.h"
#include "ops/kernels.h"
#include "ops/fastexp.h"

static int eff_tile(int T, int tile) { return lc_tile_splits(tile, T) ? tile : T; }

static size_t tile_bytes(const lc_config *cfg, int tile) {
  return lc_bytes(LC_DT_F32, (size_t)tile * (2 * (size_t)cfg->dim + 1 + (size_t)cfg->vocab));
}

// The head GEMMs' scratch for tiles of `tile` rows (the head: the store's 2-byte compute copy
// in a bf16 pass, lc_weights.head16, else fp32), held for the whole call with the tile.
static size_t gemm_bytes(const lc_config *cfg, int tile, int bf16, int w16) {
  const lc_dtype wdt = w16 ? LC_DT_BF16 : LC_DT_F32;
  size_t f = lc_matmul_fwd_bytes(bf16, LC_DT_F32, LC_DT_F32, wdt, tile, cfg->dim, cfg->vocab),
         b = lc_matmul_bwd_bytes(bf16, LC_DT_F32, LC_DT_F32, wdt, tile, cfg->dim, cfg->vocab);
  return f > b ? f : b;
}

size_t lc_loss_scratch_bytes(const lc_config *cfg, int T, int tile, int bf16) {
  tile = eff_tile(T, tile);
  return tile_bytes(cfg, tile) + gemm_bytes(cfg, tile, bf16, bf16);
}

lc_status lc_loss_fwd_bwd(const lc_config *cfg, const lc_weights *w, lc_weights *g,
                          const float *x, const int *targets, int T, int tile, float loss_scale,
                          int bf16, float *dx, double *loss_sum, long *n_wrong, lc_arena *arena) {
  const int C = cfg->dim, V = cfg->vocab;
  const lc_act head = w->head16 ? lc_act_of(w->head16, LC_DT_BF16) : lc_act_f32(w->head);
  tile = eff_tile(T, tile);
  // Scratch per tile: normed [tile,C], rstd [tile], logits [tile,V], dnormed [tile,C]; then
  // the head GEMMs' (held for the call: the bytes do not depend on which rows have labels).
  const size_t tb = tile_bytes(cfg, tile), gb = gemm_bytes(cfg, tile, bf16, w->head16 != NULL);
  float *buf = lc_alloc(arena, LC_MEM_SCRATCH, tb + gb, tile == T ? "logits" : "loss tile");
  if (!buf) return LC_ENOMEM;
  const lc_mm mm = {.bf16 = bf16, .arena = arena, .scratch = gb ? (char *)buf + tb : NULL, .scratch_bytes = gb};
  float *nrm = buf, *dnrm = nrm + (size_t)tile * C, *logits = dnrm + (size_t)tile * C,
        *rstd = logits + (size_t)tile * V;
  if (dx) memset(dx, 0, lc_bytes(LC_DT_F32, (size_t)T * C));
  double total = 0;
  lc_status st = LC_OK;
  for (int t0 = 0; t0 < T && st == LC_OK; t0 += tile) {
    int m = T - t0 < tile ? T - t0 : tile;
    int counted = 0;
    for (int t = 0; t < m && !counted; t++) counted = targets[t0 + t] >= 0;
    if (!counted) continue; // no loss, no gradient from these rows
    const float *xt = x + (size_t)t0 * C;
    lc_rmsnorm_fwd(nrm, rstd, xt, w->norm, m, C, cfg->norm_eps);
    if (bf16) lc_bf16_round(nrm, (size_t)m * C);
    st = lc_matmul_fwd(&mm, logits, LC_DT_F32, lc_act_f32(nrm), head, m, C, V);
    if (st != LC_OK) break;
    if (n_wrong)
      for (int t = 0; t < m; t++) {
        int y = targets[t0 + t];
        if (y < 0) continue;
        const float *row = logits + (size_t)t * V;
        int best = 0;
        for (int v = 1; v < V; v++)
          if (row[v] > row[best]) best = v;
        *n_wrong += best != y;
      }
    total += lc_xent_fwd_bwd(logits, targets + t0, m, V, loss_scale); // logits -> dlogits
    if (dx) {
      if (bf16) lc_bf16_round(logits, (size_t)m * V);
      st = lc_matmul_bwd(&mm, dnrm, g->head, lc_act_f32(logits), lc_act_f32(nrm), head, m, C, V, 0);
      if (st == LC_OK) lc_rmsnorm_bwd(dx + (size_t)t0 * C, g->norm, dnrm, xt, w->norm, rstd, m, C);
    }
  }
  if (st == LC_OK) *loss_sum += total;
  lc_free(arena, buf);
  return st;
}

// ---------------------------------------------------------------- vocabulary slices
static size_t sliced_tile_floats(const lc_config *cfg, int tile, int rows) {
  return (size_t)tile * ((size_t)cfg->dim + 1 + (size_t)rows);
}
// Per token: the running sum (double), max, target logit, best logit (floats), its index.
static size_t stats_bytes(int T) { return (size_t)T * (sizeof(double) + 3 * sizeof(float) + sizeof(int)); }

size_t lc_loss_sliced_scratch_bytes(const lc_config *cfg, int T, int tile, int rows, int bf16) {
  tile = eff_tile(T, tile);
  if (rows > cfg->vocab) rows = cfg->vocab;
  const lc_dtype wdt = bf16 ? LC_DT_BF16 : LC_DT_F32; // a slice's rows (lc_ps_rows.w16)
  size_t f = lc_matmul_fwd_bytes(bf16, LC_DT_F32, LC_DT_F32, wdt, tile, cfg->dim, rows),
         b = lc_matmul_bwd_bytes(bf16, LC_DT_F32, LC_DT_F32, wdt, tile, cfg->dim, rows);
  return lc_bytes(LC_DT_F32, sliced_tile_floats(cfg, tile, rows)) + stats_bytes(T) + (f > b ? f : b);
}

static int tile_counted(const int *targets, int t0, int m) {
  for (int t = 0; t < m; t++)
    if (targets[t0 + t] >= 0) return 1;
  return 0;
}

// One tile's logits against one slice: normed rows (recomputed: cheaper than keeping
// [T, C]; bf16-rounded in bf16) times the slice's rows [vs, C]^T -> logits [m, vs].
static lc_status slice_logits(const lc_config *cfg, const lc_mm *mm, float *nrm, float *rstd, float *logits,
                              const float *xt, const float *norm_w, lc_act W, int m, int vs, int bf16) {
  lc_rmsnorm_fwd(nrm, rstd, xt, norm_w, m, cfg->dim, cfg->norm_eps);
  if (bf16) lc_bf16_round(nrm, (size_t)m * cfg->dim);
  return lc_matmul_fwd(mm, logits, LC_DT_F32, lc_act_f32(nrm), W, m, cfg->dim, vs);
}

lc_status lc_loss_fwd_bwd_sliced(const lc_config *cfg, const float *norm_w, float *norm_g, const lc_head_slices *hs,
                                 const float *x, const int *targets, int T, int tile, float loss_scale, int bf16,
                                 float *dx, double *loss_sum, long *n_wrong, lc_arena *arena) {
  const int C = cfg->dim, V = cfg->vocab, R = hs->rows < V ? hs->rows : V, ns = lc_head_n_slices(V, R);
  const lc_mm mm = {.bf16 = bf16, .arena = arena};
  tile = eff_tile(T, tile);
  // Scratch: normed [tile,C], rstd [tile], logits [tile,R]; per token: sum, max, target
  // logit, best logit and its index.
  float *buf = lc_alloc(arena, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, sliced_tile_floats(cfg, tile, R)), "loss tile (vocabulary slice)");
  double *sum = buf ? lc_alloc(arena, LC_MEM_SCRATCH, stats_bytes(T), "loss statistics per token") : NULL;
  if (!sum) {
    lc_free(arena, buf);
    return LC_ENOMEM;
  }
  float *nrm = buf, *rstd = nrm + (size_t)tile * C, *logits = rstd + tile;
  float *mx = (float *)(void *)(sum + T), *zt = mx + T, *best = zt + T;
  int *arg = (int *)(void *)(best + T);
  for (int t = 0; t < T; t++) sum[t] = 0, mx[t] = -INFINITY, zt[t] = 0, best[t] = -INFINITY, arg[t] = -1;
  lc_status st = LC_OK;
  // Pass 0: each token's log-sum-exp merged over the slices (running max and sum).
  for (int s = 0; s < ns && st == LC_OK; s++) {
    const int v0 = s * R, vs = V - v0 < R ? V - v0 : R;
    lc_act W;
    float *G;
    st = hs->get(hs->arg, s, 0, &W, &G);
    for (int t0 = 0; t0 < T && st == LC_OK; t0 += tile) {
      const int m = T - t0 < tile ? T - t0 : tile;
      if (!tile_counted(targets, t0, m)) continue;
      st = slice_logits(cfg, &mm, nrm, rstd, logits, x + (size_t)t0 * C, norm_w, W, m, vs, bf16);
      if (st != LC_OK) break;
#pragma omp parallel for schedule(static) if ((long)m * vs > 32768L)
      for (int i = 0; i < m; i++) {
        const int t = t0 + i, y = targets[t];
        if (y < 0) continue;
        const float *row = logits + (size_t)i * vs;
        float rm = -INFINITY;
        int ra = 0;
        for (int v = 0; v < vs; v++)
          if (row[v] > rm) rm = row[v], ra = v;
        double rs = 0.0;
#pragma omp simd reduction(+ : rs)
        for (int v = 0; v < vs; v++) rs += (double)lc_fast_expf(row[v] - rm);
        if (rm > mx[t]) {
          sum[t] = sum[t] * exp((double)mx[t] - (double)rm) + rs;
          mx[t] = rm;
        } else {
          sum[t] += rs * exp((double)rm - (double)mx[t]);
        }
        if (y >= v0 && y < v0 + vs) zt[t] = row[y - v0];
        if (rm > best[t]) best[t] = rm, arg[t] = v0 + ra; // first maximum over the vocabulary
      }
    }
    lc_status ps = hs->put(hs->arg, s, 0);
    if (st == LC_OK) st = ps;
  }
  double total = 0;
  for (int t = 0; t < T && st == LC_OK; t++) {
    if (targets[t] < 0) continue;
    total += (double)mx[t] + log(sum[t]) - (double)zt[t];
    if (n_wrong) *n_wrong += arg[t] != targets[t];
  }
  // Pass 1: dlogits = softmax * scale - scale * onehot, slice by slice, into dnormed (dx)
  // and the slice's gradient; then the final norm's backward in place.
  if (dx && st == LC_OK) memset(dx, 0, lc_bytes(LC_DT_F32, (size_t)T * C));
  for (int s = 0; dx && s < ns && st == LC_OK; s++) {
    const int v0 = s * R, vs = V - v0 < R ? V - v0 : R;
    lc_act W;
    float *G;
    st = hs->get(hs->arg, s, 1, &W, &G);
    for (int t0 = 0; t0 < T && st == LC_OK; t0 += tile) {
      const int m = T - t0 < tile ? T - t0 : tile;
      if (!tile_counted(targets, t0, m)) continue;
      st = slice_logits(cfg, &mm, nrm, rstd, logits, x + (size_t)t0 * C, norm_w, W, m, vs, bf16);
      if (st != LC_OK) break;
#pragma omp parallel for schedule(static) if ((long)m * vs > 32768L)
      for (int i = 0; i < m; i++) {
        const int t = t0 + i, y = targets[t];
        float *row = logits + (size_t)i * vs;
        if (y < 0) {
          memset(row, 0, lc_bytes(LC_DT_F32, (size_t)vs));
          continue;
        }
        const float k = (float)((double)loss_scale / sum[t]), M = mx[t];
        for (int v = 0; v < vs; v++) row[v] = lc_fast_expf(row[v] - M) * k;
        if (y >= v0 && y < v0 + vs) row[y - v0] -= loss_scale;
      }
      if (bf16) lc_bf16_round(logits, (size_t)m * vs);
      st = lc_matmul_bwd(&mm, dx + (size_t)t0 * C, G, lc_act_f32(logits), lc_act_f32(nrm), W, m, C, vs, 1);
    }
    lc_status ps = hs->put(hs->arg, s, 1);
    if (st == LC_OK) st = ps;
  }
  for (int t0 = 0; dx && t0 < T && st == LC_OK; t0 += tile) {
    const int m = T - t0 < tile ? T - t0 : tile;
    if (!tile_counted(targets, t0, m)) continue;
    const float *xt = x + (size_t)t0 * C;
    lc_rmsnorm_fwd(nrm, rstd, xt, norm_w, m, C, cfg->norm_eps); // rstd again
    lc_rmsnorm_bwd_set(dx + (size_t)t0 * C, norm_g, dx + (size_t)t0 * C, xt, norm_w, rstd, m, C);
  }
  if (st == LC_OK) *loss_sum += total;
  lc_free(arena, sum);
  lc_free(arena, buf);
  return st;
}
