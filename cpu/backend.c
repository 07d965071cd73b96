/* backend.c — the CPU backend: the ops table, memory, and every
 * operation that is not a GEMM (normalisation, relu, max pooling, global
 * average pooling, softmax cross-entropy, SGD). Convolution lives in
 * conv.c, fully connected layers in fc.c, batch norm, add and copy
 * in bn.c, the thread pool in threads.c.
 *
 * Threads and determinism. OpenBLAS is told to use one thread and is called
 * from the backend's own threads (threads.c); each operation is split into tasks at
 * boundaries that depend only on the shapes, every output element is
 * written by exactly one task, and the one reduction across tasks (a
 * convolution's weight gradient) adds per-chunk partial sums in chunk
 * order. So the numbers do not depend on the thread count, and training
 * with the same seed is bit-identical whatever --threads or --workers is.
 * (OpenBLAS's own threading splits a GEMM by thread count; we do not rely
 * on it being order-preserving.) The backend owns the process-wide OpenBLAS
 * thread setting.
 *
 * Device memory is host memory (host_visible): upload/download are memcpy,
 * and the loader's ring slots can be passed straight to normalize_u8.
 *
 * Deliberately left out: fusing relu or pooling into the convolution (the
 * interface keeps them separate ops; measured in docs/BENCH-NN.md).
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "cpu/cpu.h"
#include "cpu/internal.h"
#include "cpu/vec.h"
#include "nn/kernels.h"

/* element-wise ops are cut into blocks of this many elements */
#define ELEM_BLOCK 32768

void *cpu_alloc(backend *be, size_t bytes)
{
    (void)be;
    size_t n = (bytes + 63) / 64 * 64;
    if (n == 0)
        n = 64;
    void *p = NULL;
    if (posix_memalign(&p, 64, n) != 0) {
        fprintf(stderr, "train: out of memory allocating %zu bytes for the CPU backend\n", bytes);
        exit(1);
    }
    memset(p, 0, n);
    return p;
}

void cpu_free(backend *be, void *p)
{
    (void)be;
    free(p);
}

static void cpu_copy(backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    if (bytes)
        memcpy(dst, src, bytes);
}

static void cpu_synchronize(backend *be) { (void)be; }

static void cpu_batch_groups(backend *be, const int *size, int n)
{
    cpu_ctx *c = cpu_ctx_of(be);
    if (n < 0 || n > BACKEND_GROUPS_MAX || (n & (n - 1))) {
        fprintf(stderr, "train: batch_groups: %d groups (internal error)\n", n);
        exit(1);
    }
    c->ngroups = n;
    for (int i = 0; i < n; i++)
        c->group[i] = size[i];
}

int cpu_groups(backend *be, int B, int *size, const char *op)
{
    cpu_ctx *c = cpu_ctx_of(be);
    if (c->ngroups == 0) {
        size[0] = B;
        return 1;
    }
    int sum = 0;
    for (int i = 0; i < c->ngroups; i++)
        sum += size[i] = c->group[i];
    if (sum != B) {
        fprintf(stderr, "train: %s: groups of %d samples in a batch of %d (internal error)\n", op,
                sum, B);
        exit(1);
    }
    return c->ngroups;
}

float *cpu_scratch(backend *be, float **buf, size_t *n, size_t need)
{
    if (need > *n) {
        cpu_free(be, *buf);
        *buf = cpu_alloc(be, need * sizeof(float));
        *n = need;
    }
    return *buf;
}

/* ---------------------------------------------------------------- normalise */
typedef struct norm_job {
    float *out;
    const uint8_t *in;
    int C, HW;
    const float *mean;
    float inv_std[64];
} norm_job;

/* (the loops below take restrict parameters in fixed-count blocks so that
 * gcc -O2 vectorises them; see CPU_VEC) */
static void norm_row(float *restrict o, const uint8_t *restrict x, int n, float mean, float inv)
{
    int i = 0;
    for (; i + CPU_VEC <= n; i += CPU_VEC)
        for (int k = 0; k < CPU_VEC; k++)
            o[i + k] = k_normalize(x[i + k], mean, inv);
    for (; i < n; i++)
        o[i] = k_normalize(x[i], mean, inv);
}

static void norm_task(void *arg, int b, int thread)
{
    (void)thread;
    norm_job *j = arg;
    for (int c = 0; c < j->C; c++) {
        size_t off = ((size_t)b * j->C + c) * j->HW;
        norm_row(j->out + off, j->in + off, j->HW, j->mean[c], j->inv_std[c]);
    }
}

