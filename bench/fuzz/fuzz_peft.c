// libFuzzer target: a PEFT adapter against a fixed small Llama base with rank-2 adapters on
// every projection. Input: adapter_config.json, then optionally a NUL byte and
// adapter_model.safetensors. The config goes through lc_peft_read_config and lc_peft_check
// against the run's settings; the weights through lc_peft_load_weights (names and shapes
// against the model's adapters). Accepted: a LoRA the run can train, the same settings as the
// run, exactly the model's adapter tensors; refused: one line.
#include <stdint.h>
#include <string.h>

#include "core/arena.h"
#include "fuzz_util.h"
#include "io/safetensors.h"
#include "model/hf.h"
#include "model/peft.h"

static const char base_json[] =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":8,\"intermediate_size\":12,"
    "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"num_key_value_heads\":1,\"head_dim\":4,\"vocab_size\":16,"
    "\"max_position_embeddings\":64,\"tie_word_embeddings\":false}";
static const lc_lora run_lora = {.rank = 2, .alpha = 4, .targets = LC_LORA_ALL};

static lc_model model;
static lc_arena arena;

static void setup(void) {
  lc_config cfg;
  if (lc_hf_parse_config(base_json, sizeof base_json - 1, "base", &cfg) != LC_OK) LC_FUZZ_TRAP();
  cfg.lora = run_lora;
  lc_arena_init(&arena, 0);
  if (lc_model_create(&model, &cfg, &arena) != LC_OK || !model.lora) LC_FUZZ_TRAP();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int ready;
  if (!ready) setup(), ready = 1;
  const uint8_t *nul = memchr(data, 0, size);
  const size_t jlen = nul ? (size_t)(nul - data) : size;
  const char *dir = lc_fuzz_dir();
  lc_fuzz_put("adapter_config.json", data, jlen);
  lc_lora file;
  lc_status st = lc_peft_read_config(dir, &file);
  if (st == LC_OK) {
    if (file.rank < 1 || !file.targets || (file.targets & ~LC_LORA_ALL) || file.alpha != file.alpha ||
        !(file.dropout >= 0 && file.dropout < 1))
      LC_FUZZ_TRAP();
    st = lc_peft_check(dir, &file, &run_lora);
    if (st == LC_OK && (file.rank != run_lora.rank || file.alpha != run_lora.alpha || file.targets != run_lora.targets ||
                        file.rslora != run_lora.rslora))
      LC_FUZZ_TRAP();
    if (st != LC_OK) lc_fuzz_refused(st);
  } else {
    lc_fuzz_refused(st);
  }
  if (!nul) {
    lc_fuzz_drop("adapter_model.safetensors");
    lc_fuzz_refused(lc_peft_load_weights(dir, &model)); // no weights file: refused
    return 0;
  }
  const uint8_t *w = nul + 1;
  const size_t wlen = size - jlen - 1;
  lc_fuzz_put("adapter_model.safetensors", w, wlen);
  st = lc_peft_load_weights(dir, &model);
  if (st != LC_OK) {
    lc_fuzz_refused(st);
    return 0;
  }
  // Loaded: a valid safetensors file holding exactly the model's adapters, each by name.
  lc_st_file f;
  if (lc_st_open_mem(&f, w, wlen, "weights") != LC_OK || f.n != model.ad.lay.n_tensors) LC_FUZZ_TRAP();
  lc_st_close(&f);
  return 0;
}
