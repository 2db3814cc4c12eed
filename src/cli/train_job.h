// What a long job needs around the training loop: exit codes, pre-emption signals,
// launcher checks and checks of what can be checked before the first step.
#ifndef LC_TRAIN_JOB_H
#define LC_TRAIN_JOB_H

#include <stddef.h>

#include "core/status.h"
#include "comm/watchdog.h"

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
// Threads per rank, and why. Without --threads: SLURM_CPUS_PER_TASK (the allocation), else
// OMP_NUM_THREADS (the user's), else the cores of the node divided by the ranks of this
// job on the node (at least 1; at most the cores this process may run on, so a rank the
// launcher bound to one core runs one thread).
typedef struct {
  int threads;        // per rank
  const char *source; // "--threads", "SLURM_CPUS_PER_TASK", "OMP_NUM_THREADS" or "cores / ranks"
  int forced;         // the user chose the number (--threads or OMP_NUM_THREADS)
  int cores;          // online cores of this node
  int usable;         // cores this process may run on (its affinity mask)
  int local_ranks;    // ranks of this job on this node
  const char *local_src; // what said so (a launcher's variable, "MPI" or "one process")
} lc_job_threads;
// given: --threads (0: not given). mpi_local: ranks on this node by MPI's shared-memory
// split (0: unknown); used when no launcher variable (OMPI_COMM_WORLD_LOCAL_SIZE,
// MPI_LOCALNRANKS, Slurm's SLURM_NTASKS_PER_NODE or SLURM_STEP_TASKS_PER_NODE inside an
// srun step) says. LONGCTX_TEST_CORES=N (tests only) stands for the node's cores.
void lc_job_threads_choose(int given, int mpi_local, lc_job_threads *t);
// One warning line (no newline) when ranks x threads exceed the node's cores, or the
// threads exceed the cores this rank may use, and the user forced the number; returns 0
// (buf "") when there is nothing to say.
int lc_job_threads_warning(const lc_job_threads *t, char *buf, size_t cap);
// Before the first step: the --save directory exists or can be made, takes a file, and
// its file system has room for one checkpoint of `bytes`.
lc_status lc_job_check_save_dir(const char *dir, double bytes);

#endif
