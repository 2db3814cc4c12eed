// The CUDA backend (cuda_backend.h). A handle is the allocation's device address; views add
// their byte offset. Every op is queued on a stream and returns at once; errors of queued
// work surface at the next named read, write or stream sync (CUDA's own rule), and the
// first one is kept: every later read or sync fails with its line.
#include "backend/cuda/cuda_backend.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_kern.h"
#include "backend/suballoc.h"

#define CHUNK_BYTES ((size_t)256 << 20) // cudaMalloc granularity of the sub-allocator
#define ALIGN 256
#define LT_WS_BYTES ((size_t)32 << 20) // cuBLASLt's workspace per GEMM (scratch, per call)
#define N_EVENTS 64

typedef struct {
  int dev;
  cudaStream_t st[LC_STREAM_N];
  cudaEvent_t ev[N_EVENTS];
  int next_ev;
  void *lt;               // cublasLtHandle_t
  lc_suballoc sa;
  lc_arena dev_arena;     // the device's bytes by category (caps, peaks)
  const char *what_now;   // the buffer being allocated (for an out-of-memory line)
  int flash_ref;          // LONGCTX_CUDA_FLASH=ref at open: the simple reference kernels (tests, debugging)
  int err;                // the first CUDA error of queued work (0: none)
  char err_what[64];
} cuda_be;

static cuda_be *C(lc_backend *be) { return be->impl; }
static void *at(lc_buf b) { return b.be ? (void *)(uintptr_t)(b.h + b.off) : NULL; }
static cudaStream_t S(lc_backend *be, lc_stream s) { return C(be)->st[s == LC_STREAM_COPY ? LC_STREAM_COPY : LC_STREAM_COMPUTE]; }
static cudaStream_t CS(lc_backend *be) { return C(be)->st[LC_STREAM_COMPUTE]; }

// A launch's (or an async call's) result: the first failure is kept for the next sync.
static void ck(lc_backend *be, int err, const char *what) {
  cuda_be *c = C(be);
  if (err && !c->err) {
    c->err = err;
    snprintf(c->err_what, sizeof c->err_what, "%s", what);
  }
}
static lc_status sticky(lc_backend *be) {
  cuda_be *c = C(be);
  if (!c->err) return LC_OK;
  return lc_fail(LC_EINVAL, "CUDA error in %s on cuda:%d: %s", c->err_what, c->dev, cudaGetErrorString((cudaError_t)c->err));
}

static int parse_index(const char *spec, int *idx) {
  *idx = 0;
  if (!strcmp(spec, "cuda")) return 1;
  if (strncmp(spec, "cuda:", 5)) return 0;
  char *end = NULL;
  const long v = strtol(spec + 5, &end, 10);
  if (end == spec + 5 || *end || v < 0 || v > 1024) return 0;
  *idx = (int)v;
  return 1;
}

lc_status lc_backend_cuda_probe(const char *spec) {
  int idx = 0, n = 0;
  if (!parse_index(spec, &idx))
    return lc_fail(LC_EINVAL, "--device %s: write cuda or cuda:N (N a device index)", spec);
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice)
    return lc_fail(LC_EINVAL, "--device %s: no NVIDIA GPU or driver on this machine (CUDA: %s); use --device cpu", spec,
                   cudaGetErrorString(e));
  if (e != cudaSuccess)
    return lc_fail(LC_EINVAL, "--device %s: no usable CUDA device here (CUDA: %s); use --device cpu", spec, cudaGetErrorString(e));
  if (n == 0) return lc_fail(LC_EINVAL, "--device %s: this machine has no CUDA device; use --device cpu", spec);
  if (idx >= n)
    return lc_fail(LC_EINVAL, "--device %s: this machine has %d CUDA device%s (cuda:0 to cuda:%d)", spec, n, n == 1 ? "" : "s",
                   n - 1);
  return LC_OK;
}

