// Loading a model for inference (generate, eval): an HF directory, a GGUF file, or a
// preset with random weights; no gradient buffer.
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "model/gguf_model.h"
#include "model/hf.h"
#include "model/peft.h"
#include "tok/tokenizer.h"

static int is_dir(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

// --model: an existing directory is a Hugging Face model, a .gguf file (or one starting
// with GGUF) a GGUF model; otherwise a preset name. device NULL or "cpu": the store makes
// its own CPU backend over `a` (*be NULL); another device: opened over `a` into *be, which
// the caller closes after the model.
lc_status lc_cli_load_inference_model(const char *spec, uint64_t seed, const char *device, const char *adapter,
                                      lc_model *m, int *random_init, lc_arena *a, lc_backend **be) {
  lc_config cfg;
  *be = NULL;
  const int gguf = !is_dir(spec) && lc_gguf_is_model_path(spec);
  *random_init = !is_dir(spec) && !gguf;
  if (*random_init) {
    if (strchr(spec, '/') || strchr(spec, '.'))
      return lc_fail(LC_EINVAL, "--model '%s': no such directory; pass a Hugging Face model "
                                "directory (config.json + model.safetensors) or a preset (%s)",
                     spec, lc_config_preset_names());
    LC_TRY(lc_config_preset(&cfg, spec));
  } else {
    LC_TRY((gguf ? lc_gguf_read_config : lc_hf_read_config)(spec, &cfg));
  }
  if (adapter && device && strcmp(device, "cpu"))
    return lc_fail(LC_EINVAL, "--adapter with --device %s: merge it on the CPU first (longctx merge --model %s --adapter %s "
                   "--out DIR) and give --model DIR", device, spec, adapter);
  if (device && strcmp(device, "cpu")) LC_TRY(lc_backend_open(device, a, be));
  lc_status st = *be ? lc_model_create_on(m, &cfg, 0, 0, NULL, *be) : lc_model_create(m, &cfg, a);
  if (st == LC_OK && *random_init) st = lc_model_init_random(m, seed);
  else if (st == LC_OK) st = (gguf ? lc_gguf_load_weights : lc_hf_load_weights)(spec, m);
  if (st == LC_OK && adapter) st = lc_peft_merge(adapter, m);
  if (st != LC_OK) {
    if (m->ps.be) lc_model_destroy(m);
    lc_backend_close(*be);
    *be = NULL;
    return st;
  }
  // Inference needs no gradient buffer: give its memory back (the views into it go too).
  lc_pstore_drop_grads(&m->ps);
  m->grads = NULL;
  return LC_OK;
}

size_t lc_cli_default_mem_cap(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

lc_status lc_cli_load_tokenizer(const char *spec, lc_tokenizer **t) {
  *t = NULL;
  if (is_dir(spec)) {
    char p[4200];
    snprintf(p, sizeof p, "%s/tokenizer.json", spec);
    if (access(p, R_OK) != 0)
      return lc_fail(LC_EIO, "%s has no tokenizer.json: copy the model's tokenizer.json next to its config.json", spec);
    return lc_tok_load_json(t, spec);
  }
  if (lc_gguf_is_model_path(spec)) return lc_tok_load_gguf(t, spec);
  if (access(spec, R_OK) == 0) return lc_tok_load_json(t, spec); // a tokenizer.json itself
  return lc_fail(LC_EINVAL, "'%s' has no tokenizer: give an HF model directory (with tokenizer.json), a GGUF file or a "
                 "tokenizer.json", spec);
}
