// Staging host data in and out of a backend's buffers: wrap where the memory is the
// host's, copy otherwise (stage.h).
#include "backend/stage.h"

lc_status lc_buf_stage_in(lc_backend *be, const void *host, size_t n, lc_dtype dt, lc_mem_cat cat, const char *what,
                          lc_sync_kind why, lc_buf *b) {
  if (be->host_memory) {
    *b = lc_buf_wrap_host(be, host, n, dt);
    return LC_OK;
  }
  LC_TRY(lc_buf_alloc(be, cat, dt, n, 0, what, b));
  const lc_status st = lc_buf_write(*b, host, why);
  if (st != LC_OK) lc_buf_free(b);
  return st;
}

lc_status lc_buf_stage_out(lc_backend *be, void *host, size_t n, lc_dtype dt, lc_mem_cat cat, const char *what,
                           lc_buf *b) {
  if (be->host_memory) {
    *b = lc_buf_wrap_host(be, host, n, dt);
    return LC_OK;
  }
  return lc_buf_alloc(be, cat, dt, n, 0, what, b);
}

lc_status lc_buf_stage_out_end(lc_buf *b, void *host, lc_sync_kind why, lc_status st) {
  if (lc_buf_ok(*b) && !b->be->host_memory && st == LC_OK) st = lc_buf_read(*b, host, why);
  lc_buf_stage_release(b);
  return st;
}

void lc_buf_stage_release(lc_buf *b) {
  if (lc_buf_ok(*b) && !b->be->host_memory) lc_buf_free(b);
  *b = (lc_buf){0};
}

void *lc_buf_host_mirror(lc_buf b, size_t bytes, lc_mem_cat cat, const char *what, int *staged) {
  void *p = lc_buf_host(b);
  *staged = !p;
  return p ? p : lc_alloc(b.be->host, cat, bytes, what);
}

void lc_buf_host_mirror_free(lc_backend *be, void *mirror, int staged) {
  if (staged) lc_free(be->host, mirror);
}
