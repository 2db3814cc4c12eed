#include "model/model.h"

#include <stdlib.h>
#include <string.h>

#include "model/layer.h"
#include "model/loss.h"
#include "ops/ops.h"

#define F32(n) (sizeof(float) * (size_t)(n))
#define PAD16(n) (((size_t)(n) + 15) & ~(size_t)15)

const char *lc_ckpt_name(lc_ckpt_policy p) {
  return p == LC_CKPT_NONE ? "none" : p == LC_CKPT_FULL ? "full" : "selective";
}

lc_status lc_ckpt_parse(const char *s, lc_ckpt_policy *p) {
  if (!strcmp(s, "none")) *p = LC_CKPT_NONE;
  else if (!strcmp(s, "full")) *p = LC_CKPT_FULL;
  else if (!strcmp(s, "selective")) *p = LC_CKPT_SELECTIVE;
  else return lc_fail(LC_EINVAL, "--checkpoint '%s' is not a policy: use none, full or selective", s);
  return LC_OK;
}

lc_status lc_model_create(lc_model *m, const lc_config *cfg, lc_arena *arena) {
  memset(m, 0, sizeof *m);
  LC_TRY(lc_config_validate(cfg));
  m->cfg = *cfg;
  LC_TRY(lc_param_table(cfg, &m->table, &m->n_tensors, &m->n_flat));
  m->params = lc_calloc(arena, LC_MEM_PARAMS, F32(m->n_flat), "parameters");
  m->grads = m->params ? lc_calloc(arena, LC_MEM_GRADS, F32(m->n_flat), "gradients") : NULL;
  if (!m->params || !m->grads) {
    lc_model_destroy(m, arena);
    return LC_ENOMEM;
  }
  lc_weights_view(&m->w, cfg, m->table, m->n_tensors, m->params);
  lc_weights_view(&m->g, cfg, m->table, m->n_tensors, m->grads);
  return LC_OK;
}

void lc_model_destroy(lc_model *m, lc_arena *arena) {
  lc_free(arena, m->grads);
  lc_free(arena, m->params);
  free(m->table);
  memset(m, 0, sizeof *m);
}

void lc_model_init_random(lc_model *m, uint64_t seed) {
  lc_rng r;
  lc_rng_seed(&r, seed);
  lc_params_init(m->params, m->table, m->n_tensors, &r);
}

void lc_model_zero_grads(lc_model *m) { memset(m->grads, 0, F32(m->n_flat)); }

// ---- activation groups (floats per layer, each sub-buffer padded to 16 floats)
// proj: ln1, rstd1, q, k, v, x_mid      attn: att + strategy state     mlp: ln2, rstd2, gate, up, h
typedef struct {
  size_t proj, attn, mlp;
} act_sizes;

static act_sizes act_group_sizes(const lc_config *c, int T, size_t saved_bytes, int mlp_untiled) {
  size_t HQ = (size_t)c->n_heads * c->head_dim, HKV = (size_t)c->n_kv_heads * c->head_dim;
  act_sizes s;
  s.proj = PAD16((size_t)T * c->dim) * 2 + PAD16(T) + PAD16((size_t)T * HQ) +
           2 * PAD16((size_t)T * HKV);
  s.attn = PAD16((size_t)T * HQ) + PAD16((saved_bytes + 3) / 4);
  s.mlp = mlp_untiled ? PAD16((size_t)T * c->dim) + PAD16(T) + 3 * PAD16((size_t)T * c->ffn) : 0;
  return s;
}

// Floats per layer of checkpoint storage and of shared working storage.
static void pass_floats(const lc_config *cfg, const lc_model_opts *o, int T, size_t saved_bytes,
                        size_t *per_layer_out, size_t *shared_out) {
  const int C = cfg->dim, D = cfg->head_dim;
  const int mlp_untiled = !lc_tile_splits(o->mlp_tile, T);
  const lc_ckpt_policy pol = o->ckpt;
  act_sizes sz = act_group_sizes(cfg, T, saved_bytes, mlp_untiled);
  size_t per_layer = PAD16((size_t)T * C); // layer input
  if (pol == LC_CKPT_NONE) per_layer += sz.proj + sz.attn + sz.mlp;
  if (pol == LC_CKPT_SELECTIVE) per_layer += sz.attn;
  size_t shared = 0;
  if (pol == LC_CKPT_FULL) shared = sz.proj + sz.attn + sz.mlp;
  if (pol == LC_CKPT_SELECTIVE) shared = sz.proj + sz.mlp;
  shared += PAD16((size_t)T * C) * 2 + 2 * PAD16((size_t)T * (D / 2)); // x_L / dx, rope tables
  *per_layer_out = per_layer;
  *shared_out = shared;
}

