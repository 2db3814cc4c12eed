// Blockwise (flash) attention on CPUs: forward with online softmax, stable merge,
// delta, and a FlashAttention-2 style backward.
//
// Layout trick ("transposed" tiles). A work item owns one block of BQ = 64 query rows
// of one head. Its queries are packed once, transposed, as Qt[D][BQ] (pre-scaled by
// scale*log2(e), so the softmax runs in base 2), and every score tile is computed
// transposed: St[BK keys][BQ queries] = K_blk * Qt. A row of St is 4 AVX-512 vectors
// across the 64 queries, so the softmax statistics (column max, column sum) are plain
// vertical vector ops, the per-query rescale factors are vectors, and K, V are used
// in place, in their natural row-major layout, as the broadcast operand of the
// register-blocked micro-kernel (C[R x 64] += A[R x K] * B[K x 64], A broadcast,
// B rows of 4 vectors, 6 x 4 zmm accumulators). The output accumulator is Ot[D][BQ]
// (Ot = alpha*Ot + V^T Pt, the rescale fused into the kernel), transposed back once
// per item (16x16 in-register transposes). No K/V packing, no Tq x Tk matrix; only
// diagonal tiles are masked, fully hidden tiles are skipped.
//
// Threads: forward items (head, q block) are independent (each owns its output rows);
// schedule(dynamic), heaviest (last, causal) blocks first.
// Backward: see lc_flash_bwd below (race-free and deterministic for a fixed thread count).
// Without AVX-512 the same algorithm runs on GCC/Clang vector extensions (AVX2, SSE,
// NEON) with smaller register tiles.
#include "attn/flash.h"
#include "core/dtype.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX512F__)
#include <immintrin.h>
#else
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
#endif

#define BQ 64 // query rows per item = 4 vectors of 16 floats (fixed by the kernels)
#ifndef LC_FLASH_BK
#define LC_FLASH_BK 64 // key rows per tile
#endif
#define BK LC_FLASH_BK

#define LOG2E 1.4426950408889634
#define LN2 0.6931471805599453

#define LC_AI static inline __attribute__((always_inline))

static int max_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}
static int thread_id(void) {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}
static int team_size(void) {
#ifdef _OPENMP
  return omp_get_num_threads();
#else
  return 1;
#endif
}

static long rup16(long n) { return (n + 15) & ~15L; }

// ---------------------------------------------------------------------------------
// exp2 with relative error < 1e-7 (degree-6 polynomial on [-0.5, 0.5], least squares
// on the relative error; coefficients fitted in long double). Inputs below -126 give
// exactly 0 (so -INFINITY -> 0 and no denormals), inputs must be <= 127 (softmax
// arguments are <= 0 up to rounding).
// ---------------------------------------------------------------------------------
#define EXP2_C1 6.931471825e-01f
#define EXP2_C2 2.402264774e-01f
#define EXP2_C3 5.550329015e-02f
#define EXP2_C4 9.618373588e-03f
#define EXP2_C5 1.339984825e-03f
#define EXP2_C6 1.537070493e-04f

#if defined(__AVX512F__)
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
#endif

