/* test_results_labels.c — issue 27 on the fake: the step results' host
 * buffer is page-aligned and page-locked, and a refused page-lock is kept
 * and said (model_results_unpinned); a chunked gradient (the multi-rank
 * path's canonical sums) reads the batch's labels where they already are
 * on the device, so no chunk waits for the device, and trains as the CPU
 * does; a label outside 0..K-1 reaching the loss kernel reads no logit at
 * it and comes back named; cudaHostUnregister of an address inside a
 * registered range answers as the H100 did.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "cpu/cpu.h"
#include "nn/kernels.h"
#include "nn/model.h"
#include "tests/fakecuda/runtime/fake.h"
#include "tests/support/gpu_test.h"
#include "tests/support/helpers.h"

static void setup(void) { fake_reset(); }

TestSuite(results_labels, .init = setup);

static void make(model *m, const char *name, int max_batch, backend *be)
{
    errbuf e = {{0}};
    cr_assert_eq(model_create(m, name, 3, 16, 16, 10, max_batch, be, &e), 0, "%s", e.msg);
    model_init_params(m, 7);
}

Test(results_labels, results_buffer_is_whole_pages_and_locked)
{
    backend *be = gt_backend();
    model m;
    make(&m, "probe", 8, be);
    cr_expect(m.results_pinned, "page-locked");
    cr_expect_null(model_results_unpinned(&m));
    cr_expect_eq((uintptr_t)m.results_host % (uintptr_t)sysconf(_SC_PAGESIZE), 0,
                 "results_host %p is not page-aligned", (void *)m.results_host);
    model_free(&m);
    gt_done(be);
}

Test(results_labels, a_refused_page_lock_is_said)
{
    backend *be = gt_backend();
    fake_fail_next("cudaHostRegister", cudaErrorMemoryAllocation);
    model m;
    make(&m, "probe", 8, be);
    cr_expect_eq(m.results_pinned, 0);
    const char *why = model_results_unpinned(&m);
    cr_assert_not_null(why, "a failed page-lock must be reported, not ignored");
    cr_expect(strstr(why, "cudaHostRegister") && strstr(why, "cudaErrorMemoryAllocation"), "%s",
              why);
    model_free(&m);
    gt_done(be);
}

Test(results_labels, unregister_inside_a_range_is_invalid_value)
{
    fake_set_quiet(1);
    char *h = aligned_alloc(4096, 4 * 4096);
    cr_assert_eq(cudaHostRegister(h + 100, 2 * 4096, 0), cudaSuccess);
    cr_expect_eq(cudaHostRegister(h + 100 + 2 * 4096, 100, 0), cudaSuccess,
                 "a range sharing the last page, no byte: accepted (H100)");
    cr_expect_eq(cudaHostRegister(h + 4096, 100, 0), cudaErrorHostMemoryAlreadyRegistered);
    (void)cudaGetLastError();
    cr_expect_eq(cudaHostUnregister(h + 101), cudaErrorInvalidValue);
    (void)cudaGetLastError();
    cr_expect_eq(cudaHostUnregister(h + 3 * 4096 + 500), cudaErrorHostMemoryNotRegistered);
    (void)cudaGetLastError();
    cr_expect_eq(cudaHostUnregister(h + 100), cudaSuccess);
    cr_expect_eq(cudaHostUnregister(h + 100 + 2 * 4096), cudaSuccess);
    free(h);
}

enum { B = 8, NPX = B * 3 * 16 * 16 };

static void batch(uint8_t *x, int32_t *y, int seed)
{
    for (int i = 0; i < NPX; i++)
        x[i] = (uint8_t)(i * 7 + seed * 31);
    for (int b = 0; b < B; b++)
        y[b] = (b * 3 + seed) % 10;
}

static model_split chunks(void)
{
    static const int chunk[4] = {3, 1, 0, 4}; /* an empty one too */
    model_split s = {.global_batch = B, .nchunks = 4};
    memcpy(s.chunk, chunk, sizeof chunk);
    return s;
}

/* resnet8 has batch norm, so its chunks are separate passes
 * (model_groups_cheap is 0): before, each chunk uploaded its labels and
 * each empty chunk its zeros, every one a wait for the device */
Test(results_labels, chunks_wait_for_nothing_and_train_as_the_cpu)
{
    backend *be = gt_backend();
    errbuf e = {{0}};
    backend *cpu = backend_cpu_create(1, &e);
    cr_assert_not_null(cpu, "%s", e.msg);
    model g, c;
    make(&g, "resnet8", B, be);
    make(&c, "resnet8", B, cpu);
    cr_assert_eq(model_groups_cheap(&g), 0);
    uint8_t x[NPX];
    int32_t y[B];
    uint8_t *dx = be->ops->alloc(be, NPX);
    int32_t *dy = be->ops->alloc(be, sizeof y);
    for (int step = 0; step < 3; step++) {
        batch(x, y, step);
        be->ops->upload(be, dx, x, NPX);
        be->ops->upload(be, dy, y, sizeof y);
        fake_clock_stats before, after;
        fake_clock(&before);
        /* dev_labels as the stager gives them: the labels came with the batch */
        model_batch gb = {.x = dx, .labels = y, .dev_labels = dy, .B = B, .split = chunks()};
        model_batch cb = {.x = x, .labels = y, .B = B, .split = chunks()};
        cr_assert_eq(model_train_enqueue(&g, &gb, 0.05f, 0.9f, 0.0f, (step_tag){0, step, 0.05}),
                     MODEL_STEP_OK);
        fake_clock(&after);
        if (step > 0) /* the first step makes plans and workspace */
            cr_expect_eq(after.host_syncs - before.host_syncs, 0,
                         "step %d: %d host waits while enqueueing 4 chunks", step,
                         after.host_syncs - before.host_syncs);
        step_stats gs, cs;
        cr_assert_eq(model_results_take(&g, 1, &gs, NULL), 1);
        cr_assert_eq(model_train_batch(&c, &cb, 0.05f, 0.9f, 0.0f, &cs), MODEL_STEP_OK);
        cr_expect_eq(gs.n, B);
        cr_expect_eq(gs.bad_labels, 0);
        cr_expect(fabs(gs.loss_sum - cs.loss_sum) <= 1e-4 * fabs(cs.loss_sum) + 1e-5,
                  "step %d: loss %.9g on the fake, %.9g on the cpu", step, gs.loss_sum,
                  cs.loss_sum);
    }
    gt_expect_dev(be, "parameters after 3 chunked steps", g.params, c.params, g.nparams);
    be->ops->free(be, dx);
    be->ops->free(be, dy);
    model_free(&g);
    model_free(&c);
    cpu->ops->destroy(cpu);
    gt_done(be);
}

