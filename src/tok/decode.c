// Decoding, as tokenizers does it: ids -> token strings (added tokens' contents, the
// model's vocabulary strings; special ones left out on request) -> the decoder steps, each
// a function from a list of strings to a list of strings -> joined. And the streaming
// decoder of tokenizers' DecodeStream: decode the ids since the last emitted point and emit
// what grew, unless it ends in U+FFFD (an incomplete character).
#include <stdlib.h>
#include <string.h>

#include "tok/tok_internal.h"
#include "tok/unicode.h"

typedef struct {
  lc_tbuf pool;
  size_t *off, *len;
  size_t n, cap;
} strlist;

static lc_status sl_begin(strlist *l) { // starts a new string at the end of the pool
  if (l->n == l->cap) {
    const size_t cap = l->cap ? l->cap * 2 : 16;
    size_t *o = realloc(l->off, cap * sizeof *o);
    if (o) l->off = o;
    size_t *ln = o ? realloc(l->len, cap * sizeof *ln) : NULL;
    if (ln) l->len = ln;
    if (!o || !ln) return lc_fail(LC_ENOMEM, "tokenizer: out of memory decoding");
    l->cap = cap;
  }
  l->off[l->n] = l->pool.n;
  l->len[l->n] = 0;
  l->n++;
  return LC_OK;
}
static lc_status sl_add(strlist *l, const void *s, size_t n) { // appends to the last string
  LC_TRY(lc_tbuf_put(&l->pool, s, n));
  l->len[l->n - 1] += n;
  return LC_OK;
}
static void sl_free(strlist *l) {
  lc_tbuf_free(&l->pool);
  free(l->off);
  free(l->len);
  memset(l, 0, sizeof *l);
}
static const char *sl_str(const strlist *l, size_t i) { return l->pool.p ? l->pool.p + l->off[i] : ""; }

static lc_status step_bytelevel(const strlist *in, strlist *out) {
  lc_tbuf raw = {0};
  lc_status st = LC_OK;
  for (size_t i = 0; i < in->n && st == LC_OK; i++) {
    const unsigned char *s = (const unsigned char *)sl_str(in, i);
    const size_t n = in->len[i], at = raw.n;
    int mapped = 1;
    for (size_t k = 0; k < n && st == LC_OK;) {
      uint32_t cp;
      k += (size_t)lc_utf8_dec(s + k, n - k, &cp);
      const int b = lc_bytelevel_byte(cp);
      if (b < 0) {
        mapped = 0;
        break;
      }
      const unsigned char c = (unsigned char)b;
      st = lc_tbuf_put(&raw, &c, 1);
    }
    if (!mapped) { // a token outside the byte alphabet stands for its own UTF-8 bytes
      raw.n = at;
      st = lc_tbuf_put(&raw, s, n);
    }
  }
  if (st == LC_OK) st = sl_begin(out);
  if (st == LC_OK) {
    lc_tbuf fixed = {0};
    st = lc_utf8_lossy(&fixed, raw.p, raw.n);
    if (st == LC_OK) st = sl_add(out, fixed.p, fixed.n);
    lc_tbuf_free(&fixed);
  }
  lc_tbuf_free(&raw);
  return st;
}

static lc_status step_replace(const lc_dec_step *d, const strlist *in, strlist *out) {
  for (size_t i = 0; i < in->n; i++) {
    const char *s = sl_str(in, i);
    const size_t n = in->len[i];
    LC_TRY(sl_begin(out));
    size_t run = 0;
    for (size_t k = 0; k + d->an <= n;) {
      if (memcmp(s + k, d->a, d->an)) {
        k++;
        continue;
      }
      LC_TRY(sl_add(out, s + run, k - run));
      LC_TRY(sl_add(out, d->b, d->bn));
      k += d->an;
      run = k;
    }
    LC_TRY(sl_add(out, s + run, n - run));
  }
  return LC_OK;
}

