// The loss (loss.h) on the backend's buffers: every bulk step is a backend op; the host
// decides which tiles count (from its targets) and reads the sums once per call.
#include "model/loss.h"

#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "backend/scratch.h"

static int eff_tile(int T, int tile) { return lc_tile_splits(tile, T) ? tile : T; }

static size_t tile_bytes(const lc_config *cfg, int tile) {
  return lc_bytes(LC_DT_F32, (size_t)tile * (2 * (size_t)cfg->dim + 1 + (size_t)cfg->vocab));
}

// The accumulators (loss sum and misses, 2 doubles) and the targets' copy on the device.
#define ACC_BYTES (2 * sizeof(double))
static size_t io_bytes(int T) { return ACC_BYTES + lc_bytes(LC_DT_I32, (size_t)T); }

// The head GEMMs' scratch for tiles of `tile` rows (the head wdt: the store's 2-byte compute
// copy in a bf16 pass, a frozen base's blocks, else fp32), held for the whole call with the tile.
static size_t gemm_bytes(const lc_config *cfg, int tile, int bf16, lc_dtype wdt) {
  size_t f = lc_scratch_matmul_fwd(bf16, LC_DT_F32, LC_DT_F32, wdt, tile, cfg->dim, cfg->vocab),
         b = lc_scratch_matmul_bwd(bf16, LC_DT_F32, LC_DT_F32, wdt, tile, cfg->dim, cfg->vocab);
  return f > b ? f : b;
}

size_t lc_loss_scratch_bytes(const lc_config *cfg, int T, int tile, int bf16) {
  tile = eff_tile(T, tile);
  // (the head as the store holds it for the pass: lc_param_base_q's blocks, or 2 bytes in bf16)
  const int q = cfg->tie_embeddings ? cfg->base_q_embed : cfg->base_q_head;
  const lc_dtype wdt = q && lc_config_base_quant(cfg) ? (lc_dtype)q : bf16 ? LC_DT_BF16 : LC_DT_F32;
  return io_bytes(T) + tile_bytes(cfg, tile) + gemm_bytes(cfg, tile, bf16, wdt);
}

static int tile_counted(const int *targets, int t0, int m) {
  for (int t = 0; t < m; t++)
    if (targets[t0 + t] >= 0) return 1;
  return 0;
}

// The call's end: the sums come to the host in one named read.
static lc_status read_sums(lc_buf acc, double *loss_sum, long *n_wrong) {
  double a[2];
  LC_TRY(lc_buf_read(acc, a, LC_SYNC_LOSS));
  *loss_sum += a[0];
  if (n_wrong) *n_wrong += (long)a[1];
  return LC_OK;
}

// Carves n elements of dt from *o bytes into buf.
static lc_buf carve(lc_buf buf, size_t *o, size_t n, lc_dtype dt) {
  lc_buf b = lc_buf_part(buf, *o, n, dt);
  *o += lc_bytes(dt, n);
  return b;
}

lc_status lc_loss_fwd_bwd(const lc_config *cfg, lc_backend *be, const lc_loss_weights *w, lc_buf x, const int *targets,
                          int T, int tile, float loss_scale, int bf16, lc_buf dx, double *loss_sum, long *n_wrong) {
  const int C = cfg->dim, V = cfg->vocab;
  const int grads = lc_buf_ok(dx);
  tile = eff_tile(T, tile);
  // Scratch: the accumulators and targets; per tile: normed [tile,C], dnormed [tile,C],
  // logits [tile,V], rstd [tile]; then the head GEMMs' (held for the call: the bytes do not
  // depend on which rows have labels).
  const size_t tb = tile_bytes(cfg, tile), gb = gemm_bytes(cfg, tile, bf16, w->head.dt);
  lc_buf buf;
  LC_TRY(lc_buf_alloc(be, LC_MEM_SCRATCH, LC_DT_U8, io_bytes(T) + tb + gb, 0, tile == T ? "logits" : "loss tile", &buf));
  size_t o = 0;
  const lc_buf acc = carve(buf, &o, 2, LC_DT_F64), tg = carve(buf, &o, (size_t)T, LC_DT_I32);
  const lc_buf nrm = carve(buf, &o, (size_t)tile * C, LC_DT_F32), dnrm = carve(buf, &o, (size_t)tile * C, LC_DT_F32),
               logits = carve(buf, &o, (size_t)tile * V, LC_DT_F32), rstd = carve(buf, &o, (size_t)tile, LC_DT_F32);
  lc_buf scratch = {0};
  if (gb) scratch = carve(buf, &o, gb, LC_DT_U8);
  lc_status st = lc_be_zero(acc);
  if (st == LC_OK) st = lc_buf_write(tg, targets, LC_SYNC_INPUT);
  if (st == LC_OK && grads) st = lc_be_zero(lc_buf_view(dx, 0, (size_t)T * C));
  for (int t0 = 0; t0 < T && st == LC_OK; t0 += tile) {
    const int m = T - t0 < tile ? T - t0 : tile;
    if (!tile_counted(targets, t0, m)) continue; // no loss, no gradient from these rows
    const lc_buf xt = lc_buf_view(x, (size_t)t0 * C, (size_t)m * C), nm = lc_buf_view(nrm, 0, (size_t)m * C),
                 rs = lc_buf_view(rstd, 0, (size_t)m), lg = lc_buf_view(logits, 0, (size_t)m * V);
    st = lc_be_rmsnorm_fwd(nm, rs, xt, w->norm, m, C, cfg->norm_eps);
    if (st == LC_OK && bf16) st = lc_be_bf16_round(nm);
    if (st == LC_OK) st = lc_be_matmul_fwd(lg, nm, w->head, m, C, V, bf16, scratch);
    if (st == LC_OK) st = lc_be_xent_tile(lg, lc_buf_view(tg, (size_t)t0, (size_t)m), m, V, loss_scale, acc, n_wrong != NULL);
    if (st != LC_OK || !grads) continue; // logits are dlogits now
    const lc_buf dn = lc_buf_view(dnrm, 0, (size_t)m * C);
    if (bf16) st = lc_be_bf16_round(lg);
    if (st == LC_OK) st = lc_be_matmul_bwd(dn, w->head_g, lg, nm, w->head, m, C, V, 0, bf16, scratch);
    if (st == LC_OK)
      st = lc_be_rmsnorm_bwd(lc_buf_view(dx, (size_t)t0 * C, (size_t)m * C), w->norm_g, dn, xt, w->norm, rs, m, C, 0);
  }
  if (st == LC_OK) st = read_sums(acc, loss_sum, n_wrong);
  lc_buf_free(&buf);
  return st;
}

