// A sub-allocator of address ranges: large blocks ("chunks") obtained from a device's own
// allocator (cudaMalloc), carved into aligned allocations first-fit, freed allocations
// merged with free neighbours, a chunk handed back only on trim (a device's allocator is
// slow and synchronising: the step allocates and frees the same sizes every layer).
//
// Pure bookkeeping on integer addresses: it never touches the memory, so it runs and is
// tested on the CPU (tests/test_suballoc.c) with a fake source, and the CUDA backend uses
// it with device addresses. The counting per memory category (caps, peaks) stays in the
// arena (lc_arena_charge); this only places bytes.
#ifndef LC_SUBALLOC_H
#define LC_SUBALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

// Where chunks come from: get gives at least `min` bytes (`pref` where it can: a whole
// chunk) at *addr (non-zero), their count in *got, or LC_ENOMEM; put hands one back.
typedef struct {
  lc_status (*get)(void *ctx, size_t min, size_t pref, uint64_t *addr, size_t *got);
  void (*put)(void *ctx, uint64_t addr, size_t bytes);
  void *ctx;
} lc_chunk_source;

typedef struct {
  uint64_t addr;
  size_t bytes;
  int chunk;  // index into chunks
  int used;
} lc_subblock;

typedef struct {
  uint64_t addr;
  size_t bytes;
} lc_chunk;

typedef struct {
  lc_chunk_source src;
  size_t align;        // allocation alignment (a power of two: 256 for CUDA)
  size_t chunk_bytes;  // the smallest chunk it asks for (a larger request gets its own size)
  lc_subblock *b;      // blocks ordered by (chunk, address), covering every chunk
  int n, cap;
  lc_chunk *c;
  int nc, ccap;
  size_t held;         // bytes of all chunks
  size_t used;         // bytes of live allocations (rounded to align)
  size_t peak_held;
} lc_suballoc;

void lc_suballoc_init(lc_suballoc *a, lc_chunk_source src, size_t align, size_t chunk_bytes);
// An allocation of `bytes` (rounded up to align; 0 bytes still gets a distinct address).
// LC_ENOMEM (the source's message) when no chunk has room and the source refuses a new one.
lc_status lc_suballoc_get(lc_suballoc *a, size_t bytes, uint64_t *addr);
// LC_EINVAL for an address that is not a live allocation (a programming error).
lc_status lc_suballoc_put(lc_suballoc *a, uint64_t addr);
// Hands back every chunk with no live allocation in it; the bytes returned.
size_t lc_suballoc_trim(lc_suballoc *a);
// Hands back every chunk (live allocations included) and frees the lists.
void lc_suballoc_destroy(lc_suballoc *a);
// The largest free range in any chunk (what a request can get without a new chunk).
size_t lc_suballoc_largest_free(const lc_suballoc *a);

#endif
