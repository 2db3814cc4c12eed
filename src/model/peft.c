#include "model/peft.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "io/fsutil.h"
#include "io/safetensors.h"
#include "model/hf.h"
#include "backend/scratch.h"

#define PEFT_PATH 1200

static const cJSON *get(const cJSON *j, const char *k) { return cJSON_GetObjectItemCaseSensitive(j, k); }

// A field that must be absent, null, false, empty or equal to `ok`: else the error.
static int falsy(const cJSON *v) {
  return !v || cJSON_IsNull(v) || cJSON_IsFalse(v) || (cJSON_IsObject(v) && !v->child) || (cJSON_IsArray(v) && !v->child) ||
         (cJSON_IsNumber(v) && v->valuedouble == 0);
}

lc_status lc_peft_read_config(const char *dir, lc_lora *l) {
  char p[PEFT_PATH], *txt = NULL;
  size_t len = 0;
  memset(l, 0, sizeof *l);
  LC_TRY(lc_path_join(p, sizeof p, dir, "adapter_config.json"));
  if (!lc_is_file(p)) return lc_fail(LC_EIO, "%s: no adapter_config.json; give a PEFT LoRA adapter directory", dir);
  LC_TRY(lc_read_file(p, 1 << 20, &txt, &len));
  cJSON *j = cJSON_ParseWithLength(txt, len);
  free(txt);
  lc_status st = LC_OK;
  const cJSON *ty = get(j, "peft_type"), *r = get(j, "r"), *a = get(j, "lora_alpha"), *tm = get(j, "target_modules");
  if (!j || !cJSON_IsObject(j)) st = lc_fail(LC_EFORMAT, "%s is not JSON", p);
  else if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "LORA"))
    st = lc_fail(LC_EINVAL, "%s: peft_type %s; longctx loads LoRA adapters (peft_type LORA)", p,
                 cJSON_IsString(ty) ? ty->valuestring : "missing");
  else if (!cJSON_IsNumber(r) || r->valuedouble < 1 || r->valuedouble > 1 << 20 || r->valuedouble != floor(r->valuedouble))
    st = lc_fail(LC_EFORMAT, "%s: r must be a positive integer (at most 1048576)", p);
  else if (!cJSON_IsNumber(a) || !(fabs(a->valuedouble) <= FLT_MAX))
    st = lc_fail(LC_EFORMAT, "%s: lora_alpha must be a number a float holds", p);
  else if (cJSON_IsString(get(j, "bias")) && strcmp(get(j, "bias")->valuestring, "none"))
    st = lc_fail(LC_EINVAL, "%s: bias \"%s\": longctx trains no biases with LoRA (bias \"none\")", p, get(j, "bias")->valuestring);
  else if (get(j, "lora_dropout") && !cJSON_IsNull(get(j, "lora_dropout")) &&
           !(cJSON_IsNumber(get(j, "lora_dropout")) && get(j, "lora_dropout")->valuedouble >= 0 &&
             get(j, "lora_dropout")->valuedouble < 1))
    st = lc_fail(LC_EFORMAT, "%s: lora_dropout must be a number in [0, 1)", p);
  else if (!falsy(get(j, "use_dora")))
    st = lc_fail(LC_EINVAL, "%s: use_dora: DoRA adapters are not supported; use plain LoRA", p);
  else if (!falsy(get(j, "fan_in_fan_out")))
    st = lc_fail(LC_EINVAL, "%s: fan_in_fan_out: longctx's projections are nn.Linear ([out, in]); set it false", p);
  else if (!falsy(get(j, "rank_pattern")) || !falsy(get(j, "alpha_pattern")) || !falsy(get(j, "layers_to_transform")))
    st = lc_fail(LC_EINVAL, "%s: rank_pattern / alpha_pattern / layers_to_transform: one rank and alpha on every layer "
                 "is supported", p);
  else if (!falsy(get(j, "modules_to_save")))
    st = lc_fail(LC_EINVAL, "%s: modules_to_save: longctx trains the adapters alone (the base stays frozen)", p);
  if (st == LC_OK) {
    l->rank = (int)r->valuedouble;
    l->alpha = (float)a->valuedouble;
    l->rslora = cJSON_IsTrue(get(j, "use_rslora"));
    l->dropout = cJSON_IsNumber(get(j, "lora_dropout")) ? (float)get(j, "lora_dropout")->valuedouble : 0.0f;
    if (cJSON_IsString(tm)) {
      st = !strcmp(tm->valuestring, "all-linear") ? (l->targets = LC_LORA_ALL, LC_OK)
                                                   : lc_lora_parse_targets(tm->valuestring, &l->targets);
    } else if (cJSON_IsArray(tm) && tm->child) {
      const cJSON *e;
      cJSON_ArrayForEach(e, tm) {
        unsigned bit = 0;
        if (!cJSON_IsString(e) || lc_lora_parse_targets(e->valuestring, &bit) != LC_OK) {
          st = lc_fail(LC_EINVAL, "%s: target module %s: longctx adapts q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
                       "down_proj", p, cJSON_IsString(e) ? e->valuestring : "(not a string)");
          break;
        }
        l->targets |= bit;
      }
    } else {
      st = lc_fail(LC_EFORMAT, "%s: target_modules must name the adapted projections", p);
    }
  }
  cJSON_Delete(j);
  return st;
}

