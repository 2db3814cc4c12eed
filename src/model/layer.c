#include "model/layer.h"

#include <string.h>

#include "core/dtype.h"
#include "ops/ops.h"
#include "ops/kernels.h"

static int mlp_tiled(const lc_layer_ctx *c) { return lc_tile_splits(c->mlp_tile, c->T); }

static void poll(const lc_layer_ctx *c) {
  if (c->poll) c->poll(c->poll_arg);
}

// bf16 precision: x[n] becomes the bf16 values a bf16 tensor would hold (layer.h).
static void to_bf16(const lc_layer_ctx *c, float *x, size_t n) {
  if (c->bf16) lc_bf16_round(x, n);
}

// Buffer sizes in floats (n rows), shared by the allocations and lc_layer_mem_bytes.
// MLP forward tile: n2 [n,C], rstd [n], gate/up/h [n,F] (three blocks).
static size_t mlp_n2_floats(const lc_config *cfg, int n) { return (size_t)n * cfg->dim; }
static size_t mlp_gu_floats(const lc_config *cfg, int n) { return (size_t)3 * n * cfg->ffn; }
static size_t mlp_fwd_floats(const lc_config *cfg, int n) {
  return mlp_n2_floats(cfg, n) + (size_t)n + mlp_gu_floats(cfg, n);
}
// MLP backward gradient tile: dh, dg, du [n,F], dn2 [n,C] (bf16: and dx rounded [n,C]).
static size_t mlp_grad_floats(const lc_config *cfg, int n, int bf16) {
  return (size_t)3 * n * cfg->ffn + (size_t)(bf16 ? 2 : 1) * n * cfg->dim;
}
// Attention half of backward: datt [T,HQ] (then dn1 [T,C]: datt is dead by then), dq [T,HQ],
// dk, dv [T,HKV].
static size_t datt_floats(const lc_config *cfg, int T) {
  size_t HQ = (size_t)cfg->n_heads * cfg->head_dim, C = (size_t)cfg->dim;
  return (size_t)T * (HQ > C ? HQ : C);
}
// (bf16: and dx rounded [T,C] after them.)
static size_t attn_bwd_floats(const lc_config *cfg, int T, int bf16) {
  size_t HQ = (size_t)cfg->n_heads * cfg->head_dim, HKV = (size_t)cfg->n_kv_heads * cfg->head_dim;
  return datt_floats(cfg, T) + (size_t)T * (HQ + 2 * HKV) + (bf16 ? (size_t)T * cfg->dim : 0);
}

