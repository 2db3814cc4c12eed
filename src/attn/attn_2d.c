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
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "core/dtype.h"
#include "attn/ring.h"
#include "ops/kernels.h"

typedef struct {
  lc_comm *head;
  int hp, Hl, Hkvl, rep; // rep: replicas of each kv head (hp / Hkv when hp > Hkv, else 1)
  lc_ring ring;
  lc_seq_layout def;     // the layout used when a pass sets none
} attn2d;

// The ring follows the pass's sequence: its layout (or the default) and bounds.
static void ring_for_pass(attn2d *x, const lc_attn *a) {
  x->ring.extra_poll = a->poll;
  x->ring.extra_arg = a->poll_arg;
  x->ring.layout = a->layout ? a->layout : &x->def;
  x->ring.lo = a->lo;
  x->ring.bf16 = a->bf16;
}

#define POLL_ROWS 256 // q rows per ring kernel call (MPI is polled between calls)
static int test_poll_rows; // lc_attn_2d_test_set_poll_rows (0: POLL_ROWS)
void lc_attn_2d_test_set_poll_rows(int rows) { test_poll_rows = rows > 0 ? rows : 0; }
static int poll_rows(void) { return test_poll_rows ? test_poll_rows : POLL_ROWS; }

// Heads per rank after the all-to-all: Hl query heads, Hkvl kv heads (replicated rep times
// when hp > Hkv). x->ring gets the head counts and D; the rest is set by lc_attn_2d_init.
static void heads_2d(attn2d *x, int hp, int Hq, int Hkv, int D) {
  x->hp = hp;
  x->Hl = Hq / hp;
  x->rep = hp > Hkv ? hp / Hkv : 1;
  x->Hkvl = hp > Hkv ? 1 : Hkv / hp;
  x->ring.Hq = x->Hl;
  x->ring.Hkv = x->Hkvl;
  x->ring.D = D;
}

static size_t sz_q(const attn2d *x, int T) { return (size_t)T * x->hp * x->Hl * x->ring.D; }
static size_t sz_kv(const attn2d *x, int T) { return (size_t)T * x->hp * x->Hkvl * x->ring.D; }
static size_t sz_lse(const attn2d *x, int T) { return (size_t)T * x->hp * x->Hl; }
// Forward pack buffer (largest exchange) + kv expanded to hp slots when replicating.
static size_t sz_pack(const attn2d *x, int T) { return sz_q(x, T) > sz_kv(x, T) ? sz_q(x, T) : sz_kv(x, T); }
static size_t sz_exp(const attn2d *x, int T) { return x->rep > 1 ? (size_t)T * x->hp * x->ring.D : 0; }
// Backward: doh, dqh [Tc,Hl,D]; dkh, dvh [Tc,Hkvl,D]; pack [Tc,Hl,D]; expanded kv gradient.
static size_t sz_bwd(const attn2d *x, int T) { return 3 * sz_q(x, T) + 2 * sz_kv(x, T) + sz_exp(x, T); }

// Values of the head-layout q, k, v and output kept for backward (hp > 1).
static size_t sz_heads(const attn2d *x, int T) { return x->hp > 1 ? 2 * sz_q(x, T) + 2 * sz_kv(x, T) : 0; }
// Saved: the LSE (fp32) and, for hp > 1, the head-layout q, k, v, out; those are bf16 values
// in bf16 and kept in 2 bytes (widened into fp32 scratch, sz_heads, around each ring call).
static size_t saved_bytes_of(const attn2d *x, int T, int bf16) {
  return lc_bytes(LC_DT_F32, sz_lse(x, T)) + lc_bytes(bf16 ? LC_DT_BF16 : LC_DT_F32, sz_heads(x, T));
}
static size_t heads_scratch_bytes(const attn2d *x, int T, int bf16) { return bf16 ? lc_bytes(LC_DT_F32, sz_heads(x, T)) : 0; }

static size_t saved_bytes_2d(const lc_attn *a, int T) { return saved_bytes_of(a->ctx, T, a->bf16); }

