// longctx prepare: text or JSONL (optionally gzip'd) to a token file with the model's own
// tokenizer, the same file tools/prepare_data.py writes for the same tokenizer (it stays
// the reference: tests/cli_text.sh compares them byte for byte). Text is read as Python's
// text mode reads it (universal newlines: "\r\n" and "\r" become "\n"); each text file is one
// document, each JSONL line's --field one document; --eos appends a token after each.
// --chat: each JSONL line is a conversation (io/conv.h: OpenAI messages, ShareGPT, prompt/
// completion) rendered in the model's chat template (tok/chat_template.h) and written as a
// version 3 token file whose loss mask marks the assistant's tokens (--train-on).
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "core/timer.h"
#include "io/conv.h"
#include "io/jsonl.h"
#include "io/tokfile.h"
#include "tok/chat_template.h"
#include "tok/tokenizer.h"

typedef struct {
  uint32_t *v;
  uint64_t n, cap;
} u32_vec;

static lc_status push(u32_vec *a, uint32_t x) {
  if (a->n == a->cap) {
    uint64_t c = a->cap ? 2 * a->cap : 1 << 16;
    uint32_t *p = realloc(a->v, sizeof *p * c);
    if (!p) return lc_fail(LC_ENOMEM, "out of memory for %llu tokens", (unsigned long long)a->n);
    a->v = p, a->cap = c;
  }
  a->v[a->n++] = x;
  return LC_OK;
}

// The whole file (gunzipped when it ends in .gz), newlines made universal.
static lc_status read_text(const char *path, char **out, size_t *len) {
  gzFile g = gzopen(path, "rb"); // reads plain files as they are, too
  if (!g) return lc_fail(LC_EIO, "%s: cannot read it; give an existing text or JSONL file", path);
  size_t cap = 1 << 20, n = 0;
  char *b = malloc(cap);
  for (;;) {
    if (!b) {
      gzclose(g);
      return lc_fail(LC_ENOMEM, "out of memory reading %s", path);
    }
    if (cap - n < (1 << 16)) {
      char *nb = realloc(b, cap *= 2);
      if (!nb) free(b);
      b = nb;
      continue;
    }
    const int k = gzread(g, b + n, (unsigned)(cap - n));
    if (k < 0) {
      int e;
      const char *m = gzerror(g, &e);
      free(b);
      gzclose(g);
      return lc_fail(LC_EIO, "%s: cannot read it (%s)", path, m);
    }
    if (k == 0) break;
    n += (size_t)k;
  }
  gzclose(g);
  size_t w = 0;
  for (size_t i = 0; i < n; i++) {
    if (b[i] == '\r') {
      b[w++] = '\n';
      if (i + 1 < n && b[i + 1] == '\n') i++;
    } else {
      b[w++] = b[i];
    }
  }
  b[w] = 0;
  *out = b;
  *len = w;
  return LC_OK;
}

static int ends_with(const char *s, const char *t) {
  const size_t a = strlen(s), b = strlen(t);
  return a >= b && !strcmp(s + a - b, t);
}

typedef struct {
  lc_tokenizer *tok; // NULL: bytes
  int add_special;
  long eos;          // -1: none
  u32_vec toks;
  uint64_t *starts;
  uint64_t n_docs, docs_cap, docs_in;
  double bytes_in;
  // --chat
  const lc_chat_tpl *chat;
  lc_train_on on;
  int strict;
  unsigned char *mask; // one per token, cap toks.cap
  uint64_t counted, skipped;
} prep;

static lc_status add_start(prep *p, uint64_t at) {
  if (p->n_docs == p->docs_cap) {
    uint64_t c = p->docs_cap ? 2 * p->docs_cap : 1024;
    uint64_t *s = realloc(p->starts, sizeof *s * c);
    if (!s) return lc_fail(LC_ENOMEM, "out of memory for the document index");
    p->starts = s, p->docs_cap = c;
  }
  p->starts[p->n_docs++] = at;
  return LC_OK;
}

