// GEMMs whose W is in ggml's quantized blocks (a QLoRA frozen base, backend/cpu/gemm/matmul.c): the
// dequantized tiles equal the whole matrix's dequantization bit for bit; forward and the
// input gradient equal a double-precision product with the dequantized W for every block
// type, fp32 and bf16 operands and outputs, accumulate 0 and 1, with two tiles of W's rows
// (N > 1024) and of the activation's (T > 1024); a weight gradient is refused; the scratch
// is lc_matmul_*_bytes exactly (the arena's peak) and that much suffices.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "core/dequant.h"
#include "backend/cpu/kern/kernels.h"
#include "backend/cpu/ops/ops.h"
#include "testutil.h"

#define CHUNK 1024 // matmul.c's LC_MM_CHUNK

static const lc_dtype qtypes[] = {LC_DT_Q8_0, LC_DT_Q4_0, LC_DT_Q4_1, LC_DT_Q5_0,
                                  LC_DT_Q5_1, LC_DT_Q4_K, LC_DT_Q5_K, LC_DT_Q6_K};
#define NQ ((int)(sizeof qtypes / sizeof qtypes[0]))

static lc_arena arena;
static lc_rng rng;

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

// f16 bits of a random finite scale: magnitude in [2^-7, 2^-3) (0.008 .. 0.125), either sign.
static void put_scale(unsigned char *b) {
  const uint32_t sign = lc_rng_below(&rng, 2), e = 8 + lc_rng_below(&rng, 4), m = lc_rng_below(&rng, 1024);
  const uint16_t h = (uint16_t)(sign << 15 | e << 10 | m);
  b[0] = (unsigned char)(h & 0xff), b[1] = (unsigned char)(h >> 8);
}

// rows x cols of type t: random bytes, the f16 scale fields (dequant.c's layouts) finite.
static unsigned char *rand_blocks(lc_dtype t, size_t rows, size_t cols) {
  const size_t bytes = rows * lc_bytes(t, cols), bb = lc_dtype_block_bytes(t);
  unsigned char *x = malloc(bytes);
  for (size_t i = 0; i < bytes; i++) x[i] = (unsigned char)lc_rng_u64(&rng);
  for (size_t b = 0; b < bytes / bb; b++) {
    unsigned char *blk = x + b * bb;
    if (t == LC_DT_Q6_K) {
      put_scale(blk + 208); // d after ql, qh, scales
    } else {
      put_scale(blk); // d
      if (t == LC_DT_Q4_1 || t == LC_DT_Q5_1 || t == LC_DT_Q4_K || t == LC_DT_Q5_K) put_scale(blk + 2); // m / dmin
    }
  }
  return x;
}

static uint16_t *to16(const float *x, size_t n) {
  uint16_t *h = malloc(2 * (n ? n : 1));
  lc_bf16_pack(h, x, n);
  return h;
}

static float *nan32(size_t n) { // an output a product overwrites (accumulate 0): NaN everywhere
  float *o = malloc(4 * (n ? n : 1));
  memset(o, 0xff, 4 * n);
  return o;
}

// ---------------------------------------------------------------- tiles
static void check_tiles(lc_dtype t) {
  const size_t rows = 80, cols = 512, rb = lc_bytes(t, cols); // 80 x 512 >= 2^15: lc_dequant_rows threads
  unsigned char *q = rand_blocks(t, rows, cols);
  float *whole = malloc(4 * rows * cols), *tile = malloc(4 * rows * cols);
  lc_dequant(t, q, rows * cols, whole);
  int finite = 1;
  for (size_t i = 0; i < rows * cols; i++) finite &= isfinite(whole[i]) != 0;
  CHECK(finite, "%s: random valid blocks dequantize to finite values", lc_dtype_name(t));
  const size_t ranges[][2] = {{0, rows}, {3, 17}, {79, 80}, {40, 80}, {0, 1}};
  for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
    const size_t r0 = ranges[r][0], r1 = ranges[r][1];
    memset(tile, 0, 4 * rows * cols);
    lc_dequant_rows(t, q + r0 * rb, r1 - r0, cols, tile);
    CHECK(memcmp(tile, whole + r0 * cols, 4 * (r1 - r0) * cols) == 0, "%s: rows [%zu, %zu) from their offset differ from the whole",
          lc_dtype_name(t), r0, r1);
  }
  free(q), free(whole), free(tile);
}

