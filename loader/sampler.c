/* sampler.c — see sampler.h. */
#include "loader/sampler.h"

#include "common/rng.h"

void sampler_permutation(uint32_t *perm, uint32_t n, uint64_t seed, uint32_t epoch, uint32_t stream,
                         int shuffle)
{
    for (uint32_t i = 0; i < n; i++)
        perm[i] = i;
    if (!shuffle || n < 2)
        return;
    rng r = rng_keyed(seed, RNG_SHUFFLE, epoch, stream);
    for (uint32_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        uint32_t j = rng_below(&r, i + 1);
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

uint32_t sampler_batches(uint32_t n, uint32_t B, int drop_last)
{
    if (B == 0)
        return 0;
    return drop_last ? n / B : (n + B - 1) / B;
}

uint32_t sampler_batch_size(uint32_t n, uint32_t B, uint32_t b)
{
    uint64_t start = (uint64_t)b * B;
    if (start >= n)
        return 0;
    return n - start < B ? (uint32_t)(n - start) : B;
}

uint32_t sampler_slice(uint32_t count, uint32_t rank, uint32_t ranks, uint32_t *first)
{
    if (ranks <= 1) {
        *first = 0;
        return count;
    }
    uint64_t lo = (uint64_t)rank * count / ranks, hi = (uint64_t)(rank + 1) * count / ranks;
    *first = (uint32_t)lo;
    return (uint32_t)(hi - lo);
}
