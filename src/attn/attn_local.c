// Single-process attention: one call of the blockwise kernel over the whole sequence.
#include <math.h>
#include <string.h>

#include "attn/attn.h"
#include "backend/backend.h"
#include "core/dtype.h"
#include "backend/scratch.h"
#include "backend/stage.h"

// lse[Hq, T] (saved) and delta[Hq, T] (backward scratch) have the same size.
static size_t lse_bytes(int Hq, int T) { return lc_bytes(LC_DT_F32, (size_t)Hq * (size_t)T); }

static size_t local_saved_bytes(const lc_attn *a, int T, int bf16) {
  (void)bf16;
  return lse_bytes(a->Hq, T);
}

// bf16: q, k, v, dout are 2 bytes, read in place; the forward writes out in 2 bytes.
static lc_attn_geom shape_of(int Hq, int Hkv, int D, int T, int bf16) {
  return (lc_attn_geom){.Tq = T, .Tk = T, .Hq = Hq, .Hkv = Hkv, .D = D, .q_start = 0, .k_start = 0, .causal = 1,
                        .scale = 1.0f / sqrtf((float)D), .bf16 = bf16};
}

static lc_attn_geom local_shape(const lc_attn *a, int T, int bf16) { return shape_of(a->Hq, a->Hkv, a->D, T, bf16); }

void lc_attn_local_mem(int Hq, int Hkv, int D, int T, int threads, int bf16, lc_attn_mem *m) {
  const lc_attn_geom g = shape_of(Hq, Hkv, D, T, bf16);
  memset(m, 0, sizeof *m);
  m->saved = lse_bytes(Hq, T);
  m->fwd_scratch = lc_mem_part_add(&m->fwd_parts, "flash attention workspace", LC_MEM_SCRATCH, lc_scratch_flash(&g, 0, bf16, threads));
  m->bwd_scratch = lc_mem_part_add(&m->bwd_parts, "attention delta", LC_MEM_SCRATCH, lse_bytes(Hq, T)) +
                   lc_mem_part_add(&m->bwd_parts, "flash attention workspace", LC_MEM_SCRATCH, lc_scratch_flash(&g, 1, 0, threads));
}

// The per-token first-key bounds as a buffer (*lo; empty: plain causal): the caller's lo_buf,
// or lo staged for the call (backend/stage.h: read in place where the memory is the host's).
static lc_status lo_of(const lc_attn *a, const lc_attn_in *in, int T, lc_buf *lo) {
  *lo = in->lo_buf;
  if (lc_buf_ok(in->lo_buf) || !in->lo) return LC_OK;
  return lc_buf_stage_in(a->be, in->lo, (size_t)T, LC_DT_I32, LC_MEM_SCRATCH, "attention key bounds", LC_SYNC_INPUT, lo);
}
// Releases what lo_of staged (not the caller's buffer).
static void lo_done(const lc_attn_in *in, lc_buf *lo) {
  if (!lc_buf_ok(in->lo_buf)) lc_buf_stage_release(lo);
}

static lc_status local_fwd(lc_attn *a, const lc_attn_in *in, lc_buf out, lc_buf saved, lc_buf q, lc_buf k, lc_buf v, int T) {
  const lc_attn_geom s = local_shape(a, T, in->bf16);
  // one process: local token t is sequence position t
  lc_buf lo;
  LC_TRY(lo_of(a, in, T, &lo));
  const lc_status st = lc_be_flash_fwd(out, lc_buf_part(saved, 0, (size_t)a->Hq * T, LC_DT_F32), q, k, v, lo, &s);
  lo_done(in, &lo);
  return st;
}

static lc_status local_bwd(lc_attn *a, const lc_attn_in *in, lc_buf dq, lc_buf dk, lc_buf dv, lc_buf dout, lc_buf out, lc_buf saved, lc_buf q,
                           lc_buf k, lc_buf v, int T) {
  const lc_attn_geom s = local_shape(a, T, in->bf16);
  const size_t nl = (size_t)a->Hq * T;
  lc_buf delta, lo;
  LC_TRY(lc_buf_alloc(a->be, LC_MEM_SCRATCH, LC_DT_F32, nl, 0, "attention delta", &delta));
  lc_status st = lo_of(a, in, T, &lo);
  if (st == LC_OK) st = lc_be_attn_delta(delta, dout, out, T, a->Hq, a->D);
  if (st == LC_OK) st = lc_be_zero(dq);
  if (st == LC_OK) st = lc_be_zero(dk);
  if (st == LC_OK) st = lc_be_zero(dv);
  if (st == LC_OK) st = lc_be_flash_bwd(dq, dk, dv, dout, q, k, v, lc_buf_part(saved, 0, nl, LC_DT_F32), delta, lo, &s);
  lo_done(in, &lo);
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
