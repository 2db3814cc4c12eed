// What a running job is doing, for messages and test hooks: this process's rank and the
// step being computed (1-based). Set by the training loop, read by the watchdog's thread.
//
// Test hooks (environment variables, for the robustness tests; never set them in real
// runs): LONGCTX_TEST_STOP=RANK:STEP:POINT and LONGCTX_TEST_KILL=RANK:STEP:POINT make that
// rank stop itself (SIGSTOP: alive but silent, as a hung node) or die (SIGKILL) the first
// time it reaches POINT in that step: "forward" (the model's first layer), "ring" (a ring
// attention block), "reduce" (handing a gradient to its reduction). The hook's line on
// stderr gives the wall-clock time of the fault, so tests measure from it.
// LONGCTX_TEST_SLEEP=RANK:STEP:POINT:SECONDS makes that rank compute (sleep) that long
// there instead: a slow but healthy rank. While a hook is set, a rank that ends the job on
// its own (the watchdog) prints the wall-clock time of its exit (lc_test_exit_note).
#ifndef LC_RUNSTATE_H
#define LC_RUNSTATE_H

void lc_run_set_rank(int rank);
int lc_run_rank(void);
void lc_run_set_step(long step);
long lc_run_step(void);
// A test point: stops or kills this process when a test hook asks for it here.
void lc_test_point(const char *point);
// Under a test hook, one stderr line with this rank's wall-clock time as it exits.
void lc_test_exit_note(void);

#endif
