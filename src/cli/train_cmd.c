// longctx train: flags, the job around the trainer (resume, saves, evaluation, signals).
#include <cjson/cJSON.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/train_job.h"
#include "cli/train_report.h"
#include "core/cpu.h"
#include "core/runstate.h"
#include "core/timer.h"
#include "backend/cpu/kern/kernels.h"
#include "backend/cpu/gemm/sgemm.h"
#include "io/fsutil.h"
#include "model/gguf_model.h"
#include "model/peft.h"
#include "model/hf.h"
#include "model/memplan.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

typedef struct {
  const char *model, *data, *ckpt, *log_json, *placement, *save, *resume, *cp_layout, *save_dtype, *precision, *kernels;
  const char *rope_theta, *rope_scaling, *offload, *offload_depth;
  const char *device;     // --device cpu (backend/backend.h)
  const char *head_chunk; // --head-chunk N|auto|all
  const char *machine;    // --machine FILE: the time model's rates
  int save_every, keep;
  int seq, batch, threads, mlp_tile, loss_tile, hp, cp, window, eval_every, eval_samples, log_every;
  int zero, zero_group, pack, drop_long, attn_window, skip_nonfinite, vocab_slice, profile, offload_optimizer;
  int calib_run;          // --calibrate-from-run N: after N steps, this run's measured rates into the machine file
  float timeout;
  long steps, warmup, seed;
  float lr, lr_min, wd, clip, mem_gib, peak_gflops;
  char ckpt_note[256];    // the settings table's word on the policy ("" when given)
  int lora, lora_rslora;  // --lora R, --lora-rslora
  float lora_alpha, lora_dropout;
  const char *lora_targets, *lora_from, *base_dtype;
  char base_model[1024];  // a LoRA checkpoint's base (adapter_config.json) when --resume has no --model
} train_flags;

// --lora R [--lora-alpha A --lora-targets LIST --lora-rslora] or an adapter's own settings
// (--lora-from DIR, or a LoRA checkpoint resumed): the file's, with each flag given equal
// to it. (This run's adapters go into cfg->lora, which the layout, the memory model and
// the trainer read.)
static lc_status lora_settings(lc_flag *flags, int nf, const train_flags *F, const char *ckpt_dir, lc_lora *l) {
  const int r_seen = lc_args_find(flags, nf, "lora")->seen, a_seen = lc_args_find(flags, nf, "lora-alpha")->seen;
  const int t_seen = lc_args_find(flags, nf, "lora-targets")->seen, rs_seen = lc_args_find(flags, nf, "lora-rslora")->seen;
  memset(l, 0, sizeof *l);
  const int d_seen = lc_args_find(flags, nf, "lora-dropout")->seen;
  if (d_seen && !(F->lora_dropout >= 0.0f && F->lora_dropout < 1.0f))
    return lc_fail(LC_EINVAL, "--lora-dropout %g: give the probability of dropping an input of the adapters, in [0, 1)",
                   (double)F->lora_dropout);
  if (F->base_dtype && strcmp(F->base_dtype, "fp32") && strcmp(F->base_dtype, "bf16") && strcmp(F->base_dtype, "gguf"))
    return lc_fail(LC_EINVAL, "--base-dtype %s: the frozen base is held in fp32 (4 bytes per weight), bf16 (2; with "
                   "--precision bf16) or gguf (a GGUF file's own quantized blocks: QLoRA)", F->base_dtype);
  char ap[1100];
  const char *src = NULL;
  if (ckpt_dir && lc_path_join(ap, sizeof ap, ckpt_dir, "adapter_config.json") == LC_OK && lc_is_file(ap)) src = ckpt_dir;
  if (F->lora_from) {
    if (src) return lc_fail(LC_EINVAL, "--lora-from with --resume of a LoRA checkpoint: the checkpoint has its adapters; "
                            "leave --lora-from out");
    src = F->lora_from;
  }
  lc_lora want = {.rank = F->lora, .alpha = a_seen ? F->lora_alpha : (float)F->lora, .targets = LC_LORA_ALL,
                  .rslora = F->lora_rslora};
  if (t_seen) LC_TRY(lc_lora_parse_targets(F->lora_targets, &want.targets));
  if (r_seen && F->lora < 0) return lc_fail(LC_EINVAL, "--lora %d: give the adapters' rank (>= 1), or 0 for none", F->lora);
  if (!src) {
    if (!r_seen || F->lora == 0) {
      if (a_seen || t_seen || rs_seen || d_seen)
        return lc_fail(LC_EINVAL, "--lora-alpha/--lora-targets/--lora-rslora/--lora-dropout need --lora R");
      return LC_OK;
    }
    if (!(want.alpha > 0) || !isfinite(want.alpha)) return lc_fail(LC_EINVAL, "--lora-alpha %g: give a positive scale numerator", (double)want.alpha);
    *l = want;
    l->base_bf16 = F->base_dtype && !strcmp(F->base_dtype, "bf16");
    l->dropout = d_seen ? F->lora_dropout : 0.0f;
    return LC_OK;
  }
  lc_lora file;
  LC_TRY(lc_peft_read_config(src, &file));
  if (r_seen && F->lora == 0) return lc_fail(LC_EINVAL, "--lora 0 with the adapters of %s: leave --lora out", src);
  // Each flag given must agree with the file (lc_peft_check names the first difference).
  lc_lora chk = file;
  if (r_seen) chk.rank = want.rank;
  if (a_seen) chk.alpha = want.alpha;
  if (t_seen) chk.targets = want.targets;
  if (rs_seen) chk.rslora = want.rslora;
  LC_TRY(lc_peft_check(src, &file, &chk));
  *l = file;
  l->base_bf16 = F->base_dtype && !strcmp(F->base_dtype, "bf16");
  if (d_seen) l->dropout = F->lora_dropout; // (else the file's: a resumed run drops what it dropped)
  return LC_OK;
}

// QLoRA: a LoRA run on a GGUF file holds the base in the file's own blocks (--base-dtype
// gguf, the default there on the CPU backend), its other weights in the pass's precision.
static lc_status base_blocks(const train_flags *F, lc_train_opts *o, int model_dir) {
  memset(o->cfg.base_q, 0, sizeof o->cfg.base_q);
  o->cfg.base_q_embed = o->cfg.base_q_head = 0;
  const int gguf = model_dir && F->model && !lc_is_dir(F->model) && lc_gguf_is_model_path(F->model);
  const int given = F->base_dtype && !strcmp(F->base_dtype, "gguf");
  if (o->cfg.lora.rank <= 0 || (F->base_dtype && !given) || (!given && !gguf)) return LC_OK;
  const int cpu = !F->device || !strcmp(F->device, "cpu");
  if (!given && !cpu) return LC_OK; // the default falls back to fp32, which runs there
  if (!cpu)
    return lc_fail(LC_EINVAL, "--base-dtype gguf with --device %s: the GEMMs on a GGUF file's blocks run on the CPU backend "
                   "only; use --base-dtype bf16 on a GPU", F->device);
  return lc_cli_base_blocks("gguf", F->model ? F->model : "", o->mopts.precision == LC_DT_BF16,
                            &o->cfg);
}