Test(results_labels, loss_kernel_reads_no_logit_at_a_bad_label)
{
    backend *be = gt_backend();
    enum { N = 3, K = 10 };
    float logits[N * K];
    for (int i = 0; i < N * K; i++)
        logits[i] = (float)(i % 7) * 0.25f;
    int32_t labels[N] = {4, 12, -3};
    float *dlog = gt_to_dev(be, logits, sizeof logits);
    int32_t *dlab = gt_to_dev(be, labels, sizeof labels);
    float *ddl = be->ops->alloc(be, sizeof logits);
    float *dloss = be->ops->alloc(be, N * sizeof(float));
    int32_t *dpred = be->ops->alloc(be, N * sizeof(int32_t));
    be->ops->softmax_xent(be, ddl, dloss, dpred, dlog, dlab, N, K, 1.0f);
    float loss[N], dl[N * K];
    int32_t pred[N];
    be->ops->download(be, loss, dloss, sizeof loss);
    be->ops->download(be, pred, dpred, sizeof pred);
    be->ops->download(be, dl, ddl, sizeof dl);
    cr_expect(pred[0] >= 0 && pred[0] < K && loss[0] > 0.0f, "a good label: a loss");
    cr_expect_eq(pred[1], K_BAD_LABEL);
    cr_expect_eq(loss[1], 12.0f, "the bad label comes back in place of the loss");
    cr_expect_eq(pred[2], K_BAD_LABEL);
    cr_expect_eq(loss[2], -3.0f);
    for (int k = 0; k < K; k++)
        cr_expect(dl[K + k] == 0.0f && dl[2 * K + k] == 0.0f, "no gradient from a bad label");
    be->ops->free(be, dlog);
    be->ops->free(be, dlab);
    be->ops->free(be, ddl);
    be->ops->free(be, dloss);
    be->ops->free(be, dpred);
    gt_done(be);
}

/* the host checks the labels it is given; labels that reach the device
 * otherwise (the stager's copy) and are out of range come back named */
Test(results_labels, a_bad_label_on_the_device_is_named)
{
    backend *be = gt_backend();
    model m;
    make(&m, "probe", B, be);
    uint8_t x[NPX];
    int32_t y[B];
    batch(x, y, 1);
    int32_t bad[B];
    memcpy(bad, y, sizeof y);
    bad[5] = 77;
    uint8_t *dx = gt_to_dev(be, x, NPX);
    int32_t *dy = gt_to_dev(be, bad, sizeof bad);
    model_batch mb = {.x = dx, .labels = y, .dev_labels = dy, .B = B};
    cr_assert_eq(model_eval_enqueue(&m, &mb, (step_tag){0, 0, 0}), MODEL_STEP_OK);
    step_stats st;
    cr_assert_eq(model_results_take(&m, 1, &st, NULL), 1);
    cr_expect_eq(st.bad_labels, 1);
    cr_expect_eq(st.bad_sample, 5);
    cr_expect_eq(st.bad_label, 77);
    cr_expect_eq(st.nonfinite, 1, "and the step does not count as fine");
    be->ops->free(be, dx);
    be->ops->free(be, dy);
    model_free(&m);
    gt_done(be);
}

/* the whole program when the driver locks nothing: it runs, says so once
 * on stderr, and the model line says the results are unpinned */
Test(results_labels, train_says_when_the_results_are_unpinned)
{
    char *dir = tmpdir_make();
    char *fm = make_fashion_subset(dir, 64);
    char *csv = path_join(fm, "train.csv");
    char bin[1024];
    snprintf(bin, sizeof bin, "%s/build/fakecuda/train", source_root());
    char *argv[] = {bin, "--pin", "--batch", "32", csv, NULL};
    char *env[] = {"FAKECUDA_HOST_REGISTER=fail", NULL};
    run_result r;
    run_argv(argv, env, 120, &r);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "train: warning: the step results' buffer is not page-locked (") &&
                  strstr(r.err, "cudaErrorMemoryAllocation"),
              "%s", r.err);
    cr_expect(strstr(r.out, "; results unpinned (every step waits)\n"), "%s", r.out);
    run_free(&r);
    free(csv);
    free(fm);
    tmpdir_remove(dir);
}
