// Linear layer: W in the HF layout [N, K]. Two paths, chosen per call (lc_mm):
//  - fp32: CBLAS sgemm (OpenBLAS, OpenMP flavour). OpenBLAS threads each call itself (and
//    runs single-threaded inside an OpenMP parallel region), so nothing here opens one.
//  - bf16 (a bf16 pass, and the kernel table has gemm_bf16: oneDNN on AVX512_BF16/AMX):
//    the operands already hold bf16 values in fp32 slots (layer.h), so packing them to 2
//    bytes is exact; the table's GEMM multiplies them with fp32 accumulation. Packing
//    needs scratch (arena, LC_MEM_SCRATCH, sized by lc_matmul_*_bytes, which the memory
//    model uses): the smaller of the two operands is packed whole, the larger in chunks of
//    LC_MM_CHUNK rows, each packed once per call (rows mode when T >= N: W whole, the
//    activation rows in chunks; columns mode otherwise, e.g. the LM head [vocab, dim]
//    against a loss tile: the activation whole, W and the matching columns of dout in
//    chunks). Fewer than LC_MM_MIN_ROWS rows (decoding) stay on sgemm: a product that
//    thin is memory-bound and packing W would cost more than it saves.
#include "ops/ops.h"

#include <cblas.h>

#include "ops/kernels.h"

#define LC_MM_CHUNK 1024
#define LC_MM_MIN_ROWS 16

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

static int use_bf16(int bf16, int T, int K, int N) {
  return bf16 && T >= LC_MM_MIN_ROWS && K > 0 && N > 0 && lc_kern()->gemm_bf16;
}

size_t lc_matmul_fwd_bytes(int bf16, int T, int K, int N) {
  if (!use_bf16(bf16, T, K, N)) return 0;
  size_t t = (size_t)T, n = (size_t)N, k = (size_t)K;
  size_t el = T >= N ? n * k + min_sz(LC_MM_CHUNK, t) * k  // W whole + a chunk of rows
                     : t * k + min_sz(LC_MM_CHUNK, n) * k; // inp whole + a chunk of W rows
  return el * sizeof(uint16_t);
}

size_t lc_matmul_bwd_bytes(int bf16, int T, int K, int N) {
  if (!use_bf16(bf16, T, K, N)) return 0;
  size_t t = (size_t)T, n = (size_t)N, k = (size_t)K;
  size_t el = T >= N ? n * k + min_sz(LC_MM_CHUNK, t) * (n + k)  // W whole + rows of dout, inp
                     : t * k + min_sz(LC_MM_CHUNK, n) * (t + k); // inp whole + columns of dout, rows of W
  return el * sizeof(uint16_t);
}

// dst[rows, cols] (dense) = src rows of `cols` values, ld apart (exact on bf16 values).
static void pack(uint16_t *dst, const float *src, long ld, int rows, int cols) {
  if (ld == cols) {
    lc_bf16_pack(dst, src, (size_t)rows * cols);
    return;
  }
  void (*pk)(uint16_t *, const float *, size_t) = lc_kern()->bf16_pack;
#pragma omp parallel for schedule(static) if ((size_t)rows * cols >= ((size_t)1 << 16))
  for (int r = 0; r < rows; r++) pk(dst + (size_t)r * cols, src + (size_t)r * ld, (size_t)cols);
}

