// Attention work per context rank counted from the visible (query, key) pairs, without
// the layout's cost code (attn/seqlayout.c), for test_policy and mpi_dist.
#ifndef LC_LAYOUTCOUNT_H
#define LC_LAYOUTCOUNT_H

#include <stdlib.h>
#include <string.h>

#include "backend/cpu/flash/flash.h"
#include "attn/seqlayout.h"

// The kernel's work on chunk j (tokens [j Lc, (j+1) Lc) of a sequence of S): it runs
// blocks of LC_FLASH_BQ queries from the chunk's start against tiles of LC_FLASH_BK keys,
// and computes a tile when any query q of the block sees any key of it (lo[q] <= key <= q;
// lo NULL: 0); a computed tile costs rows x LC_FLASH_BK pairs. Here every query marks each
// key it sees, one at a time. *pairs (may be NULL) adds the chunk's visible pairs.
static inline double lc_t_chunk_work(long S, long Lc, const int *lo, long j, double *pairs) {
  const long BQ = LC_FLASH_BQ, BK = LC_FLASH_BK, ntiles = (S + BK - 1) / BK;
  char *seen = malloc((size_t)ntiles);
  double w = 0;
  const long s = j * Lc, e = s + Lc;
  for (long q0 = s; q0 < e; q0 += BQ) {
    const long q1 = q0 + BQ < e ? q0 + BQ : e;
    memset(seen, 0, (size_t)ntiles);
    for (long q = q0; q < q1; q++) {
      const long first = lo ? lo[q] : 0;
      if (pairs) *pairs += (double)(q - first + 1);
      for (long key = first; key <= q; key++) seen[key / BK] = 1;
    }
    for (long t = 0; t < ntiles; t++) w += seen[t] ? (double)(q1 - q0) * (double)BK : 0;
  }
  free(seen);
  return w;
}

// For each context rank c of the layout: work[c] on the chunks it holds, pairs[c] their
// visible pairs; *max_chunk: the largest work of one chunk.
static inline void lc_t_rank_work(const lc_seq_layout *L, const int *lo, double *work, double *pairs,
                                  double *max_chunk) {
  *max_chunk = 0;
  for (int c = 0; c < L->cp; c++) {
    work[c] = 0, pairs[c] = 0;
    for (int a = 0; a < L->k; a++) {
      const double w = lc_t_chunk_work(L->S, L->Lc, lo, L->chunk[c * L->k + a], &pairs[c]);
      work[c] += w;
      if (w > *max_chunk) *max_chunk = w;
    }
  }
}

#endif
