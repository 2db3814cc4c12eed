// The parameter store (pstore.h): storage by stage, creation and destruction, acquire and
// release of units (ZeRO-3 gathers, 2-byte compute copies, the optimizer offloaded), the step.
#include "model/pstore.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/bufcomm.h"
#include "backend/cpu/kern/kernels.h"
#include "model/pstore_internal.h"

const char *lc_zero_stage_desc(int stage) {
  switch (stage) {
    case 0: return "replicated weights, gradients and AdamW moments";
    case 1: return "AdamW moments sharded";
    case 2: return "AdamW moments and gradients sharded";
    case 3: return "AdamW moments, gradients and weights sharded";
    default: return "?";
  }
}

// Points the views of unit u's tensors at `base`, a buffer holding the unit ([u.n] floats);
// the empty buffer clears them.
void lc_ps_set_views(lc_pstore *ps, lc_weights *w, int u, lc_buf base) {
  const lc_param_unit *U = &ps->lay.units[u];
  for (int t = U->t0; t < U->t1; t++) {
    const lc_param_info *T = &ps->lay.table[t];
    *lc_weights_slot(w, T) = lc_buf_ok(base) ? lc_buf_view(base, T->offset - U->off, T->numel) : LC_PS_NONE;
  }
  lc_weights_tie(w, &ps->cfg);
}
static void clear_views(lc_pstore *ps, lc_weights *w) {
  lc_layer_weights *layer = w->layer;
  memset(w, 0, sizeof *w);
  if (layer) memset(layer, 0, sizeof *layer * (size_t)ps->cfg.n_layers);
  w->layer = layer;
}

// The pieces of each tensor this rank updates: stage 0 everything, else its slice of
// each unit.
static lc_status build_segments(lc_pstore *ps) {
  const lc_param_layout *L = &ps->lay;
  ps->seg = calloc((size_t)L->n_tensors, sizeof *ps->seg);
  if (!ps->seg) return lc_fail(LC_ENOMEM, "out of memory for the parameter store's segments");
  int k = 0;
  for (int u = 0; u < L->n_units; u++) {
    const lc_param_unit *U = &L->units[u];
    size_t lo = ps->stage == 0 ? U->off : lc_ps_owned_lo(ps, u);
    size_t hi = ps->stage == 0 ? U->off + U->n : lo + lc_ps_shard_floats(ps, u);
    for (int t = U->t0; t < U->t1; t++) {
      const lc_param_info *T = &L->table[t];
      size_t a = T->offset > lo ? T->offset : lo, b = T->offset + T->numel < hi ? T->offset + T->numel : hi;
      if (a >= b) continue;
      size_t local = ps->stage == 0 ? a : lc_ps_shard_off(ps, u) + (a - lo);
      lc_ps_segment *s = &ps->seg[k++];
      s->full = a;
      s->p = lc_ps_params_sharded(ps) ? local : a;
      s->g = lc_ps_grads_sharded(ps) ? local : a;
      s->o = lc_ps_optim_sharded(ps) ? local : a;
      s->n = b - a;
      s->decay = T->decay;
      s->tensor = t;
    }
  }
  ps->n_seg = k;
  return LC_OK;
}

lc_status lc_zero_check(int stage, int group, int group_given, int ranks) {
  if (stage < 0 || stage > 3)
    return lc_fail(LC_EINVAL, "--zero %d is not a ZeRO stage: use 0 (replicated), 1 (AdamW moments sharded), "
                   "2 (+ gradients) or 3 (+ weights)", stage);
  if (group_given && stage == 0) return lc_fail(LC_EINVAL, "--zero-group needs a sharded stage: add --zero 1, 2 or 3");
  if (group < 0 || (group > 0 && ranks % group != 0))
    return lc_fail(LC_EINVAL, "--zero-group %d does not divide the number of ranks (%d); use a divisor of %d "
                   "(0 or omitted: all of them)", group, ranks, ranks);
  return LC_OK;
}

static lc_status create(lc_pstore *ps, const lc_config *cfg, int stage, int group, lc_comm *world, lc_backend *be,
                        int own);

lc_status lc_pstore_create(lc_pstore *ps, const lc_config *cfg, int stage, int group, lc_comm *world,
                           lc_arena *arena) {
  lc_backend *be = NULL;
  memset(ps, 0, sizeof *ps);
  LC_TRY(lc_backend_open("cpu", arena, &be));
  return create(ps, cfg, stage, group, world, be, 1);
}

