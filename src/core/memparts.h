// Named parts of a memory-model quantity: the buffers a phase's bytes are made of, each
// with its arena category. The size functions that the allocating code also uses (the
// attention strategies' lc_*_mem, lc_layer_mem_bytes, lc_model_pass_parts) record their
// terms here as they add them up, so the parts of a sum are the sum's own terms (the
// memory model's peak detail: `longctx plan --peak-detail`), not a second model.
#ifndef LC_MEMPARTS_H
#define LC_MEMPARTS_H

#include <stddef.h>

#define LC_MEM_PARTS_MAX 40

typedef struct {
  const char *name; // the buffer, as the allocating code names it
  const char *held; // the phase that holds it (NULL: set by whoever lists the peak)
  int cat;          // lc_mem_cat; -1: several (ZeRO's units in use)
  size_t bytes;
} lc_mem_part;

typedef struct {
  int n;
  lc_mem_part p[LC_MEM_PARTS_MAX];
} lc_mem_parts;

// Records `bytes` of `name` in ps (NULL: nothing; a name already there adds to it; parts of
// 0 bytes are left out) and returns bytes, so a sum can be written as the sum of its parts.
static inline size_t lc_mem_part_add(lc_mem_parts *ps, const char *name, int cat, size_t bytes) {
  if (!ps || !bytes) return bytes;
  for (int i = 0; i < ps->n; i++)
    if (ps->p[i].name == name && ps->p[i].cat == cat) {
      ps->p[i].bytes += bytes;
      return bytes;
    }
  if (ps->n < LC_MEM_PARTS_MAX) ps->p[ps->n++] = (lc_mem_part){name, NULL, cat, bytes};
  else ps->p[ps->n - 1].bytes += bytes; // (never at today's counts: the sum stays whole)
  return bytes;
}
// Appends every part of src to dst with `held` where a part has none.
static inline void lc_mem_parts_append(lc_mem_parts *dst, const lc_mem_parts *src, const char *held) {
  for (int i = 0; i < src->n; i++) {
    const int n0 = dst->n;
    lc_mem_part_add(dst, src->p[i].name, src->p[i].cat, src->p[i].bytes);
    if (dst->n > n0) dst->p[dst->n - 1].held = src->p[i].held ? src->p[i].held : held;
  }
}
static inline size_t lc_mem_parts_sum(const lc_mem_parts *ps) {
  size_t s = 0;
  for (int i = 0; i < ps->n; i++) s += ps->p[i].bytes;
  return s;
}

#endif
