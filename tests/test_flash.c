// Blockwise (flash) attention: forward/LSE, merge, delta and backward against a
// naive DOUBLE reference that materialises the softmax; finite differences; the
// accumulate contract; split key ranges (the ring-attention use); edge cases.
//
// Tolerances (all checks use |got - want| <= atol + rtol*|want|; the worst
// error/tolerance ratio of each kind is printed at the end):
//  - The kernel works in fp32: dot products over D <= 256, sums over <= 333 keys,
//    a polynomial exp2 with rel. error < 1e-7. The logits (|s| <~ 5 here) carry an
//    absolute error ~|s|*6e-8 which becomes a relative error of the same size in P.
//    Observed worst errors are ~7e-7 relative to the magnitude of the results, so
//    forward uses atol = 1e-5 * max|want|, rtol = 1e-5 (>= 10x margin; a masking,
//    GQA or softmax bug changes results by >= 1e-3).
//  - LSE (values ~ log(#keys) + O(1)): atol = rtol = 1e-5 (observed ~3e-7).
//  - Backward sums more products with cancellation (dS = P*(dP - delta)), so
//    atol = 2e-5 * max|want|, rtol = 2e-5 (observed ~8e-7 relative to max).
//  - Finite differences of L = sum(dout*out) in fp32 with h = 1e-2: truncation
//    O(h^2) ~ 1e-5 plus rounding ~ 6e-8*|L|/h ~ 1e-5, so atol 5e-4, rtol 5e-3
//    (observed < 0.1 of that).
//  - Results that must match up to a few roundings (merge, split vs one call):
//    atol 1e-5 * max, rtol 1e-5.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend/cpu/flash/flash.h"
#include "core/arena.h"
#include "testutil.h"
#include "attn_ref.h"

static lc_arena A;

// Worst error/tolerance ratio per kind of check, printed at the end (1.0 = at the limit).
enum { W_FWD, W_LSE, W_BWD, W_FD, W_SPLIT, W_N };
static double worst[W_N];
static const char *worst_name[W_N] = {"fwd out", "lse", "bwd grads", "finite diff", "split/merge"};
static void track(int kind, double ratio) {
  if (ratio > worst[kind] || ratio != ratio) worst[kind] = ratio;
}

static double maxabs_d(const double *x, long n) {
  double m = 0;
  for (long i = 0; i < n; i++)
    if (fabs(x[i]) > m) m = fabs(x[i]);
  return m;
}
static double maxabs_f(const float *x, long n) {
  double m = 0;
  for (long i = 0; i < n; i++)
    if (fabs(x[i]) > m) m = fabs(x[i]);
  return m;
}
static lc_attn_shape mk_shape(int Tq, int Tk, int Hq, int Hkv, int D, long qs, long ks,
                              int causal) {
  lc_attn_shape s = {Tq, Tk, Hq, Hkv, D, qs, ks, causal, (float)(1.0 / sqrt((double)D)), NULL, 0, NULL, 0, 0, 0};
  return s;
}

typedef struct {
  lc_attn_shape s;
  float *q, *k, *v, *dout;
} problem;

static problem make_problem(lc_rng *r, lc_attn_shape s) {
  problem p = {s, NULL, NULL, NULL, NULL};
  p.q = lc_t_randn(r, (long)s.Tq * s.Hq * s.D, 1.0f);
  p.k = lc_t_randn(r, (long)s.Tk * s.Hkv * s.D, 1.0f);
  p.v = lc_t_randn(r, (long)s.Tk * s.Hkv * s.D, 1.0f);
  p.dout = lc_t_randn(r, (long)s.Tq * s.Hq * s.D, 1.0f);
  return p;
}
static void free_problem(problem *p) {
  free(p->q);
  free(p->k);
  free(p->v);
  free(p->dout);
}

static void describe(char *buf, size_t n, const char *what, const lc_attn_shape *s) {
  snprintf(buf, n, "%s Tq=%d Tk=%d Hq=%d Hkv=%d D=%d q0=%ld k0=%ld causal=%d", what, s->Tq,
           s->Tk, s->Hq, s->Hkv, s->D, s->q_start, s->k_start, s->causal);
}

