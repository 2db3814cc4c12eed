// SwiGLU gate: h = silu(g) * u with silu(g) = g * sigmoid(g).
// sigmoid is evaluated from e = exp(-|g|) <= 1 (never overflows; NaN-free for any finite g):
//   g >= 0: sigmoid = 1/(1+e), 1-sigmoid = e/(1+e);  g < 0: the two swap.
// exp is a branch-free polynomial (see lc_sw_expf) so the loops auto-vectorize without
// -ffast-math (GCC only vectorizes libm expf through libmvec under -ffast-math).
#include "ops/ops.h"

#include <math.h>
#include <stdint.h>

#define LC_SW_PAR_MIN ((size_t)32768) // elements below which one thread is faster

// exp(x) = 2^n * exp(r), n = round(x / ln2), r = x - n*ln2 (Cody-Waite two-part ln2, exact
// for |n| < 512), exp(r) on |r| <= ln2/2 by the Cephes expf minimax polynomial. Max relative
// error 8.2e-8 (measured against double exp over every float in [-87, 88], with and without
// FMA contraction); x < -87 returns 0 (true value < 1.7e-38),
// x > 88 saturates at exp(88) (never reached here: the argument is <= 0). NaN propagates.
// 2^n is built from the bits of the rounding sum t = x*log2e + 1.5*2^23, whose low mantissa
// bits hold n, so there is no float->int conversion (no UB for NaN). A copy of this function
// lives in crossentropy.c (kept file-local; ops.h is the only shared header of src/ops).
static inline float lc_sw_expf(float x) {
  float xc = x < -87.0f ? -87.0f : x;
  xc = xc > 88.0f ? 88.0f : xc;
  union { float f; uint32_t u; } t, s;
  t.f = xc * 1.44269504088896341f + 12582912.0f; // round(x*log2e) + 1.5*2^23
  const float n = t.f - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  // 2^n = (bits(t) - bits(1.5*2^23) + 127) << 23 (the bias term shifts out); the mask
  // zeroes it for x < -87 as integer ops (a float select there got jump-threaded with the
  // clamp into control flow, which stopped GCC vectorizing the loop).
  s.u = ((t.u + 127u) << 23) & -(uint32_t)(x >= -87.0f);
  return p * s.f;
}

void lc_swiglu_fwd(float *h, const float *g, const float *u, size_t n) {
  const long nl = (long)n;
#pragma omp parallel for schedule(static) if (n > LC_SW_PAR_MIN)
  for (long i = 0; i < nl; i++) {
    const float gi = g[i];
    const float e = lc_sw_expf(-fabsf(gi));
    const float d = 1.0f / (1.0f + e);
    const float sig = gi >= 0.0f ? d : e * d;
    h[i] = (gi * sig) * u[i];
  }
}

// dh/du = silu(g);  dh/dg = u * sigmoid(g) * (1 + g * (1 - sigmoid(g)))
void lc_swiglu_bwd(float *dg, float *du, const float *dh, const float *g, const float *u,
                   size_t n) {
  const long nl = (long)n;
#pragma omp parallel for schedule(static) if (n > LC_SW_PAR_MIN)
  for (long i = 0; i < nl; i++) {
    const float gi = g[i], ui = u[i], dhi = dh[i];
    const float e = lc_sw_expf(-fabsf(gi));
    const float d = 1.0f / (1.0f + e);
    const float sig = gi >= 0.0f ? d : e * d;
    const float sigm = gi >= 0.0f ? e * d : d; // 1 - sigmoid, without cancellation
    du[i] = dhi * (gi * sig);
    dg[i] = dhi * ui * sig * (1.0f + gi * sigm);
  }
}
