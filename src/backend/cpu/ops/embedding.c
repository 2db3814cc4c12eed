// Token embedding: a row gather forward, a row scatter-add backward.
#include "backend/cpu/ops/ops.h"
#include "backend/cpu/kern/kernels.h"
#include "core/dequant.h"

#include <limits.h>
#include <string.h>

#define LC_EMB_PAR_MIN 32768L // T*C elements below which one thread is faster
#define LC_EMB_CBLK 128       // backward column block (floats) owned by one thread

void lc_embedding_fwd(float *out, const int *tokens, const float *wte, int T, int C) {
  lc_embedding_fwd_rows(out, tokens, wte, LC_DT_F32, T, C, 0, INT_MAX);
}

void lc_embedding_fwd_bf16(float *out, const int *tokens, const uint16_t *wte, int T, int C) {
  lc_embedding_fwd_rows(out, tokens, wte, LC_DT_BF16, T, C, 0, INT_MAX);
}

void lc_embedding_fwd_rows(float *out, const int *tokens, const void *wte, lc_dtype dt, int T, int C, int r0, int r1) {
  void (*unpack)(float *, const uint16_t *, size_t) = lc_kern()->bf16_unpack;
#pragma omp parallel for schedule(static) if ((long)T * C > LC_EMB_PAR_MIN)
  for (int t = 0; t < T; t++) {
    if (tokens[t] < r0 || tokens[t] >= r1) continue;
    const size_t row = (size_t)(tokens[t] - r0) * C;
    if (lc_dtype_is_quant(dt)) // a frozen base's rows in blocks (QLoRA): whole blocks per row
      lc_dequant(dt, (const unsigned char *)wte + (size_t)(tokens[t] - r0) * lc_bytes(dt, (size_t)C), (size_t)C,
                 out + (size_t)t * C);
    else if (dt == LC_DT_BF16) unpack(out + (size_t)t * C, (const uint16_t *)wte + row, (size_t)C);
    else memcpy(out + (size_t)t * C, (const float *)wte + row, sizeof(float) * (size_t)C);
  }
}

// Repeated tokens scatter into the same dwte row, so threads split the COLUMNS: each
// thread owns a column block of every row and walks all tokens in order (race-free and
// bit-identical for any thread count).
void lc_embedding_bwd(float *dwte, const float *dout, const int *tokens, int T, int C) {
  lc_embedding_bwd_rows(dwte, dout, tokens, T, C, 0, INT_MAX);
}

void lc_embedding_bwd_rows(float *dwte, const float *dout, const int *tokens, int T, int C, int r0, int r1) {
  const int nblk = (C + LC_EMB_CBLK - 1) / LC_EMB_CBLK;
#pragma omp parallel for schedule(static) if ((long)T * C > LC_EMB_PAR_MIN && nblk > 1)
  for (int b = 0; b < nblk; b++) {
    const int c0 = b * LC_EMB_CBLK;
    const int c1 = c0 + LC_EMB_CBLK < C ? c0 + LC_EMB_CBLK : C;
    for (int t = 0; t < T; t++) {
      if (tokens[t] < r0 || tokens[t] >= r1) continue;
      float *restrict dst = dwte + (size_t)(tokens[t] - r0) * C;
      const float *restrict src = dout + (size_t)t * C;
      for (int c = c0; c < c1; c++) dst[c] += src[c];
    }
  }
}
