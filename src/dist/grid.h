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

// Rank of coordinates (d, c, h) under the placement.
int lc_grid_rank_of(int cp, int hp, lc_placement p, int d, int c, int h);
// Checks a layout against the world size, model and sequence: clear error if impossible.
lc_status lc_grid_validate(int world, int hp, int cp, int window, const lc_config *cfg, long seq,
                           int batch);
// Builds the grid (collective over world: every rank must call it).
lc_status lc_grid_create(lc_grid *g, lc_comm *world, int hp, int cp, int window, lc_placement p);
void lc_grid_destroy(lc_grid *g);

// Token layout. The sequence is cut into 2*cp chunks; context rank c owns chunks c and
// 2cp-1-c (in that order); head rank h owns the h-th of hp slices of those S/cp tokens.
// Global index of local token i (0 <= i < S/(cp*hp)) of rank (c, h).
long lc_layout_index(long S, int cp, int hp, int c, int h, long i);

#endif
