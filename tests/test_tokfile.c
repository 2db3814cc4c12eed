#define _POSIX_C_SOURCE 200809L
// Token data files: write -> read round trips (2- and 4-byte), header validation (magic,
// version, dtype, reserved, vocab, empty, truncated/trailing sizes), out-of-vocab ids with
// index and byte offset, atomic writes, and the file format written by tools/prepare_data.py;
// version 3's loss mask (round trip with a document index, a short mask, a mask byte not 0/1).
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/fsutil.h"
#include "io/tokfile.h"
#include "testutil.h"

static char dir[256];

static void put_bytes(const char *path, const unsigned char *b, size_t n) {
  FILE *f = fopen(path, "wb");
  if (n) fwrite(b, 1, n, f);
  fclose(f);
}

static void header(unsigned char *h, const char *magic, uint32_t ver, uint32_t bpt, uint32_t vocab,
                   uint32_t res, uint64_t count) {
  memcpy(h, magic, 8);
  uint32_t v[4] = {ver, bpt, vocab, res};
  for (int i = 0; i < 4; i++)
    for (int b = 0; b < 4; b++) h[8 + 4 * i + b] = (unsigned char)(v[i] >> (8 * b));
  for (int b = 0; b < 8; b++) h[24 + b] = (unsigned char)(count >> (8 * b));
}

