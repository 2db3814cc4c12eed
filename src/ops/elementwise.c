// Element-wise helpers.
#include "ops/ops.h"

#define LC_EW_PAR_MIN ((size_t)1 << 16) // below this a parallel region costs more than it saves

void lc_add_inplace(float *y, const float *x, size_t n) {
  const long nl = (long)n;
#pragma omp parallel for schedule(static) if (n > LC_EW_PAR_MIN)
  for (long i = 0; i < nl; i++) y[i] += x[i];
}