#if !defined(__AVX512F__)
static inline __attribute__((always_inline)) vf ldv(const float *p) {
  vf x;
  memcpy(&x, p, sizeof x);
  return x;
}
static inline __attribute__((always_inline)) void stv(float *p, vf x) { memcpy(p, &x, sizeof x); }
static inline __attribute__((always_inline)) vf splatv(float a) {
  vf x;
  for (int i = 0; i < VW; i++) x[i] = a;
  return x;
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
#endif

// ---------------------------------------------------------------------------------
// Micro-kernel: C[r][0..16*NC) (mode 0: =, mode 1: +=, mode 2: = alpha[c]*C +)
//   sum_{k<K} A[r*sar + k*sak] * B[k*ldb + c],  r < R.
// R, NC, mode are compile-time constants after inlining, so the R x NC accumulators
// live in registers (R*NC <= 24 + NC B-vectors + 1 broadcast <= 32 zmm).
// ---------------------------------------------------------------------------------
#if defined(__AVX512F__)
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
#else
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
#endif

// Rows per register tile for NC = 1..4 groups of 16 columns (R*NC*16/VW accumulators:
// 24 of the 32 zmm with AVX-512; 8..12 vectors in the portable path).
#if defined(__AVX512F__)
#define RM1 14
#define RM2 10
#define RM3 7
#define RM4 6
#else
#define RM1 6
#define RM2 3
#define RM3 2
#define RM4 1
#endif

// All M rows: tiles of RM rows, then the remainder with its own constant R.
#define MK_CASE(n)                                                          \
  case n:                                                                   \
    if (n < RM) mk(n < RM ? n : 1, NC, mode, K, A + r * sar, sar, sak, B, ldb, C + r * ldc, ldc, alpha); \
    break;
LC_AI void mk_rows(const int NC, const int RM, const int mode, int M, int K, const float *A,
                   long sar, long sak, const float *B, long ldb, float *C, long ldc,
                   const float *alpha) {
  int r = 0;
  for (; r + RM <= M; r += RM) mk(RM, NC, mode, K, A + r * sar, sar, sak, B, ldb, C + r * ldc, ldc, alpha);
  switch (M - r) {
    MK_CASE(1) MK_CASE(2) MK_CASE(3) MK_CASE(4) MK_CASE(5) MK_CASE(6) MK_CASE(7)
    MK_CASE(8) MK_CASE(9) MK_CASE(10) MK_CASE(11) MK_CASE(12) MK_CASE(13) MK_CASE(14)
    MK_CASE(15)
    default: break;
  }
}
#undef MK_CASE

// Tile products used by the kernels (all with 64-wide B/C rows unless stated).
// St[M][64] = A[M rows, lda apart][K] * Bt[K][64]   (A = K or V rows, natural layout)
static void tile_abt(int M, int K, const float *A, long lda, const float *Bt, float *C) {
  mk_rows(4, RM4, 0, M, K, A, lda, 1, Bt, BQ, C, BQ, NULL);
}
// Ct[M][64] = alpha * Ct + A^T * P, A element (r, k) at A[k*lda + r]   (Ot += V^T Pt)
static void tile_atb_scale(int M, int K, const float *A, long lda, const float *P, float *C,
                           const float *alpha) {
  mk_rows(4, RM4, 2, M, K, A, 1, lda, P, BQ, C, BQ, alpha);
}
// Ct[M][64] += A^T * P   (dQt += K^T dSt)
static void tile_atb_acc(int M, int K, const float *A, long lda, const float *P, float *C) {
  mk_rows(4, RM4, 1, M, K, A, 1, lda, P, BQ, C, BQ, NULL);
}
// C[M][N] += P[M][K] (rows 64 apart) * B[K][N] (rows ldb apart), N = Dp multiple of 16.
// (dV += Pt dO, dK += dSt Q)
static void tile_ab_acc(int M, int K, const float *P, const float *B, long ldb, float *C, long ldc,
                        int N) {
  int c0 = 0;
  for (; c0 + 64 <= N; c0 += 64) mk_rows(4, RM4, 1, M, K, P, BQ, 1, B + c0, ldb, C + c0, ldc, NULL);
  switch ((N - c0) / 16) {
    case 1: mk_rows(1, RM1, 1, M, K, P, BQ, 1, B + c0, ldb, C + c0, ldc, NULL); break;
    case 2: mk_rows(2, RM2, 1, M, K, P, BQ, 1, B + c0, ldb, C + c0, ldc, NULL); break;
    case 3: mk_rows(3, RM3, 1, M, K, P, BQ, 1, B + c0, ldb, C + c0, ldc, NULL); break;
    default: break;
  }
}

// ---------------------------------------------------------------------------------
// Elementwise parts on a tile St[nk][64] (row r = key j0+r, column i = query i0+i).
// ---------------------------------------------------------------------------------

// Mask of a tile: key position kpos0 + r is hidden from query position qpos0 + i when
// causal and kpos0 + r > qpos0 + i (i.e. i < kpos0 + r - qpos0), and when lo is given and
// kpos0 + r < lo[i] (i < nq: the block's real rows).
static void tile_mask(float *S, int nk, long kpos0, long qpos0, int causal, const int *lo, int nq) {
  if (causal) {
    long r0 = qpos0 - kpos0 + 1; // rows r < r0 have thr <= 0: nothing hidden
    for (int r = r0 > 0 ? (int)(r0 < nk ? r0 : nk) : 0; r < nk; r++) {
      long thr = kpos0 + r - qpos0; // columns i < thr are hidden (thr grows with r)
      int n = thr >= BQ ? BQ : (int)thr;
      float *row = S + (long)r * BQ;
      for (int i = 0; i < n; i++) row[i] = -INFINITY;
    }
  }
  if (lo)
    for (int r = 0; r < nk; r++) {
      const long kp = kpos0 + r;
      float *row = S + (long)r * BQ;
      for (int i = 0; i < nq; i++) row[i] = kp < lo[i] ? -INFINITY : row[i];
    }
}

// Online-softmax update for one tile (forward). m, l: running max / sum per query
// (base 2); alpha: the factor the accumulator must be rescaled by. St becomes Pt.
static void tile_softmax(float *S, int nk, float *m, float *l, float *alpha) {
#if defined(__AVX512F__)
  for (int c = 0; c < 4; c++) {
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int r = 0; r < nk; r++) mx = _mm512_max_ps(mx, _mm512_loadu_ps(S + r * BQ + 16 * c));
    __m512 mold = _mm512_loadu_ps(m + 16 * c);
    __m512 mnew = _mm512_max_ps(mold, mx);
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
#else
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
#endif
}

// Backward: Pt = exp2(St - lse2) in place (lse2 = +inf for rows with no key -> 0).
static void tile_probs(float *S, int nk, const float *lse2) {
#if defined(__AVX512F__)
  __m512 L0 = _mm512_loadu_ps(lse2), L1 = _mm512_loadu_ps(lse2 + 16);
  __m512 L2 = _mm512_loadu_ps(lse2 + 32), L3 = _mm512_loadu_ps(lse2 + 48);
  for (int r = 0; r < nk; r++) {
    float *row = S + r * BQ;
    _mm512_storeu_ps(row, exp2v(_mm512_sub_ps(_mm512_loadu_ps(row), L0)));
    _mm512_storeu_ps(row + 16, exp2v(_mm512_sub_ps(_mm512_loadu_ps(row + 16), L1)));
    _mm512_storeu_ps(row + 32, exp2v(_mm512_sub_ps(_mm512_loadu_ps(row + 32), L2)));
    _mm512_storeu_ps(row + 48, exp2v(_mm512_sub_ps(_mm512_loadu_ps(row + 48), L3)));
  }
#else
  for (int r = 0; r < nk; r++)
    for (int c = 0; c < BQ / VW; c++)
      stv(S + r * BQ + VW * c, exp2vv(ldv(S + r * BQ + VW * c) - ldv(lse2 + VW * c)));
#endif
}

// Backward: dSt = scale * Pt * (dPt - delta) in place of dPt.
static void tile_dscores(float *dP, const float *P, int nk, const float *delta, float scale) {
#if defined(__AVX512F__)
  __m512 sc = _mm512_set1_ps(scale);
  __m512 d[4];
  for (int c = 0; c < 4; c++) d[c] = _mm512_loadu_ps(delta + 16 * c);
  for (int r = 0; r < nk; r++)
    for (int c = 0; c < 4; c++) {
      long o = r * BQ + 16 * c;
      __m512 ps = _mm512_mul_ps(_mm512_loadu_ps(P + o), sc);
      _mm512_storeu_ps(dP + o, _mm512_mul_ps(ps, _mm512_sub_ps(_mm512_loadu_ps(dP + o), d[c])));
    }
#else
  for (int r = 0; r < nk; r++)
    for (int c = 0; c < BQ / VW; c++) {
      long o = r * BQ + VW * c;
      stv(dP + o, splatv(scale) * ldv(P + o) * (ldv(dP + o) - ldv(delta + VW * c)));
    }
#endif
}

// ---------------------------------------------------------------------------------
// Transposed packing of a query block and transposed write-back.
// pack_t:   dst[d*BQ + i] = src[i*ld + d] * sc   (i < BQ, d < D; rows i >= n are 0)
// unpack_t: dst[i*ld + d] (= | +=) src[d*BQ + i] * rs[i]   (i < n, d < D; rs NULL: 1)
// ---------------------------------------------------------------------------------
#if defined(__AVX512F__)
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
#endif

static void pack_t(float *dst, const float *src, long ld, int n, int D, float sc) {
#if defined(__AVX512F__)
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
#else
  for (int d = 0; d < D; d++)
    for (int i = n; i < BQ; i++) dst[(long)d * BQ + i] = 0.0f;
  for (int i = 0; i < n; i++)
    for (int d = 0; d < D; d++) dst[(long)d * BQ + i] = src[(long)i * ld + d] * sc;
#endif
}

static void unpack_t(float *dst, long ld, const float *src, int n, int D, const float *rs,
                     int acc) {
#if defined(__AVX512F__)
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
#else
  for (int i = 0; i < n; i++) {
    float *o = dst + (long)i * ld;
    float r = rs ? rs[i] : 1.0f;
    for (int d = 0; d < D; d++) {
      float x = src[(long)d * BQ + i] * r;
      o[d] = acc ? o[d] + x : x;
    }
  }
#endif
}

// ---------------------------------------------------------------------------------
// Shapes and the causal key range of a query block.
// ---------------------------------------------------------------------------------
static lc_status check_shape(const lc_attn_shape *s, const char *fn) {
  if (!s) return lc_fail(LC_EINVAL, "%s: shape is NULL", fn);
  if (s->Tq < 0 || s->Tk < 0 || s->Hq < 1 || s->Hkv < 1 || s->D < 1 || s->Hq % s->Hkv != 0)
    return lc_fail(LC_EINVAL, "%s: bad shape Tq=%d Tk=%d Hq=%d Hkv=%d D=%d (need Hq %% Hkv == 0)",
                   fn, s->Tq, s->Tk, s->Hq, s->Hkv, s->D);
  if (!(s->scale == s->scale)) return lc_fail(LC_EINVAL, "%s: scale is NaN", fn);
  return LC_OK;
}

static long clampk(long x, long Tk) { return x < 0 ? 0 : x > Tk ? Tk : x; }

// Keys of the query block [i0, i0+nq) (indices into k): [r->beg, r->end) may be visible to
// some row; [r->free, r->full) to every row, so tiles reaching outside it need masking.
// With per-row lower bounds the block skips every key before the smallest bound.
typedef struct {
  long beg, free, full, end;
} krange;

static krange key_range(const lc_attn_shape *s, long i0, int nq) {
  krange r = {0, 0, s->Tk, s->Tk};
  if (s->causal) {
    long qlo = s->q_start + i0, qhi = qlo + nq - 1;
    r.end = clampk(qhi - s->k_start + 1, s->Tk);
    r.full = clampk(qlo - s->k_start + 1, s->Tk);
  }
  if (s->lo) {
    int mn = s->lo[i0], mx = s->lo[i0];
    for (int i = 1; i < nq; i++) {
      mn = s->lo[i0 + i] < mn ? s->lo[i0 + i] : mn;
      mx = s->lo[i0 + i] > mx ? s->lo[i0 + i] : mx;
    }
    r.beg = clampk(mn - s->k_start, s->Tk);
    r.free = clampk(mx - s->k_start, s->Tk);
  }
  return r;
}

// ---------------------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------------------
typedef struct {
  float *Qt, *S, *Ot, *m, *l, *alpha;
} fwd_ws;

static long fwd_ws_floats(int D) {
  return 2 * rup16((long)D * BQ) + (long)BK * BQ + 3 * BQ;
}

static void fwd_ws_carve(fwd_ws *w, float *base, int D) {
  w->Qt = base;
  base += rup16((long)D * BQ);
  w->Ot = base;
  base += rup16((long)D * BQ);
  w->S = base;
  base += (long)BK * BQ;
  w->m = base;
  w->l = base + BQ;
  w->alpha = base + 2 * BQ;
}

// Threads (at most one per work item) and floats of workspace per thread of a forward.
static void fwd_plan(const lc_attn_shape *s, int threads, int *nt, long *per) {
  const long nitems = (long)((s->Tq + BQ - 1) / BQ) * s->Hq;
  *nt = threads;
  if (*nt > nitems) *nt = (int)nitems;
  *per = fwd_ws_floats(s->D);
}

static void fwd_item(float *out, float *lse, const float *q, const float *k, const float *v,
                     const lc_attn_shape *s, int h, int ib, fwd_ws *w) {
  const int D = s->D, Hq = s->Hq, Tq = s->Tq;
  const int g = h / (Hq / s->Hkv);
  const long ldq = (long)Hq * D, ldk = (long)s->Hkv * D;
  const long i0 = (long)ib * BQ;
  const int nq = (int)(Tq - i0 < BQ ? Tq - i0 : BQ);
  const krange kr = key_range(s, i0, nq);
  const int *lo = s->lo ? s->lo + i0 : NULL;

  if (kr.end <= kr.beg) { // no key visible to any row of this block
    for (int i = 0; i < nq; i++) {
      lse[(long)h * Tq + i0 + i] = -INFINITY;
      memset(out + (i0 + i) * ldq + (long)h * D, 0, sizeof(float) * (size_t)D);
    }
    return;
  }

  // Qt[d][i] = q * scale * log2(e); padded query columns are 0.
  pack_t(w->Qt, q + i0 * ldq + (long)h * D, ldq, nq, D, (float)(s->scale * LOG2E));
  memset(w->Ot, 0, sizeof(float) * (size_t)D * BQ);
  for (int i = 0; i < BQ; i++) {
    w->m[i] = -INFINITY;
    w->l[i] = 0.0f;
  }

  const float *kh = k + (long)g * D, *vh = v + (long)g * D;
  for (long j0 = kr.beg / BK * BK; j0 < kr.end; j0 += BK) {
    int nk = (int)(kr.end - j0 < BK ? kr.end - j0 : BK);
    tile_abt(nk, D, kh + j0 * ldk, ldk, w->Qt, w->S);
    if (j0 + nk > kr.full || j0 < kr.free)
      tile_mask(w->S, nk, s->k_start + j0, s->q_start + i0, s->causal, lo, nq);
    tile_softmax(w->S, nk, w->m, w->l, w->alpha);
    tile_atb_scale(D, nk, vh + j0 * ldk, ldk, w->S, w->Ot, w->alpha);
  }

  // out = Ot^T / l, lse = (m + log2 l) * ln 2; rows without a visible key: 0, -inf
  float *inv = w->alpha;
  for (int i = 0; i < nq; i++) {
    float li = w->l[i];
    if (li > 0.0f) {
      inv[i] = 1.0f / li;
      lse[(long)h * Tq + i0 + i] = (float)(((double)w->m[i] + log2((double)li)) * LN2);
    } else {
      inv[i] = 0.0f;
      lse[(long)h * Tq + i0 + i] = -INFINITY;
    }
  }
  unpack_t(out + i0 * ldq + (long)h * D, ldq, w->Ot, nq, D, inv, 0);
}

lc_status lc_flash_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                       const lc_attn_shape *s, lc_arena *arena) {
  LC_TRY(check_shape(s, "lc_flash_fwd"));
  if (s->Tq == 0 || s->Hq == 0) return LC_OK;
  if (!out || !lse || !q || (s->Tk > 0 && (!k || !v)))
    return lc_fail(LC_EINVAL, "lc_flash_fwd: NULL tensor");
  const int nqb = (s->Tq + BQ - 1) / BQ;
  const long nitems = (long)nqb * s->Hq;
  int nt;
  long per;
  fwd_plan(s, max_threads(), &nt, &per);
  float *ws = lc_alloc(arena, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, (size_t)(per * nt)),
                       "attention workspace");
  if (!ws) return LC_ENOMEM;

