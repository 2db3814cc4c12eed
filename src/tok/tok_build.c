// Building a tokenizer (tok_internal.h): the id space and its strings, the model's maps,
// merges and added tokens. Both loaders (tok_json.c, tok_vocab.c) go through these.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok_internal.h"
#include "tok/unicode.h"

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68
// bytes for U+0100.. in byte order.
static int printable_byte(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

uint32_t lc_bytelevel_char(unsigned char b) {
  if (printable_byte(b)) return b;
  uint32_t k = 0;
  for (unsigned x = 0; x < b; x++) k += !printable_byte(x);
  return 256 + k;
}

int lc_bytelevel_byte(uint32_t cp) {
  if (cp < 256) return printable_byte(cp) ? (int)cp : -1;
  if (cp >= 256 + 68) return -1;
  uint32_t k = cp - 256;
  for (unsigned x = 0; x < 256; x++)
    if (!printable_byte(x) && k-- == 0) return (int)x;
  return -1;
}

const char *lc_tok_disp(const char *s, size_t n, char *buf, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < n && o + 8 < cap; i++) {
    const unsigned char c = (unsigned char)s[i];
    if (o > 48) {
      memcpy(buf + o, "...", 3);
      o += 3;
      break;
    }
    if (c == '\n') o += (size_t)snprintf(buf + o, cap - o, "\\n");
    else if (c < 0x20 || c == 0x7f) o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
    else buf[o++] = (char)c;
  }
  buf[o < cap ? o : cap - 1] = 0;
  return buf;
}

const char *lc_tok_show(const char *s) {
  static _Thread_local char buf[4][80];
  static _Thread_local int k;
  char *b = buf[k++ & 3];
  return lc_tok_disp(s, strlen(s), b, sizeof buf[0]);
}

lc_status lc_tokb_new(lc_tokenizer **out, const char *label) {
  lc_tokenizer *t = calloc(1, sizeof *t);
  if (!t) return lc_fail(LC_ENOMEM, "tokenizer: out of memory");
  snprintf(t->label, sizeof t->label, "%s", label ? label : "tokenizer");
  if (lc_tbuf_reserve(&t->str_pool, 4096) != LC_OK) { // never NULL, even for empty strings
    free(t);
    return lc_fail(LC_ENOMEM, "tokenizer: out of memory");
  }
  t->unk = t->bos = t->eos = -1;
  for (int b = 0; b < 256; b++) t->byte_sym[b] = t->byte_tok[b] = -1;
  *out = t;
  return LC_OK;
}

static lc_status ensure_id(lc_tokenizer *t, int32_t id, const char *where) {
  if (id < 0 || id > LC_TOK_MAX_ID)
    return lc_fail(LC_EFORMAT, "%s: %s has id %ld, outside 0..%d; the file is damaged", t->label, where, (long)id,
                   LC_TOK_MAX_ID);
  if ((size_t)id < t->ids_cap) {
    if (id >= t->n_ids) t->n_ids = id + 1;
    return LC_OK;
  }
  size_t cap = t->ids_cap ? t->ids_cap : 1024;
  while (cap <= (size_t)id) cap *= 2;
  uint64_t *off = realloc(t->str_off, cap * sizeof *off);
  if (off) t->str_off = off;
  uint32_t *len = realloc(t->str_len, cap * sizeof *len);
  if (len) t->str_len = len;
  unsigned char *has = realloc(t->has, cap);
  if (has) t->has = has;
  int32_t *ao = realloc(t->added_of, cap * sizeof *ao);
  if (ao) t->added_of = ao;
  if (!off || !len || !has || !ao) return lc_fail(LC_ENOMEM, "%s: out of memory for %zu token ids", t->label, cap);
  memset(t->has + t->ids_cap, 0, cap - t->ids_cap);
  for (size_t i = t->ids_cap; i < cap; i++) t->added_of[i] = -1;
  t->ids_cap = cap;
  if (id >= t->n_ids) t->n_ids = id + 1;
  return LC_OK;
}

lc_status lc_tokb_set_str(lc_tokenizer *t, int32_t id, const char *s, size_t n, int replace, const char *where) {
  LC_TRY(ensure_id(t, id, where));
  if ((t->has[id] & 1) && !replace) {
    char a[64], b[64];
    return lc_fail(LC_EFORMAT, "%s: %s gives id %ld to '%s', which already belongs to '%s'; the file is damaged",
                   t->label, where, (long)id, lc_tok_disp(s, n, a, sizeof a),
                   lc_tok_disp(t->str_pool.p + t->str_off[id], t->str_len[id], b, sizeof b));
  }
  if (n > 65536) return lc_fail(LC_EFORMAT, "%s: %s is a token of %zu bytes (at most 65536)", t->label, where, n);
  if (lc_utf8_check(s, n) != n) return lc_fail(LC_EFORMAT, "%s: %s is not valid UTF-8", t->label, where);
  t->str_off[id] = t->str_pool.n;
  t->str_len[id] = (uint32_t)n;
  t->has[id] |= 1;
  return lc_tbuf_put(&t->str_pool, s, n);
}