static void cpu_normalize_u8(backend *be, float *out, const uint8_t *in, int B, int C, int HW,
                             const float *mean, const float *std)
{
    norm_job j = {out, in, C, HW, mean, {0}};
    if (C > 64) {
        fprintf(stderr, "train: normalize_u8: %d channels (at most 64)\n", C);
        exit(1);
    }
    for (int c = 0; c < C; c++)
        j.inv_std[c] = 1.0f / std[c];
    cpu_run(be, B, norm_task, &j);
}

/* ---------------------------------------------------------------- relu */
/* (the loops are vec.h's: AVX-512 or AVX2 where the CPU runs them) */
typedef struct relu_job {
    float *out;
    const float *in, *aux;
    size_t n;
    const cpu_vec_ops *v;
} relu_job;

static void relu_fwd_task(void *arg, int t, int thread)
{
    (void)thread;
    relu_job *j = arg;
    size_t a = (size_t)t * ELEM_BLOCK, n = a + ELEM_BLOCK < j->n ? ELEM_BLOCK : j->n - a;
    j->v->relu_fwd(j->out + a, j->in + a, n);
}

static void relu_bwd_task(void *arg, int t, int thread)
{
    (void)thread;
    relu_job *j = arg;
    size_t a = (size_t)t * ELEM_BLOCK, n = a + ELEM_BLOCK < j->n ? ELEM_BLOCK : j->n - a;
    j->v->relu_bwd(j->out + a, j->in + a, j->aux + a, n);
}

static void cpu_relu_forward(backend *be, float *out, const float *in, size_t n)
{
    relu_job j = {out, in, NULL, n, cpu_vec()};
    cpu_run(be, cpu_ntasks(n, ELEM_BLOCK), relu_fwd_task, &j);
}

static void cpu_relu_backward(backend *be, float *din, const float *dout, const float *out,
                              size_t n)
{
    relu_job j = {din, dout, out, n, cpu_vec()};
    cpu_run(be, cpu_ntasks(n, ELEM_BLOCK), relu_bwd_task, &j);
}

/* ---------------------------------------------------------------- max pool */
typedef struct maxpool_task {
    float *out;
    const float *in, *dout, *fout;
    const maxpool_shape *s;
} maxpool_task;

static void maxpool_fwd_task(void *arg, int b, int thread)
{
    (void)thread;
    maxpool_task *j = arg;
    const maxpool_shape *s = j->s;
    for (int c = 0; c < s->C; c++) {
        const float *x = j->in + ((size_t)b * s->C + c) * s->H * s->W;
        float *y = j->out + ((size_t)b * s->C + c) * s->OH * s->OW;
        for (int oh = 0; oh < s->OH; oh++) {
            const float *r0 = x + (size_t)(2 * oh) * s->W, *r1 = r0 + s->W;
            for (int ow = 0; ow < s->OW; ow++) {
                float m = r0[2 * ow];
                if (r0[2 * ow + 1] > m)
                    m = r0[2 * ow + 1];
                if (r1[2 * ow] > m)
                    m = r1[2 * ow];
                if (r1[2 * ow + 1] > m)
                    m = r1[2 * ow + 1];
                y[oh * s->OW + ow] = m;
            }
        }
    }
}

/* g when bit is 1, +0 when 0 (bitwise, so a NaN g does not leak into the 0s) */
static inline float masked(float g, uint32_t bit)
{
    uint32_t u;
    memcpy(&u, &g, 4);
    u &= (uint32_t)0 - bit;
    memcpy(&g, &u, 4);
    return g;
}

/* din is written whole: the window's first maximum (row-major) gets the
 * gradient, the other three 0, and so do a last row or column the floor
 * dropped. Row by row, no memset-then-scatter. */
static void maxpool_bwd_task(void *arg, int b, int thread)
{
    (void)thread;
    maxpool_task *j = arg;
    const maxpool_shape *s = j->s;
    size_t plane = (size_t)s->H * s->W;
    for (int c = 0; c < s->C; c++) {
        const float *x = j->in + ((size_t)b * s->C + c) * plane;
        float *dx = j->out + ((size_t)b * s->C + c) * plane;
        size_t o = ((size_t)b * s->C + c) * s->OH * s->OW;
        const float *y = j->fout + o, *dy = j->dout + o;
        for (int oh = 0; oh < s->OH; oh++) {
            const float *x0 = x + (size_t)(2 * oh) * s->W, *x1 = x0 + s->W;
            float *d0 = dx + (size_t)(2 * oh) * s->W, *d1 = d0 + s->W;
            for (int ow = 0; ow < s->OW; ow++) {
                float m = y[oh * s->OW + ow], g = dy[oh * s->OW + ow];
                int i = 2 * ow;
                /* which one is the first maximum, as bit masks: which
                 * element wins is data, unpredictable for a branch */
                uint32_t e0 = x0[i] == m, e1 = x0[i + 1] == m, e2 = x1[i] == m;
                uint32_t h1 = e1 & ~e0, h2 = e2 & ~(e0 | e1), h3 = 1u & ~(e0 | e1 | e2);
                d0[i] = masked(g, e0);
                d0[i + 1] = masked(g, h1);
                d1[i] = masked(g, h2);
                d1[i + 1] = masked(g, h3);
            }
            if (s->W & 1)
                d0[s->W - 1] = d1[s->W - 1] = 0.0f;
        }
        if (s->H & 1)
            memset(dx + (size_t)(s->H - 1) * s->W, 0, (size_t)s->W * sizeof(float));
    }
}

