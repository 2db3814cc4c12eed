// bf16 GEMMs of the kernel table (kernels.h, gemm_bf16) through oneDNN's C API (Debian's
// libdnnl 2.6, built with OpenMP: a call uses omp_get_max_threads() threads, the --threads
// knob, and one thread when called from inside a parallel region).
//
// C[M,N] = beta C + op(A) op(B) is one matmul primitive: src = op(A) [M,K] bf16, weights =
// op(B) [K,N] bf16, dst = C [M,N] fp32 (fp32 accumulation). A transposed operand is
// described by its strides (no copy); beta = 1 is a sum post-op. Primitives are created
// once per (ta, tb, M, N, K, lda, ldb, ldc, beta) and kept in a small cache (creation
// costs milliseconds; a training step reuses a few dozen shapes). One engine and stream,
// created on first use. Scratchpad in user mode: one buffer owned here, grown to the
// largest a primitive asks for (lc_gemm_dnnl_scratch_bytes reports it; the arena does not
// see it). A mutex serialises calls (callers call from outside OpenMP regions anyway).
#include "backend/cpu/gemm/gemm_dnnl.h"

#include <dnnl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE 64

typedef struct {
  int ta, tb, M, N, K;
  long lda, ldb, ldc;
  int beta;
  int f32; // fp32 operands (lc_gemm_dnnl_f32), else bf16
} key_t_;

typedef struct {
  key_t_ k;
  dnnl_primitive_t prim;
  dnnl_memory_t src, wei, dst, scr; // memory objects, data handles set per call
  unsigned long used;               // LRU stamp
} entry;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t eng;
static dnnl_stream_t strm;
static int init_failed;
static entry cache[CACHE];
static int n_cache;
static unsigned long stamp;
static void *scratch;
static size_t scratch_bytes;
static long n_created;
static char last_impl[96]; // implementation oneDNN chose for the last primitive created

static int ok(dnnl_status_t s, const char *what) {
  if (s == dnnl_success) return 1;
  fprintf(stderr, "longctx: oneDNN %s failed (status %d)\n", what, (int)s);
  return 0;
}

static void drop(entry *e) {
  if (e->prim) dnnl_primitive_destroy(e->prim);
  if (e->src) dnnl_memory_destroy(e->src);
  if (e->wei) dnnl_memory_destroy(e->wei);
  if (e->dst) dnnl_memory_destroy(e->dst);
  if (e->scr) dnnl_memory_destroy(e->scr);
  memset(e, 0, sizeof *e);
}

// Builds the primitive for k into e (0 on failure).
static int create(entry *e, const key_t_ *k) {
  memset(e, 0, sizeof *e);
  e->k = *k;
  dnnl_memory_desc_t smd, wmd, dmd;
  dnnl_dims_t sd = {k->M, k->K}, wd = {k->K, k->N}, dd = {k->M, k->N};
  // op(A)[m,k]: A[m*lda + k] (ta 0) or A[k*lda + m] (ta 1); likewise op(B)[k,n].
  dnnl_dims_t ss = {k->ta ? 1 : k->lda, k->ta ? k->lda : 1};
  dnnl_dims_t ws = {k->tb ? 1 : k->ldb, k->tb ? k->ldb : 1};
  dnnl_dims_t ds = {k->ldc, 1};
  const dnnl_data_type_t in = k->f32 ? dnnl_f32 : dnnl_bf16;
  if (!ok(dnnl_memory_desc_init_by_strides(&smd, 2, sd, in, ss), "src desc") ||
      !ok(dnnl_memory_desc_init_by_strides(&wmd, 2, wd, in, ws), "weights desc") ||
      !ok(dnnl_memory_desc_init_by_strides(&dmd, 2, dd, dnnl_f32, ds), "dst desc"))
    return 0;
  dnnl_matmul_desc_t md;
  if (!ok(dnnl_matmul_desc_init(&md, &smd, &wmd, NULL, &dmd), "matmul desc")) return 0;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t po = NULL;
  dnnl_primitive_desc_t pd = NULL;
  int good = ok(dnnl_primitive_attr_create(&attr), "attr") &&
             ok(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "scratchpad mode");
  if (good && k->beta) {
    good = ok(dnnl_post_ops_create(&po), "post-ops") && ok(dnnl_post_ops_append_sum(po, 1.0f), "sum post-op") &&
           ok(dnnl_primitive_attr_set_post_ops(attr, po), "set post-ops");
  }
  if (good) good = ok(dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL), "matmul primitive desc");
  if (good) {
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
      snprintf(last_impl, sizeof last_impl, "%s", impl);
    const dnnl_memory_desc_t *scr_md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t need = scr_md ? dnnl_memory_desc_get_size(scr_md) : 0;
    if (need > scratch_bytes) {
      free(scratch);
      scratch = NULL;
      scratch = aligned_alloc(64, (need + 63) & ~(size_t)63);
      if (!scratch) good = 0;
      scratch_bytes = scratch ? need : 0;
      // Older entries' scratchpad memory objects point at the freed buffer: repoint them.
      for (int i = 0; i < n_cache; i++)
        if (cache[i].scr) dnnl_memory_set_data_handle(cache[i].scr, scratch);
    }
    good = good && ok(dnnl_primitive_create(&e->prim, pd), "matmul primitive") &&
           ok(dnnl_memory_create(&e->src, &smd, eng, DNNL_MEMORY_NONE), "src memory") &&
           ok(dnnl_memory_create(&e->wei, &wmd, eng, DNNL_MEMORY_NONE), "weights memory") &&
           ok(dnnl_memory_create(&e->dst, &dmd, eng, DNNL_MEMORY_NONE), "dst memory");
    if (good && need) good = ok(dnnl_memory_create(&e->scr, scr_md, eng, scratch), "scratchpad memory");
  }
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (po) dnnl_post_ops_destroy(po);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (!good) drop(e);
  else n_created++;
  return good;
}

