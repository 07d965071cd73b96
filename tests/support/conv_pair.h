/* conv_pair.h — what the CPU convolution kernels' tests share
 * (test_conv_direct.c, test_conv_wino.c, test_wino_dw.c): whether this
 * CPU has AVX-512F, and one seeded shape run through the backend's
 * default plan and the GEMM path (direct kernels off), plus the GEMM path
 * on absolute values, whose results bound the rounding; and the same
 * shape at 1 and 3 threads, bit for bit. */
#ifndef TRAIN_TESTS_CONV_PAIR_H
#define TRAIN_TESTS_CONV_PAIR_H

#include "cpu/conv_direct.h"
#include "tests/support/nn_fixtures.h"

static inline int have_avx512f(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
#else
    return 0;
    /* shape s's forward and backward on a 1-thread and a 3-thread backend
 * (default plans): out, din and dw (with want_dw) in the same bits */
    static inline void conv_same_bits(const conv_shape *s, int want_dw)
    {
        size_t nin = (size_t)s->B * s->C * s->H * s->W, nout = (size_t)s->B * s->K * s->OH * s->OW;
        size_t nw = (size_t)s->K * s->C * s->R * s->S, n[3] = {nout, nin, nw};
        float *in = rand_floats(nin, -1, 1, 7), *w = rand_floats(nw, -1, 1, 8),
              *bias = rand_floats((size_t)s->K, -1, 1, 9), *dout = rand_floats(nout, -1, 1, 10);
        float *res[2][3];
        for (int t = 0; t < 2; t++) {
            backend *be = cpu_backend(t ? 3 : 1);
            void *plan = be->ops->conv_plan(be, s);
            float *dev[3] = {be->ops->alloc(be, nout * 4), be->ops->alloc(be, nin * 4),
                             be->ops->alloc(be, nw * 4)};
            float *db = be->ops->alloc(be, (size_t)s->K * 4);
            be->ops->conv_forward(be, plan, dev[0], in, w, bias, s);
            be->ops->conv_backward(be, plan, dev[1], dev[2], db, dout, in, w, s);
            for (int i = 0; i < 3; i++) {
                res[t][i] = xmalloc(n[i] * 4);
                memcpy(res[t][i], dev[i], n[i] * 4);
                be->ops->free(be, dev[i]);
            }
            be->ops->free(be, db);
            be->ops->conv_plan_free(be, plan);
            be->ops->destroy(be);
        }
        cr_assert_eq(memcmp(res[0][0], res[1][0], nout * 4), 0, "out");
        cr_assert_eq(memcmp(res[0][1], res[1][1], nin * 4), 0, "din");
        if (want_dw)
            cr_assert_eq(memcmp(res[0][2], res[1][2], nw * 4), 0, "dw");
        for (int t = 0; t < 2; t++)
            for (int i = 0; i < 3; i++)
                free(res[t][i]);
        free(in), free(w), free(bias), free(dout);
    }

#endif
}

static inline float *absdup(const float *x, size_t n)
{
    float *a = xmalloc(n * sizeof *a + 1);
    for (size_t i = 0; i < n; i++)
        a[i] = fabsf(x[i]);
    return a;
}

/* [0]: the default plan, [1]: the GEMM path, [2]: the GEMM path on |x|,
 * |w|, |bias|, |dout|: forward and every gradient */
typedef struct conv_pair {
    float *out[3], *din[3], *dw[3], *db[3];
    size_t nin, nout, nw;
} conv_pair;

