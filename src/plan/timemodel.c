#include "plan/timemodel.h"

#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/seqlayout.h"
#include "model/ckstore.h"
#include "model/loss.h"
#include "model/memplan.h"
#include "model/params.h"
#include "model/pstore.h"
#include "model/schedule.h"

// Element-wise bytes per token of one layer's forward (norms, RoPE, residual adds, SwiGLU,
// casts): read + write, fp32. Backward moves about twice as much.
static double ew_layer_fwd(const lc_config *c) {
  const double C = c->dim, HQ = (double)c->n_heads * c->head_dim, HKV = (double)c->n_kv_heads * c->head_dim;
  return 4.0 * (10 * C + 3 * HQ + 2 * HKV + 4 * (double)c->ffn);
}

typedef struct {
  const lc_config *c;
  const lc_model_opts *o;
  const lc_rates *r;
  int bf16, T, hp, cp, hc_stages, tiled;
  double attn_fwd_s, attn_bwd_s;   // kernel seconds per layer (slowest rank)
  double in_s[2], back_s[2];       // Ulysses per layer [fwd, bwd]: the exchange in (q/k/v; dout and,
                                   // chunked, q/k/v/out again) and back (out; dq/dk/dv in fp32), all stages
  double hop_s[2], tail_s;         // ring: one step's hop [fwd, bwd (k/v + dk/dv)]; backward's final dk/dv return
  double attn_comm_s, attn_exposed_s; // accumulated by attention(): all of its exchanges, the part waited for
  double sl_comm[3];               // vocabulary slices under ZeRO 2/3: the row gathers and reductions of the
                                   // sliced embedding forward, loss and embedding backward (slice-ahead: overlapped)
  double sl_comm_s, sl_exposed_s;  // accumulated by sliced(): all, the part waited for
  double gemm_s, ew_s, loss_ew_s;  // accumulated: every product, element-wise pass, the loss's softmax passes
  int lora;                        // LoRA (cfg->lora): the base's backward products are dX alone, the
                                   // adapters' run beside them, nothing of the embedding's backward
} cost;

// An element-wise pass of `flops` (counted into the estimate's element-wise term).
static double ew(cost *k, double flops) {
  const double s = lc_rates_ew_s(k->r, flops);
  k->ew_s += s;
  return s;
}

// A sliced op of `compute` seconds whose row ranges move `comm` seconds, each slice's
// transfer under the previous slice's work: the longer of the two.
static double sliced(cost *k, double compute, double comm) {
  k->sl_comm_s += comm;
  if (comm <= compute) return compute;
  k->sl_exposed_s += comm - compute;
  return comm;
}

// One linear layer (T x K -> N) forward or backward.
static double lin(const cost *k, int bwd, double T, int K, int N) { return lc_rates_gemm_s(k->r, k->bf16, bwd, T, K, N); }
// Products of `s` seconds (counted into the estimate's GEMM term).
static double gemms(cost *k, double s) {
  k->gemm_s += s;
  return s;
}

// One projection (T x K -> N) of target i: the base's product (LoRA backward: dX alone, as
// a forward product costs) and its adapter's (model/lora_op.h): forward x A^T and u B^T;
// backward x A^T again, B's dW + dX, A's dW + dX.
static double proj(const cost *k, int bwd, double T, int K, int N, int i) {
  const lc_lora *l = &k->c->lora;
  if (!k->lora) return lin(k, bwd, T, K, N);
  double s = lin(k, 0, T, K, N);
  if (l->targets >> i & 1u)
    s += bwd ? lin(k, 0, T, K, l->rank) + lin(k, 1, T, l->rank, N) + lin(k, 1, T, K, l->rank)
             : lin(k, 0, T, K, l->rank) + lin(k, 0, T, l->rank, N);
  return s;
}
// LoRA dropout's element-wise passes (model/lora_op.c) over the inputs of the adapted
// projections among `which` (bits LC_LORA_Q..): forward (and each recompute) masks x into a
// copy (read x, write x o m); backward masks it again, writes du A (fp32) and adds its kept
// part into dx (read and write).
static double drop_ew(cost *k, int bwd, unsigned which) {
  const lc_config *c = k->c;
  if (!k->lora || !(c->lora.dropout > 0)) return 0;
  const double HQ = (double)c->n_heads * c->head_dim, xb = k->bf16 ? 2 : 4;
  const double in[LC_LORA_N] = {c->dim, c->dim, c->dim, HQ, c->dim, c->dim, c->ffn};
  double K = 0;
  for (int i = 0; i < LC_LORA_N; i++)
    if (which >> i & c->lora.targets & 1u) K += in[i];
  return ew(k, k->T * K * (bwd ? 2 * xb + 12 : 2 * xb));
}
#define ATTN_T ((1u << LC_LORA_Q) | (1u << LC_LORA_K) | (1u << LC_LORA_V) | (1u << LC_LORA_O))
#define GATE_UP ((1u << LC_LORA_GATE) | (1u << LC_LORA_UP))

