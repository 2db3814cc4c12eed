#include "dist/grid.h"

#include <stdlib.h>
#include <string.h>

#include "attn/flash.h"

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

lc_status lc_grid_validate(int world, int hp, int cp, int window, const lc_config *cfg, long seq,
                           int batch) {
  if (hp < 1 || cp < 1) return lc_fail(LC_EINVAL, "--hp and --cp must be >= 1 (got %d, %d)", hp, cp);
  if (world % (hp * cp) != 0)
    return lc_fail(LC_EINVAL, "world size %d is not a multiple of hp x cp = %d x %d; start %d x k processes "
                   "(mpirun -np) or change --hp/--cp", world, hp, cp, hp * cp);
  int dp = world / (hp * cp);
  if (window < 1 || cp % window != 0)
    return lc_fail(LC_EINVAL, "--ring-window %d must divide --cp %d", window, cp);
  if (cfg->n_heads % hp != 0)
    return lc_fail(LC_EINVAL, "--hp %d does not divide the model's %d attention heads; pick a divisor",
                   hp, cfg->n_heads);
  if (hp % cfg->n_kv_heads != 0 && cfg->n_kv_heads % hp != 0)
    return lc_fail(LC_EINVAL, "--hp %d and the model's %d kv heads must divide one another", hp,
                   cfg->n_kv_heads);
  if (cp * hp > 1 && seq % (2L * cp * hp) != 0) // one process: any length
    return lc_fail(LC_EINVAL, "--seq %ld is not divisible by 2 x cp x hp = %d; use a multiple of %d",
                   seq, 2 * cp * hp, 2 * cp * hp);
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

const char *lc_cp_layout_name(lc_cp_layout l) { return l == LC_CP_ZIGZAG ? "zigzag" : "balanced"; }

lc_status lc_cp_layout_parse(const char *s, lc_cp_layout *l) {
  if (!strcmp(s, "zigzag")) *l = LC_CP_ZIGZAG;
  else if (!strcmp(s, "balanced")) *l = LC_CP_BALANCED;
  else return lc_fail(LC_EINVAL, "--cp-layout '%s': use zigzag or balanced", s);
  return LC_OK;
}

static long min_chunk = LC_MIN_CHUNK;

void lc_cp_layout_test_set_min_chunk(long tokens) { min_chunk = tokens > 0 ? tokens : LC_MIN_CHUNK; }

int lc_cp_layout_chunks(lc_cp_layout l, long S, int cp, int hp) {
  if (l == LC_CP_ZIGZAG || cp == 1) return 2;
  for (int k = 8; k > 2; k /= 2)
    if (S % ((long)k * cp * hp) == 0 && S / ((long)k * cp) >= min_chunk) return k;
  return 2;
}

lc_status lc_seq_layout_init(lc_seq_layout *L, long S, int cp, int hp, int k) {
  memset(L, 0, sizeof *L);
  if (k < 2 || k % 2 || S % ((long)k * cp) != 0 || S % ((long)cp * hp) != 0)
    return lc_fail(LC_EINVAL, "a sequence of %ld tokens does not split into %d chunks per context rank on cp %d "
                   "x hp %d ranks; use a length divisible by %ld", S, k, cp, hp, (long)k * cp * hp);
  const size_t n = (size_t)cp * (size_t)k;
  L->chunk = malloc(sizeof(int) * n);
  // balance's work arrays: cost[n], load[cp] (doubles), order[n], fill[cp] (ints)
  L->scratch_ = malloc(sizeof(double) * (n + (size_t)cp) + sizeof(int) * (n + (size_t)cp));
  if (!L->chunk || !L->scratch_) {
    free(L->chunk), free(L->scratch_);
    L->chunk = NULL, L->scratch_ = NULL;
    return lc_fail(LC_ENOMEM, "out of memory for the sequence layout");
  }
  L->S = S, L->cp = cp, L->hp = hp, L->k = k, L->Lc = S / ((long)k * cp);
  if (k == 2)
    for (int c = 0; c < cp; c++) L->chunk[2 * c] = c, L->chunk[2 * c + 1] = 2 * cp - 1 - c;
  else
    lc_seq_layout_balance(L, NULL);
  return LC_OK;
}

void lc_seq_layout_free(lc_seq_layout *L) {
  free(L->chunk);
  free(L->scratch_);
  memset(L, 0, sizeof *L);
}

long lc_seq_layout_global(const lc_seq_layout *L, int c, int h, long i) {
  long j = (long)h * (L->S / ((long)L->cp * L->hp)) + i; // index among rank c's S/cp tokens
  return lc_seq_layout_chunk_start(L, c, (int)(j / L->Lc)) + j % L->Lc;
}

// The attention kernel computes tiles of a query block x a key tile (attn/flash.h): a
// chunk costs the tiles its query blocks compute, from the key tile of the block's smallest
// bound to the tile of its last query (the work follows documents, plus their partly
// masked edges).
static double chunk_cost(const lc_seq_layout *L, const int *lo, long j) {
  const long a = j * L->Lc, b = a + L->Lc, BQ = LC_FLASH_BQ, BK = LC_FLASH_BK;
  double w = 0;
  for (long q0 = a; q0 < b; q0 += BQ) {
    const long q1 = q0 + BQ < b ? q0 + BQ : b;
    long mn = lo ? lo[q0] : 0;
    for (long t = q0 + 1; lo && t < q1; t++) mn = lo[t] < mn ? lo[t] : mn;
    w += (double)((q1 - 1) / BK - mn / BK + 1) * (double)(q1 - q0) * BK;
  }
  return w;
}

void lc_seq_layout_balance(lc_seq_layout *L, const int *lo) {
  const int n = L->cp * L->k;
  double *cost = L->scratch_, *load = cost + n;
  int *order = (int *)(load + L->cp), *fill = order + n;
  for (int c = 0; c < L->cp; c++) load[c] = 0, fill[c] = 0;
  for (int j = 0; j < n; j++) cost[j] = chunk_cost(L, lo, j), order[j] = j;
  // largest first (ties: lower chunk first), insertion sort: n <= 8 cp
  for (int i = 1; i < n; i++) {
    int x = order[i], m = i;
    while (m > 0 && (cost[order[m - 1]] < cost[x] || (cost[order[m - 1]] == cost[x] && order[m - 1] > x)))
      order[m] = order[m - 1], m--;
    order[m] = x;
  }
  for (int i = 0; i < n; i++) {
    int best = -1;
    for (int c = 0; c < L->cp; c++)
      if (fill[c] < L->k && (best < 0 || load[c] < load[best])) best = c;
    L->chunk[best * L->k + fill[best]++] = order[i];
    load[best] += cost[order[i]];
  }
  for (int c = 0; c < L->cp; c++) { // ascending chunks per rank
    int *x = L->chunk + c * L->k;
    for (int i = 1; i < L->k; i++)
      for (int m = i; m > 0 && x[m - 1] > x[m]; m--) {
        int t = x[m];
        x[m] = x[m - 1], x[m - 1] = t;
      }
  }
}

void lc_seq_layout_work(const lc_seq_layout *L, const int *lo, double *work) {
  for (int c = 0; c < L->cp; c++) {
    work[c] = 0;
    for (int a = 0; a < L->k; a++) work[c] += chunk_cost(L, lo, L->chunk[c * L->k + a]);
  }
}
