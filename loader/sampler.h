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

/* Data-parallel ranks cut every batch of `count` samples (the global batch,
 * or the short last one) into `ranks` contiguous slices: slice r is
 * [r*count/ranks, (r+1)*count/ranks) (floor), so slices differ by at most
 * one sample, every sample is in exactly one, and a batch smaller than
 * `ranks` leaves some slices empty (never padded with repeats). Sets
 * *first to the slice's offset in the batch and returns its length.
 * ranks 0 or 1: the whole batch. */
uint32_t sampler_slice(uint32_t count, uint32_t rank, uint32_t ranks, uint32_t *first);

#endif