// --resume: rank 0 finds the checkpoint and checks its files against their checksums
// (falling back to the newest intact one in a --save directory); every rank gets its
// answer (the same directory, or the same error).
static lc_status resolve_resume(lc_comm *w, const char *path, char *dir, size_t cap, char *note) {
  LC_TRY(lc_comm_agree(w, w->rank == 0 ? lc_checkpoint_resolve(path, dir, cap, note, 1024) : LC_OK));
  LC_TRY(lc_bcast(w, dir, cap, LC_DT_U8, 0));
  return lc_bcast(w, note, 1024, LC_DT_U8, 0);
}

// --kernels auto on several ranks: every rank runs the best level all of them have (a
// mixed job computes alike everywhere, e.g. no rank multiplies bf16 pairs while another
// multiplies fp32). counts[L] = ranks whose level is >= L.
static lc_status agree_kernel_level(lc_comm *w) {
  int64_t counts[LC_KERN_LEVELS];
  for (int l = 0; l < LC_KERN_LEVELS; l++) counts[l] = lc_kern()->level >= l;
  LC_TRY(lc_allreduce_sum(w, counts, LC_KERN_LEVELS, LC_DT_I64));
  int common = 0;
  for (int l = 0; l < LC_KERN_LEVELS; l++)
    if (counts[l] == w->size) common = l;
  return common < (int)lc_kern()->level ? lc_kern_select((lc_kern_level)common) : LC_OK;
}

// Flags -> trainer options. Everything here is found identically on every rank.
static lc_status auto_policy(lc_comm *w, lc_train_opts *o, size_t budget, int hc, int *fits);

// --calibrate-from-run: each class of rates (GEMMs, attention, loss, element-wise, optimizer)
// scaled by predicted / measured seconds per step over the steps after the first (the
// slowest rank's measurement), the profile stamped with this CPU and written into the
// machine file (rank 0) for this run's ranks x threads; the rates of classes that took
// under 0.5% of a step, and the communicator's links, stay as they were.
static lc_status calibrate_from_run(lc_comm *w, const lc_train_opts *o, const lc_trainer *t, lc_rates *r,
                                    const lc_step_terms *meas, int n, const char *machine, int after) {
  if (n < 1)
    return lc_fail(LC_EINVAL, "--calibrate-from-run %d: no step after the first was timed; give 2 or more (and a "
                   "device whose ops are timed: the CPU)", after);
  double m[LC_RATE_NCLASS];
  static const int term_of[LC_RATE_NCLASS] = {[LC_RATE_GEMM] = LC_TERM_GEMM, [LC_RATE_ATTN] = LC_TERM_ATTN,
                                               [LC_RATE_LOSS] = LC_TERM_LOSS, [LC_RATE_EW] = LC_TERM_ELEM,
                                               [LC_RATE_OPTIM] = LC_TERM_OPTIM};
  for (int c = 0; c < LC_RATE_NCLASS; c++) m[c] = meas->s[term_of[c]] / n;
  double *all = malloc(sizeof(double) * LC_RATE_NCLASS * (size_t)w->size); // every rank's: the slowest counts
  if (!all) return lc_fail(LC_ENOMEM, "out of memory for --calibrate-from-run");
  lc_status gs = lc_allgather(w, m, all, LC_RATE_NCLASS, LC_DT_F64);
  for (int q = 0; gs == LC_OK && q < w->size; q++)
    for (int c = 0; c < LC_RATE_NCLASS; c++) m[c] = all[q * LC_RATE_NCLASS + c] > m[c] ? all[q * LC_RATE_NCLASS + c] : m[c];
  free(all);
  LC_TRY(gs);
  lc_time_estimate e;
  lc_step_terms p;
  if (lc_train_predict(o, t, r, &e, 0) <= 0) return lc_fail(LC_EINVAL, "--calibrate-from-run: the time model has no "
                                                            "prediction for this run to correct: %s", lc_errmsg());
  lc_terms_predicted(&e, &p);
  double step = 0;
  for (int c = 0; c < LC_RATE_NCLASS; c++) step += m[c];
  char line[512];
  size_t k = 0;
  for (int c = 0; c < LC_RATE_NCLASS; c++) {
    const double pc = p.s[term_of[c]];
    if (!(m[c] > 0.005 * step) || !(pc > 0)) continue;
    lc_rates_scale(r, c, pc / m[c]);
    k += (size_t)snprintf(line + k, k < sizeof line ? sizeof line - k : 0, "%s%s x%.3f", k ? ", " : "",
                          lc_rate_class_name(c), pc / m[c]);
  }
  // The fp32 GEMM libraries on the shapes the first step ran (every rank times its own, as
  // loaded as the run is; rank 0's go into the file), for later runs: this one keeps its
  // library so that its numbers do not depend on a timing.
  lc_sgemm_table shapes;
  lc_sgemm_recorded(&shapes);
  int n_one = 0;
  LC_TRY(lc_comm_agree(w, lc_sgemm_measure(&shapes, 3)));
  for (int i = 0; i < shapes.n; i++) {
    const lc_sgemm_shape *x = &shapes.s[i];
    n_one += x->gflops[LC_SGEMM_ONEDNN] > 1.02 * x->gflops[LC_SGEMM_OPENBLAS];
    int j = 0;
    for (; j < r->gemm_shapes.n; j++) {
      const lc_sgemm_shape *y = &r->gemm_shapes.s[j];
      if (y->ta == x->ta && y->tb == x->tb && y->M == x->M && y->N == x->N && y->K == x->K) break;
    }
    if (j < LC_SGEMM_SHAPES) r->gemm_shapes.s[j] = *x; // (replaces an earlier measure of the same shape)
    if (j == r->gemm_shapes.n && j < LC_SGEMM_SHAPES) r->gemm_shapes.n++;
  }
  const double gain = lc_sgemm_gain(&shapes);
  lc_cpu_info cpu;
  lc_cpu_detect(&cpu);
  lc_cpu_describe(&cpu, r->cpu, sizeof r->cpu);
  r->warning[0] = 0;
  r->builtin = 0;
  char def[4096];
  const char *path = machine ? machine : lc_rates_cache_path(def, sizeof def);
  snprintf(r->source, sizeof r->source, "calibrated %s (%s; profile %d rank%s x %d thread%s; corrected by this run)",
           path, r->cpu, r->ranks, r->ranks > 1 ? "s" : "", r->threads, r->threads > 1 ? "s" : "");
  lc_status st = LC_OK;
  if (w->rank == 0) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    if (!machine && slash && dir[0]) st = lc_mkdir_p(dir);
    // Later runs with this file take the faster library per shape: the GEMM rates saved for
    // them by the gain this run's calls would have had (this run keeps OpenBLAS: its own
    // predictions keep the rates it measured).
    lc_rates sv = *r;
    if (gain < 1 && (r->from_run >> LC_RATE_GEMM & 1u)) lc_rates_scale(&sv, LC_RATE_GEMM, 1 / gain);
    if (st == LC_OK) st = lc_rates_save_machine(path, &sv);
    if (st == LC_OK && !machine) lc_rates_note_last(path);
    if (st == LC_OK)
      printf("time model: rates corrected by steps 2-%d of this run (%s) -> %s; the following steps are predicted with "
             "them\n", n + 1, k ? line : "nothing to correct", path);
    if (st == LC_OK)
      printf("fp32 GEMMs: OpenBLAS and oneDNN timed on the %d shapes of this run's first step: oneDNN faster on %d; later "
             "runs with %s use the faster for each (%.1f%% less GEMM time, priced in the saved rates)\n", shapes.n, n_one,
             path, 100 * (1 - gain));
  }
  return lc_comm_agree(w, st);
}

