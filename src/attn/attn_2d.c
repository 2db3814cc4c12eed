// 2D attention (LoongTrain): Ulysses head parallelism (all-to-all inside the head
// group) around zigzag ring attention over the context group. hp = 1 is the pure
// ring, cp = 1 pure Ulysses.
//
// Shapes per rank: T = S/(cp*hp) local tokens with all heads; after the all-to-all
// Tc = S/cp tokens (the context rank's two chunks) with Hl = Hq/hp query heads and
// Hkvl kv heads (Hkv/hp, or 1 replicated kv head when hp > Hkv).
//
// Saved between forward and backward (selective checkpointing keeps it, so backward
// never re-runs the forward ring or all-to-alls): the LSE, and for hp > 1 also the
// head-layout q, k, v and output.
//
// Head chunks (--head-chunk N < Hl, "Untied Ulysses"): a call runs in Hl/N stages of N
// query heads each. A stage all-to-alls its heads' q/k/v (token layout -> head layout),
// runs the ring on them and all-to-alls its output back into the token-layout out; the
// next stage's all-to-alls are posted (non-blocking) before this stage's ring and polled
// with the ring's transfers. Only the LSE is kept: backward re-exchanges each stage's q,
// k, v, out and dout from the token-layout tensors the layer hands it (selective
// checkpointing recomputes q/k/v and keeps out), runs the ring backward and exchanges dq,
// dk, dv back, the next stage's exchange again posted ahead. So buffers and the kept bytes
// scale with N, not Hl. A stage holds whole kv groups (Hkvl > 1); with one kv head per
// rank (Hkvl = 1, replicated when hp > Hkv) every stage uses it: it is exchanged once per
// call and kept for all stages, and its gradient summed over the stages.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "backend/backend.h"
#include "backend/bufcomm.h"
#include "core/dtype.h"
#include "attn/ring.h"

typedef struct {
  lc_comm *head;
  int hp, Hl, Hkvl, rep; // rep: replicas of each kv head (hp / Hkv when hp > Hkv, else 1)
  int N;                 // query heads per stage (head chunk); Hl: unchunked
  lc_ring ring;
  lc_seq_layout def;     // the layout used when a pass sets none
  // Head chunks: the next stage's all-to-alls in flight, polled with the ring's transfers
  // before the caller's own poll.
  lc_buf_req inflight[5];
  int n_inflight;
  void (*outer_poll)(void *arg);
  void *outer_arg;
} attn2d;

static int chunked(const attn2d *x) { return x->hp > 1 && x->N < x->Hl; }
// Whether bwd reads the token-layout q, k, v before it writes dk, dv (lc_attn.dkv_late).
static int dkv_late(const attn2d *x) { return x->hp > 1 && (!chunked(x) || x->Hkvl == 1); }

static void chunk_poll(void *arg) {
  attn2d *x = arg;
  for (int i = 0; i < x->n_inflight; i++) lc_buf_test(x->head, &x->inflight[i]);
  if (x->outer_poll) x->outer_poll(x->outer_arg);
}

// The ring follows the pass's sequence: its layout (or the default) and bounds.
static void ring_for_pass(attn2d *x, const lc_attn *a, const lc_attn_in *in) {
  x->ring.extra_poll = in->poll;
  x->ring.extra_arg = in->poll_arg;
  x->ring.layout = in->layout ? in->layout : &x->def;
  x->ring.lo = in->lo;
  x->ring.lo_buf = in->lo_buf;
  x->ring.be = a->be;
  x->ring.bf16 = in->bf16; // q, k, v, out, dout in 2 bytes (attn.h), read in place
  x->ring.lse_stride = 0;
  if (chunked(x)) { // stage c's LSE is heads [cN, cN + N) of the [k][Hl][Lc] array
    x->outer_poll = in->poll, x->outer_arg = in->poll_arg;
    x->ring.extra_poll = chunk_poll, x->ring.extra_arg = x;
    x->ring.lse_stride = (long)x->Hl * x->ring.layout->Lc;
  }
}

#define POLL_ROWS 256 // q rows per ring kernel call (MPI is polled between calls)
static int test_poll_rows; // lc_attn_2d_test_set_poll_rows (0: POLL_ROWS)
void lc_attn_2d_test_set_poll_rows(int rows) { test_poll_rows = rows > 0 ? rows : 0; }
static int poll_rows(void) { return test_poll_rows ? test_poll_rows : POLL_ROWS; }

// Heads per rank after the all-to-all: Hl query heads, Hkvl kv heads (replicated rep times
// when hp > Hkv). x->ring gets the head counts and D; the rest is set by lc_attn_2d_init.
// Head chunk N (0: all): the ring runs on N query heads and their kv heads per stage.
static void heads_2d(attn2d *x, int hp, int Hq, int Hkv, int D, int N) {
  x->hp = hp;
  x->Hl = Hq / hp;
  x->rep = hp > Hkv ? hp / Hkv : 1;
  x->Hkvl = hp > Hkv ? 1 : Hkv / hp;
  x->N = N > 0 && N < x->Hl ? N : x->Hl;
  x->ring.Hq = x->N;
  x->ring.Hkv = x->Hkvl == 1 ? 1 : x->Hkvl * x->N / x->Hl;
  x->ring.D = D;
}