lc_status lc_pstore_create_on(lc_pstore *ps, const lc_config *cfg, int stage, int group, lc_comm *world,
                              lc_backend *be) {
  return create(ps, cfg, stage, group, world, be, 0);
}

// What a store of cfg holds its parameters in: tensor by tensor (U8) for a LoRA run's
// frozen base in GGUF blocks, bf16 for one given --base-dtype bf16, else fp32.
lc_dtype lc_ps_store_dtype(const lc_config *cfg) {
  if (lc_config_base_quant(cfg)) return LC_DT_U8;
  return cfg->lora.rank > 0 && cfg->lora.base_bf16 && !cfg->adapter_set ? LC_DT_BF16 : LC_DT_F32;
}

static lc_status create(lc_pstore *ps, const lc_config *cfg, int stage, int group, lc_comm *world, lc_backend *be,
                        int own) {
  memset(ps, 0, sizeof *ps);
  ps->be = be;
  ps->be_owned_ = own;
  ps->arena = be->host;
  const int W = world ? world->size : 1;
  lc_status st = lc_zero_check(stage, group, 0, W);
  if (st == LC_OK && !world && stage != 0) st = lc_fail(LC_EINVAL, "a local parameter store cannot be sharded");
  if (st != LC_OK) {
    lc_pstore_destroy(ps);
    return st;
  }
  if (group == 0) group = W;
  ps->cfg = *cfg;
  ps->stage = stage;
  ps->world = world;
  ps->Z = stage == 0 ? 1 : group;
  ps->R = W / ps->Z;
  if (stage > 0) {
    st = lc_comm_split(world, world->rank / ps->Z, world->rank, &ps->zg);
    if (st == LC_OK) st = lc_comm_split(world, world->rank % ps->Z, world->rank, &ps->rep);
    if (st != LC_OK) {
      lc_pstore_destroy(ps);
      return st;
    }
    ps->zrank = ps->zg->rank;
    ps->rrank = ps->rep->rank;
  }
  st = lc_param_layout_build(&ps->lay, cfg, ps->Z);
  ps->store = lc_ps_store_dtype(cfg);
  if (st == LC_OK && ps->store == LC_DT_BF16 && stage != 0 && stage != 3)
    st = lc_fail(LC_EINVAL, "internal: a frozen bf16 base is held whole (stage 0) or sharded (stage 3)");
  if (st == LC_OK && ps->store == LC_DT_U8 && stage != 0 && stage != 3)
    st = lc_fail(LC_EINVAL, "internal: a frozen base in GGUF blocks is held whole (stage 0) or sharded (stage 3)");
  size_t mixed_total = 0;
  if (st == LC_OK && ps->store == LC_DT_U8) {
    ps->hoff_ = calloc((size_t)ps->lay.n_tensors + 1, sizeof *ps->hoff_);
    ps->hdt_ = calloc((size_t)ps->lay.n_tensors + 1, sizeof *ps->hdt_);
    ps->uoff_ = calloc((size_t)ps->lay.n_units + 1, sizeof *ps->uoff_);
    st = ps->hoff_ && ps->hdt_ && ps->uoff_
             ? lc_ps_mixed_layout(cfg, &ps->lay, ps->Z, ps->hoff_, ps->hdt_, ps->uoff_, &mixed_total)
             : lc_fail(LC_ENOMEM, "out of memory for the parameter store");
  }
  if (st != LC_OK) {
    lc_pstore_destroy(ps);
    return st;
  }
  const size_t full = ps->lay.total, shard = full / (size_t)ps->Z;
  ps->n_params = ps->store == LC_DT_U8 ? mixed_total / (lc_ps_params_sharded(ps) ? (size_t)ps->Z : 1) // (U8: bytes)
                 : lc_ps_params_sharded(ps) ? shard : full;
  // A frozen base has no gradient: none is allocated (not even for the moment before the
  // model drops it: 4 bytes per weight at start-up).
  const int frozen = cfg->lora.rank > 0 && !cfg->adapter_set;
  ps->n_grads = frozen ? 0 : lc_ps_grads_sharded(ps) ? shard : full;
  ps->n_opt = lc_ps_optim_sharded(ps) ? shard : full;
  ps->u_ = calloc((size_t)ps->lay.n_units, sizeof *ps->u_);
  ps->red_ = calloc((size_t)ps->lay.n_units + 4, sizeof *ps->red_); // at most 3 in flight
  ps->w.layer = calloc((size_t)(cfg->n_layers > 0 ? cfg->n_layers : 1), sizeof *ps->w.layer);
  ps->g.layer = calloc((size_t)(cfg->n_layers > 0 ? cfg->n_layers : 1), sizeof *ps->g.layer);
  if (!ps->u_ || !ps->red_ || !ps->w.layer || !ps->g.layer)
    st = lc_fail(LC_ENOMEM, "out of memory for the parameter store");
  if (st == LC_OK) st = build_segments(ps);
  if (st == LC_OK)
    st = lc_buf_alloc(be, LC_MEM_PARAMS, ps->store, ps->n_params, 1,
                      ps->store == LC_DT_BF16 ? "frozen bf16 weights"
                      : ps->store == LC_DT_U8 ? "frozen weights in GGUF blocks" : "parameters",
                      &ps->params_b);
  if (st == LC_OK && !frozen) st = lc_buf_alloc(be, LC_MEM_GRADS, LC_DT_F32, ps->n_grads, 1, "gradients", &ps->grads_b);
  if (st != LC_OK) {
    lc_pstore_destroy(ps);
    return st;
  }
  ps->params = ps->store == LC_DT_F32 ? lc_buf_host(ps->params_b) : NULL;
  ps->grads = lc_buf_host(ps->grads_b);
  // Views that never move: full parameters (stages 0-2; a bf16 store's only while acquired),
  // full gradients (stages 0-1).
  for (int u = 0; u < ps->lay.n_units; u++) {
    if (!lc_ps_params_sharded(ps) && ps->store == LC_DT_F32) lc_ps_set_views(ps, &ps->w, u, lc_ps_unit_of(ps, ps->params_b, u));
    if (!lc_ps_grads_sharded(ps) && !frozen) lc_ps_set_views(ps, &ps->g, u, lc_ps_unit_of(ps, ps->grads_b, u));
  }
  if (ps->store == LC_DT_U8 && !lc_ps_params_sharded(ps)) lc_ps_mixed_views(ps);
  return LC_OK;
}

