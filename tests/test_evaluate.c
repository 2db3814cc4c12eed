// lc_eval_windows (longctx eval) against a direct computation: every scored token's loss
// recomputed alone by a forward over exactly the context its window gives it (inputs
// [b, j) for target j in the window starting at b), for several window sizes and strides
// (disjoint, overlapping, stride 1, a window longer than the stream); every token after
// the first scored exactly once; bad windows refused. With a loss mask (conversations: a
// stretch of masked tokens longer than a window, scattered counted ones): only counted
// targets scored, their loss the mean of the same direct computation over them alone,
// windows with no counted target not run; a mask counting nothing refused.
#include <string.h>

#include "attn/attn.h"
#include "model/evaluate.h"
#include "testmodel.h"
#include "testutil.h"

int main(void) {
  lc_arena ar;
  lc_arena_init(&ar, 0);
  lc_config cfg;
  lc_config_preset(&cfg, "tiny");
  lc_model m;
  CHECK(lc_model_create(&m, &cfg, &ar) == LC_OK, "create");
  lc_t_randomize(&m, 9);
  const long n = 53;
  int32_t tok[53];
  lc_rng r;
  lc_rng_seed(&r, 4);
  for (long i = 0; i < n; i++) tok[i] = (int32_t)lc_rng_below(&r, 256);
  const lc_model_opts o = {LC_CKPT_FULL, 0, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0};
  lc_attn attn;
  lc_attn_local_init(&attn, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim);
  // The mask: tokens 3..24 masked (a long user turn), then every third counted, as assistant
  // runs between masked headers would be.
  unsigned char mask[53];
  long n_counted = 0;
  for (long i = 0; i < n; i++) {
    mask[i] = (unsigned char)(i < 3 || (i > 24 && i % 3 != 0));
    n_counted += i > 0 && mask[i];
  }
  const int cases[][2] = {{16, 16}, {16, 5}, {16, 1}, {7, 3}, {64, 64}, {2, 1}};
  for (int c = 0; c < 12; c++) {
    const int S = cases[c % 6][0], stride = cases[c % 6][1];
    const unsigned char *mk = c < 6 ? NULL : mask;
    lc_eval_result res;
    CHECK(lc_eval_windows(&m, &o, tok, mk, n, S, stride, &res, NULL, NULL) == LC_OK, "eval: %s", lc_errmsg());
    // Reference: target j is scored by the first window [b, b+S) with b < j <= min(b+S, n-1);
    // its loss is the last position's of a forward over inputs [b, j).
    double ref = 0;
    long scored = 0, windows = 0, wrong = 0;
    long done = 0;
    for (long b = 0; done < n - 1; b += stride) {
      const long e = b + S < n - 1 ? b + S : n - 1;
      int ran = 0;
      for (long j = (b > done ? b : done) + 1; j <= e; j++) {
        if (mk && !mk[j]) continue;
        ran = 1;
        int in[64], tg[64], ps[64];
        const int T = (int)(j - b);
        for (int t = 0; t < T; t++) in[t] = tok[b + t], tg[t] = t == T - 1 ? tok[j] : -100, ps[t] = t;
        double ls = 0;
        long w = 0;
        CHECK(lc_model_eval(&m, &o, &attn, NULL, in, tg, ps, T, &ls, &w) == LC_OK, "reference: %s", lc_errmsg());
        ref += ls, wrong += w, scored++;
      }
      windows += ran;
      done = e;
    }
    // Same math in other orders (longer windows vs prefixes): fp32, 1e-5 relative.
    const long want = mk ? n_counted : n - 1;
    CHECK(res.scored == want && scored == want && res.masked == n - 1 - want && res.windows == windows && res.wrong == wrong,
          "S %d stride %d%s: scored %ld (want %ld), masked %ld, windows %ld/%ld, wrong %ld/%ld", S, stride,
          mk ? " masked" : "", res.scored, want, res.masked, res.windows, windows, res.wrong, wrong);
    CHECK(fabs(res.loss_sum - ref) <= 1e-5 * fabs(ref), "S %d stride %d%s: loss %.9g vs %.9g", S, stride, mk ? " masked" : "",
          res.loss_sum, ref);
    printf("eval S %2d stride %2d%s: %ld windows, %ld tokens, loss %.6f per token (reference %.6f)\n", S, stride,
           mk ? " masked" : "", res.windows, res.scored, res.loss_sum / res.scored, ref / scored);
  }
  lc_eval_result res;
  unsigned char none[53] = {0};
  none[0] = 1; // the first token is never a target
  CHECK(lc_eval_windows(&m, &o, tok, none, n, 16, 16, &res, NULL, NULL) == LC_EINVAL && strstr(lc_errmsg(), "counts none"),
        "mask counting nothing: %s", lc_errmsg());
  CHECK(lc_eval_windows(&m, &o, tok, NULL, n, 16, 17, &res, NULL, NULL) == LC_EINVAL && strstr(lc_errmsg(), "stride <= window"),
        "stride > window: %s", lc_errmsg());
  CHECK(lc_eval_windows(&m, &o, tok, NULL, 1, 16, 16, &res, NULL, NULL) == LC_EINVAL && strstr(lc_errmsg(), "at least 2 tokens"),
        "one token: %s", lc_errmsg());
  lc_model_destroy(&m);
  CHECK(ar.cur_total == 0, "arena balanced");
  return lc_test_finish("test_evaluate");
}
