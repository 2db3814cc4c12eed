// KV-cache decoding and sampling:
//  1. decoding agrees with the training forward: the decode log-probability of x[t+1]
//     given x[0..t] equals -(loss of lc_model_fwd_bwd over the whole sequence with the
//     single target x[t+1] counted at position t), for (a) token-by-token decoding,
//     (b) one prefill of x[0..t], (c) a prefill of part then single steps; plus a long
//     prefill over several internal chunks (all_logits) against the summed loss, also
//     with a sliding window shorter than a chunk and single steps after it;
//  2. sampling: greedy = argmax, top-k 1 = greedy, temperature sampling is deterministic
//     for a seed, stays within the top-k set and follows the softmax frequencies;
//  3. errors: id >= vocab or < 0, cache overflow, capped arena; the cache stays usable.
#include <string.h>

#include "attn/attn.h"
#include "model/generate.h"
#include "model/model.h"
#include "testutil.h"

static lc_arena arena;

// A random tiny model: lc_model_init_random, then matrices rescaled to std 1/sqrt(fan_in)
// (embedding std 1) so activations and logits are O(1) and differ strongly between
// tokens (at init std 0.02 every log-prob is ~ -ln 256 and the comparison would be
// weak), and norm weights 1 + 0.3 N(0,1) so they are not all ones.
static void make_model(lc_model *m, int L, int tied, uint64_t seed) {
  lc_config cfg;
  lc_config_preset(&cfg, "tiny");
  cfg.n_layers = L;
  cfg.tie_embeddings = tied;
  cfg.rope_theta = 500.0; // positions change the result a lot at small T
  CHECK(lc_model_create(m, &cfg, &arena) == LC_OK, "create: %s", lc_errmsg());
  lc_model_init_random(m, seed);
  lc_rng r;
  lc_rng_seed(&r, seed + 100);
  for (int i = 0; i < m->n_tensors; i++) {
    float *p = m->params + m->table[i].offset;
    long n = (long)m->table[i].numel;
    if (m->table[i].ndim == 1) {
      for (long j = 0; j < n; j++) p[j] = 1.0f + 0.3f * lc_rng_normal(&r);
    } else {
      float f = (strstr(m->table[i].name, "embed") ? 1.0f : 1.0f / sqrtf((float)m->table[i].shape[1])) / 0.02f;
      for (long j = 0; j < n; j++) p[j] *= f;
    }
  }
}

// -(log p(x[t+1] | x[0..t])) by the training forward over all T tokens, one counted target.
static double train_nll(lc_model *m, const int *x, int T, int t) {
  lc_attn attn;
  lc_attn_local_init(&attn, m->cfg.n_heads, m->cfg.n_kv_heads, m->cfg.head_dim);
  int tgt[64], pos[64];
  for (int i = 0; i < T; i++) {
    tgt[i] = i == t ? x[t + 1] : -100;
    pos[i] = i;
  }
  lc_model_opts o = {LC_CKPT_NONE, 0, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0};
  double loss = 0;
  lc_status st = lc_model_fwd_bwd(m, &o, &attn, NULL, x, tgt, pos, T, 1.0f, 0, &loss);
  CHECK(st == LC_OK, "fwd_bwd: %s", lc_errmsg());
  return loss;
}

static double log_softmax_at(const float *l, int V, int k) {
  double mx = l[0];
  for (int i = 1; i < V; i++) mx = fmax(mx, l[i]);
  double s = 0;
  for (int i = 0; i < V; i++) s += exp((double)l[i] - mx);
  return (double)l[k] - mx - log(s);
}

