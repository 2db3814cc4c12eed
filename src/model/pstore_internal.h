// What the parameter store's files (pstore*.c) share: its private structs and the helpers
// more than one of them calls. Internal: only pstore*.c include it.
#ifndef LC_PSTORE_INTERNAL_H
#define LC_PSTORE_INTERNAL_H

#include <stddef.h>

#include "backend/bufcomm.h"
#include "model/pstore.h"

#define LC_PS_TAG_TENSOR 301

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
  // A row range's reduction (unit < 0; stage >= 2): its gradient rows (freed at lc_ps_retire),
  // the per-rank counts the reduce-scatter reads, and this rank's piece of its shard.
  lc_buf gbuf;
  float *piece; // (the host view of the piece: hv_out.host)
  size_t piece_n;
  int *cnt;
  lc_buf_hview hv_in, hv_out; // what the collective sends (ZeRO 2: the temporary gradient) and reduces into
};

static inline size_t lc_ps_shard_floats(const lc_pstore *ps, int u) { return ps->lay.units[u].n / (size_t)ps->Z; }
// Offset of unit u's shard in a shard buffer (every unit size is a multiple of Z).
static inline size_t lc_ps_shard_off(const lc_pstore *ps, int u) { return ps->lay.units[u].off / (size_t)ps->Z; }
// This rank's slice of unit u in full coordinates: [lo, lo + lc_ps_shard_floats).
static inline size_t lc_ps_owned_lo(const lc_pstore *ps, int u) {
  return ps->lay.units[u].off + (size_t)ps->zrank * lc_ps_shard_floats(ps, u);
}

static inline int lc_ps_params_sharded(const lc_pstore *ps) { return ps->stage >= 3; }
static inline int lc_ps_grads_sharded(const lc_pstore *ps) { return ps->stage >= 2; }
static inline int lc_ps_optim_sharded(const lc_pstore *ps) { return ps->stage >= 1; }

static const lc_buf LC_PS_NONE = {0};

// The unit's range of a full flat buffer (params_b, grads_b).
static inline lc_buf lc_ps_unit_of(const lc_pstore *ps, lc_buf full, int u) {
  return lc_buf_view(full, ps->lay.units[u].off, ps->lay.units[u].n);
}

// ---- a U8 store under stage 3: rank i of the zero group holds bytes [uoff[u] + i s,
// + s) of unit u (s = the unit's bytes / Z), at byte uoff[u] / Z of params_b.
static inline size_t lc_ps_q_shard(const lc_pstore *ps, int u) { return (ps->uoff_[u + 1] - ps->uoff_[u]) / (size_t)ps->Z; }
// The full-layout bytes [x0, x1) of unit u that zero-group rank r holds: [*a, *b) (*a == *b: none).
static inline void lc_ps_q_piece(const lc_pstore *ps, int u, size_t x0, size_t x1, int r, size_t *a, size_t *b) {
  const size_t lo = ps->uoff_[u] + (size_t)r * lc_ps_q_shard(ps, u), hi = lo + lc_ps_q_shard(ps, u);
  *a = x0 > lo ? x0 : lo;
  *b = x1 < hi ? x1 : hi;
  if (*b < *a) *b = *a;
}
// This rank's part of the full-layout bytes [x0, x1) of unit u (stage 0: all of them).
static inline void lc_ps_q_mine(const lc_pstore *ps, int u, size_t x0, size_t x1, size_t *a, size_t *b) {
  if (ps->stage < 3) *a = x0, *b = x1;
  else lc_ps_q_piece(ps, u, x0, x1, ps->zrank, a, b);
}
// Where full-layout byte x of this rank's part of unit u lies in params_b.
static inline size_t lc_ps_q_local(const lc_pstore *ps, int u, size_t x) {
  return ps->stage < 3 ? x : ps->uoff_[u] / (size_t)ps->Z + (x - ps->uoff_[u] - (size_t)ps->zrank * lc_ps_q_shard(ps, u));
}

// Zero-group rank i's piece of the full-coordinate range [x0, x0 + n) of unit u: the
// intersection with its shard, as an offset in the range and a length (0: none).
static inline void lc_ps_range_piece(const lc_pstore *ps, int u, size_t x0, size_t n, int i, size_t *at, size_t *len) {
  const size_t lo = ps->lay.units[u].off + (size_t)i * lc_ps_shard_floats(ps, u), hi = lo + lc_ps_shard_floats(ps, u);
  const size_t a = x0 > lo ? x0 : lo, b = x0 + n < hi ? x0 + n : hi;
  *at = b > a ? a - x0 : 0;
  *len = b > a ? b - a : 0;
}

// Records a unit call of a pass (ps->trace, for tests; pstore.h, lc_ps_trace).
static inline void lc_ps_trace_event(lc_pstore *ps, char kind, int unit, int next) {
  lc_ps_trace *t = ps->trace;
  if (!t) return;
  if (t->n < t->cap) t->ev[t->n].kind = kind, t->ev[t->n].unit = unit, t->ev[t->n].next = next;
  t->n++;
}

// ---- pstore.c
void lc_ps_set_views(lc_pstore *ps, lc_weights *w, int u, lc_buf base);
lc_dtype lc_ps_store_dtype(const lc_config *cfg);
size_t lc_ps_copy16_bytes(const lc_param_layout *L, int u, int vectors_only);
lc_status lc_ps_offload_down(lc_pstore *ps, int u);
// ---- pstore_quant.c (a frozen base in GGUF blocks)
lc_status lc_ps_mixed_layout(const lc_config *cfg, const lc_param_layout *L, int Z, size_t *off, lc_dtype *dt,
                             size_t *uoff, size_t *total);
void lc_ps_mixed_views(lc_pstore *ps);
void lc_ps_q_views(lc_pstore *ps, int u, lc_buf gath);
void lc_ps_mixed_set(lc_pstore *ps, int t, size_t first, const float *src, size_t n);
lc_status lc_ps_mixed_gather(lc_pstore *ps, int t, size_t first, size_t n, float *dst);
// ---- pstore_host.c
void lc_ps_write_narrow(lc_buf v16, const float *src);
// ---- pstore_reduce.c
lc_comm *lc_ps_red_comm(const lc_pstore *ps, const lc_ps_red *r);
lc_status lc_ps_retire(lc_pstore *ps, int keep);

#endif
