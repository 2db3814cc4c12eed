// Ring attention. Each context rank keeps its queries and sees every k/v block once:
// a block travels the inner ring (window ranks) while the outer ring pre-fetches the
// next window's block. Causal work per block pair is decided by global positions:
// zigzag chunks make every step carry equal work.
#include "attn/ring.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "backend/scratch.h"
#include "backend/backend.h"
#include "backend/bufcomm.h"
#include "backend/stage.h"
#include "core/runstate.h"
#include "core/timer.h"

enum { TAG_KV = 101, TAG_OUTER = 102, TAG_DKV = 103, TAG_OWNER = 104 };

typedef struct {
  int cp, w, outer, c, W, i, k;
  long Lc, Tc;
  size_t nkv; // floats of one of k or v: Tc*Hkv*D
  const lc_seq_layout *L;
  const int *lo;
  lc_buf lob;  // the same bounds as a buffer (I32 [S]; ring_lo): the caller's, or staged
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
// With one context rank (pure Ulysses) nothing travels: the kernel reads k and v and
// accumulates dk and dv in place, and the ring holds no block at all.
static int n_kv_blocks(int cp, int w) { return cp == 1 ? 0 : 1 + (w > 1 ? 2 : 0) + (cp / w > 1 ? 1 : 0); }
static int n_d_blocks(int cp, int w) {
  if (cp == 1) return 0;
  int outer = cp / w;
  return (w > 1 ? 2 : 1) + (w > 1 || outer > 1 ? 1 : 0) + (w > 1 ? 1 : 0) + (outer - 1);
}
static size_t blk_floats(int cp, long S, int Hkv, int D) { return 2 * (size_t)(S / cp) * Hkv * D; }
// Scratch: forward merge tiles; backward delta of the Tc local rows and lse/delta tiles.
static size_t fwd_tmp_floats(int P, int H, int D) { return (size_t)P * H * D + 2 * (size_t)P * H; }
static size_t bwd_tmp_floats(long Tc, int P, int H) { return (size_t)Tc * H + 2 * (size_t)P * H; }


void lc_ring_mem(int cp, int window, long S, int chunks, int Hq, int Hkv, int D, int poll_rows, int threads,
                 int bf16, lc_attn_mem *m) {
  memset(m, 0, sizeof *m);
  const long Tc = S / cp, Lc = Tc / chunks;
  const size_t blk = blk_floats(cp, S, Hkv, D);
  // The largest kernel call: poll_rows (or all Lc) query rows against a Lc-row key chunk.
  lc_attn_geom s = {.Tq = (int)(Lc < poll_rows ? Lc : poll_rows), .Tk = (int)Lc, .Hq = Hq,
                     .Hkv = Hkv, .D = D, .causal = 1, .scale = 1.0f};
  s.bf16 = bf16;
  const lc_dtype kv = bf16 ? LC_DT_BF16 : LC_DT_F32;
  lc_mem_parts *f = &m->fwd_parts, *b = &m->bwd_parts;
  m->fwd_comm = lc_mem_part_add(f, "ring k/v buffers", LC_MEM_COMM, lc_bytes(kv, blk * n_kv_blocks(cp, window)));
  m->fwd_scratch = lc_mem_part_add(f, "ring merge tiles", LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, fwd_tmp_floats(poll_rows, Hq, D))) +
                   lc_mem_part_add(f, "flash attention workspace", LC_MEM_SCRATCH, lc_scratch_flash(&s, 0, 0, threads));
  m->bwd_comm = lc_mem_part_add(b, "ring k/v buffers", LC_MEM_COMM, lc_bytes(kv, blk * n_kv_blocks(cp, window))) +
                lc_mem_part_add(b, "ring dk/dv buffers", LC_MEM_COMM, lc_bytes(LC_DT_F32, blk * n_d_blocks(cp, window)));
  m->bwd_scratch = lc_mem_part_add(b, "ring delta", LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, bwd_tmp_floats(Tc, poll_rows, Hq))) +
                   lc_mem_part_add(b, "flash attention workspace", LC_MEM_SCRATCH, lc_scratch_flash(&s, 1, 0, threads));
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

