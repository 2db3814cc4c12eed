// The model families and their tensors, described once. The tensor table drives the
// parameter layout (params.c), the weight views, the store's units, HF load/save
// (hf_config.c, hf_weights.c), GGUF load (gguf_model.c) and init; the family table drives
// config.json and GGUF metadata parsing. A new family is a row here plus its branch in the
// layer (layer.c).
#ifndef LC_ARCH_H
#define LC_ARCH_H

#include <stddef.h>

#include "model/config.h"

// The sizes a tensor's dimensions are made of.
typedef enum { LC_SZ_1 = 0, LC_SZ_C, LC_SZ_F, LC_SZ_V, LC_SZ_D, LC_SZ_HQ, LC_SZ_HKV, LC_SZ_R } lc_size;
typedef enum { LC_INIT_NORMAL = 0, LC_INIT_ONES, LC_INIT_ZEROS, LC_INIT_KAIMING } lc_init; // KAIMING: PEFT's lora_A, U(+-1/sqrt(in))
// When a tensor exists (a config field decides).
typedef enum { LC_IF_ALWAYS = 0, LC_IF_QKV_BIAS, LC_IF_O_BIAS, LC_IF_QK_NORM, LC_IF_UNTIED,
               LC_IF_LORA_Q, LC_IF_LORA_K, LC_IF_LORA_V, LC_IF_LORA_O, LC_IF_LORA_GATE, LC_IF_LORA_UP, LC_IF_LORA_DOWN } lc_cond;
// Where it sits: the embedding unit, every decoder layer, or the final unit.
typedef enum { LC_PLACE_EMBED = 0, LC_PLACE_LAYER, LC_PLACE_FINAL } lc_place;

typedef struct {
  lc_place place;
  const char *hf;     // HF name (layer tensors: after "model.layers.N.")
  const char *gguf;   // llama.cpp GGUF name (layer tensors: after "blk.N.")
  lc_size rows, cols; // HF shape [rows, cols]; cols LC_SZ_1: a vector of rows
  lc_init init;       // HF init: linear weights and embeddings N(0, 0.02), norms 1, biases 0
  int decay;          // AdamW weight decay applies (matrices; not norms or biases)
  lc_cond cond;
  size_t slot;        // offsetof of its view in lc_layer_weights (layer) or lc_weights
  int adapter;        // 1: a LoRA adapter's matrix (in the adapters' store, lc_config.adapter_set)
} lc_tensor_kind;

// Every kind, in flat-buffer order (embedding, one layer's, final).
const lc_tensor_kind *lc_tensor_kinds(int *n);
// Present in cfg's store: the kind's set is cfg's (model or adapters) and its condition holds.
int lc_tensor_present(const lc_tensor_kind *k, const lc_config *cfg);
long lc_size_of(lc_size s, const lc_config *cfg);

typedef struct {
  lc_arch_id id;
  const char *model_type; // HF model_type
  const char *hf_class;   // HF architectures entry
  const char *gguf_arch;  // GGUF general.architecture
  int qkv_bias;           // 1: the family always has q/k/v biases (Qwen2); 0: attention_bias decides
  int attention_bias;     // attention_bias true gives q/k/v/o biases (Llama, Qwen3); 0: the family
                          // has no such field (Mistral: no biases; Qwen2: fixed q/k/v biases)
  int qk_norm;            // per-head q/k RMSNorm (Qwen3)
  int window;             // sliding_window is honoured (Mistral)
  int gguf_permuted_qk;   // llama.cpp's converter permutes q/k rows (Llama, Mistral): undone on load
} lc_arch;

const lc_arch *lc_arch_get(lc_arch_id id);
// By HF model_type ("llama") or architectures entry ("LlamaForCausalLM"); NULL if unknown.
const lc_arch *lc_arch_find_hf(const char *name);
// By GGUF general.architecture ("llama", "qwen2", "qwen3"); NULL if unknown.
const lc_arch *lc_arch_find_gguf(const char *name);
// For an unsupported family name: the supported one nearest to it ("Qwen2ForCausalLM").
const char *lc_arch_nearest(const char *name);
// "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM"
const char *lc_arch_names(void);
// Sets the family and its fixed variant fields in cfg (qkv_bias, qk_norm); attention_bias
// (read by the caller; only for a family with the field) adds q/k/v/o biases.
void lc_arch_apply(lc_config *cfg, const lc_arch *a, int attention_bias);
// The family a config is written as: a Llama with a sliding window is a Mistral model for
// transformers (its Llama ignores windows); every other config its own.
const lc_arch *lc_arch_written(const lc_config *cfg);

#endif
