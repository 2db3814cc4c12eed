// Ring attention. Each context rank keeps its queries and sees every k/v block once:
// a block travels the inner ring (window ranks) while the outer ring pre-fetches the
// next window's block. Causal work per block pair is decided by global positions:
// zigzag chunks make every step carry equal work.
#include "attn/ring.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "attn/flash.h"
#include "core/runstate.h"
#include "core/timer.h"
#include "ops/kernels.h"

enum { TAG_KV = 101, TAG_OUTER = 102, TAG_DKV = 103, TAG_OWNER = 104 };

typedef struct {
  int cp, w, outer, c, W, i, k;
  long Lc, Tc;
  size_t nkv; // floats of one of k or v: Tc*Hkv*D
  const lc_seq_layout *L;
  const int *lo;
  long lse_ld; // floats between the LSE blocks of consecutive chunks
} geo;

static geo geometry(const lc_ring *r) {
  geo g;
  g.cp = r->ctx->size;
  g.w = r->window;
  g.outer = g.cp / g.w;
  g.c = r->ctx->rank;
  g.W = g.c / g.w;
  g.i = g.c % g.w;
  g.L = r->layout;
  g.k = g.L->k;
  g.Tc = r->S / g.cp;
  g.Lc = g.L->Lc;
  g.nkv = (size_t)g.Tc * r->Hkv * r->D;
  g.lo = r->lo;
  g.lse_ld = r->lse_stride ? r->lse_stride : (long)r->Hq * g.Lc;
  return g;
}

// Buffers of one k/v block ([k | v], 2*Tc*Hkv*D floats) each pass holds. Forward and
// backward: the start-of-window block, two inner-ring buffers when the window has
// several ranks, the outer prefetch when there are several windows. Backward adds
// dk/dv blocks: one or two step accumulators, the incoming partial and the window total
// (inner ring), and one block per outer step sent back to its owner.
static int n_kv_blocks(int cp, int w) { return 1 + (w > 1 ? 2 : 0) + (cp / w > 1 ? 1 : 0); }
static int n_d_blocks(int cp, int w) {
  int outer = cp / w;
  return (w > 1 ? 2 : 1) + (w > 1 || outer > 1 ? 1 : 0) + (w > 1 ? 1 : 0) + (outer - 1);
}
static size_t blk_floats(int cp, long S, int Hkv, int D) { return 2 * (size_t)(S / cp) * Hkv * D; }
// Scratch: forward merge tiles; backward delta of the Tc local rows and lse/delta tiles.
static size_t fwd_tmp_floats(int P, int H, int D) { return (size_t)P * H * D + 2 * (size_t)P * H; }
static size_t bwd_tmp_floats(long Tc, int P, int H) { return (size_t)Tc * H + 2 * (size_t)P * H; }

// The kernel's shape flags for a ring pass: bf16, 2-byte q/dout and k/v blocks.
static void shape_dtypes(lc_attn_shape *s, int bf16) { s->bf16 = s->kv16 = s->q16 = bf16; }

void lc_ring_mem(int cp, int window, long S, int chunks, int Hq, int Hkv, int D, int poll_rows, int threads,
                 int bf16, lc_attn_mem *m) {
  memset(m, 0, sizeof *m);
  const long Tc = S / cp, Lc = Tc / chunks;
  const size_t blk = blk_floats(cp, S, Hkv, D);
  // The largest kernel call: poll_rows (or all Lc) query rows against a Lc-row key chunk.
  lc_attn_shape s = {.Tq = (int)(Lc < poll_rows ? Lc : poll_rows), .Tk = (int)Lc, .Hq = Hq,
                     .Hkv = Hkv, .D = D, .causal = 1, .scale = 1.0f};
  shape_dtypes(&s, bf16);
  const lc_dtype kv = bf16 ? LC_DT_BF16 : LC_DT_F32;
  m->fwd_comm = lc_bytes(kv, blk * n_kv_blocks(cp, window));
  m->fwd_scratch = lc_bytes(LC_DT_F32, fwd_tmp_floats(poll_rows, Hq, D)) + lc_flash_workspace_bytes(&s, 0, threads);
  m->bwd_comm = lc_bytes(kv, blk * n_kv_blocks(cp, window)) + lc_bytes(LC_DT_F32, blk * n_d_blocks(cp, window));
  m->bwd_scratch = lc_bytes(LC_DT_F32, bwd_tmp_floats(Tc, poll_rows, Hq)) + lc_flash_workspace_bytes(&s, 1, threads);
}

