// The linear layer's three products through cuBLASLt (cuda_gemm.h), on row-major operands.
//
// Row-major X [r, c] is the column-major matrix X^T with leading dimension c, so:
//   out  [T,N] = inp [T,K] W[N,K]^T   ->  out^T  (N x T)  = op_T(W^T (K x N, ld K)) * inp^T (K x T, ld K)
//   dinp [T,K] = dout[T,N] W[N,K]     ->  dinp^T (K x T)  = W^T (K x N, ld K)       * dout^T (N x T, ld N)
//   dw   [N,K] += dout^T inp          ->  dw^T   (K x N)  = inp^T (K x T, ld K)     * op_T(dout^T (N x T, ld N))
// Types: a bf16 pass multiplies bf16 operands with fp32 accumulation (CUBLAS_COMPUTE_32F,
// bf16 A/B, fp32 or bf16 D); otherwise fp32 operands and CUBLAS_COMPUTE_32F, which never
// down-converts to TF32 (the equivalence tests compare with the CPU's sgemm).
//
// Alignment: cuBLASLt's heuristic assumes 256-byte aligned operands unless told otherwise,
// and may then pick a kernel that faults or refuses (CUBLAS_STATUS_NOT_SUPPORTED) on the
// backend's views (64-byte carving, row offsets). Each operand's alignment (the largest
// power of two up to 256 dividing its address: backend/gemm_plan.h) is passed as
// CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES, and is part of the plan's key.
// Plans (descriptor, layouts, algorithm) are kept in a table of LC_GEMM_PLAN_SLOTS per
// handle, least recently used out: the heuristic runs once per distinct GEMM.
#include "backend/cuda/cuda_gemm.h"

#include <stdlib.h>

#include <cublasLt.h>

#include "backend/gemm_plan.h"

typedef struct {
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
} lt_plan;

typedef struct {
  cublasLtHandle_t h;
  lc_gemm_plans keys;
  lt_plan plan[LC_GEMM_PLAN_SLOTS];
} lt_state;

static lc_status lt_fail(cublasStatus_t s, const char *what) {
  return lc_fail(LC_EINVAL, "cuBLASLt %s failed (status %d)", what, (int)s);
}

static void plan_destroy(lt_plan *p) {
  if (p->la) cublasLtMatrixLayoutDestroy(p->la);
  if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
  if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
  if (p->op) cublasLtMatmulDescDestroy(p->op);
  *p = (lt_plan){0};
}

// The descriptor, layouts and the heuristic's first algorithm for key k.
static lc_status plan_build(cublasLtHandle_t lt, const lc_gemm_key *k, lt_plan *p) {
  *p = (lt_plan){0};
  const cublasOperation_t ta = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cudaDataType_t ab = k->bf16 ? CUDA_R_16BF : CUDA_R_32F, cd = k->c16 ? CUDA_R_16BF : CUDA_R_32F;
  // stored shapes (before op): A is m x k (or k x m transposed), B is k x n (or n x k)
  const uint64_t ar = (uint64_t)(k->ta ? k->k : k->m), ac = (uint64_t)(k->ta ? k->m : k->k);
  const uint64_t br = (uint64_t)(k->tb ? k->n : k->k), bc = (uint64_t)(k->tb ? k->k : k->n);
  cublasStatus_t s = cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&p->la, ab, ar, ac, k->lda);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&p->lb, ab, br, bc, k->ldb);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&p->lc, cd, (uint64_t)k->m, (uint64_t)k->n, k->ldc);
  if (s != CUBLAS_STATUS_SUCCESS) {
    plan_destroy(p);
    return lt_fail(s, "descriptor or layout");
  }
  cublasLtMatmulPreference_t pref = NULL;
  const size_t ws = (size_t)k->ws_bytes;
  const uint32_t al[4] = {k->align_a, k->align_b, k->align_c, k->align_c}; // D is C
  static const cublasLtMatmulPreferenceAttributes_t which[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  s = cublasLtMatmulPreferenceCreate(&pref);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; i++)
    s = cublasLtMatmulPreferenceSetAttribute(pref, which[i], &al[i], sizeof al[i]);
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulAlgoGetHeuristic(lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &found);
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS || !found) {
    plan_destroy(p);
    return lc_fail(LC_EINVAL, "cuBLASLt has no algorithm for a %s GEMM of %d x %d x %d with operands aligned to %u, %u "
                   "and %u bytes (status %d)", k->bf16 ? "bf16" : "fp32", k->m, k->n, k->k, k->align_a, k->align_b,
                   k->align_c, (int)s);
  }
  p->algo = res.algo;
  return LC_OK;
}

lc_status lcc_gemm(void *lt_handle, const lcc_gemm_args *g, void *ws, size_t ws_bytes, cudaStream_t st) {
  if (g->m <= 0 || g->n <= 0) return LC_OK;
  lt_state *L = lt_handle;
  lc_gemm_key key;
  lc_gemm_key_make(&key, g->m, g->n, g->k, (int64_t)g->lda, (int64_t)g->ldb, (int64_t)g->ldc, g->ta, g->tb, g->bf16,
                   g->c16, g->a, g->b, g->c);
  key.ws_bytes = ws_bytes;
  int hit = 0, evict = 0;
  const int i = lc_gemm_plan_slot(&L->keys, &key, &hit, &evict);
  lt_plan *p = &L->plan[i];
  if (!hit) {
    if (evict) plan_destroy(p);
    const lc_status rc = plan_build(L->h, &key, p);
    if (rc != LC_OK) {
      lc_gemm_plan_drop(&L->keys, i);
      return rc;
    }
  }
  const float alpha = 1.0f, beta = g->beta;
  const cublasStatus_t s = cublasLtMatmul(L->h, p->op, &alpha, g->a, p->la, g->b, p->lb, &beta, g->c, p->lc, g->c, p->lc,
                                          &p->algo, ws, ws_bytes, st);
  return s == CUBLAS_STATUS_SUCCESS ? LC_OK : lt_fail(s, "matmul");
}

lc_status lcc_lt_create(void **handle) {
  lt_state *L = calloc(1, sizeof *L);
  if (!L) return lc_fail(LC_ENOMEM, "out of memory for cuBLASLt's plans");
  const cublasStatus_t s = cublasLtCreate(&L->h);
  if (s != CUBLAS_STATUS_SUCCESS) {
    free(L);
    return lt_fail(s, "create");
  }
  *handle = L;
  return LC_OK;
}
void lcc_lt_destroy(void *handle) {
  lt_state *L = handle;
  if (!L) return;
  for (int i = 0; i < LC_GEMM_PLAN_SLOTS; i++) plan_destroy(&L->plan[i]);
  cublasLtDestroy(L->h);
  free(L);
}
