#define _POSIX_C_SOURCE 200809L
// Hugging Face model directories: config.json read/write and every unsupported-field error,
// save -> load bit-exact (tied and untied), BF16/F16 weights, sharded index loading, and
// the errors for wrong shapes, missing and unexpected tensors.
#include <string.h>
#include <unistd.h>

#include "core/arena.h"
#include "io/fsutil.h"
#include "io/safetensors.h"
#include "model/hf.h"
#include "model/model.h"
#include "testutil.h"

static char root[256];
static lc_arena arena;

static void sub(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", root, name); }

static void put(const char *dir, const char *name, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  lc_mkdir_p(dir);
  CHECK(lc_write_file_atomic(p, text, strlen(text)) == LC_OK, "write %s", p);
}

static int same_config(const lc_config *a, const lc_config *b) {
  return a->dim == b->dim && a->n_layers == b->n_layers && a->n_heads == b->n_heads &&
         a->n_kv_heads == b->n_kv_heads && a->head_dim == b->head_dim && a->ffn == b->ffn &&
         a->vocab == b->vocab && a->norm_eps == b->norm_eps && a->rope_theta == b->rope_theta &&
         a->tie_embeddings == b->tie_embeddings && a->max_pos == b->max_pos && a->arch == b->arch &&
         a->qkv_bias == b->qkv_bias && a->o_bias == b->o_bias && a->qk_norm == b->qk_norm &&
         a->sliding_window == b->sliding_window && lc_rope_scaling_equal(&a->rope, &b->rope);
}

#define BASE                                                                                   \
  "\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":64,"     \
  "\"intermediate_size\":176,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":256"

static lc_status parse(const char *json, lc_config *c) {
  return lc_hf_parse_config(json, strlen(json), "cfg.json", c);
}

static void test_config(void) {
  lc_config c, r;
  // Write -> read round trip, untied and tied with unusual eps/theta.
  for (int v = 0; v < 2; v++) {
    CHECK(lc_config_preset(&c, "tiny") == LC_OK, "preset");
    if (v) {
      c.tie_embeddings = 1;
      c.norm_eps = 1e-6f;
      c.rope_theta = 500000.0;
      c.max_pos = 131072;
    } else {
      c.norm_eps = 1.2345678e-5f;
      c.rope_theta = 12345.678;
    }
    char d[300];
    sub(d, sizeof d, v ? "cfg_tied" : "cfg");
    CHECK(lc_mkdir_p(d) == LC_OK, "mkdir");
    CHECK(lc_hf_write_config(d, &c, LC_DT_F32) == LC_OK, "write config: %s", lc_errmsg());
    CHECK(lc_hf_is_model_dir(d), "is model dir");
    memset(&r, 0x55, sizeof r);
    CHECK(lc_hf_read_config(d, &r) == LC_OK, "read config: %s", lc_errmsg());
    CHECK(same_config(&c, &r), "config round trip %d (eps %.9g vs %.9g, theta %.17g vs %.17g)", v,
          c.norm_eps, r.norm_eps, c.rope_theta, r.rope_theta);
    CHECK(!strcmp(r.name, v ? "cfg_tied" : "cfg"), "name from the directory: %s", r.name);
    char p[400], *text;
    size_t n;
    snprintf(p, sizeof p, "%s/config.json", d);
    CHECK(lc_read_file(p, 1 << 20, &text, &n) == LC_OK, "read text");
    CHECK(strstr(text, "\"LlamaForCausalLM\"") && strstr(text, "\"model_type\": \"llama\"") &&
              strstr(text, "\"torch_dtype\": \"float32\"") && strstr(text, "\"bos_token_id\": null"),
          "HF fields present: %s", text);
    CHECK(strstr(text, v ? "\"tie_word_embeddings\": true" : "\"tie_word_embeddings\": false") != NULL,
          "tie flag");
    free(text);
  }
  CHECK(!lc_hf_is_model_dir(root), "not a model dir");

  // A real-world style config with extra harmless fields and HF defaults.
  const char *llama2 =
      "{\"_name_or_path\":\"x\",\"architectures\":[\"LlamaForCausalLM\"],\"bos_token_id\":1,"
      "\"eos_token_id\":2,\"hidden_act\":\"silu\",\"hidden_size\":4096,\"initializer_range\":0.02,"
      "\"intermediate_size\":11008,\"max_position_embeddings\":4096,\"model_type\":\"llama\","
      "\"num_attention_heads\":32,\"num_hidden_layers\":32,\"num_key_value_heads\":32,"
      "\"pretraining_tp\":1,\"rms_norm_eps\":1e-05,\"rope_scaling\":null,\"tie_word_embeddings\":false,"
      "\"torch_dtype\":\"float16\",\"transformers_version\":\"4.31.0.dev0\",\"use_cache\":true,"
      "\"vocab_size\":32000,\"attention_bias\":false,\"mlp_bias\":false,\"attention_dropout\":0.0,"
      "\"head_dim\":128}\n";
  CHECK(parse(llama2, &c) == LC_OK, "llama2 config: %s", lc_errmsg());
  CHECK(c.dim == 4096 && c.ffn == 11008 && c.n_layers == 32 && c.n_heads == 32 && c.n_kv_heads == 32 &&
            c.head_dim == 128 && c.vocab == 32000 && c.max_pos == 4096 && c.norm_eps == 1e-5f &&
            c.rope_theta == 10000.0 && !c.tie_embeddings,
        "llama2 fields");
  CHECK(parse("{" BASE "}", &c) == LC_OK, "minimal: %s", lc_errmsg());
  CHECK(c.n_kv_heads == 4 && c.norm_eps == 1e-6f && c.rope_theta == 10000.0 && c.max_pos == 2048 &&
            !c.tie_embeddings && c.head_dim == 16,
        "HF defaults");
  CHECK(parse("{" BASE ",\"num_key_value_heads\":null,\"rope_scaling\":{\"rope_type\":\"default\"},"
              "\"rope_theta\":500000.0,\"tie_word_embeddings\":true}", &c) == LC_OK &&
            c.n_kv_heads == 4 && c.rope_theta == 500000.0 && c.tie_embeddings,
        "null kv heads, default rope_scaling: %s", lc_errmsg());
  CHECK(parse("{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":176,"
              "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":256,"
              "\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":250000.0}}", &c) == LC_OK &&
            c.rope_theta == 250000.0,
        "transformers 5 rope_parameters: %s", lc_errmsg());

  // Each unsupported or broken field: status and the words that name it and the fix.
  static const struct {
    const char *json;
    lc_status st;
    const char *w1, *w2;
  } bad[] = {
      {"{" BASE ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0}}", LC_EFORMAT, "llama3", "low_freq_factor"},
      {"{" BASE ",\"rope_scaling\":{\"type\":\"su\",\"factor\":2.0}}", LC_EINVAL, "rope_scaling of type 'su'", "longrope"},
      {"{" BASE ",\"rope_scaling\":3}", LC_EFORMAT, "rope_scaling", "object or null"},
      {"{" BASE ",\"rope_parameters\":{\"rope_type\":\"yarn\"}}", LC_EFORMAT, "yarn", "factor"},
      {"{" BASE ",\"rope_parameters\":{\"rope_type\":\"linear\",\"factor\":0.5}}", LC_EINVAL, "linear", "factor >= 1"},
      {"{" BASE ",\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"default\"}}}", LC_EINVAL, "per layer type", "one RoPE"},
      {"{" BASE ",\"rope_parameters\":{\"rope_type\":\"default\",\"partial_rotary_factor\":0.5}}", LC_EINVAL, "partial_rotary_factor", "whole head"},
      {"{" BASE ",\"rope_scaling\":{\"rope_type\":\"longrope\",\"short_factor\":[1,1],\"long_factor\":[1,1]}}", LC_EINVAL, "longrope", "head_dim/2 = 8"},
      {"{" BASE ",\"rope_scaling\":{\"rope_type\":\"longrope\",\"short_factor\":[1,1],\"long_factor\":[1]}}", LC_EFORMAT, "short_factor has 2", "long_factor 1"},
      {"{" BASE ",\"mlp_bias\":true}", LC_EINVAL, "mlp_bias true", "mlp_bias false"},
      {"{" BASE ",\"attention_bias\":1}", LC_EFORMAT, "attention_bias", "true or false"},
      {"{" BASE ",\"pretraining_tp\":2}", LC_EINVAL, "pretraining_tp 2", "set it to 1"},
      {"{" BASE ",\"hidden_act\":\"gelu\"}", LC_EINVAL, "hidden_act 'gelu'", "silu"},
      {"{" BASE ",\"head_dim\":7}", LC_EINVAL, "head_dim 7", "even"},
      {"{" BASE ",\"attention_dropout\":0.1}", LC_EINVAL, "attention_dropout", "0.0"},
      {"{" BASE ",\"quantization_config\":{\"bits\":4}}", LC_EINVAL, "quantization_config", "unquantized"},
      {"{\"model_type\":\"gemma\",\"hidden_size\":64}", LC_EINVAL, "model_type 'gemma'", "nearest is LlamaForCausalLM"},
      {"{\"architectures\":[\"Qwen2MoeForCausalLM\"],\"hidden_size\":64}", LC_EINVAL, "Qwen2MoeForCausalLM", "nearest is Qwen2ForCausalLM"},
      {"{\"architectures\":[\"MixtralForCausalLM\"],\"hidden_size\":64}", LC_EINVAL, "Mixtral", "nearest is MistralForCausalLM"},
      {"{\"architectures\":[\"Qwen2ForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":64}", LC_EINVAL, "Qwen2ForCausalLM", "different families"},
      {"{\"architectures\":[\"GemmaForCausalLM\"],\"hidden_size\":64}", LC_EINVAL, "GemmaForCausalLM", "LlamaForCausalLM"},
      {"{\"hidden_size\":64}", LC_EFORMAT, "model_type", "architectures"},
      {"{\"model_type\":\"llama\",\"intermediate_size\":176,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":256}", LC_EFORMAT, "missing field hidden_size", NULL},
      {"{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":176,\"num_hidden_layers\":2,\"num_attention_heads\":4}", LC_EFORMAT, "missing field vocab_size", NULL},
      {"{" BASE ",\"num_key_value_heads\":\"2\"}", LC_EFORMAT, "num_key_value_heads", "positive integer"},
      {"{" BASE ",\"num_key_value_heads\":3}", LC_EINVAL, "num_key_value_heads 3", "divide"},
      {"{" BASE ",\"max_position_embeddings\":-5}", LC_EFORMAT, "max_position_embeddings", "positive integer"},
      {"{" BASE ",\"rms_norm_eps\":0}", LC_EFORMAT, "rms_norm_eps", "positive number"},
      {"{" BASE ",\"rope_theta\":\"big\"}", LC_EFORMAT, "rope_theta", "positive number"},
      {"{" BASE ",\"tie_word_embeddings\":\"yes\"}", LC_EFORMAT, "tie_word_embeddings", "true or false"},
      {"{\"model_type\":\"llama\",\"hidden_size\":60,\"intermediate_size\":176,\"num_hidden_layers\":2,\"num_attention_heads\":8,\"vocab_size\":256}", LC_EINVAL, "hidden_size 60", "num_attention_heads 8"},
      {"{" BASE "", LC_EFORMAT, "not valid JSON", NULL},
      {"{" BASE "} {}", LC_EFORMAT, "extra text", NULL},
      {"[1]", LC_EFORMAT, "not a JSON object", NULL},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    lc_status st = parse(bad[i].json, &c);
    const char *m = lc_errmsg();
    CHECK(st == bad[i].st && strstr(m, "cfg.json") && strstr(m, bad[i].w1) &&
              (!bad[i].w2 || strstr(m, bad[i].w2)),
          "bad config %zu: status %s message: %s", i, lc_status_name(st), m);
  }
  // Directory-level errors.
  char d[300];
  sub(d, sizeof d, "nocfg");
  lc_mkdir_p(d);
  CHECK(lc_hf_read_config(d, &c) == LC_EIO && strstr(lc_errmsg(), "no config.json"), "no config: %s", lc_errmsg());
  sub(d, sizeof d, "does-not-exist");
  CHECK(lc_hf_read_config(d, &c) == LC_EIO && strstr(lc_errmsg(), "not a directory"), "no dir: %s", lc_errmsg());
}

