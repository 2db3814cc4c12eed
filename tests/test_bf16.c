// bf16 precision (DESIGN.md "Precision", layer.h), checked on one process:
//  1. the array conversions equal the scalar rule (round to nearest even) on random and
//     special values;
//  2. the rounding points of the layer: forward activations the GEMMs and attention read
//     hold bf16 values; backward weight gradients are the fp32 sums of bf16 operands
//     (checked against a double reference from the rounded operands);
//  3. a bf16 model's loss and gradients are within bf16 rounding of the fp32 model's (which
//     test_model and test_golden check against finite differences and transformers), and
//     differ from them by at least bf16's resolution (bf16 is really applied);
//  4. every checkpoint policy x tile size reproduces the plain bf16 path;
//  5. layer checkpoints in bf16 take at most 0.55x the bytes of fp32 (full and selective),
//     measured in the arena and as the memory model predicts.
#include <string.h>

#include "attn/attn.h"
#include "backend/cpu/flash/flash.h"
#include "core/dtype.h"
#include "model/arch.h"
#include "model/layer.h"
#include "model/model.h"
#include "backend/cpu/ops/ops.h"
#include "testmodel.h"
#include "testutil.h"
#include "backend/cpu/kern/kernels.h"

static lc_arena arena;

static int is_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (u & 0xffffu) == 0;
}
static long count_not_bf16(const float *x, size_t n) {
  long k = 0;
  for (size_t i = 0; i < n; i++) k += !is_bf16(x[i]);
  return k;
}

// ---------------------------------------------------------------- 1. conversions
static void test_arrays(void) {
  const size_t n = 1 << 20;
  float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
  uint16_t *h = malloc(2 * n);
  lc_rng r;
  lc_rng_seed(&r, 3);
  for (size_t i = 0; i < n; i++) {
    uint32_t u = (uint32_t)lc_rng_u64(&r); // every bit pattern: NaNs, infinities, subnormals, ties
    if (i % 7 == 0) u = (u & 0xffff0000u) | 0x8000u; // exact ties
    if (i % 11 == 0) u = (u & 0xffff0000u) | 0x7fffu; // just below a tie
    memcpy(&x[i], &u, 4);
  }
  const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 3.0e38f, 3.4028235e38f, 1e-45f, -1e-40f};
  memcpy(x, sp, sizeof sp);
  lc_bf16_pack(h, x, n);
  long bad_pack = 0, bad_round = 0, bad_unpack = 0;
  for (size_t i = 0; i < n; i++) bad_pack += h[i] != lc_f32_to_bf16(x[i]);
  lc_bf16_round_copy(y, x, n);
  float *z = malloc(sizeof(float) * n);
  memcpy(z, x, sizeof(float) * n);
  lc_bf16_round(z, n);
  CHECK(!memcmp(y, z, sizeof(float) * n), "lc_bf16_round and lc_bf16_round_copy differ");
  free(z);
  lc_bf16_unpack(x, h, n);
  for (size_t i = 0; i < n; i++) {
    uint32_t a, b;
    memcpy(&a, &y[i], 4);
    memcpy(&b, &x[i], 4);
    bad_round += a != b;
    float w = lc_bf16_to_f32(h[i]);
    bad_unpack += memcmp(&w, &x[i], 4) != 0;
  }
  CHECK(bad_pack == 0, "lc_bf16_pack differs from lc_f32_to_bf16 on %ld of %zu values", bad_pack, n);
  CHECK(bad_round == 0, "lc_bf16_round_copy differs from widen(narrow(x)) on %ld of %zu values", bad_round, n);
  CHECK(bad_unpack == 0, "lc_bf16_unpack differs from lc_bf16_to_f32 on %ld values", bad_unpack);
  // In place (what a bf16 all-gather into the upper half of an fp32 buffer needs): sizes
  // below and far above the parallel chunk threshold, odd chunk boundaries included.
  const size_t sizes[] = {2, 1000, 65536 * 2 + 6, n};
  for (int s = 0; s < 4; s++) {
    const size_t m = sizes[s];
    float *b = malloc(sizeof(float) * m);
    memcpy((uint16_t *)(void *)b + m, h, 2 * m);
    lc_bf16_unpack_inplace(b, m);
    long bad = 0;
    for (size_t i = 0; i < m; i++) bad += memcmp(&b[i], &x[i], 4) != 0;
    CHECK(bad == 0, "lc_bf16_unpack_inplace(%zu): %ld values differ", m, bad);
    free(b);
  }
  free(x), free(y), free(h);
}

