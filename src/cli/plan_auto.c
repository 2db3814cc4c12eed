// longctx plan --auto / --longest: the layout search (plan/layout_search.h) printed as a
// table and as train command lines, with why the runner-up lost.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/timer.h"
#include "plan/layout_search.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

// The train command line of a layout; extra: the options fixed for every layout (threads,
// slices, offload, packing, tiles given). Cut short rather than overflow b.
static void command(const lc_layout_choice *x, const char *model, int world, const char *extra, char *b, size_t n) {
  int k = 0;
#define ADD(...) (k += k >= 0 && (size_t)k < n ? snprintf(b + k, n - (size_t)k, __VA_ARGS__) : 0)
  if (world > 1) ADD("mpirun -np %d ", world);
  ADD("longctx train --model %s --seq %ld --batch %d --hp %d --cp %d", model, x->seq, world / (x->hp * x->cp), x->hp,
      x->cp);
  if (x->hp > 1 && x->cp > 1) ADD(" --placement %s", x->context_first ? "context-first" : "head-first");
  if (x->zero) ADD(" --zero %d", x->zero);
  if (x->zero && x->zero_group != world) ADD(" --zero-group %d", x->zero_group);
  ADD(" --checkpoint %s --precision %s", lc_ckpt_name(x->o.ckpt), x->o.precision == LC_DT_BF16 ? "bf16" : "fp32");
  if (x->head_chunk > 0) ADD(" --head-chunk %d", x->head_chunk);
  ADD("%s", extra);
#undef ADD
}

// --offload-optimizer: the host's side of a layout, next to its device peak.
static void host_line(const lc_layout_choice *x, const lc_search_opts *so, const char *host_src) {
  const int rpn = lc_layout_ranks_per_node(so->world, so->per_node);
  printf("  host memory (--offload-optimizer's model states): %.2f GiB per rank, %.2f GiB per node (%d rank%s; %zu and "
         "%zu bytes) of %.2f GiB (%s)\n", (double)x->host / GIB, (double)x->host * rpn / GIB, rpn, rpn > 1 ? "s" : "", x->host,
         x->host * (size_t)rpn, (double)so->host_cap / GIB, host_src);
}

// Layouts dropped for the host's memory alone, if any.
static void host_dropped_line(const size_t over[2], const lc_search_opts *so, const char *host_src) {
  if (!over[0]) return;
  printf("%zu layout%s fitting the device dropped: their model states in host memory (--offload-optimizer) need at "
         "least %.2f GiB per node (%zu bytes), over the node's %.2f GiB (%s); more ranks with --zero 1 or more shard "
         "them (--gpus), or give a node with more host memory\n", over[0], over[0] > 1 ? "s" : "",
         (double)over[1] / GIB, over[1], (double)so->host_cap / GIB, host_src);
}

static void row(int i, const lc_layout_choice *x, int world) {
  char lay[64];
  snprintf(lay, sizeof lay, "dp %d x hp %d x cp %d%s", world / (x->hp * x->cp), x->hp, x->cp,
           x->hp > 1 && x->cp > 1 ? (x->context_first ? " ctx-first" : " head-first") : "");
  char z[32];
  if (x->zero) snprintf(z, sizeof z, "%d / %d", x->zero, x->zero_group);
  else snprintf(z, sizeof z, "0");
  printf("| %d | %s | %s | %s | %s | %.2f | %.4g | %.4g | %.4g | %.4g | %.4g |\n", i, lay, z, lc_ckpt_name(x->o.ckpt),
         x->o.precision == LC_DT_BF16 ? "bf16" : "fp32", (double)x->peak / GIB, x->t.total_s, x->t.tokens_per_s,
         x->t.tokens_per_s / world, x->t.compute_s - x->t.recompute_s, x->t.recompute_s + x->t.exposed_comm_s);
}

