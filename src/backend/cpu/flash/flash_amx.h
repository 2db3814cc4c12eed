// The AMX attention kernel's tile products (the kernel table's amx level; the emulated
// twin for tests: backend/cpu/flash/flash_tile.h). Included by backend/cpu/flash/flash_body.h
// when LC_FLASH_AMX is defined, in place of the vdpbf16ps products of flash_bf16.h; the
// rest of the kernel is the bf16 kernel's, unchanged: the same pair ("VNNI") layouts of q,
// k, v, P and dS (flash_bf16.h), packed once per call (k, v: lc_flash_kv_pack, counted as
// flash_kv_bytes), the same causal / key-bound tile skipping, per-query bounds, offsets,
// GQA, key chunks, 2-byte inputs and output, fp32 softmax, LSE and scaling (AVX-512, the
// existing exp2v), sums in a fixed order. So the amx kernel supports exactly what the bf16
// kernel does, and is as deterministic: every product below is a fixed sequence of tile
// instructions that does not depend on the thread split.
//
// The pair layouts are already what TDPBF16PS reads: an A operand is rows of bf16 pairs
// (KP/VP [Tk][D2], KT/VT [D][Tk2], P16/dS16 [BK][BQ/2]), a B operand is [K/2 pair rows][64
// columns of pairs] (Qp, dOp, Pp, dSp) or [BQ/2][Dp] (Qn2, dOn2) -- exactly the VNNI layout of
// a B tile (16 pair rows x 16 columns = 64 bytes a row). A product C[M][N] += A[M][K2 pairs] *
// B[K2][N] runs as blocks of 16 rows x 64 columns: 4 accumulator tiles (tmm0-3), one A tile
// (tmm4) and B tiles (tmm5-7) per 16 pairs of K. Partial edges (M, K2 not multiples of 16:
// the last key tile, odd D, a short query block) go through a zero-padded staging tile in
// the thread's workspace (3 tiles, 3 KiB, counted by lc_flash_workspace_bytes), so every
// tile is 16 x 64 bytes and the configuration is loaded once per thread per call.
//
// One tile step (16 rows x 64 columns, 16 pairs = 32 bf16 of K): loads 1 A tile + 4 B tiles =
// 5 KiB (L1-resident: a query block's Qp is 64 x D2 words = 16 KiB at D = 128), 4 TDPBF16PS
// = 4 x 16 x 16 x 32 x 2 = 32768 FLOP: 6.4 FLOP/byte. On Sapphire Rapids a TDPBF16PS issues
// every 16 cycles (1024 FLOP/cycle/core) and a 1 KiB TILELOADD takes ~8 cycles on 2 load
// ports, so the step is ~64 cycles of multiply against ~40 of loads: tile-bound. A whole
// 64 x 64 key tile of the forward at D = 128 (S = K Qp, then Ot += V^T P) is 2 x 2 x 64 x 64
// x 128 = 2.1 MFLOP, ~2048 cycles on the unit; its softmax in AVX-512 fp32 (4096 exp2v at ~20
// instructions per 16 lanes, the max, the sums, the mask on diagonal tiles, the bf16 pack of
// P, and the S tile stored and reloaded as 16 KiB of fp32) is ~2500-3000 cycles. So what
// bounds this kernel is the fp32 element-wise work between the products (at D = 64 by ~3x;
// the backward has twice the products and ~1.5x the element-wise work), not the tiles:
// the next step would be fusing the softmax into the tile stores. Measured on an Emerald
// Rapids Xeon, 2 cores (bench/RESULTS.md, issue 47): 464-647 GFLOP/s forward and 366-815
// backward at 2K-8K (69-96% of the same run's oneDNN bf16 GEMM for the pair), 3-5x the
// vdpbf16ps kernel; bit-identical to the emulated tiles (test_kernels).
#ifndef LC_FLASH_AMX_H
#define LC_FLASH_AMX_H

#include "backend/cpu/flash/flash_tile.h"

#define AMX_STAGE_FLOATS (3 * 256) // the per-thread staging tiles: A, B, C (1 KiB each)

// This thread's staging tiles (in the call's workspace; set by AMX_THREAD_BEGIN).
static _Thread_local float *amx_stage;

// The start and end of a parallel region that multiplies: the tile configuration (thread
// state) and the staging tiles.
#define AMX_THREAD_BEGIN(stage) (amx_stage = (stage), TILE_CFG())
#define AMX_THREAD_END() (TILE_RELEASE(), amx_stage = NULL)

// dst[16][16 words] = rows [0, rows) x words [0, words) of src (rows ld words apart), 0 elsewhere.
static void amx_stage_copy(uint32_t *dst, const uint32_t *src, long ld, int rows, int words) {
  for (int r = 0; r < 16; r++) {
    if (r < rows) memcpy(dst + r * 16, src + r * ld, 4 * (size_t)words);
    if (r >= rows) memset(dst + r * 16, 0, 64);
    else if (words < 16) memset(dst + r * 16 + words, 0, 4 * (size_t)(16 - words));
  }
}

// Accumulator tile T <-> columns [16 ct, 16 ct + 16) of the block's C rows.
#define AMX_C_LOAD(T, ct)                                                              \
  do {                                                                                 \
    float *c_ = Cb + 16 * (ct);                                                        \
    if (mode == 0) TILE_ZERO(T);                                                       \
    else if (mr == 16) TILE_LOAD(T, c_, 4 * ldc);                                      \
    else {                                                                             \
      amx_stage_copy(stC, (const uint32_t *)c_, ldc, mr, 16);                          \
      TILE_LOAD(T, stC, 64);                                                           \
    }                                                                                  \
  } while (0)
