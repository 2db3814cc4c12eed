// Distributed equivalence, run under `mpirun -np N mpi_dist N`:
//  A. the distributed attention (out, LSE, dq, dk, dv) equals the single-process kernel
//     on the same full inputs, for every layout of N ranks (Ulysses, ring, 2D, double
//     ring; both placements; GQA with kv heads < hp);
//  B. a whole training step (loss and every parameter gradient) under each layout,
//     with data parallelism and with selective checkpointing + tiles, equals one process;
//  C. token layout round trip (shard then gather is the identity) and layout errors;
//  F. loss masks (conversations): a step over a masked token file where one rank and one
//     sequence (and, under dp, one group) have no counted target equals one process;
//     so do 3 steps of ZeRO 1, 2 and 3 over the world on it (dp, cp, 2D), a step with no
//     counted target skipped alike.
// Every rank checks its own part. A failed check ends the whole job at once (MPI_Abort)
// after printing it: the other ranks would otherwise wait in their next collective until
// ctest's timeout. `mpi_dist N --planted-failure` checks that (ctest mpi_dist_abort).
#include <mpi.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

static void abort_on_fail(const char *file, int line) {
  int r = -1, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  fprintf(stderr, "mpi_dist: rank %d of %d: the check at %s:%d (above) failed; ending every rank now (MPI_Abort)\n",
          r, n, file, line);
  fflush(stderr);
  fflush(stdout);
  MPI_Abort(MPI_COMM_WORLD, 1);
}
#define LC_T_ON_FAIL(file, line) abort_on_fail(file, line)

#include "attn/attn.h"
#include "backend/cpu/flash/flash.h"
#include "attn/seqlayout.h"
#include "backend/cpu/cpu_backend.h"
#include "comm/grid.h"
#include "io/tokfile.h"
#include "layoutcount.h"
#include "qbase_layout.h"
#include "model/arch.h"
#include "model/memplan.h"
#include "backend/cpu/ops/dropout.h"
#include "train/trainer.h"
#include "testutil.h"
#include "backend/cpu/kern/kernels.h"
#include "backend_update.h"

static int rank0;
static lc_comm *world;
typedef struct {
  int hp, cp, w;
} layout;
static int skipped_case(const char *what);
static int odd_world_skip(layout L);

// The strategies take backend buffers (attn.h): these tests' host arrays, wrapped for a CPU
// backend over the call's arena (T local tokens; 2-byte q, k, v, out, dout when in->bf16).
static lc_status attn_fwd_host(lc_attn *a, const lc_attn_in *in, void *out, void *saved, const void *q, const void *k, const void *v, int T,
                               lc_arena *ar) {
  lc_backend be;
  lc_backend_cpu_init(&be, ar);
  a->be = &be;
  const lc_dtype dt = in->bf16 ? LC_DT_BF16 : LC_DT_F32;
  const size_t nq = (size_t)T * a->Hq * a->D, nk = (size_t)T * a->Hkv * a->D;
  const lc_status st = a->fwd(a, in, lc_buf_wrap_host(&be, out, nq, dt),
                              lc_buf_wrap_host(&be, saved, a->saved_bytes(a, T, in->bf16), LC_DT_U8),
                              lc_buf_wrap_host(&be, q, nq, dt), lc_buf_wrap_host(&be, k, nk, dt),
                              lc_buf_wrap_host(&be, v, nk, dt), T);
  a->be = NULL;
  return st;
}
static lc_status attn_bwd_host(lc_attn *a, const lc_attn_in *in, float *dq, float *dk, float *dv, const void *dout, const void *out,
                               const void *saved, const void *q, const void *k, const void *v, int T, lc_arena *ar) {
  lc_backend be;
  lc_backend_cpu_init(&be, ar);
  a->be = &be;
  const lc_dtype dt = in->bf16 ? LC_DT_BF16 : LC_DT_F32, f = LC_DT_F32;
  const size_t nq = (size_t)T * a->Hq * a->D, nk = (size_t)T * a->Hkv * a->D;
  const lc_status st =
      a->bwd(a, in, lc_buf_wrap_host(&be, dq, nq, f), lc_buf_wrap_host(&be, dk, nk, f), lc_buf_wrap_host(&be, dv, nk, f),
             lc_buf_wrap_host(&be, dout, nq, dt), lc_buf_wrap_host(&be, out, nq, dt),
             lc_buf_wrap_host(&be, saved, a->saved_bytes(a, T, in->bf16), LC_DT_U8), lc_buf_wrap_host(&be, q, nq, dt),
             lc_buf_wrap_host(&be, k, nk, dt), lc_buf_wrap_host(&be, v, nk, dt), T);
  a->be = NULL;
  return st;
}

// Max |a - b| over max |b|: the error relative to the tensor's scale.
static double rel_err_floor(const float *a, const float *b, size_t n, double floor) {
  double e = 0, m = floor;
  for (size_t i = 0; i < n; i++) {
    e = fmax(e, fabs((double)a[i] - b[i]));
    m = fmax(m, fabs((double)b[i]));
  }
  return m > 0 ? e / m : e;
}
static double rel_err(const float *a, const float *b, size_t n) { return rel_err_floor(a, b, n, 0); }

// ||a - b|| / ||b|| (L2): small for a few flipped bf16 roundings, large for an error that
// touches every element.
static double rel_l2(const float *a, const float *b, size_t n) {
  double e = 0, m = 0;
  for (size_t i = 0; i < n; i++) {
    const double d = (double)a[i] - b[i];
    e += d * d, m += (double)b[i] * b[i];
  }
  return m > 0 ? sqrt(e / m) : sqrt(e);
}

// ---------------------------------------------------------------- A. attention
// rows: tokens per (half-chunk, head rank) slice, so the ring's chunks hold Lc = hp * rows
// query rows. 12 is uneven against the kernel's 64-row blocks; Lc > 256 crosses the
// ring's 256-row poll tiles (lc_ring.poll_rows), as every run with S / (2 cp) > 256 does.
// bf16: inputs are bf16 values and the strategy rounds its output (attn.h); the reference
// rounds its output the same way before its backward.
static void test_attention_rows(layout L, lc_placement pl, int Hq, int Hkv, int D, long rows, int bf16) {
  const long SS = 2L * L.cp * L.hp * rows;
  const int N = world->size;
  if (L.hp * L.cp != N || skipped_case("attention")) return;
  lc_arena ar;
  lc_arena_init(&ar, 0);
  // Full inputs, identical on every rank.
  lc_rng r;
  lc_rng_seed(&r, 1000 + L.hp * 10 + L.cp);
  size_t nq = (size_t)SS * Hq * D, nk = (size_t)SS * Hkv * D;
  float *q = lc_t_randn(&r, (long)nq, 1.0f), *k = lc_t_randn(&r, (long)nk, 1.0f),
        *v = lc_t_randn(&r, (long)nk, 1.0f), *dout = lc_t_randn(&r, (long)nq, 1.0f);
  if (bf16) lc_bf16_round(q, nq), lc_bf16_round(k, nk), lc_bf16_round(v, nk), lc_bf16_round(dout, nq);
  float *o = malloc(4 * nq), *lse = malloc(4 * (size_t)Hq * SS), *delta = malloc(4 * (size_t)Hq * SS);
  float *dq = calloc(nq, 4), *dk = calloc(nk, 4), *dv = calloc(nk, 4);
  lc_attn_shape s = {.Tq = (int)SS, .Tk = (int)SS, .Hq = Hq, .Hkv = Hkv, .D = D, .causal = 1,
                     .scale = 1.0f / sqrtf((float)D), .bf16 = bf16};
  CHECK(lc_flash_fwd(o, lse, q, k, v, &s, &ar) == LC_OK, "reference fwd");
  if (bf16) lc_bf16_round(o, nq);
  lc_attn_delta(delta, dout, o, (int)SS, Hq, D);
  CHECK(lc_flash_bwd(dq, dk, dv, dout, q, k, v, lse, delta, &s, &ar) == LC_OK, "reference bwd");

  lc_grid g;
  CHECK(lc_grid_create(&g, world, L.hp, L.cp, L.w, pl) == LC_OK, "grid: %s", lc_errmsg());
  lc_attn at;
  CHECK(lc_attn_2d_init(&at, g.head, g.ctx, L.w, SS, 2, Hq, Hkv, D, 0) == LC_OK, "attn init");
  const lc_attn_in ain = {.bf16 = bf16};
  const int T = (int)(SS / N);
  float *ql = malloc(4 * (size_t)T * Hq * D), *kl = malloc(4 * (size_t)T * Hkv * D),
        *vl = malloc(4 * (size_t)T * Hkv * D), *dol = malloc(4 * (size_t)T * Hq * D);
  float *ol = malloc(4 * (size_t)T * Hq * D), *dql = malloc(4 * (size_t)T * Hq * D),
        *dkl = malloc(4 * (size_t)T * Hkv * D), *dvl = malloc(4 * (size_t)T * Hkv * D);
  float *ref_o = malloc(4 * (size_t)T * Hq * D), *ref_dq = malloc(4 * (size_t)T * Hq * D),
        *ref_dk = malloc(4 * (size_t)T * Hkv * D), *ref_dv = malloc(4 * (size_t)T * Hkv * D);
  long *gi = malloc(sizeof(long) * T);
  lc_seq_layout zz; // the strategy's default layout: zigzag, 2 chunks per context rank
  CHECK(lc_seq_layout_init(&zz, SS, L.cp, L.hp, 2) == LC_OK, "layout: %s", lc_errmsg());
  for (int t = 0; t < T; t++) {
    gi[t] = lc_seq_layout_global(&zz, g.c, g.h, t);
    memcpy(ql + (size_t)t * Hq * D, q + gi[t] * Hq * D, 4 * (size_t)Hq * D);
    memcpy(dol + (size_t)t * Hq * D, dout + gi[t] * Hq * D, 4 * (size_t)Hq * D);
    memcpy(kl + (size_t)t * Hkv * D, k + gi[t] * Hkv * D, 4 * (size_t)Hkv * D);
    memcpy(vl + (size_t)t * Hkv * D, v + gi[t] * Hkv * D, 4 * (size_t)Hkv * D);
    memcpy(ref_o + (size_t)t * Hq * D, o + gi[t] * Hq * D, 4 * (size_t)Hq * D);
    memcpy(ref_dq + (size_t)t * Hq * D, dq + gi[t] * Hq * D, 4 * (size_t)Hq * D);
    memcpy(ref_dk + (size_t)t * Hkv * D, dk + gi[t] * Hkv * D, 4 * (size_t)Hkv * D);
    memcpy(ref_dv + (size_t)t * Hkv * D, dv + gi[t] * Hkv * D, 4 * (size_t)Hkv * D);
  }
  void *saved = malloc(at.saved_bytes(&at, T, bf16));
  // The memory model's sizes of this strategy (lc_attn_2d_mem) are what each call holds
  // at its peak, per category, in forward and in backward separately.
  lc_attn_mem am;
  CHECK(lc_attn_2d_mem(L.hp, L.cp, L.w, SS, 2, Hq, Hkv, D, 0, 0, bf16, &am) == LC_OK, "attn mem: %s", lc_errmsg());
  CHECK(am.saved == at.saved_bytes(&at, T, bf16), "saved bytes %zu vs %zu", am.saved, at.saved_bytes(&at, T, bf16));
  // bf16: the strategy's q, k, v, dout and out are 2-byte arrays (attn.h); ol gets out widened.
  const size_t tq = (size_t)T * Hq * D, tk = (size_t)T * Hkv * D;
  uint16_t *q16 = malloc(2 * tq), *k16 = malloc(2 * tk), *v16 = malloc(2 * tk), *do16 = malloc(2 * tq), *o16 = malloc(2 * tq);
  lc_bf16_pack(q16, ql, tq), lc_bf16_pack(k16, kl, tk), lc_bf16_pack(v16, vl, tk), lc_bf16_pack(do16, dol, tq);
  const void *qi = bf16 ? (const void *)q16 : ql, *ki = bf16 ? (const void *)k16 : kl, *vi = bf16 ? (const void *)v16 : vl,
             *di = bf16 ? (const void *)do16 : dol;
  void *oi = bf16 ? (void *)o16 : ol;
  lc_arena_reset_peaks(&ar);
  lc_status st = attn_fwd_host(&at, &ain, oi, saved, qi, ki, vi, T, &ar);
  CHECK(st == LC_OK, "dist fwd: %s", lc_errmsg());
  if (bf16) lc_bf16_unpack(ol, o16, tq);
  CHECK(ar.peak[LC_MEM_COMM] == am.fwd_comm && ar.peak[LC_MEM_SCRATCH] == am.fwd_scratch,
        "hp %d cp %d w %d forward: comm %zu scratch %zu bytes, memory model %zu, %zu", L.hp, L.cp, L.w,
        ar.peak[LC_MEM_COMM], ar.peak[LC_MEM_SCRATCH], am.fwd_comm, am.fwd_scratch);
  lc_arena_reset_peaks(&ar);
  st = attn_bwd_host(&at, &ain, dql, dkl, dvl, di, oi, saved, qi, ki, vi, T, &ar);
  CHECK(st == LC_OK, "dist bwd: %s", lc_errmsg());
  CHECK(ar.peak[LC_MEM_COMM] == am.bwd_comm && ar.peak[LC_MEM_SCRATCH] == am.bwd_scratch,
        "hp %d cp %d w %d backward: comm %zu scratch %zu bytes, memory model %zu, %zu", L.hp, L.cp, L.w,
        ar.peak[LC_MEM_COMM], ar.peak[LC_MEM_SCRATCH], am.bwd_comm, am.bwd_scratch);
  // The LSE lives in head layout: [2 chunks][Hq/hp heads][S/(2cp) rows] of context rank c.
  const int Hl = Hq / L.hp;
  const long Lc = SS / (2 * L.cp);
  double e_lse = 0;
  const float *dl = saved;
  for (int a = 0; a < 2; a++)
    for (int h = 0; h < Hl; h++)
      for (long i = 0; i < Lc; i++) {
        long pos = (a == 0 ? g.c : 2 * L.cp - 1 - g.c) * Lc + i;
        double ref = lse[(size_t)(g.h * Hl + h) * SS + pos];
        e_lse = fmax(e_lse, fabs(dl[((size_t)a * Hl + h) * Lc + i] - ref) / (1 + fabs(ref)));
      }
  // fp32 throughout; the distributed path sums in another order (LSE merges across ring
  // steps, dk/dv partials summed across ranks): errors ~1e-7..1e-6 relative to each
  // tensor's scale. Bound 2e-5 (a wrong mask, chunk or head mapping gives O(1e-1..1)).
  const double tol = 2e-5;
  double e[5] = {rel_err(ol, ref_o, (size_t)T * Hq * D), e_lse, rel_err(dql, ref_dq, (size_t)T * Hq * D),
                 rel_err(dkl, ref_dk, (size_t)T * Hkv * D), rel_err(dvl, ref_dv, (size_t)T * Hkv * D)};
  const char *nm[5] = {"out", "lse", "dq", "dk", "dv"};
  if (bf16) {
    // The output is rounded where it is made: every value a bf16 value, equal to the
    // reference's except where the fp32 sum-order difference (~1e-7) crossed a rounding
    // boundary (probability ~1e-7 / 2^-9 per value: a handful at most), each such value
    // one bf16 step (2^-8 relative) away. Bound: at most 0.1% of values differ, by <= 2^-7
    // of the tensor's largest entry.
    long nb = 0, ndiff = 0;
    for (size_t i = 0; i < (size_t)T * Hq * D; i++) {
      uint32_t u;
      memcpy(&u, &ol[i], 4);
      nb += (u & 0xffffu) != 0;
      ndiff += ol[i] != ref_o[i];
    }
    CHECK(nb == 0, "attention bf16 hp %d cp %d: %ld output values are not bf16 values", L.hp, L.cp, nb);
    CHECK(ndiff <= (long)T * Hq * D / 1000 + 1 && e[0] <= 1.0 / 128, "attention bf16 hp %d cp %d w %d: %ld outputs "
          "differ from the reference's (worst %.3g)", L.hp, L.cp, L.w, ndiff, e[0]);
    // Gradients: the bf16 kernel rounds P and dS to bf16, and P is recomputed from the
    // LSE, which the layouts merge in another order (fp32 rounding): a dS value near a
    // rounding boundary lands one bf16 step (2^-8 relative) apart, with probability ~2^-15
    // each, and the rows of a flipped output value differ too. Measured relative L2 up to
    // 1.3e-4 (8 ranks); bound 5e-4, still 4x below a backward that reads another output
    // than the one returned (~2^-9 on every row).
    e[0] = 0;
    e[2] = rel_l2(dql, ref_dq, (size_t)T * Hq * D);
    e[3] = rel_l2(dkl, ref_dk, (size_t)T * Hkv * D);
    e[4] = rel_l2(dvl, ref_dv, (size_t)T * Hkv * D);
  }
  for (int x = 0; x < 5; x++)
    CHECK(e[x] <= (bf16 && x >= 2 ? 5e-4 : tol), "attention hp %d cp %d w %d %s Hq %d Hkv %d rank %d%s: %s error %.3g",
          L.hp, L.cp, L.w, lc_placement_name(pl), Hq, Hkv, world->rank, bf16 ? " bf16" : "", nm[x], e[x]);
  double worst = 0;
  for (int x = 0; x < 5; x++) worst = fmax(worst, e[x]);
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (rank0)
    printf("attention %-14s hp %d cp %d w %d Hq %d Hkv %d S %ld%s: worst rel error %.2e\n",
           lc_placement_name(pl), L.hp, L.cp, L.w, Hq, Hkv, SS, bf16 ? " bf16 (gradients: L2)" : "", worst);
  CHECK(ar.cur_total == 0, "arena balanced");
  free(saved), free(gi), free(q16), free(k16), free(v16), free(do16), free(o16);
  lc_seq_layout_free(&zz);
  free(ql), free(kl), free(vl), free(dol), free(ol), free(dql), free(dkl), free(dvl);
  free(ref_o), free(ref_dq), free(ref_dk), free(ref_dv);
  free(q), free(k), free(v), free(dout), free(o), free(lse), free(delta), free(dq), free(dk), free(dv);
  lc_attn_2d_free(&at);
  lc_grid_destroy(&g);
}

