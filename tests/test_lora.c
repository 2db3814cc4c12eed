#define _POSIX_C_SOURCE 200809L
// LoRA against PEFT + transformers (tools/make_lora_golden.py; tests/data/lora/<case>): a
// frozen golden base (Llama with GQA, Qwen2 with q/k/v biases, Qwen3 with q/k norms, tied,
// rsLoRA) with a random adapter (A and B both non-zero) read from PEFT's own files; the
// loss and the gradient of every lora_A/lora_B must be PEFT's (float64 reference), with
// and without checkpointing and tiles, and in bf16 to bf16 rounding. Then: an AdamW step
// changes the adapters and leaves every base weight bit for bit; an adapter saved by
// longctx reads back bit for bit; wrong adapters are one clear error each.
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attn/attn.h"
#include "io/fsutil.h"
#include "io/safetensors.h"
#include "model/hf.h"
#include "model/model.h"
#include "model/lora_op.h"
#include "model/peft.h"
#include "backend/cpu/ops/dropout.h"
#include "testutil.h"

static float *read_tensor(lc_st_file *f, const char *name, size_t n) {
  const lc_st_tensor *t = lc_st_find(f, name);
  CHECK(t != NULL, "golden file lacks %s", name);
  if (!t) return NULL;
  float *x = malloc(sizeof(float) * n);
  CHECK(lc_st_read_f32(f, t, x, n) == LC_OK, "read %s: %s", name, lc_errmsg());
  return x;
}

typedef struct {
  const char *name, *base;
} lora_case;

// lora_golden.json's bf16_autocast_worst_rel_l2 (tools/make_lora_golden.py).
static double peft_bf16_worst(const char *adir) {
  char path[1200], *text = NULL;
  size_t n = 0;
  snprintf(path, sizeof path, "%s/lora_golden.json", adir);
  CHECK(lc_read_file(path, 1 << 20, &text, &n) == LC_OK, "%s: %s", path, lc_errmsg());
  const char *k = text ? strstr(text, "\"bf16_autocast_worst_rel_l2\":") : NULL;
  const double w = k ? atof(k + strlen("\"bf16_autocast_worst_rel_l2\":")) : 0;
  free(text);
  CHECK(w > 0, "%s: no bf16_autocast_worst_rel_l2", path);
  return w;
}

// A model of the case's base with its adapter loaded (cfg->lora from adapter_config.json).
static int open_case(const lora_case *c, lc_arena *ar, lc_model *m, lc_config *cfg, char *adir, size_t cap) {
  char bdir[1024];
  snprintf(bdir, sizeof bdir, "%s/%s", LC_SOURCE_DIR, c->base);
  snprintf(adir, cap, "%s/tests/data/lora/%s", LC_SOURCE_DIR, c->name);
  CHECK(lc_hf_read_config(bdir, cfg) == LC_OK, "%s config: %s", c->name, lc_errmsg());
  CHECK(lc_peft_read_config(adir, &cfg->lora) == LC_OK, "%s adapter config: %s", c->name, lc_errmsg());
  CHECK(cfg->lora.rank == 4 && cfg->lora.alpha == 8.0f && cfg->lora.targets == LC_LORA_ALL, "%s: r %d alpha %g targets %x",
        c->name, cfg->lora.rank, (double)cfg->lora.alpha, cfg->lora.targets);
  if (lc_model_create(m, cfg, ar) != LC_OK) {
    CHECK(0, "create: %s", lc_errmsg());
    return 0;
  }
  CHECK(m->lora && m->ad.lay.n_tensors == 2 * LC_LORA_N * cfg->n_layers, "adapters: %d tensors", m->ad.lay.n_tensors);
  CHECK(!lc_buf_ok(m->ps.grads_b), "the frozen base has no gradient buffer");
  lc_status st = lc_hf_load_weights(bdir, m);
  CHECK(st == LC_OK, "%s base: %s", c->name, lc_errmsg());
  st = lc_peft_load_weights(adir, m);
  CHECK(st == LC_OK, "%s adapter: %s", c->name, lc_errmsg());
  return st == LC_OK;
}

