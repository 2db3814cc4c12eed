// The memory model: a training step's peak per category on each rank, from the same sizes
// the pass allocates and the same walk over its schedule (ZeRO's transients), and the
// choices built on it (checkpoint policy, head chunk, longest sequence, tile sizes).
#include "model/memplan.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "attn/attn.h"
#include "attn/seqlayout.h"
#include "model/layer.h"
#include "model/loss.h"
#include "model/params.h"
#include "model/pstore.h"
#include "model/schedule.h"


// ---- ZeRO's and --offload-optimizer's temporary units per phase of a training pass: walks
// over the pass's schedule (schedule.h) with the store's rules.

// One occurrence of phase p with g gathered and r temporary gradient bytes alive.
static void occur(size_t *G, size_t *R, size_t *GR, int p, size_t g, size_t r) {
  if (g > G[p]) G[p] = g;
  if (r > R[p]) R[p] = r;
  if (g + r > GR[p]) GR[p] = g + r;
}
// The phases a pass's op runs in, each seeing g gathered and r gradient bytes (the sliced
// embedding's and loss's own phases: sliced_transients).
static void occur_op(const lc_model_opts *o, lc_op op, size_t *G, size_t *R, size_t *GR, size_t g, size_t r) {
  switch (op) {
  case LC_OP_EMBED_FWD: occur(G, R, GR, LC_PHASE_EMBED_FWD, g, r); break;
  case LC_OP_LAYER_FWD:
    occur(G, R, GR, LC_PHASE_ATTN_FWD, g, r);
    occur(G, R, GR, LC_PHASE_MLP_FWD, g, r);
    break;
  case LC_OP_LOSS: occur(G, R, GR, LC_PHASE_LOSS, g, r); break;
  case LC_OP_RECOMPUTE: // full: attention again; selective: no attention phase buffers
    if (o->ckpt == LC_CKPT_FULL) occur(G, R, GR, LC_PHASE_ATTN_FWD, g, r);
    break;
  case LC_OP_LAYER_BWD:
    occur(G, R, GR, LC_PHASE_MLP_BWD, g, r);
    occur(G, R, GR, LC_PHASE_ATTN_BWD, g, r);
    break;
  case LC_OP_EMBED_BWD: occur(G, R, GR, LC_PHASE_EMBED_BWD, g, r); break;
  default: break;
  }
}

