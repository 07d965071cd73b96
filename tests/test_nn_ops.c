/* test_nn_ops.c — every CPU backend operation against straightforward
 * reference loops in double (the convolution's is the GPU tests', from
 * tests/support/hostref.c), on shapes that reach the edge cases: padding, stride 2, 1x1 convolutions, odd pooling sizes, ties,
 * batches that split into uneven chunks, fc layers big enough to be cut
 * into blocks. Also: the results do not depend on the thread count. */
#define _GNU_SOURCE
#include "tests/support/hostref.h"
#include "tests/support/nn_fixtures.h"

TestSuite(nn_ops);

/* ---------------------------------------------------------------- references */
/* The convolution reference is the GPU tests' (tests/support/hostref.c:
 * direct loops, accumulated in double, no im2col); widened to double for
 * assert_close. */
static double *widen(const float *x, size_t n)
{
    double *d = xmalloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

static double *ref_conv_forward(const float *in, const float *w, const float *bias,
                                const conv_shape *s)
{
    size_t n = (size_t)s->B * s->K * s->OH * s->OW;
    float *out = xmalloc(n * sizeof *out);
    href_conv_forward(out, in, w, bias, s);
    double *d = widen(out, n);
    free(out);
    return d;
}

/* ---------------------------------------------------------------- convolution */
static void check_conv(int threads, int B, int C, int H, int W, int K, int R, int stride, int pad)
{
    backend *be = cpu_backend(threads);
    conv_shape s;
    cr_assert_eq(conv_shape_init(&s, B, C, H, W, K, R, R, stride, pad), 0);
    size_t nin = (size_t)B * C * H * W, nout = (size_t)B * K * s.OH * s.OW,
           nw = (size_t)K * C * R * R;
    float *in = rand_floats(nin, -1, 1, 1), *w = rand_floats(nw, -1, 1, 2),
          *bias = rand_floats(K, -1, 1, 3);
    float *dout = rand_floats(nout, -1, 1, 4);
    float *out = be->ops->alloc(be, nout * 4), *din = be->ops->alloc(be, nin * 4);
    float *dw = be->ops->alloc(be, nw * 4), *db = be->ops->alloc(be, (size_t)K * 4);
    void *plan = be->ops->conv_plan(be, &s);
    be->ops->conv_forward(be, plan, out, in, w, bias, &s);
    double *rout = ref_conv_forward(in, w, bias, &s);
    assert_close(out, rout, nout, 1e-4, 1e-4, "conv out");
    be->ops->conv_backward(be, plan, din, dw, db, dout, in, w, &s);
    float *fdin = xmalloc(nin * 4), *fdw = xmalloc(nw * 4), *fdb = xmalloc((size_t)K * 4);
    href_conv_backward(fdin, fdw, fdb, dout, in, w, &s);
    double *rdin = widen(fdin, nin), *rdw = widen(fdw, nw), *rdb = widen(fdb, (size_t)K);
    free(fdin), free(fdw), free(fdb);
    assert_close(din, rdin, nin, 1e-4, 1e-4, "conv din");
    assert_close(dw, rdw, nw, 1e-3, 1e-4, "conv dw");
    assert_close(db, rdb, K, 1e-3, 1e-4, "conv dbias");
    /* without din: same weight gradients, bit for bit */
    float *dw2 = be->ops->alloc(be, nw * 4), *db2 = be->ops->alloc(be, (size_t)K * 4);
    be->ops->conv_backward(be, plan, NULL, dw2, db2, dout, in, w, &s);
    cr_assert_eq(memcmp(dw, dw2, nw * 4), 0);
    cr_assert_eq(memcmp(db, db2, (size_t)K * 4), 0);
    be->ops->conv_plan_free(be, plan);
    be->ops->free(be, out);
    be->ops->free(be, din);
    be->ops->free(be, dw);
    be->ops->free(be, db);
    be->ops->free(be, dw2);
    be->ops->free(be, db2);
    free(in), free(w), free(bias), free(dout), free(rout), free(rdin), free(rdw), free(rdb);
    be->ops->destroy(be);
}

Test(nn_ops, conv_lenet_shapes)
{
    check_conv(2, 5, 1, 28, 28, 20, 5, 1, 0);
    check_conv(2, 9, 20, 12, 12, 50, 5, 1, 0);
}

Test(nn_ops, conv_padded_and_odd_sizes)
{
    check_conv(2, 3, 3, 11, 9, 4, 3, 1, 1);
    check_conv(1, 2, 2, 7, 10, 3, 5, 1, 2); /* pad 2, 5x5 */
    check_conv(3, 17, 2, 6, 6, 3, 3, 1, 1); /* 17 samples: uneven chunks */
    /* 3x3 with >= 8 channels: the tap-by-tap path (pad 1 and 0, C != K),
     * forward only below 128 output pixels, backward too from 128 */
    check_conv(2, 5, 8, 9, 13, 12, 3, 1, 1);
    check_conv(3, 7, 12, 7, 6, 8, 3, 1, 0);
    check_conv(2, 3, 8, 12, 12, 10, 3, 1, 1);
    check_conv(3, 5, 10, 13, 14, 8, 3, 1, 0);
}

Test(nn_ops, conv_stride2_and_1x1)
{
    check_conv(2, 3, 3, 9, 8, 5, 3, 2, 1);
    check_conv(2, 2, 2, 10, 10, 3, 4, 2, 0);
    check_conv(2, 4, 6, 5, 7, 3, 1, 1, 0); /* 1x1: no im2col */
}

Test(nn_ops, conv_plan_serves_smaller_batch)
{
    backend *be = cpu_backend(2);
    conv_shape big, small;
    conv_shape_init(&big, 16, 2, 8, 8, 3, 3, 3, 1, 1);
    conv_shape_init(&small, 5, 2, 8, 8, 3, 3, 3, 1, 1);
    size_t nin = 5 * 2 * 64, nout = 5 * 3 * 64;
    float *in = rand_floats(nin, -1, 1, 5), *w = rand_floats(54, -1, 1, 6),
          *bias = rand_floats(3, -1, 1, 7);
    float *out = be->ops->alloc(be, nout * 4);
    void *plan = be->ops->conv_plan(be, &big);
    be->ops->conv_forward(be, plan, out, in, w, bias, &small);
    double *ref = ref_conv_forward(in, w, bias, &small);
    assert_close(out, ref, nout, 1e-4, 1e-4, "out");
    be->ops->conv_plan_free(be, plan);
    be->ops->free(be, out);
    free(in), free(w), free(bias), free(ref);
    be->ops->destroy(be);
}

/* ---------------------------------------------------------------- fully connected */
static void check_fc(int B, int M, int N)
{
    backend *be = cpu_backend(2);
    float *in = rand_floats((size_t)B * M, -1, 1, 10), *w = rand_floats((size_t)N * M, -1, 1, 11);
    float *bias = rand_floats(N, -1, 1, 12), *dout = rand_floats((size_t)B * N, -1, 1, 13);
    float *out = be->ops->alloc(be, (size_t)B * N * 4),
          *din = be->ops->alloc(be, (size_t)B * M * 4);
    float *dw = be->ops->alloc(be, (size_t)N * M * 4), *db = be->ops->alloc(be, (size_t)N * 4);
    double *rout = xcalloc((size_t)B * N, 8), *rdin = xcalloc((size_t)B * M, 8);
    double *rdw = xcalloc((size_t)N * M, 8), *rdb = xcalloc(N, 8);
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++) {
            double acc = bias[n];
            for (int m = 0; m < M; m++) {
                acc += (double)in[(size_t)b * M + m] * w[(size_t)n * M + m];
                rdw[(size_t)n * M + m] += (double)dout[(size_t)b * N + n] * in[(size_t)b * M + m];
                rdin[(size_t)b * M + m] += (double)dout[(size_t)b * N + n] * w[(size_t)n * M + m];
            }
            rout[(size_t)b * N + n] = acc;
            rdb[n] += dout[(size_t)b * N + n];
        }
    be->ops->fc_forward(be, out, in, w, bias, B, M, N);
    assert_close(out, rout, (size_t)B * N, 1e-4, 1e-4, "fc out");
    be->ops->fc_backward(be, din, dw, db, dout, in, w, B, M, N);
    assert_close(din, rdin, (size_t)B * M, 1e-4, 1e-4, "fc din");
    assert_close(dw, rdw, (size_t)N * M, 1e-4, 1e-4, "fc dw");
    assert_close(db, rdb, N, 1e-4, 1e-4, "fc dbias");
    be->ops->fc_backward(be, NULL, dw, db, dout, in, w, B, M, N);
    assert_close(dw, rdw, (size_t)N * M, 1e-4, 1e-4, "fc dw (no din)");
    be->ops->free(be, out), be->ops->free(be, din), be->ops->free(be, dw), be->ops->free(be, db);
    free(in), free(w), free(bias), free(dout), free(rout), free(rdin), free(rdw), free(rdb);
    be->ops->destroy(be);
}

