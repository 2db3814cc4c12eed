// Flash attention on the GPU (cuda_kern.h: lcc_flash_*), the same arithmetic as the CPU
// kernel (attn/flash_body.h with the AVX-512 primitives, attn/flash_prims_avx512.h, and for
// bf16 = 1 the bf16 variant, attn/flash_bf16.h):
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
#include "backend/cuda/cuda_kern.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

namespace {

#define FL_LOG2E 1.4426950408889634
#define FL_LN2 0.6931471805599453
#define FL_BQ 64 // query rows per block (the CPU's LC_FLASH_BQ)
#define FL_BK 64 // keys per tile (the CPU's LC_FLASH_BK)
#define FL_THREADS 256

struct fl_p {
  int Tq, Tk, Hq, Hkv, D, grp;
  long q_start, k_start;
  int causal;
  float scale, sl2;
  const int *lo;
  int bf16, q16, kv16, out16;
};

// ---- scalar helpers (bit-exact with the CPU) ----

// attn/flash_prims.h exp2: degree-6 polynomial, x < -126 (and NaN) -> 0.
__device__ __forceinline__ float fl_exp2(float x) {
  const float magic = 12582912.0f;
  const float t = __fadd_rn(x, magic);
  const float f = __fsub_rn(x, __fsub_rn(t, magic));
  float p = 1.537070493e-04f;
  p = __fmaf_rn(p, f, 1.339984825e-03f);
  p = __fmaf_rn(p, f, 9.618373588e-03f);
  p = __fmaf_rn(p, f, 5.550329015e-02f);
  p = __fmaf_rn(p, f, 2.402264774e-01f);
  p = __fmaf_rn(p, f, 6.931471825e-01f);
  p = __fmaf_rn(p, f, 1.0f);
  const uint32_t r = __float_as_uint(p) + (__float_as_uint(t) << 23);
  return x >= -126.0f ? __uint_as_float(r) : 0.0f;
}

// lc_bf16_narrow_bits: round to nearest even, NaN kept quiet.
__device__ __forceinline__ uint32_t fl_narrow_bits(uint32_t u) {
  const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  const uint32_t nan = ((u & 0x7fffffffu) > 0x7f800000u) ? 0xffffffffu : 0u;
  return (nan & ((u & 0xffff0000u) | 0x00400000u)) | (~nan & r);
}
__device__ __forceinline__ float fl_round(float x) { return __uint_as_float(fl_narrow_bits(__float_as_uint(x))); }
// The CPU rounds P and dS with vcvtne2ps2bf16, which treats subnormal inputs as zero.
__device__ __forceinline__ float fl_round_daz(float x) {
  uint32_t u = __float_as_uint(x);
  if ((u & 0x7f800000u) == 0u) u &= 0x80000000u;
  return __uint_as_float(fl_narrow_bits(u));
}
__device__ __forceinline__ uint16_t fl_narrow(float x) { return (uint16_t)(fl_narrow_bits(__float_as_uint(x)) >> 16); }

// Element i of an input: fp32 or bf16 bits (is16), widened exactly; bf16 products (rnd) round
// fp32 storage to bf16 as the CPU packs it (a no-op on bf16 values).
__device__ __forceinline__ float fl_ld(const void *x, int is16, size_t i, int rnd) {
  if (is16) return __uint_as_float((uint32_t)((const uint16_t *)x)[i] << 16);
  const float v = ((const float *)x)[i];
  return rnd ? fl_round(v) : v;
}

__device__ __forceinline__ long fl_clampk(long x, long Tk) { return x < 0 ? 0 : x > Tk ? Tk : x; }

// Keys [*beg, *end) (indices into k) visible to query row i.
__device__ __forceinline__ void fl_row_range(const fl_p &p, long i, long *beg, long *end) {
  long e = p.Tk, b = 0;
  if (p.causal) e = fl_clampk(p.q_start + i - p.k_start + 1, p.Tk);
  if (p.lo) b = fl_clampk((long)p.lo[i] - p.k_start, p.Tk);
  *beg = b;
  *end = e;
}

__device__ __forceinline__ bool fl_visible(const fl_p &p, long i, long j) {
  const long kp = p.k_start + j;
  if (p.causal && kp > p.q_start + i) return false;
  if (p.lo && kp < (long)p.lo[i]) return false;
  return true;
}

__device__ __forceinline__ float fl_lse2(float L) { return L == -INFINITY ? INFINITY : (float)((double)L * FL_LOG2E); }

__device__ __forceinline__ void fl_store_out(void *out, int out16, size_t idx, float x) {
  if (out16)
    ((uint16_t *)out)[idx] = fl_narrow(x);
  else
    ((float *)out)[idx] = x;
}

// Dot product of two global rows a (k or v: kv16) and b (q or dout: q16), D elements, in the
// CPU's order: fp32: fma chain in d order with b[d] * bscale (bscale 1: exact); bf16: pairs,
// odd element first.
__device__ __forceinline__ float fl_dot_g(const fl_p &p, const void *a, size_t ao, const void *b, size_t bo,
                                          float bscale) {
  const int D = p.D;
  float s = 0.0f;
  if (!p.bf16) {
    for (int d = 0; d < D; d++)
      s = __fmaf_rn(fl_ld(a, p.kv16, ao + d, 0), bscale == 1.0f ? fl_ld(b, p.q16, bo + d, 0)
                                                                 : __fmul_rn(fl_ld(b, p.q16, bo + d, 0), bscale), s);
    return s;
  }
  for (int d = 0; d < D; d += 2) {
    if (d + 1 < D) s = __fmaf_rn(fl_ld(a, p.kv16, ao + d + 1, 1), fl_ld(b, p.q16, bo + d + 1, 1), s);
    s = __fmaf_rn(fl_ld(a, p.kv16, ao + d, 1), fl_ld(b, p.q16, bo + d, 1), s);
  }
  return s;
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

// =====================================================================================
// Tiled SIMT kernels: a CTA of 256 threads owns 64 rows (queries, or keys for dk/dv); thread
// (r = tid / 4, c = tid % 4) owns row r, the 16 tile columns c + 4t and the dims c + 4u.
// Tiles in shared memory, rows DM + 1 floats apart (conflict-free); columns past D are 0.
// =====================================================================================
#define FL_LDP (FL_BK + 1) // row stride of a P / dS tile

// Loads n = 64 rows of D elements (rows ld elements apart, from element off of row 0) into
// dst (rows LD apart): rows past nrows and columns past D are 0; values times mul.
template <int LD>
__device__ __forceinline__ void fl_load_tile(float *dst, const void *src, int is16, int rnd, size_t off, size_t ld,
                                             long nrows, int D, float mul) {
  for (int e = threadIdx.x; e < FL_BQ * (LD - 1); e += FL_THREADS) {
    const int r = e / (LD - 1), d = e - r * (LD - 1);
    float x = 0.0f;
    if (r < nrows && d < D) {
      x = fl_ld(src, is16, off + (size_t)r * ld + d, rnd);
      if (mul != 1.0f) x = __fmul_rn(x, mul);
    }
    dst[r * LD + d] = x;
  }
}

// s[t] (t < 16) = dot(A row ra, B row c + 4t) over D dims, the CPU's order (see fl_dot_g);
// fp32: B values times bmul first (1: none).
template <int LD>
__device__ __forceinline__ void fl_dots16(float s[16], const float *A, int ra, const float *B, int c, int D, int bf16,
                                          float bmul) {
#pragma unroll
  for (int t = 0; t < 16; t++) s[t] = 0.0f;
  const float *a = A + ra * LD, *b = B + c * LD;
  if (!bf16) {
    if (bmul == 1.0f) {
#pragma unroll 2
      for (int d = 0; d < D; d++) {
        const float x = a[d];
#pragma unroll
        for (int t = 0; t < 16; t++) s[t] = __fmaf_rn(x, b[4 * t * LD + d], s[t]);
      }
    } else {
#pragma unroll 2
      for (int d = 0; d < D; d++) {
        const float x = a[d];
#pragma unroll
        for (int t = 0; t < 16; t++) s[t] = __fmaf_rn(x, __fmul_rn(b[4 * t * LD + d], bmul), s[t]);
      }
    }
    return;
  }
  for (int d = 0; d < D; d += 2) {
    const float x1 = a[d + 1], x0 = a[d]; // column D (odd D) is 0: adds 0 * 0
#pragma unroll
    for (int t = 0; t < 16; t++) {
      s[t] = __fmaf_rn(x1, b[4 * t * LD + d + 1], s[t]);
      s[t] = __fmaf_rn(x0, b[4 * t * LD + d], s[t]);
    }
  }
}

// acc[u] (dims c + 4u) += sum over the 64 tile columns kk of W[r][kk] * X[kk][c + 4u], in kk
// order (bf16: pairs, odd first).
template <int DM, int LD>
__device__ __forceinline__ void fl_acc_tile(float acc[DM / 4], const float *W, int r, const float *X, int c, int bf16) {
  const float *w = W + r * FL_LDP;
  if (!bf16) {
#pragma unroll 2
    for (int kk = 0; kk < FL_BK; kk++) {
      const float wk = w[kk];
      const float *x = X + kk * LD + c;
#pragma unroll
      for (int u = 0; u < DM / 4; u++) acc[u] = __fmaf_rn(x[4 * u], wk, acc[u]);
    }
    return;
  }
  for (int k2 = 0; k2 < FL_BK; k2 += 2) {
    const float w1 = w[k2 + 1], w0 = w[k2];
    const float *x1 = X + (k2 + 1) * LD + c, *x0 = X + k2 * LD + c;
#pragma unroll
    for (int u = 0; u < DM / 4; u++) {
      acc[u] = __fmaf_rn(x1[4 * u], w1, acc[u]);
      acc[u] = __fmaf_rn(x0[4 * u], w0, acc[u]);
    }
  }
}

// Block-wide min of a and max of b (NT threads; red: 16 longs of shared memory).
template <int NT>
__device__ __forceinline__ void fl_block_minmax(long *a, long *b, long *red) {
  long x = *a, y = *b;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const long xo = __shfl_xor_sync(0xffffffffu, x, o), yo = __shfl_xor_sync(0xffffffffu, y, o);
    x = xo < x ? xo : x;
    y = yo > y ? yo : y;
  }
  const int w = threadIdx.x >> 5;
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[w] = x, red[8 + w] = y;
  __syncthreads();
  x = red[0], y = red[8];
  for (int i = 1; i < NT / 32; i++) {
    x = red[i] < x ? red[i] : x;
    y = red[8 + i] > y ? red[8 + i] : y;
  }
  *a = x, *b = y;
}

template <int DM>
constexpr size_t fl_fwd_smem() {
  return sizeof(float) * (3 * FL_BQ * (DM + 1) + 2 * FL_BQ * FL_LDP);
}

template <int DM>
__global__ void __launch_bounds__(FL_THREADS, 1) simt_fwd_kernel(fl_p p, void *out, float *lse, const void *q,
                                                              const void *k, const void *v) {
  constexpr int LD = DM + 1;
  extern __shared__ float sm[];
  __shared__ long red[16];
  float *Qs = sm, *Ks = Qs + FL_BQ * LD, *Vs = Ks + FL_BK * LD, *Ps = Vs + FL_BK * LD, *Pm = Ps + FL_BQ * FL_LDP;
  const int tid = threadIdx.x, r = tid >> 2, c = tid & 3, h = blockIdx.y, g = h / p.grp, D = p.D;
  const long i0 = (long)blockIdx.x * FL_BQ, i = i0 + r;
  const bool valid = i < p.Tq;
  const int bf = p.bf16;
  long rb = p.Tk, re = 0;
  if (valid) fl_row_range(p, i, &rb, &re);
  if (re <= rb) rb = p.Tk, re = 0; // an empty row does not widen the block's range
  long bb = rb, be = re;
  fl_block_minmax<FL_THREADS>(&bb, &be, red);
  const size_t ldq = (size_t)p.Hq * D, ldk = (size_t)p.Hkv * D;
  fl_load_tile<LD>(Qs, q, p.q16, bf, (size_t)i0 * ldq + (size_t)h * D, ldq, p.Tq - i0, D, bf ? 1.0f : p.sl2);
  float o[DM / 4];
#pragma unroll
  for (int u = 0; u < DM / 4; u++) o[u] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (long j0 = be > bb ? bb / FL_BK * FL_BK : be; j0 < be; j0 += FL_BK) {
    __syncthreads(); // the previous tile's K, V, P are no longer read
    fl_load_tile<LD>(Ks, k, p.kv16, bf, (size_t)j0 * ldk + (size_t)g * D, ldk, p.Tk - j0, D, 1.0f);
    fl_load_tile<LD>(Vs, v, p.kv16, bf, (size_t)j0 * ldk + (size_t)g * D, ldk, p.Tk - j0, D, 1.0f);
    __syncthreads();
    float s[16];
    // scores of row r against keys c + 4t: A = Q row r, B = K rows c + 4t
    fl_dots16<LD>(s, Qs, r, Ks, c, D, bf, 1.0f);
    float mx = -INFINITY;
#pragma unroll
    for (int t = 0; t < 16; t++) {
      const long j = j0 + c + 4 * t;
      if (bf) s[t] = __fmul_rn(s[t], p.sl2);
      if (j < rb || j >= re) s[t] = -INFINITY;
      mx = s[t] > mx ? s[t] : mx;
    }
    {
      float x = __shfl_xor_sync(0xffffffffu, mx, 1);
      mx = x > mx ? x : mx;
      x = __shfl_xor_sync(0xffffffffu, mx, 2);
      mx = x > mx ? x : mx;
    }
    float mnew = mx > m ? mx : m;
    if (bf) mnew = ceilf(mnew);
    const float mref = mnew == -INFINITY ? 0.0f : mnew;
    const float al = fl_exp2(__fsub_rn(m, mref));
#pragma unroll
    for (int t = 0; t < 16; t++) {
      const float pr = fl_exp2(__fsub_rn(s[t], mref));
      Ps[r * FL_LDP + c + 4 * t] = pr;
      if (bf) Pm[r * FL_LDP + c + 4 * t] = fl_round_daz(pr);
    }
    __syncthreads();
    float s0 = 0.0f, s1 = 0.0f;
    for (int kk = 0; kk < FL_BK; kk += 2) {
      s0 = __fadd_rn(s0, Ps[r * FL_LDP + kk]);
      s1 = __fadd_rn(s1, Ps[r * FL_LDP + kk + 1]);
    }
    l = __fmaf_rn(l, al, __fadd_rn(s0, s1));
    m = mnew;
#pragma unroll
    for (int u = 0; u < DM / 4; u++) o[u] = __fmul_rn(o[u], al);
    fl_acc_tile<DM, LD>(o, bf ? Pm : Ps, r, Vs, c, bf);
  }
  if (!valid) return;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  if (c == 0) lse[(size_t)h * p.Tq + i] = l > 0.0f ? (float)(((double)m + log2((double)l)) * FL_LN2) : -INFINITY;
  const size_t oo = (size_t)i * ldq + (size_t)h * D;
#pragma unroll
  for (int u = 0; u < DM / 4; u++) {
    const int d = c + 4 * u;
    if (d < D) fl_store_out(out, p.out16, oo + d, __fmul_rn(o[u], inv));
  }
}

template <int DM>
constexpr size_t fl_bwd_smem() {
  return sizeof(float) * (4 * FL_BQ * (DM + 1) + FL_BQ * FL_LDP + 4 * FL_BQ);
}

// dq of a query block: over the key tiles the block can see, in order.
template <int DM>
__global__ void __launch_bounds__(FL_THREADS, 1) simt_bwd_dq_kernel(fl_p p, float *dq, const void *dout, const void *q,
                                                                 const void *k, const void *v, const float *lse,
                                                                 const float *delta) {
  constexpr int LD = DM + 1;
  extern __shared__ float sm[];
  __shared__ long red[16];
  float *Qs = sm, *Os = Qs + FL_BQ * LD, *Ks = Os + FL_BQ * LD, *Vs = Ks + FL_BK * LD, *Ss = Vs + FL_BK * LD;
  const int tid = threadIdx.x, r = tid >> 2, c = tid & 3, h = blockIdx.y, g = h / p.grp, D = p.D;
  const long i0 = (long)blockIdx.x * FL_BQ, i = i0 + r;
  const bool valid = i < p.Tq;
  const int bf = p.bf16;
  long rb = p.Tk, re = 0;
  float lse2 = INFINITY, dlt = 0.0f;
  if (valid) {
    fl_row_range(p, i, &rb, &re);
    const float L = lse[(size_t)h * p.Tq + i];
    lse2 = fl_lse2(L);
    dlt = delta[(size_t)h * p.Tq + i];
    if (L == -INFINITY) rb = p.Tk, re = 0; // P = 0: the row adds nothing
  }
  if (re <= rb) rb = p.Tk, re = 0;
  long bb = rb, be = re;
  fl_block_minmax<FL_THREADS>(&bb, &be, red);
  if (be <= bb) return; // uniform
  const size_t ldq = (size_t)p.Hq * D, ldk = (size_t)p.Hkv * D;
  fl_load_tile<LD>(Qs, q, p.q16, bf, (size_t)i0 * ldq + (size_t)h * D, ldq, p.Tq - i0, D, bf ? 1.0f : p.sl2);
  fl_load_tile<LD>(Os, dout, p.q16, bf, (size_t)i0 * ldq + (size_t)h * D, ldq, p.Tq - i0, D, 1.0f);
  float acc[DM / 4];
#pragma unroll
  for (int u = 0; u < DM / 4; u++) acc[u] = 0.0f;
  for (long j0 = bb / FL_BK * FL_BK; j0 < be; j0 += FL_BK) {
    __syncthreads();
    fl_load_tile<LD>(Ks, k, p.kv16, bf, (size_t)j0 * ldk + (size_t)g * D, ldk, p.Tk - j0, D, 1.0f);
    fl_load_tile<LD>(Vs, v, p.kv16, bf, (size_t)j0 * ldk + (size_t)g * D, ldk, p.Tk - j0, D, 1.0f);
    __syncthreads();
    float s[16], dp[16];
    // CPU order of the operands: fma(k, q), fma(v, dout)
    fl_dots16<LD>(s, Qs, r, Ks, c, D, bf, 1.0f);
    fl_dots16<LD>(dp, Os, r, Vs, c, D, bf, 1.0f);
#pragma unroll
    for (int t = 0; t < 16; t++) {
      const long j = j0 + c + 4 * t;
      const float sc = bf ? __fmul_rn(s[t], p.sl2) : s[t];
      const float pr = (j < rb || j >= re) ? 0.0f : fl_exp2(__fsub_rn(sc, lse2));
      float ds = __fmul_rn(__fmul_rn(pr, p.scale), __fsub_rn(dp[t], dlt));
      if (bf) ds = fl_round_daz(ds);
      Ss[r * FL_LDP + c + 4 * t] = ds;
    }
    __syncthreads();
    fl_acc_tile<DM, LD>(acc, Ss, r, Ks, c, bf);
  }
  if (!valid) return;
  const size_t oo = (size_t)i * ldq + (size_t)h * D;
#pragma unroll
  for (int u = 0; u < DM / 4; u++) {
    const int d = c + 4 * u;
    if (d < D) dq[oo + d] = __fadd_rn(dq[oo + d], acc[u]);
  }
}

// dk, dv of a key block: over the query blocks from the last to the first, the kv group's q
// heads in order inside each.
template <int DM>
__global__ void __launch_bounds__(FL_THREADS, 1) simt_bwd_dkv_kernel(fl_p p, float *dk, float *dv, const void *dout,
                                                                  const void *q, const void *k, const void *v,
                                                                  const float *lse, const float *delta) {
  constexpr int LD = DM + 1;
  extern __shared__ float sm[];
  float *Ks = sm, *Vs = Ks + FL_BK * LD, *Qs = Vs + FL_BK * LD, *Os = Qs + FL_BQ * LD, *Ws = Os + FL_BQ * LD;
  float *L2s = Ws + FL_BK * FL_LDP, *Dls = L2s + FL_BQ;
  int *Los = (int *)(Dls + FL_BQ);
  const int tid = threadIdx.x, r = tid >> 2, c = tid & 3, g = blockIdx.y, D = p.D;
  const long j0 = (long)blockIdx.x * FL_BK, j = j0 + r;
  const bool kvalid = j < p.Tk;
  const int bf = p.bf16;
  const size_t ldq = (size_t)p.Hq * D, ldk = (size_t)p.Hkv * D;
  const long kpos = p.k_start + j, kfirst = p.k_start + j0;
  const long klast = p.k_start + (j0 + FL_BK < p.Tk ? j0 + FL_BK : p.Tk) - 1;
  fl_load_tile<LD>(Ks, k, p.kv16, bf, (size_t)j0 * ldk + (size_t)g * D, ldk, p.Tk - j0, D, 1.0f);
  fl_load_tile<LD>(Vs, v, p.kv16, bf, (size_t)j0 * ldk + (size_t)g * D, ldk, p.Tk - j0, D, 1.0f);
  float ak[DM / 4], av[DM / 4];
#pragma unroll
  for (int u = 0; u < DM / 4; u++) ak[u] = av[u] = 0.0f;
  const int nqb = (p.Tq + FL_BQ - 1) / FL_BQ;
  for (int ib = nqb - 1; ib >= 0; ib--) {
    const long i0 = (long)ib * FL_BQ;
    if (p.causal && p.q_start + i0 + FL_BQ - 1 < kfirst) break; // no earlier block sees the keys
    for (int hh = 0; hh < p.grp; hh++) {
      const int h = g * p.grp + hh;
      __syncthreads(); // the previous item's tiles are no longer read
      int any = 0;
      if (tid < FL_BQ) {
        const long ii = i0 + tid;
        float l2 = INFINITY, dl = 0.0f;
        int lov = 0;
        if (ii < p.Tq) {
          const float L = lse[(size_t)h * p.Tq + ii];
          l2 = fl_lse2(L);
          dl = delta[(size_t)h * p.Tq + ii];
          lov = p.lo ? p.lo[ii] : 0;
          long vb = kfirst, ve = klast; // visible positions of this key block
          if (p.lo && (long)lov > vb) vb = lov;
          if (p.causal && p.q_start + ii < ve) ve = p.q_start + ii;
          any = L != -INFINITY && vb <= ve;
        }
        L2s[tid] = l2, Dls[tid] = dl, Los[tid] = lov;
      }
      if (!__syncthreads_or(any)) continue;
      fl_load_tile<LD>(Qs, q, p.q16, bf, (size_t)i0 * ldq + (size_t)h * D, ldq, p.Tq - i0, D, 1.0f);
      fl_load_tile<LD>(Os, dout, p.q16, bf, (size_t)i0 * ldq + (size_t)h * D, ldq, p.Tq - i0, D, 1.0f);
      __syncthreads();
      float s[16], dp[16];
      // key row r against queries c + 4t; CPU operands: fma(k, q * sl2), fma(v, dout)
      fl_dots16<LD>(s, Ks, r, Qs, c, D, bf, bf ? 1.0f : p.sl2);
      fl_dots16<LD>(dp, Vs, r, Os, c, D, bf, 1.0f);
#pragma unroll
      for (int t = 0; t < 16; t++) {
        const int qi = c + 4 * t;
        const long ii = i0 + qi;
        bool vis = kvalid && ii < p.Tq;
        if (p.causal && kpos > p.q_start + ii) vis = false;
        if (p.lo && kpos < (long)Los[qi]) vis = false;
        const float sc = bf ? __fmul_rn(s[t], p.sl2) : s[t];
        float pr = vis ? fl_exp2(__fsub_rn(sc, L2s[qi])) : 0.0f;
        float ds = __fmul_rn(__fmul_rn(pr, p.scale), __fsub_rn(dp[t], Dls[qi]));
        if (bf) pr = fl_round_daz(pr), ds = fl_round_daz(ds);
        Ws[r * FL_LDP + qi] = pr;
        dp[t] = ds;
      }
      __syncthreads();
      fl_acc_tile<DM, LD>(av, Ws, r, Os, c, bf); // dv += P^T dO
      __syncthreads();
#pragma unroll
      for (int t = 0; t < 16; t++) Ws[r * FL_LDP + c + 4 * t] = dp[t];
      __syncthreads();
      fl_acc_tile<DM, LD>(ak, Ws, r, Qs, c, bf); // dk += dS^T q
    }
  }
  if (!kvalid) return;
  const size_t ko = (size_t)j * ldk + (size_t)g * D;
#pragma unroll
  for (int u = 0; u < DM / 4; u++) {
    const int d = c + 4 * u;
    if (d < D) {
      dk[ko + d] = __fadd_rn(dk[ko + d], ak[u]);
      dv[ko + d] = __fadd_rn(dv[ko + d], av[u]);
    }
  }
}


// =====================================================================================
// Tensor-core forward (bf16 = 1, D = 64 or 128): mma.sync m16n8k16 bf16 -> fp32. A CTA of 4
// warps owns 64 query rows (warp w: rows 16w..16w+15) and walks the key tiles of 64 the
// block can see. Per tile: S = Q K^T (mma), times sl2, masked, the online softmax (max rounded
// up to an integer, the CPU's exp2), P rounded to bf16 and fed from the accumulators straight
// into the A operand of O += P V (mma). Shared memory (bf16 bits): Q [64][D+8], K [64][D+8],
// V transposed [D][64+8] (rows 16 bytes + 4 words apart: conflict-free fragment loads).
// Fragment layouts (PTX ISA, m16n8k16, g = lane / 4, t = lane % 4):
//   A (16x16, row): reg0 (g, 2t..2t+1), reg1 (g+8, 2t..), reg2 (g, 2t+8..), reg3 (g+8, 2t+8..)
//   B (16x8, col):  reg0 (k 2t..2t+1, n g), reg1 (k 2t+8..2t+9, n g)
//   C (16x8 fp32):  c0,c1 (g, 2t..2t+1), c2,c3 (g+8, 2t..2t+1)
// =====================================================================================
#define FL_MMA_THREADS 128

__device__ __forceinline__ void fl_mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// bf16 bits of input element i (fp32 storage: rounded, a no-op on bf16 values).
__device__ __forceinline__ uint32_t fl_bits(const void *x, int is16, size_t i) {
  if (is16) return ((const uint16_t *)x)[i];
  return fl_narrow_bits(__float_as_uint(((const float *)x)[i])) >> 16;
}
// Two rounded probabilities / gradients as one bf16 pair (lo: the lower index).
__device__ __forceinline__ uint32_t fl_pack2(float lo, float hi) {
  return (__float_as_uint(fl_round_daz(lo)) >> 16) | (__float_as_uint(fl_round_daz(hi)) & 0xffff0000u);
}
__device__ __forceinline__ uint32_t fl_lds32(const uint16_t *p) { return *(const uint32_t *)p; }

// 64 rows of D bf16 values (row r of the tile at element off + r * ld of x) into shared
// memory: natural dn[r * LN + d] (LN > 0) and / or transposed dt[d * LT + r] (LT > 0); rows
// past nrows are 0.
template <int D, int LN, int LT, int NT>
__device__ __forceinline__ void fl_load_bf16(uint16_t *dn, uint16_t *dt, const void *x, int is16, size_t off,
                                             size_t ld, long nrows) {
  for (int e = threadIdx.x; e < 64 * (D / 2); e += NT) {
    const int r = e / (D / 2), d = 2 * (e - r * (D / 2));
    uint32_t lo = 0, hi = 0;
    if (r < nrows) {
      const size_t o = off + (size_t)r * ld + d;
      lo = fl_bits(x, is16, o);
      hi = fl_bits(x, is16, o + 1);
    }
    if (LN > 0) *(uint32_t *)(dn + r * LN + d) = lo | (hi << 16);
    if (LT > 0) {
      dt[d * LT + r] = (uint16_t)lo;
      dt[(d + 1) * LT + r] = (uint16_t)hi;
    }
  }
}

template <int D>
constexpr size_t fl_mma_fwd_smem() {
  return sizeof(uint16_t) * (2 * 64 * (D + 8) + D * (64 + 8));
}

template <int D>
__global__ void __launch_bounds__(FL_MMA_THREADS) mma_fwd_kernel(fl_p p, void *out, float *lse, const void *q,
                                                                 const void *k, const void *v) {
  constexpr int LQ = D + 8, LV = FL_BK + 8, NKD = D / 16, NDN = D / 8;
  extern __shared__ __align__(16) uint16_t smh[];
  __shared__ long red[16];
  uint16_t *Qs = smh, *Ks = Qs + 64 * LQ, *Vt = Ks + 64 * LQ;
  const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;
  const int h = blockIdx.y, g = h / p.grp;
  const long i0 = (long)blockIdx.x * FL_BQ;
  long rb[2], re[2];
  long bb = p.Tk, be = 0;
#pragma unroll
  for (int e = 0; e < 2; e++) {
    const long i = i0 + w * 16 + gq + 8 * e;
    rb[e] = p.Tk, re[e] = 0;
    if (i < p.Tq) fl_row_range(p, i, &rb[e], &re[e]);
    if (re[e] <= rb[e]) rb[e] = p.Tk, re[e] = 0;
    bb = rb[e] < bb ? rb[e] : bb;
    be = re[e] > be ? re[e] : be;
  }
  fl_block_minmax<FL_MMA_THREADS>(&bb, &be, red);
  const size_t ldq = (size_t)p.Hq * D, ldk = (size_t)p.Hkv * D;
  fl_load_bf16<D, LQ, 0, FL_MMA_THREADS>(Qs, nullptr, q, p.q16, (size_t)i0 * ldq + (size_t)h * D, ldq, p.Tq - i0);
  __syncthreads();
  uint32_t qf[NKD][4];
#pragma unroll
  for (int kk = 0; kk < NKD; kk++) {
    const uint16_t *b = Qs + (w * 16 + gq) * LQ + kk * 16 + 2 * tq;
    qf[kk][0] = fl_lds32(b);
    qf[kk][1] = fl_lds32(b + 8 * LQ);
    qf[kk][2] = fl_lds32(b + 8);
    qf[kk][3] = fl_lds32(b + 8 * LQ + 8);
  }
  float o[NDN][4];
#pragma unroll
  for (int n = 0; n < NDN; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  for (long j0 = be > bb ? bb / FL_BK * FL_BK : be; j0 < be; j0 += FL_BK) {
    __syncthreads(); // the previous tile is no longer read
    fl_load_bf16<D, LQ, 0, FL_MMA_THREADS>(Ks, nullptr, k, p.kv16, (size_t)j0 * ldk + (size_t)g * D, ldk, p.Tk - j0);
    fl_load_bf16<D, 0, LV, FL_MMA_THREADS>(nullptr, Vt, v, p.kv16, (size_t)j0 * ldk + (size_t)g * D, ldk, p.Tk - j0);
    __syncthreads();
    float sc[8][4];
#pragma unroll
    for (int n = 0; n < 8; n++) {
      sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < NKD; kk++) {
        const uint16_t *b = Ks + (n * 8 + gq) * LQ + kk * 16 + 2 * tq;
        fl_mma(sc[n], qf[kk], fl_lds32(b), fl_lds32(b + 8));
      }
    }
#pragma unroll
    for (int e = 0; e < 2; e++) { // row half: accumulator regs 2e, 2e+1
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int x = 0; x < 2; x++) {
          const long j = j0 + n * 8 + 2 * tq + x;
          float s = __fmul_rn(sc[n][2 * e + x], p.sl2);
          if (j < rb[e] || j >= re[e]) s = -INFINITY;
          sc[n][2 * e + x] = s;
          mx = s > mx ? s : mx;
        }
      float y = __shfl_xor_sync(0xffffffffu, mx, 1);
      mx = y > mx ? y : mx;
      y = __shfl_xor_sync(0xffffffffu, mx, 2);
      mx = y > mx ? y : mx;
      float mnew = ceilf(mx > m[e] ? mx : m[e]);
      const float mref = mnew == -INFINITY ? 0.0f : mnew;
      const float al = fl_exp2(__fsub_rn(m[e], mref));
      float sum = 0.0f;
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int x = 0; x < 2; x++) {
          const float pr = fl_exp2(__fsub_rn(sc[n][2 * e + x], mref));
          sc[n][2 * e + x] = pr;
          sum = __fadd_rn(sum, pr);
        }
      sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 1)); // the same bits in the 4 lanes
      sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 2));
      l[e] = __fmaf_rn(l[e], al, sum);
      m[e] = mnew;
