#include "model/generate.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/dtype.h"
#include "attn/attn.h"
#include "backend/backend.h"
#include "model/layer.h"
#include "ops/ops.h"
#include "ops/kernels.h"

#define PAD16(n) (((size_t)(n) + 15) & ~(size_t)15)

// ---------------------------------------------------------------- KV cache
lc_status lc_kv_cache_create(lc_kv_cache *c, const lc_config *cfg, int max_len, lc_arena *a) {
  memset(c, 0, sizeof *c);
  LC_TRY(lc_config_validate(cfg));
  if (max_len < 1)
    return lc_fail(LC_EINVAL, "KV cache length %d: it must hold at least one position", max_len);
  if (max_len > lc_config_max_positions(cfg))
    return lc_fail(LC_EINVAL,
                   "KV cache of %d positions exceeds the model's max_position_embeddings %d: "
                   "use at most %d positions (shorter prompt or fewer new tokens)",
                   max_len, cfg->max_pos, cfg->max_pos);
  c->max_len = max_len;
  c->n_layers = cfg->n_layers;
  c->kv_dim = cfg->n_kv_heads * cfg->head_dim;
  size_t floats = (size_t)2 * cfg->n_layers * (size_t)max_len * (size_t)c->kv_dim;
  c->buf = lc_alloc(a, LC_MEM_ACT, lc_bytes(LC_DT_F32, floats), "KV cache");
  if (!c->buf) {
    memset(c, 0, sizeof *c);
    return LC_ENOMEM;
  }
  return LC_OK;
}

void lc_kv_cache_destroy(lc_kv_cache *c, lc_arena *a) {
  lc_free(a, c->buf);
  memset(c, 0, sizeof *c);
}

float *lc_kv_cache_k(const lc_kv_cache *c, int l) {
  return c->buf + (size_t)2 * l * (size_t)c->max_len * (size_t)c->kv_dim;
}

float *lc_kv_cache_v(const lc_kv_cache *c, int l) {
  return lc_kv_cache_k(c, l) + (size_t)c->max_len * (size_t)c->kv_dim;
}

// ---------------------------------------------------------------- decode
// Working buffers for chunks of up to `ch` tokens (one LC_MEM_ACT block of host memory):
// the residual stream in and out of a layer, the layer's activations, the RoPE tables.
// (The decode path is host memory yet: its buffers go to the layer wrapped for the store's
// backend, which must be one of host memory; transitional, backend.h.)
typedef struct {
  float *x, *y, *cos, *sin, *ln1, *rstd1;
  int *pos, *lo;
  lc_layer_acts acts;
} dec_bufs;

static float *take(float **p, size_t n) {
  float *r = *p;
  *p += PAD16(n);
  return r;
}

// Floats of the block; be non-NULL: carves base into b, activations wrapped (adt: the act
// dtype, which the floats' room holds either way).
static size_t dec_floats(const lc_config *cfg, int ch, lc_backend *be, lc_dtype adt, dec_bufs *b, float *base) {
  const size_t C = cfg->dim, HQ = (size_t)cfg->n_heads * cfg->head_dim, F = cfg->ffn;
  const size_t KV = (size_t)cfg->n_kv_heads * cfg->head_dim;
  float *p = base;
  dec_bufs d;
  memset(&d, 0, sizeof d);
#define W(n, dt) (be ? lc_buf_wrap_host(be, take(&p, (n)), (n), (dt)) : (take(&p, (n)), (lc_buf){0}))
  d.x = take(&p, ch * C);
  d.y = take(&p, ch * C);
  d.cos = take(&p, (size_t)ch * (cfg->head_dim / 2));
  d.sin = take(&p, (size_t)ch * (cfg->head_dim / 2));
  d.pos = (int *)take(&p, ch); // sizeof(int) == sizeof(float) on every supported platform
  d.lo = (int *)take(&p, ch);
  lc_layer_acts *a = &d.acts;
  d.ln1 = p;
  a->ln1 = W(ch * C, adt);
  d.rstd1 = p;
  a->rstd1 = W(ch, LC_DT_F32);
  a->q = W(ch * HQ, adt);
  a->k = W(ch * KV, adt);
  a->v = W(ch * KV, adt);
  const size_t nqk = lc_layer_qknorm_floats(cfg, ch);
  lc_layer_qknorm_carve(a, cfg, ch, be && nqk ? lc_buf_wrap_host(be, p, nqk, LC_DT_F32) : (lc_buf){0});
  p += nqk;
  a->att = W(ch * HQ, adt);
  a->saved = be ? lc_buf_wrap_host(be, p, lc_bytes(LC_DT_F32, (size_t)cfg->n_heads * ch), LC_DT_U8) : (lc_buf){0};
  take(&p, (size_t)cfg->n_heads * ch); // the decode strategy's lse
  a->x_mid = W(ch * C, LC_DT_F32);
  a->ln2 = W(ch * C, adt);
  a->rstd2 = W(ch, LC_DT_F32);
  a->gate = W(ch * F, adt);
  a->up = W(ch * F, adt);
  a->h = W(ch * F, adt);
#undef W
  if (be) *b = d;
  return (size_t)(p - base);
}

