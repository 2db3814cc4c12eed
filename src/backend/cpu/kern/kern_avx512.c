// The avx512 level of the kernel table (target flags in CMakeLists.txt).
#define KERN_FN(name) kern_avx512_##name
#include "backend/cpu/kern/kern_ew.h"
#include "backend/cpu/kern/kern_levels.h"

const lc_kernels lc_kern_avx512 = {.level = LC_KERN_AVX512, .name = "avx512", KERN_TABLE_ENTRIES};
