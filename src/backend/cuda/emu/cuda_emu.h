// An emulation of CUDA's execution model on the CPU, so that the CUDA backend's kernel sources
// (src/backend/cuda/*.cu) compile with the host C++ compiler (C++17) and run in CI without a
// GPU (tests/test_cuda_emu.cpp). Nothing of the CUDA toolkit is needed: this header stands in
// for cuda_runtime.h (emu/include/ forwards the toolkit's header names here).
//
// Execution: a launch runs the grid's blocks one after another; a block's threads are
// cooperatively scheduled fibers (64 KiB stacks with a guard page, reused across blocks), so
// __syncthreads() is a real barrier of the block and the warp operations (__syncwarp, the
// shuffles, ballots and votes, mma.sync) are real 32-lane rendezvous: each lane deposits its
// operand, waits until every lane of its warp arrived, then reads. A barrier or rendezvous
// that can never complete (a thread exited or waits elsewhere) is reported as a deadlock of
// the kernel, not a hang. threadIdx / blockIdx / blockDim / gridDim are the running fiber's.
//
// Shared memory: static __shared__ variables are static storage in one linker section
// (lcc_emu_shared), dynamic shared memory one buffer; blocks run one after another, so both
// are per block; both are poisoned (0xff bytes: NaN / -1) when a block starts. The kernel
// translation units are compiled with GCC's -fsanitize=kernel-address in outline mode, which
// makes every load and store a call the runtime (cuda_emu.cpp) implements: accesses to shared
// memory are checked there for races (per 2-byte unit: a unit written by one thread and read
// or written by another with no barrier between them), for reads of units never written in
// the block, and for dynamic accesses past the launch's size. Each finding is reported with
// the kernel, the block, both threads and the byte offset, and fails the launch.
//
// Arithmetic: the _rn intrinsics are IEEE operations of the host (built with
// -ffp-contract=off: nothing fuses), identical to the GPU's; see each intrinsic below for the
// few whose GPU result may differ.
#ifndef LC_CUDA_EMU_H
#define LC_CUDA_EMU_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <utility>

#define LCC_EMU_RUNTIME 1