static void make_model(lc_model *m, int tied, uint64_t seed) {
  lc_config c;
  lc_config_preset(&c, "tiny");
  c.tie_embeddings = tied;
  CHECK(lc_model_create(m, &c, &arena) == LC_OK, "create: %s", lc_errmsg());
  if (seed) lc_model_init_random(m, seed);
}

static int params_equal(const lc_model *a, const lc_model *b) {
  return a->n_flat == b->n_flat && !memcmp(a->params, b->params, sizeof(float) * a->n_flat);
}

static void test_save_load(void) {
  for (int tied = 0; tied < 2; tied++) {
    lc_model a, b;
    make_model(&a, tied, 11 + tied);
    // Perturb the norms so they are not all 1.
    for (size_t i = 0; i < a.n_flat; i += 7) a.params[i] += 0.001f * (float)(i % 13);
    for (int i = 0; i < a.n_tensors; i++) // padding stays zero
      for (size_t j = a.table[i].numel; j < ((a.table[i].numel + 15) & ~(size_t)15); j++)
        a.params[a.table[i].offset + j] = 0;
    char d[300];
    sub(d, sizeof d, tied ? "save_tied/deeper" : "save");
    CHECK(lc_hf_save(d, &a, LC_DT_F32) == LC_OK, "save: %s", lc_errmsg());
    lc_config c;
    CHECK(lc_hf_read_config(d, &c) == LC_OK && same_config(&c, &a.cfg), "saved config reads back");
    char p[400];
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    lc_st_file f;
    CHECK(lc_st_open(&f, p) == LC_OK, "open saved: %s", lc_errmsg());
    CHECK(f.n == a.n_tensors && (lc_st_find(&f, "lm_head.weight") != NULL) == !tied,
          "tensor count %d vs %d, lm_head only when untied", f.n, a.n_tensors);
    const lc_st_tensor *q = lc_st_find(&f, "model.layers.1.self_attn.k_proj.weight");
    CHECK(q && q->ndim == 2 && q->shape[0] == 32 && q->shape[1] == 64, "HF shape of k_proj");
    const char *fmt = lc_st_meta(&f, "format");
    CHECK(fmt && !strcmp(fmt, "pt"), "format metadata for transformers");
    lc_st_close(&f);
    make_model(&b, tied, 0);
    CHECK(lc_hf_load_weights(d, &b) == LC_OK, "load: %s", lc_errmsg());
    CHECK(params_equal(&a, &b), "save -> load bit-exact (tied %d)", tied);
    CHECK(lc_buf_host(b.ps.w.head) == (tied ? lc_buf_host(b.ps.w.embed) : b.params + b.table[b.n_tensors - 1].offset),
          "views");
    lc_model_destroy(&b);
    // A tied model also accepts a file with lm_head.weight; an untied one needs it.
    if (tied) {
      lc_model u;
      make_model(&u, 0, 5);
      char du[300];
      sub(du, sizeof du, "untied_src");
      CHECK(lc_hf_save(du, &u, LC_DT_F32) == LC_OK, "save untied");
      make_model(&b, 1, 0);
      CHECK(lc_hf_load_weights(du, &b) == LC_OK, "tied model ignores lm_head.weight: %s", lc_errmsg());
      CHECK(!memcmp(lc_buf_host(b.ps.w.embed), lc_buf_host(u.ps.w.embed), sizeof(float) * 256 * 64), "embeddings loaded");
      lc_model_destroy(&b);
      make_model(&b, 0, 0);
      CHECK(lc_hf_load_weights(d, &b) == LC_EFORMAT && strstr(lc_errmsg(), "lm_head.weight") &&
                strstr(lc_errmsg(), "tie_word_embeddings"),
            "untied model, tied file: %s", lc_errmsg());
      lc_model_destroy(&b);
      lc_model_destroy(&u);
    }
    lc_model_destroy(&a);
  }
}

