// The CUDA backend's element-wise kernels (cuda_kern.h): casts, flat fp32 ranges, RMSNorm,
// RoPE, SwiGLU, bias, embedding, and the attention merge / delta.
//
// Every entry computes what its CPU reference computes, with the same fp32 operations in the
// same order per element. The CPU is ISO C (GCC: no floating-point contraction), so every
// fp32 multiply / add / subtract / divide / sqrt that could be fused or approximated here is
// written as an explicit round-to-nearest intrinsic (__fmul_rn, __fadd_rn, __fsub_rn,
// __fdiv_rn, __fsqrt_rn; __dadd_rn, __dmul_rn, __ddiv_rn, __dsqrt_rn in double): nvcc never
// contracts these into FMAs, and they stay IEEE whatever -prec-div / -prec-sqrt / -fmad say
// (denormals: these assume -ftz=false, nvcc's default without --use_fast_math, as the CPU).
//
// Sums: no atomics anywhere. Where the CPU sums in fp32 sequentially (bias db, embedding
// dwte, attention delta), one thread walks the same sequence in the same order, so the bits
// are the CPU's. Where the CPU sums in double (RMSNorm's row sums, sumsq), the sums here are
// in double in another fixed order (a fixed per-thread stride, then a fixed shuffle / shared
// tree). RMSNorm's dw (fp32 sequential over t on the CPU) is summed here in double over fixed
// row chunks into `parts`, then in chunk order onto dw: higher precision, different bits.
#include "backend/cuda/cuda_kern.h"
#include "backend/cuda/cuda_fastexp.cuh"
#include "core/dropout_hash.h"

#include "backend/cuda/cuda_compat.cuh"
#include <stdint.h>

namespace {

// ------------------------------------------------------------------ launch helpers

constexpr int kThreads = 256;          // 1-D block size of the flat kernels
constexpr size_t kMaxBlocks = 65535;   // grid cap of the flat kernels (grid-stride loops)
constexpr unsigned kMaxGridY = 65535;  // gridDim.y / .z hardware limit

inline unsigned flat_blocks(size_t n) {
  size_t b = (n + kThreads - 1) / kThreads;
  return (unsigned)(b < kMaxBlocks ? b : kMaxBlocks);
}

// A [rows, cols] launch: threads along cols (x, a multiple of 32 up to 256), rows along y.
struct Grid2d {
  dim3 grid, block;
};
inline Grid2d grid2d(size_t rows, size_t cols) {
  Grid2d g;
  unsigned bx = 32;
  while (bx < 256 && bx < cols) bx *= 2;
  const unsigned by = 256 / bx;
  size_t gx = (cols + bx - 1) / bx;
  if (gx > 1024) gx = 1024;
  size_t gy = (rows + by - 1) / by;
  if (gy > kMaxGridY) gy = kMaxGridY;
  g.block = dim3(bx, by, 1);
  g.grid = dim3((unsigned)gx, (unsigned)gy, 1);
  return g;
}

inline int last_error() { return (int)cudaGetLastError(); }

// ------------------------------------------------------------------ scalar rules

// lc_bf16_narrow_bits (core/dtype.h): round to nearest even, NaN -> quiet NaN (upper bits).
__device__ __forceinline__ uint32_t bf16_narrow_bits(uint32_t u) {
  const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  const uint32_t nan = ((u & 0x7fffffffu) > 0x7f800000u) ? 0xffffffffu : 0u;
  return (nan & ((u & 0xffff0000u) | 0x00400000u)) | (~nan & r);
}
__device__ __forceinline__ uint16_t bf16_narrow(float f) {
  return (uint16_t)(bf16_narrow_bits(__float_as_uint(f)) >> 16);
}
__device__ __forceinline__ float bf16_widen(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
__device__ __forceinline__ float bf16_round1(float f) { return __uint_as_float(bf16_narrow_bits(__float_as_uint(f))); }

// Element i of an fp32 or (is16) bf16 array, as a float (exact).
__device__ __forceinline__ float elem_f32(const void *x, int is16, size_t i) {
  return is16 ? bf16_widen(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}

__device__ __forceinline__ float neg_inf_f() { return __uint_as_float(0xff800000u); }

// fast_expf: cuda_fastexp.cuh
__device__ __forceinline__ float fast_expf(float x) { return lcc_fast_expf(x); }

// swiglu1 / swiglu1_bwd (backend/cpu/ops/swiglu.c).
__device__ __forceinline__ float swiglu1(float gi, float ui) {
  const float e = fast_expf(-fabsf(gi));
  const float d = __fdiv_rn(1.0f, __fadd_rn(1.0f, e));
  const float sig = gi >= 0.0f ? d : __fmul_rn(e, d);
  return __fmul_rn(__fmul_rn(gi, sig), ui);
}
__device__ __forceinline__ void swiglu1_bwd(float gi, float ui, float dhi, float *dg, float *du) {
  const float e = fast_expf(-fabsf(gi));
  const float d = __fdiv_rn(1.0f, __fadd_rn(1.0f, e));
  const float sig = gi >= 0.0f ? d : __fmul_rn(e, d);
  const float sigm = gi >= 0.0f ? __fmul_rn(e, d) : d;
  *du = __fmul_rn(dhi, __fmul_rn(gi, sig));
  *dg = __fmul_rn(__fmul_rn(__fmul_rn(dhi, ui), sig), __fadd_rn(1.0f, __fmul_rn(gi, sigm)));
}

// ------------------------------------------------------------------ reductions (fixed order)

__device__ __forceinline__ double warp_sum_d(double v) {
  for (int off = 16; off > 0; off >>= 1) v = __dadd_rn(v, __shfl_down_sync(0xffffffffu, v, off));
  return v; // lane 0 holds the sum
}

// The sum of v over the block (blockDim.x a multiple of 32, at most 1024), the same tree every
// time; every thread gets it. sh: 32 doubles of shared memory; safe to call repeatedly.
__device__ double block_sum_d(double v, double *sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum_d(v);
  __syncthreads(); // earlier readers of sh are done
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    double w = lane < nw ? sh[lane] : 0.0;
    w = warp_sum_d(w);
    if (lane == 0) sh[0] = w;
  }
  __syncthreads();
  return sh[0];
}

// ------------------------------------------------------------------ casts

__global__ void k_bf16_pack(uint16_t *__restrict__ dst, const float *__restrict__ src, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = bf16_narrow(src[i]);
}

__global__ void k_bf16_unpack(float *__restrict__ dst, const uint16_t *__restrict__ src, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = bf16_widen(src[i]);
}

__global__ void k_bf16_round(float *x, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    x[i] = bf16_round1(x[i]);
}

__global__ void k_bf16_pack2d(uint16_t *__restrict__ dst, size_t ldd, const float *__restrict__ src, size_t lds,
                              size_t rows, size_t cols) {
  for (size_t r = (size_t)blockIdx.y * blockDim.y + threadIdx.y; r < rows; r += (size_t)gridDim.y * blockDim.y)
    for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (size_t)gridDim.x * blockDim.x)
      dst[r * ldd + c] = bf16_narrow(src[r * lds + c]);
}

__global__ void k_bf16_unpack2d(float *__restrict__ dst, size_t ldd, const uint16_t *__restrict__ src, size_t lds,
                                size_t rows, size_t cols) {
  for (size_t r = (size_t)blockIdx.y * blockDim.y + threadIdx.y; r < rows; r += (size_t)gridDim.y * blockDim.y)
    for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (size_t)gridDim.x * blockDim.x)
      dst[r * ldd + c] = bf16_widen(src[r * lds + c]);
}

