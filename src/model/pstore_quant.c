// The parameter store's frozen base in GGUF blocks (a U8 store): its byte layout, its views,
// and its tensors set and read (dequantized) one at a time.
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kern/kernels.h"
#include "core/dequant.h"
#include "model/pstore_internal.h"

// ---- a frozen base in GGUF blocks (store U8): each tensor at its own 64-byte-aligned byte
// offset, in the dtype mixed_dt gives it.
#define MIXED_ALIGN 64
static lc_dtype mixed_dt(const lc_config *cfg, const lc_param_info *p) {
  const int q = lc_param_base_q(cfg, p);
  if (q) return (lc_dtype)q;
  return p->ndim == 2 && cfg->lora.base_bf16 ? LC_DT_BF16 : LC_DT_F32;
}
// Total bytes; off and dt (when not NULL) get each tensor's offset and dtype, uoff (when
// not NULL) each unit's start (n_units + 1 entries). Each unit ends padded to a multiple of
// 64 Z bytes, so that its Z shards are whole 64-byte pieces (Z = 1: the tensors' own
// alignment, nothing more). A quantized tensor's rows must be whole blocks (LC_EINVAL).
lc_status lc_ps_mixed_layout(const lc_config *cfg, const lc_param_layout *L, int Z, size_t *off, lc_dtype *dt,
                             size_t *uoff, size_t *total) {
  size_t at = 0;
  const size_t q = (size_t)MIXED_ALIGN * (size_t)(Z > 1 ? Z : 1);
  for (int u = 0; u < L->n_units; u++) {
    if (uoff) uoff[u] = at;
    for (int t = L->units[u].t0; t < L->units[u].t1; t++) {
      const lc_param_info *p = &L->table[t];
      const lc_dtype d = mixed_dt(cfg, p);
      if (lc_dtype_is_quant(d) && (size_t)p->shape[1] % lc_dtype_block(d))
        return lc_fail(LC_EINVAL, "%s: rows of %ld values are not whole %s blocks of %zu", p->name, p->shape[1],
                       lc_dtype_name(d), lc_dtype_block(d));
      if (off) off[t] = at, dt[t] = d;
      at += (lc_bytes(d, p->numel) + MIXED_ALIGN - 1) & ~(size_t)(MIXED_ALIGN - 1);
    }
    at = (at + q - 1) / q * q;
  }
  if (uoff) uoff[L->n_units] = at;
  *total = at;
  return LC_OK;
}

// Every view of a whole (stage 0) store, once: the matrices and vectors where they lie.
void lc_ps_mixed_views(lc_pstore *ps) {
  for (int t = 0; t < ps->lay.n_tensors; t++)
    *lc_weights_slot(&ps->w, &ps->lay.table[t]) =
        lc_buf_part(ps->params_b, ps->hoff_[t], ps->lay.table[t].numel, ps->hdt_[t]);
  lc_weights_tie(&ps->w, &ps->cfg);
}
// The views of unit u's tensors where they lie in its gathered copy `gath` (stage 3; the
// empty buffer clears them).
void lc_ps_q_views(lc_pstore *ps, int u, lc_buf gath) {
  const lc_param_unit *U = &ps->lay.units[u];
  for (int t = U->t0; t < U->t1; t++)
    *lc_weights_slot(&ps->w, &ps->lay.table[t]) =
        lc_buf_ok(gath) ? lc_buf_part(gath, ps->hoff_[t] - ps->uoff_[u], ps->lay.table[t].numel, ps->hdt_[t]) : LC_PS_NONE;
  lc_weights_tie(&ps->w, &ps->cfg);
}

lc_dtype lc_pstore_held_dtype(const lc_pstore *ps, int t) { return ps->store == LC_DT_U8 ? ps->hdt_[t] : ps->store; }

