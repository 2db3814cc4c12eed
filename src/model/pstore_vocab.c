// The parameter store's row ranges of one tensor (vocabulary slices of the embedding and the
// LM head, lc_ps_rows): fetched, acquired and released, their gradients reduced on their own.
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kern/kernels.h"
#include "core/runstate.h"
#include "model/pstore_internal.h"

size_t lc_pstore_row_len(const lc_pstore *ps, int tensor) {
  const lc_param_info *T = &ps->lay.table[tensor];
  return T->ndim == 2 ? (size_t)T->shape[1] : T->numel;
}
size_t lc_pstore_n_rows(const lc_pstore *ps, int tensor) { return ps->lay.table[tensor].numel / lc_pstore_row_len(ps, tensor); }

// cnt[Z] counts and cnt[Z..2Z) displacements of the range's pieces, in rank order (they
// follow one another: shards are consecutive).
static int *range_counts(const lc_pstore *ps, int u, size_t x0, size_t n) {
  int *cnt = malloc(sizeof(int) * 2 * (size_t)ps->Z);
  if (!cnt) return NULL;
  for (int i = 0; i < ps->Z; i++) {
    size_t at, len;
    lc_ps_range_piece(ps, u, x0, n, i, &at, &len);
    cnt[i] = (int)len;
    cnt[ps->Z + i] = (int)at;
  }
  return cnt;
}

// Where this rank's piece of the range starts in its shard buffers (params or grads).
static size_t range_mine(const lc_pstore *ps, int u, size_t x0, size_t n, size_t *at, size_t *len) {
  lc_ps_range_piece(ps, u, x0, n, ps->zrank, at, len);
  return lc_ps_shard_off(ps, u) + (x0 + *at - lc_ps_owned_lo(ps, u));
}

static void rows_track(lc_pstore *ps, lc_ps_rows *r, int on) {
  for (int i = 0; i < 4; i++)
    if (on ? !ps->rows_[i] : ps->rows_[i] == r) {
      ps->rows_[i] = on ? r : NULL;
      return;
    }
}

// Whether a tensor's rows are used in 2 bytes: a matrix in a bf16 pass (lc_ps_rows).
static int rows16(const lc_pstore *ps, int tensor) { return ps->compute == LC_DT_BF16 && ps->lay.table[tensor].ndim == 2; }
static size_t rows_bytes(const lc_pstore *ps, const lc_ps_rows *r) {
  return lc_pstore_rows_bytes(ps->stage, ps->compute == LC_DT_BF16, ps->store == LC_DT_BF16, ps->lay.table[r->tensor].ndim == 2,
                              r->n);
}

void lc_pstore_rows_init(const lc_pstore *ps, lc_ps_rows *r, int tensor, size_t r0, size_t r1) {
  memset(r, 0, sizeof *r);
  const size_t len = lc_pstore_row_len(ps, tensor);
  r->tensor = tensor;
  r->r0 = r0;
  r->r1 = r1;
  r->x0 = ps->lay.table[tensor].offset + r0 * len;
  r->n = (r1 - r0) * len;
}

// A U8 store's rows [r0, r1) of tensor: stage 0 views them where they lie (at acquire);
// stage 3 gathers their bytes as held (blocks included) from the ranks whose shards they
// overlap.
static lc_status q_rows_fetch(lc_pstore *ps, lc_ps_rows *r, int tensor, size_t r0, size_t r1) {
  lc_pstore_rows_init(ps, r, tensor, r0, r1);
  if (!lc_ps_params_sharded(ps)) return LC_OK;
  const lc_dtype d = ps->hdt_[tensor];
  const int u = ps->lay.table[tensor].unit;
  const size_t len = lc_pstore_row_len(ps, tensor), x0 = ps->hoff_[tensor] + lc_bytes(d, r0 * len),
               x1 = ps->hoff_[tensor] + lc_bytes(d, r1 * len);
  LC_TRY(lc_buf_alloc(ps->be, LC_MEM_GATHERED, LC_DT_U8, lc_pstore_rows_bytes_q(ps->stage, d, r->n), 0,
                      "gathered vocabulary rows (GGUF blocks)", &r->buf));
  r->cnt = malloc(sizeof(int) * 2 * (size_t)ps->Z);
  if (!r->cnt) {
    lc_buf_free(&r->buf);
    return lc_fail(LC_ENOMEM, "out of memory for a vocabulary slice's counts");
  }
  for (int i = 0; i < ps->Z; i++) {
    size_t a, b;
    lc_ps_q_piece(ps, u, x0, x1, i, &a, &b);
    r->cnt[i] = (int)(b - a);
    r->cnt[ps->Z + i] = b > a ? (int)(a - x0) : 0;
  }
  size_t a, b;
  lc_ps_q_piece(ps, u, x0, x1, ps->zrank, &a, &b);
  lc_status st = b > a ? lc_be_copy(lc_buf_part(r->buf, a - x0, b - a, LC_DT_U8),
                                    lc_buf_part(ps->params_b, lc_ps_q_local(ps, u, a), b - a, LC_DT_U8), LC_STREAM_COMPUTE)
                       : LC_OK;
  if (st == LC_OK) st = lc_buf_hview_open(r->buf, 1, "a vocabulary slice's gather (staged)", &r->hv);
  if (st == LC_OK) st = lc_iallgatherv(ps->zg, r->hv.host, r->cnt, r->cnt + ps->Z, LC_DT_U8, &r->req);
  if (st == LC_OK) rows_track(ps, r, 1);
  return st;
}

