/* sampler.h — which samples go into which batch, from (seed, epoch) only.
 *
 * The order of an epoch is a permutation drawn from the RNG stream keyed by
 * (seed, RNG_SHUFFLE, epoch, stream), or the identity without shuffling.
 * Batch b holds perm[b*B .. b*B+B); the last batch is partial unless
 * drop_last. Nothing here depends on workers, prefetch, pinning or mode.
 */
#ifndef TRAIN_SAMPLER_H
#define TRAIN_SAMPLER_H

#include <stdint.h>

/* perm[0..n) = order of epoch `epoch`; `stream` separates data sets that
 * share a seed (training 0, validation 1). */
void sampler_permutation(uint32_t *perm, uint32_t n, uint64_t seed, uint32_t epoch, uint32_t stream,
                         int shuffle);

/* Number of batches of size B over n samples. */
uint32_t sampler_batches(uint32_t n, uint32_t B, int drop_last);

/* Size of batch b (B, or the remainder for the last partial batch). */
uint32_t sampler_batch_size(uint32_t n, uint32_t B, uint32_t b);

#endif
