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

#define LC_ARENA_KEEP 48 // freed large blocks kept for reuse (see lc_free)

typedef struct lc_arena {
  size_t cur[LC_MEM_NCAT];
  size_t peak[LC_MEM_NCAT];
  size_t cur_total, peak_total;
  size_t cap; // 0 = no cap
  size_t n_allocs;
  // Freed blocks of >= 1 MiB kept for an allocation of the same size (not counted as live)
  void *keep_[LC_ARENA_KEEP];
  int n_keep_;
  size_t keep_bytes_;
  size_t hwm_; // the most live bytes ever (not reset with the peaks): live + kept stay within it
} lc_arena;

void lc_arena_init(lc_arena *a, size_t cap_bytes);
// 64-byte aligned block of `bytes`; NULL (with lc_fail message) if over the cap or the
// system is out of memory. `what` names the buffer for the error message.
void *lc_alloc(lc_arena *a, lc_mem_cat cat, size_t bytes, const char *what);
void *lc_calloc(lc_arena *a, lc_mem_cat cat, size_t bytes, const char *what);
// NULL is fine. A block of >= 1 MiB is kept (up to LC_ARENA_KEEP of them, and within the
// cap together with the live bytes) and handed to the next allocation of exactly its size:
// a training step allocates the same sizes layer after layer and step after step, and a
// fresh large block costs a page fault per 4 KiB (measured: 20-25% of a bench-s step).
// An allocation that finds no block of its size releases kept blocks (the most recently
// kept first) until live + kept bytes, its own included, are within the most live bytes
// the arena ever had: the memory the arena holds never exceeds its peak, and blocks of
// other sizes survive an allocation in between (bf16 GEMMs pack operands of many sizes).
// Sanitizer builds keep nothing (every free is real, so use-after-free stays visible).
void lc_free(lc_arena *a, void *p);
// Counting without memory, for a backend whose memory is elsewhere (a device): the cap's
// check and the live and peak bytes of lc_alloc, for `bytes` held in `cat`. LC_ENOMEM with
// lc_alloc's one line when the cap refuses it.
lc_status lc_arena_charge(lc_arena *a, lc_mem_cat cat, size_t bytes, const char *what);
void lc_arena_uncharge(lc_arena *a, lc_mem_cat cat, size_t bytes);
// Releases the kept blocks (when the arena's owner is done with it).
void lc_arena_trim(lc_arena *a);
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
