/* test_gradcheck.c — central-difference gradient checks.
 *
 * Per layer: the scalar L = sum(G . out) for a fixed random G, so the
 * backward pass given dout = G must return dL/d(input, weights, bias).
 * Each check perturbs a bounded number of elements (spread over the array)
 * by +-eps, accumulates L in double, and compares. Inputs of relu stay at
 * least 5 eps from 0 and the values in each max-pool window at least 5 eps
 * apart, so no perturbation crosses a kink.
 *
 * Whole models: model_forward_backward's gradient of the mean loss against
 * central differences of model_eval_step, walking the one gradient array
 * tensor by tensor; there kinks cannot be steered clear of, so elements
 * whose central differences at two steps disagree are skipped.
 */
#define _GNU_SOURCE
#include "tests/support/nn_fixtures.h"

TestSuite(gradcheck);

#define CHECKS 24 /* elements per array */

typedef double (*loss_fn)(void *ctx);

/* The derivative of f at theta[j], or NAN when a kink lies too close.
 * Without kinks: the central difference. With kinks (whole nets, where
 * relu and max-pool kinks are everywhere): the central differences at eps
 * and at 2 eps must agree, else the element is skipped. Comparing the two
 * one-sided differences at one step is not enough: kinks on both sides
 * can balance (a bias moves a whole channel across many kinks at once)
 * and make a kinked difference look symmetric; they do not balance the
 * same way at two steps. */
static double derivative(float *theta, size_t j, float eps, loss_fn f, void *ctx, double atol,
                         double rtol, int kinks)
{
    float v = theta[j];
    theta[j] = v + eps;
    double lp = f(ctx);
    theta[j] = v - eps;
    double lm = f(ctx);
    theta[j] = v;
    double c1 = (lp - lm) / (2.0 * (double)eps);
    if (!kinks)
        return c1;
    theta[j] = v + 2 * eps;
    double lp2 = f(ctx);
    theta[j] = v - 2 * eps;
    double lm2 = f(ctx);
    theta[j] = v;
    double c2 = (lp2 - lm2) / (4.0 * (double)eps);
    return fabs(c1 - c2) <= atol + rtol * fabs(c1) ? c1 : NAN;
}

/* Compare analytic[] with numeric derivatives of f over theta[]. Without
 * kinks every element must agree. With kinks (whole nets), elements with a
 * kink nearby are skipped, at least half must be checked, and the checked
 * ones are judged together: their relative L2 error at most 5%. Single
 * elements of a float32 net a kink away from eps are off by a few percent
 * on any seed; a wiring bug (a missing branch, a wrong scale, a dropped
 * term) is off by far more over the whole tensor. */
/* Up to `checks` elements of theta (spread over it), by central
 * differences, against analytic; kinks: relu/maxpool kinks allowed (the
 * elements next to one are skipped, the rest judged by their L2 error). */
static void gradcheck_n(const char *what, float *theta, const float *analytic, size_t n, float eps,
                        loss_fn f, void *ctx, double atol, double rtol, int kinks, int checks)
{
    rng r = rng_keyed(99, RNG_TOOL, n, 0);
    int count = n < (size_t)checks ? (int)n : checks, checked = 0;
    double err2 = 0, norm2 = 0, worst = -1, worst_num = 0;
    size_t worst_j = 0;
    for (int i = 0; i < count; i++) {
        size_t j = n <= (size_t)count
                       ? (size_t)i
                       : (size_t)i * (n / count) + rng_below(&r, (uint32_t)(n / count));
        double num = derivative(theta, j, eps, f, ctx, atol, rtol, kinks);
        if (isnan(num))
            continue;
        checked++;
        double d = fabs(num - analytic[j]);
        if (!kinks)
            cr_assert(d <= atol + rtol * fabs(num), "%s[%zu]: analytic %.6g, numeric %.6g", what, j,
                      (double)analytic[j], num);
        err2 += d * d, norm2 += num * num;
        if (d > worst)
            worst = d, worst_j = j, worst_num = num;
    }
    if (!kinks)
        return;
    f(ctx); /* leave the state as it was */
    cr_assert(checked * 2 >= count, "%s: only %d of %d elements away from kinks", what, checked,
              count);
    cr_assert(
        sqrt(err2) <= 0.05 * sqrt(norm2) + atol * sqrt(checked),
        "%s: relative L2 error %.3g over %d elements; worst [%zu]: analytic %.6g, numeric %.6g",
        what, sqrt(err2 / (norm2 > 0 ? norm2 : 1)), checked, worst_j, (double)analytic[worst_j],
        worst_num);
}

