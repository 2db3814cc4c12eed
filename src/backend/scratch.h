// Scratch bytes that only the kernels know, for the callers that hold it and for the memory
// model: the GEMM's operand packing, the attention kernel's workspace, the loss statistics
// over vocabulary slices. These are the CPU backend's sizes (backend/cpu/cpu_scratch.c):
// the memory model is exact for it; a device backend allocates no more scratch than these
// for the same calls (cuda: cuBLASLt's workspace is its own, attention reads k/v in place).
#ifndef LC_SCRATCH_H
#define LC_SCRATCH_H

#include <stddef.h>

#include "backend/attn_geom.h"
#include "core/dtype.h"

// The linear layer's scratch per call (lc_be_matmul_fwd / _bwd), by the pass's GEMM
// precision and the operands' dtypes (a W in quantized blocks: its block dtype); 0 where
// nothing is allocated; nondecreasing in T.
size_t lc_scratch_matmul_fwd(int bf16, lc_dtype out_dt, lc_dtype in_dt, lc_dtype w_dt, int T, int K, int N);
size_t lc_scratch_matmul_bwd(int bf16, lc_dtype dout_dt, lc_dtype in_dt, lc_dtype w_dt, int T, int K, int N);
// The per-token statistics of the loss over vocabulary slices (lc_be_xent_stats_init ..).
size_t lc_scratch_xent_stats(int T);
// The attention kernel's workspace for one call of geometry g (bwd: backward) with
// `threads` threads (<= 0: the current maximum): q, k, v (and dout) in 2 bytes when
// g->bf16, the forward's out in 2 bytes when out16.
size_t lc_scratch_flash(const lc_attn_geom *g, int bwd, int out16, int threads);

#endif
