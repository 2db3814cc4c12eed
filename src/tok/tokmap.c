// The hash maps of the tokenizer (tokmap.h).
#include "tok/tokmap.h"

#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------- strings -> ids

static lc_status smap_rehash(lc_smap *m, size_t slots) {
  int32_t *s = malloc(slots * sizeof *s);
  if (!s) return lc_fail(LC_ENOMEM, "tokenizer: out of memory for a table of %zu entries", slots);
  memset(s, 0xff, slots * sizeof *s);
  for (size_t e = 0; e < m->n; e++) {
    size_t i = (size_t)lc_thash(m->pool.p + m->ent[e].off, m->ent[e].len) & (slots - 1);
    while (s[i] >= 0) i = (i + 1) & (slots - 1);
    s[i] = (int32_t)e;
  }
  free(m->slot);
  m->slot = s;
  m->mask = slots - 1;
  return LC_OK;
}

static long smap_find(const lc_smap *m, const char *key, size_t len) {
  if (!m->slot) return -1;
  if (!key) key = ""; // an empty key from an empty buffer
  for (size_t i = (size_t)lc_thash(key, len) & m->mask;; i = (i + 1) & m->mask) {
    const int32_t e = m->slot[i];
    if (e < 0) return -1;
    if (m->ent[e].len == len && !memcmp(m->pool.p + m->ent[e].off, key, len)) return e;
  }
}

lc_status lc_smap_put(lc_smap *m, const char *key, size_t len, int32_t val, int overwrite, int *existed) {
  if (!key) key = "";
  const long e = smap_find(m, key, len);
  if (existed) *existed = e >= 0;
  if (e >= 0) {
    if (overwrite) m->ent[e].val = val;
    return LC_OK;
  }
  if (len > UINT32_MAX || m->n >= INT32_MAX) return lc_fail(LC_EINVAL, "tokenizer: a token of %zu bytes is too long", len);
  if (!m->slot || (m->n + 1) * 2 > m->mask + 1) LC_TRY(smap_rehash(m, m->slot ? (m->mask + 1) * 2 : 64));
  if (!m->pool.p) LC_TRY(lc_tbuf_reserve(&m->pool, 256)); // never NULL, even for empty keys
  LC_TRY(lc_tgrow((void **)&m->ent, &m->cap, m->n + 1, sizeof *m->ent));
  m->ent[m->n] = (struct lc_smap_ent){m->pool.n, (uint32_t)len, val};
  LC_TRY(lc_tbuf_put(&m->pool, key, len));
  size_t i = (size_t)lc_thash(key, len) & m->mask;
  while (m->slot[i] >= 0) i = (i + 1) & m->mask;
  m->slot[i] = (int32_t)m->n++;
  return LC_OK;
}

int32_t lc_smap_get(const lc_smap *m, const char *key, size_t len) {
  const long e = smap_find(m, key, len);
  return e < 0 ? -1 : m->ent[e].val;
}

void lc_smap_free(lc_smap *m) {
  lc_tbuf_free(&m->pool);
  free(m->ent);
  free(m->slot);
  memset(m, 0, sizeof *m);
}

// ---------------------------------------------------------------- pairs -> merges

lc_status lc_pmap_init(lc_pmap *m, size_t expect) {
  size_t slots = 64;
  while (slots < expect * 2 + 2) slots *= 2;
  m->key = malloc(slots * sizeof *m->key);
  m->val = malloc(slots * sizeof *m->val);
  if (!m->key || !m->val) {
    free(m->key);
    free(m->val);
    m->key = m->val = NULL;
    return lc_fail(LC_ENOMEM, "tokenizer: out of memory for %zu merges", expect);
  }
  memset(m->key, 0xff, slots * sizeof *m->key);
  m->mask = slots - 1;
  m->n = 0;
  return LC_OK;
}