lc_status lc_pstore_set_tensor_raw(lc_pstore *ps, int t, size_t byte_off, const void *src, size_t nbytes) {
  const lc_dtype d = lc_pstore_held_dtype(ps, t);
  const size_t have = lc_bytes(d, ps->lay.table[t].numel);
  if (!lc_dtype_is_quant(d) || byte_off > have || nbytes > have - byte_off)
    return lc_fail(LC_EINVAL, "internal: bytes [%zu, %zu) of %s set raw (held %s, %zu bytes)", byte_off,
                   byte_off + nbytes, ps->lay.table[t].name, lc_dtype_name(d), have);
  const int u = ps->lay.table[t].unit;
  const size_t x0 = ps->hoff_[t] + byte_off;
  size_t a, b; // (stage 3: this rank's part)
  lc_ps_q_mine(ps, u, x0, x0 + nbytes, &a, &b);
  return b > a ? lc_buf_write(lc_buf_part(ps->params_b, lc_ps_q_local(ps, u, a), b - a, LC_DT_U8), (const char *)src + (a - x0),
                              LC_SYNC_STATES)
               : LC_OK;
}

// A U8 store's dense tensor t: elements [first, first + n) from src, rounded where it is
// held in BF16 or (base_bf16) its vectors are bf16 values in F32. A tensor held in blocks
// is set raw (lc_pstore_set_tensor_raw): nothing here writes it.
void lc_ps_mixed_set(lc_pstore *ps, int t, size_t first, const float *src, size_t n) {
  const lc_dtype d = ps->hdt_[t];
  if (lc_dtype_is_quant(d)) return;
  const int u = ps->lay.table[t].unit;
  const size_t es = lc_dtype_size(d), x0 = ps->hoff_[t] + first * es;
  size_t a, b; // (stage 3: this rank's part; shards and tensors start on 64 bytes: whole elements)
  lc_ps_q_mine(ps, u, x0, x0 + n * es, &a, &b);
  if (b <= a) return;
  src += (a - x0) / es;
  n = (b - a) / es;
  const lc_buf v = lc_buf_part(ps->params_b, lc_ps_q_local(ps, u, a), n, d);
  if (d == LC_DT_BF16) {
    lc_ps_write_narrow(v, src);
    return;
  }
  if (!ps->cfg.lora.base_bf16) {
    lc_buf_write(v, src, LC_SYNC_STATES);
    return;
  }
  float tmp[4096]; // a vector for bf16 passes: its values rounded, in fp32
  for (size_t i = 0; i < n; i += 4096) {
    const size_t k = n - i < 4096 ? n - i : 4096;
    lc_bf16_round_copy(tmp, src + i, k);
    lc_buf_write(lc_buf_view(v, i, k), tmp, LC_SYNC_STATES);
  }
}

// Elements [e0, e0 + n) of a tensor held in d, decoded from raw (its bytes from the start of
// e0's block, or element) into fp32 dst.
static void q_decode(lc_dtype d, const unsigned char *raw, size_t e0, size_t n, float *dst) {
  if (d == LC_DT_F32) {
    memcpy(dst, raw, sizeof(float) * n);
  } else if (d == LC_DT_BF16) {
    lc_bf16_unpack(dst, (const uint16_t *)raw, n);
  } else {
    enum { NB = 16 }; // blocks at a time (every block type's block is under 256 values)
    const size_t bs = lc_dtype_block(d), bb = lc_dtype_block_bytes(d), b0 = e0 / bs;
    float val[NB * 256];
    for (size_t b = b0, b1 = n ? (e0 + n - 1) / bs + 1 : b0; b < b1; b += NB) {
      const size_t k = b1 - b < NB ? b1 - b : NB;
      lc_dequant(d, raw + (b - b0) * bb, k * bs, val);
      const size_t s0 = b * bs, lo = s0 > e0 ? s0 : e0, hi = s0 + k * bs < e0 + n ? s0 + k * bs : e0 + n;
      memcpy(dst + (lo - e0), val + (lo - s0), sizeof(float) * (hi - lo));
    }
  }
}
// The tensor-relative bytes [*b0, *b1) that hold elements [e0, e1) of a tensor held in d
// (whole blocks).
static void q_bytes(lc_dtype d, size_t e0, size_t e1, size_t *b0, size_t *b1) {
  if (!lc_dtype_is_quant(d)) {
    *b0 = e0 * lc_dtype_size(d), *b1 = e1 * lc_dtype_size(d);
    return;
  }
  const size_t bs = lc_dtype_block(d), bb = lc_dtype_block_bytes(d);
  *b0 = e0 / bs * bb;
  *b1 = e1 > e0 ? ((e1 - 1) / bs + 1) * bb : *b0;
}

