// The BPE model on one word, as tokenizers' BPE::merge_word + Word::merge_all: the word's
// characters (bytes, for byte-level) become symbols (their vocabulary ids; unknown ones
// fall back to "<0xAB>" byte tokens, else to the unk token, fused if fuse_unk, else are
// dropped), then the adjacent pair with the lowest merge rank (the leftmost among equal
// ranks) is merged until no pair has a merge. A min-heap of (rank, position) drives it;
// entries made stale by an earlier merge are skipped. Words already seen come from a cache.
#include <string.h>

#include "tok/tok_internal.h"
#include "tok/unicode.h"

typedef struct lc_bpe_sym sym_t;

lc_status lc_tok_ids_push(lc_tok_ids *o, const int32_t *ids, size_t n) {
  if (!n) return LC_OK;
  if (o->cap - o->n < n) LC_TRY(lc_tgrow((void **)&o->v, &o->cap, o->n + n, sizeof *o->v));
  memcpy(o->v + o->n, ids, n * sizeof *ids);
  o->n += n;
  return LC_OK;
}

static inline void heap_push(uint64_t *h, size_t *n, uint64_t x) {
  size_t i = (*n)++;
  while (i > 0) {
    const size_t p = (i - 1) / 2;
    if (h[p] <= x) break;
    h[i] = h[p];
    i = p;
  }
  h[i] = x;
}

static inline uint64_t heap_pop(uint64_t *h, size_t *n) {
  const uint64_t top = h[0], x = h[--(*n)];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && h[c + 1] < h[c]) c++;
    if (h[c] >= x) break;
    h[i] = h[c];
    i = c;
  }
  if (*n) h[i] = x;
  return top;
}

static inline void try_pair(const lc_tokenizer *t, const sym_t *sym, int32_t pos, uint64_t *heap, size_t *hn) {
  const int32_t nx = sym[pos].next;
  if (nx < 0) return;
  uint32_t rank, id;
  if (lc_pmap_get(&t->merges, (uint32_t)sym[pos].id, (uint32_t)sym[nx].id, &rank, &id))
    heap_push(heap, hn, (uint64_t)rank << 32 | (uint32_t)pos);
}

// Symbols of w into t->sym; returns their count.
static lc_status symbols(lc_tokenizer *t, const unsigned char *w, size_t n, int32_t *count) {
  if (n > INT32_MAX / 4) return lc_fail(LC_EINVAL, "%s: a word of %zu bytes is too long to encode", t->label, n);
  LC_TRY(lc_tgrow((void **)&t->sym, &t->sym_cap, n + 1, sizeof *t->sym));
  sym_t *sym = t->sym;
  int32_t m = 0, unk_len = 0;
  int unk_pending = 0;
  for (size_t i = 0; i < n;) {
    if (t->sym_cap - (size_t)m < 8) { // room for one character's symbols (byte fallback: up to 4) and an unk
      LC_TRY(lc_tgrow((void **)&t->sym, &t->sym_cap, (size_t)m + 8, sizeof *t->sym));
      sym = t->sym;
    }
    int32_t id;
    size_t len;
    char fb[8]; // the character's bytes for the byte fallback
    size_t fbn;
    if (t->byte_level) {
      len = 1;
      id = t->byte_sym[w[i]];
      fbn = (size_t)lc_utf8_enc(lc_bytelevel_char(w[i]), fb);
    } else {
      len = (size_t)lc_utf8_len(w[i]);
      if (len > n - i) len = n - i;
      id = lc_smap_get(&t->spelled, (const char *)w + i, len);
      memcpy(fb, w + i, len);
      fbn = len;
    }
    i += len;
    if (id >= 0) {
      if (unk_pending) {
        sym[m++] = (sym_t){t->unk, 0, 0, unk_len};
        unk_pending = 0;
      }
      sym[m++] = (sym_t){id, 0, 0, (int32_t)len};
      continue;
    }
    if (t->byte_fallback) {
      size_t k = 0;
      while (k < fbn && t->byte_tok[(unsigned char)fb[k]] >= 0) k++;
      if (k == fbn) {
        for (k = 0; k < fbn; k++) sym[m++] = (sym_t){t->byte_tok[(unsigned char)fb[k]], 0, 0, 1};
        continue;
      }
    }
    if (t->unk >= 0) {
      if (unk_pending && t->fuse_unk) {
        unk_len += (int32_t)len;
      } else {
        if (unk_pending) sym[m++] = (sym_t){t->unk, 0, 0, unk_len};
        unk_pending = 1;
        unk_len = (int32_t)len;
      }
    }
  }
  if (unk_pending) sym[m++] = (sym_t){t->unk, 0, 0, unk_len};
  for (int32_t k = 0; k < m; k++) {
    sym[k].prev = k - 1;
    sym[k].next = k + 1 < m ? k + 1 : -1;
  }
  *count = m;
  return LC_OK;
}

