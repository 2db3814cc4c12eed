#include "model/loss.h"

#include <string.h>

#include "core/dtype.h"
#include "ops/ops.h"
#include "ops/kernels.h"

static int eff_tile(int T, int tile) { return lc_tile_splits(tile, T) ? tile : T; }

static size_t tile_bytes(const lc_config *cfg, int tile) {
  return lc_bytes(LC_DT_F32, (size_t)tile * (2 * (size_t)cfg->dim + 1 + (size_t)cfg->vocab));
}

size_t lc_loss_scratch_bytes(const lc_config *cfg, int T, int tile, int bf16) {
  tile = eff_tile(T, tile);
  size_t f = lc_matmul_fwd_bytes(bf16, tile, cfg->dim, cfg->vocab), b = lc_matmul_bwd_bytes(bf16, tile, cfg->dim, cfg->vocab);
  return tile_bytes(cfg, tile) + (f > b ? f : b);
}

lc_status lc_loss_fwd_bwd(const lc_config *cfg, const lc_weights *w, lc_weights *g,
                          const float *x, const int *targets, int T, int tile, float loss_scale,
                          int bf16, float *dx, double *loss_sum, long *n_wrong, lc_arena *arena) {
  const int C = cfg->dim, V = cfg->vocab;
  const lc_mm mm = {bf16, arena};
  tile = eff_tile(T, tile);
  // Scratch per tile: normed [tile,C], rstd [tile], logits [tile,V], dnormed [tile,C].
  float *buf = lc_alloc(arena, LC_MEM_SCRATCH, tile_bytes(cfg, tile),
                        tile == T ? "logits" : "loss tile");
  if (!buf) return LC_ENOMEM;
  float *nrm = buf, *dnrm = nrm + (size_t)tile * C, *logits = dnrm + (size_t)tile * C,
        *rstd = logits + (size_t)tile * V;
  if (dx) memset(dx, 0, lc_bytes(LC_DT_F32, (size_t)T * C));
  double total = 0;
  for (int t0 = 0; t0 < T; t0 += tile) {
    int m = T - t0 < tile ? T - t0 : tile;
    int counted = 0;
    for (int t = 0; t < m && !counted; t++) counted = targets[t0 + t] >= 0;
    if (!counted) continue; // no loss, no gradient from these rows
    const float *xt = x + (size_t)t0 * C;
    lc_rmsnorm_fwd(nrm, rstd, xt, w->norm, m, C, cfg->norm_eps);
    if (bf16) lc_bf16_round(nrm, (size_t)m * C);
    lc_matmul_fwd(&mm, logits, nrm, w->head, m, C, V);
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
      lc_matmul_bwd(&mm, dnrm, g->head, logits, nrm, w->head, m, C, V, 0);
      lc_rmsnorm_bwd(dx + (size_t)t0 * C, g->norm, dnrm, xt, w->norm, rstd, m, C);
    }
  }
  *loss_sum += total;
  lc_free(arena, buf);
  return LC_OK;
}
