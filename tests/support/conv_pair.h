/* conv_pair.h — what the CPU convolution kernels' tests share
 * (test_conv_direct.c, test_conv_wino.c, test_wino_dw.c): whether this
 * CPU has AVX-512F, and one seeded shape run through the backend's
 * default plan and the GEMM path (direct kernels off), plus the GEMM path
 * on absolute values, whose results bound the rounding. */
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

#endif