#pragma omp parallel num_threads(nt)
  {
    fwd_ws w;
    fwd_ws_carve(&w, ws + per * thread_id(), s->D);
#pragma omp for schedule(dynamic, 1)
    for (long it = 0; it < nitems; it++) {
      // last query blocks first: under a causal mask they see the most keys
      int ib = nqb - 1 - (int)(it / s->Hq), h = (int)(it % s->Hq);
      fwd_item(out, lse, q, k, v, s, h, ib, &w);
    }
  }
  lc_free(arena, ws);
  return LC_OK;
}

// ---------------------------------------------------------------------------------
// Merge and delta
// ---------------------------------------------------------------------------------
void lc_attn_merge(float *out_a, float *lse_a, const float *out_b, const float *lse_b, int Tq,
                   int Hq, int D) {
  const long n = (long)Tq * Hq;
#pragma omp parallel for schedule(static) if (n * D > 32768)
  for (long r = 0; r < n; r++) {
    long t = r / Hq, h = r % Hq;
    float *oa = out_a + r * D;
    const float *ob = out_b + r * D;
    float la = lse_a[h * Tq + t], lb = lse_b[h * Tq + t];
    if (lb == -INFINITY) {
      if (la == -INFINITY) memset(oa, 0, sizeof(float) * (size_t)D); // no key in either
      continue;                                                      // nothing to add
    }
    if (la == -INFINITY) {
      lse_a[h * Tq + t] = lb;
      memcpy(oa, ob, sizeof(float) * (size_t)D);
      continue;
    }
    double mx = la > lb ? la : lb, mn = la > lb ? lb : la;
    double l = mx + log1p(exp(mn - mx));
    float wa = (float)exp((double)la - l), wb = (float)exp((double)lb - l);
    for (int d = 0; d < D; d++) oa[d] = wa * oa[d] + wb * ob[d];
    lse_a[h * Tq + t] = (float)l;
  }
}

