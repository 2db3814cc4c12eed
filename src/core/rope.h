// Rotary position embedding with the scalings transformers implements (rope_type of
// rope_scaling / rope_parameters): the parameters, the per-pair frequencies they give, and
// the cos/sin tables the layer applies (each backend's rope entry). What every backend shares.
#ifndef LC_ROPE_H
#define LC_ROPE_H

#include "core/status.h"

// RoPE frequency scaling as transformers computes it (rope_type of rope_scaling /
// rope_parameters); core/rope.c turns it into per-pair frequencies and an attention factor.
typedef enum {
  LC_ROPE_DEFAULT = 0, // plain RoPE: inv_freq[i] = theta^(-2i/D)
  LC_ROPE_LINEAR,      // positions divided by factor
  LC_ROPE_DYNAMIC,     // NTK: theta grows with the sequence length beyond orig_max
  LC_ROPE_LLAMA3,      // Llama 3.1-3.3: low frequencies / factor, smooth band between
  LC_ROPE_YARN,        // YaRN: ramp between interpolation and extrapolation + attention factor
  LC_ROPE_LONGROPE,    // Phi-3 style: per-pair short/long factors + attention factor
  LC_ROPE_N
} lc_rope_type;

#define LC_ROPE_MAX_PAIRS 256 // longrope factors: head_dim / 2 at most this

typedef struct {
  lc_rope_type type;
  double factor;            // linear, dynamic, llama3, yarn (longrope: derived, see rope.c)
  int orig_max;             // original_max_position_embeddings (0: absent)
  double low_freq_factor;   // llama3
  double high_freq_factor;  // llama3
  double beta_fast, beta_slow; // yarn (defaults 32, 1)
  double mscale, mscale_all_dim; // yarn (0: absent)
  double attn_factor;       // yarn, longrope: attention_factor (0: absent, derived)
  int truncate;             // yarn: round the correction range to integers (default 1)
  int n_factors;            // longrope: entries of short/long_factor (= head_dim / 2)
  float short_factor[LC_ROPE_MAX_PAIRS], long_factor[LC_ROPE_MAX_PAIRS];
} lc_rope_scaling;

// "default", "linear", ... and back (LC_EINVAL naming the known types).
const char *lc_rope_type_name(lc_rope_type t);
lc_status lc_rope_type_parse(const char *s, lc_rope_type *t);
// 1 if a and b give the same frequencies (every field compared; not memcmp: padding).
int lc_rope_scaling_equal(const lc_rope_scaling *a, const lc_rope_scaling *b);
// The scaling's parameters in range for a head of head_dim (one clear line otherwise).
lc_status lc_rope_scaling_validate(const lc_rope_scaling *r, int head_dim);

// Per-pair inverse frequencies inv_freq[D/2] and the attention factor that multiplies cos
// and sin, for base theta, scaling r (NULL: none), max_pos = max_position_embeddings, and
// seq_len = the sequence's largest position + 1 (dynamic and longrope depend on it, as
// transformers' rotary module computes them for a fresh forward). In double.
void lc_rope_freqs(double *inv_freq, double *attn_factor, int D, double theta, const lc_rope_scaling *r,
                   int max_pos, long seq_len);
// Table for T positions: angle[t,i] = pos[t] * inv_freq[i], i < D/2; cos_t/sin_t [T, D/2]
// hold attn_factor * cos / sin, computed in double, stored as float.
void lc_rope_table_freqs(float *cos_t, float *sin_t, const int *pos, int T, int D, const double *inv_freq,
                         double attn_factor);
// Plain RoPE's table for T positions: angle[t,i] = pos[t] * theta^(-2i/D), i < D/2;
// cos_t/sin_t are [T, D/2]. Computed in double, stored as float (lc_rope_table_freqs with
// lc_rope_freqs of no scaling).
void lc_rope_table(float *cos_t, float *sin_t, const int *pos, int T, int D, double theta);

#endif