static void gradcheck_k(const char *what, float *theta, const float *analytic, size_t n, float eps,
                        loss_fn f, void *ctx, double atol, double rtol, int kinks)
{
    gradcheck_n(what, theta, analytic, n, eps, f, ctx, atol, rtol, kinks, CHECKS);
}

static void gradcheck(const char *what, float *theta, const float *analytic, size_t n, float eps,
                      loss_fn f, void *ctx, double atol, double rtol)
{
    gradcheck_k(what, theta, analytic, n, eps, f, ctx, atol, rtol, 0);
}

static double dot(const float *a, const float *g, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * g[i];
    return s;
}

/* ---------------------------------------------------------------- conv */
typedef struct conv_ctx {
    backend *be;
    void *plan;
    conv_shape s;
    float *in, *w, *b, *out, *G;
    size_t nout;
} conv_ctx;

static double conv_loss(void *p)
{
    conv_ctx *c = p;
    c->be->ops->conv_forward(c->be, c->plan, c->out, c->in, c->w, c->b, &c->s);
    return dot(c->out, c->G, c->nout);
}

static void conv_check(int B, int C, int H, int W, int K, int R, int stride, int pad)
{
    conv_ctx c = {.be = cpu_backend(2)};
    cr_assert_eq(conv_shape_init(&c.s, B, C, H, W, K, R, R, stride, pad), 0);
    size_t nin = (size_t)B * C * H * W, nw = (size_t)K * C * R * R;
    c.nout = (size_t)B * K * c.s.OH * c.s.OW;
    c.in = rand_floats(nin, -1, 1, 1);
    c.w = rand_floats(nw, -1, 1, 2);
    c.b = rand_floats(K, -1, 1, 3);
    c.G = rand_floats(c.nout, -1, 1, 4);
    c.out = xmalloc(c.nout * 4);
    float *din = xmalloc(nin * 4), *dw = xmalloc(nw * 4), *db = xmalloc(K * 4);
    c.plan = c.be->ops->conv_plan(c.be, &c.s);
    c.be->ops->conv_backward(c.be, c.plan, din, dw, db, c.G, c.in, c.w, &c.s);
    gradcheck("conv din", c.in, din, nin, 1e-2f, conv_loss, &c, 1e-3, 1e-3);
    gradcheck("conv dw", c.w, dw, nw, 1e-2f, conv_loss, &c, 1e-3, 1e-3);
    gradcheck("conv dbias", c.b, db, K, 1e-2f, conv_loss, &c, 1e-3, 1e-3);
    c.be->ops->conv_plan_free(c.be, c.plan);
    free(c.in), free(c.w), free(c.b), free(c.G), free(c.out), free(din), free(dw), free(db);
    c.be->ops->destroy(c.be);
}

Test(gradcheck, conv)
{
    conv_check(3, 2, 9, 9, 4, 5, 1, 0);
    conv_check(4, 3, 8, 7, 5, 3, 1, 1);
    conv_check(2, 2, 9, 9, 3, 3, 2, 1);
    conv_check(2, 3, 9, 8, 4, 1, 2, 0); /* a resnet's 1x1/2 projection shortcut */
}

/* ---------------------------------------------------------------- fc */
typedef struct fc_ctx {
    backend *be;
    int B, M, N;
    float *in, *w, *b, *out, *G;
} fc_ctx;

