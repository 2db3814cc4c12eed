#define _POSIX_C_SOURCE 200809L
#include "io/fsutil.h"

#include "core/hash.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

lc_status lc_path_join(char *out, size_t cap, const char *dir, const char *name) {
  size_t dl = strlen(dir);
  int slash = dl > 0 && dir[dl - 1] != '/';
  int k = snprintf(out, cap, "%s%s%s", dir, slash ? "/" : "", name);
  if (k < 0 || (size_t)k >= cap)
    return lc_fail(LC_EINVAL, "path '%s/%s' is too long (limit %zu bytes); use a shorter directory",
                   dir, name, cap - 1);
  return LC_OK;
}

int lc_is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int lc_is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

lc_status lc_atomic_begin(lc_atomic_file *a, const char *path) {
  a->fd = -1;
  a->tmp[0] = 0;
  if (strlen(path) >= sizeof a->path)
    return lc_fail(LC_EINVAL, "%s: path too long (limit %zu bytes)", path, sizeof a->path - 1);
  snprintf(a->path, sizeof a->path, "%s", path);
  snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld", path, (long)getpid());
  a->fd = open(a->tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (a->fd < 0) {
    int e = errno;
    a->tmp[0] = 0;
    return lc_fail(LC_EIO, "cannot create %s.tmp.%ld to write %s (%s): make sure its directory "
                   "exists and is writable", path, (long)getpid(), path, strerror(e));
  }
  return LC_OK;
}

void lc_atomic_abort(lc_atomic_file *a) {
  if (a->fd >= 0) close(a->fd);
  a->fd = -1;
  if (a->tmp[0]) unlink(a->tmp);
  a->tmp[0] = 0;
}

// Test hook: LONGCTX_TEST_WRITE_LIMIT=N makes writes fail as a full disk does once the
// process has written N bytes through atomic writes (the failed-save tests).
static long long test_write_budget(void) {
  static long long left = -2;
  if (left == -2) {
    const char *e = getenv("LONGCTX_TEST_WRITE_LIMIT");
    left = e ? atoll(e) : -1;
  }
  return left;
}

lc_status lc_atomic_write(lc_atomic_file *a, const void *data, size_t len) {
  if (a->fd < 0) return lc_fail(LC_EIO, "%s: write after a failed or finished atomic write", a->path);
  const char *p = data;
  static long long spent = 0;
  while (len > 0) {
    size_t chunk = len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len;
    const long long budget = test_write_budget();
    if (budget >= 0 && spent + (long long)chunk > budget) {
      lc_atomic_abort(a);
      return lc_fail(LC_EIO, "cannot write %s (%s); the previous file (if any) is untouched: "
                     "free disk space or choose another directory", a->path, strerror(ENOSPC));
    }
    ssize_t w = write(a->fd, p, chunk);
    if (w > 0) spent += w;
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = w < 0 ? errno : ENOSPC;
      lc_atomic_abort(a);
      return lc_fail(LC_EIO, "cannot write %s (%s); the previous file (if any) is untouched: "
                     "free disk space or choose another directory", a->path, strerror(e));
    }
    p += w;
    len -= (size_t)w;
  }
  return LC_OK;
}

// fsync of the directory holding path, so the rename itself is durable. File systems that
// cannot fsync a directory (EINVAL) are accepted.
static lc_status fsync_parent(const char *path) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == dir) dir[1] = 0;
  else *slash = 0;
  int fd = open(dir, O_RDONLY);
  if (fd < 0) return lc_fail(LC_EIO, "cannot open directory %s to sync it (%s)", dir, strerror(errno));
  int rc = fsync(fd);
  int e = errno;
  close(fd);
  if (rc != 0 && e != EINVAL && e != EROFS)
    return lc_fail(LC_EIO, "cannot sync directory %s (%s): the new %s may not survive a crash", dir,
                   strerror(e), path);
  return LC_OK;
}

lc_status lc_atomic_commit(lc_atomic_file *a) {
  if (a->fd < 0) return lc_fail(LC_EIO, "%s: commit after a failed atomic write", a->path);
  if (fsync(a->fd) != 0) {
    int e = errno;
    lc_atomic_abort(a);
    return lc_fail(LC_EIO, "cannot sync %s (%s); the previous file (if any) is untouched", a->path,
                   strerror(e));
  }
  int rc = close(a->fd);
  a->fd = -1;
  if (rc != 0) {
    int e = errno;
    lc_atomic_abort(a);
    return lc_fail(LC_EIO, "cannot close %s (%s); the previous file (if any) is untouched", a->path,
                   strerror(e));
  }
  if (rename(a->tmp, a->path) != 0) {
    int e = errno;
    lc_atomic_abort(a);
    return lc_fail(LC_EIO, "cannot rename the finished temporary file onto %s (%s); the previous "
                   "file (if any) is untouched: make sure %s is not a directory and is writable",
                   a->path, strerror(e), a->path);
  }
  a->tmp[0] = 0;
  return fsync_parent(a->path);
}

