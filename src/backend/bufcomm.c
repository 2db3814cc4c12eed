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

// ---- point to point
static lc_status post(lc_comm *c, lc_buf b, int peer, int tag, int recv, lc_buf_req *r) {
  memset(r, 0, sizeof *r);
  r->dev = b;
  r->recv = recv;
  void *h = lc_buf_host(b);
  if (!h && lc_buf_bytes(b)) {
    if (!(h = r->host = stage(b))) return LC_ENOMEM;
    if (!recv) {
      const lc_status st = lc_buf_read(b, h, LC_SYNC_STAGE);
      if (st != LC_OK) {
        lc_free(b.be->host, r->host);
        r->host = NULL;
        return st;
      }
    }
  }
  const lc_status st = recv ? lc_irecv(c, h, b.n, b.dt, peer, tag, &r->req) : lc_isend(c, h, b.n, b.dt, peer, tag, &r->req);
  if (st != LC_OK && r->host) {
    lc_free(b.be->host, r->host);
    r->host = NULL;
  }
  return st;
}

lc_status lc_buf_isend(lc_comm *c, lc_buf b, int peer, int tag, lc_buf_req *r) { return post(c, b, peer, tag, 0, r); }
lc_status lc_buf_irecv(lc_comm *c, lc_buf b, int peer, int tag, lc_buf_req *r) { return post(c, b, peer, tag, 1, r); }

void lc_buf_test(lc_comm *c, lc_buf_req *r) { lc_test(c, &r->req); }

lc_status lc_buf_wait(lc_comm *c, lc_buf_req *r) {
  lc_status st = lc_wait(c, &r->req);
  if (r->host) {
    if (st == LC_OK && r->recv) st = lc_buf_write(r->dev, r->host, LC_SYNC_STAGE);
    lc_free(r->dev.be->host, r->host);
  }
  memset(r, 0, sizeof *r);
  return st;
}
