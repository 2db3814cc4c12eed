// tokenizer.json's normalizer, pre_tokenizer, decoder and post_processor sections: each
// known type becomes a step of the tokenizer's pipeline; any other type, pattern or option
// is refused with a line naming it and what is implemented.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok_json.h"
#include "tok/unicode.h"

static const char *GPT2_RE = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char *LLAMA3_RE = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                               "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *QWEN2_RE = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                              "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const char *lc_tj_type(const cJSON *v) {
  if (!v) return "missing";
  if (cJSON_IsNull(v)) return "null";
  if (cJSON_IsBool(v)) return "a boolean";
  if (cJSON_IsNumber(v)) return "a number";
  if (cJSON_IsString(v)) return "a string";
  if (cJSON_IsArray(v)) return "an array";
  if (cJSON_IsObject(v)) return "an object";
  return "not a JSON value";
}

lc_status lc_tj_str(const lc_tokenizer *t, const cJSON *obj, const char *key, const char *where, int required,
                    const char **out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  *out = NULL;
  if (!v || cJSON_IsNull(v)) {
    if (required) return lc_fail(LC_EFORMAT, "%s: %s.%s is %s, a string is needed", t->label, where, key, lc_tj_type(v));
    return LC_OK;
  }
  if (!cJSON_IsString(v) || !v->valuestring)
    return lc_fail(LC_EFORMAT, "%s: %s.%s is %s, a string is needed", t->label, where, key, lc_tj_type(v));
  *out = v->valuestring;
  return LC_OK;
}

lc_status lc_tj_bool(const lc_tokenizer *t, const cJSON *obj, const char *key, const char *where, int dflt, int *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  *out = dflt;
  if (!v || cJSON_IsNull(v)) return LC_OK;
  if (!cJSON_IsBool(v)) return lc_fail(LC_EFORMAT, "%s: %s.%s is %s, true or false is needed", t->label, where, key, lc_tj_type(v));
  *out = cJSON_IsTrue(v);
  return LC_OK;
}

lc_status lc_tj_int(const lc_tokenizer *t, const cJSON *obj, const char *key, const char *where, long lo, long hi,
                    int required, long dflt, long *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  *out = dflt;
  if (!v || cJSON_IsNull(v)) {
    if (required) return lc_fail(LC_EFORMAT, "%s: %s.%s is missing, an integer is needed", t->label, where, key);
    return LC_OK;
  }
  const double d = cJSON_IsNumber(v) ? v->valuedouble : -1e300;
  // (the range first: casting a double outside long's range is undefined; found by fuzz_tok)
  if (!cJSON_IsNumber(v) || !(d >= (double)lo && d <= (double)hi) || d != (double)(long)d)
    return lc_fail(LC_EFORMAT, "%s: %s.%s is %s, an integer in %ld..%ld is needed", t->label, where, key,
                   cJSON_IsNumber(v) ? "out of range" : lc_tj_type(v), lo, hi);
  *out = (long)d;
  return LC_OK;
}

lc_status lc_tj_id(const lc_tokenizer *t, const cJSON *v, const char *where, int32_t *out) {
  const double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
  if (!cJSON_IsNumber(v) || !(d >= 0 && d <= LC_TOK_MAX_ID) || d != (double)(int32_t)d)
    return lc_fail(LC_EFORMAT, "%s: %s is %s, a token id in 0..%d is needed", t->label, where,
                   cJSON_IsNumber(v) ? "out of range" : lc_tj_type(v), LC_TOK_MAX_ID);
  *out = (int32_t)d;
  return LC_OK;
}

static lc_status dup(const lc_tokenizer *t, const char *s, char **out, size_t *n) {
  *n = strlen(s);
  *out = malloc(*n + 1);
  if (!*out) return lc_fail(LC_ENOMEM, "%s: out of memory", t->label);
  memcpy(*out, s, *n + 1);
  return LC_OK;
}

// One character (the Metaspace replacement, Strip's content) as a code point.
static lc_status one_char(const lc_tokenizer *t, const char *s, const char *where, uint32_t *cp) {
  const size_t n = strlen(s);
  if (!n || lc_utf8_check(s, n) != n || (size_t)lc_utf8_dec((const unsigned char *)s, n, cp) != n)
    return lc_fail(LC_EFORMAT, "%s: %s must be one character", t->label, where);
  return LC_OK;
}

