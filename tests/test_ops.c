// Tests of the CPU operators (src/ops): every forward against a straightforward double
// reference, every backward against central finite differences (FD) of a scalar loss, the
// += semantics of the accumulating backwards, and the threaded paths at larger shapes.
//
// FD method. For the scalar L(x) = sum(dout * fwd(x)) (cross-entropy: its returned loss),
// L is computed in DOUBLE from the float forward outputs, and
//   fd_i = (L(x + h e_i) - L(x - h e_i)) / (xp - xm)
// where xp, xm are the actually representable perturbed floats (so the float rounding of
// x +- h does not enter). Errors: truncation O(h^2 f''') (zero for the linear ops: matmul,
// rope, embedding) and rounding O(eps_f * |outputs touched by x_i| / h), eps_f = 6e-8.
//  - linear ops: h = 0.1 (exact up to rounding; noise ~ 6e-8*|out|*sqrt(N)/0.2 ~ 1e-5 rel),
//    tolerance rtol 1e-3 + atol 1e-4 * max|grad|.
//  - nonlinear ops (rmsnorm, swiglu): h = 1e-2, truncation ~1.7e-5*|f'''|, rounding
//    ~6e-8*O(10)/2e-2 ~ 3e-5; tolerance rtol 3e-3 + atol 1e-3 * max|grad|.
//  - cross-entropy: the loss carries the exp polynomial's <= 8.2e-8 relative error, which does
//    not cancel between L(x+h) and L(x-h); with h = 5e-2 that is <~1e-6 absolute noise while
//    truncation is ~h^2/6 * p ~ 4e-4 relative; tolerance rtol 5e-3 + atol 2e-5 * max|grad|.
// A wrong term (e.g. RMSNorm's -x r^3 <dy w, x>/C, ~10% of the gradient at C = 64, or a
// transposed product) is far outside these tolerances.
// Forward vs double references: float kernels round each op once (rel ~1e-7 per op), so
// rtol ~1e-5 with a small atol for cancellation in sums (stated per check).
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fpenv.h"
#include "backend/cpu/ops/ops.h"
#include "core/rope.h"
#include "testutil.h"

static int verbose;
static lc_rng rng;

static void note(const char *what, double worst) {
  if (verbose) printf("  %-48s worst ratio %.3g\n", what, worst);
}

static double maxabs(const double *a, long n) {
  double m = 0;
  for (long i = 0; i < n; i++) m = fabs(a[i]) > m ? fabs(a[i]) : m;
  return m;
}

static double dotd(const float *a, const float *b, long n) {
  double s = 0;
  for (long i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
  return s;
}

static float *fcopy(const float *a, long n) {
  float *b = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  memcpy(b, a, sizeof(float) * (size_t)n);
  return b;
}

static float *fconst(long n, float v) {
  float *b = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  for (long i = 0; i < n; i++) b[i] = v;
  return b;
}

static double *dalloc(long n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(double)); }

typedef double (*lossfn)(void *ctx);

// Central differences of f w.r.t. every element of x (see the header comment).
static void fd_grad(lossfn f, void *ctx, float *x, long n, double h, double *g) {
  for (long i = 0; i < n; i++) {
    const float x0 = x[i];
    const float xp = (float)((double)x0 + h), xm = (float)((double)x0 - h);
    x[i] = xp;
    const double lp = f(ctx);
    x[i] = xm;
    const double lm = f(ctx);
    x[i] = x0;
    g[i] = (lp - lm) / ((double)xp - (double)xm);
  }
}

// Analytic gradient vs FD: |got - fd| <= atolfrac * max|fd| + rtol * |fd|.
static void check_fd(const char *what, const float *got, const double *fd, long n, double rtol,
                     double atolfrac) {
  double atol = atolfrac * maxabs(fd, n);
  if (atol == 0) atol = 1e-12;
  note(what, lc_t_close(what, got, fd, n, atol, rtol));
}

// After an accumulating backward: got == pre + grad (float add: rel ~1e-7 of the result).
static void check_acc(const char *what, const float *got, const float *pre, const float *grad,
                      long n, double atol, double rtol) {
  double *want = dalloc(n);
  for (long i = 0; i < n; i++) want[i] = (double)pre[i] + (double)grad[i];
  note(what, lc_t_close(what, got, want, n, atol, rtol));
  free(want);
}

// ---------------------------------------------------------------- matmul
typedef struct {
  float *inp, *w, *dout, *out;
  int T, K, N;
} mm_ctx;

static double mm_loss(void *p) {
  mm_ctx *c = p;
  lc_matmul_fwd(NULL, c->out, LC_DT_F32, lc_act_f32(c->inp), lc_act_f32(c->w), c->T, c->K, c->N);
  return dotd(c->dout, c->out, (long)c->T * c->N);
}