void lc_model_pass_bytes(const lc_config *cfg, const lc_model_opts *o, int T,
                         size_t attn_saved_bytes, size_t *ckpt, size_t *act) {
  size_t per_layer, shared;
  pass_floats(cfg, o, T, attn_saved_bytes, &per_layer, &shared);
  *ckpt = F32(per_layer * cfg->n_layers);
  *act = F32(shared);
}

static float *take(float **p, size_t n) {
  float *r = *p;
  *p += PAD16(n);
  return r;
}

static void carve_proj(lc_layer_acts *a, const lc_config *c, int T, float *p) {
  size_t HQ = (size_t)c->n_heads * c->head_dim, HKV = (size_t)c->n_kv_heads * c->head_dim;
  a->ln1 = take(&p, (size_t)T * c->dim);
  a->x_mid = take(&p, (size_t)T * c->dim);
  a->rstd1 = take(&p, T);
  a->q = take(&p, (size_t)T * HQ);
  a->k = take(&p, (size_t)T * HKV);
  a->v = take(&p, (size_t)T * HKV);
}

static void carve_attn(lc_layer_acts *a, const lc_config *c, int T, float *p) {
  a->att = take(&p, (size_t)T * c->n_heads * c->head_dim);
  a->saved = p;
}

static void carve_mlp(lc_layer_acts *a, const lc_config *c, int T, float *p) {
  if (!p) {
    a->ln2 = a->rstd2 = a->gate = a->up = a->h = NULL;
    return;
  }
  a->ln2 = take(&p, (size_t)T * c->dim);
  a->rstd2 = take(&p, T);
  a->gate = take(&p, (size_t)T * c->ffn);
  a->up = take(&p, (size_t)T * c->ffn);
  a->h = take(&p, (size_t)T * c->ffn);
}

static lc_status check_tokens(const lc_config *c, const int *tokens, const int *targets, int T) {
  for (int t = 0; t < T; t++) {
    if (tokens[t] < 0 || tokens[t] >= c->vocab)
      return lc_fail(LC_EINVAL, "token id %d at position %d is outside the vocabulary [0, %d)",
                     tokens[t], t, c->vocab);
    if (targets[t] >= c->vocab || (targets[t] < 0 && targets[t] != -100))
      return lc_fail(LC_EINVAL, "label %d at position %d is outside the vocabulary [0, %d) and not -100",
                     targets[t], t, c->vocab);
  }
  return LC_OK;
}

