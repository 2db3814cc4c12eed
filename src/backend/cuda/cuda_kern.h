// The CUDA backend's kernels (src/backend/cuda/*.cu), as C entry points on raw device
// pointers and a stream. cuda_backend.c resolves lc_buf handles to these pointers and calls
// them; nothing here knows about lc_buf, the arena or the kernel table, so the .cu files
// compile on their own (nvcc, sm_80 and sm_90).
//
// Every entry computes what the CPU reference named beside it computes (the same formula,
// the same rounding points to bf16, the same handling of empty / skipped operands); only
// the order of floating-point sums may differ, and every sum is in a fixed order that does
// not depend on timing: no float atomics anywhere, so two runs give the same bits.
// Element counts are elements of the operand's dtype; "bf16" arrays are uint16_t holding
// bfloat16 bits; rounding to bf16 is round-to-nearest-even (NaN kept quiet), as
// lc_bf16_pack (core/dtype.h and backend/cpu/kern/kernels.h).
//
// Each entry returns the launch's cudaError_t as an int (0: launched; errors of earlier
// asynchronous work surface at the next synchronisation, as CUDA does).
#ifndef LC_CUDA_KERN_H
#define LC_CUDA_KERN_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- casts (core/dtype.h and backend/cpu/kern/kernels.h: lc_bf16_pack / lc_bf16_unpack / lc_bf16_round)
int lcc_bf16_pack(uint16_t *dst, const float *src, size_t n, cudaStream_t st);
int lcc_bf16_unpack(float *dst, const uint16_t *src, size_t n, cudaStream_t st);
int lcc_bf16_round(float *x, size_t n, cudaStream_t st);
// Strided casts for the GEMM's operands: rows x cols, row strides in elements.
int lcc_bf16_pack2d(uint16_t *dst, size_t ldd, const float *src, size_t lds, size_t rows, size_t cols, cudaStream_t st);
int lcc_bf16_unpack2d(float *dst, size_t ldd, const uint16_t *src, size_t lds, size_t rows, size_t cols,
                      cudaStream_t st);

// ---- flat fp32 ranges (backend/cpu/kern/kernels.h entries add, scale, sumsq, adamw)
int lcc_add(float *y, const void *x, int x16, size_t n, cudaStream_t st); // y += x (x16: x bf16, widened)
int lcc_scale(float *x, size_t n, float s, cudaStream_t st);             // x *= s
int lcc_fill(float *x, size_t n, float v, cudaStream_t st);              // x[i] = v
// dst[r * ld_dst + i] += src[r * ld_src + i], r < rows, i < n
int lcc_add2d(float *dst, size_t ld_dst, const float *src, size_t ld_src, size_t rows, size_t n, cudaStream_t st);
// *acc (one double on the device) += sum of x[i]^2, each square and the sums in double, in
// a fixed order: LCC_SUMSQ_PARTS partial sums (part j sums a fixed range of i) into
// `parts` (LCC_SUMSQ_PARTS doubles of device scratch the caller holds), then one thread
// adds them in order j = 0, 1, ... onto *acc.
#define LCC_SUMSQ_PARTS 1024
int lcc_sumsq_acc(double *acc, const float *x, size_t n, double *parts, cudaStream_t st);
// One AdamW step over n elements (the kernel table's adamw: the same formula, in fp32, in
// the same order of operations per element).
int lcc_adamw(float *p, const float *g, float *m, float *v, size_t n, float wd, float beta1, float beta2, float eps,
              float lr, float step_size, float inv_sqrt_bc2, cudaStream_t st);

// ---- RMSNorm (backend/cpu/ops/ops.h: lc_rmsnorm_fwd_to, lc_rmsnorm_bwd, lc_rmsnorm_bwd_set)
// out [T,C]: fp32 (out16 = 0) or bf16 (out16 = 1, each value rounded); rstd [T]; w fp32; x
// fp32, or bf16 (x16 = 1: widened exactly, the bits of the widened fp32 copy).
int lcc_rmsnorm_fwd(void *out, int out16, float *rstd, const void *x, int x16, const float *w, int T, int C, float eps,
                    cudaStream_t st);
