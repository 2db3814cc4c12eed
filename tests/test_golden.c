// Golden values from Hugging Face transformers itself (tools/make_golden.py; data in
// tests/data/golden_{untied,tied}): the model is loaded through the HF directory code,
// then the loss, every parameter gradient (training path) and the logits (KV-cache
// decode path) must match what transformers computed. The first cases use GQA,
// rope_theta 500000 and rms_norm_eps 1e-6 (non-default); golden_mistral is
// MistralForCausalLM with sliding_window 8 (the window cuts 29 of the 37 rows). Then the
// families and RoPE scalings, each at S = 37 beyond its original context so the scaling
// matters (golden.json of each says which frequency pairs each band holds): llama3,
// linear, dynamic, yarn, longrope; Qwen2 (q/k/v biases) untied and tied; Qwen3 (q/k
// norms, head_dim 24 != 64/4, tied) and Qwen3 with attention_bias (q/k/v/o biases) and
// YaRN without truncation. Each case also checks --precision bf16 against transformers
// under bf16 autocast (golden_bf16.*). golden_mask (tools/make_mask_golden.py): a Qwen2
// model's loss and every gradient on a masked conversation and on two conversations packed
// in one sequence (restarted positions, attention inside each) against transformers in
// float64 with labels -100.
#include <cjson/cJSON.h>
#include <string.h>

#include "attn/attn.h"
#include "io/fsutil.h"
#include "io/safetensors.h"
#include "model/generate.h"
#include "model/hf.h"
#include "model/model.h"
#include "core/rope.h"
#include "testutil.h"

static float *read_tensor(lc_st_file *f, const char *name, size_t n) {
  const lc_st_tensor *t = lc_st_find(f, name);
  CHECK(t != NULL, "golden file lacks %s", name);
  if (!t) return NULL;
  float *x = malloc(sizeof(float) * n);
  lc_status st = lc_st_read_f32(f, t, x, n);
  CHECK(st == LC_OK, "read %s: %s", name, lc_errmsg());
  return x;
}

// What each case's config.json must be read as.
typedef struct {
  const char *name;
  lc_arch_id arch;
  lc_rope_type rope;
  int qkv_bias, o_bias, qk_norm, head_dim, window, tied;
} golden_case;

// transformers' own bf16-vs-fp32 distance of the case's worst gradient tensor
// (golden_bf16.json: grads_rel_l2_vs_fp32), the scale of the bf16 bounds.
static double hf_bf16_worst(const char *dir) {
  char path[1200], *text = NULL;
  size_t n = 0;
  snprintf(path, sizeof path, "%s/golden_bf16.json", dir);
  if (lc_read_file(path, 1 << 20, &text, &n) != LC_OK) return 0.05;
  cJSON *j = cJSON_ParseWithLength(text, n);
  free(text);
  const cJSON *g = cJSON_GetObjectItemCaseSensitive(j, "grads_rel_l2_vs_fp32"), *it;
  double w = 0;
  cJSON_ArrayForEach(it, g) if (cJSON_IsNumber(it)) w = fmax(w, it->valuedouble);
  cJSON_Delete(j);
  CHECK(w > 0, "%s: no grads_rel_l2_vs_fp32", path);
  return w;
}

