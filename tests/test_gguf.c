#define _POSIX_C_SOURCE 200809L
// GGUF (llama.cpp's format): the reader and the model loader against files written by the
// gguf Python package (tools/make_gguf_test.py; data in tests/data/gguf):
//  1. every readable ggml type dequantizes to gguf-py's own dequantization bit for bit,
//     whole and in odd element ranges; metadata values of every type read back;
//  2. golden_untied converted as llama.cpp converts a Llama (F32, q/k rows permuted):
//     the same config as its HF directory, every parameter equal bit for bit (local store
//     and a ZeRO-3 store filled through a small staging buffer), the same loss;
//  3. the same model as Q8_0 (+ the converter's F16 fallback): weights within Q8_0's
//     rounding, loss within its first-order bound;
//  4. Qwen2 (q/k/v biases, tied, YaRN; F16) and Qwen3 (q/k norms, head_dim 24; BF16):
//     the same config, parameters and loss as the same models' HF directories;
//  5. Llama 3.1 RoPE scaling stored as rope_freqs.weight is read back as llama3 params;
//  6. errors: unsupported families, missing keys, partial RoPE, MoE, missing/unexpected/
//     mis-shaped/undecodable tensors, each one line naming the file and the problem.
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "attn/attn.h"
#include "core/arena.h"
#include "core/hash.h"
#include "comm/comm.h"
#include "io/fsutil.h"
#include "io/gguf.h"
#include "model/arch.h"
#include "model/gguf_model.h"
#include "model/hf.h"
#include "model/model.h"
#include "core/dequant.h"
#include "backend/cpu/kern/kernels.h"
#include "testmodel.h"
#include "testutil.h"

static lc_arena arena;
static char tmpdir[256];

static void data_path(char *out, size_t cap, const char *name) {
  snprintf(out, cap, "%s/tests/data/gguf/%s", LC_SOURCE_DIR, name);
}

static int one_line(void) { return lc_errmsg()[0] && !strchr(lc_errmsg(), '\n'); }

// ---------------------------------------------------------------- 1. types and metadata

static void check_tensor_vs_ref(lc_gguf_file *f, const lc_gguf_tensor *t, lc_rng *rng) {
  char rn[300];
  snprintf(rn, sizeof rn, "ref.%s", t->name);
  const lc_gguf_tensor *r = lc_gguf_find(f, rn);
  CHECK(r && r->type == LC_GGML_F32 && r->numel == t->numel, "%s: reference %s", t->name, rn);
  if (!r) return;
  const size_t n = t->numel;
  float *got = malloc(sizeof(float) * n), *want = malloc(sizeof(float) * n), *part = malloc(sizeof(float) * n);
  CHECK(lc_gguf_read_f32(f, r, 0, n, want) == LC_OK, "read %s: %s", rn, lc_errmsg());
  CHECK(lc_gguf_read_f32(f, t, 0, n, got) == LC_OK, "read %s: %s", t->name, lc_errmsg());
  size_t bad = n;
  for (size_t i = 0; i < n && bad == n; i++)
    if (memcmp(&got[i], &want[i], sizeof(float)) != 0) bad = i;
  uint32_t gb = 0, wb = 0;
  if (bad < n) memcpy(&gb, &got[bad], 4), memcpy(&wb, &want[bad], 4);
  CHECK(bad == n, "%s (%s): element %zu has bits %08x, gguf-py gives %08x", t->name, lc_gguf_type_name(t->type), bad, gb, wb);
  // Odd ranges: inside one block, across block edges, the last elements, random ones.
  size_t ranges[16][2] = {{0, 1}, {1, 1}, {31, 2}, {33, 511}, {255, 258}, {n - 7, 7}, {n - 1, 1}, {0, n}, {17, 0}};
  int nr = 9;
  while (nr < 16) {
    size_t a = lc_rng_below(rng, (uint32_t)n), len = 1 + lc_rng_below(rng, (uint32_t)(n - a));
    ranges[nr][0] = a;
    ranges[nr][1] = len;
    nr++;
  }
  for (int k = 0; k < nr; k++) {
    const size_t a = ranges[k][0], len = ranges[k][1];
    if (a + len > n) continue;
    for (size_t i = 0; i < len; i++) part[i] = -12345.0f;
    lc_status st = lc_gguf_read_f32(f, t, a, len, part);
    CHECK(st == LC_OK && (len == 0 || memcmp(part, want + a, sizeof(float) * len) == 0), "%s: range [%zu, %zu): %s", t->name,
          a, a + len, st == LC_OK ? "differs" : lc_errmsg());
  }
  CHECK(lc_gguf_read_f32(f, t, n - 3, 4, part) == LC_EINVAL && one_line(), "%s: a range past the end: %s", t->name,
        lc_errmsg());
  free(got);
  free(want);
  free(part);
}

