/* test_twin.c — every op of the GPU backend, forward and backward, against
 * its CPU twin (the CPU backend, cpu/backend.c) on the same inputs at
 * rtol 1e-4 (nn/twin.h: the comparisons `train --selftest` makes, on more
 * shapes: padding, stride, odd sizes, non-square kernels, ties in max
 * pooling, sizes that split into several CPU tasks). Runs on the fake
 * runtime (run-fakecuda) and on a real device (run-gpu; skipped without
 * one). On the fake, a single wrong element is shown to fail the twin.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/gpu_test.h"
#ifdef TRAIN_FAKECUDA
#include "tests/fakecuda/runtime/fake.h"
static void setup(void) { fake_reset(); }
#else
static void setup(void) {}
#endif

TestSuite(twin, .init = setup);

/* Run body on a fresh GPU backend and its twin; expect `want` comparisons. */
#define TWIN_TEST(name, key, want, body)                                                           \
    Test(twin, name)                                                                               \
    {                                                                                              \
        backend *be = gt_backend();                                                                \
        int checks;                                                                                \
        twin tw = gt_twin(be, key, &checks);                                                       \
        twin *t = &tw;                                                                             \
        body;                                                                                      \
        cr_expect_eq(checks, want, "%d comparisons made, %d expected", checks, want);              \
        gt_twin_done(t);                                                                           \
        gt_done(be);                                                                               \
    }

TWIN_TEST(normalize, 1, 2, {
    twin_normalize(t, 2, 3, 300);
    twin_normalize(t, 5, 1, 784);
})

TWIN_TEST(conv_3x3_pad1, 2, 4, twin_conv(t, 2, 3, 9, 7, 4, 3, 3, 1, 1, 1))
TWIN_TEST(conv_5x5_stride2_pad2, 3, 4, twin_conv(t, 2, 2, 11, 12, 3, 5, 5, 2, 2, 1))
TWIN_TEST(conv_nonsquare_kernel_no_pad, 4, 4, twin_conv(t, 3, 2, 8, 10, 5, 3, 2, 1, 0, 1))
TWIN_TEST(conv_1x1, 5, 4, twin_conv(t, 2, 6, 5, 5, 3, 1, 1, 1, 0, 1))
TWIN_TEST(conv_lenet_first_layer_without_din, 6, 3, twin_conv(t, 4, 1, 28, 28, 20, 5, 5, 1, 0, 0))
TWIN_TEST(conv_lenet_second_layer, 7, 4, twin_conv(t, 3, 20, 12, 12, 50, 5, 5, 1, 0, 1))
TWIN_TEST(conv_convnet_first_layer, 8, 4, twin_conv(t, 2, 3, 16, 16, 32, 3, 3, 1, 1, 1))

TWIN_TEST(relu, 9, 4, {
    twin_relu(t, 1237);
    twin_relu(t, 70001); /* several CPU tasks of 32768 elements */
})

TWIN_TEST(maxpool, 10, 6, {
    twin_maxpool(t, 3, 4, 9, 11, 0);
    twin_maxpool(t, 2, 5, 12, 12, 1);
    twin_maxpool(t, 1, 2, 7, 7, 1);
})

TWIN_TEST(fc, 11, 11, {
    twin_fc(t, 6, 50, 10, 1);
    twin_fc(t, 7, 800, 33, 0); /* B, M, N all different: a swapped dimension shows */
    twin_fc(t, 1, 1, 1, 1);
})

TWIN_TEST(fc_lenet_hidden_layer, 12, 4, twin_fc(t, 32, 800, 512, 1))

TWIN_TEST(global_average_pool, 13, 4, {
    twin_gap(t, 3, 5, 49);
    twin_gap(t, 2, 128, 64);
})

TWIN_TEST(softmax_xent, 14, 9, {
    twin_softmax_xent(t, 7, 10, 1000.0f); /* exp overflows without the max shift */
    twin_softmax_xent(t, 64, 10, 0.0f);
    twin_softmax_xent(t, 4, 2, 30.0f);
})

TWIN_TEST(maxpool_3x3_stride2_pad1, 18, 4, {
    twin_maxpool_k(t, 2, 3, 9, 9, 3, 2, 1);
    twin_maxpool_k(t, 1, 4, 8, 11, 3, 2, 1);
})

TWIN_TEST(batch_norm, 19, 18, {
    twin_bn(t, 4, 3, 25);
    twin_bn(t, 2, 16, 64);
})

