// The backend interface: what a device must provide for longctx to train on it (DESIGN.md,
// "Backends"). A backend owns memory (an allocator per memory category, counted per device,
// and host memory for staging and offload), buffers (typed handles), execution (a compute
// stream and a copy stream with events) and the bulk ops that run on its buffers. Host code
// holds lc_buf handles, calls the ops below and sees a value only through lc_buf_read, a
// named, counted synchronisation point.
//
// A new backend is one folder, src/backend/NAME/, that fills an lc_backend_ops table and
// registers a constructor in backend.c's device list. Today: `cpu` (backend/cpu/: the arena
// and every CPU kernel, host memory), `private` (backend/private/, for tests: its buffers
// live in a private mapping host code has no pointer to, protected outside the backend's
// own calls, so a hidden host access faults) and, in builds with nvcc, `cuda`
// (backend/cuda/: cuBLASLt GEMMs and our CUDA kernels).
//
// Every op below runs on the compute stream unless it takes a stream; on the CPU every call
// is synchronous and the stream calls do nothing. Element counts are in the buffers'
// dtypes; an op checks that its buffers belong to the backend and have the sizes it needs
// (a mismatch is a programming error: LC_EINVAL naming the op).
//
// Every pass, strategy, store and generation step runs on handles; communication takes
// backend buffers (bufcomm.h: staged through host memory where the backend's is not the
// host's). The store keeps host pointers of its states for its CPU fast paths only
// (docs/NOTES.md, Backends).
#ifndef LC_BACKEND_H
#define LC_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "backend/attn_geom.h"
#include "core/arena.h"
#include "core/dtype.h"
#include "core/status.h"

#include "backend/buf.h"
// Elements [first, first + n) of b, as dtype b.dt (n = 0 is an empty view).
lc_buf lc_buf_view(lc_buf b, size_t first, size_t n);
// n elements of dtype dt from byte `byte_off` of b (carving one allocation into typed
// parts; byte_off keeps dt's alignment).
lc_buf lc_buf_part(lc_buf b, size_t byte_off, size_t n, lc_dtype dt);
// Carving one block (U8) into consecutive typed parts, each starting at a multiple of 64
// bytes (the layer's and the model's blocks; their size functions count the same).
typedef struct {
  lc_buf blk;
  size_t at; // bytes carved so far
} lc_buf_carver;
static inline lc_buf lc_buf_cut(lc_buf_carver *k, size_t n, lc_dtype dt) {
  const lc_buf b = lc_buf_part(k->blk, k->at, n, dt);
  k->at += (lc_bytes(dt, n) + 63) & ~(size_t)63;
  return b;
}
// Transitional (issue 32): a handle for n elements at host address p, memory the caller
// owns (not freed through it), for code whose buffers are not yet the backend's. Only a
// backend of host memory takes it; elsewhere the empty buffer, with LC_EINVAL's line set.
lc_buf lc_buf_wrap_host(lc_backend *be, const void *p, size_t n, lc_dtype dt);

// The named synchronisation points: every read or write between a buffer and host memory
// says why it happens, and the backend counts them (lc_backend.sync). A step's expected
// set is a test (tests/test_backend.c): a hidden read fails it.
typedef enum {
  LC_SYNC_LOSS = 0,   // a pass's loss sum
  LC_SYNC_GRAD_NORM,  // the gradient's sum of squares (norm, clip factor, non-finite check)
  LC_SYNC_TOKEN,      // a generated token
  LC_SYNC_INPUT,      // a pass's inputs the host made (the targets the loss reads)
  LC_SYNC_STATES,     // model states in or out: initialisation, loading, saving, resuming
  LC_SYNC_STAGE,      // staging for a communicator that cannot read the device's memory
  LC_SYNC_OFFLOAD,    // --offload-optimizer: a unit's weights up, its gradient down
  LC_SYNC_TEST,       // tests
  LC_SYNC_N
} lc_sync_kind;
const char *lc_sync_name(lc_sync_kind k);

