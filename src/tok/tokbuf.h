// Growing buffers of bytes and of token ids for the tokenizer (src/tok/), and the string
// hash its maps use.
#ifndef LC_TOK_TOKBUF_H
#define LC_TOK_TOKBUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/status.h"

typedef struct {
  char *p;
  size_t n, cap;
} lc_tbuf;

// Room for `extra` more bytes (LC_ENOMEM with a message if it cannot grow).
lc_status lc_tbuf_reserve(lc_tbuf *b, size_t extra);
static inline lc_status lc_tbuf_put(lc_tbuf *b, const void *s, size_t n) {
  if (b->cap - b->n < n) LC_TRY(lc_tbuf_reserve(b, n));
  if (n) memcpy(b->p + b->n, s, n);
  b->n += n;
  return LC_OK;
}
// Writes a NUL after the bytes (not counted in n).
static inline lc_status lc_tbuf_nul(lc_tbuf *b) {
  if (b->cap - b->n < 1) LC_TRY(lc_tbuf_reserve(b, 1));
  b->p[b->n] = 0;
  return LC_OK;
}
void lc_tbuf_free(lc_tbuf *b);

// Grows an array of elements of size `elem` so that it holds at least `need` (LC_ENOMEM).
lc_status lc_tgrow(void **p, size_t *cap, size_t need, size_t elem);

// 64-bit hash of a byte string (multiply-xorshift over 8-byte words; not cryptographic).
static inline uint64_t lc_thash(const void *p, size_t n) {
  const unsigned char *s = p;
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
  while (n >= 8) {
    uint64_t w;
    memcpy(&w, s, 8);
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
    s += 8;
    n -= 8;
  }
  uint64_t w = 0;
  if (n) memcpy(&w, s, n);
  h = (h ^ w) * 0x94d049bb133111ebull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 32);
}

#endif
