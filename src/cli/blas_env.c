// OpenBLAS picks its kernels from the CPU model when the library loads. Debian's
// OpenBLAS 0.3.21 does not know recent Intel server cores (e.g. Emerald Rapids) and
// falls back to its SSE3 "Prescott" kernels: ~4x slower sgemm. It honours
// OPENBLAS_CORETYPE, but only at load time, so when we detect the fallback on a CPU
// with AVX-512 (or AVX2) we set the variable and re-execute ourselves once.
//
// (OMP_WAIT_POLICY is left to the user: on a quiet 2-core machine active, passive and
// libgomp's default gave the same bench-s step time within run-to-run noise, and active
// spinning would burn cores when MPI ranks x threads exceed them.)
#define _GNU_SOURCE
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static const char *coretype_fix(void) {
  if (getenv("OPENBLAS_CORETYPE")) return NULL;
  const char *core = openblas_get_corename();
  if (!core) return NULL;
  static const char *const fallbacks[] = {"Prescott", "Core2", "Nehalem", "Sandybridge", "Katmai",
                                          "Penryn", "Dunnington", "unknown"};
  int fallback = 0;
  for (size_t i = 0; i < sizeof fallbacks / sizeof fallbacks[0]; i++)
    fallback |= strcasecmp(core, fallbacks[i]) == 0;
  if (!fallback) return NULL;
  __builtin_cpu_init();
  const char *want = NULL;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    want = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    want = "Haswell";
  return want;
}

void lc_blas_fix_coretype(char **argv) {
  if (getenv("LONGCTX_ENV_REEXEC")) return; // already done
  const char *core = coretype_fix();
  // (tests: LONGCTX_TEST_REEXEC=1 re-executes on any CPU, as a fallback core would)
  if (!core && getenv("LONGCTX_TEST_REEXEC")) core = getenv("OPENBLAS_CORETYPE") ? NULL : "Haswell";
  if (!core) return;
  // The program's real path, not /proc/self/exe: the kernel names a process after the file
  // it executes, and "exe" is what ps, top, pkill and MPI's messages would show.
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0 || (size_t)n >= sizeof path - 1) return; // no path: keep going as we are
  path[n] = '\0';
  setenv("OPENBLAS_CORETYPE", core, 1);
  setenv("LONGCTX_ENV_REEXEC", "1", 1);
  execv(path, argv); // argv[0] unchanged; returns only on failure: keep going as we are
}
