// The model: its stores (created, initialised, destroyed), the activation and checkpoint
// layout of a pass, and the pass itself, run as its schedule's events (schedule.h), one
// function per event kind; with the embedding and the LM head in vocabulary slices.
#include "model/model.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/runstate.h"
#include "model/ckstore.h"
#include "model/layer.h"
#include "model/loss.h"
#include "model/schedule.h"
#include "backend/stage.h"
#include "core/dropout_hash.h"
#include "core/rope.h"


const char *lc_ckpt_name(lc_ckpt_policy p) {
  return p == LC_CKPT_NONE ? "none" : p == LC_CKPT_FULL ? "full" : "selective";
}

lc_status lc_ckpt_parse(const char *s, lc_ckpt_policy *p) {
  if (!strcmp(s, "none")) *p = LC_CKPT_NONE;
  else if (!strcmp(s, "full")) *p = LC_CKPT_FULL;
  else if (!strcmp(s, "selective")) *p = LC_CKPT_SELECTIVE;
  else return lc_fail(LC_EINVAL, "--checkpoint '%s' is not a policy: use auto, none, selective or full", s);
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

// The store on backend be, or (be NULL) on a CPU backend of its own over arena.
static lc_status create(lc_model *m, const lc_config *cfg, int stage, int group, lc_comm *world, lc_arena *arena,
                        lc_backend *be) {
  memset(m, 0, sizeof *m);
  LC_TRY(lc_config_validate(cfg));
  m->cfg = *cfg;
  const int lora = cfg->lora.rank > 0, bst = lora ? lc_lora_base_stage(stage) : stage, bgr = bst ? group : 0;
  if (lora) LC_TRY(lc_zero_check(stage, group, 0, world ? world->size : 1));
  LC_TRY(be ? lc_pstore_create_on(&m->ps, cfg, bst, bgr, world, be) : lc_pstore_create(&m->ps, cfg, bst, bgr, world, arena));
  if (lora) { // the frozen base has no gradient; the adapters share its backend
    lc_pstore_drop_grads(&m->ps);
    const lc_config acfg = lc_config_adapters(cfg);
    const lc_status st = lc_pstore_create_on(&m->ad, &acfg, stage, group, world, m->ps.be);
    if (st != LC_OK) {
      lc_pstore_destroy(&m->ps);
      return st;
    }
    m->lora = 1;
  }
  shortcuts(m);
  return LC_OK;
}

lc_status lc_model_create_zero(lc_model *m, const lc_config *cfg, int stage, int group, lc_comm *world,
                               lc_arena *arena) {
  return create(m, cfg, stage, group, world, arena, NULL);
}

lc_status lc_model_create_on(lc_model *m, const lc_config *cfg, int stage, int group, lc_comm *world,
                             lc_backend *be) {
  return create(m, cfg, stage, group, world, NULL, be);
}

lc_status lc_model_create(lc_model *m, const lc_config *cfg, lc_arena *arena) {
  return lc_model_create_zero(m, cfg, 0, 0, NULL, arena);
}

void lc_model_destroy(lc_model *m) { // (the store frees into the arena it was created with)
  if (m->lora) lc_pstore_destroy(&m->ad); // (before the base: it may own the backend)
  lc_pstore_destroy(&m->ps);
  memset(m, 0, sizeof *m);
}

lc_status lc_model_init_random(lc_model *m, uint64_t seed) {
  LC_TRY(lc_pstore_init_random(&m->ps, seed)); // (a base's blocks stay as they are: pstore.h)
  return m->lora ? lc_pstore_init_random(&m->ad, lc_lora_seed(seed)) : LC_OK;
}

void lc_model_zero_grads(lc_model *m) { lc_pstore_step_begin(lc_model_trainable(m), 0); }

// ---- a layer's activations in groups (bytes, every piece 64-byte aligned):
//   proj: ln1, x_mid, rstd1 (qk_norm: qp, kp, rstdq, rstdk)    qkv: q, k, v    att: the
//   attention output    saved: the strategy's state    mlp (untiled only): ln2, rstd2, gate, up, h
// ln1, q, k, v, att, ln2, gate, up, h in the layer's activation dtype (2 bytes in bf16:
// layer.h), the rest fp32. Each group lives either in every layer's checkpoint block (kept
// from forward to backward) or once in the shared working storage (recomputed per layer),
// by policy.
enum { G_PROJ, G_QKV, G_ATT, G_SAVED, G_MLP, G_N };
typedef struct {
  size_t g[G_N];
} act_sizes;

static size_t al64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }
static size_t f32b(size_t n) { return al64(lc_bytes(LC_DT_F32, n)); }

static act_sizes act_group_sizes(const lc_config *c, int T, size_t saved_bytes, int mlp_untiled, lc_dtype adt) {
  size_t HQ = (size_t)c->n_heads * c->head_dim, HKV = (size_t)c->n_kv_heads * c->head_dim, t = (size_t)T;
  act_sizes s;
  s.g[G_PROJ] = al64(lc_bytes(adt, t * c->dim)) + f32b(t * c->dim) + f32b(t) + lc_bytes(LC_DT_F32, lc_layer_qknorm_floats(c, T));
  s.g[G_QKV] = al64(lc_bytes(adt, t * HQ)) + 2 * al64(lc_bytes(adt, t * HKV));
  s.g[G_ATT] = al64(lc_bytes(adt, t * HQ));
  s.g[G_SAVED] = al64(saved_bytes);
  s.g[G_MLP] = mlp_untiled ? al64(lc_bytes(adt, t * c->dim)) + f32b(t) + 3 * al64(lc_bytes(adt, t * c->ffn)) : 0;
  return s;
}

// What each layer keeps by policy: the groups (the others are shared).
typedef struct {
  int keep[G_N];
} act_plan;

static act_plan plan_acts(const lc_model_opts *o) {
  act_plan p;
  memset(&p, 0, sizeof p);
  if (o->ckpt == LC_CKPT_NONE) {
    for (int g = 0; g < G_N; g++) p.keep[g] = 1;
  } else if (o->ckpt == LC_CKPT_SELECTIVE) { // attention's output and state; the rest is recomputed
    p.keep[G_SAVED] = 1;
    p.keep[G_ATT] = 1;
  }
  return p;
}