lc_status lc_pstore_add_optimizer(lc_pstore *ps) {
  if (lc_buf_ok(ps->m_b)) return LC_OK;
  LC_TRY(lc_buf_alloc(ps->be, LC_MEM_OPTIM, LC_DT_F32, ps->n_opt, 1, "AdamW first moment", &ps->m_b));
  LC_TRY(lc_buf_alloc(ps->be, LC_MEM_OPTIM, LC_DT_F32, ps->n_opt, 1, "AdamW second moment", &ps->v_b));
  LC_TRY(lc_buf_alloc(ps->be, LC_MEM_OPTIM, LC_DT_F64, LC_PS_NORM_ACC_BYTES / sizeof(double), 1,
                      "the gradient norm's accumulator", &ps->norm_acc_b));
  ps->m = lc_buf_host(ps->m_b);
  ps->v = lc_buf_host(ps->v_b);
  return LC_OK;
}

void lc_pstore_drop_grads(lc_pstore *ps) {
  lc_buf_free(&ps->grads_b);
  ps->grads = NULL;
  ps->n_grads = 0;
  clear_views(ps, &ps->g);
}

void lc_pstore_destroy(lc_pstore *ps) {
  if (ps->u_)
    for (int u = 0; u < ps->lay.n_units; u++) {
      if (ps->u_[u].greq.active) lc_wait(ps->zg, &ps->u_[u].greq);
      lc_buf_hview_close(&ps->u_[u].hsend, 0);
      lc_buf_hview_close(&ps->u_[u].hgath, 0);
      lc_buf_free(&ps->u_[u].gath);
    }
  for (int i = 0; i < ps->n_red_; i++) {
    if (ps->red_[i].req.active) lc_wait(lc_ps_red_comm(ps, &ps->red_[i]), &ps->red_[i].req);
    lc_buf_hview_close(&ps->red_[i].hv_in, 0);
    lc_buf_hview_close(&ps->red_[i].hv_out, 0);
    if (ps->red_[i].unit < 0) {
      lc_buf_free(&ps->red_[i].gbuf);
      free(ps->red_[i].cnt);
    }
  }
  if (ps->u_)
    for (int u = 0; u < ps->lay.n_units; u++) {
      lc_buf_free(&ps->u_[u].gbuf);
      lc_buf_free(&ps->u_[u].dw);
      lc_buf_free(&ps->u_[u].dg);
    }
  lc_buf_free(&ps->norm_acc_b);
  lc_buf_free(&ps->v_b);
  lc_buf_free(&ps->m_b);
  lc_buf_free(&ps->grads_b);
  lc_buf_free(&ps->params_b);
  if (ps->be_owned_) lc_backend_close(ps->be);
  free(ps->seg);
  free(ps->hoff_);
  free(ps->hdt_);
  free(ps->uoff_);
  free(ps->w.layer);
  free(ps->g.layer);
  free(ps->red_);
  free(ps->u_);
  lc_param_layout_free(&ps->lay);
  lc_comm_destroy(ps->rep);
  lc_comm_destroy(ps->zg);
  memset(ps, 0, sizeof *ps);
}

