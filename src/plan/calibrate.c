// `longctx calibrate`: the rates of plan/rates.h measured on this machine (calibrate.h).
#include "plan/calibrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "backend/cpu/flash/flash.h"
#include "backend/backend.h"
#include "core/arena.h"
#include "core/rng.h"
#include "core/timer.h"
#include "backend/cpu/kern/kernels.h"
#include "backend/cpu/ops/ops.h"

static const int dims[LC_RATE_NDIM] = {64, 256, 1024, 4096};
static const int hds[LC_RATE_NHD] = {32, 64, 128};

// Fills x[n] with uniform values rounded to bf16 (exact inputs for either precision).
static void fill(lc_rng *g, float *x, size_t n) {
  lc_rng_fill_uniform(g, x, (long)n, -1.0f, 1.0f);
  lc_bf16_round(x, n);
}

// Seconds of the median of `reps` (<= 9) calls after a warm-up: a training step meets
// the machine as it usually is, not at its best moment (the fastest call made every rate
// optimistic by 5-15% on a shared 2-core machine).
static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
#define MEDIAN_OF(reps, call, out)                      \
  do {                                                  \
    double t_[9];                                       \
    const int n_ = (reps) < 9 ? (reps) : 9;             \
    call;                                               \
    for (int r_ = 0; r_ < n_; r_++) {                   \
      double t0_ = lc_now();                            \
      call;                                             \
      t_[r_] = lc_now() - t0_;                          \
    }                                                   \
    qsort(t_, (size_t)n_, sizeof t_[0], cmp_double);    \
    (out) = t_[n_ / 2];                                 \
  } while (0)

static void say(void (*progress)(const char *, double), lc_comm *w, const char *what, double frac) {
  if (progress && w->rank == 0) progress(what, frac);
}

// A GEMM's rate by row count (issue 36: the step runs 160-row loss tiles, 1024-token MLP tiles
// and whole 16K sequences): K = N = 512 (a quarter of the work of 1024: the factor, not the
// rate, is what is kept), forward and backward, rows 64 .. 16384, each over the rate at 1024
// rows measured in the same sweep.
static lc_status row_factors(lc_comm *world, lc_arena *arena, lc_rng *g, lc_rates *out) {
  static const int rows[LC_RATE_NROWS] = {64, 256, 1024, 4096, 16384};
  const int K = 512, N = 512, TM = rows[LC_RATE_NROWS - 1];
  float *x = malloc(sizeof(float) * (size_t)TM * K), *y = malloc(sizeof(float) * (size_t)TM * N),
        *o = malloc(sizeof(float) * (size_t)TM * K), *w = malloc(sizeof(float) * (size_t)K * N),
        *dw = calloc((size_t)K * N, sizeof(float));
  uint16_t *x16 = malloc(2 * (size_t)TM * K), *y16 = malloc(2 * (size_t)TM * N), *w16 = malloc(2 * (size_t)K * N);
  lc_status st = lc_comm_agree(world, x && y && o && w && dw && x16 && y16 && w16 ? LC_OK
                                      : lc_fail(LC_ENOMEM, "out of memory for calibration"));
  if (st == LC_OK) {
    fill(g, x, (size_t)TM * K), fill(g, y, (size_t)TM * N), fill(g, w, (size_t)K * N);
    lc_bf16_pack(x16, x, (size_t)TM * K), lc_bf16_pack(y16, y, (size_t)TM * N), lc_bf16_pack(w16, w, (size_t)K * N);
  }
  for (int b = 0; b < 2 && st == LC_OK; b++) {
    lc_mm mm = {.bf16 = b, .arena = arena};
    const lc_act xa = b ? lc_act_of(x16, LC_DT_BF16) : lc_act_f32(x), ya = b ? lc_act_of(y16, LC_DT_BF16) : lc_act_f32(y);
    const lc_act wa = b ? lc_act_of(w16, LC_DT_BF16) : lc_act_f32(w);
    double rf[LC_RATE_NROWS], rb[LC_RATE_NROWS];
    for (int i = 0; i < LC_RATE_NROWS && st == LC_OK; i++) {
      const int T = rows[i];
      const int reps = T <= 1024 ? 7 : 3;
      double tf = 1, tb = 1;
      lc_barrier(world);
      lc_status gs = LC_OK;
      MEDIAN_OF(reps, gs = lc_matmul_fwd(&mm, o, LC_DT_F32, xa, wa, T, K, N), tf);
      if (gs == LC_OK) MEDIAN_OF(reps, gs = lc_matmul_bwd(&mm, o, dw, ya, xa, wa, T, K, N, 0), tb);
      st = lc_comm_agree(world, gs);
      rf[i] = 2.0 * T * K * N / tf, rb[i] = 4.0 * T * K * N / tb;
    }
    for (int i = 0; i < LC_RATE_NROWS && st == LC_OK; i++)
      out->gemm_rows[b][0][i] = rf[i] / rf[2], out->gemm_rows[b][1][i] = rb[i] / rb[2];
  }
  free(x), free(y), free(o), free(w), free(dw), free(x16), free(y16), free(w16);
  return st;
}

