// The parameter store (pstore.h): storage by stage, per-unit gathers and gradient
// reductions as small state machines progressed by polling, tensor-wise access.
#include "model/pstore.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/bufcomm.h"
#include "core/dtype.h"
#include "core/runstate.h"
#include "backend/cpu/ops/ops.h"
#include "backend/cpu/kern/kernels.h"
#include "core/dequant.h"

#define TAG_TENSOR 301

// Collectives take host views of backend ranges (lc_buf_hview, backend/bufcomm.h): the
// range itself where the backend's memory is the host's, else a staging copy read before
// the collective is posted and written back when it has completed.

struct lc_ps_unit {
  lc_buf gath;  // stage 3: gathered weights [u.n] (empty: not resident); bf16 compute (every
                // stage): the unit's 2-byte compute copy while acquired (set_views16)
  lc_req greq;  // its all-gather
  lc_buf_hview hsend, hgath; // the gather's send and receive views
  int rounded;  // stage 3, bf16: the copy's vectors are widened
  int g16;      // stage 3: the gather moves bf16 into a 2-byte compute copy
  lc_buf gbuf;  // stage >= 2: temporary full gradient [u.n]
  int gopen;    // between grad_begin and grad_end
  lc_buf dw, dg; // the optimizer offloaded (ps->dev): the weights' device copy while acquired,
                 // the gradient's device buffer [u.n] from grad_begin to grad_end
};

// A gradient reduction in flight: phase 0 the group collective (all-reduce for stage 0,
// reduce-scatter otherwise), phase 1 the all-reduce across replica groups. Phase 1 of a
// reduction starts only after every older one's has: collectives on the replica
// communicator must start in the same order on every rank, and phase 0 may finish in a
// different order on different ranks.
struct lc_ps_red {
  int unit, phase, done;
  int p0_done; // phase 0 complete, phase 1 not started yet
  lc_req req;
  // A row range's reduction (unit < 0; stage >= 2): its gradient rows (freed at retire),
  // the per-rank counts the reduce-scatter reads, and this rank's piece of its shard.
  lc_buf gbuf;
  float *piece; // (the host view of the piece: hv_out.host)
  size_t piece_n;
  int *cnt;
  lc_buf_hview hv_in, hv_out; // what the collective sends (ZeRO 2: the temporary gradient) and reduces into
};

static lc_comm *red_comm(const lc_pstore *ps, const lc_ps_red *r);

const char *lc_zero_stage_desc(int stage) {
  switch (stage) {
    case 0: return "replicated weights, gradients and AdamW moments";
    case 1: return "AdamW moments sharded";
    case 2: return "AdamW moments and gradients sharded";
    case 3: return "AdamW moments, gradients and weights sharded";
    default: return "?";
  }
}

static size_t shard_floats(const lc_pstore *ps, int u) { return ps->lay.units[u].n / (size_t)ps->Z; }
// Offset of unit u's shard in a shard buffer (every unit size is a multiple of Z).
static size_t shard_off(const lc_pstore *ps, int u) { return ps->lay.units[u].off / (size_t)ps->Z; }
// This rank's slice of unit u in full coordinates: [lo, lo + shard_floats).
static size_t owned_lo(const lc_pstore *ps, int u) {
  return ps->lay.units[u].off + (size_t)ps->zrank * shard_floats(ps, u);
}

static int params_sharded(const lc_pstore *ps) { return ps->stage >= 3; }
static int grads_sharded(const lc_pstore *ps) { return ps->stage >= 2; }
static int optim_sharded(const lc_pstore *ps) { return ps->stage >= 1; }

static const lc_buf NONE = {0};

