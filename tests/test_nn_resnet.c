/* test_nn_resnet.c — what residual nets add to the CPU backend and the
 * model, against reference loops in double written here: batch norm in
 * training mode (outputs, saved statistics, running statistics with the
 * unbiased variance) and in inference mode, a mean far from zero (where a
 * one-pass E[x^2] - E[x]^2 variance loses its digits), max pooling 3x3/2
 * with padding (overlapping windows add), add; results independent of the
 * thread count; resnet shapes, tensors and parameter counts (the numbers
 * torchvision and the CIFAR paper give); eval mode uses the running
 * statistics; no weight decay on bn parameters; and a resnet8 that learns
 * the synthetic task. */
#define _GNU_SOURCE
#include "tests/support/nn_fixtures.h"

TestSuite(nn_resnet);

/* ---------------------------------------------------------------- batch norm */
typedef struct bn_bufs {
    float *x, *y, *scale, *shift, *mean, *invstd, *rm, *rv;
} bn_bufs;

static void bn_alloc(bn_bufs *b, int B, int C, int HW, float offset)
{
    size_t n = (size_t)B * C * HW;
    b->x = rand_floats(n, -2, 2, 60);
    for (size_t i = 0; i < n; i++)
        b->x[i] += offset;
    b->y = xcalloc(n, 4);
    b->scale = rand_floats(C, 0.5f, 2, 61);
    b->shift = rand_floats(C, -1, 1, 62);
    b->mean = xcalloc(C, 4), b->invstd = xcalloc(C, 4);
    b->rm = rand_floats(C, -1, 1, 63), b->rv = rand_floats(C, 0.5f, 2, 64);
}

static void bn_free(bn_bufs *b)
{
    free(b->x), free(b->y), free(b->scale), free(b->shift), free(b->mean), free(b->invstd),
        free(b->rm);
    free(b->rv);
}

static void check_bn_train(int B, int C, int HW, float offset, int threads)
{
    backend *be = cpu_backend(threads);
    bn_bufs b;
    bn_alloc(&b, B, C, HW, offset);
    float *rm0 = xmalloc(C * 4), *rv0 = xmalloc(C * 4);
    memcpy(rm0, b.rm, C * 4), memcpy(rv0, b.rv, C * 4);
    be->ops->bn_forward_train(be, b.y, b.mean, b.invstd, b.rm, b.rv, b.x, b.scale, b.shift, B, C,
                              HW, 0.1f, 1e-5f);
    double N = (double)B * HW;
    for (int c = 0; c < C; c++) {
        double s = 0, v = 0;
        for (int i = 0; i < B; i++)
            for (int k = 0; k < HW; k++)
                s += b.x[((size_t)i * C + c) * HW + k];
        double mean = s / N;
        for (int i = 0; i < B; i++)
            for (int k = 0; k < HW; k++) {
                double d = b.x[((size_t)i * C + c) * HW + k] - mean;
                v += d * d;
            }
        double var = v / N, inv = 1.0 / sqrt(var + 1e-5);
        double rmean = 0.9 * rm0[c] + 0.1 * mean,
               rvar = 0.9 * rv0[c] + 0.1 * (N > 1 ? var * N / (N - 1) : var);
        assert_close(&b.mean[c], &mean, 1, 1e-5, 1e-6, "save_mean");
        assert_close(&b.invstd[c], &inv, 1, 0, 1e-4, "save_invstd");
        assert_close(&b.rm[c], &rmean, 1, 1e-5, 1e-6, "running_mean");
        assert_close(&b.rv[c], &rvar, 1, 1e-6, 1e-4, "running_var");
        for (int i = 0; i < B; i++)
            for (int k = 0; k < HW; k++) {
                size_t j = ((size_t)i * C + c) * HW + k;
                double want = (b.x[j] - mean) * inv * b.scale[c] + b.shift[c];
                assert_close(&b.y[j], &want, 1, 1e-4, 1e-4, "bn y");
            }
    }
    free(rm0), free(rv0);
    bn_free(&b);
    be->ops->destroy(be);
}

