// longctx bench: machine sgemm rate, the attention kernel alone, and whole training
// steps of a model at several sequence lengths. Prints a markdown table.
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/flash/flash.h"
#include "backend/cpu/flash/flash_variants.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "core/cpu.h"
#include "core/dtype.h"
#include "core/timer.h"
#include "backend/cpu/kern/kernels.h"
#include "backend/cpu/gemm/sgemm.h"
#include "plan/rates.h"
#include "train/trainer.h"

// Best-of-n GFLOP/s of C[M,N] = A[M,K] B[K,N]^T (the layout of our linear layers), through
// one fp32 GEMM library (backend/cpu/gemm/sgemm.h).
static double sgemm_gflops(int lib, int M, int N, int K, int reps) {
  float *a = malloc(sizeof(float) * (size_t)M * K), *b = malloc(sizeof(float) * (size_t)N * K),
        *c = malloc(sizeof(float) * (size_t)M * N);
  lc_rng r;
  lc_rng_seed(&r, 1);
  lc_rng_fill_normal(&r, a, (long)M * K, 1.0f);
  lc_rng_fill_normal(&r, b, (long)N * K, 1.0f);
  double best = 1e30;
  for (int i = 0; i < reps + 1; i++) {
    double t0 = lc_now();
    lc_sgemm_with(lib, 0, 1, M, N, K, a, K, b, K, 0.0f, c, N);
    double dt = lc_now() - t0;
    if (i > 0 && dt < best) best = dt; // first call warms up threads and caches
  }
  free(a);
  free(b);
  free(c);
  return 2.0 * M * N * K / best / 1e9;
}

// The same for the kernel table's bf16 GEMM (oneDNN; 0 when the table has none), on bf16
// operands packed beforehand (packing is not timed).
static double bf16_gemm_gflops(int M, int N, int K, int reps) {
  lc_gemm_bf16_fn *gemm =
      lc_kern()->gemm_bf16;
  if (!gemm) return 0;
  float *a = malloc(sizeof(float) * (size_t)M * K), *b = malloc(sizeof(float) * (size_t)N * K),
        *c = malloc(sizeof(float) * (size_t)M * N);
  uint16_t *a16 = malloc(2 * (size_t)M * K), *b16 = malloc(2 * (size_t)N * K);
  lc_rng r;
  lc_rng_seed(&r, 1);
  lc_rng_fill_normal(&r, a, (long)M * K, 1.0f);
  lc_rng_fill_normal(&r, b, (long)N * K, 1.0f);
  lc_bf16_pack(a16, a, (size_t)M * K);
  lc_bf16_pack(b16, b, (size_t)N * K);
  double best = 1e30;
  for (int i = 0; i < reps + 1; i++) {
    double t0 = lc_now();
    gemm(0, 1, M, N, K, a16, K, b16, K, 0.0f, c, N);
    double dt = lc_now() - t0;
    if (i > 0 && dt < best) best = dt; // first call creates the primitive
  }
  free(a), free(b), free(c), free(a16), free(b16);
  return 2.0 * M * N * K / best / 1e9;
}

