#include "model/layer.h"

#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/dtype.h"
#include "ops/ops.h"
#include "ops/kernels.h"

static int mlp_tiled(const lc_layer_ctx *c) { return lc_tile_splits(c->mlp_tile, c->T); }

static void poll(const lc_layer_ctx *c) {
  if (c->poll) c->poll(c->poll_arg);
}

static lc_dtype adt(const lc_layer_ctx *c) { return lc_layer_act_dt(c->bf16); }

// The backend the layer's ops run on: the context's, or a CPU backend over its arena (the
// same accounting as the direct calls had). The layer's buffers are host memory yet, so
// they go to the backend as wrapped handles (transitional, backend.h); NULL: empty.
static lc_backend *layer_be(const lc_layer_ctx *c, lc_backend *cpu) {
  if (c->be) return c->be;
  lc_backend_cpu_init(cpu, c->arena);
  return cpu;
}
static lc_buf H(lc_backend *be, const void *p, size_t n, lc_dtype dt) {
  return p ? lc_buf_wrap_host(be, p, n, dt) : (lc_buf){0};
}
// A weight matrix of n values as the GEMMs read it: the store's 2-byte compute copy when
// there is one (a bf16 pass over an acquired unit), else the float view.
static lc_buf WT(lc_backend *be, const float *f, const uint16_t *h, size_t n) {
  return h ? H(be, h, n, LC_DT_BF16) : H(be, f, n, LC_DT_F32);
}
static const lc_buf NONE = {0};

// Buffers are carved from one arena block each, every piece starting 64 bytes apart.
#define AL64(n) (((size_t)(n) + 63) & ~(size_t)63)
static void *cut(char **p, size_t bytes) {
  void *r = *p;
  *p += AL64(bytes);
  return r;
}

// Buffer sizes in bytes (n rows), shared by the allocations and lc_layer_mem_bytes.
// MLP forward tile: n2 [n,C], rstd [n], gate, up, h [n,F] (n2 and gate/up/h in the act dtype).
static size_t mlp_fwd_bytes(const lc_config *cfg, int n, lc_dtype dt) {
  return AL64(lc_bytes(dt, (size_t)n * cfg->dim)) + AL64(lc_bytes(LC_DT_F32, (size_t)n)) +
         3 * AL64(lc_bytes(dt, (size_t)n * cfg->ffn));
}
typedef struct {
  void *n2, *gate, *up, *h;
  float *rstd;
} mlp_tile_bufs;
static mlp_tile_bufs mlp_fwd_carve(const lc_config *cfg, int n, lc_dtype dt, char *p) {
  mlp_tile_bufs b;
  b.n2 = cut(&p, lc_bytes(dt, (size_t)n * cfg->dim));
  b.rstd = cut(&p, lc_bytes(LC_DT_F32, (size_t)n));
  b.gate = cut(&p, lc_bytes(dt, (size_t)n * cfg->ffn));
  b.up = cut(&p, lc_bytes(dt, (size_t)n * cfg->ffn));
  b.h = cut(&p, lc_bytes(dt, (size_t)n * cfg->ffn));
  return b;
}
// MLP backward gradient tile: dh [n,F] fp32, dg, du [n,F] (act dtype), dn2 [n,C] fp32
// (bf16: and dx rounded [n,C], 2 bytes).
static size_t mlp_grad_bytes(const lc_config *cfg, int n, int bf16) {
  const lc_dtype dt = lc_layer_act_dt(bf16);
  const size_t nF = (size_t)n * cfg->ffn, nC = (size_t)n * cfg->dim;
  return AL64(lc_bytes(LC_DT_F32, nF)) + 2 * AL64(lc_bytes(dt, nF)) + AL64(lc_bytes(LC_DT_F32, nC)) +
         (bf16 ? AL64(lc_bytes(LC_DT_BF16, nC)) : 0);
}
// Attention half of backward, held through it: the strategy's dout area [T, max(HQ,C)]
// (fp32: datt, then dn1 [T,C] once datt is consumed; bf16: 2 bytes, dx rounded, then datt
// rounded), dq [T,HQ], dk, dv [T,HKV] fp32. In bf16 the fp32 datt [T,HQ] and dn1 [T,C] are
// blocks of their own around the GEMMs that make and read them (attn_bwd_mm), so neither is
// live during the strategy's backward, the phase's peak.
static size_t datt_floats(const lc_config *cfg, int T) {
  size_t HQ = (size_t)cfg->n_heads * cfg->head_dim, C = (size_t)cfg->dim;
  return (size_t)T * (HQ > C ? HQ : C);
}
static size_t attn_bwd_bytes(const lc_config *cfg, int T, int bf16) {
  size_t HQ = (size_t)cfg->n_heads * cfg->head_dim, HKV = (size_t)cfg->n_kv_heads * cfg->head_dim;
  return AL64(lc_bytes(bf16 ? LC_DT_BF16 : LC_DT_F32, datt_floats(cfg, T))) + AL64(lc_bytes(LC_DT_F32, (size_t)T * HQ)) +
         2 * AL64(lc_bytes(LC_DT_F32, (size_t)T * HKV));
}
// bf16: the fp32 projection q, k or v is computed in before RoPE and rounding (T*HQ floats).
static size_t proj_tmp_bytes(const lc_config *cfg, int T, int bf16) {
  return bf16 ? lc_bytes(LC_DT_F32, (size_t)T * cfg->n_heads * cfg->head_dim) : 0;
}

