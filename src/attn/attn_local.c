// Single-process attention: one call of the blockwise kernel over the whole sequence.
#include <math.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/flash.h"

static size_t local_saved_bytes(const lc_attn *a, int T) {
  return sizeof(float) * (size_t)a->Hq * (size_t)T; // lse[Hq, T]
}

static lc_attn_shape local_shape(const lc_attn *a, int T) {
  lc_attn_shape s = {.Tq = T, .Tk = T, .Hq = a->Hq, .Hkv = a->Hkv, .D = a->D,
                     .q_start = 0, .k_start = 0, .causal = 1,
                     .scale = 1.0f / sqrtf((float)a->D)};
  return s;
}

static lc_status local_fwd(lc_attn *a, float *out, void *saved, const float *q, const float *k,
                           const float *v, int T, lc_arena *arena) {
  lc_attn_shape s = local_shape(a, T);
  return lc_flash_fwd(out, (float *)saved, q, k, v, &s, arena);
}

static lc_status local_bwd(lc_attn *a, float *dq, float *dk, float *dv, const float *dout,
                           const float *out, const void *saved, const float *q, const float *k,
                           const float *v, int T, lc_arena *arena) {
  lc_attn_shape s = local_shape(a, T);
  float *delta = lc_alloc(arena, LC_MEM_SCRATCH, sizeof(float) * (size_t)a->Hq * T, "attention delta");
  if (!delta) return LC_ENOMEM;
  lc_attn_delta(delta, dout, out, T, a->Hq, a->D);
  memset(dq, 0, sizeof(float) * (size_t)T * a->Hq * a->D);
  memset(dk, 0, sizeof(float) * (size_t)T * a->Hkv * a->D);
  memset(dv, 0, sizeof(float) * (size_t)T * a->Hkv * a->D);
  lc_status st = lc_flash_bwd(dq, dk, dv, dout, q, k, v, (const float *)saved, delta, &s, arena);
  lc_free(arena, delta);
  return st;
}

void lc_attn_local_init(lc_attn *a, int Hq, int Hkv, int D) {
  memset(a, 0, sizeof *a);
  a->name = "local";
  a->Hq = Hq;
  a->Hkv = Hkv;
  a->D = D;
  a->saved_bytes = local_saved_bytes;
  a->fwd = local_fwd;
  a->bwd = local_bwd;
}
