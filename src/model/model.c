#include "model/model.h"

#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/runstate.h"
#include "model/ckstore.h"
#include "model/layer.h"
#include "model/loss.h"
#include "ops/ops.h"
#include "ops/rope.h"
#include "ops/kernels.h"

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

const char *lc_mem_phase_name(lc_mem_phase p) {
  static const char *names[LC_PHASE_N] = {"embedding forward", "attention forward", "MLP forward tile",
                                          "loss", "MLP backward", "attention backward",
                                          "embedding backward"};
  return (p >= 0 && p < LC_PHASE_N) ? names[p] : "?";
}

static void shortcuts(lc_model *m) {
  m->table = m->ps.lay.table;
  m->n_tensors = m->ps.lay.n_tensors;
  m->n_flat = m->ps.lay.total;
  m->params = m->ps.params;
  m->grads = m->ps.grads;
}

lc_status lc_model_create_zero(lc_model *m, const lc_config *cfg, int stage, int group, lc_comm *world,
                               lc_arena *arena) {
  memset(m, 0, sizeof *m);
  LC_TRY(lc_config_validate(cfg));
  m->cfg = *cfg;
  LC_TRY(lc_pstore_create(&m->ps, cfg, stage, group, world, arena));
  shortcuts(m);
  return LC_OK;
}

lc_status lc_model_create(lc_model *m, const lc_config *cfg, lc_arena *arena) {
  return lc_model_create_zero(m, cfg, 0, 0, NULL, arena);
}

void lc_model_destroy(lc_model *m, lc_arena *arena) {
  (void)arena; // the store frees into the arena it was created with
  lc_pstore_destroy(&m->ps);
  memset(m, 0, sizeof *m);
}

lc_status lc_model_init_random(lc_model *m, uint64_t seed) { return lc_pstore_init_random(&m->ps, seed); }

void lc_model_zero_grads(lc_model *m) { lc_pstore_step_begin(&m->ps, 0); }

// ---- activation groups (floats per layer, each sub-buffer padded to 16 floats)
// proj: ln1, rstd1, q, k, v, x_mid (qk_norm: qp, kp, rstdq, rstdk)     attn: att + strategy state     mlp: ln2, rstd2, gate, up, h
typedef struct {
  size_t proj, attn, mlp;
} act_sizes;

static act_sizes act_group_sizes(const lc_config *c, int T, size_t saved_bytes, int mlp_untiled) {
  size_t HQ = (size_t)c->n_heads * c->head_dim, HKV = (size_t)c->n_kv_heads * c->head_dim;
  act_sizes s;
  s.proj = PAD16((size_t)T * c->dim) * 2 + PAD16(T) + PAD16((size_t)T * HQ) +
           2 * PAD16((size_t)T * HKV) + lc_layer_qknorm_floats(c, T);
  s.attn = PAD16((size_t)T * HQ) + PAD16((saved_bytes + 3) / 4);
  s.mlp = mlp_untiled ? PAD16((size_t)T * c->dim) + PAD16(T) + 3 * PAD16((size_t)T * c->ffn) : 0;
  return s;
}

// Elements of a layer input as stored (padded so the float groups after it stay aligned).
static size_t pad32(size_t n) { return (n + 31) & ~(size_t)31; }
static size_t xin_elems(const lc_config *cfg, int T) { return pad32((size_t)T * cfg->dim); }
// The layer input each layer keeps: fp32, or bf16 when the model computes in bf16 (every
// layer's output is then rounded to bf16, so the stored input is exact).
static lc_dtype xin_dtype(const lc_model_opts *o) { return o->precision == LC_DT_BF16 ? LC_DT_BF16 : LC_DT_F32; }
// Selective checkpointing in bf16 keeps each layer's attention output (bf16 values) in 2
// bytes, widened into the shared working buffer for the layer's backward.
static int att_kept_bf16(const lc_model_opts *o) { return o->precision == LC_DT_BF16 && o->ckpt == LC_CKPT_SELECTIVE; }
static size_t att_elems(const lc_config *cfg, int T) { return pad32((size_t)T * cfg->n_heads * cfg->head_dim); }

