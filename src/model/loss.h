// Final RMSNorm -> LM head -> cross-entropy, over sequence tiles, with the gradient of
// each tile computed in the same pass: an [T, vocab] matrix exists only when untiled.
#ifndef LC_LOSS_H
#define LC_LOSS_H

#include "backend/backend.h"
#include "core/arena.h"
#include "model/config.h"
#include "model/params.h"
#include "backend/scratch.h"

// The final norm's and the LM head's weights and gradients, as the backend's buffers.
typedef struct {
  lc_buf norm, norm_g; // [C] fp32 (norm_g: empty without gradients)
  lc_buf head, head_g; // [V, C]: fp32, or the bf16 compute copy; head_g fp32 (empty without gradients)
} lc_loss_weights;

// On backend be: x[T,C] final residual stream; targets[T] (host: < 0 not counted; copied
// to the device once, a named write). Adds the loss sum over counted tokens to *loss_sum
// (one named read per call, with the misses). If dx is not empty: dx[T,C] is OVERWRITTEN
// with d(loss_scale * loss_sum)/dx and norm_g, head_g are accumulated.
// tile <= 0 or >= T: one tile. Tiles with no counted token are skipped.
// n_wrong (optional): adds the number of counted tokens whose argmax logit is not the target.
// bf16: the head GEMM's operands are bf16 values (the normed rows and dlogits are rounded;
// the head is the store's bf16 copy); logits, softmax and the loss stay fp32.
lc_status lc_loss_fwd_bwd(const lc_config *cfg, lc_backend *be, const lc_loss_weights *w, lc_buf x, const int *targets,
                          int T, int tile, float loss_scale, int bf16, lc_buf dx, double *loss_sum, long *n_wrong);

// Peak device bytes (category scratch) lc_loss_fwd_bwd allocates for T tokens and `tile`
// with gradients: the accumulators and the targets' copy (16 + 4 T), one tile's normed,
// dnormed [tile,C], rstd [tile] and logits [tile,V], plus (bf16) the head GEMMs' operand
// packing (lc_matmul_*_bytes).
size_t lc_loss_scratch_bytes(const lc_config *cfg, int T, int tile, int bf16);

// ---- the LM head a vocabulary slice at a time (--vocab-slice)
// The caller hands out the head's rows [s * rows, s * rows + rows) one slice at a time
// (under ZeRO 3 gathering only that slice, and reducing only its gradient), so that no
// [vocab, C] matrix or gradient exists at once. Two passes over the slices: the first
// merges each token's log-sum-exp across slices (running max and sum, as flash attention
// merges key blocks), the target logit and the argmax; the second (with gradients)
// recomputes each slice's logits, turns them into dlogits with the final log-sum-exp and
// accumulates dnormed (in dx) and the slice's weight gradient. The final norm's backward
// runs last. Logits are recomputed once per slice (one extra head GEMM: 4 instead of 3).
typedef struct {
  int rows; // rows per slice; the last slice holds the rest of the vocabulary
  // Slice s of pass p (0: the log-sum-exp pass, 1: the gradient pass; slices in order
  // 0..n-1 in each): *w its weights [rows_s, C] (fp32, or in a bf16 pass 2 bytes); in pass
  // 1 *g its gradient rows (accumulated into). put ends the slice's use.
  lc_status (*get)(void *arg, int s, int pass, lc_buf *w, lc_buf *g);
  lc_status (*put)(void *arg, int s, int pass);
  void *arg;
} lc_head_slices;

static inline int lc_head_n_slices(int vocab, int rows) { return (vocab + rows - 1) / rows; }

// As lc_loss_fwd_bwd with the head's slices from hs and the final norm's weight and
// gradient given apart (norm_g accumulated; may be NULL without dx).
lc_status lc_loss_fwd_bwd_sliced(const lc_config *cfg, lc_backend *be, lc_buf norm_w, lc_buf norm_g,
                                 const lc_head_slices *hs, lc_buf x, const int *targets, int T, int tile,
                                 float loss_scale, int bf16, lc_buf dx, double *loss_sum, long *n_wrong);

// Its peak device scratch: one tile's normed rows, rstd and logits [tile, rows], the
// accumulators, the per-token statistics (24 bytes per token) and the targets' copy (4 per
// token), and the head GEMMs' scratch (bf16: on a slice's 2-byte rows).
size_t lc_loss_sliced_scratch_bytes(const lc_config *cfg, int T, int tile, int rows, int bf16);

#endif
