// The one attention interface the model calls. Every parallel strategy (local,
// Ulysses, ring, 2D, double ring) implements it. The model hands over this rank's
// tokens' q/k/v (RoPE already applied with global positions) and gets this rank's
// output rows back; how heads and keys are exchanged is the strategy's business.
#ifndef LC_ATTN_H
#define LC_ATTN_H

#include <stddef.h>

#include "backend/buf.h"
#include "core/memparts.h"
#include "core/status.h"
#include "attn/seqlayout.h"

// One call's inputs, read-only to the strategy: built once per pass by whoever runs it
// (the model from the trainer's, generate's or eval's sequence; the tests) and handed to
// every fwd/bwd call of that pass.
typedef struct {
  // The sequence being processed: its layout over the context ranks (NULL: the strategy's
  // default, zigzag) and lo[S], the first key position each token may see (documents,
  // sliding window; NULL: plain causal).
  const lc_seq_layout *layout;
  const int *lo;
  // lo's length (the sequence's S; 0: the pass's T, one process), and the same bounds as
  // the backend's buffer where its memory is not the host's (staged by the model for a
  // pass; empty: lo is read in place).
  long lo_len;
  lc_buf lo_buf;
  // bf16 precision: q, k, v, out (and in backward dout) are 2-byte bf16 arrays, read in
  // place by the kernels, and messages carry them as bf16; the forward's output is rounded
  // to nearest even once, where it is made, and is what every layout keeps and returns; so
  // every strategy's backward reads the same output.
  int bf16;
  // Progresses other communication in flight (ZeRO), polled where the strategy polls its
  // own transfers (may be NULL).
  void (*poll)(void *arg);
  void *poll_arg;
} lc_attn_in;

typedef struct lc_attn lc_attn;
struct lc_attn {
  const char *name;
  int Hq, Hkv, D; // model's head counts and head dim
  // Bytes the strategy keeps per layer between forward and backward for T local tokens
  // (e.g. the log-sum-exp) in a pass of that precision. The model stores them as
  // checkpoint memory.
  size_t (*saved_bytes)(const lc_attn *a, int T, int bf16);
  // q[T,Hq,D], k/v[T,Hkv,D] -> out[T,Hq,D]; fills `saved` (U8, saved_bytes). q, k, v, out
  // (and dout below): BF16 buffers in a bf16 pass (in->bf16), else F32; every buffer is
  // the backend's (be below).
  lc_status (*fwd)(lc_attn *a, const lc_attn_in *in, lc_buf out, lc_buf saved, lc_buf q, lc_buf k, lc_buf v, int T);
  // dq/dk/dv OVERWRITTEN, F32 (same shapes as q/k/v); `out` and `saved` from the forward.
  lc_status (*bwd)(lc_attn *a, const lc_attn_in *in, lc_buf dq, lc_buf dk, lc_buf dv, lc_buf dout, lc_buf out,
                   lc_buf saved, lc_buf q, lc_buf k, lc_buf v, int T);
  // 1: bwd reads the token-layout q, k, v before it writes any of dk, dv, so dk and dv may
  // lie in their storage (lc_attn_2d_dkv_late); 0: they may not.
  int dkv_late;
  void *ctx;
  // The backend that holds the buffers and runs the kernels, set by the layer for each call
  // (model/layer.c, its only writer). Every strategy runs its kernels and copies through it.
  struct lc_backend *be;
};

// Single process: causal attention over the T local tokens, which are the whole
// sequence in order.
void lc_attn_local_init(lc_attn *a, int Hq, int Hkv, int D);

// Decoding (model/generate.c): before each layer's forward the caller points k/v at that
// layer's cache ([max_len, Hkv, D]) and p0 at the first new position; the forward appends
// the new tokens' keys/values there and attends to the rows [0, p0 + T), from lo[i] on
// for new token i when the caller's inputs carry lo_buf (I32 [T]). No backward.
typedef struct {
  lc_buf k, v; // the layer's cache rows [max_len, Hkv, D], F32 (lc_kv_cache_k/v)
  int p0, max_len;
} lc_attn_decode_state;
void lc_attn_decode_init(lc_attn *a, int Hq, int Hkv, int D, lc_attn_decode_state *d);