lc_status lc_pstore_rows_fetch(lc_pstore *ps, lc_ps_rows *r, int tensor, size_t r0, size_t r1) {
  if (ps->store == LC_DT_U8) return q_rows_fetch(ps, r, tensor, r0, r1);
  if (ps->store == LC_DT_BF16 && ps->compute != LC_DT_BF16)
    return lc_fail(LC_EINVAL, "a bf16 frozen base computes in bf16: add --precision bf16 (or --base-dtype fp32)");
  lc_pstore_rows_init(ps, r, tensor, r0, r1);
  if (!lc_ps_params_sharded(ps)) return LC_OK;
  const int u = ps->lay.table[tensor].unit, h16 = rows16(ps, tensor);
  const size_t nb = r->n + (r->n & 1); // even, for the in-place bf16 widening (a vector)
  LC_TRY(lc_buf_alloc(ps->be, LC_MEM_GATHERED, LC_DT_U8, rows_bytes(ps, r), 0, "gathered vocabulary rows", &r->buf));
  r->cnt = range_counts(ps, u, r->x0, r->n);
  if (!r->cnt) {
    lc_buf_free(&r->buf);
    return lc_fail(LC_ENOMEM, "out of memory for a vocabulary slice's counts");
  }
  size_t at, mine;
  const size_t mo = range_mine(ps, u, r->x0, r->n, &at, &mine);
  const lc_buf src = mine ? lc_buf_view(ps->params_b, mo, mine) : LC_PS_NONE; // (no piece: mo is meaningless)
  r->g16 = ps->compute == LC_DT_BF16;
  lc_status st = LC_OK;
  if (!r->g16) {
    if (mine) st = lc_be_copy(lc_buf_part(r->buf, lc_bytes(LC_DT_F32, at), mine, LC_DT_F32), src, LC_STREAM_COMPUTE);
    if (st == LC_OK) st = lc_buf_hview_open(r->buf, 1, "a vocabulary slice's gather (staged)", &r->hv);
    if (st == LC_OK) st = lc_iallgatherv(ps->zg, r->hv.host, r->cnt, r->cnt + ps->Z, LC_DT_F32, &r->req);
  } else { // bf16 values travel (half the bytes): a matrix's stay in 2 bytes, a vector's are widened in place at acquire
    const size_t h0 = h16 ? 0 : nb; // where the 2-byte values start (a vector: the upper half, widened downwards)
    if (!h16 && nb > r->n) st = lc_be_zero(lc_buf_part(r->buf, lc_bytes(LC_DT_BF16, h0 + r->n), 1, LC_DT_BF16));
    const lc_buf slot = mine ? lc_buf_part(r->buf, lc_bytes(LC_DT_BF16, h0 + at), mine, LC_DT_BF16) : LC_PS_NONE;
    if (st == LC_OK && mine) // (a bf16 store's shard is its bf16 values)
      st = ps->store == LC_DT_BF16 ? lc_be_copy(slot, src, LC_STREAM_COMPUTE) : lc_be_bf16_pack(slot, src);
    if (st == LC_OK) st = lc_buf_hview_open(r->buf, 1, "a vocabulary slice's gather (staged)", &r->hv);
    if (st == LC_OK)
      st = lc_iallgatherv(ps->zg, (uint16_t *)r->hv.host + h0, r->cnt, r->cnt + ps->Z, LC_DT_BF16, &r->req);
  }
  if (st == LC_OK) rows_track(ps, r, 1);
  return st;
}

