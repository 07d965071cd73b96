/* selftest.c — `train --selftest`: is this GPU computing what we think?
 *
 * Runs every op of the GPU backend on a tiny net's shapes with random
 * inputs and compares with the host reference loops (hostref.h) at rtol
 * 1e-4 (relative to each element, with the tensor's mean magnitude as the
 * floor). Also exercises the staging path (pin, copy stream, events) that
 * training with --pin --non-blocking uses. One line per check, then a
 * verdict. Phase 2 swaps the reference for the CPU backend (the twin the
 * training actually compares against); the harness stays.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "../common/rng.h"
#include "gpu.h"
#include "hostref.h"

#define RTOL 1e-4

typedef struct st {
    backend *be;
    rng r;
    FILE *out;
    int checks, fails;
} st;

static float *rand_host(st *t, size_t n, float lo, float hi)
{
    float *h = xmalloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = lo + (hi - lo) * rng_uniform(&t->r);
    return h;
}

static void *to_dev(st *t, const void *h, size_t bytes)
{
    void *d = t->be->ops->alloc(t->be, bytes);
    t->be->ops->upload(t->be, d, h, bytes);
    return d;
}

static float *from_dev(st *t, const void *d, size_t n)
{
    float *h = xmalloc(n * sizeof *h);
    t->be->ops->download(t->be, h, d, n * sizeof *h);
    return h;
}

static void verdict(st *t, const char *what, const float *got, const float *want, size_t n)
{
    size_t worst = 0;
    double r = href_compare(got, want, n, RTOL, &worst);
    t->checks++;
    if (r <= 1.0) {
        fprintf(t->out, "selftest: %-34s ok    (worst error %.2g of tolerance)\n", what, r);
        return;
    }
    t->fails++;
    fprintf(t->out, "selftest: %-34s FAIL  element %zu: gpu %.9g, reference %.9g\n", what, worst,
            (double)got[worst], (double)want[worst]);
}

/* download n floats from d and compare them with want */
static void verdict_dev(st *t, const char *what, const void *d, const float *want, size_t n)
{
    float *got = from_dev(t, d, n);
    verdict(t, what, got, want, n);
    free(got);
}

static void check_conv(st *t, int B, int C, int H, int W, int K, int R, int stride, int pad)
{
    const backend_ops *o = t->be->ops;
    conv_shape s;
    if (conv_shape_init(&s, B, C, H, W, K, R, R, stride, pad) != 0)
        return;
    size_t nin = (size_t)B * C * H * W, nw = (size_t)K * C * R * R,
           nout = (size_t)B * K * s.OH * s.OW;
    float *in = rand_host(t, nin, -1, 1), *w = rand_host(t, nw, -0.5f, 0.5f);
    float *bias = rand_host(t, K, -0.5f, 0.5f), *dout = rand_host(t, nout, -1, 1);
    float *din_in = to_dev(t, in, nin * 4), *dw_w = to_dev(t, w, nw * 4);
    float *d_bias = to_dev(t, bias, K * 4), *d_dout = to_dev(t, dout, nout * 4);
    float *d_out = o->alloc(t->be, nout * 4), *d_din = o->alloc(t->be, nin * 4);
    float *d_dw = o->alloc(t->be, nw * 4), *d_db = o->alloc(t->be, K * 4);
    void *plan = o->conv_plan(t->be, &s);
    o->conv_forward(t->be, plan, d_out, din_in, dw_w, d_bias, &s);
    o->conv_backward(t->be, plan, d_din, d_dw, d_db, d_dout, din_in, dw_w, &s);
    float *ref_out = xmalloc(nout * 4), *ref_din = xmalloc(nin * 4), *ref_dw = xmalloc(nw * 4),
          *ref_db = xmalloc(K * 4);
    href_conv_forward(ref_out, in, w, bias, &s);
    href_conv_backward(ref_din, ref_dw, ref_db, dout, in, w, &s);
    char name[64];
    snprintf(name, sizeof name, "conv %dx%dx%dx%d k%d %dx%d s%d p%d fwd", B, C, H, W, K, R, R,
             stride, pad);
    verdict_dev(t, name, d_out, ref_out, nout);
    snprintf(name, sizeof name, "conv %dx%dx%dx%d k%d %dx%d s%d p%d dx", B, C, H, W, K, R, R,
             stride, pad);
    verdict_dev(t, name, d_din, ref_din, nin);
    snprintf(name, sizeof name, "conv %dx%dx%dx%d k%d %dx%d s%d p%d dw", B, C, H, W, K, R, R,
             stride, pad);
    verdict_dev(t, name, d_dw, ref_dw, nw);
    snprintf(name, sizeof name, "conv %dx%dx%dx%d k%d %dx%d s%d p%d db", B, C, H, W, K, R, R,
             stride, pad);
    verdict_dev(t, name, d_db, ref_db, K);
    o->conv_plan_free(t->be, plan);
    void *dev[] = {din_in, dw_w, d_bias, d_dout, d_out, d_din, d_dw, d_db};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
        o->free(t->be, dev[i]);
    free(in), free(w), free(bias), free(dout), free(ref_out), free(ref_din), free(ref_dw),
        free(ref_db);
}

