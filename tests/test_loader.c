/* test_loader.c — the loader with real forked workers and real files.
 *
 * The samples are small files whose bytes depend on the sample index; the
 * load function reads the file and mixes in bytes from the sample's rng, so
 * a batch digest covers which samples, in which order, with which
 * augmentation. The image pipeline itself is tested in test_image.c.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loader/dataset.h"
#include "loader/loader.h"
#include "loader/sampler.h"
#include "tests/support/helpers.h"

#define SAMPLE 24
#define NSAMPLES 57

static char *dir;
static dataset ds;

static void make_set(int bad_index)
{
    dir = tmpdir_make();
    size_t cap = 64 * NSAMPLES + 32, len = 0;
    char *csv = malloc(cap);
    len += (size_t)sprintf(csv, "path,label\n");
    for (int i = 0; i < NSAMPLES; i++) {
        char name[32];
        unsigned char bytes[SAMPLE];
        for (int k = 0; k < SAMPLE; k++)
            bytes[k] = (unsigned char)(i * 31 + k * 7);
        if (i == bad_index)
            memcpy(bytes, "BAD", 3);
        sprintf(name, "s/%03d.bin", i);
        free(write_file(dir, name, bytes, SAMPLE));
        len += (size_t)sprintf(csv + len, "%s,%d\n", name, i % 5);
    }
    char *p = write_text(dir, "data.csv", csv);
    free(csv);
    errbuf e;
    cr_assert_eq(dataset_load(&ds, p, NULL, &e), 0, "%s", e.msg);
    free(p);
}

static void setup(void) { make_set(-1); }
static void teardown(void)
{
    dataset_free(&ds);
    tmpdir_remove(dir);
}

typedef struct wctx {
    int slow; /* microseconds of extra work on every 5th sample */
} wctx;

static int slow_us;
static void *winit(void *arg)
{
    (void)arg;
    wctx *w = malloc(sizeof *w);
    w->slow = slow_us;
    return w;
}
static void wfini(void *w) { free(w); }

static int load(void *wc, int src, uint32_t index, load_pass_kind kind, rng *r, uint8_t *out,
                errbuf *e)
{
    wctx *w = wc;
    const char *path = dataset_path(&ds, index);
    (void)src;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return errf(e, "%s: %s", path, strerror(errno));
    unsigned char buf[SAMPLE];
    ssize_t n = read(fd, buf, SAMPLE);
    close(fd);
    if (n != SAMPLE)
        return errf(e, "%s: short file", path);
    if (memcmp(buf, "BAD", 3) == 0)
        return errf(e, "%s: corrupt sample", path);
    if (w->slow && index % 5 == 0)
        usleep((useconds_t)w->slow);
    for (int k = 0; k < SAMPLE; k++)
        out[k] = buf[k] ^ (kind == LOAD_PASS_TRAIN ? (uint8_t)rng_next(r) : 0);
    return 0;
}

static loader_config config(int workers, int prefetch, uint32_t batch)
{
    loader_config c = {.workers = workers,
                       .prefetch = prefetch,
                       .batch = batch,
                       .sample_bytes = SAMPLE,
                       .nsrc = 1,
                       .seed = 1234,
                       .load = load,
                       .worker_init = winit,
                       .worker_fini = wfini};
    c.src[0] = &ds;
    return c;
}

/* Digest of every batch of `epochs` training epochs. */
static uint64_t run_digest(loader_config c, int epochs, int drop_last, int *nbatches)
{
    errbuf e;
    loader *p = loader_create(&c, &e);
    cr_assert_not_null(p, "%s", e.msg);
    for (int ep = 0; ep < epochs; ep++) {
        load_pass j = {.src = 0,
                       .kind = LOAD_PASS_TRAIN,
                       .epoch = (uint32_t)ep,
                       .batch = 8,
                       .shuffle = 1,
                       .drop_last = drop_last};
        loader_post(p, &j);
    }
    uint64_t h = 0;
    int n = 0;
    loader_batch b;
    int rc;
    while ((rc = loader_next(p, &b, &e)) == LOADER_OK) {
        h = hash64(&b.seq, sizeof b.seq, h);
        h = hash64(&b.count, sizeof b.count, h);
        h = hash64(b.indices, b.count * sizeof *b.indices, h);
        h = hash64(b.labels, b.count * sizeof *b.labels, h);
        h = hash64(b.data, b.count * SAMPLE, h);
        for (uint32_t i = 0; i < b.count; i++)
            cr_assert_eq(b.labels[i], ds.rows[b.indices[i]].label);
        loader_release(p, &b);
        n++;
    }
    cr_assert_eq(rc, LOADER_END, "%s", e.msg);
    loader_destroy(p);
    if (nbatches)
        *nbatches = n;
    return h;
}

