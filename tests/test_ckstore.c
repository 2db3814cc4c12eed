// The checkpoint store (model/ckstore.h) and checkpoint offload:
//  1. the store alone: 9 layers of random bytes put in order (two open at once, as a layer
//     fills the next one's input) and got back in reverse with read-ahead, with 2, 3 and 4
//     slots, through a slow disk (hooks delaying each write and read) and a fast one: every
//     byte back as put, exactly `slots` layers in the arena, the scratch directory gone
//     after close; in RAM (no directory) the same; fewer than 2 slots refused;
//  2. refusals: a missing directory, too little room (hook), a write error (hook) reported
//     by the next call with the directory named, and nothing left behind;
//  3. a whole training pass offloaded equals the in-RAM pass bit for bit (loss and every
//     gradient) under each checkpoint policy, fp32 and bf16, with and without a slow disk,
//     at --offload-depth auto, 2 and 3; its arena peaks equal the memory model's prediction
//     in every category, the checkpoints' being depth / 6 of the in-RAM pass's.
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/attn.h"
#include "backend/cpu/cpu_backend.h"
#include "model/ckstore.h"
#include "model/memplan.h"
#include "model/model.h"
#include "testmodel.h"
#include "testutil.h"

static char root[256];

// Entries of dir other than . and ..
static int entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static unsigned char pattern(int l, size_t i) { return (unsigned char)(l * 131 + i * 7 + (i >> 9)); }

static void fill(lc_buf bb, int l, size_t bytes) {
  unsigned char *b = lc_buf_host(bb);
  for (size_t i = 0; i < bytes; i++) b[i] = pattern(l, i);
}

static void store_round_trip(const char *dir, int slots, const char *what) {
  const int L = 9;
  const size_t bytes = 64 * 1000; // several pages, not a power of two
  lc_arena ar;
  lc_arena_init(&ar, 0);
  lc_backend be; // host memory: the test reads the blocks through their addresses
  lc_backend_cpu_init(&be, &ar);
  lc_ckstore *s;
  CHECK(lc_ckstore_open(&s, L, bytes, dir, slots, &be) == LC_OK, "%s open: %s", what, lc_errmsg());
  if (!s) return;
  // As the pass does: layer l+1's buffer taken and filled while l is still open.
  lc_buf bb;
  CHECK(lc_ckstore_put_begin(s, 0, &bb) == LC_OK, "%s put 0: %s", what, lc_errmsg());
  fill(bb, 0, bytes);
  for (int l = 0; l < L; l++) {
    if (l + 1 < L) {
      CHECK(lc_ckstore_put_begin(s, l + 1, &bb) == LC_OK, "%s put %d: %s", what, l + 1, lc_errmsg());
      fill(bb, l + 1, bytes);
    }
    CHECK(lc_ckstore_put_end(s, l) == LC_OK, "%s put_end %d", what, l);
  }
  long bad = 0;
  for (int l = L - 1; l >= 0; l--) {
    CHECK(lc_ckstore_get(s, l, l - 1, &bb) == LC_OK, "%s get %d: %s", what, l, lc_errmsg());
    const unsigned char *b = lc_buf_host(bb);
    for (size_t i = 0; i < bytes; i++) bad += b[i] != pattern(l, i);
    lc_ckstore_release(s, l);
  }
  CHECK(bad == 0, "%s: %ld bytes came back changed", what, bad);
  double w, r;
  lc_ckstore_traffic(s, &w, &r);
  const size_t want = lc_ckstore_bytes(L, bytes, dir ? slots : 0);
  CHECK(ar.peak[LC_MEM_CKPT] == want && want == (size_t)(dir ? slots : L) * bytes, "%s: checkpoint peak %zu, want %zu",
        what, ar.peak[LC_MEM_CKPT], want);
  // Offloaded: the first layers must have gone to disk and come back (at most `slots` fit).
  CHECK(!dir || (w >= (L - slots) * (double)bytes && r >= (L - slots) * (double)bytes), "%s: wrote %.0f, read %.0f", what,
        w, r);
  CHECK(lc_ckstore_close(s) == LC_OK, "%s close: %s", what, lc_errmsg());
  CHECK(!dir || entries(dir) == 0, "%s: %d entries left in %s", what, entries(dir), dir);
  CHECK(ar.cur_total == 0, "%s: arena not empty", what);
  printf("store %-22s %d slots: 9 layers of %zu bytes back intact; wrote %.0f, read %.0f bytes\n", what, dir ? slots : L,
         bytes, w, r);
}