// ---- memory: chunks from cudaMalloc, placed by the sub-allocator, counted in dev_arena
static lc_status chunk_get(void *ctx, size_t min, size_t pref, uint64_t *addr, size_t *got) {
  cuda_be *c = ctx;
  void *p = NULL;
  size_t bytes = pref;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation && pref > min) { // a whole chunk does not fit: just the request
    cudaGetLastError();
    e = cudaMalloc(&p, bytes = min);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    return lc_fail(LC_ENOMEM,
                   "out of device memory on cuda:%d: %s needs %.1f MiB, the device has %.2f of %.1f GiB free; use a "
                   "shorter --seq, more ranks (--cp, --hp), or --checkpoint full",
                   c->dev, c->what_now ? c->what_now : "a buffer", (double)min / 1048576.0, (double)fr / 1073741824.0,
                   (double)tot / 1073741824.0);
  }
  *addr = (uint64_t)(uintptr_t)p;
  *got = bytes;
  return LC_OK;
}
static void chunk_put(void *ctx, uint64_t addr, size_t bytes) { cudaFree((void *)(uintptr_t)addr); }

static lc_status cu_alloc(lc_backend *be, lc_mem_cat cat, size_t bytes, int zero, const char *what, uint64_t *h) {
  cuda_be *c = C(be);
  LC_TRY(lc_arena_charge(&c->dev_arena, cat, bytes, what));
  c->what_now = what;
  lc_status st = lc_suballoc_get(&c->sa, bytes, h);
  if (st != LC_OK) {
    lc_arena_uncharge(&c->dev_arena, cat, bytes);
    return st;
  }
  if (zero && bytes) ck(be, cudaMemsetAsync((void *)(uintptr_t)*h, 0, bytes, CS(be)), "a zeroed allocation");
  return LC_OK;
}
// Freed bytes are reused by later work on the compute stream, which runs after the work
// queued before the free: the same order a caching allocator relies on. Work on the copy
// stream that reads a buffer is waited for (an event) by its owner before it frees it.
static void cu_free(lc_backend *be, lc_mem_cat cat, size_t bytes, uint64_t h) {
  cuda_be *c = C(be);
  if (lc_suballoc_put(&c->sa, h) != LC_OK) abort(); // not an allocation of this backend
  lc_arena_uncharge(&c->dev_arena, cat, bytes);
}
static void *cu_host_ptr(lc_backend *be, lc_buf b) { return NULL; }

// Scratch of one call (category scratch, freed when the call's work is queued).
static lc_status scratch(lc_backend *be, size_t bytes, const char *what, lc_buf *b) {
  return lc_buf_alloc(be, LC_MEM_SCRATCH, LC_DT_U8, bytes, 0, what, b);
}

// ---- transfers
static lc_status cu_read(lc_backend *be, lc_buf src, void *dst) {
  ck(be, cudaMemcpyAsync(dst, at(src), lc_buf_bytes(src), cudaMemcpyDeviceToHost, CS(be)), "a read");
  ck(be, cudaStreamSynchronize(CS(be)), "a read");
  return sticky(be);
}
static lc_status cu_write(lc_backend *be, lc_buf dst, const void *src) {
  ck(be, cudaMemcpyAsync(at(dst), src, lc_buf_bytes(dst), cudaMemcpyHostToDevice, CS(be)), "a write");
  ck(be, cudaStreamSynchronize(CS(be)), "a write"); // the host may reuse src when this returns
  return sticky(be);
}
static void cu_copy(lc_backend *be, lc_buf dst, lc_buf src, lc_stream s) {
  if (lc_buf_bytes(dst)) ck(be, cudaMemcpyAsync(at(dst), at(src), lc_buf_bytes(dst), cudaMemcpyDeviceToDevice, S(be, s)), "copy");
}
static void cu_zero(lc_backend *be, lc_buf dst) {
  if (lc_buf_bytes(dst)) ck(be, cudaMemsetAsync(at(dst), 0, lc_buf_bytes(dst), CS(be)), "zero");
}