static double fc_loss(void *p)
{
    fc_ctx *c = p;
    c->be->ops->fc_forward(c->be, c->out, c->in, c->w, c->b, c->B, c->M, c->N);
    return dot(c->out, c->G, (size_t)c->B * c->N);
}

Test(gradcheck, fc)
{
    fc_ctx c = {.be = cpu_backend(2), .B = 6, .M = 40, .N = 300};
    size_t nin = (size_t)c.B * c.M, nw = (size_t)c.N * c.M, nout = (size_t)c.B * c.N;
    c.in = rand_floats(nin, -1, 1, 10);
    c.w = rand_floats(nw, -1, 1, 11);
    c.b = rand_floats(c.N, -1, 1, 12);
    c.G = rand_floats(nout, -1, 1, 13);
    c.out = xmalloc(nout * 4);
    float *din = xmalloc(nin * 4), *dw = xmalloc(nw * 4), *db = xmalloc(c.N * 4);
    c.be->ops->fc_backward(c.be, din, dw, db, c.G, c.in, c.w, c.B, c.M, c.N);
    gradcheck("fc din", c.in, din, nin, 1e-2f, fc_loss, &c, 1e-3, 1e-3);
    gradcheck("fc dw", c.w, dw, nw, 1e-2f, fc_loss, &c, 1e-3, 1e-3);
    gradcheck("fc dbias", c.b, db, c.N, 1e-2f, fc_loss, &c, 1e-3, 1e-3);
    free(c.in), free(c.w), free(c.b), free(c.G), free(c.out), free(din), free(dw), free(db);
    c.be->ops->destroy(c.be);
}

/* ---------------------------------------------------------------- relu, pool, gap */
typedef struct unary_ctx {
    backend *be;
    int kind; /* 0 relu, 1 maxpool 2x2/2, 2 gap, 3 maxpool 3x3/2 pad 1 */
    maxpool_shape ps;
    int B, C, HW;
    float *in, *out, *G;
    size_t nin, nout;
} unary_ctx;

static double unary_loss(void *p)
{
    unary_ctx *c = p;
    if (c->kind == 0)
        c->be->ops->relu_forward(c->be, c->out, c->in, c->nin);
    else if (c->kind == 1 || c->kind == 3)
        c->be->ops->maxpool_forward(c->be, c->out, c->in, &c->ps);
    else
        c->be->ops->gap_forward(c->be, c->out, c->in, c->B, c->C, c->HW);
    return dot(c->out, c->G, c->nout);
}

Test(gradcheck, relu_maxpool_gap)
{
    const float eps = 1e-2f;
    unary_ctx c = {.be = cpu_backend(2), .B = 3, .C = 4};
    int H = 7, W = 10;
    c.HW = H * W;
    c.nin = (size_t)c.B * c.C * c.HW;
    c.in = xmalloc(c.nin * 4);
    float *din = xmalloc(c.nin * 4);
    /* distinct values 5 eps apart, in a shuffled order: no ties, no kinks */
    rng r = rng_keyed(5, RNG_TOOL, 0, 0);
    for (size_t i = 0; i < c.nin; i++)
        c.in[i] = ((float)i - (float)c.nin / 2 + 0.5f) * 5 * eps;
    for (size_t i = c.nin - 1; i > 0; i--) {
        size_t k = rng_below(&r, (uint32_t)i + 1);
        float t = c.in[i];
        c.in[i] = c.in[k];
        c.in[k] = t;
    }
    for (c.kind = 0; c.kind < 4; c.kind++) {
        if (c.kind == 0)
            c.nout = c.nin;
        else if (c.kind == 1 || c.kind == 3) {
            if (c.kind == 1)
                maxpool_shape_init(&c.ps, c.B, c.C, H, W);
            else
                maxpool_shape_init_k(&c.ps, c.B, c.C, H, W, 3, 2, 1);
            c.nout = (size_t)c.B * c.C * c.ps.OH * c.ps.OW;
        } else
            c.nout = (size_t)c.B * c.C;
        c.out = xmalloc(c.nout * 4);
        c.G = rand_floats(c.nout, -1, 1, 20 + c.kind);
        unary_loss(&c);
        if (c.kind == 0)
            c.be->ops->relu_backward(c.be, din, c.G, c.out, c.nin);
        else if (c.kind == 1 || c.kind == 3)
            c.be->ops->maxpool_backward(c.be, din, c.G, c.out, c.in, &c.ps);
        else
            c.be->ops->gap_backward(c.be, din, c.G, c.B, c.C, c.HW);
        const char *names[4] = {"relu din", "maxpool din", "gap din", "maxpool 3x3/2 pad 1 din"};
        gradcheck(names[c.kind], c.in, din, c.nin, eps, unary_loss, &c, 1e-4, 1e-3);
        free(c.out);
        free(c.G);
    }
    free(c.in), free(din);
    c.be->ops->destroy(c.be);
}