static void test_matmul(int T, int K, int N, int do_fd) {
  char what[128];
  const long nI = (long)T * K, nW = (long)N * K, nO = (long)T * N;
  mm_ctx c = {lc_t_randn(&rng, nI, 1), lc_t_randn(&rng, nW, 1), lc_t_randn(&rng, nO, 1),
              fconst(nO, NAN), T, K, N};
  // forward vs triple loop in double. Float sgemm error <= ~K*eps*sum|a b| (bound), so
  // atol scales with sqrt(K) (typical |out| ~ sqrt(K)).
  lc_matmul_fwd(NULL, c.out, LC_DT_F32, lc_act_f32(c.inp), lc_act_f32(c.w), T, K, N);
  double *ref = dalloc(nO);
  for (int t = 0; t < T; t++)
    for (int n = 0; n < N; n++) {
      double s = 0;
      for (int k = 0; k < K; k++) s += (double)c.inp[t * K + k] * c.w[n * K + k];
      ref[t * N + n] = s;
    }
  snprintf(what, sizeof what, "matmul fwd T=%d K=%d N=%d", T, K, N);
  note(what, lc_t_close(what, c.out, ref, nO, 1e-6 * sqrt((double)K), 1e-5));

  // backward: dinp with accumulate=0 must overwrite (pre-filled with NaN), dw from zero
  float *dinp = fconst(nI, NAN), *dw = fconst(nW, 0);
  lc_matmul_bwd(NULL, dinp, dw, lc_act_f32(c.dout), lc_act_f32(c.inp), lc_act_f32(c.w), T, K, N, 0);
  if (do_fd) {
    double *g = dalloc(nI > nW ? nI : nW);
    fd_grad(mm_loss, &c, c.inp, nI, 0.1, g);
    snprintf(what, sizeof what, "matmul dinp vs FD T=%d K=%d N=%d", T, K, N);
    check_fd(what, dinp, g, nI, 1e-3, 1e-4);
    fd_grad(mm_loss, &c, c.w, nW, 0.1, g);
    snprintf(what, sizeof what, "matmul dw vs FD T=%d K=%d N=%d", T, K, N);
    check_fd(what, dw, g, nW, 1e-3, 1e-4);
    free(g);
  } else { // large shapes: against the double products (same tolerance as forward)
    double *gi = dalloc(nI), *gw = dalloc(nW);
    for (int t = 0; t < T; t++)
      for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
          gi[t * K + k] += (double)c.dout[t * N + n] * c.w[n * K + k];
          gw[n * K + k] += (double)c.dout[t * N + n] * c.inp[t * K + k];
        }
    snprintf(what, sizeof what, "matmul dinp vs double T=%d K=%d N=%d", T, K, N);
    note(what, lc_t_close(what, dinp, gi, nI, 1e-6 * sqrt((double)N), 1e-5));
    snprintf(what, sizeof what, "matmul dw vs double T=%d K=%d N=%d", T, K, N);
    note(what, lc_t_close(what, dw, gw, nW, 1e-6 * sqrt((double)T), 1e-5));
    free(gi);
    free(gw);
  }
  // += semantics: dinp with accumulate=1 and dw always add to random pre-filled values
  float *pi = lc_t_randn(&rng, nI, 1), *pw = lc_t_randn(&rng, nW, 1);
  float *ai = fcopy(pi, nI), *aw = fcopy(pw, nW);
  lc_matmul_bwd(NULL, ai, aw, lc_act_f32(c.dout), lc_act_f32(c.inp), lc_act_f32(c.w), T, K, N, 1);
  snprintf(what, sizeof what, "matmul dinp accumulate T=%d K=%d N=%d", T, K, N);
  check_acc(what, ai, pi, dinp, nI, 1e-5, 1e-5);
  snprintf(what, sizeof what, "matmul dw accumulate T=%d K=%d N=%d", T, K, N);
  check_acc(what, aw, pw, dw, nW, 1e-5, 1e-5);
  // NULL skips that product and leaves the other unchanged
  float *bi = fconst(nI, NAN), *bw = fconst(nW, 0);
  lc_matmul_bwd(NULL, bi, NULL, lc_act_f32(c.dout), lc_act_f32(c.inp), lc_act_f32(c.w), T, K, N, 0);
  lc_matmul_bwd(NULL, NULL, bw, lc_act_f32(c.dout), lc_act_f32(c.inp), lc_act_f32(c.w), T, K, N, 0);
  CHECK(memcmp(bi, dinp, sizeof(float) * (size_t)nI) == 0, "matmul dw=NULL changes dinp");
  CHECK(memcmp(bw, dw, sizeof(float) * (size_t)nW) == 0, "matmul dinp=NULL changes dw");
  free(bi); free(bw); free(pi); free(pw); free(ai); free(aw); free(dinp); free(dw); free(ref);
  free(c.inp); free(c.w); free(c.dout); free(c.out);
}

// ---------------------------------------------------------------- rmsnorm
typedef struct {
  float *inp, *w, *dout, *out, *rstd;
  int T, C;
  float eps;
} rms_ctx;

static double rms_loss(void *p) {
  rms_ctx *c = p;
  lc_rmsnorm_fwd(c->out, c->rstd, c->inp, c->w, c->T, c->C, c->eps);
  return dotd(c->dout, c->out, (long)c->T * c->C);
}