// Tolerance of decode vs training forward. Both compute the same fp32 arithmetic but with
// different GEMM shapes (1 row vs 29 rows: different BLAS kernels and summation orders)
// and different attention blocking (one key block vs a growing cache), so each logit
// carries independent rounding ~1e-6 relative through 2 layers; the log-softmax of O(1..10)
// values then differs by ~1e-6 relative. 1e-5 relative (plus 1e-5 absolute for nll near 0)
// leaves 10x margin, while any real mistake (wrong RoPE position, mask, cache row, a
// missing norm weight) changes the nll by >= 1e-2.
static void cmp_nll(const char *what, int t, double got, double want, double *worst) {
  double r = fabs(got - want) / (1e-5 + 1e-5 * fabs(want));
  if (r > *worst) *worst = r;
  CHECK(r <= 1.0, "%s t=%d: decode nll %.9g vs training forward %.9g", what, t, got, want);
}

static void test_consistency(int tied) {
  lc_model m;
  make_model(&m, 2, tied, 3 + tied);
  const int T = 29, V = m.cfg.vocab;
  int x[29];
  lc_rng r;
  lc_rng_seed(&r, 21 + tied);
  for (int i = 0; i < T; i++) x[i] = (int)lc_rng_below(&r, (uint32_t)V);
  const int ts[] = {0, 1, 4, 13, 20, 27};
  const int nts = (int)(sizeof ts / sizeof ts[0]);
  double want[29];
  for (int i = 0; i < nts; i++) want[ts[i]] = train_nll(&m, x, T, ts[i]);
  // The test must be sharp: the nll values vary a lot between positions.
  CHECK(fabs(want[13] - want[20]) > 1e-2 && fabs(want[0] - want[27]) > 1e-2,
        "nll barely varies (%.4g %.4g %.4g %.4g): model too uniform to test", want[0], want[13],
        want[20], want[27]);
  float *logits = malloc(sizeof(float) * (size_t)T * V);
  lc_kv_cache c;
  double worst = 0;

  // (a) token by token
  CHECK(lc_kv_cache_create(&c, &m.cfg, T, m.ps.be) == LC_OK, "cache: %s", lc_errmsg());
  for (int t = 0, i = 0; t < T - 1; t++) {
    CHECK(lc_decode(&m, &c, &x[t], 1, logits, 0, &arena) == LC_OK, "decode: %s", lc_errmsg());
    CHECK(c.len == t + 1, "cache length %d after %d tokens", c.len, t + 1);
    if (i < nts && ts[i] == t) cmp_nll("token-by-token", t, -log_softmax_at(logits, V, x[t + 1]), want[ts[i++]], &worst);
  }
  lc_kv_cache_destroy(&c);

  // (b) one prefill of x[0..t] into a fresh cache (last-token logits), and one prefill of
  // x[0..27] with all_logits checked at every tested position
  for (int i = 0; i < nts; i++) {
    int t = ts[i];
    CHECK(lc_kv_cache_create(&c, &m.cfg, T, m.ps.be) == LC_OK, "cache: %s", lc_errmsg());
    CHECK(lc_decode(&m, &c, x, t + 1, logits, 0, &arena) == LC_OK, "prefill: %s", lc_errmsg());
    cmp_nll("prefill", t, -log_softmax_at(logits, V, x[t + 1]), want[t], &worst);
    lc_kv_cache_destroy(&c);
  }
  CHECK(lc_kv_cache_create(&c, &m.cfg, T, m.ps.be) == LC_OK, "cache: %s", lc_errmsg());
  CHECK(lc_decode(&m, &c, x, T - 1, logits, 1, &arena) == LC_OK, "prefill all: %s", lc_errmsg());
  for (int i = 0; i < nts; i++)
    cmp_nll("prefill all_logits", ts[i], -log_softmax_at(logits + (size_t)ts[i] * V, V, x[ts[i] + 1]),
            want[ts[i]], &worst);
  lc_kv_cache_destroy(&c);

  // (c) prefill of x[0..10) then single steps (and a 3-token step in the middle)
  CHECK(lc_kv_cache_create(&c, &m.cfg, T, m.ps.be) == LC_OK, "cache: %s", lc_errmsg());
  CHECK(lc_decode(&m, &c, x, 10, logits, 0, &arena) == LC_OK, "prefill: %s", lc_errmsg());
  for (int t = 10; t < T - 1;) {
    int n = t == 15 ? 3 : 1;
    CHECK(lc_decode(&m, &c, &x[t], n, logits, 0, &arena) == LC_OK, "step: %s", lc_errmsg());
    t += n;
    for (int i = 0; i < nts; i++)
      if (ts[i] == t - 1) cmp_nll("prefill+steps", t - 1, -log_softmax_at(logits, V, x[t]), want[t - 1], &worst);
  }
  CHECK(c.len == T - 1, "cache length %d, want %d", c.len, T - 1);
  lc_kv_cache_destroy(&c);
  printf("decode vs training forward (%s head): worst ratio %.3f\n", tied ? "tied" : "untied", worst);
  free(logits);
  lc_model_destroy(&m);
}