// ------------------------------------------------------------------ flat fp32 ranges

__global__ void k_add(float *y, const void *x, int x16, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = __fadd_rn(y[i], elem_f32(x, x16, i));
}

__global__ void k_scale(float *x, size_t n, float s) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    x[i] = __fmul_rn(x[i], s);
}

__global__ void k_fill(float *x, size_t n, float v) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    x[i] = v;
}

__global__ void k_add2d(float *dst, size_t ldd, const float *src, size_t lds, size_t rows, size_t n) {
  for (size_t r = (size_t)blockIdx.y * blockDim.y + threadIdx.y; r < rows; r += (size_t)gridDim.y * blockDim.y)
    for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < n; c += (size_t)gridDim.x * blockDim.x)
      dst[r * ldd + c] = __fadd_rn(dst[r * ldd + c], src[r * lds + c]);
}

// Part j (block j) of LCC_SUMSQ_PARTS sums x[i]^2 in double over [b_j, e_j): a fixed
// per-thread stride, then the fixed block tree.
__global__ void k_sumsq_parts(double *parts, const float *__restrict__ x, size_t n) {
  LCC_SHARED(double, sh, [32]);
  const size_t P = LCC_SUMSQ_PARTS, q = n / P, rem = n % P;
  for (size_t j = blockIdx.x; j < P; j += gridDim.x) {
    const size_t b = q * j + (j < rem ? j : rem), e = b + q + (j < rem ? 1 : 0);
    double s = 0.0;
    for (size_t i = b + threadIdx.x; i < e; i += blockDim.x) {
      const double xi = (double)x[i];
      s = __dadd_rn(s, __dmul_rn(xi, xi));
    }
    s = block_sum_d(s, sh);
    if (threadIdx.x == 0) parts[j] = s;
  }
}

__global__ void k_sumsq_final(double *acc, const double *parts) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  double a = *acc;
  for (int j = 0; j < LCC_SUMSQ_PARTS; j++) a = __dadd_rn(a, parts[j]);
  *acc = a;
}