// Checks that no element is NaN/inf except lse == -inf where the reference has it.
static void check_lse(const char *what, const float *lse, const double *ref, long n) {
  int bad = 0;
  for (long i = 0; i < n; i++) {
    if (ref[i] == -INFINITY) {
      if (lse[i] != -INFINITY) bad++;
    } else {
      double ratio = fabs(lse[i] - ref[i]) / (1e-5 + 1e-5 * fabs(ref[i]));
      track(W_LSE, ratio);
      if (!(ratio <= 1.0)) bad++;
    }
  }
  CHECK(bad == 0, "%s: %d lse values off", what, bad);
}

// Forward vs reference. Returns max relative-to-scale error seen (for the log).
static void test_fwd_case(lc_rng *r, lc_attn_shape s) {
  char name[160];
  problem p = make_problem(r, s);
  long no = (long)s.Tq * s.Hq * s.D, nl = (long)s.Hq * s.Tq;
  float *out = malloc(sizeof(float) * (size_t)no), *lse = malloc(sizeof(float) * (size_t)nl);
  double *ro = malloc(sizeof(double) * (size_t)no), *rl = malloc(sizeof(double) * (size_t)nl);
  for (long i = 0; i < no; i++) out[i] = NAN; // every element must be written
  for (long i = 0; i < nl; i++) lse[i] = NAN;
  lc_status st = lc_flash_fwd(out, lse, p.q, p.k, p.v, &s, &A);
  describe(name, sizeof name, "fwd", &s);
  CHECK(st == LC_OK, "%s: status %d", name, st);
  CHECK(A.cur[LC_MEM_SCRATCH] == 0, "%s: workspace not freed", name);
  ref_fwd(ro, rl, p.q, p.k, p.v, &s);
  double sc = maxabs_d(ro, no);
  track(W_FWD, lc_t_close(name, out, ro, no, 1e-5 * (sc > 0 ? sc : 1), 1e-5));
  check_lse(name, lse, rl, nl);
  free(out);
  free(lse);
  free(ro);
  free(rl);
  free_problem(&p);
}

static void test_forward(lc_rng *r) {
  static const int T[] = {1, 7, 65, 200, 333};
  static const int Dv[] = {16, 64, 128};
  static const int H[][2] = {{4, 2}, {8, 1}, {3, 3}};
  for (int d = 0; d < 3; d++)
    for (int t = 0; t < 5; t++)
      for (int hh = 0; hh < 3; hh++) {
        if (Dv[d] == 128 && T[t] == 333 && hh == 1) continue; // keep the runtime down
        test_fwd_case(r, mk_shape(T[t], T[t], H[hh][0], H[hh][1], Dv[d], 0, 0, 1));
      }
  // offsets: partly masked (keys partly after the queries), rows with no key at all,
  // blocks fully visible, everything masked, and non-causal.
  test_fwd_case(r, mk_shape(200, 333, 4, 2, 64, 500, 300, 1));  // mixed, fully visible blocks
  test_fwd_case(r, mk_shape(130, 100, 4, 2, 64, 1000, 0, 1));   // all keys visible
  test_fwd_case(r, mk_shape(200, 150, 4, 2, 64, 0, 70, 1));     // first 70 rows see no key
  test_fwd_case(r, mk_shape(150, 200, 2, 1, 16, 0, 137, 1));    // rows < 137 see nothing
  test_fwd_case(r, mk_shape(65, 80, 4, 2, 64, 0, 100, 1));      // nothing visible at all
  test_fwd_case(r, mk_shape(333, 200, 4, 2, 64, 0, 0, 0));      // non-causal
  test_fwd_case(r, mk_shape(7, 333, 8, 1, 128, 3, 10, 0));      // non-causal, offsets ignored
  test_fwd_case(r, mk_shape(100, 300, 6, 2, 40, 250, 0, 1));    // D not a multiple of 16
  test_fwd_case(r, mk_shape(70, 130, 2, 2, 24, 64, 0, 1));
  test_fwd_case(r, mk_shape(70, 90, 2, 1, 256, 10, 0, 1));     // D > 128
}

