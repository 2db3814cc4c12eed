// The CUDA backend's kernels (src/backend/cuda/*.cu) run on the CPU under the emulation of
// CUDA's execution model (src/backend/cuda/emu/), against the CPU backend: test_cuda's op
// checks without a GPU. The launch wrappers (lcc_*, cuda_kern.h) get host memory as device
// memory; the CPU side runs through the CPU backend (lc_be_*). The host side of the CUDA
// backend (cuda_backend.c, cuda_gemm.c: cuBLASLt) is not emulated, so the GEMMs and the
// training runs stay test_cuda's (on a GPU).
//
// Every operand lives in a view whose surroundings are poisoned (an element written outside
// the view, or one left unwritten, fails), on fresh random inputs, over shapes that cross
// tiles. Bounds (||emu - cpu|| / ||cpu||), as test_cuda's:
//  - bits for the casts, add, scale, fill, dropout, AdamW, bias forward, embedding, and the
//    fp32 sums the kernels promise in the CPU's sequential order (bias backward, attention
//    delta: one thread walks the CPU's sequence);
//  - 1e-6 for the other fp32 element-wise ops (the same formula; at most a double sum in
//    another order); 1e-13 for the sum of squares (a double sum of 1e5 terms in another
//    order), whose bits are also checked against the kernel's own documented fixed order
//    (LCC_SUMSQ_PARTS parts, a per-thread stride, the shuffle tree) recomputed here;
//  - 1e-5 for fp32 attention, 1e-2 for bf16 outputs (one bf16 ulp is 3.9e-3 relative and a
//    different fp32 sum may round to the neighbour), 1e-4 for the bf16 tier's lse;
//  - the tiled SIMT tier and the reference tier give the same bits (their design); the
//    tensor-core tier (bf16, D 64 and 128) is held to the bf16 bounds against the CPU.
// Every launch also runs the emulation's checks: shared-memory races (no barrier between a
// write and another thread's access), reads of unwritten or out-of-range shared memory,
// deadlocked barriers, launch limits: any finding fails the test. Half of the attention cases
// run the threads of a block in descending order, the rest ascending.
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/flash/flash.h"
#include "backend/cpu/ops/dropout.h"
#include "backend/cpu/ops/ops.h"
#include "backend/cuda/cuda_kern.h"
#include "backend/cuda/emu/cuda_emu_c.h"
#include "backend/cpu/kern/kernels.h"
#include "core/dtype.h"
#include "core/rope.h"
#include "model/config.h"
#include "testutil.h"

#define PAD 37

static lc_backend *B; // the CPU backend (the reference)
static lc_arena AR;
static lc_rng R;
static double worst[3]; // the largest relative error against the CPU: tensor-core, SIMT, reference tier

// One operand on both sides: the CPU's buffer (all, the view mid) and the emulation's host
// copy h (PAD poisoned elements either side of the n of the view).
typedef struct {
  lc_buf all, mid;
  unsigned char *h;
  lc_dtype dt;
  size_t n;
} pair;

static void poison(void *h, lc_dtype dt, size_t n) {
  const size_t es = lc_dtype_size(dt);
  for (size_t i = 0; i < n; i++) {
    unsigned char *p = (unsigned char *)h + i * es;
    if (dt == LC_DT_F32) {
      const uint32_t v = 0x7fc0dead;
      memcpy(p, &v, 4);
    } else if (dt == LC_DT_BF16) {
      const uint16_t v = 0x7fc1;
      memcpy(p, &v, 2);
    } else if (dt == LC_DT_F64) {
      const uint64_t v = 0x7ff8deadbeef0001ull;
      memcpy(p, &v, 8);
    } else {
      memset(p, 0x7d, es);
    }
  }
}

// The emulation's view (the "device pointer").
static void *E(const pair *p) { return p->h + lc_dtype_size(p->dt) * PAD; }

// The emulation's side set again to vals (NULL: poisoned), the CPU's left alone.
static void reset(pair *p, const void *vals) {
  const size_t es = lc_dtype_size(p->dt);
  poison(p->h, p->dt, p->n + 2 * PAD);
  if (vals) memcpy(p->h + es * PAD, vals, es * p->n);
}