Test(nn_ops, fc_small_and_blocked)
{
    check_fc(3, 7, 5);
    check_fc(64, 800, 300); /* cut into blocks, with ragged last blocks */
    check_fc(1, 50, 10);
}

/* ---------------------------------------------------------------- element-wise */
Test(nn_ops, normalize_relu_sgd)
{
    backend *be = cpu_backend(2);
    int B = 3, C = 3, HW = 37;
    size_t n = (size_t)B * C * HW;
    uint8_t *x = rand_bytes(n, 20);
    float mean[3] = {0.1f, 0.5f, 0.9f}, sd[3] = {0.2f, 0.5f, 1.5f};
    float *out = be->ops->alloc(be, n * 4);
    be->ops->normalize_u8(be, out, x, B, C, HW, mean, sd);
    for (size_t i = 0; i < n; i++) {
        int c = (int)(i / HW) % C;
        double want = (x[i] / 255.0 - mean[c]) / sd[c];
        cr_assert(fabs(out[i] - want) < 1e-5, "normalize[%zu] %g vs %g", i, (double)out[i], want);
    }
    /* relu across several element blocks */
    size_t big = 100003;
    float *a = rand_floats(big, -1, 1, 21), *g = rand_floats(big, -1, 1, 22);
    float *y = be->ops->alloc(be, big * 4), *dx = be->ops->alloc(be, big * 4);
    be->ops->relu_forward(be, y, a, big);
    be->ops->relu_backward(be, dx, g, y, big);
    for (size_t i = 0; i < big; i++) {
        cr_assert_eq(y[i], a[i] > 0 ? a[i] : 0.0f);
        cr_assert_eq(dx[i], a[i] > 0 ? g[i] : 0.0f);
    }
    /* SGD: PyTorch's formula, element by element */
    float *w = rand_floats(big, -1, 1, 23), *v = rand_floats(big, -1, 1, 24);
    float *w0 = xmalloc(big * 4), *v0 = xmalloc(big * 4);
    memcpy(w0, w, big * 4);
    memcpy(v0, v, big * 4);
    be->ops->sgd_update(be, w, v, g, big, 0.1f, 0.9f, 1e-3f);
    for (size_t i = 0; i < big; i++) {
        float gd = g[i] + 1e-3f * w0[i];
        float vn = 0.9f * v0[i] + gd;
        cr_assert_eq(v[i], vn, "v[%zu]", i);
        cr_assert_eq(w[i], w0[i] - 0.1f * vn, "w[%zu]", i);
    }
    be->ops->free(be, out), be->ops->free(be, y), be->ops->free(be, dx);
    free(x), free(a), free(g), free(w), free(v), free(w0), free(v0);
    be->ops->destroy(be);
}