// golden.json's "rope": the frequencies and attention factor transformers' rotary module
// used for this forward (S = 37) against lc_rope_freqs (transformers computes them in
// float32: ~1 ulp of 6e-8 per operation, a few per value; bound 2e-6 relative).
static void check_rope_freqs(const char *dir, const lc_config *cfg) {
  char path[1200], *text = NULL;
  size_t n = 0;
  snprintf(path, sizeof path, "%s/golden.json", dir);
  if (lc_read_file(path, 1 << 22, &text, &n) != LC_OK) return; // the first cases predate the record
  cJSON *j = cJSON_ParseWithLength(text, n);
  free(text);
  const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "rope");
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(r, "inv_freq_f32"), *af = cJSON_GetObjectItemCaseSensitive(r, "attention_scaling");
  if (cJSON_IsArray(f) && cJSON_IsNumber(af)) {
    double inv[LC_ROPE_MAX_PAIRS], a;
    lc_rope_freqs(inv, &a, cfg->head_dim, cfg->rope_theta, &cfg->rope, cfg->max_pos, 37);
    CHECK(cJSON_GetArraySize(f) == cfg->head_dim / 2, "%s: %d frequencies recorded", dir, cJSON_GetArraySize(f));
    double worst = 0;
    for (int i = 0; i < cfg->head_dim / 2 && i < cJSON_GetArraySize(f); i++) {
      const double want = cJSON_GetArrayItem(f, i)->valuedouble;
      worst = fmax(worst, fabs(inv[i] - want) / want);
    }
    CHECK(worst <= 2e-6, "%s: inv_freq relative error %.3g", dir, worst);
    CHECK(fabs(a - af->valuedouble) <= 1e-12, "%s: attention factor %.17g vs %.17g", dir, a, af->valuedouble);
  }
  cJSON_Delete(j);
}

// greedy.json (where present): transformers' generate, greedy, 30 new tokens from a
// 10-token prompt; lc_decode must pick the same tokens (the KV cache keeps each key's
// frequencies of its step, as transformers' cache does, for the length-dependent types).
static void check_greedy(const char *dir, const lc_model *m, lc_arena *ar) {
  char path[1200], *text = NULL;
  size_t n = 0;
  snprintf(path, sizeof path, "%s/greedy.json", dir);
  if (lc_read_file(path, 1 << 20, &text, &n) != LC_OK) return;
  cJSON *j = cJSON_ParseWithLength(text, n);
  free(text);
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "prompt"), *g = cJSON_GetObjectItemCaseSensitive(j, "generated");
  int toks[64], np = cJSON_GetArraySize(p), ng = cJSON_GetArraySize(g), same = 0;
  for (int i = 0; i < np; i++) toks[i] = cJSON_GetArrayItem(p, i)->valueint;
  lc_kv_cache c;
  CHECK(lc_kv_cache_create(&c, &m->cfg, np + ng, m->ps.be) == LC_OK, "cache: %s", lc_errmsg());
  float *logits = malloc(sizeof(float) * (size_t)m->cfg.vocab);
  lc_status st = lc_decode(m, &c, toks, np, logits, 0, ar);
  for (int k = 0; k < ng && st == LC_OK; k++) {
    int best = 0;
    for (int v = 1; v < m->cfg.vocab; v++) best = logits[v] > logits[best] ? v : best;
    same += best == cJSON_GetArrayItem(g, k)->valueint;
    st = lc_decode(m, &c, &best, 1, logits, 0, ar);
  }
  CHECK(st == LC_OK && same == ng, "%s: greedy decoding matches transformers' on %d of %d tokens", dir, same, ng);
  printf("%s: greedy decoding = transformers' cached greedy decoding (%d tokens)\n", dir, same);
  free(logits);
  lc_kv_cache_destroy(&c);
  cJSON_Delete(j);
}