// GEMMs of the attention half (q, k, v, o) and the MLP half (gate, up[, down]).
static double attn_gemms(cost *k, int bwd) {
  const lc_config *c = k->c;
  const int HQ = c->n_heads * c->head_dim, HKV = c->n_kv_heads * c->head_dim, C = c->dim;
  return gemms(k, proj(k, bwd, k->T, C, HQ, LC_LORA_Q) + proj(k, bwd, k->T, C, HKV, LC_LORA_K) +
                      proj(k, bwd, k->T, C, HKV, LC_LORA_V) + proj(k, bwd, k->T, HQ, C, LC_LORA_O));
}
static double mlp_gemms(cost *k, int bwd, int with_down) {
  const lc_config *c = k->c;
  return gemms(k, proj(k, bwd, k->T, c->dim, c->ffn, LC_LORA_GATE) + proj(k, bwd, k->T, c->dim, c->ffn, LC_LORA_UP) +
                      (with_down ? proj(k, bwd, k->T, c->ffn, c->dim, LC_LORA_DOWN) : 0));
}

// A layer's attention with its exchanges (attn_2d.c, ring.c). Ulysses: each stage's exchange
// back blocks; the exchange in blocks for the first stage and, with head chunks, overlaps
// the previous stage's ring for the others. Ring: each of the cp - 1 hops overlaps the
// kernel on the block in hand (about 1/cp of the layer's tiles); backward's dk/dv return to
// their owner at the end. Double-ring windows are priced as one ring.
static double attention(cost *k, int bwd) {
  const double ker = bwd ? k->attn_bwd_s : k->attn_fwd_s, N = k->hc_stages;
  const double in = k->in_s[bwd], back = k->back_s[bwd], hop = k->hop_s[bwd];
  double exposed = back + in / N, comm = in + back;
  const double in_rest = in - in / N; // stages 2..N: each under the previous stage's kernels
  if (in_rest > 0) exposed += (N - 1) * (in_rest / (N - 1) > ker / N ? in_rest / (N - 1) - ker / N : 0);
  if (k->cp > 1) {
    const double per_step = ker / N / k->cp;
    exposed += N * (k->cp - 1) * (hop / N > per_step ? hop / N - per_step : 0) + (bwd ? k->tail_s : 0);
    comm += (k->cp - 1) * hop + (bwd ? k->tail_s : 0);
  }
  k->attn_comm_s += comm;
  k->attn_exposed_s += exposed;
  return ker + exposed;
}