lc_status lc_pmap_put(lc_pmap *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t id) {
  if (!m->key || (m->n + 1) * 2 > m->mask + 1) {
    lc_pmap old = *m;
    LC_TRY(lc_pmap_init(m, old.key ? old.mask + 1 : 32));
    for (size_t i = 0; old.key && i <= old.mask; i++)
      if (old.key[i] != UINT64_MAX) LC_TRY(lc_pmap_put(m, (uint32_t)(old.key[i] >> 32), (uint32_t)old.key[i], (uint32_t)(old.val[i] >> 32), (uint32_t)old.val[i]));
    free(old.key);
    free(old.val);
  }
  const uint64_t k = (uint64_t)a << 32 | b;
  const uint64_t h = k * 0x9E3779B97F4A7C15ull;
  size_t i = (size_t)(h >> 32) & m->mask;
  while (m->key[i] != UINT64_MAX && m->key[i] != k) i = (i + 1) & m->mask;
  if (m->key[i] == UINT64_MAX) m->n++;
  m->key[i] = k;
  m->val[i] = (uint64_t)rank << 32 | id;
  return LC_OK;
}

void lc_pmap_free(lc_pmap *m) {
  free(m->key);
  free(m->val);
  memset(m, 0, sizeof *m);
}

// ---------------------------------------------------------------- word cache

enum { CACHE_MAX_WORDS = 1 << 17, CACHE_MAX_BYTES = 16 << 20 };

static void tcache_clear(lc_tcache *c) {
  c->keys.n = 0;
  c->n_ids = 0;
  c->n = 0;
  if (c->slot) memset(c->slot, 0, (c->mask + 1) * sizeof *c->slot);
}

const int32_t *lc_tcache_get(const lc_tcache *c, const char *w, size_t len, uint64_t hash, size_t *n_ids) {
  if (!c->slot) return NULL;
  for (size_t i = (size_t)hash & c->mask;; i = (i + 1) & c->mask) {
    const uint32_t e = c->slot[i];
    if (!e) return NULL;
    const struct lc_tcache_ent *x = &c->ent[e - 1];
    if (x->hash == hash && x->klen == len && !memcmp(c->keys.p + x->koff, w, len)) {
      static const int32_t none[1];
      *n_ids = x->ilen;
      return x->ilen ? c->ids + x->ioff : none; // a word of dropped characters has no ids
    }
  }
}

lc_status lc_tcache_put(lc_tcache *c, const char *w, size_t len, uint64_t hash, const int32_t *ids, size_t n_ids) {
  if (!c->slot) {
    const size_t slots = (size_t)CACHE_MAX_WORDS * 2;
    c->slot = calloc(slots, sizeof *c->slot);
    if (!c->slot) return lc_fail(LC_ENOMEM, "tokenizer: out of memory for the word cache");
    c->mask = slots - 1;
  }
  if (c->n >= CACHE_MAX_WORDS || c->keys.n + len > CACHE_MAX_BYTES || c->n_ids + n_ids > CACHE_MAX_BYTES / 4) tcache_clear(c);
  LC_TRY(lc_tgrow((void **)&c->ent, &c->cap, c->n + 1, sizeof *c->ent));
  LC_TRY(lc_tgrow((void **)&c->ids, &c->cap_ids, c->n_ids + n_ids, sizeof *c->ids));
  c->ent[c->n] = (struct lc_tcache_ent){hash, (uint32_t)c->keys.n, (uint32_t)len, (uint32_t)c->n_ids, (uint32_t)n_ids};
  LC_TRY(lc_tbuf_put(&c->keys, w, len));
  if (n_ids) memcpy(c->ids + c->n_ids, ids, n_ids * sizeof *ids);
  c->n_ids += n_ids;
  size_t i = (size_t)hash & c->mask;
  while (c->slot[i]) i = (i + 1) & c->mask;
  c->slot[i] = (uint32_t)++c->n;
  return LC_OK;
}

void lc_tcache_free(lc_tcache *c) {
  lc_tbuf_free(&c->keys);
  free(c->ids);
  free(c->ent);
  free(c->slot);
  memset(c, 0, sizeof *c);
}