// One chunk of nn tokens at positions p0.. through every layer with the training layer's
// forward (model/layer.c) and the decode attention strategy, which appends k/v rows
// [p0, p0+nn) to the cache. b->x holds the embeddings on entry; returns the buffer that
// holds the final residual stream.
static float *dec_layers(const lc_model *m, lc_kv_cache *c, dec_bufs *b, int p0, int nn, int rope_len, lc_arena *a,
                         lc_status *st) {
  const lc_config *cfg = &m->cfg;
  lc_backend *be = m->ps.be;
  const int W = cfg->sliding_window;
  for (int i = 0; i < nn; i++) b->pos[i] = p0 + i, b->lo[i] = lc_visible_from(p0 + i, 0, W);
  lc_model_rope_table(cfg, rope_len, b->pos, nn, b->cos, b->sin);
  lc_attn_decode_state ds = {.p0 = p0, .max_len = c->max_len};
  lc_attn attn;
  lc_attn_decode_init(&attn, cfg->n_heads, cfg->n_kv_heads, cfg->head_dim, &ds);
  attn.lo = W > 0 ? b->lo : NULL; // the same bounds for every layer
  const size_t half = (size_t)nn * (cfg->head_dim / 2), nC = (size_t)nn * cfg->dim;
  const lc_layer_ctx lc = {.cfg = cfg, .attn = &attn, .rope_cos = lc_buf_wrap_host(be, b->cos, half, LC_DT_F32),
                           .rope_sin = lc_buf_wrap_host(be, b->sin, half, LC_DT_F32), .T = nn, .mlp_tile = 0,
                           .bf16 = m->ps.compute == LC_DT_BF16, .arena = a, .be = be};
  // The chunk's activations: the first nn rows of each (the layer reads [nn, ...] buffers).
  lc_layer_acts acts = b->acts;
  lc_buf *f[] = {&acts.ln1, &acts.rstd1, &acts.q, &acts.k, &acts.v, &acts.qp, &acts.kp, &acts.rstdq, &acts.rstdk,
                 &acts.att, &acts.x_mid, &acts.ln2, &acts.rstd2, &acts.gate, &acts.up, &acts.h};
  const int ch = (int)(b->acts.rstd1.n); // the block's chunk length
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (lc_buf_ok(*f[i])) *f[i] = lc_buf_view(*f[i], 0, f[i]->n / (size_t)ch * (size_t)nn);
  float *x = b->x, *y = b->y;
  *st = LC_OK;
  for (int l = 0; l < cfg->n_layers && *st == LC_OK; l++) {
    ds.k = lc_kv_cache_k(c, l);
    ds.v = lc_kv_cache_v(c, l);
    *st = lc_layer_fwd(&lc, &m->ps.w.layer[l], &acts, lc_buf_wrap_host(be, x, nC, LC_DT_F32),
                       lc_buf_wrap_host(be, y, nC, LC_DT_F32), 0);
    float *t = x;
    x = y, y = t;
  }
  return x;
}