// ---------------------------------------------------------------- vocabulary slices
static size_t sliced_tile_floats(const lc_config *cfg, int tile, int rows) {
  return (size_t)tile * ((size_t)cfg->dim + 1 + (size_t)rows);
}
// The accumulators, the per-token statistics (lc_xent_stats_bytes) and the targets' copy.
static size_t stats_bytes(int T) { return io_bytes(T) + lc_scratch_xent_stats(T); }

size_t lc_loss_sliced_scratch_bytes(const lc_config *cfg, int T, int tile, int rows, int bf16) {
  tile = eff_tile(T, tile);
  if (rows > cfg->vocab) rows = cfg->vocab;
  // a slice's rows (lc_ps_rows.w): 2 bytes in bf16, or a frozen base's blocks
  const int q = cfg->tie_embeddings ? cfg->base_q_embed : cfg->base_q_head;
  const lc_dtype wdt = q && lc_config_base_quant(cfg) ? (lc_dtype)q : bf16 ? LC_DT_BF16 : LC_DT_F32;
  size_t f = lc_scratch_matmul_fwd(bf16, LC_DT_F32, LC_DT_F32, wdt, tile, cfg->dim, rows),
         b = lc_scratch_matmul_bwd(bf16, LC_DT_F32, LC_DT_F32, wdt, tile, cfg->dim, rows);
  return lc_bytes(LC_DT_F32, sliced_tile_floats(cfg, tile, rows)) + stats_bytes(T) + (f > b ? f : b);
}

// One tile's logits against one slice: normed rows (recomputed: cheaper than keeping
// [T, C]; bf16-rounded in bf16) times the slice's rows [vs, C]^T -> logits [m, vs].
static lc_status slice_logits(const lc_config *cfg, lc_buf nrm, lc_buf rstd, lc_buf logits, lc_buf xt, lc_buf norm_w,
                              lc_buf W, int m, int vs, int bf16) {
  LC_TRY(lc_be_rmsnorm_fwd(nrm, rstd, xt, norm_w, m, cfg->dim, cfg->norm_eps));
  if (bf16) LC_TRY(lc_be_bf16_round(nrm));
  return lc_be_matmul_fwd(logits, nrm, W, m, cfg->dim, vs, bf16, (lc_buf){0});
}