lc_status lc_peft_write_config(const char *dir, const lc_config *cfg, const char *base) {
  const lc_lora *l = &cfg->lora;
  char p[PEFT_PATH];
  LC_TRY(lc_path_join(p, sizeof p, dir, "adapter_config.json"));
  cJSON *o = cJSON_CreateObject();
  cJSON_AddObjectToObject(o, "alpha_pattern"); // (PEFT reads both patterns as dicts: null fails)
  cJSON_AddStringToObject(o, "base_model_name_or_path", base ? base : "");
  cJSON_AddStringToObject(o, "bias", "none");
  cJSON_AddBoolToObject(o, "fan_in_fan_out", 0);
  cJSON_AddBoolToObject(o, "inference_mode", 1);
  cJSON_AddBoolToObject(o, "init_lora_weights", 1);
  cJSON_AddNullToObject(o, "layers_to_transform");
  if (l->alpha == floorf(l->alpha) && fabsf(l->alpha) < 1e9f) cJSON_AddNumberToObject(o, "lora_alpha", (double)(long)l->alpha);
  else cJSON_AddNumberToObject(o, "lora_alpha", l->alpha);
  cJSON_AddNumberToObject(o, "lora_dropout", (double)l->dropout);
  cJSON_AddNullToObject(o, "modules_to_save");
  cJSON_AddStringToObject(o, "peft_type", "LORA");
  cJSON_AddNumberToObject(o, "r", l->rank);
  cJSON_AddObjectToObject(o, "rank_pattern");
  cJSON *t = cJSON_AddArrayToObject(o, "target_modules");
  char names[128];
  lc_lora_target_names(l->targets, 1, names, sizeof names);
  for (char *q = strtok(names, ","); q; q = strtok(NULL, ",")) cJSON_AddItemToArray(t, cJSON_CreateString(q));
  cJSON_AddStringToObject(o, "task_type", "CAUSAL_LM");
  cJSON_AddBoolToObject(o, "use_dora", 0);
  cJSON_AddBoolToObject(o, "use_rslora", l->rslora);
  return lc_hf_write_json(p, o);
}

lc_status lc_peft_save_weights(const char *dir, lc_model *m) {
  if (!m->lora) return lc_fail(LC_EINVAL, "internal: saving adapters of a model without LoRA");
  char p[PEFT_PATH];
  lc_status st = lc_path_join(p, sizeof p, dir, "adapter_model.safetensors");
  static const char *const meta[] = {"format", "pt"};
  const lc_ps_state which[1] = {LC_PS_PARAMS};
  const char *const prefix[1] = {""};
  const lc_status ws = lc_hf_write_states(p, &m->ad, 1, which, prefix, LC_DT_F32, meta, 1); // collective: always
  return st == LC_OK ? ws : st;
}

