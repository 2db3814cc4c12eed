// Hugging Face weights (hf.h): model.safetensors (or the shards of its index.json) loaded
// into a model's store, and a store's states written as safetensors, collectively.
#define _POSIX_C_SOURCE 200809L
#include "model/hf.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "io/fsutil.h"
#include "io/safetensors.h"
#include "model/arch.h"

#define HF_PATH 4096

// ---------------------------------------------------------------- weights

typedef struct {
  const char *name;
  int shard;
} wm_entry;

static int cmp_wm(const void *a, const void *b) {
  return strcmp(((const wm_entry *)a)->name, ((const wm_entry *)b)->name);
}
static int find_wm(const void *key, const void *e) {
  return strcmp((const char *)key, ((const wm_entry *)e)->name);
}

static int cmp_tab(const void *a, const void *b) {
  return strcmp((*(const lc_param_info *const *)a)->name, (*(const lc_param_info *const *)b)->name);
}
static int find_tab(const void *key, const void *e) {
  return strcmp((const char *)key, (*(const lc_param_info *const *)e)->name);
}

static void shape_str(char *b, size_t cap, int nd, const long long *s) {
  int m = snprintf(b, cap, "[");
  for (int i = 0; i < nd && m < (int)cap - 24; i++)
    m += snprintf(b + m, cap - (size_t)m, "%s%lld", i ? ", " : "", s[i]);
  snprintf(b + m, cap - (size_t)m, "]");
}

static int ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

typedef struct {
  int n_files;
  char **files;      // full paths
  lc_st_file *st;    // opened shards
  int n_open;
  cJSON *index;      // parsed index.json (names of wm point into it)
  wm_entry *wm;
  int n_wm;
  const lc_param_info **order; // table entries sorted by name
  int *shard_of;     // per table entry: shard holding it (-1: not yet found)
  const lc_st_tensor **tens;
} loader;

static void loader_free(loader *L) {
  for (int i = 0; i < L->n_open; i++) lc_st_close(&L->st[i]);
  for (int i = 0; i < L->n_files; i++) free(L->files[i]);
  free(L->files);
  free(L->st);
  cJSON_Delete(L->index);
  free(L->wm);
  free(L->order);
  free(L->shard_of);
  free(L->tens);
}

static lc_status add_file(loader *L, const char *path) {
  char **f = realloc(L->files, sizeof *f * (size_t)(L->n_files + 1));
  if (!f) return lc_fail(LC_ENOMEM, "out of memory listing shards");
  L->files = f;
  L->files[L->n_files] = strdup(path);
  if (!L->files[L->n_files]) return lc_fail(LC_ENOMEM, "out of memory listing shards");
  L->n_files++;
  return LC_OK;
}

static lc_status read_index(loader *L, const char *dir, const char *ipath) {
  char *json;
  size_t len;
  LC_TRY(lc_read_file(ipath, (size_t)64 << 20, &json, &len));
  L->index = cJSON_ParseWithLength(json, len);
  free(json);
  if (!L->index || !cJSON_IsObject(L->index))
    return lc_fail(LC_EFORMAT, "%s: not a JSON object; fix or re-download the index", ipath);
  const cJSON *wm = cJSON_GetObjectItemCaseSensitive(L->index, "weight_map");
  if (!cJSON_IsObject(wm))
    return lc_fail(LC_EFORMAT, "%s: missing the \"weight_map\" object (tensor name -> shard file)",
                   ipath);
  int n = cJSON_GetArraySize(wm);
  L->wm = calloc((size_t)n + 1, sizeof *L->wm);
  if (!L->wm) return lc_fail(LC_ENOMEM, "out of memory reading %s", ipath);
  const cJSON *it;
  cJSON_ArrayForEach(it, wm) {
    if (!cJSON_IsString(it) || !it->valuestring[0])
      return lc_fail(LC_EFORMAT, "%s: weight_map entry '%.80s' is not a shard file name", ipath,
                     it->string);
    const char *s = it->valuestring;
    if (s[0] == '/' || !strcmp(s, "..") || !strncmp(s, "../", 3) || strstr(s, "/../") ||
        ends_with(s, "/.."))
      return lc_fail(LC_EFORMAT, "%s: shard file '%.80s' is outside the model directory; shard "
                     "names must be relative names inside it", ipath, s);
    char full[HF_PATH];
    LC_TRY(lc_path_join(full, sizeof full, dir, s));
    int k = 0;
    while (k < L->n_files && strcmp(L->files[k], full) != 0) k++;
    if (k == L->n_files) LC_TRY(add_file(L, full));
    L->wm[L->n_wm].name = it->string;
    L->wm[L->n_wm].shard = k;
    L->n_wm++;
  }
  if (L->n_wm == 0) return lc_fail(LC_EFORMAT, "%s: weight_map is empty", ipath);
  qsort(L->wm, (size_t)L->n_wm, sizeof *L->wm, cmp_wm);
  for (int i = 1; i < L->n_wm; i++)
    if (!strcmp(L->wm[i - 1].name, L->wm[i].name))
      return lc_fail(LC_EFORMAT, "%s: weight_map lists '%.80s' twice", ipath, L->wm[i].name);
  return LC_OK;
}