TestSuite(loader, .init = setup, .fini = teardown, .timeout = 60);

Test(loader, same_batches_for_any_workers_and_prefetch)
{
    slow_us = 300;
    int nb;
    uint64_t ref = run_digest(config(0, 1, 8), 2, 0, &nb);
    cr_assert_eq(nb, 2 * 8, "57 samples in batches of 8: 8 batches per epoch");
    int cfgs[][2] = {{1, 1}, {3, 1}, {3, 4}, {1, 4}, {2, 2}};
    for (size_t i = 0; i < sizeof cfgs / sizeof *cfgs; i++) {
        uint64_t d = run_digest(config(cfgs[i][0], cfgs[i][1], 8), 2, 0, NULL);
        cr_assert_eq(d, ref, "workers %d prefetch %d differ from workers 0", cfgs[i][0],
                     cfgs[i][1]);
    }
}

/* Digest of the training batches of epoch `epoch` alone (same size for
 * every epoch and seed, so two digests differ only through their bytes). */
/* The ring's invariants are ASSERTs (common/assert.h), live in this
 * sanitized build: a batch given back twice is a caller's bug that would
 * let a worker refill a slot the caller still reads; it stops the
 * process. (Workers 0: no other process to leave behind.) */
Test(loader, a_batch_released_twice_fails_its_assert, .signal = SIGABRT)
{
    errbuf e;
    loader_config c = config(0, 1, 8);
    loader *p = loader_create(&c, &e);
    load_pass j = {.kind = LOAD_PASS_TRAIN, .batch = 8};
    loader_post(p, &j);
    loader_batch b;
    cr_assert_eq(loader_next(p, &b, &e), LOADER_OK, "%s", e.msg);
    loader_release(p, &b);
    loader_release(p, &b); /* b is back already: the second release aborts */
    loader_destroy(p);
}

static uint64_t epoch_digest(loader_config c, uint32_t epoch)
{
    errbuf e;
    loader *p = loader_create(&c, &e);
    cr_assert_not_null(p, "%s", e.msg);
    load_pass j = {.kind = LOAD_PASS_TRAIN, .epoch = epoch, .batch = 8, .shuffle = 1};
    loader_post(p, &j);
    uint64_t h = 0;
    loader_batch b;
    while (loader_next(p, &b, &e) == LOADER_OK) {
        h = hash64(b.indices, b.count * sizeof *b.indices, h);
        h = hash64(b.data, b.count * SAMPLE, h);
        loader_release(p, &b);
    }
    loader_destroy(p);
    return h;
}

Test(loader, digest_differs_between_epochs_and_seeds)
{
    loader_config c = config(2, 2, 8);
    uint64_t e0 = epoch_digest(c, 0), e1 = epoch_digest(c, 1);
    cr_assert_neq(e0, e1, "epochs 0 and 1 give the same batches");
    cr_assert_eq(epoch_digest(c, 1), e1, "an epoch is reproducible");
    c.seed = 99;
    cr_assert_neq(epoch_digest(c, 0), e0, "seeds 1234 and 99 give the same epoch 0");
}

/* The augmentation stream of a sample: out = file bytes ^ rng bytes, so
 * data ^ file bytes is what the sample's rng drew in that epoch. */
static void augment_of_epoch(loader_config c, uint32_t epoch, uint8_t draws[NSAMPLES][SAMPLE])
{
    errbuf e;
    loader *p = loader_create(&c, &e);
    cr_assert_not_null(p, "%s", e.msg);
    load_pass j = {.kind = LOAD_PASS_TRAIN, .epoch = epoch, .batch = 8, .shuffle = 1};
    loader_post(p, &j);
    loader_batch b;
    while (loader_next(p, &b, &e) == LOADER_OK) {
        for (uint32_t i = 0; i < b.count; i++) {
            uint32_t s = b.indices[i];
            for (int k = 0; k < SAMPLE; k++)
                draws[s][k] = b.data[i * SAMPLE + k] ^ (uint8_t)(s * 31 + k * 7);
        }
        loader_release(p, &b);
    }
    loader_destroy(p);
}

