// The tokenizer of a GGUF file: its tokenizer.ggml.* metadata (read through io/gguf.h; the
// token, type, score and merge arrays in one read each) handed to lc_tok_from_vocab.
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"
#include "tok/tok_internal.h"

typedef struct {
  FILE *fp;               // a file, or
  const unsigned char *mem; // bytes in memory
  uint64_t size;
  const char *label;
} src;

static lc_status src_read(const src *s, uint64_t off, void *buf, size_t len) {
  if (off > s->size || len > s->size - off)
    return lc_fail(LC_EFORMAT, "%s: a tokenizer array runs past the end of the file", s->label);
  if (s->mem) {
    memcpy(buf, s->mem + off, len);
    return LC_OK;
  }
  if (fseeko(s->fp, (off_t)off, SEEK_SET) != 0 || fread(buf, 1, len, s->fp) != len)
    return lc_fail(LC_EIO, "%s: cannot read %zu bytes at offset %llu", s->label, len, (unsigned long long)off);
  return LC_OK;
}

static uint64_t le64(const unsigned char *b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
  return v;
}

typedef struct {
  unsigned char *raw; // the array's bytes
  char **s;           // strings (into raw, not NUL-terminated)
  uint32_t *len;
  int32_t n;
} strarr;

static void strarr_free(strarr *a) {
  free(a->raw);
  free(a->s);
  free(a->len);
  memset(a, 0, sizeof *a);
}

static lc_status read_strings(lc_gguf_file *f, const src *s, const char *key, int required, strarr *out) {
  memset(out, 0, sizeof *out);
  const lc_gguf_kv *kv = lc_gguf_find_kv(f, key);
  if (!kv) return required ? lc_fail(LC_EFORMAT, "%s: no %s; the GGUF file holds no tokenizer (give the model's tokenizer.json)", s->label, key) : LC_OK;
  if (kv->type != LC_GGUF_ARR || kv->atype != LC_GGUF_STR)
    return lc_fail(LC_EFORMAT, "%s: %s is not an array of strings", s->label, key);
  if (kv->count > (uint64_t)LC_TOK_MAX_ID + 1)
    return lc_fail(LC_EFORMAT, "%s: %s has %llu entries (at most %d)", s->label, key, (unsigned long long)kv->count, LC_TOK_MAX_ID + 1);
  out->raw = malloc(kv->len ? kv->len : 1);
  out->s = malloc(sizeof *out->s * (kv->count + 1));
  out->len = malloc(sizeof *out->len * (kv->count + 1));
  if (!out->raw || !out->s || !out->len) return lc_fail(LC_ENOMEM, "%s: out of memory for %s", s->label, key);
  LC_TRY(src_read(s, kv->off, out->raw, (size_t)kv->len));
  uint64_t at = 0;
  for (uint64_t i = 0; i < kv->count; i++) {
    if (kv->len - at < 8) return lc_fail(LC_EFORMAT, "%s: %s is cut short", s->label, key);
    const uint64_t n = le64(out->raw + at);
    at += 8;
    if (n > kv->len - at || n > 65536) return lc_fail(LC_EFORMAT, "%s: %s[%llu] is %llu bytes long", s->label, key, (unsigned long long)i, (unsigned long long)n);
    out->s[i] = (char *)out->raw + at;
    out->len[i] = (uint32_t)n;
    at += n;
  }
  out->n = (int32_t)kv->count;
  return LC_OK;
}

// A numeric array as int32 (types) or float (scores); NULL when absent.
static lc_status read_numbers(lc_gguf_file *f, const src *s, const char *key, int32_t n, int32_t **ints, float **floats) {
  const lc_gguf_kv *kv = lc_gguf_find_kv(f, key);
  if (!kv) return LC_OK;
  if (kv->type != LC_GGUF_ARR || kv->count != (uint64_t)n)
    return lc_fail(LC_EFORMAT, "%s: %s is not an array of %ld numbers, one per token", s->label, key, (long)n);
  const int t = kv->atype;
  const int size = t == LC_GGUF_U8 || t == LC_GGUF_I8 ? 1 : t == LC_GGUF_U16 || t == LC_GGUF_I16 ? 2
                   : t == LC_GGUF_U32 || t == LC_GGUF_I32 || t == LC_GGUF_F32 ? 4 : t == LC_GGUF_U64 || t == LC_GGUF_I64 || t == LC_GGUF_F64 ? 8 : 0;
  if (!size || kv->len != (uint64_t)n * (uint64_t)size)
    return lc_fail(LC_EFORMAT, "%s: %s is an array of %s, not of numbers", s->label, key, lc_gguf_vtype_name(kv->atype));
  unsigned char *raw = malloc(kv->len ? kv->len : 1);
  if (!raw) return lc_fail(LC_ENOMEM, "%s: out of memory for %s", s->label, key);
  lc_status st = src_read(s, kv->off, raw, (size_t)kv->len);
  if (ints) *ints = malloc(sizeof **ints * (size_t)(n + 1));
  if (floats) *floats = malloc(sizeof **floats * (size_t)(n + 1));
  if (st == LC_OK && ((ints && !*ints) || (floats && !*floats))) st = lc_fail(LC_ENOMEM, "%s: out of memory for %s", s->label, key);
  for (int32_t i = 0; i < n && st == LC_OK; i++) {
    const unsigned char *b = raw + (size_t)i * (size_t)size;
    double v;
    uint64_t u = 0;
    for (int k = size - 1; k >= 0; k--) u = u << 8 | b[k];
    switch (t) {
    case LC_GGUF_I8: v = (int8_t)u; break;
    case LC_GGUF_I16: v = (int16_t)u; break;
    case LC_GGUF_I32: v = (int32_t)u; break;
    case LC_GGUF_I64: v = (double)(int64_t)u; break;
    case LC_GGUF_F32: {
      const uint32_t w = (uint32_t)u;
      float x;
      memcpy(&x, &w, 4);
      v = x;
      break;
    }
    case LC_GGUF_F64: memcpy(&v, &u, 8); break;
    default: v = (double)u;
    }
    if (ints) (*ints)[i] = v >= -2147483648.0 && v <= 2147483647.0 ? (int32_t)v : -1;
    if (floats) (*floats)[i] = (float)v;
  }
  free(raw);
  return st;
}

