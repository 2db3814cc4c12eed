// longctx eval: a model's loss and perplexity on a long token stream or text, in windows of
// --seq tokens advancing by --stride (model/evaluate.h), so a context-extension run can be
// judged on a held-out long document. Per token always; per byte when the bytes behind
// the tokens are known (byte models; text through the model's tokenizer). A token file
// with a loss mask (prepare --chat) is scored on its counted targets only: the answers.
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/eval_data.h"
#include "core/timer.h"
#include "model/evaluate.h"
#include "model/memplan.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

typedef struct {
  const char *adapter;
  const char *model, *data, *precision, *kernels, *log_json, *device;
  int seq, stride, threads;
  long max_tokens;
  float mem_gib;
} eval_flags;

typedef struct {
  double t0, last;
} progress_state;

static void progress(void *arg, long done, long total) {
  progress_state *p = arg;
  const double now = lc_now();
  if (now - p->last < 5.0 && done < total) return;
  p->last = now;
  fprintf(stderr, "eval: %ld / %ld tokens passed (%.0f tokens/s)\n", done, total, done / fmax(now - p->t0, 1e-9));
}

int lc_cmd_eval(int argc, char **argv) {
  eval_flags F = {.model = NULL, .data = NULL, .precision = "fp32", .kernels = "auto", .log_json = NULL, .device = "cpu", .seq = 0,
                  .stride = 0, .threads = 0, .max_tokens = 0, .mem_gib = 0};
  lc_flag flags[] = {
      {"model", LC_ARG_STR, &F.model, "an HF model directory or GGUF file (a preset gives random weights)", 0},
      {"adapter", LC_ARG_STR, &F.adapter, "a PEFT LoRA adapter directory (adapter_config.json + adapter_model.safetensors, e.g. a longctx train --lora checkpoint), merged into the model's weights", 0},
      {"data", LC_ARG_STR, &F.data, "a token file (tools/prepare_data.py, longctx prepare) or a text file (the model's tokenizer; bytes for vocab-256 models)", 0},
      {"seq", LC_ARG_INT, &F.seq, "tokens per window (required)", 0},
      {"stride", LC_ARG_INT, &F.stride, "tokens each window advances (default --seq: disjoint windows; smaller: every scored token has at least seq - stride tokens of context)", 0},
      {"max-tokens", LC_ARG_LONG, &F.max_tokens, "score only the first N tokens of the data (default all)", 0},
      {"precision", LC_ARG_STR, &F.precision, "fp32 | bf16, as train (default fp32)", 0},
      {"kernels", LC_ARG_STR, &F.kernels, LC_CLI_KERNELS_HELP, 0},
      {"threads", LC_ARG_INT, &F.threads, "OpenMP/BLAS threads (default: OMP_NUM_THREADS, else the cores)", 0},
      {"mem-limit", LC_ARG_FLOAT, &F.mem_gib, "cap on the memory arena in GiB (default: physical memory)", 0},
      {"log-json", LC_ARG_STR, &F.log_json, "write the result as one JSON object to this file", 0},
      {"device", LC_ARG_STR, &F.device, "where the model and the passes run: cpu (default), cuda or cuda:N (an NVIDIA GPU, builds with the CUDA backend), or private (tests: buffers host code cannot reach)", 0},
  };
  const int nf = (int)(sizeof flags / sizeof flags[0]);
  if (lc_args_wants_help(argc, argv)) {
    lc_args_help("eval", flags, nf);
    return 0;
  }
  lc_status st = lc_args_parse(argc, argv, flags, nf);
  lc_dtype prec = LC_DT_F32;
  int threads = 0;
  if (st == LC_OK && (!F.model || !F.data))
    st = lc_fail(LC_EINVAL, "eval needs --model (an HF directory or GGUF file) and --data (a token or text file)");
  if (st == LC_OK && F.seq < 2) st = lc_fail(LC_EINVAL, "--seq %d: give the tokens per window (>= 2)", F.seq);
  if (st == LC_OK && F.stride == 0) F.stride = F.seq;
  if (st == LC_OK && (F.stride < 1 || F.stride > F.seq))
    st = lc_fail(LC_EINVAL, "--stride %d: give 1 <= stride <= --seq %d", F.stride, F.seq);
  if (st == LC_OK && F.max_tokens < 0) st = lc_fail(LC_EINVAL, "--max-tokens must be positive");
  if (st == LC_OK) st = lc_dtype_parse_user(F.precision, "--precision", &prec);
  if (st == LC_OK) st = lc_cli_kernels(F.kernels);
  if (st == LC_OK) st = lc_cli_threads(F.threads, &threads);
  if (st == LC_OK) st = lc_device_check(F.device);
  if (st != LC_OK) {
    lc_cli_error(lc_errmsg());
    return 2;
  }
  lc_arena a;
  lc_arena_init(&a, F.mem_gib > 0 ? (size_t)(F.mem_gib * GIB) : lc_cli_default_mem_cap());
  lc_model m;
  int random_init = 0;
  lc_backend *be = NULL;
  st = lc_cli_load_inference_model(F.model, 1, F.device, F.adapter, &m, &random_init, &a, &be);
  lc_eval_data d;
  memset(&d, 0, sizeof d);
  if (st == LC_OK) st = lc_eval_data_load(&d, F.data, F.model, &m.cfg, F.max_tokens);
  if (st == LC_OK && d.mask && d.counted == 0)
    st = lc_fail(LC_EINVAL, "%s: its loss mask counts none of the %ld tokens%s: nothing to score", F.data, d.n,
                 F.max_tokens > 0 ? " read (raise --max-tokens)" : "");
  if (st == LC_OK && F.seq > lc_config_max_positions(&m.cfg))
    st = lc_fail(LC_EINVAL, "--seq %d exceeds the model's context of %d positions: use shorter windows", F.seq,
                 lc_config_max_positions(&m.cfg));
  if (st != LC_OK) {
    lc_cli_error(lc_errmsg());
    if (st != LC_OK && m.ps.arena) lc_model_destroy(&m);
    lc_backend_close(be);
    lc_eval_data_free(&d);
    return st == LC_EINVAL || st == LC_EFORMAT || st == LC_EIO ? 2 : 1;
  }
  const lc_model_opts o = {.ckpt = LC_CKPT_FULL, .mlp_tile = lc_memplan_auto_mlp_tile(F.seq),
                           .loss_tile = lc_memplan_auto_loss_tile(F.seq, m.cfg.vocab), .precision = prec};
  char desc[400];
  printf("longctx eval: %s (%s)%s\n", F.model, lc_config_describe(&m.cfg, desc, sizeof desc),
         random_init ? " with RANDOM weights (a preset)" : "");
  printf("  data     %s: %ld tokens (%s)\n", F.data, d.n, d.desc);
  if (d.mask)
    printf("  counted  %ld of %ld targets by the loss mask (the answers); only they are scored\n", d.counted, d.n - 1);
  printf("  windows  %d tokens advancing by %d, positions from 0 in each; %s, %d threads\n", F.seq, F.stride,
         prec == LC_DT_BF16 ? "bf16" : "fp32", threads);
  fflush(stdout);
  progress_state ps = {lc_now(), lc_now()};
  lc_eval_result r;
  st = lc_eval_windows(&m, &o, d.tokens, d.mask, d.n, F.seq, F.stride, &r, progress, &ps);
  const double secs = lc_now() - ps.t0;
  int rc = 0;
  if (st != LC_OK) {
    lc_cli_error(lc_errmsg());
    rc = 1;
  } else {
    const double nll = r.loss_sum / (double)r.scored;
    // Bytes behind the scored tokens (all but the first): bits per byte when known.
    const double bytes = d.bytes_known ? d.bytes_total - d.first_bytes : 0;
    if (d.mask)
      printf("  scored   %ld counted tokens (%ld masked left out) in %ld windows, %.1f s (%.0f tokens/s)\n", r.scored,
             r.masked, r.windows, secs, (r.scored + r.masked) / secs);
    else
      printf("  scored   %ld tokens in %ld windows, %.1f s (%.0f tokens/s)\n", r.scored, r.windows, secs, r.scored / secs);
    printf("  loss     %.4f nats per token, perplexity %.3f, next-token accuracy %.2f%%\n", nll, exp(nll),
           100.0 * (1.0 - (double)r.wrong / (double)r.scored));
    if (bytes > 0)
      printf("  per byte %.4f bits per byte over %.0f bytes (%.3f bytes per token)\n", r.loss_sum / bytes / log(2.0), bytes,
             bytes / (double)r.scored);
    else
      printf("  per byte not known: %s\n", d.bytes_why);
    if (F.log_json) {
      FILE *f = fopen(F.log_json, "w");
      if (!f) {
        fprintf(stderr, "longctx: error: --log-json %s cannot be created: give a writable path\n", F.log_json);
        rc = 2;
      } else {
        fprintf(f, "{\"tokens\":%ld,\"counted\":%ld,\"masked\":%ld,\"windows\":%ld,\"seq\":%d,\"stride\":%d,\"loss\":%.17g,\"perplexity\":%.17g,"
                   "\"accuracy\":%.17g,\"bytes\":%.0f,\"bits_per_byte\":%.17g,\"seconds\":%.3f}\n",
                r.scored, r.scored, r.masked, r.windows, F.seq, F.stride, nll, exp(nll), 1.0 - (double)r.wrong / (double)r.scored, bytes,
                bytes > 0 ? r.loss_sum / bytes / log(2.0) : 0.0, secs);
        if (fclose(f) != 0) rc = 2;
      }
    }
  }
  lc_eval_data_free(&d);
  lc_model_destroy(&m);
  lc_backend_close(be);
  return rc;
}
