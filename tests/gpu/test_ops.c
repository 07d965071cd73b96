/* test_ops.c — every op of the GPU backend, forward and backward, against
 * the host reference loops (tests/support/hostref.c) at rtol 1e-4, on shapes that
 * exercise padding, stride, odd sizes and non-square kernels. Runs on the
 * fake runtime (run-fakecuda) and on a real device (run-gpu; skipped
 * without one). Outputs are pre-filled with garbage to prove they are
 * overwritten, never accumulated into.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/gpu_test.h"
#include "tests/support/hostref.h"
#ifdef TRAIN_FAKECUDA
#include "tests/fakecuda/runtime/fake.h"
static void setup(void) { fake_reset(); }
#else
static void setup(void) {}
#endif

TestSuite(gpu_ops, .init = setup);

/* device buffer of n floats holding garbage (1e30) */
static float *garbage(backend *be, size_t n)
{
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = 1e30f;
    float *d = gt_to_dev(be, h, n * sizeof *h);
    free(h);
    return d;
}

static void conv_case(int B, int C, int H, int W, int K, int R, int S, int stride, int pad,
                      int with_din)
{
    backend *be = gt_backend();
    const backend_ops *o = be->ops;
    rng r = rng_keyed(1, RNG_TOOL, (uint64_t)(B * 1000 + C * 100 + K), (uint64_t)(R * 10 + S));
    conv_shape s;
    cr_assert_eq(conv_shape_init(&s, B, C, H, W, K, R, S, stride, pad), 0);
    size_t nin = (size_t)B * C * H * W, nw = (size_t)K * C * R * S,
           nout = (size_t)B * K * s.OH * s.OW;
    float *in = gt_rand(&r, nin, -1, 1), *w = gt_rand(&r, nw, -0.5f, 0.5f);
    float *bias = gt_rand(&r, K, -1, 1), *dout = gt_rand(&r, nout, -1, 1);
    float *d_in = gt_to_dev(be, in, nin * 4), *d_w = gt_to_dev(be, w, nw * 4);
    float *d_b = gt_to_dev(be, bias, K * 4), *d_dout = gt_to_dev(be, dout, nout * 4);
    float *d_out = garbage(be, nout), *d_din = garbage(be, nin), *d_dw = garbage(be, nw),
          *d_db = garbage(be, K);
    void *plan = o->conv_plan(be, &s);
    o->conv_forward(be, plan, d_out, d_in, d_w, d_b, &s);
    o->conv_backward(be, plan, with_din ? d_din : NULL, d_dw, d_db, d_dout, d_in, d_w, &s);

    float *r_out = malloc(nout * 4), *r_din = malloc(nin * 4), *r_dw = malloc(nw * 4),
          *r_db = malloc(K * 4);
    href_conv_forward(r_out, in, w, bias, &s);
    href_conv_backward(r_din, r_dw, r_db, dout, in, w, &s);
    gt_expect_dev(be, "conv forward", d_out, r_out, nout);
    gt_expect_dev(be, "conv dw", d_dw, r_dw, nw);
    gt_expect_dev(be, "conv dbias", d_db, r_db, K);
    if (with_din) {
        gt_expect_dev(be, "conv din", d_din, r_din, nin);
    } else {
        float *untouched = gt_from_dev(be, d_din, nin);
        for (size_t i = 0; i < nin; i++)
            cr_assert_eq(untouched[i], 1e30f, "din was written although NULL was passed");
        free(untouched);
    }
    o->conv_plan_free(be, plan);
    float *dev[] = {d_in, d_w, d_b, d_dout, d_out, d_din, d_dw, d_db};
    for (size_t i = 0; i < 8; i++)
        o->free(be, dev[i]);
    free(in), free(w), free(bias), free(dout), free(r_out), free(r_din), free(r_dw), free(r_db);
    gt_done(be);
}

Test(gpu_ops, conv_3x3_pad1) { conv_case(2, 3, 9, 7, 4, 3, 3, 1, 1, 1); }

Test(gpu_ops, conv_5x5_stride2_pad2) { conv_case(2, 2, 11, 12, 3, 5, 5, 2, 2, 1); }

Test(gpu_ops, conv_nonsquare_kernel_no_pad) { conv_case(3, 2, 8, 10, 5, 3, 2, 1, 0, 1); }

Test(gpu_ops, conv_1x1) { conv_case(2, 6, 5, 5, 3, 1, 1, 1, 0, 1); }

