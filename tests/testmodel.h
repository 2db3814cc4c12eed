// Shared by the whole-model tests (test_model, test_bf16): random weights with a spread
// that carries gradient through every path, and a random batch with ignored labels.
#ifndef LC_TESTMODEL_H
#define LC_TESTMODEL_H

#include <math.h>
#include <string.h>

#include "core/rng.h"
#include "model/model.h"

// Weights with a larger spread than the default init, so every path carries gradient
// well above float noise; norm weights around 1 (not all ones).
static inline void lc_t_randomize(lc_model *m, uint64_t seed) {
  lc_rng r;
  lc_rng_seed(&r, seed);
  for (int i = 0; i < m->n_tensors; i++) {
    float *p = m->params + m->table[i].offset;
    long n = (long)m->table[i].numel;
    if (m->table[i].ndim == 1) {
      for (long j = 0; j < n; j++) p[j] = 1.0f + 0.2f * lc_rng_normal(&r);
    } else {
      float std = 1.0f / sqrtf((float)m->table[i].shape[1]);
      if (strstr(m->table[i].name, "embed")) std = 1.0f;
      lc_rng_fill_normal(&r, p, n, std);
    }
  }
}

// Random tokens and targets, every 5th target (from t = 3) ignored; positions 0..T-1.
static inline void lc_t_make_batch(lc_rng *r, int *tok, int *tgt, int *pos, int T, int V) {
  for (int t = 0; t < T; t++) {
    tok[t] = (int)lc_rng_below(r, (uint32_t)V);
    tgt[t] = (t % 5 == 3) ? -100 : (int)lc_rng_below(r, (uint32_t)V);
    pos[t] = t;
  }
}

#endif
