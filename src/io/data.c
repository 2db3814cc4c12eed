#include "io/data.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

#define COPY_LEN 16

lc_status lc_data_open(lc_data *d, const char *spec, int vocab, int seq) {
  memset(d, 0, sizeof *d);
  d->vocab = vocab;
  if (seq > INT_MAX / 2) return lc_fail(LC_EINVAL, "--seq %d is too long: use at most %d", seq, INT_MAX / 2);
  if (!strcmp(spec, "task:passkey")) {
    if (vocab < 128) return lc_fail(LC_EINVAL, "task:passkey is text: it needs a vocabulary of at least 128 tokens");
    if (seq < lc_passkey_min_seq())
      return lc_fail(LC_EINVAL, "task:passkey needs --seq >= %d (record + question)", lc_passkey_min_seq());
    d->kind = LC_DATA_TASK_PASSKEY;
    snprintf(d->desc, sizeof d->desc, "task:passkey (a 3-character pass key hidden in filler, asked at the end; loss on the key)");
    return LC_OK;
  }
  if (!strncmp(spec, "task:", 5)) {
    if (strcmp(spec, "task:copy") != 0)
      return lc_fail(LC_EINVAL, "--data %s: unknown built-in task; use task:copy, task:passkey or a file path", spec);
    if (vocab < 2) return lc_fail(LC_EINVAL, "task:copy needs a vocabulary of at least 2 tokens");
    d->kind = LC_DATA_TASK_COPY;
    d->copy_len = COPY_LEN;
    snprintf(d->desc, sizeof d->desc,
             "task:copy (random %d-token segments, each repeated once; loss on the repeats)", COPY_LEN);
    return LC_OK;
  }
  FILE *f = fopen(spec, "rb");
  char magic[8] = {0};
  if (f && fread(magic, 1, 8, f) == 8 && !memcmp(magic, "LCTOKENS", 8)) {
    fclose(f);
    LC_TRY(lc_tokfile_open(&d->tok, spec));
    lc_status st = lc_tokfile_check_vocab(&d->tok, vocab);
    if (st == LC_OK && d->tok.count < (uint64_t)seq + 1)
      st = lc_fail(LC_EINVAL, "--data %s: holds %llu tokens but one sample of --seq %d needs %d; "
                   "use more data or a smaller --seq", spec, (unsigned long long)d->tok.count, seq, seq + 1);
    if (st != LC_OK) {
      lc_tokfile_close(&d->tok);
      return st;
    }
    d->kind = LC_DATA_TOKENS;
    uint64_t counted = 0;
    for (uint64_t i = 0; d->tok.mask && i < d->tok.count; i++) counted += d->tok.mask[i];
    char m[80] = "";
    if (d->tok.mask) snprintf(m, sizeof m, ", %llu counted by its loss mask", (unsigned long long)counted);
    snprintf(d->desc, sizeof d->desc, "%.200s (%llu tokens%s, %u bytes each, tokenizer vocab %u)", spec,
             (unsigned long long)d->tok.count, m, d->tok.bytes_per_token, d->tok.vocab);
    return LC_OK;
  }
  if (f && vocab != 256) {
    fclose(f);
    return lc_fail(LC_EINVAL, "--data %s: not a token file (no LCTOKENS header), so it would be read as "
                   "bytes, which needs a model with vocab 256 (this one has %d); convert it with "
                   "tools/prepare_data.py", spec, vocab);
  }
  if (!f) return lc_fail(LC_EIO, "--data %s: cannot open (%s); give an existing file or task:copy", spec, strerror(errno));
  if (fseek(f, 0, SEEK_END) != 0) {
    fclose(f);
    return lc_fail(LC_EIO, "--data %s: cannot seek; give a regular file", spec);
  }
  long n = ftell(f);
  rewind(f);
  if (n == 0) {
    fclose(f);
    return lc_fail(LC_EINVAL, "--data %s: the file is empty; give a file with at least --seq + 1 bytes", spec);
  }
  if (n < (long)seq + 1) {
    fclose(f);
    return lc_fail(LC_EINVAL, "--data %s: holds %ld bytes but one sample of --seq %d needs %d; "
                   "use a larger file or a smaller --seq", spec, n < 0 ? 0 : n, seq, seq + 1);
  }
  d->bytes = malloc((size_t)n);
  if (!d->bytes) {
    fclose(f);
    return lc_fail(LC_ENOMEM, "--data %s: out of memory reading %ld bytes", spec, n);
  }
  size_t got = fread(d->bytes, 1, (size_t)n, f);
  fclose(f);
  if (got != (size_t)n) {
    lc_data_close(d);
    return lc_fail(LC_EIO, "--data %s: short read (%zu of %ld bytes)", spec, got, n);
  }
  d->kind = LC_DATA_BYTES;
  d->n_bytes = (size_t)n;
  snprintf(d->desc, sizeof d->desc, "%s (%zu bytes, byte tokens)", spec, d->n_bytes);
  return LC_OK;
}

