#define _POSIX_C_SOURCE 200809L
#include "train/checkpoint.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/hash.h"
#include "io/fsutil.h"
#include "io/safetensors.h"
#include "model/arch.h"
#include "model/hf.h"
#include "model/peft.h"

#define PATHN 4096

// Removes a directory that holds only files (a checkpoint directory).
static void remove_flat_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d) return;
  struct dirent *e;
  char p[PATHN];
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (lc_path_join(p, sizeof p, path, e->d_name) == LC_OK) unlink(p);
  }
  closedir(d);
  rmdir(path);
}

// Collective (rank 0 writes): AdamW moments of every tensor, gathered one tensor at a time,
// and the fp32 master weights when model.safetensors holds a rounded copy (--save-dtype
// bf16), so that resuming continues from exactly the weights the run had.
static lc_status write_optimizer(lc_trainer *t, const char *dir) {
  char step[32], path[PATHN];
  snprintf(step, sizeof step, "%ld", t->opt.step);
  const char *meta[] = {"adamw_step", step};
  const lc_ps_state which[3] = {LC_PS_EXP_AVG, LC_PS_EXP_AVG_SQ, LC_PS_PARAMS};
  const char *const prefix[3] = {"exp_avg.", "exp_avg_sq.", "master."};
  const int n = t->o.save_dtype == LC_DT_F32 ? 2 : 3;
  lc_status st = lc_path_join(path, sizeof path, dir, "optimizer.safetensors");
  // (LoRA: the adapters' states; their weights are saved in fp32, so no master copy)
  const int nk = t->model.lora ? 2 : n;
  lc_status ws = lc_hf_write_states(path, lc_model_trainable(&t->model), nk, which, prefix, LC_DT_F32, meta, 1); // collective: always
  return st == LC_OK ? ws : st;
}

static lc_status write_state(const lc_trainer *t, const char *dir) {
  const lc_train_opts *o = &t->o;
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "format", "longctx-checkpoint");
  cJSON_AddNumberToObject(j, "version", 1);
  cJSON_AddNumberToObject(j, "step", (double)t->step);
  cJSON_AddNumberToObject(j, "next_sample", (double)t->next_sample);
  char seed[32];
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
  cJSON_AddStringToObject(j, "seed", seed); // string: a uint64 does not fit a JSON double
  cJSON_AddStringToObject(j, "data", o->data_spec);
  cJSON_AddNumberToObject(j, "seq", o->seq);
  cJSON_AddNumberToObject(j, "batch", o->batch);
  cJSON_AddBoolToObject(j, "pack", o->pack);
  cJSON_AddBoolToObject(j, "drop_long", o->drop_long);
  cJSON *s = cJSON_AddObjectToObject(j, "schedule");
  cJSON_AddNumberToObject(s, "lr", o->lr);
  cJSON_AddNumberToObject(s, "lr_min", o->lr_min);
  cJSON_AddNumberToObject(s, "warmup", (double)o->warmup);
  cJSON_AddNumberToObject(s, "steps", (double)o->steps);
  cJSON_AddNumberToObject(s, "weight_decay", o->wd);
  cJSON_AddNumberToObject(s, "clip", o->clip);
  cJSON *l = cJSON_AddObjectToObject(j, "layout");
  cJSON_AddNumberToObject(l, "world", t->grid.world);
  cJSON_AddNumberToObject(l, "dp", t->grid.dp);
  cJSON_AddNumberToObject(l, "cp", t->grid.cp);
  cJSON_AddNumberToObject(l, "hp", t->grid.hp);
  cJSON_AddNumberToObject(l, "ring_window", t->grid.window);
  cJSON_AddStringToObject(l, "placement", lc_placement_name(t->grid.placement));
  cJSON_AddNumberToObject(l, "zero", lc_model_trainable((lc_model *)&t->model)->stage);
  cJSON_AddNumberToObject(l, "zero_group", lc_model_trainable((lc_model *)&t->model)->Z);
  char *txt = cJSON_Print(j);
  cJSON_Delete(j);
  if (!txt) return lc_fail(LC_ENOMEM, "out of memory writing trainer_state.json");
  char path[PATHN];
  lc_status st = lc_path_join(path, sizeof path, dir, "trainer_state.json");
  if (st == LC_OK) st = lc_write_file_atomic(path, txt, strlen(txt));
  free(txt);
  return st;
}