static void golden_case(const lora_case *c) {
  lc_arena ar;
  lc_arena_init(&ar, 0);
  lc_config cfg;
  lc_model m;
  char adir[1024], path[1200], gpath[1200];
  if (!open_case(c, &ar, &m, &cfg, adir, sizeof adir)) return;
  snprintf(path, sizeof path, "%s/lora_golden.safetensors", adir);
  snprintf(gpath, sizeof gpath, "%s/%s/golden.safetensors", LC_SOURCE_DIR, c->base);
  lc_st_file g, b;
  CHECK(lc_st_open(&g, path) == LC_OK && lc_st_open(&b, gpath) == LC_OK, "%s: %s", path, lc_errmsg());
  const int S = 37;
  float *ids = read_tensor(&b, "input_ids", S), *labels = read_tensor(&b, "labels", S), *loss = read_tensor(&g, "loss", 1);
  int tok[37], tgt[37], pos[37], counted = 0;
  for (int t = 0; t < S; t++) {
    tok[t] = (int)ids[t];
    tgt[t] = t + 1 < S ? (int)labels[t + 1] : -100;
    counted += tgt[t] >= 0;
    pos[t] = t;
  }
  lc_attn attn;
  lc_attn_local_init(&attn, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim);
  lc_pstore *ad = &m.ad;
  const lc_param_layout *L = &ad->lay;
  // fp32 reference of the bf16 check below
  float *g32 = malloc(sizeof(float) * L->total);
  const lc_model_opts opts[3] = {{LC_CKPT_NONE, 0, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0},
                                 {LC_CKPT_SELECTIVE, 8, 5, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0},
                                 {LC_CKPT_FULL, 0, 0, 0, 0, 0, LC_DT_BF16, NULL, 0, 0, 0}};
  for (int k = 0; k < 3; k++) {
    lc_model_zero_grads(&m);
    double ls = 0;
    lc_status st = lc_model_fwd_bwd(&m, &opts[k], &attn, NULL, tok, tgt, pos, S, 1.0f / counted, 1, &ls);
    CHECK(st == LC_OK, "fwd_bwd: %s", lc_errmsg());
    const double mine = ls / counted;
    if (k < 2) {
      // PEFT's loss in float64; ours in fp32 (as test_golden bounds the base): 1e-5 relative.
      CHECK(fabs(mine - loss[0]) <= 1e-5 * fabs(loss[0]), "%s loss %.9f vs PEFT %.9f", c->name, mine, loss[0]);
      // Gradients: fp32 vs float64 rounding is ~1e-6 of a tensor's largest entry; bound 5e-5
      // (the scale applied twice, a missing adapter or a transposed B is O(1)).
      double worst = 0;
      for (int i = 0; i < L->n_tensors; i++) {
        const lc_param_info *p = &L->table[i];
        char gname[200];
        snprintf(gname, sizeof gname, "grad.%s", p->name);
        float *ref = read_tensor(&g, gname, p->numel);
        if (!ref) continue;
        double e = 0, mx = 0;
        for (size_t j = 0; j < p->numel; j++) {
          e = fmax(e, fabs(ad->grads[p->offset + j] - ref[j]));
          mx = fmax(mx, fabs(ref[j]));
        }
        CHECK(mx > 0 && e <= 5e-5 * mx, "%s %s: max diff %.3g of max %.3g", c->name, p->name, e, mx);
        worst = fmax(worst, e / mx);
        free(ref);
      }
      if (k == 0) memcpy(g32, ad->grads, sizeof(float) * L->total);
      printf("%s (%s): loss %.9f (PEFT %.9f), worst adapter gradient error %.2e of max\n", c->name,
             k ? "selective+tiles" : "plain", mine, loss[0], worst);
    } else {
      // bf16 (full checkpointing): GEMM operands and activations rounded to bf16 (8 bits of
      // mantissa), against this fp32 gradient. PEFT's own bf16-autocast distance to float64
      // (w in lora_golden.json: 0.31, 0.47, 0.07 for the worst tensor; these random adapters
      // are large) sets the scale, as test_golden does for the base: loss 5e-3 relative, a
      // tensor <= max(0.1, 2.5 w), all adapters together <= max(0.08, 1.6 w) relative L2.
      CHECK(fabs(mine - loss[0]) <= 5e-3 * fabs(loss[0]), "%s bf16 loss %.6f vs PEFT %.6f", c->name, mine, loss[0]);
      const double w = peft_bf16_worst(adir);
      double worst = 0, te2 = 0, tr2 = 0;
      for (int i = 0; i < L->n_tensors; i++) {
        const lc_param_info *p = &L->table[i];
        double e2 = 0, r2 = 0;
        for (size_t j = 0; j < p->numel; j++) {
          const double d = ad->grads[p->offset + j] - g32[p->offset + j];
          e2 += d * d;
          r2 += (double)g32[p->offset + j] * g32[p->offset + j];
        }
        const double rel = sqrt(e2 / (r2 > 0 ? r2 : 1));
        CHECK(rel <= fmax(0.1, 2.5 * w), "%s bf16 %s: relative L2 %.3g (PEFT's own worst %.3g)", c->name, p->name, rel, w);
        worst = fmax(worst, rel);
        te2 += e2, tr2 += r2;
      }
      const double all = sqrt(te2 / tr2);
      CHECK(all <= fmax(0.08, 1.6 * w), "%s bf16: all adapters' relative L2 %.3g (PEFT's worst tensor %.3g)", c->name, all, w);
      printf("%s (bf16, full): loss %.6f, adapter gradients rel L2: worst tensor %.3g, all %.3g (PEFT bf16 autocast's "
             "worst tensor %.3g)\n", c->name, mine, worst, all, w);
    }
  }
  // One AdamW step: the adapters move, the base (every weight, embedding and head too)
  // stays bit for bit.
  float *base0 = malloc(sizeof(float) * m.ps.n_params), *ad0 = malloc(sizeof(float) * ad->n_params);
  memcpy(base0, m.ps.params, sizeof(float) * m.ps.n_params);
  memcpy(ad0, ad->params, sizeof(float) * ad->n_params);
  CHECK(lc_pstore_add_optimizer(ad) == LC_OK, "optimizer");
  lc_model_zero_grads(&m);
  double ls = 0;
  CHECK(lc_model_fwd_bwd(&m, &opts[0], &attn, NULL, tok, tgt, pos, S, 1.0f / counted, 1, &ls) == LC_OK, "step pass");
  lc_adamw_hp hp = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f};
  long astep = 0;
  double norm = 0;
  int applied = 0;
  CHECK(lc_pstore_update(ad, &hp, 1.0f, 1, &astep, &norm, &applied) == LC_OK && applied, "update: %s", lc_errmsg());
  CHECK(!memcmp(base0, m.ps.params, sizeof(float) * m.ps.n_params), "%s: a frozen base weight changed", c->name);
  size_t moved = 0;
  for (size_t j = 0; j < ad->n_params; j++) moved += ad->params[j] != ad0[j];
  CHECK(moved > ad->n_params / 2, "%s: only %zu of %zu adapter values moved", c->name, moved, ad->n_params);
  // Saved and read back (PEFT's files): bit for bit.
  char tmp[] = "/tmp/lc_lora_XXXXXX";
  CHECK(mkdtemp(tmp) != NULL, "mkdtemp");
  CHECK(lc_peft_save_weights(tmp, &m) == LC_OK && lc_peft_write_config(tmp, &cfg, c->base) == LC_OK, "save: %s", lc_errmsg());
  lc_model m2;
  lc_config cfg2 = cfg;
  CHECK(lc_peft_read_config(tmp, &cfg2.lora) == LC_OK && !memcmp(&cfg2.lora, &cfg.lora, sizeof cfg.lora),
        "adapter_config.json round trip");
  CHECK(lc_model_create(&m2, &cfg2, &ar) == LC_OK && lc_peft_load_weights(tmp, &m2) == LC_OK, "reload: %s", lc_errmsg());
  CHECK(!memcmp(m2.ad.params, ad->params, sizeof(float) * ad->n_params), "%s: reloaded adapter differs", c->name);
  lc_model_destroy(&m2);
  char f1[1300], f2[1300];
  snprintf(f1, sizeof f1, "%s/adapter_model.safetensors", tmp);
  snprintf(f2, sizeof f2, "%s/adapter_config.json", tmp);
  unlink(f1), unlink(f2), rmdir(tmp);
  free(base0), free(ad0), free(g32), free(ids), free(labels), free(loss);
  lc_st_close(&g), lc_st_close(&b);
  lc_model_destroy(&m);
  CHECK(ar.cur_total == 0, "%s: arena not empty after destroy (%zu bytes)", c->name, ar.cur_total);
}

