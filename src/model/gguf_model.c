#define _POSIX_C_SOURCE 200809L
#include "model/gguf_model.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "io/fsutil.h"
#include "io/gguf.h"
#include "model/arch.h"
#include "model/hf.h"

int lc_gguf_is_model_path(const char *spec) {
  const size_t n = strlen(spec);
  if (n >= 5 && !strcmp(spec + n - 5, ".gguf")) return 1;
  return lc_is_file(spec) && lc_gguf_is_file(spec);
}

// ---------------------------------------------------------------- config

typedef struct {
  lc_gguf_file *f;
  const char *arch; // general.architecture: the prefix of the model's keys
} meta;

static const lc_gguf_kv *key_of(const meta *M, const char *suffix, char *key, size_t cap) {
  snprintf(key, cap, "%s.%s", M->arch, suffix);
  return lc_gguf_find_kv(M->f, key);
}

// {arch}.suffix as an integer in [lo, hi]; def when absent and not required.
static lc_status get_int(const meta *M, const char *suffix, int required, int def, int lo, int *out) {
  char key[128];
  const lc_gguf_kv *kv = key_of(M, suffix, key, sizeof key);
  if (!kv) {
    if (required)
      return lc_fail(LC_EFORMAT, "%s: metadata %s is missing; a %s GGUF model needs it (was the file converted by "
                     "llama.cpp's convert_hf_to_gguf.py?)", M->f->path, key, M->arch);
    *out = def;
    return LC_OK;
  }
  int64_t v;
  LC_TRY(lc_gguf_kv_int(M->f, kv, &v));
  if (v < lo || v > INT_MAX)
    return lc_fail(LC_EFORMAT, "%s: metadata %s is %lld; it must be at least %d", M->f->path, key, (long long)v, lo);
  *out = (int)v;
  return LC_OK;
}

// {arch}.suffix as a positive finite number; def when absent and not required.
static lc_status get_pos(const meta *M, const char *suffix, int required, double def, double *out) {
  char key[128];
  const lc_gguf_kv *kv = key_of(M, suffix, key, sizeof key);
  if (!kv) {
    if (required)
      return lc_fail(LC_EFORMAT, "%s: metadata %s is missing; a %s GGUF model needs it", M->f->path, key, M->arch);
    *out = def;
    return LC_OK;
  }
  LC_TRY(lc_gguf_kv_num(M->f, kv, out));
  if (!(*out > 0) || !isfinite(*out))
    return lc_fail(LC_EFORMAT, "%s: metadata %s is %g; it must be a positive number", M->f->path, key, *out);
  return LC_OK;
}

// Llama 3 scaling (transformers' _compute_llama3_parameters) as per-pair divisors of the
// frequencies, the values llama.cpp's converter stores in rope_freqs.weight.
static double llama3_factor(double wavelen, double factor, double low, double high, double orig) {
  if (wavelen < orig / high) return 1.0;
  if (wavelen > orig / low) return factor;
  const double s = (orig / wavelen - low) / (high - low);
  return 1.0 / ((1.0 - s) / factor + s);
}