#define MAX_CKPTS 4096

static int newest_first(const void *a, const void *b) {
  const long x = *(const long *)a, y = *(const long *)b;
  return (x < y) - (x > y);
}

// The steps of the checkpoint-<step> directories in dir, newest first (at most MAX_CKPTS).
// With drop_tmp, also deletes the temporaries a crashed save left (never published).
static int list_steps(const char *dir, long *steps, int drop_tmp) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < MAX_CKPTS) {
    long s;
    char extra;
    if (sscanf(e->d_name, "checkpoint-%ld%c", &s, &extra) == 1 && s >= 0) steps[n++] = s;
    if (drop_tmp && !strncmp(e->d_name, ".checkpoint-", 12) && strstr(e->d_name, ".tmp.")) {
      char p[PATHN];
      if (lc_path_join(p, sizeof p, dir, e->d_name) == LC_OK) remove_flat_dir(p);
    }
  }
  closedir(d);
  qsort(steps, (size_t)n, sizeof *steps, newest_first);
  return n;
}

// Keeps the newest `keep` checkpoint-<step> directories (by step number).
static void prune(const char *dir, int keep) {
  long steps[MAX_CKPTS];
  const int n = list_steps(dir, steps, 1);
  for (int i = keep; i < n; i++) {
    char name[64], p[PATHN];
    snprintf(name, sizeof name, "checkpoint-%ld", steps[i]);
    if (lc_path_join(p, sizeof p, dir, name) == LC_OK) remove_flat_dir(p);
  }
}

static const char *const ckpt_files[] = {"config.json", "model.safetensors", "optimizer.safetensors",
                                         "trainer_state.json"};
#define N_CKPT_FILES (int)(sizeof ckpt_files / sizeof ckpt_files[0])
// A LoRA run's: the base's config (the weights stay where --model has them), the adapters
// in PEFT's files, their AdamW states.
static const char *const lora_files[] = {"config.json", "adapter_config.json", "adapter_model.safetensors",
                                         "optimizer.safetensors", "trainer_state.json"};
#define N_LORA_FILES (int)(sizeof lora_files / sizeof lora_files[0])
static const char *const *const ckpt_files_of_full = ckpt_files;

// Rank 0, after the files are written: checksums.json with each file's size and checksum
// (read back from disk, so it describes what is really there).
static lc_status write_checksums(const char *dir, int lora) {
  cJSON *j = cJSON_CreateObject(), *f = cJSON_AddObjectToObject(j, "files");
  cJSON_AddStringToObject(j, "algorithm", "longctx-hash64 (src/core/hash.c)");
  lc_status st = LC_OK;
  const char *const *files = lora ? lora_files : ckpt_files_of_full;
  const int nf = lora ? N_LORA_FILES : N_CKPT_FILES;
  for (int i = 0; i < nf && st == LC_OK; i++) {
    char p[PATHN], hex[32];
    uint64_t h = 0, n = 0;
    st = lc_path_join(p, sizeof p, dir, files[i]);
    if (st == LC_OK) st = lc_file_hash(p, &h, &n);
    if (st != LC_OK) break;
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    cJSON *e = cJSON_AddObjectToObject(f, files[i]);
    cJSON_AddNumberToObject(e, "bytes", (double)n);
    cJSON_AddStringToObject(e, "hash", hex);
  }
  char *txt = st == LC_OK ? cJSON_Print(j) : NULL;
  cJSON_Delete(j);
  if (st != LC_OK) return st;
  if (!txt) return lc_fail(LC_ENOMEM, "out of memory writing checksums.json");
  char p[PATHN];
  st = lc_path_join(p, sizeof p, dir, "checksums.json");
  if (st == LC_OK) st = lc_write_file_atomic(p, txt, strlen(txt));
  free(txt);
  return st;
}