static size_t max3(size_t a, size_t b, size_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

void lc_layer_mem_bytes(const lc_config *cfg, int T, int mlp_tile, int bf16, lc_layer_mem *m) {
  const int tiled = lc_tile_splits(mlp_tile, T), tile = tiled ? mlp_tile : T;
  const int C = cfg->dim, F = cfg->ffn, HQ = cfg->n_heads * cfg->head_dim, HKV = cfg->n_kv_heads * cfg->head_dim;
  // bf16 GEMMs pack their operands into scratch of their own (lc_matmul_*_bytes), on top
  // of what is live when they run; the largest of each phase counts.
  const size_t mlp_fwd_mm = max3(lc_matmul_fwd_bytes(bf16, tile, C, F), lc_matmul_fwd_bytes(bf16, tile, F, C), 0);
  const size_t mlp_bwd_mm = max3(tiled ? lc_matmul_fwd_bytes(bf16, tile, C, F) : 0, lc_matmul_bwd_bytes(bf16, tile, F, C),
                                 lc_matmul_bwd_bytes(bf16, tile, C, F));
  m->mlp_fwd = (tiled ? lc_bytes(LC_DT_F32, mlp_fwd_floats(cfg, tile)) : 0) + mlp_fwd_mm;
  m->mlp_bwd = lc_bytes(LC_DT_F32, mlp_grad_floats(cfg, tile, bf16)) + (tiled ? lc_bytes(LC_DT_F32, mlp_fwd_floats(cfg, tile)) : 0) + mlp_bwd_mm;
  m->attn_bwd = lc_bytes(LC_DT_F32, attn_bwd_floats(cfg, T, bf16));
  m->attn_fwd_mm = max3(lc_matmul_fwd_bytes(bf16, T, C, HQ), lc_matmul_fwd_bytes(bf16, T, C, HKV),
                        lc_matmul_fwd_bytes(bf16, T, HQ, C));
  m->attn_bwd_mm = m->attn_bwd + max3(lc_matmul_bwd_bytes(bf16, T, HQ, C), lc_matmul_bwd_bytes(bf16, T, C, HQ),
                                      lc_matmul_bwd_bytes(bf16, T, C, HKV));
}

#define PAD16(n) (((size_t)(n) + 15) & ~(size_t)15)

size_t lc_layer_qknorm_floats(const lc_config *cfg, int T) {
  if (!cfg->qk_norm) return 0;
  const size_t t = (size_t)T;
  return PAD16(t * cfg->n_heads * cfg->head_dim) + PAD16(t * cfg->n_kv_heads * cfg->head_dim) + PAD16(t * cfg->n_heads) +
         PAD16(t * cfg->n_kv_heads);
}

void lc_layer_qknorm_carve(lc_layer_acts *a, const lc_config *cfg, int T, float *p) {
  if (!cfg->qk_norm || !p) {
    a->qp = a->kp = a->rstdq = a->rstdk = NULL;
    return;
  }
  const size_t t = (size_t)T;
  a->qp = p;
  a->kp = a->qp + PAD16(t * cfg->n_heads * cfg->head_dim);
  a->rstdq = a->kp + PAD16(t * cfg->n_kv_heads * cfg->head_dim);
  a->rstdk = a->rstdq + PAD16(t * cfg->n_heads);
}

// ---------------------------------------------------------------- attention projections
// One projection of n1 [T,C] into out [T,N] (+ bias); qk_norm: the raw projection is kept
// in raw and out is its per-head RMSNorm (rows of D) with weight nw.
static void proj_fwd(const lc_layer_ctx *c, float *out, const float *n1, const float *w, const float *b, float *raw,
                     float *rstd, const float *nw, int N) {
  const lc_mm mm = {c->bf16, c->arena};
  const int T = c->T, C = c->cfg->dim, D = c->cfg->head_dim;
  float *y = raw ? raw : out;
  lc_matmul_fwd(&mm, y, n1, w, T, C, N);
  poll(c);
  if (b) lc_bias_fwd(y, b, T, N);
  if (raw) {
    to_bf16(c, raw, (size_t)T * N); // what a bf16 projection output holds
    lc_rmsnorm_fwd(out, rstd, raw, nw, T * (N / D), D, c->cfg->norm_eps);
  }
}

// The gradient of the rotated (and normed) projection dy [T,N] back to the projection
// output, in place: through the rotation, then the per-head norm (its weight's gradient
// into gnw); rounded as a bf16 gradient tensor; the bias gradient from it.
static void proj_bwd(const lc_layer_ctx *c, float *dy, const float *raw, const float *rstd, const float *nw, float *gnw,
                     float *gb, int H, int rope) {
  const int T = c->T, D = c->cfg->head_dim;
  if (rope) lc_rope_bwd(dy, c->rope_cos, c->rope_sin, T, H, D);
  if (raw) lc_rmsnorm_bwd_set(dy, gnw, dy, raw, nw, rstd, T * H, D);
  to_bf16(c, dy, (size_t)T * H * D);
  if (gb) lc_bias_bwd(gb, dy, T, H * D);
}

// ---------------------------------------------------------------- MLP
// n rows of x_mid -> n2 = rmsnorm2, gate, up, h = silu(gate) * up (the parts backward reads).
static void mlp_fwd_rows(const lc_layer_ctx *c, const lc_layer_weights *w, const float *xm,
                         float *n2, float *rstd, float *gate, float *up, float *h, int n) {
  const lc_mm mm = {c->bf16, c->arena};
  const int C = c->cfg->dim, F = c->cfg->ffn;
  lc_rmsnorm_fwd(n2, rstd, xm, w->ln2, n, C, c->cfg->norm_eps);
  to_bf16(c, n2, (size_t)n * C);
  lc_matmul_fwd(&mm, gate, n2, w->wgate, n, C, F);
  poll(c);
  lc_matmul_fwd(&mm, up, n2, w->wup, n, C, F);
  poll(c);
  lc_swiglu_fwd(h, gate, up, (size_t)n * F);
  to_bf16(c, h, (size_t)n * F);
}

// Forward over tiles: rows [t0, t0+n) of x_mid -> x_out. Scratch: n2 [n,C], rstd [n],
// gate/up/h [n,F].
static lc_status mlp_fwd_tiled(const lc_layer_ctx *c, const lc_layer_weights *w,
                               const float *x_mid, float *x_out) {
  const lc_mm mm = {c->bf16, c->arena};
  const int C = c->cfg->dim, F = c->cfg->ffn, tile = c->mlp_tile;
  lc_arena *ar = c->arena;
  float *n2 = lc_alloc(ar, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, mlp_n2_floats(c->cfg, tile)), "MLP tile norm");
  float *rstd = lc_alloc(ar, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, tile), "MLP tile rstd");
  float *gu = lc_alloc(ar, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, mlp_gu_floats(c->cfg, tile)), "MLP tile gate/up/h");
  lc_status st = LC_OK;
  if (!n2 || !rstd || !gu) {
    st = LC_ENOMEM;
    goto done;
  }
  float *gate = gu, *up = gu + (size_t)tile * F, *h = gu + (size_t)2 * tile * F;
  for (int t0 = 0; t0 < c->T; t0 += tile) {
    int n = c->T - t0 < tile ? c->T - t0 : tile;
    const float *xm = x_mid + (size_t)t0 * C;
    float *xo = x_out + (size_t)t0 * C;
    mlp_fwd_rows(c, w, xm, n2, rstd, gate, up, h, n);
    lc_matmul_fwd(&mm, xo, h, w->wdown, n, F, C);
    poll(c);
    lc_add_inplace(xo, xm, (size_t)n * C);
    to_bf16(c, xo, (size_t)n * C);
  }
