// Blockwise (flash) attention: the entry points dispatch to the kernel variant of the
// level in use (backend/cpu/kern/kernels.h); the kernel itself is backend/cpu/flash/flash_body.h, compiled once per
// variant (backend/cpu/flash/flash_v_*.c). The merge and delta below are shared by every variant.
#include "backend/cpu/flash/flash.h"
#include "backend/cpu/flash/flash_variants.h"
#include "backend/cpu/kern/kernels.h"
#include "core/dtype.h"

#include <math.h>
#include <string.h>

#define BK LC_FLASH_BK

static const lc_flash_variant *variant_of(const lc_attn_shape *s) {
  return lc_flash_variant_for(lc_kern()->level, s && s->bf16);
}

lc_status lc_flash_fwd(void *out, float *lse, const void *q, const void *k, const void *v,
                       const lc_attn_shape *s, lc_arena *arena) {
  return variant_of(s)->fwd(out, lse, q, k, v, s, arena);
}

lc_status lc_flash_bwd(float *dq, float *dk, float *dv, const void *dout, const void *q,
                       const void *k, const void *v, const float *lse, const float *delta,
                       const lc_attn_shape *s, lc_arena *arena) {
  return variant_of(s)->bwd(dq, dk, dv, dout, q, k, v, lse, delta, s, arena);
}

size_t lc_flash_workspace_bytes(const lc_attn_shape *s, int bwd, int threads) {
  return variant_of(s)->ws(s, bwd, threads);
}

size_t lc_flash_kv_bytes(const lc_attn_shape *s, int bwd) { return variant_of(s)->kv_bytes(s, bwd); }

void lc_flash_kv_pack(void *dst, const void *k, const void *v, const lc_attn_shape *s, int bwd) {
  variant_of(s)->kv_pack(dst, k, v, s, bwd);
}

const char *lc_flash_variant_name(const lc_attn_shape *s) { return variant_of(s)->name; }

// ---------------------------------------------------------------------------------
// Merge and delta
// ---------------------------------------------------------------------------------
void lc_attn_merge(float *out_a, float *lse_a, const float *out_b, const float *lse_b, int Tq,
                   int Hq, int D) {
  const long n = (long)Tq * Hq;
#pragma omp parallel for schedule(static) if (n * D > 32768)
  for (long r = 0; r < n; r++) {
    long t = r / Hq, h = r % Hq;
    float *oa = out_a + r * D;
    const float *ob = out_b + r * D;
    float la = lse_a[h * Tq + t], lb = lse_b[h * Tq + t];
    if (lb == -INFINITY) {
      if (la == -INFINITY) memset(oa, 0, sizeof(float) * (size_t)D); // no key in either
      continue;                                                      // nothing to add
    }
    if (la == -INFINITY) {
      lse_a[h * Tq + t] = lb;
      memcpy(oa, ob, sizeof(float) * (size_t)D);
      continue;
    }
    double mx = la > lb ? la : lb, mn = la > lb ? lb : la;
    double l = mx + log1p(exp(mn - mx));
    float wa = (float)exp((double)la - l), wb = (float)exp((double)lb - l);
    for (int d = 0; d < D; d++) oa[d] = wa * oa[d] + wb * ob[d];
    lse_a[h * Tq + t] = (float)l;
  }
}

// dout and out: fp32, or (is16) 2-byte bf16; the same sums either way.
static void delta_of(float *delta, const void *dout, const void *out, int is16, int Tq, int Hq, int D) {
  const long n = (long)Tq * Hq;
#pragma omp parallel for schedule(static) if (n * D > 32768)
  for (long r = 0; r < n; r++) {
    long t = r / Hq, h = r % Hq;
    float acc = 0.0f;
    for (int d = 0; d < D; d++)
      acc += lc_elem_f32(dout, is16, (size_t)(r * D + d)) * lc_elem_f32(out, is16, (size_t)(r * D + d));
    delta[h * Tq + t] = acc;
  }
}

void lc_attn_delta(float *delta, const float *dout, const float *out, int Tq, int Hq, int D) {
  delta_of(delta, dout, out, 0, Tq, Hq, D);
}

void lc_attn_delta16(float *delta, const uint16_t *dout, const uint16_t *out, int Tq, int Hq, int D) {
  delta_of(delta, dout, out, 1, Tq, Hq, D);
}

static long test_key_chunk; // lc_flash_test_set_key_chunk (0: automatic)

void lc_flash_test_set_key_chunk(long rows) { test_key_chunk = rows > 0 ? (rows + BK - 1) / BK * BK : 0; }

long lc_flash_bwd_key_chunk(const lc_attn_shape *s) {
  const long Dp = rup16(s->D);
  // key chunk: about 4 MiB of dK/dV buffers per thread, a multiple of BK
  long ck = test_key_chunk ? test_key_chunk : (4L << 20) / (long)(sizeof(float) * 2 * s->Hkv * Dp);
  ck = ck / BK * BK;
  if (ck < BK) ck = BK;
  long Tkr = ((long)s->Tk + BK - 1) / BK * BK;
  if (ck > Tkr) ck = Tkr;
  return ck;
}


const lc_flash_variant *lc_flash_variant_for(lc_kern_level level, int bf16) {
  static const lc_flash_variant v[] = {
      {"portable", lc_flash_fwd_portable, lc_flash_bwd_portable, lc_flash_ws_portable, lc_flash_kv_bytes_portable,
       lc_flash_kv_pack_portable},
      {"avx2", lc_flash_fwd_avx2, lc_flash_bwd_avx2, lc_flash_ws_avx2, lc_flash_kv_bytes_avx2,
       lc_flash_kv_pack_avx2},
      {"avx512", lc_flash_fwd_avx512, lc_flash_bwd_avx512, lc_flash_ws_avx512, lc_flash_kv_bytes_avx512,
       lc_flash_kv_pack_avx512},
      {"bf16", lc_flash_fwd_bf16, lc_flash_bwd_bf16, lc_flash_ws_bf16, lc_flash_kv_bytes_bf16,
       lc_flash_kv_pack_bf16},
      {"amx", lc_flash_fwd_amx, lc_flash_bwd_amx, lc_flash_ws_amx, lc_flash_kv_bytes_amx, lc_flash_kv_pack_amx},
  };
  if (level >= LC_KERN_AMX && bf16 && lc_flash_amx_ready()) return &v[4];
  if (level >= LC_KERN_BF16) return bf16 ? &v[3] : &v[2];
  return &v[level < 0 ? 0 : level];
}

const lc_flash_variant *lc_flash_variant_amx_emu(void) {
  static const lc_flash_variant e = {"amx-emulated", lc_flash_fwd_amx_emu, lc_flash_bwd_amx_emu, lc_flash_ws_amx_emu,
                                     lc_flash_kv_bytes_amx_emu, lc_flash_kv_pack_amx_emu};
  return &e;
}