#pragma unroll
      for (int n = 0; n < NDN; n++) {
        o[n][2 * e] = __fmul_rn(o[n][2 * e], al);
        o[n][2 * e + 1] = __fmul_rn(o[n][2 * e + 1], al);
      }
    }
#pragma unroll
    for (int kk = 0; kk < FL_BK / 16; kk++) {
      uint32_t a[4];
      a[0] = fl_pack2(sc[2 * kk][0], sc[2 * kk][1]);
      a[1] = fl_pack2(sc[2 * kk][2], sc[2 * kk][3]);
      a[2] = fl_pack2(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
      a[3] = fl_pack2(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
#pragma unroll
      for (int n = 0; n < NDN; n++) {
        const uint16_t *b = Vt + (n * 8 + gq) * LV + kk * 16 + 2 * tq;
        fl_mma(o[n], a, fl_lds32(b), fl_lds32(b + 8));
      }
    }
  }
#pragma unroll
  for (int e = 0; e < 2; e++) {
    const long i = i0 + w * 16 + gq + 8 * e;
    if (i >= p.Tq) continue;
    const float inv = l[e] > 0.0f ? 1.0f / l[e] : 0.0f;
    if (tq == 0)
      lse[(size_t)h * p.Tq + i] = l[e] > 0.0f ? (float)(((double)m[e] + log2((double)l[e])) * FL_LN2) : -INFINITY;
    const size_t oo = (size_t)i * ldq + (size_t)h * D + 2 * tq;
#pragma unroll
    for (int n = 0; n < NDN; n++) {
      fl_store_out(out, p.out16, oo + n * 8, __fmul_rn(o[n][2 * e], inv));
      fl_store_out(out, p.out16, oo + n * 8 + 1, __fmul_rn(o[n][2 * e + 1], inv));
    }
  }
}


