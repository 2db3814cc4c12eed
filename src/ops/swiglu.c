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

void lc_swiglu_fwd(float *h, const float *g, const float *u, size_t n) {
  const long nl = (long)n;
#pragma omp parallel for schedule(static) if (n > LC_SW_PAR_MIN)
  for (long i = 0; i < nl; i++) {
    const float gi = g[i];
    const float e = lc_fast_expf(-fabsf(gi));
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
    const float e = lc_fast_expf(-fabsf(gi));
    const float d = 1.0f / (1.0f + e);
    const float sig = gi >= 0.0f ? d : e * d;
    const float sigm = gi >= 0.0f ? e * d : d; // 1 - sigmoid, without cancellation
    du[i] = dhi * (gi * sig);
    dg[i] = dhi * ui * sig * (1.0f + gi * sigm);
  }
}