// Causal self-attention kernel at T tokens: forward and backward GFLOP/s, with fp32 products
// or (bf16 = 1) as a bf16 pass runs it (q, k, v, dout and out in 2 bytes, read and written in
// place), run by the kernel variant var (backend/cpu/flash/flash_variants.h).
// FLOPs: forward 4*Hq*D*T(T+1)/2 (QK^T and PV over visible pairs), backward 2.5x.
static lc_status attn_gflops(const lc_flash_variant *var, int T, int Hq, int Hkv, int D, int bf16, double *fwd,
                             double *bwd) {
  lc_arena ar;
  lc_arena_init(&ar, 0);
  size_t nq = (size_t)T * Hq * D, nk = (size_t)T * Hkv * D;
  float *q = malloc(4 * nq), *k = malloc(4 * nk), *v = malloc(4 * nk), *o = malloc(4 * nq),
        *dout = malloc(4 * nq), *dq = calloc(nq, 4), *dk = calloc(nk, 4), *dv = calloc(nk, 4),
        *lse = malloc(4 * (size_t)Hq * T), *delta = malloc(4 * (size_t)Hq * T);
  lc_rng r;
  lc_rng_seed(&r, 2);
  lc_rng_fill_normal(&r, q, (long)nq, 1.0f);
  lc_rng_fill_normal(&r, k, (long)nk, 1.0f);
  lc_rng_fill_normal(&r, v, (long)nk, 1.0f);
  lc_rng_fill_normal(&r, dout, (long)nq, 1.0f);
  // bf16: the kernel reads 2-byte copies (qi, ...) and writes a 2-byte output (oi)
  uint16_t *h = bf16 ? malloc(2 * (3 * nq + 2 * nk)) : NULL;
  if (bf16 && !h) {
    free(q), free(k), free(v), free(o), free(dout), free(dq), free(dk), free(dv), free(lse), free(delta);
    return lc_fail(LC_ENOMEM, "out of memory for the attention benchmark");
  }
  const void *qi = q, *ki = k, *vi = v, *di = dout;
  void *oi = o;
  if (bf16) {
    uint16_t *q16 = h, *k16 = q16 + nq, *v16 = k16 + nk, *d16 = v16 + nk;
    lc_bf16_pack(q16, q, nq), lc_bf16_pack(k16, k, nk), lc_bf16_pack(v16, v, nk), lc_bf16_pack(d16, dout, nq);
    qi = q16, ki = k16, vi = v16, di = d16, oi = d16 + nq;
  }
  lc_attn_shape s = {.Tq = T, .Tk = T, .Hq = Hq, .Hkv = Hkv, .D = D, .causal = 1,
                     .scale = 1.0f / sqrtf((float)D), .bf16 = bf16, .q16 = bf16, .kv16 = bf16};
  lc_attn_shape sf = s;
  sf.out16 = bf16;
  double flops = 4.0 * Hq * D * ((double)T * (T + 1) / 2.0);
  double bf = 1e30, bb = 1e30;
  lc_status st = LC_OK;
  int reps = T <= 4096 ? 3 : 2;
  for (int i = 0; i < reps && st == LC_OK; i++) {
    double t0 = lc_now();
    st = var->fwd(oi, lse, qi, ki, vi, &sf, &ar);
    double t1 = lc_now();
    if (bf16) lc_attn_delta16(delta, di, oi, T, Hq, D);
    else lc_attn_delta(delta, dout, o, T, Hq, D);
    double t2 = lc_now();
    if (st == LC_OK) st = var->bwd(dq, dk, dv, di, qi, ki, vi, lse, delta, &s, &ar);
    double t3 = lc_now();
    bf = fmin(bf, t1 - t0);
    bb = fmin(bb, t3 - t2);
  }
  *fwd = flops / bf / 1e9;
  *bwd = 2.5 * flops / bb / 1e9;
  free(q), free(k), free(v), free(o), free(dout), free(dq), free(dk), free(dv), free(lse), free(delta), free(h);
  return st;
}

