#define _POSIX_C_SOURCE 200809L
// Every file in tests/data/fuzz (crashers found by bench/fuzz and hand-made edge cases) goes
// through the safetensors and token-file parsers: each must return OK or a clean one-line
// error, never crash (this test also runs under ASan/UBSan). Names: st_* are safetensors
// inputs, tok_* token files; ".ok." in a name means it must open, ".err." that it must not.
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "io/fsutil.h"
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

int main(void) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", __FILE__);
  char *slash = strrchr(dir, '/');
  if (slash) slash[1] = 0;
  else dir[0] = 0;
  strncat(dir, "data/fuzz", sizeof dir - strlen(dir) - 1);
  DIR *dp = opendir(dir);
  CHECK(dp != NULL, "cannot open %s (the test finds it next to its source file)", dir);
  int n_st = 0, n_tok = 0;
  struct dirent *de;
  while (dp && (de = readdir(dp))) {
    const char *name = de->d_name;
    int st = !strncmp(name, "st_", 3), tok = !strncmp(name, "tok_", 4);
    if (!st && !tok) continue;
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
      n_st++;
    } else {
      feed_tok(name, path, data, len);
      feed_st("(as safetensors)", path, data, len);
      n_tok++;
    }
    free(data);
  }
  if (dp) closedir(dp);
  CHECK(n_st >= 10 && n_tok >= 5, "found %d safetensors and %d token inputs in %s", n_st, n_tok, dir);
  return lc_test_finish("test_fuzz_regress");
}