static int inner_next(const geo *g) { return g->W * g->w + (g->i + 1) % g->w; }
static int inner_prev(const geo *g) { return g->W * g->w + (g->i - 1 + g->w) % g->w; }
static int outer_next(const geo *g) { return ((g->W + 1) % g->outer) * g->w + g->i; }
static int outer_prev(const geo *g) { return ((g->W - 1 + g->outer) % g->outer) * g->w + g->i; }
// Owner of the block held at outer step o, inner step j.
static int owner_at(const geo *g, int o, int j) {
  return ((g->W - o + g->outer) % g->outer) * g->w + (g->i - j + g->w) % g->w;
}
// Global position of chunk a (0 .. k-1) of context rank c.
static long chunk_start(const geo *g, int c, int a) { return lc_seq_layout_chunk_start(g->L, c, a); }

// Whether keys [ks, ks + Lc) hold nothing any query of rows [q0, q0 + n) may see: all after
// the last query (causal) or all before every row's lower bound.
static int hidden(const geo *g, long ks, long q0, int n) {
  if (ks > q0 + n - 1) return 1;
  if (!g->lo) return 0;
  int mn = g->lo[q0];
  for (int i = 1; i < n; i++) mn = g->lo[q0 + i] < mn ? g->lo[q0 + i] : mn;
  return ks + g->Lc - 1 < mn;
}

static void poll(const lc_ring *r, lc_req *reqs, int n) {
  for (int k = 0; k < n; k++) lc_test(r->ctx, &reqs[k]);
  if (r->extra_poll) r->extra_poll(r->extra_arg);
}

// The dtype of q, k, v, out, dout and of the k/v blocks the ring holds and sends (the
// kernel reads them in place): fp32, or bf16 (r->bf16).
static lc_dtype kv_dtype(const lc_ring *r) { return r->bf16 ? LC_DT_BF16 : LC_DT_F32; }
// Element i of an array of dtype dt.
static const void *at(const void *p, lc_dtype dt, size_t i) { return (const char *)p + lc_bytes(dt, i); }
// This rank's k and v into a block [k | v] of nkv values each.
static void kv_store(const lc_ring *r, char *blk, const void *k, const void *v, size_t nkv) {
  const size_t b = lc_bytes(kv_dtype(r), nkv);
  memcpy(blk, k, b);
  memcpy(blk + b, v, b);
}

// Copies rows [r0, r0+n) of a per-chunk [H][Lc] array into a contiguous [H][n] one, or back.
static void lse_rows(float *dst, const float *src, int H, long Lc, long r0, int n, int back) {
  for (int h = 0; h < H; h++) {
    if (!back) memcpy(dst + (size_t)h * n, src + (size_t)h * Lc + r0, lc_bytes(LC_DT_F32, n));
    else memcpy((float *)src + (size_t)h * Lc + r0, dst + (size_t)h * n, lc_bytes(LC_DT_F32, n));
  }
}

// A key chunk's shape for packing k/v once for all query tiles against it
// (lc_flash_kv_pack; kernels that read k/v in place need no packing: 0 bytes).
static lc_attn_shape chunk_shape(const lc_ring *r, const geo *g) {
  lc_attn_shape s = {.Tq = 1, .Tk = (int)g->Lc, .Hq = r->Hq, .Hkv = r->Hkv, .D = r->D, .causal = 1,
                     .scale = r->scale};
  shape_dtypes(&s, r->bf16);
  return s;
}

