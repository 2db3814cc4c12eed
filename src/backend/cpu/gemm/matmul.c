// Linear layer: W in the HF layout [N, K]. Two paths, chosen per call (lc_mm):
//  - fp32: lc_sgemm (backend/cpu/gemm/sgemm.h): OpenBLAS's sgemm (OpenMP flavour), or oneDNN's fp32
//    matmul where calibrate measured it faster for the shape. Both thread each call
//    themselves (and run single-threaded inside an OpenMP parallel region), so nothing here
//    opens one.
//  - bf16 (a bf16 pass, and the kernel table has gemm_bf16: oneDNN on AVX512_BF16/AMX):
//    the table's GEMM multiplies 2-byte operands with fp32 accumulation. Activations
//    stored as bf16 (lc_act of LC_DT_BF16: the layer's norms, gate/up/h, rounded
//    gradients) are read where they lie, with their row stride; operands in fp32 slots
//    (they hold bf16 values, layer.h, so packing is exact) and weights in fp32 slots
//    (the embedding's and the head's compute copy) are packed to 2 bytes into scratch
//    (a decoder layer's weights come as the store's 2-byte copy, read in place): the smaller of the two operands whole, the larger
//    in chunks of LC_MM_CHUNK rows, each packed once per call (rows mode when T >= N: W
//    whole, the activation rows in chunks; columns mode otherwise, e.g. the LM head
//    [vocab, dim] against a loss tile: the activation whole, W and the matching columns
//    of dout in chunks). A bf16 output is computed into an fp32 chunk and rounded.
//    Fewer than LC_MM_MIN_ROWS rows (decoding, a short last tile) stay on sgemm when W
//    would have to be packed (fp32 slots: a product that thin is memory-bound and packing
//    W would cost more than it saves); a 2-byte W is read in place at any row count.
//  - sgemm on bf16 operands (no native bf16 GEMM: below the bf16 kernel level, or thin):
//    chunks of LC_MM_CHUNK rows widened into fp32 scratch (exact), bf16 weights widened
//    whole (a layer's matrices), or, with more weight rows than input rows (an LM head
//    against a loss tile), in chunks of LC_MM_CHUNK weight rows against the whole input; a
//    bf16 output rounded from an fp32 chunk; the sums over chunks in order.
//  - W in ggml's blocks (a QLoRA frozen base, core/dtype.h's LC_DT_Q8_0 ..): tiles of
//    LC_MM_CHUNK of W's rows dequantized into fp32 scratch (core/dequant.h), rounded to bf16
//    values in a bf16 pass (its operands are bf16 values, on every CPU), and packed to
//    2 bytes for the native bf16 GEMM (at any row count); each tile against the activation
//    in chunks of LC_MM_CHUNK rows, operands and a bf16 output handled per chunk as above,
//    so the scratch is bounded by the chunks, never T x K or N x K. Forward only, and
//    dinp: a frozen base has no weight gradient (dw must be NULL).
// Every path's scratch is lc_matmul_*_bytes (arena, LC_MEM_SCRATCH), which the memory
// model uses; the buffer's fp32 part comes first (4-byte alignment), its 2-byte part after.
#include "backend/cpu/ops/ops.h"

#include <string.h>

#include "core/dequant.h"
#include "backend/cpu/kern/kernels.h"
#include "backend/cpu/gemm/sgemm.h"

#define LC_MM_CHUNK 1024
#define LC_MM_MIN_ROWS 16

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

// A weight already in 2 bytes is read in place at any row count: for sgemm it would be
// widened whole (N x K x 4 bytes of scratch and a pass over W, for a few rows). A weight in
// blocks is dequantized tile by tile on either path, so it too takes the native GEMM at
// any row count.
static int use_bf16(int bf16, int T, int K, int N, lc_dtype wdt) {
  return bf16 && (T >= LC_MM_MIN_ROWS || wdt == LC_DT_BF16 || lc_dtype_is_quant(wdt)) && K > 0 && N > 0 &&
         lc_kern()->gemm_bf16;
}

