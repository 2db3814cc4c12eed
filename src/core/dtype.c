#include "core/dtype.h"

#include <string.h>

static const struct {
  const char *name;
  size_t size;
} info[LC_DT_COUNT] = {
    [LC_DT_F32] = {"F32", 4},         [LC_DT_BF16] = {"BF16", 2},       [LC_DT_F16] = {"F16", 2},
    [LC_DT_F64] = {"F64", 8},         [LC_DT_I32] = {"I32", 4},         [LC_DT_I64] = {"I64", 8},
    [LC_DT_U8] = {"U8", 1},           [LC_DT_U64] = {"U64", 8},         [LC_DT_U32] = {"U32", 4},
    [LC_DT_I16] = {"I16", 2},         [LC_DT_U16] = {"U16", 2},         [LC_DT_I8] = {"I8", 1},
    [LC_DT_BOOL] = {"BOOL", 1},       [LC_DT_F8_E4M3] = {"F8_E4M3", 1}, [LC_DT_F8_E5M2] = {"F8_E5M2", 1},
    [LC_DT_F8_E8M0] = {"F8_E8M0", 1}, [LC_DT_C64] = {"C64", 8},
};

size_t lc_dtype_size(lc_dtype t) { return (int)t >= 0 && t < LC_DT_COUNT ? info[t].size : 0; }

const char *lc_dtype_name(lc_dtype t) { return (int)t >= 0 && t < LC_DT_COUNT ? info[t].name : "?"; }

int lc_dtype_from_name(const char *name, lc_dtype *t) {
  for (int i = 0; i < LC_DT_COUNT && name; i++)
    if (!strcmp(name, info[i].name)) {
      *t = (lc_dtype)i;
      return 1;
    }
  return 0;
}

int lc_dtype_is_float(lc_dtype t) { return t == LC_DT_F32 || t == LC_DT_BF16 || t == LC_DT_F16; }

lc_status lc_dtype_parse_user(const char *s, const char *flag, lc_dtype *t) {
  if (s && !strcmp(s, "fp32")) *t = LC_DT_F32;
  else if (s && !strcmp(s, "bf16")) *t = LC_DT_BF16;
  else return lc_fail(LC_EINVAL, "%s '%s': use fp32 or bf16", flag, s ? s : "");
  return LC_OK;
}

float lc_bf16_to_f32(uint16_t h) {
  uint32_t b = (uint32_t)h << 16;
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}

uint16_t lc_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); // NaN: quiet
  u += 0x7fffu + ((u >> 16) & 1u); // round to nearest, ties to even (carries into the exponent)
  return (uint16_t)(u >> 16);
}

// Branch-free narrowing for the array loops (vectorises): NaN keeps its top bits and is
// made quiet, as lc_f32_to_bf16 does.
static inline uint32_t narrow_bits(uint32_t u) {
  const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  const uint32_t nan = ((u & 0x7fffffffu) > 0x7f800000u) ? 0xffffffffu : 0u;
  return (nan & ((u & 0xffff0000u) | 0x00400000u)) | (~nan & r);
}

#define LC_BF16_PAR 65536 // below this many elements a thread team costs more than it saves

void lc_bf16_round(float *x, size_t n) {
  uint32_t *u = (uint32_t *)(void *)x;
#pragma omp parallel for schedule(static) if (n >= LC_BF16_PAR)
  for (size_t i = 0; i < n; i++) u[i] = narrow_bits(u[i]);
}

void lc_bf16_round_copy(float *dst, const float *src, size_t n) {
  const uint32_t *a = (const uint32_t *)(const void *)src;
  uint32_t *b = (uint32_t *)(void *)dst;
#pragma omp parallel for schedule(static) if (n >= LC_BF16_PAR)
  for (size_t i = 0; i < n; i++) b[i] = narrow_bits(a[i]);
}

void lc_bf16_pack(uint16_t *dst, const float *src, size_t n) {
  const uint32_t *u = (const uint32_t *)(const void *)src;
#pragma omp parallel for schedule(static) if (n >= LC_BF16_PAR)
  for (size_t i = 0; i < n; i++) dst[i] = (uint16_t)(narrow_bits(u[i]) >> 16);
}

void lc_bf16_unpack(float *dst, const uint16_t *src, size_t n) {
  uint32_t *u = (uint32_t *)(void *)dst;
#pragma omp parallel for schedule(static) if (n >= LC_BF16_PAR)
  for (size_t i = 0; i < n; i++) u[i] = (uint32_t)src[i] << 16;
}

void lc_bf16_unpack_inplace(float *buf, size_t n) {
  const uint16_t *h = (const uint16_t *)(const void *)buf + n; // bytes [2n, 4n)
  size_t a = 0;
  // A chunk [a, b) writes bytes [4a, 4b) and reads [2n + 2a, 2n + 2b): disjoint when
  // b <= (n + a) / 2, so each chunk may run in parallel; the chunks halve towards the end.
  while (n - a >= LC_BF16_PAR) {
    const size_t b = (n + a) / 2;
    lc_bf16_unpack(buf + a, h + a, b - a);
    a = b;
  }
  for (; a < n; a++) buf[a] = lc_bf16_to_f32(h[a]); // in order: each read precedes its overwrite
}

float lc_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign; // +-0
    } else {       // subnormal: man * 2^-24; normalise into a float normal
      uint32_t e = 113; // 127 - 15 + 1
      while (!(man & 0x400u)) {
        man <<= 1;
        e--;
      }
      bits = sign | (e << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13); // inf, or NaN with its payload
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}
