/* test_hostref.c — the reference the GPU is judged by must itself be
 * right: forward passes against hand-computed values, backward passes
 * against central differences of the forward pass (exact for the linear
 * ops, away from kinks for pooling), the loss against its closed form.
 * Host only; runs in both GPU suites.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "tests/support/hostref.h"

Test(hostref, conv_forward_by_hand)
{
    float in[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 2, 3, 4}, bias[1] = {0.5f}, out[4];
    conv_shape s;
    cr_assert_eq(conv_shape_init(&s, 1, 1, 3, 3, 1, 2, 2, 1, 0), 0);
    href_conv_forward(out, in, w, bias, &s);
    float want[4] = {37.5f, 47.5f, 67.5f, 77.5f};
    for (int i = 0; i < 4; i++)
        cr_expect_float_eq(out[i], want[i], 1e-6, "stride 1, element %d", i);
    cr_assert_eq(conv_shape_init(&s, 1, 1, 3, 3, 1, 2, 2, 2, 1), 0);
    cr_assert_eq(s.OH, 2);
    href_conv_forward(out, in, w, bias, &s);
    float want2[4] = {4.5f, 18.5f, 36.5f, 77.5f};
    for (int i = 0; i < 4; i++)
        cr_expect_float_eq(out[i], want2[i], 1e-6, "stride 2 pad 1, element %d", i);
}

Test(hostref, fc_forward_by_hand)
{
    float in[2] = {1, 2}, w[4] = {1, 0, 2, 3}, bias[2] = {0.5f, -1}, out[2];
    href_fc_forward(out, in, w, bias, 1, 2, 2);
    cr_expect_float_eq(out[0], 1.5f, 1e-6);
    cr_expect_float_eq(out[1], 7.0f, 1e-6);
}

Test(hostref, maxpool_ties_go_to_the_first)
{
    float in[4] = {3, 3, 1, 0}, out[1], dout[1] = {2}, din[4];
    maxpool_shape s;
    maxpool_shape_init(&s, 1, 1, 2, 2);
    href_maxpool_forward(out, in, &s);
    href_maxpool_backward(din, dout, in, &s);
    cr_expect_eq(out[0], 3.0f);
    cr_expect(din[0] == 2.0f && din[1] == 0.0f && din[2] == 0.0f && din[3] == 0.0f);
}

/* L = sum(out * g): dL/dx by central differences, one element at a time */
typedef void (*fwd_fn)(float *out, const float *x, void *ctx);

static void fd_check(const char *what, fwd_fn f, void *ctx, float *x, size_t nx, size_t nout,
                     const float *g, const float *analytic, float h, double tol)
{
    float *o1 = malloc(nout * 4), *o2 = malloc(nout * 4);
    for (size_t i = 0; i < nx; i++) {
        float keep = x[i];
        x[i] = keep + h;
        f(o1, x, ctx);
        x[i] = keep - h;
        f(o2, x, ctx);
        x[i] = keep;
        double l1 = 0, l2 = 0;
        for (size_t k = 0; k < nout; k++)
            l1 += (double)o1[k] * g[k], l2 += (double)o2[k] * g[k];
        double fd = (l1 - l2) / (2.0 * h);
        cr_expect(fabs(fd - analytic[i]) <= tol * (1.0 + fabs(fd)),
                  "%s: element %zu: fd %.7g, analytic %.7g", what, i, fd, (double)analytic[i]);
    }
    free(o1), free(o2);
}

typedef struct conv_ctx {
    conv_shape s;
    float *in, *w, *bias;
} conv_ctx;

static void conv_wrt_in(float *out, const float *x, void *c)
{
    conv_ctx *k = c;
    href_conv_forward(out, x, k->w, k->bias, &k->s);
}

static void conv_wrt_w(float *out, const float *x, void *c)
{
    conv_ctx *k = c;
    href_conv_forward(out, k->in, x, k->bias, &k->s);
}

static void conv_wrt_bias(float *out, const float *x, void *c)
{
    conv_ctx *k = c;
    href_conv_forward(out, k->in, k->w, x, &k->s);
}

static float *urand(rng *r, size_t n)
{
    float *v = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        v[i] = rng_uniform(r) * 2 - 1;
    return v;
}