// Writes model m's tensors as dtype ("BF16"/"F16") with raw bit patterns bits(value).
static void write_half(const char *path, const lc_model *m, const char *dtype, uint16_t (*conv)(float)) {
  char *hdr = malloc(1 << 16);
  size_t total = 0;
  int k = snprintf(hdr, 1 << 16, "{");
  for (int i = 0; i < m->n_tensors; i++) {
    const lc_param_info *p = &m->table[i];
    char shp[64];
    if (p->ndim == 2) snprintf(shp, sizeof shp, "%ld,%ld", p->shape[0], p->shape[1]);
    else snprintf(shp, sizeof shp, "%ld", p->shape[0]);
    k += snprintf(hdr + k, (size_t)(1 << 16) - (size_t)k,
                  "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%zu,%zu]}",
                  i ? "," : "", p->name, dtype, shp, total, total + 2 * p->numel);
    total += 2 * p->numel;
  }
  snprintf(hdr + k, (size_t)(1 << 16) - (size_t)k, "}");
  unsigned char *data = malloc(total);
  size_t o = 0;
  for (int i = 0; i < m->n_tensors; i++)
    for (size_t j = 0; j < m->table[i].numel; j++) {
      uint16_t h = conv(m->params[m->table[i].offset + j]);
      data[o++] = h & 0xff;
      data[o++] = h >> 8;
    }
  FILE *f = fopen(path, "wb");
  unsigned long long n = strlen(hdr);
  for (int i = 0; i < 8; i++) fputc((int)(n >> (8 * i)) & 0xff, f);
  fwrite(hdr, 1, n, f);
  fwrite(data, 1, total, f);
  fclose(f);
  free(hdr);
  free(data);
}

