// Dropout on LoRA's input (PEFT's lora_dropout): a mask that is a pure function of the run,
// never of the layout. Element (g, j) of one call is kept when
//   lc_dropout_bits(key, g, j) >= thr,   thr = round(p * 2^24)
// with g the token's index in its whole sequence (not its row on this rank), j the input
// feature, and key made from the seed, the step, the sample, the layer and the projection
// (lc_dropout_key). So every split of a sequence over ranks, tiles or chunks drops the same
// elements, and backward regenerates forward's mask instead of storing it.
//
// The kept values are not scaled here: the 1/(1-p) of nn.Dropout is folded into the
// adapter's scale (model/lora_op.c), so masking a bf16 operand is exact.
#ifndef LC_DROPOUT_H
#define LC_DROPOUT_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"

#include "ops/dropout_hash.h"

// The key of one adapter call: the pass's key (lc_dropout_pass_key) with the layer and the
// projection (LC_LORA_Q ..).
static inline uint64_t lc_dropout_key(uint64_t pass_key, int layer, int proj) {
  return lc_mix64(pass_key ^ lc_mix64(((uint64_t)(uint32_t)layer << 8 | (uint32_t)proj) + 0x2545F4914F6CDD1Dull));
}
// The pass's key: the run's seed, the optimizer step it belongs to (1 = the first) and the
// sample's index in the run's stream of samples (the same on every layout).
static inline uint64_t lc_dropout_pass_key(uint64_t seed, long step, uint64_t sample) {
  return lc_mix64(lc_mix64(seed ^ 0x44726f704c6f5241ull /* "DropLoRA" */) ^ lc_mix64((uint64_t)step) ^
                  lc_mix64(sample + 0x632BE59BD9B4E019ull));
}

// dst[r, j] (= or, accumulate, +=) src[r, j] where element (gidx[r], j) is kept, else
// (=) 0 (or nothing added), for r < rows, j < cols. dst and src are both F32 or both
// BF16 (accumulate only F32); dst may equal src. Threaded over rows.
void lc_dropout_mask(void *dst, const void *src, lc_dtype dt, int rows, int cols, const int *gidx, uint64_t key,
                     uint32_t thr, int accumulate);

#endif
