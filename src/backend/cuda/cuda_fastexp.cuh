// lc_fast_expf (ops/fastexp.h) on the device, operation for operation, every step rounded
// on its own (__fmul_rn / __fadd_rn: nothing contracts into an FMA), so it gives the CPU's
// bits: the SwiGLU and loss kernels share it.
#ifndef LC_CUDA_FASTEXP_CUH
#define LC_CUDA_FASTEXP_CUH

#include <stdint.h>

__device__ __forceinline__ float lcc_fast_expf(float x) {
  float xc = x < -87.0f ? -87.0f : x;
  xc = xc > 88.0f ? 88.0f : xc;
  const float tf = __fadd_rn(__fmul_rn(xc, 1.44269504088896341f), 12582912.0f);
  const float n = __fsub_rn(tf, 12582912.0f);
  float r = __fsub_rn(xc, __fmul_rn(n, 0.693359375f));
  r = __fsub_rn(r, __fmul_rn(n, -2.12194440e-4f));
  float p = 1.9875691500e-4f;
  p = __fadd_rn(__fmul_rn(p, r), 1.3981999507e-3f);
  p = __fadd_rn(__fmul_rn(p, r), 8.3334519073e-3f);
  p = __fadd_rn(__fmul_rn(p, r), 4.1665795894e-2f);
  p = __fadd_rn(__fmul_rn(p, r), 1.6666665459e-1f);
  p = __fadd_rn(__fmul_rn(p, r), 5.0000001201e-1f);
  p = __fadd_rn(__fadd_rn(__fmul_rn(p, __fmul_rn(r, r)), r), 1.0f);
  const uint32_t su = ((__float_as_uint(tf) + 127u) << 23) & (0u - (uint32_t)(x >= -87.0f));
  return __fmul_rn(p, __uint_as_float(su));
}

#endif
