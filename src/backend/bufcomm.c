// Collectives on backend buffers (bufcomm.h).
#include "backend/bufcomm.h"

#include <string.h>

// Host memory for a staged collective of b (NULL: LC_ENOMEM said why).
static void *stage(lc_buf b) { return lc_alloc(b.be->host, LC_MEM_COMM, lc_buf_bytes(b), "host staging of a collective"); }

lc_status lc_buf_allgather_inplace(lc_comm *c, lc_buf all, size_t n) {
  if (all.n != n * (size_t)c->size) return lc_fail(LC_EINVAL, "lc_buf_allgather_inplace: %zu elements for %d blocks of %zu", all.n, c->size, n);
  void *h = lc_buf_host(all), *staged = NULL;
  const size_t es = lc_dtype_size(all.dt);
  lc_status st = LC_OK;
  if (!h && !(h = staged = stage(all))) return LC_ENOMEM;
  if (staged) st = lc_buf_read(lc_buf_view(all, (size_t)c->rank * n, n), (char *)staged + es * n * (size_t)c->rank, LC_SYNC_STAGE);
  lc_req r = {{0}, 0};
  if (st == LC_OK) st = lc_iallgather(c, NULL, h, n, all.dt, &r);
  if (st == LC_OK) st = lc_wait(c, &r);
  if (st == LC_OK && staged) st = lc_buf_write(all, staged, LC_SYNC_STAGE);
  lc_free(all.be->host, staged);
  return st;
}

lc_status lc_buf_allreduce_sum(lc_comm *c, lc_buf b) {
  void *h = lc_buf_host(b), *staged = NULL;
  lc_status st = LC_OK;
  if (c->size == 1) return LC_OK;
  if (!h && !(h = staged = stage(b))) return LC_ENOMEM;
  if (staged) st = lc_buf_read(b, staged, LC_SYNC_STAGE);
  if (st == LC_OK) st = lc_allreduce_sum(c, h, b.n, b.dt);
  if (st == LC_OK && staged) st = lc_buf_write(b, staged, LC_SYNC_STAGE);
  lc_free(b.be->host, staged);
  return st;
}

// ---- non-blocking transfers
// The host side of b for a transfer (its own address, or a staging copy; read_in: the
// device's values copied in). *host NULL for an empty b.
static lc_status host_side(lc_buf b, int read_in, void **h, void **staged) {
  *staged = NULL;
  *h = lc_buf_host(b);
  if (*h || !lc_buf_ok(b) || !lc_buf_bytes(b)) return LC_OK;
  if (!(*h = *staged = stage(b))) return LC_ENOMEM;
  return read_in ? lc_buf_read(b, *h, LC_SYNC_STAGE) : LC_OK;
}

static void req_free(lc_buf_req *r) {
  if (r->shost) lc_free(r->sdev.be->host, r->shost);
  if (r->rhost) lc_free(r->rdev.be->host, r->rhost);
  memset(r, 0, sizeof *r);
}

static lc_status post(lc_comm *c, lc_buf s, lc_buf rv, int peer, int tag, size_t n, int a2a, lc_buf_req *r) {
  memset(r, 0, sizeof *r);
  r->sdev = s, r->rdev = rv;
  void *sh = NULL, *rh = NULL;
  lc_status st = host_side(s, 1, &sh, &r->shost);
  if (st == LC_OK) st = host_side(rv, 0, &rh, &r->rhost);
  if (st == LC_OK) {
    if (a2a) st = lc_ialltoall(c, sh, rh, n, s.dt, &r->req);
    else if (lc_buf_ok(s)) st = lc_isend(c, sh, s.n, s.dt, peer, tag, &r->req);
    else st = lc_irecv(c, rh, rv.n, rv.dt, peer, tag, &r->req);
  }
  if (st != LC_OK) req_free(r);
  return st;
}

lc_status lc_buf_isend(lc_comm *c, lc_buf b, int peer, int tag, lc_buf_req *r) {
  return post(c, b, (lc_buf){0}, peer, tag, 0, 0, r);
}
lc_status lc_buf_irecv(lc_comm *c, lc_buf b, int peer, int tag, lc_buf_req *r) {
  return post(c, (lc_buf){0}, b, peer, tag, 0, 0, r);
}
lc_status lc_buf_ialltoall(lc_comm *c, lc_buf send, lc_buf recv, size_t n, lc_buf_req *r) {
  if (send.dt != recv.dt || send.n < n * (size_t)c->size || recv.n < n * (size_t)c->size)
    return lc_fail(LC_EINVAL, "lc_buf_ialltoall: %zu and %zu elements for %d blocks of %zu", send.n, recv.n, c->size, n);
  return post(c, send, recv, 0, 0, n, 1, r);
}
// Blocking: the communicator's own all-to-all (MPI's blocking collectives are tuned; its
// non-blocking ones run a generic schedule).
lc_status lc_buf_alltoall(lc_comm *c, lc_buf send, lc_buf recv, size_t n) {
  if (send.dt != recv.dt || send.n < n * (size_t)c->size || recv.n < n * (size_t)c->size)
    return lc_fail(LC_EINVAL, "lc_buf_alltoall: %zu and %zu elements for %d blocks of %zu", send.n, recv.n, c->size, n);
  void *sh = NULL, *rh = NULL, *ss = NULL, *rs = NULL;
  lc_status st = host_side(send, 1, &sh, &ss);
  if (st == LC_OK) st = host_side(recv, 0, &rh, &rs);
  if (st == LC_OK) st = lc_alltoall(c, sh, rh, n, send.dt);
  if (st == LC_OK && rs) st = lc_buf_write(recv, rs, LC_SYNC_STAGE);
  if (ss) lc_free(send.be->host, ss);
  if (rs) lc_free(recv.be->host, rs);
  return st;
}

void lc_buf_test(lc_comm *c, lc_buf_req *r) { lc_test(c, &r->req); }

lc_status lc_buf_wait(lc_comm *c, lc_buf_req *r) {
  lc_status st = lc_wait(c, &r->req);
  if (st == LC_OK && r->rhost) st = lc_buf_write(r->rdev, r->rhost, LC_SYNC_STAGE);
  req_free(r);
  return st;
}
