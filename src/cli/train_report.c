// longctx train's output: the settings table, progress lines and the --log-json records.
#include "cli/train_report.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli/cli.h"
#include "model/ckstore.h"
#include "core/cpu.h"
#include "core/timer.h"
#include "model/loss.h"
#include "model/memplan.h"
#include "backend/cpu/gemm/sgemm.h"

// ZeRO: stage, groups and the predicted model-state bytes per rank (the memory model).
static void print_zero(const lc_train_opts *o, const lc_trainer *t) {
  const lc_pstore *ps = lc_model_trainable((lc_model *)&t->model);
  char b[5][32];
  lc_mem_estimate e;
  if (lc_memplan_predict(&o->cfg, &o->mopts, o->seq, o->hp, o->cp, o->window, 0, &e) != LC_OK) return;
  printf("  %-14s stage %d (%s)", "zero", ps->stage, lc_zero_stage_desc(ps->stage));
  if (ps->stage > 0)
    printf(", %d group%s of %d consecutive ranks, each a full copy split %d ways%s", ps->R, ps->R > 1 ? "s" : "",
           ps->Z, ps->Z, ps->R > 1 ? "; gradients also summed across the groups" : "");
  if (e.offload) {
    printf("\n  %-14s in host memory (--offload-optimizer): %s per rank (params, grads, AdamW), %s with the host's "
           "temporary units; AdamW on the CPU cores; on %s each unit's compute copy and gradient while in use: gathered %s, "
           "grads %s; predicted\n", "model states", lc_fmt_bytes(b[0], 32, (double)e.model_states),
           lc_fmt_bytes(b[1], 32, (double)e.host_bytes), t->be->name, lc_fmt_bytes(b[2], 32, (double)e.peak[LC_MEM_GATHERED]),
           lc_fmt_bytes(b[3], 32, (double)e.peak[LC_MEM_GRADS]));
    return;
  }
  printf("\n  %-14s params %s, grads %s, AdamW %s, gathered %s; per rank, predicted (%s padding in the flat buffer)\n",
         "model states", lc_fmt_bytes(b[0], 32, (double)e.peak[LC_MEM_PARAMS]),
         lc_fmt_bytes(b[1], 32, (double)e.peak[LC_MEM_GRADS]), lc_fmt_bytes(b[2], 32, (double)e.peak[LC_MEM_OPTIM]),
         lc_fmt_bytes(b[3], 32, (double)e.peak[LC_MEM_GATHERED]), lc_fmt_bytes(b[4], 32, (double)e.padding));
}

// The rank sets of data-parallel group d: the head (Ulysses) groups, one per context
// index, when heads_inner; else the rings, one per head index.
static void print_rank_sets(const lc_grid *g, int d, int heads_inner) {
  const int outer = heads_inner ? g->cp : g->hp, inner = heads_inner ? g->hp : g->cp;
  for (int a = 0; a < outer; a++) {
    printf(" [");
    for (int b = 0; b < inner; b++)
      printf("%s%d", b ? " " : "",
             lc_grid_rank_of(g->cp, g->hp, g->placement, d, heads_inner ? a : b, heads_inner ? b : a));
    printf("]");
  }
}