// Dropout (p 0.25) against PEFT with its nn.Dropout replaced by the same mask
// (tools/make_lora_golden.py --dropout: core/dropout_hash.h's hash re-implemented in numpy, pass key
// 0x0123456789ABCDEF, tokens 0..S-1): the loss and every adapter gradient in float64, which
// checks PEFT's placement (before lora_A) and scaling (1/(1-p)). Bounds as golden_case's fp32
// ones (1e-5 loss, 5e-5 of a tensor's largest gradient entry): dropping after A, scaling by
// p or not at all, or a mask differing between forward and backward are O(1). Plain and with
// selective checkpointing, MLP tiles and dropout chunks of 5 rows (a call takes several, the
// last one short). An evaluation pass drops nothing: the golden loss without dropout.
static void dropout_case(const lora_case *c) {
  lc_arena ar;
  lc_arena_init(&ar, 0);
  lc_config cfg;
  lc_model m;
  char adir[1024], path[1200], gpath[1200], ppath[1200];
  if (!open_case(c, &ar, &m, &cfg, adir, sizeof adir)) return;
  snprintf(path, sizeof path, "%s/lora_golden_dropout.safetensors", adir);
  snprintf(ppath, sizeof ppath, "%s/lora_golden.safetensors", adir);
  snprintf(gpath, sizeof gpath, "%s/%s/golden.safetensors", LC_SOURCE_DIR, c->base);
  lc_st_file g, b, plain;
  CHECK(lc_st_open(&g, path) == LC_OK && lc_st_open(&b, gpath) == LC_OK && lc_st_open(&plain, ppath) == LC_OK, "%s: %s",
        path, lc_errmsg());
  const int S = 37;
  float *ids = read_tensor(&b, "input_ids", S), *labels = read_tensor(&b, "labels", S), *loss = read_tensor(&g, "loss", 1),
        *loss0 = read_tensor(&plain, "loss", 1);
  int tok[37], tgt[37], pos[37], counted = 0;
  for (int t = 0; t < S; t++) {
    tok[t] = (int)ids[t];
    tgt[t] = t + 1 < S ? (int)labels[t + 1] : -100;
    counted += tgt[t] >= 0;
    pos[t] = t;
  }
  CHECK(fabs(loss[0] - loss0[0]) > 1e-3 * fabs(loss0[0]), "%s: dropout's golden loss %.6f is the plain one", c->name, loss[0]);
  m.cfg.lora.dropout = 0.25f;
  const lc_pass_in pin = {.drop_key = 0x0123456789ABCDEFull, .drop_rows = NULL}; // the rows are the sequence
  lc_attn attn;
  lc_attn_local_init(&attn, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim);
  const lc_param_layout *L = &m.ad.lay;
  const lc_model_opts opts[2] = {{LC_CKPT_NONE, 0, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0},
                                 {LC_CKPT_SELECTIVE, 8, 5, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0}};
  for (int k = 0; k < 2; k++) {
    lc_lora_test_set_drop_rows(k ? 5 : 0);
    lc_model_zero_grads(&m);
    double ls = 0;
    CHECK(lc_model_fwd_bwd(&m, &opts[k], &attn, &pin, tok, tgt, pos, S, 1.0f / counted, 1, &ls) == LC_OK, "fwd_bwd: %s",
          lc_errmsg());
    const double mine = ls / counted;
    CHECK(fabs(mine - loss[0]) <= 1e-5 * fabs(loss[0]), "%s dropout loss %.9f vs PEFT %.9f", c->name, mine, loss[0]);
    double worst = 0;
    for (int i = 0; i < L->n_tensors; i++) {
      const lc_param_info *p = &L->table[i];
      char gname[200];
      snprintf(gname, sizeof gname, "grad.%s", p->name);
      float *ref = read_tensor(&g, gname, p->numel);
      if (!ref) continue;
      double e = 0, mx = 0;
      for (size_t j = 0; j < p->numel; j++) {
        e = fmax(e, fabs(m.ad.grads[p->offset + j] - ref[j]));
        mx = fmax(mx, fabs(ref[j]));
      }
      CHECK(mx > 0 && e <= 5e-5 * mx, "%s dropout %s: max diff %.3g of max %.3g", c->name, p->name, e, mx);
      worst = fmax(worst, e / mx);
      free(ref);
    }
    printf("%s dropout 0.25 (%s): loss %.9f (PEFT with the same mask %.9f), worst adapter gradient error %.2e of max\n",
           c->name, k ? "selective+tiles, 5-row dropout chunks" : "plain", mine, loss[0], worst);
  }
  lc_lora_test_set_drop_rows(0);
  double le = 0;
  long wrong = 0;
  CHECK(lc_model_eval(&m, &opts[0], &attn, &pin, tok, tgt, pos, S, &le, &wrong) == LC_OK, "eval: %s", lc_errmsg());
  CHECK(fabs(le / counted - loss0[0]) <= 1e-5 * fabs(loss0[0]), "%s: evaluation with dropout set: loss %.9f, PEFT without "
        "dropout %.9f", c->name, le / counted, loss0[0]);
  free(ids), free(labels), free(loss), free(loss0);
  lc_st_close(&g), lc_st_close(&b), lc_st_close(&plain);
  lc_model_destroy(&m);
}

