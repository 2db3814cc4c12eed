#define _POSIX_C_SOURCE 200809L
#include "io/tokfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/fsutil.h"

static const char lc_tok_magic[8] = {'L', 'C', 'T', 'O', 'K', 'E', 'N', 'S'};

static uint32_t rd32(const unsigned char *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t rd64(const unsigned char *b) { return (uint64_t)rd32(b) | (uint64_t)rd32(b + 4) << 32; }

static void wr32(unsigned char *b, uint32_t v) {
  for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i));
}

#define FIX " (make token files with tools/prepare_data.py)"

// The document index after the tokens (at byte `at`): size, order and range of every start.
static lc_status parse_docs(lc_tokfile *t, const unsigned char *d, unsigned long long size,
                            unsigned long long at) {
  const char *P = t->path;
  if (size < at + 8)
    return lc_fail(LC_EFORMAT, "%s: the header announces a document index but the file ends %llu bytes "
                   "after the tokens (the index needs at least 8); the file is truncated" FIX, P, size - at);
  uint64_t n = rd64(d + at);
  if (n == 0)
    return lc_fail(LC_EFORMAT, "%s: the document index lists 0 documents; the index is corrupt" FIX, P);
  if (n > (size - at - 8) / 8 || size != at + 8 + 8 * n)
    return lc_fail(LC_EFORMAT, "%s: the document index lists %llu documents, which need %llu bytes, but %llu "
                   "bytes follow the tokens; the file is corrupt or truncated" FIX, P, (unsigned long long)n,
                   n > (~0ull - 8) / 8 ? ~0ull : 8 + 8 * (unsigned long long)n, size - at);
  t->docs = d + at + 8;
  t->n_docs = n;
  uint64_t prev = 0;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t s0 = rd64(t->docs + 8 * i);
    if ((i == 0 && s0 != 0) || (i > 0 && s0 <= prev) || s0 >= t->count)
      return lc_fail(LC_EFORMAT, "%s: document %llu starts at token %llu, %s; the document index is corrupt" FIX,
                     P, (unsigned long long)i, (unsigned long long)s0,
                     i == 0 && s0 != 0 ? "but the first must start at 0"
                     : s0 >= t->count ? "beyond the last token"
                                      : "not after the previous document's start");
    prev = s0;
  }
  return LC_OK;
}

static lc_status parse(lc_tokfile *t, const unsigned char *d, unsigned long long size) {
  const char *P = t->path;
  if (size < LC_TOKFILE_HEADER)
    return lc_fail(LC_EFORMAT, "%s: file is %llu bytes, too short for a token file header (%d "
                   "bytes); the file is truncated or not a token file" FIX, P, size, LC_TOKFILE_HEADER);
  if (memcmp(d, lc_tok_magic, 8) != 0)
    return lc_fail(LC_EFORMAT, "%s: bad magic: not a longctx token file (it must start with "
                   "\"LCTOKENS\")" FIX, P);
  t->version = rd32(d + 8);
  t->bytes_per_token = rd32(d + 12);
  t->vocab = rd32(d + 16);
  uint32_t reserved = rd32(d + 20);
  t->count = rd64(d + 24);
  if (t->version < 1 || t->version > 3)
    return lc_fail(LC_EFORMAT, "%s: token file version %u is not supported (this build reads "
                   "versions 1, 2 and 3)" FIX, P, t->version);
  const int has_docs = t->version >= 2 && (reserved & LC_TOKFILE_HAS_DOCS);
  if (t->version >= 2) reserved &= ~LC_TOKFILE_HAS_DOCS;
  if (t->bytes_per_token != 2 && t->bytes_per_token != 4)
    return lc_fail(LC_EFORMAT, "%s: token dtype %u is not 2 (uint16) or 4 (uint32); the header "
                   "is corrupt" FIX, P, t->bytes_per_token);
  if (reserved != 0)
    return lc_fail(LC_EFORMAT, "%s: reserved header field is %u, not 0; the header is corrupt" FIX,
                   P, reserved);
  if (t->vocab == 0)
    return lc_fail(LC_EFORMAT, "%s: header vocab_size is 0; the header is corrupt" FIX, P);
  if (t->bytes_per_token == 2 && t->vocab > 65536)
    return lc_fail(LC_EFORMAT, "%s: vocab_size %u does not fit 2-byte tokens; the header is "
                   "corrupt" FIX, P, t->vocab);
  if (t->count == 0)
    return lc_fail(LC_EFORMAT, "%s: token file is empty (count 0): give a file with tokens" FIX, P);
  unsigned long long avail = size - LC_TOKFILE_HEADER;
  if (t->count > avail / t->bytes_per_token) {
    unsigned long long bpt = t->bytes_per_token;
    if (t->count > (~0ull - LC_TOKFILE_HEADER) / bpt)
      return lc_fail(LC_EFORMAT, "%s: truncated or corrupt: header says %llu tokens, more than "
                     "any file can hold, but the file is %llu bytes", P,
                     (unsigned long long)t->count, size);
    return lc_fail(LC_EFORMAT, "%s: truncated: header says %llu tokens of %u bytes, so the file "
                   "should be %llu bytes, but it is %llu bytes; re-create the file", P,
                   (unsigned long long)t->count, t->bytes_per_token,
                   LC_TOKFILE_HEADER + (unsigned long long)t->count * bpt, size);
  }
  unsigned long long want = LC_TOKFILE_HEADER + (unsigned long long)t->count * t->bytes_per_token;
  t->toks = d + LC_TOKFILE_HEADER;
  if (t->version == 3) { // the loss mask: count bytes, 0 or 1
    if (size - want < t->count)
      return lc_fail(LC_EFORMAT, "%s: the loss mask is shorter than the tokens: %llu tokens but %llu bytes "
                     "follow them (version 3 needs one mask byte per token); the file is truncated" FIX, P,
                     (unsigned long long)t->count, size - want);
    t->mask = d + want;
    const unsigned char *bad = NULL;
    for (uint64_t i = 0; i < t->count && !bad; i++)
      if (t->mask[i] > 1) bad = t->mask + i;
    if (bad)
      return lc_fail(LC_EFORMAT, "%s: loss mask byte %llu is %u, not 0 or 1; the file is corrupt" FIX, P,
                     (unsigned long long)(bad - t->mask), *bad);
    want += t->count;
  }
  if (has_docs) return parse_docs(t, d, size, want);
  if (size != want)
    return lc_fail(LC_EFORMAT, "%s: file is %llu bytes but its header says %llu tokens of %u bytes "
                   "(%llu bytes): %llu trailing bytes; the file is corrupt" FIX, P, size,
                   (unsigned long long)t->count, t->bytes_per_token, want, size - want);
  return LC_OK;
}