// A prefill longer than LC_DECODE_CHUNK runs in several chunks (later chunks attend to
// the cache written by earlier ones): sum over t of nll(x[t+1] | x[0..t]) from all_logits
// equals the training loss with every target counted. Tolerance: the sum of T ~ 5.5
// values in double from float logits; relative rounding as above, 1e-5. With a sliding
// window (Mistral) of fewer tokens than a chunk, the first queries of each later chunk
// see keys of the chunk before only back to the window's start; the reference is the
// training forward with the same per-token bound. The last `steps` tokens are decoded one
// at a time after the prefill.
static void test_long_prefill(int window, int steps) {
  lc_model m;
  make_model(&m, 1, 0, 9);
  m.cfg.sliding_window = window;
  const int T = 2 * LC_DECODE_CHUNK + 37, V = m.cfg.vocab;
  int *x = malloc(sizeof(int) * T), *tgt = malloc(sizeof(int) * T), *pos = malloc(sizeof(int) * T);
  int *lo = malloc(sizeof(int) * T);
  lc_rng r;
  lc_rng_seed(&r, 4);
  for (int i = 0; i < T; i++) x[i] = (int)lc_rng_below(&r, (uint32_t)V);
  for (int i = 0; i < T; i++) {
    tgt[i] = i + 1 < T ? x[i + 1] : -100;
    pos[i] = i;
    lo[i] = window > 0 && i - window + 1 > 0 ? i - window + 1 : 0;
  }
  lc_attn attn;
  lc_attn_local_init(&attn, m.cfg.n_heads, m.cfg.n_kv_heads, m.cfg.head_dim);
  const lc_pass_in pin = {.attn = {.lo = window > 0 ? lo : NULL}};
  lc_model_opts o = {LC_CKPT_NONE, 0, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0};
  double want = 0;
  CHECK(lc_model_fwd_bwd(&m, &o, &attn, &pin, x, tgt, pos, T, 1.0f, 0, &want) == LC_OK, "fwd: %s",
        lc_errmsg());
  float *logits = malloc(sizeof(float) * (size_t)T * V);
  lc_kv_cache c;
  CHECK(lc_kv_cache_create(&c, &m.cfg, T, m.ps.be) == LC_OK, "cache: %s", lc_errmsg());
  const int pre = T - 1 - steps;
  CHECK(lc_decode(&m, &c, x, pre, logits, 1, &arena) == LC_OK, "prefill: %s", lc_errmsg());
  for (int t = pre; t < T - 1; t++)
    CHECK(lc_decode(&m, &c, &x[t], 1, logits + (size_t)t * V, 0, &arena) == LC_OK, "step: %s", lc_errmsg());
  double got = 0;
  for (int t = 0; t < T - 1; t++) got -= log_softmax_at(logits + (size_t)t * V, V, x[t + 1]);
  CHECK(fabs(got - want) <= 1e-5 * fabs(want),
        "long prefill (%d tokens, chunks of %d, window %d, %d single steps): nll sum %.9g vs %.9g", pre,
        LC_DECODE_CHUNK, window, steps, got, want);
  printf("long prefill %d tokens + %d steps, window %d: nll sum %.6f vs training %.6f\n", pre, steps, window, got,
         want);
  lc_kv_cache_destroy(&c);
  free(logits);
  free(lo);
  free(x);
  free(tgt);
  free(pos);
  lc_model_destroy(&m);
}