// out[T,N] = inp[T,K] @ W[N,K]^T
void lc_matmul_fwd(const lc_mm *mm, float *out, const float *inp, const float *w, int T, int K, int N) {
  if (T <= 0 || N <= 0) return;
  size_t bytes = mm && mm->arena ? lc_matmul_fwd_bytes(mm->bf16, T, K, N) : 0;
  uint16_t *buf = bytes ? lc_alloc(mm->arena, LC_MEM_SCRATCH, bytes, "bf16 GEMM operands") : NULL;
  if (!buf) { // fp32 (or the arena's cap refused the packing buffer: same values, fp32 GEMM)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, N, K, 1.0f, inp, K, w, K, 0.0f, out, N);
    return;
  }
  lc_gemm_bf16_fn *gemm =
      lc_kern()->gemm_bf16;
  if (T >= N) { // W whole, inp in chunks of rows
    uint16_t *w16 = buf, *x16 = buf + (size_t)N * K;
    pack(w16, w, K, N, K);
    for (int t0 = 0; t0 < T; t0 += LC_MM_CHUNK) {
      int n = T - t0 < LC_MM_CHUNK ? T - t0 : LC_MM_CHUNK;
      pack(x16, inp + (size_t)t0 * K, K, n, K);
      gemm(0, 1, n, N, K, x16, K, w16, K, 0.0f, out + (size_t)t0 * N, N);
    }
  } else { // inp whole, W in chunks of rows (= column blocks of out)
    uint16_t *x16 = buf, *w16 = buf + (size_t)T * K;
    pack(x16, inp, K, T, K);
    for (int n0 = 0; n0 < N; n0 += LC_MM_CHUNK) {
      int nn = N - n0 < LC_MM_CHUNK ? N - n0 : LC_MM_CHUNK;
      pack(w16, w + (size_t)n0 * K, K, nn, K);
      gemm(0, 1, T, nn, K, x16, K, w16, K, 0.0f, out + n0, N);
    }
  }
  lc_free(mm->arena, buf);
}

// dinp[T,K] (=|+=) dout[T,N] @ W[N,K] ; dw[N,K] += dout^T[N,T] @ inp[T,K]
void lc_matmul_bwd(const lc_mm *mm, float *dinp, float *dw, const float *dout, const float *inp,
                   const float *w, int T, int K, int N, int accumulate) {
  if (T <= 0 || K <= 0) return;
  size_t bytes = mm && mm->arena ? lc_matmul_bwd_bytes(mm->bf16, T, K, N) : 0;
  uint16_t *buf = bytes ? lc_alloc(mm->arena, LC_MEM_SCRATCH, bytes, "bf16 GEMM operands") : NULL;
  if (!buf) {
    if (dinp) {
      // With N == 0 the product is empty: beta 0 still clears dinp (BLAS scales C by beta).
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, K, N, 1.0f, dout, N, w, K,
                  accumulate ? 1.0f : 0.0f, dinp, K);
    }
    if (dw && N > 0) {
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, T, 1.0f, dout, N, inp, K, 1.0f,
                  dw, K);
    }
    return;
  }
  lc_gemm_bf16_fn *gemm =
      lc_kern()->gemm_bf16;
  if (T >= N) { // W whole; per chunk of rows: dout rows -> dinp rows, and their share of dw
    const int R = T < LC_MM_CHUNK ? T : LC_MM_CHUNK;
    uint16_t *w16 = buf, *d16 = w16 + (size_t)N * K, *x16 = d16 + (size_t)R * N;
    if (dinp) pack(w16, w, K, N, K);
    for (int t0 = 0; t0 < T; t0 += R) {
      int n = T - t0 < R ? T - t0 : R;
      pack(d16, dout + (size_t)t0 * N, N, n, N);
      if (dinp) gemm(0, 0, n, K, N, d16, N, w16, K, accumulate ? 1.0f : 0.0f, dinp + (size_t)t0 * K, K);
      if (dw) {
        pack(x16, inp + (size_t)t0 * K, K, n, K);
        gemm(1, 0, N, K, n, d16, N, x16, K, 1.0f, dw, K);
      }
    }
  } else { // inp whole; per chunk of W's rows: dout's columns -> dinp (summed), dw's rows
    const int R = N < LC_MM_CHUNK ? N : LC_MM_CHUNK;
    uint16_t *x16 = buf, *d16 = x16 + (size_t)T * K, *w16 = d16 + (size_t)T * R;
    if (dw) pack(x16, inp, K, T, K);
    for (int n0 = 0; n0 < N; n0 += R) {
      int nn = N - n0 < R ? N - n0 : R;
      pack(d16, dout + n0, N, T, nn);
      if (dinp) {
        pack(w16, w + (size_t)n0 * K, K, nn, K);
        gemm(0, 0, T, K, nn, d16, nn, w16, K, n0 == 0 && !accumulate ? 0.0f : 1.0f, dinp, K);
      }
      if (dw) gemm(1, 0, nn, K, T, d16, nn, x16, K, 1.0f, dw + (size_t)n0 * K, K);
    }
  }
  lc_free(mm->arena, buf);
}