// A fragment of the 16-row slab at base (rows ld halves apart), columns col0..col0+15.
__device__ __forceinline__ void fl_lda(uint32_t a[4], const uint16_t *base, int ld, int col0) {
  const int lane = threadIdx.x & 31;
  const uint16_t *b = base + (lane >> 2) * ld + col0 + 2 * (lane & 3);
  a[0] = fl_lds32(b);
  a[1] = fl_lds32(b + 8 * ld);
  a[2] = fl_lds32(b + 8);
  a[3] = fl_lds32(b + 8 * ld + 8);
}
// B fragment: n index n0 + g along the rows of base (ld halves apart), k index k0.. along them.
__device__ __forceinline__ void fl_ldb(uint32_t *b0, uint32_t *b1, const uint16_t *base, int ld, int n0, int k0) {
  const int lane = threadIdx.x & 31;
  const uint16_t *b = base + (n0 + (lane >> 2)) * ld + k0 + 2 * (lane & 3);
  *b0 = fl_lds32(b);
  *b1 = fl_lds32(b + 8);
}

// ---- tensor-core backward (bf16 = 1, D = 64 or 128) ----
template <int D>
constexpr size_t fl_mma_dq_smem() {
  return sizeof(uint16_t) * (4 * 64 * (D + 8) + D * (64 + 8));
}
template <int D>
constexpr size_t fl_mma_dkv_smem() {
  return sizeof(uint16_t) * (4 * 64 * (D + 8) + 2 * D * (64 + 8)) + 3 * 64 * sizeof(float);
}

