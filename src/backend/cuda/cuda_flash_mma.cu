// The GPU flash attention's tensor-core tier (bf16 = 1, D = 64 or 128): mma.sync m16n8k16 bf16
// with fp32 accumulation, forward and backward.
#include "backend/cuda/cuda_flash_common.cuh"

namespace {

// =====================================================================================
// Tensor-core forward (bf16 = 1, D = 64 or 128): mma.sync m16n8k16 bf16 -> fp32. A CTA of 4
// warps owns 64 query rows (warp w: rows 16w..16w+15) and walks the key tiles of 64 the
// block can see. Per tile: S = Q K^T (mma), times sl2, masked, the online softmax (max rounded
// up to an integer, the CPU's exp2), P rounded to bf16 and fed from the accumulators straight
// into the A operand of O += P V (mma). Shared memory (bf16 bits): Q, K, V [64][D+8], all
// natural (rows 16 bytes apart beyond D: the 8 rows one ldmatrix phase reads fall in 8
// distinct 16-byte bank groups, conflict-free). Fragments come from ldmatrix (fl_ldsm_*): A
// and K's B fragments plain, V's B fragments with .trans (V is read transposed).
// Fragment layouts (PTX ISA, m16n8k16, g = lane / 4, t = lane % 4):
//   A (16x16, row): reg0 (g, 2t..2t+1), reg1 (g+8, 2t..), reg2 (g, 2t+8..), reg3 (g+8, 2t+8..)
//   B (16x8, col):  reg0 (k 2t..2t+1, n g), reg1 (k 2t+8..2t+9, n g)
//   C (16x8 fp32):  c0,c1 (g, 2t..2t+1), c2,c3 (g+8, 2t..2t+1)
// =====================================================================================
#define FL_MMA_THREADS 128

// (The CPU emulation, emu/cuda_emu.h, runs the same instruction as a warp-wide gather of the
// fragments, the product, and a scatter by the PTX ISA's fragment layout.)
__device__ __forceinline__ void fl_mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#ifdef LCC_EMU
  lcc_emu::mma_m16n8k16_bf16(c, a, b0, b1);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
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

// ldmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16: lane 8 i + r gives row r of matrix i (16
// bytes, 16-byte aligned, in shared memory); register i receives matrix i's (row g, cols 2t,
// 2t+1), with .trans (rows 2t, 2t+1, col g) (PTX ISA 8.x, 9.7.14.5.15). One instruction per
// four 8x8 tiles instead of 8 scalar shared loads per lane: a phase reads 8 whole 16-byte
// rows. (The CPU emulation, emu/cuda_emu.h, gathers the warp's row addresses, checks each is
// an aligned shared address, and reads by the same layout.)
template <int TRANS>
__device__ __forceinline__ void fl_ldsm_x4(uint32_t r[4], const uint16_t *row) {
#ifdef LCC_EMU
  lcc_emu::ldmatrix_x4<TRANS>(r, row, TRANS ? "ldmatrix.x4.trans" : "ldmatrix.x4");
#else
  const unsigned a = (unsigned)__cvta_generic_to_shared(row);
  if (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a)
                 : "memory");
#endif
}
// A fragment (16x16, row) of the 16-row slab at base (rows ld halves apart), columns
// col0..col0+15: matrices (rows 0-7 | 8-15) x (cols 0-7 | 8-15) in the order a0..a3.
__device__ __forceinline__ void fl_lda(uint32_t a[4], const uint16_t *base, int ld, int col0) {
  const int lane = threadIdx.x & 31, mi = lane >> 3, r = lane & 7;
  fl_ldsm_x4<0>(a, base + ((mi & 1) * 8 + r) * ld + col0 + (mi >> 1) * 8);
}
// B fragments of two n-tiles (n0, n0 + 8) from a tile stored [n][k] (rows ld halves apart),
// k index k0..k0+15: b[0], b[1] for n-tile n0, b[2], b[3] for n-tile n0 + 8.
__device__ __forceinline__ void fl_ldb2(uint32_t b[4], const uint16_t *base, int ld, int n0, int k0) {
  const int lane = threadIdx.x & 31, mi = lane >> 3, r = lane & 7;
  fl_ldsm_x4<0>(b, base + (n0 + (mi >> 1) * 8 + r) * ld + k0 + (mi & 1) * 8);
}
// The same from a tile stored [k][n] (read transposed: .trans), k index k0..k0+15.
__device__ __forceinline__ void fl_ldb2t(uint32_t b[4], const uint16_t *base, int ld, int k0, int n0) {
  const int lane = threadIdx.x & 31, mi = lane >> 3, r = lane & 7;
  fl_ldsm_x4<1>(b, base + (k0 + (mi & 1) * 8 + r) * ld + n0 + (mi >> 1) * 8);
}

