#define _DEFAULT_SOURCE
// The private backend (private_backend.h): a first-fit allocator of offsets over one
// reserved mapping, opened (PROT_READ | PROT_WRITE) for the length of each op.
#include "backend/private/private_backend.h"

#include "backend/cpu/cpu_backend.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
  size_t off, bytes;
  int used;
} block;

typedef struct {
  char *base;   // the mapping: never handed out
  size_t size;
  block *b;     // blocks in address order, covering [0, size)
  int n, cap;
  size_t opens;
  lc_arena dev;       // the device's bytes by category
  lc_backend shadow;  // a CPU backend over dev: runs the ops on resolved addresses
} priv;

#define ALIGN 64

static priv *P(lc_backend *be) { return be->impl; }

static void open_map(priv *p) {
  if (mprotect(p->base, p->size, PROT_READ | PROT_WRITE) != 0) abort();
  p->opens++;
}
static void close_map(priv *p) {
  if (mprotect(p->base, p->size, PROT_NONE) != 0) abort();
}
static void *at(priv *p, lc_buf b) { return p->base + b.h + b.off; }

static lc_status priv_alloc(lc_backend *be, lc_mem_cat cat, size_t bytes, int zero, const char *what, uint64_t *h) {
  priv *p = P(be);
  const size_t want = (bytes + ALIGN - 1) / ALIGN * ALIGN + ALIGN; // never 0 bytes: handles stay distinct
  int i = 0;
  while (i < p->n && (p->b[i].used || p->b[i].bytes < want)) i++;
  if (i == p->n)
    return lc_fail(LC_ENOMEM, "out of memory: the private device's %.1f MiB mapping has no room for %s (%.1f MiB)",
                   (double)p->size / 1048576.0, what ? what : "a buffer", (double)bytes / 1048576.0);
  if (p->n == p->cap) {
    block *nb = realloc(p->b, sizeof *nb * (size_t)(p->cap * 2));
    if (!nb) return lc_fail(LC_ENOMEM, "out of memory for the private device's block list");
    p->b = nb;
    p->cap *= 2;
  }
  LC_TRY(lc_arena_charge(&p->dev, cat, bytes, what));
  if (p->b[i].bytes > want) { // split: the rest stays free after it
    memmove(&p->b[i + 2], &p->b[i + 1], sizeof *p->b * (size_t)(p->n - i - 1));
    p->b[i + 1] = (block){p->b[i].off + want, p->b[i].bytes - want, 0};
    p->b[i].bytes = want;
    p->n++;
  }
  p->b[i].used = 1;
  *h = p->b[i].off;
  if (zero) {
    open_map(p);
    memset(p->base + *h, 0, bytes);
    close_map(p);
  }
  return LC_OK;
}

static void priv_free(lc_backend *be, lc_mem_cat cat, size_t bytes, uint64_t h) {
  priv *p = P(be);
  int i = 0;
  while (i < p->n && p->b[i].off != h) i++;
  if (i == p->n || !p->b[i].used) abort(); // not an allocation of this backend
  p->b[i].used = 0;
  lc_arena_uncharge(&p->dev, cat, bytes);
  // give its whole pages back (madvise rounds a length up: never past the block), then
  // merge with free neighbours
  const size_t pg = (size_t)sysconf(_SC_PAGESIZE), lo = (p->b[i].off + pg - 1) / pg * pg, hi = (p->b[i].off + p->b[i].bytes) / pg * pg;
  if (hi > lo) madvise(p->base + lo, hi - lo, MADV_DONTNEED);
  if (i + 1 < p->n && !p->b[i + 1].used) {
    p->b[i].bytes += p->b[i + 1].bytes;
    memmove(&p->b[i + 1], &p->b[i + 2], sizeof *p->b * (size_t)(p->n - i - 2));
    p->n--;
  }
  if (i > 0 && !p->b[i - 1].used) {
    p->b[i - 1].bytes += p->b[i].bytes;
    memmove(&p->b[i], &p->b[i + 1], sizeof *p->b * (size_t)(p->n - i - 1));
    p->n--;
  }
}

static void *priv_host_ptr(lc_backend *be, lc_buf b) { return NULL; }

static lc_status priv_read(lc_backend *be, lc_buf src, void *dst) {
  open_map(P(be));
  memcpy(dst, at(P(be), src), lc_buf_bytes(src));
  close_map(P(be));
  return LC_OK;
}
static lc_status priv_write(lc_backend *be, lc_buf dst, const void *src) {
  open_map(P(be));
  memcpy(at(P(be), dst), src, lc_buf_bytes(dst));
  close_map(P(be));
  return LC_OK;
}

