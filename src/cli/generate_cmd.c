// longctx generate: load a model (HF directory or random preset), decode a prompt with the
// KV cache and print the continuation; decoding speed goes to stderr. The prompt may be a
// fresh task:passkey sample, whose answer is then checked.
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "core/timer.h"
#include "io/data.h"
#include "model/generate.h"
#include "tok/chat_template.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
// Upper bound on --max-new: hours of decoding even for the tiny preset beyond it.
#define LC_GEN_MAX_NEW (1 << 20)

typedef struct {
  const char *model, *prompt, *prompt_ids, *precision, *kernels, *device, *adapter;
  const char *conversation; // --chat's multi-turn prompt: a JSONL file of one conversation
  int chat, show_ids;
  int max_new, top_k, threads, seq;
  int max_new_given, seq_given;
  long seed;
  float temperature, mem_gib;
} gen_flags;

// ids: space/comma-separated ids below vocab; else the prompt's bytes (vocab 256).
static lc_status parse_prompt(const char *s, int vocab, int ids_given, int **out, int *n) {
  size_t len = strlen(s);
  int *ids = malloc(sizeof(int) * (len + 1));
  if (!ids) return lc_fail(LC_ENOMEM, "out of memory for a prompt of %zu bytes", len);
  int k = 0;
  if (!ids_given) {
    for (size_t i = 0; i < len; i++) ids[k++] = (unsigned char)s[i];
  } else {
    const char *p = s;
    while (*p) {
      if (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') {
        p++;
        continue;
      }
      size_t w = strcspn(p, " ,\t\n");
      char *end = NULL;
      errno = 0;
      long v = strtol(p, &end, 10);
      if (end != p + w || errno || v < 0 || v >= vocab || *p == '+' || *p == '-') {
        lc_fail(LC_EINVAL, "--prompt-ids piece '%.*s' is not a token id below the vocabulary size %d: "
                           "give space- or comma-separated token ids",
                (int)(w > 40 ? 40 : w), p, vocab);
        free(ids);
        return LC_EINVAL;
      }
      ids[k++] = (int)v;
      p += w;
    }
  }
  if (k == 0) {
    free(ids);
    return lc_fail(LC_EINVAL, "%s has no tokens: give at least one %s", ids_given ? "--prompt-ids" : "--prompt",
                   ids_given ? "token id" : "byte");
  }
  *out = ids;
  *n = k;
  return LC_OK;
}

// --prompt task:passkey: a fresh sample of the built-in task (a split that neither
// training nor evaluation draws from), cut right before the key. expect[] gets the key.
static lc_status passkey_prompt(const gen_flags *F, int vocab, int **out, int *n, int *expect,
                                int *key_at) {
  lc_data d;
  LC_TRY(lc_data_open(&d, "task:passkey", vocab, F->seq));
  lc_data_close(&d);
  const int S = F->seq, K = lc_passkey_key_len();
  int *tok = malloc(sizeof(int) * (size_t)S), *tgt = malloc(sizeof(int) * (size_t)S);
  if (!tok || !tgt) {
    free(tok);
    free(tgt);
    return lc_fail(LC_ENOMEM, "out of memory for a task:passkey prompt of %d tokens", S);
  }
  lc_passkey_sample((uint64_t)F->seed, 0, LC_PASSKEY_FRESH, tok, tgt, S);
  for (int k = 0; k < K; k++) expect[k] = tgt[S - K + k];
  *n = S - K + 1; // stream positions 0 .. S-K; the key starts at S-K+1
  *key_at = -1;
  for (int t = 0; t + K <= *n && *key_at < 0; t++)
    if (!memcmp(tok + t, expect, sizeof(int) * (size_t)K)) *key_at = t;
  free(tgt);
  *out = tok;
  return LC_OK;
}

static void print_token(int tok, int bytes, int first) {
  if (!bytes) printf(first ? "%d" : " %d", tok);
  else if (tok >= 0x20 && tok < 0x7f && tok != '\\') putchar(tok);
  else printf("\\x%02x", tok);
}