lc_status lc_hf_load_weights(const char *dir, lc_model *m) {
  char single[HF_PATH], ipath[HF_PATH];
  LC_TRY(lc_path_join(single, sizeof single, dir, "model.safetensors"));
  LC_TRY(lc_path_join(ipath, sizeof ipath, dir, "model.safetensors.index.json"));
  loader L;
  memset(&L, 0, sizeof L);
  lc_status st = LC_OK;
  const char *what; // names the weights in messages
  if (lc_is_file(single)) {
    st = add_file(&L, single);
    what = single;
  } else if (lc_is_file(ipath)) {
    st = read_index(&L, dir, ipath);
    what = ipath;
  } else {
    char bin[HF_PATH];
    int has_bin = lc_path_join(bin, sizeof bin, dir, "pytorch_model.bin") == LC_OK && lc_is_file(bin);
    if (!has_bin && lc_path_join(bin, sizeof bin, dir, "pytorch_model.bin.index.json") == LC_OK)
      has_bin = lc_is_file(bin);
    if (has_bin)
      return lc_fail(LC_EIO, "%s holds PyTorch .bin weights; longctx reads safetensors: convert "
                     "them (in Python: model.save_pretrained(dir, safe_serialization=True))", dir);
    return lc_fail(LC_EIO, "%s has neither model.safetensors nor model.safetensors.index.json: give "
                   "a Hugging Face model directory with safetensors weights", dir);
  }
  int nt = m->n_tensors;
  if (st == LC_OK) {
    L.st = calloc((size_t)L.n_files, sizeof *L.st);
    L.order = malloc(sizeof *L.order * (size_t)nt);
    L.shard_of = malloc(sizeof *L.shard_of * (size_t)nt);
    L.tens = calloc((size_t)nt, sizeof *L.tens);
    if (!L.st || !L.order || !L.shard_of || !L.tens)
      st = lc_fail(LC_ENOMEM, "out of memory loading %s", what);
  }
  if (st != LC_OK) {
    loader_free(&L);
    return st;
  }
  for (int i = 0; i < nt; i++) {
    L.order[i] = &m->table[i];
    L.shard_of[i] = -1;
  }
  qsort(L.order, (size_t)nt, sizeof *L.order, cmp_tab);
  const lc_config *c = &m->cfg;
  for (int s = 0; s < L.n_files && st == LC_OK; s++) {
    st = lc_st_open(&L.st[s], L.files[s]);
    if (st != LC_OK) break;
    L.n_open++;
    const lc_st_file *f = &L.st[s];
    for (int i = 0; i < f->n && st == LC_OK; i++) {
      const lc_st_tensor *t = &f->tensors[i];
      if (L.wm) {
        const wm_entry *w = bsearch(t->name, L.wm, (size_t)L.n_wm, sizeof *L.wm, find_wm);
        if (w && w->shard != s) {
          st = lc_fail(LC_EFORMAT, "%s: tensor '%.80s' is in %s but the index maps it to %s; fix "
                       "the index", ipath, t->name, f->path, L.files[w->shard]);
          break;
        }
      }
      const lc_param_info *const *pp =
          bsearch(t->name, L.order, (size_t)nt, sizeof *L.order, find_tab);
      int idx = pp ? (int)(*pp - m->table) : -1, *hit = pp ? &idx : NULL;
      long long want[2];
      int want_nd;
      if (hit) {
        const lc_param_info *p = &m->table[*hit];
        if (L.shard_of[*hit] >= 0) {
          st = lc_fail(LC_EFORMAT, "tensor '%s' is in both %s and %s; remove one", p->name,
                       L.files[L.shard_of[*hit]], f->path);
          break;
        }
        want_nd = p->ndim;
        want[0] = p->shape[0];
        want[1] = p->shape[1];
      } else if (ends_with(t->name, "rotary_emb.inv_freq")) {
        continue; // a buffer HF recomputes; RoPE here comes from rope_theta
      } else if (c->tie_embeddings && !strcmp(t->name, "lm_head.weight")) {
        want_nd = 2; // tied: HF ignores it in favour of embed_tokens; so do we
        want[0] = c->vocab;
        want[1] = c->dim;
      } else {
        char nb[128];
        snprintf(nb, sizeof nb, "%.100s", t->name);
        for (char *q = nb; *q; q++)
          if ((unsigned char)*q < 0x20) *q = '?';
        st = lc_fail(LC_EFORMAT, "%s: unexpected tensor '%s': it is not part of a %s model with "
                     "this config (%d layers, %s embeddings%s%s%s); the weights do not match config.json",
                     f->path, nb, lc_arch_get(c->arch)->hf_class, c->n_layers, c->tie_embeddings ? "tied" : "untied",
                     c->qkv_bias ? ", q/k/v biases" : "", c->o_bias ? ", o_proj bias" : "", c->qk_norm ? ", q/k norms" : "");
        break;
      }
      int same = t->ndim == want_nd;
      for (int d = 0; same && d < want_nd; d++) same = t->shape[d] == want[d];
      if (!same) {
        char got_s[200], want_s[64];
        shape_str(got_s, sizeof got_s, t->ndim, t->shape);
        shape_str(want_s, sizeof want_s, want_nd, want);
        st = lc_fail(LC_EFORMAT, "%s: tensor '%s' has shape %s but the config needs %s; the "
                     "weights do not match config.json", f->path, t->name, got_s, want_s);
        break;
      }
      if (hit) {
        L.shard_of[*hit] = s;
        L.tens[*hit] = t;
      }
    }
  }
  // Every index entry must be in the shard it names.
  for (int i = 0; i < L.n_wm && st == LC_OK; i++) {
    if (!lc_st_find(&L.st[L.wm[i].shard], L.wm[i].name))
      st = lc_fail(LC_EFORMAT, "%s: the index maps '%.80s' to %s, which does not contain it; fix "
                   "the index or re-download the shard", ipath, L.wm[i].name, L.files[L.wm[i].shard]);
  }
  for (int i = 0; i < nt && st == LC_OK; i++) {
    if (L.shard_of[i] >= 0) continue;
    const char *name = m->table[i].name;
    st = lc_fail(LC_EFORMAT, "%s: tensor '%s' is missing%s", what, name,
                 !strcmp(name, "lm_head.weight")
                     ? " (if the model ties its output head to the embeddings, set "
                       "tie_word_embeddings true in config.json)"
                     : "; the weights do not match config.json");
  }
  // Tensor by tensor into the store (lc_hf_read_state).
  float *stage = NULL;
  if (st == LC_OK) st = lc_hf_stage(&m->ps, LC_PS_PARAMS, &stage);
  for (int i = 0; i < nt && st == LC_OK; i++) st = lc_hf_read_state(&m->ps, LC_PS_PARAMS, i, &L.st[L.shard_of[i]], L.tens[i], stage);
  lc_free(m->ps.arena, stage);
  loader_free(&L);
  return st;
}

