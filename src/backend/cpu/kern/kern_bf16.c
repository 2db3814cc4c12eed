// The bf16 and amx levels of the kernel table (target flags in CMakeLists.txt): the
// AVX-512 element-wise loops, and GEMMs with bf16 operands through oneDNN (gemm_dnnl.c),
// which runs them with AVX512_BF16 dot products, or with AMX tiles on a CPU that has them
// (oneDNN picks the instruction set itself).
#define KERN_FN(name) kern_bf16_##name
#include "backend/cpu/kern/kern_ew.h"
#include "backend/cpu/kern/kern_levels.h"
#include "backend/cpu/gemm/gemm_dnnl.h"

const lc_kernels lc_kern_bf16 = {.level = LC_KERN_BF16, .name = "bf16", KERN_TABLE_ENTRIES,
                                 .gemm_bf16 = lc_gemm_dnnl_bf16};
const lc_kernels lc_kern_amx = {.level = LC_KERN_AMX, .name = "amx", KERN_TABLE_ENTRIES,
                                .gemm_bf16 = lc_gemm_dnnl_bf16};