// A length-dependent RoPE (dynamic NTK past max_position_embeddings 64) over a prefill of
// several chunks: every chunk must use the frequencies of the whole call's length, as the
// training forward over the same tokens does (a chunk using its own end would not).
static void test_long_prefill_dynamic(void) {
  lc_model m;
  make_model(&m, 1, 0, 11);
  m.cfg.max_pos = 64;
  m.cfg.rope = (lc_rope_scaling){.type = LC_ROPE_DYNAMIC, .factor = 4};
  const int N = 2 * LC_DECODE_CHUNK + 37, V = m.cfg.vocab; // tokens; N - 1 inputs predict x[1..N)
  int *x = malloc(sizeof(int) * N), *tgt = malloc(sizeof(int) * N), *pos = malloc(sizeof(int) * N);
  lc_rng r;
  lc_rng_seed(&r, 6);
  for (int i = 0; i < N; i++) x[i] = (int)lc_rng_below(&r, (uint32_t)V);
  for (int i = 0; i < N - 1; i++) tgt[i] = x[i + 1], pos[i] = i;
  lc_attn attn;
  lc_attn_local_init(&attn, m.cfg.n_heads, m.cfg.n_kv_heads, m.cfg.head_dim);
  lc_model_opts o = {LC_CKPT_NONE, 0, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0};
  double want = 0;
  CHECK(lc_model_fwd_bwd(&m, &o, &attn, NULL, x, tgt, pos, N - 1, 1.0f, 0, &want) == LC_OK, "fwd: %s", lc_errmsg());
  float *logits = malloc(sizeof(float) * (size_t)N * V);
  lc_kv_cache c;
  CHECK(lc_kv_cache_create(&c, &m.cfg, N, m.ps.be) == LC_OK, "cache: %s", lc_errmsg());
  CHECK(lc_decode(&m, &c, x, N - 1, logits, 1, &arena) == LC_OK, "prefill: %s", lc_errmsg());
  double got = 0;
  for (int t = 0; t < N - 1; t++) got -= log_softmax_at(logits + (size_t)t * V, V, x[t + 1]);
  CHECK(fabs(got - want) <= 1e-5 * fabs(want), "dynamic RoPE prefill over chunks: nll sum %.9g vs %.9g", got, want);
  printf("long prefill %d tokens, dynamic RoPE beyond 64: nll sum %.6f vs training %.6f\n", N - 1, got, want);
  lc_kv_cache_destroy(&c);
  free(logits), free(x), free(tgt), free(pos);
  lc_model_destroy(&m);
}

