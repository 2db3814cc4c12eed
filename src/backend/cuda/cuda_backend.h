// The CUDA backend (backend.h): device memory through the sub-allocator (backend/suballoc.h)
// over cudaMalloc'd chunks, counted per category in the backend's own arena; a compute
// and a copy stream with events; the kernels of cuda_kern.h and cuBLASLt GEMMs
// (cuda_gemm.h). Built when CMake finds nvcc (LC_CUDA); a build without it has no such
// device and says so.
#ifndef LC_CUDA_BACKEND_H
#define LC_CUDA_BACKEND_H

#include "backend/backend.h"

// "cuda" or "cuda:N": LC_OK when this process can open that device, else LC_EINVAL with one
// line (no driver, no device, an index past the devices there are).
lc_status lc_backend_cuda_probe(const char *spec);
// Opens the device (LONGCTX_CUDA_FLASH=ref in the environment: attention through the
// simple reference kernels of cuda_kern.h, to tell a fault of the fast kernels from one
// elsewhere): its memory capped at the run's cap where one is set (host->cap), else
// at what the device has; host staging from `host`.
lc_status lc_backend_cuda_open(const char *spec, lc_arena *host, lc_backend **out);

#endif
