// Decoding with a KV cache through the training layer's forward and the decode strategy,
// the logits of the last (or every) position, and token sampling (generate.h).
#include "model/generate.h"

#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "core/dtype.h"
#include "attn/attn.h"
#include "backend/backend.h"
#include "backend/stage.h"
#include "model/layer.h"
#include "backend/scratch.h"

#define PAD16(n) (((size_t)(n) + 15) & ~(size_t)15)

// ---------------------------------------------------------------- KV cache
lc_status lc_kv_cache_create(lc_kv_cache *c, const lc_config *cfg, int max_len, lc_backend *be) {
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
  const lc_status st = lc_buf_alloc(be, LC_MEM_ACT, LC_DT_F32, floats, 0, "KV cache", &c->buf);
  if (st != LC_OK) memset(c, 0, sizeof *c);
  return st;
}

void lc_kv_cache_destroy(lc_kv_cache *c) {
  lc_buf_free(&c->buf);
  memset(c, 0, sizeof *c);
}

lc_buf lc_kv_cache_k(const lc_kv_cache *c, int l) {
  const size_t n = (size_t)c->max_len * (size_t)c->kv_dim;
  return lc_buf_view(c->buf, (size_t)2 * l * n, n);
}

lc_buf lc_kv_cache_v(const lc_kv_cache *c, int l) {
  const size_t n = (size_t)c->max_len * (size_t)c->kv_dim;
  return lc_buf_view(c->buf, (size_t)(2 * l + 1) * n, n);
}

// ---------------------------------------------------------------- decode
// Working buffers for chunks of up to `ch` tokens, one LC_MEM_ACT block of the model's
// backend: the residual stream in and out of a layer, the RoPE tables, the chunk's token
// ids and key bounds, the layer's activations (their room is fp32-sized: it holds the act
// dtype either way; ln1's room takes the final norm's fp32 output once the layers are done).
typedef struct {
  lc_buf x, y, cos, sin, tok, lo, ln;
  lc_layer_acts acts;
} dec_bufs;

static lc_buf take(lc_buf blk, size_t *at, size_t floats, lc_dtype dt) {
  const lc_buf b = lc_buf_ok(blk) ? lc_buf_part(blk, lc_bytes(LC_DT_F32, *at), floats, dt) : (lc_buf){0};
  *at += PAD16(floats);
  return b;
}

// Floats of the block; blk non-empty: carves it into b (adt: the activations' dtype).
static size_t dec_floats(const lc_config *cfg, int ch, lc_buf blk, lc_dtype adt, dec_bufs *b) {
  const size_t C = cfg->dim, HQ = (size_t)cfg->n_heads * cfg->head_dim, F = cfg->ffn;
  const size_t KV = (size_t)cfg->n_kv_heads * cfg->head_dim, half = (size_t)ch * (cfg->head_dim / 2);
  size_t at = 0;
  dec_bufs d;
  memset(&d, 0, sizeof d);
  const lc_dtype f32 = LC_DT_F32;
  d.x = take(blk, &at, ch * C, f32);
  d.y = take(blk, &at, ch * C, f32);
  d.cos = take(blk, &at, half, f32);
  d.sin = take(blk, &at, half, f32);
  d.tok = take(blk, &at, ch, LC_DT_I32);
  d.lo = take(blk, &at, ch, LC_DT_I32);
  lc_layer_acts *a = &d.acts;
  const size_t ln_at = at;
  a->ln1 = take(blk, &at, ch * C, adt);
  d.ln = lc_buf_ok(blk) ? lc_buf_part(blk, lc_bytes(f32, ln_at), ch * C, f32) : (lc_buf){0};
  a->rstd1 = take(blk, &at, ch, f32);
  a->q = take(blk, &at, ch * HQ, adt);
  a->k = take(blk, &at, ch * KV, adt);
  a->v = take(blk, &at, ch * KV, adt);
  const size_t nqk = lc_layer_qknorm_floats(cfg, ch);
  lc_layer_qknorm_carve(a, cfg, ch, lc_buf_ok(blk) && nqk ? lc_buf_part(blk, lc_bytes(f32, at), nqk, f32) : (lc_buf){0});
  at += nqk;
  a->att = take(blk, &at, ch * HQ, adt);
  const size_t nl = (size_t)cfg->n_heads * ch; // the decode strategy's lse
  a->saved = lc_buf_ok(blk) ? lc_buf_part(blk, lc_bytes(f32, at), lc_bytes(f32, nl), LC_DT_U8) : (lc_buf){0};
  at += PAD16(nl);
  a->x_mid = take(blk, &at, ch * C, f32);
  a->ln2 = take(blk, &at, ch * C, adt);
  a->rstd2 = take(blk, &at, ch, f32);
  a->gate = take(blk, &at, ch * F, adt);
  a->up = take(blk, &at, ch * F, adt);
  a->h = take(blk, &at, ch * F, adt);
  if (b) *b = d;
  return at;
}

