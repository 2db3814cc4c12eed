#define _POSIX_C_SOURCE 200809L
// safetensors reader/writer: exact round trips, BF16/F16 conversion of known bit patterns,
// every malformed-file class with its message, atomic writes that leave the old file alone.
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/fsutil.h"
#include "io/safetensors.h"
#include "testutil.h"

static char dir[256];

static uint32_t fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

// A file of: 8-byte length (hlen_override >= 0 replaces strlen(hdr)), header, data.
static void write_raw(const char *path, const char *hdr, long long hlen_override, const void *data,
                      size_t dlen) {
  FILE *f = fopen(path, "wb");
  unsigned long long n = hlen_override >= 0 ? (unsigned long long)hlen_override : strlen(hdr);
  unsigned char lb[8];
  for (int i = 0; i < 8; i++) lb[i] = (unsigned char)(n >> (8 * i));
  fwrite(lb, 1, 8, f);
  fwrite(hdr, 1, strlen(hdr), f);
  if (dlen) fwrite(data, 1, dlen, f);
  fclose(f);
}

static void test_conversions(void) {
  static const struct { uint16_t h; uint32_t f; } f16[] = {
      {0x0000, 0x00000000}, {0x8000, 0x80000000}, // +-0
      {0x0001, 0x33800000},                       // smallest subnormal 2^-24
      {0x03ff, 0x387fc000},                       // largest subnormal
      {0x8001, 0xb3800000},                       // negative subnormal
      {0x0200, 0x38000000},                       // 2^-15
      {0x0400, 0x38800000},                       // smallest normal 2^-14
      {0x3c00, 0x3f800000}, {0xc000, 0xc0000000}, // 1, -2
      {0x3555, 0x3eaaa000},                       // 0.333251953125
      {0x7bff, 0x477fe000},                       // 65504
      {0x7c00, 0x7f800000}, {0xfc00, 0xff800000}, // +-inf
      {0x7e00, 0x7fc00000}, {0x7c01, 0x7f802000}, // quiet / signalling NaN (payload kept)
      {0xfe00, 0xffc00000},
  };
  for (size_t i = 0; i < sizeof f16 / sizeof f16[0]; i++)
    CHECK(fbits(lc_f16_to_f32(f16[i].h)) == f16[i].f, "f16 %04x -> %08x, want %08x", f16[i].h,
          fbits(lc_f16_to_f32(f16[i].h)), f16[i].f);
  static const uint16_t bf[] = {0x0000, 0x8000, 0x0001, 0x007f, 0x0080, 0x3f80, 0x4049, 0xc2f7,
                                0x7f7f, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffff};
  for (size_t i = 0; i < sizeof bf / sizeof bf[0]; i++)
    CHECK(fbits(lc_bf16_to_f32(bf[i])) == (uint32_t)bf[i] << 16, "bf16 %04x -> %08x", bf[i],
          fbits(lc_bf16_to_f32(bf[i])));
  CHECK(lc_bf16_to_f32(0x4049) == 3.140625f && lc_f16_to_f32(0x3c00) == 1.0f, "values");
  // Every finite f16 equals its value computed independently in double.
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; h++) {
    int e = (h >> 10) & 31, mnt = h & 0x3ff;
    if (e == 31) continue;
    double v = e == 0 ? ldexp(mnt, -24) : ldexp(1024 + mnt, e - 25);
    if (h & 0x8000) v = -v;
    if ((double)lc_f16_to_f32((uint16_t)h) != v) bad++;
  }
  CHECK(bad == 0, "%d f16 values differ from the double reference", bad);
}

// lc_f32_to_bf16 against an independent rule: of the two bf16 values around x (found by
// truncation, in double), the nearer, the even one on a tie; beyond the largest finite
// bf16 + half an ulp, infinity. Random bit patterns (all exponents) plus edge cases.
static uint16_t bf16_reference(float x) {
  uint32_t u = fbits(x);
  uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1); // |lo| <= |x| < |hi|
  double dx = fabs((double)x), dl = fabs((double)lc_bf16_to_f32(lo));
  double dh = (lo & 0x7fff) == 0x7f7f ? ldexp(1.0, 128) : fabs((double)lc_bf16_to_f32(hi));
  if (dx - dl < dh - dx || (dx - dl == dh - dx && !(lo & 1))) return lo;
  return hi; // 0x7f7f + 1 = 0x7f80: infinity with x's sign
}