// kern_ew.h adamw, per element:
//   m = b1 m + (1-b1) g; v = b2 v + ((1-b2) g) g; denom = sqrt(v) inv_sqrt_bc2 + eps;
//   p = p - ((lr wd) p + (step_size m) / denom)
__global__ void k_adamw(float *__restrict__ p, const float *__restrict__ g, float *__restrict__ m,
                        float *__restrict__ v, size_t n, float wd, float b1, float b2, float eps, float lr,
                        float step_size, float inv_sqrt_bc2) {
  const float omb1 = __fsub_rn(1.0f, b1), omb2 = __fsub_rn(1.0f, b2), lrwd = __fmul_rn(lr, wd);
  for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += (size_t)gridDim.x * blockDim.x) {
    const float gj = g[j];
    const float mj = __fadd_rn(__fmul_rn(b1, m[j]), __fmul_rn(omb1, gj));
    const float vj = __fadd_rn(__fmul_rn(b2, v[j]), __fmul_rn(__fmul_rn(omb2, gj), gj));
    m[j] = mj;
    v[j] = vj;
    const float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(vj), inv_sqrt_bc2), eps);
    const float pj = p[j];
    p[j] = __fsub_rn(pj, __fadd_rn(__fmul_rn(lrwd, pj), __fdiv_rn(__fmul_rn(step_size, mj), denom)));
  }
}

// ------------------------------------------------------------------ RMSNorm

constexpr int kNormThreads = 256;

// One block per row: rstd = (float)(1 / sqrt(ss / C + eps)) with ss the double sum of x^2;
// out = (x * rstd) * w (fp32, or rounded to bf16). x: fp32, or (in16) bf16 widened exactly.
__global__ void __launch_bounds__(kNormThreads) k_rmsnorm_fwd(void *out, int out16, float *rstd,
                                                              const void *inp, int in16,
                                                              const float *__restrict__ w, int T, int C, float eps) {
  LCC_SHARED(double, sh, [32]);
  for (int t = blockIdx.x; t < T; t += gridDim.x) {
    const size_t row = (size_t)t * C;
#define X(c) elem_f32(inp, in16, row + (size_t)(c))
    double ss = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      const double xc = (double)X(c);
      ss = __dadd_rn(ss, __dmul_rn(xc, xc));
    }
    ss = block_sum_d(ss, sh);
    const float r = (float)__ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(__ddiv_rn(ss, (double)C), (double)eps)));
    if (threadIdx.x == 0) rstd[t] = r;
    if (out16) {
      uint16_t *o = (uint16_t *)out + (size_t)t * C;
      for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = bf16_narrow(__fmul_rn(__fmul_rn(X(c), r), w[c]));
    } else {
      float *o = (float *)out + (size_t)t * C;
      for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = __fmul_rn(__fmul_rn(X(c), r), w[c]);
    }
#undef X
  }
}

// dw's row chunks: chunk j of nch covers rows [j*R, min(T, (j+1)*R)), R = ceil(T / nch).
constexpr int kDwMinRows = 16; // rows per chunk at least (about)
constexpr int kDwMaxChunks = 128;
inline int dw_chunks(int T) {
  if (T <= 0) return 0;
  int n = (T + kDwMinRows - 1) / kDwMinRows;
  return n < kDwMaxChunks ? n : kDwMaxChunks;
}
constexpr int kColThreads = 128;

// parts[j*C + c] = sum over chunk j's rows t (ascending) of (double)((dy * x) * r), in double.
__global__ void __launch_bounds__(kColThreads) k_rmsnorm_dw_parts(double *parts, const float *dout,
                                                                  const void *__restrict__ inp, int in16,
                                                                  const float *__restrict__ rstd, int T, int C,
                                                                  int R) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y;
  if (c >= C) return;
  const int t0 = j * R, t1 = t0 + R < T ? t0 + R : T;
  double s = 0.0;
  for (int t = t0; t < t1; t++) {
    const size_t i = (size_t)t * C + c;
    s = __dadd_rn(s, (double)__fmul_rn(__fmul_rn(dout[i], elem_f32(inp, in16, i)), rstd[t]));
  }
  parts[(size_t)j * C + c] = s;
}

// dw[c] = (float)(dw[c] + parts[0][c] + parts[1][c] + ...), in double, chunk order.
__global__ void __launch_bounds__(kColThreads) k_rmsnorm_dw_final(float *dw, const double *__restrict__ parts,
                                                                  int C, int nch) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  double a = (double)dw[c];
  for (int j = 0; j < nch; j++) a = __dadd_rn(a, parts[(size_t)j * C + c]);
  dw[c] = (float)a;
}

