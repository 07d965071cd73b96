/* test_nn_fuse.c — batch norm fused with the relu after it, and with the
 * residual add between (backend.h's bn_relu_*, model.c's plan_fusions):
 * the fused CPU ops give the separate ops' bits; whole resnet steps with
 * fusion on and off give the same losses, gradients, parameters and
 * activations, with 1 and 2 threads, in training and evaluation; the model
 * really calls the fused ops where the graph allows and the separate ones
 * elsewhere; a backend without the fused ops (as the GPU's) runs the
 * separate ones; and the add's gradient reaches the shortcut with no copy,
 * fused or not. */
#define _GNU_SOURCE
#include "tests/support/nn_fixtures.h"

TestSuite(nn_fuse);

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* a and b the same bits, else fail naming the first difference */
static void same_floats(const float *a, const float *b, size_t n, const char *what)
{
    if (memcmp(a, b, n * 4) == 0)
        return;
    size_t i = 0;
    while (memcmp(&a[i], &b[i], 4) == 0)
        i++;
    cr_assert_fail("%s[%zu]: %.9g, %.9g", what, i, (double)a[i], (double)b[i]);
}

/* ---------------------------------------------------------------- the ops */
/* relu(bn(x) + res) by the fused op and by bn, add, relu in turn; then the
 * backward both ways (dy_out = the add's gradient) */
static void check_ops(int B, int C, int HW, int threads, int with_res)
{
    backend *be = cpu_backend(threads);
    const backend_ops *o = be->ops;
    size_t n = (size_t)B * C * HW;
    float *x = rand_floats(n, -1, 3, 70), *res = rand_floats(n, -2, 2, 71);
    float *g = rand_floats(n, -1, 1, 72), *sc = rand_floats(C, 0.5f, 2, 73);
    float *sh = rand_floats(C, -1, 1, 74);
    float *rm[2], *rv[2], *mean[2], *inv[2], *y[2], *yi[2], *dx[2], *ds[2], *dh[2], *dy[2];
    for (int k = 0; k < 2; k++) {
        rm[k] = rand_floats(C, -1, 1, 75), rv[k] = rand_floats(C, 0.5f, 2, 76);
        mean[k] = xcalloc(C, 4), inv[k] = xcalloc(C, 4), ds[k] = xcalloc(C, 4);
        dh[k] = xcalloc(C, 4);
        y[k] = xcalloc(n, 4), yi[k] = xcalloc(n, 4), dx[k] = xcalloc(n, 4), dy[k] = xcalloc(n, 4);
    }
    const float *r = with_res ? res : NULL;
    /* fused */
    o->bn_relu_forward_train(be, y[0], mean[0], inv[0], rm[0], rv[0], x, r, sc, sh, B, C, HW, 0.1f,
                             1e-5f);
    o->bn_relu_forward_infer(be, yi[0], x, r, sc, sh, rm[0], rv[0], B, C, HW, 1e-5f);
    o->bn_relu_backward(be, dx[0], ds[0], dh[0], with_res ? dy[0] : NULL, g, y[0], x, sc, mean[0],
                        inv[0], B, C, HW);
    /* separate */
    float *t = xcalloc(n, 4);
    o->bn_forward_train(be, t, mean[1], inv[1], rm[1], rv[1], x, sc, sh, B, C, HW, 0.1f, 1e-5f);
    if (r)
        o->add(be, t, t, r, n);
    o->relu_forward(be, y[1], t, n);
    o->bn_forward_infer(be, t, x, sc, sh, rm[1], rv[1], B, C, HW, 1e-5f);
    if (r)
        o->add(be, t, t, r, n);
    o->relu_forward(be, yi[1], t, n);
    o->relu_backward(be, dy[1], g, y[1], n);
    o->bn_backward(be, dx[1], ds[1], dh[1], dy[1], x, sc, mean[1], inv[1], B, C, HW);
    size_t pos = 0;
    for (size_t i = 0; i < n; i++)
        pos += y[1][i] > 0.0f;
    cr_assert(pos > n / 5 && pos < n - n / 5, "the relu passes %zu of %zu: no test of it", pos, n);
    same_floats(y[0], y[1], n, "y");
    same_floats(mean[0], mean[1], C, "save_mean");
    same_floats(inv[0], inv[1], C, "save_invstd");
    same_floats(rm[0], rm[1], C, "running mean");
    same_floats(rv[0], rv[1], C, "running var");
    same_floats(yi[0], yi[1], n, "y (inference)");
    same_floats(dx[0], dx[1], n, "dx");
    same_floats(ds[0], ds[1], C, "dscale");
    same_floats(dh[0], dh[1], C, "dshift");
    if (with_res)
        same_floats(dy[0], dy[1], n, "dy_out");
    free(x), free(res), free(g), free(sc), free(sh), free(t);
    for (int k = 0; k < 2; k++) {
        free(rm[k]), free(rv[k]), free(mean[k]), free(inv[k]), free(ds[k]), free(dh[k]);
        free(y[k]), free(yi[k]), free(dx[k]), free(dy[k]);
    }
    be->ops->destroy(be);
}