void lc_attn_delta(float *delta, const float *dout, const float *out, int Tq, int Hq, int D) {
  const long n = (long)Tq * Hq;
#pragma omp parallel for schedule(static) if (n * D > 32768)
  for (long r = 0; r < n; r++) {
    long t = r / Hq, h = r % Hq;
    const float *a = dout + r * D, *b = out + r * D;
    float acc = 0.0f;
    for (int d = 0; d < D; d++) acc += a[d] * b[d];
    delta[h * Tq + t] = acc;
  }
}

// ---------------------------------------------------------------------------------
// Backward
//
// Work item = (q head h, q block ib), as in the forward: it owns its dq rows (dQt
// accumulated in a per-thread [D][64] tile and added to dq once per item and phase),
// re-uses its packed Qt/dOt for every key tile, and reads K, V in place.
// dK/dV contributions of different items collide (all q blocks and all q heads of a
// group hit the same key rows), so they go into per-thread buffers dKb/dVb[Hkv][Ck][Dp]
// covering one key chunk of Ck rows. The backward runs chunk by chunk ("phases"):
//   zero own buffers -> items of this chunk, schedule(static, 1) -> barrier ->
//   dk/dv rows of the chunk += sum over threads t = 0..P-1 of buffer t (parallel over
//   rows, fixed order) -> barrier.
// No two threads ever write the same float outside a barrier-separated step, so it
// is race-free without atomics or locks, and because the item -> thread map is static
// and every sum runs in a fixed order, results are bitwise reproducible for a given
// thread count. Workspace: P * (2*Hkv*Ck*Dp + O(D*64 + 64*64)) floats; Ck is chosen
// so the chunk buffers stay around 4 MiB per thread (O(threads * block) memory).
// ---------------------------------------------------------------------------------
typedef struct {
  float *Qt, *dOt, *Qn, *dOn, *S, *dP, *dQt, *lse2, *dlt, *dkb, *dvb;
} bwd_ws;