static double op_seconds(cost *k, lc_op op, double *recompute, double *attn_kernel) {
  const lc_config *c = k->c;
  const double T = k->T, ewf = ew_layer_fwd(c) * T, V = c->vocab, C = c->dim;
  const lc_ckpt_policy pol = k->o->ckpt;
  switch (op) {
  case LC_OP_EMBED_FWD: return ew(k, 8.0 * T * C);
  case LC_OP_EMBED_BWD: return k->lora ? 0 : ew(k, 8.0 * T * C); // (LoRA: the embedding is frozen)
  case LC_OP_EMBED_FWD_SLICED: return sliced(k, ew(k, 8.0 * T * C), k->sl_comm[0]);
  case LC_OP_EMBED_BWD_SLICED: return k->lora ? 0 : sliced(k, ew(k, 8.0 * T * C), k->sl_comm[2]);
  case LC_OP_LAYER_FWD:
    *attn_kernel += k->attn_fwd_s;
    return attn_gemms(k, 0) + mlp_gemms(k, 0, 1) + attention(k, 0) + ew(k, ewf) + drop_ew(k, 0, LC_LORA_ALL);
  case LC_OP_RECOMPUTE: { // lc_layer_fwd without the output: q/k/v/o, untiled gate/up; full: attention too
    double s = attn_gemms(k, 0) + (k->tiled ? 0 : mlp_gemms(k, 0, 0)) + ew(k, ewf) +
               drop_ew(k, 0, ATTN_T | (k->tiled ? 0 : GATE_UP));
    if (pol == LC_CKPT_FULL) s += attention(k, 0), *attn_kernel += k->attn_fwd_s;
    *recompute += s;
    return s;
  }
  case LC_OP_LAYER_BWD: {
    const double rec = k->tiled ? mlp_gemms(k, 0, 0) + drop_ew(k, 0, GATE_UP) : 0; // tiled MLP recomputes gate/up per tile
    *recompute += rec;
    *attn_kernel += k->attn_bwd_s;
    // bf16 with HQ <= C: ln1 recomputed after the attention call (its storage held the dout area)
    const double ln1 = k->bf16 && (double)c->n_heads * c->head_dim <= C ? ew(k, 4.0 * T * C) : 0;
    return attn_gemms(k, 1) + mlp_gemms(k, 1, 1) + rec + attention(k, 1) + ew(k, 2 * ewf) + ln1 + drop_ew(k, 1, LC_LORA_ALL);
  }
  case LC_OP_LOSS:
  case LC_OP_LOSS_SLICED: { // head forward + both backward products + softmax passes; slices: the logits twice
    const double f = lin(k, 0, T, c->dim, c->vocab);
    const double soft = lc_rates_loss_s(k->r, 12.0 * T * V);
    k->loss_ew_s += soft;
    // (LoRA: the frozen head's backward is dx alone)
    const double s = gemms(k, f * (op == LC_OP_LOSS_SLICED ? 2 : 1) + lin(k, !k->lora, T, c->dim, c->vocab)) + soft;
    return op == LC_OP_LOSS_SLICED ? sliced(k, s, k->sl_comm[1]) : s;
  }
  default: return 0;
  }
}

int *lc_time_bounds(long S, int doc_len, int attn_window) {
  if (doc_len <= 0 && attn_window <= 0) return NULL;
  int *lo = malloc(sizeof(int) * (size_t)S);
  for (long g = 0; lo && g < S; g++) lo[g] = lc_visible_from(g, doc_len > 0 ? g / doc_len * doc_len : 0, attn_window);
  return lo;
}

static int spans(int g, int stride, int dpn) { return dpn > 0 && g > 1 && (long)(g - 1) * stride + 1 > dpn; }