static void test_rmsnorm(int T, int C, float eps, int do_fd) {
  char what[128];
  const long n = (long)T * C;
  rms_ctx c = {lc_t_randn(&rng, n, 1), lc_t_randn(&rng, C, 1), lc_t_randn(&rng, n, 1),
               fconst(n, NAN), fconst(T, NAN), T, C, eps};
  lc_rmsnorm_fwd(c.out, c.rstd, c.inp, c.w, T, C, eps);
  double *ref = dalloc(n), *rr = dalloc(T), *gi = dalloc(n), *gw = dalloc(C);
  for (int t = 0; t < T; t++) {
    double ss = 0;
    for (int k = 0; k < C; k++) ss += (double)c.inp[t * C + k] * c.inp[t * C + k];
    rr[t] = 1.0 / sqrt(ss / C + eps);
    double dot = 0;
    for (int k = 0; k < C; k++) {
      ref[t * C + k] = c.inp[t * C + k] * rr[t] * c.w[k];
      dot += (double)c.dout[t * C + k] * c.w[k] * c.inp[t * C + k];
    }
    for (int k = 0; k < C; k++) { // double analytic gradient (for the large shapes)
      gi[t * C + k] = rr[t] * c.dout[t * C + k] * c.w[k] -
                      c.inp[t * C + k] * rr[t] * rr[t] * rr[t] * dot / C;
      gw[k] += (double)c.dout[t * C + k] * c.inp[t * C + k] * rr[t];
    }
  }
  // forward: 3 float roundings per output -> rtol 1e-6 (atol for |out| near 0)
  snprintf(what, sizeof what, "rmsnorm fwd T=%d C=%d eps=%g", T, C, eps);
  note(what, lc_t_close(what, c.out, ref, n, 1e-7, 1e-6));
  snprintf(what, sizeof what, "rmsnorm rstd T=%d C=%d", T, C);
  note(what, lc_t_close(what, c.rstd, rr, T, 0, 1e-6));

  float *dinp = fconst(n, 0), *dw = fconst(C, 0);
  lc_rmsnorm_bwd(dinp, dw, c.dout, c.inp, c.w, c.rstd, T, C);
  if (do_fd) {
    double *g = dalloc(n);
    fd_grad(rms_loss, &c, c.inp, n, 1e-2, g);
    snprintf(what, sizeof what, "rmsnorm dinp vs FD T=%d C=%d", T, C);
    check_fd(what, dinp, g, n, 3e-3, 1e-3);
    fd_grad(rms_loss, &c, c.w, C, 1e-2, g);
    snprintf(what, sizeof what, "rmsnorm dw vs FD T=%d C=%d", T, C);
    check_fd(what, dw, g, C, 3e-3, 1e-3);
    free(g);
  }
  // vs the double analytic gradient: float sums of <= T (dw) or C (dot) terms
  snprintf(what, sizeof what, "rmsnorm dinp vs double T=%d C=%d", T, C);
  note(what, lc_t_close(what, dinp, gi, n, 1e-6, 1e-5));
  snprintf(what, sizeof what, "rmsnorm dw vs double T=%d C=%d", T, C);
  note(what, lc_t_close(what, dw, gw, C, 1e-6 * sqrt((double)T), 1e-5));
  // += semantics
  float *pi = lc_t_randn(&rng, n, 1), *pw = lc_t_randn(&rng, C, 1);
  float *ai = fcopy(pi, n), *aw = fcopy(pw, C);
  lc_rmsnorm_bwd(ai, aw, c.dout, c.inp, c.w, c.rstd, T, C);
  snprintf(what, sizeof what, "rmsnorm dinp accumulate T=%d C=%d", T, C);
  check_acc(what, ai, pi, dinp, n, 1e-6, 1e-6);
  snprintf(what, sizeof what, "rmsnorm dw accumulate T=%d C=%d", T, C);
  check_acc(what, aw, pw, dw, C, 1e-6 * T, 1e-5);
  free(pi); free(pw); free(ai); free(aw); free(dinp); free(dw);
  free(ref); free(rr); free(gi); free(gw);
  free(c.inp); free(c.w); free(c.dout); free(c.out); free(c.rstd);
}

// ---------------------------------------------------------------- rope
typedef struct {
  float *x, *y, *dout, *cos_t, *sin_t;
  int T, H, D;
} rope_ctx;

static double rope_loss(void *p) {
  rope_ctx *c = p;
  const long n = (long)c->T * c->H * c->D;
  memcpy(c->y, c->x, sizeof(float) * (size_t)n);
  lc_rope_fwd(c->y, c->cos_t, c->sin_t, c->T, c->H, c->D);
  return dotd(c->dout, c->y, n);
}