// dq of a query block (4 warps x 16 rows) over its visible key tiles in order:
// S = Q K^T, dP = dO V^T (mma), P, dS in fp32, dS rounded, dq += dS K (mma).
// Shared: Q, dO, K, V natural [64][D+8]; K transposed [D][64+8].
template <int D>
__global__ void __launch_bounds__(FL_MMA_THREADS) mma_bwd_dq_kernel(fl_p p, float *dq, const void *dout,
                                                                    const void *q, const void *k, const void *v,
                                                                    const float *lse, const float *delta) {
  constexpr int LQ = D + 8, LV = FL_BK + 8, NKD = D / 16, NDN = D / 8;
  extern __shared__ __align__(16) uint16_t smh[];
  __shared__ long red[16];
  uint16_t *Qs = smh, *Os = Qs + 64 * LQ, *Ks = Os + 64 * LQ, *Vs = Ks + 64 * LQ, *Kt = Vs + 64 * LQ;
  const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;
  const int h = blockIdx.y, g = h / p.grp;
  const long i0 = (long)blockIdx.x * FL_BQ;
  long rb[2], re[2];
  float l2[2], dl[2];
  long bb = p.Tk, be = 0;
#pragma unroll
  for (int e = 0; e < 2; e++) {
    const long i = i0 + w * 16 + gq + 8 * e;
    rb[e] = p.Tk, re[e] = 0, l2[e] = INFINITY, dl[e] = 0.0f;
    if (i < p.Tq) {
      fl_row_range(p, i, &rb[e], &re[e]);
      const float L = lse[(size_t)h * p.Tq + i];
      l2[e] = fl_lse2(L);
      dl[e] = delta[(size_t)h * p.Tq + i];
      if (L == -INFINITY) rb[e] = p.Tk, re[e] = 0;
    }
    if (re[e] <= rb[e]) rb[e] = p.Tk, re[e] = 0;
    bb = rb[e] < bb ? rb[e] : bb;
    be = re[e] > be ? re[e] : be;
  }
  fl_block_minmax<FL_MMA_THREADS>(&bb, &be, red);
  if (be <= bb) return; // uniform
  const size_t ldq = (size_t)p.Hq * D, ldk = (size_t)p.Hkv * D;
  fl_load_bf16<D, LQ, 0, FL_MMA_THREADS>(Qs, nullptr, q, p.q16, (size_t)i0 * ldq + (size_t)h * D, ldq, p.Tq - i0);
  fl_load_bf16<D, LQ, 0, FL_MMA_THREADS>(Os, nullptr, dout, p.q16, (size_t)i0 * ldq + (size_t)h * D, ldq, p.Tq - i0);
  float acc[NDN][4];
#pragma unroll
  for (int n = 0; n < NDN; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  const uint16_t *Qw = Qs + w * 16 * LQ, *Ow = Os + w * 16 * LQ;
  for (long j0 = bb / FL_BK * FL_BK; j0 < be; j0 += FL_BK) {
    __syncthreads();
    fl_load_bf16<D, LQ, LV, FL_MMA_THREADS>(Ks, Kt, k, p.kv16, (size_t)j0 * ldk + (size_t)g * D, ldk, p.Tk - j0);
    fl_load_bf16<D, LQ, 0, FL_MMA_THREADS>(Vs, nullptr, v, p.kv16, (size_t)j0 * ldk + (size_t)g * D, ldk, p.Tk - j0);
    __syncthreads();
    float sc[8][4], dp[8][4];
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int x = 0; x < 4; x++) sc[n][x] = dp[n][x] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < NKD; kk++) {
      uint32_t qa[4], oa[4];
      fl_lda(qa, Qw, LQ, kk * 16);
      fl_lda(oa, Ow, LQ, kk * 16);
#pragma unroll
      for (int n = 0; n < 8; n++) {
        uint32_t b0, b1;
        fl_ldb(&b0, &b1, Ks, LQ, n * 8, kk * 16);
        fl_mma(sc[n], qa, b0, b1);
        fl_ldb(&b0, &b1, Vs, LQ, n * 8, kk * 16);
        fl_mma(dp[n], oa, b0, b1);
      }
    }
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int x = 0; x < 4; x++) {
        const int e = x >> 1;
        const long j = j0 + n * 8 + 2 * tq + (x & 1);
        const float pr = (j < rb[e] || j >= re[e]) ? 0.0f : fl_exp2(__fsub_rn(__fmul_rn(sc[n][x], p.sl2), l2[e]));
        sc[n][x] = __fmul_rn(__fmul_rn(pr, p.scale), __fsub_rn(dp[n][x], dl[e]));
      }