lc_status lc_hf_stage(lc_pstore *ps, lc_ps_state which, float **stage) {
  *stage = NULL;
  if (lc_pstore_tensor_ptr(ps, which, 0)) return LC_OK; // whole tensors here: read in place
  *stage = lc_alloc(ps->arena, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, lc_stage_floats(&ps->lay)), "tensor staging buffer");
  return *stage ? LC_OK : LC_ENOMEM;
}

lc_status lc_hf_read_state(lc_pstore *ps, lc_ps_state which, int i, lc_st_file *f, const lc_st_tensor *x, float *stage) {
  const size_t numel = ps->lay.table[i].numel;
  if (x->numel != numel)
    return lc_fail(LC_EINVAL, "%s: tensor '%s' has %zu elements, the model's %s has %zu", f->path, x->name, x->numel,
                   ps->lay.table[i].name, numel);
  if (!stage) return lc_st_read_f32(f, x, lc_pstore_tensor_ptr(ps, which, i), numel);
  const size_t cap = lc_stage_floats(&ps->lay);
  for (size_t a = 0; a < numel; a += cap) {
    const size_t n = numel - a < cap ? numel - a : cap;
    LC_TRY(lc_st_read_f32_part(f, x, a, stage, n));
    lc_pstore_set_tensor_part(ps, which, i, a, stage, n);
  }
  return LC_OK;
}