// ---------------------------------------------------------------- GEMMs
// The expected scratch (matmul.c's header: fp32 part, then 2-byte part).
static size_t want_fwd(int bf, lc_dtype odt, lc_dtype idt, int T, int K, int N) {
  const int nat = bf && lc_kern()->gemm_bf16;
  const size_t k = K, R = min_sz(CHUNK, T), Rn = min_sz(CHUNK, N);
  const size_t f32 = Rn * k + (!nat && idt == LC_DT_BF16 ? R * k : 0) + (odt == LC_DT_BF16 ? R * Rn : 0);
  const size_t h16 = nat ? Rn * k + (idt == LC_DT_BF16 ? 0 : R * k) : 0;
  return 4 * f32 + 2 * h16;
}
static size_t want_bwd(int bf, lc_dtype ddt, int T, int K, int N) {
  const int nat = bf && lc_kern()->gemm_bf16;
  const size_t k = K, R = min_sz(CHUNK, T), Rn = min_sz(CHUNK, N);
  const size_t f32 = Rn * k + (!nat && ddt == LC_DT_BF16 ? R * Rn : 0);
  const size_t h16 = nat ? Rn * k + (ddt == LC_DT_BF16 ? 0 : R * Rn) : 0;
  return 4 * f32 + 2 * h16;
}

// Worst of |got - ref| / tol over n values (> 1: a failure). ref = prod (+ prior), tol =
// 1e-5 * (sum_k |x_k||w_k| (+ |prior|)) + 1e-30: sgemm's blocking and the tiles sum in
// another order than the double loop, each fp32 rounding within 6e-8 of a partial sum of
// at most that bound. A bf16 output: against the reference rounded to bf16, one bf16 ulp
// of slack (a result within the fp32 tolerance of a rounding midpoint rounds either way).
static double worst(const void *got, int is16, const double *prod, const double *bnd, const float *prior, size_t n,
                    size_t *at) {
  double w = 0;
  for (size_t i = 0; i < n; i++) {
    const double ref = prod[i] + (prior ? prior[i] : 0), g = lc_elem_f32(got, is16, i);
    double tol = 1e-5 * (bnd[i] + (prior ? fabs(prior[i]) : 0)) + 1e-30, d;
    if (is16) {
      const double r16 = lc_bf16_to_f32(lc_f32_to_bf16((float)ref));
      int e;
      frexp(fmax(fabs(g), fabs(r16)), &e);
      tol += ldexp(1.0, e - 8); // bf16: 8 significant bits
      d = fabs(g - r16);
    } else {
      d = fabs(g - ref);
    }
    if (!(d / tol <= w)) w = d / tol, *at = i; // NaN too
  }
  return w;
}

static const char *dtn(lc_dtype t) { return t == LC_DT_BF16 ? "bf16" : "fp32"; }