/* ---------------------------------------------------------------- pooling */
static void check_maxpool(int B, int C, int H, int W, int ties)
{
    backend *be = cpu_backend(2);
    maxpool_shape s;
    cr_assert_eq(maxpool_shape_init(&s, B, C, H, W), 0);
    size_t nin = (size_t)B * C * H * W, nout = (size_t)B * C * s.OH * s.OW;
    float *in = rand_floats(nin, -1, 1, 30), *dout = rand_floats(nout, -1, 1, 31);
    if (ties)
        for (size_t i = 0; i < nin; i++)
            in[i] = floorf(in[i] * 2); /* values in {-2,-1,0,1}: many ties */
    float *out = be->ops->alloc(be, nout * 4), *din = be->ops->alloc(be, nin * 4);
    be->ops->maxpool_forward(be, out, in, &s);
    for (size_t i = 0; i < nin; i++)
        din[i] = 123.0f; /* every element must be written */
    be->ops->maxpool_backward(be, din, dout, out, in, &s);
    double *rdin = xcalloc(nin, 8);
    for (int bc = 0; bc < B * C; bc++)
        for (int oh = 0; oh < s.OH; oh++)
            for (int ow = 0; ow < s.OW; ow++) {
                size_t base = (size_t)bc * H * W;
                size_t idx[4] = {base + (size_t)(2 * oh) * W + 2 * ow,
                                 base + (size_t)(2 * oh) * W + 2 * ow + 1,
                                 base + (size_t)(2 * oh + 1) * W + 2 * ow,
                                 base + (size_t)(2 * oh + 1) * W + 2 * ow + 1};
                int best = 0;
                for (int k = 1; k < 4; k++)
                    if (in[idx[k]] > in[idx[best]])
                        best = k;
                size_t o = ((size_t)bc * s.OH + oh) * s.OW + ow;
                cr_assert_eq(out[o], in[idx[best]]);
                rdin[idx[best]] = dout[o];
            }
    for (size_t i = 0; i < nin; i++)
        cr_assert_eq((double)din[i], rdin[i], "din[%zu] %g vs %g", i, (double)din[i], rdin[i]);
    be->ops->free(be, out), be->ops->free(be, din);
    free(in), free(dout), free(rdin);
    be->ops->destroy(be);
}