// base_model_name_or_path of DIR/adapter_config.json into out (LC_EFORMAT if absent or empty).
static lc_status read_base_name(const char *dir, char *out, size_t cap) {
  char p[1100], *txt = NULL;
  size_t len = 0;
  LC_TRY(lc_path_join(p, sizeof p, dir, "adapter_config.json"));
  LC_TRY(lc_read_file(p, 1 << 20, &txt, &len));
  cJSON *j = cJSON_ParseWithLength(txt, len);
  free(txt);
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "base_model_name_or_path");
  const int ok = cJSON_IsString(b) && b->valuestring[0] && strlen(b->valuestring) < cap;
  if (ok) strcpy(out, b->valuestring);
  cJSON_Delete(j);
  return ok ? LC_OK : lc_fail(LC_EFORMAT, "%s names no base model: resume with --model BASE", p);
}

static lc_status configure(lc_comm *w, lc_flag *flags, int nf, train_flags *F, lc_train_opts *o,
                           const char *ckpt_dir, lc_job_threads *jt, int *threads, int *model_dir) {
  int model_given = lc_args_find(flags, nf, "model")->seen;
  lc_status st = LC_OK;
  *model_dir = 0;
  if (F->resume && !model_given) {
    st = lc_hf_read_config(ckpt_dir, &o->cfg);
    // A LoRA checkpoint holds the adapters, not the base: the base's weights come from
    // where the first run had them (adapter_config.json's base_model_name_or_path).
    char ap[1100];
    lc_lora tmp;
    if (st == LC_OK && lc_path_join(ap, sizeof ap, ckpt_dir, "adapter_config.json") == LC_OK && lc_is_file(ap) &&
        lc_peft_read_config(ckpt_dir, &tmp) == LC_OK && read_base_name(ckpt_dir, F->base_model, sizeof F->base_model) == LC_OK) {
      F->model = F->base_model;
      *model_dir = lc_is_dir(F->model) || lc_gguf_is_model_path(F->model);
    }
  } else {
    *model_dir = lc_is_dir(F->model) || lc_gguf_is_model_path(F->model); // weights to load
    st = lc_cli_model(F->model, &o->cfg);
  }
  const int given_threads = lc_args_find(flags, nf, "threads")->seen;
  if (st == LC_OK && given_threads && F->threads < 1)
    st = lc_fail(LC_EINVAL, "--threads %d: give at least 1 thread per rank (or leave it out: SLURM_CPUS_PER_TASK, "
                 "OMP_NUM_THREADS, or the node's cores / its ranks)", F->threads);
  const int ckpt_auto = !F->ckpt || !strcmp(F->ckpt, "auto");
  if (st == LC_OK && !ckpt_auto) st = lc_ckpt_parse(F->ckpt, &o->mopts.ckpt);
  if (st == LC_OK) st = lc_cli_head_chunk(F->head_chunk, &o->head_chunk);
  if (st == LC_OK) st = lc_cli_threads(jt->threads, threads);
  if (st == LC_OK && F->mem_gib < 0) st = lc_fail(LC_EINVAL, "--mem-limit must be positive GiB");
  if (st == LC_OK && F->seq < 2) st = lc_fail(LC_EINVAL, "--seq %d is too short: use at least 2 tokens", F->seq);
  if (st == LC_OK && (F->mlp_tile < -1 || F->loss_tile < -1))
    st = lc_fail(LC_EINVAL, "--mlp-tile and --loss-tile must be >= 0 (0 = untiled)");
  if (st == LC_OK) st = lc_placement_parse(F->placement, &o->placement);
  if (st == LC_OK && (F->save_every < 0 || F->keep < 1))
    st = lc_fail(LC_EINVAL, "--save-every must be >= 0 and --keep >= 1");
  if (st == LC_OK && F->save_every > 0 && !F->save) st = lc_fail(LC_EINVAL, "--save-every needs --save DIR");
  if (st == LC_OK) st = lc_dtype_parse_user(F->save_dtype, "--save-dtype", &o->save_dtype);
  if (st == LC_OK) st = lc_dtype_parse_user(F->precision, "--precision", &o->mopts.precision);
  if (st == LC_OK) st = lc_cli_kernels(F->kernels);
  if (st == LC_OK) st = lc_device_check(F->device);
  o->device = F->device;
  if (st == LC_OK && F->log_every < 1)
    st = lc_fail(LC_EINVAL, "--log-every %d: print progress every N >= 1 steps", F->log_every);
  if (st == LC_OK && (F->eval_every < 0 || F->eval_samples < 1))
    st = lc_fail(LC_EINVAL, "--eval-every must be >= 0 and --eval-samples >= 1");
  if (st == LC_OK && !(F->timeout >= 0))
    st = lc_fail(LC_EINVAL, "--timeout %g: give seconds > 0 (or 0 to run without the watchdog)", F->timeout);
  if (st == LC_OK && F->timeout > 0 && F->timeout < 1)
    st = lc_fail(LC_EINVAL, "--timeout %g: at least 1 second (heartbeats go out every second)", F->timeout);
  if (st == LC_OK && F->skip_nonfinite < 0)
    st = lc_fail(LC_EINVAL, "--skip-nonfinite %d: give how many non-finite steps in a row may be skipped (>= 0)",
                 F->skip_nonfinite);
  if (st == LC_OK) st = lc_zero_check(F->zero, F->zero_group, lc_args_find(flags, nf, "zero-group")->seen, w->size);
  if (st == LC_OK && F->vocab_slice < 0)
    st = lc_fail(LC_EINVAL, "--vocab-slice %d: give vocabulary rows per slice (>= 1), or 0 for whole matrices",
                 F->vocab_slice);
  if (st == LC_OK && F->offload_optimizer && (!F->device || !strcmp(F->device, "cpu")))
    st = lc_fail(LC_EINVAL, "--offload-optimizer moves the model states from a GPU into host memory; with --device cpu they "
                 "are in host memory already: drop --offload-optimizer (or add --device cuda)");
  if (st == LC_OK && F->offload_optimizer && F->vocab_slice > 0)
    st = lc_fail(LC_EINVAL, "--offload-optimizer with --vocab-slice is not supported: drop one of them");
  if (st == LC_OK && F->offload_optimizer && F->lora > 0)
    st = lc_fail(LC_EINVAL, "--offload-optimizer with --lora: the adapters' states are small, keep them on the device: "
                 "drop --offload-optimizer");
  if (st == LC_OK && lc_args_find(flags, nf, "attn-window")->seen && F->attn_window < 1)
    st = lc_fail(LC_EINVAL, "--attn-window %d: give the number of most recent tokens each token sees (>= 1)",
                 F->attn_window);
  // A resumed run keeps the checkpoint's RoPE: the flags apply to a model's first run.
  if (st == LC_OK && (F->rope_theta || F->rope_scaling) && F->resume && !model_given)
    st = lc_fail(LC_EINVAL, "--rope-theta / --rope-scaling change the model's positions: a resumed run keeps the "
                 "checkpoint's (its config.json); leave them out with --resume");
  if (st == LC_OK) st = lc_cli_rope(&o->cfg, F->rope_theta, F->rope_scaling);
  if (st == LC_OK) st = lora_settings(flags, nf, F, F->resume ? ckpt_dir : NULL, &o->cfg.lora);
  if (st == LC_OK && F->base_dtype && o->cfg.lora.rank == 0)
    st = lc_fail(LC_EINVAL, "--base-dtype is how a LoRA run holds its frozen base: add --lora R");
  if (st == LC_OK) st = base_blocks(F, o, *model_dir);
  if (st == LC_OK && o->cfg.lora.base_bf16 && o->mopts.precision != LC_DT_BF16)
    st = lc_fail(LC_EINVAL, "--base-dtype bf16 computes in bf16: add --precision bf16 (or hold the base in fp32)");
  if (st == LC_OK && o->cfg.lora.rank > 0 && o->save_dtype != LC_DT_F32)
    st = lc_fail(LC_EINVAL, "--save-dtype %s with LoRA: the adapters are saved in fp32 (they are small, and the "
                 "base is not saved); leave --save-dtype out", F->save_dtype);
  if (st != LC_OK) return st;
  o->base_name = F->model;
  if (lc_args_find(flags, nf, "attn-window")->seen) o->cfg.sliding_window = F->attn_window;
  o->mopts.offload_dir = F->offload;
  LC_TRY(lc_cli_offload_depth(F->offload_depth, F->offload, &o->mopts.offload_depth));
  o->mopts.vocab_slice = F->vocab_slice;
  o->mopts.offload_optimizer = F->offload_optimizer;
  const int mlp_auto = F->mlp_tile < 0, loss_auto = F->loss_tile < 0;
  o->mopts.mlp_tile = mlp_auto ? lc_memplan_auto_mlp_tile(F->seq) : F->mlp_tile;
  // The loss tile's logits are [tile, vocab], or [tile, slice] with vocabulary slices.
  o->mopts.loss_tile = loss_auto ? lc_memplan_auto_loss_tile_for(&o->cfg, F->seq, lc_vocab_sliced(&o->mopts, o->cfg.vocab)
                                                                          ? F->vocab_slice : o->cfg.vocab)
                                 : F->loss_tile;
  o->data_spec = F->data;
  o->seq = F->seq;
  o->batch = F->batch;
  o->steps = F->steps;
  o->warmup = F->warmup;
  o->lr = F->lr;
  o->lr_min = F->lr_min >= 0 ? F->lr_min : F->lr / 10.0f;
  o->wd = F->wd;
  o->clip = F->clip;
  o->seed = (uint64_t)F->seed;
  o->mem_cap = (size_t)(F->mem_gib * GIB);
  // --head-chunk auto fits the predicted peak into --mem-limit, else this node's memory
  // shared by its ranks (rank 0's choice holds for all).
  o->head_chunk_budget = o->mem_cap ? o->mem_cap : lc_cli_default_mem_cap() / (size_t)(jt->local_ranks > 0 ? jt->local_ranks : 1);
  o->hp = F->hp;
  o->cp = F->cp;
  o->window = F->window ? F->window : F->cp;
  o->mopts.zero = F->zero;
  o->mopts.zero_group = F->zero_group ? F->zero_group : w->size;
  o->pack = F->pack;
  if (F->drop_long && !F->pack) return lc_fail(LC_EINVAL, "--drop-long leaves out documents too long to pack: it needs --pack");
  o->drop_long = F->drop_long;
  o->skip_nonfinite = F->skip_nonfinite;
  LC_TRY(lc_cp_layout_parse(F->cp_layout ? F->cp_layout : (o->pack || o->cfg.sliding_window ? "balanced" : "zigzag"),
                            &o->mopts.cp_layout));
  const size_t budget = o->head_chunk_budget;
  const int hc = o->head_chunk > 0 ? o->head_chunk : 0;
  int fits = 1;
  if (ckpt_auto) LC_TRY(auto_policy(w, o, budget, hc, &fits));
  // --mlp-tile auto: untiled (backward then reads the forward's gate/up/h instead of
  // recomputing them per tile) when that predicted peak fits the same budget too.
  lc_mem_estimate e;
  if (F->mlp_tile < 0 && o->mopts.mlp_tile > 0) {
    lc_model_opts m = o->mopts;
    m.mlp_tile = 0;
    int32_t untile = lc_memplan_predict_hc(&o->cfg, &m, o->seq, o->hp, o->cp, o->window, hc, 0, &e) == LC_OK &&
                     e.total <= budget;
    LC_TRY(lc_bcast(w, &untile, 1, LC_DT_I32, 0));
    if (untile) o->mopts.mlp_tile = 0;
  }
  // The settings table's word on the choice: the predicted peak of what was chosen.
  if (ckpt_auto && lc_memplan_predict_hc(&o->cfg, &o->mopts, o->seq, o->hp, o->cp, o->window, hc, 0, &e) == LC_OK) {
    char a[32], b[32];
    lc_fmt_bytes(a, sizeof a, (double)e.total), lc_fmt_bytes(b, sizeof b, (double)budget);
    snprintf(F->ckpt_note, sizeof F->ckpt_note, fits ? " (auto: the fastest policy whose predicted peak, %s, fits %s per rank)"
                                                     : " (auto: no policy fits %2$s per rank; full needs the least, %1$s)",
             a, b);
  } else if (ckpt_auto) {
    snprintf(F->ckpt_note, sizeof F->ckpt_note, " (auto)"); // an invalid layout: the trainer says why
  }
  return LC_OK;
}

