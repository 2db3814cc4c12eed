// The time model (plan/timemodel.h) and the layout search (plan/layout_search.h) on
// synthetic rates:
//  1. the sum rule: one rank, no communication: the step is the sum of its priced events
//     and of its terms (GEMMs, attention, element-wise, loss, optimizer; the GEMM term equal
//     to the products' FLOP formula), and scales exactly with the compute rates;
//  2. a layout that cannot overlap (Ulysses all-to-alls block): the step grows by exactly
//     the all-to-all time of every layer (formula written here);
//  3. ring hops overlap the kernel: hidden hops leave the step (almost) unchanged, exposed
//     ones add their excess;
//  4. ZeRO 3 gathers ahead of use: a fast network hides all but the first gather; a slow
//     one is exposed;
//  5. the search covers exactly the valid layouts (counted here by brute force) and drops
//     those over the memory cap (each kept one's peak is the memory model's, <= cap; a
//     layout may fit with head chunks where all heads at once would not);
//  6. a machine file round trip keeps the rates (to its 0.01 GFLOP/s rounding).
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/seqlayout.h"
#include "model/memplan.h"
#include "model/schedule.h"
#include "model/pstore.h"
#include "plan/layout_search.h"
#include "plan/rates.h"
#include "plan/timemodel.h"
#include "core/cpu.h"
#include "testutil.h"

static void flat_rates(lc_rates *r, double gemm, double flash, double ew, double lat, double bw) {
  memset(r, 0, sizeof *r);
  for (int b = 0; b < 2; b++)
    for (int d = 0; d < 2; d++) {
      for (int k = 0; k < LC_RATE_NDIM; k++)
        for (int n = 0; n < LC_RATE_NDIM; n++) r->gemm[b][d][k][n] = gemm;
      for (int h = 0; h < LC_RATE_NHD; h++) r->flash[b][d][h] = flash;
    }
  r->ew_bw = ew;
  for (int c = 0; c < LC_COLL_N; c++) r->coll[c] = (lc_link){lat, bw};
}

static lc_time_estimate predict(const lc_config *c, const lc_model_opts *o, long S, int world, int hp, int cp,
                                const lc_rates *r) {
  lc_time_layout l = {.seq = S, .world = world, .hp = hp, .cp = cp};
  lc_time_estimate e;
  lc_status st = lc_time_predict(c, o, &l, r, &e);
  CHECK(st == LC_OK, "predict: %s", lc_errmsg());
  return e;
}

