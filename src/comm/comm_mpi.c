// MPI implementation of the communicator interface (portable MPI-3).
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include <stdatomic.h>

#include "core/timer.h"
#include "comm/comm.h"

_Static_assert(sizeof(MPI_Request) <= sizeof(((lc_req *)0)->opaque), "MPI_Request fits lc_req");

typedef struct {
  MPI_Comm comm;
} mpi_impl;

static MPI_Comm C(lc_comm *c) { return ((mpi_impl *)c->impl)->comm; }

// The blocking call the main thread is in (read by the watchdog's thread).
static _Atomic(const char *) blocked_in;
static _Atomic double blocked_since;

static void enter(const char *what) {
  atomic_store(&blocked_since, lc_now());
  atomic_store(&blocked_in, what);
}
static void leave(void) { atomic_store(&blocked_in, (const char *)NULL); }

void lc_comm_mark_blocked(const char *what) {
  if (what) enter(what);
  else leave();
}

const char *lc_comm_blocked(double *since) {
  const char *w = atomic_load(&blocked_in);
  if (since) *since = atomic_load(&blocked_since);
  return w;
}

static MPI_Datatype dt(lc_dtype t) {
  switch (t) {
    case LC_DT_F32: return MPI_FLOAT;
    case LC_DT_F64: return MPI_DOUBLE;
    case LC_DT_I32: return MPI_INT;
    case LC_DT_I64: return MPI_LONG_LONG;
    default: break;
  }
  switch (lc_dtype_size(t)) { // moved, never summed by MPI: an unsigned type of the same size
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    case 8: return MPI_UINT64_T;
    default: return MPI_BYTE;
  }
}

// Sums are defined for the types MPI can add.
static lc_status summable(lc_dtype t, const char *what) {
  if (t == LC_DT_F32 || t == LC_DT_F64 || t == LC_DT_I32 || t == LC_DT_I64) return LC_OK;
  return lc_fail(LC_EINVAL, "%s of %s elements: MPI sums only F32, F64, I32 and I64", what, lc_dtype_name(t));
}

static lc_status mpi_err(int rc, const char *what) {
  if (rc == MPI_SUCCESS) return LC_OK;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return lc_fail(LC_ECOMM, "MPI %s failed: %s", what, msg);
}

// Collectives take int counts: large buffers go in slices of at most 2^30 elements.
#define SLICE ((size_t)1 << 30)

static lc_status m_allreduce(lc_comm *c, void *buf, size_t n, lc_dtype t) {
  LC_TRY(summable(t, "all-reduce"));
  double t0 = lc_now();
  size_t es = lc_dtype_size(t);
  for (size_t off = 0; off < n; off += SLICE) {
    size_t k = n - off < SLICE ? n - off : SLICE;
    enter("an all-reduce");
    int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * es, (int)k, dt(t), MPI_SUM, C(c));
    leave();
    if (rc != MPI_SUCCESS) return mpi_err(rc, "allreduce");
    // ring all-reduce sends ~2 (p-1)/p of the buffer
    c->bytes_sent += 2.0 * (double)(c->size - 1) / c->size * (double)(k * es);
  }
  c->wait_seconds += lc_now() - t0;
  return LC_OK;
}

// MPI-3 counts are ints. The fix depends on what carries the message: activations
// (all-to-all, ring send/receive) shrink with a larger --cp; parameter slices (ZeRO
// gathers and reductions) with a larger --zero-group.
static lc_status check_count(size_t n, const char *what) {
  if (n <= (size_t)INT_MAX) return LC_OK;
  const int params = strstr(what, "gather") || strstr(what, "reduce") || strstr(what, "broadcast");
  return lc_fail(LC_ECOMM, "%s of %zu elements per rank exceeds MPI's int count (2^31 - 1); %s", what, n,
                 params ? "shard the parameters over more ranks (a larger --zero-group, or --zero 3)"
                        : "split the sequence over more ranks (a larger --cp) or shorten --seq");
}

static lc_status m_allgather(lc_comm *c, const void *s, void *r, size_t n, lc_dtype t) {
  LC_TRY(check_count(n, "all-gather"));
  double t0 = lc_now();
  enter("an all-gather");
  int rc = MPI_Allgather(s, (int)n, dt(t), r, (int)n, dt(t), C(c));
  leave();
  c->bytes_sent += (double)(c->size - 1) * (double)(n * lc_dtype_size(t));
  c->wait_seconds += lc_now() - t0;
  return mpi_err(rc, "all-gather");
}

