#define _POSIX_C_SOURCE 200809L
#include "io/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/fsutil.h"

// ---------------------------------------------------------------- conversions

static int host_is_le(void) {
  const uint16_t x = 1;
  unsigned char c;
  memcpy(&c, &x, 1);
  return c == 1;
}

static uint64_t rd_le64(const unsigned char *b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
  return v;
}

// ---------------------------------------------------------------- helpers

// A name made safe for a one-line message: at most 80 bytes, control bytes as '?'.
static const char *disp(const char *s, char *buf, size_t cap) {
  size_t n = strlen(s), k = 0;
  for (size_t i = 0; i < n && k + 4 < cap && k < 80; i++)
    buf[k++] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
  if (k < n && k + 4 < cap) {
    memcpy(buf + k, "...", 3);
    k += 3;
  }
  buf[k] = 0;
  return buf;
}

static lc_status src_read(lc_st_file *f, unsigned long long off, void *buf, size_t len) {
  return lc_src_read(f->path, f->fd_, f->mem_, f->size_, off, buf, len);
}

static int cmp_name(const void *a, const void *b) {
  const lc_st_tensor *x = *(lc_st_tensor *const *)a, *y = *(lc_st_tensor *const *)b;
  return strcmp(x->name, y->name);
}

static int cmp_offsets(const void *a, const void *b) {
  const lc_st_tensor *x = *(lc_st_tensor *const *)a, *y = *(lc_st_tensor *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return 0;
}

// A JSON number that is a non-negative integer <= 2^53.
static int json_uint(const cJSON *j, unsigned long long *v) {
  if (!cJSON_IsNumber(j)) return 0;
  double d = j->valuedouble;
  if (!(d >= 0) || d > 9007199254740992.0 || d != floor(d)) return 0;
  *v = (unsigned long long)d;
  return 1;
}

// ---------------------------------------------------------------- reader

// JSON text must be UTF-8 without raw control characters inside strings (as the reference
// implementation's strict parser demands; cJSON alone would accept both). Returns the offset
// of the first offending byte, or -1.
static long header_text_problem(const unsigned char *h, size_t n, const char **why) {
  int in_str = 0;
  size_t i = 0;
  while (i < n) {
    unsigned char c = h[i];
    if (c < 0x80) {
      if (c == 0) {
        *why = "a NUL byte";
        return (long)i;
      }
      if (in_str && c < 0x20) {
        *why = "a raw control character inside a string";
        return (long)i;
      }
      if (in_str && c == '\\' && i + 1 < n && h[i + 1] < 0x80 && h[i + 1] != 0) {
        i += 2;
        continue;
      }
      if (c == '"') in_str = !in_str;
      i++;
      continue;
    }
    int len;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) len = 2, cp = c & 0x1fu;
    else if (c >= 0xe0 && c <= 0xef) len = 3, cp = c & 0x0fu;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, cp = c & 0x07u;
    else len = 0, cp = 0;
    int ok = len > 0 && i + (size_t)len <= n;
    for (int k = 1; ok && k < len; k++) {
      ok = (h[i + (size_t)k] & 0xc0) == 0x80;
      cp = cp << 6 | (h[i + (size_t)k] & 0x3fu);
    }
    if (ok && ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
               (cp >= 0xd800 && cp <= 0xdfff)))
      ok = 0;
    if (!ok) {
      *why = "invalid UTF-8";
      return (long)i;
    }
    i += (size_t)len;
  }
  return -1;
}

