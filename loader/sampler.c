/* sampler.c — see sampler.h. */
#include "loader/sampler.h"

#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/rng.h"
#include "common/util.h"

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

static void shuffle_span(uint32_t *v, uint32_t n, rng *r)
{
    for (uint32_t i = n; i > 1; i--) { /* Fisher-Yates */
        uint32_t j = rng_below(r, i);
        uint32_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

/* The shard permutation, drawn first from r (so sampler_shard_sequence and
 * sampler_shard_order agree). */
static void shard_sequence(uint32_t *seq, uint32_t nshards, rng *r)
{
    for (uint32_t s = 0; s < nshards; s++)
        seq[s] = s;
    if (r)
        shuffle_span(seq, nshards, r);
}

void sampler_shard_sequence(uint32_t *seq, uint32_t nshards, uint64_t seed, uint32_t epoch,
                            uint32_t stream, int shuffle)
{
    rng r = rng_keyed(seed, RNG_SHARDS, epoch, stream);
    shard_sequence(seq, nshards, shuffle ? &r : NULL);
}

void sampler_shard_order(uint32_t *perm, uint32_t n, const uint32_t *shard_first, uint32_t nshards,
                         uint64_t seed, uint32_t epoch, uint32_t stream, int shuffle,
                         uint32_t buffer)
{
    if (!shuffle || n < 2) {
        for (uint32_t i = 0; i < n; i++)
            perm[i] = i;
        return;
    }
    ASSERT(shard_first[0] == 0 && shard_first[nshards] == n);
    rng r = rng_keyed(seed, RNG_SHARDS, epoch, stream);
    uint32_t *seq = xmalloc(((size_t)nshards + 1) * sizeof *seq);
    shard_sequence(seq, nshards, &r);
    uint32_t k = 0; /* the stream, in perm: each shard's rows, shuffled */
    for (uint32_t i = 0; i < nshards; i++) {
        uint32_t s = seq[i], lo = shard_first[s], hi = shard_first[s + 1];
        ASSERT(lo <= hi && hi <= n);
        for (uint32_t row = lo; row < hi; row++)
            perm[k + row - lo] = row;
        shuffle_span(perm + k, hi - lo, &r);
        k += hi - lo;
    }
    free(seq);
    ASSERT(k == n);
    if (buffer < 2)
        return;
    /* The buffer: output position `out` is written only after stream
     * position out + m has been read into the buffer, so the stream and
     * the output share perm. */
    uint32_t m = buffer < n ? buffer : n, out = 0;
    uint32_t *buf = xmalloc((size_t)m * sizeof *buf);
    memcpy(buf, perm, (size_t)m * sizeof *buf);
    for (uint32_t next = m; next < n; next++) {
        uint32_t j = rng_below(&r, m);
        perm[out++] = buf[j];
        buf[j] = perm[next];
    }
    shuffle_span(buf, m, &r); /* drain in random order */
    memcpy(perm + out, buf, (size_t)m * sizeof *buf);
    free(buf);
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
