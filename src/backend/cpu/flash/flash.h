// Blockwise (flash) causal attention on one (q block, k/v block) pair with an online
// softmax. Returns out and the log-sum-exp of every query row, so partial results
// over different key ranges merge exactly (ring attention builds on this).
// No Tq x Tk matrix is ever allocated: the workspace is O(threads * block^2), plus, for the
// bf16 kernel (shape.bf16 at the bf16/amx levels), the call's k and v packed as bf16 pairs
// (Hkv x Tk x D x 4 bytes forward, 6 backward; lc_flash_workspace_bytes counts it).
#ifndef LC_FLASH_H
#define LC_FLASH_H

#include "backend/attn_geom.h"
#include "core/arena.h"
#include "core/status.h"

#include <stddef.h>
#include <stdint.h>

// The kernel's tiles: blocks of LC_FLASH_BQ query rows (fixed by the primitives) against
// tiles of LC_FLASH_BK key rows; fully hidden tiles are skipped. The sequence layouts'
// cost model (attn/seqlayout.c) counts work in these tiles (backend/attn_geom.h).
#define LC_FLASH_BQ LC_ATTN_TILE_Q
// n rounded up to a multiple of 16 floats (64 bytes): the kernels' buffer strides.
static inline long rup16(long n) { return (n + 15) & ~15L; }
#ifndef LC_FLASH_BK
#define LC_FLASH_BK LC_ATTN_TILE_K
#endif

typedef struct {
  int Tq, Tk;           // rows of q and of k/v
  int Hq, Hkv, D;       // query heads, kv heads (Hq % Hkv == 0; q head h uses kv head h/(Hq/Hkv)), head dim
  long q_start, k_start; // global positions of q row 0 and k row 0 (causal mask: key pos > query pos hidden)
  int causal;           // 0: every key visible
  float scale;          // softmax scale, usually 1/sqrt(D)
  // Optional per-query lower bound (documents, sliding window): lo[i] is the global position
  // of the first key query row i may see; keys before it are hidden. NULL: no bound.
  // Key tiles that no row of a query block may see are skipped.
  const int *lo;
  // 1: q, k, v hold bf16 values (a --precision bf16 pass). Kernels with native bf16
  // products (the kernel table's bf16/amx levels) then also round the probabilities and
  // score gradients to bf16 before multiplying them, as FlashAttention does in bf16;
  // softmax, LSE, and every sum stay fp32. 0: fp32 products throughout.
  int bf16;
  // Optional: k and v already packed by lc_flash_kv_pack for this shape's Tk, Hkv, D and
  // direction, so several calls on one k/v block (the ring's query tiles) pack it once; the
  // call then neither packs nor allocates that part of its workspace. NULL: the call packs.
  const void *kv_pack;
  // Storage of the inputs (only with bf16 = 1, whose values they are): q16: q, and in
  // backward dout, are 2-byte bf16 arrays (uint16_t, same shapes); kv16: k and v are (also
  // for lc_flash_kv_pack). The kernels widen what they read, a block or a key tile at a
  // time, exactly: the results are the bits of fp32 arrays holding the same values, and no
  // fp32 copy of the call's inputs is made. 0: fp32 arrays.
  int q16, kv16;
  // (forward, bf16 = 1 only) out is a 2-byte bf16 array: each value rounded to nearest even
  // as it is written (the bits lc_bf16_pack gives on the fp32 output). 0: fp32.
  int out16;
} lc_attn_shape;

// q[Tq,Hq,D], k/v[Tk,Hkv,D] -> out[Tq,Hq,D], lse[Hq,Tq] (natural log).
// A query row that sees no key gets out = 0 and lse = -INFINITY.
// q, k, v (and dout below): float, or uint16_t bf16 as s->q16 / s->kv16 say.
lc_status lc_flash_fwd(void *out, float *lse, const void *q, const void *k, const void *v,
                       const lc_attn_shape *s, lc_arena *arena);

// Merge a second partial result (out_b, lse_b) over other keys into (out_a, lse_a), in
// place, with the stable form lse = max + log1p(exp(min - max)). -INFINITY rows are fine.
void lc_attn_merge(float *out_a, float *lse_a, const float *out_b, const float *lse_b, int Tq,
                   int Hq, int D);

// delta[Hq,Tq] = sum_d dout[t,h,d] * out[t,h,d]  (of the final, merged output)
void lc_attn_delta(float *delta, const float *dout, const float *out, int Tq, int Hq, int D);
// The same on 2-byte bf16 dout and out (the bits lc_attn_delta gives on their widened values).
void lc_attn_delta16(float *delta, const uint16_t *dout, const uint16_t *out, int Tq, int Hq, int D);

// Backward for one (q block, k/v block) pair, ACCUMULATING: dq[Tq,Hq,D] +=, dk/dv[Tk,Hkv,D] +=.
// lse and delta are those of the final merged forward (so blocks can be processed
// independently, in any order, on any rank).
lc_status lc_flash_bwd(float *dq, float *dk, float *dv, const void *dout, const void *q,
                       const void *k, const void *v, const float *lse, const float *delta,
                       const lc_attn_shape *s, lc_arena *arena);

// Arena bytes (category scratch) of the workspace lc_flash_fwd (bwd = 0) or lc_flash_bwd
// (bwd = 1) allocates for shape s with `threads` OpenMP threads (<= 0: the current
// omp_get_max_threads()). The kernels size their workspace with this same computation.
size_t lc_flash_workspace_bytes(const lc_attn_shape *s, int bwd, int threads);

// Bytes of k/v packed for the kernel variant that runs shape s (bwd: for lc_flash_bwd), 0
// when it reads k and v in place (fp32 kernels); lc_flash_kv_pack fills them.
size_t lc_flash_kv_bytes(const lc_attn_shape *s, int bwd);
void lc_flash_kv_pack(void *dst, const void *k, const void *v, const lc_attn_shape *s, int bwd);

// The kernel variant that runs shape s ("portable", "avx2", "avx512", "bf16", "amx").
const char *lc_flash_variant_name(const lc_attn_shape *s);

// 1 when the AMX tile kernel may run: the CPU has AMX-BF16 and Linux granted this process
// the tile data state (asked once, on the first call: backend/cpu/flash/amx_perm.c; a
// refusal prints one line). 0 otherwise (bf16 passes at the amx level then run the bf16
// kernel).
int lc_flash_amx_ready(void);

// Key rows per dK/dV chunk of lc_flash_bwd for shape s (about 4 MiB of per-thread
// buffers, a multiple of 64, at most Tk rounded up to 64). Tests use it to make sure a
// shape crosses chunk boundaries.
long lc_flash_bwd_key_chunk(const lc_attn_shape *s);
// Test-only: force the key chunk to `rows` (a positive multiple of 64) so small shapes
// cross chunk boundaries; 0 restores the automatic size. Not thread-safe; set it between
// kernel calls.
void lc_flash_test_set_key_chunk(long rows);

#endif
