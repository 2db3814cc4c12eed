#include "io/pack.h"

#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

#define WINDOW 64 // open sequences a piece may go into

typedef struct {
  int space;      // free tokens
  size_t n, cap;  // pieces
  lc_piece *p;
} open_seq;

static lc_status push(lc_packer *pk, const lc_piece *x, size_t n) {
  if (pk->n_pieces + n > pk->cap) {
    size_t cap = pk->cap ? pk->cap : 1024;
    while (cap < pk->n_pieces + n) cap *= 2;
    lc_piece *q = realloc(pk->pieces, cap * sizeof *q);
    if (!q) return lc_fail(LC_ENOMEM, "out of memory packing documents");
    pk->pieces = q;
    pk->cap = cap;
  }
  memcpy(pk->pieces + pk->n_pieces, x, n * sizeof *x);
  pk->n_pieces += n;
  return LC_OK;
}

// Closes open sequence o: its pieces become the next sequence of the plan.
static lc_status emit(lc_packer *pk, open_seq *o, uint64_t *pad) {
  if ((size_t)pk->n_seqs + 2 > pk->fcap) {
    size_t cap = pk->fcap ? 2 * pk->fcap : 1024;
    size_t *q = realloc(pk->first, cap * sizeof *q);
    if (!q) return lc_fail(LC_ENOMEM, "out of memory packing documents");
    pk->first = q;
    pk->fcap = cap;
  }
  pk->first[pk->n_seqs] = pk->n_pieces;
  LC_TRY(push(pk, o->p, o->n));
  pk->n_seqs++;
  pk->first[pk->n_seqs] = pk->n_pieces;
  *pad += (uint64_t)o->space;
  o->n = 0;
  o->space = pk->S;
  return LC_OK;
}

static lc_status add_piece(open_seq *o, const lc_piece *x) {
  if (o->n == o->cap) {
    size_t cap = o->cap ? 2 * o->cap : 8;
    lc_piece *q = realloc(o->p, cap * sizeof *q);
    if (!q) return lc_fail(LC_ENOMEM, "out of memory packing documents");
    o->p = q;
    o->cap = cap;
  }
  o->p[o->n++] = *x;
  o->space -= (int)x->len;
  return LC_OK;
}

void lc_pack_order(uint64_t seed, long epoch, uint64_t n_docs, uint64_t *order) {
  lc_rng r;
  lc_rng_seed(&r, seed * 0x9e3779b97f4a7c15ull ^ (0x5851f42d4c957f2dull + (uint64_t)epoch));
  for (uint64_t i = 0; i < n_docs; i++) order[i] = i;
  for (uint64_t i = n_docs - 1; n_docs > 0 && i > 0; i--) {
    uint64_t j = lc_rng_u64(&r) % (i + 1), t = order[i];
    order[i] = order[j], order[j] = t;
  }
}