static long bwd_ws_floats(int D, int Hkv, long Ck) {
  long Dp = rup16(D);
  return 3 * rup16((long)D * BQ) + 2 * (long)BQ * Dp + 2 * (long)BK * BQ + 2 * BQ +
         2 * (long)Hkv * Ck * Dp;
}

static void bwd_ws_carve(bwd_ws *w, float *b, int D, int Hkv, long Ck) {
  long Dp = rup16(D), tD = rup16((long)D * BQ);
  w->Qt = b; b += tD;
  w->dOt = b; b += tD;
  w->dQt = b; b += tD;
  w->Qn = b; b += (long)BQ * Dp;
  w->dOn = b; b += (long)BQ * Dp;
  w->S = b; b += (long)BK * BQ;
  w->dP = b; b += (long)BK * BQ;
  w->lse2 = b; b += BQ;
  w->dlt = b; b += BQ;
  w->dkb = b; b += (long)Hkv * Ck * Dp;
  w->dvb = b;
}

static long test_key_chunk; // lc_flash_test_set_key_chunk (0: automatic)

void lc_flash_test_set_key_chunk(long rows) { test_key_chunk = rows > 0 ? (rows + BK - 1) / BK * BK : 0; }

long lc_flash_bwd_key_chunk(const lc_attn_shape *s) {
  const long Dp = rup16(s->D);
  // key chunk: about 4 MiB of dK/dV buffers per thread, a multiple of BK
  long ck = test_key_chunk ? test_key_chunk : (4L << 20) / (long)(sizeof(float) * 2 * s->Hkv * Dp);
  ck = ck / BK * BK;
  if (ck < BK) ck = BK;
  long Tkr = ((long)s->Tk + BK - 1) / BK * BK;
  if (ck > Tkr) ck = Tkr;
  return ck;
}