Test(loader, every_sample_is_augmented_differently_each_epoch)
{
    /* the same sample, epochs 0 and 1: its augmentation (the rng stream the
     * load function gets) must change, not only the order */
    static uint8_t a[NSAMPLES][SAMPLE], b[NSAMPLES][SAMPLE], a2[NSAMPLES][SAMPLE];
    loader_config c = config(2, 2, 8);
    augment_of_epoch(c, 0, a);
    augment_of_epoch(c, 1, b);
    augment_of_epoch(config(0, 1, 8), 0, a2);
    cr_assert(memcmp(a, a2, sizeof a) == 0, "augmentation depends on the worker count");
    int same = 0;
    for (int s = 0; s < NSAMPLES; s++)
        same += memcmp(a[s], b[s], SAMPLE) == 0;
    cr_assert_eq(same, 0, "%d of %d samples drew the same augmentation in epochs 0 and 1", same,
                 NSAMPLES);
    int distinct = 0; /* and samples differ from each other within an epoch */
    for (int s = 1; s < NSAMPLES; s++)
        distinct += memcmp(a[s], a[0], SAMPLE) != 0;
    cr_assert_eq(distinct, NSAMPLES - 1, "samples share an augmentation stream");
}

Test(loader, every_order_is_possible_and_equally_likely)
{
    /* 4 samples, 2400 epochs: each of the 24 orders about 100 times (a
     * shuffle that can never leave a sample in place reaches only 6) */
    int count[256] = {0};
    uint32_t perm[4];
    for (uint32_t ep = 0; ep < 2400; ep++) {
        sampler_permutation(perm, 4, 77, ep, 0, 1);
        int seen = 0, code = 0;
        for (int i = 0; i < 4; i++) {
            cr_assert_lt(perm[i], 4u);
            seen |= 1 << perm[i];
            code = code * 4 + (int)perm[i];
        }
        cr_assert_eq(seen, 15, "epoch %u is not a permutation", ep);
        count[code]++;
    }
    int orders = 0;
    for (int c = 0; c < 256; c++)
        if (count[c]) {
            orders++;
            cr_assert(count[c] > 50 && count[c] < 150, "order %d drawn %d times of 2400", c,
                      count[c]);
        }
    cr_assert_eq(orders, 24);
    sampler_permutation(perm, 4, 77, 0, 0, 0);
    for (uint32_t i = 0; i < 4; i++)
        cr_assert_eq(perm[i], i, "no shuffle: the CSV's order");
}

Test(loader, epochs_shuffle_differently_and_cover_every_sample)
{
    errbuf e;
    loader_config c = config(2, 3, 8);
    loader *p = loader_create(&c, &e);
    cr_assert_not_null(p, "%s", e.msg);
    for (int ep = 0; ep < 2; ep++) {
        load_pass j = {.kind = LOAD_PASS_TRAIN, .epoch = (uint32_t)ep, .batch = 8, .shuffle = 1};
        loader_post(p, &j);
    }
    uint32_t order[2][NSAMPLES];
    int seen[2][NSAMPLES] = {{0}}, k[2] = {0, 0};
    loader_batch b;
    while (loader_next(p, &b, &e) == LOADER_OK) {
        cr_assert(b.pass == 0 || b.pass == 1);
        for (uint32_t i = 0; i < b.count; i++) {
            order[b.pass][k[b.pass]++] = b.indices[i];
            seen[b.pass][b.indices[i]]++;
        }
        loader_release(p, &b);
    }
    loader_destroy(p);
    cr_assert_eq(k[0], NSAMPLES);
    cr_assert_eq(k[1], NSAMPLES);
    for (int i = 0; i < NSAMPLES; i++)
        cr_assert(seen[0][i] == 1 && seen[1][i] == 1);
    cr_assert(memcmp(order[0], order[1], sizeof order[0]) != 0);
}

Test(loader, ring_sizing_drop_last_and_partial_batch)
{
    errbuf e;
    loader_config c = config(3, 2, 8);
    loader *p = loader_create(&c, &e);
    cr_assert_not_null(p, "%s", e.msg);
    cr_assert_eq(loader_ring_slots(p), 6);
    size_t bytes;
    void *ring = loader_ring(p, &bytes);
    cr_assert_not_null(ring);
    cr_assert_eq((uintptr_t)ring % 4096, 0, "the ring is page aligned (for cudaHostRegister)");
    cr_assert_eq(bytes, 6 * 4096);
    load_pass keep = {.kind = LOAD_PASS_EVAL, .batch = 8};
    load_pass drop = {.kind = LOAD_PASS_EVAL, .batch = 8, .drop_last = 1};
    int a = loader_post(p, &keep), d = loader_post(p, &drop);
    cr_assert_eq(load_pass_batches(p, a), 8);
    cr_assert_eq(load_pass_batches(p, d), 7);
    loader_batch b;
    uint32_t sizes[16];
    int n = 0;
    while (loader_next(p, &b, &e) == LOADER_OK) {
        sizes[n++] = b.count;
        if (b.pass == 0) /* no shuffle: identity order */
            cr_assert_eq(b.indices[0], b.index * 8);
        loader_release(p, &b);
    }
    loader_destroy(p);
    cr_assert_eq(n, 15);
    cr_assert_eq(sizes[7], 1, "57 = 7 x 8 + 1: the last batch of the first pass has 1 sample");
    for (int i = 8; i < 15; i++)
        cr_assert_eq(sizes[i], 8);

    loader_config z = config(0, 2, 8);
    p = loader_create(&z, &e);
    cr_assert_eq(loader_ring_slots(p), 1, "0 workers: one slot");
    loader_destroy(p);
}