static int is16(lc_dtype t) { return t == LC_DT_BF16; }

// Elements of the scratch's two parts (fp32 first, then 2-byte) for one call.
typedef struct {
  size_t f32, h16;
} mm_parts;

static size_t part_bytes(mm_parts p) { return lc_bytes(LC_DT_F32, p.f32) + lc_bytes(LC_DT_BF16, p.h16); }

static mm_parts fwd_parts(int bf16, lc_dtype odt, lc_dtype idt, lc_dtype wdt, int T, int K, int N) {
  mm_parts p = {0, 0};
  if (T <= 0 || N <= 0) return p;
  const size_t t = (size_t)T, n = (size_t)N, k = (size_t)K, R = min_sz(LC_MM_CHUNK, t), Rn = min_sz(LC_MM_CHUNK, n);
  const int nat = use_bf16(bf16, T, K, N, wdt);
  if (lc_dtype_is_quant(wdt)) { // a tile of W's rows (+ its 2-byte copy), a chunk of inp's rows, out's chunk
    p.f32 = Rn * k + (!nat && is16(idt) ? R * k : 0) + (is16(odt) ? R * Rn : 0);
    p.h16 = nat ? Rn * k + (is16(idt) ? 0 : R * k) : 0;
  } else if (nat) {
    if (T >= N) { // W whole (fp32 slots only) + a chunk of rows (fp32 slots only); a bf16 output's fp32 chunk
      p.h16 = (is16(wdt) ? 0 : n * k) + (is16(idt) ? 0 : R * k);
      p.f32 = is16(odt) ? R * n : 0;
    } else { // inp whole (fp32 slots only) + a chunk of W rows (fp32 slots only); a bf16 output's fp32 columns
      p.h16 = (is16(idt) ? 0 : t * k) + (is16(wdt) ? 0 : Rn * k);
      p.f32 = is16(odt) ? t * Rn : 0;
    }
  } else if (T >= N || !is16(wdt)) { // sgemm: bf16 W widened whole, bf16 rows widened, a bf16 output's fp32 chunk
    p.f32 = (is16(wdt) ? n * k : 0) + (is16(idt) ? R * k : 0) + (is16(odt) ? R * n : 0);
  } else { // sgemm, bf16 W with more rows than inp (an LM head): inp whole, W and out in column chunks
    p.f32 = (is16(idt) ? t * k : 0) + Rn * k + (is16(odt) ? t * Rn : 0);
  }
  return p;
}

static mm_parts bwd_parts(int bf16, lc_dtype ddt, lc_dtype idt, lc_dtype wdt, int T, int K, int N) {
  mm_parts p = {0, 0};
  if (T <= 0 || K <= 0) return p;
  const size_t t = (size_t)T, n = (size_t)N, k = (size_t)K, R = min_sz(LC_MM_CHUNK, t), Rn = min_sz(LC_MM_CHUNK, n);
  const int nat = use_bf16(bf16, T, K, N, wdt);
  if (lc_dtype_is_quant(wdt)) { // a tile of W's rows (+ its 2-byte copy), dout's matching columns of a chunk of rows
    p.f32 = Rn * k + (!nat && is16(ddt) ? R * Rn : 0);
    p.h16 = nat ? Rn * k + (is16(ddt) ? 0 : R * Rn) : 0;
  } else if (nat) {
    if (T >= N) // W whole + rows of dout and inp (fp32 slots only)
      p.h16 = (is16(wdt) ? 0 : n * k) + (is16(ddt) ? 0 : R * n) + (is16(idt) ? 0 : R * k);
    else // inp whole, columns of dout + rows of W (fp32 slots only)
      p.h16 = (is16(idt) ? 0 : t * k) + (is16(ddt) ? 0 : t * Rn) + (is16(wdt) ? 0 : Rn * k);
  } else if (T >= N || !is16(wdt)) {
    p.f32 = (is16(wdt) && N > 0 ? n * k : 0) + (is16(ddt) ? R * n : 0) + (is16(idt) ? R * k : 0);
  } else { // bf16 W with more rows than inp: inp whole, columns of dout and rows of W in chunks
    p.f32 = (is16(idt) ? t * k : 0) + (is16(ddt) ? t * Rn : 0) + Rn * k;
  }
  return p;
}