// Merge: attention over [0, Tk) == merge(attention over [0,a), attention over [a,Tk)),
// in both orders, plus a case where both parts are -inf for some rows.
static void test_merge_case(lc_rng *r, lc_attn_shape s, int a, int b_first) {
  char name[160];
  problem p = make_problem(r, s);
  long no = (long)s.Tq * s.Hq * s.D, nl = (long)s.Hq * s.Tq;
  float *o1 = malloc(sizeof(float) * (size_t)no), *l1 = malloc(sizeof(float) * (size_t)nl);
  float *o2 = malloc(sizeof(float) * (size_t)no), *l2 = malloc(sizeof(float) * (size_t)nl);
  double *ro = malloc(sizeof(double) * (size_t)no), *rl = malloc(sizeof(double) * (size_t)nl);
  lc_attn_shape s1 = s, s2 = s;
  s1.Tk = a;
  s2.Tk = s.Tk - a;
  s2.k_start = s.k_start + a;
  long koff = (long)a * s.Hkv * s.D;
  float *oa = b_first ? o2 : o1, *la = b_first ? l2 : l1;
  float *ob = b_first ? o1 : o2, *lb = b_first ? l1 : l2;
  CHECK(lc_flash_fwd(o1, l1, p.q, p.k, p.v, &s1, &A) == LC_OK, "merge fwd 1");
  CHECK(lc_flash_fwd(o2, l2, p.q, p.k + koff, p.v + koff, &s2, &A) == LC_OK, "merge fwd 2");
  lc_attn_merge(oa, la, ob, lb, s.Tq, s.Hq, s.D);
  ref_fwd(ro, rl, p.q, p.k, p.v, &s);
  describe(name, sizeof name, b_first ? "merge(late,early)" : "merge(early,late)", &s);
  double sc = maxabs_d(ro, no);
  track(W_SPLIT, lc_t_close(name, oa, ro, no, 1e-5 * (sc > 0 ? sc : 1), 1e-5));
  check_lse(name, la, rl, nl);
  int nan = 0;
  for (long i = 0; i < no; i++) nan += isnan(oa[i]);
  CHECK(nan == 0, "%s: %d NaN", name, nan);
  free(o1);
  free(l1);
  free(o2);
  free(l2);
  free(ro);
  free(rl);
  free_problem(&p);
}

static void test_merge(lc_rng *r) {
  // causal self-attention split at 100: rows < 100 see nothing of the second part
  test_merge_case(r, mk_shape(200, 200, 4, 2, 64, 0, 0, 1), 100, 0);
  test_merge_case(r, mk_shape(200, 200, 4, 2, 64, 0, 0, 1), 100, 1); // a = -inf rows
  test_merge_case(r, mk_shape(97, 333, 8, 1, 16, 400, 0, 1), 150, 0);
  test_merge_case(r, mk_shape(65, 131, 2, 2, 128, 0, 0, 0), 64, 1);
  // rows < 50 see neither part: both -inf -> out 0, lse -inf
  test_merge_case(r, mk_shape(120, 100, 2, 1, 64, 0, 50, 1), 30, 0);

  // the stable form: huge lse values do not overflow (log(exp(a)+exp(b)) would)
  float oa[2] = {1.0f, 2.0f}, ob[2] = {3.0f, 4.0f};
  float la[1] = {1000.0f}, lb[1] = {1000.0f - logf(3.0f)};
  lc_attn_merge(oa, la, ob, lb, 1, 1, 2);
  double want_l = 1000.0 + log(4.0 / 3.0);
  CHECK(fabs(la[0] - want_l) < 1e-3 && fabs(oa[0] - 1.5) < 1e-5 && fabs(oa[1] - 2.5) < 1e-5,
        "merge large lse: lse %.6f out %.6f %.6f", la[0], oa[0], oa[1]);
  float oc[2] = {5, 6}, lc1[1] = {-INFINITY}, od[2] = {7, 8}, ld[1] = {-INFINITY};
  lc_attn_merge(oc, lc1, od, ld, 1, 1, 2);
  CHECK(lc1[0] == -INFINITY && oc[0] == 0 && oc[1] == 0, "merge both -inf");
}

static void test_delta(lc_rng *r) {
  int Tq = 37, Hq = 3, D = 40;
  long n = (long)Tq * Hq * D;
  float *a = lc_t_randn(r, n, 1), *b = lc_t_randn(r, n, 1), *dl = malloc(sizeof(float) * Tq * Hq);
  double *ref = malloc(sizeof(double) * Tq * Hq);
  lc_attn_delta(dl, a, b, Tq, Hq, D);
  for (int t = 0; t < Tq; t++)
    for (int h = 0; h < Hq; h++) {
      double s = 0;
      for (int d = 0; d < D; d++) s += (double)a[((long)t * Hq + h) * D + d] * b[((long)t * Hq + h) * D + d];
      ref[h * Tq + t] = s;
    }
  // 40 fp32 products of N(0,1) values: |error| <~ 40 * 6e-8 * O(1)
  lc_t_close("delta", dl, ref, (long)Tq * Hq, 1e-5, 1e-5);
  free(a);
  free(b);
  free(dl);
  free(ref);
}