// One block per row: dot = sum (double)(dy*w) * x in double; k = (float)(r^3 dot / C) in
// double; dx (+)= (r*dy)*w - x*k in fp32. dinp may be dout: the dot's reads end at the block
// sum's barriers, and each element is then read and written by one thread.
__global__ void __launch_bounds__(kNormThreads) k_rmsnorm_dx(float *dinp, const float *dout,
                                                             const void *inp, int in16,
                                                             const float *__restrict__ w,
                                                             const float *__restrict__ rstd, int T, int C, int set) {
  LCC_SHARED(double, sh, [32]);
  for (int t = blockIdx.x; t < T; t += gridDim.x) {
    const float *dy = dout + (size_t)t * C;
    const size_t row = (size_t)t * C;
#define X(c) elem_f32(inp, in16, row + (size_t)(c))
    float *dx = dinp + (size_t)t * C;
    const float r = rstd[t];
    double dot = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
      dot = __dadd_rn(dot, __dmul_rn((double)__fmul_rn(dy[c], w[c]), (double)X(c)));
    dot = block_sum_d(dot, sh);
    const double rd = (double)r;
    const float k = (float)__ddiv_rn(__dmul_rn(__dmul_rn(__dmul_rn(rd, rd), rd), dot), (double)C);
    if (set) {
      for (int c = threadIdx.x; c < C; c += blockDim.x)
        dx[c] = __fsub_rn(__fmul_rn(__fmul_rn(r, dy[c]), w[c]), __fmul_rn(X(c), k));
    } else {
      for (int c = threadIdx.x; c < C; c += blockDim.x)
        dx[c] = __fadd_rn(dx[c], __fsub_rn(__fmul_rn(__fmul_rn(r, dy[c]), w[c]), __fmul_rn(X(c), k)));
    }
#undef X
  }
}

inline unsigned row_blocks(int T) { return (unsigned)(T < 65535 * 16 ? T : 65535 * 16); }

// ------------------------------------------------------------------ RoPE

// x [T,H,D]: row = t*H + h; lanes (x) over the pair index i < D/2, rows along y.
__global__ void k_rope(float *x, const float *__restrict__ cos_t, const float *__restrict__ sin_t, int T, int H,
                       int D, int bwd) {
  const int half = D / 2;
  const size_t rows = (size_t)T * H;
  for (size_t row = (size_t)blockIdx.y * blockDim.y + threadIdx.y; row < rows; row += (size_t)gridDim.y * blockDim.y) {
    const size_t t = row / (size_t)H;
    const float *cs = cos_t + t * half, *sn = sin_t + t * half;
    float *lo = x + row * D, *hi = lo + half;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < half; i += gridDim.x * blockDim.x) {
      const float a = lo[i], b = hi[i], c = cs[i], s = sn[i];
      if (bwd) {
        lo[i] = __fadd_rn(__fmul_rn(a, c), __fmul_rn(b, s));
        hi[i] = __fsub_rn(__fmul_rn(b, c), __fmul_rn(a, s));
      } else {
        lo[i] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
        hi[i] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
      }
    }
  }
}

// ------------------------------------------------------------------ SwiGLU

__global__ void k_swiglu_fwd(float *h, const float *g, const float *u, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    h[i] = swiglu1(g[i], u[i]);
}

__global__ void k_swiglu_fwd16(uint16_t *h, const uint16_t *g, const uint16_t *u, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    h[i] = bf16_narrow(swiglu1(bf16_widen(g[i]), bf16_widen(u[i])));
}

__global__ void k_swiglu_bwd(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float a, b;
    swiglu1_bwd(g[i], u[i], dh[i], &a, &b);
    dg[i] = a;
    du[i] = b;
  }
}

__global__ void k_swiglu_bwd16(uint16_t *dg, uint16_t *du, const float *dh, const uint16_t *g, const uint16_t *u,
                               size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float a, b;
    swiglu1_bwd(bf16_widen(g[i]), bf16_widen(u[i]), dh[i], &a, &b);
    dg[i] = bf16_narrow(a);
    du[i] = bf16_narrow(b);
  }
}

// ------------------------------------------------------------------ bias

__global__ void k_bias_fwd(float *y, const float *__restrict__ b, int T, int N) {
  for (size_t t = (size_t)blockIdx.y * blockDim.y + threadIdx.y; t < (size_t)T; t += (size_t)gridDim.y * blockDim.y)
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < N; c += gridDim.x * blockDim.x) {
      const size_t i = t * N + c;
      y[i] = __fadd_rn(y[i], b[c]);
    }
}

// One thread per column: db[c] += dy[0][c], += dy[1][c], ... in fp32 (the CPU's order).
constexpr int kBiasThreads = 64;
__global__ void __launch_bounds__(kBiasThreads) k_bias_bwd(float *db, const void *__restrict__ dy, int dy16, int T,
                                                           int N) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= N) return;
  float a = db[c];
  if (dy16) {
    const uint16_t *d = (const uint16_t *)dy;
#pragma unroll 8
    for (int t = 0; t < T; t++) a = __fadd_rn(a, bf16_widen(d[(size_t)t * N + c]));
  } else {
    const float *d = (const float *)dy;
#pragma unroll 8
    for (int t = 0; t < T; t++) a = __fadd_rn(a, d[(size_t)t * N + c]);
  }
  db[c] = a;
}

// ------------------------------------------------------------------ embedding