static uint16_t to_bf16(float x) { uint32_t u; memcpy(&u, &x, 4); return (uint16_t)(u >> 16); }
// f32 -> f16 for small normal values (the test's weights): round toward zero.
static uint16_t to_f16(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  uint32_t s = (u >> 16) & 0x8000, e = (u >> 23) & 0xff, mnt = u & 0x7fffff;
  if (e < 113) return (uint16_t)s; // flush tiny values to zero
  return (uint16_t)(s | ((e - 112) << 10) | (mnt >> 13));
}

static void test_half_weights(void) {
  for (int v = 0; v < 2; v++) {
    lc_model a, b;
    make_model(&a, 0, 21);
    char d[300], p[400];
    sub(d, sizeof d, v ? "f16" : "bf16");
    lc_mkdir_p(d);
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    write_half(p, &a, v ? "F16" : "BF16", v ? to_f16 : to_bf16);
    make_model(&b, 0, 0);
    CHECK(lc_hf_load_weights(d, &b) == LC_OK, "load %s: %s", v ? "F16" : "BF16", lc_errmsg());
    long bad = 0;
    for (int i = 0; i < a.n_tensors; i++)
      for (size_t j = 0; j < a.table[i].numel; j++) {
        float x = a.params[a.table[i].offset + j];
        float want = v ? lc_f16_to_f32(to_f16(x)) : lc_bf16_to_f32(to_bf16(x));
        bad += memcmp(&want, &b.params[a.table[i].offset + j], 4) != 0;
      }
    CHECK(bad == 0, "%s weights converted exactly (%ld wrong)", v ? "F16" : "BF16", bad);
    lc_model_destroy(&a);
    lc_model_destroy(&b);
  }
}

