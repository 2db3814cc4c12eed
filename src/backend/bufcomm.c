// Collectives on backend buffers (bufcomm.h).
#include "backend/bufcomm.h"

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
