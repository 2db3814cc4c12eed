// bf16 tile products of the attention kernel (the kernel table's bf16 level): AVX512_BF16
// vdpbf16ps multiplies pairs of bf16 values and adds both products to an fp32 lane, so
// every operand is stored as 32-bit words holding two bf16 values that are consecutive
// along the reduction index k ("pairs"). Included by backend/cpu/flash/flash_body.h when LC_FLASH_BF16
// is defined, after the fp32 primitives (the softmax, masks and transposes stay fp32).
//
// Layouts (uint32 words; lo half = even k, hi half = odd k; a missing partner is 0):
//   B operands, [K/2][64 columns]: Qp (q block, pairs along d), dOp, Pp / dSp (a
//     probability / score-gradient tile, pairs along keys); [BQ/2][Dp]: Qn2, dOn2 (pairs
//     along queries).
//   A operands (broadcast, row r, pair k'): KP/VP [Hkv][Tk][D2] (k, v rows, pairs along d),
//     KT/VT [Hkv][D][Tk2] (transposed, pairs along keys), P16/dS16 [BK][BQ/2] (a tile's
//     rows, pairs along queries).
// Products of bf16 values are exact in fp32; sums are fp32. P and dS are rounded to bf16
// before they multiply (FlashAttention's bf16 contract); q, k, v, dout are rounded when
// packed (a no-op on the bf16 values a bf16 pass gives).
#ifndef LC_FLASH_BF16_H
#define LC_FLASH_BF16_H

#include <immintrin.h>
#include <stdint.h>

#include "core/dtype.h"

LC_AI uint32_t bf_lo(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return lc_bf16_narrow_bits(u) >> 16;
}
LC_AI uint32_t bf_pair(float lo, float hi) {
  uint32_t u;
  memcpy(&u, &hi, 4);
  return bf_lo(lo) | lc_bf16_narrow_bits(u);
}

// C[r][0..16*NC) (mode 0: =, 1: +=, 2: = alpha[c]*C +) sum_{k'<K2} dot2(A[r*sar + k'], B[k'*ldb + c]).
LC_AI void mk16(const int R, const int NC, const int mode, int K2, const uint32_t *restrict A, long sar,
                const uint32_t *restrict B, long ldb, float *restrict C, long ldc,
                const float *restrict alpha) {
  __m512 acc[16][4];
#pragma GCC unroll 16
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) {
      if (mode == 0)
        acc[r][c] = _mm512_setzero_ps();
      else if (mode == 1)
        acc[r][c] = _mm512_loadu_ps(C + r * ldc + 16 * c);
      else
        acc[r][c] = _mm512_mul_ps(_mm512_loadu_ps(C + r * ldc + 16 * c), _mm512_loadu_ps(alpha + 16 * c));
    }
#pragma GCC unroll 2
  for (int k = 0; k < K2; k++) {
    __m512i b[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) b[c] = _mm512_loadu_si512((const void *)(B + k * ldb + 16 * c));
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
      __m512i a = _mm512_set1_epi32((int)A[r * sar + k]);
#pragma GCC unroll 4
      for (int c = 0; c < NC; c++) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], (__m512bh)a, (__m512bh)b[c]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(C + r * ldc + 16 * c, acc[r][c]);
}

#define MK16_CASE(n) \
  case n:            \
    if (n < RM) mk16(n < RM ? n : 1, NC, mode, K2, A + r * sar, sar, B, ldb, C + r * ldc, ldc, alpha); \
    break;
LC_AI void mk16_rows(const int NC, const int RM, const int mode, int M, int K2, const uint32_t *A, long sar,
                     const uint32_t *B, long ldb, float *C, long ldc, const float *alpha) {
  int r = 0;
  for (; r + RM <= M; r += RM) mk16(RM, NC, mode, K2, A + r * sar, sar, B, ldb, C + r * ldc, ldc, alpha);
  switch (M - r) {
    MK16_CASE(1) MK16_CASE(2) MK16_CASE(3) MK16_CASE(4) MK16_CASE(5) MK16_CASE(6) MK16_CASE(7)
    MK16_CASE(8) MK16_CASE(9) MK16_CASE(10) MK16_CASE(11) MK16_CASE(12) MK16_CASE(13)
    MK16_CASE(14) MK16_CASE(15)
    default: break;
  }
}
#undef MK16_CASE

