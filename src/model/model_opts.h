// The options of a model's passes (checkpointing, tiles, ZeRO, precision, offload, vocabulary
// slices): what the pass, its schedule (model/schedule.h) and the memory model read.
#ifndef LC_MODEL_OPTS_H
#define LC_MODEL_OPTS_H

#include "attn/seqlayout.h"
#include "core/dtype.h"

typedef enum {
  LC_CKPT_NONE = 0,  // keep every activation backward reads
  LC_CKPT_FULL,      // keep each layer's input; recompute the layer in backward
  LC_CKPT_SELECTIVE, // also keep attention output + its saved state: never recompute attention
} lc_ckpt_policy;

typedef struct {
  lc_ckpt_policy ckpt;
  int mlp_tile;  // tokens per MLP tile (0 = untiled)
  int loss_tile; // tokens per logits+loss tile (0 = untiled)
  int zero;      // ZeRO stage 0..3 of the model states (pstore.h)
  int zero_group; // ranks per zero group (0: the whole world; the memory model: hp x cp)
  lc_cp_layout cp_layout; // how sequences are cut over the context ranks (attn/seqlayout.h)
  lc_dtype precision; // LC_DT_F32 (0) or LC_DT_BF16: the values GEMMs and attention read
                      // (DESIGN.md "Precision"; the rounding points are in layer.h)
  const char *offload_dir; // layer checkpoints offloaded to this directory (model/ckstore.h);
                           // NULL: kept in RAM
  int vocab_slice; // vocabulary rows per slice of the embedding and LM head (model/loss.h:
                   // lc_head_slices); 0 or >= vocab: whole matrices
  int offload_optimizer; // the model states in host memory, AdamW on the CPU cores, the passes
                         // on the device (lc_pstore_offload)
  int offload_depth; // with offload_dir: layer checkpoints resident in RAM (>= 2); 0: auto
} lc_model_opts;

// Layer checkpoints the offloaded store holds in RAM (0: no offload, every layer in RAM).
// auto: the fewest that let every transfer overlap a layer's compute. Full checkpointing
// puts a layer's checkpoint (its input) before the layer runs, so its write overlaps that
// layer's forward with 2 resident (the layer and the output it fills); the other policies
// keep groups the layer writes, so the write follows the layer and overlaps the next
// one's forward with a third. Backward reads one layer ahead with 2.
static inline int lc_offload_depth(const lc_model_opts *o) {
  if (!o->offload_dir) return 0;
  if (o->offload_depth > 0) return o->offload_depth;
  return o->ckpt == LC_CKPT_FULL ? 2 : 3;
}

// Whether a pass takes the vocabulary matrices a slice at a time.
static inline int lc_vocab_sliced(const lc_model_opts *o, int vocab) { return o->vocab_slice > 0 && o->vocab_slice < vocab; }

#endif
