// The memory model: predicted arena peak bytes per category (and of their sum) for one
// training step of a model at sequence length S, under a checkpoint policy, tile sizes
// and a sequence-parallel layout hp x cp. It is the seed of `longctx plan`.
//
// How it predicts. A step holds, from start to end, the parameter store's parameters,
// gradients and AdamW m and v, full or sharded by the ZeRO stage (lc_pstore_sizes) and,
// for each sequence it processes (one after another, so the batch does not change the
// peak), the pass's checkpoint and working-activation blocks (lc_model_pass_bytes). ZeRO
// adds, per phase, the units gathered (stage 3) and the temporary gradient buffers in
// flight (stage >= 2) (lc_memplan_zero_transients). On top of that come short-lived
// buffers in the phases of a pass, each freed before the next begins:
//   attention forward   the strategy's forward buffers (flash workspace; ring k/v blocks,
//                       Ulysses pack buffer)                     [also in FULL's recompute]
//   MLP forward tile    one tile's norm/gate/up/h (tiled MLP only)
//   loss                one logits tile with its normed rows (lc_loss_scratch_bytes)
//   MLP backward        gradient tile (+ recompute tile when tiled)
//   attention backward  the layer's datt/dq/dk/dv + the strategy's backward buffers
// Every size comes from the function the allocating code itself uses (lc_model_pass_bytes,
// lc_layer_mem_bytes, lc_loss_scratch_bytes, lc_attn_local_mem / lc_attn_2d_mem ->
// lc_ring_mem -> lc_flash_workspace_bytes), so the prediction is exact for the arena.
// Per-category peak = max over phases; the total peak = persistent + checkpoints +
// activations + max over phases of (scratch + comm), which is less than the sum of the
// per-category peaks when scratch and comm peak in different phases.
//
// Not in the arena, so not predicted: MPI's internal buffers, OpenBLAS/OpenMP thread
// stacks and buffers, token index arrays (4 bytes x 5 per local token), the program.
#ifndef LC_MEMPLAN_H
#define LC_MEMPLAN_H

#include <stddef.h>

#include "core/arena.h"
#include "model/config.h"
#include "model/model.h"


typedef struct {
  long seq;                 // S
  int hp, cp, window;       // layout used (window: inner ring size)
  int threads;              // OpenMP threads assumed for kernel workspaces
  long T;                   // local tokens per rank: S / (hp*cp)
  int mlp_tiled, loss_tiled; // whether the tiles take effect at this T
  size_t peak[LC_MEM_NCAT]; // predicted peak bytes per category, per rank
  size_t total;             // predicted peak of all categories together, per rank
  lc_mem_phase total_phase; // the phase in which the total peaks
  size_t persistent;        // params + grads + optimizer held for the whole step
  size_t phase_scratch[LC_PHASE_N], phase_comm[LC_PHASE_N]; // short-lived bytes per phase
  size_t phase_zero[LC_PHASE_N]; // ZeRO's gathered weights + temporary gradients per phase
  int zero, zero_group;     // ZeRO stage and group size used
  size_t model_states;      // persistent params + grads + optimizer bytes per rank
  size_t model_states_peak; // their peaks with gathered weights and temporary gradients
  size_t padding;           // bytes of padding in one full fp32 flat buffer (units split evenly)
  size_t attn_saved_per_layer; // attention state kept per layer (lse; Ulysses-layout q/k/v/out)
  int head_chunk;           // query heads per Ulysses stage (n_heads / hp: unchunked)
  // --offload-optimizer (o->offload_optimizer): peak[] and total are the device's (no
  // params, grads or AdamW moments there: each unit's compute copy and gradient while in
  // use); host_bytes the host's model states with their transients (the stage's gathered or
  // rounded copies and temporary gradients, one unit's landing buffer), per rank. 0 otherwise.
  int offload;
  size_t host_bytes;
  // The buffers live at the moment of the total peak, named as the allocating code names
  // them, each with its category and the phase holding it; their bytes sum to total.
  lc_mem_parts detail;
} lc_mem_estimate;

