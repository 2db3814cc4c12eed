// fp32 primitives of the blockwise attention kernel on GCC/Clang vector extensions
// (AVX/AVX2, SSE, NEON): the same algorithm as the AVX-512 file with smaller register
// tiles (the contract is backend/cpu/flash/flash_prims.h; included there, by backend/cpu/flash/flash_body.h).
#ifndef LC_FLASH_PRIMS_PORTABLE_H
#define LC_FLASH_PRIMS_PORTABLE_H

#include <math.h>
#include <string.h>

// Portable path: GCC/Clang vector extensions, VW floats per vector (8 with AVX/AVX2,
// else 4: SSE, NEON). ISO C mode disables FMA contraction in GCC; a*b+c must become
// an FMA here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast")
#endif
#if defined(__AVX__)
#define VW 8
#else
#define VW 4
#endif
typedef float vf __attribute__((vector_size(4 * VW)));
typedef int vi __attribute__((vector_size(4 * VW)));

static inline __attribute__((always_inline)) vf ldv(const float *p) {
  vf x;
  memcpy(&x, p, sizeof x);
  return x;
}
static inline __attribute__((always_inline)) void stv(float *p, vf x) { memcpy(p, &x, sizeof x); }
// (a constructor of equal elements: GCC emits one broadcast; an element-by-element loop
// became a chain of inserts, 9 instructions per broadcast in the micro-kernel's inner loop)
static inline __attribute__((always_inline)) vf splatv(float a) {
#if VW == 8
  return (vf){a, a, a, a, a, a, a, a};
#else
  return (vf){a, a, a, a};
#endif
}
// m ? a : b per lane (m from a vector comparison: all ones or zero)
static inline __attribute__((always_inline)) vf selv(vi m, vf a, vf b) {
  return (vf)(((vi)a & m) | ((vi)b & ~m));
}
// Same algorithm as the AVX-512 exp2v (see there).
static inline __attribute__((always_inline)) vf exp2vv(vf x) {
  vi ok = x >= splatv(-126.0f);
  vf t = x + splatv(12582912.0f);
  vf f = x - (t - splatv(12582912.0f));
  vf p = splatv(EXP2_C6);
  p = p * f + splatv(EXP2_C5);
  p = p * f + splatv(EXP2_C4);
  p = p * f + splatv(EXP2_C3);
  p = p * f + splatv(EXP2_C2);
  p = p * f + splatv(EXP2_C1);
  p = p * f + splatv(1.0f);
  vi r = ((vi)p + ((vi)t << 23)) & ok;
  return (vf)r;
}

LC_AI void mk(const int R, const int NC, const int mode, int K, const float *restrict A,
              long sar, long sak, const float *restrict B, long ldb, float *restrict C, long ldc,
              const float *restrict alpha) {
  enum { W = 16 / VW }; // vectors per 16 columns
  vf acc[16][16];
#pragma GCC unroll 16
  for (int r = 0; r < R; r++)
#pragma GCC unroll 16
    for (int c = 0; c < W * NC; c++) {
      if (mode == 0)
        acc[r][c] = splatv(0.0f);
      else if (mode == 1)
        acc[r][c] = ldv(C + r * ldc + VW * c);
      else
        acc[r][c] = ldv(C + r * ldc + VW * c) * ldv(alpha + VW * c);
    }
  for (int k = 0; k < K; k++) {
    const float *a = A + k * sak, *b = B + k * ldb;
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
      vf av = splatv(a[r * sar]);
#pragma GCC unroll 16
      for (int c = 0; c < W * NC; c++) acc[r][c] += av * ldv(b + VW * c);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; r++)
#pragma GCC unroll 16
    for (int c = 0; c < W * NC; c++) stv(C + r * ldc + VW * c, acc[r][c]);
}

// Rows per register tile for NC = 1..4 groups of 16 columns: 8..12 vectors.
#define RM1 6
#define RM2 3
#define RM3 2
#define RM4 1
// With 8-float vectors (AVX2's 16 registers) a 64-column row fills 8 of them: flash_body.h
// runs 64-column products as four 16-column passes of RM1 rows (MK64).
#if VW == 8
#define LC_FLASH_COLS16 1
#endif

// Online-softmax update for one tile (forward). m, l: running max / sum per query
// (base 2); alpha: the factor the accumulator must be rescaled by. St becomes Pt.
static void tile_softmax(float *S, int nk, float *m, float *l, float *alpha) {
  for (int c = 0; c < BQ / VW; c++) {
    vf mx = splatv(-INFINITY);
    for (int r = 0; r < nk; r++) {
      vf x = ldv(S + r * BQ + VW * c);
      mx = selv(x > mx, x, mx);
    }
    vf mold = ldv(m + VW * c);
    vf mnew = selv(mold > mx, mold, mx);
    // rows that saw no visible key yet keep m = -inf; use 0 as the reference there
    vf mref = selv(mnew == splatv(-INFINITY), splatv(0.0f), mnew);
    vf al = exp2vv(mold - mref);
    vf sum = splatv(0.0f);
    for (int r = 0; r < nk; r++) {
      vf pr = exp2vv(ldv(S + r * BQ + VW * c) - mref);
      stv(S + r * BQ + VW * c, pr);
      sum += pr;
    }
    stv(l + VW * c, ldv(l + VW * c) * al + sum);
    stv(m + VW * c, mnew);
    stv(alpha + VW * c, al);
  }
}

// Backward: Pt = exp2(St - lse2) in place (lse2 = +inf for rows with no key -> 0).
static void tile_probs(float *S, int nk, const float *lse2) {
  for (int r = 0; r < nk; r++)
    for (int c = 0; c < BQ / VW; c++)
      stv(S + r * BQ + VW * c, exp2vv(ldv(S + r * BQ + VW * c) - ldv(lse2 + VW * c)));
}

// Backward: dSt = scale * Pt * (dPt - delta) in place of dPt.
static void tile_dscores(float *dP, const float *P, int nk, const float *delta, float scale) {
  for (int r = 0; r < nk; r++)
    for (int c = 0; c < BQ / VW; c++) {
      long o = r * BQ + VW * c;
      stv(dP + o, splatv(scale) * ldv(P + o) * (ldv(dP + o) - ldv(delta + VW * c)));
    }
}

__attribute__((unused)) static void pack_t(float *dst, const float *src, long ld, int n, int D, float sc) {
  for (int d = 0; d < D; d++)
    for (int i = n; i < BQ; i++) dst[(long)d * BQ + i] = 0.0f;
  for (int i = 0; i < n; i++)
    for (int d = 0; d < D; d++) dst[(long)d * BQ + i] = src[(long)i * ld + d] * sc;
}

static void unpack_t(float *dst, long ld, const float *src, int n, int D, const float *rs,
                     int acc) {
  for (int i = 0; i < n; i++) {
    float *o = dst + (long)i * ld;
    float r = rs ? rs[i] : 1.0f;
    for (int d = 0; d < D; d++) {
      float x = src[(long)d * BQ + i] * r;
      o[d] = acc ? o[d] + x : x;
    }
  }
}

#endif
