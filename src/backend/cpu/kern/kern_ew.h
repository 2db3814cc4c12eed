// The element-wise kernels of the table, written once in plain C and compiled once per
// level (backend/cpu/kern/kern_*.c, each with its level's target flags; backend/cpu/kern/kernels.h). Included by
// those files only, after KERN_FN(name) is defined. ISO C mode keeps floating-point
// contraction off and the reductions sequential per thread, so every level computes the
// same bits; the compiler's vectorisation for the level is what differs.
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/dtype.h"
#include "backend/cpu/kern/kernels.h"

#define KERN_PAR ((size_t)1 << 16) // below this many elements a thread team costs more than it saves


static void KERN_FN(bf16_round)(float *x, size_t n) {
  uint32_t *u = (uint32_t *)(void *)x;
#pragma omp parallel for schedule(static) if (n >= KERN_PAR)
  for (size_t i = 0; i < n; i++) u[i] = lc_bf16_narrow_bits(u[i]);
}

static void KERN_FN(bf16_round_copy)(float *dst, const float *src, size_t n) {
  const uint32_t *a = (const uint32_t *)(const void *)src;
  uint32_t *b = (uint32_t *)(void *)dst;
#pragma omp parallel for schedule(static) if (n >= KERN_PAR)
  for (size_t i = 0; i < n; i++) b[i] = lc_bf16_narrow_bits(a[i]);
}

static void KERN_FN(bf16_pack)(uint16_t *dst, const float *src, size_t n) {
  const uint32_t *u = (const uint32_t *)(const void *)src;
#pragma omp parallel for schedule(static) if (n >= KERN_PAR)
  for (size_t i = 0; i < n; i++) dst[i] = (uint16_t)(lc_bf16_narrow_bits(u[i]) >> 16);
}

static void KERN_FN(bf16_unpack)(float *dst, const uint16_t *src, size_t n) {
  uint32_t *u = (uint32_t *)(void *)dst;
#pragma omp parallel for schedule(static) if (n >= KERN_PAR)
  for (size_t i = 0; i < n; i++) u[i] = (uint32_t)src[i] << 16;
}

static void KERN_FN(add)(float *y, const float *x, size_t n) {
#pragma omp parallel for schedule(static) if (n > KERN_PAR)
  for (size_t i = 0; i < n; i++) y[i] += x[i];
}

static void KERN_FN(scale)(float *x, size_t n, float s) {
#pragma omp parallel for schedule(static) if (n > KERN_PAR)
  for (size_t i = 0; i < n; i++) x[i] *= s;
}

// Per-thread partial sums over fixed chunks, added in thread order: the same bits for a
// given thread count on every run and every rank (an OpenMP reduction adds the partials in
// the order the threads arrive).
static double KERN_FN(sumsq)(const float *x, size_t n) {
  enum { MAXT = 256 };
  double part[MAXT];
  int nt = 1;
  if (n > KERN_PAR) {
    nt = omp_get_max_threads();
    nt = nt < 1 ? 1 : nt > MAXT ? MAXT : nt;
  }
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const int t = omp_get_thread_num(), team = omp_get_num_threads();
    const size_t b = n * (size_t)t / (size_t)team, e = n * (size_t)(t + 1) / (size_t)team;
    // 8 interleaved partial sums (element i into lane i % 8 of the chunk), added in lane
    // order: one chain of dependent double adds ran at 4 cycles an element (the norm took
    // 51 ms of a bench-s step); the order is still fixed by n and the thread count alone
    double l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = b;
    for (; i + 8 <= e; i += 8)
      for (int k = 0; k < 8; k++) l[k] += (double)x[i + k] * x[i + k];
    for (int k = 0; i < e; i++, k++) l[k] += (double)x[i] * x[i];
    double s = 0;
    for (int k = 0; k < 8; k++) s += l[k];
    part[t] = s;
    if (t == 0) nt = team;
  }
  double s = 0;
  for (int t = 0; t < nt; t++) s += part[t];
  return s;
}

static void KERN_FN(adamw)(float *p, const float *g, float *m, float *v, size_t n, float wd, float b1,
                           float b2, float eps, float lr, float step_size, float inv_sqrt_bc2) {
#pragma omp parallel for schedule(static) if (n > KERN_PAR)
  for (size_t j = 0; j < n; j++) {
    m[j] = b1 * m[j] + (1.0f - b1) * g[j];
    v[j] = b2 * v[j] + (1.0f - b2) * g[j] * g[j];
    float denom = sqrtf(v[j]) * inv_sqrt_bc2 + eps;
    p[j] -= lr * wd * p[j] + step_size * m[j] / denom;
  }
}

#define KERN_TABLE_ENTRIES                                                                   \
  .bf16_round = KERN_FN(bf16_round), .bf16_round_copy = KERN_FN(bf16_round_copy),          \
  .bf16_pack = KERN_FN(bf16_pack), .bf16_unpack = KERN_FN(bf16_unpack), .add = KERN_FN(add), \
  .scale = KERN_FN(scale), .sumsq = KERN_FN(sumsq), .adamw = KERN_FN(adamw)
