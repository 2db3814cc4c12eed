// One column-major GEMM through cuBLASLt: C (m x n, ldc) = op(A) op(B) + beta C, fp32
// accumulation; A/B bf16 (bf16 = 1) or fp32, C fp32 or bf16 (c16). cuda_gemm.c says how
// the linear layer's row-major products map onto it.
#ifndef LC_CUDA_GEMM_H
#define LC_CUDA_GEMM_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "core/status.h"

typedef struct {
  int m, n, k;
  const void *a, *b;
  void *c;
  size_t lda, ldb, ldc;
  int ta, tb;   // op(A) = A^T, op(B) = B^T
  int bf16;     // A and B are bf16
  int c16;      // C is bf16
  float beta;   // 0: overwrite, 1: accumulate
} lcc_gemm_args;

lc_status lcc_lt_create(void **handle);
void lcc_lt_destroy(void *handle);
lc_status lcc_gemm(void *lt_handle, const lcc_gemm_args *g, void *ws, size_t ws_bytes, cudaStream_t st);

#endif
