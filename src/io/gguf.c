#define _POSIX_C_SOURCE 200809L
#include "io/gguf.h"
#include "io/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/dtype.h"
#include "core/dequant.h"

// ---------------------------------------------------------------- types

typedef struct {
  const char *name;
  int block, bytes; // elements and bytes per block (ggml's type traits)
  int readable;
} type_info;

// Every type of ggml.h's enum ggml_type with its block layout (ids 4, 5 and 31-33 were
// removed from ggml and are unknown here).
static const type_info types[LC_GGML_TYPES] = {
    [0] = {"F32", 1, 4, 1},        [1] = {"F16", 1, 2, 1},        [2] = {"Q4_0", 32, 18, 1},
    [3] = {"Q4_1", 32, 20, 1},     [6] = {"Q5_0", 32, 22, 1},     [7] = {"Q5_1", 32, 24, 1},
    [8] = {"Q8_0", 32, 34, 1},     [9] = {"Q8_1", 32, 40, 0},     [10] = {"Q2_K", 256, 84, 0},
    [11] = {"Q3_K", 256, 110, 0},  [12] = {"Q4_K", 256, 144, 1},  [13] = {"Q5_K", 256, 176, 1},
    [14] = {"Q6_K", 256, 210, 1},  [15] = {"Q8_K", 256, 292, 0},  [16] = {"IQ2_XXS", 256, 66, 0},
    [17] = {"IQ2_XS", 256, 74, 0}, [18] = {"IQ3_XXS", 256, 98, 0}, [19] = {"IQ1_S", 256, 50, 0},
    [20] = {"IQ4_NL", 32, 18, 0},  [21] = {"IQ3_S", 256, 110, 0}, [22] = {"IQ2_S", 256, 82, 0},
    [23] = {"IQ4_XS", 256, 136, 0}, [24] = {"I8", 1, 1, 0},       [25] = {"I16", 1, 2, 0},
    [26] = {"I32", 1, 4, 0},       [27] = {"I64", 1, 8, 0},       [28] = {"F64", 1, 8, 0},
    [29] = {"IQ1_M", 256, 56, 0},  [30] = {"BF16", 1, 2, 1},      [34] = {"TQ1_0", 256, 54, 0},
    [35] = {"TQ2_0", 256, 66, 0},  [39] = {"MXFP4", 32, 17, 0},   [40] = {"NVFP4", 64, 36, 0},
    [41] = {"Q1_0", 128, 18, 0},
};

static const type_info *tinfo(int type) {
  return type >= 0 && type < LC_GGML_TYPES && types[type].name ? &types[type] : NULL;
}

const char *lc_gguf_type_name(int type) {
  static _Thread_local char buf[32];
  const type_info *t = tinfo(type);
  if (t) return t->name;
  snprintf(buf, sizeof buf, "type %d", type);
  return buf;
}
int lc_gguf_type_block(int type) { return tinfo(type) ? tinfo(type)->block : 0; }
int lc_gguf_type_bytes(int type) { return tinfo(type) ? tinfo(type)->bytes : 0; }
int lc_gguf_type_readable(int type) { return tinfo(type) ? tinfo(type)->readable : 0; }
const char *lc_gguf_readable_names(void) { return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K"; }

static const char *const vtype_names[LC_GGUF_VTYPES] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
                                                        "bool", "string", "array", "uint64", "int64", "float64"};
