// Whole-model checks on small shapes:
//  1. gradient of the loss vs central finite differences, per parameter tensor, along
//     random directions (tiny preset geometry, GQA, untied and tied head; each family's
//     variant: Qwen2 q/k/v biases, Qwen3 per-head q/k norms with head_dim != dim/heads and
//     attention_bias, RoPE scalings with an attention factor);
//  2. every checkpoint policy x MLP tile x loss tile gives the plain path's loss and grads
//     (Llama and Qwen3, whose q/k norm keeps activations of its own);
//  3. peak activation memory grows linearly in S (no S x S buffer);
//  4. bad token ids are rejected with a clear error.
#include <string.h>

#include "attn/attn.h"
#include "model/arch.h"
#include "model/model.h"
#include "testmodel.h"
#include "testutil.h"

static lc_arena arena;

// Loss (mean over counted tokens) at the model's current parameters, optionally with grads.
static double run(lc_model *m, lc_model_opts *o, const int *tok, const int *tgt, const int *pos,
                  int T, int grads) {
  lc_attn attn;
  lc_attn_local_init(&attn, m->cfg.n_heads, m->cfg.n_kv_heads, m->cfg.head_dim);
  int counted = 0;
  for (int t = 0; t < T; t++) counted += tgt[t] >= 0;
  double loss = 0;
  if (grads) lc_model_zero_grads(m);
  lc_status st = lc_model_fwd_bwd(m, o, &attn, NULL, tok, tgt, pos, T, 1.0f / counted, grads, &loss);
  CHECK(st == LC_OK, "fwd_bwd failed: %s", lc_errmsg());
  return loss / counted;
}


// The tiny preset as a member of a family: "llama", "tied", "qwen2" (q/k/v biases, tied),
// "qwen3" (q/k norms, head_dim 24 != 64/4, attention_bias: q/k/v/o biases), "yarn"
// (Llama with YaRN: attention factor 1.14, ramp over the pairs) and "longrope".
static void family_config(lc_config *cfg, const char *v) {
  lc_config_preset(cfg, "tiny");
  cfg->n_layers = 2;
  cfg->rope_theta = 500.0; // non-default theta: positions matter more at small T
  cfg->tie_embeddings = !strcmp(v, "tied") || !strcmp(v, "qwen2");
  if (!strcmp(v, "qwen2")) lc_arch_apply(cfg, lc_arch_get(LC_ARCH_QWEN2), 0);
  if (!strcmp(v, "qwen3")) {
    lc_arch_apply(cfg, lc_arch_get(LC_ARCH_QWEN3), 1);
    cfg->head_dim = 24;
  }
  if (!strcmp(v, "yarn")) {
    cfg->rope = (lc_rope_scaling){.type = LC_ROPE_YARN, .factor = 4, .orig_max = 8, .beta_fast = 32, .beta_slow = 1, .truncate = 1};
    cfg->max_pos = 32;
  }
  if (!strcmp(v, "longrope")) {
    cfg->rope = (lc_rope_scaling){.type = LC_ROPE_LONGROPE, .orig_max = 8, .n_factors = cfg->head_dim / 2};
    for (int i = 0; i < cfg->rope.n_factors; i++) cfg->rope.short_factor[i] = 1.0f + 0.1f * i, cfg->rope.long_factor[i] = 1.0f + 0.5f * i;
    cfg->max_pos = 64;
  }
  CHECK(lc_config_validate(cfg) == LC_OK, "%s config: %s", v, lc_errmsg());
}