static void tk_init(lc_tokfile *t, const char *label) {
  memset(t, 0, sizeof *t);
  snprintf(t->path, sizeof t->path, "%s", label ? label : "(memory)");
}

lc_status lc_tokfile_open(lc_tokfile *t, const char *path) {
  tk_init(t, path);
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return lc_fail(LC_EIO, "cannot open token file %s (%s); give an existing file" FIX, path,
                   strerror(errno));
  struct stat s;
  if (fstat(fd, &s) != 0 || !S_ISREG(s.st_mode)) {
    close(fd);
    return lc_fail(LC_EIO, "%s is not a regular file; give a token file" FIX, path);
  }
  unsigned long long size = (unsigned long long)s.st_size;
  if (size < LC_TOKFILE_HEADER) {
    close(fd);
    static const unsigned char zero[LC_TOKFILE_HEADER];
    return parse(t, zero, size); // reports "too short"
  }
  void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (m == MAP_FAILED)
    return lc_fail(LC_EIO, "cannot map token file %s (%s)", path, strerror(e));
  t->map_ = m;
  t->map_len_ = (size_t)size;
  lc_status st = parse(t, m, size);
  if (st != LC_OK) lc_tokfile_close(t);
  return st;
}

lc_status lc_tokfile_open_mem(lc_tokfile *t, const void *data, size_t len, const char *label) {
  tk_init(t, label);
  static const unsigned char zero[LC_TOKFILE_HEADER];
  if (!data && len) return lc_fail(LC_EINVAL, "%s: NULL data of %zu bytes", t->path, len);
  return parse(t, len < LC_TOKFILE_HEADER ? zero : data, len);
}

uint32_t lc_tokfile_get(const lc_tokfile *t, uint64_t i) {
  const unsigned char *p = t->toks + i * t->bytes_per_token;
  return t->bytes_per_token == 2 ? (uint32_t)(p[0] | p[1] << 8) : rd32(p);
}

uint64_t lc_tokfile_doc_start(const lc_tokfile *t, uint64_t i) { return rd64(t->docs + 8 * i); }
uint64_t lc_tokfile_doc_end(const lc_tokfile *t, uint64_t i) {
  return i + 1 < t->n_docs ? rd64(t->docs + 8 * (i + 1)) : t->count;
}

lc_status lc_tokfile_check_vocab(const lc_tokfile *t, int model_vocab) {
  if (model_vocab <= 0) return lc_fail(LC_EINVAL, "model vocab %d must be positive", model_vocab);
  if (t->vocab > (uint32_t)model_vocab)
    return lc_fail(LC_EINVAL, "%s was tokenized with vocab %u but the model's vocab is %d: use a "
                   "model with vocab >= %u or re-tokenize with the model's tokenizer", t->path,
                   t->vocab, model_vocab, t->vocab);
  for (uint64_t i = 0; i < t->count; i++) {
    uint32_t id = lc_tokfile_get(t, i);
    if (id >= (uint32_t)model_vocab)
      return lc_fail(LC_EINVAL, "token id %u at index %llu (byte offset %llu) of %s is >= the "
                     "model's vocab %d: the file is corrupt or was made with another tokenizer",
                     id, (unsigned long long)i,
                     (unsigned long long)(LC_TOKFILE_HEADER + i * t->bytes_per_token), t->path,
                     model_vocab);
  }
  return LC_OK;
}

