// Hugging Face config.json (hf.h): parsed into an lc_config of a family in model/arch.h, and
// written back as HF formats it.
#include "model/hf.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "io/fsutil.h"
#include "model/arch.h"

#define HF_PATH 4096

// ---------------------------------------------------------------- config.json

static const cJSON *field(const cJSON *r, const char *k) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(r, k);
  return (j && !cJSON_IsNull(j)) ? j : NULL;
}

static lc_status get_int(const cJSON *r, const char *L, const char *k, int required, int def,
                         int *out) {
  const cJSON *j = field(r, k);
  if (!j) {
    if (required)
      return lc_fail(LC_EFORMAT, "%s: missing field %s, which the model's config.json needs; add it "
                     "(see the model's original config)", L, k);
    *out = def;
    return LC_OK;
  }
  double d = cJSON_IsNumber(j) ? j->valuedouble : -1;
  if (!cJSON_IsNumber(j) || !(d >= 1) || d > INT_MAX || d != floor(d))
    return lc_fail(LC_EFORMAT, "%s: field %s must be a positive integer; fix config.json", L, k);
  *out = (int)d;
  return LC_OK;
}

static lc_status get_pos(const cJSON *r, const char *L, const char *k, double def, double *out) {
  const cJSON *j = field(r, k);
  if (!j) {
    *out = def;
    return LC_OK;
  }
  if (!cJSON_IsNumber(j) || !(j->valuedouble > 0) || !isfinite(j->valuedouble))
    return lc_fail(LC_EFORMAT, "%s: field %s must be a positive number; fix config.json", L, k);
  *out = j->valuedouble;
  return LC_OK;
}

static lc_status get_bool(const cJSON *r, const char *L, const char *k, int *out) {
  const cJSON *j = field(r, k);
  *out = 0;
  if (!j) return LC_OK;
  if (!cJSON_IsBool(j))
    return lc_fail(LC_EFORMAT, "%s: field %s must be true or false; fix config.json", L, k);
  *out = cJSON_IsTrue(j);
  return LC_OK;
}

// A float list of exactly n entries (longrope's factors).
static lc_status get_floats(const cJSON *j, const char *L, const char *k, float *out, int cap, int *n) {
  const cJSON *a = field(j, k), *it;
  if (!a || !cJSON_IsArray(a))
    return lc_fail(LC_EFORMAT, "%s: rope scaling longrope needs %s, a list of head_dim/2 numbers; fix config.json", L, k);
  int i = 0;
  cJSON_ArrayForEach(it, a) {
    if (!cJSON_IsNumber(it) || i >= cap)
      return lc_fail(LC_EFORMAT, "%s: %s must be a list of at most %d numbers; fix config.json", L, k, cap);
    out[i++] = (float)it->valuedouble;
  }
  *n = i;
  return LC_OK;
}

