#include "core/dtype.h"

#include <string.h>

static const struct {
  const char *name;
  size_t size, block, block_bytes; // (block 0: one element of `size` bytes)
} info[LC_DT_COUNT] = {
    [LC_DT_F32] = {"F32", 4},         [LC_DT_BF16] = {"BF16", 2},       [LC_DT_F16] = {"F16", 2},
    [LC_DT_F64] = {"F64", 8},         [LC_DT_I32] = {"I32", 4},         [LC_DT_I64] = {"I64", 8},
    [LC_DT_U8] = {"U8", 1},           [LC_DT_U64] = {"U64", 8},         [LC_DT_U32] = {"U32", 4},
    [LC_DT_I16] = {"I16", 2},         [LC_DT_U16] = {"U16", 2},         [LC_DT_I8] = {"I8", 1},
    [LC_DT_BOOL] = {"BOOL", 1},       [LC_DT_F8_E4M3] = {"F8_E4M3", 1}, [LC_DT_F8_E5M2] = {"F8_E5M2", 1},
    [LC_DT_F8_E8M0] = {"F8_E8M0", 1}, [LC_DT_C64] = {"C64", 8},
    // ggml's block layouts (ggml-common.h)
    [LC_DT_Q8_0] = {"Q8_0", 1, 32, 34},   [LC_DT_Q4_0] = {"Q4_0", 1, 32, 18},   [LC_DT_Q4_1] = {"Q4_1", 1, 32, 20},
    [LC_DT_Q5_0] = {"Q5_0", 1, 32, 22},   [LC_DT_Q5_1] = {"Q5_1", 1, 32, 24},   [LC_DT_Q4_K] = {"Q4_K", 1, 256, 144},
    [LC_DT_Q5_K] = {"Q5_K", 1, 256, 176}, [LC_DT_Q6_K] = {"Q6_K", 1, 256, 210},
};

size_t lc_dtype_block(lc_dtype t) { return lc_dtype_is_quant(t) ? info[t].block : 1; }
size_t lc_dtype_block_bytes(lc_dtype t) { return lc_dtype_is_quant(t) ? info[t].block_bytes : lc_dtype_size(t); }

size_t lc_dtype_size(lc_dtype t) { return (int)t >= 0 && t < LC_DT_COUNT ? info[t].size : 0; }

const char *lc_dtype_name(lc_dtype t) { return (int)t >= 0 && t < LC_DT_COUNT ? info[t].name : "?"; }

int lc_dtype_from_name(const char *name, lc_dtype *t) {
  for (int i = 0; i < LC_DT_QFIRST && name; i++)
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
