// The watchdog: no hang when a rank dies or stalls.
//
// A thread on every rank sends a small heartbeat to every other rank each `period`
// seconds over its own communicator, with what its main thread is doing (computing, or
// waiting inside which communication call and since when; comm_mpi.c records that). How
// the timeout is measured (so that every rank has ended within `timeout` seconds of the
// failure):
//   - a rank is declared gone when no heartbeat from it has arrived for
//     lc_watchdog_silence(timeout) = timeout - 4 periods (its last beat left before it
//     stopped; detection takes up to one more period, the report two).
//     Heartbeats come from the thread, not from the training loop, so a long first step, a
//     slow step or a checkpoint save never looks like a failure; a stopped process (SIGSTOP,
//     a hung node, a cut network) sends none.
//   - a collective is declared stalled when this rank has waited inside one communication
//     call for lc_watchdog_silence(timeout) seconds and every other rank, alive, reports
//     waiting too (nobody is computing towards it: a deadlock, not a slow peer).
// Then the thread prints one line naming the rank (and its place in the layout) or the
// stalled call, the step, and ends the process with LC_EXIT_PEER; the MPI launcher then
// ends the others (which will have detected the same within one period).
// Needs MPI_THREAD_MULTIPLE; lc_watchdog_start says so if the library lacks it.
#ifndef LC_WATCHDOG_H
#define LC_WATCHDOG_H

#include "core/status.h"
#include "comm/grid.h"

#define LC_EXIT_PEER 3 // process exit code when the watchdog ends a job

typedef struct lc_watchdog lc_watchdog;

// Collective over MPI_COMM_WORLD. dp, cp, hp, placement describe the layout, for naming a
// rank's place in messages.
lc_status lc_watchdog_start(lc_watchdog **out, double timeout_s, int dp, int cp, int hp, lc_placement placement);
// Seconds between heartbeats for a timeout: timeout / 10, at most 1.
double lc_watchdog_period(double timeout_s);
// Seconds of silence (or of waiting in one call, on every rank) that end the job.
double lc_watchdog_silence(double timeout_s);
// Stops the thread (collective: every rank calls it, after its last communication).
void lc_watchdog_stop(lc_watchdog *w);

#endif
