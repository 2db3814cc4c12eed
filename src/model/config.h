// Llama model configuration (the fields of HF config.json that longctx uses) and presets.
#ifndef LC_CONFIG_H
#define LC_CONFIG_H

#include <stddef.h>

#include "core/dtype.h"
#include "core/status.h"
#include "core/rope.h"

#define LC_MAX_LAYERS 1024

// The model families longctx trains (model/arch.h holds each one's table).
typedef enum { LC_ARCH_LLAMA = 0, LC_ARCH_MISTRAL, LC_ARCH_QWEN2, LC_ARCH_QWEN3, LC_ARCH_N } lc_arch_id;

// Low-rank adapters on a frozen base (DESIGN.md, "Fine-tuning a frozen base"): each target
// projection y = x W^T becomes y = x W^T + scale (x A^T) B^T, A [rank, in], B [out, rank].
enum { LC_LORA_Q = 0, LC_LORA_K, LC_LORA_V, LC_LORA_O, LC_LORA_GATE, LC_LORA_UP, LC_LORA_DOWN, LC_LORA_N };
#define LC_LORA_ALL ((1u << LC_LORA_N) - 1)
typedef struct {
  int rank;         // 0: no adapters (every weight trains)
  float alpha;      // scale = alpha / rank (rslora: alpha / sqrt(rank))
  unsigned targets; // bit LC_LORA_Q.. set: that projection has an adapter
  int rslora;
  int base_bf16;    // the frozen base held in bf16 (2 bytes per weight; --base-dtype bf16)
  float dropout;    // PEFT's lora_dropout on the adapters' input in training passes (0: none; core/dropout_hash.h)
} lc_lora;

typedef struct {
  char name[64];
  int dim;        // hidden_size
  int n_layers;   // num_hidden_layers
  int n_heads;    // num_attention_heads
  int n_kv_heads; // num_key_value_heads
  int head_dim;   // head_dim (Llama/Mistral/Qwen2: dim / n_heads; Qwen3 sets its own)
  int ffn;        // intermediate_size
  int vocab;      // vocab_size
  float norm_eps; // rms_norm_eps
  double rope_theta;
  int tie_embeddings; // tie_word_embeddings: lm_head shares embed_tokens
  int max_pos;        // max_position_embeddings
  int config_only;    // 1: a real model's shape without weights, for `longctx plan` only
  int sliding_window; // Mistral-style: each token sees at most this many most recent tokens
                      // of its document, itself included (0: unlimited; --attn-window)
  lc_arch_id arch;    // the family (model/arch.h): HF architecture name and model_type
  int qkv_bias;       // q/k/v projections have biases (Qwen2; attention_bias)
  int o_bias;         // o_proj has a bias (attention_bias of Llama/Mistral/Qwen3)
  int qk_norm;        // RMSNorm over each head's q and k before RoPE (Qwen3)
  lc_rope_scaling rope; // RoPE scaling (type LC_ROPE_DEFAULT: none)
  lc_lora lora;         // adapters of a LoRA run (rank 0: none)
  int adapter_set;      // 1: this config describes the adapters' store (its tensors are the
                        // lora_A/lora_B of lora.targets), 0: the model's own weights
  // A LoRA run's frozen base held in a GGUF file's own blocks (QLoRA; --base-dtype gguf):
  // the lc_dtype (LC_DT_Q8_0 ..) each layer's projection LC_LORA_Q.. is kept in, 0 for one
  // held dense (pstore.h). Set from the file (lc_gguf_base_blocks); all 0 otherwise.
  unsigned char base_q[LC_MAX_LAYERS][LC_LORA_N];
  unsigned char base_q_embed, base_q_head; // the same for the embedding and the (untied) LM head
} lc_config;

// 1 if cfg's base holds some projection in quantized blocks (cfg->base_q; a LoRA run's
// frozen base only).
int lc_config_base_quant(const lc_config *cfg);

// Fills cfg from a preset name (tiny, demo, bench-s, or a configuration-only preset of a
// real model for plan, which set config_only: llama-3-8b, llama-3-70b, llama-3.1-8b/70b with
// their llama3 RoPE scaling, qwen2.5-7b, qwen3-8b, qwen3-32b). LC_EINVAL for an unknown name.
lc_status lc_config_preset(lc_config *cfg, const char *name);
// Checks internal consistency (dims positive, kv heads divide heads, even head_dim, RoPE
// scaling parameters in range).
lc_status lc_config_validate(const lc_config *cfg);
// "tiny, demo, bench-s" (the trainable presets)
const char *lc_config_preset_names(void);
// "llama-3-8b, llama-3-70b, ..." (configuration-only presets, for plan)
const char *lc_config_plan_preset_names(void);

// A sequence tile of `tile` tokens splits a pass over T tokens when 0 < tile < T; any
// other value runs the op untiled (--mlp-tile, --loss-tile; the memory model agrees).
static inline int lc_tile_splits(int tile, int T) { return tile > 0 && tile < T; }

// The longest sequence (in positions) the model takes: max_position_embeddings, or
// unlimited (2^30) when it is unset or the RoPE scaling is dynamic (made for longer ones).
int lc_config_max_positions(const lc_config *cfg);

// One line for the settings table and plan: family, shape and variant fields, e.g.
// "Qwen3ForCausalLM: dim 64, layers 2, heads 4 (kv 2, head_dim 24), ffn 176, vocab 256,
// tied head, q/k/v/o biases, q/k norms; RoPE theta 1e+06, yarn x4 of 16 positions".
const char *lc_config_describe(const lc_config *cfg, char *buf, size_t n);

// Parameter count (elements).
long long lc_config_n_params(const lc_config *cfg);
// Parameters of the adapters cfg->lora describes (0 without).
long long lc_config_n_lora_params(const lc_config *cfg);
// The adapters' scale: alpha / rank, or alpha / sqrt(rank) with rslora.
float lc_lora_scale(const lc_lora *l);
// The config of the adapters' store (adapter_set 1).
lc_config lc_config_adapters(const lc_config *cfg);
// "q,k,v,o,gate,up,down" -> bits; an unknown name is an error naming the choices.
lc_status lc_lora_parse_targets(const char *s, unsigned *targets);
// The names of the targets in bits (PEFT's module names: q_proj, ...), comma-separated.
const char *lc_lora_target_names(unsigned targets, int peft, char *buf, size_t cap);
// Model FLOPs of a forward pass over `tokens` tokens whose attention sees `pairs` (query,
// key) pairs in all: 2*tokens*(matmul weights) + 4*n_layers*n_heads*head_dim*pairs.
double lc_config_fwd_flops_pairs(const lc_config *cfg, double tokens, double pairs);
// One causal sequence of S tokens: pairs = S(S+1)/2. A training step is 3x this.
double lc_config_fwd_flops(const lc_config *cfg, long S);

#endif
