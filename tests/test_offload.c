// --offload-optimizer (pstore.h, lc_pstore_offload): one training step on the private
// device with the optimizer's states in host memory gives, unit by unit, the same gradient
// bits as the same step with the states on the device: every unit's device gradient comes
// down and is added into the host's, the embedding's (unit 0) included, also when the LM
// head is tied to it (its gradient opened at the loss and kept to the end). One pass per
// step: 0 + g = g, so the bits are equal (pstore.h); ZeRO 0 and 3 (a group of one), fp32 and
// bf16. Each unit's reference gradient is checked non-zero, so a unit that never got its
// gradient shows as that unit, not as a norm.
#include <string.h>

#include "model/model.h"
#include "train/trainer.h"
#include "testutil.h"

typedef struct {
  float *g; // the flat gradient (the layout's floats), read back from wherever it lives
  size_t n;
  double loss, norm;
  lc_param_layout lay; // (copied: units and their float ranges)
} grads_out;

static int run(const lc_config *cfg, int zero, lc_dtype prec, int offload, grads_out *out) {
  lc_train_opts o;
  lc_train_opts_init(&o);
  o.cfg = *cfg;
  o.mopts.ckpt = LC_CKPT_SELECTIVE;
  o.mopts.zero = zero;
  o.mopts.precision = prec;
  o.mopts.offload_optimizer = offload;
  o.device = "private";
  o.data_spec = "task:copy";
  o.seq = 64, o.batch = 1, o.steps = 1;
  o.lr = 1e-3f, o.lr_min = 1e-4f;
  o.clip = 0; // no clipping: the gradients stay as backward left them
  o.seed = 3;
  lc_comm *self = NULL;
  lc_trainer tr;
  memset(out, 0, sizeof *out);
  int ok = lc_comm_self(&self) == LC_OK && lc_trainer_init(&tr, &o, self) == LC_OK;
  CHECK(ok, "trainer init (offload %d, zero %d): %s", offload, zero, lc_errmsg());
  if (!ok) {
    lc_comm_destroy(self);
    return 0;
  }
  lc_step_metrics m;
  ok = lc_trainer_step(&tr, &m) == LC_OK;
  CHECK(ok, "step (offload %d, zero %d): %s", offload, zero, lc_errmsg());
  lc_pstore *ps = &tr.model.ps;
  CHECK(!offload || (ps->dev && ps->be->host_memory), "offload: the states are in host memory, the passes on the device");
  CHECK(ps->n_grads == ps->lay.total, "zero %d, one rank: the whole gradient (%zu of %zu floats)", zero, ps->n_grads,
        ps->lay.total);
  out->n = ps->lay.total;
  out->g = calloc(out->n, sizeof(float));
  if (ok) CHECK(lc_buf_read(ps->grads_b, out->g, LC_SYNC_TEST) == LC_OK, "read the gradient: %s", lc_errmsg());
  out->loss = m.loss, out->norm = m.grad_norm;
  out->lay = ps->lay;
  out->lay.units = malloc(sizeof(lc_param_unit) * (size_t)ps->lay.n_units);
  memcpy(out->lay.units, ps->lay.units, sizeof(lc_param_unit) * (size_t)ps->lay.n_units);
  out->lay.table = NULL, out->lay.n_tensors = 0;
  lc_trainer_free(&tr);
  lc_comm_destroy(self);
  return ok;
}

static const char *unit_name(int u, int n_layers, char *buf, size_t n) {
  if (u == LC_UNIT_EMBED) snprintf(buf, n, "unit 0 (the embedding)");
  else if (u == lc_unit_final(n_layers)) snprintf(buf, n, "unit %d (final norm + head)", u);
  else snprintf(buf, n, "unit %d (layer %d)", u, u - 1);
  return buf;
}

static void compare(const lc_config *cfg, int zero, lc_dtype prec) {
  char tag[96];
  snprintf(tag, sizeof tag, "%s head, zero %d, %s", cfg->tie_embeddings ? "tied" : "untied", zero,
           prec == LC_DT_BF16 ? "bf16" : "fp32");
  grads_out a, b;
  if (!run(cfg, zero, prec, 0, &a) || !run(cfg, zero, prec, 1, &b)) return;
  CHECK(a.n == b.n && a.lay.n_units == b.lay.n_units && a.lay.n_units == cfg->n_layers + 2, "%s: layouts", tag);
  for (int u = 0; u < a.lay.n_units && a.n == b.n; u++) {
    const lc_param_unit *U = &a.lay.units[u];
    char nm[48];
    unit_name(u, cfg->n_layers, nm, sizeof nm);
    double ref = 0, d = 0;
    size_t first = U->n;
    for (size_t i = U->off; i < U->off + U->n; i++) {
      ref = fmax(ref, fabs((double)a.g[i]));
      d = fmax(d, fabs((double)a.g[i] - (double)b.g[i]));
      if (first == U->n && memcmp(&a.g[i], &b.g[i], sizeof(float))) first = i - U->off;
    }
    CHECK(ref > 0, "%s: %s: the reference gradient is all zero", tag, nm);
    CHECK(first == U->n,
          "%s: %s: the offloaded gradient differs from the one kept on the device (first at float %zu of %zu: %.9g vs "
          "%.9g; max |diff| %.3g, max |g| %.3g)",
          tag, nm, first, U->n, first < U->n ? (double)b.g[U->off + first] : 0.0,
          first < U->n ? (double)a.g[U->off + first] : 0.0, d, ref);
  }
  CHECK(a.loss == b.loss && a.norm == b.norm, "%s: loss %.17g vs %.17g, norm %.17g vs %.17g", tag, b.loss, a.loss, b.norm,
        a.norm);
  printf("offload %-28s %d units' gradients bit-identical to the device's (norm %.6f)\n", tag, a.lay.n_units, a.norm);
  free(a.g), free(b.g), free(a.lay.units), free(b.lay.units);
}

int main(void) {
  for (int tie = 0; tie < 2; tie++) {
    lc_config cfg;
    lc_config_preset(&cfg, "tiny");
    cfg.tie_embeddings = tie;
    compare(&cfg, 0, LC_DT_F32);
    compare(&cfg, 3, tie ? LC_DT_BF16 : LC_DT_F32);
  }
  return lc_test_finish("test_offload");
}
