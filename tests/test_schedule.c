// The pass schedule (model/schedule.h) is the one description of a pass's order:
//  1. a real pass (model_pass) makes exactly the schedule's store calls in its order: the
//     parameter store records every acquire/prefetch/release/grad_begin/grad_end, for
//     untied/tied heads, vocabulary slices, every checkpoint policy, with and without
//     gradients;
//  2. the memory model's ZeRO transients, now a walk over the schedule with the store's
//     rules, equal the hand-written mirror of the pass they replaced (kept below as the
//     reference) for every stage, group, precision, policy, tie and slice, on random
//     model shapes.
#include <string.h>

#include "attn/attn.h"
#include "model/memplan.h"
#include "model/model.h"
#include "model/params.h"
#include "model/pstore.h"
#include "model/schedule.h"
#include "testutil.h"

// ---- 2's reference: the per-phase maxima as written by hand before the schedule existed.
static void occur(size_t *G, size_t *R, size_t *GR, int p, size_t g, size_t r) {
  if (g > G[p]) G[p] = g;
  if (r > R[p]) R[p] = r;
  if (g + r > GR[p]) GR[p] = g + r;
}

// (The sliced embedding and loss phases are the same helper in both, so only the unsliced
// walk and the backward after a sliced loss are compared for slices.)
static void ref_transients(const lc_config *cfg, const lc_model_opts *o, int stage, int Z, size_t *G, size_t *R,
                           size_t *GR) {
  for (int p = 0; p < LC_PHASE_N; p++) G[p] = R[p] = GR[p] = 0;
  lc_ps_sizes z;
  const int bf16 = o->precision == LC_DT_BF16;
  if ((stage < 2 && !bf16) || lc_pstore_sizes(cfg, stage, Z, &z) != LC_OK) return;
  const int L = cfg->n_layers, g3 = stage >= 3, r2 = stage >= 2;
  const int cw = bf16 && !g3, sliced = lc_vocab_sliced(o, cfg->vocab);
  const size_t e = z.unit_embed, l = z.unit_layer, f = z.unit_final;
  // A unit's weights in a bf16 pass: its 2-byte compute copy (gradients stay fp32).
  const size_t ew = bf16 ? z.unit_embed16 : e, lw = bf16 ? z.unit_layer16 : l, fw = bf16 ? z.unit_final16 : f;
  const size_t te = cfg->tie_embeddings && !sliced ? e : 0, tew = te ? ew : 0;
  if (!sliced) occur(G, R, GR, LC_PHASE_EMBED_FWD, g3 ? ew + lw : cw ? ew : 0, 0);
  for (int k = 0; k < L; k++) {
    size_t g = g3 ? lw + (k + 1 < L ? lw : sliced ? 0 : fw) : cw ? lw : 0;
    occur(G, R, GR, LC_PHASE_ATTN_FWD, g, 0);
    occur(G, R, GR, LC_PHASE_MLP_FWD, g, 0);
  }
  if (!sliced) occur(G, R, GR, LC_PHASE_LOSS, g3 ? fw + tew + lw : cw ? fw + tew : 0, r2 ? f + te : 0);
  const size_t last = sliced ? lc_pstore_rows_grad_bytes(stage, (size_t)cfg->dim) : f;
  for (int k = L - 1; k >= 0; k--) {
    size_t g = g3 ? lw + (k > 0 ? lw : 0) : cw ? lw : 0, r = r2 ? l + (k == L - 1 ? last : l) + te : 0;
    occur(G, R, GR, LC_PHASE_MLP_BWD, g, r);
    occur(G, R, GR, LC_PHASE_ATTN_BWD, g, r);
    if (o->ckpt == LC_CKPT_FULL) occur(G, R, GR, LC_PHASE_ATTN_FWD, g, r);
  }
  if (!sliced) occur(G, R, GR, LC_PHASE_EMBED_BWD, 0, r2 ? l + e : 0);
}

static void test_transients(void) {
  lc_rng r;
  lc_rng_seed(&r, 7);
  int cases = 0;
  for (int it = 0; it < 60; it++) {
    lc_config cfg;
    lc_config_preset(&cfg, "tiny");
    cfg.n_layers = 1 + (int)lc_rng_below(&r, 5);
    cfg.dim = 32 * (1 + (int)lc_rng_below(&r, 4));
    cfg.ffn = cfg.dim * 3 + 16 * (int)lc_rng_below(&r, 3);
    cfg.vocab = 64 + (int)lc_rng_below(&r, 300);
    cfg.tie_embeddings = (int)lc_rng_below(&r, 2);
    cfg.head_dim = cfg.dim / cfg.n_heads;
    CHECK(lc_config_validate(&cfg) == LC_OK, "config: %s", lc_errmsg());
    for (int stage = 0; stage <= 3; stage++)
      for (int Z = 1; Z <= 8; Z *= 2)
        for (int prec = 0; prec < 2; prec++)
          for (int pol = 0; pol < 3; pol++)
            for (int sl = 0; sl < 2; sl++) {
              if (stage == 0 && Z > 1) continue;
              lc_model_opts o = {(lc_ckpt_policy)pol, 0, 0, stage, Z, 0, prec ? LC_DT_BF16 : LC_DT_F32, NULL,
                                 sl ? 1 + (int)(lc_rng_below(&r, (uint32_t)(cfg.vocab - 1))) : 0, 0, 0};
              size_t G[LC_PHASE_N], R[LC_PHASE_N], GR[LC_PHASE_N], g[LC_PHASE_N], rr[LC_PHASE_N], gr[LC_PHASE_N];
              CHECK(lc_memplan_zero_transients(&cfg, &o, stage, Z, G, R, GR, LC_PHASE_N) == LC_OK, "walk: %s", lc_errmsg());
              ref_transients(&cfg, &o, stage, Z, g, rr, gr);
              for (int p = 0; p < LC_PHASE_N; p++) {
                // sliced: the embedding and loss phases come from the shared slice helper
                if (lc_vocab_sliced(&o, cfg.vocab) &&
                    (p == LC_PHASE_EMBED_FWD || p == LC_PHASE_LOSS || p == LC_PHASE_EMBED_BWD))
                  continue;
                CHECK(G[p] == g[p] && R[p] == rr[p] && GR[p] == gr[p],
                      "transients L %d tied %d stage %d Z %d %s %s slice %d phase %s: gathered %zu/%zu grads %zu/%zu "
                      "both %zu/%zu (schedule/reference)", cfg.n_layers, cfg.tie_embeddings, stage, Z,
                      prec ? "bf16" : "fp32", lc_ckpt_name(o.ckpt), o.vocab_slice, lc_mem_phase_name((lc_mem_phase)p),
                      G[p], g[p], R[p], rr[p], GR[p], gr[p]);
              }
              cases++;
            }
  }
  printf("transients: %d cases equal the hand-written reference\n", cases);
}

