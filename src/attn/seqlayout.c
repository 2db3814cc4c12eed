#include "attn/seqlayout.h"

#include <stdlib.h>
#include <string.h>

#include "backend/attn_geom.h"
#include "comm/grid.h"

lc_status lc_layout_validate(int world, int hp, int cp, int window, int n_heads, int n_kv_heads, long seq, int batch) {
  LC_TRY(lc_grid_check(world, hp, cp, window, batch));
  if (n_heads % hp != 0)
    return lc_fail(LC_EINVAL, "--hp %d does not divide the model's %d attention heads; pick a divisor",
                   hp, n_heads);
  if (hp % n_kv_heads != 0 && n_kv_heads % hp != 0)
    return lc_fail(LC_EINVAL, "--hp %d and the model's %d kv heads must divide one another", hp,
                   n_kv_heads);
  if (cp * hp > 1 && seq % (2L * cp * hp) != 0) // one process: any length
    return lc_fail(LC_EINVAL, "--seq %ld is not divisible by 2 x cp x hp = %d; use a multiple of %d",
                   seq, 2 * cp * hp, 2 * cp * hp);
  return LC_OK;
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

// The attention kernel computes tiles of a query block x a key tile (backend/cpu/flash/flash.h): a
// chunk costs the tiles its query blocks compute, from the key tile of the block's smallest
// bound to the tile of its last query (the work follows documents, plus their partly
// masked edges).
static double chunk_cost(const lc_seq_layout *L, const int *lo, long j) {
  const long a = j * L->Lc, b = a + L->Lc, BQ = LC_ATTN_TILE_Q, BK = LC_ATTN_TILE_K;
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

void lc_seq_place(lc_seq_layout *L, int balanced, int c, int h, int window, const int *full_tok,
                  const int *full_tgt, const int *full_doc, int *lo, int T, int *tok, int *tgt, int *pos,
                  lc_seq_placed *out) {
  const long S = L->S;
  if (lo)
    for (long g = 0; g < S; g++) lo[g] = lc_visible_from(g, full_doc[g], window);
  if (balanced && L->cp > 1) lc_seq_layout_balance(L, lo);
  out->counted = 0, out->pairs = 0, out->rope_len = 0;
  for (int i = 0; i < T; i++) {
    long g = lc_seq_layout_global(L, c, h, i);
    tok[i] = full_tok[g];
    tgt[i] = full_tgt[g];
    pos[i] = (int)(g - full_doc[g]);
    out->counted += tgt[i] >= 0;
    out->pairs += (double)(g - (lo ? lo[g] : 0) + 1);
  }
  for (long g = 0; g < S; g++)
    if ((int)(g - full_doc[g]) + 1 > out->rope_len) out->rope_len = (int)(g - full_doc[g]) + 1;
}