lc_status lc_time_predict(const lc_config *cfg, const lc_model_opts *o, const lc_time_layout *l, const lc_rates *r,
                          lc_time_estimate *out) {
  memset(out, 0, sizeof *out);
  const int hp = l->hp > 0 ? l->hp : 1, cp = l->cp > 0 ? l->cp : 1, window = l->window > 0 ? l->window : cp;
  const int world = l->world > 0 ? l->world : hp * cp, batch = l->batch > 0 ? l->batch : world / (hp * cp);
  LC_TRY(lc_layout_validate(world, hp, cp, window, cfg->n_heads, cfg->n_kv_heads, l->seq, batch));
  const int dp = world / (hp * cp), dpn = r->devices_per_node;
  const int Z = o->zero > 0 ? (o->zero_group > 0 ? o->zero_group : world) : 1, R = world / Z, stage = o->zero;
  LC_TRY(lc_zero_check(stage, o->zero > 0 ? o->zero_group : 0, 0, world));
  const long S = l->seq, T = S / ((long)hp * cp);
  cost k = {.c = cfg, .o = o, .r = r, .bf16 = o->precision == LC_DT_BF16, .T = (int)T, .hp = hp, .cp = cp,
            .hc_stages = 1, .tiled = lc_tile_splits(o->mlp_tile, (int)T), .lora = cfg->lora.rank > 0};
  const int D = cfg->head_dim, Hl = cfg->n_heads / hp;
  const double esz = k.bf16 ? 2 : 4;
  if (hp > 1 && l->head_chunk > 0) k.hc_stages = Hl / l->head_chunk;

  // Attention work: the tiles each context rank's kernel computes (the chunk cost model of
  // the layout, over the documents and window), for its Hq/hp heads; the slowest rank counts.
  int *lo = NULL;
  if (!l->lo && (l->doc_len > 0 || l->attn_window > 0)) {
    lo = lc_time_bounds(S, l->doc_len, l->attn_window);
    if (!lo) return lc_fail(LC_ENOMEM, "out of memory for the attention bounds of %ld tokens", S);
  }
  double work_max = 0;
  lc_seq_layout L;
  const int chunks = cp > 1 ? lc_cp_layout_chunks(o->cp_layout, S, cp, hp) : 2;
  if (S % (2L * cp) == 0 && lc_seq_layout_init(&L, S, cp, hp, chunks) == LC_OK) {
    const int *bounds = l->lo ? l->lo : lo;
    if (o->cp_layout == LC_CP_BALANCED && cp > 1) lc_seq_layout_balance(&L, bounds);
    double *w = malloc(sizeof(double) * (size_t)cp);
    if (w) {
      lc_seq_layout_work(&L, bounds, w);
      for (int c = 0; c < cp; c++) work_max = w[c] > work_max ? w[c] : work_max;
    }
    free(w);
    lc_seq_layout_free(&L);
    if (!w) {
      free(lo);
      return lc_fail(LC_ENOMEM, "out of memory for the attention work of %d context ranks", cp);
    }
  } else { // one process, odd length: the pairs the kernel sees (tiles of a causal sequence ~ pairs)
    const int *bounds = l->lo ? l->lo : lo;
    for (long g = 0; g < S; g++) work_max += (double)(g - (bounds ? bounds[g] : 0) + 1);
  }
  free(lo);
  const double attn_flops = 4.0 * D * work_max * Hl;
  // The keys one kernel call streams (the rates' length factors): the context rank's block
  // (the whole sequence on one rank), at most a document or a window.
  double keys = (double)S / cp;
  if (l->doc_len > 0 && l->doc_len < keys) keys = l->doc_len;
  if (l->attn_window > 0 && l->attn_window < keys) keys = l->attn_window;
  k.attn_fwd_s = lc_rates_flash_s(r, k.bf16, 0, D, keys, attn_flops);
  k.attn_bwd_s = lc_rates_flash_s(r, k.bf16, 1, D, keys, 2.5 * attn_flops);

  // Exchanges per layer. Ulysses: q, k, v and out (backward: dout; dq, dk, dv in fp32) with
  // kv heads replicated to every rank when hp > Hkv. Ring: cp - 1 hops of this rank's k/v
  // block (backward: k/v and dk/dv in fp32).
  const int hfirst = !l->context_first;
  const int inter_head = spans(hp, hfirst ? 1 : cp, dpn), inter_ctx = spans(cp, hfirst ? hp : 1, dpn);
  if (hp > 1) { // calls: forward q, k, v in and out back; backward dout (+ q, k, v, out chunked) in, dq, dk, dv back
    const double q = (double)T * cfg->n_heads * D, kv = (double)T * (cfg->n_kv_heads > hp ? cfg->n_kv_heads : hp) * D;
    const int N = k.hc_stages, chunked = N > 1;
    const double lat = (hp - 1) * (inter_head && r->inter.bw > 0 ? r->inter.lat_s : r->coll[LC_COLL_ALLTOALL].lat_s);
#define A2A(bytes, calls) (lc_rates_coll_s(r, LC_COLL_ALLTOALL, hp, (bytes), inter_head) + ((calls) * N - 1) * lat)
    k.in_s[0] = A2A((q + 2 * kv) * esz, 3);
    k.back_s[0] = A2A(q * esz, 1);
    k.in_s[1] = A2A(q * esz + chunked * (2 * q + 2 * kv) * esz, chunked ? 5 : 1);
    k.back_s[1] = A2A((q + 2 * kv) * 4, 3);
#undef A2A
  }
  if (cp > 1) { // k/v blocks of S/cp tokens of this rank's kv heads (in the message precision), dk/dv in fp32
    const int hkv = cfg->n_kv_heads > hp ? cfg->n_kv_heads / hp : 1;
    const double blk = (double)(S / cp) * hkv * D * 2;
    k.hop_s[0] = lc_rates_coll_s(r, LC_COLL_P2P, 2, blk * esz, inter_ctx);
    k.tail_s = lc_rates_coll_s(r, LC_COLL_P2P, 2, blk * 4, inter_ctx);
    k.hop_s[1] = k.hop_s[0] + k.tail_s;
  }

  // Model states: unit sizes and the groups their collectives run in. LoRA: the frozen
  // base (its stage: 3 or 0) is gathered and rounded as any, the adapters (za) are also
  // reduced and updated; without LoRA za is the model's own.
  lc_ps_sizes zs, za;
  const lc_config acfg = lc_config_adapters(cfg);
  LC_TRY(lc_pstore_sizes(cfg, k.lora ? lc_lora_base_stage(stage) : stage, Z, &zs));
  if (k.lora) LC_TRY(lc_pstore_sizes(&acfg, stage, Z, &za));
  else za = zs;
  const int inter_z = spans(Z, 1, dpn), inter_r = spans(R, Z, dpn), inter_w = spans(world, 1, dpn);
  const double gsz = k.bf16 ? 0.5 : 1.0; // stage 3 gathers bf16 weights in bf16
  if (lc_vocab_sliced(o, cfg->vocab) && Z > 1 && stage >= 2) { // (LoRA: gathers, no reductions)
    // Rows of the embedding (E) and of the head (F; tied: E again): stage 3 gathers them
    // (forward lookup once, the loss's two passes), stages 2-3 reduce their gradients.
    const double e = (double)zs.unit_embed, f = cfg->tie_embeddings ? e : (double)zs.unit_final;
    const double ag_e = stage == 3 ? lc_rates_coll_s(r, LC_COLL_ALLGATHER, Z, e * gsz, inter_z) : 0;
    const double ag_f = stage == 3 ? lc_rates_coll_s(r, LC_COLL_ALLGATHER, Z, f * gsz, inter_z) : 0;
    k.sl_comm[0] = ag_e;
    k.sl_comm[1] = 2 * ag_f + (k.lora ? 0 : lc_rates_coll_s(r, LC_COLL_REDUCE_SCATTER, Z, f, inter_z));
    k.sl_comm[2] = k.lora ? 0 : lc_rates_coll_s(r, LC_COLL_REDUCE_SCATTER, Z, e, inter_z);
  }
  const int NU = cfg->n_layers + 2;
  double *ready = calloc((size_t)NU, sizeof(double)), *done = calloc((size_t)NU + 2, sizeof(double));
  const int n = lc_schedule_build(cfg, o, 1, NULL, 0);
  lc_event *ev = malloc(sizeof *ev * (size_t)n);
  if (!ready || !done || !ev) {
    free(ready), free(done), free(ev);
    return lc_fail(LC_ENOMEM, "out of memory for the time model");
  }
  lc_schedule_build(cfg, o, 1, ev, n);
  const int passes = batch / dp;
  // --offload-checkpoints: one disk channel (the store's I/O thread, a FIFO) moves each
  // layer's checkpoint out at its put and back ahead of its backward (read at the layer
  // above's get); a layer put when `depth` are resident waits for the oldest one's write,
  // a layer got waits for its read. The last `depth` layers never leave RAM. (Disk rate
  // unknown: not priced.)
  const int NL = cfg->n_layers, depth = lc_offload_depth(o), offl_ck = depth > 0 && NL > depth && r->disk_bw > 0;
  double ck_io = 0, ck_w = 0, disk = 0, ck_wait = 0;
  double *clean = offl_ck ? calloc((size_t)NL, sizeof(double)) : NULL, *back = offl_ck ? calloc((size_t)NL, sizeof(double)) : NULL;
  if (offl_ck) {
    lc_model_opts ram = *o;
    ram.offload_dir = NULL;
    lc_mem_estimate me;
    const lc_status ms = lc_memplan_predict_hc(cfg, &ram, S, hp, cp, window, l->head_chunk, 1, &me);
    if (ms != LC_OK || !clean || !back) {
      free(ready), free(done), free(ev), free(clean), free(back);
      return ms != LC_OK ? ms : lc_fail(LC_ENOMEM, "out of memory for the time model");
    }
    ck_w = (double)me.peak[LC_MEM_CKPT] / NL / r->disk_bw; // one layer's checkpoint, either way
  }
  double t = 0, net = 0, comm = 0, compute = 0, recompute = 0, attn_kernel = 0, offl = 0;
  const int off = o->offload_optimizer;
  // A unit's weights as acquired (both stores' with LoRA) and its gradient (the adapters').
#define UNIT(u) ((double)lc_ps_unit_bytes(&zs, cfg->n_layers, (u)) + (k.lora ? (double)lc_ps_unit_bytes(&za, cfg->n_layers, (u)) : 0))
#define GUNIT(u) ((double)lc_ps_unit_bytes(&za, cfg->n_layers, (u)))
  // The bytes a stage-3 gather of unit u moves: gsz of the fp32 unit, a base in GGUF blocks
  // as it is held.
#define GATH(u) (zs.unit_q[(u)] ? (double)zs.unit_q[(u)] + (k.lora ? (double)lc_ps_unit_bytes(&za, cfg->n_layers, (u)) * gsz : 0) \
                                : UNIT(u) * gsz)
  for (int p = 0; p < passes; p++) {
    const int last = p == passes - 1, reduce = stage >= 2 || (last && world > 1);
    int nf = 0;
    for (int u = 0; u < NU; u++) ready[u] = -1;
    for (int i = 0; i < n; i++) {
      const lc_event *e = &ev[i];
      switch (e->kind) {
      case LC_EV_CKPT_PUT:
        if (offl_ck) disk = (t > disk ? t : disk) + ck_w, clean[e->layer] = disk, ck_io += ck_w;
        break;
      case LC_EV_CKPT_GET: {
        if (!offl_ck) break;
        const int lay = e->layer;
        if (lay < NL - depth && back[lay] > t) ck_wait += back[lay] - t, t = back[lay];
        if (lay - 1 >= 0 && lay - 1 < NL - depth) // the one below read ahead
          disk = (t > disk ? t : disk) + ck_w, back[lay - 1] = disk, ck_io += ck_w;
        break;
      }
      case LC_EV_PREFETCH:
      case LC_EV_ACQUIRE: {
        const int u = e->unit;
        if (stage == 3 && Z > 1) {
          if (e->kind == LC_EV_ACQUIRE && ready[u] < 0) { // not gathered ahead: now, blocking
            const double d = lc_rates_coll_s(r, LC_COLL_ALLGATHER, Z, GATH(u), inter_z);
            t = (t > net ? t : net) + d, net = t, comm += d;
          } else if (e->kind == LC_EV_ACQUIRE) {
            t = t > ready[u] ? t : ready[u];
          }
          const int g = e->kind == LC_EV_PREFETCH ? u : e->next;
          if (g >= 0) {
            const double d = lc_rates_coll_s(r, LC_COLL_ALLGATHER, Z, GATH(g), inter_z);
            net = (t > net ? t : net) + d, ready[g] = net, comm += d;
          }
          if (e->kind == LC_EV_ACQUIRE) ready[u] = -1;
        } else if (e->kind == LC_EV_ACQUIRE && k.bf16) {
          const double c = ew(&k, UNIT(u) * 2); // the rounded copy
          t += c, compute += c;
        }
        if (off && e->kind == LC_EV_ACQUIRE) { // the compute copy up (blocking)
          const double c = lc_rates_host_copy_s(r, (double)lc_ps_copy_bytes(&zs, cfg->n_layers, u, k.bf16 ? LC_DT_BF16 : LC_DT_F32));
          t += c, offl += c;
        }
        break;
      }
      case LC_EV_GRAD_BEGIN:
        for (; nf > 1; nf--) { // retire all but the newest reduction
          t = t > done[0] ? t : done[0];
          memmove(done, done + 1, sizeof(double) * (size_t)(nf - 1));
        }
        break;
      case LC_EV_GRAD_END: {
        if (off) { // the gradient down and added into the host's (every pass)
          const double c = lc_rates_host_copy_s(r, GUNIT(e->unit)) + lc_rates_host_optim_s(r, 3 * GUNIT(e->unit));
          t += c, offl += c;
        }
        if (!reduce) break;
        const double b = GUNIT(e->unit);
        if (b <= 0) break; // (LoRA: the frozen embedding and final units)
        double d = stage == 0 ? lc_rates_coll_s(r, LC_COLL_ALLREDUCE, world, b, inter_w)
                              : lc_rates_coll_s(r, LC_COLL_REDUCE_SCATTER, Z, b, inter_z) +
                                    (R > 1 ? lc_rates_coll_s(r, LC_COLL_ALLREDUCE, R, b / Z, inter_r) : 0);
        net = (t > net ? t : net) + d, done[nf++] = net, comm += d;
        break;
      }
      case LC_EV_RUN: {
        const int into = e->layer + 1; // forward: the checkpoint the layer's output fills, taken first
        if (offl_ck && e->op == LC_OP_LAYER_FWD && into < NL && into >= depth && clean[into - depth] > t)
          ck_wait += clean[into - depth] - t, t = clean[into - depth];
        const double s = op_seconds(&k, e->op, &recompute, &attn_kernel);
        if (e->op == LC_OP_LAYER_FWD && e->layer == 0 && p == 0) out->layer_fwd_s = s;
        if (e->op == LC_OP_LAYER_BWD && e->layer == 0 && p == 0) out->layer_bwd_s = s;
        t += s, compute += s;
        break;
      }
      default: break;
      }
    }
    for (int i = 0; i < nf; i++) t = t > done[i] ? t : done[i]; // the pass ends with its reductions
  }
