/* test_twin_cpu.c — the backend comparison (nn/twin.h) is not about GPUs:
 * the CPU backend on one compute thread against itself on two, every op
 * and lenet trained five steps, through the same functions `train
 * --selftest` uses. The CPU backend cuts work at shape boundaries and
 * reduces in a fixed order (docs/DESIGN.md), so the two agree bit for bit,
 * not only within the tolerance. A backend with one op broken on purpose
 * shows that the comparison can fail.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <string.h>

#include "nn/twin.h"
#include "tests/support/nn_fixtures.h"

typedef struct tally {
    int checks, over, inexact;
    char first_bad[160];
} tally;

static void count(void *arg, const twin_check *c)
{
    tally *t = arg;
    t->checks++;
    if (twin_judge(c, NULL) > 1.0 && !t->over++)
        snprintf(t->first_bad, sizeof t->first_bad, "%s", c->what);
    if (memcmp(c->dev, c->ref, c->n * sizeof(float)) != 0 && !t->inexact++ && !t->over)
        snprintf(t->first_bad, sizeof t->first_bad, "%s (not bit-identical)", c->what);
}

/* the self-test's op list, on two backends */
static void every_op(twin *t)
{
    twin_normalize(t, 4, 3, 50);
    twin_conv(t, 3, 2, 8, 8, 4, 3, 3, 1, 1, 1);
    twin_conv(t, 2, 3, 11, 9, 5, 5, 5, 2, 0, 1);
    twin_conv(t, 4, 1, 28, 28, 20, 5, 5, 1, 0, 0);
    twin_relu(t, 1000);
    twin_maxpool(t, 3, 4, 9, 10, 0);
    twin_maxpool(t, 2, 3, 8, 8, 1);
    twin_fc(t, 6, 50, 10, 1);
    twin_fc(t, 4, 800, 33, 0);
    twin_gap(t, 5, 3, 7);
    twin_maxpool_k(t, 2, 3, 9, 9, 3, 2, 1);
    twin_bn(t, 4, 3, 25);
    twin_add(t, 1000);
    twin_softmax_xent(t, 5, 10, 80.0f);
    twin_sgd(t, 1000, 2, 0.1f, 0.9f, 5e-4f);
}

static void lenet_steps(twin *t)
{
    enum { N = 24, B = 8 };
    uint8_t x[N * 28 * 28];
    int32_t y[N];
    rng r = rng_keyed(7, RNG_TOOL, 1, 0);
    for (size_t i = 0; i < sizeof x; i++)
        x[i] = (uint8_t)rng_below(&r, 256);
    for (int i = 0; i < N; i++)
        y[i] = (int32_t)rng_below(&r, 10);
    twin_data d = {.n = N, .C = 1, .H = 28, .W = 28, .nclasses = 10, .x = x, .labels = y};
    errbuf e;
    cr_assert_eq(twin_train(t, "lenet", &d, B, 5, 1, &e), 0, "%s", e.msg);
}

Test(twin_cpu, one_thread_and_two_agree_bit_for_bit)
{
    backend *one = cpu_backend(1), *two = cpu_backend(2);
    tally n = {0};
    twin t = {
        .dev = two, .ref = one, .r = rng_keyed(3, RNG_TOOL, 2, 0), .report = count, .arg = &n};
    every_op(&t);
    lenet_steps(&t);
    cr_expect_gt(n.checks, 60, "only %d checks ran", n.checks);
    cr_expect_eq(n.over, 0, "%d of %d checks over the tolerance, first %s", n.over, n.checks,
                 n.first_bad);
    cr_expect_eq(n.inexact, 0, "%d of %d checks differ in some bit, first %s", n.inexact, n.checks,
                 n.first_bad);
    cr_expect_eq(twin_staging(&t, 4, 3, 64, &(double){0}, (char[8]){0}, 8), -1,
                 "the CPU has no staging block: nothing to run");
    one->ops->destroy(one);
    two->ops->destroy(two);
}

/* relu with one output element off by 1% */
static void (*real_relu)(backend *, float *, const float *, size_t);
static void broken_relu(backend *be, float *out, const float *in, size_t n)
{
    real_relu(be, out, in, n);
    out[n / 2] = out[n / 2] * 1.01f + 0.01f;
}

Test(twin_cpu, one_broken_op_fails_the_comparison)
{
    backend *ref = cpu_backend(1), *dev = cpu_backend(2);
    backend_ops broken = *dev->ops;
    real_relu = broken.relu_forward;
    broken.relu_forward = broken_relu;
    const backend_ops *keep = dev->ops;
    dev->ops = &broken;
    tally n = {0};
    twin t = {
        .dev = dev, .ref = ref, .r = rng_keyed(3, RNG_TOOL, 2, 0), .report = count, .arg = &n};
    twin_conv(&t, 3, 2, 8, 8, 4, 3, 3, 1, 1, 1);
    cr_expect_eq(n.over, 0, "the other ops still agree (first: %s)", n.first_bad);
    twin_relu(&t, 1000);
    cr_expect_geq(n.over, 1, "the broken relu passed");
    cr_expect(strstr(n.first_bad, "relu"), "the broken op is named: %s", n.first_bad);
    dev->ops = keep;
    ref->ops->destroy(ref);
    dev->ops->destroy(dev);
}
