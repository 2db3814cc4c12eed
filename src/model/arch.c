#include "model/arch.h"

#include <ctype.h>
#include <string.h>

#include "model/params.h"

#define LW(f) offsetof(lc_layer_weights, f)
#define GW(f) offsetof(lc_weights, f)

static const lc_tensor_kind kinds[] = {
    {LC_PLACE_EMBED, "model.embed_tokens.weight", "token_embd.weight", LC_SZ_V, LC_SZ_C, LC_INIT_NORMAL, 1, LC_IF_ALWAYS, GW(embed), 0},
    {LC_PLACE_LAYER, "input_layernorm.weight", "attn_norm.weight", LC_SZ_C, LC_SZ_1, LC_INIT_ONES, 0, LC_IF_ALWAYS, LW(ln1), 0},
    {LC_PLACE_LAYER, "self_attn.q_proj.weight", "attn_q.weight", LC_SZ_HQ, LC_SZ_C, LC_INIT_NORMAL, 1, LC_IF_ALWAYS, LW(wq), 0},
    {LC_PLACE_LAYER, "self_attn.q_proj.bias", "attn_q.bias", LC_SZ_HQ, LC_SZ_1, LC_INIT_ZEROS, 0, LC_IF_QKV_BIAS, LW(bq), 0},
    {LC_PLACE_LAYER, "self_attn.k_proj.weight", "attn_k.weight", LC_SZ_HKV, LC_SZ_C, LC_INIT_NORMAL, 1, LC_IF_ALWAYS, LW(wk), 0},
    {LC_PLACE_LAYER, "self_attn.k_proj.bias", "attn_k.bias", LC_SZ_HKV, LC_SZ_1, LC_INIT_ZEROS, 0, LC_IF_QKV_BIAS, LW(bk), 0},
    {LC_PLACE_LAYER, "self_attn.v_proj.weight", "attn_v.weight", LC_SZ_HKV, LC_SZ_C, LC_INIT_NORMAL, 1, LC_IF_ALWAYS, LW(wv), 0},
    {LC_PLACE_LAYER, "self_attn.v_proj.bias", "attn_v.bias", LC_SZ_HKV, LC_SZ_1, LC_INIT_ZEROS, 0, LC_IF_QKV_BIAS, LW(bv), 0},
    {LC_PLACE_LAYER, "self_attn.o_proj.weight", "attn_output.weight", LC_SZ_C, LC_SZ_HQ, LC_INIT_NORMAL, 1, LC_IF_ALWAYS, LW(wo), 0},
    {LC_PLACE_LAYER, "self_attn.o_proj.bias", "attn_output.bias", LC_SZ_C, LC_SZ_1, LC_INIT_ZEROS, 0, LC_IF_O_BIAS, LW(bo), 0},
    {LC_PLACE_LAYER, "self_attn.q_norm.weight", "attn_q_norm.weight", LC_SZ_D, LC_SZ_1, LC_INIT_ONES, 0, LC_IF_QK_NORM, LW(q_norm), 0},
    {LC_PLACE_LAYER, "self_attn.k_norm.weight", "attn_k_norm.weight", LC_SZ_D, LC_SZ_1, LC_INIT_ONES, 0, LC_IF_QK_NORM, LW(k_norm), 0},
    {LC_PLACE_LAYER, "post_attention_layernorm.weight", "ffn_norm.weight", LC_SZ_C, LC_SZ_1, LC_INIT_ONES, 0, LC_IF_ALWAYS, LW(ln2), 0},
    {LC_PLACE_LAYER, "mlp.gate_proj.weight", "ffn_gate.weight", LC_SZ_F, LC_SZ_C, LC_INIT_NORMAL, 1, LC_IF_ALWAYS, LW(wgate), 0},
    {LC_PLACE_LAYER, "mlp.up_proj.weight", "ffn_up.weight", LC_SZ_F, LC_SZ_C, LC_INIT_NORMAL, 1, LC_IF_ALWAYS, LW(wup), 0},
    {LC_PLACE_LAYER, "mlp.down_proj.weight", "ffn_down.weight", LC_SZ_C, LC_SZ_F, LC_INIT_NORMAL, 1, LC_IF_ALWAYS, LW(wdown), 0},
    {LC_PLACE_FINAL, "model.norm.weight", "output_norm.weight", LC_SZ_C, LC_SZ_1, LC_INIT_ONES, 0, LC_IF_ALWAYS, GW(norm), 0},
    {LC_PLACE_FINAL, "lm_head.weight", "output.weight", LC_SZ_V, LC_SZ_C, LC_INIT_NORMAL, 1, LC_IF_UNTIED, GW(head), 0},
    // LoRA adapters (the adapters' store; PEFT's names after base_model.model.model.layers.N.,
    // shapes A [r, in], B [out, r]; weight decay as PEFT + the HF Trainer apply it)
    {LC_PLACE_LAYER, "self_attn.q_proj.lora_A.weight", NULL, LC_SZ_R, LC_SZ_C, LC_INIT_KAIMING, 1, LC_IF_LORA_Q, LW(lora_a[0]), 1},
    {LC_PLACE_LAYER, "self_attn.q_proj.lora_B.weight", NULL, LC_SZ_HQ, LC_SZ_R, LC_INIT_ZEROS, 1, LC_IF_LORA_Q, LW(lora_b[0]), 1},
    {LC_PLACE_LAYER, "self_attn.k_proj.lora_A.weight", NULL, LC_SZ_R, LC_SZ_C, LC_INIT_KAIMING, 1, LC_IF_LORA_K, LW(lora_a[1]), 1},
    {LC_PLACE_LAYER, "self_attn.k_proj.lora_B.weight", NULL, LC_SZ_HKV, LC_SZ_R, LC_INIT_ZEROS, 1, LC_IF_LORA_K, LW(lora_b[1]), 1},
    {LC_PLACE_LAYER, "self_attn.v_proj.lora_A.weight", NULL, LC_SZ_R, LC_SZ_C, LC_INIT_KAIMING, 1, LC_IF_LORA_V, LW(lora_a[2]), 1},
    {LC_PLACE_LAYER, "self_attn.v_proj.lora_B.weight", NULL, LC_SZ_HKV, LC_SZ_R, LC_INIT_ZEROS, 1, LC_IF_LORA_V, LW(lora_b[2]), 1},
    {LC_PLACE_LAYER, "self_attn.o_proj.lora_A.weight", NULL, LC_SZ_R, LC_SZ_HQ, LC_INIT_KAIMING, 1, LC_IF_LORA_O, LW(lora_a[3]), 1},
    {LC_PLACE_LAYER, "self_attn.o_proj.lora_B.weight", NULL, LC_SZ_C, LC_SZ_R, LC_INIT_ZEROS, 1, LC_IF_LORA_O, LW(lora_b[3]), 1},
    {LC_PLACE_LAYER, "mlp.gate_proj.lora_A.weight", NULL, LC_SZ_R, LC_SZ_C, LC_INIT_KAIMING, 1, LC_IF_LORA_GATE, LW(lora_a[4]), 1},
    {LC_PLACE_LAYER, "mlp.gate_proj.lora_B.weight", NULL, LC_SZ_F, LC_SZ_R, LC_INIT_ZEROS, 1, LC_IF_LORA_GATE, LW(lora_b[4]), 1},
    {LC_PLACE_LAYER, "mlp.up_proj.lora_A.weight", NULL, LC_SZ_R, LC_SZ_C, LC_INIT_KAIMING, 1, LC_IF_LORA_UP, LW(lora_a[5]), 1},
    {LC_PLACE_LAYER, "mlp.up_proj.lora_B.weight", NULL, LC_SZ_F, LC_SZ_R, LC_INIT_ZEROS, 1, LC_IF_LORA_UP, LW(lora_b[5]), 1},
    {LC_PLACE_LAYER, "mlp.down_proj.lora_A.weight", NULL, LC_SZ_R, LC_SZ_F, LC_INIT_KAIMING, 1, LC_IF_LORA_DOWN, LW(lora_a[6]), 1},
    {LC_PLACE_LAYER, "mlp.down_proj.lora_B.weight", NULL, LC_SZ_C, LC_SZ_R, LC_INIT_ZEROS, 1, LC_IF_LORA_DOWN, LW(lora_b[6]), 1},
};

