// The primitives of the blockwise attention kernel (backend/cpu/flash/flash_body.h), one file per
// instruction set, picked at compile time by the variant's target flags (CMakeLists.txt):
// AVX-512 when the variant is compiled for it, else portable vector extensions. Included
// by flash_body.h (once per variant file) after BQ, BK and LC_AI are defined. Every
// instruction set provides:
//   mk(R, NC, mode, K, A, sar, sak, B, ldb, C, ldc, alpha): the register-tiled micro-kernel
//     (below), with RM1..RM4, its rows per tile for NC = 1..4 groups of 16 columns;
//   tile_softmax, tile_probs, tile_dscores: the elementwise parts on a tile St[nk][64];
//   pack_t, unpack_t: transposed packing of a query block and transposed write-back.
#ifndef LC_FLASH_PRIMS_H
#define LC_FLASH_PRIMS_H

// exp2 with relative error < 1e-7 (degree-6 polynomial on [-0.5, 0.5], least squares
// on the relative error; coefficients fitted in long double). Inputs below -126 give
// exactly 0 (so -INFINITY -> 0 and no denormals), inputs must be <= 127 (softmax
// arguments are <= 0 up to rounding).
#define EXP2_C1 6.931471825e-01f
#define EXP2_C2 2.402264774e-01f
#define EXP2_C3 5.550329015e-02f
#define EXP2_C4 9.618373588e-03f
#define EXP2_C5 1.339984825e-03f
#define EXP2_C6 1.537070493e-04f

// ---------------------------------------------------------------------------------
// Micro-kernel: C[r][0..16*NC) (mode 0: =, mode 1: +=, mode 2: = alpha[c]*C +)
//   sum_{k<K} A[r*sar + k*sak] * B[k*ldb + c],  r < R.
// R, NC, mode are compile-time constants after inlining, so the R x NC accumulators
// live in registers (R*NC <= 24 + NC B-vectors + 1 broadcast <= 32 zmm).

// Transposed packing of a query block and transposed write-back:
// pack_t:   dst[d*BQ + i] = src[i*ld + d] * sc   (i < BQ, d < D; rows i >= n are 0)
// unpack_t: dst[i*ld + d] (= | +=) src[d*BQ + i] * rs[i]   (i < n, d < D; rs NULL: 1)

#if defined(__AVX512F__)
#include "backend/cpu/flash/flash_prims_avx512.h"
#else
#include "backend/cpu/flash/flash_prims_portable.h"
#endif

#endif
