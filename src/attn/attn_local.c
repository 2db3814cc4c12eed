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

static lc_attn_shape shape_of(int Hq, int Hkv, int D, int T, int bf16) {
  lc_attn_shape s = {.Tq = T, .Tk = T, .Hq = Hq, .Hkv = Hkv, .D = D,
                     .q_start = 0, .k_start = 0, .causal = 1,
                     .scale = 1.0f / sqrtf((float)D), .bf16 = bf16};
  return s;
}

static lc_attn_shape local_shape(const lc_attn *a, int T) { return shape_of(a->Hq, a->Hkv, a->D, T, a->bf16); }

void lc_attn_local_mem(int Hq, int Hkv, int D, int T, int threads, int bf16, lc_attn_mem *m) {
  lc_attn_shape s = shape_of(Hq, Hkv, D, T, bf16);
  memset(m, 0, sizeof *m);
  m->saved = lse_bytes(Hq, T);
  m->fwd_scratch = lc_flash_workspace_bytes(&s, 0, threads);
  m->bwd_scratch = lse_bytes(Hq, T) + lc_flash_workspace_bytes(&s, 1, threads);
}

void lc_attn_round_out(const lc_attn *a, float *out, int T) {
  if (a->bf16) lc_bf16_round(out, (size_t)T * a->Hq * a->D);
}

static lc_status local_fwd(lc_attn *a, float *out, void *saved, const float *q, const float *k,
                           const float *v, int T, lc_arena *arena) {
  lc_attn_shape s = local_shape(a, T);
  s.lo = a->lo; // one process: local token t is sequence position t
  LC_TRY(lc_flash_fwd(out, (float *)saved, q, k, v, &s, arena));
  lc_attn_round_out(a, out, T);
  return LC_OK;
}

static lc_status local_bwd(lc_attn *a, float *dq, float *dk, float *dv, const float *dout,
                           const float *out, const void *saved, const float *q, const float *k,
                           const float *v, int T, lc_arena *arena) {
  lc_attn_shape s = local_shape(a, T);
  s.lo = a->lo;
  float *delta = lc_alloc(arena, LC_MEM_SCRATCH, lse_bytes(a->Hq, T), "attention delta");
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
