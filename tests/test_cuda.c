// The CUDA backend against the CPU backend (label gpu): every op of the table on fresh
// random inputs (never zeros) in views whose surroundings are poisoned, so an element
// written outside the view or one left unwritten fails; over the shapes that cross tiles
// (odd sizes, GQA and MQA, query/key offsets, documents, windows, head dims 64 and 128).
// Bounds: ||gpu - cpu|| / ||cpu|| <= 1e-6 for fp32 element-wise ops (the same formula, at
// most a different order of a double sum), 1e-5 for fp32 products and attention (sums of
// up to a few thousand terms in another order: ~sqrt(K) x 6e-8), 1e-2 for outputs rounded
// to bf16 (one bf16 ulp is 2^-8 = 3.9e-3 relative, and a different fp32 sum can round to
// the neighbour); casts, copies, add, scale, fill and AdamW bit for bit. Then a few
// training steps on the device against the CPU (fp32 losses within 1e-5 relative) and
// twice on the device (bitwise identical).
//
// Exits 77 (ctest: skipped) with one line where the build has no CUDA backend or the
// machine no CUDA device.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/flash/flash.h"
#include "backend/backend.h"
#include "comm/comm.h"
#include "model/arch.h"
#include "backend/cpu/ops/dropout.h"
#include "backend/cpu/ops/ops.h"
#include "train/trainer.h"
#include "testutil.h"

#ifdef LC_HAVE_CUDA // (without the CUDA backend main only says so)
#define PAD 37

static lc_backend *B[2]; // 0: cpu (the reference), 1: cuda
static lc_arena AR[2];
static lc_rng R;

typedef struct {
  lc_buf all[2], mid[2];
  lc_dtype dt;
  size_t n;
} pair;

static void poison(void *h, lc_dtype dt, size_t n) {
  const size_t es = lc_dtype_size(dt);
  for (size_t i = 0; i < n; i++) {
    unsigned char *p = (unsigned char *)h + i * es;
    if (dt == LC_DT_F32) { const uint32_t v = 0x7fc0dead; memcpy(p, &v, 4); }
    else if (dt == LC_DT_BF16) { const uint16_t v = 0x7fc1; memcpy(p, &v, 2); }
    else if (dt == LC_DT_F64) { const uint64_t v = 0x7ff8deadbeef0001ull; memcpy(p, &v, 8); }
    else memset(p, 0x7d, es);
  }
}

// The same values on both devices in a view with poisoned surroundings (vals NULL: the
// view poisoned too, an output every element of which the op must write).
static pair mk(lc_dtype dt, const void *vals, size_t n) {
  pair p = {.dt = dt, .n = n};
  const size_t es = lc_dtype_size(dt), tot = n + 2 * PAD;
  unsigned char *h = malloc(es * tot);
  poison(h, dt, tot);
  if (vals) memcpy(h + es * PAD, vals, es * n);
  for (int b = 0; b < 2; b++) {
    CHECK(lc_buf_alloc(B[b], LC_MEM_SCRATCH, dt, tot, 0, "test buffer", &p.all[b]) == LC_OK, "alloc: %s", lc_errmsg());
    CHECK(lc_buf_write(p.all[b], h, LC_SYNC_TEST) == LC_OK, "write: %s", lc_errmsg());
    p.mid[b] = lc_buf_view(p.all[b], PAD, n);
  }
  free(h);
  return p;
}
static void fr(pair *p) {
  for (int b = 0; b < 2; b++) lc_buf_free(&p->all[b]);
}

