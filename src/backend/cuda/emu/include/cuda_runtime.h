// The CPU emulation's stand-in for the CUDA toolkit's cuda_runtime.h (builds with LCC_EMU).
#include "backend/cuda/emu/cuda_emu.h"
