// The device sub-allocator's bookkeeping (backend/suballoc.h) on a fake chunk source:
// random gets and puts keep every live allocation aligned, inside one chunk and disjoint
// from every other; freed neighbours merge (a chunk whose allocations are all freed is one
// free block again); trim hands back exactly the empty chunks; a refused chunk is
// LC_ENOMEM with nothing changed; a foreign address is LC_EINVAL.
#include <stdlib.h>
#include <string.h>

#include "backend/suballoc.h"
#include "testutil.h"

typedef struct {
  uint64_t next;
  size_t live_bytes, limit;
  int gets, puts;
} fake;

// A whole chunk where the limit allows, else just the request (as cudaMalloc near full).
static lc_status fake_get(void *ctx, size_t min, size_t pref, uint64_t *addr, size_t *got) {
  fake *f = ctx;
  size_t bytes = f->live_bytes + pref <= f->limit ? pref : min;
  if (f->live_bytes + bytes > f->limit) return lc_fail(LC_ENOMEM, "fake device: out of memory");
  *got = bytes;
  *addr = f->next;
  f->next += bytes + 4096 * 7; // a gap: adjacent chunks must not merge
  f->live_bytes += bytes;
  f->gets++;
  return LC_OK;
}
static void fake_put(void *ctx, uint64_t addr, size_t bytes) {
  fake *f = ctx;
  f->live_bytes -= bytes;
  f->puts++;
}

typedef struct {
  uint64_t addr;
  size_t bytes;
} live;

