// Normalizers: NFC, Prepend (non-empty text only) and Replace (a literal string, every
// non-overlapping occurrence left to right), applied in order to each piece of text between
// added tokens.
#include <string.h>

#include "tok/tok_internal.h"
#include "tok/unicode.h"

static lc_status apply(const lc_norm_step *st, const char *s, size_t n, lc_tbuf *out) {
  out->n = 0;
  switch (st->kind) {
  case LC_NORM_NFC:
    if (lc_nfc_quick(s, n)) return lc_tbuf_put(out, s, n);
    return lc_nfc(out, s, n);
  case LC_NORM_PREPEND:
    if (n) LC_TRY(lc_tbuf_put(out, st->a, st->an));
    return lc_tbuf_put(out, s, n);
  case LC_NORM_REPLACE: {
    size_t run = 0, i = 0;
    while (i + st->an <= n) {
      const char *p = memchr(s + i, st->a[0], n - i - st->an + 1);
      if (!p) break;
      i = (size_t)(p - s);
      if (memcmp(p, st->a, st->an)) {
        i++;
        continue;
      }
      LC_TRY(lc_tbuf_put(out, s + run, i - run));
      LC_TRY(lc_tbuf_put(out, st->b, st->bn));
      i += st->an;
      run = i;
    }
    return lc_tbuf_put(out, s + run, n - run);
  }
  }
  return LC_OK;
}

lc_status lc_tok_normalize(lc_tokenizer *t, const char *s, size_t n, lc_tbuf *out) {
  lc_tbuf *buf[2] = {&t->scratch[LC_TOK_MAX_STEPS + 1], &t->scratch[LC_TOK_MAX_STEPS + 2]};
  const char *cur = s;
  size_t cn = n;
  out->n = 0;
  if (!n) return LC_OK; // every step keeps empty text empty
  for (int i = 0; i < t->n_norm; i++) {
    lc_tbuf *dst = i == t->n_norm - 1 ? out : buf[i & 1];
    LC_TRY(apply(&t->norm[i], cur, cn, dst));
    cur = dst->p;
    cn = dst->n;
  }
  if (!t->n_norm) {
    out->n = 0;
    LC_TRY(lc_tbuf_put(out, s, n));
  }
  return LC_OK;
}
