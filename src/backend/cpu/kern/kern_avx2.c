// The avx2 level of the kernel table (target flags in CMakeLists.txt).
#define KERN_FN(name) kern_avx2_##name
#include "backend/cpu/kern/kern_ew.h"
#include "backend/cpu/kern/kern_levels.h"

const lc_kernels lc_kern_avx2 = {.level = LC_KERN_AVX2, .name = "avx2", KERN_TABLE_ENTRIES};
