// The sub-allocator (suballoc.h): one block list, ordered by chunk then address.
#include "backend/suballoc.h"

#include <stdlib.h>
#include <string.h>

void lc_suballoc_init(lc_suballoc *a, lc_chunk_source src, size_t align, size_t chunk_bytes) {
  memset(a, 0, sizeof *a);
  a->src = src;
  a->align = align ? align : 1;
  a->chunk_bytes = chunk_bytes;
}

static size_t round_up(size_t x, size_t al) { return (x + al - 1) / al * al; }

static lc_status grow_blocks(lc_suballoc *a, int more) {
  if (a->n + more <= a->cap) return LC_OK;
  const int cap = a->cap ? a->cap * 2 + more : 64 + more;
  lc_subblock *nb = realloc(a->b, sizeof *nb * (size_t)cap);
  if (!nb) return lc_fail(LC_ENOMEM, "out of host memory for the device allocator's block list");
  a->b = nb, a->cap = cap;
  return LC_OK;
}

// A new chunk of at least `want` bytes: its one free block goes at the end of the list.
static lc_status add_chunk(lc_suballoc *a, size_t want) {
  const size_t pref = round_up(want > a->chunk_bytes ? want : a->chunk_bytes, a->align);
  LC_TRY(grow_blocks(a, 2));
  if (a->nc == a->ccap) {
    const int cap = a->ccap ? a->ccap * 2 : 8;
    lc_chunk *nc = realloc(a->c, sizeof *nc * (size_t)cap);
    if (!nc) return lc_fail(LC_ENOMEM, "out of host memory for the device allocator's chunk list");
    a->c = nc, a->ccap = cap;
  }
  uint64_t addr = 0;
  size_t bytes = 0;
  LC_TRY(a->src.get(a->src.ctx, want, pref, &addr, &bytes));
  if (bytes < want) return lc_fail(LC_EINVAL, "internal: a chunk source gave %zu bytes for %zu", bytes, want);
  a->c[a->nc] = (lc_chunk){addr, bytes};
  a->b[a->n++] = (lc_subblock){addr, bytes, a->nc, 0};
  a->nc++;
  a->held += bytes;
  if (a->held > a->peak_held) a->peak_held = a->held;
  return LC_OK;
}

lc_status lc_suballoc_get(lc_suballoc *a, size_t bytes, uint64_t *addr) {
  const size_t want = round_up(bytes ? bytes : 1, a->align);
  int i = 0;
  while (i < a->n && (a->b[i].used || a->b[i].bytes < want)) i++;
  if (i == a->n) {
    LC_TRY(add_chunk(a, want));
    i = a->n - 1;
  }
  LC_TRY(grow_blocks(a, 1));
  if (a->b[i].bytes > want) { // split: the rest stays free right after it, in the same chunk
    memmove(&a->b[i + 2], &a->b[i + 1], sizeof *a->b * (size_t)(a->n - i - 1));
    a->b[i + 1] = (lc_subblock){a->b[i].addr + want, a->b[i].bytes - want, a->b[i].chunk, 0};
    a->b[i].bytes = want;
    a->n++;
  }
  a->b[i].used = 1;
  a->used += a->b[i].bytes;
  *addr = a->b[i].addr;
  return LC_OK;
}

static void drop(lc_suballoc *a, int i) {
  memmove(&a->b[i], &a->b[i + 1], sizeof *a->b * (size_t)(a->n - i - 1));
  a->n--;
}

lc_status lc_suballoc_put(lc_suballoc *a, uint64_t addr) {
  int i = 0;
  while (i < a->n && !(a->b[i].addr == addr && a->b[i].used)) i++;
  if (i == a->n) return lc_fail(LC_EINVAL, "internal: the device allocator was handed an address it did not give out");
  a->b[i].used = 0;
  a->used -= a->b[i].bytes;
  // merge with free neighbours of the same chunk (blocks of a chunk are adjacent in the list)
  if (i + 1 < a->n && !a->b[i + 1].used && a->b[i + 1].chunk == a->b[i].chunk) {
    a->b[i].bytes += a->b[i + 1].bytes;
    drop(a, i + 1);
  }
  if (i > 0 && !a->b[i - 1].used && a->b[i - 1].chunk == a->b[i].chunk) {
    a->b[i - 1].bytes += a->b[i].bytes;
    drop(a, i);
  }
  return LC_OK;
}

size_t lc_suballoc_trim(lc_suballoc *a) {
  size_t freed = 0;
  for (int i = 0; i < a->n;) {
    const int ch = a->b[i].chunk;
    // a chunk is free when it is one free block as large as the chunk
    if (!a->b[i].used && a->b[i].bytes == a->c[ch].bytes && a->c[ch].bytes) {
      a->src.put(a->src.ctx, a->c[ch].addr, a->c[ch].bytes);
      freed += a->c[ch].bytes;
      a->held -= a->c[ch].bytes;
      a->c[ch].bytes = 0; // the slot stays (indices of other chunks' blocks keep meaning)
      drop(a, i);
      continue;
    }
    i++;
  }
  return freed;
}

void lc_suballoc_destroy(lc_suballoc *a) {
  for (int j = 0; j < a->nc; j++)
    if (a->c[j].bytes) a->src.put(a->src.ctx, a->c[j].addr, a->c[j].bytes);
  free(a->b);
  free(a->c);
  memset(a, 0, sizeof *a);
}

size_t lc_suballoc_largest_free(const lc_suballoc *a) {
  size_t m = 0;
  for (int i = 0; i < a->n; i++)
    if (!a->b[i].used && a->b[i].bytes > m) m = a->b[i].bytes;
  return m;
}
