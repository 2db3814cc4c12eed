// The kernel table across levels, in one binary (as ggml's test-backend-ops does): every
// level this CPU runs is compared, on the same random inputs, with the portable level and
// with an independent reference; levels the CPU cannot run are skipped with the reason.
//
//  A. Element-wise entries (casts, add, scale, sumsq, AdamW): the same C source per level
//     with contraction off, so every level must give the portable level's BITS; the
//     portable casts must give the scalar rule's bits (lc_f32_to_bf16 / lc_bf16_to_f32),
//     on values that include ties, subnormals, infinities, NaN and overflow.
//  B. Attention, fp32 products (every level): forward out/LSE and backward dq/dk/dv vs
//     the double reference (tests/attn_ref.h) with test_flash's bounds (fwd 1e-5, bwd 2e-5
//     relative to the largest value: fp32 sums over <= 333 terms), and vs the portable level.
//  C. Attention, bf16 products (levels bf16 and amx): inputs rounded to bf16; the kernel
//     also rounds P and dS to bf16 (relative error <= 2^-9 each). Bounds:
//     - forward, every element: |out - ref| <= 2^-8 max|v| (out is a convex combination of
//       v rows, each weight off by <= 2^-9 relative, plus fp32 sums), and LSE within 1e-5
//       relative (computed from the fp32 scores: the products q.k are exact in fp32);
//     - forward and backward, relative L2 error ||got - ref|| / ||ref|| <= 1e-2: random
//       roundings of 2^-9/sqrt(3) ~ 1.1e-3 per term give ~1e-3; leaving out one key of a
//       300-key row, a wrong tile or a wrong pair gives > 5e-2.
//     Shapes: causal GQA, odd Tq/Tk/D, global offsets, document bounds and windows, many
//     key tiles, and backward key chunks forced to 64 rows so phases cross chunks.
//  E. The AMX tile kernel, real (AMX CPUs) and with emulated tiles (AVX512_BF16 CPUs): C and D.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/flash/flash.h"
#include "backend/cpu/flash/flash_variants.h"
#include "core/arena.h"
#include "core/cpu.h"
#include "core/dtype.h"
#include "backend/cpu/kern/kernels.h"
#include "testutil.h"
#include "attn_ref.h"

static lc_arena A;
static lc_cpu_info cpu;

static int bits_equal(const void *a, const void *b, size_t bytes) { return memcmp(a, b, bytes) == 0; }

