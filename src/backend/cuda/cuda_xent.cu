// The loss tile on the device (cuda_kern.h: lcc_xent_*), mirroring backend/cpu/ops/crossentropy.c.
//
// Shape: one block of XB threads per token row; the vocabulary is walked in groups of 4
// elements, group g of a row always handled by thread g % XB in increasing g (float4 loads
// when the row is 16-byte aligned, scalar loads otherwise: the same elements per thread in
// the same order either way, so the bits do not depend on the alignment). Every per-row
// reduction is a fixed shuffle tree then a fixed tree over the block's warps.
//
// Bits against the CPU:
// - lc_fast_expf is reproduced operation by operation with __fmul_rn / __fadd_rn (no FMA
//   contraction; crossentropy.c is built as ISO C11, where GCC does not contract), so every
//   exp(x - max) and every dlogit is the CPU's float when the max and the scale factor agree.
// - The row max and the first-maximum index are order-free (exact). The sum-exp is in double
//   as on the CPU but in another order (the CPU's is a SIMD reduction), so it can differ in
//   its last bits unless the sum is exact; k = (float)(scale / s) follows from it.
// - log / exp in double are CUDA's (max 1 ulp) against glibc's: a last-bit difference is
//   possible there too.
// - The sums over token rows follow the CPU's order exactly: lc_xent_tile sums the rows in
//   the CPU's 64 fixed chunks, each in row order, then the chunk sums in order; the sliced
//   total sums the rows serially in row order. So when the per-row values agree, acc does.
//
// lcc_xent_tile has no stats buffer, and the rows' losses have to outlive the rows (which
// become dlogits) until one ordered pass sums them: it takes T * 12 bytes of scratch
// (double loss[T], int miss[T]) from the caller (the backend's counted scratch).
//
// Stats layout (T * 24 bytes, as the CPU's): double sum[T]; float mx[T], zt[T], best[T];
// int arg[T].
#include "backend/cuda/cuda_kern.h"
#include "backend/cuda/cuda_fastexp.cuh"

#include "backend/cuda/cuda_compat.cuh"
#include <limits.h>
#include <math.h>
#include <stdint.h>

namespace {

constexpr int XB = 512;          // threads per row block
constexpr int XW = XB / 32;      // warps per row block
constexpr int DCH = XB * 4 * 4;  // dlogits columns per block (16 per thread)
constexpr int TB = 1024;         // threads of the sliced total's single block
constexpr int CHUNKS = 64;       // crossentropy.c's LC_XENT_CHUNKS
constexpr unsigned FULL = 0xffffffffu;

// fast_expf: cuda_fastexp.cuh
__device__ __forceinline__ float fast_expf(float x) { return lcc_fast_expf(x); }

// The stats block's arrays.
struct Stats {
  double *sum;
  float *mx, *zt, *best;
  int *arg;
};
__device__ __forceinline__ Stats stats_of(void *s, int T) {
  Stats v;
  v.sum = static_cast<double *>(s);
  v.mx = reinterpret_cast<float *>(v.sum + T);
  v.zt = v.mx + T;
  v.best = v.zt + T;
  v.arg = reinterpret_cast<int *>(v.best + T);
  return v;
}

__device__ __forceinline__ bool aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// f(value, index) over row[0, n), the fixed element-to-thread map described above.
template <class F> __device__ __forceinline__ void row_read(const float *row, int n, bool vec, F &&f) {
  const int ng = (n >> 2) + ((n & 3) != 0);
  for (int g = threadIdx.x; g < ng; g += XB) {
    const int b = g * 4;
    if (vec && n - b >= 4) {
      const float4 q = reinterpret_cast<const float4 *>(row)[g];
      f(q.x, b);
      f(q.y, b + 1);
      f(q.z, b + 2);
      f(q.w, b + 3);
    } else {
      const int e = n - b >= 4 ? b + 4 : n;
      for (int i = b; i < e; i++) f(row[i], i);
    }
  }
}

// row[i] = f(row[i], i) over row[0, n), the same map.
template <class F> __device__ __forceinline__ void row_map(float *row, int n, bool vec, F &&f) {
  const int ng = (n >> 2) + ((n & 3) != 0);
  for (int g = threadIdx.x; g < ng; g += XB) {
    const int b = g * 4;
    if (vec && n - b >= 4) {
      float4 q = reinterpret_cast<float4 *>(row)[g];
      q.x = f(q.x, b);
      q.y = f(q.y, b + 1);
      q.z = f(q.z, b + 2);
      q.w = f(q.w, b + 3);
      reinterpret_cast<float4 *>(row)[g] = q;
    } else {
      const int e = n - b >= 4 ? b + 4 : n;
      for (int i = b; i < e; i++) row[i] = f(row[i], i);
    }
  }
}

__device__ __forceinline__ void row_zero(float *row, int n, bool vec) {
  const int ng = (n >> 2) + ((n & 3) != 0);
  for (int g = threadIdx.x; g < ng; g += XB) {
    const int b = g * 4;
    if (vec && n - b >= 4) {
      reinterpret_cast<float4 *>(row)[g] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    } else {
      const int e = n - b >= 4 ? b + 4 : n;
      for (int i = b; i < e; i++) row[i] = 0.0f;
    }
  }
}

// (value, index) of the first maximum: the larger value, on equal values the lower index.
// Candidates enter only as v > current (so NaN never does, nor a -inf that is not above the
// start -inf); an empty candidate is (-inf, INT_MAX).
__device__ __forceinline__ void ma_merge(float &bv, int &bi, float ov, int oi) {
  if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
}

// Block-wide first maximum, the result in every thread (XB threads).
__device__ __forceinline__ void block_maxarg(float &bv, int &bi) {
  LCC_SHARED(float, sv, [XW]);
  LCC_SHARED(int, si, [XW]);
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float ov = __shfl_down_sync(FULL, bv, off);
    const int oi = __shfl_down_sync(FULL, bi, off);
    ma_merge(bv, bi, ov, oi);
  }
  if (lane == 0) sv[w] = bv, si[w] = bi;
  __syncthreads();
  if (w == 0) {
    bv = lane < XW ? sv[lane] : -INFINITY;
    bi = lane < XW ? si[lane] : INT_MAX;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const float ov = __shfl_down_sync(FULL, bv, off);
      const int oi = __shfl_down_sync(FULL, bi, off);
      ma_merge(bv, bi, ov, oi);
    }
    if (lane == 0) sv[0] = bv, si[0] = bi;
  }
  __syncthreads();
  bv = sv[0];
  bi = si[0];
  __syncthreads(); // sv/si free for the next call
}

