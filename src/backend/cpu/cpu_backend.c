// The CPU backend (cpu_backend.h): a handle is the block's address, ops are the kernel
// table's entries on the buffers' addresses.
#include "backend/cpu/cpu_backend.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/ops/dropout.h"
#include "backend/cpu/flash/flash.h"
#include "backend/cpu/kern/kernels.h"
#include "backend/cpu/ops/ops.h"

// The address of a buffer's first element; NULL for the empty buffer (a skipped operand).
static void *at(lc_buf b) { return b.be ? (char *)(uintptr_t)b.h + b.off : NULL; }

static lc_status cpu_alloc(lc_backend *be, lc_mem_cat cat, size_t bytes, int zero, const char *what, uint64_t *h) {
  void *p = zero ? lc_calloc(be->arena, cat, bytes, what) : lc_alloc(be->arena, cat, bytes, what);
  if (!p) return LC_ENOMEM; // lc_alloc said why
  *h = (uint64_t)(uintptr_t)p;
  return LC_OK;
}
static void cpu_free(lc_backend *be, lc_mem_cat cat, size_t bytes, uint64_t h) { lc_free(be->arena, (void *)(uintptr_t)h); }
static void *cpu_host_ptr(lc_backend *be, lc_buf b) { return at(b); }

static lc_status cpu_read(lc_backend *be, lc_buf src, void *dst) {
  memcpy(dst, at(src), lc_buf_bytes(src));
  return LC_OK;
}
static lc_status cpu_write(lc_backend *be, lc_buf dst, const void *src) {
  memcpy(at(dst), src, lc_buf_bytes(dst));
  return LC_OK;
}
static void cpu_copy(lc_backend *be, lc_buf dst, lc_buf src, lc_stream s) { memmove(at(dst), at(src), lc_buf_bytes(dst)); }
static void cpu_zero(lc_backend *be, lc_buf dst) { memset(at(dst), 0, lc_buf_bytes(dst)); }

// Synchronous: an event is always complete.
static void cpu_record(lc_backend *be, lc_stream s, lc_be_event *ev) { ev->h = 0; }
static void cpu_wait_event(lc_backend *be, lc_stream s, lc_be_event ev) {}
static lc_status cpu_sync(lc_backend *be, lc_stream s) { return LC_OK; }

static void cpu_pack(lc_backend *be, lc_buf d, lc_buf s) { lc_kern()->bf16_pack(at(d), at(s), d.n); }
static void cpu_unpack(lc_backend *be, lc_buf d, lc_buf s) { lc_kern()->bf16_unpack(at(d), at(s), d.n); }
static void cpu_round(lc_backend *be, lc_buf x) { lc_kern()->bf16_round(at(x), x.n); }
static void cpu_add(lc_backend *be, lc_buf y, lc_buf x) {
  if (x.dt != LC_DT_BF16) {
    lc_kern()->add(at(y), at(x), y.n);
    return;
  }
  float *yy = at(y); // a bf16 x (a bf16 pass's layer input): its exact widened values added
  const uint16_t *xx = at(x);
  const long n = (long)y.n;
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (long i = 0; i < n; i++) yy[i] += lc_bf16_widen(xx[i]);
}
static void cpu_scale(lc_backend *be, lc_buf x, float s) { lc_kern()->scale(at(x), x.n, s); }
static void cpu_sumsq_acc(lc_backend *be, lc_buf acc, lc_buf x) { *(double *)at(acc) += lc_kern()->sumsq(at(x), x.n); }
static void cpu_adamw(lc_backend *be, lc_buf p, lc_buf g, lc_buf m, lc_buf v, const lc_adamw_args *a) {
  lc_kern()->adamw(at(p), at(g), at(m), at(v), p.n, a->wd, a->beta1, a->beta2, a->eps, a->lr, a->step_size,
                   a->inv_sqrt_bc2);
}

