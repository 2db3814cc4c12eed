// One-rank communicator: collectives are copies, point-to-point is to oneself only
// through a matching receive posted before the send completes (not needed by longctx,
// so it is an error).
#include <stdlib.h>
#include <string.h>

#include "dist/comm.h"

size_t lc_dtype_size(lc_dtype t) {
  switch (t) {
    case LC_DT_F32: case LC_DT_I32: return 4;
    case LC_DT_F64: case LC_DT_I64: return 8;
  }
  return 1;
}

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
static int s_test(lc_comm *c, lc_req *r) { return 1; }
static lc_status s_wait(lc_comm *c, lc_req *r) { return LC_OK; }
static lc_status s_barrier(lc_comm *c) { return LC_OK; }
static lc_status s_split(lc_comm *c, int color, int key, lc_comm **out) { return lc_comm_self(out); }
static void s_destroy(lc_comm *c) { free(c); }

static const lc_comm_ops self_ops = {s_allreduce, s_copy, s_copy,  s_p2p,   s_p2p_recv,
                                     s_test,      s_wait, s_barrier, s_split, s_destroy};

lc_status lc_comm_self(lc_comm **out) {
  lc_comm *c = calloc(1, sizeof *c);
  if (!c) return lc_fail(LC_ENOMEM, "out of memory creating a communicator");
  c->ops = &self_ops;
  c->rank = 0;
  c->size = 1;
  *out = c;
  return LC_OK;
}
