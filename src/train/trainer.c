// The training step of one process (trainer.h): the batch's sequences placed over the
// ranks, each one's pass inputs built and its forward/backward run, then the update.
#include "train/trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fpenv.h"
#include "core/runstate.h"
#include "core/timer.h"
#include "model/ckstore.h"
#include "model/memplan.h"
#include "core/dropout_hash.h"

void lc_train_opts_init(lc_train_opts *o) {
  memset(o, 0, sizeof *o);
  o->beta1 = 0.9f;
  o->beta2 = 0.95f;
  o->eps = 1e-8f;
}

// The head chunk of the run: the one asked for, or (auto) all heads at once unless the
// predicted peak exceeds the budget, then the largest chunk that fits (the memory model).
// Rank 0's choice holds everywhere (budgets may differ by node; the exchanges must not).
static lc_status choose_head_chunk(lc_trainer *t) {
  const lc_train_opts *o = &t->o;
  t->head_chunk = o->head_chunk > 0 && o->head_chunk < o->cfg.n_heads / o->hp ? o->head_chunk : 0;
  if (o->head_chunk >= 0 || o->hp < 2) return LC_OK;
  const size_t budget = o->head_chunk_budget ? o->head_chunk_budget : o->mem_cap;
  int32_t hc = budget ? lc_memplan_auto_head_chunk(&o->cfg, &o->mopts, o->seq, o->hp, o->cp, o->window, 0, budget) : 0;
  LC_TRY(lc_bcast(t->world, &hc, 1, LC_DT_I32, 0));
  t->head_chunk = hc;
  return LC_OK;
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
  // Dynamic NTK scaling is made for positions beyond max_position_embeddings.
  const int lim = lc_config_max_positions(&o->cfg);
  if ((long)o->seq > (long)lim) {
    // The hint: the model's own static type (else yarn) over its original context.
    const lc_rope_scaling *r = &o->cfg.rope;
    const int orig = r->type != LC_ROPE_DEFAULT && r->orig_max > 0 ? r->orig_max : o->cfg.max_pos;
    const char *ty = r->type != LC_ROPE_DEFAULT && r->type != LC_ROPE_LONGROPE ? lc_rope_type_name(r->type) : "yarn";
    return lc_fail(LC_EINVAL, "--seq %d exceeds the model's context of %d positions: extend it with --rope-scaling "
                   "TYPE:FACTOR[:ORIG] (e.g. %s:%d:%d)", o->seq, lim, ty, (o->seq + orig - 1) / orig, orig);
  }
  LC_TRY(lc_config_validate(&o->cfg));
  LC_TRY(lc_layout_validate(world->size, o->hp, o->cp, o->window, o->cfg.n_heads, o->cfg.n_kv_heads, o->seq, o->batch));
  if (o->head_chunk < -1) return lc_fail(LC_EINVAL, "--head-chunk %d: give a number of heads, all or auto", o->head_chunk);
  if (o->head_chunk > 0 && !(o->hp > 1 && o->head_chunk == o->cfg.n_heads / o->hp))
    LC_TRY(lc_attn_2d_head_chunk_check(o->hp, o->cfg.n_heads, o->cfg.n_kv_heads, o->head_chunk));
  lc_arena_init(&t->arena, o->mem_cap);
  // Files (and memory) may fail on some ranks only: agree before each collective, so that
  // every rank returns the error instead of some waiting forever (lc_comm_agree).
  lc_status st = lc_data_open(&t->data, o->data_spec, o->cfg.vocab, o->seq);
  if (st == LC_OK && o->pack) st = lc_data_pack(&t->data, o->seq, o->seed, o->drop_long);
  if ((st = lc_comm_agree(world, st)) != LC_OK) {
    lc_data_close(&t->data);
    return st;
  }
  st = lc_grid_create(&t->grid, world, o->hp, o->cp, o->window, o->placement);
  if (st != LC_OK) {
    lc_data_close(&t->data);
    return st;
  }
  t->T = o->seq / (o->hp * o->cp);
  t->local_batch = o->batch / t->grid.dp;
  t->distributed = o->hp * o->cp > 1;
  t->window = o->cfg.sliding_window;
  const int chunks = lc_cp_layout_chunks(o->mopts.cp_layout, o->seq, o->cp, o->hp);
  st = choose_head_chunk(t);
  if (st == LC_OK && t->distributed)
    st = lc_attn_2d_init(&t->attn, t->grid.head, t->grid.ctx, o->window, o->seq, chunks, o->cfg.n_heads,
                         o->cfg.n_kv_heads, o->cfg.head_dim, t->head_chunk);
  else
    lc_attn_local_init(&t->attn, o->cfg.n_heads, o->cfg.n_kv_heads, o->cfg.head_dim);
  // Offloaded checkpoints: the directory must take a pass's layers (every rank, before any
  // step writes a byte; the bytes are the memory model's, lc_model_pass_bytes in RAM).
  if (st == LC_OK && o->mopts.offload_dir) {
    lc_model_opts ram = o->mopts;
    ram.offload_dir = NULL;
    size_t ck = 0, act = 0;
    lc_model_pass_bytes(&o->cfg, &ram, t->T, t->attn.saved_bytes(&t->attn, t->T, o->mopts.precision == LC_DT_BF16), &ck,
                        &act);
    st = lc_ckstore_check_dir(o->mopts.offload_dir, ck);
  }
  st = lc_comm_agree(world, st);
  if (st == LC_OK) st = lc_backend_open(o->device ? o->device : "cpu", &t->arena, &t->be);
  if (st == LC_OK && o->mopts.offload_optimizer) { // the states on the host, the passes on the device
    lc_backend_cpu_init(&t->hbe, &t->arena);
    t->hbe_open = 1;
  }
  if (st == LC_OK)
    st = lc_model_create_on(&t->model, &o->cfg, o->mopts.zero, o->mopts.zero_group, world, t->hbe_open ? &t->hbe : t->be);
  if (st == LC_OK && t->hbe_open) st = lc_pstore_offload(&t->model.ps, t->be);
  lc_pstore *tp = st == LC_OK ? lc_model_trainable(&t->model) : NULL;
  if (st == LC_OK) st = lc_pstore_add_optimizer(tp);
  if (st == LC_OK) st = lc_model_init_random(&t->model, o->seed);
  if (tp) {
    t->opt.m = tp->m;
    t->opt.v = tp->v;
    t->opt.n = tp->n_opt;
  }
  size_t n = (size_t)t->local_batch * t->T;
  const int bounded = o->pack || t->window > 0;
  if (st != LC_OK) { // agree (below) before freeing: the frees of communicators are collective
    if ((st = lc_comm_agree(world, st)) != LC_OK) lc_trainer_free(t);
    return st;
  }
  t->full_tok = malloc(sizeof(int) * (size_t)o->seq);
  t->full_tgt = malloc(sizeof(int) * (size_t)o->seq);
  t->full_doc = malloc(sizeof(int) * (size_t)o->seq);
  t->tokens = malloc(sizeof(int) * n);
  t->targets = malloc(sizeof(int) * n);
  t->pos = malloc(sizeof(int) * n);
  t->lo = bounded ? malloc(sizeof(int) * (size_t)t->local_batch * (size_t)o->seq) : NULL;
  t->lay = calloc((size_t)t->local_batch, sizeof *t->lay);
  t->rope_len = calloc((size_t)t->local_batch, sizeof *t->rope_len);
  t->sample = calloc((size_t)t->local_batch, sizeof *t->sample);
  const int dropping = o->cfg.lora.rank > 0 && o->cfg.lora.dropout > 0;
  t->drop_rows = dropping ? malloc(sizeof(int) * (size_t)(t->T > 0 ? t->T : 1)) : NULL;
  if (!t->sample || (dropping && !t->drop_rows) || !t->tokens || !t->targets || !t->pos || !t->full_tok || !t->full_tgt || !t->full_doc || !t->lay || !t->rope_len ||
      (bounded && !t->lo))
    st = lc_fail(LC_ENOMEM, "out of memory for the token buffers (--batch x --seq too large)");
  for (int b = 0; b < t->local_batch && st == LC_OK; b++)
    st = lc_seq_layout_init(&t->lay[b], o->seq, o->cp, o->hp, chunks);
  if ((st = lc_comm_agree(world, st)) != LC_OK) lc_trainer_free(t);
  return st;
}