// Runs forward + delta + backward with the kernel; grads are added to what dq/dk/dv hold.
static void run_fwd_bwd(const problem *p, float *dq, float *dk, float *dv, float *out,
                        float *lse) {
  const lc_attn_shape *s = &p->s;
  float *delta = malloc(sizeof(float) * (size_t)s->Hq * s->Tq);
  CHECK(lc_flash_fwd(out, lse, p->q, p->k, p->v, s, &A) == LC_OK, "fwd for bwd");
  lc_attn_delta(delta, p->dout, out, s->Tq, s->Hq, s->D);
  CHECK(lc_flash_bwd(dq, dk, dv, p->dout, p->q, p->k, p->v, lse, delta, s, &A) == LC_OK, "bwd");
  CHECK(A.cur[LC_MEM_SCRATCH] == 0, "bwd workspace not freed");
  free(delta);
}

static void test_bwd_case(lc_rng *r, lc_attn_shape s, int prefill) {
  char name[200];
  problem p = make_problem(r, s);
  long nq = (long)s.Tq * s.Hq * s.D, nk = (long)s.Tk * s.Hkv * s.D;
  float *dq = calloc((size_t)nq, sizeof(float)), *dk = calloc((size_t)nk, sizeof(float));
  float *dv = calloc((size_t)nk, sizeof(float)), *out = malloc(sizeof(float) * (size_t)nq);
  float *lse = malloc(sizeof(float) * (size_t)s.Hq * s.Tq);
  double *rq = malloc(sizeof(double) * (size_t)nq), *rk = malloc(sizeof(double) * (size_t)nk);
  double *rv = malloc(sizeof(double) * (size_t)nk);
  float *g0 = NULL;
  ref_bwd(rq, rk, rv, p.dout, p.q, p.k, p.v, &s);
  double sq = maxabs_d(rq, nq), sk = maxabs_d(rk, nk), sv = maxabs_d(rv, nk);
  if (prefill) { // accumulate contract: grads already hold g0, the result must be g0 + grad
    g0 = lc_t_randn(r, nq > nk ? nq : nk, 1.0f);
    memcpy(dq, g0, sizeof(float) * (size_t)nq);
    memcpy(dk, g0, sizeof(float) * (size_t)nk);
    memcpy(dv, g0, sizeof(float) * (size_t)nk);
    for (long i = 0; i < nq; i++) rq[i] += g0[i];
    for (long i = 0; i < nk; i++) {
      rk[i] += g0[i];
      rv[i] += g0[i];
    }
    sq = sq > 4 ? sq : 4; // values now include the prefill (|g0| <~ 4)
    sk = sk > 4 ? sk : 4;
    sv = sv > 4 ? sv : 4;
  }
  run_fwd_bwd(&p, dq, dk, dv, out, lse);
  describe(name, sizeof name, prefill ? "bwd(accumulate) dq" : "bwd dq", &s);
  track(W_BWD, lc_t_close(name, dq, rq, nq, 2e-5 * (sq > 0 ? sq : 1), 2e-5));
  describe(name, sizeof name, prefill ? "bwd(accumulate) dk" : "bwd dk", &s);
  track(W_BWD, lc_t_close(name, dk, rk, nk, 2e-5 * (sk > 0 ? sk : 1), 2e-5));
  describe(name, sizeof name, prefill ? "bwd(accumulate) dv" : "bwd dv", &s);
  track(W_BWD, lc_t_close(name, dv, rv, nk, 2e-5 * (sv > 0 ? sv : 1), 2e-5));
  free(g0);
  free(dq);
  free(dk);
  free(dv);
  free(out);
  free(lse);
  free(rq);
  free(rk);
  free(rv);
  free_problem(&p);
}

