/* test_warmup.c — issue 27 on the fake: a GPU run with two or more epochs
 * leaves its first out of the summaries unless --warmup-epochs says
 * otherwise (the epoch line's "1w", the JSON's "warmup":true, the
 * summary's counted epochs), a CPU run and a one-epoch run count every
 * epoch; and the plans and workspace of every batch size made up front
 * (model_prepare_batches) leave the steps of those sizes nothing to
 * allocate and nothing to wait for.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/model.h"
#include "tests/fakecuda/runtime/fake.h"
#include "tests/support/gpu_test.h"
#include "tests/support/helpers.h"

static char *dir, *csv, *val;

static void setup(void)
{
    fake_reset();
    dir = tmpdir_make();
    char *fm = make_fashion_subset(dir, 64);
    csv = path_join(fm, "train.csv");
    val = path_join(fm, "test.csv");
    free(fm);
}

static void teardown(void)
{
    free(csv);
    free(val);
    tmpdir_remove(dir);
}

TestSuite(warmup, .init = setup, .fini = teardown);

/* bin (fake GPU or CPU build) with --epochs and --warmup-epochs (NULL: not
 * given); the JSON's epochs' "warmup" values into w, the summary's epochs */
static int run_json(const char *bin, const char *epochs, const char *warm, char w[][JSON_VALUE_MAX],
                    int *summary_epochs)
{
    char *json = path_join(dir, "run.json");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", source_root(), bin);
    char *argv[16];
    int n = 0;
    argv[n++] = path;
    argv[n++] = "--batch";
    argv[n++] = "24";
    argv[n++] = "--epochs";
    argv[n++] = (char *)epochs;
    if (warm) {
        argv[n++] = "--warmup-epochs";
        argv[n++] = (char *)warm;
    }
    argv[n++] = "--json";
    argv[n++] = json;
    argv[n++] = csv;
    argv[n] = NULL;
    run_result r;
    run_argv(argv, NULL, 120, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    int k = json_epoch_values(json, "warmup", w, 8);
    char s[2][JSON_VALUE_MAX];
    cr_assert_eq(json_record_values(json, "summary", "epochs", s, 2), 1);
    *summary_epochs = atoi(s[0]);
    free(json);
    return k;
}

Test(warmup, a_gpu_run_leaves_its_first_epoch_out_by_default)
{
    char w[8][JSON_VALUE_MAX];
    int se;
    cr_assert_eq(run_json("build/fakecuda/train", "3", NULL, w, &se), 3);
    cr_expect_str_eq(w[0], "true");
    cr_expect_str_eq(w[1], "false");
    cr_expect_str_eq(w[2], "false");
    cr_expect_eq(se, 2, "the summary counts 2 of 3 epochs");
    cr_assert_eq(run_json("build/fakecuda/train", "3", "0", w, &se), 3);
    cr_expect_str_eq(w[0], "false", "--warmup-epochs 0 counts every epoch");
    cr_expect_eq(se, 3);
    cr_assert_eq(run_json("build/fakecuda/train", "1", NULL, w, &se), 1);
    cr_expect_str_eq(w[0], "false", "one epoch: nothing to leave out");
}

Test(warmup, a_cpu_run_counts_every_epoch)
{
    char w[8][JSON_VALUE_MAX];
    int se;
    cr_assert_eq(run_json("build/asan/train", "2", NULL, w, &se), 2);
    cr_expect_str_eq(w[0], "false");
    cr_expect_eq(se, 2);
}

enum { B = 8, NPX = B * 3 * 16 * 16 };

Test(warmup, prepared_batch_sizes_allocate_and_wait_for_nothing)
{
    backend *be = gt_backend();
    model m;
    errbuf e = {{0}};
    cr_assert_eq(model_create(&m, "lenet", 3, 16, 16, 10, B, be, &e), 0, "%s", e.msg);
    model_init_params(&m, 3);
    int sizes[] = {8, 3, 5, 3};
    cr_expect_eq(model_prepare_batches(&m, sizes, 4), 3, "three distinct sizes");
    uint8_t x[NPX];
    int32_t y[B];
    for (int i = 0; i < NPX; i++)
        x[i] = (uint8_t)(i * 5);
    for (int b = 0; b < B; b++)
        y[b] = b % 10;
    uint8_t *dx = gt_to_dev(be, x, NPX);
    int32_t *dy = gt_to_dev(be, y, sizeof y);
    int mallocs = fake_calls("cudaMalloc");
    for (int k = 0; k < 3; k++) {
        fake_clock_stats a, z;
        fake_clock(&a);
        /* the labels on the device as the stager gives them: an upload would wait */
        model_batch mb = {.x = dx, .labels = y, .dev_labels = dy, .B = sizes[k]};
        cr_assert_eq(model_train_enqueue(&m, &mb, 0.01f, 0.9f, 0.0f, (step_tag){0, k, 0.01}),
                     MODEL_STEP_OK);
        fake_clock(&z);
        cr_expect_eq(z.host_syncs - a.host_syncs, 0, "batch %d: %d host waits", sizes[k],
                     z.host_syncs - a.host_syncs);
        step_stats st;
        cr_assert_eq(model_results_take(&m, 1, &st, NULL), 1);
    }
    cr_expect_eq(fake_calls("cudaMalloc") - mallocs, 0,
                 "no allocation at the first step of a size");
    be->ops->free(be, dx);
    be->ops->free(be, dy);
    model_free(&m);
    gt_done(be);
}