static lc_status parse_tensor(lc_st_file *f, const cJSON *c, lc_st_tensor *t,
                              unsigned long long data_len) {
  char nb[96];
  const char *P = f->path, *key = c->string;
  if (strlen(key) >= sizeof t->name)
    return lc_fail(LC_EFORMAT, "%s: tensor name '%s' is %zu bytes, longer than the 255 longctx "
                   "accepts", P, disp(key, nb, sizeof nb), strlen(key));
  snprintf(t->name, sizeof t->name, "%s", key);
  const char *N = disp(key, nb, sizeof nb);
  if (!cJSON_IsObject(c))
    return lc_fail(LC_EFORMAT, "%s: header entry '%s' is not an object with dtype, shape and "
                   "data_offsets", P, N);
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(c, "dtype");
  const cJSON *sh = cJSON_GetObjectItemCaseSensitive(c, "shape");
  const cJSON *of = cJSON_GetObjectItemCaseSensitive(c, "data_offsets");
  if (!dt || !sh || !of)
    return lc_fail(LC_EFORMAT, "%s: tensor '%s' is missing field '%s' (each tensor needs dtype, "
                   "shape and data_offsets)", P, N, !dt ? "dtype" : !sh ? "shape" : "data_offsets");
  if (!cJSON_IsString(dt))
    return lc_fail(LC_EFORMAT, "%s: tensor '%s': field dtype is not a string", P, N);
  if (!lc_dtype_from_name(dt->valuestring, &t->dtype)) {
    char db[96];
    return lc_fail(LC_EFORMAT, "%s: tensor '%s' has unknown dtype '%s' (longctx reads F32, BF16 "
                   "and F16; convert the file)", P, N, disp(dt->valuestring, db, sizeof db));
  }
  if (!cJSON_IsArray(sh))
    return lc_fail(LC_EFORMAT, "%s: tensor '%s': field shape is not an array of integers", P, N);
  int nd = cJSON_GetArraySize(sh);
  if (nd > LC_ST_MAX_DIMS)
    return lc_fail(LC_EFORMAT, "%s: tensor '%s' has %d dimensions; longctx reads at most %d", P, N,
                   nd, LC_ST_MAX_DIMS);
  t->ndim = nd;
  unsigned long long numel = 1;
  int k = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, sh) {
    unsigned long long d;
    if (!json_uint(it, &d))
      return lc_fail(LC_EFORMAT, "%s: tensor '%s': shape entry %d is not a non-negative integer", P,
                     N, k);
    t->shape[k++] = (long long)d;
    if (d != 0 && numel > (1ull << 62) / d)
      return lc_fail(LC_EFORMAT, "%s: tensor '%s': shape is absurdly large (more than 2^62 "
                     "elements)", P, N);
    numel *= d;
  }
  t->numel = (size_t)numel;
  if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2)
    return lc_fail(LC_EFORMAT, "%s: tensor '%s': data_offsets must be an array of two integers "
                   "[begin, end]", P, N);
  unsigned long long b, e;
  if (!json_uint(cJSON_GetArrayItem(of, 0), &b) || !json_uint(cJSON_GetArrayItem(of, 1), &e))
    return lc_fail(LC_EFORMAT, "%s: tensor '%s': data_offsets entries must be non-negative "
                   "integers", P, N);
  if (e < b)
    return lc_fail(LC_EFORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin",
                   P, N, b, e);
  if (e > data_len)
    return lc_fail(LC_EFORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] go beyond the data "
                   "region (%llu bytes); the file is truncated or the offsets are wrong", P, N, b,
                   e, data_len);
  unsigned long long span = e - b, es = lc_dtype_size(t->dtype);
  if (span % es != 0 || span / es != numel) {
    char shs[200];
    int m = snprintf(shs, sizeof shs, "[");
    for (int i = 0; i < nd && m < (int)sizeof shs - 24; i++)
      m += snprintf(shs + m, sizeof shs - (size_t)m, "%s%lld", i ? ", " : "", t->shape[i]);
    snprintf(shs + m, sizeof shs - (size_t)m, "]");
    return lc_fail(LC_EFORMAT, "%s: tensor '%s': dtype %s shape %s needs %llu elements x %d bytes "
                   "but data_offsets [%llu, %llu] span %llu bytes", P, N, lc_dtype_name(t->dtype), shs,
                   numel, (int)es, b, e, span);
  }
  t->begin = (size_t)b;
  t->end = (size_t)e;
  return LC_OK;
}