// Writes the model's tensors [lo, hi) of its table as one F32 file.
static void write_part(const char *path, const lc_model *m, int lo, int hi, const char *extra_name,
                       const float *extra, long long extra_n) {
  lc_st_entry *e = calloc((size_t)(hi - lo + 1), sizeof *e);
  int n = 0;
  for (int i = lo; i < hi; i++) {
    const lc_param_info *p = &m->table[i];
    e[n].name = p->name;
    e[n].ndim = p->ndim;
    e[n].shape[0] = p->shape[0];
    e[n].shape[1] = p->shape[1];
    e[n].data = m->params + p->offset;
    n++;
  }
  if (extra_name) {
    e[n].name = extra_name;
    e[n].ndim = 1;
    e[n].shape[0] = extra_n;
    e[n].data = extra;
    n++;
  }
  CHECK(lc_st_write(path, e, n, NULL, 0) == LC_OK, "write part: %s", lc_errmsg());
  free(e);
}

static void write_index(const char *dir, const lc_model *m, int split, const char *s1, const char *s2,
                        const char *extra) {
  size_t cap = 1 << 16;
  char *t = malloc(cap);
  int k = snprintf(t, cap, "{\"metadata\":{\"total_size\":0},\"weight_map\":{");
  for (int i = 0; i < m->n_tensors; i++)
    k += snprintf(t + k, cap - (size_t)k, "%s\"%s\":\"%s\"", i ? "," : "", m->table[i].name,
                  i < split ? s1 : s2);
  k += snprintf(t + k, cap - (size_t)k, "%s}}", extra ? extra : "");
  put(dir, "model.safetensors.index.json", t);
  free(t);
}

