// The arena: accounting by category, the cap, and the keep list of freed large blocks
// (lc_free): reuse for the same size, release on a miss beyond the high-water mark (newest
// first, keeping what fits), never beyond the cap, nothing
// kept for small blocks or in sanitizer builds. Every block the arena takes from the system
// holds its 64-byte header and the whole payload: the binary is linked with
// -Wl,--wrap=posix_memalign (tests/tests.cmake), so the requests are seen as the system gets them.
#include <stdint.h>
#include <string.h>

#include "core/arena.h"
#include "testutil.h"

// The arena's calls to posix_memalign (arena.c's own, not the libraries'), recorded: what
// each block the system handed out holds (bytes asked for) and its alignment.
#define NREC 64
static struct {
  void *p;
  size_t bytes, align;
} rec[NREC];
static int n_rec;
int __real_posix_memalign(void **p, size_t align, size_t bytes);
int __wrap_posix_memalign(void **p, size_t align, size_t bytes);
int __wrap_posix_memalign(void **p, size_t align, size_t bytes) {
  const int r = __real_posix_memalign(p, align, bytes);
  if (r == 0) {
    rec[n_rec % NREC].p = *p, rec[n_rec % NREC].bytes = bytes, rec[n_rec % NREC].align = align;
    n_rec++;
  }
  return r;
}
// The system block a payload p of `bytes` lies in (its header 64 bytes before it): header
// and payload must fit what was asked for. Its alignment into *align (0: not found).
static void check_fits(const char *what, const void *p, size_t bytes, size_t *align) {
  const char *hdr = (const char *)p - 64;
  *align = 0;
  for (int i = n_rec - 1; i >= 0 && i >= n_rec - NREC; i--)
    if (rec[i % NREC].p == hdr) {
      *align = rec[i % NREC].align;
      CHECK(rec[i % NREC].bytes >= bytes + 64,
            "%s: the system block holds %zu bytes, but its 64-byte header + %zu-byte payload need %zu", what,
            rec[i % NREC].bytes, bytes, bytes + 64);
      return;
    }
  CHECK(0, "%s: no system block found starting 64 bytes before the payload %p", what, p);
}

#if defined(__SANITIZE_ADDRESS__)
#define KEEPS 0
#else
#define KEEPS 1
#endif

#define MIB ((size_t)1 << 20)

