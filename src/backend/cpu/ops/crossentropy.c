// Fused softmax cross-entropy: loss and dlogits from one call, written over the logits.
// Per row: m = max; e_i = exp(x_i - m) (written over the logits); s = sum e_i in DOUBLE;
// loss = m + log(s) - x[target]; dlogits = e_i * (scale/s) - scale*[i == target].
// exp is a branch-free polynomial (relative error <= 8.2e-8, about one float rounding of
// the result) run 8 lanes at a time on explicit vectors (backend/cpu/ops/vec8.h; GCC 12 did not vectorize
// the scalar loop), and the sum of a row's exps has one fixed order on every machine: 8
// double partial sums by lane, added in lane order, then the tail (exp_sum).
#include "backend/cpu/ops/fastexp.h"
#include "backend/cpu/ops/ops.h"
#include "backend/cpu/ops/vec8.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define LC_XENT_PAR_MIN 32768L // T*V elements below which one thread is faster
#define LC_XENT_CHUNKS 64      // fixed row chunks: the loss sum is independent of threads

typedef double lc_v4d __attribute__((vector_size(32)));
typedef float lc_v4f __attribute__((vector_size(16)));

// sum over i < V of e_i = exp(x[i] - m), each e_i also written to dst[i] when dst is set:
// 8 lanes at a time into 8 double partial sums (lane k sums elements i = k mod 8 of the
// vector part), added in lane order, then the tail one by one.
static double exp_sum(float *dst, const float *x, int V, float m) {
  lc_v4d lo = {0, 0, 0, 0}, hi = {0, 0, 0, 0};
  const lc_v8f mv = lc_v8_splat(m);
  int i = 0;
  for (; i + 8 <= V; i += 8) {
    const lc_v8f e = lc_fast_expf8(lc_v8_load(x + i) - mv);
    if (dst) lc_v8_store(dst + i, e);
    const lc_v4f e0 = {e[0], e[1], e[2], e[3]}, e1 = {e[4], e[5], e[6], e[7]};
    lo += __builtin_convertvector(e0, lc_v4d);
    hi += __builtin_convertvector(e1, lc_v4d);
  }
  double s = lo[0];
  s += lo[1], s += lo[2], s += lo[3], s += hi[0], s += hi[1], s += hi[2], s += hi[3];
  for (; i < V; i++) {
    const float e = lc_fast_expf(x[i] - m);
    if (dst) dst[i] = e;
    s += (double)e;
  }
  return s;
}

static double xent_row(float *x, int target, int V, float scale) {
  if (target < 0) { // ignored row: no loss, zero gradient
    for (int i = 0; i < V; i++) x[i] = 0.0f;
    return 0.0;
  }
  float m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (int i = 0; i < V; i++) m = x[i] > m ? x[i] : m;
  const float xt = x[target];
  const double s = exp_sum(x, x, V, m);
  const float k = (float)((double)scale / s);
  for (int i = 0; i < V; i++) x[i] *= k;
  x[target] -= scale;
  return (double)m + log(s) - (double)xt;
}

double lc_xent_fwd_bwd(float *logits, const int *targets, int T, int V, float scale) {
  if (T <= 0) return 0.0;
  // Rows are split into LC_XENT_CHUNKS fixed chunks summed in order, so the returned loss is
  // bit-identical for any thread count (and no buffer is needed).
  double part[LC_XENT_CHUNKS];
#pragma omp parallel for schedule(static) if ((long)T * V > LC_XENT_PAR_MIN)
  for (int ch = 0; ch < LC_XENT_CHUNKS; ch++) {
    const int t0 = (int)((long)T * ch / LC_XENT_CHUNKS);
    const int t1 = (int)((long)T * (ch + 1) / LC_XENT_CHUNKS);
    double acc = 0.0;
    for (int t = t0; t < t1; t++)
      acc += xent_row(logits + (size_t)t * V, targets[t], V, scale);
    part[ch] = acc;
  }
  double loss = 0.0;
  for (int ch = 0; ch < LC_XENT_CHUNKS; ch++) loss += part[ch];
  return loss;
}