size_t lc_matmul_fwd_bytes(int bf16, lc_dtype out_dt, lc_dtype in_dt, lc_dtype w_dt, int T, int K, int N) {
  return part_bytes(fwd_parts(bf16, out_dt, in_dt, w_dt, T, K, N));
}

size_t lc_matmul_bwd_bytes(int bf16, lc_dtype dout_dt, lc_dtype in_dt, lc_dtype w_dt, int T, int K, int N) {
  return part_bytes(bwd_parts(bf16, dout_dt, in_dt, w_dt, T, K, N));
}

// rows x cols values rounded to bf16 (exact on bf16 values): src rows lds apart into dst
// rows ldd apart.
static void pack_rows(uint16_t *dst, long ldd, const float *src, long lds, int rows, int cols) {
  if (ldd == cols && lds == cols) {
    lc_bf16_pack(dst, src, (size_t)rows * cols);
    return;
  }
  void (*pk)(uint16_t *, const float *, size_t) = lc_kern()->bf16_pack;
#pragma omp parallel for schedule(static) if ((size_t)rows * cols >= ((size_t)1 << 16))
  for (int r = 0; r < rows; r++) pk(dst + (size_t)r * ldd, src + (size_t)r * lds, (size_t)cols);
}
// Into a dense dst (an operand's 2-byte copy), or from a dense src (an output chunk).
static void pack(uint16_t *dst, const float *src, long ld, int rows, int cols) { pack_rows(dst, cols, src, ld, rows, cols); }
static void pack_to(uint16_t *dst, long ld, const float *src, int rows, int cols) { pack_rows(dst, ld, src, cols, rows, cols); }

// Row t of an activation operand with rows of `cols` values, as 2 bytes (bf16 operands)
// or fp32.
static const uint16_t *row16(lc_act a, size_t t, size_t cols) { return (const uint16_t *)a.p + t * cols; }
static const float *row32(lc_act a, size_t t, size_t cols) { return (const float *)a.p + t * cols; }

// What a call that packs nothing (2-byte operands, fp32 output) gets: no scratch at all.
static float no_scratch[1];
// The call's scratch: the caller's (lc_mm.scratch) when it is large enough, else the arena's.
static float *get_scratch(const lc_mm *mm, mm_parts parts, lc_status *st) {
  const size_t bytes = part_bytes(parts);
  *st = LC_OK;
  if (!bytes) return no_scratch;
  if (mm && mm->scratch && mm->scratch_bytes >= bytes) return mm->scratch;
  if (!mm || !mm->arena) {
    *st = lc_fail(LC_EINVAL, "internal: a GEMM on bf16 or quantized operands needs an arena");
    return NULL;
  }
  float *buf = lc_alloc(mm->arena, LC_MEM_SCRATCH, bytes, "GEMM operands");
  if (!buf) *st = LC_ENOMEM;
  return buf;
}
static void put_scratch(const lc_mm *mm, float *buf) {
  if (buf != no_scratch && buf != mm->scratch) lc_free(mm->arena, buf);
}

// rows x cols bf16 values at src (rows lds apart) widened into dense dst: the current
// values of a bf16 output that a product is added to.
static void unpack_from(float *dst, const uint16_t *src, long lds, int rows, int cols) {
  for (int r = 0; r < rows; r++) lc_bf16_unpack(dst + (size_t)r * cols, src + (size_t)r * lds, (size_t)cols);
}

// Tile w32 [nn, K] of W's rows n0.. (a block type) dequantized; in a bf16 pass rounded to
// bf16 values, or (native GEMM) packed into w16.
static void q_tile(float *w32, uint16_t *w16, int bf, lc_act w, int n0, int nn, int K) {
  const size_t rb = lc_bytes(w.dt, (size_t)K);
  lc_dequant_rows(w.dt, (const unsigned char *)w.p + (size_t)n0 * rb, (size_t)nn, (size_t)K, w32);
  if (w16) lc_bf16_pack(w16, w32, (size_t)nn * K);
  else if (bf) lc_bf16_round(w32, (size_t)nn * K);
}