// ---- execution: events from a ring of N_EVENTS (an event is waited for soon after it is
// recorded; a record reuses the oldest)
static void cu_record(lc_backend *be, lc_stream s, lc_be_event *ev) {
  cuda_be *c = C(be);
  const int i = c->next_ev;
  c->next_ev = (i + 1) % N_EVENTS;
  ck(be, cudaEventRecord(c->ev[i], S(be, s)), "an event");
  ev->h = (uint64_t)i + 1;
}
static void cu_wait_event(lc_backend *be, lc_stream s, lc_be_event ev) {
  if (ev.h) ck(be, cudaStreamWaitEvent(S(be, s), C(be)->ev[ev.h - 1], 0), "an event wait");
}
static lc_status cu_sync(lc_backend *be, lc_stream s) {
  ck(be, cudaStreamSynchronize(S(be, s)), "a stream sync");
  return sticky(be);
}

// ---- element-wise ops
static void cu_pack(lc_backend *be, lc_buf d, lc_buf s) { ck(be, lcc_bf16_pack(at(d), at(s), d.n, CS(be)), "bf16_pack"); }
static void cu_unpack(lc_backend *be, lc_buf d, lc_buf s) { ck(be, lcc_bf16_unpack(at(d), at(s), d.n, CS(be)), "bf16_unpack"); }
static void cu_round(lc_backend *be, lc_buf x) { ck(be, lcc_bf16_round(at(x), x.n, CS(be)), "bf16_round"); }
static void cu_add(lc_backend *be, lc_buf y, lc_buf x) {
  ck(be, lcc_add(at(y), at(x), x.dt == LC_DT_BF16, y.n, CS(be)), "add");
}
static void cu_scale(lc_backend *be, lc_buf x, float s) { ck(be, lcc_scale(at(x), x.n, s, CS(be)), "scale"); }
static void cu_sumsq_acc(lc_backend *be, lc_buf acc, lc_buf x) {
  lc_buf parts;
  if (scratch(be, LCC_SUMSQ_PARTS * sizeof(double), "the sum of squares' partial sums", &parts) != LC_OK) {
    ck(be, cudaErrorMemoryAllocation, "sumsq");
    return;
  }
  ck(be, lcc_sumsq_acc(at(acc), at(x), x.n, at(parts), CS(be)), "sumsq");
  lc_buf_free(&parts);
}
static void cu_adamw(lc_backend *be, lc_buf p, lc_buf g, lc_buf m, lc_buf v, const lc_adamw_args *a) {
  ck(be, lcc_adamw(at(p), at(g), at(m), at(v), p.n, a->wd, a->beta1, a->beta2, a->eps, a->lr, a->step_size,
                   a->inv_sqrt_bc2, CS(be)),
     "adamw");
}
static void cu_rmsnorm_fwd(lc_backend *be, lc_buf out, lc_buf rstd, lc_buf x, lc_buf w, int T, int C, float eps) {
  ck(be, lcc_rmsnorm_fwd(at(out), out.dt == LC_DT_BF16, at(rstd), at(x), x.dt == LC_DT_BF16, at(w), T, C, eps, CS(be)), "rmsnorm_fwd");
}
static void cu_rmsnorm_bwd(lc_backend *be, lc_buf dinp, lc_buf dw, lc_buf dout, lc_buf inp, lc_buf w, lc_buf rstd, int T,
                           int C, int set) {
  lc_buf parts = {0};
  const size_t pb = dw.be ? lcc_rmsnorm_bwd_parts_bytes(T, C) : 0;
  if (pb && scratch(be, pb, "the RMSNorm weight gradient's partial sums", &parts) != LC_OK) {
    ck(be, cudaErrorMemoryAllocation, "rmsnorm_bwd");
    return;
  }
  ck(be, lcc_rmsnorm_bwd(at(dinp), at(dw), at(dout), at(inp), inp.dt == LC_DT_BF16, at(w), at(rstd), T, C, set, at(parts),
                         CS(be)),
     "rmsnorm_bwd");
  lc_buf_free(&parts);
}