// ---- keywords
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// Static shared memory: static storage in one section, poisoned per block (see above). The
// kernels name it through a reference the compiler cannot see through (lcc_emu::opaque): every
// access is then instrumented (GCC does not instrument a constant-index access to a static it
// can see, such as sh[0]) and the storage escapes, so no value is kept in a register across a
// barrier (which is also a compiler memory barrier, below).
#define LCC_SHARED(type, name, dims)                                                                       \
  static __attribute__((section("lcc_emu_shared"), aligned(16))) type name##_lcc_storage dims;             \
  type(&name) dims = *(decltype(&name##_lcc_storage))lcc_emu::opaque(&name##_lcc_storage)
#define __shared__ static __attribute__((section("lcc_emu_shared"), aligned(16)))
#define LCC_EXTERN_SHARED(type, name, align) type *const name = (type *)lcc_emu::dyn_shared()

// ---- host runtime types (the values of CUDA's enums where they matter)
typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorLaunchFailure = 719,
} cudaError_t;
typedef struct CUstream_st *cudaStream_t;
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

// vector types (the GPU's alignment: a misaligned float4 access faults there; the kernels
// check alignment before they use one)
struct __attribute__((aligned(16))) float4 {
  float x, y, z, w;
};
struct __attribute__((aligned(8))) float2 {
  float x, y;
};
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline float2 make_float2(float x, float y) { return float2{x, y}; }

// bfloat16 (cuda_bf16.h's types; the kernels today work on bf16 bits in uint16_t): the
// conversion from float rounds to nearest even, as cvt.rn.bf16.f32 does; a NaN becomes the
// canonical 0x7fff, as on the GPU (the CPU's lc_bf16_pack keeps the NaN's sign and payload).
struct __nv_bfloat16 {
  uint16_t x;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{0x7fff};
  return __nv_bfloat16{(uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}
static inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
static inline float __bfloat162float(__nv_bfloat16 h) {
  const uint32_t u = (uint32_t)h.x << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
  return __nv_bfloat162{__float2bfloat16_rn(lo), __float2bfloat16_rn(hi)};
}
static inline __nv_bfloat162 __float22bfloat162_rn(float2 v) { return __floats2bfloat162_rn(v.x, v.y); }
static inline float __low2float(__nv_bfloat162 v) { return __bfloat162float(v.x); }
static inline float __high2float(__nv_bfloat162 v) { return __bfloat162float(v.y); }

namespace lcc_emu {

// The running fiber's coordinates (set by the scheduler at every switch).
extern uint3 g_thread_idx, g_block_idx;
extern dim3 g_block_dim, g_grid_dim;

void *dyn_shared();
void *opaque(void *p); // returns p (defined out of line: the compiler cannot follow it)
cudaError_t take_last_error();
cudaError_t set_max_dyn_smem(const void *fn, int bytes);

struct launch_cfg {
  dim3 grid, block;
  size_t smem;
  cudaStream_t st;
  const char *name;
  const void *fn;
};
// Runs every block of the grid; invoke(args) runs the kernel body in the current fiber.
void run_launch(const launch_cfg &c, void (*invoke)(void *), void *args);

template <class... P>
struct launcher {
  launch_cfg c;
  void (*k)(P...);
  struct pack {
    void (*k)(P...);
    std::tuple<P...> t;
  };
  static void invoke(void *v) {
    pack *p = (pack *)v;
    std::apply(p->k, p->t); // each fiber gets its own copies of the parameters
  }
  template <class... A>
  void operator()(A &&...a) {
    pack p{k, std::tuple<P...>(std::forward<A>(a)...)};
    run_launch(c, &launcher::invoke, &p);
  }
};
template <class... P>
launcher<P...> make_launcher(void (*k)(P...), const char *name, dim3 grid, dim3 block, size_t smem, cudaStream_t st) {
  return launcher<P...>{launch_cfg{grid, block, smem, st, name, (const void *)k}, k};
}

// Block-wide barrier; returns how many threads passed a non-zero pred.
int syncthreads_count(int pred);
// Warp rendezvous: every lane of the calling warp (mask must name all of them) deposits
// nwords (<= 16) 32-bit words; returns the warp's deposits, 16 words per lane, valid until
// the caller's next warp operation. orders_memory: __syncwarp (shared accesses of the warp's
// lanes before it are ordered before those after it).
const uint32_t *warp_gather(unsigned mask, const void *mine, int nwords, const char *op, int orders_memory);
// Whether [p, p + n) lies in the block's shared memory (static, or the launch's dynamic size)
// and p is align-aligned; reports a finding (op and thread named) where not.
int shared_span_ok(const void *p, size_t n, size_t align, const char *op);
// cp.async.cg.shared.global [dst], [src], 16, nsrc (nsrc bytes copied, the rest of the 16
// zero-filled), cp.async.commit_group, cp.async.wait_group n (PTX ISA 8.x, "Data Movement and
// Conversion Instructions: cp.async" and ": cp.async.wait_group"): the copy is recorded at
// issue and performed at the wait that covers its group, as the issuing thread's write of the
// 16 bytes; until then every access to them (by any thread) is reported, and they hold what
// they held (the poison, or the previous tile). Another thread sees the bytes only after a
// barrier that follows the wait, as on the GPU.
void cp_async_16(void *dst, const void *src, int nsrc);
void cp_async_commit();
void cp_async_wait(int n);
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (cuda_emu.cpp)
void mma_m16n8k16_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1);

// Findings since the last reset (races, uninitialised or out-of-bounds shared reads,
// deadlocks, launch-configuration errors), and the scheduling order of a block's threads
// (0: ascending thread index, 1: descending): a race shows in the values under one of them.
long findings();
void reset_findings();
void set_order(int descending);

} // namespace lcc_emu

#define threadIdx (lcc_emu::g_thread_idx)
#define blockIdx (lcc_emu::g_block_idx)
#define blockDim (lcc_emu::g_block_dim)
#define gridDim (lcc_emu::g_grid_dim)

#define LCC_LAUNCH(kern, grid, block, smem, st) lcc_emu::make_launcher(kern, #kern, grid, block, smem, st)

// ---- host runtime calls
static inline cudaError_t cudaGetLastError(void) { return lcc_emu::take_last_error(); }
template <class K>
static inline cudaError_t cudaFuncSetAttribute(K kern, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaErrorInvalidValue;
  return lcc_emu::set_max_dyn_smem((const void *)kern, value);
}

// ---- barriers and warp operations
// (Each is also a compiler memory barrier: shared values are reloaded after it.)
#define LCC_EMU_CLOBBER() __asm__ __volatile__("" ::: "memory")
static inline int lcc_emu_bar(int p) {
  LCC_EMU_CLOBBER();
  const int r = lcc_emu::syncthreads_count(p != 0);
  LCC_EMU_CLOBBER();
  return r;
}
static inline void __syncthreads(void) { (void)lcc_emu_bar(0); }
static inline int __syncthreads_or(int p) { return lcc_emu_bar(p) != 0; }
static inline int __syncthreads_count(int p) { return lcc_emu_bar(p); }
static inline int __syncthreads_and(int p) { return lcc_emu_bar(p) == (int)(blockDim.x * blockDim.y * blockDim.z); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
  LCC_EMU_CLOBBER();
  (void)lcc_emu::warp_gather(mask, nullptr, 0, "__syncwarp", 1);
  LCC_EMU_CLOBBER();
}

namespace lcc_emu {
inline unsigned lane_id() {
  return ((threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x) & 31u;
}
// Lane src's value of v (the operand of one shuffle), src outside [0, 32): the caller's own.
template <class T>
T shfl_from(unsigned mask, T v, int src_lane, const char *op) {
  static_assert(sizeof(T) <= 16 * 4, "shuffle operand too large");
  uint32_t w[16] = {0};
  memcpy(w, &v, sizeof(T));
  const uint32_t *all = warp_gather(mask, w, (int)((sizeof(T) + 3) / 4), op, 0);
  if (src_lane < 0 || src_lane > 31) return v;
  T r;
  memcpy(&r, all + 16 * src_lane, sizeof(T));
  return r;
}
} // namespace lcc_emu

// width: segments of width lanes (a power of two up to 32), as CUDA defines them.
template <class T>
static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  const int lane = (int)lcc_emu::lane_id(), base = lane & ~(width - 1);
  return lcc_emu::shfl_from(mask, v, base + (src & (width - 1)), "__shfl_sync");
}
template <class T>
static inline T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32) {
  const int lane = (int)lcc_emu::lane_id(), base = lane & ~(width - 1), s = lane ^ m;
  return lcc_emu::shfl_from(mask, v, s >= base + width ? lane : s, "__shfl_xor_sync");
}
template <class T>
static inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) {
  const int lane = (int)lcc_emu::lane_id(), base = lane & ~(width - 1), s = lane + (int)d;
  return lcc_emu::shfl_from(mask, v, s >= base + width ? lane : s, "__shfl_down_sync");
}
template <class T>
static inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) {
  const int lane = (int)lcc_emu::lane_id(), base = lane & ~(width - 1), s = lane - (int)d;
  return lcc_emu::shfl_from(mask, v, s < base ? lane : s, "__shfl_up_sync");
}
static inline unsigned __ballot_sync(unsigned mask, int pred) {
  const uint32_t mine = pred != 0;
  const uint32_t *all = lcc_emu::warp_gather(mask, &mine, 1, "__ballot_sync", 0);
  unsigned b = 0;
  for (int l = 0; l < 32; l++)
    if (((mask >> l) & 1u) && all[16 * l]) b |= 1u << l;
  return b;
}
static inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
static inline int __all_sync(unsigned mask, int pred) {
  const uint32_t mine = pred != 0;
  const uint32_t *all = lcc_emu::warp_gather(mask, &mine, 1, "__all_sync", 0);
  for (int l = 0; l < 32; l++)
    if (((mask >> l) & 1u) && !all[16 * l]) return 0;
  return 1;
}