static void poll(const lc_ring *r, lc_buf_req *reqs, int n) {
  for (int k = 0; k < n; k++) lc_buf_test(r->ctx, &reqs[k]);
  if (r->extra_poll) r->extra_poll(r->extra_arg);
}

// Waits for requests [a, b) of reqs; the first error wins.
static lc_status wait_all(const lc_ring *r, lc_buf_req *reqs, int a, int b, lc_status st) {
  for (int x = a; x < b; x++) {
    const lc_status s2 = lc_buf_wait(r->ctx, &reqs[x]);
    if (st == LC_OK) st = s2;
  }
  return st;
}

// The dtype of q, k, v, out, dout and of the k/v blocks the ring holds and sends (the
// kernel reads them in place): fp32, or bf16 (r->bf16).
static lc_dtype kv_dtype(const lc_ring *r) { return r->bf16 ? LC_DT_BF16 : LC_DT_F32; }
// This rank's k and v into a block [k | v] of nkv values each.
static lc_status kv_store(lc_buf blk, lc_buf k, lc_buf v, size_t nkv) {
  LC_TRY(lc_be_copy(lc_buf_view(blk, 0, nkv), lc_buf_view(k, 0, nkv), LC_STREAM_COMPUTE));
  return lc_be_copy(lc_buf_view(blk, nkv, nkv), lc_buf_view(v, 0, nkv), LC_STREAM_COMPUTE);
}

// The call's bounds as a buffer (g->lob): the caller's lo_buf, or lo staged (backend/stage.h:
// read in place where the backend's memory is the host's; *staged: release it after the call).
static lc_status ring_lo(const lc_ring *r, geo *g, lc_buf *staged) {
  *staged = (lc_buf){0};
  g->lob = r->lo_buf;
  if (!g->lo || lc_buf_ok(r->lo_buf)) return LC_OK;
  LC_TRY(lc_buf_stage_in(r->be, g->lo, (size_t)r->S, LC_DT_I32, LC_MEM_SCRATCH, "ring key bounds", LC_SYNC_INPUT, staged));
  g->lob = *staged;
  return LC_OK;
}

// The bounds of tokens [t0, t0 + n) as a buffer (empty: plain causal).
static lc_buf lo_rows(const geo *g, long t0, int n) {
  if (!g->lo) return (lc_buf){0};
  return lc_buf_ok(g->lob) ? lc_buf_view(g->lob, (size_t)t0, (size_t)n) : g->lob;
}

// A key chunk's shape for packing k/v once for all query tiles against it
// (lc_flash_kv_pack; kernels that read k/v in place need no packing: 0 bytes).
static lc_attn_geom chunk_shape(const lc_ring *r, const geo *g) {
  lc_attn_geom s = {.Tq = 1, .Tk = (int)g->Lc, .Hq = r->Hq, .Hkv = r->Hkv, .D = r->D, .causal = 1,
                     .scale = r->scale};
  s.bf16 = r->bf16;
  return s;
}