// rope_scaling (transformers 4) / rope_parameters (5): the scaling type and its parameters
// (the names transformers reads). Unknown types, nested per-layer-type parameters and a
// partial rotary factor are errors naming the field.
static lc_status parse_rope(const cJSON *r, const char *L, const char *k, lc_config *c) {
  const cJSON *j = field(r, k);
  if (!j) return LC_OK;
  if (!cJSON_IsObject(j))
    return lc_fail(LC_EFORMAT, "%s: field %s must be an object or null; fix config.json", L, k);
  const cJSON *it;
  cJSON_ArrayForEach(it, j) if (cJSON_IsObject(it))
    return lc_fail(LC_EINVAL, "%s: %s holds parameters per layer type ('%.40s'); longctx applies one RoPE to every layer", L, k,
                   it->string);
  const cJSON *t = field(j, "rope_type");
  if (!t) t = field(j, "type");
  if (t && !cJSON_IsString(t)) return lc_fail(LC_EFORMAT, "%s: %s.rope_type must be a string; fix config.json", L, k);
  lc_rope_scaling *s = &c->rope;
  lc_rope_type ty = LC_ROPE_DEFAULT;
  if (t && lc_rope_type_parse(t->valuestring, &ty) != LC_OK)
    return lc_fail(LC_EINVAL, "%s: %s of type '%.40s' is not supported: longctx implements default, linear, dynamic, "
                   "llama3, yarn and longrope (as transformers does)", L, k, t->valuestring);
  const cJSON *prf = field(j, "partial_rotary_factor");
  if (prf && (!cJSON_IsNumber(prf) || prf->valuedouble != 1.0))
    return lc_fail(LC_EINVAL, "%s: %s.partial_rotary_factor is not supported: longctx rotates the whole head", L, k);
  if (ty == LC_ROPE_DEFAULT) return LC_OK; // a rope_type "default" entry changes nothing
  memset(s, 0, sizeof *s);
  s->type = ty;
  s->beta_fast = 32.0;
  s->beta_slow = 1.0;
  s->truncate = 1;
  if (field(j, "original_max_position_embeddings")) LC_TRY(get_int(j, L, "original_max_position_embeddings", 1, 0, &s->orig_max));
  else if (field(r, "original_max_position_embeddings")) LC_TRY(get_int(r, L, "original_max_position_embeddings", 1, 0, &s->orig_max));
  // factor: required but for yarn (max_position_embeddings / original when absent, as
  // transformers derives it; c->max_pos is read before this) and longrope (derived in rope.c).
  const cJSON *f = field(j, "factor");
  if (f) LC_TRY(get_pos(j, L, "factor", 1.0, &s->factor));
  else if (ty == LC_ROPE_YARN && s->orig_max > 0) s->factor = (double)c->max_pos / s->orig_max;
  else if (ty != LC_ROPE_LONGROPE)
    return lc_fail(LC_EFORMAT, "%s: rope scaling %s needs factor; fix config.json", L, lc_rope_type_name(ty));
  if (ty == LC_ROPE_LLAMA3) {
    if (!field(j, "low_freq_factor") || !field(j, "high_freq_factor"))
      return lc_fail(LC_EFORMAT, "%s: rope scaling llama3 needs factor, low_freq_factor and high_freq_factor; fix "
                     "config.json", L);
    LC_TRY(get_pos(j, L, "low_freq_factor", 1.0, &s->low_freq_factor));
    LC_TRY(get_pos(j, L, "high_freq_factor", 4.0, &s->high_freq_factor));
  }
  if (ty == LC_ROPE_YARN) {
    LC_TRY(get_pos(j, L, "beta_fast", 32.0, &s->beta_fast));
    LC_TRY(get_pos(j, L, "beta_slow", 1.0, &s->beta_slow));
    LC_TRY(get_pos(j, L, "mscale", 0.0, &s->mscale));
    LC_TRY(get_pos(j, L, "mscale_all_dim", 0.0, &s->mscale_all_dim));
    const cJSON *tr = field(j, "truncate");
    if (tr && !cJSON_IsBool(tr)) return lc_fail(LC_EFORMAT, "%s: %s.truncate must be true or false; fix config.json", L, k);
    if (tr) s->truncate = cJSON_IsTrue(tr);
  }
  if (ty == LC_ROPE_YARN || ty == LC_ROPE_LONGROPE) LC_TRY(get_pos(j, L, "attention_factor", 0.0, &s->attn_factor));
  if (ty == LC_ROPE_LONGROPE) {
    int ns = 0, nl = 0;
    LC_TRY(get_floats(j, L, "short_factor", s->short_factor, LC_ROPE_MAX_PAIRS, &ns));
    LC_TRY(get_floats(j, L, "long_factor", s->long_factor, LC_ROPE_MAX_PAIRS, &nl));
    if (ns != nl) return lc_fail(LC_EFORMAT, "%s: longrope short_factor has %d entries and long_factor %d; fix config.json", L, ns, nl);
    s->n_factors = ns;
  }
  return LC_OK;
}