static void test_backward(lc_rng *r) {
  test_bwd_case(r, mk_shape(1, 1, 4, 2, 64, 0, 0, 1), 0);
  test_bwd_case(r, mk_shape(7, 7, 4, 2, 16, 0, 0, 1), 0);
  test_bwd_case(r, mk_shape(65, 65, 8, 1, 64, 0, 0, 1), 0);
  test_bwd_case(r, mk_shape(200, 200, 4, 2, 64, 0, 0, 1), 0);
  test_bwd_case(r, mk_shape(333, 333, 2, 2, 16, 0, 0, 1), 0);
  test_bwd_case(r, mk_shape(200, 200, 2, 1, 128, 0, 0, 1), 0);
  test_bwd_case(r, mk_shape(130, 200, 4, 2, 64, 300, 100, 1), 0); // partly masked blocks
  test_bwd_case(r, mk_shape(150, 130, 4, 2, 64, 0, 60, 1), 0);    // rows with no key
  test_bwd_case(r, mk_shape(65, 80, 2, 1, 64, 0, 100, 1), 0);     // nothing visible
  test_bwd_case(r, mk_shape(100, 170, 3, 3, 64, 0, 0, 0), 0);     // non-causal
  test_bwd_case(r, mk_shape(90, 150, 6, 2, 40, 100, 0, 1), 0);    // D = 40 (padded)
  test_bwd_case(r, mk_shape(90, 150, 4, 2, 24, 0, 0, 0), 0);      // D = 24
  test_bwd_case(r, mk_shape(70, 90, 2, 1, 256, 10, 0, 1), 0);     // D = 256
  test_bwd_case(r, mk_shape(200, 200, 4, 2, 64, 0, 0, 1), 1);     // accumulate
  test_bwd_case(r, mk_shape(70, 90, 8, 1, 128, 20, 0, 1), 1);
  // Several dK/dV key chunks (the backward runs chunk by chunk). At the real chunk size
  // (~4 MiB of per-thread buffers): 16 kv heads of D = 128 chunk every 256 keys (llama-3-8b's
  // 8 every 512), so 300 keys take two chunks, the second partial.
  lc_attn_shape big = mk_shape(300, 300, 16, 16, 128, 0, 0, 1);
  CHECK(lc_flash_bwd_key_chunk(&big) < big.Tk, "real-size case crosses a key chunk (chunk %ld, Tk %d)",
        lc_flash_bwd_key_chunk(&big), big.Tk);
  test_bwd_case(r, big, 0);
  // Test-sized chunks of 64 keys: many chunks, partial last chunk, offsets, GQA, masked rows.
  lc_flash_test_set_key_chunk(64);
  lc_attn_shape chunked[] = {mk_shape(333, 333, 4, 2, 16, 0, 0, 1), mk_shape(130, 200, 4, 2, 64, 300, 100, 1),
                             mk_shape(150, 190, 4, 2, 64, 0, 60, 1), mk_shape(100, 170, 3, 3, 24, 0, 0, 0)};
  for (size_t i = 0; i < sizeof chunked / sizeof chunked[0]; i++) {
    CHECK(lc_flash_bwd_key_chunk(&chunked[i]) == 64, "forced key chunk");
    test_bwd_case(r, chunked[i], (int)(i & 1));
  }
  lc_flash_test_set_key_chunk(0);
#ifdef _OPENMP
  // other thread counts (the dK/dV reduction runs over the team)
  int nt = omp_get_max_threads();
  omp_set_num_threads(3);
  test_bwd_case(r, mk_shape(333, 333, 4, 2, 64, 0, 0, 1), 0);
  omp_set_num_threads(1);
  test_bwd_case(r, mk_shape(150, 190, 4, 2, 64, 40, 0, 1), 0);
  omp_set_num_threads(nt);
#endif
}

// Central finite differences of L = sum(dout * out) (computed in double from the
// fp32 forward) for every input element of a small case.
static double loss_of(const problem *p, float *out, float *lse) {
  lc_flash_fwd(out, lse, p->q, p->k, p->v, &p->s, &A);
  double L = 0;
  long n = (long)p->s.Tq * p->s.Hq * p->s.D;
  for (long i = 0; i < n; i++) L += (double)p->dout[i] * out[i];
  return L;
}

static void test_fd(lc_rng *r) {
  lc_attn_shape s = mk_shape(9, 11, 2, 1, 16, 2, 0, 1);
  problem p = make_problem(r, s);
  long nq = (long)s.Tq * s.Hq * s.D, nk = (long)s.Tk * s.Hkv * s.D;
  float *dq = calloc((size_t)nq, sizeof(float)), *dk = calloc((size_t)nk, sizeof(float));
  float *dv = calloc((size_t)nk, sizeof(float)), *out = malloc(sizeof(float) * (size_t)nq);
  float *lse = malloc(sizeof(float) * (size_t)s.Hq * s.Tq);
  run_fwd_bwd(&p, dq, dk, dv, out, lse);
  float *xs[3] = {p.q, p.k, p.v}, *gs[3] = {dq, dk, dv};
  long ns[3] = {nq, nk, nk};
  const char *names[3] = {"fd dq", "fd dk", "fd dv"};
  const float hstep = 1e-2f;
  for (int w = 0; w < 3; w++) {
    double *fd = malloc(sizeof(double) * (size_t)ns[w]);
    for (long i = 0; i < ns[w]; i++) {
      float x0 = xs[w][i];
      xs[w][i] = x0 + hstep;
      double lp = loss_of(&p, out, lse);
      xs[w][i] = x0 - hstep;
      double lm = loss_of(&p, out, lse);
      xs[w][i] = x0;
      fd[i] = (lp - lm) / (2.0 * hstep);
    }
    track(W_FD, lc_t_close(names[w], gs[w], fd, ns[w], 5e-4, 5e-3));
    free(fd);
  }
  free(dq);
  free(dk);
  free(dv);
  free(out);
  free(lse);
  free_problem(&p);
}