Test(nn_fuse, fused_ops_give_the_separate_ops_bits)
{
    static const int shapes[][3] = {{4, 3, 49}, {2, 5, 196}, {3, 2, 7}, {1, 1, 1000}};
    for (size_t s = 0; s < NELEMS(shapes); s++)
        for (int threads = 1; threads <= 2; threads++)
            for (int res = 0; res < 2; res++)
                check_ops(shapes[s][0], shapes[s][1], shapes[s][2], threads, res);
}

/* ---------------------------------------------------------------- counting backend */
/* A backend that passes every op to the CPU backend and counts the ones
 * fusion changes; `fused` 0 leaves the fused entries NULL (as the GPU
 * backend). */
enum {
    N_RELU_F,
    N_RELU_B,
    N_BN_F,
    N_BN_I,
    N_BN_B,
    N_ADD,
    N_COPY,
    N_FBN_F,
    N_FBN_I,
    N_FBN_B,
    N_OPS
};
static long calls[N_OPS];
static const backend_ops *inner_ops;
static backend *inner_be;

static void *c_alloc(backend *be, size_t n)
{
    (void)be;
    return inner_ops->alloc(inner_be, n);
}
static void c_free(backend *be, void *p)
{
    (void)be;
    inner_ops->free(inner_be, p);
}
static void c_copy(backend *be, void *d, const void *s, size_t n)
{
    (void)be;
    inner_ops->upload(inner_be, d, s, n);
}
static void c_sync(backend *be) { (void)be; }
static void c_norm(backend *be, float *o, const uint8_t *i, int B, int C, int HW, const float *m,
                   const float *sd)
{
    (void)be;
    inner_ops->normalize_u8(inner_be, o, i, B, C, HW, m, sd);
}
static void *c_plan(backend *be, const conv_shape *s)
{
    (void)be;
    return inner_ops->conv_plan(inner_be, s);
}
static void c_plan_free(backend *be, void *p)
{
    (void)be;
    inner_ops->conv_plan_free(inner_be, p);
}
static void c_conv_f(backend *be, void *p, float *o, const float *i, const float *w, const float *b,
                     const conv_shape *s)
{
    (void)be;
    inner_ops->conv_forward(inner_be, p, o, i, w, b, s);
}
static void c_conv_b(backend *be, void *p, float *di, float *dw, float *db, const float *g,
                     const float *i, const float *w, const conv_shape *s)
{
    (void)be;
    inner_ops->conv_backward(inner_be, p, di, dw, db, g, i, w, s);
}
static void c_relu_f(backend *be, float *o, const float *i, size_t n)
{
    (void)be;
    calls[N_RELU_F]++;
    inner_ops->relu_forward(inner_be, o, i, n);
}
static void c_relu_b(backend *be, float *di, const float *g, const float *o, size_t n)
{
    (void)be;
    calls[N_RELU_B]++;
    inner_ops->relu_backward(inner_be, di, g, o, n);
}
static void c_pool_f(backend *be, float *o, const float *i, const maxpool_shape *s)
{
    (void)be;
    inner_ops->maxpool_forward(inner_be, o, i, s);
}
static void c_pool_b(backend *be, float *di, const float *g, const float *o, const float *i,
                     const maxpool_shape *s)
{
    (void)be;
    inner_ops->maxpool_backward(inner_be, di, g, o, i, s);
}
static void c_fc_f(backend *be, float *o, const float *i, const float *w, const float *b, int B,
                   int M, int N)
{
    (void)be;
    inner_ops->fc_forward(inner_be, o, i, w, b, B, M, N);
}
static void c_fc_b(backend *be, float *di, float *dw, float *db, const float *g, const float *i,
                   const float *w, int B, int M, int N)
{
    (void)be;
    inner_ops->fc_backward(inner_be, di, dw, db, g, i, w, B, M, N);
}
static void c_gap_f(backend *be, float *o, const float *i, int B, int C, int HW)
{
    (void)be;
    inner_ops->gap_forward(inner_be, o, i, B, C, HW);
}
static void c_gap_b(backend *be, float *di, const float *g, int B, int C, int HW)
{
    (void)be;
    inner_ops->gap_backward(inner_be, di, g, B, C, HW);
}
static void c_xent(backend *be, float *dl, float *l, int32_t *p, const float *lg, const int32_t *y,
                   int B, int K, float sc)
{
    (void)be;
    inner_ops->softmax_xent(inner_be, dl, l, p, lg, y, B, K, sc);
}
static void c_sgd(backend *be, float *w, float *v, const float *g, size_t n, float lr, float m,
                  float wd)
{
    (void)be;
    inner_ops->sgd_update(inner_be, w, v, g, n, lr, m, wd);
}
static void c_bn_t(backend *be, float *y, float *sm, float *si, float *rm, float *rv,
                   const float *x, const float *sc, const float *sh, int B, int C, int HW,
                   float mom, float eps)
{
    (void)be;
    calls[N_BN_F]++;
    inner_ops->bn_forward_train(inner_be, y, sm, si, rm, rv, x, sc, sh, B, C, HW, mom, eps);
}
static void c_bn_i(backend *be, float *y, const float *x, const float *sc, const float *sh,
                   const float *rm, const float *rv, int B, int C, int HW, float eps)
{
    (void)be;
    calls[N_BN_I]++;
    inner_ops->bn_forward_infer(inner_be, y, x, sc, sh, rm, rv, B, C, HW, eps);
}
static void c_bn_b(backend *be, float *dx, float *ds, float *dh, const float *dy, const float *x,
                   const float *sc, const float *sm, const float *si, int B, int C, int HW)
{
    (void)be;
    calls[N_BN_B]++;
    inner_ops->bn_backward(inner_be, dx, ds, dh, dy, x, sc, sm, si, B, C, HW);
}
static void c_fbn_t(backend *be, float *y, float *sm, float *si, float *rm, float *rv,
                    const float *x, const float *res, const float *sc, const float *sh, int B,
                    int C, int HW, float mom, float eps)
{
    (void)be;
    calls[N_FBN_F]++;
    inner_ops->bn_relu_forward_train(inner_be, y, sm, si, rm, rv, x, res, sc, sh, B, C, HW, mom,
                                     eps);
}
static void c_fbn_i(backend *be, float *y, const float *x, const float *res, const float *sc,
                    const float *sh, const float *rm, const float *rv, int B, int C, int HW,
                    float eps)
{
    (void)be;
    calls[N_FBN_I]++;
    inner_ops->bn_relu_forward_infer(inner_be, y, x, res, sc, sh, rm, rv, B, C, HW, eps);
}
static void c_fbn_b(backend *be, float *dx, float *ds, float *dh, float *dyo, const float *g,
                    const float *yr, const float *x, const float *sc, const float *sm,
                    const float *si, int B, int C, int HW)
{
    (void)be;
    calls[N_FBN_B]++;
    inner_ops->bn_relu_backward(inner_be, dx, ds, dh, dyo, g, yr, x, sc, sm, si, B, C, HW);
}
static void c_add(backend *be, float *o, const float *a, const float *b, size_t n)
{
    (void)be;
    calls[N_ADD]++;
    inner_ops->add(inner_be, o, a, b, n);
}
static void c_copyf(backend *be, float *d, const float *s, size_t n)
{
    (void)be;
    calls[N_COPY]++;
    inner_ops->copy(inner_be, d, s, n);
}
static void c_destroy(backend *be)
{
    inner_ops->destroy(inner_be);
    free((void *)be->ops);
    free(be);
}