static size_t sz_q(const attn2d *x, int T) { return (size_t)T * x->hp * x->Hl * x->ring.D; }
static size_t sz_kv(const attn2d *x, int T) { return (size_t)T * x->hp * x->Hkvl * x->ring.D; }
static size_t sz_lse(const attn2d *x, int T) { return (size_t)T * x->hp * x->Hl; }
// Forward pack buffer (largest exchange) + kv expanded to hp slots when replicating.
static size_t sz_pack(const attn2d *x, int T) { return sz_q(x, T) > sz_kv(x, T) ? sz_q(x, T) : sz_kv(x, T); }
static size_t sz_exp(const attn2d *x, int T) { return x->rep > 1 ? (size_t)T * x->hp * x->ring.D : 0; }
// The forward's exchange block: the pack buffer (fp32 size), then the expanded kv (the pass's dtype).
static size_t fwd_comm_bytes(const attn2d *x, int T, int bf16) {
  return lc_bytes(LC_DT_F32, sz_pack(x, T)) + lc_bytes(bf16 ? LC_DT_BF16 : LC_DT_F32, sz_exp(x, T));
}
// Backward: dqh [Tc,Hl,D]; dkh, dvh [Tc,Hkvl,D]; pack [Tc,Hl,D]; expanded kv gradient (fp32),
// then doh [Tc,Hl,D] (fp32, or 2 bytes in bf16).
static size_t bwd_comm_bytes(const attn2d *x, int T, int bf16) {
  return lc_bytes(LC_DT_F32, 2 * sz_q(x, T) + 2 * sz_kv(x, T) + sz_exp(x, T)) +
         lc_bytes(bf16 ? LC_DT_BF16 : LC_DT_F32, sz_q(x, T));
}

// Values of the head-layout q, k, v and output kept for backward (hp > 1).
static size_t sz_heads(const attn2d *x, int T) { return x->hp > 1 ? 2 * sz_q(x, T) + 2 * sz_kv(x, T) : 0; }
// Saved: the LSE (fp32) and, for hp > 1, the head-layout q, k, v, out; those are bf16 values
// in bf16 and kept in 2 bytes, which the ring reads in place.
static size_t saved_bytes_of(const attn2d *x, int T, int bf16) {
  if (chunked(x)) return lc_bytes(LC_DT_F32, sz_lse(x, T)); // head chunks keep the LSE only
  return lc_bytes(LC_DT_F32, sz_lse(x, T)) + lc_bytes(bf16 ? LC_DT_BF16 : LC_DT_F32, sz_heads(x, T));
}

// ---- head chunks: sizes (values) of a stage, for the strategy and the memory model
// N query heads and Kc kv heads per stage (nc stages); shared: one kv head per rank, kept
// for every stage.
typedef struct {
  int N, nc, Kc, shared;
  size_t nq, nkv, nsh; // head-layout values: [Tc,N,D]; [Tc,Kc,D] per stage (0 when shared); [Tc,1,D]
} hchunk;
static hchunk chunk_of(const attn2d *x, int T) {
  hchunk c;
  const size_t Tc = (size_t)T * x->hp, D = (size_t)x->ring.D;
  c.N = x->N, c.nc = x->Hl / x->N, c.shared = x->Hkvl == 1;
  c.Kc = c.shared ? 1 : x->Hkvl / c.nc;
  c.nq = Tc * c.N * D, c.nkv = c.shared ? 0 : Tc * c.Kc * D, c.nsh = Tc * D;
  return c;
}
// Values of one stage's exchange token -> head layout: q, k, v (forward); q, out, dout,
// k, v (backward). The shared kv head travels once per call, not per stage.
static size_t set_vals(const hchunk *c, int bwd) { return (bwd ? 3 : 1) * c->nq + 2 * c->nkv; }
// The kv gradient a stage's ring writes (Kc heads, or the shared head).
static size_t dkv_vals(const hchunk *c) { return c->shared ? c->nsh : c->nkv; }
// A call's communication block, carved in this order: fp32 first,
//   forward:  out of the ring [Tc,N,D] | out exchange buffer [Tc,N,D]
//   backward: dq [Tc,N,D] | dk, dv of a stage (+ shared: the sums over the stages); its
//             exchanges back stage through the set the stage has computed (it holds
//             3 x [Tc,N,D] values and more, >= [Tc,N,D] floats, and the shared head's
//             [Tc,D] floats)
// then, in the pass's dtype (fp32, or 2 bytes in bf16, which the ring reads in place): the
// send buffer of a set, 2 head-layout sets (the stage computed, the next arriving), and the
// shared k, v.
// (ps: the block's parts, named, for the memory model's peak detail; their sum is the block)
static size_t chunk_comm_parts(const hchunk *c, int bwd, int bf16, lc_mem_parts *ps) {
  const size_t set = set_vals(c, bwd);
  const lc_dtype dt = bf16 ? LC_DT_BF16 : LC_DT_F32, f32 = LC_DT_F32;
  const int C = LC_MEM_COMM;
  // (backward: the exchanges back land in the set the stage has computed, dead by then)
  size_t b = lc_mem_part_add(ps, bwd ? "Ulysses chunk: dq of the ring (head layout)" : "Ulysses chunk: out of the ring (head layout)", C, lc_bytes(f32, c->nq)) +
             (bwd ? 0 : lc_mem_part_add(ps, "Ulysses chunk: out exchange buffer", C, lc_bytes(f32, c->nq)));
  if (bwd) {
    b += lc_mem_part_add(ps, "Ulysses chunk: dk, dv of a stage (head layout)", C, lc_bytes(f32, 2 * dkv_vals(c)));
    if (c->shared) b += lc_mem_part_add(ps, "Ulysses chunk: shared dk, dv summed over the stages", C, lc_bytes(f32, 2 * c->nsh));
  }
  b += lc_mem_part_add(ps, bwd ? "Ulysses chunk: send buffer of a set (q, out, dout, k, v)" : "Ulysses chunk: send buffer of a set (q, k, v)", C, lc_bytes(dt, set)) +
       lc_mem_part_add(ps, "Ulysses chunk: 2 head-layout sets (the stage computed, the next arriving)", C, lc_bytes(dt, 2 * set));
  if (c->shared) b += lc_mem_part_add(ps, "Ulysses chunk: shared k, v (head layout, kept for all stages)", C, lc_bytes(dt, 2 * c->nsh));
  return b;
}
static size_t chunk_comm_bytes(const hchunk *c, int bwd, int bf16) { return chunk_comm_parts(c, bwd, bf16, NULL); }
// bf16: the ring's fp32 output (head layout; hp = 1: the token layout), rounded into the
// 2-byte output (q, k, v, out are 2 bytes).
static size_t heads_scratch_bytes(const attn2d *x, int T, int bf16) { return bf16 ? lc_bytes(LC_DT_F32, sz_q(x, T)) : 0; }

