// The communicator interface. Attention and training code talk to other ranks only
// through this, so an NCCL implementation can sit beside the MPI one. Counts are in
// elements of the given dtype. Each communicator counts the bytes it sent and the
// seconds spent waiting, for the benchmarks. Bytes are counted by the algorithm-free
// convention of ring collectives, per rank: all-reduce 2 (p-1)/p of the buffer, all-gather
// and reduce-scatter (p-1) x the per-rank block, all-to-all (p-1) blocks.
//
// Non-blocking operations (point-to-point and collectives) return an lc_req that
// completes through lc_test / lc_wait. Neither MPI moves a transfer while the caller
// computes: poll lc_test between blocks of work.
#ifndef LC_COMM_H
#define LC_COMM_H

#include <stddef.h>

#include "core/dtype.h"
#include "core/status.h"


typedef struct lc_comm lc_comm;

// A pending non-blocking transfer (opaque storage for the implementation's handle).
typedef struct {
  unsigned char opaque[16];
  int active;
} lc_req;

typedef struct {
  lc_status (*allreduce_sum)(lc_comm *c, void *buf, size_t n, lc_dtype t);
  lc_status (*allgather)(lc_comm *c, const void *send, void *recv, size_t n_per_rank, lc_dtype t);
  lc_status (*alltoall)(lc_comm *c, const void *send, void *recv, size_t n_per_rank, lc_dtype t);
  lc_status (*isend)(lc_comm *c, const void *buf, size_t n, lc_dtype t, int peer, int tag, lc_req *r);
  lc_status (*irecv)(lc_comm *c, void *buf, size_t n, lc_dtype t, int peer, int tag, lc_req *r);
  int (*test)(lc_comm *c, lc_req *r); // 1 when complete (or inactive)
  lc_status (*wait)(lc_comm *c, lc_req *r);
  lc_status (*barrier)(lc_comm *c);
  // buf[n] of rank `root` to every rank.
  lc_status (*bcast)(lc_comm *c, void *buf, size_t n, lc_dtype t, int root);
  // In place: buf[n] becomes the sum over ranks.
  lc_status (*iallreduce_sum)(lc_comm *c, void *buf, size_t n, lc_dtype t, lc_req *r);
  // recv[size * n] = every rank's block of n in rank order. send NULL: in place (this
  // rank's block is already at recv + rank * n).
  lc_status (*iallgather)(lc_comm *c, const void *send, void *recv, size_t n_per_rank, lc_dtype t,
                          lc_req *r);
  // recv[n] = block `rank` of the sum over ranks of send[size * n]. send NULL: in place
  // (the input is recv[size * n]; the result lands in recv[0..n)).
  lc_status (*ireduce_scatter_sum)(lc_comm *c, const void *send, void *recv, size_t n_per_rank,
                                   lc_dtype t, lc_req *r);
  // Uneven blocks, in place: rank i's block is buf[displs[i] .. + counts[i]) (counts may be
  // 0); every rank's block ends up in every rank's buf. counts/displs (size entries) must
  // stay valid until the request completes.
  lc_status (*iallgatherv)(lc_comm *c, void *buf, const int *counts, const int *displs, lc_dtype t, lc_req *r);
  // Uneven blocks: recv[counts[rank]] = block `rank` of the sum over ranks of send, whose
  // blocks lie one after another in rank order (counts may be 0; send != recv).
  lc_status (*ireduce_scatterv_sum)(lc_comm *c, const void *send, void *recv, const int *counts, lc_dtype t,
                                    lc_req *r);
  // Non-blocking all-to-all: block p of send[size * n] goes to rank p, block p of
  // recv[size * n] comes from rank p. Both buffers stay untouched until it completes.
  lc_status (*ialltoall)(lc_comm *c, const void *send, void *recv, size_t n_per_rank, lc_dtype t, lc_req *r);
  // Sub-communicator of the ranks with the same color, ordered by key.
  lc_status (*split)(lc_comm *c, int color, int key, lc_comm **out);
  void (*destroy)(lc_comm *c);
} lc_comm_ops;

struct lc_comm {
  const lc_comm_ops *ops;
  int rank, size;
  void *impl;
  // statistics
  double bytes_sent;   // bytes this rank handed to the network through this communicator
  double wait_seconds; // time blocked in collectives and waits
};

