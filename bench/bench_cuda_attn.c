// The CUDA backend's attention kernels alone (tools/gpu_check.sh runs this beside
// bench/sdpa_bench.py, PyTorch's SDPA flash backend, on the same GPU in the same call):
// causal, GQA 32/8, head dim 128, bf16 inputs, forward and backward at S = 8K, 32K, 128K
// (or the lengths given). TFLOPS by FlashAttention's count: forward 4 * S^2 * Hq * D / 2
// (two products, half of them masked), backward 2.5 x forward; median of 5 timed calls
// after one warm-up, each timed from a stream sync to a stream sync.
//   bench_cuda_attn [S ...]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/rng.h"
#include "core/timer.h"
#include "backend/cpu/kern/kernels.h"

#ifdef LC_HAVE_CUDA // (without the CUDA backend main only says so)
static int cmpd(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static lc_buf rnd16(lc_backend *be, size_t n, lc_rng *r) {
  lc_buf b;
  if (lc_buf_alloc(be, LC_MEM_ACT, LC_DT_BF16, n, 0, "bench input", &b) != LC_OK) {
    fprintf(stderr, "bench_cuda_attn: %s\n", lc_errmsg());
    exit(1);
  }
  float *x = malloc(4 * n);
  uint16_t *h = malloc(2 * n);
  for (size_t i = 0; i < n; i++) x[i] = lc_rng_normal(r);
  lc_bf16_pack(h, x, n);
  lc_buf_write(b, h, LC_SYNC_TEST);
  free(x), free(h);
  return b;
}

#endif

int main(int argc, char **argv) {
  (void)argc, (void)argv;
#ifndef LC_HAVE_CUDA
  printf("skipped: this build has no CUDA backend\n");
  return 77;
#else
  long lens[8] = {8192, 32768, 131072};
  int nl = 3;
  if (argc > 1) {
    nl = 0;
    for (int i = 1; i < argc && nl < 8; i++) lens[nl++] = atol(argv[i]);
  }
  lc_arena ar;
  lc_arena_init(&ar, 0);
  lc_backend *be = NULL;
  if (lc_backend_open("cuda", &ar, &be) != LC_OK) {
    printf("skipped: %s\n", lc_errmsg());
    return 77;
  }
  char d[256];
  printf("%s\n", lc_backend_describe(be, d, sizeof d));
  printf("%-8s %-5s %10s %10s\n", "S", "pass", "ms", "TFLOPS");
  const int Hq = 32, Hkv = 8, D = 128;
  lc_rng r;
  lc_rng_seed(&r, 1);
  for (int li = 0; li < nl; li++) {
    const long S = lens[li];
    const size_t nq = (size_t)S * Hq * D, nk = (size_t)S * Hkv * D;
    lc_buf q = rnd16(be, nq, &r), k = rnd16(be, nk, &r), v = rnd16(be, nk, &r), dout = rnd16(be, nq, &r);
    lc_buf out, lse, delta, dq, dk, dv;
    lc_status st = lc_buf_alloc(be, LC_MEM_ACT, LC_DT_F32, nq, 0, "out", &out);
    if (st == LC_OK) st = lc_buf_alloc(be, LC_MEM_ACT, LC_DT_F32, (size_t)Hq * S, 0, "lse", &lse);
    if (st == LC_OK) st = lc_buf_alloc(be, LC_MEM_ACT, LC_DT_F32, (size_t)Hq * S, 0, "delta", &delta);
    if (st == LC_OK) st = lc_buf_alloc(be, LC_MEM_ACT, LC_DT_F32, nq, 1, "dq", &dq);
    if (st == LC_OK) st = lc_buf_alloc(be, LC_MEM_ACT, LC_DT_F32, nk, 1, "dk", &dk);
    if (st == LC_OK) st = lc_buf_alloc(be, LC_MEM_ACT, LC_DT_F32, nk, 1, "dv", &dv);
    if (st != LC_OK) {
      fprintf(stderr, "bench_cuda_attn: S %ld: %s\n", S, lc_errmsg());
      return 1;
    }
    const lc_attn_geom s = {.Tq = (int)S, .Tk = (int)S, .Hq = Hq, .Hkv = Hkv, .D = D, .causal = 1, .scale = 0.08838834764f, .bf16 = 1};
    const double fwd_flops = 4.0 * (double)S * S * Hq * D / 2;
    for (int pass = 0; pass < 2; pass++) {
      double t[6];
      for (int it = 0; it < 6; it++) {
        lc_be_sync(be, LC_STREAM_COMPUTE);
        const double t0 = lc_now();
        st = pass ? lc_be_flash_bwd(dq, dk, dv, dout, q, k, v, lse, delta, (lc_buf){0}, &s)
                  : lc_be_flash_fwd(out, lse, q, k, v, (lc_buf){0}, &s);
        if (st == LC_OK) st = lc_be_sync(be, LC_STREAM_COMPUTE);
        if (st != LC_OK) {
          fprintf(stderr, "bench_cuda_attn: S %ld %s: %s\n", S, pass ? "bwd" : "fwd", lc_errmsg());
          return 1;
        }
        t[it] = lc_now() - t0;
        if (!pass && it == 0) lc_be_attn_delta(delta, out, out, (int)S, Hq, D); // a delta for backward
      }
      qsort(t + 1, 5, sizeof t[0], cmpd);
      const double sec = t[3], fl = pass ? 2.5 * fwd_flops : fwd_flops;
      printf("%-8ld %-5s %10.3f %10.1f\n", S, pass ? "bwd" : "fwd", sec * 1e3, fl / sec / 1e12);
    }
    lc_buf_free(&q), lc_buf_free(&k), lc_buf_free(&v), lc_buf_free(&dout), lc_buf_free(&out), lc_buf_free(&lse);
    lc_buf_free(&delta), lc_buf_free(&dq), lc_buf_free(&dk), lc_buf_free(&dv);
  }
  lc_backend_close(be);
  return 0;
#endif
}