// Points the views of unit u's tensors at `base`, a buffer holding the unit ([u.n] floats);
// the empty buffer clears them.
static void set_views(lc_pstore *ps, lc_weights *w, int u, lc_buf base) {
  const lc_param_unit *U = &ps->lay.units[u];
  for (int t = U->t0; t < U->t1; t++) {
    const lc_param_info *T = &ps->lay.table[t];
    *lc_weights_slot(w, T) = lc_buf_ok(base) ? lc_buf_view(base, T->offset - U->off, T->numel) : NONE;
  }
  lc_weights_tie(w, &ps->cfg);
}
// The unit's range of a full flat buffer (params_b, grads_b).
static lc_buf unit_of(const lc_pstore *ps, lc_buf full, int u) {
  return lc_buf_view(full, ps->lay.units[u].off, ps->lay.units[u].n);
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
    size_t lo = ps->stage == 0 ? U->off : owned_lo(ps, u);
    size_t hi = ps->stage == 0 ? U->off + U->n : lo + shard_floats(ps, u);
    for (int t = U->t0; t < U->t1; t++) {
      const lc_param_info *T = &L->table[t];
      size_t a = T->offset > lo ? T->offset : lo, b = T->offset + T->numel < hi ? T->offset + T->numel : hi;
      if (a >= b) continue;
      size_t local = ps->stage == 0 ? a : shard_off(ps, u) + (a - lo);
      lc_ps_segment *s = &ps->seg[k++];
      s->full = a;
      s->p = params_sharded(ps) ? local : a;
      s->g = grads_sharded(ps) ? local : a;
      s->o = optim_sharded(ps) ? local : a;
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
static lc_dtype store_dtype(const lc_config *cfg) {
  if (lc_config_base_quant(cfg)) return LC_DT_U8;
  return cfg->lora.rank > 0 && cfg->lora.base_bf16 && !cfg->adapter_set ? LC_DT_BF16 : LC_DT_F32;
}

// ---- a frozen base in GGUF blocks (store U8): each tensor at its own 64-byte-aligned byte
// offset, in the dtype mixed_dt gives it.
#define MIXED_ALIGN 64
static lc_dtype mixed_dt(const lc_config *cfg, const lc_param_info *p) {
  const int q = lc_param_base_q(cfg, p);
  if (q) return (lc_dtype)q;
  return p->ndim == 2 && cfg->lora.base_bf16 ? LC_DT_BF16 : LC_DT_F32;
}
// Total bytes; off and dt (when not NULL) get each tensor's offset and dtype, uoff (when
// not NULL) each unit's start (n_units + 1 entries). Each unit ends padded to a multiple of
// 64 Z bytes, so that its Z shards are whole 64-byte pieces (Z = 1: the tensors' own
// alignment, nothing more). A quantized tensor's rows must be whole blocks (LC_EINVAL).
static lc_status mixed_layout(const lc_config *cfg, const lc_param_layout *L, int Z, size_t *off, lc_dtype *dt,
                              size_t *uoff, size_t *total) {
  size_t at = 0;
  const size_t q = (size_t)MIXED_ALIGN * (size_t)(Z > 1 ? Z : 1);
  for (int u = 0; u < L->n_units; u++) {
    if (uoff) uoff[u] = at;
    for (int t = L->units[u].t0; t < L->units[u].t1; t++) {
      const lc_param_info *p = &L->table[t];
      const lc_dtype d = mixed_dt(cfg, p);
      if (lc_dtype_is_quant(d) && (size_t)p->shape[1] % lc_dtype_block(d))
        return lc_fail(LC_EINVAL, "%s: rows of %ld values are not whole %s blocks of %zu", p->name, p->shape[1],
                       lc_dtype_name(d), lc_dtype_block(d));
      if (off) off[t] = at, dt[t] = d;
      at += (lc_bytes(d, p->numel) + MIXED_ALIGN - 1) & ~(size_t)(MIXED_ALIGN - 1);
    }
    at = (at + q - 1) / q * q;
  }
  if (uoff) uoff[L->n_units] = at;
  *total = at;
  return LC_OK;
}

// ---- a U8 store under stage 3: rank i of the zero group holds bytes [uoff[u] + i s,
// + s) of unit u (s = the unit's bytes / Z), at byte uoff[u] / Z of params_b.
static size_t q_shard(const lc_pstore *ps, int u) { return (ps->uoff_[u + 1] - ps->uoff_[u]) / (size_t)ps->Z; }
// The full-layout bytes [x0, x1) of unit u that zero-group rank r holds: [*a, *b) (*a == *b: none).
static void q_piece(const lc_pstore *ps, int u, size_t x0, size_t x1, int r, size_t *a, size_t *b) {
  const size_t lo = ps->uoff_[u] + (size_t)r * q_shard(ps, u), hi = lo + q_shard(ps, u);
  *a = x0 > lo ? x0 : lo;
  *b = x1 < hi ? x1 : hi;
  if (*b < *a) *b = *a;
}
// This rank's part of the full-layout bytes [x0, x1) of unit u (stage 0: all of them).
static void q_mine(const lc_pstore *ps, int u, size_t x0, size_t x1, size_t *a, size_t *b) {
  if (ps->stage < 3) *a = x0, *b = x1;
  else q_piece(ps, u, x0, x1, ps->zrank, a, b);
}
// Where full-layout byte x of this rank's part of unit u lies in params_b.
static size_t q_local(const lc_pstore *ps, int u, size_t x) {
  return ps->stage < 3 ? x : ps->uoff_[u] / (size_t)ps->Z + (x - ps->uoff_[u] - (size_t)ps->zrank * q_shard(ps, u));
}
// Every view of a whole (stage 0) store, once: the matrices and vectors where they lie.
static void mixed_views(lc_pstore *ps) {
  for (int t = 0; t < ps->lay.n_tensors; t++)
    *lc_weights_slot(&ps->w, &ps->lay.table[t]) =
        lc_buf_part(ps->params_b, ps->hoff_[t], ps->lay.table[t].numel, ps->hdt_[t]);
  lc_weights_tie(&ps->w, &ps->cfg);
}
// The views of unit u's tensors where they lie in its gathered copy `gath` (stage 3; the
// empty buffer clears them).
static void q_views(lc_pstore *ps, int u, lc_buf gath) {
  const lc_param_unit *U = &ps->lay.units[u];
  for (int t = U->t0; t < U->t1; t++)
    *lc_weights_slot(&ps->w, &ps->lay.table[t]) =
        lc_buf_ok(gath) ? lc_buf_part(gath, ps->hoff_[t] - ps->uoff_[u], ps->lay.table[t].numel, ps->hdt_[t]) : NONE;
  lc_weights_tie(&ps->w, &ps->cfg);
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
  ps->store = store_dtype(cfg);
  if (st == LC_OK && ps->store == LC_DT_BF16 && stage != 0 && stage != 3)
    st = lc_fail(LC_EINVAL, "internal: a frozen bf16 base is held whole (stage 0) or sharded (stage 3)");
  if (st == LC_OK && ps->store == LC_DT_U8 && stage != 0 && stage != 3)
    st = lc_fail(LC_EINVAL, "internal: a frozen base in GGUF blocks is held whole (stage 0) or sharded (stage 3)");
  size_t mixed_total = 0;
  if (st == LC_OK && ps->store == LC_DT_U8) {
    ps->hoff_ = calloc((size_t)ps->lay.n_tensors + 1, sizeof *ps->hoff_);
    ps->hdt_ = calloc((size_t)ps->lay.n_tensors + 1, sizeof *ps->hdt_);
    ps->uoff_ = calloc((size_t)ps->lay.n_units + 1, sizeof *ps->uoff_);
    st = ps->hoff_ && ps->hdt_ && ps->uoff_ ? mixed_layout(cfg, &ps->lay, ps->Z, ps->hoff_, ps->hdt_, ps->uoff_, &mixed_total)
                                            : lc_fail(LC_ENOMEM, "out of memory for the parameter store");
  }
  if (st != LC_OK) {
    lc_pstore_destroy(ps);
    return st;
  }
  const size_t full = ps->lay.total, shard = full / (size_t)ps->Z;
  ps->n_params = ps->store == LC_DT_U8 ? mixed_total / (params_sharded(ps) ? (size_t)ps->Z : 1) // (U8: bytes)
                 : params_sharded(ps) ? shard : full;
  // A frozen base has no gradient: none is allocated (not even for the moment before the
  // model drops it: 4 bytes per weight at start-up).
  const int frozen = cfg->lora.rank > 0 && !cfg->adapter_set;
  ps->n_grads = frozen ? 0 : grads_sharded(ps) ? shard : full;
  ps->n_opt = optim_sharded(ps) ? shard : full;
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
    if (!params_sharded(ps) && ps->store == LC_DT_F32) set_views(ps, &ps->w, u, unit_of(ps, ps->params_b, u));
    if (!grads_sharded(ps) && !frozen) set_views(ps, &ps->g, u, unit_of(ps, ps->grads_b, u));
  }
  if (ps->store == LC_DT_U8 && !params_sharded(ps)) mixed_views(ps);
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
    if (ps->red_[i].req.active) lc_wait(red_comm(ps, &ps->red_[i]), &ps->red_[i].req);
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

// ---------------------------------------------------------------- tensor-wise access
static float *state_buf(lc_pstore *ps, lc_ps_state which) {
  return which == LC_PS_PARAMS ? ps->params : which == LC_PS_EXP_AVG ? ps->m : ps->v;
}
static lc_buf state_b(const lc_pstore *ps, lc_ps_state which) {
  return which == LC_PS_PARAMS ? ps->params_b : which == LC_PS_EXP_AVG ? ps->m_b : ps->v_b;
}
static int state_sharded(const lc_pstore *ps, lc_ps_state which) {
  return which == LC_PS_PARAMS ? params_sharded(ps) : optim_sharded(ps);
}

// Intersection of elements [first, first + n) of tensor t with zero-group rank r's slice of
// its unit, in full coordinates.
static void piece(const lc_pstore *ps, int t, size_t first, size_t n, int r, size_t *a, size_t *b) {
  const lc_param_info *T = &ps->lay.table[t];
  const int u = T->unit;
  size_t lo = ps->lay.units[u].off + (size_t)r * shard_floats(ps, u), hi = lo + shard_floats(ps, u);
  const size_t x0 = T->offset + first, x1 = x0 + n;
  *a = x0 > lo ? x0 : lo;
  *b = x1 < hi ? x1 : hi;
  if (*b < *a) *b = *a;
}

float *lc_pstore_tensor_ptr(lc_pstore *ps, lc_ps_state which, int t) {
  float *buf = state_buf(ps, which);
  return state_sharded(ps, which) || !buf ? NULL : buf + ps->lay.table[t].offset;
}

lc_dtype lc_pstore_held_dtype(const lc_pstore *ps, int t) { return ps->store == LC_DT_U8 ? ps->hdt_[t] : ps->store; }

lc_status lc_pstore_set_tensor_raw(lc_pstore *ps, int t, size_t byte_off, const void *src, size_t nbytes) {
  const lc_dtype d = lc_pstore_held_dtype(ps, t);
  const size_t have = lc_bytes(d, ps->lay.table[t].numel);
  if (!lc_dtype_is_quant(d) || byte_off > have || nbytes > have - byte_off)
    return lc_fail(LC_EINVAL, "internal: bytes [%zu, %zu) of %s set raw (held %s, %zu bytes)", byte_off,
                   byte_off + nbytes, ps->lay.table[t].name, lc_dtype_name(d), have);
  const int u = ps->lay.table[t].unit;
  const size_t x0 = ps->hoff_[t] + byte_off;
  size_t a, b; // (stage 3: this rank's part)
  q_mine(ps, u, x0, x0 + nbytes, &a, &b);
  return b > a ? lc_buf_write(lc_buf_part(ps->params_b, q_local(ps, u, a), b - a, LC_DT_U8), (const char *)src + (a - x0),
                              LC_SYNC_STATES)
               : LC_OK;
}

// A 2-byte view's values widened into dst, and dst's rounded into it: in pieces, through
// named reads and writes.
static lc_status read_widen(lc_buf v16, float *dst) {
  uint16_t tmp[4096];
  for (size_t a = 0; a < v16.n; a += 4096) {
    const size_t k = v16.n - a < 4096 ? v16.n - a : 4096;
    LC_TRY(lc_buf_read(lc_buf_view(v16, a, k), tmp, LC_SYNC_STATES));
    lc_bf16_unpack(dst + a, tmp, k);
  }
  return LC_OK;
}
static void write_narrow(lc_buf v16, const float *src) { // rounded to nearest even
  uint16_t tmp[4096];
  for (size_t a = 0; a < v16.n; a += 4096) {
    const size_t k = v16.n - a < 4096 ? v16.n - a : 4096;
    lc_bf16_pack(tmp, src + a, k);
    lc_buf_write(lc_buf_view(v16, a, k), tmp, LC_SYNC_STATES);
  }
}

// A U8 store's dense tensor t: elements [first, first + n) from src, rounded where it is
// held in BF16 or (base_bf16) its vectors are bf16 values in F32. A tensor held in blocks
// is set raw (lc_pstore_set_tensor_raw): nothing here writes it.
static void mixed_set(lc_pstore *ps, int t, size_t first, const float *src, size_t n) {
  const lc_dtype d = ps->hdt_[t];
  if (lc_dtype_is_quant(d)) return;
  const int u = ps->lay.table[t].unit;
  const size_t es = lc_dtype_size(d), x0 = ps->hoff_[t] + first * es;
  size_t a, b; // (stage 3: this rank's part; shards and tensors start on 64 bytes: whole elements)
  q_mine(ps, u, x0, x0 + n * es, &a, &b);
  if (b <= a) return;
  src += (a - x0) / es;
  n = (b - a) / es;
  const lc_buf v = lc_buf_part(ps->params_b, q_local(ps, u, a), n, d);
  if (d == LC_DT_BF16) {
    write_narrow(v, src);
    return;
  }
  if (!ps->cfg.lora.base_bf16) {
    lc_buf_write(v, src, LC_SYNC_STATES);
    return;
  }
  float tmp[4096]; // a vector for bf16 passes: its values rounded, in fp32
  for (size_t i = 0; i < n; i += 4096) {
    const size_t k = n - i < 4096 ? n - i : 4096;
    lc_bf16_round_copy(tmp, src + i, k);
    lc_buf_write(lc_buf_view(v, i, k), tmp, LC_SYNC_STATES);
  }
}

// Elements [e0, e0 + n) of a tensor held in d, decoded from raw (its bytes from the start of
// e0's block, or element) into fp32 dst.
static void q_decode(lc_dtype d, const unsigned char *raw, size_t e0, size_t n, float *dst) {
  if (d == LC_DT_F32) {
    memcpy(dst, raw, sizeof(float) * n);
  } else if (d == LC_DT_BF16) {
    lc_bf16_unpack(dst, (const uint16_t *)raw, n);
  } else {
    enum { NB = 16 }; // blocks at a time (every block type's block is under 256 values)
    const size_t bs = lc_dtype_block(d), bb = lc_dtype_block_bytes(d), b0 = e0 / bs;
    float val[NB * 256];
    for (size_t b = b0, b1 = n ? (e0 + n - 1) / bs + 1 : b0; b < b1; b += NB) {
      const size_t k = b1 - b < NB ? b1 - b : NB;
      lc_dequant(d, raw + (b - b0) * bb, k * bs, val);
      const size_t s0 = b * bs, lo = s0 > e0 ? s0 : e0, hi = s0 + k * bs < e0 + n ? s0 + k * bs : e0 + n;
      memcpy(dst + (lo - e0), val + (lo - s0), sizeof(float) * (hi - lo));
    }
  }
}
// The tensor-relative bytes [*b0, *b1) that hold elements [e0, e1) of a tensor held in d
// (whole blocks).
static void q_bytes(lc_dtype d, size_t e0, size_t e1, size_t *b0, size_t *b1) {
  if (!lc_dtype_is_quant(d)) {
    *b0 = e0 * lc_dtype_size(d), *b1 = e1 * lc_dtype_size(d);
    return;
  }
  const size_t bs = lc_dtype_block(d), bb = lc_dtype_block_bytes(d);
  *b0 = e0 / bs * bb;
  *b1 = e1 > e0 ? ((e1 - 1) / bs + 1) * bb : *b0;
}

// Elements [first, first + n) of a U8 store's tensor t into fp32 dst on world rank 0:
// read (stage 3: each piece from the zero-group-0 rank that holds it), widened or
// dequantized, in pieces of at most Q_CHUNK bytes (whole blocks). Collective like
// lc_pstore_gather_tensor_part.
#define Q_CHUNK ((size_t)1 << 22)
static lc_status mixed_gather(lc_pstore *ps, int t, size_t first, size_t n, float *dst) {
  const int root = !ps->world || ps->world->rank == 0, sharded = params_sharded(ps);
  if (sharded ? ps->rrank != 0 : !root) return LC_OK;
  const lc_dtype d = ps->hdt_[t];
  const int u = ps->lay.table[t].unit;
  // Elements per piece: whole blocks (or elements) within Q_CHUNK bytes.
  const size_t per = lc_dtype_is_quant(d) ? Q_CHUNK / lc_dtype_block_bytes(d) * lc_dtype_block(d) : Q_CHUNK / lc_dtype_size(d);
  unsigned char *raw = lc_alloc(ps->arena, LC_MEM_COMM, Q_CHUNK + 256, "a frozen tensor's piece on its way to rank 0");
  if (!raw) return LC_ENOMEM;
  lc_status st = LC_OK;
  const size_t bs = lc_dtype_is_quant(d) ? lc_dtype_block(d) : 1;
  for (size_t e = first / bs * bs; e < first + n && st == LC_OK; e += per) {
    const size_t e1 = e + per < first + n ? e + per : first + n;
    size_t b0, b1;
    q_bytes(d, e, e1, &b0, &b1);
    const size_t x0 = ps->hoff_[t] + b0, x1 = ps->hoff_[t] + b1;
    for (int r = 0; r < (sharded ? ps->Z : 1) && st == LC_OK; r++) {
      size_t a, b;
      if (sharded) q_piece(ps, u, x0, x1, r, &a, &b);
      else a = x0, b = x1;
      if (b == a || (!root && r != ps->zrank)) continue;
      if (r == ps->zrank) { // this rank's bytes: read them (root: into place; else: send them)
        st = lc_buf_read(lc_buf_part(ps->params_b, q_local(ps, u, a), b - a, LC_DT_U8), raw + (a - x0), LC_SYNC_STATES);
        lc_req q = {{0}, 0};
        if (st == LC_OK && !root) st = lc_isend(ps->zg, raw + (a - x0), b - a, LC_DT_U8, 0, TAG_TENSOR, &q);
        if (st == LC_OK && !root) st = lc_wait(ps->zg, &q);
      } else {
        lc_req q = {{0}, 0};
        st = lc_irecv(ps->zg, raw + (a - x0), b - a, LC_DT_U8, r, TAG_TENSOR, &q);
        if (st == LC_OK) st = lc_wait(ps->zg, &q);
      }
    }
    if (st == LC_OK && root) { // the requested elements of this piece
      const size_t lo = e > first ? e : first;
      float *tmp = dst + (lo - first);
      if (lo == e) {
        q_decode(d, raw, e, e1 - e, tmp);
      } else { // the first piece starts inside a block: decode from the block's start
        float *v = malloc(sizeof(float) * (e1 - e));
        if (!v) st = lc_fail(LC_ENOMEM, "out of memory reading a frozen tensor");
        else q_decode(d, raw, e, e1 - e, v), memcpy(tmp, v + (lo - e), sizeof(float) * (e1 - lo)), free(v);
      }
    }
  }
  lc_free(ps->arena, raw);
  return st;
}

// States move in and out of the backend's buffers through named writes and reads.
void lc_pstore_set_tensor_part(lc_pstore *ps, lc_ps_state which, int t, size_t first, const float *src, size_t n) {
  const lc_param_info *T = &ps->lay.table[t];
  const lc_buf buf = state_b(ps, which);
  if (which == LC_PS_PARAMS && ps->store == LC_DT_U8) {
    mixed_set(ps, t, first, src, n);
    return;
  }
  if (which == LC_PS_PARAMS && ps->store == LC_DT_BF16) { // rounded to nearest even, in pieces
    // (stage 3: only the elements of this rank's shard, at their shard offsets)
    size_t lo = T->offset + first, hi = lo + n, dst = lo;
    if (params_sharded(ps)) {
      piece(ps, t, first, n, ps->zrank, &lo, &hi);
      dst = shard_off(ps, T->unit) + (lo - owned_lo(ps, T->unit));
    }
    if (hi > lo) write_narrow(lc_buf_view(buf, dst, hi - lo), src + (lo - T->offset - first));
    return;
  }
  if (!state_sharded(ps, which)) {
    lc_buf_write(lc_buf_view(buf, T->offset + first, n), src, LC_SYNC_STATES);
    return;
  }
  size_t a, b;
  piece(ps, t, first, n, ps->zrank, &a, &b);
  if (b > a)
    lc_buf_write(lc_buf_view(buf, shard_off(ps, T->unit) + (a - owned_lo(ps, T->unit)), b - a),
                 src + (a - T->offset - first), LC_SYNC_STATES);
}

// A state's range v into fp32 host memory: read as it is, or (a bf16 store's weights)
// read in pieces and widened.
static lc_status read_f32(const lc_pstore *ps, lc_ps_state which, lc_buf v, float *dst) {
  return which != LC_PS_PARAMS || ps->store != LC_DT_BF16 ? lc_buf_read(v, dst, LC_SYNC_STATES) : read_widen(v, dst);
}

lc_status lc_pstore_gather_tensor_part(lc_pstore *ps, lc_ps_state which, int t, size_t first, size_t n, float *dst) {
  const lc_param_info *T = &ps->lay.table[t];
  const int b16 = which == LC_PS_PARAMS && ps->store == LC_DT_BF16; // (its pieces are staged and widened)
  const lc_buf buf = state_b(ps, which);
  const int root = !ps->world || ps->world->rank == 0;
  if (which == LC_PS_PARAMS && ps->store == LC_DT_U8) return mixed_gather(ps, t, first, n, dst);
  if (!state_sharded(ps, which))
    return root ? read_f32(ps, which, lc_buf_view(buf, T->offset + first, n), dst) : LC_OK;
  if (ps->rrank != 0) return LC_OK; // only zero group 0 (world ranks 0..Z-1) holds what rank 0 writes
  const size_t mine = shard_off(ps, T->unit), x0 = T->offset + first;
  if (!root) { // this rank's piece, read into host memory (comm) and sent
    size_t a, b;
    piece(ps, t, first, n, ps->zrank, &a, &b);
    if (b == a) return LC_OK;
    const lc_buf v = lc_buf_view(buf, mine + (a - owned_lo(ps, T->unit)), b - a);
    float *h = b16 ? NULL : lc_buf_host(v), *staged = NULL;
    if (!h && !(h = staged = lc_alloc(ps->arena, LC_MEM_COMM, lc_bytes(LC_DT_F32, v.n), "a tensor piece on its way to rank 0")))
      return LC_ENOMEM;
    lc_req r = {{0}, 0};
    lc_status st = staged ? read_f32(ps, which, v, staged) : LC_OK;
    if (st == LC_OK) st = lc_isend(ps->zg, h, b - a, LC_DT_F32, 0, TAG_TENSOR, &r);
    if (st == LC_OK) st = lc_wait(ps->zg, &r);
    lc_free(ps->arena, staged);
    return st;
  }
  lc_status st = LC_OK;
  for (int r = 0; r < ps->Z && st == LC_OK; r++) {
    size_t a, b;
    piece(ps, t, first, n, r, &a, &b);
    if (b == a) continue;
    if (r == 0) {
      st = read_f32(ps, which, lc_buf_view(buf, mine + (a - owned_lo(ps, T->unit)), b - a), dst + (a - x0));
      continue;
    }
    lc_req q = {{0}, 0};
    st = lc_irecv(ps->zg, dst + (a - x0), b - a, LC_DT_F32, r, TAG_TENSOR, &q);
    if (st == LC_OK) st = lc_wait(ps->zg, &q);
  }
  return st;
}

lc_status lc_pstore_gather_tensor(lc_pstore *ps, lc_ps_state which, int t, float *dst) {
  return lc_pstore_gather_tensor_part(ps, which, t, 0, ps->lay.table[t].numel, dst);
}

lc_status lc_pstore_init_random(lc_pstore *ps, uint64_t seed) {
  lc_rng r;
  lc_rng_seed(&r, seed);
  if (ps->params && !params_sharded(ps)) { // in place
    for (int t = 0; t < ps->lay.n_tensors; t++)
      lc_param_init_tensor(ps->params + ps->lay.table[t].offset, &ps->lay.table[t], &r);
    return LC_OK;
  }
  // Sharded (or a U8 store, whose tensors in blocks keep their bytes: blocks come from a
  // file, lc_pstore_set_tensor_raw): every rank runs the whole stream piece by piece and
  // keeps its part.
  const size_t cap = lc_stage_floats(&ps->lay);
  float *tmp = lc_alloc(ps->arena, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, cap), "initialisation staging buffer");
  if (!tmp) return LC_ENOMEM;
  for (int t = 0; t < ps->lay.n_tensors; t++)
    for (size_t a = 0; a < ps->lay.table[t].numel; a += cap) {
      const size_t n = ps->lay.table[t].numel - a < cap ? ps->lay.table[t].numel - a : cap;
      lc_param_init_part(tmp, &ps->lay.table[t], n, &r);
      lc_pstore_set_tensor_part(ps, LC_PS_PARAMS, t, a, tmp, n);
    }
  lc_free(ps->arena, tmp);
  return LC_OK;
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
static size_t copy16_bytes(const lc_param_layout *L, int u, int vectors_only) {
  return (vectors_only ? 0 : lc_bytes(LC_DT_BF16, L->units[u].n)) + lc_bytes(LC_DT_F32, vec_floats(L, u));
}
// The views of unit u into its 2-byte copy `buf` (U8, copy16_bytes; empty: every view of
// the unit cleared). widen: fill the vectors from the 2-byte values first.
static lc_status set_views16(lc_pstore *ps, int u, lc_buf buf, int widen) {
  const lc_param_unit *U = &ps->lay.units[u];
  size_t vec = lc_bytes(LC_DT_BF16, U->n); // where the widened vectors start
  for (int t = U->t0; t < U->t1; t++) {
    const lc_param_info *T = &ps->lay.table[t];
    lc_buf *slot = lc_weights_slot(&ps->w, T);
    *slot = NONE;
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
    const size_t ub = ps->uoff_[u + 1] - ps->uoff_[u], qs = q_shard(ps, u);
    x->g16 = 0;
    LC_TRY(lc_buf_alloc(ps->be, LC_MEM_GATHERED, LC_DT_U8, ub, 0, "gathered frozen weights (GGUF blocks)", &x->gath));
    LC_TRY(lc_be_copy(lc_buf_part(x->gath, (size_t)ps->zrank * qs, qs, LC_DT_U8),
                      lc_buf_part(ps->params_b, ps->uoff_[u] / (size_t)ps->Z, qs, LC_DT_U8), LC_STREAM_COMPUTE));
    LC_TRY(lc_buf_hview_open(x->gath, 1, "a ZeRO-3 gather (staged)", &x->hgath));
    return lc_iallgather(ps->zg, NULL, x->hgath.host, qs, LC_DT_U8, &x->greq);
  }
  const size_t n = ps->lay.units[u].n, sh = shard_floats(ps, u);
  x->g16 = ps->compute == LC_DT_BF16;
  LC_TRY(lc_buf_alloc(ps->be, LC_MEM_GATHERED, LC_DT_U8, x->g16 ? copy16_bytes(&ps->lay, u, 0) : lc_bytes(LC_DT_F32, n), 0,
                      x->g16 ? "gathered bf16 weights" : "gathered weights", &x->gath));
  const lc_buf mine = lc_buf_view(ps->params_b, shard_off(ps, u), sh);
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
  const size_t vb = copy16_bytes(&ps->lay, u, 1); // (0: matrices only, e.g. the embedding: nothing to hold)
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
  LC_TRY(lc_buf_alloc(ps->be, LC_MEM_GATHERED, LC_DT_U8, copy16_bytes(&ps->lay, u, 0), 0, "bf16 compute weights", &x->gath));
  LC_TRY(lc_be_bf16_pack(lc_buf_part(x->gath, 0, n, LC_DT_BF16), unit_of(ps, ps->params_b, u)));
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
  const lc_buf src = b16 ? x->gath : params_sharded(ps) ? lc_buf_part(x->gath, 0, U->n, LC_DT_F32) : unit_of(ps, ps->params_b, u);
  const void *h = lc_buf_host_or_fail(src, "an offloaded unit's weights");
  if (!h) return LC_EINVAL;
  LC_TRY(lc_buf_alloc(ps->dev, LC_MEM_GATHERED, src.dt, src.n, 0, "a unit's weights on the device (--offload-optimizer)",
                      &x->dw));
  LC_TRY(lc_buf_write(x->dw, h, LC_SYNC_OFFLOAD));
  if (b16) return set_views16(ps, u, x->dw, 0);
  set_views(ps, &ps->w, u, x->dw);
  return LC_OK;
}

// Unit u's device gradient down, added into the host gradient (the full buffer's range for
// stages 0/1, the temporary one for stages >= 2), and freed; the views back to the host's.
static lc_status offload_down(lc_pstore *ps, int u) {
  lc_ps_unit *x = &ps->u_[u];
  if (!lc_buf_ok(x->dg)) return LC_OK;
  const lc_buf host = grads_sharded(ps) ? x->gbuf : unit_of(ps, ps->grads_b, u);
  lc_buf tmp;
  LC_TRY(lc_buf_alloc(ps->be, LC_MEM_COMM, LC_DT_F32, x->dg.n, 0, "an offloaded gradient's landing buffer", &tmp));
  lc_status st = lc_buf_read(x->dg, lc_buf_host(tmp), LC_SYNC_OFFLOAD);
  if (st == LC_OK) st = lc_be_add(host, tmp);
  lc_buf_free(&tmp);
  lc_buf_free(&x->dg);
  set_views(ps, &ps->g, u, host);
  return st;
}

static void trace(lc_pstore *ps, char kind, int unit, int next) {
  lc_ps_trace *t = ps->trace;
  if (!t) return;
  if (t->n < t->cap) t->ev[t->n].kind = kind, t->ev[t->n].unit = unit, t->ev[t->n].next = next;
  t->n++;
}

static lc_status acquire_here(lc_pstore *ps, int unit, int next);
static lc_status offload_up(lc_pstore *ps, int u);

lc_status lc_pstore_acquire(lc_pstore *ps, int unit, int next) {
  trace(ps, 'A', unit, next);
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
  if (ps->store == LC_DT_U8 && !params_sharded(ps)) return LC_OK; // every view fixed at create: nothing to copy
  if (!params_sharded(ps)) return bf16 ? round_copy(ps, unit) : LC_OK;
  lc_ps_unit *x = &ps->u_[unit];
  LC_TRY(start_gather(ps, unit));
  LC_TRY(lc_wait(ps->zg, &x->greq));
  LC_TRY(lc_buf_hview_close(&x->hsend, 0));
  LC_TRY(lc_buf_hview_close(&x->hgath, 1)); // (staged: the gathered weights onto the device)
  if (ps->store == LC_DT_U8) {
    q_views(ps, unit, x->gath);
  } else if (x->g16) {
    LC_TRY(set_views16(ps, unit, x->gath, !x->rounded)); // the vectors widened once per gather
    x->rounded = 1;
  } else {
    set_views(ps, &ps->w, unit, lc_buf_part(x->gath, 0, ps->lay.units[unit].n, LC_DT_F32));
  }
  if (next >= 0) LC_TRY(start_gather(ps, next));
  return LC_OK;
}

void lc_pstore_release(lc_pstore *ps, int unit) {
  trace(ps, 'R', unit, -1);
  lc_ps_unit *x = &ps->u_[unit];
  if (ps->dev) { // the device copy goes; the views back to the host's (below, or the full parameters)
    lc_buf_free(&x->dw);
    if (!params_sharded(ps)) set_views(ps, &ps->w, unit, unit_of(ps, ps->params_b, unit));
  }
  if (!params_sharded(ps)) {
    if (!lc_buf_ok(x->gath)) return;
    // back to the fp32 views (a bf16 store: none until the next acquire)
    set_views(ps, &ps->w, unit, ps->store == LC_DT_F32 ? unit_of(ps, ps->params_b, unit) : NONE);
    lc_buf_free(&x->gath);
    return;
  }
  if (x->greq.active) lc_wait(ps->zg, &x->greq); // released before use (an error path)
  lc_buf_hview_close(&x->hsend, 0);
  lc_buf_hview_close(&x->hgath, 0);
  set_views(ps, &ps->w, unit, NONE);
  lc_buf_free(&x->gath);
  x->rounded = x->g16 = 0;
}

// ---------------------------------------------------------------- gradient reductions
static lc_comm *red_comm(const lc_pstore *ps, const lc_ps_red *r) {
  if (ps->stage == 0) return ps->world;
  return r->phase == 0 ? ps->zg : ps->rep;
}

// Reduction r is complete: staged views written back (the result) and freed.
static lc_status red_finish(lc_pstore *ps, lc_ps_red *r) {
  r->done = 1;
  const lc_status a = lc_buf_hview_close(&r->hv_in, 0), b = lc_buf_hview_close(&r->hv_out, 1);
  r->piece = NULL;
  return a != LC_OK ? a : b;
}

// Reduction r's phase 0 has completed: its result into place; done unless the replica
// groups still have to be summed (phase 1, started by start_phase1 in FIFO order).
static lc_status phase0_done(lc_pstore *ps, lc_ps_red *r) {
  const int u = r->unit;
  if (u < 0) { // a row range (stage >= 2): its piece is in place
    if (ps->R == 1) return red_finish(ps, r);
    r->p0_done = 1;
    return LC_OK;
  }
  const size_t s = shard_floats(ps, u);
  if (ps->stage == 1 && ps->zrank != 0) {
    // The in-place reduce-scatter left the result at the unit's start: move it to its slice.
    float *G = r->hv_out.host;
    memmove(G + (size_t)ps->zrank * s, G, lc_bytes(LC_DT_F32, s));
  }
  if (ps->stage == 0 || ps->R == 1) return red_finish(ps, r);
  r->p0_done = 1;
  return LC_OK;
}

static lc_status start_phase1(lc_pstore *ps, lc_ps_red *r) {
  const int u = r->unit;
  if (u < 0) {
    r->p0_done = 0;
    r->phase = 1;
    return lc_iallreduce_sum(ps->rep, r->piece, r->piece_n, LC_DT_F32, &r->req);
  }
  const size_t s = shard_floats(ps, u);
  // (hv_out: stage 1 the unit's range, stage 2 this rank's shard of it)
  float *slice = ps->stage == 1 ? (float *)r->hv_out.host + (size_t)ps->zrank * s : (float *)r->hv_out.host;
  r->p0_done = 0;
  r->phase = 1;
  return lc_iallreduce_sum(ps->rep, slice, s, LC_DT_F32, &r->req);
}

// Moves every reduction on as far as it can without blocking (block: wait instead, for
// the oldest `nwait` reductions).
static lc_status progress(lc_pstore *ps, int nwait) {
  lc_status st = LC_OK;
  int in_order = 1; // every older reduction has started its phase 1 (or needs none)
  for (int i = 0; i < ps->n_red_ && st == LC_OK; i++) {
    lc_ps_red *r = &ps->red_[i];
    for (;;) {
      if (r->done) break;
      if (r->p0_done) {
        if (!in_order) break;
        st = start_phase1(ps, r);
        if (st != LC_OK) break;
        continue;
      }
      int complete = i < nwait ? (st = lc_wait(red_comm(ps, r), &r->req), st == LC_OK)
                               : lc_test(red_comm(ps, r), &r->req);
      if (st != LC_OK || !complete) break;
      st = r->phase == 0 ? phase0_done(ps, r) : red_finish(ps, r);
    }
    in_order = in_order && (r->done || r->phase == 1);
  }
  return st;
}

void lc_pstore_poll(lc_pstore *ps) {
  if (progress(ps, 0) != LC_OK) return; // reported when the reduction is waited for
  if (params_sharded(ps)) {
    for (int u = 0; u < ps->lay.n_units; u++)
      if (ps->u_[u].greq.active) lc_test(ps->zg, &ps->u_[u].greq);
    for (int i = 0; i < 4; i++)
      if (ps->rows_[i] && ps->rows_[i]->req.active) lc_test(ps->zg, &ps->rows_[i]->req);
  }
}

// Completes the oldest reductions until at most `keep` are in flight; frees their
// temporary gradient buffers (stage >= 2).
static lc_status retire(lc_pstore *ps, int keep) {
  if (ps->n_red_ <= keep) return LC_OK;
  const int n = ps->n_red_ - keep;
  LC_TRY(progress(ps, n)); // the oldest n complete (in order), the rest move on if they can
  for (int i = 0; i < n; i++) {
    lc_ps_red *r = &ps->red_[i];
    if (r->unit < 0) {
      lc_buf_free(&r->gbuf);
      free(r->cnt);
      continue;
    }
    lc_buf_free(&ps->u_[r->unit].gbuf);
  }
  memmove(ps->red_, ps->red_ + n, sizeof *ps->red_ * (size_t)keep);
  ps->n_red_ = keep;
  return LC_OK;
}

lc_status lc_pstore_grad_begin(lc_pstore *ps, int unit) {
  trace(ps, 'B', unit, -1);
  LC_TRY(retire(ps, 1));
  lc_ps_unit *x = &ps->u_[unit];
  if (grads_sharded(ps) && !lc_buf_ok(x->gbuf)) {
    LC_TRY(lc_buf_alloc(ps->be, LC_MEM_GRADS, LC_DT_F32, ps->lay.units[unit].n, 1, "unit gradient buffer", &x->gbuf));
    set_views(ps, &ps->g, unit, x->gbuf);
  }
  if (ps->dev && !lc_buf_ok(x->dg)) { // (a tied embedding's is opened early: kept, not zeroed again)
    LC_TRY(lc_buf_alloc(ps->dev, LC_MEM_GRADS, LC_DT_F32, ps->lay.units[unit].n, 1,
                        "a unit's gradient on the device (--offload-optimizer)", &x->dg));
    set_views(ps, &ps->g, unit, x->dg);
  }
  x->gopen = 1;
  return LC_OK;
}

lc_status lc_pstore_grad_end(lc_pstore *ps, int unit) {
  trace(ps, 'E', unit, -1);
  lc_test_point("reduce");
  lc_ps_unit *x = &ps->u_[unit];
  x->gopen = 0;
  const lc_param_unit *U = &ps->lay.units[unit];
  if (ps->dev) LC_TRY(offload_down(ps, unit));
  if (ps->stage <= 1 && !ps->last_) return LC_OK; // stages 0/1 accumulate, reduce once per step
  if (ps->stage == 0 && (!ps->world || ps->world->size == 1)) return LC_OK;
  lc_ps_red *r = &ps->red_[ps->n_red_];
  memset(r, 0, sizeof *r);
  r->unit = unit;
  lc_status st;
  const size_t s = shard_floats(ps, unit);
  if (ps->stage <= 1) {
    st = lc_buf_hview_open(unit_of(ps, ps->grads_b, unit), 1, "a gradient reduction (staged)", &r->hv_out);
    if (st == LC_OK && ps->stage == 0) st = lc_iallreduce_sum(ps->world, r->hv_out.host, U->n, LC_DT_F32, &r->req);
    else if (st == LC_OK) st = lc_ireduce_scatter_sum(ps->zg, NULL, r->hv_out.host, s, LC_DT_F32, &r->req);
  } else {
    // The shard already holds earlier passes' sums: one replica adds them to its slice of
    // the input, so the reduction leaves shard = earlier + this pass, counted once.
    const lc_buf acc = lc_buf_view(ps->grads_b, shard_off(ps, unit), s);
    st = ps->passes_ > 0 && ps->rrank == 0 ? lc_be_add(lc_buf_view(x->gbuf, (size_t)ps->zrank * s, s), acc) : LC_OK;
    set_views(ps, &ps->g, unit, NONE);
    if (st == LC_OK) st = lc_buf_hview_open(x->gbuf, 1, "a ZeRO-2 reduction's input (staged)", &r->hv_in);
    if (st == LC_OK) st = lc_buf_hview_open(acc, 0, "a ZeRO-2 reduction's shard (staged)", &r->hv_out);
    if (st == LC_OK) st = lc_ireduce_scatter_sum(ps->zg, r->hv_in.host, r->hv_out.host, s, LC_DT_F32, &r->req);
  }
  if (st != LC_OK) { // not queued: its views go now
    lc_buf_hview_close(&r->hv_in, 0);
    lc_buf_hview_close(&r->hv_out, 0);
    return st;
  }
  ps->n_red_++;
  return LC_OK;
}

// ---------------------------------------------------------------- row ranges
size_t lc_pstore_row_len(const lc_pstore *ps, int tensor) {
  const lc_param_info *T = &ps->lay.table[tensor];
  return T->ndim == 2 ? (size_t)T->shape[1] : T->numel;
}
size_t lc_pstore_n_rows(const lc_pstore *ps, int tensor) { return ps->lay.table[tensor].numel / lc_pstore_row_len(ps, tensor); }

// Zero-group rank i's piece of the full-coordinate range [x0, x0 + n) of unit u: the
// intersection with its shard, as an offset in the range and a length (0: none).
static void range_piece(const lc_pstore *ps, int u, size_t x0, size_t n, int i, size_t *at, size_t *len) {
  const size_t lo = ps->lay.units[u].off + (size_t)i * shard_floats(ps, u), hi = lo + shard_floats(ps, u);
  const size_t a = x0 > lo ? x0 : lo, b = x0 + n < hi ? x0 + n : hi;
  *at = b > a ? a - x0 : 0;
  *len = b > a ? b - a : 0;
}

// cnt[Z] counts and cnt[Z..2Z) displacements of the range's pieces, in rank order (they
// follow one another: shards are consecutive).
static int *range_counts(const lc_pstore *ps, int u, size_t x0, size_t n) {
  int *cnt = malloc(sizeof(int) * 2 * (size_t)ps->Z);
  if (!cnt) return NULL;
  for (int i = 0; i < ps->Z; i++) {
    size_t at, len;
    range_piece(ps, u, x0, n, i, &at, &len);
    cnt[i] = (int)len;
    cnt[ps->Z + i] = (int)at;
  }
  return cnt;
}

// Where this rank's piece of the range starts in its shard buffers (params or grads).
static size_t range_mine(const lc_pstore *ps, int u, size_t x0, size_t n, size_t *at, size_t *len) {
  range_piece(ps, u, x0, n, ps->zrank, at, len);
  return shard_off(ps, u) + (x0 + *at - owned_lo(ps, u));
}

static void rows_track(lc_pstore *ps, lc_ps_rows *r, int on) {
  for (int i = 0; i < 4; i++)
    if (on ? !ps->rows_[i] : ps->rows_[i] == r) {
      ps->rows_[i] = on ? r : NULL;
      return;
    }
}

size_t lc_pstore_rows_bytes(int stage, int bf16, int held16, int matrix, size_t n) {
  if (bf16 && matrix) return held16 && stage < 3 ? 0 : lc_bytes(LC_DT_BF16, n); // 2 bytes, gathered or packed (a bf16 store's: views)
  if (stage >= 3) return lc_bytes(LC_DT_F32, n + (n & 1));       // even: bf16 widened in place
  return bf16 ? lc_bytes(LC_DT_F32, n) : 0;
}
// Whether a tensor's rows are used in 2 bytes: a matrix in a bf16 pass (lc_ps_rows).
static int rows16(const lc_pstore *ps, int tensor) { return ps->compute == LC_DT_BF16 && ps->lay.table[tensor].ndim == 2; }
static size_t rows_bytes(const lc_pstore *ps, const lc_ps_rows *r) {
  return lc_pstore_rows_bytes(ps->stage, ps->compute == LC_DT_BF16, ps->store == LC_DT_BF16, ps->lay.table[r->tensor].ndim == 2,
                              r->n);
}
size_t lc_pstore_rows_grad_bytes(int stage, size_t n) { return stage >= 2 ? lc_bytes(LC_DT_F32, n) : 0; }

void lc_pstore_rows_init(const lc_pstore *ps, lc_ps_rows *r, int tensor, size_t r0, size_t r1) {
  memset(r, 0, sizeof *r);
  const size_t len = lc_pstore_row_len(ps, tensor);
  r->tensor = tensor;
  r->r0 = r0;
  r->r1 = r1;
  r->x0 = ps->lay.table[tensor].offset + r0 * len;
  r->n = (r1 - r0) * len;
}

size_t lc_pstore_rows_bytes_q(int stage, lc_dtype held, size_t n) { return stage >= 3 ? lc_bytes(held, n) : 0; }

// A U8 store's rows [r0, r1) of tensor: stage 0 views them where they lie (at acquire);
// stage 3 gathers their bytes as held (blocks included) from the ranks whose shards they
// overlap.
static lc_status q_rows_fetch(lc_pstore *ps, lc_ps_rows *r, int tensor, size_t r0, size_t r1) {
  lc_pstore_rows_init(ps, r, tensor, r0, r1);
  if (!params_sharded(ps)) return LC_OK;
  const lc_dtype d = ps->hdt_[tensor];
  const int u = ps->lay.table[tensor].unit;
  const size_t len = lc_pstore_row_len(ps, tensor), x0 = ps->hoff_[tensor] + lc_bytes(d, r0 * len),
               x1 = ps->hoff_[tensor] + lc_bytes(d, r1 * len);
  LC_TRY(lc_buf_alloc(ps->be, LC_MEM_GATHERED, LC_DT_U8, lc_pstore_rows_bytes_q(ps->stage, d, r->n), 0,
                      "gathered vocabulary rows (GGUF blocks)", &r->buf));
  r->cnt = malloc(sizeof(int) * 2 * (size_t)ps->Z);
  if (!r->cnt) {
    lc_buf_free(&r->buf);
    return lc_fail(LC_ENOMEM, "out of memory for a vocabulary slice's counts");
  }
  for (int i = 0; i < ps->Z; i++) {
    size_t a, b;
    q_piece(ps, u, x0, x1, i, &a, &b);
    r->cnt[i] = (int)(b - a);
    r->cnt[ps->Z + i] = b > a ? (int)(a - x0) : 0;
  }
  size_t a, b;
  q_piece(ps, u, x0, x1, ps->zrank, &a, &b);
  lc_status st = b > a ? lc_be_copy(lc_buf_part(r->buf, a - x0, b - a, LC_DT_U8),
                                    lc_buf_part(ps->params_b, q_local(ps, u, a), b - a, LC_DT_U8), LC_STREAM_COMPUTE)
                       : LC_OK;
  if (st == LC_OK) st = lc_buf_hview_open(r->buf, 1, "a vocabulary slice's gather (staged)", &r->hv);
  if (st == LC_OK) st = lc_iallgatherv(ps->zg, r->hv.host, r->cnt, r->cnt + ps->Z, LC_DT_U8, &r->req);
  if (st == LC_OK) rows_track(ps, r, 1);
  return st;
}

lc_status lc_pstore_rows_fetch(lc_pstore *ps, lc_ps_rows *r, int tensor, size_t r0, size_t r1) {
  if (ps->store == LC_DT_U8) return q_rows_fetch(ps, r, tensor, r0, r1);
  if (ps->store == LC_DT_BF16 && ps->compute != LC_DT_BF16)
    return lc_fail(LC_EINVAL, "a bf16 frozen base computes in bf16: add --precision bf16 (or --base-dtype fp32)");
  lc_pstore_rows_init(ps, r, tensor, r0, r1);
  if (!params_sharded(ps)) return LC_OK;
  const int u = ps->lay.table[tensor].unit, h16 = rows16(ps, tensor);
  const size_t nb = r->n + (r->n & 1); // even, for the in-place bf16 widening (a vector)
  LC_TRY(lc_buf_alloc(ps->be, LC_MEM_GATHERED, LC_DT_U8, rows_bytes(ps, r), 0, "gathered vocabulary rows", &r->buf));
  r->cnt = range_counts(ps, u, r->x0, r->n);
  if (!r->cnt) {
    lc_buf_free(&r->buf);
    return lc_fail(LC_ENOMEM, "out of memory for a vocabulary slice's counts");
  }
  size_t at, mine;
  const size_t mo = range_mine(ps, u, r->x0, r->n, &at, &mine);
  const lc_buf src = mine ? lc_buf_view(ps->params_b, mo, mine) : NONE; // (no piece: mo is meaningless)
  r->g16 = ps->compute == LC_DT_BF16;
  lc_status st = LC_OK;
  if (!r->g16) {
    if (mine) st = lc_be_copy(lc_buf_part(r->buf, lc_bytes(LC_DT_F32, at), mine, LC_DT_F32), src, LC_STREAM_COMPUTE);
    if (st == LC_OK) st = lc_buf_hview_open(r->buf, 1, "a vocabulary slice's gather (staged)", &r->hv);
    if (st == LC_OK) st = lc_iallgatherv(ps->zg, r->hv.host, r->cnt, r->cnt + ps->Z, LC_DT_F32, &r->req);
  } else { // bf16 values travel (half the bytes): a matrix's stay in 2 bytes, a vector's are widened in place at acquire
    const size_t h0 = h16 ? 0 : nb; // where the 2-byte values start (a vector: the upper half, widened downwards)
    if (!h16 && nb > r->n) st = lc_be_zero(lc_buf_part(r->buf, lc_bytes(LC_DT_BF16, h0 + r->n), 1, LC_DT_BF16));
    const lc_buf slot = mine ? lc_buf_part(r->buf, lc_bytes(LC_DT_BF16, h0 + at), mine, LC_DT_BF16) : NONE;
    if (st == LC_OK && mine) // (a bf16 store's shard is its bf16 values)
      st = ps->store == LC_DT_BF16 ? lc_be_copy(slot, src, LC_STREAM_COMPUTE) : lc_be_bf16_pack(slot, src);
    if (st == LC_OK) st = lc_buf_hview_open(r->buf, 1, "a vocabulary slice's gather (staged)", &r->hv);
    if (st == LC_OK)
      st = lc_iallgatherv(ps->zg, (uint16_t *)r->hv.host + h0, r->cnt, r->cnt + ps->Z, LC_DT_BF16, &r->req);
  }
  if (st == LC_OK) rows_track(ps, r, 1);
  return st;
}

lc_status lc_pstore_rows_acquire(lc_pstore *ps, lc_ps_rows *r) {
  r->acquired = 1;
  if (ps->store == LC_DT_U8) { // the rows as held: where they lie, or their gathered bytes
    const lc_dtype d = ps->hdt_[r->tensor];
    if (!params_sharded(ps)) {
      r->w = lc_buf_part(ps->params_b, ps->hoff_[r->tensor] + lc_bytes(d, r->r0 * lc_pstore_row_len(ps, r->tensor)), r->n, d);
      return LC_OK;
    }
    LC_TRY(lc_wait(ps->zg, &r->req));
    LC_TRY(lc_buf_hview_close(&r->hv, 1)); // (staged: the gathered rows onto the device)
    r->w = lc_buf_part(r->buf, 0, r->n, d);
    return LC_OK;
  }
  const int h16 = rows16(ps, r->tensor);
  const lc_dtype dt = h16 ? LC_DT_BF16 : LC_DT_F32;
  r->w = NONE;
  if (params_sharded(ps)) {
    LC_TRY(lc_wait(ps->zg, &r->req));
    if (r->g16 && !h16) lc_bf16_unpack_inplace(r->hv.host, r->n + (r->n & 1));
    r->g16 = 0;
    LC_TRY(lc_buf_hview_close(&r->hv, 1)); // (staged: the gathered rows onto the device)
    r->w = lc_buf_part(r->buf, 0, r->n, dt);
    return LC_OK;
  }
  const lc_buf src = lc_buf_view(ps->params_b, r->x0, r->n);
  if (ps->compute != LC_DT_BF16 || (ps->store == LC_DT_BF16 && h16)) { // (a bf16 store's matrix rows: where they lie)
    r->w = src;
    return LC_OK;
  }
  if (!lc_buf_ok(r->buf)) {
    LC_TRY(lc_buf_alloc(ps->be, LC_MEM_GATHERED, LC_DT_U8, rows_bytes(ps, r), 0, "bf16 compute vocabulary rows", &r->buf));
    const lc_buf w = lc_buf_part(r->buf, 0, r->n, dt);
    if (h16) {
      LC_TRY(lc_be_bf16_pack(w, src));
    } else if (ps->store == LC_DT_BF16) { // a bf16 store's vector: widened
      LC_TRY(lc_be_bf16_unpack(w, src));
    } else { // a vector: its values rounded, in fp32
      LC_TRY(lc_be_copy(w, src, LC_STREAM_COMPUTE));
      LC_TRY(lc_be_bf16_round(w));
    }
  }
  r->w = lc_buf_part(r->buf, 0, r->n, dt);
  return LC_OK;
}

void lc_pstore_rows_release(lc_pstore *ps, lc_ps_rows *r) {
  if (r->req.active) lc_wait(ps->zg, &r->req); // released before use (an error path)
  rows_track(ps, r, 0);
  lc_buf_hview_close(&r->hv, 0);
  lc_buf_free(&r->buf);
  free(r->cnt);
  r->cnt = NULL;
  r->w = NONE;
  r->acquired = 0;
}

lc_status lc_pstore_rows_grad_begin(lc_pstore *ps, lc_ps_rows *r) {
  LC_TRY(retire(ps, 1));
  if (!grads_sharded(ps)) {
    r->g = lc_buf_view(ps->grads_b, r->x0, r->n);
    return LC_OK;
  }
  LC_TRY(lc_buf_alloc(ps->be, LC_MEM_GRADS, LC_DT_F32, r->n, 1, "vocabulary rows gradient", &r->gbuf));
  r->g = r->gbuf;
  return LC_OK;
}

lc_status lc_pstore_rows_grad_end(lc_pstore *ps, lc_ps_rows *r) {
  lc_test_point("reduce");
  r->g = NONE;
  if (!grads_sharded(ps)) return LC_OK;
  const int u = ps->lay.table[r->tensor].unit;
  lc_ps_red *q = &ps->red_[ps->n_red_];
  memset(q, 0, sizeof *q);
  q->unit = -1;
  q->gbuf = r->gbuf;
  r->gbuf = NONE;
  q->cnt = range_counts(ps, u, r->x0, r->n);
  if (!q->cnt) {
    lc_buf_free(&q->gbuf);
    return lc_fail(LC_ENOMEM, "out of memory for a vocabulary slice's counts");
  }
  size_t at;
  const size_t po = range_mine(ps, u, r->x0, r->n, &at, &q->piece_n);
  const lc_buf pc = q->piece_n ? lc_buf_view(ps->grads_b, po, q->piece_n) : NONE; // (no piece: po is meaningless)
  // The shard's piece may already hold sums (earlier passes, or this range reduced before
  // in this pass): one replica adds them to its input, so they are counted once.
  lc_status st = ps->rrank == 0 && q->piece_n ? lc_be_add(lc_buf_view(q->gbuf, at, q->piece_n), pc) : LC_OK;
  ps->n_red_++; // queued before the collective so that an error still frees its buffers
  if (st == LC_OK) st = lc_buf_hview_open(q->gbuf, 1, "a vocabulary slice's reduction (staged)", &q->hv_in);
  if (st == LC_OK) st = lc_buf_hview_open(pc, 0, "a vocabulary slice's shard (staged)", &q->hv_out);
  q->piece = q->hv_out.host;
  if (st == LC_OK) st = lc_ireduce_scatterv_sum(ps->zg, q->hv_in.host, q->piece, q->cnt, LC_DT_F32, &q->req);
  if (st != LC_OK) { // never posted: nothing to progress, its views go now
    q->done = 1;
    lc_buf_hview_close(&q->hv_in, 0);
    lc_buf_hview_close(&q->hv_out, 0);
  }
  return st;
}

lc_status lc_pstore_rows_done(lc_pstore *ps, int unit) {
  if (grads_sharded(ps)) return LC_OK;
  LC_TRY(retire(ps, 1));
  return lc_pstore_grad_end(ps, unit);
}

lc_status lc_pstore_prefetch(lc_pstore *ps, int unit) {
  trace(ps, 'P', unit, -1);
  return params_sharded(ps) ? start_gather(ps, unit) : LC_OK;
}

lc_status lc_pstore_pass_end(lc_pstore *ps) {
  if (ps->want_grads_) ps->passes_++;
  // Temporary gradient buffers never outlive their pass (stage >= 2).
  return grads_sharded(ps) ? retire(ps, 0) : LC_OK;
}

void lc_pstore_step_begin(lc_pstore *ps, int passes) {
  if (lc_buf_ok(ps->grads_b)) lc_be_zero(ps->grads_b); // inference stores have none
  ps->passes_ = 0;
  ps->step_passes_ = passes;
}

lc_status lc_pstore_finish_grads(lc_pstore *ps) { return retire(ps, 0); }

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
                                  shard_floats(ps, u));
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
      st = lc_iallgather(ps->zg, NULL, ps->params + ps->lay.units[u].off, shard_floats(ps, u), LC_DT_F32, r);
  }
  for (int k = 0; k < 2; k++) {
    lc_status s2 = lc_wait(ps->zg, &q[k]);
    if (st == LC_OK) st = s2;
  }
  return st;
}

