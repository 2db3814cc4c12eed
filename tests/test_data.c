#define _POSIX_C_SOURCE 200809L
// Data sources: task:copy and task:passkey structure and determinism, byte files, and
// their errors.
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

// task:passkey: the record "The pass key is <KKKKK>." sits in filler, the question ends the
// stream, only the 5 answer digits count, and held-out samples put the answer at least S/2
// tokens after the record.
static void test_passkey(void) {
  lc_data d;
  const int S = 256;
  CHECK(lc_data_open(&d, "task:passkey", 256, S) == LC_OK, "open task:passkey: %s", lc_errmsg());
  int tok[256], tgt[256], tok2[256], tgt2[256];
  int far_min = S;
  for (int eval = 0; eval < 2; eval++)
    for (int idx = 0; idx < 200; idx++) {
      int counted = 0;
      if (eval)
        CHECK(lc_data_sample_eval(&d, 5, (uint64_t)idx, tok, tgt, S, &counted) == LC_OK, "eval sample");
      else
        counted = lc_data_sample(&d, 5, (uint64_t)idx, tok, tgt, S);
      CHECK(counted == 5, "5 answer tokens count, got %d", counted);
      char text[258];
      for (int t = 0; t < S; t++) text[t] = (char)tok[t];
      text[S] = 0;
      const char *rec = strstr(text, "The pass key is <");
      CHECK(rec != NULL, "record present");
      if (!rec) continue;
      const char *key = rec + strlen("The pass key is <");
      CHECK(key[5] == '>', "record closes after 5 digits");
      int seen = 0;
      for (int k = 0; k < 5; k++) {
        CHECK(key[k] >= '0' && key[k] <= '9', "key digit");
        CHECK(!(seen & (1 << (key[k] - '0'))), "key digits distinct");
        seen |= 1 << (key[k] - '0');
      }
      const char *q = strstr(key, "What is the pass key? The pass key is <");
      CHECK(q != NULL && q - text + 39 + 4 == S, "question ends the stream (4 digits inside)");
      for (int t = 0; t < S; t++) {
        int answer = t >= S - 5;
        CHECK((tgt[t] >= 0) == answer, "only the answer digits count (t %d)", t);
        if (answer) CHECK(tgt[t] == key[t - (S - 5)], "answer digit %d is the key's", t - (S - 5));
        if (t + 1 < S) CHECK(tgt[t] < 0 || tgt[t] == tok[t + 1], "targets are the next tokens");
      }
      int dist = (S - 4) - (int)(key - text); // first answer digit: stream position S - 4
      if (eval && dist < far_min) far_min = dist;
      if (eval) CHECK(dist >= S / 2, "held-out answer %d tokens after its record (< S/2)", dist);
    }
  printf("passkey: nearest held-out record %d tokens before the answer (S = %d)\n", far_min, S);
  lc_data_sample(&d, 5, 3, tok, tgt, S);
  lc_data_sample(&d, 5, 3, tok2, tgt2, S);
  CHECK(!memcmp(tok, tok2, sizeof tok) && !memcmp(tgt, tgt2, sizeof tgt), "deterministic");
  int c = 0;
  CHECK(lc_data_sample_eval(&d, 5, 3, tok2, tgt2, S, &c) == LC_OK && memcmp(tok, tok2, sizeof tok),
        "held-out sample differs from the training sample of the same index");
  lc_data_close(&d);
  CHECK(lc_data_open(&d, "task:passkey", 64, S) == LC_EINVAL && strstr(lc_errmsg(), "vocabulary"),
        "small vocab message: %s", lc_errmsg());
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
  test_passkey();
  test_bytes();
  return lc_test_finish("test_data");
}
