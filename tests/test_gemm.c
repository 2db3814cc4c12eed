// The kernel table's bf16 GEMM (oneDNN, backend/cpu/gemm/gemm_dnnl.c) and the linear layer's bf16 path
// (backend/cpu/gemm/matmul.c). Skipped, with the reason, on a CPU without AVX512_BF16 (exit 77: ctest
// reports it skipped, not passed).
//
// Tolerance. The operands are bf16 values, so each product a*b is exact in fp32 (8 + 8
// significant bits); only the fp32 accumulation rounds. Whatever the summation order, a
// sum of K terms in fp32 is within (K - 1) u sum|a_k b_k| of the exact sum (u = 2^-24),
// plus u |C| for the final rounding and, with beta 1, one more addition of C0:
//   |C - exact| <= (K + 2) u (sum_k |a_k b_k| + |C0|)          (against a double reference)
// and twice that between two fp32 GEMMs (oneDNN vs OpenBLAS sgemm) on the same values.
#include <math.h>
#include <string.h>

#include "core/arena.h"
#include "core/cpu.h"
#include "core/rng.h"
#include "backend/cpu/gemm/gemm_dnnl.h"
#include "backend/cpu/kern/kernels.h"
#include "backend/cpu/ops/ops.h"
#include "testutil.h"

#include <cblas.h>

static lc_rng rng;
static const double U = 1.0 / 16777216.0; // 2^-24

// n random bf16 values in fp32 slots
static float *randb(long n) {
  float *x = lc_t_randn(&rng, n, 1.0f);
  lc_bf16_round(x, (size_t)n);
  return x;
}

// op(X)[i,j] of a row-major X with leading dimension ld, transposed when t
static double at(const float *X, int t, long ld, int i, int j) { return t ? X[(long)j * ld + i] : X[(long)i * ld + j]; }

static void check_gemm(int ta, int tb, int M, int N, int K, int pad, int beta) {
  const long lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
  const long ra = ta ? K : M, rb = tb ? N : K; // stored rows
  float *A = randb(ra * lda), *B = randb(rb * ldb), *C0 = lc_t_randn(&rng, M * ldc, 1.0f);
  uint16_t *a = malloc(2 * (size_t)(ra * lda)), *b = malloc(2 * (size_t)(rb * ldb));
  lc_bf16_pack(a, A, (size_t)(ra * lda));
  lc_bf16_pack(b, B, (size_t)(rb * ldb));
  float *C = malloc(sizeof(float) * (size_t)(M * ldc)), *S = malloc(sizeof(float) * (size_t)(M * ldc));
  memcpy(C, C0, sizeof(float) * (size_t)(M * ldc));
  memcpy(S, C0, sizeof(float) * (size_t)(M * ldc));
  lc_kern()->gemm_bf16(ta, tb, M, N, K, a, lda, b, ldb, (float)beta, C, ldc);
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A, lda, B,
              ldb, (float)beta, S, ldc);
  long bad_ref = 0, bad_s = 0, bad_pad = 0;
  double worst = 0;
  for (int i = 0; i < M; i++) {
    for (int j = 0; j < N; j++) {
      double s = beta ? C0[i * ldc + j] : 0, mag = beta ? fabs(C0[i * ldc + j]) : 0;
      for (int k = 0; k < K; k++) {
        double p = at(A, ta, lda, i, k) * at(B, tb, ldb, k, j);
        s += p, mag += fabs(p);
      }
      double tol = (K + 2) * U * mag, e = fabs(C[i * ldc + j] - s);
      if (e > tol) bad_ref++;
      if (fabs(C[i * ldc + j] - S[i * ldc + j]) > 2 * tol) bad_s++;
      if (mag > 0 && e / mag > worst) worst = e / mag;
    }
    for (long j = N; j < ldc; j++) bad_pad += memcmp(&C[i * ldc + j], &C0[i * ldc + j], sizeof(float)) != 0;
  }
  CHECK(bad_ref == 0, "gemm_bf16 ta %d tb %d M %d N %d K %d pad %d beta %d: %ld of %ld outside (K+2)u sum|ab| of the double reference",
        ta, tb, M, N, K, pad, beta, bad_ref, (long)M * N);
  CHECK(bad_s == 0, "gemm_bf16 ta %d tb %d M %d N %d K %d pad %d beta %d: %ld differ from sgemm by more than 2(K+2)u sum|ab|",
        ta, tb, M, N, K, pad, beta, bad_s);
  CHECK(bad_pad == 0, "gemm_bf16 ta %d tb %d M %d N %d K %d: wrote %ld values past N in C's rows", ta, tb, M, N, K, bad_pad);
  if (M * N * K > 100000) printf("gemm_bf16 ta %d tb %d %dx%dx%d pad %d beta %d: worst |err|/sum|ab| %.2e (bound %.2e)\n", ta, tb, M, N, K, pad, beta, worst, (K + 2) * U);
  free(A), free(B), free(C0), free(C), free(S), free(a), free(b);
}

