/* test_kernels.c — the element-wise bodies of nn/kernels.h (the arithmetic
 * both backends run: the CPU backend in loops, the GPU kernels once per
 * thread) against double-precision references, under ASan/UBSan: u8
 * normalisation over every byte value, relu and its gradient at the edges,
 * SGD with momentum and weight decay, and the softmax cross-entropy row
 * including logits far beyond what expf can take unshifted.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>

#include "common/rng.h"
#include "nn/kernels.h"

static void expect_close(double got, double want, double rtol, const char *what, int i)
{
    double tol = rtol * (fabs(want) > 1.0 ? fabs(want) : 1.0);
    cr_expect(fabs(got - want) <= tol, "%s [%d]: got %.9g, want %.9g", what, i, got, want);
}

Test(kernels, normalize_every_byte)
{
    const float means[] = {0.0f, 0.485f, 0.5f, 1.0f}, stds[] = {1.0f, 0.229f, 0.5f, 0.01f};
    for (int m = 0; m < 4; m++)
        for (int v = 0; v < 256; v++) {
            float got = k_normalize((uint8_t)v, means[m], 1.0f / stds[m]);
            double want = ((double)v / 255.0 - means[m]) / stds[m];
            /* a few float roundings of the operands, amplified by 1/std:
             * near v/255 == mean the difference cancels, the error does not */
            double tol = 4 * FLT_EPSILON * ((double)v / 255.0 + means[m] + 1e-3) / stds[m];
            cr_expect(fabs(got - want) <= tol, "normalize(%d, %g, %g): got %.9g, want %.9g", v,
                      (double)means[m], (double)stds[m], (double)got, want);
        }
    cr_expect_eq(k_normalize(0, 0.0f, 1.0f), 0.0f);
    cr_expect_float_eq(k_normalize(255, 0.0f, 1.0f), 1.0f, 1e-7);
}

Test(kernels, relu_and_gradient_edges)
{
    cr_expect_eq(k_relu(2.5f), 2.5f);
    cr_expect_eq(k_relu(-2.5f), 0.0f);
    cr_expect_eq(k_relu(0.0f), 0.0f);
    cr_expect(!signbit(k_relu(-0.0f)), "relu(-0) is +0");
    cr_expect_eq(k_relu(FLT_MIN), FLT_MIN);
    cr_expect_eq(k_relu(-INFINITY), 0.0f);
    cr_expect_eq(k_relu(INFINITY), INFINITY);
    cr_expect_eq(k_relu(NAN), 0.0f, "NaN is not propagated");
    /* the gradient passes where the forward output is positive, nowhere else */
    cr_expect_eq(k_relu_grad(3.0f, 1.0f), 3.0f);
    cr_expect_eq(k_relu_grad(3.0f, 0.0f), 0.0f, "at the kink the gradient is 0");
    cr_expect_eq(k_relu_grad(-7.0f, FLT_MIN), -7.0f);
}

Test(kernels, sgd_one_step_matches_double)
{
    rng r = rng_keyed(21, RNG_TOOL, 0, 0);
    for (int i = 0; i < 2000; i++) {
        float w = rng_uniform(&r) * 4 - 2, v = rng_uniform(&r) - 0.5f, g = rng_uniform(&r) * 2 - 1;
        float lr = 0.001f + rng_uniform(&r) * 0.5f, mom = rng_uniform(&r),
              wd = rng_uniform(&r) * 1e-2f;
        double vw = (double)mom * v + ((double)g + (double)wd * w);
        double ww = (double)w - (double)lr * vw;
        k_sgd(&w, &v, g, lr, mom, wd);
        expect_close(v, vw, 1e-6, "velocity", i);
        expect_close(w, ww, 1e-6, "weight", i);
    }
}

Test(kernels, sgd_special_cases)
{
    float w = 1.0f, v = 0.0f;
    k_sgd(&w, &v, 0.5f, 0.1f, 0.0f, 0.0f); /* plain SGD */
    cr_expect_float_eq(w, 0.95f, 1e-7);
    cr_expect_float_eq(v, 0.5f, 1e-7);
    k_sgd(&w, &v, 0.0f, 0.1f, 0.9f, 0.0f); /* zero gradient: momentum carries on */
    cr_expect_float_eq(v, 0.45f, 1e-7);
    cr_expect_float_eq(w, 0.95f - 0.045f, 1e-6);
    w = 2.0f, v = 0.0f;
    k_sgd(&w, &v, 0.0f, 0.5f, 0.0f, 0.1f); /* decay alone shrinks w by lr * wd * w */
    cr_expect_float_eq(w, 1.9f, 1e-6);
}

