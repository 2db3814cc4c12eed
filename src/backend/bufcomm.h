// Collectives on backend buffers (DESIGN.md, "Backends": the communicator takes backend
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

#endif