#pragma unroll
    for (int kk = 0; kk < FL_BK / 16; kk++) {
      uint32_t a[4];
      a[0] = fl_pack2(sc[2 * kk][0], sc[2 * kk][1]);
      a[1] = fl_pack2(sc[2 * kk][2], sc[2 * kk][3]);
      a[2] = fl_pack2(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
      a[3] = fl_pack2(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
#pragma unroll
      for (int n = 0; n < NDN; n++) {
        uint32_t b0, b1;
        fl_ldb(&b0, &b1, Kt, LV, n * 8, kk * 16);
        fl_mma(acc[n], a, b0, b1);
      }
    }
  }
#pragma unroll
  for (int e = 0; e < 2; e++) {
    const long i = i0 + w * 16 + gq + 8 * e;
    if (i >= p.Tq) continue;
    float *o = dq + (size_t)i * ldq + (size_t)h * D + 2 * tq;
#pragma unroll
    for (int n = 0; n < NDN; n++) {
      o[n * 8] = __fadd_rn(o[n * 8], acc[n][2 * e]);
      o[n * 8 + 1] = __fadd_rn(o[n * 8 + 1], acc[n][2 * e + 1]);
    }
  }
}

// dk, dv of a key block (4 warps x 16 keys) over the query blocks from the last to the
// first and the kv group's q heads in order: S^T = K Q^T, dP^T = V dO^T (mma), P^T and dS^T
// in fp32, rounded; dv += P^T dO, dk += dS^T Q (mma). Shared: K, V natural (the block's, for
// the whole kernel); per item Q, dO natural [64][D+8] and transposed [D][64+8].
template <int D>
__global__ void __launch_bounds__(FL_MMA_THREADS) mma_bwd_dkv_kernel(fl_p p, float *dk, float *dv, const void *dout,
                                                                     const void *q, const void *k, const void *v,
                                                                     const float *lse, const float *delta) {
  constexpr int LQ = D + 8, LV = FL_BQ + 8, NKD = D / 16, NDN = D / 8;
  extern __shared__ __align__(16) uint16_t smh[];
  uint16_t *Ks = smh, *Vs = Ks + 64 * LQ, *Qs = Vs + 64 * LQ, *Qt = Qs + 64 * LQ, *Os = Qt + D * LV,
           *Ot = Os + 64 * LQ;
  float *L2s = (float *)(Ot + D * LV), *Dls = L2s + 64;
  int *Los = (int *)(Dls + 64);
  const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3, g = blockIdx.y;
  const long j0 = (long)blockIdx.x * FL_BK;
  const size_t ldq = (size_t)p.Hq * D, ldk = (size_t)p.Hkv * D;
  const long kfirst = p.k_start + j0, klast = p.k_start + (j0 + FL_BK < p.Tk ? j0 + FL_BK : p.Tk) - 1;
  long jr[2], kpos[2];
#pragma unroll
  for (int e = 0; e < 2; e++) jr[e] = j0 + w * 16 + gq + 8 * e, kpos[e] = p.k_start + jr[e];
  fl_load_bf16<D, LQ, 0, FL_MMA_THREADS>(Ks, nullptr, k, p.kv16, (size_t)j0 * ldk + (size_t)g * D, ldk, p.Tk - j0);
  fl_load_bf16<D, LQ, 0, FL_MMA_THREADS>(Vs, nullptr, v, p.kv16, (size_t)j0 * ldk + (size_t)g * D, ldk, p.Tk - j0);
  float ak[NDN][4], av[NDN][4];
#pragma unroll
  for (int n = 0; n < NDN; n++)
#pragma unroll
    for (int x = 0; x < 4; x++) ak[n][x] = av[n][x] = 0.0f;
  const uint16_t *Kw = Ks + w * 16 * LQ, *Vw = Vs + w * 16 * LQ;
  const int nqb = (p.Tq + FL_BQ - 1) / FL_BQ;
  for (int ib = nqb - 1; ib >= 0; ib--) {
    const long i0 = (long)ib * FL_BQ;
    if (p.causal && p.q_start + i0 + FL_BQ - 1 < kfirst) break; // no earlier block sees the keys
    for (int hh = 0; hh < p.grp; hh++) {
      const int h = g * p.grp + hh;
      __syncthreads(); // the previous item's tiles are no longer read
      int any = 0;
      if (tid < FL_BQ) {
        const long ii = i0 + tid;
        float l2 = INFINITY, dlv = 0.0f;
        int lov = 0;
        if (ii < p.Tq) {
          const float L = lse[(size_t)h * p.Tq + ii];
          l2 = fl_lse2(L);
          dlv = delta[(size_t)h * p.Tq + ii];
          lov = p.lo ? p.lo[ii] : 0;
          long vb = kfirst, ve = klast;
          if (p.lo && (long)lov > vb) vb = lov;
          if (p.causal && p.q_start + ii < ve) ve = p.q_start + ii;
          any = L != -INFINITY && vb <= ve;
        }
        L2s[tid] = l2, Dls[tid] = dlv, Los[tid] = lov;
      }
      if (!__syncthreads_or(any)) continue;
      fl_load_bf16<D, LQ, LV, FL_MMA_THREADS>(Qs, Qt, q, p.q16, (size_t)i0 * ldq + (size_t)h * D, ldq, p.Tq - i0);
      fl_load_bf16<D, LQ, LV, FL_MMA_THREADS>(Os, Ot, dout, p.q16, (size_t)i0 * ldq + (size_t)h * D, ldq, p.Tq - i0);
      __syncthreads();
      float sc[8][4], dp[8][4];
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int x = 0; x < 4; x++) sc[n][x] = dp[n][x] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < NKD; kk++) {
        uint32_t ka[4], va[4];
        fl_lda(ka, Kw, LQ, kk * 16);
        fl_lda(va, Vw, LQ, kk * 16);
#pragma unroll
        for (int n = 0; n < 8; n++) {
          uint32_t b0, b1;
          fl_ldb(&b0, &b1, Qs, LQ, n * 8, kk * 16);
          fl_mma(sc[n], ka, b0, b1);
          fl_ldb(&b0, &b1, Os, LQ, n * 8, kk * 16);
          fl_mma(dp[n], va, b0, b1);
        }
      }
      uint32_t pa[4][4], da[4][4]; // P^T and dS^T as A fragments (keys x queries)
#pragma unroll
      for (int n = 0; n < 8; n++) {
        float pr[4], ds[4];
#pragma unroll
        for (int x = 0; x < 4; x++) {
          const int e = x >> 1, qi = n * 8 + 2 * tq + (x & 1);
          const long ii = i0 + qi;
          bool vis = jr[e] < p.Tk && ii < p.Tq;
          if (p.causal && kpos[e] > p.q_start + ii) vis = false;
          if (p.lo && kpos[e] < (long)Los[qi]) vis = false;
          pr[x] = vis ? fl_exp2(__fsub_rn(__fmul_rn(sc[n][x], p.sl2), L2s[qi])) : 0.0f;
          ds[x] = __fmul_rn(__fmul_rn(pr[x], p.scale), __fsub_rn(dp[n][x], Dls[qi]));
        }
        // n-tile n covers queries 8n..8n+7: k-step n / 2, regs 0-1 (even n) or 2-3 (odd n)
        pa[n >> 1][(n & 1) * 2] = fl_pack2(pr[0], pr[1]);
        pa[n >> 1][(n & 1) * 2 + 1] = fl_pack2(pr[2], pr[3]);
        da[n >> 1][(n & 1) * 2] = fl_pack2(ds[0], ds[1]);
        da[n >> 1][(n & 1) * 2 + 1] = fl_pack2(ds[2], ds[3]);
      }
#pragma unroll
      for (int kk = 0; kk < FL_BQ / 16; kk++)
#pragma unroll
        for (int n = 0; n < NDN; n++) {
          uint32_t b0, b1;
          fl_ldb(&b0, &b1, Ot, LV, n * 8, kk * 16);
          fl_mma(av[n], pa[kk], b0, b1);
          fl_ldb(&b0, &b1, Qt, LV, n * 8, kk * 16);
          fl_mma(ak[n], da[kk], b0, b1);
        }
    }
  }