// Forward of local q against the block (k, v) owned by context rank `owner`. Key chunk b
// outermost, so the kernel's packing of it (pack: lc_be_flash_kv_bytes, empty if none) happens
// once for every query tile; each query chunk still merges its key chunks in order b = 0, 1.
// (out [Tc,H,D] F32; lse chunk a's [H][Lc] at a * lse_ld; tmp_o [P,H,D], tmp_l, tmp_a [H,P].)
static lc_status fwd_block(lc_ring *r, const geo *g, int owner, lc_buf out, lc_buf lse, lc_buf q, lc_buf k, lc_buf v,
                           lc_buf tmp_o, lc_buf tmp_l, lc_buf tmp_a, lc_buf pack, lc_buf_req *reqs, int nreq) {
  const int H = r->Hq, D = r->D;
  const size_t kc = (size_t)g->Lc * r->Hkv * D;
  lc_test_point("ring");
  for (int b = 0; b < g->k; b++) {
    const lc_buf kb = lc_buf_view(k, (size_t)b * kc, kc), vb = lc_buf_view(v, (size_t)b * kc, kc);
    int packed = 0;
    for (int a = 0; a < g->k; a++) {
      long qs = chunk_start(g, g->c, a), ks = chunk_start(g, owner, b);
      if (hidden(g, ks, qs, (int)g->Lc)) continue; // no query of the chunk sees a key of the block
      for (long r0 = 0; r0 < g->Lc; r0 += r->poll_rows) {
        int n = (int)(g->Lc - r0 < r->poll_rows ? g->Lc - r0 : r->poll_rows);
        if (ks > qs + r0 + n - 1) break;
        if (hidden(g, ks, qs + r0, n)) continue;
        lc_attn_geom s = {.Tq = n, .Tk = (int)g->Lc, .Hq = H, .Hkv = r->Hkv, .D = D,
                           .q_start = qs + r0, .k_start = ks, .causal = 1, .scale = r->scale};
        s.bf16 = r->bf16;
        if (lc_buf_ok(pack) && !packed) {
          LC_TRY(lc_be_flash_kv_pack(pack, kb, vb, &s, 0));
          packed = 1;
        }
        const size_t qo = ((size_t)a * g->Lc + r0) * H * D, nq = (size_t)n * H * D, nl = (size_t)n * H;
        const lc_buf to = lc_buf_view(tmp_o, 0, nq), tl = lc_buf_view(tmp_l, 0, nl), ta = lc_buf_view(tmp_a, 0, nl);
        LC_TRY(lc_be_flash_fwd_packed(to, tl, lc_buf_view(q, qo, nq), kb, vb, lo_rows(g, qs + r0, n), pack, &s));
        const lc_buf lse_a = lc_buf_view(lse, (size_t)a * g->lse_ld + (size_t)r0, (size_t)(H - 1) * g->Lc + n);
        LC_TRY(lc_be_copy2d(ta, (size_t)n, lse_a, (size_t)g->Lc, H, (size_t)n));
        LC_TRY(lc_be_attn_merge(lc_buf_view(out, qo, nq), ta, to, tl, n, H, D));
        LC_TRY(lc_be_copy2d(lse_a, (size_t)g->Lc, ta, (size_t)n, H, (size_t)n));
        poll(r, reqs, nreq);
      }
    }
  }
  return LC_OK;
}

// One block (U8) of the ring's backend, carved by the pass into typed parts.
static lc_status block(const lc_ring *r, lc_mem_cat cat, size_t bytes, const char *what, lc_buf *b) {
  return lc_buf_alloc(r->be, cat, LC_DT_U8, bytes, 0, what, b);
}

// ---- the rotation: every k/v block passes this rank once. A window's ranks pass the
// blocks around the inner ring (step j computes on the block of owner_at(o, j) while the
// next one is sent on and received), while the outer ring moves each window's start block
// to the next window in the background (hop o). The forward and the backward differ only
// in what a step computes and what they exchange beside it (the backward's dk/dv).
typedef struct {
  int nreq; // requests per hop: 0/1 inner k/v send/recv, 2/3 outer k/v send/recv, then the pass's own
  // Before a step's compute (may be NULL), after the inner k/v transfers are posted.
  lc_status (*pre)(void *arg, int j, lc_buf_req *reqs);
  // Step j's compute on block cur of context rank `owner` (timed as kernel time); it polls reqs.
  lc_status (*compute)(void *arg, int j, int owner, lc_buf cur, lc_buf_req *reqs, int nreq);
  // After the compute (may be NULL).
  lc_status (*post)(void *arg, int j, lc_buf_req *reqs);
  // After a hop's last step, before its requests are waited for (may be NULL); st: so far.
  lc_status (*hop_end)(void *arg, int o, lc_buf_req *reqs, lc_status st);
  void *arg;
} rotation;

