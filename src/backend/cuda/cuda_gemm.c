// The linear layer's three products through cuBLASLt (cuda_gemm.h), on row-major operands.
//
// Row-major X [r, c] is the column-major matrix X^T with leading dimension c, so:
//   out  [T,N] = inp [T,K] W[N,K]^T   ->  out^T  (N x T)  = op_T(W^T (K x N, ld K)) * inp^T (K x T, ld K)
//   dinp [T,K] = dout[T,N] W[N,K]     ->  dinp^T (K x T)  = W^T (K x N, ld K)       * dout^T (N x T, ld N)
//   dw   [N,K] += dout^T inp          ->  dw^T   (K x N)  = inp^T (K x T, ld K)     * op_T(dout^T (N x T, ld N))
// Types: a bf16 pass multiplies bf16 operands with fp32 accumulation (CUBLAS_COMPUTE_32F,
// bf16 A/B, fp32 or bf16 D); otherwise fp32 operands and CUBLAS_COMPUTE_32F, which never
// down-converts to TF32 (the equivalence tests compare with the CPU's sgemm).
#include "backend/cuda/cuda_gemm.h"

#include <cublasLt.h>

static lc_status lt_fail(cublasStatus_t s, const char *what) {
  return lc_fail(LC_EINVAL, "cuBLASLt %s failed (status %d)", what, (int)s);
}

lc_status lcc_gemm(void *lt_handle, const lcc_gemm_args *g, void *ws, size_t ws_bytes, cudaStream_t st) {
  if (g->m <= 0 || g->n <= 0) return LC_OK;
  cublasLtHandle_t lt = lt_handle;
  cublasLtMatmulDesc_t op = NULL;
  cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
  cublasStatus_t s = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  lc_status rc = LC_OK;
  if (s != CUBLAS_STATUS_SUCCESS) return lt_fail(s, "descriptor");
  const cublasOperation_t ta = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cudaDataType_t ab = g->bf16 ? CUDA_R_16BF : CUDA_R_32F, cd = g->c16 ? CUDA_R_16BF : CUDA_R_32F;
  // stored shapes (before op): A is m x k (or k x m transposed), B is k x n (or n x k)
  const uint64_t ar = (uint64_t)(g->ta ? g->k : g->m), ac = (uint64_t)(g->ta ? g->m : g->k);
  const uint64_t br = (uint64_t)(g->tb ? g->n : g->k), bc = (uint64_t)(g->tb ? g->k : g->n);
  if ((s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta)) != CUBLAS_STATUS_SUCCESS ||
      (s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb)) != CUBLAS_STATUS_SUCCESS ||
      (s = cublasLtMatrixLayoutCreate(&la, ab, ar, ac, (int64_t)g->lda)) != CUBLAS_STATUS_SUCCESS ||
      (s = cublasLtMatrixLayoutCreate(&lb, ab, br, bc, (int64_t)g->ldb)) != CUBLAS_STATUS_SUCCESS ||
      (s = cublasLtMatrixLayoutCreate(&lc, cd, (uint64_t)g->m, (uint64_t)g->n, (int64_t)g->ldc)) != CUBLAS_STATUS_SUCCESS) {
    rc = lt_fail(s, "layout");
  } else {
    const float alpha = 1.0f, beta = g->beta;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    s = cublasLtMatmulPreferenceCreate(&pref);
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &res, &found);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS || !found) {
      rc = lc_fail(LC_EINVAL, "cuBLASLt has no algorithm for a %s GEMM of %d x %d x %d (status %d)",
                   g->bf16 ? "bf16" : "fp32", g->m, g->n, g->k, (int)s);
    } else if ((s = cublasLtMatmul(lt, op, &alpha, g->a, la, g->b, lb, &beta, g->c, lc, g->c, lc, &res.algo, ws,
                                   ws_bytes, st)) != CUBLAS_STATUS_SUCCESS) {
      rc = lt_fail(s, "matmul");
    }
  }
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (lc) cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
  return rc;
}

lc_status lcc_lt_create(void **handle) {
  cublasLtHandle_t h = NULL;
  const cublasStatus_t s = cublasLtCreate(&h);
  if (s != CUBLAS_STATUS_SUCCESS) return lt_fail(s, "create");
  *handle = h;
  return LC_OK;
}
void lcc_lt_destroy(void *handle) {
  if (handle) cublasLtDestroy(handle);
}
