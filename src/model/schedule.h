// One training pass as an ordered list of events, described once (DESIGN.md "Planning"):
// which parameter units are acquired, prefetched and released, which gradient buffers are
// opened and handed to their reduction, which layer checkpoints are put and got, and which
// compute runs in between. The executor (model.c: model_pass) makes exactly these store
// calls in this order: it runs the list, event by event (model.c: model_pass); the memory
// model (lc_memplan_zero_transients) and the time model (plan/timemodel.h) read the same
// list (tests/test_schedule.c traces a real pass's store calls against it). Inside the
// compute events: a layer's forward first opens the next layer's checkpoint (its output
// goes there), the embedding's forward opens layer 0's.
#ifndef LC_SCHEDULE_H
#define LC_SCHEDULE_H

#include "model/config.h"
#include "model/model_opts.h"

typedef enum {
  LC_EV_ACQUIRE = 0, // unit's weights in use (ZeRO 3: gathered; bf16: rounded); next's gather posted
  LC_EV_PREFETCH,    // unit's gather posted ahead of its acquire
  LC_EV_RELEASE,     // unit's gathered or rounded copy dropped
  LC_EV_GRAD_BEGIN,  // unit's gradient buffer opened (waits for all but the newest reduction)
  LC_EV_GRAD_END,    // unit's gradient handed to its reduction (polled while later work runs)
  LC_EV_CKPT_PUT,    // layer's checkpoint complete (offload: written behind)
  LC_EV_CKPT_GET,    // layer's checkpoint back (offload: the next one read ahead)
  LC_EV_CKPT_FREE,   // layer's checkpoint no longer needed (after its backward)
  LC_EV_RUN,         // compute: op over the local tokens
  LC_EV_N
} lc_ev_kind;

typedef enum {
  LC_OP_EMBED_FWD = 0,
  LC_OP_LAYER_FWD,    // attention half (norm, q/k/v, RoPE, the strategy, output) + MLP half
  LC_OP_LOSS,         // final norm, LM head, cross-entropy and their gradient (grads: backward too)
  LC_OP_RECOMPUTE,    // the policy's recompute of a layer before its backward (full: with attention)
  LC_OP_LAYER_BWD,
  LC_OP_EMBED_BWD,
  // Vocabulary slices: the store's row ranges inside (memory: memplan.c sliced_transients)
  LC_OP_EMBED_FWD_SLICED,
  LC_OP_LOSS_SLICED,
  LC_OP_EMBED_BWD_SLICED,
  LC_OP_N
} lc_op;

typedef struct {
  lc_ev_kind kind;
  int unit, next;  // parameter units (params.h; -1 none): ACQUIRE/PREFETCH/RELEASE/GRAD_*
  int layer;       // CKPT_*, and RUN of a layer op (-1 otherwise)
  lc_op op;        // RUN
  int by_op;       // made inside the RUN before it (a sliced op posts the next gather while its
                   // last slice computes): listed for the models, not called by the executor
} lc_event;

// The events of one pass (want_grads 0: forward and loss only) of a model with options o.
// Writes at most cap events; returns how many the pass has (call with cap 0 to size).
int lc_schedule_build(const lc_config *cfg, const lc_model_opts *o, int want_grads, lc_event *ev, int cap);

const char *lc_ev_kind_name(lc_ev_kind k);
const char *lc_op_name(lc_op op);

#endif