// ZeRO's temporary units per phase of a training pass: the largest gathered weights
// (stage 3) and temporary gradient buffers (stage >= 2) alive in each phase of lc_mem_phase,
// and of the two together: a walk over the pass's schedule (schedule.h) with the store's
// rules. LC_ENOMEM (with a message) if the walk's small buffers cannot be allocated.
// (--offload-optimizer's device side is the same walk over each acquired unit's compute
// copy and each unit's gradient, inside lc_memplan_predict.)
lc_status lc_memplan_zero_transients(const lc_config *cfg, const lc_model_opts *o, int stage, int Z, size_t *gathered,
                                     size_t *grads, size_t *both, int n_phases);

// Prediction for one step at sequence length seq on each of the hp*cp ranks of a sequence
// group (hp, cp <= 0: 1; window <= 0: cp; threads <= 0: the current omp_get_max_threads()),
// with the model states held as ZeRO stage o->zero over groups of o->zero_group ranks
// (0: hp*cp).
// LC_EINVAL with a message for an invalid config or layout (the trainer's rules).
lc_status lc_memplan_predict(const lc_config *cfg, const lc_model_opts *o, long seq, int hp, int cp,
                             int window, int threads, lc_mem_estimate *out);

// The same with head-chunked Ulysses (attn.h): head_chunk query heads per rank per stage
// (0: all at once); LC_EINVAL naming the valid values for an invalid chunk.
lc_status lc_memplan_predict_hc(const lc_config *cfg, const lc_model_opts *o, long seq, int hp, int cp,
                                int window, int head_chunk, int threads, lc_mem_estimate *out);
// --head-chunk auto: 0 (all heads at once, the fastest) when that predicted total fits
// budget_bytes or hp = 1; else the largest valid chunk whose total fits; the smallest valid
// chunk (the least memory) when none fits.
int lc_memplan_auto_head_chunk(const lc_config *cfg, const lc_model_opts *o, long seq, int hp, int cp, int window,
                               int threads, size_t budget_bytes);
// lc_memplan_max_seq with head chunks; head_chunk -1 (auto): the longest S any valid chunk
// reaches, and *chunk_out (may be NULL) = the chunk auto picks at that S.
long lc_memplan_max_seq_hc(const lc_config *cfg, const lc_model_opts *o, int hp, int cp, int window, int head_chunk,
                           int threads, size_t budget_bytes, int *chunk_out);

// Largest S, a multiple of 2*cp*hp, whose predicted total peak per rank is <= budget_bytes;
// 0 if none (or on an invalid layout: lc_errmsg() says why).
long lc_memplan_max_seq(const lc_config *cfg, const lc_model_opts *o, int hp, int cp, int window,
                        int threads, size_t budget_bytes);

// --checkpoint auto: the fastest policy (none: no recompute; selective: the MLP and
// projections again; full: the whole layer again) whose predicted total peak per rank fits
// budget_bytes, with head_chunk as lc_memplan_predict_hc; full (the least memory) when none
// fits (*fits 0). *peak: the chosen policy's predicted total. LC_EINVAL (with a message)
// when the layout is invalid for every policy.
lc_status lc_memplan_auto_ckpt(const lc_config *cfg, const lc_model_opts *o, long seq, int hp, int cp, int window,
                               int head_chunk, int threads, size_t budget_bytes, lc_ckpt_policy *policy, size_t *peak,
                               int *fits);

// The tile sizes `longctx train` picks when the user passes none (0 = untiled): MLP tiles
// of 1024 tokens when S > 1024; loss tiles whose [tile, vocab] logits stay within 32 MiB
// (a multiple of 16, at least 16), untiled when that covers S.
int lc_memplan_auto_mlp_tile(long seq);
int lc_memplan_auto_loss_tile(long seq, int vocab);
// The same for cfg's head against `rows` vocabulary rows (the vocabulary, or a slice's): a
// head held in a frozen base's blocks gets 4x the logits' bytes.
int lc_memplan_auto_loss_tile_for(const lc_config *cfg, long seq, int rows);

#endif