// ---------------------------------------------------------------- sizes and bytes
lc_status lc_pstore_sizes(const lc_config *cfg, int stage, int Z, lc_ps_sizes *out) {
  memset(out, 0, sizeof *out);
  if (stage == 0 || Z < 1) Z = 1;
  lc_param_layout L;
  LC_TRY(lc_param_layout_build(&L, cfg, Z));
  const size_t full = lc_bytes(LC_DT_F32, L.total), shard = full / (size_t)Z;
  out->params = stage >= 3 ? shard : full;
  const int b16 = store_dtype(cfg) == LC_DT_BF16; // a frozen bf16 base: 2 bytes, whole or sharded
  if (b16) out->params = lc_bytes(LC_DT_BF16, L.total) / (stage >= 3 ? (size_t)Z : 1);
  // GGUF blocks: each tensor in its stored bytes, whole (stage 0) or each unit Z ways (3)
  const int mixed = store_dtype(cfg) == LC_DT_U8;
  lc_status st = mixed && stage != 0 && stage != 3
                     ? lc_fail(LC_EINVAL, "internal: a frozen base in GGUF blocks is held whole (stage 0) or sharded (stage 3)")
                     : LC_OK;
  size_t *uoff = mixed ? calloc((size_t)L.n_units + 1, sizeof *uoff) : NULL;
  if (st == LC_OK && mixed && !uoff) st = lc_fail(LC_ENOMEM, "out of memory for the memory model");
  if (st == LC_OK && mixed) st = mixed_layout(cfg, &L, stage >= 3 ? Z : 1, NULL, NULL, uoff, &out->params);
  if (st == LC_OK && mixed && stage >= 3) {
    out->params /= (size_t)Z;
    for (int u = 0; u < L.n_units && u < LC_MAX_LAYERS + 2; u++) out->unit_q[u] = uoff[u + 1] - uoff[u];
  }
  free(uoff);
  if (st != LC_OK) {
    lc_param_layout_free(&L);
    return st;
  }
  out->grads = stage >= 2 ? shard : full;
  out->optim = 2 * (stage >= 1 ? shard : full) + LC_PS_NORM_ACC_BYTES;
  out->unit_embed = lc_bytes(LC_DT_F32, L.units[LC_UNIT_EMBED].n);
  out->unit_layer = cfg->n_layers > 0 ? lc_bytes(LC_DT_F32, L.units[lc_unit_layer(0)].n) : 0;
  // (a whole bf16 store's compute copy is its vectors alone: the matrices are views of it;
  // sharded, the gathered copy is the whole unit as for any store)
  const int vo = b16 && stage < 3;
  out->unit_layer16 = cfg->n_layers > 0 ? copy16_bytes(&L, lc_unit_layer(0), vo) : 0;
  out->unit_embed16 = copy16_bytes(&L, LC_UNIT_EMBED, vo);
  out->unit_final16 = copy16_bytes(&L, lc_unit_final(cfg->n_layers), vo);
  if (mixed) out->unit_layer16 = out->unit_embed16 = out->unit_final16 = 0; // (views where the weights lie)
  out->unit_final = lc_bytes(LC_DT_F32, L.units[lc_unit_final(cfg->n_layers)].n);
  size_t used = 0;
  for (int t = 0; t < L.n_tensors; t++) used += lc_bytes(LC_DT_F32, L.table[t].numel);
  out->padding = full - used;
  lc_param_layout_free(&L);
  return LC_OK;
}

