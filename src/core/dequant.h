// ggml's quantized blocks (core/dtype.h's LC_DT_Q8_0 .. LC_DT_Q6_K) dequantized to float:
// the GGUF reader's conversion and the GEMMs' tiles of a quantized frozen base (matmul.c).
#ifndef LC_DEQUANT_H
#define LC_DEQUANT_H

#include <stddef.h>

#include "core/dtype.h"

// n elements (a multiple of the type's block) of block type t at src into dst, ggml's bits.
// A type that is not a block type writes nothing.
void lc_dequant(lc_dtype t, const void *src, size_t n, float *dst);
// rows x cols (cols a multiple of the block) of a row-major block matrix into dense dst,
// threaded over rows.
void lc_dequant_rows(lc_dtype t, const void *src, size_t rows, size_t cols, float *dst);

#endif