static void test_sampling(void) {
  enum { V = 50 };
  float l[V];
  lc_rng r;
  lc_rng_seed(&r, 77);
  for (int i = 0; i < V; i++) l[i] = 3.0f * tanhf(lc_rng_normal(&r)); // in (-3, 3)
  l[17] = 5.0f; // the unique argmax
  l[3] = 4.0f;  // second
  lc_sampling greedy = {0.0f, 0, 1}, top1 = {1.0f, 1, 1};
  lc_rng g;
  lc_rng_seed(&g, 1);
  CHECK(lc_sample(l, V, &greedy, &g) == 17, "greedy picked %d, want 17", lc_sample(l, V, &greedy, &g));
  for (int i = 0; i < 20; i++) CHECK(lc_sample(l, V, &top1, &g) == 17, "top-k 1 is not greedy");
  float tie[4] = {1.0f, 3.0f, 3.0f, 0.0f};
  CHECK(lc_sample(tie, 4, &greedy, &g) == 1, "greedy tie: want the first index");

  // Temperature sampling, top-k 5: deterministic for a seed, within the top-5 set, and the
  // frequencies follow softmax(l/T) renormalised over the set.
  const int K = 5, N = 20000;
  lc_sampling s = {0.7f, K, 42};
  int top[5], order[V];
  for (int i = 0; i < V; i++) order[i] = i;
  for (int i = 0; i < K; i++) // selection sort of the K largest
    for (int j = i + 1; j < V; j++)
      if (l[order[j]] > l[order[i]]) { int t = order[i]; order[i] = order[j]; order[j] = t; }
  for (int i = 0; i < K; i++) top[i] = order[i];
  double p[5], z = 0;
  for (int i = 0; i < K; i++) z += p[i] = exp((l[top[i]] - 5.0) / 0.7);
  lc_rng r1, r2;
  lc_rng_seed(&r1, s.seed);
  lc_rng_seed(&r2, s.seed);
  int cnt[V] = {0}, same = 1, outside = 0;
  for (int n = 0; n < N; n++) {
    int a = lc_sample(l, V, &s, &r1), b = lc_sample(l, V, &s, &r2);
    same &= a == b;
    int in = 0;
    for (int i = 0; i < K; i++) in |= a == top[i];
    outside += !in;
    cnt[a]++;
  }
  CHECK(same, "same seed, different samples");
  CHECK(outside == 0, "%d of %d samples outside the top-%d set", outside, N, K);
  // Binomial std of a frequency <= sqrt(0.25/N) = 0.0035; 5 std = 0.018.
  for (int i = 0; i < K; i++)
    CHECK(fabs(cnt[top[i]] / (double)N - p[i] / z) <= 0.018, "token %d: frequency %.4f vs softmax %.4f",
          top[i], cnt[top[i]] / (double)N, p[i] / z);
  // Another seed gives another sequence.
  lc_rng_seed(&r1, 42);
  lc_rng_seed(&r2, 43);
  int diff = 0;
  for (int n = 0; n < 50; n++) diff += lc_sample(l, V, &s, &r1) != lc_sample(l, V, &s, &r2);
  CHECK(diff > 0, "seeds 42 and 43 gave identical samples");
  // Ties at the k-th value: exactly k tokens take part (the lower indices).
  float eq[6] = {1.0f, 1.0f, 1.0f, 1.0f, 9.0f, 1.0f};
  lc_sampling s3 = {100.0f, 3, 1};
  int seen[6] = {0};
  for (int n = 0; n < 2000; n++) seen[lc_sample(eq, 6, &s3, &r1)]++;
  CHECK(seen[4] > 0 && seen[0] > 0 && seen[1] > 0 && !seen[2] && !seen[3] && !seen[5],
        "ties at the k-th value: counts %d %d %d %d %d %d", seen[0], seen[1], seen[2], seen[3], seen[4], seen[5]);
  // top_k 0 = whole vocabulary: at a high temperature every token shows up.
  lc_sampling all = {50.0f, 0, 1};
  int hit[V] = {0}, nhit = 0;
  for (int n = 0; n < 5000; n++) hit[lc_sample(l, V, &all, &r1)] = 1;
  for (int i = 0; i < V; i++) nhit += hit[i];
  CHECK(nhit == V, "top-k 0 at temperature 50 reached only %d of %d tokens", nhit, V);
}