lc_status lc_hf_write_states(const char *path, lc_pstore *ps, int n_states, const lc_ps_state *which,
                             const char *const *prefix, lc_dtype dt, const char *const *meta_kv, int n_meta) {
  const lc_param_info *table = ps->lay.table;
  const int root = !ps->world || ps->world->rank == 0, nt = ps->lay.n_tensors, ne = nt * n_states;
  const size_t cap = lc_stage_floats(&ps->lay);
  lc_status st = LC_OK;
  lc_st_writer w;
  int open = 0;
  char(*names)[160] = NULL;
  // Rank 0 needs a staging buffer when a state is sharded: every rank learns whether it
  // got one before anyone sends.
  int sharded = 0;
  for (int k = 0; k < n_states; k++) sharded |= !lc_pstore_tensor_ptr(ps, which[k], 0);
  float *buf = root && sharded ? lc_alloc(ps->arena, LC_MEM_SCRATCH, lc_bytes(LC_DT_F32, cap), "tensor gather buffer") : NULL;
  if (ps->world && sharded) LC_TRY(lc_comm_agree(ps->world, root && !buf ? LC_ENOMEM : LC_OK));
  else if (root && sharded && !buf) return LC_ENOMEM;
  if (root) {
    lc_st_entry *e = calloc((size_t)ne + 1, sizeof *e);
    names = calloc((size_t)ne + 1, sizeof *names);
    if (!e || !names) st = lc_fail(LC_ENOMEM, "out of memory saving %s", path);
    for (int i = 0; i < nt && st == LC_OK; i++)
      for (int k = 0; k < n_states; k++) {
        lc_st_entry *x = &e[i * n_states + k];
        snprintf(names[i * n_states + k], sizeof names[0], "%s%s", prefix[k], table[i].name);
        x->name = names[i * n_states + k];
        x->ndim = table[i].ndim;
        x->shape[0] = table[i].shape[0];
        x->shape[1] = table[i].shape[1];
        x->dtype = dt;
      }
    if (st == LC_OK) st = lc_st_writer_begin(&w, path, e, ne, meta_kv, n_meta);
    open = st == LC_OK;
    free(e);
  }
  // Tensor by tensor, piece by piece. Every rank takes part in every gather, even after
  // rank 0 failed to write: the ranks sending to it must not wait forever.
  lc_status cs = LC_OK;
  for (int i = 0; i < nt && cs == LC_OK; i++)
    for (int k = 0; k < n_states && cs == LC_OK; k++) {
      const float *whole = lc_pstore_tensor_ptr(ps, which[k], i);
      const size_t numel = table[i].numel;
      for (size_t a = 0; a < numel && cs == LC_OK; a += whole ? numel : cap) {
        const size_t n = whole ? numel : numel - a < cap ? numel - a : cap;
        if (!whole) cs = lc_pstore_gather_tensor_part(ps, which[k], i, a, n, buf);
        if (root && open && cs == LC_OK) {
          st = lc_st_writer_put_part(&w, whole ? whole : buf, n);
          open = st == LC_OK;
        }
      }
    }
  if (root && open) st = cs == LC_OK ? lc_st_writer_commit(&w) : (lc_st_writer_abort(&w), st);
  if (st == LC_OK) st = cs;
  lc_free(ps->arena, buf);
  free(names);
  return st;
}

lc_status lc_hf_save(const char *dir, lc_model *m, lc_dtype dt) {
  const int root = !m->ps.world || m->ps.world->rank == 0;
  char path[HF_PATH];
  lc_status st = lc_path_join(path, sizeof path, dir, "model.safetensors");
  if (st == LC_OK && root) st = lc_mkdir_p(dir);
  static const char *const meta[] = {"format", "pt"};
  const lc_ps_state which[1] = {LC_PS_PARAMS};
  const char *const prefix[1] = {""};
  lc_status ws = lc_hf_write_states(path, &m->ps, 1, which, prefix, dt, meta, 1); // collective: always
  if (st == LC_OK) st = ws;
  if (st == LC_OK && root) st = lc_hf_write_config(dir, &m->cfg, dt);
  return st;
}
