#include "core/cpu.h"

#include <stdio.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

void lc_cpu_detect(lc_cpu_info *c) {
  memset(c, 0, sizeof *c);
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, d, e;
  if (__get_cpuid_count(7, 0, &a, &b, &e, &d)) {
    c->avx2 = (b >> 5) & 1;
    c->avx512f = (b >> 16) & 1;
    c->amx_bf16 = (d >> 22) & 1;
    if (__get_cpuid_count(7, 1, &a, &b, &e, &d)) c->avx512_bf16 = (a >> 5) & 1;
  }
#endif
  snprintf(c->model, sizeof c->model, "?");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    const char *p = strchr(line, ':');
    if (strncmp(line, "model name", 10) || !p) continue;
    p += 1 + (p[1] == ' ');
    snprintf(c->model, sizeof c->model, "%.*s", (int)strcspn(p, "\n"), p);
    break;
  }
  fclose(f);
}
