// The amx variant with emulated tiles (backend/cpu/flash/flash_tile.h, LC_FLASH_AMX == 2): the
// same kernel source as flash_v_amx.c, its tile instructions carried out in C/AVX-512 with
// TDPBF16PS's semantics, so the kernel's logic is tested on any AVX512_BF16 CPU
// (tests/test_kernels.c). Test-only: no kernel level dispatches to it. Compiled with the bf16
// level's flags.
#if defined(__x86_64__)
#define LC_FLASH_BF16 1
#define LC_FLASH_AMX 2
#endif
#define LC_FLASH_FN(name) lc_flash_##name##_amx_emu
#include "backend/cpu/flash/flash_body.h"

long lc_flash_amx_emu_faults; // tile instructions on a thread without a tile configuration
