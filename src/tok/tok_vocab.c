// A tokenizer from a raw vocabulary as GGUF's tokenizer.ggml.* metadata holds it
// (lc_tok_from_vocab), built as tools/prepare_data.py's GGUFEncoder builds one with
// `tokenizers`: model "gpt2" is byte-level BPE from the tokens and merges with the
// pre-tokenizer of the family tokenizer.ggml.pre names (llama.cpp's names); model "llama"
// is SentencePiece BPE with byte fallback, its merges every split of a normal token into two
// tokens, ranked by the merged token's score (highest first; then by the two ids).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok_internal.h"
#include "tok/unicode.h"

typedef struct {
  const char *name;
  lc_tok_pattern pattern;
  int digits, nfc, ignore_merges;
} pre_def;

static const pre_def PRE[] = {
    {"default", LC_PAT_GPT2, 0, 0, 0},     {"gpt2", LC_PAT_GPT2, 0, 0, 0},       {"gpt-2", LC_PAT_GPT2, 0, 0, 0},
    {"phi-2", LC_PAT_GPT2, 0, 0, 0},       {"smollm", LC_PAT_GPT2, 1, 0, 0},     {"starcoder", LC_PAT_GPT2, 1, 0, 0},
    {"refact", LC_PAT_GPT2, 1, 0, 0},      {"codeshell", LC_PAT_GPT2, 1, 0, 0},  {"llama3", LC_PAT_LLAMA3, 0, 0, 1},
    {"llama-v3", LC_PAT_LLAMA3, 0, 0, 1},  {"llama-bpe", LC_PAT_LLAMA3, 0, 0, 1}, {"smaug-bpe", LC_PAT_LLAMA3, 0, 0, 0},
    {"dbrx", LC_PAT_LLAMA3, 0, 0, 0},      {"qwen2", LC_PAT_QWEN2, 0, 1, 0},     {"deepseek-r1-qwen", LC_PAT_QWEN2, 0, 1, 0},
};

enum { TYPE_NORMAL = 1, TYPE_CONTROL = 3, TYPE_USER = 4 };

static size_t slen(const char *const *s, const uint32_t *lens, int32_t i) { return lens ? lens[i] : strlen(s[i]); }

static lc_status dupstr(lc_tokenizer *t, const char *s, char **out, size_t *n) {
  *n = strlen(s);
  *out = malloc(*n + 1);
  if (!*out) return lc_fail(LC_ENOMEM, "%s: out of memory", t->label);
  memcpy(*out, s, *n + 1);
  return LC_OK;
}

static lc_status byte_level_pipeline(lc_tokenizer *t, const char *pre) {
  const pre_def *d = NULL;
  for (size_t i = 0; i < sizeof PRE / sizeof PRE[0]; i++)
    if (!strcmp(PRE[i].name, pre)) d = &PRE[i];
  if (!d) {
    char known[512] = "";
    for (size_t i = 0; i < sizeof PRE / sizeof PRE[0]; i++)
      snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", PRE[i].name);
    char dd[64];
    return lc_fail(LC_EFORMAT, "%s: tokenizer.ggml.pre '%s' is not a pre-tokenizer longctx knows (%s); use the model's tokenizer.json",
                   t->label, lc_tok_disp(pre, strlen(pre), dd, sizeof dd), known);
  }
  t->byte_level = 1;
  t->ignore_merges = d->ignore_merges;
  if (d->nfc) t->norm[t->n_norm++] = (lc_norm_step){.kind = LC_NORM_NFC};
  if (d->digits) t->pre[t->n_pre++] = (lc_pre_step){.kind = LC_PRE_DIGITS, .individual = 1};
  if (d->pattern != LC_PAT_GPT2) t->pre[t->n_pre++] = (lc_pre_step){.kind = LC_PRE_SPLIT, .pattern = d->pattern};
  t->pre[t->n_pre++] = (lc_pre_step){.kind = LC_PRE_BYTELEVEL, .use_regex = d->pattern == LC_PAT_GPT2};
  t->dec[t->n_dec++] = (lc_dec_step){.kind = LC_DEC_BYTELEVEL};
  t->has_decoder = 1;
  return LC_OK;
}