static void cpu_rmsnorm_fwd(lc_backend *be, lc_buf out, lc_buf rstd, lc_buf x, lc_buf w, int T, int C, float eps) {
  lc_rmsnorm_fwd_to(at(out), out.dt, at(rstd), at(x), x.dt, at(w), T, C, eps);
}
static void cpu_rmsnorm_bwd(lc_backend *be, lc_buf dinp, lc_buf dw, lc_buf dout, lc_buf inp, lc_buf w, lc_buf rstd,
                            int T, int C, int set) {
  lc_rmsnorm_bwd_in(at(dinp), at(dw), at(dout), at(inp), inp.dt, at(w), at(rstd), T, C, set);
}
static lc_mm mm_of(lc_backend *be, int bf16, lc_buf scratch) {
  return (lc_mm){.bf16 = bf16, .arena = be->arena, .scratch = at(scratch), .scratch_bytes = lc_buf_bytes(scratch)};
}
static lc_status cpu_matmul_fwd(lc_backend *be, lc_buf out, lc_buf inp, lc_buf w, int T, int K, int N, int acc,
                                int bf16, lc_buf scratch) {
  const lc_mm mm = mm_of(be, bf16, scratch);
  return lc_matmul_fwd_acc(&mm, at(out), out.dt, lc_act_of(at(inp), inp.dt), lc_act_of(at(w), w.dt), T, K, N, acc);
}
static lc_status cpu_matmul_bwd(lc_backend *be, lc_buf dinp, lc_buf dw, lc_buf dout, lc_buf inp, lc_buf w, int T, int K,
                                int N, int accumulate, int bf16, lc_buf scratch) {
  const lc_mm mm = mm_of(be, bf16, scratch);
  return lc_matmul_bwd(&mm, at(dinp), at(dw), lc_act_of(at(dout), dout.dt), lc_act_of(at(inp), inp.dt),
                       lc_act_of(at(w), w.dt), T, K, N, accumulate);
}
static void cpu_xent_tile(lc_backend *be, lc_buf logits, lc_buf targets, int T, int V, float scale, lc_buf acc,
                          int count_wrong) {
  lc_xent_tile(at(logits), at(targets), T, V, scale, at(acc), count_wrong);
}
static void cpu_stats_init(lc_backend *be, lc_buf stats, int T) { lc_xent_stats_init(at(stats), T); }
static void cpu_slice_merge(lc_backend *be, lc_buf stats, int T, lc_buf logits, lc_buf targets, int t0, int m, int v0,
                            int vs) {
  lc_xent_slice_merge(at(stats), T, at(logits), at(targets), t0, m, v0, vs);
}
static void cpu_slice_total(lc_backend *be, lc_buf stats, lc_buf targets, int T, lc_buf acc, int count_wrong) {
  lc_xent_slice_total(at(stats), at(targets), T, at(acc), count_wrong);
}
static void cpu_slice_dlogits(lc_backend *be, lc_buf logits, lc_buf stats, int T, lc_buf targets, int t0, int m, int v0,
                              int vs, float scale) {
  lc_xent_slice_dlogits(at(logits), at(stats), T, at(targets), t0, m, v0, vs, scale);
}