#define AMX_C_STORE(T, ct)                                                                       \
  do {                                                                                           \
    float *c_ = Cb + 16 * (ct);                                                                  \
    if (mr == 16) TILE_STORE(T, c_, 4 * ldc);                                                    \
    else {                                                                                       \
      TILE_STORE(T, stC, 64);                                                                    \
      for (int r_ = 0; r_ < mr; r_++) memcpy(c_ + r_ * ldc, stC + r_ * 16, 64);                  \
    }                                                                                            \
  } while (0)
// C tile T += the A tile (tmm4) * B tile TB (pair rows [k0, k0 + kk), columns of tile ct).
#define AMX_C_DP(T, TB, ct)                                                            \
  do {                                                                                 \
    const uint32_t *b_ = B + (long)k0 * ldb + c0 + 16 * (ct);                          \
    if (kk == 16) TILE_LOAD(TB, b_, 4 * ldb);                                          \
    else {                                                                             \
      amx_stage_copy(stB, b_, ldb, kk, 16);                                            \
      TILE_LOAD(TB, stB, 64);                                                          \
    }                                                                                  \
    TILE_DP(T, 4, TB);                                                                 \
  } while (0)

// C[M][N] (mode 0: =, 1: +=, 2: = alpha[c] * C +) A[M rows, sar words apart][K2 pairs] *
// B[K2 pair rows, ldb words apart][N], N a multiple of 16, C rows ldc floats apart.
static void amx_mm(int mode, int M, int N, int K2, const uint32_t *A, long sar, const uint32_t *B, long ldb, float *C,
                   long ldc, const float *alpha) {
  uint32_t *stA = (uint32_t *)amx_stage, *stB = stA + 256, *stC = stB + 256;
  if (mode == 2) { // the online softmax's rescale, in fp32 before the products add
    for (int r = 0; r < M; r++)
      for (int c = 0; c < N; c += 16)
        _mm512_storeu_ps(C + r * ldc + c, _mm512_mul_ps(_mm512_loadu_ps(C + r * ldc + c), _mm512_loadu_ps(alpha + c)));
    mode = 1;
  }
  for (int r0 = 0; r0 < M; r0 += 16) {
    const int mr = M - r0 < 16 ? M - r0 : 16;
    for (int c0 = 0; c0 < N; c0 += 64) {
      const int nc = (N - c0) / 16 < 4 ? (N - c0) / 16 : 4;
      float *Cb = C + (long)r0 * ldc + c0;
      AMX_C_LOAD(0, 0);
      if (nc > 1) AMX_C_LOAD(1, 1);
      if (nc > 2) AMX_C_LOAD(2, 2);
      if (nc > 3) AMX_C_LOAD(3, 3);
      for (int k0 = 0; k0 < K2; k0 += 16) {
        const int kk = K2 - k0 < 16 ? K2 - k0 : 16;
        const uint32_t *a = A + (long)r0 * sar + k0;
        if (mr == 16 && kk == 16) TILE_LOAD(4, a, 4 * sar);
        else {
          amx_stage_copy(stA, a, sar, mr, kk);
          TILE_LOAD(4, stA, 64);
        }
        AMX_C_DP(0, 5, 0);
        if (nc > 1) AMX_C_DP(1, 6, 1);
        if (nc > 2) AMX_C_DP(2, 7, 2);
        if (nc > 3) AMX_C_DP(3, 5, 3);
      }
      AMX_C_STORE(0, 0);
      if (nc > 1) AMX_C_STORE(1, 1);
      if (nc > 2) AMX_C_STORE(2, 2);
      if (nc > 3) AMX_C_STORE(3, 3);
    }
  }
}
#undef AMX_C_LOAD
#undef AMX_C_STORE
#undef AMX_C_DP

// The bf16 kernel's two product shapes (flash_bf16.h), on tiles.
// C[M][64] (mode as amx_mm) = A[M rows][K2 pairs] * B[K2][64]
static void t16_64(int mode, int M, int K2, const uint32_t *A, long sar, const uint32_t *B, float *C,
                   const float *alpha) {
  amx_mm(mode, M, BQ, K2, A, sar, B, BQ, C, BQ, alpha);
}
// C[M][N] += A[M][K2] * B[K2][N] (rows ldb / ldc apart), N a multiple of 16.
static void t16_acc(int M, int K2, const uint32_t *A, long sar, const uint32_t *B, long ldb, float *C,
                    long ldc, int N) {
  amx_mm(1, M, N, K2, A, sar, B, ldb, C, ldc, NULL);
}

// Test-only (tests/test_kernels.c): one TDPBF16PS on 16 x 16 dword tiles, c += a * b, on this
// variant's tiles: lc_flash_tdpbf16ps_amx (the hardware; only where lc_flash_amx_ready()) and
// lc_flash_tdpbf16ps_amx_emu (the emulation), compared with the SDM's pseudo-code and with
// each other bit for bit. (This header is included once per variant file, flash_body.h.)
void LC_FLASH_FN(tdpbf16ps)(float *c, const uint32_t *a, const uint32_t *b);
void LC_FLASH_FN(tdpbf16ps)(float *c, const uint32_t *a, const uint32_t *b) {
  TILE_CFG();
  TILE_LOAD(0, c, 64);
  TILE_LOAD(1, a, 64);
  TILE_LOAD(2, b, 64);
  TILE_DP(0, 1, 2);
  TILE_STORE(0, c, 64);
  TILE_RELEASE();
}

#endif