// The vocabulary slices' part (model.c's model_pass order; slice k of the embedding and the head
// has rows(k) rows): the embedding forward with the next slice (then layer 0) fetched; the
// loss with the final norm's rows held, the sequence of head slices of its two passes each
// with the next fetched (after the last: layer L-1) and, in the gradient pass, the slice's
// gradient and the previous one's reduction in flight; the embedding backward with each
// slice's gradient and the previous reduction (layer 0's first).
// lw0, lwL: bytes of decoder layer 0's and layer L-1's gathered copies (the units gathered
// after the embedding's and the loss's last slices), lg: of a layer's gradient.
// frozen (LoRA): the slices' rows are gathered as the base's stage says, but have no gradient.
static void sliced_transients(const lc_config *cfg, const lc_model_opts *o, int stage, size_t lw0, size_t lwL, size_t lg,
                              int frozen, size_t *G, size_t *R, size_t *GR) {
  const int bf16 = o->precision == LC_DT_BF16, g3 = stage >= 3, r2 = stage >= 2 && !frozen;
  const size_t C = (size_t)cfg->dim, V = (size_t)cfg->vocab, rows = (size_t)o->vocab_slice;
  const int ns = lc_head_n_slices(cfg->vocab, o->vocab_slice);
#define SLICE_N(k) ((k) + 1 < ns ? rows * C : (V - (size_t)(ns - 1) * rows) * C)
  const int b16 = frozen && cfg->lora.base_bf16 && !lc_config_base_quant(cfg); // a bf16 base store (rows: views below stage 3)
  // A base in GGUF blocks (a U8 store): the embedding's and the head's rows as they are held.
  const int q = frozen && lc_config_base_quant(cfg);
  const lc_dtype dense = bf16 && cfg->lora.base_bf16 ? LC_DT_BF16 : LC_DT_F32;
  const lc_dtype qe = cfg->base_q_embed ? (lc_dtype)cfg->base_q_embed : dense,
                 qh = cfg->tie_embeddings ? qe : cfg->base_q_head ? (lc_dtype)cfg->base_q_head : dense;
#define SLICE_W(k, qdt) (q ? lc_pstore_rows_bytes_q(stage, (qdt), SLICE_N(k)) : lc_pstore_rows_bytes(stage, bf16, b16, 1, SLICE_N(k)))
#define SLICE_G(k) (frozen ? 0 : lc_pstore_rows_grad_bytes(stage, SLICE_N(k)))
  for (int s = 0; s < ns; s++)
    occur(G, R, GR, LC_PHASE_EMBED_FWD, SLICE_W(s, qe) + (g3 ? (s + 1 < ns ? SLICE_W(s + 1, qe) : lw0) : 0), 0);
  const size_t nw = q ? lc_pstore_rows_bytes_q(stage, LC_DT_F32, C) : lc_pstore_rows_bytes(stage, bf16, b16, 0, C),
               ng = frozen ? 0 : lc_pstore_rows_grad_bytes(stage, C);
  for (int k = 0; k < 2 * ns; k++) {
    const int s = k % ns, pass = k / ns;
    const size_t next = g3 ? (k + 1 < 2 * ns ? SLICE_W((k + 1) % ns, qh) : lwL) : 0;
    occur(G, R, GR, LC_PHASE_LOSS, nw + SLICE_W(s, qh) + next, ng + (pass ? SLICE_G(s) + (s > 0 ? SLICE_G(s - 1) : 0) : 0));
  }
  for (int s = 0; s < ns && !frozen; s++) // (frozen: no embedding backward)
    occur(G, R, GR, LC_PHASE_EMBED_BWD, 0, SLICE_G(s) + (s > 0 ? SLICE_G(s - 1) : r2 ? lg : 0));
#undef SLICE_N
#undef SLICE_W
#undef SLICE_G
}