// Ring use: forward merged over two key parts; backward as two calls over the key
// parts (same final lse/delta), accumulating into the same dq == one-call backward.
// Also: the backward is bitwise deterministic for a fixed thread count.
static void test_split_bwd(lc_rng *r, lc_attn_shape s, int a) {
  char name[200];
  problem p = make_problem(r, s);
  long nq = (long)s.Tq * s.Hq * s.D, nk = (long)s.Tk * s.Hkv * s.D, nl = (long)s.Hq * s.Tq;
  float *out = malloc(sizeof(float) * (size_t)nq), *lse = malloc(sizeof(float) * (size_t)nl);
  float *o2 = malloc(sizeof(float) * (size_t)nq), *l2 = malloc(sizeof(float) * (size_t)nl);
  float *delta = malloc(sizeof(float) * (size_t)nl);
  float *dq1 = calloc((size_t)nq, 4), *dk1 = calloc((size_t)nk, 4), *dv1 = calloc((size_t)nk, 4);
  float *dq2 = calloc((size_t)nq, 4), *dk2 = calloc((size_t)nk, 4), *dv2 = calloc((size_t)nk, 4);
  float *dq3 = calloc((size_t)nq, 4), *dk3 = calloc((size_t)nk, 4), *dv3 = calloc((size_t)nk, 4);
  lc_attn_shape s1 = s, s2 = s;
  s1.Tk = a;
  s2.Tk = s.Tk - a;
  s2.k_start = s.k_start + a;
  long koff = (long)a * s.Hkv * s.D;
  // merged forward over the two parts (as the ring does)
  CHECK(lc_flash_fwd(out, lse, p.q, p.k, p.v, &s1, &A) == LC_OK, "split fwd 1");
  CHECK(lc_flash_fwd(o2, l2, p.q, p.k + koff, p.v + koff, &s2, &A) == LC_OK, "split fwd 2");
  lc_attn_merge(out, lse, o2, l2, s.Tq, s.Hq, s.D);
  lc_attn_delta(delta, p.dout, out, s.Tq, s.Hq, s.D);
  CHECK(lc_flash_bwd(dq1, dk1, dv1, p.dout, p.q, p.k, p.v, lse, delta, &s, &A) == LC_OK, "bwd");
  CHECK(lc_flash_bwd(dq2, dk2, dv2, p.dout, p.q, p.k, p.v, lse, delta, &s1, &A) == LC_OK, "bwd1");
  CHECK(lc_flash_bwd(dq2, dk2 + koff, dv2 + koff, p.dout, p.q, p.k + koff, p.v + koff, lse, delta,
                     &s2, &A) == LC_OK, "bwd2");
  describe(name, sizeof name, "split bwd dq", &s);
  track(W_SPLIT, lc_t_close_ff(name, dq2, dq1, nq, 1e-5 * maxabs_f(dq1, nq), 1e-5));
  describe(name, sizeof name, "split bwd dk", &s);
  track(W_SPLIT, lc_t_close_ff(name, dk2, dk1, nk, 1e-5 * maxabs_f(dk1, nk), 1e-5));
  describe(name, sizeof name, "split bwd dv", &s);
  track(W_SPLIT, lc_t_close_ff(name, dv2, dv1, nk, 1e-5 * maxabs_f(dv1, nk), 1e-5));
  // and the one-call backward matches the double reference
  double *rq = malloc(sizeof(double) * (size_t)nq), *rk = malloc(sizeof(double) * (size_t)nk);
  double *rv = malloc(sizeof(double) * (size_t)nk);
  ref_bwd(rq, rk, rv, p.dout, p.q, p.k, p.v, &s);
  lc_t_close("split ref dq", dq1, rq, nq, 2e-5 * maxabs_d(rq, nq), 2e-5);
  lc_t_close("split ref dk", dk1, rk, nk, 2e-5 * maxabs_d(rk, nk), 2e-5);
  // determinism
  CHECK(lc_flash_bwd(dq3, dk3, dv3, p.dout, p.q, p.k, p.v, lse, delta, &s, &A) == LC_OK, "bwd3");
  CHECK(memcmp(dq1, dq3, sizeof(float) * (size_t)nq) == 0 &&
            memcmp(dk1, dk3, sizeof(float) * (size_t)nk) == 0 &&
            memcmp(dv1, dv3, sizeof(float) * (size_t)nk) == 0,
        "backward is not bitwise reproducible");
  free(rq);
  free(rk);
  free(rv);
  free(out);
  free(lse);
  free(o2);
  free(l2);
  free(delta);
  free(dq1);
  free(dk1);
  free(dv1);
  free(dq2);
  free(dk2);
  free(dv2);
  free(dq3);
  free(dk3);
  free(dv3);
  free_problem(&p);
}