// ---------------------------------------------------------------- 2-byte compute copies
// A bf16 pass's acquired unit: its compute copy is the whole unit in 2 bytes (the
// matrices, which the GEMMs and the embedding lookup read in place: lc_weights_slot16)
// followed by its vectors (norm weights, biases: 1-D tensors, each padded to 16 floats)
// rounded and widened into fp32 for the element-wise ops. (Vocabulary slices, lc_ps_rows,
// hold their matrices' rows in 2 bytes the same way; a pass with slices never acquires the
// embedding or the final unit.)
static size_t vec_floats(const lc_param_layout *L, int u) {
  size_t k = 0;
  for (int t = L->units[u].t0; t < L->units[u].t1; t++)
    if (L->table[t].ndim == 1) k += (L->table[t].numel + 15) & ~(size_t)15;
  return k;
}
size_t lc_ps_copy16_bytes(const lc_param_layout *L, int u, int vectors_only) {
  return (vectors_only ? 0 : lc_bytes(LC_DT_BF16, L->units[u].n)) + lc_bytes(LC_DT_F32, vec_floats(L, u));
}
// The views of unit u into its 2-byte copy `buf` (U8, lc_ps_copy16_bytes; empty: every view of
// the unit cleared). widen: fill the vectors from the 2-byte values first.
static lc_status set_views16(lc_pstore *ps, int u, lc_buf buf, int widen) {
  const lc_param_unit *U = &ps->lay.units[u];
  size_t vec = lc_bytes(LC_DT_BF16, U->n); // where the widened vectors start
  for (int t = U->t0; t < U->t1; t++) {
    const lc_param_info *T = &ps->lay.table[t];
    lc_buf *slot = lc_weights_slot(&ps->w, T);
    *slot = LC_PS_NONE;
    if (!lc_buf_ok(buf)) continue;
    const lc_buf h = lc_buf_part(buf, lc_bytes(LC_DT_BF16, T->offset - U->off), T->numel, LC_DT_BF16);
    if (T->ndim == 2) {
      *slot = h;
      continue;
    }
    *slot = lc_buf_part(buf, vec, T->numel, LC_DT_F32);
    if (widen) LC_TRY(lc_be_bf16_unpack(*slot, h));
    vec += lc_bytes(LC_DT_F32, (T->numel + 15) & ~(size_t)15);
  }
  lc_weights_tie(&ps->w, &ps->cfg);
  return LC_OK;
}

