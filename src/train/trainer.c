#include "train/trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fpenv.h"
#include "core/timer.h"

void lc_train_opts_init(lc_train_opts *o) {
  memset(o, 0, sizeof *o);
  o->beta1 = 0.9f;
  o->beta2 = 0.95f;
  o->eps = 1e-8f;
}

lc_status lc_trainer_init(lc_trainer *t, const lc_train_opts *o, lc_comm *world) {
  lc_fpenv_flush_denormals(); // a run must not slow down as it learns (core/fpenv.h)
  memset(t, 0, sizeof *t);
  t->o = *o;
  t->world = world;
  if (t->o.hp == 0) t->o.hp = 1;
  if (t->o.cp == 0) t->o.cp = 1;
  if (t->o.window == 0) t->o.window = t->o.cp;
  if (t->o.mopts.zero_group == 0) t->o.mopts.zero_group = world->size;
  o = &t->o;
  if (o->cfg.config_only)
    return lc_fail(LC_EINVAL, "--model %s is a configuration-only preset (shape without weights, for "
                   "longctx plan); train a preset (%s) or a Hugging Face model directory", o->cfg.name,
                   lc_config_preset_names());
  if (o->seq < 2) return lc_fail(LC_EINVAL, "--seq %d is too short: use at least 2 tokens", o->seq);
  if (o->batch < 1) return lc_fail(LC_EINVAL, "--batch %d: use at least 1 sequence per step", o->batch);
  if (o->steps < 0) return lc_fail(LC_EINVAL, "--steps %ld: must be >= 0", o->steps);
  if (o->warmup < 0) return lc_fail(LC_EINVAL, "--warmup %ld: must be >= 0", o->warmup);
  if (!(o->lr >= 0) || !(o->wd >= 0) || !(o->clip >= 0))
    return lc_fail(LC_EINVAL, "--lr, --wd and --clip must be >= 0");
  if (o->mopts.mlp_tile < 0 || o->mopts.loss_tile < 0)
    return lc_fail(LC_EINVAL, "--mlp-tile and --loss-tile must be >= 0 (0 = untiled)");
  if ((long)o->seq > (long)o->cfg.max_pos)
    return lc_fail(LC_EINVAL, "--seq %d exceeds the model's max_position_embeddings %d", o->seq,
                   o->cfg.max_pos);
  LC_TRY(lc_config_validate(&o->cfg));
  LC_TRY(lc_grid_validate(world->size, o->hp, o->cp, o->window, &o->cfg, o->seq, o->batch));
  lc_arena_init(&t->arena, o->mem_cap);
  LC_TRY(lc_data_open(&t->data, o->data_spec, o->cfg.vocab, o->seq));
  lc_status st = lc_grid_create(&t->grid, world, o->hp, o->cp, o->window, o->placement);
  if (st != LC_OK) {
    lc_data_close(&t->data);
    return st;
  }
  t->T = o->seq / (o->hp * o->cp);
  t->local_batch = o->batch / t->grid.dp;
  t->distributed = o->hp * o->cp > 1;
  if (t->distributed)
    st = lc_attn_2d_init(&t->attn, t->grid.head, t->grid.ctx, o->window, o->seq, 2, o->cfg.n_heads,
                         o->cfg.n_kv_heads, o->cfg.head_dim);
  else
    lc_attn_local_init(&t->attn, o->cfg.n_heads, o->cfg.n_kv_heads, o->cfg.head_dim);
  if (st == LC_OK) st = lc_model_create_zero(&t->model, &o->cfg, o->mopts.zero, o->mopts.zero_group, world, &t->arena);
  if (st == LC_OK) st = lc_pstore_add_optimizer(&t->model.ps);
  if (st == LC_OK) st = lc_model_init_random(&t->model, o->seed);
  if (st != LC_OK) {
    lc_trainer_free(t);
    return st;
  }
  t->opt.m = t->model.ps.m;
  t->opt.v = t->model.ps.v;
  t->opt.n = t->model.ps.n_opt;
  size_t n = (size_t)t->local_batch * t->T;
  t->full_tok = malloc(sizeof(int) * (size_t)o->seq);
  t->full_tgt = malloc(sizeof(int) * (size_t)o->seq);
  t->tokens = malloc(sizeof(int) * n);
  t->targets = malloc(sizeof(int) * n);
  t->pos = malloc(sizeof(int) * (size_t)t->T);
  if (!t->tokens || !t->targets || !t->pos || !t->full_tok || !t->full_tgt) {
    lc_trainer_free(t);
    return lc_fail(LC_ENOMEM, "out of memory for the token buffers (--batch x --seq too large)");
  }
  for (int i = 0; i < t->T; i++)
    t->pos[i] = (int)lc_layout_index(o->seq, o->cp, o->hp, t->grid.c, t->grid.h, i);
  return LC_OK;
}