void lc_trainer_free(lc_trainer *t) {
  if (t->lay)
    for (int b = 0; b < t->local_batch; b++) lc_seq_layout_free(&t->lay[b]);
  free(t->lay);
  free(t->rope_len);
  t->rope_len = NULL;
  free(t->sample);
  free(t->drop_rows);
  t->sample = NULL;
  t->drop_rows = NULL;
  free(t->lo);
  free(t->full_doc);
  free(t->pos);
  free(t->targets);
  free(t->tokens);
  free(t->full_tgt);
  free(t->full_tok);
  memset(&t->opt, 0, sizeof t->opt); // its moments belong to the store
  lc_model_destroy(&t->model);
  if (t->hbe_open) lc_backend_close(&t->hbe);
  t->hbe_open = 0;
  lc_backend_close(t->be);
  t->be = NULL;
  if (t->distributed) lc_attn_2d_free(&t->attn);
  lc_grid_destroy(&t->grid);
  lc_data_close(&t->data);
  t->tokens = t->targets = t->pos = t->full_tok = t->full_tgt = t->full_doc = t->lo = NULL;
  t->lay = NULL;
  lc_arena_trim(&t->arena);
}

// Sequence b of the batch from the sample in full_tok/tgt/doc (attn/seqlayout.h).
static void place_sequence(lc_trainer *t, int b, long *counted, double *pairs) {
  const long S = t->o.seq;
  lc_seq_placed r;
  lc_seq_place(&t->lay[b], t->o.mopts.cp_layout == LC_CP_BALANCED, t->grid.c, t->grid.h, t->window, t->full_tok,
               t->full_tgt, t->full_doc, t->lo ? t->lo + (size_t)b * S : NULL, t->T, t->tokens + (size_t)b * t->T,
               t->targets + (size_t)b * t->T, t->pos + (size_t)b * t->T, &r);
  *counted += r.counted;
  *pairs += r.pairs;
  t->rope_len[b] = r.rope_len;
}

