// longctx train: flag parsing, settings table, progress lines and the --log-json file.
#include <cjson/cJSON.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "core/timer.h"
#include "io/fsutil.h"
#include "model/hf.h"
#include "model/memplan.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

typedef struct {
  const char *model, *data, *ckpt, *log_json, *placement, *save, *resume, *cp_layout;
  int save_every, keep;
  int seq, batch, threads, mlp_tile, loss_tile, hp, cp, window, eval_every, eval_samples, log_every;
  int zero, zero_group, pack, attn_window;
  long steps, warmup, seed;
  float lr, lr_min, wd, clip, mem_gib, peak_gflops;
} train_flags;

// World size the launcher meant (0 if not launched by mpirun): a launcher of one MPI
// with a binary of the other starts N one-rank jobs, which must not train N copies.
static int launcher_size(void) {
  const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && atoi(v) > 1) return atoi(v);
  }
  return 0;
}

// ZeRO: stage, groups and the predicted model-state bytes per rank (the memory model).
static void print_zero(const lc_train_opts *o, const lc_trainer *t) {
  const lc_pstore *ps = &t->model.ps;
  char b[5][32];
  lc_mem_estimate e;
  if (lc_memplan_predict(&o->cfg, &o->mopts, o->seq, o->hp, o->cp, o->window, 0, &e) != LC_OK) return;
  printf("  %-14s stage %d (%s)", "zero", ps->stage, lc_zero_stage_desc(ps->stage));
  if (ps->stage > 0)
    printf(", %d group%s of %d consecutive ranks, each a full copy split %d ways%s", ps->R, ps->R > 1 ? "s" : "",
           ps->Z, ps->Z, ps->R > 1 ? "; gradients also summed across the groups" : "");
  printf("\n  %-14s params %s, grads %s, AdamW %s, gathered %s; per rank, predicted (%s padding in the flat buffer)\n",
         "model states", lc_fmt_bytes(b[0], 32, (double)e.peak[LC_MEM_PARAMS]),
         lc_fmt_bytes(b[1], 32, (double)e.peak[LC_MEM_GRADS]), lc_fmt_bytes(b[2], 32, (double)e.peak[LC_MEM_OPTIM]),
         lc_fmt_bytes(b[3], 32, (double)e.peak[LC_MEM_GATHERED]), lc_fmt_bytes(b[4], 32, (double)e.padding));
}

