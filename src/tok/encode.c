// Encoding: the text is cut at the raw added tokens; every other piece is normalized, cut at
// the normalized added tokens, pre-tokenized into words and each word encoded by the model;
// with add_special the post-processor's ids go around the whole.
#include <stdlib.h>

#include "tok/tok_internal.h"
#include "tok/unicode.h"

static lc_status encode_piece(lc_tokenizer *t, const char *s, size_t n, int at_start, lc_tok_ids *out) {
  if (!n) return LC_OK;
  const char *cur = s;
  size_t cn = n;
  lc_tbuf *norm = &t->scratch[LC_TOK_MAX_STEPS];
  if (t->n_norm) {
    LC_TRY(lc_tok_normalize(t, s, n, norm));
    cur = norm->p;
    cn = norm->n;
    if (!cn) return LC_OK;
  }
  if (!t->trie_norm.n_pat) return lc_tok_pretokenize(t, 0, cur, cn, at_start, out);
  lc_tok_seg *seg = NULL;
  size_t ns = 0, cap = 0;
  lc_status st = lc_tok_split_added(t, &t->trie_norm, cur, cn, &seg, &ns, &cap);
  for (size_t i = 0; i < ns && st == LC_OK; i++) {
    if (seg[i].tok >= 0) st = lc_tok_ids_push(out, &t->added[seg[i].tok].id, 1);
    else st = lc_tok_pretokenize(t, 0, cur + seg[i].start, seg[i].end - seg[i].start, at_start && seg[i].start == 0, out);
  }
  free(seg);
  return st;
}

lc_status lc_tok_encode_append(lc_tokenizer *t, const char *text, size_t len, int add_special, lc_tok_ids *out) {
  if (!t) return lc_fail(LC_EINVAL, "tokenizer: encode without a tokenizer");
  if (len && !text) return lc_fail(LC_EINVAL, "%s: encode of %zu bytes from a NULL pointer", t->label, len);
  const size_t bad = lc_utf8_check(text, len);
  if (bad != len)
    return lc_fail(LC_EINVAL, "%s: the text is not valid UTF-8 at byte %zu (0x%02x); convert it to UTF-8 first", t->label,
                   bad, (unsigned char)text[bad]);
  const size_t start = out->n;
  lc_status st = LC_OK;
  if (add_special && t->n_pre_ids) st = lc_tok_ids_push(out, t->pre_ids, (size_t)t->n_pre_ids);
  if (st == LC_OK && !t->trie_raw.n_pat) {
    st = encode_piece(t, text, len, 1, out);
  } else if (st == LC_OK) {
    lc_tok_seg *seg = NULL;
    size_t ns = 0, cap = 0;
    st = lc_tok_split_added(t, &t->trie_raw, text, len, &seg, &ns, &cap);
    for (size_t i = 0; i < ns && st == LC_OK; i++) {
      if (seg[i].tok >= 0) st = lc_tok_ids_push(out, &t->added[seg[i].tok].id, 1);
      else st = encode_piece(t, text + seg[i].start, seg[i].end - seg[i].start, seg[i].start == 0, out);
    }
    free(seg);
  }
  if (st == LC_OK && add_special && t->n_post_ids) st = lc_tok_ids_push(out, t->post_ids, (size_t)t->n_post_ids);
  if (st != LC_OK) out->n = start;
  return st;
}

lc_status lc_tok_encode(lc_tokenizer *t, const char *text, size_t len, int add_special, int32_t **ids, size_t *n) {
  lc_tok_ids o = {0};
  *ids = NULL;
  *n = 0;
  const lc_status st = lc_tok_encode_append(t, text, len, add_special, &o);
  if (st != LC_OK) {
    free(o.v);
    return st;
  }
  *ids = o.v;
  *n = o.n;
  return LC_OK;
}
