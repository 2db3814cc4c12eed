// libFuzzer target: arbitrary bytes through the GGUF reader (in memory). Opening must either
// succeed with a self-consistent file or fail with a one-line message; every tensor of a
// file that opened must be findable, inside the file and readable (any range), or refused
// with one line for a type that does not dequantize; every metadata value readable.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#include "io/gguf.h"

static void line_or_trap(void) {
  const char *m = lc_errmsg();
  if (!m[0] || strchr(m, '\n')) LC_FUZZ_TRAP(); // errors name the problem on one line
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lc_gguf_file f;
  if (lc_gguf_open_mem(&f, data, size, "fuzz") != LC_OK) {
    line_or_trap();
    return 0;
  }
  for (int i = 0; i < f.n; i++) {
    const lc_gguf_tensor *t = &f.tensors[i];
    if (f.data_off + t->offset + t->nbytes > size || t->offset % f.alignment) LC_FUZZ_TRAP();
    if (lc_gguf_find(&f, t->name) != t) LC_FUZZ_TRAP();
    float *buf = malloc(sizeof(float) * (t->numel + 1));
    lc_status st = lc_gguf_read_f32(&f, t, 0, t->numel, buf);
    if (st != LC_OK && lc_gguf_type_readable(t->type)) LC_FUZZ_TRAP();
    if (st != LC_OK) line_or_trap();
    if (t->numel > 2) (void)lc_gguf_read_f32(&f, t, t->numel / 3, t->numel / 2, buf); // an unaligned range
    if (lc_gguf_read_f32(&f, t, t->numel, 1, buf) == LC_OK) LC_FUZZ_TRAP();          // past the end
    free(buf);
  }
  for (int i = 0; i < f.n_kv; i++) {
    const lc_gguf_kv *kv = &f.kv[i];
    if (lc_gguf_find_kv(&f, kv->key) != kv) LC_FUZZ_TRAP();
    char s[32];
    double d;
    int64_t v;
    lc_status st = LC_OK;
    if (kv->type == LC_GGUF_STR) st = lc_gguf_kv_str(&f, kv, s, sizeof s);
    else if (kv->type == LC_GGUF_ARR && kv->count)
      st = kv->atype == LC_GGUF_STR ? lc_gguf_arr_str(&f, kv, kv->count - 1, s, sizeof s) : lc_gguf_arr_num(&f, kv, 0, &d);
    else if (kv->type != LC_GGUF_ARR) st = lc_gguf_kv_num(&f, kv, &d);
    if (st != LC_OK) line_or_trap();
    (void)lc_gguf_kv_int(&f, kv, &v);
  }
  lc_gguf_close(&f);
  return 0;
}