static size_t saved_bytes_2d(const lc_attn *a, int T, int bf16) { return saved_bytes_of(a->ctx, T, bf16); }

// Valid head chunks: N divides Hl, and holds whole kv groups when a rank has several kv heads.
static int chunk_ok(int hp, int Hq, int Hkv, int N) {
  const int Hl = Hq / hp, Hkvl = hp > Hkv ? 1 : Hkv / hp;
  return N >= 1 && N <= Hl && Hl % N == 0 && (Hkvl == 1 || N % (Hq / Hkv) == 0);
}

int lc_attn_2d_head_chunks(int hp, int Hq, int Hkv, int *out, int cap) {
  int n = 0;
  if (hp < 1 || Hkv < 1 || Hq % hp != 0 || Hq % Hkv != 0 || (hp % Hkv != 0 && Hkv % hp != 0)) return 0;
  for (int N = 1; N <= Hq / hp; N++)
    if (chunk_ok(hp, Hq, Hkv, N) && n < cap) out[n++] = N;
  return n;
}

lc_status lc_attn_2d_head_chunk_check(int hp, int Hq, int Hkv, int N) {
  if (N == 0) return LC_OK;
  if (hp <= 1)
    return lc_fail(LC_EINVAL, "--head-chunk %d needs head parallelism (--hp > 1): with --hp 1 there is no Ulysses "
                   "exchange to chunk; use auto or all", N);
  int v[256], n = lc_attn_2d_head_chunks(hp, Hq, Hkv, v, 256);
  if (n > 0 && chunk_ok(hp, Hq, Hkv, N)) return LC_OK;
  char list[512] = "";
  for (int i = 0, k = 0; i < n && k < (int)sizeof list - 16; i++) k += snprintf(list + k, sizeof list - (size_t)k, "%s%d", i ? ", " : "", v[i]);
  const int Hl = Hq / hp, Hkvl = hp > Hkv ? 1 : Hkv / hp;
  return lc_fail(LC_EINVAL, "--head-chunk %d: each rank holds %d query heads (%d / hp %d)%s; valid: %s (or all, auto)", N,
                 Hl, Hq, hp, Hkvl > 1 ? (Hq / Hkv > 1 ? ", and a chunk must hold whole groups of query heads sharing a kv head" : "") : "",
                 n ? list : "none");
}

lc_status lc_attn_2d_mem(int hp, int cp, int window, long S, int chunks, int Hq, int Hkv, int D, int head_chunk,
                         int threads, int bf16, lc_attn_mem *m) {
  memset(m, 0, sizeof *m);
  if (hp < 1 || cp < 1 || window < 1 || cp % window != 0 || Hq % hp != 0 || chunks < 2 || chunks % 2 ||
      (hp % Hkv != 0 && Hkv % hp != 0) || S <= 0 || S % (2L * cp * hp) != 0 || S % ((long)chunks * cp) != 0)
    return lc_fail(LC_EINVAL, "attention layout hp %d x cp %d (window %d) does not fit S %ld with %d heads "
                   "and %d kv heads: see longctx train --help for the layout rules", hp, cp, window, S, Hq, Hkv);
  LC_TRY(lc_attn_2d_head_chunk_check(hp, Hq, Hkv, head_chunk));
  attn2d x;
  memset(&x, 0, sizeof x);
  heads_2d(&x, hp, Hq, Hkv, D, head_chunk);
  const int T = (int)(S / ((long)cp * hp));
  if (chunked(&x)) { // a stage's ring, plus the call's blocks
    const hchunk h = chunk_of(&x, T);
    lc_ring_mem(cp, window, S, chunks, h.N, h.Kc, D, poll_rows(), threads, bf16, m);
    m->saved = saved_bytes_of(&x, T, bf16);
    m->fwd_comm += chunk_comm_parts(&h, 0, bf16, &m->fwd_parts);
    m->bwd_comm += chunk_comm_parts(&h, 1, bf16, &m->bwd_parts);
    return LC_OK;
  }
  lc_ring_mem(cp, window, S, chunks, x.Hl, x.Hkvl, D, poll_rows(), threads, bf16, m);
  m->saved = saved_bytes_of(&x, T, bf16);
  m->fwd_scratch += lc_mem_part_add(&m->fwd_parts, "ring output in fp32 (head layout), rounded into out", LC_MEM_SCRATCH,
                                    heads_scratch_bytes(&x, T, bf16));
  if (hp > 1) {
    m->fwd_comm += lc_mem_part_add(&m->fwd_parts, "Ulysses all-to-all buffer", LC_MEM_COMM, fwd_comm_bytes(&x, T, bf16));
    m->bwd_comm += lc_mem_part_add(&m->bwd_parts, "Ulysses backward buffers (dq, dk, dv, pack, dout in head layout)",
                                   LC_MEM_COMM, bwd_comm_bytes(&x, T, bf16));
  }
  return LC_OK;
}

// ---- layout changes, all on the strategy's backend (a->be), in the pass's dtype dt
// [T, hp*Hs, D] (this rank's tokens, all head slots) -> [hp*T, Hs, D] (context tokens, one
// slice), src and dst of dtype dt (fp32, or bf16 in a bf16 pass: it travels as bf16), through
// pack (U8, one fp32-sized copy).
static lc_status a2a_fwd(attn2d *x, lc_buf dst, lc_buf src, int T, int Hs, lc_buf pack, lc_dtype dt) {
  const int hp = x->hp, D = x->ring.D;
  const size_t row = (size_t)Hs * D, blk = (size_t)T * row;
  const lc_buf pk = lc_buf_part(pack, 0, hp * blk, dt);
  for (int p = 0; p < hp; p++)
    LC_TRY(lc_be_copy2d(lc_buf_view(pk, p * blk, blk), row, lc_buf_view(src, p * row, src.n - p * row), hp * row,
                        (size_t)T, row));
  return lc_buf_alltoall(x->head, pk, lc_buf_view(dst, 0, hp * blk), blk);
}