lc_status lc_attn_2d_mem(int hp, int cp, int window, long S, int chunks, int Hq, int Hkv, int D,
                         int threads, int bf16, lc_attn_mem *m) {
  memset(m, 0, sizeof *m);
  if (hp < 1 || cp < 1 || window < 1 || cp % window != 0 || Hq % hp != 0 || chunks < 2 || chunks % 2 ||
      (hp % Hkv != 0 && Hkv % hp != 0) || S <= 0 || S % (2L * cp * hp) != 0 || S % ((long)chunks * cp) != 0)
    return lc_fail(LC_EINVAL, "attention layout hp %d x cp %d (window %d) does not fit S %ld with %d heads "
                   "and %d kv heads: see longctx train --help for the layout rules", hp, cp, window, S, Hq, Hkv);
  attn2d x;
  memset(&x, 0, sizeof x);
  heads_2d(&x, hp, Hq, Hkv, D);
  const int T = (int)(S / ((long)cp * hp));
  lc_ring_mem(cp, window, S, chunks, x.Hl, x.Hkvl, D, poll_rows(), threads, bf16, m);
  m->saved = saved_bytes_of(&x, T, bf16);
  if (hp > 1) {
    m->fwd_comm += lc_bytes(LC_DT_F32, sz_pack(&x, T) + sz_exp(&x, T));
    m->bwd_comm += lc_bytes(LC_DT_F32, sz_bwd(&x, T));
    m->fwd_scratch += heads_scratch_bytes(&x, T, bf16);
    m->bwd_scratch += heads_scratch_bytes(&x, T, bf16);
  }
  return LC_OK;
}

// [T, hp*Hs, D] (this rank's tokens, all head slots) -> [hp*T, Hs, D] (context tokens, one slice).
// bf16: src holds bf16 values and travels as bf16 (pack holds the narrowed rows and, after
// them, what arrives; the same bytes as one fp32 copy), widened into dst. keep (may be
// NULL): where what arrives lands instead, kept in 2 bytes for backward.
static lc_status a2a_fwd(attn2d *x, float *dst, const float *src, int T, int Hs, float *pack, int bf16,
                         uint16_t *keep) {
  const int hp = x->hp, D = x->ring.D;
  const size_t row = (size_t)Hs * D, n = (size_t)hp * T * row;
  if (bf16) {
    uint16_t *p16 = (uint16_t *)(void *)pack, *r16 = keep ? keep : p16 + n;
    for (int p = 0; p < hp; p++)
      for (int t = 0; t < T; t++) lc_bf16_pack(p16 + ((size_t)p * T + t) * row, src + ((size_t)t * hp + p) * row, row);
    LC_TRY(lc_alltoall(x->head, p16, r16, (size_t)T * row, LC_DT_BF16));
    lc_bf16_unpack(dst, r16, n);
    return LC_OK;
  }
  for (int p = 0; p < hp; p++)
    for (int t = 0; t < T; t++)
      memcpy(pack + ((size_t)p * T + t) * row, src + ((size_t)t * hp + p) * row, lc_bytes(LC_DT_F32, row));
  return lc_alltoall(x->head, pack, dst, (size_t)T * row, LC_DT_F32);
}

// Inverse: [hp*T, Hs, D] -> [T, hp*Hs, D] (bf16 as a2a_fwd).
static lc_status a2a_bwd(attn2d *x, float *dst, const float *src, int T, int Hs, float *pack, int bf16) {
  const int hp = x->hp, D = x->ring.D;
  const size_t row = (size_t)Hs * D, n = (size_t)hp * T * row;
  if (bf16) {
    uint16_t *p16 = (uint16_t *)(void *)pack, *r16 = p16 + n;
    lc_bf16_pack(p16, src, n);
    LC_TRY(lc_alltoall(x->head, p16, r16, (size_t)T * row, LC_DT_BF16));
    for (int p = 0; p < hp; p++)
      for (int t = 0; t < T; t++) lc_bf16_unpack(dst + ((size_t)t * hp + p) * row, r16 + ((size_t)p * T + t) * row, row);
    return LC_OK;
  }
  LC_TRY(lc_alltoall(x->head, src, pack, (size_t)T * row, LC_DT_F32));
  for (int p = 0; p < hp; p++)
    for (int t = 0; t < T; t++)
      memcpy(dst + ((size_t)t * hp + p) * row, pack + ((size_t)p * T + t) * row, lc_bytes(LC_DT_F32, row));
  return LC_OK;
}

// kv [T, Hkv, D] -> [T, hp, D] with slot s holding kv head s / rep.
static void kv_expand(float *dst, const float *src, int T, int Hkv, int rep, int D) {
  for (int t = 0; t < T; t++)
    for (int s = 0; s < Hkv * rep; s++)
      memcpy(dst + ((size_t)t * Hkv * rep + s) * D, src + ((size_t)t * Hkv + s / rep) * D, lc_bytes(LC_DT_F32, D));
}

