// The parameter store's tensors one at a time on the host (loading, saving, random init):
// this rank's part of a tensor set, a tensor gathered to world rank 0.
#include "backend/cpu/kern/kernels.h"
#include "model/pstore_internal.h"

// ---------------------------------------------------------------- tensor-wise access
static float *state_buf(lc_pstore *ps, lc_ps_state which) {
  return which == LC_PS_PARAMS ? ps->params : which == LC_PS_EXP_AVG ? ps->m : ps->v;
}
static lc_buf state_b(const lc_pstore *ps, lc_ps_state which) {
  return which == LC_PS_PARAMS ? ps->params_b : which == LC_PS_EXP_AVG ? ps->m_b : ps->v_b;
}
static int state_sharded(const lc_pstore *ps, lc_ps_state which) {
  return which == LC_PS_PARAMS ? lc_ps_params_sharded(ps) : lc_ps_optim_sharded(ps);
}

// Intersection of elements [first, first + n) of tensor t with zero-group rank r's slice of
// its unit, in full coordinates.
static void piece(const lc_pstore *ps, int t, size_t first, size_t n, int r, size_t *a, size_t *b) {
  const lc_param_info *T = &ps->lay.table[t];
  const int u = T->unit;
  size_t lo = ps->lay.units[u].off + (size_t)r * lc_ps_shard_floats(ps, u), hi = lo + lc_ps_shard_floats(ps, u);
  const size_t x0 = T->offset + first, x1 = x0 + n;
  *a = x0 > lo ? x0 : lo;
  *b = x1 < hi ? x1 : hi;
  if (*b < *a) *b = *a;
}

float *lc_pstore_tensor_ptr(lc_pstore *ps, lc_ps_state which, int t) {
  float *buf = state_buf(ps, which);
  return state_sharded(ps, which) || !buf ? NULL : buf + ps->lay.table[t].offset;
}

// A 2-byte view's values widened into dst, and dst's rounded into it: in pieces, through
// named reads and writes.
static lc_status read_widen(lc_buf v16, float *dst) {
  uint16_t tmp[4096];
  for (size_t a = 0; a < v16.n; a += 4096) {
    const size_t k = v16.n - a < 4096 ? v16.n - a : 4096;
    LC_TRY(lc_buf_read(lc_buf_view(v16, a, k), tmp, LC_SYNC_STATES));
    lc_bf16_unpack(dst + a, tmp, k);
  }
  return LC_OK;
}
void lc_ps_write_narrow(lc_buf v16, const float *src) { // rounded to nearest even
  uint16_t tmp[4096];
  for (size_t a = 0; a < v16.n; a += 4096) {
    const size_t k = v16.n - a < 4096 ? v16.n - a : 4096;
    lc_bf16_pack(tmp, src + a, k);
    lc_buf_write(lc_buf_view(v16, a, k), tmp, LC_SYNC_STATES);
  }
}

// States move in and out of the backend's buffers through named writes and reads.
void lc_pstore_set_tensor_part(lc_pstore *ps, lc_ps_state which, int t, size_t first, const float *src, size_t n) {
  const lc_param_info *T = &ps->lay.table[t];
  const lc_buf buf = state_b(ps, which);
  if (which == LC_PS_PARAMS && ps->store == LC_DT_U8) {
    lc_ps_mixed_set(ps, t, first, src, n);
    return;
  }
  if (which == LC_PS_PARAMS && ps->store == LC_DT_BF16) { // rounded to nearest even, in pieces
    // (stage 3: only the elements of this rank's shard, at their shard offsets)
    size_t lo = T->offset + first, hi = lo + n, dst = lo;
    if (lc_ps_params_sharded(ps)) {
      piece(ps, t, first, n, ps->zrank, &lo, &hi);
      dst = lc_ps_shard_off(ps, T->unit) + (lo - lc_ps_owned_lo(ps, T->unit));
    }
    if (hi > lo) lc_ps_write_narrow(lc_buf_view(buf, dst, hi - lo), src + (lo - T->offset - first));
    return;
  }
  if (!state_sharded(ps, which)) {
    lc_buf_write(lc_buf_view(buf, T->offset + first, n), src, LC_SYNC_STATES);
    return;
  }
  size_t a, b;
  piece(ps, t, first, n, ps->zrank, &a, &b);
  if (b > a)
    lc_buf_write(lc_buf_view(buf, lc_ps_shard_off(ps, T->unit) + (a - lc_ps_owned_lo(ps, T->unit)), b - a),
                 src + (a - T->offset - first), LC_SYNC_STATES);
}