// ---------------------------------------------------------------- gathers (stage 3)
static lc_status start_gather(lc_pstore *ps, int u) {
  lc_ps_unit *x = &ps->u_[u];
  if (lc_buf_ok(x->gath)) return LC_OK;
  if (ps->store == LC_DT_U8) { // blocks and dense tensors as they are held: the unit's bytes
    const size_t ub = ps->uoff_[u + 1] - ps->uoff_[u], qs = lc_ps_q_shard(ps, u);
    x->g16 = 0;
    LC_TRY(lc_buf_alloc(ps->be, LC_MEM_GATHERED, LC_DT_U8, ub, 0, "gathered frozen weights (GGUF blocks)", &x->gath));
    LC_TRY(lc_be_copy(lc_buf_part(x->gath, (size_t)ps->zrank * qs, qs, LC_DT_U8),
                      lc_buf_part(ps->params_b, ps->uoff_[u] / (size_t)ps->Z, qs, LC_DT_U8), LC_STREAM_COMPUTE));
    LC_TRY(lc_buf_hview_open(x->gath, 1, "a ZeRO-3 gather (staged)", &x->hgath));
    return lc_iallgather(ps->zg, NULL, x->hgath.host, qs, LC_DT_U8, &x->greq);
  }
  const size_t n = ps->lay.units[u].n, sh = lc_ps_shard_floats(ps, u);
  x->g16 = ps->compute == LC_DT_BF16;
  LC_TRY(lc_buf_alloc(ps->be, LC_MEM_GATHERED, LC_DT_U8, x->g16 ? lc_ps_copy16_bytes(&ps->lay, u, 0) : lc_bytes(LC_DT_F32, n), 0,
                      x->g16 ? "gathered bf16 weights" : "gathered weights", &x->gath));
  const lc_buf mine = lc_buf_view(ps->params_b, lc_ps_shard_off(ps, u), sh);
  if (!x->g16) {
    LC_TRY(lc_buf_hview_open(mine, 1, "a ZeRO-3 gather's shard (staged)", &x->hsend));
    LC_TRY(lc_buf_hview_open(lc_buf_part(x->gath, 0, n, LC_DT_F32), 0, "a ZeRO-3 gather (staged)", &x->hgath));
    return lc_iallgather(ps->zg, x->hsend.host, x->hgath.host, sh, LC_DT_F32, &x->greq);
  }
  // bf16 compute: the bf16 weights are what is gathered (half the bytes), straight into the
  // unit's 2-byte compute copy; each rank rounds its shard into its slot.
  const lc_buf slot = lc_buf_part(x->gath, lc_bytes(LC_DT_BF16, (size_t)ps->zrank * sh), sh, LC_DT_BF16);
  if (ps->store == LC_DT_BF16) LC_TRY(lc_be_copy(slot, mine, LC_STREAM_COMPUTE)); // (a bf16 store's shard is its bf16 values)
  else LC_TRY(lc_be_bf16_pack(slot, mine));
  LC_TRY(lc_buf_hview_open(lc_buf_part(x->gath, 0, n, LC_DT_BF16), 1, "a ZeRO-3 gather (staged)", &x->hgath));
  return lc_iallgather(ps->zg, NULL, x->hgath.host, sh, LC_DT_BF16, &x->greq);
}

void lc_pstore_pass_begin(lc_pstore *ps, int want_grads) {
  ps->want_grads_ = want_grads;
  // Unknown pass count (lc_pstore_step_begin(ps, 0)): every pass is the last.
  ps->last_ = ps->step_passes_ <= 0 || ps->passes_ + 1 >= ps->step_passes_;
}

void lc_pstore_set_compute(lc_pstore *ps, lc_dtype compute) { ps->compute = compute; }

// A bf16 store's acquired unit: the matrices viewed where they lie, the vectors widened
// into x->gath (vec_floats of them).
static lc_status views_b16(lc_pstore *ps, int u) {
  lc_ps_unit *x = &ps->u_[u];
  const lc_param_unit *U = &ps->lay.units[u];
  const size_t vb = lc_ps_copy16_bytes(&ps->lay, u, 1); // (0: matrices only, e.g. the embedding: nothing to hold)
  if (vb) LC_TRY(lc_buf_alloc(ps->be, LC_MEM_GATHERED, LC_DT_U8, vb, 0, "the frozen bf16 unit's vectors", &x->gath));
  size_t vec = 0;
  for (int t = U->t0; t < U->t1; t++) {
    const lc_param_info *T = &ps->lay.table[t];
    lc_buf *slot = lc_weights_slot(&ps->w, T);
    const lc_buf h = lc_buf_view(ps->params_b, T->offset, T->numel);
    if (T->ndim == 2) {
      *slot = h;
      continue;
    }
    *slot = lc_buf_part(x->gath, vec, T->numel, LC_DT_F32);
    LC_TRY(lc_be_bf16_unpack(*slot, h));
    vec += lc_bytes(LC_DT_F32, (T->numel + 15) & ~(size_t)15);
  }
  lc_weights_tie(&ps->w, &ps->cfg);
  return LC_OK;
}

