// The GPU flash attention's tiled SIMT tier: fp32 FMA, 64-row CTAs of 256 threads, tiles in
// shared memory; every case of lcc_flash_fwd / _bwd with D <= 128 but bf16 with D = 64 or 128.
#include "backend/cuda/cuda_flash_common.cuh"

namespace {

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

template <int DM>
constexpr size_t fl_fwd_smem() {
  return sizeof(float) * (3 * FL_BQ * (DM + 1) + 2 * FL_BQ * FL_LDP);
}

template <int DM>
__global__ void __launch_bounds__(FL_THREADS, 1) simt_fwd_kernel(fl_p p, void *out, float *lse, const void *q,
                                                              const void *k, const void *v) {
  constexpr int LD = DM + 1;
  LCC_EXTERN_SHARED(float, sm, 16);
  LCC_SHARED(long, red, [16]);
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
  LCC_EXTERN_SHARED(float, sm, 16);
  LCC_SHARED(long, red, [16]);
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
  LCC_EXTERN_SHARED(float, sm, 16);
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

} // namespace

template <int DM>
int fl_simt_fwd(void *out, float *lse, const void *q, const void *k, const void *v, const fl_p &p, cudaStream_t st) {
  const size_t smem = fl_fwd_smem<DM>();
  int e = fl_prep(simt_fwd_kernel<DM>, smem);
  if (e) return e;
  const dim3 grid((unsigned)((p.Tq + FL_BQ - 1) / FL_BQ), (unsigned)p.Hq);
  LCC_LAUNCH(simt_fwd_kernel<DM>, grid, FL_THREADS, smem, st)(p, out, lse, q, k, v);
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
  LCC_LAUNCH(simt_bwd_dq_kernel<DM>, gq, FL_THREADS, smem, st)(p, dq, dout, q, k, v, lse, delta);
  LCC_LAUNCH(simt_bwd_dkv_kernel<DM>, gk, FL_THREADS, smem, st)(p, dk, dv, dout, q, k, v, lse, delta);
  return (int)cudaGetLastError();
}

template int fl_simt_fwd<32>(void *, float *, const void *, const void *, const void *, const fl_p &, cudaStream_t);
template int fl_simt_fwd<64>(void *, float *, const void *, const void *, const void *, const fl_p &, cudaStream_t);
template int fl_simt_fwd<128>(void *, float *, const void *, const void *, const void *, const fl_p &, cudaStream_t);
template int fl_simt_bwd<32>(float *, float *, float *, const void *, const void *, const void *, const void *, const float *,
                                const float *, const fl_p &, cudaStream_t);
template int fl_simt_bwd<64>(float *, float *, float *, const void *, const void *, const void *, const void *, const float *,
                                const float *, const fl_p &, cudaStream_t);
template int fl_simt_bwd<128>(float *, float *, float *, const void *, const void *, const void *, const void *, const float *,
                                const float *, const fl_p &, cudaStream_t);
