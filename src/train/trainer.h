// The training loop of one process: data -> forward/backward over each sequence of the
// batch -> gradient clipping -> AdamW with the LR schedule.
#ifndef LC_TRAINER_H
#define LC_TRAINER_H

#include <stdint.h>

#include "attn/attn.h"
#include "core/arena.h"
#include "core/dtype.h"
#include "attn/seqlayout.h"
#include "comm/grid.h"
#include "io/data.h"
#include "model/model.h"
#include "train/optim.h"

typedef struct {
  lc_config cfg;
  lc_model_opts mopts;
  const char *data_spec;
  const char *base_name;  // the --model a LoRA run adapts (adapter_config.json's base_model_name_or_path)
  int seq, batch;
  long steps, warmup;
  float lr, lr_min, wd, clip, beta1, beta2, eps;
  uint64_t seed;
  size_t mem_cap; // arena cap in bytes (0 = none)
  int hp, cp, window; // layout (0 = 1; window 0 = cp)
  int head_chunk;     // query heads per rank per Ulysses stage (attn.h): 0 all at once, -1 auto
  size_t head_chunk_budget; // auto: bytes per rank the predicted peak must fit (0: mem_cap; none: all)
  lc_placement placement;
  int pack;               // samples are whole documents packed into --seq tokens (io/pack.h)
  int drop_long;          // with pack: documents longer than --seq left out (lc_data_pack)
  int skip_nonfinite;     // skip up to this many updates in a row whose loss or gradient norm is not finite
  lc_dtype save_dtype;    // model.safetensors of a checkpoint: LC_DT_F32 (0, the master weights) or LC_DT_BF16
  const char *device;     // backend/backend.h: NULL or "cpu"; "private" (tests); "cuda[:N]"
} lc_train_opts;

// Zeroes o and sets the AdamW constants every run uses (beta1 0.9, beta2 0.95, eps 1e-8).
void lc_train_opts_init(lc_train_opts *o);

typedef struct {
  long step;        // 1-based index of the update just made
  double loss;      // mean loss over counted tokens, measured before the update
  float lr;         // LR used for the update
  double grad_norm; // global gradient norm before clipping
  long tokens;      // tokens processed in the step (all ranks)
  long counted;     // tokens that counted in the loss
  double seconds;   // wall time of the step
  size_t peak_bytes;
  size_t peak[LC_MEM_NCAT];
  size_t host_peak_bytes; // a device without host memory: the host's peak beside it (else 0)
  // communication of this rank in the step
  double attn_bytes;          // sent by the attention (all-to-alls + ring)
  double attn_bytes_formula;  // what the formulas say it should send
  double grad_bytes;          // sent for model states: gradient reductions, ZeRO gathers, loss and norm sums
  double grad_bytes_formula;  // what the formulas say (lc_pstore_step_bytes + the loss sums)
  double comm_wait_s;         // blocked in collectives/waits (attention + model states)
  double state_wait_s;        // of which waiting for model-state communication (reductions, gathers, sums)
  double attn_kernel_s;       // inside attention kernels of the ring
  double attn_pairs;          // (query, key) pairs attention may see in the step (all ranks)
  double flops;               // model FLOPs of the step: 3 x lc_config_fwd_flops_pairs
  double cp_imbalance;        // max / mean attention work over this group's context ranks
  int skipped;                // 1: the loss or gradient norm was not finite and the update was skipped
  double predicted_step_s;    // the time model's step time for this step's layout and sample (CLI; 0: none)
  // seconds inside the backend's ops by class (lc_op_class: GEMMs, attention kernels, loss,
  // element-wise, optimizer), where the backend's ops are synchronous (op_timed)
  double op_s[LC_OPC_N];
  int op_timed;
} lc_step_metrics;

typedef struct {
  lc_train_opts o;
  lc_arena arena;
  lc_backend *be;  // the device the model's states live on (over `arena`); with
                   // --offload-optimizer the device the passes run on
  lc_backend hbe;  // --offload-optimizer: the states' host backend (over `arena`)
  int hbe_open;
  lc_model model;  // its store (model.ps) holds the parameters, gradients and AdamW moments
  lc_adamw opt;    // AdamW's step count; m and v point into the store
  lc_data data;
  lc_attn attn;
  lc_comm *world; // not owned
  lc_grid grid;
  int distributed; // attention is the 2D strategy (hp*cp > 1)
  int T;           // local tokens per sequence: seq / (hp*cp)
  int local_batch; // sequences per data-parallel group: batch / dp
  long step;            // steps done (skipped updates included)
  int skipped_in_a_row; // non-finite steps skipped since the last good one
  int failed_everywhere; // the last error was found alike on every rank (no rank waits)
  uint64_t next_sample; // index of the next sample the data stream hands out
  int *full_tok, *full_tgt, *full_doc; // one whole sample [seq] and its document starts
  int *tokens, *targets, *pos; // local shards [local_batch * T]; pos: RoPE positions
  int *lo;                     // [local_batch * seq] first key each token may see (NULL: plain causal)
  lc_seq_layout *lay;          // [local_batch] each sequence's layout over the context ranks
  int *rope_len;               // [local_batch] each sequence's longest document (largest RoPE
                               // position + 1), which length-dependent RoPE scalings read
  uint64_t *sample;            // [local_batch] each sequence's index in the stream of samples
  int *drop_rows;              // [T] LoRA dropout: this rank's rows' indices in their sequence
  int window;                  // attention window (cfg.sliding_window, 0 = none)
  int head_chunk;              // query heads per Ulysses stage in use (0: all at once)
} lc_trainer;

// Collective over `world` (every rank calls it with the same options).
// Also sets flush-to-zero on the calling and OpenMP threads (core/fpenv.h).
lc_status lc_trainer_init(lc_trainer *t, const lc_train_opts *o, lc_comm *world);
lc_status lc_trainer_step(lc_trainer *t, lc_step_metrics *m);
void lc_trainer_free(lc_trainer *t);
// Evaluates n held-out samples (collective): mean loss over their counted tokens and the
// fraction of samples whose counted tokens are all predicted right (argmax).
lc_status lc_trainer_eval(lc_trainer *t, int n, double *loss, double *accuracy);

#endif
