// Flash attention on the GPU (cuda_kern.h: lcc_flash_*): the entry points, which check the
// shape and pick a tier (below). Every tier does the same arithmetic as the CPU kernel
// (backend/cpu/flash/flash_body.h with the AVX-512 primitives, flash_prims_avx512.h, and for
// bf16 = 1 the bf16 variant, flash_bf16.h):
//  - scores in base 2: fp32: s = sum_d k[d] * (q[d] * sl2) (q pre-scaled, one FMA chain in
//    d order); bf16: s = (sum over d pairs, odd element then even, of k * q) * sl2, where
//    sl2 = (float)(scale * log2 e);
//  - the online softmax runs over key tiles of 64 aligned at multiples of 64 (as the CPU's
//    tiles), with the CPU's exp2 polynomial (bit for bit), the tile sum as two partial sums
//    (even / odd keys) and l = fma(l, alpha, s0 + s1); bf16: the running max is rounded up
//    to an integer (as the bf16 CPU kernel does) and P is rounded to bf16 before P.V;
//  - out = O * (1 / l), lse = (float)((m + log2 l) * ln 2) in double;
//  - backward: P = exp2(s - lse * log2 e), dS = (P * scale) * (dP - delta) (bf16: P and dS
//    rounded to bf16 before their products), dq += K^T dS, dk += dS^T q (q unscaled),
//    dv += P^T dO; every product sum is one FMA chain in the CPU's order (bf16: pairs, odd
//    element first, as vdpbf16ps). dk/dv of one key row sum over query blocks from the last
//    to the first, the group's q heads in order inside a block (the CPU's single-thread order).
// Three tiers:
//  - reference kernels (lcc_flash_*_ref): one thread per (row, head), all from global memory;
//  - tiled SIMT kernels (fp32 FMA, 64-row CTAs of 256 threads, tiles in shared memory): every
//    case of lcc_flash_fwd / _bwd except bf16 with D = 64 or 128; D <= 128 (larger D runs the
//    reference kernels). They give the same bits as the reference kernels, and both give the
//    bits of the CPU run with one thread (the CPU's dk/dv are summed over per-thread buffers,
//    and its dq per key chunk, so other thread counts or chunkings differ in the last bits);
//  - tensor-core kernels (bf16 = 1, D = 64 or 128; mma.sync m16n8k16 bf16, fp32 accumulate):
//    the same rounding points, but the products' sums in the mma's order, and the softmax row
//    sums in a different (fixed) order: close to, not bitwise equal to, the other tiers.
// No atomics anywhere (every sum in a fixed order: two runs give the same bits); no workspace.
// The tiers live in cuda_flash_ref.cu, cuda_flash_simt.cu and cuda_flash_mma.cu; what they share
// in cuda_flash_common.cuh.
#include "backend/cuda/cuda_kern.h"

#include "backend/cuda/cuda_flash_common.cuh"

namespace {

int fl_params(const lcc_attn *s, fl_p *p) {
  if (!s || s->Tq < 0 || s->Tk < 0 || s->Hq < 1 || s->Hkv < 1 || s->D < 1 || s->Hq % s->Hkv != 0 || s->Hq > 65535 ||
      s->Hkv > 65535)
    return (int)cudaErrorInvalidValue;
  p->Tq = s->Tq, p->Tk = s->Tk, p->Hq = s->Hq, p->Hkv = s->Hkv, p->D = s->D, p->grp = s->Hq / s->Hkv;
  p->q_start = s->q_start, p->k_start = s->k_start, p->causal = s->causal;
  p->scale = s->scale;
  p->sl2 = (float)((double)s->scale * FL_LOG2E);
  p->lo = s->lo;
  p->bf16 = s->bf16, p->q16 = s->q16, p->kv16 = s->kv16, p->out16 = s->out16;
  return 0;
}

} // namespace

extern "C" {

size_t lcc_flash_workspace_bytes(const lcc_attn *s, int bwd) {
  (void)s, (void)bwd;
  return 0;
}

int lcc_flash_fwd_ref(void *out, float *lse, const void *q, const void *k, const void *v, const lcc_attn *s,
                      cudaStream_t st) {
  fl_p p;
  int e = fl_params(s, &p);
  if (e) return e;
  if (p.D > FL_REF_MAXD) return (int)cudaErrorInvalidValue;
  if (p.Tq == 0) return (int)cudaGetLastError();
  return fl_ref_fwd(out, lse, q, k, v, p, st);
}

int lcc_flash_bwd_ref(float *dq, float *dk, float *dv, const void *dout, const void *q, const void *k, const void *v,
                      const float *lse, const float *delta, const lcc_attn *s, cudaStream_t st) {
  fl_p p;
  int e = fl_params(s, &p);
  if (e) return e;
  if (p.D > FL_REF_MAXD) return (int)cudaErrorInvalidValue;
  if (p.Tq == 0 || p.Tk == 0) return (int)cudaGetLastError();
  return fl_ref_bwd(dq, dk, dv, dout, q, k, v, lse, delta, p, st);
}

int lcc_flash_fwd(void *out, float *lse, const void *q, const void *k, const void *v, const lcc_attn *s, void *ws,
                  cudaStream_t st) {
  (void)ws;
  fl_p p;
  int e = fl_params(s, &p);
  if (e) return e;
  if (p.Tq == 0) return (int)cudaGetLastError();
  if (p.bf16 && p.D == 64) return fl_mma_fwd<64>(out, lse, q, k, v, p, st);
  if (p.bf16 && p.D == 128) return fl_mma_fwd<128>(out, lse, q, k, v, p, st);
  if (p.D <= 32) return fl_simt_fwd<32>(out, lse, q, k, v, p, st);
  if (p.D <= 64) return fl_simt_fwd<64>(out, lse, q, k, v, p, st);
  if (p.D <= 128) return fl_simt_fwd<128>(out, lse, q, k, v, p, st);
  if (p.D > FL_REF_MAXD) return (int)cudaErrorInvalidValue;
  return fl_ref_fwd(out, lse, q, k, v, p, st);
}

int lcc_flash_bwd(float *dq, float *dk, float *dv, const void *dout, const void *q, const void *k, const void *v,
                  const float *lse, const float *delta, const lcc_attn *s, void *ws, cudaStream_t st) {
  (void)ws;
  fl_p p;
  int e = fl_params(s, &p);
  if (e) return e;
  if (p.Tq == 0 || p.Tk == 0) return (int)cudaGetLastError();
  if (p.bf16 && p.D == 64) return fl_mma_bwd<64>(dq, dk, dv, dout, q, k, v, lse, delta, p, st);
  if (p.bf16 && p.D == 128) return fl_mma_bwd<128>(dq, dk, dv, dout, q, k, v, lse, delta, p, st);
  if (p.D <= 32) return fl_simt_bwd<32>(dq, dk, dv, dout, q, k, v, lse, delta, p, st);
  if (p.D <= 64) return fl_simt_bwd<64>(dq, dk, dv, dout, q, k, v, lse, delta, p, st);
  if (p.D <= 128) return fl_simt_bwd<128>(dq, dk, dv, dout, q, k, v, lse, delta, p, st);
  if (p.D > FL_REF_MAXD) return (int)cudaErrorInvalidValue;
  return fl_ref_bwd(dq, dk, dv, dout, q, k, v, lse, delta, p, st);
}

} // extern "C"
