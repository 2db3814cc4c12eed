// The checkpoint store (ckstore.h). In RAM: one backend block, layer l at l x bytes. Offloaded:
// `slots` backend slots and one I/O thread that runs a FIFO of jobs (write layer l from
// its slot to its file; read it back into a slot). Each layer moves through
//   FILLING -> QUEUED_W -> WRITING -> CLEAN (in a slot and on disk) -> DISK (slot reused)
//   -> QUEUED_R -> READING -> READY -> INUSE -> DONE
// (a layer still in its slot when backward wants it skips the disk: QUEUED_W is cancelled,
// CLEAN is used as is). A slot is reused only from a CLEAN layer, the lowest first (backward
// runs from the last layer down, so the lowest is needed last).
#define _POSIX_C_SOURCE 200809L
#include "model/ckstore.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "backend/stage.h"

typedef enum { S_NONE = 0, S_FILLING, S_QUEUED_W, S_WRITING, S_CLEAN, S_DISK, S_QUEUED_R, S_READING, S_READY, S_INUSE, S_DONE } lstate;

struct lc_ckstore {
  int L, offload, nslots;
  size_t bytes;
  lc_buf blk;         // the backend's (U8): RAM: L x bytes; offloaded: nslots x bytes
  char *base;         // offloaded: the slots' host memory, which the I/O thread reads and writes:
                      // blk's own address, or (staged: a backend without host memory)
                      // host copies of the slots, moved to and from the device by the
                      // pass's thread (named: LC_SYNC_STAGE)
  int staged;
  lc_backend *be;
  int *slot_of;       // per layer: its slot, -1 if none
  int *layer_in;      // per slot: its layer, -1 if free
  lstate *st;
  char *on_disk;      // per layer: its file exists
  // The I/O thread and its FIFO (each layer queued at most once per direction).
  pthread_t th;
  int started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int *q_layer;
  char *q_write;
  int q_cap, q_head, q_n, stop;
  lc_status err;
  char errmsg[512];
  char dir[4096];     // the scratch directory (inside the user's)
  double written, read;
  int read_delay_ms, write_delay_ms, fail_write_at;
};

int lc_ckstore_resident(int n_layers, int slots) { return slots > 0 && n_layers > slots ? slots : n_layers; }

size_t lc_ckstore_bytes(int n_layers, size_t bytes, int slots) { return (size_t)lc_ckstore_resident(n_layers, slots) * bytes; }

static int env_int(const char *name) {
  const char *e = getenv(name);
  return e ? atoi(e) : 0;
}

static void layer_path(const lc_ckstore *s, int l, char *p, size_t n) { snprintf(p, n, "%s/layer-%d", s->dir, l); }

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

// One file moved between a slot and the disk, outside the lock. Returns 0 or an errno.
static int move_file(lc_ckstore *s, int l, char *buf, int write) {
  char p[4200];
  layer_path(s, l, p, sizeof p);
  // Test hook: the Nth write of the process (a pass opens a store of its own) meets a full disk.
  static int writes = 0;
  if (write && s->fail_write_at > 0 && ++writes == s->fail_write_at) return ENOSPC; // (one store at a time)
  const int fd = write ? open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600) : open(p, O_RDONLY);
  if (fd < 0) return errno;
  size_t done = 0;
  int e = 0;
  while (done < s->bytes) {
    ssize_t k = write ? pwrite(fd, buf + done, s->bytes - done, (off_t)done) : pread(fd, buf + done, s->bytes - done, (off_t)done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      e = k < 0 ? errno : EIO; // a short file is damage
      break;
    }
    done += (size_t)k;
  }
  if (close(fd) != 0 && !e) e = errno;
  return e;
}