// Block-wide double sum in a fixed tree, the result in every thread (XB threads).
__device__ __forceinline__ double block_sum(double s) {
  LCC_SHARED(double, ss, [XW]);
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(FULL, s, off);
  if (lane == 0) ss[w] = s;
  __syncthreads();
  if (w == 0) {
    s = lane < XW ? ss[lane] : 0.0;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(FULL, s, off);
    if (lane == 0) ss[0] = s;
  }
  __syncthreads();
  s = ss[0];
  __syncthreads();
  return s;
}

// A row's first maximum (value mx, -inf when no value is above -inf; index arg, INT_MAX
// then) and s = sum of (double)fast_expf(x - mx), every thread getting all three.
__device__ __forceinline__ void row_stats(const float *row, int n, bool vec, float &mx, int &arg, double &s) {
  float bv = -INFINITY;
  int bi = INT_MAX;
  row_read(row, n, vec, [&](float v, int i) {
    if (v > bv) bv = v, bi = i;
  });
  block_maxarg(bv, bi);
  mx = bv;
  arg = bi;
  double a = 0.0;
  row_read(row, n, vec, [&](float v, int) { a += (double)fast_expf(__fsub_rn(v, bv)); });
  s = block_sum(a);
}

// ---- lcc_xent_tile, pass 1: one block per row t (crossentropy.c xent_row and the misses
// loop of lc_xent_tile): loss[t], miss[t], and the row replaced by its dlogits.
__global__ void __launch_bounds__(XB) xent_tile_rows(float *logits, const int *targets, int V, float scale,
                                                     double *loss, int *miss) {
  const int t = blockIdx.x;
  float *row = logits + (size_t)t * V;
  const int y = targets[t];
  const bool vec = aligned16(row);
  if (y < 0) { // ignored row: no loss, no miss, zero gradient
    row_zero(row, V, vec);
    if (threadIdx.x == 0) loss[t] = 0.0, miss[t] = 0;
    return;
  }
  // Read by thread 0 before the first barrier (inside row_stats), so before any thread
  // overwrites the row. y >= V is outside the CPU's contract (it reads past the row):
  // here the target logit is NaN and no onehot is subtracted.
  float xt = 0.0f, x0 = 0.0f;
  if (threadIdx.x == 0) xt = y < V ? row[y] : NAN, x0 = row[0];
  float m;
  int arg;
  double s;
  row_stats(row, V, vec, m, arg, s);
  const float k = (float)((double)scale / s);
  row_map(row, V, vec, [&](float v, int i) {
    float g = __fmul_rn(fast_expf(__fsub_rn(v, m)), k);
    if (i == y) g = __fsub_rn(g, scale);
    return g;
  });
  if (threadIdx.x == 0) {
    loss[t] = ((double)m + log(s)) - (double)xt;
    // The CPU's misses loop starts at best = 0 and moves on row[v] > row[best]: the first
    // maximum, except that a NaN row[0] is never left, and 0 when nothing is above row[0].
    const int best = (x0 != x0 || arg == INT_MAX) ? 0 : arg;
    miss[t] = best != y;
  }
}