Test(nn_ops, maxpool_even_odd_and_ties)
{
    check_maxpool(3, 4, 24, 24, 0);
    check_maxpool(2, 3, 7, 9, 0); /* odd: last row and column dropped */
    check_maxpool(2, 2, 6, 6, 1); /* ties: the first maximum wins */
}

Test(nn_ops, gap_and_softmax_xent)
{
    backend *be = cpu_backend(1);
    int B = 4, C = 5, HW = 13, K = 7;
    float *in = rand_floats((size_t)B * C * HW, -1, 1, 40),
          *g = rand_floats((size_t)B * C, -1, 1, 41);
    float *out = be->ops->alloc(be, (size_t)B * C * 4),
          *din = be->ops->alloc(be, (size_t)B * C * HW * 4);
    be->ops->gap_forward(be, out, in, B, C, HW);
    be->ops->gap_backward(be, din, g, B, C, HW);
    for (int bc = 0; bc < B * C; bc++) {
        double sum = 0;
        for (int i = 0; i < HW; i++) {
            sum += in[(size_t)bc * HW + i];
            cr_assert(fabs(din[(size_t)bc * HW + i] - g[bc] / (double)HW) < 1e-6);
        }
        cr_assert(fabs(out[bc] - sum / HW) < 1e-5);
    }
    float *logits = rand_floats((size_t)B * K, -4, 4, 42);
    int32_t labels[4] = {0, 6, 3, 3};
    float *dl = be->ops->alloc(be, (size_t)B * K * 4), *loss = be->ops->alloc(be, B * 4);
    int32_t *pred = be->ops->alloc(be, B * 4);
    be->ops->softmax_xent(be, dl, loss, pred, logits, labels, B, K, 0.25f);
    for (int b = 0; b < B; b++) {
        const float *l = logits + b * K;
        double mx = l[0], z = 0;
        int arg = 0;
        for (int k = 1; k < K; k++)
            if (l[k] > mx)
                mx = l[k], arg = k;
        for (int k = 0; k < K; k++)
            z += exp(l[k] - mx);
        cr_assert(fabs(loss[b] - (log(z) - (l[labels[b]] - mx))) < 1e-5, "loss %d", b);
        cr_assert_eq(pred[b], arg);
        for (int k = 0; k < K; k++) {
            double p = exp(l[k] - mx) / z;
            cr_assert(fabs(dl[b * K + k] - (p - (k == labels[b])) * 0.25) < 1e-6);
        }
    }
    be->ops->free(be, out), be->ops->free(be, din), be->ops->free(be, dl), be->ops->free(be, loss);
    be->ops->free(be, pred);
    free(in), free(g), free(logits);
    be->ops->destroy(be);
}