lc_status lc_checkpoint_verify(const char *dir, int *verified) {
  char p[PATHN], *txt = NULL;
  size_t len = 0;
  *verified = 0;
  LC_TRY(lc_path_join(p, sizeof p, dir, "checksums.json"));
  if (!lc_is_file(p)) return LC_OK; // an older checkpoint: nothing to check against
  LC_TRY(lc_read_file(p, 1 << 20, &txt, &len));
  cJSON *j = cJSON_ParseWithLength(txt, len);
  free(txt);
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "files");
  lc_status st = cJSON_IsObject(f) ? LC_OK
                                   : lc_fail(LC_EFORMAT, "%s is damaged (not the JSON longctx writes); this "
                                             "checkpoint cannot be verified: resume from another", p);
  // A LoRA checkpoint's list (its checksums name the adapter's file), else a full one's.
  const int lora = cJSON_GetObjectItemCaseSensitive(f, "adapter_model.safetensors") != NULL;
  const char *const *files = lora ? lora_files : ckpt_files_of_full;
  const int nf = lora ? N_LORA_FILES : N_CKPT_FILES;
  for (int i = 0; i < nf && st == LC_OK; i++) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(f, files[i]);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(e, "bytes"), *h = cJSON_GetObjectItemCaseSensitive(e, "hash");
    if (!cJSON_IsNumber(b) || !cJSON_IsString(h)) {
      st = lc_fail(LC_EFORMAT, "%s lacks the checksum of %s; the checkpoint is damaged: resume from another", p,
                   files[i]);
      break;
    }
    char fp[PATHN], hex[32];
    uint64_t hv = 0, n = 0;
    st = lc_path_join(fp, sizeof fp, dir, files[i]);
    if (st == LC_OK && !lc_is_file(fp))
      st = lc_fail(LC_EIO, "checkpoint %s is damaged: %s is missing; resume from another checkpoint", dir, files[i]);
    if (st == LC_OK) st = lc_file_hash(fp, &hv, &n);
    if (st != LC_OK) break;
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)hv);
    if ((double)n != b->valuedouble || strcmp(hex, h->valuestring) != 0)
      st = lc_fail(LC_EFORMAT, "checkpoint %s is damaged: %s %s (%llu bytes, checksum %s; saved as %.0f bytes, %s); "
                   "resume from another checkpoint", dir, files[i],
                   (double)n != b->valuedouble ? "has another size" : "does not match its checksum",
                   (unsigned long long)n, hex, b->valuedouble, h->valuestring);
  }
  cJSON_Delete(j);
  if (st == LC_OK) *verified = 1;
  return st;
}

// Every rank learns whether any failed (the message of the lowest failing rank).
static lc_status agree(lc_trainer *t, lc_status st) { return lc_comm_agree(t->world, st); }

// Rank 0: DIR exists and holds a fresh, empty temporary directory for checkpoint `name`.
static lc_status prepare_tmp(const char *dir, const char *name, char *tmp, size_t cap) {
  char tname[96];
  snprintf(tname, sizeof tname, ".%s.tmp.%d", name, (int)getpid());
  LC_TRY(lc_mkdir_p(dir));
  LC_TRY(lc_path_join(tmp, cap, dir, tname));
  remove_flat_dir(tmp);
  if (mkdir(tmp, 0755) != 0)
    return lc_fail(LC_EIO, "cannot create %s (%s); check --save points to a writable place", tmp, strerror(errno));
  return LC_OK;
}

// Rank 0: the written temporary directory becomes DIR/name, then DIR/latest names it.
static lc_status publish(const char *dir, const char *name, const char *tmp, int keep) {
  char final[PATHN], latest[PATHN];
  LC_TRY(lc_path_join(final, sizeof final, dir, name));
  LC_TRY(lc_path_join(latest, sizeof latest, dir, "latest"));
  // Test hook: die between writing and publishing (the crash-safety test uses it).
  const char *crash = getenv("LONGCTX_TEST_CRASH");
  if (crash && !strcmp(crash, "before-rename")) raise(SIGKILL);
  if (lc_is_dir(final)) remove_flat_dir(final); // same step saved again
  if (rename(tmp, final) != 0) {
    int err = errno;
    remove_flat_dir(tmp);
    return lc_fail(LC_EIO, "cannot rename %s to %s (%s)", tmp, final, strerror(err));
  }
  char line[80];
  int len = snprintf(line, sizeof line, "%s\n", name);
  LC_TRY(lc_write_file_atomic(latest, line, (size_t)len));
  prune(dir, keep < 1 ? 1 : keep);
  return LC_OK;
}

