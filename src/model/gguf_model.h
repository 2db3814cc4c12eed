// Models from GGUF files (llama.cpp's format, io/gguf.h): the config from the file's
// metadata and the weights dequantized to fp32 into the parameter store (whole or
// sharded), by the llama.cpp tensor names of the architecture table (model/arch.h).
// Checkpoints are still written as HF directories (model/hf.h).
#ifndef LC_GGUF_MODEL_H
#define LC_GGUF_MODEL_H

#include "core/status.h"
#include "model/config.h"
#include "model/model.h"

// 1 if spec names a GGUF model: it ends in ".gguf" or is a file starting with "GGUF".
int lc_gguf_is_model_path(const char *spec);

// The config from the metadata of general.architecture's family (llama, mistral, qwen2,
// qwen3; another is one line naming it and the nearest supported family):
// {arch}.block_count, .embedding_length, .feed_forward_length, .attention.head_count
// (required), .attention.head_count_kv (default heads), .attention.key_length (head_dim;
// default embedding / heads), .rope.freq_base (10000), .attention.layer_norm_rms_epsilon
// (required), .context_length (2048), vocab from {arch}.vocab_size, else the length of
// tokenizer.ggml.tokens, else token_embd.weight's rows; RoPE scaling from
// .rope.scaling.type/.factor/.original_context_length (linear, yarn) or, for Llama 3.x
// (whose converter writes no scaling metadata), from the per-pair factors of the
// rope_freqs.weight tensor, matched against Llama 3 scaling parameters (refused when no
// parameters reproduce them); tied embeddings = no output.weight tensor; attention biases
// = blk.0.attn_q.bias present; the name from general.name (sanitised; else the file name).
lc_status lc_gguf_read_config(const char *path, lc_config *cfg);

// Every tensor of m->table from the file by its GGUF name, shape checked (GGUF lists dims
// fastest first: an HF [rows, cols] tensor is ne = [cols, rows]), dequantized to float
// into the store tensor by tensor (a staging buffer when the store is sharded), with the
// q/k row permutation of llama.cpp's converter undone for the families that have it (and
// their q/k biases). A missing tensor or one the model does not have is an error;
// rope_freqs.weight (read by lc_gguf_read_config) is skipped. On error the weights may be
// partly overwritten.
// A tensor the store holds in blocks (a frozen base: lc_gguf_base_blocks) is copied as the
// file holds it, rows permuted the same way.
lc_status lc_gguf_load_weights(const char *path, lc_model *m);

// QLoRA: cfg->base_q from the file (cfg read from it, lora set): each layer projection stored
// in one of the block types longctx computes with (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K,
// Q6_K) is held in them, and so are the embedding and the untied LM head (base_q_embed,
// base_q_head); F32/F16/BF16 ones stay dense (0).
lc_status lc_gguf_base_blocks(const char *path, lc_config *cfg);

#endif
