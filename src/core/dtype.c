#include "core/dtype.h"

size_t lc_dtype_size(lc_dtype t) {
  switch (t) {
    case LC_DT_U8: return 1;
    case LC_DT_BF16: case LC_DT_F16: return 2;
    case LC_DT_F32: case LC_DT_I32: return 4;
    case LC_DT_F64: case LC_DT_I64: return 8;
    default: return 0;
  }
}

const char *lc_dtype_name(lc_dtype t) {
  static const char *names[LC_DT_COUNT] = {"F32", "BF16", "F16", "F64", "I32", "I64", "U8"};
  return t >= 0 && t < LC_DT_COUNT ? names[t] : "?";
}