#define MAX_REQS 7
// Runs the rotation from block `start` (this rank's k/v), with the inner buffers xy and the
// outer prefetch onext (empty where unused).
static lc_status rotate(lc_ring *r, const geo *g, lc_buf start, const lc_buf xy[2], lc_buf onext, const rotation *rt) {
  lc_status st = LC_OK;
  for (int o = 0; o < g->outer && st == LC_OK; o++) {
    lc_buf_req reqs[MAX_REQS];
    memset(reqs, 0, sizeof reqs);
    if (o + 1 < g->outer) {
      st = lc_buf_isend(r->ctx, start, outer_next(g), TAG_OUTER, &reqs[2]);
      if (st == LC_OK) st = lc_buf_irecv(r->ctx, onext, outer_prev(g), TAG_OUTER, &reqs[3]);
    }
    lc_buf cur = start;
    for (int j = 0; j < g->w && st == LC_OK; j++) {
      const lc_buf nxt = xy[j % 2];
      if (j + 1 < g->w) {
        st = lc_buf_isend(r->ctx, cur, inner_next(g), TAG_KV, &reqs[0]);
        if (st == LC_OK) st = lc_buf_irecv(r->ctx, nxt, inner_prev(g), TAG_KV, &reqs[1]);
      }
      if (st == LC_OK && rt->pre) st = rt->pre(rt->arg, j, reqs);
      double t0 = lc_now();
      // cur may be in flight (being sent): the kernel only reads it
      if (st == LC_OK) st = rt->compute(rt->arg, j, owner_at(g, o, j), cur, reqs, rt->nreq);
      r->compute_seconds += lc_now() - t0;
      if (st == LC_OK && rt->post) st = rt->post(rt->arg, j, reqs);
      st = wait_all(r, reqs, 0, 2, st);
      cur = nxt;
    }
    if (rt->hop_end) st = rt->hop_end(rt->arg, o, reqs, st);
    st = wait_all(r, reqs, 0, rt->nreq, st);
    const lc_buf t = start;
    start = onext;
    onext = t;
  }
  return st;
}

// The forward's step: the block's attention merged into out and lse.
typedef struct {
  lc_ring *r;
  const geo *g;
  lc_buf out, lse, q, k, v, tmp_o, tmp_l, tmp_a, pack;
} fwd_step;

static lc_status fwd_compute(void *arg, int j, int owner, lc_buf cur, lc_buf_req *reqs, int nreq) {
  (void)j;
  const fwd_step *f = arg;
  const size_t n = f->g->nkv;
  const int inplace = f->g->cp == 1; // (n_kv_blocks: no block, k and v read where they are)
  return fwd_block(f->r, f->g, owner, f->out, f->lse, f->q, inplace ? f->k : lc_buf_view(cur, 0, n),
                   inplace ? f->v : lc_buf_view(cur, n, n), f->tmp_o, f->tmp_l, f->tmp_a, f->pack, reqs, nreq);
}

