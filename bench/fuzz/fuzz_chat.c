// libFuzzer target: a conversation record (one JSONL line, any of the three forms
// src/io/conv.h reads) through `prepare --chat`'s path: lc_conv_parse, then each chat
// template of tests/data/chat (ChatML as SmolLM2's and Qwen2.5's, Qwen3, Llama 3, Llama 3.1,
// Mistral, Llama 2, each with its real tokenizer) renders it and encodes it with its loss
// mask. The first input byte picks the template and the loss mode (--train-on), the rest
// is the record. Properties checked for what is accepted:
//   - a parsed record has at least one turn, known roles, a system turn only first;
//   - the rendered text is NUL-terminated at its length; the assistant spans are one per
//     assistant turn, in order, inside the text, each naming an assistant message;
//   - the ids and mask agree: one mask byte per id, each 0 or 1, counted = the mask's sum;
//     --train-on all counts every id; last counts at most what assistant counts; a
//     conversation with no assistant turn counts nothing under assistant or last;
//     every id is in the vocabulary.
// Refusals (a malformed record; a conversation a template cannot render; text that is not
// UTF-8, which the tokenizer refuses in every loss mode alike) leave one line.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#include <cjson/cJSON.h>
#include "io/conv.h"
#include "tok/chat_template.h"
#include "tok/tokenizer.h"

#ifndef LC_FUZZ_SOURCE_DIR
#error "LC_FUZZ_SOURCE_DIR (the source tree, for tests/data/chat) is set by bench/fuzz/fuzz.cmake"
#endif

static const char *const families[] = {"smollm2", "qwen25", "qwen3", "llama3", "llama31", "mistral", "llama2"};
#define N_FAM ((int)(sizeof families / sizeof families[0]))

typedef struct {
  lc_tokenizer *t;
  lc_chat_tpl ct;
} family;

static family fam[N_FAM];

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  const long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) free(b), b = NULL;
  if (b) b[n] = 0;
  fclose(f);
  return b;
}

// Each family's tokenizer and template, as tests/test_chat.c loads them from the goldens.
static void load_families(void) {
  char path[1024];
  for (int i = 0; i < N_FAM; i++) {
    snprintf(path, sizeof path, "%s/tests/data/chat/%s.json", LC_FUZZ_SOURCE_DIR, families[i]);
    char *txt = slurp(path);
    cJSON *g = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    if (!g) {
      fprintf(stderr, "fuzz_chat: cannot read %s\n", path);
      abort();
    }
    snprintf(path, sizeof path, "%s/%s", LC_FUZZ_SOURCE_DIR, cJSON_GetObjectItem(g, "tokenizer")->valuestring);
    if (lc_tok_load_json(&fam[i].t, path) != LC_OK) {
      fprintf(stderr, "fuzz_chat: %s: %s\n", path, lc_errmsg());
      abort();
    }
    lc_tok_set_bos_eos(fam[i].t, lc_tok_id(fam[i].t, cJSON_GetObjectItem(g, "bos")->valuestring),
                       lc_tok_id(fam[i].t, cJSON_GetObjectItem(g, "eos")->valuestring));
    if (lc_chat_tpl_recognise(&fam[i].ct, fam[i].t, cJSON_GetObjectItem(g, "template")->valuestring) != LC_OK) {
      fprintf(stderr, "fuzz_chat: %s's template: %s\n", families[i], lc_errmsg());
      abort();
    }
    cJSON_Delete(g);
  }
}

static void check_conv(const lc_conv *c) {
  if (c->n < 1 || !c->msgs) LC_FUZZ_TRAP();
  for (int i = 0; i < c->n; i++) {
    const lc_role r = c->msgs[i].role;
    if ((r != LC_ROLE_SYSTEM && r != LC_ROLE_USER && r != LC_ROLE_ASSISTANT) || !c->msgs[i].content) LC_FUZZ_TRAP();
    if (r == LC_ROLE_SYSTEM && i > 0) LC_FUZZ_TRAP();
  }
}

