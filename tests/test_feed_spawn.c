/* test_feed_spawn.c — the loader started the Python module's way
 * (app/feed.c, loader_config.spawn_argv): the shared memory is a memfd and
 * the supervisor is a separate program (trainloader-supervisor, built with
 * the sanitizers beside build/asan/train) started by posix_spawn from a
 * process that has threads. It must give the same batches, byte for byte,
 * as the forked loader of `train`, and leave no process behind. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/feed.h"
#include "support/helpers.h"

typedef struct pass {
    uint32_t nb, count[64];
    uint32_t idx[64][16];
    uint8_t *data[64];
} pass;

static void *idle(void *arg)
{
    int *stop = arg;
    while (!__atomic_load_n(stop, __ATOMIC_SEQ_CST))
        usleep(1000);
    return NULL;
}

static char *supervisor_path(void)
{
    char *dir = strdup(train_bin()), *slash = strrchr(dir, '/');
    *slash = 0;
    char *p = path_join(dir, "trainloader-supervisor");
    free(dir);
    return p;
}

/* One training pass (epoch 1) of the loader of argv, spawned or forked. */
static void one_pass(int argc, char **argv, int spawn, pass *out, int *pids, int *npids)
{
    options o;
    errbuf e = {{0}};
    cr_assert_eq(options_parse_to(&o, argc, argv, &e), 0, "%s", e.msg);
    feed r;
    cr_assert_eq(feed_open(&r, &o, FEED_FORK, 0, 1, &e), RUN_OK, "%s", e.msg);
    char **sargv = calloc((size_t)argc + 1, sizeof *sargv);
    sargv[0] = supervisor_path();
    for (int i = 1; i < argc; i++)
        sargv[i] = argv[i];
    loader_config extra = {.spawn_argv = spawn ? sargv : NULL};
    cr_assert_eq(feed_loader(&r, &extra, &e), RUN_OK, "%s", e.msg);
    load_job j = {
        .src = 0, .kind = LOAD_JOB_TRAIN, .epoch = 1, .batch = (uint32_t)r.batch, .shuffle = 1};
    int id = loader_post(r.ldr, &j);
    out->nb = load_job_batches(r.ldr, id);
    cr_assert(out->nb > 1 && out->nb <= 64);
    for (uint32_t b = 0; b < out->nb; b++) {
        loader_batch lb;
        cr_assert_eq(loader_next(r.ldr, &lb, &e), LOADER_OK, "%s", e.msg);
        out->count[b] = lb.count;
        memcpy(out->idx[b], lb.indices, lb.count * sizeof *lb.indices);
        out->data[b] = malloc(lb.count * r.sample_bytes);
        memcpy(out->data[b], lb.data, lb.count * r.sample_bytes);
        loader_release(r.ldr, &lb);
    }
    /* a worker records its pid when it starts: under load the pass can end
     * (another worker made every batch) before the last one has */
    for (int tries = 0; (*npids = loader_pids(r.ldr, pids, 8)) < 1 + o.workers.v[0] && tries < 500;
         tries++)
        usleep(10000);
    char link[64], exe[4096] = "";
    snprintf(link, sizeof link, "/proc/%d/exe", pids[0]);
    cr_assert(readlink(link, exe, sizeof exe - 1) > 0);
    const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
    if (spawn) /* a program of its own, not a fork of this threaded process */
        cr_assert_str_eq(base, "trainloader-supervisor");
    else
        cr_assert_str_neq(base, "trainloader-supervisor");
    feed_close(&r);
    free(sargv[0]);
    free(sargv);
    options_free(&o);
}

Test(feed_spawn, spawned_supervisor_gives_the_forked_loaders_batches)
{
    char *dir = tmpdir_make(), *fm = make_fashion_subset(dir, 90);
    char *csv = path_join(fm, "train.csv");
    char *argv[] = {"train", "--loader-only", "--batch",    "16", "--workers", "2", "--crop",
                    "24",    "--random-crop", "--channels", "1",  "--seed",    "9", csv};
    int argc = (int)(sizeof argv / sizeof *argv);
    int stop = 0;
    pthread_t t;
    pthread_create(&t, NULL, idle, &stop); /* a threaded caller, as Python with torch */
    pass forked, spawned;
    int fp[8], sp[8], nf, ns;
    one_pass(argc, argv, 0, &forked, fp, &nf);
    one_pass(argc, argv, 1, &spawned, sp, &ns);
    __atomic_store_n(&stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(t, NULL);
    cr_assert_eq(spawned.nb, forked.nb);
    for (uint32_t b = 0; b < forked.nb; b++) {
        cr_assert_eq(spawned.count[b], forked.count[b]);
        cr_assert_arr_eq(spawned.idx[b], forked.idx[b], forked.count[b] * sizeof(uint32_t));
        cr_assert_arr_eq(spawned.data[b], forked.data[b], forked.count[b] * 24 * 24,
                         "batch %u differs", b);
        free(spawned.data[b]);
        free(forked.data[b]);
    }
    cr_assert_eq(ns, 3, "the supervisor and 2 workers");
    for (int i = 0; i < ns; i++)
        cr_assert(!process_alive(sp[i]), "pid %d outlived the loader", sp[i]);
    free(csv);
    free(fm);
    tmpdir_remove(dir);
}

Test(feed_spawn, supervisor_refuses_another_configuration)
{
    /* a supervisor started with other options than the caller's must not
     * serve a ring of another size: the size check names the mismatch */
    char *dir = tmpdir_make(), *fm = make_fashion_subset(dir, 40);
    char *csv = path_join(fm, "train.csv");
    char *argv[] = {"train", "--loader-only", "--batch", "8", "--workers",
                    "1",     "--channels",    "1",       csv};
    options o;
    errbuf e = {{0}};
    cr_assert_eq(options_parse_to(&o, 9, argv, &e), 0, "%s", e.msg);
    feed r;
    cr_assert_eq(feed_open(&r, &o, FEED_FORK, 0, 1, &e), RUN_OK, "%s", e.msg);
    char *sup = supervisor_path();
    char *sargv[] = {sup, "--loader-only", "--batch", "32", "--workers",
                     "1", "--channels",    "1",       csv,  NULL};
    loader_config extra = {.spawn_argv = sargv};
    cr_assert_eq(feed_loader(&r, &extra, &e), RUN_OK, "%s", e.msg);
    load_job j = {.src = 0, .kind = LOAD_JOB_TRAIN, .batch = 8};
    loader_post(r.ldr, &j);
    loader_batch b;
    cr_assert_eq(loader_next(r.ldr, &b, &e), LOADER_WORKER_LOST);
    cr_assert(strstr(e.msg, "supervisor"), "%s", e.msg);
    feed_close(&r);
    options_free(&o);
    free(sup);
    free(csv);
    free(fm);
    tmpdir_remove(dir);
}