static lc_status sentencepiece_pipeline(lc_tokenizer *t, int add_space_prefix) {
  static const char *RUN = "\xe2\x96\x81"; // U+2581
  if (add_space_prefix) {
    lc_norm_step *p = &t->norm[t->n_norm++];
    *p = (lc_norm_step){.kind = LC_NORM_PREPEND};
    LC_TRY(dupstr(t, RUN, &p->a, &p->an));
  }
  lc_norm_step *r = &t->norm[t->n_norm++];
  *r = (lc_norm_step){.kind = LC_NORM_REPLACE};
  LC_TRY(dupstr(t, " ", &r->a, &r->an));
  LC_TRY(dupstr(t, RUN, &r->b, &r->bn));
  lc_dec_step *d = &t->dec[t->n_dec++];
  *d = (lc_dec_step){.kind = LC_DEC_REPLACE};
  LC_TRY(dupstr(t, RUN, &d->a, &d->an));
  LC_TRY(dupstr(t, " ", &d->b, &d->bn));
  t->dec[t->n_dec++] = (lc_dec_step){.kind = LC_DEC_BYTEFALLBACK};
  t->dec[t->n_dec++] = (lc_dec_step){.kind = LC_DEC_FUSE};
  t->dec[t->n_dec++] = (lc_dec_step){.kind = LC_DEC_STRIP, .ch = ' ', .start = 1, .stop = 0};
  t->has_decoder = 1;
  t->byte_fallback = 1;
  t->fuse_unk = 1;
  return LC_OK;
}

static lc_status byte_level_merges(lc_tokenizer *t, const lc_tok_vocab *v) {
  if (v->n_merges < 0 || (v->n_merges && !v->merges))
    return lc_fail(LC_EINVAL, "%s: %ld merges without their strings", t->label, (long)v->n_merges);
  LC_TRY(lc_pmap_init(&t->merges, (size_t)v->n_merges));
  for (int32_t k = 0; k < v->n_merges; k++) {
    char where[64];
    snprintf(where, sizeof where, "tokenizer.ggml.merges[%ld]", (long)k);
    if (!v->merges[k]) return lc_fail(LC_EINVAL, "%s: %s is missing", t->label, where);
    const char *m = v->merges[k];
    const size_t n = slen(v->merges, v->merge_lens, k);
    const char *sp = memchr(m, ' ', n);
    char d[64];
    if (!sp) return lc_fail(LC_EFORMAT, "%s: %s is '%s', not two tokens separated by a space", t->label, where, lc_tok_disp(m, n, d, sizeof d));
    LC_TRY(lc_tokb_add_merge(t, m, (size_t)(sp - m), sp + 1, n - (size_t)(sp - m) - 1, k, where));
  }
  return LC_OK;
}

typedef struct {
  double key; // -score
  int32_t a, b, merged;
} smerge;

static int smerge_cmp(const void *x, const void *y) {
  const smerge *p = x, *q = y;
  if (p->key != q->key) return p->key < q->key ? -1 : 1;
  if (p->a != q->a) return p->a < q->a ? -1 : 1;
  return p->b < q->b ? -1 : p->b > q->b;
}

// Every split of a normal token into two tokens, the highest-scoring merged token first.
static lc_status score_merges(lc_tokenizer *t, const lc_tok_vocab *v) {
  smerge *m = NULL;
  size_t n = 0, cap = 0;
  lc_status st = LC_OK;
  for (int32_t i = 0; i < v->n_tokens && st == LC_OK; i++) {
    if ((v->types ? v->types[i] : TYPE_NORMAL) != TYPE_NORMAL) continue;
    const char *s = t->str_pool.p + t->str_off[i];
    const size_t len = t->str_len[i];
    if (!len || lc_smap_get(&t->spelled, s, len) != i) continue; // a later duplicate stands for this string
    const float sc = v->scores ? v->scores[i] : 0.0f;
    const double key = isnan(sc) ? INFINITY : -(double)sc;
    for (size_t k = (size_t)lc_utf8_len((unsigned char)s[0]); k < len; k += (size_t)lc_utf8_len((unsigned char)s[k])) {
      const int32_t a = lc_smap_get(&t->spelled, s, k), b = lc_smap_get(&t->spelled, s + k, len - k);
      if (a < 0 || b < 0) continue;
      st = lc_tgrow((void **)&m, &cap, n + 1, sizeof *m);
      if (st != LC_OK) break;
      m[n++] = (smerge){key, a, b, i};
    }
  }
  if (st == LC_OK) {
    if (n) qsort(m, n, sizeof *m, smerge_cmp); // (m is NULL when nothing merges: qsort's pointer must not be)
    st = lc_pmap_init(&t->merges, n);
  }
  for (size_t k = 0; k < n && st == LC_OK; k++) st = lc_pmap_put(&t->merges, (uint32_t)m[k].a, (uint32_t)m[k].b, (uint32_t)k, (uint32_t)m[k].merged);
  t->n_merges = (int32_t)n;
  free(m);
  return st;
}