static void test_types(void) {
  char path[1024];
  data_path(path, sizeof path, "types.gguf");
  char *bytes;
  size_t len;
  CHECK(lc_read_file(path, (size_t)1 << 24, &bytes, &len) == LC_OK, "read %s", path);
  lc_rng rng;
  lc_rng_seed(&rng, 7);
  for (int mem = 0; mem < 2; mem++) {
    lc_gguf_file f;
    lc_status st = mem ? lc_gguf_open_mem(&f, bytes, len, "types(mem)") : lc_gguf_open(&f, path);
    CHECK(st == LC_OK, "open %s: %s", path, lc_errmsg());
    if (st != LC_OK) continue;
    CHECK(f.version == 3 && f.alignment == 64 && f.data_off % 64 == 0, "version %u alignment %llu", f.version,
          (unsigned long long)f.alignment);
    // One value of every metadata type.
    int64_t i;
    double d;
    int b;
    char s[64];
    const char *ik[] = {"test.u8", "test.i8", "test.u16", "test.i16", "test.u32", "test.i32", "test.i64"};
    const int64_t iv[] = {200, -5, 65000, -30000, 4000000000LL, -2000000000LL, -(1LL << 40)};
    for (int k = 0; k < 7; k++) {
      const lc_gguf_kv *kv = lc_gguf_find_kv(&f, ik[k]);
      CHECK(kv && lc_gguf_kv_int(&f, kv, &i) == LC_OK && i == iv[k], "%s = %lld", ik[k], kv ? (long long)i : -1LL);
    }
    const lc_gguf_kv *kv = lc_gguf_find_kv(&f, "test.u64");
    CHECK(kv && lc_gguf_kv_int(&f, kv, &i) == LC_EFORMAT && one_line(), "u64 above 2^63: %s", lc_errmsg());
    CHECK(kv && lc_gguf_kv_num(&f, kv, &d) == LC_OK && d == 9223372036854775813.0, "u64 as a number");
    kv = lc_gguf_find_kv(&f, "test.f32");
    CHECK(kv && kv->type == LC_GGUF_F32 && lc_gguf_kv_num(&f, kv, &d) == LC_OK && d == 1.5, "f32");
    CHECK(kv && lc_gguf_kv_int(&f, kv, &i) == LC_EFORMAT && strstr(lc_errmsg(), "test.f32") && strstr(lc_errmsg(), "float32"),
          "f32 is not an integer: %s", lc_errmsg());
    kv = lc_gguf_find_kv(&f, "test.f64");
    CHECK(kv && lc_gguf_kv_num(&f, kv, &d) == LC_OK && d == 0.1, "f64");
    kv = lc_gguf_find_kv(&f, "test.bool");
    CHECK(kv && lc_gguf_kv_bool(&f, kv, &b) == LC_OK && b == 1, "bool");
    kv = lc_gguf_find_kv(&f, "test.str");
    CHECK(kv && lc_gguf_kv_str(&f, kv, s, sizeof s) == LC_OK && !strcmp(s, "h\xc3\xa9llo"), "string '%s'", s);
    CHECK(kv && lc_gguf_kv_str(&f, kv, s, 4) == LC_EFORMAT && one_line(), "string longer than the buffer: %s", lc_errmsg());
    kv = lc_gguf_find_kv(&f, "test.arr_i32");
    CHECK(kv && kv->type == LC_GGUF_ARR && kv->atype == LC_GGUF_I32 && kv->count == 3, "i32 array");
    CHECK(kv && lc_gguf_arr_num(&f, kv, 1, &d) == LC_OK && d == -2, "i32 array element");
    CHECK(kv && lc_gguf_arr_num(&f, kv, 3, &d) == LC_EINVAL && one_line(), "element past the end: %s", lc_errmsg());
    kv = lc_gguf_find_kv(&f, "test.arr_str");
    const char *want[] = {"a", "bc", "", "d\xc3\xa9" "f"};
    for (int k = 0; kv && k < 4; k++)
      CHECK(lc_gguf_arr_str(&f, kv, (uint64_t)k, s, sizeof s) == LC_OK && !strcmp(s, want[k]), "string array %d: '%s'", k, s);
    CHECK(kv && lc_gguf_arr_num(&f, kv, 0, &d) == LC_EFORMAT && one_line(), "strings are not numbers: %s", lc_errmsg());
    kv = lc_gguf_find_kv(&f, "test.arr_f32");
    CHECK(kv && lc_gguf_arr_num(&f, kv, 1, &d) == LC_OK && d == -0.25, "f32 array");
    kv = lc_gguf_find_kv(&f, "test.arr_u8");
    CHECK(kv && kv->atype == LC_GGUF_U8 && lc_gguf_arr_num(&f, kv, 2, &d) == LC_OK && d == 9, "u8 array");
    kv = lc_gguf_find_kv(&f, "test.nested");
    CHECK(kv && kv->atype == LC_GGUF_ARR && kv->count == 2, "nested array");
    CHECK(kv && lc_gguf_arr_num(&f, kv, 0, &d) == LC_EFORMAT && one_line(), "an array of arrays: %s", lc_errmsg());
    CHECK(lc_gguf_find_kv(&f, "general.architecture") && !lc_gguf_find_kv(&f, "no.such.key"), "lookups");
    // Every tensor against gguf-py's dequantization.
    int types_seen[LC_GGML_TYPES] = {0}, checked = 0;
    for (int k = 0; k < f.n; k++) {
      const lc_gguf_tensor *t = &f.tensors[k];
      if (!strncmp(t->name, "ref.", 4)) continue;
      check_tensor_vs_ref(&f, t, &rng);
      types_seen[t->type]++;
      checked++;
    }
    const int readable[] = {LC_GGML_F32, LC_GGML_F16, LC_GGML_BF16, LC_GGML_Q8_0, LC_GGML_Q4_0, LC_GGML_Q4_1,
                            LC_GGML_Q5_0, LC_GGML_Q5_1, LC_GGML_Q4_K, LC_GGML_Q5_K, LC_GGML_Q6_K};
    for (int k = 0; k < 11; k++)
      CHECK(types_seen[readable[k]] > 0 && lc_gguf_type_readable(readable[k]), "type %s tested",
            lc_gguf_type_name(readable[k]));
    const lc_gguf_tensor *t3 = lc_gguf_find(&f, "q3d.Q8_0");
    CHECK(t3 && t3->n_dims == 3 && t3->ne[0] == 64 && t3->ne[1] == 3 && t3->ne[2] == 2, "3-D dims reversed");
    if (!mem) printf("types: %d tensors of %d types equal gguf-py's dequantization bit for bit (whole and %d ranges each)\n",
                     checked, 11, 16);
    lc_gguf_close(&f);
  }
  free(bytes);
  CHECK(lc_gguf_type_block(LC_GGML_Q4_K) == 256 && lc_gguf_type_bytes(LC_GGML_Q4_K) == 144 &&
            lc_gguf_type_bytes(LC_GGML_Q6_K) == 210 && lc_gguf_type_bytes(LC_GGML_Q5_K) == 176,
        "K-quant block sizes");
  CHECK(!strcmp(lc_gguf_type_name(16), "IQ2_XXS") && !lc_gguf_type_readable(16) && !strcmp(lc_gguf_type_name(4), "type 4"),
        "type names");
}

// ---------------------------------------------------------------- models

// Nearest fp16 (ties to even) of a float in fp16's range, as a float.
static float f16_round(float x) {
  if (x == 0 || !isfinite(x)) return x;
  int e;
  (void)frexp(fabs((double)x), &e);                      // |x| = m 2^e, m in [0.5, 1)
  const double q = fmax(ldexp(1.0, e - 11), ldexp(1.0, -24)); // fp16 spacing at |x| (subnormals: 2^-24)
  return (float)copysign(nearbyint(fabs((double)x) / q) * q, (double)x);
}

