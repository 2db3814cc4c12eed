// The fp32 GEMM and its library choice by exact shape (backend/cpu/gemm/sgemm.h).
#include "backend/cpu/gemm/sgemm.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/status.h"
#include "core/timer.h"
#include "backend/cpu/gemm/gemm_dnnl.h"

static lc_sgemm_table installed, recorded;
static int recording;

void lc_sgemm_set_choice(const lc_sgemm_table *t) {
  if (t && t->n > 0) installed = *t;
  else memset(&installed, 0, sizeof installed);
}

static int same(const lc_sgemm_shape *s, int ta, int tb, int M, int N, int K) {
  return s->ta == ta && s->tb == tb && s->M == M && s->N == N && s->K == K;
}

int lc_sgemm_lib_for(int ta, int tb, int M, int N, int K) {
  for (int i = 0; i < installed.n; i++) {
    const lc_sgemm_shape *s = &installed.s[i];
    if (same(s, !!ta, !!tb, M, N, K))
      return s->gflops[LC_SGEMM_ONEDNN] > 1.02 * s->gflops[LC_SGEMM_OPENBLAS] ? LC_SGEMM_ONEDNN : LC_SGEMM_OPENBLAS;
  }
  return LC_SGEMM_OPENBLAS;
}

void lc_sgemm_with(int lib, int ta, int tb, int M, int N, int K, const float *A, long lda, const float *B, long ldb,
                   float beta, float *C, long ldc) {
  if (lib == LC_SGEMM_ONEDNN) {
    lc_gemm_dnnl_f32(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A, (int)lda,
              B, (int)ldb, beta, C, (int)ldc);
}

void lc_sgemm(int ta, int tb, int M, int N, int K, const float *A, long lda, const float *B, long ldb, float beta,
              float *C, long ldc) {
  if (recording && M > 0 && N > 0 && K > 0) {
    int i = 0;
    while (i < recorded.n && !same(&recorded.s[i], !!ta, !!tb, M, N, K)) i++;
    if (i == recorded.n && i < LC_SGEMM_SHAPES) recorded.s[recorded.n++] = (lc_sgemm_shape){!!ta, !!tb, M, N, K, {0, 0}, 0};
    if (i < recorded.n) recorded.s[i].calls++;
  }
  lc_sgemm_with(lc_sgemm_lib_for(ta, tb, M, N, K), ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

const char *lc_sgemm_lib_name(int lib) { return lib == LC_SGEMM_ONEDNN ? "oneDNN" : "OpenBLAS"; }

const char *lc_sgemm_describe(char *buf, size_t n) {
  if (!installed.n) {
    snprintf(buf, n, "OpenBLAS sgemm: no shapes measured for this CPU in the machine file (`train --calibrate-from-run "
             "N` times OpenBLAS and oneDNN on its products and stores the faster for later runs)");
    return buf;
  }
  int k = 0;
  for (int i = 0; i < installed.n; i++)
    k += lc_sgemm_lib_for(installed.s[i].ta, installed.s[i].tb, installed.s[i].M, installed.s[i].N, installed.s[i].K) ==
         LC_SGEMM_ONEDNN;
  snprintf(buf, n, "oneDNN on %d of the %d shapes the machine file measured (faster there), OpenBLAS on the rest and on "
           "any other shape", k, installed.n);
  return buf;
}

void lc_sgemm_record(int on) {
  recording = on;
  if (on) memset(&recorded, 0, sizeof recorded);
}
void lc_sgemm_recorded(lc_sgemm_table *out) { *out = recorded; }

lc_status lc_sgemm_measure(lc_sgemm_table *t, int reps) {
  size_t na = 0, nb = 0, nc = 0;
  for (int i = 0; i < t->n; i++) {
    const lc_sgemm_shape *s = &t->s[i];
    const size_t a = (size_t)s->M * s->K, b = (size_t)s->K * s->N, c = (size_t)s->M * s->N;
    na = a > na ? a : na, nb = b > nb ? b : nb, nc = c > nc ? c : nc;
  }
  float *A = malloc(sizeof(float) * (na ? na : 1)), *B = malloc(sizeof(float) * (nb ? nb : 1)),
        *C = malloc(sizeof(float) * (nc ? nc : 1));
  if (!A || !B || !C) {
    free(A), free(B), free(C);
    return lc_fail(LC_ENOMEM, "out of memory timing the fp32 GEMM libraries (%zu floats)", na + nb + nc);
  }
  lc_rng r;
  lc_rng_seed(&r, 7);
  lc_rng_fill_uniform(&r, A, (long)na, -1.0f, 1.0f);
  lc_rng_fill_uniform(&r, B, (long)nb, -1.0f, 1.0f);
  for (int i = 0; i < t->n; i++) {
    lc_sgemm_shape *s = &t->s[i];
    const long lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
    double best[2] = {1e30, 1e30};
    for (int k = 0; k <= reps; k++) // alternating, the first round a warm-up
      for (int lib = 0; lib < 2; lib++) {
        const double t0 = lc_now();
        lc_sgemm_with(lib, s->ta, s->tb, s->M, s->N, s->K, A, lda, B, ldb, 0.0f, C, s->N);
        const double dt = lc_now() - t0;
        if (k > 0 && dt < best[lib]) best[lib] = dt;
      }
    for (int lib = 0; lib < 2; lib++) s->gflops[lib] = 2.0 * s->M * s->N * s->K / best[lib] / 1e9;
  }
  free(A), free(B), free(C);
  return LC_OK;
}

double lc_sgemm_gain(const lc_sgemm_table *t) {
  double both = 0, blas = 0;
  for (int i = 0; i < t->n; i++) {
    const lc_sgemm_shape *x = &t->s[i];
    if (!(x->gflops[0] > 0) || !(x->gflops[1] > 0)) continue;
    const double fl = 2.0 * x->M * x->N * x->K * (double)x->calls;
    const int lib = x->gflops[LC_SGEMM_ONEDNN] > 1.02 * x->gflops[LC_SGEMM_OPENBLAS] ? LC_SGEMM_ONEDNN : LC_SGEMM_OPENBLAS;
    both += fl / x->gflops[lib], blas += fl / x->gflops[LC_SGEMM_OPENBLAS];
  }
  return blas > 0 ? both / blas : 1.0;
}