// Finds Llama 3 parameters that reproduce the converter's factors ff[D/2] (to float
// rounding; the factors depend on them only through two combinations, so the usual values
// are tried first). Returns 1 and fills r, 0 if none does; sets *plain when every factor
// is 1 (no scaling at all).
static int llama3_fit(const float *ff, int D, double theta, int orig_hint, lc_rope_scaling *r, int *plain) {
  const int P = D / 2;
  double factor = 0;
  int ones = 1;
  for (int i = 0; i < P; i++) {
    factor = fmax(factor, ff[i]);
    ones &= fabs(ff[i] - 1.0) <= 1e-6;
  }
  *plain = ones;
  if (ones) return 0;
  const int origs[] = {orig_hint, 8192, 4096, 2048, 1024, 16384, 32768, 65536, 131072, 262144};
  const double lows[] = {1, 2, 0.5, 4, 0.25, 8}, highs[] = {4, 8, 2, 16, 1.5, 3, 32};
  for (size_t a = 0; a < sizeof origs / sizeof origs[0]; a++) {
    if (origs[a] <= 0) continue;
    for (size_t b = 0; b < sizeof lows / sizeof lows[0]; b++)
      for (size_t c = 0; c < sizeof highs / sizeof highs[0]; c++) {
        if (!(highs[c] > lows[b])) continue;
        int ok = 1;
        for (int i = 0; i < P && ok; i++) {
          const double wavelen = 2.0 * 3.14159265358979323846 * pow(theta, 2.0 * i / D);
          const double e = llama3_factor(wavelen, factor, lows[b], highs[c], origs[a]);
          ok = fabs(e - ff[i]) <= 1e-4 * fabs(e);
        }
        if (!ok) continue;
        memset(r, 0, sizeof *r);
        r->type = LC_ROPE_LLAMA3;
        r->factor = factor;
        r->low_freq_factor = lows[b];
        r->high_freq_factor = highs[c];
        r->orig_max = origs[a];
        r->beta_fast = 32.0;
        r->beta_slow = 1.0;
        r->truncate = 1;
        return 1;
      }
  }
  return 0;
}

static lc_status read_rope(const meta *M, lc_config *c) {
  lc_gguf_file *f = M->f;
  char key[128], ty[32] = "";
  const lc_gguf_kv *kv = key_of(M, "rope.scaling.type", key, sizeof key);
  if (kv) LC_TRY(lc_gguf_kv_str(f, kv, ty, sizeof ty));
  double old_linear = 1.0;
  if (!kv && key_of(M, "rope.scale_linear", key, sizeof key)) { // llama.cpp's older key
    LC_TRY(get_pos(M, "rope.scale_linear", 1, 1.0, &old_linear));
    if (old_linear != 1.0) snprintf(ty, sizeof ty, "linear");
  }
  const lc_gguf_tensor *rf = lc_gguf_find(f, "rope_freqs.weight");
  lc_rope_scaling *r = &c->rope;
  memset(r, 0, sizeof *r); // type default; a scaling read below sets beta 32/1, truncate (as hf_config.c)
  if (rf && ty[0] && strcmp(ty, "none") != 0)
    return lc_fail(LC_EINVAL, "%s: the file has both rope scaling type '%s' and per-pair factors (rope_freqs.weight), "
                   "which llama.cpp combines; transformers has no such RoPE, so longctx cannot train it", f->path, ty);
  int orig = 0;
  if (key_of(M, "rope.scaling.original_context_length", key, sizeof key))
    LC_TRY(get_int(M, "rope.scaling.original_context_length", 1, 0, 1, &orig));
  if (rf) {
    // Llama 3.1-3.3: llama.cpp's converter stores the llama3 scaling only as the divisors
    // of the pair frequencies (rope_freqs.weight); the parameters are found back from them.
    const int P = c->head_dim / 2;
    if (rf->n_dims != 1 || rf->ne[0] != (uint64_t)P)
      return lc_fail(LC_EFORMAT, "%s: rope_freqs.weight has %llu entries; head_dim %d needs %d", f->path,
                     (unsigned long long)rf->numel, c->head_dim, P);
    float ff[LC_ROPE_MAX_PAIRS];
    if (P > LC_ROPE_MAX_PAIRS) return lc_fail(LC_EINVAL, "%s: head_dim %d is too large", f->path, c->head_dim);
    LC_TRY(lc_gguf_read_f32(f, rf, 0, (size_t)P, ff));
    int plain = 0;
    if (llama3_fit(ff, c->head_dim, c->rope_theta, orig, r, &plain) || plain) return LC_OK;
    return lc_fail(LC_EINVAL, "%s: rope_freqs.weight holds per-pair RoPE factors (%g ... %g) that no Llama 3 scaling "
                   "(factor, low/high_freq_factor, original_max_position_embeddings) reproduces; longctx cannot "
                   "represent them: load the model's Hugging Face directory instead", f->path, ff[0], ff[P - 1]);
  }
  if (!ty[0] || !strcmp(ty, "none")) return LC_OK;
  r->beta_fast = 32.0;
  r->beta_slow = 1.0;
  r->truncate = 1;
  if (!strcmp(ty, "linear")) {
    r->type = LC_ROPE_LINEAR;
    if (old_linear != 1.0) r->factor = old_linear;
    else LC_TRY(get_pos(M, "rope.scaling.factor", 1, 1.0, &r->factor));
    return LC_OK;
  }
  if (!strcmp(ty, "yarn")) {
    r->type = LC_ROPE_YARN;
    LC_TRY(get_pos(M, "rope.scaling.factor", 1, 1.0, &r->factor));
    r->orig_max = orig > 0 ? orig : c->max_pos; // llama.cpp: the training context when absent
    LC_TRY(get_pos(M, "rope.scaling.yarn_beta_fast", 0, 32.0, &r->beta_fast));
    LC_TRY(get_pos(M, "rope.scaling.yarn_beta_slow", 0, 1.0, &r->beta_slow));
    // llama.cpp's own YaRN knobs multiply or replace what transformers derives; refused
    // unless neutral, rather than silently computing another model.
    static const char *const knobs[] = {"rope.scaling.attn_factor", "rope.scaling.yarn_attn_factor",
                                        "rope.scaling.yarn_log_multiplier", "rope.scaling.yarn_ext_factor"};
    static const double neutral[] = {1.0, 1.0, 0.0, -1.0};
    for (int i = 0; i < 4; i++) {
      const lc_gguf_kv *k = key_of(M, knobs[i], key, sizeof key);
      double v;
      if (!k) continue;
      LC_TRY(lc_gguf_kv_num(f, k, &v));
      if (v != neutral[i] && !(i == 3 && v == 1.0))
        return lc_fail(LC_EINVAL, "%s: metadata %s is %g: llama.cpp's YaRN variant with it has no transformers "
                       "equivalent, so longctx cannot train it", f->path, key, v);
    }
    return LC_OK;
  }
  return lc_fail(LC_EINVAL, "%s: rope scaling type '%s' is not supported for a GGUF %s model (longctx reads none, "
                 "linear, yarn, and Llama 3's rope_freqs.weight)", f->path, ty, M->arch);
}