// Threads, key chunk Ck and floats of workspace per thread of a backward.
static void bwd_plan(const lc_attn_shape *s, int threads, int *nt, long *Ck, long *per) {
  long ck = lc_flash_bwd_key_chunk(s);
  long nitems_max = (long)((s->Tq + BQ - 1) / BQ) * s->Hq;
  *nt = threads;
  if (*nt > nitems_max) *nt = (int)nitems_max;
  *Ck = ck;
  *per = bwd_ws_floats(s->D, s->Hkv, ck);
}

size_t lc_flash_workspace_bytes(const lc_attn_shape *s, int bwd, int threads) {
  if (!s || s->Tq <= 0 || s->Hq <= 0 || s->Hkv <= 0 || s->D <= 0 || (bwd && s->Tk <= 0)) return 0;
  if (threads <= 0) threads = max_threads();
  int nt;
  long per, ck;
  if (bwd) bwd_plan(s, threads, &nt, &ck, &per);
  else fwd_plan(s, threads, &nt, &per);
  return lc_bytes(LC_DT_F32, (size_t)per * (size_t)nt);
}

// One item restricted to key rows [c0, c1) (c0 a multiple of BK).
static void bwd_item(float *dq, const float *dout, const float *q, const float *k,
                     const float *v, const float *lse, const float *delta,
                     const lc_attn_shape *s, int h, int ib, long c0, long c1, long Ck,
                     bwd_ws *w) {
  const int D = s->D, Hq = s->Hq, Tq = s->Tq;
  const long Dp = rup16(D);
  const int g = h / (Hq / s->Hkv);
  const long ldq = (long)Hq * D, ldk = (long)s->Hkv * D;
  const long i0 = (long)ib * BQ;
  const int nq = (int)(Tq - i0 < BQ ? Tq - i0 : BQ);
  const krange kr = key_range(s, i0, nq);
  const int *lo = s->lo ? s->lo + i0 : NULL;
  const long kend = kr.end < c1 ? kr.end : c1, kbeg = kr.beg > c0 ? kr.beg / BK * BK : c0;
  if (kend <= kbeg || kend <= kr.beg) return;

  // pack: Qt (scaled, transposed), dOt (transposed), Qn, dOn (natural, padded to Dp)
  const float *qb = q + i0 * ldq + (long)h * D, *db = dout + i0 * ldq + (long)h * D;
  pack_t(w->Qt, qb, ldq, nq, D, (float)(s->scale * LOG2E));
  pack_t(w->dOt, db, ldq, nq, D, 1.0f);
  memset(w->Qn, 0, sizeof(float) * (size_t)(BQ * Dp));
  memset(w->dOn, 0, sizeof(float) * (size_t)(BQ * Dp));
  for (int i = 0; i < nq; i++) {
    memcpy(w->Qn + i * Dp, qb + i * ldq, sizeof(float) * (size_t)D);
    memcpy(w->dOn + i * Dp, db + i * ldq, sizeof(float) * (size_t)D);
  }
  for (int i = 0; i < BQ; i++) {
    float L = i < nq ? lse[(long)h * Tq + i0 + i] : -INFINITY;
    // a row that sees no key has lse = -inf and must get P = 0: use +inf
    w->lse2[i] = L == -INFINITY ? INFINITY : (float)(L * LOG2E);
    w->dlt[i] = i < nq ? delta[(long)h * Tq + i0 + i] : 0.0f;
  }
  memset(w->dQt, 0, sizeof(float) * (size_t)D * BQ);

  const float *kh = k + (long)g * D, *vh = v + (long)g * D;
  float *dkb = w->dkb + (long)g * Ck * Dp, *dvb = w->dvb + (long)g * Ck * Dp;
  for (long j0 = kbeg; j0 < kend; j0 += BK) {
    int nk = (int)(kend - j0 < BK ? kend - j0 : BK);
    const float *kj = kh + j0 * ldk, *vj = vh + j0 * ldk;
    tile_abt(nk, D, kj, ldk, w->Qt, w->S);
    if (j0 + nk > kr.full || j0 < kr.free)
      tile_mask(w->S, nk, s->k_start + j0, s->q_start + i0, s->causal, lo, nq);
    tile_probs(w->S, nk, w->lse2);
    tile_abt(nk, D, vj, ldk, w->dOt, w->dP);
    tile_dscores(w->dP, w->S, nk, w->dlt, s->scale);
    tile_ab_acc(nk, nq, w->S, w->dOn, Dp, dvb + (j0 - c0) * Dp, Dp, (int)Dp);
    tile_ab_acc(nk, nq, w->dP, w->Qn, Dp, dkb + (j0 - c0) * Dp, Dp, (int)Dp);
    tile_atb_acc(D, nk, kj, ldk, w->dP, w->dQt);
  }

  unpack_t(dq + i0 * ldq + (long)h * D, ldq, w->dQt, nq, D, NULL, 1);
}