Test(gpu_ops, conv_lenet_first_layer_without_din) { conv_case(4, 1, 28, 28, 20, 5, 5, 1, 0, 0); }

Test(gpu_ops, conv_lenet_second_layer) { conv_case(2, 20, 12, 12, 50, 5, 5, 1, 0, 1); }

Test(gpu_ops, relu_forward_backward)
{
    backend *be = gt_backend();
    rng r = rng_keyed(2, RNG_TOOL, 0, 0);
    size_t n = 1237;
    float *in = gt_rand(&r, n, -1, 1), *dout = gt_rand(&r, n, -1, 1);
    in[0] = 0.0f; /* the kink: gradient 0 */
    float *d_in = gt_to_dev(be, in, n * 4), *d_dout = gt_to_dev(be, dout, n * 4);
    float *d_out = garbage(be, n), *d_din = garbage(be, n);
    be->ops->relu_forward(be, d_out, d_in, n);
    be->ops->relu_backward(be, d_din, d_dout, d_out, n);
    float *r_out = malloc(n * 4), *r_din = malloc(n * 4);
    href_relu_forward(r_out, in, n);
    href_relu_backward(r_din, dout, r_out, n);
    gt_expect_dev(be, "relu forward", d_out, r_out, n);
    gt_expect_dev(be, "relu backward", d_din, r_din, n);
    be->ops->free(be, d_in), be->ops->free(be, d_dout), be->ops->free(be, d_out),
        be->ops->free(be, d_din);
    free(in), free(dout), free(r_out), free(r_din);
    gt_done(be);
}

Test(gpu_ops, maxpool_odd_sizes)
{
    backend *be = gt_backend();
    rng r = rng_keyed(3, RNG_TOOL, 0, 0);
    maxpool_shape s;
    cr_assert_eq(maxpool_shape_init(&s, 3, 4, 9, 11), 0);
    cr_assert_eq(s.OH, 4);
    cr_assert_eq(s.OW, 5);
    size_t nin = (size_t)s.B * s.C * s.H * s.W, nout = (size_t)s.B * s.C * s.OH * s.OW;
    float *in = gt_rand(&r, nin, -1, 1), *dout = gt_rand(&r, nout, -1, 1);
    float *d_in = gt_to_dev(be, in, nin * 4), *d_dout = gt_to_dev(be, dout, nout * 4);
    float *d_out = garbage(be, nout), *d_din = garbage(be, nin);
    be->ops->maxpool_forward(be, d_out, d_in, &s);
    be->ops->maxpool_backward(be, d_din, d_dout, d_out, d_in, &s);
    float *r_out = malloc(nout * 4), *r_din = malloc(nin * 4);
    href_maxpool_forward(r_out, in, &s);
    href_maxpool_backward(r_din, dout, in, &s);
    gt_expect_dev(be, "maxpool forward", d_out, r_out, nout);
    gt_expect_dev(be, "maxpool backward", d_din, r_din, nin);
    be->ops->free(be, d_in), be->ops->free(be, d_dout), be->ops->free(be, d_out),
        be->ops->free(be, d_din);
    free(in), free(dout), free(r_out), free(r_din);
    gt_done(be);
}

static void fc_case(int B, int M, int N, int with_din)
{
    backend *be = gt_backend();
    rng r = rng_keyed(4, RNG_TOOL, (uint64_t)B, (uint64_t)(M * 1000 + N));
    size_t ni = (size_t)B * M, nw = (size_t)N * M, no = (size_t)B * N;
    float *in = gt_rand(&r, ni, -1, 1), *w = gt_rand(&r, nw, -0.2f, 0.2f),
          *bias = gt_rand(&r, N, -1, 1);
    float *dout = gt_rand(&r, no, -1, 1);
    float *d_in = gt_to_dev(be, in, ni * 4), *d_w = gt_to_dev(be, w, nw * 4),
          *d_b = gt_to_dev(be, bias, N * 4);
    float *d_dout = gt_to_dev(be, dout, no * 4);
    float *d_out = garbage(be, no), *d_din = garbage(be, ni), *d_dw = garbage(be, nw),
          *d_db = garbage(be, N);
    be->ops->fc_forward(be, d_out, d_in, d_w, d_b, B, M, N);
    be->ops->fc_backward(be, with_din ? d_din : NULL, d_dw, d_db, d_dout, d_in, d_w, B, M, N);
    float *r_out = malloc(no * 4), *r_din = malloc(ni * 4), *r_dw = malloc(nw * 4),
          *r_db = malloc(N * 4);
    href_fc_forward(r_out, in, w, bias, B, M, N);
    href_fc_backward(r_din, r_dw, r_db, dout, in, w, B, M, N);
    gt_expect_dev(be, "fc forward", d_out, r_out, no);
    gt_expect_dev(be, "fc dw", d_dw, r_dw, nw);
    gt_expect_dev(be, "fc dbias", d_db, r_db, N);
    if (with_din)
        gt_expect_dev(be, "fc din", d_din, r_din, ni);
    float *dev[] = {d_in, d_w, d_b, d_dout, d_out, d_din, d_dw, d_db};
    for (size_t i = 0; i < 8; i++)
        be->ops->free(be, dev[i]);
    free(in), free(w), free(bias), free(dout), free(r_out), free(r_din), free(r_dw), free(r_db);
    gt_done(be);
}