static void test_rope(int T, int H, int D, double theta, int do_fd) {
  char what[128];
  const int half = D / 2;
  const long n = (long)T * H * D;
  int *pos = malloc(sizeof(int) * (size_t)T);
  for (int t = 0; t < T; t++) pos[t] = t == 0 ? 0 : (int)lc_rng_below(&rng, t % 2 ? 200000 : 64);
  rope_ctx c = {lc_t_randn(&rng, n, 1), fconst(n, NAN), lc_t_randn(&rng, n, 1),
                fconst((long)T * half, NAN), fconst((long)T * half, NAN), T, H, D};
  lc_rope_table(c.cos_t, c.sin_t, pos, T, D, theta);
  // table vs double cos/sin of the double angle. The values are in [-1, 1] and only the
  // final float rounding (<= 6e-8) is allowed: an angle computed in float at pos ~ 2e5
  // would be off by ~1e-2.
  double *rc = dalloc((long)T * half), *rs = dalloc((long)T * half);
  for (int t = 0; t < T; t++)
    for (int i = 0; i < half; i++) {
      double a = pos[t] * pow(theta, -2.0 * i / D);
      rc[t * half + i] = cos(a);
      rs[t * half + i] = sin(a);
    }
  snprintf(what, sizeof what, "rope table cos T=%d D=%d", T, D);
  note(what, lc_t_close(what, c.cos_t, rc, (long)T * half, 1e-7, 0));
  snprintf(what, sizeof what, "rope table sin T=%d D=%d", T, D);
  note(what, lc_t_close(what, c.sin_t, rs, (long)T * half, 1e-7, 0));
  // forward vs the complex rotation (x[i] + i x[i+D/2]) * exp(i angle) in double
  double *ref = dalloc(n);
  for (int t = 0; t < T; t++)
    for (int h = 0; h < H; h++)
      for (int i = 0; i < half; i++) {
        const long o = ((long)t * H + h) * D;
        double complex_re = c.x[o + i], complex_im = c.x[o + i + half];
        double cr = rc[t * half + i], ci = rs[t * half + i];
        ref[o + i] = complex_re * cr - complex_im * ci;
        ref[o + i + half] = complex_re * ci + complex_im * cr;
      }
  float *y = fcopy(c.x, n);
  lc_rope_fwd(y, c.cos_t, c.sin_t, T, H, D);
  // float table (6e-8) + 3 roundings on |x| ~ 1: atol 1e-6
  snprintf(what, sizeof what, "rope fwd T=%d H=%d D=%d", T, H, D);
  note(what, lc_t_close(what, y, ref, n, 1e-6, 1e-5));
  // bwd(fwd(x)) == x: the float table is orthonormal up to ~1e-7
  float *z = fcopy(y, n);
  lc_rope_bwd(z, c.cos_t, c.sin_t, T, H, D);
  snprintf(what, sizeof what, "rope bwd(fwd(x)) == x T=%d H=%d D=%d", T, H, D);
  note(what, lc_t_close_ff(what, z, c.x, n, 1e-6, 1e-5));
  // backward vs FD of sum(dout * fwd(x)) (linear: h = 0.1)
  float *dx = fcopy(c.dout, n);
  lc_rope_bwd(dx, c.cos_t, c.sin_t, T, H, D);
  if (do_fd) {
    double *g = dalloc(n);
    fd_grad(rope_loss, &c, c.x, n, 0.1, g);
    snprintf(what, sizeof what, "rope dx vs FD T=%d H=%d D=%d", T, H, D);
    check_fd(what, dx, g, n, 1e-3, 1e-4);
    free(g);
  }
  free(pos); free(rc); free(rs); free(ref); free(y); free(z); free(dx);
  free(c.x); free(c.y); free(c.dout); free(c.cos_t); free(c.sin_t);
}

// ---------------------------------------------------------------- swiglu
typedef struct {
  float *g, *u, *dh, *h;
  size_t n;
} sw_ctx;

static double sw_loss(void *p) {
  sw_ctx *c = p;
  lc_swiglu_fwd(c->h, c->g, c->u, c->n);
  return dotd(c->dh, c->h, (long)c->n);
}

static double sigd(double g) { return g >= 0 ? 1 / (1 + exp(-g)) : exp(g) / (1 + exp(g)); }