Test(nn_resnet, batchnorm_train_matches_the_reference)
{
    check_bn_train(4, 3, 25, 0.0f, 2);
    check_bn_train(3, 5, 7, 0.0f, 1);      /* HW not a multiple of the vector width */
    check_bn_train(2, 2, 200, 1000.0f, 2); /* mean 1000, spread 2: two-pass variance */
    check_bn_train(1, 4, 1, 0.0f, 2);      /* N = 1: variance 0, no division by N - 1 = 0 */
}

Test(nn_resnet, batchnorm_inference_uses_the_running_statistics)
{
    int B = 3, C = 4, HW = 9;
    backend *be = cpu_backend(2);
    bn_bufs b;
    bn_alloc(&b, B, C, HW, 0.5f);
    be->ops->bn_forward_infer(be, b.y, b.x, b.scale, b.shift, b.rm, b.rv, B, C, HW, 1e-5f);
    for (size_t j = 0; j < (size_t)B * C * HW; j++) {
        int c = (int)(j / HW % C);
        double want = (b.x[j] - b.rm[c]) / sqrt(b.rv[c] + 1e-5) * b.scale[c] + b.shift[c];
        assert_close(&b.y[j], &want, 1, 1e-5, 1e-5, "bn infer y");
    }
    bn_free(&b);
    be->ops->destroy(be);
}

Test(nn_resnet, batchnorm_does_not_depend_on_the_thread_count)
{
    int B = 5, C = 7, HW = 33;
    size_t n = (size_t)B * C * HW;
    float *y[2], *dx[2], *ds[2], *dh[2];
    float *dy = rand_floats(n, -1, 1, 70);
    for (int t = 0; t < 2; t++) {
        backend *be = cpu_backend(t ? 3 : 1);
        bn_bufs b;
        bn_alloc(&b, B, C, HW, 0.0f);
        be->ops->bn_forward_train(be, b.y, b.mean, b.invstd, b.rm, b.rv, b.x, b.scale, b.shift, B,
                                  C, HW, 0.1f, 1e-5f);
        dx[t] = xmalloc(n * 4), ds[t] = xmalloc(C * 4), dh[t] = xmalloc(C * 4);
        be->ops->bn_backward(be, dx[t], ds[t], dh[t], dy, b.x, b.scale, b.mean, b.invstd, B, C, HW);
        y[t] = b.y, b.y = NULL;
        bn_free(&b);
        be->ops->destroy(be);
    }
    cr_assert_eq(memcmp(y[0], y[1], n * 4), 0);
    cr_assert_eq(memcmp(dx[0], dx[1], n * 4), 0);
    cr_assert_eq(memcmp(ds[0], ds[1], C * 4), 0);
    cr_assert_eq(memcmp(dh[0], dh[1], C * 4), 0);
    for (int t = 0; t < 2; t++)
        free(y[t]), free(dx[t]), free(ds[t]), free(dh[t]);
    free(dy);
}

/* ---------------------------------------------------------------- max pool 3x3/2 pad 1, add */
Test(nn_resnet, maxpool_3x3_stride_2_pad_1_matches_the_reference)
{
    int B = 2, C = 3, H = 9, W = 8;
    backend *be = cpu_backend(2);
    maxpool_shape s;
    cr_assert_eq(maxpool_shape_init_k(&s, B, C, H, W, 3, 2, 1), 0);
    cr_assert_eq(s.OH, 5);
    cr_assert_eq(s.OW, 4);
    size_t nin = (size_t)B * C * H * W, nout = (size_t)B * C * s.OH * s.OW;
    float *in = rand_floats(nin, -3, -1, 80),
          *dout = rand_floats(nout, -1, 1, 81); /* all < 0: pad never wins */
    float *out = xmalloc(nout * 4), *din = xmalloc(nin * 4);
    for (size_t i = 0; i < nin; i++)
        din[i] = 77.0f; /* every element must be written */
    be->ops->maxpool_forward(be, out, in, &s);
    be->ops->maxpool_backward(be, din, dout, out, in, &s);
    double *rdin = xcalloc(nin, 8);
    for (int bc = 0; bc < B * C; bc++)
        for (int oh = 0; oh < s.OH; oh++)
            for (int ow = 0; ow < s.OW; ow++) {
                size_t best = SIZE_MAX;
                for (int r = 0; r < 3; r++)
                    for (int q = 0; q < 3; q++) {
                        int ih = oh * 2 - 1 + r, iw = ow * 2 - 1 + q;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                            continue;
                        size_t j = ((size_t)bc * H + ih) * W + iw;
                        if (best == SIZE_MAX || in[j] > in[best])
                            best = j;
                    }
                size_t o = ((size_t)bc * s.OH + oh) * s.OW + ow;
                cr_assert_eq(out[o], in[best], "out[%zu]", o);
                rdin[best] += dout[o];
            }
    assert_close(din, rdin, nin, 1e-6, 1e-6, "maxpool 3x3 din");
    free(in), free(dout), free(out), free(din), free(rdin);
    be->ops->destroy(be);
}

