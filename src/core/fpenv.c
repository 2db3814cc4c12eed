#include "core/fpenv.h"

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define MXCSR_DAZ 0x0040u
#define MXCSR_FTZ 0x8000u
static void set_this_thread(void) { _mm_setcsr(_mm_getcsr() | MXCSR_DAZ | MXCSR_FTZ); }
#elif defined(__aarch64__)
#include <stdint.h>
static void set_this_thread(void) {
  uint64_t fpcr;
  __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
  fpcr |= 1ull << 24; // FZ: flush subnormal inputs and outputs to zero
  __asm__ volatile("msr fpcr, %0" : : "r"(fpcr));
}
#else
static void set_this_thread(void) {}
#endif

void lc_fpenv_flush_denormals(void) {
  set_this_thread();
#pragma omp parallel
  set_this_thread();
}