static lc_status model_pass(lc_model *m, const lc_model_opts *o, lc_attn *attn, const int *tokens,
                            const int *targets, const int *pos, int T, float loss_scale,
                            int want_grads, double *loss_sum, long *n_wrong, lc_arena *arena) {
  const lc_config *cfg = &m->cfg;
  const int L = cfg->n_layers, C = cfg->dim, D = cfg->head_dim;
  if (T <= 0) return lc_fail(LC_EINVAL, "a sequence needs at least one token");
  LC_TRY(check_tokens(cfg, tokens, targets, T));
  const int mlp_untiled = !lc_tile_splits(o->mlp_tile, T);
  const lc_ckpt_policy pol = o->ckpt;
  const size_t saved_bytes = attn->saved_bytes(attn, T);
  act_sizes sz = act_group_sizes(cfg, T, saved_bytes, mlp_untiled);

  // Per-layer storage (checkpoints) and shared working storage (recomputed per layer).
  size_t per_layer, shared;
  pass_floats(cfg, o, T, saved_bytes, &per_layer, &shared);

  lc_status st = LC_OK;
  float *ck = lc_alloc(arena, LC_MEM_CKPT, F32(per_layer * L), "layer checkpoints");
  float *act = ck ? lc_alloc(arena, LC_MEM_ACT, F32(shared), "layer activations") : NULL;
  lc_layer_acts *acts = calloc((size_t)L, sizeof *acts);
  float **xs = calloc((size_t)L, sizeof *xs);
  if (!ck || !act || !acts || !xs) {
    st = acts && xs ? LC_ENOMEM : lc_fail(LC_ENOMEM, "out of memory for layer bookkeeping");
    goto done;
  }
  float *ap = act;
  float *xL = take(&ap, (size_t)T * C), *dx = take(&ap, (size_t)T * C);
  float *rcos = take(&ap, (size_t)T * (D / 2)), *rsin = take(&ap, (size_t)T * (D / 2));
  lc_layer_acts shared_acts;
  memset(&shared_acts, 0, sizeof shared_acts);
  if (pol != LC_CKPT_NONE) {
    if (pol == LC_CKPT_FULL) {
      carve_proj(&shared_acts, cfg, T, ap);
      carve_attn(&shared_acts, cfg, T, ap + sz.proj);
      carve_mlp(&shared_acts, cfg, T, mlp_untiled ? ap + sz.proj + sz.attn : NULL);
    } else {
      carve_proj(&shared_acts, cfg, T, ap);
      carve_mlp(&shared_acts, cfg, T, mlp_untiled ? ap + sz.proj : NULL);
    }
  }
  for (int l = 0; l < L; l++) {
    float *p = ck + per_layer * l;
    xs[l] = take(&p, (size_t)T * C);
    acts[l] = shared_acts;
    if (pol == LC_CKPT_NONE) {
      carve_proj(&acts[l], cfg, T, p);
      carve_attn(&acts[l], cfg, T, p + sz.proj);
      carve_mlp(&acts[l], cfg, T, mlp_untiled ? p + sz.proj + sz.attn : NULL);
    } else if (pol == LC_CKPT_SELECTIVE) {
      carve_attn(&acts[l], cfg, T, p);
    }
  }
  lc_rope_table(rcos, rsin, pos, T, D, cfg->rope_theta);
  lc_layer_ctx ctx = {.cfg = cfg, .attn = attn, .rope_cos = rcos, .rope_sin = rsin, .T = T,
                      .mlp_tile = mlp_untiled ? 0 : o->mlp_tile, .arena = arena};

  // Forward.
  lc_embedding_fwd(xs[0], tokens, m->w.embed, T, C);
  for (int l = 0; l < L && st == LC_OK; l++)
    st = lc_layer_fwd(&ctx, &m->w.layer[l], &acts[l], xs[l], l + 1 < L ? xs[l + 1] : xL, 0);
  if (st != LC_OK) goto done;
  // Loss (and its gradient w.r.t. x_L, head and final norm, in the same pass).
  st = lc_loss_fwd_bwd(cfg, &m->w, &m->g, xL, targets, T, o->loss_tile, loss_scale,
                       want_grads ? dx : NULL, loss_sum, n_wrong, arena);
  if (st != LC_OK || !want_grads) goto done;
  // Backward, recomputing what the policy did not keep.
  for (int l = L - 1; l >= 0 && st == LC_OK; l--) {
    if (pol != LC_CKPT_NONE)
      st = lc_layer_fwd(&ctx, &m->w.layer[l], &acts[l], xs[l], NULL, pol == LC_CKPT_SELECTIVE);
    if (st == LC_OK) st = lc_layer_bwd(&ctx, &m->w.layer[l], &m->g.layer[l], &acts[l], xs[l], dx);
  }
  if (st == LC_OK) lc_embedding_bwd(m->g.embed, dx, tokens, T, C);
done:
  free(xs);
  free(acts);
  lc_free(arena, act);
  lc_free(arena, ck);
  return st;
}

lc_status lc_model_fwd_bwd(lc_model *m, const lc_model_opts *o, lc_attn *attn, const int *tokens,
                           const int *targets, const int *pos, int T, float loss_scale,
                           int want_grads, double *loss_sum, lc_arena *arena) {
  return model_pass(m, o, attn, tokens, targets, pos, T, loss_scale, want_grads, loss_sum, NULL, arena);
}

lc_status lc_model_eval(lc_model *m, const lc_model_opts *o, lc_attn *attn, const int *tokens,
                        const int *targets, const int *pos, int T, double *loss_sum,
                        long *n_wrong, lc_arena *arena) {
  return model_pass(m, o, attn, tokens, targets, pos, T, 1.0f, 0, loss_sum, n_wrong, arena);
}