static lc_status build(lc_tokenizer *t, const lc_tok_vocab *v) {
  const int llama = !strcmp(v->model, "llama");
  if (llama) LC_TRY(sentencepiece_pipeline(t, v->add_space_prefix != 0));
  else LC_TRY(byte_level_pipeline(t, v->pre ? v->pre : "default"));
  for (int32_t i = 0; i < v->n_tokens; i++) {
    char where[64];
    snprintf(where, sizeof where, "tokenizer.ggml.tokens[%ld]", (long)i);
    if (!v->tokens[i]) return lc_fail(LC_EINVAL, "%s: %s is missing", t->label, where);
    LC_TRY(lc_tokb_set_str(t, i, v->tokens[i], slen(v->tokens, v->token_lens, i), 0, where));
  }
  LC_TRY(lc_tokb_index_vocab(t));
  if (llama) {
    const int32_t unk = v->unk >= 0 ? v->unk : 0;
    if (unk < v->n_tokens) t->unk = lc_smap_get(&t->spelled, t->str_pool.p + t->str_off[unk], t->str_len[unk]);
    LC_TRY(score_merges(t, v));
  } else {
    LC_TRY(byte_level_merges(t, v));
  }
  for (int32_t i = 0; v->types && i < v->n_tokens; i++) {
    if (v->types[i] != TYPE_CONTROL && v->types[i] != TYPE_USER) continue;
    const char *s = t->str_pool.p + t->str_off[i];
    const size_t len = t->str_len[i];
    if (!len) continue;
    lc_added_tok a = {.content = (char *)s, .len = len, .special = v->types[i] == TYPE_CONTROL};
    a.id = lc_smap_get(&t->spelled, s, len);
    if (t->added_of[a.id] >= 0) continue; // the same string twice
    // a.content points into str_pool, which add_token may not grow: it copies first.
    LC_TRY(lc_tokb_add_token(t, &a));
  }
  const int add_bos = v->add_bos < 0 ? llama : v->add_bos, add_eos = v->add_eos < 0 ? 0 : v->add_eos;
  t->bos = v->bos >= 0 && v->bos < v->n_tokens ? v->bos : -1;
  t->eos = v->eos >= 0 && v->eos < v->n_tokens ? v->eos : -1;
  if (add_bos && t->bos >= 0) {
    t->pre_ids = malloc(sizeof *t->pre_ids);
    if (!t->pre_ids) return lc_fail(LC_ENOMEM, "%s: out of memory", t->label);
    t->pre_ids[t->n_pre_ids++] = t->bos;
  }
  if (add_eos && t->eos >= 0) {
    t->post_ids = malloc(sizeof *t->post_ids);
    if (!t->post_ids) return lc_fail(LC_ENOMEM, "%s: out of memory", t->label);
    t->post_ids[t->n_post_ids++] = t->eos;
  }
  if (v->chat_template) {
    size_t n;
    LC_TRY(dupstr(t, v->chat_template, &t->chat_template, &n));
  }
  LC_TRY(lc_tokb_finish(t));
  t->vocab_size = v->n_tokens; // what prepare_data.py writes for a GGUF vocabulary
  return LC_OK;
}

lc_status lc_tok_from_vocab(lc_tokenizer **out, const lc_tok_vocab *v) {
  *out = NULL;
  if (!v || !v->model) return lc_fail(LC_EINVAL, "tokenizer: a vocabulary without tokenizer.ggml.model");
  const char *label = v->label ? v->label : "vocabulary";
  if (strcmp(v->model, "gpt2") && strcmp(v->model, "llama")) {
    char d[64];
    return lc_fail(LC_EFORMAT, "%s: tokenizer.ggml.model '%s' is not supported (gpt2 and llama are); use the model's tokenizer.json",
                   label, lc_tok_disp(v->model, strlen(v->model), d, sizeof d));
  }
  if (v->n_tokens <= 0 || v->n_tokens > LC_TOK_MAX_ID + 1 || !v->tokens)
    return lc_fail(LC_EFORMAT, "%s: %ld tokens; a vocabulary of 1..%d tokens is needed", label, (long)v->n_tokens, LC_TOK_MAX_ID + 1);
  lc_tokenizer *t;
  LC_TRY(lc_tokb_new(&t, label));
  const lc_status st = build(t, v);
  if (st != LC_OK) {
    lc_tok_free(t);
    return st;
  }
  *out = t;
  return LC_OK;
}
