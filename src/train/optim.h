// AdamW (decoupled weight decay, bias correction), global gradient-norm clipping and
// the learning-rate schedule (linear warmup, then cosine decay to lr_min).
#ifndef LC_OPTIM_H
#define LC_OPTIM_H

#include <stddef.h>

#include "core/arena.h"
#include "model/params.h"
#include "model/pstore.h"
#include "backend/cpu/kern/kernels.h"


typedef struct {
  float *m, *v; // first and second moments (owned when made by lc_adamw_create; a trainer
                // points them at its parameter store's)
  size_t n;
  long step;    // updates applied so far
} lc_adamw;

// Standalone moments of n floats from the arena (tests; the trainer's live in its store).
lc_status lc_adamw_create(lc_adamw *o, size_t n, lc_arena *arena);
void lc_adamw_destroy(lc_adamw *o, lc_arena *arena);
// One update of the tensors in `table` (weight decay only where table[i].decay), with
// m and v in the table's layout.
// p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p), with mhat/vhat bias-corrected.
void lc_adamw_update(lc_adamw *o, const lc_adamw_hp *hp, float *params, const float *grads,
                     const lc_param_info *table, int n_tensors);
// (A parameter store applies the same update to its own segments: lc_pstore_update.)

// Sum of squares of g[0..n) accumulated in double.
double lc_sumsq(const float *g, size_t n);
// Scales g by lc_clip_factor(norm, max_norm). Returns the scale applied.
float lc_clip_scale(float *g, size_t n, double norm, float max_norm);

// LR at update `step` (0-based) of `total`: linear warmup over `warmup` steps from
// lr/warmup to lr, then cosine from lr to lr_min at the last step.
float lc_lr_at(long step, long total, long warmup, float lr, float lr_min);

#endif
