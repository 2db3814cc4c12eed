// Host data to and from a backend's buffers, by one rule: where the backend's memory is
// the host's, the host array itself (wrapped: no copy, no sync); elsewhere a buffer of the
// backend's and one named copy, counted under the caller's sync kind.
#ifndef LC_STAGE_H
#define LC_STAGE_H

#include <stddef.h>

#include "backend/backend.h"

// *b: n elements of dt holding host[0..n): the host array wrapped, or a buffer (category
// cat, allocation named `what`) written from it (one write of kind why). Release it with
// lc_buf_stage_release. On an error *b is empty.
lc_status lc_buf_stage_in(lc_backend *be, const void *host, size_t n, lc_dtype dt, lc_mem_cat cat, const char *what,
                          lc_sync_kind why, lc_buf *b);
// *b: n elements of dt the caller fills for host[0..n): the host array wrapped, or a buffer
// (category cat, named `what`) that lc_buf_stage_out_end reads back.
lc_status lc_buf_stage_out(lc_backend *be, void *host, size_t n, lc_dtype dt, lc_mem_cat cat, const char *what,
                           lc_buf *b);
// A buffer from lc_buf_stage_out: read into host (one read of kind why) where it is a copy
// and st is LC_OK, then released. Returns st, else the read's status.
lc_status lc_buf_stage_out_end(lc_buf *b, void *host, lc_sync_kind why, lc_status st);
// Frees a staged copy, forgets a wrapped host array; empties *b (the empty buffer is fine).
void lc_buf_stage_release(lc_buf *b);

// The host bytes mirroring buffer b (`bytes` of it): b's own address where its memory is
// the host's (*staged = 0), else a copy's room from the backend's host arena (category cat,
// named `what`; *staged = 1), moved with lc_buf_read/lc_buf_write by the caller. NULL: out
// of memory. Free it with lc_buf_host_mirror_free.
void *lc_buf_host_mirror(lc_buf b, size_t bytes, lc_mem_cat cat, const char *what, int *staged);
void lc_buf_host_mirror_free(lc_backend *be, void *mirror, int staged);

#endif