static lc_status m_alltoall(lc_comm *c, const void *s, void *r, size_t n, lc_dtype t) {
  LC_TRY(check_count(n, "all-to-all"));
  double t0 = lc_now();
  enter("an all-to-all");
  int rc = MPI_Alltoall(s, (int)n, dt(t), r, (int)n, dt(t), C(c));
  leave();
  c->bytes_sent += (double)(c->size - 1) * (double)(n * lc_dtype_size(t));
  c->wait_seconds += lc_now() - t0;
  return mpi_err(rc, "all-to-all");
}

static lc_status m_isend(lc_comm *c, const void *b, size_t n, lc_dtype t, int peer, int tag, lc_req *r) {
  LC_TRY(check_count(n, "send"));
  MPI_Request q;
  int rc = MPI_Isend(b, (int)n, dt(t), peer, tag, C(c), &q);
  memcpy(r->opaque, &q, sizeof q);
  r->active = rc == MPI_SUCCESS;
  c->bytes_sent += (double)(n * lc_dtype_size(t));
  return mpi_err(rc, "isend");
}

static lc_status m_irecv(lc_comm *c, void *b, size_t n, lc_dtype t, int peer, int tag, lc_req *r) {
  LC_TRY(check_count(n, "receive"));
  MPI_Request q;
  int rc = MPI_Irecv(b, (int)n, dt(t), peer, tag, C(c), &q);
  memcpy(r->opaque, &q, sizeof q);
  r->active = rc == MPI_SUCCESS;
  return mpi_err(rc, "irecv");
}

static int m_test(lc_comm *c, lc_req *r) {
  (void)c;
  MPI_Request q;
  memcpy(&q, r->opaque, sizeof q);
  int done = 0;
  MPI_Test(&q, &done, MPI_STATUS_IGNORE);
  memcpy(r->opaque, &q, sizeof q);
  if (done) r->active = 0;
  return done;
}

static lc_status m_wait(lc_comm *c, lc_req *r) {
  double t0 = lc_now();
  MPI_Request q;
  memcpy(&q, r->opaque, sizeof q);
  enter("a wait for a non-blocking transfer or collective");
  int rc = MPI_Wait(&q, MPI_STATUS_IGNORE);
  leave();
  r->active = 0;
  c->wait_seconds += lc_now() - t0;
  return mpi_err(rc, "wait");
}

static void keep_req(lc_req *r, MPI_Request q, int rc) {
  memcpy(r->opaque, &q, sizeof q);
  r->active = rc == MPI_SUCCESS;
}

static lc_status m_iallreduce(lc_comm *c, void *b, size_t n, lc_dtype t, lc_req *r) {
  r->active = 0;
  LC_TRY(summable(t, "all-reduce"));
  LC_TRY(check_count(n, "non-blocking all-reduce"));
  MPI_Request q;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, b, (int)n, dt(t), MPI_SUM, C(c), &q);
  keep_req(r, q, rc);
  c->bytes_sent += 2.0 * (double)(c->size - 1) / c->size * (double)(n * lc_dtype_size(t));
  return mpi_err(rc, "iallreduce");
}

static lc_status m_iallgather(lc_comm *c, const void *s, void *d, size_t n, lc_dtype t, lc_req *r) {
  r->active = 0;
  LC_TRY(check_count(n, "non-blocking all-gather"));
  MPI_Request q;
  int rc = MPI_Iallgather(s ? s : MPI_IN_PLACE, (int)n, dt(t), d, (int)n, dt(t), C(c), &q);
  keep_req(r, q, rc);
  c->bytes_sent += (double)(c->size - 1) * (double)(n * lc_dtype_size(t));
  return mpi_err(rc, "iallgather");
}

static lc_status m_ireduce_scatter(lc_comm *c, const void *s, void *d, size_t n, lc_dtype t, lc_req *r) {
  r->active = 0;
  LC_TRY(summable(t, "reduce-scatter"));
  LC_TRY(check_count(n, "non-blocking reduce-scatter"));
  MPI_Request q;
  int rc = MPI_Ireduce_scatter_block(s ? s : MPI_IN_PLACE, d, (int)n, dt(t), MPI_SUM, C(c), &q);
  keep_req(r, q, rc);
  c->bytes_sent += (double)(c->size - 1) * (double)(n * lc_dtype_size(t));
  return mpi_err(rc, "ireduce_scatter");
}

