// The CPU kernels' scratch sizes (backend/scratch.h), from the kernels' own formulas.
#include "backend/scratch.h"

#include "backend/cpu/flash/flash.h"
#include "backend/cpu/ops/ops.h"

size_t lc_scratch_matmul_fwd(int bf16, lc_dtype out_dt, lc_dtype in_dt, lc_dtype w_dt, int T, int K, int N) {
  return lc_matmul_fwd_bytes(bf16, out_dt, in_dt, w_dt, T, K, N);
}
size_t lc_scratch_matmul_bwd(int bf16, lc_dtype dout_dt, lc_dtype in_dt, lc_dtype w_dt, int T, int K, int N) {
  return lc_matmul_bwd_bytes(bf16, dout_dt, in_dt, w_dt, T, K, N);
}
size_t lc_scratch_xent_stats(int T) { return lc_xent_stats_bytes(T); }
size_t lc_scratch_flash(const lc_attn_geom *g, int bwd, int out16, int threads) {
  const lc_attn_shape s = {.Tq = g->Tq, .Tk = g->Tk, .Hq = g->Hq, .Hkv = g->Hkv, .D = g->D, .q_start = g->q_start,
                           .k_start = g->k_start, .causal = g->causal, .scale = g->scale, .bf16 = g->bf16,
                           .q16 = g->bf16, .kv16 = g->bf16, .out16 = out16 && !bwd};
  return lc_flash_workspace_bytes(&s, bwd, threads);
}
