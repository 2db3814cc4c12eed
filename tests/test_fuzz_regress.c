#define _POSIX_C_SOURCE 200809L
// Every file in tests/data/fuzz (crashers found by bench/fuzz and hand-made edge cases) goes
// through its reader: each must return OK or a clean one-line error, never crash (this test
// also runs under ASan/UBSan). Names: st_* are safetensors inputs, tok_* token files, gguf_*
// GGUF files (tools/make_gguf_test.py) -- these three go through all three binary parsers --;
// config_* HF config.json, peft_* adapter_config.json, machine_* machine files, hardware_*
// hardware files, ckpt_* trainer_state.json [NUL checksums.json] (as fuzz_checkpoint reads
// them), jsonl_* JSONL records, chat_* conversation records (as fuzz_chat reads them).
// ".ok." in a name means it must be accepted, ".err." that it
// must not. gguf_valid.ok.bin is also cut at every byte: every proper prefix must be refused
// cleanly.
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "io/conv.h"
#include "io/fsutil.h"
#include "io/gguf.h"
#include "io/jsonl.h"
#include "io/safetensors.h"
#include "io/tokfile.h"
#include "model/hf.h"
#include "model/peft.h"
#include "plan/rates.h"
#include "testutil.h"
#include "tok/chat_template.h"
#include "train/checkpoint.h"

static int clean_error(lc_status st) {
  const char *m = lc_errmsg();
  return (st == LC_EFORMAT || st == LC_EINVAL || st == LC_EIO) && m[0] && !strchr(m, '\n');
}

static void feed_st(const char *name, const char *path, const char *data, size_t len) {
  int want_ok = strstr(name, ".ok.") != NULL, want_err = strstr(name, ".err.") != NULL;
  lc_st_file f;
  for (int from_file = 0; from_file < 2; from_file++) {
    lc_status st = from_file ? lc_st_open(&f, path) : lc_st_open_mem(&f, data, len, name);
    if (st == LC_OK) {
      int readable = 1;
      for (int i = 0; i < f.n; i++) {
        const lc_st_tensor *t = &f.tensors[i];
        float *buf = malloc(sizeof(float) * (t->numel + 1));
        lc_status r = lc_st_read_f32(&f, t, buf, t->numel);
        readable &= r == LC_OK || (!lc_dtype_is_float(t->dtype) && clean_error(r));
        readable &= lc_st_find(&f, t->name) != NULL;
        free(buf);
      }
      CHECK(readable, "%s: opened but a tensor is not readable/findable", name);
      lc_st_close(&f);
    } else {
      CHECK(clean_error(st), "%s: status %d without a clean message: %s", name, st, lc_errmsg());
    }
    CHECK(!want_ok || st == LC_OK, "%s must open: %s", name, lc_errmsg());
    CHECK(!want_err || st != LC_OK, "%s must be rejected", name);
  }
}

static void feed_tok(const char *name, const char *path, const char *data, size_t len) {
  int want_ok = strstr(name, ".ok.") != NULL, want_err = strstr(name, ".err.") != NULL;
  lc_tokfile t;
  for (int from_file = 0; from_file < 2; from_file++) {
    lc_status st = from_file ? lc_tokfile_open(&t, path) : lc_tokfile_open_mem(&t, data, len, name);
    if (st == LC_OK) {
      const uint64_t index = t.n_docs ? 8 + 8 * t.n_docs : 0; // versions 2-3: the document index
      const uint64_t mask = t.mask ? t.count : 0;               // version 3: a mask byte per token
      CHECK((t.version == 3) == (t.mask != NULL), "%s: version %u with%s a mask", name, t.version, t.mask ? "" : "out");
      CHECK(LC_TOKFILE_HEADER + t.count * t.bytes_per_token + mask + index == len, "%s: count vs size", name);
      (void)lc_tokfile_get(&t, t.count - 1);
      lc_status v = lc_tokfile_check_vocab(&t, 256);
      CHECK(v == LC_OK || clean_error(v), "%s: vocab check", name);
      lc_tokfile_close(&t);
    } else {
      CHECK(clean_error(st), "%s: status %d without a clean message: %s", name, st, lc_errmsg());
    }
    CHECK(!want_ok || st == LC_OK, "%s must open: %s", name, lc_errmsg());
    CHECK(!want_err || st != LC_OK, "%s must be rejected", name);
  }
}