TWIN_TEST(add_and_copy, 20, 6, {
    twin_add(t, 1237);
    twin_add(t, 70001);
})

TWIN_TEST(sgd, 15, 4, {
    twin_sgd(t, 3001, 3, 0.05f, 0.9f, 1e-3f);
    twin_sgd(t, 70001, 1, 0.1f, 0.0f, 0.0f);
})

Test(twin, staging_path_and_busy_time)
{
    backend *be = gt_backend();
    int checks;
    twin t = gt_twin(be, 16, &checks);
    double busy = -1;
    char note[256];
    cr_assert_eq(twin_staging(&t, 2, 3, 50, &busy, note, sizeof note), 0,
                 "the GPU backend has a staging block");
    cr_expect_str_eq(note, "", "page-locking worked");
    cr_expect_eq(checks, 2);
    cr_expect(busy >= 0.0 && busy < 60.0, "busy time %g s", busy);
    gt_twin_done(&t);
    gt_done(be);
}

Test(twin, compare_measure)
{
    float ref[4] = {1, -2, 0, 4}, dev[4] = {1, -2, 0, 4};
    cr_expect_eq(twin_compare(dev, ref, 4, 1e-4, NULL), 0.0);
    dev[2] = 1e-5f; /* near zero: judged on the tensor's scale (mean |ref| = 1.75) */
    cr_expect_leq(twin_compare(dev, ref, 4, 1e-4, NULL), 1.0);
    dev[2] = 1e-3f;
    size_t worst = 0;
    cr_expect_gt(twin_compare(dev, ref, 4, 1e-4, &worst), 1.0);
    cr_expect_eq(worst, 2);
    dev[2] = NAN;
    cr_expect(isinf(twin_compare(dev, ref, 4, 1e-4, NULL)));
    dev[2] = 0;
    cr_expect_eq(twin_compare(dev, ref, 4, 0.0, NULL), 0.0, "rtol 0: equal is exact");
    dev[3] = 4.0001f;
    cr_expect(isinf(twin_compare(dev, ref, 4, 0.0, NULL)), "rtol 0: any difference fails");
    /* the norm measure: ||dev - ref|| <= rtol ||ref|| */
    twin_check c = {"t", dev, ref, 4, 1e-4, TWIN_NORM};
    size_t wn = 9;
    double norm = sqrt(1.0 + 4.0 + 16.0), r = twin_judge(&c, &wn);
    cr_expect(fabs(r - 0.0001 / (1e-4 * norm)) < 0.01, "norm error %g", r);
    cr_expect_eq(wn, 3);
    ref[0] = NAN;
    cr_expect(isinf(twin_judge(&c, NULL)), "a NaN in the reference fails too");
}

#ifdef TRAIN_FAKECUDA
/* The twin is not a rubber stamp: one element off in one output fails it,
 * with the op and the element named. */
typedef struct fails {
    int n;
    char what[128];
    size_t worst;
} fails;

static void record(void *arg, const twin_check *c)
{
    fails *f = arg;
    size_t worst;
    if (twin_judge(c, &worst) > 1.0 && f->n++ == 0) {
        snprintf(f->what, sizeof f->what, "%s", c->what);
        f->worst = worst;
    }
}

Test(twin, one_wrong_element_fails_the_twin)
{
    backend *be = gt_backend();
    int checks;
    twin t = gt_twin(be, 17, &checks);
    fails f = {0};
    t.report = record;
    t.arg = &f;
    twin_conv(&t, 2, 3, 9, 7, 4, 3, 3, 1, 1, 1);
    cr_expect_eq(f.n, 0, "a correct backend passes: %s", f.what);
    fake_corrupt_next("cudnnConvolutionBackwardData");
    twin_conv(&t, 2, 3, 9, 7, 4, 3, 3, 1, 1, 1);
    cr_expect_eq(f.n, 1);
    cr_expect_str_eq(f.what, "conv 2x3x9x7 k4 3x3 s1 p1 dx");
    cr_expect_eq(f.worst, 0);
    fake_corrupt_next("cublasSgemm");
    twin_fc(&t, 6, 50, 10, 1);
    cr_expect_eq(f.n, 2, "a corrupted GEMM shows in the fully connected layer");
    fake_corrupt_next("cudnnBatchNormalizationBackward");
    twin_bn(&t, 2, 3, 10);
    cr_expect_eq(f.n, 3, "a corrupted batch norm gradient shows");
    gt_twin_done(&t);
    gt_done(be);
}
#endif