Test(gpu_ops, fc_rectangular) { fc_case(6, 50, 10, 1); }

/* B, M, N all different and none 1: a swapped dimension or leading
 * dimension cannot go unnoticed */
Test(gpu_ops, fc_lenet_hidden_without_din) { fc_case(7, 800, 33, 0); }

Test(gpu_ops, fc_single_everything) { fc_case(1, 1, 1, 1); }

Test(gpu_ops, global_average_pool)
{
    backend *be = gt_backend();
    rng r = rng_keyed(5, RNG_TOOL, 0, 0);
    int B = 3, C = 5, HW = 49;
    size_t n = (size_t)B * C * HW;
    float *in = gt_rand(&r, n, -1, 1), *dout = gt_rand(&r, (size_t)B * C, -1, 1);
    float *d_in = gt_to_dev(be, in, n * 4), *d_dout = gt_to_dev(be, dout, (size_t)B * C * 4);
    float *d_out = garbage(be, (size_t)B * C), *d_din = garbage(be, n);
    be->ops->gap_forward(be, d_out, d_in, B, C, HW);
    be->ops->gap_backward(be, d_din, d_dout, B, C, HW);
    float *r_out = malloc((size_t)B * C * 4), *r_din = malloc(n * 4);
    href_gap_forward(r_out, in, B, C, HW);
    href_gap_backward(r_din, dout, B, C, HW);
    gt_expect_dev(be, "gap forward", d_out, r_out, (size_t)B * C);
    gt_expect_dev(be, "gap backward", d_din, r_din, n);
    be->ops->free(be, d_in), be->ops->free(be, d_dout), be->ops->free(be, d_out),
        be->ops->free(be, d_din);
    free(in), free(dout), free(r_out), free(r_din);
    gt_done(be);
}

Test(gpu_ops, softmax_xent_with_large_logits)
{
    backend *be = gt_backend();
    rng r = rng_keyed(6, RNG_TOOL, 0, 0);
    enum { B = 7, K = 10 };
    float *logits = gt_rand(&r, B * K, -3, 3);
    for (int k = 0; k < K; k++) {
        logits[1 * K + k] += 1000.0f; /* exp would overflow without the max shift */
        logits[2 * K + k] -= 1000.0f;
    }
    int32_t labels[B];
    for (int b = 0; b < B; b++)
        labels[b] = (int32_t)rng_below(&r, K);
    float *d_logits = gt_to_dev(be, logits, sizeof(float) * B * K);
    int32_t *d_labels = gt_to_dev(be, labels, sizeof labels);
    float *d_dl = garbage(be, B * K), *d_loss = garbage(be, B);
    int32_t *d_pred = be->ops->alloc(be, sizeof(int32_t) * B);
    be->ops->softmax_xent(be, d_dl, d_loss, d_pred, d_logits, d_labels, B, K, 1.0f / B);
    float r_dl[B * K], r_loss[B];
    int32_t r_pred[B], pred[B];
    href_softmax_xent(r_dl, r_loss, r_pred, logits, labels, B, K, 1.0f / B);
    gt_expect_dev(be, "softmax dlogits", d_dl, r_dl, B * K);
    gt_expect_dev(be, "softmax loss", d_loss, r_loss, B);
    be->ops->download(be, pred, d_pred, sizeof pred);
    for (int b = 0; b < B; b++)
        cr_expect_eq(pred[b], r_pred[b], "argmax of sample %d", b);
    be->ops->free(be, d_logits), be->ops->free(be, d_labels), be->ops->free(be, d_dl);
    be->ops->free(be, d_loss), be->ops->free(be, d_pred);
    free(logits);
    gt_done(be);
}