// Inverse: [hp*T, Hs, D] -> [T, hp*Hs, D], dtype dt as a2a_fwd.
static lc_status a2a_bwd(attn2d *x, lc_buf dst, lc_buf src, int T, int Hs, lc_buf pack, lc_dtype dt) {
  const int hp = x->hp, D = x->ring.D;
  const size_t row = (size_t)Hs * D, blk = (size_t)T * row;
  const lc_buf pk = lc_buf_part(pack, 0, hp * blk, dt);
  LC_TRY(lc_buf_alltoall(x->head, lc_buf_view(src, 0, hp * blk), pk, blk));
  for (int p = 0; p < hp; p++)
    LC_TRY(lc_be_copy2d(lc_buf_view(dst, p * row, dst.n - p * row), hp * row, lc_buf_view(pk, p * blk, blk), row,
                        (size_t)T, row));
  return LC_OK;
}

// kv [T, Hkv, D] -> [T, hp, D] with slot s holding kv head s / rep.
static lc_status kv_expand(lc_buf dst, lc_buf src, int T, int Hkv, int rep, int D) {
  const size_t S = (size_t)Hkv * rep;
  for (size_t s = 0; s < S; s++)
    LC_TRY(lc_be_copy2d(lc_buf_view(dst, s * D, dst.n - s * D), S * D, lc_buf_view(src, s / rep * D, src.n - s / rep * D),
                        (size_t)Hkv * D, (size_t)T, (size_t)D));
  return LC_OK;
}

// Sum of the replicas' gradients: [T, hp, D] -> [T, Hkv, D] (replica 0, then + 1, 2, ...).
static lc_status kv_reduce(lc_buf dst, lc_buf src, int T, int Hkv, int rep, int D) {
  const size_t ld = (size_t)Hkv * D, lds = ld * rep;
  for (int h = 0; h < Hkv; h++) {
    const lc_buf o = lc_buf_view(dst, (size_t)h * D, dst.n - (size_t)h * D);
    for (int r = 0; r < rep; r++) {
      const size_t at = ((size_t)h * rep + r) * D;
      const lc_buf in = lc_buf_view(src, at, src.n - at);
      LC_TRY(r == 0 ? lc_be_copy2d(o, ld, in, lds, (size_t)T, (size_t)D) : lc_be_add2d(o, ld, in, lds, (size_t)T, (size_t)D));
    }
  }
  return LC_OK;
}

// The head-layout q, k, v, out in `saved` after the LSE: fp32, or (bf16) 2 bytes each, which
// the ring reads in place. of: where the ring writes its (fp32) output: o itself, or in bf16
// `work` (then rounded into o).
typedef struct {
  lc_buf q, k, v, o, of;
} heads;
static heads heads_of(const attn2d *x, int T, lc_buf saved, lc_buf work, int bf16) {
  heads h;
  const lc_dtype dt = bf16 ? LC_DT_BF16 : LC_DT_F32;
  const size_t nq = sz_q(x, T), nkv = sz_kv(x, T), b = lc_bytes(LC_DT_F32, sz_lse(x, T));
  h.q = lc_buf_part(saved, b, nq, dt);
  h.k = lc_buf_part(saved, b + lc_bytes(dt, nq), nkv, dt);
  h.v = lc_buf_part(saved, b + lc_bytes(dt, nq + nkv), nkv, dt);
  h.o = lc_buf_part(saved, b + lc_bytes(dt, nq + 2 * nkv), nq, dt);
  h.of = bf16 && lc_buf_ok(work) ? lc_buf_part(work, 0, nq, LC_DT_F32) : h.o; // (backward: unused)
  return h;
}

// ---- head chunks: the exchanges
// The heads of a token-layout tensor [T, H, D] that go to (or come from) head rank p: `per`
// consecutive heads from (p / rep) * stride + off.
typedef struct {
  int H, per, stride, off, rep;
} hsel;
static hsel sel_q(const attn2d *x, const lc_attn *a, int c) { return (hsel){a->Hq, x->N, x->Hl, c * x->N, 1}; }
static hsel sel_kv(const attn2d *x, const lc_attn *a, const hchunk *h, int c) {
  if (h->shared) return (hsel){a->Hkv, 1, 1, 0, x->rep}; // rank p's kv head: p / rep
  return (hsel){a->Hkv, h->Kc, x->Hkvl, c * h->Kc, 1};
}

// src[T, H, D] -> send[p][T][per][D] for each head rank p (the buffers' dtype).
static lc_status sel_pack(const attn2d *x, lc_buf send, lc_buf src, int T, hsel s) {
  const size_t D = (size_t)x->ring.D, row = (size_t)s.per * D, blk = (size_t)T * row;
  for (int p = 0; p < x->hp; p++) {
    const size_t h0 = ((size_t)(p / s.rep) * s.stride + s.off) * D;
    LC_TRY(lc_be_copy2d(lc_buf_view(send, p * blk, blk), row, lc_buf_view(src, h0, src.n - h0), (size_t)s.H * D,
                        (size_t)T, row));
  }
  return LC_OK;
}