/* Any k, stride and pad (resnet18's 3x3/2 pad 1): the window clipped to
 * the image, so padding never wins. Backward zeroes the sample's din and
 * adds each gradient at its window's first maximum (windows overlap). */
static void window(const maxpool_shape *s, int o, int size, int *lo, int *hi)
{
    int a = o * s->stride - s->pad, b = a + s->k;
    *lo = a < 0 ? 0 : a;
    *hi = b > size ? size : b;
}

static void maxpool_any_task(void *arg, int b, int thread)
{
    (void)thread;
    maxpool_task *j = arg;
    const maxpool_shape *s = j->s;
    size_t plane = (size_t)s->H * s->W, oplane = (size_t)s->OH * s->OW;
    for (int c = 0; c < s->C; c++) {
        const float *x = j->in + ((size_t)b * s->C + c) * plane;
        size_t o = ((size_t)b * s->C + c) * oplane;
        float *dx = j->dout ? j->out + ((size_t)b * s->C + c) * plane : NULL;
        if (dx)
            memset(dx, 0, plane * sizeof(float));
        for (int oh = 0; oh < s->OH; oh++) {
            int h0, h1;
            window(s, oh, s->H, &h0, &h1);
            for (int ow = 0; ow < s->OW; ow++) {
                int w0, w1;
                window(s, ow, s->W, &w0, &w1);
                size_t at = (size_t)h0 * s->W + w0;
                for (int h = h0; h < h1; h++)
                    for (int w = w0; w < w1; w++)
                        if (x[(size_t)h * s->W + w] > x[at])
                            at = (size_t)h * s->W + w;
                if (dx)
                    dx[at] += j->dout[o + (size_t)oh * s->OW + ow];
                else
                    j->out[o + (size_t)oh * s->OW + ow] = x[at];
            }
        }
    }
}

static int maxpool_is_2x2(const maxpool_shape *s)
{
    return s->k == 2 && s->stride == 2 && s->pad == 0;
}

static void cpu_maxpool_forward(backend *be, float *out, const float *in, const maxpool_shape *s)
{
    maxpool_task j = {out, in, NULL, NULL, s};
    cpu_run(be, s->B, maxpool_is_2x2(s) ? maxpool_fwd_task : maxpool_any_task, &j);
}

static void cpu_maxpool_backward(backend *be, float *din, const float *dout, const float *out,
                                 const float *in, const maxpool_shape *s)
{
    maxpool_task j = {din, in, dout, out, s};
    cpu_run(be, s->B, maxpool_is_2x2(s) ? maxpool_bwd_task : maxpool_any_task, &j);
}

/* ---------------------------------------------------------------- global average pool */
static void cpu_gap_forward(backend *be, float *out, const float *in, int B, int C, int HW)
{
    (void)be;
    float inv = 1.0f / (float)HW;
    for (size_t bc = 0; bc < (size_t)B * C; bc++) {
        const float *x = in + bc * HW;
        float sum = 0.0f;
        for (int i = 0; i < HW; i++)
            sum += x[i];
        out[bc] = sum * inv;
    }
}

static void cpu_gap_backward(backend *be, float *din, const float *dout, int B, int C, int HW)
{
    (void)be;
    float inv = 1.0f / (float)HW;
    for (size_t bc = 0; bc < (size_t)B * C; bc++) {
        float g = dout[bc] * inv;
        float *dx = din + bc * HW;
        for (int i = 0; i < HW; i++)
            dx[i] = g;
    }
}

/* ---------------------------------------------------------------- softmax cross-entropy */
static void cpu_softmax_xent(backend *be, float *dlogits, float *loss, int32_t *pred,
                             const float *logits, const int32_t *labels, int B, int K, float scale)
{
    (void)be;
    for (int b = 0; b < B; b++)
        loss[b] = k_softmax_xent_row(dlogits + (size_t)b * K, pred + b, logits + (size_t)b * K,
                                     labels[b], K, scale);
}