static lc_status parse_metadata(lc_st_file *f, const cJSON *c) {
  if (f->meta_)
    return lc_fail(LC_EFORMAT, "%s: header has \"__metadata__\" twice", f->path);
  if (!cJSON_IsObject(c))
    return lc_fail(LC_EFORMAT, "%s: \"__metadata__\" is not an object of strings", f->path);
  int n = cJSON_GetArraySize(c);
  f->meta_ = calloc((size_t)n * 2 + 1, sizeof(char *));
  if (!f->meta_) return lc_fail(LC_ENOMEM, "%s: out of memory reading the metadata", f->path);
  const cJSON *it;
  cJSON_ArrayForEach(it, c) {
    char nb[96];
    if (!cJSON_IsString(it))
      return lc_fail(LC_EFORMAT, "%s: \"__metadata__\" value of '%s' is not a string", f->path,
                     disp(it->string, nb, sizeof nb));
    char *k = strdup(it->string), *v = strdup(it->valuestring);
    f->meta_[2 * f->n_meta_] = k;
    f->meta_[2 * f->n_meta_ + 1] = v;
    f->n_meta_++;
    if (!k || !v) return lc_fail(LC_ENOMEM, "%s: out of memory reading the metadata", f->path);
  }
  return LC_OK;
}

static lc_status parse_header(lc_st_file *f) {
  const char *P = f->path;
  if (f->size_ < 8)
    return lc_fail(LC_EFORMAT, "%s: file is %llu bytes, too short for safetensors (it starts with "
                   "an 8-byte header length); the file is truncated or not safetensors", P, f->size_);
  unsigned char lb[8];
  LC_TRY(src_read(f, 0, lb, 8));
  unsigned long long hn = rd_le64(lb);
  if (hn > LC_ST_MAX_HEADER)
    return lc_fail(LC_EFORMAT, "%s: header length %llu is absurd (limit %llu bytes); the file is "
                   "corrupt or not safetensors", P, hn, LC_ST_MAX_HEADER);
  if (hn > f->size_ - 8)
    return lc_fail(LC_EFORMAT, "%s: header length %llu goes beyond the end of the file (%llu bytes "
                   "follow the length field); the file is truncated", P, hn, f->size_ - 8);
  f->data_off_ = 8 + hn;
  unsigned long long data_len = f->size_ - f->data_off_;
  char *hdr = malloc((size_t)hn + 1);
  if (!hdr) return lc_fail(LC_ENOMEM, "%s: out of memory reading a %llu-byte header", P, hn);
  lc_status st = src_read(f, 8, hdr, (size_t)hn);
  if (st != LC_OK) {
    free(hdr);
    return st;
  }
  hdr[hn] = 0;
  const char *why = NULL;
  long bad = header_text_problem((const unsigned char *)hdr, (size_t)hn, &why);
  if (bad >= 0) {
    free(hdr);
    return lc_fail(LC_EFORMAT, "%s: header is not valid JSON text: %s at byte %ld of %llu; the "
                   "file is corrupt or not safetensors", P, why, bad, hn);
  }
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(hdr, (size_t)hn, &end, 0);
  if (!root) {
    long at = end ? (long)(end - hdr) : 0;
    free(hdr);
    return lc_fail(LC_EFORMAT, "%s: header is not valid JSON (error near byte %ld of %llu); the "
                   "file is corrupt or not safetensors", P, at, hn);
  }
  for (const char *p = end; p < hdr + hn; p++) {
    if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') continue;
    long at = (long)(p - hdr);
    cJSON_Delete(root);
    free(hdr);
    return lc_fail(LC_EFORMAT, "%s: header has bytes other than padding spaces after its JSON "
                   "object (at byte %ld of %llu); the file is corrupt", P, at, hn);
  }
  free(hdr);
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return lc_fail(LC_EFORMAT, "%s: header is JSON but not an object of tensors; the file is not "
                   "safetensors", P);
  }
  int nc = cJSON_GetArraySize(root);
  f->tensors = calloc((size_t)nc + 1, sizeof *f->tensors);
  f->by_name_ = calloc((size_t)nc + 1, sizeof *f->by_name_);
  lc_st_tensor **by_off = calloc((size_t)nc + 1, sizeof *by_off);
  if (!f->tensors || !f->by_name_ || !by_off) {
    free(by_off);
    cJSON_Delete(root);
    return lc_fail(LC_ENOMEM, "%s: out of memory for %d header entries", P, nc);
  }
  st = LC_OK;
  const cJSON *c;
  cJSON_ArrayForEach(c, root) {
    if (!strcmp(c->string, "__metadata__")) {
      st = parse_metadata(f, c);
    } else {
      lc_st_tensor *t = &f->tensors[f->n];
      st = parse_tensor(f, c, t, data_len);
      if (st == LC_OK) {
        f->by_name_[f->n] = t;
        by_off[f->n] = t;
        f->n++;
      }
    }
    if (st != LC_OK) break;
  }
  cJSON_Delete(root);
  if (st != LC_OK) {
    free(by_off);
    return st;
  }
  qsort(f->by_name_, (size_t)f->n, sizeof *f->by_name_, cmp_name);
  for (int i = 1; i < f->n; i++) {
    if (strcmp(f->by_name_[i - 1]->name, f->by_name_[i]->name) != 0) continue;
    char nb[96];
    free(by_off);
    return lc_fail(LC_EFORMAT, "%s: tensor name '%s' appears twice in the header", P,
                   disp(f->by_name_[i]->name, nb, sizeof nb));
  }
  // The tensors must tile the data region exactly, in offset order.
  qsort(by_off, (size_t)f->n, sizeof *by_off, cmp_offsets);
  unsigned long long pos = 0;
  const lc_st_tensor *prev = NULL;
  for (int i = 0; i < f->n; i++) {
    const lc_st_tensor *t = by_off[i];
    char nb[96], pb[96];
    if (t->begin < pos) {
      st = lc_fail(LC_EFORMAT, "%s: tensors '%s' and '%s' overlap (data_offsets [%zu, %zu] and "
                   "[%zu, %zu]); the file is corrupt", P, disp(prev->name, pb, sizeof pb),
                   disp(t->name, nb, sizeof nb), prev->begin, prev->end, t->begin, t->end);
      break;
    }
    if (t->begin > pos) {
      st = lc_fail(LC_EFORMAT, "%s: data region has a gap: bytes [%llu, %zu) before tensor '%s' "
                   "belong to no tensor (data_offsets must cover the data in order)", P, pos,
                   t->begin, disp(t->name, nb, sizeof nb));
      break;
    }
    pos = t->end;
    prev = t;
  }
  free(by_off);
  if (st != LC_OK) return st;
  if (pos != data_len)
    return lc_fail(LC_EFORMAT, "%s: the data region is %llu bytes but the tensors cover only %llu: "
                   "data_offsets do not cover the data (trailing bytes or wrong offsets)", P,
                   data_len, pos);
  return LC_OK;
}

