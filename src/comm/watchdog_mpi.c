// The watchdog's thread (watchdog.h) over MPI: heartbeats to every other rank on a
// communicator of its own, checked against --timeout.
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/runstate.h"
#include "core/timer.h"
#include "comm/comm.h"
#include "comm/grid.h"
#include "comm/watchdog.h"

#define TAG_HB 4242

// One heartbeat: the sender's step and whether (and how long) its main thread has been
// blocked in a communication call.
typedef struct {
  long step;
  double waited; // seconds blocked in the current call; < 0: computing
  char what[48];
} beat;

struct lc_watchdog {
  MPI_Comm comm;
  int started; // the thread runs
  int rank, size, dp, cp, hp;
  lc_placement placement;
  double timeout, period, silence; // silence: lc_watchdog_silence(timeout)
  pthread_t thread;
  atomic_int stop;
  double *last;   // [size] when the last heartbeat of each rank arrived
  beat *seen;     // [size] its content
  beat *out;      // [size] send buffers
  MPI_Request *sreq;
  beat in;
  MPI_Request rreq;
};

static void where(const lc_watchdog *w, int p, char *buf, size_t cap) {
  int d, c, h;
  lc_grid_coords_of(w->cp, w->hp, w->placement, p, &d, &c, &h);
  snprintf(buf, cap, "dp %d, cp %d, hp %d of the layout dp %d x cp %d x hp %d", d, c, h, w->dp, w->cp, w->hp);
}

// Ends this process with one line. The other live ranks detect the same within one check
// period; waiting two periods before exiting lets each say so before the launcher, seeing
// the first exit, ends them.
static void fail(const lc_watchdog *w, const char *line) {
  fprintf(stderr, "%s\n", line);
  fflush(stderr);
  fflush(stdout);
  lc_sleep(2 * w->period);
  lc_test_exit_note();
  _exit(LC_EXIT_PEER);
}

static void check(lc_watchdog *w, double now) {
  char msg[1024], pos[160];
  for (int p = 0; p < w->size; p++) {
    if (p == w->rank || now - w->last[p] <= w->silence) continue;
    where(w, p, pos, sizeof pos);
    double since = 0;
    const char *mine = lc_comm_blocked(&since);
    snprintf(msg, sizeof msg, "longctx: error (rank %d): rank %d (%s) stopped responding: no heartbeat for %.1f s "
             "(--timeout %g) during step %ld%s%s; it died, hangs, or its node or network failed; ending the job",
             w->rank, p, pos, now - w->last[p], w->timeout, lc_run_step(), mine ? " while this rank waited in " : "",
             mine ? mine : "");
    fail(w, msg);
  }
  double since = 0;
  const char *mine = lc_comm_blocked(&since);
  if (!mine || now - since <= w->silence) return;
  for (int p = 0; p < w->size; p++) // somebody still computing: a slow step, not a stall
    if (p != w->rank && w->seen[p].waited < 0) return;
  snprintf(msg, sizeof msg, "longctx: error (rank %d): %s stalled in step %ld: this rank has waited %.1f s (--timeout "
           "%g) and every other rank is waiting too (rank 0: %s); a collective that not all ranks entered; ending the job",
           w->rank, mine, lc_run_step(), now - since, w->timeout, w->rank == 0 ? mine : w->seen[0].what);
  fail(w, msg);
}

static void *run(void *arg) {
  lc_watchdog *w = arg;
  while (!atomic_load(&w->stop)) {
    double now = lc_now(), since = 0;
    const char *what = lc_comm_blocked(&since);
    for (int p = 0; p < w->size; p++) { // a beat to everyone whose last one has gone out
      if (p == w->rank) continue;
      int done = 1;
      if (w->sreq[p] != MPI_REQUEST_NULL) MPI_Test(&w->sreq[p], &done, MPI_STATUS_IGNORE);
      if (!done) continue;
      w->out[p].step = lc_run_step();
      w->out[p].waited = what ? now - since : -1.0;
      snprintf(w->out[p].what, sizeof w->out[p].what, "%s", what ? what : "computing");
      MPI_Isend(&w->out[p], (int)sizeof(beat), MPI_BYTE, p, TAG_HB, w->comm, &w->sreq[p]);
    }
    for (;;) { // every beat that has arrived
      int got = 0;
      MPI_Status s;
      MPI_Test(&w->rreq, &got, &s);
      if (!got) break;
      w->last[s.MPI_SOURCE] = lc_now();
      w->seen[s.MPI_SOURCE] = w->in;
      MPI_Irecv(&w->in, (int)sizeof(beat), MPI_BYTE, MPI_ANY_SOURCE, TAG_HB, w->comm, &w->rreq);
    }
    check(w, lc_now());
    lc_sleep(w->period);
  }
  return NULL;
}