// ---- 1: the store calls of a real pass against the schedule.
static char kind_code(lc_ev_kind k) {
  switch (k) {
  case LC_EV_ACQUIRE: return 'A';
  case LC_EV_PREFETCH: return 'P';
  case LC_EV_RELEASE: return 'R';
  case LC_EV_GRAD_BEGIN: return 'B';
  case LC_EV_GRAD_END: return 'E';
  default: return 0;
  }
}

static void test_trace(int tied, int slice, lc_ckpt_policy pol, int grads, lc_dtype prec) {
  lc_arena arena;
  lc_arena_init(&arena, 0);
  lc_config cfg;
  lc_config_preset(&cfg, "tiny");
  cfg.n_layers = 3;
  cfg.tie_embeddings = tied;
  lc_model m;
  CHECK(lc_model_create(&m, &cfg, &arena) == LC_OK, "create: %s", lc_errmsg());
  lc_model_init_random(&m, 3);
  lc_pstore_set_compute(&m.ps, prec);
  const int T = 24;
  int tok[24], tgt[24], pos[24];
  for (int t = 0; t < T; t++) tok[t] = (t * 37 + 5) % cfg.vocab, tgt[t] = (t * 11 + 3) % cfg.vocab, pos[t] = t;
  lc_model_opts o = {pol, 8, 8, 0, 0, 0, prec, NULL, slice, 0, 0};
  lc_attn attn;
  lc_attn_local_init(&attn, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim);
  lc_ps_trace tr = {0};
  tr.cap = 256;
  tr.ev = calloc((size_t)tr.cap, sizeof *tr.ev);
  m.ps.trace = &tr;
  double loss = 0;
  lc_status st = lc_model_fwd_bwd(&m, &o, &attn, NULL, tok, tgt, pos, T, 1.0f / T, grads, &loss);
  m.ps.trace = NULL;
  CHECK(st == LC_OK, "pass: %s", lc_errmsg());
  const int n = lc_schedule_build(&cfg, &o, grads, NULL, 0);
  lc_event *ev = calloc((size_t)n, sizeof *ev);
  CHECK(lc_schedule_build(&cfg, &o, grads, ev, n) == n, "schedule size");
  int j = 0, bad = 0;
  for (int i = 0; i < n && !bad; i++) {
    const char k = kind_code(ev[i].kind);
    if (!k) continue;
    const int nx = ev[i].kind == LC_EV_ACQUIRE ? ev[i].next : -1;
    if (j >= tr.n || tr.ev[j].kind != k || tr.ev[j].unit != ev[i].unit || tr.ev[j].next != nx) {
      CHECK(0, "tied %d slice %d %s grads %d %s: store call %d is %c(%d, %d), the schedule's event %d is %s(%d, %d)",
            tied, slice, lc_ckpt_name(pol), grads, lc_dtype_name(prec), j, j < tr.n ? tr.ev[j].kind : '-',
            j < tr.n ? tr.ev[j].unit : 0, j < tr.n ? tr.ev[j].next : 0, i, lc_ev_kind_name(ev[i].kind), ev[i].unit, nx);
      bad = 1;
    }
    j++;
  }
  if (!bad) CHECK(j == tr.n, "tied %d slice %d: the pass made %d store calls, the schedule has %d", tied, slice, tr.n, j);
  free(ev);
  free(tr.ev);
  lc_model_destroy(&m);
  lc_arena_trim(&arena);
}

int main(void) {
  int n = 0;
  for (int tied = 0; tied < 2; tied++)
    for (int sl = 0; sl < 2; sl++)
      for (int pol = 0; pol < 3; pol++)
        for (int g = 0; g < 2; g++)
          for (int p = 0; p < 2; p++, n++)
            test_trace(tied, sl ? 100 : 0, (lc_ckpt_policy)pol, g, p ? LC_DT_BF16 : LC_DT_F32);
  printf("trace: %d passes made exactly their schedule's store calls\n", n);
  test_transients();
  return lc_test_finish("test_schedule");
}