static void test_fd(const char *variant) {
  lc_config cfg;
  family_config(&cfg, variant);
  const int tied = cfg.tie_embeddings;
  lc_model m;
  CHECK(lc_model_create(&m, &cfg, &arena) == LC_OK, "create: %s", lc_errmsg());
  lc_t_randomize(&m, 7 + tied + (uint64_t)strlen(variant));
  const int T = 19;
  int tok[19], tgt[19], pos[19];
  lc_rng r;
  lc_rng_seed(&r, 11);
  lc_t_make_batch(&r, tok, tgt, pos, T, cfg.vocab);
  lc_model_opts o = {LC_CKPT_NONE, 0, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0};
  run(&m, &o, tok, tgt, pos, T, 1);
  float *g = malloc(sizeof(float) * m.n_flat);
  memcpy(g, m.grads, sizeof(float) * m.n_flat);
  // Per tensor: directional derivative along a random unit direction u.
  // FD: (L(p + h u) - L(p - h u)) / 2h with h = 1e-2 (|u| = 1). Loss ~5.5 in fp32 has
  // rounding noise ~1e-6 -> FD noise ~1e-4 absolute; truncation O(h^2 * curvature) ~1e-4.
  // Tolerance: |fd - g.u| <= 3e-4 + 2e-2 |g.u|.
  int worst_i = -1;
  double worst = 0;
  for (int i = 0; i < m.n_tensors; i++) {
    size_t off = m.table[i].offset, n = m.table[i].numel;
    // u = g/|g| + r/|r| (r random), normalised: the derivative along u is large (~|g|/sqrt 2)
    // yet u also probes directions other than the computed gradient's.
    float *u = lc_t_randn(&r, (long)n, 1.0f);
    double nr = 0, ng = 0, nu = 0, gu = 0;
    for (size_t j = 0; j < n; j++) {
      nr += (double)u[j] * u[j];
      ng += (double)g[off + j] * g[off + j];
    }
    nr = sqrt(nr);
    ng = sqrt(ng) + 1e-30;
    for (size_t j = 0; j < n; j++) {
      u[j] = (float)(u[j] / nr + g[off + j] / ng);
      nu += (double)u[j] * u[j];
    }
    nu = sqrt(nu);
    for (size_t j = 0; j < n; j++) {
      u[j] = (float)(u[j] / nu);
      gu += (double)g[off + j] * u[j];
    }
    const float h = 1e-2f;
    float *p = m.params + off;
    float *save = malloc(sizeof(float) * n);
    memcpy(save, p, sizeof(float) * n);
    for (size_t j = 0; j < n; j++) p[j] = save[j] + h * u[j];
    double lp = run(&m, &o, tok, tgt, pos, T, 0);
    for (size_t j = 0; j < n; j++) p[j] = save[j] - h * u[j];
    double lm = run(&m, &o, tok, tgt, pos, T, 0);
    memcpy(p, save, sizeof(float) * n);
    double fd = (lp - lm) / (2.0 * h);
    double ratio = fabs(fd - gu) / (3e-4 + 2e-2 * fabs(gu));
    CHECK(ratio <= 1.0, "[%s] %s: analytic %.6g vs finite difference %.6g", variant, m.table[i].name, gu, fd);
    CHECK(fabs(gu) > 1e-3, "%s: gradient along u is %.3g, too small to test", m.table[i].name, gu);
    if (ratio > worst) { worst = ratio; worst_i = i; }
    free(save);
    free(u);
  }
  printf("model FD (%s, %d tensors): worst ratio %.3f at %s\n", variant, m.n_tensors, worst,
         worst_i >= 0 ? m.table[worst_i].name : "-");
  free(g);
  lc_model_destroy(&m);
}

static void test_policies(const char *variant) {
  lc_config cfg;
  family_config(&cfg, variant);
  cfg.n_layers = 3;
  lc_model m;
  CHECK(lc_model_create(&m, &cfg, &arena) == LC_OK, "create: %s", lc_errmsg());
  lc_t_randomize(&m, 3);
  const int T = 37;
  int tok[37], tgt[37], pos[37];
  lc_rng r;
  lc_rng_seed(&r, 5);
  lc_t_make_batch(&r, tok, tgt, pos, T, cfg.vocab);
  lc_model_opts ref_o = {LC_CKPT_NONE, 0, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0};
  double ref_loss = run(&m, &ref_o, tok, tgt, pos, T, 1);
  float *ref = malloc(sizeof(float) * m.n_flat);
  memcpy(ref, m.grads, sizeof(float) * m.n_flat);
  double gmax = 0;
  for (size_t j = 0; j < m.n_flat; j++) gmax = fmax(gmax, fabs(ref[j]));
  const lc_ckpt_policy pols[] = {LC_CKPT_NONE, LC_CKPT_FULL, LC_CKPT_SELECTIVE};
  const int mts[] = {0, 5, 16, 37}, lts[] = {0, 7, 64};
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 4; b++)
      for (int c = 0; c < 3; c++) {
        lc_model_opts o = {pols[a], mts[b], lts[c], 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0};
        double loss = run(&m, &o, tok, tgt, pos, T, 1);
        // Same arithmetic in a different order (tiles change GEMM shapes and summation
        // order): fp32 rounding, relative ~1e-6. Bound: 1e-5 relative on the loss, and
        // 1e-4 of the largest gradient entry elementwise.
        CHECK(fabs(loss - ref_loss) <= 1e-5 * fabs(ref_loss), "loss %s/mlp %d/loss %d: %.9g vs %.9g",
              lc_ckpt_name(pols[a]), mts[b], lts[c], loss, ref_loss);
        double worst = 0;
        for (size_t j = 0; j < m.n_flat; j++) worst = fmax(worst, fabs(m.grads[j] - ref[j]));
        CHECK(worst <= 1e-4 * gmax, "grads %s/mlp %d/loss %d: max diff %.3g (max |g| %.3g)",
              lc_ckpt_name(pols[a]), mts[b], lts[c], worst, gmax);
      }
  free(ref);
  lc_model_destroy(&m);
}