// Stages 0-2 in bf16: the unit's 2-byte compute copy (set_views16), the views point at it.
static lc_status round_copy(lc_pstore *ps, int u) {
  lc_ps_unit *x = &ps->u_[u];
  if (lc_buf_ok(x->gath)) return LC_OK; // acquired twice (a tied head): the copy is there
  if (ps->store == LC_DT_BF16) return views_b16(ps, u);
  const size_t n = ps->lay.units[u].n;
  LC_TRY(lc_buf_alloc(ps->be, LC_MEM_GATHERED, LC_DT_U8, lc_ps_copy16_bytes(&ps->lay, u, 0), 0, "bf16 compute weights",
                      &x->gath));
  LC_TRY(lc_be_bf16_pack(lc_buf_part(x->gath, 0, n, LC_DT_BF16), lc_ps_unit_of(ps, ps->params_b, u)));
  return set_views16(ps, u, x->gath, 1);
}

// ---------------------------------------------------------------- the optimizer offloaded
lc_status lc_pstore_offload(lc_pstore *ps, lc_backend *dev) {
  if (!dev || dev == ps->be || dev->host_memory)
    return lc_fail(LC_EINVAL, "--offload-optimizer moves the optimizer states from a GPU into host memory; on %s they are "
                   "in host memory already: drop --offload-optimizer", dev ? dev->name : "cpu");
  if (ps->store != LC_DT_F32 || ps->cfg.lora.rank > 0)
    return lc_fail(LC_EINVAL, "--offload-optimizer with a frozen base (--lora): the adapters' states are small, keep "
                   "them on the device: drop --offload-optimizer");
  if (!ps->be->host_memory) return lc_fail(LC_EINVAL, "internal: an offloaded store's states must be in host memory");
  ps->dev = dev;
  return LC_OK;
}

// Unit u's compute copy up into one device buffer of the same bytes (the memory model's
// lc_ps_copy_bytes): the fp32 parameters' range (stage 3: the gathered copy), or the bf16
// copy acquire_here made (its matrices in 2 bytes, its vectors widened); the views then
// point at the device's.
static lc_status offload_up(lc_pstore *ps, int u) {
  if (ps->vocab_rows) return lc_fail(LC_EINVAL, "--offload-optimizer with --vocab-slice is not supported: drop one of them");
  lc_ps_unit *x = &ps->u_[u];
  const lc_param_unit *U = &ps->lay.units[u];
  // Acquired again without a release (a tied head): still the device's views, nothing to
  // do; views the host side set again (a stage-3 gather) are copied up again.
  if (lc_buf_ok(x->dw) && lc_weights_slot(&ps->w, &ps->lay.table[U->t0])->be == ps->dev) return LC_OK;
  lc_buf_free(&x->dw);
  const int b16 = ps->compute == LC_DT_BF16;
  const lc_buf src = b16 ? x->gath
                     : lc_ps_params_sharded(ps) ? lc_buf_part(x->gath, 0, U->n, LC_DT_F32) : lc_ps_unit_of(ps, ps->params_b, u);
  const void *h = lc_buf_host_or_fail(src, "an offloaded unit's weights");
  if (!h) return LC_EINVAL;
  LC_TRY(lc_buf_alloc(ps->dev, LC_MEM_GATHERED, src.dt, src.n, 0, "a unit's weights on the device (--offload-optimizer)",
                      &x->dw));
  LC_TRY(lc_buf_write(x->dw, h, LC_SYNC_OFFLOAD));
  if (b16) return set_views16(ps, u, x->dw, 0);
  lc_ps_set_views(ps, &ps->w, u, x->dw);
  return LC_OK;
}

// Unit u's device gradient down, added into the host gradient (the full buffer's range for
// stages 0/1, the temporary one for stages >= 2), and freed; the views back to the host's.
lc_status lc_ps_offload_down(lc_pstore *ps, int u) {
  lc_ps_unit *x = &ps->u_[u];
  if (!lc_buf_ok(x->dg)) return LC_OK;
  const lc_buf host = lc_ps_grads_sharded(ps) ? x->gbuf : lc_ps_unit_of(ps, ps->grads_b, u);
  lc_buf tmp;
  LC_TRY(lc_buf_alloc(ps->be, LC_MEM_COMM, LC_DT_F32, x->dg.n, 0, "an offloaded gradient's landing buffer", &tmp));
  lc_status st = lc_buf_read(x->dg, lc_buf_host(tmp), LC_SYNC_OFFLOAD);
  if (st == LC_OK) st = lc_be_add(host, tmp);
  lc_buf_free(&tmp);
  lc_buf_free(&x->dg);
  lc_ps_set_views(ps, &ps->g, u, host);
  return st;
}