// ---------------------------------------------------------------- shared set-up
// Loss (mean over counted tokens) and gradients of one pass on one process.
static double run(lc_model *m, const lc_model_opts *o, const int *tok, const int *tgt, const int *pos, int T) {
  lc_attn attn;
  lc_attn_local_init(&attn, m->cfg.n_heads, m->cfg.n_kv_heads, m->cfg.head_dim);
  int counted = 0;
  for (int t = 0; t < T; t++) counted += tgt[t] >= 0;
  double loss = 0;
  lc_model_zero_grads(m);
  lc_status st = lc_model_fwd_bwd(m, o, &attn, NULL, tok, tgt, pos, T, 1.0f / counted, 1, &loss);
  CHECK(st == LC_OK, "fwd_bwd failed: %s", lc_errmsg());
  return loss / counted;
}

// ---------------------------------------------------------------- 2. rounding points
// One layer (GQA, untiled MLP) forward and backward with bf16 on, weights rounded first
// (what the store's compute copy holds).
static void test_layer_points(void) {
  lc_config cfg;
  lc_config_preset(&cfg, "tiny");
  cfg.n_layers = 1;
  lc_model m;
  CHECK(lc_model_create(&m, &cfg, &arena) == LC_OK, "create: %s", lc_errmsg());
  lc_t_randomize(&m, 21);
  lc_bf16_round(m.params, m.n_flat);
  const int T = 29, C = cfg.dim, F = cfg.ffn, D = cfg.head_dim;
  const int HQ = cfg.n_heads * D, HKV = cfg.n_kv_heads * D;
  lc_attn attn;
  lc_attn_local_init(&attn, cfg.n_heads, cfg.n_kv_heads, D);
  lc_layer_acts a;
  memset(&a, 0, sizeof a);
  // ln1, q, k, v, att, ln2, gate, up, h are stored as 2-byte bf16 in a bf16 pass (layer.h);
  // the rest fp32 (the buffers are fp32-sized: room for either).
  float *buf[13];
  size_t sz[13] = {(size_t)T * C, T, (size_t)T * HQ, (size_t)T * HKV, (size_t)T * HKV, (size_t)T * HQ,
                   attn.saved_bytes(&attn, T, 1) / 4 + 1, (size_t)T * C, (size_t)T * C, T, (size_t)T * F,
                   (size_t)T * F, (size_t)T * F};
  for (int i = 0; i < 13; i++) buf[i] = calloc(sz[i], sizeof(float));
  lc_backend *be = m.ps.be; // the host arrays, wrapped for the store's (CPU) backend
#define WB(p, n, t) lc_buf_wrap_host(be, (p), (n), (t))
  const lc_dtype b16 = LC_DT_BF16, f32 = LC_DT_F32;
  a.ln1 = WB(buf[0], sz[0], b16), a.rstd1 = WB(buf[1], sz[1], f32), a.q = WB(buf[2], sz[2], b16);
  a.k = WB(buf[3], sz[3], b16), a.v = WB(buf[4], sz[4], b16), a.att = WB(buf[5], sz[5], b16);
  a.saved = WB(buf[6], attn.saved_bytes(&attn, T, 1), LC_DT_U8), a.x_mid = WB(buf[7], sz[7], f32);
  a.ln2 = WB(buf[8], sz[8], b16), a.rstd2 = WB(buf[9], sz[9], f32), a.gate = WB(buf[10], sz[10], b16);
  a.up = WB(buf[11], sz[11], b16), a.h = WB(buf[12], sz[12], b16);
  const lc_layer_weights *w0 = &m.ps.w.layer[0];
  const float *Wq = lc_buf_host(w0->wq), *Wk = lc_buf_host(w0->wk), *Wv = lc_buf_host(w0->wv),
              *Wln1 = lc_buf_host(w0->ln1), *Wln2 = lc_buf_host(w0->ln2), *Wg = lc_buf_host(w0->wgate);
  float *x = malloc(sizeof(float) * T * C), *y = malloc(sizeof(float) * T * C), *dx = malloc(sizeof(float) * T * C);
  float *cs = malloc(sizeof(float) * T * D / 2), *sn = malloc(sizeof(float) * T * D / 2);
  int pos[29];
  for (int t = 0; t < T; t++) pos[t] = t;
  lc_rope_table(cs, sn, pos, T, D, cfg.rope_theta);
  lc_rng r;
  lc_rng_seed(&r, 8);
  lc_rng_fill_normal(&r, x, (long)T * C, 1.0f);
  lc_bf16_round(x, (size_t)T * C); // a layer input is a bf16 value (the previous output)
  lc_rng_fill_normal(&r, dx, (long)T * C, 1.0f); // an fp32 residual gradient
  const lc_attn_in ain = {.bf16 = 1};
  lc_layer_ctx ctx = {.cfg = &cfg, .attn = &attn, .attn_in = &ain, .rope_cos = WB(cs, (size_t)T * D / 2, f32),
                      .rope_sin = WB(sn, (size_t)T * D / 2, f32), .T = T, .mlp_tile = 0, .bf16 = 1,
                      .be = be};
  const size_t TC = (size_t)T * C;
  CHECK(lc_layer_fwd(&ctx, w0, &a, WB(x, TC, f32), WB(y, TC, f32), 0) == LC_OK, "layer fwd: %s", lc_errmsg());
  CHECK(count_not_bf16(y, (size_t)T * C) == 0, "bf16 layer: the layer output is not bf16 values");
  // q, k, v and att are stored in 2 bytes. q, k = round(rope(ln1 @ W^T)), v = round(ln1 @ Wv^T)
  // against a double reference: the rounding's 2^-8 of the value (x 1.01: of the computed
  // one) plus the fp32 sums (C * 2^-24 of sum |terms|, each rotated by |cos| or |sin|) and
  // RoPE's fp32 products and difference (3 * 2^-24 of |a cos| + |b sin|). A missing or
  // misplaced rotation, a wrong head or a wrong weight is off by O(1).
  {
    const uint16_t *l1 = (const void *)buf[0];
    const struct {
      const char *name;
      const uint16_t *p;
      const float *W;
      int H, rope;
    } pj[] = {{"q", (const void *)buf[2], Wq, cfg.n_heads, 1}, {"k", (const void *)buf[3], Wk, cfg.n_kv_heads, 1},
              {"v", (const void *)buf[4], Wv, cfg.n_kv_heads, 0}};
    for (int j = 0; j < 3; j++) {
      double worst = 0;
      for (int t = 0; t < T; t++)
        for (int hd = 0; hd < pj[j].H * D; hd++) {
          const int i = hd % D, half = D / 2, lo = i < half;
          const int r0 = hd, r1 = lo ? hd + half : hd - half; // this row and its RoPE partner
          double s[2] = {0, 0}, sa[2] = {0, 0};
          for (int k = 0; k < C; k++) {
            const double xv = lc_bf16_to_f32(l1[(size_t)t * C + k]);
            const double p0 = xv * pj[j].W[(size_t)r0 * C + k], p1 = xv * pj[j].W[(size_t)r1 * C + k];
            s[0] += p0, sa[0] += fabs(p0), s[1] += p1, sa[1] += fabs(p1);
          }
          double ref = s[0], bound = 1.01 * C * ldexp(sa[0], -24);
          if (pj[j].rope) {
            const double cc = cs[(size_t)t * half + i % half], sn_ = sn[(size_t)t * half + i % half];
            ref = lo ? s[0] * cc - s[1] * sn_ : s[0] * cc + s[1] * sn_;
            bound = 1.01 * C * ldexp(sa[0] * fabs(cc) + sa[1] * fabs(sn_), -24) +
                    3 * ldexp(fabs(s[0] * cc) + fabs(s[1] * sn_), -24);
          }
          const double got = lc_bf16_to_f32(pj[j].p[(size_t)t * pj[j].H * D + hd]);
          const double e = fabs(got - ref) - (1.01 * ldexp(fabs(ref) + bound, -8) + bound);
          if (e > worst) worst = e;
        }
      CHECK(worst <= 0, "bf16 layer: %s (2 bytes) is not the rounded projection%s: exceeds the bound by %.3g", pj[j].name,
            pj[j].rope ? " after RoPE" : "", worst);
    }
    // att: exactly the rounded fp32 attention of the stored q, k, v (the kernels read 2-byte
    // inputs bit-identically: test_kernels).
    float *qf = malloc(sizeof(float) * T * HQ), *kf = malloc(sizeof(float) * T * HKV), *vf = malloc(sizeof(float) * T * HKV);
    float *of = malloc(sizeof(float) * T * HQ), *lf = malloc(sizeof(float) * T * cfg.n_heads);
    lc_bf16_unpack(qf, (const void *)buf[2], (size_t)T * HQ), lc_bf16_unpack(kf, (const void *)buf[3], (size_t)T * HKV);
    lc_bf16_unpack(vf, (const void *)buf[4], (size_t)T * HKV);
    lc_attn_shape as = {.Tq = T, .Tk = T, .Hq = cfg.n_heads, .Hkv = cfg.n_kv_heads, .D = D, .causal = 1,
                        .scale = 1.0f / sqrtf((float)D), .bf16 = 1};
    CHECK(lc_flash_fwd(of, lf, qf, kf, vf, &as, &arena) == LC_OK, "reference attention");
    const uint16_t *at16 = (const void *)buf[5];
    long nb = 0;
    for (size_t i = 0; i < (size_t)T * HQ; i++) nb += at16[i] != lc_f32_to_bf16(of[i]);
    CHECK(nb == 0, "bf16 layer: %ld values of att (2 bytes) are not the rounded fp32 attention", nb);
    free(qf), free(kf), free(vf), free(of), free(lf);
  }
  // fp32 stays fp32: the residual after attention.
  CHECK(count_not_bf16(buf[7], (size_t)T * C) > T * C / 2, "x_mid was rounded; it is an fp32 sum");
  // The 2-byte activations hold the rounded fp32 results: ln1 and ln2 exactly the rounded
  // fp32 norms (same arithmetic), h exactly the rounded SwiGLU of the stored gate and up,
  // gate = round(ln2 @ Wg^T) against a double reference within half an ulp of bf16 (8
  // significant bits: 2^-8 relative at most) plus fp32 summation (C * 2^-24 of sum |terms|,
  // itself within the rounding's 2^-8 of the rounded value: x 1.01).
  float *ref = malloc(sizeof(float) * T * (C > F ? C : F)), *rs = malloc(sizeof(float) * T);
  const uint16_t *ln1 = (const void *)buf[0], *ln2 = (const void *)buf[8], *gate = (const void *)buf[10],
                 *up = (const void *)buf[11], *h = (const void *)buf[12];
  lc_rmsnorm_fwd(ref, rs, x, Wln1, T, C, cfg.norm_eps);
  long bad = 0;
  for (size_t i = 0; i < (size_t)T * C; i++) bad += ln1[i] != lc_f32_to_bf16(ref[i]);
  lc_rmsnorm_fwd(ref, rs, buf[7], Wln2, T, C, cfg.norm_eps);
  for (size_t i = 0; i < (size_t)T * C; i++) bad += ln2[i] != lc_f32_to_bf16(ref[i]);
  CHECK(bad == 0, "bf16 layer: %ld stored norm outputs are not the rounded fp32 norms", bad);
  float gf[1], uf[1], hf[1];
  for (size_t i = 0; i < (size_t)T * F; i++) {
    gf[0] = lc_bf16_to_f32(gate[i]), uf[0] = lc_bf16_to_f32(up[i]);
    lc_swiglu_fwd(hf, gf, uf, 1);
    bad += h[i] != lc_f32_to_bf16(hf[0]);
  }
  CHECK(bad == 0, "bf16 layer: %ld stored h values are not round(silu(gate) * up)", bad);
  double gworst = 0;
  for (int t = 0; t < T; t++)
    for (int n = 0; n < F; n++) {
      double s = 0, sa = 0;
      for (int k = 0; k < C; k++) {
        double p = (double)lc_bf16_to_f32(ln2[(size_t)t * C + k]) * Wg[(size_t)n * C + k];
        s += p, sa += fabs(p);
      }
      double e = fabs(lc_bf16_to_f32(gate[(size_t)t * F + n]) - s) - (ldexp(fabs(s), -8) + 1.01 * C * ldexp(sa, -24));
      if (e > gworst) gworst = e;
    }
  CHECK(gworst <= 0, "bf16 layer: gate is not round(ln2 @ Wg^T): exceeds the bound by %.3g", gworst);
  free(ref), free(rs);

  // Backward: dWdown = round(dx)^T h and dWo = round(dx_mid)^T att, sums of products of
  // bf16 values. The double reference from the same operands differs only by fp32
  // summation: <= ~T * 2^-24 relative to sum |terms| (T = 29 terms). Without the rounding
  // of dx the results differ by ~2^-9 relative: the bound 1e-5 separates the two.
  lc_layer_weights *g = &m.ps.g.layer[0];
  lc_model_zero_grads(&m);
  float *dx0 = malloc(sizeof(float) * T * C);
  memcpy(dx0, dx, sizeof(float) * T * C);
  CHECK(lc_layer_bwd(&ctx, w0, g, &a, WB(x, TC, f32), WB(dx, TC, f32)) == LC_OK, "layer bwd: %s", lc_errmsg());
#undef WB
  const float *gwdown = lc_buf_host(g->wdown), *gwq = lc_buf_host(g->wq);
  lc_bf16_round(dx0, (size_t)T * C);
  double worst = 0;
  for (int n = 0; n < C; n++)
    for (int k = 0; k < F; k++) {
      double s = 0, sa = 0;
      for (int t = 0; t < T; t++) {
        double p = (double)dx0[(size_t)t * C + n] * lc_bf16_to_f32(h[(size_t)t * F + k]);
        s += p, sa += fabs(p);
      }
      double e = fabs(gwdown[(size_t)n * F + k] - s) / (sa + 1e-30);
      if (e > worst) worst = e;
    }
  CHECK(worst <= 1e-5, "dWdown is not round(dx)^T h: worst relative error %.3g", worst);
  // The layer's whole input gradient is finite and the weight gradients of every GEMM are
  // non-zero (each backward GEMM ran).
  double nq = 0, nd = 0;
  for (size_t i = 0; i < (size_t)HQ * C; i++) nq += fabs(gwq[i]);
  for (size_t i = 0; i < (size_t)T * C; i++) nd += isfinite(dx[i]) ? 0 : 1;
  CHECK(nq > 0 && nd == 0, "bf16 layer backward: |dWq| %g, %g non-finite input gradients", nq, nd);
  for (int i = 0; i < 13; i++) free(buf[i]);
  free(x), free(y), free(dx), free(dx0), free(cs), free(sn);
  lc_model_destroy(&m);
}