// The mean loss of one fixed random batch (and, with grads, the gradients), in a given
// precision and checkpoint policy.
static double model_loss_p(lc_model *m, int grads, lc_dtype precision, lc_ckpt_policy ckpt) {
  enum { T = 41 };
  int tok[T], tgt[T], pos[T], counted = 0;
  lc_rng r;
  lc_rng_seed(&r, 99);
  lc_t_make_batch(&r, tok, tgt, pos, T, m->cfg.vocab);
  for (int t = 0; t < T; t++) counted += tgt[t] >= 0;
  lc_attn attn;
  lc_attn_local_init(&attn, m->cfg.n_heads, m->cfg.n_kv_heads, m->cfg.head_dim);
  lc_model_opts o = {.ckpt = ckpt, .precision = precision};
  double loss = 0;
  if (grads) lc_model_zero_grads(m);
  lc_status st = lc_model_fwd_bwd(m, &o, &attn, NULL, tok, tgt, pos, T, 1.0f / counted, grads, &loss);
  CHECK(st == LC_OK, "fwd_bwd: %s", lc_errmsg());
  return loss / counted;
}

static double model_loss(lc_model *m, int grads) { return model_loss_p(m, grads, LC_DT_F32, LC_CKPT_NONE); }

static int same_config(const lc_config *a, const lc_config *b, char *why, size_t cap) {
#define F(x)                                    \
  if (a->x != b->x) {                           \
    snprintf(why, cap, "%s differs", #x);       \
    return 0;                                   \
  }
  F(dim) F(n_layers) F(n_heads) F(n_kv_heads) F(head_dim) F(ffn) F(vocab) F(norm_eps) F(rope_theta) F(tie_embeddings)
  F(max_pos) F(sliding_window) F(arch) F(qkv_bias) F(o_bias) F(qk_norm) F(rope.type) F(rope.factor) F(rope.orig_max)
  F(rope.low_freq_factor) F(rope.high_freq_factor) F(rope.beta_fast) F(rope.beta_slow) F(rope.mscale)
  F(rope.mscale_all_dim) F(rope.attn_factor) F(rope.truncate)
#undef F
  return 1;
}

// Every parameter of a (local) equals b's; b may be a ZeRO-3 store (gathered).
static int params_equal(lc_model *a, lc_model *b, const char **first_bad) {
  for (int i = 0; i < a->n_tensors; i++) {
    const size_t n = a->table[i].numel;
    float *x = malloc(sizeof(float) * n);
    lc_status st = lc_pstore_gather_tensor_part(&b->ps, LC_PS_PARAMS, i, 0, n, x);
    int same = st == LC_OK && memcmp(x, a->params + a->table[i].offset, sizeof(float) * n) == 0;
    free(x);
    if (!same) {
      *first_bad = a->table[i].name;
      return 0;
    }
  }
  return 1;
}

// A model from an HF directory and the same from a GGUF file: config, every parameter
// (local store, and ZeRO-3 through a small staging buffer) and the loss, all equal.
static void check_same_as_hf(const char *hfdir, const char *gguf_file, const char *want_name) {
  char hd[1024], gp[1024], why[64] = "";
  snprintf(hd, sizeof hd, "%s/tests/data/%s", LC_SOURCE_DIR, hfdir);
  data_path(gp, sizeof gp, gguf_file);
  lc_config ch, cg;
  lc_status st = lc_hf_read_config(hd, &ch);
  CHECK(st == LC_OK, "%s config: %s", hd, lc_errmsg());
  st = lc_gguf_read_config(gp, &cg);
  CHECK(st == LC_OK, "%s config: %s", gp, lc_errmsg());
  if (st != LC_OK) return;
  CHECK(same_config(&ch, &cg, why, sizeof why), "%s: config from the GGUF metadata != config.json's: %s", gguf_file, why);
  CHECK(!strcmp(cg.name, want_name), "%s: name '%s', want '%s'", gguf_file, cg.name, want_name);
  lc_model a, b, z;
  CHECK(lc_model_create(&a, &ch, &arena) == LC_OK && lc_model_create(&b, &cg, &arena) == LC_OK, "create");
  CHECK(lc_hf_load_weights(hd, &a) == LC_OK, "HF load: %s", lc_errmsg());
  st = lc_gguf_load_weights(gp, &b);
  CHECK(st == LC_OK, "%s: load: %s", gguf_file, lc_errmsg());
  const char *bad = "";
  CHECK(params_equal(&a, &b, &bad), "%s: parameter %s differs from the HF directory's", gguf_file, bad);
  // ZeRO-3 on one rank: every tensor goes through the staging buffer (LONGCTX_TEST_STAGE_FLOATS
  // = 1000: pieces cut rows and quant blocks anywhere).
  lc_comm *self = NULL;
  CHECK(lc_comm_self(&self) == LC_OK, "self");
  CHECK(lc_model_create_zero(&z, &cg, 3, 0, self, &arena) == LC_OK, "zero-3 model: %s", lc_errmsg());
  CHECK(lc_pstore_tensor_ptr(&z.ps, LC_PS_PARAMS, 0) == NULL, "zero-3 parameters are sharded (staged load)");
  st = lc_gguf_load_weights(gp, &z);
  CHECK(st == LC_OK && params_equal(&a, &z, &bad), "%s: ZeRO-3 staged load: %s", gguf_file, st == LC_OK ? bad : lc_errmsg());
  lc_model_destroy(&z);
  lc_comm_destroy(self);
  const double la = model_loss(&a, 0), lb = model_loss(&b, 0);
  CHECK(la == lb && isfinite(la), "%s: loss %.9f, HF directory %.9f", gguf_file, lb, la);
  printf("%s: config, %d tensors (local and ZeRO-3 staged) and loss %.9f equal the HF directory's\n", gguf_file,
         a.n_tensors, lb);
  lc_model_destroy(&a);
  lc_model_destroy(&b);
}

static void test_llama_q8(void) {
  char gf[1024], gq[1024];
  data_path(gf, sizeof gf, "llama_f32.gguf");
  data_path(gq, sizeof gq, "llama_q8_0.gguf");
  lc_config cf, cq;
  char why[64] = "";
  CHECK(lc_gguf_read_config(gf, &cf) == LC_OK && lc_gguf_read_config(gq, &cq) == LC_OK, "configs: %s", lc_errmsg());
  CHECK(same_config(&cf, &cq, why, sizeof why), "Q8_0 config: %s", why);
  lc_model a, b;
  CHECK(lc_model_create(&a, &cf, &arena) == LC_OK && lc_model_create(&b, &cq, &arena) == LC_OK, "create");
  CHECK(lc_gguf_load_weights(gf, &a) == LC_OK, "f32: %s", lc_errmsg());
  lc_status st = lc_gguf_load_weights(gq, &b);
  CHECK(st == LC_OK, "q8_0: %s", lc_errmsg());
  if (st != LC_OK) return;
  // Weights: Q8_0 rounds each value to d * q, d = fp16(absmax of its 32-block / 127), so
  // |error| <= d / 2 + |q| * |d - absmax / 127| <= absmax * (1/254 + 2^-11 * 127/127) per
  // block; bounded here by the tensor's max. ffn_down (rows of 176, not whole blocks) is the
  // converter's F16 fallback: exactly the fp16 rounding. 1-D tensors are F32: exact.
  double dot_bound = 0, dot = 0; // sum |dL/dw| |dw| (first-order bound on the loss change), sum dL/dw dw
  const double lf = model_loss(&a, 1);
  for (int i = 0; i < a.n_tensors; i++) {
    const lc_param_info *p = &a.table[i];
    const float *x = a.params + p->offset, *y = b.params + p->offset, *g = a.grads + p->offset;
    double mx = 0, err = 0;
    int f16_exact = 1;
    for (size_t j = 0; j < p->numel; j++) {
      mx = fmax(mx, fabs(x[j]));
      err = fmax(err, fabs((double)y[j] - x[j]));
      f16_exact &= f16_round(x[j]) == y[j];
      dot_bound += fabs((double)g[j]) * fabs((double)y[j] - x[j]);
      dot += (double)g[j] * ((double)y[j] - x[j]);
    }
    if (p->ndim == 1) CHECK(err == 0, "%s: F32 in both files, error %g", p->name, err);
    else if (strstr(p->name, "down_proj")) CHECK(f16_exact, "%s: the F16 fallback is the fp16 rounding", p->name);
    else CHECK(err > 0 && err <= mx * (1.0 / 254 + 1.0 / 2048) * 1.0001, "%s: Q8_0 error %g of max %g", p->name, err, mx);
  }
  const double lq = model_loss(&b, 0);
  // Tolerance: the loss moves by dL = g.dw + O(dw^2), g the F32 model's gradient and dw the
  // Q8_0 weights' actual differences (bounded above). So (a) |dL| <= 2 sum |g||dw| (the
  // first-order bound, x2 for the second order), and (b) dL is its first-order prediction
  // g.dw to within 25% (the second-order term is ~|dw|/|w| ~ 0.4% relative to the first;
  // measured 1.7%). A wrong dequantization or q/k order moves weights by O(w), and the
  // loss by O(1), far outside both.
  CHECK(fabs(lq - lf) <= 2 * dot_bound && fabs(lq - lf) > 0, "Q8_0 loss %.6f vs F32 %.6f: |diff| %.2e, first-order bound %.2e",
        lq, lf, fabs(lq - lf), dot_bound);
  CHECK(fabs((lq - lf) - dot) <= 0.25 * fabs(dot) + 1e-4, "Q8_0 loss change %.4e vs its first-order prediction g.dw %.4e",
        lq - lf, dot);
  printf("llama_q8_0.gguf: loss %.6f vs F32 %.6f (diff %.3e = %.2f%%; first order g.dw %.3e, bound sum|g||dw| %.2e)\n", lq,
         lf, lq - lf, 100 * fabs(lq - lf) / lf, dot, dot_bound);
  lc_model_destroy(&a);
  lc_model_destroy(&b);
}

// QLoRA: the same adapters on llama_q8_0.gguf's base held in its own blocks (Q8_0
// projections, embedding and LM head; ffn_down, the converter's F16 fallback, dense) and on the same file
// dequantized to fp32 by the reader. Read back, every tensor is the reader's (the q/k rows
// permuted as whole block rows); the loss and the adapters' gradients agree to the GEMMs'
// rounding; the base has no gradient buffer and its bytes do not change.
static void test_qlora(void) {
  char gq[1024];
  data_path(gq, sizeof gq, "llama_q8_0.gguf");
  for (int bf = 0; bf < 2; bf++) {
    lc_config c;
    CHECK(lc_gguf_read_config(gq, &c) == LC_OK, "config: %s", lc_errmsg());
    c.lora = (lc_lora){.rank = 4, .alpha = 8, .targets = LC_LORA_ALL, .base_bf16 = bf};
    lc_config cq = c;
    CHECK(lc_gguf_base_blocks(gq, &cq) == LC_OK, "blocks: %s", lc_errmsg());
    CHECK(cq.base_q[0][LC_LORA_Q] == LC_DT_Q8_0 && cq.base_q[1][LC_LORA_UP] == LC_DT_Q8_0 && cq.base_q[1][LC_LORA_O] == LC_DT_Q8_0 &&
              cq.base_q[0][LC_LORA_DOWN] == 0 && cq.base_q_embed == LC_DT_Q8_0 && cq.base_q_head == LC_DT_Q8_0 &&
              lc_config_base_quant(&cq) && !lc_config_base_quant(&c),
          "the file's Q8_0 projections held in blocks, its F16 ffn_down dense");
    lc_model a, b;
    if (lc_model_create(&a, &c, &arena) != LC_OK) {
      CHECK(0, "create: %s", lc_errmsg());
      return;
    }
    CHECK(lc_model_create(&b, &cq, &arena) == LC_OK, "create (blocks): %s", lc_errmsg());
    CHECK(b.ps.store == LC_DT_U8 && !lc_buf_ok(b.ps.grads_b) && !lc_buf_ok(a.ps.grads_b), "a frozen base: no gradient buffer");
    CHECK(lc_model_init_random(&a, 5) == LC_OK && lc_model_init_random(&b, 5) == LC_OK, "init: %s", lc_errmsg());
    CHECK(lc_gguf_load_weights(gq, &a) == LC_OK && lc_gguf_load_weights(gq, &b) == LC_OK, "load: %s", lc_errmsg());
    // Read back: blocks dequantized (bf16: the dense store holds them rounded), dense equal.
    size_t maxn = 0;
    for (int i = 0; i < a.n_tensors; i++) maxn = a.table[i].numel > maxn ? a.table[i].numel : maxn;
    float *x = malloc(sizeof(float) * maxn), *y = malloc(sizeof(float) * maxn);
    int nq = 0;
    for (int i = 0; i < a.n_tensors; i++) {
      const size_t n = a.table[i].numel;
      const int q = lc_dtype_is_quant(lc_pstore_held_dtype(&b.ps, i));
      nq += q;
      CHECK(lc_pstore_gather_tensor(&a.ps, LC_PS_PARAMS, i, x) == LC_OK && lc_pstore_gather_tensor(&b.ps, LC_PS_PARAMS, i, y) == LC_OK,
            "read back: %s", lc_errmsg());
      if (q && bf) lc_bf16_round(y, n);
      CHECK(!memcmp(x, y, sizeof(float) * n), "%s (%s) read back differs from the reader's dequantization", a.table[i].name,
            lc_dtype_name(lc_pstore_held_dtype(&b.ps, i)));
    }
    CHECK(nq == 6 * a.cfg.n_layers + 2, "%d tensors held in blocks (6 projections per layer, the embedding, the head)", nq);
    // The same random adapters in both.
    lc_rng r;
    lc_rng_seed(&r, 7);
    for (int t = 0; t < a.ad.lay.n_tensors; t++) {
      const size_t n = a.ad.lay.table[t].numel;
      for (size_t j = 0; j < n; j++) x[j] = 0.1f * lc_rng_normal(&r);
      lc_pstore_set_tensor_part(&a.ad, LC_PS_PARAMS, t, 0, x, n);
      lc_pstore_set_tensor_part(&b.ad, LC_PS_PARAMS, t, 0, x, n);
    }
    const lc_dtype prec = bf ? LC_DT_BF16 : LC_DT_F32;
    const uint64_t before = lc_hash64_of(lc_buf_host(b.ps.params_b), lc_buf_bytes(b.ps.params_b));
    const double la = model_loss_p(&a, 1, prec, LC_CKPT_SELECTIVE), lb = model_loss_p(&b, 1, prec, LC_CKPT_SELECTIVE);
    // Tolerance: both compute on the same operand values (the dequantized weights; in bf16
    // the same bf16 roundings of them), only in other GEMM blockings (tiles of 1024 weight
    // rows, chunks of 1024 tokens): fp32 sums that differ by a few ulps per dot product,
    // 1e-6 relative after 2 layers; bf16 passes round activations to 8 bits, where a flip of
    // one rounding moves a value by 2^-8: 1e-3 of the loss and 2% of the gradient's scale.
    const double tl = bf ? 1e-3 : 1e-5, tg = bf ? 2e-2 : 1e-4;
    double gmax = 0, gerr = 0;
    for (size_t j = 0; j < a.ad.n_grads; j++) {
      gmax = fmax(gmax, fabs(a.ad.grads[j]));
      gerr = fmax(gerr, fabs((double)a.ad.grads[j] - b.ad.grads[j]));
    }
    CHECK(isfinite(la) && fabs(la - lb) <= tl * fabs(la), "%s pass: loss %.9f in blocks, %.9f dequantized", bf ? "bf16" : "fp32", lb, la);
    CHECK(gmax > 0 && gerr <= tg * gmax, "%s pass: adapter gradients differ by %.3e of max %.3e", bf ? "bf16" : "fp32", gerr, gmax);
    CHECK(lc_hash64_of(lc_buf_host(b.ps.params_b), lc_buf_bytes(b.ps.params_b)) == before, "the frozen blocks changed");
    printf("llama_q8_0.gguf QLoRA, %s pass: %d tensors in Q8_0 read back as the reader's; loss %.9f vs dequantized %.9f, "
           "adapter gradients within %.2e of max %.2e\n", bf ? "bf16" : "fp32", nq, lb, la, gerr, gmax);
    free(x), free(y);
    lc_model_destroy(&a);
    lc_model_destroy(&b);
  }
}

// A base whose blocks differ by layer and projection (five block types, the embedding and
// the untied head too, ffn_down's rows of 176 dense): each tensor is held in the type its
// layer and projection were given (named independently here, from the tensor's HF name), at
// its own offset: blocks set raw into one tensor read back as their dequantization, and the
// tensors around it keep theirs.
static void test_held_blocks(void) {
  static const char *proj[LC_LORA_N] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  static const lc_dtype types[5] = {LC_DT_Q8_0, LC_DT_Q4_0, LC_DT_Q4_1, LC_DT_Q5_0, LC_DT_Q5_1};
  lc_config c;
  lc_config_preset(&c, "tiny");
  c.tie_embeddings = 0;
  c.lora = (lc_lora){.rank = 4, .alpha = 4, .targets = LC_LORA_ALL};
  for (int l = 0; l < c.n_layers; l++)
    for (int p = 0; p < LC_LORA_N; p++)
      if (p != LC_LORA_DOWN) c.base_q[l][p] = (unsigned char)types[(3 * l + p) % 5];
  c.base_q_embed = LC_DT_Q5_1, c.base_q_head = LC_DT_Q4_1;
  lc_model m;
  if (lc_model_create(&m, &c, &arena) != LC_OK) {
    CHECK(0, "create: %s", lc_errmsg());
    return;
  }
  CHECK(lc_model_init_random(&m, 3) == LC_OK, "init: %s", lc_errmsg());
  int nq = 0, target = -1;
  for (int i = 0; i < m.n_tensors; i++) {
    const lc_param_info *p = &m.table[i];
    lc_dtype want = LC_DT_F32; // dense (an fp32 pass)
    if (!strcmp(p->name, "model.embed_tokens.weight")) want = LC_DT_Q5_1;
    else if (!strcmp(p->name, "lm_head.weight")) want = LC_DT_Q4_1;
    for (int j = 0; j < LC_LORA_N; j++)
      if (p->layer >= 0 && strstr(p->name, proj[j]) && j != LC_LORA_DOWN) want = types[(3 * p->layer + j) % 5];
    const lc_dtype got = lc_pstore_held_dtype(&m.ps, i);
    CHECK(got == want, "%s held as %s, given %s", p->name, lc_dtype_name(got), lc_dtype_name(want));
    nq += lc_dtype_is_quant(got);
    if (p->layer == 1 && strstr(p->name, "up_proj")) target = i;
  }
  CHECK(nq == 6 * c.n_layers + 2 && target >= 0, "%d tensors in blocks", nq);
  if (target < 0) goto out;
  // Random valid Q-blocks into layer 1's up_proj; its neighbours' values before and after.
  const lc_param_info *T = &m.table[target];
  const lc_dtype d = lc_pstore_held_dtype(&m.ps, target);
  const size_t nb = lc_bytes(d, T->numel);
  unsigned char *raw = malloc(nb);
  float *want = malloc(sizeof(float) * T->numel), *got = malloc(sizeof(float) * T->numel);
  float *nb0 = malloc(sizeof(float) * m.table[target - 1].numel), *nb1 = malloc(sizeof(float) * m.table[target - 1].numel);
  lc_rng r;
  lc_rng_seed(&r, 11);
  for (size_t j = 0; j < nb; j++) raw[j] = (unsigned char)(lc_rng_uniform(&r) * 256);
  for (size_t k = 0; k < nb; k += lc_dtype_block_bytes(d)) raw[k] = 0x00, raw[k + 1] = 0x20; // f16 scale 2^-7 (and Q4_1's m: any finite)
  if (d == LC_DT_Q4_1 || d == LC_DT_Q5_1)
    for (size_t k = 0; k < nb; k += lc_dtype_block_bytes(d)) raw[k + 2] = 0x00, raw[k + 3] = 0xa0; // m = -2^-7
  lc_dequant(d, raw, T->numel, want);
  CHECK(lc_pstore_gather_tensor(&m.ps, LC_PS_PARAMS, target - 1, nb0) == LC_OK, "read: %s", lc_errmsg());
  CHECK(lc_pstore_set_tensor_raw(&m.ps, target, 0, raw, nb) == LC_OK, "set raw: %s", lc_errmsg());
  CHECK(lc_pstore_set_tensor_raw(&m.ps, target, 1, raw, nb) != LC_OK, "a range past the tensor's blocks is refused");
  CHECK(lc_pstore_gather_tensor(&m.ps, LC_PS_PARAMS, target, got) == LC_OK &&
            lc_pstore_gather_tensor(&m.ps, LC_PS_PARAMS, target - 1, nb1) == LC_OK, "read: %s", lc_errmsg());
  CHECK(!memcmp(got, want, sizeof(float) * T->numel), "%s (%s) read back differs from its blocks' dequantization", T->name,
        lc_dtype_name(d));
  CHECK(!memcmp(nb0, nb1, sizeof(float) * m.table[target - 1].numel), "writing %s changed %s", T->name, m.table[target - 1].name);
  // A part of the tensor from inside a block (the covering blocks decoded, the range kept).
  CHECK(lc_pstore_gather_tensor_part(&m.ps, LC_PS_PARAMS, target, 45, 100, got) == LC_OK && !memcmp(got, want + 45, 400),
        "elements [45, 145) of %s", T->name);
  printf("held blocks: %d tensors each in its layer's and projection's type (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1), %s's set raw "
         "reads back as its dequantization\n", nq, T->name);
  free(raw), free(want), free(got), free(nb0), free(nb1);
out:
  lc_model_destroy(&m);
}

static void test_rope_freqs(void) {
  char p[1024];
  lc_config c;
  data_path(p, sizeof p, "llama3_rope.gguf");
  lc_status st = lc_gguf_read_config(p, &c);
  CHECK(st == LC_OK, "llama3_rope: %s", lc_errmsg());
  CHECK(c.rope.type == LC_ROPE_LLAMA3 && c.rope.factor == 8.0 && c.rope.low_freq_factor == 1.0 &&
            c.rope.high_freq_factor == 4.0 && c.rope.orig_max == 8192 && c.max_pos == 131072,
        "llama3 parameters back from rope_freqs.weight: type %d factor %g low %g high %g orig %d max_pos %d", (int)c.rope.type,
        c.rope.factor, c.rope.low_freq_factor, c.rope.high_freq_factor, c.rope.orig_max, c.max_pos);
  data_path(p, sizeof p, "llama3_badrope.gguf");
  st = lc_gguf_read_config(p, &c);
  CHECK(st == LC_EINVAL && strstr(lc_errmsg(), "rope_freqs.weight") && strstr(lc_errmsg(), "llama3_badrope.gguf") &&
            one_line(),
        "factors no llama3 scaling gives are refused: %s", lc_errmsg());
}

// ---------------------------------------------------------------- hand-made files

typedef struct {
  unsigned char *b;
  size_t n, cap;
} wbuf;

static void put(wbuf *w, const void *p, size_t n) {
  if (w->n + n > w->cap) {
    w->cap = (w->n + n) * 2 + 256;
    w->b = realloc(w->b, w->cap);
  }
  memcpy(w->b + w->n, p, n);
  w->n += n;
}
static void put_u32(wbuf *w, uint32_t v) {
  unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
  put(w, b, 4);
}
static void put_u64(wbuf *w, uint64_t v) {
  put_u32(w, (uint32_t)v);
  put_u32(w, (uint32_t)(v >> 32));
}
static void put_str(wbuf *w, const char *s) {
  put_u64(w, strlen(s));
  put(w, s, strlen(s));
}

typedef struct {
  char key[64];
  int type; // LC_GGUF_U32, F32 or STR
  uint32_t u;
  float f;
  char s[32];
} tkv;
typedef struct {
  char name[64];
  int n_dims, type;
  uint64_t ne[2];
} tten;

// A tiny llama: dim 16, 1 layer, heads 2 (head_dim 8), kv heads 1, ffn 16, vocab 8, untied.
// F32 tensor element (row r, column c) = r * 100 + c + 1000 * tensor index.
static void tiny(tkv *kv, int *nkv, tten *t, int *nt) {
  const tkv k0[] = {{"general.architecture", LC_GGUF_STR, 0, 0, "llama"},
                    {"llama.block_count", LC_GGUF_U32, 1, 0, ""},
                    {"llama.embedding_length", LC_GGUF_U32, 16, 0, ""},
                    {"llama.feed_forward_length", LC_GGUF_U32, 16, 0, ""},
                    {"llama.attention.head_count", LC_GGUF_U32, 2, 0, ""},
                    {"llama.attention.head_count_kv", LC_GGUF_U32, 1, 0, ""},
                    {"llama.attention.layer_norm_rms_epsilon", LC_GGUF_F32, 0, 1e-5f, ""},
                    {"llama.vocab_size", LC_GGUF_U32, 8, 0, ""}};
  const tten t0[] = {{"token_embd.weight", 2, 0, {16, 8}},      {"blk.0.attn_norm.weight", 1, 0, {16, 1}},
                     {"blk.0.attn_q.weight", 2, 0, {16, 16}},   {"blk.0.attn_k.weight", 2, 0, {16, 8}},
                     {"blk.0.attn_v.weight", 2, 0, {16, 8}},    {"blk.0.attn_output.weight", 2, 0, {16, 16}},
                     {"blk.0.ffn_norm.weight", 1, 0, {16, 1}},  {"blk.0.ffn_gate.weight", 2, 0, {16, 16}},
                     {"blk.0.ffn_up.weight", 2, 0, {16, 16}},   {"blk.0.ffn_down.weight", 2, 0, {16, 16}},
                     {"output_norm.weight", 1, 0, {16, 1}},     {"output.weight", 2, 0, {16, 8}}};
  memcpy(kv, k0, sizeof k0);
  memcpy(t, t0, sizeof t0);
  *nkv = (int)(sizeof k0 / sizeof k0[0]);
  *nt = (int)(sizeof t0 / sizeof t0[0]);
}

static void write_gguf(const char *path, const tkv *kv, int nkv, const tten *t, int nt) {
  wbuf w = {0};
  put(&w, "GGUF", 4);
  put_u32(&w, 3);
  put_u64(&w, (uint64_t)nt);
  put_u64(&w, (uint64_t)nkv);
  for (int i = 0; i < nkv; i++) {
    put_str(&w, kv[i].key);
    put_u32(&w, (uint32_t)kv[i].type);
    if (kv[i].type == LC_GGUF_U32) put_u32(&w, kv[i].u);
    else if (kv[i].type == LC_GGUF_F32) put(&w, &kv[i].f, 4);
    else put_str(&w, kv[i].s);
  }
  uint64_t off = 0;
  for (int i = 0; i < nt; i++) {
    put_str(&w, t[i].name);
    put_u32(&w, (uint32_t)t[i].n_dims);
    for (int d = 0; d < t[i].n_dims; d++) put_u64(&w, t[i].ne[d]);
    put_u32(&w, (uint32_t)t[i].type);
    put_u64(&w, off);
    const uint64_t numel = t[i].ne[0] * (t[i].n_dims > 1 ? t[i].ne[1] : 1);
    const uint64_t bytes = numel / (uint64_t)lc_gguf_type_block(t[i].type) * (uint64_t)lc_gguf_type_bytes(t[i].type);
    off += (bytes + 31) / 32 * 32;
  }
  while (w.n % 32) put(&w, "", 1);
  for (int i = 0; i < nt; i++) {
    const uint64_t rows = t[i].n_dims > 1 ? t[i].ne[1] : 1, numel = t[i].ne[0] * rows;
    const size_t start = w.n;
    if (t[i].type == LC_GGML_F32) {
      for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < t[i].ne[0]; c++) {
          const float v = (float)(r * 100 + c + 1000 * (uint64_t)i);
          put(&w, &v, 4);
        }
    } else {
      const uint64_t bytes = numel / (uint64_t)lc_gguf_type_block(t[i].type) * (uint64_t)lc_gguf_type_bytes(t[i].type);
      for (uint64_t k = 0; k < bytes; k++) put(&w, "", 1);
    }
    while ((w.n - start) % 32) put(&w, "", 1);
  }
  CHECK(lc_write_file_atomic(path, w.b, w.n) == LC_OK, "write %s", path);
  free(w.b);
}

