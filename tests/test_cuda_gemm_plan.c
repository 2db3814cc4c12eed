// The host-side bookkeeping of the CUDA backend's cuBLASLt GEMMs (backend/gemm_plan.h), on
// the CPU (no GPU needed):
//  1. lc_gemm_align_bytes against an independent formula (the address's lowest set bit,
//     capped at 256; NULL 256) on random addresses, and on the views test_cuda makes
//     (37 fp32 or bf16 elements into a 256-byte aligned buffer: 4 and 2 bytes);
//  2. the plan table against a naive LRU list over a random stream of GEMMs drawn from more
//     distinct keys than there are slots: every hit, miss and eviction decision agrees, a
//     key differing in one field only (an alignment, a transpose, a type, the workspace) is
//     a different plan, the same key is always found again while it is resident.
#include <string.h>

#include "backend/gemm_plan.h"
#include "testutil.h"

static unsigned ref_align(uintptr_t a) {
  if (!a) return 256;
  const uintptr_t low = a & (~a + 1); // lowest set bit
  return low >= 256 ? 256 : (unsigned)low;
}

// A naive LRU of keys: index 0 the most recent.
typedef struct {
  lc_gemm_key k[LC_GEMM_PLAN_SLOTS];
  int n;
} lru;

// 1 hit, 0 miss; *evicted 1 when a miss pushed the oldest out.
static int lru_use(lru *l, const lc_gemm_key *key, int *evicted) {
  int at = -1;
  *evicted = 0;
  for (int i = 0; i < l->n; i++)
    if (!memcmp(&l->k[i], key, sizeof *key)) at = i;
  const int hit = at >= 0;
  if (!hit) {
    if (l->n == LC_GEMM_PLAN_SLOTS) *evicted = 1, l->n--; // the oldest falls off the end
    at = l->n++;
  }
  memmove(&l->k[1], &l->k[0], sizeof l->k[0] * (size_t)at);
  l->k[0] = *key;
  return hit;
}

static void random_key(lc_rng *r, int id, lc_gemm_key *k) {
  // id picks the shape and flags; the pointers' offsets pick the alignments
  static char base[4096] __attribute__((aligned(256)));
  const int m = 16 + 16 * (id % 7), n = 8 + 8 * (id / 7 % 5), kk = 32 + 32 * (id / 35 % 3);
  const size_t offs[4] = {0, 4, 64, 74};
  (void)r;
  lc_gemm_key_make(k, m, n, kk, kk, kk, m, id & 1, id >> 1 & 1, id >> 2 & 1, 0, base + offs[id % 4],
                   base + offs[(id / 4) % 4], base + offs[(id / 16) % 4]);
  k->ws_bytes = (uint64_t)32 << 20;
}