static void test_roundtrip(void) {
  char p[300];
  snprintf(p, sizeof p, "%s/a.tok", dir);
  uint32_t t16[5] = {0, 1, 255, 65535, 300};
  CHECK(lc_tokfile_write(p, t16, 5, 2, 65536) == LC_OK, "write u16: %s", lc_errmsg());
  struct stat st;
  CHECK(stat(p, &st) == 0 && st.st_size == 32 + 10, "u16 size %lld", (long long)st.st_size);
  lc_tokfile t;
  CHECK(lc_tokfile_open(&t, p) == LC_OK, "open: %s", lc_errmsg());
  CHECK(t.count == 5 && t.bytes_per_token == 2 && t.vocab == 65536 && t.version == 1, "header");
  int ok = 1;
  for (int i = 0; i < 5; i++) ok &= lc_tokfile_get(&t, (uint64_t)i) == t16[i];
  CHECK(ok, "u16 tokens");
  CHECK(lc_tokfile_check_vocab(&t, 65536) == LC_OK, "vocab ok");
  lc_tokfile_close(&t);
  // The exact bytes: little-endian header and tokens.
  char *raw;
  size_t n;
  CHECK(lc_read_file(p, 1000, &raw, &n) == LC_OK, "raw");
  unsigned char want[32];
  header(want, "LCTOKENS", 1, 2, 65536, 0, 5);
  CHECK(!memcmp(raw, want, 32) && (unsigned char)raw[32 + 6] == 0xff && raw[32 + 8] == 0x2c &&
            raw[32 + 9] == 0x01, "byte layout");
  free(raw);

  uint32_t t32[4] = {0, 70000, 4294967294u, 128000};
  CHECK(lc_tokfile_write(p, t32, 4, 4, 4294967295u) == LC_OK, "write u32: %s", lc_errmsg());
  CHECK(lc_tokfile_open(&t, p) == LC_OK && t.bytes_per_token == 4 && t.count == 4, "open u32");
  ok = 1;
  for (int i = 0; i < 4; i++) ok &= lc_tokfile_get(&t, (uint64_t)i) == t32[i];
  CHECK(ok, "u32 tokens");
  lc_status s = lc_tokfile_check_vocab(&t, 128256);
  CHECK(s == LC_EINVAL && strstr(lc_errmsg(), "vocab 4294967295") && strstr(lc_errmsg(), "128256"),
        "header vocab above the model's: %s", lc_errmsg());
  lc_tokfile_close(&t);

  // Out-of-vocab id: the first one, with its index and byte offset.
  uint32_t oov[20];
  for (int i = 0; i < 20; i++) oov[i] = (uint32_t)i;
  oov[12] = 70000;
  oov[15] = 80000;
  CHECK(lc_tokfile_write(p, oov, 20, 4, 100000) == LC_OK, "write oov");
  CHECK(lc_tokfile_open(&t, p) == LC_OK, "open oov");
  CHECK(lc_tokfile_check_vocab(&t, 100000) == LC_OK, "fits its own vocab");
  s = lc_tokfile_check_vocab(&t, 32000);
  CHECK(s == LC_EINVAL && strstr(lc_errmsg(), "vocab 100000"), "header vocab first: %s", lc_errmsg());
  lc_tokfile_close(&t);
  // A file whose header vocab fits but an id does not (written by hand: the writer refuses).
  unsigned char buf[32 + 40];
  header(buf, "LCTOKENS", 1, 2, 32000, 0, 20);
  for (int i = 0; i < 20; i++) {
    uint32_t v = i == 12 ? 40000 : i == 15 ? 50000 : (uint32_t)i;
    buf[32 + 2 * i] = v & 0xff;
    buf[32 + 2 * i + 1] = (unsigned char)(v >> 8);
  }
  put_bytes(p, buf, sizeof buf);
  CHECK(lc_tokfile_open(&t, p) == LC_OK, "open hand-made: %s", lc_errmsg());
  s = lc_tokfile_check_vocab(&t, 32000);
  CHECK(s == LC_EINVAL && strstr(lc_errmsg(), "token id 40000 at index 12 (byte offset 56)") &&
            strstr(lc_errmsg(), p) && strstr(lc_errmsg(), ">= the model's vocab 32000"),
        "oov message: %s", lc_errmsg());
  CHECK(lc_tokfile_check_vocab(&t, 60000) == LC_OK, "fits a bigger model");
  lc_tokfile_close(&t);
  // In-memory open of the same bytes.
  CHECK(lc_tokfile_open_mem(&t, buf, sizeof buf, "mem") == LC_OK && lc_tokfile_get(&t, 15) == 50000,
        "open_mem");
  lc_tokfile_close(&t);

  // Writer errors.
  CHECK(lc_tokfile_write(p, t16, 5, 3, 100) == LC_EINVAL, "bad bytes per token");
  CHECK(lc_tokfile_write(p, t16, 5, 2, 70000) == LC_EINVAL && strstr(lc_errmsg(), "4 bytes"), "vocab > u16");
  CHECK(lc_tokfile_write(p, t16, 0, 2, 100) == LC_EINVAL && strstr(lc_errmsg(), "no tokens"), "empty");
  CHECK(lc_tokfile_write(p, t16, 5, 2, 300) == LC_EINVAL && strstr(lc_errmsg(), "token id 65535 at index 3"), "id >= vocab: %s", lc_errmsg());
}

static int temp_files(void) {
  DIR *dp = opendir(dir);
  int n = 0;
  struct dirent *de;
  while (dp && (de = readdir(dp)))
    if (strstr(de->d_name, ".tmp.")) n++;
  if (dp) closedir(dp);
  return n;
}

