// ggml's quantized blocks dequantized to float (core/dequant.h).
//
// Block layouts and arithmetic as ggml-quants.c's dequantize_row_* (reference C): every
// product and difference in float, in the same order, so the results are ggml's bits (and
// gguf-py's, which computes the same expressions in numpy float32). Compiled in ISO C
// mode (-std=c11: GCC's -ffp-contract=off), so no a*b+c becomes an FMA; test_gguf checks
// the bits against gguf-py for every type.
#include "core/dequant.h"

#include <string.h>

static uint16_t le16(const unsigned char *b) { return (uint16_t)(b[0] | b[1] << 8); }
static uint32_t le32(const unsigned char *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static float h2f(const unsigned char *b) { return lc_f16_to_f32(le16(b)); }

static void dq_q4_0(const unsigned char *x, float *y) {
  const float d = h2f(x);
  for (int j = 0; j < 16; j++) {
    y[j] = (float)((x[2 + j] & 0x0f) - 8) * d;
    y[j + 16] = (float)((x[2 + j] >> 4) - 8) * d;
  }
}

static void dq_q4_1(const unsigned char *x, float *y) {
  const float d = h2f(x), m = h2f(x + 2);
  for (int j = 0; j < 16; j++) {
    const float a = (float)(x[4 + j] & 0x0f) * d, b = (float)(x[4 + j] >> 4) * d;
    y[j] = a + m;
    y[j + 16] = b + m;
  }
}

static void dq_q5_0(const unsigned char *x, float *y) {
  const float d = h2f(x);
  const uint32_t qh = le32(x + 2);
  const unsigned char *qs = x + 6;
  for (int j = 0; j < 16; j++) {
    const int xh0 = (int)((qh >> j) << 4) & 0x10, xh1 = (int)(qh >> (j + 12)) & 0x10;
    y[j] = (float)(((qs[j] & 0x0f) | xh0) - 16) * d;
    y[j + 16] = (float)(((qs[j] >> 4) | xh1) - 16) * d;
  }
}

static void dq_q5_1(const unsigned char *x, float *y) {
  const float d = h2f(x), m = h2f(x + 2);
  const uint32_t qh = le32(x + 4);
  const unsigned char *qs = x + 8;
  for (int j = 0; j < 16; j++) {
    const int xh0 = (int)((qh >> j) << 4) & 0x10, xh1 = (int)(qh >> (j + 12)) & 0x10;
    const float a = (float)((qs[j] & 0x0f) | xh0) * d, b = (float)((qs[j] >> 4) | xh1) * d;
    y[j] = a + m;
    y[j + 16] = b + m;
  }
}

static void dq_q8_0(const unsigned char *x, float *y) {
  const float d = h2f(x);
  for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)x[2 + j] * d;
}

// The 6-bit scale and min of sub-block j of a Q4_K/Q5_K block (ggml's get_scale_min_k4).
static void scale_min_k4(int j, const unsigned char *q, int *d, int *m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// The scales and minimums of sub-blocks is and is + 1 (Q4_K, Q5_K: two per 64 values).
static void sub_pair(int is, const unsigned char *sc, float d, float min, float *d1, float *m1, float *d2, float *m2) {
  int s, m;
  scale_min_k4(is, sc, &s, &m);
  *d1 = d * (float)s, *m1 = min * (float)m;
  scale_min_k4(is + 1, sc, &s, &m);
  *d2 = d * (float)s, *m2 = min * (float)m;
}

// Q4_K: d, dmin (f16), scales[12], qs[128]: 8 sub-blocks of 32.
static void dq_q4_k(const unsigned char *x, float *y) {
  const float d = h2f(x), min = h2f(x + 2);
  const unsigned char *sc = x + 4, *q = x + 16;
  for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
    float d1, m1, d2, m2;
    sub_pair(is, sc, d, min, &d1, &m1, &d2, &m2);
    for (int l = 0; l < 32; l++) {
      const float a = d1 * (float)(q[l] & 0x0f);
      *y++ = a - m1;
    }
    for (int l = 0; l < 32; l++) {
      const float a = d2 * (float)(q[l] >> 4);
      *y++ = a - m2;
    }
  }
}

// Q5_K: d, dmin (f16), scales[12], qh[32], qs[128].
static void dq_q5_k(const unsigned char *x, float *y) {
  const float d = h2f(x), min = h2f(x + 2);
  const unsigned char *sc = x + 4, *qh = x + 16, *ql = x + 48;
  unsigned u1 = 1, u2 = 2;
  for (int j = 0, is = 0; j < 256; j += 64, is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
    float d1, m1, d2, m2;
    sub_pair(is, sc, d, min, &d1, &m1, &d2, &m2);
    for (int l = 0; l < 32; l++) {
      const float a = d1 * (float)((ql[l] & 0x0f) + (qh[l] & u1 ? 16 : 0));
      *y++ = a - m1;
    }
    for (int l = 0; l < 32; l++) {
      const float a = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0));
      *y++ = a - m2;
    }
  }
}

// Q6_K: ql[128], qh[64], scales[16] (int8), d (f16).
static void dq_q6_k(const unsigned char *x, float *y) {
  const float d = h2f(x + 208);
  const unsigned char *ql = x, *qh = x + 128;
  const int8_t *sc = (const int8_t *)(x + 192);
  for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; l++) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0f) | ((qh[l] >> 0) & 3) << 4) - 32;
      const int q2 = ((ql[l + 32] & 0x0f) | ((qh[l] >> 2) & 3) << 4) - 32;
      const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
      const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
      const float s1 = d * (float)sc[is + 0], s2 = d * (float)sc[is + 2], s3 = d * (float)sc[is + 4],
                  s4 = d * (float)sc[is + 6];
      y[l + 0] = s1 * (float)q1;
      y[l + 32] = s2 * (float)q2;
      y[l + 64] = s3 * (float)q3;
      y[l + 96] = s4 * (float)q4;
    }
  }
}

typedef void (*dq_fn)(const unsigned char *, float *);
static dq_fn dq_of(lc_dtype t) {
  switch (t) {
  case LC_DT_Q8_0: return dq_q8_0;
  case LC_DT_Q4_0: return dq_q4_0;
  case LC_DT_Q4_1: return dq_q4_1;
  case LC_DT_Q5_0: return dq_q5_0;
  case LC_DT_Q5_1: return dq_q5_1;
  case LC_DT_Q4_K: return dq_q4_k;
  case LC_DT_Q5_K: return dq_q5_k;
  case LC_DT_Q6_K: return dq_q6_k;
  default: return NULL;
  }
}

void lc_dequant(lc_dtype t, const void *src, size_t n, float *dst) {
  const dq_fn f = dq_of(t);
  if (!f) return;
  const size_t bs = lc_dtype_block(t), bb = lc_dtype_block_bytes(t);
  const unsigned char *x = src;
  for (size_t b = 0; b < n / bs; b++) f(x + b * bb, dst + b * bs);
}

void lc_dequant_rows(lc_dtype t, const void *src, size_t rows, size_t cols, float *dst) {
  const size_t rb = lc_bytes(t, cols);
  const unsigned char *x = src;
#pragma omp parallel for schedule(static) if (rows * cols >= ((size_t)1 << 15))
  for (size_t r = 0; r < rows; r++) lc_dequant(t, x + r * rb, cols, dst + r * cols);
}
