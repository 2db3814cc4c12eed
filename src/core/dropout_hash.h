// Dropout on LoRA's input (PEFT's lora_dropout): a mask that is a pure function of the run,
// never of the layout. Element (g, j) of one call is kept when
//   lc_dropout_bits(key, g, j) >= thr,   thr = round(p * 2^24)
// with g the token's index in its whole sequence (not its row on this rank), j the input
// feature, and key made from the seed, the step, the sample, the layer and the projection
// (lc_dropout_key). So every split of a sequence over ranks, tiles or chunks drops the same
// elements, and backward regenerates forward's mask instead of storing it.
//
// The kept values are not scaled here: the 1/(1-p) of nn.Dropout is folded into the
// adapter's scale (model/lora_op.c), so masking a bf16 operand is exact.
//
// The hash and the keys in one place for the CPU kernel, the CUDA kernel and the host (C and
// CUDA C++ alike: nothing here but stdint).
#ifndef LC_DROPOUT_HASH_H
#define LC_DROPOUT_HASH_H

#include <stdint.h>

#if defined(__CUDACC__)
#define LC_HD __host__ __device__ __forceinline__
#else
#define LC_HD static inline
#endif

// splitmix64's finaliser: a bijection of 64 bits whose outputs pass the usual tests.
LC_HD uint64_t lc_mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
// 24 uniform bits for element (g, j) under key.
LC_HD uint32_t lc_dropout_bits(uint64_t key, uint32_t g, uint32_t j) {
  return (uint32_t)(lc_mix64(key ^ lc_mix64(((uint64_t)g << 32 | j) + 0x9E3779B97F4A7C15ull)) >> 40);
}
// The threshold for drop probability p in [0, 1): round(p * 2^24).
LC_HD uint32_t lc_dropout_thr(float p) { return (uint32_t)((double)p * 16777216.0 + 0.5); }

// The key of one adapter call: the pass's key (lc_dropout_pass_key) with the layer and the
// projection (LC_LORA_Q ..).
LC_HD uint64_t lc_dropout_key(uint64_t pass_key, int layer, int proj) {
  return lc_mix64(pass_key ^ lc_mix64(((uint64_t)(uint32_t)layer << 8 | (uint32_t)proj) + 0x2545F4914F6CDD1Dull));
}
// The pass's key: the run's seed, the optimizer step it belongs to (1 = the first) and the
// sample's index in the run's stream of samples (the same on every layout).
LC_HD uint64_t lc_dropout_pass_key(uint64_t seed, long step, uint64_t sample) {
  return lc_mix64(lc_mix64(seed ^ 0x44726f704c6f5241ull /* "DropLoRA" */) ^ lc_mix64((uint64_t)step) ^
                  lc_mix64(sample + 0x632BE59BD9B4E019ull));
}

#undef LC_HD

#endif