/* ---------------------------------------------------------------- batch norm */
typedef struct bn_ctx {
    backend *be;
    int B, C, HW;
    float *in, *scale, *shift, *out, *G, *mean, *invstd, *rm, *rv;
} bn_ctx;

static double bn_loss(void *p)
{
    bn_ctx *c = p;
    c->be->ops->bn_forward_train(c->be, c->out, c->mean, c->invstd, c->rm, c->rv, c->in, c->scale,
                                 c->shift, c->B, c->C, c->HW, 0.1f, 1e-5f);
    return dot(c->out, c->G, (size_t)c->B * c->C * c->HW);
}

/* Training mode: the batch's mean and variance depend on every input, so
 * din carries the two terms a per-element derivative would miss. */
Test(gradcheck, batchnorm_train_mode)
{
    bn_ctx c = {.be = cpu_backend(2), .B = 4, .C = 3, .HW = 10};
    size_t n = (size_t)c.B * c.C * c.HW;
    c.in = rand_floats(n, -2, 3, 50);
    c.scale = rand_floats(c.C, 0.5f, 1.5f, 51);
    c.shift = rand_floats(c.C, -1, 1, 52);
    c.G = rand_floats(n, -1, 1, 53);
    c.out = xmalloc(n * 4);
    c.mean = xmalloc(c.C * 4), c.invstd = xmalloc(c.C * 4), c.rm = xmalloc(c.C * 4),
    c.rv = xmalloc(c.C * 4);
    for (int i = 0; i < c.C; i++)
        c.rm[i] = 0.0f, c.rv[i] = 1.0f;
    float *din = xmalloc(n * 4), *ds = xmalloc(c.C * 4), *dh = xmalloc(c.C * 4);
    bn_loss(&c);
    c.be->ops->bn_backward(c.be, din, ds, dh, c.G, c.in, c.scale, c.mean, c.invstd, c.B, c.C, c.HW);
    gradcheck("bn din", c.in, din, n, 1e-2f, bn_loss, &c, 1e-3, 1e-3);
    gradcheck("bn dscale", c.scale, ds, c.C, 1e-2f, bn_loss, &c, 1e-3, 1e-3);
    gradcheck("bn dshift", c.shift, dh, c.C, 1e-2f, bn_loss, &c, 1e-3, 1e-3);
    free(c.in), free(c.scale), free(c.shift), free(c.G), free(c.out), free(c.mean), free(c.invstd);
    free(c.rm), free(c.rv), free(din), free(ds), free(dh);
    c.be->ops->destroy(c.be);
}

/* ---------------------------------------------------------------- softmax xent */
typedef struct xent_ctx {
    backend *be;
    int B, K;
    float *logits, *dl, *loss;
    int32_t *labels, *pred;
} xent_ctx;

static double xent_loss(void *p)
{
    xent_ctx *c = p;
    c->be->ops->softmax_xent(c->be, c->dl, c->loss, c->pred, c->logits, c->labels, c->B, c->K,
                             1.0f);
    double s = 0;
    for (int b = 0; b < c->B; b++)
        s += c->loss[b];
    return s;
}

