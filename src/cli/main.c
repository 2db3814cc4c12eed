// longctx: train Llama-family models on very long sequences.
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: longctx COMMAND [flags]\n"
          "commands:\n"
          "  train   train a model (longctx train --help)\n"
          "  plan    predict memory and step time per rank, the longest sequence that fits, the fastest layout\n"
          "          (longctx plan --help)\n"
          "  calibrate  measure this machine's rates for the time model (longctx calibrate --help)\n"
          "  bench   measure throughput, FLOP rate and memory (longctx bench --help)\n"
          "  generate  continue a prompt with a model (longctx generate --help)\n"
          "  eval    loss and perplexity of a model on a long text or token file (longctx eval --help)\n"
          "  prepare text or JSONL to a token file with the model's tokenizer (longctx prepare --help)\n"
          "  merge   a base model and a LoRA adapter into one HF model directory (longctx merge --help)\n");
}

int main(int argc, char **argv) {
  lc_blas_fix_coretype(argv);
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "train")) return lc_cmd_train(argc - 2, argv + 2);
  if (!strcmp(argv[1], "plan")) return lc_cmd_plan(argc - 2, argv + 2);
  if (!strcmp(argv[1], "calibrate")) return lc_cmd_calibrate(argc - 2, argv + 2);
  if (!strcmp(argv[1], "bench")) return lc_cmd_bench(argc - 2, argv + 2);
  if (!strcmp(argv[1], "generate")) return lc_cmd_generate(argc - 2, argv + 2);
  if (!strcmp(argv[1], "eval")) return lc_cmd_eval(argc - 2, argv + 2);
  if (!strcmp(argv[1], "prepare")) return lc_cmd_prepare(argc - 2, argv + 2);
  if (!strcmp(argv[1], "merge")) return lc_cmd_merge(argc - 2, argv + 2);
  fprintf(stderr, "longctx: error: unknown command '%s': use train, plan, calibrate, bench, generate, eval, prepare or merge (longctx --help)\n",
          argv[1]);
  return 2;
}
