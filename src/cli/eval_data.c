// The data longctx eval scores (eval_data.h): a token file (with its loss mask), a text
// file through the model's tokenizer, or bytes.
#define _POSIX_C_SOURCE 200809L
#include "cli/eval_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "io/fsutil.h"
#include "io/tokfile.h"
#include "tok/tokenizer.h"

static int is_token_file(const char *path) {
  FILE *f = fopen(path, "rb");
  char m[8] = {0};
  const int ok = f && fread(m, 1, 8, f) == 8 && !memcmp(m, "LCTOKENS", 8);
  if (f) fclose(f);
  return ok;
}

// Bytes of text the ids decode to (special tokens left out), into *bytes.
static lc_status decoded_bytes(const lc_tokenizer *t, const int32_t *ids, size_t n, double *bytes) {
  char *text = NULL;
  size_t len = 0;
  LC_TRY(lc_tok_decode(t, ids, n, 1, &text, &len));
  free(text);
  *bytes = (double)len;
  return LC_OK;
}

lc_status lc_eval_data_load(lc_eval_data *d, const char *path, const char *model_spec, const lc_config *cfg, long max_tokens) {
  memset(d, 0, sizeof *d);
  // The model's tokenizer, if it brings one (a byte model needs none).
  lc_tokenizer *tok = NULL;
  char why[400] = "";
  if (cfg->vocab != 256 && lc_cli_load_tokenizer(model_spec, &tok) != LC_OK) snprintf(why, sizeof why, "%s", lc_errmsg());
  if (is_token_file(path)) {
    lc_tokfile t;
    LC_TRY(lc_tokfile_open(&t, path));
    lc_status st = lc_tokfile_check_vocab(&t, cfg->vocab);
    long n = (long)t.count;
    if (max_tokens > 0 && n > max_tokens) n = max_tokens;
    d->tokens = st == LC_OK ? malloc(sizeof(int32_t) * (size_t)n) : NULL;
    if (st == LC_OK && !d->tokens) st = lc_fail(LC_ENOMEM, "out of memory for %ld tokens of %s", n, path);
    if (st == LC_OK && t.mask && !(d->mask = malloc((size_t)n)))
      st = lc_fail(LC_ENOMEM, "out of memory for the loss mask of %ld tokens of %s", n, path);
    for (long i = 0; st == LC_OK && i < n; i++) d->tokens[i] = (int32_t)lc_tokfile_get(&t, (uint64_t)i);
    if (st == LC_OK && d->mask) memcpy(d->mask, t.mask, (size_t)n);
    lc_tokfile_close(&t);
    if (st != LC_OK) return st;
    d->n = n;
    d->counted = n > 0 ? n - 1 : 0;
    if (d->mask) {
      d->counted = 0;
      for (long i = 1; i < n; i++) d->counted += d->mask[i] != 0;
    }
    snprintf(d->desc, sizeof d->desc, "token file, vocab %u%s", t.vocab, d->mask ? ", with a loss mask" : "");
    if (d->mask) { // bytes behind the counted targets: each run of them decoded alone
      d->first_bytes = 0;
      if (cfg->vocab == 256) {
        d->bytes_known = 1, d->bytes_total = (double)d->counted;
      } else if (tok) {
        for (long i = 1; st == LC_OK && i < n;) {
          long e = i;
          while (e < n && d->mask[e]) e++;
          double b = 0;
          if (e > i) st = decoded_bytes(tok, d->tokens + i, (size_t)(e - i), &b);
          d->bytes_total += b;
          i = e > i ? e : i + 1;
        }
        d->bytes_known = st == LC_OK;
      } else {
        snprintf(d->bytes_why, sizeof d->bytes_why, "the model has no tokenizer to decode the tokens (%.200s)", why);
      }
    } else if (cfg->vocab == 256) {
      d->bytes_known = 1, d->bytes_total = (double)n, d->first_bytes = 1; // a byte model's tokens are bytes
    } else if (tok) { // the text the tokens decode to
      st = decoded_bytes(tok, d->tokens, (size_t)n, &d->bytes_total);
      if (st == LC_OK) st = decoded_bytes(tok, d->tokens, 1, &d->first_bytes);
      d->bytes_known = st == LC_OK;
    } else {
      snprintf(d->bytes_why, sizeof d->bytes_why, "the model has no tokenizer to decode the tokens (%.200s)", why);
    }
    if (tok) lc_tok_free(tok);
    return st;
  }
  if (tok) { // text through the model's tokenizer, with its special tokens (a BOS), as transformers' recipe
    char *text = NULL;
    size_t len = 0;
    int32_t *ids = NULL;
    size_t k = 0;
    lc_status st = lc_read_file(path, (size_t)1 << 32, &text, &len);
    if (st == LC_OK) st = lc_tok_encode(tok, text, len, 1, &ids, &k);
    free(text);
    if (st == LC_OK && max_tokens > 0 && (long)k > max_tokens) k = (size_t)max_tokens;
    for (size_t i = 0; st == LC_OK && i < k; i++)
      if (ids[i] >= cfg->vocab)
        st = lc_fail(LC_EINVAL, "the tokenizer gives id %d, outside the model's vocabulary of %d", ids[i], cfg->vocab);
    if (st == LC_OK) st = decoded_bytes(tok, ids, k, &d->bytes_total);
    if (st == LC_OK) st = decoded_bytes(tok, ids, 1, &d->first_bytes);
    if (st == LC_OK) {
      d->tokens = ids, d->n = (long)k, d->bytes_known = 1, d->counted = k > 0 ? (long)k - 1 : 0;
      snprintf(d->desc, sizeof d->desc, "text through the model's tokenizer: %.200s", lc_tok_describe(tok));
    } else {
      free(ids);
    }
    lc_tok_free(tok);
    return st;
  }
  // Text: the bytes themselves for a byte model.
  if (cfg->vocab != 256)
    return lc_fail(LC_EINVAL, "%s is text, and this model (vocab %d) has no tokenizer to read it (%.200s): give a token "
                   "file (longctx prepare)", path, cfg->vocab, why);
  char *text = NULL;
  size_t len = 0;
  LC_TRY(lc_read_file(path, (size_t)1 << 32, &text, &len));
  long n = (long)len;
  if (max_tokens > 0 && n > max_tokens) n = max_tokens;
  d->tokens = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
  if (!d->tokens) {
    free(text);
    return lc_fail(LC_ENOMEM, "out of memory for %ld bytes of %s", n, path);
  }
  for (long i = 0; i < n; i++) d->tokens[i] = (unsigned char)text[i];
  free(text);
  d->n = n;
  d->counted = n > 0 ? n - 1 : 0;
  d->bytes_known = 1, d->bytes_total = (double)n, d->first_bytes = 1;
  snprintf(d->desc, sizeof d->desc, "text read as bytes");
  return LC_OK;
}

void lc_eval_data_free(lc_eval_data *d) {
  free(d->tokens);
  free(d->mask);
  memset(d, 0, sizeof *d);
}
