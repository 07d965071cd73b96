/* nn_fixtures.h — what the nn tests share: seeded random arrays, a CPU
 * backend, Fashion-MNIST from Debian's IDX files, small synthetic data sets.
 * Header-only (static), included by tests/test_nn*.c, test_gradcheck.c and
 * test_checkpoint.c. */
#ifndef TRAIN_TEST_NN_UTIL_H
#define TRAIN_TEST_NN_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "common/util.h"
#include "cpu/cpu.h"
#include "nn/backend.h"
#include "nn/model.h"
#include "tools/idx.h"

static inline backend *cpu_backend(int threads)
{
    errbuf e = {{0}};
    backend *be = backend_cpu_create(threads, &e);
    cr_assert_not_null(be, "backend_cpu_create: %s", e.msg);
    return be;
}

/* n floats uniform in [lo, hi) from the stream (seed, key) */
static inline float *rand_floats(size_t n, float lo, float hi, uint64_t key)
{
    float *p = xmalloc(n * sizeof(float) + 1);
    rng r = rng_keyed(12345, RNG_TOOL, key, 0);
    for (size_t i = 0; i < n; i++)
        p[i] = lo + (hi - lo) * rng_uniform(&r);
    return p;
}

static inline uint8_t *rand_bytes(size_t n, uint64_t key)
{
    uint8_t *p = xmalloc(n + 1);
    rng r = rng_keyed(12345, RNG_TOOL, key, 1);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rng_below(&r, 256);
    return p;
}

/* |a - b| <= atol + rtol |b| for every element, else fail naming the first */
static inline void assert_close(const float *a, const double *b, size_t n, double atol, double rtol,
                                const char *what)
{
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        cr_assert(d <= atol + rtol * fabs(b[i]), "%s[%zu]: got %.8g, want %.8g", what, i,
                  (double)a[i], b[i]);
    }
}

/* A labelled u8 image set (n x C x H x W). */
typedef struct nn_set {
    int n, C, H, W;
    uint8_t *x;
    int32_t *y;
} nn_set;

static inline void nn_set_free(nn_set *s)
{
    free(s->x);
    free(s->y);
    memset(s, 0, sizeof *s);
}

/* The first `limit` images (0 = all) of Fashion-MNIST's train or t10k split. */
static inline void fashion_load(nn_set *s, const char *prefix, int limit)
{
    char ip[512], lp[512];
    snprintf(ip, sizeof ip, "%s/%s-images-idx3-ubyte.gz", fashion_mnist_dir(), prefix);
    snprintf(lp, sizeof lp, "%s/%s-labels-idx1-ubyte.gz", fashion_mnist_dir(), prefix);
    idx_set im, lab;
    cr_assert_eq(idx_read(ip, &im), 0,
                 "cannot read %s (dataset-fashion-mnist installed, or TRAIN_FASHION_DIR?)", ip);
    cr_assert_eq(idx_read(lp, &lab), 0, "cannot read %s", lp);
    cr_assert_eq(im.n, lab.n);
    s->n = limit > 0 && (uint32_t)limit < im.n ? limit : (int)im.n;
    s->C = 1;
    s->H = (int)im.rows;
    s->W = (int)im.cols;
    s->x = im.data;
    s->y = xmalloc((size_t)s->n * sizeof(int32_t));
    for (int i = 0; i < s->n; i++)
        s->y[i] = lab.data[i];
    free(lab.data);
}

/* A learnable synthetic set: class k images are noise plus a bright square
 * at a class-dependent place. */
static inline void synth_set(nn_set *s, int n, int C, int H, int W, int nclasses, uint64_t key)
{
    s->n = n;
    s->C = C;
    s->H = H;
    s->W = W;
    s->x = xmalloc((size_t)n * C * H * W);
    s->y = xmalloc((size_t)n * sizeof(int32_t));
    rng r = rng_keyed(777, RNG_TOOL, key, 2);
    for (int i = 0; i < n; i++) {
        int k = (int)rng_below(&r, (uint32_t)nclasses);
        s->y[i] = k;
        uint8_t *img = s->x + (size_t)i * C * H * W;
        for (int j = 0; j < C * H * W; j++)
            img[j] = (uint8_t)rng_below(&r, 96);
        int oy = (k * 5) % (H - 3), ox = (k * 3) % (W - 3);
        for (int c = 0; c < C; c++)
            for (int y = 0; y < 4; y++)
                for (int x = 0; x < 4; x++)
                    img[(size_t)c * H * W + (size_t)(oy + y) * W + ox + x] = 250;
    }
}

/* One pass over the first n samples of s in order, batch B; returns the
 * mean loss; *acc gets accuracy. Training when lr > 0, else evaluation. */
static inline double run_epoch(model *m, const nn_set *s, int n, int B, float lr, float mom,
                               float wd, double *acc)
{
    size_t px = (size_t)s->C * s->H * s->W;
    step_stats tot = {0};
    for (int i = 0; i < n; i += B) {
        int b = n - i < B ? n - i : B;
        step_stats st;
        int rc = lr > 0 ? model_train_step(m, s->x + (size_t)i * px, s->y + i, b, lr, mom, wd, &st)
                        : model_eval_step(m, s->x + (size_t)i * px, s->y + i, b, &st);
        cr_assert_eq(rc, 0, "non-finite loss at sample %d", i);
        step_stats_add(&tot, &st);
    }
    if (acc)
        *acc = (double)tot.correct / (double)tot.n;
    return tot.loss_sum / (double)tot.n;
}

/* Host copy of a device float array. */
static inline float *download_floats(backend *be, const float *dev, size_t n)
{
    float *h = xmalloc(n * sizeof(float) + 1);
    be->ops->download(be, h, dev, n * sizeof(float));
    return h;
}

#endif