/* ---------------------------------------------------------------- threads */
/* Results are the same bits for 1, 2 and 3 threads: the work is cut by
 * shape, never by thread count. */
Test(nn_ops, results_do_not_depend_on_thread_count)
{
    conv_shape s;
    conv_shape_init(&s, 37, 6, 12, 12, 10, 3, 3, 1, 1);
    size_t nin = (size_t)37 * 6 * 144, nout = (size_t)37 * 10 * 144, nw = 540;
    float *in = rand_floats(nin, -1, 1, 50), *w = rand_floats(nw, -1, 1, 51),
          *bias = rand_floats(10, -1, 1, 52);
    float *dout = rand_floats(nout, -1, 1, 53), *fw = rand_floats(300 * 1440, -1, 1, 54);
    float *fb = rand_floats(300, -1, 1, 55);
    float *ref[6] = {0};
    for (int t = 1; t <= 3; t++) {
        backend *be = cpu_backend(t);
        float *out = be->ops->alloc(be, nout * 4), *din = be->ops->alloc(be, nin * 4);
        float *dw = be->ops->alloc(be, nw * 4), *db = be->ops->alloc(be, 40);
        float *fo = be->ops->alloc(be, 37 * 300 * 4), *fdw = be->ops->alloc(be, 300 * 1440 * 4);
        float *fdb = be->ops->alloc(be, 300 * 4), *fdin = be->ops->alloc(be, 37 * 1440 * 4);
        void *plan = be->ops->conv_plan(be, &s);
        be->ops->conv_forward(be, plan, out, in, w, bias, &s);
        be->ops->conv_backward(be, plan, din, dw, db, dout, in, w, &s);
        be->ops->fc_forward(be, fo, out, fw, fb, 37, 1440, 300);
        be->ops->fc_backward(be, fdin, fdw, fdb, fo, out, fw, 37, 1440, 300);
        float *got[6] = {out, din, dw, fo, fdw, fdin};
        size_t n[6] = {nout, nin, nw, 37 * 300, 300 * 1440, 37 * 1440};
        for (int i = 0; i < 6; i++) {
            if (t == 1) {
                ref[i] = xmalloc(n[i] * 4);
                memcpy(ref[i], got[i], n[i] * 4);
            } else {
                cr_assert_eq(memcmp(ref[i], got[i], n[i] * 4), 0,
                             "output %d differs with %d threads", i, t);
            }
            be->ops->free(be, got[i]);
        }
        be->ops->free(be, db), be->ops->free(be, fdb);
        be->ops->conv_plan_free(be, plan);
        be->ops->destroy(be);
    }
    for (int i = 0; i < 6; i++)
        free(ref[i]);
    free(in), free(w), free(bias), free(dout), free(fw), free(fb);
}

/* ---------------------------------------------------------------- groups */
/* One layer pair's outputs for samples [b0, b0 + B) of a batch, computed
 * with batch_groups set to the groups they hold (none: B is size[0]): conv (6x12x12 -> 10, 3x3
 * pad 1) forward and backward, then fc 1440 -> N forward and backward
 * (dout of the fc is its own output). */