// The plan of epoch e: documents in a seeded order, pieces first-fit into the window.
static lc_status plan(lc_packer *pk, long e) {
  pk->n_pieces = 0;
  pk->n_seqs = 0;
  uint64_t *order = malloc(sizeof *order * pk->n_docs);
  open_seq win[WINDOW];
  memset(win, 0, sizeof win);
  lc_status st = order ? LC_OK : lc_fail(LC_ENOMEM, "out of memory packing documents");
  uint64_t split = 0, pad = 0;
  int nopen = 0;
  if (st == LC_OK) lc_pack_order(pk->seed, e, pk->n_docs, order);
  for (uint64_t d = 0; d < pk->n_docs && st == LC_OK; d++) {
    const uint64_t i = order[d], a = pk->doc_start(pk->src, i);
    const uint64_t b = i + 1 < pk->n_docs ? pk->doc_start(pk->src, i + 1) : pk->count;
    if (pk->drop_long && b - a > (uint64_t)pk->S) continue; // left out (counted at init)
    split += b - a > (uint64_t)pk->S;
    for (uint64_t s0 = a; s0 < b && st == LC_OK; s0 += (uint64_t)pk->S) {
      uint64_t n = b - s0 < (uint64_t)pk->S ? b - s0 : (uint64_t)pk->S;
      lc_piece x = {s0, (uint32_t)n, s0 + n == b};
      int k = 0;
      while (k < nopen && win[k].space < (int)n) k++;
      if (k == nopen) { // fits no open sequence: open one, closing the oldest if full
        if (nopen == WINDOW) {
          st = emit(pk, &win[0], &pad);
          open_seq o = win[0];
          memmove(win, win + 1, sizeof win[0] * (WINDOW - 1));
          win[WINDOW - 1] = o;
          k = WINDOW - 1;
        } else {
          win[nopen].space = pk->S;
          win[nopen].n = 0;
          k = nopen++;
        }
      }
      if (st == LC_OK) st = add_piece(&win[k], &x);
      if (st == LC_OK && win[k].space == 0) { // full: out now
        st = emit(pk, &win[k], &pad);
        open_seq o = win[k];
        memmove(win + k, win + k + 1, sizeof win[0] * (size_t)(nopen - k - 1));
        win[--nopen] = o;
      }
    }
  }
  for (int k = 0; k < nopen && st == LC_OK; k++) st = emit(pk, &win[k], &pad);
  for (int k = 0; k < WINDOW; k++) free(win[k].p);
  free(order);
  pk->epoch = st == LC_OK ? e : -1;
  if (st == LC_OK && e == 0) pk->seqs0 = pk->n_seqs, pk->split0 = split, pk->pad0 = pad;
  return st;
}

lc_status lc_packer_init(lc_packer *p, int S, uint64_t seed, const void *src, uint64_t n_docs, uint64_t count,
                         lc_doc_start_fn doc_start, int drop_long) {
  memset(p, 0, sizeof *p);
  if (S < 1 || n_docs < 1) return lc_fail(LC_EINVAL, "packing needs S >= 1 and at least one document");
  p->S = S, p->seed = seed, p->src = src, p->n_docs = n_docs, p->count = count, p->doc_start = doc_start;
  p->drop_long = drop_long;
  for (uint64_t i = 0; drop_long && i < n_docs; i++) {
    const uint64_t len = (i + 1 < n_docs ? doc_start(src, i + 1) : count) - doc_start(src, i);
    if (len > (uint64_t)S) p->dropped++, p->dropped_tokens += len;
  }
  if (p->dropped == n_docs)
    return lc_fail(LC_EINVAL, "--drop-long leaves no document: all %llu are longer than --seq %d; give a longer --seq",
                   (unsigned long long)n_docs, S);
  p->epoch = -1;
  lc_status st = plan(p, 0);
  p->first_seq = st == LC_OK ? malloc(sizeof *p->first_seq * 2) : NULL;
  if (st == LC_OK && !p->first_seq) st = lc_fail(LC_ENOMEM, "out of memory packing documents");
  if (st == LC_OK) p->first_seq[0] = 0, p->first_seq[1] = (uint64_t)p->seqs0, p->n_known = 1;
  if (st != LC_OK) lc_packer_free(p);
  return st;
}

void lc_packer_free(lc_packer *p) {
  free(p->pieces);
  free(p->first);
  free(p->first_seq);
  memset(p, 0, sizeof *p);
}

lc_status lc_packer_get(lc_packer *p, uint64_t index, const lc_piece **pieces, size_t *n) {
  // first_seq[e + 1] = first_seq[e] + epoch e's count: plan epochs in order until one holds index.
  while (index >= p->first_seq[p->n_known]) {
    LC_TRY(plan(p, p->n_known));
    uint64_t *q = realloc(p->first_seq, sizeof *q * (size_t)(p->n_known + 2));
    if (!q) return lc_fail(LC_ENOMEM, "out of memory packing documents");
    p->first_seq = q;
    p->first_seq[p->n_known + 1] = p->first_seq[p->n_known] + (uint64_t)p->n_seqs;
    p->n_known++;
  }
  long e = p->n_known - 1;
  while (index < p->first_seq[e]) e--; // binary search would do; epochs are few
  if (e != p->epoch) LC_TRY(plan(p, e));
  const long j = (long)(index - p->first_seq[e]);
  *pieces = p->pieces + p->first[j];
  *n = p->first[j + 1] - p->first[j];
  return LC_OK;
}
