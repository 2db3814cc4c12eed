// `longctx plan --auto` and `--longest` (DESIGN.md "Planning"): every valid layout of a
// world of ranks for a model and sequence length (hp x cp, placement, ZeRO stage and group,
// checkpoint policy, precision; tiles and head chunks as train picks them), those whose
// predicted peak (model/memplan.h) fits the memory per rank, ranked by predicted tokens per
// second (plan/timemodel.h; dp = world / (hp x cp) sequences per step, one per group).
// Ring windows (double ring) are not enumerated: the time model prices every hop alike, so
// they would tie with the plain ring.
#ifndef LC_LAYOUT_SEARCH_H
#define LC_LAYOUT_SEARCH_H

#include "model/config.h"
#include "model/model.h"
#include "plan/rates.h"
#include "plan/timemodel.h"

typedef struct {
  int world, per_node, threads; // ranks, ranks per node (0: all), OpenMP threads per rank
  size_t mem_cap;               // bytes per rank
  // --offload-optimizer: host bytes per node for the ranks' model states (0: no limit); a
  // layout whose host bytes per rank x ranks per node exceed it is dropped
  size_t host_cap;
  // Held fixed when >= 0 (the user gave them); -1: enumerated.
  int hp, cp, zero, zero_group, ckpt, bf16, context_first, mlp_tile, loss_tile;
  int doc_len, attn_window;     // the data (as plan's --pack/--doc-len, --attn-window)
} lc_search_opts;

typedef struct {
  int hp, cp, context_first, zero, zero_group, head_chunk;
  lc_model_opts o; // policy, tiles, precision, ZeRO as train would run them
  long seq;
  size_t peak;     // predicted arena peak per rank (with --offload-optimizer: the device's)
  size_t host;     // --offload-optimizer: host bytes per rank (lc_mem_estimate.host_bytes); 0 otherwise
  lc_time_estimate t;
} lc_layout_choice;

// The fitting layouts at S, fastest first, at most cap of them in out; *n_valid layouts were
// valid, *n_fit fit. base: the options not enumerated (vocabulary slices, offload, cp layout).
// host_over (may be NULL): how many fit the device but not so->host_cap, and in
// host_over[1] the smallest host bytes per node among them (0: none).
int lc_layout_search(const lc_config *cfg, const lc_model_opts *base, long S, const lc_search_opts *so,
                     const lc_rates *r, lc_layout_choice *out, int cap, int *n_valid, int *n_fit, size_t host_over[2]);
// The longest S any layout fits (0: none), and in *best the fastest layout reaching it;
// host_over as lc_layout_search's (layouts dropped for the host's memory alone).
long lc_layout_longest(const lc_config *cfg, const lc_model_opts *base, const lc_search_opts *so, const lc_rates *r,
                       lc_layout_choice *best, size_t host_over[2]);
// Ranks of a world of `world` sharing one node's host memory (per_node 0: all of them).
int lc_layout_ranks_per_node(int world, int per_node);

#endif
