// Single-process attention: one call of the blockwise kernel over the whole sequence.
#include <math.h>
#include <string.h>

#include "attn/attn.h"
#include "core/dtype.h"
#include "attn/flash.h"
#include "ops/kernels.h"

// lse[Hq, T] (saved) and delta[Hq, T] (backward scratch) have the same size.
static size_t lse_bytes(int Hq, int T) { return lc_bytes(LC_DT_F32, (size_t)Hq * (size_t)T); }

static size_t local_saved_bytes(const lc_attn *a, int T) { return lse_bytes(a->Hq, T); }

// bf16: q, k, v, dout are 2 bytes, read in place; the forward writes out in 2 bytes.
static lc_attn_shape shape_of(int Hq, int Hkv, int D, int T, int bf16, int bwd) {
  lc_attn_shape s = {.Tq = T, .Tk = T, .Hq = Hq, .Hkv = Hkv, .D = D,
                     .q_start = 0, .k_start = 0, .causal = 1,
                     .scale = 1.0f / sqrtf((float)D), .bf16 = bf16, .q16 = bf16, .kv16 = bf16,
                     .out16 = bf16 && !bwd};
  return s;
}

static lc_attn_shape local_shape(const lc_attn *a, int T, int bwd) {
  return shape_of(a->Hq, a->Hkv, a->D, T, a->bf16, bwd);
}

void lc_attn_local_mem(int Hq, int Hkv, int D, int T, int threads, int bf16, lc_attn_mem *m) {
  lc_attn_shape sf = shape_of(Hq, Hkv, D, T, bf16, 0), sb = shape_of(Hq, Hkv, D, T, bf16, 1);
  memset(m, 0, sizeof *m);
  m->saved = lse_bytes(Hq, T);
  m->fwd_scratch = lc_flash_workspace_bytes(&sf, 0, threads);
  m->bwd_scratch = lse_bytes(Hq, T) + lc_flash_workspace_bytes(&sb, 1, threads);
}

static lc_status local_fwd(lc_attn *a, void *out, void *saved, const void *q, const void *k,
                           const void *v, int T, lc_arena *arena) {
  lc_attn_shape s = local_shape(a, T, 0);
  s.lo = a->lo; // one process: local token t is sequence position t
  return lc_flash_fwd(out, (float *)saved, q, k, v, &s, arena);
}

static lc_status local_bwd(lc_attn *a, float *dq, float *dk, float *dv, const void *dout,
                           const void *out, const void *saved, const void *q, const void *k,
                           const void *v, int T, lc_arena *arena) {
  lc_attn_shape s = local_shape(a, T, 1);
  s.lo = a->lo;
  float *delta = lc_alloc(arena, LC_MEM_SCRATCH, lse_bytes(a->Hq, T), "attention delta");
  if (!delta) return LC_ENOMEM;
  if (a->bf16) lc_attn_delta16(delta, dout, out, T, a->Hq, a->D);
  else lc_attn_delta(delta, dout, out, T, a->Hq, a->D);
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
