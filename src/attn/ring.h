// Zigzag causal ring attention over the context-parallel ranks, with the double ring
// (inner rings of `window` consecutive context ranks; the outer transfer to the next
// window runs in the background). Built on the blockwise kernel and the LSE merge. The
// chunks each rank holds come from a sequence layout (zigzag or balanced).
#ifndef LC_RING_H
#define LC_RING_H

#include "attn/attn.h"
#include "backend/buf.h"
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
  lc_buf lo_buf;   // the same as a buffer of be's (I32 [S]), or empty: lo staged per call
                   // (backend/stage.h: read in place where be's memory is the host's)
  struct lc_backend *be; // the buffers' backend: kernels, copies and the ring's buffers
  long lse_stride; // floats from one chunk's [Hq][Lc] LSE block to the next (0: Hq * Lc,
                   // contiguous); head-chunked Ulysses writes into its all-heads array
  int bf16;        // a bf16 pass: q, k, v, out and dout are 2-byte bf16 arrays, read in
                   // place; the k/v blocks travel and are held in 2 bytes (half the bytes).
                   // The output, lse, dq, dk, dv and the dk/dv blocks are fp32 either way.
  // statistics (accumulated)
  double compute_seconds;
} lc_ring;

// This context rank's Tc = S/cp tokens: its k chunks of the layout, in order.
// q[Tc,Hq,D], k/v[Tc,Hkv,D] -> out[Tc,Hq,D] (F32), lse[k][Hq][Lc] (F32; chunk a's block at
// a * lse_stride when set). Block pairs that no query may see (causal, or before every
// query's lower bound) are skipped. q, k, v (and dout, out below): F32, or BF16 when
// r->bf16. Every buffer is r->be's; the k/v blocks travel as its buffers (staged through
// host memory where its memory is not the host's: backend/bufcomm.h).
lc_status lc_ring_fwd(lc_ring *r, lc_buf out, lc_buf lse, lc_buf q, lc_buf k, lc_buf v);
// dq/dk/dv OVERWRITTEN (F32). out (bf16: its 2-byte rounding) and lse from lc_ring_fwd.
lc_status lc_ring_bwd(lc_ring *r, lc_buf dq, lc_buf dk, lc_buf dv, lc_buf dout, lc_buf out, lc_buf lse, lc_buf q,
                      lc_buf k, lc_buf v);

// Arena bytes of lc_ring_fwd / lc_ring_bwd (saved = 0: the caller keeps the lse) for cp
// context ranks with inner rings of `window`, heads held Hq/Hkv, poll_rows q rows per
// kernel call, `threads` OpenMP threads (<= 0: current), bf16 as in lc_ring. The passes
// size their buffers with the same functions.
void lc_ring_mem(int cp, int window, long S, int chunks, int Hq, int Hkv, int D, int poll_rows, int threads,
                 int bf16, lc_attn_mem *m);

#endif
