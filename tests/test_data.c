#define _POSIX_C_SOURCE 200809L
// Data sources: task:copy structure and determinism, byte files, and their errors.
#include <string.h>
#include <unistd.h>

#include "io/data.h"
#include "testutil.h"

static void test_copy(void) {
  lc_data d;
  CHECK(lc_data_open(&d, "task:copy", 256, 100) == LC_OK, "open task:copy");
  const int S = 100;
  int tok[100], tgt[100], tok2[100], tgt2[100];
  int counted = lc_data_sample(&d, 1, 7, tok, tgt, S);
  int n = 0;
  for (int t = 0; t < S; t++) {
    if (tgt[t] < 0) continue;
    n++;
    int i = t + 1; // target t is token i of the S+1 stream; it repeats token i - L
    CHECK(i >= d.copy_len && tgt[t] == (i - d.copy_len < S ? tok[i - d.copy_len] : -1),
          "target %d is not a copy of the token %d positions earlier", t, d.copy_len);
    if (t + 1 < S) CHECK(tok[t + 1] == tgt[t], "target %d is the next token", t);
  }
  CHECK(n == counted && counted > S / 3, "counted %d of %d", counted, S);
  lc_data_sample(&d, 1, 7, tok2, tgt2, S);
  CHECK(!memcmp(tok, tok2, sizeof tok) && !memcmp(tgt, tgt2, sizeof tgt), "deterministic");
  lc_data_sample(&d, 1, 8, tok2, tgt2, S);
  CHECK(memcmp(tok, tok2, sizeof tok) != 0, "another index gives another sample");
  lc_data_close(&d);
  CHECK(lc_data_open(&d, "task:nope", 256, 100) == LC_EINVAL && strstr(lc_errmsg(), "task:nope"),
        "unknown task message: %s", lc_errmsg());
}

static void test_bytes(void) {
  char path[] = "/tmp/lc_test_data_XXXXXX";
  int fd = mkstemp(path);
  const char *text = "the quick brown fox jumps over the lazy dog, again and again.";
  CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write");
  close(fd);
  lc_data d;
  CHECK(lc_data_open(&d, path, 256, 16) == LC_OK, "open bytes: %s", lc_errmsg());
  int tok[16], tgt[16];
  CHECK(lc_data_sample(&d, 3, 0, tok, tgt, 16) == 16, "all counted");
  const char *at = strchr(text, tok[0]);
  CHECK(at != NULL, "first token from the text");
  for (int t = 0; t + 1 < 16; t++) CHECK(tgt[t] == tok[t + 1], "shifted labels");
  lc_data_close(&d);
  CHECK(lc_data_open(&d, path, 256, 100) == LC_EINVAL && strstr(lc_errmsg(), "--seq"),
        "too-short file message: %s", lc_errmsg());
  CHECK(lc_data_open(&d, path, 32000, 16) == LC_EINVAL && strstr(lc_errmsg(), "vocab 256"),
        "bytes need vocab 256: %s", lc_errmsg());
  unlink(path);
  CHECK(lc_data_open(&d, path, 256, 16) == LC_EIO && strstr(lc_errmsg(), "cannot open"),
        "missing file message: %s", lc_errmsg());
}

int main(void) {
  test_copy();
  test_bytes();
  return lc_test_finish("test_data");
}