static const backend_ops counting_ops = {
    .name = "cpu (counting)",
    .destroy = c_destroy,
    .alloc = c_alloc,
    .free = c_free,
    .upload = c_copy,
    .download = c_copy,
    .synchronize = c_sync,
    .normalize_u8 = c_norm,
    .conv_plan = c_plan,
    .conv_plan_free = c_plan_free,
    .conv_forward = c_conv_f,
    .conv_backward = c_conv_b,
    .relu_forward = c_relu_f,
    .relu_backward = c_relu_b,
    .maxpool_forward = c_pool_f,
    .maxpool_backward = c_pool_b,
    .fc_forward = c_fc_f,
    .fc_backward = c_fc_b,
    .gap_forward = c_gap_f,
    .gap_backward = c_gap_b,
    .bn_forward_train = c_bn_t,
    .bn_forward_infer = c_bn_i,
    .bn_backward = c_bn_b,
    .bn_relu_forward_train = c_fbn_t,
    .bn_relu_forward_infer = c_fbn_i,
    .bn_relu_backward = c_fbn_b,
    .add = c_add,
    .copy = c_copyf,
    .softmax_xent = c_xent,
    .sgd_update = c_sgd,
};

/* the CPU backend behind the counting table; fused 0: without the fused ops */
static backend *counting_backend(int threads, int fused)
{
    inner_be = cpu_backend(threads);
    inner_ops = inner_be->ops;
    backend_ops *t = xmalloc(sizeof *t);
    *t = counting_ops;
    if (!fused)
        t->bn_relu_forward_train = NULL, t->bn_relu_forward_infer = NULL,
        t->bn_relu_backward = NULL;
    backend *be = xcalloc(1, sizeof *be);
    be->ops = t;
    be->host_visible = 1;
    memset(calls, 0, sizeof calls);
    return be;
}

