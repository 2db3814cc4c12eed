// AdamW against a double-precision reference of PyTorch's AdamW formula, the LR
// schedule's shape, and gradient clipping.
#include <string.h>

#include "model/config.h"
#include "model/params.h"
#include "train/optim.h"
#include "testutil.h"

static void test_adamw(void) {
  lc_param_info table[2] = {{.name = "w", .ndim = 2, .shape = {3, 5}, .offset = 0, .numel = 15, .decay = 1},
                            {.name = "norm", .ndim = 1, .shape = {7, 1}, .offset = 16, .numel = 7, .decay = 0}};
  const size_t n = 23;
  lc_arena a;
  lc_arena_init(&a, 0);
  lc_adamw o;
  CHECK(lc_adamw_create(&o, n, &a) == LC_OK, "create");
  lc_rng r;
  lc_rng_seed(&r, 3);
  float p[23];
  double pr[23], m[23] = {0}, v[23] = {0};
  lc_rng_fill_normal(&r, p, n, 1.0f);
  for (size_t i = 0; i < n; i++) pr[i] = p[i];
  lc_adamw_hp hp = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
  for (int step = 1; step <= 5; step++) {
    float g[23];
    lc_rng_fill_normal(&r, g, n, 1.0f);
    lc_adamw_update(&o, &hp, p, g, table, 2);
    for (size_t i = 0; i < n; i++) {
      if (i == 15) continue; // padding between tensors: untouched
      double wd = i < 15 ? 0.1 : 0.0;
      // torch.optim.AdamW: p -= lr*wd*p; m,v EMA; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps)
      pr[i] -= 1e-2 * wd * pr[i];
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      v[i] = 0.95 * v[i] + 0.05 * (double)g[i] * g[i];
      double bc1 = 1 - pow(0.9, step), bc2 = 1 - pow(0.95, step);
      pr[i] -= 1e-2 / bc1 * m[i] / (sqrt(v[i]) / sqrt(bc2) + 1e-8);
    }
  }
  // fp32 state vs double reference over 5 steps: updates are ~1e-2, rounding ~1e-7 relative.
  double pr15[23];
  memcpy(pr15, pr, sizeof pr);
  pr15[15] = p[15];
  lc_t_close("adamw params", p, pr15, (long)n, 1e-6, 1e-5);
  CHECK(o.step == 5, "step counter %ld", o.step);
  lc_adamw_destroy(&o, &a);
  CHECK(a.cur_total == 0, "optimizer state freed");
}

static void test_schedule(void) {
  const float lr = 1e-3f, lo = 1e-4f;
  // Warmup: linear from lr/warmup up to lr at the last warmup step.
  CHECK(fabsf(lc_lr_at(0, 100, 10, lr, lo) - 1e-4f) < 1e-9f, "first warmup lr");
  CHECK(fabsf(lc_lr_at(9, 100, 10, lr, lo) - lr) < 1e-9f, "last warmup lr");
  // Cosine: starts at lr right after warmup, ends at lr_min at the last step, lr_min + (lr-lr_min)/2 midway.
  CHECK(fabsf(lc_lr_at(10, 100, 10, lr, lo) - lr) < 1e-9f, "first decay lr");
  CHECK(fabsf(lc_lr_at(99, 100, 10, lr, lo) - lo) < 1e-9f, "last lr %g", lc_lr_at(99, 100, 10, lr, lo));
  float mid = lc_lr_at(10 + 89 / 2, 100, 10, lr, lo);
  CHECK(fabsf(mid - (lo + (lr - lo) * 0.5f * (1 + cosf(3.14159265f * 44.0f / 89.0f)))) < 1e-8f, "mid lr %g", mid);
  for (int s = 11; s < 100; s++)
    CHECK(lc_lr_at(s, 100, 10, lr, lo) <= lc_lr_at(s - 1, 100, 10, lr, lo), "monotone decay at %d", s);
  CHECK(lc_lr_at(5, 100, 0, lr, lo) < lr, "no warmup still decays");
}

static void test_clip(void) {
  float g[1000];
  lc_rng r;
  lc_rng_seed(&r, 4);
  lc_rng_fill_normal(&r, g, 1000, 1.0f);
  double n = sqrt(lc_sumsq(g, 1000));
  double ref = 0;
  for (int i = 0; i < 1000; i++) ref += (double)g[i] * g[i];
  CHECK(fabs(n - sqrt(ref)) < 1e-9 * sqrt(ref), "norm");
  float s = lc_clip_scale(g, 1000, n, 1.0f);
  CHECK(s < 1.0f && fabs(sqrt(lc_sumsq(g, 1000)) - 1.0) < 1e-5, "clipped norm is 1 (scale %g)", s);
  CHECK(lc_clip_scale(g, 1000, 0.5, 1.0f) == 1.0f, "no clip below the threshold");
  CHECK(lc_clip_scale(g, 1000, 5.0, 0.0f) == 1.0f, "clip 0 = off");
}

// The parameter table's decay flags: exactly the 2-D weight matrices decay (embedding,
// projections, LM head), never an RMSNorm weight; checked by shape, by HF name, and by
// what AdamW does with them (zero gradients: only decay moves a parameter).
static void test_decay_table(void) {
  for (int tied = 0; tied < 2; tied++) {
    lc_config c;
    lc_config_preset(&c, "tiny");
    c.tie_embeddings = tied;
    lc_param_info *t = NULL;
    int n = 0;
    size_t total = 0;
    CHECK(lc_param_table(&c, &t, &n, &total) == LC_OK, "table");
    int matrices = 0;
    for (int i = 0; i < n; i++) {
      size_t len = strlen(t[i].name);
      int norm = len >= 11 && !strcmp(t[i].name + len - 11, "norm.weight");
      CHECK(t[i].decay == (t[i].ndim == 2) && norm == (t[i].ndim == 1), "%s (%d-D): decay flag %d", t[i].name,
            t[i].ndim, t[i].decay);
      matrices += t[i].ndim == 2;
    }
    CHECK(matrices == 7 * c.n_layers + (tied ? 1 : 2), "%d matrices (tied %d)", matrices, tied);
    float *p = malloc(sizeof(float) * total), *p0 = malloc(sizeof(float) * total), *g = calloc(total, sizeof(float));
    lc_rng r;
    lc_rng_seed(&r, 9);
    lc_rng_fill_normal(&r, p, (long)total, 1.0f);
    memcpy(p0, p, sizeof(float) * total);
    lc_arena a;
    lc_arena_init(&a, 0);
    lc_adamw o;
    CHECK(lc_adamw_create(&o, total, &a) == LC_OK, "create");
    lc_adamw_hp hp = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.5f};
    lc_adamw_update(&o, &hp, p, g, t, n);
    for (int i = 0; i < n; i++) {
      long moved = 0;
      for (size_t j = 0; j < t[i].numel; j++) moved += p[t[i].offset + j] != p0[t[i].offset + j];
      CHECK(moved == (t[i].ndim == 2 ? (long)t[i].numel : 0), "%s: %ld of %zu entries decayed", t[i].name, moved,
            t[i].numel);
    }
    lc_adamw_destroy(&o, &a);
    free(p), free(p0), free(g), free(t);
  }
}

int main(void) {
  test_adamw();
  test_decay_table();
  test_schedule();
  test_clip();
  return lc_test_finish("test_optim");
}