// 7. Rates by shape and length (issue 36), on a synthetic profile: the attention kernel's time
// at the measured key lengths is flops / (rate x factor) exactly, monotone in between and
// clamped outside; the GEMMs' row factors likewise; the factors, the classes a run corrected
// and the CPU survive a machine file; a profile from another CPU, or for other threads or
// ranks, loads with a warning naming the difference (and one from this CPU and pair, none);
// scaling a class by f divides its predicted term by f and leaves the others.
static void rates_by_shape(const char *path) {
  lc_rates r;
  lc_rates_default(&r, 2);
  const double lf[LC_RATE_NLEN] = {1.0, 0.9, 0.7, 0.5}, rf[LC_RATE_NROWS] = {0.4, 0.7, 1.0, 1.1, 1.05};
  const double keys[LC_RATE_NLEN] = {1024, 4096, 16384, 65536}, rows[LC_RATE_NROWS] = {64, 256, 1024, 4096, 16384};
  for (int b = 0; b < 2; b++)
    for (int d = 0; d < 2; d++) {
      for (int i = 0; i < LC_RATE_NLEN; i++) r.flash_len[b][d][i] = lf[i];
      for (int i = 0; i < LC_RATE_NROWS; i++) r.gemm_rows[b][d][i] = rf[i];
    }
  const double fl = 1e12, f64 = r.flash[0][0][1];
  for (int i = 0; i < LC_RATE_NLEN; i++) {
    const double s = lc_rates_flash_s(&r, 0, 0, 64, keys[i], fl), want = fl / (f64 * lf[i]);
    CHECK(fabs(s - want) <= 1e-12 * want, "attention at %.0f keys: %.9g s, want %.9g", keys[i], s, want);
  }
  double prev = 0;
  for (double k = 512; k <= 131072; k *= 1.19) { // monotone: fewer keys never cost more
    const double s = lc_rates_flash_s(&r, 0, 0, 64, k, fl);
    CHECK(s >= prev * (1 - 1e-12), "attention time falls from %.6g to %.6g s at %.0f keys", prev, s, k);
    prev = s;
  }
  CHECK(lc_rates_flash_s(&r, 0, 0, 64, 100, fl) == lc_rates_flash_s(&r, 0, 0, 64, 1024, fl) &&
            lc_rates_flash_s(&r, 0, 0, 64, 1 << 20, fl) == lc_rates_flash_s(&r, 0, 0, 64, 65536, fl),
        "attention length factors are not clamped at the grid's ends");
  for (int i = 0; i < LC_RATE_NROWS; i++) {
    const double s = lc_rates_gemm_s(&r, 0, 0, rows[i], 1024, 1024), want = 2.0 * rows[i] * 1024 * 1024 / (r.gemm[0][0][2][2] * rf[i]);
    CHECK(fabs(s - want) <= 1e-12 * want, "GEMM of %.0f rows: %.9g s, want %.9g", rows[i], s, want);
  }
  // the file: factors, from_run and the CPU round trip; warnings
  lc_cpu_info cpu;
  lc_cpu_detect(&cpu);
  lc_cpu_describe(&cpu, r.cpu, sizeof r.cpu);
  r.ranks = 1, r.threads = 2;
  r.gemm_shapes.n = 2; // (the fp32 GEMM libraries' rates by shape, backend/cpu/gemm/sgemm.h)
  r.gemm_shapes.s[0] = (lc_sgemm_shape){0, 1, 2048, 576, 576, {180.5, 186.25}, 0};
  r.gemm_shapes.s[1] = (lc_sgemm_shape){1, 0, 49152, 576, 160, {136.5, 167.5}, 0};
  lc_rates_scale(&r, LC_RATE_ATTN, 0.8);
  CHECK(r.from_run == 1u << LC_RATE_ATTN && fabs(r.flash[0][0][1] - 0.8 * f64) < 1e-3 * f64, "scale: from_run %x", r.from_run);
  unlink(path);
  CHECK(lc_rates_save_machine(path, &r) == LC_OK, "save: %s", lc_errmsg());
  lc_rates g;
  CHECK(lc_rates_load_machine(path, 1, 2, &g) == LC_OK, "load: %s", lc_errmsg());
  int same = g.from_run == r.from_run && !strcmp(g.cpu, r.cpu) && !g.warning[0];
  for (int b = 0; b < 2; b++)
    for (int d = 0; d < 2; d++) {
      for (int i = 0; i < LC_RATE_NLEN; i++) same &= fabs(g.flash_len[b][d][i] - lf[i]) < 1e-4;
      for (int i = 0; i < LC_RATE_NROWS; i++) same &= fabs(g.gemm_rows[b][d][i] - rf[i]) < 1e-4;
    }
  same &= g.gemm_shapes.n == 2 && g.gemm_shapes.s[1].ta == 1 && g.gemm_shapes.s[1].tb == 0 && g.gemm_shapes.s[1].M == 49152 &&
          g.gemm_shapes.s[1].K == 160 && fabs(g.gemm_shapes.s[0].gflops[1] - 186.25) < 0.06 &&
          fabs(g.gemm_shapes.s[1].gflops[0] - 136.5) < 0.06;
  CHECK(same, "factors, GEMM shapes, from_run or cpu lost in the file (cpu '%s', warning '%s', %d shapes)", g.cpu, g.warning,
        g.gemm_shapes.n);
  char pv[256];
  CHECK(strstr(lc_rates_provenance(&g, pv, sizeof pv), "attention: corrected by a training run") != NULL, "provenance: %s", pv);
  CHECK(lc_rates_load_machine(path, 1, 4, &g) == LC_OK && strstr(g.warning, "2 threads per rank, scaled to 4"),
        "other threads: warning '%s'", g.warning);
  CHECK(lc_rates_load_machine(path, 2, 2, &g) == LC_OK && strstr(g.warning, "1 rank, this run has 2"),
        "other ranks: warning '%s'", g.warning);
  snprintf(r.cpu, sizeof r.cpu, "Imaginary CPU 9000 (family 1 model 2, L2 3 KiB)");
  CHECK(lc_rates_save_machine(path, &r) == LC_OK && lc_rates_load_machine(path, 1, 2, &g) == LC_OK &&
            strstr(g.warning, "another CPU, Imaginary CPU 9000") && strstr(g.warning, cpu.model),
        "another CPU: warning '%s'", g.warning);
  unlink(path);
  // a class scaled by f: its predicted term divided by f, the others unchanged
  lc_config c;
  lc_config_preset(&c, "bench-s");
  lc_model_opts o = {LC_CKPT_NONE, 0, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0};
  lc_time_layout l = {.seq = 4096, .batch = 1, .world = 1, .hp = 1, .cp = 1};
  lc_rates a;
  lc_rates_default(&a, 2);
  lc_time_estimate e0, e1;
  CHECK(lc_time_predict(&c, &o, &l, &a, &e0) == LC_OK, "predict: %s", lc_errmsg());
  lc_rates_scale(&a, LC_RATE_GEMM, 2.0);
  CHECK(lc_time_predict(&c, &o, &l, &a, &e1) == LC_OK, "predict: %s", lc_errmsg());
  CHECK(fabs(e1.gemm_s - e0.gemm_s / 2) <= 1e-9 * e0.gemm_s && e1.attn_kernel_s == e0.attn_kernel_s &&
            e1.elementwise_s == e0.elementwise_s && e1.optim_s == e0.optim_s,
        "GEMMs x2: gemm %.6g -> %.6g, attention %.6g -> %.6g", e0.gemm_s, e1.gemm_s, e0.attn_kernel_s, e1.attn_kernel_s);
}

