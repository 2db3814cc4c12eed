// Rotary position embedding on the CPU, HF rotate-half convention: for i < D/2 the pair
// (x[i], x[i+D/2]) is rotated by the table's angle (core/rope.h makes the tables).
#include "backend/cpu/ops/ops.h"

#define LC_ROPE_PAR_MIN 32768L // T*H*D elements below which one thread is faster

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

// The map is R = [[c, -s], [s, c]] (a rotation, scaled by the attention factor that the
// table's c and s carry), so the gradient is R^T dy.
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
