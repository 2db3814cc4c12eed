#include "model/lora_op.h"

#include "backend/backend.h"
#include "model/config.h"
#include "core/dropout_hash.h"
#include "backend/scratch.h"

#define AL64(n) (((size_t)(n) + 63) & ~(size_t)63)

static lc_dtype wdt(int bf16) { return bf16 ? LC_DT_BF16 : LC_DT_F32; }

// u (or du) [T,R]: fp32, and in a bf16 pass its 2-byte copy after it.
static size_t pair_bytes(int R, int bf16, int T) {
  const size_t n = (size_t)T * R;
  return AL64(lc_bytes(LC_DT_F32, n)) + (bf16 ? AL64(lc_bytes(LC_DT_BF16, n)) : 0);
}
typedef struct {
  lc_buf f32, op; // op: what the next GEMM reads (the 2-byte copy in a bf16 pass, else f32)
} pair;
static pair cut_pair(lc_buf_carver *k, int R, int bf16, int T) {
  const size_t n = (size_t)T * R;
  pair p;
  p.f32 = lc_buf_cut(k, n, LC_DT_F32);
  p.op = bf16 ? lc_buf_cut(k, n, LC_DT_BF16) : p.f32;
  return p;
}

static size_t mx(size_t a, size_t b) { return a > b ? a : b; }
static int drop_chunk = LC_LORA_DROP_ROWS;
void lc_lora_test_set_drop_rows(int n) { drop_chunk = n > 0 ? n : LC_LORA_DROP_ROWS; }
static int drop_rows(int T) { return T < drop_chunk ? T : drop_chunk; }

size_t lc_lora_fwd_bytes(int R, int bf16, int drop, lc_dtype y_dt, lc_dtype x_dt, int T, int K, int N) {
  if (R <= 0) return 0;
  const lc_dtype w = wdt(bf16), u = bf16 ? LC_DT_BF16 : LC_DT_F32;
  const int Tx = drop ? drop_rows(T) : T; // the rows one x A^T product takes
  return pair_bytes(R, bf16, T) + (drop ? AL64(lc_bytes(x_dt, (size_t)Tx * K)) : 0) +
         mx(lc_scratch_matmul_fwd(bf16, LC_DT_F32, x_dt, w, Tx, K, R), lc_scratch_matmul_fwd(bf16, y_dt, u, w, T, R, N));
}

size_t lc_lora_bwd_bytes(int R, int bf16, int drop, lc_dtype dy_dt, lc_dtype x_dt, int T, int K, int N) {
  if (R <= 0) return 0;
  const lc_dtype w = wdt(bf16), u = bf16 ? LC_DT_BF16 : LC_DT_F32;
  const int Tx = drop ? drop_rows(T) : T;
  const size_t mm = mx(lc_scratch_matmul_fwd(bf16, LC_DT_F32, x_dt, w, Tx, K, R),
                       mx(lc_scratch_matmul_bwd(bf16, dy_dt, u, w, T, R, N), lc_scratch_matmul_bwd(bf16, u, x_dt, w, Tx, K, R)));
  return 2 * pair_bytes(R, bf16, T) +
         (drop ? AL64(lc_bytes(x_dt, (size_t)Tx * K)) + AL64(lc_bytes(LC_DT_F32, (size_t)Tx * K)) : 0) + mm;
}

// The call's scale: s, or s / (1 - p) with dropout (nn.Dropout's 1/(1-p), folded in).
static float scale_of(const lc_lora_ctx *c) { return c->drop_thr ? c->s / (1.0f - c->drop_p) : c->s; }

// Dropout's part of a call: the mask's key, the rows' indices and the chunk of x o m.
typedef struct {
  uint64_t key;
  lc_buf rows; // the call's rows' indices (a view from row0)
  lc_buf xd;   // [Tx, K] in x's dtype
  lc_buf dxd;  // [Tx, K] fp32 (backward)
  int Tx;
} drop;

// u = s x A^T into p (and its 2-byte copy); with dropout x o m a chunk of rows at a time.
static lc_status down(const lc_lora_ctx *c, const drop *d, pair p, lc_buf x, lc_buf A, int T, int K) {
  if (!c->drop_thr) {
    LC_TRY(lc_be_matmul_fwd(p.f32, x, A, T, K, c->R, c->bf16, (lc_buf){0}));
  } else {
    for (int t0 = 0; t0 < T; t0 += d->Tx) {
      const int n = T - t0 < d->Tx ? T - t0 : d->Tx;
      const lc_buf xd = lc_buf_view(d->xd, 0, (size_t)n * K);
      LC_TRY(lc_be_dropout(xd, lc_buf_view(x, (size_t)t0 * K, (size_t)n * K), n, K, lc_buf_view(d->rows, (size_t)t0, (size_t)n),
                           d->key, c->drop_thr, 0));
      LC_TRY(lc_be_matmul_fwd(lc_buf_view(p.f32, (size_t)t0 * c->R, (size_t)n * c->R), xd, A, n, K, c->R, c->bf16,
                              (lc_buf){0}));
    }
  }
  LC_TRY(lc_be_scale(p.f32, scale_of(c)));
  return c->bf16 ? lc_be_bf16_pack(p.op, p.f32) : LC_OK;
}