// Vocabulary slices (--vocab-slice): the embedding and the LM head a slice of rows at a
// time equal the whole matrices: the same loss, gradients (every tensor, the head's and the
// embedding's included) and argmax count, for slices that divide the vocabulary and ones
// that do not, one row per slice, tied and untied heads, with and without loss tiles,
// fp32 and bf16. The log-sum-exp is merged across slices in another order: fp32 rounding.
static void test_vocab_slices(const char *variant) {
  lc_config cfg;
  family_config(&cfg, variant);
  lc_model m;
  CHECK(lc_model_create(&m, &cfg, &arena) == LC_OK, "create: %s", lc_errmsg());
  lc_t_randomize(&m, 11);
  const int T = 37, V = cfg.vocab;
  int tok[37], tgt[37], pos[37];
  lc_rng r;
  lc_rng_seed(&r, 13);
  lc_t_make_batch(&r, tok, tgt, pos, T, V);
  float *ref = malloc(sizeof(float) * m.n_flat);
  const int slices[] = {1, 7, 64, 100, V - 1, V, 4 * V}, tiles[] = {0, 8};
  const lc_dtype precs[] = {LC_DT_F32, LC_DT_BF16};
  lc_attn attn;
  lc_attn_local_init(&attn, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim);
  for (int p = 0; p < 2; p++)
    for (int ti = 0; ti < 2; ti++) {
      lc_model_opts ro = {p ? LC_CKPT_FULL : LC_CKPT_SELECTIVE, 0, tiles[ti], 0, 0, 0, precs[p], NULL, 0, 0, 0};
      const double ref_loss = run(&m, &ro, tok, tgt, pos, T, 1);
      memcpy(ref, m.grads, sizeof(float) * m.n_flat);
      double gmax = 0, ls = 0;
      for (size_t j = 0; j < m.n_flat; j++) gmax = fmax(gmax, fabs(ref[j]));
      long wrong_ref = 0;
      CHECK(lc_model_eval(&m, &ro, &attn, NULL, tok, tgt, pos, T, &ls, &wrong_ref) == LC_OK, "eval: %s", lc_errmsg());
      for (int k = 0; k < 7; k++) {
        lc_model_opts o = ro;
        o.vocab_slice = slices[k];
        const double loss = run(&m, &o, tok, tgt, pos, T, 1);
        // fp32: the loss to 1e-6 relative (rounding of a different summation order), every
        // gradient entry to 1e-5 of the largest. bf16: dlogits are rounded to bf16 after a
        // softmax whose sum differs in its last bits, so a rare entry rounds the other way
        // (2^-8 relative of one dlogit): 2e-3 of the largest gradient entry; the loss 1e-5.
        CHECK(fabs(loss - ref_loss) <= (p ? 1e-5 : 1e-6) * fabs(ref_loss), "%s %s slice %d tile %d: loss %.9g vs %.9g",
              variant, p ? "bf16" : "fp32", slices[k], tiles[ti], loss, ref_loss);
        double worst = 0;
        size_t at = 0;
        for (size_t j = 0; j < m.n_flat; j++)
          if (fabs(m.grads[j] - ref[j]) > worst) worst = fabs(m.grads[j] - ref[j]), at = j;
        int ti_at = 0;
        for (int i = 0; i < m.n_tensors; i++)
          if (at >= m.table[i].offset) ti_at = i;
        CHECK(worst <= (p ? 2e-3 : 1e-5) * gmax, "%s %s slice %d tile %d: gradient differs by %.3g (max |g| %.3g) in %s",
              variant, p ? "bf16" : "fp32", slices[k], tiles[ti], worst, gmax, m.table[ti_at].name);
        long wrong = 0;
        ls = 0;
        CHECK(lc_model_eval(&m, &o, &attn, NULL, tok, tgt, pos, T, &ls, &wrong) == LC_OK, "eval: %s", lc_errmsg());
        CHECK(wrong == wrong_ref, "%s slice %d: %ld wrong argmax vs %ld", variant, slices[k], wrong, wrong_ref);
      }
    }
  printf("vocabulary slices (%s): loss, gradients and argmax equal the whole head\n", variant);
  free(ref);
  lc_model_destroy(&m);
}

