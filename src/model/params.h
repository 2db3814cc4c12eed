// Parameter layout: all weights live in one flat fp32 buffer (and the gradients in a
// second one of the same layout), so the optimizer, clipping and gradient collectives
// work on flat ranges. The table names each tensor with its Hugging Face name.
#ifndef LC_PARAMS_H
#define LC_PARAMS_H

#include <stddef.h>

#include "core/rng.h"
#include "core/status.h"
#include "model/config.h"

typedef struct {
  char name[96];  // HF name, e.g. model.layers.3.self_attn.q_proj.weight
  int ndim;       // 1 or 2
  long shape[2];  // HF shape ([out, in] for linear weights)
  size_t offset;  // element offset in the flat buffer
  size_t numel;
  int decay;      // 1: AdamW weight decay applies (matrices), 0: norms
} lc_param_info;

typedef struct {
  float *ln1;   // input_layernorm.weight          [C]
  float *wq;    // self_attn.q_proj.weight         [Hq*D, C]
  float *wk;    // self_attn.k_proj.weight         [Hkv*D, C]
  float *wv;    // self_attn.v_proj.weight         [Hkv*D, C]
  float *wo;    // self_attn.o_proj.weight         [C, Hq*D]
  float *ln2;   // post_attention_layernorm.weight [C]
  float *wgate; // mlp.gate_proj.weight            [F, C]
  float *wup;   // mlp.up_proj.weight              [F, C]
  float *wdown; // mlp.down_proj.weight            [C, F]
} lc_layer_weights;

#define LC_MAX_LAYERS 1024

typedef struct {
  float *embed; // model.embed_tokens.weight [V, C]
  float *norm;  // model.norm.weight         [C]
  float *head;  // lm_head.weight [V, C] (== embed when tied)
  lc_layer_weights layer[LC_MAX_LAYERS];
} lc_weights;

// Builds the table (malloc'd, caller frees) in flat-buffer order.
lc_status lc_param_table(const lc_config *cfg, lc_param_info **table, int *n, size_t *total);
// Points the views into `flat` following the table order.
void lc_weights_view(lc_weights *w, const lc_config *cfg, const lc_param_info *table, int n,
                     float *flat);
// HF-style init: linear and embedding weights ~ N(0, 0.02), norm weights = 1.
void lc_params_init(float *flat, const lc_param_info *table, int n, lc_rng *rng);

#endif