lc_status lc_hf_parse_config(const char *json, size_t len, const char *L, lc_config *cfg) {
  const char *end = NULL;
  cJSON *r = cJSON_ParseWithLengthOpts(json, len, &end, 0);
  if (!r)
    return lc_fail(LC_EFORMAT, "%s: not valid JSON (error near byte %ld); fix or re-download "
                   "config.json", L, end ? (long)(end - json) : 0L);
  for (const char *p = end; p < json + len; p++) {
    if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') continue;
    cJSON_Delete(r);
    return lc_fail(LC_EFORMAT, "%s: extra text after the JSON object (byte %ld); fix config.json",
                   L, (long)(p - json));
  }
  if (!cJSON_IsObject(r)) {
    cJSON_Delete(r);
    return lc_fail(LC_EFORMAT, "%s: not a JSON object; a config.json is an object of settings", L);
  }
  lc_config c;
  memset(&c, 0, sizeof c);
  lc_status st = LC_OK;
#define TRY_(x)                    \
  do {                             \
    if ((st = (x)) != LC_OK) goto done; \
  } while (0)
  // What model is it? model_type and the architectures entries name one family.
  const cJSON *mt = field(r, "model_type"), *ar = field(r, "architectures");
  if (!mt && !ar) {
    st = lc_fail(LC_EFORMAT, "%s: neither model_type nor architectures is set; longctx reads the configs of %s", L,
                 lc_arch_names());
    goto done;
  }
  const lc_arch *arch = NULL;
  if (mt) {
    if (!cJSON_IsString(mt)) {
      st = lc_fail(LC_EFORMAT, "%s: model_type must be a string; fix config.json", L);
      goto done;
    }
    if (!(arch = lc_arch_find_hf(mt->valuestring))) {
      st = lc_fail(LC_EINVAL, "%s: model_type '%.40s' is not supported: longctx trains %s; the nearest is %s", L,
                   mt->valuestring, lc_arch_names(), lc_arch_nearest(mt->valuestring));
      goto done;
    }
  }
  if (ar) {
    int ok = cJSON_IsArray(ar) && cJSON_GetArraySize(ar) > 0;
    const cJSON *it;
    if (ok) cJSON_ArrayForEach(it, ar) {
        if (!cJSON_IsString(it)) { ok = 0; break; }
        const lc_arch *a = lc_arch_find_hf(it->valuestring);
        if (!a) {
          st = lc_fail(LC_EINVAL, "%s: architectures ['%.40s'] is not supported: longctx trains %s; the nearest is %s", L,
                       it->valuestring, lc_arch_names(), lc_arch_nearest(it->valuestring));
          goto done;
        }
        if (arch && a != arch) {
          st = lc_fail(LC_EINVAL, "%s: architectures ['%.40s'] and model_type '%s' name different families; fix config.json",
                       L, it->valuestring, arch->model_type);
          goto done;
        }
        arch = a;
      }
    if (!ok) {
      st = lc_fail(LC_EFORMAT, "%s: architectures must be a list of class names such as [\"LlamaForCausalLM\"]; fix config.json", L);
      goto done;
    }
  }
  const int mistral = arch->window;
  // Sizes.
  TRY_(get_int(r, L, "hidden_size", 1, 0, &c.dim));
  TRY_(get_int(r, L, "intermediate_size", 1, 0, &c.ffn));
  TRY_(get_int(r, L, "num_hidden_layers", 1, 0, &c.n_layers));
  TRY_(get_int(r, L, "num_attention_heads", 1, 0, &c.n_heads));
  TRY_(get_int(r, L, "num_key_value_heads", 0, c.n_heads, &c.n_kv_heads));
  TRY_(get_int(r, L, "vocab_size", 1, 0, &c.vocab));
  TRY_(get_int(r, L, "max_position_embeddings", 0, 2048, &c.max_pos));
  // head_dim: its own field (Qwen3 sets it apart from hidden/heads; Qwen3Config's default is
  // 128), else hidden / heads.
  if (field(r, "head_dim")) {
    TRY_(get_int(r, L, "head_dim", 1, 0, &c.head_dim));
  } else if (arch->id == LC_ARCH_QWEN3) {
    c.head_dim = 128;
  } else if (c.dim % c.n_heads != 0) {
    st = lc_fail(LC_EINVAL, "%s: hidden_size %d is not a multiple of num_attention_heads %d and head_dim is not set; "
                 "fix config.json", L, c.dim, c.n_heads);
    goto done;
  } else {
    c.head_dim = c.dim / c.n_heads;
  }
  double eps, theta;
  TRY_(get_pos(r, L, "rms_norm_eps", 1e-6, &eps));
  c.norm_eps = (float)eps;
  if (!(c.norm_eps > 0)) {
    st = lc_fail(LC_EINVAL, "%s: rms_norm_eps %g underflows a float; fix config.json", L, eps);
    goto done;
  }
  // transformers >= 5 keeps rope_theta inside rope_parameters.
  const cJSON *rp = field(r, "rope_parameters");
  TRY_(parse_rope(r, L, "rope_parameters", &c));
  if (c.rope.type == LC_ROPE_DEFAULT) TRY_(parse_rope(r, L, "rope_scaling", &c));
  // rope_parameters' own rope_theta wins over a top-level one (transformers 5 keeps it).
  TRY_(get_pos(r, L, "rope_theta", 10000.0, &theta));
  if (rp && field(rp, "rope_theta")) TRY_(get_pos(rp, L, "rope_theta", 10000.0, &theta));
  c.rope_theta = theta;
  const cJSON *prf = field(r, "partial_rotary_factor");
  if (prf && (!cJSON_IsNumber(prf) || prf->valuedouble != 1.0)) {
    st = lc_fail(LC_EINVAL, "%s: partial_rotary_factor is not supported: longctx rotates the whole head", L);
    goto done;
  }
  TRY_(get_bool(r, L, "tie_word_embeddings", &c.tie_embeddings));
  // sliding_window: Mistral's (null = none); a Llama model ignores it in transformers, so
  // a number there is an error rather than a window applied or dropped silently. Qwen2/3
  // apply it only with use_sliding_window (to the layers from max_window_layers on).
  int use_sw = 0;
  const int qwen = arch->id == LC_ARCH_QWEN2 || arch->id == LC_ARCH_QWEN3;
  TRY_(get_bool(r, L, "use_sliding_window", &use_sw));
  if (qwen && use_sw) {
    // The window applies to layers >= max_window_layers: all of them or none is one attention.
    const cJSON *mw = field(r, "max_window_layers");
    double m = mw && cJSON_IsNumber(mw) ? mw->valuedouble : 28.0; // Qwen2Config's default
    if (mw && !cJSON_IsNumber(mw)) {
      st = lc_fail(LC_EFORMAT, "%s: max_window_layers must be a number; fix config.json", L);
      goto done;
    }
    if (m > 0 && m < c.n_layers) {
      st = lc_fail(LC_EINVAL, "%s: use_sliding_window with max_window_layers %g windows only some of the %d layers; "
                   "longctx gives every layer the same attention: set use_sliding_window false, or max_window_layers 0 "
                   "(every layer windowed)", L, m, c.n_layers);
      goto done;
    }
    if (m <= 0) TRY_(get_int(r, L, "sliding_window", 0, 4096, &c.sliding_window)); // Qwen2Config's default
  }
  const cJSON *sw = qwen ? NULL : field(r, "sliding_window");
  if (sw && !cJSON_IsNull(sw)) {
    if (!mistral) {
      st = lc_fail(LC_EINVAL, "%s: sliding_window is set but model_type is llama, whose attention ignores it; "
                   "set model_type \"mistral\" to use the window or remove sliding_window", L);
      goto done;
    }
    TRY_(get_int(r, L, "sliding_window", 1, 0, &c.sliding_window));
  }
  // layer_types (transformers 5): every layer the attention the fields above give.
  const cJSON *lt = field(r, "layer_types"), *ltt;
  const char *want_lt = c.sliding_window > 0 ? "sliding_attention" : "full_attention";
  if (lt && cJSON_IsArray(lt)) cJSON_ArrayForEach(ltt, lt) if (!cJSON_IsString(ltt) || strcmp(ltt->valuestring, want_lt)) {
      st = lc_fail(LC_EINVAL, "%s: layer_types lists '%.40s' where the config gives every layer %s; longctx gives every "
                   "layer the same attention", L, cJSON_IsString(ltt) ? ltt->valuestring : "?", want_lt);
      goto done;
    }
  // Settings longctx does not implement: errors, never silently ignored.
  const cJSON *act = field(r, "hidden_act");
  if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0)) {
    st = lc_fail(LC_EINVAL, "%s: hidden_act '%.40s' is not supported: longctx's MLP is SwiGLU with "
                 "silu (hidden_act \"silu\")", L, cJSON_IsString(act) ? act->valuestring : "(not a string)");
    goto done;
  }
  int attn_bias = 0, mlp_bias = 0;
  TRY_(get_bool(r, L, "attention_bias", &attn_bias));
  TRY_(get_bool(r, L, "mlp_bias", &mlp_bias));
  if (mlp_bias) {
    st = lc_fail(LC_EINVAL, "%s: mlp_bias true is not supported: longctx's MLP has no bias terms; use a model with "
                 "mlp_bias false", L);
    goto done;
  }
  if (attn_bias && !arch->attention_bias) {
    st = lc_fail(LC_EINVAL, "%s: attention_bias true is not part of %s (transformers builds it without those biases); "
                 "set it to false or use the family the weights come from", L, arch->hf_class);
    goto done;
  }
  lc_arch_apply(&c, arch, attn_bias);
  const cJSON *tp = field(r, "pretraining_tp");
  if (tp && (!cJSON_IsNumber(tp) || tp->valuedouble != 1)) {
    st = lc_fail(LC_EINVAL, "%s: pretraining_tp %g is not supported: set it to 1 (it only changes "
                 "how HF slices its matmuls; the weights are the same)", L,
                 cJSON_IsNumber(tp) ? tp->valuedouble : -1.0);
    goto done;
  }
  const cJSON *dr = field(r, "attention_dropout");
  if (dr && (!cJSON_IsNumber(dr) || dr->valuedouble != 0)) {
    st = lc_fail(LC_EINVAL, "%s: attention_dropout %g is not supported: longctx has no dropout; "
                 "set it to 0.0", L, cJSON_IsNumber(dr) ? dr->valuedouble : -1.0);
    goto done;
  }
  if (field(r, "quantization_config")) {
    st = lc_fail(LC_EINVAL, "%s: quantization_config is set: quantized checkpoints are not "
                 "supported; use the model's unquantized (float) weights", L);
    goto done;
  }
  snprintf(c.name, sizeof c.name, "hf");
  st = lc_config_validate(&c);
  if (st != LC_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", lc_errmsg());
    st = lc_fail(st, "%s: %s", L, msg);
    goto done;
  }