static void check_case(const golden_case *gc) {
  const char *name = gc->name;
  char dir[1024], path[1100];
  snprintf(dir, sizeof dir, "%s/tests/data/%s", LC_SOURCE_DIR, name);
  snprintf(path, sizeof path, "%s/golden.safetensors", dir);
  lc_arena ar;
  lc_arena_init(&ar, 0);
  lc_config cfg;
  lc_status st = lc_hf_read_config(dir, &cfg);
  CHECK(st == LC_OK, "%s config: %s", name, lc_errmsg());
  CHECK(cfg.norm_eps == 1e-6f && cfg.n_kv_heads < cfg.n_heads && (gc->rope != LC_ROPE_DEFAULT || cfg.rope_theta >= 500000.0),
        "%s: config not read as written (theta %g eps %g)", name, cfg.rope_theta, cfg.norm_eps);
  CHECK(cfg.sliding_window == gc->window && cfg.arch == gc->arch && cfg.rope.type == gc->rope && cfg.qkv_bias == gc->qkv_bias &&
            cfg.o_bias == gc->o_bias && cfg.qk_norm == gc->qk_norm && cfg.head_dim == gc->head_dim &&
            cfg.tie_embeddings == gc->tied,
        "%s: family %d rope %s biases %d%d norm %d head_dim %d window %d tied %d", name, cfg.arch,
        lc_rope_type_name(cfg.rope.type), cfg.qkv_bias, cfg.o_bias, cfg.qk_norm, cfg.head_dim, cfg.sliding_window,
        cfg.tie_embeddings);
  check_rope_freqs(dir, &cfg);
  lc_model m;
  CHECK(lc_model_create(&m, &cfg, &ar) == LC_OK, "create");
  st = lc_hf_load_weights(dir, &m);
  CHECK(st == LC_OK, "%s weights: %s", name, lc_errmsg());
  lc_st_file g;
  st = lc_st_open(&g, path);
  CHECK(st == LC_OK, "%s: %s", path, lc_errmsg());
  if (st != LC_OK) return;
  const int S = 37, V = cfg.vocab;
  float *ids = read_tensor(&g, "input_ids", S), *labels = read_tensor(&g, "labels", S);
  float *logits = read_tensor(&g, "logits", (size_t)S * V), *loss = read_tensor(&g, "loss", 1);
  int tok[37], tgt[37], pos[37], counted = 0;
  for (int t = 0; t < S; t++) {
    tok[t] = (int)ids[t];
    tgt[t] = t + 1 < S ? (int)labels[t + 1] : -100; // HF shifts inside; longctx pre-shifts
    counted += tgt[t] >= 0;
    pos[t] = t;
  }
  // Training path: loss and gradients (plain and with checkpointing + tiles).
  lc_attn attn;
  lc_attn_local_init(&attn, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim);
  // Mistral: each token sees its sliding_window most recent tokens, itself included.
  int lo[37];
  for (int t = 0; t < S; t++) lo[t] = cfg.sliding_window > 0 && t - cfg.sliding_window + 1 > 0 ? t - cfg.sliding_window + 1 : 0;
  const lc_pass_in pin = {.attn = {.lo = cfg.sliding_window > 0 ? lo : NULL}};
  const lc_model_opts opts[2] = {{LC_CKPT_NONE, 0, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0}, {LC_CKPT_SELECTIVE, 8, 5, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0}};
  for (int k = 0; k < 2; k++) {
    lc_model_zero_grads(&m);
    double ls = 0;
    st = lc_model_fwd_bwd(&m, &opts[k], &attn, &pin, tok, tgt, pos, S, 1.0f / counted, 1, &ls);
    CHECK(st == LC_OK, "fwd_bwd: %s", lc_errmsg());
    // transformers' own fp32 loss differs from its fp64 loss by ~4e-8 relative; ours
    // rounds differently: bound 1e-5 relative.
    double mine = ls / counted;
    CHECK(fabs(mine - loss[0]) <= 1e-5 * fabs(loss[0]), "%s loss %.9f vs transformers %.9f", name, mine, loss[0]);
    // Gradients: HF fp32 vs fp64 differ by ~3e-6 of each tensor's largest entry; bound
    // 5e-5 of it (a wrong RoPE half, GQA mapping or norm term is O(1e-1)).
    double worst = 0;
    for (int i = 0; i < m.n_tensors; i++) {
      const lc_param_info *p = &m.table[i];
      char gname[160];
      snprintf(gname, sizeof gname, "grad.%s", p->name);
      float *ref = read_tensor(&g, gname, p->numel);
      if (!ref) continue;
      double e = 0, mx = 0;
      for (size_t j = 0; j < p->numel; j++) {
        e = fmax(e, fabs(m.grads[p->offset + j] - ref[j]));
        mx = fmax(mx, fabs(ref[j]));
      }
      CHECK(mx > 0 && e <= 5e-5 * mx, "%s %s: max diff %.3g of max %.3g", name, p->name, e, mx);
      worst = fmax(worst, e / mx);
      free(ref);
    }
    printf("%s (%s): loss %.9f (transformers %.9f), worst gradient error %.2e of max\n", name,
           k ? "selective+tiles" : "plain", mine, loss[0], worst);
  }
  // bf16 (--precision bf16) against transformers under torch.autocast(bfloat16)
  // (golden_bf16.*, tools/make_golden.py --bf16). Both round GEMM operands to bf16 but at
  // different points (autocast also rounds logits, GEMM outputs and the attention
  // probabilities; longctx keeps those fp32 and rounds the layer output), so they agree to
  // bf16 rounding, not bit for bit. transformers' own bf16-vs-fp32 distances (in
  // golden_bf16.json) set the scale: loss <= 1.3e-3 relative, gradients up to w = 0.026 ..
  // 0.076 relative L2 for the case's worst tensor. Bounds, about twice that: loss 5e-3
  // relative; per tensor relative L2 <= max(0.1, 2w), over all tensors <= max(0.08, 1.6w)
  // (measured: <= 1.3e-3, 0.051, 0.042 on the first cases). A missing term or a wrong
  // mapping is O(1); this checks bf16 arithmetic, not bit patterns.
  const double w16 = hf_bf16_worst(dir), tb = fmax(0.1, 2.0 * w16), ab = fmax(0.08, 1.6 * w16);
  snprintf(path, sizeof path, "%s/golden_bf16.safetensors", dir);
  lc_st_file g16;
  st = lc_st_open(&g16, path);
  CHECK(st == LC_OK, "%s: %s", path, lc_errmsg());
  if (st == LC_OK) {
    float *loss16 = read_tensor(&g16, "loss", 1);
    const lc_model_opts o16 = {LC_CKPT_SELECTIVE, 8, 5, 0, 0, 0, LC_DT_BF16, NULL, 0, 0, 0};
    lc_model_zero_grads(&m);
    double ls = 0;
    st = lc_model_fwd_bwd(&m, &o16, &attn, &pin, tok, tgt, pos, S, 1.0f / counted, 1, &ls);
    CHECK(st == LC_OK, "bf16 fwd_bwd: %s", lc_errmsg());
    const double mine = ls / counted;
    CHECK(fabs(mine - loss16[0]) <= 5e-3 * fabs(loss16[0]), "%s bf16 loss %.7f vs transformers bf16 %.7f", name, mine,
          loss16[0]);
    double num = 0, den = 0, worst = 0;
    for (int i = 0; i < m.n_tensors; i++) {
      const lc_param_info *p = &m.table[i];
      char gname[160];
      snprintf(gname, sizeof gname, "grad.%s", p->name);
      float *ref = read_tensor(&g16, gname, p->numel);
      if (!ref) continue;
      double a = 0, b = 0;
      for (size_t j = 0; j < p->numel; j++) {
        const double dlt = (double)m.grads[p->offset + j] - ref[j];
        a += dlt * dlt, b += (double)ref[j] * ref[j];
      }
      CHECK(b > 0 && sqrt(a / b) <= tb, "%s bf16 %s: relative L2 distance %.3g (bound %.3g)", name, p->name, sqrt(a / b), tb);
      worst = fmax(worst, sqrt(a / b));
      num += a, den += b;
      free(ref);
    }
    CHECK(sqrt(num / den) <= ab, "%s bf16 gradients: relative L2 distance %.3g (bound %.3g)", name, sqrt(num / den), ab);
    printf("%s bf16: loss %.7f (transformers autocast %.7f), gradients relative L2 %.2e (worst tensor %.2e)\n", name,
           mine, loss16[0], sqrt(num / den), worst);
    free(loss16);
    lc_st_close(&g16);
  }
  // Decode path: logits of every position from one prefill, and token by token.
  lc_kv_cache c;
  CHECK(lc_kv_cache_create(&c, &cfg, S, m.ps.be) == LC_OK, "cache");
  float *out = malloc(sizeof(float) * (size_t)S * V);
  st = lc_decode(&m, &c, tok, S, out, 1, &ar);
  CHECK(st == LC_OK, "decode: %s", lc_errmsg());
  // |logits| <= ~7; HF fp32 vs fp64 differ by up to 1e-5: bound 1e-4 absolute.
  double e = 0;
  for (size_t j = 0; j < (size_t)S * V; j++) e = fmax(e, fabs(out[j] - logits[j]));
  CHECK(e <= 1e-4, "%s prefill logits: max diff %.3g", name, e);
  lc_kv_cache_destroy(&c);
  // Token by token. Not for the length-dependent scalings (dynamic, longrope): a decode
  // step's keys keep the frequencies of the length when they were made, as in
  // transformers' cache, so they differ from one forward over all 37 by design.
  const int by_len = cfg.rope.type == LC_ROPE_DYNAMIC || cfg.rope.type == LC_ROPE_LONGROPE;
  CHECK(lc_kv_cache_create(&c, &cfg, S, m.ps.be) == LC_OK, "cache");
  double e2 = 0;
  for (int t = 0; t < S && !by_len; t++) {
    st = lc_decode(&m, &c, &tok[t], 1, out, 0, &ar);
    for (int v = 0; v < V; v++) e2 = fmax(e2, fabs(out[v] - logits[(size_t)t * V + v]));
  }
  CHECK(st == LC_OK && e2 <= 1e-4, "%s token-by-token logits: max diff %.3g", name, e2);
  printf("%s: logits max diff %.2e (prefill), %.2e (token by token)\n", name, e, e2);
  lc_kv_cache_destroy(&c);
  check_greedy(dir, &m, &ar);
  free(out), free(ids), free(labels), free(logits), free(loss);
  lc_st_close(&g);
  lc_model_destroy(&m);
  CHECK(ar.cur_total == 0, "arena balanced");
}