// The pass inputs of sequence b: its layout and bounds, its RoPE length and the LoRA
// dropout's rows and key.
static lc_pass_in attend_sequence(lc_trainer *t, int b) {
  lc_pass_in in = {.attn = {.layout = t->distributed ? &t->lay[b] : NULL,
                            .lo = t->lo ? t->lo + (size_t)b * t->o.seq : NULL,
                            .lo_len = t->o.seq},
                   .rope_len = t->rope_len[b]};
  // LoRA dropout: the mask follows the sample, the step and each row's place in the whole
  // sequence, so every layout drops the same elements (core/dropout_hash.h).
  if (t->drop_rows) {
    for (int i = 0; i < t->T; i++)
      t->drop_rows[i] = t->distributed ? (int)lc_seq_layout_global(&t->lay[b], t->grid.c, t->grid.h, i) : i;
    in.drop_rows = t->drop_rows;
    in.drop_key = lc_dropout_pass_key((uint64_t)t->o.seed, t->step + 1, t->sample[b]);
  }
  return in;
}

// Test hook: LONGCTX_TEST_DUMP_SAMPLES=FILE appends each sample world rank 0 draws (whole,
// before the layout cuts it) as a JSON line: its index, tokens, targets (-100: not counted)
// and document starts, so the CLI tests can see what packing made of a file.
static void dump_sample(const lc_trainer *t, uint64_t idx) {
  const char *path = getenv("LONGCTX_TEST_DUMP_SAMPLES");
  FILE *f = path && t->world->rank == 0 ? fopen(path, "a") : NULL;
  if (!f) return;
  const int *a[3] = {t->full_tok, t->full_tgt, t->full_doc};
  static const char *const key[3] = {"tok", "tgt", "doc"};
  fprintf(f, "{\"sample\": %llu", (unsigned long long)idx);
  for (int k = 0; k < 3; k++) {
    fprintf(f, ", \"%s\": [", key[k]);
    for (int i = 0; i < t->o.seq; i++) fprintf(f, i ? ",%d" : "%d", a[k][i]);
    fprintf(f, "]");
  }
  fprintf(f, "}\n");
  fclose(f);
}