Test(hostref, conv_backward_is_the_gradient)
{
    rng r = rng_keyed(11, RNG_TOOL, 0, 0);
    conv_ctx k;
    cr_assert_eq(conv_shape_init(&k.s, 2, 2, 7, 6, 3, 3, 2, 2, 1), 0);
    size_t nin = 2 * 2 * 7 * 6, nw = 3 * 2 * 3 * 2, nout = (size_t)2 * 3 * k.s.OH * k.s.OW;
    k.in = urand(&r, nin), k.w = urand(&r, nw), k.bias = urand(&r, 3);
    float *g = urand(&r, nout), *din = malloc(nin * 4), *dw = malloc(nw * 4), db[3];
    href_conv_backward(din, dw, db, g, k.in, k.w, &k.s);
    fd_check("conv din", conv_wrt_in, &k, k.in, nin, nout, g, din, 0.25f, 1e-4);
    fd_check("conv dw", conv_wrt_w, &k, k.w, nw, nout, g, dw, 0.25f, 1e-4);
    fd_check("conv dbias", conv_wrt_bias, &k, k.bias, 3, nout, g, db, 0.25f, 1e-4);
    free(k.in), free(k.w), free(k.bias), free(g), free(din), free(dw);
}

typedef struct fc_ctx {
    int B, M, N;
    float *in, *w, *bias;
} fc_ctx;

static void fc_wrt_in(float *out, const float *x, void *c)
{
    fc_ctx *k = c;
    href_fc_forward(out, x, k->w, k->bias, k->B, k->M, k->N);
}

static void fc_wrt_w(float *out, const float *x, void *c)
{
    fc_ctx *k = c;
    href_fc_forward(out, k->in, x, k->bias, k->B, k->M, k->N);
}

Test(hostref, fc_backward_is_the_gradient)
{
    rng r = rng_keyed(12, RNG_TOOL, 0, 0);
    fc_ctx k = {.B = 3, .M = 7, .N = 4};
    k.in = urand(&r, 21), k.w = urand(&r, 28), k.bias = urand(&r, 4);
    float *g = urand(&r, 12), din[21], dw[28], db[4];
    href_fc_backward(din, dw, db, g, k.in, k.w, k.B, k.M, k.N);
    fd_check("fc din", fc_wrt_in, &k, k.in, 21, 12, g, din, 0.25f, 1e-4);
    fd_check("fc dw", fc_wrt_w, &k, k.w, 28, 12, g, dw, 0.25f, 1e-4);
    for (int n = 0; n < 4; n++)
        cr_expect_float_eq(db[n], g[n] + g[4 + n] + g[8 + n], 1e-5);
    free(k.in), free(k.w), free(k.bias), free(g);
}

static void maxpool_fwd(float *out, const float *x, void *c) { href_maxpool_forward(out, x, c); }

static void gap_fwd(float *out, const float *x, void *c)
{
    (void)c;
    href_gap_forward(out, x, 2, 3, 5);
}

Test(hostref, pool_and_gap_backward_are_the_gradient)
{
    rng r = rng_keyed(13, RNG_TOOL, 0, 0);
    maxpool_shape s;
    maxpool_shape_init(&s, 2, 2, 5, 6);
    size_t nin = 2 * 2 * 5 * 6, nout = (size_t)2 * 2 * s.OH * s.OW;
    float *in = malloc(nin * 4);
    for (size_t i = 0; i < nin; i++) /* distinct values 0.01 apart: no kink within h */
        in[i] = (float)((i * 37) % nin) * 0.01f;
    float *g = urand(&r, nout), *din = malloc(nin * 4);
    href_maxpool_backward(din, g, in, &s);
    fd_check("maxpool din", maxpool_fwd, &s, in, nin, nout, g, din, 1e-3f, 1e-3);
    float *gin = urand(&r, 30), *gg = urand(&r, 6), gdin[30];
    href_gap_backward(gdin, gg, 2, 3, 5);
    fd_check("gap din", gap_fwd, NULL, gin, 30, 6, gg, gdin, 0.25f, 1e-4);
    free(in), free(g), free(din), free(gin), free(gg);
}

Test(hostref, softmax_xent_loss_and_gradient)
{
    enum { K = 6 };
    float z[K] = {0.3f, -1.2f, 2.0f, 0.0f, 0.7f, -0.4f}, dl[K], loss;
    int32_t label = 4, pred;
    href_softmax_xent(dl, &loss, &pred, z, &label, 1, K, 1.0f);
    double sum = 0;
    for (int k = 0; k < K; k++)
        sum += exp(z[k]);
    cr_expect_float_eq(loss, (float)(log(sum) - z[4]), 1e-6);
    cr_expect_eq(pred, 2);
    for (int k = 0; k < K; k++) {
        float zp[K], zm[K], lp, lm, dd[K];
        int32_t pp;
        memcpy(zp, z, sizeof z);
        memcpy(zm, z, sizeof z);
        zp[k] += 1e-2f, zm[k] -= 1e-2f;
        href_softmax_xent(dd, &lp, &pp, zp, &label, 1, K, 1.0f);
        href_softmax_xent(dd, &lm, &pp, zm, &label, 1, K, 1.0f);
        cr_expect(fabs((lp - lm) / 2e-2 - dl[k]) < 1e-3, "dlogits[%d]: fd %g, analytic %g", k,
                  (lp - lm) / 2e-2, (double)dl[k]);
    }
}
