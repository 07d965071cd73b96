/* test_diagnose.c — the bottleneck verdict (pure) and --diagnose /
 * --workers auto end to end with an artificially heavy model or slow
 * loader (the --test-slow-* hooks burn CPU per step or per sample). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/diagnose.h"
#include "common/util.h"
#include "tests/support/helpers.h"

Test(verdict, compute_bound_when_the_pipeline_runs_at_model_speed)
{
    diag_rates r = {
        .full = 950, .loader = 5000, .read_only = 40000, .model = 1000, .workers = 2, .cores = 2};
    char t[512];
    cr_assert_eq(diagnose_verdict(&r, t, sizeof t), VERDICT_COMPUTE_BOUND);
    cr_assert(
        strstr(t, "compute-bound: the model consumes 1000 img/s and the loader delivers 5000"),
        "%s", t);
}

/* Each clause of the verdict decides on its own: the pipeline running at
 * model speed with a loader that is barely faster, and a loader with 15%
 * to spare with a pipeline that is not there yet. The thresholds are the
 * documented ones (0.85 of the model, 1.15 of the model, 1.3 of the loader). */
Test(verdict, pipeline_at_model_speed_alone_is_compute_bound)
{
    diag_rates r = {
        .full = 900, .loader = 1000, .read_only = 40000, .model = 1000, .workers = 2, .cores = 2};
    char t[512];
    cr_assert_eq(diagnose_verdict(&r, t, sizeof t), VERDICT_COMPUTE_BOUND, "%s", t);
    cr_assert(strstr(t, "the full pipeline runs at 900 img/s"), "%s", t);
    r.full = 849; /* just below 0.85 of the model: the loader decides */
    cr_assert_eq(diagnose_verdict(&r, t, sizeof t), VERDICT_DECODE_BOUND, "%s", t);
    r.full = 851;
    cr_assert_eq(diagnose_verdict(&r, t, sizeof t), VERDICT_COMPUTE_BOUND, "%s", t);
}

Test(verdict, loader_with_room_to_spare_alone_is_compute_bound)
{
    diag_rates r = {
        .full = 500, .loader = 1151, .read_only = 40000, .model = 1000, .workers = 2, .cores = 2};
    char t[512];
    cr_assert_eq(diagnose_verdict(&r, t, sizeof t), VERDICT_COMPUTE_BOUND, "%s", t);
    r.loader = 1149;
    cr_assert_eq(diagnose_verdict(&r, t, sizeof t), VERDICT_DECODE_BOUND, "%s", t);
    cr_assert(strstr(t, "the loader delivers 1149 img/s, the model consumes 1000 img/s"), "%s", t);
}

Test(verdict, storage_threshold_and_advice_arithmetic)
{
    /* reading alone at 1.3x the loader is storage-bound; above it decode */
    diag_rates r = {
        .full = 400, .loader = 500, .read_only = 650, .model = 2000, .workers = 3, .cores = 64};
    char t[512];
    cr_assert_eq(diagnose_verdict(&r, t, sizeof t), VERDICT_STORAGE_BOUND, "%s", t);
    cr_assert(strstr(t, "reading the files alone runs at 650 img/s (77% of loader time)"), "%s", t);
    cr_assert(strstr(t, "try --workers 12 or"), "3 workers x 2000 / 500 = 12: %s", t);
    r.read_only = 651;
    cr_assert_eq(diagnose_verdict(&r, t, sizeof t), VERDICT_DECODE_BOUND, "%s", t);
    cr_assert(strstr(t, "decode is 23% of loader time -> try --workers 12 or --mode preload"), "%s",
              t);
    r.workers = 0; /* the main process loads: counts as one worker */
    diagnose_verdict(&r, t, sizeof t);
    cr_assert(strstr(t, "try --workers 4 or"), "%s", t);
    r.cores = 3;
    diagnose_verdict(&r, t, sizeof t);
    cr_assert(strstr(t, "--workers 4 would be needed but there are 3 cores"), "%s", t);
    r.cores = 4;
    diagnose_verdict(&r, t, sizeof t);
    cr_assert(strstr(t, "try --workers 4 or"), "as many workers as cores is possible: %s", t);
    r.read_only = NAN; /* the read-only phase failed: no storage verdict */
    cr_assert_eq(diagnose_verdict(&r, t, sizeof t), VERDICT_DECODE_BOUND, "%s", t);
}