// This rank's tokens of the batch: its data-parallel group's sequences, its slice of each.
// Returns this rank's counted targets; *pairs: its visible attention pairs; work[c]: the
// attention work of each context rank over these sequences.
static long load_batch(lc_trainer *t, double *pairs, double *work) {
  const lc_train_opts *o = &t->o;
  long counted = 0;
  for (int c = 0; c < o->cp; c++) work[c] = 0;
  double *w = malloc(sizeof(double) * (size_t)o->cp);
  for (int b = 0; b < t->local_batch; b++) {
    const uint64_t idx = t->next_sample + (uint64_t)t->grid.d * t->local_batch + (uint64_t)b;
    t->sample[b] = idx;
    if (lc_data_sample_docs(&t->data, o->seed, idx, t->full_tok, t->full_tgt, t->full_doc, o->seq) < 0) {
      free(w);
      return -1;
    }
    dump_sample(t, idx);
    place_sequence(t, b, &counted, pairs);
    if (w) {
      lc_seq_layout_work(&t->lay[b], t->lo ? t->lo + (size_t)b * o->seq : NULL, w);
      for (int c = 0; c < o->cp; c++) work[c] += w[c];
    }
  }
  free(w);
  return counted;
}

// Whether step is in the comma-separated list of the LONGCTX_TEST_NAN_STEP test hook.
static int test_nan_step(const char *list, long step) {
  for (const char *p = list; p && *p;) {
    char *end = NULL;
    const long s = strtol(p, &end, 10);
    if (end == p) return 0;
    if (s == step) return 1;
    p = *end == ',' ? end + 1 : end;
  }
  return 0;
}

#define NCS 7
// The ops' seconds by class so far: the device's, and with --offload-optimizer the host
// backend's (AdamW and the gradient norm on the CPU cores).
static void op_seconds(const lc_trainer *t, double out[LC_OPC_N]) {
  lc_backend_op_seconds(t->be, out);
  if (!t->hbe_open) return;
  double h[LC_OPC_N];
  lc_backend_op_seconds(&t->hbe, h);
  for (int c = 0; c < LC_OPC_N; c++) out[c] += h[c];
}