Test(gradcheck, softmax_xent)
{
    xent_ctx c = {.be = cpu_backend(1), .B = 5, .K = 10};
    c.logits = rand_floats((size_t)c.B * c.K, -3, 3, 30);
    c.dl = xmalloc((size_t)c.B * c.K * 4);
    c.loss = xmalloc((size_t)c.B * 4);
    c.pred = xmalloc((size_t)c.B * 4);
    c.labels = xmalloc((size_t)c.B * 4);
    for (int b = 0; b < c.B; b++)
        c.labels[b] = (b * 3) % c.K;
    xent_loss(&c);
    float *g = xmalloc((size_t)c.B * c.K * 4);
    memcpy(g, c.dl, (size_t)c.B * c.K * 4);
    gradcheck("dlogits", c.logits, g, (size_t)c.B * c.K, 1e-3f, xent_loss, &c, 2e-4, 1e-2);
    free(c.logits), free(c.dl), free(c.loss), free(c.pred), free(c.labels), free(g);
    c.be->ops->destroy(c.be);
}

/* ---------------------------------------------------------------- whole models */
typedef struct model_ctx {
    model *m;
    const nn_set *s;
    int B;
    float *host; /* host copy of the parameters, perturbed and uploaded */
    int train;   /* batch norm: the loss of a training step (batch statistics) */
} model_ctx;

static double model_loss(void *p)
{
    model_ctx *c = p;
    backend *be = c->m->be;
    be->ops->upload(be, c->m->params, c->host, c->m->nparams * sizeof(float));
    step_stats st;
    if (c->train)
        cr_assert_eq(model_forward_backward(c->m, c->s->x, c->s->y, c->B, &st), 0);
    else
        cr_assert_eq(model_eval_step(c->m, c->s->x, c->s->y, c->B, &st), 0);
    return st.loss_sum / c->B;
}

/* checks: elements per tensor (each costs a few whole-model passes) */
static void model_check(const char *name, int C, int H, int W, int nclasses, int B, int checks)
{
    backend *be = cpu_backend(1); /* one thread: the conv tests above cover two */
    model m;
    errbuf e = {{0}};
    cr_assert_eq(model_create(&m, name, C, H, W, nclasses, B, be, &e), 0, "%s", e.msg);
    model_init_params(&m, 3);
    nn_set s;
    synth_set(&s, B, C, H, W, nclasses, 40);
    cr_assert_eq(model_forward_backward(&m, s.x, s.y, B, NULL), 0);
    float *g = download_floats(be, m.grads, m.nparams);
    int has_bn = 0;
    for (int t = 0; t < m.ntensors; t++)
        has_bn |= m.tensors[t].role == TENSOR_STAT;
    model_ctx c = {&m, &s, B, download_floats(be, m.params, m.nparams), has_bn};
    for (int t = 0; t < m.ntensors; t++) {
        const model_tensor *tt = &m.tensors[t];
        if (tt->role == TENSOR_STAT)
            continue; /* running statistics: no gradient */
        char what[64];
        snprintf(what, sizeof what, "%s %s", name, tt->name);
        gradcheck_n(what, c.host + tt->offset, g + tt->offset, tt->n, 1e-3f, model_loss, &c, 3e-4,
                    2e-2, 1, checks);
    }
    free(g), free(c.host);
    nn_set_free(&s);
    model_free(&m);
    be->ops->destroy(be);
}

Test(gradcheck, models)
{
    model_check("lenet", 1, 16, 16, 3, 4, CHECKS);
    model_check("probe", 3, 8, 8, 4, 5, CHECKS);
    model_check("convnet", 3, 16, 16, 5, 3, CHECKS);
}

/* Residual blocks end to end: resnet8 has an identity block and two with
 * a projection shortcut, so the gradient must reach each block's input by
 * both paths (a missing one is off by far more than the 5% allowed). In
 * training mode, with batch statistics. */
Test(gradcheck, resnet8_residual_blocks)
{
    /* 10 elements of each of its 40 tensors (24 took 40 s of make test's
     * budget under the sanitizers): a path left out errs on all of them */
    model_check("resnet8", 2, 8, 8, 3, 4, 10);
}
