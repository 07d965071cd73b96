/* cudnn_ops.c — the fake cuDNN, part 3: the compute calls. Each checks
 * its descriptors (read back through the real getters), alpha/beta and
 * every operand's extent in device memory at the call, captures the shapes
 * (a descriptor changed afterwards does not affect queued work, as on a
 * device), and enqueues a naive computation in double on the handle's
 * stream: convolution in all three directions with strides, padding,
 * dilation and both modes, bias gradient, broadcasting add, max pooling
 * (first maximum in row-major order; backward checks y is x's pooling)
 * and relu (backward checks y is relu(x)).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fakecuda/runtime/fakednn.h"

/* ---------------------------------------------------------------- convolution */

typedef struct conv_job {
    int dir;
    tens x, y;
    filt w;
    convp p;
    float alpha, beta;
    const float *in;  /* FWD, FILTER: x; DATA: dy */
    const float *aux; /* FWD, DATA: w; FILTER: dy */
    float *out;       /* FWD: y; DATA: dx; FILTER: dw */
    void *ws;
    size_t ws_bytes;
    int corrupt;
} conv_job;

/* input coordinate of output (oy, ox) through tap (r, s); filter index */
static inline int tap(const conv_job *j, int oy, int ox, int r, int s, int *iy, int *ix, size_t *wi,
                      int k, int c)
{
    *iy = oy * j->p.u - j->p.ph + r * j->p.dh;
    *ix = ox * j->p.v - j->p.pw + s * j->p.dw;
    int fr = j->p.flip ? j->w.r - 1 - r : r, fs = j->p.flip ? j->w.s - 1 - s : s;
    *wi = (((size_t)k * j->w.c + c) * j->w.r + fr) * j->w.s + fs;
    return *iy >= 0 && *iy < j->x.h && *ix >= 0 && *ix < j->x.w;
}

/* the channel loops of one tap: sum of a[c] b[c]; acc[c] += v src[c].
 * conv_call checked every operand's extent in device memory, so these run
 * without the sanitizers' per-load checks (they are most of the GPU tests'
 * run time). */
__attribute__((no_sanitize("address", "undefined"))) static double
dot(const float *a, size_t as, const float *b, size_t bs, int n)
{
    double sum = 0.0;
    for (int c = 0; c < n; c++)
        sum += (double)a[c * as] * b[c * bs];
    return sum;
}

__attribute__((no_sanitize("address", "undefined"))) static void
axpy(double *acc, size_t accs, const float *src, size_t ss, double v, int n)
{
    for (int c = 0; c < n; c++)
        acc[c * accs] += v * src[c * ss];
}

static void conv_run(void *a)
{
    conv_job *j = a;
    const tens *x = &j->x, *y = &j->y;
    const filt *w = &j->w;
    if (j->ws_bytes)
        memset(j->ws, 0xab, j->ws_bytes); /* nothing may rely on workspace contents */
    /* every (output element, filter tap) pair, the tap's bounds checked once
     * for all input channels, which run innermost */
    size_t rs = (size_t)w->r * w->s, hw = (size_t)x->h * x->w, nx = (size_t)x->n * x->c * hw,
           nw = (size_t)w->k * w->c * rs;
    double *acc = j->dir == FWD ? NULL : calloc(j->dir == DATA ? nx : nw, sizeof *acc);
    const float *dys = j->dir == DATA ? j->in : j->aux;
    for (int n = 0; n < y->n; n++)
        for (int k = 0; k < y->c; k++)
            for (int oy = 0; oy < y->h; oy++)
                for (int ox = 0; ox < y->w; ox++) {
                    double sum = 0.0, dy = j->dir == FWD ? 0.0 : dys[at4(y, n, k, oy, ox)];
                    for (int r = 0; r < w->r; r++)
                        for (int s = 0; s < w->s; s++) {
                            int iy, ix;
                            size_t wi;
                            if (!tap(j, oy, ox, r, s, &iy, &ix, &wi, k, 0))
                                continue;
                            size_t xi = at4(x, n, 0, iy, ix);
                            if (j->dir == FWD)
                                sum += dot(j->in + xi, (size_t)x->cs, j->aux + wi, rs, w->c);
                            else if (j->dir == DATA)
                                axpy(acc + ((size_t)n * x->c * x->h + iy) * x->w + ix, hw,
                                     j->aux + wi, rs, dy, w->c);
                            else
                                axpy(acc + wi, rs, j->in + xi, (size_t)x->cs, dy, w->c);
                        }
                    if (j->dir == FWD)
                        blend(&j->out[at4(y, n, k, oy, ox)], sum, j->alpha, j->beta);
                }
    if (j->dir == DATA) {
        for (int n = 0; n < x->n; n++)
            for (int c = 0; c < x->c; c++)
                for (int iy = 0; iy < x->h; iy++)
                    for (int ix = 0; ix < x->w; ix++)
                        blend(&j->out[at4(x, n, c, iy, ix)],
                              acc[(((size_t)n * x->c + c) * x->h + iy) * x->w + ix], j->alpha,
                              j->beta);
    } else if (j->dir != FWD) {
        for (size_t i = 0; i < nw; i++)
            blend(&j->out[i], acc[i], j->alpha, j->beta);
    }
    free(acc);
    if (j->corrupt)
        j->out[0] += 1.0f;
}