// The attention kernel's rate by key length (issue 36: K and V of 16K keys leave the caches
// the 1K calibration fits in): a block of 128 queries at the end of 1K .. 64K keys (causal,
// 4 query and 2 kv heads of 64), forward and backward, each over its rate at 1K. The FLOPs
// are the visible pairs of the block (the time model counts the same).
static lc_status length_factors(lc_comm *world, lc_arena *arena, lc_rng *g, lc_rates *out) {
  static const int lens[LC_RATE_NLEN] = {1024, 4096, 16384, 65536};
  const int TQ = 128, HQ = 4, HKV = 2, D = 64, TK = lens[LC_RATE_NLEN - 1];
  const size_t nq = (size_t)TQ * HQ * D, nk = (size_t)TK * HKV * D;
  float *q = malloc(4 * nq), *o = malloc(4 * nq), *dout = malloc(4 * nq), *dq = malloc(4 * nq), *k = malloc(4 * nk),
        *v = malloc(4 * nk), *dk = malloc(4 * nk), *dv = malloc(4 * nk), *lse = malloc(4 * (size_t)TQ * HQ),
        *delta = malloc(4 * (size_t)TQ * HQ);
  uint16_t *q16 = malloc(2 * nq), *o16 = malloc(2 * nq), *do16 = malloc(2 * nq), *k16 = malloc(2 * nk), *v16 = malloc(2 * nk);
  lc_status st = lc_comm_agree(world, q && o && dout && dq && k && v && dk && dv && lse && delta && q16 && o16 && do16 &&
                                              k16 && v16
                                          ? LC_OK
                                          : lc_fail(LC_ENOMEM, "out of memory for calibration"));
  if (st == LC_OK) {
    fill(g, q, nq), fill(g, dout, nq), fill(g, k, nk), fill(g, v, nk);
    lc_bf16_pack(q16, q, nq), lc_bf16_pack(do16, dout, nq), lc_bf16_pack(k16, k, nk), lc_bf16_pack(v16, v, nk);
  }
  for (int b = 0; b < 2 && st == LC_OK; b++) {
    double rf[LC_RATE_NLEN], rb[LC_RATE_NLEN];
    for (int i = 0; i < LC_RATE_NLEN && st == LC_OK; i++) {
      const int L = lens[i];
      // k/v of L keys: the arrays' first L rows ([T, Hkv, D]: rows are contiguous)
      const lc_attn_shape sh = {.Tq = TQ, .Tk = L, .Hq = HQ, .Hkv = HKV, .D = D, .q_start = L - TQ, .k_start = 0,
                                .causal = 1, .scale = 0.125f, .bf16 = b, .q16 = b, .kv16 = b, .out16 = b};
      const double fl = 4.0 * D * HQ * ((double)TQ * (L - TQ) + TQ * (TQ + 1) / 2.0);
      double tf = 1, tb = 1;
      lc_barrier(world);
      lc_status ks = LC_OK;
      MEDIAN_OF(5, ks = lc_flash_fwd(b ? (void *)o16 : o, lse, b ? (const void *)q16 : q, b ? (const void *)k16 : k,
                                     b ? (const void *)v16 : v, &sh, arena),
                tf);
      lc_attn_shape sb = sh;
      sb.out16 = 0;
      if (ks == LC_OK) {
        if (b) lc_bf16_unpack(o, o16, nq);
        lc_attn_delta(delta, dout, o, TQ, HQ, D);
        memset(dq, 0, 4 * nq), memset(dk, 0, 4 * nk), memset(dv, 0, 4 * nk);
        MEDIAN_OF(5, ks = lc_flash_bwd(dq, dk, dv, b ? (const void *)do16 : dout, b ? (const void *)q16 : q,
                                       b ? (const void *)k16 : k, b ? (const void *)v16 : v, lse, delta, &sb, arena),
                  tb);
      }
      st = lc_comm_agree(world, ks);
      rf[i] = fl / tf, rb[i] = 2.5 * fl / tb;
    }
    for (int i = 0; i < LC_RATE_NLEN && st == LC_OK; i++)
      out->flash_len[b][0][i] = rf[i] / rf[0], out->flash_len[b][1][i] = rb[i] / rb[0];
  }
  free(q), free(o), free(dout), free(dq), free(k), free(v), free(dk), free(dv), free(lse), free(delta);
  free(q16), free(o16), free(do16), free(k16), free(v16);
  return st;
}

