// RMSNorm as HF LlamaRMSNorm: rstd = 1/sqrt(mean(x^2) + eps), out = (x * rstd) * w.
// The sum of squares is accumulated in DOUBLE (vectorized by `omp simd reduction`), which
// is at least as accurate as HF's fp32 mean; rstd is rounded to float once.
#include "backend/cpu/ops/ops.h"

#include <math.h>

#define LC_RMS_PAR_MIN 32768L // T*C elements below which one thread is faster
#define LC_RMS_CBLK 64        // dw column block owned by one thread

// One row's 1/rms (double sum of squares, rounded to float once).
static float row_rstd(const float *x, int C, float eps) {
  double ss = 0.0;
#pragma omp simd reduction(+ : ss)
  for (int c = 0; c < C; c++) ss += (double)x[c] * (double)x[c];
  return (float)(1.0 / sqrt(ss / C + (double)eps));
}

// Row t of inp (fp32, or bf16 widened into tmp[C], exact): the kernels below run the same
// fp32 code on either, so a bf16 input gives the bits of its widened fp32 copy.
static const float *row_in(const void *inp, int in16, size_t t, int C, float *tmp) {
  if (!in16) return (const float *)inp + t * C;
  const uint16_t *h = (const uint16_t *)inp + t * C;
  for (int c = 0; c < C; c++) tmp[c] = lc_bf16_widen(h[c]);
  return tmp;
}
#define ROW_TMP(name, in16, C) float name[(in16) ? (C) : 1] // (a VLA: C floats on the thread's stack)

static void rmsnorm_fwd(void *out, int out16, float *rstd, const void *inp, int in16, const float *w, int T, int C,
                        float eps) {
#pragma omp parallel for schedule(static) if ((long)T * C > LC_RMS_PAR_MIN)
  for (int t = 0; t < T; t++) {
    ROW_TMP(tmp, in16, C);
    const float *x = row_in(inp, in16, (size_t)t, C, tmp);
    const float r = row_rstd(x, C, eps);
    rstd[t] = r;
    if (out16) {
      uint16_t *o = (uint16_t *)out + (size_t)t * C;
      for (int c = 0; c < C; c++) o[c] = lc_bf16_narrow((x[c] * r) * w[c]);
    } else {
      float *o = (float *)out + (size_t)t * C;
      for (int c = 0; c < C; c++) o[c] = (x[c] * r) * w[c];
    }
  }
}

void lc_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *w, int T, int C, float eps) {
  rmsnorm_fwd(out, 0, rstd, inp, 0, w, T, C, eps);
}

void lc_rmsnorm_fwd_to(void *out, lc_dtype out_dt, float *rstd, const void *inp, lc_dtype in_dt, const float *w, int T,
                       int C, float eps) {
  rmsnorm_fwd(out, out_dt == LC_DT_BF16, rstd, inp, in_dt == LC_DT_BF16, w, T, C, eps);
}

// With y = x*r*w and r = (mean(x^2)+eps)^(-1/2):  dr/dx_j = -r^3 x_j / C, so
//   dx_j = r*dy_j*w_j - x_j * r^3 * (sum_c dy_c w_c x_c) / C
//   dw_c = sum_t dy[t,c] * x[t,c] * r[t]
static void rmsnorm_bwd(float *dinp, float *dw, const float *dout, const void *inp, int in16, const float *w,
                        const float *rstd, int T, int C, int accumulate) {
  const int par = (long)T * C > LC_RMS_PAR_MIN;
  // dw first (so dinp may even alias dout). Threads own column blocks: race-free and the
  // per-column summation order (t ascending) does not depend on the thread count.
  const int nblk = (C + LC_RMS_CBLK - 1) / LC_RMS_CBLK;
#pragma omp parallel for schedule(static) if (par && nblk > 1)
  for (int b = 0; b < (dw ? nblk : 0); b++) { // dw NULL: a frozen weight, no gradient
    const int c0 = b * LC_RMS_CBLK;
    const int c1 = c0 + LC_RMS_CBLK < C ? c0 + LC_RMS_CBLK : C;
    for (int t = 0; t < T; t++) {
      const float *restrict dy = dout + (size_t)t * C;
      const float r = rstd[t];
      if (in16) {
        const uint16_t *restrict x = (const uint16_t *)inp + (size_t)t * C;
        for (int c = c0; c < c1; c++) dw[c] += dy[c] * lc_bf16_widen(x[c]) * r;
      } else {
        const float *restrict x = (const float *)inp + (size_t)t * C;
        for (int c = c0; c < c1; c++) dw[c] += dy[c] * x[c] * r;
      }
    }
  }
#pragma omp parallel for schedule(static) if (par)
  for (int t = 0; t < T; t++) {
    ROW_TMP(tmp, in16, C);
    const float *dy = dout + (size_t)t * C;
    const float *x = row_in(inp, in16, (size_t)t, C, tmp);
    float *dx = dinp + (size_t)t * C;
    const float r = rstd[t];
    double dot = 0.0;
#pragma omp simd reduction(+ : dot)
    for (int c = 0; c < C; c++) dot += (double)(dy[c] * w[c]) * (double)x[c];
    const float k = (float)((double)r * r * r * dot / C);
    if (accumulate)
      for (int c = 0; c < C; c++) dx[c] += r * dy[c] * w[c] - x[c] * k;
    else // dx may be dy: each element is read before it is written
      for (int c = 0; c < C; c++) dx[c] = r * dy[c] * w[c] - x[c] * k;
  }
}

void lc_rmsnorm_bwd(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                    const float *rstd, int T, int C) {
  rmsnorm_bwd(dinp, dw, dout, inp, 0, w, rstd, T, C, 1);
}

void lc_rmsnorm_bwd_set(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                        const float *rstd, int T, int C) {
  rmsnorm_bwd(dinp, dw, dout, inp, 0, w, rstd, T, C, 0);
}

void lc_rmsnorm_bwd_in(float *dinp, float *dw, const float *dout, const void *inp, lc_dtype in_dt, const float *w,
                       const float *rstd, int T, int C, int set) {
  rmsnorm_bwd(dinp, dw, dout, inp, in_dt == LC_DT_BF16, w, rstd, T, C, !set);
}