static void print_settings(const lc_train_opts *o, const lc_trainer *t, int threads,
                           const char *ckpt_src, int mlp_auto, int loss_auto) {
  const lc_config *c = &o->cfg;
  char b[32];
  printf("longctx train\n");
  printf("  %-14s %s (dim %d, layers %d, heads %d, kv heads %d, ffn %d, vocab %d%s)\n", "model",
         c->name, c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->ffn, c->vocab,
         c->tie_embeddings ? ", tied head" : "");
  printf("  %-14s %.3f M\n", "parameters", (double)lc_config_n_params(c) / 1e6);
  printf("  %-14s %s\n", "data", t->data.desc);
  char pk[300];
  lc_data_pack_desc(&t->data, pk, sizeof pk);
  printf("  %-14s %s\n", "packing", pk);
  if (c->sliding_window > 0) printf("  %-14s sliding window of %d tokens (each token sees at most its %d most recent tokens%s)\n",
                                    "attention", c->sliding_window, c->sliding_window, o->pack ? " of its document" : "");
  printf("  %-14s seq %d x batch %d, %ld steps\n", "batch", o->seq, o->batch, o->steps);
  printf("  %-14s AdamW lr %g (warmup %ld, cosine to %g) wd %g clip %g\n", "optimizer", o->lr,
         o->warmup, o->lr_min, o->wd, o->clip);
  printf("  %-14s checkpoint %s%s, mlp-tile %s, loss-tile %s\n", "memory",
         lc_ckpt_name(o->mopts.ckpt), ckpt_src,
         o->mopts.mlp_tile ? (snprintf(b, sizeof b, "%d%s", o->mopts.mlp_tile, mlp_auto ? " (auto)" : ""), b) : "untiled",
         o->mopts.loss_tile ? (snprintf(b + 16, 16, "%d%s", o->mopts.loss_tile, loss_auto ? " (auto)" : ""), b + 16) : "untiled");
  const lc_grid *g = &t->grid;
  printf("  %-14s %d process%s = dp %d x cp %d x hp %d, %s, ring window %d, attention %s, %d threads/rank, seed %llu\n",
         "layout", g->world, g->world > 1 ? "es" : "", g->dp, g->cp, g->hp,
         lc_placement_name(g->placement), g->window, t->attn.name, threads, (unsigned long long)o->seed);
  printf("  %-14s %d tokens per rank (S / (cp x hp)), %d sequence%s per data-parallel group\n", "tokens",
         t->T, t->local_batch, t->local_batch > 1 ? "s" : "");
  if (g->cp > 1)
    printf("  %-14s %s: %d chunks of %ld tokens per context rank%s\n", "cp layout", lc_cp_layout_name(o->mopts.cp_layout),
           t->lay[0].k, t->lay[0].Lc, o->mopts.cp_layout == LC_CP_BALANCED
                                          ? ", assigned per sequence by attention work (largest first to the least loaded rank)"
                                          : " (rank c: chunks c and 2cp-1-c)");
  print_zero(o, t);
  if (g->world > 1) {
    // Which ranks form which group (the placement formulas of DESIGN.md).
    for (int d = 0; d < g->dp; d++) {
      printf("  %-14s", d == 0 ? "groups" : "");
      printf(" dp %d: head groups", d);
      for (int c = 0; c < g->cp; c++) {
        printf(" [");
        for (int h = 0; h < g->hp; h++)
          printf("%s%d", h ? " " : "", lc_grid_rank_of(g->cp, g->hp, g->placement, d, c, h));
        printf("]");
      }
      printf(", rings");
      for (int h = 0; h < g->hp; h++) {
        printf(" [");
        for (int c = 0; c < g->cp; c++)
          printf("%s%d", c ? " " : "", lc_grid_rank_of(g->cp, g->hp, g->placement, d, c, h));
        printf("]");
      }
      printf("\n");
    }
  }
  printf("  %-14s 3 x (2 x tokens x matmul weights + 4 x layers x heads x head_dim x visible pairs)%s\n",
         "model FLOPs", o->pack || c->sliding_window ? "; visible (query, key) pairs counted per step from the documents "
                                                       "and the window"
                                                     : "; S(S+1)/2 visible pairs per sequence");
  if (o->mem_cap) printf("  %-14s %s\n", "memory cap", lc_fmt_bytes(b, sizeof b, (double)o->mem_cap));
  fflush(stdout);
}

// Progress: on a terminal one status line rewritten in place (with ETA); otherwise (a
// file, a pipe, CI) one line every --log-every steps.
typedef struct {
  int tty, open; // open: the in-place line is on screen without its newline
  double t0;
  long first_step;
} progress;

static void progress_line(progress *p, const lc_step_metrics *m, long total) {
  const double flops = m->flops;
  char b[32];
  double done = (double)(m->step - p->first_step), el = lc_now() - p->t0;
  double eta = done > 0 ? el / done * (double)(total - m->step) : 0;
  printf("%sstep %5ld/%ld | loss %.4f | lr %.2e | gnorm %.3f | %.0f tok/s | %.1f GFLOP/s | peak %s",
         p->tty ? "\r\033[K" : "", m->step, total, m->loss, m->lr, m->grad_norm,
         m->tokens / m->seconds, flops / m->seconds / 1e9, lc_fmt_bytes(b, sizeof b, (double)m->peak_bytes));
  if (p->tty) printf(" | ETA %dm%02ds", (int)eta / 60, (int)eta % 60);
  else printf("\n");
  p->open = p->tty;
  fflush(stdout);
}

// A terminal has a size. Open MPI hands every rank a pseudo-terminal of 0 x 0 whatever
// mpirun's own output is (open-mpi/ompi#7868, #7900), so under it we print lines.
static int stdout_is_terminal(void) {
  struct winsize ws;
  return isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0;
}

static void progress_break(progress *p) {
  if (p->open) printf("\n");
  p->open = 0;
}

