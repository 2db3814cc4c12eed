// The process grid W = dp x cp x hp, its placement on ranks, the sub-communicators,
// and where each token of a sequence lives (DESIGN.md, Parallel layout).
#ifndef LC_GRID_H
#define LC_GRID_H

#include "dist/comm.h"
#include "model/config.h"

typedef enum { LC_PLACE_HEAD_FIRST = 0, LC_PLACE_CONTEXT_FIRST } lc_placement;

const char *lc_placement_name(lc_placement p);
lc_status lc_placement_parse(const char *s, lc_placement *p);

typedef struct {
  int world, rank;
  int dp, cp, hp, window; // window: inner ring size of the double ring (window == cp: plain ring)
  lc_placement placement;
  int d, c, h;            // this rank's coordinates
  lc_comm *world_comm;    // not owned
  lc_comm *head;          // same (d, c): the Ulysses all-to-all group, rank = h
  lc_comm *ctx;           // same (d, h): the ring, rank = c
  lc_comm *data;          // same (c, h): data-parallel replicas, rank = d
} lc_grid;

// Rank of coordinates (d, c, h) under the placement, and the coordinates of a rank.
int lc_grid_rank_of(int cp, int hp, lc_placement p, int d, int c, int h);
void lc_grid_coords_of(int cp, int hp, lc_placement p, int rank, int *d, int *c, int *h);
// Checks a layout against the world size, model and sequence: clear error if impossible.
lc_status lc_grid_validate(int world, int hp, int cp, int window, const lc_config *cfg, long seq,
                           int batch);
// Builds the grid (collective over world: every rank must call it).
lc_status lc_grid_create(lc_grid *g, lc_comm *world, int hp, int cp, int window, lc_placement p);
void lc_grid_destroy(lc_grid *g);

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

#endif
