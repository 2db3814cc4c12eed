// Choices the code makes, on inputs where a wrong choice shows (docs/TESTING.md, rule 3):
//  - the packer's first-fit: which sequence each document lands in, exact fits without
//    padding, long documents cut into pieces, the oldest open sequence closed when the
//    window is full (hand-worked cases);
//  - the balanced sequence layout: which chunks each context rank gets (hand-worked), the
//    work it assigns each rank equals the visible (query, key) pairs counted here tile by
//    tile (tests/layoutcount.h), and its max/mean stays within the list-scheduling bound,
//    for packed documents with and without a sliding window;
//  - an error message built on the previous one (lc_fail given lc_errmsg()).
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "attn/attn.h"
#include "core/rng.h"
#include "core/status.h"
#include "attn/seqlayout.h"
#include "io/pack.h"
#include "layoutcount.h"
#include "testutil.h"

static uint64_t start_of(const void *src, uint64_t i) { return ((const uint64_t *)src)[i]; }

// A packer over documents whose lengths, in the order the packer visits them (its seeded
// shuffle, lc_pack_order), are len[0..n): document order[v] has length len[v]. vstart[v]:
// the first token of the document visited v-th.
static void visit_docs(uint64_t seed, const int *len, int n, uint64_t *starts, uint64_t *vstart, uint64_t *count) {
  uint64_t order[128], doc_len[128];
  lc_pack_order(seed, 0, (uint64_t)n, order);
  for (int v = 0; v < n; v++) doc_len[order[v]] = (uint64_t)len[v];
  uint64_t at = 0;
  for (int i = 0; i < n; i++) starts[i] = at, at += doc_len[i];
  for (int v = 0; v < n; v++) vstart[v] = starts[order[v]];
  *count = at;
}

// Sequence j of epoch 0 holds exactly the pieces want[0..nw): {visit index, offset in the
// document, length, last}.
typedef struct {
  int v, off, len, last;
} want_piece;

static void check_seq(lc_packer *p, const uint64_t *vstart, long j, const want_piece *want, int nw, const char *what) {
  const lc_piece *pc = NULL;
  size_t n = 0;
  CHECK(lc_packer_get(p, (uint64_t)j, &pc, &n) == LC_OK, "%s: sequence %ld: %s", what, j, lc_errmsg());
  int ok = (int)n == nw;
  for (int i = 0; ok && i < nw; i++)
    ok = pc[i].start == vstart[want[i].v] + (uint64_t)want[i].off && (int)pc[i].len == want[i].len &&
         (int)pc[i].last == want[i].last;
  CHECK(ok, "%s: sequence %ld holds %zu pieces, the first %u tokens at token %llu; want %d, the first %d tokens "
        "of document v%d (visited %d-th) from its token %d", what, j, n, n ? pc[0].len : 0u,
        n ? (unsigned long long)pc[0].start : 0ull, nw, want[0].len, want[0].v, want[0].v + 1, want[0].off);
}

// S = 12. Visited lengths 6 8 4 6 4 2 6 (36 tokens = 3 sequences exactly):
//   v0 6 -> A (6 left); v1 8 -> B (4 left, A has only 6); v2 4 -> A, the first that fits
//   (best-fit would take B's exact 4) (A: 2 left); v3 6 -> C (6 left); v4 4 -> B, full:
//   out first; v5 2 -> A, full: out second; v6 6 -> C, full: out third.
// So: [v1 v4] (2S/3 + S/3), [v0 v2 v5], [v3 v6] (two of S/2), no padding.
static void test_first_fit_exact(void) {
  const int len[] = {6, 8, 4, 6, 4, 2, 6}, n = 7;
  uint64_t starts[8], vstart[8], count;
  visit_docs(11, len, n, starts, vstart, &count);
  lc_packer p;
  CHECK(lc_packer_init(&p, 12, 11, starts, (uint64_t)n, count, start_of, 0) == LC_OK, "init: %s", lc_errmsg());
  CHECK(p.seqs0 == 3 && p.pad0 == 0 && p.split0 == 0, "exact fits: %ld sequences, %llu padding tokens (want 3, 0)",
        p.seqs0, (unsigned long long)p.pad0);
  const want_piece s0[] = {{1, 0, 8, 1}, {4, 0, 4, 1}}, s1[] = {{0, 0, 6, 1}, {2, 0, 4, 1}, {5, 0, 2, 1}},
                   s2[] = {{3, 0, 6, 1}, {6, 0, 6, 1}};
  check_seq(&p, vstart, 0, s0, 2, "exact fits");
  check_seq(&p, vstart, 1, s1, 3, "exact fits");
  check_seq(&p, vstart, 2, s2, 2, "exact fits");
  // The next epoch follows: its own order, the same 36 tokens in 3 sequences.
  const lc_piece *pc;
  size_t np;
  CHECK(lc_packer_get(&p, 3, &pc, &np) == LC_OK && p.first_seq[1] == 3, "epoch 1 starts at sequence 3");
  lc_packer_free(&p);
}