static void log_json(FILE *f, const lc_step_metrics *m, double peak_gflops) {
  const double flops = m->flops;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "step", (double)m->step);
  cJSON_AddNumberToObject(o, "loss", m->loss);
  cJSON_AddNumberToObject(o, "lr", m->lr);
  cJSON_AddNumberToObject(o, "grad_norm", m->grad_norm);
  cJSON_AddNumberToObject(o, "tokens", (double)m->tokens);
  cJSON_AddNumberToObject(o, "tokens_per_s", m->tokens / m->seconds);
  cJSON_AddNumberToObject(o, "gflops", flops / m->seconds / 1e9);
  cJSON_AddNumberToObject(o, "mfu", flops / m->seconds / 1e9 / peak_gflops);
  cJSON_AddNumberToObject(o, "step_seconds", m->seconds);
  cJSON_AddNumberToObject(o, "peak_bytes", (double)m->peak_bytes);
  cJSON *pk = cJSON_AddObjectToObject(o, "peak_bytes_by_category");
  for (int c = 0; c < LC_MEM_NCAT; c++)
    cJSON_AddNumberToObject(pk, lc_mem_cat_name((lc_mem_cat)c), (double)m->peak[c]);
  cJSON_AddNumberToObject(o, "rss_bytes", (double)lc_rss_bytes());
  cJSON_AddNumberToObject(o, "attn_bytes_sent", m->attn_bytes);
  cJSON_AddNumberToObject(o, "attn_bytes_formula", m->attn_bytes_formula);
  cJSON_AddNumberToObject(o, "grad_bytes_sent", m->grad_bytes);
  cJSON_AddNumberToObject(o, "grad_bytes_formula", m->grad_bytes_formula);
  cJSON_AddNumberToObject(o, "comm_wait_s", m->comm_wait_s);
  cJSON_AddNumberToObject(o, "state_wait_s", m->state_wait_s);
  cJSON_AddNumberToObject(o, "attn_kernel_s", m->attn_kernel_s);
  cJSON_AddNumberToObject(o, "attn_pairs", m->attn_pairs);
  cJSON_AddNumberToObject(o, "cp_work_imbalance", m->cp_imbalance);
  char *s = cJSON_PrintUnformatted(o);
  fprintf(f, "%s\n", s);
  fflush(f);
  free(s);
  cJSON_Delete(o);
}

