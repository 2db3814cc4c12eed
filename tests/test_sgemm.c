// The fp32 GEMM and its library choice (backend/cpu/gemm/sgemm.h; issue 37).
//  1. Both libraries against a double reference on random shapes: every transpose pair,
//     beta 0 and 1, leading dimensions wider than the rows, empty products (K = 0).
//  2. The choice: an installed table picks oneDNN exactly where its measured rate is more
//     than 2% above OpenBLAS's; a shape the table lacks, and an empty table, get OpenBLAS,
//     and the settings line says why. lc_sgemm follows the choice (a call counted on the
//     chosen library's side: through the recording and the same lookup).
//  3. The recording: distinct shapes with their call counts; the gain of a measured
//     recording is the weighted time ratio, exactly.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "backend/cpu/gemm/sgemm.h"
#include "testutil.h"

// C[M,N] (ldc) = beta C + op(A) op(B) in double, compared with lib's: |err| <= 2e-6 x the
// sum of |a b| over k per element (fp32 rounding of K products and sums, either order).
static void check_lib(int lib, int ta, int tb, int M, int N, int K, float beta, lc_rng *r) {
  const long lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 7;
  const long ra = ta ? K : M, rb = tb ? N : K;
  float *A = malloc(sizeof(float) * (size_t)(ra * lda + 1)), *B = malloc(sizeof(float) * (size_t)(rb * ldb + 1)),
        *C = malloc(sizeof(float) * (size_t)(M * ldc + 1)), *C0 = malloc(sizeof(float) * (size_t)(M * ldc + 1));
  lc_rng_fill_uniform(r, A, ra * lda, -1.0f, 1.0f);
  lc_rng_fill_uniform(r, B, rb * ldb, -1.0f, 1.0f);
  lc_rng_fill_uniform(r, C0, M * ldc, -1.0f, 1.0f);
  memcpy(C, C0, sizeof(float) * (size_t)(M * ldc));
  lc_sgemm_with(lib, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
  double worst = 0;
  int pad_ok = 1;
  for (int i = 0; i < M; i++) {
    for (int j = 0; j < N; j++) {
      double s = beta != 0.0f ? C0[i * ldc + j] : 0.0, mag = fabs(s);
      for (int k = 0; k < K; k++) {
        const double a = ta ? A[k * lda + i] : A[i * lda + k], b = tb ? B[j * ldb + k] : B[k * ldb + j];
        s += a * b, mag += fabs(a * b);
      }
      const double e = fabs(C[i * ldc + j] - s) / (mag > 0 ? mag : 1);
      worst = e > worst ? e : worst;
    }
    for (long j = N; j < ldc; j++) pad_ok &= C[i * ldc + j] == C0[i * ldc + j]; // nothing written past N
  }
  CHECK(worst <= 2e-6 && pad_ok, "%s ta %d tb %d %dx%dx%d beta %g: worst %.3g of the products' magnitude%s",
        lc_sgemm_lib_name(lib), ta, tb, M, N, K, (double)beta, worst, pad_ok ? "" : ", wrote past the row");
  free(A), free(B), free(C), free(C0);
}

int main(void) {
  lc_rng r;
  lc_rng_seed(&r, 11);
  for (int lib = 0; lib < 2; lib++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++)
        for (int k = 0; k < 3; k++) {
          const int M = 1 + (int)(lc_rng_uniform(&r) * 200), N = 1 + (int)(lc_rng_uniform(&r) * 200),
                    K = 1 + (int)(lc_rng_uniform(&r) * 300);
          check_lib(lib, ta, tb, M, N, K, k == 1 ? 1.0f : 0.0f, &r);
        }
  for (int lib = 0; lib < 2; lib++) { // K = 0: beta 0 clears C, beta 1 leaves it
    float A[1] = {0}, B[1] = {0}, C[6] = {1, 2, 3, 4, 5, 6};
    lc_sgemm_with(lib, 0, 1, 2, 3, 0, A, 1, B, 1, 1.0f, C, 3);
    int kept = C[0] == 1 && C[5] == 6;
    lc_sgemm_with(lib, 0, 1, 2, 3, 0, A, 1, B, 1, 0.0f, C, 3);
    int cleared = 1;
    for (int i = 0; i < 6; i++) cleared &= C[i] == 0;
    CHECK(kept && cleared, "%s: an empty product (K = 0) must leave C (beta 1) or clear it (beta 0)", lc_sgemm_lib_name(lib));
  }

  // 2. the choice by exact shape
  char d[400];
  lc_sgemm_set_choice(NULL);
  CHECK(lc_sgemm_lib_for(0, 1, 2048, 576, 576) == LC_SGEMM_OPENBLAS && strstr(lc_sgemm_describe(d, sizeof d), "no shapes measured"),
        "no table: OpenBLAS, and the line says why (%s)", d);
  lc_sgemm_table t;
  memset(&t, 0, sizeof t);
  t.n = 3;
  t.s[0] = (lc_sgemm_shape){0, 1, 2048, 576, 576, {100, 110}, 0}; // oneDNN 10% faster
  t.s[1] = (lc_sgemm_shape){1, 0, 576, 576, 2048, {100, 101}, 0}; // 1%: not enough
  t.s[2] = (lc_sgemm_shape){0, 0, 160, 576, 49152, {150, 120}, 0}; // OpenBLAS faster
  lc_sgemm_set_choice(&t);
  CHECK(lc_sgemm_lib_for(0, 1, 2048, 576, 576) == LC_SGEMM_ONEDNN, "the faster library (oneDNN) for a measured shape");
  CHECK(lc_sgemm_lib_for(1, 0, 576, 576, 2048) == LC_SGEMM_OPENBLAS, "within 2%%: OpenBLAS");
  CHECK(lc_sgemm_lib_for(0, 0, 160, 576, 49152) == LC_SGEMM_OPENBLAS, "OpenBLAS faster: OpenBLAS");
  CHECK(lc_sgemm_lib_for(0, 1, 2048, 576, 577) == LC_SGEMM_OPENBLAS && lc_sgemm_lib_for(1, 1, 2048, 576, 576) == LC_SGEMM_OPENBLAS,
        "a shape the table lacks: OpenBLAS");
  CHECK(strstr(lc_sgemm_describe(d, sizeof d), "oneDNN on 1 of the 3 shapes") != NULL, "settings line: %s", d);
  lc_sgemm_set_choice(NULL);

  // 3. the recording and the gain
  lc_sgemm_record(1);
  float a[64] = {0}, b[64] = {0}, c[64];
  for (int i = 0; i < 3; i++) lc_sgemm(0, 1, 4, 4, 4, a, 4, b, 4, 0.0f, c, 4);
  lc_sgemm(1, 0, 4, 4, 8, a, 4, b, 4, 0.0f, c, 4);
  lc_sgemm_record(0);
  lc_sgemm(0, 0, 2, 2, 2, a, 2, b, 2, 0.0f, c, 2); // (not recorded)
  lc_sgemm_table rec;
  lc_sgemm_recorded(&rec);
  CHECK(rec.n == 2 && rec.s[0].calls == 3 && rec.s[0].ta == 0 && rec.s[0].tb == 1 && rec.s[1].calls == 1 && rec.s[1].K == 8,
        "recording: %d shapes, calls %ld, %ld", rec.n, rec.s[0].calls, rec.n > 1 ? rec.s[1].calls : 0L);
  rec.s[0].gflops[0] = 100, rec.s[0].gflops[1] = 200; // oneDNN twice as fast: half the time
  rec.s[1].gflops[0] = 100, rec.s[1].gflops[1] = 50;  // OpenBLAS stays
  // flops: shape 0 3 x 2 x 64 = 384, shape 1 1 x 2 x 128 = 256: (384/200 + 256/100) / (384/100 + 256/100)
  const double want = (384.0 / 200 + 256.0 / 100) / (384.0 / 100 + 256.0 / 100);
  CHECK(fabs(lc_sgemm_gain(&rec) - want) < 1e-12, "gain %.12f, want %.12f", lc_sgemm_gain(&rec), want);
  CHECK(lc_sgemm_measure(&rec, 1) == 0 && rec.s[0].gflops[0] > 0 && rec.s[0].gflops[1] > 0, "measure fills both rates");
  return lc_test_finish("test_sgemm");
}