__global__ void k_embedding_fwd(float *__restrict__ out, const int *__restrict__ tokens, const void *__restrict__ wte,
                                int wte16, int T, int C, int r0, int r1) {
  for (int t = blockIdx.y * blockDim.y + threadIdx.y; t < T; t += gridDim.y * blockDim.y) {
    const int tok = tokens[t];
    if (tok < r0 || tok >= r1) continue;
    const size_t src = (size_t)(tok - r0) * C, dst = (size_t)t * C;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x)
      out[dst + c] = elem_f32(wte, wte16, src + c);
  }
}

// Threads own columns (x) and a slice of the table rows (blockIdx.y: rows with row % S == y).
// Per chunk of tokens the block lists, in increasing t, the tokens whose row is in its slice
// (an order-keeping compaction in shared memory); each thread then walks that list in order,
// so each dwte element gets its dout rows added in increasing t by one thread (the CPU's
// fp32 order, race-free).
constexpr int kEmbThreads = 128;
constexpr int kEmbChunk = 1024; // tokens examined per chunk
__global__ void __launch_bounds__(kEmbThreads) k_embedding_bwd(float *__restrict__ dwte, const float *__restrict__ dout,
                                                               const int *__restrict__ tokens, int T, int C, int r0,
                                                               int r1, int S) {
  LCC_SHARED(int, sk, [kEmbChunk]);
  LCC_SHARED(int, srow, [kEmbChunk]);
  LCC_SHARED(int, scnt, [kEmbThreads / 32]);
  const int c = blockIdx.x * blockDim.x + threadIdx.x, slice = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int t0 = 0; t0 < T; t0 += kEmbChunk) {
    const int m = T - t0 < kEmbChunk ? T - t0 : kEmbChunk;
    int cnt = 0; // entries listed so far in this chunk (the same in every thread)
    __syncthreads(); // the previous chunk's readers of sk / srow are done
    for (int p = 0; p < m; p += blockDim.x) {
      const int k = p + threadIdx.x;
      int row = -1;
      if (k < m) {
        const int tok = tokens[t0 + k];
        if (tok >= r0 && tok < r1) {
          row = tok - r0;
          if (row % S != slice) row = -1;
        }
      }
      const unsigned bal = __ballot_sync(0xffffffffu, row >= 0);
      if (lane == 0) scnt[warp] = __popc(bal);
      __syncthreads();
      int off = cnt, tot = 0;
      for (int wv = 0; wv < nw; wv++) {
        const int cw = scnt[wv];
        if (wv < warp) off += cw;
        tot += cw;
      }
      if (row >= 0) {
        const int pos = off + __popc(bal & ((1u << lane) - 1u));
        sk[pos] = t0 + k;
        srow[pos] = row;
      }
      cnt += tot;
      __syncthreads(); // scnt is reused; the list is complete after the last pass
    }
    if (c < C) {
      for (int e = 0; e < cnt; e++) {
        const size_t d = (size_t)srow[e] * C + c;
        dwte[d] = __fadd_rn(dwte[d], dout[(size_t)sk[e] * C + c]);
      }
    }
  }
}

// ------------------------------------------------------------------ attention merge / delta

// One warp per row r = t*Hq + h (lse index h*Tq + t); the CPU's branches and double weights.
constexpr int kMergeThreads = 128;
__global__ void __launch_bounds__(kMergeThreads) k_attn_merge(float *out_a, float *lse_a, const float *out_b,
                                                              const float *lse_b, int Tq, int Hq, int D) {
  const int lane = threadIdx.x & 31, wpb = blockDim.x >> 5;
  const size_t n = (size_t)Tq * Hq;
  const float ninf = neg_inf_f();
  for (size_t r = (size_t)blockIdx.x * wpb + (threadIdx.x >> 5); r < n; r += (size_t)gridDim.x * wpb) {
    const size_t t = r / (size_t)Hq, h = r % (size_t)Hq, li = h * (size_t)Tq + t;
    float *oa = out_a + r * D;
    const float *ob = out_b + r * D;
    const float la = lse_a[li], lb = lse_b[li];
    __syncwarp(); // every lane has read lse_a[li] before lane 0 may write it
    if (lb == ninf) {
      if (la == ninf)
        for (int d = lane; d < D; d += 32) oa[d] = 0.0f;
      continue;
    }
    if (la == ninf) {
      if (lane == 0) lse_a[li] = lb;
      for (int d = lane; d < D; d += 32) oa[d] = ob[d];
      continue;
    }
    const double mx = la > lb ? la : lb, mn = la > lb ? lb : la;
    const double l = __dadd_rn(mx, log1p(exp(__dsub_rn(mn, mx))));
    const float wa = (float)exp(__dsub_rn((double)la, l)), wb = (float)exp(__dsub_rn((double)lb, l));
    for (int d = lane; d < D; d += 32) oa[d] = __fadd_rn(__fmul_rn(wa, oa[d]), __fmul_rn(wb, ob[d]));
    if (lane == 0) lse_a[li] = (float)l;
  }
}