// ---------------------------------------------------------------- 3. bf16 vs fp32
static void test_vs_fp32(int tied) {
  lc_config cfg;
  lc_config_preset(&cfg, "tiny");
  cfg.tie_embeddings = tied;
  cfg.n_layers = 2;
  lc_model m;
  CHECK(lc_model_create(&m, &cfg, &arena) == LC_OK, "create: %s", lc_errmsg());
  lc_t_randomize(&m, 31 + tied);
  const int T = 53;
  int tok[53], tgt[53], pos[53];
  lc_rng r;
  lc_rng_seed(&r, 17);
  lc_t_make_batch(&r, tok, tgt, pos, T, cfg.vocab);
  lc_model_opts o32 = {LC_CKPT_NONE, 0, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0}, o16 = o32;
  o16.precision = LC_DT_BF16;
  float *p0 = malloc(sizeof(float) * m.n_flat), *g32 = malloc(sizeof(float) * m.n_flat);
  memcpy(p0, m.params, sizeof(float) * m.n_flat);
  double l32 = run(&m, &o32, tok, tgt, pos, T);
  memcpy(g32, m.grads, sizeof(float) * m.n_flat);
  double l16 = run(&m, &o16, tok, tgt, pos, T);
  CHECK(!memcmp(p0, m.params, sizeof(float) * m.n_flat), "a bf16 pass changed the fp32 master weights");
  // Each rounding moves a value by at most 2^-9 relative (~0.1% rms); a loss of ~6 nats
  // through two layers moves by a few 1e-3 at most. Bounds: |dL| <= 2e-2 * L, and >= 1e-7
  // * L (bf16 changed something: fp32 vs fp32 would give exactly 0).
  const double dl = fabs(l16 - l32);
  CHECK(dl <= 2e-2 * fabs(l32) && dl >= 1e-7 * fabs(l32), "tied %d: bf16 loss %.7f vs fp32 %.7f", tied, l16, l32);
  // Gradients per tensor: relative L2 distance <= 5e-2 (a few roundings of ~2^-9 on each
  // path, amplified by the softmax and the norms), and > 1e-4 overall.
  double num = 0, den = 0;
  for (int t = 0; t < m.n_tensors; t++) {
    const lc_param_info *P = &m.table[t];
    double a = 0, b = 0;
    for (size_t j = 0; j < P->numel; j++) {
      double d = (double)m.grads[P->offset + j] - g32[P->offset + j];
      a += d * d, b += (double)g32[P->offset + j] * g32[P->offset + j];
    }
    num += a, den += b;
    CHECK(sqrt(a) <= 5e-2 * sqrt(b) + 1e-12, "tied %d: bf16 gradient of %s: relative L2 distance %.3g", tied,
          P->name, sqrt(a / (b + 1e-30)));
  }
  CHECK(sqrt(num / den) > 1e-4, "tied %d: bf16 gradients equal fp32 ones (%.3g): bf16 not applied", tied,
        sqrt(num / den));
  printf("tied %d: loss fp32 %.7f bf16 %.7f (rel %.2e); gradients relative L2 %.3e\n", tied, l32, l16,
         dl / fabs(l32), sqrt(num / den));
  // The GEMMs read the store's bf16 copy of the weights: master weights that are already
  // bf16 values give the same pass bit for bit.
  float *g16 = malloc(sizeof(float) * m.n_flat);
  memcpy(g16, m.grads, sizeof(float) * m.n_flat);
  lc_bf16_round(m.params, m.n_flat);
  double l16r = run(&m, &o16, tok, tgt, pos, T);
  CHECK(l16r == l16 && !memcmp(g16, m.grads, sizeof(float) * m.n_flat),
        "tied %d: bf16 pass from rounded masters differs (loss %.9g vs %.9g): the weights were not rounded", tied,
        l16r, l16);
  free(g16);
  free(p0), free(g32);
  lc_model_destroy(&m);
}

