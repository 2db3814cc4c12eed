// libFuzzer target: arbitrary bytes as a tokenizer.json and as a GGUF file through the
// tokenizer loaders (src/tok/); whatever loads must encode and decode a fixed text, stream
// included. A refused input must leave one line (no newline) as its message.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#include "tok/tokenizer.h"

static void exercise(lc_tokenizer *t) {
  static const char text[] = "Hello world! It's 2024 <s> \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80\n\n  x";
  int32_t *ids;
  size_t n;
  for (int special = 0; special < 2; special++) {
    if (lc_tok_encode(t, text, sizeof text - 1, special, &ids, &n) != LC_OK) LC_FUZZ_TRAP();
    char *out;
    size_t len;
    if (lc_tok_decode(t, ids, n, special, &out, &len) != LC_OK) LC_FUZZ_TRAP();
    free(out);
    lc_tok_stream *s;
    if (lc_tok_stream_new(t, 0, &s) != LC_OK) LC_FUZZ_TRAP();
    const char *p;
    size_t pn;
    for (size_t i = 0; i < n; i++) (void)lc_tok_stream_step(s, ids[i], &p, &pn);
    (void)lc_tok_stream_flush(s, &p, &pn);
    lc_tok_stream_free(s);
    free(ids);
  }
  const int32_t bad = lc_tok_n_ids(t);
  char *out;
  size_t len;
  if (lc_tok_decode(t, &bad, 1, 0, &out, &len) == LC_OK) LC_FUZZ_TRAP();
}

static void check_refusal(void) {
  const char *m = lc_errmsg();
  if (!m[0] || strchr(m, '\n')) LC_FUZZ_TRAP();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lc_tokenizer *t;
  if (lc_tok_load_json_mem(&t, (const char *)data, size, "fuzz.json") == LC_OK) {
    exercise(t);
    lc_tok_free(t);
  } else {
    check_refusal();
  }
  if (lc_tok_load_gguf_mem(&t, data, size, "fuzz.gguf") == LC_OK) {
    exercise(t);
    lc_tok_free(t);
  } else {
    check_refusal();
  }
  return 0;
}