// One JSONL line as a conversation: its ids and mask appended, one document.
static lc_status add_conversation(prep *p, const char *line, size_t len, const char *path, long lineno) {
  lc_conv c;
  lc_status st = lc_conv_parse(&c, line, len);
  if (st == LC_OK && lc_conv_n_assistant(&c) == 0) {
    if (p->strict) st = lc_fail(LC_EFORMAT, "the conversation has no assistant turn, so no token would count (leave out --strict to skip such records)");
    else p->skipped++;
    if (st == LC_OK) {
      lc_conv_free(&c);
      return LC_OK;
    }
  }
  lc_tok_ids ids = {0};
  unsigned char *m = NULL;
  size_t mcap = 0;
  uint64_t counted = 0;
  if (st == LC_OK) st = lc_chat_encode(p->chat, p->tok, &c, p->on, &ids, &m, &mcap, &counted);
  if (st != LC_OK) {
    char why[1024];
    snprintf(why, sizeof why, "%s", lc_errmsg());
    st = lc_fail(st, "%s:%ld: %s", path, lineno, why);
  }
  const uint64_t at = p->toks.n;
  for (size_t i = 0; st == LC_OK && i < ids.n; i++) {
    const uint64_t cap = p->toks.cap;
    st = push(&p->toks, (uint32_t)ids.v[i]);
    if (st == LC_OK && p->toks.cap != cap) {
      unsigned char *q = realloc(p->mask, p->toks.cap);
      if (!q) st = lc_fail(LC_ENOMEM, "out of memory for the loss mask");
      else p->mask = q;
    }
    if (st == LC_OK) p->mask[p->toks.n - 1] = m[i];
  }
  p->docs_in++;
  p->bytes_in += (double)len;
  p->counted += counted;
  if (st == LC_OK && ids.n) st = add_start(p, at);
  free(ids.v);
  free(m);
  lc_conv_free(&c);
  return st;
}

static lc_status add_doc(prep *p, const char *text, size_t len) {
  const uint64_t at = p->toks.n;
  p->docs_in++;
  p->bytes_in += (double)len;
  if (p->tok) {
    int32_t *ids = NULL;
    size_t n = 0;
    LC_TRY(lc_tok_encode(p->tok, text, len, p->add_special, &ids, &n));
    lc_status st = LC_OK;
    for (size_t i = 0; i < n && st == LC_OK; i++) st = push(&p->toks, (uint32_t)ids[i]);
    free(ids);
    LC_TRY(st);
  } else {
    for (size_t i = 0; i < len; i++) LC_TRY(push(&p->toks, (unsigned char)text[i]));
  }
  if (p->eos >= 0) LC_TRY(push(&p->toks, (uint32_t)p->eos));
  if (p->toks.n == at) return LC_OK; // no token: not in the index
  return add_start(p, at);
}

static lc_status add_record(void *p, const char *text, size_t len) { return add_doc(p, text, len); }

static lc_status add_file(prep *p, const char *path, const char *format, const char *field) {
  char *text = NULL;
  size_t len = 0;
  LC_TRY(read_text(path, &text, &len));
  lc_status st = LC_OK;
  const int jsonl = !strcmp(format, "jsonl") ||
                    (!strcmp(format, "auto") && (ends_with(path, ".jsonl") || ends_with(path, ".jsonl.gz") || ends_with(path, ".ndjson")));
  if (!jsonl && p->chat) {
    st = lc_fail(LC_EINVAL, "%s: --chat reads JSONL conversations (.jsonl, .jsonl.gz, .ndjson or --format jsonl)", path);
  } else if (!jsonl) {
    st = add_doc(p, text, len);
  } else if (!p->chat) {
    st = lc_jsonl_each(text, len, path, field, add_record, p);
  } else { // one conversation a line (blank lines skipped)
    long lineno = 0;
    for (char *line = text; st == LC_OK && line < text + len;) {
      char *nl = memchr(line, '\n', (size_t)(text + len - line));
      char *end = nl ? nl : text + len;
      lineno++;
      int blank = 1;
      for (char *q = line; q < end && blank; q++) blank = *q == ' ' || *q == '\t' || *q == '\f' || *q == '\v';
      if (!blank) st = add_conversation(p, line, (size_t)(end - line), path, lineno);
      line = end + 1;
    }
  }
  free(text);
  return st;
}

