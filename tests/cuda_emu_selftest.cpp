// Kernels with known faults, for test_cuda_emu's checks of the emulation itself (compiled with
// the CUDA kernels' emulation flags, tests/cuda_emu.cmake): each entry launches one and
// returns the emulation's findings (and the launch's error through *err).
#include "backend/cuda/cuda_compat.cuh"
#include "backend/cuda/emu/cuda_emu_c.h"

namespace {

// Block sum through static shared memory; `bug` 1: the barrier between the writes and the
// reads left out (a race); 2: the barrier inside a branch only half the threads take (a
// deadlock); 3: a shuffle after half the warp exited (a deadlock); 7: a barrier after half the
// threads exited; 0: correct.
__global__ void k_selftest(float *out, const float *x, int bug) {
  LCC_SHARED(float, sh, [128]);
  const int t = threadIdx.x;
  if (bug == 3 && (t & 31) >= 16) return;
  if (bug == 7 && t >= 64) return;
  sh[t] = x[blockIdx.x * 128 + t];
  if (bug == 2) {
    if (t < 64) __syncthreads();
  } else if (bug != 1) {
    __syncthreads();
  }
  float v = sh[(t + 1) & 127];
  if (bug == 3) v = __shfl_xor_sync(0xffffffffu, v, 1);
  out[blockIdx.x * 128 + t] = v;
}

// Dynamic shared memory: `bug` 1 reads past the launch's size.
__global__ void k_selftest_dyn(float *out, int n, int bug) {
  LCC_EXTERN_SHARED(float, d, 16);
  const int t = threadIdx.x;
  d[t] = (float)t;
  __syncthreads();
  out[t] = d[(t + 1) % n] + (bug && t == 0 ? d[n] : 0.0f);
}

// A read of static shared memory no thread wrote in the block.
__global__ void k_uninit(float *out) {
  LCC_SHARED(float, u, [32]);
  if (threadIdx.x == 0) u[1] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = u[threadIdx.x & 1]; // u[0] never written
}

// ldmatrix.x4 and .x4.trans of a 16x16 tile of 16-bit values (element (r, c) = 16 r + c) in
// dynamic shared memory, row addresses as for an mma A fragment; `bug` 1: the row addresses
// 2 bytes off their 16-byte alignment; 2: row addresses in global memory.
__global__ void k_ldmatrix(uint32_t *out, const uint16_t *glob, int bug) {
  LCC_EXTERN_SHARED(uint16_t, t, 16);
  const int l = threadIdx.x, mi = l >> 3, r = l & 7;
  for (int e = l; e < 256; e += 32) t[e] = (uint16_t)e;
  __syncthreads();
  const uint16_t *base = bug == 2 ? glob : t;
  const uint16_t *row = base + ((mi & 1) * 8 + r) * 16 + (mi >> 1) * 8 + (bug == 1 ? 1 : 0);
  uint32_t a[4], b[4];
  lcc_emu::ldmatrix_x4<0>(a, row, "ldmatrix.x4");
  lcc_emu::ldmatrix_x4<1>(b, row, "ldmatrix.x4.trans");
  for (int i = 0; i < 4; i++) out[8 * l + i] = a[i], out[8 * l + 4 + i] = b[i];
}

} // namespace

// The values k_ldmatrix must give by the PTX ISA's layout (lane l = 4 g + t, matrix i at rows
// 8 (i & 1), cols 8 (i >> 1) of the tile): plain (row g, cols 2t, 2t+1); .trans (rows 2t, 2t+1,
// col g). 0: right.
static int ldmatrix_values_wrong(const uint32_t *out) {
  for (int l = 0; l < 32; l++) {
    const int g = l >> 2, t = l & 3;
    for (int i = 0; i < 4; i++) {
      const int r0 = 8 * (i & 1), c0 = 8 * (i >> 1);
      const uint32_t plain = (uint32_t)(16 * (r0 + g) + c0 + 2 * t) | (uint32_t)(16 * (r0 + g) + c0 + 2 * t + 1) << 16;
      const uint32_t trans = (uint32_t)(16 * (r0 + 2 * t) + c0 + g) | (uint32_t)(16 * (r0 + 2 * t + 1) + c0 + g) << 16;
      if (out[8 * l + i] != plain || out[8 * l + 4 + i] != trans) return 1;
    }
  }
  return 0;
}

extern "C" long lcc_emu_selftest(int which, int *err) {
  static float x[256], out[256];
  for (int i = 0; i < 256; i++) x[i] = (float)i;
  lcc_emu_reset_findings();
  if (which <= 3 || which == 7) {
    LCC_LAUNCH(k_selftest, 2, 128, 0, nullptr)(out, x, which);
  } else if (which == 4) {
    LCC_LAUNCH(k_uninit, 1, 32, 0, nullptr)(out);
  } else if (which >= 8) {
    static uint16_t glob[256];
    static uint32_t lout[256];
    LCC_LAUNCH(k_ldmatrix, 1, 32, 256 * sizeof(uint16_t), nullptr)(lout, glob, which - 8);
    *err = (int)cudaGetLastError();
    const long f = lcc_emu_findings();
    lcc_emu_reset_findings();
    return which == 8 && ldmatrix_values_wrong(lout) ? -1 : f;
  } else {
    LCC_LAUNCH(k_selftest_dyn, 1, 64, 64 * sizeof(float), nullptr)(out, 64, which == 6);
  }
  *err = (int)cudaGetLastError();
  const long f = lcc_emu_findings();
  lcc_emu_reset_findings();
  if (which == 0 || which == 5) { // correct kernels: also their values
    for (int i = 0; i < (which == 0 ? 256 : 64); i++) {
      const float want = which == 0 ? (float)((i / 128) * 128 + ((i % 128 + 1) & 127)) : (float)((i + 1) % 64);
      if (out[i] != want) return -1;
    }
  }
  return f;
}

// The emulation's bf16 conversion (cuda_emu.h) on n values, for test_cuda_emu's comparison with
// the CPU's rounding rule.
extern "C" void lcc_emu_bf16_convert(uint16_t *dst, const float *src, int n) {
  for (int i = 0; i < n; i++) dst[i] = __float2bfloat16(src[i]).x;
}