static void test_sharded(void) {
  lc_model a, b;
  make_model(&a, 0, 31);
  char d[300], p1[400], p2[400], single[400];
  sub(d, sizeof d, "sharded");
  lc_mkdir_p(d);
  int split = a.n_tensors / 2;
  snprintf(p1, sizeof p1, "%s/model-00001-of-00002.safetensors", d);
  snprintf(p2, sizeof p2, "%s/model-00002-of-00002.safetensors", d);
  float inv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  write_part(p1, &a, 0, split, NULL, NULL, 0);
  write_part(p2, &a, split, a.n_tensors, "model.layers.0.self_attn.rotary_emb.inv_freq", inv, 8);
  write_index(d, &a, split, "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", NULL);
  make_model(&b, 0, 0);
  CHECK(lc_hf_load_weights(d, &b) == LC_OK, "sharded load (inv_freq ignored): %s", lc_errmsg());
  CHECK(params_equal(&a, &b), "sharded load bit-exact");
  // The index maps a tensor to the wrong shard.
  write_index(d, &a, split + 1, "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", NULL);
  CHECK(lc_hf_load_weights(d, &b) == LC_EFORMAT && strstr(lc_errmsg(), a.table[split].name) &&
            strstr(lc_errmsg(), "index maps it"), "wrong shard: %s", lc_errmsg());
  // The index names a tensor its shard does not contain.
  write_index(d, &a, split, "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
              ",\"model.extra\":\"model-00001-of-00002.safetensors\"");
  CHECK(lc_hf_load_weights(d, &b) == LC_EFORMAT && strstr(lc_errmsg(), "model.extra") &&
            strstr(lc_errmsg(), "does not contain it"), "index entry absent: %s", lc_errmsg());
  // Missing shard file.
  write_index(d, &a, split, "model-00001-of-00002.safetensors", "model-gone.safetensors", NULL);
  CHECK(lc_hf_load_weights(d, &b) == LC_EIO && strstr(lc_errmsg(), "model-gone.safetensors"),
        "missing shard: %s", lc_errmsg());
  // Path escape.
  write_index(d, &a, split, "../model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", NULL);
  CHECK(lc_hf_load_weights(d, &b) == LC_EFORMAT && strstr(lc_errmsg(), "outside the model directory"),
        "path escape: %s", lc_errmsg());
  // No weight_map.
  put(d, "model.safetensors.index.json", "{\"metadata\":{}}");
  CHECK(lc_hf_load_weights(d, &b) == LC_EFORMAT && strstr(lc_errmsg(), "weight_map"), "no weight_map: %s", lc_errmsg());
  // A single model.safetensors takes precedence over the (here broken) index, as in transformers.
  snprintf(single, sizeof single, "%s/model.safetensors", d);
  write_part(single, &a, 0, a.n_tensors, NULL, NULL, 0);
  memset(b.params, 0, sizeof(float) * b.n_flat);
  CHECK(lc_hf_load_weights(d, &b) == LC_OK && params_equal(&a, &b), "single file wins: %s", lc_errmsg());
  unlink(single);
  lc_model_destroy(&b);

  // Single-file errors: shape mismatch, missing tensor, unexpected tensor.
  char e[300], pe[400];
  sub(e, sizeof e, "errs");
  lc_mkdir_p(e);
  snprintf(pe, sizeof pe, "%s/model.safetensors", e);
  make_model(&b, 0, 0);
  // A file whose q_proj entry is [64, 32] instead of [64, 64].
  {
    lc_st_entry *en = calloc((size_t)a.n_tensors, sizeof *en);
    for (int i = 0; i < a.n_tensors; i++) {
      const lc_param_info *p = &a.table[i];
      en[i].name = p->name;
      en[i].ndim = p->ndim;
      en[i].shape[0] = p->shape[0];
      en[i].shape[1] = p->shape[1];
      en[i].data = a.params + p->offset;
      if (!strcmp(p->name, "model.layers.1.self_attn.q_proj.weight")) en[i].shape[1] = 32;
    }
    CHECK(lc_st_write(pe, en, a.n_tensors, NULL, 0) == LC_OK, "write");
    CHECK(lc_hf_load_weights(e, &b) == LC_EFORMAT &&
              strstr(lc_errmsg(), "model.layers.1.self_attn.q_proj.weight") &&
              strstr(lc_errmsg(), "shape [64, 32]") && strstr(lc_errmsg(), "needs [64, 64]"),
          "shape mismatch: %s", lc_errmsg());
    // 1-D norm given as 2-D.
    for (int i = 0; i < a.n_tensors; i++) {
      en[i].shape[1] = a.table[i].shape[1];
      if (!strcmp(en[i].name, "model.norm.weight")) { en[i].ndim = 2; en[i].shape[0] = 1; en[i].shape[1] = 64; }
    }
    CHECK(lc_st_write(pe, en, a.n_tensors, NULL, 0) == LC_OK, "write");
    CHECK(lc_hf_load_weights(e, &b) == LC_EFORMAT && strstr(lc_errmsg(), "model.norm.weight") &&
              strstr(lc_errmsg(), "[1, 64]") && strstr(lc_errmsg(), "needs [64]"), "rank mismatch: %s", lc_errmsg());
    free(en);
  }
  write_part(pe, &a, 1, a.n_tensors, NULL, NULL, 0);
  CHECK(lc_hf_load_weights(e, &b) == LC_EFORMAT && strstr(lc_errmsg(), "model.embed_tokens.weight") &&
            strstr(lc_errmsg(), "missing"), "missing tensor: %s", lc_errmsg());
  float junk[4] = {0};
  write_part(pe, &a, 0, a.n_tensors, "model.layers.2.self_attn.q_proj.weight", junk, 4);
  CHECK(lc_hf_load_weights(e, &b) == LC_EFORMAT && strstr(lc_errmsg(), "unexpected tensor") &&
            strstr(lc_errmsg(), "model.layers.2.self_attn.q_proj.weight"), "unexpected: %s", lc_errmsg());
  // Shards: the same tensor in two files.
  write_part(p1, &a, 0, split + 1, NULL, NULL, 0);
  write_part(p2, &a, split, a.n_tensors, NULL, NULL, 0);
  {
    size_t cap = 1 << 16;
    char *t = malloc(cap);
    snprintf(t, cap, "{\"weight_map\":{\"%s\":\"model-00001-of-00002.safetensors\",\"%s\":\"model-00002-of-00002.safetensors\"}}",
             a.table[0].name, a.table[a.n_tensors - 1].name);
    put(d, "model.safetensors.index.json", t);
    free(t);
  }
  CHECK(lc_hf_load_weights(d, &b) == LC_EFORMAT && strstr(lc_errmsg(), a.table[split].name) &&
            strstr(lc_errmsg(), "in both"), "tensor in two shards: %s", lc_errmsg());
  // No weights at all; PyTorch weights.
  char nw[300];
  sub(nw, sizeof nw, "noweights");
  lc_mkdir_p(nw);
  CHECK(lc_hf_load_weights(nw, &b) == LC_EIO && strstr(lc_errmsg(), "neither model.safetensors"),
        "no weights: %s", lc_errmsg());
  put(nw, "pytorch_model.bin", "x");
  CHECK(lc_hf_load_weights(nw, &b) == LC_EIO && strstr(lc_errmsg(), "PyTorch") &&
            strstr(lc_errmsg(), "safe_serialization"), "bin weights: %s", lc_errmsg());
  // A corrupt weights file reports the safetensors problem.
  put(e, "model.safetensors", "garbage!garbage!");
  CHECK(lc_hf_load_weights(e, &b) == LC_EFORMAT && strstr(lc_errmsg(), "model.safetensors"),
        "corrupt weights: %s", lc_errmsg());
  lc_model_destroy(&b);
  lc_model_destroy(&a);
}