static const char *type_of(const cJSON *o) {
  const cJSON *ty = cJSON_GetObjectItemCaseSensitive(o, "type");
  return cJSON_IsString(ty) && ty->valuestring ? ty->valuestring : NULL;
}

// "always" / "first" / "never", or the older add_prefix_space flag.
static lc_status prepend_scheme(const lc_tokenizer *t, const cJSON *o, const char *where, lc_prepend_scheme *out) {
  const char *s;
  LC_TRY(lc_tj_str(t, o, "prepend_scheme", where, 0, &s));
  if (!s) {
    int add;
    LC_TRY(lc_tj_bool(t, o, "add_prefix_space", where, 1, &add));
    *out = add ? LC_PREPEND_ALWAYS : LC_PREPEND_NEVER;
    return LC_OK;
  }
  if (!strcmp(s, "always")) *out = LC_PREPEND_ALWAYS;
  else if (!strcmp(s, "first")) *out = LC_PREPEND_FIRST;
  else if (!strcmp(s, "never")) *out = LC_PREPEND_NEVER;
  else return lc_fail(LC_EFORMAT, "%s: %s.prepend_scheme is '%s'; always, first or never is needed", t->label, where, lc_tok_show(s));
  return LC_OK;
}

static lc_status string_pattern(const lc_tokenizer *t, const cJSON *o, const char *where, const char **out) {
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "pattern");
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(p, "String");
  if (cJSON_IsString(s) && s->valuestring && s->valuestring[0]) {
    *out = s->valuestring;
    return LC_OK;
  }
  if (cJSON_GetObjectItemCaseSensitive(p, "Regex"))
    return lc_fail(LC_EFORMAT, "%s: %s has a Regex pattern; longctx implements Replace with a String pattern only", t->label, where);
  return lc_fail(LC_EFORMAT, "%s: %s.pattern must be {\"String\": \"...\"} (non-empty)", t->label, where);
}

// ---------------------------------------------------------------- normalizer

static lc_status normalizer(lc_tokenizer *t, const cJSON *o, const char *where) {
  if (!o || cJSON_IsNull(o)) return LC_OK;
  const char *ty = type_of(o);
  if (!cJSON_IsObject(o) || !ty) return lc_fail(LC_EFORMAT, "%s: %s is %s without a \"type\"", t->label, where, lc_tj_type(o));
  if (!strcmp(ty, "Sequence")) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "normalizers");
    if (!cJSON_IsArray(list)) return lc_fail(LC_EFORMAT, "%s: %s.normalizers is %s, an array is needed", t->label, where, lc_tj_type(list));
    const cJSON *x;
    cJSON_ArrayForEach(x, list) LC_TRY(normalizer(t, x, where));
    return LC_OK;
  }
  if (t->n_norm >= LC_TOK_MAX_STEPS) return lc_fail(LC_EFORMAT, "%s: %s has more than %d steps", t->label, where, LC_TOK_MAX_STEPS);
  // Counted before it is filled: a step that fails half-way (its first string copied) is
  // freed with the tokenizer (a leak bench/fuzz/fuzz_tok found).
  lc_norm_step *st = &t->norm[t->n_norm++];
  memset(st, 0, sizeof *st);
  const char *s;
  if (!strcmp(ty, "NFC")) {
    st->kind = LC_NORM_NFC;
  } else if (!strcmp(ty, "Prepend")) {
    LC_TRY(lc_tj_str(t, o, "prepend", where, 1, &s));
    st->kind = LC_NORM_PREPEND;
    LC_TRY(dup(t, s, &st->a, &st->an));
  } else if (!strcmp(ty, "Replace")) {
    LC_TRY(string_pattern(t, o, where, &s));
    st->kind = LC_NORM_REPLACE;
    LC_TRY(dup(t, s, &st->a, &st->an));
    LC_TRY(lc_tj_str(t, o, "content", where, 1, &s));
    LC_TRY(dup(t, s, &st->b, &st->bn));
  } else {
    return lc_fail(LC_EFORMAT, "%s: normalizer type '%s' is not implemented (longctx has NFC, Prepend, Replace and Sequence)",
                   t->label, lc_tok_show(ty));
  }
  return LC_OK;
}

