// What lets the same kernel sources build two ways: with nvcc for the GPU, and with the host
// C++ compiler for the CPU emulation of CUDA's execution model (emu/cuda_emu.h, defined
// LCC_EMU; tests/test_cuda_emu.cpp runs the kernels there). Launches are written
// LCC_LAUNCH(kernel, grid, block, smem, stream)(args) (nvcc: kernel<<<grid, block, smem,
// stream>>>(args)), static shared memory LCC_SHARED(type, name, [dims]) (nvcc: __shared__ type
// name[dims]) and dynamic shared memory LCC_EXTERN_SHARED(type, name, align) (nvcc: extern
// __shared__ __align__(align) type name[]).
#ifndef LC_CUDA_COMPAT_CUH
#define LC_CUDA_COMPAT_CUH

#ifdef LCC_EMU
#include "backend/cuda/emu/cuda_emu.h"
#else
#include <cuda_runtime.h>
#define LCC_LAUNCH(kern, grid, block, smem, st) kern<<<grid, block, smem, st>>>
#define LCC_SHARED(type, name, dims) __shared__ type name dims
#define LCC_EXTERN_SHARED(type, name, align) extern __shared__ __align__(align) type name[]
#endif

#endif