done:
  lc_free(ar, gu);
  lc_free(ar, rstd);
  lc_free(ar, n2);
  return st;
}

// Backward of rows [t0, t0+n): dx (dL/dx_out rows) becomes dL/dx_mid rows. n2/rstd/gate/up/h
// either come from forward (untiled) or are recomputed here into scratch (tiled).
static void mlp_bwd_rows(const lc_layer_ctx *c, const lc_layer_weights *w, lc_layer_weights *g,
                         const float *xm, const float *n2, const float *rstd, const float *gate,
                         const float *up, const float *h, float *dx, int n, float *dh, float *dg,
                         float *du, float *dn2, float *dxr) {
  const lc_mm mm = {c->bf16, c->arena};
  const int C = c->cfg->dim, F = c->cfg->ffn;
  // x_out = x_mid + h @ Wdown^T (bf16: the GEMM reads dx rounded, dx itself stays fp32)
  const float *dout = dx;
  if (c->bf16) {
    lc_bf16_round_copy(dxr, dx, (size_t)n * C);
    dout = dxr;
  }
  lc_matmul_bwd(&mm, dh, g->wdown, dout, h, w->wdown, n, F, C, 0);
  poll(c);
  // h = silu(gate) * up
  lc_swiglu_bwd(dg, du, dh, gate, up, (size_t)n * F);
  to_bf16(c, dg, (size_t)n * F);
  to_bf16(c, du, (size_t)n * F);
  // gate = n2 @ Wg^T, up = n2 @ Wu^T
  lc_matmul_bwd(&mm, dn2, g->wgate, dg, n2, w->wgate, n, C, F, 0);
  poll(c);
  lc_matmul_bwd(&mm, dn2, g->wup, du, n2, w->wup, n, C, F, 1);
  poll(c);
  // n2 = rmsnorm(x_mid): gradient added to dx (the residual path already carries dx_out)
  lc_rmsnorm_bwd(dx, g->ln2, dn2, xm, w->ln2, rstd, n, C);
}