Test(verdict, unknown_when_any_phase_failed)
{
    const diag_rates base = {
        .full = 300, .loader = 320, .read_only = 350, .model = 9000, .workers = 1, .cores = 2};
    char t[512];
    for (int k = 0; k < 3; k++) {
        diag_rates r = base;
        *(k == 0 ? &r.full : k == 1 ? &r.loader : &r.model) = NAN;
        cr_assert_eq(diagnose_verdict(&r, t, sizeof t), VERDICT_UNKNOWN, "phase %d failed: %s", k,
                     t);
    }
}

Test(verdict, decode_bound_names_the_decode_share_and_workers)
{
    diag_rates r = {
        .full = 1100, .loader = 1150, .read_only = 6050, .model = 8900, .workers = 2, .cores = 16};
    char t[512];
    cr_assert_eq(diagnose_verdict(&r, t, sizeof t), VERDICT_DECODE_BOUND);
    cr_assert(strstr(t,
                     "data-bound: the loader delivers 1150 img/s, the model consumes 8900 img/s; "
                     "decode is 81% of loader time -> try --workers 16 or --mode preload"),
              "%s", t);
    r.cores = 4;
    diagnose_verdict(&r, t, sizeof t);
    cr_assert(strstr(t, "--workers 16 would be needed but there are 4 cores: use --mode preload"),
              "%s", t);
}

Test(verdict, storage_bound_when_reading_alone_is_as_slow)
{
    diag_rates r = {
        .full = 300, .loader = 320, .read_only = 350, .model = 9000, .workers = 4, .cores = 8};
    char t[512];
    cr_assert_eq(diagnose_verdict(&r, t, sizeof t), VERDICT_STORAGE_BOUND);
    cr_assert(strstr(t, "storage-bound"), "%s", t);
}

/* Remote shards: a loader that spent at least half of its fill time
 * waiting for shards is I/O-bound, naming the server, the rate and the
 * requests; below half, the verdict is the local one. */
Test(verdict, io_bound_when_the_loader_waits_for_shards)
{
    diag_rates r = {.full = 300,
                    .loader = 320,
                    .read_only = 2000,
                    .model = 9000,
                    .workers = 4,
                    .cores = 8,
                    .remote = 1,
                    .host = "https://data.example",
                    .io_wait_s = 5,
                    .fill_s = 10,
                    .io_mb_s = 12.5,
                    .io_requests = 40,
                    .io_bytes = 40 * 1024.0 * 1024.0};
    char t[512];
    cr_assert_eq(diagnose_verdict(&r, t, sizeof t), VERDICT_IO_BOUND, "%s", t);
    cr_assert(strstr(t, "I/O-bound: the loader delivers 320 img/s, the model consumes 9000 img/s; "
                        "the loader spent 50% of its fill time waiting for shards from "
                        "https://data.example: 12.50 MB/s over 40 requests"),
              "%s", t);
    /* 4 x 9000 / 320 = 113 workers: more than the cores, which waiting does not need */
    cr_assert(strstr(t, "--workers 113: downloads run in parallel"), "%s", t);
    cr_assert(strstr(t, "--shard-cache DIR") && strstr(t, "--mode preload"), "%s", t);
    cr_assert(strstr(t, "bigger shards (1.00 MB per request now"), "1 MB requests: %s", t);
    r.io_bytes = 40 * 64 * 1024.0 * 1024.0; /* 64 MB shards: big enough */
    diagnose_verdict(&r, t, sizeof t);
    cr_assert(!strstr(t, "bigger shards"), "%s", t);
    r.io_wait_s = 4.9; /* under half: not I/O */
    cr_assert_eq(diagnose_verdict(&r, t, sizeof t), VERDICT_DECODE_BOUND, "%s", t);
    r.io_wait_s = 9;
    r.remote = 0; /* local data: the I/O counters say nothing */
    cr_assert_eq(diagnose_verdict(&r, t, sizeof t), VERDICT_DECODE_BOUND, "%s", t);
    r.remote = 1;
    r.full = 8000; /* the model is the limit: waiting loaders do not matter */
    cr_assert_eq(diagnose_verdict(&r, t, sizeof t), VERDICT_COMPUTE_BOUND, "%s", t);
}

Test(verdict, unknown_when_a_phase_failed)
{
    diag_rates r = {.full = NAN, .loader = 320, .read_only = 350, .model = 9000};
    char t[512];
    cr_assert_eq(diagnose_verdict(&r, t, sizeof t), VERDICT_UNKNOWN);
}

static char *dir, *csv;

static void setup(void)
{
    dir = tmpdir_make();
    char *fm = make_fashion_subset(dir, 256);
    csv = path_join(fm, "train.csv");
    free(fm);
}

