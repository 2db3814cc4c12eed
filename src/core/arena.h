// Memory arena: every large buffer of a run is allocated here, tagged with a
// category. The arena counts live and peak bytes per category and in total, and
// can be capped so tests (and users) get a clean LC_ENOMEM instead of a crash.
// Not thread-safe: allocate from the main thread only (never inside OpenMP regions).
#ifndef LC_ARENA_H
#define LC_ARENA_H

#include <stddef.h>

#include "core/status.h"

typedef enum {
  LC_MEM_PARAMS = 0, // model weights
  LC_MEM_GRADS,      // parameter gradients
  LC_MEM_OPTIM,      // optimizer state (AdamW m, v)
  LC_MEM_GATHERED,   // ZeRO-3: full copies of sharded weights, gathered for one unit's use
  LC_MEM_CKPT,       // activations kept from forward for backward
  LC_MEM_ACT,        // working activations of the layer being computed
  LC_MEM_SCRATCH,    // kernel workspaces, tiles, temporaries
  LC_MEM_COMM,       // communication buffers
  LC_MEM_NCAT
} lc_mem_cat;

typedef struct lc_arena {
  size_t cur[LC_MEM_NCAT];
  size_t peak[LC_MEM_NCAT];
  size_t cur_total, peak_total;
  size_t cap; // 0 = no cap
  size_t n_allocs;
} lc_arena;

void lc_arena_init(lc_arena *a, size_t cap_bytes);
// 64-byte aligned block of `bytes`; NULL (with lc_fail message) if over the cap or the
// system is out of memory. `what` names the buffer for the error message.
void *lc_alloc(lc_arena *a, lc_mem_cat cat, size_t bytes, const char *what);
void *lc_calloc(lc_arena *a, lc_mem_cat cat, size_t bytes, const char *what);
void lc_free(lc_arena *a, void *p); // NULL is fine
// Peaks restart from the current live bytes (e.g. after set-up, to measure a step).
void lc_arena_reset_peaks(lc_arena *a);
const char *lc_mem_cat_name(lc_mem_cat c);

// Convenience: allocate or return LC_ENOMEM from the calling function.
#define LC_ALLOC(ptr, arena, cat, nbytes, what)                   \
  do {                                                            \
    (ptr) = lc_alloc((arena), (cat), (nbytes), (what));           \
    if (!(ptr)) return LC_ENOMEM;                                 \
  } while (0)

#endif