// out (=|+=) inp @ W^T for W in blocks: per tile of W's rows, per chunk of inp's rows.
static lc_status q_fwd(const lc_mm *mm, mm_parts parts, void *out, lc_dtype out_dt, lc_act inp, lc_act w, int T,
                       int K, int N, float beta) {
  const int bf = mm ? mm->bf16 : 0, nat = use_bf16(bf, T, K, N, w.dt);
  const size_t k = (size_t)K, R = min_sz(LC_MM_CHUNK, (size_t)T), Rn = min_sz(LC_MM_CHUNK, (size_t)N);
  lc_status st;
  float *buf = get_scratch(mm, parts, &st);
  if (!buf) return st;
  float *w32 = buf, *x32 = !nat && is16(inp.dt) ? buf + Rn * k : NULL;
  float *o32 = is16(out_dt) ? buf + Rn * k + (x32 ? R * k : 0) : NULL;
  uint16_t *w16 = nat ? (uint16_t *)(buf + parts.f32) : NULL, *x16 = nat && !is16(inp.dt) ? w16 + Rn * k : NULL;
  uint16_t *out16 = out;
  float *out32 = out;
  for (int n0 = 0; n0 < N; n0 += LC_MM_CHUNK) {
    const int nn = N - n0 < LC_MM_CHUNK ? N - n0 : LC_MM_CHUNK;
    q_tile(w32, w16, bf, w, n0, nn, K);
    for (int t0 = 0; t0 < T; t0 += LC_MM_CHUNK) {
      const int n = T - t0 < LC_MM_CHUNK ? T - t0 : LC_MM_CHUNK;
      const size_t at = (size_t)t0 * N + n0; // out's block
      float *dst = o32 ? o32 : out32 + at;
      const long ldc = o32 ? nn : N;
      if (o32 && beta != 0.0f) unpack_from(o32, out16 + at, N, n, nn);
      if (nat) {
        const uint16_t *xa = is16(inp.dt) ? row16(inp, t0, K) : (pack(x16, row32(inp, t0, K), K, n, K), x16);
        lc_kern()->gemm_bf16(0, 1, n, nn, K, xa, K, w16, K, beta, dst, ldc);
      } else {
        const float *xa = row32(inp, t0, K);
        if (x32) lc_bf16_unpack(x32, row16(inp, t0, K), (size_t)n * K), xa = x32;
        lc_sgemm(0, 1, n, nn, K, xa, K, w32, K, beta, dst, ldc);
      }
      if (o32) pack_to(out16 + at, N, o32, n, nn);
    }
  }
  put_scratch(mm, buf);
  return LC_OK;
}