// --conversation FILE: its one conversation (a JSONL record: messages, conversations or
// prompt/completion, as prepare --chat reads them), ending with a user turn for the model
// to answer. *c is freed by the caller.
static lc_status read_conversation(const char *path, lc_conv *c) {
  memset(c, 0, sizeof *c);
  FILE *f = fopen(path, "rb");
  if (!f) return lc_fail(LC_EIO, "--conversation %s: cannot open it (%s); give a JSONL file of one conversation", path,
                         strerror(errno));
  char *b = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (cap - n < 4096) {
      char *q = realloc(b, cap = cap ? 2 * cap : 1 << 16);
      if (!q) {
        free(b), fclose(f);
        return lc_fail(LC_ENOMEM, "out of memory reading %s", path);
      }
      b = q;
    }
    const size_t k = fread(b + n, 1, cap - n - 1, f);
    if (!k) break;
    n += k;
  }
  fclose(f);
  b[n] = 0;
  const char *rec = NULL;
  size_t rlen = 0;
  int records = 0;
  for (char *line = b; line < b + n;) {
    char *nl = memchr(line, '\n', (size_t)(b + n - line)), *end = nl ? nl : b + n;
    if (strspn(line, " \t\r\f\v") < (size_t)(end - line) && !records++) rec = line, rlen = (size_t)(end - line);
    line = end + 1;
  }
  lc_status st = LC_OK;
  if (records != 1)
    st = lc_fail(LC_EINVAL, "--conversation %s holds %d conversations: give a JSONL file of exactly one (one line)", path,
                 records);
  if (st == LC_OK && (st = lc_conv_parse(c, rec, rlen)) != LC_OK) {
    char why[1024];
    snprintf(why, sizeof why, "%s", lc_errmsg());
    st = lc_fail(st, "--conversation %s: %s", path, why);
  }
  free(b);
  if (st == LC_OK && (c->n == 0 || c->msgs[c->n - 1].role != LC_ROLE_USER))
    st = lc_fail(LC_EINVAL, "--conversation %s ends with %s turn: end it with the user's turn the model is to answer", path,
                 c->n ? (c->msgs[c->n - 1].role == LC_ROLE_ASSISTANT ? "an assistant" : "a system") : "no");
  return st;
}

// The prompt through the model's tokenizer (--chat: in its chat template; --conversation:
// its turns, then the assistant's header); ids checked against the model's vocabulary.
static lc_status encode_prompt(const gen_flags *F, lc_tokenizer *tok, int vocab, int **out, int *n, int32_t *stop,
                               const char **form) {
  char *chat = NULL;
  const char *text = F->prompt;
  if (F->chat) { // one user turn in the model's chat template (tok/chat_template.h), then the assistant's header
    lc_chat_tpl ct;
    LC_TRY(lc_chat_tpl_recognise(&ct, tok, NULL));
    lc_conv_msg msg = {LC_ROLE_USER, (char *)F->prompt};
    lc_conv one = {&msg, 1, 0}, file;
    size_t len = 0;
    if (F->conversation) LC_TRY(read_conversation(F->conversation, &file));
    lc_status rs = lc_chat_render_text(&ct, F->conversation ? &file : &one, 1, &chat, &len, NULL, NULL);
    if (F->conversation) lc_conv_free(&file);
    LC_TRY(rs);
    *stop = ct.eot, *form = ct.name;
    text = chat;
  }
  int32_t *ids = NULL;
  size_t k = 0;
  // A chat template holds its own special tokens; plain text gets the tokenizer's (a BOS).
  lc_status st = lc_tok_encode(tok, text, strlen(text), !F->chat, &ids, &k);
  free(chat);
  if (st == LC_OK && k == 0) st = lc_fail(LC_EINVAL, "--prompt gives no tokens: give some text");
  for (size_t i = 0; st == LC_OK && i < k; i++)
    if (ids[i] >= vocab)
      st = lc_fail(LC_EINVAL, "the tokenizer gives id %d, outside the model's vocabulary of %d: the tokenizer is not this "
                   "model's", ids[i], vocab);
  int *o = st == LC_OK ? malloc(sizeof(int) * k) : NULL;
  if (st == LC_OK && !o) st = lc_fail(LC_ENOMEM, "out of memory for the prompt");
  for (size_t i = 0; st == LC_OK && i < k; i++) o[i] = ids[i];
  free(ids);
  if (st == LC_OK) *out = o, *n = (int)k;
  return st;
}