static inline conv_pair conv_pair_run(backend *be, const conv_shape *s, int with_bias, uint64_t key)
{
    conv_pair r;
    int K = s->K;
    r.nin = (size_t)s->B * s->C * s->H * s->W;
    r.nout = (size_t)s->B * K * s->OH * s->OW;
    r.nw = (size_t)K * s->C * s->R * s->S;
    float *in = rand_floats(r.nin, -1, 1, key), *w = rand_floats(r.nw, -1, 1, key + 1),
          *bias = rand_floats((size_t)K, -1, 1, key + 2),
          *dout = rand_floats(r.nout, -1, 1, key + 3);
    float *ain = absdup(in, r.nin), *aw = absdup(w, r.nw), *abias = absdup(bias, (size_t)K),
          *adout = absdup(dout, r.nout);
    for (int i = 0; i < 3; i++) {
        r.out[i] = be->ops->alloc(be, r.nout * 4);
        r.din[i] = be->ops->alloc(be, r.nin * 4);
        r.dw[i] = be->ops->alloc(be, r.nw * 4);
        r.db[i] = be->ops->alloc(be, (size_t)K * 4);
    }
    conv_direct_enable(0);
    void *gemm = be->ops->conv_plan(be, s);
    conv_direct_enable(1);
    void *plan = be->ops->conv_plan(be, s);
    const float *b = with_bias ? bias : NULL, *ab = with_bias ? abias : NULL;
    be->ops->conv_forward(be, plan, r.out[0], in, w, b, s);
    be->ops->conv_forward(be, gemm, r.out[1], in, w, b, s);
    be->ops->conv_forward(be, gemm, r.out[2], ain, aw, ab, s);
    be->ops->conv_backward(be, plan, r.din[0], r.dw[0], r.db[0], dout, in, w, s);
    be->ops->conv_backward(be, gemm, r.din[1], r.dw[1], r.db[1], dout, in, w, s);
    be->ops->conv_backward(be, gemm, r.din[2], r.dw[2], r.db[2], adout, ain, aw, s);
    be->ops->conv_plan_free(be, gemm);
    be->ops->conv_plan_free(be, plan);
    free(in), free(w), free(bias), free(dout), free(ain), free(aw), free(abias), free(adout);
    return r;
}

static inline void conv_pair_free(backend *be, conv_pair *r)
{
    for (int i = 0; i < 3; i++) {
        be->ops->free(be, r->out[i]);
        be->ops->free(be, r->din[i]);
        be->ops->free(be, r->dw[i]);
        be->ops->free(be, r->db[i]);
    }
}

/* shape s's forward and backward on a 1-thread and a 3-thread backend
 * (default plans): out, din and dw in the same bits */
static inline void conv_same_bits(const conv_shape *s)
{
    size_t nin = (size_t)s->B * s->C * s->H * s->W, nout = (size_t)s->B * s->K * s->OH * s->OW;
    size_t nw = (size_t)s->K * s->C * s->R * s->S, n[3] = {nout, nin, nw};
    float *in = rand_floats(nin, -1, 1, 7), *w = rand_floats(nw, -1, 1, 8),
          *bias = rand_floats((size_t)s->K, -1, 1, 9), *dout = rand_floats(nout, -1, 1, 10);
    float *res[2][3];
    for (int t = 0; t < 2; t++) {
        backend *be = cpu_backend(t ? 3 : 1);
        void *plan = be->ops->conv_plan(be, s);
        float *dev[3] = {be->ops->alloc(be, nout * 4), be->ops->alloc(be, nin * 4),
                         be->ops->alloc(be, nw * 4)};
        float *db = be->ops->alloc(be, (size_t)s->K * 4);
        be->ops->conv_forward(be, plan, dev[0], in, w, bias, s);
        be->ops->conv_backward(be, plan, dev[1], dev[2], db, dout, in, w, s);
        for (int i = 0; i < 3; i++) {
            res[t][i] = xmalloc(n[i] * 4);
            memcpy(res[t][i], dev[i], n[i] * 4);
            be->ops->free(be, dev[i]);
        }
        be->ops->free(be, db);
        be->ops->conv_plan_free(be, plan);
        be->ops->destroy(be);
    }
    cr_assert_eq(memcmp(res[0][0], res[1][0], nout * 4), 0, "out");
    cr_assert_eq(memcmp(res[0][1], res[1][1], nin * 4), 0, "din");
    cr_assert_eq(memcmp(res[0][2], res[1][2], nw * 4), 0, "dw");
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 3; i++)
            free(res[t][i]);
    free(in), free(w), free(bias), free(dout);
}

#endif
