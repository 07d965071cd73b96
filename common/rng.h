/* rng.h — explicit, keyed random number streams.
 *
 * Every random choice in train comes from an rng whose state is derived from
 * a key such as (seed, epoch, sample index): the same key gives the same
 * stream in any process, worker or run. There is no global generator.
 * The generator is splitmix64 (Steele, Lea, Flood 2014): 64-bit state, one
 * add and a strong output mix per draw; plenty for augmentation and
 * shuffling, not for cryptography.
 */
#ifndef TRAIN_RNG_H
#define TRAIN_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct rng {
    uint64_t s;
} rng;

/* Stream purposes, so that e.g. the shuffle of epoch 3 and the augmentation
 * of sample 3 never share a stream. */
enum rng_purpose {
    RNG_SHUFFLE = 1,
    RNG_AUGMENT = 2,
    RNG_INIT = 3,
    RNG_SKIP = 4,
    RNG_TOOL = 5,
    RNG_SHARDS = 6, /* the streaming order (sampler_shard_order) */
};

static inline uint64_t rng_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rng_next(rng *r)
{
    r->s += 0x9e3779b97f4a7c15ULL;
    return rng_mix(r->s);
}

/* A stream keyed by (seed, purpose, a, b). */
static inline rng rng_keyed(uint64_t seed, uint32_t purpose, uint64_t a, uint64_t b)
{
    rng r;
    uint64_t k = rng_mix(seed ^ 0x6a09e667f3bcc909ULL);
    k = rng_mix(k ^ ((uint64_t)purpose * 0x3c6ef372fe94f82bULL));
    k = rng_mix(k ^ (a + 0xa54ff53a5f1d36f1ULL));
    k = rng_mix(k ^ (b + 0x510e527fade682d1ULL));
    r.s = k;
    return r;
}

/* Uniform float in [0, 1) with 24 random bits. */
static inline float rng_uniform(rng *r)
{
    return (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

/* Uniform double in [0, 1) with 53 random bits. */
static inline double rng_uniform_d(rng *r)
{
    return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n), n > 0, without modulo bias (Lemire 2019). */
static inline uint32_t rng_below(rng *r, uint32_t n)
{
    uint64_t m = (uint64_t)(uint32_t)(rng_next(r) >> 32) * n;
    uint32_t lo = (uint32_t)m;
    if (lo < n) {
        uint32_t t = (uint32_t)(-n) % n;
        while (lo < t) {
            m = (uint64_t)(uint32_t)(rng_next(r) >> 32) * n;
            lo = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

/* Standard normal via Box-Muller (used for weight init). */
static inline double rng_normal(rng *r)
{
    const double two_pi = 6.283185307179586476925286766559;
    double u1 = 1.0 - rng_uniform_d(r); /* (0, 1]: log is finite */
    double u2 = rng_uniform_d(r);
    return sqrt(-2.0 * log(u1)) * cos(two_pi * u2);
}

#endif
