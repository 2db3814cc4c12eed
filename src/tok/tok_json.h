// Reading tokenizer.json (internal to src/tok/): typed field access with one-line errors
// naming the field, and the parsers of the pipeline sections.
#ifndef LC_TOK_JSON_H
#define LC_TOK_JSON_H

#include <cjson/cJSON.h>

#include "tok/tok_internal.h"

const char *lc_tj_type(const cJSON *v); // "a string", "a number", ...
// obj[key] as a string: required -> LC_EFORMAT if missing; absent/null -> *out = NULL.
lc_status lc_tj_str(const lc_tokenizer *t, const cJSON *obj, const char *key, const char *where, int required,
                    const char **out);
// obj[key] as a bool (absent or null: dflt).
lc_status lc_tj_bool(const lc_tokenizer *t, const cJSON *obj, const char *key, const char *where, int dflt, int *out);
// obj[key] as an integer in [lo, hi] (absent or null: dflt, unless required).
lc_status lc_tj_int(const lc_tokenizer *t, const cJSON *obj, const char *key, const char *where, long lo, long hi,
                    int required, long dflt, long *out);
// v itself as an integer id in 0..LC_TOK_MAX_ID.
lc_status lc_tj_id(const lc_tokenizer *t, const cJSON *v, const char *where, int32_t *out);

// "normalizer", "pre_tokenizer" and "decoder" of the root object (sets byte_level).
lc_status lc_tj_pipeline(lc_tokenizer *t, const cJSON *root);
// "post_processor" (needs the ids of its special tokens, so after the vocabulary).
lc_status lc_tj_post(lc_tokenizer *t, const cJSON *root);

#endif