done:
#undef TRY_
  cJSON_Delete(r);
  if (st == LC_OK) *cfg = c;
  return st;
}

lc_status lc_hf_read_config(const char *dir, lc_config *cfg) {
  char path[HF_PATH];
  LC_TRY(lc_path_join(path, sizeof path, dir, "config.json"));
  if (!lc_is_file(path)) {
    if (!lc_is_dir(dir))
      return lc_fail(LC_EIO, "%s is not a directory: give a preset name or a Hugging Face Llama "
                     "model directory", dir);
    return lc_fail(LC_EIO, "%s has no config.json: give a Hugging Face Llama model directory", dir);
  }
  char *json;
  size_t len;
  LC_TRY(lc_read_file(path, (size_t)16 << 20, &json, &len));
  lc_status st = lc_hf_parse_config(json, len, path, cfg);
  free(json);
  if (st == LC_OK) {
    // The model's name: the directory's last component.
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/') b--;
    snprintf(cfg->name, sizeof cfg->name, "%.*s", (int)(n - b), dir + b);
  }
  return st;
}

// Shortest text that reads back (through strtod, as cJSON reads) to exactly v.
static void fmt_real(char *b, size_t cap, double v, int is_float) {
  if (v == floor(v) && fabs(v) < 1e15) {
    snprintf(b, cap, "%.1f", v);
    return;
  }
  for (int p = 1; p <= 17; p++) {
    snprintf(b, cap, "%.*g", p, v);
    double r = strtod(b, NULL);
    if (is_float ? (float)r == (float)v : r == v) return;
  }
}