lc_status lc_flash_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q,
                       const float *k, const float *v, const float *lse, const float *delta,
                       const lc_attn_shape *s, lc_arena *arena) {
  LC_TRY(check_shape(s, "lc_flash_bwd"));
  if (s->Tq == 0 || s->Tk == 0) return LC_OK;
  if (!dq || !dk || !dv || !dout || !q || !k || !v || !lse || !delta)
    return lc_fail(LC_EINVAL, "lc_flash_bwd: NULL tensor");
  const int D = s->D, Hkv = s->Hkv, Tk = s->Tk;
  const long Dp = rup16(D);
  const int nqb = (s->Tq + BQ - 1) / BQ;
  int nt;
  long Ck, per;
  bwd_plan(s, max_threads(), &nt, &Ck, &per);
  float *ws = lc_alloc(arena, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, (size_t)(per * nt)),
                       "attention workspace");
  if (!ws) return LC_ENOMEM;

#pragma omp parallel num_threads(nt)
  {
    const int P = team_size();
    bwd_ws w;
    bwd_ws_carve(&w, ws + per * thread_id(), D, Hkv, Ck);
    for (long c0 = 0; c0 < Tk; c0 += Ck) {
      const long c1 = c0 + Ck < Tk ? c0 + Ck : Tk;
      const long rows = c1 - c0;
      // first q block that sees a key of this chunk (kend grows with ib)
      long ib_lo = 0;
      if (s->causal) {
        long first_q = s->k_start + c0 - s->q_start; // query row index seeing key c0
        ib_lo = first_q <= 0 ? 0 : first_q / BQ;
        if (ib_lo > nqb) ib_lo = nqb;
      }
      const long nitems = (nqb - ib_lo) * s->Hq;
      if (nitems == 0) continue; // the same decision in every thread: no key of it is seen
      for (int g = 0; g < Hkv; g++) {
        memset(w.dkb + (long)g * Ck * Dp, 0, sizeof(float) * (size_t)(rows * Dp));
        memset(w.dvb + (long)g * Ck * Dp, 0, sizeof(float) * (size_t)(rows * Dp));
      }
#pragma omp for schedule(static, 1)
      for (long it = 0; it < nitems; it++) {
        int ib = nqb - 1 - (int)(it / s->Hq), h = (int)(it % s->Hq);
        bwd_item(dq, dout, q, k, v, lse, delta, s, h, ib, c0, c1, Ck, &w);
      }
      // implicit barrier: all buffers of this chunk are complete
#pragma omp for schedule(static)
      for (long rr = 0; rr < (long)Hkv * rows; rr++) {
        int g = (int)(rr / rows);
        long j = rr % rows;
        float *dkr = dk + (c0 + j) * Hkv * (long)D + (long)g * D;
        float *dvr = dv + (c0 + j) * Hkv * (long)D + (long)g * D;
        // dk += b_0 + b_1 + ... in thread order: deterministic
        for (int t = 0; t < P; t++) {
          bwd_ws wt;
          bwd_ws_carve(&wt, ws + per * t, D, Hkv, Ck);
          const float *kb = wt.dkb + ((long)g * Ck + j) * Dp;
          const float *vb = wt.dvb + ((long)g * Ck + j) * Dp;
          for (int d = 0; d < D; d++) {
            dkr[d] += kb[d];
            dvr[d] += vb[d];
          }
        }
      }
      // implicit barrier: buffers may be reused
    }
  }
  lc_free(arena, ws);
  return LC_OK;
}