void lc_train_print_settings(const lc_train_opts *o, const lc_trainer *t, int threads, const char *ckpt_src,
                             int mlp_auto, int loss_auto, const char *extra) {
  const lc_config *c = &o->cfg;
  char b[32];
  printf("longctx train\n");
  char desc[400];
  printf("  %-14s %s (%s)\n", "model", c->name, lc_config_describe(c, desc, sizeof desc));
  printf("  %-14s %.3f M\n", "parameters", (double)lc_config_n_params(c) / 1e6);
  if (c->lora.rank > 0) {
    char tg[128], bd[400];
    printf("  %-14s r %d, alpha %g (scale %g%s) on %s: %.3f M adapter parameters train (AdamW, fp32); the base is "
           "frozen in %s; its projections, embedding, LM head and norms get no gradients, no moments\n",
           "lora", c->lora.rank, (double)c->lora.alpha, (double)lc_lora_scale(&c->lora), c->lora.rslora ? ", rsLoRA" : "",
           lc_lora_target_names(c->lora.targets, 0, tg, sizeof tg), (double)lc_config_n_lora_params(c) / 1e6,
           lc_cli_base_desc(c, bd, sizeof bd));
    if (c->lora.dropout > 0)
      printf("  %-14s %g on the adapters' input in training steps (PEFT's lora_dropout: kept values x 1/(1-p)); the mask "
             "follows --seed, the step and each token's place in its sequence, so every layout drops the same values; "
             "evaluation and generation use none\n", "lora dropout", (double)c->lora.dropout);
  }
  printf("  %-14s %s\n", "data", t->data.desc);
  char pk[300];
  lc_data_pack_desc(&t->data, pk, sizeof pk);
  printf("  %-14s %s\n", "packing", pk);
  if (c->sliding_window > 0) printf("  %-14s sliding window of %d tokens (each token sees at most its %d most recent tokens%s)\n",
                                    "attention", c->sliding_window, c->sliding_window, o->pack ? " of its document" : "");
  printf("  %-14s seq %d x batch %d, %ld steps\n", "batch", o->seq, o->batch, o->steps);
  printf("  %-14s AdamW lr %g (warmup %ld, cosine to %g) wd %g clip %g\n", "optimizer", o->lr,
         o->warmup, o->lr_min, o->wd, o->clip);
  lc_cpu_info cpu;
  lc_cpu_detect(&cpu);
  char pd[600];
  char dv[200];
  printf("  %-14s %s\n", "device", lc_backend_describe(t->be, dv, sizeof dv));
  printf("  %-14s %s\n", "precision", lc_cli_precision_desc(o->mopts.precision, &cpu, pd, sizeof pd));
  char gd[256];
  printf("  %-14s %s\n", "fp32 GEMMs", lc_sgemm_describe(gd, sizeof gd));
  printf("  %-14s checkpoint %s%s, mlp-tile %s, loss-tile %s\n", "memory",
         lc_ckpt_name(o->mopts.ckpt), ckpt_src,
         o->mopts.mlp_tile ? (snprintf(b, sizeof b, "%d%s", o->mopts.mlp_tile, mlp_auto ? " (auto)" : ""), b)
                           : mlp_auto ? "untiled (auto: it fits)" : "untiled",
         o->mopts.loss_tile ? (snprintf(b + 16, 16, "%d%s", o->mopts.loss_tile, loss_auto ? " (auto)" : ""), b + 16) : "untiled");
  if (lc_vocab_sliced(&o->mopts, o->cfg.vocab))
    printf("  %-14s embedding and LM head in %d slices of %d vocabulary rows (the loss merges them)\n", "vocabulary",
           lc_head_n_slices(o->cfg.vocab, o->mopts.vocab_slice), o->mopts.vocab_slice);
  if (o->mopts.offload_dir)
    printf("  %-14s layer checkpoints offloaded to %s (%d of %d layers in RAM at once: --offload-depth %s)\n", "offload",
           o->mopts.offload_dir, lc_ckstore_resident(o->cfg.n_layers, lc_offload_depth(&o->mopts)), o->cfg.n_layers,
           o->mopts.offload_depth > 0 ? "set" : "auto");
  const lc_grid *g = &t->grid;
  printf("  %-14s %d process%s = dp %d x cp %d x hp %d, %s, ring window %d, attention %s, %d threads/rank, seed %llu\n",
         "layout", g->world, g->world > 1 ? "es" : "", g->dp, g->cp, g->hp,
         lc_placement_name(g->placement), g->window, t->attn.name, threads, (unsigned long long)o->seed);
  if (g->hp > 1) {
    const int Hl = c->n_heads / g->hp, N = t->head_chunk ? t->head_chunk : Hl;
    if (N < Hl)
      printf("  %-14s %d of %d query heads per rank per Ulysses stage (%d stages%s): the next stage's all-to-all overlaps "
             "the ring; only the log-sum-exp is kept, backward exchanges q/k/v/out again\n", "head chunk", N, Hl, Hl / N,
             o->head_chunk < 0 ? ", --head-chunk auto: all heads at once do not fit the memory cap" : "");
    else
      printf("  %-14s all %d query heads per rank at once%s\n", "head chunk", Hl,
             o->head_chunk < 0 ? " (--head-chunk auto: they fit the memory cap)" : "");
  }
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
      print_rank_sets(g, d, 1);
      printf(", rings");
      print_rank_sets(g, d, 0);
      printf("\n");
    }
  }
  printf("  %-14s 3 x (2 x tokens x matmul weights + 4 x layers x heads x head_dim x visible pairs)%s\n",
         "model FLOPs", o->pack || c->sliding_window ? "; visible (query, key) pairs counted per step from the documents "
                                                       "and the window"
                                                     : "; S(S+1)/2 visible pairs per sequence");
  if (o->mem_cap) printf("  %-14s %s\n", "memory cap", lc_fmt_bytes(b, sizeof b, (double)o->mem_cap));
  if (extra) printf("%s", extra);
  fflush(stdout);
}