static int run_train(int argc, char **argv, lc_flag *flags, int nf, train_flags *Fp,
                     lc_comm **world_out) {
  lc_status st = lc_comm_mpi_world(world_out);
  if (st != LC_OK) {
    lc_cli_error(lc_errmsg());
    return 1;
  }
  lc_comm *w = *world_out;
  const int rank = w->rank;
  int rc = 0;
  int want = launcher_size();
  if (want > 1 && w->size != want) {
    fprintf(stderr, "longctx: error: the launcher started %d processes but MPI reports a world of %d: "
                    "mpirun and longctx come from different MPI implementations; use the mpirun of the "
                    "MPI longctx was built with\n", want, w->size);
    return 2;
  }
  lc_train_opts o;
  lc_train_opts_init(&o);
  int threads = 0;
  st = lc_args_parse(argc, argv, flags, nf); // writes through flags[] into *Fp
  train_flags F = *Fp;
  // The model: a preset, an HF directory, or (resuming without --model) the checkpoint's.
  char ckpt_dir[4096] = "";
  int model_given = lc_args_find(flags, nf, "model")->seen;
  if (st == LC_OK && F.resume) st = lc_checkpoint_resolve(F.resume, ckpt_dir, sizeof ckpt_dir);
  int model_dir = 0;
  if (st == LC_OK && F.resume && !model_given) {
    st = lc_hf_read_config(ckpt_dir, &o.cfg);
  } else if (st == LC_OK) {
    model_dir = lc_is_dir(F.model);
    st = lc_cli_model(F.model, &o.cfg);
  }
  if (st == LC_OK) st = lc_ckpt_parse(F.ckpt ? F.ckpt : "selective", &o.mopts.ckpt);
  if (st == LC_OK) st = lc_cli_threads(F.threads, &threads);
  if (st == LC_OK && F.mem_gib < 0) st = lc_fail(LC_EINVAL, "--mem-limit must be positive GiB");
  if (st == LC_OK && F.seq < 2) st = lc_fail(LC_EINVAL, "--seq %d is too short: use at least 2 tokens", F.seq);
  if (st == LC_OK && (F.mlp_tile < -1 || F.loss_tile < -1))
    st = lc_fail(LC_EINVAL, "--mlp-tile and --loss-tile must be >= 0 (0 = untiled)");
  if (st == LC_OK) st = lc_placement_parse(F.placement, &o.placement);
  if (st == LC_OK && (F.save_every < 0 || F.keep < 1))
    st = lc_fail(LC_EINVAL, "--save-every must be >= 0 and --keep >= 1");
  if (st == LC_OK && F.save_every > 0 && !F.save)
    st = lc_fail(LC_EINVAL, "--save-every needs --save DIR");
  if (st == LC_OK && F.log_every < 1)
    st = lc_fail(LC_EINVAL, "--log-every %d: print progress every N >= 1 steps", F.log_every);
  if (st == LC_OK && (F.eval_every < 0 || F.eval_samples < 1))
    st = lc_fail(LC_EINVAL, "--eval-every must be >= 0 and --eval-samples >= 1");
  if (st == LC_OK && (F.zero < 0 || F.zero > 3))
    st = lc_fail(LC_EINVAL, "--zero %d is not a ZeRO stage: use 0 (replicated), 1 (AdamW moments sharded), "
                 "2 (+ gradients) or 3 (+ weights)", F.zero);
  if (st == LC_OK && lc_args_find(flags, nf, "zero-group")->seen && F.zero == 0)
    st = lc_fail(LC_EINVAL, "--zero-group needs a sharded stage: add --zero 1, 2 or 3");
  if (st == LC_OK && (F.zero_group < 0 || (F.zero_group > 0 && w->size % F.zero_group != 0)))
    st = lc_fail(LC_EINVAL, "--zero-group %d does not divide the world of %d ranks; use a divisor of %d", F.zero_group,
                 w->size, w->size);
  if (st != LC_OK) {
    if (rank == 0) lc_cli_error(lc_errmsg());
    return 2;
  }
  int mlp_auto = F.mlp_tile < 0, loss_auto = F.loss_tile < 0;
  o.mopts.mlp_tile = mlp_auto ? lc_memplan_auto_mlp_tile(F.seq) : F.mlp_tile;
  o.mopts.loss_tile = loss_auto ? lc_memplan_auto_loss_tile(F.seq, o.cfg.vocab) : F.loss_tile;
  o.data_spec = F.data;
  o.seq = F.seq;
  o.batch = F.batch;
  o.steps = F.steps;
  o.warmup = F.warmup;
  o.lr = F.lr;
  o.lr_min = F.lr_min >= 0 ? F.lr_min : F.lr / 10.0f;
  o.wd = F.wd;
  o.clip = F.clip;
  o.seed = (uint64_t)F.seed;
  o.mem_cap = (size_t)(F.mem_gib * GIB);
  o.hp = F.hp;
  o.cp = F.cp;
  o.window = F.window ? F.window : F.cp;
  o.mopts.zero = F.zero;
  o.mopts.zero_group = F.zero_group ? F.zero_group : w->size;
  o.pack = F.pack;
  if (lc_args_find(flags, nf, "attn-window")->seen) {
    if (F.attn_window < 1) {
      lc_fail(LC_EINVAL, "--attn-window %d: give the number of most recent tokens each token sees (>= 1)",
              F.attn_window);
      if (rank == 0) lc_cli_error(lc_errmsg());
      return 2;
    }
    o.cfg.sliding_window = F.attn_window;
  }
  st = lc_cp_layout_parse(F.cp_layout ? F.cp_layout : (o.pack || o.cfg.sliding_window ? "balanced" : "zigzag"),
                          &o.mopts.cp_layout);
  if (st != LC_OK) {
    if (rank == 0) lc_cli_error(lc_errmsg());
    return 2;
  }
  double peak_gflops = F.peak_gflops > 0 ? F.peak_gflops : 117.0 * threads * w->size;

  lc_trainer tr;
  st = lc_trainer_init(&tr, &o, w);
  if (st == LC_OK && model_dir) st = lc_hf_load_weights(F.model, &tr.model);
  if (st == LC_OK && F.resume) st = lc_checkpoint_load(&tr, ckpt_dir);
  if (st == LC_OK && tr.step > o.steps)
    st = lc_fail(LC_EINVAL, "the checkpoint is at step %ld, beyond --steps %ld; raise --steps", tr.step, o.steps);
  if (st != LC_OK) {
    // Layout and input errors are found identically on every rank; rank 0 reports.
    if (rank == 0) lc_cli_error(lc_errmsg());
    if (tr.model.params) lc_trainer_free(&tr);
    return 1;
  }
  if (rank == 0 && F.resume) printf("resumed from %s at step %ld\n", ckpt_dir, tr.step);
  if (rank == 0 && model_dir) printf("loaded weights from %s\n", F.model);
  if (rank == 0) print_settings(&o, &tr, threads, F.ckpt ? "" : " (default)", mlp_auto, loss_auto);
  FILE *jf = NULL;
  int bad_log = rank == 0 && F.log_json && !(jf = fopen(F.log_json, "w"));
  double bad_d = bad_log;
  lc_allreduce_sum(w, &bad_d, 1, LC_DT_F64);
  if (bad_d > 0) {
    if (rank == 0)
      fprintf(stderr, "longctx: error: cannot write --log-json %s; check the directory exists\n", F.log_json);
    lc_trainer_free(&tr);
    return 1;
  }
  rc = 0;
  progress prog = {.tty = stdout_is_terminal(), .t0 = lc_now(), .first_step = tr.step};
  double t_start = lc_now();
  lc_step_metrics m;
  if (F.eval_every > 0 && (tr.data.kind == LC_DATA_BYTES || tr.data.kind == LC_DATA_TOKENS)) {
    if (rank == 0) lc_cli_error("--eval-every needs held-out data: use task:passkey or task:copy");
    if (jf) fclose(jf);
    lc_trainer_free(&tr);
    return 2;
  }
  for (long s = tr.step; s < o.steps; s++) {
    st = lc_trainer_step(&tr, &m);
    if (st != LC_OK) {
      // May have failed on this rank only: the others could wait in a collective forever.
      fprintf(stderr, "longctx: error (rank %d): %s\n", rank, lc_errmsg());
      fflush(stderr);
      if (w->size > 1) MPI_Abort(MPI_COMM_WORLD, 1);
      rc = 1;
      break;
    }
    if (rank == 0) {
      if (prog.tty || m.step % F.log_every == 0 || m.step == o.steps)
        progress_line(&prog, &m, o.steps);
      if (jf) log_json(jf, &m, peak_gflops);
    }
    if (F.save && ((F.save_every > 0 && m.step % F.save_every == 0) || m.step == o.steps)) {
      st = lc_checkpoint_save(&tr, F.save, F.keep);
      if (st != LC_OK) {
        if (rank == 0) lc_cli_error(lc_errmsg());
        rc = 1;
        break;
      }
      if (rank == 0) {
        progress_break(&prog);
        printf("saved %s/checkpoint-%ld\n", F.save, m.step);
      }
    }
    if (F.eval_every > 0 && (m.step % F.eval_every == 0 || m.step == o.steps)) {
      double el = 0, acc = 0;
      st = lc_trainer_eval(&tr, F.eval_samples, &el, &acc);
      if (st != LC_OK) {
        fprintf(stderr, "longctx: error (rank %d): %s\n", rank, lc_errmsg());
        if (w->size > 1) MPI_Abort(MPI_COMM_WORLD, 1);
        rc = 1;
        break;
      }
      if (rank == 0) {
        progress_break(&prog);
        printf("eval  %5ld | held-out loss %.4f | accuracy %.1f%% (%d samples)\n", m.step, el,
               100 * acc, F.eval_samples);
        fflush(stdout);
        if (jf) {
          fprintf(jf, "{\"step\":%ld,\"eval_loss\":%.6f,\"eval_accuracy\":%.4f,\"eval_samples\":%d}\n",
                  m.step, el, acc, F.eval_samples);
          fflush(jf);
        }
      }
    }
  }
  if (rank == 0) progress_break(&prog);
  if (rc == 0 && o.steps > 0 && rank == 0) {
    char b[32];
    printf("done: %ld steps in %.1f s; peak memory %s:", o.steps, lc_now() - t_start,
           lc_fmt_bytes(b, sizeof b, (double)tr.arena.peak_total));
    for (int c = 0; c < LC_MEM_NCAT; c++)
      printf(" %s %s%s", lc_mem_cat_name((lc_mem_cat)c),
             lc_fmt_bytes(b, sizeof b, (double)tr.arena.peak[c]), c + 1 < LC_MEM_NCAT ? "," : "\n");
  }
  if (jf) fclose(jf);
  lc_trainer_free(&tr);
  return rc;
}