// 64 rows of D bf16 values (row r of the tile at element off + r * ld of x) into shared
// memory dn[r * LN + d], two values per 4-byte store; rows past nrows are 0.
template <int D, int LN, int NT>
__device__ __forceinline__ void fl_load_bf16(uint16_t *dn, const void *x, int is16, size_t off, size_t ld,
                                             long nrows) {
  for (int e = threadIdx.x; e < 64 * (D / 2); e += NT) {
    const int r = e / (D / 2), d = 2 * (e - r * (D / 2));
    uint32_t lo = 0, hi = 0;
    if (r < nrows) {
      const size_t o = off + (size_t)r * ld + d;
      lo = fl_bits(x, is16, o);
      hi = fl_bits(x, is16, o + 1);
    }
    *(uint32_t *)(dn + r * LN + d) = lo | (hi << 16);
  }
}

// cp.async.cg.shared.global [dst], [src], 16, nsrc: 16 bytes from global to shared memory
// without passing through registers (nsrc < 16: the rest zero-filled), then
// cp.async.commit_group and cp.async.wait_group N (every group but the N most recent landed;
// the thread's own copies: a barrier after the wait shows them to the block). The CPU
// emulation performs a copy at the wait that covers it and reports any access before.
__device__ __forceinline__ void fl_cp_async16(void *dst, const void *src, int nsrc) {
#ifdef LCC_EMU
  lcc_emu::cp_async_16(dst, src, nsrc);
#else
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(nsrc) : "memory");
#endif
}
__device__ __forceinline__ void fl_cp_commit() {
#ifdef LCC_EMU
  lcc_emu::cp_async_commit();
#else
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void fl_cp_wait() {
#ifdef LCC_EMU
  LCC_EMU_CLOBBER();
  lcc_emu::cp_async_wait(N);
  LCC_EMU_CLOBBER();
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}
// Whether the K/V tiles can come by cp.async: bf16 storage (fp32 inputs are rounded on the
// way, through registers) at 16-byte aligned bases (each row and tile offset is a multiple of
// D >= 64 elements, so every 16-byte chunk is then aligned).
__device__ __forceinline__ int fl_async_ok(const void *k, const void *v, int kv16) {
  return kv16 && ((uintptr_t)k & 15u) == 0 && ((uintptr_t)v & 15u) == 0;
}
// A 64-row tile as fl_load_bf16 loads it; with async, issued as cp.async copies of 16 bytes
// (rows past nrows zero-filled), complete only after the covering fl_cp_wait.
template <int D, int LN, int NT>
__device__ __forceinline__ void fl_load_tile(uint16_t *dn, const void *x, int is16, int async, size_t off,
                                             size_t ld, long nrows) {
  if (!async) {
    fl_load_bf16<D, LN, NT>(dn, x, is16, off, ld, nrows);
    return;
  }
  const uint16_t *xs = (const uint16_t *)x + off;
  for (int c = threadIdx.x; c < 64 * (D / 8); c += NT) {
    const int r = c / (D / 8), d = 8 * (c - r * (D / 8));
    const bool in = r < nrows;
    fl_cp_async16(dn + r * LN + d, in ? xs + (size_t)r * ld + d : xs, in ? 16 : 0);
  }
}

// The query block of this CTA: with a causal mask the last query blocks see the most keys, so
// they get the first block indices (the GPU starts blocks roughly in index order: the longest
// ones start first and the short ones fill in behind them, no long block left for the tail).
__device__ __forceinline__ unsigned fl_heavy_first(const fl_p &p) {
  return p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
}
// Whether every key of tile j0 is visible to both rows of every lane of the warp (warp-uniform):
// then the tile needs no mask.
__device__ __forceinline__ bool fl_tile_full(long j0, const long rb[2], const long re[2]) {
  return __all_sync(0xffffffffu, j0 >= rb[0] && j0 >= rb[1] && j0 + FL_BK <= re[0] && j0 + FL_BK <= re[1]);
}

template <int D>
constexpr size_t fl_mma_fwd_smem() {
  return sizeof(uint16_t) * (5 * 64 * (D + 8)); // Q, then K and V twice (double-buffered)
}

template <int D>
__global__ void __launch_bounds__(FL_MMA_THREADS) mma_fwd_kernel(fl_p p, void *out, float *lse, const void *q,
                                                                 const void *k, const void *v) {
  constexpr int LQ = D + 8, NKD = D / 16, NDN = D / 8;
  LCC_EXTERN_SHARED(uint16_t, smh, 16);
  LCC_SHARED(long, red, [16]);
  uint16_t *Qs = smh, *KV = Qs + 64 * LQ; // buffer b: K at KV + b * 128 LQ, V 64 LQ after
  const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;
  const int h = blockIdx.y, g = h / p.grp;
  const long i0 = (long)fl_heavy_first(p) * FL_BQ;
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
  fl_load_bf16<D, LQ, FL_MMA_THREADS>(Qs, q, p.q16, (size_t)i0 * ldq + (size_t)h * D, ldq, p.Tq - i0);
  __syncthreads();
  uint32_t qf[NKD][4];
#pragma unroll
  for (int kk = 0; kk < NKD; kk++) fl_lda(qf[kk], Qs + w * 16 * LQ, LQ, kk * 16);
  float o[NDN][4];
#pragma unroll
  for (int n = 0; n < NDN; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  // K/V double-buffered: tile t + 1 is in flight (cp.async) while tile t is computed
  const long jb = be > bb ? bb / FL_BK * FL_BK : be;
  const int async = fl_async_ok(k, v, p.kv16);
  if (jb < be) {
    fl_load_tile<D, LQ, FL_MMA_THREADS>(KV, k, p.kv16, async, (size_t)jb * ldk + (size_t)g * D, ldk, p.Tk - jb);
    fl_load_tile<D, LQ, FL_MMA_THREADS>(KV + 64 * LQ, v, p.kv16, async, (size_t)jb * ldk + (size_t)g * D, ldk,
                                        p.Tk - jb);
  }
  fl_cp_commit();
  int buf = 0;
  for (long j0 = jb; j0 < be; j0 += FL_BK, buf ^= 1) {
    __syncthreads(); // the previous tile is no longer read
    const uint16_t *Ks = KV + buf * 128 * LQ, *Vs = Ks + 64 * LQ;
    if (j0 + FL_BK < be) { // the next tile into the other buffer (read last in the previous step)
      uint16_t *Kn = KV + (buf ^ 1) * 128 * LQ;
      const long jn = j0 + FL_BK;
      fl_load_tile<D, LQ, FL_MMA_THREADS>(Kn, k, p.kv16, async, (size_t)jn * ldk + (size_t)g * D, ldk, p.Tk - jn);
      fl_load_tile<D, LQ, FL_MMA_THREADS>(Kn + 64 * LQ, v, p.kv16, async, (size_t)jn * ldk + (size_t)g * D, ldk,
                                          p.Tk - jn);
    }
    fl_cp_commit();
    fl_cp_wait<1>(); // this tile's copies landed (only the group just committed may be in flight)
    __syncthreads(); // ... and every thread's are visible
    float sc[8][4];
#pragma unroll
    for (int n = 0; n < 8; n++) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
    for (int n = 0; n < 8; n += 2)
#pragma unroll
      for (int kk = 0; kk < NKD; kk++) { // each accumulator still sums its k-steps in order
        uint32_t b[4];
        fl_ldb2(b, Ks, LQ, n * 8, kk * 16);
        fl_mma(sc[n], qf[kk], b[0], b[1]);
        fl_mma(sc[n + 1], qf[kk], b[2], b[3]);
      }
    const bool full = fl_tile_full(j0, rb, re); // masks only on a tile that straddles a bound
#pragma unroll
    for (int e = 0; e < 2; e++) { // row half: accumulator regs 2e, 2e+1
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int x = 0; x < 2; x++) {
          const long j = j0 + n * 8 + 2 * tq + x;
          float s = __fmul_rn(sc[n][2 * e + x], p.sl2);
          if (!full && (j < rb[e] || j >= re[e])) s = -INFINITY;
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
      for (int n = 0; n < NDN; n += 2) {
        uint32_t b[4];
        fl_ldb2t(b, Vs, LQ, kk * 16, n * 8);
        fl_mma(o[n], a, b[0], b[1]);
        fl_mma(o[n + 1], a, b[2], b[3]);
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

// ---- tensor-core backward (bf16 = 1, D = 64 or 128) ----
template <int D>
constexpr size_t fl_mma_dq_smem() {
  return sizeof(uint16_t) * (6 * 64 * (D + 8)); // Q, dO, then K and V twice (double-buffered)
}
template <int D>
constexpr size_t fl_mma_dkv_smem() {
  return sizeof(uint16_t) * (4 * 64 * (D + 8)) + 3 * 64 * sizeof(float);
}

// dq of a query block (4 warps x 16 rows) over its visible key tiles in order:
// S = Q K^T, dP = dO V^T (mma), P, dS in fp32, dS rounded, dq += dS K (mma).
// Shared: Q, dO, K, V natural [64][D+8] (K read transposed by ldmatrix .trans for dS K); K/V
// double-buffered by cp.async as in the forward.
template <int D>
__global__ void __launch_bounds__(FL_MMA_THREADS) mma_bwd_dq_kernel(fl_p p, float *dq, const void *dout,
                                                                    const void *q, const void *k, const void *v,
                                                                    const float *lse, const float *delta) {
  constexpr int LQ = D + 8, NKD = D / 16, NDN = D / 8;
  LCC_EXTERN_SHARED(uint16_t, smh, 16);
  LCC_SHARED(long, red, [16]);
  uint16_t *Qs = smh, *Os = Qs + 64 * LQ, *KV = Os + 64 * LQ; // buffer b: K at KV + b * 128 LQ, V after
  const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;
  const int h = blockIdx.y, g = h / p.grp;
  const long i0 = (long)fl_heavy_first(p) * FL_BQ;
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
  fl_load_bf16<D, LQ, FL_MMA_THREADS>(Qs, q, p.q16, (size_t)i0 * ldq + (size_t)h * D, ldq, p.Tq - i0);
  fl_load_bf16<D, LQ, FL_MMA_THREADS>(Os, dout, p.q16, (size_t)i0 * ldq + (size_t)h * D, ldq, p.Tq - i0);
  float acc[NDN][4];
#pragma unroll
  for (int n = 0; n < NDN; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  const uint16_t *Qw = Qs + w * 16 * LQ, *Ow = Os + w * 16 * LQ;
  const long jb = bb / FL_BK * FL_BK;
  const int async = fl_async_ok(k, v, p.kv16);
  fl_load_tile<D, LQ, FL_MMA_THREADS>(KV, k, p.kv16, async, (size_t)jb * ldk + (size_t)g * D, ldk, p.Tk - jb);
  fl_load_tile<D, LQ, FL_MMA_THREADS>(KV + 64 * LQ, v, p.kv16, async, (size_t)jb * ldk + (size_t)g * D, ldk, p.Tk - jb);
  fl_cp_commit();
  int buf = 0;
  for (long j0 = jb; j0 < be; j0 += FL_BK, buf ^= 1) {
    __syncthreads(); // the other buffer's tile is no longer read
    const uint16_t *Ks = KV + buf * 128 * LQ, *Vs = Ks + 64 * LQ;
    if (j0 + FL_BK < be) {
      uint16_t *Kn = KV + (buf ^ 1) * 128 * LQ;
      const long jn = j0 + FL_BK;
      fl_load_tile<D, LQ, FL_MMA_THREADS>(Kn, k, p.kv16, async, (size_t)jn * ldk + (size_t)g * D, ldk, p.Tk - jn);
      fl_load_tile<D, LQ, FL_MMA_THREADS>(Kn + 64 * LQ, v, p.kv16, async, (size_t)jn * ldk + (size_t)g * D, ldk,
                                          p.Tk - jn);
    }
    fl_cp_commit();
    fl_cp_wait<1>(); // (dq) this tile's copies landed
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
      for (int n = 0; n < 8; n += 2) {
        uint32_t b[4];
        fl_ldb2(b, Ks, LQ, n * 8, kk * 16);
        fl_mma(sc[n], qa, b[0], b[1]);
        fl_mma(sc[n + 1], qa, b[2], b[3]);
        fl_ldb2(b, Vs, LQ, n * 8, kk * 16);
        fl_mma(dp[n], oa, b[0], b[1]);
        fl_mma(dp[n + 1], oa, b[2], b[3]);
      }
    }
    const bool full = fl_tile_full(j0, rb, re); // masks only on a tile that straddles a bound
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int x = 0; x < 4; x++) {
        const int e = x >> 1;
        const long j = j0 + n * 8 + 2 * tq + (x & 1);
        const float pr = (!full && (j < rb[e] || j >= re[e])) ? 0.0f
                                                               : fl_exp2(__fsub_rn(__fmul_rn(sc[n][x], p.sl2), l2[e]));
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
      for (int n = 0; n < NDN; n += 2) {
        uint32_t b[4];
        fl_ldb2t(b, Ks, LQ, kk * 16, n * 8);
        fl_mma(acc[n], a, b[0], b[1]);
        fl_mma(acc[n + 1], a, b[2], b[3]);
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
// the whole kernel); per item Q, dO natural [64][D+8] (read transposed by ldmatrix .trans
// for the dv and dk products).
template <int D>
__global__ void __launch_bounds__(FL_MMA_THREADS) mma_bwd_dkv_kernel(fl_p p, float *dk, float *dv, const void *dout,
                                                                     const void *q, const void *k, const void *v,
                                                                     const float *lse, const float *delta) {
  constexpr int LQ = D + 8, NKD = D / 16, NDN = D / 8;
  LCC_EXTERN_SHARED(uint16_t, smh, 16);
  uint16_t *Ks = smh, *Vs = Ks + 64 * LQ, *Qs = Vs + 64 * LQ, *Os = Qs + 64 * LQ;
  float *L2s = (float *)(Os + 64 * LQ), *Dls = L2s + 64;
  int *Los = (int *)(Dls + 64);
  const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3, g = blockIdx.y;
  const long j0 = (long)blockIdx.x * FL_BK;
  const size_t ldq = (size_t)p.Hq * D, ldk = (size_t)p.Hkv * D;
  const long kfirst = p.k_start + j0, klast = p.k_start + (j0 + FL_BK < p.Tk ? j0 + FL_BK : p.Tk) - 1;
  long jr[2], kpos[2];
#pragma unroll
  for (int e = 0; e < 2; e++) jr[e] = j0 + w * 16 + gq + 8 * e, kpos[e] = p.k_start + jr[e];
  fl_load_bf16<D, LQ, FL_MMA_THREADS>(Ks, k, p.kv16, (size_t)j0 * ldk + (size_t)g * D, ldk, p.Tk - j0);
  fl_load_bf16<D, LQ, FL_MMA_THREADS>(Vs, v, p.kv16, (size_t)j0 * ldk + (size_t)g * D, ldk, p.Tk - j0);
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
      fl_load_bf16<D, LQ, FL_MMA_THREADS>(Qs, q, p.q16, (size_t)i0 * ldq + (size_t)h * D, ldq, p.Tq - i0);
      fl_load_bf16<D, LQ, FL_MMA_THREADS>(Os, dout, p.q16, (size_t)i0 * ldq + (size_t)h * D, ldq, p.Tq - i0);
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
        for (int n = 0; n < 8; n += 2) {
          uint32_t b[4];
          fl_ldb2(b, Qs, LQ, n * 8, kk * 16);
          fl_mma(sc[n], ka, b[0], b[1]);
          fl_mma(sc[n + 1], ka, b[2], b[3]);
          fl_ldb2(b, Os, LQ, n * 8, kk * 16);
          fl_mma(dp[n], va, b[0], b[1]);
          fl_mma(dp[n + 1], va, b[2], b[3]);
        }
      }
      // every (key, query) of the warp's 16 keys and the block's 64 queries visible (no document
      // bounds, all in range, the last key at or before the first query): no mask (warp-uniform)
      const bool full = __all_sync(0xffffffffu, !p.lo && jr[1] < p.Tk && i0 + FL_BQ <= p.Tq &&
                                                    (!p.causal || kpos[1] <= p.q_start + i0));
      uint32_t pa[4][4], da[4][4]; // P^T and dS^T as A fragments (keys x queries)
#pragma unroll
      for (int n = 0; n < 8; n++) {
        float pr[4], ds[4];
#pragma unroll
        for (int x = 0; x < 4; x++) {
          const int e = x >> 1, qi = n * 8 + 2 * tq + (x & 1);
          const long ii = i0 + qi;
          bool vis = full || (jr[e] < p.Tk && ii < p.Tq);
          if (!full && p.causal && kpos[e] > p.q_start + ii) vis = false;
          if (!full && p.lo && kpos[e] < (long)Los[qi]) vis = false;
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
        for (int n = 0; n < NDN; n += 2) {
          uint32_t b[4];
          fl_ldb2t(b, Os, LQ, kk * 16, n * 8);
          fl_mma(av[n], pa[kk], b[0], b[1]);
          fl_mma(av[n + 1], pa[kk], b[2], b[3]);
          fl_ldb2t(b, Qs, LQ, kk * 16, n * 8);
          fl_mma(ak[n], da[kk], b[0], b[1]);
          fl_mma(ak[n + 1], da[kk], b[2], b[3]);
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

} // namespace

template <int D>
int fl_mma_fwd(void *out, float *lse, const void *q, const void *k, const void *v, const fl_p &p, cudaStream_t st) {
  const size_t smem = fl_mma_fwd_smem<D>();
  int e = fl_prep(mma_fwd_kernel<D>, smem);
  if (e) return e;
  const dim3 grid((unsigned)((p.Tq + FL_BQ - 1) / FL_BQ), (unsigned)p.Hq);
  LCC_LAUNCH(mma_fwd_kernel<D>, grid, FL_MMA_THREADS, smem, st)(p, out, lse, q, k, v);
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
  LCC_LAUNCH(mma_bwd_dq_kernel<D>, gq, FL_MMA_THREADS, sq, st)(p, dq, dout, q, k, v, lse, delta);
  LCC_LAUNCH(mma_bwd_dkv_kernel<D>, gk, FL_MMA_THREADS, skv, st)(p, dk, dv, dout, q, k, v, lse, delta);
  return (int)cudaGetLastError();
}

template int fl_mma_fwd<64>(void *, float *, const void *, const void *, const void *, const fl_p &, cudaStream_t);
template int fl_mma_fwd<128>(void *, float *, const void *, const void *, const void *, const fl_p &, cudaStream_t);
template int fl_mma_bwd<64>(float *, float *, float *, const void *, const void *, const void *, const void *, const float *,
                              const float *, const fl_p &, cudaStream_t);
template int fl_mma_bwd<128>(float *, float *, float *, const void *, const void *, const void *, const void *, const float *,
                               const float *, const fl_p &, cudaStream_t);
