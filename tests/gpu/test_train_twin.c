/* test_train_twin.c — the models trained on the GPU backend and on the CPU
 * backend from the same parameters (model_init_params, same seed) on the
 * same batches, 20 model_train_step calls each: every step's mean loss
 * within 1e-3 relative, and at the end each parameter tensor and its
 * momentum within 1e-3 in relative L2 norm (TWIN_RTOL_TRAIN, nn/twin.h). lenet on real
 * Fashion-MNIST images (Debian's IDX files; deterministic synthetic images when they are missing),
 * convnet and probe on synthetic RGB. Runs on the fake runtime (run-fakecuda) and on a real device
 * (run-gpu; skipped without one). The largest error seen, as a fraction of the tolerance, is logged
 * (--verbose) so the margin is known.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/gpu_test.h"
#include "tools/idx.h"
#ifdef TRAIN_FAKECUDA
#include "tests/fakecuda/runtime/fake.h"
static void setup(void) { fake_reset(); }
#else
static void setup(void) {}
#endif

TestSuite(train_twin, .init = setup);

typedef struct worst {
    int checks, fails;
    double loss, state; /* largest error / tolerance: step losses, parameters and momentum */
} worst;

static void expect(void *arg, const twin_check *c)
{
    worst *w = arg;
    size_t i = 0;
    double r = twin_judge(c, &i);
    cr_expect(r <= 1.0, "%s: %.3g x the tolerance %.0e%s; element %zu of %zu: gpu %.9g, cpu %.9g",
              c->what, r, c->rtol, c->measure == TWIN_NORM ? " (L2 norm)" : "", i, c->n,
              (double)c->dev[i], (double)c->ref[i]);
    double *slot = c->n == 1 ? &w->loss : &w->state;
    if (r > *slot)
        *slot = r;
    w->checks++;
}

/* n images: the first n of Fashion-MNIST's t10k split, or synthetic */
static int load_images(int n, int C, int H, int W, uint8_t **x, int32_t **y, int real)
{
    size_t px = (size_t)C * H * W;
    *x = malloc((size_t)n * px);
    *y = malloc((size_t)n * sizeof **y);
    cr_assert(*x && *y);
    if (real) {
        idx_set im, lab;
        char ip[512], lp[512];
        snprintf(ip, sizeof ip, "%s/t10k-images-idx3-ubyte.gz", fashion_mnist_dir());
        snprintf(lp, sizeof lp, "%s/t10k-labels-idx1-ubyte.gz", fashion_mnist_dir());
        if (idx_read(ip, &im) == 0) {
            cr_assert_eq(idx_read(lp, &lab), 0);
            cr_assert(im.n >= (uint32_t)n && im.rows * im.cols == px);
            memcpy(*x, im.data, (size_t)n * px);
            for (int i = 0; i < n; i++)
                (*y)[i] = lab.data[i];
            free(im.data);
            free(lab.data);
            return 1;
        }
        cr_log_warn("Fashion-MNIST not installed (dataset-fashion-mnist): synthetic images");
    }
    rng r = rng_keyed(99, RNG_TOOL, (uint64_t)px, 0);
    for (int i = 0; i < n; i++) {
        int k = (int)rng_below(&r, 10);
        (*y)[i] = k;
        for (size_t j = 0; j < px; j++) /* noise plus a class-dependent ramp */
            (*x)[(size_t)i * px + j] =
                (uint8_t)((rng_below(&r, 128) + (j % W) * (k + 1) * 3) & 255);
    }
    return 0;
}

static void train_case_steps(const char *model, int C, int H, int W, int B, int real, int ntensors,
                             int steps)
{
    backend *be = gt_backend();
    int checks;
    twin t = gt_twin(be, 1, &checks);
    worst w = {0};
    t.report = expect;
    t.arg = &w;
    uint8_t *x;
    int32_t *y;
    int n = B * steps;
    int got_real = load_images(n, C, H, W, &x, &y, real);
    twin_data d = {.n = n, .C = C, .H = H, .W = W, .nclasses = 10, .x = x, .labels = y};
    errbuf e = {{0}};
    cr_assert_eq(twin_train(&t, model, &d, B, steps, 7, &e), 0, "%s", e.msg);
    cr_expect_eq(w.checks, steps + 2 * ntensors,
                 "%d checks: a loss per step, then each tensor and its momentum", w.checks);
    cr_log_info("%s %dx%dx%d batch %d, %d steps on %s data: worst step loss %.3g, worst "
                "tensor (L2) %.3g of the tolerance %.0e",
                model, C, H, W, B, steps, got_real ? "Fashion-MNIST" : "synthetic", w.loss, w.state,
                TWIN_RTOL_TRAIN);
    free(x);
    free(y);
    gt_twin_done(&t);
    gt_done(be);
}

static void train_case(const char *model, int C, int H, int W, int B, int real, int ntensors)
{
    train_case_steps(model, C, H, W, B, real, ntensors, 20);
}

Test(train_twin, lenet_20_steps_on_fashion_mnist) { train_case("lenet", 1, 28, 28, 16, 1, 8); }

Test(train_twin, convnet_20_steps) { train_case("convnet", 3, 16, 16, 8, 0, 8); }

Test(train_twin, probe_20_steps) { train_case("probe", 3, 12, 12, 16, 0, 4); }

/* batch norm (training statistics, running averages through the steps),
 * residual adds and global average pooling; 8 steps keep the fake's naive
 * double convolutions quick */
Test(train_twin, resnet8_8_steps) { train_case_steps("resnet8", 3, 16, 16, 8, 0, 47, 8); }

#ifdef TRAIN_FAKECUDA
/* Not a rubber stamp: one gradient element off by 1.0 in one step (the
 * first backward-filter call: conv2's weight gradient of step 1) shows in
 * conv2's parameters at the end, and nowhere before the backward pass. */
typedef struct flagged {
    int fails;
    char first[128];
} flagged;

static void note_fail(void *arg, const twin_check *c)
{
    flagged *f = arg;
    if (twin_judge(c, NULL) > 1.0 && f->fails++ == 0)
        snprintf(f->first, sizeof f->first, "%s", c->what);
}

Test(train_twin, one_corrupted_gradient_fails_the_comparison)
{
    backend *be = gt_backend();
    int checks;
    twin t = gt_twin(be, 2, &checks);
    flagged f = {0};
    t.report = note_fail;
    t.arg = &f;
    uint8_t *x;
    int32_t *y;
    load_images(40, 1, 28, 28, &x, &y, 0);
    twin_data d = {.n = 40, .C = 1, .H = 28, .W = 28, .nclasses = 10, .x = x, .labels = y};
    errbuf e = {{0}};
    fake_corrupt_next("cudnnConvolutionBackwardFilter");
    cr_assert_eq(twin_train(&t, "lenet", &d, 8, 5, 7, &e), 0, "%s", e.msg);
    cr_expect_gt(f.fails, 0, "the corrupted gradient went unnoticed");
    cr_expect(strstr(f.first, "loss") || strstr(f.first, "conv2"), "first failure: %s", f.first);
    free(x);
    free(y);
    gt_twin_done(&t);
    gt_done(be);
}
#endif
