// The parameter store's size formulas for the memory model and the byte counts: persistent
// and per-unit bytes by stage, a row range's bytes, the bytes a training step sends.
#include <stdlib.h>
#include <string.h>

#include "model/pstore_internal.h"

size_t lc_pstore_rows_bytes(int stage, int bf16, int held16, int matrix, size_t n) {
  if (bf16 && matrix) return held16 && stage < 3 ? 0 : lc_bytes(LC_DT_BF16, n); // 2 bytes, gathered or packed (a bf16 store's: views)
  if (stage >= 3) return lc_bytes(LC_DT_F32, n + (n & 1));       // even: bf16 widened in place
  return bf16 ? lc_bytes(LC_DT_F32, n) : 0;
}
size_t lc_pstore_rows_grad_bytes(int stage, size_t n) { return stage >= 2 ? lc_bytes(LC_DT_F32, n) : 0; }
size_t lc_pstore_rows_bytes_q(int stage, lc_dtype held, size_t n) { return stage >= 3 ? lc_bytes(held, n) : 0; }

lc_status lc_pstore_sizes(const lc_config *cfg, int stage, int Z, lc_ps_sizes *out) {
  memset(out, 0, sizeof *out);
  if (stage == 0 || Z < 1) Z = 1;
  lc_param_layout L;
  LC_TRY(lc_param_layout_build(&L, cfg, Z));
  const size_t full = lc_bytes(LC_DT_F32, L.total), shard = full / (size_t)Z;
  out->params = stage >= 3 ? shard : full;
  const int b16 = lc_ps_store_dtype(cfg) == LC_DT_BF16; // a frozen bf16 base: 2 bytes, whole or sharded
  if (b16) out->params = lc_bytes(LC_DT_BF16, L.total) / (stage >= 3 ? (size_t)Z : 1);
  // GGUF blocks: each tensor in its stored bytes, whole (stage 0) or each unit Z ways (3)
  const int mixed = lc_ps_store_dtype(cfg) == LC_DT_U8;
  lc_status st = mixed && stage != 0 && stage != 3
                     ? lc_fail(LC_EINVAL, "internal: a frozen base in GGUF blocks is held whole (stage 0) or sharded (stage 3)")
                     : LC_OK;
  size_t *uoff = mixed ? calloc((size_t)L.n_units + 1, sizeof *uoff) : NULL;
  if (st == LC_OK && mixed && !uoff) st = lc_fail(LC_ENOMEM, "out of memory for the memory model");
  if (st == LC_OK && mixed) st = lc_ps_mixed_layout(cfg, &L, stage >= 3 ? Z : 1, NULL, NULL, uoff, &out->params);
  if (st == LC_OK && mixed && stage >= 3) {
    out->params /= (size_t)Z;
    for (int u = 0; u < L.n_units && u < LC_MAX_LAYERS + 2; u++) out->unit_q[u] = uoff[u + 1] - uoff[u];
  }
  free(uoff);
  if (st != LC_OK) {
    lc_param_layout_free(&L);
    return st;
  }
  out->grads = stage >= 2 ? shard : full;
  out->optim = 2 * (stage >= 1 ? shard : full) + LC_PS_NORM_ACC_BYTES;
  out->unit_embed = lc_bytes(LC_DT_F32, L.units[LC_UNIT_EMBED].n);
  out->unit_layer = cfg->n_layers > 0 ? lc_bytes(LC_DT_F32, L.units[lc_unit_layer(0)].n) : 0;
  // (a whole bf16 store's compute copy is its vectors alone: the matrices are views of it;
  // sharded, the gathered copy is the whole unit as for any store)
  const int vo = b16 && stage < 3;
  out->unit_layer16 = cfg->n_layers > 0 ? lc_ps_copy16_bytes(&L, lc_unit_layer(0), vo) : 0;
  out->unit_embed16 = lc_ps_copy16_bytes(&L, LC_UNIT_EMBED, vo);
  out->unit_final16 = lc_ps_copy16_bytes(&L, lc_unit_final(cfg->n_layers), vo);
  if (mixed) out->unit_layer16 = out->unit_embed16 = out->unit_final16 = 0; // (views where the weights lie)
  out->unit_final = lc_bytes(LC_DT_F32, L.units[lc_unit_final(cfg->n_layers)].n);
  size_t used = 0;
  for (int t = 0; t < L.n_tensors; t++) used += lc_bytes(LC_DT_F32, L.table[t].numel);
  out->padding = full - used;
  lc_param_layout_free(&L);
  return LC_OK;
}

// Bytes this rank sends in one pass for the row ranges of tensor t, `rows` rows each
// (vocabulary slices): `gathers` uneven all-gathers of g-byte elements and `reductions`
// uneven reduce-scatters (each then all-reduced across the replica groups).
static double rows_bytes_sent(const lc_pstore *ps, int t, size_t rows, int gathers, int reductions, double g) {
  const size_t len = lc_pstore_row_len(ps, t), V = lc_pstore_n_rows(ps, t);
  const double f = (double)lc_dtype_size(LC_DT_F32), Z = ps->Z, R = ps->R;
  double b = 0;
  for (size_t a = 0; a < V; a += rows) {
    const size_t x0 = ps->lay.table[t].offset + a * len, n = ((a + rows < V ? a + rows : V) - a) * len;
    size_t at, mine;
    lc_ps_range_piece(ps, ps->lay.table[t].unit, x0, n, ps->zrank, &at, &mine);
    b += gathers * (Z - 1) * (double)mine * g;
    b += reductions * ((double)(n - mine) * f + (R > 1 ? 2.0 * (R - 1) / R * (double)mine * f : 0.0));
  }
  return b;
}

