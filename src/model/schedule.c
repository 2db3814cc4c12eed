#include "model/schedule.h"

#include "model/params.h"

typedef struct {
  lc_event *ev;
  int n, cap;
} sched;

static void put(sched *s, lc_ev_kind k, int unit, int next, int layer, lc_op op) {
  if (s->n < s->cap) s->ev[s->n] = (lc_event){k, unit, next, layer, op, 0};
  s->n++;
}
// A gather the preceding op posts itself (at its last slice).
static void prefetch_by_op(sched *s, int unit) {
  put(s, LC_EV_PREFETCH, unit, -1, -1, LC_OP_N);
  if (s->n <= s->cap) s->ev[s->n - 1].by_op = 1;
}
static void unit_ev(sched *s, lc_ev_kind k, int unit, int next) { put(s, k, unit, next, -1, LC_OP_N); }
static void run(sched *s, lc_op op, int layer) { put(s, LC_EV_RUN, -1, -1, layer, op); }

// model_pass's order (model.c); a change there changes this list and test_schedule says so.
int lc_schedule_build(const lc_config *cfg, const lc_model_opts *o, int want_grads, lc_event *ev, int cap) {
  sched s = {ev, 0, cap};
  const int L = cfg->n_layers, E = LC_UNIT_EMBED, F = lc_unit_final(L), tied = cfg->tie_embeddings;
  const int sliced = lc_vocab_sliced(o, cfg->vocab);
  // Forward: the embedding (sliced: row ranges, then layer 0's gather posted).
  if (sliced) {
    run(&s, LC_OP_EMBED_FWD_SLICED, -1);
    prefetch_by_op(&s, lc_unit_layer(0));
  } else {
    unit_ev(&s, LC_EV_ACQUIRE, E, lc_unit_layer(0));
    run(&s, LC_OP_EMBED_FWD, -1);
    unit_ev(&s, LC_EV_RELEASE, E, -1);
  }
  // Layers: each with the next unit's gather posted (after the last: the final norm, or
  // none when the sliced loss fetches its rows itself). A layer's checkpoint is complete
  // before it runs when the policy keeps only its input (full: its write overlaps the
  // layer), else once it has run (the groups it keeps are written by it).
  const int put_first = o->ckpt == LC_CKPT_FULL;
  for (int l = 0; l < L; l++) {
    if (put_first) put(&s, LC_EV_CKPT_PUT, -1, -1, l, LC_OP_N);
    unit_ev(&s, LC_EV_ACQUIRE, lc_unit_layer(l), l + 1 < L ? lc_unit_layer(l + 1) : sliced ? -1 : F);
    run(&s, LC_OP_LAYER_FWD, l);
    unit_ev(&s, LC_EV_RELEASE, lc_unit_layer(l), -1);
    if (!put_first) put(&s, LC_EV_CKPT_PUT, -1, -1, l, LC_OP_N);
  }
  // Loss: a tied head is the embedding, acquired again; its gradient stays open to the end.
  const int bwd_first = want_grads ? lc_unit_layer(L - 1) : -1;
  if (sliced) {
    run(&s, LC_OP_LOSS_SLICED, -1); // (grads: the final norm's rows' gradient opened inside)
    if (bwd_first >= 0) prefetch_by_op(&s, bwd_first);
    if (want_grads) unit_ev(&s, LC_EV_GRAD_END, F, -1); // the final norm's rows and the head's slices done
  } else {
    unit_ev(&s, LC_EV_ACQUIRE, F, tied ? E : bwd_first);
    if (tied) unit_ev(&s, LC_EV_ACQUIRE, E, bwd_first);
    if (want_grads) unit_ev(&s, LC_EV_GRAD_BEGIN, F, -1);
    if (want_grads && tied) unit_ev(&s, LC_EV_GRAD_BEGIN, E, -1);
    run(&s, LC_OP_LOSS, -1);
    unit_ev(&s, LC_EV_RELEASE, F, -1);
    if (tied) unit_ev(&s, LC_EV_RELEASE, E, -1);
    if (want_grads) unit_ev(&s, LC_EV_GRAD_END, F, -1);
  }
  if (!want_grads) return s.n;
  // Backward: the gradient buffer first (retiring the older reduction before the weights
  // and the next gather arrive), the weights with the previous layer's gather posted, the
  // checkpoint back, the policy's recompute, the layer's backward.
  for (int l = L - 1; l >= 0; l--) {
    const int u = lc_unit_layer(l);
    unit_ev(&s, LC_EV_GRAD_BEGIN, u, -1);
    unit_ev(&s, LC_EV_ACQUIRE, u, l > 0 ? lc_unit_layer(l - 1) : -1);
    put(&s, LC_EV_CKPT_GET, -1, -1, l, LC_OP_N);
    if (o->ckpt != LC_CKPT_NONE) run(&s, LC_OP_RECOMPUTE, l);
    run(&s, LC_OP_LAYER_BWD, l);
    unit_ev(&s, LC_EV_RELEASE, u, -1);
    put(&s, LC_EV_CKPT_FREE, -1, -1, l, LC_OP_N);
    unit_ev(&s, LC_EV_GRAD_END, u, -1);
  }
  if (sliced) {
    run(&s, LC_OP_EMBED_BWD_SLICED, -1);
    unit_ev(&s, LC_EV_GRAD_END, E, -1); // the slices done (their own reductions posted)
  } else {
    unit_ev(&s, LC_EV_GRAD_BEGIN, E, -1); // tied: already open (waits as any begin)
    run(&s, LC_OP_EMBED_BWD, -1);
    unit_ev(&s, LC_EV_GRAD_END, E, -1);
  }
  return s.n;
}

const char *lc_ev_kind_name(lc_ev_kind k) {
  static const char *n[LC_EV_N] = {"acquire", "prefetch", "release", "grad_begin", "grad_end", "ckpt_put", "ckpt_get", "ckpt_free", "run"};
  return (unsigned)k < LC_EV_N ? n[k] : "?";
}

const char *lc_op_name(lc_op op) {
  static const char *n[LC_OP_N] = {"embed_fwd", "layer_fwd", "loss", "recompute", "layer_bwd", "embed_bwd",
                                   "embed_fwd_sliced", "loss_sliced", "embed_bwd_sliced"};
  return (unsigned)op < LC_OP_N ? n[op] : "?";
}
