// What a long job needs around the training loop: exit codes, pre-emption signals,
// launcher checks and checks of what can be checked before the first step.
#ifndef LC_TRAIN_JOB_H
#define LC_TRAIN_JOB_H

#include <stddef.h>

#include "core/status.h"
#include "dist/watchdog.h"

// Exit codes of `longctx train` (README: running long jobs).
#define LC_EXIT_OK 0
#define LC_EXIT_ERROR 1     // the run failed (a message says why)
#define LC_EXIT_USAGE 2     // bad flags or input, found before any work
// LC_EXIT_PEER 3 (watchdog.h): another rank died or hung, or a collective stalled
#define LC_EXIT_PREEMPTED 75 // stopped by SIGTERM/SIGUSR1 after saving; resume with --resume (EX_TEMPFAIL)

// SIGTERM and SIGUSR1 (what Slurm sends before it ends a job) set a flag instead of
// killing the process; the training loop ends after the current step.
void lc_job_catch_signals(void);
// The signal caught (0: none).
int lc_job_signal(void);

// Tasks the launcher started (Open MPI, MPICH/PMI, PMIx, Slurm's srun), 0 if none says;
// *var names the variable that said so.
int lc_job_launcher_tasks(const char **var);
// Threads per rank when --threads is not given: SLURM_CPUS_PER_TASK, else 0 (OpenMP's
// default: OMP_NUM_THREADS or every core).
int lc_job_default_threads(void);
// Before the first step: the --save directory exists or can be made, takes a file, and
// its file system has room for one checkpoint of `bytes`.
lc_status lc_job_check_save_dir(const char *dir, double bytes);

#endif