// The mask itself (core/dropout_hash.h): the kept fraction is 1 - p (within 6 binomial standard
// deviations over 2^20 elements), a row's mask depends on its token's index alone (rows
// given in another order get their tokens' masks), other keys (layer, projection, step)
// give independent masks (agreement p^2 + (1-p)^2 within 6 sigma), accumulate adds the kept
// values only, bf16 values are copied or zeroed bit for bit.
static void mask_stats(void) {
  const int R = 1024, C = 1024;
  const size_t n = (size_t)R * C;
  float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n), *z = malloc(sizeof(float) * n);
  int *gi = malloc(sizeof(int) * R), *perm = malloc(sizeof(int) * R);
  for (size_t i = 0; i < n; i++) x[i] = 1.0f + (float)(i % 7);
  for (int r = 0; r < R; r++) gi[r] = r, perm[r] = (r * 389 + 17) % R; // (389 odd: a permutation of 1024)
  const float ps[2] = {0.1f, 0.5f};
  for (int k = 0; k < 2; k++) {
    const uint32_t thr = lc_dropout_thr(ps[k]);
    const uint64_t key = lc_dropout_key(lc_dropout_pass_key(5, 1, 0), 1, LC_LORA_V);
    lc_dropout_mask(y, x, LC_DT_F32, R, C, gi, key, thr, 0);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
      kept += y[i] != 0;
      if (y[i] != 0 && y[i] != x[i]) {
        CHECK(0, "a kept value changed");
        break;
      }
    }
    const double q = 1.0 - ps[k], sd = sqrt(n * q * (1 - q));
    CHECK(fabs((double)kept - n * q) <= 6 * sd, "p %g: kept %zu of %zu (expected %.0f +- %.0f)", (double)ps[k], kept, n,
          n * q, sd);
    lc_dropout_mask(z, x, LC_DT_F32, R, C, perm, key, thr, 0);
    int same = 1;
    for (int r = 0; r < R && same; r++)
      for (int j = 0; j < C && same; j++) same = (z[(size_t)r * C + j] != 0) == (y[(size_t)perm[r] * C + j] != 0);
    CHECK(same, "p %g: a row's mask depends on more than its token's index", (double)ps[k]);
    const uint64_t others[3] = {lc_dropout_key(lc_dropout_pass_key(5, 1, 0), 0, LC_LORA_V),
                                lc_dropout_key(lc_dropout_pass_key(5, 1, 0), 1, LC_LORA_K),
                                lc_dropout_key(lc_dropout_pass_key(5, 2, 0), 1, LC_LORA_V)};
    for (int o = 0; o < 3; o++) {
      lc_dropout_mask(z, x, LC_DT_F32, R, C, gi, others[o], thr, 0);
      size_t agree = 0;
      for (size_t i = 0; i < n; i++) agree += (y[i] != 0) == (z[i] != 0);
      const double pa = q * q + (1 - q) * (1 - q), sa = sqrt(n * pa * (1 - pa));
      CHECK(fabs((double)agree - n * pa) <= 6 * sa, "p %g key %d: masks agree on %zu (independent: %.0f +- %.0f)",
            (double)ps[k], o, agree, n * pa, sa);
    }
    for (size_t i = 0; i < n; i++) z[i] = 0.5f;
    lc_dropout_mask(z, x, LC_DT_F32, R, C, gi, key, thr, 1);
    int acc_ok = 1;
    for (size_t i = 0; i < n && acc_ok; i++) acc_ok = z[i] == (y[i] != 0 ? 0.5f + x[i] : 0.5f);
    CHECK(acc_ok, "p %g: accumulate adds something other than the kept values", (double)ps[k]);
    uint16_t *h = malloc(2 * n), *h2 = malloc(2 * n);
    for (size_t i = 0; i < n; i++) h[i] = (uint16_t)(0x3f80 + i % 100);
    lc_dropout_mask(h2, h, LC_DT_BF16, R, C, gi, key, thr, 0);
    int b_ok = 1;
    for (size_t i = 0; i < n && b_ok; i++) b_ok = h2[i] == (y[i] != 0 ? h[i] : 0);
    CHECK(b_ok, "p %g: the bf16 mask differs from the fp32 one", (double)ps[k]);
    free(h), free(h2);
  }
  free(x), free(y), free(z), free(gi), free(perm);
}

