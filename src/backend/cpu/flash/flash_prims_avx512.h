// fp32 primitives of the blockwise attention kernel for AVX-512 (the contract is
// backend/cpu/flash/flash_prims.h; included there, by backend/cpu/flash/flash_body.h).
#ifndef LC_FLASH_PRIMS_AVX512_H
#define LC_FLASH_PRIMS_AVX512_H

#include <immintrin.h>
#include <math.h>

// n = round(x) with the 1.5*2^23 trick (the integer n sits in the low mantissa bits of
// t, so t's bits << 23 is n in the exponent field); 2^x = p(x - n) * 2^n by an integer
// add to the exponent. Lanes with x < -126 (incl. -inf, where t, f are inf/NaN) are
// zeroed by the mask; for x >= -126 the result is a normal number (n >= -126, and
// n = -126 implies f >= 0, p >= 1). Plain adds/FMAs/shifts: no p0-only rndscale/scalef.
LC_AI __m512 exp2v(__m512 x) {
  const __m512 magic = _mm512_set1_ps(12582912.0f); // 1.5 * 2^23
  __mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-126.0f), _CMP_GE_OQ);
  __m512 t = _mm512_add_ps(x, magic);
  __m512 f = _mm512_sub_ps(x, _mm512_sub_ps(t, magic));
  __m512 p = _mm512_set1_ps(EXP2_C6);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(EXP2_C5));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(EXP2_C4));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(EXP2_C3));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(EXP2_C2));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(EXP2_C1));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  __m512i e = _mm512_slli_epi32(_mm512_castps_si512(t), 23);
  return _mm512_castsi512_ps(_mm512_maskz_add_epi32(ok, _mm512_castps_si512(p), e));
}

LC_AI void mk(const int R, const int NC, const int mode, int K, const float *restrict A,
              long sar, long sak, const float *restrict B, long ldb, float *restrict C, long ldc,
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
        acc[r][c] = _mm512_mul_ps(_mm512_loadu_ps(C + r * ldc + 16 * c),
                                  _mm512_loadu_ps(alpha + 16 * c));
    }
