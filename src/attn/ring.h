// Zigzag causal ring attention over the context-parallel ranks, with the double ring
// (inner rings of `window` consecutive context ranks; the outer transfer to the next
// window runs in the background). Built on the blockwise kernel and the LSE merge. The
// chunks each rank holds come from a sequence layout (zigzag or balanced).
#ifndef LC_RING_H
#define LC_RING_H

#include "attn/attn.h"
#include "core/arena.h"
#include "comm/comm.h"
#include "attn/seqlayout.h"

typedef struct {
  lc_comm *ctx;    // ring communicator: rank = context rank c, size = cp
  int window;      // inner ring size, divides cp (cp: plain ring)
  long S;          // global sequence length (divisible by 2*cp)
  int Hq, Hkv, D;  // heads held here (after any Ulysses exchange)
  float scale;
  int poll_rows;   // q rows per kernel call; MPI is polled between calls
  void (*extra_poll)(void *arg); // also polled between calls (may be NULL)
  void *extra_arg;
  const lc_seq_layout *layout; // which chunks each context rank holds (k per rank)
  const int *lo;   // [S] first key each token may see, global positions (NULL: plain causal)
  long lse_stride; // floats from one chunk's [Hq][Lc] LSE block to the next (0: Hq * Lc,
                   // contiguous); head-chunked Ulysses writes into its all-heads array
  int bf16;        // a bf16 pass: q, k, v, out and dout are 2-byte bf16 arrays, read in
                   // place; the k/v blocks travel and are held in 2 bytes (half the bytes).
                   // The output, lse, dq, dk, dv and the dk/dv blocks are fp32 either way.
  // statistics (accumulated)
  double compute_seconds;
} lc_ring;

// This context rank's Tc = S/cp tokens: its k chunks of the layout, in order.
// q[Tc,Hq,D], k/v[Tc,Hkv,D] -> out[Tc,Hq,D], lse[k][Hq][Lc] (per chunk; chunk a's block
// at lse + a * lse_stride when set). Block pairs that
// no query may see (causal, or before every query's lower bound) are skipped.
// q, k, v (and dout, out below): float, or uint16_t bf16 when r->bf16.
lc_status lc_ring_fwd(lc_ring *r, float *out, float *lse, const void *q, const void *k,
                      const void *v, lc_arena *arena);
// dq/dk/dv OVERWRITTEN. out (bf16: its 2-byte rounding) and lse from lc_ring_fwd.
lc_status lc_ring_bwd(lc_ring *r, float *dq, float *dk, float *dv, const void *dout,
                      const void *out, const float *lse, const void *q, const void *k,
                      const void *v, lc_arena *arena);

// Arena bytes of lc_ring_fwd / lc_ring_bwd (saved = 0: the caller keeps the lse) for cp
// context ranks with inner rings of `window`, heads held Hq/Hkv, poll_rows q rows per
// kernel call, `threads` OpenMP threads (<= 0: current), bf16 as in lc_ring. The passes
// size their buffers with the same functions.
void lc_ring_mem(int cp, int window, long S, int chunks, int Hq, int Hkv, int D, int poll_rows, int threads,
                 int bf16, lc_attn_mem *m);

#endif
