// What the libFuzzer targets share: the refusal check (a refused input leaves one line
// naming the problem) and the fuzz input as a file in a private temporary directory, for
// the readers that take a path or a directory.
#ifndef LC_FUZZ_UTIL_H
#define LC_FUZZ_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/status.h"

// A broken property: where, on stderr, then the crash libFuzzer records.
#define LC_FUZZ_TRAP() (fprintf(stderr, "%s:%d: property broken (%s)\n", __FILE__, __LINE__, lc_errmsg()), __builtin_trap())

// LC_FUZZ_VERBOSE=1 in the environment: each refusal's message on stderr (to see why a
// seed is refused: ./fuzz_x FILE).
static inline int lc_fuzz_verbose(void) {
  static int v = -1;
  if (v < 0) v = getenv("LC_FUZZ_VERBOSE") != NULL;
  return v;
}

// Traps unless st is an error with a non-empty one-line message.
static inline void lc_fuzz_refused(lc_status st) {
  const char *m = lc_errmsg();
  if (st == LC_OK || !m[0] || strchr(m, '\n')) LC_FUZZ_TRAP();
  if (lc_fuzz_verbose()) fprintf(stderr, "refused: %s\n", m);
}

static char lc_fuzz_dir_[256];
static char lc_fuzz_names_[8][64];
static int lc_fuzz_n_names_;

static void lc_fuzz_cleanup_(void) {
  char p[400];
  for (int i = 0; i < lc_fuzz_n_names_; i++) {
    snprintf(p, sizeof p, "%s/%s", lc_fuzz_dir_, lc_fuzz_names_[i]);
    unlink(p);
  }
  rmdir(lc_fuzz_dir_);
}

// The target's own directory (made once under $TMPDIR, else /dev/shm or /tmp; removed at exit).
static inline const char *lc_fuzz_dir(void) {
  if (!lc_fuzz_dir_[0]) {
    const char *base = getenv("TMPDIR");
    if (!base || access(base, W_OK)) base = access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm";
    snprintf(lc_fuzz_dir_, sizeof lc_fuzz_dir_, "%s/lc_fuzz.XXXXXX", base);
    if (!mkdtemp(lc_fuzz_dir_)) {
      perror("lc_fuzz_dir: mkdtemp");
      abort();
    }
    atexit(lc_fuzz_cleanup_);
  }
  return lc_fuzz_dir_;
}

// Writes data as DIR/name (size 0 allowed) and returns its path (static storage per name).
static inline const char *lc_fuzz_put(const char *name, const void *data, size_t size) {
  static char paths[8][400];
  int k = 0;
  while (k < lc_fuzz_n_names_ && strcmp(lc_fuzz_names_[k], name)) k++;
  if (k == lc_fuzz_n_names_) {
    if (k == 8 || strlen(name) >= sizeof lc_fuzz_names_[0]) abort();
    snprintf(lc_fuzz_names_[k], sizeof lc_fuzz_names_[k], "%s", name);
    lc_fuzz_n_names_++;
  }
  snprintf(paths[k], sizeof paths[k], "%s/%s", lc_fuzz_dir(), name);
  FILE *f = fopen(paths[k], "wb");
  if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f)) {
    perror(paths[k]);
    abort();
  }
  return paths[k];
}

// Removes DIR/name (a file the reader must find missing).
static inline void lc_fuzz_drop(const char *name) {
  char p[400];
  snprintf(p, sizeof p, "%s/%s", lc_fuzz_dir(), name);
  unlink(p);
}

#endif
