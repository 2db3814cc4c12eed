// LoRA adapters in PEFT's files: DIR/adapter_config.json (r, lora_alpha, target_modules,
// use_rslora, base_model_name_or_path, ...) and DIR/adapter_model.safetensors with PEFT's
// names (base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight, A [r, in],
// B [out, r]), loadable by peft.PeftModel.from_pretrained without conversion.
#ifndef LC_PEFT_H
#define LC_PEFT_H

#include "core/status.h"
#include "model/config.h"
#include "model/model.h"

// Reads DIR/adapter_config.json into *l (rank, alpha, targets, rslora, dropout). What
// longctx cannot run is an error naming the field: another peft_type, bias other than
// "none", DoRA, per-layer patterns, fan_in_fan_out, target modules outside
// q/k/v/o/gate/up/down.
lc_status lc_peft_read_config(const char *dir, lc_lora *l);
// Writes DIR/adapter_config.json (rank 0's job; atomic) for cfg->lora; base names the base model.
lc_status lc_peft_write_config(const char *dir, const lc_config *cfg, const char *base);
// Writes DIR/adapter_model.safetensors (fp32) from the model's adapters. Collective over
// the model's store like lc_hf_save (rank 0 writes).
lc_status lc_peft_save_weights(const char *dir, lc_model *m);
// Loads DIR/adapter_model.safetensors into the model's adapters: every adapter of the model
// must be there with its shape (another base's shapes or rank are one line naming the
// tensor), and nothing else.
lc_status lc_peft_load_weights(const char *dir, lc_model *m);
// The settings the checkpoint or --lora-from DIR has equal the run's (one line naming
// the first difference and the fix).
lc_status lc_peft_check(const char *dir, const lc_lora *file, const lc_lora *run);

#endif

// Merges the PEFT LoRA adapter in DIR into a model without adapters (its weights in host
// memory): W += scale B A for every adapted projection, in fp32 as PEFT's merge_and_unload
// does. The adapter must match the model's shapes (one line naming the first that does
// not). For inference (generate/eval --adapter) and `longctx merge`.
lc_status lc_peft_merge(const char *dir, lc_model *m);