// A GGUF that opened must be self-consistent: every tensor findable, inside the file, and
// readable in full (or a clean error for a type that does not dequantize); every metadata
// value readable as its own type.
static int gguf_consistent(lc_gguf_file *f, const char *name) {
  int ok = 1;
  for (int i = 0; i < f->n; i++) {
    const lc_gguf_tensor *t = &f->tensors[i];
    ok &= lc_gguf_find(f, t->name) == t;
    ok &= f->data_off + t->offset + t->nbytes <= f->size;
    float *buf = malloc(sizeof(float) * (t->numel + 1));
    lc_status r = lc_gguf_read_f32(f, t, 0, t->numel, buf);
    ok &= r == LC_OK || (!lc_gguf_type_readable(t->type) && clean_error(r));
    if (t->numel > 1) {
      r = lc_gguf_read_f32(f, t, 1, t->numel - 1, buf);
      ok &= r == LC_OK || (!lc_gguf_type_readable(t->type) && clean_error(r));
    }
    free(buf);
  }
  for (int i = 0; i < f->n_kv; i++) {
    const lc_gguf_kv *kv = &f->kv[i];
    char s[64];
    double d;
    int64_t v;
    lc_status r = kv->type == LC_GGUF_STR ? lc_gguf_kv_str(f, kv, s, sizeof s)
                  : kv->type == LC_GGUF_ARR ? (kv->count ? (kv->atype == LC_GGUF_STR ? lc_gguf_arr_str(f, kv, kv->count - 1, s, sizeof s)
                                                                                       : lc_gguf_arr_num(f, kv, kv->count - 1, &d))
                                                         : LC_OK)
                  : lc_gguf_kv_num(f, kv, &d);
    ok &= r == LC_OK || clean_error(r);
    ok &= lc_gguf_find_kv(f, kv->key) == kv;
    (void)lc_gguf_kv_int(f, kv, &v);
  }
  if (!ok) fprintf(stderr, "%s: opened but not self-consistent (%s)\n", name, lc_errmsg());
  return ok;
}

static void feed_gguf(const char *name, const char *path, const char *data, size_t len) {
  int want_ok = strstr(name, ".ok.") != NULL, want_err = strstr(name, ".err.") != NULL;
  lc_gguf_file f;
  for (int from_file = 0; from_file < 2; from_file++) {
    if (from_file && !path) continue;
    lc_status st = from_file ? lc_gguf_open(&f, path) : lc_gguf_open_mem(&f, data, len, name);
    if (st == LC_OK) {
      CHECK(gguf_consistent(&f, name), "%s: a GGUF that opened must be consistent", name);
      lc_gguf_close(&f);
    } else {
      CHECK(clean_error(st), "%s: status %d without a clean message: %s", name, st, lc_errmsg());
    }
    CHECK(!want_ok || st == LC_OK, "%s must open: %s", name, lc_errmsg());
    CHECK(!want_err || st != LC_OK, "%s must be rejected", name);
  }
}

// Every prefix of a valid GGUF file that ends before its last tensor's data does is a
// truncated file: refused, one clean line. (Cutting only the padding after the last
// tensor leaves a valid file.)
static void gguf_truncations(const char *name, const char *data, size_t len) {
  lc_gguf_file f;
  if (lc_gguf_open_mem(&f, data, len, name) != LC_OK) return; // reported by feed_gguf
  uint64_t need = f.data_off;
  for (int i = 0; i < f.n; i++)
    if (f.data_off + f.tensors[i].offset + f.tensors[i].nbytes > need) need = f.data_off + f.tensors[i].offset + f.tensors[i].nbytes;
  lc_gguf_close(&f);
  int bad = 0;
  for (size_t n = 0; n <= len; n++) {
    lc_status st = lc_gguf_open_mem(&f, data, n, name);
    if (st == LC_OK) lc_gguf_close(&f);
    const int ok = n < need ? st != LC_OK && clean_error(st) : st == LC_OK;
    if (!ok && !bad++) CHECK(0, "%s cut to %zu of %zu bytes (data ends at %llu): status %d: %s", name, n, len,
                             (unsigned long long)need, st, lc_errmsg());
  }
  CHECK(bad == 0, "%s: %d of %zu truncations wrong", name, bad, len + 1);
  if (!bad) printf("%s: the %llu cuts before its data ends are refused with one line, the rest open\n", name,
                   (unsigned long long)need);
}

