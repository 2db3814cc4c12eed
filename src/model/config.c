#include "model/config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/arch.h"

typedef struct {
  const char *name;
  int dim, n_layers, n_heads, n_kv_heads, ffn, vocab;
  double rope_theta;
  float norm_eps;
  int max_pos;
  int config_only;
  lc_arch_id arch; // families' fixed fields follow it (lc_arch_apply)
  int head_dim;    // 0: dim / n_heads
  int llama3;      // Llama 3.1's RoPE: llama3 scaling, factor 8 of 8192 (1, 4)
  int tied;
} lc_preset;

// DESIGN.md's presets. Vocab 256 = bytes. Then configuration-only presets of real models
// (their HF config.json values) for `longctx plan`: shapes without weights.
static const lc_preset presets[] = {
    {"tiny", 64, 2, 4, 2, 176, 256, 10000.0, 1e-5f, 1 << 24, 0, LC_ARCH_LLAMA, 0, 0, 0},
    {"demo", 256, 4, 8, 4, 704, 256, 10000.0, 1e-5f, 1 << 24, 0, LC_ARCH_LLAMA, 0, 0, 0},
    {"bench-s", 512, 8, 8, 4, 1408, 32000, 10000.0, 1e-5f, 1 << 24, 0, LC_ARCH_LLAMA, 0, 0, 0},
    {"llama-3-8b", 4096, 32, 32, 8, 14336, 128256, 500000.0, 1e-5f, 8192, 1, LC_ARCH_LLAMA, 0, 0, 0},
    {"llama-3-70b", 8192, 80, 64, 8, 28672, 128256, 500000.0, 1e-5f, 8192, 1, LC_ARCH_LLAMA, 0, 0, 0},
    {"llama-3.1-8b", 4096, 32, 32, 8, 14336, 128256, 500000.0, 1e-5f, 131072, 1, LC_ARCH_LLAMA, 0, 1, 0},
    {"llama-3.1-70b", 8192, 80, 64, 8, 28672, 128256, 500000.0, 1e-5f, 131072, 1, LC_ARCH_LLAMA, 0, 1, 0},
    {"qwen2.5-7b", 3584, 28, 28, 4, 18944, 152064, 1000000.0, 1e-6f, 32768, 1, LC_ARCH_QWEN2, 0, 0, 0},
    {"qwen3-8b", 4096, 36, 32, 8, 12288, 151936, 1000000.0, 1e-6f, 40960, 1, LC_ARCH_QWEN3, 128, 0, 0},
    {"qwen3-32b", 5120, 64, 64, 8, 25600, 151936, 1000000.0, 1e-6f, 40960, 1, LC_ARCH_QWEN3, 128, 0, 0},
};

const char *lc_config_preset_names(void) { return "tiny, demo, bench-s"; }
const char *lc_config_plan_preset_names(void) {
  return "llama-3-8b, llama-3-70b, llama-3.1-8b, llama-3.1-70b, qwen2.5-7b, qwen3-8b, qwen3-32b";
}

lc_status lc_config_preset(lc_config *cfg, const char *name) {
  for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
    const lc_preset *p = &presets[i];
    if (strcmp(p->name, name) != 0) continue;
    memset(cfg, 0, sizeof *cfg);
    strncpy(cfg->name, p->name, sizeof cfg->name - 1);
    cfg->dim = p->dim;
    cfg->n_layers = p->n_layers;
    cfg->n_heads = p->n_heads;
    cfg->n_kv_heads = p->n_kv_heads;
    cfg->head_dim = p->head_dim ? p->head_dim : p->dim / p->n_heads;
    cfg->ffn = p->ffn;
    cfg->vocab = p->vocab;
    cfg->norm_eps = p->norm_eps;
    cfg->rope_theta = p->rope_theta;
    cfg->tie_embeddings = p->tied;
    cfg->max_pos = p->max_pos;
    cfg->config_only = p->config_only;
    lc_arch_apply(cfg, lc_arch_get(p->arch), 0);
    if (p->llama3)
      cfg->rope = (lc_rope_scaling){.type = LC_ROPE_LLAMA3, .factor = 8, .orig_max = 8192, .low_freq_factor = 1, .high_freq_factor = 4};
    return LC_OK;
  }
  return lc_fail(LC_EINVAL, "unknown model preset '%s': use one of %s (or, for plan only, %s), or a "
                 "Hugging Face model directory", name, lc_config_preset_names(), lc_config_plan_preset_names());
}

