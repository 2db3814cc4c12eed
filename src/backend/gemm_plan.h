// The host-side bookkeeping of cuBLASLt GEMMs (backend/cuda/cuda_gemm.c), in plain C so it is
// compiled and unit-tested without a GPU (tests/test_cuda_gemm_plan.c):
//  - the alignment cuBLASLt is promised for an operand (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*):
//    without it the heuristic assumes 256-byte aligned pointers, and the views of the
//    backend (64-byte carving, row offsets of LoRA and the loss) break that promise;
//  - a small fixed table of plans (descriptor, layouts, chosen algorithm) keyed by shape,
//    transposes, types and alignments, so the heuristic runs once per distinct GEMM, not
//    per call. The table holds keys only; the caller keeps its CUDA objects in a parallel
//    array indexed by the slot this returns.
#ifndef LC_GEMM_PLAN_H
#define LC_GEMM_PLAN_H

#include <stddef.h>
#include <stdint.h>

#define LC_GEMM_PLAN_SLOTS 32 // a model's distinct GEMMs: 3 per projection kind x 2 precisions fit

// The largest power of two up to 256 that divides the address (NULL: 256).
unsigned lc_gemm_align_bytes(const void *p);

typedef struct {
  int m, n, k;
  int64_t lda, ldb, ldc;
  unsigned char ta, tb, bf16, c16;
  unsigned short align_a, align_b, align_c; // lc_gemm_align_bytes of A, B and C (= D)
  uint64_t ws_bytes; // the workspace the algorithm may use (set by the caller after lc_gemm_key_make)
} lc_gemm_key;

typedef struct {
  lc_gemm_key key[LC_GEMM_PLAN_SLOTS];
  uint64_t last_use[LC_GEMM_PLAN_SLOTS]; // 0: empty
  uint64_t clock;
  uint64_t hits, misses;
} lc_gemm_plans;

// The key of a GEMM; every byte set (padding too), so keys compare with memcmp.
void lc_gemm_key_make(lc_gemm_key *k, int m, int n, int k_, int64_t lda, int64_t ldb, int64_t ldc, int ta, int tb,
                      int bf16, int c16, const void *a, const void *b, const void *c);

// The slot of key in t: *hit 1 when it holds this key's plan already; else *hit 0 and the
// slot to build it in (an empty one, else the least recently used: *evict 1 when that slot
// held another plan the caller must destroy first). The slot is marked used now.
int lc_gemm_plan_slot(lc_gemm_plans *t, const lc_gemm_key *key, int *hit, int *evict);

// Forget slot i (its plan could not be built).
void lc_gemm_plan_drop(lc_gemm_plans *t, int i);

#endif