lc_status lc_ring_fwd(lc_ring *r, lc_buf out, lc_buf lse, lc_buf q, lc_buf k, lc_buf v) {
  geo g = geometry(r);
  const int H = r->Hq, D = r->D;
  const int P = r->poll_rows;
  LC_TRY(lc_be_zero(lc_buf_view(out, 0, (size_t)g.Tc * H * D)));
  for (int a = 0; a < g.k; a++) LC_TRY(lc_be_fill(lc_buf_view(lse, (size_t)a * g.lse_ld, (size_t)H * g.Lc), -INFINITY));
  // Block buffers ([k | v]): start-of-window block, two inner buffers, outer prefetch.
  const size_t blk = 2 * g.nkv; // values of a block
  const lc_dtype kdt = kv_dtype(r);
  const lc_attn_geom cs = chunk_shape(r, &g);
  const size_t pbytes = lc_be_flash_kv_bytes(r->be, &cs, 0);
  lc_buf kb = {0}, tb = {0};
  lc_buf pack = {0}, lo = {0};
  lc_status st = ring_lo(r, &g, &lo);
  if (st == LC_OK && g.cp > 1) st = block(r, LC_MEM_COMM, lc_bytes(kdt, blk) * n_kv_blocks(g.cp, g.w), "ring k/v buffers", &kb);
  if (st == LC_OK) st = block(r, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, fwd_tmp_floats(P, H, D)), "ring merge tiles", &tb);
  if (st == LC_OK && pbytes)
    st = lc_buf_alloc(r->be, LC_MEM_SCRATCH, LC_DT_U8, pbytes, 0, "ring k/v chunk packed for the kernel", &pack);
  if (st != LC_OK) goto done;
  // (the tiles follow one another unpadded: fwd_tmp_floats)
  const lc_buf tmp_o = lc_buf_part(tb, 0, (size_t)P * H * D, LC_DT_F32),
               tmp_l = lc_buf_part(tb, lc_bytes(LC_DT_F32, (size_t)P * H * D), (size_t)P * H, LC_DT_F32),
               tmp_a = lc_buf_part(tb, lc_bytes(LC_DT_F32, (size_t)P * H * D + (size_t)P * H), (size_t)P * H, LC_DT_F32);
  const size_t bb = lc_bytes(kdt, blk);
  lc_buf start = {0}, xy[2] = {{0}, {0}}, onext = {0};
  size_t bp = bb;
  if (g.cp > 1) start = lc_buf_part(kb, 0, blk, kdt);
  if (g.w > 1) xy[0] = lc_buf_part(kb, bp, blk, kdt), xy[1] = lc_buf_part(kb, bp + bb, blk, kdt), bp += 2 * bb;
  if (g.outer > 1) onext = lc_buf_part(kb, bp, blk, kdt);
  if (g.cp > 1) st = kv_store(start, k, v, g.nkv);
  fwd_step f = {.r = r, .g = &g, .out = out, .lse = lse, .q = q, .k = k, .v = v, .tmp_o = tmp_o, .tmp_l = tmp_l,
                .tmp_a = tmp_a, .pack = pack};
  const rotation rt = {.nreq = 4, .compute = fwd_compute, .arg = &f};
  if (st == LC_OK) st = rotate(r, &g, start, xy, onext, &rt);
done:
  lc_buf_free(&pack);
  lc_buf_free(&tb);
  lc_buf_free(&kb);
  lc_buf_stage_release(&lo);
  return st;
}

// Backward of local q against the block owned by `owner`: dq +=, dk/dv (block) +=.
static lc_status bwd_block(lc_ring *r, const geo *g, int owner, lc_buf dq, lc_buf dk, lc_buf dv, lc_buf dout,
                           lc_buf lse, lc_buf delta, lc_buf q, lc_buf k, lc_buf v, lc_buf tmp_l, lc_buf tmp_d,
                           lc_buf pack, lc_buf_req *reqs, int nreq) {
  const int H = r->Hq, D = r->D;
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
        lc_attn_geom s = {.Tq = n, .Tk = (int)g->Lc, .Hq = H, .Hkv = r->Hkv, .D = D,
                           .q_start = qs + r0, .k_start = ks, .causal = 1, .scale = r->scale};
        s.bf16 = r->bf16;
        const lc_buf kc = lc_buf_view(k, b * kb, kb), vc = lc_buf_view(v, b * kb, kb);
        if (lc_buf_ok(pack) && !packed) {
          LC_TRY(lc_be_flash_kv_pack(pack, kc, vc, &s, 1));
          packed = 1;
        }
        const size_t qo = ((size_t)a * g->Lc + r0) * H * D, nq = (size_t)n * H * D, nl = (size_t)n * H;
        const lc_buf tl = lc_buf_view(tmp_l, 0, nl), td = lc_buf_view(tmp_d, 0, nl);
        LC_TRY(lc_be_copy2d(tl, (size_t)n, lc_buf_view(lse, (size_t)a * g->lse_ld + (size_t)r0, (size_t)(H - 1) * g->Lc + n),
                               (size_t)g->Lc, H, (size_t)n));
        LC_TRY(lc_be_copy2d(td, (size_t)n, lc_buf_view(delta, (size_t)a * H * g->Lc + (size_t)r0, (size_t)(H - 1) * g->Lc + n),
                               (size_t)g->Lc, H, (size_t)n));
        LC_TRY(lc_be_flash_bwd_packed(lc_buf_view(dq, qo, nq), lc_buf_view(dk, b * kb, kb), lc_buf_view(dv, b * kb, kb),
                                      lc_buf_view(dout, qo, nq), lc_buf_view(q, qo, nq), kc, vc, tl, td,
                                      lo_rows(g, qs + r0, n), pack, &s));
        poll(r, reqs, nreq);
      }
    }
  }
  return LC_OK;
}