// dinp [T,C] += (set = 0) or = (set = 1) the input gradient (dinp may equal dout);
// dw [C] += the weight gradient, NULL: skipped. dw's sum over the T rows in a fixed order:
// `parts` is device scratch of lcc_rmsnorm_bwd_parts_bytes(T, C) bytes (NULL when dw is).
size_t lcc_rmsnorm_bwd_parts_bytes(int T, int C);
// inp as x of the forward (in16: bf16).
int lcc_rmsnorm_bwd(float *dinp, float *dw, const float *dout, const void *inp, int in16, const float *w,
                    const float *rstd, int T, int C, int set, void *parts, cudaStream_t st);

// ---- RoPE in place on x [T,H,D] fp32 with tables cos/sin [T, D/2] (backend/cpu/ops/ops.h lc_rope_fwd,
// lc_rope_bwd: the same pairing of dimensions)
int lcc_rope(float *x, const float *cos_t, const float *sin_t, int T, int H, int D, int bwd, cudaStream_t st);

// ---- SwiGLU h = silu(g) * u over n elements (lc_swiglu_fwd / _bwd, and the _bf16 forms:
// bf16 = 1: h, g, u, dg, du are bf16 and each result is rounded as the CPU rounds it; dh
// is fp32 in both)
int lcc_swiglu_fwd(void *h, const void *g, const void *u, size_t n, int bf16, cudaStream_t st);
int lcc_swiglu_bwd(void *dg, void *du, const float *dh, const void *g, const void *u, size_t n, int bf16,
                   cudaStream_t st);

// ---- bias (lc_bias_fwd: y [T,N] += b [N]; lc_bias_bwd / lc_bias_bwd_bf16: db [N] += the
// sum over T rows of dy, dy fp32 or bf16 (dy16); the sum over rows in a fixed order)
int lcc_bias_fwd(float *y, const float *b, int T, int N, cudaStream_t st);
int lcc_bias_bwd(float *db, const void *dy, int dy16, int T, int N, cudaStream_t st);

// ---- embedding over table rows [r0, r1) (lc_embedding_fwd_rows / lc_embedding_bwd_rows):
// out [T,C] fp32 = row tokens[t] - r0 of wte (fp32, or bf16 when wte16, widened) for tokens
// in [r0, r1), other rows of out left alone; dwte [(r1-r0), C] += dout [T,C] rows of the
// tokens in range, each table row's sum over t in increasing t (deterministic).
int lcc_embedding_fwd(float *out, const int *tokens, const void *wte, int wte16, int T, int C, int r0, int r1,
                      cudaStream_t st);
int lcc_embedding_bwd(float *dwte, const float *dout, const int *tokens, int T, int C, int r0, int r1, cudaStream_t st);

// ---- the loss tile (backend/cpu/ops/ops.h: lc_xent_tile, lc_xent_stats_init, lc_xent_slice_merge,
// lc_xent_slice_total, lc_xent_slice_dlogits). logits fp32 [rows, V or vs], targets int32,
// acc two doubles on the device (loss sum, misses), stats device memory of
// lc_xent_stats_bytes(T) = T * 24 bytes (layout: this file's own). Each kernel's sums in a
// fixed order.
// (the tile's per-row results wait in `scratch`, lcc_xent_tile_scratch_bytes(T) of device
// memory, for one ordered sum)
size_t lcc_xent_tile_scratch_bytes(int T);
int lcc_xent_tile(float *logits, const int *targets, int T, int V, float scale, double *acc, int count_wrong,
                  void *scratch, cudaStream_t st);
int lcc_xent_stats_init(void *stats, int T, cudaStream_t st);
int lcc_xent_slice_merge(void *stats, int T, const float *logits, const int *targets, int t0, int m, int v0, int vs,
                         cudaStream_t st);