// golden_mask: fp32 loss (1e-5 relative) and gradients (5e-5 of each tensor's largest
// entry; the float64 reference is exact to ~2e-7, transformers' eager softmax being fp32)
// for the masked and the packed sequence.
static void check_mask_case(void) {
  char dir[1024], path[1100];
  snprintf(dir, sizeof dir, "%s/tests/data/golden_mask", LC_SOURCE_DIR);
  snprintf(path, sizeof path, "%s/golden.safetensors", dir);
  lc_arena ar;
  lc_arena_init(&ar, 0);
  lc_config cfg;
  CHECK(lc_hf_read_config(dir, &cfg) == LC_OK && cfg.arch == LC_ARCH_QWEN2, "golden_mask config: %s", lc_errmsg());
  lc_model m;
  CHECK(lc_model_create(&m, &cfg, &ar) == LC_OK, "create");
  CHECK(lc_hf_load_weights(dir, &m) == LC_OK, "golden_mask weights: %s", lc_errmsg());
  lc_st_file g;
  CHECK(lc_st_open(&g, path) == LC_OK, "%s: %s", path, lc_errmsg());
  lc_attn attn;
  lc_attn_local_init(&attn, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim);
  enum { S = 48 };
  const char *names[2] = {"single", "packed"};
  for (int c = 0; c < 2; c++) {
    char nm[200];
    snprintf(nm, sizeof nm, "%s.input_ids", names[c]);
    float *ids = read_tensor(&g, nm, S);
    snprintf(nm, sizeof nm, "%s.labels", names[c]);
    float *labels = read_tensor(&g, nm, S);
    snprintf(nm, sizeof nm, "%s.position_ids", names[c]);
    float *posf = read_tensor(&g, nm, S);
    snprintf(nm, sizeof nm, "%s.loss", names[c]);
    float *loss = read_tensor(&g, nm, 1);
    if (!ids || !labels || !posf || !loss) return;
    int tok[S], tgt[S], pos[S], lo[S], counted = 0, docs = 0;
    for (int t = 0; t < S; t++) {
      tok[t] = (int)ids[t], pos[t] = (int)posf[t];
      tgt[t] = t + 1 < S ? (int)labels[t + 1] : -100; // HF shifts inside; longctx pre-shifts
      if (t + 1 < S && posf[t + 1] == 0) tgt[t] = -100; // a document's last token has no target
      counted += tgt[t] >= 0;
      lo[t] = t - pos[t]; // the document's first token: attention stays inside it
      docs += pos[t] == 0;
    }
    CHECK(c == 0 ? docs == 1 && counted == 19 : docs == 2 && counted == 22, "golden_mask %s: %d documents, %d counted",
          names[c], docs, counted);
    const lc_pass_in pin = {.attn = {.lo = docs > 1 ? lo : NULL}};
    const lc_model_opts opts[2] = {{LC_CKPT_NONE, 0, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0},
                                   {LC_CKPT_SELECTIVE, 8, 5, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0}};
    for (int k = 0; k < 2; k++) {
      lc_model_zero_grads(&m);
      double ls = 0;
      CHECK(lc_model_fwd_bwd(&m, &opts[k], &attn, &pin, tok, tgt, pos, S, 1.0f / counted, 1, &ls) == LC_OK,
            "fwd_bwd: %s", lc_errmsg());
      const double mine = ls / counted;
      CHECK(fabs(mine - loss[0]) <= 1e-5 * fabs(loss[0]), "golden_mask %s loss %.9f vs transformers %.9f", names[c], mine,
            loss[0]);
      double worst = 0;
      for (int i = 0; i < m.n_tensors; i++) {
        const lc_param_info *p = &m.table[i];
        char gname[200];
        snprintf(gname, sizeof gname, "%s.grad.%s", names[c], p->name);
        float *ref = read_tensor(&g, gname, p->numel);
        if (!ref) continue;
        double e = 0, mx = 0;
        for (size_t j = 0; j < p->numel; j++) {
          e = fmax(e, fabs(m.grads[p->offset + j] - ref[j]));
          mx = fmax(mx, fabs(ref[j]));
        }
        CHECK(mx > 0 && e <= 5e-5 * mx, "golden_mask %s %s: max diff %.3g of max %.3g", names[c], p->name, e, mx);
        worst = fmax(worst, e / mx);
        free(ref);
      }
      printf("golden_mask %s (%s): loss %.9f (transformers f64 %.9f, %d counted), worst gradient error %.2e of max\n",
             names[c], k ? "selective+tiles" : "plain", mine, loss[0], counted, worst);
    }
    free(ids), free(labels), free(posf), free(loss);
  }
  lc_st_close(&g);
  lc_model_destroy(&m);
  CHECK(ar.cur_total == 0, "arena balanced");
}