// ---- ldmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16 (PTX ISA 8.x, section 9.7.14.5.15
// "Warp-level matrix load instruction: ldmatrix"): four 8x8 matrices of 16-bit elements. Lane
// 8 i + r supplies the shared address of row r of matrix i (a 16-byte row: 16-byte aligned, in
// shared memory); destination register i of lane l = 4 g + t holds matrix i's elements
// (row g, cols 2t, 2t+1) (lower column in the lower half), with .trans (rows 2t, 2t+1, col g):
// the transposed matrix, the same layout as mma's B fragment. Emulated as a warp rendezvous
// on the 32 row addresses, then each lane reads its own elements here: the reads are the
// kernel translation unit's, so the race and unwritten-read checks see them as the receiving
// lane's loads.
namespace lcc_emu {
template <int TRANS>
inline void ldmatrix_x4(uint32_t r[4], const void *row, const char *op) {
  uint32_t mine[3]; // the row address, and whether it is valid (an invalid row reads as 0xffff)
  const uint64_t a = (uint64_t)(uintptr_t)row;
  memcpy(mine, &a, 8);
  mine[2] = (uint32_t)shared_span_ok(row, 16, 16, op);
  const uint32_t *all = warp_gather(0xffffffffu, mine, 3, op, 0);
  uint64_t rows[32];
  int valid[32];
  for (int l = 0; l < 32; l++) memcpy(&rows[l], all + 16 * l, 8), valid[l] = (int)all[16 * l + 2];
  const unsigned lane = lane_id(), g = lane >> 2, t = lane & 3;
  for (int i = 0; i < 4; i++) {
    if (!TRANS) {
      const int src = 8 * i + (int)g;
      r[i] = valid[src] ? *(const uint32_t *)(uintptr_t)(rows[src] + 4 * t) : 0xffffffffu;
    } else {
      const int s0 = 8 * i + 2 * (int)t, s1 = s0 + 1;
      const uint32_t lo = valid[s0] ? *(const uint16_t *)(uintptr_t)(rows[s0] + 2 * g) : 0xffffu;
      const uint32_t hi = valid[s1] ? *(const uint16_t *)(uintptr_t)(rows[s1] + 2 * g) : 0xffffu;
      r[i] = lo | (hi << 16);
    }
  }
}
} // namespace lcc_emu

