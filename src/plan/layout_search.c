#include "plan/layout_search.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "model/memplan.h"
#include "model/pstore.h"

// One candidate without S: everything the enumeration varies.
typedef struct {
  int hp, cp, cf, zero, Z, ckpt, bf16;
} cand;

static int valid_heads(const lc_config *c, int hp) {
  return c->n_heads % hp == 0 && (hp % c->n_kv_heads == 0 || c->n_kv_heads % hp == 0);
}

// Every candidate the options allow (S-independent rules), into v (cap entries); the count.
static int enumerate(const lc_config *cfg, const lc_search_opts *so, cand *v, int cap) {
  int n = 0;
  const int W = so->world;
  for (int hp = 1; hp <= W; hp++) {
    if (W % hp || !valid_heads(cfg, hp) || (so->hp >= 0 && hp != so->hp)) continue;
    for (int cp = 1; cp <= W / hp; cp++) {
      if ((W / hp) % cp || (so->cp >= 0 && cp != so->cp)) continue;
      for (int cf = 0; cf < 2; cf++) {
        if (cf && (hp == 1 || cp == 1)) continue; // placement matters only with both
        if (so->context_first >= 0 && cf != so->context_first && hp > 1 && cp > 1) continue;
        for (int zero = 0; zero <= 3; zero++) {
          if (so->zero >= 0 && zero != so->zero) continue;
          // ZeRO groups: the whole world, or one node (hybrid) when that is smaller; or the one given.
          int groups[2] = {W, so->per_node > 0 && so->per_node < W && W % so->per_node == 0 ? so->per_node : 0};
          if (so->zero_group > 0) groups[0] = so->zero_group, groups[1] = 0;
          for (int gi = 0; gi < 2; gi++) {
            int Z = zero == 0 ? 1 : groups[gi];
            if (Z == 0 || (zero == 0 && gi)) continue;
            if (zero > 0 && W == 1) continue;
            for (int ck = 0; ck < 3; ck++) {
              if (so->ckpt >= 0 && ck != so->ckpt) continue;
              for (int b = 0; b < 2; b++) {
                if (so->bf16 >= 0 && b != so->bf16) continue;
                if (n < cap) v[n] = (cand){hp, cp, cf, zero, Z, ck, b};
                n++;
              }
            }
          }
        }
      }
    }
  }
  return n;
}

static void options(const lc_model_opts *base, const cand *c, long S, const lc_config *cfg, const lc_search_opts *so,
                    lc_model_opts *o) {
  *o = *base;
  o->ckpt = (lc_ckpt_policy)c->ckpt;
  o->precision = c->bf16 ? LC_DT_BF16 : LC_DT_F32;
  o->zero = c->zero;
  o->zero_group = c->zero ? c->Z : 0;
  o->mlp_tile = so->mlp_tile >= 0 ? so->mlp_tile : lc_memplan_auto_mlp_tile(S);
  o->loss_tile = so->loss_tile >= 0 ? so->loss_tile
                                    : lc_memplan_auto_loss_tile_for(cfg, S, lc_vocab_sliced(base, cfg->vocab) ? base->vocab_slice : cfg->vocab);
}

int lc_layout_ranks_per_node(int world, int per_node) { return per_node > 0 && per_node < world ? per_node : world; }

// Counts a layout dropped for the host's memory: how many, and the least host bytes per node.
static void host_dropped(size_t host_over[2], size_t per_node_bytes) {
  if (!host_over) return;
  if (!host_over[0]++ || per_node_bytes < host_over[1]) host_over[1] = per_node_bytes;
}

// Memory and time of candidate c at S; 0 when it does not fit or is invalid at S (-1: it
// fits the device but its model states exceed the host's memory, so->host_cap).
static int evaluate(const lc_config *cfg, const lc_model_opts *base, long S, const cand *c, const lc_search_opts *so,
                    const lc_rates *r, const int *lo, lc_layout_choice *x) {
  memset(x, 0, sizeof *x);
  options(base, c, S, cfg, so, &x->o);
  const int hc = c->hp > 1 ? lc_memplan_auto_head_chunk(cfg, &x->o, S, c->hp, c->cp, c->cp, so->threads, so->mem_cap) : 0;
  lc_mem_estimate e;
  if (lc_memplan_predict_hc(cfg, &x->o, S, c->hp, c->cp, c->cp, hc, so->threads, &e) != LC_OK) return 0;
  if (e.total > so->mem_cap) return 0;
  if (e.offload && so->host_cap && e.host_bytes * (size_t)lc_layout_ranks_per_node(so->world, so->per_node) > so->host_cap) {
    x->host = e.host_bytes;
    return -1;
  }
  const int dp = so->world / (c->hp * c->cp);
  lc_time_layout l = {.seq = S, .batch = dp, .world = so->world, .hp = c->hp, .cp = c->cp, .window = c->cp,
                      .head_chunk = hc, .context_first = c->cf, .doc_len = so->doc_len, .attn_window = so->attn_window,
                      .lo = lo};
  if (lc_time_predict(cfg, &x->o, &l, r, &x->t) != LC_OK) return 0;
  x->hp = c->hp, x->cp = c->cp, x->context_first = c->cf, x->zero = c->zero, x->zero_group = c->zero ? c->Z : 0;
  x->head_chunk = hc, x->seq = S, x->peak = e.total, x->host = e.offload ? e.host_bytes : 0;
  return 1;
}

