// Vectorizable exp for the element-wise ops (softmax cross-entropy, SwiGLU).
#ifndef LC_FASTEXP_H
#define LC_FASTEXP_H

#include <stdint.h>

#include "core/expcoef.h"

// exp(x) = 2^n * exp(r), n = round(x / ln2), r = x - n*ln2 (Cody-Waite two-part ln2, exact
// for |n| < 512), exp(r) on |r| <= ln2/2 by the Cephes expf minimax polynomial. Max relative
// error 8.2e-8 (measured against double exp over every float in [-87, 88], with and without
// FMA contraction); x < -87 returns 0 (true value < 1.7e-38),
// x > 88 saturates at exp(88) (never reached here: the argument is <= 0). NaN propagates.
// 2^n is built from the bits of the rounding sum t = x*log2e + 1.5*2^23, whose low mantissa
// bits hold n, so there is no float->int conversion (no UB for NaN).
static inline float lc_fast_expf(float x) {
  float xc = x < LC_EXP_LO ? LC_EXP_LO : x;
  xc = xc > LC_EXP_HI ? LC_EXP_HI : xc;
  union { float f; uint32_t u; } t, s;
  t.f = xc * LC_EXP_LOG2E + LC_EXP_SHIFTER; // round(x*log2e) + 1.5*2^23
  const float n = t.f - LC_EXP_SHIFTER;
  float r = xc - n * LC_EXP_LN2_HI;
  r = r - n * LC_EXP_LN2_LO;
  float p = LC_EXP_P0;
  p = p * r + LC_EXP_P1;
  p = p * r + LC_EXP_P2;
  p = p * r + LC_EXP_P3;
  p = p * r + LC_EXP_P4;
  p = p * r + LC_EXP_P5;
  p = p * (r * r) + r + 1.0f;
  // 2^n = (bits(t) - bits(1.5*2^23) + 127) << 23 (the bias term shifts out); the mask
  // zeroes it for x < -87 as integer ops (a float select there got jump-threaded with the
  // clamp into control flow, which stopped GCC vectorizing the loop).
  s.u = ((t.u + 127u) << 23) & -(uint32_t)(x >= LC_EXP_LO);
  return p * s.f;
}

#endif