typedef struct grouped_out {
    float *out, *din, *dw, *db, *fo, *fdin, *fdw, *fdb;
} grouped_out;

#define G_C 6
#define G_K 10
#define G_HW 144
#define G_M (G_K * G_HW)

static void grouped_run(backend *be, const int *size, int ngroups, int b0, const float *in,
                        const float *dout, const float *w, const float *bias, const float *fw,
                        const float *fb, int N, grouped_out *o)
{
    int B = ngroups ? 0 : size[0]; /* no groups: size[0] is B */
    for (int g = 0; g < ngroups; g++)
        B += size[g];
    conv_shape s;
    conv_shape_init(&s, B, G_C, 12, 12, G_K, 3, 3, 1, 1);
    o->out = xcalloc((size_t)B * G_M + 1, 4);
    o->din = xcalloc((size_t)B * G_C * G_HW + 1, 4);
    o->dw = xcalloc(G_K * G_C * 9, 4);
    o->db = xcalloc(G_K, 4);
    o->fo = xcalloc((size_t)B * N + 1, 4);
    o->fdin = xcalloc((size_t)B * G_M + 1, 4);
    o->fdw = xcalloc((size_t)N * G_M, 4);
    o->fdb = xcalloc(N, 4);
    be->ops->batch_groups(be, size, ngroups);
    if (B > 0) {
        void *plan = be->ops->conv_plan(be, &s);
        const float *x = in + (size_t)b0 * G_C * G_HW;
        be->ops->conv_forward(be, plan, o->out, x, w, bias, &s);
        be->ops->conv_backward(be, plan, o->din, o->dw, o->db, dout + (size_t)b0 * G_M, x, w, &s);
        be->ops->conv_plan_free(be, plan);
        be->ops->fc_forward(be, o->fo, o->out, fw, fb, B, G_M, N);
        be->ops->fc_backward(be, o->fdin, o->fdw, o->fdb, o->fo, o->out, fw, B, G_M, N);
    }
    be->ops->batch_groups(be, NULL, 0);
}

static void grouped_free(grouped_out *o)
{
    free(o->out), free(o->din), free(o->dw), free(o->db);
    free(o->fo), free(o->fdin), free(o->fdw), free(o->fdb);
}

static void vadd(float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] += b[i];
}

/* part p's weight gradients added into acc (acc += p: the tree's top) */
static void grouped_add(grouped_out *acc, const grouped_out *p, int N)
{
    vadd(acc->dw, p->dw, G_K * G_C * 9);
    vadd(acc->db, p->db, G_K);
    vadd(acc->fdw, p->fdw, (size_t)N * G_M);
    vadd(acc->fdb, p->fdb, N);
}

static void assert_same(const float *a, const float *b, size_t n, const char *what, int parts)
{
    cr_assert_eq(memcmp(a, b, n * 4), 0, "%s: the batch in %d parts gives other bits", what, parts);
}

/* A batch in 4 groups (one empty, uneven sizes, one group several conv
 * chunks long) gives, bit for bit, what its parts give when each part is
 * computed alone with its own groups and the parts' weight gradients are
 * added as the top of the tree: the ranks of a job holding 2 groups or 1
 * group each. Per-sample outputs are the same bits wherever the sample is. */