// Forward of local q against the block (k, v) owned by context rank `owner`. Key chunk b
// outermost, so the kernel's packing of it (pack: lc_flash_kv_bytes, NULL if none) happens
// once for every query tile; each query chunk still merges its key chunks in order b = 0, 1.
static lc_status fwd_block(lc_ring *r, const geo *g, int owner, float *out, float *lse,
                           const void *q, const void *k, const void *v, float *tmp_o,
                           float *tmp_l, float *tmp_a, void *pack, lc_req *reqs, int nreq, lc_arena *ar) {
  const int H = r->Hq, D = r->D;
  const lc_dtype kdt = kv_dtype(r);
  lc_test_point("ring");
  for (int b = 0; b < g->k; b++) {
    const void *kb = at(k, kdt, (size_t)b * g->Lc * r->Hkv * D), *vb = at(v, kdt, (size_t)b * g->Lc * r->Hkv * D);
    int packed = 0;
    for (int a = 0; a < g->k; a++) {
      long qs = chunk_start(g, g->c, a), ks = chunk_start(g, owner, b);
      if (hidden(g, ks, qs, (int)g->Lc)) continue; // no query of the chunk sees a key of the block
      for (long r0 = 0; r0 < g->Lc; r0 += r->poll_rows) {
        int n = (int)(g->Lc - r0 < r->poll_rows ? g->Lc - r0 : r->poll_rows);
        if (ks > qs + r0 + n - 1) break;
        if (hidden(g, ks, qs + r0, n)) continue;
        lc_attn_shape s = {.Tq = n, .Tk = (int)g->Lc, .Hq = H, .Hkv = r->Hkv, .D = D,
                           .q_start = qs + r0, .k_start = ks, .causal = 1, .scale = r->scale,
                           .lo = g->lo ? g->lo + qs + r0 : NULL, .kv_pack = pack};
        shape_dtypes(&s, r->bf16);
        if (pack && !packed) lc_flash_kv_pack(pack, kb, vb, &s, 0), packed = 1;
        const void *qa = at(q, kdt, ((size_t)a * g->Lc + r0) * H * D);
        LC_TRY(lc_flash_fwd(tmp_o, tmp_l, qa, kb, vb, &s, ar));
        float *lse_a = lse + (size_t)a * g->lse_ld;
        lse_rows(tmp_a, lse_a, H, g->Lc, r0, n, 0);
        lc_attn_merge(out + ((size_t)a * g->Lc + r0) * H * D, tmp_a, tmp_o, tmp_l, n, H, D);
        lse_rows(tmp_a, lse_a, H, g->Lc, r0, n, 1);
        poll(r, reqs, nreq);
      }
    }
  }
  return LC_OK;
}

lc_status lc_ring_fwd(lc_ring *r, float *out, float *lse, const void *q, const void *k,
                      const void *v, lc_arena *ar) {
  geo g = geometry(r);
  const int H = r->Hq, D = r->D;
  const int P = r->poll_rows;
  memset(out, 0, lc_bytes(LC_DT_F32, (size_t)g.Tc * H * D));
  for (int a = 0; a < g.k; a++)
    for (size_t x = 0; x < (size_t)H * g.Lc; x++) lse[(size_t)a * g.lse_ld + x] = -INFINITY;
  // Block buffers ([k | v]): start-of-window block, two inner buffers, outer prefetch.
  const size_t blk = 2 * g.nkv, bb = lc_bytes(kv_dtype(r), blk); // values, bytes of a block
  const lc_dtype kdt = kv_dtype(r);
  char *buf = lc_alloc(ar, LC_MEM_COMM, bb * n_kv_blocks(g.cp, g.w), "ring k/v buffers");
  float *tmp = lc_alloc(ar, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, fwd_tmp_floats(P, H, D)), "ring merge tiles");
  const lc_attn_shape cs = chunk_shape(r, &g);
  const size_t pbytes = lc_flash_kv_bytes(&cs, 0);
  void *pack = pbytes ? lc_alloc(ar, LC_MEM_SCRATCH, pbytes, "ring k/v chunk packed for the kernel") : NULL;
  lc_status st = LC_OK;
  if (!buf || !tmp || (pbytes && !pack)) {
    st = LC_ENOMEM;
    goto done;
  }
  float *tmp_o = tmp, *tmp_l = tmp_o + (size_t)P * H * D, *tmp_a = tmp_l + (size_t)P * H;
  char *start = buf, *xy[2] = {NULL, NULL}, *onext = NULL, *bp = buf + bb;
  if (g.w > 1) xy[0] = bp, xy[1] = bp + bb, bp += 2 * bb;
  if (g.outer > 1) onext = bp;
  kv_store(r, start, k, v, g.nkv);
  for (int o = 0; o < g.outer && st == LC_OK; o++) {
    lc_req reqs[4] = {{{0}, 0}};
    if (o + 1 < g.outer) {
      st = lc_isend(r->ctx, start, blk, kdt, outer_next(&g), TAG_OUTER, &reqs[2]);
      if (st == LC_OK) st = lc_irecv(r->ctx, onext, blk, kdt, outer_prev(&g), TAG_OUTER, &reqs[3]);
    }
    char *cur = start;
    for (int j = 0; j < g.w && st == LC_OK; j++) {
      char *nxt = xy[j % 2];
      if (j + 1 < g.w) {
        st = lc_isend(r->ctx, cur, blk, kdt, inner_next(&g), TAG_KV, &reqs[0]);
        if (st == LC_OK) st = lc_irecv(r->ctx, nxt, blk, kdt, inner_prev(&g), TAG_KV, &reqs[1]);
      }
      double t0 = lc_now();
      // cur may be in flight (being sent): the kernel only reads it
      if (st == LC_OK)
        st = fwd_block(r, &g, owner_at(&g, o, j), out, lse, q, cur, at(cur, kdt, g.nkv), tmp_o, tmp_l,
                       tmp_a, pack, reqs, 4, ar);
      r->compute_seconds += lc_now() - t0;
      for (int x = 0; x < 2; x++) {
        lc_status s2 = lc_wait(r->ctx, &reqs[x]);
        if (st == LC_OK) st = s2;
      }
      cur = nxt;
    }
    for (int x = 2; x < 4; x++) {
      lc_status s2 = lc_wait(r->ctx, &reqs[x]);
      if (st == LC_OK) st = s2;
    }
    char *t = start;
    start = onext;
    onext = t;
  }