typedef enum { LC_STREAM_COMPUTE = 0, LC_STREAM_COPY, LC_STREAM_N } lc_stream;
// A point in a stream's work (recorded, then waited for by another stream or the host).
typedef struct {
  uint64_t h;
} lc_be_event;

// AdamW over one shard, with the step's scalars (backend/cpu/kern/kernels.h: the adamw entry).
typedef struct {
  float wd, beta1, beta2, eps, lr, step_size, inv_sqrt_bc2;
} lc_adamw_args;

// The table a backend fills. Buffers passed in are the backend's own.
typedef struct {
  // ---- memory: allocations of `bytes` (64-byte aligned), zeroed when `zero`, counted in
  // be->arena under cat (the cap's refusal: LC_ENOMEM with one line naming `what`)
  lc_status (*alloc)(lc_backend *be, lc_mem_cat cat, size_t bytes, int zero, const char *what, uint64_t *h);
  void (*free)(lc_backend *be, lc_mem_cat cat, size_t bytes, uint64_t h);
  // The host address of a buffer's first byte where the backend's memory is host memory
  // (cpu), else NULL (transitional: lc_buf_host).
  void *(*host_ptr)(lc_backend *be, lc_buf b);
  // ---- transfers: host <-> buffer (blocking), buffer -> buffer on a stream
  lc_status (*read)(lc_backend *be, lc_buf src, void *dst);
  lc_status (*write)(lc_backend *be, lc_buf dst, const void *src);
  void (*copy)(lc_backend *be, lc_buf dst, lc_buf src, lc_stream s); // same dtype and n
  void (*zero)(lc_backend *be, lc_buf dst);
  // ---- execution
  void (*record)(lc_backend *be, lc_stream s, lc_be_event *ev);
  void (*wait_event)(lc_backend *be, lc_stream s, lc_be_event ev); // s waits for ev
  lc_status (*sync)(lc_backend *be, lc_stream s);               // the host waits for s
  // ---- casts (backend/cpu/kern/kernels.h's rule: round to nearest even)
  void (*bf16_pack)(lc_backend *be, lc_buf dst16, lc_buf src32);
  void (*bf16_unpack)(lc_backend *be, lc_buf dst32, lc_buf src16);
  void (*bf16_round)(lc_backend *be, lc_buf x32);
  // ---- reductions and updates over flat fp32 ranges
  void (*add)(lc_backend *be, lc_buf y, lc_buf x);   // y += x
  void (*scale)(lc_backend *be, lc_buf x, float s);  // x *= s
  // acc (one F64 element) += sum of x^2, summed in double in the kernel table's order
  void (*sumsq_acc)(lc_backend *be, lc_buf acc, lc_buf x);
  // One AdamW step over p, g, m, v (fp32, the same n)
  void (*adamw)(lc_backend *be, lc_buf p, lc_buf g, lc_buf m, lc_buf v, const lc_adamw_args *a);
  // ---- RMSNorm (backend/cpu/ops/ops.h): out [T,C] fp32 or bf16 (rounded), rstd [T]; backward adds
  // into dinp (set: overwrites it; dinp may be dout) and dw (empty: skipped)
  void (*rmsnorm_fwd)(lc_backend *be, lc_buf out, lc_buf rstd, lc_buf x, lc_buf w, int T, int C, float eps);
  void (*rmsnorm_bwd)(lc_backend *be, lc_buf dinp, lc_buf dw, lc_buf dout, lc_buf inp, lc_buf w, lc_buf rstd, int T,
                      int C, int set);
  // ---- the linear layer (backend/cpu/ops/ops.h lc_matmul_*): out [T,N] = inp [T,K] W[N,K]^T; dinp
  // (= or +=) dout W, dw += dout^T inp (either empty: skipped). Operands fp32 or bf16;
  // bf16: the pass's bf16 GEMM. scratch: held by the caller (U8, lc_matmul_*_bytes), or
  // empty (the backend allocates it in its arena, category scratch)
  lc_status (*matmul_fwd)(lc_backend *be, lc_buf out, lc_buf inp, lc_buf w, int T, int K, int N, int accumulate,
                          int bf16, lc_buf scratch); // accumulate: out += inp W^T
  lc_status (*matmul_bwd)(lc_backend *be, lc_buf dinp, lc_buf dw, lc_buf dout, lc_buf inp, lc_buf w, int T, int K,
                          int N, int accumulate, int bf16, lc_buf scratch);
  // ---- the loss tile (backend/cpu/ops/ops.h lc_xent_*): acc is F64 [2] (loss sum, misses), targets
  // I32; stats U8 of lc_xent_stats_bytes(T) for the loss over vocabulary slices
  void (*xent_tile)(lc_backend *be, lc_buf logits, lc_buf targets, int T, int V, float scale, lc_buf acc,
                    int count_wrong);
  void (*xent_stats_init)(lc_backend *be, lc_buf stats, int T);
  void (*xent_slice_merge)(lc_backend *be, lc_buf stats, int T, lc_buf logits, lc_buf targets, int t0, int m, int v0,
                           int vs);
  void (*xent_slice_total)(lc_backend *be, lc_buf stats, lc_buf targets, int T, lc_buf acc, int count_wrong);
  void (*xent_slice_dlogits)(lc_backend *be, lc_buf logits, lc_buf stats, int T, lc_buf targets, int t0, int m, int v0,
                             int vs, float scale);
  // ---- the layer's element-wise ops (backend/cpu/ops/ops.h), in place where they say so: RoPE on x
  // [T,H,D] with tables cos/sin [T,D/2]; SwiGLU h = silu(g) u (fp32, or bf16 when h/dg/du
  // are 2-byte: each result rounded); the bias of a linear layer (db from fp32 or 2-byte
  // dy); the embedding lookup (wte fp32 or 2-byte) and its scatter-add
  void (*rope)(lc_backend *be, lc_buf x, lc_buf cos_t, lc_buf sin_t, int T, int H, int D, int bwd);
  void (*swiglu_fwd)(lc_backend *be, lc_buf h, lc_buf g, lc_buf u);
  void (*swiglu_bwd)(lc_backend *be, lc_buf dg, lc_buf du, lc_buf dh, lc_buf g, lc_buf u);
  void (*bias_fwd)(lc_backend *be, lc_buf y, lc_buf b, int T, int N);
  void (*bias_bwd)(lc_backend *be, lc_buf db, lc_buf dy, int T, int N);
  // (wte/dwte hold table rows [r0, r0 + n / C): tokens outside them are left alone)
  void (*embedding_fwd)(lc_backend *be, lc_buf out, lc_buf tokens, lc_buf wte, int T, int C, int r0);
  void (*embedding_bwd)(lc_backend *be, lc_buf dwte, lc_buf dout, lc_buf tokens, int T, int C, int r0);
  // ---- flash attention (backend/cpu/flash/flash.h) on one (q block, k/v block) pair: s gives the
  // shape, offsets, causality, scale and bf16; its lo, q16/kv16/out16 and kv_pack fields
  // are ignored: lo is a buffer (I32 [Tq] or empty), the 2-byte flags follow the buffers'
  // dtypes, pack (U8, or empty) holds k/v as flash_kv_pack left them for this Tk (a ring
  // packs a key chunk once for all its query tiles; lc_flash_kv_bytes, 0 for kernels that
  // read k/v in place). Workspace in the backend's arena (lc_flash_workspace_bytes). The
  // merge of partial outputs through their LSE, and delta = rowsum(dout * out).
  lc_status (*flash_fwd)(lc_backend *be, lc_buf out, lc_buf lse, lc_buf q, lc_buf k, lc_buf v, lc_buf lo, lc_buf pack,
                         const lc_attn_geom *s);
  lc_status (*flash_bwd)(lc_backend *be, lc_buf dq, lc_buf dk, lc_buf dv, lc_buf dout, lc_buf q, lc_buf k, lc_buf v,
                         lc_buf lse, lc_buf delta, lc_buf lo, lc_buf pack, const lc_attn_geom *s);
  // Bytes of flash_kv_pack's output for shape s (0: the kernels read k/v in place)
  size_t (*flash_kv_bytes)(lc_backend *be, const lc_attn_geom *s, int bwd);
  void (*flash_kv_pack)(lc_backend *be, lc_buf pack, lc_buf k, lc_buf v, const lc_attn_geom *s, int bwd);
  // Strided 2-D copies and sums: dst[r * ld_dst + i] = (or +=) src[r * ld_src + i] for
  // r < rows, i < n, in element units of the buffers' (same) dtype; add2d is F32. The layout
  // changes of attention: the ring's per-chunk LSE rows, Ulysses' all-to-all packing, kv
  // head replication and the sum of the replicas' gradients.
  void (*copy2d)(lc_backend *be, lc_buf dst, size_t ld_dst, lc_buf src, size_t ld_src, size_t rows, size_t n);
  void (*add2d)(lc_backend *be, lc_buf dst, size_t ld_dst, lc_buf src, size_t ld_src, size_t rows, size_t n);
  void (*fill)(lc_backend *be, lc_buf x, float v); // x[i] = v (F32)
  void (*attn_merge)(lc_backend *be, lc_buf out_a, lc_buf lse_a, lc_buf out_b, lc_buf lse_b, int Tq, int Hq, int D);
  void (*attn_delta)(lc_backend *be, lc_buf delta, lc_buf dout, lc_buf out, int Tq, int Hq, int D);
  // ---- LoRA dropout (core/dropout_hash.h): dst [rows, cols] (= or, accumulate, +=) src where
  // element (gidx[r], j) is kept under key and thr; dst/src both F32 or both BF16
  // (accumulate: F32), gidx I32 [rows]
  void (*dropout)(lc_backend *be, lc_buf dst, lc_buf src, int rows, int cols, lc_buf gidx, uint64_t key, uint32_t thr,
                  int accumulate);
  void (*destroy)(lc_backend *be);
} lc_backend_ops;

