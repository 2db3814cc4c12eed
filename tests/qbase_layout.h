// A frozen base in GGUF blocks (QLoRA, a U8 store: pstore.h, lc_pstore.store) laid out by its
// documented rule, written here apart from the store's own layout function: each tensor in
// its held dtype (the quantized projections in their blocks, the other matrices BF16 with
// lora.base_bf16 else F32, the vectors F32) at a 64-byte-aligned offset, each unit padded to
// a multiple of 64 Z bytes, so that its Z shards are whole 64-byte pieces; under ZeRO 3 a
// rank holds 1/Z of every unit.
#ifndef LC_T_QBASE_LAYOUT_H
#define LC_T_QBASE_LAYOUT_H

#include "core/dtype.h"
#include "model/params.h"

static size_t lc_t_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// The held dtype of tensor p of a QLoRA config.
static lc_dtype lc_t_qbase_dt(const lc_config *cfg, const lc_param_info *p) {
  const int q = lc_param_base_q(cfg, p);
  if (q) return (lc_dtype)q;
  return p->ndim == 2 && cfg->lora.base_bf16 ? LC_DT_BF16 : LC_DT_F32;
}

// Bytes of unit u's tensors, each padded to 64 bytes, before the unit's own padding.
static size_t lc_t_qbase_unit_raw(const lc_config *cfg, const lc_param_layout *L, int u) {
  size_t b = 0;
  for (int t = L->units[u].t0; t < L->units[u].t1; t++)
    b += lc_t_up(lc_bytes(lc_t_qbase_dt(cfg, &L->table[t]), L->table[t].numel), 64);
  return b;
}
// Unit u's bytes in a layout for zero groups of Z: padded to 64 Z.
static size_t lc_t_qbase_unit(const lc_config *cfg, const lc_param_layout *L, int u, int Z) {
  return lc_t_up(lc_t_qbase_unit_raw(cfg, L, u), 64 * (size_t)(Z > 1 ? Z : 1));
}
// Bytes one rank holds under ZeRO 3 over groups of Z: 1/Z of every unit.
static size_t lc_t_qbase_rank_bytes(const lc_config *cfg, const lc_param_layout *L, int Z) {
  size_t b = 0;
  for (int u = 0; u < L->n_units; u++) b += lc_t_qbase_unit(cfg, L, u, Z) / (size_t)Z;
  return b;
}

#endif