static void check_pool_relu(st *t)
{
    const backend_ops *o = t->be->ops;
    pool_shape s;
    pool_shape_init(&s, 3, 4, 9, 10);
    size_t nin = (size_t)s.B * s.C * s.H * s.W, nout = (size_t)s.B * s.C * s.OH * s.OW;
    float *in = rand_host(t, nin, -1, 1), *dout = rand_host(t, nout, -1, 1),
          *dr = rand_host(t, nin, -1, 1);
    float *d_in = to_dev(t, in, nin * 4), *d_dout = to_dev(t, dout, nout * 4),
          *d_dr = to_dev(t, dr, nin * 4);
    float *d_out = o->alloc(t->be, nout * 4), *d_din = o->alloc(t->be, nin * 4);
    float *d_relu = o->alloc(t->be, nin * 4), *d_drelu = o->alloc(t->be, nin * 4);
    o->maxpool_forward(t->be, d_out, d_in, &s);
    o->maxpool_backward(t->be, d_din, d_dout, d_out, d_in, &s);
    o->relu_forward(t->be, d_relu, d_in, nin);
    o->relu_backward(t->be, d_drelu, d_dr, d_relu, nin);
    float *ref = xmalloc(nin * 4), *ref_relu = xmalloc(nin * 4);
    href_maxpool_forward(ref, in, &s);
    verdict_dev(t, "maxpool 3x4x9x10 fwd", d_out, ref, nout);
    href_maxpool_backward(ref, dout, in, &s);
    verdict_dev(t, "maxpool 3x4x9x10 bwd", d_din, ref, nin);
    href_relu_forward(ref_relu, in, nin);
    verdict_dev(t, "relu fwd", d_relu, ref_relu, nin);
    href_relu_backward(ref, dr, ref_relu, nin);
    verdict_dev(t, "relu bwd", d_drelu, ref, nin);
    void *dev[] = {d_in, d_dout, d_dr, d_out, d_din, d_relu, d_drelu};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
        o->free(t->be, dev[i]);
    free(in), free(dout), free(dr), free(ref), free(ref_relu);
}

static void check_fc(st *t, int B, int M, int N)
{
    const backend_ops *o = t->be->ops;
    size_t ni = (size_t)B * M, nw = (size_t)N * M, no = (size_t)B * N;
    float *in = rand_host(t, ni, -1, 1), *w = rand_host(t, nw, -0.3f, 0.3f),
          *bias = rand_host(t, N, -1, 1);
    float *dout = rand_host(t, no, -1, 1);
    float *d_in = to_dev(t, in, ni * 4), *d_w = to_dev(t, w, nw * 4), *d_b = to_dev(t, bias, N * 4);
    float *d_dout = to_dev(t, dout, no * 4), *d_out = o->alloc(t->be, no * 4);
    float *d_din = o->alloc(t->be, ni * 4), *d_dw = o->alloc(t->be, nw * 4),
          *d_db = o->alloc(t->be, N * 4);
    o->fc_forward(t->be, d_out, d_in, d_w, d_b, B, M, N);
    o->fc_backward(t->be, d_din, d_dw, d_db, d_dout, d_in, d_w, B, M, N);
    float *r_out = xmalloc(no * 4), *r_din = xmalloc(ni * 4), *r_dw = xmalloc(nw * 4),
          *r_db = xmalloc(N * 4);
    href_fc_forward(r_out, in, w, bias, B, M, N);
    href_fc_backward(r_din, r_dw, r_db, dout, in, w, B, M, N);
    char name[64];
    snprintf(name, sizeof name, "fc %dx%d -> %d fwd", B, M, N);
    verdict_dev(t, name, d_out, r_out, no);
    snprintf(name, sizeof name, "fc %dx%d -> %d dx", B, M, N);
    verdict_dev(t, name, d_din, r_din, ni);
    snprintf(name, sizeof name, "fc %dx%d -> %d dw", B, M, N);
    verdict_dev(t, name, d_dw, r_dw, nw);
    snprintf(name, sizeof name, "fc %dx%d -> %d db", B, M, N);
    verdict_dev(t, name, d_db, r_db, N);
    void *dev[] = {d_in, d_w, d_b, d_dout, d_out, d_din, d_dw, d_db};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
        o->free(t->be, dev[i]);
    free(in), free(w), free(bias), free(dout), free(r_out), free(r_din), free(r_dw), free(r_db);
}