void lc_data_close(lc_data *d) {
  free(d->bytes);
  d->bytes = NULL;
  lc_packer_free(&d->packer);
  if (d->kind == LC_DATA_TOKENS) lc_tokfile_close(&d->tok);
  d->kind = LC_DATA_BYTES;
}

static void sample_rng(lc_rng *r, uint64_t seed, uint64_t index) {
  lc_rng_seed(r, seed * 0x9e3779b97f4a7c15ull ^ (index + 0x632be59bd9b4e019ull));
}

static uint64_t tok_doc_start(const void *src, uint64_t i) { return lc_tokfile_doc_start(src, i); }

lc_status lc_data_pack(lc_data *d, int S, uint64_t seed, int drop_long) {
  if (drop_long && d->kind != LC_DATA_TOKENS)
    return lc_fail(LC_EINVAL, "--drop-long leaves out documents of a token file longer than --seq; --data %s has none",
                   d->kind == LC_DATA_BYTES ? "(bytes)" : d->kind == LC_DATA_TASK_COPY ? "task:copy" : "task:passkey");
  switch (d->kind) {
    case LC_DATA_TOKENS:
      if (d->tok.n_docs == 0)
        return lc_fail(LC_EINVAL, "--pack needs document boundaries, but %s has no document index; re-create it "
                       "with tools/prepare_data.py (one document per input file or JSONL record)", d->tok.path);
      LC_TRY(lc_packer_init(&d->packer, S, seed, &d->tok, d->tok.n_docs, d->tok.count, tok_doc_start, drop_long));
      break;
    case LC_DATA_TASK_COPY: break; // generates its documents
    case LC_DATA_BYTES:
      return lc_fail(LC_EINVAL, "--pack needs documents: a file read as bytes has none; make a token file "
                     "with tools/prepare_data.py --bytes (one document per input file or JSONL record)");
    case LC_DATA_TASK_PASSKEY:
      return lc_fail(LC_EINVAL, "--pack: task:passkey is one document per sample; pack task:copy or a token "
                     "file with a document index");
  }
  d->pack = 1;
  return LC_OK;
}

void lc_data_pack_desc(const lc_data *d, char *buf, size_t cap) {
  if (!d->pack) snprintf(buf, cap, "off (one causal sequence per sample)");
  else if (d->kind == LC_DATA_TASK_COPY)
    snprintf(buf, cap, "task:copy documents of long-tailed lengths (32 tokens up to the sequence), no padding");
  else if (d->packer.drop_long)
    snprintf(buf, cap, "%llu %s into %ld sequences per epoch, %llu dropped (--drop-long: longer than S, %llu tokens), "
             "%.2f%% padding", (unsigned long long)(d->packer.n_docs - d->packer.dropped),
             d->tok.mask ? "conversations" : "documents", d->packer.seqs0, (unsigned long long)d->packer.dropped,
             (unsigned long long)d->packer.dropped_tokens,
             100.0 * (double)d->packer.pad0 / ((double)d->packer.seqs0 * d->packer.S));
  else // a conversation cut in pieces trains its later answers without the turns they answer: say so
    snprintf(buf, cap, "%llu %s into %ld sequences per epoch, %llu cut into pieces (longer than S%s), "
             "%.2f%% padding", (unsigned long long)d->packer.n_docs, d->tok.mask ? "conversations" : "documents",
             d->packer.seqs0, (unsigned long long)d->packer.split0,
             d->tok.mask && d->packer.split0 ? "; --drop-long leaves them out" : "",
             100.0 * (double)d->packer.pad0 / ((double)d->packer.seqs0 * d->packer.S));
}

// A packed sequence of a token file: its pieces, then padding (token 0, no target, each
// pad token its own document).
static int packed_tokens(lc_data *d, uint64_t index, int *tokens, int *targets, int *doc, int S) {
  const lc_piece *pc;
  size_t n = 0;
  if (lc_packer_get(&d->packer, index, &pc, &n) != LC_OK) return -1; // out of memory (lc_errmsg)
  int t = 0, counted = 0;
  for (size_t i = 0; i < n; i++) {
    const int t0 = t;
    for (uint32_t j = 0; j < pc[i].len; j++, t++) {
      tokens[t] = (int)lc_tokfile_get(&d->tok, pc[i].start + j);
      int has = (j + 1 < pc[i].len || !pc[i].last) && // the document goes on, and its next token counts
                lc_tokfile_counts(&d->tok, pc[i].start + j + 1);
      targets[t] = has ? (int)lc_tokfile_get(&d->tok, pc[i].start + j + 1) : -100;
      counted += has;
      if (doc) doc[t] = t0;
    }
  }
  for (; t < S; t++) {
    tokens[t] = 0, targets[t] = -100;
    if (doc) doc[t] = t;
  }
  return counted;
}