// Head layout src[hp*T, per, D] (fp32) -> token layout dst[T, H, D] at the heads of s,
// blocking, through buf (U8: hp*T*per*D floats). bf16 (the forward's output): rounded to 2
// bytes, travels and lands in 2 bytes. Else fp32, replicas of a kv head summed in rank
// order (as kv_reduce).
static lc_status back_exchange(attn2d *x, lc_buf dst, lc_buf src, int T, hsel s, lc_buf buf, int bf16) {
  const size_t D = (size_t)x->ring.D, row = (size_t)s.per * D, blk = (size_t)T * row, n = (size_t)x->hp * blk;
  lc_buf recv;
  if (bf16) {
    const lc_buf p16 = lc_buf_part(buf, 0, n, LC_DT_BF16);
    recv = lc_buf_part(buf, lc_bytes(LC_DT_BF16, n), n, LC_DT_BF16);
    LC_TRY(lc_be_bf16_pack(p16, lc_buf_view(src, 0, n)));
    LC_TRY(lc_buf_alltoall(x->head, p16, recv, blk));
  } else {
    recv = lc_buf_part(buf, 0, n, LC_DT_F32);
    LC_TRY(lc_buf_alltoall(x->head, lc_buf_view(src, 0, n), recv, blk));
  }
  for (int p = 0; p < x->hp; p++) {
    const size_t h0 = ((size_t)(p / s.rep) * s.stride + s.off) * D;
    const lc_buf o = lc_buf_view(dst, h0, dst.n - h0), in = lc_buf_view(recv, p * blk, blk);
    if (bf16 || p % s.rep == 0) LC_TRY(lc_be_copy2d(o, (size_t)s.H * D, in, row, (size_t)T, row));
    else LC_TRY(lc_be_add2d(o, (size_t)s.H * D, in, row, (size_t)T, row));
  }
  return LC_OK;
}

// The shared kv head, token layout src[T, Hkv, D] -> dst[Tc, 1, D] (fp32, or 2 bytes in
// bf16), blocking, through buf (U8: Tc*D floats).
static lc_status shared_kv_in(attn2d *x, const lc_attn *a, lc_buf dst, lc_buf src, int T, lc_buf buf) {
  const hsel s = {a->Hkv, 1, 1, 0, x->rep};
  const size_t blk = (size_t)T * a->D;
  const lc_buf pk = lc_buf_part(buf, 0, blk * x->hp, src.dt);
  LC_TRY(sel_pack(x, pk, src, T, s));
  return lc_buf_alltoall(x->head, pk, dst, blk);
}

// One stage's exchange token -> head layout: nt tensors, each packed into `send` and posted
// as a non-blocking all-to-all landing in `recv` (head layout, one tensor after another).
typedef struct {
  int nt;
  lc_buf src[5];
  hsel sel[5];
} stage_in;
static lc_status post_in(attn2d *x, const stage_in *io, lc_buf send, lc_buf recv, int T) {
  size_t off = 0;
  x->n_inflight = 0;
  for (int m = 0; m < io->nt; m++) {
    const size_t blk = (size_t)T * io->sel[m].per * x->ring.D, n = blk * x->hp;
    const lc_buf sd = lc_buf_view(send, off, n), rv = lc_buf_view(recv, off, n);
    LC_TRY(sel_pack(x, sd, io->src[m], T, io->sel[m]));
    LC_TRY(lc_buf_ialltoall(x->head, sd, rv, blk, &x->inflight[x->n_inflight++]));
    off += n;
  }
  return LC_OK;
}
static lc_status wait_in(attn2d *x) {
  lc_status st = LC_OK;
  for (int i = 0; i < x->n_inflight; i++) {
    lc_status s2 = lc_buf_wait(x->head, &x->inflight[i]);
    if (st == LC_OK) st = s2;
  }
  x->n_inflight = 0;
  return st;
}

// Stage c's tensors: forward q, k, v; backward q, out, dout, k, v (k, v unless shared).
static stage_in stage_of(const attn2d *x, const lc_attn *a, const hchunk *h, int c, lc_buf q, lc_buf o, lc_buf dout,
                         lc_buf k, lc_buf v) {
  stage_in io;
  memset(&io, 0, sizeof io);
  const lc_buf qs[3] = {q, o, dout};
  for (int m = 0; m < 3; m++)
    if (lc_buf_ok(qs[m])) io.src[io.nt] = qs[m], io.sel[io.nt++] = sel_q(x, a, c);
  for (int m = 0; m < 2 && !h->shared; m++) io.src[io.nt] = m ? v : k, io.sel[io.nt++] = sel_kv(x, a, h, c);
  return io;
}

// The buffers of a chunked call: one communication block (chunk_comm_bytes).
typedef struct {
  lc_buf set[2];   // head-layout sets of two stages (the pass's dtype): stage c lands in set[c % 2]
  lc_buf send;     // send buffer of a set (the pass's dtype)
  lc_buf o, buf;   // forward: the ring's out; backward: dq (F32). buf: exchange buffer (U8, [Tc,N,D] floats)
  lc_buf dk, dv, dk_sum, dv_sum; // backward: a stage's dk, dv; shared: sums over stages (F32)
  lc_buf ks, vs;   // the shared kv head (the pass's dtype)
  lc_buf comm;
} chunk_bufs;
static lc_status chunk_alloc(lc_backend *be, const hchunk *h, int bwd, int bf16, chunk_bufs *b) {
  memset(b, 0, sizeof *b);
  const lc_dtype dt = bf16 ? LC_DT_BF16 : LC_DT_F32, f = LC_DT_F32;
  const size_t set = set_vals(h, bwd);
  LC_TRY(lc_buf_alloc(be, LC_MEM_COMM, LC_DT_U8, chunk_comm_bytes(h, bwd, bf16), 0, "Ulysses head-chunk buffers",
                      &b->comm));
  size_t at = 0; // floats, then bytes: carved as chunk_comm_bytes says
  b->o = lc_buf_part(b->comm, 0, h->nq, f), at += h->nq;
  if (bwd) {
    b->dk = lc_buf_part(b->comm, lc_bytes(f, at), dkv_vals(h), f);
    b->dv = lc_buf_part(b->comm, lc_bytes(f, at + dkv_vals(h)), dkv_vals(h), f), at += 2 * dkv_vals(h);
    if (h->shared) {
      b->dk_sum = lc_buf_part(b->comm, lc_bytes(f, at), h->nsh, f);
      b->dv_sum = lc_buf_part(b->comm, lc_bytes(f, at + h->nsh), h->nsh, f), at += 2 * h->nsh;
    }
  }
  if (!bwd) b->buf = lc_buf_part(b->comm, lc_bytes(f, at), lc_bytes(f, h->nq), LC_DT_U8), at += h->nq;
  const size_t p = lc_bytes(f, at);
  b->send = lc_buf_part(b->comm, p, set, dt);
  b->set[0] = lc_buf_part(b->comm, p + lc_bytes(dt, set), set, dt);
  b->set[1] = lc_buf_part(b->comm, p + lc_bytes(dt, 2 * set), set, dt);
  if (h->shared) {
    b->ks = lc_buf_part(b->comm, p + lc_bytes(dt, 3 * set), h->nsh, dt);
    b->vs = lc_buf_part(b->comm, p + lc_bytes(dt, 3 * set + h->nsh), h->nsh, dt);
  }
  return LC_OK;
}

