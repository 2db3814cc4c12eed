// GGUF files (llama.cpp's model format, versions 2 and 3; little-endian): "GGUF", version,
// tensor count, metadata count, the metadata key/values (typed scalars, strings, arrays),
// the tensor infos (name, dims with ne[0] the row length, ggml type, offset), padding to
// general.alignment (default 32), then the tensor data. The reader validates the whole
// header at open (every problem is one LC_EFORMAT line naming the file) without reading
// the data region; values and tensor bytes are read on demand (pread, or the caller's
// bytes for an in-memory file), so files of many GB cost only their header in memory.
// Tensors of F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K dequantize
// to float, bit for bit as ggml (and the gguf Python package) compute them, for any
// element range.
#ifndef LC_GGUF_H
#define LC_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"

#define LC_GGUF_MAX_DIMS 4    // ggml's GGML_MAX_DIMS
#define LC_GGUF_MAX_NAME 256  // tensor names: at most 255 bytes (llama.cpp itself: 63)
#define LC_GGUF_MAX_KEY 65535 // metadata keys (the spec's limit)
#define LC_GGUF_MAX_NEST 8    // arrays of arrays: at most this deep

typedef enum {
  LC_GGUF_U8 = 0, LC_GGUF_I8, LC_GGUF_U16, LC_GGUF_I16, LC_GGUF_U32, LC_GGUF_I32, LC_GGUF_F32,
  LC_GGUF_BOOL, LC_GGUF_STR, LC_GGUF_ARR, LC_GGUF_U64, LC_GGUF_I64, LC_GGUF_F64, LC_GGUF_VTYPES
} lc_gguf_vtype;

// ggml tensor types (ggml.h's enum ggml_type) longctx names; the reader knows the block
// sizes of all of them, dequantizes those lc_gguf_type_readable says.
enum {
  LC_GGML_F32 = 0, LC_GGML_F16 = 1, LC_GGML_Q4_0 = 2, LC_GGML_Q4_1 = 3, LC_GGML_Q5_0 = 6,
  LC_GGML_Q5_1 = 7, LC_GGML_Q8_0 = 8, LC_GGML_Q4_K = 12, LC_GGML_Q5_K = 13, LC_GGML_Q6_K = 14,
  LC_GGML_BF16 = 30, LC_GGML_TYPES = 42
};

typedef struct {
  char *key;           // NUL-terminated (no NUL inside)
  lc_gguf_vtype type;
  // Scalars: integers in i (signed types, bool) or u (unsigned), floats in f.
  int64_t i;
  uint64_t u;
  double f;
  // Strings: len bytes at file offset off. Arrays: count elements of atype from file offset
  // off, len bytes in all.
  lc_gguf_vtype atype;
  uint64_t count, off, len;
} lc_gguf_kv;

typedef struct {
  char name[LC_GGUF_MAX_NAME];
  int n_dims;                     // 1..4
  uint64_t ne[LC_GGUF_MAX_DIMS];  // ne[0]: elements of a row (contiguous); unused dims are 1
  int type;                       // ggml type (LC_GGML_*)
  uint64_t offset;                // bytes from the start of the data region (aligned)
  uint64_t nbytes;
  size_t numel;
} lc_gguf_tensor;

typedef struct {
  char path[1024];
  uint32_t version;
  lc_gguf_kv *kv; // in file order
  int n_kv;
  lc_gguf_tensor *tensors; // in file order
  int n;
  uint64_t alignment; // general.alignment or 32
  uint64_t data_off;  // where the data region starts
  uint64_t size;      // file size
  // private
  int fd_;
  const unsigned char *mem_;
  lc_gguf_kv **kv_by_key_;
  lc_gguf_tensor **t_by_name_;
} lc_gguf_file;

lc_status lc_gguf_open(lc_gguf_file *f, const char *path);
// The same checks on bytes in memory (not copied: keep them alive until lc_gguf_close);
// `label` names them in messages.
lc_status lc_gguf_open_mem(lc_gguf_file *f, const void *data, size_t len, const char *label);
void lc_gguf_close(lc_gguf_file *f);
// 1 if the file at path starts with the GGUF magic (0 if it does not or cannot be read).
int lc_gguf_is_file(const char *path);

const lc_gguf_kv *lc_gguf_find_kv(const lc_gguf_file *f, const char *key);
const lc_gguf_tensor *lc_gguf_find(const lc_gguf_file *f, const char *name);
const char *lc_gguf_vtype_name(lc_gguf_vtype t);

// Typed reads of one metadata value: LC_EFORMAT naming the key and its type when it is
// not of the kind asked for. int: any integer type (a u64 above 2^63-1 is an error);
// num: any integer or float type; str: a string of at most cap - 1 bytes (NUL-terminated).
lc_status lc_gguf_kv_int(const lc_gguf_file *f, const lc_gguf_kv *kv, int64_t *out);
lc_status lc_gguf_kv_num(const lc_gguf_file *f, const lc_gguf_kv *kv, double *out);
lc_status lc_gguf_kv_bool(const lc_gguf_file *f, const lc_gguf_kv *kv, int *out);
lc_status lc_gguf_kv_str(lc_gguf_file *f, const lc_gguf_kv *kv, char *buf, size_t cap);
// Element i of an array: a number (integer or float elements) or a string.
lc_status lc_gguf_arr_num(lc_gguf_file *f, const lc_gguf_kv *kv, uint64_t i, double *out);
lc_status lc_gguf_arr_str(lc_gguf_file *f, const lc_gguf_kv *kv, uint64_t i, char *buf, size_t cap);

// The ggml type's name ("Q4_K"; "type 77" for an unknown id, in a static buffer),
// elements per block and bytes per block (0 for an unknown id).
const char *lc_gguf_type_name(int type);
int lc_gguf_type_block(int type);
int lc_gguf_type_bytes(int type);
// 1 if tensors of this type dequantize (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
// Q4_K, Q5_K, Q6_K).
int lc_gguf_type_readable(int type);
// "F32, F16, BF16, ..." (the readable types, for messages).
const char *lc_gguf_readable_names(void);

// Elements [first, first + n) of tensor t (flat, row-major: element e is ne[0] * row +
// column) dequantized to float. The range need not be block-aligned (the blocks that
// cover it are decoded). LC_EINVAL if the range is outside the tensor, LC_EFORMAT for a
// type that does not dequantize.
lc_status lc_gguf_read_f32(lc_gguf_file *f, const lc_gguf_tensor *t, size_t first, size_t n, float *dst);
// nbytes of tensor t's data as the file holds it (its blocks), from byte byte_off of the
// tensor. LC_EINVAL for a range outside it.
lc_status lc_gguf_read_raw(lc_gguf_file *f, const lc_gguf_tensor *t, uint64_t byte_off, size_t nbytes, void *dst);
// The dtype of a ggml type (F32, F16, BF16 and the block types longctx reads; LC_DT_COUNT
// for any other).
lc_dtype lc_gguf_type_dtype(int type);
// Decodes n_blocks whole blocks of a readable type from src into dst (block size each).
void lc_gguf_dequant_blocks(int type, const unsigned char *src, size_t n_blocks, float *dst);

#endif