#pragma unroll
  for (int e = 0; e < 2; e++) {
    if (jr[e] >= p.Tk) continue;
    const size_t ko = (size_t)jr[e] * ldk + (size_t)g * D + 2 * tq;
#pragma unroll
    for (int n = 0; n < NDN; n++)
#pragma unroll
      for (int x = 0; x < 2; x++) {
        dk[ko + n * 8 + x] = __fadd_rn(dk[ko + n * 8 + x], ak[n][2 * e + x]);
        dv[ko + n * 8 + x] = __fadd_rn(dv[ko + n * 8 + x], av[n][2 * e + x]);
      }
  }
}

// ---- host side ----
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

#define FL_REF_MAXD 256

template <typename K>
int fl_prep(K kern, size_t smem) {
  if (smem > 48 * 1024) {
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return (int)e;
  }
  return 0;
}

int fl_ref_fwd(void *out, float *lse, const void *q, const void *k, const void *v, const fl_p &p, cudaStream_t st) {
  const dim3 grid((unsigned)((p.Tq + 127) / 128), (unsigned)p.Hq);
  if (p.D <= 64)
    ref_fwd_kernel<64><<<grid, 128, 0, st>>>(p, out, lse, q, k, v);
  else if (p.D <= 128)
    ref_fwd_kernel<128><<<grid, 128, 0, st>>>(p, out, lse, q, k, v);
  else
    ref_fwd_kernel<FL_REF_MAXD><<<grid, 128, 0, st>>>(p, out, lse, q, k, v);
  return (int)cudaGetLastError();
}

