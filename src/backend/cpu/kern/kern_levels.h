// The tables of the kernel levels (backend/cpu/kern/kern_*.c), gathered by backend/cpu/kern/kernels.c.
#ifndef LC_KERN_LEVELS_H
#define LC_KERN_LEVELS_H

#include "backend/cpu/kern/kernels.h"

extern const lc_kernels lc_kern_portable, lc_kern_avx2, lc_kern_avx512, lc_kern_bf16, lc_kern_amx;

#endif