// The backward's step: dq and the block's dk/dv (into acc = bd[j % 2], the step's
// accumulator), which travel around the window behind the k/v blocks (reqs 4: the incoming
// partial, 5/6: the sends of the two accumulators) and after each hop back to the block's
// owner (TAG_OWNER).
typedef struct {
  lc_ring *r;
  const geo *g;
  lc_buf dq, dk, dv, dout, lse, delta, q, k, v, tmp_l, tmp_d, pack;
  lc_buf bd[2], acc_in, total, db;
  size_t owner_blocks, blk;
  lc_buf_req *oreq;
} bwd_step;

static lc_status bwd_pre(void *arg, int j, lc_buf_req *reqs) {
  const bwd_step *b = arg;
  if (b->g->cp == 1) return LC_OK; // dk, dv accumulate in place (zeroed by lc_ring_bwd)
  lc_status st = LC_OK;
  if (j > 0) st = lc_buf_irecv(b->r->ctx, b->acc_in, inner_prev(b->g), TAG_DKV, &reqs[4]);
  // acc was sent two steps ago: that send must be done before it is reused.
  if (st == LC_OK) st = lc_buf_wait(b->r->ctx, &reqs[5 + j % 2]);
  if (st == LC_OK) st = lc_be_zero(b->bd[j % 2]);
  return st;
}

static lc_status bwd_compute(void *arg, int j, int owner, lc_buf cur, lc_buf_req *reqs, int nreq) {
  const bwd_step *b = arg;
  const size_t n = b->g->nkv;
  const lc_buf acc = b->bd[j % 2];
  if (b->g->cp == 1) // (n_kv_blocks, n_d_blocks: no blocks; the same sums, into dk and dv from zero)
    return bwd_block(b->r, b->g, owner, b->dq, lc_buf_view(b->dk, 0, n), lc_buf_view(b->dv, 0, n), b->dout, b->lse,
                     b->delta, b->q, lc_buf_view(b->k, 0, n), lc_buf_view(b->v, 0, n), b->tmp_l, b->tmp_d, b->pack, reqs,
                     nreq);
  return bwd_block(b->r, b->g, owner, b->dq, lc_buf_view(acc, 0, n), lc_buf_view(acc, n, n), b->dout, b->lse, b->delta,
                   b->q, lc_buf_view(cur, 0, n), lc_buf_view(cur, n, n), b->tmp_l, b->tmp_d, b->pack, reqs, nreq);
}

// The partial from the window's previous rank added; acc sent on to the next.
static lc_status bwd_post(void *arg, int j, lc_buf_req *reqs) {
  const bwd_step *b = arg;
  const lc_buf acc = b->bd[j % 2];
  lc_status st = LC_OK;
  if (j > 0) {
    st = lc_buf_wait(b->r->ctx, &reqs[4]);
    if (st == LC_OK) st = lc_be_add(acc, b->acc_in);
  }
  if (b->g->w > 1 && st == LC_OK) st = lc_buf_isend(b->r->ctx, acc, inner_next(b->g), TAG_DKV, &reqs[5 + j % 2]);
  return st;
}

