// The tile-primitive layer of the AMX attention kernel (backend/cpu/flash/flash_amx.h), in two
// implementations picked by LC_FLASH_AMX (set by the variant file before it includes
// flash_body.h):
//   LC_FLASH_AMX == 1: the real one, Intel AMX instructions (flash_v_amx.c, compiled with
//     -mamx-tile -mamx-bf16; run only where the CPU has AMX-BF16 and Linux granted the tile
//     data state, backend/cpu/flash/amx_perm.c);
//   LC_FLASH_AMX == 2: an emulation in C/AVX-512 with TDPBF16PS's semantics
//     (flash_v_amx_emu.c, a test-only variant): the same kernel source runs on any
//     AVX512_BF16 CPU, so its tiling, packing and edge handling are tested without AMX.
//
// The primitives (t: a tile number 0..7, a literal; stride in bytes):
//   TILE_CFG()              load this thread's tile configuration: every tile 16 rows x
//                           64 bytes (palette 1). Per thread, at the start of each parallel
//                           region that multiplies (the configuration is thread state).
//   TILE_RELEASE()          back to the init state (TILERELEASE), at the region's end.
//   TILE_ZERO(t)            t = 0.
//   TILE_LOAD(t, p, s)      16 rows of 64 bytes from p, rows s bytes apart.
//   TILE_STORE(t, p, s)     the same, stored.
//   TILE_DP(c, a, b)        TDPBF16PS c += a * b: a [16 rows][16 bf16 pairs], b the VNNI
//                           pair layout [16 pair rows][16 columns of pairs], c [16][16] fp32.
#ifndef LC_FLASH_TILE_H
#define LC_FLASH_TILE_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#if LC_FLASH_AMX == 1
// ---- the real tiles ----
typedef struct __attribute__((aligned(64))) {
  uint8_t palette_id, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} lc_tile_cfg;

// Every tile 16 rows x 64 bytes, palette 1; in read-only data: GCC 12's _tile_loadconfig
// names only the first 8 bytes as its asm's memory input, so a configuration built in a local
// could have its rows/colsb stores dropped or moved past the LDTILECFG.
static const lc_tile_cfg lc_tile_cfg16 = {.palette_id = 1,
                                          .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
                                          .rows = {16, 16, 16, 16, 16, 16, 16, 16}};
// GCC 12's _tile_loadd asm declares no memory input: a compiler barrier first, so the stores
// that fill what it reads (the packed P and dS, the staging tiles, C rescaled by alpha) are
// in memory before it (_tile_stored has its "memory" clobber already).
#define LC_TILE_BARRIER() __asm__ volatile("" ::: "memory")
#define TILE_CFG() _tile_loadconfig(&lc_tile_cfg16)
#define TILE_RELEASE() _tile_release()
#define TILE_ZERO(t) _tile_zero(t)
#define TILE_LOAD(t, p, s)                               \
  do {                                                   \
    LC_TILE_BARRIER();                                   \
    _tile_loadd(t, (const void *)(p), (long)(s));        \
  } while (0)
#define TILE_STORE(t, p, s) _tile_stored(t, (void *)(p), (long)(s))
#define TILE_DP(c, a, b) _tile_dpbf16ps(c, a, b)

#elif LC_FLASH_AMX == 2
// ---- the emulated tiles ----
// TDPBF16PS as the Intel SDM states it (Vol. 2C, "TDPBF16PS - Dot Product of BF16 Tiles
// Accumulated into Packed Single Precision Tile", Operation; also the Intel Architecture
// Instruction Set Extensions Programming Reference, ch. 3): for every row m of c and column
// n, two fp32 partial sums, of the even and of the odd bf16 of each pair, each advanced by
// FMAs over the pairs k = 0, 1, ... in order (make_fp32(bf16) = the bits << 16, input
// denormals read as zero, output denormals flushed to zero, round to nearest even, MXCSR
// ignored); then c[m][n] += even + odd. The real unit's internal order may differ within fp32
// rounding; the kernel's tests bound errors, they do not compare bits with the hardware.
// The state is per thread, like the tile registers; a tile instruction on a thread that has
// not loaded the configuration counts a fault (lc_flash_amx_emu_faults; the hardware raises
// #UD there), so the tests prove that every thread that multiplies configures its tiles.
typedef struct {
  uint32_t reg[8][16][16]; // 8 tiles of 16 rows x 64 bytes
  int configured;
} lc_tile_emu_state;
static _Thread_local lc_tile_emu_state tile_emu;
extern long lc_flash_amx_emu_faults; // flash_v_amx_emu.c

