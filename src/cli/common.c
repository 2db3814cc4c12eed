#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <omp.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli/cli.h"
#include "io/fsutil.h"
#include "model/gguf_model.h"
#include "model/hf.h"
#include "model/pstore.h"
#include "backend/cpu/flash/flash.h"
#include "backend/cpu/kern/kernels.h"
#include "plan/rates.h"

void lc_cli_error(const char *msg) { fprintf(stderr, "longctx: error: %s\n", msg); }

const char *lc_fmt_bytes(char *buf, int n, double b) {
  if (b >= 1024.0 * 1024 * 1024) snprintf(buf, (size_t)n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  else if (b >= 1024.0 * 1024) snprintf(buf, (size_t)n, "%.1f MiB", b / (1024.0 * 1024));
  else snprintf(buf, (size_t)n, "%.1f KiB", b / 1024.0);
  return buf;
}

lc_status lc_cli_model(const char *spec, lc_config *cfg) {
  // An existing directory is meant as a Hugging Face model: its own errors are clearer.
  if (lc_is_dir(spec)) return lc_hf_read_config(spec, cfg);
  if (lc_gguf_is_model_path(spec)) return lc_gguf_read_config(spec, cfg); // FILE.gguf
  return lc_config_preset(cfg, spec);
}

int lc_cli_lengths(const char *s, long limit, long *out, int max) {
  int n = 0;
  const char *p = s;
  while (*p) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || errno || v <= 0 || n == max) return -1;
    long long mult = 1;
    if (*end == 'K' || *end == 'k') mult = 1024, end++;
    else if (*end == 'M' || *end == 'm') mult = 1024 * 1024, end++;
    if (v > limit / mult) return -1;
    out[n++] = (long)(v * mult);
    if (*end == ',' && end[1]) end++;
    else if (*end) return -1;
    p = end;
  }
  return n > 0 ? n : -1;
}

lc_status lc_cli_head_chunk(const char *spec, int *out) {
  *out = 0;
  if (!spec || !strcmp(spec, "all")) return LC_OK;
  if (!strcmp(spec, "auto")) return *out = -1, LC_OK;
  char *end = NULL;
  const long v = strtol(spec, &end, 10);
  if (end == spec || *end || v < 1 || v > 1 << 20)
    return lc_fail(LC_EINVAL, "--head-chunk '%s': give query heads per rank per stage (a positive number), auto or all",
                   spec);
  *out = (int)v;
  return LC_OK;
}

lc_status lc_cli_offload_depth(const char *spec, const char *offload_dir, int *out) {
  *out = 0;
  if (!spec) return LC_OK;
  if (!offload_dir)
    return lc_fail(LC_EINVAL, "--offload-depth sets how many layer checkpoints --offload-checkpoints keeps in RAM: add "
                   "--offload-checkpoints DIR (or drop --offload-depth)");
  if (!strcmp(spec, "auto")) return LC_OK;
  char *end = NULL;
  const long v = strtol(spec, &end, 10);
  if (end == spec || *end || v < 2 || v > 1 << 20)
    return lc_fail(LC_EINVAL, "--offload-depth '%s': give the layer checkpoints kept in RAM, 2 or more (the layer computed "
                   "and the next), or auto", spec);
  *out = (int)v;
  return LC_OK;
}

lc_status lc_cli_threads(int threads, int *used) {
  if (threads < 0) return lc_fail(LC_EINVAL, "--threads %d: use a positive count (0 = default)", threads);
  if (threads > 0) omp_set_num_threads(threads);
  *used = omp_get_max_threads();
  return LC_OK;
}

size_t lc_rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, rss = 0;
  int ok = fscanf(f, "%lu %lu", &size, &rss) == 2;
  fclose(f);
  return ok ? (size_t)rss * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

const char *lc_cli_precision_desc(lc_dtype precision, const lc_cpu_info *c, char *buf, size_t n) {
  const lc_kernels *k = lc_kern();
  if (precision != LC_DT_BF16) {
    snprintf(buf, n, "fp32 (kernels %s)", k->name);
    return buf;
  }
  const char *what = "bf16: GEMM operands, attention inputs and layer checkpoints in bf16; master weights, gradients, "
                     "AdamW, norms, softmax and loss in fp32.";
  if (k->level >= LC_KERN_BF16) {
    // the attention kernel a bf16 pass runs at this level (amx: the tile kernel, or the bf16
    // one where Linux refused the tile state)
    const lc_attn_shape s1 = {.Tq = 1, .Tk = 1, .Hq = 1, .Hkv = 1, .D = 64, .scale = 0.125f, .bf16 = 1};
    const int tiles = !strcmp(lc_flash_variant_name(&s1), "amx");
    snprintf(buf, n, "%s Kernels %s: GEMMs are oneDNN bf16 GEMMs%s and attention %s, fp32 sums", what, k->name,
             k->level == LC_KERN_AMX ? " (AMX tiles)" : "",
             tiles ? "runs the amx kernel (AMX tiles, TDPBF16PS)"
             : k->level == LC_KERN_AMX ? "runs the bf16 kernel (bf16 pairs, AVX512_BF16: Linux refused the AMX tile state)"
                                       : "runs the bf16 kernel (bf16 pairs, AVX512_BF16)");
    return buf;
  }
  const char *hw = c->amx_bf16 ? "AMX-BF16" : c->avx512_bf16 ? "AVX512_BF16" : NULL;
  char why[200];
  if (hw) snprintf(why, sizeof why, "this CPU has %s but --kernels %s does not use it, so bf16 saves memory, not time", hw, k->name);
  else snprintf(why, sizeof why, "this CPU has no AVX512_BF16 or AMX, so bf16 saves memory, not time");
  snprintf(buf, n, "%s Kernels %s: GEMMs and attention run in fp32 on the bf16 values (exact products, fp32 sums): %s",
           what, k->name, why);
  return buf;
}