static entry *lookup(const key_t_ *k) {
  for (int i = 0; i < n_cache; i++)
    if (!memcmp(&cache[i].k, k, sizeof *k)) return &cache[i];
  entry *e;
  if (n_cache < CACHE) e = &cache[n_cache++];
  else { // evict the least recently used
    e = &cache[0];
    for (int i = 1; i < CACHE; i++)
      if (cache[i].used < e->used) e = &cache[i];
    drop(e);
  }
  if (!create(e, k)) {
    // keep the slot empty (an all-zero key never matches a real call: M >= 1)
    return NULL;
  }
  return e;
}

int lc_gemm_dnnl_limit_isa(int allow_amx) {
  // Only before oneDNN has generated code (the first primitive): false afterwards.
  return dnnl_set_max_cpu_isa(allow_amx ? dnnl_cpu_isa_all : dnnl_cpu_isa_avx512_core_bf16) == dnnl_success;
}

static int init(void) {
  if (eng) return 1;
  if (init_failed) return 0;
  if (!ok(dnnl_engine_create(&eng, dnnl_cpu, 0), "engine") ||
      !ok(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags), "stream")) {
    init_failed = 1;
    return 0;
  }
  return 1;
}

static void run(int f32, int ta, int tb, int M, int N, int K, const void *A, long lda, const void *B, long ldb,
                float beta, float *C, long ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) { // empty product: C = beta C
    if (beta == 0.0f)
      for (int i = 0; i < M; i++) memset(C + (size_t)i * ldc, 0, sizeof(float) * (size_t)N);
    return;
  }
  key_t_ k;
  memset(&k, 0, sizeof k); // padding bytes take part in the memcmp
  k.ta = !!ta, k.tb = !!tb, k.M = M, k.N = N, k.K = K, k.lda = lda, k.ldb = ldb, k.ldc = ldc;
  k.beta = beta != 0.0f;
  k.f32 = f32;
  pthread_mutex_lock(&mu);
  entry *e = init() ? lookup(&k) : NULL;
  if (!e) {
    pthread_mutex_unlock(&mu);
    fprintf(stderr, "longctx: oneDNN %s matmul %dx%dx%d (ta %d tb %d) unavailable\n", f32 ? "fp32" : "bf16", M, N, K, ta, tb);
    abort();
  }
  e->used = ++stamp;
  dnnl_memory_set_data_handle(e->src, (void *)A);
  dnnl_memory_set_data_handle(e->wei, (void *)B);
  dnnl_memory_set_data_handle(e->dst, C);
  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, e->src}, {DNNL_ARG_WEIGHTS, e->wei}, {DNNL_ARG_DST, e->dst},
                             {DNNL_ARG_SCRATCHPAD, e->scr}};
  int nargs = e->scr ? 4 : 3;
  if (!ok(dnnl_primitive_execute(e->prim, strm, nargs, args), "matmul execute") ||
      !ok(dnnl_stream_wait(strm), "stream wait")) {
    pthread_mutex_unlock(&mu);
    abort();
  }
  pthread_mutex_unlock(&mu);
}

void lc_gemm_dnnl_bf16(int ta, int tb, int M, int N, int K, const uint16_t *A, long lda, const uint16_t *B, long ldb,
                       float beta, float *C, long ldc) {
  run(0, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

void lc_gemm_dnnl_f32(int ta, int tb, int M, int N, int K, const float *A, long lda, const float *B, long ldb, float beta,
                      float *C, long ldc) {
  run(1, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

size_t lc_gemm_dnnl_scratch_bytes(void) {
  pthread_mutex_lock(&mu);
  size_t b = scratch_bytes;
  pthread_mutex_unlock(&mu);
  return b;
}

long lc_gemm_dnnl_primitives(void) {
  pthread_mutex_lock(&mu);
  long n = n_created;
  pthread_mutex_unlock(&mu);
  return n;
}

const char *lc_gemm_dnnl_impl(void) {
  pthread_mutex_lock(&mu);
  const char *s = last_impl[0] ? last_impl : "none";
  pthread_mutex_unlock(&mu);
  return s;
}