// 8. --offload-optimizer (issue 34): the step grows by exactly the copies and adds the walk
// prices here (each acquire's compute copy up, each unit's gradient down over the host link
// and added on the host, 3 x 4 bytes a value) and the optimizer moves to the host's rate;
// the other terms do not change. Without a host link a copy is a memcpy at the
// element-wise rate (read + write).
static void offload_terms(void) {
  lc_config c;
  lc_config_preset(&c, "demo");
  for (int b = 0; b < 2; b++) {
    lc_model_opts o = {LC_CKPT_SELECTIVE, 0, 0, b ? 3 : 0, 0, 0, b ? LC_DT_BF16 : LC_DT_F32, NULL, 0, 0, 0};
    lc_rates r;
    flat_rates(&r, 100e9, 50e9, 10e9, 0, 1e30);
    r.optim_bw = 20e9;
    r.host_link_bw = 25e9;
    r.host_optim_bw = 5e9;
    const lc_time_estimate e0 = predict(&c, &o, 2048, 1, 1, 1, &r);
    o.offload_optimizer = 1;
    const lc_time_estimate e1 = predict(&c, &o, 2048, 1, 1, 1, &r);
    lc_ps_sizes z;
    CHECK(lc_pstore_sizes(&c, o.zero, 1, &z) == LC_OK, "sizes");
    const int n = lc_schedule_build(&c, &o, 1, NULL, 0);
    lc_event *ev = malloc(sizeof *ev * (size_t)n);
    lc_schedule_build(&c, &o, 1, ev, n);
    double up = 0, down = 0;
    for (int i = 0; i < n; i++) {
      if (ev[i].kind == LC_EV_ACQUIRE) up += (double)lc_ps_copy_bytes(&z, c.n_layers, ev[i].unit, o.precision);
      if (ev[i].kind == LC_EV_GRAD_END) down += (double)lc_ps_unit_bytes(&z, c.n_layers, ev[i].unit);
    }
    free(ev);
    const double want = up / 25e9 + down / 25e9 + 3 * down / 5e9;
    CHECK(fabs(e1.offload_s - want) <= 1e-9 * want && e0.offload_s == 0, "offload %s: %.9g s, want %.9g", b ? "bf16 z3" : "fp32",
          e1.offload_s, want);
    CHECK(fabs(e1.optim_s - e0.optim_s * 20e9 / 5e9) <= 1e-9 * e1.optim_s, "host AdamW %.6g vs %.6g", e1.optim_s, e0.optim_s);
    CHECK(fabs((e1.total_s - e0.total_s) - (e1.offload_s + e1.optim_s - e0.optim_s)) <= 1e-9 * e1.total_s &&
              e1.compute_s == e0.compute_s && fabs(e1.exposed_comm_s - e0.exposed_comm_s) <= 1e-12 * e1.total_s,
          "offload: total %.9g -> %.9g, compute %.9g -> %.9g, exposed %.9g -> %.9g, off %.9g, opt %.9g -> %.9g", e0.total_s, e1.total_s, e0.compute_s, e1.compute_s, e0.exposed_comm_s, e1.exposed_comm_s, e1.offload_s, e0.optim_s, e1.optim_s);
    r.host_link_bw = 0; // a copy in host memory: 2 x bytes at the element-wise rate
    const lc_time_estimate e2 = predict(&c, &o, 2048, 1, 1, 1, &r);
    const double want2 = 2 * (up + down) / 10e9 + 3 * down / 5e9;
    CHECK(fabs(e2.offload_s - want2) <= 1e-9 * want2, "offload without a link: %.9g s, want %.9g", e2.offload_s, want2);
  }
}

