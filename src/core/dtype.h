// The one vocabulary of element types: the communicator, the file formats (safetensors
// names every dtype it may meet here), the arena's size functions and the memory model
// count sizes in these, and the conversions between the float types live here.
#ifndef LC_DTYPE_H
#define LC_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef enum {
  LC_DT_F32 = 0,
  LC_DT_BF16,
  LC_DT_F16,
  LC_DT_F64,
  LC_DT_I32,
  LC_DT_I64,
  LC_DT_U8,
  // Types a file may hold that longctx only moves or skips, never computes with.
  LC_DT_U64,
  LC_DT_U32,
  LC_DT_I16,
  LC_DT_U16,
  LC_DT_I8,
  LC_DT_BOOL,
  LC_DT_F8_E4M3,
  LC_DT_F8_E5M2,
  LC_DT_F8_E8M0,
  LC_DT_C64,
  // ggml's quantized blocks (a GGUF file's own storage; core/dequant.h): a frozen LoRA base
  // held as the file holds it (QLoRA) and read by the GEMMs a tile at a time. n elements
  // are n / block blocks of block_bytes each (n a multiple of the block).
  LC_DT_Q8_0,
  LC_DT_Q4_0,
  LC_DT_Q4_1,
  LC_DT_Q5_0,
  LC_DT_Q5_1,
  LC_DT_Q4_K,
  LC_DT_Q5_K,
  LC_DT_Q6_K,
  LC_DT_COUNT
} lc_dtype;
#define LC_DT_QFIRST LC_DT_Q8_0

// Bytes per element (0 for an invalid value; 1 for a block type, whose views are placed
// by byte offsets: lc_buf_part).
size_t lc_dtype_size(lc_dtype t);
// 1 for ggml's block types (LC_DT_Q8_0 ..).
static inline int lc_dtype_is_quant(lc_dtype t) { return t >= LC_DT_QFIRST && t < LC_DT_COUNT; }
// Elements per block and bytes per block of a block type (1 and the element size otherwise).
size_t lc_dtype_block(lc_dtype t);
size_t lc_dtype_block_bytes(lc_dtype t);
// Bytes of n elements of type t: what every size function counts with (a block type: whole
// blocks, n rounded up to one).
static inline size_t lc_bytes(lc_dtype t, size_t n) {
  return lc_dtype_is_quant(t) ? (n + lc_dtype_block(t) - 1) / lc_dtype_block(t) * lc_dtype_block_bytes(t)
                              : lc_dtype_size(t) * n;
}
// Name as safetensors writes it: "F32", "BF16", "F16", ... (the block types as ggml names
// them: "Q4_K"; "?" if invalid).
const char *lc_dtype_name(lc_dtype t);
// The dtype a safetensors name stands for; 0 (and *t untouched) if it names none (never a
// block type: safetensors has none).
int lc_dtype_from_name(const char *name, lc_dtype *t);
// Float types longctx converts to and from float (F32, BF16, F16).
int lc_dtype_is_float(lc_dtype t);

// The user's word for a float type: "fp32" or "bf16" (what --save-dtype, and later
// --precision, take). LC_EINVAL naming `flag` and the choices otherwise.
lc_status lc_dtype_parse_user(const char *s, const char *flag, lc_dtype *t);

// Exact widenings (subnormals, infinities and NaN payloads kept).
float lc_bf16_to_f32(uint16_t h);
float lc_f16_to_f32(uint16_t h);
// Narrowing to bf16, rounding to nearest with ties to even (what PyTorch's .to(bfloat16)
// does); infinities kept, NaN stays NaN (quiet), overflow rounds to infinity.
uint16_t lc_f32_to_bf16(float f);

// The bits of the bf16 nearest to the float with bits u (round to nearest even; NaN
// stays a quiet NaN), in the upper half of a float's bits: the rule every cast uses. The
// array casts (lc_bf16_round, _pack, _unpack, ...) are kernels: backend/cpu/kern/kernels.h.
static inline uint32_t lc_bf16_narrow_bits(uint32_t u) {
  const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  const uint32_t nan = ((u & 0x7fffffffu) > 0x7f800000u) ? 0xffffffffu : 0u;
  return (nan & ((u & 0xffff0000u) | 0x00400000u)) | (~nan & r);
}

// Inline scalar forms for loops that read or write bf16 values (they vectorize).
static inline float lc_bf16_widen(uint16_t h) {
  union {
    uint32_t u;
    float f;
  } v = {(uint32_t)h << 16};
  return v.f;
}
static inline uint16_t lc_bf16_narrow(float f) {
  union {
    float f;
    uint32_t u;
  } v = {f};
  return (uint16_t)(lc_bf16_narrow_bits(v.u) >> 16);
}
// Element i of an array that is fp32, or (is16) 2-byte bf16, as a float (exact).
static inline float lc_elem_f32(const void *x, int is16, size_t i) {
  return is16 ? lc_bf16_widen(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}

#endif