static void test_bf16_narrowing(void) {
  uint64_t r = 0x9e3779b97f4a7c15ull;
  int bad = 0, n = 0;
  for (int i = 0; i < 2000000; i++) {
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    uint32_t u = (uint32_t)r;
    if (i < 65536) u = (uint32_t)i << 16 | 0x8000u;   // every exact tie
    else if (i < 131072) u = (uint32_t)(i - 65536) << 16 | 0x7fffu; // just below a tie
    float x;
    memcpy(&x, &u, 4);
    if (x != x || isinf(x)) continue;
    n++;
    bad += lc_f32_to_bf16(x) != bf16_reference(x);
  }
  CHECK(n > 1900000 && bad == 0, "bf16 rounding: %d of %d differ from round-to-nearest-even", bad, n);
  CHECK(lc_f32_to_bf16(INFINITY) == 0x7f80 && lc_f32_to_bf16(-INFINITY) == 0xff80, "bf16 infinities");
  CHECK((lc_f32_to_bf16(NAN) & 0x7fc0) == 0x7fc0, "bf16 NaN stays NaN");
  uint32_t snan = 0x7f800001u; // a signalling NaN whose payload sits in the low bits only
  float fs;
  memcpy(&fs, &snan, 4);
  CHECK(lc_bf16_to_f32(lc_f32_to_bf16(fs)) != lc_bf16_to_f32(lc_f32_to_bf16(fs)), "payload-low NaN is not rounded to inf");
  CHECK(lc_f32_to_bf16(3.4e38f) == 0x7f80 && lc_f32_to_bf16(1.0f) == 0x3f80, "overflow to inf; 1.0 exact");
  // The dtype vocabulary names every safetensors dtype, both ways, with its size.
  static const char *names[] = {"F32", "BF16", "F16", "F64", "I32", "I64", "U8", "U64", "U32",
                                "I16", "U16", "I8", "BOOL", "F8_E4M3", "F8_E5M2", "F8_E8M0", "C64"};
  static const size_t sizes[] = {4, 2, 2, 8, 4, 8, 1, 8, 4, 2, 2, 1, 1, 1, 1, 1, 8};
  for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++) {
    lc_dtype t = LC_DT_COUNT;
    CHECK(lc_dtype_from_name(names[i], &t) && !strcmp(lc_dtype_name(t), names[i]) && lc_dtype_size(t) == sizes[i] &&
              lc_bytes(t, 3) == 3 * sizes[i],
          "dtype %s", names[i]);
  }
  lc_dtype t = LC_DT_F32;
  CHECK(!lc_dtype_from_name("F4", &t) && t == LC_DT_F32 && lc_dtype_size(LC_DT_COUNT) == 0, "unknown dtype");
}

// A BF16 entry is written rounded to nearest even, read back exactly, with the header's
// dtype and byte span of 2 per element; F32 entries in the same file stay exact. The
// tensor (1.2 MB in bf16) crosses the writer's 1 MiB conversion buffer.
static void test_bf16_write(void) {
  char path[400];
  snprintf(path, sizeof path, "%s/bf16.safetensors", dir);
  enum { N = 600000 };
  float *x = malloc(sizeof(float) * N), *got = malloc(sizeof(float) * N);
  uint64_t r = 12345;
  for (int i = 0; i < N; i++) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)((double)(r >> 11) / 9007199254740992.0 - 0.5) * (float)(1 << (i % 20));
  }
  lc_st_entry e[2] = {{.name = "w", .ndim = 2, .shape = {600, 1000}, .data = x, .dtype = LC_DT_BF16},
                      {.name = "f", .ndim = 1, .shape = {7}, .data = x}};
  CHECK(lc_st_write(path, e, 2, NULL, 0) == LC_OK, "write bf16: %s", lc_errmsg());
  struct stat sb;
  CHECK(stat(path, &sb) == 0, "stat");
  lc_st_file f;
  CHECK(lc_st_open(&f, path) == LC_OK, "open: %s", lc_errmsg());
  const lc_st_tensor *w = lc_st_find(&f, "w"), *ff = lc_st_find(&f, "f");
  CHECK(w && w->dtype == LC_DT_BF16 && w->end - w->begin == 2 * (size_t)N && ff && ff->dtype == LC_DT_F32,
        "bf16 header");
  CHECK(w && lc_st_read_f32(&f, w, got, N) == LC_OK, "read: %s", lc_errmsg());
  int bad = 0;
  for (int i = 0; i < N; i++) bad += fbits(got[i]) != (uint32_t)bf16_reference(x[i]) << 16;
  CHECK(bad == 0, "bf16 write: %d of %d elements not the rounded value", bad, N);
  CHECK(ff && lc_st_read_f32(&f, ff, got, 7) == LC_OK && !memcmp(got, x, 7 * sizeof(float)), "f32 beside bf16 exact");
  lc_st_close(&f);
  e[0].dtype = LC_DT_I64;
  CHECK(lc_st_write(path, e, 2, NULL, 0) == LC_EINVAL && strstr(lc_errmsg(), "I64"), "I64 refused: %s",
        lc_errmsg());
  free(x);
  free(got);
}