// The block this rank started the window with comes back with every window rank's part:
// hop 0's is this rank's own (into dk/dv), a later hop's goes back to its owner.
static lc_status bwd_hop_end(void *arg, int o, lc_buf_req *reqs, lc_status st) {
  const bwd_step *b = arg;
  const geo *g = b->g;
  if (g->cp == 1) return st; // (dk, dv already hold this rank's block's sums)
  const lc_buf win = g->w > 1 ? b->total : b->bd[0];
  if (st == LC_OK && g->w > 1) {
    lc_buf_req rq;
    st = lc_buf_irecv(b->r->ctx, b->total, inner_prev(g), TAG_DKV, &rq);
    if (st == LC_OK) st = lc_buf_wait(b->r->ctx, &rq);
  }
  st = wait_all(b->r, reqs, 5, 7, st);
  if (st == LC_OK) {
    if (o == 0) {
      st = lc_be_add(lc_buf_view(b->dk, 0, g->nkv), lc_buf_view(win, 0, g->nkv));
      if (st == LC_OK) st = lc_be_add(lc_buf_view(b->dv, 0, g->nkv), lc_buf_view(win, g->nkv, g->nkv));
    } else {
      const lc_buf sb = lc_buf_view(b->db, b->owner_blocks + (size_t)(o - 1) * b->blk, b->blk);
      st = lc_be_copy(sb, win, LC_STREAM_COMPUTE);
      if (st == LC_OK) st = lc_buf_isend(b->r->ctx, sb, owner_at(g, o, 0), TAG_OWNER, &b->oreq[o - 1]);
    }
  }
  return st;
}

