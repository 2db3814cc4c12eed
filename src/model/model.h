// The Llama model: parameters, gradients, and one forward+loss+backward pass over this
// rank's tokens of one sequence, under a checkpointing policy and tile sizes.
#ifndef LC_MODEL_H
#define LC_MODEL_H

#include <stdint.h>

#include "attn/attn.h"
#include "core/dtype.h"
#include "core/arena.h"
#include "model/config.h"
#include "model/params.h"
#include "model/model_opts.h"
#include "model/pstore.h"

// Phases of a training pass, for the memory model: short-lived buffers of one phase are
// freed before the next begins (memplan.h).
typedef enum {
  LC_PHASE_EMBED_FWD = 0, // embedding lookup
  LC_PHASE_ATTN_FWD,      // attention forward (also in full checkpointing's recompute)
  LC_PHASE_MLP_FWD,       // one tiled MLP forward tile
  LC_PHASE_LOSS,          // final norm, LM head, cross-entropy and their gradient
  LC_PHASE_MLP_BWD,       // MLP backward
  LC_PHASE_ATTN_BWD,      // attention half of a layer's backward
  LC_PHASE_EMBED_BWD,     // embedding gradient
  LC_PHASE_N
} lc_mem_phase;

const char *lc_mem_phase_name(lc_mem_phase p);

const char *lc_ckpt_name(lc_ckpt_policy p);
lc_status lc_ckpt_parse(const char *s, lc_ckpt_policy *p);

typedef struct {
  lc_config cfg;
  lc_pstore ps;         // parameters, gradients, AdamW moments and which part this rank holds;
                        // ps.w / ps.g are the views of the acquired weights and gradients
  // Shortcuts into the store:
  lc_param_info *table; // HF-named tensors in flat order
  int n_tensors;
  size_t n_flat;        // floats of one full flat buffer (units padded)
  float *params, *grads; // this rank's storage: the full buffers for a local model
  // LoRA (cfg.lora.rank > 0): ps holds the frozen base (no gradients, no moments; sharded
  // only under ZeRO 3), ad the adapters (cfg with adapter_set), which train: every
  // optimizer, reduction and checkpoint path takes lc_model_trainable.
  int lora;
  lc_pstore ad;
} lc_model;

// One pass's inputs besides its tokens, read-only: built by the caller (the trainer per
// sequence; generate, eval and tests for theirs) and handed down through the model to the
// attention strategy. A NULL lc_pass_in: one whole sequence, plain causal, RoPE from the
// pass's positions, dropout rows 0..T-1 with key 0.
typedef struct {
  // The attention's sequence: layout, key bounds lo and their length (lo_buf, bf16 and the
  // poll hook are the model's to set for its strategy calls: leave them empty).
  lc_attn_in attn;
  // The whole sequence's largest position + 1, for RoPE scalings that depend on the length
  // (dynamic, longrope): set by a caller that holds part of a sequence; 0: the pass's
  // positions decide.
  int rope_len;
  // LoRA dropout (cfg.lora.dropout > 0; training passes only, core/dropout_hash.h): the
  // pass's key (lc_dropout_pass_key) and each of its rows' index in the whole sequence
  // (T ints, the caller's; NULL: the rows are the sequence, 0..T-1).
  uint64_t drop_key;
  const int *drop_rows;
} lc_pass_in;

// A local model (one process, everything held here): zeroed params and grads from the arena.
lc_status lc_model_create(lc_model *m, const lc_config *cfg, lc_arena *arena);
// A model whose states are held as ZeRO `stage` over groups of `group` ranks of world
// (0: the whole world) (pstore.h). Collective over world.
lc_status lc_model_create_zero(lc_model *m, const lc_config *cfg, int stage, int group, lc_comm *world,
                               lc_arena *arena);
// The same with the states on backend `be` (not owned: close it after the model).
lc_status lc_model_create_on(lc_model *m, const lc_config *cfg, int stage, int group, lc_comm *world,
                             lc_backend *be);
void lc_model_destroy(lc_model *m);
// The store whose parameters train: the adapters' with LoRA, else the model's.
static inline lc_pstore *lc_model_trainable(lc_model *m) { return m->lora ? &m->ad : &m->ps; }
// The base's ZeRO stage under a LoRA run of `stage`: sharded (and gathered per unit) only
// at 3; at 1 and 2 there is nothing of it to shard (no gradients, no moments).
static inline int lc_lora_base_stage(int stage) { return stage >= 3 ? 3 : 0; }
// HF-style init of the weights from seed; with LoRA also the adapters (PEFT's: A
// Kaiming-uniform, B zero) from a stream of their own (lc_lora_seed), so loading a base
// over the weights leaves the adapters' initialisation the same.
lc_status lc_model_init_random(lc_model *m, uint64_t seed);
static inline uint64_t lc_lora_seed(uint64_t seed) { return seed ^ 0x4c6f5241ull; /* "LoRA" */ }
// Zeroes the gradients (a local step; the trainer uses lc_pstore_step_begin).
void lc_model_zero_grads(lc_model *m);

// Forward, loss and (if want_grads) backward over T tokens: tokens[T] in [0, vocab),
// targets[T] (< 0 = not counted), pos[T] global positions for RoPE. Adds the loss sum
// over counted tokens to *loss_sum and ACCUMULATES d(loss_scale * loss_sum)/d(params)
// into m->grads. Every buffer of the pass (activations, checkpoints, scratch, the
// strategies' communication buffers) is the store's backend's (m->ps.be), counted in its
// arena.
lc_status lc_model_fwd_bwd(lc_model *m, const lc_model_opts *o, lc_attn *attn, const lc_pass_in *in, const int *tokens,
                           const int *targets, const int *pos, int T, float loss_scale,
                           int want_grads, double *loss_sum);

// Arena bytes a pass over T tokens holds from its start to its end: *ckpt (LC_MEM_CKPT:
// per-layer storage the policy keeps) and *act (LC_MEM_ACT: the working layer, final hidden
// state, its gradient, RoPE tables), given the attention strategy's saved bytes per layer
// (lc_attn.saved_bytes). The pass allocates exactly these (memory model: memplan.c).
void lc_model_pass_bytes(const lc_config *cfg, const lc_model_opts *o, int T,
                         size_t attn_saved_bytes, size_t *ckpt, size_t *act);

// The same bytes as named parts (the memory model's peak detail): their sums are *ckpt and *act.
void lc_model_pass_parts(const lc_config *cfg, const lc_model_opts *o, int T, size_t attn_saved_bytes,
                         lc_mem_parts *ckpt, lc_mem_parts *act);

// The RoPE tables [T, D/2] of the model's RoPE (with its scaling) at positions pos, for a
// sequence whose largest position + 1 is rope_len (0: the largest of pos, + 1).
void lc_model_rope_table(const lc_config *cfg, int rope_len, const int *pos, int T, float *cos_t, float *sin_t);
// The same into backend buffers (F32 [T, D/2] each): computed on the host, in place where
// the backend's memory is the host's, else written (two named writes, LC_SYNC_INPUT).
lc_status lc_model_rope_table_buf(const lc_config *cfg, int rope_len, const int *pos, int T, lc_buf cos_t,
                                  lc_buf sin_t);

// Forward only: loss sum and the number of counted tokens whose argmax is wrong.
lc_status lc_model_eval(lc_model *m, const lc_model_opts *o, lc_attn *attn, const lc_pass_in *in, const int *tokens,
                        const int *targets, const int *pos, int T, double *loss_sum,
                        long *n_wrong);

#endif
