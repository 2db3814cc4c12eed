// Tiny test harness: every check counts; main returns lc_test_finish() which is
// non-zero if any check failed. Prints "N passed, M failed" at the end.
#ifndef LC_TESTUTIL_H
#define LC_TESTUTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/rng.h"

static int lc_t_pass, lc_t_fail;

// A test may define LC_T_ON_FAIL(file, line) before including this header: called after a
// failed check is printed (mpi_dist ends the whole job there, so no rank waits forever in
// a collective the failing rank will not reach).
#ifndef LC_T_ON_FAIL
#define LC_T_ON_FAIL(file, line) ((void)0)
#endif

#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (cond) {                                                       \
      lc_t_pass++;                                                    \
    } else {                                                          \
      lc_t_fail++;                                                    \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);            \
      fprintf(stderr, __VA_ARGS__);                                   \
      fprintf(stderr, "\n");                                          \
      LC_T_ON_FAIL(__FILE__, __LINE__);                               \
    }                                                                 \
  } while (0)

// Max over i of |a-b| / (atol + rtol*|b|) must be <= 1. Returns the worst ratio and
// reports the worst index on failure.
static inline double lc_t_close(const char *what, const float *a, const double *b, long n,
                                double atol, double rtol) {
  double worst = 0;
  long wi = 0;
  for (long i = 0; i < n; i++) {
    double r = fabs((double)a[i] - b[i]) / (atol + rtol * fabs(b[i]));
    if (!(r <= worst)) { worst = r; wi = i; }  // also catches NaN
  }
  CHECK(worst <= 1.0, "%s: worst at %ld: got %.8g want %.8g (ratio %.3g, atol %g rtol %g)",
        what, wi, n ? a[wi] : 0.0, n ? b[wi] : 0.0, worst, atol, rtol);
  return worst;
}

static inline double lc_t_close_ff(const char *what, const float *a, const float *b, long n,
                                   double atol, double rtol) {
  double worst = 0;
  long wi = 0;
  for (long i = 0; i < n; i++) {
    double r = fabs((double)a[i] - (double)b[i]) / (atol + rtol * fabs((double)b[i]));
    if (!(r <= worst)) { worst = r; wi = i; }
  }
  CHECK(worst <= 1.0, "%s: worst at %ld: got %.8g want %.8g (ratio %.3g, atol %g rtol %g)",
        what, wi, n ? a[wi] : 0.0, n ? b[wi] : 0.0, worst, atol, rtol);
  return worst;
}

static inline float *lc_t_randn(lc_rng *r, long n, float std) {
  float *x = malloc(sizeof(float) * (size_t)(n ? n : 1));
  lc_rng_fill_normal(r, x, n, std);
  return x;
}

static inline int lc_test_finish(const char *name) {
  printf("%s: %d passed, %d failed\n", name, lc_t_pass, lc_t_fail);
  return lc_t_fail ? 1 : 0;
}

#endif