// ---- GEMMs: operands brought to the product's type in per-call scratch (exact: a bf16
// pass's fp32 operands hold bf16 values); cuBLASLt's workspace per call
typedef struct {
  lc_buf held[4];
  int n;
} held_bufs;
static void release(held_bufs *h) {
  for (int i = 0; i < h->n; i++) lc_buf_free(&h->held[i]);
  h->n = 0;
}
// x (rows x cols, dense) as the GEMM's operand type: in place when it already is one.
static lc_status operand(lc_backend *be, lc_buf x, size_t rows, size_t cols, int want16, held_bufs *h, const void **p) {
  const int is16 = x.dt == LC_DT_BF16;
  *p = at(x);
  if (is16 == want16) return LC_OK;
  lc_buf t;
  LC_TRY(scratch(be, rows * cols * (want16 ? 2 : 4), "a GEMM operand's copy", &t));
  h->held[h->n++] = t;
  if (want16) ck(be, lcc_bf16_pack(at(t), at(x), rows * cols, CS(be)), "GEMM operand pack");
  else ck(be, lcc_bf16_unpack(at(t), at(x), rows * cols, CS(be)), "GEMM operand widening");
  *p = at(t);
  return LC_OK;
}
static lc_status gemm(lc_backend *be, const lcc_gemm_args *g) {
  lc_buf ws;
  LC_TRY(scratch(be, LT_WS_BYTES, "cuBLASLt's workspace", &ws));
  const lc_status st = lcc_gemm(C(be)->lt, g, at(ws), LT_WS_BYTES, CS(be));
  lc_buf_free(&ws);
  return st;
}
static lc_status cu_matmul_fwd(lc_backend *be, lc_buf out, lc_buf inp, lc_buf w, int T, int K, int N, int acc,
                               int bf16, lc_buf scratch_in) {
  if (T <= 0 || N <= 0) return LC_OK;
  if (lc_dtype_is_quant(w.dt))
    return lc_fail(LC_EINVAL, "a frozen base in %s blocks (--base-dtype gguf) runs on the CPU backend only: use "
                   "--base-dtype bf16 on a GPU", lc_dtype_name(w.dt));
  held_bufs h = {.n = 0};
  const void *pw, *pi;
  lc_status st = operand(be, w, (size_t)N, (size_t)K, bf16, &h, &pw);
  if (st == LC_OK) st = operand(be, inp, (size_t)T, (size_t)K, bf16, &h, &pi);
  // a bf16 output of an fp32 product: into fp32 scratch, then rounded
  const int round_out = out.dt == LC_DT_BF16 && !bf16;
  lc_buf o32 = {0};
  if (st == LC_OK && round_out) st = scratch(be, (size_t)T * N * 4, "a GEMM's fp32 output", &o32);
  if (st == LC_OK && round_out && acc) // accumulating: the product is added to the output's values
    ck(be, lcc_bf16_unpack(at(o32), at(out), (size_t)T * N, CS(be)), "GEMM output widening");
  if (st == LC_OK) {
    lcc_gemm_args g = {.m = N, .n = T, .k = K, .a = pw, .b = pi, .c = round_out ? at(o32) : at(out), .lda = (size_t)K,
                       .ldb = (size_t)K, .ldc = (size_t)N, .ta = 1, .tb = 0, .bf16 = bf16,
                       .c16 = out.dt == LC_DT_BF16 && !round_out, .beta = acc ? 1.0f : 0.0f};
    st = gemm(be, &g);
    if (st == LC_OK && round_out) ck(be, lcc_bf16_pack(at(out), at(o32), (size_t)T * N, CS(be)), "GEMM output rounding");
  }
  lc_buf_free(&o32);
  release(&h);
  return st;
}
static lc_status cu_matmul_bwd(lc_backend *be, lc_buf dinp, lc_buf dw, lc_buf dout, lc_buf inp, lc_buf w, int T, int K,
                               int N, int accumulate, int bf16, lc_buf scratch_in) {
  if (T <= 0 || K <= 0) return LC_OK;
  if (lc_dtype_is_quant(w.dt))
    return lc_fail(LC_EINVAL, "a frozen base in %s blocks (--base-dtype gguf) runs on the CPU backend only: use "
                   "--base-dtype bf16 on a GPU", lc_dtype_name(w.dt));
  held_bufs h = {.n = 0};
  const void *pd;
  lc_status st = operand(be, dout, (size_t)T, (size_t)N, bf16, &h, &pd);
  if (st == LC_OK && dinp.be && N > 0) {
    const void *pw;
    st = operand(be, w, (size_t)N, (size_t)K, bf16, &h, &pw);
    lcc_gemm_args g = {.m = K, .n = T, .k = N, .a = pw, .b = pd, .c = at(dinp), .lda = (size_t)K, .ldb = (size_t)N,
                       .ldc = (size_t)K, .ta = 0, .tb = 0, .bf16 = bf16, .c16 = 0, .beta = accumulate ? 1.0f : 0.0f};
    if (st == LC_OK) st = gemm(be, &g);
  } else if (st == LC_OK && dinp.be && !accumulate) {
    cu_zero(be, dinp); // dinp = dout W with N = 0
  }
  if (st == LC_OK && dw.be && N > 0) {
    const void *pi;
    st = operand(be, inp, (size_t)T, (size_t)K, bf16, &h, &pi);
    lcc_gemm_args g = {.m = K, .n = N, .k = T, .a = pi, .b = pd, .c = at(dw), .lda = (size_t)K, .ldb = (size_t)N,
                       .ldc = (size_t)K, .ta = 0, .tb = 1, .bf16 = bf16, .c16 = 0, .beta = 1.0f};
    if (st == LC_OK) st = gemm(be, &g);
  }
  release(&h);
  return st;
}

