// Token data files (written by tools/prepare_data.py or lc_tokfile_write):
//   offset 0  magic "LCTOKENS" (8 bytes)
//          8  uint32 version (1, 2 or 3)
//         12  uint32 dtype: bytes per token, 2 (uint16) or 4 (uint32)
//         16  uint32 vocab_size of the tokenizer
//         20  uint32 version 1: reserved, 0; versions 2 and 3: flags, bit 0 = has a document index
//         24  uint64 count of tokens
//         32  count tokens
//   version 3, after the tokens: the loss mask, count bytes, each 0 (the token is not a
//             target: context, e.g. a user turn) or 1 (it is: e.g. an assistant turn)
//   versions 2 and 3 with a document index, after the tokens (and the mask):
//             uint64 n_docs, then n_docs uint64 document starts (token indices: the first
//             is 0, strictly increasing, each < count; document i ends where i+1 starts)
// Versions 1 and 2 have no mask: every token counts. All integers little-endian. The file is memory-mapped read-only.
#ifndef LC_TOKFILE_H
#define LC_TOKFILE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define LC_TOKFILE_HEADER 32
#define LC_TOKFILE_VERSION 3
#define LC_TOKFILE_HAS_DOCS 1u

typedef struct {
  char path[1024];
  uint32_t version, bytes_per_token, vocab;
  uint64_t count;
  const unsigned char *toks; // count * bytes_per_token bytes
  uint64_t n_docs;           // documents in the index (0: the file has none)
  const unsigned char *docs; // n_docs little-endian uint64 starts
  const unsigned char *mask; // version 3: count bytes, 0 or 1 (NULL: every token counts)
  // private
  void *map_;
  size_t map_len_;
} lc_tokfile;

// Validates magic, version, dtype, reserved, vocab, count (0 is an error) and the file size
// (a truncated file names the expected and the actual size).
lc_status lc_tokfile_open(lc_tokfile *t, const char *path);
// The same on bytes in memory (not copied: keep them alive until lc_tokfile_close).
lc_status lc_tokfile_open_mem(lc_tokfile *t, const void *data, size_t len, const char *label);
// Token i (i < count).
uint32_t lc_tokfile_get(const lc_tokfile *t, uint64_t i);
// Start of document i (i < n_docs); its end is the next start (or count).
uint64_t lc_tokfile_doc_start(const lc_tokfile *t, uint64_t i);
uint64_t lc_tokfile_doc_end(const lc_tokfile *t, uint64_t i);
// 1 if token i counts as a target (always 1 without a mask).
static inline int lc_tokfile_counts(const lc_tokfile *t, uint64_t i) { return !t->mask || t->mask[i]; }
// LC_EINVAL if the header's vocab exceeds model_vocab, or (after a full scan) naming the first
// token id >= model_vocab with its index and byte offset in the file.
lc_status lc_tokfile_check_vocab(const lc_tokfile *t, int model_vocab);
void lc_tokfile_close(lc_tokfile *t);

// Writes n tokens atomically (temporary + fsync + rename). bytes_per_token 2 or 4; every
// token must be < vocab (and < 65536 for 2 bytes).
lc_status lc_tokfile_write(const char *path, const uint32_t *toks, uint64_t n, int bytes_per_token,
                           uint32_t vocab);
// The same with a document index (version 2): n_docs starts, the first 0, increasing, < n.
lc_status lc_tokfile_write_docs(const char *path, const uint32_t *toks, uint64_t n, int bytes_per_token,
                                uint32_t vocab, const uint64_t *starts, uint64_t n_docs);
// Version 3: the same with a loss mask (n bytes, each 0 or 1); mask NULL writes version 1/2.
lc_status lc_tokfile_write_mask(const char *path, const uint32_t *toks, const unsigned char *mask, uint64_t n,
                                int bytes_per_token, uint32_t vocab, const uint64_t *starts, uint64_t n_docs);

#endif