// Renders with and without the generation prompt; 0 when the template refuses the conversation.
static int check_render(const family *f, const lc_conv *c) {
  for (int gen = 0; gen < 2; gen++) {
    char *text = NULL;
    size_t len = 0;
    lc_chat_span *sp = NULL;
    int ns = -1;
    lc_status st = lc_chat_render_text(&f->ct, c, gen, &text, &len, &sp, &ns);
    if (st != LC_OK) {
      lc_fuzz_refused(st);
      free(text), free(sp);
      if (gen) LC_FUZZ_TRAP(); // the same conversation rendered without the prompt
      return 0;
    }
    if (!text || text[len] || strlen(text) != len) LC_FUZZ_TRAP();
    if (ns != lc_conv_n_assistant(c)) LC_FUZZ_TRAP();
    size_t prev_end = 0;
    int prev_msg = -1;
    for (int k = 0; k < ns; k++) {
      if (sp[k].start < prev_end || sp[k].end < sp[k].start || sp[k].end > len) LC_FUZZ_TRAP();
      if (sp[k].msg <= prev_msg || sp[k].msg >= c->n || c->msgs[sp[k].msg].role != LC_ROLE_ASSISTANT) LC_FUZZ_TRAP();
      prev_end = sp[k].end, prev_msg = sp[k].msg;
    }
    free(text);
    free(sp);
  }
  return 1;
}

// The counted tokens; -1 when the tokenizer refuses the text (not UTF-8: one line).
static int64_t check_encode(family *f, const lc_conv *c, lc_train_on on) {
  lc_tok_ids ids = {0};
  unsigned char *mask = NULL;
  size_t cap = 0;
  uint64_t counted = ~0ull;
  lc_status st = lc_chat_encode(&f->ct, f->t, c, on, &ids, &mask, &cap, &counted);
  if (st != LC_OK) {
    lc_fuzz_refused(st);
    free(ids.v);
    free(mask);
    return -1;
  }
  if (ids.n > cap && ids.n) LC_FUZZ_TRAP();
  uint64_t sum = 0;
  const int32_t nv = lc_tok_n_ids(f->t);
  for (size_t i = 0; i < ids.n; i++) {
    if (mask[i] > 1 || ids.v[i] < 0 || ids.v[i] >= nv) LC_FUZZ_TRAP();
    sum += mask[i];
  }
  if (sum != counted) LC_FUZZ_TRAP();
  if (on == LC_TRAIN_ON_ALL && counted != ids.n) LC_FUZZ_TRAP();
  if (on != LC_TRAIN_ON_ALL && lc_conv_n_assistant(c) == 0 && counted != 0) LC_FUZZ_TRAP();
  free(ids.v);
  free(mask);
  return (int64_t)counted;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int loaded;
  if (!loaded) load_families(), loaded = 1;
  if (size < 1) return 0;
  family *f = &fam[data[0] % N_FAM];
  const int mode = (data[0] / N_FAM) % 2; // 0: assistant + last + all, 1: assistant only (faster)
  lc_conv c;
  lc_status st = lc_conv_parse(&c, (const char *)data + 1, size - 1);
  if (st != LC_OK) {
    lc_fuzz_refused(st);
    lc_conv_free(&c);
    return 0;
  }
  check_conv(&c);
  if (check_render(f, &c)) {
    const int64_t a = check_encode(f, &c, LC_TRAIN_ON_ASSISTANT);
    if (mode == 0) { // the same text: refused by every mode or by none
      const int64_t l = check_encode(f, &c, LC_TRAIN_ON_LAST), all = check_encode(f, &c, LC_TRAIN_ON_ALL);
      if ((a < 0) != (l < 0) || (a < 0) != (all < 0) || l > a || a > all) LC_FUZZ_TRAP();
    }
  }
  lc_conv_free(&c);
  return 0;
}
