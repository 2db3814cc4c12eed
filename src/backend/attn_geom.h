// The geometry of one attention kernel call, as the backend interface takes it: which rows
// of q meet which rows of k/v, heads, head dim, causality and scale. What the buffers hold
// (fp32 or 2-byte bf16, a per-query key bound, k/v packed ahead) travels with the buffers;
// each backend turns this into what its kernels take (backend/cpu/flash/flash.h's
// lc_attn_shape, backend/cuda's lcc_attn).
#ifndef LC_ATTN_GEOM_H
#define LC_ATTN_GEOM_H

// The tiles attention work is counted in (the sequence layouts' cost model, attn/seqlayout.c,
// and the CPU kernel's own blocks): LC_ATTN_TILE_Q query rows against LC_ATTN_TILE_K key
// rows; a tile no query of a block may see is skipped.
#define LC_ATTN_TILE_Q 64
#define LC_ATTN_TILE_K 64

typedef struct {
  int Tq, Tk;            // rows of q and of k/v
  int Hq, Hkv, D;        // query heads, kv heads (q head h uses kv head h / (Hq / Hkv)), head dim
  long q_start, k_start; // global positions of q row 0 and k row 0 (causal: a key after the query is hidden)
  int causal;            // 0: every key visible
  float scale;           // softmax scale, usually 1/sqrt(D)
  // 1: a --precision bf16 pass: q, k, v hold bf16 values, and kernels with bf16 products
  // round the probabilities and score gradients to bf16 before multiplying (softmax, LSE and
  // every sum stay fp32). 0: fp32 products throughout.
  int bf16;
} lc_attn_geom;

#endif
