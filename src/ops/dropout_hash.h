// The hash of LoRA dropout's mask (ops/dropout.h), in one place for the CPU kernel and the
// CUDA kernel (C and CUDA C++ alike: nothing here but stdint).
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

#undef LC_HD

#endif
