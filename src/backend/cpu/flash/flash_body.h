// The blockwise attention kernel, compiled once per instruction-set variant (the
// kernel table's levels, backend/cpu/kern/kernels.h): backend/cpu/flash/flash_v_*.c define LC_FLASH_FN (the entry
// points' names) and include this file, each compiled with its own target flags, so the
// primitives (backend/cpu/flash/flash_prims.h) are the AVX-512 ones or the portable vector ones. With
// LC_FLASH_BF16 the tile products multiply bf16 pairs (AVX512_BF16 vdpbf16ps, fp32
// accumulation; backend/cpu/flash/flash_bf16.h) instead of fp32 values; with LC_FLASH_AMX too
// those products run on AMX tiles (backend/cpu/flash/flash_amx.h; real or emulated tiles,
// flash_tile.h). backend/cpu/flash/flash.c dispatches.
//
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
// per item (16x16 in-register transposes). No K/V packing (fp32 variants; the bf16 variant
// packs k and v once per call, backend/cpu/flash/flash_bf16.h), no Tq x Tk matrix; only diagonal tiles
// are masked, fully hidden tiles are skipped.
//
// Threads: forward items (head, q block) are independent (each owns its output rows);
// schedule(dynamic), heaviest (last, causal) blocks first.
// Backward: see lc_flash_bwd below (race-free and deterministic for a fixed thread count).
// This file is the algorithm; the instruction set's primitives (micro-kernel, tile
// softmax, transposed packing) are in backend/cpu/flash/flash_prims_avx512.h, or, in a variant compiled
// without AVX-512, backend/cpu/flash/flash_prims_portable.h (GCC/Clang vector extensions: AVX2, SSE,
// NEON, with smaller register tiles); backend/cpu/flash/flash_prims.h states their contract.
#include "backend/cpu/flash/flash.h"
#include "core/dtype.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define BQ LC_FLASH_BQ // query rows per item = 4 vectors of 16 floats (fixed by the kernels)
#define BK LC_FLASH_BK // key rows per tile

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

#include "backend/cpu/flash/flash_prims.h"
#ifdef LC_FLASH_BF16
#include "backend/cpu/flash/flash_bf16.h"
#endif
#ifdef LC_FLASH_AMX
#include "backend/cpu/flash/flash_amx.h"
#else
#define AMX_STAGE_FLOATS 0
#define AMX_THREAD_BEGIN(stage) ((void)(stage))
#define AMX_THREAD_END() ((void)0)
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

// A product whose B and C rows are 64 columns wide. Where the primitives' registers hold
// RM4 rows of 64 columns (AVX-512: 6 rows, 24 accumulators) one pass; where they hold one
// (LC_FLASH_COLS16: AVX2's 16 registers, where a 64-column row takes 8 accumulators fed by
// 8 loads of B and a broadcast per 8 FMAs, bound by the load ports) four passes of 16
// columns with RM1 rows (12 accumulators; B's 2 vectors loaded once per k for all rows:
// 8 loads per 12 FMAs). Every element's sum over k is the same sequence of FMAs either
// way: the same bits.
#ifdef LC_FLASH_COLS16
#define MK64(mode, M, K, A, sar, sak, B, ldb, C, ldc, alpha)                                                        \
  do {                                                                                                            \
    for (int c_ = 0; c_ < 64; c_ += 16)                                                                           \
      mk_rows(1, RM1, mode, M, K, A, sar, sak, (B) + c_, ldb, (C) + c_, ldc, (alpha) ? (alpha) + c_ : NULL);     \
  } while (0)
#else
#define MK64(mode, M, K, A, sar, sak, B, ldb, C, ldc, alpha) mk_rows(4, RM4, mode, M, K, A, sar, sak, B, ldb, C, ldc, alpha)
#endif