// A number field written so that it reads back exactly (fmt_real).
static void put_real(cJSON *o, const char *k, double v, int is_float) {
  char b[64];
  fmt_real(b, sizeof b, v, is_float);
  cJSON_AddItemToObject(o, k, cJSON_CreateRaw(b));
}

// rope_scaling as transformers 4 and 5 both read it (5 moves it into rope_parameters).
static cJSON *rope_json(const lc_config *c) {
  const lc_rope_scaling *r = &c->rope;
  if (r->type == LC_ROPE_DEFAULT) return cJSON_CreateNull();
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "rope_type", lc_rope_type_name(r->type));
  if (r->type != LC_ROPE_LONGROPE || r->factor > 0) put_real(o, "factor", r->factor, 0);
  if (r->orig_max > 0) cJSON_AddNumberToObject(o, "original_max_position_embeddings", r->orig_max);
  if (r->type == LC_ROPE_LLAMA3) {
    put_real(o, "low_freq_factor", r->low_freq_factor, 0);
    put_real(o, "high_freq_factor", r->high_freq_factor, 0);
  }
  if (r->type == LC_ROPE_YARN) {
    put_real(o, "beta_fast", r->beta_fast, 0);
    put_real(o, "beta_slow", r->beta_slow, 0);
    if (r->mscale > 0) put_real(o, "mscale", r->mscale, 0);
    if (r->mscale_all_dim > 0) put_real(o, "mscale_all_dim", r->mscale_all_dim, 0);
    cJSON_AddBoolToObject(o, "truncate", r->truncate);
  }
  if ((r->type == LC_ROPE_YARN || r->type == LC_ROPE_LONGROPE) && r->attn_factor > 0)
    put_real(o, "attention_factor", r->attn_factor, 0);
  if (r->type == LC_ROPE_LONGROPE) {
    cJSON *sf = cJSON_AddArrayToObject(o, "short_factor"), *lf = cJSON_AddArrayToObject(o, "long_factor");
    for (int i = 0; i < r->n_factors; i++) {
      char b[64];
      fmt_real(b, sizeof b, r->short_factor[i], 1);
      cJSON_AddItemToArray(sf, cJSON_CreateRaw(b));
      fmt_real(b, sizeof b, r->long_factor[i], 1);
      cJSON_AddItemToArray(lf, cJSON_CreateRaw(b));
    }
  }
  return o;
}

