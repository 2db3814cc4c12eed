// Benchmark (not a test): attention work of packed sequences across context ranks.
//   bench_pack TOKFILE S [samples]
// Packs the token file's documents into sequences of S tokens (the trainer's packer) and,
// for cp = 2, 4, 8, measures per sample:
//   - the attention work of each context rank, counted (visible query-key pairs) and
//     timed (the rank's attention kernels, forward + backward, run here one rank after the
//     other on one process: Hq 8, Hkv 4, D 64, the bench-s heads), for the zigzag layout
//     and for the balanced one; reported as max / mean over ranks;
//   - the skipped-block fraction: 64 x 64 tiles of the causal triangle that no query of
//     the tile may see (the kernel never computes them).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/flash/flash.h"
#include "core/arena.h"
#include "core/rng.h"
#include "core/timer.h"
#include "attn/seqlayout.h"
#include "io/data.h"

enum { HQ = 8, HKV = 4, D = 64 };

// Seconds of rank c's attention kernels (every pair of its chunks and all chunks it can
// see), forward and backward, on random q, k, v of the whole sequence.
static double rank_seconds(const lc_seq_layout *L, const int *lo, int c, const float *q, const float *k,
                           const float *v, float *out, float *lse, float *dq, float *dk, float *dv, float *delta,
                           lc_arena *ar) {
  double t0 = lc_now();
  for (int a = 0; a < L->k; a++) {
    long qs = lc_seq_layout_chunk_start(L, c, a);
    for (int r = 0; r < L->cp; r++)
      for (int b = 0; b < L->k; b++) {
        long ks = lc_seq_layout_chunk_start(L, r, b);
        if (ks > qs + L->Lc - 1) continue;
        lc_attn_shape s = {.Tq = (int)L->Lc, .Tk = (int)L->Lc, .Hq = HQ, .Hkv = HKV, .D = D, .q_start = qs,
                           .k_start = ks, .causal = 1, .scale = 0.125f, .lo = lo + qs};
        const float *qq = q + (size_t)qs * HQ * D, *kk = k + (size_t)ks * HKV * D, *vv = v + (size_t)ks * HKV * D;
        lc_flash_fwd(out, lse, qq, kk, vv, &s, ar);
        for (long i = 0; i < (long)HQ * L->Lc; i++) delta[i] = 0.01f;
        lc_flash_bwd(dq, dk, dv, out, qq, kk, vv, lse, delta, &s, ar);
      }
  }
  return lc_now() - t0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bench_pack TOKFILE S [samples]\n");
    return 2;
  }
  const int S = atoi(argv[2]), n = argc > 3 ? atoi(argv[3]) : 8;
  lc_data d;
  if (lc_data_open(&d, argv[1], 256, S) != LC_OK || lc_data_pack(&d, S, 1, 0) != LC_OK) {
    fprintf(stderr, "bench_pack: %s\n", lc_errmsg());
    return 1;
  }
  char desc[300];
  lc_data_pack_desc(&d, desc, sizeof desc);
  printf("bench_pack: %s, S = %d: %s; %d samples\n", argv[1], S, desc, n);
  int *tok = malloc(sizeof(int) * (size_t)S), *tgt = malloc(sizeof(int) * (size_t)S), *doc = malloc(sizeof(int) * (size_t)S);
  int *lo = malloc(sizeof(int) * (size_t)S);
  lc_rng r;
  lc_rng_seed(&r, 3);
  size_t nq = (size_t)S * HQ * D, nk = (size_t)S * HKV * D;
  float *q = malloc(4 * nq), *k = malloc(4 * nk), *v = malloc(4 * nk);
  lc_rng_fill_normal(&r, q, (long)nq, 1.0f);
  lc_rng_fill_normal(&r, k, (long)nk, 1.0f);
  lc_rng_fill_normal(&r, v, (long)nk, 1.0f);
  const long Lmax = S / 4;
  float *out = malloc(4 * (size_t)Lmax * HQ * D), *lse = malloc(4 * (size_t)Lmax * HQ), *delta = malloc(4 * (size_t)Lmax * HQ);
  float *dq = calloc((size_t)Lmax * HQ * D, 4), *dk = calloc((size_t)Lmax * HKV * D, 4), *dv = calloc((size_t)Lmax * HKV * D, 4);
  lc_arena ar;
  lc_arena_init(&ar, 0);
  // skipped tiles, averaged over samples
  double skip = 0, pairs_frac = 0;
  printf("\n| cp | layout | chunks/rank | work max/mean (computed tiles), mean over samples | worst sample | kernel time max/mean (measured) |\n");
  printf("|---|---|---|---|---|---|\n");
  for (int cp = 2; cp <= 8; cp *= 2)
    for (int kind = 0; kind < 2; kind++) {
      const lc_cp_layout cl = kind ? LC_CP_BALANCED : LC_CP_ZIGZAG;
      const int kk = lc_cp_layout_chunks(cl, S, cp, 1);
      lc_seq_layout L;
      if (lc_seq_layout_init(&L, S, cp, 1, kk) != LC_OK) return 1;
      double imb = 0, worst = 0, timb = 0;
      for (int i = 0; i < n; i++) {
        lc_data_sample_docs(&d, 1, (uint64_t)i, tok, tgt, doc, S);
        for (int t = 0; t < S; t++) lo[t] = doc[t];
        if (cl == LC_CP_BALANCED) lc_seq_layout_balance(&L, lo);
        double w[8], mx = 0, sum = 0;
        lc_seq_layout_work(&L, lo, w);
        for (int c = 0; c < cp; c++) mx = fmax(mx, w[c]), sum += w[c];
        imb += mx / (sum / cp) / n;
        worst = fmax(worst, mx / (sum / cp));
        if (i < 2) { // kernel timing on the first two samples (it costs a full attention pass)
          double tm = 0, ts = 0;
          for (int c = 0; c < cp; c++) {
            double t = rank_seconds(&L, lo, c, q, k, v, out, lse, dq, dk, dv, delta, &ar);
            tm = fmax(tm, t), ts += t;
          }
          timb += tm / (ts / cp) / 2;
        }
        if (cp == 2 && kind == 0) {
          // tiles of the causal triangle no query of the tile sees; visible pairs vs S(S+1)/2
          long tiles = 0, skipped = 0;
          double pairs = 0;
          for (long qb = 0; qb < S; qb += 64) {
            int mn = lo[qb];
            for (long t = qb; t < qb + 64 && t < S; t++) mn = lo[t] < mn ? lo[t] : mn, pairs += (double)(t - lo[t] + 1);
            for (long kb = 0; kb <= qb; kb += 64) tiles++, skipped += kb + 63 < mn;
          }
          skip += (double)skipped / tiles / n;
          pairs_frac += pairs / ((double)S * (S + 1) / 2) / n;
        }
      }
      printf("| %d | %s | %d | %.3f | %.3f | %.3f |\n", cp, lc_cp_layout_name(cl), kk, imb, worst, timb);
      fflush(stdout);
      lc_seq_layout_free(&L);
    }
  printf("\nskipped-block fraction (64 x 64 tiles of the causal triangle no query may see): %.1f%%; visible pairs: "
         "%.2f%% of one causal sequence of S\n", 100 * skip, 100 * pairs_frac);
  lc_data_close(&d);
  return 0;
}