// Progress: on a terminal one status line rewritten in place (with ETA); otherwise (a
// file, a pipe, CI) one line every --log-every steps.

void lc_progress_line(lc_progress *p, const lc_step_metrics *m, long total) {
  const double flops = m->flops;
  char b[32];
  double done = (double)(m->step - p->first_step), el = lc_now() - p->t0;
  double eta = done > 0 ? el / done * (double)(total - m->step) : 0;
  char tk[64] = "";
  if (p->masked) snprintf(tk, sizeof tk, " | tok %ld (counted %ld)", m->tokens, m->counted);
  printf("%sstep %5ld/%ld | loss %.4f | lr %.2e | gnorm %.3f%s | %.0f tok/s | %.1f GFLOP/s | peak %s",
         p->tty ? "\r\033[K" : "", m->step, total, m->loss, m->lr, m->grad_norm, tk,
         m->tokens / m->seconds, flops / m->seconds / 1e9, lc_fmt_bytes(b, sizeof b, (double)m->peak_bytes));
  if (m->host_peak_bytes) printf(" (host %s)", lc_fmt_bytes(b, sizeof b, (double)m->host_peak_bytes));
  if (p->tty) printf(" | ETA %dm%02ds", (int)eta / 60, (int)eta % 60);
  else printf("\n");
  p->open = p->tty;
  fflush(stdout);
}

// A terminal has a size. Open MPI hands every rank a pseudo-terminal of 0 x 0 whatever
// mpirun's own output is (open-mpi/ompi#7868, #7900), so under it we print lines.
int lc_stdout_is_terminal(void) {
  struct winsize ws;
  return isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0;
}

void lc_progress_break(lc_progress *p) {
  if (p->open) printf("\n");
  p->open = 0;
}

const char *lc_term_name(lc_term t) {
  static const char *n[LC_TERM_N] = {"gemm", "attention", "loss", "elementwise", "optimizer", "exposed_comm", "other"};
  return t >= 0 && t < LC_TERM_N ? n[t] : "?";
}

int lc_terms_measured(const lc_step_metrics *m, lc_step_terms *t) {
  memset(t, 0, sizeof *t);
  if (!m->op_timed) return 0;
  static const lc_term of[LC_OPC_N] = {[LC_OPC_GEMM] = LC_TERM_GEMM, [LC_OPC_ATTN] = LC_TERM_ATTN, [LC_OPC_LOSS] = LC_TERM_LOSS,
                                       [LC_OPC_ELEM] = LC_TERM_ELEM, [LC_OPC_OPTIM] = LC_TERM_OPTIM};
  for (int c = 0; c < LC_OPC_N; c++) t->s[of[c]] += m->op_s[c];
  t->s[LC_TERM_COMM] = m->comm_wait_s;
  double sum = 0;
  for (int i = 0; i < LC_TERM_OTHER; i++) sum += t->s[i];
  t->s[LC_TERM_OTHER] = m->seconds - sum;
  return 1;
}

