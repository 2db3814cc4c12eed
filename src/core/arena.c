#define _DEFAULT_SOURCE
#include "core/arena.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

// Each block carries a 64-byte header (keeps the payload 64-byte aligned) with
// its size and category so lc_free can account for it.
typedef struct {
  size_t bytes;
  int cat;
  uint32_t magic;
} lc_block_hdr;
#define LC_HDR 64
#define LC_MAGIC 0x4c43414eu

void lc_arena_init(lc_arena *a, size_t cap_bytes) {
  memset(a, 0, sizeof *a);
  a->cap = cap_bytes;
}

static const char *fmt_mib(char *buf, size_t n, size_t bytes) {
  snprintf(buf, n, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
  return buf;
}

#define LC_KEEP_MIN ((size_t)1 << 20)
#if defined(__SANITIZE_ADDRESS__)
#define LC_KEEP_ON 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LC_KEEP_ON 0
#endif
#endif
#ifndef LC_KEEP_ON
#define LC_KEEP_ON 1
#endif

void lc_arena_trim(lc_arena *a) {
  for (int i = 0; i < a->n_keep_; i++) free(a->keep_[i]);
  a->n_keep_ = 0;
  a->keep_bytes_ = 0;
}

// Large blocks on transparent huge pages where the kernel offers them on request
// (madvise mode): a 2 MiB page per fault instead of 4 KiB. The step allocates and frees
// its per-layer backward buffers (tens of MiB) every layer, and each fresh block's pages
// fault in as it is first written: bench-s at 2K took 117k faults (480 MB) a step. The
// block starts on a 2 MiB boundary and its whole 2 MiB pages are advised (the tail stays on
// small pages).
// Only the categories a step allocates and frees again (activations, scratch,
// communication buffers, gathered units): the model states and checkpoint blocks are
// allocated once, and huge pages there cost seconds at start-up (the kernel compacts
// memory to find them) for nothing. LONGCTX_HUGEPAGES=0 turns it off.
#define LC_HUGE_MIN ((size_t)4 << 20)
#define LC_HUGE_PAGE ((size_t)2 << 20)
static int lc_huge_pages(void) {
  static int on = -1;
  if (on < 0) {
    const char *e = getenv("LONGCTX_HUGEPAGES");
    on = !(e && !strcmp(e, "0"));
  }
  return on;
}
static int transient(lc_mem_cat c) {
  return c == LC_MEM_ACT || c == LC_MEM_SCRATCH || c == LC_MEM_COMM || c == LC_MEM_GATHERED;
}
static void *huge_block(size_t bytes) {
  void *p = NULL;
  if (posix_memalign(&p, LC_HUGE_PAGE, bytes) != 0) return NULL;
#ifdef MADV_HUGEPAGE
  // the whole huge pages inside the block only (past its end lies someone else's memory);
  // advice: nothing fails if the kernel ignores it
  madvise(p, bytes / LC_HUGE_PAGE * LC_HUGE_PAGE, MADV_HUGEPAGE);
#endif
  return p;
}

// A kept block of exactly `bytes`, taken out of the keep list; NULL if none (then kept
// blocks are released, newest first, until live + kept + bytes is within the high-water mark).
static lc_block_hdr *reuse(lc_arena *a, size_t bytes) {
  if (!a->n_keep_) return NULL;
  if (bytes >= LC_KEEP_MIN)
    for (int i = a->n_keep_ - 1; i >= 0; i--) {
      lc_block_hdr *h = a->keep_[i];
      if (h->bytes != bytes) continue;
      a->keep_[i] = a->keep_[--a->n_keep_];
      a->keep_bytes_ -= bytes;
      return h;
    }
  const size_t live = a->cur_total + bytes, hwm = live > a->hwm_ ? live : a->hwm_;
  while (a->n_keep_ && live + a->keep_bytes_ > hwm) {
    lc_block_hdr *h = a->keep_[--a->n_keep_];
    a->keep_bytes_ -= h->bytes;
    free(h);
  }
  return NULL;
}

// The cap's refusal (one line naming the buffer), or LC_OK.
static lc_status cap_check(const lc_arena *a, size_t bytes, const char *what) {
  char b1[32], b2[32], b3[32];
  if (a->cap && a->cur_total + bytes > a->cap)
    return lc_fail(LC_ENOMEM,
                   "out of memory: %s needs %s but the memory cap of %s leaves %s; "
                   "shorten --seq, use more ranks, or enable --checkpoint/--mlp-tile/--loss-tile",
                   what ? what : "buffer", fmt_mib(b1, sizeof b1, bytes), fmt_mib(b2, sizeof b2, a->cap),
                   fmt_mib(b3, sizeof b3, a->cap - a->cur_total));
  return LC_OK;
}

static void count(lc_arena *a, lc_mem_cat cat, size_t bytes) {
  a->cur[cat] += bytes;
  if (a->cur[cat] > a->peak[cat]) a->peak[cat] = a->cur[cat];
  a->cur_total += bytes;
  if (a->cur_total > a->peak_total) a->peak_total = a->cur_total;
  if (a->cur_total > a->hwm_) a->hwm_ = a->cur_total;
  a->n_allocs++;
}

lc_status lc_arena_charge(lc_arena *a, lc_mem_cat cat, size_t bytes, const char *what) {
  LC_TRY(cap_check(a, bytes, what));
  count(a, cat, bytes);
  return LC_OK;
}

void lc_arena_uncharge(lc_arena *a, lc_mem_cat cat, size_t bytes) {
  a->cur[cat] -= bytes;
  a->cur_total -= bytes;
}

void *lc_alloc(lc_arena *a, lc_mem_cat cat, size_t bytes, const char *what) {
  char b1[32];
  if (cap_check(a, bytes, what) != LC_OK) return NULL;
  void *raw = reuse(a, bytes);
  if (!raw && bytes >= LC_HUGE_MIN && bytes <= SIZE_MAX - LC_HDR && transient(cat) && lc_huge_pages())
    raw = huge_block(bytes + LC_HDR);
  if (!raw && (bytes > SIZE_MAX - LC_HDR || posix_memalign(&raw, 64, bytes + LC_HDR) != 0)) {
    lc_fail(LC_ENOMEM,
            "out of memory: the system could not provide %s for %s; "
            "shorten --seq, use more ranks, or enable --checkpoint/--mlp-tile/--loss-tile",
            fmt_mib(b1, sizeof b1, bytes), what ? what : "buffer");
    return NULL;
  }
  lc_block_hdr *h = raw;
  h->bytes = bytes;
  h->cat = (int)cat;
  h->magic = LC_MAGIC;
  count(a, cat, bytes);
  return (char *)raw + LC_HDR;
}

void *lc_calloc(lc_arena *a, lc_mem_cat cat, size_t bytes, const char *what) {
  void *p = lc_alloc(a, cat, bytes, what);
  if (p) memset(p, 0, bytes);
  return p;
}

void lc_free(lc_arena *a, void *p) {
  if (!p) return;
  lc_block_hdr *h = (lc_block_hdr *)((char *)p - LC_HDR);
  if (h->magic != LC_MAGIC) abort(); // freeing something the arena did not allocate
  h->magic = 0;
  a->cur[h->cat] -= h->bytes;
  a->cur_total -= h->bytes;
  const size_t limit = a->cap ? a->cap : SIZE_MAX;
  if (LC_KEEP_ON && h->bytes >= LC_KEEP_MIN && a->n_keep_ < LC_ARENA_KEEP &&
      a->cur_total + a->keep_bytes_ + h->bytes <= limit) {
    a->keep_[a->n_keep_++] = h;
    a->keep_bytes_ += h->bytes;
    return;
  }
  free(h);
}

void lc_arena_reset_peaks(lc_arena *a) {
  for (int c = 0; c < LC_MEM_NCAT; c++) a->peak[c] = a->cur[c];
  a->peak_total = a->cur_total;
}

const char *lc_mem_cat_name(lc_mem_cat c) {
  static const char *names[LC_MEM_NCAT] = {"params", "grads", "optimizer", "gathered", "checkpoints",
                                           "activations", "scratch", "comm"};
  return (c >= 0 && c < LC_MEM_NCAT) ? names[c] : "?";
}