// What the op timers sort the table's entries into (lc_backend_op_seconds): the linear
// layers' products; attention kernels (flash forward/backward, packing, merge, delta); the
// loss tile (cross-entropy and the slices' statistics); the optimizer (AdamW and the sums
// of squares of the gradient norm); every other element-wise op (casts, copies, add/scale,
// norms, RoPE, SwiGLU, bias, embedding, strided copies).
typedef enum { LC_OPC_GEMM = 0, LC_OPC_ATTN, LC_OPC_LOSS, LC_OPC_ELEM, LC_OPC_OPTIM, LC_OPC_N } lc_op_class;

// The table's entries in one list: X(entry, class) for each entry that runs work (timed on a
// synchronous backend, named in --profile); U(entry) for memory, transfers, streams and
// sizes. From it: the entries' numbers (LC_BEOP_*), names and classes, and the check that a
// backend filled every entry (lc_backend_ops_check).
#define LC_BE_OPS(X, U)                                                                                              \
  U(alloc) U(free) U(host_ptr) U(read) U(write) U(record) U(wait_event) U(sync) U(flash_kv_bytes)                   \
  X(copy, ELEM) X(zero, ELEM) X(bf16_pack, ELEM) X(bf16_unpack, ELEM) X(bf16_round, ELEM) X(add, ELEM)               \
  X(scale, ELEM) X(sumsq_acc, OPTIM) X(adamw, OPTIM) X(rmsnorm_fwd, ELEM) X(rmsnorm_bwd, ELEM) X(matmul_fwd, GEMM)   \
  X(matmul_bwd, GEMM) X(xent_tile, LOSS) X(xent_stats_init, LOSS) X(xent_slice_merge, LOSS)                          \
  X(xent_slice_total, LOSS) X(xent_slice_dlogits, LOSS) X(rope, ELEM) X(swiglu_fwd, ELEM) X(swiglu_bwd, ELEM)        \
  X(bias_fwd, ELEM) X(bias_bwd, ELEM) X(embedding_fwd, ELEM) X(embedding_bwd, ELEM) X(flash_fwd, ATTN)               \
  X(flash_kv_pack, ATTN) X(copy2d, ELEM) X(add2d, ELEM) X(fill, ELEM) X(flash_bwd, ATTN) X(attn_merge, ATTN)         \
  X(attn_delta, ATTN) X(dropout, ELEM)
