/* test_stage.c — app/stage.c (a loader batch's way to the GPU) driven the
 * way app/run.c's training loop drives it — fetch the next batch before
 * computing on the current one when the stager looks ahead — with a real
 * loader (forked workers, or the main process with 0 workers) and the
 * GPU backend, but with compute that stays queued: each batch is only
 * normalised into its own output, nothing waits for the device until the
 * end. Then every output must be its own batch's data.
 *
 * On the fake (run-fakecuda) each case runs twice: with lazy copies, a ring
 * slot handed back to the loader before its copy ran is caught when the
 * loader rewrites it (the fake checks a copy's host source is unchanged
 * when it runs); with eager copies beside lazy compute, a copy into a
 * device buffer not ordered after the compute still reading it overwrites
 * the batch, and the output shows it. On a real device (run-gpu) the
 * device's own timing decides.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/stage.h"
#include "cuda/gpu.h"
#include "loader/loader.h"
#include "tests/support/gpu_test.h"
#include "tests/support/helpers.h"
#ifdef TRAIN_FAKECUDA
#include "tests/fakecuda/runtime/fake.h"
#endif

enum { NSAMPLES = 40, SB = 48, BATCH = 4 }; /* sample bytes: 1 x 48 "pixels" */

static char *dir;
static dataset ds;

static void setup(void)
{
#ifdef TRAIN_FAKECUDA
    fake_reset();
#endif
    gpu_info g; /* skip before the loader forks its workers */
    gpu_probe(0, &g);
    if (g.status != GPU_OK)
        cr_skip_test("no CUDA device (%s)", g.reason);
    dir = tmpdir_make();
    char csv[64 * NSAMPLES + 32];
    size_t len = (size_t)sprintf(csv, "path,label\n");
    for (int i = 0; i < NSAMPLES; i++) /* the loader below never opens them */
        len += (size_t)sprintf(csv + len, "s/%03d.bin,%d\n", i, i % 3);
    char *p = write_text(dir, "data.csv", csv);
    errbuf e;
    cr_assert_eq(dataset_load(&ds, p, NULL, &e), 0, "%s", e.msg);
    free(p);
}

static void teardown(void)
{
    if (!dir)
        return;
    dataset_free(&ds);
    tmpdir_remove(dir);
}

TestSuite(stage, .init = setup, .fini = teardown);

/* sample i's bytes: distinct per sample and position */
static uint8_t byte_of(uint32_t i, int k) { return (uint8_t)(i * 37 + (uint32_t)k * 11 + 5); }

static int load(void *wc, int src, uint32_t index, load_pass_kind kind, rng *r, uint8_t *out,
                errbuf *e)
{
    (void)wc, (void)src, (void)kind, (void)r, (void)e;
    for (int k = 0; k < SB; k++)
        out[k] = byte_of(index, k);
    return 0;
}

static void *winit(void *arg) { return arg; }
static void wfini(void *w) { (void)w; }

typedef struct batch_rec {
    float *out; /* device: the normalised batch */
    uint32_t count, indices[BATCH];
} batch_rec;

typedef struct run {
    backend *be;
    loader *ldr;
    stager *stager;
    batch_rec *recs;
    int nrecs;
    int sync_steps; /* each step waits for the device, as model_train_step does */
    int workers;
} run;

/* run.c's fetch: room first, then the next batch onto the device */
static int fetch(run *r, loader_batch *b, const uint8_t **dev)
{
    stager_make_room(r->stager);
    errbuf e;
    int rc = loader_next(r->ldr, b, &e);
    if (rc == LOADER_END)
        return 0;
    cr_assert_eq(rc, LOADER_OK, "%s", e.msg);
    *dev = stager_push(r->stager, b);
    return 1;
}

/* run.c's step: normalise into the batch's own output, and read what the
 * slot holds besides pixels (labels there, sample indices here) */
static void process(run *r, const loader_batch *b, const uint8_t *dev)
{
    static const float mean = 0.5f, sd = 0.25f;
    batch_rec *rec = &r->recs[r->nrecs++];
    if (r->workers > 0) /* time for a worker to refill the slot if it was given back */
        usleep(3000);
    rec->count = b->count;
    memcpy(rec->indices, b->indices, b->count * sizeof *b->indices);
    stager_begin(r->stager, b);
    r->be->ops->normalize_u8(r->be, rec->out, dev, (int)b->count, 1, SB, &mean, &sd);
    if (r->sync_steps)
        r->be->ops->synchronize(r->be);
    stager_done(r->stager, b);
}