static void *io_thread(void *arg) {
  lc_ckstore *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->stop && s->q_n == 0) pthread_cond_wait(&s->cv, &s->mu);
    if (s->stop) break;
    const int l = s->q_layer[s->q_head], w = s->q_write[s->q_head];
    s->q_head = (s->q_head + 1) % s->q_cap;
    s->q_n--;
    if (s->st[l] != (w ? S_QUEUED_W : S_QUEUED_R)) continue; // cancelled: backward took it from its slot
    s->st[l] = w ? S_WRITING : S_READING;
    char *buf = s->base + (size_t)s->slot_of[l] * s->bytes;
    pthread_mutex_unlock(&s->mu);
    if (w ? s->write_delay_ms : s->read_delay_ms) sleep_ms(w ? s->write_delay_ms : s->read_delay_ms); // test hooks: a slow disk
    const int e = move_file(s, l, buf, w);
    pthread_mutex_lock(&s->mu);
    if (e && s->err == LC_OK) {
      s->err = LC_EIO;
      snprintf(s->errmsg, sizeof s->errmsg, "checkpoint offload: %s layer %d %s %.300s: %s; free space there or choose another "
               "--offload-checkpoints directory", w ? "writing" : "reading", l, w ? "to" : "from", s->dir, strerror(e));
    }
    if (w) {
      s->on_disk[l] = !e;
      s->written += e ? 0 : (double)s->bytes;
      s->st[l] = S_CLEAN;
    } else {
      s->read += e ? 0 : (double)s->bytes;
      s->st[l] = S_READY;
    }
    pthread_cond_broadcast(&s->cv);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static void enqueue(lc_ckstore *s, int l, int write) {
  const int at = (s->q_head + s->q_n) % s->q_cap;
  s->q_layer[at] = l;
  s->q_write[at] = (char)write;
  s->q_n++;
  pthread_cond_broadcast(&s->cv);
}

static lc_status fail_locked(lc_ckstore *s) {
  const lc_status st = lc_fail(s->err, "%s", s->errmsg);
  pthread_mutex_unlock(&s->mu);
  return st;
}

// A free slot for layer l (under the lock): an empty one, else one whose layer is CLEAN
// (the lowest such layer). wait: until one frees up; else -1 at once.
static int take_slot(lc_ckstore *s, int l, int wait) {
  for (;;) {
    int k = -1, victim = -1;
    for (int j = 0; j < s->nslots && k < 0; j++)
      if (s->layer_in[j] < 0) k = j;
    for (int j = 0; j < s->nslots && k < 0; j++) {
      const int m = s->layer_in[j];
      if (s->st[m] == S_CLEAN && s->on_disk[m] && (victim < 0 || m < s->layer_in[victim])) victim = j;
    }
    if (k < 0 && victim >= 0) {
      const int m = s->layer_in[victim];
      s->st[m] = S_DISK;
      s->slot_of[m] = -1;
      k = victim;
    }
    if (k >= 0) {
      s->layer_in[k] = l;
      s->slot_of[l] = k;
      return k;
    }
    if (!wait || s->err != LC_OK) return -1;
    pthread_cond_wait(&s->cv, &s->mu);
  }
}

lc_status lc_ckstore_check_dir(const char *dir, size_t need) {
  struct stat sb;
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return lc_fail(LC_EIO, "--offload-checkpoints %s is not a directory: create it (any local disk with room for the "
                   "checkpoints: `longctx plan` prints how much)", dir);
  struct statvfs vs;
  const char *hook = getenv("LONGCTX_TEST_OFFLOAD_ROOM");
  if (hook || statvfs(dir, &vs) == 0) {
    const double room = hook ? atof(hook) : (double)vs.f_bavail * (double)vs.f_frsize;
    if (room < (double)need)
      return lc_fail(LC_EIO, "--offload-checkpoints %s has %.1f MiB free but a pass writes up to %.1f MiB of layer "
                     "checkpoints: free space there or choose another directory", dir, room / 1048576.0, need / 1048576.0);
  }
  return LC_OK;
}

static lc_status make_dir(lc_ckstore *s, const char *dir, size_t need) {
  LC_TRY(lc_ckstore_check_dir(dir, need));
  if (snprintf(s->dir, sizeof s->dir, "%s/longctx-ckpt-XXXXXX", dir) >= (int)sizeof s->dir)
    return lc_fail(LC_EINVAL, "--offload-checkpoints %.100s...: path too long", dir);
  if (!mkdtemp(s->dir))
    return lc_fail(LC_EIO, "--offload-checkpoints %s: cannot create a scratch directory there (%s): choose a writable "
                   "directory", dir, strerror(errno));
  return LC_OK;
}