static void check_small_ops(st *t)
{
    const backend_ops *o = t->be->ops;
    enum { B = 5, C = 3, HW = 7, K = 10 };
    /* global average pooling */
    float *in = rand_host(t, B * C * HW, -1, 1), *dout = rand_host(t, B * C, -1, 1);
    float *d_in = to_dev(t, in, sizeof(float) * B * C * HW),
          *d_dout = to_dev(t, dout, sizeof(float) * B * C);
    float *d_out = o->alloc(t->be, sizeof(float) * B * C),
          *d_din = o->alloc(t->be, sizeof(float) * B * C * HW);
    o->gap_forward(t->be, d_out, d_in, B, C, HW);
    o->gap_backward(t->be, d_din, d_dout, B, C, HW);
    float ref[B * C * HW];
    href_gap_forward(ref, in, B, C, HW);
    verdict_dev(t, "global average pool fwd", d_out, ref, B * C);
    href_gap_backward(ref, dout, B, C, HW);
    verdict_dev(t, "global average pool bwd", d_din, ref, B * C * HW);
    o->free(t->be, d_in), o->free(t->be, d_dout), o->free(t->be, d_out), o->free(t->be, d_din);
    free(in), free(dout);

    /* softmax cross-entropy, with one row of large logits */
    float *logits = rand_host(t, B * K, -4, 4);
    for (int k = 0; k < K; k++)
        logits[K + k] += 80.0f;
    int32_t labels[B];
    for (int b = 0; b < B; b++)
        labels[b] = (int32_t)rng_below(&t->r, K);
    float *d_logits = to_dev(t, logits, sizeof(float) * B * K);
    int32_t *d_labels = to_dev(t, labels, sizeof labels);
    float *d_dl = o->alloc(t->be, sizeof(float) * B * K),
          *d_loss = o->alloc(t->be, sizeof(float) * B);
    int32_t *d_pred = o->alloc(t->be, sizeof(int32_t) * B);
    o->softmax_xent(t->be, d_dl, d_loss, d_pred, d_logits, d_labels, B, K, 1.0f / B);
    float r_dl[B * K], r_loss[B];
    int32_t r_pred[B], pred[B];
    href_softmax_xent(r_dl, r_loss, r_pred, logits, labels, B, K, 1.0f / B);
    verdict_dev(t, "softmax xent dlogits", d_dl, r_dl, B * K);
    verdict_dev(t, "softmax xent loss", d_loss, r_loss, B);
    o->download(t->be, pred, d_pred, sizeof pred);
    float pf[B], rf[B];
    for (int b = 0; b < B; b++)
        pf[b] = (float)pred[b], rf[b] = (float)r_pred[b];
    verdict(t, "softmax xent argmax", pf, rf, B);
    o->free(t->be, d_logits), o->free(t->be, d_labels), o->free(t->be, d_dl),
        o->free(t->be, d_loss), o->free(t->be, d_pred);
    free(logits);

    /* SGD with momentum and weight decay, two steps */
    enum { N = 1000 };
    float *w = rand_host(t, N, -1, 1), *v = rand_host(t, N, -0.1f, 0.1f),
          *gr = rand_host(t, N, -1, 1);
    float *d_w = to_dev(t, w, sizeof(float) * N), *d_v = to_dev(t, v, sizeof(float) * N);
    float *d_g = to_dev(t, gr, sizeof(float) * N);
    for (int step = 0; step < 2; step++) {
        o->sgd_update(t->be, d_w, d_v, d_g, N, 0.1f, 0.9f, 5e-4f);
        href_sgd(w, v, gr, N, 0.1f, 0.9f, 5e-4f);
    }
    verdict_dev(t, "sgd momentum weights", d_w, w, N);
    verdict_dev(t, "sgd momentum velocity", d_v, v, N);
    o->free(t->be, d_w), o->free(t->be, d_v), o->free(t->be, d_g);
    free(w), free(v), free(gr);
}

