// The optimizer step on two backends: the same parameter store (config, stage, group) on
// the CPU backend and on the private one (backend/private: buffers no host code can reach),
// the same random initialisation and gradients, a few updates with clipping on; every
// state (parameters, both moments) and every norm must be bit-identical, since both run
// the kernel table's entries on the same values in the same order. Used by test_backend
// (one process) and mpi_dist (stages 1-3 over 2, 4 and 8 ranks: the stage 1/2 parameter
// gather then stages through host memory).
#ifndef LC_TEST_BACKEND_UPDATE_H
#define LC_TEST_BACKEND_UPDATE_H

#include <string.h>

#include "backend/backend.h"
#include "model/pstore.h"
#include "testutil.h"

// Every state of tensor-wise gathered to world rank 0 (NULL elsewhere), as one flat array
// in table order.
static float *lc_t_gather_states(lc_pstore *ps, int root) {
  size_t n = 0;
  for (int t = 0; t < ps->lay.n_tensors; t++) n += 3 * ps->lay.table[t].numel;
  float *all = root ? malloc(sizeof(float) * n) : NULL, *at = all;
  for (int s = 0; s < 3; s++)
    for (int t = 0; t < ps->lay.n_tensors; t++) {
      CHECK(lc_pstore_gather_tensor(ps, (lc_ps_state)s, t, at) == LC_OK, "gather: %s", lc_errmsg());
      if (at) at += ps->lay.table[t].numel;
    }
  return all;
}

// Random gradients in this rank's segments (the same values for the same full index on
// every backend and layout: drawn from the full index), written through the backend.
static void lc_t_fill_grads(lc_pstore *ps, uint64_t seed) {
  for (int i = 0; i < ps->n_seg; i++) {
    const lc_ps_segment *s = &ps->seg[i];
    float *g = malloc(sizeof(float) * s->n);
    for (size_t j = 0; j < s->n; j++) {
      lc_rng r;
      lc_rng_seed(&r, seed * 1000003u + s->full + j);
      g[j] = lc_rng_normal(&r) * 0.3f;
    }
    CHECK(lc_buf_write(lc_buf_view(ps->grads_b, s->g, s->n), g, LC_SYNC_TEST) == LC_OK, "grads in");
    free(g);
  }
}

// Returns the number of elements compared on rank 0 (0 elsewhere).
static size_t lc_t_backend_update(const lc_config *c, int stage, int Z, lc_comm *world, const char *tag) {
  const int root = !world || world->rank == 0;
  float *st[2] = {NULL, NULL};
  double norms[2][3];
  size_t n = 0;
  for (int b = 0; b < 2; b++) {
    lc_arena ar;
    lc_arena_init(&ar, 0);
    lc_backend *be = NULL;
    CHECK(lc_backend_open(b ? "private" : "cpu", &ar, &be) == LC_OK, "open: %s", lc_errmsg());
    lc_pstore ps;
    CHECK(lc_pstore_create_on(&ps, c, stage, Z, world, be) == LC_OK, "%s store: %s", tag, lc_errmsg());
    CHECK(lc_pstore_add_optimizer(&ps) == LC_OK, "moments");
    CHECK(b == 0 ? ps.params != NULL : ps.params == NULL && ps.m == NULL, "%s: host addresses only on cpu", tag);
    CHECK(lc_pstore_init_random(&ps, 11) == LC_OK, "init");
    lc_adamw_hp hp = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
    long step = 0;
    for (int k = 0; k < 3; k++) {
      lc_pstore_step_begin(&ps, 1);
      lc_t_fill_grads(&ps, 5 + (uint64_t)k);
      int applied = 0;
      // clip 2: the random gradient's norm is far above it, so the scale runs every step
      CHECK(lc_pstore_update(&ps, &hp, 2.0f, 1, &step, &norms[b][k], &applied) == LC_OK && applied,
            "%s update: %s", tag, lc_errmsg());
    }
    // The backend's device bytes are the store's states, by category, to the byte.
    lc_ps_sizes zs;
    CHECK(lc_pstore_sizes(c, stage, Z, &zs) == LC_OK, "sizes");
    CHECK(be->arena->cur[LC_MEM_PARAMS] == zs.params && be->arena->cur[LC_MEM_GRADS] == zs.grads &&
              be->arena->cur[LC_MEM_OPTIM] == zs.optim,
          "%s %s: device bytes %zu/%zu/%zu, memory model %zu/%zu/%zu", tag, be->name, be->arena->cur[LC_MEM_PARAMS],
          be->arena->cur[LC_MEM_GRADS], be->arena->cur[LC_MEM_OPTIM], zs.params, zs.grads, zs.optim);
    // 3 updates: each one read of the norm's accumulator (zeroed on the device), nothing else
    CHECK(be->sync[LC_SYNC_GRAD_NORM][0] == 3 && be->sync[LC_SYNC_GRAD_NORM][1] == 0, "%s: norm syncs %zu/%zu", tag,
          be->sync[LC_SYNC_GRAD_NORM][0], be->sync[LC_SYNC_GRAD_NORM][1]);
    CHECK(b == 0 || (stage != 1 && stage != 2) || lc_backend_syncs(be, LC_SYNC_STAGE) > 0,
          "%s: the private backend's stage 1/2 gather stages through host memory", tag);
    st[b] = lc_t_gather_states(&ps, root);
    if (root && b == 0)
      for (int t = 0; t < ps.lay.n_tensors; t++) n += 3 * ps.lay.table[t].numel;
    lc_pstore_destroy(&ps);
    CHECK(be->arena->cur_total == 0 && ar.cur_total == 0, "%s: freed (device %zu, host %zu)", tag, be->arena->cur_total,
          ar.cur_total);
    lc_backend_close(be);
    lc_arena_trim(&ar);
  }
  for (int k = 0; k < 3; k++)
    CHECK(memcmp(&norms[0][k], &norms[1][k], sizeof(double)) == 0, "%s step %d: norm %.17g vs %.17g", tag, k,
          norms[0][k], norms[1][k]);
  if (root) {
    size_t diff = 0;
    for (size_t i = 0; i < n; i++) diff += memcmp(&st[0][i], &st[1][i], sizeof(float)) != 0;
    CHECK(diff == 0, "%s: %zu of %zu state values differ between the cpu and private backends", tag, diff, n);
  }
  free(st[0]);
  free(st[1]);
  return n;
}

#endif