int main(void) {
  lc_rng r;
  lc_rng_seed(&r, 0x5eedULL);
  // 1. alignment
  int bad = 0;
  for (int i = 0; i < 100000; i++) {
    uintptr_t a = (uintptr_t)lc_rng_u64(&r);
    a &= ~(uintptr_t)0 << lc_rng_below(&r, 12); // many well-aligned addresses too
    if (lc_gemm_align_bytes((const void *)a) != ref_align(a)) bad++;
  }
  CHECK(bad == 0, "lc_gemm_align_bytes differs from the lowest set bit capped at 256 on %d of 100000 addresses", bad);
  CHECK(lc_gemm_align_bytes(NULL) == 256, "NULL: %u, want 256", lc_gemm_align_bytes(NULL));
  CHECK(lc_gemm_align_bytes((const void *)(uintptr_t)(4096 + 37 * 4)) == 4, "37 fp32 into a page: %u, want 4",
        lc_gemm_align_bytes((const void *)(uintptr_t)(4096 + 37 * 4)));
  CHECK(lc_gemm_align_bytes((const void *)(uintptr_t)(4096 + 37 * 2)) == 2, "37 bf16 into a page: %u, want 2",
        lc_gemm_align_bytes((const void *)(uintptr_t)(4096 + 37 * 2)));
  CHECK(lc_gemm_align_bytes((const void *)(uintptr_t)(8192 + 64)) == 64, "a 64-byte carve: %u, want 64",
        lc_gemm_align_bytes((const void *)(uintptr_t)(8192 + 64)));

  // 2. the table against a naive LRU
  lc_gemm_plans t;
  memset(&t, 0, sizeof t);
  lru ref = {.n = 0};
  int disagree = 0, evictions = 0, hits = 0;
  for (int step = 0; step < 20000; step++) {
    // a working set that drifts: mostly 24 hot keys, sometimes one of 300
    const int id = lc_rng_below(&r, 10) < 8 ? (int)lc_rng_below(&r, 24) + (step / 5000) * 8 : (int)lc_rng_below(&r, 300);
    lc_gemm_key k;
    random_key(&r, id, &k);
    int hit, evict, ref_evict;
    const int slot = lc_gemm_plan_slot(&t, &k, &hit, &evict);
    const int ref_hit = lru_use(&ref, &k, &ref_evict);
    if (hit != ref_hit || evict != ref_evict || slot < 0 || slot >= LC_GEMM_PLAN_SLOTS ||
        memcmp(&t.key[slot], &k, sizeof k))
      disagree++;
    evictions += evict, hits += hit;
  }
  CHECK(disagree == 0, "the plan table disagrees with a naive LRU on %d of 20000 uses", disagree);
  CHECK(evictions > 100 && hits > 1000, "the stream should both hit (%d) and evict (%d)", hits, evictions);
  CHECK(t.hits == (uint64_t)hits && t.misses == (uint64_t)(20000 - hits), "counters %llu hits %llu misses, want %d %d",
        (unsigned long long)t.hits, (unsigned long long)t.misses, hits, 20000 - hits);

  // one field apart: a different plan; the same key: found again
  lc_gemm_plans u;
  memset(&u, 0, sizeof u);
  static char buf[1024] __attribute__((aligned(256)));
  lc_gemm_key k0, k1;
  int hit, evict;
  lc_gemm_key_make(&k0, 64, 32, 128, 128, 128, 64, 1, 0, 1, 0, buf, buf + 256, buf + 512);
  const int s0 = lc_gemm_plan_slot(&u, &k0, &hit, &evict);
  CHECK(!hit && !evict, "a first key is a miss without eviction");
  struct {
    const char *what;
    int m, ta, bf16, c16;
    size_t off_a;
    uint64_t ws;
  } vary[] = {{"m", 65, 1, 1, 0, 0, 0}, {"a transpose", 64, 0, 1, 0, 0, 0}, {"the operand type", 64, 1, 0, 0, 0, 0},
              {"the output type", 64, 1, 1, 1, 0, 0}, {"A's alignment", 64, 1, 1, 0, 2, 0},
              {"the workspace", 64, 1, 1, 0, 0, 1}};
  for (size_t i = 0; i < sizeof vary / sizeof vary[0]; i++) {
    lc_gemm_key_make(&k1, vary[i].m, 32, 128, 128, 128, 64, vary[i].ta, 0, vary[i].bf16, vary[i].c16,
                     buf + vary[i].off_a, buf + 256, buf + 512);
    k1.ws_bytes = vary[i].ws;
    const int s1 = lc_gemm_plan_slot(&u, &k1, &hit, &evict);
    CHECK(!hit && s1 != s0, "a key differing only in %s must be its own plan (hit %d, slot %d vs %d)", vary[i].what, hit,
          s1, s0);
  }
  lc_gemm_key_make(&k1, 64, 32, 128, 128, 128, 64, 1, 0, 1, 0, buf, buf + 256, buf + 512);
  CHECK(lc_gemm_plan_slot(&u, &k1, &hit, &evict) == s0 && hit, "the same GEMM must find its plan again");
  lc_gemm_plan_drop(&u, s0);
  CHECK(lc_gemm_plan_slot(&u, &k1, &hit, &evict) >= 0 && !hit, "a dropped plan is built again");
  return lc_test_finish("test_cuda_gemm_plan");
}