done:
  lc_free(ar, pack);
  lc_free(ar, tmp);
  lc_free(ar, buf);
  return st;
}

// Backward of local q against the block owned by `owner`: dq +=, dk/dv (block) +=.
static lc_status bwd_block(lc_ring *r, const geo *g, int owner, float *dq, float *dk, float *dv,
                           const void *dout, const float *lse, const float *delta,
                           const void *q, const void *k, const void *v, float *tmp_l,
                           float *tmp_d, void *pack, lc_req *reqs, int nreq, lc_arena *ar) {
  const int H = r->Hq, D = r->D;
  const lc_dtype kdt = kv_dtype(r);
  const size_t kb = (size_t)g->Lc * r->Hkv * D;
  // key chunk outermost, packed once (as fwd_block); dq rows still sum b = 0, 1 in order and
  // dk/dv rows a = 0, 1
  for (int b = 0; b < g->k; b++) {
    int packed = 0;
    for (int a = 0; a < g->k; a++) {
      long qs = chunk_start(g, g->c, a), ks = chunk_start(g, owner, b);
      if (hidden(g, ks, qs, (int)g->Lc)) continue;
      for (long r0 = 0; r0 < g->Lc; r0 += r->poll_rows) {
        int n = (int)(g->Lc - r0 < r->poll_rows ? g->Lc - r0 : r->poll_rows);
        if (ks > qs + r0 + n - 1) break;
        if (hidden(g, ks, qs + r0, n)) continue;
        lc_attn_shape s = {.Tq = n, .Tk = (int)g->Lc, .Hq = H, .Hkv = r->Hkv, .D = D,
                           .q_start = qs + r0, .k_start = ks, .causal = 1, .scale = r->scale,
                           .lo = g->lo ? g->lo + qs + r0 : NULL, .kv_pack = pack};
        shape_dtypes(&s, r->bf16);
        const void *kc = at(k, kdt, b * kb), *vc = at(v, kdt, b * kb);
        if (pack && !packed) lc_flash_kv_pack(pack, kc, vc, &s, 1), packed = 1;
        size_t qo = ((size_t)a * g->Lc + r0) * H * D;
        lse_rows(tmp_l, lse + (size_t)a * g->lse_ld, H, g->Lc, r0, n, 0);
        lse_rows(tmp_d, delta + (size_t)a * H * g->Lc, H, g->Lc, r0, n, 0);
        LC_TRY(lc_flash_bwd(dq + qo, dk + b * kb, dv + b * kb, at(dout, kdt, qo), at(q, kdt, qo), kc, vc, tmp_l,
                            tmp_d, &s, ar));
        poll(r, reqs, nreq);
      }
    }
  }
  return LC_OK;
}