int lc_cmd_train(int argc, char **argv) {
  train_flags F = {.model = "tiny", .data = "task:copy", .ckpt = NULL, .log_json = NULL,
                   .seq = 256, .batch = 1, .threads = 0, .mlp_tile = -1, .loss_tile = -1,
                   .steps = 100, .warmup = 10, .seed = 1, .lr = 1e-3f, .lr_min = -1.0f,
                   .wd = 0.1f, .clip = 1.0f, .mem_gib = 0.0f, .peak_gflops = 0.0f,
                   .placement = "head-first", .hp = 1, .cp = 1, .window = 0,
                   .eval_every = 0, .eval_samples = 64, .log_every = 1, .save = NULL, .resume = NULL,
                   .save_every = 0, .keep = 2, .zero = 0, .zero_group = 0, .pack = 0, .attn_window = 0,
                   .cp_layout = NULL};
  lc_flag flags[] = {
      {"model", LC_ARG_STR, &F.model, "a preset (tiny, demo, bench-s) or a Hugging Face Llama directory (default tiny)", 0},
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
      {"threads", LC_ARG_INT, &F.threads, "OpenMP/BLAS threads (default: OMP_NUM_THREADS or all cores)", 0},
      {"hp", LC_ARG_INT, &F.hp, "head-parallel (Ulysses) degree (default 1)", 0},
      {"cp", LC_ARG_INT, &F.cp, "context-parallel (ring) degree (default 1)", 0},
      {"ring-window", LC_ARG_INT, &F.window, "inner ring size of the double ring, divides cp (default cp)", 0},
      {"placement", LC_ARG_STR, &F.placement, "head-first | context-first (default head-first)", 0},
      {"pack", LC_ARG_BOOL, &F.pack, "fill each sequence with whole documents (a token file with a document index, or task:copy): each token sees only its own document, positions restart per document", 0},
      {"attn-window", LC_ARG_INT, &F.attn_window, "sliding-window attention: each token sees at most the N most recent tokens of its document (default: the model's sliding_window, else unlimited)", 0},
      {"cp-layout", LC_ARG_STR, &F.cp_layout, "zigzag | balanced: how a sequence is cut over the context ranks (default: balanced with --pack or a window, else zigzag)", 0},
      {"zero", LC_ARG_INT, &F.zero, "ZeRO stage: 0 replicated, 1 AdamW moments sharded, 2 + gradients, 3 + weights (default 0)", 0},
      {"zero-group", LC_ARG_INT, &F.zero_group, "ranks per zero group (consecutive; divides the world): each group holds one copy of the states split this many ways, groups are replicas (default: the whole world)", 0},
      {"checkpoint", LC_ARG_STR, &F.ckpt, "none | full | selective (default selective)", 0},
      {"mlp-tile", LC_ARG_INT, &F.mlp_tile, "tokens per MLP tile, 0 = untiled (default: auto)", 0},
      {"loss-tile", LC_ARG_INT, &F.loss_tile, "tokens per logits+loss tile, 0 = untiled (default: auto)", 0},
      {"mem-limit", LC_ARG_FLOAT, &F.mem_gib, "cap on the arena in GiB: clean error beyond it (default none)", 0},
      {"peak-gflops", LC_ARG_FLOAT, &F.peak_gflops, "peak GFLOP/s of the whole job for mfu (default 117 per thread per rank)", 0},
      {"log-every", LC_ARG_INT, &F.log_every, "progress line every N steps when not on a terminal (on one, a status line is rewritten every step) (default 1)", 0},
      {"log-json", LC_ARG_STR, &F.log_json, "write one JSON object per step to this file", 0},
      {"save", LC_ARG_STR, &F.save, "write checkpoints (HF model + optimizer + state) under this directory", 0},
      {"save-every", LC_ARG_INT, &F.save_every, "checkpoint every N steps (default: only at the end)", 0},
      {"keep", LC_ARG_INT, &F.keep, "checkpoints kept under --save (default 2)", 0},
      {"resume", LC_ARG_STR, &F.resume, "continue from a checkpoint (a --save directory or one checkpoint-N)", 0},
      {"eval-every", LC_ARG_INT, &F.eval_every, "evaluate held-out samples every N steps and at the end, 0 = never (default 0)", 0},
      {"eval-samples", LC_ARG_INT, &F.eval_samples, "held-out samples per evaluation (default 64)", 0},
  };
  const int nf = (int)(sizeof flags / sizeof flags[0]);
  if (lc_args_wants_help(argc, argv)) {
    lc_args_help("train", flags, nf);
    return 0;
  }
  // MPI: always initialised, so `mpirun -np N longctx train` and a plain run share one path.
  int provided = 0;
  MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
  lc_comm *world = NULL;
  int rc = run_train(argc, argv, flags, nf, &F, &world);
  lc_comm_destroy(world);
  MPI_Finalize();
  return rc;
}
