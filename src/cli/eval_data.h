// The data longctx eval scores: a token file, or a text file tokenized with the model's
// tokenizer (bytes for vocab-256 models), and how many bytes of text the tokens stand for.
#ifndef LC_EVAL_DATA_H
#define LC_EVAL_DATA_H

#include <stdint.h>

#include "core/status.h"
#include "model/config.h"

typedef struct {
  int32_t *tokens;
  long n;
  unsigned char *mask; // a version 3 token file's loss mask (NULL: every token counts)
  long counted;        // targets the mask counts (tokens 1..n-1), n - 1 without a mask
  int bytes_known;     // bytes_total / first_bytes are the text's bytes
  double bytes_total;  // bytes of text behind tokens[0..n) (with a mask: behind the counted targets)
  double first_bytes;  // of them, tokens[0]'s (never scored; 0 with a mask)
  char desc[256];      // what the tokens are, for the settings line
  char bytes_why[256]; // why the bytes are not known
} lc_eval_data;

// Reads path (at most max_tokens tokens when > 0) for the model --model spec names, whose
// config is cfg: ids checked against its vocabulary.
lc_status lc_eval_data_load(lc_eval_data *d, const char *path, const char *model_spec, const lc_config *cfg, long max_tokens);
void lc_eval_data_free(lc_eval_data *d);

#endif
