#include "model/params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void add(lc_param_info *t, int *n, size_t *off, int unit, const char *name, int ndim, long r,
                long c, int decay) {
  lc_param_info *p = &t[(*n)++];
  memset(p, 0, sizeof *p);
  p->unit = unit;
  snprintf(p->name, sizeof p->name, "%s", name);
  p->ndim = ndim;
  p->shape[0] = r;
  p->shape[1] = ndim == 2 ? c : 1;
  p->numel = (size_t)r * (size_t)(ndim == 2 ? c : 1);
  p->offset = *off;
  p->decay = decay;
  // Keep every tensor 16-float (64-byte) aligned inside the flat buffer.
  *off += (p->numel + 15) & ~(size_t)15;
}

lc_status lc_param_layout_build(lc_param_layout *L, const lc_config *cfg, int shard_ways) {
  memset(L, 0, sizeof *L);
  if (cfg->n_layers > LC_MAX_LAYERS)
    return lc_fail(LC_EINVAL, "model has %d layers; longctx supports at most %d", cfg->n_layers,
                   LC_MAX_LAYERS);
  if (shard_ways < 1) return lc_fail(LC_EINVAL, "parameter layout split %d ways: use >= 1", shard_ways);
  int cap = 3 + 9 * cfg->n_layers;
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
  long C = cfg->dim, D = cfg->head_dim, F = cfg->ffn, V = cfg->vocab;
  long HQ = cfg->n_heads * D, HKV = cfg->n_kv_heads * D;
  int k = 0;
  size_t off = 0;
  char nm[96];
  // Closes unit u: its tensors are table[t0..k); pads it to a multiple of align.
#define CLOSE_UNIT(u, first)                                         \
  do {                                                               \
    lc_param_unit *U = &L->units[u];                                 \
    U->t1 = k;                                                       \
    U->t0 = (first);                                                 \
    off = (off + L->align - 1) / L->align * L->align;                \
    U->n = off - U->off;                                             \
  } while (0)
  L->units[LC_UNIT_EMBED].off = off;
  add(t, &k, &off, LC_UNIT_EMBED, "model.embed_tokens.weight", 2, V, C, 1);
  CLOSE_UNIT(LC_UNIT_EMBED, 0);
  for (int l = 0; l < cfg->n_layers; l++) {
    int u = lc_unit_layer(l), t0 = k;
    L->units[u].off = off;
#define LNAME(s) (snprintf(nm, sizeof nm, "model.layers.%d.%s", l, s), nm)
    add(t, &k, &off, u, LNAME("input_layernorm.weight"), 1, C, 0, 0);
    add(t, &k, &off, u, LNAME("self_attn.q_proj.weight"), 2, HQ, C, 1);
    add(t, &k, &off, u, LNAME("self_attn.k_proj.weight"), 2, HKV, C, 1);
    add(t, &k, &off, u, LNAME("self_attn.v_proj.weight"), 2, HKV, C, 1);
    add(t, &k, &off, u, LNAME("self_attn.o_proj.weight"), 2, C, HQ, 1);
    add(t, &k, &off, u, LNAME("post_attention_layernorm.weight"), 1, C, 0, 0);
    add(t, &k, &off, u, LNAME("mlp.gate_proj.weight"), 2, F, C, 1);
    add(t, &k, &off, u, LNAME("mlp.up_proj.weight"), 2, F, C, 1);
    add(t, &k, &off, u, LNAME("mlp.down_proj.weight"), 2, C, F, 1);
#undef LNAME
    CLOSE_UNIT(u, t0);
  }
  int uf = lc_unit_final(cfg->n_layers), t0 = k;
  L->units[uf].off = off;
  add(t, &k, &off, uf, "model.norm.weight", 1, C, 0, 0);
  if (!cfg->tie_embeddings) add(t, &k, &off, uf, "lm_head.weight", 2, V, C, 1);
  CLOSE_UNIT(uf, t0);
#undef CLOSE_UNIT
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

float **lc_weights_slot(lc_weights *w, const lc_config *cfg, int i) {
  if (i == 0) return &w->embed;
  int k = i - 1;
  if (k < 9 * cfg->n_layers) {
    lc_layer_weights *L = &w->layer[k / 9];
    float **f[9] = {&L->ln1, &L->wq, &L->wk, &L->wv, &L->wo, &L->ln2, &L->wgate, &L->wup, &L->wdown};
    return f[k % 9];
  }
  return k == 9 * cfg->n_layers ? &w->norm : &w->head;
}

void lc_weights_tie(lc_weights *w, const lc_config *cfg) {
  if (cfg->tie_embeddings) w->head = w->embed;
}

void lc_param_init_part(float *dst, const lc_param_info *t, size_t n, lc_rng *rng) {
  if (t->ndim == 1) {
    for (size_t j = 0; j < n; j++) dst[j] = 1.0f;
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