static const int vtype_size[LC_GGUF_VTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *lc_gguf_vtype_name(lc_gguf_vtype t) { return t >= 0 && t < LC_GGUF_VTYPES ? vtype_names[t] : "unknown"; }

// ---------------------------------------------------------------- little-endian bytes

static uint16_t le16(const unsigned char *b) { return (uint16_t)(b[0] | b[1] << 8); }
static uint32_t le32(const unsigned char *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}
static uint64_t le64(const unsigned char *b) { return (uint64_t)le32(b) | (uint64_t)le32(b + 4) << 32; }
static float f32_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

// A name made safe for a one-line message: at most 80 bytes, control bytes as '?'.
static const char *disp(const char *s, size_t n, char *buf, size_t cap) {
  size_t k = 0;
  for (size_t i = 0; i < n && k + 4 < cap && k < 80; i++)
    buf[k++] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
  if (k < n && k + 4 < cap) {
    memcpy(buf + k, "...", 3);
    k += 3;
  }
  buf[k] = 0;
  return buf;
}

// ---------------------------------------------------------------- raw reads

static lc_status src_read(const lc_gguf_file *f, uint64_t off, void *buf, size_t len) {
  return lc_src_read(f->path, f->fd_, f->mem_, f->size, off, buf, len);
}

// Sequential reads of the header through a window of the file.
#define WIN 65536
typedef struct {
  lc_gguf_file *f;
  uint64_t pos;          // next byte to parse
  uint64_t win_off;      // file offset of win[0]
  size_t win_len;
  unsigned char win[WIN];
} cursor;

// n bytes at the cursor (n <= WIN) into out, advancing. `what` names them for a truncation.
static lc_status take(cursor *c, void *out, size_t n, const char *what) {
  lc_gguf_file *f = c->f;
  if (c->pos > f->size || n > f->size - c->pos)
    return lc_fail(LC_EFORMAT, "%s: truncated: %s at offset %llu needs %zu bytes but the file ends at %llu", f->path,
                   what, (unsigned long long)c->pos, n, (unsigned long long)f->size);
  if (c->pos < c->win_off || c->pos + n > c->win_off + c->win_len) {
    size_t len = f->size - c->pos < WIN ? (size_t)(f->size - c->pos) : WIN;
    LC_TRY(src_read(f, c->pos, c->win, len));
    c->win_off = c->pos;
    c->win_len = len;
  }
  memcpy(out, c->win + (c->pos - c->win_off), n);
  c->pos += n;
  return LC_OK;
}

static lc_status take_u32(cursor *c, uint32_t *v, const char *what) {
  unsigned char b[4] = {0};
  LC_TRY(take(c, b, 4, what));
  *v = le32(b);
  return LC_OK;
}
static lc_status take_u64(cursor *c, uint64_t *v, const char *what) {
  unsigned char b[8] = {0};
  LC_TRY(take(c, b, 8, what));
  *v = le64(b);
  return LC_OK;
}

// Advances past n bytes that must lie inside the file.
static lc_status skip(cursor *c, uint64_t n, const char *what) {
  lc_gguf_file *f = c->f;
  if (c->pos > f->size || n > f->size - c->pos)
    return lc_fail(LC_EFORMAT, "%s: truncated: %s at offset %llu needs %llu bytes but the file ends at %llu", f->path,
                   what, (unsigned long long)c->pos, (unsigned long long)n, (unsigned long long)f->size);
  c->pos += n;
  return LC_OK;
}

static uint64_t remaining(const cursor *c) { return c->pos <= c->f->size ? c->f->size - c->pos : 0; }

// ---------------------------------------------------------------- header

// A string's length, checked against the file (its bytes are at c->pos afterwards).
static lc_status string_len(cursor *c, uint64_t *len, const char *what) {
  LC_TRY(take_u64(c, len, what));
  if (*len > remaining(c))
    return lc_fail(LC_EFORMAT, "%s: %s has length %llu at offset %llu, beyond the end of the file (%llu bytes left); "
                   "the file is truncated or damaged", c->f->path, what, (unsigned long long)*len,
                   (unsigned long long)(c->pos - 8), (unsigned long long)remaining(c));
  return LC_OK;
}

// Skips one value of type t (arrays recursively, at most LC_GGUF_MAX_NEST deep).
static lc_status skip_value(cursor *c, lc_gguf_vtype t, int depth, const char *key) {
  char what[160];
  if (t == LC_GGUF_STR) {
    uint64_t n;
    snprintf(what, sizeof what, "a string of metadata '%s'", key);
    LC_TRY(string_len(c, &n, what));
    return skip(c, n, what);
  }
  if (t == LC_GGUF_ARR) {
    if (depth >= LC_GGUF_MAX_NEST)
      return lc_fail(LC_EFORMAT, "%s: metadata '%s' nests arrays more than %d deep", c->f->path, key, LC_GGUF_MAX_NEST);
    snprintf(what, sizeof what, "an array header of metadata '%s'", key);
    uint32_t at;
    uint64_t count;
    LC_TRY(take_u32(c, &at, what));
    LC_TRY(take_u64(c, &count, what));
    if (at >= LC_GGUF_VTYPES)
      return lc_fail(LC_EFORMAT, "%s: metadata '%s' is an array of unknown value type %u", c->f->path, key, at);
    const uint64_t min = vtype_size[at] ? (uint64_t)vtype_size[at] : at == LC_GGUF_STR ? 8 : 12;
    if (count > remaining(c) / min)
      return lc_fail(LC_EFORMAT, "%s: metadata '%s' claims %llu array elements of %s, more than the %llu bytes left in "
                     "the file can hold", c->f->path, key, (unsigned long long)count, vtype_names[at],
                     (unsigned long long)remaining(c));
    if (vtype_size[at]) return skip(c, count * min, what);
    for (uint64_t i = 0; i < count; i++) LC_TRY(skip_value(c, (lc_gguf_vtype)at, depth + 1, key));
    return LC_OK;
  }
  snprintf(what, sizeof what, "the %s value of metadata '%s'", lc_gguf_vtype_name(t), key);
  return skip(c, (uint64_t)vtype_size[t], what);
}

static lc_status parse_kv(cursor *c, lc_gguf_kv *kv, int idx) {
  lc_gguf_file *f = c->f;
  char what[160], kb[96];
  snprintf(what, sizeof what, "the key of metadata entry %d", idx);
  uint64_t klen;
  LC_TRY(string_len(c, &klen, what));
  if (klen == 0) return lc_fail(LC_EFORMAT, "%s: metadata entry %d has an empty key", f->path, idx);
  if (klen > LC_GGUF_MAX_KEY)
    return lc_fail(LC_EFORMAT, "%s: the key of metadata entry %d is %llu bytes, longer than the %d GGUF allows", f->path,
                   idx, (unsigned long long)klen, LC_GGUF_MAX_KEY);
  kv->key = malloc((size_t)klen + 1);
  if (!kv->key) return lc_fail(LC_ENOMEM, "%s: out of memory reading metadata keys", f->path);
  for (uint64_t done = 0; done < klen;) {
    size_t n = klen - done < WIN ? (size_t)(klen - done) : WIN;
    LC_TRY(take(c, kv->key + done, n, what));
    done += n;
  }
  kv->key[klen] = 0;
  if (strlen(kv->key) != klen)
    return lc_fail(LC_EFORMAT, "%s: the key of metadata entry %d ('%s') contains a NUL byte", f->path, idx,
                   disp(kv->key, strlen(kv->key), kb, sizeof kb));
  const char *K = disp(kv->key, (size_t)klen, kb, sizeof kb);
  uint32_t t;
  snprintf(what, sizeof what, "the value type of metadata '%s'", K);
  LC_TRY(take_u32(c, &t, what));
  if (t >= LC_GGUF_VTYPES)
    return lc_fail(LC_EFORMAT, "%s: metadata '%s' has unknown value type %u (GGUF has 0..12)", f->path, K, t);
  kv->type = (lc_gguf_vtype)t;
  if (t == LC_GGUF_STR) {
    snprintf(what, sizeof what, "the string value of metadata '%s'", K);
    LC_TRY(string_len(c, &kv->len, what));
    kv->off = c->pos;
    return skip(c, kv->len, what);
  }
  if (t == LC_GGUF_ARR) {
    const uint64_t start = c->pos;
    LC_TRY(skip_value(c, LC_GGUF_ARR, 0, K));
    unsigned char h[12];
    LC_TRY(src_read(f, start, h, 12));
    kv->atype = (lc_gguf_vtype)le32(h);
    kv->count = le64(h + 4);
    kv->off = start + 12;
    kv->len = c->pos - kv->off;
    return LC_OK;
  }
  unsigned char b[8] = {0};
  snprintf(what, sizeof what, "the %s value of metadata '%s'", vtype_names[t], K);
  LC_TRY(take(c, b, (size_t)vtype_size[t], what));
  switch (kv->type) {
  case LC_GGUF_U8: kv->u = b[0]; break;
  case LC_GGUF_I8: kv->i = (int8_t)b[0]; break;
  case LC_GGUF_U16: kv->u = le16(b); break;
  case LC_GGUF_I16: kv->i = (int16_t)le16(b); break;
  case LC_GGUF_U32: kv->u = le32(b); break;
  case LC_GGUF_I32: kv->i = (int32_t)le32(b); break;
  case LC_GGUF_U64: kv->u = le64(b); break;
  case LC_GGUF_I64: kv->i = (int64_t)le64(b); break;
  case LC_GGUF_BOOL: kv->i = b[0] != 0; break;
  case LC_GGUF_F32: kv->f = f32_of(le32(b)); break;
  case LC_GGUF_F64: {
    uint64_t u = le64(b);
    memcpy(&kv->f, &u, sizeof kv->f);
    break;
  }
  default: break;
  }
  return LC_OK;
}

static lc_status parse_tensor(cursor *c, lc_gguf_tensor *t, int idx) {
  lc_gguf_file *f = c->f;
  char what[160], nb[96];
  snprintf(what, sizeof what, "the name of tensor %d", idx);
  uint64_t len;
  LC_TRY(string_len(c, &len, what));
  if (len == 0) return lc_fail(LC_EFORMAT, "%s: tensor %d has an empty name", f->path, idx);
  if (len >= LC_GGUF_MAX_NAME) {
    char tmp[96];
    size_t n = len < sizeof tmp ? (size_t)len : sizeof tmp;
    LC_TRY(take(c, tmp, n, what));
    return lc_fail(LC_EFORMAT, "%s: the name of tensor %d ('%s') is %llu bytes, longer than the %d longctx accepts",
                   f->path, idx, disp(tmp, n, nb, sizeof nb), (unsigned long long)len, LC_GGUF_MAX_NAME - 1);
  }
  LC_TRY(take(c, t->name, (size_t)len, what));
  t->name[len] = 0;
  if (strlen(t->name) != len)
    return lc_fail(LC_EFORMAT, "%s: the name of tensor %d ('%s') contains a NUL byte", f->path, idx,
                   disp(t->name, strlen(t->name), nb, sizeof nb));
  const char *N = disp(t->name, (size_t)len, nb, sizeof nb);
  snprintf(what, sizeof what, "the shape of tensor '%s'", N);
  uint32_t nd;
  LC_TRY(take_u32(c, &nd, what));
  if (nd < 1 || nd > LC_GGUF_MAX_DIMS)
    return lc_fail(LC_EFORMAT, "%s: tensor '%s' has %u dimensions; GGUF tensors have 1 to %d", f->path, N, nd,
                   LC_GGUF_MAX_DIMS);
  t->n_dims = (int)nd;
  uint64_t numel = 1;
  for (int d = 0; d < LC_GGUF_MAX_DIMS; d++) {
    t->ne[d] = 1;
    if (d >= (int)nd) continue;
    LC_TRY(take_u64(c, &t->ne[d], what));
    if (t->ne[d] > ((uint64_t)1 << 62))
      return lc_fail(LC_EFORMAT, "%s: tensor '%s': dimension %d is %llu, absurdly large", f->path, N, d,
                     (unsigned long long)t->ne[d]);
    if (t->ne[d] && numel > ((uint64_t)1 << 62) / t->ne[d])
      return lc_fail(LC_EFORMAT, "%s: tensor '%s': its dimensions multiply to more than 2^62 elements", f->path, N);
    numel *= t->ne[d];
  }
  t->numel = (size_t)numel;
  uint32_t ty;
  snprintf(what, sizeof what, "the type of tensor '%s'", N);
  LC_TRY(take_u32(c, &ty, what));
  const type_info *ti = tinfo((int)ty);
  if (!ti)
    return lc_fail(LC_EFORMAT, "%s: tensor '%s' has unknown ggml type %u; longctx reads %s", f->path, N, ty,
                   lc_gguf_readable_names());
  t->type = (int)ty;
  if (t->ne[0] % (uint64_t)ti->block != 0)
    return lc_fail(LC_EFORMAT, "%s: tensor '%s' has rows of %llu elements, not a whole number of %s blocks (%d each)",
                   f->path, N, (unsigned long long)t->ne[0], ti->name, ti->block);
  t->nbytes = numel / (uint64_t)ti->block * (uint64_t)ti->bytes; // numel <= 2^62, bytes/block <= 292: no wrap
  if (numel / (uint64_t)ti->block > UINT64_MAX / (uint64_t)ti->bytes)
    return lc_fail(LC_EFORMAT, "%s: tensor '%s' is absurdly large", f->path, N);
  snprintf(what, sizeof what, "the offset of tensor '%s'", N);
  return take_u64(c, &t->offset, what);
}

static int cmp_kv(const void *a, const void *b) {
  return strcmp((*(lc_gguf_kv *const *)a)->key, (*(lc_gguf_kv *const *)b)->key);
}
static int cmp_t(const void *a, const void *b) {
  return strcmp((*(lc_gguf_tensor *const *)a)->name, (*(lc_gguf_tensor *const *)b)->name);
}

// Grows *arr (n used, *cap slots of sz bytes) by one slot, zeroed.
static lc_status grow(void **arr, int n, int *cap, size_t sz, const char *path) {
  if (n < *cap) return LC_OK;
  int nc = *cap ? *cap * 2 : 16;
  void *p = realloc(*arr, sz * (size_t)nc);
  if (!p) return lc_fail(LC_ENOMEM, "%s: out of memory reading the header", path);
  memset((char *)p + sz * (size_t)*cap, 0, sz * (size_t)(nc - *cap));
  *arr = p;
  *cap = nc;
  return LC_OK;
}

static lc_status parse(lc_gguf_file *f) {
  cursor *c = malloc(sizeof *c);
  if (!c) return lc_fail(LC_ENOMEM, "out of memory opening %s", f->path);
  memset(c, 0, sizeof *c);
  c->f = f;
  lc_status st = LC_OK;
#define TRY_(x)                          \
  do {                                   \
    if ((st = (x)) != LC_OK) goto done;  \
  } while (0)
  unsigned char head[24];
  if (f->size >= 4) TRY_(src_read(f, 0, head, 4));
  if (f->size >= 4 && memcmp(head, "GGUF", 4) != 0) {
    st = lc_fail(LC_EFORMAT, "%s: not a GGUF file (it starts with bytes %02x %02x %02x %02x, not \"GGUF\")", f->path,
                 head[0], head[1], head[2], head[3]);
    goto done;
  }
  if (f->size < 24) {
    st = lc_fail(LC_EFORMAT, "%s: truncated: %llu bytes, shorter than a GGUF header (24 bytes)", f->path,
                 (unsigned long long)f->size);
    goto done;
  }
  TRY_(take(c, head, 24, "the header"));
  f->version = le32(head + 4);
  if (f->version == 1) {
    st = lc_fail(LC_EFORMAT, "%s: GGUF version 1 (2023) is not supported: convert the model again with a current "
                 "llama.cpp (versions 2 and 3 are read)", f->path);
    goto done;
  }
  if (f->version != 2 && f->version != 3) {
    const uint32_t sw = __builtin_bswap32(f->version);
    if (sw >= 1 && sw <= 3)
      st = lc_fail(LC_EFORMAT, "%s: a big-endian GGUF file (version %u byte-swapped); longctx reads little-endian "
                   "GGUF only", f->path, sw);
    else
      st = lc_fail(LC_EFORMAT, "%s: GGUF version %u is not supported (versions 2 and 3 are read)", f->path, f->version);
    goto done;
  }
  const uint64_t n_t = le64(head + 8), n_kv = le64(head + 16);
  // Each metadata entry takes at least 14 bytes, each tensor info 33: counts beyond what
  // the file can hold are refused before anything is allocated for them.
  if (n_kv > remaining(c) / 14) {
    st = lc_fail(LC_EFORMAT, "%s: the header claims %llu metadata entries, more than a file of %llu bytes can hold; "
                 "the file is damaged", f->path, (unsigned long long)n_kv, (unsigned long long)f->size);
    goto done;
  }
  if (n_t > remaining(c) / 33) {
    st = lc_fail(LC_EFORMAT, "%s: the header claims %llu tensors, more than a file of %llu bytes can hold; the file "
                 "is damaged", f->path, (unsigned long long)n_t, (unsigned long long)f->size);
    goto done;
  }
  if (n_kv > 1000000 || n_t > 1000000) {
    st = lc_fail(LC_EFORMAT, "%s: the header claims %llu metadata entries and %llu tensors; longctx reads at most "
                 "1000000 of each", f->path, (unsigned long long)n_kv, (unsigned long long)n_t);
    goto done;
  }
  int cap = 0;
  f->alignment = 32;
  for (uint64_t i = 0; i < n_kv; i++) {
    TRY_(grow((void **)&f->kv, f->n_kv, &cap, sizeof *f->kv, f->path));
    lc_gguf_kv *kv = &f->kv[f->n_kv++];
    TRY_(parse_kv(c, kv, (int)i));
    if (!strcmp(kv->key, "general.alignment")) {
      int64_t a = 0;
      TRY_(lc_gguf_kv_int(f, kv, &a));
      if (a <= 0 || a > (1 << 30) || (a & (a - 1)) != 0) {
        st = lc_fail(LC_EFORMAT, "%s: general.alignment is %lld; it must be a power of two", f->path, (long long)a);
        goto done;
      }
      f->alignment = (uint64_t)a;
    }
  }
  cap = 0;
  for (uint64_t i = 0; i < n_t; i++) {
    TRY_(grow((void **)&f->tensors, f->n, &cap, sizeof *f->tensors, f->path));
    TRY_(parse_tensor(c, &f->tensors[f->n++], (int)i));
  }
  // Lookup tables; names and keys are unique.
  f->kv_by_key_ = malloc(sizeof *f->kv_by_key_ * ((size_t)f->n_kv + 1));
  f->t_by_name_ = malloc(sizeof *f->t_by_name_ * ((size_t)f->n + 1));
  if (!f->kv_by_key_ || !f->t_by_name_) {
    st = lc_fail(LC_ENOMEM, "%s: out of memory reading the header", f->path);
    goto done;
  }
  char nb[96];
  for (int i = 0; i < f->n_kv; i++) f->kv_by_key_[i] = &f->kv[i];
  qsort(f->kv_by_key_, (size_t)f->n_kv, sizeof *f->kv_by_key_, cmp_kv);
  for (int i = 1; i < f->n_kv; i++)
    if (!strcmp(f->kv_by_key_[i - 1]->key, f->kv_by_key_[i]->key)) {
      st = lc_fail(LC_EFORMAT, "%s: metadata key '%s' appears twice", f->path,
                   disp(f->kv_by_key_[i]->key, strlen(f->kv_by_key_[i]->key), nb, sizeof nb));
      goto done;
    }
  for (int i = 0; i < f->n; i++) f->t_by_name_[i] = &f->tensors[i];
  qsort(f->t_by_name_, (size_t)f->n, sizeof *f->t_by_name_, cmp_t);
  for (int i = 1; i < f->n; i++)
    if (!strcmp(f->t_by_name_[i - 1]->name, f->t_by_name_[i]->name)) {
      st = lc_fail(LC_EFORMAT, "%s: tensor '%s' appears twice", f->path,
                   disp(f->t_by_name_[i]->name, strlen(f->t_by_name_[i]->name), nb, sizeof nb));
      goto done;
    }
  // The data region starts at the next multiple of the alignment.
  f->data_off = (c->pos + f->alignment - 1) / f->alignment * f->alignment;
  if (f->n > 0 && f->data_off > f->size) {
    st = lc_fail(LC_EFORMAT, "%s: truncated: the tensor data would start at offset %llu but the file has %llu bytes",
                 f->path, (unsigned long long)f->data_off, (unsigned long long)f->size);
    goto done;
  }
  const uint64_t data_len = f->data_off <= f->size ? f->size - f->data_off : 0;
  for (int i = 0; i < f->n; i++) {
    const lc_gguf_tensor *t = &f->tensors[i];
    const char *N = disp(t->name, strlen(t->name), nb, sizeof nb);
    if (t->offset % f->alignment != 0) {
      st = lc_fail(LC_EFORMAT, "%s: tensor '%s' starts at data offset %llu, not a multiple of the alignment %llu", f->path,
                   N, (unsigned long long)t->offset, (unsigned long long)f->alignment);
      goto done;
    }
    if (t->offset > data_len || t->nbytes > data_len - t->offset) {
      st = lc_fail(LC_EFORMAT, "%s: tensor '%s' (%llu bytes at data offset %llu) extends past the end of the file "
                   "(%llu data bytes); the file is truncated or damaged", f->path, N, (unsigned long long)t->nbytes,
                   (unsigned long long)t->offset, (unsigned long long)data_len);
      goto done;
    }
  }
done:
#undef TRY_
  free(c);
  return st;
}

static void reset(lc_gguf_file *f) {
  memset(f, 0, sizeof *f);
  f->fd_ = -1;
}

lc_status lc_gguf_open(lc_gguf_file *f, const char *path) {
  reset(f);
  snprintf(f->path, sizeof f->path, "%s", path);
  f->fd_ = open(path, O_RDONLY);
  if (f->fd_ < 0) return lc_fail(LC_EIO, "cannot open %s: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(f->fd_, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(f->fd_);
    f->fd_ = -1;
    return lc_fail(LC_EIO, "%s is not a regular file", path);
  }
  f->size = (uint64_t)sb.st_size;
  lc_status st = parse(f);
  if (st != LC_OK) lc_gguf_close(f);
  return st;
}

lc_status lc_gguf_open_mem(lc_gguf_file *f, const void *data, size_t len, const char *label) {
  reset(f);
  snprintf(f->path, sizeof f->path, "%s", label);
  f->mem_ = data ? data : (const unsigned char *)"";
  f->size = data ? len : 0;
  lc_status st = parse(f);
  if (st != LC_OK) lc_gguf_close(f);
  return st;
}

void lc_gguf_close(lc_gguf_file *f) {
  if (f->fd_ >= 0) close(f->fd_);
  for (int i = 0; i < f->n_kv; i++) free(f->kv[i].key);
  free(f->kv);
  free(f->tensors);
  free(f->kv_by_key_);
  free(f->t_by_name_);
  reset(f);
}

int lc_gguf_is_file(const char *path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  char m[4];
  ssize_t r = pread(fd, m, 4, 0);
  close(fd);
  return r == 4 && !memcmp(m, "GGUF", 4);
}

// ---------------------------------------------------------------- lookups and values

static int find_kv(const void *key, const void *e) { return strcmp((const char *)key, (*(lc_gguf_kv *const *)e)->key); }
static int find_t(const void *key, const void *e) { return strcmp((const char *)key, (*(lc_gguf_tensor *const *)e)->name); }

const lc_gguf_kv *lc_gguf_find_kv(const lc_gguf_file *f, const char *key) {
  if (!f->kv_by_key_) return NULL;
  lc_gguf_kv *const *p = bsearch(key, f->kv_by_key_, (size_t)f->n_kv, sizeof *f->kv_by_key_, find_kv);
  return p ? *p : NULL;
}

const lc_gguf_tensor *lc_gguf_find(const lc_gguf_file *f, const char *name) {
  if (!f->t_by_name_) return NULL;
  lc_gguf_tensor *const *p = bsearch(name, f->t_by_name_, (size_t)f->n, sizeof *f->t_by_name_, find_t);
  return p ? *p : NULL;
}

static int is_signed(lc_gguf_vtype t) { return t == LC_GGUF_I8 || t == LC_GGUF_I16 || t == LC_GGUF_I32 || t == LC_GGUF_I64; }
static int is_unsigned(lc_gguf_vtype t) { return t == LC_GGUF_U8 || t == LC_GGUF_U16 || t == LC_GGUF_U32 || t == LC_GGUF_U64; }

static lc_status wrong_type(const lc_gguf_file *f, const lc_gguf_kv *kv, const char *want) {
  char kb[96];
  return lc_fail(LC_EFORMAT, "%s: metadata '%s' is of type %s, not %s", f->path, disp(kv->key, strlen(kv->key), kb, sizeof kb),
                 lc_gguf_vtype_name(kv->type), want);
}

lc_status lc_gguf_kv_int(const lc_gguf_file *f, const lc_gguf_kv *kv, int64_t *out) {
  if (is_signed(kv->type)) {
    *out = kv->i;
    return LC_OK;
  }
  if (is_unsigned(kv->type)) {
    char kb[96];
    if (kv->u > (uint64_t)INT64_MAX)
      return lc_fail(LC_EFORMAT, "%s: metadata '%s' is %llu, too large", f->path, disp(kv->key, strlen(kv->key), kb, sizeof kb),
                     (unsigned long long)kv->u);
    *out = (int64_t)kv->u;
    return LC_OK;
  }
  return wrong_type(f, kv, "an integer");
}

lc_status lc_gguf_kv_num(const lc_gguf_file *f, const lc_gguf_kv *kv, double *out) {
  if (kv->type == LC_GGUF_F32 || kv->type == LC_GGUF_F64) *out = kv->f;
  else if (is_signed(kv->type)) *out = (double)kv->i;
  else if (is_unsigned(kv->type)) *out = (double)kv->u;
  else return wrong_type(f, kv, "a number");
  return LC_OK;
}

lc_status lc_gguf_kv_bool(const lc_gguf_file *f, const lc_gguf_kv *kv, int *out) {
  if (kv->type != LC_GGUF_BOOL) return wrong_type(f, kv, "a bool");
  *out = (int)kv->i;
  return LC_OK;
}

static lc_status read_str_at(lc_gguf_file *f, const lc_gguf_kv *kv, uint64_t off, uint64_t len, char *buf, size_t cap) {
  char kb[96];
  if (cap == 0 || len > cap - 1)
    return lc_fail(LC_EFORMAT, "%s: a string of metadata '%s' is %llu bytes, longer than the %zu longctx takes there",
                   f->path, disp(kv->key, strlen(kv->key), kb, sizeof kb), (unsigned long long)len, cap ? cap - 1 : 0);
  LC_TRY(src_read(f, off, buf, (size_t)len));
  buf[len] = 0;
  if (strlen(buf) != len)
    return lc_fail(LC_EFORMAT, "%s: a string of metadata '%s' contains a NUL byte", f->path,
                   disp(kv->key, strlen(kv->key), kb, sizeof kb));
  return LC_OK;
}

lc_status lc_gguf_kv_str(lc_gguf_file *f, const lc_gguf_kv *kv, char *buf, size_t cap) {
  if (kv->type != LC_GGUF_STR) return wrong_type(f, kv, "a string");
  return read_str_at(f, kv, kv->off, kv->len, buf, cap);
}

static lc_status arr_index(const lc_gguf_file *f, const lc_gguf_kv *kv, uint64_t i) {
  char kb[96];
  if (kv->type != LC_GGUF_ARR) return wrong_type(f, kv, "an array");
  if (i >= kv->count)
    return lc_fail(LC_EINVAL, "%s: metadata '%s' has %llu elements; element %llu asked for", f->path,
                   disp(kv->key, strlen(kv->key), kb, sizeof kb), (unsigned long long)kv->count, (unsigned long long)i);
  return LC_OK;
}

lc_status lc_gguf_arr_num(lc_gguf_file *f, const lc_gguf_kv *kv, uint64_t i, double *out) {
  LC_TRY(arr_index(f, kv, i));
  const lc_gguf_vtype t = kv->atype;
  char kb[96];
  if (!vtype_size[t] || t == LC_GGUF_BOOL)
    return lc_fail(LC_EFORMAT, "%s: metadata '%s' is an array of %s, not of numbers", f->path,
                   disp(kv->key, strlen(kv->key), kb, sizeof kb), vtype_names[t]);
  unsigned char b[8] = {0};
  LC_TRY(src_read(f, kv->off + i * (uint64_t)vtype_size[t], b, (size_t)vtype_size[t]));
  switch (t) {
  case LC_GGUF_U8: *out = b[0]; break;
  case LC_GGUF_I8: *out = (int8_t)b[0]; break;
  case LC_GGUF_U16: *out = le16(b); break;
  case LC_GGUF_I16: *out = (int16_t)le16(b); break;
  case LC_GGUF_U32: *out = le32(b); break;
  case LC_GGUF_I32: *out = (int32_t)le32(b); break;
  case LC_GGUF_U64: *out = (double)le64(b); break;
  case LC_GGUF_I64: *out = (double)(int64_t)le64(b); break;
  case LC_GGUF_F32: *out = f32_of(le32(b)); break;
  default: {
    uint64_t u = le64(b);
    memcpy(out, &u, sizeof *out);
  }
  }
  return LC_OK;
}

lc_status lc_gguf_arr_str(lc_gguf_file *f, const lc_gguf_kv *kv, uint64_t i, char *buf, size_t cap) {
  LC_TRY(arr_index(f, kv, i));
  char kb[96];
  if (kv->atype != LC_GGUF_STR)
    return lc_fail(LC_EFORMAT, "%s: metadata '%s' is an array of %s, not of strings", f->path,
                   disp(kv->key, strlen(kv->key), kb, sizeof kb), vtype_names[kv->atype]);
  uint64_t off = kv->off; // the lengths were checked at open
  unsigned char b[8] = {0};
  for (uint64_t k = 0; k < i; k++) {
    LC_TRY(src_read(f, off, b, 8));
    off += 8 + le64(b);
  }
  LC_TRY(src_read(f, off, b, 8));
  return read_str_at(f, kv, off + 8, le64(b), buf, cap);
}

// ---------------------------------------------------------------- dequantization
// (the block kernels: core/dequant.c)

static float h2f(const unsigned char *b) { return lc_f16_to_f32(le16(b)); }

lc_status lc_gguf_read_raw(lc_gguf_file *f, const lc_gguf_tensor *t, uint64_t byte_off, size_t nbytes, void *dst) {
  if (byte_off > t->nbytes || nbytes > t->nbytes - byte_off)
    return lc_fail(LC_EINVAL, "%s: bytes [%llu, %llu) of tensor '%.80s' asked for; it has %llu", f->path,
                   (unsigned long long)byte_off, (unsigned long long)(byte_off + nbytes), t->name,
                   (unsigned long long)t->nbytes);
  return src_read(f, f->data_off + t->offset + byte_off, dst, nbytes);
}

lc_dtype lc_gguf_type_dtype(int type) {
  switch (type) {
  case LC_GGML_F32: return LC_DT_F32;
  case LC_GGML_F16: return LC_DT_F16;
  case LC_GGML_BF16: return LC_DT_BF16;
  case LC_GGML_Q8_0: return LC_DT_Q8_0;
  case LC_GGML_Q4_0: return LC_DT_Q4_0;
  case LC_GGML_Q4_1: return LC_DT_Q4_1;
  case LC_GGML_Q5_0: return LC_DT_Q5_0;
  case LC_GGML_Q5_1: return LC_DT_Q5_1;
  case LC_GGML_Q4_K: return LC_DT_Q4_K;
  case LC_GGML_Q5_K: return LC_DT_Q5_K;
  case LC_GGML_Q6_K: return LC_DT_Q6_K;
  default: return LC_DT_COUNT;
  }
}

void lc_gguf_dequant_blocks(int type, const unsigned char *src, size_t nb, float *dst) {
  const type_info *ti = tinfo(type);
  if (!ti || !ti->readable) return;
  const size_t bs = (size_t)ti->block, ts = (size_t)ti->bytes;
  for (size_t b = 0; b < nb; b++) {
    const unsigned char *x = src + b * ts;
    float *y = dst + b * bs;
    switch (type) {
    case LC_GGML_F32: *y = f32_of(le32(x)); break;
    case LC_GGML_F16: *y = h2f(x); break;
    case LC_GGML_BF16: *y = lc_bf16_to_f32(le16(x)); break;
    default: lc_dequant(lc_gguf_type_dtype(type), x, bs, y); break;
    }
  }
}

#define RAW_CHUNK ((size_t)1 << 20) // bytes of raw blocks read at once

lc_status lc_gguf_read_f32(lc_gguf_file *f, const lc_gguf_tensor *t, size_t first, size_t n, float *dst) {
  char nb[96];
  const char *N = disp(t->name, strlen(t->name), nb, sizeof nb);
  if (first > t->numel || n > t->numel - first)
    return lc_fail(LC_EINVAL, "%s: elements [%zu, %zu) of tensor '%s' asked for; it has %zu", f->path, first, first + n, N,
                   t->numel);
  const type_info *ti = tinfo(t->type);
  if (!ti || !ti->readable)
    return lc_fail(LC_EFORMAT, "%s: tensor '%s' is %s, which longctx cannot dequantize (it reads %s): quantize the model "
                   "to one of those (llama-quantize) or use its F16/BF16 file", f->path, N, lc_gguf_type_name(t->type),
                   lc_gguf_readable_names());
  if (n == 0) return LC_OK;
  const size_t bs = (size_t)ti->block, ts = (size_t)ti->bytes;
  const size_t b0 = first / bs, b1 = (first + n - 1) / bs + 1; // blocks [b0, b1) cover the range
  const size_t per = RAW_CHUNK / ts;                           // blocks per read
  const uint64_t base = f->data_off + t->offset;
  unsigned char *raw = NULL;
  if (f->fd_ >= 0) {
    const size_t want = (b1 - b0 < per ? b1 - b0 : per) * ts;
    raw = malloc(want);
    if (!raw) return lc_fail(LC_ENOMEM, "%s: out of memory reading tensor '%s'", f->path, N);
  }
  float edge[256];
  lc_status st = LC_OK;
  for (size_t b = b0; b < b1 && st == LC_OK; b += per) {
    const size_t nbk = b1 - b < per ? b1 - b : per;
    const unsigned char *src;
    if (raw) {
      st = src_read(f, base + (uint64_t)b * ts, raw, nbk * ts);
      src = raw;
    } else {
      src = f->mem_ + base + (uint64_t)b * ts; // inside the file: checked at open
    }
    if (st != LC_OK) break;
    for (size_t k = 0; k < nbk;) {
      const size_t e0 = (b + k) * bs; // first element of this block
      if (e0 >= first && e0 + bs <= first + n) {
        // A run of whole blocks straight into dst.
        size_t run = 1;
        while (k + run < nbk && (b + k + run) * bs + bs <= first + n) run++;
        lc_gguf_dequant_blocks(t->type, src + k * ts, run, dst + (e0 - first));
        k += run;
      } else {
        lc_gguf_dequant_blocks(t->type, src + k * ts, 1, edge);
        const size_t lo = e0 < first ? first : e0, hi = e0 + bs < first + n ? e0 + bs : first + n;
        memcpy(dst + (lo - first), edge + (lo - e0), sizeof(float) * (hi - lo));
        k++;
      }
    }
  }
  free(raw);
  return st;
}
