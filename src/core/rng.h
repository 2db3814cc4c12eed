// Deterministic random numbers (xoshiro256** seeded by splitmix64). The state is
// a value the caller owns, so runs are reproducible and checkpointable.
#ifndef LC_RNG_H
#define LC_RNG_H

#include <stdint.h>

typedef struct { uint64_t s[4]; } lc_rng;

void lc_rng_seed(lc_rng *r, uint64_t seed);
uint64_t lc_rng_u64(lc_rng *r);
uint32_t lc_rng_below(lc_rng *r, uint32_t n); // uniform in [0, n)
float lc_rng_uniform(lc_rng *r);              // uniform in [0, 1)
float lc_rng_normal(lc_rng *r);               // standard normal
void lc_rng_fill_uniform(lc_rng *r, float *x, long n, float lo, float hi);
void lc_rng_fill_normal(lc_rng *r, float *x, long n, float std);

#endif