Test(loader, several_batches_held_at_once)
{
    /* an asynchronous copy holds slots for a while: release out of order;
     * a held batch's bytes stay as they were delivered while the workers
     * fill the other slots */
    errbuf e;
    loader_config c = config(2, 2, 8);
    loader *p = loader_create(&c, &e);
    load_pass j = {.kind = LOAD_PASS_TRAIN, .batch = 8, .shuffle = 1};
    loader_post(p, &j);
    loader_batch held[3];
    uint8_t copy[3][8 * SAMPLE];
    uint32_t idx[3][8];
    int n = 0;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(loader_next(p, &held[i], &e), LOADER_OK, "%s", e.msg);
        memcpy(copy[i], held[i].data, held[i].count * SAMPLE);
        memcpy(idx[i], held[i].indices, held[i].count * sizeof(uint32_t));
        n++;
    }
    usleep(100000); /* the workers fill every free slot meanwhile */
    for (int i = 0; i < 3; i++) {
        cr_assert(memcmp(copy[i], held[i].data, held[i].count * SAMPLE) == 0,
                  "held batch %d was overwritten", i);
        cr_assert(memcmp(idx[i], held[i].indices, held[i].count * sizeof(uint32_t)) == 0);
    }
    loader_release(p, &held[1]);
    usleep(50000);
    cr_assert(memcmp(copy[0], held[0].data, held[0].count * SAMPLE) == 0,
              "batch 0 overwritten after batch 1 was released");
    cr_assert(memcmp(copy[2], held[2].data, held[2].count * SAMPLE) == 0,
              "batch 2 overwritten after batch 1 was released");
    loader_release(p, &held[0]);
    usleep(50000);
    cr_assert(memcmp(copy[2], held[2].data, held[2].count * SAMPLE) == 0,
              "batch 2 overwritten after batches 0 and 1 were released");
    loader_release(p, &held[2]);
    loader_batch b;
    while (loader_next(p, &b, &e) == LOADER_OK) {
        n++;
        loader_release(p, &b);
    }
    cr_assert_eq(n, 8);
    loader_destroy(p);
}

Test(loader, bad_sample_names_csv_line_and_file)
{
    teardown();
    make_set(17);
    for (int workers = 0; workers <= 2; workers += 2) {
        errbuf e;
        loader_config c = config(workers, 2, 8);
        loader *p = loader_create(&c, &e);
        load_pass j = {.kind = LOAD_PASS_EVAL, .batch = 8};
        loader_post(p, &j);
        loader_batch b;
        int rc;
        while ((rc = loader_next(p, &b, &e)) == LOADER_OK)
            loader_release(p, &b);
        loader_destroy(p);
        cr_assert_eq(rc, LOADER_BAD_SAMPLE);
        char *want;
        cr_assert(asprintf(&want, "%s:19: %s: corrupt sample", ds.csv_path, dataset_path(&ds, 17)) >
                  0);
        cr_assert_str_eq(e.msg, want, "workers %d", workers);
        free(want);
    }
}

Test(loader, skip_bad_replaces_deterministically)
{
    teardown();
    make_set(17);
    uint64_t d[2];
    for (int k = 0; k < 2; k++) {
        errbuf e;
        loader_config c = config(k * 3, 2, 8);
        c.skip_bad = 1;
        loader *p = loader_create(&c, &e);
        load_pass j = {.kind = LOAD_PASS_TRAIN, .batch = 8, .shuffle = 1};
        loader_post(p, &j);
        loader_batch b;
        uint32_t skipped = 0;
        d[k] = 0;
        while (loader_next(p, &b, &e) == LOADER_OK) {
            skipped += b.skipped;
            for (uint32_t i = 0; i < b.count; i++)
                cr_assert_neq(b.indices[i], 17);
            d[k] = hash64(b.data, b.count * SAMPLE, d[k]);
            d[k] = hash64(b.indices, b.count * 4, d[k]);
            loader_release(p, &b);
        }
        loader_destroy(p);
        cr_assert_eq(skipped, 1);
    }
    cr_assert_eq(d[0], d[1]);
}