lc_status lc_peft_load_weights(const char *dir, lc_model *m) {
  if (!m->lora) return lc_fail(LC_EINVAL, "internal: loading adapters into a model without LoRA");
  char p[PEFT_PATH];
  LC_TRY(lc_path_join(p, sizeof p, dir, "adapter_model.safetensors"));
  if (!lc_is_file(p))
    return lc_fail(LC_EIO, "%s: no adapter_model.safetensors (adapter_model.bin is not read: save with "
                   "safe_serialization=True)", dir);
  lc_st_file f;
  LC_TRY(lc_st_open(&f, p));
  lc_pstore *ps = &m->ad;
  const lc_param_layout *L = &ps->lay;
  lc_status st = LC_OK;
  // Every tensor of the file is one of the model's adapters (a name PEFT writes with an
  // adapter name inside, "...lora_A.default.weight", is read as the default adapter).
  int used = 0;
  for (int i = 0; i < f.n && st == LC_OK; i++) {
    int hit = 0;
    for (int t = 0; t < L->n_tensors && !hit; t++) hit = !strcmp(f.tensors[i].name, L->table[t].name);
    if (!hit)
      st = lc_fail(LC_EINVAL, "%s: tensor %s is not an adapter of this run (another base, other --lora-targets, or "
                   "not a LoRA tensor); adapt the same projections of the same base", p, f.tensors[i].name);
    used += hit;
  }
  float *stage = NULL;
  if (st == LC_OK) st = lc_hf_stage(ps, LC_PS_PARAMS, &stage);
  for (int t = 0; t < L->n_tensors && st == LC_OK; t++) {
    const lc_param_info *pi = &L->table[t];
    const lc_st_tensor *x = lc_st_find(&f, pi->name);
    if (!x) {
      st = lc_fail(LC_EINVAL, "%s lacks %s: the adapter was trained on other --lora-targets or another base", p, pi->name);
      break;
    }
    if (x->ndim != 2 || x->shape[0] != pi->shape[0] || x->shape[1] != pi->shape[1]) {
      st = lc_fail(LC_EINVAL, "%s: %s is [%lld, %lld], this run's is [%ld, %ld]: %s", p, pi->name, x->ndim > 0 ? x->shape[0] : 0,
                   x->ndim > 1 ? x->shape[1] : 0, pi->shape[0], pi->shape[1],
                   (strstr(pi->name, "lora_A") ? x->shape[0] : x->shape[1]) != pi->shape[strstr(pi->name, "lora_A") ? 0 : 1]
                       ? "another rank (give the file's r as --lora)"
                       : "another base model's shapes (give the base it was trained on)");
      break;
    }
    st = lc_hf_read_state(ps, LC_PS_PARAMS, t, &f, x, stage);
  }
  lc_free(ps->arena, stage);
  lc_st_close(&f);
  return st;
}

lc_status lc_peft_check(const char *dir, const lc_lora *file, const lc_lora *run) {
  char a[128], b[128];
  if (file->rank != run->rank)
    return lc_fail(LC_EINVAL, "%s has r %d, this run --lora %d: give --lora %d (or leave it out)", dir, file->rank, run->rank,
                   file->rank);
  if (file->alpha != run->alpha)
    return lc_fail(LC_EINVAL, "%s has lora_alpha %g, this run --lora-alpha %g: give --lora-alpha %g (or leave it out)", dir,
                   (double)file->alpha, (double)run->alpha, (double)file->alpha);
  if (file->targets != run->targets)
    return lc_fail(LC_EINVAL, "%s adapts %s, this run --lora-targets %s: give --lora-targets %s (or leave it out)", dir,
                   lc_lora_target_names(file->targets, 0, a, sizeof a), lc_lora_target_names(run->targets, 0, b, sizeof b), a);
  if (file->rslora != run->rslora)
    return lc_fail(LC_EINVAL, "%s has use_rslora %s, this run %s: %s --lora-rslora", dir, file->rslora ? "true" : "false",
                   run->rslora ? "has it" : "has not", file->rslora ? "give" : "leave out");
  return LC_OK;
}