// n bf16 values (fp32 slots) stored in 2 bytes
static uint16_t *to16(const float *x, long n) {
  uint16_t *h = malloc(2 * (size_t)n);
  lc_bf16_pack(h, x, (size_t)n);
  return h;
}

// The linear layer on typed operands: lc_matmul_fwd/bwd with every combination of
// dtypes (inp, dout, W: fp32 slots or 2-byte bf16; out fp32 or bf16) against
// sgemm on the fp32 values. native 1: bf16 on (oneDNN; operands in 2 bytes read in place,
// the rest packed); native 0: bf16 off (sgemm on bf16 operands widened chunk by chunk).
// Tolerance: twice the (K+2)u sum|ab| bound of two fp32 sums (the header); a bf16 output
// also rounds once: + 2^-8 |out| (half an ulp of bf16, 8 significant bits, is at most
// 2^-8 relative), and the sums' bound doubled again (the rounding may scale the fp32
// difference by up to 1 + 2^-8). The scratch peak is what
// lc_matmul_*_bytes says for the operands' dtypes, and all of it is returned.
static void check_matmul(int T, int K, int N, int native) {
  lc_arena ar;
  lc_arena_init(&ar, 0);
  const lc_mm mm = {.bf16 = native, .arena = &ar};
  const long nI = (long)T * K, nW = (long)N * K, nO = (long)T * N;
  float *inp = randb(nI), *w = randb(nW), *dout = randb(nO);
  uint16_t *inp16 = to16(inp, nI), *dout16 = to16(dout, nO), *w16 = to16(w, nW);
  float *o1 = malloc(sizeof(float) * nO), *o2 = malloc(sizeof(float) * nO);
  uint16_t *o16 = malloc(2 * (size_t)nO);
  lc_matmul_fwd(NULL, o2, LC_DT_F32, lc_act_f32(inp), lc_act_f32(w), T, K, N);
  for (int c = 0; c < 8; c++) {
    const lc_dtype idt = c & 1 ? LC_DT_BF16 : LC_DT_F32, odt = c & 2 ? LC_DT_BF16 : LC_DT_F32,
                   wdt = c & 4 ? LC_DT_BF16 : LC_DT_F32;
    if (!native && c == 0) continue; // plain sgemm: the reference itself
    lc_arena_reset_peaks(&ar);
    const lc_act in = lc_act_of(idt == LC_DT_BF16 ? (const void *)inp16 : inp, idt);
    const lc_act wa = lc_act_of(wdt == LC_DT_BF16 ? (const void *)w16 : w, wdt);
    CHECK(lc_matmul_fwd(&mm, odt == LC_DT_BF16 ? (void *)o16 : o1, odt, in, wa, T, K, N) == LC_OK, "matmul fwd: %s",
          lc_errmsg());
    CHECK(ar.peak[LC_MEM_SCRATCH] == lc_matmul_fwd_bytes(native, odt, idt, wdt, T, K, N) && ar.cur_total == 0,
          "matmul fwd T %d K %d N %d in %s out %s w %s: scratch peak %zu, predicted %zu, left %zu", T, K, N,
          lc_dtype_name(idt), lc_dtype_name(odt), lc_dtype_name(wdt), ar.peak[LC_MEM_SCRATCH],
          lc_matmul_fwd_bytes(native, odt, idt, wdt, T, K, N), ar.cur_total);
    // |o1 - o2| <= 2 (K+2) u sum|ab| (+ 2^-8 |o2| for a bf16 output)
    long bad = 0;
    for (int t = 0; t < T; t++)
      for (int n = 0; n < N; n++) {
        double m = 0;
        for (int k = 0; k < K; k++) m += fabs((double)inp[(long)t * K + k] * w[(long)n * K + k]);
        const double ref = o2[(long)t * N + n];
        const double got = odt == LC_DT_BF16 ? lc_bf16_to_f32(o16[(long)t * N + n]) : o1[(long)t * N + n];
        bad += fabs(got - ref) > (odt == LC_DT_BF16 ? 4 : 2) * (K + 2) * U * m + (odt == LC_DT_BF16 ? ldexp(fabs(ref), -8) : 0);
      }
    CHECK(bad == 0, "matmul fwd native %d T %d K %d N %d in %s out %s w %s: %ld outputs differ from sgemm beyond the bound",
          native, T, K, N, lc_dtype_name(idt), lc_dtype_name(odt), lc_dtype_name(wdt), bad);
  }
  // backward: dinp overwritten then accumulated, dw accumulated onto a prefilled value
  for (int c = 0; c < 16; c++) {
    const int acc = c >> 3;
    const lc_dtype idt = c & 1 ? LC_DT_BF16 : LC_DT_F32, ddt = c & 2 ? LC_DT_BF16 : LC_DT_F32,
                   wdt = c & 4 ? LC_DT_BF16 : LC_DT_F32;
    if (!native && (c & 7) == 0) continue;
    const lc_act in = lc_act_of(idt == LC_DT_BF16 ? (const void *)inp16 : inp, idt);
    const lc_act wa = lc_act_of(wdt == LC_DT_BF16 ? (const void *)w16 : w, wdt);
    const lc_act dy = lc_act_of(ddt == LC_DT_BF16 ? (const void *)dout16 : dout, ddt);
    float *di1 = lc_t_randn(&rng, nI, 1), *dw1 = lc_t_randn(&rng, nW, 1);
    float *di2 = malloc(sizeof(float) * nI), *dw2 = malloc(sizeof(float) * nW);
    memcpy(di2, di1, sizeof(float) * nI), memcpy(dw2, dw1, sizeof(float) * nW);
    float *di0 = malloc(sizeof(float) * nI), *dw0 = malloc(sizeof(float) * nW);
    memcpy(di0, di1, sizeof(float) * nI), memcpy(dw0, dw1, sizeof(float) * nW);
    lc_arena_reset_peaks(&ar);
    CHECK(lc_matmul_bwd(&mm, di1, dw1, dy, in, wa, T, K, N, acc) == LC_OK, "matmul bwd: %s", lc_errmsg());
    CHECK(ar.peak[LC_MEM_SCRATCH] == lc_matmul_bwd_bytes(native, ddt, idt, wdt, T, K, N) && ar.cur_total == 0,
          "matmul bwd T %d K %d N %d dout %s in %s w %s: scratch peak %zu, predicted %zu", T, K, N, lc_dtype_name(ddt),
          lc_dtype_name(idt), lc_dtype_name(wdt), ar.peak[LC_MEM_SCRATCH], lc_matmul_bwd_bytes(native, ddt, idt, wdt, T, K, N));
    lc_matmul_bwd(NULL, di2, dw2, lc_act_f32(dout), lc_act_f32(inp), lc_act_f32(w), T, K, N, acc);
    long bi = 0, bw = 0;
    for (int t = 0; t < T; t++)
      for (int k = 0; k < K; k++) {
        double m = acc ? fabs(di0[(long)t * K + k]) : 0;
        for (int n = 0; n < N; n++) m += fabs((double)dout[(long)t * N + n] * w[(long)n * K + k]);
        bi += fabs(di1[(long)t * K + k] - di2[(long)t * K + k]) > 2 * (N + 2) * U * m;
      }
    for (int n = 0; n < N; n++)
      for (int k = 0; k < K; k++) {
        double m = fabs(dw0[(long)n * K + k]);
        for (int t = 0; t < T; t++) m += fabs((double)dout[(long)t * N + n] * inp[(long)t * K + k]);
        bw += fabs(dw1[(long)n * K + k] - dw2[(long)n * K + k]) > 2 * (T + 2) * U * m;
      }
    CHECK(bi == 0 && bw == 0,
          "matmul bwd native %d T %d K %d N %d acc %d dout %s in %s w %s: dinp %ld, dw %ld values differ from sgemm beyond 2(R+2)u sum|ab|",
          native, T, K, N, acc, lc_dtype_name(ddt), lc_dtype_name(idt), lc_dtype_name(wdt), bi, bw);
    // NULL skips one product and leaves the other bit-identical
    float *di3 = malloc(sizeof(float) * nI), *dw3 = malloc(sizeof(float) * nW);
    memcpy(di3, di0, sizeof(float) * nI), memcpy(dw3, dw0, sizeof(float) * nW);
    lc_matmul_bwd(&mm, di3, NULL, dy, in, wa, T, K, N, acc);
    lc_matmul_bwd(&mm, NULL, dw3, dy, in, wa, T, K, N, acc);
    CHECK(!memcmp(di3, di1, sizeof(float) * nI) && !memcmp(dw3, dw1, sizeof(float) * nW),
          "matmul bwd native %d T %d K %d N %d: one product NULL changes the other", native, T, K, N);
    free(di0), free(dw0), free(di1), free(dw1), free(di2), free(dw2), free(di3), free(dw3);
  }
  // Caller-held scratch (lc_mm.scratch, exactly lc_matmul_*_bytes): nothing from the arena,
  // the same bits as the arena's scratch.
  {
    const size_t fb = lc_matmul_fwd_bytes(native, LC_DT_BF16, LC_DT_BF16, LC_DT_BF16, T, K, N);
    void *scr = malloc(fb + 1);
    const lc_mm held = {.bf16 = native, .arena = &ar, .scratch = scr, .scratch_bytes = fb};
    uint16_t *o16b = malloc(2 * (size_t)nO);
    lc_arena_reset_peaks(&ar);
    CHECK(lc_matmul_fwd(&held, o16b, LC_DT_BF16, lc_act_of(inp16, LC_DT_BF16), lc_act_of(w16, LC_DT_BF16), T, K, N) == LC_OK &&
              ar.peak[LC_MEM_SCRATCH] == 0,
          "matmul fwd with caller scratch: %s, arena peak %zu", lc_errmsg(), ar.peak[LC_MEM_SCRATCH]);
    CHECK(lc_matmul_fwd(&mm, o16, LC_DT_BF16, lc_act_of(inp16, LC_DT_BF16), lc_act_of(w16, LC_DT_BF16), T, K, N) == LC_OK &&
              !memcmp(o16, o16b, 2 * (size_t)nO),
          "matmul fwd native %d T %d K %d N %d: caller scratch changes the result", native, T, K, N);
    free(scr), free(o16b);
  }
  // bf16 operands without an arena: one clear error, nothing written
  CHECK(lc_matmul_fwd(NULL, o1, LC_DT_F32, lc_act_of(inp16, LC_DT_BF16), lc_act_f32(w), T, K, N) == LC_EINVAL,
        "matmul on bf16 operands without an arena was not refused");
  free(inp), free(w), free(dout), free(o1), free(o2), free(o16), free(inp16), free(dout16), free(w16);
}

