/* core/rng: xoshiro256** seeded with splitmix64, as published by Blackman and Vigna. */
#include "core/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void qhx_rng_seed(qhx_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
    if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3])) r->s[0] = 1; /* unreachable in practice */
}

uint64_t qhx_rng_u64(qhx_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

float qhx_rng_f32(qhx_rng *r) { return (float)(qhx_rng_u64(r) >> 40) * 0x1.0p-24f; }

double qhx_rng_f64(qhx_rng *r) { return (double)(qhx_rng_u64(r) >> 11) * 0x1.0p-53; }

uint64_t qhx_rng_below(qhx_rng *r, uint64_t n) {
    if (n == 0) return 0;
    unsigned __int128 m = (unsigned __int128)qhx_rng_u64(r) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t threshold = (0 - n) % n; /* 2^64 mod n */
        while (lo < threshold) {
            m = (unsigned __int128)qhx_rng_u64(r) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

double qhx_rng_normal(qhx_rng *r) {
    double u1 = 1.0 - qhx_rng_f64(r); /* (0, 1]: log() stays finite */
    double u2 = qhx_rng_f64(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
