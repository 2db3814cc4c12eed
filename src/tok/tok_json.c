// Loading a Hugging Face tokenizer.json (and the tokenizer_config.json beside it): the BPE
// model (vocab, merges, options), added_tokens, and the pipeline (tok_json_pipeline.c).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/fsutil.h"
#include "tok/tok_json.h"
#include "tok/unicode.h"

static lc_status model_options(lc_tokenizer *t, const cJSON *m) {
  const char *ty, *s;
  LC_TRY(lc_tj_str(t, m, "type", "model", 0, &ty));
  if (ty && strcmp(ty, "BPE"))
    return lc_fail(LC_EFORMAT, "%s: model.type is '%s'; longctx implements BPE tokenizers only (GPT-2, Llama, Mistral, Qwen, SmolLM)",
                   t->label, lc_tok_show(ty));
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(m, "dropout");
  if (d && !cJSON_IsNull(d) && !(cJSON_IsNumber(d) && d->valuedouble == 0))
    return lc_fail(LC_EFORMAT, "%s: model.dropout is set; longctx tokenizes deterministically (no BPE dropout): set "
                   "\"dropout\": null in the file's \"model\" to tokenize as tokenizers does without dropout", t->label);
  const char *fix[] = {"continuing_subword_prefix", "end_of_word_suffix"};
  for (int i = 0; i < 2; i++) {
    LC_TRY(lc_tj_str(t, m, fix[i], "model", 0, &s));
    if (s && s[0]) return lc_fail(LC_EFORMAT, "%s: model.%s is '%s'; longctx implements BPE without it", t->label, fix[i], lc_tok_show(s));
  }
  LC_TRY(lc_tj_bool(t, m, "byte_fallback", "model", 0, &t->byte_fallback));
  LC_TRY(lc_tj_bool(t, m, "fuse_unk", "model", 0, &t->fuse_unk));
  return lc_tj_bool(t, m, "ignore_merges", "model", 0, &t->ignore_merges);
}

static lc_status vocab(lc_tokenizer *t, const cJSON *m) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, "vocab");
  if (!cJSON_IsObject(v)) return lc_fail(LC_EFORMAT, "%s: model.vocab is %s, an object {token: id} is needed", t->label, lc_tj_type(v));
  const cJSON *x;
  cJSON_ArrayForEach(x, v) {
    char where[128], d[64];
    const char *k = x->string ? x->string : "";
    snprintf(where, sizeof where, "model.vocab['%s']", lc_tok_disp(k, strlen(k), d, sizeof d));
    int32_t id;
    LC_TRY(lc_tj_id(t, x, where, &id));
    LC_TRY(lc_tokb_set_str(t, id, k, strlen(k), 0, where));
  }
  if (!t->n_ids) return lc_fail(LC_EFORMAT, "%s: model.vocab is empty", t->label);
  LC_TRY(lc_tokb_index_vocab(t));
  const char *unk;
  LC_TRY(lc_tj_str(t, m, "unk_token", "model", 0, &unk));
  if (unk) {
    t->unk = lc_smap_get(&t->spelled, unk, strlen(unk));
    char d[64];
    if (t->unk < 0)
      return lc_fail(LC_EFORMAT, "%s: model.unk_token '%s' is not in the vocabulary", t->label, lc_tok_disp(unk, strlen(unk), d, sizeof d));
  }
  return LC_OK;
}