// Whether this rank's parameters and AdamW moments are all finite: their sum of squares in
// double (a float's square is below 1.2e77, so the sum of any count of finite values is
// finite), accumulated on the backend and read once (a named read).
static lc_status all_finite(lc_pstore *ps, int *finite) {
  const lc_buf acc = ps->norm_acc_b, b[3] = {ps->params_b, ps->m_b, ps->v_b};
  double s = 0;
  *finite = 1;
  if (!lc_buf_ok(acc)) return LC_OK; // no optimizer: nothing trains, nothing to check
  LC_TRY(lc_be_zero(acc));
  for (int k = 0; k < 3; k++)
    if (lc_buf_ok(b[k])) LC_TRY(lc_be_sumsq_acc(acc, b[k]));
  LC_TRY(lc_buf_read(acc, &s, LC_SYNC_STATES));
  *finite = isfinite(s);
  return LC_OK;
}

double lc_checkpoint_bytes(const lc_config *cfg, lc_dtype save_dtype) {
  if (cfg->lora.rank > 0) return 12.0 * (double)lc_config_n_lora_params(cfg) + (1 << 20); // adapters, m, v in fp32
  return (save_dtype == LC_DT_F32 ? 12.0 : 14.0) * (double)lc_config_n_params(cfg) + (1 << 20);
}

lc_status lc_checkpoint_save(lc_trainer *t, const char *dir, int keep) {
  const int root = t->world->rank == 0;
  char name[64], tmp[PATHN] = "";
  snprintf(name, sizeof name, "checkpoint-%ld", t->step);
  // Never a checkpoint with NaN or Inf in it: the previous good one stays the latest.
  int finite = 1;
  LC_TRY(agree(t, all_finite(lc_model_trainable(&t->model), &finite)));
  double bad = !finite;
  LC_TRY(lc_allreduce_sum(t->world, &bad, 1, LC_DT_F64));
  if (bad > 0)
    return lc_fail(LC_EINVAL, "step %ld: the weights or AdamW moments are not all finite; not saving %s over the "
                   "last good checkpoint", t->step, name);
  lc_status st = root ? prepare_tmp(dir, name, tmp, sizeof tmp) : LC_OK;
  LC_TRY(agree(t, st));
  // Weights and moments reach rank 0 one tensor at a time (ZeRO shards from their owners).
  if (t->model.lora) { // the adapters (PEFT's files) and the base's config
    st = lc_peft_save_weights(tmp, &t->model);
    if (st == LC_OK && root) st = lc_hf_write_config(tmp, &t->o.cfg, LC_DT_F32);
    if (st == LC_OK && root) st = lc_peft_write_config(tmp, &t->o.cfg, t->o.base_name);
  } else {
    st = lc_hf_save(tmp, &t->model, t->o.save_dtype);
  }
  lc_status so = write_optimizer(t, tmp);
  if (st == LC_OK) st = so;
  if (st == LC_OK && root) st = write_state(t, tmp);
  if (st == LC_OK && root) st = write_checksums(tmp, t->model.lora);
  st = agree(t, st);
  if (root) st = st == LC_OK ? publish(dir, name, tmp, keep) : (remove_flat_dir(tmp), st);
  return agree(t, st);
}

// The checkpoint DIR/latest names (LC_EIO/LC_EFORMAT if there is none).
static lc_status latest_of(const char *path, char *out, size_t cap) {
  char p[PATHN];
  LC_TRY(lc_path_join(p, sizeof p, path, "latest"));
  char *txt = NULL;
  size_t len = 0;
  if (!lc_is_file(p) || lc_read_file(p, 256, &txt, &len) != LC_OK)
    return lc_fail(LC_EIO, "--resume %s: neither a checkpoint (no trainer_state.json) nor a --save "
                   "directory (no 'latest' file)", path);
  while (len && (txt[len - 1] == '\n' || txt[len - 1] == ' ')) txt[--len] = 0;
  long s;
  char extra;
  int ok = sscanf(txt, "checkpoint-%ld%c", &s, &extra) == 1;
  lc_status st = ok ? lc_path_join(out, cap, path, txt)
                    : lc_fail(LC_EFORMAT, "--resume %s: 'latest' holds '%s', not checkpoint-<step>", path, txt);
  free(txt);
  return st;
}

