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

#if defined(__x86_64__)
// One emulated TDPBF16PS on 16 x 16 dword tiles (tests/test_kernels.c checks the emulation
// against the SDM's pseudo-code written out in scalar C): c += a * b, on this thread's tiles.
void lc_flash_amx_emu_tdpbf16ps(float *c, const uint32_t *a, const uint32_t *b) {
  TILE_CFG();
  TILE_LOAD(0, c, 64);
  TILE_LOAD(1, a, 64);
  TILE_LOAD(2, b, 64);
  TILE_DP(0, 1, 2);
  TILE_STORE(0, c, 64);
  TILE_RELEASE();
}
#endif