// Each op: open the mapping, run the CPU backend's entry on the resolved addresses (a CPU
// backend over the device's arena: the GEMMs' own scratch is counted there), close.
static lc_buf R(priv *p, lc_buf b) {
  if (!b.be) return b; // an empty (skipped) operand stays empty
  b.be = &p->shadow;
  b.h = (uint64_t)(uintptr_t)(p->base + b.h);
  return b;
}
#define CPU lc_backend_cpu_ops()
#define OP(call)          \
  do {                    \
    priv *p = P(be);      \
    open_map(p);          \
    call;                 \
    close_map(p);         \
  } while (0)
#define SH (&p->shadow)

static void priv_copy(lc_backend *be, lc_buf d, lc_buf s, lc_stream st) { OP(CPU->copy(SH, R(p, d), R(p, s), st)); }
static void priv_zero(lc_backend *be, lc_buf d) { OP(CPU->zero(SH, R(p, d))); }
static void priv_record(lc_backend *be, lc_stream s, lc_be_event *ev) { ev->h = 0; }
static void priv_wait_event(lc_backend *be, lc_stream s, lc_be_event ev) {}
static lc_status priv_sync(lc_backend *be, lc_stream s) { return LC_OK; }
static void priv_pack(lc_backend *be, lc_buf d, lc_buf s) { OP(CPU->bf16_pack(SH, R(p, d), R(p, s))); }
static void priv_unpack(lc_backend *be, lc_buf d, lc_buf s) { OP(CPU->bf16_unpack(SH, R(p, d), R(p, s))); }
static void priv_round(lc_backend *be, lc_buf x) { OP(CPU->bf16_round(SH, R(p, x))); }
static void priv_add(lc_backend *be, lc_buf y, lc_buf x) { OP(CPU->add(SH, R(p, y), R(p, x))); }
static void priv_scale(lc_backend *be, lc_buf x, float s) { OP(CPU->scale(SH, R(p, x), s)); }
static void priv_sumsq_acc(lc_backend *be, lc_buf acc, lc_buf x) { OP(CPU->sumsq_acc(SH, R(p, acc), R(p, x))); }
static void priv_adamw(lc_backend *be, lc_buf pb, lc_buf g, lc_buf m, lc_buf v, const lc_adamw_args *a) {
  OP(CPU->adamw(SH, R(p, pb), R(p, g), R(p, m), R(p, v), a));
}
static void priv_rmsnorm_fwd(lc_backend *be, lc_buf out, lc_buf rstd, lc_buf x, lc_buf w, int T, int C, float eps) {
  OP(CPU->rmsnorm_fwd(SH, R(p, out), R(p, rstd), R(p, x), R(p, w), T, C, eps));
}
static void priv_rmsnorm_bwd(lc_backend *be, lc_buf dinp, lc_buf dw, lc_buf dout, lc_buf inp, lc_buf w, lc_buf rstd,
                             int T, int C, int set) {
  OP(CPU->rmsnorm_bwd(SH, R(p, dinp), R(p, dw), R(p, dout), R(p, inp), R(p, w), R(p, rstd), T, C, set));
}
static lc_status priv_matmul_fwd(lc_backend *be, lc_buf out, lc_buf inp, lc_buf w, int T, int K, int N, int acc,
                                 int bf16, lc_buf scratch) {
  lc_status st;
  OP(st = CPU->matmul_fwd(SH, R(p, out), R(p, inp), R(p, w), T, K, N, acc, bf16, R(p, scratch)));
  return st;
}
static lc_status priv_matmul_bwd(lc_backend *be, lc_buf dinp, lc_buf dw, lc_buf dout, lc_buf inp, lc_buf w, int T,
                                 int K, int N, int accumulate, int bf16, lc_buf scratch) {
  lc_status st;
  OP(st = CPU->matmul_bwd(SH, R(p, dinp), R(p, dw), R(p, dout), R(p, inp), R(p, w), T, K, N, accumulate, bf16,
                          R(p, scratch)));
  return st;
}
static void priv_xent_tile(lc_backend *be, lc_buf logits, lc_buf targets, int T, int V, float scale, lc_buf acc,
                           int count_wrong) {
  OP(CPU->xent_tile(SH, R(p, logits), R(p, targets), T, V, scale, R(p, acc), count_wrong));
}
static void priv_stats_init(lc_backend *be, lc_buf stats, int T) { OP(CPU->xent_stats_init(SH, R(p, stats), T)); }
static void priv_slice_merge(lc_backend *be, lc_buf stats, int T, lc_buf logits, lc_buf targets, int t0, int m,
                             int v0, int vs) {
  OP(CPU->xent_slice_merge(SH, R(p, stats), T, R(p, logits), R(p, targets), t0, m, v0, vs));
}
static void priv_slice_total(lc_backend *be, lc_buf stats, lc_buf targets, int T, lc_buf acc, int count_wrong) {
  OP(CPU->xent_slice_total(SH, R(p, stats), R(p, targets), T, R(p, acc), count_wrong));
}
static void priv_slice_dlogits(lc_backend *be, lc_buf logits, lc_buf stats, int T, lc_buf targets, int t0, int m,
                               int v0, int vs, float scale) {
  OP(CPU->xent_slice_dlogits(SH, R(p, logits), R(p, stats), T, R(p, targets), t0, m, v0, vs, scale));
}