int lc_tokb_model_key(const lc_tokenizer *t, const char *s, size_t n, lc_tbuf *key) {
  key->n = 0;
  if (!t->byte_level) return lc_tbuf_put(key, s, n) == LC_OK;
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    i += (size_t)lc_utf8_dec(u + i, n - i, &cp);
    const int b = lc_bytelevel_byte(cp);
    if (b < 0) return 0;
    const unsigned char c = (unsigned char)b;
    if (lc_tbuf_put(key, &c, 1) != LC_OK) return 0;
  }
  return 1;
}

lc_status lc_tokb_index_vocab(lc_tokenizer *t) {
  lc_tbuf key = {0};
  lc_status st = LC_OK;
  for (int32_t id = 0; id < t->n_ids && st == LC_OK; id++) {
    if (!(t->has[id] & 1)) continue;
    const char *s = t->str_pool.p + t->str_off[id];
    const size_t n = t->str_len[id];
    st = lc_smap_put(&t->spelled, s, n, id, 1, NULL);
    if (st == LC_OK && t->byte_level && lc_tokb_model_key(t, s, n, &key)) st = lc_smap_put(&t->vocab, key.p, key.n, id, 1, NULL);
  }
  lc_tbuf_free(&key);
  LC_TRY(st);
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    t->byte_tok[b] = lc_smap_get(&t->spelled, name, 6);
    const unsigned char c = (unsigned char)b;
    t->byte_sym[b] = t->byte_level ? lc_smap_get(&t->vocab, (const char *)&c, 1) : -1;
  }
  return LC_OK;
}

lc_status lc_tokb_add_merge(lc_tokenizer *t, const char *a, size_t an, const char *b, size_t bn, int32_t rank,
                            const char *where) {
  const int32_t ia = lc_smap_get(&t->spelled, a, an), ib = lc_smap_get(&t->spelled, b, bn);
  char d[64];
  if (ia < 0 || ib < 0)
    return lc_fail(LC_EFORMAT, "%s: %s names '%s', which is not in the vocabulary; the merges do not belong to this vocabulary",
                   t->label, where, ia < 0 ? lc_tok_disp(a, an, d, sizeof d) : lc_tok_disp(b, bn, d, sizeof d));
  lc_tbuf ab = {0};
  lc_status st = lc_tbuf_put(&ab, a, an);
  if (st == LC_OK) st = lc_tbuf_put(&ab, b, bn);
  const int32_t im = st == LC_OK ? lc_smap_get(&t->spelled, ab.p, ab.n) : -1;
  if (st == LC_OK && im < 0)
    st = lc_fail(LC_EFORMAT, "%s: %s makes '%s', which is not in the vocabulary; the merges do not belong to this vocabulary",
                 t->label, where, lc_tok_disp(ab.p, ab.n, d, sizeof d));
  lc_tbuf_free(&ab);
  LC_TRY(st);
  LC_TRY(lc_pmap_put(&t->merges, (uint32_t)ia, (uint32_t)ib, (uint32_t)rank, (uint32_t)im));
  t->n_merges++;
  return LC_OK;
}

lc_status lc_tokb_add_token(lc_tokenizer *t, const lc_added_tok *a) {
  char where[96], d[64];
  snprintf(where, sizeof where, "added token '%s'", lc_tok_disp(a->content, a->len, d, sizeof d));
  LC_TRY(ensure_id(t, a->id, where));
  if (!a->len) return lc_fail(LC_EFORMAT, "%s: an added token (id %ld) is empty", t->label, (long)a->id);
  if (lc_utf8_check(a->content, a->len) != a->len) return lc_fail(LC_EFORMAT, "%s: %s is not valid UTF-8", t->label, where);
  if (t->n_added >= LC_TOK_MAX_ID) return lc_fail(LC_EFORMAT, "%s: too many added tokens", t->label);
  lc_added_tok *na = realloc(t->added, (size_t)(t->n_added + 1) * sizeof *na);
  if (!na) return lc_fail(LC_ENOMEM, "%s: out of memory for added tokens", t->label);
  t->added = na;
  lc_added_tok *x = &t->added[t->n_added];
  *x = *a;
  x->shown = NULL;
  x->content = malloc(a->len + 1);
  if (!x->content) return lc_fail(LC_ENOMEM, "%s: out of memory for added tokens", t->label);
  memcpy(x->content, a->content, a->len);
  x->content[a->len] = 0;
  t->added_of[a->id] = t->n_added++;
  t->has[a->id] |= 2;
  return lc_smap_put(&t->added_ids, a->content, a->len, a->id, 1, NULL);
}