// ---- A. element-wise ----
static float special(lc_rng *r, long i) {
  uint32_t u;
  switch (i % 11) {
    case 0: u = 0x3f808000u; break;                      // tie, even: rounds down
    case 1: u = 0x3f818000u; break;                      // tie, odd: rounds up
    case 2: u = 0x00000123u; break;                      // subnormal
    case 3: u = 0x7f800000u; break;                      // inf
    case 4: u = 0xff800000u; break;                      // -inf
    case 5: u = 0x7fc00001u; break;                      // quiet NaN
    case 6: u = 0x7f810000u; break;                      // signalling NaN
    case 7: u = 0x7f7fffffu; break;                      // FLT_MAX: rounds to inf
    default: {
      float f = lc_rng_normal(r) * 10.0f;
      memcpy(&u, &f, 4);
    }
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void test_elementwise_level(const lc_kernels *k, const lc_kernels *p, lc_rng *r) {
  const size_t n = 200003; // above the threading threshold, odd
  float *x = malloc(4 * n), *a = malloc(4 * n), *b = malloc(4 * n), *c = malloc(4 * n);
  uint16_t *h1 = malloc(2 * n), *h2 = malloc(2 * n);
  for (size_t i = 0; i < n; i++) x[i] = special(r, (long)i);
  // casts
  memcpy(a, x, 4 * n), memcpy(b, x, 4 * n);
  k->bf16_round(a, n), p->bf16_round(b, n);
  CHECK(bits_equal(a, b, 4 * n), "%s bf16_round differs from portable", k->name);
  k->bf16_round_copy(c, x, n);
  CHECK(bits_equal(c, b, 4 * n), "%s bf16_round_copy differs from portable", k->name);
  k->bf16_pack(h1, x, n), p->bf16_pack(h2, x, n);
  CHECK(bits_equal(h1, h2, 2 * n), "%s bf16_pack differs from portable", k->name);
  k->bf16_unpack(a, h1, n);
  CHECK(bits_equal(a, b, 4 * n), "%s bf16_unpack(pack(x)) differs from round(x)", k->name);
  if (k == p) { // the portable casts against the scalar rule (core/dtype.c)
    long bad = 0;
    for (size_t i = 0; i < n; i++) {
      float w = lc_bf16_to_f32(lc_f32_to_bf16(x[i]));
      if (h2[i] != lc_f32_to_bf16(x[i]) || memcmp(&w, &b[i], 4)) bad++;
    }
    CHECK(bad == 0, "portable casts differ from the scalar rule at %ld of %zu values", bad, n);
  }
  // add, scale, sumsq, adamw on finite values
  for (size_t i = 0; i < n; i++) x[i] = lc_rng_normal(r), c[i] = lc_rng_normal(r);
  memcpy(a, x, 4 * n), memcpy(b, x, 4 * n);
  k->add(a, c, n), p->add(b, c, n);
  CHECK(bits_equal(a, b, 4 * n), "%s add differs from portable", k->name);
  k->scale(a, n, 0.37f), p->scale(b, n, 0.37f);
  CHECK(bits_equal(a, b, 4 * n), "%s scale differs from portable", k->name);
  double s1 = k->sumsq(x, n), s2 = p->sumsq(x, n), s3 = 0;
  for (size_t i = 0; i < n; i++) s3 += (double)x[i] * x[i];
  CHECK(s1 == s2, "%s sumsq %.17g differs from portable %.17g", k->name, s1, s2);
  CHECK(fabs(s1 - s3) <= 1e-12 * s3, "%s sumsq %.17g vs sequential double %.17g", k->name, s1, s3);
  float *m1 = calloc(n, 4), *v1 = calloc(n, 4), *m2 = calloc(n, 4), *v2 = calloc(n, 4);
  memcpy(a, x, 4 * n), memcpy(b, x, 4 * n);
  for (int t = 0; t < 3; t++) {
    k->adamw(a, c, m1, v1, n, 0.1f, 0.9f, 0.95f, 1e-8f, 1e-3f, 1e-2f, 3.2f);
    p->adamw(b, c, m2, v2, n, 0.1f, 0.9f, 0.95f, 1e-8f, 1e-3f, 1e-2f, 3.2f);
  }
  CHECK(bits_equal(a, b, 4 * n) && bits_equal(m1, m2, 4 * n) && bits_equal(v1, v2, 4 * n),
        "%s adamw differs from portable", k->name);
  // one AdamW step against the formula in double
  memcpy(a, x, 4 * n);
  memset(m1, 0, 4 * n), memset(v1, 0, 4 * n);
  k->adamw(a, c, m1, v1, n, 0.1f, 0.9f, 0.95f, 1e-8f, 1e-3f, 1e-2f, 3.2f);
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    double g = c[i], m = 0.1 * g, v = 0.05 * g * g;
    double want = x[i] - (1e-3 * 0.1 * x[i] + 1e-2 * m / (sqrt(v) * 3.2 + 1e-8));
    double e = fabs(a[i] - want) / (1e-6 + 1e-6 * fabs(want));
    if (!(e <= worst)) worst = e;
  }
  CHECK(worst <= 1.0, "%s adamw vs double formula: worst ratio %.3g (atol=rtol=1e-6: fp32 rounding of ~10 ops)", k->name, worst);
  free(m1), free(v1), free(m2), free(v2);
  free(x), free(a), free(b), free(c), free(h1), free(h2);
}

// ---- B, C. attention ----
typedef struct {
  int Tq, Tk, Hq, Hkv, D;
  long qs, ks;
  int causal, bounds; // bounds: 0 none, 1 documents, 2 documents + window of 37
  int chunk64;        // force 64-row backward key chunks
} acase;

static double l2rel(const float *a, const double *b, long n) {
  double e = 0, r = 0;
  for (long i = 0; i < n; i++) e += (a[i] - b[i]) * (a[i] - b[i]), r += b[i] * b[i];
  return r > 0 ? sqrt(e / r) : sqrt(e);
}
// ||a - b|| / max(||b||, floor): relative L2 whose denominator cannot fall below floor
static double l2rel_floor(const float *a, const double *b, long n, double floor) {
  double e = 0, r = 0;
  for (long i = 0; i < n; i++) e += (a[i] - b[i]) * (a[i] - b[i]), r += b[i] * b[i];
  return sqrt(e) / fmax(sqrt(r), floor);
}
static long bits_differ(const float *a, const float *b, long n) {
  long d = 0;
  for (long i = 0; i < n; i++) d += memcmp(&a[i], &b[i], 4) != 0;
  return d;
}
static double l2norm(const double *x, long n) {
  double r = 0;
  for (long i = 0; i < n; i++) r += x[i] * x[i];
  return sqrt(r);
}
static double maxabs(const double *x, long n) {
  double m = 0;
  for (long i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
  return m;
}
static double maxabsf(const float *x, long n) {
  double m = 0;
  for (long i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
  return m;
}

// lo[i]: documents of 90 tokens (global positions), optionally a window of 37.
static int *make_bounds(const acase *c) {
  if (!c->bounds) return NULL;
  int *lo = malloc(sizeof(int) * (size_t)c->Tq);
  for (int i = 0; i < c->Tq; i++) {
    long p = c->qs + i, doc = p / 90 * 90;
    if (c->bounds == 2 && p - 36 > doc) doc = p - 36;
    lo[i] = (int)doc;
  }
  return lo;
}

// A case's shape (bf16: a bf16 pass; lo: its key bounds or NULL, the caller frees it) and
// random inputs q, k, v, dout drawn in that order (bf16: rounded to bf16 values).
static lc_attn_shape case_draw(const acase *c, lc_rng *r, int bf16, int **lo, float **q, float **k, float **v,
                               float **dout) {
  lc_attn_shape s = {c->Tq, c->Tk, c->Hq, c->Hkv, c->D, c->qs, c->ks, c->causal,
                     (float)(1.0 / sqrt((double)c->D)), NULL, bf16, NULL, 0, 0, 0};
  s.lo = *lo = make_bounds(c);
  const long nq = (long)c->Tq * c->Hq * c->D, nk = (long)c->Tk * c->Hkv * c->D;
  *q = lc_t_randn(r, nq, 1.0f), *k = lc_t_randn(r, nk, 1.0f), *v = lc_t_randn(r, nk, 1.0f), *dout = lc_t_randn(r, nq, 1.0f);
  if (bf16) lc_bf16_round(*q, nq), lc_bf16_round(*k, nk), lc_bf16_round(*v, nk), lc_bf16_round(*dout, nq);
  return s;
}

static void run_case(const acase *c, lc_rng *r, const lc_flash_variant *var, const lc_flash_variant *port, int bf16) {
  int *lo;
  float *q, *k, *v, *dout;
  const lc_attn_shape s = case_draw(c, r, bf16, &lo, &q, &k, &v, &dout);
  const long nq = (long)c->Tq * c->Hq * c->D, nk = (long)c->Tk * c->Hkv * c->D, nl = (long)c->Hq * c->Tq;
  double *ro = malloc(8 * nq), *rl = malloc(8 * nl), *rdq = malloc(8 * nq), *rdk = malloc(8 * nk), *rdv = malloc(8 * nk);
  ref_fwd(ro, rl, q, k, v, &s);
  ref_bwd(rdq, rdk, rdv, dout, q, k, v, &s);
  float *o = malloc(4 * nq), *l = malloc(4 * nl), *po = malloc(4 * nq), *pl = malloc(4 * nl), *dl = malloc(4 * nl);
  float *dq = calloc(nq, 4), *dk = calloc(nk, 4), *dv = calloc(nk, 4);
  char what[200];
  snprintf(what, sizeof what, "%s%s Tq=%d Tk=%d Hq=%d Hkv=%d D=%d q0=%ld k0=%ld causal=%d bounds=%d", var->name,
           bf16 ? "(bf16 pass)" : "", c->Tq, c->Tk, c->Hq, c->Hkv, c->D, c->qs, c->ks, c->causal, c->bounds);
  lc_flash_test_set_key_chunk(c->chunk64 ? 64 : 0);
  CHECK(var->fwd(o, l, q, k, v, &s, &A) == LC_OK, "%s: fwd failed", what);
  lc_attn_delta(dl, dout, o, c->Tq, c->Hq, c->D);
  CHECK(var->bwd(dq, dk, dv, dout, q, k, v, l, dl, &s, &A) == LC_OK, "%s: bwd failed", what);
  // LSE: -inf exactly where the reference has no key, else within 1e-5 relative
  long bad = 0;
  for (long i = 0; i < nl; i++)
    if (rl[i] == -INFINITY ? l[i] != -INFINITY : !(fabs(l[i] - rl[i]) <= 1e-5 * (1 + fabs(rl[i])))) bad++;
  CHECK(bad == 0, "%s: %ld LSE values off", what, bad);
  if (!bf16) {
    const double mo = maxabs(ro, nq), mb = fmax(maxabs(rdq, nq), fmax(maxabs(rdk, nk), maxabs(rdv, nk)));
    char w2[260];
    snprintf(w2, sizeof w2, "%s out", what);
    lc_t_close(w2, o, ro, nq, 1e-5 * mo, 1e-5);
    snprintf(w2, sizeof w2, "%s dq", what);
    lc_t_close(w2, dq, rdq, nq, 2e-5 * mb, 2e-5);
    snprintf(w2, sizeof w2, "%s dk", what);
    lc_t_close(w2, dk, rdk, nk, 2e-5 * mb, 2e-5);
    snprintf(w2, sizeof w2, "%s dv", what);
    lc_t_close(w2, dv, rdv, nk, 2e-5 * mb, 2e-5);
    // the same inputs through the portable level: equal to a few fp32 roundings
    CHECK(port->fwd(po, pl, q, k, v, &s, &A) == LC_OK, "%s: portable fwd failed", what);
    lc_t_close_ff("out vs portable", o, po, nq, 1e-5 * mo, 1e-5);
  } else {
    const double vmax = maxabsf(v, nk);
    double worst = 0;
    for (long i = 0; i < nq; i++) worst = fmax(worst, fabs(o[i] - ro[i]));
    CHECK(worst <= ldexp(vmax, -8), "%s: forward max error %.3g > 2^-8 max|v| = %.3g", what, worst, ldexp(vmax, -8));
    // dq and dk: relative to the reference, the denominator floored at 2^-8 / 1e-2 of the norm
    // of the magnitudes they sum (ref_bwd_mag): the check is error <= max(1e-2 ||ref||,
    // 2^-8 ||magnitudes||). Where dq, dk cancel to ~0 (one visible key: dS = 0 analytically)
    // the error is the bf16 rounding of P and dP, measured 6.5e-4 ||magnitudes|| (2^-8 leaves
    // 6x); elsewhere ||ref|| >= 0.07 ||magnitudes|| and the errors are ~1.5e-4 of them, so a
    // wrong index or a skipped tile (errors of order ||ref||) still fails.
    double *mdq = malloc(8 * nq), *mdk = malloc(8 * nk);
    ref_bwd_mag(mdq, mdk, dout, q, k, v, &s);
    const double fq = ldexp(l2norm(mdq, nq), -8) / 1e-2, fk = ldexp(l2norm(mdk, nk), -8) / 1e-2;
    free(mdq), free(mdk);
    double eo = l2rel(o, ro, nq), eq = l2rel_floor(dq, rdq, nq, fq), ek = l2rel_floor(dk, rdk, nk, fk), ev = l2rel(dv, rdv, nk);
    CHECK(eo <= 1e-2 && eq <= 1e-2 && ek <= 1e-2 && ev <= 1e-2,
          "%s: relative L2 errors out %.3g dq %.3g dk %.3g dv %.3g (bound 1e-2; dq, dk floored)", what, eo, eq, ek, ev);
    // k/v packed once outside the call (what the ring does for its query tiles): the same
    // bits, and the call's workspace shrinks by exactly the packed bytes.
    for (int bwd = 0; bwd <= 1; bwd++) {
      lc_attn_shape sp = s;
      const size_t pb = var->kv_bytes(&s, bwd);
      void *pk = malloc(pb ? pb : 1);
      var->kv_pack(pk, k, v, &s, bwd);
      sp.kv_pack = pk;
      CHECK(pb > 0 && var->ws(&sp, bwd, 0) + pb == var->ws(&s, bwd, 0), "%s: packed k/v bytes %zu + workspace %zu != %zu",
            what, pb, var->ws(&sp, bwd, 0), var->ws(&s, bwd, 0));
      if (!bwd) {
        CHECK(var->fwd(po, pl, q, k, v, &sp, &A) == LC_OK, "%s: fwd with packed k/v", what);
        CHECK(!memcmp(po, o, 4 * nq) && !memcmp(pl, l, 4 * nl), "%s: fwd with packed k/v differs", what);
      } else {
        float *dq2 = calloc(nq, 4), *dk2 = calloc(nk, 4), *dv2 = calloc(nk, 4);
        CHECK(var->bwd(dq2, dk2, dv2, dout, q, k, v, l, dl, &sp, &A) == LC_OK, "%s: bwd with packed k/v", what);
        CHECK(!memcmp(dq2, dq, 4 * nq) && !memcmp(dk2, dk, 4 * nk) && !memcmp(dv2, dv, 4 * nk),
              "%s: bwd with packed k/v differs", what);
        free(dq2), free(dk2), free(dv2);
      }
      free(pk);
    }
    static double seen;
    if (fmax(fmax(eo, eq), fmax(ek, ev)) > seen) {
      seen = fmax(fmax(eo, eq), fmax(ek, ev));
      printf("bf16 attention: worst relative L2 error so far %.2e (%s)\n", seen, what);
    }
  }
  lc_flash_test_set_key_chunk(0);
  free(q), free(k), free(v), free(dout), free(ro), free(rl), free(rdq), free(rdk), free(rdv);
  free(o), free(l), free(po), free(pl), free(dl), free(dq), free(dk), free(dv), free(lo);
}

// bf16 products, split keys: attention over [0, Tk) in one call equals the merge of calls
// over [0, a) and [a, Tk) to fp32 rounding (1e-5 of the largest value), not only to bf16's
// 2^-9: the kernel's softmax reference is an integer, so the split scales P by powers of 2
// (flash_prims_avx512.h). This is what makes every ring layout give one process's numbers.
static void test_bf16_split(const lc_flash_variant *var, lc_rng *r) {
  const int Tq = 150, Tk = 300, Hq = 4, Hkv = 2, D = 64, a = 131;
  lc_attn_shape s = {Tq, Tk, Hq, Hkv, D, 150, 0, 1, 0.125f, NULL, 1, NULL, 0, 0, 0};
  const long nq = (long)Tq * Hq * D, nk = (long)Tk * Hkv * D, nl = (long)Hq * Tq;
  float *q = lc_t_randn(r, nq, 2.0f), *k = lc_t_randn(r, nk, 2.0f), *v = lc_t_randn(r, nk, 1.0f);
  lc_bf16_round(q, nq), lc_bf16_round(k, nk), lc_bf16_round(v, nk);
  float *o = malloc(4 * nq), *l = malloc(4 * nl), *o2 = malloc(4 * nq), *l2 = malloc(4 * nl);
  double *ow = malloc(8 * nq);
  CHECK(var->fwd(o, l, q, k, v, &s, &A) == LC_OK, "split: one call");
  lc_attn_shape s1 = s, s2 = s;
  s1.Tk = a, s2.Tk = Tk - a, s2.k_start = a;
  CHECK(var->fwd(o2, l2, q, k, v, &s1, &A) == LC_OK, "split: first keys");
  float *o3 = malloc(4 * nq), *l3 = malloc(4 * nl);
  CHECK(var->fwd(o3, l3, q, k + (long)a * Hkv * D, v + (long)a * Hkv * D, &s2, &A) == LC_OK, "split: last keys");
  lc_attn_merge(o2, l2, o3, l3, Tq, Hq, D);
  for (long i = 0; i < nq; i++) ow[i] = o[i];
  char what[96];
  snprintf(what, sizeof what, "%s attention split at 131 keys vs one call", var->name);
  lc_t_close(what, o2, ow, nq, 1e-5 * maxabs(ow, nq), 1e-5);
  free(q), free(k), free(v), free(o), free(l), free(o2), free(l2), free(o3), free(l3), free(ow);
}

// D. 2-byte inputs (q16: q and dout; kv16: k and v; lc_attn_shape): every variant a bf16
//    pass runs (the fp32 kernel below the bf16 level) must give the BITS it gives on fp32
//    arrays holding the same bf16 values (widening is exact and the arithmetic the same),
//    forward and backward, with k/v packed per call and (bf16 kernel) once outside it; its
//    arena peak must be the workspace it reports, and the workspace grows by at most the
//    per-thread widened blocks (no copy of the call's inputs).
static void run_in16(const acase *c, lc_rng *r, const lc_flash_variant *var) {
  int *lo;
  float *q, *k, *v, *dout;
  lc_attn_shape s = case_draw(c, r, 1, &lo, &q, &k, &v, &dout);
  const long nq = (long)c->Tq * c->Hq * c->D, nk = (long)c->Tk * c->Hkv * c->D, nl = (long)c->Hq * c->Tq;
  uint16_t *q16 = malloc(2 * nq), *k16 = malloc(2 * nk), *v16 = malloc(2 * nk), *d16 = malloc(2 * nq);
  lc_bf16_pack(q16, q, nq), lc_bf16_pack(k16, k, nk), lc_bf16_pack(v16, v, nk), lc_bf16_pack(d16, dout, nq);
  float *o = malloc(4 * nq), *l = malloc(4 * nl), *dl = malloc(4 * nl), *dl16 = malloc(4 * nl);
  float *dq = calloc(nq, 4), *dk = calloc(nk, 4), *dv = calloc(nk, 4);
  float *o2 = malloc(4 * nq), *l2 = malloc(4 * nl), *dq2 = malloc(4 * nq), *dk2 = malloc(4 * nk), *dv2 = malloc(4 * nk);
  char what[200];
  snprintf(what, sizeof what, "%s 2-byte inputs Tq=%d Tk=%d Hq=%d Hkv=%d D=%d q0=%ld k0=%ld causal=%d bounds=%d",
           var->name, c->Tq, c->Tk, c->Hq, c->Hkv, c->D, c->qs, c->ks, c->causal, c->bounds);
  lc_flash_test_set_key_chunk(c->chunk64 ? 64 : 0);
  CHECK(var->fwd(o, l, q, k, v, &s, &A) == LC_OK, "%s: fp32 fwd", what);
  lc_attn_delta(dl, dout, o, c->Tq, c->Hq, c->D);
  uint16_t *o16 = malloc(2 * nq);
  lc_bf16_pack(o16, o, nq); // delta16 reads 2-byte out: compare with delta on the same rounded values
  float *orn = malloc(4 * nq);
  lc_bf16_unpack(orn, o16, nq);
  lc_attn_delta(dl16, dout, orn, c->Tq, c->Hq, c->D);
  lc_attn_delta16(dl, d16, o16, c->Tq, c->Hq, c->D);
  CHECK(!memcmp(dl, dl16, 4 * nl), "%s: lc_attn_delta16 differs from lc_attn_delta on the widened values", what);
  CHECK(var->bwd(dq, dk, dv, dout, q, k, v, l, dl, &s, &A) == LC_OK, "%s: fp32 bwd", what);
  for (int m = 1; m <= 3; m++) { // q16, kv16, both
    lc_attn_shape s16 = s;
    s16.q16 = m & 1, s16.kv16 = (m >> 1) & 1;
    const void *qi = s16.q16 ? (const void *)q16 : q, *di = s16.q16 ? (const void *)d16 : dout;
    const void *ki = s16.kv16 ? (const void *)k16 : k, *vi = s16.kv16 ? (const void *)v16 : v;
    for (int bwd = 0; bwd <= 1; bwd++) {
      const size_t ws = var->ws(&s16, bwd, 0), ws1 = var->ws(&s16, bwd, 1), ws32 = var->ws(&s, bwd, 1);
      const size_t blocks = 4 * 4 * (((size_t)64 * c->D + 15) / 16 * 16); // one thread: <= 4 blocks of 64 x D floats
      CHECK(ws1 >= ws32 && ws1 <= ws32 + blocks, "%s q16=%d kv16=%d: one thread's workspace %zu vs fp32 %zu (+ at most %zu of blocks)",
            what, s16.q16, s16.kv16, ws1, ws32, blocks);
      lc_arena_reset_peaks(&A);
      if (!bwd) {
        CHECK(var->fwd(o2, l2, qi, ki, vi, &s16, &A) == LC_OK, "%s: fwd q16=%d kv16=%d", what, s16.q16, s16.kv16);
        CHECK(!memcmp(o2, o, 4 * nq) && !memcmp(l2, l, 4 * nl), "%s: fwd q16=%d kv16=%d differs from fp32 inputs", what,
              s16.q16, s16.kv16);
      } else {
        memset(dq2, 0, 4 * nq), memset(dk2, 0, 4 * nk), memset(dv2, 0, 4 * nk);
        CHECK(var->bwd(dq2, dk2, dv2, di, qi, ki, vi, l, dl, &s16, &A) == LC_OK, "%s: bwd q16=%d kv16=%d", what,
              s16.q16, s16.kv16);
        CHECK(!memcmp(dq2, dq, 4 * nq) && !memcmp(dk2, dk, 4 * nk) && !memcmp(dv2, dv, 4 * nk),
              "%s: bwd q16=%d kv16=%d differs from fp32 inputs", what, s16.q16, s16.kv16);
      }
      CHECK(A.peak[LC_MEM_SCRATCH] == ws, "%s %s q16=%d kv16=%d: arena peak %zu != workspace %zu", what,
            bwd ? "bwd" : "fwd", s16.q16, s16.kv16, A.peak[LC_MEM_SCRATCH], ws);
      // k/v packed once outside the call, from 2 bytes (kernels that pack: the bf16 one)
      const size_t pb = var->kv_bytes(&s16, bwd);
      if (pb && s16.kv16) {
        void *pk = malloc(pb), *pk32 = malloc(pb);
        var->kv_pack(pk, k16, v16, &s16, bwd);
        var->kv_pack(pk32, k, v, &s, bwd);
        CHECK(!memcmp(pk, pk32, pb), "%s: k/v packed from 2 bytes differ (bwd %d)", what, bwd);
        free(pk), free(pk32);
      }
    }
  }
  // out16: the output written in 2 bytes is exactly the fp32 output rounded (with 2-byte
  // inputs too), and the workspace is the arena's peak.
  for (int in = 0; in <= 1; in++) {
    lc_attn_shape so = s;
    so.out16 = 1, so.q16 = so.kv16 = in;
    uint16_t *o16b = malloc(2 * nq);
    lc_arena_reset_peaks(&A);
    CHECK(var->fwd(o16b, l2, in ? (const void *)q16 : q, in ? (const void *)k16 : k, in ? (const void *)v16 : v, &so, &A) ==
              LC_OK, "%s: fwd out16 (2-byte inputs %d)", what, in);
    CHECK(!memcmp(o16b, o16, 2 * nq) && !memcmp(l2, l, 4 * nl), "%s: 2-byte output (2-byte inputs %d) is not the fp32 one rounded",
          what, in);
    CHECK(A.peak[LC_MEM_SCRATCH] == var->ws(&so, 0, 0), "%s out16: arena peak %zu != workspace %zu", what,
          A.peak[LC_MEM_SCRATCH], var->ws(&so, 0, 0));
    free(o16b);
  }
  lc_attn_shape bad = s;
  bad.bf16 = 0, bad.q16 = 1;
  CHECK(var->fwd(o2, l2, q16, k, v, &bad, &A) == LC_EINVAL, "%s: q16 without bf16 must be refused", what);
  lc_flash_test_set_key_chunk(0);
  free(q), free(k), free(v), free(dout), free(q16), free(k16), free(v16), free(d16), free(o16), free(orn);
  free(o), free(l), free(dl), free(dl16), free(dq), free(dk), free(dv), free(o2), free(l2), free(dq2), free(dk2), free(dv2);
  free(lo);
}

static const acase cases[] = {
    {1, 1, 2, 1, 16, 0, 0, 1, 0, 0},          // one row, one key
    {33, 33, 4, 2, 64, 0, 0, 1, 0, 0},        // one partial block
    {130, 130, 4, 2, 64, 0, 0, 1, 0, 1},      // three blocks, forced key chunks
    {200, 300, 6, 2, 40, 100, 0, 1, 0, 1},    // offsets (q after k), odd-ish D
    {77, 141, 3, 3, 33, 0, 64, 0, 0, 0},      // non-causal, odd D, odd Tk
    {150, 150, 4, 1, 80, 500, 500, 1, 1, 1},  // documents, MQA, D > 64
    {190, 257, 2, 2, 64, 67, 0, 1, 2, 1},     // documents + window, odd Tk
    {64, 333, 8, 4, 128, 269, 0, 1, 0, 0},    // many key tiles, D = 128
    {100, 120, 4, 2, 64, 0, 50, 1, 0, 1},     // keys after the first 50 queries: empty rows
};

// E. The AMX tile kernel (backend/cpu/flash/flash_amx.h): every check the bf16 kernel passes
//    above (C: the double reference with the bf16 bounds, k/v packed outside the call, the
//    split over two key ranges; D: 2-byte inputs and output to the bit, workspace = arena
//    peak), on every shape. Run twice where possible: with the real tiles where the CPU has
//    AMX-BF16 (and Linux grants the tile state), and everywhere AVX512_BF16 runs with the
//    emulated tiles (flash_tile.h: TDPBF16PS's semantics in C/AVX-512; the same kernel source),
//    which must also never touch a tile on a thread that did not load a tile configuration.
// The emulated TDPBF16PS (flash_tile.h, vectorised) against the Intel SDM's pseudo-code for
// the instruction written out in scalar C (Vol. 2C, TDPBF16PS, Operation): per (m, n) an even
// and an odd fp32 sum, each advanced by fused multiply-adds over the pairs k = 0..15 in
// order, inputs and every result with denormals flushed to zero (signed), then c += even +
// odd. Bits must agree, on values that include denormal inputs, products and sums that fall
// into the denormal range, zeros of both signs and large values; and on normal values the
// result must be the double dot product to fp32 rounding (an independent check of the pair
// layout: a row m, pair k times b pair row k, column n).
static float ftz(float x) { return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x; }
static float bf_at(uint32_t w, int hi) {
  uint32_t u = hi ? (w & 0xffff0000u) : (w << 16);
  float f;
  memcpy(&f, &u, 4);
  return ftz(f);
}
static float rnd(lc_rng *r, float sd) {
  float x;
  lc_rng_fill_normal(r, &x, 1, sd);
  return x;
}
static uint32_t bf_bits(float x) { // x rounded to bf16 (nearest even), in the low half
  uint32_t u;
  memcpy(&u, &x, 4);
  return (u + 0x7fffu + ((u >> 16) & 1)) >> 16;
}
// hw: also run each trial on the real tiles (AMX granted), which must give the emulation's bits
static void test_tdpbf16ps_emulation(lc_rng *r, int hw) {
  uint32_t a[256], b[256];
  float c[256], want[256];
  long bad = 0, hwbad = 0;
  double worst = 0;
  for (int trial = 0; trial < 200; trial++) {
    // trials: 0 normal values; 1 mixed with denormals, tiny values (~2^-67) and signed zeros;
    // 2 underflow: every a and most b tiny, so products and whole sums fall below 2^-126
    const int special = trial % 3, under = special == 2;
    for (int i = 0; i < 256; i++) {
      uint32_t h[2];
      for (int j = 0; j < 2; j++) {
        float x = rnd(r, 1.0f);
        h[j] = bf_bits(x);
        if (special) {
          const uint32_t pick = (uint32_t)(fabsf(x) * 1000.0f) % 6u, sign = x < 0 ? 0x8000u : 0u;
          if (under) h[j] = sign | (0x1e00u + (h[j] & 0x7fu));
          else if (pick == 0) h[j] = sign | (1u + ((uint32_t)(fabsf(x) * 7e4f) % 127u)); // bf16 denormal
          else if (pick == 1) h[j] = sign | (0x1e00u + (h[j] & 0x7fu));             // ~2^-67: products ~2^-134
          else if (pick == 2) h[j] = sign;                                         // +-0
        }
      }
      a[i] = h[0] | (h[1] << 16);
      memcpy(&b[i], &a[i], 4);
      for (int j = 0; j < 2; j++) {
        float y = rnd(r, 4.0f);
        h[j] = bf_bits(y);
        if (special && (under ? (i + j) % 4 != 0 : (i + j) % 5 == 0)) h[j] = (h[j] & 0x8000u) | (0x1e00u + (h[j] & 0x7fu));
      }
      b[i] = h[0] | (h[1] << 16);
      c[i] = under ? (i % 3 ? 0.0f : ldexpf(1.0f, -130) * (i % 2 ? -1.0f : 1.0f))
             : special && i % 7 == 0 ? ldexpf(1.0f, -130) * (i % 2 ? -1.0f : 1.0f) : rnd(r, 1.0f);
    }
    for (int m = 0; m < 16; m++)
      for (int n = 0; n < 16; n++) {
        float e = 0.0f, o = 0.0f;
        double d = ftz(c[m * 16 + n]);
        for (int k = 0; k < 16; k++) {
          e = ftz(fmaf(bf_at(a[m * 16 + k], 0), bf_at(b[k * 16 + n], 0), e));
          o = ftz(fmaf(bf_at(a[m * 16 + k], 1), bf_at(b[k * 16 + n], 1), o));
          d += (double)bf_at(a[m * 16 + k], 0) * bf_at(b[k * 16 + n], 0) +
               (double)bf_at(a[m * 16 + k], 1) * bf_at(b[k * 16 + n], 1);
        }
        want[m * 16 + n] = ftz(ftz(c[m * 16 + n]) + ftz(e + o));
        if (!special) {
          double mag = fabs(c[m * 16 + n]);
          for (int k = 0; k < 16; k++)
            mag += fabs((double)bf_at(a[m * 16 + k], 0) * bf_at(b[k * 16 + n], 0)) +
                   fabs((double)bf_at(a[m * 16 + k], 1) * bf_at(b[k * 16 + n], 1));
          worst = fmax(worst, fabs(want[m * 16 + n] - d) / (mag * ldexp(1.0, -24) * 34)); // 34 fp32 roundings
        }
      }
    float ch[256];
    memcpy(ch, c, sizeof ch);
    lc_flash_tdpbf16ps_amx_emu(c, a, b);
    for (int i = 0; i < 256; i++) bad += memcmp(&c[i], &want[i], 4) != 0;
    if (hw) {
      lc_flash_tdpbf16ps_amx(ch, a, b);
      for (int i = 0; i < 256; i++) hwbad += memcmp(&ch[i], &c[i], 4) != 0;
    }
  }
  if (hw) CHECK(hwbad == 0, "real TDPBF16PS: %ld of 51200 results differ from the emulation's bits", hwbad);
  else printf("skip: the real TDPBF16PS not compared with its emulation: no AMX tiles granted here\n");
  CHECK(bad == 0, "emulated TDPBF16PS: %ld of 51200 results differ from the SDM pseudo-code in scalar C", bad);
  CHECK(worst <= 1.0, "emulated TDPBF16PS vs the double dot product: %.3g of the fp32 bound (34 roundings)", worst);
}

// The real amx kernel against the emulated one on the same inputs (every shape class, a bf16
// pass, 2-byte inputs where the shape class allows): forward output, LSE, dq, dk, dv must be
// the same bits, since each tile instruction is (test_tdpbf16ps_emulation) and the kernel
// source, blocking and thread split are shared. Where they differ, the emulation does not
// stand for the hardware and its tests prove less than they claim.
static void test_amx_hw_vs_emu(lc_rng *r) {
  const lc_flash_variant *hw = lc_flash_variant_for(LC_KERN_AMX, 1), *em = lc_flash_variant_amx_emu();
  long differ = 0, total = 0;
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const acase *c = &cases[ci];
    int *lo;
    float *q, *k, *v, *dout;
    const lc_attn_shape s = case_draw(c, r, 1, &lo, &q, &k, &v, &dout);
    const long nq = (long)c->Tq * c->Hq * c->D, nk = (long)c->Tk * c->Hkv * c->D, nl = (long)c->Hq * c->Tq;
    float *o[2], *l[2], *dq[2], *dk[2], *dv[2], *dl = malloc(4 * nl);
    lc_flash_test_set_key_chunk(c->chunk64 ? 64 : 0);
    for (int w = 0; w < 2; w++) {
      const lc_flash_variant *var = w ? em : hw;
      o[w] = malloc(4 * nq), l[w] = malloc(4 * nl);
      dq[w] = calloc(nq, 4), dk[w] = calloc(nk, 4), dv[w] = calloc(nk, 4);
      CHECK(var->fwd(o[w], l[w], q, k, v, &s, &A) == LC_OK, "%s fwd", var->name);
      lc_attn_delta(dl, dout, o[0], c->Tq, c->Hq, c->D); // the same delta for both
      CHECK(var->bwd(dq[w], dk[w], dv[w], dout, q, k, v, l[0], dl, &s, &A) == LC_OK, "%s bwd", var->name);
    }
    lc_flash_test_set_key_chunk(0);
    const struct { float **x; long n; } arr[] = {{o, nq}, {l, nl}, {dq, nq}, {dk, nk}, {dv, nk}};
    long d0 = differ;
    for (int a = 0; a < 5; a++) {
      differ += bits_differ(arr[a].x[0], arr[a].x[1], arr[a].n);
      total += arr[a].n;
    }
    CHECK(differ == d0, "amx vs amx-emulated, case %zu (Tq=%d Tk=%d D=%d): %ld values differ in bits", ci, c->Tq,
          c->Tk, c->D, differ - d0);
    for (int w = 0; w < 2; w++) free(o[w]), free(l[w]), free(dq[w]), free(dk[w]), free(dv[w]);
    free(q), free(k), free(v), free(dout), free(dl), free(lo);
  }
  printf("amx kernel vs its emulation: %ld of %ld values differ in bits (%zu shapes, fwd + bwd)\n", differ, total,
         sizeof cases / sizeof cases[0]);
}

static void test_amx_kernel(const lc_flash_variant *var, lc_rng *r) {
  const long faults0 = lc_flash_amx_emu_faults;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_in16(&cases[i], r, var);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], r, var, NULL, 1);
  test_bf16_split(var, r);
  CHECK(lc_flash_amx_emu_faults == faults0, "%s: %ld tile instructions on a thread without a tile configuration",
        var->name, lc_flash_amx_emu_faults - faults0);
  printf("%s attention kernel: %zu shapes checked (forward, backward, 2-byte inputs/output, split keys)\n", var->name,
         sizeof cases / sizeof cases[0]);
}