void lc_terms_predicted(const lc_time_estimate *e, lc_step_terms *t) {
  memset(t, 0, sizeof *t);
  t->s[LC_TERM_GEMM] = e->gemm_s, t->s[LC_TERM_ATTN] = e->attn_kernel_s, t->s[LC_TERM_LOSS] = e->loss_s;
  t->s[LC_TERM_ELEM] = e->elementwise_s, t->s[LC_TERM_OPTIM] = e->optim_s, t->s[LC_TERM_COMM] = e->exposed_comm_s;
  double sum = 0;
  for (int i = 0; i < LC_TERM_OTHER; i++) sum += t->s[i];
  const double rest = e->total_s - sum;
  t->s[LC_TERM_OTHER] = fabs(rest) <= 1e-12 * e->total_s ? 0 : rest; // (rounding of the sum)
}

void lc_terms_print(const lc_step_terms *meas, const lc_step_terms *pred, int steps) {
  static const char *label[LC_TERM_N] = {"GEMMs", "attention kernels", "loss tile", "element-wise", "optimizer",
                                         "exposed communication", "other (host, sync)"};
  printf("time by term, seconds per step (mean of %d step%s after the first):\n  %-22s %10s %10s%s\n", steps,
         steps > 1 ? "s" : "", "term", pred ? "predicted" : "", "measured", pred ? "  predicted/measured - 1" : "");
  double tm = 0, tp = 0;
  for (int i = 0; i <= LC_TERM_N; i++) {
    const double m = i < LC_TERM_N ? meas->s[i] / steps : tm, p = pred ? (i < LC_TERM_N ? pred->s[i] / steps : tp) : 0;
    if (i < LC_TERM_N) tm += m, tp += p;
    printf("  %-22s ", i < LC_TERM_N ? label[i] : "step");
    if (pred) printf("%10.4g", p);
    else printf("%10s", "");
    printf(" %10.4g", m);
    if (pred && m > 0 && p > 0) printf("  %+6.1f%%", 100 * (p / m - 1));
    printf("\n");
  }
}

void lc_train_print_profile(const double *s0, const uint64_t *c0, const double *s1, const uint64_t *c1, int nops, int n,
                            double step_s, int timed) {
  if (!timed) {
    printf("profile: this device queues its ops (its work is not timed on the host); nothing to show\n");
    return;
  }
  int order[LC_BE_NOPS];
  for (int i = 0; i < nops; i++) order[i] = i;
  for (int i = 1; i < nops; i++) // slowest first
    for (int j = i; j > 0 && s1[order[j]] - s0[order[j]] > s1[order[j - 1]] - s0[order[j - 1]]; j--) {
      const int t = order[j];
      order[j] = order[j - 1], order[j - 1] = t;
    }
  printf("profile: the backend's ops per step (mean of %d step%s after the first, %.4g s each):\n  %-20s %-12s %9s %11s %7s\n",
         n, n > 1 ? "s" : "", step_s, "op", "class", "calls", "seconds", "share");
  double sum = 0;
  for (int k = 0; k < nops; k++) {
    const int i = order[k];
    const double sec = (s1[i] - s0[i]) / n, calls = (double)(c1[i] - c0[i]) / n;
    if (calls <= 0) continue;
    sum += sec;
    printf("  %-20s %-12s %9.1f %11.4g %6.1f%%\n", lc_backend_op_name(i), lc_op_class_name(lc_backend_op_class(i)), calls,
           sec, step_s > 0 ? 100 * sec / step_s : 0);
  }
  printf("  %-20s %-12s %9s %11.4g %6.1f%%\n", "(outside the ops)", "", "", step_s - sum,
         step_s > 0 ? 100 * (step_s - sum) / step_s : 0);
}