// ---- the loss tile
static void cu_xent_tile(lc_backend *be, lc_buf logits, lc_buf targets, int T, int V, float scale, lc_buf acc,
                         int count_wrong) {
  lc_buf rows = {0};
  const size_t rb = lcc_xent_tile_scratch_bytes(T);
  if (rb && scratch(be, rb, "the loss tile's per-row results", &rows) != LC_OK) {
    ck(be, cudaErrorMemoryAllocation, "xent_tile");
    return;
  }
  ck(be, lcc_xent_tile(at(logits), at(targets), T, V, scale, at(acc), count_wrong, at(rows), CS(be)), "xent_tile");
  lc_buf_free(&rows);
}
static void cu_stats_init(lc_backend *be, lc_buf stats, int T) { ck(be, lcc_xent_stats_init(at(stats), T, CS(be)), "xent_stats_init"); }
static void cu_slice_merge(lc_backend *be, lc_buf stats, int T, lc_buf logits, lc_buf targets, int t0, int m, int v0,
                           int vs) {
  ck(be, lcc_xent_slice_merge(at(stats), T, at(logits), at(targets), t0, m, v0, vs, CS(be)), "xent_slice_merge");
}
static void cu_slice_total(lc_backend *be, lc_buf stats, lc_buf targets, int T, lc_buf acc, int count_wrong) {
  ck(be, lcc_xent_slice_total(at(stats), at(targets), T, at(acc), count_wrong, CS(be)), "xent_slice_total");
}
static void cu_slice_dlogits(lc_backend *be, lc_buf logits, lc_buf stats, int T, lc_buf targets, int t0, int m, int v0,
                             int vs, float scale) {
  ck(be, lcc_xent_slice_dlogits(at(logits), at(stats), T, at(targets), t0, m, v0, vs, scale, CS(be)), "xent_slice_dlogits");
}

