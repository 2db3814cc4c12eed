// Training data. A sample is drawn deterministically from (seed, sample index), so
// data-parallel groups and resumed runs get exactly the samples they should.
// Sources: task:copy (built-in learnable task) or a file read as bytes (vocab 256).
#ifndef LC_DATA_H
#define LC_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "io/pack.h"
#include "io/tokfile.h"

typedef enum { LC_DATA_TASK_COPY, LC_DATA_TASK_PASSKEY, LC_DATA_BYTES, LC_DATA_TOKENS } lc_data_kind;

typedef struct {
  lc_data_kind kind;
  int vocab;
  int copy_len;         // task:copy segment length
  unsigned char *bytes; // LC_DATA_BYTES: file contents
  size_t n_bytes;
  lc_tokfile tok;       // LC_DATA_TOKENS: a token file (tools/prepare_data.py)
  int pack;             // samples are whole documents packed into S tokens (lc_data_pack)
  lc_packer packer;     // token files with --pack
  char desc[384];
} lc_data;

// spec: "task:copy", "task:passkey" or a file path: a token file (starts with the magic
// LCTOKENS) or any other file read as bytes (vocab 256 only). seq: tokens per sample (the
// file must hold seq+1 tokens). Token ids >= vocab are an error naming file and offset.
lc_status lc_data_open(lc_data *d, const char *spec, int vocab, int seq);
void lc_data_close(lc_data *d);
// tokens[S] and pre-shifted targets[S] (targets[t] = token at t+1; -100 = not counted)
// of sample `index`. Returns the number of counted targets.
int lc_data_sample(lc_data *d, uint64_t seed, uint64_t index, int *tokens, int *targets, int S);
// The same with doc[t], the position in the sample where token t's document starts (all 0
// unless packed). In a packed sample the last token of each document has no target.
// Returns -1 (with lc_errmsg) when packing runs out of memory.
int lc_data_sample_docs(lc_data *d, uint64_t seed, uint64_t index, int *tokens, int *targets, int *doc,
                        int S);
// Samples become whole documents packed into S tokens (pack.h: the policy): token files
// with a document index, or task:copy, whose samples become several independent copy
// documents of long-tailed lengths. Clear errors for data without documents. A token file
// with a loss mask holds conversations, never cut: one longer than S is an error unless
// drop_long, which leaves out every document longer than S (any token file; counted in
// the packer).
lc_status lc_data_pack(lc_data *d, int S, uint64_t seed, int drop_long);
// The packing of epoch 0 for the log: documents, sequences, pieces cut, padding share.
void lc_data_pack_desc(const lc_data *d, char *buf, size_t cap);

// A held-out sample (never drawn for training) for evaluation; LC_EINVAL for file data,
// which has no held-out split.
lc_status lc_data_sample_eval(lc_data *d, uint64_t seed, uint64_t index, int *tokens, int *targets,
                              int *doc, int S, int *counted);

// task:passkey: filler text with a record "The pass key is K7#. Remember it. K7# is the
// pass key." hidden in it and the question "What is the pass key? The pass key is K7#" at
// the end. The key is an upper-case letter, a digit and a symbol (20 x 10 x 10 keys);
// only its characters in the answer count. Splits are disjoint streams of one seed:
// training samples put the record anywhere; held-out (eval) and fresh (demo prompt)
// samples end it at least S/2 tokens before the answer. Returns the counted targets.
typedef enum { LC_PASSKEY_TRAIN = 0, LC_PASSKEY_EVAL = 1, LC_PASSKEY_FRESH = 2 } lc_passkey_split;
int lc_passkey_sample(uint64_t seed, uint64_t index, lc_passkey_split split, int *tokens,
                      int *targets, int S);
// Shortest sequence a passkey sample fits in; characters in a key.
int lc_passkey_min_seq(void);
int lc_passkey_key_len(void);

#endif
