// One decoder layer's forward and backward on this rank's tokens, every op through the
// backend; the attention through the pass's strategy and its inputs (layer.h).
#include "model/layer.h"

#include <string.h>

#include "backend/backend.h"
#include "core/dtype.h"
#include "backend/scratch.h"

static int mlp_tiled(const lc_layer_ctx *c) { return lc_tile_splits(c->mlp_tile, c->T); }

static void poll(const lc_layer_ctx *c) {
  if (c->poll) c->poll(c->poll_arg);
}

static lc_dtype adt(const lc_layer_ctx *c) { return lc_layer_act_dt(c->bf16); }

static const lc_buf NONE = {0};

// Scratch blocks are the backend's (category scratch), carved into typed parts 64 bytes
// apart (the sizes below count the same).
#define AL64(n) (((size_t)(n) + 63) & ~(size_t)63)
static lc_status block(const lc_layer_ctx *c, size_t bytes, const char *what, lc_buf_carver *k) {
  k->at = 0;
  return lc_buf_alloc(c->be, LC_MEM_SCRATCH, LC_DT_U8, bytes, 0, what, &k->blk);
}
// Rows [t0, t0 + n) of a [T, width] buffer.
static lc_buf rows(lc_buf b, int t0, int n, size_t width) { return lc_buf_view(b, (size_t)t0 * width, (size_t)n * width); }