static inline void tile_emu_check(void) {
  if (!tile_emu.configured) __atomic_add_fetch(&lc_flash_amx_emu_faults, 1, __ATOMIC_RELAXED);
}
static inline void tile_emu_cfg(void) {
  memset(tile_emu.reg, 0, sizeof tile_emu.reg); // LDTILECFG zeroes the tile data
  tile_emu.configured = 1;
}
static inline void tile_emu_release(void) {
  memset(tile_emu.reg, 0, sizeof tile_emu.reg);
  tile_emu.configured = 0;
}
static inline void tile_emu_zero(int t) {
  tile_emu_check();
  memset(tile_emu.reg[t], 0, sizeof tile_emu.reg[t]);
}
static inline void tile_emu_load(int t, const void *p, long s) {
  tile_emu_check();
  for (int r = 0; r < 16; r++) memcpy(tile_emu.reg[t][r], (const char *)p + r * s, 64);
}
static inline void tile_emu_store(int t, void *p, long s) {
  tile_emu_check();
  for (int r = 0; r < 16; r++) memcpy((char *)p + r * s, tile_emu.reg[t][r], 64);
}
// fp32 bits with a zero exponent (denormals) become a zero of the same sign
static inline __m512i tile_emu_flush(__m512i x) {
  const __m512i ex = _mm512_set1_epi32(0x7f800000), sg = _mm512_set1_epi32((int)0x80000000u);
  __mmask16 den = _mm512_testn_epi32_mask(x, ex);
  return _mm512_mask_and_epi32(x, den, x, sg);
}
static inline void tile_emu_dp(int c, int a, int b) {
  tile_emu_check();
  const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
  for (int m = 0; m < 16; m++) {
    __m512 ev = _mm512_setzero_ps(), od = _mm512_setzero_ps();
    for (int k = 0; k < 16; k++) {
      const uint32_t ap = tile_emu.reg[a][m][k];
      const __m512i ae = tile_emu_flush(_mm512_set1_epi32((int)(ap << 16)));
      const __m512i ao = tile_emu_flush(_mm512_set1_epi32((int)(ap & 0xffff0000u)));
      const __m512i bp = _mm512_loadu_si512((const void *)tile_emu.reg[b][k]);
      const __m512i be = tile_emu_flush(_mm512_slli_epi32(bp, 16));
      const __m512i bo = tile_emu_flush(_mm512_and_si512(bp, hi));
      ev = (__m512)tile_emu_flush((__m512i)_mm512_fmadd_ps((__m512)ae, (__m512)be, ev));
      od = (__m512)tile_emu_flush((__m512i)_mm512_fmadd_ps((__m512)ao, (__m512)bo, od));
    }
    const __m512 sum = (__m512)tile_emu_flush((__m512i)_mm512_add_ps(ev, od));
    const __m512 dst = (__m512)tile_emu_flush(_mm512_loadu_si512((const void *)tile_emu.reg[c][m]));
    _mm512_storeu_si512((void *)tile_emu.reg[c][m], tile_emu_flush((__m512i)_mm512_add_ps(dst, sum)));
  }
}
#define TILE_CFG() tile_emu_cfg()
#define TILE_RELEASE() tile_emu_release()
#define TILE_ZERO(t) tile_emu_zero(t)
#define TILE_LOAD(t, p, s) tile_emu_load(t, (const void *)(p), (long)(s))
#define TILE_STORE(t, p, s) tile_emu_store(t, (void *)(p), (long)(s))
#define TILE_DP(c, a, b) tile_emu_dp(c, a, b)

#else
#error "flash_tile.h: define LC_FLASH_AMX as 1 (AMX) or 2 (emulated)"
#endif

#endif
