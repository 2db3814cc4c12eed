// Hash maps of the tokenizer: strings to ids (the vocabulary, added tokens), token pairs to
// merges (BPE), and the cache of words already encoded. Open addressing, linear probing,
// power-of-two tables kept at most half full.
#ifndef LC_TOK_TOKMAP_H
#define LC_TOK_TOKMAP_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "tok/tokbuf.h"

// Byte string -> int32 value. Keys are copied into the map's own pool.
typedef struct {
  lc_tbuf pool;
  struct lc_smap_ent {
    uint64_t off;
    uint32_t len;
    int32_t val;
  } *ent;
  size_t n, cap;
  int32_t *slot; // entry index, -1 empty
  size_t mask;
} lc_smap;

// Inserts or finds key: *val_io in: the value to store; out: the value now stored. With
// overwrite, an existing key takes the new value (*existed says whether it was there).
lc_status lc_smap_put(lc_smap *m, const char *key, size_t len, int32_t val, int overwrite, int *existed);
int32_t lc_smap_get(const lc_smap *m, const char *key, size_t len); // -1 if absent
void lc_smap_free(lc_smap *m);

// (left id, right id) -> (rank, merged id).
typedef struct {
  uint64_t *key; // (a << 32 | b), UINT64_MAX empty
  uint64_t *val; // rank << 32 | merged id
  size_t n, mask;
} lc_pmap;

lc_status lc_pmap_init(lc_pmap *m, size_t expect);
// Later puts of the same pair replace earlier ones (as tokenizers' merge map does).
lc_status lc_pmap_put(lc_pmap *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t id);
static inline int lc_pmap_get(const lc_pmap *m, uint32_t a, uint32_t b, uint32_t *rank, uint32_t *id) {
  if (!m->key) return 0;
  const uint64_t k = (uint64_t)a << 32 | b;
  uint64_t h = k * 0x9E3779B97F4A7C15ull;
  for (size_t i = (size_t)(h >> 32) & m->mask;; i = (i + 1) & m->mask) {
    if (m->key[i] == k) {
      *rank = (uint32_t)(m->val[i] >> 32);
      *id = (uint32_t)m->val[i];
      return 1;
    }
    if (m->key[i] == UINT64_MAX) return 0;
  }
}
void lc_pmap_free(lc_pmap *m);

// Words already encoded: word bytes -> their ids. Emptied when it reaches its limits.
typedef struct {
  lc_tbuf keys;
  int32_t *ids;
  size_t n_ids, cap_ids;
  struct lc_tcache_ent {
    uint64_t hash;
    uint32_t koff, klen, ioff, ilen;
  } *ent;
  size_t n, cap;
  uint32_t *slot; // entry index + 1, 0 empty
  size_t mask;
} lc_tcache;

// The cached ids of a word (NULL if absent; valid until the next put).
const int32_t *lc_tcache_get(const lc_tcache *c, const char *w, size_t len, uint64_t hash, size_t *n_ids);
lc_status lc_tcache_put(lc_tcache *c, const char *w, size_t len, uint64_t hash, const int32_t *ids, size_t n_ids);
void lc_tcache_free(lc_tcache *c);

#endif
