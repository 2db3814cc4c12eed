// The tokenizer's growing buffers (tokbuf.h).
#include "tok/tokbuf.h"

#include <stdint.h>
#include <stdlib.h>

lc_status lc_tgrow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return LC_OK;
  size_t c = *cap ? *cap : 16;
  while (c < need) {
    if (c > SIZE_MAX / 2 / elem) return lc_fail(LC_ENOMEM, "tokenizer: a buffer of %zu elements does not fit in memory", need);
    c *= 2;
  }
  void *q = realloc(*p, c * elem);
  if (!q) return lc_fail(LC_ENOMEM, "tokenizer: out of memory growing a buffer to %zu bytes", c * elem);
  *p = q;
  *cap = c;
  return LC_OK;
}

lc_status lc_tbuf_reserve(lc_tbuf *b, size_t extra) {
  if (extra > SIZE_MAX - b->n - 1) return lc_fail(LC_ENOMEM, "tokenizer: a text buffer would overflow");
  return lc_tgrow((void **)&b->p, &b->cap, b->n + extra + 1, 1);
}

void lc_tbuf_free(lc_tbuf *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}