static void priv_rope(lc_backend *be, lc_buf x, lc_buf c, lc_buf s, int T, int H, int D, int bwd) {
  OP(CPU->rope(SH, R(p, x), R(p, c), R(p, s), T, H, D, bwd));
}
static void priv_swiglu_fwd(lc_backend *be, lc_buf h, lc_buf g, lc_buf u) { OP(CPU->swiglu_fwd(SH, R(p, h), R(p, g), R(p, u))); }
static void priv_swiglu_bwd(lc_backend *be, lc_buf dg, lc_buf du, lc_buf dh, lc_buf g, lc_buf u) {
  OP(CPU->swiglu_bwd(SH, R(p, dg), R(p, du), R(p, dh), R(p, g), R(p, u)));
}
static void priv_bias_fwd(lc_backend *be, lc_buf y, lc_buf b, int T, int N) { OP(CPU->bias_fwd(SH, R(p, y), R(p, b), T, N)); }
static void priv_bias_bwd(lc_backend *be, lc_buf db, lc_buf dy, int T, int N) { OP(CPU->bias_bwd(SH, R(p, db), R(p, dy), T, N)); }
static void priv_embedding_fwd(lc_backend *be, lc_buf out, lc_buf tokens, lc_buf wte, int T, int C, int r0) {
  OP(CPU->embedding_fwd(SH, R(p, out), R(p, tokens), R(p, wte), T, C, r0));
}
static void priv_embedding_bwd(lc_backend *be, lc_buf dwte, lc_buf dout, lc_buf tokens, int T, int C, int r0) {
  OP(CPU->embedding_bwd(SH, R(p, dwte), R(p, dout), R(p, tokens), T, C, r0));
}
static lc_status priv_flash_fwd(lc_backend *be, lc_buf out, lc_buf lse, lc_buf q, lc_buf k, lc_buf v, lc_buf lo,
                                lc_buf pack, const lc_attn_geom *s) {
  lc_status st;
  OP(st = CPU->flash_fwd(SH, R(p, out), R(p, lse), R(p, q), R(p, k), R(p, v), R(p, lo), R(p, pack), s));
  return st;
}
static size_t priv_kv_bytes(lc_backend *be, const lc_attn_geom *s, int bwd) { return CPU->flash_kv_bytes(&P(be)->shadow, s, bwd); }
static void priv_kv_pack(lc_backend *be, lc_buf pack, lc_buf k, lc_buf v, const lc_attn_geom *s, int bwd) {
  OP(CPU->flash_kv_pack(SH, R(p, pack), R(p, k), R(p, v), s, bwd));
}
static void priv_copy2d(lc_backend *be, lc_buf dst, size_t ld_dst, lc_buf src, size_t ld_src, size_t rows, size_t n) {
  OP(CPU->copy2d(SH, R(p, dst), ld_dst, R(p, src), ld_src, rows, n));
}
static void priv_add2d(lc_backend *be, lc_buf dst, size_t ld_dst, lc_buf src, size_t ld_src, size_t rows, size_t n) {
  OP(CPU->add2d(SH, R(p, dst), ld_dst, R(p, src), ld_src, rows, n));
}
static void priv_fill(lc_backend *be, lc_buf x, float v) { OP(CPU->fill(SH, R(p, x), v)); }
static lc_status priv_flash_bwd(lc_backend *be, lc_buf dq, lc_buf dk, lc_buf dv, lc_buf dout, lc_buf q, lc_buf k,
                                lc_buf v, lc_buf lse, lc_buf delta, lc_buf lo, lc_buf pack, const lc_attn_geom *s) {
  lc_status st;
  OP(st = CPU->flash_bwd(SH, R(p, dq), R(p, dk), R(p, dv), R(p, dout), R(p, q), R(p, k), R(p, v), R(p, lse),
                         R(p, delta), R(p, lo), R(p, pack), s));
  return st;
}
static void priv_attn_merge(lc_backend *be, lc_buf oa, lc_buf la, lc_buf ob, lc_buf lb, int Tq, int Hq, int D) {
  OP(CPU->attn_merge(SH, R(p, oa), R(p, la), R(p, ob), R(p, lb), Tq, Hq, D));
}
static void priv_attn_delta(lc_backend *be, lc_buf delta, lc_buf dout, lc_buf out, int Tq, int Hq, int D) {
  OP(CPU->attn_delta(SH, R(p, delta), R(p, dout), R(p, out), Tq, Hq, D));
}
static void priv_dropout(lc_backend *be, lc_buf dst, lc_buf src, int rows, int cols, lc_buf gidx, uint64_t key,
                         uint32_t thr, int accumulate) {
  OP(CPU->dropout(SH, R(p, dst), R(p, src), rows, cols, R(p, gidx), key, thr, accumulate));
}