// Bytes this rank sends in one pass for the row ranges of tensor t, `rows` rows each
// (vocabulary slices): `gathers` uneven all-gathers of g-byte elements and `reductions`
// uneven reduce-scatters (each then all-reduced across the replica groups).
static double rows_bytes_sent(const lc_pstore *ps, int t, size_t rows, int gathers, int reductions, double g) {
  const size_t len = lc_pstore_row_len(ps, t), V = lc_pstore_n_rows(ps, t);
  const double f = (double)lc_dtype_size(LC_DT_F32), Z = ps->Z, R = ps->R;
  double b = 0;
  for (size_t a = 0; a < V; a += rows) {
    const size_t x0 = ps->lay.table[t].offset + a * len, n = ((a + rows < V ? a + rows : V) - a) * len;
    size_t at, mine;
    range_piece(ps, ps->lay.table[t].unit, x0, n, ps->zrank, &at, &mine);
    b += gathers * (Z - 1) * (double)mine * g;
    b += reductions * ((double)(n - mine) * f + (R > 1 ? 2.0 * (R - 1) / R * (double)mine * f : 0.0));
  }
  return b;
}

// The same for a U8 store (stage 3, frozen): the rows' bytes as held, gathered only.
static double rows_bytes_sent_q(const lc_pstore *ps, int t, size_t rows, int gathers) {
  const size_t len = lc_pstore_row_len(ps, t), V = lc_pstore_n_rows(ps, t);
  const lc_dtype d = ps->hdt_[t];
  double b = 0;
  for (size_t a = 0; a < V; a += rows) {
    const size_t x0 = ps->hoff_[t] + lc_bytes(d, a * len), x1 = ps->hoff_[t] + lc_bytes(d, (a + rows < V ? a + rows : V) * len);
    size_t lo, hi;
    q_piece(ps, ps->lay.table[t].unit, x0, x1, ps->zrank, &lo, &hi);
    b += gathers * (ps->Z - 1.0) * (double)(hi - lo);
  }
  return b;
}

