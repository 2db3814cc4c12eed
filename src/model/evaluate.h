// Evaluation of a model on a long token stream (longctx eval): the loss of every token
// given the ones before it, in windows of S tokens that advance by a stride, as
// transformers' perplexity recipe does: window w holds inputs [b, b+S), b = w x stride,
// and scores only the targets no earlier window scored, so each token after the first is
// scored once. A stride below S gives every scored token (but those of the first window)
// at least S - stride tokens of context; stride = S cuts the stream into disjoint windows.
#ifndef LC_EVALUATE_H
#define LC_EVALUATE_H

#include <stdint.h>

#include "model/model.h"

typedef struct {
  double loss_sum; // nats over scored tokens
  long scored;     // tokens scored: counted targets (n - 1 for a whole stream without a mask)
  long masked;     // targets left out by the mask (scored + masked = n - 1)
  long wrong;      // scored tokens whose argmax is not the token
  long windows;    // windows run (those with a scored target)
} lc_eval_result;

// Called after each window with the targets passed so far, counted or not, of total (may be NULL).
typedef void (*lc_eval_progress)(void *arg, long done, long total);

// Scores tokens[0..n) (ids below the model's vocab) with windows of S inputs advancing by
// stride (1 <= stride <= S); mask (n bytes, or NULL: every token counts) says which tokens
// count as targets (mask[j] for the target tokens[j]). One process, attention local; o's
// checkpoint policy and tiles apply (no gradients). No counted target at all is refused.
lc_status lc_eval_windows(lc_model *m, const lc_model_opts *o, const int32_t *tokens, const unsigned char *mask, long n,
                          int S, int stride, lc_eval_result *r, lc_eval_progress progress, void *arg);

#endif
