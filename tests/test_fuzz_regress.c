#define _POSIX_C_SOURCE 200809L
// Every file in tests/data/fuzz (crashers found by bench/fuzz and hand-made edge cases) goes
// through the safetensors, token-file and GGUF parsers: each must return OK or a clean
// one-line error, never crash (this test also runs under ASan/UBSan). Names: st_* are
// safetensors inputs, tok_* token files, gguf_* GGUF files (tools/make_gguf_test.py);
// ".ok." in a name means it must open, ".err." that it must not. gguf_valid.ok.bin is also
// cut at every byte: every proper prefix must be refused cleanly.
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "io/fsutil.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "io/tokfile.h"
#include "testutil.h"

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
      CHECK(LC_TOKFILE_HEADER + t.count * t.bytes_per_token == len, "%s: count vs size", name);
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

int main(void) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", __FILE__);
  char *slash = strrchr(dir, '/');
  if (slash) slash[1] = 0;
  else dir[0] = 0;
  strncat(dir, "data/fuzz", sizeof dir - strlen(dir) - 1);
  DIR *dp = opendir(dir);
  CHECK(dp != NULL, "cannot open %s (the test finds it next to its source file)", dir);
  int n_st = 0, n_tok = 0, n_gguf = 0;
  struct dirent *de;
  while (dp && (de = readdir(dp))) {
    const char *name = de->d_name;
    int st = !strncmp(name, "st_", 3), tok = !strncmp(name, "tok_", 4), gg = !strncmp(name, "gguf_", 5);
    if (!st && !tok && !gg) continue;
    char path[2048], *data;
    size_t len;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (lc_read_file(path, (size_t)1 << 26, &data, &len) != LC_OK) {
      CHECK(0, "%s: %s", name, lc_errmsg());
      continue;
    }
    // Every input goes through both parsers; the expectations apply to its own kind.
    if (st) {
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
  CHECK(n_st >= 10 && n_tok >= 5 && n_gguf >= 30, "found %d safetensors, %d token and %d GGUF inputs in %s", n_st, n_tok,
        n_gguf, dir);
  return lc_test_finish("test_fuzz_regress");
}
