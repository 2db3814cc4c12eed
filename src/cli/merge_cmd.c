// longctx merge: a base model (HF directory, GGUF file or preset) and a PEFT LoRA adapter
// into one HF model directory, W + scale B A in fp32 (as PEFT's merge_and_unload); the
// base directory's tokenizer files are copied along.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "io/fsutil.h"
#include "model/hf.h"

// DIR/name of the base, when present, into out/name (atomically).
static lc_status copy_file(const char *dir, const char *out, const char *name) {
  char a[1200], b[1200], *txt = NULL;
  size_t len = 0;
  LC_TRY(lc_path_join(a, sizeof a, dir, name));
  if (!lc_is_file(a)) return LC_OK;
  LC_TRY(lc_path_join(b, sizeof b, out, name));
  LC_TRY(lc_read_file(a, (size_t)1 << 30, &txt, &len));
  const lc_status st = lc_write_file_atomic(b, txt, len);
  free(txt);
  return st;
}

int lc_cmd_merge(int argc, char **argv) {
  const char *model = NULL, *adapter = NULL, *out = NULL, *dtype = "fp32";
  long seed = 1;
  lc_flag flags[] = {
      {"model", LC_ARG_STR, &model, "the base: an HF model directory, a GGUF file, or a preset (its random weights from --seed)", 0},
      {"adapter", LC_ARG_STR, &adapter, "the PEFT LoRA adapter directory (adapter_config.json + adapter_model.safetensors; a longctx train --lora checkpoint is one)", 0},
      {"out", LC_ARG_STR, &out, "the merged HF model directory to write (config.json + model.safetensors, each atomically)", 0},
      {"save-dtype", LC_ARG_STR, &dtype, "fp32 | bf16: the dtype of model.safetensors (default fp32)", 0},
      {"seed", LC_ARG_LONG, &seed, "a preset base's seed (the train run's --seed) (default 1)", 0},
  };
  const int nf = (int)(sizeof flags / sizeof flags[0]);
  if (lc_args_wants_help(argc, argv)) {
    lc_args_help("merge", flags, nf);
    return 0;
  }
  lc_status st = lc_args_parse(argc, argv, flags, nf);
  lc_dtype dt = LC_DT_F32;
  if (st == LC_OK && (!model || !adapter || !out))
    st = lc_fail(LC_EINVAL, "merge needs --model BASE, --adapter DIR and --out DIR");
  if (st == LC_OK) st = lc_dtype_parse_user(dtype, "--save-dtype", &dt);
  if (st == LC_OK && !strcmp(out, adapter)) st = lc_fail(LC_EINVAL, "--out %s is the adapter's directory: write the merged model elsewhere", out);
  if (st != LC_OK) {
    lc_cli_error(lc_errmsg());
    return 2;
  }
  lc_arena a;
  lc_arena_init(&a, lc_cli_default_mem_cap());
  lc_model m;
  lc_backend *be = NULL;
  int random_init = 0;
  st = lc_cli_load_inference_model(model, (uint64_t)seed, "cpu", adapter, &m, &random_init, &a, &be);
  if (st != LC_OK) {
    lc_cli_error(lc_errmsg());
    return st == LC_ENOMEM ? 1 : 2;
  }
  st = lc_hf_save(out, &m, dt);
  static const char *const tok_files[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                          "generation_config.json"};
  for (int i = 0; i < 4 && st == LC_OK && lc_is_dir(model); i++) st = copy_file(model, out, tok_files[i]);
  lc_model_destroy(&m);
  if (st != LC_OK) {
    lc_cli_error(lc_errmsg());
    return 1;
  }
  printf("merged %s into %s: %s (%s)%s\n", adapter, model, out, dt == LC_DT_BF16 ? "bf16" : "fp32",
         random_init ? "; the base is the preset's random weights from --seed" : "");
  return 0;
}
