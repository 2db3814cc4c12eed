#include "backend/gemm_plan.h"

#include <string.h>

unsigned lc_gemm_align_bytes(const void *p) {
  const uintptr_t a = (uintptr_t)p;
  unsigned al = 256;
  while (al > 1 && a % al) al >>= 1;
  return al;
}

void lc_gemm_key_make(lc_gemm_key *k, int m, int n, int k_, int64_t lda, int64_t ldb, int64_t ldc, int ta, int tb,
                      int bf16, int c16, const void *a, const void *b, const void *c) {
  memset(k, 0, sizeof *k);
  k->m = m, k->n = n, k->k = k_;
  k->lda = lda, k->ldb = ldb, k->ldc = ldc;
  k->ta = (unsigned char)!!ta, k->tb = (unsigned char)!!tb, k->bf16 = (unsigned char)!!bf16, k->c16 = (unsigned char)!!c16;
  k->align_a = (unsigned short)lc_gemm_align_bytes(a);
  k->align_b = (unsigned short)lc_gemm_align_bytes(b);
  k->align_c = (unsigned short)lc_gemm_align_bytes(c);
}

int lc_gemm_plan_slot(lc_gemm_plans *t, const lc_gemm_key *key, int *hit, int *evict) {
  int empty = -1, oldest = 0;
  *hit = *evict = 0;
  t->clock++;
  for (int i = 0; i < LC_GEMM_PLAN_SLOTS; i++) {
    if (!t->last_use[i]) {
      if (empty < 0) empty = i;
      continue;
    }
    if (!memcmp(&t->key[i], key, sizeof *key)) {
      t->last_use[i] = t->clock;
      t->hits++;
      *hit = 1;
      return i;
    }
    if (t->last_use[i] < t->last_use[oldest] || !t->last_use[oldest]) oldest = i;
  }
  const int s = empty >= 0 ? empty : oldest;
  *evict = empty < 0;
  t->key[s] = *key;
  t->last_use[s] = t->clock;
  t->misses++;
  return s;
}

void lc_gemm_plan_drop(lc_gemm_plans *t, int i) {
  if (i < 0 || i >= LC_GEMM_PLAN_SLOTS) return;
  t->last_use[i] = 0;
  memset(&t->key[i], 0, sizeof t->key[i]);
}
