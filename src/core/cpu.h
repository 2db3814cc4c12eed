// What this CPU computes natively, for the settings table and the choice of kernels.
#ifndef LC_CPU_H
#define LC_CPU_H

#include <stddef.h>

typedef struct {
  // Usable (the CPU has it and the OS enables its registers): avx2 = AVX2 + FMA; avx512f =
  // AVX-512 F, BW, DQ and VL (what the avx512 kernel level is compiled for); avx512_bf16
  // also needs avx512f.
  int avx2, avx512f, avx512_bf16, amx_bf16;
  char model[80]; // "model name" of /proc/cpuinfo ("?" when unknown)
  int family, model_id; // "cpu family" and "model" of /proc/cpuinfo (0: unknown)
  int l2_kib;           // L2 cache per core in KiB (sysfs cache index 2; 0: unknown)
} lc_cpu_info;

void lc_cpu_detect(lc_cpu_info *c);
// "AMD EPYC (family 25 model 1, L2 512 KiB)": the identity a time-model profile records.
const char *lc_cpu_describe(const lc_cpu_info *c, char *buf, size_t n);

#endif
