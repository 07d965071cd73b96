/* conv_pair.h — what the CPU convolution kernels' tests share
 * (test_conv_direct.c, test_conv_wino.c, test_conv_wino_dw.c): whether this
 * CPU has AVX-512F, and one seeded shape run through a plan under the
 * test's caps (the kernels it may use, conv_choice.h) and the GEMM path
 * (no caps), plus the GEMM path on absolute values, whose results bound
 * the rounding; and the same shape at 1 and 3 threads, bit for bit. */
#ifndef TRAIN_TESTS_CONV_PAIR_H
#define TRAIN_TESTS_CONV_PAIR_H

#include "cpu/conv_choice.h"
#include "cpu/conv_direct.h"
#include "cpu/internal.h" /* cpu_conv_plan_caps */
#include "tests/support/nn_fixtures.h"

/* every kernel this CPU runs, as a backend's plans have them */
#define CONV_CAPS_ALL ((conv_caps){.tap = 1, .direct = 1, .wino = 1, .wino_dw = 1})
/* no AVX-512 kernel: im2col or tap GEMMs (another CPU's plans) */
#define CONV_CAPS_GEMM ((conv_caps){.tap = 1})
/* im2col + GEMM for every pass: the reference */
#define CONV_CAPS_IM2COL ((conv_caps){0})

static inline int have_avx512f(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
#else
    return 0;
#endif
}

static inline float *absdup(const float *x, size_t n)
{
    float *a = xmalloc(n * sizeof *a + 1);
    for (size_t i = 0; i < n; i++)
        a[i] = fabsf(x[i]);
    return a;
}

/* a shape's seeded input, weights, bias and dout, and their sizes */
typedef struct conv_data {
    float *in, *w, *bias, *dout;
    size_t nin, nout, nw;
} conv_data;

static inline conv_data conv_data_rand(const conv_shape *s, uint64_t key)
{
    conv_data d;
    d.nin = (size_t)s->B * s->C * s->H * s->W;
    d.nout = (size_t)s->B * s->K * s->OH * s->OW;
    d.nw = (size_t)s->K * s->C * s->R * s->S;
    d.in = rand_floats(d.nin, -1, 1, key);
    d.w = rand_floats(d.nw, -1, 1, key + 1);
    d.bias = rand_floats((size_t)s->K, -1, 1, key + 2);
    d.dout = rand_floats(d.nout, -1, 1, key + 3);
    return d;
}

static inline void conv_data_free(conv_data *d)
{
    free(d->in), free(d->w), free(d->bias), free(d->dout);
}

/* [0]: the plan under caps, [1]: the GEMM path, [2]: the GEMM path on
 * |x|, |w|, |bias|, |dout|: forward and every gradient */
typedef struct conv_pair {
    float *out[3], *din[3], *dw[3], *db[3];
    size_t nin, nout, nw;
} conv_pair;

/* the same against a plan under ref (the GEMM path above) */
static inline conv_pair conv_pair_run_ref(backend *be, const conv_shape *s, const conv_caps *caps,
                                          const conv_caps *ref, int with_bias, uint64_t key)
{
    conv_pair r;
    int K = s->K;
    conv_data d = conv_data_rand(s, key);
    float *in = d.in, *w = d.w, *bias = d.bias, *dout = d.dout;
    r.nin = d.nin, r.nout = d.nout, r.nw = d.nw;
    float *ain = absdup(in, r.nin), *aw = absdup(w, r.nw), *abias = absdup(bias, (size_t)K),
          *adout = absdup(dout, r.nout);
    for (int i = 0; i < 3; i++) {
        r.out[i] = be->ops->alloc(be, r.nout * 4);
        r.din[i] = be->ops->alloc(be, r.nin * 4);
        r.dw[i] = be->ops->alloc(be, r.nw * 4);
        r.db[i] = be->ops->alloc(be, (size_t)K * 4);
    }
    void *gemm = cpu_conv_plan_caps(be, s, ref);
    void *plan = cpu_conv_plan_caps(be, s, caps);
    const float *b = with_bias ? bias : NULL, *ab = with_bias ? abias : NULL;
    be->ops->conv_forward(be, plan, r.out[0], in, w, b, s);
    be->ops->conv_forward(be, gemm, r.out[1], in, w, b, s);
    be->ops->conv_forward(be, gemm, r.out[2], ain, aw, ab, s);
    be->ops->conv_backward(be, plan, r.din[0], r.dw[0], r.db[0], dout, in, w, s);
    be->ops->conv_backward(be, gemm, r.din[1], r.dw[1], r.db[1], dout, in, w, s);
    be->ops->conv_backward(be, gemm, r.din[2], r.dw[2], r.db[2], adout, ain, aw, s);
    be->ops->conv_plan_free(be, gemm);
    be->ops->conv_plan_free(be, plan);
    conv_data_free(&d);
    free(ain), free(aw), free(abias), free(adout);
    return r;
}

static inline conv_pair conv_pair_run(backend *be, const conv_shape *s, const conv_caps *caps,
                                      int with_bias, uint64_t key)
{
    return conv_pair_run_ref(be, s, caps, &CONV_CAPS_GEMM, with_bias, key);
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
 * (plans under caps): out, din and dw in the same bits */
static inline void conv_same_bits(const conv_shape *s, const conv_caps *caps)
{
    conv_data d = conv_data_rand(s, 7);
    size_t nin = d.nin, nout = d.nout, nw = d.nw, n[3] = {nout, nin, nw};
    float *res[2][3];
    for (int t = 0; t < 2; t++) {
        backend *be = cpu_backend(t ? 3 : 1);
        void *plan = cpu_conv_plan_caps(be, s, caps);
        float *dev[3] = {be->ops->alloc(be, nout * 4), be->ops->alloc(be, nin * 4),
                         be->ops->alloc(be, nw * 4)};
        float *db = be->ops->alloc(be, (size_t)s->K * 4);
        be->ops->conv_forward(be, plan, dev[0], d.in, d.w, d.bias, s);
        be->ops->conv_backward(be, plan, dev[1], dev[2], db, d.dout, d.in, d.w, s);
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
    conv_data_free(&d);
}

#endif