void lc_tokfile_close(lc_tokfile *t) {
  if (t->map_) munmap(t->map_, t->map_len_);
  t->map_ = NULL;
  t->map_len_ = 0;
  t->toks = NULL;
}

static void wr64(unsigned char *b, uint64_t v) {
  wr32(b, (uint32_t)v);
  wr32(b + 4, (uint32_t)(v >> 32));
}

lc_status lc_tokfile_write(const char *path, const uint32_t *toks, uint64_t n, int bytes_per_token,
                           uint32_t vocab) {
  return lc_tokfile_write_docs(path, toks, n, bytes_per_token, vocab, NULL, 0);
}

lc_status lc_tokfile_write_docs(const char *path, const uint32_t *toks, uint64_t n, int bytes_per_token,
                                uint32_t vocab, const uint64_t *starts, uint64_t n_docs) {
  return lc_tokfile_write_mask(path, toks, NULL, n, bytes_per_token, vocab, starts, n_docs);
}

lc_status lc_tokfile_write_mask(const char *path, const uint32_t *toks, const unsigned char *mask, uint64_t n,
                                int bytes_per_token, uint32_t vocab, const uint64_t *starts, uint64_t n_docs) {
  if (bytes_per_token != 2 && bytes_per_token != 4)
    return lc_fail(LC_EINVAL, "%s: bytes per token must be 2 or 4, not %d", path, bytes_per_token);
  if (vocab == 0 || (bytes_per_token == 2 && vocab > 65536))
    return lc_fail(LC_EINVAL, "%s: vocab %u does not fit %d-byte tokens (use 4 bytes above 65536)",
                   path, vocab, bytes_per_token);
  if (n == 0) return lc_fail(LC_EINVAL, "%s: no tokens to write (a token file holds at least one)", path);
  if (!toks) return lc_fail(LC_EINVAL, "%s: NULL tokens", path);
  for (uint64_t i = 0; i < n; i++)
    if (toks[i] >= vocab)
      return lc_fail(LC_EINVAL, "%s: token id %u at index %llu is >= vocab %u", path, toks[i],
                     (unsigned long long)i, vocab);
  for (uint64_t i = 0; i < n_docs; i++)
    if ((i == 0 && starts[0] != 0) || (i > 0 && starts[i] <= starts[i - 1]) || starts[i] >= n)
      return lc_fail(LC_EINVAL, "%s: document start %llu (document %llu) is not increasing from 0 below %llu",
                     path, (unsigned long long)starts[i], (unsigned long long)i, (unsigned long long)n);
  for (uint64_t i = 0; mask && i < n; i++)
    if (mask[i] > 1)
      return lc_fail(LC_EINVAL, "%s: loss mask value %u at token %llu is not 0 or 1", path, mask[i], (unsigned long long)i);
  unsigned char h[LC_TOKFILE_HEADER];
  memcpy(h, lc_tok_magic, 8);
  wr32(h + 8, mask ? 3 : n_docs ? 2 : 1);
  wr32(h + 12, (uint32_t)bytes_per_token);
  wr32(h + 16, vocab);
  wr32(h + 20, n_docs ? LC_TOKFILE_HAS_DOCS : 0);
  wr32(h + 24, (uint32_t)n);
  wr32(h + 28, (uint32_t)(n >> 32));
  lc_atomic_file af;
  LC_TRY(lc_atomic_begin(&af, path));
  LC_TRY(lc_atomic_write(&af, h, sizeof h));
  unsigned char buf[1 << 16];
  size_t per = sizeof buf / (size_t)bytes_per_token;
  for (uint64_t i = 0; i < n; i += per) {
    size_t k = n - i < per ? (size_t)(n - i) : per;
    for (size_t j = 0; j < k; j++) {
      uint32_t v = toks[i + j];
      for (int b = 0; b < bytes_per_token; b++) buf[j * (size_t)bytes_per_token + (size_t)b] = (unsigned char)(v >> (8 * b));
    }
    LC_TRY(lc_atomic_write(&af, buf, k * (size_t)bytes_per_token));
  }
  for (uint64_t i = 0; mask && i < n; i += sizeof buf) {
    size_t k = n - i < sizeof buf ? (size_t)(n - i) : sizeof buf;
    LC_TRY(lc_atomic_write(&af, mask + i, k));
  }
  if (n_docs) {
    unsigned char b8[8];
    wr64(b8, n_docs);
    LC_TRY(lc_atomic_write(&af, b8, 8));
    for (uint64_t i = 0; i < n_docs; i += sizeof buf / 8) {
      size_t k = n_docs - i < sizeof buf / 8 ? (size_t)(n_docs - i) : sizeof buf / 8;
      for (size_t j = 0; j < k; j++) wr64(buf + 8 * j, starts[i + j]);
      LC_TRY(lc_atomic_write(&af, buf, 8 * k));
    }
  }
  return lc_atomic_commit(&af);
}
