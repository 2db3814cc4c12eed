// The attention kernel's variants, one per kernel-table level (backend/cpu/kern/kernels.h), each the
// same algorithm (backend/cpu/flash/flash_body.h) compiled with its level's target flags.
#ifndef LC_FLASH_VARIANTS_H
#define LC_FLASH_VARIANTS_H

#include "backend/cpu/flash/flash.h"
#include "backend/cpu/kern/kernels.h"

typedef struct {
  const char *name;
  lc_status (*fwd)(void *out, float *lse, const void *q, const void *k, const void *v,
                   const lc_attn_shape *s, lc_arena *arena);
  lc_status (*bwd)(float *dq, float *dk, float *dv, const void *dout, const void *q,
                   const void *k, const void *v, const float *lse, const float *delta,
                   const lc_attn_shape *s, lc_arena *arena);
  size_t (*ws)(const lc_attn_shape *s, int bwd, int threads);
  size_t (*kv_bytes)(const lc_attn_shape *s, int bwd);
  void (*kv_pack)(void *dst, const void *k, const void *v, const lc_attn_shape *s, int bwd);
} lc_flash_variant;

// The variant a level runs: bf16 = 1 (a bf16 pass) picks the bf16-product kernel at the
// bf16 level, the AMX tile kernel at the amx level (the bf16 one where Linux refused the tile
// state: lc_flash_amx_ready), the level's fp32 kernel otherwise.
const lc_flash_variant *lc_flash_variant_for(lc_kern_level level, int bf16);
// Test-only: the amx kernel with emulated tiles (flash_tile.h), runnable on any AVX512_BF16
// CPU, and the count of tile instructions it saw on a thread without a tile configuration.
const lc_flash_variant *lc_flash_variant_amx_emu(void);
extern long lc_flash_amx_emu_faults;
// Test-only (x86-64): one TDPBF16PS, c[16][16] fp32 += a[16 rows][16 bf16 pairs] *
// b[16 pair rows][16 columns of pairs], emulated as flash_tile.h carries it out, or on the
// real tiles (only where lc_flash_amx_ready()).
void lc_flash_tdpbf16ps_amx_emu(float *c, const uint32_t *a, const uint32_t *b);
void lc_flash_tdpbf16ps_amx(float *c, const uint32_t *a, const uint32_t *b);

#define LC_FLASH_DECLARE(suf)                                                                  \
  lc_status lc_flash_fwd_##suf(void *out, float *lse, const void *q, const void *k,            \
                               const void *v, const lc_attn_shape *s, lc_arena *arena);        \
  lc_status lc_flash_bwd_##suf(float *dq, float *dk, float *dv, const void *dout,              \
                               const void *q, const void *k, const void *v,                    \
                               const float *lse, const float *delta, const lc_attn_shape *s,   \
                               lc_arena *arena);                                               \
  size_t lc_flash_ws_##suf(const lc_attn_shape *s, int bwd, int threads);                      \
  size_t lc_flash_kv_bytes_##suf(const lc_attn_shape *s, int bwd);                             \
  void lc_flash_kv_pack_##suf(void *dst, const void *k, const void *v, const lc_attn_shape *s, int bwd);
LC_FLASH_DECLARE(portable)
LC_FLASH_DECLARE(avx2)
LC_FLASH_DECLARE(avx512)
LC_FLASH_DECLARE(bf16)
LC_FLASH_DECLARE(amx)
LC_FLASH_DECLARE(amx_emu)

#endif
