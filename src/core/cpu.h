// What this CPU computes natively, for the settings table and the choice of kernels.
#ifndef LC_CPU_H
#define LC_CPU_H

#include <stddef.h>

typedef struct {
  int avx2, avx512f, avx512_bf16, amx_bf16;
  char model[80]; // "model name" of /proc/cpuinfo ("?" when unknown)
} lc_cpu_info;

void lc_cpu_detect(lc_cpu_info *c);

#endif