static int run_generate(gen_flags *F, lc_arena *a, lc_model *m, lc_backend **be, lc_kv_cache *cache,
                        int **prompt, float **logits, lc_tokenizer **tokp) {
  int threads = 0, random_init = 0, n_prompt = 0, expect[8], key_at = -1;
  int32_t stop = -1;
  const char *form = NULL;
  const int task = F->prompt && !strcmp(F->prompt, "task:passkey"), K = lc_passkey_key_len();
  if (!F->max_new_given) F->max_new = task ? K : 64;
  lc_status st = lc_cli_threads(F->threads, &threads);
  if (st == LC_OK && !task && F->prompt && !strncmp(F->prompt, "task:", 5))
    st = lc_fail(LC_EINVAL, "--prompt %s: unknown built-in task prompt; use task:passkey or text", F->prompt);
  if (st == LC_OK && !F->conversation && !F->prompt == !F->prompt_ids)
    st = lc_fail(LC_EINVAL, "give --prompt TEXT (or task:passkey) or --prompt-ids IDS, one of them");
  if (st == LC_OK && F->conversation && F->prompt_ids)
    st = lc_fail(LC_EINVAL, "--conversation renders its turns with the tokenizer: leave out --prompt-ids");
  if (st == LC_OK && F->conversation && !F->chat) st = lc_fail(LC_EINVAL, "--conversation is a chat: add --chat");
  if (st == LC_OK && F->conversation && F->prompt)
    st = lc_fail(LC_EINVAL, "give --prompt TEXT (one user turn) or --conversation FILE (its turns), not both");
  if (st == LC_OK && F->chat && !F->conversation && (!F->prompt || task))
    st = lc_fail(LC_EINVAL, "--chat needs --prompt TEXT or --conversation FILE");
  if (st == LC_OK && !task && F->seq_given)
    st = lc_fail(LC_EINVAL, "--seq applies only to --prompt task:passkey (the sample's length)");
  if (st == LC_OK && task && F->max_new < K)
    st = lc_fail(LC_EINVAL, "--max-new %d: a task:passkey answer is %d tokens; generate at least that many", F->max_new, K);
  if (st == LC_OK && F->max_new < 1)
    st = lc_fail(LC_EINVAL, "--max-new %d: generate at least 1 token", F->max_new);
  if (st == LC_OK && F->max_new > LC_GEN_MAX_NEW)
    st = lc_fail(LC_EINVAL, "--max-new %d is more than longctx generates in one run: use at most %d",
                 F->max_new, LC_GEN_MAX_NEW);
  if (st == LC_OK && F->top_k < 0)
    st = lc_fail(LC_EINVAL, "--top-k %d: use a positive count, or 0 for the whole vocabulary", F->top_k);
  if (st == LC_OK && F->temperature < 0)
    st = lc_fail(LC_EINVAL, "--temperature %g: use 0 (greedy) or a positive value", F->temperature);
  if (st == LC_OK && F->mem_gib < 0) st = lc_fail(LC_EINVAL, "--mem-limit must be positive GiB");
  lc_dtype prec = LC_DT_F32;
  if (st == LC_OK) st = lc_dtype_parse_user(F->precision, "--precision", &prec);
  if (st == LC_OK) st = lc_cli_kernels(F->kernels);
  if (st == LC_OK) st = lc_device_check(F->device);
  if (st != LC_OK) {
    lc_cli_error(lc_errmsg());
    return 2;
  }
  a->cap = F->mem_gib > 0 ? (size_t)(F->mem_gib * GIB) : lc_cli_default_mem_cap();
  st = lc_cli_load_inference_model(F->model, (uint64_t)F->seed, F->device, F->adapter, m, &random_init, a, be);
  if (st == LC_OK && prec == LC_DT_BF16) lc_model_bf16_inference(m);
  if (st == LC_OK && task) {
    long long limit = lc_config_max_positions(&m->cfg);
    if ((long long)F->seq - K + 1 + F->max_new > limit)
      st = lc_fail(LC_EINVAL, "--seq %d: the prompt (%d tokens) + --max-new %d exceed the model's "
                              "limit of %lld positions: lower --seq",
                   F->seq, F->seq - K + 1, F->max_new, limit);
  }
  // The model's tokenizer for text (a byte model needs none: its text is its bytes).
  lc_tokenizer *tok = NULL;
  char why[512] = "";
  if (st == LC_OK && !random_init && !task && !F->prompt_ids && lc_cli_load_tokenizer(F->model, &tok) != LC_OK)
    snprintf(why, sizeof why, "%s", lc_errmsg());
  *tokp = tok;
  if (st == LC_OK && !task && !F->prompt_ids && !tok && (m->cfg.vocab != 256 || F->chat))
    st = lc_fail(LC_EINVAL, "--prompt is text, and this model (vocab %d) has no tokenizer to read it (%s): give token ids "
                 "with --prompt-ids", m->cfg.vocab, why[0] ? why : "a preset with random weights");
  if (st == LC_OK)
    st = task ? passkey_prompt(F, m->cfg.vocab, prompt, &n_prompt, expect, &key_at)
         : F->prompt_ids ? parse_prompt(F->prompt_ids, m->cfg.vocab, 1, prompt, &n_prompt)
         : tok ? encode_prompt(F, tok, m->cfg.vocab, prompt, &n_prompt, &stop, &form)
               : parse_prompt(F->prompt, m->cfg.vocab, 0, prompt, &n_prompt);
  if (st != LC_OK) {
    lc_cli_error(lc_errmsg());
    return st == LC_EINVAL ? 2 : 1;
  }
  const lc_config *cfg = &m->cfg;
  long long need = (long long)n_prompt + F->max_new;
  long long limit = lc_config_max_positions(cfg);
  if (need > limit) {
    fprintf(stderr, "longctx: error: prompt (%d tokens) + --max-new %d = %lld positions exceed the "
                    "model's limit of %lld: lower --max-new or shorten the prompt\n",
            n_prompt, F->max_new, need, limit);
    return 2;
  }
  st = lc_kv_cache_create(cache, cfg, (int)need, m->ps.be);
  *logits = st == LC_OK ? lc_alloc(a, LC_MEM_ACT, sizeof(float) * (size_t)cfg->vocab, "logits") : NULL;
  if (st == LC_OK && !*logits) st = LC_ENOMEM;
  if (st != LC_OK) {
    char b1[32], b2[32];
    double bytes = 2.0 * cfg->n_layers * (double)need * cfg->n_kv_heads * cfg->head_dim * 4;
    fprintf(stderr, "longctx: error: out of memory for the KV cache of %lld positions (%s) within "
                    "the memory cap of %s: lower --max-new, shorten the prompt, or raise --mem-limit\n",
            need, lc_fmt_bytes(b1, sizeof b1, bytes), lc_fmt_bytes(b2, sizeof b2, (double)a->cap));
    return 1;
  }

  const int bytes = cfg->vocab == 256 && !tok;
  if (random_init)
    printf("# model %s: preset with RANDOM weights (seed %ld), not a trained model: expect noise; "
           "pass a Hugging Face model directory for real text\n", cfg->name, F->seed);
  else
    printf("# model %s: dim %d, layers %d, heads %d/%d kv, vocab %d\n", F->model, cfg->dim,
           cfg->n_layers, cfg->n_heads, cfg->n_kv_heads, cfg->vocab);
  if (task)
    printf("# a fresh task:passkey sample (seed %ld, %d prompt tokens): the key first appears at "
           "position %d, %d tokens before the answer\n",
           F->seed, n_prompt, key_at, n_prompt - key_at);
  if (F->show_ids) {
    printf("# prompt ids:");
    for (int i = 0; i < n_prompt; i++) printf(" %d", (*prompt)[i]);
    printf("\n");
  }
  // Text models print text, token by token as it comes (held back inside a UTF-8
  // character); the prompt as given (--chat: the user's message after the template's form).
  lc_tok_stream *ts = NULL;
  if (tok) {
    if (F->chat && F->conversation) printf("# chat (%s template): the conversation of %s\n", form, F->conversation);
    else if (F->chat) printf("# chat (%s template): %s\n", form, F->prompt);
    else fputs(F->prompt, stdout);
    st = lc_tok_stream_new(tok, 1, &ts);
    if (st != LC_OK) {
      lc_cli_error(lc_errmsg());
      return 1;
    }
  } else {
    for (int i = 0; i < n_prompt; i++) print_token((*prompt)[i], bytes, i == 0);
  }
  fflush(stdout);
  const int32_t eos = tok ? lc_tok_eos(tok) : -1;
  int stopped = 0;

  lc_sampling sp = {.temperature = F->temperature, .top_k = F->top_k, .seed = (uint64_t)F->seed};
  lc_rng rng;
  lc_rng_seed(&rng, sp.seed);
  double t0 = lc_now();
  st = lc_decode(m, cache, *prompt, n_prompt, *logits, 0, a);
  double t_prefill = lc_now() - t0, t1 = lc_now();
  int steps = 0, right = 0;
  for (int i = 0; i < F->max_new && st == LC_OK; i++) {
    int t = lc_sample(*logits, cfg->vocab, &sp, &rng);
    if (task && i < K) right += t == expect[i];
    if (ts && (t == eos || t == stop)) { // the end of the text (or of the assistant's turn)
      stopped = 1;
      break;
    }
    if (ts) {
      const char *piece;
      size_t len;
      st = lc_tok_stream_step(ts, t, &piece, &len);
      if (st == LC_OK) fwrite(piece, 1, len, stdout);
    } else {
      print_token(t, bytes, 0);
    }
    fflush(stdout);
    if (st == LC_OK && i + 1 < F->max_new) {
      st = lc_decode(m, cache, &t, 1, *logits, 0, a);
      steps++;
    }
  }
  double t_decode = lc_now() - t1;
  if (ts) {
    const char *piece;
    size_t len;
    if (lc_tok_stream_flush(ts, &piece, &len) == LC_OK) fwrite(piece, 1, len, stdout);
    lc_tok_stream_free(ts);
  }
  printf("\n");
  if (stopped) fprintf(stderr, "stopped at the end-of-text token\n");
  if (st != LC_OK) {
    lc_cli_error(lc_errmsg());
    return 1;
  }
  if (task) {
    printf("# expected ");
    for (int k = 0; k < K; k++) print_token(expect[k], bytes, k == 0);
    printf(": the answer is %s\n", right == K ? "RIGHT" : "WRONG");
  }
  char b[32];
  fprintf(stderr, "prefill: %d tokens in %.3f s (%.1f tok/s); decode: %d tokens in %.3f s "
                  "(%.1f tok/s, %d threads); peak memory %s\n",
          n_prompt, t_prefill, n_prompt / t_prefill, steps, t_decode,
          steps > 0 ? steps / t_decode : 0.0, threads, lc_fmt_bytes(b, sizeof b, (double)m->ps.be->arena->peak_total));
  if (m->ps.be->arena != a) fprintf(stderr, "(on %s; host memory peak %s)\n", m->ps.be->name, lc_fmt_bytes(b, sizeof b, (double)a->peak_total));
  return 0;
}