// general.name as a config name: letters, digits, '.', '_', '-' (others become '-').
static void sanitise_name(const char *in, char *out, size_t cap) {
  size_t k = 0;
  int dash = 0;
  for (const char *p = in; *p && k + 1 < cap; p++) {
    const unsigned char ch = (unsigned char)*p;
    const int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                   ch == '_' || ch == '-';
    if (ok) {
      out[k++] = (char)ch;
      dash = 0;
    } else if (!dash && k > 0) {
      out[k++] = '-';
      dash = 1;
    }
  }
  while (k > 0 && out[k - 1] == '-') k--;
  out[k] = 0;
}

static lc_status read_config(lc_gguf_file *f, lc_config *cfg) {
  char arch[64];
  const lc_gguf_kv *ak = lc_gguf_find_kv(f, "general.architecture");
  if (!ak)
    return lc_fail(LC_EFORMAT, "%s: metadata general.architecture is missing; is this a model file?", f->path);
  LC_TRY(lc_gguf_kv_str(f, ak, arch, sizeof arch));
  const lc_arch *a = lc_arch_find_gguf(arch);
  if (!a)
    return lc_fail(LC_EINVAL, "%s: GGUF architecture '%s' is not supported: longctx trains %s (GGUF llama, mistral, "
                   "qwen2, qwen3); the nearest is %s", f->path, arch, lc_arch_names(), lc_arch_nearest(arch));
  meta M = {f, arch};
  lc_config c;
  memset(&c, 0, sizeof c);
  char key[128];
  if (key_of(&M, "expert_count", key, sizeof key)) {
    int ne = 0;
    LC_TRY(get_int(&M, "expert_count", 0, 0, 0, &ne));
    if (ne > 0)
      return lc_fail(LC_EINVAL, "%s: a mixture-of-experts model (%s %d): longctx trains dense models only", f->path,
                     key, ne);
  }
  LC_TRY(get_int(&M, "block_count", 1, 0, 1, &c.n_layers));
  LC_TRY(get_int(&M, "embedding_length", 1, 0, 1, &c.dim));
  LC_TRY(get_int(&M, "feed_forward_length", 1, 0, 1, &c.ffn));
  LC_TRY(get_int(&M, "attention.head_count", 1, 0, 1, &c.n_heads));
  LC_TRY(get_int(&M, "attention.head_count_kv", 0, c.n_heads, 1, &c.n_kv_heads));
  const int hd_given = key_of(&M, "attention.key_length", key, sizeof key) != NULL;
  if (!hd_given && c.dim % c.n_heads != 0)
    return lc_fail(LC_EFORMAT, "%s: embedding_length %d is not a multiple of head_count %d and %s.attention.key_length "
                   "is missing", f->path, c.dim, c.n_heads, arch);
  LC_TRY(get_int(&M, "attention.key_length", 0, c.dim / c.n_heads, 1, &c.head_dim));
  int vl = c.head_dim, rd = c.head_dim;
  LC_TRY(get_int(&M, "attention.value_length", 0, c.head_dim, 1, &vl));
  if (vl != c.head_dim)
    return lc_fail(LC_EINVAL, "%s: %s.attention.value_length %d differs from key_length %d; longctx needs equal q/k and v "
                   "head sizes", f->path, arch, vl, c.head_dim);
  LC_TRY(get_int(&M, "rope.dimension_count", 0, c.head_dim, 1, &rd));
  if (rd != c.head_dim)
    return lc_fail(LC_EINVAL, "%s: %s.rope.dimension_count %d is not the head size %d: partial rotary embeddings are not "
                   "supported", f->path, arch, rd, c.head_dim);
  double eps;
  LC_TRY(get_pos(&M, "attention.layer_norm_rms_epsilon", 1, 1e-5, &eps));
  c.norm_eps = (float)eps;
  if (!(c.norm_eps > 0)) return lc_fail(LC_EFORMAT, "%s: layer_norm_rms_epsilon %g underflows a float", f->path, eps);
  LC_TRY(get_pos(&M, "rope.freq_base", 0, 10000.0, &c.rope_theta));
  LC_TRY(get_int(&M, "context_length", 0, 2048, 1, &c.max_pos));
  // The vocabulary: {arch}.vocab_size, else the tokenizer's token list, else the embedding.
  const lc_gguf_kv *tk = lc_gguf_find_kv(f, "tokenizer.ggml.tokens");
  const lc_gguf_tensor *emb = lc_gguf_find(f, "token_embd.weight");
  if (key_of(&M, "vocab_size", key, sizeof key)) LC_TRY(get_int(&M, "vocab_size", 1, 0, 1, &c.vocab));
  else if (tk && tk->type == LC_GGUF_ARR && tk->count > 0 && tk->count <= INT_MAX) c.vocab = (int)tk->count;
  else if (emb && emb->n_dims == 2 && emb->ne[1] > 0 && emb->ne[1] <= INT_MAX) c.vocab = (int)emb->ne[1];
  else
    return lc_fail(LC_EFORMAT, "%s: the vocabulary size is unknown (no %s.vocab_size, tokenizer.ggml.tokens or "
                   "token_embd.weight)", f->path, arch);
  if (a->window && key_of(&M, "attention.sliding_window", key, sizeof key))
    LC_TRY(get_int(&M, "attention.sliding_window", 1, 0, 0, &c.sliding_window));
  c.tie_embeddings = lc_gguf_find(f, "output.weight") == NULL;
  lc_arch_apply(&c, a, lc_gguf_find(f, "blk.0.attn_q.bias") != NULL);
  LC_TRY(read_rope(&M, &c));
  // The name: general.name, else the file name without .gguf.
  char name[256] = "";
  const lc_gguf_kv *nk = lc_gguf_find_kv(f, "general.name");
  if (!nk || lc_gguf_kv_str(f, nk, name, sizeof name) != LC_OK) {
    const char *b = strrchr(f->path, '/');
    snprintf(name, sizeof name, "%.200s", b ? b + 1 : f->path);
    const size_t n = strlen(name);
    if (n > 5 && !strcmp(name + n - 5, ".gguf")) name[n - 5] = 0;
  }
  sanitise_name(name, c.name, sizeof c.name);
  if (!c.name[0]) snprintf(c.name, sizeof c.name, "gguf");
  lc_status st = lc_config_validate(&c);
  if (st != LC_OK) {
    char msg[900];
    snprintf(msg, sizeof msg, "%s", lc_errmsg());
    return lc_fail(st, "%s: %s", f->path, msg);
  }
  *cfg = c;
  return LC_OK;
}