// --checkpoint auto: the fastest policy whose predicted peak fits the budget --head-chunk
// auto uses (--mem-limit, else this node's memory over its ranks); rank 0's choice holds.
static lc_status auto_policy(lc_comm *w, lc_train_opts *o, size_t budget, int hc, int *fits) {
  size_t peak = 0;
  lc_ckpt_policy pol = LC_CKPT_SELECTIVE; // (an invalid layout: the trainer says why)
  if (lc_memplan_auto_ckpt(&o->cfg, &o->mopts, o->seq, o->hp, o->cp, o->window, hc, 0, budget, &pol, &peak, fits) !=
      LC_OK)
    pol = LC_CKPT_SELECTIVE, *fits = 1;
  int32_t p32 = (int32_t)pol;
  LC_TRY(lc_bcast(w, &p32, 1, LC_DT_I32, 0));
  o->mopts.ckpt = (lc_ckpt_policy)p32;
  return LC_OK;
}

// The "long jobs" lines of the settings table.
static void job_lines(char *buf, size_t cap, const train_flags *F, lc_dtype save_dtype, int world, int watchdog) {
  char wd[300];
  if (world == 1) snprintf(wd, sizeof wd, "off (one process)");
  else if (!watchdog) snprintf(wd, sizeof wd, "off (--timeout 0)");
  else
    snprintf(wd, sizeof wd, "--timeout %g s: a rank silent for %.1f s (heartbeats every %.1f s, from a thread of "
             "each rank), or a collective every rank waits in that long, ends every rank within %g s with exit code %d",
             F->timeout, lc_watchdog_silence(F->timeout), lc_watchdog_period(F->timeout), F->timeout, LC_EXIT_PEER);
  char nf[96];
  if (F->skip_nonfinite) snprintf(nf, sizeof nf, "skip the update, at most %d in a row", F->skip_nonfinite);
  else snprintf(nf, sizeof nf, "stop (--skip-nonfinite 0)");
  int k = snprintf(buf, cap,
                   "  %-14s watchdog %s\n"
                   "  %-14s SIGTERM/SIGUSR1: finish the step, %s, exit code %d; non-finite loss or gradient: %s\n",
                   "long jobs", wd, "", F->save ? "save a checkpoint" : "no --save: nothing saved", LC_EXIT_PREEMPTED, nf);
  if (F->save && k > 0 && (size_t)k < cap) {
    char every[48] = "at the end";
    if (F->save_every) snprintf(every, sizeof every, "every %d steps and at the end", F->save_every);
    const int bf = save_dtype == LC_DT_BF16;
    snprintf(buf + k, cap - (size_t)k, "  %-14s %s, %s, newest %d kept; model.safetensors in %s%s\n", "checkpoints",
             F->save, every, F->keep, bf ? "bf16" : "fp32", bf ? " (fp32 master weights in optimizer.safetensors)" : "");
  }
}

