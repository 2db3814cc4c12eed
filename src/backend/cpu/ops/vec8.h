// 8-float vectors (GCC/Clang vector extensions) for element-wise kernels whose loops GCC
// will not vectorize on its own (lc_fast_expf's clamps and selects read as control flow to
// GCC 12's if-conversion: SwiGLU ran at 5 ns an element, scalar). Each helper does, lane by
// lane, exactly the scalar code's operations in the same order, so results are bit-identical
// to the scalar forms (no FMA contraction either way under -std=c11). With AVX2 or AVX-512
// one vector is one ymm register; elsewhere GCC lowers them to what the target has.
#ifndef LC_VEC8_H
#define LC_VEC8_H

#include <stdint.h>

#include "core/expcoef.h"
#include <string.h>

typedef float lc_v8f __attribute__((vector_size(32)));
typedef int32_t lc_v8i __attribute__((vector_size(32)));
typedef uint32_t lc_v8u __attribute__((vector_size(32)));

static inline lc_v8f lc_v8_load(const float *p) {
  lc_v8f x;
  memcpy(&x, p, sizeof x);
  return x;
}
static inline void lc_v8_store(float *p, lc_v8f x) { memcpy(p, &x, sizeof x); }
// (a constructor of equal elements: one broadcast; an element loop became a chain of inserts)
static inline lc_v8f lc_v8_splat(float a) { return (lc_v8f){a, a, a, a, a, a, a, a}; }
// m ? a : b per lane (m from a vector comparison: all ones or zero)
static inline lc_v8f lc_v8_sel(lc_v8i m, lc_v8f a, lc_v8f b) { return (lc_v8f)(((lc_v8i)a & m) | ((lc_v8i)b & ~m)); }
static inline lc_v8f lc_v8_abs(lc_v8f x) { return (lc_v8f)((lc_v8u)x & 0x7fffffffu); }

// lc_fast_expf (backend/cpu/ops/fastexp.h) lane by lane: the same operations, the same bits.
static inline lc_v8f lc_fast_expf8(lc_v8f x) {
  lc_v8f xc = lc_v8_sel(x < lc_v8_splat(LC_EXP_LO), lc_v8_splat(LC_EXP_LO), x);
  xc = lc_v8_sel(xc > lc_v8_splat(LC_EXP_HI), lc_v8_splat(LC_EXP_HI), xc);
  const lc_v8f t = xc * LC_EXP_LOG2E + LC_EXP_SHIFTER;
  const lc_v8f n = t - LC_EXP_SHIFTER;
  lc_v8f r = xc - n * LC_EXP_LN2_HI;
  r = r - n * LC_EXP_LN2_LO;
  lc_v8f p = lc_v8_splat(LC_EXP_P0);
  p = p * r + LC_EXP_P1;
  p = p * r + LC_EXP_P2;
  p = p * r + LC_EXP_P3;
  p = p * r + LC_EXP_P4;
  p = p * r + LC_EXP_P5;
  p = p * (r * r) + r + 1.0f;
  const lc_v8u s = (((lc_v8u)t + 127u) << 23) & (lc_v8u)(x >= lc_v8_splat(LC_EXP_LO));
  return p * (lc_v8f)s;
}

#endif
