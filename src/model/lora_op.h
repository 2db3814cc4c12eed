// A LoRA adapter beside one frozen projection y = x W^T (model/layer.c calls these after
// the base GEMM): y += s (x A^T) B^T with A [R, K], B [N, R], s the adapters' scale.
//   forward   u = x A^T [T,R] (fp32), u *= s (bf16 pass: u rounded into 2 bytes), y += u B^T
//   backward  u recomputed (R columns: cheaper than keeping it per layer);
//             gB += dy^T u;  du = s (dy B) [T,R] (bf16: rounded);  gA += du^T x;  dx += du A
// The scratch (u and du, fp32 and in a bf16 pass their 2-byte copies) is one block of the
// backend's (category scratch) per call, lc_lora_*_bytes with the GEMMs' own scratch.
#ifndef LC_LORA_OP_H
#define LC_LORA_OP_H

#include "backend/buf.h"
#include "core/dtype.h"
#include "core/status.h"

struct lc_backend;

typedef struct {
  int R;      // rank
  float s;    // scale (lc_lora_scale)
  int bf16;   // a bf16 pass: operands in 2 bytes, the adapters' compute copy BF16
  struct lc_backend *be;
} lc_lora_ctx;

// y [T,N] (fp32 or bf16) += s (x [T,K] A^T) B^T. A empty: nothing.
lc_status lc_lora_fwd(const lc_lora_ctx *c, lc_buf y, lc_buf x, lc_buf A, lc_buf B, int T, int K, int N);
// dx [T,K] (fp32) += s (dy B) A; gA [R,K] += s (dy B)^T x; gB [N,R] += dy^T s (x A^T).
lc_status lc_lora_bwd(const lc_lora_ctx *c, lc_buf dx, lc_buf gA, lc_buf gB, lc_buf dy, lc_buf x, lc_buf A, lc_buf B,
                      int T, int K, int N);
// Arena bytes (category scratch) one call holds at its peak: its block and the largest of
// its GEMMs' scratch (lc_matmul_*_bytes), for operands of dtypes y/dy, x (the weights are
// the adapters' compute copy).
size_t lc_lora_fwd_bytes(int R, int bf16, lc_dtype y_dt, lc_dtype x_dt, int T, int K, int N);
size_t lc_lora_bwd_bytes(int R, int bf16, lc_dtype dy_dt, lc_dtype x_dt, int T, int K, int N);

#endif