// Errors after set-up may come from one rank only: end every rank now (no hang).
static int fail_everywhere(lc_comm *w, int code) {
  fprintf(stderr, "longctx: error (rank %d, step %ld): %s\n", w->rank, lc_run_step(), lc_errmsg());
  fflush(stderr);
  if (w->size > 1) MPI_Abort(MPI_COMM_WORLD, code);
  return code;
}

static int run_train(int argc, char **argv, lc_flag *flags, int nf, train_flags *Fp, lc_comm **world_out) {
  lc_status st = lc_comm_mpi_world(world_out);
  if (st != LC_OK) {
    lc_cli_error(lc_errmsg());
    return LC_EXIT_ERROR;
  }
  lc_comm *w = *world_out;
  const int rank = w->rank;
  lc_run_set_rank(rank);
  const char *var = NULL;
  int want = lc_job_launcher_tasks(&var);
  if (want > 1 && w->size != want) {
    fprintf(stderr, "longctx: error: the launcher started %d processes (%s) but MPI reports a world of %d: the "
                    "launcher and longctx come from different MPI implementations, or srun lacks --mpi=pmix; use "
                    "the launcher of the MPI longctx was built with\n", want, var, w->size);
    return LC_EXIT_USAGE;
  }
  lc_train_opts o;
  lc_train_opts_init(&o);
  int threads = 0, model_dir = 0;
  st = lc_args_parse(argc, argv, flags, nf); // writes through flags[] into *Fp
  train_flags F = *Fp;
  // Threads per rank: the ranks on this node share its cores (MPI says which ranks share
  // a node when no launcher variable does).
  int mpi_local = 0;
  if (w->size > 1) {
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
      MPI_Comm_size(node, &mpi_local);
      MPI_Comm_free(&node);
    }
  }
  lc_job_threads jt;
  lc_job_threads_choose(lc_args_find(flags, nf, "threads")->seen && F.threads > 0 ? F.threads : 0, mpi_local, &jt);
  // The checkpoint to resume (checked against its checksums) and the model.
  char ckpt_dir[4096] = "", resume_note[1024] = "";
  if (st == LC_OK && F.resume) st = resolve_resume(w, F.resume, ckpt_dir, sizeof ckpt_dir, resume_note);
  if (st == LC_OK) st = configure(w, flags, nf, &F, &o, ckpt_dir, &jt, &threads, &model_dir);
  // The kernel level depends on each rank's CPU: a forced level may fail on one rank only.
  st = lc_comm_agree(w, st);
  if (st == LC_OK && !strcmp(F.kernels, "auto")) st = agree_kernel_level(w);
  if (st != LC_OK) {
    if (rank == 0) lc_cli_error(lc_errmsg());
    return LC_EXIT_USAGE;
  }
  char warn[512];
  if (rank == 0 && lc_job_threads_warning(&jt, warn, sizeof warn)) {
    fprintf(stderr, "%s\n", warn);
    fflush(stderr);
  }
  double peak_gflops = F.peak_gflops > 0 ? F.peak_gflops : 117.0 * threads * w->size;

  lc_trainer tr;
  st = lc_trainer_init(&tr, &o, w);
  // Reading files may fail on one rank only: every rank learns it (rank 0 reports).
  if (st == LC_OK && model_dir) st = lc_comm_agree(w, (lc_gguf_is_model_path(F.model) ? lc_gguf_load_weights : lc_hf_load_weights)(F.model, &tr.model));
  if (st == LC_OK && F.lora_from) st = lc_comm_agree(w, lc_peft_load_weights(F.lora_from, &tr.model));
  if (st == LC_OK && F.resume) st = lc_comm_agree(w, lc_checkpoint_load(&tr, ckpt_dir));
  if (st == LC_OK && tr.step > o.steps)
    st = lc_fail(LC_EINVAL, "the checkpoint is at step %ld, beyond --steps %ld; raise --steps", tr.step, o.steps);
  if (st == LC_OK && (F.calib_run < 0 || F.calib_run == 1 || F.calib_run > o.steps - tr.step))
    st = lc_fail(LC_EINVAL, "--calibrate-from-run %d: give the steps after which to correct the rates, from 2 (the first "
                 "step warms up) to the %ld steps this run takes; 0: off", F.calib_run, o.steps - tr.step);
  if (st == LC_OK && F.eval_every > 0 && (tr.data.kind == LC_DATA_BYTES || tr.data.kind == LC_DATA_TOKENS))
    st = lc_fail(LC_EINVAL, "--eval-every needs held-out data: use task:passkey or task:copy");
  // Before the first step: the save directory takes a checkpoint (rank 0 writes them).
  if (st == LC_OK && F.save)
    st = lc_comm_agree(w, rank == 0 ? lc_job_check_save_dir(F.save, lc_checkpoint_bytes(&o.cfg, o.save_dtype)) : LC_OK);
  lc_rates rates; // the time model's, for the predicted step time beside the measured one
  if (st == LC_OK) st = lc_comm_agree(w, lc_cli_rates(F.machine, NULL, w->size, threads, &rates));
  if (st == LC_OK) lc_sgemm_set_choice(&rates.gemm_shapes); // (every rank reads the same file: the same choices)
  if (st != LC_OK) {
    // Layout and input errors are found identically on every rank; rank 0 reports.
    if (rank == 0) lc_cli_error(lc_errmsg());
    if (tr.be) lc_trainer_free(&tr);
    return LC_EXIT_USAGE;
  }
  lc_watchdog *dog = NULL;
  if (w->size > 1 && F.timeout > 0 &&
      lc_watchdog_start(&dog, F.timeout, tr.grid.dp, tr.grid.cp, tr.grid.hp, tr.grid.placement) != LC_OK) {
    if (rank == 0) fprintf(stderr, "longctx: warning: watchdog off: %s\n", lc_errmsg());
    dog = NULL;
  }
  lc_job_catch_signals();
  char extra[1200];
  job_lines(extra, sizeof extra, &F, o.save_dtype, w->size, dog != NULL);
  if (rank == 0 && resume_note[0]) printf("%s\n", resume_note);
  if (rank == 0 && F.resume) printf("resumed from %s at step %ld\n", ckpt_dir, tr.step);
  if (rank == 0 && model_dir) printf("loaded weights from %s\n", F.model);
  if (rank == 0) lc_train_print_settings(&o, &tr, threads, F.ckpt_note, F.mlp_tile < 0, F.loss_tile < 0, extra);
  if (rank == 0) lc_train_print_prediction(&o, &tr, &rates);
  FILE *jf = NULL;
  int bad_log = rank == 0 && F.log_json && !(jf = fopen(F.log_json, "w"));
  double bad_d = bad_log;
  lc_allreduce_sum(w, &bad_d, 1, LC_DT_F64);
  if (bad_d > 0) {
    if (rank == 0)
      fprintf(stderr, "longctx: error: cannot write --log-json %s; check the directory exists\n", F.log_json);
    lc_watchdog_stop(dog);
    lc_trainer_free(&tr);
    return LC_EXIT_USAGE;
  }
  int rc = LC_EXIT_OK;
  const int masked = tr.data.kind == LC_DATA_TOKENS && tr.data.tok.mask;
  lc_progress prog = {.tty = lc_stdout_is_terminal(), .masked = masked, .t0 = lc_now(), .first_step = tr.step};
  double all_tok = 0, all_counted = 0, all_s = 0; // the run's steps, for the summary
  double t_start = lc_now();
  lc_step_metrics m;
  long saved_at = -1;
  const long first_step = tr.step;
  int predict = rank == 0 && !rates.builtin; // (uncalibrated: no number, train_report.c)
  lc_time_estimate est0, est;
  double pred0 = predict ? lc_train_predict(&o, &tr, &rates, &est0, 0) : 0;
  lc_step_terms calib_m; // --calibrate-from-run: the measured terms of the steps after the first
  memset(&calib_m, 0, sizeof calib_m);
  int calib_n = 0;
  double meas_sum = 0, pred_sum = 0;
  int n_timed = 0;
  lc_step_terms tsum_m, tsum_p, tm, tp; // per-term sums over the timed steps
  memset(&tsum_m, 0, sizeof tsum_m), memset(&tsum_p, 0, sizeof tsum_p), memset(&tp, 0, sizeof tp);
  int terms_timed = 0;
  // --profile: the backend's per-op totals after the first step and at the end
  const int nops = lc_backend_op_count();
  double *prof0 = calloc((size_t)nops, sizeof(double)), *prof1 = calloc((size_t)nops, sizeof(double));
  uint64_t *calls0 = calloc((size_t)nops, sizeof(uint64_t)), *calls1 = calloc((size_t)nops, sizeof(uint64_t));
  if (!prof0 || !prof1 || !calls0 || !calls1) F.profile = 0;
  for (long s = tr.step; s < o.steps; s++) {
    lc_sgemm_record(F.calib_run > 0 && s == first_step); // (--calibrate-from-run: the shapes of the first step)
    st = lc_trainer_step(&tr, &m);
    lc_sgemm_record(0);
    // (the prediction depends on the step only through its sample's attention bounds)
    if (st == LC_OK && predict) {
      est = est0;
      m.predicted_step_s = tr.lo ? lc_train_predict(&o, &tr, &rates, &est, 1) : pred0;
      lc_terms_predicted(&est, &tp);
    }
    if (st == LC_OK && s == first_step && F.profile) lc_backend_op_totals(tr.be, prof0, calls0);
    if (st == LC_OK && s > first_step) { // the first warms up
      meas_sum += m.seconds, pred_sum += m.predicted_step_s, n_timed++;
      if (lc_terms_measured(&m, &tm)) {
        terms_timed = 1;
        for (int i = 0; i < LC_TERM_N; i++) tsum_m.s[i] += tm.s[i], tsum_p.s[i] += tp.s[i];
        if (F.calib_run > 0)
          for (int i = 0; i < LC_TERM_N; i++) calib_m.s[i] += tm.s[i];
        calib_n += F.calib_run > 0;
      }
    }
    // --calibrate-from-run N: after step N, the rates corrected by what this run measured;
    // the steps after are predicted with them (and the summary covers those steps alone).
    if (st == LC_OK && F.calib_run > 0 && s + 1 == first_step + F.calib_run) {
      st = calibrate_from_run(w, &o, &tr, &rates, &calib_m, calib_n, F.machine, F.calib_run);
      if (st != LC_OK) tr.failed_everywhere = 1; // (agreed: every rank ends alike)
      if (st == LC_OK) {
        predict = rank == 0;
        pred0 = predict ? lc_train_predict(&o, &tr, &rates, &est0, 0) : 0;
        meas_sum = pred_sum = 0, n_timed = 0;
        memset(&tsum_m, 0, sizeof tsum_m), memset(&tsum_p, 0, sizeof tsum_p);
        terms_timed = 0;
      }
    }
    if (st != LC_OK && !tr.failed_everywhere) return fail_everywhere(w, LC_EXIT_ERROR);
    if (st != LC_OK) { // found alike on every rank: one line, an orderly end
      if (rank == 0) lc_cli_error(lc_errmsg());
      rc = LC_EXIT_ERROR;
      break;
    }
    all_tok += (double)m.tokens, all_counted += (double)m.counted, all_s += m.seconds;
    if (rank == 0) {
      if (m.skipped && m.counted == 0) {
        lc_progress_break(&prog);
        printf("warning: step %ld: no target counts in the whole batch (every token masked): update skipped\n", m.step);
      } else if (m.skipped) {
        lc_progress_break(&prog);
        printf("step %ld: loss or gradient not finite: update skipped (%d in a row, --skip-nonfinite %d)\n", m.step,
               tr.skipped_in_a_row, F.skip_nonfinite);
      }
      if (prog.tty || m.step % F.log_every == 0 || m.step == o.steps) lc_progress_line(&prog, &m, o.steps);
      if (jf) lc_train_log_json(jf, &m, peak_gflops, predict ? &tp : NULL);
    }
    // A signal reaches the ranks at different moments: they agree after each step.
    double sig = lc_job_signal();
    if (w->size > 1 && lc_allreduce_sum(w, &sig, 1, LC_DT_F64) != LC_OK) return fail_everywhere(w, LC_EXIT_ERROR);
    const int stop = sig > 0;
    if (F.save && ((F.save_every > 0 && m.step % F.save_every == 0) || m.step == o.steps || stop)) {
      st = lc_checkpoint_save(&tr, F.save, F.keep);
      if (st != LC_OK) {
        if (rank == 0) lc_cli_error(lc_errmsg());
        rc = LC_EXIT_ERROR;
        break;
      }
      saved_at = m.step;
      if (rank == 0) {
        lc_progress_break(&prog);
        printf("saved %s/checkpoint-%ld\n", F.save, m.step);
      }
    }
    if (stop) {
      if (rank == 0) {
        lc_progress_break(&prog);
        printf("stopped by a signal after step %ld: %s; exit code %d\n", m.step,
               saved_at == m.step ? "resume with --resume and the same --save directory" : "no --save, nothing saved",
               LC_EXIT_PREEMPTED);
        fflush(stdout);
      }
      rc = LC_EXIT_PREEMPTED;
      break;
    }
    if (F.eval_every > 0 && (m.step % F.eval_every == 0 || m.step == o.steps)) {
      double el = 0, acc = 0;
      st = lc_trainer_eval(&tr, F.eval_samples, &el, &acc);
      if (st != LC_OK) return fail_everywhere(w, LC_EXIT_ERROR);
      if (rank == 0) {
        lc_progress_break(&prog);
        printf("eval  %5ld | held-out loss %.4f | accuracy %.1f%% (%d samples)\n", m.step, el, 100 * acc,
               F.eval_samples);
        fflush(stdout);
        if (jf) {
          fprintf(jf, "{\"step\":%ld,\"eval_loss\":%.6f,\"eval_accuracy\":%.4f,\"eval_samples\":%d}\n", m.step, el,
                  acc, F.eval_samples);
          fflush(jf);
        }
      }
    }
  }
  if (rank == 0) lc_progress_break(&prog);
  if (rc == LC_EXIT_OK && o.steps > 0 && rank == 0) {
    char b[32];
    const lc_arena *dev = tr.be->arena; // the device's (the CPU's: the host's)
    printf("done: %ld steps in %.1f s; peak memory%s%s %s:", o.steps, lc_now() - t_start, dev != &tr.arena ? " on " : "",
           dev != &tr.arena ? tr.be->name : "", lc_fmt_bytes(b, sizeof b, (double)dev->peak_total));
    for (int c = 0; c < LC_MEM_NCAT; c++)
      printf(" %s %s%s", lc_mem_cat_name((lc_mem_cat)c), lc_fmt_bytes(b, sizeof b, (double)dev->peak[c]),
             c + 1 < LC_MEM_NCAT ? "," : "\n");
    if (dev != &tr.arena) printf("host memory peak %s\n", lc_fmt_bytes(b, sizeof b, (double)tr.arena.peak_total));
    if (all_s > 0) {
      printf("tokens: %.0f in %.2f s of steps (%.0f tok/s)", all_tok, all_s, all_tok / all_s);
      if (masked) // what the loss learned from: the assistant's tokens of conversations
        printf("; %.0f counted by the loss mask (%.1f%%, %.0f counted tok/s)", all_counted,
               all_tok > 0 ? 100 * all_counted / all_tok : 0.0, all_counted / all_s);
      printf("\n");
    }
    if (n_timed > 0 && pred_sum > 0)
      printf("time model: predicted %.4g s per step, measured %.4g s (mean of %d step%s after the first): %+.1f%%\n",
             pred_sum / n_timed, meas_sum / n_timed, n_timed, n_timed > 1 ? "s" : "", 100 * (pred_sum / meas_sum - 1));
    else if (n_timed > 0 && rates.builtin)
      printf("time model: measured %.4g s per step (mean of %d step%s after the first); no prediction without this "
             "machine's rates: `longctx calibrate`\n", meas_sum / n_timed, n_timed, n_timed > 1 ? "s" : "");
    if (n_timed > 0 && terms_timed) lc_terms_print(&tsum_m, predict ? &tsum_p : NULL, n_timed);
    if (n_timed > 0 && F.profile) {
      lc_backend_op_totals(tr.be, prof1, calls1);
      lc_train_print_profile(prof0, calls0, prof1, calls1, nops, n_timed, meas_sum / n_timed, tr.be->synchronous);
    } else if (F.profile) {
      printf("profile: no steps after the first to profile (use --steps 2 or more)\n");
    }
  }
  free(prof0), free(prof1), free(calls0), free(calls1);
  if (jf) fclose(jf);
  lc_watchdog_stop(dog); // every rank gets here: the step loop's failures that may be on one rank abort
  lc_trainer_free(&tr);
  return rc;
}