// The documents' and window's bounds (NULL: plain causal; out of memory: the time model
// builds them itself and reports it).
static int *bounds(const lc_search_opts *so, long S) { return lc_time_bounds(S, so->doc_len, so->attn_window); }

static int faster(const void *a, const void *b) {
  const lc_layout_choice *x = a, *y = b;
  return x->t.tokens_per_s > y->t.tokens_per_s ? -1 : x->t.tokens_per_s < y->t.tokens_per_s ? 1 : 0;
}

int lc_layout_search(const lc_config *cfg, const lc_model_opts *base, long S, const lc_search_opts *so,
                     const lc_rates *r, lc_layout_choice *out, int cap, int *n_valid, int *n_fit, size_t host_over[2]) {
  const int n = enumerate(cfg, so, NULL, 0);
  cand *v = malloc(sizeof *v * (size_t)(n ? n : 1));
  lc_layout_choice *all = malloc(sizeof *all * (size_t)(n ? n : 1));
  *n_valid = *n_fit = 0;
  if (host_over) host_over[0] = host_over[1] = 0;
  if (!v || !all) {
    free(v), free(all);
    return 0;
  }
  enumerate(cfg, so, v, n);
  int *lo = bounds(so, S); // the documents' and window's bounds, once for every candidate
  int fit = 0;
  for (int i = 0; i < n; i++) {
    if (lc_layout_validate(so->world, v[i].hp, v[i].cp, v[i].cp, cfg->n_heads, cfg->n_kv_heads, S, so->world / (v[i].hp * v[i].cp)) != LC_OK) continue;
    ++*n_valid;
    const int ev = evaluate(cfg, base, S, &v[i], so, r, lo, &all[fit]);
    if (ev > 0) fit++;
    else if (ev < 0) host_dropped(host_over, all[fit].host * (size_t)lc_layout_ranks_per_node(so->world, so->per_node));
  }
  free(lo);
  qsort(all, (size_t)fit, sizeof *all, faster);
  *n_fit = fit;
  const int k = fit < cap ? fit : cap;
  memcpy(out, all, sizeof *all * (size_t)k);
  free(v), free(all);
  return k;
}

long lc_layout_longest(const lc_config *cfg, const lc_model_opts *base, const lc_search_opts *so, const lc_rates *r,
                       lc_layout_choice *best, size_t host_over[2]) {
  const int n = enumerate(cfg, so, NULL, 0);
  cand *v = malloc(sizeof *v * (size_t)(n ? n : 1));
  long S = 0;
  memset(best, 0, sizeof *best);
  if (host_over) host_over[0] = host_over[1] = 0;
  if (!v) return 0;
  enumerate(cfg, so, v, n);
  for (int i = 0; i < n; i++) {
    // the longest S of this candidate, with the tiles train picks for long sequences
    lc_model_opts o;
    options(base, &v[i], LONG_MAX, cfg, so, &o);
    int hc = 0;
    const long s = lc_memplan_max_seq_hc(cfg, &o, v[i].hp, v[i].cp, v[i].cp, v[i].hp > 1 ? -1 : 0, so->threads,
                                         so->mem_cap, &hc);
    if (s <= 0 || s < S) continue;
    lc_layout_choice x;
    int *lo = bounds(so, s);
    const int fits = evaluate(cfg, base, s, &v[i], so, r, lo, &x);
    free(lo);
    if (fits < 0) host_dropped(host_over, x.host * (size_t)lc_layout_ranks_per_node(so->world, so->per_node));
    if (fits <= 0) continue;
    if (s > S || x.t.tokens_per_s > best->t.tokens_per_s) S = s, *best = x;
  }
  free(v);
  return S;
}
