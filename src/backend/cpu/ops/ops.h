// Element-wise and BLAS-backed operators of the Llama layer. Each forward has its
// backward beside it (in the op's own .c file). Layout: row-major, T = tokens,
// C = model dim, row t of an [T, X] matrix starts at t*X. Backward functions
// ACCUMULATE (+=) into parameter gradients; for input gradients the comment says.
#ifndef LC_OPS_H
#define LC_OPS_H

#include <stddef.h>

#include "core/arena.h"
#include "core/dtype.h"
#include "core/status.h"

// ---- matmul.c: linear layer with the HF weight layout W[N, K] ----
// The pass's GEMM precision. NULL or bf16 0: OpenBLAS sgemm. bf16 1 (every operand holds
// bf16 values, layer.h) and the kernel table has gemm_bf16: the table's bf16 GEMM with
// fp32 accumulation; operands stored as bf16 are read in place, those in fp32 slots and
// the weights are packed to 2 bytes (exact) into arena scratch (LC_MEM_SCRATCH,
// lc_matmul_*_bytes).
typedef struct {
  int bf16;
  lc_arena *arena;
  // Optional: scratch the caller holds for the calls (at least lc_matmul_*_bytes of each),
  // used instead of allocating; so a caller that skips some calls (the loss, for rows with
  // no label) still holds the same bytes whatever its data.
  void *scratch;
  size_t scratch_bytes;
} lc_mm;
// An activation operand: rows of fp32 values, or of bf16 values stored in 2 bytes (what a
// bf16 pass keeps for its GEMMs: model/layer.h).
typedef struct {
  const void *p;
  lc_dtype dt; // LC_DT_F32 or LC_DT_BF16
} lc_act;
static inline lc_act lc_act_f32(const float *p) { return (lc_act){p, LC_DT_F32}; }
static inline lc_act lc_act_of(const void *p, lc_dtype dt) { return (lc_act){p, dt}; }
// out[T,N] = inp[T,K] @ W[N,K]^T; out holds fp32, or bf16 (rounded to nearest even) when
// out_dt is LC_DT_BF16. Operands in bf16 need mm's arena (scratch) on every path.
// LC_ENOMEM when the arena refuses the scratch.
// W is an lc_act too: fp32, the store's 2-byte compute copy of a decoder layer, or ggml's
// blocks (a quantized frozen base: dequantized tile by tile into scratch, so mm needs an
// arena or scratch on every path; K a multiple of the block).
lc_status lc_matmul_fwd(const lc_mm *mm, void *out, lc_dtype out_dt, lc_act inp, lc_act w, int T, int K, int N);
// The same adding the product to out (accumulate 1; the same scratch as lc_matmul_fwd).
lc_status lc_matmul_fwd_acc(const lc_mm *mm, void *out, lc_dtype out_dt, lc_act inp, lc_act w, int T, int K, int N,
                            int accumulate);
// dinp[T,K] = (accumulate ? dinp + : ) dout[T,N] @ W ; dw[N,K] += dout^T @ inp.
// Either dinp or dw may be NULL to skip it; dw must be NULL for a W in blocks (LC_EINVAL).
lc_status lc_matmul_bwd(const lc_mm *mm, float *dinp, float *dw, lc_act dout, lc_act inp, lc_act w, int T, int K,
                        int N, int accumulate);
// Arena bytes (scratch) one call allocates (0: sgemm on fp32 operands, nothing allocated),
// for the memory model: nondecreasing in T.
size_t lc_matmul_fwd_bytes(int bf16, lc_dtype out_dt, lc_dtype in_dt, lc_dtype w_dt, int T, int K, int N);
size_t lc_matmul_bwd_bytes(int bf16, lc_dtype dout_dt, lc_dtype in_dt, lc_dtype w_dt, int T, int K, int N);

// ---- rmsnorm.c (HF LlamaRMSNorm) ----
// rstd[t] = 1/sqrt(mean_c(inp[t,c]^2) + eps); out[t,c] = inp[t,c] * rstd[t] * w[c]
void lc_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *w, int T, int C,
                    float eps);
// The same with out in out_dt: fp32 (lc_rmsnorm_fwd), or bf16 (each value rounded to
// nearest even from the fp32 result: a bf16 pass's norm outputs, 2 bytes each), and inp in
// in_dt: fp32, or bf16 (a bf16 pass's layer input read from its checkpoint; the bits of its
// widened fp32 copy).
void lc_rmsnorm_fwd_to(void *out, lc_dtype out_dt, float *rstd, const void *inp, lc_dtype in_dt, const float *w, int T,
                       int C, float eps);
// dinp[T,C] += d/dinp ; dw[C] += d/dw   (rstd from the forward)
void lc_rmsnorm_bwd(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                    const float *rstd, int T, int C);