#define LC_BE_OP_ENUM_(name, cls) LC_BEOP_##name,
#define LC_BE_OP_SKIP_(name)
typedef enum { LC_BE_OPS(LC_BE_OP_ENUM_, LC_BE_OP_SKIP_) LC_BEOP_N } lc_be_op; // the timed entries
#define LC_BE_NOPS LC_BEOP_N

struct lc_backend {
  const lc_backend_ops *ops;
  char name[32];       // "cpu", "private", "cuda:0"
  char about[192];     // one line on the device (lc_backend_describe); empty: the default line
  int host_memory;     // its buffers are ordinary host memory (cpu)
  lc_arena *arena;     // the device's memory, counted per category (cpu: the run's arena)
  lc_arena *host;      // host memory the backend hands out for staging and offload (cpu:
                       // the same arena: device and host are one memory)
  size_t sync[LC_SYNC_N][2]; // named reads [k][0] and writes [k][1]
  size_t sync_bytes[LC_SYNC_N];
  // Its ops have finished when they return (cpu, private): each entry is timed, two clock
  // reads, into op_ns by class. A device that queues work (cuda) is not timed this way.
  int synchronous;
  _Atomic uint64_t op_ns[LC_OPC_N];
  _Atomic uint64_t op_ns_by[LC_BE_NOPS], op_calls[LC_BE_NOPS]; // per entry (lc_backend_op_totals)
  void *impl;
};