int lc_cmd_train(int argc, char **argv) {
  train_flags F = {.model = "tiny", .data = "task:copy", .ckpt = NULL, .log_json = NULL,
                   .seq = 256, .batch = 1, .threads = -1, .mlp_tile = -1, .loss_tile = -1,
                   .steps = 100, .warmup = 10, .seed = 1, .lr = 1e-3f, .lr_min = -1.0f,
                   .wd = 0.1f, .clip = 1.0f, .mem_gib = 0.0f, .peak_gflops = 0.0f,
                   .placement = "head-first", .hp = 1, .cp = 1, .window = 0,
                   .eval_every = 0, .eval_samples = 64, .log_every = 1, .save = NULL, .resume = NULL,
                   .save_every = 0, .keep = 2, .zero = 0, .zero_group = 0, .pack = 0, .attn_window = 0,
                   .cp_layout = NULL, .timeout = 30.0f, .skip_nonfinite = 0, .save_dtype = "fp32", .precision = "fp32",
                   .kernels = "auto", .head_chunk = "all", .device = "cpu"};
  lc_flag flags[] = {
      {"model", LC_ARG_STR, &F.model, "a preset (tiny, demo, bench-s), a Hugging Face model directory or a GGUF file (default tiny)", 0},
      {"data", LC_ARG_STR, &F.data, "task:copy, task:passkey, a token file (tools/prepare_data.py) or a file read as bytes (default task:copy)", 0},
      {"seq", LC_ARG_INT, &F.seq, "tokens per sequence (default 256)", 0},
      {"batch", LC_ARG_INT, &F.batch, "sequences per step (default 1)", 0},
      {"steps", LC_ARG_LONG, &F.steps, "optimizer steps (default 100)", 0},
      {"lr", LC_ARG_FLOAT, &F.lr, "peak learning rate (default 1e-3; 0 = evaluate only)", 0},
      {"lr-min", LC_ARG_FLOAT, &F.lr_min, "final learning rate of the cosine (default lr/10)", 0},
      {"warmup", LC_ARG_LONG, &F.warmup, "linear warmup steps (default 10)", 0},
      {"wd", LC_ARG_FLOAT, &F.wd, "AdamW weight decay on matrices (default 0.1)", 0},
      {"clip", LC_ARG_FLOAT, &F.clip, "global gradient-norm clip, 0 = off (default 1.0)", 0},
      {"seed", LC_ARG_LONG, &F.seed, "seed of weights and data (default 1)", 0},
      {"threads", LC_ARG_INT, &F.threads, "OpenMP/BLAS threads per rank (default: SLURM_CPUS_PER_TASK, OMP_NUM_THREADS, else the node's cores / its ranks; a warning when ranks x threads exceed the cores)", 0},
      {"hp", LC_ARG_INT, &F.hp, "head-parallel (Ulysses) degree (default 1)", 0},
      {"cp", LC_ARG_INT, &F.cp, "context-parallel (ring) degree (default 1)", 0},
      {"ring-window", LC_ARG_INT, &F.window, "inner ring size of the double ring, divides cp (default cp)", 0},
      {"head-chunk", LC_ARG_STR, &F.head_chunk, LC_CLI_HEAD_CHUNK_HELP, 0},
      {"placement", LC_ARG_STR, &F.placement, "head-first | context-first (default head-first)", 0},
      {"calibrate-from-run", LC_ARG_INT, &F.calib_run, "after N steps (N >= 2: the first warms up) correct the time model's "
       "rates by this run's measured terms (GEMMs, attention, loss, element-wise, optimizer), write them into the machine "
       "file (--machine, or the default one calibrate writes) and predict the following steps with them; 0: off", 0},
      {"profile", LC_ARG_BOOL, &F.profile, "at the end, the backend's ops one by one: calls, seconds and share of the step per step (mean of the steps after the first; ops timed where the device runs them synchronously, the CPU)", 0},
      {"pack", LC_ARG_BOOL, &F.pack, "fill each sequence with whole documents (a token file with a document index, or task:copy): each token sees only its own document, positions restart per document", 0},
      {"drop-long", LC_ARG_BOOL, &F.drop_long, "with --pack: leave out documents longer than --seq (counted in the settings table) instead of cutting them into --seq pieces", 0},
      {"rope-theta", LC_ARG_STR, &F.rope_theta, LC_CLI_ROPE_THETA_HELP, 0},
      {"rope-scaling", LC_ARG_STR, &F.rope_scaling, LC_CLI_ROPE_SCALING_HELP, 0},
      {"attn-window", LC_ARG_INT, &F.attn_window, "sliding-window attention: each token sees at most the N most recent tokens of its document (default: the model's sliding_window, else unlimited)", 0},
      {"cp-layout", LC_ARG_STR, &F.cp_layout, "zigzag | balanced: how a sequence is cut over the context ranks (default: balanced with --pack or a window, else zigzag)", 0},
      {"zero", LC_ARG_INT, &F.zero, "ZeRO stage: 0 replicated, 1 AdamW moments sharded, 2 + gradients, 3 + weights (default 0)", 0},
      {"zero-group", LC_ARG_INT, &F.zero_group, "ranks per zero group (consecutive; divides the world): each group holds one copy of the states split this many ways, groups are replicas (default: the whole world)", 0},
      {"checkpoint", LC_ARG_STR, &F.ckpt, "auto | none | selective | full: what each layer keeps for backward (none: everything, no recompute; selective: attention's output and state; full: its input only). auto (default): the fastest whose predicted peak fits --mem-limit, else this node's memory over its ranks", 0},
      {"offload-checkpoints", LC_ARG_STR, &F.offload, "keep layer checkpoints in this directory instead of RAM: written by a thread as each layer's forward completes it, read back ahead of its backward, removed after use; RAM then holds --offload-depth layers' checkpoints (default: RAM)", 0},
      {"offload-depth", LC_ARG_STR, &F.offload_depth, LC_CLI_OFFLOAD_DEPTH_HELP, 0},
      {"offload-optimizer", LC_ARG_BOOL, &F.offload_optimizer, "keep the model states (fp32 master weights, gradients, AdamW moments) in host memory and run AdamW on the CPU cores; the device holds each unit's compute weights while it is used and its gradient until backward is done with it (a device other than the CPU: --device cuda, or private in tests; not with --lora or --vocab-slice)", 0},
      {"vocab-slice", LC_ARG_INT, &F.vocab_slice, "vocabulary rows per slice: the embedding and the LM head are used (under ZeRO 3 gathered) and their gradients reduced a slice of rows at a time, the loss merging its log-sum-exp across slices, so no rank holds a whole [vocab, dim] matrix or gradient; costs one more LM-head GEMM (default 0: whole)", 0},
      {"mlp-tile", LC_ARG_INT, &F.mlp_tile, "tokens per MLP tile, 0 = untiled (default auto: untiled when the predicted peak fits the memory --checkpoint auto uses, else 1024-token tiles above S = 1024)", 0},
      {"loss-tile", LC_ARG_INT, &F.loss_tile, "tokens per logits+loss tile, 0 = untiled (default: auto)", 0},
      {"mem-limit", LC_ARG_FLOAT, &F.mem_gib, "cap on the arena in GiB: clean error beyond it (default none)", 0},
      {"peak-gflops", LC_ARG_FLOAT, &F.peak_gflops, "peak GFLOP/s of the whole job for mfu (default 117 per thread per rank)", 0},
      {"log-every", LC_ARG_INT, &F.log_every, "progress line every N steps when not on a terminal (on one, a status line is rewritten every step) (default 1)", 0},
      {"log-json", LC_ARG_STR, &F.log_json, "write one JSON object per step to this file", 0},
      {"machine", LC_ARG_STR, &F.machine, "rates for the predicted step time (longctx calibrate --out FILE; default: ~/.cache/longctx/machine.json when it exists, else built-in rates)", 0},
      {"save", LC_ARG_STR, &F.save, "write checkpoints (HF model + optimizer + state; with --lora PEFT's adapter files instead of the model) under this directory", 0},
      {"save-every", LC_ARG_INT, &F.save_every, "checkpoint every N steps (default: only at the end)", 0},
      {"precision", LC_ARG_STR, &F.precision, "fp32 | bf16: bf16 rounds GEMM operands, attention inputs and layer checkpoints to bf16 (checkpoints take half the memory); master weights, gradients, AdamW, norms, softmax and loss stay fp32 (default fp32; the settings table says what bf16 costs on this CPU)", 0},
      {"kernels", LC_ARG_STR, &F.kernels, LC_CLI_KERNELS_HELP, 0},
      {"device", LC_ARG_STR, &F.device, "where the model's states and step run: cpu (default), cuda or cuda:N (an NVIDIA GPU, builds with the CUDA backend; ranks may share one), or private (tests: buffers host code cannot reach)", 0},

      {"lora", LC_ARG_INT, &F.lora, "LoRA: train rank-R adapters beside the target projections of a frozen base (its weights, embedding, LM head and norms get no gradients or AdamW moments); checkpoints hold PEFT's adapter_model.safetensors + adapter_config.json (default 0: train every weight)", 0},
      {"lora-alpha", LC_ARG_FLOAT, &F.lora_alpha, "the adapters' scale is alpha / R (default R: a scale of 1)", 0},
      {"lora-targets", LC_ARG_STR, &F.lora_targets, "the adapted projections, comma-separated: q,k,v,o,gate,up,down or all (default all)", 0},
      {"lora-rslora", LC_ARG_BOOL, &F.lora_rslora, "rank-stabilised scale alpha / sqrt(R) (PEFT's use_rslora)", 0},
      {"lora-from", LC_ARG_STR, &F.lora_from, "start from the PEFT LoRA adapter in this directory (its r, alpha and targets unless given, which must agree)", 0},
      {"lora-dropout", LC_ARG_FLOAT, &F.lora_dropout, "dropout on the adapters' input in [0, 1) (PEFT's lora_dropout; "
                                                       "default 0, or the adapter's with --lora-from/--resume)", 0},
      {"base-dtype", LC_ARG_STR, &F.base_dtype, "how a LoRA run holds the frozen base: fp32 (4 bytes per weight; the default for an HF directory), bf16 (2 bytes, sharded under --zero 3; needs --precision bf16, where it gives the same numbers as fp32: the weights are rounded to bf16 either way) or gguf (QLoRA, the default for a .gguf --model: each projection in the file's own quantized blocks, Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/Q4_K/Q5_K/Q6_K, dequantized a tile at a time in the GEMMs; its other weights in the pass's precision; --zero 0-2, no --vocab-slice)", 0},
      {"save-dtype", LC_ARG_STR, &F.save_dtype, "fp32 | bf16: the dtype of a checkpoint's model.safetensors (bf16: half the size, rounded to nearest; the fp32 master weights then go into optimizer.safetensors so resuming is exact) (default fp32)", 0},
      {"keep", LC_ARG_INT, &F.keep, "checkpoints kept under --save (default 2)", 0},
      {"resume", LC_ARG_STR, &F.resume, "continue from a checkpoint (a --save directory or one checkpoint-N)", 0},
      {"eval-every", LC_ARG_INT, &F.eval_every, "evaluate held-out samples every N steps and at the end, 0 = never (default 0)", 0},
      {"eval-samples", LC_ARG_INT, &F.eval_samples, "held-out samples per evaluation (default 64)", 0},
      {"timeout", LC_ARG_FLOAT, &F.timeout, "seconds without a heartbeat from a rank, or in one collective on every rank, before the job ends with exit code 3 (default 30; 0 = no watchdog)", 0},
      {"skip-nonfinite", LC_ARG_INT, &F.skip_nonfinite, "skip up to N updates in a row whose loss or gradient is not finite, instead of stopping (default 0)", 0},
  };
  const int nf = (int)(sizeof flags / sizeof flags[0]);
  if (lc_args_wants_help(argc, argv)) {
    lc_args_help("train", flags, nf);
    return 0;
  }
  // MPI: always initialised, so `mpirun -np N longctx train` and a plain run share one path.
  // Thread support for the watchdog's thread (comm/watchdog.h); errors return, not abort.
  int provided = 0;
  MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  lc_comm *world = NULL;
  int rc = run_train(argc, argv, flags, nf, &F, &world);
  lc_comm_destroy(world);
  MPI_Finalize();
  return rc;
}