// Buffer sizes in bytes (n rows), shared by the allocations and lc_layer_mem_bytes.
// MLP forward tile: n2 [n,C], rstd [n], gate, up, h [n,F] (n2 and gate/up/h in the act dtype).
static size_t mlp_fwd_bytes(const lc_config *cfg, int n, lc_dtype dt) {
  return AL64(lc_bytes(dt, (size_t)n * cfg->dim)) + AL64(lc_bytes(LC_DT_F32, (size_t)n)) +
         3 * AL64(lc_bytes(dt, (size_t)n * cfg->ffn));
}
typedef struct {
  lc_buf n2, gate, up, h, rstd;
} mlp_tile_bufs;
static mlp_tile_bufs mlp_fwd_carve(const lc_config *cfg, int n, lc_dtype dt, lc_buf_carver *k) {
  mlp_tile_bufs b;
  b.n2 = lc_buf_cut(k, (size_t)n * cfg->dim, dt);
  b.rstd = lc_buf_cut(k, (size_t)n, LC_DT_F32);
  b.gate = lc_buf_cut(k, (size_t)n * cfg->ffn, dt);
  b.up = lc_buf_cut(k, (size_t)n * cfg->ffn, dt);
  b.h = lc_buf_cut(k, (size_t)n * cfg->ffn, dt);
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
// dq lives in x_mid's storage when it fits (HQ <= C): the MLP half of backward is the last
// reader of x_mid (its norm's input), so during the attention half that fp32 [T,C] is free.
static int dq_in_xmid(const lc_config *cfg) { return cfg->n_heads * cfg->head_dim <= cfg->dim; }
// bf16: the dout area (2 bytes [T, max(HQ, C)]) lives in ln1's storage when it fits (HQ <= C:
// ln1 is [T, C] in 2 bytes). ln1's next reader is the q/k/v weight gradients after the
// strategy's backward, so it is recomputed then (the same call as forward: the same bits).
static int dout_in_ln1(const lc_config *cfg, int bf16) { return bf16 && cfg->n_heads * cfg->head_dim <= cfg->dim; }
// dk, dv (fp32 [T,HKV] each) live in q's storage ([T,HQ] in the act dtype) when the strategy
// has read its token-layout q, k, v before it writes them (lc_attn.dkv_late) and they fit.
static size_t dkv_bytes(const lc_config *cfg, int T) { return AL64(lc_bytes(LC_DT_F32, (size_t)T * cfg->n_kv_heads * cfg->head_dim)); }
static int dkv_in_q(const lc_config *cfg, int T, int bf16, int late) {
  return late && 2 * dkv_bytes(cfg, T) <= lc_bytes(lc_layer_act_dt(bf16), (size_t)T * cfg->n_heads * cfg->head_dim);
}
static size_t attn_bwd_parts(const lc_config *cfg, int T, int bf16, int late, lc_mem_parts *ps) {
  size_t HQ = (size_t)cfg->n_heads * cfg->head_dim, HKV = (size_t)cfg->n_kv_heads * cfg->head_dim;
  const int S = LC_MEM_SCRATCH;
  return lc_mem_part_add(ps, bf16 ? "layer bwd: dout area (dx, then datt, rounded; in ln1 when HQ <= C)" : "layer bwd: dout area (datt, then dn1)", S,
                         dout_in_ln1(cfg, bf16) ? 0 : AL64(lc_bytes(bf16 ? LC_DT_BF16 : LC_DT_F32, datt_floats(cfg, T)))) +
         lc_mem_part_add(ps, "layer bwd: dq (token layout, fp32)", S,
                         dq_in_xmid(cfg) ? 0 : AL64(lc_bytes(LC_DT_F32, (size_t)T * HQ))) +
         lc_mem_part_add(ps, "layer bwd: dk, dv (token layout, fp32; in q when the strategy allows)", S,
                         dkv_in_q(cfg, T, bf16, late) ? 0 : 2 * AL64(lc_bytes(LC_DT_F32, (size_t)T * HKV)));
}
static size_t attn_bwd_bytes(const lc_config *cfg, int T, int bf16, int late) { return attn_bwd_parts(cfg, T, bf16, late, NULL); }
// bf16: the fp32 projection q, k or v is computed in before RoPE and rounding (T*HQ floats).
static size_t proj_tmp_bytes(const lc_config *cfg, int T, int bf16) {
  return bf16 ? lc_bytes(LC_DT_F32, (size_t)T * cfg->n_heads * cfg->head_dim) : 0;
}

static size_t max3(size_t a, size_t b, size_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

// The adapter of target i's call at its GEMM's moment (0 when i has none).
static size_t lora_fwd_b(const lc_config *cfg, int i, int bf16, lc_dtype y, lc_dtype x, int T, int K, int N) {
  return cfg->lora.rank > 0 && (cfg->lora.targets >> i & 1u)
             ? lc_lora_fwd_bytes(cfg->lora.rank, bf16, cfg->lora.dropout > 0, y, x, T, K, N)
             : 0;
}
static size_t lora_bwd_b(const lc_config *cfg, int i, int bf16, lc_dtype dy, lc_dtype x, int T, int K, int N) {
  return cfg->lora.rank > 0 && (cfg->lora.targets >> i & 1u)
             ? lc_lora_bwd_bytes(cfg->lora.rank, bf16, cfg->lora.dropout > 0, dy, x, T, K, N)
             : 0;
}

// The weights of projection j across the layers: bit 0 some held dense (the pass's act
// dtype: the store's compute copy), bit 1 some in quantized blocks (cfg->base_q, QLoRA).
static int proj_held(const lc_config *cfg, int j) {
  if (!lc_config_base_quant(cfg)) return 1;
  int k = 0;
  for (int l = 0; l < cfg->n_layers && l < LC_MAX_LAYERS; l++) k |= cfg->base_q[l][j] ? 2 : 1;
  return k;
}
// Projection j's GEMM scratch, the largest over the ways its weights are held (a quantized
// W's is the same for every block type: a tile dequantized to fp32, backend/cpu/gemm/matmul.c).
static size_t mm_fwd(const lc_config *cfg, int j, int bf16, lc_dtype o, lc_dtype x, lc_dtype dt, int T, int K, int N) {
  const int k = proj_held(cfg, j);
  const size_t a = k & 1 ? lc_scratch_matmul_fwd(bf16, o, x, dt, T, K, N) : 0;
  const size_t b = k & 2 ? lc_scratch_matmul_fwd(bf16, o, x, LC_DT_Q8_0, T, K, N) : 0;
  return a > b ? a : b;
}
static size_t mm_bwd(const lc_config *cfg, int j, int bf16, lc_dtype d, lc_dtype x, lc_dtype dt, int T, int K, int N) {
  const int k = proj_held(cfg, j);
  const size_t a = k & 1 ? lc_scratch_matmul_bwd(bf16, d, x, dt, T, K, N) : 0;
  const size_t b = k & 2 ? lc_scratch_matmul_bwd(bf16, d, x, LC_DT_Q8_0, T, K, N) : 0;
  return a > b ? a : b;
}

void lc_layer_mem_bytes(const lc_config *cfg, int T, int mlp_tile, int bf16, int dkv_late, lc_layer_mem *m) {
  const int tiled = lc_tile_splits(mlp_tile, T), tile = tiled ? mlp_tile : T;
  const int C = cfg->dim, F = cfg->ffn, HQ = cfg->n_heads * cfg->head_dim, HKV = cfg->n_kv_heads * cfg->head_dim;
  const lc_dtype dt = lc_layer_act_dt(bf16), f32 = LC_DT_F32;
  // The GEMMs' scratch (lc_matmul_*_bytes: operand packing, widening or an output chunk,
  // by the operands' dtypes) is on top of what is live when they run; the largest of each
  // phase counts. Backward's dout operand is dx rounded (act dtype) or, for q/k/v, dq/dk/dv;
  // the weights are the store's compute copy (act dtype: 2 bytes in a bf16 pass).
  // LoRA: each adapter's call at its projection's GEMM (model/lora_op.h).
  const size_t lg_f = max3(lora_fwd_b(cfg, LC_LORA_GATE, bf16, dt, dt, tile, C, F), lora_fwd_b(cfg, LC_LORA_UP, bf16, dt, dt, tile, C, F), 0);
  const size_t ld_f = lora_fwd_b(cfg, LC_LORA_DOWN, bf16, f32, dt, tile, F, C);
  const size_t lg_b = max3(lora_bwd_b(cfg, LC_LORA_GATE, bf16, dt, dt, tile, C, F), lora_bwd_b(cfg, LC_LORA_UP, bf16, dt, dt, tile, C, F), 0);
  const size_t ld_b = lora_bwd_b(cfg, LC_LORA_DOWN, bf16, dt, dt, tile, F, C);
  const size_t mlp_fwd_mm = max3(max3(max3(mm_fwd(cfg, LC_LORA_GATE, bf16, dt, dt, dt, tile, C, F), mm_fwd(cfg, LC_LORA_UP, bf16, dt, dt, dt, tile, C, F), 0), mm_fwd(cfg, LC_LORA_DOWN, bf16, f32, dt, dt, tile, F, C), 0),
                                 lg_f, ld_f);
  const size_t mlp_bwd_mm = max3(max3(tiled ? max3(mm_fwd(cfg, LC_LORA_GATE, bf16, dt, dt, dt, tile, C, F), mm_fwd(cfg, LC_LORA_UP, bf16, dt, dt, dt, tile, C, F), 0) : 0, tiled ? lg_f : 0, 0),
                                 max3(mm_bwd(cfg, LC_LORA_DOWN, bf16, dt, dt, dt, tile, F, C), ld_b, 0),
                                 max3(max3(mm_bwd(cfg, LC_LORA_GATE, bf16, dt, dt, dt, tile, C, F), mm_bwd(cfg, LC_LORA_UP, bf16, dt, dt, dt, tile, C, F), 0), lg_b, 0));
  memset(m, 0, sizeof *m);
  const int S = LC_MEM_SCRATCH;
  m->mlp_fwd = lc_mem_part_add(&m->mlp_fwd_parts, "MLP tile (norm, rstd, gate, up, h)", S, tiled ? mlp_fwd_bytes(cfg, tile, dt) : 0) +
               lc_mem_part_add(&m->mlp_fwd_parts, "MLP GEMM operand packing", S, mlp_fwd_mm);
  m->mlp_bwd = lc_mem_part_add(&m->mlp_bwd_parts, "MLP backward tile (dh, dg, du, dn2)", S, mlp_grad_bytes(cfg, tile, bf16)) +
               lc_mem_part_add(&m->mlp_bwd_parts, "MLP recompute tile", S, tiled ? mlp_fwd_bytes(cfg, tile, dt) : 0) +
               lc_mem_part_add(&m->mlp_bwd_parts, "MLP GEMM operand packing", S, mlp_bwd_mm);
  m->attn_bwd = attn_bwd_parts(cfg, T, bf16, dkv_late, &m->attn_bwd_parts);
  const size_t lqkv_f = max3(lora_fwd_b(cfg, LC_LORA_Q, bf16, f32, dt, T, C, HQ), lora_fwd_b(cfg, LC_LORA_K, bf16, f32, dt, T, C, HKV),
                             lora_fwd_b(cfg, LC_LORA_V, bf16, f32, dt, T, C, HKV));
  const size_t proj_mm = proj_tmp_bytes(cfg, T, bf16) + max3(mm_fwd(cfg, LC_LORA_Q, bf16, f32, dt, dt, T, C, HQ),
                                                                max3(mm_fwd(cfg, LC_LORA_K, bf16, f32, dt, dt, T, C, HKV), mm_fwd(cfg, LC_LORA_V, bf16, f32, dt, dt, T, C, HKV), 0), lqkv_f);
  m->attn_fwd_mm = max3(proj_mm, mm_fwd(cfg, LC_LORA_O, bf16, f32, dt, dt, T, HQ, C), lora_fwd_b(cfg, LC_LORA_O, bf16, f32, dt, T, HQ, C));
  lc_mem_part_add(&m->attn_fwd_mm_parts, "projection GEMMs: fp32 q/k/v before rounding, operand packing", S, m->attn_fwd_mm);
  const size_t datt32 = bf16 ? lc_bytes(f32, (size_t)T * HQ) : 0, dn1 = bf16 ? lc_bytes(f32, (size_t)T * C) : 0;
  m->attn_bwd_mm = m->attn_bwd + max3(datt32 + max3(mm_bwd(cfg, LC_LORA_O, bf16, dt, dt, dt, T, HQ, C),
                                                    lora_bwd_b(cfg, LC_LORA_O, bf16, dt, dt, T, HQ, C), 0),
                                      dn1 + max3(mm_bwd(cfg, LC_LORA_Q, bf16, f32, dt, dt, T, C, HQ),
                                                 lora_bwd_b(cfg, LC_LORA_Q, bf16, f32, dt, T, C, HQ), 0),
                                      dn1 + max3(max3(mm_bwd(cfg, LC_LORA_K, bf16, f32, dt, dt, T, C, HKV), mm_bwd(cfg, LC_LORA_V, bf16, f32, dt, dt, T, C, HKV), 0),
                                                 lora_bwd_b(cfg, LC_LORA_K, bf16, f32, dt, T, C, HKV),
                                                 lora_bwd_b(cfg, LC_LORA_V, bf16, f32, dt, T, C, HKV)));
  lc_mem_parts_append(&m->attn_bwd_mm_parts, &m->attn_bwd_parts, NULL);
  lc_mem_part_add(&m->attn_bwd_mm_parts, "projection GEMMs' backward: fp32 datt or dn1, operand packing", S,
                  m->attn_bwd_mm - m->attn_bwd);
}

#define PAD16(n) (((size_t)(n) + 15) & ~(size_t)15)

size_t lc_layer_qknorm_floats(const lc_config *cfg, int T) {
  if (!cfg->qk_norm) return 0;
  const size_t t = (size_t)T;
  return PAD16(t * cfg->n_heads * cfg->head_dim) + PAD16(t * cfg->n_kv_heads * cfg->head_dim) + PAD16(t * cfg->n_heads) +
         PAD16(t * cfg->n_kv_heads);
}

void lc_layer_qknorm_carve(lc_layer_acts *a, const lc_config *cfg, int T, lc_buf p) {
  a->qp = a->kp = a->rstdq = a->rstdk = NONE;
  if (!cfg->qk_norm || !lc_buf_ok(p)) return;
  const size_t t = (size_t)T, nq = t * cfg->n_heads * cfg->head_dim, nk = t * cfg->n_kv_heads * cfg->head_dim;
  size_t at = 0;
  a->qp = lc_buf_view(p, at, nq);
  a->kp = lc_buf_view(p, at += PAD16(nq), nk);
  a->rstdq = lc_buf_view(p, at += PAD16(nk), t * cfg->n_heads);
  a->rstdk = lc_buf_view(p, at + PAD16(t * cfg->n_heads), t * cfg->n_kv_heads);
}

// ---------------------------------------------------------------- attention projections
// One projection of n1 [T,C] into out [T,N] (+ bias); qk_norm: the raw projection is kept
// in raw and out is its per-head RMSNorm (rows of D) with weight nw.
static lc_status proj_fwd(const lc_layer_ctx *c, lc_buf out, lc_buf n1, lc_buf w, lc_buf b, lc_buf raw, lc_buf rstd,
                          lc_buf nw, int N, int proj, lc_buf la, lc_buf lb) {
  const int T = c->T, C = c->cfg->dim, D = c->cfg->head_dim;
  const lc_buf y = lc_buf_ok(raw) ? raw : out;
  LC_TRY(lc_be_matmul_fwd(y, n1, w, T, C, N, c->bf16, NONE));
  poll(c);
  if (lc_buf_ok(b)) LC_TRY(lc_be_bias_fwd(y, b, T, N));
  LC_TRY(lc_lora_fwd(&c->lora, proj, 0, y, n1, la, lb, T, C, N)); // (after the bias, as PEFT adds it to the base layer's output)
  if (lc_buf_ok(raw)) {
    if (c->bf16) LC_TRY(lc_be_bf16_round(y)); // what a bf16 projection output holds
    LC_TRY(lc_be_rmsnorm_fwd(out, rstd, y, nw, T * (N / D), D, c->cfg->norm_eps));
  }
  return LC_OK;
}

// The gradient of the rotated (and normed) projection dy [T,N] back to the projection
// output, in place: through the rotation, then the per-head norm (its weight's gradient
// into gnw); rounded as a bf16 gradient tensor; the bias gradient from it.
static lc_status proj_bwd(const lc_layer_ctx *c, lc_buf d, lc_buf raw, lc_buf rstd, lc_buf nw, lc_buf gnw, lc_buf gb,
                          int Hn, int rope) {
  const int T = c->T, D = c->cfg->head_dim;
  if (rope) LC_TRY(lc_be_rope(d, c->rope_cos, c->rope_sin, T, Hn, D, 1));
  if (lc_buf_ok(raw)) LC_TRY(lc_be_rmsnorm_bwd(d, gnw, d, raw, nw, rstd, T * Hn, D, 1));
  if (c->bf16) LC_TRY(lc_be_bf16_round(d));
  return lc_buf_ok(gb) ? lc_be_bias_bwd(gb, d, T, Hn * D) : LC_OK;
}

// q, k and v of n1: each projected in fp32 (into its slot in fp32; bf16: a scratch block),
// RoPE'd (q, k), and in bf16 rounded into its 2-byte slot (the values a bf16 tensor holds).
static lc_status qkv_fwd(const lc_layer_ctx *c, const lc_layer_weights *w, lc_layer_acts *a) {
  const lc_config *cfg = c->cfg;
  const int T = c->T, D = cfg->head_dim, qn = cfg->qk_norm;
  lc_buf tmp = NONE;
  if (c->bf16)
    LC_TRY(lc_buf_alloc(c->be, LC_MEM_SCRATCH, LC_DT_U8, proj_tmp_bytes(cfg, T, 1), 0, "q/k/v projection (fp32)", &tmp));
  const struct {
    lc_buf dst, w, b, nw, raw, rstd;
    int H, lora;
  } p[3] = {{a->q, w->wq, w->bq, w->q_norm, qn ? a->qp : NONE, a->rstdq, cfg->n_heads, LC_LORA_Q},
            {a->k, w->wk, w->bk, w->k_norm, qn ? a->kp : NONE, a->rstdk, cfg->n_kv_heads, LC_LORA_K},
            {a->v, w->wv, w->bv, NONE, NONE, NONE, cfg->n_kv_heads, LC_LORA_V}};
  lc_status st = LC_OK;
  for (int m = 0; m < 3 && st == LC_OK; m++) {
    const size_t n = (size_t)T * p[m].H * D;
    const lc_buf y = c->bf16 ? lc_buf_part(tmp, 0, n, LC_DT_F32) : p[m].dst;
    st = proj_fwd(c, y, a->ln1, p[m].w, p[m].b, p[m].raw, p[m].rstd, p[m].nw, p[m].H * D, p[m].lora, w->lora_a[p[m].lora],
                  w->lora_b[p[m].lora]);
    if (st == LC_OK && m < 2) st = lc_be_rope(y, c->rope_cos, c->rope_sin, T, p[m].H, D, 0);
    if (st == LC_OK && c->bf16) st = lc_be_bf16_pack(p[m].dst, y); // rounds to nearest even
  }
  lc_buf_free(&tmp);
  return st;
}

// ---------------------------------------------------------------- MLP
// n rows of x_mid -> n2 = rmsnorm2, gate, up, h = silu(gate) * up (the parts backward
// reads; all but rstd in the act dtype).
static lc_status mlp_fwd_rows(const lc_layer_ctx *c, const lc_layer_weights *w, lc_buf xm, const mlp_tile_bufs *b,
                              int t0, int n) {
  const int C = c->cfg->dim, F = c->cfg->ffn;
  LC_TRY(lc_be_rmsnorm_fwd(b->n2, b->rstd, xm, w->ln2, n, C, c->cfg->norm_eps));
  LC_TRY(lc_be_matmul_fwd(b->gate, b->n2, w->wgate, n, C, F, c->bf16, NONE));
  LC_TRY(lc_lora_fwd(&c->lora, LC_LORA_GATE, t0, b->gate, b->n2, w->lora_a[LC_LORA_GATE], w->lora_b[LC_LORA_GATE], n, C, F));
  poll(c);
  LC_TRY(lc_be_matmul_fwd(b->up, b->n2, w->wup, n, C, F, c->bf16, NONE));
  LC_TRY(lc_lora_fwd(&c->lora, LC_LORA_UP, t0, b->up, b->n2, w->lora_a[LC_LORA_UP], w->lora_b[LC_LORA_UP], n, C, F));
  poll(c);
  return lc_be_swiglu_fwd(b->h, b->gate, b->up);
}

// x_out rows = x_mid rows + h @ Wdown^T (bf16: the sum rounded as a bf16 tensor holds it).
static lc_status mlp_down(const lc_layer_ctx *c, const lc_layer_weights *w, lc_buf h, lc_buf xm, lc_buf xo, int t0,
                          int n) {
  const int C = c->cfg->dim, F = c->cfg->ffn;
  LC_TRY(lc_be_matmul_fwd(xo, h, w->wdown, n, F, C, c->bf16, NONE));
  LC_TRY(lc_lora_fwd(&c->lora, LC_LORA_DOWN, t0, xo, h, w->lora_a[LC_LORA_DOWN], w->lora_b[LC_LORA_DOWN], n, F, C));
  poll(c);
  LC_TRY(lc_be_add(xo, xm));
  return c->bf16 ? lc_be_bf16_round(xo) : LC_OK;
}

// A tile of n rows of the MLP's buffers (the first n rows of each).
static mlp_tile_bufs tile_rows(const mlp_tile_bufs *b, const lc_config *cfg, int n) {
  const mlp_tile_bufs r = {.n2 = rows(b->n2, 0, n, (size_t)cfg->dim), .gate = rows(b->gate, 0, n, (size_t)cfg->ffn),
                           .up = rows(b->up, 0, n, (size_t)cfg->ffn), .h = rows(b->h, 0, n, (size_t)cfg->ffn),
                           .rstd = rows(b->rstd, 0, n, 1)};
  return r;
}

// Forward over tiles: rows [t0, t0+n) of x_mid -> x_out (one tile's buffers: mlp_fwd_bytes).
static lc_status mlp_fwd_tiled(const lc_layer_ctx *c, const lc_layer_weights *w, lc_buf x_mid, lc_buf x_out) {
  const int C = c->cfg->dim, tile = c->mlp_tile;
  lc_buf_carver k;
  LC_TRY(block(c, mlp_fwd_bytes(c->cfg, tile, adt(c)), "MLP tile", &k));
  const mlp_tile_bufs b = mlp_fwd_carve(c->cfg, tile, adt(c), &k);
  lc_status st = LC_OK;
  for (int t0 = 0; t0 < c->T && st == LC_OK; t0 += tile) {
    const int n = c->T - t0 < tile ? c->T - t0 : tile;
    const lc_buf xm = rows(x_mid, t0, n, (size_t)C);
    const mlp_tile_bufs r = tile_rows(&b, c->cfg, n);
    st = mlp_fwd_rows(c, w, xm, &r, t0, n);
    if (st == LC_OK) st = mlp_down(c, w, r.h, xm, rows(x_out, t0, n, (size_t)C), t0, n);
  }
  lc_buf_free(&k.blk);
  return st;
}

// The gradient tile's buffers (mlp_grad_bytes).
typedef struct {
  lc_buf dh, dn2, dg, du, dxr;
} mlp_grad_bufs;

// Backward of n rows: dx (dL/dx_out rows) becomes dL/dx_mid rows. f's n2/rstd/gate/up/h
// either come from forward (untiled) or are recomputed here into scratch (tiled).
static lc_status mlp_bwd_rows(const lc_layer_ctx *c, const lc_layer_weights *w, lc_layer_weights *g, lc_buf xm,
                              const mlp_tile_bufs *f, lc_buf dx, int t0, int n, const mlp_grad_bufs *gb) {
  const int C = c->cfg->dim, F = c->cfg->ffn;
  const size_t nC = (size_t)n * C, nF = (size_t)n * F;
  const lc_buf dh = lc_buf_view(gb->dh, 0, nF), dn2 = lc_buf_view(gb->dn2, 0, nC), dg = lc_buf_view(gb->dg, 0, nF),
               du = lc_buf_view(gb->du, 0, nF);
  // x_out = x_mid + h @ Wdown^T (bf16: the GEMM reads dx rounded into 2 bytes; dx itself
  // stays fp32)
  lc_buf dout = dx;
  if (c->bf16) {
    dout = lc_buf_view(gb->dxr, 0, nC);
    LC_TRY(lc_be_bf16_pack(dout, dx));
  }
  LC_TRY(lc_be_matmul_bwd(dh, g->wdown, dout, f->h, w->wdown, n, F, C, 0, c->bf16, NONE));
  LC_TRY(lc_lora_bwd(&c->lora, LC_LORA_DOWN, t0, dh, g->lora_a[LC_LORA_DOWN], g->lora_b[LC_LORA_DOWN], dout, f->h, w->lora_a[LC_LORA_DOWN],
                     w->lora_b[LC_LORA_DOWN], n, F, C));
  poll(c);
  // h = silu(gate) * up (bf16: dg, du rounded as bf16 gradient tensors, 2 bytes)
  LC_TRY(lc_be_swiglu_bwd(dg, du, dh, f->gate, f->up));
  // gate = n2 @ Wg^T, up = n2 @ Wu^T
  LC_TRY(lc_be_matmul_bwd(dn2, g->wgate, dg, f->n2, w->wgate, n, C, F, 0, c->bf16, NONE));
  LC_TRY(lc_lora_bwd(&c->lora, LC_LORA_GATE, t0, dn2, g->lora_a[LC_LORA_GATE], g->lora_b[LC_LORA_GATE], dg, f->n2, w->lora_a[LC_LORA_GATE],
                     w->lora_b[LC_LORA_GATE], n, C, F));
  poll(c);
  LC_TRY(lc_be_matmul_bwd(dn2, g->wup, du, f->n2, w->wup, n, C, F, 1, c->bf16, NONE));
  LC_TRY(lc_lora_bwd(&c->lora, LC_LORA_UP, t0, dn2, g->lora_a[LC_LORA_UP], g->lora_b[LC_LORA_UP], du, f->n2, w->lora_a[LC_LORA_UP],
                     w->lora_b[LC_LORA_UP], n, C, F));
  poll(c);
  // n2 = rmsnorm(x_mid): gradient added to dx (the residual path already carries dx_out)
  return lc_be_rmsnorm_bwd(dx, g->ln2, dn2, xm, w->ln2, f->rstd, n, C, 0);
}

static lc_status mlp_bwd(const lc_layer_ctx *c, const lc_layer_weights *w, lc_layer_weights *g,
                         const lc_layer_acts *a, lc_buf dx) {
  const int C = c->cfg->dim, F = c->cfg->ffn, T = c->T;
  const int tiled = mlp_tiled(c);
  const int tile = tiled ? c->mlp_tile : T;
  const lc_dtype dt = adt(c);
  // Gradient scratch: dh, dg, du [tile,F], dn2 [tile,C] (bf16: dx rounded); plus the
  // recompute tile when tiled.
  lc_buf_carver kg, kr = {{0}, 0};
  LC_TRY(block(c, mlp_grad_bytes(c->cfg, tile, c->bf16), "MLP backward tile", &kg));
  lc_status st = tiled ? block(c, mlp_fwd_bytes(c->cfg, tile, dt), "MLP recompute tile", &kr) : LC_OK;
  if (st != LC_OK) {
    lc_buf_free(&kg.blk);
    return st;
  }
  mlp_grad_bufs b;
  b.dh = lc_buf_cut(&kg, (size_t)tile * F, LC_DT_F32);
  b.dg = lc_buf_cut(&kg, (size_t)tile * F, dt);
  b.du = lc_buf_cut(&kg, (size_t)tile * F, dt);
  b.dn2 = lc_buf_cut(&kg, (size_t)tile * C, LC_DT_F32);
  b.dxr = c->bf16 ? lc_buf_cut(&kg, (size_t)tile * C, LC_DT_BF16) : NONE;
  if (!tiled) {
    const mlp_tile_bufs f = {.n2 = a->ln2, .rstd = a->rstd2, .gate = a->gate, .up = a->up, .h = a->h};
    st = mlp_bwd_rows(c, w, g, a->x_mid, &f, dx, 0, T, &b);
  } else {
    const mlp_tile_bufs r = mlp_fwd_carve(c->cfg, tile, dt, &kr);
    for (int t0 = 0; t0 < T && st == LC_OK; t0 += tile) {
      const int n = T - t0 < tile ? T - t0 : tile;
      const lc_buf xm = rows(a->x_mid, t0, n, (size_t)C);
      const mlp_tile_bufs f = tile_rows(&r, c->cfg, n);
      st = mlp_fwd_rows(c, w, xm, &f, t0, n);
      if (st == LC_OK) st = mlp_bwd_rows(c, w, g, xm, &f, rows(dx, t0, n, (size_t)C), t0, n, &b);
    }
  }
  lc_buf_free(&kr.blk);
  lc_buf_free(&kg.blk);
  return st;
}

// ---------------------------------------------------------------- layer
// The adapter of projection i (q, k or v of n1 [T,C] -> [T,N]) in backward.
static lc_status lora_bwd_proj(const lc_layer_ctx *c, const lc_layer_weights *w, lc_layer_weights *g, int i, lc_buf dn1,
                               lc_buf dy, lc_buf n1, int N) {
  return lc_lora_bwd(&c->lora, i, 0, dn1, g->lora_a[i], g->lora_b[i], dy, n1, w->lora_a[i], w->lora_b[i], c->T,
                     c->cfg->dim, N);
}

lc_status lc_layer_fwd(const lc_layer_ctx *c, const lc_layer_weights *w, lc_layer_acts *a, lc_buf x_in, lc_buf x_out,
                       int skip_attn) {
  const lc_config *cfg = c->cfg;
  const int T = c->T, C = cfg->dim, D = cfg->head_dim;
  const int HQ = cfg->n_heads * D;
  LC_TRY(lc_be_rmsnorm_fwd(a->ln1, a->rstd1, x_in, w->ln1, T, C, cfg->norm_eps));
  LC_TRY(qkv_fwd(c, w, a));
  c->attn->be = c->be; // (q, k, v, att in 2 bytes in bf16: c->attn_in->bf16 == c->bf16)
  if (!skip_attn) LC_TRY(c->attn->fwd(c->attn, c->attn_in, a->att, a->saved, a->q, a->k, a->v, T));
  LC_TRY(lc_be_matmul_fwd(a->x_mid, a->att, w->wo, T, HQ, C, c->bf16, NONE));
  poll(c);
  if (lc_buf_ok(w->bo)) LC_TRY(lc_be_bias_fwd(a->x_mid, w->bo, T, C));
  LC_TRY(lc_lora_fwd(&c->lora, LC_LORA_O, 0, a->x_mid, a->att, w->lora_a[LC_LORA_O], w->lora_b[LC_LORA_O], T, HQ, C));
  LC_TRY(lc_be_add(a->x_mid, x_in));
  if (mlp_tiled(c)) return lc_buf_ok(x_out) ? mlp_fwd_tiled(c, w, a->x_mid, x_out) : LC_OK;
  const mlp_tile_bufs f = {.n2 = a->ln2, .rstd = a->rstd2, .gate = a->gate, .up = a->up, .h = a->h};
  LC_TRY(mlp_fwd_rows(c, w, a->x_mid, &f, 0, T));
  return lc_buf_ok(x_out) ? mlp_down(c, w, a->h, a->x_mid, x_out, 0, T) : LC_OK;
}

lc_status lc_layer_bwd(const lc_layer_ctx *c, const lc_layer_weights *w, lc_layer_weights *g, const lc_layer_acts *a,
                       lc_buf x_in, lc_buf dx) {
  const lc_config *cfg = c->cfg;
  const int T = c->T, C = cfg->dim, D = cfg->head_dim;
  const int HQ = cfg->n_heads * D, HKV = cfg->n_kv_heads * D;
  const size_t TC = (size_t)T * C, TQ = (size_t)T * HQ, TK = (size_t)T * HKV;
  LC_TRY(mlp_bwd(c, w, g, a, dx)); // dx: dL/dx_out -> dL/dx_mid

  // Attention half (attn_bwd_bytes): the dout area (bf16: in ln1 when it fits, dout_in_ln1),
  // dq [T,HQ] (in x_mid, dead by now, when it fits: dq_in_xmid), dk, dv [T,HKV]; bf16: the
  // fp32 datt and dn1 in blocks of their own.
  const int b16 = c->bf16, in_ln1 = dout_in_ln1(cfg, b16), in_q = dkv_in_q(cfg, T, b16, c->attn->dkv_late);
  lc_buf_carver k;
  LC_TRY(block(c, attn_bwd_bytes(cfg, T, b16, c->attn->dkv_late), "attention backward buffers", &k));
  const lc_buf dbuf = in_ln1 ? lc_buf_view(a->ln1, 0, datt_floats(cfg, T))
                             : lc_buf_cut(&k, datt_floats(cfg, T), b16 ? LC_DT_BF16 : LC_DT_F32);
  const lc_buf dq = dq_in_xmid(cfg) ? lc_buf_view(a->x_mid, 0, TQ) : lc_buf_cut(&k, TQ, LC_DT_F32);
  lc_buf_carver kq = {a->q, 0}; // (in_q: dk, dv in q's storage, read by then)
  const lc_buf dk = lc_buf_cut(in_q ? &kq : &k, TK, LC_DT_F32), dv = lc_buf_cut(in_q ? &kq : &k, TK, LC_DT_F32);
  lc_buf datt = NONE, dn1 = NONE;
  if (b16) {
    const lc_status s0 = lc_buf_alloc(c->be, LC_MEM_SCRATCH, LC_DT_F32, TQ, 0, "attention output gradient (fp32)", &datt);
    if (s0 != LC_OK) {
      lc_buf_free(&k.blk);
      return s0;
    }
  } else {
    datt = lc_buf_view(dbuf, 0, TQ);
  }
  // x_mid = x_in + att @ Wo^T (bf16: the GEMM reads dx rounded into 2 bytes; datt is
  // rounded as a bf16 gradient tensor would be, into dx's 2-byte space once that is read,
  // and is what the attention backward reads)
  const lc_buf dout = b16 ? lc_buf_view(dbuf, 0, TC) : dx;
  lc_status st = b16 ? lc_be_bf16_pack(dout, dx) : LC_OK;
  if (st == LC_OK) st = lc_be_matmul_bwd(datt, g->wo, dout, a->att, w->wo, T, HQ, C, 0, b16, NONE);
  if (st == LC_OK)
    st = lc_lora_bwd(&c->lora, LC_LORA_O, 0, datt, g->lora_a[LC_LORA_O], g->lora_b[LC_LORA_O], dout, a->att, w->lora_a[LC_LORA_O],
                     w->lora_b[LC_LORA_O], T, HQ, C);
  lc_buf dat = datt;
  if (st == LC_OK) {
    poll(c);
    if (lc_buf_ok(g->bo)) st = lc_be_bias_bwd(g->bo, dout, T, C);
    if (st == LC_OK && b16) { // dx rounded is read by now
      dat = lc_buf_view(dbuf, 0, TQ);
      st = lc_be_bf16_pack(dat, datt);
    }
  }
  if (b16) lc_buf_free(&datt); // bf16: dead before the strategy's backward
  if (st == LC_OK) st = c->attn->bwd(c->attn, c->attn_in, dq, dk, dv, dat, a->att, a->saved, a->q, a->k, a->v, T);
  const int qn = cfg->qk_norm;
  if (st == LC_OK) st = proj_bwd(c, dq, qn ? a->qp : NONE, a->rstdq, w->q_norm, g->q_norm, g->bq, cfg->n_heads, 1);
  if (st == LC_OK) st = proj_bwd(c, dk, qn ? a->kp : NONE, a->rstdk, w->k_norm, g->k_norm, g->bk, cfg->n_kv_heads, 1);
  if (st == LC_OK) st = proj_bwd(c, dv, NONE, NONE, NONE, NONE, g->bv, cfg->n_kv_heads, 0);
  // ln1 back where the dout area was (the forward's call: the same values and rstd1)
  if (st == LC_OK && in_ln1) st = lc_be_rmsnorm_fwd(a->ln1, a->rstd1, x_in, w->ln1, T, C, cfg->norm_eps);
  if (st == LC_OK && b16) st = lc_buf_alloc(c->be, LC_MEM_SCRATCH, LC_DT_F32, TC, 0, "n1 gradient (fp32)", &dn1);
  if (!b16) dn1 = lc_buf_view(dbuf, 0, TC);
  if (st == LC_OK) st = lc_be_matmul_bwd(dn1, g->wq, dq, a->ln1, w->wq, T, C, HQ, 0, b16, NONE);
  if (st == LC_OK) st = lora_bwd_proj(c, w, g, LC_LORA_Q, dn1, dq, a->ln1, HQ);
  if (st == LC_OK) {
    poll(c);
    st = lc_be_matmul_bwd(dn1, g->wk, dk, a->ln1, w->wk, T, C, HKV, 1, b16, NONE);
  }
  if (st == LC_OK) st = lora_bwd_proj(c, w, g, LC_LORA_K, dn1, dk, a->ln1, HKV);
  if (st == LC_OK) {
    poll(c);
    st = lc_be_matmul_bwd(dn1, g->wv, dv, a->ln1, w->wv, T, C, HKV, 1, b16, NONE);
  }
  if (st == LC_OK) st = lora_bwd_proj(c, w, g, LC_LORA_V, dn1, dv, a->ln1, HKV);
  if (st == LC_OK) {
    poll(c);
    st = lc_be_rmsnorm_bwd(dx, g->ln1, dn1, x_in, w->ln1, a->rstd1, T, C, 0); // dx: -> dL/dx_in
  }
  if (b16) lc_buf_free(&dn1);
  lc_buf_free(&k.blk);
  return st;
}
