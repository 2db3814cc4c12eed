// The process grid W = dp x cp x hp, its placement on ranks and the sub-communicators
// (DESIGN.md, Parallel layout). Where each token lives: attn/seqlayout.h.
#ifndef LC_GRID_H
#define LC_GRID_H

#include "comm/comm.h"

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
// Checks a grid against the world size and batch: clear error if impossible (the model's
// and the sequence's rules: lc_layout_validate in attn/seqlayout.h).
lc_status lc_grid_check(int world, int hp, int cp, int window, int batch);
// Builds the grid (collective over world: every rank must call it).
lc_status lc_grid_create(lc_grid *g, lc_comm *world, int hp, int cp, int window, lc_placement p);
void lc_grid_destroy(lc_grid *g);

#endif