static void st_init(lc_st_file *f, const char *label) {
  memset(f, 0, sizeof *f);
  f->fd_ = -1;
  snprintf(f->path, sizeof f->path, "%s", label ? label : "(memory)");
}

lc_status lc_st_open(lc_st_file *f, const char *path) {
  st_init(f, path);
  if (strlen(path) >= sizeof f->path)
    return lc_fail(LC_EINVAL, "safetensors path too long (limit %zu bytes): %.100s...",
                   sizeof f->path - 1, path);
  f->fd_ = open(path, O_RDONLY);
  if (f->fd_ < 0)
    return lc_fail(LC_EIO, "cannot open %s (%s); give an existing safetensors file", path,
                   strerror(errno));
  struct stat s;
  if (fstat(f->fd_, &s) != 0 || !S_ISREG(s.st_mode)) {
    lc_st_close(f);
    return lc_fail(LC_EIO, "%s is not a regular file; give a safetensors file", path);
  }
  f->size_ = (unsigned long long)s.st_size;
  lc_status st = parse_header(f);
  if (st != LC_OK) lc_st_close(f);
  return st;
}

lc_status lc_st_open_mem(lc_st_file *f, const void *data, size_t len, const char *label) {
  st_init(f, label);
  if (!data && len) return lc_fail(LC_EINVAL, "%s: NULL data of %zu bytes", f->path, len);
  static const unsigned char empty[1];
  f->mem_ = data ? data : empty;
  f->size_ = len;
  lc_status st = parse_header(f);
  if (st != LC_OK) lc_st_close(f);
  return st;
}