lc_status lc_config_validate(const lc_config *c) {
  if (c->dim <= 0 || c->n_layers <= 0 || c->n_heads <= 0 || c->n_kv_heads <= 0 || c->ffn <= 0 ||
      c->vocab <= 0)
    return lc_fail(LC_EINVAL, "model config: hidden_size, num_hidden_layers, num_attention_heads, "
                              "num_key_value_heads, intermediate_size and vocab_size must be positive");
  if (c->n_layers > LC_MAX_LAYERS) // (per-layer tables, e.g. a quantized base's block types, hold this many)
    return lc_fail(LC_EINVAL, "model config: num_hidden_layers %d is more than longctx holds (%d)", c->n_layers,
                   LC_MAX_LAYERS);
  if (c->head_dim <= 0 || c->head_dim > 2 * LC_ROPE_MAX_PAIRS)
    return lc_fail(LC_EINVAL, "model config: head_dim %d must be in [2, %d]", c->head_dim, 2 * LC_ROPE_MAX_PAIRS);
  if (c->head_dim % 2 != 0)
    return lc_fail(LC_EINVAL, "model config: head_dim %d must be even for RoPE", c->head_dim);
  if (c->sliding_window < 0)
    return lc_fail(LC_EINVAL, "model config: sliding_window %d must be positive (or absent)", c->sliding_window);
  if (c->n_heads % c->n_kv_heads != 0)
    return lc_fail(LC_EINVAL, "model config: num_key_value_heads %d must divide num_attention_heads %d",
                   c->n_kv_heads, c->n_heads);
  if (!(c->norm_eps > 0) || !(c->rope_theta > 0))
    return lc_fail(LC_EINVAL, "model config: rms_norm_eps and rope_theta must be positive");
  if (c->arch < 0 || c->arch >= LC_ARCH_N) return lc_fail(LC_EINVAL, "model config: unknown family %d", (int)c->arch);
  // The variant fields must be a combination the family has (its config.json can say).
  // (A Llama with a window is written as Mistral, which has no biases.)
  const lc_arch *ar = lc_arch_written(c);
  int expressible = 0;
  for (int ab = 0; ab < 2; ab++)
    expressible |= c->qkv_bias == (ar->qkv_bias || (ab && ar->attention_bias)) && c->o_bias == (ab && ar->attention_bias) &&
                   c->qk_norm == ar->qk_norm;
  if (!expressible)
    return lc_fail(LC_EINVAL, "model config: %s%s has no variant with%s q/k/v biases, %s o_proj bias and%s q/k norms",
                   ar->hf_class, ar->id != c->arch ? " (a Llama with a sliding window)" : "", c->qkv_bias ? "" : "out",
                   c->o_bias ? "an" : "no", c->qk_norm ? "" : " no");
  return lc_rope_scaling_validate(&c->rope, c->head_dim);
}

const char *lc_config_describe(const lc_config *c, char *b, size_t n) {
  char rope[96] = "";
  const lc_rope_scaling *r = &c->rope;
  if (r->type == LC_ROPE_DEFAULT) snprintf(rope, sizeof rope, ", %d positions", c->max_pos);
  else if (r->type == LC_ROPE_DYNAMIC) snprintf(rope, sizeof rope, ", dynamic x%g beyond %d positions", r->factor, c->max_pos);
  else if (r->type == LC_ROPE_LONGROPE) snprintf(rope, sizeof rope, ", longrope %d -> %d positions", r->orig_max ? r->orig_max : c->max_pos, c->max_pos);
  else snprintf(rope, sizeof rope, ", %s x%g: %d -> %d positions", lc_rope_type_name(r->type), r->factor, r->orig_max ? r->orig_max : c->max_pos, lc_config_max_positions(c));
  snprintf(b, n, "%s: dim %d, layers %d, heads %d (kv %d, head_dim %d), ffn %d, vocab %d%s%s%s%s; RoPE theta %g%s",
           lc_arch_get(c->arch)->hf_class, c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, c->ffn, c->vocab,
           c->tie_embeddings ? ", tied head" : "", c->qkv_bias ? (c->o_bias ? ", q/k/v/o biases" : ", q/k/v biases") : "",
           c->qk_norm ? ", q/k norms" : "", c->sliding_window > 0 ? ", sliding window" : "", c->rope_theta, rope);
  return b;
}

int lc_config_max_positions(const lc_config *c) {
  const lc_rope_scaling *r = &c->rope;
  if (c->max_pos <= 0 || r->type == LC_ROPE_DYNAMIC) return 1 << 30;
  // A static scaling of an original context (Qwen's YaRN recipe leaves
  // max_position_embeddings at the original): the context it was made for.
  const double ext = r->type != LC_ROPE_DEFAULT && r->orig_max > 0 && r->factor > 0 ? (double)r->orig_max * r->factor : 0;
  return ext > c->max_pos ? (ext < (double)(1 << 30) ? (int)ext : 1 << 30) : c->max_pos;
}

long long lc_config_n_params(const lc_config *c) {
  int nk;
  const lc_tensor_kind *k = lc_tensor_kinds(&nk);
  long long n = 0;
  for (int i = 0; i < nk; i++)
    if (lc_tensor_present(&k[i], c))
      n += (long long)lc_size_of(k[i].rows, c) * lc_size_of(k[i].cols, c) * (k[i].place == LC_PLACE_LAYER ? c->n_layers : 1);
  return n;
}

double lc_config_fwd_flops_pairs(const lc_config *c, double tokens, double pairs) {
  double C = c->dim, D = c->head_dim, F = c->ffn, V = c->vocab;
  double mm = c->n_layers * (C * c->n_heads * D * 2 + C * c->n_kv_heads * D * 2 + 3 * C * F) + V * C;
  return 2.0 * tokens * mm + 4.0 * c->n_layers * c->n_heads * D * pairs;
}

double lc_config_fwd_flops(const lc_config *c, long S) {
  return lc_config_fwd_flops_pairs(c, (double)S, (double)S * (S + 1) / 2.0);
}