int fl_ref_bwd(float *dq, float *dk, float *dv, const void *dout, const void *q, const void *k, const void *v,
               const float *lse, const float *delta, const fl_p &p, cudaStream_t st) {
  const dim3 gq((unsigned)((p.Tq + 127) / 128), (unsigned)p.Hq), gk((unsigned)((p.Tk + 127) / 128), (unsigned)p.Hkv);
  if (p.D <= 64) {
    ref_bwd_dq_kernel<64><<<gq, 128, 0, st>>>(p, dq, dout, q, k, v, lse, delta);
    ref_bwd_dkv_kernel<64><<<gk, 128, 0, st>>>(p, dk, dv, dout, q, k, v, lse, delta);
  } else if (p.D <= 128) {
    ref_bwd_dq_kernel<128><<<gq, 128, 0, st>>>(p, dq, dout, q, k, v, lse, delta);
    ref_bwd_dkv_kernel<128><<<gk, 128, 0, st>>>(p, dk, dv, dout, q, k, v, lse, delta);
  } else {
    ref_bwd_dq_kernel<FL_REF_MAXD><<<gq, 128, 0, st>>>(p, dq, dout, q, k, v, lse, delta);
    ref_bwd_dkv_kernel<FL_REF_MAXD><<<gk, 128, 0, st>>>(p, dk, dv, dout, q, k, v, lse, delta);
  }
  return (int)cudaGetLastError();
}