lc_status lc_ring_bwd(lc_ring *r, float *dq, float *dk, float *dv, const void *dout,
                      const void *out, const float *lse, const void *q, const void *k,
                      const void *v, lc_arena *ar) {
  geo g = geometry(r);
  const int H = r->Hq, D = r->D, P = r->poll_rows;
  const size_t blk = 2 * g.nkv;
  const int n_owner = g.outer - 1;
  memset(dq, 0, lc_bytes(LC_DT_F32, (size_t)g.Tc * H * D));
  memset(dk, 0, lc_bytes(LC_DT_F32, g.nkv));
  memset(dv, 0, lc_bytes(LC_DT_F32, g.nkv));
  // k/v: start, 2 inner, outer prefetch. dk/dv: 1-2 block accumulators, 1 incoming,
  // 1 window total, and one per outer step sent back to its owner (n_d_blocks).
  const lc_dtype kdt = kv_dtype(r);
  const size_t bb = lc_bytes(kdt, blk);
  size_t n_d = (size_t)n_d_blocks(g.cp, g.w) * blk;
  char *kvb = lc_alloc(ar, LC_MEM_COMM, bb * n_kv_blocks(g.cp, g.w), "ring k/v buffers");
  float *db = lc_alloc(ar, LC_MEM_COMM, lc_bytes(LC_DT_F32, n_d), "ring dk/dv buffers");
  float *tmp = lc_alloc(ar, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, bwd_tmp_floats(g.Tc, P, H)), "ring delta");
  const lc_attn_shape cs = chunk_shape(r, &g);
  const size_t pbytes = lc_flash_kv_bytes(&cs, 1);
  void *pack = pbytes ? lc_alloc(ar, LC_MEM_SCRATCH, pbytes, "ring k/v chunk packed for the kernel") : NULL;
  lc_req *oreq = calloc((size_t)n_owner + 1, sizeof *oreq);
  lc_status st = LC_OK;
  if (!kvb || !db || !tmp || (pbytes && !pack) || !oreq) {
    st = kvb && db && tmp && (!pbytes || pack) ? lc_fail(LC_ENOMEM, "out of memory for ring requests") : LC_ENOMEM;
    goto done;
  }
  float *delta = tmp, *tmp_l = delta + (size_t)g.Tc * H, *tmp_d = tmp_l + (size_t)P * H;
  for (int a = 0; a < g.k; a++) {
    size_t qo = (size_t)a * g.Lc * H * D;
    if (r->bf16)
      lc_attn_delta16(delta + (size_t)a * H * g.Lc, (const uint16_t *)dout + qo, (const uint16_t *)out + qo, (int)g.Lc, H, D);
    else
      lc_attn_delta(delta + (size_t)a * H * g.Lc, (const float *)dout + qo, (const float *)out + qo, (int)g.Lc, H, D);
  }
  char *start = kvb, *xy[2] = {NULL, NULL}, *onext = NULL, *kp = kvb + bb;
  if (g.w > 1) xy[0] = kp, xy[1] = kp + bb, kp += 2 * bb;
  if (g.outer > 1) onext = kp;
  float *bd[2] = {db, NULL}, *acc_in = NULL, *total = NULL, *owner_blocks;
  float *bp = db + blk;
  if (g.w > 1) bd[1] = bp, bp += blk;
  if (g.w > 1 || g.outer > 1) acc_in = bp, bp += blk;
  if (g.w > 1) total = bp, bp += blk;
  owner_blocks = bp;
  kv_store(r, start, k, v, g.nkv);
  for (int o = 0; o < g.outer && st == LC_OK; o++) {
    // reqs: 0/1 inner k/v send/recv, 2/3 outer k/v send/recv, 4 dkv recv, 5/6 dkv sends
    lc_req reqs[7] = {{{0}, 0}};
    if (o + 1 < g.outer) {
      st = lc_isend(r->ctx, start, blk, kdt, outer_next(&g), TAG_OUTER, &reqs[2]);
      if (st == LC_OK) st = lc_irecv(r->ctx, onext, blk, kdt, outer_prev(&g), TAG_OUTER, &reqs[3]);
    }
    char *cur = start;
    for (int j = 0; j < g.w && st == LC_OK; j++) {
      char *nxt = xy[j % 2];
      float *acc = bd[j % 2];
      if (j + 1 < g.w) {
        st = lc_isend(r->ctx, cur, blk, kdt, inner_next(&g), TAG_KV, &reqs[0]);
        if (st == LC_OK) st = lc_irecv(r->ctx, nxt, blk, kdt, inner_prev(&g), TAG_KV, &reqs[1]);
      }
      if (st == LC_OK && j > 0) st = lc_irecv(r->ctx, acc_in, blk, LC_DT_F32, inner_prev(&g), TAG_DKV, &reqs[4]);
      // acc was sent two steps ago: that send must be done before it is reused.
      if (st == LC_OK) st = lc_wait(r->ctx, &reqs[5 + j % 2]);
      memset(acc, 0, lc_bytes(LC_DT_F32, blk));
      double t0 = lc_now();
      if (st == LC_OK)
        st = bwd_block(r, &g, owner_at(&g, o, j), dq, acc, acc + g.nkv, dout, lse, delta, q, cur,
                       at(cur, kdt, g.nkv), tmp_l, tmp_d, pack, reqs, 7, ar);
      r->compute_seconds += lc_now() - t0;
      if (st == LC_OK && j > 0) {
        st = lc_wait(r->ctx, &reqs[4]);
        lc_kern()->add(acc, acc_in, blk);
      }
      if (g.w > 1 && st == LC_OK)
        st = lc_isend(r->ctx, acc, blk, LC_DT_F32, inner_next(&g), TAG_DKV, &reqs[5 + j % 2]);
      for (int x = 0; x < 2; x++) {
        lc_status s2 = lc_wait(r->ctx, &reqs[x]);
        if (st == LC_OK) st = s2;
      }
      cur = nxt;
    }
    // The block this rank started the window with comes back with every window rank's part.
    float *win = g.w > 1 ? total : bd[0];
    if (st == LC_OK && g.w > 1) {
      lc_req rq = {{0}, 0};
      st = lc_irecv(r->ctx, total, blk, LC_DT_F32, inner_prev(&g), TAG_DKV, &rq);
      if (st == LC_OK) st = lc_wait(r->ctx, &rq);
    }
    for (int x = 5; x < 7; x++) {
      lc_status s2 = lc_wait(r->ctx, &reqs[x]);
      if (st == LC_OK) st = s2;
    }
    if (st == LC_OK) {
      if (o == 0) {
        lc_kern()->add(dk, win, g.nkv);
        lc_kern()->add(dv, win + g.nkv, g.nkv);
      } else {
        float *sb = owner_blocks + (size_t)(o - 1) * blk;
        memcpy(sb, win, lc_bytes(LC_DT_F32, blk));
        st = lc_isend(r->ctx, sb, blk, LC_DT_F32, owner_at(&g, o, 0), TAG_OWNER, &oreq[o - 1]);
      }
    }
    for (int x = 2; x < 4; x++) {
      lc_status s2 = lc_wait(r->ctx, &reqs[x]);
      if (st == LC_OK) st = s2;
    }
    char *t = start;
    start = onext;
    onext = t;
  }
  // Partial dk/dv of this rank's block from the other windows.
  for (int o = 1; o < g.outer && st == LC_OK; o++) {
    lc_req rq = {{0}, 0};
    int from = ((g.W + o) % g.outer) * g.w + g.i;
    st = lc_irecv(r->ctx, acc_in, blk, LC_DT_F32, from, TAG_OWNER, &rq);
    if (st == LC_OK) st = lc_wait(r->ctx, &rq);
    if (st == LC_OK)
      for (size_t x = 0; x < g.nkv; x++) dk[x] += acc_in[x], dv[x] += acc_in[g.nkv + x];
  }
  for (int o = 0; o < n_owner; o++) {
    lc_status s2 = lc_wait(r->ctx, &oreq[o]);
    if (st == LC_OK) st = s2;
  }
done:
  free(oreq);
  lc_free(ar, pack);
  lc_free(ar, tmp);
  lc_free(ar, db);
  lc_free(ar, kvb);
  return st;
}