// ---------------------------------------------------------------- pre-tokenizer

static lc_status pre_tokenizer(lc_tokenizer *t, const cJSON *o, const char *where) {
  if (!o || cJSON_IsNull(o)) return LC_OK;
  const char *ty = type_of(o);
  if (!cJSON_IsObject(o) || !ty) return lc_fail(LC_EFORMAT, "%s: %s is %s without a \"type\"", t->label, where, lc_tj_type(o));
  if (!strcmp(ty, "Sequence")) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "pretokenizers");
    if (!cJSON_IsArray(list)) return lc_fail(LC_EFORMAT, "%s: %s.pretokenizers is %s, an array is needed", t->label, where, lc_tj_type(list));
    const cJSON *x;
    cJSON_ArrayForEach(x, list) LC_TRY(pre_tokenizer(t, x, where));
    return LC_OK;
  }
  if (t->n_pre >= LC_TOK_MAX_STEPS) return lc_fail(LC_EFORMAT, "%s: %s has more than %d steps", t->label, where, LC_TOK_MAX_STEPS);
  if (t->n_pre && t->pre[t->n_pre - 1].kind == LC_PRE_BYTELEVEL)
    return lc_fail(LC_EFORMAT, "%s: %s has '%s' after ByteLevel; longctx needs ByteLevel to be the last pre-tokenizer", t->label,
                   where, lc_tok_show(ty));
  lc_pre_step *st = &t->pre[t->n_pre];
  memset(st, 0, sizeof *st);
  if (!strcmp(ty, "ByteLevel")) {
    st->kind = LC_PRE_BYTELEVEL;
    LC_TRY(lc_tj_bool(t, o, "add_prefix_space", where, 1, &st->add_prefix_space));
    LC_TRY(lc_tj_bool(t, o, "use_regex", where, 1, &st->use_regex));
    t->byte_level = 1;
  } else if (!strcmp(ty, "Split")) {
    st->kind = LC_PRE_SPLIT;
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "pattern");
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(p, "Regex");
    const char *behavior;
    int invert;
    LC_TRY(lc_tj_str(t, o, "behavior", where, 1, &behavior));
    LC_TRY(lc_tj_bool(t, o, "invert", where, 0, &invert));
    if (!cJSON_IsString(re) || !re->valuestring)
      return lc_fail(LC_EFORMAT, "%s: %s Split needs a {\"Regex\": ...} pattern (longctx implements the GPT-2, Llama 3 and Qwen2 patterns)",
                     t->label, where);
    const char *r = re->valuestring;
    st->pattern = !strcmp(r, GPT2_RE) ? LC_PAT_GPT2 : !strcmp(r, LLAMA3_RE) ? LC_PAT_LLAMA3 : !strcmp(r, QWEN2_RE) ? LC_PAT_QWEN2 : 0;
    if (!st->pattern) {
      char d[64];
      return lc_fail(LC_EFORMAT, "%s: the Split pattern '%s' is not one longctx implements (the GPT-2, Llama 3 and Qwen2 patterns)",
                     t->label, lc_tok_disp(r, strlen(r), d, sizeof d));
    }
    if (strcmp(behavior, "Isolated") || invert)
      return lc_fail(LC_EFORMAT, "%s: Split with behavior '%s'%s is not implemented (Isolated, not inverted)", t->label, lc_tok_show(behavior),
                     invert ? " inverted" : "");
  } else if (!strcmp(ty, "Digits")) {
    st->kind = LC_PRE_DIGITS;
    LC_TRY(lc_tj_bool(t, o, "individual_digits", where, 0, &st->individual));
  } else if (!strcmp(ty, "Metaspace")) {
    const char *rep;
    uint32_t cp;
    st->kind = LC_PRE_METASPACE;
    LC_TRY(lc_tj_str(t, o, "replacement", where, 1, &rep));
    LC_TRY(one_char(t, rep, "the Metaspace replacement", &cp));
    st->rep_n = lc_utf8_enc(cp, st->rep);
    LC_TRY(prepend_scheme(t, o, where, &st->scheme));
    LC_TRY(lc_tj_bool(t, o, "split", where, 1, &st->split));
  } else {
    return lc_fail(LC_EFORMAT,
                   "%s: pre-tokenizer type '%s' is not implemented (longctx has ByteLevel, Split, Digits, Metaspace and Sequence)",
                   t->label, lc_tok_show(ty));
  }
  t->n_pre++;
  return LC_OK;
}

