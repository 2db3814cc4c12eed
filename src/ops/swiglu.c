// SwiGLU gate: h = silu(g) * u with silu(g) = g * sigmoid(g).
// sigmoid is evaluated from e = exp(-|g|) <= 1 (never overflows; NaN-free for any finite g):
//   g >= 0: sigmoid = 1/(1+e), 1-sigmoid = e/(1+e);  g < 0: the two swap.
// exp is a branch-free polynomial (see lc_fast_expf) so the loops auto-vectorize without
// -ffast-math (GCC only vectorizes libm expf through libmvec under -ffast-math).
#include "ops/fastexp.h"
#include "ops/ops.h"

#include <math.h>
#include <stdint.h>

#define LC_SW_PAR_MIN ((size_t)32768) // elements below which one thread is faster

// h = silu(g) * u for one element (the forward's arithmetic, shared by both dtypes).
static inline float swiglu1(float gi, float ui) {
  const float e = lc_fast_expf(-fabsf(gi));
  const float d = 1.0f / (1.0f + e);
  const float sig = gi >= 0.0f ? d : e * d;
  return (gi * sig) * ui;
}

// dh/du = silu(g);  dh/dg = u * sigmoid(g) * (1 + g * (1 - sigmoid(g)))
static inline void swiglu1_bwd(float gi, float ui, float dhi, float *dg, float *du) {
  const float e = lc_fast_expf(-fabsf(gi));
  const float d = 1.0f / (1.0f + e);
  const float sig = gi >= 0.0f ? d : e * d;
  const float sigm = gi >= 0.0f ? e * d : d; // 1 - sigmoid, without cancellation
  *du = dhi * (gi * sig);
  *dg = dhi * ui * sig * (1.0f + gi * sigm);
}

void lc_swiglu_fwd(float *h, const float *g, const float *u, size_t n) {
  const long nl = (long)n;
#pragma omp parallel for schedule(static) if (n > LC_SW_PAR_MIN)
  for (long i = 0; i < nl; i++) h[i] = swiglu1(g[i], u[i]);
}

void lc_swiglu_bwd(float *dg, float *du, const float *dh, const float *g, const float *u,
                   size_t n) {
  const long nl = (long)n;
#pragma omp parallel for schedule(static) if (n > LC_SW_PAR_MIN)
  for (long i = 0; i < nl; i++) swiglu1_bwd(g[i], u[i], dh[i], &dg[i], &du[i]);
}

void lc_swiglu_fwd_bf16(uint16_t *h, const uint16_t *g, const uint16_t *u, size_t n) {
  const long nl = (long)n;
#pragma omp parallel for schedule(static) if (n > LC_SW_PAR_MIN)
  for (long i = 0; i < nl; i++) h[i] = lc_bf16_narrow(swiglu1(lc_bf16_widen(g[i]), lc_bf16_widen(u[i])));
}

void lc_swiglu_bwd_bf16(uint16_t *dg, uint16_t *du, const float *dh, const uint16_t *g, const uint16_t *u, size_t n) {
  const long nl = (long)n;
#pragma omp parallel for schedule(static) if (n > LC_SW_PAR_MIN)
  for (long i = 0; i < nl; i++) {
    float a, b;
    swiglu1_bwd(lc_bf16_widen(g[i]), lc_bf16_widen(u[i]), dh[i], &a, &b);
    dg[i] = lc_bf16_narrow(a);
    du[i] = lc_bf16_narrow(b);
  }
}
