// Windowed evaluation of a token stream (evaluate.h): forward-only passes, losses summed.
#include "model/evaluate.h"

#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"

lc_status lc_eval_windows(lc_model *m, const lc_model_opts *o, const int32_t *tok, const unsigned char *mask, long n,
                          int S, int stride, lc_eval_result *r, lc_eval_progress progress, void *arg) {
  memset(r, 0, sizeof *r);
  if (S < 2 || stride < 1 || stride > S)
    return lc_fail(LC_EINVAL, "evaluation windows of %d tokens advancing by %d: use 2 <= window and 1 <= stride <= window",
                   S, stride);
  if (n < 2) return lc_fail(LC_EINVAL, "evaluation needs at least 2 tokens (the first is only context); got %ld", n);
  long any = 0;
  for (long j = 1; mask && j < n && !any; j++) any = mask[j] != 0;
  if (mask && !any)
    return lc_fail(LC_EINVAL, "the loss mask counts none of the %ld targets (no assistant tokens): nothing to score", n - 1);
  int *in = malloc(sizeof(int) * (size_t)S), *tgt = malloc(sizeof(int) * (size_t)S), *pos = malloc(sizeof(int) * (size_t)S);
  if (!in || !tgt || !pos) {
    free(in), free(tgt), free(pos);
    return lc_fail(LC_ENOMEM, "out of memory for evaluation windows of %d tokens", S);
  }
  lc_attn attn;
  lc_attn_local_init(&attn, m->cfg.n_heads, m->cfg.n_kv_heads, m->cfg.head_dim);
  lc_status st = LC_OK;
  long done = 0; // targets [1, done] are scored
  for (long b = 0; st == LC_OK && done < n - 1; b += stride) {
    // Inputs [b, e) predict targets [b+1, e]; e <= n - 1.
    const long e = b + S < n - 1 ? b + S : n - 1;
    const int T = (int)(e - b);
    long counted = 0, masked = 0;
    for (int t = 0; t < T; t++) {
      const long j = b + t + 1; // the target of input b + t
      const int fresh = j > done, counts = !mask || mask[j];
      in[t] = tok[b + t];
      tgt[t] = fresh && counts ? tok[j] : -100;
      pos[t] = t;
      counted += fresh && counts, masked += fresh && !counts;
    }
    r->masked += masked;
    done = e;
    if (counted > 0) { // a window of masked targets only adds nothing: not run
      double ls = 0;
      long wrong = 0;
      st = lc_model_eval(m, o, &attn, NULL, in, tgt, pos, T, &ls, &wrong);
      if (st != LC_OK) break;
      r->loss_sum += ls;
      r->wrong += wrong;
      r->scored += counted;
      r->windows++;
    }
    if (progress) progress(arg, done, n - 1);
  }
  free(in), free(tgt), free(pos);
  return st;
}