lc_status lc_ckstore_open(lc_ckstore **out, int n_layers, size_t bytes, const char *dir, int slots, lc_backend *be) {
  *out = NULL;
  if (dir && slots < LC_CKS_MIN_SLOTS)
    return lc_fail(LC_EINVAL, "--offload-depth %d: the checkpoint offload needs at least %d layers in RAM (the one computed "
                   "and the next): use --offload-depth %d or more, or auto", slots, LC_CKS_MIN_SLOTS, LC_CKS_MIN_SLOTS);
  lc_ckstore *s = calloc(1, sizeof *s);
  if (!s) return lc_fail(LC_ENOMEM, "out of memory for the checkpoint store");
  s->L = n_layers;
  s->bytes = bytes;
  s->offload = dir != NULL && n_layers > slots;
  s->nslots = s->offload ? slots : n_layers;
  lc_status st = LC_OK;
  if (s->offload) {
    s->slot_of = malloc(sizeof(int) * (size_t)n_layers);
    s->layer_in = malloc(sizeof(int) * (size_t)s->nslots);
    s->st = calloc((size_t)n_layers, sizeof *s->st);
    s->on_disk = calloc((size_t)n_layers, 1);
    s->q_cap = 2 * n_layers + 2;
    s->q_layer = malloc(sizeof(int) * (size_t)s->q_cap);
    s->q_write = malloc((size_t)s->q_cap);
    if (!s->slot_of || !s->layer_in || !s->st || !s->on_disk || !s->q_layer || !s->q_write)
      st = lc_fail(LC_ENOMEM, "out of memory for the checkpoint store");
    for (int l = 0; st == LC_OK && l < n_layers; l++) s->slot_of[l] = -1;
    for (int k = 0; st == LC_OK && k < s->nslots; k++) s->layer_in[k] = -1;
    if (st == LC_OK) st = make_dir(s, dir, (size_t)n_layers * bytes);
    s->read_delay_ms = env_int("LONGCTX_TEST_OFFLOAD_READ_DELAY_MS");
    s->write_delay_ms = env_int("LONGCTX_TEST_OFFLOAD_WRITE_DELAY_MS");
    s->fail_write_at = env_int("LONGCTX_TEST_OFFLOAD_FAIL_WRITE");
  }
  if (st == LC_OK) {
    st = lc_buf_alloc(be, LC_MEM_CKPT, LC_DT_U8, lc_ckstore_bytes(n_layers, bytes, s->offload ? s->nslots : 0), 0, "layer checkpoints",
                      &s->blk);
    s->be = be;
    if (st == LC_OK && s->offload) { // the disk tier moves host memory: blk's own, or a copy's
      s->base = lc_buf_host_mirror(s->blk, lc_ckstore_bytes(n_layers, bytes, s->nslots), LC_MEM_CKPT,
                                   "layer checkpoints (host staging)", &s->staged);
      if (!s->base) st = LC_ENOMEM;
    }
  }
  if (st == LC_OK && s->offload) {
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->th, NULL, io_thread, s) != 0) {
      pthread_mutex_destroy(&s->mu);
      pthread_cond_destroy(&s->cv);
      st = lc_fail(LC_EIO, "cannot start the checkpoint offload thread");
    } else {
      s->started = 1;
    }
  }
  *out = s;
  if (st != LC_OK) {
    lc_ckstore_close(s);
    *out = NULL;
  }
  return st;
}

static lc_buf slot_buf(const lc_ckstore *s, int k) { return lc_buf_part(s->blk, (size_t)k * s->bytes, s->bytes, LC_DT_U8); }

lc_status lc_ckstore_put_begin(lc_ckstore *s, int l, lc_buf *buf) {
  if (!s->offload) {
    *buf = slot_buf(s, l);
    return LC_OK;
  }
  pthread_mutex_lock(&s->mu);
  if (s->err != LC_OK) return fail_locked(s);
  const int k = take_slot(s, l, 1);
  if (k < 0) return fail_locked(s);
  s->st[l] = S_FILLING;
  *buf = slot_buf(s, k);
  pthread_mutex_unlock(&s->mu);
  return LC_OK;
}

