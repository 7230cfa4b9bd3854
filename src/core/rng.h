/* core/rng: a small seeded generator (xoshiro256**, state filled by splitmix64 from a 64-bit
 * seed) for sampling and for making random test weights. The stream for a seed is fixed
 * forever: tests and golden files depend on it. Each user owns its qhx_rng (no global state);
 * one qhx_rng must not be shared between threads without a lock. */
#ifndef QHX_CORE_RNG_H
#define QHX_CORE_RNG_H

#include <stdint.h>

typedef struct qhx_rng {
    uint64_t s[4];
} qhx_rng;

/* Seed the state: s[i] = successive splitmix64 outputs from `seed` (never all zero). */
void qhx_rng_seed(qhx_rng *r, uint64_t seed);

/* Next 64 random bits (xoshiro256**, Blackman & Vigna 2018). */
uint64_t qhx_rng_u64(qhx_rng *r);

/* Uniform float in [0, 1): the top 24 bits of qhx_rng_u64 times 2^-24 (every value exact). */
float qhx_rng_f32(qhx_rng *r);

/* Uniform double in [0, 1): the top 53 bits times 2^-53. */
double qhx_rng_f64(qhx_rng *r);

/* Uniform integer in [0, n), without modulo bias (Lemire's multiply-and-reject). n == 0 gives 0. */
uint64_t qhx_rng_below(qhx_rng *r, uint64_t n);

/* Standard normal (mean 0, variance 1) by Box-Muller on two qhx_rng_f64 draws; uses libm,
 * so the last bit may differ across libm versions: do not build goldens on it. */
double qhx_rng_normal(qhx_rng *r);

#endif