template <int DM>
int fl_simt_fwd(void *out, float *lse, const void *q, const void *k, const void *v, const fl_p &p, cudaStream_t st) {
  const size_t smem = fl_fwd_smem<DM>();
  int e = fl_prep(simt_fwd_kernel<DM>, smem);
  if (e) return e;
  const dim3 grid((unsigned)((p.Tq + FL_BQ - 1) / FL_BQ), (unsigned)p.Hq);
  simt_fwd_kernel<DM><<<grid, FL_THREADS, smem, st>>>(p, out, lse, q, k, v);
  return (int)cudaGetLastError();
}

template <int DM>
int fl_simt_bwd(float *dq, float *dk, float *dv, const void *dout, const void *q, const void *k, const void *v,
                const float *lse, const float *delta, const fl_p &p, cudaStream_t st) {
  const size_t smem = fl_bwd_smem<DM>();
  int e = fl_prep(simt_bwd_dq_kernel<DM>, smem);
  if (!e) e = fl_prep(simt_bwd_dkv_kernel<DM>, smem);
  if (e) return e;
  const dim3 gq((unsigned)((p.Tq + FL_BQ - 1) / FL_BQ), (unsigned)p.Hq);
  const dim3 gk((unsigned)((p.Tk + FL_BK - 1) / FL_BK), (unsigned)p.Hkv);
  simt_bwd_dq_kernel<DM><<<gq, FL_THREADS, smem, st>>>(p, dq, dout, q, k, v, lse, delta);
  simt_bwd_dkv_kernel<DM><<<gk, FL_THREADS, smem, st>>>(p, dk, dv, dout, q, k, v, lse, delta);
  return (int)cudaGetLastError();
}

template <int D>
int fl_mma_fwd(void *out, float *lse, const void *q, const void *k, const void *v, const fl_p &p, cudaStream_t st) {
  const size_t smem = fl_mma_fwd_smem<D>();
  int e = fl_prep(mma_fwd_kernel<D>, smem);
  if (e) return e;
  const dim3 grid((unsigned)((p.Tq + FL_BQ - 1) / FL_BQ), (unsigned)p.Hq);
  mma_fwd_kernel<D><<<grid, FL_MMA_THREADS, smem, st>>>(p, out, lse, q, k, v);
  return (int)cudaGetLastError();
}

template <int D>
int fl_mma_bwd(float *dq, float *dk, float *dv, const void *dout, const void *q, const void *k, const void *v,
               const float *lse, const float *delta, const fl_p &p, cudaStream_t st) {
  const size_t sq = fl_mma_dq_smem<D>(), skv = fl_mma_dkv_smem<D>();
  int e = fl_prep(mma_bwd_dq_kernel<D>, sq);
  if (!e) e = fl_prep(mma_bwd_dkv_kernel<D>, skv);
  if (e) return e;
  const dim3 gq((unsigned)((p.Tq + FL_BQ - 1) / FL_BQ), (unsigned)p.Hq);
  const dim3 gk((unsigned)((p.Tk + FL_BK - 1) / FL_BK), (unsigned)p.Hkv);
  mma_bwd_dq_kernel<D><<<gq, FL_MMA_THREADS, sq, st>>>(p, dq, dout, q, k, v, lse, delta);
  mma_bwd_dkv_kernel<D><<<gk, FL_MMA_THREADS, skv, st>>>(p, dk, dv, dout, q, k, v, lse, delta);
  return (int)cudaGetLastError();
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