// The first nn of ch rows of a [ch, ...] buffer.
static lc_buf first_rows(lc_buf b, int ch, int nn) {
  return lc_buf_ok(b) ? lc_buf_view(b, 0, b.n / (size_t)ch * (size_t)nn) : b;
}

// One chunk of nn tokens at positions p0.. through every layer with the training layer's
// forward (model/layer.c) and the decode attention strategy, which appends k/v rows
// [p0, p0+nn) to the cache. b->x holds the embeddings on entry; returns the buffer that
// holds the final residual stream (its first nn rows).
static lc_buf dec_layers(const lc_model *m, lc_kv_cache *c, const dec_bufs *b, int ch, int p0, int nn, int rope_len,
                         lc_arena *a, lc_status *st) {
  const lc_config *cfg = &m->cfg;
  lc_backend *be = lc_pstore_device(&m->ps);
  const int W = cfg->sliding_window;
  // positions and bounds on the host (the bounds written for the strategy)
  int *pos = lc_alloc(a, LC_MEM_SCRATCH, sizeof(int) * 2 * (size_t)nn, "decoding positions"), *lo = pos ? pos + nn : NULL;
  if (!pos) {
    *st = LC_ENOMEM;
    return b->x;
  }
  for (int i = 0; i < nn; i++) pos[i] = p0 + i, lo[i] = lc_visible_from(p0 + i, 0, W);
  const lc_buf cs = first_rows(b->cos, ch, nn), sn = first_rows(b->sin, ch, nn), lob = first_rows(b->lo, ch, nn);
  *st = lc_model_rope_table_buf(cfg, rope_len, pos, nn, cs, sn);
  if (*st == LC_OK && W > 0) *st = lc_buf_write(lob, lo, LC_SYNC_INPUT);
  lc_free(a, pos);
  lc_attn_decode_state ds = {.p0 = p0, .max_len = c->max_len};
  lc_attn attn;
  lc_attn_decode_init(&attn, cfg->n_heads, cfg->n_kv_heads, cfg->head_dim, &ds);
  // the same bounds for every layer
  const lc_attn_in ain = {.lo_buf = W > 0 ? lob : (lc_buf){0}, .bf16 = m->ps.compute == LC_DT_BF16};
  const lc_layer_ctx lc = {.cfg = cfg, .attn = &attn, .attn_in = &ain, .rope_cos = cs, .rope_sin = sn, .T = nn, .mlp_tile = 0,
                           .bf16 = m->ps.compute == LC_DT_BF16, .be = be};
  // The chunk's activations: the first nn rows of each (the layer reads [nn, ...] buffers).
  lc_layer_acts acts = b->acts;
  lc_buf *f[] = {&acts.ln1, &acts.rstd1, &acts.q, &acts.k, &acts.v, &acts.qp, &acts.kp, &acts.rstdq, &acts.rstdk,
                 &acts.att, &acts.x_mid, &acts.ln2, &acts.rstd2, &acts.gate, &acts.up, &acts.h};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) *f[i] = first_rows(*f[i], ch, nn);
  lc_buf x = first_rows(b->x, ch, nn), y = first_rows(b->y, ch, nn);
  for (int l = 0; l < cfg->n_layers && *st == LC_OK; l++) {
    ds.k = lc_kv_cache_k(c, l);
    ds.v = lc_kv_cache_v(c, l);
    *st = lc_layer_fwd(&lc, &m->ps.w.layer[l], &acts, x, y, 0);
    const lc_buf t = x;
    x = y, y = t;
  }
  return x;
}

