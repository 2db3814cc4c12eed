// Packing whole documents into training sequences of S tokens (--pack).
//
// Policy. Each epoch visits the documents in a fresh seeded order. A document longer than
// S is cut into pieces of S tokens and a last, shorter piece; each piece is its own
// attention context (positions restart), but the labels inside a document stay the next
// token, across piece boundaries too. Pieces go first-fit into a window of up to 64 open
// sequences; when a piece fits none and the window is full, the oldest open sequence is
// closed and its free tail is padding (token 0, no label, each pad token its own context).
// Nothing is dropped unless asked: every token of every document is in exactly one sequence
// of the epoch, and the padding is counted (lc_packer.pad0). With drop_long, documents
// longer than S are left out of every epoch instead of being cut (counted: dropped,
// dropped_tokens); the others are then whole in one sequence each.
#ifndef LC_PACK_H
#define LC_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct {
  uint64_t start;  // first token (index into the token stream)
  uint32_t len;    // tokens
  uint32_t last;   // 1: the piece ends its document (its last token has no label)
} lc_piece;

typedef uint64_t (*lc_doc_start_fn)(const void *src, uint64_t i);

typedef struct {
  int S;
  uint64_t seed, n_docs, count; // documents and tokens of the source
  const void *src;
  lc_doc_start_fn doc_start;     // start of document i (document i ends at i+1's start or count)
  int drop_long;                 // leave out documents longer than S (else cut into pieces)
  uint64_t dropped, dropped_tokens; // with drop_long: documents (and their tokens) left out
  // The plan of the current epoch: sequence j is pieces[first[j] .. first[j+1]).
  long epoch;
  lc_piece *pieces;
  size_t n_pieces, cap;
  size_t *first, fcap;
  long n_seqs;
  // Epoch 0, for the log: sequences, documents cut into pieces, padding tokens.
  long seqs0;
  uint64_t split0, pad0;
  // Where each epoch starts in the stream of sequences (epochs pack into slightly
  // different counts): first_seq[e] for e < n_known, grown as later epochs are planned.
  uint64_t *first_seq;
  long n_known;
} lc_packer;

// Builds the epoch-0 plan (LC_ENOMEM on failure). n_docs >= 1, starts increasing from 0.
// drop_long: documents longer than S are left out (LC_EINVAL when that leaves none).
lc_status lc_packer_init(lc_packer *p, int S, uint64_t seed, const void *src, uint64_t n_docs, uint64_t count,
                         lc_doc_start_fn doc_start, int drop_long);
void lc_packer_free(lc_packer *p);
// The order in which epoch `epoch` visits the documents (a seeded shuffle of 0..n_docs-1).
void lc_pack_order(uint64_t seed, long epoch, uint64_t n_docs, uint64_t *order);
// Sequence `index` of the stream (epochs follow one another, each as long as its own plan):
// its pieces (*n of them). The pointer is valid until the next call.
lc_status lc_packer_get(lc_packer *p, uint64_t index, const lc_piece **pieces, size_t *n);

#endif
