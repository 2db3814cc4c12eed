// Benchmark (not a test): blockwise attention forward/backward vs. the machine's
// sgemm rate measured in the same run.
//   bench_attn [T ...]      default T = 1024 4096 16384
// Shape: causal self-attention Hq=8, Hkv=4, D=64 (the bench-s model). Threads =
// OMP_NUM_THREADS (default 2).
// FLOPs: forward = 4 * D * Hq * V, V = visible (query, key) pairs = T(T+1)/2 (causal),
//        backward = 2.5 x forward (5 matmuls: S, dV, dP, dQ, dK).
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend/cpu/flash/flash.h"
#include "core/arena.h"
#include "core/rng.h"
#include "core/timer.h"

char *openblas_get_corename(void);

static float *randn(lc_rng *r, long n) {
  float *x = malloc(sizeof(float) * (size_t)n);
  lc_rng_fill_normal(r, x, n, 1.0f);
  return x;
}

// best-of-reps sgemm GFLOP/s for C[M,N] = A[M,K] B[K,N]
static double sgemm_rate(int M, int N, int K, int reps) {
  float *a = calloc((size_t)M * K, 4), *b = calloc((size_t)K * N, 4), *c = calloc((size_t)M * N, 4);
  for (long i = 0; i < (long)M * K; i++) a[i] = (float)((i % 13) - 6) * 0.01f;
  for (long i = 0; i < (long)K * N; i++) b[i] = (float)((i % 7) - 3) * 0.01f;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t = lc_now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
    t = lc_now() - t;
    if (t < best) best = t;
  }
  free(a);
  free(b);
  free(c);
  return 2.0 * M * N * K / best / 1e9;
}

int main(int argc, char **argv) {
  int Ts[16], nT = 0;
  for (int i = 1; i < argc && nT < 16; i++) {
    Ts[nT] = atoi(argv[i]);
    if (Ts[nT] < 1) {
      fprintf(stderr, "usage: bench_attn [T ...]  (T >= 1)\n");
      return 2;
    }
    nT++;
  }
  if (nT == 0) {
    Ts[0] = 1024;
    Ts[1] = 4096;
    Ts[2] = 16384;
    nT = 3;
  }
  if (!getenv("OMP_NUM_THREADS")) {
#ifdef _OPENMP
    omp_set_num_threads(2);
#endif
  }
  int nt = 1;
#ifdef _OPENMP
  nt = omp_get_max_threads();
#endif
  const int Hq = 8, Hkv = 4, D = 64;
  printf("bench_attn: causal self-attention Hq=%d Hkv=%d D=%d, %d thread(s), OpenBLAS core %s\n",
         Hq, Hkv, D, nt, openblas_get_corename());
  if (strcmp(openblas_get_corename(), "Prescott") == 0)
    printf("  WARNING: OpenBLAS did not recognise this CPU and uses its SSE3 (Prescott) kernels;\n"
           "  set OPENBLAS_CORETYPE=SkylakeX (or Haswell) for a meaningful sgemm baseline.\n");
  printf("FLOPs: fwd = 4*D*Hq*V, V = T(T+1)/2 visible (query,key) pairs; bwd = 2.5 x fwd\n");

  // sgemm reference: best of rounds at the start and at the end of the run (the
  // machine may be shared; best-of on both sides keeps the ratio meaningful)
  double g1 = 0, g2 = 0;
  for (int rep = 0; rep < 2; rep++) {
    double a = sgemm_rate(2048, 2048, 2048, 3), b = sgemm_rate(4096, 512, 512, 5);
    if (a > g1) g1 = a;
    if (b > g2) g2 = b;
  }
  printf("sgemm (start): 2048x2048x2048 %.1f GFLOP/s, 4096x512x512 %.1f GFLOP/s\n", g1, g2);
  printf("%7s %10s %9s %10s %9s\n", "T", "fwd s", "GFLOP/s", "bwd s", "GFLOP/s");
  double gf_t[16], gb_t[16];

  lc_rng rng;
  lc_rng_seed(&rng, 7);
  lc_arena arena;
  lc_arena_init(&arena, 0);
  for (int ti = 0; ti < nT; ti++) {
    const int T = Ts[ti];
    lc_attn_shape s = {.Tq = T, .Tk = T, .Hq = Hq, .Hkv = Hkv, .D = D, .causal = 1, .scale = (float)(1.0 / sqrt((double)D))};
    long nq = (long)T * Hq * D, nk = (long)T * Hkv * D;
    float *q = randn(&rng, nq), *k = randn(&rng, nk), *v = randn(&rng, nk), *dout = randn(&rng, nq);
    float *out = malloc(sizeof(float) * (size_t)nq), *lse = malloc(sizeof(float) * (size_t)Hq * T);
    float *delta = malloc(sizeof(float) * (size_t)Hq * T);
    float *dq = calloc((size_t)nq, 4), *dk = calloc((size_t)nk, 4), *dv = calloc((size_t)nk, 4);
    double vis = (double)T * (T + 1) / 2.0;
    double ffl = 4.0 * D * Hq * vis, bfl = 2.5 * ffl;
    int reps = T <= 2048 ? 5 : (T <= 8192 ? 3 : 2);
    double tf = 1e30, tb = 1e30;
    for (int r = 0; r < reps; r++) {
      double t0 = lc_now();
      if (lc_flash_fwd(out, lse, q, k, v, &s, &arena) != LC_OK) {
        fprintf(stderr, "fwd failed\n");
        return 1;
      }
      double t1 = lc_now();
      lc_attn_delta(delta, dout, out, T, Hq, D);
      double t2 = lc_now();
      if (lc_flash_bwd(dq, dk, dv, dout, q, k, v, lse, delta, &s, &arena) != LC_OK) {
        fprintf(stderr, "bwd failed\n");
        return 1;
      }
      double t3 = lc_now();
      if (t1 - t0 < tf) tf = t1 - t0;
      if (t3 - t2 < tb) tb = t3 - t2;
    }
    double gf = ffl / tf / 1e9, gb = bfl / tb / 1e9;
    gf_t[ti] = gf;
    gb_t[ti] = gb;
    printf("%7d %10.4f %9.1f %10.4f %9.1f\n", T, tf, gf, tb, gb);
    fflush(stdout);
    free(q);
    free(k);
    free(v);
    free(dout);
    free(out);
    free(lse);
    free(delta);
    free(dq);
    free(dk);
    free(dv);
  }
  {
    double a = sgemm_rate(2048, 2048, 2048, 3), b = sgemm_rate(4096, 512, 512, 5);
    printf("sgemm (end):   2048x2048x2048 %.1f GFLOP/s, 4096x512x512 %.1f GFLOP/s\n", a, b);
    if (a > g1) g1 = a;
    if (b > g2) g2 = b;
  }
  double gemm = g1 > g2 ? g1 : g2;
  printf("reference sgemm (best of all rounds, %d thread(s)): %.1f GFLOP/s\n", nt, gemm);
  printf("%7s %10s %10s\n", "T", "fwd/sgemm", "bwd/sgemm");
  for (int ti = 0; ti < nT; ti++)
    printf("%7d %9.0f%% %9.0f%%\n", Ts[ti], 100 * gf_t[ti] / gemm, 100 * gb_t[ti] / gemm);
  return 0;
}