// The term per token (one step's tokens) in which b costs most more than a.
static void why(const lc_layout_choice *a, const lc_layout_choice *b) {
  const double ta = a->t.tokens_per_s * a->t.total_s, tb = b->t.tokens_per_s * b->t.total_s; // tokens per step
  const char *names[4] = {"compute", "recompute", "exposed communication", "optimizer"};
  const double va[4] = {a->t.compute_s - a->t.recompute_s, a->t.recompute_s, a->t.exposed_comm_s, a->t.optim_s};
  const double vb[4] = {b->t.compute_s - b->t.recompute_s, b->t.recompute_s, b->t.exposed_comm_s, b->t.optim_s};
  int w = 0;
  double worst = -1e30;
  for (int i = 0; i < 4; i++) {
    const double d = vb[i] / tb - va[i] / ta;
    if (d > worst) worst = d, w = i;
  }
  printf("The runner-up is %.1f%% slower per token: mostly %s (%.3g vs %.3g us per token of the step; every rank "
         "runs its part at once).\n",
         100 * (a->t.tokens_per_s / b->t.tokens_per_s - 1), names[w], 1e6 * vb[w] / tb, 1e6 * va[w] / ta);
}

int lc_plan_auto(const lc_config *cfg, const lc_model_opts *base, long S, const lc_search_opts *so, const lc_rates *r,
                 int auto_, int longest, int top, const char *model, double mem_gib, const char *extra,
                 const char *host_src) {
  const double t0 = lc_now();
  char cmd[2400];
  printf("longctx plan%s%s: %s, %d rank%s (%d per node), %.2f GiB per rank, %d threads per rank\n", auto_ ? " --auto" : "",
         longest ? " --longest" : "", cfg->name, so->world, so->world > 1 ? "s" : "",
         r->devices_per_node > 0 ? r->devices_per_node : so->world, mem_gib, so->threads);
  char pv[256];
  printf("  rates: %s; %s\n", r->source, lc_rates_provenance(r, pv, sizeof pv));
  if (r->warning[0]) printf("  warning: %s\n", r->warning);
  if (longest) {
    lc_layout_choice b;
    size_t lover[2];
    const long L = lc_layout_longest(cfg, base, so, r, &b, lover);
    if (L <= 0) {
      if (lover[0]) printf("Longest S: none fits: ");
      else
        printf("Longest S: none fits: even the shortest sequence of every layout exceeds %.2f GiB per rank (more ranks, "
               "--zero 3, or more memory)\n", mem_gib);
      host_dropped_line(lover, so, host_src);
      return 1;
    }
    command(&b, model, so->world, extra, cmd, sizeof cmd);
    printf("\nLongest S: %ld tokens (%.0fK), peak %.2f GiB per rank (%zu bytes), predicted %.4g s per step (%.4g tokens/s):\n  %s\n",
           L, L / 1024.0, (double)b.peak / GIB, b.peak, b.t.total_s, b.t.tokens_per_s, cmd);
    if (base->offload_optimizer) host_line(&b, so, host_src);
    host_dropped_line(lover, so, host_src);
    if (!auto_) return 0;
    S = L;
  }
  lc_layout_choice *v = malloc(sizeof *v * (size_t)top);
  int n_valid = 0, n_fit = 0;
  size_t over[2] = {0, 0};
  const int k = v ? lc_layout_search(cfg, base, S, so, r, v, top, &n_valid, &n_fit, over) : 0;
  printf("\nS = %ld: %d layouts valid, %d fit in %.2f GiB per rank (searched in %.2f s); the fastest %d by predicted "
         "tokens per second (dp = world / (hp x cp) sequences per step):\n\n", S, n_valid, n_fit, mem_gib, lc_now() - t0, k);
  if (k == 0 && n_valid == 0) {
    printf("No layout is valid: the flags held fixed (--hp, --cp, --zero-group, ...) leave none for %d ranks and this "
           "model and length; leave some out.\n", so->world);
    free(v);
    return 1;
  }
  host_dropped_line(over, so, host_src);
  if (k == 0) {
    printf("None fits: use more ranks, --zero 3, a shorter --seq or more memory per rank (--mem-per-rank).\n");
    free(v);
    return 1;
  }
  printf("| # | layout | zero / group | checkpoint | precision | peak GiB | step s | tokens/s | tokens/s per rank | "
         "compute s | recompute + exposed comm s |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < k; i++) row(i + 1, &v[i], so->world);
  printf("\n");
  for (int i = 0; i < k; i++) {
    command(&v[i], model, so->world, extra, cmd, sizeof cmd);
    printf("%d: %s\n", i + 1, cmd);
    if (base->offload_optimizer) host_line(&v[i], so, host_src);
  }
  if (k > 1) why(&v[0], &v[1]);
  free(v);
  return 0;
}