// ---------------------------------------------------------------- 4. policies
static void test_policies(void) {
  lc_config cfg;
  lc_config_preset(&cfg, "tiny");
  cfg.n_layers = 3;
  lc_model m;
  CHECK(lc_model_create(&m, &cfg, &arena) == LC_OK, "create: %s", lc_errmsg());
  lc_t_randomize(&m, 3);
  const int T = 37;
  int tok[37], tgt[37], pos[37];
  lc_rng r;
  lc_rng_seed(&r, 5);
  lc_t_make_batch(&r, tok, tgt, pos, T, cfg.vocab);
  lc_model_opts ref_o = {LC_CKPT_NONE, 0, 0, 0, 0, 0, LC_DT_BF16, NULL, 0, 0, 0};
  double ref_loss = run(&m, &ref_o, tok, tgt, pos, T);
  float *ref = malloc(sizeof(float) * m.n_flat);
  memcpy(ref, m.grads, sizeof(float) * m.n_flat);
  double gmax = 0;
  for (size_t j = 0; j < m.n_flat; j++) gmax = fmax(gmax, fabs(ref[j]));
  const lc_ckpt_policy pols[] = {LC_CKPT_NONE, LC_CKPT_FULL, LC_CKPT_SELECTIVE};
  const int mts[] = {0, 5, 37}, lts[] = {0, 7};
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++)
      for (int c = 0; c < 2; c++) {
        lc_model_opts o = {pols[a], mts[b], lts[c], 0, 0, 0, LC_DT_BF16, NULL, 0, 0, 0};
        double loss = run(&m, &o, tok, tgt, pos, T);
        // Recomputation repeats the same operations (bit-identical); tiles change GEMM
        // shapes, so an fp32 sum may differ in its last bit and, rarely, round to the
        // neighbouring bf16 value (2^-8 relative for that element). Bounds: loss 1e-4
        // relative, gradients 1e-2 of the largest entry elementwise; untiled policies
        // exactly.
        const int exact = mts[b] == 0 && lts[c] == 0;
        double worst = 0;
        for (size_t j = 0; j < m.n_flat; j++) worst = fmax(worst, fabs(m.grads[j] - ref[j]));
        if (exact)
          CHECK(loss == ref_loss && worst == 0, "bf16 %s untiled: loss %.9g vs %.9g, grads max diff %.3g",
                lc_ckpt_name(pols[a]), loss, ref_loss, worst);
        CHECK(fabs(loss - ref_loss) <= 1e-4 * fabs(ref_loss), "bf16 loss %s/mlp %d/loss %d: %.9g vs %.9g",
              lc_ckpt_name(pols[a]), mts[b], lts[c], loss, ref_loss);
        CHECK(worst <= 1e-2 * gmax, "bf16 grads %s/mlp %d/loss %d: max diff %.3g (max |g| %.3g)",
              lc_ckpt_name(pols[a]), mts[b], lts[c], worst, gmax);
      }
  free(ref);
  lc_model_destroy(&m);
}