static lc_status merges(lc_tokenizer *t, const cJSON *m) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(m, "merges");
  if (!list || cJSON_IsNull(list)) list = NULL;
  else if (!cJSON_IsArray(list)) return lc_fail(LC_EFORMAT, "%s: model.merges is %s, an array is needed", t->label, lc_tj_type(list));
  const int n = list ? cJSON_GetArraySize(list) : 0;
  LC_TRY(lc_pmap_init(&t->merges, (size_t)n));
  int rank = 0;
  const cJSON *x;
  if (list) cJSON_ArrayForEach(x, list) {
    char where[64];
    snprintf(where, sizeof where, "model.merges[%d]", rank);
    const char *a, *b;
    size_t an, bn;
    if (cJSON_IsString(x) && x->valuestring) { // "left right"
      a = x->valuestring;
      const char *sp = strchr(a, ' ');
      if (!sp) return lc_fail(LC_EFORMAT, "%s: %s is '%s', not two tokens separated by a space", t->label, where, lc_tok_show(a));
      an = (size_t)(sp - a);
      b = sp + 1;
      bn = strlen(b);
    } else if (cJSON_IsArray(x) && cJSON_GetArraySize(x) == 2 && cJSON_IsString(x->child) &&
               cJSON_IsString(x->child->next) && x->child->valuestring && x->child->next->valuestring) {
      a = x->child->valuestring;
      b = x->child->next->valuestring;
      an = strlen(a);
      bn = strlen(b);
    } else {
      return lc_fail(LC_EFORMAT, "%s: %s is %s; a merge is \"left right\" or [\"left\", \"right\"]", t->label, where, lc_tj_type(x));
    }
    LC_TRY(lc_tokb_add_merge(t, a, an, b, bn, rank, where));
    rank++;
  }
  return LC_OK;
}

static lc_status added_tokens(lc_tokenizer *t, const cJSON *root) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
  if (!list || cJSON_IsNull(list)) return LC_OK;
  if (!cJSON_IsArray(list)) return lc_fail(LC_EFORMAT, "%s: added_tokens is %s, an array is needed", t->label, lc_tj_type(list));
  int i = 0;
  const cJSON *x;
  cJSON_ArrayForEach(x, list) {
    char where[64];
    snprintf(where, sizeof where, "added_tokens[%d]", i++);
    if (!cJSON_IsObject(x)) return lc_fail(LC_EFORMAT, "%s: %s is %s, an object is needed", t->label, where, lc_tj_type(x));
    lc_added_tok a = {0};
    const char *content;
    LC_TRY(lc_tj_str(t, x, "content", where, 1, &content));
    char wid[80];
    snprintf(wid, sizeof wid, "%s.id", where);
    LC_TRY(lc_tj_id(t, cJSON_GetObjectItemCaseSensitive(x, "id"), wid, &a.id));
    a.content = (char *)content;
    a.len = strlen(content);
    LC_TRY(lc_tj_bool(t, x, "special", where, 0, &a.special));
    LC_TRY(lc_tj_bool(t, x, "normalized", where, !a.special, &a.normalized));
    LC_TRY(lc_tj_bool(t, x, "single_word", where, 0, &a.single_word));
    LC_TRY(lc_tj_bool(t, x, "lstrip", where, 0, &a.lstrip));
    LC_TRY(lc_tj_bool(t, x, "rstrip", where, 0, &a.rstrip));
    LC_TRY(lc_tokb_add_token(t, &a));
  }
  return LC_OK;
}

static lc_status from_root(lc_tokenizer *t, const cJSON *root) {
  if (!cJSON_IsObject(root)) return lc_fail(LC_EFORMAT, "%s: the file is %s, not a tokenizer.json object", t->label, lc_tj_type(root));
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
  if (!cJSON_IsObject(m))
    return lc_fail(LC_EFORMAT, "%s: \"model\" is %s; is this a Hugging Face tokenizer.json?", t->label, lc_tj_type(m));
  LC_TRY(model_options(t, m));
  LC_TRY(lc_tj_pipeline(t, root));
  LC_TRY(vocab(t, m));
  LC_TRY(merges(t, m));
  LC_TRY(added_tokens(t, root));
  LC_TRY(lc_tj_post(t, root));
  if (t->n_pre_ids) t->bos = t->pre_ids[0];
  return lc_tokb_finish(t);
}

lc_status lc_tok_load_json_mem(lc_tokenizer **out, const char *json, size_t len, const char *label) {
  *out = NULL;
  lc_tokenizer *t;
  LC_TRY(lc_tokb_new(&t, label));
  cJSON *root = cJSON_ParseWithLength(json, len);
  lc_status st;
  if (!root) {
    const char *e = cJSON_GetErrorPtr();
    const size_t at = e && e >= json && e <= json + len ? (size_t)(e - json) : len;
    st = lc_fail(LC_EFORMAT, "%s: not valid JSON (the parser stopped at byte %zu of %zu); is this a tokenizer.json?", t->label,
                 at, len);
  } else {
    st = from_root(t, root);
    cJSON_Delete(root);
  }
  if (st != LC_OK) {
    lc_tok_free(t);
    return st;
  }
  *out = t;
  return LC_OK;
}