static void consume_killing_worker(loader_config c, uint64_t *digest, int *status, char *msg,
                                   loader_stats *st)
{
    errbuf e;
    loader *p = loader_create(&c, &e);
    cr_assert_not_null(p, "%s", e.msg);
    for (int ep = 0; ep < 2; ep++) {
        load_pass j = {.kind = LOAD_PASS_TRAIN, .epoch = (uint32_t)ep, .batch = 8, .shuffle = 1};
        loader_post(p, &j);
    }
    loader_batch b;
    int rc, n = 0;
    *digest = 0;
    while ((rc = loader_next(p, &b, &e)) == LOADER_OK) {
        *digest = hash64(b.data, b.count * SAMPLE, *digest);
        *digest = hash64(b.indices, b.count * 4, *digest);
        loader_release(p, &b);
        if (++n == 3) {
            int pids[8];
            int np = loader_pids(p, pids, 8);
            cr_assert_geq(np, 3, "supervisor + 2 workers");
            usleep(5000);           /* let it claim its next batch */
            kill(pids[1], SIGKILL); /* pids[0] is the supervisor */
        }
    }
    *status = rc;
    strcpy(msg, e.msg);
    loader_get_stats(p, st);
    loader_destroy(p);
}

Test(loader, killed_worker_is_named_and_fails)
{
    slow_us = 20000; /* slow enough that the worker is busy when killed */
    uint64_t d;
    int rc;
    char msg[ERR_MAX];
    loader_stats st;
    double t0 = now_sec();
    consume_killing_worker(config(2, 1, 8), &d, &rc, msg, &st);
    cr_assert_eq(rc, LOADER_WORKER_LOST);
    cr_assert(strstr(msg, "loader worker ") && strstr(msg, "was killed by signal 9 (Killed)"), "%s",
              msg);
    cr_assert(strstr(msg, "(pid "), "%s", msg);
    cr_assert(now_sec() - t0 < 20, "detected promptly");
}

Test(loader, respawn_survives_with_the_same_batches)
{
    slow_us = 20000;
    loader_config c = config(2, 1, 8);
    c.respawn = 1;
    uint64_t d;
    int rc;
    char msg[ERR_MAX];
    loader_stats st;
    consume_killing_worker(c, &d, &rc, msg, &st);
    cr_assert_eq(rc, LOADER_END, "%s", msg);
    cr_assert_eq(st.respawns, 1);
    /* the run continues; the two epochs match an undisturbed run (hashed
     * as consume_killing_worker hashes) */
    uint64_t ref2 = 0;
    {
        errbuf e;
        loader_config z = config(0, 1, 8);
        loader *p = loader_create(&z, &e);
        for (int ep = 0; ep < 2; ep++) {
            load_pass j = {
                .kind = LOAD_PASS_TRAIN, .epoch = (uint32_t)ep, .batch = 8, .shuffle = 1};
            loader_post(p, &j);
        }
        loader_batch b;
        while (loader_next(p, &b, &e) == LOADER_OK) {
            ref2 = hash64(b.data, b.count * SAMPLE, ref2);
            ref2 = hash64(b.indices, b.count * 4, ref2);
            loader_release(p, &b);
        }
        loader_destroy(p);
    }
    cr_assert_eq(d, ref2);
}

Test(loader, timeout_names_the_batch_and_worker)
{
    slow_us = 1500000; /* 1.5 s on every 5th sample */
    errbuf e;
    loader_config c = config(1, 1, 8);
    c.timeout = 0.5;
    loader *p = loader_create(&c, &e);
    load_pass j = {.kind = LOAD_PASS_EVAL, .batch = 8};
    loader_post(p, &j);
    loader_batch b;
    int rc = loader_next(p, &b, &e);
    loader_destroy(p);
    cr_assert_eq(rc, LOADER_WORKER_LOST);
    cr_assert(strstr(e.msg, "timeout: validation batch 0 of epoch 1 not delivered within 0.5 s "
                            "(loader worker 0, pid "),
              "%s", e.msg);
}