lc_status lc_trainer_step(lc_trainer *t, lc_step_metrics *m) {
  const lc_train_opts *o = &t->o;
  const int S = o->seq;
  lc_pstore *ps = lc_model_trainable(&t->model), *base = t->model.lora ? &t->model.ps : NULL;
  double t0 = lc_now();
  lc_arena_reset_peaks(&t->arena);
  if (t->be->arena != &t->arena) lc_arena_reset_peaks(t->be->arena);
  // Communicators: attention (head, ring); model states (world, zero group, replicas; with
  // LoRA also the frozen base's, which ZeRO 3 gathers).
  lc_comm *cs[NCS] = {t->grid.head, t->grid.ctx, t->world, ps->zg, ps->rep, base ? base->zg : NULL, base ? base->rep : NULL};
  double b0[NCS] = {0}, ws0[NCS] = {0}, k0 = t->distributed ? lc_attn_2d_compute_seconds(&t->attn) : 0;
  for (int i = 0; i < NCS; i++)
    if (cs[i]) b0[i] = cs[i]->bytes_sent, ws0[i] = cs[i]->wait_seconds;
  double op0[LC_OPC_N];
  op_seconds(t, op0);
  memset(m, 0, sizeof *m);
  lc_run_set_step(t->step + 1);
  // Draw the whole batch first: the loss is divided by the batch's counted tokens (all ranks).
  double pairs = 0, *work = calloc((size_t)o->cp, sizeof(double));
  if (!work) return lc_fail(LC_ENOMEM, "out of memory for the step");
  const long got = load_batch(t, &pairs, work);
  if (got < 0) {
    free(work);
    return LC_ENOMEM; // packing ran out of memory on this rank (lc_errmsg); the CLI ends every rank
  }
  double sums[2] = {(double)got, pairs};
  double wmax = 0, wsum = 0;
  for (int c = 0; c < o->cp; c++) wmax = work[c] > wmax ? work[c] : wmax, wsum += work[c];
  m->cp_imbalance = wsum > 0 ? wmax / (wsum / o->cp) : 1.0;
  free(work);
  // Test hook: LONGCTX_TEST_SKIP_SUM=RANK:STEP makes that rank skip this all-reduce (a
  // collective not every rank enters: the watchdog's stall test).
  const char *skip = getenv("LONGCTX_TEST_SKIP_SUM");
  int skip_rank = -1;
  long skip_step = -1;
  if (!(skip && sscanf(skip, "%d:%ld", &skip_rank, &skip_step) == 2 && skip_rank == t->world->rank &&
        skip_step == t->step + 1))
    LC_TRY(lc_allreduce_sum(t->world, sums, 2, LC_DT_F64));
  long counted = (long)sums[0];
  m->attn_pairs = sums[1];
  // Model FLOPs: forward + backward = 3 x forward; LoRA: the frozen weights' gradients are
  // not computed (2 x forward), plus the adapters' 6 FLOPs per parameter and token (their
  // recomputed x A^T is not counted, as no recomputation is).
  const double tok = (double)o->batch * S, fwd = lc_config_fwd_flops_pairs(&o->cfg, tok, m->attn_pairs);
  m->flops = t->model.lora ? 2.0 * fwd + 6.0 * (double)lc_config_n_lora_params(&o->cfg) * tok : 3.0 * fwd;
  t->next_sample += (uint64_t)o->batch;
  float scale = counted > 0 ? 1.0f / (float)counted : 0.0f;
  // Test hook: LONGCTX_TEST_NAN_STEP=N[,N...] makes rank 0's gradient of those steps not
  // finite (the gradient reductions carry it to every rank, as a real overflow would).
  if (t->world->rank == 0 && test_nan_step(getenv("LONGCTX_TEST_NAN_STEP"), t->step + 1)) scale = NAN;
  // Every rank saw different tokens: the store sums the gradients over the world (ZeRO:
  // reduce-scatters them), unit by unit while backward runs.
  lc_pstore_step_begin(ps, t->local_batch);
  double loss_sum = 0;
  for (int b = 0; b < t->local_batch; b++) {
    const lc_pass_in in = attend_sequence(t, b);
    LC_TRY(lc_model_fwd_bwd(&t->model, &o->mopts, &t->attn, &in, t->tokens + (size_t)b * t->T,
                            t->targets + (size_t)b * t->T, t->pos + (size_t)b * t->T, t->T, scale, 1,
                            &loss_sum));
  }
  LC_TRY(lc_allreduce_sum(t->world, &loss_sum, 1, LC_DT_F64));
  lc_adamw_hp hp = {.lr = lc_lr_at(t->step, o->steps, o->warmup, o->lr, o->lr_min),
                    .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps, .weight_decay = o->wd};
  // The loss and the norm are the same on every rank, so every rank decides alike: the
  // store updates only when both are finite.
  double norm = 0;
  int applied = 0;
  // No counted target on any rank (every token masked): nothing to learn, so no update.
  const int none = counted == 0;
  LC_TRY(lc_pstore_update(ps, &hp, o->clip, isfinite(loss_sum) && !none, &t->opt.step, &norm, &applied));
  if (!applied && none) {
    m->skipped = 1; // weights, moments and AdamW's step count stay as they are
  } else if (!applied) {
    t->failed_everywhere = 1; // the loss sum and the norm are global: every rank stops here
    if (t->skipped_in_a_row >= o->skip_nonfinite)
      return lc_fail(LC_EINVAL, "step %ld: the %s is not finite (loss sum %g, gradient norm %g)%s; lower --lr, set "
                     "--clip, or let --skip-nonfinite N skip such steps", t->step + 1,
                     !isfinite(loss_sum) ? "loss" : "gradient", loss_sum, norm,
                     o->skip_nonfinite ? " in too many steps in a row" : "");
    t->failed_everywhere = 0;
    t->skipped_in_a_row++; // weights, moments and AdamW's step count stay as they are
    m->skipped = 1;
  } else {
    t->skipped_in_a_row = 0;
  }

  t->step++;
  m->step = t->step;
  m->loss = counted > 0 ? loss_sum / (double)counted : 0.0;
  m->lr = hp.lr;
  m->grad_norm = norm;
  m->tokens = (long)o->batch * S;
  m->counted = counted;
  m->seconds = lc_now() - t0;
  op_seconds(t, m->op_s);
  for (int c = 0; c < LC_OPC_N; c++) m->op_s[c] -= op0[c];
  m->op_timed = t->be->synchronous;
  m->attn_bytes = cs[0]->bytes_sent - b0[0] + cs[1]->bytes_sent - b0[1];
  for (int i = 2; i < NCS; i++)
    if (cs[i]) m->grad_bytes += cs[i]->bytes_sent - b0[i];
  const int W = t->world->size;
  m->grad_bytes_formula = lc_pstore_step_bytes(ps, t->local_batch, o->mopts.precision) +
                          (base ? lc_pstore_step_bytes(base, t->local_batch, o->mopts.precision) : 0.0) +
                          (W > 1 ? 3 * 2.0 * (W - 1) / W * sizeof(double) : 0.0); // counted, pairs, loss
  for (int i = 0; i < NCS; i++)
    if (cs[i]) m->comm_wait_s += cs[i]->wait_seconds - ws0[i];
  for (int i = 2; i < NCS; i++)
    if (cs[i]) m->state_wait_s += cs[i]->wait_seconds - ws0[i];
  if (t->distributed) {
    m->attn_kernel_s = lc_attn_2d_compute_seconds(&t->attn) - k0;
    int passes = o->mopts.ckpt == LC_CKPT_FULL ? 2 : 1;
    m->attn_bytes_formula = (double)t->local_batch * o->cfg.n_layers *
                            lc_attn_2d_bytes_per_layer(&t->attn, t->T, passes, o->mopts.precision == LC_DT_BF16);
  }
  // The device's memory (on the CPU: the host's, one arena); a device's host side apart.
  m->peak_bytes = t->be->arena->peak_total;
  memcpy(m->peak, t->be->arena->peak, sizeof m->peak);
  m->host_peak_bytes = t->be->arena != &t->arena ? t->arena.peak_total : 0;
  return LC_OK;
}

