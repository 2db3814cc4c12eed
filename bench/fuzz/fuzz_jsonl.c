// libFuzzer target: arbitrary bytes as a JSONL file through prepare's record reader
// (lc_jsonl_each, field "text"). Accepted: one record per line that is not blank, each
// handed out whole (its length that of its NUL-terminated text); refused: one line naming
// the file and a line number inside the text. A callback's error stops the walk and comes back.
#include <stdint.h>
#include <string.h>

#include "fuzz_util.h"
#include "io/jsonl.h"

typedef struct {
  long n, stop_at;
} walk;

static lc_status record(void *ctx, const char *text, size_t len) {
  walk *w = ctx;
  if (!text || strlen(text) != len) LC_FUZZ_TRAP();
  if (++w->n == w->stop_at) return lc_fail(LC_EINVAL, "stopped at record %ld", w->n);
  return LC_OK;
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v'; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  long lines = 0, filled = 0;
  for (size_t i = 0; i < size;) {
    const char *nl = memchr(text + i, '\n', size - i);
    const size_t end = nl ? (size_t)(nl - text) : size;
    int blank = 1;
    for (size_t k = i; k < end && blank; k++) blank = is_blank(text[k]);
    lines++, filled += !blank;
    i = end + 1;
  }
  walk w = {0, 0};
  lc_status st = lc_jsonl_each(text, size, "fuzz.jsonl", "text", record, &w);
  if (st == LC_OK) {
    if (w.n != filled) LC_FUZZ_TRAP();
    if (filled > 0) { // stopped at the last record: its error comes back
      walk v = {0, filled};
      st = lc_jsonl_each(text, size, "fuzz.jsonl", "text", record, &v);
      if (st != LC_EINVAL || v.n != filled || strncmp(lc_errmsg(), "stopped at record", 17)) LC_FUZZ_TRAP();
    }
    return 0;
  }
  lc_fuzz_refused(st);
  long at = 0;
  const char *m = lc_errmsg();
  if (strncmp(m, "fuzz.jsonl:", 11) || (at = strtol(m + 11, NULL, 10)) < 1 || at > lines || w.n >= filled) LC_FUZZ_TRAP();
  return 0;
}