lc_status lc_write_file_atomic(const char *path, const void *data, size_t len) {
  lc_atomic_file a;
  LC_TRY(lc_atomic_begin(&a, path));
  LC_TRY(lc_atomic_write(&a, data, len));
  return lc_atomic_commit(&a);
}

lc_status lc_mkdir_p(const char *path) {
  char buf[4096];
  size_t n = strlen(path);
  if (n == 0) return lc_fail(LC_EINVAL, "cannot create a directory with an empty name");
  if (n >= sizeof buf) return lc_fail(LC_EINVAL, "%s: path too long (limit %zu bytes)", path, sizeof buf - 1);
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != 0) continue;
    if (buf[i - 1] == '/') continue; // repeated slashes
    char c = buf[i];
    buf[i] = 0;
    if (mkdir(buf, 0755) != 0) {
      int e = errno;
      if (e != EEXIST) {
        lc_status st = lc_fail(LC_EIO, "cannot create directory %s (%s): check the path and its "
                               "permissions", buf, strerror(e));
        return st;
      }
      if (!lc_is_dir(buf))
        return lc_fail(LC_EIO, "cannot create directory %s: a file of that name is in the way; "
                       "remove it or choose another directory", buf);
    }
    buf[i] = c;
  }
  return LC_OK;
}

lc_status lc_read_file(const char *path, size_t max_len, char **data, size_t *len) {
  *data = NULL;
  *len = 0;
  int fd = open(path, O_RDONLY);
  if (fd < 0) return lc_fail(LC_EIO, "cannot open %s (%s)", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return lc_fail(LC_EIO, "%s is not a regular file", path);
  }
  if ((unsigned long long)st.st_size > (unsigned long long)max_len) {
    close(fd);
    return lc_fail(LC_EFORMAT, "%s is %lld bytes, more than the %zu expected for this kind of file; "
                   "is it the right file?", path, (long long)st.st_size, max_len);
  }
  size_t n = (size_t)st.st_size;
  char *buf = malloc(n + 1);
  if (!buf) {
    close(fd);
    return lc_fail(LC_ENOMEM, "out of memory reading %s (%zu bytes)", path, n);
  }
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (got != n) {
    free(buf);
    return lc_fail(LC_EIO, "short read of %s (%zu of %zu bytes)", path, got, n);
  }
  buf[n] = 0;
  *data = buf;
  *len = n;
  return LC_OK;
}

lc_status lc_file_hash(const char *path, uint64_t *hash, uint64_t *bytes) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return lc_fail(LC_EIO, "cannot open %s (%s)", path, strerror(errno));
  lc_hash64 h;
  lc_hash64_init(&h);
  static unsigned char buf[1 << 20];
  for (;;) {
    ssize_t r = read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      close(fd);
      return lc_fail(LC_EIO, "cannot read %s (%s)", path, strerror(e));
    }
    if (r == 0) break;
    lc_hash64_update(&h, buf, (size_t)r);
  }
  close(fd);
  *hash = lc_hash64_final(&h);
  if (bytes) *bytes = h.len;
  return LC_OK;
}

lc_status lc_src_read(const char *path, int fd, const unsigned char *mem, uint64_t size, uint64_t off, void *buf,
                      size_t len) {
  if (off > size || len > size - off)
    return lc_fail(LC_EFORMAT, "%s: reading %zu bytes at offset %llu goes beyond the end of the file (%llu bytes); "
                   "the file is truncated", path, len, (unsigned long long)off, (unsigned long long)size);
  if (fd < 0) {
    if (len) memcpy(buf, mem + off, len);
    return LC_OK;
  }
  char *p = buf;
  while (len > 0) {
    size_t chunk = len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len;
    ssize_t r = pread(fd, p, chunk, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return lc_fail(LC_EIO, "%s: cannot read %zu bytes at offset %llu (%s); was the file changed or truncated while "
                     "open?", path, len, (unsigned long long)off, r < 0 ? strerror(errno) : "end of file");
    p += r;
    len -= (size_t)r;
    off += (uint64_t)r;
  }
  return LC_OK;
}