static int find_cmp(const void *key, const void *elem) {
  return strcmp((const char *)key, (*(lc_st_tensor *const *)elem)->name);
}

const lc_st_tensor *lc_st_find(const lc_st_file *f, const char *name) {
  if (!f->by_name_ || f->n == 0) return NULL;
  lc_st_tensor **p = bsearch(name, f->by_name_, (size_t)f->n, sizeof *f->by_name_, find_cmp);
  return p ? *p : NULL;
}

const char *lc_st_meta(const lc_st_file *f, const char *key) {
  for (int i = 0; i < f->n_meta_; i++)
    if (!strcmp(f->meta_[2 * i], key)) return f->meta_[2 * i + 1];
  return NULL;
}

lc_status lc_st_read_f32(lc_st_file *f, const lc_st_tensor *t, float *dst, size_t n_elems) {
  char nb[96];
  if (t && t >= f->tensors && t < f->tensors + f->n && n_elems != t->numel)
    return lc_fail(LC_EINVAL, "%s: tensor '%s' has %zu elements but the destination holds %zu",
                   f->path, disp(t->name, nb, sizeof nb), t->numel, n_elems);
  return lc_st_read_f32_part(f, t, 0, dst, n_elems);
}

lc_status lc_st_read_f32_part(lc_st_file *f, const lc_st_tensor *t, size_t first, float *dst, size_t n_elems) {
  char nb[96];
  if (!t || t < f->tensors || t >= f->tensors + f->n)
    return lc_fail(LC_EINVAL, "%s: lc_st_read_f32 was given a tensor of another file", f->path);
  const char *N = disp(t->name, nb, sizeof nb);
  if (first > t->numel || n_elems > t->numel - first)
    return lc_fail(LC_EINVAL, "%s: elements [%zu, %zu) of tensor '%s' are outside its %zu", f->path, first,
                   first + n_elems, N, t->numel);
  if (!lc_dtype_is_float(t->dtype))
    return lc_fail(LC_EFORMAT, "%s: tensor '%s' has dtype %s; longctx reads F32, BF16 and F16 "
                   "only: convert the checkpoint to one of those", f->path, N, lc_dtype_name(t->dtype));
  unsigned long long off = f->data_off_ + t->begin + (unsigned long long)first * lc_dtype_size(t->dtype);
  if (t->dtype == LC_DT_F32) {
    LC_TRY(src_read(f, off, dst, n_elems * sizeof(float)));
    if (!host_is_le()) {
      for (size_t i = 0; i < n_elems; i++) {
        unsigned char *b = (unsigned char *)&dst[i], x;
        x = b[0]; b[0] = b[3]; b[3] = x;
        x = b[1]; b[1] = b[2]; b[2] = x;
      }
    }
    return LC_OK;
  }
  unsigned char buf[1 << 15];
  const size_t per = sizeof buf / 2;
  for (size_t i = 0; i < n_elems; i += per) {
    size_t k = n_elems - i < per ? n_elems - i : per;
    LC_TRY(src_read(f, off + 2 * (unsigned long long)i, buf, 2 * k));
    if (t->dtype == LC_DT_BF16)
      for (size_t j = 0; j < k; j++) dst[i + j] = lc_bf16_to_f32((uint16_t)(buf[2 * j] | buf[2 * j + 1] << 8));
    else
      for (size_t j = 0; j < k; j++) dst[i + j] = lc_f16_to_f32((uint16_t)(buf[2 * j] | buf[2 * j + 1] << 8));
  }
  return LC_OK;
}

