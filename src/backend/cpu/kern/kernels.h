// The kernel table: the ops that touch data in bulk, chosen once at start-up from the CPU's
// features (lc_cpu_detect) or forced (--kernels). The attention kernel's variants are keyed
// by the same level (backend/cpu/flash/flash_variants.h); fp32 GEMMs are OpenBLAS
// sgemm at every level. Not yet behind it: the element-wise ops of the layer (RMSNorm, RoPE,
// SwiGLU, cross-entropy: backend/cpu/ops/*.c, compiled for the build machine).
//
// Levels, each including the ones before it:
//   portable  plain C compiled for the x86-64 baseline (SSE2): runs everywhere
//   avx2      the same loops compiled for AVX2 + FMA; attention with 8-wide vectors
//   avx512    AVX-512 (F/BW/DQ/VL); the register-tiled AVX-512 attention kernel
//   bf16      + AVX512_BF16: in --precision bf16 the attention tiles multiply bf16 pairs
//             (vdpbf16ps) and the linear layers run as oneDNN bf16 GEMMs
//   amx       + AMX-BF16 (Intel): oneDNN's bf16 GEMMs may use AMX tiles (the bf16 level
//             caps oneDNN at AVX512_BF16); attention in bf16 passes runs the amx kernel
//             (the bf16 kernel's body with its products on AMX tiles, TDPBF16PS:
//             backend/cpu/flash/flash_amx.h), or the bf16 kernel where Linux refuses the
//             tile state (lc_flash_amx_ready)
// Every variant is compiled into the one binary (per-file target flags, CMakeLists.txt);
// the ones this CPU cannot run are never called (lc_kern_select refuses them).
//
// The element-wise variants are the same C source compiled with each level's flags, with
// floating-point contraction off and sums in a fixed order (sumsq: per-thread chunks added in
// thread order): every level gives bit-identical results for a given thread count, only
// speed differs (tests/test_kernels.c checks it). The attention and GEMM entries of
// the bf16 level round their products' inputs to bf16 (the precision contract of
// --precision bf16) and are used only for bf16 passes; fp32 passes use the fp32 entries.
#ifndef LC_KERNELS_H
#define LC_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "core/cpu.h"
#include "core/status.h"

typedef enum {
  LC_KERN_PORTABLE = 0,
  LC_KERN_AVX2,
  LC_KERN_AVX512,
  LC_KERN_BF16,
  LC_KERN_AMX,
  LC_KERN_LEVELS,
  LC_KERN_AUTO = -1
} lc_kern_level;

// AdamW's hyperparameters (the adamw entry's scalars come from these).
typedef struct {
  float lr, beta1, beta2, eps, weight_decay;
} lc_adamw_hp;
// Update t's (1-based) bias corrections: step_size = lr / (1 - beta1^t), inv_sqrt_bc2 =
// 1 / sqrt(1 - beta2^t), in double.
void lc_adamw_bias(const lc_adamw_hp *hp, long t, float *step_size, float *inv_sqrt_bc2);
// Global gradient clipping: max_norm / (norm + 1e-6) when max_norm > 0 and norm > max_norm, else 1.
float lc_clip_factor(double norm, float max_norm);

// GEMM on bf16 operands with fp32 accumulation: row-major C[M,N] = beta*C + op(A)[M,K]
// op(B)[K,N], op(X) = X (ta/tb 0) or X^T (1, X stored [K,M] / [N,K]); beta is 0 or 1.
typedef void lc_gemm_bf16_fn(int ta, int tb, int M, int N, int K, const uint16_t *A, long lda,
                             const uint16_t *B, long ldb, float beta, float *C, long ldc);

typedef struct {
  lc_kern_level level;
  const char *name; // "portable", "avx2", "avx512", "bf16", "amx"
  // ---- casts (core/dtype.h's scalar rule: round to nearest even, NaN stays NaN) ----
  void (*bf16_round)(float *x, size_t n);                          // x = bf16(x) in place
  void (*bf16_round_copy)(float *dst, const float *src, size_t n); // dst = bf16(src)
  void (*bf16_pack)(uint16_t *dst, const float *src, size_t n);    // narrow into 2 bytes
  void (*bf16_unpack)(float *dst, const uint16_t *src, size_t n);  // widen (exact)
  // ---- reductions and updates over flat fp32 ranges ----
  void (*add)(float *y, const float *x, size_t n);     // y += x
  void (*scale)(float *x, size_t n, float s);          // x *= s
  double (*sumsq)(const float *x, size_t n);           // sum x^2, in double
  // One AdamW step on n floats: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  // p -= lr wd p + step_size m / (sqrt(v) inv_sqrt_bc2 + eps)
  void (*adamw)(float *p, const float *g, float *m, float *v, size_t n, float wd, float b1,
                float b2, float eps, float lr, float step_size, float inv_sqrt_bc2);
  // ---- GEMM on bf16 operands (NULL below the bf16 level: the fp32 GEMM then runs on
  // bf16 values)
  lc_gemm_bf16_fn *gemm_bf16;
} lc_kernels;

// The table in use (the best the CPU runs until lc_kern_select says otherwise).
const lc_kernels *lc_kern(void);
// Whether this CPU can run `level` (portable: always).
int lc_kern_supported(lc_kern_level level, const lc_cpu_info *cpu);
// The best level this CPU runs.
lc_kern_level lc_kern_best(const lc_cpu_info *cpu);
// Use `level` (LC_KERN_AUTO: the best) from now on. LC_EINVAL with one line naming the
// missing CPU feature when the CPU cannot run it. Call before any parallel work.
lc_status lc_kern_select(lc_kern_level level);
// "auto" | "portable" | "avx2" | "avx512" | "bf16" | "amx" (LC_EINVAL naming the choices).
lc_status lc_kern_parse(const char *s, lc_kern_level *level);
const char *lc_kern_name(lc_kern_level level);
// The table of one level whether or not this CPU runs it (tests compare levels).
const lc_kernels *lc_kern_table(lc_kern_level level);

// The casts through the table (the names every caller uses).
static inline void lc_bf16_round(float *x, size_t n) { lc_kern()->bf16_round(x, n); }
static inline void lc_bf16_round_copy(float *dst, const float *src, size_t n) { lc_kern()->bf16_round_copy(dst, src, n); }
static inline void lc_bf16_pack(uint16_t *dst, const float *src, size_t n) { lc_kern()->bf16_pack(dst, src, n); }
static inline void lc_bf16_unpack(float *dst, const uint16_t *src, size_t n) { lc_kern()->bf16_unpack(dst, src, n); }
// In place: buf[n] floats whose second half holds n bf16 values ((uint16_t *)buf + n, e.g.
// what a bf16 all-gather wrote there) becomes those n values widened (n even). Works
// front to back in chunks whose writes never reach bf16 values not yet read.
void lc_bf16_unpack_inplace(float *buf, size_t n);

#endif