const lc_tensor_kind *lc_tensor_kinds(int *n) {
  *n = (int)(sizeof kinds / sizeof kinds[0]);
  return kinds;
}

int lc_tensor_present(const lc_tensor_kind *k, const lc_config *c) {
  if (k->adapter != (c->adapter_set != 0)) return 0;
  if (k->cond >= LC_IF_LORA_Q) return c->lora.rank > 0 && (c->lora.targets >> (k->cond - LC_IF_LORA_Q) & 1u);
  switch (k->cond) {
  case LC_IF_QKV_BIAS: return c->qkv_bias;
  case LC_IF_O_BIAS: return c->o_bias;
  case LC_IF_QK_NORM: return c->qk_norm;
  case LC_IF_UNTIED: return !c->tie_embeddings;
  default: return 1;
  }
}

long lc_size_of(lc_size s, const lc_config *c) {
  switch (s) {
  case LC_SZ_C: return c->dim;
  case LC_SZ_F: return c->ffn;
  case LC_SZ_V: return c->vocab;
  case LC_SZ_D: return c->head_dim;
  case LC_SZ_HQ: return (long)c->n_heads * c->head_dim;
  case LC_SZ_HKV: return (long)c->n_kv_heads * c->head_dim;
  case LC_SZ_R: return c->lora.rank;
  default: return 1;
  }
}