static void test_swiglu(size_t n, float gstd, int extremes, int do_fd) {
  char what[128];
  const long nl = (long)n;
  sw_ctx c = {lc_t_randn(&rng, nl, gstd), lc_t_randn(&rng, nl, 1), lc_t_randn(&rng, nl, 1),
              fconst(nl, NAN), n};
  if (extremes) { // stability: no overflow/NaN, correct limits
    const float ex[] = {100, -100, 88.5f, -88.5f, 87, -87, 30, -30, 20, -20, 1e-3f, -1e-3f};
    for (long i = 0; i < nl && i < (long)(sizeof ex / sizeof ex[0]); i++) c.g[i] = ex[i];
  }
  lc_swiglu_fwd(c.h, c.g, c.u, n);
  double *ref = dalloc(nl), *rg = dalloc(nl), *ru = dalloc(nl);
  for (long i = 0; i < nl; i++) {
    double g = c.g[i], s = sigd(g);
    ref[i] = g * s * c.u[i];
    ru[i] = c.dh[i] * g * s;
    rg[i] = (double)c.dh[i] * c.u[i] * s * (1 + g * (1 - s));
  }
  // exp polynomial (8.2e-8) + a few roundings: rtol 2e-6; atol 1e-12 only forgives the
  // denormal range (silu(-100) ~ -3.7e-42), so e.g. silu(-20) ~ -4e-8 is checked relatively.
  snprintf(what, sizeof what, "swiglu fwd n=%zu", n);
  note(what, lc_t_close(what, c.h, ref, nl, 1e-12, 2e-6));
  float *dg = fconst(nl, NAN), *du = fconst(nl, NAN); // overwritten, not accumulated
  lc_swiglu_bwd(dg, du, c.dh, c.g, c.u, n);
  // dg has the factor 1 + g*(1 - sigmoid(g)), which cancels to 0 at g ~ -1.28: there the
  // float result carries an absolute error ~eps * |dh u sigmoid| * (1 + |g (1 - sigmoid)|),
  // so the tolerance is rtol 1e-5 plus 1e-6 * that scale (elementwise).
  double worst = 0;
  long wi = 0;
  for (long i = 0; i < nl; i++) {
    double g = c.g[i], s = sigd(g);
    double sc = fabs((double)c.dh[i] * c.u[i] * s) * (1 + fabs(g * (1 - s)));
    double r = fabs(dg[i] - rg[i]) / (1e-12 + 1e-6 * sc + 1e-5 * fabs(rg[i]));
    if (!(r <= worst)) { worst = r; wi = i; }
  }
  snprintf(what, sizeof what, "swiglu dg vs double n=%zu", n);
  CHECK(worst <= 1, "%s: worst at %ld: got %.8g want %.8g (ratio %.3g)", what, wi,
        nl ? dg[wi] : 0.0, nl ? rg[wi] : 0.0, worst);
  note(what, worst);
  snprintf(what, sizeof what, "swiglu du vs double n=%zu", n);
  note(what, lc_t_close(what, du, ru, nl, 1e-12, 2e-6));
  if (do_fd) {
    double *g = dalloc(nl);
    fd_grad(sw_loss, &c, c.g, nl, 1e-2, g);
    snprintf(what, sizeof what, "swiglu dg vs FD n=%zu", n);
    check_fd(what, dg, g, nl, 3e-3, 1e-3);
    fd_grad(sw_loss, &c, c.u, nl, 1e-2, g);
    snprintf(what, sizeof what, "swiglu du vs FD n=%zu", n);
    check_fd(what, du, g, nl, 3e-3, 1e-3);
    free(g);
  }
  free(ref); free(rg); free(ru); free(dg); free(du);
  free(c.g); free(c.u); free(c.dh); free(c.h);
}

// ---------------------------------------------------------------- embedding
typedef struct {
  float *wte, *dout, *out;
  int *tok;
  int T, C;
} emb_ctx;

static double emb_loss(void *p) {
  emb_ctx *c = p;
  lc_embedding_fwd(c->out, c->tok, c->wte, c->T, c->C);
  return dotd(c->dout, c->out, (long)c->T * c->C);
}

static void test_embedding(int T, int C, int V, int do_fd) {
  char what[128];
  const long n = (long)T * C, nV = (long)V * C;
  int *tok = malloc(sizeof(int) * (size_t)T);
  for (int t = 0; t < T; t++) tok[t] = (int)lc_rng_below(&rng, (uint32_t)V);
  for (int t = 2; t < T; t += 3) tok[t] = tok[0]; // repeated tokens
  if (T > 1) tok[T - 1] = V - 1;                  // the last row of wte
  emb_ctx c = {lc_t_randn(&rng, nV, 1), lc_t_randn(&rng, n, 1), fconst(n, NAN), tok, T, C};
  lc_embedding_fwd(c.out, tok, c.wte, T, C);
  int same = 1;
  for (int t = 0; t < T; t++)
    for (int k = 0; k < C; k++) same &= c.out[(long)t * C + k] == c.wte[(long)tok[t] * C + k];
  CHECK(same, "embedding fwd T=%d C=%d V=%d: not a copy of the token rows", T, C, V);
  // a dwte row is a float sum of `rep` dout rows (|entries| ~ sqrt(rep)): error ~rep*eps
  int rep = 1;
  for (int t = 0; t < T; t++) {
    int k = 0;
    for (int s = 0; s < T; s++) k += tok[s] == tok[t];
    rep = k > rep ? k : rep;
  }
  const double eatol = 2e-7 * rep;
  float *dw = fconst(nV, 0);
  lc_embedding_bwd(dw, c.dout, tok, T, C);
  double *ref = dalloc(nV);
  for (int t = 0; t < T; t++)
    for (int k = 0; k < C; k++) ref[(long)tok[t] * C + k] += c.dout[(long)t * C + k];
  snprintf(what, sizeof what, "embedding dwte vs double T=%d C=%d V=%d", T, C, V);
  note(what, lc_t_close(what, dw, ref, nV, eatol, 1e-6));
  if (do_fd) {
    double *g = dalloc(nV);
    fd_grad(emb_loss, &c, c.wte, nV, 0.1, g);
    snprintf(what, sizeof what, "embedding dwte vs FD T=%d C=%d V=%d", T, C, V);
    check_fd(what, dw, g, nV, 1e-3, 1e-4);
    free(g);
  }
  float *pre = lc_t_randn(&rng, nV, 1), *acc = fcopy(pre, nV);
  lc_embedding_bwd(acc, c.dout, tok, T, C);
  snprintf(what, sizeof what, "embedding dwte accumulate T=%d C=%d V=%d", T, C, V);
  check_acc(what, acc, pre, dw, nV, eatol, 1e-6);
  free(pre); free(acc); free(dw); free(ref); free(tok);
  free(c.wte); free(c.dout); free(c.out);
}