static void add_terms(cJSON *o, const char *key, const lc_step_terms *t) {
  cJSON *x = cJSON_AddObjectToObject(o, key);
  for (int i = 0; i < LC_TERM_N; i++) cJSON_AddNumberToObject(x, lc_term_name((lc_term)i), t->s[i]);
}

void lc_train_log_json(FILE *f, const lc_step_metrics *m, double peak_gflops, const lc_step_terms *pred) {
  const double flops = m->flops;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "step", (double)m->step);
  cJSON_AddNumberToObject(o, "loss", m->loss);
  cJSON_AddNumberToObject(o, "lr", m->lr);
  cJSON_AddNumberToObject(o, "grad_norm", m->grad_norm);
  cJSON_AddNumberToObject(o, "tokens", (double)m->tokens);
  cJSON_AddNumberToObject(o, "counted", (double)m->counted); // targets the loss is over (masked tokens excluded)
  cJSON_AddNumberToObject(o, "tokens_per_s", m->tokens / m->seconds);
  cJSON_AddNumberToObject(o, "gflops", flops / m->seconds / 1e9);
  cJSON_AddNumberToObject(o, "mfu", flops / m->seconds / 1e9 / peak_gflops);
  cJSON_AddNumberToObject(o, "step_seconds", m->seconds);
  if (m->predicted_step_s > 0) cJSON_AddNumberToObject(o, "predicted_step_s", m->predicted_step_s);
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
  lc_step_terms mt;
  if (lc_terms_measured(m, &mt)) add_terms(o, "measured_terms_s", &mt);
  if (pred) add_terms(o, "predicted_terms_s", pred);
  char *s = cJSON_PrintUnformatted(o);
  fprintf(f, "%s\n", s);
  fflush(f);
  free(s);
  cJSON_Delete(o);
}


double lc_train_predict(const lc_train_opts *o, const lc_trainer *t, const lc_rates *r, lc_time_estimate *e,
                        int with_sample) {
  lc_time_layout l = {.seq = o->seq, .batch = o->batch, .world = t->grid.world, .hp = t->grid.hp, .cp = t->grid.cp,
                      .window = t->grid.window, .head_chunk = t->head_chunk,
                      .context_first = t->grid.placement == LC_PLACE_CONTEXT_FIRST,
                      .attn_window = o->cfg.sliding_window, .lo = with_sample ? t->lo : NULL};
  lc_time_estimate x;
  if (lc_time_predict(&o->cfg, &o->mopts, &l, r, &x) != LC_OK) return 0;
  if (e) *e = x;
  return x.total_s;
}

void lc_train_print_prediction(const lc_train_opts *o, const lc_trainer *t, const lc_rates *r) {
  if (r->builtin) { // another CPU's rates would be a number with no meaning here (issue 36)
    lc_cpu_info cpu;
    lc_cpu_detect(&cpu);
    printf("  %-14s no prediction: no machine file for this CPU (%s), and the built-in rates are 2 Zen 4 cores'; "
           "`longctx calibrate` (about a minute) measures this machine's, then train and plan predict each step\n",
           "time model", cpu.model);
    return;
  }
  lc_time_estimate e;
  if (lc_train_predict(o, t, r, &e, 0) <= 0) return;
  char pv[256];
  printf("  %-14s predicted %.3g s per step%s: compute %.3g s (recompute %.3g, attention kernels %.3g), exposed "
         "communication %.3g s of %.3g, optimizer %.3g s; rates: %s; %s\n", "time model", e.total_s,
         o->pack ? " (documents: each step's own in the log)" : "", e.compute_s, e.recompute_s, e.attn_kernel_s,
         e.exposed_comm_s, e.comm_s, e.optim_s, r->source, lc_rates_provenance(r, pv, sizeof pv));
  if (o->mopts.offload_optimizer) lc_cli_offload_line(r, e.offload_s, e.optim_s, "                 ");
  if (r->warning[0]) printf("  %-14s warning: %s\n", "", r->warning);
}