// dinp (=|+=) dout @ W for W in blocks: per tile of W's rows (the sum over tiles in order),
// per chunk of dout's rows (their columns of that tile).
static lc_status q_bwd(const lc_mm *mm, mm_parts parts, float *dinp, lc_act dout, lc_act w, int T, int K, int N,
                       int accumulate) {
  if (N <= 0) { // an empty product
    if (!accumulate) memset(dinp, 0, sizeof(float) * (size_t)T * K);
    return LC_OK;
  }
  const int bf = mm ? mm->bf16 : 0, nat = use_bf16(bf, T, K, N, w.dt);
  const size_t k = (size_t)K, Rn = min_sz(LC_MM_CHUNK, (size_t)N);
  lc_status st;
  float *buf = get_scratch(mm, parts, &st);
  if (!buf) return st;
  float *w32 = buf, *d32 = !nat && is16(dout.dt) ? buf + Rn * k : NULL;
  uint16_t *w16 = nat ? (uint16_t *)(buf + parts.f32) : NULL, *d16 = nat && !is16(dout.dt) ? w16 + Rn * k : NULL;
  for (int n0 = 0; n0 < N; n0 += LC_MM_CHUNK) {
    const int nn = N - n0 < LC_MM_CHUNK ? N - n0 : LC_MM_CHUNK;
    const float beta = n0 == 0 && !accumulate ? 0.0f : 1.0f;
    q_tile(w32, w16, bf, w, n0, nn, K);
    for (int t0 = 0; t0 < T; t0 += LC_MM_CHUNK) {
      const int n = T - t0 < LC_MM_CHUNK ? T - t0 : LC_MM_CHUNK;
      long ldd = N;
      if (nat) {
        const uint16_t *da = row16(dout, t0, N) + n0;
        if (d16) pack(d16, row32(dout, t0, N) + n0, N, n, nn), da = d16, ldd = nn;
        lc_kern()->gemm_bf16(0, 0, n, K, nn, da, ldd, w16, K, beta, dinp + (size_t)t0 * K, K);
      } else {
        const float *da = row32(dout, t0, N) + n0;
        if (d32) unpack_from(d32, row16(dout, t0, N) + n0, N, n, nn), da = d32, ldd = nn;
        lc_sgemm(0, 0, n, K, nn, da, ldd, w32, K, beta, dinp + (size_t)t0 * K, K);
      }
    }
  }
  put_scratch(mm, buf);
  return LC_OK;
}

lc_status lc_matmul_fwd(const lc_mm *mm, void *out, lc_dtype out_dt, lc_act inp, lc_act w, int T, int K, int N) {
  return lc_matmul_fwd_acc(mm, out, out_dt, inp, w, T, K, N, 0);
}