// Elements of a layer input as stored (padded so the groups after it stay aligned).
static size_t pad32(size_t n) { return (n + 31) & ~(size_t)31; }
static size_t xin_elems(const lc_config *cfg, int T) { return pad32((size_t)T * cfg->dim); }
// The layer input each layer keeps: fp32, or bf16 when the model computes in bf16 (every
// layer's output is then rounded to bf16, so the stored input is exact).
static lc_dtype xin_dtype(const lc_model_opts *o) { return o->precision == LC_DT_BF16 ? LC_DT_BF16 : LC_DT_F32; }

// x_L's bytes (the last layer's output as a layer input is stored: bf16 in a bf16 pass).
static size_t xl_bytes(const lc_config *cfg, const lc_model_opts *o, int T) {
  return al64(lc_bytes(xin_dtype(o), (size_t)T * cfg->dim));
}
// Whether x_L lives in the shared q/k/v group's storage: the loss is its only reader, after
// the last layer's forward and before any layer's backward recomputes q/k/v there (full and
// selective recompute them; under none every layer keeps its own, and x_L its own storage).
static int xl_in_qkv(const lc_config *cfg, const lc_model_opts *o, int T, const act_sizes *sz, const act_plan *pl) {
  return !pl->keep[G_QKV] && sz->g[G_QKV] >= xl_bytes(cfg, o, T);
}

// Bytes per layer of checkpoint storage (the layer input as stored, then the groups the
// policy keeps) and bytes of shared working storage.
static void pass_sizes(const lc_config *cfg, const lc_model_opts *o, int T, size_t saved_bytes,
                       size_t *per_layer_out, size_t *shared_out) {
  const int C = cfg->dim, D = cfg->head_dim;
  const int mlp_untiled = !lc_tile_splits(o->mlp_tile, T);
  const act_sizes sz = act_group_sizes(cfg, T, saved_bytes, mlp_untiled, lc_layer_act_dt(o->precision == LC_DT_BF16));
  const act_plan pl = plan_acts(o);
  size_t kept = lc_bytes(xin_dtype(o), xin_elems(cfg, T));
  // x_L (unless in q/k/v's storage), dx, the rope tables
  size_t shared = (xl_in_qkv(cfg, o, T, &sz, &pl) ? 0 : xl_bytes(cfg, o, T)) + f32b((size_t)T * C) +
                  2 * f32b((size_t)T * (D / 2));
  for (int g = 0; g < G_N; g++) *(pl.keep[g] ? &kept : &shared) += sz.g[g];
  *per_layer_out = kept;
  *shared_out = shared;
}

void lc_model_pass_bytes(const lc_config *cfg, const lc_model_opts *o, int T,
                         size_t attn_saved_bytes, size_t *ckpt, size_t *act) {
  size_t per_layer, shared;
  pass_sizes(cfg, o, T, attn_saved_bytes, &per_layer, &shared);
  *ckpt = lc_ckstore_bytes(cfg->n_layers, per_layer, lc_offload_depth(o));
  *act = shared;
}

// The groups' names, as the carving below cuts them.
static const char *const group_name[G_N] = {
    [G_PROJ] = "ln1, x_mid (dq in the attention backward when HQ <= C), rstd1 (+ qk-norm)", [G_QKV] = "q, k, v (token layout)", [G_ATT] = "attention output",
    [G_SAVED] = "attention state kept (LSE; Ulysses head-layout q/k/v/out)", [G_MLP] = "MLP ln2, rstd2, gate, up, h"};
static const char *const kept_name[G_N] = {
    [G_PROJ] = "checkpoint: ln1, x_mid, rstd1", [G_QKV] = "checkpoint: q, k, v", [G_ATT] = "checkpoint: attention output",
    [G_SAVED] = "checkpoint: attention state", [G_MLP] = "checkpoint: MLP ln2, gate, up, h"};

void lc_model_pass_parts(const lc_config *cfg, const lc_model_opts *o, int T, size_t attn_saved_bytes,
                         lc_mem_parts *ckpt, lc_mem_parts *act) {
  const int C = cfg->dim, D = cfg->head_dim;
  const act_sizes sz = act_group_sizes(cfg, T, attn_saved_bytes, !lc_tile_splits(o->mlp_tile, T),
                                       lc_layer_act_dt(o->precision == LC_DT_BF16));
  const act_plan pl = plan_acts(o);
  const size_t n = lc_ckstore_bytes(cfg->n_layers, 1, lc_offload_depth(o)); // layers held in memory
  lc_mem_part_add(ckpt, "checkpoint: layer input as stored", LC_MEM_CKPT, n * lc_bytes(xin_dtype(o), xin_elems(cfg, T)));
  lc_mem_part_add(act, xin_dtype(o) == LC_DT_BF16 ? "final hidden state x_L (bf16; in q/k/v's storage when shared)"
                                                  : "final hidden state x_L (fp32; in q/k/v's storage when shared)",
                  LC_MEM_ACT, xl_in_qkv(cfg, o, T, &sz, &pl) ? 0 : xl_bytes(cfg, o, T));
  // (bf16: dx is also the forward's fp32 layer output before it is packed)
  lc_mem_part_add(act, "residual gradient dx (fp32)", LC_MEM_ACT, f32b((size_t)T * C));
  lc_mem_part_add(act, "RoPE cos/sin tables", LC_MEM_ACT, 2 * f32b((size_t)T * (D / 2)));
  for (int g = 0; g < G_N; g++)
    if (pl.keep[g]) lc_mem_part_add(ckpt, kept_name[g], LC_MEM_CKPT, n * sz.g[g]);
    else lc_mem_part_add(act, group_name[g], LC_MEM_ACT, sz.g[g]);
}

