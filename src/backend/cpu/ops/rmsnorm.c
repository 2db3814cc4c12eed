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

void lc_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *w, int T, int C,
                    float eps) {
#pragma omp parallel for schedule(static) if ((long)T * C > LC_RMS_PAR_MIN)
  for (int t = 0; t < T; t++) {
    const float *x = inp + (size_t)t * C;
    float *o = out + (size_t)t * C;
    const float r = row_rstd(x, C, eps);
    rstd[t] = r;
    for (int c = 0; c < C; c++) o[c] = (x[c] * r) * w[c];
  }
}

void lc_rmsnorm_fwd_to(void *out, lc_dtype out_dt, float *rstd, const float *inp, const float *w, int T, int C,
                       float eps) {
  if (out_dt != LC_DT_BF16) {
    lc_rmsnorm_fwd(out, rstd, inp, w, T, C, eps);
    return;
  }
#pragma omp parallel for schedule(static) if ((long)T * C > LC_RMS_PAR_MIN)
  for (int t = 0; t < T; t++) {
    const float *x = inp + (size_t)t * C;
    uint16_t *o = (uint16_t *)out + (size_t)t * C;
    const float r = row_rstd(x, C, eps);
    rstd[t] = r;
    for (int c = 0; c < C; c++) o[c] = lc_bf16_narrow((x[c] * r) * w[c]);
  }
}

// With y = x*r*w and r = (mean(x^2)+eps)^(-1/2):  dr/dx_j = -r^3 x_j / C, so
//   dx_j = r*dy_j*w_j - x_j * r^3 * (sum_c dy_c w_c x_c) / C
//   dw_c = sum_t dy[t,c] * x[t,c] * r[t]
static void rmsnorm_bwd(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
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
      const float *restrict x = inp + (size_t)t * C;
      const float r = rstd[t];
      for (int c = c0; c < c1; c++) dw[c] += dy[c] * x[c] * r;
    }
  }
#pragma omp parallel for schedule(static) if (par)
  for (int t = 0; t < T; t++) {
    const float *dy = dout + (size_t)t * C;
    const float *x = inp + (size_t)t * C;
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
  rmsnorm_bwd(dinp, dw, dout, inp, w, rstd, T, C, 1);
}

void lc_rmsnorm_bwd_set(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                        const float *rstd, int T, int C) {
  rmsnorm_bwd(dinp, dw, dout, inp, w, rstd, T, C, 0);
}