void lc_xent_tile(float *logits, const int *targets, int T, int V, float scale, double *acc, int count_wrong) {
  if (count_wrong) // misses: counted tokens whose first maximal logit is not the target
    for (int t = 0; t < T; t++) {
      const int y = targets[t];
      if (y < 0) continue;
      const float *row = logits + (size_t)t * V;
      int best = 0;
      for (int v = 1; v < V; v++)
        if (row[v] > row[best]) best = v;
      acc[1] += best != y;
    }
  acc[0] += lc_xent_fwd_bwd(logits, targets, T, V, scale); // logits -> dlogits
}

// ---- the sliced loss's per-token statistics: sum (double), max, target logit, best logit
// (floats), the best logit's index (int), each an array of T
typedef struct {
  double *sum;
  float *mx, *zt, *best;
  int *arg;
} stats_view;

static stats_view stats_of(void *s, int T) {
  stats_view v;
  v.sum = s;
  v.mx = (float *)(void *)(v.sum + T);
  v.zt = v.mx + T;
  v.best = v.zt + T;
  v.arg = (int *)(void *)(v.best + T);
  return v;
}

size_t lc_xent_stats_bytes(int T) { return (size_t)T * (sizeof(double) + 3 * sizeof(float) + sizeof(int)); }

void lc_xent_stats_init(void *stats, int T) {
  stats_view s = stats_of(stats, T);
  for (int t = 0; t < T; t++) s.sum[t] = 0, s.mx[t] = -INFINITY, s.zt[t] = 0, s.best[t] = -INFINITY, s.arg[t] = -1;
}

void lc_xent_slice_merge(void *stats, int T, const float *logits, const int *targets, int t0, int m, int v0, int vs) {
  stats_view s = stats_of(stats, T);
#pragma omp parallel for schedule(static) if ((long)m * vs > 32768L)
  for (int i = 0; i < m; i++) {
    const int t = t0 + i, y = targets[t];
    if (y < 0) continue;
    const float *row = logits + (size_t)i * vs;
    float rm = -INFINITY;
    int ra = 0;
    for (int v = 0; v < vs; v++)
      if (row[v] > rm) rm = row[v], ra = v;
    const double rs = exp_sum(NULL, row, vs, rm);
    if (rm > s.mx[t]) {
      s.sum[t] = s.sum[t] * exp((double)s.mx[t] - (double)rm) + rs;
      s.mx[t] = rm;
    } else {
      s.sum[t] += rs * exp((double)rm - (double)s.mx[t]);
    }
    if (y >= v0 && y < v0 + vs) s.zt[t] = row[y - v0];
    if (rm > s.best[t]) s.best[t] = rm, s.arg[t] = v0 + ra; // first maximum over the vocabulary
  }
}

void lc_xent_slice_total(const void *stats, const int *targets, int T, double *acc, int count_wrong) {
  stats_view s = stats_of((void *)stats, T);
  double total = 0;
  for (int t = 0; t < T; t++) {
    if (targets[t] < 0) continue;
    total += (double)s.mx[t] + log(s.sum[t]) - (double)s.zt[t];
    if (count_wrong) acc[1] += s.arg[t] != targets[t];
  }
  acc[0] += total;
}

void lc_xent_slice_dlogits(float *logits, const void *stats, int T, const int *targets, int t0, int m, int v0, int vs,
                           float scale) {
  stats_view s = stats_of((void *)stats, T);
#pragma omp parallel for schedule(static) if ((long)m * vs > 32768L)
  for (int i = 0; i < m; i++) {
    const int t = t0 + i, y = targets[t];
    float *row = logits + (size_t)i * vs;
    if (y < 0) {
      memset(row, 0, lc_bytes(LC_DT_F32, (size_t)vs));
      continue;
    }
    const float k = (float)((double)scale / s.sum[t]), M = s.mx[t];
    int v = 0;
    for (; v + 8 <= vs; v += 8) lc_v8_store(row + v, lc_fast_expf8(lc_v8_load(row + v) - M) * k);
    for (; v < vs; v++) row[v] = lc_fast_expf(row[v] - M) * k;
    if (y >= v0 && y < v0 + vs) row[y - v0] -= scale;
  }
}
