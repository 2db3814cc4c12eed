#include "model/lora_op.h"

#include "backend/backend.h"
#include "ops/ops.h"

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

size_t lc_lora_fwd_bytes(int R, int bf16, lc_dtype y_dt, lc_dtype x_dt, int T, int K, int N) {
  if (R <= 0) return 0;
  const lc_dtype w = wdt(bf16), u = bf16 ? LC_DT_BF16 : LC_DT_F32;
  return pair_bytes(R, bf16, T) +
         mx(lc_matmul_fwd_bytes(bf16, LC_DT_F32, x_dt, w, T, K, R), lc_matmul_fwd_bytes(bf16, y_dt, u, w, T, R, N));
}

size_t lc_lora_bwd_bytes(int R, int bf16, lc_dtype dy_dt, lc_dtype x_dt, int T, int K, int N) {
  if (R <= 0) return 0;
  const lc_dtype w = wdt(bf16), u = bf16 ? LC_DT_BF16 : LC_DT_F32;
  const size_t mm = mx(lc_matmul_fwd_bytes(bf16, LC_DT_F32, x_dt, w, T, K, R),
                       mx(lc_matmul_bwd_bytes(bf16, dy_dt, u, w, T, R, N), lc_matmul_bwd_bytes(bf16, u, x_dt, w, T, K, R)));
  return 2 * pair_bytes(R, bf16, T) + mm;
}

// u = s x A^T into p (and its 2-byte copy).
static lc_status down(const lc_lora_ctx *c, pair p, lc_buf x, lc_buf A, int T, int K) {
  LC_TRY(lc_be_matmul_fwd(p.f32, x, A, T, K, c->R, c->bf16, (lc_buf){0}));
  LC_TRY(lc_be_scale(p.f32, c->s));
  return c->bf16 ? lc_be_bf16_pack(p.op, p.f32) : LC_OK;
}

lc_status lc_lora_fwd(const lc_lora_ctx *c, lc_buf y, lc_buf x, lc_buf A, lc_buf B, int T, int K, int N) {
  if (!lc_buf_ok(A) || T <= 0) return LC_OK;
  lc_buf_carver k = {{0}, 0};
  LC_TRY(lc_buf_alloc(c->be, LC_MEM_SCRATCH, LC_DT_U8, pair_bytes(c->R, c->bf16, T), 0, "LoRA activations", &k.blk));
  const pair u = cut_pair(&k, c->R, c->bf16, T);
  lc_status st = down(c, u, x, A, T, K);
  if (st == LC_OK) st = lc_be_matmul_fwd_acc(y, u.op, B, T, c->R, N, c->bf16, (lc_buf){0});
  lc_buf_free(&k.blk);
  return st;
}

lc_status lc_lora_bwd(const lc_lora_ctx *c, lc_buf dx, lc_buf gA, lc_buf gB, lc_buf dy, lc_buf x, lc_buf A, lc_buf B,
                      int T, int K, int N) {
  if (!lc_buf_ok(A) || T <= 0) return LC_OK;
  lc_buf_carver k = {{0}, 0};
  LC_TRY(lc_buf_alloc(c->be, LC_MEM_SCRATCH, LC_DT_U8, 2 * pair_bytes(c->R, c->bf16, T), 0, "LoRA backward", &k.blk));
  const pair u = cut_pair(&k, c->R, c->bf16, T), du = cut_pair(&k, c->R, c->bf16, T);
  lc_status st = down(c, u, x, A, T, K);
  // y += u B^T: du = dy B, gB += dy^T u
  if (st == LC_OK) st = lc_be_matmul_bwd(du.f32, gB, dy, u.op, B, T, c->R, N, 0, c->bf16, (lc_buf){0});
  // u = s x A^T: the gradient through the scale, then dx += du A, gA += du^T x
  if (st == LC_OK) st = lc_be_scale(du.f32, c->s);
  if (st == LC_OK && c->bf16) st = lc_be_bf16_pack(du.op, du.f32);
  if (st == LC_OK) st = lc_be_matmul_bwd(dx, gA, du.op, x, A, T, K, c->R, 1, c->bf16, (lc_buf){0});
  lc_buf_free(&k.blk);
  return st;
}
