// LoRA dropout's mask applied on the CPU (the mask's definition and keys: core/dropout_hash.h).
#ifndef LC_DROPOUT_H
#define LC_DROPOUT_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"

#include "core/dropout_hash.h"

// dst[r, j] (= or, accumulate, +=) src[r, j] where element (gidx[r], j) is kept, else
// (=) 0 (or nothing added), for r < rows, j < cols. dst and src are both F32 or both
// BF16 (accumulate only F32); dst may equal src. Threaded over rows.
void lc_dropout_mask(void *dst, const void *src, lc_dtype dt, int rows, int cols, const int *gidx, uint64_t key,
                     uint32_t thr, int accumulate);

#endif
