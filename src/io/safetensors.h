// safetensors files: 8-byte little-endian header length N, N bytes of JSON header mapping
// tensor names to {dtype, shape, data_offsets [begin, end)} (plus an optional
// "__metadata__" object of strings), then the data region. The reader validates the whole
// header at open (every problem is a one-line LC_EFORMAT naming the file) and converts
// F32, BF16 and F16 tensors to float; the writer writes F32 or BF16 tensors atomically.
#ifndef LC_SAFETENSORS_H
#define LC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"
#include "io/fsutil.h"

// Tensors carry a dtype of the one vocabulary (core/dtype.h). F32/BF16/F16 can be read as
// float; any other valid safetensors dtype (I64, F64, U8, F8_E4M3, ...) may sit in a file,
// but lc_st_read_f32 on such a tensor is an error naming the dtype.
#define LC_ST_MAX_DIMS 8
// Largest header accepted (the safetensors reference implementation's limit).
#define LC_ST_MAX_HEADER 100000000ull

typedef struct {
  char name[256];
  lc_dtype dtype;
  int ndim;
  long long shape[LC_ST_MAX_DIMS];
  size_t begin, end;     // byte offsets inside the data region
  size_t numel;
} lc_st_tensor;

typedef struct {
  char path[1024];
  lc_st_tensor *tensors; // in header order
  int n;
  // private
  int fd_;                      // -1 for a file opened from memory
  const unsigned char *mem_;    // lc_st_open_mem: the caller's bytes
  unsigned long long size_;     // whole file size
  unsigned long long data_off_; // 8 + N: start of the data region
  lc_st_tensor **by_name_;      // tensors sorted by name (lc_st_find)
  char **meta_;                 // 2 * n_meta_ strings: key, value
  int n_meta_;
} lc_st_file;

lc_status lc_st_open(lc_st_file *f, const char *path);
// Same checks on bytes in memory (not copied: keep them alive until lc_st_close). `label`
// names the bytes in messages.
lc_status lc_st_open_mem(lc_st_file *f, const void *data, size_t len, const char *label);
const lc_st_tensor *lc_st_find(const lc_st_file *f, const char *name);
// Converts tensor t of f to float. n_elems must equal the tensor's element count (else
// LC_EINVAL naming both). LC_EFORMAT for a dtype other than F32/BF16/F16.
lc_status lc_st_read_f32(lc_st_file *f, const lc_st_tensor *t, float *dst, size_t n_elems);
// Elements [first, first + n_elems) of tensor t, flat in row-major order.
lc_status lc_st_read_f32_part(lc_st_file *f, const lc_st_tensor *t, size_t first, float *dst, size_t n_elems);
// Value of a "__metadata__" key, or NULL.
const char *lc_st_meta(const lc_st_file *f, const char *key);
void lc_st_close(lc_st_file *f);

typedef struct {
  const char *name;
  int ndim; // 0 (scalar) .. 8
  long long shape[8];
  const float *data;
  lc_dtype dtype; // stored as LC_DT_F32 (0: the default) or LC_DT_BF16 (rounded to nearest even)
} lc_st_entry;

// Writes tensors (in the given order, each as its entry's dtype) and optional metadata (meta_kv = n_meta pairs of
// key, value strings) ATOMICALLY: PATH.tmp.<pid>, write, fsync, rename, fsync of the
// directory. On any failure the temporary file is removed and the old file at PATH is
// untouched.
lc_status lc_st_write(const char *path, const lc_st_entry *e, int n, const char *const *meta_kv,
                      int n_meta);

// The same, streamed: the header is written at begin (entries' data ignored), then each
// tensor's data in entry order with put, then commit makes the file appear. Any failure
// aborts the write (the temporary file removed, PATH untouched); the writer is then done.
typedef struct {
  lc_atomic_file af;
  size_t *numel;
  lc_dtype *dtype;
  unsigned char *conv; // conversion buffer (bf16, or a big-endian host)
  int n, next;  // tensors; the one being written
  size_t part;  // its elements written so far
} lc_st_writer;
lc_status lc_st_writer_begin(lc_st_writer *w, const char *path, const lc_st_entry *e, int n,
                             const char *const *meta_kv, int n_meta);
lc_status lc_st_writer_put(lc_st_writer *w, const float *data, size_t numel);
// The next numel elements of the current tensor (a tensor may be written in pieces).
lc_status lc_st_writer_put_part(lc_st_writer *w, const float *data, size_t numel);
lc_status lc_st_writer_commit(lc_st_writer *w);
void lc_st_writer_abort(lc_st_writer *w);

#endif