static lc_status kv_string(lc_gguf_file *f, const char *key, char **out) {
  *out = NULL;
  const lc_gguf_kv *kv = lc_gguf_find_kv(f, key);
  if (!kv) return LC_OK;
  if (kv->type != LC_GGUF_STR || kv->len > ((uint64_t)1 << 24))
    return lc_fail(LC_EFORMAT, "%s: %s is not a string (of at most 16 MB)", f->path, key);
  *out = malloc((size_t)kv->len + 1);
  if (!*out) return lc_fail(LC_ENOMEM, "%s: out of memory for %s", f->path, key);
  return lc_gguf_kv_str(f, kv, *out, (size_t)kv->len + 1);
}

static lc_status kv_int(lc_gguf_file *f, const char *key, int64_t dflt, int64_t *out) {
  *out = dflt;
  const lc_gguf_kv *kv = lc_gguf_find_kv(f, key);
  if (!kv) return LC_OK;
  if (kv->type == LC_GGUF_BOOL) {
    int b;
    LC_TRY(lc_gguf_kv_bool(f, kv, &b));
    *out = b;
    return LC_OK;
  }
  return lc_gguf_kv_int(f, kv, out);
}

static lc_status from_file(lc_tokenizer **t, lc_gguf_file *f, const src *s) {
  char *model = NULL, *pre = NULL, *chat = NULL;
  strarr toks = {0}, merges = {0};
  int32_t *types = NULL;
  float *scores = NULL;
  int64_t bos, eos, unk, add_bos, add_eos, add_space;
  lc_status st = kv_string(f, "tokenizer.ggml.model", &model);
  if (st == LC_OK && !model)
    st = lc_fail(LC_EFORMAT, "%s: no tokenizer.ggml.model; the GGUF file holds no tokenizer (give the model's tokenizer.json)", s->label);
  if (st == LC_OK) st = kv_string(f, "tokenizer.ggml.pre", &pre);
  if (st == LC_OK) st = kv_string(f, "tokenizer.chat_template", &chat);
  if (st == LC_OK) st = read_strings(f, s, "tokenizer.ggml.tokens", 1, &toks);
  if (st == LC_OK) st = read_strings(f, s, "tokenizer.ggml.merges", 0, &merges);
  if (st == LC_OK) st = read_numbers(f, s, "tokenizer.ggml.token_type", toks.n, &types, NULL);
  if (st == LC_OK) st = read_numbers(f, s, "tokenizer.ggml.scores", toks.n, NULL, &scores);
  if (st == LC_OK) st = kv_int(f, "tokenizer.ggml.bos_token_id", -1, &bos);
  if (st == LC_OK) st = kv_int(f, "tokenizer.ggml.eos_token_id", -1, &eos);
  if (st == LC_OK) st = kv_int(f, "tokenizer.ggml.unknown_token_id", INT64_MIN, &unk);
  if (st == LC_OK) st = kv_int(f, "tokenizer.ggml.add_bos_token", -1, &add_bos);
  if (st == LC_OK) st = kv_int(f, "tokenizer.ggml.add_eos_token", -1, &add_eos);
  if (st == LC_OK) st = kv_int(f, "tokenizer.ggml.add_space_prefix", -1, &add_space);
  if (st == LC_OK) {
    const int32_t n = toks.n;
    const lc_tok_vocab v = {
        .model = model, .pre = pre, .n_tokens = n, .tokens = (const char *const *)toks.s, .token_lens = toks.len,
        .types = types, .scores = scores, .n_merges = merges.n, .merges = (const char *const *)merges.s,
        .merge_lens = merges.len, .bos = bos >= 0 && bos < n ? (int32_t)bos : -1, .eos = eos >= 0 && eos < n ? (int32_t)eos : -1,
        .unk = unk == INT64_MIN ? -1 : unk >= 0 && unk < n ? (int32_t)unk : n, .add_bos = add_bos < 0 ? -1 : add_bos != 0,
        .add_eos = add_eos < 0 ? -1 : add_eos != 0, .add_space_prefix = add_space < 0 ? -1 : add_space != 0,
        .chat_template = chat, .label = s->label};
    st = lc_tok_from_vocab(t, &v);
  }
  free(model);
  free(pre);
  free(chat);
  free(types);
  free(scores);
  strarr_free(&toks);
  strarr_free(&merges);
  return st;
}

lc_status lc_tok_load_gguf(lc_tokenizer **t, const char *path) {
  *t = NULL;
  lc_gguf_file f;
  LC_TRY(lc_gguf_open(&f, path));
  src s = {.fp = fopen(path, "rb"), .size = f.size, .label = path};
  lc_status st = s.fp ? from_file(t, &f, &s) : lc_fail(LC_EIO, "%s: cannot open", path);
  if (s.fp) fclose(s.fp);
  lc_gguf_close(&f);
  return st;
}

lc_status lc_tok_load_gguf_mem(lc_tokenizer **t, const void *data, size_t len, const char *label) {
  *t = NULL;
  lc_gguf_file f;
  LC_TRY(lc_gguf_open_mem(&f, data, len, label));
  src s = {.mem = data, .size = len, .label = label};
  const lc_status st = from_file(t, &f, &s);
  lc_gguf_close(&f);
  return st;
}
