#include "core/hash.h"

#include <string.h>

#define K1 0x9e3779b97f4a7c15ull
#define K2 0xc2b2ae3d27d4eb4full

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t round64(uint64_t acc, uint64_t w) { return rotl(acc ^ (w * K2), 31) * K1; }

static uint64_t load_le(const unsigned char *p) {
  uint64_t w = 0;
  for (int i = 7; i >= 0; i--) w = (w << 8) | p[i];
  return w;
}

void lc_hash64_init(lc_hash64 *h) {
  memset(h, 0, sizeof *h);
  h->acc = 0x27d4eb2f165667c5ull;
}

void lc_hash64_update(lc_hash64 *h, const void *data, size_t n) {
  const unsigned char *p = data;
  h->len += n;
  while (n > 0 && h->ntail > 0) { // finish a partial word first
    h->tail[h->ntail++] = *p++, n--;
    if (h->ntail == 8) h->acc = round64(h->acc, load_le(h->tail)), h->ntail = 0;
  }
  for (; n >= 8; p += 8, n -= 8) h->acc = round64(h->acc, load_le(p));
  while (n > 0) h->tail[h->ntail++] = *p++, n--;
}

uint64_t lc_hash64_final(const lc_hash64 *h) {
  uint64_t acc = h->acc;
  if (h->ntail) {
    unsigned char w[8] = {0};
    memcpy(w, h->tail, (size_t)h->ntail);
    acc = round64(acc, load_le(w));
  }
  uint64_t z = acc ^ h->len;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t lc_hash64_of(const void *data, size_t n) {
  lc_hash64 h;
  lc_hash64_init(&h);
  lc_hash64_update(&h, data, n);
  return lc_hash64_final(&h);
}