static void describe(lc_tokenizer *t) {
  static const char *pat[] = {"", "GPT-2", "Llama-3", "Qwen2"};
  char pre[200] = "", norm[100] = "", *p = pre;
  for (int i = 0; i < t->n_pre; i++) {
    const lc_pre_step *s = &t->pre[i];
    const size_t room = sizeof pre - (size_t)(p - pre);
    const char *sep = i ? "+" : "";
    int w = 0;
    if (s->kind == LC_PRE_BYTELEVEL) w = snprintf(p, room, "%sByteLevel%s", sep, s->use_regex ? "(GPT-2)" : "");
    else if (s->kind == LC_PRE_SPLIT) w = snprintf(p, room, "%sSplit(%s)", sep, pat[s->pattern]);
    else if (s->kind == LC_PRE_DIGITS) w = snprintf(p, room, "%sDigits", sep);
    else w = snprintf(p, room, "%sMetaspace", sep);
    if (w > 0 && (size_t)w < room) p += w;
  }
  p = norm;
  for (int i = 0; i < t->n_norm; i++) {
    static const char *nn[] = {"", "NFC", "Prepend", "Replace"};
    const size_t room = sizeof norm - (size_t)(p - norm);
    const int w = snprintf(p, room, "%s%s", i ? "+" : "", nn[t->norm[i].kind]);
    if (w > 0 && (size_t)w < room) p += w;
  }
  snprintf(t->describe, sizeof t->describe, "%s BPE%s, %ld ids, %ld merges%s%s%s%s, %d added tokens%s",
           t->byte_level ? "byte-level" : "SentencePiece-style", t->byte_fallback ? " with byte fallback" : "",
           (long)t->vocab_size, (long)t->n_merges, norm[0] ? ", normalizer " : "", norm, pre[0] ? ", pre-tokenizer " : "",
           pre, t->n_added, t->n_pre_ids ? ", adds BOS" : "");
}

static const char RUN[] = "\xe2\x96\x81"; // U+2581, SentencePiece's space

static int ends_with_run(const char *s, size_t n) { return n >= 3 && !memcmp(s + n - 3, RUN, 3); }

// split_runs (tok_internal.h): checked over every merge.
static void find_split_runs(lc_tokenizer *t) {
  t->split_runs = 0;
  if (t->byte_level || t->ignore_merges || lc_smap_get(&t->spelled, RUN, 3) < 0 || !t->merges.key) return;
  for (size_t i = 0; i <= t->merges.mask; i++) {
    const uint64_t k = t->merges.key[i];
    if (k == UINT64_MAX) continue;
    const uint32_t a = (uint32_t)(k >> 32), b = (uint32_t)k;
    if (!(t->has[a] & 1) || !(t->has[b] & 1)) return;
    const char *sa = t->str_pool.p + t->str_off[a], *sb = t->str_pool.p + t->str_off[b];
    if (!ends_with_run(sa, t->str_len[a]) && t->str_len[b] >= 3 && !memcmp(sb, RUN, 3)) return;
  }
  t->split_runs = 1;
}

lc_status lc_tokb_finish(lc_tokenizer *t) {
  find_split_runs(t);
  if (!t->n_ids) return lc_fail(LC_EFORMAT, "%s: the vocabulary is empty", t->label);
  int32_t count = 0;
  for (int32_t id = 0; id < t->n_ids; id++) count += (t->has[id] & 1) != 0;
  for (int k = 0; k < t->n_added; k++)
    if (lc_smap_get(&t->spelled, t->added[k].content, t->added[k].len) < 0 && t->added_of[t->added[k].id] == k) count++;
  t->vocab_size = count;
  LC_TRY(lc_trie_build(&t->trie_raw, t, 0));
  LC_TRY(lc_trie_build(&t->trie_norm, t, 1));
  // tokenizers spells a normalized added token by its normalized content (id_to_token,
  // decode) but finds it by its content (token_to_id).
  for (int k = 0; k < t->n_added && t->n_norm; k++) {
    lc_added_tok *a = &t->added[k];
    if (!a->normalized) continue;
    lc_tbuf p = {0};
    LC_TRY(lc_tok_normalize(t, a->content, a->len, &p));
    LC_TRY(lc_tbuf_nul(&p));
    a->shown = p.p;
    a->shown_len = p.n;
  }
  describe(t);
  return LC_OK;
}
