// longctx calibrate: measures this machine's rates for the time model (plan/calibrate.h)
// and merges them, as the profile of the process grid it was launched with, into a machine
// file that `plan` and `train` read (--machine; default ~/.cache/longctx/machine.json).
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "core/cpu.h"
#include "core/timer.h"
#include "io/fsutil.h"
#include "backend/cpu/kern/kernels.h"
#include "plan/calibrate.h"

static void progress(const char *what, double frac) {
  fprintf(stderr, "\rcalibrate: %3.0f%% %-48s", 100 * frac, what);
  if (frac >= 1) fprintf(stderr, "\n");
  fflush(stderr);
}

static int run(int argc, char **argv) {
  const char *out = NULL, *kernels = "auto";
  int threads = 0;
  lc_flag flags[] = {
      {"out", LC_ARG_STR, &out, "machine file to write (merged: one profile per ranks x threads; default ~/.cache/longctx/machine.json); plan and train read the last one written unless given --machine", 0},
      {"threads", LC_ARG_INT, &threads, "OpenMP threads per rank (default: OMP_NUM_THREADS or this machine's)", 0},
      {"kernels", LC_ARG_STR, &kernels, "auto | portable | avx2 | avx512 | bf16 | amx: the kernels measured (default auto, as train)", 0},
  };
  const int nf = (int)(sizeof flags / sizeof flags[0]);
  if (lc_args_wants_help(argc, argv)) {
    lc_args_help("calibrate", flags, nf);
    printf("\nRun it under mpirun with the ranks and threads per rank you will train with, e.g.\n"
           "  OMP_NUM_THREADS=1 mpirun -np 2 longctx calibrate    (the 2-rank profile and its network)\n"
           "  longctx calibrate --threads 2                        (one process)\n");
    return 0;
  }
  lc_comm *w = NULL;
  int used = 0;
  char def[4096], dir[4096];
  if (lc_comm_mpi_world(&w) != LC_OK) {
    lc_cli_error(lc_errmsg());
    return 2;
  }
  // Flags are read alike on every rank; rank 0 reports.
  lc_status st = lc_args_parse(argc, argv, flags, nf);
  if (st == LC_OK) st = lc_cli_threads(threads, &used);
  if (st == LC_OK) st = lc_cli_kernels(kernels);
  if (st != LC_OK) {
    if (w->rank == 0) lc_cli_error(lc_errmsg());
    lc_comm_destroy(w);
    return 2;
  }
  if (!out) out = lc_rates_cache_path(def, sizeof def);
  // The file's folder must exist (created for the default path) before minutes of work.
  snprintf(dir, sizeof dir, "%s", out);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  if (w->rank == 0 && slash && dir[0]) st = out == def ? lc_mkdir_p(dir) : (lc_is_dir(dir) ? LC_OK : lc_fail(LC_EIO, "--out %s: the folder %s does not exist; create it or pick another path", out, dir));
  st = lc_comm_agree(w, st);
  lc_rates r;
  const double t0 = lc_now();
  if (st == LC_OK) st = lc_calibrate(w, used, &r, progress);
  lc_cpu_info cpu;
  lc_cpu_detect(&cpu);
  lc_cpu_describe(&cpu, r.cpu, sizeof r.cpu);
  if (st == LC_OK && w->rank == 0) st = lc_rates_save_machine(out, &r);
  if (st == LC_OK && w->rank == 0) lc_rates_note_last(out); // plan and train read it by default
  st = lc_comm_agree(w, st);
  if (st != LC_OK) {
    if (w->rank == 0) lc_cli_error(lc_errmsg());
    lc_comm_destroy(w);
    return 1;
  }
  if (w->rank == 0) {
    printf("calibrate: %s, %d rank%s x %d thread%s, kernels %s, %.0f s -> %s\n", cpu.model, w->size,
           w->size > 1 ? "s" : "", used, used > 1 ? "s" : "", lc_kern_name(lc_kern()->level), lc_now() - t0, out);
    printf("  GEMM 1024 x 1024 x 1024 forward: fp32 %.0f GFLOP/s, bf16 %.0f GFLOP/s; attention (head dim 64) "
           "forward fp32 %.0f, bf16 %.0f GFLOP/s; element-wise %.1f GB/s, optimizer %.1f GB/s, loss %.1f GB/s\n",
           r.gemm[0][0][2][2] / 1e9, r.gemm[1][0][2][2] / 1e9, r.flash[0][0][1] / 1e9, r.flash[1][0][1] / 1e9, r.ew_bw / 1e9,
           r.optim_bw / 1e9, r.loss_bw / 1e9);
    printf("  GEMM fp32 forward at 64 / 256 / 4096 / 16384 rows: %.2f / %.2f / %.2f / %.2f x its rate at 1024; attention "
           "fp32 forward with 4K / 16K / 64K keys: %.2f / %.2f / %.2f x its rate with 1K\n", r.gemm_rows[0][0][0],
           r.gemm_rows[0][0][1], r.gemm_rows[0][0][3], r.gemm_rows[0][0][4], r.flash_len[0][0][1], r.flash_len[0][0][2],
           r.flash_len[0][0][3]);
    if (w->size > 1)
      printf("  network: all-to-all %.1f us + %.2f GB/s, all-gather %.1f us + %.2f GB/s, point-to-point %.1f us + %.2f GB/s\n",
             r.coll[LC_COLL_ALLTOALL].lat_s * 1e6, r.coll[LC_COLL_ALLTOALL].bw / 1e9, r.coll[LC_COLL_ALLGATHER].lat_s * 1e6,
             r.coll[LC_COLL_ALLGATHER].bw / 1e9, r.coll[LC_COLL_P2P].lat_s * 1e6, r.coll[LC_COLL_P2P].bw / 1e9);
  }
  lc_comm_destroy(w);
  return 0;
}

int lc_cmd_calibrate(int argc, char **argv) {
  if (lc_args_wants_help(argc, argv)) return run(argc, argv);
  int provided = 0;
  MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int rc = run(argc, argv);
  MPI_Finalize();
  return rc;
}
