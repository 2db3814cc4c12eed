#define _POSIX_C_SOURCE 200809L
#include "cli/train_job.h"

#include <errno.h>
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

int lc_job_default_threads(void) {
  const char *v = getenv("SLURM_CPUS_PER_TASK");
  return v && atoi(v) > 0 ? atoi(v) : 0;
}

lc_status lc_job_check_save_dir(const char *dir, double bytes) {
  if (lc_mkdir_p(dir) != LC_OK)
    return lc_fail(LC_EIO, "--save %s cannot be created (%s); give a writable directory", dir, lc_errmsg());
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
