// Permission for the AMX tile data state. Linux (5.16+) keeps the 8 KiB of tile registers
// out of a process's signal frames until it asks for them once with
// arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); a tile instruction before that faults
// (SIGILL). Asked once per process, on the first use of the amx attention kernel (or at
// --kernels amx); where it is refused, one line, and bf16 passes run the bf16 kernel.
#define _GNU_SOURCE // syscall()
#include "backend/cpu/flash/flash.h"
#include "core/cpu.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define LC_ARCH_REQ_XCOMP_PERM 0x1023
#define LC_XFEATURE_XTILEDATA 18

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int granted;

static void request(void) {
  lc_cpu_info c;
  lc_cpu_detect(&c);
  if (!c.amx_bf16) return; // nothing to ask for (the amx level is not selectable either)
#if defined(__linux__) && defined(__x86_64__)
  if (syscall(SYS_arch_prctl, LC_ARCH_REQ_XCOMP_PERM, LC_XFEATURE_XTILEDATA) == 0) {
    granted = 1;
    return;
  }
  fprintf(stderr, "longctx: Linux refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM: %s); bf16 attention runs "
                  "the bf16 (AVX512_BF16) kernel\n", strerror(errno));
#endif
}

int lc_flash_amx_ready(void) {
  pthread_once(&once, request);
  return granted;
}
