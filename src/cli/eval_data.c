#define _POSIX_C_SOURCE 200809L
#include "cli/eval_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/fsutil.h"
#include "io/tokfile.h"

static int is_token_file(const char *path) {
  FILE *f = fopen(path, "rb");
  char m[8] = {0};
  const int ok = f && fread(m, 1, 8, f) == 8 && !memcmp(m, "LCTOKENS", 8);
  if (f) fclose(f);
  return ok;
}

lc_status lc_eval_data_load(lc_eval_data *d, const char *path, const char *model_spec, const lc_config *cfg, long max_tokens) {
  (void)model_spec;
  memset(d, 0, sizeof *d);
  if (is_token_file(path)) {
    lc_tokfile t;
    LC_TRY(lc_tokfile_open(&t, path));
    lc_status st = lc_tokfile_check_vocab(&t, cfg->vocab);
    long n = (long)t.count;
    if (max_tokens > 0 && n > max_tokens) n = max_tokens;
    d->tokens = st == LC_OK ? malloc(sizeof(int32_t) * (size_t)n) : NULL;
    if (st == LC_OK && !d->tokens) st = lc_fail(LC_ENOMEM, "out of memory for %ld tokens of %s", n, path);
    for (long i = 0; st == LC_OK && i < n; i++) d->tokens[i] = (int32_t)lc_tokfile_get(&t, (uint64_t)i);
    lc_tokfile_close(&t);
    if (st != LC_OK) return st;
    d->n = n;
    snprintf(d->desc, sizeof d->desc, "token file, vocab %u", t.vocab);
    if (cfg->vocab == 256) {
      d->bytes_known = 1, d->bytes_total = (double)n, d->first_bytes = 1; // a byte model's tokens are bytes
    } else {
      snprintf(d->bytes_why, sizeof d->bytes_why, "a token file does not say which text it came from (give the text "
               "file itself for bits per byte)");
    }
    return LC_OK;
  }
  // Text: the bytes themselves for a byte model.
  if (cfg->vocab != 256)
    return lc_fail(LC_EINVAL, "%s is text, and this model (vocab %d) needs its tokenizer to read it: give a token file "
                   "(tools/prepare_data.py --tokenizer MODEL)", path, cfg->vocab);
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
  d->bytes_known = 1, d->bytes_total = (double)n, d->first_bytes = 1;
  snprintf(d->desc, sizeof d->desc, "text read as bytes");
  return LC_OK;
}

void lc_eval_data_free(lc_eval_data *d) {
  free(d->tokens);
  memset(d, 0, sizeof *d);
}
