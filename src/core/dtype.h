// The one vocabulary of element types: the communicator, the file formats and the
// memory model count sizes in these.
#ifndef LC_DTYPE_H
#define LC_DTYPE_H

#include <stddef.h>

typedef enum {
  LC_DT_F32 = 0,
  LC_DT_BF16,
  LC_DT_F16,
  LC_DT_F64,
  LC_DT_I32,
  LC_DT_I64,
  LC_DT_U8,
  LC_DT_COUNT
} lc_dtype;

// Bytes per element (0 for an invalid value).
size_t lc_dtype_size(lc_dtype t);
// Name as safetensors writes it: "F32", "BF16", "F16", "F64", "I32", "I64", "U8" ("?" if invalid).
const char *lc_dtype_name(lc_dtype t);

#endif