// ---- devices
// "cpu" (every build), "private" (tests), "cuda" / "cuda:N" (builds with the CUDA backend:
// LC_EINVAL with one line where this machine has no such device). LC_EINVAL with one line
// naming the devices this build has.
lc_status lc_device_check(const char *spec);
// Makes the backend for `spec` over `arena` (cpu: the run's memory; private: counts its
// device memory in a second arena the backend owns, with the same cap).
lc_status lc_backend_open(const char *spec, lc_arena *arena, lc_backend **out);
void lc_backend_close(lc_backend *be);
// LC_EINVAL naming the first entry of the table a backend left NULL (lc_backend_open checks
// every backend it opens).
lc_status lc_backend_ops_check(const lc_backend_ops *ops, const char *name);
// A CPU backend in storage the caller holds (no allocation; close it with lc_backend_close).
void lc_backend_cpu_init(lc_backend *be, lc_arena *arena);
// One line on the device and its memory, for the settings table ("cpu: host memory, 23.4
// GiB; the device's bytes are the host's").
const char *lc_backend_describe(const lc_backend *be, char *buf, size_t n);
// The names of the devices this build can open, for messages ("cpu, private").
const char *lc_device_names(void);

// Seconds spent inside the table's entries so far, by class (0 on a backend that is not
// synchronous); a step's share is the difference across it.
void lc_backend_op_seconds(const lc_backend *be, double out[LC_OPC_N]);
const char *lc_op_class_name(lc_op_class c);
// The same per entry: how many entries are timed, each one's name and class, and the
// seconds and calls so far (arrays of lc_backend_op_count()).
int lc_backend_op_count(void);
const char *lc_backend_op_name(int op);
lc_op_class lc_backend_op_class(int op);
void lc_backend_op_totals(const lc_backend *be, double *seconds, uint64_t *calls);