static void test_store(void) {
  store_round_trip(NULL, 0, "in RAM");
  for (int slots = 2; slots <= 4; slots++) {
    store_round_trip(root, slots, "offloaded");
    setenv("LONGCTX_TEST_OFFLOAD_WRITE_DELAY_MS", "3", 1); // the writer falls behind: put waits for slots
    store_round_trip(root, slots, "slow writes");
    unsetenv("LONGCTX_TEST_OFFLOAD_WRITE_DELAY_MS");
    setenv("LONGCTX_TEST_OFFLOAD_READ_DELAY_MS", "3", 1); // backward waits for its reads
    store_round_trip(root, slots, "slow reads");
    unsetenv("LONGCTX_TEST_OFFLOAD_READ_DELAY_MS");
  }
}

static void test_refusals(void) {
  lc_arena ar;
  lc_arena_init(&ar, 0);
  lc_backend be; // host memory: the test reads the blocks through their addresses
  lc_backend_cpu_init(&be, &ar);
  lc_ckstore *s;
  char missing[300];
  snprintf(missing, sizeof missing, "%s/nope", root);
  CHECK(lc_ckstore_open(&s, 8, 4096, root, 1, &be) == LC_EINVAL && strstr(lc_errmsg(), "--offload-depth 1") &&
            strstr(lc_errmsg(), "at least 2") && entries(root) == 0,
        "one slot: %s", lc_errmsg());
  CHECK(lc_ckstore_open(&s, 8, 4096, missing, 4, &be) == LC_EIO && strstr(lc_errmsg(), "is not a directory") &&
            strstr(lc_errmsg(), missing),
        "missing directory: %s", lc_errmsg());
  setenv("LONGCTX_TEST_OFFLOAD_ROOM", "10000", 1);
  CHECK(lc_ckstore_open(&s, 8, 4096, root, 4, &be) == LC_EIO && strstr(lc_errmsg(), "free but a pass writes up to") &&
            entries(root) == 0,
        "no room: %s", lc_errmsg());
  unsetenv("LONGCTX_TEST_OFFLOAD_ROOM");
  // The 2nd write fails (a full disk): the next call reports it, naming the directory.
  setenv("LONGCTX_TEST_OFFLOAD_FAIL_WRITE", "2", 1);
  CHECK(lc_ckstore_open(&s, 8, 4096, root, 4, &be) == LC_OK, "open: %s", lc_errmsg());
  lc_status st = LC_OK;
  for (int l = 0; l < 8 && st == LC_OK; l++) {
    lc_buf b;
    st = lc_ckstore_put_begin(s, l, &b);
    if (st == LC_OK) memset(lc_buf_host(b), l, 4096), st = lc_ckstore_put_end(s, l);
  }
  for (int l = 7; l >= 0 && st == LC_OK; l--) {
    lc_buf b;
    st = lc_ckstore_get(s, l, l - 1, &b);
    if (st == LC_OK) lc_ckstore_release(s, l);
  }
  CHECK(st == LC_EIO && strstr(lc_errmsg(), "writing layer 1") && strstr(lc_errmsg(), root) &&
            strstr(lc_errmsg(), "No space left"),
        "write error: %s", lc_errmsg());
  CHECK(lc_ckstore_close(s) == LC_EIO, "close reports the error");
  CHECK(entries(root) == 0, "a failed store left %d entries", entries(root));
  unsetenv("LONGCTX_TEST_OFFLOAD_FAIL_WRITE");
  CHECK(ar.cur_total == 0, "arena not empty after refusals");
}

// One pass of a 6-layer model: loss, gradients (copied out) and arena peaks.
static double pass(lc_model *m, const lc_model_opts *o, const int *tok, const int *tgt, const int *pos, int T, float *g,
                   lc_arena *ar, size_t *peak, size_t *total) {
  lc_attn attn;
  lc_attn_local_init(&attn, m->cfg.n_heads, m->cfg.n_kv_heads, m->cfg.head_dim);
  lc_model_zero_grads(m);
  lc_arena_reset_peaks(ar);
  double loss = 0;
  CHECK(lc_model_fwd_bwd(m, o, &attn, NULL, tok, tgt, pos, T, 1.0f / T, 1, &loss) == LC_OK, "pass: %s", lc_errmsg());
  memcpy(g, m->grads, sizeof(float) * m->n_flat);
  memcpy(peak, ar->peak, sizeof ar->peak);
  *total = ar->peak_total;
  return loss;
}