Test(nn_resnet, pool_shapes_refuse_padding_over_half_the_window)
{
    maxpool_shape s;
    cr_assert_eq(maxpool_shape_init_k(&s, 1, 1, 8, 8, 3, 2, 2), -1);
    cr_assert_eq(maxpool_shape_init_k(&s, 1, 1, 1, 1, 3, 2, 1), 0);
    cr_assert_eq(s.OH, 1);
}

Test(nn_resnet, add_and_copy)
{
    backend *be = cpu_backend(2);
    size_t n = 70001; /* more than one block */
    float *a = rand_floats(n, -1, 1, 90), *b = rand_floats(n, -1, 1, 91), *o = xmalloc(n * 4);
    be->ops->add(be, o, a, b, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(o[i], a[i] + b[i]);
    be->ops->add(be, a, a, b, n); /* in place */
    cr_assert_eq(memcmp(a, o, n * 4), 0);
    be->ops->copy(be, o, b, n);
    cr_assert_eq(memcmp(o, b, n * 4), 0);
    free(a), free(b), free(o);
    be->ops->destroy(be);
}

/* ---------------------------------------------------------------- models */
static int count_role(const model *m, tensor_role r)
{
    int k = 0;
    for (int i = 0; i < m->ntensors; i++)
        k += m->tensors[i].role == r;
    return k;
}

Test(nn_resnet, resnet_shapes_and_parameter_counts)
{
    backend *be = cpu_backend(1);
    model m;
    errbuf e = {{0}};
    /* torchvision's resnet18(num_classes=10): 11,181,642 parameters */
    cr_assert_eq(model_create(&m, "resnet18", 3, 64, 64, 10, 2, be, &e), 0, "%s", e.msg);
    cr_assert_eq(m.nparams_used, 11181642);
    cr_assert_eq(count_role(&m, TENSOR_WEIGHT), 21);   /* 17 3x3/7x7 convs, 3 projections, fc */
    cr_assert_eq(count_role(&m, TENSOR_STAT), 2 * 20); /* 20 bns */
    model_free(&m);
    /* resnet20 with 1x1 projections (option B): the CIFAR paper's 0.27M */
    cr_assert_eq(model_create(&m, "resnet20", 3, 32, 32, 10, 2, be, &e), 0, "%s", e.msg);
    cr_assert_eq(m.nparams_used, 272474);
    cr_assert_eq(m.layers[m.nlayers - 2].kind, LAYER_GAP);
    cr_assert_eq(m.layers[m.nlayers - 2].in_h, 8);
    cr_assert_eq(m.layers[m.nlayers - 2].in_c, 64);
    model_free(&m);
    /* resnet18 runs down to 32 px (1x1 before the pool) */
    cr_assert_eq(model_create(&m, "resnet18", 3, 32, 32, 10, 2, be, &e), 0, "%s", e.msg);
    cr_assert_eq(m.layers[m.nlayers - 2].in_h, 1);
    model_free(&m);
    be->ops->destroy(be);
}

/* eval steps use the running statistics, training steps the batch's:
 * with fresh running statistics (0, 1) the two losses differ, and eval
 * does not move the running statistics */
Test(nn_resnet, eval_uses_running_statistics_and_leaves_them)
{
    backend *be = cpu_backend(2);
    model m;
    errbuf e = {{0}};
    nn_set s;
    synth_set(&s, 8, 1, 12, 12, 3, 5);
    cr_assert_eq(model_create(&m, "resnet8", 1, 12, 12, 3, 8, be, &e), 0, "%s", e.msg);
    model_init_params(&m, 1);
    float *p0 = download_floats(be, m.params, m.nparams);
    step_stats a, b, c;
    cr_assert_eq(model_eval_step(&m, s.x, s.y, 8, &a), 0);
    float *p1 = download_floats(be, m.params, m.nparams);
    cr_assert_eq(memcmp(p0, p1, m.nparams * 4), 0,
                 "eval changed the parameters or running statistics");
    cr_assert_eq(model_forward_backward(&m, s.x, s.y, 8, &b), 0);
    cr_assert(fabs(a.loss_sum - b.loss_sum) > 1e-3, "eval and train losses equal: %g", a.loss_sum);
    float *p2 = download_floats(be, m.params, m.nparams);
    const model_tensor *rm = NULL;
    for (int i = 0; i < m.ntensors && !rm; i++)
        if (strcmp(m.tensors[i].name, "bn1.running_mean") == 0)
            rm = &m.tensors[i];
    cr_assert_not_null(rm);
    cr_assert_neq(memcmp(p0 + rm->offset, p2 + rm->offset, rm->n * 4), 0,
                  "training did not update bn1's mean");
    cr_assert_eq(model_eval_step(&m, s.x, s.y, 8, &c), 0);
    cr_assert(fabs(a.loss_sum - c.loss_sum) > 1e-6, "eval ignored the running statistics");
    free(p0), free(p1), free(p2);
    nn_set_free(&s);
    model_free(&m);
    be->ops->destroy(be);
}

/* With zero gradients, weight decay alone moves the conv weights and
 * leaves bn scales, biases and running statistics exactly as they were. */
Test(nn_resnet, no_weight_decay_on_bn_parameters_and_biases)
{
    backend *be = cpu_backend(1);
    model m;
    errbuf e = {{0}};
    cr_assert_eq(model_create(&m, "resnet8", 1, 8, 8, 3, 2, be, &e), 0, "%s", e.msg);
    model_init_params(&m, 2);
    float *p0 = download_floats(be, m.params, m.nparams);
    model_sgd_step(&m, 0.1f, 0.9f, 0.5f);
    float *p1 = download_floats(be, m.params, m.nparams);
    for (int i = 0; i < m.ntensors; i++) {
        const model_tensor *t = &m.tensors[i];
        int same = memcmp(p0 + t->offset, p1 + t->offset, t->n * 4) == 0;
        if (t->role == TENSOR_WEIGHT)
            cr_assert(!same, "%s was not decayed", t->name);
        else
            cr_assert(same, "%s changed", t->name);
        if (strstr(t->name, "running_var") ||
            (strncmp(t->name, "bn", 2) == 0 && strstr(t->name, "weight")))
            cr_assert_eq(p0[t->offset], 1.0f, "%s starts at %g", t->name, (double)p0[t->offset]);
    }
    free(p0), free(p1);
    model_free(&m);
    be->ops->destroy(be);
}

Test(nn_resnet, resnet8_learns_the_synthetic_task)
{
    backend *be = cpu_backend(2);
    model m;
    errbuf e = {{0}};
    nn_set tr;
    synth_set(&tr, 256, 1, 16, 16, 4, 6);
    cr_assert_eq(model_create(&m, "resnet8", 1, 16, 16, 4, 32, be, &e), 0, "%s", e.msg);
    model_init_params(&m, 3);
    double acc, first = run_epoch(&m, &tr, tr.n, 32, 0.05f, 0.9f, 5e-4f, &acc), last = first;
    for (int ep = 0; ep < 3; ep++)
        last = run_epoch(&m, &tr, tr.n, 32, 0.05f, 0.9f, 5e-4f, &acc);
    double eval = run_epoch(&m, &tr, tr.n, 32, 0, 0, 0, &acc);
    cr_log_info("resnet8 synthetic: loss %.3f -> %.3f, eval loss %.3f accuracy %.3f", first, last,
                eval, acc);
    cr_assert(last < 0.5 * first, "loss %.3f -> %.3f", first, last);
    cr_assert(acc >= 0.9, "eval accuracy %.3f with running statistics", acc);
    nn_set_free(&tr);
    model_free(&m);
    be->ops->destroy(be);
}
