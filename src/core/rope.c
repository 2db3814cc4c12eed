// RoPE's frequencies and tables, shared by every backend: the scalings transformers implements
// (rope_type), the per-pair inverse frequencies they give and the cos/sin tables the layer's
// rotation reads (computed on the host in double, stored as float).
#include "core/rope.h"

#include <math.h>
#include <string.h>

#define LC_ROPE_PAR_MIN 32768L // T*H*D elements below which one thread is faster
#define LC_PI 3.14159265358979323846

// ---------------------------------------------------------------- scaling
// Each type as transformers' modeling_rope_utils computes it (the names follow it).

// YaRN's attention factor for a scale (0.1 * mscale * ln(scale) + 1 above 1).
static double yarn_mscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * log(scale) + 1.0; }

// The (fractional) pair index whose wavelength fits num_rot rotations in max_pos positions.
static double yarn_corr_dim(double num_rot, int D, double theta, double max_pos) {
  return (D * log(max_pos / (num_rot * 2.0 * LC_PI))) / (2.0 * log(theta));
}

void lc_rope_freqs(double *inv, double *attn, int D, double theta, const lc_rope_scaling *r, int max_pos, long seq_len) {
  const int half = D / 2;
  const lc_rope_type ty = r ? r->type : LC_ROPE_DEFAULT;
  double base = theta, af = 1.0;
  if (ty == LC_ROPE_DYNAMIC) {
    // NTK-aware: the base grows once the sequence is longer than max_position_embeddings
    // (transformers 5 uses that field, not an original length, for this type).
    const double mp = max_pos, L = seq_len > mp ? (double)seq_len : mp;
    base = theta * pow(r->factor * L / mp - (r->factor - 1.0), (double)D / (D - 2));
  }
  for (int i = 0; i < half; i++) inv[i] = 1.0 / pow(base, 2.0 * i / (double)D);
  switch (ty) {
  case LC_ROPE_LINEAR:
    for (int i = 0; i < half; i++) inv[i] /= r->factor;
    break;
  case LC_ROPE_LLAMA3: {
    // Wavelengths longer than orig/low are interpolated (/ factor), shorter than orig/high
    // kept, and the band between blended linearly in orig / wavelength.
    const double om = r->orig_max > 0 ? r->orig_max : max_pos, lo_wl = om / r->low_freq_factor,
                 hi_wl = om / r->high_freq_factor;
    for (int i = 0; i < half; i++) {
      const double wl = 2.0 * LC_PI / inv[i];
      const double scaled = wl > lo_wl ? inv[i] / r->factor : inv[i];
      if (wl < hi_wl || wl > lo_wl) {
        inv[i] = scaled;
      } else {
        const double s = (om / wl - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
        inv[i] = (1.0 - s) * scaled / r->factor + s * scaled;
      }
    }
    break;
  }
  case LC_ROPE_YARN: {
    const double f = r->factor, om = r->orig_max > 0 ? r->orig_max : max_pos;
    if (r->attn_factor > 0) af = r->attn_factor;
    else if (r->mscale > 0 && r->mscale_all_dim > 0) af = yarn_mscale(f, r->mscale) / yarn_mscale(f, r->mscale_all_dim);
    else af = yarn_mscale(f, 1.0);
    double lo = yarn_corr_dim(r->beta_fast, D, theta, om), hi = yarn_corr_dim(r->beta_slow, D, theta, om);
    if (r->truncate) lo = floor(lo), hi = ceil(hi);
    if (lo < 0) lo = 0;
    if (hi > D - 1) hi = D - 1;
    if (lo == hi) hi += 0.001; // transformers' guard against a zero-width ramp
    for (int i = 0; i < half; i++) {
      double ramp = (i - lo) / (hi - lo);
      ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
      const double extra = 1.0 - ramp; // weight of extrapolation (the plain frequency)
      inv[i] = inv[i] / f * (1.0 - extra) + inv[i] * extra;
    }
    break;
  }
  case LC_ROPE_LONGROPE: {
    // factor: given, else max_position_embeddings / original (the model's extension); short
    // factors up to the original length, long ones beyond (chosen per pass, for every position).
    const double om = r->orig_max > 0 ? r->orig_max : max_pos, f = r->factor > 0 ? r->factor : (double)max_pos / om;
    if (r->attn_factor > 0) af = r->attn_factor;
    else af = f <= 1.0 ? 1.0 : sqrt(1.0 + log(f) / log(om));
    const float *ext = seq_len > om ? r->long_factor : r->short_factor;
    for (int i = 0; i < half; i++) inv[i] /= (double)ext[i];
    break;
  }
  default:
    break;
  }
  *attn = af;
}

void lc_rope_table_freqs(float *cos_t, float *sin_t, const int *pos, int T, int D, const double *inv_freq,
                         double attn_factor) {
  const int half = D / 2;
#pragma omp parallel for schedule(static) if ((long)T * half > LC_ROPE_PAR_MIN / 8)
  for (int t = 0; t < T; t++) {
    for (int i = 0; i < half; i++) {
      const double a = (double)pos[t] * inv_freq[i];
      cos_t[(size_t)t * half + i] = (float)(attn_factor * cos(a));
      sin_t[(size_t)t * half + i] = (float)(attn_factor * sin(a));
    }
  }
}

void lc_rope_table(float *cos_t, float *sin_t, const int *pos, int T, int D, double theta) {
  double inv[2 * LC_ROPE_MAX_PAIRS], af;
  lc_rope_freqs(inv, &af, D, theta, NULL, 0, 0);
  lc_rope_table_freqs(cos_t, sin_t, pos, T, D, inv, af);
}

const char *lc_rope_type_name(lc_rope_type t) {
  static const char *const n[LC_ROPE_N] = {"default", "linear", "dynamic", "llama3", "yarn", "longrope"};
  return t >= 0 && t < LC_ROPE_N ? n[t] : "?";
}

lc_status lc_rope_type_parse(const char *s, lc_rope_type *t) {
  for (int i = 0; i < LC_ROPE_N; i++)
    if (!strcmp(s, lc_rope_type_name((lc_rope_type)i))) {
      *t = (lc_rope_type)i;
      return LC_OK;
    }
  return lc_fail(LC_EINVAL, "RoPE scaling type '%.40s' is not known: use default, linear, dynamic, llama3, yarn or longrope", s);
}

int lc_rope_scaling_equal(const lc_rope_scaling *a, const lc_rope_scaling *b) {
  if (a->type != b->type || a->factor != b->factor || a->orig_max != b->orig_max || a->low_freq_factor != b->low_freq_factor ||
      a->high_freq_factor != b->high_freq_factor || a->beta_fast != b->beta_fast || a->beta_slow != b->beta_slow ||
      a->mscale != b->mscale || a->mscale_all_dim != b->mscale_all_dim || a->attn_factor != b->attn_factor ||
      a->truncate != b->truncate || a->n_factors != b->n_factors)
    return 0;
  for (int i = 0; i < a->n_factors; i++)
    if (a->short_factor[i] != b->short_factor[i] || a->long_factor[i] != b->long_factor[i]) return 0;
  return 1;
}

lc_status lc_rope_scaling_validate(const lc_rope_scaling *r, int head_dim) {
  const char *ty = lc_rope_type_name(r->type);
  if (r->type < 0 || r->type >= LC_ROPE_N) return lc_fail(LC_EINVAL, "model config: unknown RoPE scaling type %d", (int)r->type);
  if (r->type == LC_ROPE_DEFAULT) return LC_OK;
  if (r->type != LC_ROPE_LONGROPE && (!(r->factor >= 1.0) || !isfinite(r->factor)))
    return lc_fail(LC_EINVAL, "model config: rope scaling %s needs factor >= 1 (got %g)", ty, r->factor);
  if (r->orig_max < 0) return lc_fail(LC_EINVAL, "model config: original_max_position_embeddings %d must be positive", r->orig_max);
  if (r->type == LC_ROPE_LLAMA3) {
    if (!(r->low_freq_factor > 0) || !(r->high_freq_factor > r->low_freq_factor))
      return lc_fail(LC_EINVAL, "model config: rope scaling llama3 needs 0 < low_freq_factor < high_freq_factor (got %g, %g)",
                     r->low_freq_factor, r->high_freq_factor);
  }
  if (r->type == LC_ROPE_YARN && (!(r->beta_fast > 0) || !(r->beta_slow > 0) || r->mscale < 0 || r->mscale_all_dim < 0 || r->attn_factor < 0))
    return lc_fail(LC_EINVAL, "model config: rope scaling yarn needs positive beta_fast, beta_slow and non-negative mscale, attention_factor");
  if (r->type == LC_ROPE_LONGROPE) {
    if (r->n_factors != head_dim / 2)
      return lc_fail(LC_EINVAL, "model config: rope scaling longrope needs short_factor and long_factor of head_dim/2 = %d "
                     "entries (got %d)", head_dim / 2, r->n_factors);
    for (int i = 0; i < r->n_factors; i++)
      if (!(r->short_factor[i] > 0) || !(r->long_factor[i] > 0) || !isfinite(r->short_factor[i]) || !isfinite(r->long_factor[i]))
        return lc_fail(LC_EINVAL, "model config: rope scaling longrope factors must be positive (entry %d)", i);
    if (r->attn_factor < 0) return lc_fail(LC_EINVAL, "model config: longrope attention_factor must be positive");
  }
  return LC_OK;
}