static int hexv(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static lc_status flush_bytes(strlist *out, lc_tbuf *bytes) {
  if (!bytes->n) return LC_OK;
  if (lc_utf8_check(bytes->p, bytes->n) == bytes->n) {
    LC_TRY(sl_begin(out));
    LC_TRY(sl_add(out, bytes->p, bytes->n));
  } else {
    for (size_t k = 0; k < bytes->n; k++) {
      LC_TRY(sl_begin(out));
      LC_TRY(sl_add(out, "\xEF\xBF\xBD", 3));
    }
  }
  bytes->n = 0;
  return LC_OK;
}

// "<0xAB>" tokens in a row become their bytes: one string if valid UTF-8, else one U+FFFD
// per byte.
static lc_status step_bytefallback(const strlist *in, strlist *out) {
  lc_tbuf bytes = {0};
  lc_status st = LC_OK;
  for (size_t i = 0; i < in->n && st == LC_OK; i++) {
    const char *s = sl_str(in, i);
    if (in->len[i] == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' && hexv(s[3]) >= 0 && hexv(s[4]) >= 0) {
      const unsigned char b = (unsigned char)(hexv(s[3]) * 16 + hexv(s[4]));
      st = lc_tbuf_put(&bytes, &b, 1);
      continue;
    }
    st = flush_bytes(out, &bytes);
    if (st == LC_OK) st = sl_begin(out);
    if (st == LC_OK) st = sl_add(out, s, in->len[i]);
  }
  if (st == LC_OK) st = flush_bytes(out, &bytes);
  lc_tbuf_free(&bytes);
  return st;
}

static lc_status step_fuse(const strlist *in, strlist *out) {
  LC_TRY(sl_begin(out));
  for (size_t i = 0; i < in->n; i++) LC_TRY(sl_add(out, sl_str(in, i), in->len[i]));
  return LC_OK;
}

// Up to `start` leading and `stop` trailing copies of the character, per string.
static lc_status step_strip(const lc_dec_step *d, const strlist *in, strlist *out) {
  char c[4];
  const size_t cn = (size_t)lc_utf8_enc(d->ch, c);
  for (size_t i = 0; i < in->n; i++) {
    const char *s = sl_str(in, i);
    size_t a = 0, b = in->len[i];
    for (int k = 0; k < d->start && b - a >= cn && !memcmp(s + a, c, cn); k++) a += cn;
    for (int k = 0; k < d->stop && b - a >= cn && !memcmp(s + b - cn, c, cn); k++) b -= cn;
    LC_TRY(sl_begin(out));
    LC_TRY(sl_add(out, s + a, b - a));
  }
  return LC_OK;
}

// The replacement becomes a space, except in the first string (dropped there unless the
// prepend scheme is "never").
static lc_status step_metaspace(const lc_dec_step *d, const strlist *in, strlist *out) {
  char r[4];
  const size_t rn = (size_t)lc_utf8_enc(d->ch, r);
  for (size_t i = 0; i < in->n; i++) {
    const char *s = sl_str(in, i);
    const size_t n = in->len[i];
    LC_TRY(sl_begin(out));
    size_t run = 0;
    for (size_t k = 0; k + rn <= n;) {
      if (memcmp(s + k, r, rn)) {
        k++;
        continue;
      }
      LC_TRY(sl_add(out, s + run, k - run));
      if (!(i == 0 && d->scheme != LC_PREPEND_NEVER)) LC_TRY(sl_add(out, " ", 1));
      k += rn;
      run = k;
    }
    LC_TRY(sl_add(out, s + run, n - run));
  }
  return LC_OK;
}

static const char *token_str(const lc_tokenizer *t, int32_t id, size_t *len) {
  if (id < 0 || id >= t->n_ids || !t->has[id]) return NULL;
  if (t->added_of[id] >= 0) {
    const lc_added_tok *a = &t->added[t->added_of[id]];
    *len = a->shown ? a->shown_len : a->len;
    return a->shown ? a->shown : a->content;
  }
  *len = t->str_len[id];
  return t->str_pool.p + t->str_off[id];
}

const char *lc_tok_token(const lc_tokenizer *t, int32_t id, size_t *len) {
  size_t l = 0;
  const char *s = t ? token_str(t, id, &l) : NULL;
  if (len) *len = l;
  return s;
}

int lc_tok_is_special(const lc_tokenizer *t, int32_t id) {
  return t && id >= 0 && id < t->n_ids && t->added_of[id] >= 0 && t->added[t->added_of[id]].special;
}

static lc_status decode_buf(const lc_tokenizer *t, const int32_t *ids, size_t n, int skip_special, lc_tbuf *text) {
  strlist a = {0}, b = {0};
  lc_status st = LC_OK;
  for (size_t i = 0; i < n && st == LC_OK; i++) {
    size_t len;
    const char *s = token_str(t, ids[i], &len);
    if (!s) {
      st = lc_fail(LC_EINVAL, "%s: token id %ld is not in the vocabulary (ids 0..%ld); the ids do not belong to this tokenizer",
                   t->label, (long)ids[i], (long)t->n_ids - 1);
      break;
    }
    if (skip_special && lc_tok_is_special(t, ids[i])) continue;
    st = sl_begin(&a);
    if (st == LC_OK) st = sl_add(&a, s, len);
  }
  for (int k = 0; k < t->n_dec && st == LC_OK; k++) {
    const lc_dec_step *d = &t->dec[k];
    b.n = 0;
    b.pool.n = 0;
    switch (d->kind) {
    case LC_DEC_BYTELEVEL: st = step_bytelevel(&a, &b); break;
    case LC_DEC_REPLACE: st = step_replace(d, &a, &b); break;
    case LC_DEC_BYTEFALLBACK: st = step_bytefallback(&a, &b); break;
    case LC_DEC_FUSE: st = step_fuse(&a, &b); break;
    case LC_DEC_STRIP: st = step_strip(d, &a, &b); break;
    case LC_DEC_METASPACE: st = step_metaspace(d, &a, &b); break;
    }
    const strlist x = a;
    a = b;
    b = x;
  }
  text->n = 0;
  for (size_t i = 0; i < a.n && st == LC_OK; i++) {
    if (i && !t->has_decoder) st = lc_tbuf_put(text, " ", 1);
    if (st == LC_OK) st = lc_tbuf_put(text, sl_str(&a, i), a.len[i]);
  }
  if (st == LC_OK) st = lc_tbuf_nul(text);
  sl_free(&a);
  sl_free(&b);
  return st;
}

lc_status lc_tok_decode(const lc_tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **text, size_t *len) {
  *text = NULL;
  if (len) *len = 0;
  if (!t) return lc_fail(LC_EINVAL, "tokenizer: decode without a tokenizer");
  lc_tbuf b = {0};
  const lc_status st = decode_buf(t, ids, n, skip_special, &b);
  if (st != LC_OK) {
    lc_tbuf_free(&b);
    return st;
  }
  *text = b.p;
  if (len) *len = b.n;
  return LC_OK;
}

// ---------------------------------------------------------------- streaming

struct lc_tok_stream {
  const lc_tokenizer *t;
  int skip_special;
  lc_ids32 ids;
  size_t prefix_index;
  lc_tbuf prefix, cur, out;
};

lc_status lc_tok_stream_new(const lc_tokenizer *t, int skip_special, lc_tok_stream **s) {
  *s = calloc(1, sizeof **s);
  if (!*s) return lc_fail(LC_ENOMEM, "tokenizer: out of memory for a decode stream");
  (*s)->t = t;
  (*s)->skip_special = skip_special;
  return LC_OK;
}

static lc_status emit(lc_tok_stream *s, const char *p, size_t n, const char **text, size_t *len) {
  s->out.n = 0;
  LC_TRY(lc_tbuf_put(&s->out, p, n));
  LC_TRY(lc_tbuf_nul(&s->out));
  *text = s->out.p;
  *len = s->out.n;
  return LC_OK;
}

lc_status lc_tok_stream_step(lc_tok_stream *s, int32_t id, const char **text, size_t *len) {
  *text = "";
  *len = 0;
  size_t l;
  if (!token_str(s->t, id, &l))
    return lc_fail(LC_EINVAL, "%s: token id %ld is not in the vocabulary (ids 0..%ld)", s->t->label, (long)id,
                   (long)s->t->n_ids - 1);
  LC_TRY(lc_tgrow((void **)&s->ids.v, &s->ids.cap, s->ids.n + 1, sizeof *s->ids.v));
  s->ids.v[s->ids.n++] = id;
  LC_TRY(decode_buf(s->t, s->ids.v, s->ids.n, s->skip_special, &s->cur));
  const lc_tbuf *c = &s->cur;
  if (c->n <= s->prefix.n || (c->n >= 3 && !memcmp(c->p + c->n - 3, "\xEF\xBF\xBD", 3))) return LC_OK;
  if (memcmp(c->p, s->prefix.p ? s->prefix.p : "", s->prefix.n))
    return lc_fail(LC_EFORMAT, "%s: streaming decode: the text of the last tokens no longer starts with what was printed",
                   s->t->label);
  LC_TRY(emit(s, c->p + s->prefix.n, c->n - s->prefix.n, text, len));
  const size_t new_index = s->ids.n - s->prefix_index;
  memmove(s->ids.v, s->ids.v + s->prefix_index, (s->ids.n - s->prefix_index) * sizeof *s->ids.v);
  s->ids.n -= s->prefix_index;
  LC_TRY(decode_buf(s->t, s->ids.v, s->ids.n, s->skip_special, &s->prefix));
  s->prefix_index = new_index;
  return LC_OK;
}

lc_status lc_tok_stream_flush(lc_tok_stream *s, const char **text, size_t *len) {
  *text = "";
  *len = 0;
  if (!s->ids.n) return LC_OK;
  LC_TRY(decode_buf(s->t, s->ids.v, s->ids.n, s->skip_special, &s->cur));
  size_t common = 0;
  while (common < s->prefix.n && common < s->cur.n && s->prefix.p[common] == s->cur.p[common]) common++;
  if (s->cur.n > common) LC_TRY(emit(s, s->cur.p + common, s->cur.n - common, text, len));
  s->ids.n = 0;
  s->prefix.n = 0;
  s->prefix_index = 0;
  return LC_OK;
}

void lc_tok_stream_free(lc_tok_stream *s) {
  if (!s) return;
  free(s->ids.v);
  lc_tbuf_free(&s->prefix);
  lc_tbuf_free(&s->cur);
  lc_tbuf_free(&s->out);
  free(s);
}