static lc_status acquire_here(lc_pstore *ps, int unit, int next);
static lc_status offload_up(lc_pstore *ps, int u);

lc_status lc_pstore_acquire(lc_pstore *ps, int unit, int next) {
  lc_ps_trace_event(ps, 'A', unit, next);
  LC_TRY(acquire_here(ps, unit, next));
  return ps->dev ? offload_up(ps, unit) : LC_OK;
}

// The unit's views on the store's backend (the host's, when the optimizer is offloaded).
static lc_status acquire_here(lc_pstore *ps, int unit, int next) {
  const int bf16 = ps->compute == LC_DT_BF16;
  if (ps->store == LC_DT_BF16 && !bf16)
    return lc_fail(LC_EINVAL, "a bf16 frozen base computes in bf16: add --precision bf16 (or --base-dtype fp32)");
  if (ps->store == LC_DT_U8 && !bf16 != !ps->cfg.lora.base_bf16)
    return lc_fail(LC_EINVAL, "internal: a frozen base in GGUF blocks held for %s passes, acquired in a %s pass",
                   ps->cfg.lora.base_bf16 ? "bf16" : "fp32", bf16 ? "bf16" : "fp32");
  if (ps->store == LC_DT_U8 && !lc_ps_params_sharded(ps)) return LC_OK; // every view fixed at create: nothing to copy
  if (!lc_ps_params_sharded(ps)) return bf16 ? round_copy(ps, unit) : LC_OK;
  lc_ps_unit *x = &ps->u_[unit];
  LC_TRY(start_gather(ps, unit));
  LC_TRY(lc_wait(ps->zg, &x->greq));
  LC_TRY(lc_buf_hview_close(&x->hsend, 0));
  LC_TRY(lc_buf_hview_close(&x->hgath, 1)); // (staged: the gathered weights onto the device)
  if (ps->store == LC_DT_U8) {
    lc_ps_q_views(ps, unit, x->gath);
  } else if (x->g16) {
    LC_TRY(set_views16(ps, unit, x->gath, !x->rounded)); // the vectors widened once per gather
    x->rounded = 1;
  } else {
    lc_ps_set_views(ps, &ps->w, unit, lc_buf_part(x->gath, 0, ps->lay.units[unit].n, LC_DT_F32));
  }
  if (next >= 0) LC_TRY(start_gather(ps, next));
  return LC_OK;
}

void lc_pstore_release(lc_pstore *ps, int unit) {
  lc_ps_trace_event(ps, 'R', unit, -1);
  lc_ps_unit *x = &ps->u_[unit];
  if (ps->dev) { // the device copy goes; the views back to the host's (below, or the full parameters)
    lc_buf_free(&x->dw);
    if (!lc_ps_params_sharded(ps)) lc_ps_set_views(ps, &ps->w, unit, lc_ps_unit_of(ps, ps->params_b, unit));
  }
  if (!lc_ps_params_sharded(ps)) {
    if (!lc_buf_ok(x->gath)) return;
    // back to the fp32 views (a bf16 store: none until the next acquire)
    lc_ps_set_views(ps, &ps->w, unit, ps->store == LC_DT_F32 ? lc_ps_unit_of(ps, ps->params_b, unit) : LC_PS_NONE);
    lc_buf_free(&x->gath);
    return;
  }
  if (x->greq.active) lc_wait(ps->zg, &x->greq); // released before use (an error path)
  lc_buf_hview_close(&x->hsend, 0);
  lc_buf_hview_close(&x->hgath, 0);
  lc_ps_set_views(ps, &ps->w, unit, LC_PS_NONE);
  lc_buf_free(&x->gath);
  x->rounded = x->g16 = 0;
}

lc_status lc_pstore_prefetch(lc_pstore *ps, int unit) {
  lc_ps_trace_event(ps, 'P', unit, -1);
  return lc_ps_params_sharded(ps) ? start_gather(ps, unit) : LC_OK;
}

lc_status lc_pstore_pass_end(lc_pstore *ps) {
  if (ps->want_grads_) ps->passes_++;
  // Temporary gradient buffers never outlive their pass (stage >= 2).
  return lc_ps_grads_sharded(ps) ? lc_ps_retire(ps, 0) : LC_OK;
}

void lc_pstore_step_begin(lc_pstore *ps, int passes) {
  if (lc_buf_ok(ps->grads_b)) lc_be_zero(ps->grads_b); // inference stores have none
  ps->passes_ = 0;
  ps->step_passes_ = passes;
}