// Arena bytes of a strategy, for the memory model (src/model/memplan.c). Everything a
// forward (or backward) call allocates is live at once at its innermost point, so the
// call's peak is exactly fwd_scratch + fwd_comm (bwd_scratch + bwd_comm). The strategies
// size their buffers with the same functions.
typedef struct {
  size_t saved;                 // kept per layer from forward to backward (== saved_bytes)
  size_t fwd_scratch, fwd_comm; // one forward call
  size_t bwd_scratch, bwd_comm; // one backward call
  lc_mem_parts fwd_parts, bwd_parts; // the named buffers of each call's scratch + comm
} lc_attn_mem;
// `threads` <= 0: the current omp_get_max_threads().
void lc_attn_local_mem(int Hq, int Hkv, int D, int T, int threads, int bf16, lc_attn_mem *m);

// Distributed: Ulysses over `head` (size hp) x ring over `ctx` (size cp) with inner rings
// of `window` context ranks. S is the global sequence length; each context rank holds
// `chunks` chunks of it (2: zigzag by default; a pass may set another layout with as many).
// head_chunk N (hp > 1): attention runs N of the rank's Hl = Hq/hp query heads at a time,
// the next group's all-to-all overlapping the current group's ring, and keeps only the LSE
// for backward (which re-exchanges q, k, v, out, dout per group); 0 or Hl: all at once
// (the unchunked path). LC_EINVAL with a message naming the valid values otherwise.
#include "comm/comm.h"
lc_status lc_attn_2d_init(lc_attn *a, lc_comm *head, lc_comm *ctx, int window, long S, int chunks,
                          int Hq, int Hkv, int D, int head_chunk);
void lc_attn_2d_free(lc_attn *a);
// The same sizes for hp x cp ranks (window: inner ring size, divides cp) with T = S/(hp*cp)
// local tokens, without communicators. LC_EINVAL (with a message) for an impossible layout
// or head chunk.
lc_status lc_attn_2d_mem(int hp, int cp, int window, long S, int chunks, int Hq, int Hkv, int D, int head_chunk,
                         int threads, int bf16, lc_attn_mem *m);
// Head chunks: N divides Hl = Hq/hp and, when a rank holds several kv heads, is a multiple
// of Hq/Hkv (whole kv groups). lc_attn_2d_head_chunks writes the valid N ascending (Hl, the
// unchunked size, last) and returns how many (0 for an impossible hp). _check: LC_OK for 0
// (all) or a valid N; else one line naming the valid values (hp = 1: no N is valid).
int lc_attn_2d_head_chunks(int hp, int Hq, int Hkv, int *out, int cap);
// Whether the 2D strategy's backward for hp ranks and head chunk N reads its token-layout
// q, k, v before it writes dk, dv (lc_attn.dkv_late): Ulysses (hp > 1) unchunked (it reads
// the head layout it kept) or chunked with one kv head per rank (dk, dv summed over the
// stages and exchanged back after the last); not the ring alone (k, v read in place) nor
// chunks with their own kv heads (each stage's dk, dv written while later stages read).
int lc_attn_2d_dkv_late(int hp, int Hq, int Hkv, int head_chunk);
lc_status lc_attn_2d_head_chunk_check(int hp, int Hq, int Hkv, int N);
// Query heads per stage of a strategy from lc_attn_2d_init (Hq/hp when unchunked).
int lc_attn_2d_head_chunk(const lc_attn *a);
// Test-only: query rows per ring kernel call (256; 0 restores it), so small shapes cross
// several calls per chunk. Set it before creating the strategy; not thread-safe.
void lc_attn_2d_test_set_poll_rows(int rows);
// Seconds spent in attention kernels inside the ring (the rest of attention time is
// communication and packing).
double lc_attn_2d_compute_seconds(const lc_attn *a);
// Bytes this rank should send per layer for T local tokens by the formulas (Ulysses:
// 4 all-to-alls forward + 4 backward, + q, k, v, out again in backward with head chunks;
// ring: cp-1 k/v hops forward, k/v + dk/dv hops backward, per head chunk). fwd_passes: 2 when full checkpointing re-runs the forward. bf16: q, k, v,
// out, dout and the ring's k/v blocks travel as bf16 (dq, dk, dv and dk/dv blocks: fp32).
double lc_attn_2d_bytes_per_layer(const lc_attn *a, int T, int fwd_passes, int bf16);

#endif