// Sum of the replicas' gradients: [T, hp, D] -> [T, Hkv, D].
static void kv_reduce(float *dst, const float *src, int T, int Hkv, int rep, int D) {
  for (int t = 0; t < T; t++)
    for (int h = 0; h < Hkv; h++) {
      float *o = dst + ((size_t)t * Hkv + h) * D;
      const float *in = src + ((size_t)t * Hkv * rep + (size_t)h * rep) * D;
      memcpy(o, in, lc_bytes(LC_DT_F32, D));
      for (int r = 1; r < rep; r++) lc_kern()->add(o, in + (size_t)r * D, (size_t)D);
    }
}

// The head-layout q, k, v, out in `saved` after the LSE: fp32 there, or (bf16) in 2 bytes
// each, with fp32 copies in `work` for the ring.
typedef struct {
  float *q, *k, *v, *o;
  uint16_t *q16, *k16, *v16, *o16;
} heads;
static heads heads_of(const attn2d *x, int T, void *saved, float *work, int bf16) {
  heads h;
  memset(&h, 0, sizeof h);
  const size_t nq = sz_q(x, T), nkv = sz_kv(x, T);
  float *f = bf16 ? work : (float *)saved + sz_lse(x, T);
  h.q = f, h.k = f + nq, h.v = h.k + nkv, h.o = h.v + nkv;
  if (bf16) {
    h.q16 = (uint16_t *)(void *)((float *)saved + sz_lse(x, T));
    h.k16 = h.q16 + nq, h.v16 = h.k16 + nkv, h.o16 = h.v16 + nkv;
  }
  return h;
}

static lc_status fwd_2d(lc_attn *a, float *out, void *saved, const float *q, const float *k,
                        const float *v, int T, lc_arena *ar) {
  attn2d *x = a->ctx;
  ring_for_pass(x, a);
  float *lse = saved;
  if (x->hp == 1) {
    LC_TRY(lc_ring_fwd(&x->ring, out, lse, q, k, v, ar));
    lc_attn_round_out(a, out, T);
    return LC_OK;
  }
  const int h16 = a->bf16; // q, k, v arrive as bf16 values; the output leaves as one
  // Pack buffer (largest exchange) + expanded kv when replicating; bf16: fp32 head layout.
  size_t npack = sz_pack(x, T);
  float *pack = lc_alloc(ar, LC_MEM_COMM, lc_bytes(LC_DT_F32, npack + sz_exp(x, T)), "Ulysses all-to-all buffer");
  float *work = h16 ? lc_alloc(ar, LC_MEM_SCRATCH, heads_scratch_bytes(x, T, 1), "Ulysses head-layout q/k/v/out") : NULL;
  if (!pack || (h16 && !work)) {
    lc_free(ar, pack);
    return LC_ENOMEM;
  }
  heads h = heads_of(x, T, saved, work, h16);
  lc_status st = a2a_fwd(x, h.q, q, T, x->Hl, pack, h16, h.q16);
  const float *ks = k, *vs = v;
  float *exp = pack + npack;
  for (int m = 0; m < 2 && st == LC_OK; m++) {
    const float *src = m == 0 ? ks : vs;
    if (x->rep > 1) {
      kv_expand(exp, src, T, a->Hkv, x->rep, a->D);
      src = exp;
    }
    st = a2a_fwd(x, m == 0 ? h.k : h.v, src, T, x->Hkvl, pack, h16, m == 0 ? h.k16 : h.v16);
  }
  if (st == LC_OK) st = lc_ring_fwd(&x->ring, h.o, lse, h.q, h.k, h.v, ar);
  if (st == LC_OK && h16) { // q, k, v arrived into their kept slots; the output is made here
    lc_bf16_round(h.o, sz_q(x, T));
    lc_bf16_pack(h.o16, h.o, sz_q(x, T));
  }
  if (st == LC_OK) st = a2a_bwd(x, out, h.o, T, x->Hl, pack, h16);
  lc_free(ar, work);
  lc_free(ar, pack);
  return st;
}