/* ---------------------------------------------------------------- SGD */
typedef struct sgd_job {
    float *w, *v;
    const float *g;
    size_t n;
    float lr, momentum, wd;
} sgd_job;

static void sgd_span(float *restrict w, float *restrict v, const float *restrict g, size_t n,
                     float lr, float mom, float wd)
{
    size_t i = 0;
    for (; i + CPU_VEC <= n; i += CPU_VEC)
        for (int k = 0; k < CPU_VEC; k++)
            k_sgd(&w[i + k], &v[i + k], g[i + k], lr, mom, wd);
    for (; i < n; i++)
        k_sgd(&w[i], &v[i], g[i], lr, mom, wd);
}

static void sgd_task(void *arg, int t, int thread)
{
    (void)thread;
    sgd_job *j = arg;
    size_t a = (size_t)t * ELEM_BLOCK, n = a + ELEM_BLOCK < j->n ? ELEM_BLOCK : j->n - a;
    sgd_span(j->w + a, j->v + a, j->g + a, n, j->lr, j->momentum, j->wd);
}

static void cpu_sgd_update(backend *be, float *w, float *v, const float *g, size_t n, float lr,
                           float momentum, float wd)
{
    sgd_job j = {w, v, g, n, lr, momentum, wd};
    /* never cancelled: the parameters are updated whole or not at all */
    cpu_threads_run(cpu_ctx_of(be)->workers, cpu_ntasks(n, ELEM_BLOCK), sgd_task, &j, NULL);
}

/* ---------------------------------------------------------------- table */
static void cpu_destroy(backend *be)
{
    if (!be)
        return;
    cpu_ctx *c = cpu_ctx_of(be);
    cpu_threads_free(c->workers);
    cpu_free(be, c->conv_scratch);
    cpu_free(be, c->fc_scratch);
    free(c);
    free(be);
}

static const backend_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .synchronize = cpu_synchronize,
    .normalize_u8 = cpu_normalize_u8,
    .conv_plan = cpu_conv_plan,
    .conv_plan_free = cpu_conv_plan_free,
    .conv_forward = cpu_conv_forward,
    .conv_backward = cpu_conv_backward,
    .conv_describe = cpu_conv_describe,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .maxpool_forward = cpu_maxpool_forward,
    .maxpool_backward = cpu_maxpool_backward,
    .fc_forward = cpu_fc_forward,
    .fc_backward = cpu_fc_backward,
    .gap_forward = cpu_gap_forward,
    .gap_backward = cpu_gap_backward,
    .bn_forward_train = cpu_bn_forward_train,
    .bn_forward_infer = cpu_bn_forward_infer,
    .bn_backward = cpu_bn_backward,
    .bn_relu_forward_train = cpu_bn_relu_forward_train,
    .bn_relu_forward_infer = cpu_bn_relu_forward_infer,
    .bn_relu_backward = cpu_bn_relu_backward,
    .add = cpu_add,
    .copy = cpu_copy_floats,
    .softmax_xent = cpu_softmax_xent,
    .sgd_update = cpu_sgd_update,
    .batch_groups = cpu_batch_groups,
};

/* OpenBLAS's own shutdown of its pool (driver/others/blas_server.c). A
 * stopped pool is started again by the next openblas_set_num_threads
 * (0.3.21 re-creates it there, for forked children) or by a call that
 * wants more than one thread, so the pair runs once per process, and
 * nothing here calls openblas_set_num_threads afterwards. */
extern int blas_thread_shutdown_(void) __attribute__((weak));

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_single_once(void)
{
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_)
        blas_thread_shutdown_();
}

void cpu_blas_single(void) { pthread_once(&blas_once, blas_single_once); }

backend *backend_cpu_create(int threads, errbuf *e)
{
    if (threads < 0 || threads > CPU_MAX_THREADS)
        return errf(e, "--threads %d: expected 0 (automatic) to %d", threads, CPU_MAX_THREADS),
               NULL;
    if (threads == 0)
        threads = cores_online();
    /* our threads do the threading; OpenBLAS runs in whichever of them
     * calls it (see the top of this file) */
    cpu_blas_single();
    cpu_ctx *c = xcalloc(1, sizeof *c);
    c->threads = threads;
    c->workers = cpu_threads_create(threads);
    c->conv_caps = conv_caps_cpu();
    backend *be = xcalloc(1, sizeof *be);
    be->ops = &cpu_ops;
    be->ctx = c;
    be->host_visible = 1;
    return be;
}