// ---------------------------------------------------------------- cross-entropy
typedef struct {
  float *logits, *work;
  int *tgt;
  int T, V;
} xent_ctx;

static double xent_loss(void *p) {
  xent_ctx *c = p;
  memcpy(c->work, c->logits, sizeof(float) * (size_t)c->T * c->V);
  return lc_xent_fwd_bwd(c->work, c->tgt, c->T, c->V, 1.0f);
}

// Double reference: loss (returned) and scale*(softmax - onehot) into g.
static double xent_ref(const float *x, const int *tgt, int T, int V, double scale, double *g) {
  double loss = 0;
  for (int t = 0; t < T; t++) {
    const float *r = x + (long)t * V;
    double *gr = g + (long)t * V;
    if (tgt[t] < 0) {
      for (int i = 0; i < V; i++) gr[i] = 0;
      continue;
    }
    double m = r[0], s = 0;
    for (int i = 1; i < V; i++) m = r[i] > m ? r[i] : m;
    for (int i = 0; i < V; i++) s += exp(r[i] - m);
    loss += m + log(s) - r[tgt[t]];
    for (int i = 0; i < V; i++) gr[i] = scale * exp(r[i] - m) / s;
    gr[tgt[t]] -= scale;
  }
  return loss;
}

static void test_xent(int T, int V, float std, float offset, int do_fd) {
  char what[128];
  const long n = (long)T * V;
  const float scale = 0.37f;
  int *tgt = malloc(sizeof(int) * (size_t)T);
  for (int t = 0; t < T; t++) tgt[t] = t % 4 == 1 ? -100 : (int)lc_rng_below(&rng, (uint32_t)V);
  if (T > 2) tgt[2] = V - 1;
  xent_ctx c = {lc_t_randn(&rng, n, std), fconst(n, NAN), tgt, T, V};
  for (long i = 0; i < n; i++) c.logits[i] += offset;
  double *ref = dalloc(n);
  const double lref = xent_ref(c.logits, tgt, T, V, scale, ref);
  float *d = fcopy(c.logits, n);
  const double loss = lc_xent_fwd_bwd(d, tgt, T, V, scale);
  // loss: per row m + log(s) with the exp polynomial's <= 8.2e-8 relative error in s ->
  // <= 1e-7 absolute per row (double elsewhere); tolerance 4e-7 per row (+1e-12 relative)
  snprintf(what, sizeof what, "xent loss T=%d V=%d std=%g offset=%g", T, V, std, offset);
  CHECK(fabs(loss - lref) <= 4e-7 * T + 1e-12 * fabs(lref), "%s: got %.12g want %.12g", what,
        loss, lref);
  if (verbose) printf("  %-48s |loss - ref| %.3g\n", what, fabs(loss - lref));
  // gradient: exp (8.2e-8) + two float roundings -> rtol 2e-6; the target entry p-1 cancels
  // -> atol 1e-7*scale
  snprintf(what, sizeof what, "xent dlogits vs double T=%d V=%d std=%g", T, V, std);
  note(what, lc_t_close(what, d, ref, n, 1e-7 * scale, 2e-6));
  int zero = 1;
  for (int t = 0; t < T; t++)
    if (tgt[t] < 0)
      for (int i = 0; i < V; i++) zero &= d[(long)t * V + i] == 0.0f;
  CHECK(zero, "xent T=%d V=%d: ignored rows must have exactly zero gradient", T, V);
  if (do_fd) {
    double *g = dalloc(n);
    fd_grad(xent_loss, &c, c.logits, n, 5e-2, g);
    for (long i = 0; i < n; i++) g[i] *= scale;
    snprintf(what, sizeof what, "xent dlogits vs FD T=%d V=%d", T, V);
    check_fd(what, d, g, n, 5e-3, 2e-5);
    free(g);
  }
  free(d); free(ref); free(tgt); free(c.logits); free(c.work);
}

