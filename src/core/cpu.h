// What this CPU computes natively, for the settings table and the choice of kernels.
#ifndef LC_CPU_H
#define LC_CPU_H

#include <stddef.h>

#include "core/dtype.h"

typedef struct {
  int avx2, avx512f, avx512_bf16, amx_bf16;
  char model[80]; // "model name" of /proc/cpuinfo ("?" when unknown)
} lc_cpu_info;

void lc_cpu_detect(lc_cpu_info *c);

// One line for the settings table: the precision and, for bf16, how its GEMMs and
// attention run on this CPU (never silently slow: the line says what bf16 costs here).
const char *lc_precision_desc(lc_dtype precision, const lc_cpu_info *c, char *buf, size_t n);

#endif