// The ring's LSE of stage c: heads [cN, cN + N) of the [k][Hl][Lc] array (lse_stride apart).
static lc_buf stage_lse(const attn2d *x, const hchunk *h, lc_buf lse, int c) {
  const size_t Lc = (size_t)x->ring.layout->Lc, at = (size_t)c * h->N * Lc;
  return lc_buf_view(lse, at, lse.n - at);
}

static lc_status fwd_chunked(lc_attn *a, const lc_attn_in *in, lc_buf out, lc_buf lse, lc_buf q, lc_buf k, lc_buf v, int T) {
  attn2d *x = a->ctx;
  const hchunk h = chunk_of(x, T);
  const int bf16 = in->bf16;
  chunk_bufs b;
  LC_TRY(chunk_alloc(a->be, &h, 0, bf16, &b));
  lc_status st = LC_OK;
  if (h.shared) { // the one kv head every stage uses: exchanged once, kept for all stages
    st = shared_kv_in(x, a, b.ks, k, T, b.buf);
    if (st == LC_OK) st = shared_kv_in(x, a, b.vs, v, T, b.buf);
  }
  const lc_buf none = {0};
  stage_in io = stage_of(x, a, &h, 0, q, none, none, k, v);
  if (st == LC_OK) st = post_in(x, &io, b.send, b.set[0], T);
  for (int c = 0; c < h.nc && st == LC_OK; c++) {
    st = wait_in(x);
    if (st != LC_OK) break;
    const lc_buf qh = lc_buf_view(b.set[c % 2], 0, h.nq);
    const lc_buf kh = h.shared ? b.ks : lc_buf_view(b.set[c % 2], h.nq, h.nkv);
    const lc_buf vh = h.shared ? b.vs : lc_buf_view(b.set[c % 2], h.nq + h.nkv, h.nkv);
    if (c + 1 < h.nc) { // the next stage's exchange runs while this stage's ring computes
      io = stage_of(x, a, &h, c + 1, q, none, none, k, v);
      st = post_in(x, &io, b.send, b.set[(c + 1) % 2], T);
    }
    if (st == LC_OK) st = lc_ring_fwd(&x->ring, b.o, stage_lse(x, &h, lse, c), qh, kh, vh);
    if (st == LC_OK) st = back_exchange(x, out, b.o, T, sel_q(x, a, c), b.buf, bf16); // bf16: rounded
  }
  lc_status s2 = wait_in(x); // nothing in flight on an error either
  lc_buf_free(&b.comm);
  return st != LC_OK ? st : s2;
}

// A buffer's bytes (U8), for the exchanges' staging.
static lc_buf bytes_of(lc_buf b) { return lc_buf_part(b, 0, lc_buf_bytes(b), LC_DT_U8); }

static lc_status bwd_chunked(lc_attn *a, const lc_attn_in *in, lc_buf dq, lc_buf dk, lc_buf dv, lc_buf dout, lc_buf out, lc_buf lse, lc_buf q,
                             lc_buf k, lc_buf v, int T) {
  attn2d *x = a->ctx;
  const hchunk h = chunk_of(x, T);
  chunk_bufs b;
  LC_TRY(chunk_alloc(a->be, &h, 1, in->bf16, &b));
  lc_status st = LC_OK;
  if (h.shared) {
    st = shared_kv_in(x, a, b.ks, k, T, bytes_of(b.set[0])); // (set 0 is filled after this)
    if (st == LC_OK) st = shared_kv_in(x, a, b.vs, v, T, bytes_of(b.set[0]));
  }
  // q, k, v, out and dout hold bf16 values in bf16 and travel as bf16; dq, dk, dv are fp32
  // sums and travel as fp32.
  stage_in io = stage_of(x, a, &h, 0, q, out, dout, k, v);
  if (st == LC_OK) st = post_in(x, &io, b.send, b.set[0], T);
  for (int c = 0; c < h.nc && st == LC_OK; c++) {
    st = wait_in(x);
    if (st != LC_OK) break;
    const lc_buf s = b.set[c % 2];
    const lc_buf qh = lc_buf_view(s, 0, h.nq), oh = lc_buf_view(s, h.nq, h.nq), doh = lc_buf_view(s, 2 * h.nq, h.nq);
    const lc_buf kh = h.shared ? b.ks : lc_buf_view(s, 3 * h.nq, h.nkv);
    const lc_buf vh = h.shared ? b.vs : lc_buf_view(s, 3 * h.nq + h.nkv, h.nkv);
    if (c + 1 < h.nc) {
      io = stage_of(x, a, &h, c + 1, q, out, dout, k, v);
      st = post_in(x, &io, b.send, b.set[(c + 1) % 2], T);
    }
    // Shared kv head: stage 0 writes the sums, later stages add theirs (in stage order).
    const lc_buf dkh = h.shared && c == 0 ? b.dk_sum : b.dk, dvh = h.shared && c == 0 ? b.dv_sum : b.dv;
    if (st == LC_OK) st = lc_ring_bwd(&x->ring, b.o, dkh, dvh, doh, oh, stage_lse(x, &h, lse, c), qh, kh, vh);
    if (st == LC_OK && h.shared && c > 0) {
      st = lc_be_add(b.dk_sum, b.dk);
      if (st == LC_OK) st = lc_be_add(b.dv_sum, b.dv);
    }
    // The exchanges back land in this stage's set, read by its ring and not refilled before
    // the next stage posts the one after it.
    const lc_buf xb = bytes_of(s);
    if (st == LC_OK) st = back_exchange(x, dq, b.o, T, sel_q(x, a, c), xb, 0);
    if (st == LC_OK && !h.shared) st = back_exchange(x, dk, b.dk, T, sel_kv(x, a, &h, c), xb, 0);
    if (st == LC_OK && !h.shared) st = back_exchange(x, dv, b.dv, T, sel_kv(x, a, &h, c), xb, 0);
  }
  if (st == LC_OK && h.shared) st = back_exchange(x, dk, b.dk_sum, T, sel_kv(x, a, &h, 0), bytes_of(b.set[0]), 0);
  if (st == LC_OK && h.shared) st = back_exchange(x, dv, b.dv_sum, T, sel_kv(x, a, &h, 0), bytes_of(b.set[0]), 0);
  lc_status s2 = wait_in(x);
  lc_buf_free(&b.comm);
  return st != LC_OK ? st : s2;
}