// The same with dinp OVERWRITTEN (dinp may be dout: in place).
void lc_rmsnorm_bwd_set(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                        const float *rstd, int T, int C);
// Either of the two (set: overwrite) with inp in in_dt: fp32, or bf16 (the bits of its widened
// fp32 copy).
void lc_rmsnorm_bwd_in(float *dinp, float *dw, const float *dout, const void *inp, lc_dtype in_dt, const float *w,
                       const float *rstd, int T, int C, int set);

// ---- bias.c: the bias of a linear layer ----
// y[T,N] += b[N] on every row
void lc_bias_fwd(float *y, const float *b, int T, int N);
// db[N] += sum over rows of dy[T,N] (per-column order t ascending, whatever the threads)
void lc_bias_bwd(float *db, const float *dy, int T, int N);
// The same over bf16 rows (the same sums as lc_bias_bwd of the widened values).
void lc_bias_bwd_bf16(float *db, const uint16_t *dy, int T, int N);

// ---- rope.c (HF rotate-half convention; frequencies and tables in core/rope.h) ----
// x[T,H,D] rotated in place: for i < D/2, (a, b) = (x[i], x[i+D/2]):
// x[i] = a*cos - b*sin ; x[i+D/2] = b*cos + a*sin
void lc_rope_fwd(float *x, const float *cos_t, const float *sin_t, int T, int H, int D);
// dx[T,H,D] in place: gradient through the rotation (the inverse rotation).
void lc_rope_bwd(float *dx, const float *cos_t, const float *sin_t, int T, int H, int D);

// ---- swiglu.c: h = silu(g) * u over n elements ----
void lc_swiglu_fwd(float *h, const float *g, const float *u, size_t n);
// dg, du OVERWRITTEN (may not alias dh)
void lc_swiglu_bwd(float *dg, float *du, const float *dh, const float *g, const float *u,
                   size_t n);
// bf16 operands in 2 bytes (a bf16 pass): the same fp32 arithmetic on the widened values,
// each result rounded to bf16 (h, and the gradients dg, du the GEMMs read).
void lc_swiglu_fwd_bf16(uint16_t *h, const uint16_t *g, const uint16_t *u, size_t n);
void lc_swiglu_bwd_bf16(uint16_t *dg, uint16_t *du, const float *dh, const uint16_t *g, const uint16_t *u, size_t n);

// ---- embedding.c ----
// out[T,C] = wte[tokens[t], :]  (tokens already validated to be in [0, V))
void lc_embedding_fwd(float *out, const int *tokens, const float *wte, int T, int C);
// The same from a 2-byte bf16 table (a bf16 pass's compute copy), rows widened exactly.
void lc_embedding_fwd_bf16(float *out, const int *tokens, const uint16_t *wte, int T, int C);
// dwte[V,C] += scatter of dout rows
void lc_embedding_bwd(float *dwte, const float *dout, const int *tokens, int T, int C);
// The same on rows [r0, r1) of the table (a vocabulary slice: wte and dwte hold those rows
// only; tokens outside them are left alone); wte fp32 or 2-byte bf16 (dt), widened exactly.
// The full-table forms are these with r0 = 0 and every row.
void lc_embedding_fwd_rows(float *out, const int *tokens, const void *wte, lc_dtype dt, int T, int C, int r0, int r1);
void lc_embedding_bwd_rows(float *dwte, const float *dout, const int *tokens, int T, int C, int r0, int r1);

// ---- crossentropy.c: fused softmax cross-entropy forward + backward ----
// For each row t with targets[t] >= 0: loss_t = logsumexp(logits[t,:]) - logits[t,target].
// Returns sum_t loss_t (double). logits is REPLACED by dlogits = scale*(softmax - onehot) on
// counted rows and 0 on ignored rows (targets[t] < 0, e.g. -100).
double lc_xent_fwd_bwd(float *logits, const int *targets, int T, int V, float scale);
// The loss tile's accumulators: acc[0] += the rows' loss sum; acc[1] (count_wrong) +=
// counted rows whose first maximal logit is not the target (found before the logits
// become dlogits).
void lc_xent_tile(float *logits, const int *targets, int T, int V, float scale, double *acc, int count_wrong);
// The loss over vocabulary slices (model/loss.h): per-token statistics in one block of
// lc_xent_stats_bytes(T) (running log-sum-exp sum and max, target logit, best logit and
// its index), initialised, merged with the logits [m, vs] of tokens t0.. against
// vocabulary rows v0.., and summed into acc as lc_xent_tile does; then each slice's
// logits become dlogits = scale * softmax - scale * onehot with the final statistics.
size_t lc_xent_stats_bytes(int T);
void lc_xent_stats_init(void *stats, int T);
void lc_xent_slice_merge(void *stats, int T, const float *logits, const int *targets, int t0, int m, int v0, int vs);
void lc_xent_slice_total(const void *stats, const int *targets, int T, double *acc, int count_wrong);
void lc_xent_slice_dlogits(float *logits, const void *stats, int T, const int *targets, int t0, int m, int v0, int vs,
                           float scale);

// ---- elementwise helpers (elementwise.c) ----
void lc_add_inplace(float *y, const float *x, size_t n); // y += x

#endif
