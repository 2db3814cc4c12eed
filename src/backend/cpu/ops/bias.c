// Bias of a linear layer (Qwen2's q/k/v projections, attention_bias): forward adds it to
// every row, backward sums the rows' gradients.
#include "backend/cpu/ops/ops.h"

#define LC_BIAS_PAR_MIN 32768L // T*N elements below which one thread is faster
#define LC_BIAS_CBLK 64        // db column block owned by one thread

void lc_bias_fwd(float *y, const float *b, int T, int N) {
#pragma omp parallel for schedule(static) if ((long)T * N > LC_BIAS_PAR_MIN)
  for (int t = 0; t < T; t++) {
    float *restrict r = y + (size_t)t * N;
    for (int n = 0; n < N; n++) r[n] += b[n];
  }
}

// Threads own column blocks: race-free, and each column sums its rows in order t = 0..T-1
// (fp32, as the weight gradients' GEMMs accumulate), so the result is the same for any
// thread count.
void lc_bias_bwd(float *db, const float *dy, int T, int N) {
  const int nblk = (N + LC_BIAS_CBLK - 1) / LC_BIAS_CBLK;
#pragma omp parallel for schedule(static) if ((long)T * N > LC_BIAS_PAR_MIN && nblk > 1)
  for (int b = 0; b < nblk; b++) {
    const int c0 = b * LC_BIAS_CBLK, c1 = c0 + LC_BIAS_CBLK < N ? c0 + LC_BIAS_CBLK : N;
    for (int t = 0; t < T; t++) {
      const float *restrict r = dy + (size_t)t * N;
      for (int c = c0; c < c1; c++) db[c] += r[c];
    }
  }
}

void lc_bias_bwd_bf16(float *db, const uint16_t *dy, int T, int N) {
  const int nblk = (N + LC_BIAS_CBLK - 1) / LC_BIAS_CBLK;
#pragma omp parallel for schedule(static) if ((long)T * N > LC_BIAS_PAR_MIN && nblk > 1)
  for (int b = 0; b < nblk; b++) {
    const int c0 = b * LC_BIAS_CBLK, c1 = c0 + LC_BIAS_CBLK < N ? c0 + LC_BIAS_CBLK : N;
    for (int t = 0; t < T; t++) {
      const uint16_t *restrict r = dy + (size_t)t * N;
      for (int c = c0; c < c1; c++) db[c] += lc_bf16_widen(r[c]);
    }
  }
}