// Marks the main thread as blocked in `what` (NULL: computing again), for communication
// outside the communicator interface (the watchdog's own barriers).
void lc_comm_mark_blocked(const char *what);
// What this process's main thread is blocked in, for the watchdog (comm/watchdog.h): the
// name of the communication call it waits in and since when (lc_now seconds), or NULL
// while it computes.
const char *lc_comm_blocked(double *since);

// MPI implementation over a duplicate of MPI_COMM_WORLD (MPI must be initialised).
lc_status lc_comm_mpi_world(lc_comm **out);
// A one-rank communicator that needs no MPI (single-process runs and unit tests).
lc_status lc_comm_self(lc_comm **out);

static inline lc_status lc_allreduce_sum(lc_comm *c, void *buf, size_t n, lc_dtype t) {
  return c->size == 1 ? LC_OK : c->ops->allreduce_sum(c, buf, n, t);
}
static inline lc_status lc_allgather(lc_comm *c, const void *s, void *r, size_t n, lc_dtype t) {
  return c->ops->allgather(c, s, r, n, t);
}
static inline lc_status lc_alltoall(lc_comm *c, const void *s, void *r, size_t n, lc_dtype t) {
  return c->ops->alltoall(c, s, r, n, t);
}
static inline lc_status lc_isend(lc_comm *c, const void *b, size_t n, lc_dtype t, int peer, int tag,
                                 lc_req *r) {
  return c->ops->isend(c, b, n, t, peer, tag, r);
}
static inline lc_status lc_irecv(lc_comm *c, void *b, size_t n, lc_dtype t, int peer, int tag,
                                 lc_req *r) {
  return c->ops->irecv(c, b, n, t, peer, tag, r);
}
static inline int lc_test(lc_comm *c, lc_req *r) { return r->active ? c->ops->test(c, r) : 1; }
static inline lc_status lc_wait(lc_comm *c, lc_req *r) { return r->active ? c->ops->wait(c, r) : LC_OK; }
static inline lc_status lc_barrier(lc_comm *c) { return c->ops->barrier(c); }
static inline lc_status lc_bcast(lc_comm *c, void *b, size_t n, lc_dtype t, int root) {
  return c->size == 1 ? LC_OK : c->ops->bcast(c, b, n, t, root);
}

// Collective: every rank learns whether any rank's `st` failed, for steps that may fail on
// some ranks only (files, memory) before a collective that would then wait forever. Returns
// LC_OK when none failed; otherwise, on every rank, the status and message of the lowest
// failing rank (prefixed with "rank k: " for k > 0), so rank 0 can report it.
lc_status lc_comm_agree(lc_comm *c, lc_status st);
static inline lc_status lc_iallreduce_sum(lc_comm *c, void *b, size_t n, lc_dtype t, lc_req *r) {
  return c->ops->iallreduce_sum(c, b, n, t, r);
}
static inline lc_status lc_iallgather(lc_comm *c, const void *s, void *r, size_t n, lc_dtype t, lc_req *q) {
  return c->ops->iallgather(c, s, r, n, t, q);
}
static inline lc_status lc_ireduce_scatter_sum(lc_comm *c, const void *s, void *r, size_t n, lc_dtype t,
                                               lc_req *q) {
  return c->ops->ireduce_scatter_sum(c, s, r, n, t, q);
}
static inline lc_status lc_iallgatherv(lc_comm *c, void *b, const int *counts, const int *displs, lc_dtype t,
                                       lc_req *q) {
  return c->ops->iallgatherv(c, b, counts, displs, t, q);
}
static inline lc_status lc_ireduce_scatterv_sum(lc_comm *c, const void *s, void *r, const int *counts, lc_dtype t,
                                                lc_req *q) {
  return c->ops->ireduce_scatterv_sum(c, s, r, counts, t, q);
}
// Counted as lc_alltoall: (size - 1) blocks of n elements.
static inline lc_status lc_ialltoall(lc_comm *c, const void *s, void *r, size_t n, lc_dtype t, lc_req *q) {
  return c->ops->ialltoall(c, s, r, n, t, q);
}
static inline lc_status lc_comm_split(lc_comm *c, int color, int key, lc_comm **out) {
  return c->ops->split(c, color, key, out);
}
static inline void lc_comm_destroy(lc_comm *c) {
  if (c) c->ops->destroy(c);
}

#endif