// ---- memory
// A buffer of n elements of dt in category cat (zero: zeroed). LC_ENOMEM with the arena's
// one line (naming `what`) when the device's cap or memory refuses it; *b is then empty.
lc_status lc_buf_alloc(lc_backend *be, lc_mem_cat cat, lc_dtype dt, size_t n, int zero, const char *what, lc_buf *b);
// Frees an allocation (the empty buffer is fine) and empties *b.
void lc_buf_free(lc_buf *b);
// Transitional (issue 32): the host address of b where its backend's memory is host
// memory, else NULL. Code not yet behind the backend uses it; a NULL answer is that code
// refusing the device (lc_buf_host_or_fail).
void *lc_buf_host(lc_buf b);
// The same, or NULL with LC_EINVAL naming `what` as not yet running on the device.
void *lc_buf_host_or_fail(lc_buf b, const char *what);

// ---- named reads and writes (blocking; counted)
lc_status lc_buf_read(lc_buf src, void *dst, lc_sync_kind why);
lc_status lc_buf_write(lc_buf dst, const void *src, lc_sync_kind why);
// The counts of one kind, and every kind's reads + writes.
size_t lc_backend_syncs(const lc_backend *be, lc_sync_kind k);
void lc_backend_sync_reset(lc_backend *be);

// ---- ops through the table (the checks, then the backend's entry)
lc_status lc_be_copy(lc_buf dst, lc_buf src, lc_stream s);
lc_status lc_be_zero(lc_buf dst);
lc_status lc_be_bf16_pack(lc_buf dst16, lc_buf src32);
lc_status lc_be_bf16_unpack(lc_buf dst32, lc_buf src16);
lc_status lc_be_bf16_round(lc_buf x32);
// y (fp32) += x (fp32, or bf16: its exact widened values).
lc_status lc_be_add(lc_buf y, lc_buf x);
lc_status lc_be_scale(lc_buf x, float s);
lc_status lc_be_sumsq_acc(lc_buf acc, lc_buf x);
lc_status lc_be_adamw(lc_buf p, lc_buf g, lc_buf m, lc_buf v, const lc_adamw_args *a);
// RMSNorm of x (fp32, or bf16: the bits of its widened fp32 copy) into out (fp32 or bf16),
// and its backward reading the same x.
lc_status lc_be_rmsnorm_fwd(lc_buf out, lc_buf rstd, lc_buf x, lc_buf w, int T, int C, float eps);
lc_status lc_be_rmsnorm_bwd(lc_buf dinp, lc_buf dw, lc_buf dout, lc_buf inp, lc_buf w, lc_buf rstd, int T, int C, int set);
lc_status lc_be_matmul_fwd(lc_buf out, lc_buf inp, lc_buf w, int T, int K, int N, int bf16, lc_buf scratch);
// out += inp W^T (a bf16 output: widened, added to, rounded again).
lc_status lc_be_matmul_fwd_acc(lc_buf out, lc_buf inp, lc_buf w, int T, int K, int N, int bf16, lc_buf scratch);
lc_status lc_be_matmul_bwd(lc_buf dinp, lc_buf dw, lc_buf dout, lc_buf inp, lc_buf w, int T, int K, int N, int accumulate,
                           int bf16, lc_buf scratch);