static lc_status fwd_2d(lc_attn *a, const lc_attn_in *in, lc_buf out, lc_buf saved, lc_buf q, lc_buf k, lc_buf v, int T) {
  attn2d *x = a->ctx;
  ring_for_pass(x, a, in);
  const lc_buf lse = lc_buf_part(saved, 0, sz_lse(x, T), LC_DT_F32);
  const int h16 = in->bf16; // q, k, v, out in 2 bytes (attn.h)
  const lc_dtype dt = h16 ? LC_DT_BF16 : LC_DT_F32;
  lc_buf work = {0}, pack = {0};
  if (h16) // bf16: the ring's fp32 output (hp 1: the token layout), rounded into out
    LC_TRY(lc_buf_alloc(a->be, LC_MEM_SCRATCH, LC_DT_U8, heads_scratch_bytes(x, T, 1), 0,
                        x->hp == 1 ? "ring output (fp32)" : "Ulysses head-layout out (fp32)", &work));
  lc_status st = LC_OK;
  if (x->hp == 1) {
    const lc_buf o32 = h16 ? lc_buf_part(work, 0, sz_q(x, T), LC_DT_F32) : out;
    st = lc_ring_fwd(&x->ring, o32, lse, q, k, v);
    if (st == LC_OK && h16) st = lc_be_bf16_pack(out, o32);
    lc_buf_free(&work);
    return st;
  }
  if (chunked(x)) {
    lc_buf_free(&work);
    return fwd_chunked(a, in, out, lse, q, k, v, T);
  }
  // Pack buffer (largest exchange) + expanded kv when replicating (the memory model's order:
  // the head-layout out first, then this block).
  st = lc_buf_alloc(a->be, LC_MEM_COMM, LC_DT_U8, fwd_comm_bytes(x, T, h16), 0, "Ulysses all-to-all buffer", &pack);
  if (st != LC_OK) {
    lc_buf_free(&work);
    return st;
  }
  const heads h = heads_of(x, T, saved, work, h16);
  const size_t pb = lc_bytes(LC_DT_F32, sz_pack(x, T));
  const lc_buf pk = lc_buf_part(pack, 0, pb, LC_DT_U8);
  const lc_buf exp = x->rep > 1 ? lc_buf_part(pack, pb, sz_exp(x, T), dt) : (lc_buf){0};
  st = a2a_fwd(x, h.q, q, T, x->Hl, pk, dt);
  for (int m = 0; m < 2 && st == LC_OK; m++) {
    lc_buf src = m == 0 ? k : v;
    if (x->rep > 1) {
      st = kv_expand(exp, src, T, a->Hkv, x->rep, a->D);
      src = exp;
    }
    if (st == LC_OK) st = a2a_fwd(x, m == 0 ? h.k : h.v, src, T, x->Hkvl, pk, dt);
  }
  // q, k, v arrived into their kept slots, where the ring reads them
  if (st == LC_OK) st = lc_ring_fwd(&x->ring, h.of, lse, h.q, h.k, h.v);
  if (st == LC_OK && h16) st = lc_be_bf16_pack(h.o, h.of); // the output, rounded, kept in 2 bytes
  if (st == LC_OK) st = a2a_bwd(x, out, h.o, T, x->Hl, pk, dt);
  lc_buf_free(&pack);
  lc_buf_free(&work);
  return st;
}