int main(void) {
  lc_arena_init(&A, 0);
  lc_cpu_detect(&cpu);
  lc_rng r;
  lc_rng_seed(&r, 20261201);
  printf("CPU %s: AVX2 %d, AVX-512F %d, AVX512_BF16 %d, AMX-BF16 %d\n", cpu.model, cpu.avx2, cpu.avx512f,
         cpu.avx512_bf16, cpu.amx_bf16);
  const lc_kernels *port = lc_kern_table(LC_KERN_PORTABLE);
  const lc_flash_variant *pv = lc_flash_variant_for(LC_KERN_PORTABLE, 0);
  for (int L = 0; L < LC_KERN_LEVELS; L++) {
    if (!lc_kern_supported((lc_kern_level)L, &cpu)) {
      printf("skip: level %s not run: this CPU lacks its instruction set (compiled, not tested here)\n",
             lc_kern_name((lc_kern_level)L));
      continue;
    }
    const lc_kernels *k = lc_kern_table((lc_kern_level)L);
    CHECK(k->level == L && !strcmp(k->name, lc_kern_name((lc_kern_level)L)), "table of level %d names itself %s", L, k->name);
    test_elementwise_level(k, port, &r);
    for (int bf16 = 0; bf16 <= 1; bf16++) {
      const lc_flash_variant *var = lc_flash_variant_for((lc_kern_level)L, bf16);
      if (bf16 && !(L == LC_KERN_AMX)) // the kernel a bf16 pass runs, on 2-byte inputs
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_in16(&cases[i], &r, var);
      if (bf16 && L < LC_KERN_BF16) { // a bf16 pass below the bf16 level runs the fp32 kernel
        CHECK(var == lc_flash_variant_for((lc_kern_level)L, 0), "level %s: bf16 pass must use the fp32 kernel", k->name);
        continue;
      }
      if (L == LC_KERN_AMX && bf16) { // the AMX tile kernel, or the bf16 one where Linux refused the tiles
        if (lc_flash_amx_ready()) {
          CHECK(!strcmp(var->name, "amx"), "level amx, tiles granted: a bf16 pass runs %s", var->name);
          test_amx_kernel(var, &r);
        } else {
          CHECK(var == lc_flash_variant_for(LC_KERN_BF16, 1), "level amx without tiles: a bf16 pass must run the bf16 kernel");
          printf("skip: the real AMX attention kernel not run: Linux refused the AMX tile state\n");
        }
        continue;
      }
      for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], &r, var, pv, bf16);
      if (bf16) test_bf16_split(var, &r);
    }
  }
  if (!cpu.amx_bf16) printf("skip: the real AMX attention kernel not run: no AMX-BF16 on this CPU (%s)\n", cpu.model);
  if (cpu.avx512_bf16) {
    // (the TDPBF16PS checks and the hardware-vs-emulation comparison draw from their own
    // random stream, so the attention shapes draw what they drew before these existed)
    lc_rng re;
    lc_rng_seed(&re, 20261206);
    test_tdpbf16ps_emulation(&re, cpu.amx_bf16 && lc_flash_amx_ready());
    test_amx_kernel(lc_flash_variant_amx_emu(), &r);
    if (cpu.amx_bf16 && lc_flash_amx_ready()) test_amx_hw_vs_emu(&re);
    else printf("skip: the real amx kernel not compared with its emulation: no AMX tiles granted here\n");
  }
  else printf("skip: the emulated AMX attention kernel not run: no AVX512_BF16 on this CPU (%s)\n", cpu.model);
  // the dispatch follows lc_kern_select
  lc_kern_level best = lc_kern_best(&cpu);
  CHECK(lc_kern_select(LC_KERN_PORTABLE) == LC_OK && lc_kern()->level == LC_KERN_PORTABLE, "select portable");
  lc_attn_shape s = {1, 1, 1, 1, 16, 0, 0, 1, 0.25f, NULL, 1, NULL, 0, 0, 0};
  CHECK(!strcmp(lc_flash_variant_name(&s), "portable"), "portable level runs %s", lc_flash_variant_name(&s));
  CHECK(lc_kern_select(LC_KERN_AUTO) == LC_OK && lc_kern()->level == best, "auto selects the best level");
  if (best >= LC_KERN_BF16) {
    // the best level's bf16 pass: the amx kernel where Linux grants the tiles, else bf16
    const char *want = best == LC_KERN_AMX && lc_flash_amx_ready() ? "amx" : "bf16";
    CHECK(!strcmp(lc_flash_variant_name(&s), want), "bf16 pass at the best level runs %s, want %s",
          lc_flash_variant_name(&s), want);
  }
  for (int L = 0; L < LC_KERN_LEVELS; L++)
    if (!lc_kern_supported((lc_kern_level)L, &cpu))
      CHECK(lc_kern_select((lc_kern_level)L) == LC_EINVAL && lc_kern()->level == best, "unsupported level %d refused", L);
  lc_kern_level parsed;
  CHECK(lc_kern_parse("avx512", &parsed) == LC_OK && parsed == LC_KERN_AVX512, "parse avx512");
  CHECK(lc_kern_parse("sse9", &parsed) == LC_EINVAL, "parse rejects sse9");
  return lc_test_finish("test_kernels");
}