// Wrong adapters: one line naming the mismatch each.
static void bad_adapters(void) {
  const lora_case c = {"llama", "tests/data/golden_untied"};
  lc_arena ar;
  lc_arena_init(&ar, 0);
  char bdir[1024], adir[1024];
  snprintf(bdir, sizeof bdir, "%s/%s", LC_SOURCE_DIR, c.base);
  snprintf(adir, sizeof adir, "%s/tests/data/lora/%s", LC_SOURCE_DIR, c.name);
  lc_config cfg;
  CHECK(lc_hf_read_config(bdir, &cfg) == LC_OK, "config");
  struct {
    int rank;
    unsigned targets;
    const char *base, *want;
  } cases[] = {{8, LC_LORA_ALL, NULL, "another rank"},
               {4, LC_LORA_ALL & ~(1u << LC_LORA_DOWN), NULL, "not an adapter of this run"},
               {4, LC_LORA_ALL, "tests/data/golden_qwen3", "another base"}};
  for (int k = 0; k < 3; k++) {
    lc_config cc = cfg;
    if (cases[k].base) {
      char d[1024];
      snprintf(d, sizeof d, "%s/%s", LC_SOURCE_DIR, cases[k].base);
      CHECK(lc_hf_read_config(d, &cc) == LC_OK, "config");
    }
    cc.lora = (lc_lora){.rank = cases[k].rank, .alpha = 8, .targets = cases[k].targets};
    lc_model m;
    CHECK(lc_model_create(&m, &cc, &ar) == LC_OK, "create");
    const lc_status st = lc_peft_load_weights(adir, &m);
    CHECK(st != LC_OK && strstr(lc_errmsg(), cases[k].want), "case %d: %s", k, lc_errmsg());
    lc_model_destroy(&m);
  }
  lc_lora file, run;
  CHECK(lc_peft_read_config(adir, &file) == LC_OK, "read");
  run = file;
  run.alpha = 16;
  CHECK(lc_peft_check(adir, &file, &run) != LC_OK && strstr(lc_errmsg(), "lora_alpha 8"), "alpha: %s", lc_errmsg());
  unsigned t = 0;
  CHECK(lc_lora_parse_targets("q,v,lm_head", &t) != LC_OK && strstr(lc_errmsg(), "'lm_head'"), "targets: %s", lc_errmsg());
  CHECK(lc_lora_parse_targets("q_proj,down", &t) == LC_OK && t == ((1u << LC_LORA_Q) | (1u << LC_LORA_DOWN)), "targets");
}

int main(void) {
  const lora_case cases[] = {{"llama", "tests/data/golden_untied"},
                             {"qwen2", "tests/data/golden_qwen2"},
                             {"qwen3", "tests/data/golden_qwen3"}};
  for (int i = 0; i < 3; i++) golden_case(&cases[i]);
  for (int i = 0; i < 3; i++) dropout_case(&cases[i]);
  mask_stats();
  bad_adapters();
  return lc_test_finish("test_lora");
}