// S = 12. Visited lengths 15 10 2 7: v0 is cut into 12 (a sequence of its own, out at
// once; its last token's label runs on: last = 0) and 3 -> A (9 left); v1 10 -> B (2
// left); v2 2 -> A, the first that fits (7 left); v3 7 -> A, full: out. At the end B
// goes out with 2 tokens of padding.
static void test_first_fit_pieces(void) {
  const int len[] = {15, 10, 2, 7}, n = 4;
  uint64_t starts[4], vstart[4], count;
  visit_docs(5, len, n, starts, vstart, &count);
  lc_packer p;
  CHECK(lc_packer_init(&p, 12, 5, starts, (uint64_t)n, count, start_of, 0) == LC_OK, "init: %s", lc_errmsg());
  CHECK(p.seqs0 == 3 && p.pad0 == 2 && p.split0 == 1, "pieces: %ld sequences, %llu padding, %llu cut (want 3, 2, 1)",
        p.seqs0, (unsigned long long)p.pad0, (unsigned long long)p.split0);
  const want_piece s0[] = {{0, 0, 12, 0}}, s1[] = {{0, 12, 3, 1}, {2, 0, 2, 1}, {3, 0, 7, 1}}, s2[] = {{1, 0, 10, 1}};
  check_seq(&p, vstart, 0, s0, 1, "pieces");
  check_seq(&p, vstart, 1, s1, 3, "pieces");
  check_seq(&p, vstart, 2, s2, 1, "pieces");
  lc_packer_free(&p);
}

// S = 12, 65 documents of 7 tokens (no two share a sequence): 64 fill the window; the 65th
// closes the oldest open sequence (v0's), and at the end the rest go out oldest first, so
// sequence j holds v_j; padding 5 per sequence.
static void test_first_fit_window(void) {
  enum { N = 65 };
  int len[N];
  for (int i = 0; i < N; i++) len[i] = 7;
  uint64_t starts[N], vstart[N], count;
  visit_docs(3, len, N, starts, vstart, &count);
  lc_packer p;
  CHECK(lc_packer_init(&p, 12, 3, starts, N, count, start_of, 0) == LC_OK, "init: %s", lc_errmsg());
  CHECK(p.seqs0 == N && p.pad0 == 5 * N, "window: %ld sequences, %llu padding (want %d, %d)", p.seqs0,
        (unsigned long long)p.pad0, N, 5 * N);
  for (int j = 0; j < N; j++) {
    const want_piece s[] = {{j, 0, 7, 1}};
    check_seq(&p, vstart, j, s, 1, "window of 64");
  }
  lc_packer_free(&p);
}