lc_status lc_memplan_zero_transients(const lc_config *cfg, const lc_model_opts *o, int stage, int Z, size_t *G, size_t *R, size_t *GR, int n_phases) {
  for (int p = 0; p < n_phases; p++) G[p] = R[p] = GR[p] = 0;
  lc_ps_sizes z, za;
  memset(&za, 0, sizeof za);
  const int bf16 = o->precision == LC_DT_BF16, lora = cfg->lora.rank > 0;
  // LoRA: the frozen base (its own stage: 3 or 0, no gradients) and the adapters' store
  // (the run's stage) acquire the same layer units at the same events; only the
  // adapters open gradients, of the layer units alone.
  const int bstage = lora ? lc_lora_base_stage(stage) : stage;
  const lc_config acfg = lc_config_adapters(cfg);
  if ((stage < 2 && !bf16) || n_phases < LC_PHASE_N || lc_pstore_sizes(cfg, bstage, Z, &z) != LC_OK) return LC_OK;
  if (lora && lc_pstore_sizes(&acfg, stage, Z, &za) != LC_OK) return LC_OK;
  const int L = cfg->n_layers, g3 = stage >= 3, r2 = stage >= 2, NU = L + 2;
  // Stages 0-2 in bf16: the rounded copy of each unit in use (lc_pstore_acquire); stage 3
  // rounds its gathered copy in place and gathers the next unit ahead.
  const int cw = bf16 && !g3, sliced = lc_vocab_sliced(o, cfg->vocab);
  const lc_dtype cdt = bf16 ? LC_DT_BF16 : LC_DT_F32;
  // A unit's acquired copy (both stores' with LoRA: the adapters' has no embedding or final
  // unit) and its gradient buffer (the adapters' with LoRA).
#define COPY(u) (lc_ps_copy_bytes(&z, L, (u), cdt) + (lora ? lc_ps_copy_bytes(&za, L, (u), cdt) : 0))
#define GRAD(u) (lora ? lc_ps_unit_bytes(&za, L, (u)) : lc_ps_unit_bytes(&z, L, (u)))
  if (sliced)
    sliced_transients(cfg, o, bstage, COPY(lc_unit_layer(0)), COPY(lc_unit_layer(L - 1)), GRAD(lc_unit_layer(0)), lora, G,
                      R, GR);
  // Walk the pass's schedule with the store's rules: gathered[u] while u is acquired or its
  // gather posted; a gradient buffer from grad_begin until a later grad_begin retires its
  // reduction (every one but the newest in flight) or the pass ends. Sliced, the final
  // norm's buffer is its gradient rows, opened inside the loss.
  const int n = lc_schedule_build(cfg, o, 1, NULL, 0);
  lc_event *ev = malloc(sizeof *ev * (size_t)n);
  size_t *gath = calloc((size_t)NU, sizeof *gath), *gbuf = calloc((size_t)NU, sizeof *gbuf);
  int *fifo = malloc(sizeof(int) * (size_t)(NU + 2)), nf = 0; // units in flight, oldest first
  lc_status st = LC_OK;
  if (!ev || !gath || !gbuf || !fifo) {
    st = lc_fail(LC_ENOMEM, "out of memory for the memory model's walk over %d events", n);
    goto out;
  }
  lc_schedule_build(cfg, o, 1, ev, n);
  for (int i = 0; i < n; i++) {
    const lc_event *e = &ev[i];
    switch (e->kind) {
    case LC_EV_ACQUIRE:
      if (g3 || cw) gath[e->unit] = COPY(e->unit);
      if (g3 && e->next >= 0) gath[e->next] = COPY(e->next);
      break;
    case LC_EV_PREFETCH:
      if (g3) gath[e->unit] = COPY(e->unit);
      break;
    case LC_EV_RELEASE: gath[e->unit] = 0; break;
    case LC_EV_GRAD_BEGIN:
      if (!r2 || (lora && (e->unit == LC_UNIT_EMBED || e->unit == lc_unit_final(L)))) break;
      for (; nf > 1; nf--) {
        gbuf[fifo[0]] = 0;
        memmove(fifo, fifo + 1, sizeof(int) * (size_t)(nf - 1));
      }
      gbuf[e->unit] = GRAD(e->unit);
      break;
    case LC_EV_GRAD_END:
      if (r2 && !(lora && (e->unit == LC_UNIT_EMBED || e->unit == lc_unit_final(L)))) fifo[nf++] = e->unit;
      break;
    case LC_EV_RUN: {
      size_t g = 0, r = 0;
      for (int u = 0; u < NU; u++) g += gath[u], r += gbuf[u];
      occur_op(o, e->op, G, R, GR, g, r);
      if (e->op == LC_OP_LOSS_SLICED && r2 && !lora) // the final norm's gradient rows, handed on by its GRAD_END
        gbuf[lc_unit_final(L)] = lc_pstore_rows_grad_bytes(stage, (size_t)cfg->dim);
      break;
    }
    default: break;
    }
  }
out:
#undef COPY
#undef GRAD
  free(ev), free(gath), free(gbuf), free(fifo);
  return st;
}

static lc_status offload_transients(const lc_config *cfg, const lc_model_opts *o, int stage, int Z, size_t *G,
                                     size_t *R, size_t *GR, int n_phases) {
  for (int p = 0; p < n_phases; p++) G[p] = R[p] = GR[p] = 0;
  lc_ps_sizes z;
  if (n_phases < LC_PHASE_N) return LC_OK;
  LC_TRY(lc_pstore_sizes(cfg, stage, Z, &z));
  const int L = cfg->n_layers, NU = L + 2;
  const lc_dtype cdt = o->precision == LC_DT_BF16 ? LC_DT_BF16 : LC_DT_F32;
  const int n = lc_schedule_build(cfg, o, 1, NULL, 0);
  lc_event *ev = malloc(sizeof *ev * (size_t)n);
  size_t *dw = calloc((size_t)NU, sizeof *dw), *dg = calloc((size_t)NU, sizeof *dg);
  lc_status st = LC_OK;
  if (!ev || !dw || !dg) {
    st = lc_fail(LC_ENOMEM, "out of memory for the memory model's walk over %d events", n);
    goto out;
  }
  lc_schedule_build(cfg, o, 1, ev, n);
  for (int i = 0; i < n; i++) {
    const lc_event *e = &ev[i];
    const int u = e->unit;
    switch (e->kind) {
    case LC_EV_ACQUIRE: dw[u] = lc_ps_copy_bytes(&z, L, u, cdt); break;
    case LC_EV_RELEASE: dw[u] = 0; break;
    case LC_EV_GRAD_BEGIN: dg[u] = lc_ps_unit_bytes(&z, L, u); break;
    case LC_EV_GRAD_END: dg[u] = 0; break;
    case LC_EV_RUN: {
      size_t g = 0, r = 0;
      for (int k = 0; k < NU; k++) g += dw[k], r += dg[k];
      occur_op(o, e->op, G, R, GR, g, r);
      break;
    }
    default: break;
    }
  }
out:
  free(ev), free(dw), free(dg);
  return st;
}