// Tile products used by the kernels (all with 64-wide B/C rows unless stated).
// St[M][64] = A[M rows, lda apart][K] * Bt[K][64]   (A = K or V rows, natural layout)
__attribute__((unused)) static void tile_abt(int M, int K, const float *A, long lda, const float *Bt, float *C) {
  const float *none = NULL;
  MK64(0, M, K, A, lda, 1, Bt, BQ, C, BQ, none);
}
// Ct[M][64] = alpha * Ct + A^T * P, A element (r, k) at A[k*lda + r]   (Ot += V^T Pt)
__attribute__((unused)) static void tile_atb_scale(int M, int K, const float *A, long lda, const float *P, float *C,
                           const float *alpha) {
  MK64(2, M, K, A, 1, lda, P, BQ, C, BQ, alpha);
}
// Ct[M][64] += A^T * P   (dQt += K^T dSt)
__attribute__((unused)) static void tile_atb_acc(int M, int K, const float *A, long lda, const float *P, float *C) {
  const float *none = NULL;
  MK64(1, M, K, A, 1, lda, P, BQ, C, BQ, none);
}
// C[M][N] += P[M][K] (rows 64 apart) * B[K][N] (rows ldb apart), N = Dp multiple of 16.
// (dV += Pt dO, dK += dSt Q)
__attribute__((unused)) static void tile_ab_acc(int M, int K, const float *P, const float *B, long ldb, float *C, long ldc,
                        int N) {
  int c0 = 0;
  const float *none = NULL;
  for (; c0 + 64 <= N; c0 += 64) MK64(1, M, K, P, BQ, 1, B + c0, ldb, C + c0, ldc, none);
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

// ---------------------------------------------------------------------------------
// Shapes and the causal key range of a query block.
// ---------------------------------------------------------------------------------
static lc_status check_shape(const lc_attn_shape *s, const char *fn) {
  if (!s) return lc_fail(LC_EINVAL, "%s: shape is NULL", fn);
  if (s->Tq < 0 || s->Tk < 0 || s->Hq < 1 || s->Hkv < 1 || s->D < 1 || s->Hq % s->Hkv != 0)
    return lc_fail(LC_EINVAL, "%s: bad shape Tq=%d Tk=%d Hq=%d Hkv=%d D=%d (need Hq %% Hkv == 0)",
                   fn, s->Tq, s->Tk, s->Hq, s->Hkv, s->D);
  if (!(s->scale == s->scale)) return lc_fail(LC_EINVAL, "%s: scale is NaN", fn);
  if ((s->q16 || s->kv16 || s->out16) && !s->bf16)
    return lc_fail(LC_EINVAL, "%s: 2-byte tensors (q16 %d, kv16 %d, out16 %d) hold bf16 values: set bf16", fn, s->q16,
                   s->kv16, s->out16);
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

// n rows of D input values at element `off` of x, rows *ld apart: in place (fp32), or
// (x16: a 2-byte bf16 array) widened, exactly, into buf with rows D apart (*ld becomes D).
static const float *block_rows(float *buf, const void *x, int x16, long off, long *ld, int n, int D) {
  if (!x16) return (const float *)x + off;
  const uint16_t *src = (const uint16_t *)x + off;
  for (int i = 0; i < n; i++)
    for (int d = 0; d < D; d++) buf[(long)i * D + d] = lc_bf16_widen(src[(long)i * *ld + d]);
  *ld = D;
  return buf;
}

// Per-thread floats for 2-byte inputs and output: a widened query block (and dout's,
// backward) when q16; a widened k and v tile when kv16 in the fp32-product kernels (the
// bf16 kernel packs k/v per call, reading 2 bytes directly); the output block before it is
// narrowed when out16 (forward).
static long in16_floats(const lc_attn_shape *s, int bwd) {
  long n = s->q16 ? (bwd ? 2 : 1) * rup16((long)BQ * s->D) : 0;
#ifndef LC_FLASH_BF16
  if (s->kv16) n += 2 * rup16((long)BK * s->D);
#endif
  if (!bwd && s->out16) n += rup16((long)BQ * s->D);
  return n;
}
typedef struct {
  float *Qw, *dOw, *Kw, *Vw, *Ow; // NULL where not needed
} in16_bufs;
// Carves in16_floats at b.
static in16_bufs in16_carve(float *b, const lc_attn_shape *s, int bwd) {
  in16_bufs w = {NULL, NULL, NULL, NULL, NULL};
  if (s->q16) {
    w.Qw = b, b += rup16((long)BQ * s->D);
    if (bwd) w.dOw = b, b += rup16((long)BQ * s->D);
  }
#ifndef LC_FLASH_BF16
  if (s->kv16) w.Kw = b, w.Vw = b + rup16((long)BK * s->D), b += 2 * rup16((long)BK * s->D);
#endif
  if (!bwd && s->out16) w.Ow = b;
  return w;
}

// ---------------------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------------------
typedef struct {
  float *Qt, *S, *Ot, *m, *l, *alpha;
  in16_bufs x; // 2-byte inputs and output (in16_carve)
#ifdef LC_FLASH_BF16
  uint32_t *Qp, *Pp;            // this thread's packed q block and probability tile
  const uint32_t *KP, *VT;      // the call's packed k rows and transposed v (shared)
#endif
} fwd_ws;

static long fwd_ws_floats(const lc_attn_shape *s) {
  const int D = s->D;
  long n = 2 * rup16((long)D * BQ) + (long)BK * BQ + 3 * BQ;
#ifdef LC_FLASH_BF16
  n += rup16((long)(D + 1) / 2 * BQ) + (long)(BK / 2) * BQ;
#endif
  return n + in16_floats(s, 0) + AMX_STAGE_FLOATS;
}

#ifdef LC_FLASH_BF16
// Words of the call's shared packed k/v (bf16 pairs, flash_bf16.h): forward KP (natural)
// and VT (transposed); backward KP, KT (transposed) and VP (natural).
static long kv_nat_words(const lc_attn_shape *s) { return (long)s->Hkv * s->Tk * ((s->D + 1) / 2); }
static long kv_tr_words(const lc_attn_shape *s) { return (long)s->Hkv * tr_blocks(s->Tk) * s->D * TR_LD; }
static long kv_pack_words(const lc_attn_shape *s, int bwd) {
  return kv_nat_words(s) * (bwd ? 2 : 1) + kv_tr_words(s);
}
// Fills the packed k/v at base (forward: [KP | VT], backward: [KP | KT | VP]) with the
// threads of the enclosing parallel region (implicit barriers: packed before use).
static void kv_fill(uint32_t *base, const void *k, const void *v, const lc_attn_shape *s, int bwd) {
  uint32_t *tr = base + kv_nat_words(s);
  if (bwd) {
    pack_kv(base, tr, k, s->kv16, s->Tk, s->Hkv, s->D);
    pack_kv(tr + kv_tr_words(s), NULL, v, s->kv16, s->Tk, s->Hkv, s->D);
  } else {
    pack_kv(base, NULL, k, s->kv16, s->Tk, s->Hkv, s->D);
    pack_kv(NULL, tr, v, s->kv16, s->Tk, s->Hkv, s->D);
  }
}
#endif

// Bytes of the packed k/v of shape s (0: this variant reads k and v in place).
size_t LC_FLASH_FN(kv_bytes)(const lc_attn_shape *s, int bwd) {
#ifdef LC_FLASH_BF16
  if (s && s->Tk > 0 && s->Hkv > 0 && s->D > 0) return lc_bytes(LC_DT_F32, (size_t)kv_pack_words(s, bwd));
#endif
  (void)s, (void)bwd;
  return 0;
}

// Packs k/v once for several calls on the same block (shape.kv_pack), in parallel.
void LC_FLASH_FN(kv_pack)(void *dst, const void *k, const void *v, const lc_attn_shape *s, int bwd) {
#ifdef LC_FLASH_BF16
  if (LC_FLASH_FN(kv_bytes)(s, bwd) == 0) return;
#pragma omp parallel
  kv_fill((uint32_t *)dst, k, v, s, bwd);
#else
  (void)dst, (void)k, (void)v, (void)s, (void)bwd;
#endif
}

static void fwd_ws_carve(fwd_ws *w, float *base, const lc_attn_shape *s) {
  const int D = s->D;
  w->Qt = base;
  base += rup16((long)D * BQ);
  w->Ot = base;
  base += rup16((long)D * BQ);
  w->S = base;
  base += (long)BK * BQ;
  w->m = base;
  w->l = base + BQ;
  w->alpha = base + 2 * BQ;
#ifdef LC_FLASH_BF16
  base += 3 * BQ;
  w->Qp = (uint32_t *)base;
  base += rup16((long)(D + 1) / 2 * BQ);
  w->Pp = (uint32_t *)base;
  base += (long)(BK / 2) * BQ;
#else
  base += 3 * BQ;
#endif
  w->x = in16_carve(base, s, 0);
}

// Threads (at most one per work item) and floats of workspace per thread of a forward.
static void fwd_plan(const lc_attn_shape *s, int threads, int *nt, long *per) {
  const long nitems = (long)((s->Tq + BQ - 1) / BQ) * s->Hq;
  *nt = threads;
  if (*nt > nitems) *nt = (int)nitems;
  *per = fwd_ws_floats(s);
}

static void fwd_item(void *out, float *lse, const void *q, const void *k, const void *v,
                     const lc_attn_shape *s, int h, int ib, fwd_ws *w) {
  const int D = s->D, Hq = s->Hq, Tq = s->Tq;
  const int g = h / (Hq / s->Hkv);
  const long ldq = (long)Hq * D, ldk = (long)s->Hkv * D;
  const long i0 = (long)ib * BQ;
  const int nq = (int)(Tq - i0 < BQ ? Tq - i0 : BQ);
  const krange kr = key_range(s, i0, nq);
  const int *lo = s->lo ? s->lo + i0 : NULL;

  const size_t osz = s->out16 ? sizeof(uint16_t) : sizeof(float);
  char *orow = (char *)out + osz * (size_t)(i0 * ldq + (long)h * D); // row i0 of head h
  if (kr.end <= kr.beg) { // no key visible to any row of this block
    for (int i = 0; i < nq; i++) {
      lse[(long)h * Tq + i0 + i] = -INFINITY;
      memset(orow + osz * (size_t)(i * ldq), 0, osz * (size_t)D);
    }
    return;
  }

  memset(w->Ot, 0, sizeof(float) * (size_t)D * BQ);
  for (int i = 0; i < BQ; i++) {
    w->m[i] = -INFINITY;
    w->l[i] = 0.0f;
  }
#ifdef LC_FLASH_BF16
  // Qp = q pairs (unscaled: bf16-exact); St = K Qp, then scaled by scale * log2(e) in fp32.
  (void)k, (void)v, (void)ldk;
  const int D2 = (D + 1) / 2;
  const float sl2 = (float)(s->scale * LOG2E);
  long ldqb = ldq;
  const float *qb = block_rows(w->x.Qw, q, s->q16, i0 * ldq + (long)h * D, &ldqb, nq, D);
  pack_qp(w->Qp, qb, ldqb, nq, D);
  const uint32_t *kp = w->KP + (long)g * s->Tk * D2;
  for (long j0 = kr.beg / BK * BK; j0 < kr.end; j0 += BK) {
    int nk = (int)(kr.end - j0 < BK ? kr.end - j0 : BK);
    t16_64(0, nk, D2, kp + j0 * D2, D2, w->Qp, w->S, NULL);
    tile_scale(w->S, nk, sl2);
    if (j0 + nk > kr.full || j0 < kr.free)
      tile_mask(w->S, nk, s->k_start + j0, s->q_start + i0, s->causal, lo, nq);
    tile_softmax(w->S, nk, w->m, w->l, w->alpha);
    pack_pp(w->Pp, w->S, nk);
    t16_64(2, D, (nk + 1) / 2, tr_tile(w->VT, s->Tk, D, g, j0), TR_LD, w->Pp, w->Ot, w->alpha);
  }
#else
  // Qt[d][i] = q * scale * log2(e); padded query columns are 0.
  long ldqb = ldq;
  const float *qb = block_rows(w->x.Qw, q, s->q16, i0 * ldq + (long)h * D, &ldqb, nq, D);
  pack_t(w->Qt, qb, ldqb, nq, D, (float)(s->scale * LOG2E));
  for (long j0 = kr.beg / BK * BK; j0 < kr.end; j0 += BK) {
    int nk = (int)(kr.end - j0 < BK ? kr.end - j0 : BK);
    long ldkt = ldk, ldvt = ldk; // k and v rows of the tile: in place, or widened
    const float *kj = block_rows(w->x.Kw, k, s->kv16, j0 * ldk + (long)g * D, &ldkt, nk, D);
    tile_abt(nk, D, kj, ldkt, w->Qt, w->S);
    if (j0 + nk > kr.full || j0 < kr.free)
      tile_mask(w->S, nk, s->k_start + j0, s->q_start + i0, s->causal, lo, nq);
    tile_softmax(w->S, nk, w->m, w->l, w->alpha);
    const float *vj = block_rows(w->x.Vw, v, s->kv16, j0 * ldk + (long)g * D, &ldvt, nk, D);
    tile_atb_scale(D, nk, vj, ldvt, w->S, w->Ot, w->alpha);
  }
#endif

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
  if (!s->out16) {
    unpack_t((float *)(void *)orow, ldq, w->Ot, nq, D, inv, 0);
    return;
  }
  unpack_t(w->x.Ow, D, w->Ot, nq, D, inv, 0); // the block in fp32, then narrowed row by row
  for (int i = 0; i < nq; i++) {
    uint16_t *o16 = (uint16_t *)(void *)(orow + osz * (size_t)(i * ldq));
    for (int d = 0; d < D; d++) o16[d] = lc_bf16_narrow(w->x.Ow[(long)i * D + d]);
  }
}

lc_status LC_FLASH_FN(fwd)(void *out, float *lse, const void *q, const void *k, const void *v,
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
  long shared = 0;
#ifdef LC_FLASH_BF16
  shared = s->Tk > 0 && !s->kv_pack ? kv_pack_words(s, 0) : 0;
#endif
  float *ws = lc_alloc(arena, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, (size_t)(per * nt + shared)),
                       "attention workspace");
  if (!ws) return LC_ENOMEM;

#pragma omp parallel num_threads(nt)
  {
    fwd_ws w;
    fwd_ws_carve(&w, ws + per * thread_id(), s);
#ifdef LC_FLASH_BF16
    uint32_t *kp = s->kv_pack ? (uint32_t *)s->kv_pack : (uint32_t *)(ws + per * nt);
    if (s->Tk > 0 && !s->kv_pack) kv_fill(kp, k, v, s, 0);
    w.KP = kp, w.VT = kp + kv_nat_words(s);
#endif
    AMX_THREAD_BEGIN(ws + per * thread_id() + per - AMX_STAGE_FLOATS);
#pragma omp for schedule(dynamic, 1)
    for (long it = 0; it < nitems; it++) {
      // last query blocks first: under a causal mask they see the most keys
      int ib = nqb - 1 - (int)(it / s->Hq), h = (int)(it % s->Hq);
      fwd_item(out, lse, q, k, v, s, h, ib, &w);
    }
    AMX_THREAD_END();
  }
  lc_free(arena, ws);
  return LC_OK;
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
// so the chunk buffers stay around 4 MiB per thread (O(threads * block) memory); the bf16
// variant adds the call's packed k, k^T and v (1.5 x Hkv x Tk x D words).
// ---------------------------------------------------------------------------------
typedef struct {
  float *Qt, *dOt, *Qn, *dOn, *S, *dP, *dQt, *lse2, *dlt, *dkb, *dvb;
  in16_bufs x; // widened 2-byte inputs (in16_carve)
#ifdef LC_FLASH_BF16
  // Qt/dOt hold the pairs Qp/dOp, Qn/dOn the pairs Qn2/dOn2 (no more words than floats).
  uint32_t *P16, *dS16, *dSp;            // a tile's P and dS rows, and dS as B operand
  const uint32_t *KP, *KT, *VP;          // the call's packed k and v (shared)
#endif
} bwd_ws;

static long bwd_ws_floats(const lc_attn_shape *s, long Ck) {
  const int D = s->D, Hkv = s->Hkv;
  long Dp = rup16(D);
  long n = 3 * rup16((long)D * BQ) + 2 * (long)BQ * Dp + 2 * (long)BK * BQ + 2 * BQ +
           2 * (long)Hkv * Ck * Dp;
#ifdef LC_FLASH_BF16
  n += 3 * (long)BK * (BQ / 2);
#endif
  return n + in16_floats(s, 1) + AMX_STAGE_FLOATS;
}

static void bwd_ws_carve(bwd_ws *w, float *b, const lc_attn_shape *s, long Ck) {
  const int D = s->D, Hkv = s->Hkv;
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
#ifdef LC_FLASH_BF16
  b += (long)Hkv * Ck * Dp;
  w->P16 = (uint32_t *)b; b += (long)BK * (BQ / 2);
  w->dS16 = (uint32_t *)b; b += (long)BK * (BQ / 2);
  w->dSp = (uint32_t *)b;
  b += (long)BK * (BQ / 2);
#else
  b += (long)Hkv * Ck * Dp;
#endif
  w->x = in16_carve(b, s, 1);
}

// Threads, key chunk Ck and floats of workspace per thread of a backward.
static void bwd_plan(const lc_attn_shape *s, int threads, int *nt, long *Ck, long *per) {
  long ck = lc_flash_bwd_key_chunk(s);
  long nitems_max = (long)((s->Tq + BQ - 1) / BQ) * s->Hq;
  *nt = threads;
  if (*nt > nitems_max) *nt = (int)nitems_max;
  *Ck = ck;
  *per = bwd_ws_floats(s, ck);
}

size_t LC_FLASH_FN(ws)(const lc_attn_shape *s, int bwd, int threads) {
  if (!s || s->Tq <= 0 || s->Hq <= 0 || s->Hkv <= 0 || s->D <= 0 || (bwd && s->Tk <= 0)) return 0;
  if (threads <= 0) threads = max_threads();
  int nt;
  long per, ck;
  if (bwd) bwd_plan(s, threads, &nt, &ck, &per);
  else fwd_plan(s, threads, &nt, &per);
  long shared = 0;
#ifdef LC_FLASH_BF16
  shared = s->Tk > 0 && !s->kv_pack ? kv_pack_words(s, bwd) : 0;
#endif
  return lc_bytes(LC_DT_F32, (size_t)per * (size_t)nt + (size_t)shared);
}

// One item restricted to key rows [c0, c1) (c0 a multiple of BK).
static void bwd_item(float *dq, const void *dout, const void *q, const void *k,
                     const void *v, const float *lse, const float *delta,
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
  long ldqb = ldq, lddb = ldq; // the q and dout rows: in place, or widened
  const float *qb = block_rows(w->x.Qw, q, s->q16, i0 * ldq + (long)h * D, &ldqb, nq, D);
  const float *db = block_rows(w->x.dOw, dout, s->q16, i0 * ldq + (long)h * D, &lddb, nq, D);
#ifdef LC_FLASH_BF16
  uint32_t *Qp = (uint32_t *)w->Qt, *dOp = (uint32_t *)w->dOt, *Qn2 = (uint32_t *)w->Qn, *dOn2 = (uint32_t *)w->dOn;
  pack_qp(Qp, qb, ldqb, nq, D);
  pack_qp(dOp, db, lddb, nq, D);
  pack_qn2(Qn2, qb, ldqb, nq, D, Dp);
  pack_qn2(dOn2, db, lddb, nq, D, Dp);
#else
  pack_t(w->Qt, qb, ldqb, nq, D, (float)(s->scale * LOG2E));
  pack_t(w->dOt, db, lddb, nq, D, 1.0f);
  memset(w->Qn, 0, sizeof(float) * (size_t)(BQ * Dp));
  memset(w->dOn, 0, sizeof(float) * (size_t)(BQ * Dp));
  for (int i = 0; i < nq; i++) {
    memcpy(w->Qn + i * Dp, qb + i * ldqb, sizeof(float) * (size_t)D);
    memcpy(w->dOn + i * Dp, db + i * lddb, sizeof(float) * (size_t)D);
  }
#endif
  for (int i = 0; i < BQ; i++) {
    float L = i < nq ? lse[(long)h * Tq + i0 + i] : -INFINITY;
    // a row that sees no key has lse = -inf and must get P = 0: use +inf
    w->lse2[i] = L == -INFINITY ? INFINITY : (float)(L * LOG2E);
    w->dlt[i] = i < nq ? delta[(long)h * Tq + i0 + i] : 0.0f;
  }
  memset(w->dQt, 0, sizeof(float) * (size_t)D * BQ);

  float *dkb = w->dkb + (long)g * Ck * Dp, *dvb = w->dvb + (long)g * Ck * Dp;
#ifdef LC_FLASH_BF16
  (void)k, (void)v, (void)ldk;
  const int D2 = (D + 1) / 2;
  const float sl2 = (float)(s->scale * LOG2E);
  const uint32_t *kp = w->KP + (long)g * s->Tk * D2, *vp = w->VP + (long)g * s->Tk * D2;
  for (long j0 = kbeg; j0 < kend; j0 += BK) {
    int nk = (int)(kend - j0 < BK ? kend - j0 : BK);
    t16_64(0, nk, D2, kp + j0 * D2, D2, Qp, w->S, NULL); // St = K Qp
    tile_scale(w->S, nk, sl2);
    if (j0 + nk > kr.full || j0 < kr.free)
      tile_mask(w->S, nk, s->k_start + j0, s->q_start + i0, s->causal, lo, nq);
    tile_probs(w->S, nk, w->lse2);
    t16_64(0, nk, D2, vp + j0 * D2, D2, dOp, w->dP, NULL); // dPt = V dOp
    tile_dscores(w->dP, w->S, nk, w->dlt, s->scale);
    pack_rows(w->P16, w->S, nk);
    pack_rows(w->dS16, w->dP, nk);
    pack_pp(w->dSp, w->dP, nk);
    t16_acc(nk, (nq + 1) / 2, w->P16, BQ / 2, dOn2, Dp, dvb + (j0 - c0) * Dp, Dp, (int)Dp); // dV += Pt dO
    t16_acc(nk, (nq + 1) / 2, w->dS16, BQ / 2, Qn2, Dp, dkb + (j0 - c0) * Dp, Dp, (int)Dp); // dK += dSt Q
    t16_64(1, D, (nk + 1) / 2, tr_tile(w->KT, s->Tk, D, g, j0), TR_LD, w->dSp, w->dQt, NULL); // dQt += K^T dSt
  }
#else
  for (long j0 = kbeg; j0 < kend; j0 += BK) {
    int nk = (int)(kend - j0 < BK ? kend - j0 : BK);
    long ldkt = ldk, ldvt = ldk; // k and v rows of the tile: in place, or widened
    const float *kj = block_rows(w->x.Kw, k, s->kv16, j0 * ldk + (long)g * D, &ldkt, nk, D);
    const float *vj = block_rows(w->x.Vw, v, s->kv16, j0 * ldk + (long)g * D, &ldvt, nk, D);
    tile_abt(nk, D, kj, ldkt, w->Qt, w->S);
    if (j0 + nk > kr.full || j0 < kr.free)
      tile_mask(w->S, nk, s->k_start + j0, s->q_start + i0, s->causal, lo, nq);
    tile_probs(w->S, nk, w->lse2);
    tile_abt(nk, D, vj, ldvt, w->dOt, w->dP);
    tile_dscores(w->dP, w->S, nk, w->dlt, s->scale);
    tile_ab_acc(nk, nq, w->S, w->dOn, Dp, dvb + (j0 - c0) * Dp, Dp, (int)Dp);
    tile_ab_acc(nk, nq, w->dP, w->Qn, Dp, dkb + (j0 - c0) * Dp, Dp, (int)Dp);
    tile_atb_acc(D, nk, kj, ldkt, w->dP, w->dQt);
  }
#endif

  unpack_t(dq + i0 * ldq + (long)h * D, ldq, w->dQt, nq, D, NULL, 1);
}

lc_status LC_FLASH_FN(bwd)(float *dq, float *dk, float *dv, const void *dout, const void *q,
                       const void *k, const void *v, const float *lse, const float *delta,
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
  long shared = 0;
#ifdef LC_FLASH_BF16
  shared = s->kv_pack ? 0 : kv_pack_words(s, 1);
#endif
  float *ws = lc_alloc(arena, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, (size_t)(per * nt + shared)),
                       "attention workspace");
  if (!ws) return LC_ENOMEM;

#pragma omp parallel num_threads(nt)
  {
    const int P = team_size();
    bwd_ws w;
    bwd_ws_carve(&w, ws + per * thread_id(), s, Ck);
#ifdef LC_FLASH_BF16
    uint32_t *kp = s->kv_pack ? (uint32_t *)s->kv_pack : (uint32_t *)(ws + per * nt);
    if (!s->kv_pack) kv_fill(kp, k, v, s, 1);
    w.KP = kp, w.KT = kp + kv_nat_words(s), w.VP = w.KT + kv_tr_words(s);
#endif
    AMX_THREAD_BEGIN(ws + per * thread_id() + per - AMX_STAGE_FLOATS);
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
          bwd_ws_carve(&wt, ws + per * t, s, Ck);
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
    AMX_THREAD_END();
  }
  lc_free(arena, ws);
  return LC_OK;
}