/* u8 batch through the staging path: pin, copy stream, events, normalise */
static void check_staging(st *t)
{
    const backend_ops *o = t->be->ops;
    enum { B = 4, C = 3, HW = 64 };
    size_t n = B * C * HW;
    uint8_t *host = xmalloc(n);
    for (size_t i = 0; i < n; i++)
        host[i] = (uint8_t)rng_below(&t->r, 256);
    const float mean[C] = {0.485f, 0.456f, 0.406f}, sd[C] = {0.229f, 0.224f, 0.225f};
    errbuf e;
    int pinned = o->host_pin && o->host_pin(t->be, host, n, &e) == 0;
    if (o->host_pin && !pinned)
        fprintf(t->out, "selftest: note: %s; the staging check runs on pageable memory\n", e.msg);
    uint8_t *d_in = o->alloc(t->be, n);
    float *d_out = o->alloc(t->be, n * sizeof(float));
    o->stage_copy(t->be, 0, d_in, host, n);
    o->stage_wait(t->be, 0);
    o->busy_begin(t->be);
    o->normalize_u8(t->be, d_out, d_in, B, C, HW, mean, sd);
    o->stage_release(t->be, 0);
    o->busy_end(t->be);
    o->stage_done(t->be, 0, 1);
    float *ref = xmalloc(n * sizeof(float));
    href_normalize_u8(ref, host, B, C, HW, mean, sd);
    verdict_dev(t, "normalize u8 via copy stream", d_out, ref, n);
    double busy = o->busy_take(t->be);
    t->checks++;
    if (busy >= 0.0) {
        fprintf(t->out, "selftest: %-34s ok    (%.3f ms)\n", "compute-busy timing", busy * 1e3);
    } else {
        t->fails++;
        fprintf(t->out, "selftest: %-34s FAIL  negative time %g s\n", "compute-busy timing", busy);
    }
    if (pinned)
        o->host_unpin(t->be, host);
    o->free(t->be, d_in), o->free(t->be, d_out);
    free(host), free(ref);
}

int gpu_selftest_run(backend *be, FILE *out)
{
    st t = {.be = be, .r = rng_keyed(20240611, RNG_TOOL, 7, 0), .out = out};
    check_conv(&t, 3, 2, 8, 8, 4, 3, 1, 1);
    check_conv(&t, 2, 3, 11, 9, 5, 5, 2, 0);
    check_pool_relu(&t);
    check_fc(&t, 6, 50, 10);
    check_small_ops(&t);
    check_staging(&t);
    if (t.fails)
        fprintf(out,
                "selftest: FAIL: %d of %d checks differ from the host reference "
                "(rtol %.0e); this GPU setup computes wrong results\n",
                t.fails, t.checks, RTOL);
    else
        fprintf(out,
                "selftest: PASS: %d checks, the GPU matches the host reference within rtol %.0e\n",
                t.checks, RTOL);
    return t.fails ? 1 : 0;
}

int gpu_selftest(FILE *out)
{
    gpu_info g;
    gpu_probe(0, &g);
    if (g.status != GPU_OK) {
        fprintf(out, "selftest: no usable GPU: %s\n", g.reason);
        return 2;
    }
    char desc[400];
    fprintf(out, "selftest: device 0: %s\n", gpu_describe(&g, desc, sizeof desc));
    errbuf e;
    backend *be = backend_cuda_create(0, &e);
    if (!be) {
        fprintf(out, "selftest: cannot start the GPU backend: %s\n", e.msg);
        return 2;
    }
    int rc = gpu_selftest_run(be, out);
    be->ops->destroy(be);
    return rc;
}