// ---------------------------------------------------------------- decoder

static lc_status decoder(lc_tokenizer *t, const cJSON *o, const char *where) {
  if (!o || cJSON_IsNull(o)) return LC_OK;
  const char *ty = type_of(o);
  if (!cJSON_IsObject(o) || !ty) return lc_fail(LC_EFORMAT, "%s: %s is %s without a \"type\"", t->label, where, lc_tj_type(o));
  t->has_decoder = 1;
  if (!strcmp(ty, "Sequence")) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "decoders");
    if (!cJSON_IsArray(list)) return lc_fail(LC_EFORMAT, "%s: %s.decoders is %s, an array is needed", t->label, where, lc_tj_type(list));
    const cJSON *x;
    cJSON_ArrayForEach(x, list) LC_TRY(decoder(t, x, where));
    return LC_OK;
  }
  if (t->n_dec >= LC_TOK_MAX_STEPS) return lc_fail(LC_EFORMAT, "%s: %s has more than %d steps", t->label, where, LC_TOK_MAX_STEPS);
  // Counted before it is filled: a step that fails half-way (its first string copied) is
  // freed with the tokenizer (a leak bench/fuzz/fuzz_tok found).
  lc_dec_step *st = &t->dec[t->n_dec++];
  memset(st, 0, sizeof *st);
  const char *s;
  long v;
  if (!strcmp(ty, "ByteLevel")) {
    st->kind = LC_DEC_BYTELEVEL;
  } else if (!strcmp(ty, "ByteFallback")) {
    st->kind = LC_DEC_BYTEFALLBACK;
  } else if (!strcmp(ty, "Fuse")) {
    st->kind = LC_DEC_FUSE;
  } else if (!strcmp(ty, "Replace")) {
    LC_TRY(string_pattern(t, o, where, &s));
    st->kind = LC_DEC_REPLACE;
    LC_TRY(dup(t, s, &st->a, &st->an));
    LC_TRY(lc_tj_str(t, o, "content", where, 1, &s));
    LC_TRY(dup(t, s, &st->b, &st->bn));
  } else if (!strcmp(ty, "Strip")) {
    st->kind = LC_DEC_STRIP;
    LC_TRY(lc_tj_str(t, o, "content", where, 1, &s));
    LC_TRY(one_char(t, s, "the Strip decoder's content", &st->ch));
    LC_TRY(lc_tj_int(t, o, "start", where, 0, 1 << 20, 0, 0, &v));
    st->start = (int)v;
    LC_TRY(lc_tj_int(t, o, "stop", where, 0, 1 << 20, 0, 0, &v));
    st->stop = (int)v;
  } else if (!strcmp(ty, "Metaspace")) {
    st->kind = LC_DEC_METASPACE;
    LC_TRY(lc_tj_str(t, o, "replacement", where, 1, &s));
    LC_TRY(one_char(t, s, "the Metaspace decoder's replacement", &st->ch));
    LC_TRY(prepend_scheme(t, o, where, &st->scheme));
  } else {
    return lc_fail(LC_EFORMAT,
                   "%s: decoder type '%s' is not implemented (longctx has ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip and Sequence)",
                   t->label, lc_tok_show(ty));
  }
  return LC_OK;
}

lc_status lc_tj_pipeline(lc_tokenizer *t, const cJSON *root) {
  LC_TRY(normalizer(t, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), "normalizer"));
  LC_TRY(pre_tokenizer(t, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), "pre_tokenizer"));
  return decoder(t, cJSON_GetObjectItemCaseSensitive(root, "decoder"), "decoder");
}

// ---------------------------------------------------------------- post-processor

