// Final RMSNorm -> LM head -> cross-entropy, over sequence tiles, with the gradient of
// each tile computed in the same pass: an [T, vocab] matrix exists only when untiled.
#ifndef LC_LOSS_H
#define LC_LOSS_H

#include "core/arena.h"
#include "model/config.h"
#include "model/params.h"

// x[T,C] final residual stream. targets[T] (< 0: not counted). Adds the loss sum over
// counted tokens to *loss_sum. If dx != NULL: dx[T,C] is OVERWRITTEN with
// d(loss_scale * loss_sum)/dx and g->norm, g->head are accumulated.
// tile <= 0 or >= T: one tile. Tiles with no counted token are skipped.
// n_wrong (optional): adds the number of counted tokens whose argmax logit is not the target.
// bf16: the head GEMM's operands are bf16 values (the normed rows and dlogits are rounded;
// w->head is the store's bf16 copy); logits, softmax and the loss stay fp32.
lc_status lc_loss_fwd_bwd(const lc_config *cfg, const lc_weights *w, lc_weights *g,
                          const float *x, const int *targets, int T, int tile, float loss_scale,
                          int bf16, float *dx, double *loss_sum, long *n_wrong, lc_arena *arena);

// Peak arena bytes (category scratch) lc_loss_fwd_bwd allocates for T tokens and `tile`
// with gradients: one tile's normed, dnormed [tile,C], rstd [tile] and logits [tile,V],
// plus (bf16) the head GEMMs' operand packing (lc_matmul_*_bytes).
size_t lc_loss_scratch_bytes(const lc_config *cfg, int T, int tile, int bf16);

#endif