// Bytes per layer of checkpoint storage (the layer input, the bf16 attention output when
// kept that way, then the float groups the policy keeps) and floats of shared working storage.
static void pass_sizes(const lc_config *cfg, const lc_model_opts *o, int T, size_t saved_bytes,
                       size_t *per_layer_out, size_t *shared_out) {
  const int C = cfg->dim, D = cfg->head_dim;
  const int mlp_untiled = !lc_tile_splits(o->mlp_tile, T), att16 = att_kept_bf16(o);
  const lc_ckpt_policy pol = o->ckpt;
  act_sizes sz = act_group_sizes(cfg, T, saved_bytes, mlp_untiled);
  const size_t att = PAD16((size_t)T * cfg->n_heads * D); // floats of the fp32 attention output
  size_t kept = 0; // floats
  if (pol == LC_CKPT_NONE) kept += sz.proj + sz.attn + sz.mlp;
  if (pol == LC_CKPT_SELECTIVE) kept += att16 ? sz.attn - att : sz.attn;
  size_t shared = 0;
  if (pol == LC_CKPT_FULL) shared = sz.proj + sz.attn + sz.mlp;
  if (pol == LC_CKPT_SELECTIVE) shared = sz.proj + sz.mlp + (att16 ? att : 0);
  shared += PAD16((size_t)T * C) * 2 + 2 * PAD16((size_t)T * (D / 2)); // x_L / dx, rope tables
  *per_layer_out = lc_bytes(xin_dtype(o), xin_elems(cfg, T)) + (att16 ? lc_bytes(LC_DT_BF16, att_elems(cfg, T)) : 0) +
                   lc_bytes(LC_DT_F32, kept);
  *shared_out = shared;
}

void lc_model_pass_bytes(const lc_config *cfg, const lc_model_opts *o, int T,
                         size_t attn_saved_bytes, size_t *ckpt, size_t *act) {
  size_t per_layer, shared;
  pass_sizes(cfg, o, T, attn_saved_bytes, &per_layer, &shared);
  *ckpt = lc_ckstore_bytes(cfg->n_layers, per_layer, o->offload_dir != NULL);
  *act = lc_bytes(LC_DT_F32, shared);
}

// One occurrence of phase p with g gathered and r temporary gradient bytes alive.
static void occur(size_t *G, size_t *R, size_t *GR, int p, size_t g, size_t r) {
  if (g > G[p]) G[p] = g;
  if (r > R[p]) R[p] = r;
  if (g + r > GR[p]) GR[p] = g + r;
}