Test(loader, no_process_outlives_destroy)
{
    errbuf e;
    loader_config c = config(3, 2, 8);
    loader *p = loader_create(&c, &e);
    load_pass j = {.kind = LOAD_PASS_TRAIN, .batch = 8};
    loader_post(p, &j);
    loader_batch b;
    cr_assert_eq(loader_next(p, &b, &e), LOADER_OK);
    int pids[8], n = loader_pids(p, pids, 8);
    for (int t = 0; t < 1000 && n < 4; t++) { /* the supervisor forks them one by one */
        usleep(1000);
        n = loader_pids(p, pids, 8);
    }
    cr_assert_eq(n, 4);
    loader_destroy(p); /* mid-epoch, batches in flight */
    for (int i = 0; i < n; i++)
        cr_assert(!process_alive(pids[i]), "pid %d still exists", pids[i]);
    cr_assert_eq(count_children(getpid()), 0);
}

Test(loader, workers_die_with_the_main_process)
{
    /* a child process creates a pool and is killed: its workers follow */
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t child = fork();
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test does not leave it paused */
        errbuf e;
        loader_config c = config(2, 2, 8);
        loader *p = loader_create(&c, &e);
        int pids[8], n = loader_pids(p, pids, 8);
        while (n < 3) { /* wait until both workers are forked */
            usleep(1000);
            n = loader_pids(p, pids, 8);
        }
        if (write(fds[1], pids, sizeof(int) * 3) < 0)
            _exit(1);
        pause();
        _exit(0);
    }
    close(fds[1]);
    int pids[3];
    cr_assert_eq(read(fds[0], pids, sizeof pids), (ssize_t)sizeof pids);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    for (int i = 0; i < 3; i++)
        cr_assert(wait_process_gone(pids[i], 2), "pid %d outlived its main process", pids[i]);
}

Test(loader, sampler_is_a_permutation_keyed_by_seed_epoch)
{
    uint32_t a[100], b[100], c[100];
    sampler_permutation(a, 100, 1, 0, 0, 1);
    sampler_permutation(b, 100, 1, 0, 0, 1);
    sampler_permutation(c, 100, 1, 1, 0, 1);
    cr_assert(memcmp(a, b, sizeof a) == 0);
    cr_assert(memcmp(a, c, sizeof a) != 0);
    int seen[100] = {0};
    for (int i = 0; i < 100; i++)
        seen[a[i]]++;
    for (int i = 0; i < 100; i++)
        cr_assert_eq(seen[i], 1);
    sampler_permutation(a, 100, 1, 0, 0, 0);
    for (int i = 0; i < 100; i++)
        cr_assert_eq(a[i], (uint32_t)i);
    cr_assert_eq(sampler_batches(57, 8, 0), 8);
    cr_assert_eq(sampler_batches(57, 8, 1), 7);
    cr_assert_eq(sampler_batch_size(57, 8, 7), 1);
    cr_assert_eq(sampler_batch_size(57, 8, 8), 0);
}

/* after_previous: the preload build must be complete before training reads
 * the cache. The load function fails if a training sample is asked for
 * before main has released every batch of the first pass. */
static volatile int *released_all;

static int load_ordered(void *wc, int src, uint32_t index, load_pass_kind kind, rng *r,
                        uint8_t *out, errbuf *e)
{
    if (kind == LOAD_PASS_TRAIN && !*released_all)
        return errf(e, "sample %u started before the previous pass was released", index);
    if (kind == LOAD_PASS_BUILD) {
        usleep(2000);
        return 0;
    }
    return load(wc, src, index, kind, r, out, e);
}

Test(loader, after_previous_waits_for_every_earlier_batch)
{
    released_all = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    *released_all = 0;
    errbuf e;
    loader_config c = config(3, 2, 8);
    c.load = load_ordered;
    loader *p = loader_create(&c, &e);
    load_pass build = {.kind = LOAD_PASS_BUILD, .batch = 8};
    load_pass train = {.kind = LOAD_PASS_TRAIN, .batch = 8, .shuffle = 1, .after_previous = 1};
    int bj = loader_post(p, &build);
    loader_post(p, &train);
    loader_batch b;
    int rc, n = 0;
    while ((rc = loader_next(p, &b, &e)) == LOADER_OK) {
        if (b.pass == bj && b.index + 1 == load_pass_batches(p, bj))
            *released_all = 1; /* set before the release that lets training start */
        loader_release(p, &b);
        n++;
    }
    loader_destroy(p);
    cr_assert_eq(rc, LOADER_END, "%s", e.msg);
    cr_assert_eq(n, 16);
    munmap((void *)released_all, 4096);
}

/* Data-parallel ranks: every batch of one epoch as rank `rank` of `ranks`
 * loads it — per batch its count, then its sample indices and bytes
 * appended to idx / bytes. Returns the number of batches. */
static int rank_order; /* LOAD_ORDER_* of rank_epoch's pass */

