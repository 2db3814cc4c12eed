// Single-process attention: one call of the blockwise kernel over the whole sequence.
#include <math.h>
#include <string.h>

#include "attn/attn.h"
#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
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

// The backend the kernels run on: the caller's (attn.h: a->be), or a CPU backend over the
// call's arena (its workspace counted there, as before the backend existed). Host arrays
// come in as wrapped handles (transitional: the layer does not hold buffers yet).
static lc_backend *backend_of(lc_attn *a, lc_arena *arena, lc_backend *cpu) {
  if (a->be) return a->be;
  lc_backend_cpu_init(cpu, arena);
  return cpu;
}

static lc_status local_fwd(lc_attn *a, void *out, void *saved, const void *q, const void *k,
                           const void *v, int T, lc_arena *arena) {
  lc_backend cpu, *be = backend_of(a, arena, &cpu);
  const lc_attn_shape s = local_shape(a, T, 0);
  const lc_dtype dt = a->bf16 ? LC_DT_BF16 : LC_DT_F32;
  const size_t nq = (size_t)T * a->Hq * a->D, nk = (size_t)T * a->Hkv * a->D;
  // one process: local token t is sequence position t
  const lc_buf lo = a->lo ? lc_buf_wrap_host(be, a->lo, (size_t)T, LC_DT_I32) : (lc_buf){0};
  return lc_be_flash_fwd(lc_buf_wrap_host(be, out, nq, dt), lc_buf_wrap_host(be, saved, (size_t)a->Hq * T, LC_DT_F32),
                         lc_buf_wrap_host(be, q, nq, dt), lc_buf_wrap_host(be, k, nk, dt), lc_buf_wrap_host(be, v, nk, dt),
                         lo, &s);
}

static lc_status local_bwd(lc_attn *a, float *dq, float *dk, float *dv, const void *dout,
                           const void *out, const void *saved, const void *q, const void *k,
                           const void *v, int T, lc_arena *arena) {
  lc_backend cpu, *be = backend_of(a, arena, &cpu);
  const lc_attn_shape s = local_shape(a, T, 1);
  const lc_dtype dt = a->bf16 ? LC_DT_BF16 : LC_DT_F32;
  const size_t nq = (size_t)T * a->Hq * a->D, nk = (size_t)T * a->Hkv * a->D, nl = (size_t)a->Hq * T;
  const lc_buf lo = a->lo ? lc_buf_wrap_host(be, a->lo, (size_t)T, LC_DT_I32) : (lc_buf){0};
  const lc_buf bdq = lc_buf_wrap_host(be, dq, nq, LC_DT_F32), bdk = lc_buf_wrap_host(be, dk, nk, LC_DT_F32),
               bdv = lc_buf_wrap_host(be, dv, nk, LC_DT_F32), bdout = lc_buf_wrap_host(be, dout, nq, dt);
  lc_buf delta;
  LC_TRY(lc_buf_alloc(be, LC_MEM_SCRATCH, LC_DT_F32, nl, 0, "attention delta", &delta));
  lc_status st = lc_be_attn_delta(delta, bdout, lc_buf_wrap_host(be, out, nq, dt), T, a->Hq, a->D);
  if (st == LC_OK) st = lc_be_zero(bdq);
  if (st == LC_OK) st = lc_be_zero(bdk);
  if (st == LC_OK) st = lc_be_zero(bdv);
  if (st == LC_OK)
    st = lc_be_flash_bwd(bdq, bdk, bdv, bdout, lc_buf_wrap_host(be, q, nq, dt), lc_buf_wrap_host(be, k, nk, dt),
                         lc_buf_wrap_host(be, v, nk, dt), lc_buf_wrap_host(be, saved, nl, LC_DT_F32), delta, lo, &s);
  lc_buf_free(&delta);
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