static void test_roundtrip(void) {
  char path[300];
  snprintf(path, sizeof path, "%s/rt.safetensors", dir);
  float a[6] = {1.5f, -0.0f, 1e-45f /* subnormal */, INFINITY, -INFINITY, 3.0f};
  uint32_t qnan = 0x7fc01234, snan = 0xff800001;
  memcpy(&a[5], &qnan, 4);
  float b[3] = {7, 8, 9}, s = 42.0f;
  memcpy(&b[1], &snan, 4);
  lc_st_entry e[4] = {
      {"w.matrix", 2, {2, 3}, a, LC_DT_F32},
      {"v \"quoted\\name\"", 1, {3}, b, LC_DT_F32},
      {"scalar", 0, {0}, &s, LC_DT_F32},
      {"empty", 2, {0, 5}, NULL, LC_DT_F32},
  };
  const char *meta[] = {"format", "pt", "note", "line1\nline2 \"q\""};
  CHECK(lc_st_write(path, e, 4, meta, 2) == LC_OK, "write: %s", lc_errmsg());
  lc_st_file f;
  CHECK(lc_st_open(&f, path) == LC_OK, "open: %s", lc_errmsg());
  CHECK(f.n == 4, "4 tensors, got %d", f.n);
  CHECK(f.data_off_ % 8 == 0, "data region 8-byte aligned (header padded), offset %llu", f.data_off_);
  const lc_st_tensor *t = lc_st_find(&f, "w.matrix");
  CHECK(t && t->dtype == LC_DT_F32 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3,
        "matrix entry");
  float got[6] = {0};
  CHECK(t && lc_st_read_f32(&f, t, got, 6) == LC_OK && !memcmp(got, a, sizeof a),
        "matrix bit-exact (NaN payload, -0, subnormal, inf)");
  t = lc_st_find(&f, "v \"quoted\\name\"");
  CHECK(t && lc_st_read_f32(&f, t, got, 3) == LC_OK && !memcmp(got, b, sizeof b), "escaped name");
  t = lc_st_find(&f, "scalar");
  CHECK(t && t->ndim == 0 && t->numel == 1 && lc_st_read_f32(&f, t, got, 1) == LC_OK && got[0] == 42,
        "scalar");
  t = lc_st_find(&f, "empty");
  CHECK(t && t->numel == 0 && t->begin == t->end && lc_st_read_f32(&f, t, got, 0) == LC_OK,
        "empty tensor");
  CHECK(lc_st_find(&f, "nope") == NULL && lc_st_find(&f, "w.matri") == NULL, "absent names");
  const char *fm = lc_st_meta(&f, "format"), *nt = lc_st_meta(&f, "note");
  CHECK(fm && !strcmp(fm, "pt") && nt && !strcmp(nt, "line1\nline2 \"q\"") && !lc_st_meta(&f, "x"),
        "metadata");
  t = lc_st_find(&f, "w.matrix");
  CHECK(lc_st_read_f32(&f, t, got, 5) == LC_EINVAL && strstr(lc_errmsg(), "6 elements") &&
            strstr(lc_errmsg(), "holds 5"), "count mismatch: %s", lc_errmsg());
  lc_st_tensor other = *t;
  CHECK(lc_st_read_f32(&f, &other, got, 6) == LC_EINVAL, "foreign tensor pointer");
  lc_st_close(&f);

  // The same bytes through the in-memory reader.
  char *buf;
  size_t len;
  CHECK(lc_read_file(path, 1 << 20, &buf, &len) == LC_OK, "read file");
  CHECK(lc_st_open_mem(&f, buf, len, "mem") == LC_OK && f.n == 4, "open_mem: %s", lc_errmsg());
  t = lc_st_find(&f, "w.matrix");
  CHECK(t && lc_st_read_f32(&f, t, got, 6) == LC_OK && !memcmp(got, a, sizeof a), "mem read");
  lc_st_close(&f);
  // Truncated copies of a valid file are errors, never crashes.
  int all_err = 1;
  for (size_t cut = 0; cut < len; cut++) {
    if (lc_st_open_mem(&f, buf, cut, "cut") == LC_OK) {
      all_err = 0;
      lc_st_close(&f);
    }
  }
  CHECK(all_err, "every truncation of a valid file is an error");
  FILE *tf = fopen(path, "wb");
  fwrite(buf, 1, len - 4, tf);
  fclose(tf);
  CHECK(lc_st_open(&f, path) == LC_EFORMAT && strstr(lc_errmsg(), path) &&
            strstr(lc_errmsg(), "truncated"), "truncated file: %s", lc_errmsg());
  free(buf);

  // Empty file set.
  CHECK(lc_st_write(path, NULL, 0, NULL, 0) == LC_OK, "write empty");
  CHECK(lc_st_open(&f, path) == LC_OK && f.n == 0, "open empty: %s", lc_errmsg());
  lc_st_close(&f);
}

