// OpenBLAS picks its kernels from the CPU model when the library loads. Debian's
// OpenBLAS 0.3.21 does not know recent Intel server cores (e.g. Emerald Rapids) and
// falls back to its SSE3 "Prescott" kernels: ~4x slower sgemm. It honours
// OPENBLAS_CORETYPE, but only at load time, so when we detect the fallback on a CPU
// with AVX-512 (or AVX2) we set the variable and re-execute ourselves once.
#define _GNU_SOURCE
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

void lc_blas_fix_coretype(char **argv) {
  if (getenv("OPENBLAS_CORETYPE") || getenv("LONGCTX_BLAS_REEXEC")) return;
  const char *core = openblas_get_corename();
  if (!core) return;
  static const char *const fallbacks[] = {"Prescott", "Core2", "Nehalem", "Sandybridge", "Katmai",
                                          "Penryn", "Dunnington", "unknown"};
  int fallback = 0;
  for (size_t i = 0; i < sizeof fallbacks / sizeof fallbacks[0]; i++)
    fallback |= strcasecmp(core, fallbacks[i]) == 0;
  if (!fallback) return;
  __builtin_cpu_init();
  const char *want = NULL;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    want = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    want = "Haswell";
  if (!want) return;
  setenv("OPENBLAS_CORETYPE", want, 1);
  setenv("LONGCTX_BLAS_REEXEC", "1", 1);
  execv("/proc/self/exe", argv); // returns only on failure: keep going with the slow kernels
}