static void check_groups(int N, int threads)
{
    int size[4] = {5, 0, 19, 7}, B = 31;
    float *in = rand_floats((size_t)B * G_C * G_HW, -1, 1, 60),
          *dout = rand_floats((size_t)B * G_M, -1, 1, 61);
    float *w = rand_floats(G_K * G_C * 9, -1, 1, 62), *bias = rand_floats(G_K, -1, 1, 63);
    float *fw = rand_floats((size_t)N * G_M, -0.05f, 0.05f, 64), *fb = rand_floats(N, -1, 1, 65);
    backend *be = cpu_backend(threads);
    grouped_out whole, half[2], quarter[4];
    grouped_run(be, size, 4, 0, in, dout, w, bias, fw, fb, N, &whole);
    grouped_run(be, size, 2, 0, in, dout, w, bias, fw, fb, N, &half[0]);
    grouped_run(be, size + 2, 2, 5, in, dout, w, bias, fw, fb, N, &half[1]);
    for (int q = 0, at = 0; q < 4; at += size[q], q++)
        grouped_run(be, size + q, 1, at, in, dout, w, bias, fw, fb, N, &quarter[q]);
    /* per sample: where the sample sits in the parts */
    assert_same(whole.out, half[0].out, (size_t)5 * G_M, "conv out", 2);
    assert_same(whole.out + 5 * G_M, half[1].out, (size_t)26 * G_M, "conv out", 2);
    assert_same(whole.din + 5 * G_C * G_HW, half[1].din, (size_t)26 * G_C * G_HW, "conv din", 2);
    assert_same(whole.fo, half[0].fo, (size_t)5 * N, "fc out", 2);
    assert_same(whole.fo + 5 * N, half[1].fo, (size_t)26 * N, "fc out", 2);
    assert_same(whole.fdin, half[0].fdin, (size_t)5 * G_M, "fc din", 2);
    assert_same(whole.fdin + 5 * G_M, half[1].fdin, (size_t)26 * G_M, "fc din", 2);
    assert_same(whole.fo + 24 * N, quarter[3].fo, (size_t)7 * N, "fc out", 4);
    /* weight gradients: ((q0 + q1) + (q2 + q3)) and (h0 + h1) */
    grouped_add(&quarter[0], &quarter[1], N);
    grouped_add(&quarter[2], &quarter[3], N);
    grouped_add(&quarter[0], &quarter[2], N);
    grouped_add(&half[0], &half[1], N);
    const grouped_out *parts[2] = {&half[0], &quarter[0]};
    for (int k = 0; k < 2; k++) {
        assert_same(whole.dw, parts[k]->dw, G_K * G_C * 9, "conv dw", 2 << k);
        assert_same(whole.db, parts[k]->db, G_K, "conv dbias", 2 << k);
        assert_same(whole.fdw, parts[k]->fdw, (size_t)N * G_M, "fc dw", 2 << k);
        assert_same(whole.fdb, parts[k]->fdb, N, "fc dbias", 2 << k);
    }
    /* and they are the gradients: against the ungrouped backend's */
    grouped_out plain;
    grouped_run(be, &B, 0, 0, in, dout, w, bias, fw, fb, N, &plain);
    double *r = xmalloc((size_t)N * G_M * sizeof *r);
    for (size_t i = 0; i < (size_t)N * G_M; i++)
        r[i] = plain.fdw[i];
    assert_close(whole.fdw, r, (size_t)N * G_M, 1e-4, 1e-4, "fc dw, groups vs none");
    for (size_t i = 0; i < G_K * G_C * 9; i++)
        r[i] = plain.dw[i];
    assert_close(whole.dw, r, G_K * G_C * 9, 1e-4, 1e-4, "conv dw, groups vs none");
    free(r);
    grouped_free(&plain);
    grouped_free(&whole);
    for (int i = 0; i < 2; i++)
        grouped_free(&half[i]);
    for (int i = 0; i < 4; i++)
        grouped_free(&quarter[i]);
    be->ops->destroy(be);
    free(in), free(dout), free(w), free(bias), free(fw), free(fb);
}

Test(nn_ops, groups_give_the_bits_of_the_batch_cut_into_parts)
{
    check_groups(300, 2); /* fc cut into blocks */
    check_groups(10, 3);  /* one block, OpenBLAS's small-matrix kernels */
}

Test(nn_ops, bad_thread_count_is_an_error)
{
    errbuf e = {{0}};
    cr_assert_null(backend_cpu_create(-1, &e));
    cr_assert(strstr(e.msg, "--threads -1") != NULL, "%s", e.msg);
}