Test(gpu_ops, sgd_momentum_three_steps)
{
    backend *be = gt_backend();
    rng r = rng_keyed(7, RNG_TOOL, 0, 0);
    size_t n = 3001;
    float *w = gt_rand(&r, n, -1, 1), *v = gt_rand(&r, n, -0.1f, 0.1f), *g = gt_rand(&r, n, -1, 1);
    float *d_w = gt_to_dev(be, w, n * 4), *d_v = gt_to_dev(be, v, n * 4),
          *d_g = gt_to_dev(be, g, n * 4);
    for (int step = 0; step < 3; step++) {
        be->ops->sgd_update(be, d_w, d_v, d_g, n, 0.05f, 0.9f, 1e-3f);
        href_sgd(w, v, g, n, 0.05f, 0.9f, 1e-3f);
    }
    gt_expect_dev(be, "sgd weights", d_w, w, n);
    gt_expect_dev(be, "sgd velocity", d_v, v, n);
    be->ops->free(be, d_w), be->ops->free(be, d_v), be->ops->free(be, d_g);
    free(w), free(v), free(g);
    gt_done(be);
}

Test(gpu_ops, normalize_u8_three_channels)
{
    backend *be = gt_backend();
    enum { B = 2, C = 3, HW = 300 };
    size_t n = B * C * HW;
    uint8_t *in = malloc(n);
    for (size_t i = 0; i < n; i++)
        in[i] = (uint8_t)(i * 7 + 3); /* every value 0..255 appears */
    const float mean[C] = {0.5f, 0.25f, 0.0f}, sd[C] = {0.5f, 0.2f, 1.0f};
    uint8_t *d_in = gt_to_dev(be, in, n);
    float *d_out = garbage(be, n);
    be->ops->normalize_u8(be, d_out, d_in, B, C, HW, mean, sd);
    float *ref = malloc(n * 4);
    href_normalize_u8(ref, in, B, C, HW, mean, sd);
    gt_expect_dev(be, "normalize u8", d_out, ref, n);
    be->ops->free(be, d_in), be->ops->free(be, d_out);
    free(in), free(ref);
    gt_done(be);
}

/* A 20-step chain through one conv layer, relu, pool, fc, loss and SGD:
 * the ops composed, parameters updated in place, compared step by step
 * with the same chain on the host. Phase 2 replaces the host chain with
 * the CPU backend. */
