// oneDNN bf16 GEMM: the gemm_bf16 entry of the kernel table's bf16 and amx levels
// (kernels.h has the contract: row-major C[M,N] = beta C + op(A) op(B), bf16 operands,
// fp32 accumulation and output, beta 0 or 1).
#ifndef LC_GEMM_DNNL_H
#define LC_GEMM_DNNL_H

#include <stddef.h>
#include <stdint.h>

void lc_gemm_dnnl_bf16(int ta, int tb, int M, int N, int K, const uint16_t *A, long lda,
                       const uint16_t *B, long ldb, float beta, float *C, long ldc);
// The same contract with fp32 operands (oneDNN's fp32 matmul: brgemm where the CPU has it),
// one of the two fp32 GEMM libraries backend/cpu/gemm/sgemm.h chooses between.
void lc_gemm_dnnl_f32(int ta, int tb, int M, int N, int K, const float *A, long lda, const float *B, long ldb, float beta,
                      float *C, long ldc);
// Bytes of the scratchpad buffer oneDNN's primitives share (owned by gemm_dnnl.c, outside
// the arena): the largest any cached primitive asked for.
size_t lc_gemm_dnnl_scratch_bytes(void);
// The bf16 level runs AVX512_BF16 GEMMs even where AMX exists (allow_amx 0); the amx level
// lets oneDNN use AMX tiles. Takes effect only before the first GEMM (returns 0 after).
int lc_gemm_dnnl_limit_isa(int allow_amx);
// Primitives created so far (the cache at work: repeated shapes create none).
long lc_gemm_dnnl_primitives(void);
// The implementation oneDNN chose for the last primitive created (e.g. "brg:avx512_core_bf16").
const char *lc_gemm_dnnl_impl(void);

#endif