// Activation peak (everything but params/grads) of one fwd+bwd at T tokens.
static double act_peak(lc_model *m, lc_model_opts *o, int T) {
  int *tok = malloc(sizeof(int) * T), *tgt = malloc(sizeof(int) * T), *pos = malloc(sizeof(int) * T);
  lc_rng r;
  lc_rng_seed(&r, 9);
  lc_t_make_batch(&r, tok, tgt, pos, T, m->cfg.vocab);
  lc_arena_reset_peaks(&arena);
  size_t base = arena.cur_total;
  run(m, o, tok, tgt, pos, T, 1);
  free(tok);
  free(tgt);
  free(pos);
  return (double)(arena.peak_total - base);
}

static void test_memory_linear(void) {
  lc_config cfg;
  lc_config_preset(&cfg, "tiny");
  lc_model m;
  CHECK(lc_model_create(&m, &cfg, &arena) == LC_OK, "create: %s", lc_errmsg());
  lc_model_init_random(&m, 1);
  const lc_ckpt_policy pols[] = {LC_CKPT_NONE, LC_CKPT_FULL, LC_CKPT_SELECTIVE};
  for (int a = 0; a < 3; a++) {
    lc_model_opts o = {pols[a], 0, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0};
    double p1 = act_peak(&m, &o, 1024), p2 = act_peak(&m, &o, 2048);
    // Linear memory: doubling S at most doubles the activation peak, plus constant-size
    // kernel workspaces (hence 2.1, the bound). A quadratic buffer would give ~4x.
    CHECK(p2 <= 2.1 * p1, "%s: activation peak %.0f at S=2048 vs %.0f at S=1024 (ratio %.3f)",
          lc_ckpt_name(pols[a]), p2, p1, p2 / p1);
    printf("activation peak %-9s S=1024 %.2f MiB, S=2048 %.2f MiB (x%.3f)\n", lc_ckpt_name(pols[a]),
           p1 / 1048576, p2 / 1048576, p2 / p1);
  }
  lc_model_destroy(&m);
}

static void test_bad_tokens(void) {
  lc_config cfg;
  lc_config_preset(&cfg, "tiny");
  lc_model m;
  lc_model_create(&m, &cfg, &arena);
  int tok[4] = {1, 2, 256, 3}, tgt[4] = {2, 3, 4, 5}, pos[4] = {0, 1, 2, 3};
  lc_attn attn;
  lc_attn_local_init(&attn, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim);
  double loss = 0;
  lc_model_opts o = {LC_CKPT_NONE, 0, 0, 0, 0, 0, LC_DT_F32, NULL, 0, 0, 0};
  lc_status st = lc_model_fwd_bwd(&m, &o, &attn, NULL, tok, tgt, pos, 4, 1.0f, 1, &loss);
  CHECK(st == LC_EINVAL && strstr(lc_errmsg(), "256") && strstr(lc_errmsg(), "position 2"),
        "out-of-vocab token: status %d, message '%s'", st, lc_errmsg());
  lc_model_destroy(&m);
  // A capped arena (the model's: the pass's buffers are its backend's) turns a too-long
  // sequence into a clean out-of-memory status: the model's states fit, the pass does not.
  lc_arena small;
  lc_arena_init(&small, 0);
  CHECK(lc_model_create(&m, &cfg, &small) == LC_OK, "model: %s", lc_errmsg());
  small.cap = small.cur_total + (1 << 20); // 1 MiB beyond the states
  int T = 4096;
  int *tk = calloc(T, sizeof(int)), *tg = calloc(T, sizeof(int)), *ps = calloc(T, sizeof(int));
  for (int t = 0; t < T; t++) ps[t] = t;
  const size_t states = small.cur_total;
  st = lc_model_fwd_bwd(&m, &o, &attn, NULL, tk, tg, ps, T, 1.0f, 1, &loss);
  CHECK(st == LC_ENOMEM && strstr(lc_errmsg(), "out of memory"), "capped arena: status %d '%s'", st, lc_errmsg());
  CHECK(small.cur_total == states, "capped arena leaked %zu bytes after the failure", small.cur_total - states);
  free(tk);
  free(tg);
  free(ps);
  lc_model_destroy(&m);
}

int main(void) {
  lc_arena_init(&arena, 0);
  const char *fams[] = {"llama", "tied", "qwen2", "qwen3", "yarn", "longrope"};
  for (int i = 0; i < 6; i++) test_fd(fams[i]);
  test_policies("llama");
  test_policies("qwen3");
  test_vocab_slices("llama");
  test_vocab_slices("tied");
  test_vocab_slices("qwen3");
  test_memory_linear();
  test_bad_tokens();
  CHECK(arena.cur_total == 0, "arena still holds %zu bytes at exit", arena.cur_total);
  return lc_test_finish("test_model");
}