// Rows that see no key: out exactly 0, lse -inf, and zero, finite gradients.
static void test_masked_rows(lc_rng *r) {
  lc_attn_shape s = mk_shape(100, 64, 2, 1, 64, 0, 80, 1); // rows < 80 see nothing
  problem p = make_problem(r, s);
  long nq = (long)s.Tq * s.Hq * s.D, nk = (long)s.Tk * s.Hkv * s.D;
  float *dq = calloc((size_t)nq, 4), *dk = calloc((size_t)nk, 4), *dv = calloc((size_t)nk, 4);
  float *out = malloc(sizeof(float) * (size_t)nq), *lse = malloc(sizeof(float) * 200);
  run_fwd_bwd(&p, dq, dk, dv, out, lse);
  int bad = 0;
  for (int t = 0; t < 100; t++)
    for (int h = 0; h < 2; h++) {
      int none = t < 80;
      if (none && lse[h * 100 + t] != -INFINITY) bad++;
      if (!none && !isfinite(lse[h * 100 + t])) bad++;
      for (int d = 0; d < 64; d++) {
        long o = ((long)t * 2 + h) * 64 + d;
        if (none && (out[o] != 0.0f || dq[o] != 0.0f)) bad++;
        if (!isfinite(out[o]) || !isfinite(dq[o])) bad++;
      }
    }
  for (long i = 0; i < nk; i++) bad += !isfinite(dk[i]) || !isfinite(dv[i]);
  CHECK(bad == 0, "masked rows: %d bad values", bad);
  free(dq);
  free(dk);
  free(dv);
  free(out);
  free(lse);
  free_problem(&p);
}

static void test_errors(lc_rng *r) {
  lc_attn_shape s = mk_shape(70, 70, 3, 2, 64, 0, 0, 1); // Hq % Hkv != 0
  float x[8] = {0};
  CHECK(lc_flash_fwd(x, x, x, x, x, &s, &A) == LC_EINVAL, "bad heads must be EINVAL");
  CHECK(lc_flash_bwd(x, x, x, x, x, x, x, x, x, &s, &A) == LC_EINVAL, "bad heads (bwd)");
  // arena cap too small for the workspace -> LC_ENOMEM, nothing leaked
  s = mk_shape(70, 70, 2, 1, 64, 0, 0, 1);
  problem p = make_problem(r, s);
  long nq = (long)s.Tq * s.Hq * s.D;
  float *out = calloc((size_t)nq, 4), *lse = calloc(140, 4), *dq = calloc((size_t)nq, 4);
  float *dk = calloc((size_t)nq, 4), *dv = calloc((size_t)nq, 4);
  lc_arena small;
  lc_arena_init(&small, 1024);
  CHECK(lc_flash_fwd(out, lse, p.q, p.k, p.v, &s, &small) == LC_ENOMEM, "fwd ENOMEM");
  CHECK(lc_flash_bwd(dq, dk, dv, p.dout, p.q, p.k, p.v, lse, lse, &s, &small) == LC_ENOMEM,
        "bwd ENOMEM");
  CHECK(small.cur_total == 0, "ENOMEM leaked %zu bytes", small.cur_total);
  free(out);
  free(lse);
  free(dq);
  free(dk);
  free(dv);
  free_problem(&p);
}