int lcc_xent_slice_total(const void *stats, const int *targets, int T, double *acc, int count_wrong, cudaStream_t st);
int lcc_xent_slice_dlogits(float *logits, const void *stats, int T, const int *targets, int t0, int m, int v0, int vs,
                           float scale, cudaStream_t st);

// ---- flash attention on one (q block, k/v block) pair (backend/cpu/flash/flash.h: lc_flash_fwd,
// lc_flash_bwd, lc_attn_merge, lc_attn_delta / lc_attn_delta16). The shape mirrors
// lc_attn_shape with device pointers:
typedef struct {
  int Tq, Tk;            // rows of q and of k/v
  int Hq, Hkv, D;        // heads (q head h uses kv head h / (Hq / Hkv)); D = 64 or 128 on the tensor-core path
  long q_start, k_start; // global positions of q row 0 and k row 0 (causal: key pos > query pos hidden)
  int causal;
  float scale;
  const int *lo;         // device int32 [Tq]: the global position of row i's first visible key; NULL: none
  int bf16;              // products on bf16 values: P and dS rounded to bf16 before their products (as the CPU's
                         // bf16 kernel); softmax state, LSE and every sum fp32
  int q16, kv16;         // q (and dout in backward) / k and v stored as bf16 (values exact), else fp32
  int out16;             // forward: out stored as bf16 (rounded as written), else fp32
} lcc_attn;
// Device workspace bytes a call needs (0 allowed); the backend allocates it per call.
size_t lcc_flash_workspace_bytes(const lcc_attn *s, int bwd);
// out [Tq,Hq,D], lse [Hq,Tq] (natural log); a row that sees no key: out 0, lse -INFINITY.
int lcc_flash_fwd(void *out, float *lse, const void *q, const void *k, const void *v, const lcc_attn *s, void *ws,
                  cudaStream_t st);
// ACCUMULATING: dq [Tq,Hq,D] +=, dk/dv [Tk,Hkv,D] += (fp32); lse/delta [Hq,Tq] of the final
// merged forward. Deterministic: no atomics (dk/dv per key block over its q blocks and the
// kv group's heads in a fixed order; dq per query block over its key blocks).
int lcc_flash_bwd(float *dq, float *dk, float *dv, const void *dout, const void *q, const void *k, const void *v,
                  const float *lse, const float *delta, const lcc_attn *s, void *ws, cudaStream_t st);
// The simple reference kernels (one thread per query row, fp32 FMA, the same rounding
// points): the CUDA ops test checks the tensor-core path against them and the CPU, so a
// fault in the fast path is told from one in the shared logic. Same contracts as above.
int lcc_flash_fwd_ref(void *out, float *lse, const void *q, const void *k, const void *v, const lcc_attn *s,
                      cudaStream_t st);
int lcc_flash_bwd_ref(float *dq, float *dk, float *dv, const void *dout, const void *q, const void *k, const void *v,
                      const float *lse, const float *delta, const lcc_attn *s, cudaStream_t st);
// merge (out_b, lse_b) into (out_a, lse_a) in place; delta [Hq,Tq] = rowsum(dout * out),
// dout/out fp32 or bf16 (in16)
int lcc_attn_merge(float *out_a, float *lse_a, const float *out_b, const float *lse_b, int Tq, int Hq, int D,
                   cudaStream_t st);
int lcc_attn_delta(float *delta, const void *dout, const void *out, int in16, int Tq, int Hq, int D, cudaStream_t st);

// ---- LoRA dropout (backend/cpu/ops/dropout.h: lc_dropout_mask, the hash of core/dropout_hash.h):
// dst [rows, cols] (= or, accumulate, +=) src where (gidx[r], j) is kept; bf16: both 2-byte
// (no accumulate), else both fp32
int lcc_dropout(void *dst, const void *src, int bf16, int rows, int cols, const int *gidx, uint64_t key, uint32_t thr,
                int accumulate, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
