// The CUDA backend's attention kernels alone (tools/gpu_check.sh runs this beside
// bench/sdpa_bench.py, PyTorch's SDPA flash backend, on the same GPU in the same call):
// causal, GQA 32/8, head dim 128, bf16 inputs, forward and backward at S = 8K, 32K, 128K
// (or the lengths given). TFLOPS by FlashAttention's count: forward 4 * S^2 * Hq * D / 2
// (two products, half of them masked), backward 2.5 x forward; median of 5 timed calls
// after one warm-up, each timed from a stream sync to a stream sync.
//   bench_cuda_attn [--device cuda|private] [--shape HQ HKV D] [S ...]
// --device private (any build) runs the same code on the CPU stand-in for a device with its
// own memory: gpu_check.sh's dry run (tiny shapes). Inputs are drawn in parallel, each
// element a hash of its index (uniform in [-sqrt 3, sqrt 3): unit variance), so drawing
// 128K-token inputs takes a fraction of a second on the host's cores instead of a minute
// on one (issue 49).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/timer.h"
#include "backend/cpu/kern/kernels.h"

static int cmpd(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

// splitmix64's finaliser: a well-mixed 64-bit hash of x.
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// n bf16 values, element i from mix(seed, i), drawn by all the host's threads.
static lc_buf rnd16(lc_backend *be, size_t n, uint64_t seed) {
  lc_buf b;
  uint16_t *h = malloc(2 * n);
  if (!h || lc_buf_alloc(be, LC_MEM_ACT, LC_DT_BF16, n, 0, "bench input", &b) != LC_OK) {
    fprintf(stderr, "bench_cuda_attn: %s\n", h ? lc_errmsg() : "out of host memory for the inputs");
    exit(1);
  }
  const float a = 1.7320508f; // sqrt(3)
#pragma omp parallel for schedule(static)
  for (long i = 0; i < (long)n; i++) {
    const float u = (float)(mix(seed * 0x100000001b3ULL + (uint64_t)i) >> 40) * (1.0f / 16777216.0f); // [0, 1)
    const float x = a * (2 * u - 1);
    uint32_t w;
    memcpy(&w, &x, 4);
    h[i] = (uint16_t)((w + 0x7fffu + ((w >> 16) & 1)) >> 16); // round to nearest even (finite x)
  }
  lc_buf_write(b, h, LC_SYNC_TEST);
  free(h);
  return b;
}

int main(int argc, char **argv) {
  long lens[8] = {8192, 32768, 131072};
  int nl = 3, Hq = 32, Hkv = 8, D = 128, given = 0;
  const char *dev = "cuda";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--device") && i + 1 < argc) dev = argv[++i];
    else if (!strcmp(argv[i], "--shape") && i + 3 < argc)
      Hq = atoi(argv[i + 1]), Hkv = atoi(argv[i + 2]), D = atoi(argv[i + 3]), i += 3;
    else if (atol(argv[i]) > 0 && given < 8) lens[given++] = atol(argv[i]);
    else {
      fprintf(stderr, "bench_cuda_attn: '%s': usage: bench_cuda_attn [--device cuda|private] [--shape HQ HKV D] [S ...]\n",
              argv[i]);
      return 2;
    }
  }
  if (given) nl = given;
  if (Hq < 1 || Hkv < 1 || Hq % Hkv || D < 1) {
    fprintf(stderr, "bench_cuda_attn: --shape %d %d %d: HKV must divide HQ, all positive\n", Hq, Hkv, D);
    return 2;
  }
  lc_arena ar;
  lc_arena_init(&ar, 0);
  lc_backend *be = NULL;
  if (lc_backend_open(dev, &ar, &be) != LC_OK) {
    printf("skipped: %s\n", lc_errmsg());
    return 77;
  }
  char d[256];
  printf("%s\n", lc_backend_describe(be, d, sizeof d));
  printf("%-8s %-5s %10s %10s\n", "S", "pass", "ms", "TFLOPS");
  const double t_draw0 = lc_now();
  double t_draw = 0;
  for (int li = 0; li < nl; li++) {
    const long S = lens[li];
    const size_t nq = (size_t)S * Hq * D, nk = (size_t)S * Hkv * D;
    const double td = lc_now();
    lc_buf q = rnd16(be, nq, 1), k = rnd16(be, nk, 2), v = rnd16(be, nk, 3), dout = rnd16(be, nq, 4);
    t_draw += lc_now() - td;
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
    const lc_attn_geom s = {.Tq = (int)S, .Tk = (int)S, .Hq = Hq, .Hkv = Hkv, .D = D, .causal = 1, .scale = 1.0f / sqrtf((float)D), .bf16 = 1};
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
  printf("inputs drawn and copied in %.2f s of %.2f s\n", t_draw, lc_now() - t_draw0);
  lc_backend_close(be);
  return 0;
}