static void say(char *note, size_t cap, const char *fmt, const char *a, const char *b) {
  if (note && cap) snprintf(note, cap, fmt, a, b);
}

lc_status lc_checkpoint_resolve(const char *path, char *out, size_t cap, char *note, size_t note_cap) {
  char p[PATHN];
  int verified = 0;
  if (note && note_cap) note[0] = 0;
  LC_TRY(lc_path_join(p, sizeof p, path, "trainer_state.json"));
  if (lc_is_file(p)) { // one checkpoint: it must be intact
    if (strlen(path) >= cap) return lc_fail(LC_EINVAL, "--resume path too long");
    LC_TRY(lc_checkpoint_verify(path, &verified));
    strcpy(out, path);
    if (!verified) say(note, note_cap, "note: %s has no checksums.json (an older checkpoint): not verified%s", path, "");
    return LC_OK;
  }
  LC_TRY(latest_of(path, out, cap));
  lc_status st = lc_is_dir(out) ? lc_checkpoint_verify(out, &verified)
                                : lc_fail(LC_EIO, "checkpoint %s (named by %s/latest) is missing", out, path);
  if (st == LC_OK) {
    if (!verified) say(note, note_cap, "note: %s has no checksums.json (an older checkpoint): not verified%s", out, "");
    return LC_OK;
  }
  // The latest is damaged: the newest other checkpoint that is intact.
  char why[600], bad[PATHN];
  snprintf(why, sizeof why, "%s", lc_errmsg());
  snprintf(bad, sizeof bad, "%s", out);
  long steps[MAX_CKPTS];
  const int n = list_steps(path, steps, 0);
  for (int i = 0; i < n; i++) {
    char name[64];
    snprintf(name, sizeof name, "checkpoint-%ld", steps[i]);
    if (lc_path_join(out, cap, path, name) != LC_OK || !strcmp(out, bad)) continue;
    if (lc_checkpoint_verify(out, &verified) == LC_OK && verified) {
      say(note, note_cap, "note: %s; resuming from %s, the newest intact checkpoint", why, out);
      return LC_OK;
    }
  }
  return lc_fail(LC_EFORMAT, "%s; no other intact checkpoint in %s", why, path);
}

static lc_status mismatch(const char *dir, const char *what, const char *saved, const char *now) {
  return lc_fail(LC_EINVAL, "checkpoint %s was saved with %s %s but this run has %s; resume with the "
                 "same %s", dir, what, saved, now, what);
}

static lc_status check_model(const char *dir, const lc_config *a, const lc_config *b) {
  char x[64], y[64];
#define SAME(f, name)                                                       \
  if (a->f != b->f) {                                                       \
    snprintf(x, sizeof x, "%g", (double)a->f);                              \
    snprintf(y, sizeof y, "%g", (double)b->f);                              \
    return lc_fail(LC_EINVAL, "checkpoint %s was saved for another model (%s %s, this run %s); "   \
                   "omit --model or pass the model the checkpoint was trained with", dir, name, x, y); \
  }
  SAME(dim, "hidden_size");
  SAME(n_layers, "num_hidden_layers");
  SAME(n_heads, "num_attention_heads");
  SAME(n_kv_heads, "num_key_value_heads");
  SAME(ffn, "intermediate_size");
  SAME(vocab, "vocab_size");
  SAME(tie_embeddings, "tie_word_embeddings");
  SAME(norm_eps, "rms_norm_eps");
  SAME(rope_theta, "rope_theta");
  SAME(sliding_window, "sliding_window (--attn-window)");
  SAME(head_dim, "head_dim");
  SAME(qkv_bias, "q/k/v biases");
  SAME(o_bias, "o_proj bias");
  SAME(qk_norm, "q/k norms");
  SAME(max_pos, "max_position_embeddings");
#undef SAME
  // The family as written (a Llama with a window is saved as Mistral) and the whole RoPE
  // scaling (every parameter changes the positions).
  const lc_arch *fa = lc_arch_written(a), *fb = lc_arch_written(b);
  if (fa != fb)
    return lc_fail(LC_EINVAL, "checkpoint %s was saved for another model (%s, this run %s); omit --model or pass the model "
                   "the checkpoint was trained with", dir, fa->hf_class, fb->hf_class);
  if (!lc_rope_scaling_equal(&a->rope, &b->rope)) {
    char da[400], db[400];
    lc_config_describe(a, da, sizeof da);
    lc_config_describe(b, db, sizeof db);
    const char *ra = strstr(da, "RoPE"), *rb = strstr(db, "RoPE");
    return lc_fail(LC_EINVAL, "checkpoint %s was saved with another RoPE scaling (%s; this run %s): resume with the model's "
                   "own (leave out --rope-scaling, or pass the same)", dir, ra ? ra : da, rb ? rb : db);
  }
  return LC_OK;
}

