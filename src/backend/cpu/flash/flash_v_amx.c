// The attention kernel's amx variant (backend/cpu/flash/flash_body.h with the bf16 kernel's
// layouts and AMX tile products, backend/cpu/flash/flash_amx.h; target flags in
// CMakeLists.txt). Run only where the CPU has AMX-BF16 and Linux granted the tile data
// state (lc_flash_amx_ready). Off x86 the same entry points run the portable algorithm (the
// level is never selected there).
#if defined(__x86_64__)
#define LC_FLASH_BF16 1
#define LC_FLASH_AMX 1
#endif
#define LC_FLASH_FN(name) lc_flash_##name##_amx
#include "backend/cpu/flash/flash_body.h"

#if defined(__x86_64__)
// Test-only: one real TDPBF16PS on 16 x 16 dword tiles, c += a * b (tests/test_kernels.c
// compares it bit for bit with lc_flash_amx_emu_tdpbf16ps). Only where lc_flash_amx_ready().
void lc_flash_amx_tdpbf16ps(float *c, const uint32_t *a, const uint32_t *b) {
  TILE_CFG();
  TILE_LOAD(0, c, 64);
  TILE_LOAD(1, a, 64);
  TILE_LOAD(2, b, 64);
  TILE_DP(0, 1, 2);
  TILE_STORE(0, c, 64);
  TILE_RELEASE();
}
#endif