static lc_status bwd_2d(lc_attn *a, float *dq, float *dk, float *dv, const float *dout,
                        const float *out, const void *saved, const float *q, const float *k,
                        const float *v, int T, lc_arena *ar) {
  attn2d *x = a->ctx;
  ring_for_pass(x, a);
  const float *lse = saved;
  if (x->hp == 1) return lc_ring_bwd(&x->ring, dq, dk, dv, dout, out, lse, q, k, v, ar);
  size_t nq = sz_q(x, T), nkv = sz_kv(x, T);
  // doh, dqh [Tc,Hl,D]; dkh, dvh [Tc,Hkvl,D]; pack; expanded kv gradient (sz_bwd).
  float *b = lc_alloc(ar, LC_MEM_COMM, lc_bytes(LC_DT_F32, sz_bwd(x, T)), "Ulysses backward buffers");
  float *work = a->bf16 ? lc_alloc(ar, LC_MEM_SCRATCH, heads_scratch_bytes(x, T, 1), "Ulysses head-layout q/k/v/out") : NULL;
  if (!b || (a->bf16 && !work)) {
    lc_free(ar, b);
    return LC_ENOMEM;
  }
  const heads h = heads_of(x, T, (void *)saved, work, a->bf16);
  if (a->bf16) lc_bf16_unpack(h.q, h.q16, sz_heads(x, T));
  const float *qh = h.q, *kh = h.k, *vh = h.v, *oh = h.o;
  float *doh = b, *dqh = doh + nq, *dkh = dqh + nq, *dvh = dkh + nkv, *pack = dvh + nkv,
        *exp = pack + nq;
  // dout arrives as bf16 values in bf16 (the layer rounds it) and travels as bf16; dq, dk
  // and dv are fp32 sums and travel as fp32.
  lc_status st = a2a_fwd(x, doh, dout, T, x->Hl, pack, a->bf16, NULL);
  if (st == LC_OK) st = lc_ring_bwd(&x->ring, dqh, dkh, dvh, doh, oh, lse, qh, kh, vh, ar);
  if (st == LC_OK) st = a2a_bwd(x, dq, dqh, T, x->Hl, pack, 0);
  for (int m = 0; m < 2 && st == LC_OK; m++) {
    float *dst = m == 0 ? dk : dv;
    const float *src = m == 0 ? dkh : dvh;
    if (x->rep > 1) {
      st = a2a_bwd(x, exp, src, T, x->Hkvl, pack, 0);
      if (st == LC_OK) kv_reduce(dst, exp, T, a->Hkv, x->rep, a->D);
    } else {
      st = a2a_bwd(x, dst, src, T, x->Hkvl, pack, 0);
    }
  }
  lc_free(ar, work);
  lc_free(ar, b);
  return st;
}

lc_status lc_attn_2d_init(lc_attn *a, lc_comm *head, lc_comm *ctx, int window, long S, int chunks,
                          int Hq, int Hkv, int D) {
  memset(a, 0, sizeof *a);
  attn2d *x = calloc(1, sizeof *x);
  if (!x) return lc_fail(LC_ENOMEM, "out of memory for the attention strategy");
  int hp = head->size;
  lc_status st = lc_seq_layout_init(&x->def, S, ctx->size, hp, chunks);
  if (st != LC_OK) {
    free(x);
    return st;
  }
  x->head = head;
  heads_2d(x, hp, Hq, Hkv, D);
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
  a->ctx = x;
  return LC_OK;
}

void lc_attn_2d_free(lc_attn *a) {
  if (a->ctx) lc_seq_layout_free(&((attn2d *)a->ctx)->def);
  free(a->ctx);
  a->ctx = NULL;
}

double lc_attn_2d_compute_seconds(const lc_attn *a) { return ((const attn2d *)a->ctx)->ring.compute_seconds; }

double lc_attn_2d_bytes_per_layer(const lc_attn *a, int T, int fwd_passes, int bf16) {
  const attn2d *x = a->ctx;
  const double D = a->D, f = 4.0, h = bf16 ? 2.0 : 4.0; // fp32; what bf16 mode sends as bf16
  double bytes = 0;
  if (x->hp > 1) { // q, k, v and out (forward); dout, dq, dk, dv (backward): (hp-1) peers each
    const double per = (x->hp - 1) * (double)T * D;
    bytes += fwd_passes * per * (2.0 * x->Hl + 2.0 * x->Hkvl) * h;
    bytes += per * (x->Hl * h + (x->Hl + 2.0 * x->Hkvl) * f);
  }
  const int cp = x->ring.ctx->size, w = x->ring.window, outer = cp / w;
  if (cp > 1) {
    double blk = 2.0 * (double)(x->ring.S / cp) * x->Hkvl * D; // values of one k/v (or dk/dv) block
    double fwd_hops = cp - 1;                                  // outer*(w-1) inner + (outer-1) outer
    double kv_bwd = cp - 1, d_bwd = (w > 1 ? cp : 0) + (outer - 1); // k/v again; dk/dv around, partials home
    bytes += ((fwd_passes * fwd_hops + kv_bwd) * h + d_bwd * f) * blk;
  }
  return bytes;
}