static void test_attention(layout L, lc_placement pl, int Hq, int Hkv) {
  test_attention_rows(L, pl, Hq, Hkv, 16, 12, 0);
}

// ---------------------------------------------------------------- B. training step
// A bound by precision. bf16: the layouts do the same arithmetic as one process but sum
// attention (ring merges), gradients (all-reduce, reduce-scatter) and GEMM blocks in
// another order; the fp32 differences (~1e-7 relative) are then rounded to bf16 at the
// rounding points, where a value near a rounding boundary lands on the neighbouring bf16
// value (2^-8 relative for that element). The bf16 bounds allow for a few such flips.
static double tol(const lc_model_opts *mo, double fp32, double bf16) {
  return mo->precision == LC_DT_BF16 ? bf16 : fp32;
}

typedef struct {
  lc_model_opts mo;
  int kv_heads; // 2 (GQA) or 1 (replicated on every head rank when hp > 1)
  float clip;   // 0: grads compared as computed; > 0: below the norm, the clipped update
  int steps;
  int family;   // FAM_*: the model family and its RoPE
  int head_chunk; // --head-chunk of the distributed run (0: all heads at once)
  int lora;       // > 0: LoRA of that rank on every projection (alpha 2 x rank), base frozen
} step_case;

// test_zero's LoRA rank (its cases share one signature; 0: none), and whether LoRA cases
// hold the frozen base in bf16 (--base-dtype bf16).
static int zero_lora, lora_base16;
// LoRA cases' dropout on the adapters' input (0: none): the mask follows each token's place
// in its sequence, so every layout must still equal one process.
static float lora_drop;
// QLoRA cases: the base's projections in blocks (layer 0 Q8_0, layer 1 Q4_1; those whose
// rows are not whole 32-blocks dense), the embedding Q8_0, an untied head Q4_1, filled by fill_blocks (the trainer leaves a base in
// blocks to its file).
static int lora_qbase;
// The kernel level a test_zero case runs at, named in its tag when it is not the default.
static const char *kern_note = "";

// The best level this CPU runs whose bf16 GEMMs take the other path than the level in use
// (oneDNN's native bf16 GEMM at the bf16 and amx levels, sgemm on widened operands below),
// or -1 where the CPU has one path only.
static int other_gemm_path(void) {
  lc_cpu_info c;
  lc_cpu_detect(&c);
  const int native = lc_kern()->gemm_bf16 != NULL;
  for (int l = LC_KERN_LEVELS - 1; l >= 0; l--)
    if (lc_kern_supported((lc_kern_level)l, &c) && (lc_kern_table((lc_kern_level)l)->gemm_bf16 != NULL) != native) return l;
  return -1;
}

// Random valid blocks for every tensor the base holds in blocks, the same on every rank and
// in the reference: random quants, f16 scales of ~2^-12 (Q8_0: |w| <= 0.06) and 2^-9 with a
// minimum near -2^-6 (Q4_1: w in about [-0.03, 0.015]).
static void fill_blocks(lc_model *m) {
  for (int t = 0; t < m->ps.lay.n_tensors; t++) {
    const lc_dtype d = lc_pstore_held_dtype(&m->ps, t);
    if (!lc_dtype_is_quant(d)) continue;
    const size_t n = lc_bytes(d, m->ps.lay.table[t].numel), bb = lc_dtype_block_bytes(d);
    unsigned char *b = malloc(n);
    lc_rng r;
    lc_rng_seed(&r, 1000 + (uint64_t)t);
    for (size_t j = 0; j < n; j++) b[j] = (unsigned char)(lc_rng_uniform(&r) * 256);
    for (size_t k = 0; k < n; k += bb) {
      const unsigned mant = (unsigned)(lc_rng_uniform(&r) * 1024) & 0x3ff;
      const uint16_t dd = (uint16_t)((d == LC_DT_Q8_0 ? 3u << 10 : 6u << 10) | mant | (d == LC_DT_Q8_0 && (b[k + 2] & 1) ? 0x8000u : 0));
      const uint16_t mm = (uint16_t)(0x8000u | 9u << 10 | mant); // about -7.5 d: centred
      memcpy(b + k, &dd, 2);
      if (d == LC_DT_Q4_1) memcpy(b + k + 2, &mm, 2);
    }
    CHECK(lc_pstore_set_tensor_raw(&m->ps, t, 0, b, n) == LC_OK, "blocks: %s", lc_errmsg());
    free(b);
  }
}

// The test model as another family (model/arch.h): Qwen2 (q/k/v biases, tied) with dynamic
// NTK RoPE past a max_position_embeddings of 32 (the whole sequence's length sets the
// frequencies on every rank alike), Qwen3 (per-head q/k norms, head_dim 12 != 64/8,
// attention_bias: q/k/v/o biases) with YaRN.
enum { FAM_LLAMA = 0, FAM_QWEN2 = 2, FAM_QWEN3 = 3 };
static void apply_family(lc_config *c, int family) {
  if (family == FAM_QWEN2) {
    lc_arch_apply(c, lc_arch_get(LC_ARCH_QWEN2), 0);
    c->tie_embeddings = 1;
    c->max_pos = 32;
    c->rope = (lc_rope_scaling){.type = LC_ROPE_DYNAMIC, .factor = 2};
  } else if (family == FAM_QWEN3) {
    lc_arch_apply(c, lc_arch_get(LC_ARCH_QWEN3), 1);
    c->head_dim = 12;
    c->max_pos = 256;
    c->rope = (lc_rope_scaling){.type = LC_ROPE_YARN, .factor = 4, .orig_max = 16, .beta_fast = 32, .beta_slow = 1, .truncate = 1};
  }
}
static const char *family_name(int family) { return family == FAM_QWEN2 ? " qwen2" : family == FAM_QWEN3 ? " qwen3" : ""; }

// Masked cases (section F): the step reads this version 3 token file from sample mask_first
// (mask_path empty: task:copy).
static char mask_path[256];
static uint64_t mask_first;

static lc_train_opts step_opts(int hp, int cp, int w, lc_placement pl, int batch, const step_case *c) {
  lc_train_opts o;
  lc_train_opts_init(&o);
  lc_config_preset(&o.cfg, "tiny");
  // GQA with more heads than the preset: 8 query heads, 2 kv heads, head_dim 8.
  o.cfg.n_heads = 8;
  o.cfg.n_kv_heads = c->kv_heads;
  o.cfg.head_dim = 8;
  o.cfg.rope_theta = 1000.0;
  apply_family(&o.cfg, c->family);
  o.mopts = c->mo;
  o.data_spec = mask_path[0] ? mask_path : "task:copy";
  o.seq = 64;
  o.batch = batch;
  o.steps = c->steps;
  o.lr = 1e-3f;
  o.warmup = 0;
  o.clip = c->clip;
  o.wd = 0.1f;
  // AdamW's first update is lr * g / (|g| + eps): with the default eps 1e-8 a gradient
  // entry within rounding of 0 may flip the update's sign. eps 1e-4 keeps the update a
  // smooth function of g (error <= lr * |dg| / eps ~ 1e-7 absolute for |dg| ~ 1e-8).
  o.eps = 1e-4f;
  // bf16: gradients differ from one process by a few bf16 flips (~1e-3 of a tensor's
  // largest entry); eps 1e-2 keeps their effect on the update below 1e-4 (lr * dg / eps).
  if (c->mo.precision == LC_DT_BF16) o.eps = 1e-2f;
  o.seed = 5;
  o.hp = hp, o.cp = cp, o.window = w, o.placement = pl;
  o.head_chunk = hp > 1 ? c->head_chunk : 0;
  // LoRA: the adapters train (B starts at zero, so A's gradient is zero in the first step:
  // the cases run at least 2 steps); alpha 2r, a scale of 2.
  if (c->lora > 0)
    o.cfg.lora = (lc_lora){.rank = c->lora, .alpha = 2.0f * c->lora, .targets = LC_LORA_ALL, .base_bf16 = lora_base16,
                           .dropout = lora_drop};
  if (c->lora > 0 && lora_qbase) {
    o.cfg.lora.base_bf16 = c->mo.precision == LC_DT_BF16; // (the other weights in the pass's precision)
    for (int l = 0; l < o.cfg.n_layers; l++)
      for (int p = 0; p < LC_LORA_N; p++) {
        const int cols = p == LC_LORA_O ? o.cfg.n_heads * o.cfg.head_dim : p == LC_LORA_DOWN ? o.cfg.ffn : o.cfg.dim;
        if (cols % 32 == 0) o.cfg.base_q[l][p] = l % 2 ? LC_DT_Q4_1 : LC_DT_Q8_0;
      }
    o.cfg.base_q_embed = LC_DT_Q8_0, o.cfg.base_q_head = LC_DT_Q4_1; // (a tied head is the embedding)
  }
  return o;
}

// The same step under a layout and on one process: loss, grad norm, every gradient, the
// updated parameters, arena peaks equal to the memory model, identical replicas, and
// the attention bytes of the formulas.
// MPI_DIST_ONLY=TAG[,TAG...] runs only the step and ZeRO cases of those tags and the
// sections so named ("layout", "attention", "offload", "packed", "chunks", "segments", "masked",
// "backend-update", "private"): for debugging one case, and for the 3-rank run
// (tests/mpi.cmake), which runs only the ZeRO-3 QLoRA cases with a zero group of 3.
static int skipped_case(const char *what) {
  const char *only = getenv("MPI_DIST_ONLY");
  if (!only || !*only) return 0;
  const size_t n = strlen(what);
  for (const char *t = only; *t;) {
    const char *e = strchr(t, ',');
    const size_t len = e ? (size_t)(e - t) : strlen(t);
    if (len == n && !strncmp(t, what, n)) return 0;
    if (!e) break;
    t = e + 1;
  }
  return 1;
}
// An odd number of ranks (3) splits into no sequence-parallel layout of these tests: hp or
// cp would be odd, and their models' 4 heads and 64- or 128-token sequences (2 cp hp must
// divide S) allow none. Such layouts are skipped there; data parallelism and ZeRO over all
// ranks (zero groups of 3) run.
static int odd_world_skip(layout L) { return world->size % 2 && L.hp * L.cp > 1; }

