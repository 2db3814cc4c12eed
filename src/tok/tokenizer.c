// The tokenizer object: queries and freeing (loading: tok_json.c, tok_vocab.c, tok_gguf.c;
// encoding: encode.c; decoding: decode.c).
#include <stdlib.h>
#include <string.h>

#include "tok/tok_internal.h"

void lc_tok_free(lc_tokenizer *t) {
  if (!t) return;
  lc_tbuf_free(&t->str_pool);
  free(t->str_off);
  free(t->str_len);
  free(t->has);
  free(t->added_of);
  lc_smap_free(&t->spelled);
  lc_smap_free(&t->vocab);
  lc_pmap_free(&t->merges);
  for (int i = 0; i < t->n_norm; i++) {
    free(t->norm[i].a);
    free(t->norm[i].b);
  }
  for (int i = 0; i < t->n_dec; i++) {
    free(t->dec[i].a);
    free(t->dec[i].b);
  }
  for (int i = 0; i < t->n_added; i++) {
    free(t->added[i].content);
    free(t->added[i].shown);
  }
  free(t->added);
  lc_smap_free(&t->added_ids);
  lc_trie_free(&t->trie_raw);
  lc_trie_free(&t->trie_norm);
  free(t->pre_ids);
  free(t->post_ids);
  free(t->chat_template);
  lc_tcache_free(&t->cache);
  for (int i = 0; i < LC_TOK_MAX_STEPS + 3; i++) lc_tbuf_free(&t->scratch[i]);
  free(t->sym);
  free(t->heap);
  free(t->word_ids.v);
  free(t);
}

int32_t lc_tok_vocab_size(const lc_tokenizer *t) { return t ? t->vocab_size : 0; }
int32_t lc_tok_n_ids(const lc_tokenizer *t) { return t ? t->n_ids : 0; }

int32_t lc_tok_id(const lc_tokenizer *t, const char *token) {
  if (!t || !token) return -1;
  const size_t n = strlen(token);
  const int32_t a = lc_smap_get(&t->added_ids, token, n);
  return a >= 0 ? a : lc_smap_get(&t->spelled, token, n);
}

int32_t lc_tok_bos(const lc_tokenizer *t) { return t ? t->bos : -1; }
int32_t lc_tok_eos(const lc_tokenizer *t) { return t ? t->eos : -1; }

void lc_tok_set_bos_eos(lc_tokenizer *t, int32_t bos, int32_t eos) {
  if (!t) return;
  t->bos = bos;
  t->eos = eos;
}

int lc_tok_add_bos(const lc_tokenizer *t) { return t && t->n_pre_ids > 0; }
int lc_tok_add_eos(const lc_tokenizer *t) { return t && t->n_post_ids > 0; }
const char *lc_tok_chat_template(const lc_tokenizer *t) { return t ? t->chat_template : NULL; }
const char *lc_tok_describe(const lc_tokenizer *t) { return t ? t->describe : ""; }