lc_status lc_watchdog_start(lc_watchdog **out, double timeout_s, int dp, int cp, int hp, lc_placement placement) {
  *out = NULL;
  int level = 0, size = 1;
  MPI_Query_thread(&level);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (level < MPI_THREAD_MULTIPLE)
    return lc_fail(LC_ECOMM, "the MPI library gives no MPI_THREAD_MULTIPLE, which the watchdog's thread needs");
  lc_watchdog *w = calloc(1, sizeof *w);
  if (!w) return lc_fail(LC_ENOMEM, "out of memory for the watchdog");
  MPI_Comm_dup(MPI_COMM_WORLD, &w->comm);
  MPI_Comm_rank(w->comm, &w->rank);
  w->size = size, w->dp = dp, w->cp = cp, w->hp = hp, w->placement = placement;
  w->timeout = timeout_s;
  w->period = lc_watchdog_period(timeout_s);
  w->silence = lc_watchdog_silence(timeout_s);
  w->last = calloc((size_t)size, sizeof *w->last);
  w->seen = calloc((size_t)size, sizeof *w->seen);
  w->out = calloc((size_t)size, sizeof *w->out);
  w->sreq = malloc(sizeof *w->sreq * (size_t)size);
  if (!w->last || !w->seen || !w->out || !w->sreq) {
    MPI_Comm_free(&w->comm);
    free(w->last), free(w->seen), free(w->out), free(w->sreq), free(w);
    return lc_fail(LC_ENOMEM, "out of memory for the watchdog");
  }
  const double now = lc_now();
  for (int p = 0; p < size; p++) w->last[p] = now, w->sreq[p] = MPI_REQUEST_NULL, w->seen[p].waited = -1;
  MPI_Irecv(&w->in, (int)sizeof(beat), MPI_BYTE, MPI_ANY_SOURCE, TAG_HB, w->comm, &w->rreq);
  if (pthread_create(&w->thread, NULL, run, w) != 0) {
    MPI_Cancel(&w->rreq);
    MPI_Wait(&w->rreq, MPI_STATUS_IGNORE);
    MPI_Comm_free(&w->comm);
    free(w->last), free(w->seen), free(w->out), free(w->sreq), free(w);
    return lc_fail(LC_ENOMEM, "cannot start the watchdog thread");
  }
  w->started = 1;
  *out = w;
  return LC_OK;
}

double lc_watchdog_period(double timeout_s) { return timeout_s / 10 < 1.0 ? timeout_s / 10 : 1.0; }

double lc_watchdog_silence(double timeout_s) { return timeout_s - 4 * lc_watchdog_period(timeout_s); }

void lc_watchdog_stop(lc_watchdog *w) {
  if (!w) return;
  if (w->started) {
    // Every rank is here (its work done) before any heart stops beating. Marked as a wait,
    // so a rank stuck elsewhere while the others wait here is still reported as a stall.
    lc_comm_mark_blocked("the watchdog's final barrier");
    MPI_Barrier(w->comm);
    lc_comm_mark_blocked(NULL);
    atomic_store(&w->stop, 1);
    pthread_join(w->thread, NULL);
    for (int p = 0; p < w->size; p++)
      if (w->sreq[p] != MPI_REQUEST_NULL) MPI_Wait(&w->sreq[p], MPI_STATUS_IGNORE);
    MPI_Cancel(&w->rreq);
    MPI_Wait(&w->rreq, MPI_STATUS_IGNORE);
    MPI_Barrier(w->comm); // all sends matched or cancelled before the communicator goes
    MPI_Comm_free(&w->comm);
  }
  free(w->last), free(w->seen), free(w->out), free(w->sreq);
  free(w);
}
