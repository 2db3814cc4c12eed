// Subcommands of the longctx program. Each returns the process exit code.
#ifndef LC_CLI_H
#define LC_CLI_H

#include <stddef.h>

#include "core/cpu.h"
#include "core/dtype.h"
#include "core/status.h"
#include "model/config.h"
#include "model/model.h"

int lc_cmd_train(int argc, char **argv);
int lc_cmd_bench(int argc, char **argv);
int lc_cmd_plan(int argc, char **argv);
int lc_cmd_calibrate(int argc, char **argv);
int lc_cmd_generate(int argc, char **argv);
int lc_cmd_eval(int argc, char **argv);
int lc_cmd_prepare(int argc, char **argv);

// Prints "longctx: error: <message>" to stderr (rank 0 only in multi-process runs).
void lc_cli_error(const char *msg);
// Human-readable bytes, e.g. "12.3 MiB".
const char *lc_fmt_bytes(char *buf, int n, double bytes);
// A model for inference from --model (HF directory, GGUF file, or a preset with random
// weights from seed: *random_init 1), without gradient buffers, on `device` (NULL or "cpu":
// host memory, *be NULL; another: *be, closed by the caller after the model;
// cli/model_load.c).
// adapter (NULL: none): a PEFT LoRA adapter directory merged into the weights
// (lc_peft_merge) after loading, before the model moves to another device.
lc_status lc_cli_load_inference_model(const char *spec, uint64_t seed, const char *device, const char *adapter,
                                      lc_model *m, int *random_init, lc_arena *a, lc_backend **be);
// longctx merge: a base model and a PEFT LoRA adapter into one HF model directory.
int lc_cmd_merge(int argc, char **argv);
// The tokenizer --model brings: tokenizer.json of an HF directory, a GGUF file's
// vocabulary, or a tokenizer.json given itself. One line when there is none.
typedef struct lc_tokenizer lc_tokenizer;
lc_status lc_cli_load_tokenizer(const char *spec, lc_tokenizer **t);
// The machine's physical memory: the default arena cap of generate and eval.
size_t lc_cli_default_mem_cap(void);
// Resolves --model: a preset name, a Hugging Face model directory or a GGUF file.
lc_status lc_cli_model(const char *spec, lc_config *cfg);
// How a LoRA run's frozen base is held, for the settings table and plan: its dtype, or
// (QLoRA) the block types of its projections, the other weights' dtype, the store's bytes.
const char *lc_cli_base_desc(const lc_config *cfg, char *buf, size_t cap);
// --offload-depth N|auto (NULL: auto) into lc_model_opts.offload_depth (0: auto); one line
// when it is malformed, below 2, or given without --offload-checkpoints (offload_dir NULL).
lc_status lc_cli_offload_depth(const char *spec, const char *offload_dir, int *out);
#define LC_CLI_OFFLOAD_DEPTH_HELP                                                                                      \
  "with --offload-checkpoints: layer checkpoints kept in RAM at once, 2 or more; auto (default): 2 with --checkpoint "  \
  "full (a layer's input is written while the layer computes forward, the next is read back while it computes "         \
  "backward), else 3 (its kept activations are written while the next layer computes); more lets writes lag further"
// --offload-optimizer's share of a predicted step (plan, train): the copies and the host's
// gradient adds, and the host's AdamW, with the link they were priced at; indent before it.
struct lc_rates;
void lc_cli_offload_line(const struct lc_rates *r, double offload_s, double optim_s, const char *indent);
// --base-dtype gguf (model: a .gguf file; its own blocks) or a block type name (q4_k: every
// projection whose rows are whole blocks): cfg->base_q and lora.base_bf16 (the other weights
// in the pass's precision). One line for an unknown name or a model that is not GGUF for
// gguf. (Any ZeRO stage and vocabulary slices: the store shards and slices the blocks.)
lc_status lc_cli_base_blocks(const char *base_dtype, const char *model, int precision_bf16,
                             lc_config *cfg);