// The JSON readers of the other kinds: the input as the file its reader takes (in the
// directory dir), the verdict against the name's .ok./.err.
static char tmpdir[64];

static void put(const char *name, const char *data, size_t len) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  FILE *f = fopen(p, "wb");
  CHECK(f && fwrite(data, 1, len, f) == len && fclose(f) == 0, "writing %s", p);
}

static void drop(const char *name) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  unlink(p);
}

static void verdict(const char *name, lc_status st) {
  CHECK(st == LC_OK || clean_error(st), "%s: status %d without a clean message: %s", name, st, lc_errmsg());
  CHECK(!strstr(name, ".ok.") || st == LC_OK, "%s must be accepted: %s", name, lc_errmsg());
  CHECK(!strstr(name, ".err.") || st != LC_OK, "%s must be refused", name);
}

static lc_status count_record(void *ctx, const char *text, size_t len) {
  (void)text, (void)len;
  ++*(long *)ctx;
  return LC_OK;
}

// chat_*: fuzz_chat's input: byte 0 picks the template (mod 7, fuzz_chat.c's order of the
// goldens in tests/data/chat), the rest is one conversation record; accepted means parsed,
// rendered and encoded with its loss mask in every mode.
static lc_status feed_chat(const char *data, size_t len) {
  static const char *const fams[] = {"smollm2", "qwen25", "qwen3", "llama3", "llama31", "mistral", "llama2"};
  if (len < 1) return lc_fail(LC_EFORMAT, "empty chat input");
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/data/chat/%s.json", LC_SOURCE_DIR, fams[(unsigned char)data[0] % 7]);
  char *gtxt;
  size_t glen;
  if (lc_read_file(path, (size_t)1 << 24, &gtxt, &glen) != LC_OK) return LC_EIO;
  cJSON *g = cJSON_ParseWithLength(gtxt, glen);
  free(gtxt);
  snprintf(path, sizeof path, "%s/%s", LC_SOURCE_DIR, cJSON_GetObjectItem(g, "tokenizer")->valuestring);
  lc_tokenizer *t = NULL;
  lc_status st = lc_tok_load_json(&t, path);
  lc_chat_tpl ct;
  if (st == LC_OK) {
    lc_tok_set_bos_eos(t, lc_tok_id(t, cJSON_GetObjectItem(g, "bos")->valuestring),
                       lc_tok_id(t, cJSON_GetObjectItem(g, "eos")->valuestring));
    st = lc_chat_tpl_recognise(&ct, t, cJSON_GetObjectItem(g, "template")->valuestring);
  }
  cJSON_Delete(g);
  lc_conv c;
  if (st == LC_OK) st = lc_conv_parse(&c, data + 1, len - 1);
  else memset(&c, 0, sizeof c);
  for (int on = 0; st == LC_OK && on < 3; on++) {
    lc_tok_ids ids = {0};
    unsigned char *mask = NULL;
    size_t cap = 0;
    uint64_t counted = 0;
    st = lc_chat_encode(&ct, t, &c, (lc_train_on)on, &ids, &mask, &cap, &counted);
    uint64_t sum = 0;
    for (size_t i = 0; st == LC_OK && i < ids.n; i++) sum += mask[i];
    CHECK(st != LC_OK || sum == counted, "chat: counted %llu, mask sums to %llu", (unsigned long long)counted,
          (unsigned long long)sum);
    free(ids.v);
    free(mask);
  }
  lc_conv_free(&c);
  if (t) lc_tok_free(t);
  return st;
}