static void test_errors(void) {
  char p[300];
  snprintf(p, sizeof p, "%s/b.tok", dir);
  unsigned char h[64];
  lc_tokfile t;
  struct {
    const char *magic;
    uint32_t ver, bpt, vocab, res;
    uint64_t count;
    size_t size; // bytes of the file (header + zero tokens)
    const char *w1, *w2;
  } cases[] = {
      {"LCTOKENX", 1, 2, 256, 0, 4, 40, "bad magic", "prepare_data.py"},
      {"LCTOKENS", 4, 2, 256, 0, 4, 40, "version 4", "versions 1, 2 and 3"},
      {"LCTOKENS", 3, 2, 256, 0, 4, 42, "mask is shorter than the tokens", "4 tokens but 2 bytes"},
      {"LCTOKENS", 2, 2, 256, 6, 4, 40, "reserved", "not 0"},
      {"LCTOKENS", 1, 3, 256, 0, 4, 44, "dtype 3", "uint16"},
      {"LCTOKENS", 1, 2, 256, 7, 4, 40, "reserved", "not 0"},
      {"LCTOKENS", 1, 2, 0, 0, 4, 40, "vocab_size is 0", NULL},
      {"LCTOKENS", 1, 2, 70000, 0, 4, 40, "vocab_size 70000", "2-byte"},
      {"LCTOKENS", 1, 2, 256, 0, 0, 32, "empty (count 0)", NULL},
      {"LCTOKENS", 1, 2, 256, 0, 10, 40, "truncated", "should be 52 bytes, but it is 40 bytes"},
      {"LCTOKENS", 1, 4, 256, 0, 3, 40, "truncated", "should be 44 bytes"},
      {"LCTOKENS", 1, 4, 256, 0, 1ull << 62, 40, "truncated", "more than any file"},
      {"LCTOKENS", 1, 2, 256, 0, 2, 40, "4 trailing bytes", "36 bytes"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memset(h, 0, sizeof h);
    header(h, cases[i].magic, cases[i].ver, cases[i].bpt, cases[i].vocab, cases[i].res, cases[i].count);
    put_bytes(p, h, cases[i].size);
    lc_status s = lc_tokfile_open(&t, p);
    const char *m = lc_errmsg();
    CHECK(s == LC_EFORMAT && strstr(m, p) && strstr(m, cases[i].w1) && (!cases[i].w2 || strstr(m, cases[i].w2)),
          "case %zu: %s: %s", i, lc_status_name(s), m);
    CHECK(lc_tokfile_open_mem(&t, h, cases[i].size, "mem") == LC_EFORMAT, "mem case %zu", i);
  }
  put_bytes(p, (const unsigned char *)"LCTOK", 5);
  CHECK(lc_tokfile_open(&t, p) == LC_EFORMAT && strstr(lc_errmsg(), "5 bytes") &&
            strstr(lc_errmsg(), "too short"), "short: %s", lc_errmsg());
  put_bytes(p, NULL, 0);
  CHECK(lc_tokfile_open(&t, p) == LC_EFORMAT && strstr(lc_errmsg(), "0 bytes"), "zero bytes: %s", lc_errmsg());
  char missing[300];
  snprintf(missing, sizeof missing, "%s/none.tok", dir);
  CHECK(lc_tokfile_open(&t, missing) == LC_EIO && strstr(lc_errmsg(), "cannot open"), "missing: %s", lc_errmsg());
  CHECK(lc_tokfile_open(&t, dir) == LC_EIO && strstr(lc_errmsg(), "not a regular file"), "dir: %s", lc_errmsg());

  // Atomic: a failed write (rename onto a directory) leaves the target and no temp file.
  uint32_t toks[3] = {1, 2, 3};
  char d2[300], keep[320];
  snprintf(d2, sizeof d2, "%s/target.tok", dir);
  snprintf(keep, sizeof keep, "%s/keep", d2);
  lc_mkdir_p(d2);
  lc_write_file_atomic(keep, "x", 1);
  CHECK(lc_tokfile_write(d2, toks, 3, 2, 10) == LC_EIO && lc_is_file(keep) && temp_files() == 0,
        "failed write: %s", lc_errmsg());
  snprintf(d2, sizeof d2, "%s/nodir/x.tok", dir);
  CHECK(lc_tokfile_write(d2, toks, 3, 2, 10) == LC_EIO && temp_files() == 0, "no dir: %s", lc_errmsg());
}

// tools/prepare_data.py --bytes writes the same format (stdlib only; skipped without python3).
static void test_prepare_data(void) {
  if (system("python3 -c 'import sys; sys.exit(0)' >/dev/null 2>&1") != 0) {
    printf("test_tokfile: python3 not found, prepare_data.py check skipped\n");
    return;
  }
  char src[1024], tool[1200], in[300], out[300], cmd[3000];
  snprintf(src, sizeof src, "%s", __FILE__);
  char *slash = strrchr(src, '/');
  if (slash) *slash = 0;
  else snprintf(src, sizeof src, ".");
  snprintf(tool, sizeof tool, "%s/../tools/prepare_data.py", src);
  snprintf(in, sizeof in, "%s/in.txt", dir);
  snprintf(out, sizeof out, "%s/out.tok", dir);
  const char *text = "héllo, long context\n";
  put_bytes(in, (const unsigned char *)text, strlen(text));
  snprintf(cmd, sizeof cmd, "python3 '%s' --bytes --eos-id 10 --out '%s' '%s' '%s' >/dev/null", tool,
           out, in, in);
  CHECK(system(cmd) == 0, "prepare_data.py ran: %s", cmd);
  lc_tokfile t;
  CHECK(lc_tokfile_open(&t, out) == LC_OK, "open prepared: %s", lc_errmsg());
  size_t n = strlen(text);
  CHECK(t.count == 2 * (n + 1) && t.vocab == 256 && t.bytes_per_token == 2, "prepared header: %llu",
        (unsigned long long)t.count);
  int ok = t.count == 2 * (n + 1);
  for (size_t i = 0; ok && i < n; i++)
    ok = lc_tokfile_get(&t, i) == (unsigned char)text[i] && lc_tokfile_get(&t, n + 1 + i) == (unsigned char)text[i];
  CHECK(ok && lc_tokfile_get(&t, n) == 10 && lc_tokfile_get(&t, 2 * n + 1) == 10,
        "prepared tokens: documents as bytes, EOS after each");
  CHECK(t.n_docs == 2 && lc_tokfile_doc_start(&t, 0) == 0 && lc_tokfile_doc_start(&t, 1) == n + 1,
        "prepared document index: one document per input file (%llu documents)", (unsigned long long)t.n_docs);
  CHECK(lc_tokfile_check_vocab(&t, 256) == LC_OK && lc_tokfile_check_vocab(&t, 200) == LC_EINVAL,
        "prepared vocab check");
  lc_tokfile_close(&t);
}

// Version 2 with a document index: written and read back; every kind of corrupt index is
// refused with a message naming the file and the problem.
static void test_docs(void) {
  char p[300];
  snprintf(p, sizeof p, "%s/d.tok", dir);
  uint32_t toks[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  uint64_t starts[3] = {0, 4, 9};
  CHECK(lc_tokfile_write_docs(p, toks, 10, 2, 100, starts, 3) == LC_OK, "write: %s", lc_errmsg());
  lc_tokfile t;
  CHECK(lc_tokfile_open(&t, p) == LC_OK && t.version == 2 && t.n_docs == 3, "open: %s", lc_errmsg());
  CHECK(lc_tokfile_doc_start(&t, 1) == 4 && lc_tokfile_doc_end(&t, 1) == 9 && lc_tokfile_doc_end(&t, 2) == 10,
        "document ranges");
  lc_tokfile_close(&t);
  uint64_t bad_w[2] = {0, 10};
  CHECK(lc_tokfile_write_docs(p, toks, 10, 2, 100, bad_w, 2) == LC_EINVAL, "writer refuses a start beyond the end");
  // Hand-made files: header (count 10, 2-byte tokens), tokens, index.
  struct {
    uint64_t n;            // n_docs field
    uint64_t s[3];         // starts
    int n_written;         // how many starts are really in the file
    int extra;             // trailing bytes
    const char *want;
  } c[] = {
      {0, {0}, 0, 0, "lists 0 documents"},
      {3, {1, 4, 9}, 3, 0, "the first must start at 0"},
      {3, {0, 4, 4}, 3, 0, "not after the previous"},
      {3, {0, 4, 12}, 3, 0, "beyond the last token"},
      {3, {0, 4, 9}, 2, 0, "need 32 bytes"},
      {2, {0, 4}, 2, 5, "need 24 bytes"},
      {1ull << 61, {0}, 1, 0, "corrupt or truncated"},
  };
  unsigned char b[200];
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    memset(b, 0, sizeof b);
    header(b, "LCTOKENS", 2, 2, 100, LC_TOKFILE_HAS_DOCS, 10);
    size_t at = 32 + 20;
    for (int k = 0; k < 8; k++) b[at + k] = (unsigned char)(c[i].n >> (8 * k));
    for (int d = 0; d < c[i].n_written; d++)
      for (int k = 0; k < 8; k++) b[at + 8 + 8 * d + k] = (unsigned char)(c[i].s[d] >> (8 * k));
    put_bytes(p, b, at + 8 + 8 * (size_t)c[i].n_written + (size_t)c[i].extra);
    lc_status st = lc_tokfile_open(&t, p);
    CHECK(st == LC_EFORMAT && strstr(lc_errmsg(), c[i].want) && strstr(lc_errmsg(), p), "index case %zu: %s", i,
          lc_errmsg());
    if (st == LC_OK) lc_tokfile_close(&t);
  }
  // The flag without any index after the tokens.
  header(b, "LCTOKENS", 2, 2, 100, LC_TOKFILE_HAS_DOCS, 10);
  put_bytes(p, b, 52);
  CHECK(lc_tokfile_open(&t, p) == LC_EFORMAT && strstr(lc_errmsg(), "truncated"), "no index: %s", lc_errmsg());
}

// Version 3: tokens, the loss mask, the document index; a mask byte other than 0/1 refused.
static void test_mask(void) {
  char p[300];
  snprintf(p, sizeof p, "%s/m.tok", dir);
  uint32_t tk[6] = {5, 6, 7, 8, 9, 10};
  unsigned char m[6] = {0, 0, 1, 1, 0, 1};
  uint64_t starts[2] = {0, 3};
  CHECK(lc_tokfile_write_mask(p, tk, m, 6, 2, 100, starts, 2) == LC_OK, "write v3: %s", lc_errmsg());
  struct stat st;
  CHECK(stat(p, &st) == 0 && st.st_size == 32 + 12 + 6 + 8 + 16, "v3 size %lld", (long long)st.st_size);
  lc_tokfile t;
  CHECK(lc_tokfile_open(&t, p) == LC_OK, "open v3: %s", lc_errmsg());
  CHECK(t.version == 3 && t.mask && t.n_docs == 2 && lc_tokfile_doc_start(&t, 1) == 3, "v3 header, mask, index");
  for (int i = 0; i < 6; i++) CHECK(lc_tokfile_counts(&t, (uint64_t)i) == m[i] && lc_tokfile_get(&t, (uint64_t)i) == tk[i], "token %d", i);
  lc_tokfile_close(&t);
  // Versions 1 and 2: every token counts.
  CHECK(lc_tokfile_write_docs(p, tk, 6, 2, 100, starts, 2) == LC_OK && lc_tokfile_open(&t, p) == LC_OK, "v2");
  CHECK(t.version == 2 && !t.mask && lc_tokfile_counts(&t, 4), "v2 counts every token");
  lc_tokfile_close(&t);
  m[2] = 2;
  CHECK(lc_tokfile_write_mask(p, tk, m, 6, 2, 100, NULL, 0) == LC_EINVAL && strstr(lc_errmsg(), "not 0 or 1"), "writer refuses mask 2");
  unsigned char b[32 + 12 + 6];
  header(b, "LCTOKENS", 3, 2, 100, 0, 6);
  memset(b + 32, 0, 12);
  memcpy(b + 44, (unsigned char[]){0, 1, 1, 7, 0, 0}, 6);
  put_bytes(p, b, sizeof b);
  CHECK(lc_tokfile_open(&t, p) == LC_EFORMAT && strstr(lc_errmsg(), "mask byte 3 is 7"), "mask byte 7: %s", lc_errmsg());
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/lc_test_tok_%ld", (long)getpid());
  lc_mkdir_p(dir);
  test_roundtrip();
  test_docs();
  test_errors();
  test_prepare_data();
  test_mask();
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return lc_test_finish("test_tokfile");
}