static void test_errors(void) {
  lc_model m;
  make_model(&m, 1, 0, 5);
  const int V = m.cfg.vocab;
  float *logits = malloc(sizeof(float) * (size_t)V);
  lc_kv_cache c;
  CHECK(lc_kv_cache_create(&c, &m.cfg, 8, m.ps.be) == LC_OK, "cache: %s", lc_errmsg());
  int bad[3] = {1, 256, 2}, neg[1] = {-1}, ok[6] = {1, 2, 3, 4, 5, 6};
  lc_status st = lc_decode(&m, &c, bad, 3, logits, 0, &arena);
  CHECK(st == LC_EINVAL && strstr(lc_errmsg(), "256") && strstr(lc_errmsg(), "vocabulary"),
        "id >= vocab: status %d '%s'", st, lc_errmsg());
  st = lc_decode(&m, &c, neg, 1, logits, 0, &arena);
  CHECK(st == LC_EINVAL && strstr(lc_errmsg(), "-1"), "negative id: status %d '%s'", st, lc_errmsg());
  CHECK(c.len == 0, "rejected tokens changed the cache length to %d", c.len);
  CHECK(lc_decode(&m, &c, ok, 6, logits, 0, &arena) == LC_OK, "decode: %s", lc_errmsg());
  st = lc_decode(&m, &c, ok, 3, logits, 0, &arena); // 6 + 3 > 8
  CHECK(st == LC_EINVAL && strstr(lc_errmsg(), "KV cache holds 8") && strstr(lc_errmsg(), "needs 9"),
        "cache overflow: status %d '%s'", st, lc_errmsg());
  CHECK(c.len == 6, "overflow changed the cache length to %d", c.len);
  CHECK(lc_decode(&m, &c, ok, 2, logits, 0, &arena) == LC_OK && c.len == 8, "filling the cache: %s",
        lc_errmsg());
  st = lc_decode(&m, &c, ok, 1, logits, 0, &arena);
  CHECK(st == LC_EINVAL && c.len == 8, "full cache accepted a token: status %d", st);
  CHECK(lc_decode(&m, &c, ok, 0, logits, 0, &arena) == LC_EINVAL, "n = 0 accepted");
  lc_kv_cache_destroy(&c);
  // Bad lengths and a capped arena give clean errors and leak nothing.
  CHECK(lc_kv_cache_create(&c, &m.cfg, 0, m.ps.be) == LC_EINVAL, "cache of 0 positions accepted");
  lc_config small_pos = m.cfg;
  small_pos.max_pos = 16;
  st = lc_kv_cache_create(&c, &small_pos, 17, m.ps.be);
  CHECK(st == LC_EINVAL && strstr(lc_errmsg(), "max_position_embeddings"), "cache > max_pos: '%s'",
        lc_errmsg());
  // (the cache and the working buffers are the model's backend's: a model in a capped arena)
  lc_arena capped;
  lc_arena_init(&capped, 0);
  lc_model mc;
  CHECK(lc_model_create(&mc, &m.cfg, &capped) == LC_OK, "model in a capped arena: %s", lc_errmsg());
  capped.cap = capped.cur_total + (1 << 20);
  st = lc_kv_cache_create(&c, &mc.cfg, 1 << 20, mc.ps.be);
  CHECK(st == LC_ENOMEM && strstr(lc_errmsg(), "KV cache") && !lc_buf_ok(c.buf), "capped arena: status %d '%s'",
        st, lc_errmsg());
  // A cache that fits but a prefill whose working buffers do not: clean ENOMEM, length kept.
  CHECK(lc_kv_cache_create(&c, &mc.cfg, 600, mc.ps.be) == LC_OK, "small cache: %s", lc_errmsg());
  capped.cap = capped.cur_total + 4096;
  int *many = calloc(600, sizeof(int));
  st = lc_decode(&mc, &c, many, 600, logits, 0, &capped);
  CHECK(st == LC_ENOMEM && c.len == 0, "prefill past the cap: status %d, len %d", st, c.len);
  lc_kv_cache_destroy(&c);
  lc_model_destroy(&mc);
  CHECK(capped.cur_total == 0, "capped arena holds %zu bytes after the failures", capped.cur_total);
  free(many);
  free(logits);
  lc_model_destroy(&m);
}

int main(void) {
  lc_arena_init(&arena, 0);
  test_long_prefill_dynamic();
  test_consistency(0);
  test_consistency(1);
  test_long_prefill(0, 0);
  test_long_prefill(100, 5);
  test_sampling();
  test_errors();
  CHECK(arena.cur_total == 0, "arena still holds %zu bytes at exit", arena.cur_total);
  return lc_test_finish("test_generate");
}