static int rank_epoch(uint32_t rank, uint32_t ranks, int workers, uint32_t *counts, uint32_t *idx,
                      uint8_t *bytes)
{
    errbuf e;
    loader_config c = config(workers, 2, 8);
    loader *p = loader_create(&c, &e);
    cr_assert_not_null(p, "%s", e.msg);
    load_pass j = {.kind = LOAD_PASS_TRAIN,
                   .epoch = 3,
                   .batch = 8,
                   .shuffle = 1,
                   .rank = rank,
                   .ranks = ranks,
                   .order = rank_order,
                   .shuffle_buffer = 5};
    loader_post(p, &j);
    loader_batch b;
    int n = 0, rc;
    size_t at = 0;
    while ((rc = loader_next(p, &b, &e)) == LOADER_OK) {
        counts[n++] = b.count;
        memcpy(idx + at, b.indices, b.count * sizeof *idx);
        memcpy(bytes + at * SAMPLE, b.data, (size_t)b.count * SAMPLE);
        at += b.count;
        loader_release(p, &b);
    }
    cr_assert_eq(rc, LOADER_END, "%s", e.msg);
    loader_destroy(p);
    return n;
}

/* 57 samples in batches of 8: the last batch holds one sample, so with
 * 2 or 3 ranks some slices of it are empty (and nothing is padded) */
static void ranks_slice(const uint32_t *want)
{
    uint32_t counts[8], idx[NSAMPLES];
    uint8_t bytes[NSAMPLES * SAMPLE];
    int nb = rank_epoch(0, 1, 0, counts, idx, bytes);
    cr_assert_eq(nb, 8);
    if (want)
        cr_assert_arr_eq(idx, want, sizeof idx, "one rank: not the order asked for");
    for (uint32_t ranks = 2; ranks <= 3; ranks++) {
        uint32_t rc[3][8], ri[3][NSAMPLES], at[3] = {0};
        static uint8_t rb[3][NSAMPLES * SAMPLE];
        for (uint32_t k = 0; k < ranks; k++)
            cr_assert_eq(rank_epoch(k, ranks, 2, rc[k], ri[k], rb[k]), nb,
                         "every rank has every batch");
        size_t pos = 0;
        for (int b = 0; b < nb; b++) {
            uint32_t sum = 0;
            for (uint32_t k = 0; k < ranks; k++) {
                uint32_t c = rc[k][b];
                cr_assert(c == counts[b] / ranks || c == counts[b] / ranks + 1,
                          "batch %d: rank %u has %u of %u samples", b, k, c, counts[b]);
                /* rank k's slice is the next part of the one-rank batch,
                 * sample for sample and byte for byte (same augmentation) */
                cr_assert_arr_eq(ri[k] + at[k], idx + pos + sum, c * sizeof(uint32_t),
                                 "batch %d rank %u of %u: other samples", b, k, ranks);
                cr_assert_arr_eq(rb[k] + (size_t)at[k] * SAMPLE, bytes + (pos + sum) * SAMPLE,
                                 (size_t)c * SAMPLE, "batch %d rank %u: other bytes", b, k);
                at[k] += c;
                sum += c;
            }
            cr_assert_eq(sum, counts[b], "batch %d: the slices add up to the batch", b);
            pos += sum;
        }
        cr_assert_eq(pos, NSAMPLES, "every sample once per epoch over the ranks");
    }
}

Test(loader, ranks_slice_every_batch_into_contiguous_parts_with_the_same_augmentation)
{
    ranks_slice(NULL);
}

Test(loader, the_streaming_order_over_shards_is_sliced_across_ranks_like_the_global_one)
{
    static const uint32_t first[] = {0, 10, 10, 23, 30, 51, NSAMPLES};
    ds.nshards = 6;
    ds.shard_first = malloc(sizeof first); /* dataset_free frees it */
    memcpy(ds.shard_first, first, sizeof first);
    uint32_t want[NSAMPLES], glob[NSAMPLES];
    sampler_shard_order(want, NSAMPLES, first, 6, 1234, 3, 0, 1, 5);
    sampler_permutation(glob, NSAMPLES, 1234, 3, 0, 1);
    cr_assert(memcmp(want, glob, sizeof want) != 0);
    rank_order = LOAD_ORDER_SHARDS;
    ranks_slice(want);
    rank_order = LOAD_ORDER_GLOBAL;
    ranks_slice(glob);
}

Test(loader, slice_bounds_cover_a_batch_once)
{
    for (uint32_t ranks = 1; ranks <= 9; ranks++)
        for (uint32_t count = 0; count <= 20; count++) {
            uint32_t next = 0;
            for (uint32_t r = 0; r < ranks; r++) {
                uint32_t first, n = sampler_slice(count, r, ranks, &first);
                cr_assert_eq(first, next, "count %u ranks %u rank %u", count, ranks, r);
                cr_assert(n == count / ranks || n == count / ranks + 1);
                next += n;
            }
            cr_assert_eq(next, count, "count %u over %u ranks", count, ranks);
        }
}