// ---------------------------------------------------------------- elementwise
static void test_add(size_t n) {
  float *y = lc_t_randn(&rng, (long)n, 1), *x = lc_t_randn(&rng, (long)n, 1);
  float *want = fcopy(y, (long)n);
  for (size_t i = 0; i < n; i++) want[i] += x[i];
  lc_add_inplace(y, x, n);
  CHECK(memcmp(y, want, sizeof(float) * n) == 0, "add_inplace n=%zu differs from y[i] += x[i]",
        n);
  free(y); free(x); free(want);
}

// ---------------------------------------------------------------- threading determinism
static void test_thread_invariance(void) {
  const int T = 200, V = 1000, C = 300;
  float *x = lc_t_randn(&rng, (long)T * V, 3);
  int *tgt = malloc(sizeof(int) * T);
  for (int t = 0; t < T; t++) tgt[t] = t % 7 == 3 ? -100 : (int)lc_rng_below(&rng, V);
  float *a = fcopy(x, (long)T * V), *b = fcopy(x, (long)T * V);
  const int nt = omp_get_max_threads();
  omp_set_num_threads(1);
  double l1 = lc_xent_fwd_bwd(a, tgt, T, V, 1.0f / T);
  omp_set_num_threads(nt > 1 ? nt : 2);
  double l2 = lc_xent_fwd_bwd(b, tgt, T, V, 1.0f / T);
  CHECK(l1 == l2, "xent loss depends on the thread count: %.17g vs %.17g", l1, l2);
  CHECK(memcmp(a, b, sizeof(float) * (size_t)T * V) == 0, "xent grad depends on threads");
  // embedding and rmsnorm dw: column-owned accumulation is order-independent of threads
  float *dout = lc_t_randn(&rng, (long)T * C, 1), *inp = lc_t_randn(&rng, (long)T * C, 1);
  float *w = lc_t_randn(&rng, C, 1), *rstd = fconst(T, 0), *out = fconst((long)T * C, 0);
  int *tok = malloc(sizeof(int) * T);
  for (int t = 0; t < T; t++) tok[t] = (int)lc_rng_below(&rng, 5);
  float *e1 = fconst(5L * C, 0), *e2 = fconst(5L * C, 0), *w1 = fconst(C, 0), *w2 = fconst(C, 0);
  float *g1 = fconst((long)T * C, 0), *g2 = fconst((long)T * C, 0);
  lc_rmsnorm_fwd(out, rstd, inp, w, T, C, 1e-5f);
  omp_set_num_threads(1);
  lc_embedding_bwd(e1, dout, tok, T, C);
  lc_rmsnorm_bwd(g1, w1, dout, inp, w, rstd, T, C);
  omp_set_num_threads(nt > 1 ? nt : 2);
  lc_embedding_bwd(e2, dout, tok, T, C);
  lc_rmsnorm_bwd(g2, w2, dout, inp, w, rstd, T, C);
  omp_set_num_threads(nt);
  CHECK(memcmp(e1, e2, sizeof(float) * 5 * C) == 0, "embedding bwd depends on threads");
  CHECK(memcmp(w1, w2, sizeof(float) * C) == 0, "rmsnorm dw depends on threads");
  CHECK(memcmp(g1, g2, sizeof(float) * (size_t)T * C) == 0, "rmsnorm dinp depends on threads");
  free(x); free(tgt); free(a); free(b); free(dout); free(inp); free(w); free(rstd); free(out);
  free(tok); free(e1); free(e2); free(w1); free(w2); free(g1); free(g2);
}


// lc_fpenv_flush_denormals: afterwards a product below FLT_MIN is 0 (FTZ) and a subnormal
// input reads as 0 (DAZ) on the calling thread and on every OpenMP thread. Before it, the
// same product is the subnormal 1e-40 (checked, so the test can tell the two apart).
// Runs last: it changes the floating-point environment of the process.
static float subnormal_product(void) {
  volatile float a = 1e-20f, b = 1e-20f;
  return a * b;
}
static float subnormal_input(void) {
  volatile float s = 1e-40f, big = 1e10f; // subnormal * 1e10 = 1e-30, a normal result
  return s * big;
}
static void test_flush_denormals(void) {
#if defined(__SSE__) || defined(__x86_64__) || defined(__aarch64__)
  CHECK(subnormal_product() != 0.0f && subnormal_input() != 0.0f, "before: subnormals already flushed");
  lc_fpenv_flush_denormals();
  int bad = 0, threads = 0;
#pragma omp parallel reduction(+ : bad, threads)
  {
    threads += 1;
    bad += subnormal_product() != 0.0f || subnormal_input() != 0.0f;
  }
  CHECK(subnormal_product() == 0.0f && subnormal_input() == 0.0f, "FTZ/DAZ not set on the calling thread");
  CHECK(bad == 0, "FTZ/DAZ not set on %d of %d OpenMP threads", bad, threads);
#endif
}