// Hand-worked: S = 512 on cp 2 with 4 chunks of 64 tokens per rank; documents [0, 384) and
// [384, 512). Chunk j costs the 64 x 64 tiles from its document's first tile to its own:
// 1 2 3 4 5 6 | 1 2 (x 4096 pairs). Largest first to the least loaded rank (ties: lower
// chunk, lower rank): 5->r0 (6), 4->r1 (5), 3->r1 (9), 2->r0 (9), 1->r0 (11), 7->r1 (11),
// 0->r0 (12, full), 6->r1 (12): rank 0 {0 1 2 5}, rank 1 {3 4 6 7}, 12 tiles each.
// (Smallest first gives 11 / 13 tiles, chunks in index order 10 / 14.)
static void test_balance_hand(void) {
  enum { S = 512, CP = 2, K = 4 };
  static int lo[S];
  for (int t = 0; t < S; t++) lo[t] = t < 384 ? 0 : 384;
  lc_seq_layout L;
  CHECK(lc_seq_layout_init(&L, S, CP, 1, K) == LC_OK, "layout: %s", lc_errmsg());
  lc_seq_layout_balance(&L, lo);
  const int want[CP * K] = {0, 1, 2, 5, 3, 4, 6, 7};
  CHECK(!memcmp(L.chunk, want, sizeof want), "balanced chunks: rank 0 {%d %d %d %d}, rank 1 {%d %d %d %d}; want "
        "{0 1 2 5}, {3 4 6 7}", L.chunk[0], L.chunk[1], L.chunk[2], L.chunk[3], L.chunk[4], L.chunk[5], L.chunk[6],
        L.chunk[7]);
  double w[CP], mine[CP], pairs[CP], mx;
  lc_seq_layout_work(&L, lo, w);
  lc_t_rank_work(&L, lo, mine, pairs, &mx);
  CHECK(w[0] == 12 * 4096.0 && w[1] == 12 * 4096.0 && mine[0] == w[0] && mine[1] == w[1],
        "work %g / %g tiles (counted %g / %g), want 12 / 12", w[0] / 4096, w[1] / 4096, mine[0] / 4096, mine[1] / 4096);
  lc_seq_layout_free(&L);
}