static void test_half_dtypes(void) {
  char path[300];
  snprintf(path, sizeof path, "%s/half.safetensors", dir);
  // bf16 [2,2] at [0,8), f16 [3] at [8,14), I64 [1] at [14,22), f32 [1] at [22,26)
  uint16_t bf[4] = {0x3f80, 0x0001, 0xff80, 0x7fc1};
  uint16_t hf[3] = {0x0001, 0x7bff, 0xfc00};
  unsigned char data[26];
  for (int i = 0; i < 4; i++) { data[2 * i] = bf[i] & 0xff; data[2 * i + 1] = bf[i] >> 8; }
  for (int i = 0; i < 3; i++) { data[8 + 2 * i] = hf[i] & 0xff; data[8 + 2 * i + 1] = hf[i] >> 8; }
  memset(data + 14, 0, 8);
  float one = -2.5f;
  memcpy(data + 22, &one, 4);
  write_raw(path,
            "{\"b\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
            "\"h\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[8,14]},"
            "\"i\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[14,22]},"
            "\"f\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[22,26]}}",
            -1, data, sizeof data);
  lc_st_file f;
  CHECK(lc_st_open(&f, path) == LC_OK && f.n == 4, "open mixed dtypes: %s", lc_errmsg());
  float got[4];
  const lc_st_tensor *t = lc_st_find(&f, "b");
  CHECK(t && t->dtype == LC_DT_BF16 && lc_st_read_f32(&f, t, got, 4) == LC_OK, "bf16 read");
  for (int i = 0; i < 4; i++) CHECK(fbits(got[i]) == (uint32_t)bf[i] << 16, "bf16[%d] bits %08x", i, fbits(got[i]));
  t = lc_st_find(&f, "h");
  CHECK(t && t->dtype == LC_DT_F16 && lc_st_read_f32(&f, t, got, 3) == LC_OK, "f16 read");
  CHECK(fbits(got[0]) == 0x33800000 && got[1] == 65504.0f && got[2] == -INFINITY, "f16 values");
  t = lc_st_find(&f, "f");
  CHECK(t && lc_st_read_f32(&f, t, got, 1) == LC_OK && got[0] == -2.5f, "f32 after odd offset");
  t = lc_st_find(&f, "i");
  CHECK(t && !lc_dtype_is_float(t->dtype) && lc_st_read_f32(&f, t, got, 1) == LC_EFORMAT &&
            strstr(lc_errmsg(), "dtype I64") && strstr(lc_errmsg(), "'i'"),
        "I64 not convertible: %s", lc_errmsg());
  lc_st_close(&f);
  // A large BF16 tensor crosses the reader's chunk size.
  int n = 40000;
  unsigned char *big = malloc(2 * (size_t)n);
  for (int i = 0; i < n; i++) { big[2 * i] = (unsigned char)i; big[2 * i + 1] = (unsigned char)(i >> 8); }
  char hdr[200];
  snprintf(hdr, sizeof hdr, "{\"x\":{\"dtype\":\"BF16\",\"shape\":[%d],\"data_offsets\":[0,%d]}}", n, 2 * n);
  write_raw(path, hdr, -1, big, 2 * (size_t)n);
  float *bg = malloc(sizeof(float) * (size_t)n);
  CHECK(lc_st_open(&f, path) == LC_OK && lc_st_read_f32(&f, &f.tensors[0], bg, (size_t)n) == LC_OK,
        "big bf16: %s", lc_errmsg());
  int bad = 0;
  for (int i = 0; i < n; i++) bad += fbits(bg[i]) != (uint32_t)(i & 0xffff) << 16;
  CHECK(bad == 0, "big bf16: %d wrong", bad);
  lc_st_close(&f);
  free(big);
  free(bg);
}