// The length-dependent RoPE scalings on both sides of their switch, against the formulas
// written out (transformers' modeling_rope_utils): longrope divides by the short factors
// up to original_max_position_embeddings and by the long ones beyond; dynamic NTK is plain
// RoPE up to max_position_embeddings and then raises the base to
// theta (factor L / max - (factor - 1))^(D / (D - 2)); static types ignore the length.
static void test_rope_lengths(void) {
  enum { D = 16 };
  double inv[D / 2], af, plain[D / 2];
  const double theta = 10000.0;
  for (int i = 0; i < D / 2; i++) plain[i] = 1.0 / pow(theta, 2.0 * i / D);
  lc_rope_scaling lr = {.type = LC_ROPE_LONGROPE, .orig_max = 16, .n_factors = D / 2};
  for (int i = 0; i < D / 2; i++) lr.short_factor[i] = 1.0f + 0.25f * i, lr.long_factor[i] = 2.0f + 0.5f * i;
  for (int len = 15; len <= 18; len++) {
    lc_rope_freqs(inv, &af, D, theta, &lr, 64, len);
    double e = 0;
    for (int i = 0; i < D / 2; i++) e = fmax(e, fabs(inv[i] - plain[i] / (len > 16 ? lr.long_factor[i] : lr.short_factor[i])) / inv[i]);
    CHECK(e < 1e-12 && fabs(af - sqrt(1 + log(4.0) / log(16.0))) < 1e-12, "longrope at length %d: error %.3g, factor %.17g",
          len, e, af);
  }
  lc_rope_scaling dy = {.type = LC_ROPE_DYNAMIC, .factor = 4};
  for (int len = 1; len <= 40; len += 13) {
    lc_rope_freqs(inv, &af, D, theta, &dy, 16, len);
    const double base = len > 16 ? theta * pow(4.0 * len / 16 - 3.0, (double)D / (D - 2)) : theta;
    double e = 0;
    for (int i = 0; i < D / 2; i++) e = fmax(e, fabs(inv[i] - 1.0 / pow(base, 2.0 * i / D)) / inv[i]);
    CHECK(e < 1e-12 && af == 1.0, "dynamic at length %d: error %.3g", len, e);
  }
  lc_rope_scaling y = {.type = LC_ROPE_YARN, .factor = 4, .orig_max = 16, .beta_fast = 32, .beta_slow = 1, .truncate = 1};
  double a1[D / 2], a2[D / 2], f1, f2;
  lc_rope_freqs(a1, &f1, D, theta, &y, 64, 5);
  lc_rope_freqs(a2, &f2, D, theta, &y, 64, 500);
  CHECK(!memcmp(a1, a2, sizeof a1) && f1 == f2 && fabs(f1 - (0.1 * log(4.0) + 1)) < 1e-12, "yarn depends on the length");
}

int main(void) {
  verbose = getenv("LC_TEST_VERBOSE") != NULL;
  test_rope_lengths();
  lc_rng_seed(&rng, 20240611);
  const int Ts[] = {1, 3, 17}, Cs[] = {5, 64, 67};

  // matmul: small shapes by FD (K, N cover 5/64/67 and odd sizes), large ones (threaded BLAS)
  for (int a = 0; a < 3; a++) {
    test_matmul(Ts[a], 5, 7, 1);
    test_matmul(Ts[a], 67, 13, 1);
    test_matmul(Ts[a], 64, 67, a < 2);
  }
  test_matmul(200, 96, 130, 0);

  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++) test_rmsnorm(Ts[a], Cs[b], 1e-5f, 1);
  test_rmsnorm(3, 67, 0.5f, 1);     // eps large enough to matter
  test_rmsnorm(300, 131, 1e-6f, 0); // threaded path (T*C > 32K)

  const int Ds[] = {4, 8, 64};
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++) test_rope(Ts[a], a == 1 ? 3 : 1 + a, Ds[b], 10000.0, 1);
  test_rope(17, 2, 64, 500000.0, 1);
  test_rope(301, 4, 64, 10000.0, 0); // threaded path

  test_swiglu(1, 1, 0, 1);
  test_swiglu(5, 3, 0, 1);
  test_swiglu(67, 3, 0, 1);
  test_swiglu(300, 3, 1, 0); // extremes (the FD there is meaningless near |g| = 88)
  test_swiglu(100003, 4, 1, 0);

  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++) {
      test_embedding(Ts[a], Cs[b], 7, 1);
      test_embedding(Ts[a], Cs[b], 300, a < 2 || b == 0);
    }
  test_embedding(600, 300, 50, 0); // threaded path, many repeats

  const int Vs[] = {7, 300};
  for (int a = 0; a < 3; a++)
    for (int v = 0; v < 2; v++) test_xent(Ts[a], Vs[v], 2, 0, 1);
  test_xent(17, 300, 100, 3000, 0); // max subtraction: exp(3000) overflows otherwise
  test_xent(5, 32000, 4, -50, 0);   // the vocabulary size of the hot path
  test_xent(96, 1000, 3, 0, 0);     // threaded path

  test_add(1);
  test_add(67);
  test_add(100003);

  test_thread_invariance();
  test_flush_denormals();
  return lc_test_finish("test_ops");
}