// 9. --offload-checkpoints (issue 50): one disk channel, each layer's checkpoint written at
// its put and read back at the layer above's get, L writes and L - depth reads in all. With a
// disk that moves a layer's checkpoint in half a layer's forward: full checkpointing at
// depth 2 waits for nothing (a layer's input is put before it runs), selective at depth 2
// waits that half-layer at every layer whose output needs the slot of the one just put
// (L - 2 of them), at depth 3 nothing; a disk 100x slower makes the step wait. Whatever
// waits is in the step and nothing else moves.
static void ckpt_offload_terms(void) {
  lc_config c;
  lc_config_preset(&c, "bench-s");
  const int L = c.n_layers;
  const long S = 2048;
  const struct { lc_ckpt_policy p; int depth, waits; } cs[] = {{LC_CKPT_FULL, 0, 0}, {LC_CKPT_FULL, 3, 0}, {LC_CKPT_SELECTIVE, 2, 1},
                                                              {LC_CKPT_SELECTIVE, 0, 0}, {LC_CKPT_NONE, 3, 0}};
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
    lc_model_opts o = {cs[i].p, 0, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, cs[i].depth};
    lc_rates r;
    flat_rates(&r, 100e9, 50e9, 10e9, 0, 1e30);
    lc_mem_estimate me;
    CHECK(lc_memplan_predict(&c, &o, S, 1, 1, 1, 1, &me) == LC_OK, "memplan: %s", lc_errmsg());
    const double layer = (double)me.peak[LC_MEM_CKPT] / L; // in RAM: every layer's checkpoint
    const lc_time_estimate e0 = predict(&c, &o, S, 1, 1, 1, &r);
    o.offload_dir = "/nonexistent"; // (the time model reads no directory)
    const int depth = lc_offload_depth(&o);
    r.disk_bw = layer / (0.5 * e0.layer_fwd_s);
    const lc_time_estimate e1 = predict(&c, &o, S, 1, 1, 1, &r);
    const double w = layer / r.disk_bw, want_wait = cs[i].waits ? (L - 2) * w : 0;
    CHECK(fabs(e1.ckpt_io_s - (2 * L - depth) * w) <= 1e-9 * e1.ckpt_io_s, "%s depth %d: disk busy %.9g s, want %.9g",
          lc_ckpt_name(cs[i].p), depth, e1.ckpt_io_s, (2 * L - depth) * w);
    CHECK(fabs(e1.ckpt_wait_s - want_wait) <= 1e-9 * e1.total_s, "%s depth %d: waited %.9g s, want %.9g", lc_ckpt_name(cs[i].p),
          depth, e1.ckpt_wait_s, want_wait);
    CHECK(fabs(e1.total_s - e0.total_s - e1.ckpt_wait_s) <= 1e-9 * e1.total_s && e1.compute_s == e0.compute_s &&
              fabs(e1.exposed_comm_s - e0.exposed_comm_s) <= 1e-9 * e1.total_s && e0.ckpt_io_s == 0,
          "%s depth %d: total %.9g -> %.9g (waited %.9g), compute %.9g -> %.9g", lc_ckpt_name(cs[i].p), depth, e0.total_s,
          e1.total_s, e1.ckpt_wait_s, e0.compute_s, e1.compute_s);
    r.disk_bw /= 100;
    const lc_time_estimate e2 = predict(&c, &o, S, 1, 1, 1, &r);
    CHECK(e2.ckpt_wait_s > 10 * w && fabs(e2.total_s - e0.total_s - e2.ckpt_wait_s) <= 1e-9 * e2.total_s,
          "%s depth %d: a slow disk waited %.9g s", lc_ckpt_name(cs[i].p), depth, e2.ckpt_wait_s);
    r.disk_bw = 0; // unknown: not priced
    const lc_time_estimate e3 = predict(&c, &o, S, 1, 1, 1, &r);
    CHECK(e3.ckpt_io_s == 0 && e3.total_s == e0.total_s, "%s: an unknown disk priced", lc_ckpt_name(cs[i].p));
  }
}