lc_status lc_peft_merge(const char *dir, lc_model *m) {
  if (m->lora) return lc_fail(LC_EINVAL, "internal: merging into a model that trains adapters");
  lc_lora l;
  LC_TRY(lc_peft_read_config(dir, &l));
  char p[PEFT_PATH];
  LC_TRY(lc_path_join(p, sizeof p, dir, "adapter_model.safetensors"));
  if (!lc_is_file(p))
    return lc_fail(LC_EIO, "%s: no adapter_model.safetensors (adapter_model.bin is not read: save with "
                   "safe_serialization=True)", dir);
  // The adapter's tensors as the model would hold them: its table for these settings.
  lc_config acfg = lc_config_adapters(&m->cfg);
  acfg.lora = l;
  lc_param_info *at = NULL;
  int na = 0;
  size_t total = 0;
  LC_TRY(lc_param_table(&acfg, &at, &na, &total));
  lc_st_file f;
  lc_status st = lc_st_open(&f, p);
  if (st != LC_OK) {
    free(at);
    return st;
  }
  for (int i = 0; i < f.n && st == LC_OK; i++) {
    int hit = 0;
    for (int t = 0; t < na && !hit; t++) hit = !strcmp(f.tensors[i].name, at[t].name);
    if (!hit)
      st = lc_fail(LC_EINVAL, "%s: tensor %s is not a LoRA adapter of this model's projections (another base?)", p,
                   f.tensors[i].name);
  }
  const float s = lc_lora_scale(&l);
  for (int t = 0; t + 1 < na && st == LC_OK; t += 2) { // A then B of each adapted projection
    const lc_param_info *A = &at[t], *B = &at[t + 1];
    const lc_st_tensor *xa = lc_st_find(&f, A->name), *xb = lc_st_find(&f, B->name);
    if (!xa || !xb) {
      st = lc_fail(LC_EINVAL, "%s lacks %s: its adapter_config.json names targets the file does not hold", p,
                   xa ? B->name : A->name);
      break;
    }
    if (xa->numel != A->numel || xb->numel != B->numel || xa->shape[0] != A->shape[0] || xb->shape[0] != B->shape[0]) {
      st = lc_fail(LC_EINVAL, "%s: %s is [%lld, %lld], this model's would be [%ld, %ld]: an adapter of another base", p,
                   xa->numel != A->numel ? A->name : B->name, (xa->numel != A->numel ? xa : xb)->shape[0],
                   (xa->numel != A->numel ? xa : xb)->shape[1], (xa->numel != A->numel ? A : B)->shape[0],
                   (xa->numel != A->numel ? A : B)->shape[1]);
      break;
    }
    // The base weight it adapts: the same name without "base_model.model." and ".lora_A".
    char wname[160];
    const char *q = A->name + strlen("base_model.model.");
    const char *cut = strstr(q, ".lora_A.weight");
    snprintf(wname, sizeof wname, "%.*s.weight", (int)(cut - q), q);
    int wi = -1;
    for (int k = 0; k < m->n_tensors && wi < 0; k++)
      if (!strcmp(m->table[k].name, wname)) wi = k;
    float *W = wi >= 0 ? lc_pstore_tensor_ptr(&m->ps, LC_PS_PARAMS, wi) : NULL;
    if (!W) {
      st = lc_fail(LC_EINVAL, wi < 0 ? "%s: the model has no %s to merge into" : "%s: %s is not in host memory "
                   "(merge on the CPU: longctx merge)", p, wname);
      break;
    }
    float *a = malloc(sizeof(float) * A->numel), *b = malloc(sizeof(float) * B->numel);
    st = a && b ? LC_OK : lc_fail(LC_ENOMEM, "out of memory merging %s", wname);
    if (st == LC_OK) st = lc_st_read_f32(&f, xa, a, A->numel);
    if (st == LC_OK) st = lc_st_read_f32(&f, xb, b, B->numel);
    if (st == LC_OK) {
      for (size_t j = 0; j < B->numel; j++) b[j] *= s;
      // W [out, in] += (s B) [out, r] A [r, in]
      // (W is in host memory, so is the store's backend: the product runs there on W in place)
      lc_backend *be = m->ps.be;
      const lc_buf Wb = lc_buf_wrap_host(be, W, (size_t)B->shape[0] * (size_t)A->shape[1], LC_DT_F32),
                   bb = lc_buf_wrap_host(be, b, B->numel, LC_DT_F32), ab = lc_buf_wrap_host(be, a, A->numel, LC_DT_F32);
      st = lc_buf_ok(Wb) && lc_buf_ok(bb) && lc_buf_ok(ab)
               ? lc_be_matmul_bwd(Wb, (lc_buf){0}, bb, bb, ab, (int)B->shape[0], (int)A->shape[1], (int)A->shape[0], 1,
                                  0, (lc_buf){0})
               : LC_EINVAL; // (lc_buf_wrap_host said why)
    }
    free(a), free(b);
  }
  lc_st_close(&f);
  free(at);
  return st;
}