static void priv_destroy(lc_backend *be) {
  priv *p = P(be);
  lc_arena_trim(&p->dev); // the GEMMs' kept scratch blocks
  munmap(p->base, p->size);
  free(p->b);
  free(p);
  free(be);
}

static const lc_backend_ops priv_ops = {
    .alloc = priv_alloc, .free = priv_free, .host_ptr = priv_host_ptr, .read = priv_read, .write = priv_write,
    .copy = priv_copy, .zero = priv_zero, .record = priv_record, .wait_event = priv_wait_event, .sync = priv_sync,
    .bf16_pack = priv_pack, .bf16_unpack = priv_unpack, .bf16_round = priv_round, .add = priv_add,
    .scale = priv_scale, .sumsq_acc = priv_sumsq_acc, .adamw = priv_adamw, .rmsnorm_fwd = priv_rmsnorm_fwd,
    .rmsnorm_bwd = priv_rmsnorm_bwd, .matmul_fwd = priv_matmul_fwd, .matmul_bwd = priv_matmul_bwd,
    .xent_tile = priv_xent_tile, .xent_stats_init = priv_stats_init, .xent_slice_merge = priv_slice_merge,
    .xent_slice_total = priv_slice_total, .xent_slice_dlogits = priv_slice_dlogits, .rope = priv_rope,
    .swiglu_fwd = priv_swiglu_fwd, .swiglu_bwd = priv_swiglu_bwd, .bias_fwd = priv_bias_fwd, .bias_bwd = priv_bias_bwd,
    .embedding_fwd = priv_embedding_fwd, .embedding_bwd = priv_embedding_bwd, .flash_fwd = priv_flash_fwd,
    .flash_bwd = priv_flash_bwd, .flash_kv_bytes = priv_kv_bytes, .flash_kv_pack = priv_kv_pack, .copy2d = priv_copy2d, .add2d = priv_add2d, .fill = priv_fill,
    .attn_merge = priv_attn_merge, .attn_delta = priv_attn_delta, .dropout = priv_dropout, .destroy = priv_destroy};

lc_status lc_backend_private_open(lc_arena *host, lc_backend **out) {
  *out = NULL;
  lc_backend *be = calloc(1, sizeof *be);
  priv *p = calloc(1, sizeof *p);
  if (p) p->b = malloc(sizeof *p->b * 64);
  if (!be || !p || !p->b) {
    if (p) free(p->b);
    free(p);
    free(be);
    return lc_fail(LC_ENOMEM, "out of memory for the private backend");
  }
  p->cap = 64;
  // room for the allocator's rounding (64 bytes a block) beyond the cap the arena enforces
  p->size = host->cap ? (host->cap + host->cap / 8 + ((size_t)64 << 20) + 4095) / 4096 * 4096 : (size_t)16 << 30;
  p->base = mmap(NULL, p->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p->base == MAP_FAILED) {
    free(p->b);
    free(p);
    free(be);
    return lc_fail(LC_ENOMEM, "the private backend could not reserve its mapping");
  }
  p->b[0] = (block){0, p->size, 0};
  p->n = 1;
  lc_arena_init(&p->dev, host->cap);
  lc_backend_cpu_init(&p->shadow, &p->dev);
  be->ops = &priv_ops;
  strcpy(be->name, "private");
  be->host_memory = 0;
  be->synchronous = 1;
  be->arena = &p->dev;
  be->host = host;
  be->impl = p;
  *out = be;
  return LC_OK;
}

size_t lc_backend_private_opens(const lc_backend *be) { return ((const priv *)be->impl)->opens; }
