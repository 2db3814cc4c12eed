// A short training run on task:copy must learn: the mean loss of the last 10 steps is
// far below the first steps' (ln 256 = 5.55 for a uniform guess over bytes).
#include "train/trainer.h"
#include "testutil.h"

// A 300-step run reaches ~2.4 (measured); 3.5 leaves margin yet needs the copy learned
// (a model that only learned byte frequencies stays at ~5.5).
#define LAST_MAX 3.5

int main(void) {
  lc_train_opts o;
  lc_train_opts_init(&o);
  lc_config_preset(&o.cfg, "tiny");
  o.mopts.ckpt = LC_CKPT_SELECTIVE;
  o.mopts.mlp_tile = 48;
  o.mopts.loss_tile = 40;
  o.data_spec = "task:copy";
  o.seq = 64;
  o.batch = 4;
  o.steps = 300;
  o.warmup = 10;
  o.lr = 3e-3f;
  o.lr_min = 3e-4f;
  o.wd = 0.1f;
  o.clip = 1.0f;
  o.seed = 1;
  lc_trainer tr;
  lc_comm *self = NULL;
  CHECK(lc_comm_self(&self) == LC_OK, "self communicator");
  CHECK(lc_trainer_init(&tr, &o, self) == LC_OK, "init: %s", lc_errmsg());
#if defined(__SSE__) || defined(__x86_64__) || defined(__aarch64__)
  volatile float tiny = 1e-20f;
  CHECK(tiny * tiny == 0.0f, "lc_trainer_init sets flush-to-zero (1e-20 * 1e-20 is subnormal)");
#endif
  double first = 0, last = 0;
  lc_step_metrics m;
  for (long s = 0; s < o.steps; s++) {
    lc_status st = lc_trainer_step(&tr, &m);
    if (st != LC_OK) {
      CHECK(0, "step %ld: %s", s, lc_errmsg());
      break;
    }
    if (s == 0) first = m.loss;
    if (s >= o.steps - 10) last += m.loss / 10;
  }
  printf("task:copy tiny: first loss %.4f, mean of last 10 %.4f\n", first, last);
  // Untrained: ~ln(256) = 5.55. Copying a 16-token segment from 16 positions back is
  // learnable by one attention head; LAST_MAX is set with margin below what runs reach.
  CHECK(first > 5.0 && first < 6.0, "initial loss %.4f should be near ln 256", first);
  CHECK(last < LAST_MAX, "loss after %ld steps %.4f, want < %.2f", o.steps, last, LAST_MAX);
  CHECK(m.peak_bytes > 0 && m.peak[LC_MEM_PARAMS] > 0 && m.peak[LC_MEM_CKPT] > 0, "peaks recorded");
  lc_trainer_free(&tr);
  lc_comm_destroy(self);
  CHECK(tr.arena.cur_total == 0, "arena empty after free (%zu bytes left)", tr.arena.cur_total);
  return lc_test_finish("test_train");
}
