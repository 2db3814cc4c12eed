// Checkpoints: DIR/checkpoint-<step>/ holds config.json + model.safetensors (HF names,
// loadable by transformers as-is), optimizer.safetensors (AdamW moments) and
// trainer_state.json (step, data position, seed, schedule, layout). A checkpoint is
// written into a temporary directory and renamed into place, then DIR/latest is
// replaced atomically: a crash or a full disk never damages the previous checkpoint.
#ifndef LC_CHECKPOINT_H
#define LC_CHECKPOINT_H

#include "train/trainer.h"

// Collective: rank 0 writes, every rank gets the same status. Keeps the newest `keep`.
lc_status lc_checkpoint_save(lc_trainer *t, const char *dir, int keep);
// path: a DIR given to --save (its latest checkpoint) or one checkpoint-<step> directory.
// Resolves to the checkpoint directory (cap bytes).
lc_status lc_checkpoint_resolve(const char *path, char *out, size_t cap);
// Loads weights, optimizer state, step and data position into an initialised trainer
// whose options must match the checkpoint (model, seed, data, seq, batch); the layout
// may differ.
lc_status lc_checkpoint_load(lc_trainer *t, const char *ckpt_dir);

#endif
