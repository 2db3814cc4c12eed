// Where the tokens of a sequence live over the cp x hp ranks of a sequence group
// (zigzag or balanced chunks), which keys each token may see (documents, windows), the
// chunk cost model that balances them, and placing one sample on this rank.
#ifndef LC_SEQLAYOUT_H
#define LC_SEQLAYOUT_H

#include "core/status.h"

// Checks a layout against the world size, model and sequence: clear error if impossible.
lc_status lc_layout_validate(int world, int hp, int cp, int window, int n_heads, int n_kv_heads, long seq, int batch);

// The first key position a token at position p may see: the start of its document, and
// with a sliding window of W > 0 tokens (Mistral) no earlier than p - W + 1.
static inline int lc_visible_from(long p, long doc_start, int W) {
  const long w = W > 0 ? p - W + 1 : 0;
  return (int)(doc_start > w ? doc_start : w);
}

// The general token layout of one sequence: S cut into k * cp equal chunks of Lc tokens;
// context rank c holds k of them, chunk[c*k .. c*k+k) in ascending order, concatenated;
// head rank h holds the h-th of hp equal slices of those S/cp tokens. Zigzag is k = 2 with
// chunks {c, 2cp-1-c}: every ring step carries equal work for one causal sequence. With
// documents or a window that no longer holds; a balanced layout assigns the chunks by
// their attention work instead (every layout gives the same numbers).
typedef enum { LC_CP_ZIGZAG = 0, LC_CP_BALANCED } lc_cp_layout;
const char *lc_cp_layout_name(lc_cp_layout l);
lc_status lc_cp_layout_parse(const char *s, lc_cp_layout *l);

typedef struct {
  long S, Lc;
  int cp, hp, k;
  int *chunk; // [cp * k], owned
  void *scratch_; // balancing's work arrays, allocated with the layout
} lc_seq_layout;

// Chunks per context rank a layout kind uses for S on cp x hp ranks: zigzag 2; balanced
// the largest of 8, 4, 2 with S divisible by k x cp x hp and chunks of at least
// LC_MIN_CHUNK tokens (finer chunks balance better; smaller ones cost more kernel calls
// and merges than they save).
#define LC_MIN_CHUNK 256
int lc_cp_layout_chunks(lc_cp_layout l, long S, int cp, int hp);
// Test-only: the smallest balanced chunk (0 restores LC_MIN_CHUNK), so short test
// sequences get several chunks per rank.
void lc_cp_layout_test_set_min_chunk(long tokens);
// Allocates L for S tokens on cp x hp ranks with k chunks per context rank and sets the
// zigzag (k = 2: context rank c holds chunks c and 2cp-1-c) or, for k > 2, the balanced
// assignment of a plain causal sequence.
lc_status lc_seq_layout_init(lc_seq_layout *L, long S, int cp, int hp, int k);
void lc_seq_layout_free(lc_seq_layout *L);
// Assigns the chunks by attention work: a chunk costs the 64 x 64 (query, key) tiles the
// kernel computes for its queries, from the tile of the smallest lo[t] of a 64-query
// block to the block's own (lo NULL: plain causal, lo[t] = 0); largest first to the least
// loaded rank that still has room for one of its k chunks. Deterministic.
void lc_seq_layout_balance(lc_seq_layout *L, const int *lo);
// Global index of local token i of rank (c, h); start of rank c's a-th chunk.
long lc_seq_layout_global(const lc_seq_layout *L, int c, int h, long i);
static inline long lc_seq_layout_chunk_start(const lc_seq_layout *L, int c, int a) {
  return (long)L->chunk[c * L->k + a] * L->Lc;
}
// Attention work of each context rank in query-key pairs of the tiles computed (the cost
// of lc_seq_layout_balance): work[c] (cp entries).
void lc_seq_layout_work(const lc_seq_layout *L, const int *lo, double *work);

// One sample on rank (c, h) of a sequence group: where every token may look (lo[S], from
// its document start full_doc and the window; lo NULL: plain causal), the layout over the
// context ranks (balanced by that work when asked), this rank's T tokens, targets and RoPE
// positions (restarting per document); its counted targets, visible (query, key) pairs, and
// the longest document + 1 (positions are global: every rank sees the whole sample, so a
// length-dependent RoPE scaling agrees on every rank, as one process would).
typedef struct {
  long counted;
  double pairs;
  int rope_len;
} lc_seq_placed;
void lc_seq_place(lc_seq_layout *L, int balanced, int c, int h, int window, const int *full_tok,
                  const int *full_tgt, const int *full_doc, int *lo, int T, int *tok, int *tgt, int *pos,
                  lc_seq_placed *out);

#endif