int lc_cmd_bench(int argc, char **argv) {
  const char *model = "bench-s", *seqs = "1024,4096,16384", *ckpt = "none", *prec = "fp32", *kernels = "auto";
  int threads = 0, steps = 2, mlp_tile = 0, loss_tile = 0, skip_model = 0;
  const char *machine = NULL;
  lc_flag flags[] = {
      {"model", LC_ARG_STR, &model, "preset (default bench-s)", 0},
      {"seq", LC_ARG_STR, &seqs, "comma-separated sequence lengths, K = 1024 (default 1024,4096,16384)", 0},
      {"steps", LC_ARG_INT, &steps, "timed training steps per length after one warm-up (default 2)", 0},
      {"threads", LC_ARG_INT, &threads, "OpenMP/BLAS threads (default all)", 0},
      {"checkpoint", LC_ARG_STR, &ckpt, "none | full | selective (default none)", 0},
      {"precision", LC_ARG_STR, &prec, "fp32 | bf16: the training steps' precision (default fp32)", 0},
      {"kernels", LC_ARG_STR, &kernels, LC_CLI_KERNELS_HELP, 0},
      {"mlp-tile", LC_ARG_INT, &mlp_tile, "tokens per MLP tile, 0 = untiled (default 0)", 0},
      {"loss-tile", LC_ARG_INT, &loss_tile, "tokens per loss tile, 0 = untiled (default 0)", 0},
      {"kernels-only", LC_ARG_INT, &skip_model, "1 = only sgemm and attention kernel (default 0)", 0},
      {"machine", LC_ARG_STR, &machine, "the machine file whose fp32 GEMM library choices by shape the steps use "
       "(default: the last one calibrate wrote; none: OpenBLAS)", 0},
  };
  const int nf = (int)(sizeof flags / sizeof flags[0]);
  if (lc_args_wants_help(argc, argv)) {
    lc_args_help("bench", flags, nf);
    return 0;
  }
  lc_train_opts o;
  lc_train_opts_init(&o);
  long S[16];
  int nS = 0, used = 0;
  lc_status st = lc_args_parse(argc, argv, flags, nf);
  if (st == LC_OK) st = lc_cli_model(model, &o.cfg);
  if (st == LC_OK) st = lc_ckpt_parse(ckpt, &o.mopts.ckpt);
  if (st == LC_OK) st = lc_dtype_parse_user(prec, "--precision", &o.mopts.precision);
  if (st == LC_OK) st = lc_cli_kernels(kernels);
  if (st == LC_OK) st = lc_cli_threads(threads, &used);
  lc_rates rates; // (its fp32 GEMM library choice: the steps run what train runs)
  if (st == LC_OK) st = lc_cli_rates(machine, NULL, 1, used, &rates);
  if (st == LC_OK) lc_sgemm_set_choice(&rates.gemm_shapes);
  if (st == LC_OK && (nS = lc_cli_lengths(seqs, 1L << 26, S, 16)) <= 0)
    st = lc_fail(LC_EINVAL, "--seq '%s': give positive lengths separated by commas, e.g. 1024,4K", seqs);
  if (st == LC_OK && steps < 1) st = lc_fail(LC_EINVAL, "--steps %d: use at least 1", steps);
  if (st != LC_OK) {
    lc_cli_error(lc_errmsg());
    return 2;
  }
  const lc_config *c = &o.cfg;
  lc_cpu_info cpu;
  lc_cpu_detect(&cpu);
  char pd[600];
  printf("longctx bench: model %s, %d threads, checkpoint %s, mlp-tile %d, loss-tile %d, OpenBLAS kernels %s\n",
         c->name, used, ckpt, mlp_tile, loss_tile, openblas_get_corename());
  printf("CPU %s (AVX2 %d, AVX-512F %d, AVX512_BF16 %d, AMX-BF16 %d); precision %s\n", cpu.model, cpu.avx2,
         cpu.avx512f, cpu.avx512_bf16, cpu.amx_bf16, lc_cli_precision_desc(o.mopts.precision, &cpu, pd, sizeof pd));
  // The ceiling: the fastest fp32 GEMM either library runs (2048^3, and the model's widest layer).
  double g1 = 0, g2 = 0;
  for (int lib = 0; lib < 2; lib++) {
    const double a = sgemm_gflops(lib, 2048, 2048, 2048, 3), b = sgemm_gflops(lib, 4096, c->ffn, c->dim, 3);
    printf("%s: 2048^3 %.1f GFLOP/s; 4096x%dx%d %.1f GFLOP/s\n", lib ? "oneDNN fp32" : "sgemm (OpenBLAS)", a, c->ffn, c->dim, b);
    g1 = fmax(g1, a), g2 = fmax(g2, b);
  }
  double gemm = fmax(g1, g2);
  char gd[256];
  printf("fp32 GEMM ceiling (reference = best, %.1f GFLOP/s); the steps' fp32 products: %s\n", gemm,
         lc_sgemm_describe(gd, sizeof gd));
  double b1 = bf16_gemm_gflops(2048, 2048, 2048, 3), b2 = bf16_gemm_gflops(4096, c->ffn, c->dim, 3), b3 = 0;
  if (b1 > 0) {
    b3 = bf16_gemm_gflops(4096, 4096, 4096, 2);
    printf("bf16 GEMM (oneDNN, kernels %s): 2048^3 %.1f GFLOP/s; 4096^3 %.1f GFLOP/s; 4096x%dx%d %.1f GFLOP/s "
           "(%.2fx sgemm)\n", lc_kern()->name, b1, b3, c->ffn, c->dim, b2, fmax(b1, fmax(b2, b3)) / gemm);
  }
  // each row's ratio is to the GEMM of its precision: fp32 rows to the fp32 ceiling, bf16-pass
  // rows to the best bf16 GEMM (oneDNN's native one; the fp32 ceiling where there is none)
  const double gemm16 = b1 > 0 ? fmax(b1, fmax(b2, b3)) : gemm;
  printf("\nattention kernel (causal, Hq %d, Hkv %d, D %d; FLOPs fwd = 4*Hq*D*S(S+1)/2, bwd = 2.5x fwd; "
         "/ GEMM: to %s for bf16-pass rows, to the fp32 ceiling for the others)\n",
         c->n_heads, c->n_kv_heads, c->head_dim, b1 > 0 ? "the best bf16 GEMM above" : "the fp32 ceiling");
  printf("| S | kernel | fwd GFLOP/s | fwd / GEMM | bwd GFLOP/s | bwd / GEMM |\n|---|---|---|---|---|---|\n");
  const int bf16_pass = o.mopts.precision == LC_DT_BF16;
  // fp32 products, then (bf16) the kernel a bf16 pass runs at this level; at the bf16 and amx
  // levels both bf16-product kernels, bf16 (vdpbf16ps) and amx (AMX tiles), where they run
  const lc_kern_level lv = lc_kern()->level;
  const lc_flash_variant *rows[3] = {lc_flash_variant_for(lv, 0), lc_flash_variant_for(lv, 1), NULL};
  if (lv >= LC_KERN_BF16) rows[1] = lc_flash_variant_for(LC_KERN_BF16, 1), rows[2] = lc_flash_variant_for(LC_KERN_AMX, 1);
  for (int i = 0; i < nS; i++)
    for (int row = 0; row < (bf16_pass ? 3 : 1); row++) {
      const int bf = row > 0;
      if (row == 2 && (!rows[2] || rows[2] == rows[1])) { // the amx kernel does not run here: say why
        if (lv >= LC_KERN_BF16)
          printf("| %ld | amx (bf16 pass) | %s | | | |\n", S[i],
                 !cpu.amx_bf16 ? "no AMX-BF16 on this CPU" : "not run: Linux refused the AMX tile state");
        continue;
      }
      double f = 0, b = 0;
      if (attn_gflops(rows[row], (int)S[i], c->n_heads, c->n_kv_heads, c->head_dim, bf, &f, &b) != LC_OK) {
        lc_cli_error(lc_errmsg());
        return 1;
      }
      const double ref = bf ? gemm16 : gemm;
      printf("| %ld | %s%s | %.1f | %.0f%% | %.1f | %.0f%% |\n", S[i], rows[row]->name, bf ? " (bf16 pass)" : "", f,
             100 * f / ref, b, 100 * b / ref);
      fflush(stdout);
    }
  if (skip_model) return 0;
  printf("\ntraining step (batch 1; model FLOPs = 3 x (2 x S x matmul weights + 4 x layers x heads x head_dim x S(S+1)/2))\n");
  printf("| S | step s | tokens/s | GFLOP/s | / sgemm | peak | params | grads | optimizer | checkpoints | activations | scratch |\n");
  printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < nS; i++) {
    o.mopts.mlp_tile = mlp_tile;
    o.mopts.loss_tile = loss_tile;
    o.data_spec = "task:copy";
    o.seq = (int)S[i];
    o.batch = 1;
    o.steps = steps + 1;
    o.lr = 1e-4f;
    o.lr_min = 1e-5f;
    o.clip = 1.0f;
    o.seed = 1;
    lc_trainer tr;
    lc_comm *self = NULL;
    if (lc_comm_self(&self) != LC_OK || lc_trainer_init(&tr, &o, self) != LC_OK) {
      lc_cli_error(lc_errmsg());
      return 1;
    }
    double best = 1e30;
    lc_step_metrics m;
    for (int s = 0; s <= steps; s++) {
      if (lc_trainer_step(&tr, &m) != LC_OK) {
        lc_cli_error(lc_errmsg());
        lc_trainer_free(&tr);
        lc_comm_destroy(self);
        return 1;
      }
      if (s > 0 && m.seconds < best) best = m.seconds;
    }
    double flops = 3.0 * lc_config_fwd_flops(c, S[i]);
    char b[LC_MEM_NCAT + 1][32];
    lc_fmt_bytes(b[LC_MEM_NCAT], 32, (double)tr.arena.peak_total);
    for (int k = 0; k < LC_MEM_NCAT; k++) lc_fmt_bytes(b[k], 32, (double)tr.arena.peak[k]);
    printf("| %ld | %.3f | %.0f | %.1f | %.0f%% | %s | %s | %s | %s | %s | %s | %s |\n", S[i], best,
           S[i] / best, flops / best / 1e9, 100 * flops / best / 1e9 / gemm, b[LC_MEM_NCAT],
           b[LC_MEM_PARAMS], b[LC_MEM_GRADS], b[LC_MEM_OPTIM], b[LC_MEM_CKPT], b[LC_MEM_ACT],
           b[LC_MEM_SCRATCH]);
    fflush(stdout);
    lc_trainer_free(&tr);
    lc_comm_destroy(self);
  }
  return 0;
}
