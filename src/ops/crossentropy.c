// Fused softmax cross-entropy: loss and dlogits from one call, written over the logits.
// Per row: m = max; e_i = exp(x_i - m) (written over the logits); s = sum e_i in DOUBLE;
// loss = m + log(s) - x[target]; dlogits = e_i * (scale/s) - scale*[i == target].
// exp is a branch-free polynomial so the V-long loop auto-vectorizes (AVX-512) without
// -ffast-math; its relative error (<= 8.2e-8) is about one float rounding of the result.
#include "ops/fastexp.h"
#include "ops/ops.h"

#include <math.h>
#include <stdint.h>

#define LC_XENT_PAR_MIN 32768L // T*V elements below which one thread is faster
#define LC_XENT_CHUNKS 64      // fixed row chunks: the loss sum is independent of threads

static double xent_row(float *x, int target, int V, float scale) {
  if (target < 0) { // ignored row: no loss, zero gradient
    for (int i = 0; i < V; i++) x[i] = 0.0f;
    return 0.0;
  }
  float m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (int i = 0; i < V; i++) m = x[i] > m ? x[i] : m;
  const float xt = x[target];
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < V; i++) {
    const float e = lc_fast_expf(x[i] - m);
    x[i] = e;
    s += (double)e;
  }
  const float k = (float)((double)scale / s);
  for (int i = 0; i < V; i++) x[i] *= k;
  x[target] -= scale;
  return (double)m + log(s) - (double)xt;
}

double lc_xent_fwd_bwd(float *logits, const int *targets, int T, int V, float scale) {
  if (T <= 0) return 0.0;
  // Rows are split into LC_XENT_CHUNKS fixed chunks summed in order, so the returned loss is
  // bit-identical for any thread count (and no buffer is needed).
  double part[LC_XENT_CHUNKS];
#pragma omp parallel for schedule(static) if ((long)T * V > LC_XENT_PAR_MIN)
  for (int ch = 0; ch < LC_XENT_CHUNKS; ch++) {
    const int t0 = (int)((long)T * ch / LC_XENT_CHUNKS);
    const int t1 = (int)((long)T * (ch + 1) / LC_XENT_CHUNKS);
    double acc = 0.0;
    for (int t = t0; t < t1; t++)
      acc += xent_row(logits + (size_t)t * V, targets[t], V, scale);
    part[ch] = acc;
  }
  double loss = 0.0;
  for (int ch = 0; ch < LC_XENT_CHUNKS; ch++) loss += part[ch];
  return loss;
}
