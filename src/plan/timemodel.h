// The time model (DESIGN.md "Planning"): the predicted seconds of one training step of a
// model under a layout, priced from rates (plan/rates.h) by walking the pass schedule
// (model/schedule.h) with the overlap rules the code has:
//   - compute events (GEMMs by shape, attention tiles by the chunk cost model, element-wise
//     bytes, the loss) advance the rank's clock;
//   - Ulysses all-to-alls block (with head chunks, all but the first stage's exchange
//     overlap the previous stage's ring); ring hops overlap the block they feed: a layer's
//     attention takes max(kernel, hops) plus one hop;
//   - ZeRO 3 gathers are posted one unit ahead (acquire's `next`, prefetch) and waited for
//     at the unit's acquire; gradient reductions are posted at grad_end, polled while later
//     work runs, and waited for when a grad_begin retires them (all but the newest) or at
//     the end of the pass; one network channel carries them in order;
//   - after the passes: the optimizer over this rank's shard (element-wise), the parameter
//     all-gather of stages 1 and 2, the small all-reduces (loss, counts, norm).
// The slowest context rank's attention work sets the step (ranks wait for each other).
#ifndef LC_TIMEMODEL_H
#define LC_TIMEMODEL_H

#include "model/config.h"
#include "model/model.h"
#include "plan/rates.h"

typedef struct {
  long seq;
  int batch;          // sequences per step in the whole job (a multiple of dp)
  int world, hp, cp, window, head_chunk; // window <= 0: cp; head_chunk 0: all heads
  int context_first;  // placement (which groups span nodes)
  int doc_len;        // packed documents of this many tokens (0: one causal sequence)
  int attn_window;    // sliding window (0: none)
  const int *lo;      // or the first key each of the seq tokens may see (a real sample); NULL: from the above
} lc_time_layout;

typedef struct {
  double total_s;        // one step
  double compute_s;      // GEMMs, attention kernels, element-wise, loss (recompute included)
  double recompute_s;    // of which the checkpoint policy's recompute (and tiled MLP's)
  double attn_kernel_s;  // of which attention kernels
  double gemm_s;         // of which the linear layers' and the head's products
  double elementwise_s;  // of which the element-wise passes (norms, RoPE, SwiGLU, casts, embedding)
  double loss_s;         // of which the loss tile's softmax passes (the head's products are in gemm_s)
  double comm_s;         // all communication, hidden or not
  double exposed_comm_s; // the part the step waits for
  double optim_s;        // optimizer (and the gradient norm; --offload-optimizer: the host's)
  double offload_s;      // --offload-optimizer: the units' copies up, their gradients down and
                         // added on the host (blocking: in total_s; 0 otherwise)
  double ckpt_io_s;       // --offload-checkpoints: the disk's busy time (writes and reads)
  double ckpt_wait_s;     // of which the step waits for (in total_s; 0 when hidden)
  double layer_fwd_s, layer_bwd_s; // one layer of one pass (attention communication included)
  int passes;            // sequences per rank per step
  double tokens_per_s;   // batch * seq / total_s (the whole job)
} lc_time_estimate;

// lo[S] for packed documents of doc_len tokens (0: one document) and a sliding window (0:
// none), malloc'd; NULL when neither applies (plain causal) or out of memory.
int *lc_time_bounds(long S, int doc_len, int attn_window);

// LC_EINVAL with one line for an impossible layout (the trainer's rules).
lc_status lc_time_predict(const lc_config *cfg, const lc_model_opts *o, const lc_time_layout *l, const lc_rates *r,
                          lc_time_estimate *out);

#endif
