#define _DEFAULT_SOURCE
// The private backend (private_backend.h): a first-fit allocator of offsets over one
// reserved mapping, opened (PROT_READ | PROT_WRITE) for the length of each op.
#include "backend/private/private_backend.h"

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
  lc_arena dev; // the device's bytes by category
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

// Each op: open the mapping, run the kernel table's entry on the resolved addresses, close.
#define OP(body)      \
  do {                \
    priv *p = P(be);  \
    open_map(p);      \
    body;             \
    close_map(p);     \
  } while (0)

static void priv_copy(lc_backend *be, lc_buf d, lc_buf s, lc_stream st) { OP(memmove(at(p, d), at(p, s), lc_buf_bytes(d))); }
static void priv_zero(lc_backend *be, lc_buf d) { OP(memset(at(p, d), 0, lc_buf_bytes(d))); }
static void priv_record(lc_backend *be, lc_stream s, lc_be_event *ev) { ev->h = 0; }
static void priv_wait_event(lc_backend *be, lc_stream s, lc_be_event ev) {}
static lc_status priv_sync(lc_backend *be, lc_stream s) { return LC_OK; }
static void priv_pack(lc_backend *be, lc_buf d, lc_buf s) { OP(lc_kern()->bf16_pack(at(p, d), at(p, s), d.n)); }
static void priv_unpack(lc_backend *be, lc_buf d, lc_buf s) { OP(lc_kern()->bf16_unpack(at(p, d), at(p, s), d.n)); }
static void priv_round(lc_backend *be, lc_buf x) { OP(lc_kern()->bf16_round(at(p, x), x.n)); }
static void priv_add(lc_backend *be, lc_buf y, lc_buf x) { OP(lc_kern()->add(at(p, y), at(p, x), y.n)); }
static void priv_scale(lc_backend *be, lc_buf x, float s) { OP(lc_kern()->scale(at(p, x), x.n, s)); }
static void priv_sumsq_acc(lc_backend *be, lc_buf acc, lc_buf x) {
  OP(*(double *)at(p, acc) += lc_kern()->sumsq(at(p, x), x.n));
}
static void priv_adamw(lc_backend *be, lc_buf pb, lc_buf g, lc_buf m, lc_buf v, const lc_adamw_args *a) {
  OP(lc_kern()->adamw(at(p, pb), at(p, g), at(p, m), at(p, v), pb.n, a->wd, a->beta1, a->beta2, a->eps, a->lr,
                      a->step_size, a->inv_sqrt_bc2));
}

static void priv_destroy(lc_backend *be) {
  priv *p = P(be);
  munmap(p->base, p->size);
  free(p->b);
  free(p);
  free(be);
}

static const lc_backend_ops priv_ops = {
    .alloc = priv_alloc, .free = priv_free, .host_ptr = priv_host_ptr, .read = priv_read, .write = priv_write,
    .copy = priv_copy, .zero = priv_zero, .record = priv_record, .wait_event = priv_wait_event, .sync = priv_sync,
    .bf16_pack = priv_pack, .bf16_unpack = priv_unpack, .bf16_round = priv_round, .add = priv_add,
    .scale = priv_scale, .sumsq_acc = priv_sumsq_acc, .adamw = priv_adamw, .destroy = priv_destroy};

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
  be->ops = &priv_ops;
  strcpy(be->name, "private");
  be->host_memory = 0;
  be->arena = &p->dev;
  be->host = host;
  be->impl = p;
  *out = be;
  return LC_OK;
}

size_t lc_backend_private_opens(const lc_backend *be) { return ((const priv *)be->impl)->opens; }