// ---- the layer's element-wise ops
static void cu_rope(lc_backend *be, lc_buf x, lc_buf c, lc_buf s, int T, int H, int D, int bwd) {
  ck(be, lcc_rope(at(x), at(c), at(s), T, H, D, bwd, CS(be)), "rope");
}
static void cu_swiglu_fwd(lc_backend *be, lc_buf h, lc_buf g, lc_buf u) {
  ck(be, lcc_swiglu_fwd(at(h), at(g), at(u), h.n, h.dt == LC_DT_BF16, CS(be)), "swiglu_fwd");
}
static void cu_swiglu_bwd(lc_backend *be, lc_buf dg, lc_buf du, lc_buf dh, lc_buf g, lc_buf u) {
  ck(be, lcc_swiglu_bwd(at(dg), at(du), at(dh), at(g), at(u), dg.n, dg.dt == LC_DT_BF16, CS(be)), "swiglu_bwd");
}
static void cu_bias_fwd(lc_backend *be, lc_buf y, lc_buf b, int T, int N) { ck(be, lcc_bias_fwd(at(y), at(b), T, N, CS(be)), "bias_fwd"); }
static void cu_bias_bwd(lc_backend *be, lc_buf db, lc_buf dy, int T, int N) {
  ck(be, lcc_bias_bwd(at(db), at(dy), dy.dt == LC_DT_BF16, T, N, CS(be)), "bias_bwd");
}
static void cu_embedding_fwd(lc_backend *be, lc_buf out, lc_buf tokens, lc_buf wte, int T, int C, int r0) {
  ck(be, lcc_embedding_fwd(at(out), at(tokens), at(wte), wte.dt == LC_DT_BF16, T, C, r0, r0 + (int)(wte.n / (size_t)C), CS(be)),
     "embedding_fwd");
}
static void cu_embedding_bwd(lc_backend *be, lc_buf dwte, lc_buf dout, lc_buf tokens, int T, int C, int r0) {
  ck(be, lcc_embedding_bwd(at(dwte), at(dout), at(tokens), T, C, r0, r0 + (int)(dwte.n / (size_t)C), CS(be)),
     "embedding_bwd");
}

// ---- flash attention: the shape with device pointers and the buffers' dtypes
static lcc_attn attn_of(const lc_attn_geom *s, lc_buf lo, lc_buf q, lc_buf k, lc_buf out) {
  return (lcc_attn){.Tq = s->Tq, .Tk = s->Tk, .Hq = s->Hq, .Hkv = s->Hkv, .D = s->D, .q_start = s->q_start,
                    .k_start = s->k_start, .causal = s->causal, .scale = s->scale, .lo = at(lo), .bf16 = s->bf16,
                    .q16 = q.dt == LC_DT_BF16, .kv16 = k.dt == LC_DT_BF16, .out16 = out.be && out.dt == LC_DT_BF16};
}
static lc_status cu_flash_fwd(lc_backend *be, lc_buf out, lc_buf lse, lc_buf q, lc_buf k, lc_buf v, lc_buf lo,
                              lc_buf pack, const lc_attn_geom *s) {
  const lcc_attn a = attn_of(s, lo, q, k, out);
  lc_buf ws = {0};
  const size_t wb = C(be)->flash_ref ? 0 : lcc_flash_workspace_bytes(&a, 0);
  if (wb) LC_TRY(scratch(be, wb, "the attention kernel's workspace", &ws));
  if (C(be)->flash_ref) ck(be, lcc_flash_fwd_ref(at(out), at(lse), at(q), at(k), at(v), &a, CS(be)), "flash_fwd (reference)");
  else ck(be, lcc_flash_fwd(at(out), at(lse), at(q), at(k), at(v), &a, at(ws), CS(be)), "flash_fwd");
  lc_buf_free(&ws);
  return LC_OK;
}
static lc_status cu_flash_bwd(lc_backend *be, lc_buf dq, lc_buf dk, lc_buf dv, lc_buf dout, lc_buf q, lc_buf k, lc_buf v,
                              lc_buf lse, lc_buf delta, lc_buf lo, lc_buf pack, const lc_attn_geom *s) {
  const lcc_attn a = attn_of(s, lo, q, k, (lc_buf){0});
  lc_buf ws = {0};
  const size_t wb = C(be)->flash_ref ? 0 : lcc_flash_workspace_bytes(&a, 1);
  if (wb) LC_TRY(scratch(be, wb, "the attention kernel's workspace", &ws));
  if (C(be)->flash_ref)
    ck(be, lcc_flash_bwd_ref(at(dq), at(dk), at(dv), at(dout), at(q), at(k), at(v), at(lse), at(delta), &a, CS(be)),
       "flash_bwd (reference)");
  else
    ck(be, lcc_flash_bwd(at(dq), at(dk), at(dv), at(dout), at(q), at(k), at(v), at(lse), at(delta), &a, at(ws), CS(be)),
       "flash_bwd");
  lc_buf_free(&ws);
  return LC_OK;
}
// The kernels read k and v where they lie: nothing to pack (flash_kv_bytes is 0).
static size_t cu_kv_bytes(lc_backend *be, const lc_attn_geom *s, int bwd) { return 0; }
static void cu_kv_pack(lc_backend *be, lc_buf pack, lc_buf k, lc_buf v, const lc_attn_geom *s, int bwd) {}
static void cu_copy2d(lc_backend *be, lc_buf dst, size_t ld_dst, lc_buf src, size_t ld_src, size_t rows, size_t n) {
  const size_t es = lc_dtype_size(dst.dt);
  if (rows && n)
    ck(be, cudaMemcpy2DAsync(at(dst), ld_dst * es, at(src), ld_src * es, n * es, rows, cudaMemcpyDeviceToDevice, CS(be)),
       "copy2d");
}
static void cu_add2d(lc_backend *be, lc_buf dst, size_t ld_dst, lc_buf src, size_t ld_src, size_t rows, size_t n) {
  ck(be, lcc_add2d(at(dst), ld_dst, at(src), ld_src, rows, n, CS(be)), "add2d");
}
static void cu_fill(lc_backend *be, lc_buf x, float v) { ck(be, lcc_fill(at(x), x.n, v, CS(be)), "fill"); }
static void cu_attn_merge(lc_backend *be, lc_buf oa, lc_buf la, lc_buf ob, lc_buf lb, int Tq, int Hq, int D) {
  ck(be, lcc_attn_merge(at(oa), at(la), at(ob), at(lb), Tq, Hq, D, CS(be)), "attn_merge");
}
static void cu_attn_delta(lc_backend *be, lc_buf delta, lc_buf dout, lc_buf out, int Tq, int Hq, int D) {
  ck(be, lcc_attn_delta(at(delta), at(dout), at(out), dout.dt == LC_DT_BF16, Tq, Hq, D, CS(be)), "attn_delta");
}