#ifndef LC_FLASH_AMX // the amx kernel multiplies on tiles (flash_amx.h)
// C[M][64] (mode as mk16) = A[M rows][K2 pairs] * B[K2][64]
static void t16_64(int mode, int M, int K2, const uint32_t *A, long sar, const uint32_t *B, float *C,
                   const float *alpha) {
  mk16_rows(4, RM4, mode, M, K2, A, sar, B, BQ, C, BQ, alpha);
}
// C[M][N] += A[M][K2] * B[K2][N] (rows ldb / ldc apart), N a multiple of 16.
static void t16_acc(int M, int K2, const uint32_t *A, long sar, const uint32_t *B, long ldb, float *C,
                    long ldc, int N) {
  int c0 = 0;
  for (; c0 + 64 <= N; c0 += 64) mk16_rows(4, RM4, 1, M, K2, A, sar, B + c0, ldb, C + c0, ldc, NULL);
  switch ((N - c0) / 16) {
    case 1: mk16_rows(1, RM1, 1, M, K2, A, sar, B + c0, ldb, C + c0, ldc, NULL); break;
    case 2: mk16_rows(2, RM2, 1, M, K2, A, sar, B + c0, ldb, C + c0, ldc, NULL); break;
    case 3: mk16_rows(3, RM3, 1, M, K2, A, sar, B + c0, ldb, C + c0, ldc, NULL); break;
    default: break;
  }
}
#endif

// ---- packing ----
// The per-item and per-tile packing uses the instruction's rounding (vcvtne2ps2bf16: to
// nearest even, like the scalar rule, except that subnormal inputs become 0: q, k, v and
// dout hold bf16 values, exact unless subnormal, i.e. below 1e-38; P is >= 2^-126 or 0 by
// exp2v; a subnormal dS is below 1e-38).
static const uint16_t pair_idx[32] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
                                      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
static __mmask16 first_lanes(long n) { return n <= 0 ? 0 : n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1u); }

// B operand of a query block, pairs along d: dst[d'][i] = (x[i][2d'], x[i][2d'+1]), i < BQ
// (rows i >= n are 0), d' < D2 = ceil(D/2): 16 rows x 16 pairs at a time, converted in order
// (a row's pairs are consecutive bf16 values) and transposed in registers (tr16).
static void pack_qp(uint32_t *dst, const float *src, long ld, int n, int D) {
  const int D2 = (D + 1) / 2;
  for (int i0 = 0; i0 < BQ; i0 += 16)
    for (int w0 = 0; w0 < D2; w0 += 16) {
      const int nw = D2 - w0 < 16 ? D2 - w0 : 16;
      const __mmask16 ma = first_lanes(D - 2L * w0), mb = first_lanes(D - 2L * w0 - 16);
      __m512 v[16];
      for (int r = 0; r < 16; r++) {
        if (i0 + r >= n) {
          v[r] = _mm512_setzero_ps();
          continue;
        }
        const float *x = src + (long)(i0 + r) * ld + 2 * w0;
        v[r] = (__m512)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(mb, x + 16), _mm512_maskz_loadu_ps(ma, x));
      }
      tr16(v);
      for (int c = 0; c < nw; c++) _mm512_storeu_ps((float *)(dst + (long)(w0 + c) * BQ + i0), v[c]);
    }
}
// B operand, pairs along queries: dst[i'][d] = (x[2i'][d], x[2i'+1][d]), d < Dp (0 past D).
static void pack_qn2(uint32_t *dst, const float *src, long ld, int n, int D, long Dp) {
  const __m512i idx = _mm512_loadu_si512((const void *)pair_idx);
  for (int i = 0; i < BQ / 2; i++) {
    const float *a = src + (long)(2 * i) * ld, *b = a + ld;
    const int ha = 2 * i < n, hb = 2 * i + 1 < n;
    for (long d = 0; d < Dp; d += 16) {
      const __mmask16 m = first_lanes(D - d);
      __m512 va = ha ? _mm512_maskz_loadu_ps(m, a + d) : _mm512_setzero_ps();
      __m512 vb = hb ? _mm512_maskz_loadu_ps(m, b + d) : _mm512_setzero_ps();
      _mm512_storeu_si512((void *)(dst + (long)i * Dp + d),
                          _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(vb, va)));
    }
  }
}
// A tile St[nk][64] as B operand, pairs along keys: dst[j'][i] = (S[2j'][i], S[2j'+1][i]).
static void pack_pp(uint32_t *dst, const float *S, int nk) {
  const __m512i idx = _mm512_loadu_si512((const void *)pair_idx);
  for (int j = 0; j < (nk + 1) / 2; j++) {
    const float *a = S + (long)(2 * j) * BQ, *b = a + BQ;
    const int hb = 2 * j + 1 < nk; // the missing partner of an odd last row is 0
    for (int c = 0; c < BQ; c += 16) {
      __m512 va = _mm512_loadu_ps(a + c), vb = hb ? _mm512_loadu_ps(b + c) : _mm512_setzero_ps();
      __m512i ab = (__m512i)_mm512_cvtne2ps_pbh(vb, va); // [a0..a15 | b0..b15] as bf16
      _mm512_storeu_si512((void *)(dst + (long)j * BQ + c), _mm512_permutexvar_epi16(idx, ab));
    }
  }
}
// The same tile as A operand, its rows with pairs along queries: dst[r][i'] = (S[r][2i'], S[r][2i'+1]).
static void pack_rows(uint32_t *dst, const float *S, int nk) {
  for (int r = 0; r < nk; r++) {
    const float *x = S + (long)r * BQ;
    uint32_t *o = dst + (long)r * (BQ / 2);
    _mm512_storeu_si512((void *)o, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x)));
    _mm512_storeu_si512((void *)(o + 16), (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 48), _mm512_loadu_ps(x + 32)));
  }
}
// S *= c over a tile's nk rows.
static void tile_scale(float *S, int nk, float c) {
  for (long e = 0; e < (long)nk * BQ; e++) S[e] *= c;
}