Test(gpu_ops, small_net_twenty_steps)
{
    backend *be = gt_backend();
    const backend_ops *o = be->ops;
    rng r = rng_keyed(8, RNG_TOOL, 0, 0);
    enum { B = 4, C = 1, H = 8, W = 8, K = 3, R = 3, N = 5, STEPS = 20 };
    conv_shape cs;
    maxpool_shape ps;
    conv_shape_init(&cs, B, C, H, W, K, R, R, 1, 1);
    maxpool_shape_init(&ps, B, K, cs.OH, cs.OW);
    int M = K * ps.OH * ps.OW;
    size_t nx = (size_t)B * C * H * W, nc = (size_t)B * K * cs.OH * cs.OW, np = (size_t)B * M;
    size_t ncw = (size_t)K * C * R * R, nfw = (size_t)N * M;
    float *x = gt_rand(&r, nx, 0, 1), *cw = gt_rand(&r, ncw, -0.3f, 0.3f),
          *cb = gt_rand(&r, K, -0.1f, 0.1f);
    float *fw = gt_rand(&r, nfw, -0.1f, 0.1f), *fb = gt_rand(&r, N, -0.1f, 0.1f);
    int32_t lab[B] = {0, 1, 2, 3};
    float *cwv = calloc(ncw, 4), *cbv = calloc(K, 4), *fwv = calloc(nfw, 4), *fbv = calloc(N, 4);
    /* device copies */
    float *d_x = gt_to_dev(be, x, nx * 4), *d_cw = gt_to_dev(be, cw, ncw * 4),
          *d_cb = gt_to_dev(be, cb, K * 4);
    float *d_fw = gt_to_dev(be, fw, nfw * 4), *d_fb = gt_to_dev(be, fb, N * 4);
    int32_t *d_lab = gt_to_dev(be, lab, sizeof lab);
    float *d_cwv = o->alloc(be, ncw * 4), *d_cbv = o->alloc(be, K * 4),
          *d_fwv = o->alloc(be, nfw * 4), *d_fbv = o->alloc(be, N * 4);
    float *d_c = o->alloc(be, nc * 4), *d_a = o->alloc(be, nc * 4), *d_p = o->alloc(be, np * 4);
    float *d_z = o->alloc(be, B * N * 4), *d_dz = o->alloc(be, B * N * 4),
          *d_loss = o->alloc(be, B * 4);
    int32_t *d_pred = o->alloc(be, B * 4);
    float *d_dp = o->alloc(be, np * 4), *d_da = o->alloc(be, nc * 4), *d_dc = o->alloc(be, nc * 4);
    float *d_gcw = o->alloc(be, ncw * 4), *d_gcb = o->alloc(be, K * 4),
          *d_gfw = o->alloc(be, nfw * 4), *d_gfb = o->alloc(be, N * 4);
    void *plan = o->conv_plan(be, &cs);
    /* host scratch */
    float *c = malloc(nc * 4), *a = malloc(nc * 4), *p = malloc(np * 4), z[B * N], dz[B * N],
          loss[B];
    float *dp = malloc(np * 4), *da = malloc(nc * 4), *dc = malloc(nc * 4), *gcw = malloc(ncw * 4),
          gcb[K];
    float *gfw = malloc(nfw * 4), gfb[N];
    int32_t pred[B];
    for (int step = 0; step < STEPS; step++) {
        o->conv_forward(be, plan, d_c, d_x, d_cw, d_cb, &cs);
        o->relu_forward(be, d_a, d_c, nc);
        o->maxpool_forward(be, d_p, d_a, &ps);
        o->fc_forward(be, d_z, d_p, d_fw, d_fb, B, M, N);
        o->softmax_xent(be, d_dz, d_loss, d_pred, d_z, d_lab, B, N, 1.0f / B);
        o->fc_backward(be, d_dp, d_gfw, d_gfb, d_dz, d_p, d_fw, B, M, N);
        o->maxpool_backward(be, d_da, d_dp, d_p, d_a, &ps);
        o->relu_backward(be, d_dc, d_da, d_a, nc);
        o->conv_backward(be, plan, NULL, d_gcw, d_gcb, d_dc, d_x, d_cw, &cs);
        o->sgd_update(be, d_cw, d_cwv, d_gcw, ncw, 0.1f, 0.9f, 0.0f);
        o->sgd_update(be, d_cb, d_cbv, d_gcb, K, 0.1f, 0.9f, 0.0f);
        o->sgd_update(be, d_fw, d_fwv, d_gfw, nfw, 0.1f, 0.9f, 0.0f);
        o->sgd_update(be, d_fb, d_fbv, d_gfb, N, 0.1f, 0.9f, 0.0f);

        href_conv_forward(c, x, cw, cb, &cs);
        href_relu_forward(a, c, nc);
        href_maxpool_forward(p, a, &ps);
        href_fc_forward(z, p, fw, fb, B, M, N);
        href_softmax_xent(dz, loss, pred, z, lab, B, N, 1.0f / B);
        href_fc_backward(dp, gfw, gfb, dz, p, fw, B, M, N);
        href_maxpool_backward(da, dp, a, &ps);
        href_relu_backward(dc, da, a, nc);
        href_conv_backward(NULL, gcw, gcb, dc, x, cw, &cs);
        href_sgd(cw, cwv, gcw, ncw, 0.1f, 0.9f, 0.0f);
        href_sgd(cb, cbv, gcb, K, 0.1f, 0.9f, 0.0f);
        href_sgd(fw, fwv, gfw, nfw, 0.1f, 0.9f, 0.0f);
        href_sgd(fb, fbv, gfb, N, 0.1f, 0.9f, 0.0f);

        char what[48];
        snprintf(what, sizeof what, "loss at step %d", step);
        gt_expect_dev(be, what, d_loss, loss, B);
    }
    gt_expect_dev(be, "conv weights after 20 steps", d_cw, cw, ncw);
    gt_expect_dev(be, "fc weights after 20 steps", d_fw, fw, nfw);
    o->conv_plan_free(be, plan);
    void *dev[] = {d_x,    d_cw,  d_cb, d_fw, d_fb,  d_lab, d_cwv, d_cbv,
                   d_fwv,  d_fbv, d_c,  d_a,  d_p,   d_z,   d_dz,  d_loss,
                   d_pred, d_dp,  d_da, d_dc, d_gcw, d_gcb, d_gfw, d_gfb};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
        o->free(be, dev[i]);
    free(x), free(cw), free(cb), free(fw), free(fb), free(cwv), free(cbv), free(fwv), free(fbv);
    free(c), free(a), free(p), free(dp), free(da), free(dc), free(gcw), free(gfw);
    gt_done(be);
}
