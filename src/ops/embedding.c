// Token embedding: a row gather forward, a row scatter-add backward.
#include "ops/ops.h"
#include "ops/kernels.h"

#include <string.h>

#define LC_EMB_PAR_MIN 32768L // T*C elements below which one thread is faster
#define LC_EMB_CBLK 128       // backward column block (floats) owned by one thread

void lc_embedding_fwd(float *out, const int *tokens, const float *wte, int T, int C) {
#pragma omp parallel for schedule(static) if ((long)T * C > LC_EMB_PAR_MIN)
  for (int t = 0; t < T; t++)
    memcpy(out + (size_t)t * C, wte + (size_t)tokens[t] * C, sizeof(float) * (size_t)C);
}

void lc_embedding_fwd_bf16(float *out, const int *tokens, const uint16_t *wte, int T, int C) {
  void (*unpack)(float *, const uint16_t *, size_t) = lc_kern()->bf16_unpack;
#pragma omp parallel for schedule(static) if ((long)T * C > LC_EMB_PAR_MIN)
  for (int t = 0; t < T; t++) unpack(out + (size_t)t * C, wte + (size_t)tokens[t] * C, (size_t)C);
}

// Repeated tokens scatter into the same dwte row, so threads split the COLUMNS: each
// thread owns a column block of every row and walks all tokens in order (race-free and
// bit-identical for any thread count).
void lc_embedding_bwd(float *dwte, const float *dout, const int *tokens, int T, int C) {
  const int nblk = (C + LC_EMB_CBLK - 1) / LC_EMB_CBLK;
#pragma omp parallel for schedule(static) if ((long)T * C > LC_EMB_PAR_MIN && nblk > 1)
  for (int b = 0; b < nblk; b++) {
    const int c0 = b * LC_EMB_CBLK;
    const int c1 = c0 + LC_EMB_CBLK < C ? c0 + LC_EMB_CBLK : C;
    for (int t = 0; t < T; t++) {
      float *restrict dst = dwte + (size_t)tokens[t] * C;
      const float *restrict src = dout + (size_t)t * C;
      for (int c = c0; c < c1; c++) dst[c] += src[c];
    }
  }
}