lc_status lc_loss_fwd_bwd_sliced(const lc_config *cfg, lc_backend *be, lc_buf norm_w, lc_buf norm_g,
                                 const lc_head_slices *hs, lc_buf x, const int *targets, int T, int tile,
                                 float loss_scale, int bf16, lc_buf dx, double *loss_sum, long *n_wrong) {
  const int C = cfg->dim, V = cfg->vocab, R = hs->rows < V ? hs->rows : V, ns = lc_head_n_slices(V, R);
  const int grads = lc_buf_ok(dx);
  tile = eff_tile(T, tile);
  // Scratch: normed [tile,C], rstd [tile], logits [tile,R]; the accumulators, per-token
  // statistics and the targets.
  lc_buf buf, sb = {0};
  LC_TRY(lc_buf_alloc(be, LC_MEM_SCRATCH, LC_DT_F32, sliced_tile_floats(cfg, tile, R), 0, "loss tile (vocabulary slice)",
                      &buf));
  lc_status st = lc_buf_alloc(be, LC_MEM_SCRATCH, LC_DT_U8, stats_bytes(T), 0, "loss statistics per token", &sb);
  if (st != LC_OK) {
    lc_buf_free(&buf);
    return st;
  }
  const lc_buf nrm = lc_buf_view(buf, 0, (size_t)tile * C), rstd = lc_buf_view(buf, (size_t)tile * C, (size_t)tile),
               logits = lc_buf_view(buf, (size_t)tile * (C + 1), (size_t)tile * R);
  size_t o = 0;
  const lc_buf acc = carve(sb, &o, 2, LC_DT_F64), stats = carve(sb, &o, lc_scratch_xent_stats(T), LC_DT_U8),
               tg = carve(sb, &o, (size_t)T, LC_DT_I32);
  st = lc_be_zero(acc);
  if (st == LC_OK) st = lc_buf_write(tg, targets, LC_SYNC_INPUT);
  if (st == LC_OK) st = lc_be_xent_stats_init(stats, T);
  // Pass 0: each token's log-sum-exp merged over the slices (running max and sum).
  for (int s = 0; s < ns && st == LC_OK; s++) {
    const int v0 = s * R, vs = V - v0 < R ? V - v0 : R;
    lc_buf W, G;
    st = hs->get(hs->arg, s, 0, &W, &G);
    for (int t0 = 0; t0 < T && st == LC_OK; t0 += tile) {
      const int m = T - t0 < tile ? T - t0 : tile;
      if (!tile_counted(targets, t0, m)) continue;
      const lc_buf lg = lc_buf_view(logits, 0, (size_t)m * vs);
      st = slice_logits(cfg, lc_buf_view(nrm, 0, (size_t)m * C), lc_buf_view(rstd, 0, (size_t)m),
                        lg, lc_buf_view(x, (size_t)t0 * C, (size_t)m * C), norm_w, W, m, vs, bf16);
      if (st == LC_OK) st = lc_be_xent_slice_merge(stats, T, lg, tg, t0, m, v0, vs);
    }
    lc_status ps = hs->put(hs->arg, s, 0);
    if (st == LC_OK) st = ps;
  }
  if (st == LC_OK) st = lc_be_xent_slice_total(stats, tg, T, acc, n_wrong != NULL);
  // Pass 1: dlogits = softmax * scale - scale * onehot, slice by slice, into dnormed (dx)
  // and the slice's gradient; then the final norm's backward in place.
  if (grads && st == LC_OK) st = lc_be_zero(lc_buf_view(dx, 0, (size_t)T * C));
  for (int s = 0; grads && s < ns && st == LC_OK; s++) {
    const int v0 = s * R, vs = V - v0 < R ? V - v0 : R;
    lc_buf W, G;
    st = hs->get(hs->arg, s, 1, &W, &G);
    for (int t0 = 0; t0 < T && st == LC_OK; t0 += tile) {
      const int m = T - t0 < tile ? T - t0 : tile;
      if (!tile_counted(targets, t0, m)) continue;
      const lc_buf lg = lc_buf_view(logits, 0, (size_t)m * vs), nm = lc_buf_view(nrm, 0, (size_t)m * C);
      st = slice_logits(cfg, nm, lc_buf_view(rstd, 0, (size_t)m), lg, lc_buf_view(x, (size_t)t0 * C, (size_t)m * C),
                        norm_w, W, m, vs, bf16);
      if (st == LC_OK) st = lc_be_xent_slice_dlogits(lg, stats, T, tg, t0, m, v0, vs, loss_scale);
      if (st == LC_OK && bf16) st = lc_be_bf16_round(lg);
      if (st == LC_OK)
        st = lc_be_matmul_bwd(lc_buf_view(dx, (size_t)t0 * C, (size_t)m * C), G, lg, nm, W, m, C, vs, 1, bf16,
                              (lc_buf){0});
    }
    lc_status ps = hs->put(hs->arg, s, 1);
    if (st == LC_OK) st = ps;
  }
  for (int t0 = 0; grads && t0 < T && st == LC_OK; t0 += tile) {
    const int m = T - t0 < tile ? T - t0 : tile;
    if (!tile_counted(targets, t0, m)) continue;
    const lc_buf xt = lc_buf_view(x, (size_t)t0 * C, (size_t)m * C), d = lc_buf_view(dx, (size_t)t0 * C, (size_t)m * C),
                 nm = lc_buf_view(nrm, 0, (size_t)m * C), rs = lc_buf_view(rstd, 0, (size_t)m);
    st = lc_be_rmsnorm_fwd(nm, rs, xt, norm_w, m, C, cfg->norm_eps); // rstd again
    if (st == LC_OK) st = lc_be_rmsnorm_bwd(d, norm_g, d, xt, norm_w, rs, m, C, 1);
  }
  if (st == LC_OK) st = read_sums(acc, loss_sum, n_wrong);
  lc_buf_free(&sb);
  lc_buf_free(&buf);
  return st;
}