static void cu_dropout(lc_backend *be, lc_buf dst, lc_buf src, int rows, int cols, lc_buf gidx, uint64_t key,
                       uint32_t thr, int accumulate) {
  ck(be, lcc_dropout(at(dst), at(src), dst.dt == LC_DT_BF16, rows, cols, at(gidx), key, thr, accumulate, CS(be)),
     "dropout");
}

static void cu_destroy(lc_backend *be) {
  cuda_be *c = C(be);
  cudaSetDevice(c->dev);
  for (int s = 0; s < LC_STREAM_N; s++)
    if (c->st[s]) cudaStreamSynchronize(c->st[s]);
  lcc_lt_destroy(c->lt);
  for (int i = 0; i < N_EVENTS; i++)
    if (c->ev[i]) cudaEventDestroy(c->ev[i]);
  for (int s = 0; s < LC_STREAM_N; s++)
    if (c->st[s]) cudaStreamDestroy(c->st[s]);
  lc_suballoc_destroy(&c->sa);
  free(c);
  free(be);
}

static const lc_backend_ops cuda_ops = {
    .alloc = cu_alloc, .free = cu_free, .host_ptr = cu_host_ptr, .read = cu_read, .write = cu_write, .copy = cu_copy,
    .zero = cu_zero, .record = cu_record, .wait_event = cu_wait_event, .sync = cu_sync, .bf16_pack = cu_pack,
    .bf16_unpack = cu_unpack, .bf16_round = cu_round, .add = cu_add, .scale = cu_scale, .sumsq_acc = cu_sumsq_acc,
    .adamw = cu_adamw, .rmsnorm_fwd = cu_rmsnorm_fwd, .rmsnorm_bwd = cu_rmsnorm_bwd, .matmul_fwd = cu_matmul_fwd,
    .matmul_bwd = cu_matmul_bwd, .xent_tile = cu_xent_tile, .xent_stats_init = cu_stats_init,
    .xent_slice_merge = cu_slice_merge, .xent_slice_total = cu_slice_total, .xent_slice_dlogits = cu_slice_dlogits,
    .rope = cu_rope, .swiglu_fwd = cu_swiglu_fwd, .swiglu_bwd = cu_swiglu_bwd, .bias_fwd = cu_bias_fwd,
    .bias_bwd = cu_bias_bwd, .embedding_fwd = cu_embedding_fwd, .embedding_bwd = cu_embedding_bwd,
    .flash_fwd = cu_flash_fwd, .flash_bwd = cu_flash_bwd, .flash_kv_bytes = cu_kv_bytes, .flash_kv_pack = cu_kv_pack,
    .copy2d = cu_copy2d, .add2d = cu_add2d, .fill = cu_fill, .attn_merge = cu_attn_merge, .attn_delta = cu_attn_delta,
    .dropout = cu_dropout, .destroy = cu_destroy};