static size_t max3(size_t a, size_t b, size_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

void lc_layer_mem_bytes(const lc_config *cfg, int T, int mlp_tile, int bf16, lc_layer_mem *m) {
  const int tiled = lc_tile_splits(mlp_tile, T), tile = tiled ? mlp_tile : T;
  const int C = cfg->dim, F = cfg->ffn, HQ = cfg->n_heads * cfg->head_dim, HKV = cfg->n_kv_heads * cfg->head_dim;
  const lc_dtype dt = lc_layer_act_dt(bf16), f32 = LC_DT_F32;
  // The GEMMs' scratch (lc_matmul_*_bytes: operand packing, widening or an output chunk,
  // by the operands' dtypes) is on top of what is live when they run; the largest of each
  // phase counts. Backward's dout operand is dx rounded (act dtype) or, for q/k/v, dq/dk/dv;
  // the weights are the store's compute copy (act dtype: 2 bytes in a bf16 pass).
  const size_t mlp_fwd_mm = max3(lc_matmul_fwd_bytes(bf16, dt, dt, dt, tile, C, F), lc_matmul_fwd_bytes(bf16, f32, dt, dt, tile, F, C), 0);
  const size_t mlp_bwd_mm = max3(tiled ? lc_matmul_fwd_bytes(bf16, dt, dt, dt, tile, C, F) : 0,
                                 lc_matmul_bwd_bytes(bf16, dt, dt, dt, tile, F, C), lc_matmul_bwd_bytes(bf16, dt, dt, dt, tile, C, F));
  m->mlp_fwd = (tiled ? mlp_fwd_bytes(cfg, tile, dt) : 0) + mlp_fwd_mm;
  m->mlp_bwd = mlp_grad_bytes(cfg, tile, bf16) + (tiled ? mlp_fwd_bytes(cfg, tile, dt) : 0) + mlp_bwd_mm;
  m->attn_bwd = attn_bwd_bytes(cfg, T, bf16);
  const size_t proj_mm = proj_tmp_bytes(cfg, T, bf16) + max3(lc_matmul_fwd_bytes(bf16, f32, dt, dt, T, C, HQ),
                                                                lc_matmul_fwd_bytes(bf16, f32, dt, dt, T, C, HKV), 0);
  m->attn_fwd_mm = max3(proj_mm, lc_matmul_fwd_bytes(bf16, f32, dt, dt, T, HQ, C), 0);
  const size_t datt32 = bf16 ? lc_bytes(f32, (size_t)T * HQ) : 0, dn1 = bf16 ? lc_bytes(f32, (size_t)T * C) : 0;
  m->attn_bwd_mm = m->attn_bwd + max3(datt32 + lc_matmul_bwd_bytes(bf16, dt, dt, dt, T, HQ, C),
                                      dn1 + lc_matmul_bwd_bytes(bf16, f32, dt, dt, T, C, HQ),
                                      dn1 + lc_matmul_bwd_bytes(bf16, f32, dt, dt, T, C, HKV));
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
static lc_status proj_fwd(const lc_layer_ctx *c, lc_backend *be, float *out, const void *n1, lc_buf w, const float *b,
                          float *raw, float *rstd, const float *nw, int N) {
  const int T = c->T, C = c->cfg->dim, D = c->cfg->head_dim;
  const size_t TN = (size_t)T * N;
  const lc_buf y = H(be, raw ? raw : out, TN, LC_DT_F32);
  LC_TRY(lc_be_matmul_fwd(y, H(be, n1, (size_t)T * C, adt(c)), w, T, C, N, c->bf16, NONE));
  poll(c);
  if (b) LC_TRY(lc_be_bias_fwd(y, H(be, b, (size_t)N, LC_DT_F32), T, N));
  if (raw) {
    if (c->bf16) LC_TRY(lc_be_bf16_round(y)); // what a bf16 projection output holds
    LC_TRY(lc_be_rmsnorm_fwd(H(be, out, TN, LC_DT_F32), H(be, rstd, (size_t)T * (N / D), LC_DT_F32), y,
                             H(be, nw, (size_t)D, LC_DT_F32), T * (N / D), D, c->cfg->norm_eps));
  }
  return LC_OK;
}

// The gradient of the rotated (and normed) projection dy [T,N] back to the projection
// output, in place: through the rotation, then the per-head norm (its weight's gradient
// into gnw); rounded as a bf16 gradient tensor; the bias gradient from it.
static lc_status proj_bwd(const lc_layer_ctx *c, lc_backend *be, float *dy, const float *raw, const float *rstd,
                          const float *nw, float *gnw, float *gb, int Hn, int rope) {
  const int T = c->T, D = c->cfg->head_dim;
  const size_t n = (size_t)T * Hn * D, half = (size_t)T * (D / 2);
  const lc_buf d = H(be, dy, n, LC_DT_F32);
  if (rope)
    LC_TRY(lc_be_rope(d, H(be, c->rope_cos, half, LC_DT_F32), H(be, c->rope_sin, half, LC_DT_F32), T, Hn, D, 1));
  if (raw)
    LC_TRY(lc_be_rmsnorm_bwd(d, H(be, gnw, (size_t)D, LC_DT_F32), d, H(be, raw, n, LC_DT_F32),
                             H(be, nw, (size_t)D, LC_DT_F32), H(be, rstd, (size_t)T * Hn, LC_DT_F32), T * Hn, D, 1));
  if (c->bf16) LC_TRY(lc_be_bf16_round(d));
  return gb ? lc_be_bias_bwd(H(be, gb, (size_t)Hn * D, LC_DT_F32), d, T, Hn * D) : LC_OK;
}

// q, k and v of n1: each projected in fp32 (into its slot in fp32; bf16: a scratch block),
// RoPE'd (q, k), and in bf16 rounded into its 2-byte slot (the values a bf16 tensor holds).
static lc_status qkv_fwd(const lc_layer_ctx *c, const lc_layer_weights *w, lc_layer_acts *a) {
  const lc_config *cfg = c->cfg;
  const int T = c->T, C = cfg->dim, D = cfg->head_dim, qn = cfg->qk_norm;
  const size_t QC = (size_t)cfg->n_heads * D * C, KC = (size_t)cfg->n_kv_heads * D * C, half = (size_t)T * (D / 2);
  lc_backend cpu, *be = layer_be(c, &cpu);
  float *tmp = NULL;
  if (c->bf16 && !(tmp = lc_alloc(c->arena, LC_MEM_SCRATCH, proj_tmp_bytes(cfg, T, 1), "q/k/v projection (fp32)")))
    return LC_ENOMEM;
  const struct {
    void *dst;
    lc_buf w;
    const float *b, *nw;
    float *raw, *rstd;
    int H;
  } p[3] = {{a->q, WT(be, w->wq, w->wq16, QC), w->bq, w->q_norm, qn ? a->qp : NULL, a->rstdq, cfg->n_heads},
            {a->k, WT(be, w->wk, w->wk16, KC), w->bk, w->k_norm, qn ? a->kp : NULL, a->rstdk, cfg->n_kv_heads},
            {a->v, WT(be, w->wv, w->wv16, KC), w->bv, NULL, NULL, NULL, cfg->n_kv_heads}};
  lc_status st = LC_OK;
  for (int m = 0; m < 3 && st == LC_OK; m++) {
    const size_t n = (size_t)T * p[m].H * D;
    float *y = c->bf16 ? tmp : (float *)p[m].dst;
    st = proj_fwd(c, be, y, a->ln1, p[m].w, p[m].b, p[m].raw, p[m].rstd, p[m].nw, p[m].H * D);
    if (st == LC_OK && m < 2)
      st = lc_be_rope(H(be, y, n, LC_DT_F32), H(be, c->rope_cos, half, LC_DT_F32), H(be, c->rope_sin, half, LC_DT_F32),
                      T, p[m].H, D, 0);
    if (st == LC_OK && c->bf16) // rounds to nearest even
      st = lc_be_bf16_pack(H(be, p[m].dst, n, LC_DT_BF16), H(be, y, n, LC_DT_F32));
  }
  lc_free(c->arena, tmp);
  return st;
}

// ---------------------------------------------------------------- MLP
// n rows of x_mid -> n2 = rmsnorm2, gate, up, h = silu(gate) * up (the parts backward
// reads; all but rstd in the act dtype).
static lc_status mlp_fwd_rows(const lc_layer_ctx *c, lc_backend *be, const lc_layer_weights *w, const float *xm,
                              void *n2, float *rstd, void *gate, void *up, void *h, int n) {
  const int C = c->cfg->dim, F = c->cfg->ffn;
  const size_t nC = (size_t)n * C, nF = (size_t)n * F, FC = (size_t)F * C;
  const lc_dtype dt = adt(c);
  const lc_buf bn2 = H(be, n2, nC, dt), bg = H(be, gate, nF, dt), bu = H(be, up, nF, dt);
  LC_TRY(lc_be_rmsnorm_fwd(bn2, H(be, rstd, (size_t)n, LC_DT_F32), H(be, xm, nC, LC_DT_F32),
                           H(be, w->ln2, (size_t)C, LC_DT_F32), n, C, c->cfg->norm_eps));
  LC_TRY(lc_be_matmul_fwd(bg, bn2, WT(be, w->wgate, w->wgate16, FC), n, C, F, c->bf16, NONE));
  poll(c);
  LC_TRY(lc_be_matmul_fwd(bu, bn2, WT(be, w->wup, w->wup16, FC), n, C, F, c->bf16, NONE));
  poll(c);
  return lc_be_swiglu_fwd(H(be, h, nF, dt), bg, bu);
}

// x_out rows = x_mid rows + h @ Wdown^T (bf16: the sum rounded as a bf16 tensor holds it).
static lc_status mlp_down(const lc_layer_ctx *c, lc_backend *be, const lc_layer_weights *w, const void *h,
                          const float *xm, float *xo, int n) {
  const int C = c->cfg->dim, F = c->cfg->ffn;
  const lc_buf bo = H(be, xo, (size_t)n * C, LC_DT_F32);
  LC_TRY(lc_be_matmul_fwd(bo, H(be, h, (size_t)n * F, adt(c)), WT(be, w->wdown, w->wdown16, (size_t)C * F), n, F, C,
                          c->bf16, NONE));
  poll(c);
  LC_TRY(lc_be_add(bo, H(be, xm, (size_t)n * C, LC_DT_F32)));
  return c->bf16 ? lc_be_bf16_round(bo) : LC_OK;
}

// Forward over tiles: rows [t0, t0+n) of x_mid -> x_out (one tile's buffers: mlp_fwd_bytes).
static lc_status mlp_fwd_tiled(const lc_layer_ctx *c, const lc_layer_weights *w,
                               const float *x_mid, float *x_out) {
  const int C = c->cfg->dim, tile = c->mlp_tile;
  lc_backend cpu, *be = layer_be(c, &cpu);
  lc_arena *ar = c->arena;
  char *blk = lc_alloc(ar, LC_MEM_SCRATCH, mlp_fwd_bytes(c->cfg, tile, adt(c)), "MLP tile");
  if (!blk) return LC_ENOMEM;
  const mlp_tile_bufs b = mlp_fwd_carve(c->cfg, tile, adt(c), blk);
  lc_status st = LC_OK;
  for (int t0 = 0; t0 < c->T && st == LC_OK; t0 += tile) {
    int n = c->T - t0 < tile ? c->T - t0 : tile;
    const float *xm = x_mid + (size_t)t0 * C;
    float *xo = x_out + (size_t)t0 * C;
    st = mlp_fwd_rows(c, be, w, xm, b.n2, b.rstd, b.gate, b.up, b.h, n);
    if (st == LC_OK) st = mlp_down(c, be, w, b.h, xm, xo, n);
  }
  lc_free(ar, blk);
  return st;
}

// The gradient tile's buffers (mlp_grad_bytes).
typedef struct {
  float *dh, *dn2;
  void *dg, *du;
  uint16_t *dxr;
} mlp_grad_bufs;

// Backward of rows [t0, t0+n): dx (dL/dx_out rows) becomes dL/dx_mid rows. n2/rstd/gate/up/h
// either come from forward (untiled) or are recomputed here into scratch (tiled).
static lc_status mlp_bwd_rows(const lc_layer_ctx *c, lc_backend *be, const lc_layer_weights *w, lc_layer_weights *g,
                              const float *xm, const void *n2, const float *rstd, const void *gate, const void *up,
                              const void *h, float *dx, int n, const mlp_grad_bufs *b) {
  const int C = c->cfg->dim, F = c->cfg->ffn;
  const size_t nC = (size_t)n * C, nF = (size_t)n * F, FC = (size_t)F * C;
  const lc_dtype dt = adt(c);
  // x_out = x_mid + h @ Wdown^T (bf16: the GEMM reads dx rounded into 2 bytes; dx itself
  // stays fp32)
  const lc_buf bdx = H(be, dx, nC, LC_DT_F32), bdh = H(be, b->dh, nF, LC_DT_F32), bdn2 = H(be, b->dn2, nC, LC_DT_F32);
  const lc_buf bdg = H(be, b->dg, nF, dt), bdu = H(be, b->du, nF, dt), bn2 = H(be, n2, nC, dt);
  lc_buf dout = bdx;
  if (c->bf16) {
    dout = H(be, b->dxr, nC, LC_DT_BF16);
    LC_TRY(lc_be_bf16_pack(dout, bdx));
  }
  LC_TRY(lc_be_matmul_bwd(bdh, H(be, g->wdown, FC, LC_DT_F32), dout, H(be, h, nF, dt),
                          WT(be, w->wdown, w->wdown16, FC), n, F, C, 0, c->bf16, NONE));
  poll(c);
  // h = silu(gate) * up (bf16: dg, du rounded as bf16 gradient tensors, 2 bytes)
  LC_TRY(lc_be_swiglu_bwd(bdg, bdu, bdh, H(be, gate, nF, dt), H(be, up, nF, dt)));
  // gate = n2 @ Wg^T, up = n2 @ Wu^T
  LC_TRY(lc_be_matmul_bwd(bdn2, H(be, g->wgate, FC, LC_DT_F32), bdg, bn2, WT(be, w->wgate, w->wgate16, FC), n, C, F, 0,
                          c->bf16, NONE));
  poll(c);
  LC_TRY(lc_be_matmul_bwd(bdn2, H(be, g->wup, FC, LC_DT_F32), bdu, bn2, WT(be, w->wup, w->wup16, FC), n, C, F, 1,
                          c->bf16, NONE));
  poll(c);
  // n2 = rmsnorm(x_mid): gradient added to dx (the residual path already carries dx_out)
  return lc_be_rmsnorm_bwd(bdx, H(be, g->ln2, (size_t)C, LC_DT_F32), bdn2, H(be, xm, nC, LC_DT_F32),
                           H(be, w->ln2, (size_t)C, LC_DT_F32), H(be, rstd, (size_t)n, LC_DT_F32), n, C, 0);
}

static lc_status mlp_bwd(const lc_layer_ctx *c, const lc_layer_weights *w, lc_layer_weights *g,
                         const lc_layer_acts *a, float *dx) {
  const int C = c->cfg->dim, F = c->cfg->ffn, T = c->T;
  const int tiled = mlp_tiled(c);
  const int tile = tiled ? c->mlp_tile : T;
  const lc_dtype dt = adt(c);
  lc_backend cpu, *be = layer_be(c, &cpu);
  lc_arena *ar = c->arena;
  // Gradient scratch: dh, dg, du [tile,F], dn2 [tile,C] (bf16: dx rounded); plus the
  // recompute tile when tiled.
  char *grad = lc_alloc(ar, LC_MEM_SCRATCH, mlp_grad_bytes(c->cfg, tile, c->bf16), "MLP backward tile");
  char *rec = tiled ? lc_alloc(ar, LC_MEM_SCRATCH, mlp_fwd_bytes(c->cfg, tile, dt), "MLP recompute tile") : NULL;
  if (!grad || (tiled && !rec)) {
    lc_free(ar, rec);
    lc_free(ar, grad);
    return LC_ENOMEM;
  }
  mlp_grad_bufs b;
  char *p = grad;
  b.dh = cut(&p, lc_bytes(LC_DT_F32, (size_t)tile * F));
  b.dg = cut(&p, lc_bytes(dt, (size_t)tile * F));
  b.du = cut(&p, lc_bytes(dt, (size_t)tile * F));
  b.dn2 = cut(&p, lc_bytes(LC_DT_F32, (size_t)tile * C));
  b.dxr = c->bf16 ? cut(&p, lc_bytes(LC_DT_BF16, (size_t)tile * C)) : NULL;
  lc_status st = LC_OK;
  if (!tiled) {
    st = mlp_bwd_rows(c, be, w, g, a->x_mid, a->ln2, a->rstd2, a->gate, a->up, a->h, dx, T, &b);
  } else {
    const mlp_tile_bufs r = mlp_fwd_carve(c->cfg, tile, dt, rec);
    for (int t0 = 0; t0 < T && st == LC_OK; t0 += tile) {
      int n = T - t0 < tile ? T - t0 : tile;
      const float *xm = a->x_mid + (size_t)t0 * C;
      st = mlp_fwd_rows(c, be, w, xm, r.n2, r.rstd, r.gate, r.up, r.h, n);
      if (st == LC_OK) st = mlp_bwd_rows(c, be, w, g, xm, r.n2, r.rstd, r.gate, r.up, r.h, dx + (size_t)t0 * C, n, &b);
    }
  }
  lc_free(ar, rec);
  lc_free(ar, grad);
  return st;
}

// ---------------------------------------------------------------- layer
lc_status lc_layer_fwd(const lc_layer_ctx *c, const lc_layer_weights *w, lc_layer_acts *a,
                       const float *x_in, float *x_out, int skip_attn) {
  const lc_config *cfg = c->cfg;
  const int T = c->T, C = cfg->dim, D = cfg->head_dim;
  const int HQ = cfg->n_heads * D;
  const size_t TC = (size_t)T * C;
  lc_backend cpu, *be = layer_be(c, &cpu);
  LC_TRY(lc_be_rmsnorm_fwd(H(be, a->ln1, TC, adt(c)), H(be, a->rstd1, (size_t)T, LC_DT_F32), H(be, x_in, TC, LC_DT_F32),
                           H(be, w->ln1, (size_t)C, LC_DT_F32), T, C, cfg->norm_eps));
  LC_TRY(qkv_fwd(c, w, a));
  c->attn->bf16 = c->bf16; // q, k, v, att in 2 bytes; the strategy rounds att (attn.h)
  if (!skip_attn) LC_TRY(c->attn->fwd(c->attn, a->att, a->saved, a->q, a->k, a->v, T, c->arena));
  const lc_buf xm = H(be, a->x_mid, TC, LC_DT_F32);
  LC_TRY(lc_be_matmul_fwd(xm, H(be, a->att, (size_t)T * HQ, adt(c)), WT(be, w->wo, w->wo16, (size_t)HQ * C), T, HQ, C,
                          c->bf16, NONE));
  poll(c);
  if (w->bo) LC_TRY(lc_be_bias_fwd(xm, H(be, w->bo, (size_t)C, LC_DT_F32), T, C));
  LC_TRY(lc_be_add(xm, H(be, x_in, TC, LC_DT_F32)));
  if (mlp_tiled(c)) return x_out ? mlp_fwd_tiled(c, w, a->x_mid, x_out) : LC_OK;
  LC_TRY(mlp_fwd_rows(c, be, w, a->x_mid, a->ln2, a->rstd2, a->gate, a->up, a->h, T));
  return x_out ? mlp_down(c, be, w, a->h, a->x_mid, x_out, T) : LC_OK;
}

lc_status lc_layer_bwd(const lc_layer_ctx *c, const lc_layer_weights *w, lc_layer_weights *g,
                       const lc_layer_acts *a, const float *x_in, float *dx) {
  const lc_config *cfg = c->cfg;
  const int T = c->T, C = cfg->dim, D = cfg->head_dim;
  const int HQ = cfg->n_heads * D, HKV = cfg->n_kv_heads * D;
  const size_t TC = (size_t)T * C, TQ = (size_t)T * HQ, TK = (size_t)T * HKV;
  const lc_dtype dt = adt(c);
  lc_arena *ar = c->arena;
  lc_backend cpu, *be = layer_be(c, &cpu);
  LC_TRY(mlp_bwd(c, w, g, a, dx)); // dx: dL/dx_out -> dL/dx_mid

  // Attention half (attn_bwd_bytes): the dout area, dq [T,HQ], dk, dv [T,HKV]; bf16: the fp32
  // datt and dn1 in blocks of their own.
  const int b16 = c->bf16;
  char *scr = lc_alloc(ar, LC_MEM_SCRATCH, attn_bwd_bytes(cfg, T, b16), "attention backward buffers");
  if (!scr) return LC_ENOMEM;
  char *p = scr;
  void *dbuf = cut(&p, lc_bytes(b16 ? LC_DT_BF16 : LC_DT_F32, datt_floats(cfg, T)));
  float *dq = cut(&p, lc_bytes(LC_DT_F32, (size_t)T * HQ)), *dk = cut(&p, lc_bytes(LC_DT_F32, (size_t)T * HKV)),
        *dv = cut(&p, lc_bytes(LC_DT_F32, (size_t)T * HKV));
  uint16_t *dxr = b16 ? dbuf : NULL;
  float *datt = b16 ? lc_alloc(ar, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, (size_t)T * HQ), "attention output gradient (fp32)")
                    : dbuf;
  float *dn1 = b16 ? NULL : dbuf;
  if (!datt) {
    lc_free(ar, scr);
    return LC_ENOMEM;
  }
  // x_mid = x_in + att @ Wo^T (bf16: the GEMM reads dx rounded into 2 bytes; datt is
  // rounded as a bf16 gradient tensor would be, into dx's 2-byte space once that is read,
  // and is what the attention backward reads)
  const lc_buf bdx = H(be, dx, TC, LC_DT_F32), dout = b16 ? H(be, dxr, TC, LC_DT_BF16) : bdx;
  lc_status st = b16 ? lc_be_bf16_pack(dout, bdx) : LC_OK;
  if (st == LC_OK)
    st = lc_be_matmul_bwd(H(be, datt, TQ, LC_DT_F32), H(be, g->wo, (size_t)HQ * C, LC_DT_F32), dout,
                          H(be, a->att, TQ, dt), WT(be, w->wo, w->wo16, (size_t)HQ * C), T, HQ, C, 0, b16, NONE);
  const void *dat = datt;
  if (st == LC_OK) {
    poll(c);
    if (g->bo) st = lc_be_bias_bwd(H(be, g->bo, (size_t)C, LC_DT_F32), dout, T, C);
    if (st == LC_OK && b16) // dx rounded is read by now
      st = lc_be_bf16_pack(H(be, dxr, TQ, LC_DT_BF16), H(be, datt, TQ, LC_DT_F32)), dat = dxr;
  }
  if (b16) lc_free(ar, datt); // bf16: dead before the strategy's backward
  if (st == LC_OK) st = c->attn->bwd(c->attn, dq, dk, dv, dat, a->att, a->saved, a->q, a->k, a->v, T, ar);
  const int qn = cfg->qk_norm;
  if (st == LC_OK) st = proj_bwd(c, be, dq, qn ? a->qp : NULL, a->rstdq, w->q_norm, g->q_norm, g->bq, cfg->n_heads, 1);
  if (st == LC_OK) st = proj_bwd(c, be, dk, qn ? a->kp : NULL, a->rstdk, w->k_norm, g->k_norm, g->bk, cfg->n_kv_heads, 1);
  if (st == LC_OK) st = proj_bwd(c, be, dv, NULL, NULL, NULL, NULL, g->bv, cfg->n_kv_heads, 0);
  if (st == LC_OK && b16 && !(dn1 = lc_alloc(ar, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, TC), "n1 gradient (fp32)")))
    st = LC_ENOMEM;
  const lc_buf bdn1 = H(be, dn1, TC, LC_DT_F32), ln1 = H(be, a->ln1, TC, dt);
  if (st == LC_OK)
    st = lc_be_matmul_bwd(bdn1, H(be, g->wq, (size_t)HQ * C, LC_DT_F32), H(be, dq, TQ, LC_DT_F32), ln1,
                          WT(be, w->wq, w->wq16, (size_t)HQ * C), T, C, HQ, 0, b16, NONE);
  if (st == LC_OK) {
    poll(c);
    st = lc_be_matmul_bwd(bdn1, H(be, g->wk, (size_t)HKV * C, LC_DT_F32), H(be, dk, TK, LC_DT_F32), ln1,
                          WT(be, w->wk, w->wk16, (size_t)HKV * C), T, C, HKV, 1, b16, NONE);
  }
  if (st == LC_OK) {
    poll(c);
    st = lc_be_matmul_bwd(bdn1, H(be, g->wv, (size_t)HKV * C, LC_DT_F32), H(be, dv, TK, LC_DT_F32), ln1,
                          WT(be, w->wv, w->wv16, (size_t)HKV * C), T, C, HKV, 1, b16, NONE);
  }
  if (st == LC_OK) {
    poll(c);
    st = lc_be_rmsnorm_bwd(bdx, H(be, g->ln1, (size_t)C, LC_DT_F32), bdn1, H(be, x_in, TC, LC_DT_F32),
                           H(be, w->ln1, (size_t)C, LC_DT_F32), H(be, a->rstd1, (size_t)T, LC_DT_F32), T, C,
                           0); // dx: -> dL/dx_in
  }
  if (b16) lc_free(ar, dn1);
  lc_free(ar, scr);
  return st;
}