// Packed documents (long-tailed lengths, some longer than a chunk, some shorter than a
// query block), with and without a sliding window, on cp 2/4/8 with 4 and 8 chunks per
// rank, chunks of 64, 96 (blocks that do not line up with key tiles) and 160 tokens:
//  - the layout is a partition: every chunk on exactly one rank, k per rank, ascending;
//  - the work lc_seq_layout_work assigns each rank (what the balancing and the trainer's
//    cp_work_imbalance use) equals the tiles counted here from the visible pairs;
//  - max <= mean + (1 - 1/cp) x the largest chunk: what "largest first to the least loaded
//    rank" guarantees (list scheduling), and max/mean is lower than zigzag's on average.
static void test_balance_packed(void) {
  const int cps[] = {2, 4, 8}, ks[] = {4, 8}, lcs[] = {64, 96, 160}, windows[] = {0, 100};
  lc_rng r;
  lc_rng_seed(&r, 2024);
  int cases = 0, bad_part = 0, bad_work = 0, bad_bound = 0;
  char first_bad[200] = "";
  double bal = 0, zig = 0, worst = 1, worst_margin = 0;
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 2; b++)
      for (int e = 0; e < 3; e++)
        for (int wi = 0; wi < 2; wi++)
          for (int sample = 0; sample < 3; sample++) {
            const int cp = cps[a], k = ks[b], Lc = lcs[e], W = windows[wi];
            const long S = (long)cp * k * Lc;
            int *lo = malloc(sizeof(int) * (size_t)S);
            for (long t = 0, d = 0; t < S;) { // documents: 70% 1..Lc, 25% ..4 Lc, 5% ..S
              const uint32_t u = lc_rng_below(&r, 20);
              long len = u < 14 ? 1 + lc_rng_below(&r, (uint32_t)Lc)
                                : u < 19 ? 1 + lc_rng_below(&r, 4u * (uint32_t)Lc) : 1 + lc_rng_below(&r, (uint32_t)S);
              d = t;
              for (long i = 0; i < len && t < S; i++, t++) lo[t] = lc_visible_from(t, d, W);
            }
            lc_seq_layout L, Z;
            CHECK(lc_seq_layout_init(&L, S, cp, 1, k) == LC_OK && lc_seq_layout_init(&Z, S, cp, 1, 2) == LC_OK,
                  "layouts: %s", lc_errmsg());
            lc_seq_layout_balance(&L, lo);
            int held[64] = {0}, part = 1;
            for (int c = 0; c < cp; c++)
              for (int i = 0; i < k; i++) {
                const int j = L.chunk[c * k + i];
                part &= j >= 0 && j < cp * k && !held[j] && (i == 0 || L.chunk[c * k + i - 1] < j);
                if (j >= 0 && j < cp * k) held[j] = 1;
              }
            bad_part += !part;
            double w[8], mine[8], pairs[8], mx_chunk, zw[8], zmine[8], zpairs[8], zmx;
            lc_seq_layout_work(&L, lo, w);
            lc_t_rank_work(&L, lo, mine, pairs, &mx_chunk);
            lc_seq_layout_work(&Z, lo, zw);
            lc_t_rank_work(&Z, lo, zmine, zpairs, &zmx);
            double mx = 0, sum = 0, zmax = 0, zsum = 0;
            for (int c = 0; c < cp; c++) {
              const int bad = w[c] != mine[c] || zw[c] != zmine[c] || pairs[c] > mine[c];
              if (bad && !first_bad[0])
                snprintf(first_bad, sizeof first_bad, " (first: cp %d k %d Lc %d window %d rank %d: balanced %g, "
                         "counted %g; zigzag %g, counted %g; visible pairs %g)", cp, k, Lc, W, c, w[c], mine[c], zw[c],
                         zmine[c], pairs[c]);
              bad_work += bad;
              mx = mine[c] > mx ? mine[c] : mx, sum += mine[c];
              zmax = zmine[c] > zmax ? zmine[c] : zmax, zsum += zmine[c];
            }
            const double mean = sum / cp, margin = (mx - mean) / ((1.0 - 1.0 / cp) * mx_chunk);
            bad_bound += mx > mean + (1.0 - 1.0 / cp) * mx_chunk;
            worst_margin = margin > worst_margin ? margin : worst_margin;
            bal += mx / mean, zig += zmax / (zsum / cp), worst = mx / mean > worst ? mx / mean : worst;
            cases++;
            lc_seq_layout_free(&L);
            lc_seq_layout_free(&Z);
            free(lo);
          }
  CHECK(bad_part == 0, "%d of %d balanced layouts are not a partition into k ascending chunks per rank", bad_part, cases);
  CHECK(bad_work == 0, "%d rank works of %d layouts differ from the tiles counted from the visible pairs%s", bad_work,
        cases, first_bad);
  CHECK(bad_bound == 0, "%d of %d layouts exceed max <= mean + (1 - 1/cp) x largest chunk", bad_bound, cases);
  CHECK(bal < zig, "balanced max/mean %.3f on average, zigzag %.3f", bal / cases, zig / cases);
  printf("balanced layouts of packed documents: %d cases, max/mean %.3f on average (zigzag %.3f), worst %.3f, "
         "worst (max - mean) / ((1 - 1/cp) largest chunk) %.2f\n", cases, bal / cases, zig / cases, worst, worst_margin);
}

// A message built on the previous one: the previous text arrives whole, once.
static void test_nested_message(void) {
  lc_fail(LC_EIO, "cannot create directory /x/y (No such file or directory): check the path");
  lc_fail(LC_EIO, "--save /x/y: %s; give a writable directory", lc_errmsg());
  CHECK(!strcmp(lc_errmsg(), "--save /x/y: cannot create directory /x/y (No such file or directory): check the path; "
                             "give a writable directory"), "nested message: '%s'", lc_errmsg());
}

int main(void) {
  test_first_fit_exact();
  test_first_fit_pieces();
  test_first_fit_window();
  test_balance_hand();
  test_balance_packed();
  test_nested_message();
  return lc_test_finish("test_policy");
}