lc_status lc_gguf_read_config(const char *path, lc_config *cfg) {
  lc_gguf_file f;
  LC_TRY(lc_gguf_open(&f, path));
  lc_status st = read_config(&f, cfg);
  lc_gguf_close(&f);
  return st;
}

// ---------------------------------------------------------------- weights

static void gguf_name(const lc_param_info *p, char *out, size_t cap) {
  int nk;
  const lc_tensor_kind *k = lc_tensor_kinds(&nk);
  if (p->layer >= 0) snprintf(out, cap, "blk.%d.%s", p->layer, k[p->kind].gguf);
  else snprintf(out, cap, "%s", k[p->kind].gguf);
}

// Heads whose rows llama.cpp's converter permuted (0: none): q and k (and their biases)
// of the families that have the permutation.
static int permuted_heads(const lc_config *c, const lc_param_info *p) {
  int nk;
  const lc_tensor_kind *k = lc_tensor_kinds(&nk);
  if (!lc_arch_get(c->arch)->gguf_permuted_qk) return 0;
  const char *g = k[p->kind].gguf;
  if (!strncmp(g, "attn_q.", 7)) return c->n_heads;
  if (!strncmp(g, "attn_k.", 7)) return c->n_kv_heads;
  return 0;
}

// Elements [first, first + n) of parameter p (HF layout) from GGUF tensor t. With the
// permutation, HF row h*D + j*D/2 + i of a head of D rows is GGUF row h*D + 2i + j
// (LlamaModel.permute: reshape(heads, 2, D/2, cols).swapaxes(1, 2)).
static lc_status read_hf_range(lc_gguf_file *f, const lc_gguf_tensor *t, const lc_param_info *p, int heads,
                               size_t first, size_t n, float *dst) {
  if (!heads) return lc_gguf_read_f32(f, t, first, n, dst);
  const size_t cols = p->ndim == 2 ? (size_t)p->shape[1] : 1, D = (size_t)p->shape[0] / (size_t)heads, half = D / 2;
  for (size_t k = 0; k < n;) {
    const size_t e = first + k, r = e / cols, col = e % cols, len = cols - col < n - k ? cols - col : n - k;
    const size_t h = r / D, w = r % D, src = h * D + (w < half ? 2 * w : 2 * (w - half) + 1);
    LC_TRY(lc_gguf_read_f32(f, t, src * cols + col, len, dst + k));
    k += len;
  }
  return LC_OK;
}

