#define _POSIX_C_SOURCE 200809L
#include "core/runstate.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/timer.h"

static atomic_long step_now;
static atomic_int rank_now;

void lc_run_set_rank(int rank) { atomic_store(&rank_now, rank); }
int lc_run_rank(void) { return atomic_load(&rank_now); }
void lc_run_set_step(long step) { atomic_store(&step_now, step); }
long lc_run_step(void) { return atomic_load(&step_now); }

typedef struct {
  int on, rank, sig; // sig 0: sleep
  long step;
  double seconds;
  char where[32];
} hook;

// The hook of the environment, read once (none: on = 0).
static const hook *the_hook(void) {
  static hook h;
  static int read;
  if (read) return &h;
  read = 1;
  const char *vars[2] = {"LONGCTX_TEST_STOP", "LONGCTX_TEST_KILL"};
  for (int i = 0; i < 2 && !h.on; i++) {
    const char *e = getenv(vars[i]);
    if (e && sscanf(e, "%d:%ld:%31s", &h.rank, &h.step, h.where) == 3) h.on = 1, h.sig = i ? SIGKILL : SIGSTOP;
  }
  const char *e = getenv("LONGCTX_TEST_SLEEP");
  if (!h.on && e && sscanf(e, "%d:%ld:%31[a-z]:%lf", &h.rank, &h.step, h.where, &h.seconds) == 4) h.on = 1, h.sig = 0;
  return &h;
}

void lc_test_point(const char *point) {
  const hook *h = the_hook();
  static int fired;
  if (!h->on || fired || h->rank != lc_run_rank() || h->step != lc_run_step() || strcmp(h->where, point)) return;
  fired = 1;
  // The wall-clock time of the fault, so a test measures from it (not from the launch).
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  fprintf(stderr, "longctx: test hook: rank %d %s itself at %s of step %ld (wall clock %.3f s)\n", lc_run_rank(),
          h->sig == SIGSTOP ? "stops" : h->sig ? "kills" : "slows", point, lc_run_step(),
          (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec);
  fflush(stderr);
  if (h->sig) {
    raise(h->sig);
  } else {
    lc_sleep(h->seconds);
  }
}

void lc_test_exit_note(void) {
  if (!the_hook()->on) return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  fprintf(stderr, "longctx: test hook: rank %d exits (wall clock %.3f s)\n", lc_run_rank(),
          (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec);
  fflush(stderr);
}
