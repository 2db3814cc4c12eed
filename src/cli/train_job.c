#define _GNU_SOURCE // sched_getaffinity, CPU_COUNT
#include "cli/train_job.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cli/cli.h"
#include "io/fsutil.h"

static volatile sig_atomic_t caught;

static void on_signal(int sig) { caught = sig; }

void lc_job_catch_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGUSR1, &sa, NULL);
}

int lc_job_signal(void) { return (int)caught; }

int lc_job_launcher_tasks(const char **var) {
  // srun sets SLURM_STEP_NUM_TASKS for the tasks of a step (SLURM_PROCID marks one of
  // them; a batch script alone has neither, so a plain run inside an allocation is fine).
  const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS", "SLURM_STEP_NUM_TASKS"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (i == 4 && !getenv("SLURM_PROCID")) continue;
    if (v && atoi(v) > 1) {
      if (var) *var = vars[i];
      return atoi(v);
    }
  }
  return 0;
}

// A positive count from the environment variable, else 0 (a Slurm list such as "2(x3)"
// gives its first count).
static int env_count(const char *var) {
  const char *v = getenv(var);
  int n = v ? atoi(v) : 0;
  return n > 0 ? n : 0;
}

static int affinity_cores(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  return CPU_COUNT(&set);
}

void lc_job_threads_choose(int given, int mpi_local, lc_job_threads *t) {
  memset(t, 0, sizeof *t);
  const int test_cores = env_count("LONGCTX_TEST_CORES");
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  t->cores = test_cores ? test_cores : online > 0 ? (int)online : 1;
  const int aff = test_cores ? test_cores : affinity_cores();
  t->usable = aff > 0 && aff < t->cores ? aff : t->cores;
  // Ranks of this job on this node: the launcher's word, else MPI's.
  const int in_srun = getenv("SLURM_PROCID") != NULL;
  const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE",
                        "SLURM_STEP_TASKS_PER_NODE"};
  for (int i = 0; i < 4 && !t->local_ranks; i++) {
    if (i >= 2 && !in_srun) continue; // a batch script alone is one process, whatever it was allocated
    if ((t->local_ranks = env_count(vars[i]))) t->local_src = vars[i];
  }
  if (!t->local_ranks) {
    t->local_ranks = mpi_local > 0 ? mpi_local : 1;
    t->local_src = mpi_local > 0 ? "MPI" : "one process";
  }
  if (given > 0) {
    t->threads = given, t->source = "--threads", t->forced = 1;
  } else if (env_count("SLURM_CPUS_PER_TASK")) {
    t->threads = env_count("SLURM_CPUS_PER_TASK"), t->source = "SLURM_CPUS_PER_TASK";
  } else if (env_count("OMP_NUM_THREADS")) {
    t->threads = env_count("OMP_NUM_THREADS"), t->source = "OMP_NUM_THREADS", t->forced = 1;
  } else {
    t->threads = t->cores / t->local_ranks;
    if (t->threads > t->usable) t->threads = t->usable;
    if (t->threads < 1) t->threads = 1;
    t->source = "cores / ranks";
  }
}

int lc_job_threads_warning(const lc_job_threads *t, char *buf, size_t cap) {
  if (cap) buf[0] = 0;
  const long total = (long)t->local_ranks * t->threads;
  const int node_over = total > t->cores, rank_over = t->threads > t->usable;
  if (!t->forced || t->threads < 2 || !(node_over || rank_over)) return 0;
  int fit = t->cores / t->local_ranks;
  if (fit > t->usable) fit = t->usable;
  if (fit < 1) fit = 1;
  char fix[160];
  if (!strcmp(t->source, "--threads"))
    snprintf(fix, sizeof fix, "use --threads %d, or leave --threads out", fit);
  else
    snprintf(fix, sizeof fix, "use --threads %d, or unset OMP_NUM_THREADS", fit);
  const char *cs = t->cores == 1 ? "" : "s";
  if (node_over && t->local_ranks > 1)
    snprintf(buf, cap, "longctx: warning: %d ranks on this node x %d threads per rank (%s) = %ld threads on %d "
             "core%s: oversubscribed, every step runs many times slower; %s", t->local_ranks, t->threads, t->source,
             total, t->cores, cs, fix);
  else if (node_over)
    snprintf(buf, cap, "longctx: warning: %d threads (%s) on %d core%s: oversubscribed, every step runs many times "
             "slower; %s", t->threads, t->source, t->cores, cs, fix);
  else
    snprintf(buf, cap, "longctx: warning: %d threads per rank (%s) but this rank may run on %d cores (the launcher "
             "bound it): oversubscribed, every step runs many times slower; %s", t->threads, t->source, t->usable, fix);
  return 1;
}

lc_status lc_job_check_save_dir(const char *dir, double bytes) {
  if (lc_mkdir_p(dir) != LC_OK) { // its message names the directory that failed and why: copied, then extended
    char why[1024];
    snprintf(why, sizeof why, "%s", lc_errmsg());
    return lc_fail(LC_EIO, "--save %s: %s", dir, why);
  }
  char probe[4200];
  LC_TRY(lc_path_join(probe, sizeof probe, dir, ".longctx-write-test"));
  FILE *f = fopen(probe, "w");
  int ok = f && fputs("ok\n", f) >= 0, e = ok ? 0 : errno;
  if (f && fclose(f) != 0 && ok) ok = 0, e = errno; // the flush at close is where a full disk shows
  if (!ok) {
    unlink(probe);
    return lc_fail(LC_EIO, "--save %s is not writable (%s); give a directory you can write to", dir, strerror(e));
  }
  unlink(probe);
  struct statvfs v;
  if (statvfs(dir, &v) == 0) {
    double free_b = (double)v.f_bavail * (double)v.f_frsize;
    char a[32], b[32];
    if (free_b < bytes)
      return lc_fail(LC_EIO, "--save %s has %s free but one checkpoint takes %s (weights + AdamW moments); free "
                     "space or choose another directory", dir, lc_fmt_bytes(a, sizeof a, free_b),
                     lc_fmt_bytes(b, sizeof b, bytes));
  }
  return LC_OK;
}