static lc_status merge_word(lc_tokenizer *t, const char *w, size_t n, lc_ids32 *res) {
  res->n = 0;
  if (t->ignore_merges) {
    const int32_t id = lc_smap_get(t->byte_level ? &t->vocab : &t->spelled, w, n);
    if (id >= 0) {
      LC_TRY(lc_tgrow((void **)&res->v, &res->cap, 1, sizeof *res->v));
      res->v[res->n++] = id;
      return LC_OK;
    }
  }
  int32_t m = 0;
  LC_TRY(symbols(t, (const unsigned char *)w, n, &m));
  LC_TRY(lc_tgrow((void **)&t->heap, &t->heap_cap, (size_t)m + 2, sizeof *t->heap));
  sym_t *sym = t->sym;
  uint64_t *heap = t->heap;
  size_t hn = 0;
  for (int32_t k = 0; k + 1 < m; k++) try_pair(t, sym, k, heap, &hn);
  while (hn) {
    const uint64_t top = heap_pop(heap, &hn);
    const int32_t pos = (int32_t)(uint32_t)top;
    const uint32_t want = (uint32_t)(top >> 32);
    if (!sym[pos].len) continue; // merged into its left neighbour
    const int32_t nx = sym[pos].next;
    if (nx < 0) continue;
    uint32_t rank, id;
    if (!lc_pmap_get(&t->merges, (uint32_t)sym[pos].id, (uint32_t)sym[nx].id, &rank, &id) || rank != want)
      continue; // stale: the pair changed since it was pushed
    sym[pos].id = (int32_t)id;
    sym[pos].len += sym[nx].len;
    sym[nx].len = 0;
    sym[pos].next = sym[nx].next;
    if (sym[pos].next >= 0) sym[sym[pos].next].prev = pos;
    if (hn + 2 > t->heap_cap) {
      LC_TRY(lc_tgrow((void **)&t->heap, &t->heap_cap, hn + 2, sizeof *t->heap));
      heap = t->heap;
    }
    if (sym[pos].prev >= 0) try_pair(t, sym, sym[pos].prev, heap, &hn);
    try_pair(t, sym, pos, heap, &hn);
  }
  LC_TRY(lc_tgrow((void **)&res->v, &res->cap, (size_t)m + 1, sizeof *res->v));
  for (int32_t k = m ? 0 : -1; k >= 0; k = sym[k].next) res->v[res->n++] = sym[k].id;
  return LC_OK;
}

enum { CACHE_WORD_MAX = 256 };

static lc_status bpe_piece(lc_tokenizer *t, const char *w, size_t n, lc_tok_ids *out);

lc_status lc_tok_bpe(lc_tokenizer *t, const char *w, size_t n, lc_tok_ids *out) {
  if (!t->split_runs) return bpe_piece(t, w, n, out);
  // Cut before every U+2581 that follows another character (tok_internal.h: split_runs).
  size_t start = 0;
  for (size_t i = 3; i + 3 <= n; i++) {
    if ((unsigned char)w[i] != 0xE2 || memcmp(w + i, "\xe2\x96\x81", 3)) continue;
    if (!memcmp(w + i - 3, "\xe2\x96\x81", 3)) continue; // the run goes on
    LC_TRY(bpe_piece(t, w + start, i - start, out));
    start = i;
    i += 2;
  }
  return bpe_piece(t, w + start, n - start, out);
}

static lc_status bpe_piece(lc_tokenizer *t, const char *w, size_t n, lc_tok_ids *out) {
  if (!n) return LC_OK;
  uint64_t h = 0;
  if (n <= CACHE_WORD_MAX) {
    h = lc_thash(w, n);
    size_t k;
    const int32_t *hit = lc_tcache_get(&t->cache, w, n, h, &k);
    if (hit) return lc_tok_ids_push(out, hit, k);
  }
  LC_TRY(merge_word(t, w, n, &t->word_ids));
  if (n <= CACHE_WORD_MAX) LC_TRY(lc_tcache_put(&t->cache, w, n, h, t->word_ids.v, t->word_ids.n));
  return lc_tok_ids_push(out, t->word_ids.v, t->word_ids.n);
}