lc_status lc_ckstore_put_end(lc_ckstore *s, int l) {
  if (!s->offload) return LC_OK;
  if (s->staged) { // the slot's bytes to the host copy the writer reads (slot_of[l]: this thread's)
    const int k = s->slot_of[l];
    LC_TRY(lc_buf_read(slot_buf(s, k), s->base + (size_t)k * s->bytes, LC_SYNC_STAGE));
  }
  pthread_mutex_lock(&s->mu);
  if (s->err != LC_OK) return fail_locked(s);
  s->st[l] = S_QUEUED_W;
  enqueue(s, l, 1);
  pthread_mutex_unlock(&s->mu);
  return LC_OK;
}

lc_status lc_ckstore_get(lc_ckstore *s, int l, int next, lc_buf *buf) {
  if (!s->offload) {
    *buf = slot_buf(s, l);
    return LC_OK;
  }
  pthread_mutex_lock(&s->mu);
  if (s->st[l] == S_QUEUED_W) s->st[l] = S_CLEAN; // never written: backward takes it from its slot
  if (s->st[l] == S_DISK) {
    if (take_slot(s, l, 1) < 0) return fail_locked(s);
    s->st[l] = S_QUEUED_R;
    enqueue(s, l, 0);
  }
  while (s->err == LC_OK && s->st[l] != S_CLEAN && s->st[l] != S_READY) pthread_cond_wait(&s->cv, &s->mu);
  if (s->err != LC_OK) return fail_locked(s);
  const int from_disk = s->st[l] == S_READY; // (CLEAN: its slot still holds it, on the device too)
  s->st[l] = S_INUSE;
  *buf = slot_buf(s, s->slot_of[l]);
  const char *host = s->base + (size_t)s->slot_of[l] * s->bytes;
  // Read the next one ahead if a slot is free now (never wait for it here).
  if (next >= 0 && s->st[next] == S_DISK && take_slot(s, next, 0) >= 0) {
    s->st[next] = S_QUEUED_R;
    enqueue(s, next, 0);
  }
  pthread_mutex_unlock(&s->mu);
  // staged: what the reader brought back, onto the device (the slot is INUSE: the reader
  // leaves it alone)
  return s->staged && from_disk ? lc_buf_write(*buf, host, LC_SYNC_STAGE) : LC_OK;
}

void lc_ckstore_release(lc_ckstore *s, int l) {
  if (!s->offload) return;
  pthread_mutex_lock(&s->mu);
  const int k = s->slot_of[l], had = s->on_disk[l];
  if (k >= 0) s->layer_in[k] = -1;
  s->slot_of[l] = -1;
  s->st[l] = S_DONE;
  s->on_disk[l] = 0;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  if (had) {
    char p[4200];
    layer_path(s, l, p, sizeof p);
    unlink(p);
  }
}

lc_status lc_ckstore_close(lc_ckstore *s) {
  if (!s) return LC_OK;
  lc_status st = LC_OK;
  if (s->started) {
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    if (s->err != LC_OK) st = lc_fail(s->err, "%s", s->errmsg);
  }
  if (s->dir[0]) {
    for (int l = 0; s->on_disk && l < s->L; l++) {
      char p[4200];
      layer_path(s, l, p, sizeof p);
      unlink(p); // whatever a failed pass left
    }
    rmdir(s->dir);
  }
  if (s->base) lc_buf_host_mirror_free(s->be, s->base, s->staged);
  lc_buf_free(&s->blk);
  free(s->slot_of);
  free(s->layer_in);
  free(s->st);
  free(s->on_disk);
  free(s->q_layer);
  free(s->q_write);
  free(s);
  return st;
}

void lc_ckstore_traffic(const lc_ckstore *s, double *written, double *read) {
  *written = s ? s->written : 0;
  *read = s ? s->read : 0;
}
