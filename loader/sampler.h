/* sampler.h — which samples go into which batch, from (seed, epoch) only.
 *
 * The order of an epoch (LOAD_ORDER_GLOBAL) is a permutation drawn from the RNG stream keyed by
 * (seed, RNG_SHUFFLE, epoch, stream), or the identity without shuffling.
 * Batch b holds perm[b*B .. b*B+B); the last batch is partial unless
 * drop_last. The streaming order over shards (LOAD_ORDER_SHARDS) is
 * sampler_shard_order. Nothing here depends on workers, prefetch, pinning or mode.
 */
#ifndef TRAIN_SAMPLER_H
#define TRAIN_SAMPLER_H

#include <stdint.h>

/* perm[0..n) = order of epoch `epoch`; `stream` separates data sets that
 * share a seed (training 0, validation 1). */
void sampler_permutation(uint32_t *perm, uint32_t n, uint64_t seed, uint32_t epoch, uint32_t stream,
                         int shuffle);

/* The streaming order over shards (load_pass.order LOAD_ORDER_SHARDS), as
 * webdataset's shardshuffle + shuffle(N): shard s holds rows
 * [shard_first[s], shard_first[s+1]) (shard_first[nshards] == n). With
 * shuffle, from the stream keyed by (seed, RNG_SHARDS, epoch, stream):
 *   1. the shards are permuted (sampler_shard_sequence);
 *   2. the rows of each shard are shuffled, giving the "stream": the
 *      shards' rows one shard after another in permutation order;
 *   3. a shuffle buffer of `buffer` samples: filled with the stream's first
 *      `buffer` rows, then each step emits a uniformly chosen buffered row
 *      and puts the next stream row in its place; at the end of the stream
 *      the buffer drains in random order. buffer 0 or 1: no buffer (the
 *      stream itself); buffer >= n: a global shuffle of the whole epoch.
 * So output position k holds a row from stream positions < k + buffer: a
 * reader that fetches shards in permutation order, a buffer's worth ahead,
 * has every row in time. The order in which shards are first needed is
 * exactly the shard permutation (sampler_shard_sequence), which is what a
 * fetcher downloads ahead by. Without shuffle: the identity. A pure
 * function of its arguments (no workers, ranks or mode). */
void sampler_shard_order(uint32_t *perm, uint32_t n, const uint32_t *shard_first, uint32_t nshards,
                         uint64_t seed, uint32_t epoch, uint32_t stream, int shuffle,
                         uint32_t buffer);

/* seq[0..nshards) = the shard permutation sampler_shard_order reads shards
 * in (the identity without shuffle). */
void sampler_shard_sequence(uint32_t *seq, uint32_t nshards, uint64_t seed, uint32_t epoch,
                            uint32_t stream, int shuffle);

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
