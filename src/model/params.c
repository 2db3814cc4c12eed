#include "model/params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void add(lc_param_info *t, int *n, size_t *off, const char *name, int ndim, long r,
                long c, int decay) {
  lc_param_info *p = &t[(*n)++];
  memset(p, 0, sizeof *p);
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

lc_status lc_param_table(const lc_config *cfg, lc_param_info **table, int *n, size_t *total) {
  if (cfg->n_layers > LC_MAX_LAYERS)
    return lc_fail(LC_EINVAL, "model has %d layers; longctx supports at most %d", cfg->n_layers,
                   LC_MAX_LAYERS);
  int cap = 3 + 9 * cfg->n_layers;
  lc_param_info *t = calloc((size_t)cap, sizeof *t);
  if (!t) return lc_fail(LC_ENOMEM, "out of memory building the parameter table");
  long C = cfg->dim, D = cfg->head_dim, F = cfg->ffn, V = cfg->vocab;
  long HQ = cfg->n_heads * D, HKV = cfg->n_kv_heads * D;
  int k = 0;
  size_t off = 0;
  char nm[96];
  add(t, &k, &off, "model.embed_tokens.weight", 2, V, C, 1);
  for (int l = 0; l < cfg->n_layers; l++) {
#define LNAME(s) (snprintf(nm, sizeof nm, "model.layers.%d.%s", l, s), nm)
    add(t, &k, &off, LNAME("input_layernorm.weight"), 1, C, 0, 0);
    add(t, &k, &off, LNAME("self_attn.q_proj.weight"), 2, HQ, C, 1);
    add(t, &k, &off, LNAME("self_attn.k_proj.weight"), 2, HKV, C, 1);
    add(t, &k, &off, LNAME("self_attn.v_proj.weight"), 2, HKV, C, 1);
    add(t, &k, &off, LNAME("self_attn.o_proj.weight"), 2, C, HQ, 1);
    add(t, &k, &off, LNAME("post_attention_layernorm.weight"), 1, C, 0, 0);
    add(t, &k, &off, LNAME("mlp.gate_proj.weight"), 2, F, C, 1);
    add(t, &k, &off, LNAME("mlp.up_proj.weight"), 2, F, C, 1);
    add(t, &k, &off, LNAME("mlp.down_proj.weight"), 2, C, F, 1);
#undef LNAME
  }
  add(t, &k, &off, "model.norm.weight", 1, C, 0, 0);
  if (!cfg->tie_embeddings) add(t, &k, &off, "lm_head.weight", 2, V, C, 1);
  *table = t;
  *n = k;
  *total = off;
  return LC_OK;
}

void lc_weights_view(lc_weights *w, const lc_config *cfg, const lc_param_info *t, int n,
                     float *flat) {
  memset(w, 0, sizeof *w);
  int k = 0;
  w->embed = flat + t[k++].offset;
  for (int l = 0; l < cfg->n_layers; l++) {
    lc_layer_weights *L = &w->layer[l];
    L->ln1 = flat + t[k++].offset;
    L->wq = flat + t[k++].offset;
    L->wk = flat + t[k++].offset;
    L->wv = flat + t[k++].offset;
    L->wo = flat + t[k++].offset;
    L->ln2 = flat + t[k++].offset;
    L->wgate = flat + t[k++].offset;
    L->wup = flat + t[k++].offset;
    L->wdown = flat + t[k++].offset;
  }
  w->norm = flat + t[k++].offset;
  w->head = cfg->tie_embeddings ? w->embed : flat + t[k++].offset;
  (void)n;
}

void lc_params_init(float *flat, const lc_param_info *t, int n, lc_rng *rng) {
  for (int i = 0; i < n; i++) {
    float *p = flat + t[i].offset;
    if (t[i].ndim == 1) {
      for (size_t j = 0; j < t[i].numel; j++) p[j] = 1.0f;
    } else {
      lc_rng_fill_normal(rng, p, (long)t[i].numel, 0.02f);
    }
  }
}