// delta[h*Tq + t] = sum over d ascending of dout*out (fp32, the CPU's sequential order). Each
// warp takes 32 consecutive rows; 32-column tiles of both operands go through shared memory
// (coalesced loads), then lane j adds up row j's tile in order.
constexpr int kDeltaWarps = 4;
__global__ void __launch_bounds__(kDeltaWarps * 32) k_attn_delta(float *delta, const void *__restrict__ dout,
                                                                 const void *__restrict__ out, int in16, int Tq,
                                                                 int Hq, int D) {
  LCC_SHARED(float, sa, [kDeltaWarps][32][33]);
  LCC_SHARED(float, sb, [kDeltaWarps][32][33]);
  const int lane = threadIdx.x & 31, wi = threadIdx.x >> 5;
  const size_t n = (size_t)Tq * Hq;
  for (size_t r0 = ((size_t)blockIdx.x * kDeltaWarps + wi) * 32; r0 < n; r0 += (size_t)gridDim.x * kDeltaWarps * 32) {
    const int nr = n - r0 < 32 ? (int)(n - r0) : 32;
    float acc = 0.0f;
    for (int d0 = 0; d0 < D; d0 += 32) {
      const int nd = D - d0 < 32 ? D - d0 : 32;
      __syncwarp();
      if (lane < nd)
        for (int j = 0; j < nr; j++) {
          const size_t i = (r0 + j) * (size_t)D + d0 + lane;
          sa[wi][j][lane] = elem_f32(dout, in16, i);
          sb[wi][j][lane] = elem_f32(out, in16, i);
        }
      __syncwarp();
      if (lane < nr)
        for (int k = 0; k < nd; k++) acc = __fadd_rn(acc, __fmul_rn(sa[wi][lane][k], sb[wi][lane][k]));
    }
    if (lane < nr) {
      const size_t r = r0 + lane, t = r / (size_t)Hq, h = r % (size_t)Hq;
      delta[h * (size_t)Tq + t] = acc;
    }
  }
}

} // namespace

// ====================================================================== entries

extern "C" {

int lcc_bf16_pack(uint16_t *dst, const float *src, size_t n, cudaStream_t st) {
  if (n == 0) return 0;
  LCC_LAUNCH(k_bf16_pack, flat_blocks(n), kThreads, 0, st)(dst, src, n);
  return last_error();
}

int lcc_bf16_unpack(float *dst, const uint16_t *src, size_t n, cudaStream_t st) {
  if (n == 0) return 0;
  LCC_LAUNCH(k_bf16_unpack, flat_blocks(n), kThreads, 0, st)(dst, src, n);
  return last_error();
}

int lcc_bf16_round(float *x, size_t n, cudaStream_t st) {
  if (n == 0) return 0;
  LCC_LAUNCH(k_bf16_round, flat_blocks(n), kThreads, 0, st)(x, n);
  return last_error();
}

int lcc_bf16_pack2d(uint16_t *dst, size_t ldd, const float *src, size_t lds, size_t rows, size_t cols,
                    cudaStream_t st) {
  if (rows == 0 || cols == 0) return 0;
  const Grid2d g = grid2d(rows, cols);
  LCC_LAUNCH(k_bf16_pack2d, g.grid, g.block, 0, st)(dst, ldd, src, lds, rows, cols);
  return last_error();
}

int lcc_bf16_unpack2d(float *dst, size_t ldd, const uint16_t *src, size_t lds, size_t rows, size_t cols,
                      cudaStream_t st) {
  if (rows == 0 || cols == 0) return 0;
  const Grid2d g = grid2d(rows, cols);
  LCC_LAUNCH(k_bf16_unpack2d, g.grid, g.block, 0, st)(dst, ldd, src, lds, rows, cols);
  return last_error();
}

int lcc_add(float *y, const void *x, int x16, size_t n, cudaStream_t st) {
  if (n == 0) return 0;
  LCC_LAUNCH(k_add, flat_blocks(n), kThreads, 0, st)(y, x, x16, n);
  return last_error();
}

int lcc_scale(float *x, size_t n, float s, cudaStream_t st) {
  if (n == 0) return 0;
  LCC_LAUNCH(k_scale, flat_blocks(n), kThreads, 0, st)(x, n, s);
  return last_error();
}

int lcc_fill(float *x, size_t n, float v, cudaStream_t st) {
  if (n == 0) return 0;
  LCC_LAUNCH(k_fill, flat_blocks(n), kThreads, 0, st)(x, n, v);
  return last_error();
}

// LoRA dropout's mask (lc_dropout_mask): a kept element copied (or added), a dropped one 0.
__global__ void k_dropout(float *dst, const float *src, size_t rows, size_t cols, const int *gidx, uint64_t key,
                          uint32_t thr, int acc) {
  for (size_t r = (size_t)blockIdx.y * blockDim.y + threadIdx.y; r < rows; r += (size_t)gridDim.y * blockDim.y)
    for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (size_t)gridDim.x * blockDim.x) {
      const int keep = lc_dropout_bits(key, (uint32_t)gidx[r], (uint32_t)c) >= thr;
      const size_t i = r * cols + c;
      if (acc) {
        if (keep) dst[i] = __fadd_rn(dst[i], src[i]);
      } else {
        dst[i] = keep ? src[i] : 0.0f;
      }
    }
}
__global__ void k_dropout16(uint16_t *dst, const uint16_t *src, size_t rows, size_t cols, const int *gidx,
                            uint64_t key, uint32_t thr) {
  for (size_t r = (size_t)blockIdx.y * blockDim.y + threadIdx.y; r < rows; r += (size_t)gridDim.y * blockDim.y)
    for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (size_t)gridDim.x * blockDim.x) {
      const size_t i = r * cols + c;
      dst[i] = lc_dropout_bits(key, (uint32_t)gidx[r], (uint32_t)c) >= thr ? src[i] : (uint16_t)0;
    }
}