// One block type and shape in one pass (bf: a bf16 pass, whose operands are bf16 values).
static void check_gemm(lc_dtype t, int T, int K, int N, int bf) {
  const size_t tk = (size_t)T * K, tn = (size_t)T * N, nk = (size_t)N * K;
  unsigned char *q = rand_blocks(t, N, K);
  float *w = malloc(4 * nk), *x = lc_t_randn(&rng, (long)tk, 1.0f), *dout = lc_t_randn(&rng, (long)tn, 1.0f);
  float *prior_o = lc_t_randn(&rng, (long)tn, 1.0f), *prior_i = lc_t_randn(&rng, (long)tk, 1.0f);
  lc_dequant_rows(t, q, N, K, w);
  // The activations hold bf16 values (one set for the fp32 and the bf16 operand, and what a
  // bf16 pass's operands are); W is rounded in a bf16 pass only (what the GEMM does to it).
  lc_bf16_round(x, tk), lc_bf16_round(dout, tn), lc_bf16_round(prior_o, tn);
  if (bf) lc_bf16_round(w, nk);
  uint16_t *x16 = to16(x, tk), *d16 = to16(dout, tn), *po16 = to16(prior_o, tn);
  // The reference in double: out = x @ W^T, dinp = dout @ W, and the bounds sum |.||.|.
  double *pf = calloc(tn, 8), *bf_ = calloc(tn, 8), *pb = calloc(tk, 8), *bb = calloc(tk, 8);
  for (int i = 0; i < T; i++)
    for (int n = 0; n < N; n++) {
      double s = 0, a = 0;
      for (int k = 0; k < K; k++) {
        const double p = (double)x[(size_t)i * K + k] * w[(size_t)n * K + k];
        s += p, a += fabs(p);
      }
      pf[(size_t)i * N + n] = s, bf_[(size_t)i * N + n] = a;
      const double g = dout[(size_t)i * N + n];
      for (int k = 0; k < K; k++) {
        pb[(size_t)i * K + k] += g * w[(size_t)n * K + k];
        bb[(size_t)i * K + k] += fabs(g * w[(size_t)n * K + k]);
      }
    }
  const lc_act wq = lc_act_of(q, t);
  const lc_mm mm = {.bf16 = bf, .arena = &arena};
  char what[160];
  int n_ok = 0, n_run = 0;
  // forward: inp fp32 / bf16, out fp32 / bf16, accumulate 0 / 1
  for (int c = 0; c < 8; c++) {
    const lc_dtype idt = c & 1 ? LC_DT_BF16 : LC_DT_F32, odt = c & 2 ? LC_DT_BF16 : LC_DT_F32;
    const int acc = c >> 2 & 1, o16 = odt == LC_DT_BF16;
    snprintf(what, sizeof what, "%s fwd T=%d K=%d N=%d %s pass, inp %s, out %s, accumulate %d", lc_dtype_name(t), T, K,
             N, bf ? "bf16" : "fp32", dtn(idt), dtn(odt), acc);
    const lc_act in = idt == LC_DT_BF16 ? lc_act_of(x16, idt) : lc_act_f32(x);
    const size_t ob = o16 ? 2 * tn : 4 * tn, want = want_fwd(bf, odt, idt, T, K, N);
    void *out = nan32(tn), *out2 = nan32(tn);
    if (acc) memcpy(out, o16 ? (void *)po16 : (void *)prior_o, ob), memcpy(out2, out, ob);
    CHECK(lc_matmul_fwd_bytes(bf, odt, idt, t, T, K, N) == want, "%s: lc_matmul_fwd_bytes %zu, want %zu", what,
          lc_matmul_fwd_bytes(bf, odt, idt, t, T, K, N), want);
    lc_arena_reset_peaks(&arena);
    const size_t base = arena.cur[LC_MEM_SCRATCH];
    lc_status st = lc_matmul_fwd_acc(&mm, out, odt, in, wq, T, K, N, acc);
    CHECK(st == LC_OK, "%s: %s", what, lc_errmsg());
    CHECK(arena.peak[LC_MEM_SCRATCH] - base == want, "%s: arena scratch peak %zu, want %zu", what,
          arena.peak[LC_MEM_SCRATCH] - base, want);
    size_t at = 0;
    const double r = worst(out, o16, pf, bf_, acc ? prior_o : NULL, tn, &at);
    CHECK(r <= 1.0, "%s: worst at %zu: got %.8g want %.8g (ratio %.3g)", what, at, lc_elem_f32(out, o16, at),
          pf[at] + (acc ? prior_o[at] : 0), r);
    // Exactly lc_matmul_fwd_bytes of caller scratch and no arena: enough, the same result.
    void *s = malloc(want);
    const lc_mm mx = {.bf16 = bf, .scratch = s, .scratch_bytes = want};
    st = lc_matmul_fwd_acc(&mx, out2, odt, in, wq, T, K, N, acc);
    CHECK(st == LC_OK && memcmp(out, out2, ob) == 0, "%s: on exactly lc_matmul_fwd_bytes of scratch: %s", what,
          st == LC_OK ? "another result" : lc_errmsg());
    n_ok += r <= 1.0 && st == LC_OK, n_run++;
    free(s), free(out), free(out2);
  }
  // backward (dinp only): dout fp32 / bf16, accumulate 0 / 1
  for (int c = 0; c < 4; c++) {
    const lc_dtype ddt = c & 1 ? LC_DT_BF16 : LC_DT_F32;
    const int acc = c >> 1 & 1;
    snprintf(what, sizeof what, "%s bwd T=%d K=%d N=%d %s pass, dout %s, accumulate %d", lc_dtype_name(t), T, K, N,
             bf ? "bf16" : "fp32", dtn(ddt), acc);
    const lc_act da = ddt == LC_DT_BF16 ? lc_act_of(d16, ddt) : lc_act_f32(dout);
    const size_t want = want_bwd(bf, ddt, T, K, N);
    float *di = nan32(tk), *di2 = nan32(tk);
    if (acc) memcpy(di, prior_i, 4 * tk), memcpy(di2, prior_i, 4 * tk);
    CHECK(lc_matmul_bwd_bytes(bf, ddt, LC_DT_F32, t, T, K, N) == want, "%s: lc_matmul_bwd_bytes %zu, want %zu", what,
          lc_matmul_bwd_bytes(bf, ddt, LC_DT_F32, t, T, K, N), want);
    lc_arena_reset_peaks(&arena);
    const size_t base = arena.cur[LC_MEM_SCRATCH];
    lc_status st = lc_matmul_bwd(&mm, di, NULL, da, lc_act_f32(x), wq, T, K, N, acc);
    CHECK(st == LC_OK, "%s: %s", what, lc_errmsg());
    CHECK(arena.peak[LC_MEM_SCRATCH] - base == want, "%s: arena scratch peak %zu, want %zu", what,
          arena.peak[LC_MEM_SCRATCH] - base, want);
    size_t at = 0;
    const double r = worst(di, 0, pb, bb, acc ? prior_i : NULL, tk, &at);
    CHECK(r <= 1.0, "%s: worst at %zu: got %.8g want %.8g (ratio %.3g)", what, at, di[at],
          pb[at] + (acc ? prior_i[at] : 0), r);
    void *s = malloc(want);
    const lc_mm mx = {.bf16 = bf, .scratch = s, .scratch_bytes = want};
    st = lc_matmul_bwd(&mx, di2, NULL, da, lc_act_f32(x), wq, T, K, N, acc);
    CHECK(st == LC_OK && memcmp(di, di2, 4 * tk) == 0, "%s: on exactly lc_matmul_bwd_bytes of scratch: %s", what,
          st == LC_OK ? "another result" : lc_errmsg());
    n_ok += r <= 1.0 && st == LC_OK, n_run++;
    free(s), free(di), free(di2);
  }
  // A frozen base has no gradient: dw is refused (dinp untouched or not, the call fails).
  float *dw = calloc(nk, 4), *di = calloc(tk, 4);
  CHECK(lc_matmul_bwd(&mm, di, dw, lc_act_f32(dout), lc_act_f32(x), wq, T, K, N, 0) != LC_OK,
        "%s T=%d K=%d N=%d: a weight gradient for a quantized W is not refused", lc_dtype_name(t), T, K, N);
  printf("%-4s T=%4d K=%3d N=%4d %s pass%s: %d/%d fwd+bwd cases within tolerance, scratch = lc_matmul_*_bytes\n",
         lc_dtype_name(t), T, K, N, bf ? "bf16" : "fp32", bf ? (lc_kern()->gemm_bf16 ? " (native)" : " (sgemm)") : "",
         n_ok, n_run);
  free(dw), free(di);
  free(q), free(w), free(x), free(dout), free(prior_o), free(prior_i), free(x16), free(d16), free(po16);
  free(pf), free(bf_), free(pb), free(bb);
}

