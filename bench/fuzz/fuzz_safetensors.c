// libFuzzer target: arbitrary bytes through the safetensors reader (in memory). Opening must
// either succeed with a self-consistent table or fail with a one-line message; every tensor
// of a file that opened must be findable and readable.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lc_st_file f;
  if (lc_st_open_mem(&f, data, size, "fuzz") != LC_OK) {
    const char *m = lc_errmsg();
    if (!m[0] || strchr(m, '\n')) __builtin_trap(); // errors name the problem on one line
    return 0;
  }
  for (int i = 0; i < f.n; i++) {
    const lc_st_tensor *t = &f.tensors[i];
    if (t->end < t->begin || t->end > size || lc_bytes(t->dtype, t->numel) != t->end - t->begin)
      __builtin_trap();
    const lc_st_tensor *g = lc_st_find(&f, t->name);
    if (!g || strcmp(g->name, t->name) != 0) __builtin_trap();
    float *buf = malloc(sizeof(float) * (t->numel + 1));
    lc_status st = lc_st_read_f32(&f, t, buf, t->numel);
    const int readable = t->dtype == LC_DT_F32 || t->dtype == LC_DT_BF16 || t->dtype == LC_DT_F16;
    if (st != LC_OK && readable) __builtin_trap();
    if (t->numel > 0) (void)lc_st_read_f32(&f, t, buf, t->numel - 1); // count mismatch path
    free(buf);
  }
  (void)lc_st_meta(&f, "format");
  lc_st_close(&f);
  return 0;
}
