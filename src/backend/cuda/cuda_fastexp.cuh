// lc_fast_expf (backend/cpu/ops/fastexp.h) on the device, operation for operation, every step rounded
// on its own (__fmul_rn / __fadd_rn: nothing contracts into an FMA), so it gives the CPU's
// bits: the SwiGLU and loss kernels share it.
#ifndef LC_CUDA_FASTEXP_CUH
#define LC_CUDA_FASTEXP_CUH

#include <stdint.h>

#include "core/expcoef.h"

__device__ __forceinline__ float lcc_fast_expf(float x) {
  float xc = x < LC_EXP_LO ? LC_EXP_LO : x;
  xc = xc > LC_EXP_HI ? LC_EXP_HI : xc;
  const float tf = __fadd_rn(__fmul_rn(xc, LC_EXP_LOG2E), LC_EXP_SHIFTER);
  const float n = __fsub_rn(tf, LC_EXP_SHIFTER);
  float r = __fsub_rn(xc, __fmul_rn(n, LC_EXP_LN2_HI));
  r = __fsub_rn(r, __fmul_rn(n, LC_EXP_LN2_LO));
  float p = LC_EXP_P0;
  p = __fadd_rn(__fmul_rn(p, r), LC_EXP_P1);
  p = __fadd_rn(__fmul_rn(p, r), LC_EXP_P2);
  p = __fadd_rn(__fmul_rn(p, r), LC_EXP_P3);
  p = __fadd_rn(__fmul_rn(p, r), LC_EXP_P4);
  p = __fadd_rn(__fmul_rn(p, r), LC_EXP_P5);
  p = __fadd_rn(__fadd_rn(__fmul_rn(p, __fmul_rn(r, r)), r), 1.0f);
  const uint32_t su = ((__float_as_uint(tf) + 127u) << 23) & (0u - (uint32_t)(x >= LC_EXP_LO));
  return __fmul_rn(p, __uint_as_float(su));
}

#endif