/* ---------------------------------------------------------------- whole steps */
/* What a run leaves: per step the loss and the gradient slab, then the
 * parameters, the eval loss and the net's last relu output. */
typedef struct run_out {
    double loss[4], eval;
    float *grads[4], *params, *act;
    size_t np, nact;
    long ncalls[N_OPS];
} run_out;

enum { STEPS = 3, BATCH = 8 };

/* model `name` on a synthetic set: STEPS forward + backward + SGD steps
 * (gradients kept after each), an eval step, on the counting backend with
 * fusion `on` and the fused ops present or not */
static run_out run(const char *name, int C, int H, int threads, int on, int ops_present)
{
    backend *be = counting_backend(threads, ops_present);
    model m;
    errbuf e = {{0}};
    nn_set s;
    synth_set(&s, STEPS * BATCH, C, H, H, 4, 9);
    cr_assert_eq(model_create(&m, name, C, H, H, 4, BATCH, be, &e), 0, "%s", e.msg);
    model_set_fusion(&m, on);
    model_init_params(&m, 5);
    run_out r = {0};
    size_t px = (size_t)C * H * H;
    for (int k = 0; k < STEPS; k++) {
        step_stats st;
        cr_assert_eq(model_forward_backward(&m, s.x + k * BATCH * px, s.y + k * BATCH, BATCH, &st),
                     0);
        r.loss[k] = st.loss_sum;
        r.grads[k] = download_floats(be, m.grads, m.nparams);
        model_sgd_step(&m, 0.1f, 0.9f, 5e-4f);
    }
    memcpy(r.ncalls, calls, sizeof calls);
    step_stats st;
    cr_assert_eq(model_eval_step(&m, s.x, s.y, BATCH, &st), 0);
    r.eval = st.loss_sum;
    r.np = m.nparams;
    r.params = download_floats(be, m.params, m.nparams);
    int last = m.nlayers - 1;
    while (m.layers[last].kind != LAYER_RELU)
        last--;
    r.nact = (size_t)BATCH * m.layers[last].out_c * m.layers[last].out_h * m.layers[last].out_w;
    r.act = download_floats(be, m.layers[last].out, r.nact);
    nn_set_free(&s);
    model_free(&m);
    be->ops->destroy(be);
    return r;
}