static cudnnStatus_t conv_call(const char *api, int dir, cudnnHandle_t h, const void *alpha,
                               cudnnTensorDescriptor_t xd, cudnnFilterDescriptor_t wd,
                               cudnnConvolutionDescriptor_t cd, cudnnTensorDescriptor_t yd,
                               int algo, void *ws, size_t ws_bytes, const void *beta,
                               const void *in, const void *aux, void *out)
{
    ENTER(api);
    NEED_HANDLE(api, h);
    conv_job j = {.dir = dir, .in = in, .aux = aux, .out = out, .ws = ws, .ws_bytes = ws_bytes};
    if (!fkd_read_conv(api, cd, xd, wd, yd, &j.x, &j.w, &j.y, &j.p) ||
        !fkd_scalars(api, alpha, beta, &j.alpha, &j.beta))
        return CUDNN_STATUS_BAD_PARAM;
    int supported;
    size_t need = fkd_need(dir, algo, &j.x, &j.w, &j.y, &supported);
    if (!supported) {
        BAD(api, "algorithm %d is not supported for this convolution", algo);
        return CUDNN_STATUS_NOT_SUPPORTED;
    }
    if (ws_bytes < need) {
        BAD(api, "algorithm %d needs %zu bytes of workspace, %zu given", algo, need, ws_bytes);
        return CUDNN_STATUS_BAD_PARAM;
    }
    if (ws_bytes && !fkd_dev(api, "workspace", ws, ws_bytes))
        return CUDNN_STATUS_BAD_PARAM;
    /* which tensor is which in this direction */
    size_t xb = j.x.bytes, yb = j.y.bytes, wb = fkd_filt_bytes(&j.w);
    int ok = dir == FWD ? fkd_dev(api, "x", in, xb) && fkd_dev(api, "w", aux, wb) &&
                              fkd_dev(api, "y", out, yb)
             : dir == DATA ? fkd_dev(api, "dy", in, yb) && fkd_dev(api, "w", aux, wb) &&
                                 fkd_dev(api, "dx", out, xb)
                           : fkd_dev(api, "x", in, xb) && fkd_dev(api, "dy", aux, yb) &&
                                 fkd_dev(api, "dw", out, wb);
    if (!ok)
        return CUDNN_STATUS_BAD_PARAM;
    fkd_set_last_algo(dir, algo, j.p.math);
    j.corrupt = fk_take_corruption(api);
    conv_job *q = malloc(sizeof *q);
    *q = j;
    fk_cost_next(0.0, (double)(xb + yb + wb)); /* the clock: a memory-bound conv */
    if (fk_enqueue(h->stream, api, conv_run, free, q, NULL, 0) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha,
                                      const cudnnTensorDescriptor_t xd, const void *x,
                                      const cudnnFilterDescriptor_t wd, const void *w,
                                      const cudnnConvolutionDescriptor_t cd,
                                      cudnnConvolutionFwdAlgo_t algo, void *ws, size_t ws_bytes,
                                      const void *beta, const cudnnTensorDescriptor_t yd, void *y)
{
    return conv_call("cudnnConvolutionForward", FWD, h, alpha, xd, wd, cd, yd, algo, ws, ws_bytes,
                     beta, x, w, y);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *alpha,
                                           const cudnnFilterDescriptor_t wd, const void *w,
                                           const cudnnTensorDescriptor_t dyd, const void *dy,
                                           const cudnnConvolutionDescriptor_t cd,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *ws,
                                           size_t ws_bytes, const void *beta,
                                           const cudnnTensorDescriptor_t dxd, void *dx)
{
    return conv_call("cudnnConvolutionBackwardData", DATA, h, alpha, dxd, wd, cd, dyd, algo, ws,
                     ws_bytes, beta, dy, w, dx);
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void *alpha,
                                             const cudnnTensorDescriptor_t xd, const void *x,
                                             const cudnnTensorDescriptor_t dyd, const void *dy,
                                             const cudnnConvolutionDescriptor_t cd,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *ws,
                                             size_t ws_bytes, const void *beta,
                                             const cudnnFilterDescriptor_t dwd, void *dw)
{
    return conv_call("cudnnConvolutionBackwardFilter", FILTER, h, alpha, xd, dwd, cd, dyd, algo, ws,
                     ws_bytes, beta, x, dy, dw);
}

/* ---------------------------------------------------------------- bias, add */

typedef struct add_job {
    tens a, c;
    float alpha, beta;
    const float *A;
    float *C;
    int reduce; /* 1: C (1xKx1x1) = sum of A over n, h, w (bias gradient) */
    int corrupt;
} add_job;

static void add_run(void *p)
{
    add_job *j = p;
    const tens *a = &j->a, *c = &j->c;
    if (j->reduce) {
        for (int k = 0; k < a->c; k++) {
            double acc = 0.0;
            for (int n = 0; n < a->n; n++)
                for (int y = 0; y < a->h; y++)
                    for (int x = 0; x < a->w; x++)
                        acc += j->A[at4(a, n, k, y, x)];
            blend(&j->C[at4(c, 0, k, 0, 0)], acc, j->alpha, j->beta);
        }
    } else {
        for (int n = 0; n < c->n; n++)
            for (int k = 0; k < c->c; k++)
                for (int y = 0; y < c->h; y++)
                    for (int x = 0; x < c->w; x++) {
                        double v = j->A[at4(a, a->n == 1 ? 0 : n, a->c == 1 ? 0 : k,
                                            a->h == 1 ? 0 : y, a->w == 1 ? 0 : x)];
                        blend(&j->C[at4(c, n, k, y, x)], v, j->alpha, j->beta);
                    }
    }
    if (j->corrupt)
        j->C[0] += 1.0f;
}

static cudnnStatus_t add_call(const char *api, cudnnHandle_t h, const void *alpha,
                              cudnnTensorDescriptor_t ad, const void *A, const void *beta,
                              cudnnTensorDescriptor_t cd, void *C, int reduce)
{
    ENTER(api);
    NEED_HANDLE(api, h);
    add_job j = {.A = A, .C = C, .reduce = reduce};
    if (!fkd_read_tensor(api, reduce ? "dy" : "A", ad, &j.a) ||
        !fkd_read_tensor(api, reduce ? "db" : "C", cd, &j.c) ||
        !fkd_scalars(api, alpha, beta, &j.alpha, &j.beta))
        return CUDNN_STATUS_BAD_PARAM;
    const tens *a = &j.a, *c = &j.c;
    if (reduce) {
        if (c->n != 1 || c->h != 1 || c->w != 1 || c->c != a->c) {
            BAD(api, "db must be 1x%dx1x1, is %dx%dx%dx%d", a->c, c->n, c->c, c->h, c->w);
            return CUDNN_STATUS_BAD_PARAM;
        }
    } else if ((a->n != c->n && a->n != 1) || (a->c != c->c && a->c != 1) ||
               (a->h != c->h && a->h != 1) || (a->w != c->w && a->w != 1)) {
        BAD(api, "A %dx%dx%dx%d does not broadcast to C %dx%dx%dx%d", a->n, a->c, a->h, a->w, c->n,
            c->c, c->h, c->w);
        return CUDNN_STATUS_BAD_PARAM;
    }
    if (!fkd_dev(api, reduce ? "dy" : "A", A, a->bytes) ||
        !fkd_dev(api, reduce ? "db" : "C", C, c->bytes))
        return CUDNN_STATUS_BAD_PARAM;
    j.corrupt = fk_take_corruption(api);
    add_job *q = malloc(sizeof *q);
    *q = j;
    if (fk_enqueue(h->stream, api, add_run, free, q, NULL, 0) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnAddTensor(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t ad,
                             const void *A, const void *beta, const cudnnTensorDescriptor_t cd,
                             void *C)
{
    return add_call("cudnnAddTensor", h, alpha, ad, A, beta, cd, C, 0);
}

cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t h, const void *alpha,
                                           const cudnnTensorDescriptor_t dyd, const void *dy,
                                           const void *beta, const cudnnTensorDescriptor_t dbd,
                                           void *db)
{
    return add_call("cudnnConvolutionBackwardBias", h, alpha, dyd, dy, beta, dbd, db, 1);
}

/* ---------------------------------------------------------------- pooling */

typedef struct maxpool_task {
    tens x, y;
    int wh, ww, ph, pw, sh, sw;
    float alpha, beta;
    const float *X, *Y, *dY;
    float *out; /* forward: y; backward: dx */
    int backward, corrupt;
} maxpool_task;

/* first maximum of window (n, c, oy, ox) in row-major order; -1 if empty */
static long maxpool_argmax(const maxpool_task *j, int n, int c, int oy, int ox, int *iy, int *ix)
{
    long best = -1;
    for (int r = 0; r < j->wh; r++)
        for (int s = 0; s < j->ww; s++) {
            int y = oy * j->sh - j->ph + r, x = ox * j->sw - j->pw + s;
            if (y < 0 || y >= j->x.h || x < 0 || x >= j->x.w)
                continue;
            long k = (long)at4(&j->x, n, c, y, x);
            /* ties go to the LAST maximum, unlike the CPU backend's first:
             * cuDNN documents no order, so nothing may depend on one */
            if (best < 0 || j->X[k] >= j->X[best]) {
                best = k;
                *iy = y;
                *ix = x;
            }
        }
    return best;
}

static void maxpool_run(void *p)
{
    maxpool_task *j = p;
    if (!j->backward) {
        for (int n = 0; n < j->y.n; n++)
            for (int c = 0; c < j->y.c; c++)
                for (int oy = 0; oy < j->y.h; oy++)
                    for (int ox = 0; ox < j->y.w; ox++) {
                        int iy, ix;
                        long k = maxpool_argmax(j, n, c, oy, ox, &iy, &ix);
                        blend(&j->out[at4(&j->y, n, c, oy, ox)], k < 0 ? 0.0 : j->X[k], j->alpha,
                              j->beta);
                    }
    } else {
        size_t nx = (size_t)j->x.n * j->x.c * j->x.h * j->x.w;
        double *acc = calloc(nx, sizeof *acc);
        for (int n = 0; n < j->y.n; n++)
            for (int c = 0; c < j->y.c; c++)
                for (int oy = 0; oy < j->y.h; oy++)
                    for (int ox = 0; ox < j->y.w; ox++) {
                        int iy = 0, ix = 0;
                        long k = maxpool_argmax(j, n, c, oy, ox, &iy, &ix);
                        size_t yi = at4(&j->y, n, c, oy, ox);
                        if (k < 0)
                            continue;
                        if (j->Y[yi] != j->X[k])
                            fk_violation("cudnnPoolingBackward",
                                         "y[%zu] = %g is not the maximum %g of its window of x: "
                                         "pass the forward output of this x",
                                         yi, (double)j->Y[yi], (double)j->X[k]);
                        acc[(((size_t)n * j->x.c + c) * j->x.h + iy) * j->x.w + ix] += j->dY[yi];
                    }
        for (int n = 0; n < j->x.n; n++)
            for (int c = 0; c < j->x.c; c++)
                for (int y = 0; y < j->x.h; y++)
                    for (int x = 0; x < j->x.w; x++)
                        blend(&j->out[at4(&j->x, n, c, y, x)],
                              acc[(((size_t)n * j->x.c + c) * j->x.h + y) * j->x.w + x], j->alpha,
                              j->beta);
        free(acc);
    }
    if (j->corrupt)
        j->out[0] += 1.0f;
}

static int read_pool(const char *api, cudnnPoolingDescriptor_t pd, cudnnTensorDescriptor_t xd,
                     cudnnTensorDescriptor_t yd, maxpool_task *j)
{
    cudnnPoolingMode_t mode;
    cudnnNanPropagation_t nan;
    if (cudnnGetPooling2dDescriptor(pd, &mode, &nan, &j->wh, &j->ww, &j->ph, &j->pw, &j->sh,
                                    &j->sw) != CUDNN_STATUS_SUCCESS) {
        BAD(api, "not a readable 2-d pooling descriptor");
        return 0;
    }
    if (mode != CUDNN_POOLING_MAX && mode != CUDNN_POOLING_MAX_DETERMINISTIC) {
        BAD(api, "pooling mode %d (the fake does max pooling only)", (int)mode);
        return 0;
    }
    if (!fkd_read_tensor(api, "x", xd, &j->x) || !fkd_read_tensor(api, "y", yd, &j->y))
        return 0;
    int n, c, h, w;
    if (cudnnGetPooling2dForwardOutputDim(pd, xd, &n, &c, &h, &w) != CUDNN_STATUS_SUCCESS ||
        n != j->y.n || c != j->y.c || h != j->y.h || w != j->y.w) {
        BAD(api, "y is %dx%dx%dx%d, pooling x gives %dx%dx%dx%d", j->y.n, j->y.c, j->y.h, j->y.w, n,
            c, h, w);
        return 0;
    }
    return 1;
}

cudnnStatus_t cudnnPoolingForward(cudnnHandle_t h, const cudnnPoolingDescriptor_t pd,
                                  const void *alpha, const cudnnTensorDescriptor_t xd,
                                  const void *x, const void *beta, const cudnnTensorDescriptor_t yd,
                                  void *y)
{
    const char *api = "cudnnPoolingForward";
    ENTER(api);
    NEED_HANDLE(api, h);
    maxpool_task j = {.X = x, .out = y};
    if (!read_pool(api, pd, xd, yd, &j) || !fkd_scalars(api, alpha, beta, &j.alpha, &j.beta) ||
        !fkd_dev(api, "x", x, j.x.bytes) || !fkd_dev(api, "y", y, j.y.bytes))
        return CUDNN_STATUS_BAD_PARAM;
    j.corrupt = fk_take_corruption(api);
    maxpool_task *q = malloc(sizeof *q);
    *q = j;
    if (fk_enqueue(h->stream, api, maxpool_run, free, q, NULL, 0) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnPoolingBackward(cudnnHandle_t h, const cudnnPoolingDescriptor_t pd,
                                   const void *alpha, const cudnnTensorDescriptor_t yd,
                                   const void *y, const cudnnTensorDescriptor_t dyd, const void *dy,
                                   const cudnnTensorDescriptor_t xd, const void *x,
                                   const void *beta, const cudnnTensorDescriptor_t dxd, void *dx)
{
    const char *api = "cudnnPoolingBackward";
    ENTER(api);
    NEED_HANDLE(api, h);
    maxpool_task j = {.X = x, .Y = y, .dY = dy, .out = dx, .backward = 1};
    tens dyt, dxt;
    if (!read_pool(api, pd, xd, yd, &j) || !fkd_read_tensor(api, "dy", dyd, &dyt) ||
        !fkd_read_tensor(api, "dx", dxd, &dxt) || !fkd_scalars(api, alpha, beta, &j.alpha, &j.beta))
        return CUDNN_STATUS_BAD_PARAM;
    if (memcmp(&dyt, &j.y, sizeof dyt) || memcmp(&dxt, &j.x, sizeof dxt)) {
        BAD(api, "dy/dx descriptors differ from y/x");
        return CUDNN_STATUS_BAD_PARAM;
    }
    if (!fkd_dev(api, "y", y, j.y.bytes) || !fkd_dev(api, "dy", dy, j.y.bytes) ||
        !fkd_dev(api, "x", x, j.x.bytes) || !fkd_dev(api, "dx", dx, j.x.bytes))
        return CUDNN_STATUS_BAD_PARAM;
    j.corrupt = fk_take_corruption(api);
    maxpool_task *q = malloc(sizeof *q);
    *q = j;
    if (fk_enqueue(h->stream, api, maxpool_run, free, q, NULL, 0) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

/* ---------------------------------------------------------------- activation */

typedef struct act_job {
    tens t;
    float alpha, beta;
    const float *X, *Y, *dY;
    float *out;
    int backward, corrupt;
} act_job;

static void act_run(void *p)
{
    act_job *j = p;
    const tens *t = &j->t;
    for (int n = 0; n < t->n; n++)
        for (int c = 0; c < t->c; c++)
            for (int y = 0; y < t->h; y++)
                for (int x = 0; x < t->w; x++) {
                    size_t i = at4(t, n, c, y, x);
                    if (!j->backward) {
                        blend(&j->out[i], j->X[i] > 0.0f ? j->X[i] : 0.0, j->alpha, j->beta);
                        continue;
                    }
                    float want = j->X[i] > 0.0f ? j->X[i] : 0.0f;
                    if (j->Y[i] != want)
                        fk_violation("cudnnActivationBackward",
                                     "y[%zu] = %g is not relu(x[%zu]) = %g: y and x do not belong "
                                     "together",
                                     i, (double)j->Y[i], i, (double)want);
                    blend(&j->out[i], j->X[i] > 0.0f ? j->dY[i] : 0.0, j->alpha, j->beta);
                }
    if (j->corrupt)
        j->out[0] += 1.0f;
}

static int read_act(const char *api, cudnnActivationDescriptor_t ad)
{
    cudnnActivationMode_t mode;
    cudnnNanPropagation_t nan;
    double coef;
    if (cudnnGetActivationDescriptor(ad, &mode, &nan, &coef) != CUDNN_STATUS_SUCCESS) {
        BAD(api, "not a readable activation descriptor");
        return 0;
    }
    if (mode != CUDNN_ACTIVATION_RELU) {
        BAD(api, "activation mode %d (the fake does relu only)", (int)mode);
        return 0;
    }
    return 1;
}

static int same_shape(const char *api, const tens *a, const tens *b, const char *what)
{
    if (memcmp(a, b, sizeof *a)) {
        BAD(api, "%s: descriptors differ", what);
        return 0;
    }
    return 1;
}

cudnnStatus_t cudnnActivationForward(cudnnHandle_t h, cudnnActivationDescriptor_t ad,
                                     const void *alpha, const cudnnTensorDescriptor_t xd,
                                     const void *x, const void *beta,
                                     const cudnnTensorDescriptor_t yd, void *y)
{
    const char *api = "cudnnActivationForward";
    ENTER(api);
    NEED_HANDLE(api, h);
    act_job j = {.X = x, .out = y};
    tens yt;
    if (!read_act(api, ad) || !fkd_read_tensor(api, "x", xd, &j.t) ||
        !fkd_read_tensor(api, "y", yd, &yt) || !same_shape(api, &j.t, &yt, "x, y") ||
        !fkd_scalars(api, alpha, beta, &j.alpha, &j.beta) || !fkd_dev(api, "x", x, j.t.bytes) ||
        !fkd_dev(api, "y", y, j.t.bytes))
        return CUDNN_STATUS_BAD_PARAM;
    j.corrupt = fk_take_corruption(api);
    act_job *q = malloc(sizeof *q);
    *q = j;
    if (fk_enqueue(h->stream, api, act_run, free, q, NULL, 0) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnActivationBackward(cudnnHandle_t h, cudnnActivationDescriptor_t ad,
                                      const void *alpha, const cudnnTensorDescriptor_t yd,
                                      const void *y, const cudnnTensorDescriptor_t dyd,
                                      const void *dy, const cudnnTensorDescriptor_t xd,
                                      const void *x, const void *beta,
                                      const cudnnTensorDescriptor_t dxd, void *dx)
{
    const char *api = "cudnnActivationBackward";
    ENTER(api);
    NEED_HANDLE(api, h);
    act_job j = {.X = x, .Y = y, .dY = dy, .out = dx, .backward = 1};
    tens yt, dyt, dxt;
    if (!read_act(api, ad) || !fkd_read_tensor(api, "x", xd, &j.t) ||
        !fkd_read_tensor(api, "y", yd, &yt) || !fkd_read_tensor(api, "dy", dyd, &dyt) ||
        !fkd_read_tensor(api, "dx", dxd, &dxt) || !same_shape(api, &j.t, &yt, "x, y") ||
        !same_shape(api, &j.t, &dyt, "x, dy") || !same_shape(api, &j.t, &dxt, "x, dx") ||
        !fkd_scalars(api, alpha, beta, &j.alpha, &j.beta) || !fkd_dev(api, "x", x, j.t.bytes) ||
        !fkd_dev(api, "y", y, j.t.bytes) || !fkd_dev(api, "dy", dy, j.t.bytes) ||
        !fkd_dev(api, "dx", dx, j.t.bytes))
        return CUDNN_STATUS_BAD_PARAM;
    j.corrupt = fk_take_corruption(api);
    act_job *q = malloc(sizeof *q);
    *q = j;
    if (fk_enqueue(h->stream, api, act_run, free, q, NULL, 0) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

/* ---------------------------------------------------------------- batch norm
 * Spatial mode only, written from cudnn_ops.h's formulas (not from the
 * backend): the statistics of channel c over its N = n h w values in
 * double, y = scale (x - mean) / sqrt(var + eps) + bias; training updates
 * running = factor stat + (1 - factor) running with the unbiased variance
 * and saves the mean and 1 / sqrt(var + eps). Backward recomputes xhat from
 * the saved mean and inverse std. The parameter descriptor must be what
 * cudnnDeriveBNTensorDescriptor gives for spatial mode: 1 x C x 1 x 1. */

enum { BN_TRAIN, BN_INFER, BN_BWD };

typedef struct bn_job {
    int kind;
    tens x, p;
    float alpha, beta, alpha2, beta2; /* backward: data then parameter blends */
    double factor, eps;
    const float *X, *dY, *scale, *bias, *emean, *evar, *smean, *sinv;
    float *out, *rmean, *rvar, *osmean, *osinv, *dscale, *dbias;
    int corrupt;
} bn_job;

static void bn_run(void *p)
{
    bn_job *j = p;
    const tens *t = &j->x;
    double N = (double)t->n * t->h * t->w;
    for (int c = 0; c < t->c; c++) {
        size_t pc = (size_t)c * j->p.cs;
        double mean, inv;
        if (j->kind == BN_INFER) {
            mean = j->emean[pc];
            inv = 1.0 / sqrt((double)j->evar[pc] + j->eps);
        } else if (j->kind == BN_BWD) {
            mean = j->smean[pc];
            inv = j->sinv[pc];
        } else {
            double s = 0.0, v = 0.0;
            for (int n = 0; n < t->n; n++)
                for (int y = 0; y < t->h; y++)
                    for (int x = 0; x < t->w; x++)
                        s += j->X[at4(t, n, c, y, x)];
            mean = s / N;
            for (int n = 0; n < t->n; n++)
                for (int y = 0; y < t->h; y++)
                    for (int x = 0; x < t->w; x++) {
                        double d = j->X[at4(t, n, c, y, x)] - mean;
                        v += d * d;
                    }
            v /= N;
            inv = 1.0 / sqrt(v + j->eps);
            double unb = N > 1.0 ? v * N / (N - 1.0) : v;
            j->rmean[pc] = (float)(j->factor * mean + (1.0 - j->factor) * j->rmean[pc]);
            j->rvar[pc] = (float)(j->factor * unb + (1.0 - j->factor) * j->rvar[pc]);
            if (j->osmean)
                j->osmean[pc] = (float)mean;
            if (j->osinv)
                j->osinv[pc] = (float)inv;
        }
        if (j->kind != BN_BWD) {
            for (int n = 0; n < t->n; n++)
                for (int y = 0; y < t->h; y++)
                    for (int x = 0; x < t->w; x++) {
                        size_t i = at4(t, n, c, y, x);
                        blend(&j->out[i], j->scale[pc] * (j->X[i] - mean) * inv + j->bias[pc],
                              j->alpha, j->beta);
                    }
            continue;
        }
        double sdy = 0.0, sdyx = 0.0;
        for (int n = 0; n < t->n; n++)
            for (int y = 0; y < t->h; y++)
                for (int x = 0; x < t->w; x++) {
                    size_t i = at4(t, n, c, y, x);
                    sdy += j->dY[i];
                    sdyx += j->dY[i] * (j->X[i] - mean) * inv;
                }
        blend(&j->dscale[pc], sdyx, j->alpha2, j->beta2);
        blend(&j->dbias[pc], sdy, j->alpha2, j->beta2);
        for (int n = 0; n < t->n; n++)
            for (int y = 0; y < t->h; y++)
                for (int x = 0; x < t->w; x++) {
                    size_t i = at4(t, n, c, y, x);
                    double xh = (j->X[i] - mean) * inv;
                    blend(&j->out[i], j->scale[pc] * inv * (j->dY[i] - sdy / N - xh * sdyx / N),
                          j->alpha, j->beta);
                }
    }
    if (j->corrupt)
        j->out[0] += 1.0f;
}

/* mode, x/y (and dy/dx) alike, the parameter descriptor 1 x C x 1 x 1, eps */
static int read_bn(const char *api, cudnnBatchNormMode_t mode, cudnnTensorDescriptor_t xd,
                   cudnnTensorDescriptor_t yd, cudnnTensorDescriptor_t pd, double eps, bn_job *j)
{
    tens y;
    if (mode != CUDNN_BATCHNORM_SPATIAL) {
        BAD(api, "batch norm mode %d (the fake does CUDNN_BATCHNORM_SPATIAL only)", (int)mode);
        return 0;
    }
    if (!fkd_read_tensor(api, "x", xd, &j->x) || !fkd_read_tensor(api, "y", yd, &y) ||
        !same_shape(api, &j->x, &y, "x and y") ||
        !fkd_read_tensor(api, "bnScaleBiasMeanVar", pd, &j->p))
        return 0;
    if (j->p.n != 1 || j->p.c != j->x.c || j->p.h != 1 || j->p.w != 1) {
        BAD(api, "bnScaleBiasMeanVarDesc is %dx%dx%dx%d; spatial mode wants 1x%dx1x1", j->p.n,
            j->p.c, j->p.h, j->p.w, j->x.c);
        return 0;
    }
    if (!(eps >= CUDNN_BN_MIN_EPSILON) || !isfinite(eps)) {
        BAD(api, "epsilon %g below CUDNN_BN_MIN_EPSILON", eps);
        return 0;
    }
    j->eps = eps;
    return 1;
}

static cudnnStatus_t bn_enqueue(const char *api, cudnnHandle_t h, bn_job *j)
{
    j->corrupt = fk_take_corruption(api);
    bn_job *q = malloc(sizeof *q);
    *q = *j;
    if (fk_enqueue(h->stream, api, bn_run, free, q, NULL, 0) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBatchNormalizationForwardTraining(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
    const cudnnTensorDescriptor_t xd, const void *x, const cudnnTensorDescriptor_t yd, void *y,
    const cudnnTensorDescriptor_t pd, const void *scale, const void *bias, double factor,
    void *rmean, void *rvar, double eps, void *smean, void *sinv)
{
    const char *api = "cudnnBatchNormalizationForwardTraining";
    ENTER(api);
    NEED_HANDLE(api, h);
    bn_job j = {.kind = BN_TRAIN,
                .X = x,
                .out = y,
                .scale = scale,
                .bias = bias,
                .rmean = rmean,
                .rvar = rvar,
                .osmean = smean,
                .osinv = sinv,
                .factor = factor};
    if (!read_bn(api, mode, xd, yd, pd, eps, &j) ||
        !fkd_scalars(api, alpha, beta, &j.alpha, &j.beta))
        return CUDNN_STATUS_BAD_PARAM;
    if (!(factor >= 0.0 && factor <= 1.0)) {
        BAD(api, "exponentialAverageFactor %g outside [0, 1]", factor);
        return CUDNN_STATUS_BAD_PARAM;
    }
    if ((smean == NULL) != (sinv == NULL)) {
        BAD(api, "resultSaveMean and resultSaveInvVariance must both be given or both NULL");
        return CUDNN_STATUS_BAD_PARAM;
    }
    size_t pb = j.p.bytes;
    if (!fkd_dev(api, "x", x, j.x.bytes) || !fkd_dev(api, "y", y, j.x.bytes) ||
        !fkd_dev(api, "bnScale", scale, pb) || !fkd_dev(api, "bnBias", bias, pb) ||
        !fkd_dev(api, "resultRunningMean", rmean, pb) ||
        !fkd_dev(api, "resultRunningVariance", rvar, pb) ||
        (smean && (!fkd_dev(api, "resultSaveMean", smean, pb) ||
                   !fkd_dev(api, "resultSaveInvVariance", sinv, pb))))
        return CUDNN_STATUS_BAD_PARAM;
    return bn_enqueue(api, h, &j);
}

cudnnStatus_t cudnnBatchNormalizationForwardInference(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
    const cudnnTensorDescriptor_t xd, const void *x, const cudnnTensorDescriptor_t yd, void *y,
    const cudnnTensorDescriptor_t pd, const void *scale, const void *bias, const void *emean,
    const void *evar, double eps)
{
    const char *api = "cudnnBatchNormalizationForwardInference";
    ENTER(api);
    NEED_HANDLE(api, h);
    bn_job j = {.kind = BN_INFER,
                .X = x,
                .out = y,
                .scale = scale,
                .bias = bias,
                .emean = emean,
                .evar = evar};
    if (!read_bn(api, mode, xd, yd, pd, eps, &j) ||
        !fkd_scalars(api, alpha, beta, &j.alpha, &j.beta))
        return CUDNN_STATUS_BAD_PARAM;
    size_t pb = j.p.bytes;
    if (!fkd_dev(api, "x", x, j.x.bytes) || !fkd_dev(api, "y", y, j.x.bytes) ||
        !fkd_dev(api, "bnScale", scale, pb) || !fkd_dev(api, "bnBias", bias, pb) ||
        !fkd_dev(api, "estimatedMean", emean, pb) || !fkd_dev(api, "estimatedVariance", evar, pb))
        return CUDNN_STATUS_BAD_PARAM;
    return bn_enqueue(api, h, &j);
}

cudnnStatus_t cudnnBatchNormalizationBackward(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alphaData, const void *betaData,
    const void *alphaParam, const void *betaParam, const cudnnTensorDescriptor_t xd, const void *x,
    const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnTensorDescriptor_t dxd, void *dx,
    const cudnnTensorDescriptor_t pd, const void *scale, void *dscale, void *dbias, double eps,
    const void *smean, const void *sinv)
{
    const char *api = "cudnnBatchNormalizationBackward";
    ENTER(api);
    NEED_HANDLE(api, h);
    bn_job j = {.kind = BN_BWD,
                .X = x,
                .dY = dy,
                .out = dx,
                .scale = scale,
                .dscale = dscale,
                .dbias = dbias,
                .smean = smean,
                .sinv = sinv};
    tens dxt;
    if (!read_bn(api, mode, xd, dyd, pd, eps, &j) || !fkd_read_tensor(api, "dx", dxd, &dxt) ||
        !same_shape(api, &j.x, &dxt, "x and dx") ||
        !fkd_scalars(api, alphaData, betaData, &j.alpha, &j.beta) ||
        !fkd_scalars(api, alphaParam, betaParam, &j.alpha2, &j.beta2))
        return CUDNN_STATUS_BAD_PARAM;
    if (!smean || !sinv) {
        BAD(api, "the fake needs savedMean and savedInvVariance from the forward pass");
        return CUDNN_STATUS_NOT_SUPPORTED;
    }
    size_t pb = j.p.bytes;
    if (!fkd_dev(api, "x", x, j.x.bytes) || !fkd_dev(api, "dy", dy, j.x.bytes) ||
        !fkd_dev(api, "dx", dx, j.x.bytes) || !fkd_dev(api, "bnScale", scale, pb) ||
        !fkd_dev(api, "dBnScaleResult", dscale, pb) || !fkd_dev(api, "dBnBiasResult", dbias, pb) ||
        !fkd_dev(api, "savedMean", smean, pb) || !fkd_dev(api, "savedInvVariance", sinv, pb))
        return CUDNN_STATUS_BAD_PARAM;
    return bn_enqueue(api, h, &j);
}
