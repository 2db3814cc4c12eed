// Parameter layout: all weights live in one flat fp32 buffer (and the gradients in a
// second one of the same layout), so the optimizer, clipping and gradient collectives
// work on flat ranges. The table names each tensor with its Hugging Face name.
#ifndef LC_PARAMS_H
#define LC_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/buf.h"
#include "core/rng.h"
#include "core/status.h"
#include "model/config.h"

typedef struct {
  char name[96];  // HF name, e.g. model.layers.3.self_attn.q_proj.weight
  int ndim;       // 1 or 2
  long shape[2];  // HF shape ([out, in] for linear weights)
  size_t offset;  // element offset in the flat buffer
  size_t numel;
  int decay;      // 1: AdamW weight decay applies (matrices), 0: norms and biases
  int unit;       // the unit (see lc_param_layout) holding this tensor
  int kind;       // index in lc_tensor_kinds (model/arch.h)
  int layer;      // decoder layer (-1: embedding or final unit)
  int init;       // lc_init (arch.h)
  size_t slot;    // byte offset of its view in lc_weights (layer >= 0: in lc_layer_weights)
} lc_param_info;

// A unit is what ZeRO moves at once: the embedding, one decoder layer, or the final norm
// with the (untied) LM head. Units are contiguous in the flat buffer, in this order, each
// padded so that it splits into equal, 16-float aligned shards.
typedef struct {
  size_t off, n; // floats [off, off + n) of the flat buffer; n a multiple of the layout's align
  int t0, t1;    // its tensors: table[t0 .. t1)
} lc_param_unit;

#define LC_UNIT_EMBED 0
static inline int lc_unit_layer(int l) { return 1 + l; }
static inline int lc_unit_final(int n_layers) { return n_layers + 1; }

typedef struct {
  lc_param_info *table; // HF-named tensors in flat order
  int n_tensors;
  lc_param_unit *units; // n_layers + 2: embed, layers, final
  int n_units;
  size_t total;         // floats in the flat buffer (units padded)
  size_t align;         // every unit's size is a multiple of this: 16 x shard ways
  size_t max_numel;     // elements of the largest tensor
} lc_param_layout;

// Floats of the staging buffer that moves a sharded tensor to or from a file, piece by
// piece (4 Mi floats, 16 MiB, or less for smaller models): what loading, saving and
// initialising hold beyond the model states, whatever the tensor sizes.
// (Test hook: LONGCTX_TEST_STAGE_FLOATS=N stages N floats at a time, so small test models
// move their tensors in several pieces.)
#define LC_STAGE_FLOATS ((size_t)1 << 22)
size_t lc_stage_floats(const lc_param_layout *L);

// The views of one layer (model/arch.h lists the tensors; absent ones are the empty buffer):
// handles into the store's buffers (pstore.h), in the dtype the ops read them: fp32, or in a
// bf16 pass a matrix's 2-byte compute copy (BF16) and a vector's rounded values (fp32).
typedef struct {
  lc_buf ln1;   // input_layernorm.weight          [C]
  lc_buf wq;    // self_attn.q_proj.weight         [Hq*D, C]
  lc_buf wk;    // self_attn.k_proj.weight         [Hkv*D, C]
  lc_buf wv;    // self_attn.v_proj.weight         [Hkv*D, C]
  lc_buf wo;    // self_attn.o_proj.weight         [C, Hq*D]
  lc_buf bq, bk, bv; // self_attn.{q,k,v}_proj.bias [Hq*D], [Hkv*D] (qkv_bias)
  lc_buf bo;    // self_attn.o_proj.bias           [C] (o_bias)
  lc_buf q_norm, k_norm; // self_attn.{q,k}_norm.weight [D] (qk_norm)
  lc_buf ln2;   // post_attention_layernorm.weight [C]
  lc_buf wgate; // mlp.gate_proj.weight            [F, C]
  lc_buf wup;   // mlp.up_proj.weight              [F, C]
  lc_buf wdown; // mlp.down_proj.weight            [C, F]
  // LoRA adapters of the targets (LC_LORA_Q..; empty when off), in the adapters' store:
  // lora_a[i] [r, in], lora_b[i] [out, r] (PEFT's lora_A / lora_B of that projection).
  lc_buf lora_a[LC_LORA_N], lora_b[LC_LORA_N];
} lc_layer_weights;

// Which projection (LC_LORA_Q .. LC_LORA_DOWN) a decoder layer's tensor is, -1 for any
// other (norms, biases, the embedding, the head).
int lc_param_proj(const lc_param_info *p);
// The block type a LoRA run's frozen base holds tensor p in (cfg->base_q, base_q_embed,
// base_q_head), 0 for one held dense.
int lc_param_base_q(const lc_config *cfg, const lc_param_info *p);
// Sets it to block type q (0: dense); 0 (and nothing set) for a tensor always dense or whose
// rows are not whole blocks of q.
int lc_param_set_base_q(lc_config *cfg, const lc_param_info *p, int q);

typedef struct {
  lc_buf embed; // model.embed_tokens.weight [V, C]
  lc_buf norm;  // model.norm.weight         [C]
  lc_buf head;  // lm_head.weight [V, C] (== embed when tied)
  lc_layer_weights *layer; // [n_layers], the store's
} lc_weights;

// The layout of the flat buffers for a store split `shard_ways` ways (1: unsharded): the
// single description of where every tensor lives. Tensors are 16-float aligned; each unit
// is padded to a multiple of 16 x shard_ways floats (the padding is zero and never read).
lc_status lc_param_layout_build(lc_param_layout *L, const lc_config *cfg, int shard_ways);
void lc_param_layout_free(lc_param_layout *L);
// The unsharded table alone (malloc'd, caller frees) in flat-buffer order.
lc_status lc_param_table(const lc_config *cfg, lc_param_info **table, int *n, size_t *total);
// The view of tensor t in w: &w->embed, &w->layer[l].wq, ... (t->slot: the field's offset in
// lc_weights, or for a layer's tensor in lc_layer_weights). For a tied model the head
// follows the embedding (set both with lc_weights_tie).
lc_buf *lc_weights_slot(lc_weights *w, const lc_param_info *t);
void lc_weights_tie(lc_weights *w, const lc_config *cfg);
// HF-style init: linear and embedding weights ~ N(0, 0.02), norm weights = 1, biases 0. Tensor by
// tensor in table order from one stream, so the values do not depend on the layout.
void lc_param_init_tensor(float *dst, const lc_param_info *t, lc_rng *rng);
// The next n values of tensor t's init (the same stream in pieces).
void lc_param_init_part(float *dst, const lc_param_info *t, size_t n, lc_rng *rng);

#endif