static int cmp(const void *a, const void *b) {
  const live *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

// Every live allocation aligned, in one chunk, disjoint from the others; the block list
// covers every chunk exactly.
static int consistent(const lc_suballoc *a, live *L, int nl) {
  live *s = malloc(sizeof *s * (size_t)(nl ? nl : 1));
  memcpy(s, L, sizeof *s * (size_t)nl);
  qsort(s, (size_t)nl, sizeof *s, cmp);
  int ok = 1;
  for (int i = 0; i < nl; i++) {
    if (s[i].addr % a->align) ok = 0;
    if (i && s[i - 1].addr + s[i - 1].bytes > s[i].addr) ok = 0;
    int in = 0;
    for (int c = 0; c < a->nc; c++)
      if (a->c[c].bytes && s[i].addr >= a->c[c].addr && s[i].addr + s[i].bytes <= a->c[c].addr + a->c[c].bytes) in = 1;
    if (!in) ok = 0;
  }
  size_t cover = 0, chunks = 0;
  for (int i = 0; i < a->n; i++) cover += a->b[i].bytes;
  for (int c = 0; c < a->nc; c++) chunks += a->c[c].bytes;
  if (cover != chunks || chunks != a->held) ok = 0;
  free(s);
  return ok;
}

int main(void) {
  fake f = {.next = (uint64_t)1 << 32, .limit = (size_t)1 << 30};
  lc_suballoc a;
  lc_suballoc_init(&a, (lc_chunk_source){fake_get, fake_put, &f}, 256, (size_t)1 << 20);
  lc_rng r;
  lc_rng_seed(&r, 77);
  live L[400];
  int nl = 0, bad = 0;
  size_t want_used = 0;
  for (int it = 0; it < 20000; it++) {
    if (nl < 400 && (nl == 0 || lc_rng_below(&r, 100) < 55)) {
      // mostly small, sometimes larger than a chunk (its own chunk)
      const size_t bytes = lc_rng_below(&r, 20) ? lc_rng_below(&r, 64 << 10) : ((size_t)1 << 20) + lc_rng_below(&r, 3 << 20);
      uint64_t p = 0;
      if (lc_suballoc_get(&a, bytes, &p) != LC_OK) bad++;
      L[nl++] = (live){p, bytes};
      want_used += (bytes ? bytes + 255 : 256) / 256 * 256;
    } else {
      const int k = (int)lc_rng_below(&r, (uint32_t)nl);
      if (lc_suballoc_put(&a, L[k].addr) != LC_OK) bad++;
      want_used -= (L[k].bytes ? L[k].bytes + 255 : 256) / 256 * 256;
      L[k] = L[--nl];
    }
    if (it % 97 == 0 && !consistent(&a, L, nl)) bad++;
    if (it % 1000 == 999) lc_suballoc_trim(&a);
  }
  CHECK(bad == 0, "%d failed gets/puts or inconsistent states over 20000 random operations", bad);
  CHECK(a.used == want_used, "used bytes %zu, the live allocations' rounded sum %zu", a.used, want_used);
  CHECK(consistent(&a, L, nl), "final state consistent");
  // Zero bytes: distinct addresses.
  uint64_t z1, z2;
  CHECK(lc_suballoc_get(&a, 0, &z1) == LC_OK && lc_suballoc_get(&a, 0, &z2) == LC_OK && z1 != z2, "0-byte gets distinct");
  lc_suballoc_put(&a, z1), lc_suballoc_put(&a, z2);
  // A foreign address, and one put twice.
  CHECK(lc_suballoc_put(&a, 12345) == LC_EINVAL, "a foreign address refused");
  if (nl) {
    const uint64_t p = L[nl - 1].addr;
    lc_suballoc_put(&a, p);
    nl--;
    CHECK(lc_suballoc_put(&a, p) == LC_EINVAL, "a double put refused");
  }
  // Free everything: every chunk is one free block again (merges), trim returns them all.
  while (nl) lc_suballoc_put(&a, L[--nl].addr);
  CHECK(a.used == 0, "nothing used after freeing all (%zu)", a.used);
  int frag = 0;
  for (int i = 0; i < a.n; i++) {
    const lc_chunk c = a.c[a.b[i].chunk];
    if (a.b[i].used || a.b[i].bytes != c.bytes || a.b[i].addr != c.addr) frag++;
  }
  CHECK(frag == 0, "%d blocks left unmerged after freeing everything", frag);
  const size_t held = a.held, back = lc_suballoc_trim(&a);
  CHECK(back == held && a.held == 0 && f.live_bytes == 0 && a.n == 0, "trim handed back %zu of %zu bytes, %zu still at the source",
        back, held, f.live_bytes);
  // A source that refuses: LC_ENOMEM, the state unchanged; a fitting request still served.
  uint64_t p1, p2;
  CHECK(lc_suballoc_get(&a, 1000, &p1) == LC_OK, "a small get after trim");
  f.limit = f.live_bytes; // no more chunks
  const int n_before = a.n;
  const size_t held_before = a.held;
  CHECK(lc_suballoc_get(&a, (size_t)8 << 20, &p2) == LC_ENOMEM && a.n == n_before && a.held == held_before,
        "a refused chunk: LC_ENOMEM, nothing changed");
  CHECK(lc_suballoc_get(&a, 1000, &p2) == LC_OK && p2 == p1 + 1024, "a get that fits the chunk still served, right after the first");
  CHECK(lc_suballoc_largest_free(&a) == ((size_t)1 << 20) - 2048, "largest free %zu", lc_suballoc_largest_free(&a));
  // Near full the source gives only the request: the chunk is that size, and fills exactly.
  // (1 MiB - 1000 does not fit the first chunk's rest; rounded: 1 MiB - 768)
  f.limit = f.live_bytes + ((size_t)1 << 20) - 500;
  uint64_t p3, p4;
  CHECK(lc_suballoc_get(&a, (size_t)2 << 20, &p3) == LC_ENOMEM, "2 MiB past the limit refused");
  CHECK(lc_suballoc_get(&a, ((size_t)1 << 20) - 1000, &p3) == LC_OK && a.c[a.nc - 1].bytes == ((size_t)1 << 20) - 768,
        "a request-sized chunk (%zu bytes)", a.c[a.nc - 1].bytes);
  CHECK(lc_suballoc_get(&a, 5000, &p4) == LC_OK && p4 == p2 + 1024, "a small request still goes to the first chunk");
  CHECK(lc_suballoc_put(&a, p3) == LC_OK && lc_suballoc_trim(&a) == ((size_t)1 << 20) - 768, "the request-sized chunk trimmed");
  lc_suballoc_destroy(&a);
  CHECK(f.live_bytes == 0 && f.gets == f.puts, "destroy hands back every chunk (%d gets, %d puts)", f.gets, f.puts);
  return lc_test_finish("test_suballoc");
}