lc_status lc_calibrate(lc_comm *world, int threads, lc_rates *out, void (*progress)(const char *what, double frac)) {
  lc_rates_default(out, threads); // the link terms of a one-rank run stay the defaults
  out->ranks = world->size, out->threads = threads;
  lc_arena arena;
  lc_arena_init(&arena, 0);
  lc_rng g;
  lc_rng_seed(&g, 1234 + (uint64_t)world->rank);
  const int T = LC_RATE_GEMM_T, MAXD = dims[LC_RATE_NDIM - 1];
  float *x = malloc(sizeof(float) * (size_t)T * MAXD), *w = malloc(sizeof(float) * (size_t)MAXD * MAXD);
  float *y = malloc(sizeof(float) * (size_t)T * MAXD), *dx = malloc(sizeof(float) * (size_t)T * MAXD);
  float *dw = malloc(sizeof(float) * (size_t)MAXD * MAXD);
  // A bf16 pass's activation operands and a layer's weights are stored in 2 bytes
  // (model/layer.h, the store's compute copy): x, y and w as bf16.
  uint16_t *x16 = malloc(sizeof(uint16_t) * (size_t)T * MAXD), *y16 = malloc(sizeof(uint16_t) * (size_t)T * MAXD);
  uint16_t *w16 = malloc(sizeof(uint16_t) * (size_t)MAXD * MAXD);
  // Every rank learns of one rank's failure before the first barrier (no rank waits alone).
  lc_status st = lc_comm_agree(world, x && w && y && dx && dw && x16 && y16 && w16 ? LC_OK : lc_fail(LC_ENOMEM, "out of memory for calibration"));
  if (st == LC_OK) {
    fill(&g, x, (size_t)T * MAXD), fill(&g, w, (size_t)MAXD * MAXD), fill(&g, y, (size_t)T * MAXD);
    memset(dw, 0, sizeof(float) * (size_t)MAXD * MAXD);
    lc_bf16_pack(x16, x, (size_t)T * MAXD), lc_bf16_pack(y16, y, (size_t)T * MAXD);
    lc_bf16_pack(w16, w, (size_t)MAXD * MAXD);
  }
  // GEMMs: a linear layer's forward (T x K -> N) and its backward (both products).
  for (int b = 0; b < 2 && st == LC_OK; b++) {
    lc_mm mm = {.bf16 = b, .arena = &arena};
    const lc_act xa = b ? lc_act_of(x16, LC_DT_BF16) : lc_act_f32(x), ya = b ? lc_act_of(y16, LC_DT_BF16) : lc_act_f32(y);
    const lc_act wa = b ? lc_act_of(w16, LC_DT_BF16) : lc_act_f32(w); // a layer's weights: the store's 2-byte copy
    for (int i = 0; i < LC_RATE_NDIM && st == LC_OK; i++)
      for (int j = 0; j < LC_RATE_NDIM && st == LC_OK; j++) {
        const int K = dims[i], N = dims[j];
        char what[64];
        snprintf(what, sizeof what, "GEMM %s %d x %d x %d", b ? "bf16" : "fp32", T, K, N);
        say(progress, world, what, (b * 16 + i * 4 + j) / 64.0);
        const double fl = 2.0 * T * K * N;
        const int reps = fl < 2e9 ? 5 : 3;
        double tf = 1, tb = 1;
        lc_barrier(world);
        lc_status gs = LC_OK;
        MEDIAN_OF(reps, gs = lc_matmul_fwd(&mm, dx, LC_DT_F32, xa, wa, T, K, N), tf);
        if (gs == LC_OK) MEDIAN_OF(reps, gs = lc_matmul_bwd(&mm, dx, dw, ya, xa, wa, T, K, N, 0), tb);
        if ((st = lc_comm_agree(world, gs)) != LC_OK) break;
        out->gemm[b][0][i][j] = fl / tf;
        out->gemm[b][1][i][j] = 2 * fl / tb;
      }
  }
  // Attention kernels: one causal GQA sequence of 1024 tokens, 4 query and 2 kv heads.
  const int AT = 1024, HQ = 4, HKV = 2;
  for (int b = 0; b < 2 && st == LC_OK; b++)
    for (int h = 0; h < LC_RATE_NHD && st == LC_OK; h++) {
      const int D = hds[h];
      char what[64];
      snprintf(what, sizeof what, "attention %s head dim %d", b ? "bf16" : "fp32", D);
      say(progress, world, what, 0.5 + (b * 3 + h) / 12.0);
      lc_attn a;
      lc_attn_local_init(&a, HQ, HKV, D);
      const size_t nq = (size_t)AT * HQ * D, nk = (size_t)AT * HKV * D;
      float *dq = dx, *dk = dx + nq, *dv = dx + nq + nk;
      // q, k, v, out, dout: fp32, or 2 bytes in a bf16 pass (attn/attn.h)
      const size_t es = b ? sizeof(uint16_t) : sizeof(float);
      char *xs = b ? (char *)x16 : (char *)x, *ys = b ? (char *)y16 : (char *)y, *ws = b ? (char *)w16 : (char *)w;
      void *q = xs, *k = xs + es * nq, *v = xs + es * (nq + nk), *o = ys, *dout = ws;
      void *saved = malloc(a.saved_bytes(&a, AT, b) + 64);
      st = lc_comm_agree(world, saved ? LC_OK : lc_fail(LC_ENOMEM, "out of memory for calibration"));
      if (st != LC_OK) {
        free(saved);
        break;
      }
      lc_seq_layout L;
      double work = 0;
      if (lc_seq_layout_init(&L, AT, 1, 1, 2) == LC_OK) lc_seq_layout_work(&L, NULL, &work), lc_seq_layout_free(&L);
      const double fl = 4.0 * D * HQ * work;
      double tf, tb;
      lc_barrier(world);
      lc_backend cpu; // the strategy runs on the backend: the host arrays, wrapped
      lc_backend_cpu_init(&cpu, &arena);
      a.be = &cpu;
      const lc_attn_in ain = {.bf16 = b};
      const lc_dtype dt = b ? LC_DT_BF16 : LC_DT_F32;
#define WR(p, n, t) lc_buf_wrap_host(&cpu, (p), (n), (t))
      const lc_buf bq = WR(q, nq, dt), bk = WR(k, nk, dt), bv = WR(v, nk, dt), bo = WR(o, nq, dt), bdo = WR(dout, nq, dt),
                   bs = WR(saved, a.saved_bytes(&a, AT, b), LC_DT_U8), bdq = WR(dq, nq, LC_DT_F32),
                   bdk = WR(dk, nk, LC_DT_F32), bdv = WR(dv, nk, LC_DT_F32);
#undef WR
      MEDIAN_OF(5, st = a.fwd(&a, &ain, bo, bs, bq, bk, bv, AT), tf);
      MEDIAN_OF(5, st = a.bwd(&a, &ain, bdq, bdk, bdv, bdo, bo, bs, bq, bk, bv, AT), tb);
      lc_backend_close(&cpu);
      free(saved);
      st = lc_comm_agree(world, st);
      out->flash[b][0][h] = fl / tf;
      out->flash[b][1][h] = 2.5 * fl / tb;
    }
  if (st == LC_OK) {
    say(progress, world, "GEMMs by row count", 0.66);
    st = row_factors(world, &arena, &g, out);
  }
  if (st == LC_OK) {
    say(progress, world, "attention by key length", 0.7);
    st = length_factors(world, &arena, &g, out);
  }
  // Element-wise, optimizer and loss rates on the step's own kernels (the CPU backend over
  // the host arrays), at sizes that leave the cache, each as the bytes the time model counts
  // for that work over the seconds it took:
  //  - a layer's element-wise passes, forward and backward, at T = 1024 tokens of a C 1024,
  //    HQ 1024, HKV 256, F 4096 layer: two RMSNorms, RoPE on q and k, two residual adds,
  //    SwiGLU, and their backwards (the model counts 4 x (10 C + 3 HQ + 2 HKV + 4 F) bytes
  //    per token forward and twice that backward: about 370 MB here);
  //  - AdamW and the gradient's sum of squares over 8M parameters (28 + 8 bytes each);
  //  - the loss tile over [256, 16384] logits (12 bytes per logit).
  // (An earlier element-wise rate, y += x over 16 MiB, was up to 5x what these passes reach
  // on a 2-core VM: the optimizer and the element-wise terms came out that short.)
  if (st == LC_OK) {
    say(progress, world, "element-wise, optimizer and loss passes", 0.75);
    lc_backend cpu;
    lc_backend_cpu_init(&cpu, &arena);
#define WR(p, n, t) lc_buf_wrap_host(&cpu, (p), (n), (t))
    const int ET = 1024, C = 1024, EHQ = 1024, EHKV = 256, F = 4096, D = 64;
    const size_t tc = (size_t)ET * C, tf = (size_t)ET * F, half = (size_t)ET * (D / 2);
    // w (64 MiB): the [T,C] activations, q/k and the RoPE tables; x, y, dx: SwiGLU's g, u, h
    float *a0 = w, *a1 = w + tc, *qb = w + 2 * tc, *kb = qb + (size_t)ET * EHQ, *cs = kb + (size_t)ET * EHKV,
          *sn = cs + half, *nw = sn + half, *rs = nw + C;
    for (size_t i = 0; i < half; i++) cs[i] = 0.8f, sn[i] = 0.6f;
    for (int i = 0; i < C; i++) nw[i] = 1.0f;
    const lc_buf A0 = WR(a0, tc, LC_DT_F32), A1 = WR(a1, tc, LC_DT_F32), Q = WR(qb, (size_t)ET * EHQ, LC_DT_F32),
                 K = WR(kb, (size_t)ET * EHKV, LC_DT_F32), CS = WR(cs, half, LC_DT_F32), SN = WR(sn, half, LC_DT_F32),
                 NW = WR(nw, (size_t)C, LC_DT_F32), RS = WR(rs, (size_t)ET, LC_DT_F32), G = WR(x, tf, LC_DT_F32),
                 U = WR(y, tf, LC_DT_F32), H = WR(dx, tf, LC_DT_F32);
    double te, to, tl;
    lc_barrier(world);
    // forward, then backward's passes (the model counts twice the forward's bytes there):
    // two RMSNorm backwards with their weight gradient, RoPE backward on q and k, SwiGLU's
    // backward, the residual gradient's adds and the zeroed gradient buffers
    // (w, 16M floats: a2 past the tables; dw, 16M floats: SwiGLU's two gradients)
    float *dwn = rs + ET, *a2 = w + 8 * tc;
    const lc_buf DW = WR(dwn, (size_t)C, LC_DT_F32), A2 = WR(a2, tc, LC_DT_F32), DGt = WR(dw, tf, LC_DT_F32),
                 DUt = WR(dw + tf, tf, LC_DT_F32);
    memset(a2, 0, sizeof(float) * tc);
    MEDIAN_OF(5,
              (lc_be_rmsnorm_fwd(A1, RS, A0, NW, ET, C, 1e-5f), lc_be_rope(Q, CS, SN, ET, EHQ / D, D, 0),
               lc_be_rope(K, CS, SN, ET, EHKV / D, D, 0), lc_be_add(A0, A1), lc_be_rmsnorm_fwd(A1, RS, A0, NW, ET, C, 1e-5f),
               lc_be_swiglu_fwd(H, G, U), lc_be_add(A0, A1),
               lc_be_zero(DW), lc_be_swiglu_bwd(DGt, DUt, H, G, U), lc_be_rmsnorm_bwd(A2, DW, A1, A0, NW, RS, ET, C, 0),
               lc_be_add(A2, A1), lc_be_rope(Q, CS, SN, ET, EHQ / D, D, 1), lc_be_rope(K, CS, SN, ET, EHKV / D, D, 1),
               lc_be_rmsnorm_bwd(A2, DW, A1, A0, NW, RS, ET, C, 0), lc_be_zero(A1)),
              te);
    out->ew_bw = 3 * 4.0 * ET * (10.0 * C + 3.0 * EHQ + 2.0 * EHKV + 4.0 * F) / te;
    // AdamW over 8M parameters: p, g in w, m, v in dw (32 MiB each), then the norm's sum
    const size_t np = (size_t)8 << 20;
    memset(dw, 0, sizeof(float) * 2 * np);
    const lc_buf P = WR(w, np, LC_DT_F32), Gr = WR(w + np, np, LC_DT_F32), M = WR(dw, np, LC_DT_F32),
                 V = WR(dw + np, np, LC_DT_F32);
    double acc = 0;
    const lc_buf ACC = WR(&acc, 1, LC_DT_F64);
    const lc_adamw_args aa = {.wd = 0.1f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .lr = 1e-9f, .step_size = 1e-9f,
                              .inv_sqrt_bc2 = 1.0f};
    MEDIAN_OF(5, (lc_be_sumsq_acc(ACC, Gr), lc_be_adamw(P, Gr, M, V, &aa)), to);
    out->optim_bw = 36.0 * np / to;
    // the loss tile: [256, 16384] logits in x, targets in y's first ints
    const int LT = 256, LV = 16384;
    int *tg = (int *)(void *)y;
    for (int t = 0; t < LT; t++) tg[t] = (t * 7919) % LV;
    double lacc[2] = {0, 0};
    fill(&g, x, (size_t)LT * LV);
    const lc_buf LG = WR(x, (size_t)LT * LV, LC_DT_F32), TG = WR(tg, (size_t)LT, LC_DT_I32), LA = WR(lacc, 2, LC_DT_F64);
    MEDIAN_OF(5, lc_be_xent_tile(LG, TG, LT, LV, 1.0f, LA, 0), tl); // (training counts no misses)
    out->loss_bw = 12.0 * LT * LV / tl;
#undef WR
    lc_backend_close(&cpu);
  }
  // The network: each collective over the world at 8 bytes and 4 MiB per rank; latency from
  // the small one, bandwidth from the difference (lc_rates_coll_s's formula).
  if (st == LC_OK && world->size > 1) {
    const int W = world->size;
    const size_t big = (size_t)1 << 20; // floats per rank (4 MiB)
    float *s = x, *rcv = y;
    for (int c = 0; c < LC_COLL_N && st == LC_OK; c++) {
      char what[64];
      snprintf(what, sizeof what, "network %s over %d ranks", lc_coll_name((lc_coll)c), W);
      say(progress, world, what, 0.8 + 0.04 * c);
      double t[2];
      for (int z = 0; z < 2; z++) {
        const size_t m = z ? big : 2;
        lc_req rq = {0};
        double best = 1e30;
        for (int rep = 0; rep < (z ? 3 : 20); rep++) {
          lc_barrier(world);
          const double t0 = lc_now();
          switch ((lc_coll)c) {
          case LC_COLL_P2P: { // ring neighbours exchange one block each
            lc_req a = {0}, bq = {0};
            st = lc_irecv(world, rcv, m, LC_DT_F32, (world->rank + W - 1) % W, 9, &a);
            if (st == LC_OK) st = lc_isend(world, s, m, LC_DT_F32, (world->rank + 1) % W, 9, &bq);
            if (st == LC_OK) st = lc_wait(world, &a);
            if (st == LC_OK) st = lc_wait(world, &bq);
            break;
          }
          case LC_COLL_ALLTOALL: st = lc_alltoall(world, s, rcv, m / W + 1, LC_DT_F32); break;
          case LC_COLL_ALLGATHER: st = lc_allgather(world, s, rcv, m / W + 1, LC_DT_F32); break;
          case LC_COLL_REDUCE_SCATTER:
            st = lc_ireduce_scatter_sum(world, s, rcv, m / W + 1, LC_DT_F32, &rq);
            if (st == LC_OK) st = lc_wait(world, &rq);
            break;
          case LC_COLL_ALLREDUCE: memcpy(rcv, s, m * 4), st = lc_allreduce_sum(world, rcv, m, LC_DT_F32); break;
          default: break;
          }
          const double d = lc_now() - t0;
          best = d < best ? d : best;
        }
        t[z] = best;
      }
      const double steps = c == LC_COLL_P2P ? 1 : c == LC_COLL_ALLREDUCE ? 2.0 * (W - 1) : W - 1;
      const double frac = c == LC_COLL_P2P ? 1 : c == LC_COLL_ALLREDUCE ? 2.0 * (W - 1) / W : (double)(W - 1) / W;
      const double bytes = 4.0 * big;
      out->coll[c].lat_s = t[0] / steps;
      out->coll[c].bw = bytes * frac / (t[1] - t[0] > 1e-9 ? t[1] - t[0] : 1e-9);
    }
  }
  // The profile is rank 0's (every rank measured under the same load).
  if (st == LC_OK && world->size > 1) st = lc_bcast(world, out, sizeof *out, LC_DT_U8, 0);
  free(x), free(w), free(y), free(dx), free(dw), free(x16), free(y16), free(w16);
  lc_arena_trim(&arena);
  say(progress, world, "done", 1.0);
  return st;
}