// A state's range v into fp32 host memory: read as it is, or (a bf16 store's weights)
// read in pieces and widened.
static lc_status read_f32(const lc_pstore *ps, lc_ps_state which, lc_buf v, float *dst) {
  return which != LC_PS_PARAMS || ps->store != LC_DT_BF16 ? lc_buf_read(v, dst, LC_SYNC_STATES) : read_widen(v, dst);
}

lc_status lc_pstore_gather_tensor_part(lc_pstore *ps, lc_ps_state which, int t, size_t first, size_t n, float *dst) {
  const lc_param_info *T = &ps->lay.table[t];
  const int b16 = which == LC_PS_PARAMS && ps->store == LC_DT_BF16; // (its pieces are staged and widened)
  const lc_buf buf = state_b(ps, which);
  const int root = !ps->world || ps->world->rank == 0;
  if (which == LC_PS_PARAMS && ps->store == LC_DT_U8) return lc_ps_mixed_gather(ps, t, first, n, dst);
  if (!state_sharded(ps, which))
    return root ? read_f32(ps, which, lc_buf_view(buf, T->offset + first, n), dst) : LC_OK;
  if (ps->rrank != 0) return LC_OK; // only zero group 0 (world ranks 0..Z-1) holds what rank 0 writes
  const size_t mine = lc_ps_shard_off(ps, T->unit), x0 = T->offset + first;
  if (!root) { // this rank's piece, read into host memory (comm) and sent
    size_t a, b;
    piece(ps, t, first, n, ps->zrank, &a, &b);
    if (b == a) return LC_OK;
    const lc_buf v = lc_buf_view(buf, mine + (a - lc_ps_owned_lo(ps, T->unit)), b - a);
    float *h = b16 ? NULL : lc_buf_host(v), *staged = NULL;
    if (!h && !(h = staged = lc_alloc(ps->arena, LC_MEM_COMM, lc_bytes(LC_DT_F32, v.n), "a tensor piece on its way to rank 0")))
      return LC_ENOMEM;
    lc_req r = {{0}, 0};
    lc_status st = staged ? read_f32(ps, which, v, staged) : LC_OK;
    if (st == LC_OK) st = lc_isend(ps->zg, h, b - a, LC_DT_F32, 0, LC_PS_TAG_TENSOR, &r);
    if (st == LC_OK) st = lc_wait(ps->zg, &r);
    lc_free(ps->arena, staged);
    return st;
  }
  lc_status st = LC_OK;
  for (int r = 0; r < ps->Z && st == LC_OK; r++) {
    size_t a, b;
    piece(ps, t, first, n, r, &a, &b);
    if (b == a) continue;
    if (r == 0) {
      st = read_f32(ps, which, lc_buf_view(buf, mine + (a - lc_ps_owned_lo(ps, T->unit)), b - a), dst + (a - x0));
      continue;
    }
    lc_req q = {{0}, 0};
    st = lc_irecv(ps->zg, dst + (a - x0), b - a, LC_DT_F32, r, LC_PS_TAG_TENSOR, &q);
    if (st == LC_OK) st = lc_wait(ps->zg, &q);
  }
  return st;
}

lc_status lc_pstore_gather_tensor(lc_pstore *ps, lc_ps_state which, int t, float *dst) {
  return lc_pstore_gather_tensor_part(ps, which, t, 0, ps->lay.table[t].numel, dst);
}

lc_status lc_pstore_init_random(lc_pstore *ps, uint64_t seed) {
  lc_rng r;
  lc_rng_seed(&r, seed);
  if (ps->params && !lc_ps_params_sharded(ps)) { // in place
    for (int t = 0; t < ps->lay.n_tensors; t++)
      lc_param_init_tensor(ps->params + ps->lay.table[t].offset, &ps->lay.table[t], &r);
    return LC_OK;
  }
  // Sharded (or a U8 store, whose tensors in blocks keep their bytes: blocks come from a
  // file, lc_pstore_set_tensor_raw): every rank runs the whole stream piece by piece and
  // keeps its part.
  const size_t cap = lc_stage_floats(&ps->lay);
  float *tmp = lc_alloc(ps->arena, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, cap), "initialisation staging buffer");
  if (!tmp) return LC_ENOMEM;
  for (int t = 0; t < ps->lay.n_tensors; t++)
    for (size_t a = 0; a < ps->lay.table[t].numel; a += cap) {
      const size_t n = ps->lay.table[t].numel - a < cap ? ps->lay.table[t].numel - a : cap;
      lc_param_init_part(tmp, &ps->lay.table[t], n, &r);
      lc_pstore_set_tensor_part(ps, LC_PS_PARAMS, t, a, tmp, n);
    }
  lc_free(ps->arena, tmp);
  return LC_OK;
}
