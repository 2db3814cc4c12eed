// The GPU flash attention's reference tier: one thread per (row, head), everything from global
// memory; any D up to FL_REF_MAXD (lcc_flash_*_ref, and lcc_flash_* where D > 128).
#include "backend/cuda/cuda_flash_common.cuh"

namespace {

__device__ __forceinline__ bool fl_visible(const fl_p &p, long i, long j) {
  const long kp = p.k_start + j;
  if (p.causal && kp > p.q_start + i) return false;
  if (p.lo && kp < (long)p.lo[i]) return false;
  return true;
}

// Score of (query row at qo, key row at ko) in base 2.
__device__ __forceinline__ float fl_score_g(const fl_p &p, const void *q, size_t qo, const void *k, size_t ko) {
  if (!p.bf16) return fl_dot_g(p, k, ko, q, qo, p.sl2);
  return __fmul_rn(fl_dot_g(p, k, ko, q, qo, 1.0f), p.sl2);
}

// =====================================================================================
// Reference kernels: one thread per row, everything from global memory.
// =====================================================================================
template <int DM>
__global__ void __launch_bounds__(128) ref_fwd_kernel(fl_p p, void *out, float *lse, const void *q,
                                                      const void *k, const void *v) {
  const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  const int h = blockIdx.y;
  if (i >= p.Tq) return;
  const int g = h / p.grp, D = p.D;
  const size_t qo = ((size_t)i * p.Hq + h) * D;
  long beg, end;
  fl_row_range(p, i, &beg, &end);
  float o[DM], sc[FL_BK];
  for (int d = 0; d < D; d++) o[d] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (long j0 = end > beg ? beg / FL_BK * FL_BK : end; j0 < end; j0 += FL_BK) {
    float mx = -INFINITY;
    for (int r = 0; r < FL_BK; r++) {
      const long j = j0 + r;
      float s = -INFINITY;
      if (j >= beg && j < end) s = fl_score_g(p, q, qo, k, ((size_t)j * p.Hkv + g) * D);
      sc[r] = s;
      mx = s > mx ? s : mx;
    }
    float mnew = mx > m ? mx : m;
    if (p.bf16) mnew = ceilf(mnew);
    const float mref = mnew == -INFINITY ? 0.0f : mnew;
    const float al = fl_exp2(__fsub_rn(m, mref));
    float s0 = 0.0f, s1 = 0.0f;
    for (int r = 0; r < FL_BK; r++) {
      const float pr = fl_exp2(__fsub_rn(sc[r], mref));
      sc[r] = pr;
      if (r & 1)
        s1 = __fadd_rn(s1, pr);
      else
        s0 = __fadd_rn(s0, pr);
    }
    l = __fmaf_rn(l, al, __fadd_rn(s0, s1));
    m = mnew;
    for (int d = 0; d < D; d++) o[d] = __fmul_rn(o[d], al);
    for (int r2 = 0; r2 < FL_BK; r2 += 2)
      for (int e = 1; e >= 0; e--) {
        const int r = p.bf16 ? r2 + e : r2 + 1 - e; // bf16: odd key first; fp32: in order
        const long j = j0 + r;
        if (j < beg || j >= end) continue;
        const float pr = p.bf16 ? fl_round_daz(sc[r]) : sc[r];
        const size_t vo = ((size_t)j * p.Hkv + g) * D;
        for (int d = 0; d < D; d++) o[d] = __fmaf_rn(fl_ld(v, p.kv16, vo + d, p.bf16), pr, o[d]);
      }
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  lse[(size_t)h * p.Tq + i] = l > 0.0f ? (float)(((double)m + log2((double)l)) * FL_LN2) : -INFINITY;
  for (int d = 0; d < D; d++) fl_store_out(out, p.out16, qo + d, __fmul_rn(o[d], inv));
}

// dS and P of (query row i of head h, key row j), in the CPU's arithmetic (unrounded).
__device__ __forceinline__ void fl_ref_pds(const fl_p &p, const void *dout, const void *q, const void *k,
                                           const void *v, size_t qo, size_t ko, float lse2, float dlt, float *P,
                                           float *dS) {
  const float s = fl_score_g(p, q, qo, k, ko);
  const float pr = fl_exp2(__fsub_rn(s, lse2));
  const float dp = fl_dot_g(p, v, ko, dout, qo, 1.0f);
  *P = pr;
  *dS = __fmul_rn(__fmul_rn(pr, p.scale), __fsub_rn(dp, dlt));
}

template <int DM>
__global__ void __launch_bounds__(128) ref_bwd_dq_kernel(fl_p p, float *dq, const void *dout, const void *q,
                                                         const void *k, const void *v, const float *lse,
                                                         const float *delta) {
  const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  const int h = blockIdx.y;
  if (i >= p.Tq) return;
  const int g = h / p.grp, D = p.D;
  const size_t qo = ((size_t)i * p.Hq + h) * D;
  long beg, end;
  fl_row_range(p, i, &beg, &end);
  const float L = lse[(size_t)h * p.Tq + i];
  if (end <= beg || L == -INFINITY) return; // P = 0 everywhere: nothing to add
  const float lse2 = fl_lse2(L), dlt = delta[(size_t)h * p.Tq + i];
  float acc[DM];
  for (int d = 0; d < D; d++) acc[d] = 0.0f;
  for (long j2 = beg & ~1L; j2 < end; j2 += 2)
    for (int e = 1; e >= 0; e--) {
      const long j = p.bf16 ? j2 + e : j2 + 1 - e; // bf16: pairs of keys, odd first
      if (j < beg || j >= end) continue;
      const size_t ko = ((size_t)j * p.Hkv + g) * D;
      float P, dS;
      fl_ref_pds(p, dout, q, k, v, qo, ko, lse2, dlt, &P, &dS);
      if (p.bf16) dS = fl_round_daz(dS);
      for (int d = 0; d < D; d++) acc[d] = __fmaf_rn(fl_ld(k, p.kv16, ko + d, p.bf16), dS, acc[d]);
    }
  for (int d = 0; d < D; d++) dq[qo + d] = __fadd_rn(dq[qo + d], acc[d]);
}

template <int DM>
__global__ void __launch_bounds__(128) ref_bwd_dkv_kernel(fl_p p, float *dk, float *dv, const void *dout,
                                                          const void *q, const void *k, const void *v,
                                                          const float *lse, const float *delta) {
  const long j = (long)blockIdx.x * blockDim.x + threadIdx.x;
  const int g = blockIdx.y;
  if (j >= p.Tk) return;
  const int D = p.D;
  const size_t ko = ((size_t)j * p.Hkv + g) * D;
  float ak[DM], av[DM];
  for (int d = 0; d < D; d++) ak[d] = av[d] = 0.0f;
  const int nqb = (p.Tq + FL_BQ - 1) / FL_BQ;
  for (int ib = nqb - 1; ib >= 0; ib--) // the CPU's order: last query block first,
    for (int hh = 0; hh < p.grp; hh++) { // the group's heads in order inside a block
      const int h = g * p.grp + hh;
      const long i0 = (long)ib * FL_BQ;
      for (long i2 = i0; i2 < i0 + FL_BQ && i2 < p.Tq; i2 += 2)
        for (int e = 1; e >= 0; e--) {
          const long i = p.bf16 ? i2 + e : i2 + 1 - e; // bf16: pairs of queries, odd first
          if (i >= p.Tq || !fl_visible(p, i, j)) continue;
          const float L = lse[(size_t)h * p.Tq + i];
          if (L == -INFINITY) continue;
          const size_t qo = ((size_t)i * p.Hq + h) * D;
          float P, dS;
          fl_ref_pds(p, dout, q, k, v, qo, ko, fl_lse2(L), delta[(size_t)h * p.Tq + i], &P, &dS);
          if (p.bf16) P = fl_round_daz(P), dS = fl_round_daz(dS);
          for (int d = 0; d < D; d++) {
            av[d] = __fmaf_rn(P, fl_ld(dout, p.q16, qo + d, p.bf16), av[d]);
            ak[d] = __fmaf_rn(dS, fl_ld(q, p.q16, qo + d, p.bf16), ak[d]);
          }
        }
    }
  for (int d = 0; d < D; d++) {
    dk[ko + d] = __fadd_rn(dk[ko + d], ak[d]);
    dv[ko + d] = __fadd_rn(dv[ko + d], av[d]);
  }
}

} // namespace

int fl_ref_fwd(void *out, float *lse, const void *q, const void *k, const void *v, const fl_p &p, cudaStream_t st) {
  const dim3 grid((unsigned)((p.Tq + 127) / 128), (unsigned)p.Hq);
  if (p.D <= 64)
    LCC_LAUNCH(ref_fwd_kernel<64>, grid, 128, 0, st)(p, out, lse, q, k, v);
  else if (p.D <= 128)
    LCC_LAUNCH(ref_fwd_kernel<128>, grid, 128, 0, st)(p, out, lse, q, k, v);
  else
    LCC_LAUNCH(ref_fwd_kernel<FL_REF_MAXD>, grid, 128, 0, st)(p, out, lse, q, k, v);
  return (int)cudaGetLastError();
}

int fl_ref_bwd(float *dq, float *dk, float *dv, const void *dout, const void *q, const void *k, const void *v,
               const float *lse, const float *delta, const fl_p &p, cudaStream_t st) {
  const dim3 gq((unsigned)((p.Tq + 127) / 128), (unsigned)p.Hq), gk((unsigned)((p.Tk + 127) / 128), (unsigned)p.Hkv);
  if (p.D <= 64) {
    LCC_LAUNCH(ref_bwd_dq_kernel<64>, gq, 128, 0, st)(p, dq, dout, q, k, v, lse, delta);
    LCC_LAUNCH(ref_bwd_dkv_kernel<64>, gk, 128, 0, st)(p, dk, dv, dout, q, k, v, lse, delta);
  } else if (p.D <= 128) {
    LCC_LAUNCH(ref_bwd_dq_kernel<128>, gq, 128, 0, st)(p, dq, dout, q, k, v, lse, delta);
    LCC_LAUNCH(ref_bwd_dkv_kernel<128>, gk, 128, 0, st)(p, dk, dv, dout, q, k, v, lse, delta);
  } else {
    LCC_LAUNCH(ref_bwd_dq_kernel<FL_REF_MAXD>, gq, 128, 0, st)(p, dq, dout, q, k, v, lse, delta);
    LCC_LAUNCH(ref_bwd_dkv_kernel<FL_REF_MAXD>, gk, 128, 0, st)(p, dk, dv, dout, q, k, v, lse, delta);
  }
  return (int)cudaGetLastError();
}