int main(void) {
  lc_arena a;
  lc_arena_init(&a, 0);
  // Accounting.
  void *p = lc_alloc(&a, LC_MEM_SCRATCH, 2 * MIB, "x"), *q = lc_alloc(&a, LC_MEM_ACT, 100, "y");
  CHECK(p && q && a.cur[LC_MEM_SCRATCH] == 2 * MIB && a.cur_total == 2 * MIB + 100, "accounting after two allocations");
  lc_free(&a, q);
  lc_free(&a, p);
  CHECK(a.cur_total == 0 && a.peak_total == 2 * MIB + 100, "live %zu peak %zu after freeing", a.cur_total, a.peak_total);
  CHECK(a.n_keep_ == KEEPS && a.keep_bytes_ == KEEPS * 2 * MIB, "freed 2 MiB block kept: %d blocks, %zu bytes", a.n_keep_,
        a.keep_bytes_);
  // The same size again: the same block, counted as live again (in its new category).
  void *p2 = lc_alloc(&a, LC_MEM_COMM, 2 * MIB, "x again");
  if (KEEPS) CHECK(p2 == p, "a 2 MiB allocation after a 2 MiB free reuses the block");
  CHECK(a.n_keep_ == 0 && a.cur[LC_MEM_COMM] == 2 * MIB && a.cur[LC_MEM_SCRATCH] == 0, "reuse accounting");
  memset(p2, 1, 2 * MIB); // the whole block is usable
  lc_free(&a, p2);
  // Another size beyond the high-water mark (2 MiB + 100): a miss releases the kept block.
  void *r = lc_alloc(&a, LC_MEM_SCRATCH, 3 * MIB, "z");
  CHECK(r && a.n_keep_ == 0 && a.keep_bytes_ == 0, "a miss releases the kept blocks (%d left)", a.n_keep_);
  lc_free(&a, r);
  lc_arena_trim(&a);
  // A miss within the high-water mark keeps what fits: three 2 MiB blocks live (6 MiB, the
  // mark), all freed (kept), then 1 MiB: live 1 + kept 6 > 6, so the newest kept block goes
  // and two stay (5 <= 6); a 2 MiB allocation then reuses one of them.
  void *t[3];
  for (int i = 0; i < 3; i++) t[i] = lc_alloc(&a, LC_MEM_SCRATCH, 2 * MIB, "t");
  for (int i = 0; i < 3; i++) lc_free(&a, t[i]);
  void *s1 = lc_alloc(&a, LC_MEM_SCRATCH, 1 * MIB, "s1");
  CHECK(s1 && a.n_keep_ == 2 * KEEPS && a.cur_total + a.keep_bytes_ <= a.hwm_,
        "a miss within the mark keeps 2 blocks (%d kept, live %zu + kept %zu, mark %zu)", a.n_keep_, a.cur_total,
        a.keep_bytes_, a.hwm_);
  void *s2 = lc_alloc(&a, LC_MEM_SCRATCH, 2 * MIB, "s2");
  if (KEEPS) CHECK(s2 == t[0] || s2 == t[1], "the kept blocks are the oldest ones, reused");
  lc_free(&a, s1);
  lc_free(&a, s2);
  lc_arena_trim(&a);
  CHECK(a.n_keep_ == 0 && a.keep_bytes_ == 0, "trim empties the keep list");
  // Small blocks are never kept.
  void *s = lc_alloc(&a, LC_MEM_SCRATCH, MIB - 64, "small");
  lc_free(&a, s);
  CHECK(a.n_keep_ == 0, "a block under 1 MiB was kept");
  // With a cap, live + kept stay within it.
  lc_arena c;
  lc_arena_init(&c, 5 * MIB);
  void *b1 = lc_alloc(&c, LC_MEM_SCRATCH, 3 * MIB, "b1"), *b2 = lc_alloc(&c, LC_MEM_SCRATCH, 2 * MIB, "b2");
  lc_free(&c, b1); // kept: 2 live + 3 kept = 5 <= cap
  CHECK(c.n_keep_ == KEEPS, "b1 kept within the cap");
  void *b3 = lc_alloc(&c, LC_MEM_SCRATCH, 1 * MIB, "b3"); // a miss: b1 is released
  CHECK(b3 && c.n_keep_ == 0, "allocation under the cap after a miss");
  lc_free(&c, b2);
  CHECK(c.cur_total + c.keep_bytes_ <= c.cap, "live %zu + kept %zu > cap %zu", c.cur_total, c.keep_bytes_, c.cap);
  CHECK(lc_alloc(&c, LC_MEM_SCRATCH, 5 * MIB, "too much") == NULL && strstr(lc_errmsg(), "memory cap"),
        "beyond the cap: %s", lc_errmsg());
  lc_free(&c, b3);
  lc_arena_trim(&c);
  lc_arena_trim(&a);
  // Huge pages (arena.c): a transient block of >= 4 MiB (activations, scratch, comm,
  // gathered) starts on a 2 MiB boundary (its header there, the payload 64 bytes on), is
  // kept and reused like any block; a small one and the model states are plain allocations.
  {
    lc_arena h;
    lc_arena_init(&h, 0);
    const lc_mem_cat tcat[4] = {LC_MEM_ACT, LC_MEM_SCRATCH, LC_MEM_COMM, LC_MEM_GATHERED};
    const size_t huge = (size_t)2 << 20;
    for (int i = 0; i < 4; i++) {
      char *p = lc_alloc(&h, tcat[i], 6 * MIB + 100, "transient");
      CHECK(p && (uintptr_t)(p - 64) % huge == 0, "a 6 MiB %s block at %p: not on a 2 MiB boundary",
            lc_mem_cat_name(tcat[i]), (void *)p);
      char what[64];
      snprintf(what, sizeof what, "a huge-page %s block", lc_mem_cat_name(tcat[i]));
      size_t al;
      if (p) check_fits(what, p, 6 * MIB + 100, &al);
      if (p) CHECK(al == huge, "%s: asked for alignment %zu, not 2 MiB", what, al);
      memset(p, 3, 6 * MIB + 100); // all of it is usable
      lc_free(&h, p);
      char *q = lc_alloc(&h, tcat[i], 6 * MIB + 100, "again");
      if (KEEPS) CHECK(q == p, "the kept huge block reused");
      lc_free(&h, q);
    }
    char *small = lc_alloc(&h, LC_MEM_ACT, 3 * MIB, "3 MiB"), *st = lc_alloc(&h, LC_MEM_PARAMS, 6 * MIB, "params");
    CHECK(small && st && (uintptr_t)small % 64 == 0 && (uintptr_t)st % 64 == 0, "plain blocks 64-byte aligned");
    size_t al;
    if (small) check_fits("a plain 3 MiB activations block", small, 3 * MIB, &al);
    if (st) check_fits("a plain 6 MiB params block", st, 6 * MIB, &al);
    CHECK((uintptr_t)(small - 64) % huge != 0 || (uintptr_t)(st - 64) % huge != 0,
          "a 3 MiB block and a model-state block both on 2 MiB boundaries: huge pages beyond the transient categories");
    lc_free(&h, small), lc_free(&h, st);
    lc_arena_trim(&h);
  }
  return lc_test_finish("test_arena");
}