static int feed_json(const char *name, const char *data, size_t len) {
  char path[256];
  if (!strncmp(name, "config_", 7)) {
    lc_config cfg;
    verdict(name, lc_hf_parse_config(data, len, name, &cfg));
  } else if (!strncmp(name, "peft_", 5)) {
    put("adapter_config.json", data, len);
    lc_lora l;
    verdict(name, lc_peft_read_config(tmpdir, &l));
  } else if (!strncmp(name, "machine_", 8) || !strncmp(name, "hardware_", 9)) {
    snprintf(path, sizeof path, "%s/rates.json", tmpdir);
    put("rates.json", data, len);
    static lc_rates r;
    verdict(name, name[0] == 'm' ? lc_rates_load_machine(path, 1, 2, &r) : lc_rates_load_hardware(path, &r));
  } else if (!strncmp(name, "ckpt_", 5)) {
    const char *nul = memchr(data, 0, len);
    const size_t n = nul ? (size_t)(nul - data) : len;
    put("trainer_state.json", data, n);
    if (nul) put("checksums.json", nul + 1, len - n - 1);
    else drop("checksums.json");
    snprintf(path, sizeof path, "%s/trainer_state.json", tmpdir);
    lc_ckpt_state s;
    lc_status st = lc_checkpoint_read_state(path, &s);
    if (st == LC_OK) lc_checkpoint_state_free(&s);
    int verified;
    lc_status v = lc_checkpoint_verify(tmpdir, &verified);
    CHECK(v == LC_OK || clean_error(v), "%s: checksums: %s", name, lc_errmsg());
    verdict(name, st);
  } else if (!strncmp(name, "chat_", 5)) {
    verdict(name, feed_chat(data, len));
  } else if (!strncmp(name, "jsonl_", 6)) {
    long n = 0;
    verdict(name, lc_jsonl_each(data, len, name, "text", count_record, &n));
  } else {
    return 0;
  }
  return 1;
}

int main(void) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", __FILE__);
  char *slash = strrchr(dir, '/');
  if (slash) slash[1] = 0;
  else dir[0] = 0;
  strncat(dir, "data/fuzz", sizeof dir - strlen(dir) - 1);
  DIR *dp = opendir(dir);
  CHECK(dp != NULL, "cannot open %s (the test finds it next to its source file)", dir);
  int n_st = 0, n_tok = 0, n_gguf = 0, n_json = 0;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/lc_fuzz_regress.XXXXXX");
  CHECK(mkdtemp(tmpdir) != NULL, "mkdtemp");
  struct dirent *de;
  while (dp && (de = readdir(dp))) {
    const char *name = de->d_name;
    int st = !strncmp(name, "st_", 3), tok = !strncmp(name, "tok_", 4), gg = !strncmp(name, "gguf_", 5);
    if (name[0] == '.') continue;
    char path[2048], *data;
    size_t len;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (lc_read_file(path, (size_t)1 << 26, &data, &len) != LC_OK) {
      CHECK(0, "%s: %s", name, lc_errmsg());
      continue;
    }
    // Every binary input goes through the three binary parsers; the expectations apply to its own kind.
    if (!st && !tok && !gg) {
      if (feed_json(name, data, len)) n_json++;
      else CHECK(0, "%s: no reader has this prefix (see the top of this file)", name);
    } else if (st) {
      feed_st(name, path, data, len);
      feed_tok("(as token file)", path, data, len);
      feed_gguf("(as GGUF)", path, data, len);
      n_st++;
    } else if (tok) {
      feed_tok(name, path, data, len);
      feed_st("(as safetensors)", path, data, len);
      feed_gguf("(as GGUF)", path, data, len);
      n_tok++;
    } else {
      feed_gguf(name, path, data, len);
      feed_st("(as safetensors)", path, data, len);
      feed_tok("(as token file)", path, data, len);
      if (!strcmp(name, "gguf_valid.ok.bin")) gguf_truncations(name, data, len);
      n_gguf++;
    }
    free(data);
  }
  if (dp) closedir(dp);
  static const char *const made[] = {"adapter_config.json", "rates.json", "trainer_state.json", "checksums.json"};
  for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) drop(made[i]);
  rmdir(tmpdir);
  CHECK(n_st >= 10 && n_tok >= 5 && n_gguf >= 30 && n_json >= 2, "found %d safetensors, %d token, %d GGUF and %d JSON inputs in %s",
        n_st, n_tok, n_gguf, n_json, dir);
  return lc_test_finish("test_fuzz_regress");
}