static void test_step_case(layout L, lc_placement pl, int dp, const step_case *c, const char *what) {
  if (L.hp * L.cp * dp != world->size || skipped_case(what) || odd_world_skip(L)) return;
  int batch = 2 * dp;
  // Reference: one process, same batch.
  lc_comm *self;
  lc_comm_self(&self);
  lc_train_opts ro = step_opts(1, 1, 1, pl, batch, c);
  lc_trainer ref;
  CHECK(lc_trainer_init(&ref, &ro, self) == LC_OK, "reference init: %s", lc_errmsg());
  if (lora_qbase) fill_blocks(&ref.model);
  if (mask_path[0]) ref.next_sample = mask_first;
  lc_step_metrics rm;
  for (int k = 0; k < c->steps; k++) CHECK(lc_trainer_step(&ref, &rm) == LC_OK, "reference step: %s", lc_errmsg());
  lc_train_opts o = step_opts(L.hp, L.cp, L.w, pl, batch, c);
  lc_trainer tr;
  CHECK(lc_trainer_init(&tr, &o, world) == LC_OK, "init: %s", lc_errmsg());
  if (lora_qbase) fill_blocks(&tr.model);
  if (mask_path[0]) tr.next_sample = mask_first;
  lc_step_metrics m;
  for (int k = 0; k < c->steps; k++) CHECK(lc_trainer_step(&tr, &m) == LC_OK, "step: %s", lc_errmsg());
  if (mask_path[0] && c->steps == 1) { // the case is what it claims: some rank counts nothing, all count them once
    long mine[2] = {0, 0};
    for (long i = 0; i < (long)tr.local_batch * tr.T; i++) mine[0] += tr.targets[i] != -100;
    mine[1] = mine[0];
    long lo = 0, sum = 0;
    MPI_Allreduce(&mine[0], &lo, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&mine[1], &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK((lo == 0 || world->size == 1) && sum == m.counted && m.counted > 0,
          "%s hp %d cp %d dp %d: a rank counts %ld (want 0), all %ld, step %ld", what, L.hp, L.cp, dp, lo, sum, m.counted);
  }
  char tag[160];
  lc_pstore *tp = lc_model_trainable(&tr.model), *rp = lc_model_trainable(&ref.model);
  snprintf(tag, sizeof tag, "%s hp %d cp %d w %d dp %d %s kv %d%s%s head-chunk %d", what, L.hp, L.cp, L.w, dp,
           lc_placement_name(pl), c->kv_heads, c->mo.precision == LC_DT_BF16 ? " bf16" : "", family_name(c->family),
           tr.head_chunk);
  // fp32, same math in another order: loss relative 1e-6 expected; bound 1e-5 (bf16: 1e-4).
  double el = fabs(m.loss - rm.loss) / fabs(rm.loss);
  CHECK(el <= tol(&c->mo, 1e-5, 1e-4), "%s: loss %.9g vs %.9g", tag, m.loss, rm.loss);
  CHECK(m.counted == rm.counted, "counted tokens %ld vs %ld", m.counted, rm.counted);
  // The global gradient norm (before clipping) is the single-process one: same bound
  // (bf16: 1e-3).
  CHECK(fabs(m.grad_norm - rm.grad_norm) <= tol(&c->mo, 1e-5, 1e-3) * rm.grad_norm, "%s: grad_norm %.9g vs %.9g",
        tag, m.grad_norm, rm.grad_norm);
  if (c->clip > 0) CHECK(rm.grad_norm > c->clip, "%s: clip %g below the norm %g", tag, c->clip, rm.grad_norm);
  // Bytes the attention sent equal the formulas exactly: selective checkpointing does not
  // re-run the forward ring or all-to-alls in backward (full does: twice the forward bytes).
  CHECK(m.attn_bytes == m.attn_bytes_formula, "%s: attention sent %.0f bytes, formulas say %.0f", tag,
        m.attn_bytes, m.attn_bytes_formula);
  // The memory model predicts every category's arena peak of this rank exactly (it takes
  // its sizes from the allocating code: a byte off is an allocation it does not know).
  lc_mem_estimate e;
  CHECK(lc_memplan_predict_hc(&o.cfg, &o.mopts, o.seq, L.hp, L.cp, L.w, tr.head_chunk, 0, &e) == LC_OK, "predict: %s",
        lc_errmsg());
  for (int k = 0; k < LC_MEM_NCAT; k++)
    CHECK(m.peak[k] == e.peak[k], "%s rank %d: %s peak measured %zu, predicted %zu", tag, world->rank,
          lc_mem_cat_name((lc_mem_cat)k), m.peak[k], e.peak[k]);
  CHECK(m.peak_bytes == e.total, "%s rank %d: total peak measured %zu, predicted %zu", tag, world->rank,
        m.peak_bytes, e.total);
  // Gradients (after clipping, when on) per tensor, relative to the tensor's largest
  // entry: bound 1e-4 (observed ~1e-6; a missing contribution or a wrong position is O(1)).
  // Parameters after the update(s): relative to the tensor's largest entry (at least
  // 0.02), bound 5e-5: each step's update moves by <= lr |dg| / eps (eps above), and a
  // bias gradient (a sum over every token, split over ranks) differs from one process by
  // up to ~5e-8 absolute: 2 steps x 1e-3 x 5e-8 / 1e-4 = 1e-6 = 5e-5 x 0.02 (observed
  // 1.14e-5 for Qwen3's v_proj bias at 8 ranks on AVX2, ~1e-7 elsewhere); a wrong clip
  // scale or a skipped update moves them by ~lr = 1e-3 of entries ~0.02..1 (>= 1e-3
  // relative). bf16: gradients 1e-2 and parameters 5e-4 (a flipped rounding moves a
  // gradient entry by ~2^-8 of its size; updates are lr-sized). LoRA's adapters in bf16:
  // 2.5e-2 (their gradients at step 2 go through B after a single lr-sized update and two
  // more rounding points, u and du; observed up to 1.07e-2, relative L2 8e-3, for a Qwen3
  // k_proj lora_B over a bf16 GGUF-block base at cp 2 on Zen 3's AVX2, where these
  // gradients' whole distance from an fp32 pass is 1.3e-2; a missing or misplaced
  // contribution is O(1)).
  double worst = 0, worst_p = 0, worst_l2 = 0;
  const char *wn = "";
  for (int i = 0; i < tp->lay.n_tensors; i++) { // (LoRA: the adapters)
    const lc_param_info *p = &tp->lay.table[i];
    double e1 = rel_err(tp->grads + p->offset, rp->grads + p->offset, p->numel);
    // (Parameters relative to at least 0.02, the weights' init scale: biases start at 0
    // and are lr-sized after one update, so their own largest entry is no scale.)
    double e2 = rel_err_floor(tp->params + p->offset, rp->params + p->offset, p->numel, 0.02);
    if (e1 > worst) worst = e1, wn = p->name;
    if (c->mo.precision == LC_DT_BF16) {
      double l2 = rel_l2(tp->grads + p->offset, rp->grads + p->offset, p->numel);
      if (l2 > worst_l2) worst_l2 = l2;
    }
    if (e2 > worst_p) worst_p = e2;
    CHECK(e1 <= tol(&c->mo, 1e-4, c->lora ? 2.5e-2 : 1e-2), "%s: grad %s error %.3g", tag, p->name, e1);
    CHECK(e2 <= tol(&c->mo, 5e-5, 5e-4), "%s: updated %s error %.3g", tag, p->name, e2);
  }
  // Every rank holds the same parameters, bit for bit (replicas never drift apart); with
  // LoRA the frozen base equals the reference's bit for bit too.
  size_t nb = sizeof(float) * tp->lay.total;
  float *p0 = malloc(nb);
  memcpy(p0, tp->params, nb);
  MPI_Bcast(p0, (int)tp->lay.total, MPI_FLOAT, 0, MPI_COMM_WORLD);
  CHECK(!memcmp(p0, tp->params, nb), "%s: rank %d's parameters differ from rank 0's", tag, world->rank);
  free(p0);
  if (c->lora) { // (read through the backend: a bf16 base has no fp32 host view)
    const size_t bb = lc_buf_bytes(tr.model.ps.params_b);
    char *x = malloc(bb), *y = malloc(bb);
    CHECK(lc_buf_read(tr.model.ps.params_b, x, LC_SYNC_STATES) == LC_OK &&
              lc_buf_read(ref.model.ps.params_b, y, LC_SYNC_STATES) == LC_OK && !memcmp(x, y, bb),
          "%s: a frozen base weight changed", tag);
    free(x), free(y);
  }
  double ww[3] = {worst, worst_p, worst_l2};
  MPI_Allreduce(MPI_IN_PLACE, ww, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  char hcs[32];
  if (rank0)
    printf("step %-9s %-14s dp %d hp %d cp %d w %d kv %d%s%s%s: loss %.6f (ref %.6f, rel %.1e), gnorm %.5f, worst grad "
           "rel error %.2e (%s), params %.2e, grads L2 %.2e\n", what, lc_placement_name(pl), dp, L.hp, L.cp, L.w, c->kv_heads,
           c->mo.precision == LC_DT_BF16 ? " bf16" : "", family_name(c->family),
           tr.head_chunk ? (snprintf(hcs, sizeof hcs, " head-chunk %d", tr.head_chunk), hcs) : "", m.loss, rm.loss, el, m.grad_norm, ww[0], wn, ww[1], ww[2]);
  lc_trainer_free(&tr);
  lc_trainer_free(&ref);
  lc_comm_destroy(self);
}

static void test_step(layout L, lc_placement pl, int dp, lc_model_opts mo, const char *what) {
  step_case c = {mo, 2, 0.0f, 1, FAM_LLAMA, 0, 0};
  test_step_case(L, pl, dp, &c, what);
}

// Checkpoints offloaded to disk (model/ckstore.h) under layout L equal the in-RAM run on
// the same layout bit for bit: losses and norms of 2 steps, the updated parameters; the
// arena peaks equal the memory model's (4 of 6 layers' checkpoints resident).
static void test_offload(layout L, lc_placement pl, lc_model_opts mo, int family) {
  if (L.hp * L.cp != world->size || skipped_case("offload") || odd_world_skip(L)) return;
  step_case c = {mo, 2, 0.0f, 2, family, 0, 0};
  lc_train_opts o = step_opts(L.hp, L.cp, L.w, pl, 1, &c);
  o.cfg.n_layers = 6;
  char dir[64];
  snprintf(dir, sizeof dir, "/tmp/lc_mpi_offload_%d_%d", world->rank, (int)getpid());
  CHECK(mkdir(dir, 0700) == 0, "mkdir %s", dir);
  lc_train_opts od = o;
  od.mopts.offload_dir = dir;
  lc_trainer ram, off;
  CHECK(lc_trainer_init(&ram, &o, world) == LC_OK && lc_trainer_init(&off, &od, world) == LC_OK, "offload init: %s",
        lc_errmsg());
  char tag[160];
  snprintf(tag, sizeof tag, "offload hp %d cp %d w %d %s %s%s%s", L.hp, L.cp, L.w, lc_placement_name(pl), lc_ckpt_name(mo.ckpt),
           mo.precision == LC_DT_BF16 ? " bf16" : "", family_name(family));
  lc_step_metrics a, b;
  for (int k = 0; k < 2; k++) {
    CHECK(lc_trainer_step(&ram, &a) == LC_OK && lc_trainer_step(&off, &b) == LC_OK, "%s step: %s", tag, lc_errmsg());
    CHECK(a.loss == b.loss && a.grad_norm == b.grad_norm, "%s step %d: loss %.17g vs %.17g, norm %.17g vs %.17g", tag, k,
          b.loss, a.loss, b.grad_norm, a.grad_norm);
  }
  CHECK(!memcmp(ram.model.params, off.model.params, sizeof(float) * ram.model.ps.n_params), "%s: parameters differ", tag);
  lc_mem_estimate e;
  CHECK(lc_memplan_predict(&od.cfg, &od.mopts, od.seq, L.hp, L.cp, L.w, 0, &e) == LC_OK, "predict: %s", lc_errmsg());
  for (int k = 0; k < LC_MEM_NCAT; k++)
    CHECK(b.peak[k] == e.peak[k], "%s rank %d: %s peak measured %zu, predicted %zu", tag, world->rank,
          lc_mem_cat_name((lc_mem_cat)k), b.peak[k], e.peak[k]);
  CHECK(b.peak[LC_MEM_CKPT] * 6 == a.peak[LC_MEM_CKPT] * (size_t)lc_offload_depth(&od.mopts),
        "%s: checkpoints %zu vs %zu in RAM (depth %d of 6 layers)", tag, b.peak[LC_MEM_CKPT], a.peak[LC_MEM_CKPT],
        lc_offload_depth(&od.mopts));
  lc_trainer_free(&off);
  lc_trainer_free(&ram);
  CHECK(rmdir(dir) == 0, "%s: scratch left in %s", tag, dir);
  if (rank0) printf("%s: 2 steps bit-identical to RAM, checkpoints %zu -> %zu bytes\n", tag, a.peak[LC_MEM_CKPT], b.peak[LC_MEM_CKPT]);
}

// ---------------------------------------------------------------- E. packed documents
static char pack_path[256];

// A token file of documents with long-tailed lengths (1 to 300 tokens; S = 128 packs them,
// cutting the longest into pieces), written by rank 0.
static void write_pack_file(void) {
  long pid = (long)getpid();
  MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  snprintf(pack_path, sizeof pack_path, "/tmp/lc_mpi_dist_pack_%d_%ld.tok", world->size, pid);
  if (rank0) {
    lc_rng r;
    lc_rng_seed(&r, 77);
    uint32_t toks[6000];
    uint64_t starts[200];
    uint64_t n = 0, nd = 0;
    while (n < 5000) {
      uint32_t u = lc_rng_below(&r, 10);
      uint64_t len = u < 5 ? 1 + lc_rng_below(&r, 20) : u < 9 ? 20 + lc_rng_below(&r, 60) : 100 + lc_rng_below(&r, 200);
      starts[nd++] = n;
      for (uint64_t i = 0; i < len; i++) toks[n++] = lc_rng_below(&r, 256);
    }
    CHECK(lc_tokfile_write_docs(pack_path, toks, n, 2, 256, starts, nd) == LC_OK, "pack file: %s", lc_errmsg());
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// A packed step (documents, optionally a sliding window W) under layout L equals running
// each document of the packed sample as its own sequence on one process, with the same
// loss normalisation: loss and every gradient. The sample holds documents cut across
// chunks and ranks and documents shorter than a chunk (checked).
static void test_packed(layout L, lc_placement pl, lc_cp_layout cl, int W, lc_model_opts mo, int pack, int family) {
  if (L.hp * L.cp != world->size || skipped_case("packed") || odd_world_skip(L)) return;
  // With lora_drop: rank-4 adapters with dropout, whose mask follows each token's place in
  // the packed sequence (the documents alone are given those places).
  step_case c = {mo, 2, 0.0f, 1, family, 0, lora_drop > 0 ? 4 : 0};
  lc_train_opts o = step_opts(L.hp, L.cp, L.w, pl, 1, &c);
  o.seq = 128;
  // Ring kernel calls of 8 query rows: chunks of 16-64 rows take several, each with its own
  // skip test and its slice of the bounds (the real 256 rows: test_attention_rows).
  lc_attn_2d_test_set_poll_rows(8);
  o.data_spec = pack ? pack_path : "task:copy";
  o.pack = pack;
  o.mopts.cp_layout = cl;
  o.cfg.sliding_window = W;
  lc_trainer tr;
  CHECK(lc_trainer_init(&tr, &o, world) == LC_OK, "packed init: %s", lc_errmsg());
  // The first packed sample with at least 4 documents (a document longer than S fills a
  // sequence alone).
  for (uint64_t idx = 0; pack && idx < 100; idx++) {
    lc_data_sample_docs(&tr.data, o.seed, idx, tr.full_tok, tr.full_tgt, tr.full_doc, o.seq);
    int nd = 0;
    for (int t = 0; t < o.seq; t++) nd += tr.full_doc[t] == t;
    if (nd >= 4) {
      tr.next_sample = idx;
      break;
    }
  }
  lc_step_metrics m;
  CHECK(lc_trainer_step(&tr, &m) == LC_OK, "packed step: %s", lc_errmsg());
  // Reference: each document alone (positions from 0, the window inside it), same scale.
  lc_arena ar;
  lc_arena_init(&ar, 0);
  lc_model ref;
  CHECK(lc_model_create(&ref, &o.cfg, &ar) == LC_OK && lc_model_init_random(&ref, o.seed) == LC_OK, "reference");
  lc_model_zero_grads(&ref);
  // A length-dependent RoPE (dynamic) sees the longest document of the sample, as
  // transformers does from the packed position ids: the documents alone use that length.
  lc_pass_in rin = {.rope_len = 0};
  for (int t = 0; t < o.seq; t++) rin.rope_len = t - tr.full_doc[t] + 1 > rin.rope_len ? t - tr.full_doc[t] + 1 : rin.rope_len;
  lc_attn at;
  lc_attn_local_init(&at, o.cfg.n_heads, o.cfg.n_kv_heads, o.cfg.head_dim);
  const int S = o.seq;
  int pos[128], lo[128], rows[128], crossing = 0, short_doc = 0, docs = 0;
  rin.drop_key = lc_dropout_pass_key(o.seed, 1, tr.sample[0]);
  rin.drop_rows = lora_drop > 0 ? rows : NULL;
  double loss = 0;
  const lc_seq_layout *lay = &tr.lay[0];
  for (int a = 0; a < S;) {
    int b = a + 1;
    while (b < S && tr.full_doc[b] == a) b++;
    for (int t = 0; t < b - a; t++) pos[t] = t, lo[t] = W > 0 && t - W + 1 > 0 ? t - W + 1 : 0, rows[t] = a + t;
    rin.attn.lo = W > 0 ? lo : NULL;
    CHECK(lc_model_fwd_bwd(&ref, &o.mopts, &at, &rin, tr.full_tok + a, tr.full_tgt + a, pos, b - a,
                           1.0f / (float)m.counted, 1, &loss) == LC_OK, "reference document: %s", lc_errmsg());
    // Which context rank holds the first and the last token (chunk owner), and doc size.
    int ca = -1, cb = -1;
    for (int r = 0; r < lay->cp * lay->k; r++) {
      long st0 = (long)lay->chunk[r] * lay->Lc;
      if (a >= st0 && a < st0 + lay->Lc) ca = r / lay->k;
      if (b - 1 >= st0 && b - 1 < st0 + lay->Lc) cb = r / lay->k;
    }
    crossing += (a / lay->Lc != (b - 1) / lay->Lc) && ca != cb;
    // RoPE positions restart at each document: this rank's tokens of [a, b) have g - a.
    // (Attention cannot tell: RoPE depends on position differences, so check them here.)
    for (int i = 0; i < tr.T; i++) {
      long g = lc_seq_layout_global(lay, tr.grid.c, tr.grid.h, i);
      if (g >= a && g < b) CHECK(tr.pos[i] == g - a, "position of token %ld: %d, want %ld", g, tr.pos[i], g - a);
    }
    short_doc += b - a < lay->Lc;
    docs++;
    a = b;
  }
  char tag[160];
  snprintf(tag, sizeof tag, "%s hp %d cp %d w %d %s %s window %d %s%s%s", pack ? "packed" : "one document", L.hp, L.cp,
           L.w, lc_placement_name(pl), lc_cp_layout_name(cl), W, lc_ckpt_name(mo.ckpt), family_name(family),
           lora_drop > 0 ? " lora-dropout" : "");
  // The work per context rank the step reports (cp_work_imbalance: max / mean) and its
  // visible pairs (attn_pairs, the FLOPs' count) against tiles and pairs counted here from
  // the documents and the window; a balanced layout keeps max <= mean + (1 - 1/cp) x its
  // largest chunk (largest first to the least loaded rank).
  {
    int glo[128];
    for (int t = 0; t < S; t++) glo[t] = lc_visible_from(t, tr.full_doc[t], W);
    double wk[8], pr[8], mxc, mx = 0, sum = 0, pairs = 0;
    lc_t_rank_work(lay, glo, wk, pr, &mxc);
    for (int c = 0; c < lay->cp; c++) mx = fmax(mx, wk[c]), sum += wk[c], pairs += pr[c];
    const double mean = sum / lay->cp;
    CHECK(fabs(m.cp_imbalance - mx / mean) <= 1e-12 * mx / mean, "%s: reported work max/mean %.6f, counted %.6f", tag,
          m.cp_imbalance, mx / mean);
    CHECK(m.attn_pairs == pairs, "%s: attention pairs %.0f, counted %.0f", tag, m.attn_pairs, pairs);
    if (cl == LC_CP_BALANCED && lay->k > 2)
      CHECK(mx <= mean + (1.0 - 1.0 / lay->cp) * mxc, "%s: balanced work max %g > mean %g + (1 - 1/cp) x chunk %g", tag,
            mx, mean, mxc);
  }
  if (pack) CHECK(docs > 2 && short_doc > 0 && (L.cp == 1 || crossing > 0),
                  "%s: %d documents, %d shorter than a chunk, %d across ranks", tag, docs, short_doc, crossing);
  double el = fabs(loss / m.counted - m.loss) / fabs(loss / m.counted);
  CHECK(el <= 1e-5, "%s: loss %.9g, documents alone %.9g", tag, m.loss, loss / m.counted);
  double worst = 0;
  const lc_pstore *tg = lc_model_trainable(&tr.model), *rg = lc_model_trainable(&ref);
  for (int i = 0; i < rg->lay.n_tensors; i++) {
    const lc_param_info *p = &rg->lay.table[i];
    double e = rel_err(tg->grads + p->offset, rg->grads + p->offset, p->numel);
    worst = fmax(worst, e);
    CHECK(e <= 1e-4, "%s: grad %s error %.3g", tag, p->name, e);
  }
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (rank0)
    printf("%-62s k %d: %2d docs (%d short, %d across ranks), imbalance %.3f: loss %.6f, worst grad error %.2e\n",
           tag, lay->k, docs, short_doc, crossing, m.cp_imbalance, m.loss, worst);
  lc_model_destroy(&ref);
  lc_trainer_free(&tr);
  lc_attn_2d_test_set_poll_rows(0);
}

// ---------------------------------------------------------------- F. head-chunked Ulysses
// Every head chunk N < Hq/hp against the unchunked strategy on the same inputs (fp32 or
// bf16; docs: bounds of packed documents under a 20-token window, else plain causal):
// out, LSE, dq bit for bit (each head's kernel work does not depend on the other heads of
// a call at one thread, the tests' OMP_NUM_THREADS=1, and the exchanges only move values);
// dk, dv too when a stage holds whole kv groups. With one kv head per rank (Hkvl = 1,
// replicated when hp > Hkv) every stage's ring writes a part of the same kv gradient, summed
// over the stages after the ring instead of inside the kernel: fp32 rounding, bound 2e-6
// of the tensor's largest entry (measured ~1e-7; a stage missing or counted twice is O(1)).
// The arena's peaks equal lc_attn_2d_mem, the kept bytes are the LSE alone, and the bytes
// sent equal lc_attn_2d_bytes_per_layer (backward re-exchanges q, k, v, out).
static void test_chunks(layout L, lc_placement pl, int Hq, int Hkv, int bf16, int docs) {
  const int W = world->size;
  if (L.hp * L.cp != W || L.hp < 2 || skipped_case("chunks")) return;
  const long rows = 12, SS = 2L * L.cp * L.hp * rows;
  const int D = 16, T = (int)(SS / W), Hl = Hq / L.hp, Hkvl = L.hp > Hkv ? 1 : Hkv / L.hp;
  int cs[64];
  const int ncs = lc_attn_2d_head_chunks(L.hp, Hq, Hkv, cs, 64);
  CHECK(ncs >= 1 && cs[ncs - 1] == Hl, "head chunks of hp %d Hq %d Hkv %d", L.hp, Hq, Hkv);
  lc_arena ar;
  lc_arena_init(&ar, 0);
  lc_rng r;
  lc_rng_seed(&r, 4000 + 100 * world->rank + Hq + Hkv);
  const size_t nq = (size_t)T * Hq * D, nk = (size_t)T * Hkv * D;
  float *q = lc_t_randn(&r, (long)nq, 1.0f), *k = lc_t_randn(&r, (long)nk, 1.0f), *v = lc_t_randn(&r, (long)nk, 1.0f),
        *dout = lc_t_randn(&r, (long)nq, 1.0f);
  if (bf16) lc_bf16_round(q, nq), lc_bf16_round(k, nk), lc_bf16_round(v, nk), lc_bf16_round(dout, nq);
  // bf16: the strategy's q, k, v, dout and out are 2-byte arrays (attn.h)
  uint16_t *q16 = malloc(2 * nq), *k16 = malloc(2 * nk), *v16 = malloc(2 * nk), *d16 = malloc(2 * nq);
  lc_bf16_pack(q16, q, nq), lc_bf16_pack(k16, k, nk), lc_bf16_pack(v16, v, nk), lc_bf16_pack(d16, dout, nq);
  const void *qi = bf16 ? (const void *)q16 : q, *ki = bf16 ? (const void *)k16 : k, *vi = bf16 ? (const void *)v16 : v,
             *di = bf16 ? (const void *)d16 : dout;
  const size_t ob = bf16 ? 2 * nq : 4 * nq; // bytes of the output
  int *lo = NULL;
  if (docs) { // documents of 5..40 tokens (the same on every rank), a 20-token window
    lo = malloc(sizeof(int) * (size_t)SS);
    lc_rng rd;
    lc_rng_seed(&rd, 99);
    for (long t = 0, start = 0, len = 0; t < SS; t++) {
      if (t - start >= len) start = t, len = 5 + lc_rng_below(&rd, 36);
      lo[t] = lc_visible_from(t, start, 20);
    }
  }
  lc_grid g;
  CHECK(lc_grid_create(&g, world, L.hp, L.cp, L.w, pl) == LC_OK, "grid: %s", lc_errmsg());
  float *o[2] = {NULL, NULL}, *dq[2] = {NULL, NULL}, *dk[2] = {NULL, NULL}, *dv[2] = {NULL, NULL};
  void *saved[2] = {NULL, NULL};
  const size_t nlse = (size_t)T * L.hp * Hl;
  char tag[160];
  for (int ci = ncs - 1; ci >= 0; ci--) { // the unchunked run first (slot 0), then each chunk (slot 1)
    const int N = cs[ci], x = ci == ncs - 1 ? 0 : 1;
    snprintf(tag, sizeof tag, "head-chunk %d of %d: hp %d cp %d w %d %s Hq %d Hkv %d%s%s", N, Hl, L.hp, L.cp, L.w,
             lc_placement_name(pl), Hq, Hkv, bf16 ? " bf16" : "", docs ? " documents+window" : "");
    lc_attn at;
    CHECK(lc_attn_2d_init(&at, g.head, g.ctx, L.w, SS, 2, Hq, Hkv, D, x ? N : 0) == LC_OK, "%s: init: %s", tag,
          lc_errmsg());
    CHECK(lc_attn_2d_head_chunk(&at) == N, "%s: %d heads per stage", tag, lc_attn_2d_head_chunk(&at));
    const lc_attn_in ain = {.lo = lo, .bf16 = bf16};
    lc_attn_mem am;
    CHECK(lc_attn_2d_mem(L.hp, L.cp, L.w, SS, 2, Hq, Hkv, D, x ? N : 0, 0, bf16, &am) == LC_OK, "%s: mem: %s", tag,
          lc_errmsg());
    CHECK(am.saved == at.saved_bytes(&at, T, bf16) && (!x || am.saved == 4 * nlse), "%s: saved %zu, model %zu", tag,
          at.saved_bytes(&at, T, bf16), am.saved);
    if (x) { // a slot per chunk size: free the previous one
      free(o[1]), free(dq[1]), free(dk[1]), free(dv[1]), free(saved[1]);
    }
    o[x] = malloc(4 * nq), dq[x] = malloc(4 * nq), dk[x] = malloc(4 * nk), dv[x] = malloc(4 * nk);
    saved[x] = malloc(am.saved);
    const double b0 = g.head->bytes_sent + g.ctx->bytes_sent;
    lc_arena_reset_peaks(&ar);
    CHECK(attn_fwd_host(&at, &ain, o[x], saved[x], qi, ki, vi, T, &ar) == LC_OK, "%s: fwd: %s", tag, lc_errmsg());
    CHECK(ar.peak[LC_MEM_COMM] == am.fwd_comm && ar.peak[LC_MEM_SCRATCH] == am.fwd_scratch,
          "%s forward: comm %zu scratch %zu bytes, memory model %zu, %zu", tag, ar.peak[LC_MEM_COMM],
          ar.peak[LC_MEM_SCRATCH], am.fwd_comm, am.fwd_scratch);
    lc_arena_reset_peaks(&ar);
    CHECK(attn_bwd_host(&at, &ain, dq[x], dk[x], dv[x], di, o[x], saved[x], qi, ki, vi, T, &ar) == LC_OK, "%s: bwd: %s", tag,
          lc_errmsg());
    CHECK(ar.peak[LC_MEM_COMM] == am.bwd_comm && ar.peak[LC_MEM_SCRATCH] == am.bwd_scratch,
          "%s backward: comm %zu scratch %zu bytes, memory model %zu, %zu", tag, ar.peak[LC_MEM_COMM],
          ar.peak[LC_MEM_SCRATCH], am.bwd_comm, am.bwd_scratch);
    const double sent = g.head->bytes_sent + g.ctx->bytes_sent - b0, want = lc_attn_2d_bytes_per_layer(&at, T, 1, bf16);
    CHECK(sent == want, "%s: sent %.0f bytes, formulas %.0f", tag, sent, want);
    CHECK(ar.cur_total == 0, "%s: arena balanced", tag);
    CHECK(at.dkv_late == lc_attn_2d_dkv_late(L.hp, Hq, Hkv, x ? N : 0) && at.dkv_late == (!x || Hkvl == 1),
          "%s: dkv_late %d", tag, at.dkv_late);
    if (at.dkv_late) { // dk, dv written over q (as the layer places them, here 2 heads further on, so a
                       // stage's dk lands on a later stage's q): the same bits
      const size_t qb = bf16 ? 2 * nq : 4 * nq, kb = 4 * ((nk + 15) & ~(size_t)15), sh = 2 * 4 * D,
                   tot = qb > sh + 2 * kb ? qb : sh + 2 * kb;
      unsigned char *qa = malloc(tot);
      memcpy(qa, qi, qb);
      float *dq2 = malloc(4 * nq);
      CHECK(attn_bwd_host(&at, &ain, dq2, (float *)(qa + sh), (float *)(qa + sh + kb), di, o[x], saved[x], qa, ki, vi, T,
                          &ar) == LC_OK,
            "%s: bwd with dk, dv over q: %s", tag, lc_errmsg());
      CHECK(!memcmp(dq2, dq[x], 4 * nq) && !memcmp(qa + sh, dk[x], 4 * nk) && !memcmp(qa + sh + kb, dv[x], 4 * nk),
            "%s rank %d: dk, dv written over q differ", tag, world->rank);
      free(qa), free(dq2);
    }
    lc_attn_2d_free(&at);
    if (!x) continue;
    CHECK(!memcmp(o[0], o[1], ob), "%s rank %d: output differs from unchunked", tag, world->rank);
    CHECK(!memcmp(saved[0], saved[1], 4 * nlse), "%s rank %d: LSE differs from unchunked", tag, world->rank);
    CHECK(!memcmp(dq[0], dq[1], 4 * nq), "%s rank %d: dq differs from unchunked", tag, world->rank);
    double ek = 0, ev = 0;
    if (Hkvl > 1) {
      CHECK(!memcmp(dk[0], dk[1], 4 * nk) && !memcmp(dv[0], dv[1], 4 * nk), "%s rank %d: dk/dv differ from unchunked",
            tag, world->rank);
    } else {
      ek = rel_err(dk[1], dk[0], nk), ev = rel_err(dv[1], dv[0], nk);
      CHECK(ek <= 2e-6 && ev <= 2e-6, "%s rank %d: dk error %.3g, dv error %.3g", tag, world->rank, ek, ev);
    }
    double ww[2] = {ek, ev};
    MPI_Allreduce(MPI_IN_PLACE, ww, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    char how[64] = "bit for bit";
    if (Hkvl == 1) snprintf(how, sizeof how, "to %.1e (one kv head: summed over stages)", fmax(ww[0], ww[1]));
    if (rank0)
      printf("%-76s = unchunked: out, LSE, dq bit for bit, dk/dv %s (peak comm %zu/%zu B)\n", tag, how, am.fwd_comm,
             am.bwd_comm);
  }
  // An invalid chunk: one line naming the valid values.
  lc_attn bad;
  char want[64];
  snprintf(want, sizeof want, "valid: %d", cs[0]);
  CHECK(lc_attn_2d_init(&bad, g.head, g.ctx, L.w, SS, 2, Hq, Hkv, D, Hl + 1) == LC_EINVAL &&
        strstr(lc_errmsg(), "--head-chunk") && strstr(lc_errmsg(), want) && !strchr(lc_errmsg(), '\n'),
        "bad chunk: '%s'", lc_errmsg());
  for (int x = 0; x < 2; x++) free(o[x]), free(dq[x]), free(dk[x]), free(dv[x]), free(saved[x]);
  free(lo), free(q), free(k), free(v), free(dout), free(q16), free(k16), free(v16), free(d16);
  lc_grid_destroy(&g);
}

// A whole training step with head chunks against the unchunked run on the same layout: 2
// steps' losses, norms and the updated parameters bit for bit where every stage holds whole
// kv groups (kv_heads >= hp), else to fp32 rounding (kv gradients summed over stages:
// losses 1e-6, parameters 1e-5 of their scale as in B); the arena peaks equal the memory
// model with the chunk, checkpoints shrink (the LSE alone is kept), and the bytes sent equal
// the formulas.
static void test_chunk_steps(layout L, lc_placement pl, int kv_heads, lc_model_opts mo, int hc) {
  if (L.hp * L.cp != world->size || L.hp < 2 || skipped_case("chunks") || odd_world_skip(L)) return;
  step_case c0 = {mo, kv_heads, 0.0f, 2, FAM_LLAMA, 0, 0}, c1 = c0;
  c1.head_chunk = hc;
  lc_train_opts o0 = step_opts(L.hp, L.cp, L.w, pl, 1, &c0), o1 = step_opts(L.hp, L.cp, L.w, pl, 1, &c1);
  lc_trainer a, b;
  CHECK(lc_trainer_init(&a, &o0, world) == LC_OK && lc_trainer_init(&b, &o1, world) == LC_OK, "chunk init: %s",
        lc_errmsg());
  const int exact = kv_heads >= L.hp * 2; // a rank holds several kv heads: whole groups per stage
  char tag[160];
  snprintf(tag, sizeof tag, "head-chunk %d step: hp %d cp %d w %d %s kv %d %s%s", hc, L.hp, L.cp, L.w,
           lc_placement_name(pl), kv_heads, lc_ckpt_name(mo.ckpt), mo.precision == LC_DT_BF16 ? " bf16" : "");
  CHECK(b.head_chunk == hc, "%s: chunk in use %d", tag, b.head_chunk);
  lc_step_metrics ma, mb;
  for (int s = 0; s < 2; s++) {
    CHECK(lc_trainer_step(&a, &ma) == LC_OK && lc_trainer_step(&b, &mb) == LC_OK, "%s: step: %s", tag, lc_errmsg());
    if (exact)
      CHECK(ma.loss == mb.loss && ma.grad_norm == mb.grad_norm, "%s step %d: loss %.17g vs %.17g, norm %.17g vs %.17g",
            tag, s, mb.loss, ma.loss, mb.grad_norm, ma.grad_norm);
    else
      CHECK(fabs(ma.loss - mb.loss) <= 1e-6 * fabs(ma.loss) && fabs(ma.grad_norm - mb.grad_norm) <= 1e-5 * ma.grad_norm,
            "%s step %d: loss %.9g vs %.9g, norm %.9g vs %.9g", tag, s, mb.loss, ma.loss, mb.grad_norm, ma.grad_norm);
    CHECK(mb.attn_bytes == mb.attn_bytes_formula, "%s: attention sent %.0f bytes, formulas %.0f", tag, mb.attn_bytes,
          mb.attn_bytes_formula);
  }
  if (exact) CHECK(!memcmp(a.model.params, b.model.params, sizeof(float) * a.model.ps.n_params), "%s: parameters differ", tag);
  double wp = 0;
  for (int i = 0; i < a.model.n_tensors; i++) {
    const lc_param_info *p = &a.model.table[i];
    wp = fmax(wp, rel_err_floor(b.model.params + p->offset, a.model.params + p->offset, p->numel, 0.02));
  }
  CHECK(wp <= 1e-5, "%s: parameters error %.3g", tag, wp);
  lc_mem_estimate e;
  CHECK(lc_memplan_predict_hc(&o1.cfg, &o1.mopts, o1.seq, L.hp, L.cp, L.w, hc, 0, &e) == LC_OK, "predict: %s", lc_errmsg());
  for (int k = 0; k < LC_MEM_NCAT; k++)
    CHECK(mb.peak[k] == e.peak[k], "%s rank %d: %s peak measured %zu, predicted %zu", tag, world->rank,
          lc_mem_cat_name((lc_mem_cat)k), mb.peak[k], e.peak[k]);
  CHECK(mb.peak_bytes == e.total, "%s: total peak %zu, predicted %zu", tag, mb.peak_bytes, e.total);
  CHECK(mo.ckpt == LC_CKPT_FULL || mb.peak[LC_MEM_CKPT] < ma.peak[LC_MEM_CKPT], "%s: checkpoints %zu, unchunked %zu", tag,
        mb.peak[LC_MEM_CKPT], ma.peak[LC_MEM_CKPT]);
  MPI_Allreduce(MPI_IN_PLACE, &wp, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  char how[64] = "bit for bit";
  if (!exact) snprintf(how, sizeof how, "to %.1e (parameters)", wp);
  if (rank0)
    printf("%-62s = unchunked %s; checkpoints %zu -> %zu B, comm %zu -> %zu B\n", tag, how, ma.peak[LC_MEM_CKPT],
           mb.peak[LC_MEM_CKPT], ma.peak[LC_MEM_COMM], mb.peak[LC_MEM_COMM]);
  lc_trainer_free(&b);
  lc_trainer_free(&a);
}

// ---------------------------------------------------------------- D. ZeRO
// FNV-1a of this rank's parameter storage, to compare replicas bit for bit.
static uint64_t hash_bytes(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

// A model whose tensors do not split evenly: dim 30 (3 heads of 10, one kv head), ffn 70,
// vocab 251; its parameter count is not a multiple of 4 (checked), so shards cut tensors
// anywhere and the flat buffer needs padding.
static void odd_model(lc_config *c) {
  lc_config_preset(c, "tiny");
  c->dim = 30, c->n_heads = 3, c->n_kv_heads = 1, c->head_dim = 10, c->ffn = 70, c->vocab = 251;
}

// Stage `stage` over groups of Z ranks under layout L with dp data-parallel groups equals
// zero 0 on the same layout after 3 AdamW steps: losses and norms per step, parameters
// after; replicas bit-identical; arena peaks equal the memory model; bytes sent equal the
// formulas; stage 3's model states within 16 x params / Z + gathered + padding.
static void test_zero(layout L, lc_placement pl, int dp, int stage, int Z, lc_model_opts mo, int odd,
                      const char *what) {
  if (L.hp * L.cp * dp != world->size || skipped_case(what) || odd_world_skip(L)) return;
  const int steps = 3, W = world->size;
  // odd: 1 the odd model; FAM_QWEN2 / FAM_QWEN3: that family.
  step_case c = {mo, 2, zero_lora ? 0.05f : 0.2f, steps, odd > 1 ? odd : FAM_LLAMA, 0, zero_lora}; // (adapters' norms are smaller)
  lc_train_opts o0 = step_opts(L.hp, L.cp, L.w, pl, 2 * dp, &c);
  if (odd == 1) { // (its preset keeps the case's adapters)
    const lc_lora keep = o0.cfg.lora;
    odd_model(&o0.cfg);
    o0.cfg.lora = keep;
  }
  lc_train_opts oz = o0;
  oz.mopts.zero = stage;
  oz.mopts.zero_group = Z;
  o0.mopts.vocab_slice = 0; // the reference holds the whole vocabulary matrices
  char tag[200];
  snprintf(tag, sizeof tag, "%s zero %d Z %d: dp %d hp %d cp %d w %d %s %s%s%s%s%s", what, stage, Z, dp, L.hp, L.cp, L.w,
           lc_placement_name(pl), lc_ckpt_name(mo.ckpt), odd == 1 ? " odd model" : family_name(odd),
           mo.precision == LC_DT_BF16 ? " bf16" : "", zero_lora ? " lora" : "", kern_note);
  // A base in GGUF blocks under ZeRO 3: this rank holds 1/Z of every unit padded to 64 Z
  // bytes, by the rule written in the test (qbase_layout.h), not the store's layout function:
  // the store's sizes before it is made (a wrong layout may corrupt memory as the store is
  // filled), its buffer after.
  lc_param_layout QL;
  const int qz3 = lora_qbase && stage == 3 && lc_param_layout_build(&QL, &oz.cfg, 1) == LC_OK;
  const size_t qwant = qz3 ? lc_t_qbase_rank_bytes(&oz.cfg, &QL, Z) : 0;
  if (qz3) {
    lc_ps_sizes qs;
    CHECK(lc_pstore_sizes(&oz.cfg, 3, Z, &qs) == LC_OK && qs.params == qwant,
          "%s: the base's shard is sized %zu bytes, the layout rule (units padded to 64 Z = %d bytes) gives %zu", tag,
          qs.params, 64 * Z, qwant);
    lc_param_layout_free(&QL);
  }
  lc_trainer ref, tr;
  CHECK(lc_trainer_init(&ref, &o0, world) == LC_OK, "zero 0 init: %s", lc_errmsg());
  CHECK(lc_trainer_init(&tr, &oz, world) == LC_OK, "zero %d init: %s", stage, lc_errmsg());
  if (qz3)
    CHECK(tr.model.ps.store == LC_DT_U8 && lc_buf_bytes(tr.model.ps.params_b) == qwant,
          "%s rank %d: the base's shard holds %zu bytes, the layout rule gives %zu", tag, world->rank,
          lc_buf_bytes(tr.model.ps.params_b), qwant);
  if (lora_qbase) fill_blocks(&ref.model), fill_blocks(&tr.model);
  lc_pstore *tp = lc_model_trainable(&tr.model), *rp = lc_model_trainable(&ref.model);
  if (odd) CHECK(lc_config_n_params(&o0.cfg) % 4 != 0 || odd != 1, "odd model: %lld parameters", lc_config_n_params(&o0.cfg));
  double worst_l = 0, worst_n = 0;
  lc_step_metrics m0, m;
  for (int k = 0; k < steps; k++) {
    CHECK(lc_trainer_step(&ref, &m0) == LC_OK, "zero 0 step: %s", lc_errmsg());
    CHECK(lc_trainer_step(&tr, &m) == LC_OK, "%s step: %s", tag, lc_errmsg());
    // Gradients summed in another order (reduce-scatter, then across groups): fp32
    // rounding, ~1e-7 relative; bound 1e-5 (a missing or doubled contribution is O(1)).
    worst_l = fmax(worst_l, fabs(m.loss - m0.loss) / fabs(m0.loss));
    worst_n = fmax(worst_n, fabs(m.grad_norm - m0.grad_norm) / m0.grad_norm);
    // Bytes for model states equal the formulas of the stage (exactly at 2, 4, 8 ranks; at 3
    // the all-reduce's 2 (p - 1) / p is no binary fraction: sums in another order round
    // differently, ~1e-16 relative; bound 1e-12, a missing transfer is >= 1e-3 of the step's).
    CHECK(W % 2 ? fabs(m.grad_bytes - m.grad_bytes_formula) <= 1e-12 * m.grad_bytes_formula
                : m.grad_bytes == m.grad_bytes_formula,
          "%s: model-state bytes sent %.17g, formulas %.17g", tag, m.grad_bytes, m.grad_bytes_formula);
  }
  CHECK(worst_l <= tol(&mo, 1e-5, 1e-4) && worst_n <= tol(&mo, 1e-5, 1e-3), "%s: loss error %.3g, grad norm error %.3g",
        tag, worst_l, worst_n);
  // The clip (0.2; LoRA 0.05) is below the norm, so the clipped update is compared too.
  CHECK(m0.grad_norm > c.clip, "%s: norm %g not above the clip", tag, m0.grad_norm);
  // Memory: every category of this rank equals the memory model; stage 3 within the bound.
  lc_mem_estimate e;
  CHECK(lc_memplan_predict(&oz.cfg, &oz.mopts, oz.seq, L.hp, L.cp, L.w, 0, &e) == LC_OK, "predict: %s", lc_errmsg());
  for (int k = 0; k < LC_MEM_NCAT; k++)
    CHECK(m.peak[k] == e.peak[k], "%s rank %d: %s peak measured %zu, predicted %zu", tag, world->rank,
          lc_mem_cat_name((lc_mem_cat)k), m.peak[k], e.peak[k]);
  CHECK(m.peak_bytes == e.total, "%s rank %d: total peak %zu, predicted %zu", tag, world->rank, m.peak_bytes, e.total);
  size_t states = m.peak[LC_MEM_PARAMS] + m.peak[LC_MEM_GRADS] + m.peak[LC_MEM_OPTIM] + m.peak[LC_MEM_GATHERED];
  if (stage == 3) {
    const double np = zero_lora ? 4.0 * lc_config_n_params(&oz.cfg) + 16.0 * lc_config_n_lora_params(&oz.cfg)
                                : 16.0 * lc_config_n_params(&oz.cfg);
    double bound = np / Z + (double)m.peak[LC_MEM_GATHERED] + (double)(m.peak[LC_MEM_GRADS] - tp->n_grads * 4) + 4.0 * e.padding / Z +
                   LC_PS_NORM_ACC_BYTES; // the optimizer's norm accumulator (one double on the backend)
    CHECK(states <= bound, "%s: model states %zu bytes > bound %.0f", tag, states, bound);
  }
  // Parameters: gathered tensor by tensor to rank 0 against zero 0's (relative to each
  // tensor's largest entry; AdamW eps 1e-4 keeps the update smooth: bound 2e-5). bf16:
  // 1e-3: a parameter within rounding of a bf16 boundary may round the other way in the
  // next step's compute copy (2^-8 of it) and the steps after carry that on (observed
  // 2e-4 with native bf16 kernels, 4.9e-4..6.4e-4 on AVX2's fp32 arithmetic over 3 steps);
  // a skipped or misplaced update moves entries by ~lr = 1e-3 of tensors whose largest
  // entry is ~0.02..0.1 (>= 1e-2 relative). Biases start at zero, so after 3 steps their
  // largest entry is only ~3 lr: the same carried rounding is a larger share of it
  // (observed up to 1.7e-3 with native bf16 kernels, qwen2 under ZeRO 3 over 8 ranks),
  // while a wrong update there is ~lr / 3 lr = 0.3 of it: bf16 bound 5e-3 on biases. LoRA's
  // B starts at zero too (PEFT's init) and gets the same bound (observed 1.09e-3 for a
  // q_proj lora_B, Qwen2 bf16 base under ZeRO 3 over 8 ranks on Zen 3's AVX2).
  double worst_p = 0, worst_b = 0;
  const char *wpn = "", *wbn = "";
  size_t big = 0;
  for (int i = 0; i < tp->lay.n_tensors; i++) big = tp->lay.table[i].numel > big ? tp->lay.table[i].numel : big;
  float *buf = malloc(sizeof(float) * big);
  for (int i = 0; i < tp->lay.n_tensors; i++) {
    const lc_param_info *p = &tp->lay.table[i];
    const float *src = lc_pstore_tensor_ptr(tp, LC_PS_PARAMS, i);
    if (!src) CHECK(lc_pstore_gather_tensor(tp, LC_PS_PARAMS, i, rank0 ? buf : NULL) == LC_OK,
                    "gather: %s", lc_errmsg());
    if (!rank0) continue;
    const double e_ = rel_err(src ? src : buf, rp->params + rp->lay.table[i].offset, p->numel);
    const size_t ln = strlen(p->name);
    // (zero-started: biases and LoRA's B, PEFT's zero init)
    if ((ln > 5 && !strcmp(p->name + ln - 5, ".bias")) || (ln > 13 && !strcmp(p->name + ln - 13, "lora_B.weight"))) {
      if (e_ > worst_b) worst_b = e_, wbn = p->name;
    } else if (e_ > worst_p) {
      worst_p = e_, wpn = p->name;
    }
  }
  free(buf);
  // LoRA: the frozen base, read back tensor by tensor (under ZeRO 3 from its shards, a bf16
  // base widened from its 2-byte pieces), equals the reference's bit for bit.
  if (zero_lora) {
    const lc_param_layout *BL = &tr.model.ps.lay;
    size_t bmax = 0;
    for (int i = 0; i < BL->n_tensors; i++) bmax = BL->table[i].numel > bmax ? BL->table[i].numel : bmax;
    float *x = malloc(sizeof(float) * bmax), *y = malloc(sizeof(float) * bmax);
    int same = 1;
    for (int i = 0; i < BL->n_tensors; i++) {
      CHECK(lc_pstore_gather_tensor(&tr.model.ps, LC_PS_PARAMS, i, x) == LC_OK &&
                lc_pstore_gather_tensor(&ref.model.ps, LC_PS_PARAMS, i, y) == LC_OK,
            "%s: base gather: %s", tag, lc_errmsg());
      if (rank0) same &= !memcmp(x, y, sizeof(float) * BL->table[i].numel);
    }
    CHECK(same, "%s: the frozen base read back differs from the reference's", tag);
    free(x), free(y);
  }
  CHECK(worst_p <= tol(&mo, 2e-5, 1e-3), "%s: parameters after %d steps differ by %.3g (%s)", tag, steps, worst_p, wpn);
  CHECK(worst_b <= tol(&mo, 2e-5, 5e-3), "%s: biases and LoRA B after %d steps differ by %.3g (%s)", tag, steps, worst_b, wbn);
  // Replicas: rank r holds exactly what rank r mod Z of group 0 holds.
  uint64_t h = hash_bytes(tp->params, sizeof(float) * tp->n_params);
  uint64_t *hs = malloc(sizeof(uint64_t) * (size_t)W);
  MPI_Allgather(&h, 1, MPI_UINT64_T, hs, 1, MPI_UINT64_T, MPI_COMM_WORLD);
  CHECK(h == hs[world->rank % tp->Z], "%s: rank %d's parameters differ from its replica's", tag, world->rank);
  free(hs);
  double ww[3] = {worst_l, worst_n, worst_p};
  MPI_Allreduce(MPI_IN_PLACE, ww, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (rank0)
    printf("%-46s loss %.1e norm %.1e params %.1e; states %zu B/rank (zero 0: %zu), sent %.0f B/step\n", tag, ww[0],
           ww[1], ww[2], states, m0.peak[LC_MEM_PARAMS] + m0.peak[LC_MEM_GRADS] + m0.peak[LC_MEM_OPTIM],
           m.grad_bytes);
  lc_trainer_free(&tr);
  lc_trainer_free(&ref);
}

// The optimizer's pieces: in every zero group the ranks' segments cover each tensor element
// exactly once and no padding, with the tensor's own decay flag (shards cut tensors
// anywhere), and their local offsets stay inside this rank's buffers.
static void test_segments(void) {
  const int W = world->size;
  if (skipped_case("segments")) return;
  for (int odd = 0; odd < 2; odd++)
    for (int stage = 0; stage <= 3; stage++)
      for (int Z = W; Z >= 1; Z /= 2) {
        if (W % Z != 0 || (stage == 0 && Z != W)) continue;
        lc_config c;
        if (odd) odd_model(&c);
        else lc_config_preset(&c, "tiny");
        lc_arena ar;
        lc_arena_init(&ar, 0);
        lc_pstore ps;
        CHECK(lc_pstore_create(&ps, &c, stage, Z, world, &ar) == LC_OK, "store: %s", lc_errmsg());
        CHECK(lc_pstore_add_optimizer(&ps) == LC_OK, "moments");
        int *cnt = calloc(ps.lay.total, sizeof(int)), bad = 0;
        for (int i = 0; i < ps.n_seg; i++) {
          const lc_ps_segment *g = &ps.seg[i];
          const lc_param_info *t = &ps.lay.table[g->tensor];
          bad += g->decay != t->decay || g->full < t->offset || g->full + g->n > t->offset + t->numel;
          bad += g->p + g->n > ps.n_params || g->g + g->n > ps.n_grads || g->o + g->n > ps.n_opt;
          for (size_t j = 0; j < g->n; j++) cnt[g->full + j]++;
        }
        lc_comm *grp = stage == 0 ? NULL : ps.zg;
        if (grp) CHECK(lc_allreduce_sum(grp, cnt, ps.lay.total, LC_DT_I32) == LC_OK, "sum");
        for (int i = 0; i < ps.lay.n_tensors; i++) {
          const lc_param_info *t = &ps.lay.table[i];
          for (size_t j = 0; j < t->numel; j++) bad += cnt[t->offset + j] != 1, cnt[t->offset + j] = 0;
        }
        for (size_t j = 0; j < ps.lay.total; j++) bad += cnt[j] != 0; // padding: nobody's
        CHECK(bad == 0, "stage %d Z %d%s rank %d: %d segment errors", stage, Z, odd ? " odd model" : "", world->rank, bad);
        CHECK(ps.lay.total % (16 * (size_t)(stage ? Z : 1)) == 0, "flat buffer splits evenly");
        free(cnt);
        lc_pstore_destroy(&ps);
        CHECK(ar.cur_total == 0, "store freed");
      }
}

// The optimizer step of every sharded stage and zero group on the private backend (buffers
// no host code can reach; the stage 1/2 parameter gather stages through host memory) equals
// the CPU backend's, bit for bit (backend_update.h).
// Training on the private backend (buffers host code cannot reach; the store's collectives
// and the ring's blocks staged through host memory): the same losses and gradient norms as
// the CPU backend, bit for bit, step by step: every rank as data parallelism at every ZeRO
// stage (a zero group of half the ranks too), fp32 and bf16 with vocabulary slices; the
// ring over every rank, the double ring (windows of 2), dp 2 x cp, packed documents with a
// sliding window (the bounds staged), bf16; Ulysses over every rank (kv heads replicated
// at 4 ranks), 2D hp 2 x cp with head chunks of 2 and context-first placement, bf16.
static void test_private_steps(void) {
  const int W = world->size;
  if (skipped_case("private")) return;
  const struct {
    int stage, group, bf16, slice, cp, window, pack, attn_window, hp, chunk, ctx_first;
  } cs[] = {{0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 0},   {1, 0, 0, 0, 1, 1, 0, 0, 1, 0, 0},   {2, 0, 1, 0, 1, 1, 0, 0, 1, 0, 0},
            {3, 0, 0, 100, 1, 1, 0, 0, 1, 0, 0}, {3, 0, 1, 64, 1, 1, 0, 0, 1, 0, 0},  {2, W / 2, 0, 100, 1, 1, 0, 0, 1, 0, 0},
            {0, 0, 0, 0, W, W, 0, 0, 1, 0, 0},   {1, 0, 1, 0, W, 2, 0, 0, 1, 0, 0},   {3, 0, 0, 0, W / 2, W / 2, 0, 0, 1, 0, 0},
            {0, 0, 1, 0, W, W, 1, 24, 1, 0, 0},  {0, 0, 0, 0, 1, 1, 0, 0, W, 0, 0},   {1, 0, 1, 0, 1, 1, 0, 0, W, 0, 0},
            {3, 0, 0, 0, W / 2, W / 2, 0, 0, 2, 2, 1}, {0, 0, 1, 0, W / 2, W / 2, 1, 24, 2, 2, 0}};
  for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
    const int cp = cs[k].cp, hp = cs[k].hp, dp = cp > 0 && hp > 0 ? W / (cp * hp) : 0;
    if (cp < 1 || hp < 1 || W % (cp * hp) || cs[k].window > cp || cp % cs[k].window) continue;
    if (odd_world_skip((layout){hp, cp, cs[k].window})) continue;
    if (hp > 1 && W == 1) continue;
    if (cs[k].stage > 0 && W == 1) continue;
    if (cs[k].group && (cs[k].group < 1 || W % cs[k].group)) continue;
    enum { STEPS = 3 };
    double loss[2][STEPS], norm[2][STEPS];
    for (int d = 0; d < 2; d++) {
      step_case c = {.mo = {LC_CKPT_SELECTIVE, 0, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0}, .kv_heads = 2, .steps = STEPS,
                     .clip = 1.0f, .family = FAM_LLAMA};
      c.mo.precision = cs[k].bf16 ? LC_DT_BF16 : LC_DT_F32;
      c.mo.zero = cs[k].stage, c.mo.zero_group = cs[k].group, c.mo.vocab_slice = cs[k].slice;
      c.head_chunk = cs[k].chunk;
      lc_train_opts o = step_opts(hp, cp, cs[k].window, cs[k].ctx_first ? LC_PLACE_CONTEXT_FIRST : LC_PLACE_HEAD_FIRST,
                                  dp, &c);
      o.device = d ? "private" : "cpu";
      if (cs[k].pack) { // 128-token packed sequences, ring kernel calls of 8 rows (several per chunk)
        o.pack = 1, o.seq = 128;
        o.data_spec = pack_path;
        o.cfg.sliding_window = cs[k].attn_window;
      }
      lc_attn_2d_test_set_poll_rows(cs[k].pack ? 8 : 0);
      lc_trainer tr;
      CHECK(lc_trainer_init(&tr, &o, world) == LC_OK, "private steps init (%s): %s", o.device, lc_errmsg());
      for (int i = 0; i < STEPS; i++) {
        lc_step_metrics m;
        CHECK(lc_trainer_step(&tr, &m) == LC_OK, "private steps (%s) step %d: %s", o.device, i + 1, lc_errmsg());
        loss[d][i] = m.loss, norm[d][i] = m.grad_norm;
      }
      lc_trainer_free(&tr);
    }
    int same = 1;
    for (int i = 0; i < STEPS; i++) same &= loss[0][i] == loss[1][i] && norm[0][i] == norm[1][i];
    char tag[160];
    snprintf(tag, sizeof tag, "dp %d hp %d cp %d (window %d%s%s) ZeRO %d group %d%s slices %d%s", dp, hp, cp,
             cs[k].window, cs[k].chunk ? ", head chunk 2" : "", cs[k].ctx_first ? ", context-first" : "", cs[k].stage,
             cs[k].group, cs[k].bf16 ? " bf16" : "", cs[k].slice, cs[k].pack ? " packed+window" : "");
    CHECK(same, "%s: cpu and private differ (last loss %.17g vs %.17g, norm %.17g vs %.17g)", tag, loss[0][STEPS - 1],
          loss[1][STEPS - 1], norm[0][STEPS - 1], norm[1][STEPS - 1]);
    if (rank0) printf("private %s: %d steps bit-identical to cpu (loss %.6f)\n", tag, STEPS, loss[1][STEPS - 1]);
  }
  lc_attn_2d_test_set_poll_rows(0);
}

static void test_backend_update(void) {
  const int W = world->size;
  if (skipped_case("backend-update")) return;
  for (int odd = 0; odd < 2; odd++)
    for (int stage = 1; stage <= 3; stage++)
      for (int Z = W; Z >= 1; Z /= 2) {
        if (W % Z != 0 || (odd && Z != W)) continue;
        lc_config c;
        if (odd) odd_model(&c);
        else lc_config_preset(&c, "tiny");
        char tag[64];
        snprintf(tag, sizeof tag, "backends: stage %d Z %d%s", stage, Z, odd ? " odd model" : "");
        const size_t n = lc_t_backend_update(&c, stage, Z, world, tag);
        if (rank0 && stage == 2 && Z == W) printf("%s: %zu state values bit-identical (cpu vs private)\n", tag, n);
      }
}

// ---------------------------------------------------------------- C. layout
static void test_layout(void) {
  // Shard then gather is the identity, for every (cp, hp) of up to 8 ranks, for the zigzag
  // layout (k = 2: context rank c holds chunks c and 2cp-1-c only) and the balanced
  // layouts of 4 and 8 chunks per context rank (each rank holds k whole chunks).
  const int cps[] = {1, 2, 4, 8}, hps[] = {1, 2, 4, 8}, ks[] = {2, 4, 8};
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++)
      for (int ki = 0; ki < 3; ki++) {
        const int cp = cps[a], hp = hps[b], k = ks[ki];
        if (cp * hp > 8) continue;
        const long S = (long)k * cp * hp * 3, Lc = S / ((long)k * cp);
        lc_seq_layout L;
        CHECK(lc_seq_layout_init(&L, S, cp, hp, k) == LC_OK, "layout init: %s", lc_errmsg());
        char *seen = calloc((size_t)S, 1);
        int ok = 1, *held = calloc((size_t)(k * cp), sizeof(int));
        for (int c = 0; c < cp; c++)
          for (int h = 0; h < hp; h++)
            for (long i = 0; i < S / (cp * hp); i++) {
              long gidx = lc_seq_layout_global(&L, c, h, i);
              if (gidx < 0 || gidx >= S || seen[gidx]) {
                ok = 0;
                continue;
              }
              seen[gidx] = 1;
              const long chunk = gidx / Lc;
              if (k == 2 && chunk != c && chunk != 2 * cp - 1 - c) ok = 0;
              if (held[chunk] && held[chunk] != c + 1) ok = 0; // a chunk on two context ranks
              held[chunk] = c + 1;
            }
        for (long x = 0; x < S; x++) ok &= seen[x];
        CHECK(ok, "layout cp %d hp %d k %d is not a permutation of whole chunks%s", cp, hp, k,
              k == 2 ? " in zigzag order" : "");
        free(seen);
        free(held);
        lc_seq_layout_free(&L);
      }
  // Placement formulas (DESIGN.md).
  CHECK(lc_grid_rank_of(4, 2, LC_PLACE_HEAD_FIRST, 0, 1, 1) == 3, "head-first rank");
  CHECK(lc_grid_rank_of(4, 2, LC_PLACE_CONTEXT_FIRST, 0, 1, 1) == 5, "context-first rank");
  // Impossible layouts give clear errors.
  lc_config cfg;
  lc_config_preset(&cfg, "tiny"); // 4 heads, 2 kv heads
  struct {
    int world, hp, cp, w;
    long S;
    int batch;
    const char *want;
  } bad[] = {
      {6, 2, 2, 2, 64, 1, "not a multiple of hp x cp"},
      {8, 8, 1, 1, 64, 1, "does not divide the model's 4 attention heads"},
      {4, 2, 2, 2, 60, 1, "not divisible by 2 x cp x hp"},
      {8, 1, 8, 3, 64, 1, "--ring-window 3 must divide --cp 8"},
      {4, 2, 1, 1, 64, 1, "not divisible by the 2 data-parallel groups"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    lc_status st = lc_layout_validate(bad[i].world, bad[i].hp, bad[i].cp, bad[i].w, cfg.n_heads, cfg.n_kv_heads, bad[i].S, bad[i].batch);
    CHECK(st == LC_EINVAL && strstr(lc_errmsg(), bad[i].want), "layout error %zu: '%s'", i, lc_errmsg());
  }
  lc_config c3 = cfg;
  c3.n_heads = 6, c3.n_kv_heads = 3, c3.head_dim = 64 / 6;
  CHECK(lc_layout_validate(2, 2, 1, 1, c3.n_heads, c3.n_kv_heads, 64, 1) == LC_EINVAL && strstr(lc_errmsg(), "divide one another"),
        "hp vs kv heads: %s", lc_errmsg());
}

// ---------------------------------------------------------------- F. loss masks
// Counted targets of sample idx of the masked file, and the first target position counted.
static int masked_sample(lc_data *d, uint64_t idx, int *tok, int *tgt, int *doc, int *first) {
  lc_data_sample_docs(d, 5, idx, tok, tgt, doc, 64); // (step_opts: seed 5, 64 tokens)
  int n = 0;
  *first = 64;
  for (int t = 63; t >= 0; t--)
    if (tgt[t] != -100) n++, *first = t;
  return n;
}

// A version 3 token file (random bytes; counted runs of 40 among 360 masked, as answers
// among long prompts), written by rank 0, and the first sample of a batch where sample 0
// counts at least 2 targets, all in its last 64 / (2 W) places (their losses see the whole
// sequence; one rank holds them under every layout, the others count none), sample 1 and
// the last two of a batch of W and of 2 W count none (a pass, and under dp a whole group,
// with nothing), and with W >= 4 samples 4 and 5 count some, not as many as sample 0
// (dp W: two groups with uneven counts, two with none).
static void write_mask_file(void) {
  long pid = (long)getpid();
  MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  snprintf(mask_path, sizeof mask_path, "/tmp/lc_mpi_dist_mask_%d_%ld.tok", world->size, pid);
  if (rank0) {
    enum { N = 8000 };
    static uint32_t toks[N];
    static unsigned char mk[N];
    lc_rng r;
    lc_rng_seed(&r, 91);
    for (int i = 0; i < N; i++) toks[i] = lc_rng_below(&r, 256), mk[i] = (unsigned char)(i % 400 < 40);
    CHECK(lc_tokfile_write_mask(mask_path, toks, mk, N, 2, 256, NULL, 0) == LC_OK, "mask file: %s", lc_errmsg());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  lc_data d;
  CHECK(lc_data_open(&d, mask_path, 256, 64) == LC_OK, "mask data: %s", lc_errmsg());
  int tok[64], tgt[64], doc[64], first;
  const int W = world->size, cut = 64 - 64 / (2 * W);
  int found = 0;
  for (uint64_t i = 0; i < 200000 && !found; i++) {
    const int n0 = masked_sample(&d, i, tok, tgt, doc, &first);
    if (n0 < 2 || first < cut || masked_sample(&d, i + 1, tok, tgt, doc, &first)) continue;
    found = 1;
    const uint64_t zeros[] = {i + 2 * W - 2, i + 2 * W - 1, i + W - 2, i + W - 1};
    for (int k = 0; k < 4 && found; k++)
      if (zeros[k] > i + 1 && masked_sample(&d, zeros[k], tok, tgt, doc, &first)) found = 0;
    if (found && W >= 4) {
      const int n45 = masked_sample(&d, i + 4, tok, tgt, doc, &first) + masked_sample(&d, i + 5, tok, tgt, doc, &first);
      found = n45 > 0 && n45 != n0;
    }
    if (found) mask_first = i;
    if (found && rank0) printf("masked: batch from sample %llu\n", (unsigned long long)i);
  }
  lc_data_close(&d);
  CHECK(found, "no batch of the masked file has the counts the cases need");
}

// The first sample at or after `from` of a batch of `batch` samples counting some target.
static uint64_t counting_batch(uint64_t from, int batch) {
  lc_data d;
  CHECK(lc_data_open(&d, mask_path, 256, 64) == LC_OK, "mask data: %s", lc_errmsg());
  int tok[64], tgt[64], doc[64], first, n = 0;
  uint64_t i = from;
  for (; n == 0; i += n == 0) {
    n = 0;
    for (int b = 0; b < batch; b++) n += masked_sample(&d, i + (uint64_t)b, tok, tgt, doc, &first);
  }
  lc_data_close(&d);
  return i;
}

// ZeRO stage `stage` (a zero group of the whole world) under layout L with dp groups on the
// masked batch equals one process at stage 0 over 3 steps: the masked batch (a rank, and
// under dp whole groups, counting nothing), the batch after it (may count nothing at all:
// then the step is skipped on every shard alike, loss exactly 0) and a later batch that
// counts. Per step the loss (relative 1e-5: the same math summed in another order, ~1e-9
// observed), the counted targets (exact) and the norm (1e-5); after the steps every
// parameter, gathered tensor by tensor to rank 0, relative to max(its largest entry, 0.02)
// within 5e-5 (test_step_case's bound and reason). A rank or group with no counted target
// adds zero to the sharded gradient sums; a wrong divisor or a missing shard is O(1).
static void test_masked_zero(layout L, lc_placement pl, int dp, int stage, lc_model_opts mo) {
  if (L.hp * L.cp * dp != world->size || skipped_case("masked") || odd_world_skip(L)) return;
  step_case c = {mo, 2, 0.0f, 3, FAM_LLAMA, 0, 0};
  lc_comm *self;
  lc_comm_self(&self);
  lc_train_opts ro = step_opts(1, 1, 1, pl, 2 * dp, &c), o = step_opts(L.hp, L.cp, L.w, pl, 2 * dp, &c);
  o.mopts.zero = stage, o.mopts.zero_group = world->size;
  lc_trainer ref, tr;
  CHECK(lc_trainer_init(&ref, &ro, self) == LC_OK, "masked zero reference init: %s", lc_errmsg());
  CHECK(lc_trainer_init(&tr, &o, world) == LC_OK, "masked zero %d init: %s", stage, lc_errmsg());
  ref.next_sample = tr.next_sample = mask_first;
  char tag[120];
  snprintf(tag, sizeof tag, "masked zero %d Z %d: dp %d hp %d cp %d w %d %s %s", stage, world->size, dp, L.hp, L.cp, L.w,
           lc_placement_name(pl), lc_ckpt_name(mo.ckpt));
  double worst_l = 0, worst_n = 0;
  for (int k = 0; k < c.steps; k++) {
    lc_step_metrics rm, m;
    if (k == 2) ref.next_sample = tr.next_sample = counting_batch(ref.next_sample, 2 * dp);
    CHECK(lc_trainer_step(&ref, &rm) == LC_OK && lc_trainer_step(&tr, &m) == LC_OK, "%s step: %s", tag, lc_errmsg());
    CHECK(m.counted == rm.counted && (m.counted > 0 || k == 1), "%s step %d: counted %ld, one process %ld", tag, k + 1,
          m.counted, rm.counted);
    if (rm.counted == 0) {
      CHECK(m.loss == 0 && m.grad_norm == 0 && m.skipped, "%s step %d: nothing counts, yet loss %g norm %g", tag, k + 1,
            m.loss, m.grad_norm);
      continue;
    }
    worst_l = fmax(worst_l, fabs(m.loss - rm.loss) / fabs(rm.loss));
    worst_n = fmax(worst_n, fabs(m.grad_norm - rm.grad_norm) / rm.grad_norm);
  }
  CHECK(worst_l <= 1e-5 && worst_n <= 1e-5, "%s: loss error %.3g, grad norm error %.3g", tag, worst_l, worst_n);
  lc_pstore *tp = lc_model_trainable(&tr.model), *rp = lc_model_trainable(&ref.model);
  size_t big = 0;
  for (int i = 0; i < tp->lay.n_tensors; i++) big = tp->lay.table[i].numel > big ? tp->lay.table[i].numel : big;
  float *buf = malloc(sizeof(float) * big);
  double worst_p = 0;
  const char *wpn = "";
  for (int i = 0; i < tp->lay.n_tensors; i++) {
    const lc_param_info *p = &tp->lay.table[i];
    const float *src = lc_pstore_tensor_ptr(tp, LC_PS_PARAMS, i);
    if (!src) CHECK(lc_pstore_gather_tensor(tp, LC_PS_PARAMS, i, rank0 ? buf : NULL) == LC_OK, "gather: %s", lc_errmsg());
    if (!rank0) continue;
    const double e = rel_err_floor(src ? src : buf, rp->params + rp->lay.table[i].offset, p->numel, 0.02);
    if (e > worst_p) worst_p = e, wpn = p->name;
  }
  free(buf);
  CHECK(worst_p <= 5e-5, "%s: parameters after %d steps differ by %.3g (%s)", tag, c.steps, worst_p, wpn);
  double ww[3] = {worst_l, worst_n, worst_p};
  MPI_Allreduce(MPI_IN_PLACE, ww, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (rank0) printf("%-52s loss %.1e norm %.1e params %.1e (vs one process, zero 0)\n", tag, ww[0], ww[1], ww[2]);
  lc_trainer_free(&tr);
  lc_trainer_free(&ref);
  lc_comm_destroy(self);
}

// Every layout of the world with the masked batch (2 sequences a rank: two passes, the
// second counting nothing), data parallel over all ranks and dp x cp, dp x hp: = one process.
static void test_masked(const layout *lays, int nl, lc_model_opts plain, lc_model_opts sel) {
  if (skipped_case("masked")) return;
  write_mask_file();
  const lc_placement pls[] = {LC_PLACE_HEAD_FIRST, LC_PLACE_CONTEXT_FIRST};
  for (int i = 0; i < nl; i++) {
    step_case c = {i % 2 ? sel : plain, 2, 0.0f, 1, i % 3 == 2 ? FAM_QWEN3 : FAM_LLAMA, 0, 0};
    test_step_case(lays[i], pls[i % 2], 1, &c, "masked");
  }
  step_case c = {sel, 2, 0.0f, 1, FAM_LLAMA, 0, 0};
  test_step_case((layout){1, 1, 1}, LC_PLACE_HEAD_FIRST, world->size, &c, "masked");
  if (world->size >= 4) {
    test_step_case((layout){1, 2, 2}, LC_PLACE_CONTEXT_FIRST, world->size / 2, &c, "masked");
    test_step_case((layout){2, 1, 1}, LC_PLACE_HEAD_FIRST, world->size / 2, &c, "masked");
  }
  // ZeRO 1, 2, 3 on the masked batch: data parallel over every rank (whole groups count
  // nothing), the ring, and 2D (heads, or dp x cp) with 4 ranks or more.
  const int W = world->size;
  test_masked_zero((layout){1, 1, 1}, LC_PLACE_HEAD_FIRST, W, 1, sel);
  test_masked_zero((layout){1, W, W}, LC_PLACE_CONTEXT_FIRST, 1, 2, plain);
  test_masked_zero((layout){1, 1, 1}, LC_PLACE_HEAD_FIRST, W, 3, plain);
  if (W >= 4) {
    test_masked_zero((layout){2, 2, 2}, LC_PLACE_HEAD_FIRST, W / 4, 3, sel);
    test_masked_zero((layout){1, 2, 2}, LC_PLACE_CONTEXT_FIRST, W / 2, 2, sel);
  } else {
    test_masked_zero((layout){W, 1, 1}, LC_PLACE_HEAD_FIRST, 1, 3, sel);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank0) remove(mask_path);
  mask_path[0] = 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int expect = argc > 1 ? atoi(argv[1]) : -1;
  CHECK(lc_comm_mpi_world(&world) == LC_OK, "world");
  rank0 = world->rank == 0;
  // A launcher of another MPI starts N one-rank jobs: catch it.
  CHECK(world->size == expect, "world size %d, expected %d (mpirun from another MPI?)", world->size, expect);
  if (argc > 2 && !strcmp(argv[2], "--planted-failure")) {
    // The harness itself: the last rank fails a check and then would not enter the barrier
    // the others wait in (as a rank that gives up on a failed step): only the abort ends it.
    if (world->rank == world->size - 1) CHECK(0, "planted failure (mpi_dist_abort)");
    else MPI_Barrier(MPI_COMM_WORLD);
    sleep(600);
    return 1;
  }
  if (world->size == expect) {
    if (rank0 && !skipped_case("layout")) test_layout();
    const lc_placement pls[] = {LC_PLACE_HEAD_FIRST, LC_PLACE_CONTEXT_FIRST};
    const layout lays[] = {{2, 1, 1}, {4, 1, 1}, {8, 1, 1}, {1, 2, 2}, {1, 4, 4}, {1, 8, 8},
                           {2, 2, 2}, {2, 4, 4}, {4, 2, 2}, {1, 8, 2}, {1, 8, 4}, {1, 4, 2},
                           {2, 4, 2}, {1, 2, 1}};
    const int nl = (int)(sizeof lays / sizeof lays[0]);
    for (int p = 0; p < 2; p++)
      for (int i = 0; i < nl; i++) {
        test_attention(lays[i], pls[p], 8, 2); // GQA, kv heads < hp for hp 4, 8
        if (lays[i].hp <= 4) test_attention(lays[i], pls[p], 4, 4);
        test_attention(lays[i], pls[p], 8, 1); // one kv head: replicated whenever hp > 1
      }
    // Ring chunks longer than the 256-row poll tile (Lc = 300 = 256 + 44 rows), cp <= 4.
    for (int i = 0; i < nl; i++)
      if (lays[i].cp > 1 && lays[i].cp <= 4 && 300 % lays[i].hp == 0)
        test_attention_rows(lays[i], pls[i % 2], 4, 2, 8, 300 / lays[i].hp, 0);
    // bf16 (GQA, and one kv head replicated over the head ranks).
    for (int i = 0; i < nl; i++) {
      test_attention_rows(lays[i], pls[(i + 1) % 2], 8, 2, 16, 12, 1);
      if (lays[i].hp > 1) test_attention_rows(lays[i], pls[i % 2], 8, 1, 16, 12, 1);
    }
    lc_model_opts plain = {LC_CKPT_NONE, 0, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0}, sel = {LC_CKPT_SELECTIVE, 5, 7, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0}, full = {LC_CKPT_FULL, 8, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0};
    for (int p = 0; p < 2; p++)
      for (int i = 0; i < nl; i++) test_step(lays[i], pls[p], 1, plain, "plain");
    // Data parallel x sequence parallel, and memory options.
    const layout sp2[] = {{2, 1, 1}, {1, 2, 2}};
    for (int p = 0; p < 2; p++)
      for (int i = 0; i < 2; i++) test_step(sp2[i], pls[p], world->size / 2, plain, "dp");
    for (int i = 0; i < nl; i++) test_step(lays[i], LC_PLACE_HEAD_FIRST, 1, sel, "selective");
    test_masked(lays, nl, plain, sel);
    for (int i = 0; i < nl; i++) test_step(lays[i], LC_PLACE_CONTEXT_FIRST, 1, full, "full");
    // bf16 under every layout (GQA), both placements, against one process in bf16.
    lc_model_opts plain16 = plain, full16 = full, sel16 = sel;
    plain16.precision = full16.precision = sel16.precision = LC_DT_BF16;
    for (int i = 0; i < nl; i++) {
      test_step(lays[i], pls[i % 2], 1, plain16, "bf16");
      test_step(lays[i], pls[(i + 1) % 2], 1, i % 2 ? full16 : sel16, "bf16-ckpt");
    }
    test_step((layout){1, 1, 1}, LC_PLACE_HEAD_FIRST, world->size, full16, "bf16-dp");
    test_step((layout){1, 1, 1}, LC_PLACE_HEAD_FIRST, world->size, plain, "dp-only");
    // Clipping below the norm, two updates: the clip scale comes from the global norm.
    // One kv head: replicated on the head ranks, its gradient summed back (hp > 1).
    step_case clip = {sel, 2, 0.05f, 2, FAM_LLAMA, 0, 0}, mqa = {plain, 1, 0.0f, 1, FAM_LLAMA, 0, 0};
    for (int i = 0; i < nl; i++) {
      if (i % 3 == 0) test_step_case(lays[i], LC_PLACE_HEAD_FIRST, 1, &clip, "clip");
      if (lays[i].hp > 1) test_step_case(lays[i], LC_PLACE_CONTEXT_FIRST, 1, &mqa, "mqa");
    }
    test_step_case((layout){1, 1, 1}, LC_PLACE_HEAD_FIRST, world->size, &clip, "dp-clip");
    // Offloaded checkpoints: every policy, fp32 and bf16, a Qwen3 model, on these layouts.
    for (int i = 0; i < nl; i++)
      if (i % 4 == 0 || lays[i].hp * lays[i].cp == 2) {
        test_offload(lays[i], pls[i % 2], i % 2 ? full : sel, FAM_LLAMA);
        test_offload(lays[i], pls[(i + 1) % 2], i % 2 ? sel16 : plain16, i % 2 ? FAM_QWEN3 : FAM_LLAMA);
      }
    test_offload((layout){1, 1, 1}, LC_PLACE_HEAD_FIRST, plain, FAM_LLAMA);
    lc_model_opts z3 = sel, z2 = full16;
    z3.zero = 3, z2.zero = 2;
    test_offload((layout){1, 2, 2}, LC_PLACE_HEAD_FIRST, z3, FAM_LLAMA); // ZeRO 3: gathered weights + offload
    test_offload((layout){2, 2, 2}, LC_PLACE_CONTEXT_FIRST, z2, FAM_QWEN2);
    // The other families under every layout, both placements, each policy, fp32 and bf16:
    // their bias and norm gradients summed over the head and context ranks as any weight's.
    for (int i = 0; i < nl; i++) {
      step_case q2 = {i % 2 ? plain : full, 2, 0.0f, 1, FAM_QWEN2, 0, 0}, q3 = {i % 2 ? sel : plain, 2, 0.0f, 1, FAM_QWEN3, 0, 0};
      test_step_case(lays[i], pls[i % 2], 1, &q2, "qwen2");
      test_step_case(lays[i], pls[(i + 1) % 2], 1, &q3, "qwen3");
      step_case q3b = {i % 2 ? full16 : sel16, 2, 0.0f, 1, i % 2 ? FAM_QWEN2 : FAM_QWEN3, 0, 0};
      test_step_case(lays[i], pls[i % 2], 1, &q3b, "fam-bf16");
    }
    // LoRA (a frozen base, rank-4 adapters on all seven projections): every layout, both
    // placements, each policy, the families, fp32 and bf16, data parallel; 2 steps, so the
    // second one's A gradients (zero while B is) count. The base must stay bit for bit.
    for (int i = 0; i < nl; i++) {
      const lc_model_opts pol = i % 3 == 0 ? plain : i % 3 == 1 ? sel : full;
      step_case la = {pol, 2, 0.0f, 2, i % 2 ? FAM_QWEN3 : FAM_LLAMA, 0, 4};
      test_step_case(lays[i], pls[i % 2], 1, &la, "lora");
      if (i % 2 == 0) {
        step_case lb = {i % 4 ? sel16 : full16, 2, 0.0f, 2, FAM_QWEN2, 0, 4};
        test_step_case(lays[i], pls[(i + 1) % 2], 1, &lb, "lora-bf16");
      }
    }
    step_case ldp = {sel, 2, 0.0f, 2, FAM_LLAMA, 0, 4};
    test_step_case((layout){1, 1, 1}, LC_PLACE_HEAD_FIRST, world->size, &ldp, "lora-dp");
    // LoRA dropout (p 0.25): every layout, both placements, each policy and MLP tiles, fp32
    // and bf16, data parallel: the same mask on every layout, so the same numbers.
    lora_drop = 0.25f;
    for (int i = 0; i < nl; i++) {
      const lc_model_opts pol = i % 3 == 0 ? plain : i % 3 == 1 ? sel : full16;
      step_case ld = {pol, 2, 0.0f, 2, i % 2 ? FAM_QWEN3 : FAM_QWEN2, 0, 4};
      test_step_case(lays[i], pls[(i + 1) % 2], 1, &ld, "lora-dropout");
    }
    test_step_case((layout){1, 1, 1}, LC_PLACE_HEAD_FIRST, world->size, &ldp, "lora-dropout-dp");
    lora_drop = 0;
    // The frozen base held in bf16 (2 bytes; bf16 passes): every layout against one process.
    lora_base16 = 1;
    for (int i = 0; i < nl; i += 2) {
      step_case l16 = {i % 4 ? full16 : sel16, 2, 0.0f, 2, i % 4 ? FAM_QWEN3 : FAM_LLAMA, 0, 4};
      test_step_case(lays[i], pls[i % 2], 1, &l16, "lora-base16");
    }
    lora_base16 = 0;
    // The frozen base in GGUF blocks (QLoRA): every other layout, fp32 and bf16 passes, and
    // data parallel, against one process.
    lora_qbase = 1;
    for (int i = 1; i < nl; i += 2) {
      step_case lq = {i % 4 == 1 ? sel : full16, 2, 0.0f, 2, i % 4 == 1 ? FAM_LLAMA : FAM_QWEN3, 0, 4};
      test_step_case(lays[i], pls[i % 2], 1, &lq, "qlora");
    }
    test_step_case((layout){1, 1, 1}, LC_PLACE_CONTEXT_FIRST, world->size, &ldp, "qlora-dp");
    lora_qbase = 0;
    // ZeRO stages 1-3, over the whole world and in smaller groups (hybrid), under dp only,
    // cp only, hp only and 2D, with full and selective checkpointing and tiles.
    const int W = world->size;
    test_segments();
    test_backend_update();
    // Packed documents and sliding windows under every layout, zigzag and balanced.
    // Balanced layouts with up to 8 chunks per rank: 128-token sequences take 16-token
    // chunks (test-only minimum); the real minimum (256) gives them 2 (one case).
    write_pack_file();
    test_private_steps();
    lc_cp_layout_test_set_min_chunk(1);
    for (int i = 0; i < nl; i++) {
      test_packed(lays[i], i % 2 ? LC_PLACE_CONTEXT_FIRST : LC_PLACE_HEAD_FIRST, LC_CP_BALANCED, 0, plain, 1, FAM_LLAMA);
      test_packed(lays[i], LC_PLACE_HEAD_FIRST, LC_CP_ZIGZAG, 24, i % 2 ? sel : full, 1, FAM_LLAMA);
      // Dynamic RoPE (Qwen2) over packed documents: the longest one sets it on every rank.
      if (i % 3 == 0) test_packed(lays[i], pls[i % 2], LC_CP_BALANCED, 0, i % 2 ? full : sel, 1, FAM_QWEN2);
      // LoRA dropout over packed documents, balanced chunks and a window: the documents
      // alone, given their tokens' places in the packed sequence, drop the same values.
      if (i % 2 == 0) {
        lora_drop = 0.25f;
        test_packed(lays[i], pls[(i / 2) % 2], LC_CP_BALANCED, i % 4 ? 24 : 0, i % 4 ? full : sel, 1, FAM_LLAMA);
        lora_drop = 0;
      }
    }
    test_packed((layout){1, 1, 1}, LC_PLACE_HEAD_FIRST, LC_CP_ZIGZAG, 0, plain, 1, FAM_LLAMA);
    test_packed((layout){1, 1, 1}, LC_PLACE_HEAD_FIRST, LC_CP_ZIGZAG, 0, sel, 1, FAM_QWEN2);
    test_packed((layout){1, 1, 1}, LC_PLACE_HEAD_FIRST, LC_CP_ZIGZAG, 20, sel, 0, FAM_LLAMA);
    for (int i = 0; i < nl; i++)
      if (lays[i].cp > 1) test_packed(lays[i], LC_PLACE_CONTEXT_FIRST, LC_CP_BALANCED, 20, sel, 0, FAM_LLAMA);
    lc_cp_layout_test_set_min_chunk(0);
    if (world->size > 1) test_packed((layout){1, world->size, world->size}, LC_PLACE_HEAD_FIRST, LC_CP_BALANCED, 0, sel, 1, FAM_LLAMA);
    if (rank0) remove(pack_path);
    if (W > 1) {
      const layout only_dp = {1, 1, 1}, only_cp = {1, W, W}, only_hp = {W, 1, 1}, two_d = {2, W / 2, W / 2};
      struct { layout L; int dp; const char *name; } zl[] = {
          {only_dp, W, "dp"}, {only_cp, 1, "cp"}, {only_hp, 1, "hp"}, {two_d, 1, "2d"}};
      for (int stage = 1; stage <= 3; stage++)
        for (int zi = 0; zi < 2; zi++) {
          const int Z = zi == 0 ? W : W / 2;
          for (int i = 0; i < 4; i++) {
            if (i == 3 && W < 4) continue;
            test_zero(zl[i].L, (i + zi) % 2 ? LC_PLACE_CONTEXT_FIRST : LC_PLACE_HEAD_FIRST, zl[i].dp, stage, Z,
                      (i + stage) % 2 ? full : sel, 0, zl[i].name);
          }
        }
      for (int stage = 1; stage <= 3; stage++) test_zero(only_dp, LC_PLACE_HEAD_FIRST, W, stage, W, sel, 1, "dp");
      if (W >= 4) test_zero((layout){1, 2, 2}, LC_PLACE_HEAD_FIRST, W / 2, 3, W / 2, full, 1, "cp+dp");
      // The families' tensors (biases, q/k norms) sharded like any: stage 3 gathers them.
      test_zero(only_dp, LC_PLACE_HEAD_FIRST, W, 3, W, sel, FAM_QWEN3, "qwen3");
      test_zero(only_cp, LC_PLACE_CONTEXT_FIRST, 1, 2, W, full, FAM_QWEN2, "qwen2");
      if (W >= 4) test_zero(two_d, LC_PLACE_HEAD_FIRST, 1, 3, W / 2, sel, FAM_QWEN3, "qwen3-2d");
      // bf16: stage 3 rounds the gathered copy, stages 1-2 a copy of the full weights.
      for (int stage = 1; stage <= 3; stage++)
        test_zero(stage == 2 ? only_cp : only_dp, LC_PLACE_HEAD_FIRST, stage == 2 ? 1 : W, stage, W, full16, 0, "bf16");
      if (W >= 4) test_zero(two_d, LC_PLACE_CONTEXT_FIRST, 1, 3, W / 2, sel16, 0, "bf16-2d");
      // Vocabulary slices (--vocab-slice 60: 5 slices of the odd model's 251 rows, the
      // last 11; 5 of the tied Qwen2's 256, the last 16): only slices are gathered and
      // reduced (uneven pieces: most ranks hold none of a slice), against zero 0 with the
      // whole matrices; replica groups (Z = W/2) all-reduce each slice's pieces.
      lc_model_opts vs = sel, vf16 = full16;
      vs.vocab_slice = vf16.vocab_slice = 60;
      for (int stage = 1; stage <= 3; stage++) test_zero(only_dp, LC_PLACE_HEAD_FIRST, W, stage, W, vs, 1, "vocab");
      test_zero(only_cp, LC_PLACE_HEAD_FIRST, 1, 3, W, vf16, FAM_QWEN2, "vocab-tied-bf16");
      test_zero(W >= 4 ? two_d : only_hp, LC_PLACE_CONTEXT_FIRST, 1, 3, W / 2, vs, FAM_QWEN2, "vocab-tied-hybrid");
      test_zero(only_dp, LC_PLACE_HEAD_FIRST, W, 2, W / 2, vf16, 1, "vocab-z2-hybrid");
      // LoRA: the adapters' states sharded by the stage, the frozen base gathered under 3
      // (by layer units and, with vocabulary slices, by rows), hybrid groups, bf16.
      zero_lora = 4;
      for (int stage = 1; stage <= 3; stage++)
        test_zero(stage == 2 ? only_cp : only_dp, LC_PLACE_HEAD_FIRST, stage == 2 ? 1 : W, stage, stage == 3 ? W / 2 : W,
                  stage == 1 ? full : sel, stage == 3 ? FAM_QWEN3 : 0, "lora");
      test_zero(W >= 4 ? two_d : only_hp, LC_PLACE_CONTEXT_FIRST, 1, 3, W, full16, 0, "lora-bf16");
      test_zero(only_dp, LC_PLACE_HEAD_FIRST, W, 3, W, vs, FAM_QWEN2, "lora-vocab-tied");
      lora_drop = 0.25f;
      test_zero(W >= 4 ? two_d : only_cp, LC_PLACE_HEAD_FIRST, 1, 3, W / 2, sel, FAM_QWEN3, "lora-dropout");
      lora_drop = 0;
      lora_base16 = 1; // the bf16 base under ZeRO 1-2 (the adapters' states sharded) and 3 (the base too)
      test_zero(only_cp, LC_PLACE_HEAD_FIRST, 1, 2, W, sel16, 0, "lora-base16");
      test_zero(only_dp, LC_PLACE_CONTEXT_FIRST, W, 1, W / 2, full16, FAM_QWEN2, "lora-base16");
      test_zero(W >= 4 ? two_d : only_hp, LC_PLACE_HEAD_FIRST, 1, 3, W, sel16, FAM_QWEN3, "lora-base16");
      test_zero(only_dp, LC_PLACE_HEAD_FIRST, W, 3, W / 2, full16, FAM_QWEN2, "lora-base16-hybrid");
      // with vocabulary slices: the bf16 rows gathered as they are (3), or viewed where they lie (2: the base whole)
      test_zero(only_dp, LC_PLACE_HEAD_FIRST, W, 3, W / 2, vf16, FAM_QWEN2, "lora-base16-vocab");
      test_zero(only_cp, LC_PLACE_CONTEXT_FIRST, 1, 2, W, vf16, 1, "lora-base16-vocab");
      lora_base16 = 0;
      lora_qbase = 1; // the base in blocks (whole on every rank) under the adapters' ZeRO 1 and 2
      test_zero(only_cp, LC_PLACE_CONTEXT_FIRST, 1, 2, W, sel, 0, "qlora");
      test_zero(only_dp, LC_PLACE_HEAD_FIRST, W, 1, W / 2, full16, FAM_QWEN2, "qlora-bf16");
      // ZeRO 3: the blocks sharded (a unit's bytes Z ways) and gathered as held; vocabulary
      // slices: the rows viewed where they lie (stages 1-2) or gathered as held (3)
      // (3 ranks: the hp and cp cases as data parallel, a zero group of 3, where a unit padded
      // to 64 bytes alone would not split into whole shards: the layout's 64 Z bytes)
      const int odd_w = W % 2, hZ = odd_w ? W : W / 2;
      test_zero(W >= 4 ? two_d : odd_w ? only_dp : only_hp, LC_PLACE_HEAD_FIRST, odd_w ? W : 1, 3, W, sel, FAM_QWEN3, "qlora-z3");
      test_zero(only_dp, LC_PLACE_CONTEXT_FIRST, W, 3, hZ, full16, FAM_QWEN2, "qlora-z3-bf16");
      test_zero(odd_w ? only_dp : only_cp, LC_PLACE_HEAD_FIRST, odd_w ? W : 1, 3, W, vs, 0, "qlora-z3-vocab");
      test_zero(only_dp, LC_PLACE_HEAD_FIRST, W, 3, hZ, vf16, FAM_QWEN2, "qlora-z3-vocab");
      test_zero(only_cp, LC_PLACE_CONTEXT_FIRST, 1, 2, W, vf16, 1, "qlora-vocab");
      // The bf16 ZeRO-3 cases again on the other GEMM path this CPU has (issue 47): oneDNN's
      // native bf16 GEMM packs a block tile's 2-byte copy that sgemm does not, so the step
      // peaks in another phase (with it: the loss, where layer L-1's gather is in flight for
      // both stores); a CPU with AVX512_BF16 checks the total on both paths.
      const int other = other_gemm_path();
      if (other >= 0) {
        const lc_kern_level cur = lc_kern()->level;
        char note[32];
        snprintf(note, sizeof note, " (kernels %s)", lc_kern_name((lc_kern_level)other));
        CHECK(lc_kern_select((lc_kern_level)other) == LC_OK, "select %s: %s", note, lc_errmsg());
        kern_note = note;
        test_zero(only_dp, LC_PLACE_CONTEXT_FIRST, W, 3, W / 2, full16, FAM_QWEN2, "qlora-z3-bf16");
        test_zero(only_dp, LC_PLACE_HEAD_FIRST, W, 3, W / 2, vf16, FAM_QWEN2, "qlora-z3-vocab");
        kern_note = "";
        CHECK(lc_kern_select(cur) == LC_OK, "select %s again: %s", lc_kern_name(cur), lc_errmsg());
      } else if (rank0) {
        printf("qlora-z3-bf16: one GEMM path on this CPU (%s): not run on another\n",
               lc_kern()->gemm_bf16 ? "oneDNN bf16" : "sgemm");
      }
      lora_qbase = 0;
      zero_lora = 0;
    }
    if (world->size >= 4) test_step_case((layout){2, 1, 1}, LC_PLACE_HEAD_FIRST, world->size / 2, &clip, "dp-clip");
    // Head-chunked Ulysses: every chunk size against unchunked, on every layout with hp > 1,
    // both placements; MHA and GQA (whole kv groups per stage: Hkv 8, 4 at hp 2), one kv head
    // per rank (Hkv = hp) and replicated (Hkv < hp); fp32 and bf16; documents + window.
    for (int i = 0; i < nl; i++) {
      if (lays[i].hp < 2) continue;
      const int Hq = lays[i].hp == 8 ? 16 : 8;
      test_chunks(lays[i], pls[i % 2], Hq, Hq, 0, 0);
      test_chunks(lays[i], pls[(i + 1) % 2], Hq, lays[i].hp == 2 ? 4 : 2, 1, i % 2);
      test_chunks(lays[i], pls[i % 2], Hq, lays[i].hp, i % 2, 1);
      test_chunks(lays[i], pls[(i + 1) % 2], Hq, 2, 0, 0);
    }
    // Whole steps: chunked = unchunked on the same layout, and = one process (B).
    lc_model_opts sel_w = sel;
    for (int i = 0; i < nl; i++) {
      if (lays[i].hp < 2 || lays[i].hp > 4) continue;
      test_chunk_steps(lays[i], pls[i % 2], 8, i % 2 ? sel16 : sel, 8 / lays[i].hp / 2);
      test_chunk_steps(lays[i], pls[(i + 1) % 2], 2, i % 2 ? full : plain16, 1);
      step_case hcs = {i % 2 ? full16 : sel_w, 4, 0.0f, 1, FAM_LLAMA, lays[i].hp == 2 ? 2 : 1, 0};
      test_step_case(lays[i], pls[i % 2], 1, &hcs, "head-chunk");
    }
  }
  int fails = lc_t_fail;
  MPI_Allreduce(MPI_IN_PLACE, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  int passes = lc_t_pass;
  MPI_Allreduce(MPI_IN_PLACE, &passes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank0) printf("mpi_dist (%d ranks): %d passed, %d failed\n", world->size, passes, fails);
  lc_comm_destroy(world);
  MPI_Finalize();
  return fails ? 1 : 0;
}