lc_status lc_pstore_rows_acquire(lc_pstore *ps, lc_ps_rows *r) {
  r->acquired = 1;
  if (ps->store == LC_DT_U8) { // the rows as held: where they lie, or their gathered bytes
    const lc_dtype d = ps->hdt_[r->tensor];
    if (!lc_ps_params_sharded(ps)) {
      r->w = lc_buf_part(ps->params_b, ps->hoff_[r->tensor] + lc_bytes(d, r->r0 * lc_pstore_row_len(ps, r->tensor)), r->n, d);
      return LC_OK;
    }
    LC_TRY(lc_wait(ps->zg, &r->req));
    LC_TRY(lc_buf_hview_close(&r->hv, 1)); // (staged: the gathered rows onto the device)
    r->w = lc_buf_part(r->buf, 0, r->n, d);
    return LC_OK;
  }
  const int h16 = rows16(ps, r->tensor);
  const lc_dtype dt = h16 ? LC_DT_BF16 : LC_DT_F32;
  r->w = LC_PS_NONE;
  if (lc_ps_params_sharded(ps)) {
    LC_TRY(lc_wait(ps->zg, &r->req));
    if (r->g16 && !h16) lc_bf16_unpack_inplace(r->hv.host, r->n + (r->n & 1));
    r->g16 = 0;
    LC_TRY(lc_buf_hview_close(&r->hv, 1)); // (staged: the gathered rows onto the device)
    r->w = lc_buf_part(r->buf, 0, r->n, dt);
    return LC_OK;
  }
  const lc_buf src = lc_buf_view(ps->params_b, r->x0, r->n);
  if (ps->compute != LC_DT_BF16 || (ps->store == LC_DT_BF16 && h16)) { // (a bf16 store's matrix rows: where they lie)
    r->w = src;
    return LC_OK;
  }
  if (!lc_buf_ok(r->buf)) {
    LC_TRY(lc_buf_alloc(ps->be, LC_MEM_GATHERED, LC_DT_U8, rows_bytes(ps, r), 0, "bf16 compute vocabulary rows", &r->buf));
    const lc_buf w = lc_buf_part(r->buf, 0, r->n, dt);
    if (h16) {
      LC_TRY(lc_be_bf16_pack(w, src));
    } else if (ps->store == LC_DT_BF16) { // a bf16 store's vector: widened
      LC_TRY(lc_be_bf16_unpack(w, src));
    } else { // a vector: its values rounded, in fp32
      LC_TRY(lc_be_copy(w, src, LC_STREAM_COMPUTE));
      LC_TRY(lc_be_bf16_round(w));
    }
  }
  r->w = lc_buf_part(r->buf, 0, r->n, dt);
  return LC_OK;
}

void lc_pstore_rows_release(lc_pstore *ps, lc_ps_rows *r) {
  if (r->req.active) lc_wait(ps->zg, &r->req); // released before use (an error path)
  rows_track(ps, r, 0);
  lc_buf_hview_close(&r->hv, 0);
  lc_buf_free(&r->buf);
  free(r->cnt);
  r->cnt = NULL;
  r->w = LC_PS_NONE;
  r->acquired = 0;
}

lc_status lc_pstore_rows_grad_begin(lc_pstore *ps, lc_ps_rows *r) {
  LC_TRY(lc_ps_retire(ps, 1));
  if (!lc_ps_grads_sharded(ps)) {
    r->g = lc_buf_view(ps->grads_b, r->x0, r->n);
    return LC_OK;
  }
  LC_TRY(lc_buf_alloc(ps->be, LC_MEM_GRADS, LC_DT_F32, r->n, 1, "vocabulary rows gradient", &r->gbuf));
  r->g = r->gbuf;
  return LC_OK;
}

lc_status lc_pstore_rows_grad_end(lc_pstore *ps, lc_ps_rows *r) {
  lc_test_point("reduce");
  r->g = LC_PS_NONE;
  if (!lc_ps_grads_sharded(ps)) return LC_OK;
  const int u = ps->lay.table[r->tensor].unit;
  lc_ps_red *q = &ps->red_[ps->n_red_];
  memset(q, 0, sizeof *q);
  q->unit = -1;
  q->gbuf = r->gbuf;
  r->gbuf = LC_PS_NONE;
  q->cnt = range_counts(ps, u, r->x0, r->n);
  if (!q->cnt) {
    lc_buf_free(&q->gbuf);
    return lc_fail(LC_ENOMEM, "out of memory for a vocabulary slice's counts");
  }
  size_t at;
  const size_t po = range_mine(ps, u, r->x0, r->n, &at, &q->piece_n);
  const lc_buf pc = q->piece_n ? lc_buf_view(ps->grads_b, po, q->piece_n) : LC_PS_NONE; // (no piece: po is meaningless)
  // The shard's piece may already hold sums (earlier passes, or this range reduced before
  // in this pass): one replica adds them to its input, so they are counted once.
  lc_status st = ps->rrank == 0 && q->piece_n ? lc_be_add(lc_buf_view(q->gbuf, at, q->piece_n), pc) : LC_OK;
  ps->n_red_++; // queued before the collective so that an error still frees its buffers
  if (st == LC_OK) st = lc_buf_hview_open(q->gbuf, 1, "a vocabulary slice's reduction (staged)", &q->hv_in);
  if (st == LC_OK) st = lc_buf_hview_open(pc, 0, "a vocabulary slice's shard (staged)", &q->hv_out);
  q->piece = q->hv_out.host;
  if (st == LC_OK) st = lc_ireduce_scatterv_sum(ps->zg, q->hv_in.host, q->piece, q->cnt, LC_DT_F32, &q->req);
  if (st != LC_OK) { // never posted: nothing to progress, its views go now
    q->done = 1;
    lc_buf_hview_close(&q->hv_in, 0);
    lc_buf_hview_close(&q->hv_out, 0);
  }
  return st;
}

lc_status lc_pstore_rows_done(lc_pstore *ps, int unit) {
  if (lc_ps_grads_sharded(ps)) return LC_OK;
  LC_TRY(lc_ps_retire(ps, 1));
  return lc_pstore_grad_end(ps, unit);
}