static lc_status load_tiny(const char *path, lc_model *m) {
  lc_config c;
  LC_TRY(lc_gguf_read_config(path, &c));
  LC_TRY(lc_model_create(m, &c, &arena));
  lc_status st = lc_gguf_load_weights(path, m);
  if (st != LC_OK) lc_model_destroy(m);
  return st;
}

static void test_handmade(void) {
  char p[600];
  snprintf(p, sizeof p, "%s/tiny.gguf", tmpdir);
  tkv kv[16];
  tten t[16];
  int nkv, nt;
  tiny(kv, &nkv, t, &nt);
  // The valid one: config, and q/k rows un-permuted. GGUF row g of q holds g*100 + c; HF
  // row r of a head of 8 rows comes from GGUF row [0, 2, 4, 6, 1, 3, 5, 7][r] (the inverse
  // of LlamaModel.permute, which takes HF row [0, 4, 1, 5, 2, 6, 3, 7][g] to GGUF row g;
  // 2 heads for q, 1 for k); v is not permuted.
  write_gguf(p, kv, nkv, t, nt);
  lc_model m;
  lc_status st = load_tiny(p, &m);
  CHECK(st == LC_OK, "tiny: %s", lc_errmsg());
  if (st == LC_OK) {
    CHECK(!m.cfg.tie_embeddings && m.cfg.head_dim == 8 && !strcmp(m.cfg.name, "tiny") && m.cfg.max_pos == 2048 &&
              m.cfg.rope_theta == 10000.0 && m.cfg.rope.type == LC_ROPE_DEFAULT,
          "tiny config (name '%s' from the file name, defaults)", m.cfg.name);
    const int qsrc[16] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15}, ksrc[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    int ok = 1;
    for (int i = 0; i < m.n_tensors; i++) {
      const lc_param_info *pi = &m.table[i];
      const float *x = m.params + pi->offset;
      const int tix = strstr(pi->name, "q_proj") ? 2 : strstr(pi->name, "k_proj") ? 3 : strstr(pi->name, "v_proj") ? 4 : -1;
      if (tix < 0) continue;
      for (long r = 0; r < pi->shape[0]; r++)
        for (long c = 0; c < pi->shape[1]; c++) {
          const int g = tix == 2 ? qsrc[r] : tix == 3 ? ksrc[r] : (int)r;
          ok &= x[r * pi->shape[1] + c] == (float)(g * 100 + c + 1000 * tix);
        }
    }
    CHECK(ok, "q/k rows un-permuted as LlamaModel.permute's inverse, v untouched");
    lc_model_destroy(&m);
  }
  // Config errors: each case edits a copy of the valid metadata.
  struct {
    const char *what, *key;
    int type;
    uint32_t u;
    const char *s, *want1, *want2;
  } cases[] = {
      {"unknown family", "general.architecture", LC_GGUF_STR, 0, "gemma2", "'gemma2' is not supported", "nearest is LlamaForCausalLM"},
      {"Qwen2-VL", "general.architecture", LC_GGUF_STR, 0, "qwen2vl", "'qwen2vl'", "nearest is Qwen2ForCausalLM"},
      {"no block_count", "llama.block_count", -1, 0, NULL, "llama.block_count is missing", NULL},
      {"block_count a string", "llama.block_count", LC_GGUF_STR, 0, "2", "llama.block_count", "string"},
      {"zero heads", "llama.attention.head_count", LC_GGUF_U32, 0, NULL, "head_count is 0", NULL},
      {"partial RoPE", "llama.rope.dimension_count", LC_GGUF_U32, 2, NULL, "partial rotary", NULL},
      {"MoE", "llama.expert_count", LC_GGUF_U32, 8, NULL, "mixture-of-experts", NULL},
      {"value_length", "llama.attention.value_length", LC_GGUF_U32, 4, NULL, "value_length 4", NULL},
      {"longrope", "llama.rope.scaling.type", LC_GGUF_STR, 0, "longrope", "'longrope' is not supported", NULL},
      {"yarn log multiplier", "llama.rope.scaling.yarn_log_multiplier", LC_GGUF_U32, 1, NULL, "yarn_log_multiplier", NULL},
      {"heads not dividing", "llama.attention.head_count_kv", LC_GGUF_U32, 3, NULL, "num_key_value_heads 3", NULL},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    tkv e[17];
    int ne = 0;
    for (int i = 0; i < nkv; i++)
      if (strcmp(kv[i].key, cases[k].key) != 0) e[ne++] = kv[i];
    if (cases[k].type >= 0) {
      memset(&e[ne], 0, sizeof e[ne]);
      snprintf(e[ne].key, sizeof e[ne].key, "%s", cases[k].key);
      e[ne].type = cases[k].type;
      e[ne].u = cases[k].u;
      if (cases[k].s) snprintf(e[ne].s, sizeof e[ne].s, "%s", cases[k].s);
      if (!strcmp(cases[k].what, "yarn log multiplier")) { // a yarn file with llama.cpp's own multiplier
        e[ne].type = LC_GGUF_F32;
        e[ne].f = 0.1f;
        ne++;
        memset(&e[ne], 0, sizeof e[ne]);
        snprintf(e[ne].key, sizeof e[ne].key, "llama.rope.scaling.type");
        e[ne].type = LC_GGUF_STR;
        snprintf(e[ne].s, sizeof e[ne].s, "yarn");
        ne++;
        memset(&e[ne], 0, sizeof e[ne]);
        snprintf(e[ne].key, sizeof e[ne].key, "llama.rope.scaling.factor");
        e[ne].type = LC_GGUF_F32;
        e[ne].f = 4.0f;
      }
      ne++;
    }
    write_gguf(p, e, ne, t, nt);
    lc_config c;
    st = lc_gguf_read_config(p, &c);
    CHECK(st != LC_OK && one_line() && strstr(lc_errmsg(), "tiny.gguf") && strstr(lc_errmsg(), cases[k].want1) &&
              (!cases[k].want2 || strstr(lc_errmsg(), cases[k].want2)),
          "%s: %s", cases[k].what, lc_errmsg());
  }
  // Weight errors: a missing tensor, an extra one, a wrong shape, an undecodable type.
  for (int v = 0; v < 4; v++) {
    tten e[17];
    memcpy(e, t, sizeof(tten) * (size_t)nt);
    int n = nt;
    const char *want = NULL, *want2 = NULL;
    if (v == 0) { // drop blk.0.ffn_up.weight
      for (int i = 8; i < n - 1; i++) e[i] = e[i + 1];
      n--;
      want = "'blk.0.ffn_up.weight' (the model's model.layers.0.mlp.up_proj.weight) is missing";
    } else if (v == 1) {
      e[n++] = (tten){"blk.0.attn_q.bias", 1, 0, {16, 1}};
      want = "unexpected tensor 'blk.0.attn_q.bias'"; // read as an attention bias: the model has one
    } else if (v == 2) {
      e[2].ne[1] = 4;
      want = "'blk.0.attn_q.weight' has GGUF dims [16, 4]";
      want2 = "[16, 16]";
    } else {
      e[9].type = 16; // IQ2_XXS: 256-element rows
      e[9].ne[0] = 256;
      e[9].ne[1] = 8;
      want = "IQ2_XXS";
      want2 = "cannot dequantize";
    }
    write_gguf(p, kv, nkv, e, n);
    lc_config c;
    st = lc_gguf_read_config(p, &c);
    if (v == 1) { // a q bias makes the config have q/k/v biases: k and v's are then missing
      CHECK(st == LC_OK && c.qkv_bias, "q bias -> biases: %s", lc_errmsg());
      want = "'blk.0.attn_k.bias'";
      want2 = "is missing";
    }
    if (st == LC_OK) {
      st = lc_model_create(&m, &c, &arena);
      if (st == LC_OK) {
        st = lc_gguf_load_weights(p, &m);
        lc_model_destroy(&m);
      }
    }
    CHECK(st == LC_EFORMAT && one_line() && strstr(lc_errmsg(), "tiny.gguf") && strstr(lc_errmsg(), want) &&
              (!want2 || strstr(lc_errmsg(), want2)),
          "weights case %d: %s", v, lc_errmsg());
  }
  // An extra tensor the family never has, and rope_freqs.weight of all ones (plain RoPE).
  {
    tten e[17];
    memcpy(e, t, sizeof(tten) * (size_t)nt);
    e[nt] = (tten){"blk.0.ffn_gate_exps.weight", 2, 0, {8, 16}};
    write_gguf(p, kv, nkv, e, nt + 1);
    st = load_tiny(p, &m);
    CHECK(st == LC_EFORMAT && strstr(lc_errmsg(), "unexpected tensor 'blk.0.ffn_gate_exps.weight'") && one_line(),
          "extra tensor: %s", lc_errmsg());
  }
  // Not a file / not GGUF.
  lc_config c;
  snprintf(p, sizeof p, "%s/none.gguf", tmpdir);
  CHECK(lc_gguf_read_config(p, &c) == LC_EIO && strstr(lc_errmsg(), "none.gguf") && one_line(), "missing file: %s",
        lc_errmsg());
  CHECK(lc_gguf_is_model_path(p) && !lc_gguf_is_model_path("tiny") && !lc_gguf_is_model_path(tmpdir), "model paths");
  snprintf(p, sizeof p, "%s/model.bin", tmpdir);
  write_gguf(p, kv, nkv, t, nt);
  CHECK(lc_gguf_is_model_path(p), "a file starting with GGUF is a GGUF model whatever its name");
}

int main(void) {
  // Sharded loads stage 1000 floats at a time (before anything reads the setting).
  setenv("LONGCTX_TEST_STAGE_FLOATS", "1000", 1);
  lc_arena_init(&arena, 0);
  snprintf(tmpdir, sizeof tmpdir, "/tmp/lc_test_gguf_%d", (int)getpid());
  lc_mkdir_p(tmpdir);
  test_types();
  check_same_as_hf("golden_untied", "llama_f32.gguf", "Golden-Untied-llama.cpp-style");
  test_llama_q8();
  test_qlora();
  test_held_blocks();
  check_same_as_hf("gguf/qwen2_hf", "qwen2_f16.gguf", "Qwen2-Tiny-test");
  check_same_as_hf("gguf/qwen3_hf", "qwen3_bf16.gguf", "qwen3-tiny-test");
  test_rope_freqs();
  test_handmade();
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
  CHECK(arena.cur_total == 0, "arena empty at the end (%zu bytes left)", arena.cur_total);
  return lc_test_finish("test_gguf");
}