// ---- bit casts and integer intrinsics
static inline uint32_t __float_as_uint(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float __uint_as_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline int __float_as_int(float f) { return (int)__float_as_uint(f); }
static inline float __int_as_float(int i) { return __uint_as_float((uint32_t)i); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }

// ---- fp32 / fp64 with round-to-nearest-even: IEEE on both sides, the GPU's bits (denormals:
// the kernels assume nvcc's default -ftz=false, as the host)
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __dsqrt_rn(double a) { return sqrt(a); }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
// Approximate on the GPU (__expf: ex2.approx, about 2 ulp; rsqrtf: rsqrt.approx): the
// emulation gives the exact value, the tests' tolerances cover the difference. (None of the
// kernels uses them today; they compute exp with lc_fast_expf / fl_exp2, bit for bit.)
static inline float lcc_emu_expf(float x) { return expf(x); }
#define __expf lcc_emu_expf // (glibc declares a __expf of its own)
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
// The kernels' double exp / log / log1p / log2 and ceilf / fabsf come from <math.h>: ceilf and
// fabsf are exact on both sides; CUDA's double exp, log, log1p, log2 have at most 1-2 ulp of
// error (CUDA C Programming Guide, "Mathematical Functions", double precision) and glibc's
// under 1 ulp: the last bit of a double may differ, far below every tolerance that uses them.

#endif
