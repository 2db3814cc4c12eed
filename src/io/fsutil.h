// Small file-system helpers: atomic file writes (temporary name, fsync, rename, fsync of
// the directory), mkdir -p, reading a whole file, joining paths. Every function returns
// an lc_status and records a one-line message with lc_fail on failure.
#ifndef LC_FSUTIL_H
#define LC_FSUTIL_H

#include <stddef.h>

#include <stdint.h>

#include "core/status.h"

// An atomic write in progress: bytes go to PATH.tmp.<pid>; lc_atomic_commit makes them
// appear at PATH all at once (or not at all). On any failure the temporary file is
// removed and whatever was at PATH before is untouched.
typedef struct {
  char path[4096];
  char tmp[4200];
  int fd;       // -1 when closed
} lc_atomic_file;

// Creates (truncates) PATH.tmp.<pid>. LC_EIO if the directory does not exist or is not writable.
lc_status lc_atomic_begin(lc_atomic_file *a, const char *path);
// Appends len bytes. On failure the write is aborted (temporary removed): do not commit.
lc_status lc_atomic_write(lc_atomic_file *a, const void *data, size_t len);
// fsync, close, rename onto PATH, fsync the directory. On failure the temporary is removed.
lc_status lc_atomic_commit(lc_atomic_file *a);
// Closes and removes the temporary file (safe to call twice or after a failed write).
void lc_atomic_abort(lc_atomic_file *a);
// Checksum (core/hash.h) and length of a whole file (read in chunks). LC_EIO if it cannot be read.
lc_status lc_file_hash(const char *path, uint64_t *hash, uint64_t *bytes);

// The whole protocol for one buffer.
lc_status lc_write_file_atomic(const char *path, const void *data, size_t len);

// Creates the directory and its missing parents (mode 0755). An existing directory is fine;
// an existing non-directory on the way is LC_EIO.
lc_status lc_mkdir_p(const char *path);

// Reads the whole file into a malloc'd buffer with a terminating NUL (not counted in *len).
// Files larger than max_len are LC_EFORMAT (protects against reading a wrong, huge file).
lc_status lc_read_file(const char *path, size_t max_len, char **data, size_t *len);

// out = dir + "/" + name; LC_EINVAL if it does not fit in cap bytes.
lc_status lc_path_join(char *out, size_t cap, const char *dir, const char *name);

// 1 if path names a regular file / a directory (following links), 0 otherwise.
// len bytes at offset off of a file `size` bytes long, held at mem (fd < 0) or read from the
// open descriptor fd with pread: LC_EFORMAT naming path when the range goes past the end
// (a truncated file), LC_EIO when the read fails. The model readers' one raw read.
lc_status lc_src_read(const char *path, int fd, const unsigned char *mem, uint64_t size, uint64_t off, void *buf,
                      size_t len);
int lc_is_file(const char *path);
int lc_is_dir(const char *path);

#endif
