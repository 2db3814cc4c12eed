// What the three tiers of the GPU's flash attention share (cuda_flash*.cu): the parameters, the
// scalar helpers bit-exact with the CPU, the block-wide min/max, and the tiers' launchers.
#ifndef LC_CUDA_FLASH_COMMON_CUH
#define LC_CUDA_FLASH_COMMON_CUH

#include "backend/cuda/cuda_compat.cuh"
#include <math.h>
#include <stdint.h>

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

// backend/cpu/flash/flash_prims.h exp2: degree-6 polynomial, x < -126 (and NaN) -> 0.
static __device__ __forceinline__ float fl_exp2(float x) {
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
static __device__ __forceinline__ uint32_t fl_narrow_bits(uint32_t u) {
  const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  const uint32_t nan = ((u & 0x7fffffffu) > 0x7f800000u) ? 0xffffffffu : 0u;
  return (nan & ((u & 0xffff0000u) | 0x00400000u)) | (~nan & r);
}
static __device__ __forceinline__ float fl_round(float x) { return __uint_as_float(fl_narrow_bits(__float_as_uint(x))); }
// The CPU rounds P and dS with vcvtne2ps2bf16, which treats subnormal inputs as zero.
static __device__ __forceinline__ float fl_round_daz(float x) {
  uint32_t u = __float_as_uint(x);
  if ((u & 0x7f800000u) == 0u) u &= 0x80000000u;
  return __uint_as_float(fl_narrow_bits(u));
}
static __device__ __forceinline__ uint16_t fl_narrow(float x) { return (uint16_t)(fl_narrow_bits(__float_as_uint(x)) >> 16); }

// Element i of an input: fp32 or bf16 bits (is16), widened exactly; bf16 products (rnd) round
// fp32 storage to bf16 as the CPU packs it (a no-op on bf16 values).
static __device__ __forceinline__ float fl_ld(const void *x, int is16, size_t i, int rnd) {
  if (is16) return __uint_as_float((uint32_t)((const uint16_t *)x)[i] << 16);
  const float v = ((const float *)x)[i];
  return rnd ? fl_round(v) : v;
}

static __device__ __forceinline__ long fl_clampk(long x, long Tk) { return x < 0 ? 0 : x > Tk ? Tk : x; }

// Keys [*beg, *end) (indices into k) visible to query row i.
static __device__ __forceinline__ void fl_row_range(const fl_p &p, long i, long *beg, long *end) {
  long e = p.Tk, b = 0;
  if (p.causal) e = fl_clampk(p.q_start + i - p.k_start + 1, p.Tk);
  if (p.lo) b = fl_clampk((long)p.lo[i] - p.k_start, p.Tk);
  *beg = b;
  *end = e;
}

static __device__ __forceinline__ float fl_lse2(float L) { return L == -INFINITY ? INFINITY : (float)((double)L * FL_LOG2E); }

static __device__ __forceinline__ void fl_store_out(void *out, int out16, size_t idx, float x) {
  if (out16)
    ((uint16_t *)out)[idx] = fl_narrow(x);
  else
    ((float *)out)[idx] = x;
}

// Dot product of two global rows a (k or v: kv16) and b (q or dout: q16), D elements, in the
// CPU's order: fp32: fma chain in d order with b[d] * bscale (bscale 1: exact); bf16: pairs,
// odd element first.
static __device__ __forceinline__ float fl_dot_g(const fl_p &p, const void *a, size_t ao, const void *b, size_t bo,
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

#define FL_REF_MAXD 256

// Block-wide min of a and max of b (NT threads; red: 16 longs of shared memory).
template <int NT>
static __device__ __forceinline__ void fl_block_minmax(long *a, long *b, long *red) {
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

template <typename K>
static int fl_prep(K kern, size_t smem) {
  if (smem > 48 * 1024) {
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return (int)e;
  }
  return 0;
}

// ---- the tiers' launchers (grid, shared memory, kernels on stream st) ----
// Reference kernels, any D up to FL_REF_MAXD (cuda_flash_ref.cu).
int fl_ref_fwd(void *out, float *lse, const void *q, const void *k, const void *v, const fl_p &p, cudaStream_t st);
int fl_ref_bwd(float *dq, float *dk, float *dv, const void *dout, const void *q, const void *k, const void *v,
               const float *lse, const float *delta, const fl_p &p, cudaStream_t st);
// Tiled SIMT kernels, D <= DM for DM = 32, 64, 128 (cuda_flash_simt.cu).
template <int DM>
int fl_simt_fwd(void *out, float *lse, const void *q, const void *k, const void *v, const fl_p &p, cudaStream_t st);
template <int DM>
int fl_simt_bwd(float *dq, float *dk, float *dv, const void *dout, const void *q, const void *k, const void *v,
                const float *lse, const float *delta, const fl_p &p, cudaStream_t st);
// Tensor-core kernels, bf16 = 1 and D = 64 or 128 (cuda_flash_mma.cu).
template <int D>
int fl_mma_fwd(void *out, float *lse, const void *q, const void *k, const void *v, const fl_p &p, cudaStream_t st);
template <int D>
int fl_mma_bwd(float *dq, float *dk, float *dv, const void *dout, const void *q, const void *k, const void *v,
               const float *lse, const float *delta, const fl_p &p, cudaStream_t st);

#endif