lc_status lc_be_xent_tile(lc_buf logits, lc_buf targets, int T, int V, float scale, lc_buf acc, int count_wrong);
lc_status lc_be_xent_stats_init(lc_buf stats, int T);
lc_status lc_be_xent_slice_merge(lc_buf stats, int T, lc_buf logits, lc_buf targets, int t0, int m, int v0, int vs);
lc_status lc_be_xent_slice_total(lc_buf stats, lc_buf targets, int T, lc_buf acc, int count_wrong);
lc_status lc_be_xent_slice_dlogits(lc_buf logits, lc_buf stats, int T, lc_buf targets, int t0, int m, int v0, int vs,
                                   float scale);
lc_status lc_be_rope(lc_buf x, lc_buf cos_t, lc_buf sin_t, int T, int H, int D, int bwd);
lc_status lc_be_swiglu_fwd(lc_buf h, lc_buf g, lc_buf u);
lc_status lc_be_swiglu_bwd(lc_buf dg, lc_buf du, lc_buf dh, lc_buf g, lc_buf u);
lc_status lc_be_bias_fwd(lc_buf y, lc_buf b, int T, int N);
lc_status lc_be_bias_bwd(lc_buf db, lc_buf dy, int T, int N);
lc_status lc_be_embedding_fwd(lc_buf out, lc_buf tokens, lc_buf wte, int T, int C, int r0);
lc_status lc_be_embedding_bwd(lc_buf dwte, lc_buf dout, lc_buf tokens, int T, int C, int r0);
lc_status lc_be_flash_fwd(lc_buf out, lc_buf lse, lc_buf q, lc_buf k, lc_buf v, lc_buf lo, const lc_attn_geom *s);
lc_status lc_be_flash_bwd(lc_buf dq, lc_buf dk, lc_buf dv, lc_buf dout, lc_buf q, lc_buf k, lc_buf v, lc_buf lse,
                          lc_buf delta, lc_buf lo, const lc_attn_geom *s);
// The same with k/v packed ahead (pack: lc_be_flash_kv_pack's, or empty).
lc_status lc_be_flash_fwd_packed(lc_buf out, lc_buf lse, lc_buf q, lc_buf k, lc_buf v, lc_buf lo, lc_buf pack,
                                 const lc_attn_geom *s);
lc_status lc_be_flash_bwd_packed(lc_buf dq, lc_buf dk, lc_buf dv, lc_buf dout, lc_buf q, lc_buf k, lc_buf v, lc_buf lse,
                                 lc_buf delta, lc_buf lo, lc_buf pack, const lc_attn_geom *s);
lc_status lc_be_flash_kv_pack(lc_buf pack, lc_buf k, lc_buf v, const lc_attn_geom *s, int bwd);
// The bytes lc_be_flash_kv_pack fills on be for shape s (0: be's kernels read k/v in place).
size_t lc_be_flash_kv_bytes(lc_backend *be, const lc_attn_geom *s, int bwd);
lc_status lc_be_copy2d(lc_buf dst, size_t ld_dst, lc_buf src, size_t ld_src, size_t rows, size_t n);
lc_status lc_be_add2d(lc_buf dst, size_t ld_dst, lc_buf src, size_t ld_src, size_t rows, size_t n);
lc_status lc_be_fill(lc_buf x, float v);
lc_status lc_be_attn_merge(lc_buf out_a, lc_buf lse_a, lc_buf out_b, lc_buf lse_b, int Tq, int Hq, int D);
lc_status lc_be_attn_delta(lc_buf delta, lc_buf dout, lc_buf out, int Tq, int Hq, int D);
lc_status lc_be_dropout(lc_buf dst, lc_buf src, int rows, int cols, lc_buf gidx, uint64_t key, uint32_t thr, int accumulate);
static inline void lc_be_record(lc_backend *be, lc_stream s, lc_be_event *ev) { be->ops->record(be, s, ev); }
static inline void lc_be_wait_event(lc_backend *be, lc_stream s, lc_be_event ev) { be->ops->wait_event(be, s, ev); }
static inline lc_status lc_be_sync(lc_backend *be, lc_stream s) { return be->ops->sync(be, s); }

#endif
