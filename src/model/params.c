#include "model/params.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "model/arch.h"

static void add(lc_param_info *t, int *n, size_t *off, int unit, int layer, int ki, const lc_tensor_kind *k,
                const lc_config *cfg) {
  lc_param_info *p = &t[(*n)++];
  memset(p, 0, sizeof *p);
  p->unit = unit;
  p->kind = ki;
  p->layer = layer;
  if (layer >= 0) snprintf(p->name, sizeof p->name, "%smodel.layers.%d.%s", k->adapter ? "base_model.model." : "", layer, k->hf);
  else snprintf(p->name, sizeof p->name, "%s", k->hf);
  p->ndim = k->cols == LC_SZ_1 ? 1 : 2;
  p->shape[0] = lc_size_of(k->rows, cfg);
  p->shape[1] = lc_size_of(k->cols, cfg);
  p->numel = (size_t)p->shape[0] * (size_t)p->shape[1];
  p->offset = *off;
  p->decay = k->decay;
  p->init = k->init;
  p->slot = k->slot;
  // Keep every tensor 16-float (64-byte) aligned inside the flat buffer.
  *off += (p->numel + 15) & ~(size_t)15;
}

lc_status lc_param_layout_build(lc_param_layout *L, const lc_config *cfg, int shard_ways) {
  memset(L, 0, sizeof *L);
  if (cfg->n_layers > LC_MAX_LAYERS)
    return lc_fail(LC_EINVAL, "model has %d layers; longctx supports at most %d", cfg->n_layers,
                   LC_MAX_LAYERS);
  if (shard_ways < 1) return lc_fail(LC_EINVAL, "parameter layout split %d ways: use >= 1", shard_ways);
  int nk;
  const lc_tensor_kind *kinds = lc_tensor_kinds(&nk);
  int cap = nk * (cfg->n_layers + 1);
  L->n_units = cfg->n_layers + 2;
  L->align = 16 * (size_t)shard_ways;
  lc_param_info *t = calloc((size_t)cap, sizeof *t);
  L->units = calloc((size_t)L->n_units, sizeof *L->units);
  if (!t || !L->units) {
    free(t);
    free(L->units);
    L->units = NULL;
    return lc_fail(LC_ENOMEM, "out of memory building the parameter table");
  }
  int k = 0;
  size_t off = 0;
  // The units in order: embedding, layers, final; each holds the present kinds of its
  // place in table order and is padded to a multiple of align.
  for (int u = 0; u < L->n_units; u++) {
    const lc_place place = u == LC_UNIT_EMBED ? LC_PLACE_EMBED : u == lc_unit_final(cfg->n_layers) ? LC_PLACE_FINAL : LC_PLACE_LAYER;
    const int layer = place == LC_PLACE_LAYER ? u - 1 : -1;
    lc_param_unit *U = &L->units[u];
    U->off = off;
    U->t0 = k;
    for (int i = 0; i < nk; i++)
      if (kinds[i].place == place && lc_tensor_present(&kinds[i], cfg)) add(t, &k, &off, u, layer, i, &kinds[i], cfg);
    U->t1 = k;
    off = (off + L->align - 1) / L->align * L->align;
    U->n = off - U->off;
  }
  L->table = t;
  L->n_tensors = k;
  L->total = off;
  for (int i = 0; i < k; i++) L->max_numel = t[i].numel > L->max_numel ? t[i].numel : L->max_numel;
  return LC_OK;
}

void lc_param_layout_free(lc_param_layout *L) {
  free(L->table);
  free(L->units);
  memset(L, 0, sizeof *L);
}

lc_status lc_param_table(const lc_config *cfg, lc_param_info **table, int *n, size_t *total) {
  lc_param_layout L;
  LC_TRY(lc_param_layout_build(&L, cfg, 1));
  free(L.units);
  *table = L.table;
  *n = L.n_tensors;
  *total = L.total;
  return LC_OK;
}

lc_buf *lc_weights_slot(lc_weights *w, const lc_param_info *t) {
  char *base = t->layer >= 0 ? (char *)&w->layer[t->layer] : (char *)w;
  return (lc_buf *)(void *)(base + t->slot);
}

void lc_weights_tie(lc_weights *w, const lc_config *cfg) {
  if (cfg->tie_embeddings) w->head = w->embed;
}

void lc_param_init_part(float *dst, const lc_param_info *t, size_t n, lc_rng *rng) {
  if (t->init == LC_INIT_KAIMING) { // PEFT's lora_A: kaiming_uniform_(a = sqrt(5)), bound 1/sqrt(fan_in)
    const float b = 1.0f / sqrtf((float)t->shape[1]);
    lc_rng_fill_uniform(rng, dst, (long)n, -b, b);
  } else if (t->init != LC_INIT_NORMAL) {
    for (size_t j = 0; j < n; j++) dst[j] = t->init == LC_INIT_ONES ? 1.0f : 0.0f;
  } else {
    lc_rng_fill_normal(rng, dst, (long)n, 0.02f);
  }
}

void lc_param_init_tensor(float *dst, const lc_param_info *t, lc_rng *rng) { lc_param_init_part(dst, t, t->numel, rng); }

size_t lc_stage_floats(const lc_param_layout *L) {
  static long test = -1;
  if (test < 0) {
    const char *e = getenv("LONGCTX_TEST_STAGE_FLOATS");
    test = e && atol(e) > 0 ? atol(e) : 0;
  }
  const size_t cap = test > 0 ? (size_t)test : LC_STAGE_FLOATS;
  return L->max_numel < cap ? L->max_numel : cap;
}

int lc_param_proj(const lc_param_info *p) {
  static const size_t slots[LC_LORA_N] = {
      offsetof(lc_layer_weights, wq),    offsetof(lc_layer_weights, wk), offsetof(lc_layer_weights, wv),
      offsetof(lc_layer_weights, wo),    offsetof(lc_layer_weights, wgate), offsetof(lc_layer_weights, wup),
      offsetof(lc_layer_weights, wdown)};
  if (p->layer < 0 || p->ndim != 2) return -1;
  for (int i = 0; i < LC_LORA_N; i++)
    if (p->slot == slots[i]) return i;
  return -1;
}

// Where cfg keeps tensor p's block type (base_q[layer][proj], base_q_embed, base_q_head);
// NULL for a tensor that is always dense (norms, biases, adapters).
static unsigned char *base_q_slot(lc_config *cfg, const lc_param_info *p) {
  if (p->ndim != 2) return NULL;
  const int j = lc_param_proj(p);
  if (j >= 0) return p->layer < LC_MAX_LAYERS ? &cfg->base_q[p->layer][j] : NULL;
  if (p->layer >= 0) return NULL;
  return p->slot == offsetof(lc_weights, embed) ? &cfg->base_q_embed : p->slot == offsetof(lc_weights, head) ? &cfg->base_q_head : NULL;
}

int lc_param_base_q(const lc_config *cfg, const lc_param_info *p) {
  if (!lc_config_base_quant(cfg)) return 0;
  const unsigned char *q = base_q_slot((lc_config *)cfg, p);
  return q ? *q : 0;
}

int lc_param_set_base_q(lc_config *cfg, const lc_param_info *p, int q) {
  unsigned char *s = base_q_slot(cfg, p);
  if (!s || (q && (size_t)p->shape[1] % lc_dtype_block((lc_dtype)q))) return 0;
  *s = (unsigned char)q;
  return 1;
}
