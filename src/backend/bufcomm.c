// Communication on backend buffers (bufcomm.h).
#include "backend/bufcomm.h"

#include <string.h>

// ---- host views
lc_status lc_buf_hview_open(lc_buf b, int read_in, const char *what, lc_buf_hview *h) {
  h->dev = b;
  h->staged = 0;
  h->host = lc_buf_host(b);
  if (h->host || !lc_buf_ok(b) || !lc_buf_bytes(b)) return LC_OK;
  if (!(h->host = lc_alloc(b.be->host, LC_MEM_COMM, lc_buf_bytes(b), what ? what : "host staging of a transfer")))
    return LC_ENOMEM;
  h->staged = 1;
  return read_in ? lc_buf_read(b, h->host, LC_SYNC_STAGE) : LC_OK;
}

lc_status lc_buf_hview_close(lc_buf_hview *h, int write_back) {
  lc_status st = LC_OK;
  if (h->staged) {
    if (write_back) st = lc_buf_write(h->dev, h->host, LC_SYNC_STAGE);
    lc_free(h->dev.be->host, h->host);
  }
  memset(h, 0, sizeof *h);
  return st;
}

// ---- blocking collectives
lc_status lc_buf_allgather_inplace(lc_comm *c, lc_buf all, size_t n) {
  if (all.n != n * (size_t)c->size)
    return lc_fail(LC_EINVAL, "lc_buf_allgather_inplace: %zu elements for %d blocks of %zu", all.n, c->size, n);
  lc_buf_hview h;
  LC_TRY(lc_buf_hview_open(all, 0, "host staging of a collective", &h));
  const size_t es = lc_dtype_size(all.dt);
  lc_status st = h.staged ? lc_buf_read(lc_buf_view(all, (size_t)c->rank * n, n),
                                        (char *)h.host + es * n * (size_t)c->rank, LC_SYNC_STAGE) // this rank's block only
                          : LC_OK;
  lc_req r = {{0}, 0};
  if (st == LC_OK) st = lc_iallgather(c, NULL, h.host, n, all.dt, &r);
  if (st == LC_OK) st = lc_wait(c, &r);
  const lc_status s2 = lc_buf_hview_close(&h, st == LC_OK);
  return st == LC_OK ? s2 : st;
}

lc_status lc_buf_allreduce_sum(lc_comm *c, lc_buf b) {
  if (c->size == 1) return LC_OK;
  lc_buf_hview h;
  LC_TRY(lc_buf_hview_open(b, 1, "host staging of a collective", &h));
  const lc_status st = lc_allreduce_sum(c, h.host, b.n, b.dt);
  const lc_status s2 = lc_buf_hview_close(&h, st == LC_OK);
  return st == LC_OK ? s2 : st;
}

// Blocking: the communicator's own all-to-all (MPI's blocking collectives are tuned; its
// non-blocking ones run a generic schedule).
static lc_status a2a_check(const lc_comm *c, lc_buf send, lc_buf recv, size_t n) {
  if (send.dt != recv.dt || send.n < n * (size_t)c->size || recv.n < n * (size_t)c->size)
    return lc_fail(LC_EINVAL, "all-to-all of backend buffers: %zu and %zu elements for %d blocks of %zu", send.n,
                   recv.n, c->size, n);
  return LC_OK;
}

lc_status lc_buf_alltoall(lc_comm *c, lc_buf send, lc_buf recv, size_t n) {
  LC_TRY(a2a_check(c, send, recv, n));
  lc_buf_hview s, r;
  memset(&r, 0, sizeof r);
  lc_status st = lc_buf_hview_open(send, 1, NULL, &s);
  if (st == LC_OK) st = lc_buf_hview_open(recv, 0, NULL, &r);
  if (st == LC_OK) st = lc_alltoall(c, s.host, r.host, n, send.dt);
  const lc_status a = lc_buf_hview_close(&s, 0), b = lc_buf_hview_close(&r, st == LC_OK);
  return st != LC_OK ? st : a != LC_OK ? a : b;
}

// ---- non-blocking transfers
static lc_status post(lc_comm *c, lc_buf s, lc_buf rv, int peer, int tag, size_t n, int a2a, lc_buf_req *r) {
  memset(r, 0, sizeof *r);
  lc_status st = lc_buf_hview_open(s, 1, NULL, &r->send);
  if (st == LC_OK) st = lc_buf_hview_open(rv, 0, NULL, &r->recv);
  if (st == LC_OK) {
    if (a2a) st = lc_ialltoall(c, r->send.host, r->recv.host, n, s.dt, &r->req);
    else if (lc_buf_ok(s)) st = lc_isend(c, r->send.host, s.n, s.dt, peer, tag, &r->req);
    else st = lc_irecv(c, r->recv.host, rv.n, rv.dt, peer, tag, &r->req);
  }
  if (st != LC_OK) lc_buf_hview_close(&r->send, 0), lc_buf_hview_close(&r->recv, 0);
  return st;
}

lc_status lc_buf_isend(lc_comm *c, lc_buf b, int peer, int tag, lc_buf_req *r) {
  return post(c, b, (lc_buf){0}, peer, tag, 0, 0, r);
}
lc_status lc_buf_irecv(lc_comm *c, lc_buf b, int peer, int tag, lc_buf_req *r) {
  return post(c, (lc_buf){0}, b, peer, tag, 0, 0, r);
}
lc_status lc_buf_ialltoall(lc_comm *c, lc_buf send, lc_buf recv, size_t n, lc_buf_req *r) {
  LC_TRY(a2a_check(c, send, recv, n));
  return post(c, send, recv, 0, 0, n, 1, r);
}

void lc_buf_test(lc_comm *c, lc_buf_req *r) { lc_test(c, &r->req); }

lc_status lc_buf_wait(lc_comm *c, lc_buf_req *r) {
  const lc_status st = lc_wait(c, &r->req);
  const lc_status a = lc_buf_hview_close(&r->send, 0), b = lc_buf_hview_close(&r->recv, st == LC_OK);
  memset(&r->req, 0, sizeof r->req);
  return st != LC_OK ? st : a != LC_OK ? a : b;
}
