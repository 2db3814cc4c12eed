// --rope-theta and --rope-scaling: extend the context of a model (DESIGN.md "Model
// families"); the saved config.json carries the result.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

lc_status lc_cli_rope(lc_config *cfg, const char *theta, const char *scaling) {
  if (theta) {
    char *end = NULL;
    errno = 0;
    double v = strtod(theta, &end);
    if (end == theta || *end || errno || !(v > 1.0) || !isfinite(v))
      return lc_fail(LC_EINVAL, "--rope-theta '%s': give the RoPE base, a number > 1 (e.g. 500000)", theta);
    cfg->rope_theta = v;
  }
  if (!scaling) return LC_OK;
  if (!strcmp(scaling, "none") || !strcmp(scaling, "default")) {
    memset(&cfg->rope, 0, sizeof cfg->rope);
    return LC_OK;
  }
  char type[32];
  const char *colon = strchr(scaling, ':');
  const size_t tl = colon ? (size_t)(colon - scaling) : strlen(scaling);
  if (!colon || tl >= sizeof type)
    return lc_fail(LC_EINVAL, "--rope-scaling '%s': give TYPE:FACTOR[:ORIG_MAX] (TYPE linear, dynamic, llama3 or yarn), "
                   "or none", scaling);
  memcpy(type, scaling, tl);
  type[tl] = 0;
  lc_rope_type ty;
  LC_TRY(lc_rope_type_parse(type, &ty));
  if (ty == LC_ROPE_LONGROPE)
    return lc_fail(LC_EINVAL, "--rope-scaling longrope needs per-pair factors: set rope_scaling in the model's config.json");
  if (ty == LC_ROPE_DEFAULT) return lc_fail(LC_EINVAL, "--rope-scaling default takes no factor: write --rope-scaling none");
  // FACTOR and ORIG_MAX: plain decimal digits (strtod alone would take spaces and hex).
  for (const char *q = colon + 1; *q; q++)
    if (!strchr("0123456789.:eE+-", *q))
      return lc_fail(LC_EINVAL, "--rope-scaling '%s': give TYPE:FACTOR[:ORIG_MAX] with FACTOR >= 1 and ORIG_MAX in tokens, "
                     "as plain numbers", scaling);
  char *end = NULL;
  errno = 0;
  const double factor = strtod(colon + 1, &end);
  long orig = cfg->rope.type != LC_ROPE_DEFAULT && cfg->rope.orig_max > 0 ? cfg->rope.orig_max : cfg->max_pos;
  int bad = end == colon + 1 || errno;
  if (!bad && *end == ':') {
    char *e2 = NULL;
    orig = strtol(end + 1, &e2, 10);
    bad = e2 == end + 1 || *e2 || orig < 1 || orig > (1L << 30);
  } else if (!bad) {
    bad = *end != 0;
  }
  if (bad || !(factor >= 1.0) || factor > 1e6)
    return lc_fail(LC_EINVAL, "--rope-scaling '%s': give TYPE:FACTOR[:ORIG_MAX] with FACTOR >= 1 and ORIG_MAX the "
                   "model's original context in tokens (default: its original_max_position_embeddings, else "
                   "max_position_embeddings)", scaling);
  // The same type as the model's keeps its other parameters (llama3's band, YaRN's betas,
  // mscales, attention factor, truncation); another type starts from transformers'
  // defaults (llama3: Meta's band 1, 4; yarn: betas 32, 1, truncated, derived factor).
  const lc_rope_scaling old = cfg->rope;
  lc_rope_scaling *r = &cfg->rope;
  if (old.type != ty) {
    memset(r, 0, sizeof *r);
    r->type = ty;
    r->beta_fast = 32.0;
    r->beta_slow = 1.0;
    r->truncate = 1;
    if (ty == LC_ROPE_LLAMA3) r->low_freq_factor = 1.0, r->high_freq_factor = 4.0;
  }
  r->factor = factor;
  // The extended context: ORIG_MAX x FACTOR (dynamic scales beyond max_position_embeddings
  // by itself, so that field stays the original length).
  if (ty == LC_ROPE_DYNAMIC) {
    cfg->max_pos = (int)orig;
    r->orig_max = 0;
  } else {
    r->orig_max = (int)orig;
    const double ext = floor((double)orig * factor + 0.5);
    if (ext > (double)(1 << 30)) return lc_fail(LC_EINVAL, "--rope-scaling '%s': the context %g is too long", scaling, ext);
    cfg->max_pos = (int)ext;
  }
  return lc_rope_scaling_validate(r, cfg->head_dim);
}