void lc_st_close(lc_st_file *f) {
  if (f->fd_ >= 0) close(f->fd_);
  f->fd_ = -1;
  free(f->tensors);
  free(f->by_name_);
  if (f->meta_) {
    for (int i = 0; i < 2 * f->n_meta_; i++) free(f->meta_[i]);
    free(f->meta_);
  }
  f->tensors = NULL;
  f->by_name_ = NULL;
  f->meta_ = NULL;
  f->n = f->n_meta_ = 0;
  f->mem_ = NULL;
}

// ---------------------------------------------------------------- writer

typedef struct {
  char *p;
  size_t n, cap;
  int oom;
} sbuf;

static void sb_put(sbuf *s, const char *x, size_t len) {
  if (s->oom) return;
  if (s->n + len + 1 > s->cap) {
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < s->n + len + 1) cap *= 2;
    char *q = realloc(s->p, cap);
    if (!q) {
      s->oom = 1;
      return;
    }
    s->p = q;
    s->cap = cap;
  }
  memcpy(s->p + s->n, x, len);
  s->n += len;
  s->p[s->n] = 0;
}

static void sb_printf(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *s, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (k > 0) sb_put(s, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

static void sb_json_str(sbuf *s, const char *x) {
  sb_put(s, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)x; *p; p++) {
    if (*p == '"' || *p == '\\') {
      char e[2] = {'\\', (char)*p};
      sb_put(s, e, 2);
    } else if (*p < 0x20) {
      sb_printf(s, "\\u%04x", *p);
    } else {
      sb_put(s, (const char *)p, 1);
    }
  }
  sb_put(s, "\"", 1);
}

static int cmp_cstr(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// Validates the entries (names, shapes; data when need_data) and builds the header.
static lc_status build_header(const char *path, const lc_st_entry *e, int n, const char *const *meta_kv,
                              int n_meta, int need_data, sbuf *h, size_t *numel) {
  char nb[96];
  if (n < 0 || n_meta < 0 || (n > 0 && !e) || (n_meta > 0 && !meta_kv))
    return lc_fail(LC_EINVAL, "%s: lc_st_write needs n >= 0 entries and n_meta >= 0 metadata pairs", path);
  for (int i = 0; i < 2 * n_meta; i++)
    if (!meta_kv[i]) return lc_fail(LC_EINVAL, "%s: metadata key or value %d is NULL", path, i);
  const char **names = calloc((size_t)n + 1, sizeof *names);
  if (!names) return lc_fail(LC_ENOMEM, "%s: out of memory", path);
  lc_status st = LC_OK;
  for (int i = 0; i < n && st == LC_OK; i++) {
    const lc_st_entry *x = &e[i];
    if (!x->name || !x->name[0] || strlen(x->name) >= 256 || !strcmp(x->name, "__metadata__")) {
      st = lc_fail(LC_EINVAL, "%s: entry %d has no usable tensor name (1..255 bytes, not "
                   "__metadata__)", path, i);
      break;
    }
    names[i] = x->name;
    if (x->ndim < 0 || x->ndim > LC_ST_MAX_DIMS) {
      st = lc_fail(LC_EINVAL, "%s: tensor '%s' has %d dimensions (0..8 allowed)", path,
                   disp(x->name, nb, sizeof nb), x->ndim);
      break;
    }
    unsigned long long ne = 1;
    for (int d = 0; d < x->ndim; d++) {
      unsigned long long v = (unsigned long long)x->shape[d];
      if (x->shape[d] < 0 || (v && ne > (1ull << 60) / v)) {
        st = lc_fail(LC_EINVAL, "%s: tensor '%s' has a negative or absurd shape", path,
                     disp(x->name, nb, sizeof nb));
        break;
      }
      ne *= v;
    }
    numel[i] = (size_t)ne;
    if (st == LC_OK && x->dtype != LC_DT_F32 && x->dtype != LC_DT_BF16)
      st = lc_fail(LC_EINVAL, "%s: tensor '%s' would be stored as %s; longctx writes F32 or BF16", path,
                   disp(x->name, nb, sizeof nb), lc_dtype_name(x->dtype));
    if (st == LC_OK && need_data && ne && !x->data)
      st = lc_fail(LC_EINVAL, "%s: tensor '%s' has no data", path, disp(x->name, nb, sizeof nb));
  }
  if (st == LC_OK) {
    qsort(names, (size_t)n, sizeof *names, cmp_cstr);
    for (int i = 1; i < n; i++)
      if (!strcmp(names[i - 1], names[i])) {
        st = lc_fail(LC_EINVAL, "%s: tensor name '%s' given twice", path, disp(names[i], nb, sizeof nb));
        break;
      }
  }
  free(names);
  if (st != LC_OK) return st;
  sb_put(h, "{", 1);
  int first = 1;
  if (n_meta > 0) {
    sb_put(h, "\"__metadata__\":{", 16);
    for (int i = 0; i < n_meta; i++) {
      if (i) sb_put(h, ",", 1);
      sb_json_str(h, meta_kv[2 * i]);
      sb_put(h, ":", 1);
      sb_json_str(h, meta_kv[2 * i + 1]);
    }
    sb_put(h, "}", 1);
    first = 0;
  }
  unsigned long long off = 0;
  for (int i = 0; i < n; i++) {
    if (!first) sb_put(h, ",", 1);
    first = 0;
    sb_json_str(h, e[i].name);
    sb_printf(h, ":{\"dtype\":\"%s\",\"shape\":[", lc_dtype_name(e[i].dtype));
    for (int d = 0; d < e[i].ndim; d++) sb_printf(h, "%s%lld", d ? "," : "", e[i].shape[d]);
    unsigned long long bytes = (unsigned long long)lc_bytes(e[i].dtype, numel[i]);
    sb_printf(h, "],\"data_offsets\":[%llu,%llu]}", off, off + bytes);
    off += bytes;
  }
  sb_put(h, "}", 1);
  while (!h->oom && h->n % 8 != 0) sb_put(h, " ", 1); // data starts 8-byte aligned
  if (h->oom) return lc_fail(LC_ENOMEM, "%s: out of memory building the header", path);
  return LC_OK;
}

// need_data: the entries' data is checked too (lc_st_write), so nothing is created for
// entries that cannot be written.
static lc_status writer_begin(lc_st_writer *w, const char *path, const lc_st_entry *e, int n,
                              const char *const *meta_kv, int n_meta, int need_data) {
  memset(w, 0, sizeof *w);
  w->af.fd = -1;
  w->numel = calloc((size_t)n + 1, sizeof *w->numel);
  w->dtype = calloc((size_t)n + 1, sizeof *w->dtype);
  if (!w->numel || !w->dtype) {
    lc_st_writer_abort(w);
    return lc_fail(LC_ENOMEM, "%s: out of memory", path);
  }
  w->n = n;
  sbuf h = {0};
  lc_status st = build_header(path, e, n, meta_kv, n_meta, need_data, &h, w->numel);
  for (int i = 0; i < n && st == LC_OK; i++) w->dtype[i] = e[i].dtype; // e checked by build_header
  unsigned char lb[8];
  for (int i = 0; i < 8; i++) lb[i] = (unsigned char)((unsigned long long)h.n >> (8 * i));
  if (st == LC_OK) st = lc_atomic_begin(&w->af, path);
  if (st == LC_OK) st = lc_atomic_write(&w->af, lb, 8);
  if (st == LC_OK) st = lc_atomic_write(&w->af, h.p, h.n);
  free(h.p);
  if (st != LC_OK) lc_st_writer_abort(w);
  return st;
}

lc_status lc_st_writer_put(lc_st_writer *w, const float *data, size_t numel) {
  if (w->next < w->n && (w->part != 0 || numel != w->numel[w->next])) {
    lc_status st = lc_fail(LC_EINVAL, "%s: tensor %d written with %zu elements, the header says %zu",
                           w->af.path, w->next, numel, w->numel[w->next]);
    lc_st_writer_abort(w);
    return st;
  }
  return lc_st_writer_put_part(w, data, numel);
}

// Little-endian bytes of data in the file's dtype (bf16 rounded to nearest even), through
// the writer's 1 MiB conversion buffer.
#define CONV_BYTES ((size_t)1 << 20)
static lc_status put_converted(lc_st_writer *w, const float *data, size_t numel, int bf16) {
  if (!w->conv && !(w->conv = malloc(CONV_BYTES))) return lc_fail(LC_ENOMEM, "%s: out of memory", w->af.path);
  unsigned char *buf = w->conv;
  const size_t es = bf16 ? 2 : 4, per = CONV_BYTES / es;
  lc_status st = LC_OK;
  for (size_t j = 0; j < numel && st == LC_OK; j += per) {
    const size_t k = numel - j < per ? numel - j : per;
    for (size_t q = 0; q < k; q++) {
      uint32_t u;
      if (bf16) u = lc_f32_to_bf16(data[j + q]);
      else memcpy(&u, &data[j + q], 4);
      for (size_t b = 0; b < es; b++) buf[es * q + b] = (unsigned char)(u >> (8 * b));
    }
    st = lc_atomic_write(&w->af, buf, es * k);
  }
  return st;
}

lc_status lc_st_writer_put_part(lc_st_writer *w, const float *data, size_t numel) {
  if (w->next >= w->n || numel > w->numel[w->next] - w->part) {
    lc_status st = lc_fail(LC_EINVAL, "%s: %zu more elements for tensor %d, which has %zu left", w->af.path,
                           numel, w->next, w->next < w->n ? w->numel[w->next] - w->part : 0);
    lc_st_writer_abort(w);
    return st;
  }
  const int bf16 = w->dtype[w->next] == LC_DT_BF16;
  lc_status st = !bf16 && host_is_le() ? lc_atomic_write(&w->af, data, 4 * numel) : put_converted(w, data, numel, bf16);
  w->part += numel;
  if (w->part == w->numel[w->next]) w->next++, w->part = 0;
  if (st != LC_OK) lc_st_writer_abort(w); // lc_atomic_write already removed the temporary
  return st;
}

lc_status lc_st_writer_commit(lc_st_writer *w) {
  lc_status st = w->next == w->n ? LC_OK
                                 : lc_fail(LC_EINVAL, "%s: %d of %d tensors written", w->af.path, w->next, w->n);
  if (st == LC_OK) st = lc_atomic_commit(&w->af);
  else lc_atomic_abort(&w->af);
  free(w->numel);
  free(w->dtype);
  free(w->conv);
  w->numel = NULL;
  w->dtype = NULL;
  w->conv = NULL;
  return st;
}

void lc_st_writer_abort(lc_st_writer *w) {
  lc_atomic_abort(&w->af);
  free(w->numel);
  free(w->dtype);
  free(w->conv);
  w->numel = NULL;
  w->dtype = NULL;
  w->conv = NULL;
}

lc_status lc_st_writer_begin(lc_st_writer *w, const char *path, const lc_st_entry *e, int n,
                             const char *const *meta_kv, int n_meta) {
  return writer_begin(w, path, e, n, meta_kv, n_meta, 0);
}

lc_status lc_st_write(const char *path, const lc_st_entry *e, int n, const char *const *meta_kv,
                      int n_meta) {
  lc_st_writer w;
  LC_TRY(writer_begin(&w, path, e, n, meta_kv, n_meta, 1)); // data present
  for (int i = 0; i < n; i++) LC_TRY(lc_st_writer_put(&w, e[i].data, w.numel[i]));
  return lc_st_writer_commit(&w);
}