static const lc_arch archs[LC_ARCH_N] = {
    {LC_ARCH_LLAMA, "llama", "LlamaForCausalLM", "llama", 0, 1, 0, 0, 1},
    {LC_ARCH_MISTRAL, "mistral", "MistralForCausalLM", "mistral", 0, 0, 0, 1, 1},
    {LC_ARCH_QWEN2, "qwen2", "Qwen2ForCausalLM", "qwen2", 1, 0, 0, 0, 0},
    {LC_ARCH_QWEN3, "qwen3", "Qwen3ForCausalLM", "qwen3", 0, 1, 1, 0, 0},
};

const lc_arch *lc_arch_get(lc_arch_id id) { return id >= 0 && id < LC_ARCH_N ? &archs[id] : &archs[0]; }

const lc_arch *lc_arch_find_hf(const char *name) {
  for (int i = 0; i < LC_ARCH_N; i++)
    if (!strcmp(name, archs[i].model_type) || !strcmp(name, archs[i].hf_class)) return &archs[i];
  return NULL;
}

const lc_arch *lc_arch_find_gguf(const char *name) {
  for (int i = 0; i < LC_ARCH_N; i++)
    if (!strcmp(name, archs[i].gguf_arch)) return &archs[i];
  return NULL;
}

static int contains_ci(const char *s, const char *w) {
  for (; *s; s++) {
    size_t k = 0;
    while (w[k] && s[k] && tolower((unsigned char)s[k]) == w[k]) k++;
    if (!w[k]) return 1;
  }
  return 0;
}

const char *lc_arch_nearest(const char *name) {
  if (contains_ci(name, "qwen3")) return archs[LC_ARCH_QWEN3].hf_class;
  if (contains_ci(name, "qwen")) return archs[LC_ARCH_QWEN2].hf_class;
  if (contains_ci(name, "mistral") || contains_ci(name, "mixtral")) return archs[LC_ARCH_MISTRAL].hf_class;
  return archs[LC_ARCH_LLAMA].hf_class;
}

const char *lc_arch_names(void) { return "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM"; }

void lc_arch_apply(lc_config *cfg, const lc_arch *a, int attention_bias) {
  cfg->arch = a->id;
  cfg->qkv_bias = a->qkv_bias || (attention_bias && a->attention_bias);
  cfg->o_bias = attention_bias && a->attention_bias;
  cfg->qk_norm = a->qk_norm;
}

const lc_arch *lc_arch_written(const lc_config *cfg) {
  return lc_arch_get(cfg->arch == LC_ARCH_LLAMA && cfg->sliding_window > 0 ? LC_ARCH_MISTRAL : cfg->arch);
}
