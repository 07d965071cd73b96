/* test_sampler.c — the streaming order over shards (sampler_shard_order):
 * every row once, a pure function of its arguments, shards permuted, and
 * the window bound a fetcher relies on. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "loader/sampler.h"

/* shard sizes -> shard_first (nshards + 1 entries); returns n */
static uint32_t firsts(const uint32_t *sizes, uint32_t ns, uint32_t *first)
{
    first[0] = 0;
    for (uint32_t s = 0; s < ns; s++)
        first[s + 1] = first[s] + sizes[s];
    return first[ns];
}

static uint32_t shard_of(const uint32_t *first, uint32_t ns, uint32_t row)
{
    uint32_t s = 0;
    while (s + 1 < ns && first[s + 1] <= row)
        s++;
    while (first[s + 1] <= row) /* empty shards at the end of the run */
        s++;
    return s;
}

typedef struct cfg {
    uint32_t sizes[8], ns, buffer;
} cfg;

static const cfg cases[] = {
    {{5, 5, 4}, 3, 0},       {{5, 5, 4}, 3, 1}, {{5, 5, 4}, 3, 3},
    {{1, 9, 0, 3, 7}, 5, 4}, {{0, 0, 6}, 3, 2}, {{10, 1, 1, 1, 10, 0, 2}, 7, 5},
    {{3, 4, 5}, 3, 100},     {{40}, 1, 8},      {{2, 2, 2, 2, 2, 2, 2, 2}, 8, 2},
};

Test(sampler, the_shard_order_holds_every_row_once_and_stays_within_its_window)
{
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        uint32_t first[9], ns = cases[c].ns, W = cases[c].buffer;
        uint32_t n = firsts(cases[c].sizes, ns, first);
        uint32_t perm[64], seq[8], rank[8], seen[64] = {0};
        for (uint32_t seed = 1; seed < 20; seed++) {
            memset(seen, 0, sizeof seen);
            sampler_shard_order(perm, n, first, ns, seed, 3, 0, 1, W);
            for (uint32_t k = 0; k < n; k++) {
                cr_assert_lt(perm[k], n);
                cr_assert_eq(seen[perm[k]]++, 0, "case %zu: row %u twice", c, perm[k]);
            }
            /* the stream: shards in sequence order; stream position p is in
             * the shard of sequence rank r when it lies in that shard's span */
            sampler_shard_sequence(seq, ns, seed, 3, 0, 1);
            uint32_t stream_rank[64], p = 0;
            for (uint32_t r = 0; r < ns; r++) {
                rank[seq[r]] = r;
                for (uint32_t i = 0; i < cases[c].sizes[seq[r]]; i++)
                    stream_rank[p++] = r;
            }
            cr_assert_eq(p, n);
            uint32_t w = W < 2 ? 1 : W;
            for (uint32_t k = 0; k < n; k++) {
                uint32_t last = k + w - 1 < n ? k + w - 1 : n - 1;
                cr_assert_leq(rank[shard_of(first, ns, perm[k])], stream_rank[last],
                              "case %zu seed %u: output %u reads a shard past its window", c, seed,
                              k);
            }
        }
    }
}

Test(sampler, the_window_bound_fails_for_a_global_shuffle)
{
    uint32_t sizes[8] = {8, 8, 8, 8, 8, 8, 8, 8}, first[9], perm[64], seq[8], rank[8];
    uint32_t n = firsts(sizes, 8, first), W = 4, bad = 0;
    sampler_permutation(perm, n, 7, 0, 0, 1);
    sampler_shard_sequence(seq, 8, 7, 0, 0, 1);
    for (uint32_t r = 0; r < 8; r++)
        rank[seq[r]] = r; /* stream position p is in the shard of rank p / 8 */
    for (uint32_t k = 0; k < n; k++) {
        uint32_t last = k + W - 1 < n ? k + W - 1 : n - 1;
        bad += rank[perm[k] / 8] > last / 8;
    }
    cr_assert_gt(bad, 0, "a global shuffle met the window bound: the check cannot fail");
}

Test(sampler, the_shard_order_is_a_pure_function_of_seed_and_epoch)
{
    uint32_t sizes[] = {6, 6, 6, 6, 6}, first[6], a[30], b[30];
    uint32_t n = firsts(sizes, 5, first);
    sampler_shard_order(a, n, first, 5, 9, 2, 0, 1, 6);
    sampler_shard_order(b, n, first, 5, 9, 2, 0, 1, 6);
    cr_assert_arr_eq(a, b, sizeof a, "same arguments, another order");
    sampler_shard_order(b, n, first, 5, 9, 3, 0, 1, 6);
    cr_assert(memcmp(a, b, sizeof a) != 0, "another epoch, same order");
    sampler_shard_order(b, n, first, 5, 10, 2, 0, 1, 6);
    cr_assert(memcmp(a, b, sizeof a) != 0, "another seed, same order");
    sampler_shard_order(b, n, first, 5, 9, 2, 1, 1, 6);
    cr_assert(memcmp(a, b, sizeof a) != 0, "another stream, same order");
    sampler_shard_order(b, n, first, 5, 9, 2, 0, 0, 6);
    for (uint32_t i = 0; i < n; i++)
        cr_assert_eq(b[i], i, "without shuffle: not the identity at %u", i);
    /* the first shard read changes across epochs */
    uint32_t seq[5], s0 = 0, differs = 0;
    for (uint32_t ep = 0; ep < 8; ep++) {
        sampler_shard_sequence(seq, 5, 9, ep, 0, 1);
        if (ep == 0)
            s0 = seq[0];
        differs |= seq[0] != s0;
        sampler_shard_order(a, n, first, 5, 9, ep, 0, 1, 1);
        cr_assert_eq(a[0] / 6, seq[0], "no buffer: epoch %u starts outside its first shard", ep);
    }
    cr_assert(differs, "the shards were not permuted: epoch 0..7 start with one shard");
}
