#include "core/cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

void lc_cpu_detect(lc_cpu_info *c) {
  memset(c, 0, sizeof *c);
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, d, e;
  // What the OS saves on a context switch (XGETBV): YMM state for AVX2; opmask, ZMM_Hi256
  // and Hi16_ZMM too for AVX-512; the AMX tile state for AMX. A feature the OS does not
  // enable counts as absent (a VM may hide it).
  int ymm = 0, zmm = 0, amx = 0, fma = 0;
  if (__get_cpuid(1, &a, &b, &e, &d) && ((e >> 27) & 1)) { // OSXSAVE
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    ymm = (lo & 0x6) == 0x6;
    zmm = ymm && (lo & 0xe0) == 0xe0;
    amx = (lo & 0x60000) == 0x60000;
    fma = (e >> 12) & 1;
  }
  if (__get_cpuid_count(7, 0, &a, &b, &e, &d)) {
    c->avx2 = ymm && fma && ((b >> 5) & 1);
    // the avx512 level is compiled for F, BW, DQ and VL (CMakeLists.txt)
    c->avx512f = c->avx2 && zmm && ((b >> 16) & 1) && ((b >> 17) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1);
    c->amx_bf16 = amx && ((d >> 22) & 1);
    if (__get_cpuid_count(7, 1, &a, &b, &e, &d)) c->avx512_bf16 = c->avx512f && ((a >> 5) & 1);
  }
#endif
  snprintf(c->model, sizeof c->model, "?");
  FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index2/size", "r");
  if (f) {
    int kib = 0;
    char unit = 0;
    if (fscanf(f, "%d%c", &kib, &unit) >= 1) c->l2_kib = unit == 'M' ? kib * 1024 : kib;
    fclose(f);
  }
  f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[256];
  int got = 0;
  while (got != 7 && fgets(line, sizeof line, f)) { // the first processor's three fields
    const char *p = strchr(line, ':');
    if (!p) continue;
    p += 1 + (p[1] == ' ');
    if (!strncmp(line, "model name", 10) && !(got & 1)) {
      snprintf(c->model, sizeof c->model, "%.*s", (int)strcspn(p, "\n"), p);
      got |= 1;
    } else if (!strncmp(line, "cpu family", 10) && !(got & 2)) {
      c->family = atoi(p);
      got |= 2;
    } else if (!strncmp(line, "model", 5) && (line[5] == '\t' || line[5] == ' ') && !(got & 4)) {
      c->model_id = atoi(p);
      got |= 4;
    }
  }
  fclose(f);
}

const char *lc_cpu_describe(const lc_cpu_info *c, char *buf, size_t n) {
  snprintf(buf, n, "%s (family %d model %d, L2 %d KiB)", c->model, c->family, c->model_id, c->l2_kib);
  return buf;
}