double lc_pstore_step_bytes(const lc_pstore *ps, int passes, lc_dtype compute) {
  const double f = (double)lc_dtype_size(LC_DT_F32), total = (double)ps->lay.total, Z = ps->Z, R = ps->R;
  const int W = ps->world ? ps->world->size : 1;
  const int frozen = !lc_buf_ok(ps->grads_b); // a frozen base (LoRA): gathers only, nothing reduced
  if (ps->stage == 0) return W > 1 && !frozen ? 2.0 * (W - 1) / W * total * f : 0.0;
  const lc_param_layout *L = &ps->lay;
  const int nl = ps->cfg.n_layers, Eu = LC_UNIT_EMBED, Fu = lc_unit_final(nl), tied = ps->cfg.tie_embeddings;
  // Vocabulary slices (stage >= 2): the embedding and final units move as row ranges.
  const int sliced = ps->vocab_rows > 0 && ps->stage >= 2;
  const double g = (double)lc_dtype_size(compute == LC_DT_BF16 ? LC_DT_BF16 : LC_DT_F32); // gathered dtype
  // One reduction of every unit: reduce-scatter in the group, all-reduce across groups.
  const double reduced = sliced ? total - (double)L->units[Eu].n - (double)L->units[Fu].n : total;
  double red = (Z - 1) * (reduced / Z) * f + (R > 1 ? 2.0 * (R - 1) / R * (reduced / Z) * f : 0.0);
  double bytes = frozen ? 0.0 : red * (ps->stage == 1 ? 1 : passes);
  if (!frozen) bytes += 2.0 * (Z - 1) / Z * sizeof(double); // the norm's sum of squares
  if (sliced) { // per pass: the embedding's rows (gathered for the lookup, and twice more as a
                // tied head), the head's (gathered by both loss passes) and the final norm's
    const int g3 = ps->stage >= 3;
    for (int t = L->units[Eu].t0; t < L->units[Fu].t1; t++) {
      const int u = L->table[t].unit;
      if (u != Eu && u != Fu) continue;
      const int head = u == Fu && L->table[t].ndim == 2, emb = u == Eu;
      const int gathers = !g3 ? 0 : emb ? 1 + 2 * tied : head ? 2 : 1, reductions = frozen ? 0 : emb && tied ? 2 : 1;
      const size_t rows = L->table[t].ndim == 2 ? ps->vocab_rows : 1;
      bytes += passes * (ps->store == LC_DT_U8 ? rows_bytes_sent_q(ps, t, rows, gathers)
                                               : rows_bytes_sent(ps, t, rows, gathers, reductions, g));
    }
  }
  if (ps->stage <= 2) return frozen ? bytes : bytes + (Z - 1) * (total / Z) * f; // parameters all-gathered
  // Stage 3: per pass, forward gathers every unit once (the embedding twice when tied:
  // the LM head at the loss), backward every layer again. A U8 store's units move as the
  // bytes they are held in.
  if (ps->store == LC_DT_U8) {
#define UB(u) ((double)(ps->uoff_[(u) + 1] - ps->uoff_[(u)]))
    double ub = sliced ? (double)ps->uoff_[L->n_units] - UB(Eu) - UB(Fu)
                       : (double)ps->uoff_[L->n_units] + (tied ? UB(Eu) : 0.0);
    for (int l = 0; l < nl; l++) ub += UB(lc_unit_layer(l));
#undef UB
    return bytes + passes * (Z - 1) * (ub / Z);
  }
  double units = sliced ? reduced : (double)L->total + (tied ? (double)L->units[Eu].n : 0.0);
  for (int l = 0; l < nl; l++) units += (double)L->units[lc_unit_layer(l)].n;
  return bytes + passes * (Z - 1) * (units / Z) * g;
}