#pragma GCC unroll 2
  for (int k = 0; k < K; k++) {
    __m512 b[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) b[c] = _mm512_loadu_ps(B + k * ldb + 16 * c);
    const float *a = A + k * sak;
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
      __m512 av = _mm512_set1_ps(a[r * sar]);
#pragma GCC unroll 4
      for (int c = 0; c < NC; c++) acc[r][c] = _mm512_fmadd_ps(av, b[c], acc[r][c]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(C + r * ldc + 16 * c, acc[r][c]);
}

// Rows per register tile for NC = 1..4 groups of 16 columns: 24 of the 32 zmm.
#define RM1 14
#define RM2 10
#define RM3 7
#define RM4 6

// Online-softmax update for one tile (forward). m, l: running max / sum per query
// (base 2); alpha: the factor the accumulator must be rescaled by. St becomes Pt.
static void tile_softmax(float *S, int nk, float *m, float *l, float *alpha) {
  for (int c = 0; c < 4; c++) {
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int r = 0; r < nk; r++) mx = _mm512_max_ps(mx, _mm512_loadu_ps(S + r * BQ + 16 * c));
    __m512 mold = _mm512_loadu_ps(m + 16 * c);
    __m512 mnew = _mm512_max_ps(mold, mx);
#ifdef LC_FLASH_BF16
    // The bf16 kernel rounds P to bf16. With an integer reference (the running max rounded
    // up) every P is exp2(s - integer), so a key range split differently (ring chunks,
    // poll tiles) only scales P by exact powers of 2, which commute with the rounding: every
    // layout gives the same P up to fp32 rounding. The rescale factor is then exact too.
    mnew = _mm512_roundscale_ps(mnew, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
#endif
    // rows that saw no visible key yet keep m = -inf; use 0 as the reference there
    __mmask16 none = _mm512_cmp_ps_mask(mnew, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
    __m512 mref = _mm512_mask_blend_ps(none, mnew, _mm512_setzero_ps());
    __m512 al = exp2v(_mm512_sub_ps(mold, mref)); // mold = -inf -> 0
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int r = 0;
    for (; r + 2 <= nk; r += 2) {
      __m512 p0 = exp2v(_mm512_sub_ps(_mm512_loadu_ps(S + r * BQ + 16 * c), mref));
      __m512 p1 = exp2v(_mm512_sub_ps(_mm512_loadu_ps(S + (r + 1) * BQ + 16 * c), mref));
      _mm512_storeu_ps(S + r * BQ + 16 * c, p0);
      _mm512_storeu_ps(S + (r + 1) * BQ + 16 * c, p1);
      s0 = _mm512_add_ps(s0, p0);
      s1 = _mm512_add_ps(s1, p1);
    }
    if (r < nk) {
      __m512 p0 = exp2v(_mm512_sub_ps(_mm512_loadu_ps(S + r * BQ + 16 * c), mref));
      _mm512_storeu_ps(S + r * BQ + 16 * c, p0);
      s0 = _mm512_add_ps(s0, p0);
    }
    __m512 lnew = _mm512_fmadd_ps(_mm512_loadu_ps(l + 16 * c), al, _mm512_add_ps(s0, s1));
    _mm512_storeu_ps(l + 16 * c, lnew);
    _mm512_storeu_ps(m + 16 * c, mnew);
    _mm512_storeu_ps(alpha + 16 * c, al);
  }
}

// Backward: Pt = exp2(St - lse2) in place (lse2 = +inf for rows with no key -> 0).
static void tile_probs(float *S, int nk, const float *lse2) {
  __m512 L0 = _mm512_loadu_ps(lse2), L1 = _mm512_loadu_ps(lse2 + 16);
  __m512 L2 = _mm512_loadu_ps(lse2 + 32), L3 = _mm512_loadu_ps(lse2 + 48);
  for (int r = 0; r < nk; r++) {
    float *row = S + r * BQ;
    _mm512_storeu_ps(row, exp2v(_mm512_sub_ps(_mm512_loadu_ps(row), L0)));
    _mm512_storeu_ps(row + 16, exp2v(_mm512_sub_ps(_mm512_loadu_ps(row + 16), L1)));
    _mm512_storeu_ps(row + 32, exp2v(_mm512_sub_ps(_mm512_loadu_ps(row + 32), L2)));
    _mm512_storeu_ps(row + 48, exp2v(_mm512_sub_ps(_mm512_loadu_ps(row + 48), L3)));
  }
}

// Backward: dSt = scale * Pt * (dPt - delta) in place of dPt.
static void tile_dscores(float *dP, const float *P, int nk, const float *delta, float scale) {
  __m512 sc = _mm512_set1_ps(scale);
  __m512 d[4];
  for (int c = 0; c < 4; c++) d[c] = _mm512_loadu_ps(delta + 16 * c);
  for (int r = 0; r < nk; r++)
    for (int c = 0; c < 4; c++) {
      long o = r * BQ + 16 * c;
      __m512 ps = _mm512_mul_ps(_mm512_loadu_ps(P + o), sc);
      _mm512_storeu_ps(dP + o, _mm512_mul_ps(ps, _mm512_sub_ps(_mm512_loadu_ps(dP + o), d[c])));
    }
}

// In-register 16x16 transpose (unpack 32-bit, unpack 64-bit, two 128-bit lane shuffles).
LC_AI void tr16(__m512 v[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
  }
  for (int i = 0; i < 16; i += 4)
    for (int j = 0; j < 2; j++) { // v[i + 2j + {0,1}]: lane columns 2j, 2j+1 of rows i..i+3
      __m512d a = _mm512_castps_pd(t[i + j]), b = _mm512_castps_pd(t[i + j + 2]);
      v[i + 2 * j] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      v[i + 2 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  for (int i = 0; i < 16; i += 8)
    for (int j = 0; j < 4; j++) {
      t[i + j] = _mm512_shuffle_f32x4(v[i + j], v[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_f32x4(v[i + j], v[i + j + 4], 0xdd);
    }
  for (int j = 0; j < 8; j++) {
    v[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    v[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
  }
}

__attribute__((unused)) static void pack_t(float *dst, const float *src, long ld, int n, int D, float sc) {
  const __m512 vs = _mm512_set1_ps(sc);
  for (int i0 = 0; i0 < BQ; i0 += 16)
    for (int d0 = 0; d0 < D; d0 += 16) {
      int nc = D - d0 < 16 ? D - d0 : 16;
      __mmask16 mk16 = (__mmask16)((1u << nc) - 1u);
      __m512 v[16];
      for (int r = 0; r < 16; r++)
        v[r] = i0 + r < n ? _mm512_maskz_loadu_ps(mk16, src + (long)(i0 + r) * ld + d0)
                          : _mm512_setzero_ps();
      tr16(v);
      for (int c = 0; c < nc; c++)
        _mm512_storeu_ps(dst + (long)(d0 + c) * BQ + i0, _mm512_mul_ps(v[c], vs));
    }
}

static void unpack_t(float *dst, long ld, const float *src, int n, int D, const float *rs,
                     int acc) {
  for (int i0 = 0; i0 < n; i0 += 16)
    for (int d0 = 0; d0 < D; d0 += 16) {
      int nc = D - d0 < 16 ? D - d0 : 16;
      __mmask16 mk16 = (__mmask16)((1u << nc) - 1u);
      __m512 v[16];
      for (int r = 0; r < 16; r++)
        v[r] = r < nc ? _mm512_loadu_ps(src + (long)(d0 + r) * BQ + i0) : _mm512_setzero_ps();
      tr16(v);
      for (int c = 0; c < 16 && i0 + c < n; c++) {
        float *o = dst + (long)(i0 + c) * ld + d0;
        __m512 x = v[c];
        if (rs) x = _mm512_mul_ps(x, _mm512_set1_ps(rs[i0 + c]));
        if (acc) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mk16, o));
        _mm512_mask_storeu_ps(o, mk16, x);
      }
    }
}

#endif