// task:copy, L-token segments each repeated once, over tokens [t0, t0 + n) of a sample
// (one document): target of t predicts t+1 inside the document; the document's last token
// has none when `closed`. Returns the counted targets.
static int copy_doc(lc_rng *r, int L, int V, int *tokens, int *targets, int t0, int n, int closed) {
  int seg[64], counted = 0;
  for (int i = 0; i <= n; i++) {
    int pos_in = i % L, block = i / L;
    if (pos_in == 0 && block % 2 == 0)
      for (int j = 0; j < L; j++) seg[j] = (int)lc_rng_below(r, (uint32_t)V);
    int tok = seg[pos_in];
    if (i < n) tokens[t0 + i] = tok;
    if (i > 0) {
      int rep = block % 2 == 1 && !(closed && i == n);
      targets[t0 + i - 1] = rep ? tok : -100;
      counted += rep;
    }
  }
  return counted;
}

int lc_data_sample(lc_data *d, uint64_t seed, uint64_t index, int *tokens, int *targets, int S) {
  return lc_data_sample_docs(d, seed, index, tokens, targets, NULL, S);
}

int lc_data_sample_docs(lc_data *d, uint64_t seed, uint64_t index, int *tokens, int *targets, int *doc,
                        int S) {
  lc_rng r;
  sample_rng(&r, seed, index);
  int counted = 0;
  if (d->pack && d->kind == LC_DATA_TOKENS) return packed_tokens(d, index, tokens, targets, doc, S);
  if (d->pack && d->kind == LC_DATA_TASK_COPY) {
    // Documents of long-tailed lengths: mostly 32-256 tokens, some up to 2K, a few up to S;
    // the last one ends where the sample does.
    const int V = d->vocab < 256 ? d->vocab : 256;
    for (int t0 = 0; t0 < S;) {
      uint32_t u = lc_rng_below(&r, 100);
      int hi = u < 70 ? 256 : u < 95 ? 2048 : S, lo = 32;
      if (hi > S) hi = S;
      int n = hi > lo ? lo + (int)lc_rng_below(&r, (uint32_t)(hi - lo + 1)) : lo;
      if (n > S - t0) n = S - t0;
      counted += copy_doc(&r, d->copy_len, V, tokens, targets, t0, n, 1);
      if (doc)
        for (int t = t0; t < t0 + n; t++) doc[t] = t0;
      t0 += n;
    }
    return counted;
  }
  if (doc) memset(doc, 0, sizeof(int) * (size_t)S);
  if (d->kind == LC_DATA_TASK_PASSKEY) return lc_passkey_sample(seed, index, LC_PASSKEY_TRAIN, tokens, targets, S);
  if (d->kind == LC_DATA_TOKENS) {
    uint64_t start = lc_rng_u64(&r) % (d->tok.count - (uint64_t)S); // start in [0, count - S - 1]
    // A token file's loss mask (version 3) becomes -100 here, before the sequence is cut
    // over ranks, so every layout counts the same targets.
    for (int t = 0; t < S; t++) {
      tokens[t] = (int)lc_tokfile_get(&d->tok, start + t);
      const int has = lc_tokfile_counts(&d->tok, start + t + 1);
      targets[t] = has ? (int)lc_tokfile_get(&d->tok, start + t + 1) : -100;
      counted += has;
    }
    return counted;
  }
  if (d->kind == LC_DATA_BYTES) {
    uint64_t span = d->n_bytes - (size_t)S; // start in [0, n - S - 1]
    size_t start = (size_t)(lc_rng_u64(&r) % span);
    for (int t = 0; t < S; t++) {
      tokens[t] = d->bytes[start + t];
      targets[t] = d->bytes[start + t + 1];
    }
    return S;
  }
  // task:copy: the sequence of S+1 tokens is pairs (A, A) of random segments; token i is
  // in a repeat when (i / L) is odd. Target t predicts token t+1.
  return copy_doc(&r, d->copy_len, d->vocab < 256 ? d->vocab : 256, tokens, targets, 0, S, 0);
}