lc_status lc_backend_cuda_open(const char *spec, lc_arena *host, lc_backend **out) {
  *out = NULL;
  LC_TRY(lc_backend_cuda_probe(spec));
  int idx = 0;
  parse_index(spec, &idx);
  lc_backend *be = calloc(1, sizeof *be);
  cuda_be *c = calloc(1, sizeof *c);
  if (!be || !c) {
    free(be), free(c);
    return lc_fail(LC_ENOMEM, "out of memory for the CUDA backend");
  }
  c->dev = idx;
  const char *fr_env = getenv("LONGCTX_CUDA_FLASH");
  c->flash_ref = fr_env && !strcmp(fr_env, "ref");
  be->ops = &cuda_ops;
  be->impl = c;
  lc_status st = LC_OK;
  cudaError_t e = cudaSetDevice(idx);
  for (int s = 0; e == cudaSuccess && s < LC_STREAM_N; s++) e = cudaStreamCreateWithFlags(&c->st[s], cudaStreamNonBlocking);
  for (int i = 0; e == cudaSuccess && i < N_EVENTS; i++) e = cudaEventCreateWithFlags(&c->ev[i], cudaEventDisableTiming);
  if (e != cudaSuccess) st = lc_fail(LC_EINVAL, "--device %s: could not set the device up (%s)", spec, cudaGetErrorString(e));
  if (st == LC_OK) st = lcc_lt_create(&c->lt);
  struct cudaDeviceProp prop;
  size_t fr = 0, tot = 0;
  if (st == LC_OK && (e = cudaGetDeviceProperties(&prop, idx)) == cudaSuccess) e = cudaMemGetInfo(&fr, &tot);
  if (st == LC_OK && e != cudaSuccess) st = lc_fail(LC_EINVAL, "--device %s: %s", spec, cudaGetErrorString(e));
  if (st != LC_OK) {
    lc_suballoc_init(&c->sa, (lc_chunk_source){chunk_get, chunk_put, c}, ALIGN, CHUNK_BYTES);
    cu_destroy(be);
    return st;
  }
  // the run's cap where one is set, else the device's free memory: a refusal by the cap
  // names the category (the arena's line), one by the device its free bytes (chunk_get)
  lc_arena_init(&c->dev_arena, host->cap ? host->cap : fr);
  lc_suballoc_init(&c->sa, (lc_chunk_source){chunk_get, chunk_put, c}, ALIGN, CHUNK_BYTES);
  snprintf(be->name, sizeof be->name, "cuda:%d", idx);
  be->host_memory = 0;
  be->arena = &c->dev_arena;
  be->host = host;
  snprintf(be->about, sizeof be->about, "cuda:%d: %.80s (sm_%d%d, %d SMs), %.1f GiB, %.1f free; staging in host memory",
           idx, prop.name, prop.major, prop.minor, prop.multiProcessorCount, (double)tot / 1073741824.0,
           (double)fr / 1073741824.0);
  *out = be;
  return LC_OK;
}
