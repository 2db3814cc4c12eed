// The CPU emulation's stand-in for the CUDA toolkit's cuda_runtime_api.h (builds with LCC_EMU):
// C++ gets the whole emulation, C (the tests, through cuda_kern.h) the stream type only.
#ifdef __cplusplus
#include "backend/cuda/emu/cuda_emu.h"
#else
typedef struct CUstream_st *cudaStream_t;
#endif