// ---------------------------------------------------------------- 5. memory
static void test_memory(void) {
  lc_config cfg;
  lc_config_preset(&cfg, "tiny");
  lc_model m;
  CHECK(lc_model_create(&m, &cfg, &arena) == LC_OK, "create: %s", lc_errmsg());
  lc_model_init_random(&m, 1);
  const int T = 512;
  int *tok = malloc(sizeof(int) * T), *tgt = malloc(sizeof(int) * T), *pos = malloc(sizeof(int) * T);
  lc_rng r;
  lc_rng_seed(&r, 9);
  lc_t_make_batch(&r, tok, tgt, pos, T, cfg.vocab);
  lc_attn attn;
  lc_attn_local_init(&attn, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim);
  const lc_ckpt_policy pols[] = {LC_CKPT_FULL, LC_CKPT_SELECTIVE, LC_CKPT_NONE};
  for (int p = 0; p < 3; p++) {
    size_t ck[2], act[2], pk[2], pa[2];
    for (int b = 0; b < 2; b++) {
      lc_model_opts o = {pols[p], 128, 0, 0, 0, 0, b ? LC_DT_BF16 : LC_DT_F32, NULL, 0, 0, 0};
      lc_arena_reset_peaks(&arena);
      size_t base_ck = arena.cur[LC_MEM_CKPT], base_act = arena.cur[LC_MEM_ACT];
      run(&m, &o, tok, tgt, pos, T);
      ck[b] = arena.peak[LC_MEM_CKPT] - base_ck;
      act[b] = arena.peak[LC_MEM_ACT] - base_act;
      lc_model_pass_bytes(&cfg, &o, T, attn.saved_bytes(&attn, T, b), &pk[b], &pa[b]);
      CHECK(ck[b] == pk[b] && act[b] == pa[b], "%s %s: checkpoints %zu (model %zu), activations %zu (model %zu)",
            lc_ckpt_name(pols[p]), b ? "bf16" : "fp32", ck[b], pk[b], act[b], pa[b]);
    }
    printf("%-9s layer checkpoints fp32 %zu bf16 %zu bytes (x%.3f); working activations %zu / %zu\n",
           lc_ckpt_name(pols[p]), ck[0], ck[1], (double)ck[1] / ck[0], act[0], act[1]);
    // Full keeps the layer inputs, selective also the attention output (both bf16) and the
    // strategy's fp32 LSE: at most 0.55x. None keeps every activation (the MLP is tiled
    // here: none of it): in bf16 the layer input, ln1, q, k, v and att in 2 bytes, the
    // residual x_mid, rstd1 and the LSE in fp32, per token (T = 512: no padding):
    //   2 (C + C + HQ + 2 HKV + HQ) + 4 (C + 1) bytes, + the strategy's state.
    if (pols[p] != LC_CKPT_NONE)
      CHECK(ck[1] <= 0.55 * ck[0], "%s checkpointing in bf16: %zu bytes vs fp32 %zu (> 0.55x)", lc_ckpt_name(pols[p]),
            ck[1], ck[0]);
    if (pols[p] == LC_CKPT_NONE) {
      const size_t C = (size_t)cfg.dim, HQ = (size_t)cfg.n_heads * cfg.head_dim, HKV = (size_t)cfg.n_kv_heads * cfg.head_dim;
      const size_t per = (size_t)T * (2 * (2 * C + 2 * HQ + 2 * HKV) + 4 * (C + 1)) + attn.saved_bytes(&attn, T, 1);
      CHECK(ck[1] == per * (size_t)cfg.n_layers, "none in bf16: %zu checkpoint bytes, expected %zu (2-byte activations)",
            ck[1], per * (size_t)cfg.n_layers);
    }
  }
  free(tok), free(tgt), free(pos);
  lc_model_destroy(&m);
}

