// A LoRA adapter beside one frozen projection y = x W^T (model/layer.c calls these after
// the base GEMM): y += s (x A^T) B^T with A [R, K], B [N, R], s the adapters' scale.
//   forward   u = x A^T [T,R] (fp32), u *= s (bf16 pass: u rounded into 2 bytes), y += u B^T
//   backward  u recomputed (R columns: cheaper than keeping it per layer);
//             gB += dy^T u;  du = s (dy B) [T,R] (bf16: rounded);  gA += du^T x;  dx += du A
// With dropout (PEFT's lora_dropout, p > 0, training passes only) x is replaced by
// x o m / (1-p) with m the mask of core/dropout_hash.h: the mask is applied to x a chunk of
// LC_LORA_DROP_ROWS rows at a time (xd = x o m, in x's dtype), 1/(1-p) goes into s, and
// backward regenerates the mask: gA += du^T xd, dx += (du A) o m.
// The scratch (u and du, fp32 and in a bf16 pass their 2-byte copies; with dropout a chunk
// of xd and of du A) is one block of the backend's (category scratch) per call,
// lc_lora_*_bytes with the GEMMs' own scratch.
#ifndef LC_LORA_OP_H
#define LC_LORA_OP_H

#include <stdint.h>

#include "backend/buf.h"
#include "core/dtype.h"
#include "core/status.h"

struct lc_backend;

#define LC_LORA_DROP_ROWS 1024
// Test-only: dropout's chunk of rows (0 restores LC_LORA_DROP_ROWS), so short test
// sequences take several chunks.
void lc_lora_test_set_drop_rows(int n);

typedef struct {
  int R;      // rank
  float s;    // scale (lc_lora_scale)
  int bf16;   // a bf16 pass: operands in 2 bytes, the adapters' compute copy BF16
  struct lc_backend *be;
  // Dropout (drop_thr > 0: lc_dropout_thr(p)): the scale becomes s / (1 - p); the mask of a
  // call is keyed by lc_dropout_key(drop_key, layer, proj) and the rows' indices in their
  // whole sequence, drop_rows (I32, one per row of the pass; a call's rows start at its row0).
  uint32_t drop_thr;
  float drop_p;
  uint64_t drop_key; // the pass's (lc_dropout_pass_key)
  int layer;
  lc_buf drop_rows;
} lc_lora_ctx;

// y [T,N] (fp32 or bf16) += s (x [T,K] A^T) B^T. A empty: nothing. proj: LC_LORA_Q ..;
// row0: the pass's row of x's first row (dropout's rows).
lc_status lc_lora_fwd(const lc_lora_ctx *c, int proj, int row0, lc_buf y, lc_buf x, lc_buf A, lc_buf B, int T, int K,
                      int N);
// dx [T,K] (fp32) += s (dy B) A; gA [R,K] += s (dy B)^T x; gB [N,R] += dy^T s (x A^T).
lc_status lc_lora_bwd(const lc_lora_ctx *c, int proj, int row0, lc_buf dx, lc_buf gA, lc_buf gB, lc_buf dy, lc_buf x,
                      lc_buf A, lc_buf B, int T, int K, int N);
// Arena bytes (category scratch) one call holds at its peak: its block and the largest of
// its GEMMs' scratch (lc_matmul_*_bytes), for operands of dtypes y/dy, x (the weights are
// the adapters' compute copy); drop: with dropout.
size_t lc_lora_fwd_bytes(int R, int bf16, int drop, lc_dtype y_dt, lc_dtype x_dt, int T, int K, int N);
size_t lc_lora_bwd_bytes(int R, int bf16, int drop, lc_dtype dy_dt, lc_dtype x_dt, int T, int K, int N);

#endif
