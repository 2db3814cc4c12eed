// JSONL records: the lines of a text as JSON objects, one string field each (io/jsonl.h).
#include "io/jsonl.h"

#include <cjson/cJSON.h>
#include <string.h>

static int blank(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v'; }

lc_status lc_jsonl_each(const char *text, size_t len, const char *label, const char *field, lc_jsonl_fn fn, void *ctx) {
  lc_status st = LC_OK;
  long lineno = 0;
  for (const char *line = text; st == LC_OK && line < text + len;) {
    const char *nl = memchr(line, '\n', (size_t)(text + len - line));
    const char *end = nl ? nl : text + len;
    lineno++;
    int empty = 1;
    for (const char *q = line; q < end && empty; q++) empty = blank(*q);
    if (!empty) {
      const char *pe = NULL;
      cJSON *j = cJSON_ParseWithLengthOpts(line, (size_t)(end - line), &pe, 0);
      for (const char *q = pe; j && q && q < end; q++) // only blanks may follow the object
        if (!blank(*q)) {
          cJSON_Delete(j);
          j = NULL;
          break;
        }
      const cJSON *f = j ? cJSON_GetObjectItemCaseSensitive(j, field) : NULL;
      if (!j)
        st = lc_fail(LC_EFORMAT, "%s:%ld: not valid JSON; each line of a JSONL file must be one JSON object", label, lineno);
      else if (!cJSON_IsObject(j) || !f)
        st = lc_fail(LC_EFORMAT, "%s:%ld: no field \"%s\"; choose the text field with --field", label, lineno, field);
      else if (!cJSON_IsString(f))
        st = lc_fail(LC_EFORMAT, "%s:%ld: field \"%s\" is not a string", label, lineno, field);
      else
        st = fn(ctx, f->valuestring, strlen(f->valuestring));
      cJSON_Delete(j);
    }
    line = end + 1;
  }
  return st;
}
