// The checkpoint store: where a pass keeps each layer's checkpoint between its forward and
// its backward (the parameter store's protocol, for activations). The pass puts layer l's
// checkpoint after its forward and gets it back before its backward, naming the next one
// to fetch; behind the interface the bytes stay in RAM (one block for every layer) or go
// to disk (--offload-checkpoints DIR): a thread writes each layer's bytes after its
// forward and reads them back ahead of need during backward, so RAM holds only the layers
// in flight (`slots` of them: --offload-depth), counted in the backend's arena (LC_MEM_CKPT) and
// predicted by lc_ckstore_bytes. Checkpoints are the backend's buffers (U8, `bytes` each); on a
// backend without host memory the disk tier goes through host copies of the slots (the same
// bytes again in its host arena, LC_MEM_CKPT), moved by the pass's thread at put_end and get. The files are scratch: removed after use and when the store closes.
#ifndef LC_CKSTORE_H
#define LC_CKSTORE_H

#include <stddef.h>

#include "backend/backend.h"
#include "core/arena.h"
#include "core/status.h"

// Layers of checkpoint resident at once when offloading (slots): at least 2, the one the
// pass computes with and the next (forward: the layer's output; backward: the one read
// ahead). Each slot more lets one more write lag behind the layers (model_opts.h:
// lc_offload_depth). No more layers than slots: the store keeps them all in RAM.
#define LC_CKS_MIN_SLOTS 2

typedef struct lc_ckstore lc_ckstore;

// A store for n_layers checkpoints of `bytes` each (a multiple of 64), in RAM (dir NULL)
// or offloaded under dir with `slots` layers resident (>= LC_CKS_MIN_SLOTS; a scratch
// directory is made inside dir; refused with one line naming dir when it cannot be made or
// lacks n_layers x bytes free).
lc_status lc_ckstore_open(lc_ckstore **s, int n_layers, size_t bytes, const char *dir, int slots, lc_backend *be);
// Whether dir can take `need` bytes of checkpoints: a directory with that much free space
// (test hook: LONGCTX_TEST_OFFLOAD_ROOM=BYTES replaces the free space); one line otherwise.
lc_status lc_ckstore_check_dir(const char *dir, size_t need);
// Layers the store holds in memory: all n_layers in RAM (slots 0), else min(slots, n_layers).
int lc_ckstore_resident(int n_layers, int slots);
// Arena bytes (LC_MEM_CKPT) the store holds: lc_ckstore_resident layers of `bytes`.
size_t lc_ckstore_bytes(int n_layers, size_t bytes, int slots);
// Forward: the buffer layer l's checkpoint is written into (waits for a free slot while
// the writer catches up). Layers are put in order 0, 1, ..., each once per pass.
lc_status lc_ckstore_put_begin(lc_ckstore *s, int l, lc_buf *buf);
// Layer l's checkpoint is complete: it may go to disk now.
lc_status lc_ckstore_put_end(lc_ckstore *s, int l);
// Backward: layer l's checkpoint in memory (waits for its read; the buffer stays valid
// until lc_ckstore_release), and a read of layer `next` started ahead (-1: none).
lc_status lc_ckstore_get(lc_ckstore *s, int l, int next, lc_buf *buf);
// Layer l's checkpoint is no longer needed: its slot is free and its file removed.
void lc_ckstore_release(lc_ckstore *s, int l);
// Waits for the thread, removes the scratch files and directory, frees the slots. Returns
// the first I/O error the store met, if any (LC_OK otherwise).
lc_status lc_ckstore_close(lc_ckstore *s);
// Bytes written to and read from disk since open (0 in RAM).
void lc_ckstore_traffic(const lc_ckstore *s, double *written, double *read);

#endif