// Where each layer's checkpoint block holds what the policy keeps: the layer input (as
// stored), then the kept groups; the rest of the layer's activations are views of the
// shared working storage.
typedef struct {
  const lc_config *cfg;
  int T;
  lc_dtype adt;   // the layer's activation dtype
  lc_dtype xdt;   // the stored layer input's (xin_dtype)
  act_sizes sz;
  act_plan pl;
  size_t xin_bytes;
  lc_layer_acts shared;
} layer_carver;

// Carves the groups with keep[g] == in_block, in order, from byte `at` of blk.
static void carve_groups(const layer_carver *c, lc_layer_acts *a, lc_buf blk, size_t at, int in_block) {
  const lc_config *cf = c->cfg;
  const size_t t = (size_t)c->T, C = (size_t)cf->dim, HQ = (size_t)cf->n_heads * cf->head_dim,
               HKV = (size_t)cf->n_kv_heads * cf->head_dim, F = (size_t)cf->ffn;
  const lc_buf none = {0};
  for (int g = 0; g < G_N; g++) {
    if (c->pl.keep[g] != in_block) continue;
    lc_buf_carver q = {blk, at};
    at += c->sz.g[g];
    switch (g) {
    case G_PROJ: {
      a->ln1 = lc_buf_cut(&q, t * C, c->adt);
      a->x_mid = lc_buf_cut(&q, t * C, LC_DT_F32);
      a->rstd1 = lc_buf_cut(&q, t, LC_DT_F32);
      const size_t nqk = lc_layer_qknorm_floats(cf, c->T);
      lc_layer_qknorm_carve(a, cf, c->T, nqk ? lc_buf_part(blk, q.at, nqk, LC_DT_F32) : none);
      break;
    }
    case G_QKV:
      a->q = lc_buf_cut(&q, t * HQ, c->adt);
      a->k = lc_buf_cut(&q, t * HKV, c->adt);
      a->v = lc_buf_cut(&q, t * HKV, c->adt);
      break;
    case G_ATT: a->att = lc_buf_cut(&q, t * HQ, c->adt); break;
    case G_SAVED: a->saved = lc_buf_part(blk, q.at, c->sz.g[G_SAVED], LC_DT_U8); break;
    case G_MLP:
      if (!c->sz.g[G_MLP]) { // tiled: the MLP keeps nothing
        a->ln2 = a->gate = a->up = a->h = a->rstd2 = none;
        break;
      }
      a->ln2 = lc_buf_cut(&q, t * C, c->adt);
      a->rstd2 = lc_buf_cut(&q, t, LC_DT_F32);
      a->gate = lc_buf_cut(&q, t * F, c->adt);
      a->up = lc_buf_cut(&q, t * F, c->adt);
      a->h = lc_buf_cut(&q, t * F, c->adt);
      break;
    }
  }
}