// ---------------------------------------------------------------- 6. the store's 2-byte copy
// A bf16 pass's acquired unit (the embedding, a decoder layer, the final norm + head): its
// matrices are a 2-byte copy (the 16-bit views hold exactly the rounded master weights; the
// float views of the matrices are NULL), its vectors (norms, biases, q/k norms) fp32
// copies of the rounded master values; the copy costs 2 bytes per unit value plus 4 per
// vector value (each vector padded to 16), counted here from the table alone; release
// restores the float views of the master. Tied and untied heads.
static void test_store_copy(int tied) {
  lc_config cfg;
  lc_config_preset(&cfg, "tiny");
  cfg.n_layers = 2;
  lc_arch_apply(&cfg, lc_arch_get(LC_ARCH_QWEN3), 1); // q/k norms, q/k/v and o biases: every kind of vector
  cfg.tie_embeddings = tied;
  lc_model m;
  CHECK(lc_model_create(&m, &cfg, &arena) == LC_OK, "create: %s", lc_errmsg());
  lc_t_randomize(&m, 5);
  lc_pstore *ps = &m.ps;
  lc_pstore_set_compute(ps, LC_DT_BF16);
  const int units[3] = {LC_UNIT_EMBED, lc_unit_layer(1), lc_unit_final(cfg.n_layers)};
  for (int k = 0; k < 3; k++) {
    const int u = units[k];
    const lc_param_unit *U = &ps->lay.units[u];
    size_t vec = 0;
    for (int t = U->t0; t < U->t1; t++)
      if (ps->lay.table[t].ndim == 1) vec += (ps->lay.table[t].numel + 15) / 16 * 16;
    const size_t g0 = arena.cur[LC_MEM_GATHERED];
    CHECK(lc_pstore_acquire(ps, u, -1) == LC_OK, "acquire: %s", lc_errmsg());
    CHECK(arena.cur[LC_MEM_GATHERED] - g0 == 2 * U->n + 4 * vec, "unit %d bf16 copy: %zu bytes, expected 2 x %zu + 4 x %zu",
          u, arena.cur[LC_MEM_GATHERED] - g0, U->n, vec);
    long bad = 0, views = 0;
    for (int t = U->t0; t < U->t1; t++) {
      const lc_param_info *T = &ps->lay.table[t];
      const lc_buf vw = *lc_weights_slot(&ps->w, T);
      const float *master = ps->params + T->offset, *f = vw.dt == LC_DT_F32 ? lc_buf_host(vw) : NULL;
      const uint16_t *h = vw.dt == LC_DT_BF16 ? lc_buf_host(vw) : NULL;
      if (T->ndim == 2) {
        views += h != NULL && vw.n == T->numel;
        for (size_t i = 0; h && i < T->numel; i++) bad += h[i] != lc_f32_to_bf16(master[i]);
      } else {
        views += f != NULL && f != master && vw.n == T->numel;
        for (size_t i = 0; f && i < T->numel; i++) bad += f[i] != lc_bf16_to_f32(lc_f32_to_bf16(master[i]));
      }
    }
    CHECK(views == U->t1 - U->t0, "unit %d bf16 copy: %ld of %d views as expected", u, views, U->t1 - U->t0);
    CHECK(bad == 0, "unit %d bf16 copy: %ld values are not the rounded master weights", u, bad);
    if (u == LC_UNIT_EMBED && tied)
      CHECK(lc_buf_host(ps->w.head) == lc_buf_host(ps->w.embed) && ps->w.head.dt == LC_DT_BF16,
            "tied head: head %p, embed %p", lc_buf_host(ps->w.head), lc_buf_host(ps->w.embed));
    lc_pstore_release(ps, u);
    long restored = 0;
    for (int t = U->t0; t < U->t1; t++) {
      const lc_param_info *T = &ps->lay.table[t];
      const lc_buf vw = *lc_weights_slot(&ps->w, T);
      restored += lc_buf_host(vw) == ps->params + T->offset && vw.dt == LC_DT_F32;
    }
    CHECK(arena.cur[LC_MEM_GATHERED] == g0 && restored == U->t1 - U->t0,
          "unit %d release: %zu bytes left, %ld of %d views back on the master", u, arena.cur[LC_MEM_GATHERED] - g0,
          restored, U->t1 - U->t0);
  }
  // Vocabulary slices: a matrix's rows in 2 bytes (w16, the rounded master), a vector's (the
  // final norm) rounded in fp32 (w); the bytes are lc_pstore_rows_bytes's; release frees them.
  const int FU = lc_unit_final(cfg.n_layers);
  for (int t = 0; t < ps->lay.n_tensors; t++) {
    const lc_param_info *T = &ps->lay.table[t];
    if (T->unit != LC_UNIT_EMBED && T->unit != FU) continue;
    const size_t len = lc_pstore_row_len(ps, t), nr = lc_pstore_n_rows(ps, t), r0 = nr > 7 ? 3 : 0, r1 = nr > 7 ? 10 : nr;
    lc_ps_rows r;
    const size_t g0 = arena.cur[LC_MEM_GATHERED];
    CHECK(lc_pstore_rows_fetch(ps, &r, t, r0, r1) == LC_OK && lc_pstore_rows_acquire(ps, &r) == LC_OK, "rows of %s: %s",
          T->name, lc_errmsg());
    const size_t n = (r1 - r0) * len, got = arena.cur[LC_MEM_GATHERED] - g0;
    CHECK(got == lc_pstore_rows_bytes(0, 1, 0, T->ndim == 2, n), "rows of %s: %zu bytes, model %zu", T->name, got,
          lc_pstore_rows_bytes(0, 1, 0, T->ndim == 2, n));
    const float *master = ps->params + T->offset + r0 * len;
    long bad = 0;
    const uint16_t *w16 = r.w.dt == LC_DT_BF16 ? lc_buf_host(r.w) : NULL;
    const float *w32 = r.w.dt == LC_DT_F32 ? lc_buf_host(r.w) : NULL;
    if (T->ndim == 2) {
      CHECK(w16 && got == 2 * n, "rows of %s: not in 2 bytes", T->name);
      for (size_t i = 0; w16 && i < n; i++) bad += w16[i] != lc_f32_to_bf16(master[i]);
    } else {
      CHECK(w32, "rows of %s (a vector): not in fp32", T->name);
      for (size_t i = 0; w32 && i < n; i++) bad += w32[i] != lc_bf16_to_f32(lc_f32_to_bf16(master[i]));
    }
    CHECK(bad == 0, "rows of %s: %ld values are not the rounded master", T->name, bad);
    lc_pstore_rows_release(ps, &r);
    CHECK(arena.cur[LC_MEM_GATHERED] == g0, "rows of %s: release left %zu bytes", T->name, arena.cur[LC_MEM_GATHERED] - g0);
  }
  lc_pstore_set_compute(ps, LC_DT_F32);
  lc_model_destroy(&m);
}

int main(void) {
  lc_arena_init(&arena, 0);
  test_arrays();
  test_layer_points();
  test_vs_fp32(0);
  test_vs_fp32(1);
  test_policies();
  test_memory();
  test_store_copy(0);
  test_store_copy(1);
  CHECK(arena.cur_total == 0, "arena still holds %zu bytes at exit", arena.cur_total);
  return lc_test_finish("test_bf16");
}
