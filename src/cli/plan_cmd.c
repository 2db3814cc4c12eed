// longctx plan: the memory model (src/model/memplan.h) for any model, sequence length,
// layout and memory options: predicted arena peak per category per rank, and the largest
// sequence that fits a per-rank budget. Nothing is allocated or run.
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "model/ckstore.h"
#include "model/loss.h"
#include "model/memplan.h"
#include "comm/grid.h"
#include "plan/layout_search.h"
#include "plan/timemodel.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

// Visible (query, key) pairs of one causal document of n tokens, each token seeing at
// most the W > 0 most recent: token t sees min(t + 1, W).
static double doc_pairs(long n, long W) {
  const double N = (double)n;
  if (W <= 0 || W >= n) return N * (N + 1) / 2;
  return (double)W * (W + 1) / 2 + (N - W) * W;
}

int lc_cmd_plan(int argc, char **argv) {
  const char *model = NULL, *seq_s = NULL, *ckpt = "selective", *prec = "fp32", *kernels = "auto";
  int batch = 1, hp = 1, cp = 1, window = 0, mlp_tile = -1, loss_tile = -1, threads = 0;
  int ranks = 0, zero = 0, zero_group = 0, pack = 0, attn_window = 0, doc_len = 0, vocab_slice = 0, offload_optim = 0;
  const char *cp_layout = NULL, *offload = NULL, *offload_depth = NULL;
  const char *head_chunk_s = "all";
  const char *machine = NULL, *hardware = NULL, *placement = "head-first";
  int auto_ = 0, longest = 0, per_node = 0, top = 5, lora = 0, peak_detail = 0;
  const char *lora_targets = NULL, *base_dtype = NULL;
  float lora_dropout = 0;
  float budget_gib = 20.0f, gflops = 200.0f, host_mem_gib = 0;
  lc_flag flags[] = {
      {"model", LC_ARG_STR, &model, "a preset (tiny, demo, bench-s; shapes only: llama-3-8b, llama-3-70b, llama-3.1-8b, llama-3.1-70b, qwen2.5-7b, qwen3-8b, qwen3-32b), an HF model directory or a GGUF file", 0},
      {"seq", LC_ARG_STR, &seq_s, "tokens per sequence, K = 1024, M = 1024^2 (e.g. 128K, 1M)", 0},
      {"batch", LC_ARG_INT, &batch, "sequences per step (default 1; run one after another: no effect on the peak)", 0},
      {"hp", LC_ARG_INT, &hp, "head-parallel (Ulysses) degree (default 1)", 0},
      {"cp", LC_ARG_INT, &cp, "context-parallel (ring) degree (default 1)", 0},
      {"ring-window", LC_ARG_INT, &window, "inner ring size of the double ring, divides cp (default cp)", 0},
      {"head-chunk", LC_ARG_STR, &head_chunk_s, "as train: N | auto | all query heads per rank per Ulysses stage (auto: all unless the peak exceeds --budget-gib; the largest-S search then tries every chunk)", 0},
      {"gpus", LC_ARG_INT, &ranks, "ranks (processes; GPUs on a GPU cluster) in the job: hp x cp x dp (default hp x cp)", 0},
      {"zero", LC_ARG_INT, &zero, "ZeRO stage 0..3 (default 0)", 0},
      {"zero-group", LC_ARG_INT, &zero_group, "ranks per zero group, divides --gpus (default: all of them)", 0},
      {"pack", LC_ARG_BOOL, &pack, "sequences packed with documents (attention work: see --doc-len)", 0},
      {"doc-len", LC_ARG_INT, &doc_len, "with --pack: typical document length in tokens for the attention work (default 4096)", 0},
      {"attn-window", LC_ARG_INT, &attn_window, "sliding window: each token sees at most N most recent tokens", 0},
      {"cp-layout", LC_ARG_STR, &cp_layout, "zigzag | balanced (default: balanced with --pack or a window)", 0},
      {"checkpoint", LC_ARG_STR, &ckpt, "none | full | selective (default selective)", 0},
      {"offload-checkpoints", LC_ARG_STR, &offload, "as train: layer checkpoints on disk (DIR is not touched here): --offload-depth layers in RAM, the disk traffic printed", 0},
      {"offload-depth", LC_ARG_STR, &offload_depth, "as train: " LC_CLI_OFFLOAD_DEPTH_HELP, 0},
      {"vocab-slice", LC_ARG_INT, &vocab_slice, "as train: the embedding and LM head a slice of N vocabulary rows at a time (default 0: whole)", 0},
      {"offload-optimizer", LC_ARG_BOOL, &offload_optim, "as train: the model states (fp32 weights, gradients, AdamW m and v) in host memory; the device holds each unit's compute copy and gradient while in use (its peak below; the host's bytes printed apart; the predicted step adds the blocking copies over the --hardware file's host link, a memcpy on a CPU, and AdamW at the host's memory bandwidth)", 0},
      {"host-mem-gib", LC_ARG_FLOAT, &host_mem_gib, "with --offload-optimizer: host memory per node for the ranks' model states, GiB (default: a --hardware file's host_memory_per_node_gib, else this machine's RAM); --auto/--longest drop the layouts over it", 0},
      {"precision", LC_ARG_STR, &prec, "fp32 | bf16, as train (default fp32)", 0},
      {"kernels", LC_ARG_STR, &kernels, "as train: the bf16 attention kernel's workspace depends on it (default auto)", 0},
      {"mlp-tile", LC_ARG_INT, &mlp_tile, "tokens per MLP tile, 0 = untiled (default: as train, auto)", 0},
      {"loss-tile", LC_ARG_INT, &loss_tile, "tokens per logits+loss tile, 0 = untiled (default: as train, auto)", 0},
      {"threads", LC_ARG_INT, &threads, "OpenMP threads per rank, sizes kernel workspaces (default: this machine's)", 0},
      {"gflops", LC_ARG_FLOAT, &gflops, "sustained GFLOP/s per rank, for the disk bandwidth that keeps --offload-checkpoints hidden (default 200: ~2 Zen 4 cores in bf16; an H100 sustains ~400000)", 0},
      {"budget-gib", LC_ARG_FLOAT, &budget_gib, "memory per rank for the largest-S search and --auto, GiB (default 20; a --hardware file's memory per device)", 0},
      {"mem-per-rank", LC_ARG_FLOAT, &budget_gib, "the same as --budget-gib", 0},
      {"placement", LC_ARG_STR, &placement, "head-first | context-first, as train (which groups span nodes; default head-first)", 0},
      {"machine", LC_ARG_STR, &machine, "rates for the predicted step time: a file from `longctx calibrate` (default ~/.cache/longctx/machine.json when it exists, else built-in rates)", 0},
      {"hardware", LC_ARG_STR, &hardware, "rates and memory of hardware you do not have: a description such as hardware/h100-sxm-80gb-8x-node.json", 0},
      {"gpus-per-node", LC_ARG_INT, &per_node, "ranks per node (default: the --hardware file's devices per node, else all)", 0},
      {"auto", LC_ARG_BOOL, &auto_, "enumerate the layouts of --gpus ranks (hp x cp, placement, ZeRO stage and group, checkpoint policy, precision; flags you give stay fixed), drop those over the memory per rank, print the fastest as train command lines", 0},
      {"longest", LC_ARG_BOOL, &longest, "the longest --seq any layout of --gpus ranks fits, and the fastest layout that reaches it (no --seq needed)", 0},
      {"lora", LC_ARG_INT, &lora, "as train: rank-R LoRA adapters on a frozen base (the base's weights alone, 4 bytes each; the adapters' 16 bytes per parameter; their scratch) (default 0)", 0},
      {"base-dtype", LC_ARG_STR, &base_dtype, "as train: fp32 | bf16 | gguf (a .gguf --model's own blocks) | a block type for every projection whose rows are whole blocks (q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k: QLoRA; the other weights in the pass's precision; --zero 0-2)", 0},
      {"lora-targets", LC_ARG_STR, &lora_targets, "as train: the adapted projections (default all: q,k,v,o,gate,up,down)", 0},
      {"lora-dropout", LC_ARG_FLOAT, &lora_dropout, "as train: dropout on the adapters' input (its masked copies' scratch and passes)", 0},
      {"top", LC_ARG_INT, &top, "layouts --auto prints (default 5)", 0},
      {"peak-detail", LC_ARG_BOOL, &peak_detail, "also list the buffers live at the total peak: each one's bytes, bytes per local token, category and the phase holding it (their sum is the total peak; one layout: not with --auto or --longest)", 0},
  };
  const int nf = (int)(sizeof flags / sizeof flags[0]);
  if (lc_args_wants_help(argc, argv)) {
    lc_args_help("plan", flags, nf);
    return 0;
  }
  lc_config cfg;
  lc_model_opts o = {LC_CKPT_SELECTIVE, 0, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0};
  long S = 0;
  int used = 0;
  lc_status st = lc_args_parse(argc, argv, flags, nf);
  if (st == LC_OK && !model) st = lc_fail(LC_EINVAL, "--model is required: a preset (%s, %s) or a Hugging Face "
                                          "model directory", lc_config_preset_names(), lc_config_plan_preset_names());
  if (st == LC_OK && !seq_s && !longest) st = lc_fail(LC_EINVAL, "--seq is required: tokens per sequence, e.g. 131072 or 128K");
  if (st == LC_OK) st = lc_cli_model(model, &cfg);
  if (st == LC_OK && seq_s && lc_cli_lengths(seq_s, LONG_MAX / 2, &S, 1) != 1)
    st = lc_fail(LC_EINVAL, "--seq '%s' is not a positive length: give tokens, e.g. 131072, 128K or 1M", seq_s);
  int head_chunk = 0;
  if (st == LC_OK) st = lc_ckpt_parse(ckpt, &o.ckpt);
  if (st == LC_OK) st = lc_cli_head_chunk(head_chunk_s, &head_chunk);
  if (st == LC_OK && head_chunk > 0 && hp == 1 && !auto_ && !longest)
    st = lc_fail(LC_EINVAL, "--head-chunk %d needs head parallelism (--hp > 1): with --hp 1 there is no Ulysses exchange "
                 "to chunk; use auto or all", head_chunk);
  if (st == LC_OK) st = lc_dtype_parse_user(prec, "--precision", &o.precision);
  if (st == LC_OK) st = lc_cli_kernels(kernels);
  if (st == LC_OK) st = lc_cli_threads(threads, &used);
  if (st == LC_OK && batch < 1) st = lc_fail(LC_EINVAL, "--batch %d: use at least 1 sequence per step", batch);
  if (st == LC_OK && (mlp_tile < -1 || loss_tile < -1))
    st = lc_fail(LC_EINVAL, "--mlp-tile and --loss-tile must be >= 0 (0 = untiled)");
  if (st == LC_OK && !(budget_gib > 0)) st = lc_fail(LC_EINVAL, "--budget-gib must be a positive number of GiB");
  if (st == LC_OK && (hp < 1 || cp < 1 || window < 0))
    st = lc_fail(LC_EINVAL, "--hp and --cp must be >= 1 and --ring-window >= 1 (default cp)");
  if (st == LC_OK && lc_args_find(flags, nf, "gpus")->seen && ranks < 1)
    st = lc_fail(LC_EINVAL, "--gpus %d: give the job's ranks (>= 1), or leave it out for hp x cp", ranks);
  if (st == LC_OK && ranks == 0) ranks = hp * cp;
  if (st == LC_OK && (ranks < 1 || ranks % (hp * cp) != 0))
    st = lc_fail(LC_EINVAL, "--gpus %d is not a multiple of hp x cp = %d (the rest is data parallelism)", ranks, hp * cp);
  if (st == LC_OK) st = lc_zero_check(zero, zero_group, lc_args_find(flags, nf, "zero-group")->seen, ranks);
  if (st == LC_OK && lc_args_find(flags, nf, "attn-window")->seen && attn_window < 1)
    st = lc_fail(LC_EINVAL, "--attn-window %d: give the number of most recent tokens each token sees (>= 1)",
                 attn_window);
  if (st == LC_OK && !(gflops > 0))
    st = lc_fail(LC_EINVAL, "--gflops %g: give the sustained GFLOP/s per rank (> 0)", gflops);
  if (st == LC_OK && vocab_slice < 0)
    st = lc_fail(LC_EINVAL, "--vocab-slice %d: give vocabulary rows per slice (>= 1), or 0 for whole matrices", vocab_slice);
  if (st == LC_OK && (doc_len < 0 || (doc_len && !pack)))
    st = lc_fail(LC_EINVAL, "--doc-len needs --pack and a positive length");
  lc_placement pl = LC_PLACE_HEAD_FIRST;
  if (st == LC_OK) st = lc_placement_parse(placement, &pl);
  if (st == LC_OK && (per_node < 0 || top < 1)) st = lc_fail(LC_EINVAL, "--gpus-per-node must be >= 1 and --top >= 1");
  if (st == LC_OK && per_node > 0 && ranks % per_node != 0)
    st = lc_fail(LC_EINVAL, "--gpus-per-node %d does not divide --gpus %d: give whole nodes", per_node, ranks);
  // --auto / --longest choose these themselves; a value given would be ignored.
  static const char *chosen[] = {"head-chunk", "ring-window", "batch", "gflops"};
  for (int i = 0; i < 4 && st == LC_OK && (auto_ || longest); i++)
    if (lc_args_find(flags, nf, chosen[i])->seen)
      st = lc_fail(LC_EINVAL, "--%s is chosen by --auto/--longest (%s); leave it out", chosen[i],
                   i == 0 ? "per layout: all heads, or the largest chunk that fits" : i == 1 ? "the plain ring: windows are priced alike"
                   : i == 2 ? "one sequence per data-parallel group" : "the step time comes from the rates");
  if (st == LC_OK && peak_detail && (auto_ || longest))
    st = lc_fail(LC_EINVAL, "--peak-detail lists one layout's peak: give --seq and the layout (--hp, --cp, ...) instead of --%s",
                 auto_ ? "auto" : "longest");
  if (st == LC_OK && longest && seq_s) st = lc_fail(LC_EINVAL, "--longest searches the sequence length: leave out --seq");
  if (st == LC_OK && lora < 0) st = lc_fail(LC_EINVAL, "--lora %d: give the adapters' rank (>= 1), or 0 for none", lora);
  if (st == LC_OK && lora_targets && !lora) st = lc_fail(LC_EINVAL, "--lora-targets needs --lora R");
  if (st == LC_OK && lora_dropout != 0 && !lora) st = lc_fail(LC_EINVAL, "--lora-dropout needs --lora R");
  if (st == LC_OK && !(lora_dropout >= 0 && lora_dropout < 1))
    st = lc_fail(LC_EINVAL, "--lora-dropout %g: give the probability of dropping an input of the adapters, in [0, 1)",
                 (double)lora_dropout);
  if (st == LC_OK && lora) {
    cfg.lora = (lc_lora){.rank = lora, .alpha = (float)lora, .targets = LC_LORA_ALL};
    cfg.lora.dropout = lora_dropout;
    if (lora_targets) st = lc_lora_parse_targets(lora_targets, &cfg.lora.targets);
  }
  if (st == LC_OK && base_dtype && !lora) st = lc_fail(LC_EINVAL, "--base-dtype %s is how a LoRA run holds its frozen base: add --lora R", base_dtype);
  if (st == LC_OK && base_dtype && strcmp(base_dtype, "fp32") && strcmp(base_dtype, "bf16"))
    st = lc_cli_base_blocks(base_dtype, model, o.precision == LC_DT_BF16, &cfg);
  if (st == LC_OK && base_dtype && !strcmp(base_dtype, "bf16")) {
    cfg.lora.base_bf16 = 1;
    if (o.precision != LC_DT_BF16) st = lc_fail(LC_EINVAL, "--base-dtype bf16 needs --precision bf16");
  }

  if (st == LC_OK && lc_args_find(flags, nf, "top")->seen && !auto_)
    st = lc_fail(LC_EINVAL, "--top sets how many layouts --auto prints: add --auto");
  lc_rates rates;
  if (st == LC_OK) st = lc_cli_rates(machine, hardware, ranks ? ranks : hp * cp, used, &rates);
  if (st == LC_OK && hardware && !lc_args_find(flags, nf, "budget-gib")->seen && !lc_args_find(flags, nf, "mem-per-rank")->seen)
    budget_gib = (float)(rates.mem_bytes / GIB);
  if (st == LC_OK && per_node) rates.devices_per_node = per_node;
  if (st == LC_OK && lc_args_find(flags, nf, "host-mem-gib")->seen && !(host_mem_gib > 0))
    st = lc_fail(LC_EINVAL, "--host-mem-gib %g: give the host memory per node in GiB (> 0)", (double)host_mem_gib);
  if (st == LC_OK && lc_args_find(flags, nf, "host-mem-gib")->seen && !offload_optim)
    st = lc_fail(LC_EINVAL, "--host-mem-gib bounds --offload-optimizer's model states in host memory: add --offload-optimizer");
  // --offload-optimizer: the node's host memory the ranks' model states share (bytes)
  const double host_cap = host_mem_gib > 0 ? host_mem_gib * GIB
                          : hardware && rates.host_mem_bytes > 0 ? rates.host_mem_bytes : (double)lc_cli_default_mem_cap();
  const char *host_src = host_mem_gib > 0 ? "--host-mem-gib" : hardware && rates.host_mem_bytes > 0
                                                                   ? "the --hardware file's host_memory_per_node_gib"
                                                                   : "this machine's RAM";
  lc_cp_layout cl = LC_CP_ZIGZAG;
  if (st == LC_OK) st = lc_cp_layout_parse(cp_layout ? cp_layout : pack || attn_window ? "balanced" : "zigzag", &cl);
  if (st != LC_OK) {
    lc_cli_error(lc_errmsg());
    return 2;
  }
  if (attn_window > 0) cfg.sliding_window = attn_window;
  if (pack && !doc_len) doc_len = 4096;
  o.zero = zero;
  o.zero_group = zero_group ? zero_group : ranks;
  o.cp_layout = cl;
  o.offload_dir = offload;
  if (lc_cli_offload_depth(offload_depth, offload, &o.offload_depth) != LC_OK) {
    lc_cli_error(lc_errmsg());
    return 2;
  }
  o.vocab_slice = vocab_slice;
  o.offload_optimizer = offload_optim;
  const int mlp_auto = mlp_tile < 0, loss_auto = loss_tile < 0, sliced = lc_vocab_sliced(&o, cfg.vocab);
  o.mlp_tile = mlp_auto ? lc_memplan_auto_mlp_tile(S) : mlp_tile;
  o.loss_tile = loss_auto ? lc_memplan_auto_loss_tile_for(&cfg, S, sliced ? vocab_slice : cfg.vocab) : loss_tile;
  lc_mem_estimate e;
  const size_t budget = (size_t)((double)budget_gib * GIB);
  if (auto_ || longest) {
    lc_search_opts so = {.world = ranks, .per_node = rates.devices_per_node, .threads = used, .mem_cap = budget,
                         .hp = -1, .cp = -1, .zero = -1, .zero_group = -1, .ckpt = -1, .bf16 = -1, .context_first = -1,
                         .doc_len = pack ? doc_len : 0, .attn_window = attn_window,
                         .host_cap = offload_optim ? (size_t)host_cap : 0};
#define SEEN(f) lc_args_find(flags, nf, f)->seen
    if (SEEN("hp")) so.hp = hp;
    if (SEEN("cp")) so.cp = cp;
    if (SEEN("zero")) so.zero = zero;
    if (SEEN("zero-group")) so.zero_group = zero_group;
    if (SEEN("checkpoint")) so.ckpt = (int)o.ckpt;
    if (SEEN("precision")) so.bf16 = o.precision == LC_DT_BF16;
    if (SEEN("placement")) so.context_first = pl == LC_PLACE_CONTEXT_FIRST;
    so.mlp_tile = mlp_auto ? -1 : mlp_tile;
    so.loss_tile = loss_auto ? -1 : loss_tile;
    // What train needs to run as planned, beyond the layout: appended to every command line.
    char extra[1200];
    int k = snprintf(extra, sizeof extra, " --threads %d", used);
#define ADD(...) (k += k < (int)sizeof extra ? snprintf(extra + k, sizeof extra - (size_t)k, __VA_ARGS__) : 0)
    if (vocab_slice) ADD(" --vocab-slice %d", vocab_slice);
    if (offload_optim) ADD(" --offload-optimizer");
    if (lora) ADD(" --lora %d", lora);
    if (lora_targets) ADD(" --lora-targets %s", lora_targets);
    if (lora_dropout > 0) ADD(" --lora-dropout %g", (double)lora_dropout);
    // (a block type planned for every projection: train takes a GGUF file of that type)
    if (base_dtype) ADD(" --base-dtype %s", strcmp(base_dtype, "fp32") && strcmp(base_dtype, "bf16") ? "gguf" : base_dtype);
    if (offload) ADD(" --offload-checkpoints %s", offload);
    if (o.offload_depth > 0) ADD(" --offload-depth %d", o.offload_depth);
    if (pack) ADD(" --pack");
    if (attn_window) ADD(" --attn-window %d", attn_window);
    if (cp_layout) ADD(" --cp-layout %s", cp_layout);
    if (!mlp_auto) ADD(" --mlp-tile %d", mlp_tile);
    if (!loss_auto) ADD(" --loss-tile %d", loss_tile);
#undef ADD
#undef SEEN
    return lc_plan_auto(&cfg, &o, S, &so, &rates, auto_, longest, top, model, budget_gib, extra, host_src);
  }
  // The chunk in use: as given (all heads: 0), or auto's pick against the budget.
  int hc = head_chunk < 0 ? lc_memplan_auto_head_chunk(&cfg, &o, S, hp, cp, window, used, budget)
                          : head_chunk == cfg.n_heads / hp ? 0 : head_chunk;
  st = lc_memplan_predict_hc(&cfg, &o, S, hp, cp, window, hc, used, &e);
  if (st != LC_OK) {
    lc_cli_error(lc_errmsg());
    return 2;
  }

  char b[32], b2[32], b3[32];
  const double np = (double)lc_config_n_params(&cfg);
  char desc[400];
  printf("longctx plan: %s (%s), %.3f %s parameters%s\n", cfg.name, lc_config_describe(&cfg, desc, sizeof desc),
         np >= 1e9 ? np / 1e9 : np / 1e6, np >= 1e9 ? "B" : "M",
         cfg.config_only ? " (configuration-only preset)" : "");
  printf("  %-10s hp %d x cp %d (ring window %d) = %d rank%s per sequence; S = %ld -> %ld tokens per rank; "
         "batch %d (sequences run one after another: no effect on the peak)\n",
         "layout", hp, cp, e.window, hp * cp, hp * cp > 1 ? "s" : "", S, e.T, batch);
  if (ranks > hp * cp) printf("  %-10s %d ranks = dp %d x (hp %d x cp %d)\n", "job", ranks, ranks / (hp * cp), hp, cp);
  printf("  %-10s stage %d (%s)%s", "zero", zero, lc_zero_stage_desc(zero), zero ? ", " : "\n");
  if (zero)
    printf("groups of %d ranks, each a full copy of the model states split %d ways (%d group%s)\n", o.zero_group,
           o.zero_group, ranks / o.zero_group, ranks / o.zero_group > 1 ? "s" : "");
  printf("  %-10s checkpoint %s, precision %s, mlp-tile %s%s, loss-tile %s%s, %d threads per rank\n", "memory",
         lc_ckpt_name(o.ckpt), o.precision == LC_DT_BF16 ? "bf16" : "fp32",
         e.mlp_tiled ? (snprintf(b, sizeof b, "%d", o.mlp_tile), b) : "untiled",
         mlp_auto ? " (auto)" : (o.mlp_tile && !e.mlp_tiled ? " (tile >= tokens per rank)" : ""),
         e.loss_tiled ? (snprintf(b2, sizeof b2, "%d", o.loss_tile), b2) : "untiled",
         loss_auto ? " (auto)" : (o.loss_tile && !e.loss_tiled ? " (tile >= tokens per rank)" : ""), used);
  if (hp > 1) {
    const int Hl = cfg.n_heads / hp;
    if (e.head_chunk < Hl)
      printf("  %-10s Ulysses head chunk %d of %d query heads per rank (%d stages%s): %s kept per layer (the "
             "log-sum-exp only); backward exchanges q, k, v and out again\n", "attention", e.head_chunk, Hl,
             Hl / e.head_chunk, head_chunk < 0 ? ", auto: all at once exceeds --budget-gib" : "",
             lc_fmt_bytes(b3, sizeof b3, (double)e.attn_saved_per_layer));
    else
      printf("  %-10s Ulysses head chunk: all %d query heads per rank at once%s: %s kept per layer (log-sum-exp and "
             "head-layout q, k, v, out)\n", "attention", Hl, head_chunk < 0 ? " (auto: fits --budget-gib)" : "",
             lc_fmt_bytes(b3, sizeof b3, (double)e.attn_saved_per_layer));
  }
  if (S > lc_config_max_positions(&cfg))
    printf("  %-10s S exceeds the model's context of %d positions: train would need --rope-scaling TYPE:FACTOR\n", "note",
           lc_config_max_positions(&cfg));
  if (sliced)
    printf("  %-10s embedding and LM head in %d slices of %d rows: %s a slice at a time\n", "vocabulary",
           lc_head_n_slices(cfg.vocab, vocab_slice), vocab_slice,
           zero == 3 ? "gathered, and their gradients reduced,"
                     : zero == 2 ? "gradients reduced" : "logits computed (below ZeRO 2 the matrices are held whole anyway)");
  size_t ck = 0; // offload: checkpoint bytes one pass writes (and reads back)
  if (offload) {
    // What one pass moves: every layer's checkpoint out after its forward and back before
    // its backward (at most; the last layers may never leave RAM).
    lc_model_opts ram = o;
    ram.offload_dir = NULL;
    size_t ac = 0;
    lc_model_pass_bytes(&cfg, &ram, (int)e.T, e.attn_saved_per_layer, &ck, &ac);
    printf("  %-10s layer checkpoints on disk: %s written and read back per pass (%.0f bytes per local token each way); "
           "%d of %d layers in RAM (--offload-depth %s)\n", "offload", lc_fmt_bytes(b3, sizeof b3, (double)ck),
           (double)ck / (double)e.T, lc_ckstore_resident(cfg.n_layers, lc_offload_depth(&o)), cfg.n_layers,
           o.offload_depth > 0 ? "set" : "auto");
  }
  if (cfg.lora.rank > 0) {
    char tg[128];
    char bd[400];
    printf("  %-10s r %d on %s: the base frozen in %s: %.3f B weights, no gradients or moments; %.3f M adapter "
           "parameters with fp32 gradients and AdamW m and v\n", "lora", cfg.lora.rank,
           lc_lora_target_names(cfg.lora.targets, 0, tg, sizeof tg), lc_cli_base_desc(&cfg, bd, sizeof bd), np / 1e9,
           (double)lc_config_n_lora_params(&cfg) / 1e6);
  }
  printf("\npredicted %s peak per rank, one training step (%s%s)\n", e.offload ? "device" : "arena",
         e.offload ? "the model states in host memory: below" : "fp32 weights, gradients, AdamW m and v",
         zero == 3 ? (o.precision == LC_DT_BF16 ? "; gathered = layers all-gathered in bf16 for use"
                                                : "; gathered = layers all-gathered for use")
                   : (o.precision == LC_DT_BF16 ? "; gathered = the bf16 copy of the layers in use" : ""));
  printf("| category | per rank | bytes per local token |\n|---|---|---|\n");
  for (int c = 0; c < LC_MEM_NCAT; c++) {
    int per_tok = c != LC_MEM_PARAMS && c != LC_MEM_GRADS && c != LC_MEM_OPTIM && c != LC_MEM_GATHERED;
    if (per_tok) snprintf(b2, sizeof b2, "%.0f", (double)e.peak[c] / (double)e.T);
    printf("| %s | %s | %s |\n", lc_mem_cat_name((lc_mem_cat)c), lc_fmt_bytes(b, sizeof b, (double)e.peak[c]),
           per_tok ? b2 : "");
  }
  snprintf(b2, sizeof b2, "%.0f", (double)(e.total - e.persistent) / (double)e.T);
  printf("| total peak | %s | %s (all but params, grads, optimizer) |\n", lc_fmt_bytes(b, sizeof b, (double)e.total), b2);
  if (peak_detail) lc_plan_print_peak_detail(&e);
  if (e.offload)
    printf("\nModel states per rank in host memory (--offload-optimizer): %s held for the whole step (params + grads + "
           "AdamW), %s with the host's temporary units and a gradient's landing buffer; %.2f bytes per parameter. The "
           "device above holds each unit's compute copy and gradient while in use: %s at their peak.\n",
           lc_fmt_bytes(b, sizeof b, (double)e.model_states), lc_fmt_bytes(b2, sizeof b2, (double)e.host_bytes),
           (double)e.model_states / np, lc_fmt_bytes(b3, sizeof b3, (double)e.model_states_peak));
  if (e.offload) {
    const int rpn = lc_layout_ranks_per_node(ranks, rates.devices_per_node);
    const size_t node = e.host_bytes * (size_t)rpn;
    printf("Host memory (--offload-optimizer): %zu bytes per rank, %zu bytes per node (%d rank%s; %.2f GiB) of %.0f "
           "(%.2f GiB: %s): %s.\n", e.host_bytes, node, rpn, rpn > 1 ? "s" : "", (double)node / GIB, host_cap,
           host_cap / GIB, host_src,
           (double)node <= host_cap ? "fits" : "does NOT fit: more ranks with --zero 1 or more shard the states, or a "
                                               "node with more host memory");
  }
  else
    printf("\nModel states per rank: %s held for the whole step (params + grads + AdamW), %s at their peak with "
           "temporary units; %s per parameter.\n", lc_fmt_bytes(b, sizeof b, (double)e.model_states),
           lc_fmt_bytes(b2, sizeof b2, (double)e.model_states_peak), (snprintf(b3, sizeof b3, "%.2f bytes",
           (double)e.model_states / np), b3));
  size_t sum = 0;
  for (int c = 0; c < LC_MEM_NCAT; c++) sum += e.peak[c];
  printf("\nThe total peaks during the %s", lc_mem_phase_name(e.total_phase));
  if (sum != e.total)
    printf(" (the sum of the category peaks, %s, is larger: scratch and comm peak in different phases)",
           lc_fmt_bytes(b, sizeof b, (double)sum));
  printf(".\n");
  if (hp * cp > 1)
    printf("All %d ranks of the sequence group together: %s.\n", hp * cp,
           lc_fmt_bytes(b, sizeof b, (double)e.total * hp * cp));
  printf("Not counted (outside the arena): MPI and OpenBLAS buffers, thread stacks, token arrays (~20 bytes per "
         "local token%s), the program itself.\n", pack || attn_window ? "; with --pack or a window, 4 bytes per token of "
                                                                       "the whole sequence for the attention bounds" : "");
  // Attention work: visible (query, key) pairs of one sequence (documents of doc_len, the
  // window) against one causal sequence; per rank when the layout balances it.
  const double Sd = (double)S, full = Sd * (Sd + 1) / 2;
  const long L = pack ? (doc_len < S ? doc_len : S) : S, W = attn_window;
  const double pairs = (double)(S / L) * doc_pairs(L, W) + doc_pairs(S % L, W); // whole documents, the rest
  const double fl = 3.0 * lc_config_fwd_flops_pairs(&cfg, Sd, pairs), fl_full = 3.0 * lc_config_fwd_flops(&cfg, S);
  printf("\nAttention work per sequence: %.4g visible (query, key) pairs (%.1f%% of one causal sequence of S)%s%s; "
         "model FLOPs of a training step per sequence %.4g (causal: %.4g), %.4g per rank with a balanced layout "
         "(%s, %d chunks per context rank).\n",
         pairs, 100 * pairs / full, pack ? (snprintf(b3, sizeof b3, ", documents of %ld tokens", L), b3) : "",
         W ? ", sliding window" : "", fl, fl_full, fl / (hp * cp), lc_cp_layout_name(cl), lc_cp_layout_chunks(cl, S, cp, hp));

  if (offload) {
    // Hidden: layer l's checkpoint is written while the layers after it compute forward and
    // read back while the layers above it compute backward, so over a pass the disk must
    // move the checkpoints out and back within the pass's compute (full checkpointing
    // recomputes each layer's forward: 4/3 of the model FLOPs).
    const double t = fl / (hp * cp) * (o.ckpt == LC_CKPT_FULL ? 4.0 / 3.0 : 1.0) / (gflops * 1e9);
    printf("Offload stays hidden when the disk sustains %s/s written and as much read (%s each way per pass, "
           "a pass of %.3g s at %.0f GFLOP/s per rank: --gflops).\n", lc_fmt_bytes(b, sizeof b, (double)ck / t),
           lc_fmt_bytes(b2, sizeof b2, (double)ck), t, gflops);
  }
  {
    lc_time_layout tl = {.seq = S, .batch = batch, .world = ranks, .hp = hp, .cp = cp, .window = e.window,
                         .head_chunk = hc, .context_first = pl == LC_PLACE_CONTEXT_FIRST,
                         .doc_len = pack ? doc_len : 0, .attn_window = attn_window};
    lc_time_estimate te;
    if (lc_time_predict(&cfg, &o, &tl, &rates, &te) != LC_OK)
      printf("\nPredicted step time: none: %s\n", lc_errmsg());
    else
      printf("\nPredicted step time (batch %d): %.4g s = compute %.4g s (recompute %.4g, attention kernels %.4g) + "
             "exposed communication %.4g s (of %.4g) + optimizer %.4g s; one layer %.4g s forward, %.4g s backward; "
             "%.4g tokens/s. Rates: %s.\n", batch, te.total_s, te.compute_s, te.recompute_s, te.attn_kernel_s,
             te.exposed_comm_s, te.comm_s, te.optim_s, te.layer_fwd_s, te.layer_bwd_s, te.tokens_per_s, rates.source);
    if (o.offload_optimizer) lc_cli_offload_line(&rates, te.offload_s, te.optim_s, "");
    if (offload && rates.disk_bw > 0 && lc_ckstore_resident(cfg.n_layers, lc_offload_depth(&o)) < cfg.n_layers)
      printf("--offload-checkpoints: the disk busy %.4g s of the step (%.3g GB/s each way), %.4g s of it waited for "
             "(in the step) with %d layers in RAM\n", te.ckpt_io_s, rates.disk_bw / 1e9, te.ckpt_wait_s, lc_offload_depth(&o));
    char pv[256];
    printf("Rates by class: %s.\n", lc_rates_provenance(&rates, pv, sizeof pv));
    if (rates.warning[0]) printf("Warning: %s\n", rates.warning);
  }
  // Largest S: the same tiles (auto tiles: their value for long sequences).
  lc_model_opts ob = o;
  if (mlp_auto) ob.mlp_tile = lc_memplan_auto_mlp_tile(LONG_MAX);
  if (loss_auto) ob.loss_tile = lc_memplan_auto_loss_tile_for(&cfg, LONG_MAX, sliced ? vocab_slice : cfg.vocab);
  // --head-chunk auto: the longest S over every chunk size, with the chunk auto picks there.
  int hc_best = hc;
  long best = lc_memplan_max_seq_hc(&cfg, &ob, hp, cp, window, head_chunk < 0 ? -1 : hc, used, budget, &hc_best);
  if (best > 0) {
    lc_mem_estimate eb;
    lc_memplan_predict_hc(&cfg, &ob, best, hp, cp, window, hc_best, used, &eb);
    char hcb[80] = "";
    if (hp > 1) snprintf(hcb, sizeof hcb, "; head chunk %d of %d", eb.head_chunk, cfg.n_heads / hp);
    printf("Largest S within %.2f GiB per rank: %ld tokens (%ld per rank, a multiple of 2 x cp x hp = %d; "
           "predicted peak %s%s)\n", budget_gib, best, eb.T, 2 * cp * hp, lc_fmt_bytes(b, sizeof b, (double)eb.total), hcb);
  } else if (e.persistent >= budget) {
    printf("Largest S within %.2f GiB per rank: none: weights, gradients and AdamW state alone take %s on every "
           "rank%s; use a larger --budget-gib\n", budget_gib, lc_fmt_bytes(b, sizeof b, (double)e.persistent),
           zero < 3 ? " (--zero 3 over more ranks divides them)" : " (more ranks in the zero group divide them)");
  } else {
    printf("Largest S within %.2f GiB per rank: none: even S = %d does not fit; use a larger --budget-gib, "
           "--checkpoint full or smaller tiles\n", budget_gib, 2 * cp * hp);
  }
  return 0;
}