int lc_memplan_auto_mlp_tile(long seq) { return seq > 1024 ? 1024 : 0; }

static int auto_loss_tile(long seq, int vocab, unsigned budget) {
  int t = (int)(budget / (4u * (unsigned)vocab));
  t = t < 16 ? 16 : t & ~15;
  return t >= seq ? 0 : t;
}
int lc_memplan_auto_loss_tile(long seq, int vocab) { return auto_loss_tile(seq, vocab, 32u << 20); }

int lc_memplan_auto_loss_tile_for(const lc_config *cfg, long seq, int rows) {
  // A head in a frozen base's blocks is dequantized once per tile: 4x the logits (128 MiB)
  // amortise it (SmolLM2 at 4K: 672 rows instead of 160, 6% faster a step, 0.1 GiB more).
  const int q = cfg->tie_embeddings ? cfg->base_q_embed : cfg->base_q_head;
  return auto_loss_tile(seq, rows, q && lc_config_base_quant(cfg) ? 128u << 20 : 32u << 20);
}

static int default_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// The buffers live at the total's peak (out->total_phase) as named parts, in the same terms
// the total adds up: the persistent states, checkpoints and activations held for the step or
// the pass; then the phase's moment, the strategy's call (scratch + comm) or the projection
// GEMMs' moment (mm), whichever the total took; and ZeRO's or the offload's units in use.
static void peak_detail(lc_mem_estimate *out, const lc_config *cfg, const lc_model_opts *o, const lc_attn_mem *am,
                        const lc_layer_mem *lm, const size_t *s, const size_t *c,
                        const size_t *mm, const size_t *zb) {
  lc_mem_parts *d = &out->detail, tmp;
  const int p = out->total_phase;
  const char *ph = lc_mem_phase_name((lc_mem_phase)p);
  memset(d, 0, sizeof *d);
  if (!out->offload) { // (LoRA: the frozen base's and the adapters' states together)
    lc_mem_part_add(d, "parameters", LC_MEM_PARAMS, out->peak[LC_MEM_PARAMS]);
    lc_mem_part_add(d, "gradients (persistent)", LC_MEM_GRADS, out->model_states - out->peak[LC_MEM_PARAMS] -
                                                                   out->peak[LC_MEM_OPTIM]);
    lc_mem_part_add(d, "AdamW m and v", LC_MEM_OPTIM, out->peak[LC_MEM_OPTIM]);
    for (int i = 0; i < d->n; i++) d->p[i].held = "the whole step";
  }
  memset(&tmp, 0, sizeof tmp);
  lc_mem_parts ck, ac;
  memset(&ck, 0, sizeof ck), memset(&ac, 0, sizeof ac);
  lc_model_pass_parts(cfg, o, (int)out->T, am->saved, &ck, &ac);
  if (out->offload) lc_mem_part_add(&ac, "token ids on the device (int32)", LC_MEM_ACT, lc_bytes(LC_DT_I32, (size_t)out->T));
  lc_mem_parts_append(d, &ck, "forward to backward (its layer's)");
  lc_mem_parts_append(d, &ac, "the whole pass");
  const int call = s[p] + c[p] >= mm[p];
  switch (p) {
  case LC_PHASE_ATTN_FWD: lc_mem_parts_append(d, call ? &am->fwd_parts : &lm->attn_fwd_mm_parts, ph); break;
  case LC_PHASE_MLP_FWD: lc_mem_parts_append(d, &lm->mlp_fwd_parts, ph); break;
  case LC_PHASE_LOSS:
    lc_mem_part_add(&tmp, "loss tile (normed rows, logits, their gradient)", LC_MEM_SCRATCH, s[p]);
    lc_mem_parts_append(d, &tmp, ph);
    break;
  case LC_PHASE_MLP_BWD: lc_mem_parts_append(d, &lm->mlp_bwd_parts, ph); break;
  case LC_PHASE_ATTN_BWD:
    if (call) {
      lc_mem_parts_append(d, &lm->attn_bwd_parts, ph);
      lc_mem_parts_append(d, &am->bwd_parts, ph);
    } else lc_mem_parts_append(d, &lm->attn_bwd_mm_parts, ph);
    break;
  default: break;
  }
  memset(&tmp, 0, sizeof tmp);
  lc_mem_part_add(&tmp, out->offload ? "units in use: compute copies and gradients (device side of the offload)"
                                     : "units in use: ZeRO's gathered weights and temporary gradients",
                  -1, zb[p]);
  lc_mem_parts_append(d, &tmp, ph);
}