int lc_cmd_generate(int argc, char **argv) {
  gen_flags F = {.model = "tiny", .prompt = NULL, .prompt_ids = NULL, .chat = 0, .precision = "fp32", .kernels = "auto", .device = "cpu", .max_new = 64, .seq = 256, .top_k = 0, .threads = 0,
                 .seed = 1, .temperature = 0.0f, .mem_gib = 0.0f};
  lc_flag flags[] = {
      {"model", LC_ARG_STR, &F.model, "Hugging Face model directory or GGUF file, or a preset with random weights: tiny, demo, bench-s (default tiny)", 0},
      {"adapter", LC_ARG_STR, &F.adapter, "a PEFT LoRA adapter directory (e.g. a longctx train --lora checkpoint), merged into the model's weights before decoding", 0},
      {"prompt", LC_ARG_STR, &F.prompt, "prompt text, encoded with the model's tokenizer (tokenizer.json of an HF directory, or the GGUF file's; vocab-256 models without one: its bytes), the continuation printed as text as it comes; or task:passkey: a fresh sample of the built-in task, cut before the key, and a check of the answer", 0},
      {"prompt-ids", LC_ARG_STR, &F.prompt_ids, "the prompt as token ids separated by spaces or commas, e.g. '1,15043,3186' (continuation printed as ids)", 0},
      {"chat", LC_ARG_BOOL, &F.chat, "put --prompt in the model's chat template as a user message (ChatML, Qwen3, Llama 3, Mistral/Llama 2 forms) and stop at the end of the assistant's turn", 0},
      {"conversation", LC_ARG_STR, &F.conversation, "with --chat: a JSONL file of one conversation (messages, conversations or prompt/completion, as prepare --chat reads) ending with a user turn: its turns in the model's chat template, then the assistant's answer generated", 0},
      {"show-prompt-ids", LC_ARG_BOOL, &F.show_ids, "print the prompt's token ids (after the chat template) on a '# prompt ids:' line", 0},
      {"max-new", LC_ARG_INT, &F.max_new, "tokens to generate (default 64; task:passkey: the key's 3)", 0},
      {"seq", LC_ARG_INT, &F.seq, "with --prompt task:passkey: the sample's length, as trained (default 256)", 0},
      {"temperature", LC_ARG_FLOAT, &F.temperature, "softmax temperature; 0 = greedy (default 0)", 0},
      {"top-k", LC_ARG_INT, &F.top_k, "sample among the k most likely tokens; 0 = all (default 0)", 0},
      {"seed", LC_ARG_LONG, &F.seed, "seed of sampling, of a preset's random weights and of a task:passkey sample (default 1)", 0},
      {"threads", LC_ARG_INT, &F.threads, "OpenMP/BLAS threads (default: OMP_NUM_THREADS or all cores)", 0},
      {"precision", LC_ARG_STR, &F.precision, "fp32 | bf16: bf16 rounds the weights and, as in training, the GEMM operands and attention inputs (default fp32)", 0},
      {"kernels", LC_ARG_STR, &F.kernels, LC_CLI_KERNELS_HELP, 0},
      {"mem-limit", LC_ARG_FLOAT, &F.mem_gib, "cap on the arena in GiB: clean error beyond it (default: physical memory)", 0},
      {"device", LC_ARG_STR, &F.device, "where the model and the decoding run: cpu (default), cuda or cuda:N (an NVIDIA GPU, builds with the CUDA backend), or private (tests: buffers host code cannot reach)", 0},
  };
  const int nf = (int)(sizeof flags / sizeof flags[0]);
  if (lc_args_wants_help(argc, argv)) {
    lc_args_help("generate", flags, nf);
    printf("Prints the prompt and its continuation (bytes outside printable ASCII, and '\\', as "
           "\\xNN; ids for non-byte vocabularies); prefill/decode tokens/s go to stderr.\n");
    return 0;
  }
  lc_status st = lc_args_parse(argc, argv, flags, nf);
  F.max_new_given = lc_args_find(flags, nf, "max-new")->seen;
  F.seq_given = lc_args_find(flags, nf, "seq")->seen;
  if (st == LC_OK && !F.prompt && !F.prompt_ids && !F.conversation)
    st = lc_fail(LC_EINVAL, "--prompt is required: give the text (or --prompt-ids token ids) to continue");
  if (st != LC_OK) {
    lc_cli_error(lc_errmsg());
    return 2;
  }
  lc_arena a;
  lc_arena_init(&a, 0);
  lc_model m;
  memset(&m, 0, sizeof m);
  lc_kv_cache cache;
  memset(&cache, 0, sizeof cache);
  int *prompt = NULL;
  float *logits = NULL;
  lc_tokenizer *tok = NULL;
  lc_backend *be = NULL;
  int rc = run_generate(&F, &a, &m, &be, &cache, &prompt, &logits, &tok);
  if (tok) lc_tok_free(tok);
  lc_free(&a, logits);
  lc_kv_cache_destroy(&cache);
  if (m.ps.be) lc_model_destroy(&m);
  lc_backend_close(be);
  free(prompt);
  return rc;
}