static void check_pass(int bf) {
  for (int i = 0; i < NQ; i++) {
    check_gemm(qtypes[i], 5, 256, 1100, bf); // T < N, two tiles of W's rows
    check_gemm(qtypes[i], 64, 512, 48, bf);  // T >= N
    check_gemm(qtypes[i], 3, 256, 7, bf);    // thin (native at any row count)
  }
  check_gemm(LC_DT_Q4_K, 1100, 256, 40, bf); // two chunks of the activation's rows
}

int main(void) {
  lc_arena_init(&arena, 0);
  lc_rng_seed(&rng, 20240611);
  for (int i = 0; i < NQ; i++) check_tiles(qtypes[i]);
  printf("tiles: lc_dequant_rows of row ranges equal the whole matrix's lc_dequant bit for bit (%d types)\n", NQ);
  check_pass(0);
  check_pass(1);
  if (lc_kern()->gemm_bf16) { // the bf16 pass again below the bf16 level: sgemm on the rounded tiles
    const lc_kern_level level = lc_kern()->level;
    CHECK(lc_kern_select(LC_KERN_AVX512) == LC_OK && !lc_kern()->gemm_bf16, "select avx512 (no native bf16 GEMM)");
    check_pass(1);
    lc_kern_select(level);
  } else {
    printf("skip: native bf16 GEMM path: this CPU has no native bf16 GEMM\n");
  }
  lc_arena_trim(&arena);
  return lc_test_finish("test_qmatmul");
}