lc_status lc_memplan_predict(const lc_config *cfg, const lc_model_opts *o, long seq, int hp, int cp,
                             int window, int threads, lc_mem_estimate *out) {
  return lc_memplan_predict_hc(cfg, o, seq, hp, cp, window, 0, threads, out);
}

lc_status lc_memplan_predict_hc(const lc_config *cfg, const lc_model_opts *o, long seq, int hp, int cp,
                                int window, int head_chunk, int threads, lc_mem_estimate *out) {
  memset(out, 0, sizeof *out);
  if (hp <= 0) hp = 1;
  if (cp <= 0) cp = 1;
  if (window <= 0) window = cp;
  if (threads <= 0) threads = default_threads();
  LC_TRY(lc_config_validate(cfg));
  if (seq < 2) return lc_fail(LC_EINVAL, "--seq %ld is too short: use at least 2 tokens", seq);
  if (o->mlp_tile < 0 || o->loss_tile < 0)
    return lc_fail(LC_EINVAL, "--mlp-tile and --loss-tile must be >= 0 (0 = untiled)");
  // One sequence group of hp*cp ranks, batch 1 per group: the layout rules of the trainer.
  LC_TRY(lc_layout_validate(hp * cp, hp, cp, window, cfg->n_heads, cfg->n_kv_heads, seq, 1));
  const long T = seq / ((long)hp * cp);
  if (T > INT_MAX / 4)
    return lc_fail(LC_EINVAL, "--seq %ld gives %ld tokens per rank, more than longctx supports (%d); "
                   "use more ranks (--hp/--cp)", seq, T, INT_MAX / 4);
  const int Ti = (int)T;
  out->seq = seq;
  out->hp = hp, out->cp = cp, out->window = window, out->threads = threads;
  out->T = T;
  out->mlp_tiled = lc_tile_splits(o->mlp_tile, Ti);
  out->loss_tiled = lc_tile_splits(o->loss_tile, Ti);

  // Persistent: the parameter store's parameters, gradients and AdamW m and v, full or
  // sharded Z ways by stage (lc_pstore_sizes, from the store's own layout).
  const int stage = o->zero, Z = o->zero_group > 0 ? o->zero_group : hp * cp;
  LC_TRY(lc_zero_check(stage, 0, 0, 1));
  lc_ps_sizes zs;
  out->zero = stage;
  out->zero_group = stage > 0 ? Z : 1;
  if (cfg->lora.rank > 0) { // LoRA: the frozen base's weights alone, and the adapters' states
    lc_ps_sizes za;
    const lc_config acfg = lc_config_adapters(cfg);
    LC_TRY(lc_pstore_sizes(cfg, lc_lora_base_stage(stage), Z, &zs));
    LC_TRY(lc_pstore_sizes(&acfg, stage, Z, &za));
    out->padding = zs.padding + za.padding;
    out->peak[LC_MEM_PARAMS] = zs.params + za.params;
    out->peak[LC_MEM_GRADS] = za.grads;
    out->peak[LC_MEM_OPTIM] = za.optim;
  } else {
    LC_TRY(lc_pstore_sizes(cfg, stage, Z, &zs));
    out->padding = zs.padding;
    out->peak[LC_MEM_PARAMS] = zs.params;
    out->peak[LC_MEM_GRADS] = zs.grads;
    out->peak[LC_MEM_OPTIM] = zs.optim;
  }
  out->persistent = out->peak[LC_MEM_PARAMS] + out->peak[LC_MEM_GRADS] + out->peak[LC_MEM_OPTIM];
  out->model_states = out->persistent;

  // The attention strategy the trainer picks: local for one rank, else 2D.
  lc_attn_mem am;
  if (hp * cp == 1) lc_attn_local_mem(cfg->n_heads, cfg->n_kv_heads, cfg->head_dim, Ti, threads, o->precision == LC_DT_BF16, &am);
  else LC_TRY(lc_attn_2d_mem(hp, cp, window, seq, lc_cp_layout_chunks(o->cp_layout, seq, cp, hp), cfg->n_heads,
                             cfg->n_kv_heads, cfg->head_dim, head_chunk, threads, o->precision == LC_DT_BF16, &am));
  out->attn_saved_per_layer = am.saved;
  out->head_chunk = head_chunk > 0 ? head_chunk : cfg->n_heads / hp;

  // Held for the whole pass.
  lc_model_pass_bytes(cfg, o, Ti, am.saved, &out->peak[LC_MEM_CKPT], &out->peak[LC_MEM_ACT]);

  // Short-lived buffers, phase by phase.
  lc_layer_mem lm;
  lc_layer_mem_bytes(cfg, Ti, o->mlp_tile, o->precision == LC_DT_BF16,
                     hp * cp > 1 && lc_attn_2d_dkv_late(hp, cfg->n_heads, cfg->n_kv_heads, head_chunk), &lm);
  size_t *s = out->phase_scratch, *c = out->phase_comm;
  s[LC_PHASE_ATTN_FWD] = am.fwd_scratch, c[LC_PHASE_ATTN_FWD] = am.fwd_comm;
  s[LC_PHASE_MLP_FWD] = lm.mlp_fwd;
  s[LC_PHASE_LOSS] = lc_vocab_sliced(o, cfg->vocab)
                        ? lc_loss_sliced_scratch_bytes(cfg, Ti, o->loss_tile, o->vocab_slice, o->precision == LC_DT_BF16)
                        : lc_loss_scratch_bytes(cfg, Ti, o->loss_tile, o->precision == LC_DT_BF16);
  s[LC_PHASE_MLP_BWD] = lm.mlp_bwd;
  s[LC_PHASE_ATTN_BWD] = lm.attn_bwd + am.bwd_scratch, c[LC_PHASE_ATTN_BWD] = am.bwd_comm;
  // ZeRO's temporary units alive in each phase: gathered weights (stage 3) and gradient
  // buffers (stage >= 2), in the order the pass acquires them (lc_memplan_zero_transients).
  size_t zg[LC_PHASE_N], zr[LC_PHASE_N], zb[LC_PHASE_N];
  LC_TRY(lc_memplan_zero_transients(cfg, o, stage, Z, zg, zr, zb, LC_PHASE_N));
  if (o->offload_optimizer) { // those transients are the host's; the device holds units in use
    if (cfg->lora.rank > 0 || lc_vocab_sliced(o, cfg->vocab))
      return lc_fail(LC_EINVAL, "--offload-optimizer with --lora or --vocab-slice is not supported: drop one of them");
    size_t hg = 0, hr = 0, land = 0;
    for (int p = 0; p < LC_PHASE_N; p++) hg = zg[p] > hg ? zg[p] : hg, hr = zr[p] > hr ? zr[p] : hr;
    for (int u = 0; u < cfg->n_layers + 2; u++) {
      const size_t b = lc_ps_unit_bytes(&zs, cfg->n_layers, u);
      land = b > land ? b : land;
    }
    out->offload = 1;
    out->host_bytes = out->persistent + hg + hr + land;
    // A device's memory is not the host's: the pass's token ids are copied onto it (int32
    // [T]; with --pack or a window also the keys' bounds, 4 bytes a token: not counted here)
    out->peak[LC_MEM_ACT] += lc_bytes(LC_DT_I32, (size_t)T);
    out->peak[LC_MEM_PARAMS] = out->peak[LC_MEM_GRADS] = out->peak[LC_MEM_OPTIM] = 0;
    out->persistent = 0;
    LC_TRY(offload_transients(cfg, o, stage, Z, zg, zr, zb, LC_PHASE_N));
  }

  size_t best = 0, grad_tmp = 0, s0[LC_PHASE_N];
  memcpy(s0, s, sizeof s0); // (s[] becomes each phase's scratch peak below)
  // bf16: the attention half's GEMMs pack operands while no communication buffer is live
  // (outside the strategy's calls): a moment of scratch alone within those phases.
  size_t mm[LC_PHASE_N] = {0};
  mm[LC_PHASE_ATTN_FWD] = lm.attn_fwd_mm, mm[LC_PHASE_ATTN_BWD] = lm.attn_bwd_mm;
  for (int p = 0; p < LC_PHASE_N; p++) {
    out->phase_zero[p] = zb[p];
    size_t sc = s[p] + c[p] > mm[p] ? s[p] + c[p] : mm[p];
    if (mm[p] > s[p]) s[p] = mm[p];
    if (s[p] > out->peak[LC_MEM_SCRATCH]) out->peak[LC_MEM_SCRATCH] = s[p];
    if (c[p] > out->peak[LC_MEM_COMM]) out->peak[LC_MEM_COMM] = c[p];
    if (zg[p] > out->peak[LC_MEM_GATHERED]) out->peak[LC_MEM_GATHERED] = zg[p];
    if (zr[p] > grad_tmp) grad_tmp = zr[p];
    if (sc + zb[p] > best) best = sc + zb[p], out->total_phase = (lc_mem_phase)p;
  }
  out->peak[LC_MEM_GRADS] += grad_tmp;
  out->model_states_peak = out->peak[LC_MEM_PARAMS] + out->peak[LC_MEM_GRADS] + out->peak[LC_MEM_OPTIM] +
                           out->peak[LC_MEM_GATHERED];
  out->total = out->persistent + out->peak[LC_MEM_CKPT] + out->peak[LC_MEM_ACT] + best;
  peak_detail(out, cfg, o, &am, &lm, s0, c, mm, zb);
  return LC_OK;
}