lc_status lc_trainer_eval(lc_trainer *t, int n, double *loss, double *accuracy) {
  const lc_train_opts *o = &t->o;
  const int dp = t->grid.dp;
  // wrong[i]: wrong tokens of sample i summed over the ranks that hold parts of it.
  double *acc = calloc((size_t)n + 2, sizeof(double));
  if (!acc) return lc_fail(LC_ENOMEM, "out of memory for evaluation");
  lc_status st = LC_OK;
  // Under ZeRO 3 every group makes the same number of passes (the weight gathers span the
  // groups): a group past the end re-runs sample 0 and drops the result. Otherwise a
  // group's passes involve only its own ranks and it stops at the end.
  for (int it = 0; it < (n + dp - 1) / dp && st == LC_OK; it++) {
    const int i = it * dp + t->grid.d, real = i < n;
    if (!real && lc_model_trainable(&t->model)->stage < 3) break;
    int counted_full = 0;
    st = lc_data_sample_eval(&t->data, o->seed, (uint64_t)(real ? i : 0), t->full_tok, t->full_tgt,
                             t->full_doc, o->seq, &counted_full);
    if (st == LC_OK && counted_full < 0) st = LC_ENOMEM;
    if (st != LC_OK) break;
    long counted = 0, wrong = 0;
    double pairs = 0;
    place_sequence(t, 0, &counted, &pairs);
    const lc_pass_in in = attend_sequence(t, 0);
    double ls = 0;
    st = lc_model_eval(&t->model, &o->mopts, &t->attn, &in, t->tokens, t->targets, t->pos, t->T, &ls,
                       &wrong);
    if (!real) continue;
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