// Sum of squares of the whole (reduced) gradient, identical on every rank (collective).
// The segments' sums accumulate on the backend, in segment order, and come to the host in
// one named read (the gradient norm: the clip factor and the non-finite check need it).
static lc_status grad_sumsq(lc_pstore *ps, double *sumsq) {
  double s = 0;
  if (!lc_buf_ok(ps->norm_acc_b))
    return lc_fail(LC_EINVAL, "the parameter store has no optimizer: call lc_pstore_add_optimizer");
  LC_TRY(lc_be_zero(ps->norm_acc_b));
  for (int i = 0; i < ps->n_seg; i++)
    LC_TRY(lc_be_sumsq_acc(ps->norm_acc_b, lc_buf_view(ps->grads_b, ps->seg[i].g, ps->seg[i].n)));
  LC_TRY(lc_buf_read(ps->norm_acc_b, &s, LC_SYNC_GRAD_NORM));
  // Stage 0: every rank holds the whole reduced gradient. Otherwise the group's shards
  // make one whole (every group holds the same values).
  if (ps->stage > 0) LC_TRY(lc_allreduce_sum(ps->zg, &s, 1, LC_DT_F64));
  *sumsq = s;
  return LC_OK;
}

// After the update of this rank's segments: stages 1/2 all-gather the parameters.
static lc_status sync_params(lc_pstore *ps);

lc_status lc_pstore_update(lc_pstore *ps, const lc_adamw_hp *hp, float max_norm, int apply, long *adam_step,
                           double *norm, int *applied) {
  *applied = 0;
  LC_TRY(lc_pstore_finish_grads(ps));
  double sumsq = 0;
  LC_TRY(grad_sumsq(ps, &sumsq));
  *norm = sqrt(sumsq);
  if (!apply || !isfinite(*norm)) return LC_OK;
  const float clip = lc_clip_factor(*norm, max_norm);
  lc_adamw_args a = {.beta1 = hp->beta1, .beta2 = hp->beta2, .eps = hp->eps, .lr = hp->lr};
  lc_adamw_bias(hp, ++*adam_step, &a.step_size, &a.inv_sqrt_bc2);
  for (int i = 0; i < ps->n_seg; i++) {
    const lc_ps_segment *s = &ps->seg[i];
    const lc_buf g = lc_buf_view(ps->grads_b, s->g, s->n);
    if (clip != 1.0f) LC_TRY(lc_be_scale(g, clip));
    a.wd = s->decay ? hp->weight_decay : 0.0f;
    LC_TRY(lc_be_adamw(lc_buf_view(ps->params_b, s->p, s->n), g, lc_buf_view(ps->m_b, s->o, s->n),
                       lc_buf_view(ps->v_b, s->o, s->n), &a));
  }
  *applied = 1;
  return sync_params(ps);
}

// Without host-addressable memory: each unit's gather staged through host memory (comm),
// blocking (backend/bufcomm.h).
static lc_status sync_params_staged(lc_pstore *ps) {
  lc_status st = LC_OK;
  for (int u = 0; u < ps->lay.n_units && st == LC_OK; u++)
    st = lc_buf_allgather_inplace(ps->zg, lc_buf_view(ps->params_b, ps->lay.units[u].off, ps->lay.units[u].n),
                                  lc_ps_shard_floats(ps, u));
  return st;
}

static lc_status sync_params(lc_pstore *ps) {
  if (ps->stage != 1 && ps->stage != 2) return LC_OK;
  if (!ps->params) return sync_params_staged(ps);
  // In place: this rank's slice of each unit is already where the gather puts it.
  lc_req q[2] = {{{0}, 0}, {{0}, 0}};
  lc_status st = LC_OK;
  for (int u = 0; u < ps->lay.n_units && st == LC_OK; u++) {
    // two in flight: the next gather is issued before the previous one is waited for
    lc_req *r = &q[u % 2];
    st = lc_wait(ps->zg, r);
    if (st == LC_OK)
      st = lc_iallgather(ps->zg, NULL, ps->params + ps->lay.units[u].off, lc_ps_shard_floats(ps, u), LC_DT_F32, r);
  }
  for (int k = 0; k < 2; k++) {
    lc_status s2 = lc_wait(ps->zg, &q[k]);
    if (st == LC_OK) st = s2;
  }
  return st;
}