lc_status lc_data_sample_eval(lc_data *d, uint64_t seed, uint64_t index, int *tokens, int *targets,
                              int *doc, int S, int *counted) {
  if (doc) memset(doc, 0, sizeof(int) * (size_t)S);
  if (d->kind == LC_DATA_TASK_PASSKEY) {
    *counted = lc_passkey_sample(seed, index, LC_PASSKEY_EVAL, tokens, targets, S);
  } else if (d->kind == LC_DATA_TASK_COPY) {
    *counted = lc_data_sample_docs(d, seed ^ 0x2545f4914f6cdd1dull, index, tokens, targets, doc, S);
  } else {
    return lc_fail(LC_EINVAL, "--eval-every needs held-out data: use task:passkey or task:copy");
  }
  return LC_OK;
}

// ---------------------------------------------------------------- task:passkey
static const char *const filler[] = {
    "The grass is green. ", "The sky is blue. ", "The sun is yellow. ", "Here we go. ",
    "There and back again. ", "The river flows on. ",
};
#define N_FILLER (sizeof filler / sizeof filler[0])
// The key is a short password: an upper-case letter, a digit and a symbol, each from an
// alphabet the rest of the text never uses. Finding the needle is then a content match
// (as in the classic passkey test, where only the key has digits): each answer character
// is the one token of its class anywhere before it, however far back that is. The record
// states the key twice, as the classic prompt does; that halves the samples the demo
// preset needs to learn the lookup (measured: docs/NOTES.md).
static const char record_fmt[] = "The pass key is %s. Remember it. %s is the pass key. ";
static const char question_fmt[] = "What is the pass key? The pass key is %s";
static const char *const key_alphabet[] = {"ABCDEFGJKLMNPQSUVXYZ", "0123456789", "!#$%&*+=@^"};
#define KEY_LEN 3
#define REC_LEN ((int)sizeof record_fmt - 1 - 4 + 2 * KEY_LEN) // two %s become keys
#define Q_LEN ((int)sizeof question_fmt - 1 - 2 + KEY_LEN)

// Held-out samples need the whole record in the first half and the question in the second.
int lc_passkey_min_seq(void) { return 2 * (REC_LEN > Q_LEN ? REC_LEN : Q_LEN) + 2 * KEY_LEN; }
int lc_passkey_key_len(void) { return KEY_LEN; }

int lc_passkey_sample(uint64_t seed, uint64_t index, lc_passkey_split split, int *tokens,
                      int *targets, int S) {
  lc_rng r;
  // Each split is its own stream of the same seed: training never sees a held-out sample.
  static const uint64_t salt[] = {0, 0x5bd1e9955bd1e995ull, 0x9e3779b97f4a7c15ull};
  sample_rng(&r, seed ^ salt[split], index ^ (split ? 0xffffffffull << 32 : 0));
  char key[KEY_LEN + 1];
  for (int i = 0; i < KEY_LEN; i++)
    key[i] = key_alphabet[i][lc_rng_below(&r, (uint32_t)strlen(key_alphabet[i]))];
  key[KEY_LEN] = 0;
  char rec[REC_LEN + 1], q[Q_LEN + 1];
  int nrec = snprintf(rec, sizeof rec, record_fmt, key, key);
  int nq = snprintf(q, sizeof q, question_fmt, key);
  // Stream of S+1 tokens: filler, the record at `at`, the question at the very end. The
  // first answer token is stream position n - KEY_LEN; held-out and fresh samples end the
  // record at least S/2 tokens before it.
  int n = S + 1;
  int qat = n - nq;
  int hi = split != LC_PASSKEY_TRAIN ? n - KEY_LEN - S / 2 - nrec + 2 : qat - nrec + 1;
  int at = (int)lc_rng_below(&r, (uint32_t)(hi > 1 ? hi : 1));
  int i = 0;
  while (i < n) {
    const char *f = filler[lc_rng_below(&r, N_FILLER)];
    for (int j = 0; f[j] && i < n; j++, i++) {
      int tok = (unsigned char)f[j];
      if (i < S) tokens[i] = tok;
      if (i > 0) targets[i - 1] = tok;
    }
  }
  for (int pass = 0; pass < 2; pass++) {
    const char *txt = pass ? q : rec;
    int start = pass ? qat : at, len = pass ? nq : nrec;
    for (int j = 0; j < len; j++) {
      int p = start + j, tok = (unsigned char)txt[j];
      if (p < S) tokens[p] = tok;
      if (p > 0) targets[p - 1] = tok;
    }
  }
  // Only the key characters of the answer count.
  int counted = 0;
  for (int t = 0; t < S; t++) {
    int answer = t + 1 >= n - KEY_LEN;
    if (!answer) targets[t] = -100;
    counted += answer;
  }
  return counted;
}
