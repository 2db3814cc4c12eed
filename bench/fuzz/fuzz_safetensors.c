// libFuzzer target: arbitrary bytes through the safetensors reader (in memory). A file that
// opens is what io/safetensors.h promises: unique names, each tensor's bytes its element
// count times its dtype's size, the tensors tiling the data region exactly (no gap, no
// overlap, nothing after), every tensor findable and F32/BF16/F16 readable in full and in
// part; a count that is not the tensor's is refused. A refused file leaves one line.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "fuzz_util.h"
#include "io/safetensors.h"

static int by_begin(const void *a, const void *b) {
  const lc_st_tensor *x = *(const lc_st_tensor *const *)a, *y = *(const lc_st_tensor *const *)b;
  return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : x->end < y->end ? -1 : x->end > y->end;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lc_st_file f;
  lc_status st = lc_st_open_mem(&f, data, size, "fuzz");
  if (st != LC_OK) {
    lc_fuzz_refused(st);
    return 0;
  }
  if (size < 8) LC_FUZZ_TRAP();
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | data[i];
  if (hlen > size - 8) LC_FUZZ_TRAP();
  const size_t region = size - 8 - (size_t)hlen;
  const lc_st_tensor **order = malloc(sizeof *order * ((size_t)f.n + 1));
  for (int i = 0; i < f.n; i++) {
    const lc_st_tensor *t = &f.tensors[i];
    order[i] = t;
    size_t numel = 1;
    for (int d = 0; d < t->ndim; d++) numel *= (size_t)t->shape[d];
    if (t->ndim < 0 || t->ndim > LC_ST_MAX_DIMS || numel != t->numel) LC_FUZZ_TRAP();
    if (t->end < t->begin || t->end > region || lc_bytes(t->dtype, t->numel) != t->end - t->begin) LC_FUZZ_TRAP();
    if (lc_st_find(&f, t->name) != t) LC_FUZZ_TRAP(); // names are unique
    float *buf = malloc(sizeof(float) * (t->numel + 1));
    st = lc_st_read_f32(&f, t, buf, t->numel);
    const int readable = t->dtype == LC_DT_F32 || t->dtype == LC_DT_BF16 || t->dtype == LC_DT_F16;
    if ((st == LC_OK) != readable) LC_FUZZ_TRAP();
    if (!readable) lc_fuzz_refused(st);
    if (readable && t->numel > 1) {
      float one;
      if (lc_st_read_f32_part(&f, t, t->numel / 2, &one, 1) != LC_OK || memcmp(&one, buf + t->numel / 2, 4)) LC_FUZZ_TRAP();
    }
    lc_fuzz_refused(lc_st_read_f32(&f, t, buf, t->numel + 1)); // another count
    free(buf);
  }
  qsort(order, (size_t)f.n, sizeof *order, by_begin);
  size_t pos = 0;
  for (int i = 0; i < f.n; i++) {
    if (order[i]->begin != pos) LC_FUZZ_TRAP();
    pos = order[i]->end;
  }
  if (pos != region) LC_FUZZ_TRAP();
  free(order);
  (void)lc_st_meta(&f, "format");
  lc_st_close(&f);
  return 0;
}