// out[T,N] (=|+=) inp[T,K] @ W[N,K]^T. Accumulating into a bf16 output: its values are
// widened into the fp32 chunk the product is added to, then rounded again.
lc_status lc_matmul_fwd_acc(const lc_mm *mm, void *out, lc_dtype out_dt, lc_act inp, lc_act w, int T, int K, int N,
                            int accumulate) {
  const float beta = accumulate ? 1.0f : 0.0f;
  if (T <= 0 || N <= 0) return LC_OK;
  const int bf = mm ? mm->bf16 : 0;
  const mm_parts parts = fwd_parts(bf, out_dt, inp.dt, w.dt, T, K, N);
  if (lc_dtype_is_quant(w.dt)) return q_fwd(mm, parts, out, out_dt, inp, w, T, K, N, beta);
  // fp32 operands, fp32 output on sgemm. (Scratch of 0 bytes is not enough to tell: the
  // native bf16 GEMM on 2-byte operands with an fp32 output packs nothing either.)
  if (!use_bf16(bf, T, K, N, w.dt) && !is16(out_dt) && !is16(inp.dt) && !is16(w.dt)) {
    lc_sgemm(0, 1, T, N, K, inp.p, K, w.p, K, beta, out, N);
    return LC_OK;
  }
  lc_status st;
  float *buf = get_scratch(mm, parts, &st);
  if (!buf) return st;
  uint16_t *h16 = (uint16_t *)(buf + parts.f32);
  float *o32 = is16(out_dt) ? buf : NULL; // a bf16 output's fp32 chunk
  uint16_t *out16 = out;
  float *out32 = out;
  if (!use_bf16(bf, T, K, N, w.dt) && T < N && is16(w.dt)) { // sgemm, W in chunks of rows (widened)
    const size_t Rn = min_sz(LC_MM_CHUNK, (size_t)N);
    float *x32 = is16(inp.dt) ? buf : NULL, *w32 = buf + (x32 ? (size_t)T * K : 0), *c32 = w32 + Rn * (size_t)K;
    const float *xa = x32 ? (lc_bf16_unpack(x32, inp.p, (size_t)T * K), x32) : (const float *)inp.p;
    for (int n0 = 0; n0 < N; n0 += LC_MM_CHUNK) {
      const int nn = N - n0 < LC_MM_CHUNK ? N - n0 : LC_MM_CHUNK;
      lc_bf16_unpack(w32, row16(w, n0, K), (size_t)nn * K);
      if (o32) {
        if (accumulate) unpack_from(c32, out16 + n0, N, T, nn);
        lc_sgemm(0, 1, T, nn, K, xa, K, w32, K, beta, c32, nn);
        pack_to(out16 + n0, N, c32, T, nn);
      } else {
        lc_sgemm(0, 1, T, nn, K, xa, K, w32, K, beta, out32 + n0, N);
      }
    }
  } else if (!use_bf16(bf, T, K, N, w.dt)) { // sgemm per chunk of rows
    const size_t R = min_sz(LC_MM_CHUNK, (size_t)T);
    float *x32 = is16(inp.dt) ? buf + (o32 ? R * (size_t)N : 0) : NULL;
    const float *w32 = w.p;
    if (is16(w.dt)) { // W widened whole, after the chunks
      float *wb = buf + (o32 ? R * (size_t)N : 0) + (x32 ? R * (size_t)K : 0);
      lc_bf16_unpack(wb, w.p, (size_t)N * K);
      w32 = wb;
    }
    for (int t0 = 0; t0 < T; t0 += LC_MM_CHUNK) {
      const int n = T - t0 < LC_MM_CHUNK ? T - t0 : LC_MM_CHUNK;
      const float *xa = row32(inp, t0, K);
      if (x32) lc_bf16_unpack(x32, row16(inp, t0, K), (size_t)n * K), xa = x32;
      float *dst = o32 ? o32 : out32 + (size_t)t0 * N;
      if (o32 && accumulate) lc_bf16_unpack(o32, out16 + (size_t)t0 * N, (size_t)n * N);
      lc_sgemm(0, 1, n, N, K, xa, K, w32, K, beta, dst, N);
      if (o32) lc_bf16_pack(out16 + (size_t)t0 * N, o32, (size_t)n * N);
    }
  } else if (T >= N) { // W whole, inp in chunks of rows
    lc_gemm_bf16_fn *gemm = lc_kern()->gemm_bf16;
    uint16_t *w16 = h16, *x16 = h16 + (is16(w.dt) ? 0 : (size_t)N * K);
    const uint16_t *wa = is16(w.dt) ? w.p : (pack(w16, w.p, K, N, K), w16);
    for (int t0 = 0; t0 < T; t0 += LC_MM_CHUNK) {
      const int n = T - t0 < LC_MM_CHUNK ? T - t0 : LC_MM_CHUNK;
      const uint16_t *xa = is16(inp.dt) ? row16(inp, t0, K) : (pack(x16, row32(inp, t0, K), K, n, K), x16);
      if (o32 && accumulate) lc_bf16_unpack(o32, out16 + (size_t)t0 * N, (size_t)n * N);
      gemm(0, 1, n, N, K, xa, K, wa, K, beta, o32 ? o32 : out32 + (size_t)t0 * N, N);
      if (o32) lc_bf16_pack(out16 + (size_t)t0 * N, o32, (size_t)n * N);
    }
  } else { // inp whole, W in chunks of rows (= column blocks of out)
    lc_gemm_bf16_fn *gemm = lc_kern()->gemm_bf16;
    uint16_t *x16 = h16, *w16 = h16 + (is16(inp.dt) ? 0 : (size_t)T * K);
    const uint16_t *xa = is16(inp.dt) ? inp.p : (pack(x16, inp.p, K, T, K), x16);
    for (int n0 = 0; n0 < N; n0 += LC_MM_CHUNK) {
      const int nn = N - n0 < LC_MM_CHUNK ? N - n0 : LC_MM_CHUNK;
      const uint16_t *wa = is16(w.dt) ? row16(w, n0, K) : (pack(w16, row32(w, n0, K), K, nn, K), w16);
      if (o32) {
        if (accumulate) unpack_from(o32, out16 + n0, N, T, nn);
        gemm(0, 1, T, nn, K, xa, K, wa, K, beta, o32, nn);
        pack_to(out16 + n0, N, o32, T, nn);
      } else {
        gemm(0, 1, T, nn, K, xa, K, wa, K, beta, out32 + n0, N);
      }
    }
  }
  put_scratch(mm, buf);
  return LC_OK;
}

