// The kernel table: one per level, the choice made once (lc_kern_select).
#include "backend/cpu/kern/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "backend/cpu/gemm/gemm_dnnl.h"
#include "backend/cpu/flash/flash.h"
#include "backend/cpu/kern/kern_levels.h"

static const char *const names[LC_KERN_LEVELS] = {"portable", "avx2", "avx512", "bf16", "amx"};

const lc_kernels *lc_kern_table(lc_kern_level level) {
  switch (level) {
    case LC_KERN_AVX2: return &lc_kern_avx2;
    case LC_KERN_AVX512: return &lc_kern_avx512;
    case LC_KERN_BF16: return &lc_kern_bf16;
    case LC_KERN_AMX: return &lc_kern_amx;
    default: return &lc_kern_portable;
  }
}

// Until lc_kern_select runs (tests, tools): the best level of this CPU, found on first use.
static const lc_kernels *current;

// Test hook: LONGCTX_TEST_KERNEL_CAP=LEVEL makes this process's CPU run nothing above LEVEL
// (a rank on an older node of a mixed job).
static int above_test_cap(lc_kern_level level) {
  const char *cap = getenv("LONGCTX_TEST_KERNEL_CAP");
  for (int l = 0; cap && l < LC_KERN_LEVELS; l++)
    if (!strcmp(cap, names[l])) return level > l;
  return 0;
}

int lc_kern_supported(lc_kern_level level, const lc_cpu_info *c) {
  if (above_test_cap(level)) return 0;
  switch (level) {
    case LC_KERN_PORTABLE: return 1;
    case LC_KERN_AVX2: return c->avx2;
    case LC_KERN_AVX512: return c->avx512f;
    case LC_KERN_BF16: return c->avx512f && c->avx512_bf16;
    case LC_KERN_AMX: return c->avx512f && c->avx512_bf16 && c->amx_bf16;
    default: return 0;
  }
}

lc_kern_level lc_kern_best(const lc_cpu_info *c) {
  lc_kern_level best = LC_KERN_PORTABLE;
  for (int l = 1; l < LC_KERN_LEVELS; l++)
    if (lc_kern_supported((lc_kern_level)l, c)) best = (lc_kern_level)l;
  return best;
}

const lc_kernels *lc_kern(void) {
  if (!current) {
    lc_cpu_info c;
    lc_cpu_detect(&c);
    current = lc_kern_table(lc_kern_best(&c));
  }
  return current;
}

const char *lc_kern_name(lc_kern_level level) {
  return (int)level >= 0 && level < LC_KERN_LEVELS ? names[level] : "auto";
}

lc_status lc_kern_select(lc_kern_level level) {
  lc_cpu_info c;
  lc_cpu_detect(&c);
  if (level == LC_KERN_AUTO) level = lc_kern_best(&c);
  if (!lc_kern_supported(level, &c)) {
    const int needs[3] = {level == LC_KERN_AVX2 && !c.avx2, level >= LC_KERN_AVX512 && !c.avx512f,
                          level >= LC_KERN_BF16 && !c.avx512_bf16};
    const char *feat[3] = {"AVX2", "AVX-512F", "AVX512_BF16"};
    char miss[64] = "";
    for (int i = 0; i < 3; i++)
      if (needs[i]) snprintf(miss + strlen(miss), sizeof miss - strlen(miss), "%s%s", *miss ? ", " : "", feat[i]);
    if (level == LC_KERN_AMX && !c.amx_bf16)
      snprintf(miss + strlen(miss), sizeof miss - strlen(miss), "%sAMX-BF16", *miss ? ", " : "");
    if (!*miss) snprintf(miss, sizeof miss, "it (LONGCTX_TEST_KERNEL_CAP)");
    return lc_fail(LC_EINVAL, "--kernels %s: this CPU (%s) lacks %s; use --kernels %s or auto", names[level],
                   c.model, miss, names[lc_kern_best(&c)]);
  }
  current = lc_kern_table(level);
  if (level == LC_KERN_AMX) (void)lc_flash_amx_ready(); // ask for the tile state now, before any thread starts
  if (level >= LC_KERN_BF16) lc_gemm_dnnl_limit_isa(level == LC_KERN_AMX); // (a no-op after the first GEMM)
  return LC_OK;
}

lc_status lc_kern_parse(const char *s, lc_kern_level *level) {
  if (s && !strcmp(s, "auto")) {
    *level = LC_KERN_AUTO;
    return LC_OK;
  }
  for (int l = 0; l < LC_KERN_LEVELS; l++)
    if (s && !strcmp(s, names[l])) {
      *level = (lc_kern_level)l;
      return LC_OK;
    }
  return lc_fail(LC_EINVAL, "--kernels '%s': use auto, portable, avx2, avx512, bf16 or amx", s ? s : "");
}

float lc_clip_factor(double norm, float max_norm) {
  if (!(max_norm > 0) || !(norm > max_norm)) return 1.0f;
  return (float)(max_norm / (norm + 1e-6));
}

void lc_adamw_bias(const lc_adamw_hp *hp, long t, float *step_size, float *inv_sqrt_bc2) {
  const double bc1 = 1.0 - pow(hp->beta1, (double)t), bc2 = 1.0 - pow(hp->beta2, (double)t);
  *step_size = (float)(hp->lr / bc1);
  *inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
}

void lc_bf16_unpack_inplace(float *buf, size_t n) {
  const uint16_t *h = (const uint16_t *)(const void *)buf + n; // bytes [2n, 4n)
  size_t a = 0;
  // A chunk [a, b) writes bytes [4a, 4b) and reads [2n + 2a, 2n + 2b): disjoint when
  // b <= (n + a) / 2, so each chunk may run in parallel; the chunks halve towards the end.
  while (n - a >= ((size_t)1 << 16)) {
    const size_t b = (n + a) / 2;
    lc_bf16_unpack(buf + a, h + a, b - a);
    a = b;
  }
  for (; a < n; a++) buf[a] = lc_bf16_to_f32(h[a]); // in order: each read precedes its overwrite
}
