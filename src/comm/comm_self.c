// One-rank communicator: collectives are copies, point-to-point is to oneself only
// through a matching receive posted before the send completes (not needed by longctx,
// so it is an error).
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"

static lc_status s_allreduce(lc_comm *c, void *b, size_t n, lc_dtype t) { return LC_OK; }
static lc_status s_copy(lc_comm *c, const void *s, void *r, size_t n, lc_dtype t) {
  if (s != r) memmove(r, s, n * lc_dtype_size(t));
  return LC_OK;
}
static lc_status s_p2p(lc_comm *c, const void *b, size_t n, lc_dtype t, int peer, int tag, lc_req *r) {
  return lc_fail(LC_ECOMM, "point-to-point transfer on a one-rank communicator");
}
static lc_status s_p2p_recv(lc_comm *c, void *b, size_t n, lc_dtype t, int peer, int tag, lc_req *r) {
  return lc_fail(LC_ECOMM, "point-to-point transfer on a one-rank communicator");
}
static lc_status s_iallreduce(lc_comm *c, void *b, size_t n, lc_dtype t, lc_req *r) {
  r->active = 0;
  return LC_OK;
}
// One rank: gather and reduce-scatter are copies of the one block (nothing when in place).
static lc_status s_iblock(lc_comm *c, const void *s, void *d, size_t n, lc_dtype t, lc_req *r) {
  r->active = 0;
  if (s && s != d) memmove(d, s, n * lc_dtype_size(t));
  return LC_OK;
}
static lc_status s_iallgatherv(lc_comm *c, void *b, const int *counts, const int *displs, lc_dtype t, lc_req *r) {
  r->active = 0;
  return LC_OK; // in place: the one block is there
}
static lc_status s_ireduce_scatterv(lc_comm *c, const void *s, void *d, const int *counts, lc_dtype t, lc_req *r) {
  r->active = 0;
  memmove(d, s, (size_t)counts[0] * lc_dtype_size(t));
  return LC_OK;
}
// One rank: the all-to-all's one block is a copy.
static lc_status s_ialltoall(lc_comm *c, const void *s, void *d, size_t n, lc_dtype t, lc_req *r) {
  r->active = 0;
  return s_copy(c, s, d, n, t);
}
static int s_test(lc_comm *c, lc_req *r) { return 1; }
static lc_status s_bcast(lc_comm *c, void *b, size_t n, lc_dtype t, int root) { return LC_OK; }
static lc_status s_wait(lc_comm *c, lc_req *r) { return LC_OK; }
static lc_status s_barrier(lc_comm *c) { return LC_OK; }
static lc_status s_split(lc_comm *c, int color, int key, lc_comm **out) { return lc_comm_self(out); }
static void s_destroy(lc_comm *c) { free(c); }

static const lc_comm_ops self_ops = {
    .allreduce_sum = s_allreduce, .allgather = s_copy, .alltoall = s_copy, .isend = s_p2p,
    .irecv = s_p2p_recv, .test = s_test, .wait = s_wait, .barrier = s_barrier, .split = s_split,
    .destroy = s_destroy, .bcast = s_bcast, .iallreduce_sum = s_iallreduce, .iallgather = s_iblock,
    .ireduce_scatter_sum = s_iblock, .iallgatherv = s_iallgatherv, .ireduce_scatterv_sum = s_ireduce_scatterv,
    .ialltoall = s_ialltoall};

lc_status lc_comm_self(lc_comm **out) {
  lc_comm *c = calloc(1, sizeof *c);
  if (!c) return lc_fail(LC_ENOMEM, "out of memory creating a communicator");
  c->ops = &self_ops;
  c->rank = 0;
  c->size = 1;
  *out = c;
  return LC_OK;
}