// Tensor t's rows (parameter p, held in blocks of dtype d) copied as the file holds them
// into the store, with the permutation undone on whole rows (a row is whole blocks).
static lc_status copy_blocks(lc_gguf_file *f, const lc_gguf_tensor *t, const lc_param_info *p, int heads, lc_pstore *ps,
                             int i, lc_dtype d) {
  const size_t rows = (size_t)p->shape[0], rb = lc_bytes(d, (size_t)p->shape[1]);
  const size_t D = heads ? rows / (size_t)heads : 1, half = D / 2;
  const size_t per = rb < ((size_t)1 << 20) ? ((size_t)1 << 20) / rb : 1; // rows per read (about 1 MiB)
  unsigned char *buf = lc_alloc(ps->arena, LC_MEM_SCRATCH, per * rb, "GGUF blocks on their way to the store");
  if (!buf) return LC_ENOMEM;
  lc_status st = LC_OK;
  for (size_t r0 = 0; r0 < rows && st == LC_OK; r0 += per) {
    const size_t k = rows - r0 < per ? rows - r0 : per;
    if (!heads) {
      st = lc_gguf_read_raw(f, t, r0 * rb, k * rb, buf);
    } else {
      for (size_t r = r0; r < r0 + k && st == LC_OK; r++) { // HF row r is GGUF row src (read_hf_range)
        const size_t h = r / D, w = r % D, src = h * D + (w < half ? 2 * w : 2 * (w - half) + 1);
        st = lc_gguf_read_raw(f, t, src * rb, rb, buf + (r - r0) * rb);
      }
    }
    if (st == LC_OK) st = lc_pstore_set_tensor_raw(ps, i, r0 * rb, buf, k * rb);
  }
  lc_free(ps->arena, buf);
  return st;
}