// Mistral: a Llama with sliding_window. Read from its config (either way of naming it),
// written back as a Mistral config; a window on a Llama config, or a bad one, is an error.
static void test_mistral(void) {
  lc_config c, r;
#define MBASE "\"hidden_size\":64,\"intermediate_size\":176,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":256"
  CHECK(parse("{\"model_type\":\"mistral\"," MBASE ",\"sliding_window\":4096}", &c) == LC_OK && c.sliding_window == 4096,
        "mistral window: %s", lc_errmsg());
  CHECK(parse("{\"architectures\":[\"MistralForCausalLM\"]," MBASE ",\"sliding_window\":null}", &c) == LC_OK &&
            c.sliding_window == 0, "mistral without a window: %s", lc_errmsg());
  CHECK(parse("{" BASE ",\"sliding_window\":512}", &c) == LC_EINVAL && strstr(lc_errmsg(), "model_type \"mistral\""),
        "llama with a window: %s", lc_errmsg());
  CHECK(parse("{\"model_type\":\"mistral\"," MBASE ",\"sliding_window\":0}", &c) == LC_EFORMAT, "window 0: %s",
        lc_errmsg());
#undef MBASE
  lc_config_preset(&c, "tiny");
  c.sliding_window = 77;
  char d[300];
  sub(d, sizeof d, "cfg_mistral");
  lc_mkdir_p(d);
  CHECK(lc_hf_write_config(d, &c, LC_DT_F32) == LC_OK && lc_hf_read_config(d, &r) == LC_OK, "round trip: %s", lc_errmsg());
  c.arch = LC_ARCH_MISTRAL; // a Llama with a window is written as Mistral (transformers' Llama has none)
  CHECK(same_config(&c, &r) && r.sliding_window == 77, "window round trip: %d", r.sliding_window);
}

