// libFuzzer target: arbitrary bytes as an HF config.json of any family (Llama, Mistral,
// Qwen2, Qwen3; rope_scaling and rope_parameters) through lc_hf_parse_config. A config that
// is accepted is valid (lc_config_validate), describable and countable, and what
// lc_hf_write_config writes of it reads back the same; a refused one leaves one line.
#include <stdint.h>
#include <string.h>

#include "fuzz_util.h"
#include "model/arch.h"
#include "model/hf.h"

static int same(const lc_config *a, const lc_config *b) {
  return a->dim == b->dim && a->n_layers == b->n_layers && a->n_heads == b->n_heads && a->n_kv_heads == b->n_kv_heads &&
         a->head_dim == b->head_dim && a->ffn == b->ffn && a->vocab == b->vocab && a->norm_eps == b->norm_eps &&
         a->rope_theta == b->rope_theta && a->tie_embeddings == b->tie_embeddings && a->max_pos == b->max_pos &&
         a->sliding_window == b->sliding_window && lc_arch_written(a) == lc_arch_written(b) && a->qkv_bias == b->qkv_bias &&
         a->o_bias == b->o_bias && a->qk_norm == b->qk_norm && lc_rope_scaling_equal(&a->rope, &b->rope);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static lc_config cfg, back;
  lc_status st = lc_hf_parse_config((const char *)data, size, "fuzz/config.json", &cfg);
  if (st != LC_OK) {
    lc_fuzz_refused(st);
    return 0;
  }
  if (lc_config_validate(&cfg) != LC_OK) LC_FUZZ_TRAP();
  if (cfg.dim <= 0 || cfg.n_layers <= 0 || cfg.n_layers > LC_MAX_LAYERS || cfg.ffn <= 0 || cfg.vocab <= 0 ||
      cfg.n_kv_heads <= 0 || cfg.n_heads % cfg.n_kv_heads || cfg.head_dim <= 0 || cfg.head_dim % 2 ||
      cfg.arch < 0 || cfg.arch >= LC_ARCH_N || !(cfg.norm_eps > 0) || !(cfg.rope_theta > 0) || cfg.sliding_window < 0)
    LC_FUZZ_TRAP();
  char desc[512];
  if (!lc_config_describe(&cfg, desc, sizeof desc)[0] || lc_config_n_params(&cfg) <= 0 || lc_config_max_positions(&cfg) <= 0)
    LC_FUZZ_TRAP();
  // What the writer writes, the reader reads back the same (the writer may refuse, with one line).
  const char *dir = lc_fuzz_dir();
  st = lc_hf_write_config(dir, &cfg, LC_DT_BF16);
  if (st != LC_OK) {
    lc_fuzz_refused(st);
    return 0;
  }
  lc_fuzz_put("config.json", "", 0); // registered for removal at exit (rewritten below)
  if (lc_hf_write_config(dir, &cfg, LC_DT_F32) != LC_OK) LC_FUZZ_TRAP();
  if (lc_hf_read_config(dir, &back) != LC_OK) {
    fprintf(stderr, "fuzz_config: the written config does not read back: %s\n", lc_errmsg());
    LC_FUZZ_TRAP();
  }
  if (!same(&cfg, &back)) {
    fprintf(stderr, "fuzz_config: the written config reads back differently\n");
    LC_FUZZ_TRAP();
  }
  return 0;
}
