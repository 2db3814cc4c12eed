// Autoregressive decoding with a KV cache, and token sampling.
// The cache holds every layer's keys (after RoPE) and values of the positions decoded so
// far; lc_decode runs new tokens at the next positions through the training layer's own
// forward (lc_layer_fwd) with the decode attention strategy (attn/attn_decode.c), so
// every change to the layer lands here too and the logits equal those of the training
// forward up to float rounding (tests/test_generate.c).
#ifndef LC_GENERATE_H
#define LC_GENERATE_H

#include <stdint.h>

#include "core/arena.h"
#include "core/rng.h"
#include "core/status.h"
#include "model/config.h"
#include "model/model.h"

typedef struct {
  int max_len;  // positions the cache holds
  int len;      // positions filled = absolute position of the next token
  int n_layers;
  int kv_dim;   // n_kv_heads * head_dim
  lc_buf buf;   // one LC_MEM_ACT block of the model's backend (F32): layer l's k [max_len, Hkv, D], then its v
} lc_kv_cache;

// Allocates an empty cache for max_len positions on backend be (the model's: m->ps.be;
// LC_ENOMEM when its arena's cap is hit). max_len must be >= 1 and <= cfg->max_pos
// (max_position_embeddings) when that is set.
lc_status lc_kv_cache_create(lc_kv_cache *c, const lc_config *cfg, int max_len, lc_backend *be);
void lc_kv_cache_destroy(lc_kv_cache *c);
// Layer l's keys / values, [max_len, Hkv, D]; rows [0, len) are valid.
lc_buf lc_kv_cache_k(const lc_kv_cache *c, int l);
lc_buf lc_kv_cache_v(const lc_kv_cache *c, int l);

// Runs tokens[0..n) at absolute positions cache->len .. cache->len+n-1 through the model,
// appending their keys/values to the cache, and writes the logits of the LAST token into
// logits[vocab] (all_logits = 0) or of every token into logits[n*vocab] (all_logits = 1).
// Long inputs (prefill) run in chunks of LC_DECODE_CHUNK tokens, each chunk attending to
// the whole cache through the blockwise kernel, so working memory is O(chunk), not O(n).
// Errors (cache unchanged): n < 1, a token outside [0, vocab), more tokens than the cache
// has room for. In bf16 (after lc_model_bf16_inference) the layers round as in training
// (layer.h) and the head reads the final norm's rows rounded. Everything runs on the
// model's backend; the host sees the logits (a named read where its memory is not the
// host's) and writes each chunk's token ids, bounds and RoPE tables. `a`: host memory.
#define LC_DECODE_CHUNK 256
lc_status lc_decode(const lc_model *m, lc_kv_cache *c, const int *tokens, int n, float *logits,
                    int all_logits, lc_arena *a);
// Inference in bf16: the weights become their bf16 values in place (no master copy is
// kept: a decoding model never updates) and lc_decode computes in bf16.
void lc_model_bf16_inference(lc_model *m);

typedef struct {
  float temperature; // <= 0: greedy (argmax)
  int top_k;         // sample among the top_k most likely tokens; <= 0 or >= vocab: all
  uint64_t seed;     // for the caller to seed the lc_rng it passes to lc_sample
} lc_sampling;

// Picks the next token from logits[vocab]. Greedy (temperature <= 0 or top_k == 1): the
// first index of the largest logit. Otherwise: softmax(logits / temperature) restricted to
// the top_k largest logits (ties at the k-th value broken by lower index), drawn with one
// lc_rng_uniform from rng. Allocation-free; NaN logits are never picked.
int lc_sample(const float *logits, int vocab, const lc_sampling *s, lc_rng *rng);

#endif