static pair mk(lc_dtype dt, const void *vals, size_t n) {
  pair p = {.dt = dt, .n = n};
  const size_t es = lc_dtype_size(dt), tot = n + 2 * PAD;
  p.h = malloc(es * tot);
  reset(&p, vals);
  CHECK(lc_buf_alloc(B, LC_MEM_SCRATCH, dt, tot, 0, "test buffer", &p.all) == LC_OK, "alloc: %s", lc_errmsg());
  CHECK(lc_buf_write(p.all, p.h, LC_SYNC_TEST) == LC_OK, "write: %s", lc_errmsg());
  p.mid = lc_buf_view(p.all, PAD, n);
  return p;
}
static void fr(pair *p) {
  lc_buf_free(&p->all);
  free(p->h);
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

// The emulation's view against the CPU's: the surroundings still poison, every value finite
// where the CPU's is (-inf where it is), ||d|| / ||ref|| <= tol (tol 0: bits). Also fails on
// any finding of the emulation since the last check.
static double cmp(pair *p, const char *what, double tol) {
  const size_t es = lc_dtype_size(p->dt), tot = p->n + 2 * PAD;
  unsigned char *c = malloc(es * tot), *pz = malloc(es * tot);
  poison(pz, p->dt, tot);
  CHECK(lc_buf_read(p->all, c, LC_SYNC_TEST) == LC_OK, "%s: read: %s", what, lc_errmsg());
  CHECK(!memcmp(p->h, pz, es * PAD) && !memcmp(p->h + es * (PAD + p->n), pz, es * PAD),
        "%s: the CUDA kernel wrote outside its view", what);
  double num = 0, den = 0;
  size_t bad = 0;
  for (size_t i = PAD; i < PAD + p->n; i++) {
    const double a = val(p->h, p->dt, i), r = val(c, p->dt, i);
    if (isinf(r) && a == r) continue;
    if (!isfinite(a) && isfinite(r)) bad++;
    num += (a - r) * (a - r), den += r * r;
  }
  const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
  if (tol == 0)
    CHECK(!memcmp(c + es * PAD, p->h + es * PAD, es * p->n), "%s: not the CPU's bits (rel %.3g)", what, rel);
  else
    CHECK(bad == 0 && rel <= tol, "%s: %zu unwritten or non-finite, ||emu - cpu|| / ||cpu|| = %.3g (bound %.1g)", what,
          bad, rel, tol);
  const long f = lcc_emu_findings();
  CHECK(f == 0, "%s: the emulation reported %ld findings (above)", what, f);
  lcc_emu_reset_findings();
  free(c), free(pz);
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

#define EMU(call, what) CHECK((call) == 0, "%s: the launch failed", what)

// bf16 values widened to fp32 (exact).
static float *widened(const uint16_t *h, size_t n) {
  float *x = malloc(4 * (n ? n : 1));
  for (size_t i = 0; i < n; i++) x[i] = lc_bf16_widen(h[i]);
  return x;
}
// Whether two buffers of the CPU backend hold the same bits (their views).
static int same_bits(const pair *a, const pair *b) {
  const size_t nb = lc_dtype_size(a->dt) * a->n;
  unsigned char *x = malloc(nb + 1), *y = malloc(nb + 1);
  const int ok = a->dt == b->dt && a->n == b->n && lc_buf_read(a->mid, x, LC_SYNC_TEST) == LC_OK &&
                 lc_buf_read(b->mid, y, LC_SYNC_TEST) == LC_OK && !memcmp(x, y, nb);
  free(x), free(y);
  return ok;
}

// ---- the sum of squares in the kernel's documented fixed order (cuda_kern.h, cuda_elem.cu):
// part j of LCC_SUMSQ_PARTS sums its range with 256 threads (thread t: elements b + t, b + t +
// 256, ...), then the block's tree: per warp a shuffle-down tree (offsets 16, 8, 4, 2, 1; a
// lane past the warp reads its own value), warp sums through shared memory, the same tree in
// warp 0; then acc += parts in order.
static double warp_tree(double v[32]) {
  for (int off = 16; off > 0; off >>= 1) {
    double nv[32];
    for (int l = 0; l < 32; l++) nv[l] = v[l] + (l + off < 32 ? v[l + off] : v[l]);
    memcpy(v, nv, sizeof nv);
  }
  return v[0];
}
static double ref_sumsq_parts(double acc, const float *x, size_t n, double *parts_out) {
  const size_t P = LCC_SUMSQ_PARTS, q = n / P, rem = n % P;
  for (size_t j = 0; j < P; j++) {
    const size_t b = q * j + (j < rem ? j : rem), e = b + q + (j < rem ? 1 : 0);
    double s[256], sh[32];
    for (int t = 0; t < 256; t++) {
      s[t] = 0.0;
      for (size_t i = b + t; i < e; i += 256) s[t] += (double)x[i] * (double)x[i];
    }
    for (int w = 0; w < 8; w++) sh[w] = warp_tree(s + 32 * w);
    for (int l = 8; l < 32; l++) sh[l] = 0.0;
    const double part = warp_tree(sh);
    if (parts_out) parts_out[j] = part;
    acc += part;
  }
  return acc;
}
static double ref_sumsq(double acc, const float *x, size_t n) { return ref_sumsq_parts(acc, x, n, NULL); }

// ---- flat ops, casts, strided copies, dropout, AdamW, the sum of squares
static void test_flat(void) {
  const size_t n = 100003;
  float *x = rnd(n, 1), *y = rnd(n, 1);
  pair a = mk(LC_DT_F32, y, n), b = mk(LC_DT_F32, x, n);
  CHECK(lc_be_add(a.mid, b.mid) == LC_OK, "add");
  EMU(lcc_add(E(&a), E(&b), 0, n, NULL), "add");
  cmp(&a, "add", 0);
  { // y += x in bf16 (a bf16 pass's layer input): the bits of adding its widened fp32 copy
    uint16_t *x16 = to16(x, n);
    float *xw = widened(x16, n);
    pair ya = mk(LC_DT_F32, y, n), yb = mk(LC_DT_F32, y, n), b16 = mk(LC_DT_BF16, x16, n), bw = mk(LC_DT_F32, xw, n);
    CHECK(lc_be_add(ya.mid, bw.mid) == LC_OK && lc_be_add(yb.mid, b16.mid) == LC_OK, "add bf16");
    CHECK(same_bits(&ya, &yb), "add: a bf16 x is not its widened copy's bits");
    EMU(lcc_add(E(&yb), E(&b16), 1, n, NULL), "add bf16");
    cmp(&yb, "add bf16", 0);
    fr(&ya), fr(&yb), fr(&b16), fr(&bw);
    free(x16), free(xw);
  }
  CHECK(lc_be_scale(a.mid, 0.731f) == LC_OK, "scale");
  EMU(lcc_scale(E(&a), n, 0.731f, NULL), "scale");
  cmp(&a, "scale", 0);
  CHECK(lc_be_fill(lc_buf_view(a.mid, 5, 999), -2.5f) == LC_OK, "fill");
  EMU(lcc_fill((float *)E(&a) + 5, 999, -2.5f, NULL), "fill");
  cmp(&a, "fill", 0);
  CHECK(lc_be_bf16_round(a.mid) == LC_OK, "round");
  EMU(lcc_bf16_round(E(&a), n, NULL), "round");
  cmp(&a, "bf16_round", 0);
  pair p16 = mk(LC_DT_BF16, NULL, n), u32 = mk(LC_DT_F32, NULL, n);
  CHECK(lc_be_bf16_pack(p16.mid, b.mid) == LC_OK, "pack");
  EMU(lcc_bf16_pack(E(&p16), E(&b), n, NULL), "pack");
  cmp(&p16, "bf16_pack", 0);
  CHECK(lc_be_bf16_unpack(u32.mid, p16.mid) == LC_OK, "unpack");
  EMU(lcc_bf16_unpack(E(&u32), E(&p16), n, NULL), "unpack");
  cmp(&u32, "bf16_unpack", 0);
  // the sum of squares into a double, twice (it accumulates)
  {
    const double a0 = 0.25;
    pair acc = mk(LC_DT_F64, &a0, 1);
    double *parts = malloc(sizeof(double) * LCC_SUMSQ_PARTS);
    CHECK(lc_be_sumsq_acc(acc.mid, b.mid) == LC_OK && lc_be_sumsq_acc(acc.mid, lc_buf_view(b.mid, 3, 5000)) == LC_OK,
          "sumsq");
    EMU(lcc_sumsq_acc(E(&acc), E(&b), n, parts, NULL), "sumsq");
    // the 1024 partial sums too: a part's last bit is often lost in the final sum (1e5 against
    // parts of about 100), so a change of the block's tree order shows surely only here
    double *want_parts = malloc(sizeof(double) * LCC_SUMSQ_PARTS);
    ref_sumsq_parts(0.0, x, n, want_parts);
    int bad_parts = 0;
    for (int j = 0; j < LCC_SUMSQ_PARTS; j++) bad_parts += memcmp(&parts[j], &want_parts[j], 8) != 0;
    CHECK(!bad_parts, "sumsq_acc: %d of %d partial sums not the bits of the kernel's fixed order", bad_parts,
          LCC_SUMSQ_PARTS);
    free(want_parts);
    EMU(lcc_sumsq_acc(E(&acc), (float *)E(&b) + 3, 5000, parts, NULL), "sumsq");
    cmp(&acc, "sumsq_acc", 1e-13);
    const double want = ref_sumsq(ref_sumsq(a0, x, n), x + 3, 5000);
    double got;
    memcpy(&got, E(&acc), 8);
    CHECK(!memcmp(&got, &want, 8), "sumsq_acc: %.17g, not the bits of the kernel's fixed order (%.17g)", got, want);
    fr(&acc), free(parts);
  }
  // strided 2-D: pack fp32 -> bf16 and add
  {
    const size_t rows = 211, len = 67, lds = 83, ldd = 71;
    float *s = rnd(rows * lds, 1), *t = rnd(rows * ldd, 1);
    pair ps = mk(LC_DT_F32, s, rows * lds), pd = mk(LC_DT_F32, t, rows * ldd);
    CHECK(lc_be_add2d(pd.mid, ldd, ps.mid, lds, rows, len) == LC_OK, "add2d");
    EMU(lcc_add2d(E(&pd), ldd, E(&ps), lds, rows, len, NULL), "add2d");
    cmp(&pd, "add2d", 0);
    fr(&ps), fr(&pd), free(s), free(t);
  }
  // LoRA dropout's mask: the same hash, the same bits (set fp32, accumulate fp32, set bf16)
  {
    const int rows = 301, cols = 257;
    int *gi = malloc(sizeof(int) * rows);
    for (int i = 0; i < rows; i++) gi[i] = (i * 13 + 5) % 4096;
    const uint64_t key = lc_dropout_key(lc_dropout_pass_key(3, 7, 11), 5, LC_LORA_DOWN);
    const uint32_t thr = lc_dropout_thr(0.1f);
    uint16_t *x16 = to16(x, (size_t)rows * cols);
    pair pg = mk(LC_DT_I32, gi, (size_t)rows);
    for (int op = 0; op < 3; op++) {
      const lc_dtype dt = op == 2 ? LC_DT_BF16 : LC_DT_F32;
      pair ps = mk(dt, op == 2 ? (void *)x16 : x, (size_t)rows * cols),
           pd = mk(dt, op == 2 ? (void *)x16 : y, (size_t)rows * cols);
      CHECK(lc_be_dropout(pd.mid, ps.mid, rows, cols, pg.mid, key, thr, op == 1) == LC_OK, "dropout");
      EMU(lcc_dropout(E(&pd), E(&ps), op == 2, rows, cols, E(&pg), key, thr, op == 1, NULL), "dropout");
      cmp(&pd, op == 0 ? "dropout fp32" : op == 1 ? "dropout accumulate" : "dropout bf16", 0);
      fr(&ps), fr(&pd);
    }
    fr(&pg), free(gi), free(x16);
  }
  // AdamW: the same per-element arithmetic
  {
    float *g = rnd(n, 0.1f), *m = rnd(n, 0.01f), *v = malloc(4 * n);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(lc_rng_normal(&R)) * 1e-3f;
    pair pp = mk(LC_DT_F32, x, n), pg = mk(LC_DT_F32, g, n), pm = mk(LC_DT_F32, m, n), pv = mk(LC_DT_F32, v, n);
    const lc_adamw_args aa = {.wd = 0.1f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .lr = 3e-4f,
                              .step_size = 3e-4f / 0.19f, .inv_sqrt_bc2 = 1.0f / sqrtf(0.0975f)};
    CHECK(lc_be_adamw(pp.mid, pg.mid, pm.mid, pv.mid, &aa) == LC_OK, "adamw");
    EMU(lcc_adamw(E(&pp), E(&pg), E(&pm), E(&pv), n, aa.wd, aa.beta1, aa.beta2, aa.eps, aa.lr, aa.step_size,
                  aa.inv_sqrt_bc2, NULL),
        "adamw");
    cmp(&pp, "adamw p", 0), cmp(&pm, "adamw m", 0), cmp(&pv, "adamw v", 0);
    fr(&pp), fr(&pg), fr(&pm), fr(&pv);
    free(g), free(m), free(v);
  }
  fr(&a), fr(&b), fr(&p16), fr(&u32);
  free(x), free(y);
}

// ---- the layer's element-wise ops
static void test_layer_elem(void) {
  const int shapes[][3] = {{37, 3, 16}, {130, 4, 64}, {45, 2, 128}}; // T, H, D
  for (int si = 0; si < 3; si++) {
    const int T = shapes[si][0], H = shapes[si][1], D = shapes[si][2], C = H * D;
    const size_t TC = (size_t)T * C;
    char w[96];
    float *x = rnd(TC, 1.5f), *nw = rnd((size_t)C, 1), *dy = rnd(TC, 1), *d0 = rnd(TC, 1), *dw0 = rnd((size_t)C, 1);
    pair px = mk(LC_DT_F32, x, TC), pw = mk(LC_DT_F32, nw, (size_t)C), rs = mk(LC_DT_F32, NULL, (size_t)T);
    // RMSNorm forward (fp32 and bf16 out) and backward (add with dw, set without, in place)
    for (int o16 = 0; o16 < 2; o16++) {
      pair out = mk(o16 ? LC_DT_BF16 : LC_DT_F32, NULL, TC);
      CHECK(lc_be_rmsnorm_fwd(out.mid, rs.mid, px.mid, pw.mid, T, C, 1e-5f) == LC_OK, "rmsnorm");
      EMU(lcc_rmsnorm_fwd(E(&out), o16, E(&rs), E(&px), 0, E(&pw), T, C, 1e-5f, NULL), "rmsnorm");
      snprintf(w, sizeof w, "rmsnorm_fwd %s T %d C %d", o16 ? "bf16" : "fp32", T, C);
      cmp(&out, w, o16 ? 1e-2 : 1e-6);
      fr(&out);
    }
    cmp(&rs, "rmsnorm rstd", 1e-6);
    for (int mode = 0; mode < 3; mode++) {
      pair pdy = mk(LC_DT_F32, dy, TC), pdi = mk(LC_DT_F32, d0, TC), pdw = mk(LC_DT_F32, dw0, (size_t)C);
      const lc_buf dinp = mode == 2 ? pdy.mid : pdi.mid, dwb = mode == 1 ? (lc_buf){0} : pdw.mid;
      CHECK(lc_be_rmsnorm_bwd(dinp, dwb, pdy.mid, px.mid, pw.mid, rs.mid, T, C, mode != 0) == LC_OK, "rmsnorm bwd");
      void *parts = malloc(lcc_rmsnorm_bwd_parts_bytes(T, C) + 1);
      EMU(lcc_rmsnorm_bwd(mode == 2 ? E(&pdy) : E(&pdi), mode == 1 ? NULL : E(&pdw), E(&pdy), E(&px), 0, E(&pw), E(&rs),
                          T, C, mode != 0, mode == 1 ? NULL : parts, NULL),
          "rmsnorm bwd");
      free(parts);
      snprintf(w, sizeof w, "rmsnorm_bwd mode %d T %d C %d", mode, T, C);
      cmp(mode == 2 ? &pdy : &pdi, w, 1e-6);
      if (mode != 1) cmp(&pdw, "rmsnorm dw", 1e-6);
      fr(&pdy), fr(&pdi), fr(&pdw);
    }
    // x in bf16 (a bf16 pass's layer input read from its checkpoint): on the CPU the bits of its
    // widened fp32 copy, forward and backward; the emulation against the CPU as above
    {
      uint16_t *x16 = to16(x, TC);
      float *xw = widened(x16, TC);
      pair p16 = mk(LC_DT_BF16, x16, TC), pwd = mk(LC_DT_F32, xw, TC), ra = mk(LC_DT_F32, NULL, (size_t)T),
           rb = mk(LC_DT_F32, NULL, (size_t)T);
      for (int o16 = 0; o16 < 2; o16++) {
        pair oa = mk(o16 ? LC_DT_BF16 : LC_DT_F32, NULL, TC), ob = mk(o16 ? LC_DT_BF16 : LC_DT_F32, NULL, TC);
        CHECK(lc_be_rmsnorm_fwd(oa.mid, ra.mid, pwd.mid, pw.mid, T, C, 1e-5f) == LC_OK &&
                  lc_be_rmsnorm_fwd(ob.mid, rb.mid, p16.mid, pw.mid, T, C, 1e-5f) == LC_OK,
              "rmsnorm bf16 x");
        snprintf(w, sizeof w, "rmsnorm_fwd x bf16 %s T %d C %d", o16 ? "bf16" : "fp32", T, C);
        CHECK(same_bits(&oa, &ob) && same_bits(&ra, &rb), "%s: not the widened copy's bits", w);
        EMU(lcc_rmsnorm_fwd(E(&ob), o16, E(&rb), E(&p16), 1, E(&pw), T, C, 1e-5f, NULL), "rmsnorm bf16 x");
        cmp(&ob, w, o16 ? 1e-2 : 1e-6);
        cmp(&rb, "rmsnorm rstd (x bf16)", 1e-6);
        fr(&oa), fr(&ob);
      }
      for (int mode = 0; mode < 3; mode++) {
        pair ya = mk(LC_DT_F32, dy, TC), yb = mk(LC_DT_F32, dy, TC), ia = mk(LC_DT_F32, d0, TC), ib = mk(LC_DT_F32, d0, TC),
             wa = mk(LC_DT_F32, dw0, (size_t)C), wb = mk(LC_DT_F32, dw0, (size_t)C);
        pair *da = mode == 2 ? &ya : &ia, *db = mode == 2 ? &yb : &ib;
        CHECK(lc_be_rmsnorm_bwd(da->mid, mode == 1 ? (lc_buf){0} : wa.mid, ya.mid, pwd.mid, pw.mid, ra.mid, T, C, mode != 0) ==
                      LC_OK &&
                  lc_be_rmsnorm_bwd(db->mid, mode == 1 ? (lc_buf){0} : wb.mid, yb.mid, p16.mid, pw.mid, rb.mid, T, C,
                                    mode != 0) == LC_OK,
              "rmsnorm bwd bf16 x");
        snprintf(w, sizeof w, "rmsnorm_bwd x bf16 mode %d T %d C %d", mode, T, C);
        CHECK(same_bits(da, db) && same_bits(&wa, &wb), "%s: not the widened copy's bits", w);
        void *parts = malloc(lcc_rmsnorm_bwd_parts_bytes(T, C) + 1);
        EMU(lcc_rmsnorm_bwd(E(db), mode == 1 ? NULL : E(&wb), E(&yb), E(&p16), 1, E(&pw), E(&rb), T, C, mode != 0,
                            mode == 1 ? NULL : parts, NULL),
            "rmsnorm bwd bf16 x");
        free(parts);
        cmp(db, w, 1e-6);
        if (mode != 1) cmp(&wb, "rmsnorm dw (x bf16)", 1e-6);
        fr(&ya), fr(&yb), fr(&ia), fr(&ib), fr(&wa), fr(&wb);
      }
      fr(&p16), fr(&pwd), fr(&ra), fr(&rb);
      free(x16), free(xw);
    }
    // RoPE both ways on a real table
    int *pos = malloc(sizeof(int) * (size_t)T);
    for (int t = 0; t < T; t++) pos[t] = 3 + 5 * t;
    float *cs = malloc(4 * (size_t)T * (D / 2)), *sn = malloc(4 * (size_t)T * (D / 2));
    lc_rope_table(cs, sn, pos, T, D, 500000.0);
    pair pc = mk(LC_DT_F32, cs, (size_t)T * (D / 2)), ps = mk(LC_DT_F32, sn, (size_t)T * (D / 2));
    for (int bwd = 0; bwd < 2; bwd++) {
      pair q = mk(LC_DT_F32, x, TC);
      CHECK(lc_be_rope(q.mid, pc.mid, ps.mid, T, H, D, bwd) == LC_OK, "rope");
      EMU(lcc_rope(E(&q), E(&pc), E(&ps), T, H, D, bwd, NULL), "rope");
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
      CHECK(lc_be_swiglu_fwd(ph.mid, pg.mid, pu.mid) == LC_OK, "swiglu");
      CHECK(lc_be_swiglu_bwd(pdg.mid, pdu.mid, pdh.mid, pg.mid, pu.mid) == LC_OK, "swiglu bwd");
      EMU(lcc_swiglu_fwd(E(&ph), E(&pg), E(&pu), TC, b16, NULL), "swiglu");
      EMU(lcc_swiglu_bwd(E(&pdg), E(&pdu), E(&pdh), E(&pg), E(&pu), TC, b16, NULL), "swiglu bwd");
      cmp(&ph, b16 ? "swiglu fwd bf16" : "swiglu fwd", b16 ? 1e-2 : 1e-6);
      cmp(&pdg, "swiglu dg", b16 ? 1e-2 : 1e-6), cmp(&pdu, "swiglu du", b16 ? 1e-2 : 1e-6);
      fr(&pg), fr(&pu), fr(&ph), fr(&pdg), fr(&pdu), fr(&pdh);
    }
    // bias both ways (dy fp32 and bf16): db's sum over rows in the CPU's order, so its bits
    {
      pair y = mk(LC_DT_F32, x, TC), pb = mk(LC_DT_F32, nw, (size_t)C);
      CHECK(lc_be_bias_fwd(y.mid, pb.mid, T, C) == LC_OK, "bias");
      EMU(lcc_bias_fwd(E(&y), E(&pb), T, C, NULL), "bias");
      cmp(&y, "bias fwd", 0);
      uint16_t *dy16 = to16(dy, TC);
      for (int b16 = 0; b16 < 2; b16++) {
        pair db = mk(LC_DT_F32, dw0, (size_t)C), pdy = mk(b16 ? LC_DT_BF16 : LC_DT_F32, b16 ? (void *)dy16 : dy, TC);
        CHECK(lc_be_bias_bwd(db.mid, pdy.mid, T, C) == LC_OK, "bias bwd");
        EMU(lcc_bias_bwd(E(&db), E(&pdy), b16, T, C, NULL), "bias bwd");
        cmp(&db, b16 ? "bias bwd bf16" : "bias bwd", 0);
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
        pair pe = mk(b16 ? LC_DT_BF16 : LC_DT_F32, b16 ? (void *)wte16 : wte, (size_t)rows * C),
             out = mk(LC_DT_F32, x, TC);
        CHECK(lc_be_embedding_fwd(out.mid, pt.mid, pe.mid, T, C, r0) == LC_OK, "emb");
        EMU(lcc_embedding_fwd(E(&out), E(&pt), E(&pe), b16, T, C, r0, r0 + rows, NULL), "emb");
        cmp(&out, b16 ? "embedding fwd bf16" : "embedding fwd", 0);
        fr(&pe), fr(&out);
      }
      pair dwte = mk(LC_DT_F32, wte, (size_t)rows * C), pdo = mk(LC_DT_F32, dy, TC);
      CHECK(lc_be_embedding_bwd(dwte.mid, pdo.mid, pt.mid, T, C, r0) == LC_OK, "emb bwd");
      EMU(lcc_embedding_bwd(E(&dwte), E(&pdo), E(&pt), T, C, r0, r0 + rows, NULL), "emb bwd");
      cmp(&dwte, "embedding bwd", 0);
      fr(&dwte), fr(&pdo), fr(&pt);
      free(tok), free(wte), free(wte16);
    }
    fr(&px), fr(&pw), fr(&rs), fr(&pc), fr(&ps);
    free(x), free(nw), free(dy), free(d0), free(dw0), free(pos), free(cs), free(sn), free(g), free(u), free(g16),
        free(u16);
  }
}

// ---- the loss: the whole tile, and slices of the vocabulary merged
static void test_loss(void) {
  const int shapes[][2] = {{37, 50}, {64, 6007}, {7, 1001}};
  for (int si = 0; si < 3; si++) {
    const int T = shapes[si][0], V = shapes[si][1];
    float *lg = rnd((size_t)T * V, 3);
    int *tg = malloc(sizeof(int) * (size_t)T);
    for (int t = 0; t < T; t++) tg[t] = t % 5 == 3 ? -1 : (int)lc_rng_below(&R, (uint32_t)V); // some rows ignored
    lg[(size_t)1 * V + (tg[1] >= 0 ? tg[1] : 0)] = 40;                                         // a row predicted right
    const double acc0[2] = {1, 2}, zero2[2] = {0, 0};
    pair pl = mk(LC_DT_F32, lg, (size_t)T * V), pt = mk(LC_DT_I32, tg, (size_t)T), acc = mk(LC_DT_F64, acc0, 2);
    void *scr = malloc(lcc_xent_tile_scratch_bytes(T) + 1);
    CHECK(lc_be_xent_tile(pl.mid, pt.mid, T, V, 0.01f, acc.mid, 1) == LC_OK, "xent");
    EMU(lcc_xent_tile(E(&pl), E(&pt), T, V, 0.01f, E(&acc), 1, scr, NULL), "xent");
    free(scr);
    cmp(&pl, "xent_tile dlogits", 1e-6);
    cmp(&acc, "xent_tile loss and misses", 1e-9);
    fr(&pl), fr(&acc);
    // slices: the vocabulary in three uneven slices, the tokens in two tiles
    const int vs[3] = {V / 3, V / 3 + 1, V - 2 * (V / 3) - 1}, tiles[2] = {T / 2, T - T / 2};
    pair st = mk(LC_DT_U8, NULL, lc_xent_stats_bytes(T)), acc2 = mk(LC_DT_F64, zero2, 2);
    void *est = malloc(lc_xent_stats_bytes(T)); // the emulation's own layout (cuda_kern.h)
    CHECK(lc_be_xent_stats_init(st.mid, T) == LC_OK, "stats init");
    EMU(lcc_xent_stats_init(est, T, NULL), "stats init");
    for (int pass = 0; pass < 2; pass++) {
      for (int s = 0, v0 = 0; s < 3; v0 += vs[s], s++)
        for (int ti = 0, t0 = 0; ti < 2; t0 += tiles[ti], ti++) {
          const int m = tiles[ti];
          float *sl = malloc(4 * (size_t)m * vs[s]);
          for (int i = 0; i < m; i++) memcpy(sl + (size_t)i * vs[s], lg + (size_t)(t0 + i) * V + v0, 4 * (size_t)vs[s]);
          pair ps = mk(LC_DT_F32, sl, (size_t)m * vs[s]);
          if (pass) {
            CHECK(lc_be_xent_slice_dlogits(ps.mid, st.mid, T, pt.mid, t0, m, v0, vs[s], 0.01f) == LC_OK, "slice");
            EMU(lcc_xent_slice_dlogits(E(&ps), est, T, E(&pt), t0, m, v0, vs[s], 0.01f, NULL), "slice");
            cmp(&ps, "xent_slice_dlogits", 1e-6);
          } else {
            CHECK(lc_be_xent_slice_merge(st.mid, T, ps.mid, pt.mid, t0, m, v0, vs[s]) == LC_OK, "slice");
            EMU(lcc_xent_slice_merge(est, T, E(&ps), E(&pt), t0, m, v0, vs[s], NULL), "slice");
          }
          fr(&ps), free(sl);
        }
      if (!pass) {
        CHECK(lc_be_xent_slice_total(st.mid, pt.mid, T, acc2.mid, 1) == LC_OK, "total");
        EMU(lcc_xent_slice_total(est, E(&pt), T, E(&acc2), 1, NULL), "total");
        cmp(&acc2, "xent_slice_total", 1e-9);
      }
    }
    fr(&st), fr(&acc2), fr(&pt), free(est);
    free(lg), free(tg);
  }
}

// ---- attention: every tier forward and backward, merge, delta
typedef struct {
  int Tq, Tk, Hq, Hkv, D;
  long q0, k0;
  int causal, docs, window, bf16, in16;
} fcase;

static lcc_attn attn_of(const lc_attn_geom *s, const int *lo, int in16, int out16) {
  return (lcc_attn){.Tq = s->Tq, .Tk = s->Tk, .Hq = s->Hq, .Hkv = s->Hkv, .D = s->D, .q_start = s->q_start,
                    .k_start = s->k_start, .causal = s->causal, .scale = s->scale, .lo = lo, .bf16 = s->bf16,
                    .q16 = in16, .kv16 = in16, .out16 = out16};
}

static void test_flash(void) {
  const fcase cases[] = {
      {100, 100, 4, 2, 64, 0, 0, 1, 0, 0, 0, 0},     // causal GQA, fp32 (SIMT tier)
      {100, 100, 4, 2, 64, 0, 0, 1, 0, 0, 1, 1},     // the same in bf16, 2-byte inputs (tensor cores)
      {77, 130, 4, 1, 128, 200, 100, 1, 0, 0, 1, 0}, // MQA, offsets (a ring block), bf16 values in fp32 storage
      {130, 130, 2, 2, 128, 0, 0, 1, 1, 0, 1, 1},    // documents, D 128 on the tensor cores
      {130, 130, 2, 2, 64, 0, 0, 1, 0, 50, 0, 0},    // a sliding window, fp32
      {96, 160, 2, 1, 16, 0, 0, 0, 0, 0, 0, 0},      // non-causal, head dim 16 (SIMT)
      {70, 90, 3, 1, 16, 0, 0, 1, 1, 0, 1, 1},       // head dim 16 in bf16 (SIMT, bf16 rules), documents
      {65, 129, 4, 2, 64, 1000, 0, 1, 0, 0, 1, 1},   // every key before every query
      {64, 64, 2, 2, 64, 0, 200, 1, 0, 0, 0, 0},     // every key after every query: empty rows (fp32)
      {64, 64, 2, 2, 64, 0, 200, 1, 0, 0, 1, 1},     // the same on the tensor cores
      {70, 100, 2, 1, 128, 0, 0, 1, 0, 0, 0, 0},     // head dim 128 in fp32 (SIMT, 128-wide tiles)
      {50, 80, 2, 1, 32, 10, 0, 1, 0, 20, 1, 0},     // head dim 32 in bf16 (SIMT), a window
      {40, 70, 2, 2, 160, 30, 0, 1, 0, 0, 0, 0},     // head dim 160: past the tiled tiers (reference kernels)
  };
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const fcase c = cases[ci];
    lcc_emu_set_order((int)(ci & 1));
    const int mma = c.bf16 && (c.D == 64 || c.D == 128), big = c.D > 128;
    const size_t nq = (size_t)c.Tq * c.Hq * c.D, nk = (size_t)c.Tk * c.Hkv * c.D, nl = (size_t)c.Hq * c.Tq;
    float *q = rnd(nq, 1), *k = rnd(nk, 1), *v = rnd(nk, 1), *dout = rnd(nq, 1);
    if (c.bf16) lc_bf16_round(q, nq), lc_bf16_round(k, nk), lc_bf16_round(v, nk), lc_bf16_round(dout, nq);
    uint16_t *q16 = to16(q, nq), *k16 = to16(k, nk), *v16 = to16(v, nk), *do16 = to16(dout, nq);
    int *lo = NULL;
    if (c.docs || c.window) {
      lo = malloc(sizeof(int) * (size_t)c.Tq);
      for (int i = 0; i < c.Tq; i++) {
        const long p = c.q0 + i;
        lo[i] = c.window ? (int)(p - c.window + 1 > 0 ? p - c.window + 1 : 0) : (int)(p / 37 * 37); // documents of 37
      }
    }
    const lc_attn_geom s = {.Tq = c.Tq, .Tk = c.Tk, .Hq = c.Hq, .Hkv = c.Hkv, .D = c.D, .q_start = c.q0,
                            .k_start = c.k0, .causal = c.causal, .scale = 1.0f / sqrtf((float)c.D), .bf16 = c.bf16};
    const lc_dtype idt = c.in16 ? LC_DT_BF16 : LC_DT_F32;
    pair pq = mk(idt, c.in16 ? (void *)q16 : q, nq), pk = mk(idt, c.in16 ? (void *)k16 : k, nk),
         pv = mk(idt, c.in16 ? (void *)v16 : v, nk), pdo = mk(idt, c.in16 ? (void *)do16 : dout, nq);
    pair plo = lo ? mk(LC_DT_I32, lo, (size_t)c.Tq) : (pair){0};
    const int *elo = lo ? E(&plo) : NULL;
    // K and V: the views PAD elements in (74 bytes: the tensor cores' synchronous tile loads),
    // or in cases 3 and 7 16-byte aligned 2-byte copies (their cp.async double-buffered loads)
    const int kv_al = c.in16 && (ci & 3) == 3;
    uint16_t *ka = kv_al ? aligned_alloc(16, 2 * nk + 16) : NULL, *va = kv_al ? aligned_alloc(16, 2 * nk + 16) : NULL;
    if (kv_al) memcpy(ka, k16, 2 * nk), memcpy(va, v16, 2 * nk);
    const void *ek = kv_al ? (void *)ka : E(&pk), *ev = kv_al ? (void *)va : E(&pv);
    char what[160], w2[220];
    snprintf(what, sizeof what, "flash case %zu (Tq %d Tk %d Hq %d Hkv %d D %d bf16 %d in16 %d)", ci, c.Tq, c.Tk, c.Hq,
             c.Hkv, c.D, c.bf16, c.in16);
    const double tol = c.bf16 ? 1e-2 : 1e-5;
    for (int o16 = 0; o16 < 1 + c.bf16; o16++) {
      pair out = mk(o16 ? LC_DT_BF16 : LC_DT_F32, NULL, nq), lse = mk(LC_DT_F32, NULL, nl);
      CHECK(lc_be_flash_fwd(out.mid, lse.mid, pq.mid, pk.mid, pv.mid, lo ? plo.mid : (lc_buf){0}, &s) == LC_OK,
            "flash fwd: %s", lc_errmsg());
      const lcc_attn a = attn_of(&s, elo, c.in16, o16);
      const size_t ob = lc_dtype_size(out.dt) * nq;
      unsigned char *fast_out = malloc(ob), *fast_lse = malloc(4 * nl);
      for (int tier = 0; tier < 2; tier++) { // 0: the tier lcc_flash_fwd picks, 1: the reference kernels
        reset(&out, NULL), reset(&lse, NULL);
        if (tier == 0)
          EMU(lcc_flash_fwd(E(&out), E(&lse), E(&pq), ek, ev, &a, NULL, NULL), "flash fwd");
        else
          EMU(lcc_flash_fwd_ref(E(&out), E(&lse), E(&pq), ek, ev, &a, NULL), "flash fwd ref");
        const char *tn = tier || big ? "reference" : mma ? "tensor-core" : "simt";
        snprintf(w2, sizeof w2, "%s fwd out%s (%s tier)", what, o16 ? " (bf16)" : "", tn);
        const double r = cmp(&out, w2, o16 ? 1e-2 : tol);
        const int wi = tier || big ? 2 : mma ? 0 : 1;
        if (r > worst[wi]) worst[wi] = r;
        snprintf(w2, sizeof w2, "%s lse (%s tier)", what, tn);
        cmp(&lse, w2, c.bf16 ? 1e-4 : 1e-6);
        if (tier == 0) {
          memcpy(fast_out, E(&out), ob), memcpy(fast_lse, E(&lse), 4 * nl);
        } else if (!mma) {
          CHECK(!memcmp(fast_out, E(&out), ob) && !memcmp(fast_lse, E(&lse), 4 * nl),
                "%s fwd: the SIMT tier's bits differ from the reference tier's", what);
        }
      }
      free(fast_out), free(fast_lse);
      if (!o16) {
        // backward from the CPU's forward (lse, delta), accumulating into random gradients
        float *lh = malloc(4 * nl), *oh = malloc(4 * nq), *dl = malloc(4 * nl);
        CHECK(lc_buf_read(lse.mid, lh, LC_SYNC_TEST) == LC_OK && lc_buf_read(out.mid, oh, LC_SYNC_TEST) == LC_OK, "read");
        pair po = mk(LC_DT_F32, oh, nq), pl = mk(LC_DT_F32, lh, nl), pdel = mk(LC_DT_F32, NULL, nl);
        if (!c.in16) { // (2-byte dout with an fp32 out has no delta op: the host's below)
          CHECK(lc_be_attn_delta(pdel.mid, pdo.mid, po.mid, c.Tq, c.Hq, c.D) == LC_OK, "delta");
          EMU(lcc_attn_delta(E(&pdel), E(&pdo), E(&po), 0, c.Tq, c.Hq, c.D, NULL), "delta");
          cmp(&pdel, "attn_delta", 0);
        }
        lc_attn_delta(dl, dout, oh, c.Tq, c.Hq, c.D);
        pair pdl = mk(LC_DT_F32, dl, nl);
        float *g0 = rnd(nq, 1), *g1 = rnd(nk, 1), *g2 = rnd(nk, 1);
        pair dq = mk(LC_DT_F32, g0, nq), dk = mk(LC_DT_F32, g1, nk), dv = mk(LC_DT_F32, g2, nk);
        CHECK(lc_be_flash_bwd(dq.mid, dk.mid, dv.mid, pdo.mid, pq.mid, pk.mid, pv.mid, pl.mid, pdl.mid,
                              lo ? plo.mid : (lc_buf){0}, &s) == LC_OK,
              "flash bwd: %s", lc_errmsg());
        const lcc_attn ab = attn_of(&s, elo, c.in16, 0);
        float *fq = malloc(4 * nq), *fk = malloc(4 * nk), *fv = malloc(4 * nk);
        for (int tier = 0; tier < 2; tier++) {
          reset(&dq, g0), reset(&dk, g1), reset(&dv, g2);
          if (tier == 0)
            EMU(lcc_flash_bwd(E(&dq), E(&dk), E(&dv), E(&pdo), E(&pq), ek, ev, E(&pl), E(&pdl), &ab, NULL, NULL),
                "flash bwd");
          else
            EMU(lcc_flash_bwd_ref(E(&dq), E(&dk), E(&dv), E(&pdo), E(&pq), ek, ev, E(&pl), E(&pdl), &ab, NULL),
                "flash bwd ref");
          const char *tn = tier || big ? "reference" : mma ? "tensor-core" : "simt";
          const int wi = tier || big ? 2 : mma ? 0 : 1;
          double r;
          snprintf(w2, sizeof w2, "%s bwd dq (%s tier)", what, tn), r = cmp(&dq, w2, tol);
          worst[wi] = r > worst[wi] ? r : worst[wi];
          snprintf(w2, sizeof w2, "%s bwd dk (%s tier)", what, tn), r = cmp(&dk, w2, tol);
          worst[wi] = r > worst[wi] ? r : worst[wi];
          snprintf(w2, sizeof w2, "%s bwd dv (%s tier)", what, tn), r = cmp(&dv, w2, tol);
          worst[wi] = r > worst[wi] ? r : worst[wi];
          if (tier == 0) {
            memcpy(fq, E(&dq), 4 * nq), memcpy(fk, E(&dk), 4 * nk), memcpy(fv, E(&dv), 4 * nk);
          } else if (!mma) {
            CHECK(!memcmp(fq, E(&dq), 4 * nq) && !memcmp(fk, E(&dk), 4 * nk) && !memcmp(fv, E(&dv), 4 * nk),
                  "%s bwd: the SIMT tier's bits differ from the reference tier's", what);
          }
        }
        free(fq), free(fk), free(fv);
        fr(&po), fr(&pl), fr(&pdel), fr(&pdl), fr(&dq), fr(&dk), fr(&dv);
        free(lh), free(oh), free(dl), free(g0), free(g1), free(g2);
      }
      fr(&out), fr(&lse);
    }
    fr(&pq), fr(&pk), fr(&pv), fr(&pdo);
    if (lo) fr(&plo);
    free(q), free(k), free(v), free(dout), free(q16), free(k16), free(v16), free(do16), free(lo), free(ka), free(va);
  }
  lcc_emu_set_order(0);
  // the merge of two partial results (with -inf rows), and delta on 2-byte inputs
  {
    const int Tq = 70, Hq = 3, D = 64;
    const size_t n = (size_t)Tq * Hq * D;
    float *oa = rnd(n, 1), *ob = rnd(n, 1), *la = rnd((size_t)Hq * Tq, 2), *lb = rnd((size_t)Hq * Tq, 2);
    la[3] = -INFINITY, lb[7] = -INFINITY, la[11] = lb[11] = -INFINITY;
    pair a = mk(LC_DT_F32, oa, n), al = mk(LC_DT_F32, la, (size_t)Hq * Tq), b = mk(LC_DT_F32, ob, n),
         bl = mk(LC_DT_F32, lb, (size_t)Hq * Tq);
    CHECK(lc_be_attn_merge(a.mid, al.mid, b.mid, bl.mid, Tq, Hq, D) == LC_OK, "merge");
    EMU(lcc_attn_merge(E(&a), E(&al), E(&b), E(&bl), Tq, Hq, D, NULL), "merge");
    cmp(&a, "attn_merge out", 1e-6), cmp(&al, "attn_merge lse", 1e-6);
    uint16_t *oa16 = to16(oa, n), *ob16 = to16(ob, n);
    pair d16 = mk(LC_DT_BF16, oa16, n), o16 = mk(LC_DT_BF16, ob16, n), del = mk(LC_DT_F32, NULL, (size_t)Hq * Tq);
    CHECK(lc_be_attn_delta(del.mid, d16.mid, o16.mid, Tq, Hq, D) == LC_OK, "delta16");
    EMU(lcc_attn_delta(E(&del), E(&d16), E(&o16), 1, Tq, Hq, D, NULL), "delta16");
    cmp(&del, "attn_delta bf16", 0);
    fr(&a), fr(&al), fr(&b), fr(&bl), fr(&d16), fr(&o16), fr(&del);
    free(oa), free(ob), free(la), free(lb), free(oa16), free(ob16);
  }
}

// ---- the emulation's own checks on kernels with known faults (tests/cuda_emu_selftest.cpp):
// each fault reported (and the launch failed), never a hang; the correct kernels clean.
long lcc_emu_selftest(int which, int *err);
static void test_emulation(void) {
  static const char *what[] = {"a correct block sum (static shared memory)",
                               "a missing barrier (race on static shared memory)",
                               "a barrier half the block skips (deadlock)",
                               "a shuffle after half the warp exited (deadlock)",
                               "a read of static shared memory nobody wrote",
                               "a correct kernel on dynamic shared memory",
                               "a read past the launch's dynamic shared memory",
                               "a barrier after half the block exited",
                               "ldmatrix.x4 and .x4.trans (values by the PTX ISA's layout)",
                               "ldmatrix row addresses not 16-byte aligned",
                               "ldmatrix row addresses outside shared memory"};
  for (int w = 0; w < 11; w++) {
    int err = 0;
    const long f = lcc_emu_selftest(w, &err);
    if (w == 0 || w == 5 || w == 8)
      CHECK(f == 0 && err == 0, "emulation self-test, %s: %ld findings (error %d; -1: wrong values)", what[w], f, err);
    else
      CHECK(f > 0 && err != 0, "emulation self-test, %s: not reported (%ld findings, error %d)", what[w], f, err);
  }
}

// The emulation's __float2bfloat16 against the CPU's lc_bf16_pack (round to nearest even) on
// random values, ties, the largest finite values, infinities and subnormals (NaN: the GPU's
// canonical 0x7fff, not compared with the CPU's payload-keeping rule).
void lcc_emu_bf16_convert(uint16_t *dst, const float *src, int n);
static void test_bf16_convert(void) {
  enum { N = 4096 };
  float x[N];
  uint16_t a[N], b[N];
  const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0xbf808000u, 0x7f7fffffu, 0x7f7f8000u, 0x7f800000u,
                              0xff800000u, 0x00000001u, 0x80008000u, 0x00ff8000u, 0x3f80ffffu, 0};
  for (int i = 0; i < N; i++) {
    uint32_t u = (uint32_t)lc_rng_below(&R, 0xffffffffu);
    if ((u & 0x7fffffffu) > 0x7f800000u) u &= 0xbfffffffu; // no NaN
    if (i < (int)(sizeof special / sizeof special[0])) u = special[i];
    memcpy(&x[i], &u, 4);
  }
  lc_bf16_pack(a, x, N);
  lcc_emu_bf16_convert(b, x, N);
  CHECK(!memcmp(a, b, sizeof a), "emulated __float2bfloat16: not the CPU's round-to-nearest-even bits");
  const float nan = NAN;
  lcc_emu_bf16_convert(b, &nan, 1);
  CHECK(b[0] == 0x7fff, "emulated __float2bfloat16(NaN) = %04x, not the GPU's canonical 7fff", b[0]);
}

int main(void) {
  omp_set_num_threads(1); // the CPU's sums in its single-thread order (the kernels' reference)
  lc_rng_seed(&R, 2026);
  lc_arena_init(&AR, 0);
  CHECK(lc_backend_open("cpu", &AR, &B) == LC_OK, "open: %s", lc_errmsg());
  fprintf(stderr, "test_cuda_emu: the emulation's self-test reports the faults it plants (expected):\n");
  test_emulation();
  test_bf16_convert();
  fprintf(stderr, "test_cuda_emu: the CUDA kernels against the CPU backend:\n");
  test_flat();
  test_layer_elem();
  test_loss();
  test_flash();
  printf("attention, the largest ||emu - cpu|| / ||cpu|| of out, dq, dk, dv: tensor-core tier %.3g, SIMT tier %.3g, "
         "reference tier %.3g\n", worst[0], worst[1], worst[2]);
  CHECK(lcc_emu_findings() == 0, "the emulation's findings");
  lc_backend_close(B);
  return lc_test_finish("test_cuda_emu");
}
