// The portable level of the kernel table (target flags in CMakeLists.txt).
#define KERN_FN(name) kern_portable_##name
#include "backend/cpu/kern/kern_ew.h"
#include "backend/cpu/kern/kern_levels.h"

const lc_kernels lc_kern_portable = {.level = LC_KERN_PORTABLE, .name = "portable", KERN_TABLE_ENTRIES};
