#include "io/data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

#define COPY_LEN 16

lc_status lc_data_open(lc_data *d, const char *spec, int vocab, int seq) {
  memset(d, 0, sizeof *d);
  d->vocab = vocab;
  if (!strncmp(spec, "task:", 5)) {
    if (strcmp(spec, "task:copy") != 0)
      return lc_fail(LC_EINVAL, "--data %s: unknown built-in task; use task:copy or a file path", spec);
    if (vocab < 2) return lc_fail(LC_EINVAL, "task:copy needs a vocabulary of at least 2 tokens");
    d->kind = LC_DATA_TASK_COPY;
    d->copy_len = COPY_LEN;
    snprintf(d->desc, sizeof d->desc,
             "task:copy (random %d-token segments, each repeated once; loss on the repeats)", COPY_LEN);
    return LC_OK;
  }
  if (vocab != 256)
    return lc_fail(LC_EINVAL, "--data %s: a plain file is read as bytes, which needs a model with "
                   "vocab 256 (this one has %d)", spec, vocab);
  FILE *f = fopen(spec, "rb");
  if (!f) return lc_fail(LC_EIO, "--data %s: cannot open (%s); give an existing file or task:copy", spec, strerror(errno));
  if (fseek(f, 0, SEEK_END) != 0) {
    fclose(f);
    return lc_fail(LC_EIO, "--data %s: cannot seek; give a regular file", spec);
  }
  long n = ftell(f);
  rewind(f);
  if (n < (long)seq + 1) {
    fclose(f);
    return lc_fail(LC_EINVAL, "--data %s: holds %ld bytes but one sample of --seq %d needs %d; "
                   "use a larger file or a smaller --seq", spec, n < 0 ? 0 : n, seq, seq + 1);
  }
  d->bytes = malloc((size_t)n);
  if (!d->bytes) {
    fclose(f);
    return lc_fail(LC_ENOMEM, "--data %s: out of memory reading %ld bytes", spec, n);
  }
  size_t got = fread(d->bytes, 1, (size_t)n, f);
  fclose(f);
  if (got != (size_t)n) {
    lc_data_close(d);
    return lc_fail(LC_EIO, "--data %s: short read (%zu of %ld bytes)", spec, got, n);
  }
  d->kind = LC_DATA_BYTES;
  d->n_bytes = (size_t)n;
  snprintf(d->desc, sizeof d->desc, "%s (%zu bytes, byte tokens)", spec, d->n_bytes);
  return LC_OK;
}

void lc_data_close(lc_data *d) {
  free(d->bytes);
  d->bytes = NULL;
}

static void sample_rng(lc_rng *r, uint64_t seed, uint64_t index) {
  lc_rng_seed(r, seed * 0x9e3779b97f4a7c15ull ^ (index + 0x632be59bd9b4e019ull));
}

int lc_data_sample(const lc_data *d, uint64_t seed, uint64_t index, int *tokens, int *targets,
                   int S) {
  lc_rng r;
  sample_rng(&r, seed, index);
  int counted = 0;
  if (d->kind == LC_DATA_BYTES) {
    uint64_t span = d->n_bytes - (size_t)S; // start in [0, n - S - 1]
    size_t start = (size_t)(lc_rng_u64(&r) % span);
    for (int t = 0; t < S; t++) {
      tokens[t] = d->bytes[start + t];
      targets[t] = d->bytes[start + t + 1];
    }
    return S;
  }
  // task:copy: the sequence of S+1 tokens is pairs (A, A) of random segments; token i is
  // in a repeat when (i / L) is odd. Target t predicts token t+1.
  const int L = d->copy_len, V = d->vocab < 256 ? d->vocab : 256;
  int seg[64];
  for (int i = 0; i <= S; i++) {
    int pos_in = i % L, block = i / L;
    if (pos_in == 0 && block % 2 == 0)
      for (int j = 0; j < L; j++) seg[j] = (int)lc_rng_below(&r, (uint32_t)V);
    int tok = seg[pos_in];
    if (i < S) tokens[i] = tok;
    if (i > 0) {
      int rep = block % 2 == 1;
      targets[i - 1] = rep ? tok : -100;
      counted += rep;
    }
  }
  return counted;
}