static void cpu_rope(lc_backend *be, lc_buf x, lc_buf c, lc_buf s, int T, int H, int D, int bwd) {
  (bwd ? lc_rope_bwd : lc_rope_fwd)(at(x), at(c), at(s), T, H, D);
}
static void cpu_swiglu_fwd(lc_backend *be, lc_buf h, lc_buf g, lc_buf u) {
  if (h.dt == LC_DT_BF16) lc_swiglu_fwd_bf16(at(h), at(g), at(u), h.n);
  else lc_swiglu_fwd(at(h), at(g), at(u), h.n);
}
static void cpu_swiglu_bwd(lc_backend *be, lc_buf dg, lc_buf du, lc_buf dh, lc_buf g, lc_buf u) {
  if (dg.dt == LC_DT_BF16) lc_swiglu_bwd_bf16(at(dg), at(du), at(dh), at(g), at(u), dg.n);
  else lc_swiglu_bwd(at(dg), at(du), at(dh), at(g), at(u), dg.n);
}
static void cpu_bias_fwd(lc_backend *be, lc_buf y, lc_buf b, int T, int N) { lc_bias_fwd(at(y), at(b), T, N); }
static void cpu_bias_bwd(lc_backend *be, lc_buf db, lc_buf dy, int T, int N) {
  if (dy.dt == LC_DT_BF16) lc_bias_bwd_bf16(at(db), at(dy), T, N);
  else lc_bias_bwd(at(db), at(dy), T, N);
}
static void cpu_embedding_fwd(lc_backend *be, lc_buf out, lc_buf tokens, lc_buf wte, int T, int C, int r0) {
  lc_embedding_fwd_rows(at(out), at(tokens), at(wte), wte.dt, T, C, r0, r0 + (int)(wte.n / (size_t)C));
}
static void cpu_embedding_bwd(lc_backend *be, lc_buf dwte, lc_buf dout, lc_buf tokens, int T, int C, int r0) {
  lc_embedding_bwd_rows(at(dwte), at(dout), at(tokens), T, C, r0, r0 + (int)(dwte.n / (size_t)C));
}
// The kernel's shape: the geometry, with the bound, the pack and the 2-byte flags from the buffers.
static lc_attn_shape shape_of(const lc_attn_geom *s, lc_buf lo, lc_buf q, lc_buf k, lc_buf out, lc_buf pack) {
  lc_attn_shape t = {.Tq = s->Tq, .Tk = s->Tk, .Hq = s->Hq, .Hkv = s->Hkv, .D = s->D, .q_start = s->q_start,
                     .k_start = s->k_start, .causal = s->causal, .scale = s->scale, .bf16 = s->bf16};
  t.lo = at(lo);
  t.q16 = q.dt == LC_DT_BF16;
  t.kv16 = k.dt == LC_DT_BF16;
  t.out16 = out.be && out.dt == LC_DT_BF16;
  t.kv_pack = at(pack);
  return t;
}
static lc_status cpu_flash_fwd(lc_backend *be, lc_buf out, lc_buf lse, lc_buf q, lc_buf k, lc_buf v, lc_buf lo,
                               lc_buf pack, const lc_attn_geom *s) {
  const lc_attn_shape t = shape_of(s, lo, q, k, out, pack);
  return lc_flash_fwd(at(out), at(lse), at(q), at(k), at(v), &t, be->arena);
}
static lc_status cpu_flash_bwd(lc_backend *be, lc_buf dq, lc_buf dk, lc_buf dv, lc_buf dout, lc_buf q, lc_buf k,
                               lc_buf v, lc_buf lse, lc_buf delta, lc_buf lo, lc_buf pack, const lc_attn_geom *s) {
  const lc_attn_shape t = shape_of(s, lo, q, k, (lc_buf){0}, pack);
  return lc_flash_bwd(at(dq), at(dk), at(dv), at(dout), at(q), at(k), at(v), at(lse), at(delta), &t, be->arena);
}
static void cpu_attn_merge(lc_backend *be, lc_buf oa, lc_buf la, lc_buf ob, lc_buf lb, int Tq, int Hq, int D) {
  lc_attn_merge(at(oa), at(la), at(ob), at(lb), Tq, Hq, D);
}
static void cpu_attn_delta(lc_backend *be, lc_buf delta, lc_buf dout, lc_buf out, int Tq, int Hq, int D) {
  if (dout.dt == LC_DT_BF16) lc_attn_delta16(at(delta), at(dout), at(out), Tq, Hq, D);
  else lc_attn_delta(at(delta), at(dout), at(out), Tq, Hq, D);
}

static size_t cpu_kv_bytes(lc_backend *be, const lc_attn_geom *s, int bwd) {
  const lc_attn_shape t = shape_of(s, (lc_buf){0}, (lc_buf){0}, (lc_buf){0}, (lc_buf){0}, (lc_buf){0});
  return lc_flash_kv_bytes(&t, bwd);
}
static void cpu_kv_pack(lc_backend *be, lc_buf pack, lc_buf k, lc_buf v, const lc_attn_geom *s, int bwd) {
  const lc_attn_shape t = shape_of(s, (lc_buf){0}, k, k, (lc_buf){0}, (lc_buf){0});
  lc_flash_kv_pack(at(pack), at(k), at(v), &t, bwd);
}
static void cpu_copy2d(lc_backend *be, lc_buf dst, size_t ld_dst, lc_buf src, size_t ld_src, size_t rows, size_t n) {
  char *d = at(dst);
  const char *x = at(src);
  const size_t es = lc_dtype_size(dst.dt);
  for (size_t r = 0; r < rows; r++) memcpy(d + r * ld_dst * es, x + r * ld_src * es, n * es);
}
static void cpu_add2d(lc_backend *be, lc_buf dst, size_t ld_dst, lc_buf src, size_t ld_src, size_t rows, size_t n) {
  float *d = at(dst);
  const float *x = at(src);
  for (size_t r = 0; r < rows; r++) lc_kern()->add(d + r * ld_dst, x + r * ld_src, n);
}
static void cpu_fill(lc_backend *be, lc_buf x, float v) {
  float *p = at(x);
  for (size_t i = 0; i < x.n; i++) p[i] = v;
}

