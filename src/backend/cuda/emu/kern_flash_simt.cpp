// The kernels of cuda_flash_simt.cu for the CPU emulation (cuda_emu.h), compiled by the host C++ compiler.
#include "backend/cuda/cuda_flash_simt.cu"