static void test_model_offload(void) {
  lc_config cfg;
  lc_config_preset(&cfg, "tiny");
  cfg.n_layers = 6; // more than the slots: the first layers go to disk
  lc_arena ar;
  lc_arena_init(&ar, 0);
  lc_model m;
  CHECK(lc_model_create(&m, &cfg, &ar) == LC_OK, "create: %s", lc_errmsg());
  lc_t_randomize(&m, 17);
  const int T = 96;
  int tok[96], tgt[96], pos[96];
  lc_rng r;
  lc_rng_seed(&r, 3);
  lc_t_make_batch(&r, tok, tgt, pos, T, cfg.vocab);
  float *g0 = malloc(sizeof(float) * m.n_flat), *g1 = malloc(sizeof(float) * m.n_flat);
  const lc_ckpt_policy pols[] = {LC_CKPT_NONE, LC_CKPT_FULL, LC_CKPT_SELECTIVE};
  for (int b = 0; b < 2; b++)
    for (int p = 0; p < 3; p++)
      for (int slow = 0; slow < 2; slow++)
      for (int depth = 0; depth <= 3; depth += 1 + (depth == 0)) { // auto (full: 2, else 3), 2, 3
        lc_model_opts o = {pols[p], p == 1 ? 40 : 0, 32, 0, 0, 0, b ? LC_DT_BF16 : LC_DT_F32, NULL, 0, 0, depth};
        size_t pk0[LC_MEM_NCAT], pk1[LC_MEM_NCAT], t0, t1;
        const double l0 = pass(&m, &o, tok, tgt, pos, T, g0, &ar, pk0, &t0);
        o.offload_dir = root;
        const int resident = depth ? depth : pols[p] == LC_CKPT_FULL ? 2 : 3;
        if (slow) setenv("LONGCTX_TEST_OFFLOAD_READ_DELAY_MS", "2", 1), setenv("LONGCTX_TEST_OFFLOAD_WRITE_DELAY_MS", "2", 1);
        const double l1 = pass(&m, &o, tok, tgt, pos, T, g1, &ar, pk1, &t1);
        unsetenv("LONGCTX_TEST_OFFLOAD_READ_DELAY_MS");
        unsetenv("LONGCTX_TEST_OFFLOAD_WRITE_DELAY_MS");
        char tag[80];
        snprintf(tag, sizeof tag, "%s %s%s depth %s%d", lc_ckpt_name(pols[p]), b ? "bf16" : "fp32", slow ? " slow disk" : "", depth ? "" : "auto ",
                 resident);
        CHECK(lc_offload_depth(&o) == resident, "%s: depth %d", tag, lc_offload_depth(&o));
        CHECK(l0 == l1 && !memcmp(g0, g1, sizeof(float) * m.n_flat), "%s: offloaded pass differs (loss %.9g vs %.9g)", tag,
              l1, l0);
        // Only the checkpoints differ: `resident` of 6 layers.
        CHECK(pk1[LC_MEM_CKPT] * 6 == pk0[LC_MEM_CKPT] * (size_t)resident && t0 - t1 == pk0[LC_MEM_CKPT] - pk1[LC_MEM_CKPT],
              "%s: ckpt %zu vs %zu", tag, pk1[LC_MEM_CKPT], pk0[LC_MEM_CKPT]);
        lc_mem_estimate e;
        CHECK(lc_memplan_predict(&cfg, &o, T, 1, 1, 1, 0, &e) == LC_OK, "predict: %s", lc_errmsg());
        // (params and grads are the model's; the prediction's persistent part also has AdamW)
        for (int k = LC_MEM_GATHERED; k < LC_MEM_NCAT; k++)
          CHECK(pk1[k] == e.peak[k], "%s: %s peak %zu, predicted %zu", tag, lc_mem_cat_name((lc_mem_cat)k), pk1[k], e.peak[k]);
        CHECK(entries(root) == 0, "%s: scratch left behind", tag);
        if (!slow) printf("offload %-18s loss sum %.6f bit-identical to RAM; checkpoints %zu -> %zu bytes\n", tag, l1, pk0[LC_MEM_CKPT], pk1[LC_MEM_CKPT]);
      }
  free(g0), free(g1);
  lc_model_destroy(&m);
}

int main(void) {
  snprintf(root, sizeof root, "/tmp/lc_test_ckstore_%ld", (long)getpid());
  CHECK(mkdir(root, 0700) == 0, "mkdir %s", root);
  test_store();
  test_refusals();
  test_model_offload();
  rmdir(root);
  return lc_test_finish("test_ckstore");
}