int lcc_dropout(void *dst, const void *src, int bf16, int rows, int cols, const int *gidx, uint64_t key, uint32_t thr,
                int accumulate, cudaStream_t st) {
  if (rows <= 0 || cols <= 0) return 0;
  const Grid2d g = grid2d((size_t)rows, (size_t)cols);
  if (bf16)
    LCC_LAUNCH(k_dropout16, g.grid, g.block, 0, st)((uint16_t *)dst, (const uint16_t *)src, rows, cols, gidx, key, thr);
  else
    LCC_LAUNCH(k_dropout, g.grid, g.block, 0, st)((float *)dst, (const float *)src, rows, cols, gidx, key, thr, accumulate);
  return last_error();
}

int lcc_add2d(float *dst, size_t ld_dst, const float *src, size_t ld_src, size_t rows, size_t n, cudaStream_t st) {
  if (rows == 0 || n == 0) return 0;
  const Grid2d g = grid2d(rows, n);
  LCC_LAUNCH(k_add2d, g.grid, g.block, 0, st)(dst, ld_dst, src, ld_src, rows, n);
  return last_error();
}

int lcc_sumsq_acc(double *acc, const float *x, size_t n, double *parts, cudaStream_t st) {
  if (n == 0) return 0;
  LCC_LAUNCH(k_sumsq_parts, LCC_SUMSQ_PARTS, kThreads, 0, st)(parts, x, n);
  int e = last_error();
  if (e) return e;
  LCC_LAUNCH(k_sumsq_final, 1, 32, 0, st)(acc, parts);
  return last_error();
}

int lcc_adamw(float *p, const float *g, float *m, float *v, size_t n, float wd, float beta1, float beta2, float eps,
              float lr, float step_size, float inv_sqrt_bc2, cudaStream_t st) {
  if (n == 0) return 0;
  LCC_LAUNCH(k_adamw, flat_blocks(n), kThreads, 0, st)(p, g, m, v, n, wd, beta1, beta2, eps, lr, step_size, inv_sqrt_bc2);
  return last_error();
}

int lcc_rmsnorm_fwd(void *out, int out16, float *rstd, const void *x, int x16, const float *w, int T, int C, float eps,
                    cudaStream_t st) {
  if (T <= 0 || C <= 0) return 0;
  LCC_LAUNCH(k_rmsnorm_fwd, row_blocks(T), kNormThreads, 0, st)(out, out16, rstd, x, x16, w, T, C, eps);
  return last_error();
}

size_t lcc_rmsnorm_bwd_parts_bytes(int T, int C) {
  if (T <= 0 || C <= 0) return 0;
  return (size_t)dw_chunks(T) * (size_t)C * sizeof(double);
}

int lcc_rmsnorm_bwd(float *dinp, float *dw, const float *dout, const void *inp, int in16, const float *w,
                    const float *rstd, int T, int C, int set, void *parts, cudaStream_t st) {
  if (T <= 0 || C <= 0) return 0;
  // dw first: dinp may be dout.
  if (dw) {
    if (!parts) return (int)cudaErrorInvalidValue;
    const int nch = dw_chunks(T), R = (T + nch - 1) / nch;
    const dim3 grid((unsigned)((C + kColThreads - 1) / kColThreads), (unsigned)nch, 1);
    LCC_LAUNCH(k_rmsnorm_dw_parts, grid, kColThreads, 0, st)((double *)parts, dout, inp, in16, rstd, T, C, R);
    int e = last_error();
    if (e) return e;
    LCC_LAUNCH(k_rmsnorm_dw_final, (unsigned)((C + kColThreads - 1) / kColThreads), kColThreads, 0, st)(
        dw, (const double *)parts, C, nch);
    e = last_error();
    if (e) return e;
  }
  LCC_LAUNCH(k_rmsnorm_dx, row_blocks(T), kNormThreads, 0, st)(dinp, dout, inp, in16, w, rstd, T, C, set);
  return last_error();
}