static void cpu_dropout(lc_backend *be, lc_buf dst, lc_buf src, int rows, int cols, lc_buf gidx, uint64_t key,
                        uint32_t thr, int accumulate) {
  lc_dropout_mask(at(dst), at(src), dst.dt, rows, cols, at(gidx), key, thr, accumulate);
}

static void cpu_destroy_heap(lc_backend *be) { free(be); }

#define CPU_OPS(destroy_fn)                                                                                         \
  {.alloc = cpu_alloc, .free = cpu_free, .host_ptr = cpu_host_ptr, .read = cpu_read, .write = cpu_write,           \
   .copy = cpu_copy, .zero = cpu_zero, .record = cpu_record, .wait_event = cpu_wait_event, .sync = cpu_sync,        \
   .bf16_pack = cpu_pack, .bf16_unpack = cpu_unpack, .bf16_round = cpu_round, .add = cpu_add, .scale = cpu_scale, \
   .sumsq_acc = cpu_sumsq_acc, .adamw = cpu_adamw, .rmsnorm_fwd = cpu_rmsnorm_fwd, .rmsnorm_bwd = cpu_rmsnorm_bwd,  \
   .matmul_fwd = cpu_matmul_fwd, .matmul_bwd = cpu_matmul_bwd, .xent_tile = cpu_xent_tile,                         \
   .xent_stats_init = cpu_stats_init, .xent_slice_merge = cpu_slice_merge, .xent_slice_total = cpu_slice_total,  \
   .xent_slice_dlogits = cpu_slice_dlogits, .rope = cpu_rope, .swiglu_fwd = cpu_swiglu_fwd,                       \
   .swiglu_bwd = cpu_swiglu_bwd, .bias_fwd = cpu_bias_fwd, .bias_bwd = cpu_bias_bwd,                              \
   .embedding_fwd = cpu_embedding_fwd, .embedding_bwd = cpu_embedding_bwd, .flash_fwd = cpu_flash_fwd,           \
   .flash_bwd = cpu_flash_bwd, .flash_kv_bytes = cpu_kv_bytes, .flash_kv_pack = cpu_kv_pack, .copy2d = cpu_copy2d, .add2d = cpu_add2d, .fill = cpu_fill,       \
   .attn_merge = cpu_attn_merge, .attn_delta = cpu_attn_delta, .dropout = cpu_dropout, .destroy = destroy_fn}
static const lc_backend_ops cpu_ops_held = CPU_OPS(NULL); // storage the caller holds
static const lc_backend_ops cpu_ops_heap = CPU_OPS(cpu_destroy_heap);

const lc_backend_ops *lc_backend_cpu_ops(void) { return &cpu_ops_held; }

void lc_backend_cpu_init(lc_backend *be, lc_arena *arena) {
  memset(be, 0, sizeof *be);
  be->ops = &cpu_ops_held;
  strcpy(be->name, "cpu");
  be->host_memory = 1;
  be->synchronous = 1;
  be->arena = be->host = arena;
}

lc_status lc_backend_cpu_open(lc_arena *arena, lc_backend **out) {
  lc_backend *be = malloc(sizeof *be);
  if (!be) return lc_fail(LC_ENOMEM, "out of memory for the cpu backend");
  lc_backend_cpu_init(be, arena);
  be->ops = &cpu_ops_heap;
  *out = be;
  return LC_OK;
}
