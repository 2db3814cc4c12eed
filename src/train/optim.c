#include "train/optim.h"
#include "core/dtype.h"
#include "backend/cpu/kern/kernels.h"

#include <math.h>
#include <string.h>

lc_status lc_adamw_create(lc_adamw *o, size_t n, lc_arena *arena) {
  memset(o, 0, sizeof *o);
  o->m = lc_calloc(arena, LC_MEM_OPTIM, lc_bytes(LC_DT_F32, n), "AdamW first moment");
  o->v = o->m ? lc_calloc(arena, LC_MEM_OPTIM, lc_bytes(LC_DT_F32, n), "AdamW second moment") : NULL;
  if (!o->m || !o->v) {
    lc_adamw_destroy(o, arena);
    return LC_ENOMEM;
  }
  o->n = n;
  return LC_OK;
}

void lc_adamw_destroy(lc_adamw *o, lc_arena *arena) {
  lc_free(arena, o->v);
  lc_free(arena, o->m);
  o->m = o->v = NULL;
}

void lc_adamw_update(lc_adamw *o, const lc_adamw_hp *hp, float *params, const float *grads,
                     const lc_param_info *table, int n_tensors) {
  float ss, ib;
  lc_adamw_bias(hp, ++o->step, &ss, &ib);
  for (int i = 0; i < n_tensors; i++) {
    const size_t off = table[i].offset;
    lc_kern()->adamw(params + off, grads + off, o->m + off, o->v + off, table[i].numel,
                 table[i].decay ? hp->weight_decay : 0.0f, hp->beta1, hp->beta2, hp->eps, hp->lr, ss, ib);
  }
}

double lc_sumsq(const float *g, size_t n) { return lc_kern()->sumsq(g, n); }

float lc_clip_scale(float *g, size_t n, double norm, float max_norm) {
  const float s = lc_clip_factor(norm, max_norm);
  if (s != 1.0f) lc_kern()->scale(g, n, s);
  return s;
}

float lc_lr_at(long step, long total, long warmup, float lr, float lr_min) {
  if (warmup > 0 && step < warmup) return lr * (float)(step + 1) / (float)warmup;
  long decay_steps = total - warmup;
  if (decay_steps <= 1) return lr;
  double t = (double)(step - warmup) / (double)(decay_steps - 1);
  if (t > 1) t = 1;
  return lr_min + (lr - lr_min) * (float)(0.5 * (1.0 + cos(3.141592653589793 * t)));
}