int lc_cmd_prepare(int argc, char **argv) {
  const char *model = NULL, *out = NULL, *eos = NULL, *format = "auto", *field = "text";
  const char *train_on = "assistant";
  int bytes = 0, add_special = 0, bpt = 0, chat = 0, strict = 0;
  long eos_id = -1;
  lc_flag flags[] = {
      {"model", LC_ARG_STR, &model, "the model whose tokenizer to use: an HF directory (tokenizer.json) or a GGUF file; or a tokenizer.json", 0},
      {"bytes", LC_ARG_BOOL, &bytes, "UTF-8 bytes as tokens (vocab 256) instead of a tokenizer", 0},
      {"out", LC_ARG_STR, &out, "token file to write (atomically)", 0},
      {"eos", LC_ARG_STR, &eos, "token (e.g. '<|endoftext|>') appended after every document", 0},
      {"eos-id", LC_ARG_LONG, &eos_id, "token id appended after every document", 0},
      {"format", LC_ARG_STR, &format, "auto | text | jsonl (auto: .jsonl, .jsonl.gz, .ndjson are JSONL)", 0},
      {"field", LC_ARG_STR, &field, "the JSONL field holding the text (default text)", 0},
      {"add-special-tokens", LC_ARG_BOOL, &add_special, "let the tokenizer add its special tokens (e.g. BOS) to each document", 0},
      {"bytes-per-token", LC_ARG_INT, &bpt, "2 or 4 (default: 2 when the vocabulary fits 65536 ids)", 0},
      {"chat", LC_ARG_BOOL, &chat, "JSONL conversations (messages, conversations or prompt/completion) in the model's chat template, with a loss mask (token file version 3)", 0},
      {"train-on", LC_ARG_STR, &train_on, "--chat: the tokens that count: assistant (every assistant turn, default) | last (the final one) | all", 0},
      {"strict", LC_ARG_BOOL, &strict, "--chat: refuse a conversation with no assistant turn instead of skipping it", 0},
  };
  const int nf = (int)(sizeof flags / sizeof flags[0]);
  if (lc_args_wants_help(argc, argv)) {
    lc_args_help("prepare", flags, nf);
    printf("inputs: the text or JSONL (.gz) files after the flags; each text file is one document\n");
    return 0;
  }
  // Flags first, then the input files.
  int nflag = 0;
  while (nflag < argc && !strncmp(argv[nflag], "--", 2)) {
    const lc_flag *fl = NULL;
    const size_t nl = strcspn(argv[nflag] + 2, "=");
    for (int i = 0; i < nf; i++)
      if (strlen(flags[i].name) == nl && !strncmp(argv[nflag] + 2, flags[i].name, nl)) fl = &flags[i];
    nflag += (fl && fl->type == LC_ARG_BOOL) || strchr(argv[nflag], '=') ? 1 : 2; // --flag=value is one word
  }
  if (nflag > argc) nflag = argc;
  lc_status st = lc_args_parse(nflag, argv, flags, nf);
  prep p;
  memset(&p, 0, sizeof p);
  p.eos = -1;
  p.add_special = add_special;
  if (st == LC_OK && (!out || nflag >= argc))
    st = lc_fail(LC_EINVAL, "give --out FILE and at least one input file after the flags");
  if (st == LC_OK && !model == !bytes)
    st = lc_fail(LC_EINVAL, "give --model (an HF directory, a GGUF file or a tokenizer.json) or --bytes");
  if (st == LC_OK && strcmp(format, "auto") && strcmp(format, "text") && strcmp(format, "jsonl"))
    st = lc_fail(LC_EINVAL, "--format '%s': use auto, text or jsonl", format);
  if (st == LC_OK && bpt != 0 && bpt != 2 && bpt != 4) st = lc_fail(LC_EINVAL, "--bytes-per-token %d: use 2 or 4", bpt);
  lc_train_on on = !strcmp(train_on, "last") ? LC_TRAIN_ON_LAST : !strcmp(train_on, "all") ? LC_TRAIN_ON_ALL : LC_TRAIN_ON_ASSISTANT;
  if (st == LC_OK && strcmp(train_on, "assistant") && strcmp(train_on, "last") && strcmp(train_on, "all"))
    st = lc_fail(LC_EINVAL, "--train-on '%s': use assistant, last or all", train_on);
  if (st == LC_OK && chat && bytes) st = lc_fail(LC_EINVAL, "--chat needs the model's tokenizer and chat template: give --model, not --bytes");
  if (st == LC_OK && chat && (eos || eos_id >= 0 || add_special))
    st = lc_fail(LC_EINVAL, "--chat writes the template's own special tokens: leave out --eos, --eos-id and --add-special-tokens");
  if (st == LC_OK && model) st = lc_cli_load_tokenizer(model, &p.tok);
  lc_chat_tpl ct;
  if (st == LC_OK && chat) st = lc_chat_tpl_recognise(&ct, p.tok, NULL);
  if (chat) p.chat = &ct, p.on = on, p.strict = strict;
  int32_t vocab = p.tok ? lc_tok_vocab_size(p.tok) : 256;
  if (st == LC_OK && eos) {
    if (!p.tok) st = lc_fail(LC_EINVAL, "--eos needs a tokenizer; with --bytes give --eos-id");
    else if ((eos_id = lc_tok_id(p.tok, eos)) < 0) st = lc_fail(LC_EINVAL, "--eos '%s' is not a token of this tokenizer; give --eos-id", eos);
  }
  if (st == LC_OK && eos_id >= vocab) st = lc_fail(LC_EINVAL, "--eos-id %ld is outside the vocabulary [0, %d)", eos_id, vocab);
  p.eos = eos_id;
  if (st == LC_OK && !bpt) bpt = vocab <= 65536 ? 2 : 4;
  if (st == LC_OK && bpt == 2 && vocab > 65536)
    st = lc_fail(LC_EINVAL, "vocab %d does not fit 2-byte tokens; use --bytes-per-token 4", vocab);
  const double t0 = lc_now();
  for (int i = nflag; st == LC_OK && i < argc; i++) st = add_file(&p, argv[i], format, field);
  if (st == LC_OK && p.toks.n == 0)
    st = lc_fail(LC_EINVAL, "the input holds no tokens%s; a token file needs at least one",
                 p.skipped ? " (every conversation was skipped: none has an assistant turn)" : "");
  if (st == LC_OK && chat && p.counted == 0) st = lc_fail(LC_EINVAL, "no token counts: the conversations have no assistant tokens to train on");
  if (st == LC_OK) st = lc_tokfile_write_mask(out, p.toks.v, chat ? p.mask : NULL, p.toks.n, bpt, (uint32_t)vocab, p.starts, p.n_docs);
  const double secs = lc_now() - t0;
  int rc = 0;
  if (st != LC_OK) {
    lc_cli_error(lc_errmsg());
    rc = 1;
  } else {
    printf("%s: %llu tokens from %llu documents, vocab %d, %d bytes per token (%.1f MB of text in %.2f s: %.1f MB/s)\n", out,
           (unsigned long long)p.toks.n, (unsigned long long)p.docs_in, vocab, bpt, p.bytes_in / 1e6, secs,
           p.bytes_in / 1e6 / (secs > 0 ? secs : 1e-9));
    if (chat)
      printf("%s: %s chat template; %llu of %llu tokens count (%.1f%%, --train-on %s); %llu conversations skipped (no "
             "assistant turn)\n", out, ct.name, (unsigned long long)p.counted, (unsigned long long)p.toks.n,
             100.0 * (double)p.counted / (double)p.toks.n, train_on, (unsigned long long)p.skipped);
  }
  free(p.toks.v);
  free(p.starts);
  free(p.mask);
  if (p.tok) lc_tok_free(p.tok);
  return rc;
}
