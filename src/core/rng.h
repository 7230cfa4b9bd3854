/* core/rng: a small seeded generator (SplitMix64 seeding + xoshiro256**). Deterministic across
 * platforms; state lives in the caller's struct. */
#ifndef QHX_CORE_RNG_H
#define QHX_CORE_RNG_H

#include <stdint.h>

typedef struct qhx_rng {
    uint64_t s[4];
} qhx_rng;

void qhx_rng_seed(qhx_rng *r, uint64_t seed);
uint64_t qhx_rng_next(qhx_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double qhx_rng_uniform(qhx_rng *r);
/* Standard normal (Box-Muller). */
double qhx_rng_normal(qhx_rng *r);

#endif
