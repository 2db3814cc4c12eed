// JSONL records (what `longctx prepare` reads): each line of a text that is not blank one
// JSON object whose `field` is a string, the document; handed out in order.
#ifndef LC_JSONL_H
#define LC_JSONL_H

#include <stddef.h>

#include "core/status.h"

// Receives one record's text (len bytes, NUL-terminated; a string holding \u0000 ends there).
typedef lc_status (*lc_jsonl_fn)(void *ctx, const char *text, size_t len);

// Calls fn for each record of text[0, len) ('\n' ends a line; a line of spaces, tabs, form
// feeds and vertical tabs only is skipped; text need not be NUL-terminated). The first line
// that is not one JSON object with only blanks after it, lacks the field, or holds another
// type there is LC_EFORMAT naming "label:LINE"; an error of fn stops the walk and is returned.
lc_status lc_jsonl_each(const char *text, size_t len, const char *label, const char *field, lc_jsonl_fn fn, void *ctx);

#endif