lc_status lc_gguf_base_blocks(const char *path, lc_config *cfg) {
  memset(cfg->base_q, 0, sizeof cfg->base_q);
  cfg->base_q_embed = cfg->base_q_head = 0;
  lc_gguf_file f;
  LC_TRY(lc_gguf_open(&f, path));
  lc_param_layout L;
  lc_status st = lc_param_layout_build(&L, cfg, 1);
  for (int i = 0; i < L.n_tensors && st == LC_OK; i++) {
    const lc_param_info *p = &L.table[i];
    char name[LC_GGUF_MAX_NAME];
    gguf_name(p, name, sizeof name);
    const lc_gguf_tensor *t = lc_gguf_find(&f, name);
    const lc_dtype d = t ? lc_gguf_type_dtype(t->type) : LC_DT_COUNT;
    // (a missing tensor is reported by the load; a vector or an odd row length stays dense)
    if (lc_dtype_is_quant(d)) lc_param_set_base_q(cfg, p, d);
  }
  if (st == LC_OK) lc_param_layout_free(&L);
  lc_gguf_close(&f);
  return st;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int ends_with(const char *s, const char *suf) {
  const size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

lc_status lc_gguf_load_weights(const char *path, lc_model *m) {
  lc_gguf_file f;
  LC_TRY(lc_gguf_open(&f, path));
  const lc_config *c = &m->cfg;
  const int nt = m->n_tensors;
  const lc_gguf_tensor **src = calloc((size_t)nt + 1, sizeof *src);
  char(*names)[LC_GGUF_MAX_NAME] = calloc((size_t)nt + 1, sizeof *names);
  char **sorted = calloc((size_t)nt + 1, sizeof *sorted);
  lc_status st = src && names && sorted ? LC_OK : lc_fail(LC_ENOMEM, "out of memory loading %s", path);
  // Every tensor of the model, by its GGUF name, with its shape.
  for (int i = 0; i < nt && st == LC_OK; i++) {
    const lc_param_info *p = &m->table[i];
    gguf_name(p, names[i], sizeof names[i]);
    sorted[i] = names[i];
    const lc_gguf_tensor *t = lc_gguf_find(&f, names[i]);
    if (!t) {
      st = lc_fail(LC_EFORMAT, "%s: tensor '%s' (the model's %s) is missing; the file does not match its own metadata",
                   path, names[i], p->name);
      break;
    }
    if (!lc_gguf_type_readable(t->type)) {
      st = lc_fail(LC_EFORMAT, "%s: tensor '%s' is %s, which longctx cannot dequantize (it reads %s): use a file "
                   "quantized to one of those, or the F16/BF16 one", path, names[i], lc_gguf_type_name(t->type),
                   lc_gguf_readable_names());
      break;
    }
    const uint64_t want0 = p->ndim == 2 ? (uint64_t)p->shape[1] : (uint64_t)p->shape[0];
    const uint64_t want1 = p->ndim == 2 ? (uint64_t)p->shape[0] : 1;
    int same = t->ne[0] == want0 && t->ne[1] == want1 && t->ne[2] == 1 && t->ne[3] == 1;
    if (!same) {
      char got[128] = "[", want[64], hf[64];
      for (int d = 0; d < t->n_dims; d++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%llu", d ? ", " : "", (unsigned long long)t->ne[d]);
      if (p->ndim == 2) {
        snprintf(want, sizeof want, "[%llu, %llu]", (unsigned long long)want0, (unsigned long long)want1);
        snprintf(hf, sizeof hf, "[%ld, %ld]", p->shape[0], p->shape[1]);
      } else {
        snprintf(want, sizeof want, "[%llu]", (unsigned long long)want0);
        snprintf(hf, sizeof hf, "[%ld]", p->shape[0]);
      }
      st = lc_fail(LC_EFORMAT, "%s: tensor '%s' has GGUF dims %s] but the config needs %s (HF %s %s); the weights do "
                   "not match the metadata", path, names[i], got, want, p->name, hf);
      break;
    }
    src[i] = t;
  }
  // Nothing else may be in the file but what llama.cpp adds beside the weights.
  if (st == LC_OK) qsort(sorted, (size_t)nt, sizeof *sorted, cmp_str);
  for (int j = 0; j < f.n && st == LC_OK; j++) {
    const char *nm = f.tensors[j].name;
    if (!strcmp(nm, "rope_freqs.weight") || ends_with(nm, ".attn_rot_embd")) continue; // RoPE: from the config
    if (bsearch(&nm, sorted, (size_t)nt, sizeof *sorted, cmp_str)) continue;
    char nb[100];
    snprintf(nb, sizeof nb, "%.80s", nm);
    for (char *q = nb; *q; q++)
      if ((unsigned char)*q < 0x20) *q = '?';
    st = lc_fail(LC_EFORMAT, "%s: unexpected tensor '%s': it is not part of a %s model with this config (%d layers, "
                 "%s embeddings%s)", path, nb, lc_arch_get(c->arch)->hf_class, c->n_layers,
                 c->tie_embeddings ? "tied" : "untied", c->qkv_bias ? ", q/k/v biases" : "");
  }
  // Tensor by tensor into the store.
  float *stage = NULL;
  if (st == LC_OK) st = lc_hf_stage(&m->ps, LC_PS_PARAMS, &stage);
  const size_t cap = lc_stage_floats(&m->ps.lay);
  for (int i = 0; i < nt && st == LC_OK; i++) {
    const lc_param_info *p = &m->table[i];
    const int heads = permuted_heads(c, p);
    const lc_dtype held = lc_pstore_held_dtype(&m->ps, i);
    if (lc_dtype_is_quant(held)) { // a frozen base in the file's own blocks
      st = lc_gguf_type_dtype(src[i]->type) == held
               ? copy_blocks(&f, src[i], p, heads, &m->ps, i, held)
               : lc_fail(LC_EINVAL, "%s: tensor '%s' is %s, but the store holds it as %s: read the blocks from the same "
                         "file (lc_gguf_base_blocks)", path, names[i], lc_gguf_type_name(src[i]->type), lc_dtype_name(held));
      continue;
    }
    if (!stage) {
      st = read_hf_range(&f, src[i], p, heads, 0, p->numel, lc_pstore_tensor_ptr(&m->ps, LC_PS_PARAMS, i));
      continue;
    }
    for (size_t a = 0; a < p->numel && st == LC_OK; a += cap) {
      const size_t n = p->numel - a < cap ? p->numel - a : cap;
      st = read_hf_range(&f, src[i], p, heads, a, n, stage);
      if (st == LC_OK) lc_pstore_set_tensor_part(&m->ps, LC_PS_PARAMS, i, a, stage, n);
    }
  }
  lc_free(m->ps.arena, stage);
  free(src);
  free(names);
  free(sorted);
  lc_gguf_close(&f);
  return st;
}