// Parses comma-separated sequence lengths with an optional K (1024) or M (1024^2) suffix,
// e.g. "1024,4K" or "1M", each in [1, limit], into out[0..max). Returns how many, or -1
// if s is empty or malformed, a value is out of range, or there are more than max.
int lc_cli_lengths(const char *s, long limit, long *out, int max);
// Sets the OpenMP (and so OpenBLAS) thread count; threads <= 0 keeps the default.
lc_status lc_cli_threads(int threads, int *used);
// Re-executes the program with OPENBLAS_CORETYPE set when OpenBLAS fell back to its
// slowest kernels on a CPU it does not know (see blas_env.c). Call first in main.
void lc_blas_fix_coretype(char **argv);
// Current resident set size of this process in bytes (0 if unknown).
size_t lc_rss_bytes(void);

// One line for the settings table and bench: the precision and, for bf16, how its GEMMs
// and attention run on this CPU (never silently slow: the line says what bf16 costs here).
const char *lc_cli_precision_desc(lc_dtype precision, const lc_cpu_info *c, char *buf, size_t n);
// --rope-theta F and --rope-scaling TYPE:FACTOR[:ORIG_MAX] | none (either may be NULL: not
// given) applied to cfg: the context becomes ORIG_MAX x FACTOR (max_position_embeddings).
lc_status lc_cli_rope(lc_config *cfg, const char *theta, const char *scaling);
#define LC_CLI_ROPE_THETA_HELP "RoPE base (default: the model's rope_theta)"
#define LC_CLI_ROPE_SCALING_HELP                                                                          \
  "TYPE:FACTOR[:ORIG_MAX] with TYPE linear, dynamic, llama3 or yarn, or none: extends the model's context to " \
  "ORIG_MAX x FACTOR tokens (ORIG_MAX default: its original_max_position_embeddings, else "                   \
  "max_position_embeddings); the saved config.json carries it (default: the model's own)"

// --head-chunk N|auto|all: N query heads per rank per Ulysses stage (attn.h) -> N, auto
// -> -1, all -> 0. Whether N fits the model and --hp is checked where both are known.
lc_status lc_cli_head_chunk(const char *spec, int *out);
#define LC_CLI_HEAD_CHUNK_HELP                                                                          \
  "N | auto | all: Ulysses (--hp > 1) runs attention N query heads per rank at a time (N divides heads/hp " \
  "and holds whole kv groups), the next group's all-to-all overlapping the current one's ring; only the " \
  "log-sum-exp is kept for backward, which exchanges q/k/v/out again: less checkpoint and buffer memory, " \
  "more traffic. auto: all at once unless the predicted peak exceeds the memory cap, then the largest N that " \
  "fits (default all)"

// --kernels auto|portable|avx2|avx512|bf16|amx: selects the kernel table's level (one
// line naming the missing CPU feature when this CPU cannot run it).
lc_status lc_cli_kernels(const char *spec);

// The time model's rates (plan/rates.h): --hardware FILE.json, else --machine FILE, else the
// default machine file when it exists, else the built-in defaults (r->source says which).
// An unreadable file named by a flag, or a malformed default file, is an error.
#include "plan/rates.h"
// plan --auto / --longest (plan_auto.c): prints the search; the exit code.
#include "plan/layout_search.h"
// plan --peak-detail (plan_detail.c): the buffers live at the total peak, as a table.
#include "model/memplan.h"
void lc_plan_print_peak_detail(const lc_mem_estimate *e);
int lc_plan_auto(const lc_config *cfg, const lc_model_opts *base, long S, const lc_search_opts *so, const lc_rates *r,
                 int auto_, int longest, int top, const char *model, double mem_gib, const char *extra,
                 const char *host_src);
lc_status lc_cli_rates(const char *machine, const char *hardware, int ranks, int threads, lc_rates *r);
#define LC_CLI_KERNELS_HELP                                                                          \
  "auto | portable | avx2 | avx512 | bf16 | amx: the kernel table's level (default auto: the best " \
  "this CPU runs; bf16 and amx use native bf16 GEMMs and attention in --precision bf16)"

#endif
