// The buffer handle (backend/backend.h says what a backend does with it), on its own so that
// the model's plain data structures (the weights' views, the layer's activations) can hold
// handles without the whole backend interface.
#ifndef LC_BUF_H
#define LC_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/dtype.h"

typedef struct lc_backend lc_backend;

// A buffer: n elements of dtype dt that a backend holds. It carries no address: host code
// cannot index it or hand it to memcpy, only to the backend. A view (lc_buf_view) shares
// the allocation; only the allocation itself (off 0, as lc_buf_alloc returned it) is freed.
typedef struct {
  lc_backend *be;  // owner; NULL: the empty buffer
  uint64_t h;      // the allocation's handle, the backend's business
  size_t off;      // byte offset of this view in the allocation
  size_t n;        // elements
  lc_dtype dt;
  lc_mem_cat cat;  // the category its bytes are counted in
} lc_buf;

static inline int lc_buf_ok(lc_buf b) { return b.be != NULL; }
static inline size_t lc_buf_bytes(lc_buf b) { return lc_bytes(b.dt, b.n); }

#endif
