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

} // namespace

extern "C" long lcc_emu_selftest(int which, int *err) {
  static float x[256], out[256];
  for (int i = 0; i < 256; i++) x[i] = (float)i;
  lcc_emu_reset_findings();
  if (which <= 3 || which == 7) {
    LCC_LAUNCH(k_selftest, 2, 128, 0, nullptr)(out, x, which);
  } else if (which == 4) {
    LCC_LAUNCH(k_uninit, 1, 32, 0, nullptr)(out);
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
