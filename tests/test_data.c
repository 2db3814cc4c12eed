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

// task:passkey: the record "The pass key is K7#. Remember it. K7# is the pass key." sits
// in filler, the question ends the stream, only the 3 answer characters count, no
// character of a key class appears anywhere but in the key (so the lookup is by content),
// and held-out and fresh samples end the record at least S/2 tokens before the answer.
static int key_class(int c) {
  if (strchr("ABCDEFGJKLMNPQSUVXYZ", c) && c) return 0;
  if (c >= '0' && c <= '9') return 1;
  if (strchr("!#$%&*+=@^", c) && c) return 2;
  return -1;
}

static void test_passkey(void) {
  lc_data d;
  const int S = 256;
  CHECK(lc_passkey_key_len() == 3, "key length");
  CHECK(lc_data_open(&d, "task:passkey", 256, S) == LC_OK, "open task:passkey: %s", lc_errmsg());
  int tok[256], tgt[256], tok2[256], tgt2[256];
  int far_min = S, near_min = S, keys_seen[20 * 10 * 10] = {0}, distinct = 0;
  const char *question = "What is the pass key? The pass key is ";
  for (int split = 0; split < 3; split++)
    for (int idx = 0; idx < 300; idx++) {
      int counted = 0;
      if (split == 1)
        CHECK(lc_data_sample_eval(&d, 5, (uint64_t)idx, tok, tgt, NULL, S, &counted) == LC_OK, "eval sample");
      else if (split == 0)
        counted = lc_data_sample(&d, 5, (uint64_t)idx, tok, tgt, S);
      else
        counted = lc_passkey_sample(5, (uint64_t)idx, LC_PASSKEY_FRESH, tok, tgt, S);
      CHECK(counted == 3, "3 answer tokens count, got %d", counted);
      char text[258];
      for (int t = 0; t < S; t++) text[t] = (char)tok[t];
      text[S] = 0;
      const char *rec = strstr(text, "The pass key is ");
      CHECK(rec != NULL, "record present");
      if (!rec) continue;
      const char *key = rec + strlen("The pass key is ");
      char want[64];
      snprintf(want, sizeof want, "%.3s. Remember it. %.3s is the pass key. ", key, key);
      CHECK(!strncmp(key, want, strlen(want)), "record reads '%s'", want);
      for (int k = 0; k < 3; k++) CHECK(key_class(key[k]) == k, "key character %d of class %d", k, k);
      // Every key-class character is one of the two record copies or the answer.
      int rec_at = (int)(key - text), rec_end = (int)(rec - text) + (int)strlen(want) + 16;
      for (int t = 0; t < S; t++) {
        int in_key = (t >= rec_at && t < rec_at + 3) || (t >= rec_at + 18 && t < rec_at + 21) ||
                     t >= S - 2;
        CHECK((key_class(text[t]) >= 0) == in_key, "key-class character at %d only in the key", t);
      }
      CHECK(!strncmp(text + S - 2 - strlen(question), question, strlen(question)) &&
                !strncmp(text + S - 2, key, 2),
            "question ends the stream (2 key characters inside)");
      for (int t = 0; t < S; t++) {
        int answer = t >= S - 3;
        CHECK((tgt[t] >= 0) == answer, "only the answer counts (t %d)", t);
        if (answer) CHECK(tgt[t] == key[t - (S - 3)], "answer character %d is the key's", t - (S - 3));
        if (t + 1 < S) CHECK(tgt[t] < 0 || tgt[t] == tok[t + 1], "targets are the next tokens");
      }
      // Positions from the record's last token to the first answer character (stream
      // position S - 2, target S - 3).
      int dist = (S - 2) - (rec_end - 1);
      if (split) {
        CHECK(dist >= S / 2, "held-out answer %d tokens after the end of its record (< S/2)", dist);
        if (dist < far_min) far_min = dist;
      } else if (dist < near_min) {
        near_min = dist;
      }
      int kid = (int)(strchr("ABCDEFGJKLMNPQSUVXYZ", key[0]) - "ABCDEFGJKLMNPQSUVXYZ") * 100 +
                (key[1] - '0') * 10 + (int)(strchr("!#$%&*+=@^", key[2]) - "!#$%&*+=@^");
      distinct += !keys_seen[kid]++;
    }
  printf("passkey: nearest held-out record ends %d tokens before the answer (S = %d); nearest "
         "training record %d; %d distinct keys in 900 samples\n", far_min, S, near_min, distinct);
  CHECK(far_min == S / 2, "the held-out bound is tight: nearest record %d, want S/2 = %d", far_min, S / 2);
  CHECK(near_min < S / 4, "training records also sit close to the question (nearest %d)", near_min);
  CHECK(distinct > 600, "keys spread over the 2000 (%d distinct of 900)", distinct);
  lc_data_sample(&d, 5, 3, tok, tgt, S);
  lc_data_sample(&d, 5, 3, tok2, tgt2, S);
  CHECK(!memcmp(tok, tok2, sizeof tok) && !memcmp(tgt, tgt2, sizeof tgt), "deterministic");
  int c = 0;
  CHECK(lc_data_sample_eval(&d, 5, 3, tok2, tgt2, NULL, S, &c) == LC_OK && memcmp(tok, tok2, sizeof tok),
        "held-out sample differs from the training sample of the same index");
  lc_passkey_sample(5, 3, LC_PASSKEY_FRESH, tok, tgt, S);
  CHECK(memcmp(tok, tok2, sizeof tok), "fresh sample differs from the held-out one");
  lc_data_close(&d);
  CHECK(lc_data_open(&d, "task:passkey", 64, S) == LC_EINVAL && strstr(lc_errmsg(), "vocabulary"),
        "small vocab message: %s", lc_errmsg());
  // The shortest accepted sequence still holds a held-out sample.
  const int M = lc_passkey_min_seq();
  CHECK(M <= 128, "min seq %d: the demo's 128 must fit", M);
  CHECK(lc_data_open(&d, "task:passkey", 256, M - 1) == LC_EINVAL, "below min seq refused");
  CHECK(lc_data_open(&d, "task:passkey", 256, M) == LC_OK, "open at min seq %d", M);
  lc_data_close(&d);
  // At the shortest length and one above it (odd), held-out records still end >= S/2
  // tokens before the answer (their last token is the space after "pass key.").
  for (int L = M; L <= M + 1; L++) {
    int *tk = malloc(sizeof(int) * (size_t)L), *tg = malloc(sizeof(int) * (size_t)L);
    int nearest = L;
    for (int idx = 0; idx < 200; idx++) {
      CHECK(lc_passkey_sample(9, (uint64_t)idx, LC_PASSKEY_EVAL, tk, tg, L) == 3, "sample at S = %d", L);
      int end = -1; // last token of the record: the '.' of "is the pass key." + 1
      for (int t = 0; t + 16 <= L && end < 0; t++) {
        int match = 1;
        for (int j = 0; j < 16; j++) match &= tk[t + j] == (unsigned char)"is the pass key."[j];
        if (match) end = t + 16;
      }
      CHECK(end >= 0, "record present at S = %d", L);
      int dist = (L - 2) - end;
      if (end >= 0 && dist < nearest) nearest = dist;
    }
    CHECK(nearest >= L / 2, "S = %d: nearest held-out record %d tokens before the answer", L, nearest);
    free(tk);
    free(tg);
  }
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

// Every sample of a file is a window of the stream: token t is stream[start + t] and its
// label is the next token of the stream, stream[start + t + 1], for every t up to the last.
// The stream is a permutation (each id once), so tok[0] tells the start. Over many samples
// the starts reach both ends: the file's first token is an input and its last a label.
static void check_windows(const char *what, lc_data *d, const uint32_t *stream, long n, int S) {
  long *where = malloc(sizeof(long) * (size_t)n);
  for (long i = 0; i < n; i++) where[stream[i]] = i;
  int *tok = malloc(sizeof(int) * (size_t)S), *tgt = malloc(sizeof(int) * (size_t)S);
  long bad = 0, lo = n, hi = -1;
  for (uint64_t idx = 0; idx < 4000; idx++) {
    bad += lc_data_sample(d, 7, idx, tok, tgt, S) != S; // every label counts
    long start = where[tok[0]];
    if (start < lo) lo = start;
    if (start > hi) hi = start;
    if (start + S >= n) bad++;
    for (int t = 0; t < S && start + S < n; t++)
      bad += tok[t] != (int)stream[start + t] || tgt[t] != (int)stream[start + t + 1];
  }
  CHECK(bad == 0, "%s: %ld tokens or labels are not the stream's (label t = token t + 1 of the stream)", what, bad);
  CHECK(lo == 0 && hi == n - S - 1, "%s: starts span [%ld, %ld], want [0, %ld]", what, lo, hi, n - S - 1);
  free(tok), free(tgt), free(where);
}

static void permutation(uint32_t *x, long n, uint64_t seed) {
  lc_rng r;
  lc_rng_seed(&r, seed);
  for (long i = 0; i < n; i++) x[i] = (uint32_t)i;
  for (long i = n - 1; i > 0; i--) {
    long j = (long)lc_rng_below(&r, (uint32_t)(i + 1));
    uint32_t t = x[i];
    x[i] = x[j], x[j] = t;
  }
}

static void test_file_labels(void) {
  // Bytes: a file holding each byte value once.
  uint32_t perm[3000];
  permutation(perm, 256, 11);
  char path[] = "/tmp/lc_test_labels_XXXXXX";
  int fd = mkstemp(path);
  unsigned char bytes[256];
  for (int i = 0; i < 256; i++) bytes[i] = (unsigned char)perm[i];
  CHECK(write(fd, bytes, 256) == 256, "write");
  close(fd);
  lc_data d;
  CHECK(lc_data_open(&d, path, 256, 40) == LC_OK, "open bytes: %s", lc_errmsg());
  check_windows("byte file", &d, perm, 256, 40);
  lc_data_close(&d);
  unlink(path);
  // A token file (uint16 ids) holding each id below 3000 once.
  permutation(perm, 3000, 12);
  char tpath[] = "/tmp/lc_test_labels_tok_XXXXXX";
  close(mkstemp(tpath));
  CHECK(lc_tokfile_write(tpath, perm, 3000, 2, 3000) == LC_OK, "write tokens: %s", lc_errmsg());
  CHECK(lc_data_open(&d, tpath, 3000, 64) == LC_OK, "open tokens: %s", lc_errmsg());
  check_windows("token file", &d, perm, 3000, 64);
  lc_data_close(&d);
  unlink(tpath);
}

// Samples first .. first+seqs-1 of a packed stream hold each of the N file tokens
// exactly once, as whole runs of one document with the right targets; counts padding
// and pieces of cut documents, and returns the first sample's first token.
static void check_pack_epoch(lc_data *d, long first, long seqs, const uint32_t *toks, const int *doc_of,
                             const uint64_t *starts, int N, long *pad, long *pieces_cut, int *first_tok) {
  enum { S = 64 };
  int *seen = calloc((size_t)N, sizeof(int)), tok[S], tgt[S], doc[S];
  long bad = 0;
  for (long i = first; i < first + seqs; i++) {
    lc_data_sample_docs(d, 9, (uint64_t)i, tok, tgt, doc, S);
    if (i == first) *first_tok = tok[0];
    // Walk the pieces: each is a run of consecutive file tokens of one document (token
    // id k + 1 is file token k); padding is token 0 with no target, its own document.
    for (int t = 0; t < S;) {
      int e = t + 1;
      while (e < S && doc[e] == t) e++;
      bad += doc[t] != t;
      if (tok[t] == 0) {
        bad += e != t + 1 || tgt[t] != -100;
        (*pad)++;
        t = e;
        continue;
      }
      int k = tok[t] - 1;
      for (int j = t; j < e; j++) {
        int kk = k + (j - t);
        bad += kk >= N || tok[j] != (int)toks[kk] || doc_of[kk] != doc_of[k] || seen[kk]++;
        int ends = kk + 1 == N || doc_of[kk + 1] != doc_of[kk];
        bad += ends ? tgt[j] != -100 : tgt[j] != (int)toks[kk + 1];
      }
      *pieces_cut += k != (int)starts[doc_of[k]] || (k + (e - t) < N && doc_of[k + (e - t)] == doc_of[k]);
      t = e;
    }
  }
  long missing = 0;
  for (int k = 0; k < N; k++) missing += seen[k] != 1;
  CHECK(bad == 0, "packed samples %ld..: %ld tokens, targets or document starts differ from the file", first, bad);
  CHECK(missing == 0, "the epoch from sample %ld holds every document token exactly once (%ld not)", first, missing);
  free(seen);
}

// Packing a token file with a document index: every sample is pieces of documents in
// order (tokens as in the file; targets the next token of the same document, none at a
// document's end), then padding (no target, each pad its own document); over an epoch
// every token of every document is in exactly one sample (nothing dropped), documents
// longer than S are cut into S-token pieces, and the reported padding is what the samples
// hold. Data without documents is refused.
static void test_pack_file(void) {
  enum { N = 3000, S = 64 };
  static uint32_t toks[N];
  uint64_t starts[400];
  int nd = 0, doc_of[N];
  lc_rng r;
  lc_rng_seed(&r, 21);
  for (int n = 0; n < N;) {
    int len = lc_rng_below(&r, 4) == 0 ? 40 + (int)lc_rng_below(&r, 120) : 1 + (int)lc_rng_below(&r, 30);
    if (len > N - n) len = N - n;
    starts[nd] = (uint64_t)n;
    for (int i = 0; i < len; i++) doc_of[n + i] = nd, toks[n + i] = (uint32_t)(n + i + 1); // ids 1..N: 0 is padding
    nd++, n += len;
  }
  char path[] = "/tmp/lc_test_pack_XXXXXX";
  close(mkstemp(path));
  CHECK(lc_tokfile_write_docs(path, toks, N, 2, N + 1, starts, (uint64_t)nd) == LC_OK, "write: %s", lc_errmsg());
  lc_data d;
  CHECK(lc_data_open(&d, path, N + 1, S) == LC_OK && lc_data_pack(&d, S, 9, 0) == LC_OK, "pack: %s", lc_errmsg());
  char desc[300];
  lc_data_pack_desc(&d, desc, sizeof desc);
  const long seqs = d.packer.seqs0;
  long pad = 0, pieces_cut = 0;
  int first_tok0 = 0;
  check_pack_epoch(&d, 0, seqs, toks, doc_of, starts, N, &pad, &pieces_cut, &first_tok0);
  CHECK((uint64_t)pad == d.packer.pad0, "padding: %ld counted in the samples, %llu reported", pad,
        (unsigned long long)d.packer.pad0);
  // Epoch 1 follows epoch 0 in the stream, in a fresh order, and is again exactly a cover.
  const lc_piece *pc;
  size_t npc;
  CHECK(lc_packer_get(&d.packer, (uint64_t)seqs, &pc, &npc) == LC_OK && d.packer.n_known == 2, "plan epoch 1");
  const long seqs1 = (long)(d.packer.first_seq[2] - d.packer.first_seq[1]);
  long pad1 = 0, cut1 = 0;
  int first_tok1 = 0;
  check_pack_epoch(&d, seqs, seqs1, toks, doc_of, starts, N, &pad1, &cut1, &first_tok1);
  CHECK(first_tok1 != first_tok0, "epoch 1 starts with another document (token %d both)", first_tok0);
  CHECK(pieces_cut > 0 && d.packer.split0 > 0, "documents longer than S are cut (%ld pieces, %llu documents)",
        pieces_cut, (unsigned long long)d.packer.split0);
  CHECK(strstr(desc, "padding") != NULL, "log line: %s", desc);
  printf("pack: %s\n", desc);
  lc_data_close(&d);
  // Refusals: no document index, bytes, task:passkey.
  CHECK(lc_tokfile_write(path, toks, N, 2, N + 1) == LC_OK, "write without index");
  CHECK(lc_data_open(&d, path, N + 1, S) == LC_OK && lc_data_pack(&d, S, 9, 0) == LC_EINVAL &&
            strstr(lc_errmsg(), "no document index"), "no index: %s", lc_errmsg());
  lc_data_close(&d);
  CHECK(lc_data_open(&d, "task:passkey", 256, 128) == LC_OK && lc_data_pack(&d, 128, 1, 0) == LC_EINVAL, "passkey");
  lc_data_close(&d);
  unlink(path);
}

// task:copy packed: documents of at least 32 tokens (the last may be shorter), each its own
// copy task: a repeat's target is the token a segment earlier in the same document, the
// last token of a document has none.
static void test_pack_copy(void) {
  lc_data d;
  CHECK(lc_data_open(&d, "task:copy", 256, 1024) == LC_OK && lc_data_pack(&d, 1024, 3, 0) == LC_OK, "open");
  int tok[1024], tgt[1024], doc[1024], bad = 0, docs = 0, longest = 0;
  for (uint64_t i = 0; i < 20; i++) {
    lc_data_sample_docs(&d, 3, i, tok, tgt, doc, 1024);
    for (int t = 0; t < 1024;) {
      int e = t + 1;
      while (e < 1024 && doc[e] == t) e++;
      bad += doc[t] != t || (e < 1024 && e - t < 32) || tgt[e - 1] != -100;
      for (int j = t; j + 1 < e; j++)
        if (tgt[j] >= 0) bad += j + 1 - t < 16 || tgt[j] != tok[j + 1] || tok[j + 1] != tok[j + 1 - 16];
      docs++;
      longest = e - t > longest ? e - t : longest;
      t = e;
    }
  }
  CHECK(bad == 0 && docs > 40, "packed copy documents: %d errors in %d documents", bad, docs);
  CHECK(longest > 256, "some documents are long (longest %d)", longest);
  lc_data_close(&d);
}

int main(void) {
  test_copy();
  test_passkey();
  test_bytes();
  test_file_labels();
  test_pack_file();
  test_pack_copy();
  return lc_test_finish("test_data");
}