int main(void) {
  offload_terms();
  ckpt_offload_terms();
  lc_config cfg;
  lc_config_preset(&cfg, "demo");
  const long S = 4096;
  lc_model_opts o = {LC_CKPT_SELECTIVE, 1024, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0};
  lc_rates r, r2;
  // 1. sum rule and scaling
  flat_rates(&r, 100e9, 50e9, 10e9, 0, 1e30);
  lc_time_estimate a = predict(&cfg, &o, S, 1, 1, 1, &r);
  CHECK(fabs(a.total_s - (a.compute_s + a.optim_s + a.exposed_comm_s)) < 1e-12 * a.total_s && a.exposed_comm_s == 0,
        "one rank: total %.9g = compute %.9g + optimizer %.9g (exposed %.3g)", a.total_s, a.compute_s, a.optim_s, a.exposed_comm_s);
  // the terms: one rank's step is exactly GEMMs + attention kernels + element-wise + loss +
  // optimizer, and with only GEMMs priced (other rates infinite) the GEMM term is the
  // products' FLOPs over the rate: per layer and token 2 x (q, k, v, o, gate, up, down)
  // products' multiply-adds, x3 for backward, the selective policy's recompute of q/k/v/o
  // and gate/up, and the head's forward and backward
  {
    const double sum = a.gemm_s + a.attn_kernel_s + a.elementwise_s + a.loss_s + a.optim_s;
    CHECK(fabs(a.total_s - sum) < 1e-12 * a.total_s, "one rank: total %.12g = the terms' sum %.12g", a.total_s, sum);
    lc_rates g;
    flat_rates(&g, 100e9, 1e30, 1e30, 0, 1e30);
    lc_model_opts un = o;
    un.mlp_tile = 0;
    const lc_time_estimate e = predict(&cfg, &un, S, 1, 1, 1, &g);
    const double C = cfg.dim, HQ = (double)cfg.n_heads * cfg.head_dim, HKV = (double)cfg.n_kv_heads * cfg.head_dim;
    const double attn = C * HQ + 2 * C * HKV + HQ * C, mlp = 3 * C * cfg.ffn, head = C * cfg.vocab;
    const double fl = 2.0 * S * (cfg.n_layers * (3 * (attn + mlp) + attn + 2 * C * cfg.ffn) + 3 * head);
    CHECK(fabs(e.gemm_s - fl / 100e9) < 1e-9 * e.gemm_s && fabs(e.total_s - e.gemm_s) < 1e-6 * e.total_s,
          "GEMM term %.9g s, the FLOP formula %.9g s (step %.9g)", e.gemm_s, fl / 100e9, e.total_s);
    // LoRA (rank 16 on q, v, gate, down): the base's backward products are dX alone (x2
    // instead of x3, the head too), the adapters' products beside theirs: forward x A^T,
    // u B^T; backward x A^T again, B's two and A's two (model/lora_op.h); and the optimizer
    // sees the adapters alone.
    lc_config lc = cfg;
    const double R = 16;
    lc.lora = (lc_lora){.rank = 16, .alpha = 16,
                        .targets = (1u << LC_LORA_Q) | (1u << LC_LORA_V) | (1u << LC_LORA_GATE) | (1u << LC_LORA_DOWN)};
    const lc_time_estimate el = predict(&lc, &un, S, 1, 1, 1, &g);
    const double ad1 = (C * R + R * HQ) + (C * R + R * HKV) + (C * R + R * cfg.ffn) + (cfg.ffn * R + R * C);
    const double adA = C * R * 3 + cfg.ffn * R; // the A products (recomputed in backward)
    // per layer: forward 1x + recompute (attn + gate/up) + backward dX 1x; adapters: forward
    // (2 per product) + backward 2 (x A^T again) + 4 + 4; the head forward + dX
    const double fl_lora = 2.0 * S * (cfg.n_layers * (2 * (attn + mlp) + attn + 2 * C * cfg.ffn) + 2 * head) +
                           2.0 * S * cfg.n_layers * (ad1 * 3 + adA) + /* recompute of q/v/gate's adapters */
                           2.0 * S * cfg.n_layers * ((C * R + R * HQ) + (C * R + R * HKV) + (C * R + R * cfg.ffn));
    CHECK(fabs(el.gemm_s - fl_lora / 100e9) < 1e-9 * el.gemm_s, "LoRA GEMM term %.9g s, the FLOP formula %.9g s",
          el.gemm_s, fl_lora / 100e9);
    CHECK(el.gemm_s < e.gemm_s, "LoRA's products %.4g s not below full fine-tuning's %.4g s", el.gemm_s, e.gemm_s);
  }
  flat_rates(&r2, 200e9, 100e9, 20e9, 0, 1e30);
  lc_time_estimate b = predict(&cfg, &o, S, 1, 1, 1, &r2);
  CHECK(fabs(b.total_s - a.total_s / 2) < 1e-9 * a.total_s, "doubled rates: %.9g vs half of %.9g", b.total_s, a.total_s);
  // every policy: recompute full > selective > none (the same rates)
  double rec[3];
  for (int p = 0; p < 3; p++) {
    lc_model_opts q = o;
    q.ckpt = (lc_ckpt_policy)p;
    q.mlp_tile = 0;
    rec[p] = predict(&cfg, &q, S, 1, 1, 1, &r).recompute_s;
  }
  CHECK(rec[LC_CKPT_NONE] == 0 && rec[LC_CKPT_SELECTIVE] > 0 && rec[LC_CKPT_FULL] > rec[LC_CKPT_SELECTIVE],
        "recompute none %.3g selective %.3g full %.3g", rec[0], rec[1], rec[2]);

  // 2. Ulysses (hp 2): the all-to-alls block. The step with a slow network minus with an
  // infinitely fast one (latency 0) = layers x (forward + backward all-to-alls).
  const double lat = 5e-3, bw = 1e8;
  flat_rates(&r, 100e9, 50e9, 10e9, 0, 1e30);
  flat_rates(&r2, 100e9, 50e9, 10e9, lat, bw);
  const int hp = 2;
  const double T = (double)S / hp, D = cfg.head_dim, q = T * cfg.n_heads * D, kv = T * cfg.n_kv_heads * D;
  const double fwd = lat * (hp - 1) + (2 * q + 2 * kv) * 4 * 0.5 / bw;
  const double bwd = lat * (hp - 1) + (q * 4 + (q + 2 * kv) * 4) * 0.5 / bw + (hp - 1) * lat * 3;
  lc_time_estimate f = predict(&cfg, &o, S, 2, hp, 1, &r), s = predict(&cfg, &o, S, 2, hp, 1, &r2);
  // the gradient reduction (ZeRO 0 over 2 ranks) also slows: count it from the same formula
  lc_ps_sizes zs;
  lc_pstore_sizes(&cfg, 0, 1, &zs);
  const double total_params = (double)zs.params;
  const double red_max = 2 * lat * (cfg.n_layers + 2) + total_params / bw + 3 * 2 * lat; // upper bound: none hidden
  const double grow = s.total_s - f.total_s, a2a = cfg.n_layers * (fwd + bwd);
  CHECK(grow >= a2a - 1e-9 && grow <= a2a + red_max, "hp 2: the step grew %.6g s; all-to-alls alone %.6g (+ at most %.3g of reductions)",
        grow, a2a, red_max);

  // 3. ring (cp 2): hops hidden under the kernel change the step by only the one unhidden hop
  flat_rates(&r, 100e9, 1e9, 10e9, 1e-6, 1e12);
  flat_rates(&r2, 100e9, 1e9, 10e9, 1e-6, 0.5e12);
  lc_time_estimate h1 = predict(&cfg, &o, S, 2, 1, 2, &r), h2 = predict(&cfg, &o, S, 2, 1, 2, &r2);
  CHECK(fabs(h2.total_s - h1.total_s) < 1e-3 * h1.total_s, "hidden ring: %.6g vs %.6g s", h1.total_s, h2.total_s);
  flat_rates(&r2, 100e9, 1e9, 10e9, 1e-6, 1e6); // hops far slower than the kernel
  lc_time_estimate h3 = predict(&cfg, &o, S, 2, 1, 2, &r2);
  CHECK(h3.total_s > 1.1 * h1.total_s && h3.exposed_comm_s > 0.9 * (h3.total_s - h1.total_s),
        "exposed ring: %.6g s (hidden %.6g), exposed communication %.6g", h3.total_s, h1.total_s, h3.exposed_comm_s);

  // 4. ZeRO 3 over 2 ranks (dp 2): gathers ahead of use
  lc_model_opts z3 = o;
  z3.zero = 3, z3.zero_group = 2;
  flat_rates(&r, 100e9, 50e9, 10e9, 0, 1e15);
  lc_time_estimate g1 = predict(&cfg, &z3, S, 2, 1, 1, &r);
  CHECK(g1.exposed_comm_s < 1e-3 * g1.total_s, "fast network: exposed %.3g of %.3g", g1.exposed_comm_s, g1.total_s);
  flat_rates(&r, 100e9, 50e9, 10e9, 0, 1e6);
  lc_time_estimate g2 = predict(&cfg, &z3, S, 2, 1, 1, &r);
  CHECK(g2.exposed_comm_s > 0.5 * g2.comm_s && g2.total_s > g1.total_s, "slow network: exposed %.3g of %.3g",
        g2.exposed_comm_s, g2.comm_s);

  // 3b. packed documents on cp 4 with zigzag chunks: the ranks' attention work differs, and
  // the step waits for the slowest: the kernel seconds are those of the largest per-rank
  // work the chunk cost model counts (not the mean), and less than one causal sequence's.
  {
    const long S2 = 8192, doc = 1000;
    lc_model_opts zz = o;
    zz.cp_layout = LC_CP_ZIGZAG;
    flat_rates(&r, 100e9, 50e9, 10e9, 0, 1e30);
    lc_time_layout l = {.seq = S2, .world = 4, .hp = 1, .cp = 4, .doc_len = (int)doc};
    lc_time_estimate p1;
    CHECK(lc_time_predict(&cfg, &zz, &l, &r, &p1) == LC_OK, "packed: %s", lc_errmsg());
    int *lo = lc_time_bounds(S2, (int)doc, 0);
    lc_seq_layout L;
    double w[4], wc[4], mx = 0, mean = 0, mxc = 0;
    CHECK(lc_seq_layout_init(&L, S2, 4, 1, 2) == LC_OK, "layout");
    lc_seq_layout_work(&L, lo, w);
    lc_seq_layout_work(&L, NULL, wc);
    lc_seq_layout_free(&L);
    free(lo);
    for (int c = 0; c < 4; c++) mx = w[c] > mx ? w[c] : mx, mean += w[c] / 4, mxc = wc[c] > mxc ? wc[c] : mxc;
    const int layers = cfg.n_layers, fl_per = 4 * cfg.head_dim * cfg.n_heads; // FLOPs per (query, key) pair
    // forward + backward (2.5x) + selective recompute has no attention
    const double want_k = layers * (mx * fl_per / 50e9) * 3.5;
    CHECK(mx > 1.05 * mean && fabs(p1.attn_kernel_s - want_k) < 1e-9 * want_k,
          "packed cp 4: attention kernels %.9g s, the slowest rank's work gives %.9g (max %.4g, mean %.4g pairs)",
          p1.attn_kernel_s, want_k, mx, mean);
    CHECK(mx < mxc, "documents cut the slowest rank's work: %.4g vs causal %.4g", mx, mxc);
  }

  // 4b. ZeRO 1 over 2 data-parallel ranks: every byte it sends, from the store's sizes: one
  // reduce-scatter per unit in the (only) pass, the parameters all-gathered after the
  // update (the output: every parameter once), three small all-reduces.
  lc_model_opts z1 = o;
  z1.zero = 1, z1.zero_group = 2;
  flat_rates(&r, 100e9, 50e9, 10e9, 3e-6, 1e9);
  lc_time_estimate g3 = predict(&cfg, &z1, S, 2, 1, 1, &r);
  lc_ps_sizes s1;
  lc_pstore_sizes(&cfg, 1, 2, &s1);
  double want = lc_rates_coll_s(&r, LC_COLL_ALLGATHER, 2, (double)s1.params, 0) + 3 * lc_rates_coll_s(&r, LC_COLL_ALLREDUCE, 2, 8, 0);
  want += lc_rates_coll_s(&r, LC_COLL_REDUCE_SCATTER, 2, (double)s1.unit_embed, 0) +
          lc_rates_coll_s(&r, LC_COLL_REDUCE_SCATTER, 2, (double)s1.unit_final, 0) +
          cfg.n_layers * lc_rates_coll_s(&r, LC_COLL_REDUCE_SCATTER, 2, (double)s1.unit_layer, 0);
  CHECK(fabs(g3.comm_s - want) < 1e-9 * want, "ZeRO 1 communication %.9g s, from the sizes %.9g s (params %zu bytes)",
        g3.comm_s, want, s1.params);

  // 5. the search: every valid layout once; those over the cap dropped.
  lc_rates_default(&r, 2);
  lc_config tiny;
  lc_config_preset(&tiny, "tiny");
  lc_model_opts base = {LC_CKPT_SELECTIVE, 0, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0};
  for (int W = 1; W <= 8; W *= 2) {
    lc_search_opts so = {.world = W, .per_node = W > 2 ? 2 : 0, .threads = 1, .mem_cap = (size_t)1 << 40, .hp = -1,
                         .cp = -1, .zero = -1, .zero_group = -1, .ckpt = -1, .bf16 = -1, .context_first = -1};
    int expect = 0;
    for (int hp = 1; hp <= W; hp++)
      for (int cp = 1; cp * hp <= W; cp++) {
        if (W % (hp * cp) || lc_layout_validate(W, hp, cp, cp, tiny.n_heads, tiny.n_kv_heads, 256, W / (hp * cp)) != LC_OK) continue;
        const int places = hp > 1 && cp > 1 ? 2 : 1;
        const int zeros = W == 1 ? 1 : 1 + 3 * (so.per_node > 0 && so.per_node < W ? 2 : 1);
        expect += places * zeros * 3 * 2;
      }
    lc_layout_choice out[512];
    int nv = 0, nf = 0;
    int k = lc_layout_search(&tiny, &base, 256, &so, &r, out, 512, &nv, &nf, NULL);
    CHECK(nv == expect && nf == expect && k == expect, "world %d: %d valid, %d fit (brute force %d)", W, nv, nf, expect);
    for (int i = 1; i < k; i++)
      CHECK(out[i - 1].t.tokens_per_s >= out[i].t.tokens_per_s, "world %d: not sorted at %d", W, i);
    // a cap between the smallest and largest peaks: exactly those at or under it kept
    size_t lo = SIZE_MAX, hi = 0;
    for (int i = 0; i < k; i++) lo = out[i].peak < lo ? out[i].peak : lo, hi = out[i].peak > hi ? out[i].peak : hi;
    so.mem_cap = lo + (hi - lo) / 2;
    int under = 0;
    for (int i = 0; i < k; i++) under += out[i].peak <= so.mem_cap;
    lc_layout_choice cut[512];
    int k2 = lc_layout_search(&tiny, &base, 256, &so, &r, cut, 512, &nv, &nf, NULL);
    // (a layout over the cap with all heads at once may fit with Ulysses head chunks: kept)
    CHECK(k2 >= under && k2 < k && nf == k2, "world %d cap %zu: %d kept of %d, %d under it unchunked", W, so.mem_cap, k2, k, under);
    for (int i = 0; i < k2; i++) {
      lc_mem_estimate e;
      lc_memplan_predict_hc(&tiny, &cut[i].o, 256, cut[i].hp, cut[i].cp, cut[i].cp, cut[i].head_chunk, 1, &e);
      CHECK(cut[i].peak <= so.mem_cap && cut[i].peak == e.total, "world %d: kept peak %zu (model %zu, cap %zu)", W,
            cut[i].peak, e.total, so.mem_cap);
    }
  }

  // 6. machine file round trip
  char path[64];
  snprintf(path, sizeof path, "/tmp/lc_test_machine_%d.json", (int)getpid());
  lc_rates_default(&r, 2);
  r.ranks = 2, r.threads = 1, r.gemm[1][0][2][3] = 123.45e9, r.coll[LC_COLL_ALLTOALL] = (lc_link){3.5e-6, 2.25e9};
  r.optim_bw = 16.25e9, r.loss_bw = 21.5e9;
  snprintf(r.cpu, sizeof r.cpu, "test cpu");
  CHECK(lc_rates_save_machine(path, &r) == LC_OK, "save: %s", lc_errmsg());
  lc_rates one;
  lc_rates_default(&one, 2);
  one.threads = 2;
  snprintf(one.cpu, sizeof one.cpu, "test cpu");
  CHECK(lc_rates_save_machine(path, &one) == LC_OK, "save 2: %s", lc_errmsg());
  CHECK(lc_rates_load_machine(path, 2, 1, &r2) == LC_OK, "load: %s", lc_errmsg());
  CHECK(r2.ranks == 2 && r2.threads == 1 && fabs(r2.gemm[1][0][2][3] - 123.45e9) < 1e7 &&
            fabs(r2.coll[LC_COLL_ALLTOALL].lat_s - 3.5e-6) < 1e-8 && fabs(r2.coll[LC_COLL_ALLTOALL].bw - 2.25e9) < 1e7,
        "round trip: %d x %d, %.4g, %.4g, %.4g", r2.ranks, r2.threads, r2.gemm[1][0][2][3], r2.coll[LC_COLL_ALLTOALL].lat_s,
        r2.coll[LC_COLL_ALLTOALL].bw);
  CHECK(fabs(r2.optim_bw - 16.25e9) < 1e7 && fabs(r2.loss_bw - 21.5e9) < 1e7 && !strstr(r2.source, "calibrate again"),
        "optimizer and loss rates round trip: %.4g %.4g (%s)", r2.optim_bw, r2.loss_bw, r2.source);
  { // a profile written before those rates: the element-wise rate prices them, and the source says so
    char old_path[80];
    snprintf(old_path, sizeof old_path, "/tmp/lc_test_machine_old_%d.json", (int)getpid());
    FILE *in = fopen(path, "r"), *out = fopen(old_path, "w");
    char line[1 << 16];
    size_t got = in ? fread(line, 1, sizeof line - 1, in) : 0;
    line[got] = 0;
    for (char *q; (q = strstr(line, "\"optimizer_gbs\"")) || (q = strstr(line, "\"loss_gbs\""));) q[1] = 'x'; // unknown keys
    if (out) fputs(line, out);
    if (in) fclose(in);
    if (out) fclose(out);
    lc_rates ro;
    CHECK(lc_rates_load_machine(old_path, 2, 1, &ro) == LC_OK && ro.optim_bw == 0 && ro.loss_bw == 0 &&
              strstr(ro.source, "no optimizer/loss rates: calibrate again") &&
              lc_rates_optim_s(&ro, 1e9) == lc_rates_ew_s(&ro, 1e9) && lc_rates_loss_s(&ro, 1e9) == lc_rates_ew_s(&ro, 1e9),
          "an older profile: %.4g %.4g (%s)", ro.optim_bw, ro.loss_bw, ro.source);
    unlink(old_path);
  }
  CHECK(lc_rates_load_machine(path, 1, 2, &r2) == LC_OK && r2.ranks == 1 && r2.threads == 2, "the 1 x 2 profile");
  // no exact pair: the same threads per rank with the nearest ranks (4 x 1 -> 2 x 1, not 1 x 2)
  CHECK(lc_rates_load_machine(path, 4, 1, &r2) == LC_OK && r2.ranks == 2 && r2.threads == 1 &&
            fabs(r2.gemm[1][0][2][3] - 123.45e9) < 1e7 && strstr(r2.source, "nearest rank count"),
        "4 x 1 took %d x %d (%s)", r2.ranks, r2.threads, r2.source);
  // other threads per rank only: the closest ranks, compute scaled by the thread ratio (1 x 4 from 1 x 2: x2)
  CHECK(lc_rates_load_machine(path, 1, 4, &r2) == LC_OK && r2.ranks == 1 && r2.threads == 2 &&
            fabs(r2.gemm[0][0][2][2] - 2 * one.gemm[0][0][2][2]) < 2e7 && fabs(r2.ew_bw - 2 * one.ew_bw) < 2e7 &&
            strstr(r2.source, "scaled to 4 threads"),
        "1 x 4: %d x %d, gemm %.4g (profile %.4g), %s", r2.ranks, r2.threads, r2.gemm[0][0][2][2], one.gemm[0][0][2][2],
        r2.source);
  CHECK(lc_rates_load_machine("/nonexistent/m.json", 1, 1, &r2) == LC_EIO && strstr(lc_errmsg(), "calibrate"),
        "missing file: %s", lc_errmsg());
  unlink(path);
  rates_by_shape(path);
  return lc_test_finish("test_timemodel");
}