// ---- lcc_xent_tile, pass 2: one block of CHUNKS threads; chunk c (rows T*c/64 ..
// T*(c+1)/64) summed in row order by thread c, then the chunk sums in order by thread 0,
// as lc_xent_fwd_bwd; the misses as an integer count.
__global__ void __launch_bounds__(CHUNKS) xent_tile_sum(const double *loss, const int *miss, int T, double *acc,
                                                        int count_wrong) {
  LCC_SHARED(double, part, [CHUNKS]);
  LCC_SHARED(int, mparts, [CHUNKS]);
  const int c = threadIdx.x;
  const int t0 = (int)((long long)T * c / CHUNKS), t1 = (int)((long long)T * (c + 1) / CHUNKS);
  double a = 0.0;
  int mc = 0;
#pragma unroll 8
  for (int t = t0; t < t1; t++) a += loss[t];
  for (int t = t0; t < t1; t++) mc += miss[t];
  part[c] = a;
  mparts[c] = mc;
  __syncthreads();
  if (c == 0) {
    double l = 0.0;
    long long mt = 0;
    for (int j = 0; j < CHUNKS; j++) l += part[j], mt += mparts[j];
    if (count_wrong) acc[1] += (double)mt;
    acc[0] += l;
  }
}

// ---- lcc_xent_stats_init
__global__ void xent_stats_init_k(void *stats, int T) {
  const Stats s = stats_of(stats, T);
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < T; t += gridDim.x * blockDim.x) {
    s.sum[t] = 0.0;
    s.mx[t] = -INFINITY;
    s.zt[t] = 0.0f;
    s.best[t] = -INFINITY;
    s.arg[t] = -1;
  }
}

// ---- lcc_xent_slice_merge: one block per row i of the slice (token t0 + i).
__global__ void __launch_bounds__(XB) xent_merge_k(void *stats, int T, const float *logits, const int *targets, int t0,
                                                   int v0, int vs) {
  const int i = blockIdx.x, t = t0 + i, y = targets[t];
  if (y < 0) return;
  const float *row = logits + (size_t)i * vs;
  float rm;
  int ra;
  double rs;
  row_stats(row, vs, aligned16(row), rm, ra, rs);
  if (ra == INT_MAX) ra = 0; // nothing above -inf: the CPU's start index
  if (threadIdx.x == 0) {
    const Stats s = stats_of(stats, T);
    const float mx = s.mx[t];
    const double sum = s.sum[t];
    if (rm > mx) {
      s.sum[t] = __dadd_rn(__dmul_rn(sum, exp((double)mx - (double)rm)), rs);
      s.mx[t] = rm;
    } else {
      s.sum[t] = __dadd_rn(sum, __dmul_rn(rs, exp((double)rm - (double)mx)));
    }
    if (y >= v0 && y < v0 + vs) s.zt[t] = row[y - v0];
    if (rm > s.best[t]) s.best[t] = rm, s.arg[t] = v0 + ra; // first maximum over the vocabulary
  }
}