void lc_trainer_free(lc_trainer *t) {
  free(t->pos);
  free(t->targets);
  free(t->tokens);
  free(t->full_tgt);
  free(t->full_tok);
  memset(&t->opt, 0, sizeof t->opt); // its moments belong to the store
  lc_model_destroy(&t->model, &t->arena);
  if (t->distributed) lc_attn_2d_free(&t->attn);
  lc_grid_destroy(&t->grid);
  lc_data_close(&t->data);
  t->tokens = t->targets = t->pos = t->full_tok = t->full_tgt = NULL;
}

// This rank's tokens of the batch: its data-parallel group's sequences, its slice of each.
static long load_batch(lc_trainer *t) {
  const lc_train_opts *o = &t->o;
  long counted = 0;
  for (int b = 0; b < t->local_batch; b++) {
    uint64_t idx = t->next_sample + (uint64_t)t->grid.d * t->local_batch + (uint64_t)b;
    lc_data_sample(&t->data, o->seed, idx, t->full_tok, t->full_tgt, o->seq);
    int *tok = t->tokens + (size_t)b * t->T, *tgt = t->targets + (size_t)b * t->T;
    for (int i = 0; i < t->T; i++) {
      tok[i] = t->full_tok[t->pos[i]];
      tgt[i] = t->full_tgt[t->pos[i]];
      counted += tgt[i] >= 0;
    }
  }
  return counted;
}

