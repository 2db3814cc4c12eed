#define _POSIX_C_SOURCE 200809L
#include "core/timer.h"

#include <time.h>

double lc_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void lc_sleep(double seconds) {
  if (!(seconds > 0)) return;
  struct timespec t = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
  while (nanosleep(&t, &t) != 0) {
  }
}