static double val(const void *h, lc_dtype dt, size_t i) {
  if (dt == LC_DT_F32) return ((const float *)h)[i];
  if (dt == LC_DT_F64) return ((const double *)h)[i];
  if (dt == LC_DT_BF16) {
    const uint32_t u = (uint32_t)((const uint16_t *)h)[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  if (dt == LC_DT_I32) return ((const int32_t *)h)[i];
  return ((const unsigned char *)h)[i];
}

// Both devices' views compared: the surroundings still poison on the device, every value
// finite where the CPU's is (and -inf where it is), ||d|| / ||ref|| <= tol (tol 0: bits).
static double cmp(pair *p, const char *what, double tol) {
  const size_t es = lc_dtype_size(p->dt), tot = p->n + 2 * PAD;
  unsigned char *h[2], *pz = malloc(es * tot);
  poison(pz, p->dt, tot);
  for (int b = 0; b < 2; b++) {
    h[b] = malloc(es * tot);
    CHECK(lc_buf_read(p->all[b], h[b], LC_SYNC_TEST) == LC_OK, "%s: read: %s", what, lc_errmsg());
  }
  CHECK(!memcmp(h[1], pz, es * PAD) && !memcmp(h[1] + es * (PAD + p->n), pz, es * PAD),
        "%s: the CUDA op wrote outside its view", what);
  double num = 0, den = 0;
  size_t bad = 0;
  for (size_t i = PAD; i < PAD + p->n; i++) {
    const double a = val(h[1], p->dt, i), r = val(h[0], p->dt, i);
    if (isinf(r) && a == r) continue;
    if (!isfinite(a) && isfinite(r)) bad++;
    num += (a - r) * (a - r), den += r * r;
  }
  const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
  if (tol == 0)
    CHECK(!memcmp(h[0] + es * PAD, h[1] + es * PAD, es * p->n), "%s: not the CPU's bits (rel %.3g)", what, rel);
  else
    CHECK(bad == 0 && rel <= tol, "%s: %zu unwritten or non-finite, ||gpu - cpu|| / ||cpu|| = %.3g (bound %.1g)", what, bad,
          rel, tol);
  free(h[0]), free(h[1]), free(pz);
  return rel;
}

static float *rnd(size_t n, float s) {
  float *x = malloc(4 * (n ? n : 1));
  for (size_t i = 0; i < n; i++) x[i] = s * lc_rng_normal(&R);
  return x;
}
static uint16_t *to16(const float *x, size_t n) {
  uint16_t *h = malloc(2 * (n ? n : 1));
  lc_bf16_pack(h, x, n);
  return h;
}
static void round16(float *x, size_t n) { lc_bf16_round(x, n); }

// ---- flat ops, casts, strided copies, AdamW
static void test_flat(void) {
  const size_t n = 100003;
  float *x = rnd(n, 1), *y = rnd(n, 1);
  uint16_t *x16 = to16(x, n);
  pair a = mk(LC_DT_F32, y, n), b = mk(LC_DT_F32, x, n);
  for (int d = 0; d < 2; d++) CHECK(lc_be_add(a.mid[d], b.mid[d]) == LC_OK, "add");
  cmp(&a, "add", 0);
  for (int d = 0; d < 2; d++) CHECK(lc_be_scale(a.mid[d], 0.731f) == LC_OK, "scale");
  cmp(&a, "scale", 0);
  for (int d = 0; d < 2; d++) CHECK(lc_be_fill(lc_buf_view(a.mid[d], 5, 999), -2.5f) == LC_OK, "fill");
  cmp(&a, "fill", 0);
  for (int d = 0; d < 2; d++) CHECK(lc_be_bf16_round(a.mid[d]) == LC_OK, "round");
  cmp(&a, "bf16_round", 0);
  pair p16 = mk(LC_DT_BF16, NULL, n), u32 = mk(LC_DT_F32, NULL, n);
  for (int d = 0; d < 2; d++) CHECK(lc_be_bf16_pack(p16.mid[d], b.mid[d]) == LC_OK, "pack");
  cmp(&p16, "bf16_pack", 0);
  for (int d = 0; d < 2; d++) CHECK(lc_be_bf16_unpack(u32.mid[d], p16.mid[d]) == LC_OK, "unpack");
  cmp(&u32, "bf16_unpack", 0);
  pair c = mk(LC_DT_F32, NULL, n);
  for (int d = 0; d < 2; d++) CHECK(lc_be_copy(c.mid[d], b.mid[d], LC_STREAM_COMPUTE) == LC_OK, "copy");
  cmp(&c, "copy", 0);
  for (int d = 0; d < 2; d++) CHECK(lc_be_zero(lc_buf_view(c.mid[d], 17, 1000)) == LC_OK, "zero");
  cmp(&c, "zero", 0);
  // sum of squares into a device double, twice (it accumulates)
  pair acc = mk(LC_DT_F64, (double[]){0.25}, 1);
  for (int d = 0; d < 2; d++)
    CHECK(lc_be_sumsq_acc(acc.mid[d], b.mid[d]) == LC_OK && lc_be_sumsq_acc(acc.mid[d], lc_buf_view(b.mid[d], 3, 5000)) == LC_OK,
          "sumsq");
  cmp(&acc, "sumsq_acc", 1e-13);
  // strided 2-D copy (fp32, bf16) and sum
  {
    const size_t rows = 211, len = 67, lds = 83, ldd = 71;
    float *s = rnd(rows * lds, 1), *t = rnd(rows * ldd, 1);
    uint16_t *s16 = to16(s, rows * lds), *t16 = to16(t, rows * ldd);
    for (int op = 0; op < 3; op++) {
      const lc_dtype dt = op == 2 ? LC_DT_BF16 : LC_DT_F32;
      pair ps = mk(dt, op == 2 ? (void *)s16 : s, rows * lds), pd = mk(dt, op == 2 ? (void *)t16 : t, rows * ldd);
      for (int d = 0; d < 2; d++)
        CHECK((op == 1 ? lc_be_add2d(pd.mid[d], ldd, ps.mid[d], lds, rows, len)
                       : lc_be_copy2d(pd.mid[d], ldd, ps.mid[d], lds, rows, len)) == LC_OK,
              "2-D op");
      cmp(&pd, op == 0 ? "copy2d fp32" : op == 1 ? "add2d" : "copy2d bf16", 0);
      fr(&ps), fr(&pd);
    }
    free(s), free(t), free(s16), free(t16);
  }
  // LoRA dropout's mask: the same hash, so the same bits (set fp32, accumulate fp32, set bf16)
  {
    const int rows = 301, cols = 257;
    int *gi = malloc(sizeof(int) * rows);
    for (int i = 0; i < rows; i++) gi[i] = (i * 13 + 5) % 4096;
    const uint64_t key = lc_dropout_key(lc_dropout_pass_key(3, 7, 11), 5, LC_LORA_DOWN);
    const uint32_t thr = lc_dropout_thr(0.1f);
    pair pg = mk(LC_DT_I32, gi, (size_t)rows);
    for (int op = 0; op < 3; op++) {
      const lc_dtype dt = op == 2 ? LC_DT_BF16 : LC_DT_F32;
      pair ps = mk(dt, op == 2 ? (void *)x16 : x, (size_t)rows * cols), pd = mk(dt, op == 2 ? (void *)x16 : y, (size_t)rows * cols);
      for (int d = 0; d < 2; d++)
        CHECK(lc_be_dropout(pd.mid[d], ps.mid[d], rows, cols, pg.mid[d], key, thr, op == 1) == LC_OK, "dropout: %s",
              lc_errmsg());
      cmp(&pd, op == 0 ? "dropout fp32" : op == 1 ? "dropout accumulate" : "dropout bf16", 0);
      fr(&ps), fr(&pd);
    }
    fr(&pg);
    free(gi);
  }
  // AdamW: the same per-element arithmetic
  {
    float *g = rnd(n, 0.1f), *m = rnd(n, 0.01f), *v = malloc(4 * n);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(lc_rng_normal(&R)) * 1e-3f;
    pair pp = mk(LC_DT_F32, x, n), pg = mk(LC_DT_F32, g, n), pm = mk(LC_DT_F32, m, n), pv = mk(LC_DT_F32, v, n);
    const lc_adamw_args aa = {.wd = 0.1f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .lr = 3e-4f, .step_size = 3e-4f / 0.19f,
                              .inv_sqrt_bc2 = 1.0f / sqrtf(0.0975f)};
    for (int d = 0; d < 2; d++) CHECK(lc_be_adamw(pp.mid[d], pg.mid[d], pm.mid[d], pv.mid[d], &aa) == LC_OK, "adamw");
    cmp(&pp, "adamw p", 0), cmp(&pm, "adamw m", 0), cmp(&pv, "adamw v", 0);
    fr(&pp), fr(&pg), fr(&pm), fr(&pv);
    free(g), free(m), free(v);
  }
  fr(&a), fr(&b), fr(&p16), fr(&u32), fr(&c), fr(&acc);
  free(x), free(y), free(x16);
}

// ---- the layer's element-wise ops
static void test_layer_elem(void) {
  const int shapes[][3] = {{37, 3, 16}, {300, 8, 64}, {129, 4, 128}}; // T, H, D
  for (int si = 0; si < 3; si++) {
    const int T = shapes[si][0], H = shapes[si][1], D = shapes[si][2], C = H * D;
    const size_t TC = (size_t)T * C;
    char w[96];
    // RMSNorm forward (fp32 and bf16 out) and backward (add, set, in place, dw skipped)
    float *x = rnd(TC, 1.5f), *nw = rnd((size_t)C, 1), *dy = rnd(TC, 1), *d0 = rnd(TC, 1), *dw0 = rnd((size_t)C, 1);
    pair px = mk(LC_DT_F32, x, TC), pw = mk(LC_DT_F32, nw, (size_t)C), rs = mk(LC_DT_F32, NULL, (size_t)T);
    for (int o16 = 0; o16 < 2; o16++) {
      pair out = mk(o16 ? LC_DT_BF16 : LC_DT_F32, NULL, TC);
      for (int d = 0; d < 2; d++) CHECK(lc_be_rmsnorm_fwd(out.mid[d], rs.mid[d], px.mid[d], pw.mid[d], T, C, 1e-5f) == LC_OK, "rmsnorm");
      snprintf(w, sizeof w, "rmsnorm_fwd %s T %d C %d", o16 ? "bf16" : "fp32", T, C);
      cmp(&out, w, o16 ? 1e-2 : 1e-6);
      fr(&out);
    }
    cmp(&rs, "rmsnorm rstd", 1e-6);
    for (int mode = 0; mode < 3; mode++) { // 0: add, dw; 1: set, no dw; 2: in place on dout (set)
      pair pdy = mk(LC_DT_F32, dy, TC), pdi = mk(LC_DT_F32, d0, TC), pdw = mk(LC_DT_F32, dw0, (size_t)C);
      for (int d = 0; d < 2; d++) {
        const lc_buf dinp = mode == 2 ? pdy.mid[d] : pdi.mid[d], dwb = mode == 1 ? (lc_buf){0} : pdw.mid[d];
        CHECK(lc_be_rmsnorm_bwd(dinp, dwb, pdy.mid[d], px.mid[d], pw.mid[d], rs.mid[d], T, C, mode != 0) == LC_OK, "rmsnorm bwd");
      }
      snprintf(w, sizeof w, "rmsnorm_bwd mode %d T %d C %d", mode, T, C);
      cmp(mode == 2 ? &pdy : &pdi, w, 1e-6);
      if (mode != 1) cmp(&pdw, "rmsnorm dw", 1e-6);
      fr(&pdy), fr(&pdi), fr(&pdw);
    }
    // RoPE both ways on a real table
    int *pos = malloc(sizeof(int) * (size_t)T);
    for (int t = 0; t < T; t++) pos[t] = 3 + 5 * t;
    float *cs = malloc(4 * (size_t)T * (D / 2)), *sn = malloc(4 * (size_t)T * (D / 2));
    lc_rope_table(cs, sn, pos, T, D, 500000.0);
    pair pc = mk(LC_DT_F32, cs, (size_t)T * (D / 2)), ps = mk(LC_DT_F32, sn, (size_t)T * (D / 2));
    for (int bwd = 0; bwd < 2; bwd++) {
      pair q = mk(LC_DT_F32, x, TC);
      for (int d = 0; d < 2; d++) CHECK(lc_be_rope(q.mid[d], pc.mid[d], ps.mid[d], T, H, D, bwd) == LC_OK, "rope");
      cmp(&q, bwd ? "rope bwd" : "rope fwd", 1e-6);
      fr(&q);
    }
    // SwiGLU both ways, fp32 and bf16
    float *g = rnd(TC, 2), *u = rnd(TC, 1);
    uint16_t *g16 = to16(g, TC), *u16 = to16(u, TC);
    for (int b16 = 0; b16 < 2; b16++) {
      const lc_dtype dt = b16 ? LC_DT_BF16 : LC_DT_F32;
      pair pg = mk(dt, b16 ? (void *)g16 : g, TC), pu = mk(dt, b16 ? (void *)u16 : u, TC), ph = mk(dt, NULL, TC);
      pair pdg = mk(dt, NULL, TC), pdu = mk(dt, NULL, TC), pdh = mk(LC_DT_F32, dy, TC);
      for (int d = 0; d < 2; d++) {
        CHECK(lc_be_swiglu_fwd(ph.mid[d], pg.mid[d], pu.mid[d]) == LC_OK, "swiglu");
        CHECK(lc_be_swiglu_bwd(pdg.mid[d], pdu.mid[d], pdh.mid[d], pg.mid[d], pu.mid[d]) == LC_OK, "swiglu bwd");
      }
      cmp(&ph, b16 ? "swiglu fwd bf16" : "swiglu fwd", b16 ? 1e-2 : 1e-6);
      cmp(&pdg, "swiglu dg", b16 ? 1e-2 : 1e-6), cmp(&pdu, "swiglu du", b16 ? 1e-2 : 1e-6);
      fr(&pg), fr(&pu), fr(&ph), fr(&pdg), fr(&pdu), fr(&pdh);
    }
    // bias both ways (dy fp32 and bf16)
    {
      pair y = mk(LC_DT_F32, x, TC), pb = mk(LC_DT_F32, nw, (size_t)C);
      for (int d = 0; d < 2; d++) CHECK(lc_be_bias_fwd(y.mid[d], pb.mid[d], T, C) == LC_OK, "bias");
      cmp(&y, "bias fwd", 0);
      uint16_t *dy16 = to16(dy, TC);
      for (int b16 = 0; b16 < 2; b16++) {
        pair db = mk(LC_DT_F32, dw0, (size_t)C), pdy = mk(b16 ? LC_DT_BF16 : LC_DT_F32, b16 ? (void *)dy16 : dy, TC);
        for (int d = 0; d < 2; d++) CHECK(lc_be_bias_bwd(db.mid[d], pdy.mid[d], T, C) == LC_OK, "bias bwd");
        cmp(&db, b16 ? "bias bwd bf16" : "bias bwd", 1e-6);
        fr(&db), fr(&pdy);
      }
      free(dy16), fr(&y), fr(&pb);
    }
    // embedding both ways over a slice of the table (tokens outside it left alone; repeats)
    {
      const int V = 97, r0 = 30, rows = 41;
      int *tok = malloc(sizeof(int) * (size_t)T);
      for (int t = 0; t < T; t++) tok[t] = (int)lc_rng_below(&R, (uint32_t)V);
      tok[T - 1] = tok[0];
      float *wte = rnd((size_t)rows * C, 1);
      uint16_t *wte16 = to16(wte, (size_t)rows * C);
      pair pt = mk(LC_DT_I32, tok, (size_t)T);
      for (int b16 = 0; b16 < 2; b16++) {
        pair pe = mk(b16 ? LC_DT_BF16 : LC_DT_F32, b16 ? (void *)wte16 : wte, (size_t)rows * C), out = mk(LC_DT_F32, x, TC);
        for (int d = 0; d < 2; d++) CHECK(lc_be_embedding_fwd(out.mid[d], pt.mid[d], pe.mid[d], T, C, r0) == LC_OK, "emb");
        cmp(&out, b16 ? "embedding fwd bf16" : "embedding fwd", 0);
        fr(&pe), fr(&out);
      }
      pair dwte = mk(LC_DT_F32, wte, (size_t)rows * C), pdo = mk(LC_DT_F32, dy, TC);
      for (int d = 0; d < 2; d++) CHECK(lc_be_embedding_bwd(dwte.mid[d], pdo.mid[d], pt.mid[d], T, C, r0) == LC_OK, "emb bwd");
      cmp(&dwte, "embedding bwd", 0);
      fr(&dwte), fr(&pdo), fr(&pt);
      free(tok), free(wte), free(wte16);
    }
    fr(&px), fr(&pw), fr(&rs), fr(&pc), fr(&ps);
    free(x), free(nw), free(dy), free(d0), free(dw0), free(pos), free(cs), free(sn), free(g), free(u), free(g16), free(u16);
  }
}

// ---- the linear layer: every operand dtype, both passes, accumulate or not, skips
static void test_matmul(void) {
  const int shapes[][3] = {{37, 24, 50}, {300, 257, 129}, {5, 64, 1000}, {1030, 128, 96}}; // T, K, N
  for (int si = 0; si < 4; si++) {
    const int T = shapes[si][0], K = shapes[si][1], N = shapes[si][2];
    float *in = rnd((size_t)T * K, 1), *w = rnd((size_t)N * K, 0.1f), *dout = rnd((size_t)T * N, 1);
    float *di0 = rnd((size_t)T * K, 1), *dw0 = rnd((size_t)N * K, 1);
    for (int bf = 0; bf < 2; bf++) {
      if (bf) round16(in, (size_t)T * K), round16(w, (size_t)N * K), round16(dout, (size_t)T * N); // a bf16 pass's values
      uint16_t *in16 = to16(in, (size_t)T * K), *w16 = to16(w, (size_t)N * K), *do16 = to16(dout, (size_t)T * N);
      for (int var = 0; var < (bf ? 4 : 1); var++) { // operand storage: bit 0 inp bf16, bit 1 w bf16 (bf16 passes)
        const int i16 = var & 1, ww16 = (var >> 1) & 1;
        pair pi = mk(i16 ? LC_DT_BF16 : LC_DT_F32, i16 ? (void *)in16 : in, (size_t)T * K);
        pair pw = mk(ww16 ? LC_DT_BF16 : LC_DT_F32, ww16 ? (void *)w16 : w, (size_t)N * K);
        char what[128];
        for (int o16 = 0; o16 < 1 + bf; o16++) {
          pair out = mk(o16 ? LC_DT_BF16 : LC_DT_F32, NULL, (size_t)T * N);
          for (int d = 0; d < 2; d++)
            CHECK(lc_be_matmul_fwd(out.mid[d], pi.mid[d], pw.mid[d], T, K, N, bf, (lc_buf){0}) == LC_OK, "matmul fwd: %s", lc_errmsg());
          snprintf(what, sizeof what, "matmul fwd %dx%dx%d bf16 %d inp16 %d w16 %d out16 %d", T, K, N, bf, i16, ww16, o16);
          cmp(&out, what, o16 ? 1e-2 : 1e-5);
          fr(&out);
        }
        for (int acc = 0; acc < 2; acc++) {
          pair pd = mk(bf && i16 ? LC_DT_BF16 : LC_DT_F32, bf && i16 ? (void *)do16 : dout, (size_t)T * N);
          pair di = mk(LC_DT_F32, di0, (size_t)T * K), dw = mk(LC_DT_F32, dw0, (size_t)N * K);
          for (int d = 0; d < 2; d++)
            CHECK(lc_be_matmul_bwd(di.mid[d], acc ? dw.mid[d] : (lc_buf){0}, pd.mid[d], pi.mid[d], pw.mid[d], T, K, N, acc, bf,
                                   (lc_buf){0}) == LC_OK,
                  "matmul bwd: %s", lc_errmsg());
          snprintf(what, sizeof what, "matmul bwd dinp %dx%dx%d bf16 %d var %d accumulate %d", T, K, N, bf, var, acc);
          cmp(&di, what, 1e-5);
          if (acc) cmp(&dw, "matmul bwd dw", 1e-5);
          fr(&pd), fr(&di), fr(&dw);
        }
        fr(&pi), fr(&pw);
      }
      free(in16), free(w16), free(do16);
    }
    free(in), free(w), free(dout), free(di0), free(dw0);
  }
}

// ---- the loss: the whole tile, and slices of the vocabulary merged
static void test_loss(void) {
  const int shapes[][2] = {{37, 50}, {64, 49152}, {7, 1001}};
  for (int si = 0; si < 3; si++) {
    const int T = shapes[si][0], V = shapes[si][1];
    float *lg = rnd((size_t)T * V, 3);
    int *tg = malloc(sizeof(int) * (size_t)T);
    for (int t = 0; t < T; t++) tg[t] = t % 5 == 3 ? -1 : (int)lc_rng_below(&R, (uint32_t)V); // some rows ignored
    lg[(size_t)1 * V + (tg[1] >= 0 ? tg[1] : 0)] = 40; // a row predicted right
    pair pl = mk(LC_DT_F32, lg, (size_t)T * V), pt = mk(LC_DT_I32, tg, (size_t)T), acc = mk(LC_DT_F64, (double[]){1, 2}, 2);
    for (int d = 0; d < 2; d++) CHECK(lc_be_xent_tile(pl.mid[d], pt.mid[d], T, V, 0.01f, acc.mid[d], 1) == LC_OK, "xent");
    cmp(&pl, "xent_tile dlogits", 1e-6);
    cmp(&acc, "xent_tile loss and misses", 1e-9);
    fr(&pl), fr(&acc);
    // slices: vocabulary in three uneven slices, tokens in two tiles
    const int vs[3] = {V / 3, V / 3 + 1, V - 2 * (V / 3) - 1}, tiles[2] = {T / 2, T - T / 2};
    pair st = mk(LC_DT_U8, NULL, lc_xent_stats_bytes(T)), acc2 = mk(LC_DT_F64, (double[]){0, 0}, 2);
    for (int d = 0; d < 2; d++) CHECK(lc_be_xent_stats_init(st.mid[d], T) == LC_OK, "stats init");
    for (int pass = 0; pass < 2; pass++) {
      for (int s = 0, v0 = 0; s < 3; v0 += vs[s], s++)
        for (int ti = 0, t0 = 0; ti < 2; t0 += tiles[ti], ti++) {
          const int m = tiles[ti];
          float *sl = malloc(4 * (size_t)m * vs[s]);
          for (int i = 0; i < m; i++) memcpy(sl + (size_t)i * vs[s], lg + (size_t)(t0 + i) * V + v0, 4 * (size_t)vs[s]);
          pair ps = mk(LC_DT_F32, sl, (size_t)m * vs[s]);
          for (int d = 0; d < 2; d++)
            CHECK((pass ? lc_be_xent_slice_dlogits(ps.mid[d], st.mid[d], T, pt.mid[d], t0, m, v0, vs[s], 0.01f)
                        : lc_be_xent_slice_merge(st.mid[d], T, ps.mid[d], pt.mid[d], t0, m, v0, vs[s])) == LC_OK,
                  "slice");
          if (pass) cmp(&ps, "xent_slice_dlogits", 1e-6);
          fr(&ps), free(sl);
        }
      if (!pass) {
        for (int d = 0; d < 2; d++) CHECK(lc_be_xent_slice_total(st.mid[d], pt.mid[d], T, acc2.mid[d], 1) == LC_OK, "total");
        cmp(&acc2, "xent_slice_total", 1e-9);
      }
    }
    fr(&st), fr(&acc2), fr(&pt);
    free(lg), free(tg);
  }
}

// ---- attention: forward, backward, merge, delta over shapes that cross tiles
typedef struct {
  int Tq, Tk, Hq, Hkv, D;
  long q0, k0;
  int causal, docs, window, bf16, in16;
} fcase;

static void test_flash(void) {
  const fcase cases[] = {
      {200, 200, 4, 2, 64, 0, 0, 1, 0, 0, 0, 0},      // causal GQA, fp32
      {200, 200, 4, 2, 64, 0, 0, 1, 0, 0, 1, 1},      // the same in bf16, 2-byte inputs
      {77, 300, 8, 1, 128, 400, 100, 1, 0, 0, 1, 0},  // MQA, offsets (a ring block), bf16 values in fp32 storage
      {130, 130, 6, 6, 128, 0, 0, 1, 1, 0, 1, 1},     // documents
      {256, 256, 4, 4, 64, 0, 0, 1, 0, 50, 0, 0},     // a sliding window, fp32
      {96, 160, 2, 1, 16, 0, 0, 0, 0, 0, 0, 0},       // non-causal, an odd head dim (the simple path)
      {65, 129, 4, 2, 64, 1000, 0, 1, 0, 0, 1, 1},    // every key before every query
      {64, 64, 2, 2, 64, 0, 200, 1, 0, 0, 0, 0},      // every key after every query: empty rows
  };
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const fcase c = cases[ci];
    const size_t nq = (size_t)c.Tq * c.Hq * c.D, nk = (size_t)c.Tk * c.Hkv * c.D;
    float *q = rnd(nq, 1), *k = rnd(nk, 1), *v = rnd(nk, 1), *dout = rnd(nq, 1);
    if (c.bf16) round16(q, nq), round16(k, nk), round16(v, nk), round16(dout, nq);
    uint16_t *q16 = to16(q, nq), *k16 = to16(k, nk), *v16 = to16(v, nk), *do16 = to16(dout, nq);
    int *lo = NULL;
    if (c.docs || c.window) {
      lo = malloc(sizeof(int) * (size_t)c.Tq);
      for (int i = 0; i < c.Tq; i++) {
        const long p = c.q0 + i;
        lo[i] = c.window ? (int)(p - c.window + 1 > 0 ? p - c.window + 1 : 0) : (int)(p / 37 * 37); // documents of 37
      }
    }
    const lc_attn_geom s = {.Tq = c.Tq, .Tk = c.Tk, .Hq = c.Hq, .Hkv = c.Hkv, .D = c.D, .q_start = c.q0, .k_start = c.k0,
                            .causal = c.causal, .scale = 1.0f / sqrtf((float)c.D), .bf16 = c.bf16};
    const lc_dtype idt = c.in16 ? LC_DT_BF16 : LC_DT_F32;
    pair pq = mk(idt, c.in16 ? (void *)q16 : q, nq), pk = mk(idt, c.in16 ? (void *)k16 : k, nk),
         pv = mk(idt, c.in16 ? (void *)v16 : v, nk), pdo = mk(idt, c.in16 ? (void *)do16 : dout, nq);
    pair plo = lo ? mk(LC_DT_I32, lo, (size_t)c.Tq) : (pair){0};
    char what[160];
    snprintf(what, sizeof what, "flash case %zu (Tq %d Tk %d Hq %d Hkv %d D %d bf16 %d)", ci, c.Tq, c.Tk, c.Hq, c.Hkv, c.D, c.bf16);
    const double tol = c.bf16 ? 1e-2 : 1e-5;
    for (int o16 = 0; o16 < 1 + c.bf16; o16++) {
      pair out = mk(o16 ? LC_DT_BF16 : LC_DT_F32, NULL, nq), lse = mk(LC_DT_F32, NULL, (size_t)c.Hq * c.Tq);
      for (int d = 0; d < 2; d++)
        CHECK(lc_be_flash_fwd(out.mid[d], lse.mid[d], pq.mid[d], pk.mid[d], pv.mid[d], lo ? plo.mid[d] : (lc_buf){0}, &s) == LC_OK,
              "flash fwd: %s", lc_errmsg());
      char w2[200];
      snprintf(w2, sizeof w2, "%s fwd out%s", what, o16 ? " (bf16)" : "");
      cmp(&out, w2, o16 ? 1e-2 : tol);
      snprintf(w2, sizeof w2, "%s lse", what);
      cmp(&lse, w2, c.bf16 ? 1e-4 : 1e-6);
      if (!o16) {
        // backward from the CPU's forward (lse, delta): accumulating into random gradients
        float *lh = malloc(4 * (size_t)c.Hq * c.Tq), *oh = malloc(4 * nq), *dl = malloc(4 * (size_t)c.Hq * c.Tq);
        CHECK(lc_buf_read(lse.mid[0], lh, LC_SYNC_TEST) == LC_OK && lc_buf_read(out.mid[0], oh, LC_SYNC_TEST) == LC_OK, "read");
        pair po = mk(LC_DT_F32, oh, nq), pl = mk(LC_DT_F32, lh, (size_t)c.Hq * c.Tq), pdel = mk(LC_DT_F32, NULL, (size_t)c.Hq * c.Tq);
        if (!c.in16) { // (2-byte dout with an fp32 out has no delta op: the host's below)
          for (int d = 0; d < 2; d++) CHECK(lc_be_attn_delta(pdel.mid[d], pdo.mid[d], po.mid[d], c.Tq, c.Hq, c.D) == LC_OK, "delta");
          cmp(&pdel, "attn_delta", 1e-6);
        }
        lc_attn_delta(dl, dout, oh, c.Tq, c.Hq, c.D);
        pair pdl = mk(LC_DT_F32, dl, (size_t)c.Hq * c.Tq);
        float *g0 = rnd(nq, 1), *g1 = rnd(nk, 1), *g2 = rnd(nk, 1);
        pair dq = mk(LC_DT_F32, g0, nq), dk = mk(LC_DT_F32, g1, nk), dv = mk(LC_DT_F32, g2, nk);
        for (int d = 0; d < 2; d++)
          CHECK(lc_be_flash_bwd(dq.mid[d], dk.mid[d], dv.mid[d], pdo.mid[d], pq.mid[d], pk.mid[d], pv.mid[d], pl.mid[d],
                                pdl.mid[d], lo ? plo.mid[d] : (lc_buf){0}, &s) == LC_OK,
                "flash bwd: %s", lc_errmsg());
        snprintf(w2, sizeof w2, "%s bwd dq", what), cmp(&dq, w2, tol);
        snprintf(w2, sizeof w2, "%s bwd dk", what), cmp(&dk, w2, tol);
        snprintf(w2, sizeof w2, "%s bwd dv", what), cmp(&dv, w2, tol);
        fr(&po), fr(&pl), fr(&pdel), fr(&pdl), fr(&dq), fr(&dk), fr(&dv);
        free(lh), free(oh), free(dl), free(g0), free(g1), free(g2);
      }
      fr(&out), fr(&lse);
    }
    fr(&pq), fr(&pk), fr(&pv), fr(&pdo);
    if (lo) fr(&plo);
    free(q), free(k), free(v), free(dout), free(q16), free(k16), free(v16), free(do16), free(lo);
  }
  // the merge of two partial results (one with -inf rows), and delta on 2-byte inputs
  {
    const int Tq = 70, Hq = 3, D = 64;
    const size_t n = (size_t)Tq * Hq * D;
    float *oa = rnd(n, 1), *ob = rnd(n, 1), *la = rnd((size_t)Hq * Tq, 2), *lb = rnd((size_t)Hq * Tq, 2);
    la[3] = -INFINITY, lb[7] = -INFINITY, la[11] = lb[11] = -INFINITY;
    pair a = mk(LC_DT_F32, oa, n), al = mk(LC_DT_F32, la, (size_t)Hq * Tq), b = mk(LC_DT_F32, ob, n), bl = mk(LC_DT_F32, lb, (size_t)Hq * Tq);
    for (int d = 0; d < 2; d++) CHECK(lc_be_attn_merge(a.mid[d], al.mid[d], b.mid[d], bl.mid[d], Tq, Hq, D) == LC_OK, "merge");
    cmp(&a, "attn_merge out", 1e-6), cmp(&al, "attn_merge lse", 1e-6);
    uint16_t *oa16 = to16(oa, n), *ob16 = to16(ob, n);
    pair d16 = mk(LC_DT_BF16, oa16, n), o16 = mk(LC_DT_BF16, ob16, n), del = mk(LC_DT_F32, NULL, (size_t)Hq * Tq);
    for (int d = 0; d < 2; d++) CHECK(lc_be_attn_delta(del.mid[d], d16.mid[d], o16.mid[d], Tq, Hq, D) == LC_OK, "delta16");
    cmp(&del, "attn_delta bf16", 1e-6);
    fr(&a), fr(&al), fr(&b), fr(&bl), fr(&d16), fr(&o16), fr(&del);
    free(oa), free(ob), free(la), free(lb), free(oa16), free(ob16);
  }
}

// ---- training on the device: losses against the CPU, and two device runs bit for bit
static void steps(const char *device, const char *preset, int qwen, int bf16, int n, double *loss) {
  lc_train_opts o;
  lc_train_opts_init(&o);
  lc_config_preset(&o.cfg, preset);
  if (qwen == 2) lc_arch_apply(&o.cfg, lc_arch_get(LC_ARCH_QWEN2), 1);
  if (qwen == 3) lc_arch_apply(&o.cfg, lc_arch_get(LC_ARCH_QWEN3), 1);
  o.data_spec = "task:copy";
  o.seq = 128, o.batch = 2, o.steps = n, o.warmup = 0, o.lr = 3e-3f, o.lr_min = 3e-3f, o.clip = 1.0f, o.seed = 9;
  o.device = device;
  o.mopts.precision = bf16 ? LC_DT_BF16 : LC_DT_F32;
  lc_comm *self = NULL;
  lc_comm_self(&self);
  lc_trainer tr;
  CHECK(lc_trainer_init(&tr, &o, self) == LC_OK, "%s %s: init: %s", preset, device, lc_errmsg());
  for (int i = 0; i < n && tr.be; i++) {
    lc_step_metrics m;
    CHECK(lc_trainer_step(&tr, &m) == LC_OK, "%s %s step %d: %s", preset, device, i + 1, lc_errmsg());
    loss[i] = m.loss;
  }
  lc_trainer_free(&tr);
  lc_comm_destroy(self);
}

static void test_training(void) {
  enum { S = 10 };
  const struct {
    const char *preset;
    int qwen, bf16;
  } runs[] = {{"tiny", 0, 0}, {"tiny", 2, 0}, {"tiny", 3, 0}, {"tiny", 0, 1}};
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    double lc[S], lg[S], lg2[S];
    steps("cpu", runs[i].preset, runs[i].qwen, runs[i].bf16, S, lc);
    steps("cuda", runs[i].preset, runs[i].qwen, runs[i].bf16, S, lg);
    steps("cuda", runs[i].preset, runs[i].qwen, runs[i].bf16, S, lg2);
    double worst = 0;
    for (int s = 0; s < S; s++) worst = fmax(worst, fabs(lg[s] - lc[s]) / fabs(lc[s]));
    // fp32: 1e-5 relative over 10 steps (the step's sums in other orders, compounded by the
    // updates); bf16: the CPU's bf16 tests' bound for two kernels of one precision, 2e-2
    const double bound = runs[i].bf16 ? 2e-2 : 1e-5;
    CHECK(worst <= bound, "%s (qwen %d, bf16 %d): losses on cuda vs cpu differ by %.3g relative (bound %g); step 1 %.6f vs %.6f",
          runs[i].preset, runs[i].qwen, runs[i].bf16, worst, bound, lg[0], lc[0]);
    CHECK(!memcmp(lg, lg2, sizeof lg), "%s (qwen %d, bf16 %d): two cuda runs differ", runs[i].preset, runs[i].qwen, runs[i].bf16);
    printf("training %s qwen %d bf16 %d: step 1 loss cpu %.6f cuda %.6f, worst relative %.3g over %d steps\n", runs[i].preset,
           runs[i].qwen, runs[i].bf16, lc[0], lg[0], worst, S);
  }
}

#endif

int main(void) {
#ifndef LC_HAVE_CUDA
  printf("skipped: this build has no CUDA backend (CMake found no nvcc)\n");
  return 77;
#else
  if (lc_device_check("cuda") != LC_OK) {
    printf("skipped: no CUDA device: %s\n", lc_errmsg());
    return 77;
  }
  lc_rng_seed(&R, 2026);
  for (int b = 0; b < 2; b++) {
    lc_arena_init(&AR[b], 0);
    CHECK(lc_backend_open(b ? "cuda" : "cpu", &AR[b], &B[b]) == LC_OK, "open: %s", lc_errmsg());
  }
  char d[256];
  printf("%s\n", lc_backend_describe(B[1], d, sizeof d));
  test_flat();
  test_layer_elem();
  test_matmul();
  test_loss();
  test_flash();
  CHECK(B[1]->arena->cur_total == 0, "every device buffer freed (%zu bytes live)", B[1]->arena->cur_total);
  for (int b = 0; b < 2; b++) lc_backend_close(B[b]);
  test_training();
  return lc_test_finish("test_cuda");
#endif
}