// The families' variant fields and RoPE scalings: read as written, kept through a
// write/read round trip (the saved config must give transformers the same model).
static void test_families(void) {
  lc_config c, r;
#define FB "\"hidden_size\":64,\"intermediate_size\":176,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"vocab_size\":256"
  // Qwen2.5 as published: a window that use_sliding_window false turns off.
  CHECK(parse("{\"architectures\":[\"Qwen2ForCausalLM\"],\"model_type\":\"qwen2\"," FB ",\"sliding_window\":32768,"
              "\"use_sliding_window\":false,\"max_window_layers\":21,\"tie_word_embeddings\":true}", &c) == LC_OK &&
            c.arch == LC_ARCH_QWEN2 && c.qkv_bias && !c.o_bias && !c.qk_norm && c.sliding_window == 0 && c.tie_embeddings,
        "qwen2: %s", lc_errmsg());
  CHECK(parse("{\"model_type\":\"qwen2\"," FB ",\"sliding_window\":64,\"use_sliding_window\":true,\"max_window_layers\":1}", &c) ==
                LC_EINVAL && strstr(lc_errmsg(), "only some of the 2 layers"),
        "qwen2 windows on some layers: %s", lc_errmsg());
  CHECK(parse("{\"model_type\":\"qwen2\"," FB ",\"sliding_window\":64,\"use_sliding_window\":true,\"max_window_layers\":0}", &c) ==
                LC_OK && c.sliding_window == 64,
        "qwen2 window on every layer: %s", lc_errmsg());
  CHECK(parse("{\"model_type\":\"qwen2\"," FB ",\"layer_types\":[\"full_attention\",\"sliding_attention\"]}", &c) == LC_EINVAL &&
            strstr(lc_errmsg(), "layer_types lists 'sliding_attention'"),
        "mixed layer_types: %s", lc_errmsg());
  // Qwen3: head_dim of its own, q/k norms; attention_bias adds q/k/v and o biases.
  CHECK(parse("{\"architectures\":[\"Qwen3ForCausalLM\"]," FB ",\"head_dim\":24,\"attention_bias\":true,"
              "\"layer_types\":[\"full_attention\",\"full_attention\"]}", &c) == LC_OK &&
            c.arch == LC_ARCH_QWEN3 && c.head_dim == 24 && c.qk_norm && c.qkv_bias && c.o_bias,
        "qwen3: %s", lc_errmsg());
  CHECK(parse("{\"model_type\":\"llama\"," FB ",\"attention_bias\":true}", &c) == LC_OK && c.qkv_bias && c.o_bias && !c.qk_norm,
        "llama attention_bias: %s", lc_errmsg());
  // A biased Llama with a window would be written as Mistral, which has no biases: refused.
  c.sliding_window = 8;
  CHECK(lc_config_validate(&c) == LC_EINVAL && strstr(lc_errmsg(), "MistralForCausalLM (a Llama with a sliding window)"),
        "biased Llama with a window: %s", lc_errmsg());
  CHECK(parse("{\"model_type\":\"mistral\"," FB ",\"attention_bias\":true}", &c) == LC_EINVAL &&
            strstr(lc_errmsg(), "attention_bias true is not part of MistralForCausalLM"),
        "mistral attention_bias: %s", lc_errmsg());
  CHECK(parse("{\"model_type\":\"qwen3\"," FB "}", &c) == LC_OK && c.head_dim == 128, "Qwen3's default head_dim: %d", c.head_dim);
  CHECK(parse("{\"model_type\":\"llama\"," FB ",\"rope_theta\":5.0,\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":7.0}}", &c) ==
                LC_OK && c.rope_theta == 7.0,
        "rope_parameters' theta wins: %g", c.rope_theta);
  CHECK(parse("{\"model_type\":\"llama\"," FB ",\"partial_rotary_factor\":0.5}", &c) == LC_EINVAL, "top-level partial rotary");
  // RoPE scalings, both layouts (transformers 4: rope_scaling + top-level rope_theta and
  // "type"; 5: rope_parameters holding rope_theta).
  CHECK(parse("{\"model_type\":\"llama\"," FB ",\"rope_theta\":500000.0,\"max_position_embeddings\":131072,\"rope_scaling\":"
              "{\"factor\":8.0,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192,"
              "\"rope_type\":\"llama3\"}}", &c) == LC_OK &&
            c.rope.type == LC_ROPE_LLAMA3 && c.rope.factor == 8 && c.rope.orig_max == 8192 && c.rope.low_freq_factor == 1 &&
            c.rope.high_freq_factor == 4 && c.rope_theta == 500000.0,
        "Llama 3.1 rope_scaling: %s", lc_errmsg());
  CHECK(parse("{\"model_type\":\"llama\"," FB ",\"rope_scaling\":{\"type\":\"linear\",\"factor\":2.0}}", &c) == LC_OK &&
            c.rope.type == LC_ROPE_LINEAR && c.rope.factor == 2,
        "old 'type' key: %s", lc_errmsg());
  CHECK(parse("{\"model_type\":\"llama\"," FB ",\"max_position_embeddings\":64,\"rope_parameters\":{\"rope_type\":\"yarn\","
              "\"rope_theta\":10000.0,\"original_max_position_embeddings\":16}}", &c) == LC_OK &&
            c.rope.type == LC_ROPE_YARN && c.rope.factor == 4 && c.rope.beta_fast == 32 && c.rope.beta_slow == 1 && c.rope.truncate,
        "yarn's factor from the lengths, default betas: %s", lc_errmsg());
  CHECK(parse("{\"model_type\":\"llama\"," FB ",\"rope_parameters\":{\"rope_type\":\"longrope\",\"original_max_position_embeddings\":16,"
              "\"short_factor\":[1,1,1,1,1,1,1,1.5],\"long_factor\":[2,2,2,2,2,2,2,2.5]}}", &c) == LC_OK &&
            c.rope.type == LC_ROPE_LONGROPE && c.rope.n_factors == 8 && c.rope.short_factor[7] == 1.5f && c.rope.long_factor[7] == 2.5f,
        "longrope: %s", lc_errmsg());
  // Round trips: every family x scaling the writer can express.
  const char *cases[] = {
      "{\"model_type\":\"llama\"," FB ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8,\"low_freq_factor\":1,\"high_freq_factor\":4,\"original_max_position_embeddings\":32}}",
      "{\"model_type\":\"llama\"," FB ",\"attention_bias\":true,\"rope_scaling\":{\"rope_type\":\"dynamic\",\"factor\":3.5}}",
      "{\"model_type\":\"mistral\"," FB ",\"sliding_window\":5,\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4,\"beta_fast\":16,"
      "\"beta_slow\":0.25,\"mscale\":1,\"mscale_all_dim\":0.5,\"truncate\":false,\"original_max_position_embeddings\":16}}",
      "{\"model_type\":\"qwen2\"," FB ",\"tie_word_embeddings\":true,\"rope_theta\":1000000.0}",
      "{\"model_type\":\"qwen2\"," FB ",\"sliding_window\":9,\"use_sliding_window\":true,\"max_window_layers\":0}",
      "{\"model_type\":\"qwen3\"," FB ",\"head_dim\":24,\"rope_scaling\":{\"rope_type\":\"longrope\",\"attention_factor\":1.25,"
      "\"short_factor\":[1,1.25,1,1,1,1,1,1,1,1,1,3],\"long_factor\":[2,2,2,2,2,2,2,2,2,2,2,2.5],\"original_max_position_embeddings\":16}}",
      "{\"model_type\":\"qwen3\"," FB ",\"attention_bias\":true,\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":4}}",
  };
  for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
    CHECK(parse(cases[i], &c) == LC_OK, "case %d: %s", i, lc_errmsg());
    char d[300], nm[32];
    snprintf(nm, sizeof nm, "fam%d", i);
    sub(d, sizeof d, nm);
    lc_mkdir_p(d);
    CHECK(lc_hf_write_config(d, &c, LC_DT_BF16) == LC_OK, "write %d: %s", i, lc_errmsg());
    memset(&r, 0x55, sizeof r);
    CHECK(lc_hf_read_config(d, &r) == LC_OK, "read back %d: %s", i, lc_errmsg());
    snprintf(c.name, sizeof c.name, "%s", r.name);
    CHECK(same_config(&c, &r), "round trip %d: family %d/%d biases %d%d/%d%d norm %d/%d rope %d/%d window %d/%d", i, c.arch, r.arch,
          c.qkv_bias, c.o_bias, r.qkv_bias, r.o_bias, c.qk_norm, r.qk_norm, c.rope.type, r.rope.type, c.sliding_window,
          r.sliding_window);
  }
#undef FB
}

int main(void) {
  snprintf(root, sizeof root, "/tmp/lc_test_hf_%ld", (long)getpid());
  lc_arena_init(&arena, 0);
  lc_mkdir_p(root);
  test_config();
  test_mistral();
  test_families();
  test_save_load();
  test_half_weights();
  test_sharded();
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf %s", root);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
  return lc_test_finish("test_hf");
}