static lc_status push_ids(const lc_tokenizer *t, int32_t **v, int *n, const cJSON *ids, const char *name) {
  const cJSON *x;
  cJSON_ArrayForEach(x, ids) {
    int32_t id = -1;
    char where[160];
    snprintf(where, sizeof where, "post_processor special token '%s'", lc_tok_show(name));
    LC_TRY(lc_tj_id(t, x, where, &id));
    if (id >= t->n_ids || !t->has[id])
      return lc_fail(LC_EFORMAT, "%s: %s has id %ld, which is not in the vocabulary", t->label, where, (long)id);
    int32_t *nv = realloc(*v, (size_t)(*n + 1) * sizeof *nv);
    if (!nv) return lc_fail(LC_ENOMEM, "%s: out of memory", t->label);
    *v = nv;
    nv[(*n)++] = id;
  }
  return LC_OK;
}

static lc_status post(lc_tokenizer *t, const cJSON *o, const char *where) {
  if (!o || cJSON_IsNull(o)) return LC_OK;
  const char *ty = type_of(o);
  if (!cJSON_IsObject(o) || !ty) return lc_fail(LC_EFORMAT, "%s: %s is %s without a \"type\"", t->label, where, lc_tj_type(o));
  if (!strcmp(ty, "ByteLevel")) return LC_OK; // offsets only
  if (!strcmp(ty, "Sequence")) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "processors");
    if (!cJSON_IsArray(list)) return lc_fail(LC_EFORMAT, "%s: %s.processors is %s, an array is needed", t->label, where, lc_tj_type(list));
    const cJSON *x;
    cJSON_ArrayForEach(x, list) LC_TRY(post(t, x, where));
    return LC_OK;
  }
  if (strcmp(ty, "TemplateProcessing"))
    return lc_fail(LC_EFORMAT, "%s: post_processor type '%s' is not implemented (longctx has TemplateProcessing, ByteLevel and Sequence)",
                   t->label, lc_tok_show(ty));
  if (t->n_pre_ids || t->n_post_ids)
    return lc_fail(LC_EFORMAT, "%s: %s has two TemplateProcessing steps; longctx implements one", t->label, where);
  const cJSON *single = cJSON_GetObjectItemCaseSensitive(o, "single");
  const cJSON *specials = cJSON_GetObjectItemCaseSensitive(o, "special_tokens");
  if (!cJSON_IsArray(single))
    return lc_fail(LC_EFORMAT, "%s: %s.single is %s, the template (an array) is needed", t->label, where, lc_tj_type(single));
  int seen_a = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, single) {
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(item, "SpecialToken");
    const cJSON *sq = cJSON_GetObjectItemCaseSensitive(item, "Sequence");
    if (sq) {
      const char *id;
      LC_TRY(lc_tj_str(t, sq, "id", "post_processor.single Sequence", 1, &id));
      if (strcmp(id, "A") || seen_a)
        return lc_fail(LC_EFORMAT, "%s: %s.single must hold the sequence A once (found '%s')", t->label, where, lc_tok_show(id));
      seen_a = 1;
      continue;
    }
    const char *name;
    if (!sp) return lc_fail(LC_EFORMAT, "%s: %s.single has an item that is neither SpecialToken nor Sequence", t->label, where);
    LC_TRY(lc_tj_str(t, sp, "id", "post_processor.single SpecialToken", 1, &name));
    const cJSON *def = cJSON_GetObjectItemCaseSensitive(specials, name);
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(def, "ids");
    if (!cJSON_IsArray(ids))
      return lc_fail(LC_EFORMAT, "%s: %s.special_tokens has no ids for '%s'", t->label, where, lc_tok_show(name));
    LC_TRY(push_ids(t, seen_a ? &t->post_ids : &t->pre_ids, seen_a ? &t->n_post_ids : &t->n_pre_ids, ids, name));
  }
  if (!seen_a) return lc_fail(LC_EFORMAT, "%s: %s.single has no sequence A", t->label, where);
  return LC_OK;
}

lc_status lc_tj_post(lc_tokenizer *t, const cJSON *root) {
  return post(t, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), "post_processor");
}