static void teardown(void)
{
    free(csv);
    tmpdir_remove(dir);
}

TestSuite(diagnose, .init = setup, .fini = teardown);

static void run(run_result *r, char *const extra[])
{
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)train_bin();
    for (int i = 0; extra[i]; i++)
        argv[n++] = extra[i];
    argv[n++] = csv;
    argv[n] = NULL;
    run_argv(argv, NULL, 200, r);
}

Test(diagnose, heavy_model_is_compute_bound)
{
    run_result r;
    char *a[] = {"--diagnose", "--max-batches",    "6",    "--batch", "16", "--workers",
                 "1",          "--test-slow-step", "0.05", NULL};
    run(&r, a);
    cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
    cr_assert(strstr(r.out, "(a) full pipeline") && strstr(r.out, "(d) model only"), "%s", r.out);
    cr_assert(strstr(r.out, "verdict: compute-bound"), "%s", r.out);
    run_free(&r);
}

Test(diagnose, slow_loader_is_data_bound)
{
    run_result r;
    char *a[] = {"--diagnose", "--max-batches",    "6",     "--batch", "16", "--workers",
                 "1",          "--test-slow-load", "0.004", NULL};
    run(&r, a);
    cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
    cr_assert(strstr(r.out, "verdict: data-bound: the loader delivers"), "%s", r.out);
    cr_assert(strstr(r.out, "decode is "), "%s", r.out);
    run_free(&r);
}

Test(diagnose, workers_auto_picks_a_count_within_bounds)
{
    run_result r;
    char *a[] = {"--workers", "auto", "--batch", "16", "--loader-only", NULL};
    run(&r, a);
    cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
    char *p = strstr(r.out, "workers auto: chose ");
    cr_assert_not_null(p, "%s", r.out);
    int w = atoi(p + strlen("workers auto: chose "));
    cr_assert(w >= 1 && w <= cores_online(), "chose %d", w);
    cr_assert(strstr(r.out, "1 worker "), "probes 1 worker: %s", r.out);
    cr_assert(strstr(r.out, "loader only (no model)"), "then runs with it: %s", r.out);
    run_free(&r);
}

/* "(N images in T s)" of phase line `phase` ("(a)" .. "(d)") */
static void phase_numbers(const char *out, const char *phase, double *images, double *secs)
{
    const char *p = strstr(out, phase);
    cr_assert_not_null(p, "%s", out);
    p = strstr(p, "img/s  (");
    cr_assert_not_null(p, "%s", out);
    cr_assert_eq(sscanf(p, "img/s  (%lf images in %lf s)", images, secs), 2, "%s", out);
}

/* 256 images in batches of 8 at 0.1 s a step: 3.2 s per phase unbounded;
 * --diagnose-seconds 1 ends each phase after the step that passes 1 s. */
Test(diagnose, each_phase_stops_after_diagnose_seconds)
{
    run_result r;
    char *a[] = {"--diagnose", "--diagnose-seconds", "1",   "--batch", "8", "--workers",
                 "1",          "--test-slow-step",   "0.1", NULL};
    run(&r, a);
    cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
    cr_assert(strstr(r.out, "up to 200 batches or 1 s each"), "%s", r.out);
    const char *phases[] = {"(a) full pipeline", "(d) model only"};
    for (int i = 0; i < 2; i++) {
        double images, secs;
        phase_numbers(r.out, phases[i], &images, &secs);
        cr_assert(secs >= 1.0 && secs < 2.0, "%s took %.1f s:\n%s", phases[i], secs, r.out);
        cr_assert(images < 256, "%s saw the whole set:\n%s", phases[i], r.out);
    }
    run_free(&r);
}

Test(diagnose, diagnose_batches_bounds_each_phase)
{
    run_result r;
    char *a[] = {"--diagnose", "--diagnose-batches",
                 "3",          "--diagnose-seconds",
                 "0",          "--batch",
                 "8",          "--workers",
                 "1",          NULL};
    run(&r, a);
    cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
    cr_assert(strstr(r.out, "4 phases of up to 3 batches each"), "%s", r.out);
    const char *phases[] = {"(a) full pipeline", "(b) loader only", "(c) loader, read only",
                            "(d) model only"};
    for (int i = 0; i < 4; i++) {
        double images, secs;
        phase_numbers(r.out, phases[i], &images, &secs);
        cr_assert(fabs(images - 24) < 0.5, "%s: %.1f images, not 3 batches of 8:\n%s", phases[i],
                  images, r.out);
    }
    run_free(&r);
}