// Elements [first, first + n) of a U8 store's tensor t into fp32 dst on world rank 0:
// read (stage 3: each piece from the zero-group-0 rank that holds it), widened or
// dequantized, in pieces of at most Q_CHUNK bytes (whole blocks). Collective like
// lc_pstore_gather_tensor_part.
#define Q_CHUNK ((size_t)1 << 22)
lc_status lc_ps_mixed_gather(lc_pstore *ps, int t, size_t first, size_t n, float *dst) {
  const int root = !ps->world || ps->world->rank == 0, sharded = lc_ps_params_sharded(ps);
  if (sharded ? ps->rrank != 0 : !root) return LC_OK;
  const lc_dtype d = ps->hdt_[t];
  const int u = ps->lay.table[t].unit;
  // Elements per piece: whole blocks (or elements) within Q_CHUNK bytes.
  const size_t per = lc_dtype_is_quant(d) ? Q_CHUNK / lc_dtype_block_bytes(d) * lc_dtype_block(d) : Q_CHUNK / lc_dtype_size(d);
  unsigned char *raw = lc_alloc(ps->arena, LC_MEM_COMM, Q_CHUNK + 256, "a frozen tensor's piece on its way to rank 0");
  if (!raw) return LC_ENOMEM;
  lc_status st = LC_OK;
  const size_t bs = lc_dtype_is_quant(d) ? lc_dtype_block(d) : 1;
  for (size_t e = first / bs * bs; e < first + n && st == LC_OK; e += per) {
    const size_t e1 = e + per < first + n ? e + per : first + n;
    size_t b0, b1;
    q_bytes(d, e, e1, &b0, &b1);
    const size_t x0 = ps->hoff_[t] + b0, x1 = ps->hoff_[t] + b1;
    for (int r = 0; r < (sharded ? ps->Z : 1) && st == LC_OK; r++) {
      size_t a, b;
      if (sharded) lc_ps_q_piece(ps, u, x0, x1, r, &a, &b);
      else a = x0, b = x1;
      if (b == a || (!root && r != ps->zrank)) continue;
      if (r == ps->zrank) { // this rank's bytes: read them (root: into place; else: send them)
        st = lc_buf_read(lc_buf_part(ps->params_b, lc_ps_q_local(ps, u, a), b - a, LC_DT_U8), raw + (a - x0), LC_SYNC_STATES);
        lc_req q = {{0}, 0};
        if (st == LC_OK && !root) st = lc_isend(ps->zg, raw + (a - x0), b - a, LC_DT_U8, 0, LC_PS_TAG_TENSOR, &q);
        if (st == LC_OK && !root) st = lc_wait(ps->zg, &q);
      } else {
        lc_req q = {{0}, 0};
        st = lc_irecv(ps->zg, raw + (a - x0), b - a, LC_DT_U8, r, LC_PS_TAG_TENSOR, &q);
        if (st == LC_OK) st = lc_wait(ps->zg, &q);
      }
    }
    if (st == LC_OK && root) { // the requested elements of this piece
      const size_t lo = e > first ? e : first;
      float *tmp = dst + (lo - first);
      if (lo == e) {
        q_decode(d, raw, e, e1 - e, tmp);
      } else { // the first piece starts inside a block: decode from the block's start
        float *v = malloc(sizeof(float) * (e1 - e));
        if (!v) st = lc_fail(LC_ENOMEM, "out of memory reading a frozen tensor");
        else q_decode(d, raw, e, e1 - e, v), memcpy(tmp, v + (lo - e), sizeof(float) * (e1 - lo)), free(v);
      }
    }
  }
  lc_free(ps->arena, raw);
  return st;
}
