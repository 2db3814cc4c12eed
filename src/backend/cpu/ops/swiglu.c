// SwiGLU gate: h = silu(g) * u with silu(g) = g * sigmoid(g).
// sigmoid is evaluated from e = exp(-|g|) <= 1 (never overflows; NaN-free for any finite g):
//   g >= 0: sigmoid = 1/(1+e), 1-sigmoid = e/(1+e);  g < 0: the two swap.
// exp is a branch-free polynomial (see lc_fast_expf), run 8 lanes at a time on explicit
// vectors (backend/cpu/ops/vec8.h): GCC 12 does not vectorize the scalar loop (its selects read as
// control flow), which left SwiGLU at 5 ns an element.
#include "backend/cpu/ops/fastexp.h"
#include "backend/cpu/ops/ops.h"
#include "backend/cpu/ops/vec8.h"

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

// The same on 8 lanes (backend/cpu/ops/vec8.h: the same operations, the same bits).
static inline lc_v8f swiglu8(lc_v8f g, lc_v8f u) {
  const lc_v8f e = lc_fast_expf8(-lc_v8_abs(g));
  const lc_v8f d = 1.0f / (1.0f + e);
  const lc_v8f sig = lc_v8_sel(g >= 0.0f, d, e * d);
  return (g * sig) * u;
}
static inline void swiglu8_bwd(lc_v8f g, lc_v8f u, lc_v8f dh, lc_v8f *dg, lc_v8f *du) {
  const lc_v8f e = lc_fast_expf8(-lc_v8_abs(g));
  const lc_v8f d = 1.0f / (1.0f + e);
  const lc_v8i pos = g >= 0.0f;
  const lc_v8f sig = lc_v8_sel(pos, d, e * d), sigm = lc_v8_sel(pos, e * d, d);
  *du = dh * (g * sig);
  *dg = dh * u * sig * (1.0f + g * sigm);
}

// 8 values at i of an fp32 or (is16) bf16 array, widened; and 8 stored (rounded).
static inline lc_v8f load8(const void *x, int is16, size_t i) {
  if (!is16) return lc_v8_load((const float *)x + i);
  float t[8];
  for (int k = 0; k < 8; k++) t[k] = lc_bf16_widen(((const uint16_t *)x)[i + k]);
  return lc_v8_load(t);
}
static inline void store8(void *x, int is16, size_t i, lc_v8f v) {
  if (!is16) {
    lc_v8_store((float *)x + i, v);
    return;
  }
  float t[8];
  lc_v8_store(t, v);
  for (int k = 0; k < 8; k++) ((uint16_t *)x)[i + k] = lc_bf16_narrow(t[k]);
}
static inline float load1(const void *x, int is16, size_t i) { return lc_elem_f32(x, is16, i); }
static inline void store1(void *x, int is16, size_t i, float v) {
  if (is16) ((uint16_t *)x)[i] = lc_bf16_narrow(v);
  else ((float *)x)[i] = v;
}

// h = silu(g) u over n values, g/u/h fp32 or (is16) bf16: 8 at a time, threaded, the tail
// one by one.
static void swiglu_fwd_any(void *h, const void *g, const void *u, size_t n, int is16) {
  const long nb = (long)(n / 8);
#pragma omp parallel for schedule(static) if (n > LC_SW_PAR_MIN)
  for (long b = 0; b < nb; b++) {
    const size_t i = (size_t)b * 8;
    store8(h, is16, i, swiglu8(load8(g, is16, i), load8(u, is16, i)));
  }
  for (size_t i = (size_t)nb * 8; i < n; i++) store1(h, is16, i, swiglu1(load1(g, is16, i), load1(u, is16, i)));
}
// dg, du (fp32 or is16 bf16) from dh (fp32), g, u (as dg).
static void swiglu_bwd_any(void *dg, void *du, const float *dh, const void *g, const void *u, size_t n, int is16) {
  const long nb = (long)(n / 8);
#pragma omp parallel for schedule(static) if (n > LC_SW_PAR_MIN)
  for (long b = 0; b < nb; b++) {
    const size_t i = (size_t)b * 8;
    lc_v8f a, c;
    swiglu8_bwd(load8(g, is16, i), load8(u, is16, i), lc_v8_load(dh + i), &a, &c);
    store8(dg, is16, i, a);
    store8(du, is16, i, c);
  }
  for (size_t i = (size_t)nb * 8; i < n; i++) {
    float a, c;
    swiglu1_bwd(load1(g, is16, i), load1(u, is16, i), dh[i], &a, &c);
    store1(dg, is16, i, a);
    store1(du, is16, i, c);
  }
}

void lc_swiglu_fwd(float *h, const float *g, const float *u, size_t n) { swiglu_fwd_any(h, g, u, n, 0); }

void lc_swiglu_bwd(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n) {
  swiglu_bwd_any(dg, du, dh, g, u, n, 0);
}

void lc_swiglu_fwd_bf16(uint16_t *h, const uint16_t *g, const uint16_t *u, size_t n) { swiglu_fwd_any(h, g, u, n, 1); }

void lc_swiglu_bwd_bf16(uint16_t *dg, uint16_t *du, const float *dh, const uint16_t *g, const uint16_t *u, size_t n) {
  swiglu_bwd_any(dg, du, dh, g, u, n, 1);
}