typedef struct {
  const char *hdr;        // JSON header
  long long hlen;         // -1: strlen(hdr)
  size_t dlen;            // zero data bytes after the header
  lc_status st;
  const char *words[2];   // must appear in the message
} bad_case;

static void test_malformed(void) {
  char path[300];
  snprintf(path, sizeof path, "%s/bad.safetensors", dir);
#define T1 "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"
  static const bad_case cases[] = {
      {"", 1LL << 40, 0, LC_EFORMAT, {"absurd", "header length"}},
      {"{}", 1000, 0, LC_EFORMAT, {"beyond the end", "truncated"}},
      {"not json", -1, 0, LC_EFORMAT, {"not valid JSON", NULL}},
      {"", -1, 0, LC_EFORMAT, {"not valid JSON", NULL}},
      {"[1,2]", -1, 0, LC_EFORMAT, {"not an object", NULL}},
      {"{" T1 "} x", -1, 8, LC_EFORMAT, {"padding", NULL}},
      {"{\"a\":5}", -1, 0, LC_EFORMAT, {"'a'", "not an object"}},
      {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 8, LC_EFORMAT, {"missing field 'dtype'", "'a'"}},
      {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", -1, 8, LC_EFORMAT, {"missing field 'shape'", NULL}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", -1, 8, LC_EFORMAT, {"missing field 'data_offsets'", NULL}},
      {"{\"a\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 8, LC_EFORMAT, {"dtype is not a string", NULL}},
      {"{\"a\":{\"dtype\":\"Q4_K\",\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 8, LC_EFORMAT, {"unknown dtype 'Q4_K'", "'a'"}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", -1, 8, LC_EFORMAT, {"shape is not an array", NULL}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", -1, 8, LC_EFORMAT, {"shape entry 0", NULL}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,8]}}", -1, 8, LC_EFORMAT, {"shape entry 0", NULL}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", -1, 8, LC_EFORMAT, {"9 dimensions", NULL}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,8]}}", -1, 8, LC_EFORMAT, {"absurdly large", NULL}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", -1, 8, LC_EFORMAT, {"needs 3 elements", "span 8"}},
      {"{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,6]}}", -1, 6, LC_EFORMAT, {"[2, 2]", "span 6"}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", -1, 8, LC_EFORMAT, {"two integers", NULL}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,\"8\"]}}", -1, 8, LC_EFORMAT, {"non-negative integers", NULL}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", -1, 8, LC_EFORMAT, {"end before", NULL}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 4, LC_EFORMAT, {"beyond the data region", "truncated"}},
      {"{" T1 ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", -1, 12, LC_EFORMAT, {"overlap", "'b'"}},
      {"{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", -1, 8, LC_EFORMAT, {"gap", "[0, 4)"}},
      {"{" T1 ",\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]}}", -1, 16, LC_EFORMAT, {"gap", "'b'"}},
      {"{" T1 "}", -1, 12, LC_EFORMAT, {"cover only 8", "12 bytes"}},
      {"{" T1 "," T1 "}", -1, 8, LC_EFORMAT, {"'a' appears twice", NULL}},
      {"{\"__metadata__\":{\"k\":1}}", -1, 0, LC_EFORMAT, {"__metadata__", "not a string"}},
      {"{\"__metadata__\":[]}", -1, 0, LC_EFORMAT, {"__metadata__", "not an object"}},
      {"{\"__metadata__\":{},\"__metadata__\":{}}", -1, 0, LC_EFORMAT, {"__metadata__", "twice"}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const bad_case *c = &cases[i];
    unsigned char zeros[64] = {0};
    write_raw(path, c->hdr, c->hlen, zeros, c->dlen);
    lc_st_file f;
    lc_status st = lc_st_open(&f, path);
    const char *m = lc_errmsg();
    int ok = st == c->st && strstr(m, path) && (!c->words[0] || strstr(m, c->words[0])) &&
             (!c->words[1] || strstr(m, c->words[1])) && !strchr(m, '\n');
    CHECK(ok, "case %zu (%s): status %s, message: %s", i, c->hdr, lc_status_name(st), m);
    if (st == LC_OK) lc_st_close(&f);
  }
  // Too short for the length field; empty file.
  FILE *tf = fopen(path, "wb");
  fwrite("abc", 1, 3, tf);
  fclose(tf);
  lc_st_file f;
  CHECK(lc_st_open(&f, path) == LC_EFORMAT && strstr(lc_errmsg(), "too short") &&
            strstr(lc_errmsg(), "3 bytes"), "3-byte file: %s", lc_errmsg());
  CHECK(lc_st_open_mem(&f, "", 0, "empty") == LC_EFORMAT && strstr(lc_errmsg(), "too short"),
        "0 bytes: %s", lc_errmsg());
  // A name longer than 255 bytes.
  char hdr[600];
  char longname[301];
  memset(longname, 'n', 300);
  longname[300] = 0;
  snprintf(hdr, sizeof hdr, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}", longname);
  write_raw(path, hdr, -1, NULL, 0);
  CHECK(lc_st_open(&f, path) == LC_EFORMAT && strstr(lc_errmsg(), "300 bytes"), "long name: %s", lc_errmsg());
  // Control characters in names do not break the one-line message.
  write_raw(path, "{\"a\\nb\":{\"dtype\":\"X\",\"shape\":[0],\"data_offsets\":[0,0]}}", -1, NULL, 0);
  CHECK(lc_st_open(&f, path) == LC_EFORMAT && !strchr(lc_errmsg(), '\n') && strstr(lc_errmsg(), "a?b"),
        "one-line message: %s", lc_errmsg());
  // Missing file, directory.
  char missing[300];
  snprintf(missing, sizeof missing, "%s/none.safetensors", dir);
  CHECK(lc_st_open(&f, missing) == LC_EIO && strstr(lc_errmsg(), "cannot open") &&
            strstr(lc_errmsg(), missing), "missing: %s", lc_errmsg());
  CHECK(lc_st_open(&f, dir) == LC_EIO && strstr(lc_errmsg(), "not a regular file"), "dir: %s", lc_errmsg());
}

static int temp_files_in(const char *d) {
  DIR *dp = opendir(d);
  int n = 0;
  struct dirent *de;
  while (dp && (de = readdir(dp)))
    if (strstr(de->d_name, ".tmp.")) n++;
  if (dp) closedir(dp);
  return n;
}

static void test_writer_errors_and_atomicity(void) {
  char path[300], sub[300];
  snprintf(path, sizeof path, "%s/at.safetensors", dir);
  float x[4] = {1, 2, 3, 4}, y[4] = {9, 9, 9, 9};
  lc_st_entry good = {"x", 1, {4}, x, LC_DT_F32};
  CHECK(lc_st_write(path, &good, 1, NULL, 0) == LC_OK, "first version: %s", lc_errmsg());
  lc_st_entry dup[2] = {{"x", 1, {4}, y, LC_DT_F32}, {"x", 1, {4}, y, LC_DT_F32}};
  CHECK(lc_st_write(path, dup, 2, NULL, 0) == LC_EINVAL && strstr(lc_errmsg(), "twice"), "dup: %s", lc_errmsg());
  lc_st_entry nodata = {"x", 1, {4}, NULL, LC_DT_F32};
  CHECK(lc_st_write(path, &nodata, 1, NULL, 0) == LC_EINVAL && strstr(lc_errmsg(), "no data"), "nodata");
  lc_st_entry baddim = {"x", 9, {4}, y, LC_DT_F32};
  CHECK(lc_st_write(path, &baddim, 1, NULL, 0) == LC_EINVAL && strstr(lc_errmsg(), "dimensions"), "ndim");
  lc_st_entry negshape = {"x", 1, {-4}, y, LC_DT_F32};
  CHECK(lc_st_write(path, &negshape, 1, NULL, 0) == LC_EINVAL, "negative shape");
  lc_st_entry metaname = {"__metadata__", 1, {4}, y, LC_DT_F32};
  CHECK(lc_st_write(path, &metaname, 1, NULL, 0) == LC_EINVAL, "reserved name");

  // A write that fails part-way (file size limit -> EFBIG) leaves the old file and no temp.
  struct rlimit old, lim;
  getrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, SIG_IGN);
  lim = old;
  lim.rlim_cur = 4096;
  setrlimit(RLIMIT_FSIZE, &lim);
  float *big = calloc(10000, sizeof(float));
  lc_st_entry bige = {"x", 1, {10000}, big, LC_DT_F32};
  lc_status st = lc_st_write(path, &bige, 1, NULL, 0);
  setrlimit(RLIMIT_FSIZE, &old);
  free(big);
  CHECK(st == LC_EIO && strstr(lc_errmsg(), "cannot write") && strstr(lc_errmsg(), "untouched"),
        "failed mid-write: %s", lc_errmsg());
  lc_st_file f;
  float got[4];
  CHECK(lc_st_open(&f, path) == LC_OK && f.n == 1 &&
            lc_st_read_f32(&f, &f.tensors[0], got, 4) == LC_OK && !memcmp(got, x, sizeof x),
        "old file intact after a failed write: %s", lc_errmsg());
  lc_st_close(&f);
  CHECK(temp_files_in(dir) == 0, "no temp file left after a failed write");

  // The rename target is a (non-empty) directory: the rename fails, the directory stays.
  snprintf(sub, sizeof sub, "%s/isdir.safetensors", dir);
  char inner[320];
  snprintf(inner, sizeof inner, "%s/keep", sub);
  CHECK(lc_mkdir_p(sub) == LC_OK, "mkdir");
  CHECK(lc_write_file_atomic(inner, "k", 1) == LC_OK, "inner file");
  CHECK(lc_st_write(sub, &good, 1, NULL, 0) == LC_EIO && strstr(lc_errmsg(), "rename") &&
            strstr(lc_errmsg(), sub), "rename onto a directory: %s", lc_errmsg());
  CHECK(lc_is_dir(sub) && lc_is_file(inner), "directory untouched");
  CHECK(temp_files_in(dir) == 0, "no temp file left after a failed rename");
  // Directory missing.
  char nodir[300];
  snprintf(nodir, sizeof nodir, "%s/no/such/dir/x.safetensors", dir);
  CHECK(lc_st_write(nodir, &good, 1, NULL, 0) == LC_EIO && strstr(lc_errmsg(), "directory exists"),
        "missing directory: %s", lc_errmsg());
  // Overwrite of an existing file succeeds and replaces it.
  lc_st_entry ny = {"y", 1, {4}, y, LC_DT_F32};
  CHECK(lc_st_write(path, &ny, 1, NULL, 0) == LC_OK, "overwrite");
  CHECK(lc_st_open(&f, path) == LC_OK && lc_st_find(&f, "y") && !lc_st_find(&f, "x"), "replaced");
  lc_st_close(&f);
  CHECK(temp_files_in(dir) == 0, "no temp files at the end");
}

static void test_fsutil(void) {
  char p[300], q[300];
  snprintf(p, sizeof p, "%s/a/b//c/", dir);
  CHECK(lc_mkdir_p(p) == LC_OK && lc_is_dir(p), "mkdir -p: %s", lc_errmsg());
  CHECK(lc_mkdir_p(p) == LC_OK, "mkdir -p twice");
  snprintf(q, sizeof q, "%s/a/file", dir);
  CHECK(lc_write_file_atomic(q, "hello", 5) == LC_OK, "atomic text");
  char *d;
  size_t n;
  CHECK(lc_read_file(q, 100, &d, &n) == LC_OK && n == 5 && !strcmp(d, "hello"), "read back");
  free(d);
  CHECK(lc_read_file(q, 4, &d, &n) == LC_EFORMAT, "size limit");
  snprintf(p, sizeof p, "%s/a/file/sub", dir);
  CHECK(lc_mkdir_p(p) == LC_EIO, "mkdir through a file: %s", lc_errmsg());
  char j[16];
  CHECK(lc_path_join(j, sizeof j, "abc/", "d") == LC_OK && !strcmp(j, "abc/d"), "join");
  CHECK(lc_path_join(j, sizeof j, "abcdefghij", "klmnopq") == LC_EINVAL, "join too long");
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/lc_test_st_%ld", (long)getpid());
  lc_mkdir_p(dir);
  test_conversions();
  test_roundtrip();
  test_half_dtypes();
  test_bf16_narrowing();
  test_bf16_write();
  test_malformed();
  test_writer_errors_and_atomicity();
  test_fsutil();
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return lc_test_finish("test_safetensors");
}
