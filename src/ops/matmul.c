// Linear layer on CBLAS (OpenBLAS, OpenMP flavour): W in the HF layout [N, K].
// OpenBLAS threads each call itself (and runs single-threaded when called from inside
// an OpenMP parallel region), so nothing here opens a parallel region.
#include "ops/ops.h"

#include <cblas.h>

// out[T,N] = inp[T,K] @ W[N,K]^T
void lc_matmul_fwd(float *out, const float *inp, const float *w, int T, int K, int N) {
  if (T <= 0 || N <= 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, N, K, 1.0f, inp, K, w, K, 0.0f, out,
              N);
}

// dinp[T,K] (=|+=) dout[T,N] @ W[N,K] ; dw[N,K] += dout^T[N,T] @ inp[T,K]
void lc_matmul_bwd(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                   int T, int K, int N, int accumulate) {
  if (T <= 0 || K <= 0) return;
  if (dinp) {
    // With N == 0 the product is empty: beta 0 still clears dinp (BLAS scales C by beta).
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, K, N, 1.0f, dout, N, w, K,
                accumulate ? 1.0f : 0.0f, dinp, K);
  }
  if (dw && N > 0) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, T, 1.0f, dout, N, inp, K, 1.0f,
                dw, K);
  }
}