/* double-precision reference for one row */
static double ref_row(double *dl, int *pred, const float *z, int label, int K, double scale)
{
    int arg = 0;
    for (int k = 1; k < K; k++)
        if (z[k] > z[arg])
            arg = k;
    double sum = 0;
    for (int k = 0; k < K; k++)
        sum += exp((double)z[k] - z[arg]);
    for (int k = 0; k < K; k++)
        dl[k] = (exp((double)z[k] - z[arg]) / sum - (k == label)) * scale;
    *pred = arg;
    return log(sum) - ((double)z[label] - z[arg]);
}

static void check_row(const float *z, int label, int K, float scale, const char *what)
{
    float dl[64];
    int32_t pred = -1;
    double rdl[64];
    int rpred;
    float loss = k_softmax_xent_row(dl, &pred, z, label, K, scale);
    double rloss = ref_row(rdl, &rpred, z, label, K, scale);
    cr_expect(isfinite(loss), "%s: loss %g", what, (double)loss);
    expect_close(loss, rloss, 2e-6, what, -1);
    cr_expect_geq(loss, 0.0f, "%s: cross-entropy is never negative", what);
    cr_expect_eq(pred, rpred, "%s: argmax", what);
    double sum = 0;
    for (int k = 0; k < K; k++) {
        expect_close(dl[k], rdl[k], 2e-6, what, k);
        sum += dl[k];
    }
    cr_expect(fabs(sum) < 1e-6, "%s: gradient sums to %g, not 0", what, sum);
}

Test(kernels, softmax_xent_random_rows)
{
    rng r = rng_keyed(22, RNG_TOOL, 0, 0);
    for (int t = 0; t < 500; t++) {
        int K = 2 + (int)rng_below(&r, 20);
        float z[64];
        for (int k = 0; k < K; k++)
            z[k] = rng_uniform(&r) * 10 - 5;
        check_row(z, (int)rng_below(&r, (uint32_t)K), K, 1.0f / (1 + (float)rng_below(&r, 64)),
                  "random");
    }
}

Test(kernels, softmax_xent_large_logits)
{
    float big[4] = {1000.0f, 999.0f, 998.0f, 990.0f}; /* expf(1000) overflows */
    check_row(big, 0, 4, 1.0f, "large");
    check_row(big, 3, 4, 1.0f, "large, label far from the max");
    float neg[3] = {-1e4f, -1e4f + 1, -1e4f + 2}; /* expf(-1e4) underflows */
    check_row(neg, 1, 3, 0.5f, "very negative");
    float spread[3] = {88.0f, -88.0f, 0.0f};
    check_row(spread, 1, 3, 1.0f, "spread");
    /* the loss of a hopeless label is the logit gap, not inf */
    float dl[2];
    int32_t p;
    cr_expect_float_eq(k_softmax_xent_row(dl, &p, (float[]){0.0f, 200.0f}, 0, 2, 1.0f), 200.0f,
                       1e-3);
}

Test(kernels, softmax_xent_edges)
{
    float one[1] = {3.0f}, dl[4];
    int32_t pred = -1;
    cr_expect_eq(k_softmax_xent_row(dl, &pred, one, 0, 1, 1.0f), 0.0f, "one class: certain");
    cr_expect_eq(dl[0], 0.0f);
    cr_expect_eq(pred, 0);
    float tie[4] = {1.0f, 2.0f, 2.0f, 0.0f};
    k_softmax_xent_row(dl, &pred, tie, 3, 4, 1.0f);
    cr_expect_eq(pred, 1, "ties go to the first maximum");
    float uni[4] = {0, 0, 0, 0};
    float loss = k_softmax_xent_row(dl, &pred, uni, 2, 4, 0.25f);
    cr_expect_float_eq(loss, logf(4.0f), 1e-6);
    cr_expect_float_eq(dl[2], (0.25f - 1.0f) * 0.25f, 1e-7);
    cr_expect_float_eq(dl[0], 0.25f * 0.25f, 1e-7);
}