static lc_status bwd_2d(lc_attn *a, const lc_attn_in *in, lc_buf dq, lc_buf dk, lc_buf dv, lc_buf dout, lc_buf out, lc_buf saved, lc_buf q,
                        lc_buf k, lc_buf v, int T) {
  attn2d *x = a->ctx;
  ring_for_pass(x, a, in);
  const lc_buf lse = lc_buf_part(saved, 0, sz_lse(x, T), LC_DT_F32);
  if (x->hp == 1) return lc_ring_bwd(&x->ring, dq, dk, dv, dout, out, lse, q, k, v);
  if (chunked(x)) return bwd_chunked(a, in, dq, dk, dv, dout, out, lse, q, k, v, T);
  const size_t nq = sz_q(x, T), nkv = sz_kv(x, T), ne = sz_exp(x, T);
  const lc_dtype f = LC_DT_F32;
  // dqh [Tc,Hl,D]; dkh, dvh [Tc,Hkvl,D]; pack; expanded kv gradient; doh (bwd_comm_bytes).
  lc_buf b;
  LC_TRY(lc_buf_alloc(a->be, LC_MEM_COMM, LC_DT_U8, bwd_comm_bytes(x, T, in->bf16), 0, "Ulysses backward buffers", &b));
  const heads h = heads_of(x, T, saved, (lc_buf){0}, in->bf16); // read in place by the ring
  const lc_buf dqh = lc_buf_part(b, 0, nq, f), dkh = lc_buf_part(b, lc_bytes(f, nq), nkv, f),
               dvh = lc_buf_part(b, lc_bytes(f, nq + nkv), nkv, f),
               pk = lc_buf_part(b, lc_bytes(f, nq + 2 * nkv), lc_bytes(f, nq), LC_DT_U8),
               exp = ne ? lc_buf_part(b, lc_bytes(f, 2 * nq + 2 * nkv), ne, f) : (lc_buf){0},
               doh = lc_buf_part(b, lc_bytes(f, 2 * nq + 2 * nkv + ne), nq, in->bf16 ? LC_DT_BF16 : f);
  // dout arrives as bf16 values in bf16 (the layer rounds it) and travels and stays as bf16;
  // dq, dk and dv are fp32 sums and travel as fp32.
  lc_status st = a2a_fwd(x, doh, dout, T, x->Hl, pk, doh.dt);
  if (st == LC_OK) st = lc_ring_bwd(&x->ring, dqh, dkh, dvh, doh, h.o, lse, h.q, h.k, h.v);
  if (st == LC_OK) st = a2a_bwd(x, dq, dqh, T, x->Hl, pk, f);
  for (int m = 0; m < 2 && st == LC_OK; m++) {
    const lc_buf dst = m == 0 ? dk : dv, src = m == 0 ? dkh : dvh;
    if (x->rep > 1) {
      st = a2a_bwd(x, exp, src, T, x->Hkvl, pk, f);
      if (st == LC_OK) st = kv_reduce(dst, exp, T, a->Hkv, x->rep, a->D);
    } else {
      st = a2a_bwd(x, dst, src, T, x->Hkvl, pk, f);
    }
  }
  lc_buf_free(&b);
  return st;
}

lc_status lc_attn_2d_init(lc_attn *a, lc_comm *head, lc_comm *ctx, int window, long S, int chunks,
                          int Hq, int Hkv, int D, int head_chunk) {
  memset(a, 0, sizeof *a);
  int hp = head->size;
  LC_TRY(lc_attn_2d_head_chunk_check(hp, Hq, Hkv, head_chunk));
  attn2d *x = calloc(1, sizeof *x);
  if (!x) return lc_fail(LC_ENOMEM, "out of memory for the attention strategy");
  lc_status st = lc_seq_layout_init(&x->def, S, ctx->size, hp, chunks);
  if (st != LC_OK) {
    free(x);
    return st;
  }
  x->head = head;
  heads_2d(x, hp, Hq, Hkv, D, head_chunk);
  x->ring.ctx = ctx;
  x->ring.window = window;
  x->ring.S = S;
  x->ring.scale = 1.0f / sqrtf((float)D);
  x->ring.poll_rows = poll_rows();
  a->name = hp > 1 && ctx->size > 1 ? "2d" : hp > 1 ? "ulysses" : "ring";
  a->Hq = Hq;
  a->Hkv = Hkv;
  a->D = D;
  a->saved_bytes = saved_bytes_2d;
  a->fwd = fwd_2d;
  a->bwd = bwd_2d;
  a->dkv_late = dkv_late(x);
  a->ctx = x;
  return LC_OK;
}

int lc_attn_2d_dkv_late(int hp, int Hq, int Hkv, int head_chunk) {
  if (hp < 1 || Hq % hp != 0) return 0;
  attn2d x;
  memset(&x, 0, sizeof x);
  heads_2d(&x, hp, Hq, Hkv, 1, head_chunk);
  return dkv_late(&x);
}

void lc_attn_2d_free(lc_attn *a) {
  if (a->ctx) lc_seq_layout_free(&((attn2d *)a->ctx)->def);
  free(a->ctx);
  a->ctx = NULL;
}

double lc_attn_2d_compute_seconds(const lc_attn *a) { return ((const attn2d *)a->ctx)->ring.compute_seconds; }

int lc_attn_2d_head_chunk(const lc_attn *a) { return ((const attn2d *)a->ctx)->N; }

double lc_attn_2d_bytes_per_layer(const lc_attn *a, int T, int fwd_passes, int bf16) {
  const attn2d *x = a->ctx;
  const double D = a->D, f = 4.0, h = bf16 ? 2.0 : 4.0; // fp32; what bf16 mode sends as bf16
  double bytes = 0;
  if (x->hp > 1) { // q, k, v and out (forward); dout, dq, dk, dv (backward): (hp-1) peers each
    const double per = (x->hp - 1) * (double)T * D;
    bytes += fwd_passes * per * (2.0 * x->Hl + 2.0 * x->Hkvl) * h;
    bytes += per * (x->Hl * h + (x->Hl + 2.0 * x->Hkvl) * f);
    if (chunked(x)) bytes += per * (2.0 * x->Hl + 2.0 * x->Hkvl) * h; // backward re-exchanges q, k, v, out
  }
  const int cp = x->ring.ctx->size, w = x->ring.window, outer = cp / w;
  if (cp > 1) { // head chunks: each stage's ring moves its kv heads (a shared one in every stage)
    const double kv_heads = (double)x->ring.Hkv * (x->Hl / x->N);
    double blk = 2.0 * (double)(x->ring.S / cp) * kv_heads * D; // values of one k/v (or dk/dv) block
    double fwd_hops = cp - 1;                                  // outer*(w-1) inner + (outer-1) outer
    double kv_bwd = cp - 1, d_bwd = (w > 1 ? cp : 0) + (outer - 1); // k/v again; dk/dv around, partials home
    bytes += ((fwd_passes * fwd_hops + kv_bwd) * h + d_bwd * f) * blk;
  }
  return bytes;
}