// The logits of rows [0, nn) of ln (fp32, normed) into host memory: read in place where the
// backend's memory is the host's, else computed into a device buffer and read (named: the
// host samples the next token from them).
static lc_status head_logits(const lc_model *m, lc_buf ln, int nn, float *logits) {
  lc_backend *be = lc_pstore_device(&m->ps);
  const int C = m->cfg.dim, V = m->cfg.vocab, bf16 = m->ps.compute == LC_DT_BF16;
  const size_t n = (size_t)nn * V;
  lc_buf out;
  LC_TRY(lc_buf_stage_out(be, logits, n, LC_DT_F32, LC_MEM_ACT, "decoding logits", &out));
  const lc_status st = lc_be_matmul_fwd(out, ln, m->ps.w.head, nn, C, V, bf16, (lc_buf){0});
  return lc_buf_stage_out_end(&out, logits, LC_SYNC_TOKEN, st);
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
  lc_backend *be = lc_pstore_device(&m->ps);
  const int bf16 = m->ps.compute == LC_DT_BF16;
  const int ch = n < LC_DECODE_CHUNK ? n : LC_DECODE_CHUNK;
  const size_t nf = dec_floats(cfg, ch, (lc_buf){0}, LC_DT_F32, NULL);
  lc_buf work;
  LC_TRY(lc_buf_alloc(be, LC_MEM_ACT, LC_DT_U8, lc_bytes(LC_DT_F32, nf), 0, "decoding activations", &work));
  dec_bufs b;
  dec_floats(cfg, ch, work, lc_layer_act_dt(bf16), &b);
  const int len0 = c->len;
  lc_status st = LC_OK;
  for (int t0 = 0; t0 < n && st == LC_OK; t0 += ch) {
    const int nn = n - t0 < ch ? n - t0 : ch;
    const lc_buf tok = first_rows(b.tok, ch, nn), x0 = first_rows(b.x, ch, nn);
    st = lc_buf_write(tok, tokens + t0, LC_SYNC_INPUT);
    if (st == LC_OK) st = lc_be_embedding_fwd(x0, tok, m->ps.w.embed, nn, C, 0);
    if (st != LC_OK) break;
    // A length-dependent RoPE scaling sees the length at the end of this call, as
    // transformers' cache does (keys made earlier keep the frequencies of their call).
    const lc_buf x = dec_layers(m, c, &b, ch, c->len, nn, len0 + n, a, &st);
    if (st != LC_OK) break;
    c->len += nn;
    const lc_buf ln = b.ln, rstd = b.acts.rstd1; // free once the layers are done (ln1's room holds fp32)
    const int rows = all_logits ? nn : t0 + nn == n ? 1 : 0, r0 = all_logits ? 0 : nn - 1;
    if (rows == 0) continue;
    const lc_buf lnr = lc_buf_view(ln, 0, (size_t)rows * C);
    st = lc_be_rmsnorm_fwd(lnr, lc_buf_view(rstd, 0, (size_t)rows), lc_buf_view(x, (size_t)r0 * C, (size_t)rows * C),
                           m->ps.w.norm, rows, C, cfg->norm_eps);
    if (st == LC_OK && bf16) st = lc_be_bf16_round(lnr);
    if (st == LC_OK) st = head_logits(m, lnr, rows, all_logits ? logits + (size_t)t0 * V : logits);
  }
  if (st != LC_OK) c->len = len0; // rows past len are ignored: the cache is as before
  lc_buf_free(&work);
  return st;
}

void lc_model_bf16_inference(lc_model *m) {
  lc_be_bf16_round(m->ps.params_b);
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