lc_status lc_decode(const lc_model *m, lc_kv_cache *c, const int *tokens, int n, float *logits,
                    int all_logits, lc_arena *a) {
  const lc_config *cfg = &m->cfg;
  const int C = cfg->dim, V = cfg->vocab;
  if (n < 1) return lc_fail(LC_EINVAL, "lc_decode: %d tokens: pass at least one token", n);
  if (c->n_layers != cfg->n_layers || c->kv_dim != cfg->n_kv_heads * cfg->head_dim)
    return lc_fail(LC_EINVAL, "lc_decode: the KV cache was created for another model config: "
                              "create it from this model's config");
  for (int i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= V)
      return lc_fail(LC_EINVAL, "token id %d (input token %d) is outside the vocabulary [0, %d): "
                                "use ids below the vocabulary size",
                     tokens[i], i, V);
  if (n > c->max_len - c->len)
    return lc_fail(LC_EINVAL, "decoding %d token%s at position %d needs %d positions but the KV "
                              "cache holds %d: create a longer cache (fewer new tokens or a "
                              "shorter prompt)",
                   n, n == 1 ? "" : "s", c->len, c->len + n, c->max_len);
  lc_backend *be = m->ps.be;
  const float *embed = lc_buf_host_or_fail(m->ps.w.embed, "generation"), *norm = lc_buf_host(m->ps.w.norm),
              *head = lc_buf_host(m->ps.w.head);
  if (!embed || !norm || !head) return LC_EINVAL;
  const int bf16 = m->ps.compute == LC_DT_BF16;
  const int ch = n < LC_DECODE_CHUNK ? n : LC_DECODE_CHUNK;
  size_t nf = dec_floats(cfg, ch, NULL, LC_DT_F32, NULL, NULL);
  float *work = lc_alloc(a, LC_MEM_ACT, lc_bytes(LC_DT_F32, nf), "decoding activations");
  if (!work) return LC_ENOMEM;
  dec_bufs b;
  dec_floats(cfg, ch, be, lc_layer_act_dt(bf16), &b, work);
  const int len0 = c->len;
  lc_status st = LC_OK;
  for (int t0 = 0; t0 < n && st == LC_OK; t0 += ch) {
    const int nn = n - t0 < ch ? n - t0 : ch;
    lc_embedding_fwd(b.x, tokens + t0, embed, nn, C);
    // A length-dependent RoPE scaling sees the length at the end of this call, as
    // transformers' cache does (keys made earlier keep the frequencies of their call).
    const float *x = dec_layers(m, c, &b, c->len, nn, len0 + n, a, &st);
    if (st != LC_OK) break;
    c->len += nn;
    float *ln = b.ln1, *rstd = b.rstd1; // free once the layers are done (ln1's slot holds fp32)
    const lc_mm mm = {.bf16 = bf16, .arena = a};
    if (all_logits) {
      lc_rmsnorm_fwd(ln, rstd, x, norm, nn, C, cfg->norm_eps);
      if (bf16) lc_bf16_round(ln, (size_t)nn * C);
      st = lc_matmul_fwd(&mm, logits + (size_t)t0 * V, LC_DT_F32, lc_act_f32(ln), lc_act_f32(head), nn, C, V);
    } else if (t0 + nn == n) {
      lc_rmsnorm_fwd(ln, rstd, x + (size_t)(nn - 1) * C, norm, 1, C, cfg->norm_eps);
      if (bf16) lc_bf16_round(ln, (size_t)C);
      st = lc_matmul_fwd(&mm, logits, LC_DT_F32, lc_act_f32(ln), lc_act_f32(head), 1, C, V);
    }
  }
  if (st != LC_OK) c->len = len0; // rows past len are ignored: the cache is as before
  lc_free(a, work);
  return st;
}

void lc_model_bf16_inference(lc_model *m) {
  lc_bf16_round(m->ps.params, m->ps.n_params);
  lc_pstore_set_compute(&m->ps, LC_DT_BF16);
}

// ---------------------------------------------------------------- sampling
// Order-preserving map of a float to uint32 (NaN is mapped below -inf: never chosen).
static uint32_t fkey(float f) {
  if (f != f) return 0;
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

static int argmax(const float *l, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (l[i] > l[best] || l[best] != l[best]) best = i;
  return best;
}

int lc_sample(const float *l, int vocab, const lc_sampling *s, lc_rng *rng) {
  if (vocab <= 1) return 0;
  int k = s->top_k <= 0 || s->top_k > vocab ? vocab : s->top_k;
  if (!(s->temperature > 0) || k == 1) return argmax(l, vocab);
  const int best = argmax(l, vocab);
  const double mx = l[best], inv_t = 1.0 / s->temperature;
  if (mx != mx) return 0; // every logit NaN
  // Threshold key K = the k-th largest key: the largest K with count(key >= K) >= k, by
  // bisection over the 32-bit keys (32 passes, no sort and no allocation).
  uint32_t K = 0;
  if (k < vocab) {
    uint64_t lo = 0, hi = 0xFFFFFFFFu; // invariant: count(>= lo) >= k
    while (lo < hi) {
      uint64_t mid = (lo + hi + 1) / 2;
      int cnt = 0;
      for (int i = 0; i < vocab; i++) cnt += fkey(l[i]) >= mid;
      if (cnt >= k) lo = mid;
      else hi = mid - 1;
    }
    K = (uint32_t)lo;
  }
  // Selected: keys > K, then keys == K in index order until k are taken. Two passes with
  // the same selection rule: the total, then the walk to the drawn mass.
  int above = 0;
  for (int i = 0; i < vocab; i++) above += fkey(l[i]) > K;
  double total = 0;
  for (int i = 0, ties = 0; i < vocab; i++) {
    uint32_t key = fkey(l[i]);
    if (key > K || (key == K && key != 0 && above + ties++ < k)) total += exp((l[i] - mx) * inv_t);
  }
  double u = (double)lc_rng_uniform(rng) * total, acc = 0;
  int last = best;
  for (int i = 0, ties = 0; i < vocab; i++) {
    uint32_t key = fkey(l[i]);
    if (key > K || (key == K && key != 0 && above + ties++ < k)) {
      acc += exp((l[i] - mx) * inv_t);
      last = i;
      if (u < acc) return i;
    }
  }
  return last; // u rounded up to total
}