/* ---------------------------------------------------------------- read-ahead */

/* What the fetcher and the workers did, in shared memory: per unit
 * (samples index / 8), when the fetcher made it local and when its first
 * sample was loaded, and how often it was fetched. */
typedef struct fetch_log {
    _Atomic int fetches[8];
    _Atomic long long fetched_at[8], loaded_at[8]; /* ns, 0: not yet */
    _Atomic int order[16], norder;
    _Atomic int fetcher_pid;
} fetch_log;
static fetch_log *flog;

static long long ns_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static uint32_t unit_of(void *arg, int src, load_pass_kind kind, uint32_t index)
{
    (void)arg, (void)src, (void)kind;
    return index / 8;
}

static void fetch_unit(void *arg, int src, uint32_t index)
{
    (void)arg, (void)src;
    uint32_t u = index / 8;
    atomic_store(&flog->fetcher_pid, getpid());
    long long zero = 0;
    atomic_compare_exchange_strong(&flog->fetched_at[u], &zero, ns_now());
    atomic_fetch_add(&flog->fetches[u], 1);
    int k = atomic_fetch_add(&flog->norder, 1);
    if (k < 16)
        flog->order[k] = (int)u;
}

static int load_logged(void *wc, int src, uint32_t index, load_pass_kind kind, rng *r, uint8_t *out,
                       errbuf *e)
{
    long long zero = 0;
    atomic_compare_exchange_strong(&flog->loaded_at[index / 8], &zero, ns_now());
    usleep(10000); /* slow storage's share of a sample: the fetcher has 80 ms a batch */
    return load(wc, src, index, kind, r, out, e);
}

Test(loader, the_fetcher_makes_each_unit_local_once_before_its_first_sample_is_loaded)
{
    flog = mmap(NULL, sizeof *flog, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(flog, MAP_FAILED);
    for (int workers = 0; workers <= 2; workers += 2) {
        memset(flog, 0, sizeof *flog);
        loader_config c = config(workers, 2, 8);
        c.load = load_logged;
        c.fetch_unit = unit_of;
        c.fetch = fetch_unit;
        c.read_ahead = 2;
        errbuf e;
        loader *p = loader_create(&c, &e);
        cr_assert_not_null(p, "%s", e.msg);
        /* in order (no shuffle): units 0..7 one after another */
        load_pass j = {.src = 0, .kind = LOAD_PASS_EVAL, .batch = 8, .shuffle = 0};
        loader_post(p, &j);
        loader_batch b;
        int n = 0;
        while (loader_next(p, &b, &e) == LOADER_OK) {
            loader_release(p, &b);
            n++;
        }
        cr_assert_eq(n, 8);
        int fpid = atomic_load(&flog->fetcher_pid);
        cr_assert_gt(fpid, 0, "workers %d: no fetcher ran", workers);
        loader_destroy(p);
        cr_assert(kill(fpid, 0) != 0, "the fetcher outlived its loader");
        /* the units of the batches the workers claim at once (one ring,
         * workers x prefetch batches of one unit each), and the next one
         * (the fetcher, a process forked after the workers, may start late
         * on a loaded machine), race the fetcher; every later one is read
         * ahead while the workers are busy (80 ms a batch) */
        int ring = (workers ? workers * 2 : 1) + 1, nf = atomic_load(&flog->norder);
        for (int k = 1; k < nf && k < 16; k++)
            cr_assert_lt(flog->order[k - 1], flog->order[k],
                         "workers %d: fetched out of order: unit %d after %d", workers,
                         flog->order[k], flog->order[k - 1]);
        for (int u = 0; u < 8; u++) {
            int f = atomic_load(&flog->fetches[u]);
            cr_assert_leq(f, 1, "workers %d: unit %d fetched %d times", workers, u, f);
            if (u < ring)
                continue;
            cr_assert_eq(f, 1, "workers %d: unit %d was not read ahead", workers, u);
            cr_assert_lt(
                atomic_load(&flog->fetched_at[u]), atomic_load(&flog->loaded_at[u]),
                "workers %d: unit %d was loaded %.1f ms before it was fetched", workers, u,
                (double)(atomic_load(&flog->fetched_at[u]) - atomic_load(&flog->loaded_at[u])) /
                    1e6);
        }
    }
    munmap(flog, sizeof *flog);
}