// A whole number in [lo, hi] (what the writer writes for a count).
static int whole_in(const cJSON *x, double lo, double hi) {
  return cJSON_IsNumber(x) && x->valuedouble >= lo && x->valuedouble <= hi && x->valuedouble == floor(x->valuedouble);
}

lc_status lc_checkpoint_read_state(const char *path, lc_ckpt_state *s) {
  char *txt = NULL;
  size_t len = 0;
  memset(s, 0, sizeof *s);
  LC_TRY(lc_read_file(path, 1 << 20, &txt, &len));
  cJSON *j = cJSON_ParseWithLength(txt, len);
  free(txt);
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
  const cJSON *step = cJSON_GetObjectItemCaseSensitive(j, "step");
  const cJSON *next = cJSON_GetObjectItemCaseSensitive(j, "next_sample");
  const cJSON *seed = cJSON_GetObjectItemCaseSensitive(j, "seed");
  const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data");
  const cJSON *seq = cJSON_GetObjectItemCaseSensitive(j, "seq");
  const cJSON *batch = cJSON_GetObjectItemCaseSensitive(j, "batch");
  const cJSON *pack = cJSON_GetObjectItemCaseSensitive(j, "pack"); // absent in older checkpoints: off
  const cJSON *drop_long = cJSON_GetObjectItemCaseSensitive(j, "drop_long"); // (likewise)
  // Counts as the writer writes them: whole numbers a step counter (long), a sample index
  // (uint64, exact in a double below 2^53) and an int hold.
  if (!j || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, "longctx-checkpoint") != 0 ||
      !whole_in(step, 0, 9007199254740992.0) || !whole_in(next, 0, 9007199254740992.0) || !cJSON_IsString(seed) ||
      !cJSON_IsString(data) || !whole_in(seq, 1, 2147483647.0) || !whole_in(batch, 1, 2147483647.0)) {
    cJSON_Delete(j);
    return lc_fail(LC_EFORMAT, "%s is not a valid longctx trainer state (missing or malformed fields)", path);
  }
  s->step = (long)step->valuedouble;
  s->next_sample = (uint64_t)next->valuedouble;
  s->seq = (int)seq->valuedouble;
  s->batch = (int)batch->valuedouble;
  s->pack = pack && cJSON_IsTrue(pack);
  s->drop_long = drop_long && cJSON_IsTrue(drop_long);
  s->seed = strdup(seed->valuestring);
  s->data = strdup(data->valuestring);
  cJSON_Delete(j);
  if (!s->seed || !s->data) {
    lc_checkpoint_state_free(s);
    return lc_fail(LC_ENOMEM, "out of memory reading %s", path);
  }
  return LC_OK;
}

void lc_checkpoint_state_free(lc_ckpt_state *s) {
  free(s->seed);
  free(s->data);
  s->seed = s->data = NULL;
}