static void check_case(int workers, int non_blocking, int pin, int eager, int sync_steps)
{
    (void)eager;
    loader_config c = {.workers = workers,
                       .prefetch = 2,
                       .batch = BATCH,
                       .sample_bytes = SB,
                       .nsrc = 1,
                       .seed = 3,
                       .load = load,
                       .worker_init = winit,
                       .worker_fini = wfini};
    c.src[0] = &ds;
    errbuf e = {{0}};
    run r = {.sync_steps = sync_steps, .workers = workers};
    r.ldr = loader_create(&c, &e); /* before the device, as in run.c */
    cr_assert_not_null(r.ldr, "%s", e.msg);
    load_pass j = {.src = 0, .kind = LOAD_PASS_TRAIN, .batch = BATCH, .shuffle = 1};
    loader_post(r.ldr, &j);
    int nb = (int)load_pass_batches(r.ldr, 0);
    r.be = gt_backend();
#ifdef TRAIN_FAKECUDA
    fake_set_eager_copies(eager);
#endif
    r.recs = calloc((size_t)nb, sizeof *r.recs);
    for (int i = 0; i < nb; i++) /* alloc synchronises: all before the loop */
        r.recs[i].out = r.be->ops->alloc(r.be, sizeof(float) * BATCH * SB);
    char note[256];
    r.stager = stager_create(r.be, r.ldr, SB, BATCH, pin, non_blocking, 0, note, sizeof note, &e);
    cr_assert_not_null(r.stager, "%s", e.msg);
    if (non_blocking && !pin) /* copies from pageable memory hold the host: said */
        cr_expect(strstr(note, "pageable memory"), "%s", note);
    else
        cr_expect_str_eq(note, "");
    /* looking ahead needs a second slot: 0 workers fill the only one */
    cr_expect_eq(stager_lookahead(r.stager), non_blocking && workers > 0);
    cr_expect_eq(stager_pinned_bytes(r.stager) > 0, pin, "pinned %zu bytes",
                 stager_pinned_bytes(r.stager));

    loader_batch cur, nxt;
    const uint8_t *cur_dev, *nxt_dev = NULL;
    int have = fetch(&r, &nxt, &nxt_dev), look = stager_lookahead(r.stager);
    while (have) {
        cur = nxt;
        cur_dev = nxt_dev;
        if (look)
            have = fetch(&r, &nxt, &nxt_dev);
        process(&r, &cur, cur_dev);
        if (!look)
            have = fetch(&r, &nxt, &nxt_dev);
    }
    cr_assert_eq(r.nrecs, nb);
    stager_free(r.stager);

    float want[BATCH * SB];
    for (int i = 0; i < nb; i++) {
        batch_rec *rec = &r.recs[i];
        for (uint32_t s = 0; s < rec->count; s++)
            for (int k = 0; k < SB; k++)
                want[s * SB + k] = (byte_of(rec->indices[s], k) / 255.0f - 0.5f) / 0.25f;
        char what[64];
        snprintf(what, sizeof what, "batch %d (samples %u, ...)", i, rec->indices[0]);
        gt_expect_dev(r.be, what, rec->out, want, rec->count * SB);
        r.be->ops->free(r.be, rec->out);
    }
    free(r.recs);
    gt_done(r.be); /* on the fake: no misuse (a slot rewritten under its copy), nothing leaked */
    loader_destroy(r.ldr);
}

/* workers, non-blocking, pin: steps that wait for the device (as training's
 * do) and steps that do not; on the fake, lazy copies (a missing wait for
 * a copy shows) and eager copies beside lazy compute (a copy overtaking
 * the compute that reads its buffer shows) */
static void both(int workers, int non_blocking, int pin)
{
    check_case(workers, non_blocking, pin, 0, 1);
#ifdef TRAIN_FAKECUDA
    fake_reset();
#endif
    check_case(workers, non_blocking, pin, 0, 0);
#ifdef TRAIN_FAKECUDA
    fake_reset();
    check_case(workers, non_blocking, pin, 1, 0);
#endif
}

Test(stage, blocking_pageable_main_process) { both(0, 0, 0); }
Test(stage, blocking_pinned_two_workers) { both(2, 0, 1); }
Test(stage, non_blocking_pageable_main_process) { both(0, 1, 0); }
Test(stage, non_blocking_pinned_main_process) { both(0, 1, 1); }
Test(stage, non_blocking_pinned_two_workers) { both(2, 1, 1); }