// The same for a U8 store (stage 3, frozen): the rows' bytes as held, gathered only.
static double rows_bytes_sent_q(const lc_pstore *ps, int t, size_t rows, int gathers) {
  const size_t len = lc_pstore_row_len(ps, t), V = lc_pstore_n_rows(ps, t);
  const lc_dtype d = ps->hdt_[t];
  double b = 0;
  for (size_t a = 0; a < V; a += rows) {
    const size_t x0 = ps->hoff_[t] + lc_bytes(d, a * len), x1 = ps->hoff_[t] + lc_bytes(d, (a + rows < V ? a + rows : V) * len);
    size_t lo, hi;
    lc_ps_q_piece(ps, ps->lay.table[t].unit, x0, x1, ps->zrank, &lo, &hi);
    b += gathers * (ps->Z - 1.0) * (double)(hi - lo);
  }
  return b;
}

double lc_pstore_step_bytes(const lc_pstore *ps, int passes, lc_dtype compute) {
  const double f = (double)lc_dtype_size(LC_DT_F32), total = (double)ps->lay.total, Z = ps->Z, R = ps->R;
  const int W = ps->world ? ps->world->size : 1;
  const int frozen = !lc_buf_ok(ps->grads_b); // a frozen base (LoRA): gathers only, nothing reduced
  if (ps->stage == 0) return W > 1 && !frozen ? 2.0 * (W - 1) / W * total * f : 0.0;
  const lc_param_layout *L = &ps->lay;
  const int nl = ps->cfg.n_layers, Eu = LC_UNIT_EMBED, Fu = lc_unit_final(nl), tied = ps->cfg.tie_embeddings;
  // Vocabulary slices (stage >= 2): the embedding and final units move as row ranges.
  const int sliced = ps->vocab_rows > 0 && ps->stage >= 2;
  const double g = (double)lc_dtype_size(compute == LC_DT_BF16 ? LC_DT_BF16 : LC_DT_F32); // gathered dtype
  // One reduction of every unit: reduce-scatter in the group, all-reduce across groups.
  const double reduced = sliced ? total - (double)L->units[Eu].n - (double)L->units[Fu].n : total;
  double red = (Z - 1) * (reduced / Z) * f + (R > 1 ? 2.0 * (R - 1) / R * (reduced / Z) * f : 0.0);
  double bytes = frozen ? 0.0 : red * (ps->stage == 1 ? 1 : passes);
  if (!frozen) bytes += 2.0 * (Z - 1) / Z * sizeof(double); // the norm's sum of squares
  if (sliced) { // per pass: the embedding's rows (gathered for the lookup, and twice more as a
                // tied head), the head's (gathered by both loss passes) and the final norm's
    const int g3 = ps->stage >= 3;
    for (int t = L->units[Eu].t0; t < L->units[Fu].t1; t++) {
      const int u = L->table[t].unit;
      if (u != Eu && u != Fu) continue;
      const int head = u == Fu && L->table[t].ndim == 2, emb = u == Eu;
      const int gathers = !g3 ? 0 : emb ? 1 + 2 * tied : head ? 2 : 1, reductions = frozen ? 0 : emb && tied ? 2 : 1;
      const size_t rows = L->table[t].ndim == 2 ? ps->vocab_rows : 1;
      bytes += passes * (ps->store == LC_DT_U8 ? rows_bytes_sent_q(ps, t, rows, gathers)
                                               : rows_bytes_sent(ps, t, rows, gathers, reductions, g));
    }
  }
  if (ps->stage <= 2) return frozen ? bytes : bytes + (Z - 1) * (total / Z) * f; // parameters all-gathered
  // Stage 3: per pass, forward gathers every unit once (the embedding twice when tied:
  // the LM head at the loss), backward every layer again. A U8 store's units move as the
  // bytes they are held in.
  if (ps->store == LC_DT_U8) {
#define UB(u) ((double)(ps->uoff_[(u) + 1] - ps->uoff_[(u)]))
    double ub = sliced ? (double)ps->uoff_[L->n_units] - UB(Eu) - UB(Fu)
                       : (double)ps->uoff_[L->n_units] + (tied ? UB(Eu) : 0.0);
    for (int l = 0; l < nl; l++) ub += UB(lc_unit_layer(l));
#undef UB
    return bytes + passes * (Z - 1) * (ub / Z);
  }
  double units = sliced ? reduced : (double)L->total + (tied ? (double)L->units[Eu].n : 0.0);
  for (int l = 0; l < nl; l++) units += (double)L->units[lc_unit_layer(l)].n;
  return bytes + passes * (Z - 1) * (units / Z) * g;
}
