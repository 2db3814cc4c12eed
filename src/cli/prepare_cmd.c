// longctx prepare: text or JSONL (optionally gzip'd) to a token file with the model's own
// tokenizer, the same file tools/prepare_data.py writes for the same tokenizer (it stays
// the reference: tests/cli_text.sh compares them byte for byte). Text is read as Python's
// text mode reads it (universal newlines: "\r\n" and "\r" become "\n"); each text file is one
// document, each JSONL line's --field one document; --eos appends a token after each.
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "core/timer.h"
#include "io/jsonl.h"
#include "io/tokfile.h"
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
} prep;

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
  if (p->n_docs == p->docs_cap) {
    uint64_t c = p->docs_cap ? 2 * p->docs_cap : 1024;
    uint64_t *s = realloc(p->starts, sizeof *s * c);
    if (!s) return lc_fail(LC_ENOMEM, "out of memory for the document index");
    p->starts = s, p->docs_cap = c;
  }
  p->starts[p->n_docs++] = at;
  return LC_OK;
}

static lc_status add_record(void *p, const char *text, size_t len) { return add_doc(p, text, len); }

static lc_status add_file(prep *p, const char *path, const char *format, const char *field) {
  char *text = NULL;
  size_t len = 0;
  LC_TRY(read_text(path, &text, &len));
  lc_status st = LC_OK;
  const int jsonl = !strcmp(format, "jsonl") ||
                    (!strcmp(format, "auto") && (ends_with(path, ".jsonl") || ends_with(path, ".jsonl.gz") || ends_with(path, ".ndjson")));
  if (!jsonl) {
    st = add_doc(p, text, len);
  } else {
    st = lc_jsonl_each(text, len, path, field, add_record, p);
  }
  free(text);
  return st;
}

int lc_cmd_prepare(int argc, char **argv) {
  const char *model = NULL, *out = NULL, *eos = NULL, *format = "auto", *field = "text";
  int bytes = 0, add_special = 0, bpt = 0;
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
  if (st == LC_OK && model) st = lc_cli_load_tokenizer(model, &p.tok);
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
  if (st == LC_OK && p.toks.n == 0) st = lc_fail(LC_EINVAL, "the input holds no tokens; a token file needs at least one");
  if (st == LC_OK) st = lc_tokfile_write_docs(out, p.toks.v, p.toks.n, bpt, (uint32_t)vocab, p.starts, p.n_docs);
  const double secs = lc_now() - t0;
  int rc = 0;
  if (st != LC_OK) {
    lc_cli_error(lc_errmsg());
    rc = 1;
  } else {
    printf("%s: %llu tokens from %llu documents, vocab %d, %d bytes per token (%.1f MB of text in %.2f s: %.1f MB/s)\n", out,
           (unsigned long long)p.toks.n, (unsigned long long)p.docs_in, vocab, bpt, p.bytes_in / 1e6, secs,
           p.bytes_in / 1e6 / (secs > 0 ? secs : 1e-9));
  }
  free(p.toks.v);
  free(p.starts);
  if (p.tok) lc_tok_free(p.tok);
  return rc;
}