static void run_free(run_out *r)
{
    for (int k = 0; k < STEPS; k++)
        free(r->grads[k]);
    free(r->params);
    free(r->act);
}

static void same_runs(const run_out *a, const run_out *b, const char *what)
{
    for (int k = 0; k < STEPS; k++) {
        cr_assert_eq(memcmp(&a->loss[k], &b->loss[k], sizeof(double)), 0,
                     "%s: step %d loss %.17g vs %.17g", what, k, a->loss[k], b->loss[k]);
        char w[96];
        snprintf(w, sizeof w, "%s: step %d gradient", what, k);
        same_floats(a->grads[k], b->grads[k], a->np, w);
    }
    same_floats(a->params, b->params, a->np, "parameters");
    same_floats(a->act, b->act, a->nact, "last relu output");
    cr_assert_eq(memcmp(&a->eval, &b->eval, sizeof(double)), 0, "%s: eval loss %.17g vs %.17g",
                 what, a->eval, b->eval);
}

Test(nn_fuse, resnet20_steps_are_the_same_bits_fused_or_not)
{
    for (int threads = 1; threads <= 2; threads++) {
        run_out f = run("resnet20", 1, 28, threads, 1, 1),
                u = run("resnet20", 1, 28, threads, 0, 1);
        cr_log_info("resnet20, %d threads: losses %.6f %.6f %.6f", threads, f.loss[0], f.loss[1],
                    f.loss[2]);
        cr_assert(f.loss[2] != f.loss[0], "the steps did not train");
        same_runs(&f, &u, threads == 1 ? "resnet20, 1 thread" : "resnet20, 2 threads");
        /* 19 relus: the stem's and each block's first with their bn
         * alone, the 9 blocks' last with bn + add; the 2 projection blocks'
         * main-branch bn is the add's second operand and runs alone */
        cr_assert_eq(f.ncalls[N_FBN_F], STEPS * 19);
        cr_assert_eq(f.ncalls[N_FBN_B], STEPS * 19);
        cr_assert_eq(f.ncalls[N_BN_F], STEPS * 2);
        cr_assert_eq(f.ncalls[N_BN_B], STEPS * 2);
        cr_assert_eq(f.ncalls[N_RELU_F] + f.ncalls[N_RELU_B], 0);
        cr_assert_eq(u.ncalls[N_FBN_F] + u.ncalls[N_FBN_B], 0, "fusion off still fused");
        cr_assert_eq(u.ncalls[N_RELU_F], STEPS * 19);
        cr_assert_eq(u.ncalls[N_BN_F], STEPS * 21);
        /* forward adds gone; backward, each block's gacc sum stays */
        cr_assert_eq(f.ncalls[N_ADD], STEPS * 9);
        cr_assert_eq(u.ncalls[N_ADD], STEPS * (9 + 9));
        /* the add's gradient goes straight into the shortcut's buffer */
        cr_assert_eq(f.ncalls[N_COPY], 0);
        cr_assert_eq(u.ncalls[N_COPY], 0);
        run_free(&f);
        run_free(&u);
    }
}