lc_status lc_trainer_step(lc_trainer *t, lc_step_metrics *m) {
  const lc_train_opts *o = &t->o;
  const int S = o->seq;
  lc_pstore *ps = &t->model.ps;
  double t0 = lc_now();
  lc_arena_reset_peaks(&t->arena);
  // Communicators: attention (head, ring); model states (world, zero group, replicas).
  lc_comm *cs[5] = {t->grid.head, t->grid.ctx, t->world, ps->zg, ps->rep};
  double b0[5] = {0}, ws0[5] = {0}, k0 = t->distributed ? lc_attn_2d_compute_seconds(&t->attn) : 0;
  for (int i = 0; i < 5; i++)
    if (cs[i]) b0[i] = cs[i]->bytes_sent, ws0[i] = cs[i]->wait_seconds;
  memset(m, 0, sizeof *m);
  // Draw the whole batch first: the loss is divided by the batch's counted tokens (all ranks).
  double counted_d = (double)load_batch(t);
  LC_TRY(lc_allreduce_sum(t->world, &counted_d, 1, LC_DT_F64));
  long counted = (long)counted_d;
  t->next_sample += (uint64_t)o->batch;
  float scale = counted > 0 ? 1.0f / (float)counted : 0.0f;
  // Every rank saw different tokens: the store sums the gradients over the world (ZeRO:
  // reduce-scatters them), unit by unit while backward runs.
  lc_pstore_step_begin(ps, t->local_batch);
  double loss_sum = 0;
  for (int b = 0; b < t->local_batch; b++)
    LC_TRY(lc_model_fwd_bwd(&t->model, &o->mopts, &t->attn, t->tokens + (size_t)b * t->T,
                            t->targets + (size_t)b * t->T, t->pos, t->T, scale, 1, &loss_sum,
                            &t->arena));
  LC_TRY(lc_pstore_finish_grads(ps));
  LC_TRY(lc_allreduce_sum(t->world, &loss_sum, 1, LC_DT_F64));
  double sumsq = 0;
  LC_TRY(lc_pstore_grad_sumsq(ps, &sumsq));
  double norm = sqrt(sumsq);
  if (!isfinite(norm))
    return lc_fail(LC_EINVAL, "step %ld: the gradient is not finite (norm %g); lower --lr or set --clip",
                   t->step + 1, norm);
  const float clip = lc_clip_factor(norm, o->clip);
  if (clip != 1.0f) lc_pstore_scale_grads(ps, clip);
  lc_adamw_hp hp = {.lr = lc_lr_at(t->step, o->steps, o->warmup, o->lr, o->lr_min),
                    .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps, .weight_decay = o->wd};
  lc_adamw_update_segments(&t->opt, &hp, ps->params, ps->grads, ps->seg, ps->n_seg);
  LC_TRY(lc_pstore_sync_params(ps));
  t->step++;
  m->step = t->step;
  m->loss = counted > 0 ? loss_sum / (double)counted : 0.0;
  m->lr = hp.lr;
  m->grad_norm = norm;
  m->tokens = (long)o->batch * S;
  m->counted = counted;
  m->seconds = lc_now() - t0;
  m->attn_bytes = cs[0]->bytes_sent - b0[0] + cs[1]->bytes_sent - b0[1];
  for (int i = 2; i < 5; i++)
    if (cs[i]) m->grad_bytes += cs[i]->bytes_sent - b0[i];
  const int W = t->world->size;
  m->grad_bytes_formula = lc_pstore_step_bytes(ps, t->local_batch) +
                          (W > 1 ? 2 * 2.0 * (W - 1) / W * sizeof(double) : 0.0); // counted + loss sums
  for (int i = 0; i < 5; i++)
    if (cs[i]) m->comm_wait_s += cs[i]->wait_seconds - ws0[i];
  for (int i = 2; i < 5; i++)
    if (cs[i]) m->state_wait_s += cs[i]->wait_seconds - ws0[i];
  if (t->distributed) {
    m->attn_kernel_s = lc_attn_2d_compute_seconds(&t->attn) - k0;
    int passes = o->mopts.ckpt == LC_CKPT_FULL ? 2 : 1;
    m->attn_bytes_formula = (double)t->local_batch * o->cfg.n_layers *
                            lc_attn_2d_bytes_per_layer(&t->attn, t->T, passes);
  }
  m->peak_bytes = t->arena.peak_total;
  memcpy(m->peak, t->arena.peak, sizeof m->peak);
  return LC_OK;
}

lc_status lc_trainer_eval(lc_trainer *t, int n, double *loss, double *accuracy) {
  const lc_train_opts *o = &t->o;
  const int dp = t->grid.dp;
  // wrong[i]: wrong tokens of sample i summed over the ranks that hold parts of it.
  double *acc = calloc((size_t)n + 2, sizeof(double));
  if (!acc) return lc_fail(LC_ENOMEM, "out of memory for evaluation");
  lc_status st = LC_OK;
  for (int i = t->grid.d; i < n && st == LC_OK; i += dp) {
    int counted_full = 0;
    st = lc_data_sample_eval(&t->data, o->seed, (uint64_t)i, t->full_tok, t->full_tgt, o->seq, &counted_full);
    if (st != LC_OK) break;
    long counted = 0, wrong = 0;
    for (int j = 0; j < t->T; j++) {
      t->tokens[j] = t->full_tok[t->pos[j]];
      t->targets[j] = t->full_tgt[t->pos[j]];
      counted += t->targets[j] >= 0;
    }
    double ls = 0;
    st = lc_model_eval(&t->model, &o->mopts, &t->attn, t->tokens, t->targets, t->pos, t->T, &ls,
                       &wrong, &t->arena);
    acc[i] += (double)wrong;
    acc[n] += ls;
    acc[n + 1] += (double)counted;
  }
  if (st == LC_OK) st = lc_allreduce_sum(t->world, acc, (size_t)n + 2, LC_DT_F64);
  if (st == LC_OK) {
    int right = 0;
    for (int i = 0; i < n; i++) right += acc[i] == 0;
    *accuracy = n > 0 ? (double)right / n : 0;
    *loss = acc[n + 1] > 0 ? acc[n] / acc[n + 1] : 0;
  }
  free(acc);
  return st;
}
