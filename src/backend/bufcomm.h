// Communication on backend buffers (DESIGN.md, "Backends": the communicator takes backend
// buffers). A buffer in host memory goes to the communicator as it is; any other is staged
// through host memory of the backend's host arena (category comm), with named reads and
// writes (LC_SYNC_STAGE), blocking. (An MPI that reads device memory, or NCCL, would take the
// device's buffers directly here.)
#ifndef LC_BUFCOMM_H
#define LC_BUFCOMM_H

#include "backend/backend.h"
#include "comm/comm.h"

// In place: all holds c->size blocks of n elements; block c->rank is this rank's, and every
// block ends up on every rank.
lc_status lc_buf_allgather_inplace(lc_comm *c, lc_buf all, size_t n);
// In place: b becomes the sum over ranks.
lc_status lc_buf_allreduce_sum(lc_comm *c, lc_buf b);

// A host view of a backend range, for a communicator that reads and writes host memory:
// the range's own address on a backend of host memory (no copy), else a staging copy in
// the backend's host arena (category comm; `what` names it for the cap's line, NULL: a
// generic name), read from the device at open when read_in and written back at close
// when write_back (named: LC_SYNC_STAGE). An empty range has host NULL.
typedef struct {
  lc_buf dev;
  void *host;
  int staged;
} lc_buf_hview;
lc_status lc_buf_hview_open(lc_buf b, int read_in, const char *what, lc_buf_hview *h);
// Writes a staged view back (write_back) and frees it; the view is empty after.
lc_status lc_buf_hview_close(lc_buf_hview *h, int write_back);

// A non-blocking transfer of backend buffers through host views: what is sent is read
// from the device when it is posted, what is received written to it at lc_buf_wait.
typedef struct {
  lc_req req;
  lc_buf_hview send, recv; // (empty: none)
} lc_buf_req;
lc_status lc_buf_isend(lc_comm *c, lc_buf b, int peer, int tag, lc_buf_req *r);
lc_status lc_buf_irecv(lc_comm *c, lc_buf b, int peer, int tag, lc_buf_req *r);
// All-to-all: block i (n elements) of send goes to rank i, block j of recv comes from rank j.
lc_status lc_buf_ialltoall(lc_comm *c, lc_buf send, lc_buf recv, size_t n, lc_buf_req *r);
lc_status lc_buf_alltoall(lc_comm *c, lc_buf send, lc_buf recv, size_t n);
// Progresses r (never blocks; an empty request is complete).
void lc_buf_test(lc_comm *c, lc_buf_req *r);
// Completes r (an empty request: nothing) and frees its staging; a staged receive lands on
// the device first.
lc_status lc_buf_wait(lc_comm *c, lc_buf_req *r);

#endif