int main(void) {
  static const golden_case cases[] = {
      {"golden_untied", LC_ARCH_LLAMA, LC_ROPE_DEFAULT, 0, 0, 0, 16, 0, 0},
      {"golden_tied", LC_ARCH_LLAMA, LC_ROPE_DEFAULT, 0, 0, 0, 16, 0, 1},
      {"golden_mistral", LC_ARCH_MISTRAL, LC_ROPE_DEFAULT, 0, 0, 0, 16, 8, 0},
      {"golden_llama3", LC_ARCH_LLAMA, LC_ROPE_LLAMA3, 0, 0, 0, 16, 0, 0},
      {"golden_linear", LC_ARCH_LLAMA, LC_ROPE_LINEAR, 0, 0, 0, 16, 0, 0},
      {"golden_dynamic", LC_ARCH_LLAMA, LC_ROPE_DYNAMIC, 0, 0, 0, 16, 0, 0},
      {"golden_yarn", LC_ARCH_LLAMA, LC_ROPE_YARN, 0, 0, 0, 16, 0, 0},
      {"golden_longrope", LC_ARCH_LLAMA, LC_ROPE_LONGROPE, 0, 0, 0, 16, 0, 0},
      {"golden_qwen2", LC_ARCH_QWEN2, LC_ROPE_DEFAULT, 1, 0, 0, 16, 0, 0},
      {"golden_qwen2_tied", LC_ARCH_QWEN2, LC_ROPE_DEFAULT, 1, 0, 0, 16, 0, 1},
      {"golden_qwen3", LC_ARCH_QWEN3, LC_ROPE_DEFAULT, 0, 0, 1, 24, 0, 1},
      {"golden_qwen3_bias", LC_ARCH_QWEN3, LC_ROPE_YARN, 1, 1, 1, 16, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
  check_mask_case();
  return lc_test_finish("test_golden");
}