static lc_status mlp_bwd(const lc_layer_ctx *c, const lc_layer_weights *w, lc_layer_weights *g,
                         const lc_layer_acts *a, float *dx) {
  const int C = c->cfg->dim, F = c->cfg->ffn, T = c->T;
  const int tiled = mlp_tiled(c);
  const int tile = tiled ? c->mlp_tile : T;
  lc_arena *ar = c->arena;
  // Gradient scratch: dh, dg, du [tile,F], dn2 [tile,C]; plus recompute buffers when tiled.
  size_t fwd_floats = tiled ? mlp_fwd_floats(c->cfg, tile) : 0;
  float *grad = lc_alloc(ar, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, mlp_grad_floats(c->cfg, tile, c->bf16)), "MLP backward tile");
  float *rec = fwd_floats ? lc_alloc(ar, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, fwd_floats), "MLP recompute tile") : NULL;
  if (!grad || (fwd_floats && !rec)) {
    lc_free(ar, rec);
    lc_free(ar, grad);
    return LC_ENOMEM;
  }
  float *dh = grad, *dg = dh + (size_t)tile * F, *du = dg + (size_t)tile * F,
        *dn2 = du + (size_t)tile * F, *dxr = dn2 + (size_t)tile * C;
  if (!tiled) {
    mlp_bwd_rows(c, w, g, a->x_mid, a->ln2, a->rstd2, a->gate, a->up, a->h, dx, T, dh, dg, du, dn2, dxr);
  } else {
    float *n2 = rec, *rstd = n2 + (size_t)tile * C, *gate = rstd + tile,
          *up = gate + (size_t)tile * F, *h = up + (size_t)tile * F;
    for (int t0 = 0; t0 < T; t0 += tile) {
      int n = T - t0 < tile ? T - t0 : tile;
      const float *xm = a->x_mid + (size_t)t0 * C;
      mlp_fwd_rows(c, w, xm, n2, rstd, gate, up, h, n);
      mlp_bwd_rows(c, w, g, xm, n2, rstd, gate, up, h, dx + (size_t)t0 * C, n, dh, dg, du, dn2, dxr);
    }
  }
  lc_free(ar, rec);
  lc_free(ar, grad);
  return LC_OK;
}

// ---------------------------------------------------------------- layer
lc_status lc_layer_fwd(const lc_layer_ctx *c, const lc_layer_weights *w, lc_layer_acts *a,
                       const float *x_in, float *x_out, int skip_attn) {
  const lc_mm mm = {c->bf16, c->arena};
  const lc_config *cfg = c->cfg;
  const int T = c->T, C = cfg->dim, D = cfg->head_dim, F = cfg->ffn;
  const int HQ = cfg->n_heads * D, HKV = cfg->n_kv_heads * D;
  lc_rmsnorm_fwd(a->ln1, a->rstd1, x_in, w->ln1, T, C, cfg->norm_eps);
  to_bf16(c, a->ln1, (size_t)T * C);
  const int qn = cfg->qk_norm;
  proj_fwd(c, a->q, a->ln1, w->wq, w->bq, qn ? a->qp : NULL, a->rstdq, w->q_norm, HQ);
  proj_fwd(c, a->k, a->ln1, w->wk, w->bk, qn ? a->kp : NULL, a->rstdk, w->k_norm, HKV);
  proj_fwd(c, a->v, a->ln1, w->wv, w->bv, NULL, NULL, NULL, HKV);
  lc_rope_fwd(a->q, c->rope_cos, c->rope_sin, T, cfg->n_heads, D);
  lc_rope_fwd(a->k, c->rope_cos, c->rope_sin, T, cfg->n_kv_heads, D);
  to_bf16(c, a->q, (size_t)T * HQ);
  to_bf16(c, a->k, (size_t)T * HKV);
  to_bf16(c, a->v, (size_t)T * HKV);
  c->attn->bf16 = c->bf16; // the strategy rounds att (attn.h)
  if (!skip_attn) LC_TRY(c->attn->fwd(c->attn, a->att, a->saved, a->q, a->k, a->v, T, c->arena));
  lc_matmul_fwd(&mm, a->x_mid, a->att, w->wo, T, HQ, C);
  poll(c);
  if (w->bo) lc_bias_fwd(a->x_mid, w->bo, T, C);
  lc_add_inplace(a->x_mid, x_in, (size_t)T * C);
  if (mlp_tiled(c)) return x_out ? mlp_fwd_tiled(c, w, a->x_mid, x_out) : LC_OK;
  mlp_fwd_rows(c, w, a->x_mid, a->ln2, a->rstd2, a->gate, a->up, a->h, T);
  if (x_out) {
    lc_matmul_fwd(&mm, x_out, a->h, w->wdown, T, F, C);
    poll(c);
    lc_add_inplace(x_out, a->x_mid, (size_t)T * C);
    to_bf16(c, x_out, (size_t)T * C);
  }
  return LC_OK;
}