static lc_status read_state(lc_trainer *t, const char *dir) {
  char p[PATHN];
  LC_TRY(lc_path_join(p, sizeof p, dir, "trainer_state.json"));
  lc_ckpt_state s;
  LC_TRY(lc_checkpoint_read_state(p, &s));
  lc_status st = LC_OK;
  char now[64], saved[64];
  snprintf(now, sizeof now, "%llu", (unsigned long long)t->o.seed);
  if (strcmp(s.seed, now) != 0) st = mismatch(dir, "--seed", s.seed, now);
  else if (strcmp(s.data, t->o.data_spec) != 0)
    st = mismatch(dir, "--data", s.data, t->o.data_spec);
  else if (s.seq != t->o.seq) {
    snprintf(saved, sizeof saved, "%d", s.seq);
    snprintf(now, sizeof now, "%d", t->o.seq);
    st = mismatch(dir, "--seq", saved, now);
  } else if (s.pack != (t->o.pack != 0)) {
    st = mismatch(dir, "--pack", s.pack ? "on" : "off", t->o.pack ? "on" : "off");
  } else if (s.drop_long != (t->o.drop_long != 0)) { // another set of documents: other samples
    st = mismatch(dir, "--drop-long", s.drop_long ? "on" : "off", t->o.drop_long ? "on" : "off");
  } else if (s.batch != t->o.batch) {
    snprintf(saved, sizeof saved, "%d", s.batch);
    snprintf(now, sizeof now, "%d", t->o.batch);
    st = mismatch(dir, "--batch", saved, now);
  }
  if (st == LC_OK) {
    t->step = s.step;
    t->next_sample = s.next_sample;
  }
  lc_checkpoint_state_free(&s);
  return st;
}

static lc_status read_optimizer(lc_trainer *t, const char *dir) {
  char p[PATHN];
  LC_TRY(lc_path_join(p, sizeof p, dir, "optimizer.safetensors"));
  lc_st_file f;
  LC_TRY(lc_st_open(&f, p));
  lc_status st = LC_OK;
  lc_pstore *ps = lc_model_trainable(&t->model);
  const lc_param_info *table = ps->lay.table;
  float *stage = NULL;
  st = lc_hf_stage(ps, LC_PS_EXP_AVG, &stage);
  // master.*: the fp32 weights of a checkpoint whose model.safetensors was rounded (all or none).
  char first[160];
  snprintf(first, sizeof first, "master.%s", table[0].name);
  const int n_states = lc_st_find(&f, first) ? 3 : 2;
  static const char *const prefix[3] = {"exp_avg", "exp_avg_sq", "master"};
  static const lc_ps_state which[3] = {LC_PS_EXP_AVG, LC_PS_EXP_AVG_SQ, LC_PS_PARAMS};
  for (int i = 0; i < ps->lay.n_tensors && st == LC_OK; i++)
    for (int k = 0; k < n_states && st == LC_OK; k++) {
      char name[200];
      snprintf(name, sizeof name, "%s.%s", prefix[k], table[i].name);
      const lc_st_tensor *x = lc_st_find(&f, name);
      if (!x) st = lc_fail(LC_EFORMAT, "%s lacks %s; the checkpoint is incomplete", p, name);
      else st = lc_hf_read_state(ps, which[k], i, &f, x, stage);
    }
  lc_free(ps->arena, stage);
  const char *s = st == LC_OK ? lc_st_meta(&f, "adamw_step") : NULL;
  if (st == LC_OK && !s) st = lc_fail(LC_EFORMAT, "%s lacks the adamw_step metadata", p);
  if (st == LC_OK) t->opt.step = atol(s);
  lc_st_close(&f);
  return st;
}

lc_status lc_checkpoint_load(lc_trainer *t, const char *dir) {
  lc_config saved;
  LC_TRY(lc_hf_read_config(dir, &saved));
  LC_TRY(check_model(dir, &saved, &t->o.cfg));
  LC_TRY(read_state(t, dir));
  char p[PATHN];
  LC_TRY(lc_path_join(p, sizeof p, dir, "adapter_config.json"));
  const int lora_ck = lc_is_file(p);
  if (lora_ck != t->model.lora)
    return lc_fail(LC_EINVAL, "checkpoint %s %s LoRA adapters and this run %s: resume %s", dir, lora_ck ? "holds" : "has no",
                   t->model.lora ? "trains adapters" : "trains every weight",
                   lora_ck ? "with the checkpoint's --lora R" : "without --lora (or start a LoRA run from its weights: --model DIR)");
  if (lora_ck) { // the base is --model's (loaded already); the adapters are the checkpoint's
    lc_lora file;
    LC_TRY(lc_peft_read_config(dir, &file));
    LC_TRY(lc_peft_check(dir, &file, &t->o.cfg.lora));
    LC_TRY(lc_peft_load_weights(dir, &t->model));
  } else {
    LC_TRY(lc_hf_load_weights(dir, &t->model));
  }
  return read_optimizer(t, dir);
}
