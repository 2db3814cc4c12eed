// LoRA dropout's mask (dropout.h), applied to rows of an operand.
#include "backend/cpu/ops/dropout.h"

#include <string.h>

void lc_dropout_mask(void *dst, const void *src, lc_dtype dt, int rows, int cols, const int *gidx, uint64_t key,
                     uint32_t thr, int accumulate) {
  const int f32 = dt == LC_DT_F32;
#pragma omp parallel for schedule(static) if ((size_t)rows * cols >= ((size_t)1 << 15))
  for (int r = 0; r < rows; r++) {
    const uint32_t g = (uint32_t)gidx[r];
    const size_t o = (size_t)r * cols;
    if (f32) {
      float *d = (float *)dst + o;
      const float *s = (const float *)src + o;
      if (accumulate) {
        for (int j = 0; j < cols; j++)
          if (lc_dropout_bits(key, g, (uint32_t)j) >= thr) d[j] += s[j];
      } else {
        for (int j = 0; j < cols; j++) d[j] = lc_dropout_bits(key, g, (uint32_t)j) >= thr ? s[j] : 0.0f;
      }
    } else {
      uint16_t *d = (uint16_t *)dst + o;
      const uint16_t *s = (const uint16_t *)src + o;
      for (int j = 0; j < cols; j++) d[j] = lc_dropout_bits(key, g, (uint32_t)j) >= thr ? s[j] : (uint16_t)0;
    }
  }
}
