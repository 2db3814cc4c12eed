// Hugging Face Llama model directories: config.json and model.safetensors (or sharded
// model.safetensors.index.json + shards), with HF tensor names and shapes.
#ifndef LC_HF_H
#define LC_HF_H

#include <stddef.h>

#include "core/status.h"
#include "model/config.h"
#include "io/safetensors.h"
#include "model/model.h"

// Reads DIR/config.json of a family in model/arch.h (model_type / architectures: Llama,
// Mistral, Qwen2, Qwen3). Required: hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, vocab_size. Defaults as in transformers' configs: num_key_value_heads
// = heads, head_dim = hidden/heads (Qwen3: 128), rms_norm_eps 1e-6, rope_theta 10000,
// tie_word_embeddings false, max_position_embeddings 2048. RoPE scaling from rope_scaling
// (transformers 4) or rope_parameters (5). Unsupported settings are errors naming the field
// and the fix: another family (naming the nearest), mlp_bias, attention_bias where the
// family has none, pretraining_tp != 1, hidden_act other than silu, a partial rotary
// factor, windows on some layers only, attention_dropout != 0, quantization_config.
lc_status lc_hf_read_config(const char *dir, lc_config *cfg);
// The same from JSON text; `label` names it in messages.
lc_status lc_hf_parse_config(const char *json, size_t len, const char *label, lc_config *cfg);
// Writes an HF-loadable DIR/config.json (torch_dtype of the weights file: dt is LC_DT_F32
// or LC_DT_BF16; bos/eos ids null) atomically.
lc_status lc_hf_write_config(const char *dir, const lc_config *cfg, lc_dtype dt);
// Writes the JSON object o (deleted here) to path atomically as HF's files are formatted
// (two-space indents, ": ", a final newline).
struct cJSON;
lc_status lc_hf_write_json(const char *path, struct cJSON *o);

// Loads DIR/model.safetensors, else the shards of DIR/model.safetensors.index.json, into a
// model created from the same config. Every tensor of m->table must be present with exactly
// its HF shape; a tied model accepts (and ignores) lm_head.weight; *.rotary_emb.inv_freq is
// ignored; any other tensor is an error. F32, BF16 and F16 are converted to float. On error
// the model's weights may be partly overwritten.
lc_status lc_hf_load_weights(const char *dir, lc_model *m);
// Writes DIR/model.safetensors (dt: LC_DT_F32, or LC_DT_BF16 rounded to nearest even; HF
// names; tied: no lm_head.weight) and DIR/config.json,
// creating DIR; each file atomically. Collective over the model's store: every rank calls
// it, world rank 0 writes (sharded weights reach it one tensor at a time); the status
// is rank 0's on rank 0 (others report their own communication failures only).
lc_status lc_hf_save(const char *dir, lc_model *m, lc_dtype dt);
// Reading tensors into a model's store, whole or sharded: the staging buffer `which`
// needs (NULL when this rank holds whole tensors of it; LC_MEM_SCRATCH, lc_stage_floats
// floats otherwise), and tensor i of `which` from tensor x of file f through it.
lc_status lc_hf_stage(lc_pstore *ps, lc_ps_state which, float **stage);
lc_status lc_hf_read_state(lc_pstore *ps, lc_ps_state which, int i, lc_st_file *f, const lc_st_tensor *x, float *stage);
// The safetensors file at path of n_states states of every tensor (entry name = prefix[k] +
// HF name, in table order, states interleaved), stored as dt, the same way (collective,
// rank 0 writes).
lc_status lc_hf_write_states(const char *path, lc_pstore *ps, int n_states, const lc_ps_state *which,
                             const char *const *prefix, lc_dtype dt, const char *const *meta_kv, int n_meta);

// 1 if DIR/config.json exists (tells an HF model directory from a preset name).
int lc_hf_is_model_dir(const char *dir);

#endif