// bos_token / eos_token are a string or {"content": ...}; chat_template a string or a list
// of {"name", "template"} (the "default" one).
static const char *token_field(const cJSON *c, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, key);
  if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static lc_status set_template(lc_tokenizer *t, const char *s, size_t n) {
  free(t->chat_template);
  t->chat_template = malloc(n + 1);
  if (!t->chat_template) return lc_fail(LC_ENOMEM, "%s: out of memory", t->label);
  memcpy(t->chat_template, s, n);
  t->chat_template[n] = 0;
  return LC_OK;
}

static lc_status read_config(lc_tokenizer *t, const char *dir) {
  char path[4096];
  char *data;
  size_t len;
  if (lc_path_join(path, sizeof path, dir, "chat_template.jinja") == LC_OK && lc_is_file(path)) {
    LC_TRY(lc_read_file(path, (size_t)1 << 24, &data, &len));
    const lc_status st = set_template(t, data, len);
    free(data);
    LC_TRY(st);
  }
  if (lc_path_join(path, sizeof path, dir, "tokenizer_config.json") != LC_OK || !lc_is_file(path)) return LC_OK;
  LC_TRY(lc_read_file(path, (size_t)1 << 28, &data, &len));
  cJSON *c = cJSON_ParseWithLength(data, len);
  free(data);
  if (!cJSON_IsObject(c)) {
    cJSON_Delete(c);
    return lc_fail(LC_EFORMAT, "%s: not a JSON object; fix or remove it", path);
  }
  lc_status st = LC_OK;
  const char *names[2] = {token_field(c, "bos_token"), token_field(c, "eos_token")};
  int32_t *ids[2] = {&t->bos, &t->eos};
  for (int i = 0; i < 2 && st == LC_OK; i++) {
    if (!names[i]) continue;
    const int32_t id = lc_tok_id(t, names[i]);
    if (id < 0) st = lc_fail(LC_EFORMAT, "%s: %s '%s' is not a token of %s", path, i ? "eos_token" : "bos_token", lc_tok_show(names[i]), t->label);
    *ids[i] = id;
  }
  const cJSON *ct = cJSON_GetObjectItemCaseSensitive(c, "chat_template");
  if (st == LC_OK && cJSON_IsString(ct)) st = set_template(t, ct->valuestring, strlen(ct->valuestring));
  if (st == LC_OK && cJSON_IsArray(ct)) {
    const cJSON *x;
    cJSON_ArrayForEach(x, ct) {
      const cJSON *nm = cJSON_GetObjectItemCaseSensitive(x, "name"), *tp = cJSON_GetObjectItemCaseSensitive(x, "template");
      if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "default") && cJSON_IsString(tp))
        st = set_template(t, tp->valuestring, strlen(tp->valuestring));
    }
  }
  cJSON_Delete(c);
  return st;
}

lc_status lc_tok_load_json(lc_tokenizer **out, const char *path) {
  *out = NULL;
  char file[4096], dir[4096];
  if (lc_is_dir(path)) {
    LC_TRY(lc_path_join(file, sizeof file, path, "tokenizer.json"));
    snprintf(dir, sizeof dir, "%s", path);
    if (!lc_is_file(file))
      return lc_fail(LC_EIO, "%s: the directory has no tokenizer.json; give the model's directory or its tokenizer.json", path);
  } else {
    snprintf(file, sizeof file, "%s", path);
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
  }
  char *data;
  size_t len;
  LC_TRY(lc_read_file(file, (size_t)1 << 30, &data, &len));
  lc_tokenizer *t;
  const lc_status st = lc_tok_load_json_mem(&t, data, len, file);
  free(data);
  LC_TRY(st);
  const lc_status cs = read_config(t, dir);
  if (cs != LC_OK) {
    lc_tok_free(t);
    return cs;
  }
  *out = t;
  return LC_OK;
}
