// Checkpoints: DIR/checkpoint-<step>/ holds config.json + model.safetensors (HF names,
// loadable by transformers as-is), optimizer.safetensors (AdamW moments),
// trainer_state.json (step, data position, seed, schedule, layout) and checksums.json
// (size and 64-bit checksum of each of those files, core/hash.h). A checkpoint is
// written into a temporary directory and renamed into place, then DIR/latest is
// replaced atomically: a crash or a full disk never damages the previous checkpoint.
// Weights and moments that are not all finite are never written.
#ifndef LC_CHECKPOINT_H
#define LC_CHECKPOINT_H

#include "train/trainer.h"

// Collective: rank 0 writes, every rank gets the same status. Keeps the newest `keep`.
lc_status lc_checkpoint_save(lc_trainer *t, const char *dir, int keep);
// Bytes of one checkpoint of a model of cfg with model.safetensors in save_dtype: per
// parameter the model (4, or 2 in bf16 plus 4 of master weights) and AdamW's 8, plus
// 1 MiB for headers and the small files.
double lc_checkpoint_bytes(const lc_config *cfg, lc_dtype save_dtype);
// path: a DIR given to --save (its latest checkpoint) or one checkpoint-<step> directory.
// Resolves to the checkpoint directory (cap bytes), checking every file against
// checksums.json: a damaged checkpoint is an error naming the file; in a --save
// directory a damaged latest falls back to the newest intact checkpoint, and *note
// (note_cap bytes, may be NULL) says so. A checkpoint without checksums.json (written
// before they existed) is accepted and the note says it was not verified.
lc_status lc_checkpoint_resolve(const char *path, char *out, size_t cap, char *note, size_t note_cap);
// Checks every file of one checkpoint directory against its checksums.json (*verified 0
// when it has none).
lc_status lc_checkpoint_verify(const char *dir, int *verified);
// Loads weights, optimizer state, step and data position into an initialised trainer
// whose options must match the checkpoint (model, seed, data, seq, batch); the layout
// may differ. A checkpoint saved with --save-dtype bf16 resumes from its fp32 master
// weights (optimizer.safetensors' master.*), not from the rounded model.safetensors.
lc_status lc_checkpoint_load(lc_trainer *t, const char *ckpt_dir);

// What a checkpoint's trainer_state.json records for resuming: the step, the data position
// and the settings a resumed run must repeat.
typedef struct {
  long step;            // >= 0
  uint64_t next_sample; // < 2^53 (a JSON number)
  int seq, batch;       // >= 1
  int pack;             // 0 or 1 (absent: 0)
  int drop_long;        // 0 or 1 (absent: 0)
  char *seed, *data;    // --seed (decimal, as written) and --data
} lc_ckpt_state;
// Reads a trainer_state.json (path) into *s: LC_EFORMAT with one line for a file longctx
// did not write (a missing field, another type, a count that is not a whole number in range).
lc_status lc_checkpoint_read_state(const char *path, lc_ckpt_state *s);
void lc_checkpoint_state_free(lc_ckpt_state *s);

#endif