static lc_status m_iallgatherv(lc_comm *c, void *b, const int *counts, const int *displs, lc_dtype t, lc_req *r) {
  r->active = 0;
  MPI_Request q;
  int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, dt(t), b, counts, displs, dt(t), C(c), &q);
  keep_req(r, q, rc);
  c->bytes_sent += (double)(c->size - 1) * (double)((size_t)counts[c->rank] * lc_dtype_size(t));
  return mpi_err(rc, "iallgatherv");
}

static lc_status m_ireduce_scatterv(lc_comm *c, const void *s, void *d, const int *counts, lc_dtype t, lc_req *r) {
  r->active = 0;
  LC_TRY(summable(t, "reduce-scatter"));
  MPI_Request q;
  int rc = MPI_Ireduce_scatter(s, d, counts, dt(t), MPI_SUM, C(c), &q);
  keep_req(r, q, rc);
  // Ring convention: each rank sends every block but its own once.
  size_t all = 0;
  for (int i = 0; i < c->size; i++) all += (size_t)counts[i];
  c->bytes_sent += (double)(all - (size_t)counts[c->rank]) * (double)lc_dtype_size(t);
  return mpi_err(rc, "ireduce_scatterv");
}

static lc_status m_ialltoall(lc_comm *c, const void *s, void *d, size_t n, lc_dtype t, lc_req *r) {
  r->active = 0;
  LC_TRY(check_count(n, "non-blocking all-to-all"));
  MPI_Request q;
  int rc = MPI_Ialltoall(s, (int)n, dt(t), d, (int)n, dt(t), C(c), &q);
  keep_req(r, q, rc);
  c->bytes_sent += (double)(c->size - 1) * (double)(n * lc_dtype_size(t));
  return mpi_err(rc, "ialltoall");
}

static lc_status m_bcast(lc_comm *c, void *b, size_t n, lc_dtype t, int root) {
  LC_TRY(check_count(n, "broadcast"));
  double t0 = lc_now();
  enter("a broadcast");
  int rc = MPI_Bcast(b, (int)n, dt(t), root, C(c));
  leave();
  if (c->rank == root) c->bytes_sent += (double)(c->size - 1) * (double)(n * lc_dtype_size(t));
  c->wait_seconds += lc_now() - t0;
  return mpi_err(rc, "broadcast");
}

static lc_status m_barrier(lc_comm *c) {
  enter("a barrier");
  int rc = MPI_Barrier(C(c));
  leave();
  return mpi_err(rc, "barrier");
}

static const lc_comm_ops mpi_ops;

static lc_status wrap(MPI_Comm mc, lc_comm **out) {
  lc_comm *c = calloc(1, sizeof *c);
  mpi_impl *im = calloc(1, sizeof *im);
  if (!c || !im) {
    free(c);
    free(im);
    MPI_Comm_free(&mc);
    return lc_fail(LC_ENOMEM, "out of memory creating a communicator");
  }
  im->comm = mc;
  MPI_Comm_set_errhandler(mc, MPI_ERRORS_RETURN); // failures become lc_status, never a silent abort
  c->ops = &mpi_ops;
  c->impl = im;
  MPI_Comm_rank(mc, &c->rank);
  MPI_Comm_size(mc, &c->size);
  *out = c;
  return LC_OK;
}

static lc_status m_split(lc_comm *c, int color, int key, lc_comm **out) {
  MPI_Comm nc;
  int rc = MPI_Comm_split(C(c), color, key, &nc);
  if (rc != MPI_SUCCESS) return mpi_err(rc, "comm split");
  return wrap(nc, out);
}

static void m_destroy(lc_comm *c) {
  mpi_impl *im = c->impl;
  MPI_Comm_free(&im->comm);
  free(im);
  free(c);
}

static const lc_comm_ops mpi_ops = {
    .allreduce_sum = m_allreduce, .allgather = m_allgather, .alltoall = m_alltoall, .isend = m_isend,
    .irecv = m_irecv, .test = m_test, .wait = m_wait, .barrier = m_barrier, .split = m_split,
    .destroy = m_destroy, .bcast = m_bcast, .iallreduce_sum = m_iallreduce, .iallgather = m_iallgather,
    .ireduce_scatter_sum = m_ireduce_scatter, .iallgatherv = m_iallgatherv,
    .ireduce_scatterv_sum = m_ireduce_scatterv, .ialltoall = m_ialltoall};

lc_status lc_comm_mpi_world(lc_comm **out) {
  MPI_Comm d;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &d);
  if (rc != MPI_SUCCESS) return mpi_err(rc, "comm dup");
  return wrap(d, out);
}