// Per-query lower bounds: documents packed in one sequence (each query sees only earlier
// keys of its own document) and sliding windows (at most W most recent keys), forward
// and backward against the double reference with the same tolerances, with query and key
// blocks at offsets (the ring's use), documents shorter than a block and longer than
// several, and forced key chunks of 64 in backward.
// lo[i] for queries at global positions q0..q0+Tq-1: document starts every `docs` lengths
// (cycled), window W (0: none).
static int *bounds(const lc_attn_shape *s, const int *docs, int nd, int W) {
  int *lo = malloc(sizeof(int) * (size_t)(s->Tq ? s->Tq : 1));
  long start = 0, end = docs[0];
  int di = 0;
  for (int i = 0; i < s->Tq; i++) {
    long g = s->q_start + i;
    while (g >= end) start = end, di = (di + 1) % nd, end += docs[di];
    long b = start;
    if (W > 0 && g - W + 1 > b) b = g - W + 1;
    lo[i] = (int)b;
  }
  return lo;
}

static void test_bounds(lc_rng *r) {
  static const int mix[] = {5, 130, 1, 64, 17, 300, 2, 90};
  struct {
    int Tq, Tk, Hq, Hkv, D;
    long q0, k0;
    int W;
  } c[] = {
      {333, 333, 4, 2, 64, 0, 0, 0},    // documents only, one block pair
      {333, 333, 4, 2, 32, 0, 0, 50},   // documents and a window shorter than most
      {200, 200, 8, 1, 16, 0, 0, 7},    // window only (one long document at 0 ... )
      {130, 200, 4, 2, 64, 300, 100, 0}, // ring-like offsets
      {150, 150, 2, 2, 48, 450, 150, 40}, // keys before the queries, window
      {100, 100, 3, 3, 24, 700, 0, 0},  // keys all before the queries' documents: nothing
  };
  for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
    lc_attn_shape s = mk_shape(c[k].Tq, c[k].Tk, c[k].Hq, c[k].Hkv, c[k].D, c[k].q0, c[k].k0, 1);
    int one[] = {1 << 20};
    int *lo = k == 2 ? bounds(&s, one, 1, c[k].W) : bounds(&s, mix, 8, c[k].W);
    s.lo = lo;
    test_fwd_case(r, s);
    test_bwd_case(r, s, (int)(k & 1));
    lc_flash_test_set_key_chunk(64);
    test_bwd_case(r, s, 0);
    lc_flash_test_set_key_chunk(0);
    free(lo);
  }
  // A window at least S long and documents of length >= S are plain causal attention:
  // the kernel gives the same bits as with no bound.
  lc_attn_shape s = mk_shape(200, 200, 4, 2, 64, 0, 0, 1);
  problem p = make_problem(r, s);
  int big[] = {1 << 20};
  int *lo = bounds(&s, big, 1, 200);
  float *o1 = malloc(sizeof(float) * 200 * 4 * 64), *o2 = malloc(sizeof(float) * 200 * 4 * 64);
  float *l1 = malloc(sizeof(float) * 800), *l2 = malloc(sizeof(float) * 800);
  CHECK(lc_flash_fwd(o1, l1, p.q, p.k, p.v, &s, &A) == LC_OK, "plain");
  s.lo = lo;
  CHECK(lc_flash_fwd(o2, l2, p.q, p.k, p.v, &s, &A) == LC_OK, "window = S");
  CHECK(!memcmp(o1, o2, sizeof(float) * 200 * 4 * 64) && !memcmp(l1, l2, sizeof(float) * 800),
        "a window of S is plain causal attention");
  free(o1), free(o2), free(l1), free(l2), free(lo);
  free_problem(&p);
}

int main(void) {
  lc_rng r;
  lc_rng_seed(&r, 1234);
  lc_arena_init(&A, 0);
  test_forward(&r);
  test_merge(&r);
  test_delta(&r);
  test_backward(&r);
  test_fd(&r);
  test_split_bwd(&r, mk_shape(200, 200, 4, 2, 64, 0, 0, 1), 100);
  test_split_bwd(&r, mk_shape(333, 333, 8, 1, 16, 0, 0, 1), 77); // split inside a block
  test_split_bwd(&r, mk_shape(130, 150, 2, 2, 128, 100, 0, 1), 64);
  test_masked_rows(&r);
  test_bounds(&r);
  test_errors(&r);
  for (int w = 0; w < W_N; w++) printf("worst error/tolerance, %s: %.3g\n", worst_name[w], worst[w]);
  return lc_test_finish("test_flash");
}