lc_status lc_ring_bwd(lc_ring *r, lc_buf dq, lc_buf dk, lc_buf dv, lc_buf dout, lc_buf out, lc_buf lse, lc_buf q,
                      lc_buf k, lc_buf v) {
  geo g = geometry(r);
  const int H = r->Hq, D = r->D, P = r->poll_rows;
  const size_t blk = 2 * g.nkv;
  const int n_owner = g.outer - 1;
  LC_TRY(lc_be_zero(lc_buf_view(dq, 0, (size_t)g.Tc * H * D)));
  LC_TRY(lc_be_zero(lc_buf_view(dk, 0, g.nkv)));
  LC_TRY(lc_be_zero(lc_buf_view(dv, 0, g.nkv)));
  // k/v: start, 2 inner, outer prefetch. dk/dv: 1-2 block accumulators, 1 incoming,
  // 1 window total, and one per outer step sent back to its owner (n_d_blocks).
  const lc_dtype kdt = kv_dtype(r), f32 = LC_DT_F32;
  const size_t bb = lc_bytes(kdt, blk);
  const size_t n_d = (size_t)n_d_blocks(g.cp, g.w) * blk;
  const lc_attn_geom cs = chunk_shape(r, &g);
  const size_t pbytes = lc_be_flash_kv_bytes(r->be, &cs, 1);
  lc_buf kvk = {0}, dbk = {0}, tk = {0};
  lc_buf pack = {0}, lo = {0};
  lc_buf_req *oreq = calloc((size_t)n_owner + 1, sizeof *oreq);
  lc_status st = oreq ? LC_OK : lc_fail(LC_ENOMEM, "out of memory for ring requests");
  if (st == LC_OK) st = ring_lo(r, &g, &lo);
  if (st == LC_OK && g.cp > 1) st = block(r, LC_MEM_COMM, bb * n_kv_blocks(g.cp, g.w), "ring k/v buffers", &kvk);
  if (st == LC_OK && g.cp > 1) st = block(r, LC_MEM_COMM, lc_bytes(f32, n_d), "ring dk/dv buffers", &dbk);
  if (st == LC_OK) st = block(r, LC_MEM_SCRATCH, lc_bytes(f32, bwd_tmp_floats(g.Tc, P, H)), "ring delta", &tk);
  if (st == LC_OK && pbytes)
    st = lc_buf_alloc(r->be, LC_MEM_SCRATCH, LC_DT_U8, pbytes, 0, "ring k/v chunk packed for the kernel", &pack);
  if (st != LC_OK) goto done;
  // (delta [k][H][Lc], then the lse and delta tiles [H, P], unpadded: bwd_tmp_floats)
  const size_t nd = (size_t)g.Tc * H;
  const lc_buf delta = lc_buf_part(tk, 0, nd, f32), tmp_l = lc_buf_part(tk, lc_bytes(f32, nd), (size_t)P * H, f32),
               tmp_d = lc_buf_part(tk, lc_bytes(f32, nd + (size_t)P * H), (size_t)P * H, f32);
  for (int a = 0; a < g.k && st == LC_OK; a++) {
    const size_t qo = (size_t)a * g.Lc * H * D, nq = (size_t)g.Lc * H * D;
    st = lc_be_attn_delta(lc_buf_view(delta, (size_t)a * H * g.Lc, (size_t)H * g.Lc), lc_buf_view(dout, qo, nq),
                          lc_buf_view(out, qo, nq), (int)g.Lc, H, D);
  }
  lc_buf start = g.cp > 1 ? lc_buf_part(kvk, 0, blk, kdt) : (lc_buf){0}, xy[2] = {{0}, {0}}, onext = {0};
  size_t kp = bb;
  if (g.w > 1) xy[0] = lc_buf_part(kvk, kp, blk, kdt), xy[1] = lc_buf_part(kvk, kp + bb, blk, kdt), kp += 2 * bb;
  if (g.outer > 1) onext = lc_buf_part(kvk, kp, blk, kdt);
  const lc_buf db = g.cp > 1 ? lc_buf_part(dbk, 0, n_d, f32) : (lc_buf){0};
  lc_buf bd[2] = {g.cp > 1 ? lc_buf_view(db, 0, blk) : (lc_buf){0}, {0}}, acc_in = {0}, total = {0};
  size_t bp = blk;
  if (g.w > 1) bd[1] = lc_buf_view(db, bp, blk), bp += blk;
  if (g.w > 1 || g.outer > 1) acc_in = lc_buf_view(db, bp, blk), bp += blk;
  if (g.w > 1) total = lc_buf_view(db, bp, blk), bp += blk;
  const size_t owner_blocks = bp;
  if (st == LC_OK && g.cp > 1) st = kv_store(start, k, v, g.nkv);
  bwd_step b = {.r = r, .g = &g, .dq = dq, .dk = dk, .dv = dv, .dout = dout, .lse = lse, .delta = delta, .q = q, .k = k, .v = v,
                .tmp_l = tmp_l, .tmp_d = tmp_d, .pack = pack, .bd = {bd[0], bd[1]}, .acc_in = acc_in, .total = total,
                .db = db, .owner_blocks = owner_blocks, .blk = blk, .oreq = oreq};
  const rotation rt = {.nreq = 7, .pre = bwd_pre, .compute = bwd_compute, .post = bwd_post, .hop_end = bwd_hop_end,
                       .arg = &b};
  if (st == LC_OK) st = rotate(r, &g, start, xy, onext, &rt);
  // Partial dk/dv of this rank's block from the other windows.
  for (int o = 1; o < g.outer && st == LC_OK; o++) {
    lc_buf_req rq;
    int from = ((g.W + o) % g.outer) * g.w + g.i;
    st = lc_buf_irecv(r->ctx, acc_in, from, TAG_OWNER, &rq);
    if (st == LC_OK) st = lc_buf_wait(r->ctx, &rq);
    if (st == LC_OK) st = lc_be_add(lc_buf_view(dk, 0, g.nkv), lc_buf_view(acc_in, 0, g.nkv));
    if (st == LC_OK) st = lc_be_add(lc_buf_view(dv, 0, g.nkv), lc_buf_view(acc_in, g.nkv, g.nkv));
  }
  if (oreq) st = wait_all(r, oreq, 0, n_owner, st);
done:
  free(oreq);
  lc_buf_free(&pack);
  lc_buf_free(&tk);
  lc_buf_free(&dbk);
  lc_buf_free(&kvk);
  lc_buf_stage_release(&lo);
  return st;
}