void lc_model_zero_transients(const lc_config *cfg, const lc_model_opts *o, int stage, int Z,
                              size_t *G, size_t *R, size_t *GR, int n_phases) {
  for (int p = 0; p < n_phases; p++) G[p] = R[p] = GR[p] = 0;
  lc_ps_sizes z;
  const int bf16 = o->precision == LC_DT_BF16;
  if ((stage < 2 && !bf16) || n_phases < LC_PHASE_N || lc_pstore_sizes(cfg, stage, Z, &z) != LC_OK) return;
  const int L = cfg->n_layers, g3 = stage >= 3, r2 = stage >= 2;
  // Stages 0-2 in bf16: the rounded copy of each unit in use (lc_pstore_acquire); stage 3
  // rounds its gathered copy in place.
  const int cw = bf16 && !g3;
  const size_t e = z.unit_embed, l = z.unit_layer, f = z.unit_final, te = cfg->tie_embeddings ? e : 0;
  // Forward: the unit in use and the next one's gather (model_pass's order).
  occur(G, R, GR, LC_PHASE_EMBED_FWD, g3 ? e + l : cw ? e : 0, 0);
  for (int k = 0; k < L; k++) {
    size_t g = g3 ? l + (k + 1 < L ? l : f) : cw ? l : 0;
    occur(G, R, GR, LC_PHASE_ATTN_FWD, g, 0);
    occur(G, R, GR, LC_PHASE_MLP_FWD, g, 0);
  }
  // Loss: F (+ the tied embedding) gathered with layer L-1's prefetch; their gradients open.
  occur(G, R, GR, LC_PHASE_LOSS, g3 ? f + te + l : cw ? f + te : 0, r2 ? f + te : 0);
  // Backward of layer k: k and k-1 gathered; k's gradient, the previous unit's still in
  // flight (F for the last layer) and the tied embedding's open buffer.
  for (int k = L - 1; k >= 0; k--) {
    size_t g = g3 ? l + (k > 0 ? l : 0) : cw ? l : 0, r = r2 ? l + (k == L - 1 ? f : l) + te : 0;
    occur(G, R, GR, LC_PHASE_MLP_BWD, g, r);
    occur(G, R, GR, LC_PHASE_ATTN_BWD, g, r);
    if (o->ckpt == LC_CKPT_FULL) occur(G, R, GR, LC_PHASE_ATTN_FWD, g, r);
  }
  // Embedding gradient: layer 0's still in flight.
  occur(G, R, GR, LC_PHASE_EMBED_BWD, 0, r2 ? l + e : 0);
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
  lc_layer_qknorm_carve(a, c, T, p);
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

// Where a layer's checkpoint block holds what the policy keeps: the layer input (as stored),
// the bf16 attention output (selective in bf16), then the kept float groups; the rest of
// the layer's activations point at the shared working storage.
typedef struct {
  const lc_config *cfg;
  lc_ckpt_policy pol;
  int T, att16, mlp_untiled;
  act_sizes sz;
  size_t xin_bytes, att16_bytes;
  lc_layer_acts shared;
} layer_carver;

static void carve_layer(const layer_carver *c, char *lp, void **xs, uint16_t **att, lc_layer_acts *a) {
  float *p = (float *)(void *)(lp + c->xin_bytes + c->att16_bytes);
  *xs = lp;
  *att = c->att16 ? (uint16_t *)(void *)(lp + c->xin_bytes) : NULL;
  *a = c->shared;
  if (c->pol == LC_CKPT_NONE) {
    carve_proj(a, c->cfg, c->T, p);
    carve_attn(a, c->cfg, c->T, p + c->sz.proj);
    carve_mlp(a, c->cfg, c->T, c->mlp_untiled ? p + c->sz.proj + c->sz.attn : NULL);
  } else if (c->pol == LC_CKPT_SELECTIVE && c->att16) {
    a->saved = p; // the strategy's state stays fp32; att is the shared working buffer
  } else if (c->pol == LC_CKPT_SELECTIVE) {
    carve_attn(a, c->cfg, c->T, p);
  }
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

void lc_model_rope_table(const lc_config *cfg, int rope_len, const int *pos, int T, float *cos_t, float *sin_t) {
  long len = rope_len;
  for (int t = 0; rope_len <= 0 && t < T; t++) len = pos[t] + 1L > len ? pos[t] + 1L : len;
  double inv[LC_ROPE_MAX_PAIRS], af;
  lc_rope_freqs(inv, &af, cfg->head_dim, cfg->rope_theta, &cfg->rope, cfg->max_pos, len);
  lc_rope_table_freqs(cos_t, sin_t, pos, T, cfg->head_dim, inv, af);
}

static void poll_store(void *ps) { lc_pstore_poll(ps); }

static lc_status model_pass(lc_model *m, const lc_model_opts *o, lc_attn *attn, const int *tokens,
                            const int *targets, const int *pos, int T, float loss_scale,
                            int want_grads, double *loss_sum, long *n_wrong, lc_arena *arena) {
  const lc_config *cfg = &m->cfg;
  lc_pstore *ps = &m->ps;
  // The store computes in the pass's precision until the pass ends (then as before: a
  // model prepared for bf16 inference keeps its setting).
  const lc_dtype compute0 = ps->compute;
  const int L = cfg->n_layers, C = cfg->dim, D = cfg->head_dim;
  if (T <= 0) return lc_fail(LC_EINVAL, "a sequence needs at least one token");
  LC_TRY(check_tokens(cfg, tokens, targets, T));
  const int mlp_untiled = !lc_tile_splits(o->mlp_tile, T);
  const lc_ckpt_policy pol = o->ckpt;
  attn->bf16 = o->precision == LC_DT_BF16; // what the strategy keeps depends on it
  const size_t saved_bytes = attn->saved_bytes(attn, T);
  act_sizes sz = act_group_sizes(cfg, T, saved_bytes, mlp_untiled);

  // Per-layer storage (checkpoints) and shared working storage (recomputed per layer).
  size_t per_layer, shared;
  pass_sizes(cfg, o, T, saved_bytes, &per_layer, &shared);
  const int bf16 = o->precision == LC_DT_BF16, att16 = att_kept_bf16(o);
  const size_t xin_bytes = lc_bytes(xin_dtype(o), xin_elems(cfg, T));
  const size_t att16_bytes = att16 ? lc_bytes(LC_DT_BF16, att_elems(cfg, T)) : 0;
  const size_t HQT = (size_t)T * cfg->n_heads * D;

  lc_status st = LC_OK;
  // Layer checkpoints: in RAM, or offloaded with only the layers in flight resident.
  lc_ckstore *cks = NULL;
  st = lc_ckstore_open(&cks, L, per_layer, o->offload_dir, arena);
  float *act = st == LC_OK ? lc_alloc(arena, LC_MEM_ACT, lc_bytes(LC_DT_F32, shared), "layer activations") : NULL;
  lc_layer_acts *acts = calloc((size_t)L, sizeof *acts);
  void **xs = calloc((size_t)L, sizeof *xs); // layer inputs as stored (float or bf16)
  uint16_t **atts = calloc((size_t)L, sizeof *atts); // attention outputs kept in bf16 (att16)
  if (st != LC_OK || !act || !acts || !xs || !atts) {
    st = st != LC_OK ? st : acts && xs && atts ? LC_ENOMEM : lc_fail(LC_ENOMEM, "out of memory for layer bookkeeping");
    goto done;
  }
  float *ap = act;
  float *xL = take(&ap, (size_t)T * C), *dx = take(&ap, (size_t)T * C);
  float *rcos = take(&ap, (size_t)T * (D / 2)), *rsin = take(&ap, (size_t)T * (D / 2));
  layer_carver lcv = {.cfg = cfg, .pol = pol, .T = T, .att16 = att16, .mlp_untiled = mlp_untiled, .sz = sz,
                      .xin_bytes = xin_bytes, .att16_bytes = att16_bytes};
  lc_layer_acts *shared_acts = &lcv.shared;
  if (pol != LC_CKPT_NONE) {
    if (pol == LC_CKPT_FULL) {
      carve_proj(shared_acts, cfg, T, ap);
      carve_attn(shared_acts, cfg, T, ap + sz.proj);
      carve_mlp(shared_acts, cfg, T, mlp_untiled ? ap + sz.proj + sz.attn : NULL);
    } else {
      carve_proj(shared_acts, cfg, T, ap);
      carve_mlp(shared_acts, cfg, T, mlp_untiled ? ap + sz.proj : NULL);
      if (att16) shared_acts->att = ap + sz.proj + sz.mlp; // working fp32 attention output
    }
  }
  void *lbuf;
  // Where layer l reads its input in forward. fp32: the checkpoint itself. bf16: a working
  // fp32 buffer (dx and xL alternate, so the last layer writes xL), packed into the
  // checkpoint before the layer runs; backward widens the checkpoint into xL (free by then).
  float *xin_fwd[2] = {L % 2 == 0 ? xL : dx, L % 2 == 0 ? dx : xL};
  lc_model_rope_table(cfg, m->rope_len, pos, T, rcos, rsin);
  lc_layer_ctx ctx = {.cfg = cfg, .attn = attn, .rope_cos = rcos, .rope_sin = rsin, .T = T,
                      .mlp_tile = mlp_untiled ? 0 : o->mlp_tile, .bf16 = bf16, .arena = arena,
                      .poll = poll_store, .poll_arg = ps};
  lc_pstore_set_compute(ps, bf16 ? LC_DT_BF16 : LC_DT_F32);
  attn->poll = poll_store;
  attn->poll_arg = ps;
  // The store's units: E (embedding), layer l, F (final norm + untied head). Each is
  // acquired (ZeRO-3: gathered) right before use with the next one's gather issued, and
  // released after; gradient buffers open before a unit's backward and are handed to
  // their reduction after it. lc_model_zero_transients mirrors this order exactly.
  const int E = LC_UNIT_EMBED, F = lc_unit_final(L), tied = cfg->tie_embeddings;
  lc_pstore_pass_begin(ps, want_grads);

  // Forward. Layer l writes its output into layer l+1's checkpoint (fp32), so both are
  // put before it runs; l's is complete (may go to disk) once it has run.
  st = lc_ckstore_put_begin(cks, 0, &lbuf);
  if (st == LC_OK) carve_layer(&lcv, lbuf, &xs[0], &atts[0], &acts[0]);
  if (st == LC_OK) st = lc_pstore_acquire(ps, E, lc_unit_layer(0));
  if (st != LC_OK) goto done;
  lc_embedding_fwd(bf16 ? xin_fwd[0] : xs[0], tokens, ps->w.embed, T, C); // bf16: rows of the bf16 copy
  lc_pstore_release(ps, E);
  lc_test_point("forward");
  for (int l = 0; l < L && st == LC_OK; l++) {
    st = lc_pstore_acquire(ps, lc_unit_layer(l), l + 1 < L ? lc_unit_layer(l + 1) : F);
    if (st == LC_OK && l + 1 < L) st = lc_ckstore_put_begin(cks, l + 1, &lbuf);
    if (st == LC_OK && l + 1 < L) carve_layer(&lcv, lbuf, &xs[l + 1], &atts[l + 1], &acts[l + 1]);
    if (st == LC_OK && bf16) {
      lc_bf16_pack(xs[l], xin_fwd[l % 2], (size_t)T * C);
      st = lc_layer_fwd(&ctx, &ps->w.layer[l], &acts[l], xin_fwd[l % 2], xin_fwd[(l + 1) % 2], 0);
      if (st == LC_OK && att16) lc_bf16_pack(atts[l], acts[l].att, HQT); // exact: att holds bf16 values
    } else if (st == LC_OK) {
      st = lc_layer_fwd(&ctx, &ps->w.layer[l], &acts[l], xs[l], l + 1 < L ? xs[l + 1] : xL, 0);
    }
    lc_pstore_release(ps, lc_unit_layer(l));
    if (st == LC_OK) st = lc_ckstore_put_end(cks, l);
  }
  if (st != LC_OK) goto done;
  // Loss (and its gradient w.r.t. x_L, head and final norm, in the same pass). A tied head
  // is the embedding: acquired again, and its gradient buffer stays open until the end.
  const int bwd_first = want_grads ? lc_unit_layer(L - 1) : -1;
  st = lc_pstore_acquire(ps, F, tied ? E : bwd_first);
  if (st == LC_OK && tied) st = lc_pstore_acquire(ps, E, bwd_first);
  if (st == LC_OK && want_grads) st = lc_pstore_grad_begin(ps, F);
  if (st == LC_OK && want_grads && tied) st = lc_pstore_grad_begin(ps, E);
  if (st == LC_OK)
    st = lc_loss_fwd_bwd(cfg, &ps->w, &ps->g, xL, targets, T, o->loss_tile, loss_scale, bf16,
                         want_grads ? dx : NULL, loss_sum, n_wrong, arena);
  lc_pstore_release(ps, F);
  if (tied) lc_pstore_release(ps, E);
  if (st != LC_OK || !want_grads) goto done;
  st = lc_pstore_grad_end(ps, F);
  // Backward, recomputing what the policy did not keep.
  for (int l = L - 1; l >= 0 && st == LC_OK; l--) {
    const int u = lc_unit_layer(l);
    // The gradient buffer first: grad_begin retires the older reduction (of F or layer
    // l+2) before this layer's weights and the next gather arrive, so the two never coexist.
    st = lc_pstore_grad_begin(ps, u);
    if (st == LC_OK) st = lc_pstore_acquire(ps, u, l > 0 ? lc_unit_layer(l - 1) : -1);
    // The checkpoint back (read ahead while the layer above computed), the next one's read
    // started.
    if (st == LC_OK) st = lc_ckstore_get(cks, l, l - 1, &lbuf);
    if (st != LC_OK) {
      lc_pstore_release(ps, u);
      break;
    }
    carve_layer(&lcv, lbuf, &xs[l], &atts[l], &acts[l]);
    float *xin = xs[l];
    if (bf16) lc_bf16_unpack(xin = xL, xs[l], (size_t)T * C);
    if (att16) lc_bf16_unpack(acts[l].att, atts[l], HQT);
    if (st == LC_OK && pol != LC_CKPT_NONE)
      st = lc_layer_fwd(&ctx, &ps->w.layer[l], &acts[l], xin, NULL, pol == LC_CKPT_SELECTIVE);
    if (st == LC_OK) st = lc_layer_bwd(&ctx, &ps->w.layer[l], &ps->g.layer[l], &acts[l], xin, dx);
    lc_pstore_release(ps, u);
    lc_ckstore_release(cks, l);
    if (st == LC_OK) st = lc_pstore_grad_end(ps, u);
  }
  if (st == LC_OK) st = lc_pstore_grad_begin(ps, E); // tied: already open (waits as any begin)
  if (st == LC_OK) {
    lc_embedding_bwd(ps->g.embed, dx, tokens, T, C);
    st = lc_pstore_grad_end(ps, E);
  }
done:
  if (st == LC_OK) st = lc_pstore_pass_end(ps);
  lc_pstore_set_compute(ps, compute0);
  attn->poll = NULL;
  attn->poll_arg = NULL;
  free(atts);
  free(xs);
  free(acts);
  lc_free(arena, act);
  const lc_status cs = lc_ckstore_close(cks);
  return st == LC_OK ? cs : st;
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