#undef UNIT
#undef GUNIT
#undef GATH
  // After the passes: gradient norm and AdamW over this rank's shard (read p, g, m, v; write
  // p, m, v; the norm reads g), stages 1/2 all-gather the parameters, small all-reduces.
  const double nopt = (double)(za.optim - LC_PS_NORM_ACC_BYTES) / 8, ngrad = (double)za.grads / 4;
  const double opt = off ? lc_rates_host_optim_s(r, 28 * nopt + 8 * ngrad) : lc_rates_optim_s(r, 28 * nopt + 8 * ngrad);
  double after = 0;
  // (below stage 3 zs.params is the whole parameter set: the all-gather's output)
  if ((stage == 1 || stage == 2) && Z > 1) after += lc_rates_coll_s(r, LC_COLL_ALLGATHER, Z, (double)za.params, inter_z);
  if (world > 1) after += 3 * lc_rates_coll_s(r, LC_COLL_ALLREDUCE, world, 8, inter_w);
  // (compute holds the attention's exposed exchanges: they sit inside the layers' time)
  const double waited = t - compute - offl - ck_wait, pass_comm_wait = waited < 0 ? 0 : waited; // (rounding)
  out->passes = passes;
  out->recompute_s = recompute;
  out->attn_kernel_s = attn_kernel;
  out->gemm_s = k.gemm_s;
  out->elementwise_s = k.ew_s;
  out->loss_s = k.loss_ew_s;
  out->optim_s = opt;
  out->offload_s = offl;
  out->ckpt_io_s = ck_io;
  out->ckpt_wait_s = ck_wait;
  out->comm_s = comm + k.attn_comm_s + k.sl_comm_s + after;
  out->exposed_comm_s = pass_comm_wait + k.attn_exposed_s + k.sl_exposed_s + after;
  out->compute_s = compute - k.attn_exposed_s - k.sl_exposed_s;
  out->total_s = t + opt + after;
  out->tokens_per_s = (double)batch * S / out->total_s;
  free(ready), free(done), free(ev), free(clean), free(back);
  return LC_OK;
}
