// Decoding with a KV cache, behind the attention interface: the layer forward of training
// (model/layer.c) runs unchanged at generation time with this strategy. The T new tokens
// sit at positions p0 .. p0+T-1; their keys/values (after RoPE) are appended to the
// cache rows [p0, p0+T) and every new query attends to rows [0, its position], from its
// bound in the inputs' lo_buf on when the caller set one (the sliding window). Everything runs on
// the backend (a->be): the new rows copied into the cache, one flash call over it.
#include <math.h>
#include <string.h>

#include "attn/attn.h"
#include "backend/scratch.h"
#include "backend/backend.h"
#include "core/dtype.h"

static size_t decode_saved_bytes(const lc_attn *a, int T, int bf16) {
  (void)bf16;
  return lc_bytes(LC_DT_F32, (size_t)a->Hq * (size_t)T);
}

// q[T,Hq,D], k/v[T,Hkv,D] of the new tokens -> out[T,Hq,D]; saved = lse[Hq,T]. bf16: q, k,
// v, out in 2 bytes (attn.h); the cache holds fp32 (the new rows widened: exact).
static lc_status decode_fwd(lc_attn *a, const lc_attn_in *in, lc_buf out, lc_buf saved, lc_buf q, lc_buf k, lc_buf v, int T) {
  lc_attn_decode_state *d = a->ctx;
  if (!lc_buf_ok(d->k) || !lc_buf_ok(d->v) || d->p0 < 0 || T < 1 || d->p0 + T > d->max_len)
    return lc_fail(LC_EINVAL, "decode attention: %d new tokens at position %d do not fit a cache of %d", T, d->p0,
                   d->max_len);
  const size_t kv = (size_t)a->Hkv * a->D, at = (size_t)d->p0 * kv, nk = (size_t)T * kv;
  const lc_buf kn = lc_buf_view(d->k, at, nk), vn = lc_buf_view(d->v, at, nk);
  if (in->bf16) {
    LC_TRY(lc_be_bf16_unpack(kn, k));
    LC_TRY(lc_be_bf16_unpack(vn, v));
  } else {
    LC_TRY(lc_be_copy(kn, k, LC_STREAM_COMPUTE));
    LC_TRY(lc_be_copy(vn, v, LC_STREAM_COMPUTE));
  }
  const lc_attn_geom s = {.Tq = T, .Tk = d->p0 + T, .Hq = a->Hq, .Hkv = a->Hkv, .D = a->D, .q_start = d->p0,
                           .k_start = 0, .causal = 1, .scale = 1.0f / sqrtf((float)a->D), .bf16 = in->bf16};
  const size_t nall = (size_t)(d->p0 + T) * kv;
  return lc_be_flash_fwd(out, lc_buf_part(saved, 0, (size_t)a->Hq * T, LC_DT_F32), q, lc_buf_view(d->k, 0, nall),
                         lc_buf_view(d->v, 0, nall), in->lo_buf, &s);
}

static lc_status decode_bwd(lc_attn *a, const lc_attn_in *in, lc_buf dq, lc_buf dk, lc_buf dv, lc_buf dout, lc_buf out, lc_buf saved,
                            lc_buf q, lc_buf k, lc_buf v, int T) {
  (void)a, (void)in, (void)dq, (void)dk, (void)dv, (void)dout, (void)out, (void)saved, (void)q, (void)k, (void)v, (void)T;
  return lc_fail(LC_EINVAL, "decode attention has no backward: train with the local or 2D strategy");
}

void lc_attn_decode_init(lc_attn *a, int Hq, int Hkv, int D, lc_attn_decode_state *d) {
  memset(a, 0, sizeof *a);
  a->name = "decode";
  a->Hq = Hq;
  a->Hkv = Hkv;
  a->D = D;
  a->saved_bytes = decode_saved_bytes;
  a->fwd = decode_fwd;
  a->bwd = decode_bwd;
  a->ctx = d;
}