int main(void) {
  lc_rng_seed(&rng, 20);
  lc_cpu_info cpu;
  lc_cpu_detect(&cpu);
  // The linear layer on bf16 operands without a native bf16 GEMM (every CPU): sgemm on
  // chunks widened from 2 bytes; rows over one chunk, several chunks, thin.
  check_matmul(1100, 40, 24, 0);
  check_matmul(40, 24, 2100, 0);
  check_matmul(8, 16, 16, 0);
  printf("the linear layer on bf16 operands through sgemm (widened chunks): checked\n");
  if (!lc_kern_supported(LC_KERN_BF16, &cpu)) {
    if (lc_test_finish("test_gemm (sgemm part)") != 0) return 1;
    printf("SKIP test_gemm: this CPU (%s) lacks AVX512_BF16: the oneDNN bf16 GEMM is compiled, not tested here\n", cpu.model);
    return 77;
  }
  if (lc_kern_select(LC_KERN_BF16) != LC_OK) return 1;
  const int sz[] = {1, 7, 33, 65, 130};
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++)
      for (int beta = 0; beta < 2; beta++)
        for (int i = 0; i < 5; i++)
          for (int j = 0; j < 5; j++)
            for (int k = 0; k < 5; k++) {
              if ((i + j + k + ta + beta) % 3) continue; // a third of the combinations: every size in every role
              check_gemm(ta, tb, sz[i], sz[j], sz[k], (i + k) % 2 ? 5 : 0, beta);
            }
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) check_gemm(ta, tb, 96, 200, 1500, 3, ta ^ tb);
  printf("oneDNN implementation: %s; %ld primitives created; scratchpad %zu bytes\n", lc_gemm_dnnl_impl(),
         lc_gemm_dnnl_primitives(), lc_gemm_dnnl_scratch_bytes());
  // the cache: the same call again creates nothing
  long np = lc_gemm_dnnl_primitives();
  check_gemm(0, 1, 65, 33, 130, 0, 1);
  check_gemm(0, 1, 65, 33, 130, 0, 1);
  CHECK(lc_gemm_dnnl_primitives() <= np + 1, "repeated shape created %ld primitives", lc_gemm_dnnl_primitives() - np);
  // the linear layer: rows mode (T >= N; several row chunks), columns mode (T < N; several
  // chunks of W), and below the bf16 threshold (sgemm)
  check_matmul(1100, 40, 24, 1);
  check_matmul(40, 24, 2100, 1);
  check_matmul(64, 33, 64, 1);
  check_matmul(8, 16, 16, 1);
  return lc_test_finish("test_gemm");
}