// Layer l's checkpoint block: its stored input xs ([T, C] of xdt) and its activations.
static void carve_layer(const layer_carver *c, lc_buf lb, lc_buf *xs, lc_layer_acts *a) {
  *xs = lc_buf_part(lb, 0, (size_t)c->T * c->cfg->dim, c->xdt);
  *a = c->shared;
  carve_groups(c, a, lb, c->xin_bytes, 1);
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

// A pass's host input as the backend's buffer (backend/stage.h: the host array itself
// where the backend's memory is the host's, else a copy, one named write).
static lc_status stage_in(lc_backend *be, const void *p, size_t n, const char *what, lc_buf *b) {
  return lc_buf_stage_in(be, p, n, LC_DT_I32, LC_MEM_ACT, what, LC_SYNC_INPUT, b);
}

lc_status lc_model_rope_table_buf(const lc_config *cfg, int rope_len, const int *pos, int T, lc_buf cos_t,
                                  lc_buf sin_t) {
  float *c = lc_buf_host(cos_t), *s = lc_buf_host(sin_t);
  if (c && s) {
    lc_model_rope_table(cfg, rope_len, pos, T, c, s);
    return LC_OK;
  }
  lc_arena *host = cos_t.be->host; // (staging: the backend's host memory)
  float *h = lc_alloc(host, LC_MEM_SCRATCH, lc_buf_bytes(cos_t) + lc_buf_bytes(sin_t), "RoPE tables (host staging)");
  if (!h) return LC_ENOMEM;
  lc_model_rope_table(cfg, rope_len, pos, T, h, h + cos_t.n);
  lc_status st = lc_buf_write(cos_t, h, LC_SYNC_INPUT);
  if (st == LC_OK) st = lc_buf_write(sin_t, h + cos_t.n, LC_SYNC_INPUT);
  lc_free(host, h);
  return st;
}

static void poll_store(void *ps) { lc_pstore_poll(ps); }
static void poll_both(void *model) { // LoRA: the base's gathers and the adapters' reductions
  lc_model *m = model;
  lc_pstore_poll(&m->ps);
  lc_pstore_poll(&m->ad);
}

// Layer l's weights as the layer reads them: the base's views, and with LoRA the adapters'
// in lora_a/lora_b (in w). The gradients: the model's, or with LoRA the adapters' alone
// (the base's fields empty: frozen, skipped).
static const lc_layer_weights *layer_w(lc_model *m, int l, lc_layer_weights *w) {
  if (!m->lora) return &m->ps.w.layer[l];
  *w = m->ps.w.layer[l];
  memcpy(w->lora_a, m->ad.w.layer[l].lora_a, sizeof w->lora_a);
  memcpy(w->lora_b, m->ad.w.layer[l].lora_b, sizeof w->lora_b);
  return w;
}
static lc_layer_weights *layer_g(lc_model *m, int l, lc_layer_weights *g) {
  if (!m->lora) return &m->ps.g.layer[l];
  memset(g, 0, sizeof *g);
  memcpy(g->lora_a, m->ad.g.layer[l].lora_a, sizeof g->lora_a);
  memcpy(g->lora_b, m->ad.g.layer[l].lora_b, sizeof g->lora_b);
  return g;
}

// ---- vocabulary slices (o->vocab_slice): the embedding and the LM head R rows at a time,
// so that no [vocab, C] matrix, gathered copy or gradient exists at once (pstore.h row ranges)

// The tensor of unit u whose view is the lc_weights field at byte offset `slot`, or -1.
static int unit_tensor(const lc_pstore *ps, int u, size_t slot) {
  const lc_param_unit *U = &ps->lay.units[u];
  for (int t = U->t0; t < U->t1; t++)
    if (ps->lay.table[t].slot == slot) return t;
  return -1;
}

static size_t slice_end(size_t r0, int R, size_t V) { return r0 + (size_t)R < V ? r0 + (size_t)R : V; }

// Layer unit u's gather posted ahead by the base's store and (LoRA) the adapters' beside it,
// as the memory and time models count it: both stores' copies of the unit in flight from
// here, not the adapters' only from the unit's acquire.
static lc_status prefetch_unit(lc_pstore *ps, lc_pstore *ad, int u) {
  LC_TRY(lc_pstore_prefetch(ps, u));
  return ad ? lc_pstore_prefetch(ad, u) : LC_OK;
}

// out[T,C] = rows tokens[t] of `tensor`, one slice at a time (the next slice's gather, then
// unit next_unit's, both stores' with LoRA (ad), issued while the current one is copied).
static lc_status embed_fwd_sliced(lc_pstore *ps, lc_pstore *ad, int tensor, int R, lc_buf tokens, int T, int C,
                                  lc_buf out, int next_unit) {
  const size_t V = lc_pstore_n_rows(ps, tensor);
  const int ns = lc_head_n_slices((int)V, R);
  lc_ps_rows r[2];
  memset(r, 0, sizeof r);
  lc_status st = lc_pstore_rows_fetch(ps, &r[0], tensor, 0, slice_end(0, R, V));
  for (int s = 0; s < ns && st == LC_OK; s++) {
    lc_ps_rows *cur = &r[s % 2];
    const size_t a = cur->r0, b = cur->r1;
    st = lc_pstore_rows_acquire(ps, cur);
    if (st == LC_OK)
      st = s + 1 < ns ? lc_pstore_rows_fetch(ps, &r[(s + 1) % 2], tensor, b, slice_end(b, R, V))
                      : next_unit >= 0 ? prefetch_unit(ps, ad, next_unit) : LC_OK;
    if (st == LC_OK) st = lc_be_embedding_fwd(out, tokens, cur->w, T, C, (int)a); // (bf16: the 2-byte rows, widened)
    lc_pstore_rows_release(ps, cur);
  }
  lc_pstore_rows_release(ps, &r[0]); // error paths: a fetch never acquired
  lc_pstore_rows_release(ps, &r[1]);
  // A table in blocks gives dequantized rows: a bf16 pass rounds them (as embed_fwd does).
  if (st == LC_OK && lc_dtype_is_quant(lc_pstore_held_dtype(ps, tensor)) && ps->compute == LC_DT_BF16)
    st = lc_be_bf16_round(lc_buf_view(out, 0, (size_t)T * C));
  return st;
}

// The whole table's lookup and scatter-add (the acquired unit's views).
// A frozen base's table in blocks (QLoRA) gives dequantized rows: a bf16 pass rounds them, as
// its 2-byte copy of any other table would hold them.
static lc_status embed_fwd(lc_pstore *ps, lc_buf tokens, int T, lc_buf out) {
  LC_TRY(lc_be_embedding_fwd(out, tokens, ps->w.embed, T, ps->cfg.dim, 0));
  return lc_dtype_is_quant(ps->w.embed.dt) && ps->compute == LC_DT_BF16
             ? lc_be_bf16_round(lc_buf_view(out, 0, (size_t)T * ps->cfg.dim))
             : LC_OK;
}
static lc_status embed_bwd(lc_pstore *ps, lc_buf tokens, int T, lc_buf dx) {
  return lc_be_embedding_bwd(ps->g.embed, dx, tokens, T, ps->cfg.dim, 0);
}

// The embedding gradient slice by slice: rows tokens[t] += dx[t], each slice's rows
// reduced as soon as they are complete (lc_embedding_bwd_rows: the same sums as the whole
// table's, bit for bit).
static lc_status embed_bwd_sliced(lc_pstore *ps, int tensor, int R, lc_buf tokens, int T, int C, lc_buf dx) {
  const size_t V = lc_pstore_n_rows(ps, tensor);
  lc_status st = LC_OK;
  for (size_t a = 0; a < V && st == LC_OK; a += (size_t)R) {
    lc_ps_rows r;
    const size_t b = slice_end(a, R, V);
    lc_pstore_rows_init(ps, &r, tensor, a, b);
    st = lc_pstore_rows_grad_begin(ps, &r);
    if (st != LC_OK) break;
    st = lc_be_embedding_bwd(r.g, dx, tokens, T, C, (int)a);
    if (st == LC_OK) st = lc_pstore_rows_grad_end(ps, &r);
  }
  return st;
}

// The head's slices for lc_loss_fwd_bwd_sliced: item k = pass * ns + s of the sequence
// lives in r[k % 2]; getting item k fetches item k + 1 (after the last: unit next_unit,
// the adapters' store's too with LoRA).
typedef struct {
  lc_pstore *ps, *ad;
  int tensor, R, ns, passes, next_unit, frozen; // frozen (LoRA): no gradient of the head
  size_t V;
  lc_ps_rows r[2];
} head_slicer;

static lc_status slicer_fetch(head_slicer *h, long k) {
  if (k >= (long)h->ns * h->passes) return h->next_unit >= 0 ? prefetch_unit(h->ps, h->ad, h->next_unit) : LC_OK;
  const size_t a = (size_t)(k % h->ns) * (size_t)h->R;
  return lc_pstore_rows_fetch(h->ps, &h->r[k % 2], h->tensor, a, slice_end(a, h->R, h->V));
}

static lc_status slicer_get(void *arg, int s, int pass, lc_buf *w, lc_buf *g) {
  head_slicer *h = arg;
  const long k = (long)pass * h->ns + s;
  lc_ps_rows *cur = &h->r[k % 2];
  memset(w, 0, sizeof *w);
  memset(g, 0, sizeof *g);
  LC_TRY(lc_pstore_rows_acquire(h->ps, cur));
  LC_TRY(slicer_fetch(h, k + 1));
  *w = cur->w;
  if (pass == 1 && !h->frozen) {
    LC_TRY(lc_pstore_rows_grad_begin(h->ps, cur));
    *g = cur->g;
  }
  return LC_OK;
}

static lc_status slicer_put(void *arg, int s, int pass) {
  head_slicer *h = arg;
  lc_ps_rows *cur = &h->r[((long)pass * h->ns + s) % 2];
  lc_status st = pass == 1 && lc_buf_ok(cur->g) ? lc_pstore_rows_grad_end(h->ps, cur) : LC_OK;
  lc_pstore_rows_release(h->ps, cur);
  return st;
}

// The final norm, LM head and loss with the head in slices: the norm's rows held for the
// whole loss, the head's fetched one slice ahead (after the last: unit next_unit).
static lc_status loss_sliced(lc_model *m, const lc_model_opts *o, lc_buf xL, const int *targets, int T,
                             float loss_scale, int bf16, lc_buf dx, double *loss_sum, long *n_wrong, int next_unit) {
  lc_pstore *ps = &m->ps;
  const lc_config *cfg = &m->cfg;
  const int L = cfg->n_layers, F = lc_unit_final(L), tied = cfg->tie_embeddings, grads = lc_buf_ok(dx) && !m->lora;
  const int norm_t = unit_tensor(ps, F, offsetof(lc_weights, norm));
  const int head_t = tied ? unit_tensor(ps, LC_UNIT_EMBED, offsetof(lc_weights, embed))
                          : unit_tensor(ps, F, offsetof(lc_weights, head));
  head_slicer h = {.ps = ps, .ad = m->lora ? &m->ad : NULL, .tensor = head_t, .R = o->vocab_slice,
                   .passes = lc_buf_ok(dx) ? 2 : 1, .next_unit = next_unit, .V = (size_t)cfg->vocab, .frozen = m->lora};
  h.ns = lc_head_n_slices(cfg->vocab, h.R);
  memset(h.r, 0, sizeof h.r);
  lc_ps_rows nr;
  lc_status st = lc_pstore_rows_fetch(ps, &nr, norm_t, 0, 1);
  if (st == LC_OK) st = lc_pstore_rows_acquire(ps, &nr);
  if (st == LC_OK && grads) st = lc_pstore_rows_grad_begin(ps, &nr);
  if (st == LC_OK) st = slicer_fetch(&h, 0);
  const lc_head_slices hs = {.rows = h.R, .get = slicer_get, .put = slicer_put, .arg = &h};
  if (st == LC_OK)
    st = lc_loss_fwd_bwd_sliced(cfg, lc_pstore_device(ps), nr.w, grads ? nr.g : (lc_buf){0}, &hs, xL, targets, T, o->loss_tile,
                                loss_scale, bf16, dx, loss_sum, n_wrong);
  lc_pstore_rows_release(ps, &h.r[0]);
  lc_pstore_rows_release(ps, &h.r[1]);
  if (st == LC_OK && grads) st = lc_pstore_rows_grad_end(ps, &nr);
  lc_pstore_rows_release(ps, &nr);
  return st; // (the units' reductions: the schedule's grad_end of F)
}

// The final norm, LM head and loss with the units' weights.
static lc_status loss_whole(lc_model *m, const lc_model_opts *o, lc_buf xL, const int *targets, int T,
                            float loss_scale, int bf16, lc_buf dx, double *loss_sum, long *n_wrong) {
  lc_pstore *ps = &m->ps;
  const int grads = lc_buf_ok(dx) && !m->lora; // (LoRA: the gradient reaches x_L only)
  const lc_loss_weights w = {.norm = ps->w.norm, .norm_g = grads ? ps->g.norm : (lc_buf){0}, .head = ps->w.head,
                             .head_g = grads ? ps->g.head : (lc_buf){0}};
  return lc_loss_fwd_bwd(&m->cfg, lc_pstore_device(ps), &w, xL, targets, T, o->loss_tile, loss_scale, bf16, dx, loss_sum, n_wrong);
}

// ---- the pass: its state, one function per schedule event kind, the loop over the events

typedef struct {
  lc_model *m;
  const lc_model_opts *o;
  const lc_config *cfg;
  lc_pstore *ps, *ad; // the store, and with LoRA the adapters' (which alone opens gradients)
  lc_backend *be;     // every buffer of the pass is its: weights, activations, checkpoints
  const int *targets;
  int T, L, bf16, sliced, embed_t, bwd_first;
  float loss_scale;
  double *loss_sum;
  long *n_wrong;
  lc_attn_in ain;     // the strategy's inputs: the caller's sequence, precision, staged bounds, poll
  lc_layer_ctx ctx;
  layer_carver lcv;
  lc_ckstore *cks;    // layer checkpoints: in RAM, or offloaded with only the layers in flight resident
  lc_buf act, tok, lo, drows, xL, dx, dxg;
  lc_buf xin;         // backward: the layer's input, its checkpoint (bf16 in a bf16 pass)
  lc_buf lbuf;
  int *ident;         // dropout's rows when the caller gave none: 0..T-1
  lc_layer_acts *acts;
  lc_buf *xs;         // layer inputs as stored (fp32 or bf16)
  lc_event *ev;
  int n_ev;
  char *held;         // units acquired and not yet released (released on an error)
  lc_layer_weights lw, lg; // LoRA: a layer's base views with its adapters', and the adapters' gradients
  lc_dtype compute0;
} pass;

static int layer_unit(const pass *p, int u) { return u != LC_UNIT_EMBED && u != lc_unit_final(p->L); }

static lc_status ev_acquire(pass *p, const lc_event *e) { // held even when it fails part-way
  p->held[e->unit] = 1;                                      // (gathered, then the next gather failed)
  lc_status st = lc_pstore_acquire(p->ps, e->unit, e->next);
  if (st == LC_OK && p->ad && layer_unit(p, e->unit))
    st = lc_pstore_acquire(p->ad, e->unit, layer_unit(p, e->next) ? e->next : -1);
  // (LoRA: the embedding and final units have no adapters, but the next layer's gather they
  // post is posted for both stores, as the memory and time models count it)
  else if (st == LC_OK && p->ad && e->next >= 0 && layer_unit(p, e->next))
    st = lc_pstore_prefetch(p->ad, e->next);
  return st;
}
static lc_status ev_prefetch(pass *p, const lc_event *e) {
  lc_status st = lc_pstore_prefetch(p->ps, e->unit);
  if (st == LC_OK && p->ad && layer_unit(p, e->unit)) st = lc_pstore_prefetch(p->ad, e->unit);
  return st;
}
static lc_status ev_release(pass *p, const lc_event *e) {
  lc_pstore_release(p->ps, e->unit);
  if (p->ad && layer_unit(p, e->unit)) lc_pstore_release(p->ad, e->unit);
  p->held[e->unit] = 0;
  return LC_OK;
}
static lc_status ev_grad_begin(pass *p, const lc_event *e) { // tied E at the end: already open
  if (!p->ad) return lc_pstore_grad_begin(p->ps, e->unit);
  return layer_unit(p, e->unit) ? lc_pstore_grad_begin(p->ad, e->unit) : LC_OK;
}
static lc_status ev_grad_end(pass *p, const lc_event *e) {
  if (p->ad) return layer_unit(p, e->unit) ? lc_pstore_grad_end(p->ad, e->unit) : LC_OK;
  return p->sliced && !layer_unit(p, e->unit) ? lc_pstore_rows_done(p->ps, e->unit) : lc_pstore_grad_end(p->ps, e->unit);
}
static lc_status ev_ckpt_put(pass *p, const lc_event *e) { return lc_ckstore_put_end(p->cks, e->layer); }
static lc_status ev_ckpt_get(pass *p, const lc_event *e) { // read ahead while the layer above computed;
  const int l = e->layer;                                     // the next one's read started
  LC_TRY(lc_ckstore_get(p->cks, l, l - 1, &p->lbuf));
  carve_layer(&p->lcv, p->lbuf, &p->xs[l], &p->acts[l]);
  p->xin = p->xs[l]; // (bf16: the norms and the residual add read the 2-byte values, widened exactly)
  return LC_OK;
}
static lc_status ev_ckpt_free(pass *p, const lc_event *e) {
  lc_ckstore_release(p->cks, e->layer);
  return LC_OK;
}

// Compute: the embedding's forward opens layer 0's checkpoint (sliced: posts layer 0's
// gather at its last slice).
static lc_status run_embed_fwd(pass *p, const lc_event *e) {
  LC_TRY(lc_ckstore_put_begin(p->cks, 0, &p->lbuf));
  carve_layer(&p->lcv, p->lbuf, &p->xs[0], &p->acts[0]);
  const lc_buf x0 = p->bf16 ? p->dx : p->xs[0]; // bf16: dx (free in forward), packed into the 2-byte copy
  lc_status st = e->op == LC_OP_EMBED_FWD_SLICED
                     ? embed_fwd_sliced(p->ps, p->ad, p->embed_t, p->o->vocab_slice, p->tok, p->T, p->cfg->dim, x0,
                                        lc_unit_layer(0))
                     : embed_fwd(p->ps, p->tok, p->T, x0);
  if (st == LC_OK && p->bf16) st = lc_be_bf16_pack(p->xs[0], x0);
  lc_test_point("forward");
  return st;
}
// Layer l reads its input from its checkpoint and writes its output into layer l+1's (fp32;
// bf16: into dx, free in forward, then packed into it, or into x_L after the last layer),
// so both are put before it runs. Its input is in its own checkpoint before it runs (the
// schedule puts it then under full checkpointing).
static lc_status run_layer_fwd(pass *p, const lc_event *e) {
  const int l = e->layer, L = p->L;
  if (l + 1 < L) {
    LC_TRY(lc_ckstore_put_begin(p->cks, l + 1, &p->lbuf));
    carve_layer(&p->lcv, p->lbuf, &p->xs[l + 1], &p->acts[l + 1]);
  }
  const lc_layer_weights *w = layer_w(p->m, l, &p->lw);
  // (x_L may be q/k/v's storage: the layer writes its output after its attention, their last reader)
  if (!p->bf16) return lc_layer_fwd(&p->ctx, w, &p->acts[l], p->xs[l], l + 1 < L ? p->xs[l + 1] : p->xL, 0);
  LC_TRY(lc_layer_fwd(&p->ctx, w, &p->acts[l], p->xs[l], p->dx, 0));
  return lc_be_bf16_pack(l + 1 < L ? p->xs[l + 1] : p->xL, p->dx); // (exact: the output is rounded to bf16)
}
static lc_status ev_run(pass *p, const lc_event *e) {
  const int l = e->layer;
  const lc_buf none = {0};
  switch (e->op) {
  case LC_OP_EMBED_FWD:
  case LC_OP_EMBED_FWD_SLICED: return run_embed_fwd(p, e);
  case LC_OP_LAYER_FWD: return run_layer_fwd(p, e);
  case LC_OP_LOSS: // the loss and its gradient w.r.t. x_L, head and final norm, in one pass
    return loss_whole(p->m, p->o, p->xL, p->targets, p->T, p->loss_scale, p->bf16, p->dxg, p->loss_sum, p->n_wrong);
  case LC_OP_LOSS_SLICED: // (posts layer L-1's gather at its last slice)
    return loss_sliced(p->m, p->o, p->xL, p->targets, p->T, p->loss_scale, p->bf16, p->dxg, p->loss_sum, p->n_wrong,
                       p->bwd_first);
  case LC_OP_RECOMPUTE: // what the policy did not keep (selective: all but attention)
    return lc_layer_fwd(&p->ctx, layer_w(p->m, l, &p->lw), &p->acts[l], p->xin, none, p->o->ckpt == LC_CKPT_SELECTIVE);
  case LC_OP_LAYER_BWD:
    return lc_layer_bwd(&p->ctx, layer_w(p->m, l, &p->lw), layer_g(p->m, l, &p->lg), &p->acts[l], p->xin, p->dx);
  case LC_OP_EMBED_BWD: return p->ad ? LC_OK : embed_bwd(p->ps, p->tok, p->T, p->dx); // (LoRA: the embedding is frozen)
  case LC_OP_EMBED_BWD_SLICED:
    return p->ad ? LC_OK : embed_bwd_sliced(p->ps, p->embed_t, p->o->vocab_slice, p->tok, p->T, p->cfg->dim, p->dx);
  default: return LC_OK;
  }
}

static lc_status (*const ev_fn[LC_EV_N])(pass *, const lc_event *) = {
    [LC_EV_ACQUIRE] = ev_acquire,       [LC_EV_PREFETCH] = ev_prefetch,   [LC_EV_RELEASE] = ev_release,
    [LC_EV_GRAD_BEGIN] = ev_grad_begin, [LC_EV_GRAD_END] = ev_grad_end,   [LC_EV_CKPT_PUT] = ev_ckpt_put,
    [LC_EV_CKPT_GET] = ev_ckpt_get,     [LC_EV_CKPT_FREE] = ev_ckpt_free, [LC_EV_RUN] = ev_run,
};

// The pass's storage, inputs on the backend, layer context and schedule. On an error the
// caller still runs pass_close.
static lc_status pass_open(pass *p, const lc_pass_in *in, lc_attn *attn, const int *tokens, const int *pos,
                           int want_grads) {
  lc_model *m = p->m;
  const lc_model_opts *o = p->o;
  const lc_config *cfg = p->cfg;
  lc_pstore *ps = p->ps;
  lc_backend *be = p->be;
  const int L = p->L, T = p->T, C = cfg->dim, D = cfg->head_dim;
  const int mlp_untiled = !lc_tile_splits(o->mlp_tile, T);
  // The strategy's inputs for this pass: the caller's sequence, with the precision, the
  // staged bounds and the poll hook set below (what the strategy keeps depends on bf16).
  p->ain = in->attn;
  p->ain.bf16 = p->bf16;
  const size_t saved_bytes = attn->saved_bytes(attn, T, p->bf16);
  const lc_dtype adt = lc_layer_act_dt(p->bf16);
  const act_sizes sz = act_group_sizes(cfg, T, saved_bytes, mlp_untiled, adt);
  // Per-layer storage (checkpoints) and shared working storage (recomputed per layer).
  size_t per_layer, shared;
  pass_sizes(cfg, o, T, saved_bytes, &per_layer, &shared);
  const act_plan pl = plan_acts(o);
  const size_t TC = (size_t)T * C, half = (size_t)T * (D / 2);
  LC_TRY(lc_ckstore_open(&p->cks, L, per_layer, o->offload_dir, lc_offload_depth(o), be));
  LC_TRY(lc_buf_alloc(be, LC_MEM_ACT, LC_DT_U8, shared, 0, "layer activations", &p->act));
  p->acts = calloc((size_t)L, sizeof *p->acts);
  p->xs = calloc((size_t)L, sizeof *p->xs);
  if (!p->acts || !p->xs) return lc_fail(LC_ENOMEM, "out of memory for layer bookkeeping");
  // The pass's inputs on the backend: token ids (and the attention's bounds); the targets
  // go to the loss, which stages them itself.
  LC_TRY(stage_in(be, tokens, (size_t)T, "the pass's token ids", &p->tok));
  if (p->ain.lo) // (the host's memory: lo itself, read in place)
    LC_TRY(stage_in(be, p->ain.lo, (size_t)(p->ain.lo_len > 0 ? p->ain.lo_len : T), "the attention's key bounds", &p->lo));
  // LoRA dropout in a training pass: the rows' indices in their sequence, for the mask.
  const int dropping = want_grads && m->lora && cfg->lora.dropout > 0;
  if (dropping) {
    const int *rows_h = in->drop_rows;
    if (!rows_h) {
      p->ident = malloc(sizeof(int) * (size_t)(T > 0 ? T : 1));
      if (!p->ident) return lc_fail(LC_ENOMEM, "out of memory for dropout's row indices");
      for (int t = 0; t < T; t++) p->ident[t] = t;
      rows_h = p->ident;
    }
    LC_TRY(stage_in(be, rows_h, (size_t)T, "dropout's row indices", &p->drows));
  }
  p->ain.lo_buf = p->lo;
  lc_buf_carver ak = {p->act, 0};
  const int xl_qkv = xl_in_qkv(cfg, o, T, &sz, &pl);
  if (!xl_qkv) p->xL = lc_buf_cut(&ak, TC, xin_dtype(o));
  p->dx = lc_buf_cut(&ak, TC, LC_DT_F32);
  const lc_buf rcos = lc_buf_cut(&ak, half, LC_DT_F32), rsin = lc_buf_cut(&ak, half, LC_DT_F32);
  p->lcv = (layer_carver){.cfg = cfg, .T = T, .adt = adt, .xdt = xin_dtype(o), .sz = sz, .pl = pl,
                          .xin_bytes = lc_bytes(xin_dtype(o), xin_elems(cfg, T))};
  carve_groups(&p->lcv, &p->lcv.shared, p->act, ak.at, 0); // the groups no layer keeps: shared working storage
  if (xl_qkv) { // (the shared group's start: after the shared groups before it)
    size_t at = ak.at;
    for (int g = 0; g < G_QKV; g++) at += pl.keep[g] ? 0 : sz.g[g];
    p->xL = lc_buf_part(p->act, at, TC, xin_dtype(o));
  }
  LC_TRY(lc_model_rope_table_buf(cfg, in->rope_len, pos, T, rcos, rsin));
  p->ctx = (lc_layer_ctx){.cfg = cfg, .attn = attn, .attn_in = &p->ain, .rope_cos = rcos, .rope_sin = rsin, .T = T,
                          .mlp_tile = mlp_untiled ? 0 : o->mlp_tile, .bf16 = p->bf16,
                          .poll = poll_store, .poll_arg = ps, .be = be};
  // LoRA: the adapters' store runs the layers' unit events beside the base's (its
  // embedding and final units are empty); only it opens gradients.
  lc_pstore *ad = p->ad;
  if (ad) {
    p->ctx.lora = (lc_lora_ctx){.R = cfg->lora.rank, .s = lc_lora_scale(&cfg->lora), .bf16 = p->bf16, .be = be};
    if (dropping) {
      p->ctx.lora.drop_thr = lc_dropout_thr(cfg->lora.dropout);
      p->ctx.lora.drop_p = cfg->lora.dropout;
      p->ctx.lora.drop_key = in->drop_key;
      p->ctx.lora.drop_rows = p->drows;
    }
    p->ctx.poll = poll_both;
    p->ctx.poll_arg = m;
    lc_pstore_set_compute(ad, p->bf16 ? LC_DT_BF16 : LC_DT_F32);
  }
  lc_pstore_set_compute(ps, p->bf16 ? LC_DT_BF16 : LC_DT_F32);
  p->ain.poll = p->ctx.poll;
  p->ain.poll_arg = p->ctx.poll_arg;
  p->sliced = lc_vocab_sliced(o, cfg->vocab);
  ps->vocab_rows = p->sliced ? (size_t)o->vocab_slice : 0;
  p->embed_t = unit_tensor(ps, LC_UNIT_EMBED, offsetof(lc_weights, embed));
  p->bwd_first = want_grads ? lc_unit_layer(L - 1) : -1; // the sliced loss gathers it ahead
  p->dxg = want_grads ? p->dx : (lc_buf){0};
  p->n_ev = lc_schedule_build(cfg, o, want_grads, NULL, 0);
  p->ev = malloc(sizeof *p->ev * (size_t)p->n_ev);
  p->held = calloc((size_t)L + 2, 1);
  if (!p->ev || !p->held) return lc_fail(LC_ENOMEM, "out of memory for the pass schedule");
  lc_schedule_build(cfg, o, want_grads, p->ev, p->n_ev);
  lc_pstore_pass_begin(ps, want_grads && !ad);
  if (ad) lc_pstore_pass_begin(ad, want_grads);
  return LC_OK;
}

// Ends the pass (st LC_OK: the stores' pass ends) and frees what pass_open made.
static lc_status pass_close(pass *p, lc_status st) {
  lc_model *m = p->m;
  if (st == LC_OK) st = lc_pstore_pass_end(p->ps);
  if (st == LC_OK && m->lora) st = lc_pstore_pass_end(&m->ad);
  lc_pstore_set_compute(p->ps, p->compute0);
  if (m->lora) lc_pstore_set_compute(&m->ad, p->compute0);
  free(p->ev);
  free(p->held);
  free(p->xs);
  free(p->acts);
  lc_buf_stage_release(&p->lo);
  lc_buf_stage_release(&p->drows);
  free(p->ident);
  lc_buf_stage_release(&p->tok);
  lc_buf_free(&p->act);
  const lc_status cs = p->cks ? lc_ckstore_close(p->cks) : LC_OK;
  return st == LC_OK ? cs : st;
}

// The pass is its schedule (schedule.h), run event by event: the store's units E
// (embedding), layer l and F (final norm + untied head) acquired (ZeRO 3: gathered) right
// before use with the next one's gather posted and released after; gradient buffers
// opened before a unit's backward and handed to their reduction after it; layer
// checkpoints put after forward and got back before backward; the compute in between.
// The memory and time models read the same list.
static lc_status model_pass(lc_model *m, const lc_model_opts *o, lc_attn *attn, const lc_pass_in *pin, const int *tokens,
                            const int *targets, const int *pos, int T, float loss_scale,
                            int want_grads, double *loss_sum, long *n_wrong) {
  static const lc_pass_in whole; // (zero: one whole sequence)
  if (T <= 0) return lc_fail(LC_EINVAL, "a sequence needs at least one token");
  LC_TRY(check_tokens(&m->cfg, tokens, targets, T));
  // The store computes in the pass's precision until the pass ends (then as before: a
  // model prepared for bf16 inference keeps its setting).
  pass p = {.m = m, .o = o, .cfg = &m->cfg, .ps = &m->ps, .ad = m->lora ? &m->ad : NULL, .be = lc_pstore_device(&m->ps),
            .targets = targets, .T = T, .L = m->cfg.n_layers, .bf16 = o->precision == LC_DT_BF16,
            .loss_scale = loss_scale, .loss_sum = loss_sum, .n_wrong = n_wrong, .compute0 = m->ps.compute};
  lc_status st = pass_open(&p, pin ? pin : &whole, attn, tokens, pos, want_grads);
  for (int i = 0; i < p.n_ev && st == LC_OK; i++) {
    const lc_event *e = &p.ev[i];
    if (e->by_op) continue;
    p.ctx.lora.layer = e->layer; // (dropout's mask of this layer's adapters)
    st = ev_fn[e->kind](&p, e);
  }
  for (int u = 0; p.held && st != LC_OK && u < p.L + 2; u++) // an error: drop what the pass holds
    if (p.held[u]) {
      lc_pstore_release(p.ps, u);
      if (p.ad && layer_unit(&p, u)) lc_pstore_release(p.ad, u);
    }
  return pass_close(&p, st);
}

lc_status lc_model_fwd_bwd(lc_model *m, const lc_model_opts *o, lc_attn *attn, const lc_pass_in *in, const int *tokens,
                           const int *targets, const int *pos, int T, float loss_scale,
                           int want_grads, double *loss_sum) {
  return model_pass(m, o, attn, in, tokens, targets, pos, T, loss_scale, want_grads, loss_sum, NULL);
}

lc_status lc_model_eval(lc_model *m, const lc_model_opts *o, lc_attn *attn, const lc_pass_in *in, const int *tokens,
                        const int *targets, const int *pos, int T, double *loss_sum,
                        long *n_wrong) {
  return model_pass(m, o, attn, in, tokens, targets, pos, T, 1.0f, 0, loss_sum, n_wrong);
}