lc_status lc_layer_bwd(const lc_layer_ctx *c, const lc_layer_weights *w, lc_layer_weights *g,
                       const lc_layer_acts *a, const float *x_in, float *dx) {
  const lc_mm mm = {c->bf16, c->arena};
  const lc_config *cfg = c->cfg;
  const int T = c->T, C = cfg->dim, D = cfg->head_dim;
  const int HQ = cfg->n_heads * D, HKV = cfg->n_kv_heads * D;
  lc_arena *ar = c->arena;
  LC_TRY(mlp_bwd(c, w, g, a, dx)); // dx: dL/dx_out -> dL/dx_mid

  // Attention half. Scratch: datt [T,HQ], dq [T,HQ], dk, dv [T,HKV]; dn1 [T,C] reuses
  // datt's space once the attention backward has consumed datt.
  float *scr = lc_alloc(ar, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, attn_bwd_floats(cfg, T, c->bf16)), "attention backward buffers");
  if (!scr) return LC_ENOMEM;
  float *datt = scr, *dq = datt + datt_floats(cfg, T), *dk = dq + (size_t)T * HQ,
        *dv = dk + (size_t)T * HKV, *dn1 = datt, *dxr = dv + (size_t)T * HKV;
  // x_mid = x_in + att @ Wo^T (bf16: the GEMM reads dx rounded; datt is rounded as a bf16
  // gradient tensor would be, and is what the attention backward reads)
  const float *dout = dx;
  if (c->bf16) {
    lc_bf16_round_copy(dxr, dx, (size_t)T * C);
    dout = dxr;
  }
  lc_matmul_bwd(&mm, datt, g->wo, dout, a->att, w->wo, T, HQ, C, 0);
  poll(c);
  if (g->bo) lc_bias_bwd(g->bo, dout, T, C);
  to_bf16(c, datt, (size_t)T * HQ);
  lc_status st = c->attn->bwd(c->attn, dq, dk, dv, datt, a->att, a->saved, a->q, a->k, a->v, T, ar);
  if (st == LC_OK) {
    const int qn = cfg->qk_norm;
    proj_bwd(c, dq, qn ? a->qp : NULL, a->rstdq, w->q_norm, g->q_norm, g->bq, cfg->n_heads, 1);
    proj_bwd(c, dk, qn ? a->kp : NULL, a->rstdk, w->k_norm, g->k_norm, g->bk, cfg->n_kv_heads, 1);
    proj_bwd(c, dv, NULL, NULL, NULL, NULL, g->bv, cfg->n_kv_heads, 0);
    lc_matmul_bwd(&mm, dn1, g->wq, dq, a->ln1, w->wq, T, C, HQ, 0);
    poll(c);
    lc_matmul_bwd(&mm, dn1, g->wk, dk, a->ln1, w->wk, T, C, HKV, 1);
    poll(c);
    lc_matmul_bwd(&mm, dn1, g->wv, dv, a->ln1, w->wv, T, C, HKV, 1);
    poll(c);
    lc_rmsnorm_bwd(dx, g->ln1, dn1, x_in, w->ln1, a->rstd1, T, C); // dx: -> dL/dx_in
  }
  lc_free(ar, scr);
  return st;
}
