// Rotary position embedding, HF rotate-half convention: for i < D/2 the pair
// (x[i], x[i+D/2]) is rotated by angle pos * theta^(-2i/D).
#include "ops/ops.h"

#include <math.h>

#define LC_ROPE_PAR_MIN 32768L // T*H*D elements below which one thread is faster

void lc_rope_table(float *cos_t, float *sin_t, const int *pos, int T, int D, double theta) {
  const int half = D / 2;
  const double lt = log(theta);
#pragma omp parallel for schedule(static) if ((long)T * half > LC_ROPE_PAR_MIN / 8)
  for (int t = 0; t < T; t++) {
    for (int i = 0; i < half; i++) {
      // theta^(-2i/D) = exp(-(2i/D) ln theta), all in double; only the result is rounded.
      double inv_freq = exp(-(2.0 * i / (double)D) * lt);
      double a = (double)pos[t] * inv_freq;
      cos_t[(size_t)t * half + i] = (float)cos(a);
      sin_t[(size_t)t * half + i] = (float)sin(a);
    }
  }
}

void lc_rope_fwd(float *x, const float *cos_t, const float *sin_t, int T, int H, int D) {
  const int half = D / 2;
#pragma omp parallel for schedule(static) if ((long)T * H * D > LC_ROPE_PAR_MIN)
  for (int t = 0; t < T; t++) {
    const float *restrict c = cos_t + (size_t)t * half;
    const float *restrict s = sin_t + (size_t)t * half;
    for (int h = 0; h < H; h++) {
      float *restrict lo = x + ((size_t)t * H + h) * D;
      float *restrict hi = lo + half;
      for (int i = 0; i < half; i++) {
        float a = lo[i], b = hi[i];
        lo[i] = a * c[i] - b * s[i];
        hi[i] = b * c[i] + a * s[i];
      }
    }
  }
}

// The rotation R = [[c, -s], [s, c]] is orthogonal, so the gradient is R^T dy = R^-1 dy.
void lc_rope_bwd(float *dx, const float *cos_t, const float *sin_t, int T, int H, int D) {
  const int half = D / 2;
#pragma omp parallel for schedule(static) if ((long)T * H * D > LC_ROPE_PAR_MIN)
  for (int t = 0; t < T; t++) {
    const float *restrict c = cos_t + (size_t)t * half;
    const float *restrict s = sin_t + (size_t)t * half;
    for (int h = 0; h < H; h++) {
      float *restrict lo = dx + ((size_t)t * H + h) * D;
      float *restrict hi = lo + half;
      for (int i = 0; i < half; i++) {
        float a = lo[i], b = hi[i];
        lo[i] = a * c[i] + b * s[i];
        hi[i] = b * c[i] - a * s[i];
      }
    }
  }
}
