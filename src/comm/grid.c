#include "comm/grid.h"

#include <stdlib.h>
#include <string.h>

const char *lc_placement_name(lc_placement p) {
  return p == LC_PLACE_HEAD_FIRST ? "head-first" : "context-first";
}

lc_status lc_placement_parse(const char *s, lc_placement *p) {
  if (!strcmp(s, "head-first")) *p = LC_PLACE_HEAD_FIRST;
  else if (!strcmp(s, "context-first")) *p = LC_PLACE_CONTEXT_FIRST;
  else return lc_fail(LC_EINVAL, "--placement '%s': use head-first or context-first", s);
  return LC_OK;
}

int lc_grid_rank_of(int cp, int hp, lc_placement p, int d, int c, int h) {
  return p == LC_PLACE_HEAD_FIRST ? (d * cp + c) * hp + h : (d * hp + h) * cp + c;
}

void lc_grid_coords_of(int cp, int hp, lc_placement p, int r, int *d, int *c, int *h) {
  if (p == LC_PLACE_HEAD_FIRST) *h = r % hp, *c = (r / hp) % cp;
  else *c = r % cp, *h = (r / cp) % hp;
  *d = r / (hp * cp);
}

lc_status lc_grid_check(int world, int hp, int cp, int window, int batch) {
  if (hp < 1 || cp < 1) return lc_fail(LC_EINVAL, "--hp and --cp must be >= 1 (got %d, %d)", hp, cp);
  if (world % (hp * cp) != 0)
    return lc_fail(LC_EINVAL, "world size %d is not a multiple of hp x cp = %d x %d; start %d x k processes "
                   "(mpirun -np) or change --hp/--cp", world, hp, cp, hp * cp);
  int dp = world / (hp * cp);
  if (window < 1 || cp % window != 0)
    return lc_fail(LC_EINVAL, "--ring-window %d must divide --cp %d", window, cp);
  if (batch % dp != 0)
    return lc_fail(LC_EINVAL, "--batch %d is not divisible by the %d data-parallel groups "
                   "(world %d / (hp %d x cp %d)); use a multiple of %d", batch, dp, world, hp, cp, dp);
  return LC_OK;
}

lc_status lc_grid_create(lc_grid *g, lc_comm *world, int hp, int cp, int window, lc_placement p) {
  memset(g, 0, sizeof *g);
  g->world = world->size;
  g->rank = world->rank;
  g->hp = hp;
  g->cp = cp;
  g->dp = world->size / (hp * cp);
  g->window = window;
  g->placement = p;
  g->world_comm = world;
  lc_grid_coords_of(cp, hp, p, world->rank, &g->d, &g->c, &g->h);
  lc_status st = lc_comm_split(world, g->d * cp + g->c, g->h, &g->head);
  if (st == LC_OK) st = lc_comm_split(world, g->d * hp + g->h, g->c, &g->ctx);
  if (st == LC_OK) st = lc_comm_split(world, g->c * hp + g->h, g->d, &g->data);
  if (st != LC_OK) lc_grid_destroy(g);
  return st;
}

void lc_grid_destroy(lc_grid *g) {
  lc_comm_destroy(g->data);
  lc_comm_destroy(g->ctx);
  lc_comm_destroy(g->head);
  g->data = g->ctx = g->head = NULL;
}