// Dropout's buffers for a call of T rows from row0, cut after the pairs; nothing without it.
static drop drop_of(const lc_lora_ctx *c, lc_buf_carver *k, int proj, int row0, lc_dtype x_dt, int T, int K, int bwd) {
  drop d = {0};
  if (!c->drop_thr) return d;
  d.key = lc_dropout_key(c->drop_key, c->layer, proj);
  d.rows = lc_buf_view(c->drop_rows, (size_t)row0, (size_t)T);
  d.Tx = drop_rows(T);
  d.xd = lc_buf_cut(k, (size_t)d.Tx * K, x_dt);
  if (bwd) d.dxd = lc_buf_cut(k, (size_t)d.Tx * K, LC_DT_F32);
  return d;
}
static size_t drop_bytes(const lc_lora_ctx *c, lc_dtype x_dt, int T, int K, int bwd) {
  if (!c->drop_thr) return 0;
  const size_t n = (size_t)drop_rows(T) * K;
  return AL64(lc_bytes(x_dt, n)) + (bwd ? AL64(lc_bytes(LC_DT_F32, n)) : 0);
}

lc_status lc_lora_fwd(const lc_lora_ctx *c, int proj, int row0, lc_buf y, lc_buf x, lc_buf A, lc_buf B, int T, int K,
                      int N) {
  if (!lc_buf_ok(A) || T <= 0) return LC_OK;
  lc_buf_carver k = {{0}, 0};
  LC_TRY(lc_buf_alloc(c->be, LC_MEM_SCRATCH, LC_DT_U8, pair_bytes(c->R, c->bf16, T) + drop_bytes(c, x.dt, T, K, 0), 0,
                      "LoRA activations", &k.blk));
  const pair u = cut_pair(&k, c->R, c->bf16, T);
  const drop d = drop_of(c, &k, proj, row0, x.dt, T, K, 0);
  lc_status st = down(c, &d, u, x, A, T, K);
  if (st == LC_OK) st = lc_be_matmul_fwd_acc(y, u.op, B, T, c->R, N, c->bf16, (lc_buf){0});
  lc_buf_free(&k.blk);
  return st;
}

lc_status lc_lora_bwd(const lc_lora_ctx *c, int proj, int row0, lc_buf dx, lc_buf gA, lc_buf gB, lc_buf dy, lc_buf x,
                      lc_buf A, lc_buf B, int T, int K, int N) {
  if (!lc_buf_ok(A) || T <= 0) return LC_OK;
  lc_buf_carver k = {{0}, 0};
  LC_TRY(lc_buf_alloc(c->be, LC_MEM_SCRATCH, LC_DT_U8, 2 * pair_bytes(c->R, c->bf16, T) + drop_bytes(c, x.dt, T, K, 1),
                      0, "LoRA backward", &k.blk));
  const pair u = cut_pair(&k, c->R, c->bf16, T), du = cut_pair(&k, c->R, c->bf16, T);
  const drop d = drop_of(c, &k, proj, row0, x.dt, T, K, 1);
  lc_status st = down(c, &d, u, x, A, T, K);
  // y += u B^T: du = dy B, gB += dy^T u
  if (st == LC_OK) st = lc_be_matmul_bwd(du.f32, gB, dy, u.op, B, T, c->R, N, 0, c->bf16, (lc_buf){0});
  // u = s x A^T: the gradient through the scale, then dx += du A, gA += du^T x
  if (st == LC_OK) st = lc_be_scale(du.f32, scale_of(c));
  if (st == LC_OK && c->bf16) st = lc_be_bf16_pack(du.op, du.f32);
  if (st == LC_OK && !c->drop_thr) st = lc_be_matmul_bwd(dx, gA, du.op, x, A, T, K, c->R, 1, c->bf16, (lc_buf){0});
  // With dropout, per chunk: xd = x o m again, gA += du^T xd, dxd = du A, dx += dxd o m.
  for (int t0 = 0; c->drop_thr && st == LC_OK && t0 < T; t0 += d.Tx) {
    const int n = T - t0 < d.Tx ? T - t0 : d.Tx;
    const size_t nk = (size_t)n * K;
    const lc_buf rows = lc_buf_view(d.rows, (size_t)t0, (size_t)n), xd = lc_buf_view(d.xd, 0, nk),
                 dxd = lc_buf_view(d.dxd, 0, nk);
    st = lc_be_dropout(xd, lc_buf_view(x, (size_t)t0 * K, nk), n, K, rows, d.key, c->drop_thr, 0);
    if (st == LC_OK)
      st = lc_be_matmul_bwd(dxd, gA, lc_buf_view(du.op, (size_t)t0 * c->R, (size_t)n * c->R), xd, A, n, K, c->R, 0,
                            c->bf16, (lc_buf){0});
    if (st == LC_OK) st = lc_be_dropout(lc_buf_view(dx, (size_t)t0 * K, nk), dxd, n, K, rows, d.key, c->drop_thr, 1);
  }
  lc_buf_free(&k.blk);
  return st;
}