// dinp[T,K] (=|+=) dout[T,N] @ W[N,K] ; dw[N,K] += dout^T[N,T] @ inp[T,K]
lc_status lc_matmul_bwd(const lc_mm *mm, float *dinp, float *dw, lc_act dout, lc_act inp, lc_act w, int T, int K,
                        int N, int accumulate) {
  if (lc_dtype_is_quant(w.dt) && dw)
    return lc_fail(LC_EINVAL, "internal: a weight gradient for a quantized (frozen) weight");
  if (T <= 0 || K <= 0) return LC_OK;
  const int bf = mm ? mm->bf16 : 0;
  const mm_parts parts = bwd_parts(bf, dout.dt, inp.dt, w.dt, T, K, N);
  if (lc_dtype_is_quant(w.dt)) return dinp ? q_bwd(mm, parts, dinp, dout, w, T, K, N, accumulate) : LC_OK;
  if (!use_bf16(bf, T, K, N, w.dt) && !is16(dout.dt) && !is16(inp.dt) && !is16(w.dt)) { // sgemm on fp32 operands
    if (dinp) {
      // With N == 0 the product is empty: beta 0 still clears dinp (BLAS scales C by beta).
      lc_sgemm(0, 0, T, K, N, dout.p, N, w.p, K, accumulate ? 1.0f : 0.0f, dinp, K);
    }
    if (dw && N > 0) {
      lc_sgemm(1, 0, N, K, T, dout.p, N, inp.p, K, 1.0f, dw, K);
    }
    return LC_OK;
  }
  lc_status st;
  float *buf = get_scratch(mm, parts, &st);
  if (!buf) return st;
  uint16_t *h16 = (uint16_t *)(buf + parts.f32);
  if (!use_bf16(bf, T, K, N, w.dt) && T < N && is16(w.dt)) { // sgemm, W's rows in chunks (widened)
    const size_t Rn = min_sz(LC_MM_CHUNK, (size_t)N);
    float *x32 = is16(inp.dt) ? buf : NULL, *d32 = buf + (x32 ? (size_t)T * K : 0),
          *w32 = d32 + (is16(dout.dt) ? (size_t)T * Rn : 0);
    const float *xa = x32 && dw ? (lc_bf16_unpack(x32, inp.p, (size_t)T * K), x32) : (const float *)inp.p;
    for (int n0 = 0; n0 < N; n0 += LC_MM_CHUNK) {
      const int nn = N - n0 < LC_MM_CHUNK ? N - n0 : LC_MM_CHUNK;
      const float *da = (const float *)dout.p + n0;
      long ldd = N;
      if (is16(dout.dt)) {
        for (int r = 0; r < T; r++) lc_bf16_unpack(d32 + (size_t)r * nn, row16(dout, r, N) + n0, (size_t)nn);
        da = d32, ldd = nn;
      }
      if (dinp) {
        lc_bf16_unpack(w32, row16(w, n0, K), (size_t)nn * K);
        lc_sgemm(0, 0, T, K, nn, da, ldd, w32, K, n0 == 0 && !accumulate ? 0.0f : 1.0f, dinp, K);
      }
      if (dw) lc_sgemm(1, 0, nn, K, T, da, ldd, xa, K, 1.0f, dw + (size_t)n0 * K, K);
    }
  } else if (!use_bf16(bf, T, K, N, w.dt)) { // sgemm per chunk of rows: dinp's rows, dw's share
    const size_t R = min_sz(LC_MM_CHUNK, (size_t)T);
    float *d32 = is16(dout.dt) ? buf : NULL, *x32 = is16(inp.dt) ? buf + (d32 ? R * (size_t)N : 0) : NULL;
    const float *w32 = w.p;
    if (is16(w.dt) && N > 0) { // W widened whole (dinp reads it), after the chunks
      float *wb = buf + (d32 ? R * (size_t)N : 0) + (x32 ? R * (size_t)K : 0);
      if (dinp) lc_bf16_unpack(wb, w.p, (size_t)N * K);
      w32 = wb;
    }
    for (int t0 = 0; t0 < T; t0 += LC_MM_CHUNK) {
      const int n = T - t0 < LC_MM_CHUNK ? T - t0 : LC_MM_CHUNK;
      const float *da = row32(dout, t0, N);
      if (d32) lc_bf16_unpack(d32, row16(dout, t0, N), (size_t)n * N), da = d32;
      if (dinp)
        lc_sgemm(0, 0, n, K, N, da, N, w32, K, accumulate ? 1.0f : 0.0f, dinp + (size_t)t0 * K, K);
      if (dw && N > 0) {
        const float *xa = row32(inp, t0, K);
        if (x32) lc_bf16_unpack(x32, row16(inp, t0, K), (size_t)n * K), xa = x32;
        lc_sgemm(1, 0, N, K, n, da, N, xa, K, 1.0f, dw, K);
      }
    }
  } else if (T >= N) { // W whole; per chunk of rows: dout rows -> dinp rows, and their share of dw
    lc_gemm_bf16_fn *gemm = lc_kern()->gemm_bf16;
    const int R = T < LC_MM_CHUNK ? T : LC_MM_CHUNK;
    uint16_t *w16 = h16, *d16 = w16 + (is16(w.dt) ? 0 : (size_t)N * K),
             *x16 = d16 + (is16(dout.dt) ? 0 : (size_t)R * N);
    const uint16_t *wa = w.p;
    if (dinp && !is16(w.dt)) pack(w16, w.p, K, N, K), wa = w16;
    for (int t0 = 0; t0 < T; t0 += R) {
      const int n = T - t0 < R ? T - t0 : R;
      const uint16_t *da = is16(dout.dt) ? row16(dout, t0, N) : (pack(d16, row32(dout, t0, N), N, n, N), d16);
      if (dinp) gemm(0, 0, n, K, N, da, N, wa, K, accumulate ? 1.0f : 0.0f, dinp + (size_t)t0 * K, K);
      if (dw) {
        const uint16_t *xa = is16(inp.dt) ? row16(inp, t0, K) : (pack(x16, row32(inp, t0, K), K, n, K), x16);
        gemm(1, 0, N, K, n, da, N, xa, K, 1.0f, dw, K);
      }
    }
  } else { // inp whole; per chunk of W's rows: dout's columns -> dinp (summed), dw's rows
    lc_gemm_bf16_fn *gemm = lc_kern()->gemm_bf16;
    const int R = N < LC_MM_CHUNK ? N : LC_MM_CHUNK;
    uint16_t *x16 = h16, *d16 = x16 + (is16(inp.dt) ? 0 : (size_t)T * K),
             *w16 = d16 + (is16(dout.dt) ? 0 : (size_t)T * R);
    const uint16_t *xa = NULL;
    if (dw) xa = is16(inp.dt) ? inp.p : (pack(x16, inp.p, K, T, K), x16);
    for (int n0 = 0; n0 < N; n0 += R) {
      const int nn = N - n0 < R ? N - n0 : R;
      const uint16_t *da = (const uint16_t *)dout.p + n0;
      long ldd = N;
      if (!is16(dout.dt)) pack(d16, (const float *)dout.p + n0, N, T, nn), da = d16, ldd = nn;
      if (dinp) {
        const uint16_t *wa = is16(w.dt) ? row16(w, n0, K) : (pack(w16, row32(w, n0, K), K, nn, K), w16);
        gemm(0, 0, T, K, nn, da, ldd, wa, K, n0 == 0 && !accumulate ? 0.0f : 1.0f, dinp, K);
      }
      if (dw) gemm(1, 0, nn, K, T, da, ldd, xa, K, 1.0f, dw + (size_t)n0 * K, K);
    }
  }
  put_scratch(mm, buf);
  return LC_OK;
}