lc_status lc_hf_write_config(const char *dir, const lc_config *c, lc_dtype dt) {
  LC_TRY(lc_config_validate(c));
  if (c->max_pos <= 0 || !isfinite(c->norm_eps) || !isfinite(c->rope_theta))
    return lc_fail(LC_EINVAL, "model config: max_position_embeddings must be positive and "
                   "rms_norm_eps, rope_theta finite");
  char path[HF_PATH];
  if (dt != LC_DT_F32 && dt != LC_DT_BF16)
    return lc_fail(LC_EINVAL, "model weights are written as F32 or BF16, not %s", lc_dtype_name(dt));
  LC_TRY(lc_path_join(path, sizeof path, dir, "config.json"));
  const lc_arch *arch = lc_arch_written(c); // a Llama with a window is a Mistral model for transformers
  const int qwen = arch->id == LC_ARCH_QWEN2 || arch->id == LC_ARCH_QWEN3;
  // The biases the family's attention_bias gives must be the model's.
  const int attn_bias = arch->attention_bias && c->o_bias; // lc_config_validate: the family has this variant
  cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "architectures");
  cJSON_AddItemToArray(a, cJSON_CreateString(arch->hf_class));
  cJSON_AddStringToObject(o, "model_type", arch->model_type);
  if (qwen) {
    cJSON_AddBoolToObject(o, "use_sliding_window", c->sliding_window > 0);
    if (c->sliding_window > 0) cJSON_AddNumberToObject(o, "max_window_layers", 0);
    if (c->sliding_window > 0) cJSON_AddNumberToObject(o, "sliding_window", c->sliding_window);
    else cJSON_AddNullToObject(o, "sliding_window");
  } else if (c->sliding_window > 0) {
    cJSON_AddNumberToObject(o, "sliding_window", c->sliding_window);
  }
  cJSON_AddStringToObject(o, "torch_dtype", dt == LC_DT_BF16 ? "bfloat16" : "float32");
  cJSON_AddNumberToObject(o, "hidden_size", c->dim);
  cJSON_AddNumberToObject(o, "intermediate_size", c->ffn);
  cJSON_AddNumberToObject(o, "num_hidden_layers", c->n_layers);
  cJSON_AddNumberToObject(o, "num_attention_heads", c->n_heads);
  cJSON_AddNumberToObject(o, "num_key_value_heads", c->n_kv_heads);
  cJSON_AddNumberToObject(o, "head_dim", c->head_dim);
  cJSON_AddStringToObject(o, "hidden_act", "silu");
  put_real(o, "rms_norm_eps", c->norm_eps, 1);
  put_real(o, "rope_theta", c->rope_theta, 0);
  cJSON_AddItemToObject(o, "rope_scaling", rope_json(c));
  cJSON_AddNumberToObject(o, "vocab_size", c->vocab);
  cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_embeddings);
  cJSON_AddNumberToObject(o, "max_position_embeddings", c->max_pos);
  if (arch->attention_bias) cJSON_AddBoolToObject(o, "attention_bias", attn_bias);
  cJSON_AddNumberToObject(o, "attention_dropout", 0.0);
  if (!qwen) cJSON_AddBoolToObject(o, "mlp_bias", 0);
  if (!qwen) cJSON_AddNumberToObject(o, "pretraining_tp", 1);
  cJSON_AddNumberToObject(o, "initializer_range", 0.02);
  cJSON_AddBoolToObject(o, "use_cache", 1);
  cJSON_AddNullToObject(o, "bos_token_id");
  cJSON_AddNullToObject(o, "eos_token_id");
  return lc_hf_write_json(path, o);
}

lc_status lc_hf_write_json(const char *path, cJSON *o) {
  char *text = cJSON_Print(o);
  cJSON_Delete(o);
  // cJSON indents with tabs; HF's files use two spaces and ": " (no string here holds a tab).
  char *t2 = text ? malloc(2 * strlen(text) + 2) : NULL;
  if (!t2) {
    free(text);
    return lc_fail(LC_ENOMEM, "out of memory writing %s", path);
  }
  size_t n = 0;
  for (const char *q = text; *q; q++) {
    if (*q == '\t' && q > text && q[-1] == ':') t2[n++] = ' ';
    else if (*q == '\t') t2[n++] = ' ', t2[n++] = ' ';
    else t2[n++] = *q;
  }
  free(text);
  t2[n++] = '\n';
  lc_status st = lc_write_file_atomic(path, t2, n);
  free(t2);
  return st;
}

int lc_hf_is_model_dir(const char *dir) {
  char path[HF_PATH];
  if (lc_path_join(path, sizeof path, dir, "config.json") != LC_OK) return 0;
  return lc_is_file(path);
}