/* eval steps fused with the running statistics */
Test(nn_fuse, eval_runs_fused_with_the_running_statistics)
{
    backend *be = counting_backend(2, 1);
    model m;
    errbuf e = {{0}};
    nn_set s;
    synth_set(&s, BATCH, 1, 12, 12, 3, 4);
    cr_assert_eq(model_create(&m, "resnet8", 1, 12, 12, 3, BATCH, be, &e), 0, "%s", e.msg);
    model_init_params(&m, 7);
    step_stats a, b;
    /* running statistics away from (0, 1), so eval differs from train */
    cr_assert_eq(model_train_step(&m, s.x, s.y, BATCH, 0.1f, 0.9f, 0.0f, &a), 0);
    memset(calls, 0, sizeof calls);
    cr_assert_eq(model_eval_step(&m, s.x, s.y, BATCH, &a), 0);
    cr_assert_eq(calls[N_FBN_I], 7, "resnet8: 7 relus with their bn");
    cr_assert_eq(calls[N_FBN_F] + calls[N_RELU_F] + calls[N_BN_F], 0);
    cr_assert_eq(calls[N_BN_I], 2, "the projections' main-branch bn");
    model_set_fusion(&m, 0);
    cr_assert_eq(model_eval_step(&m, s.x, s.y, BATCH, &b), 0);
    cr_assert_eq(calls[N_FBN_I], 7, "fusion off still fused");
    cr_assert_eq(memcmp(&a.loss_sum, &b.loss_sum, sizeof(double)), 0, "eval %.17g vs %.17g",
                 a.loss_sum, b.loss_sum);
    nn_set_free(&s);
    model_free(&m);
    be->ops->destroy(be);
}

/* a backend without the fused ops (the GPU's today) runs the separate
 * ones, with fusion asked for, and gives the same bits */
Test(nn_fuse, a_backend_without_the_fused_ops_runs_the_separate_ones)
{
    run_out f = run("resnet8", 1, 16, 1, 1, 1), n = run("resnet8", 1, 16, 1, 1, 0);
    same_runs(&f, &n, "resnet8 without the fused ops");
    cr_assert_eq(n.ncalls[N_FBN_F] + n.ncalls[N_FBN_B] + n.ncalls[N_FBN_I], 0);
    cr_assert_eq(n.ncalls[N_RELU_F], STEPS * 7);
    cr_assert_eq(n.ncalls[N_COPY], 0, "the add's gradient copied");
    run_free(&f);
    run_free(&n);
}

/* resnet18's stem (bn, relu, max pool) and its projection blocks, on 3
 * channels */
Test(nn_fuse, resnet18_steps_are_the_same_bits_fused_or_not)
{
    run_out f = run("resnet18", 3, 32, 2, 1, 1), u = run("resnet18", 3, 32, 2, 0, 1);
    same_runs(&f, &u, "resnet18");
    cr_assert_eq(f.ncalls[N_FBN_F], STEPS * 17);
    run_free(&f);
    run_free(&u);
}

/* TRAIN_FUSE=0 at model_create turns fusion off */
Test(nn_fuse, train_fuse_0_in_the_environment_turns_it_off)
{
    backend *be = counting_backend(1, 1);
    model m;
    errbuf e = {{0}};
    nn_set s;
    synth_set(&s, 2, 1, 8, 8, 3, 4);
    setenv("TRAIN_FUSE", "0", 1);
    cr_assert_eq(model_create(&m, "resnet8", 1, 8, 8, 3, 2, be, &e), 0, "%s", e.msg);
    unsetenv("TRAIN_FUSE");
    model_init_params(&m, 7);
    step_stats a;
    cr_assert_eq(model_forward_backward(&m, s.x, s.y, 2, &a), 0);
    cr_assert_eq(calls[N_FBN_F] + calls[N_FBN_B], 0);
    cr_assert_eq(calls[N_RELU_F], 7);
    model_set_fusion(&m, 1);
    cr_assert_eq(model_forward_backward(&m, s.x, s.y, 2, &a), 0);
    cr_assert_eq(calls[N_FBN_F], 7);
    nn_set_free(&s);
    model_free(&m);
    be->ops->destroy(be);
}