// The transposed pack is blocked by key tile: tr[g][key tile jb][d][BK/2 pairs], so the
// D x BK/2 words one tile's product reads are contiguous (TR_LD words a row) instead of D
// rows Tk2 words apart: at 32K keys those rows were 64 KiB apart, 64 pages a tile, and the
// AMX forward at 32K ran at half its 8K rate. Tiles start at multiples of BK (key_range,
// bwd_item), so a tile never crosses a block. Words per kv head: tr_blocks x D x TR_LD.
#define TR_LD (BK / 2)
static long tr_blocks(long Tk) { return (Tk + BK - 1) / BK; }
// The first word of key tile j0's (a multiple of BK) transposed block of kv head g.
static const uint32_t *tr_tile(const uint32_t *tr, long Tk, int D, int g, long j0) {
  return tr + ((long)g * tr_blocks(Tk) + j0 / BK) * D * TR_LD;
}

// Per call: the k (or v) rows of every kv head as A operands, natural (pairs along d:
// nat[g][j][d']) and transposed (pairs along keys, blocked by key tile: tr[g][jb][d][j' %
// TR_LD], above; either may be NULL), by the threads of the enclosing parallel region.
// x: fp32, or 2-byte bf16 (x16). Words of a last block past the keys (never read) are 0,
// so a pack's bytes are a function of k and v alone.
static void pack_kv(uint32_t *nat, uint32_t *tr, const void *x, int x16, int Tk, int Hkv, int D) {
  const int D2 = (D + 1) / 2;
  const long Tk2 = (Tk + 1) / 2, ldx = (long)Hkv * D, Tp = tr ? tr_blocks(Tk) * TR_LD : Tk2;
#pragma omp for schedule(static)
  for (long gj = 0; gj < (long)Hkv * Tp; gj++) {
    const int g = (int)(gj / Tp);
    const long j = gj % Tp;
    if (j >= Tk2) { // the last transposed block's padding
      uint32_t *t = (uint32_t *)tr_tile(tr, Tk, D, g, 2 * j / BK * BK) + j % TR_LD;
      for (int d = 0; d < D; d++) t[(long)d * TR_LD] = 0;
      continue;
    }
    const long a = (2 * j) * ldx + (long)g * D, b = a + ldx; // offsets of rows 2j and 2j+1
    const int hb = 2 * j + 1 < Tk;                          // row 2j+1 exists
    if (tr) {
      uint32_t *t = (uint32_t *)tr_tile(tr, Tk, D, g, 2 * j / BK * BK) + j % TR_LD;
      for (int d = 0; d < D; d++)
        t[(long)d * TR_LD] = bf_pair(lc_elem_f32(x, x16, (size_t)a + d), hb ? lc_elem_f32(x, x16, (size_t)b + d) : 0.0f);
    }
    if (nat)
      for (int r = 0; r < 2 && 2 * j + r < Tk; r++) {
        const long y = r ? b : a;
        uint32_t *o = nat + ((long)g * Tk + 2 * j + r) * D2;
        for (int d = 0; d < D2; d++)
          o[d] = bf_pair(lc_elem_f32(x, x16, (size_t)y + 2 * d), 2 * d + 1 < D ? lc_elem_f32(x, x16, (size_t)y + 2 * d + 1) : 0.0f);
      }
  }
}

#endif