lc_status lc_cli_kernels(const char *spec) {
  lc_kern_level level;
  LC_TRY(lc_kern_parse(spec, &level));
  return lc_kern_select(level);
}

lc_status lc_cli_rates(const char *machine, const char *hardware, int ranks, int threads, lc_rates *r) {
  if (hardware && machine) return lc_fail(LC_EINVAL, "--hardware and --machine both name rates: give one");
  if (hardware) return lc_rates_load_hardware(hardware, r);
  if (machine) return lc_rates_load_machine(machine, ranks, threads, r);
  char def[4096];
  if (lc_is_file(lc_rates_default_path(def, sizeof def))) return lc_rates_load_machine(def, ranks, threads, r);
  lc_rates_default(r, threads);
  return LC_OK;
}

const char *lc_cli_base_desc(const lc_config *c, char *buf, size_t cap) {
  const char *dense = c->lora.base_bf16 ? "bf16 (2 bytes per weight)" : "fp32 (4 bytes per weight)";
  if (!lc_config_base_quant(c)) return snprintf(buf, cap, "%s", dense), buf;
  int count[LC_DT_COUNT] = {0};
  for (int l = 0; l < c->n_layers && l < LC_MAX_LAYERS; l++)
    for (int p = 0; p < LC_LORA_N; p++)
      if (c->base_q[l][p]) count[c->base_q[l][p]]++;
  size_t k = 0;
  for (int t = LC_DT_QFIRST; t < LC_DT_COUNT && k < cap; t++)
    if (count[t]) k += (size_t)snprintf(buf + k, cap - k, "%s%s blocks for %d", k ? ", " : "", lc_dtype_name((lc_dtype)t), count[t]);
  if (k < cap) k += (size_t)snprintf(buf + k, cap - k, " projections");
  const int eq = c->base_q_embed, hq = c->tie_embeddings ? 0 : c->base_q_head;
  if (eq && k < cap) k += (size_t)snprintf(buf + k, cap - k, ", the embedding%s in %s", c->tie_embeddings ? " (tied head)" : "", lc_dtype_name((lc_dtype)eq));
  if (hq && k < cap) k += (size_t)snprintf(buf + k, cap - k, ", the LM head in %s", lc_dtype_name((lc_dtype)hq));
  lc_ps_sizes z;
  char b[32];
  const int ok = lc_pstore_sizes(c, 0, 1, &z) == LC_OK;
  if (k < cap)
    snprintf(buf + k, cap - k, ", the other weights in %s%s%s", dense, ok ? "; in all " : "",
             ok ? lc_fmt_bytes(b, sizeof b, (double)z.params) : "");
  return buf;
}

lc_status lc_cli_base_blocks(const char *base_dtype, const char *model, int precision_bf16,
                             lc_config *cfg) {
  memset(cfg->base_q, 0, sizeof cfg->base_q);
  cfg->base_q_embed = cfg->base_q_head = 0;
  const int gguf = !strcmp(base_dtype, "gguf");
  lc_dtype q = LC_DT_COUNT;
  for (int t = LC_DT_QFIRST; t < LC_DT_COUNT && !gguf; t++)
    if (!strcasecmp(base_dtype, lc_dtype_name((lc_dtype)t))) q = (lc_dtype)t;
  if (!gguf && q == LC_DT_COUNT)
    return lc_fail(LC_EINVAL, "--base-dtype %s: give fp32, bf16, gguf (a .gguf --model's own blocks) or one block type for "
                   "every projection (q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k)", base_dtype);
  cfg->lora.base_bf16 = precision_bf16; // the other weights: the pass's precision
  if (gguf) {
    if (lc_is_dir(model) || !lc_gguf_is_model_path(model))
      return lc_fail(LC_EINVAL, "--base-dtype gguf holds the frozen base in a GGUF file's own blocks: give --model FILE.gguf "
                     "(or a block type such as --base-dtype q4_k for %s)", model);
    return lc_gguf_base_blocks(model, cfg);
  }
  // Uniform: every projection, the embedding and the head (as llama-quantize does) whose rows
  // are whole blocks (llama.cpp's converters keep the others in F16; here dense in the pass's
  // precision).
  lc_param_layout L;
  LC_TRY(lc_param_layout_build(&L, cfg, 1));
  for (int i = 0; i < L.n_tensors; i++) lc_param_set_base_q(cfg, &L.table[i], q);
  lc_param_layout_free(&L);
  return LC_OK;
}

void lc_cli_offload_line(const lc_rates *r, double offload_s, double optim_s, const char *indent) {
  char link[96];
  if (r->host_link_bw > 0) snprintf(link, sizeof link, "the host link at %.3g GB/s each way", r->host_link_bw / 1e9);
  else snprintf(link, sizeof link, "copies in host memory at the element-wise rate (no host link in the rates)");
  printf("%s--offload-optimizer: %.4g s of it the units' copies up, their gradients down and added on the host "
         "(blocking), %.4g s the host's AdamW; %s\n", indent, offload_s, optim_s, link);
}