int lcc_rope(float *x, const float *cos_t, const float *sin_t, int T, int H, int D, int bwd, cudaStream_t st) {
  if (T <= 0 || H <= 0 || D < 2) return 0;
  const Grid2d g = grid2d((size_t)T * H, (size_t)(D / 2));
  LCC_LAUNCH(k_rope, g.grid, g.block, 0, st)(x, cos_t, sin_t, T, H, D, bwd);
  return last_error();
}

int lcc_swiglu_fwd(void *h, const void *g, const void *u, size_t n, int bf16, cudaStream_t st) {
  if (n == 0) return 0;
  if (bf16)
    LCC_LAUNCH(k_swiglu_fwd16, flat_blocks(n), kThreads, 0, st)((uint16_t *)h, (const uint16_t *)g, (const uint16_t *)u, n);
  else
    LCC_LAUNCH(k_swiglu_fwd, flat_blocks(n), kThreads, 0, st)((float *)h, (const float *)g, (const float *)u, n);
  return last_error();
}

int lcc_swiglu_bwd(void *dg, void *du, const float *dh, const void *g, const void *u, size_t n, int bf16,
                   cudaStream_t st) {
  if (n == 0) return 0;
  if (bf16)
    LCC_LAUNCH(k_swiglu_bwd16, flat_blocks(n), kThreads, 0, st)((uint16_t *)dg, (uint16_t *)du, dh, (const uint16_t *)g,
                                                        (const uint16_t *)u, n);
  else
    LCC_LAUNCH(k_swiglu_bwd, flat_blocks(n), kThreads, 0, st)((float *)dg, (float *)du, dh, (const float *)g,
                                                      (const float *)u, n);
  return last_error();
}

int lcc_bias_fwd(float *y, const float *b, int T, int N, cudaStream_t st) {
  if (T <= 0 || N <= 0) return 0;
  const Grid2d g = grid2d((size_t)T, (size_t)N);
  LCC_LAUNCH(k_bias_fwd, g.grid, g.block, 0, st)(y, b, T, N);
  return last_error();
}

int lcc_bias_bwd(float *db, const void *dy, int dy16, int T, int N, cudaStream_t st) {
  if (T <= 0 || N <= 0) return 0;
  LCC_LAUNCH(k_bias_bwd, (unsigned)((N + kBiasThreads - 1) / kBiasThreads), kBiasThreads, 0, st)(db, dy, dy16, T, N);
  return last_error();
}

int lcc_embedding_fwd(float *out, const int *tokens, const void *wte, int wte16, int T, int C, int r0, int r1,
                      cudaStream_t st) {
  if (T <= 0 || C <= 0 || r1 <= r0) return 0;
  const Grid2d g = grid2d((size_t)T, (size_t)C);
  LCC_LAUNCH(k_embedding_fwd, g.grid, g.block, 0, st)(out, tokens, wte, wte16, T, C, r0, r1);
  return last_error();
}

int lcc_embedding_bwd(float *dwte, const float *dout, const int *tokens, int T, int C, int r0, int r1,
                      cudaStream_t st) {
  if (T <= 0 || C <= 0 || r1 <= r0) return 0;
  const int colblocks = (C + kEmbThreads - 1) / kEmbThreads;
  // Row slices: about 1024 blocks in all, at most 64 slices, at most one slice per table row.
  const long nrows = (long)r1 - (long)r0;
  long S = (1024 + colblocks - 1) / colblocks;
  if (S > 64) S = 64;
  if (S > nrows) S = nrows;
  if (S < 1) S = 1;
  const dim3 grid((unsigned)colblocks, (unsigned)S, 1);
  LCC_LAUNCH(k_embedding_bwd, grid, kEmbThreads, 0, st)(dwte, dout, tokens, T, C, r0, r1, (int)S);
  return last_error();
}

int lcc_attn_merge(float *out_a, float *lse_a, const float *out_b, const float *lse_b, int Tq, int Hq, int D,
                   cudaStream_t st) {
  if (Tq <= 0 || Hq <= 0) return 0;
  const size_t rows = (size_t)Tq * Hq, wpb = kMergeThreads / 32;
  size_t blocks = (rows + wpb - 1) / wpb;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  LCC_LAUNCH(k_attn_merge, (unsigned)blocks, kMergeThreads, 0, st)(out_a, lse_a, out_b, lse_b, Tq, Hq, D < 0 ? 0 : D);
  return last_error();
}

int lcc_attn_delta(float *delta, const void *dout, const void *out, int in16, int Tq, int Hq, int D, cudaStream_t st) {
  if (Tq <= 0 || Hq <= 0) return 0;
  const size_t rows = (size_t)Tq * Hq, per = (size_t)kDeltaWarps * 32;
  size_t blocks = (rows + per - 1) / per;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  LCC_LAUNCH(k_attn_delta, (unsigned)blocks, kDeltaWarps * 32, 0, st)(delta, dout, out, in16, Tq, Hq, D < 0 ? 0 : D);
  return last_error();
}

} // extern "C"