// The layout a search holds fixed.
typedef struct {
  int hp, cp, window, head_chunk, threads;
} lay;

// Predicted total at S = k * unit, or SIZE_MAX if it cannot be predicted.
static size_t total_at(const lc_config *cfg, const lc_model_opts *o, long k, long unit, const lay *l) {
  lc_mem_estimate e;
  if (lc_memplan_predict_hc(cfg, o, k * unit, l->hp, l->cp, l->window, l->head_chunk, l->threads, &e) != LC_OK)
    return SIZE_MAX;
  return e.total;
}

// Largest k in [lo, hi] with total_at(k) <= budget, for a total nondecreasing in k; lo - 1 if none.
static long search(const lc_config *cfg, const lc_model_opts *o, long lo, long hi, long unit, const lay *l,
                   size_t budget) {
  if (lo > hi || total_at(cfg, o, lo, unit, l) > budget) return lo - 1;
  while (lo < hi) { // invariant: lo fits
    long mid = lo + (hi - lo + 1) / 2;
    if (total_at(cfg, o, mid, unit, l) <= budget) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

static long max_seq_at(const lc_config *cfg, const lc_model_opts *o, const lay *l, size_t budget_bytes) {
  const long unit = 2L * l->cp * l->hp; // S must be a multiple of 2*cp*hp: T = k * 2 local tokens
  lc_mem_estimate e;
  if (lc_memplan_predict_hc(cfg, o, unit, l->hp, l->cp, l->window, l->head_chunk, l->threads, &e) != LC_OK) return 0;
  const long kmax = (long)(INT_MAX / 4) / 2; // T = 2k within the supported range
  // The prediction grows with S except where the MLP becomes tiled (T > mlp_tile): there
  // its [T, ffn] buffers give way to one tile, and memory drops. Search the tiled range
  // first (T = 2k > mlp_tile), then the untiled one; each is nondecreasing in k.
  long k_tiled = o->mlp_tile > 0 ? o->mlp_tile / 2 + 1 : 1;
  long k = search(cfg, o, k_tiled, kmax, unit, l, budget_bytes);
  if (k < k_tiled) k = search(cfg, o, 1, k_tiled - 1, unit, l, budget_bytes);
  return k >= 1 ? k * unit : 0;
}

long lc_memplan_max_seq(const lc_config *cfg, const lc_model_opts *o, int hp, int cp, int window,
                        int threads, size_t budget_bytes) {
  return lc_memplan_max_seq_hc(cfg, o, hp, cp, window, 0, threads, budget_bytes, NULL);
}

int lc_memplan_auto_head_chunk(const lc_config *cfg, const lc_model_opts *o, long seq, int hp, int cp, int window,
                               int threads, size_t budget_bytes) {
  int v[256];
  const int n = hp > 1 ? lc_attn_2d_head_chunks(hp, cfg->n_heads, cfg->n_kv_heads, v, 256) : 0;
  if (n <= 1) return 0;
  for (int i = n - 1; i >= 0; i--) { // all heads first (fastest), then smaller chunks
    lc_mem_estimate e;
    const int N = i == n - 1 ? 0 : v[i];
    if (lc_memplan_predict_hc(cfg, o, seq, hp, cp, window, N, threads, &e) == LC_OK && e.total <= budget_bytes) return N;
  }
  return v[0]; // none fits: the least memory
}

lc_status lc_memplan_auto_ckpt(const lc_config *cfg, const lc_model_opts *o, long seq, int hp, int cp, int window,
                               int head_chunk, int threads, size_t budget_bytes, lc_ckpt_policy *policy, size_t *peak,
                               int *fits) {
  static const lc_ckpt_policy fastest_first[3] = {LC_CKPT_NONE, LC_CKPT_SELECTIVE, LC_CKPT_FULL};
  lc_status st = LC_OK;
  for (int i = 0; i < 3; i++) {
    lc_model_opts m = *o;
    m.ckpt = fastest_first[i];
    lc_mem_estimate e;
    st = lc_memplan_predict_hc(cfg, &m, seq, hp, cp, window, head_chunk, threads, &e);
    if (st != LC_OK) return st; // the layout, not the policy: the same for all three
    *policy = m.ckpt, *peak = e.total, *fits = e.total <= budget_bytes;
    if (*fits) return LC_OK;
  }
  return LC_OK; // none fits: full, the least memory
}

long lc_memplan_max_seq_hc(const lc_config *cfg, const lc_model_opts *o, int hp, int cp, int window, int head_chunk,
                           int threads, size_t budget_bytes, int *chunk_out) {
  lay l = {hp > 0 ? hp : 1, cp > 0 ? cp : 1, window, head_chunk, threads};
  if (l.window <= 0) l.window = l.cp;
  if (chunk_out) *chunk_out = head_chunk;
  if (head_chunk >= 0) return max_seq_at(cfg, o, &l, budget_bytes);
  // auto: the longest S any chunk size reaches; at that S, the chunk auto picks.
  int v[256];
  const int n = l.hp > 1 ? lc_attn_2d_head_chunks(l.hp, cfg->n_heads, cfg->n_kv_heads, v, 256) : 0;
  long best = 0;
  l.head_chunk = 0;
  if (n <= 1) best = max_seq_at(cfg, o, &l, budget_bytes);
  for (int i = 0; i < n; i++) {
    l.head_chunk = v[i] == cfg->n_heads / l.hp ? 0 : v[i];
    const long s = max_seq_at(cfg, o, &l, budget_bytes);
    best = s > best ? s : best;
  }
  if (chunk_out) *chunk_out = best > 0 ? lc_memplan_auto_head_chunk(cfg, o, best, l.hp, l.cp, l.window, threads, budget_bytes) : 0;
  return best;
}