// ---- lcc_xent_slice_total: one block; rows in batches of TB, each row's loss computed by
// its own thread, then thread 0 adds the batch in row order onto the running total (the
// CPU's serial order). An ignored row contributes -0.0, which leaves any sum unchanged.
__global__ void __launch_bounds__(TB) xent_total_k(const void *stats, const int *targets, int T, double *acc,
                                                   int count_wrong) {
  LCC_SHARED(double, val, [TB]);
  LCC_SHARED(int, mw, [TB / 32]);
  const Stats s = stats_of(const_cast<void *>(stats), T);
  double total = 0.0; // thread 0's
  int mc = 0;
  for (int base = 0; base < T; base += TB) {
    const int t = base + (int)threadIdx.x;
    double v = -0.0;
    if (t < T) {
      const int y = targets[t];
      if (y >= 0) {
        v = ((double)s.mx[t] + log(s.sum[t])) - (double)s.zt[t];
        mc += s.arg[t] != y;
      }
    }
    val[threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
      const int n = T - base < TB ? T - base : TB;
#pragma unroll 8
      for (int j = 0; j < n; j++) total += val[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) mc += __shfl_down_sync(FULL, mc, off);
  if ((threadIdx.x & 31) == 0) mw[threadIdx.x >> 5] = mc;
  __syncthreads();
  if (threadIdx.x == 0) {
    long long mt = 0;
    for (int j = 0; j < TB / 32; j++) mt += mw[j];
    if (count_wrong) acc[1] += (double)mt;
    acc[0] += total;
  }
}

// ---- lcc_xent_slice_dlogits: block (i, c) covers row i's columns [c*DCH, (c+1)*DCH) (and
// every gridDim.y-th chunk after it).
__global__ void __launch_bounds__(XB) xent_dlogits_k(float *logits, const void *stats, int T, const int *targets,
                                                     int t0, int v0, int vs, float scale) {
  const int i = blockIdx.x, t = t0 + i, y = targets[t];
  float *row = logits + (size_t)i * vs;
  float k = 0.0f, M = 0.0f;
  if (y >= 0) {
    const Stats s = stats_of(const_cast<void *>(stats), T);
    k = (float)((double)scale / s.sum[t]);
    M = s.mx[t];
  }
  const long long yl = (long long)y - v0; // the target's column in this slice (in range or not)
  for (long long c0 = (long long)blockIdx.y * DCH; c0 < vs; c0 += (long long)gridDim.y * DCH) {
    float *p = row + c0;
    const int n = vs - c0 < DCH ? (int)(vs - c0) : DCH;
    const bool vec = aligned16(p);
    if (y < 0) {
      row_zero(p, n, vec);
    } else {
      const long long yc = yl - c0; // target column within this chunk
      row_map(p, n, vec, [&](float v, int j) {
        float g = __fmul_rn(fast_expf(__fsub_rn(v, M)), k);
        if ((long long)j == yc) g = __fsub_rn(g, scale);
        return g;
      });
    }
  }
}

} // namespace

extern "C" size_t lcc_xent_tile_scratch_bytes(int T) { return T > 0 ? (size_t)T * (sizeof(double) + sizeof(int)) : 0; }

extern "C" int lcc_xent_tile(float *logits, const int *targets, int T, int V, float scale, double *acc,
                             int count_wrong, void *scratch, cudaStream_t st) {
  if (T <= 0 || V <= 0) return (int)cudaSuccess;
  double *loss = static_cast<double *>(scratch);
  int *miss = reinterpret_cast<int *>(loss + T);
  LCC_LAUNCH(xent_tile_rows, T, XB, 0, st)(logits, targets, V, scale, loss, miss);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) {
    LCC_LAUNCH(xent_tile_sum, 1, CHUNKS, 0, st)(loss, miss, T, acc, count_wrong);
    e = cudaGetLastError();
  }
  return (int)e;
}

extern "C" int lcc_xent_stats_init(void *stats, int T, cudaStream_t st) {
  if (T <= 0) return (int)cudaSuccess;
  int blocks = (T + 255) / 256;
  if (blocks > 4096) blocks = 4096;
  LCC_LAUNCH(xent_stats_init_k, blocks, 256, 0, st)(stats, T);
  return (int)cudaGetLastError();
}

extern "C" int lcc_xent_slice_merge(void *stats, int T, const float *logits, const int *targets, int t0, int m, int v0,
                                    int vs, cudaStream_t st) {
  if (m <= 0) return (int)cudaSuccess;
  LCC_LAUNCH(xent_merge_k, m, XB, 0, st)(stats, T, logits, targets, t0, v0, vs);
  return (int)cudaGetLastError();
}

extern "C" int lcc_xent_slice_total(const void *stats, const int *targets, int T, double *acc, int count_wrong,
                                    cudaStream_t st) {
  if (T <= 0) return (int)cudaSuccess;
  LCC_LAUNCH(xent_total_k, 1, TB, 0, st)(stats, targets, T, acc, count_wrong);
  return (int)cudaGetLastError();
}

extern "C" int lcc_xent_slice_dlogits(float *logits, const void *stats, int T, const int *targets, int t0, int m,
                                      int v0, int vs, float scale, cudaStream_t st) {
  if (m <= 0 || vs <= 0) return (int)cudaSuccess;
  long long cy = ((long long)vs + DCH - 1) / DCH;
  if (cy > 65535) cy = 65535;
  LCC_LAUNCH(xent_dlogits_k, dim3((unsigned)m, (unsigned)cy), XB, 0, st)(logits, stats, T, targets, t0, v0, vs, scale);
  return (int)cudaGetLastError();
}
