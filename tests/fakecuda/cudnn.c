/* cudnn.c — the fake cuDNN: handles, algorithm choice, workspaces, and
 * the compute calls the backend makes (convolution forward / backward data
 * / backward filter / backward bias, add tensor, pooling, activation).
 *
 * Descriptors are the real library's: the real libcudnn is linked, and
 * every shape, stride, padding, mode and data type is read back through its
 * getters (cudnnGetTensor4dDescriptor, cudnnGetFilter4dDescriptor,
 * cudnnGetConvolution2dDescriptor, cudnnGetPooling2dDescriptor,
 * cudnnGetConvolution2dForwardOutputDim, cudnnGetTensorSizeInBytes, ...),
 * which work without a GPU. What a call means is then computed naively
 * from those numbers, in double, honouring strides, cross-correlation vs
 * convolution and alpha/beta (beta 0 never reads the output). The shapes
 * are captured at the call: a descriptor changed afterwards does not affect
 * queued work, as on a device.
 *
 * The fake's algorithm tables are built to trip naive selection code: the
 * first candidates returned are imprecise (FFT), TF32-eligible (default
 * math) or non-deterministic, and the deterministic backward-filter choice
 * needs the largest workspace of all, so a workspace sized from the forward
 * pass alone is caught. Deliberately missing: NHWC, groups, other modes.
 */
#define _GNU_SOURCE
#include <cudnn.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct cudnnContext {
    cudaStream_t stream;
};

static cudnnHandle_t handles[16];
static char last_message[512];
static int last_algo[3] = {-1, -1, -1};

int fk_cudnn_live(void)
{
    int n = 0;
    for (int i = 0; i < 16; i++)
        n += handles[i] != NULL;
    return n;
}

void fk_cudnn_reset(void)
{
    for (int i = 0; i < 16; i++) {
        free(handles[i]);
        handles[i] = NULL;
    }
    last_message[0] = '\0';
    last_algo[0] = last_algo[1] = last_algo[2] = -1;
}

int fake_last_algo(int dir)
{
    return dir >= 0 && dir < 3 ? last_algo[dir] : -1;
}

static int handle_ok(cudnnHandle_t h)
{
    for (int i = 0; h && i < 16; i++)
        if (handles[i] == h)
            return 1;
    return 0;
}

/* A violation that also becomes cudnnGetLastErrorString's answer. */
#define BAD(api, ...)                                                           \
    do {                                                                        \
        fk_violation(api, __VA_ARGS__);                                         \
        snprintf(last_message, sizeof last_message, "%s", fake_last_violation()); \
    } while (0)

#define ENTER(api)                                  \
    do {                                            \
        fk_count(api);                              \
        if (fk_device_error() != cudaSuccess)       \
            return CUDNN_STATUS_NOT_INITIALIZED;    \
        if (fk_sticky_error() != cudaSuccess)       \
            return CUDNN_STATUS_EXECUTION_FAILED;   \
        int st_;                                    \
        if (fk_take_failure(api, &st_))             \
            return (cudnnStatus_t)st_;              \
    } while (0)

#define NEED_HANDLE(api, h)                                      \
    do {                                                         \
        if (!handle_ok(h)) {                                     \
            BAD(api, "%p is not a live handle", (void *)(h));    \
            return CUDNN_STATUS_BAD_PARAM;                       \
        }                                                        \
    } while (0)

cudnnStatus_t cudnnCreate(cudnnHandle_t *h)
{
    ENTER("cudnnCreate");
    for (int i = 0; i < 16; i++)
        if (!handles[i]) {
            handles[i] = calloc(1, sizeof *handles[i]);
            *h = handles[i];
            return CUDNN_STATUS_SUCCESS;
        }
    return CUDNN_STATUS_ALLOC_FAILED;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t h)
{
    ENTER("cudnnDestroy");
    NEED_HANDLE("cudnnDestroy", h);
    for (int i = 0; i < 16; i++)
        if (handles[i] == h)
            handles[i] = NULL;
    free(h);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s)
{
    ENTER("cudnnSetStream");
    NEED_HANDLE("cudnnSetStream", h);
    if (!fk_stream_ok(s)) {
        BAD("cudnnSetStream", "%p is not a live stream", (void *)s);
        return CUDNN_STATUS_BAD_PARAM;
    }
    h->stream = s;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t h, cudaStream_t *s)
{
    NEED_HANDLE("cudnnGetStream", h);
    *s = h->stream;
    return CUDNN_STATUS_SUCCESS;
}

/* The fake's own message when it refused the last call, else the real
 * library's (descriptor calls are real). */
void cudnnGetLastErrorString(char *message, size_t max_size)
{
    if (last_message[0]) {
        snprintf(message, max_size, "%s", last_message);
        last_message[0] = '\0';
        return;
    }
    void (*real)(char *, size_t);
    *(void **)&real = dlsym(RTLD_NEXT, "cudnnGetLastErrorString");
    if (real)
        real(message, max_size);
    else if (max_size)
        message[0] = '\0';
}

/* ---------------------------------------------------------------- descriptors, read back */

typedef struct tens {
    int n, c, h, w;
    int ns, cs, hs, ws; /* element strides */
    size_t bytes;
} tens;

static size_t at4(const tens *t, int n, int c, int h, int w)
{
    return (size_t)n * t->ns + (size_t)c * t->cs + (size_t)h * t->hs + (size_t)w * t->ws;
}

static int read_tensor(const char *api, const char *what, cudnnTensorDescriptor_t d, tens *t)
{
    cudnnDataType_t dt;
    if (cudnnGetTensor4dDescriptor(d, &dt, &t->n, &t->c, &t->h, &t->w, &t->ns, &t->cs, &t->hs,
                                   &t->ws) != CUDNN_STATUS_SUCCESS ||
        cudnnGetTensorSizeInBytes(d, &t->bytes) != CUDNN_STATUS_SUCCESS) {
        BAD(api, "%s: not a readable 4-d tensor descriptor", what);
        return 0;
    }
    if (dt != CUDNN_DATA_FLOAT) {
        BAD(api, "%s: data type %d, only float is used", what, (int)dt);
        return 0;
    }
    return 1;
}

typedef struct filt {
    int k, c, r, s;
} filt;

static int read_filter(const char *api, cudnnFilterDescriptor_t d, filt *f)
{
    cudnnDataType_t dt;
    cudnnTensorFormat_t fmt;
    if (cudnnGetFilter4dDescriptor(d, &dt, &fmt, &f->k, &f->c, &f->r, &f->s) != CUDNN_STATUS_SUCCESS) {
        BAD(api, "w: not a readable 4-d filter descriptor");
        return 0;
    }
    if (dt != CUDNN_DATA_FLOAT || fmt != CUDNN_TENSOR_NCHW) {
        BAD(api, "w: data type %d, format %d (float NCHW expected)", (int)dt, (int)fmt);
        return 0;
    }
    return 1;
}

static size_t filt_bytes(const filt *f)
{
    return (size_t)f->k * f->c * f->r * f->s * sizeof(float);
}

typedef struct convp {
    int ph, pw, u, v, dh, dw;
    int flip; /* CUDNN_CONVOLUTION: the filter is flipped */
    cudnnMathType_t math;
} convp;

/* Read the convolution and check x, w, y agree with it through the real
 * cudnnGetConvolution2dForwardOutputDim. */
static int read_conv(const char *api, cudnnConvolutionDescriptor_t cd, cudnnTensorDescriptor_t xd,
                     cudnnFilterDescriptor_t wd, cudnnTensorDescriptor_t yd, tens *x, filt *w, tens *y,
                     convp *p)
{
    if (!read_tensor(api, "x", xd, x) || !read_filter(api, wd, w) || !read_tensor(api, "y", yd, y))
        return 0;
    cudnnConvolutionMode_t mode;
    cudnnDataType_t ct;
    int groups = 1;
    if (cudnnGetConvolution2dDescriptor(cd, &p->ph, &p->pw, &p->u, &p->v, &p->dh, &p->dw, &mode, &ct) !=
            CUDNN_STATUS_SUCCESS ||
        cudnnGetConvolutionGroupCount(cd, &groups) != CUDNN_STATUS_SUCCESS ||
        cudnnGetConvolutionMathType(cd, &p->math) != CUDNN_STATUS_SUCCESS) {
        BAD(api, "not a readable 2-d convolution descriptor");
        return 0;
    }
    if (ct != CUDNN_DATA_FLOAT || groups != 1) {
        BAD(api, "compute type %d, %d groups (float, 1 group supported by the fake)", (int)ct, groups);
        return 0;
    }
    p->flip = mode == CUDNN_CONVOLUTION;
    int n, c, h, ww;
    if (cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &n, &c, &h, &ww) != CUDNN_STATUS_SUCCESS) {
        BAD(api, "x and w do not make a valid convolution");
        return 0;
    }
    if (w->c != x->c || n != y->n || c != y->c || h != y->h || ww != y->w) {
        BAD(api, "shapes disagree: x %dx%dx%dx%d, w %dx%dx%dx%d give %dx%dx%dx%d, y is %dx%dx%dx%d",
            x->n, x->c, x->h, x->w, w->k, w->c, w->r, w->s, n, c, h, ww, y->n, y->c, y->h, y->w);
        return 0;
    }
    return 1;
}

/* alpha, beta: host floats */
static int scalars(const char *api, const void *alpha, const void *beta, float *a, float *b)
{
    if (!fk_host_scalar(api, "alpha", alpha) || !fk_host_scalar(api, "beta", beta)) {
        snprintf(last_message, sizeof last_message, "%s", fake_last_violation());
        return 0;
    }
    *a = *(const float *)alpha;
    *b = *(const float *)beta;
    return 1;
}

static int dev(const char *api, const char *what, const void *p, size_t bytes)
{
    if (fk_dev_range(api, what, p, bytes))
        return 1;
    snprintf(last_message, sizeof last_message, "%s", fake_last_violation());
    return 0;
}

/* out = alpha * v + beta * out; beta 0 never reads out */
static void blend(float *out, double v, float alpha, float beta)
{
    double r = alpha * v;
    if (beta != 0.0f)
        r += (double)beta * *out;
    *out = (float)r;
}

/* ---------------------------------------------------------------- algorithm tables */

typedef struct algo_row {
    int algo;
    cudnnStatus_t status;
    cudnnDeterminism_t det;
    cudnnMathType_t math;
} algo_row;

enum { FWD, DATA, FILTER };

static const algo_row fwd_rows[] = {
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH},
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, CUDNN_DEFAULT_MATH},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, CUDNN_STATUS_NOT_SUPPORTED, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH},
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH},
    {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH},
};
static const algo_row data_rows[] = {
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, CUDNN_STATUS_SUCCESS, CUDNN_NON_DETERMINISTIC, CUDNN_FMA_MATH},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH},
};
static const algo_row filter_rows[] = {
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, CUDNN_STATUS_SUCCESS, CUDNN_NON_DETERMINISTIC, CUDNN_FMA_MATH},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, CUDNN_STATUS_SUCCESS, CUDNN_NON_DETERMINISTIC, CUDNN_FMA_MATH},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH},
};

static const algo_row *rows_of(int dir, int *n)
{
    switch (dir) {
    case FWD:
        *n = sizeof fwd_rows / sizeof *fwd_rows;
        return fwd_rows;
    case DATA:
        *n = sizeof data_rows / sizeof *data_rows;
        return data_rows;
    default:
        *n = sizeof filter_rows / sizeof *filter_rows;
        return filter_rows;
    }
}

/* The workspace each algorithm of the fake needs. xd = {n,c,h,w},
 * wd = {k,c,r,s}, yd = {n,k,oh,ow}. */
size_t fake_workspace_need(int dir, int algo, const int *xd, const int *wd, const int *yd)
{
    size_t f = sizeof(float);
    size_t im2col = f * wd[1] * wd[2] * wd[3] * yd[2] * yd[3];
    if (dir == FWD) {
        switch (algo) {
        case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
            return 0;
        case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
            return sizeof(int) * wd[1] * wd[2] * wd[3];
        case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
            return im2col;
        default:
            return f * ((size_t)xd[0] * xd[1] + (size_t)wd[0] * wd[1]) * (xd[2] + wd[2]) * (xd[3] + wd[3]);
        }
    }
    if (dir == DATA) {
        switch (algo) {
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0:
            return 0;
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
            return f * xd[1] * xd[2] * xd[3];
        default:
            return 4 * f * ((size_t)xd[0] * xd[1] * xd[2] * xd[3] + (size_t)wd[0] * wd[1] * wd[2] * wd[3]);
        }
    }
    switch (algo) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0:
        return 0;
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3:
        return 64;
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1: /* the largest of every deterministic choice */
        return im2col + f * xd[1] * xd[2] * xd[3] + sizeof(int) * wd[1] * wd[2] * wd[3] + 4096;
    default:
        return 1u << 20;
    }
}

static size_t need_for(int dir, int algo, const tens *x, const filt *w, const tens *y)
{
    int xd[4] = {x->n, x->c, x->h, x->w}, wd[4] = {w->k, w->c, w->r, w->s}, yd[4] = {y->n, y->c, y->h, y->w};
    return fake_workspace_need(dir, algo, xd, wd, yd);
}

static const algo_row *row_for(int dir, int algo)
{
    int n;
    const algo_row *r = rows_of(dir, &n);
    for (int i = 0; i < n; i++)
        if (r[i].algo == algo && r[i].status == CUDNN_STATUS_SUCCESS)
            return &r[i];
    return NULL;
}

/* Fill perf results (each direction's struct has this layout). */
#define FILL_PERF(dir, res, requested, returned, x, w, y)                             \
    do {                                                                            \
        int n_;                                                                     \
        const algo_row *r_ = rows_of(dir, &n_);                                     \
        if (n_ > (requested))                                                       \
            n_ = (requested);                                                       \
        for (int i_ = 0; i_ < n_; i_++) {                                           \
            memset(&(res)[i_], 0, sizeof(res)[i_]);                                 \
            (res)[i_].algo = r_[i_].algo;                                           \
            (res)[i_].status = r_[i_].status;                                       \
            (res)[i_].time = 0.1f * (float)(i_ + 1);                                \
            (res)[i_].memory = need_for(dir, r_[i_].algo, x, w, y);                 \
            (res)[i_].determinism = r_[i_].det;                                     \
            (res)[i_].mathType = r_[i_].math;                                       \
        }                                                                           \
        *(returned) = n_;                                                           \
    } while (0)

cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t h, int *count)
{
    NEED_HANDLE("cudnnGetConvolutionForwardAlgorithmMaxCount", h);
    *count = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t h, int *count)
{
    NEED_HANDLE("cudnnGetConvolutionBackwardDataAlgorithmMaxCount", h);
    *count = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t h, int *count)
{
    NEED_HANDLE("cudnnGetConvolutionBackwardFilterAlgorithmMaxCount", h);
    *count = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t fwd_candidates(const char *api, cudnnHandle_t h, cudnnTensorDescriptor_t xd,
                                    cudnnFilterDescriptor_t wd, cudnnConvolutionDescriptor_t cd,
                                    cudnnTensorDescriptor_t yd, int requested, int *returned,
                                    cudnnConvolutionFwdAlgoPerf_t *res)
{
    ENTER(api);
    NEED_HANDLE(api, h);
    tens x, y;
    filt w;
    convp p;
    if (!read_conv(api, cd, xd, wd, yd, &x, &w, &y, &p) || requested < 1 || !returned || !res)
        return CUDNN_STATUS_BAD_PARAM;
    FILL_PERF(FWD, res, requested, returned, &x, &w, &y);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t h, const cudnnTensorDescriptor_t xd,
                                                     const cudnnFilterDescriptor_t wd,
                                                     const cudnnConvolutionDescriptor_t cd,
                                                     const cudnnTensorDescriptor_t yd, const int requested,
                                                     int *returned, cudnnConvolutionFwdAlgoPerf_t *res)
{
    return fwd_candidates("cudnnGetConvolutionForwardAlgorithm_v7", h, xd, wd, cd, yd, requested,
                          returned, res);
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(cudnnHandle_t h, const cudnnTensorDescriptor_t xd,
                                                   const cudnnFilterDescriptor_t wd,
                                                   const cudnnConvolutionDescriptor_t cd,
                                                   const cudnnTensorDescriptor_t yd, const int requested,
                                                   int *returned, cudnnConvolutionFwdAlgoPerf_t *res)
{
    return fwd_candidates("cudnnFindConvolutionForwardAlgorithm", h, xd, wd, cd, yd, requested,
                          returned, res);
}

static cudnnStatus_t data_candidates(const char *api, cudnnHandle_t h, cudnnFilterDescriptor_t wd,
                                     cudnnTensorDescriptor_t dyd, cudnnConvolutionDescriptor_t cd,
                                     cudnnTensorDescriptor_t dxd, int requested, int *returned,
                                     cudnnConvolutionBwdDataAlgoPerf_t *res)
{
    ENTER(api);
    NEED_HANDLE(api, h);
    tens x, y;
    filt w;
    convp p;
    if (!read_conv(api, cd, dxd, wd, dyd, &x, &w, &y, &p) || requested < 1 || !returned || !res)
        return CUDNN_STATUS_BAD_PARAM;
    FILL_PERF(DATA, res, requested, returned, &x, &w, &y);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t h, const cudnnFilterDescriptor_t wd,
                                                          const cudnnTensorDescriptor_t dyd,
                                                          const cudnnConvolutionDescriptor_t cd,
                                                          const cudnnTensorDescriptor_t dxd,
                                                          const int requested, int *returned,
                                                          cudnnConvolutionBwdDataAlgoPerf_t *res)
{
    return data_candidates("cudnnGetConvolutionBackwardDataAlgorithm_v7", h, wd, dyd, cd, dxd,
                           requested, returned, res);
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(cudnnHandle_t h, const cudnnFilterDescriptor_t wd,
                                                        const cudnnTensorDescriptor_t dyd,
                                                        const cudnnConvolutionDescriptor_t cd,
                                                        const cudnnTensorDescriptor_t dxd,
                                                        const int requested, int *returned,
                                                        cudnnConvolutionBwdDataAlgoPerf_t *res)
{
    return data_candidates("cudnnFindConvolutionBackwardDataAlgorithm", h, wd, dyd, cd, dxd,
                           requested, returned, res);
}

static cudnnStatus_t filter_candidates(const char *api, cudnnHandle_t h, cudnnTensorDescriptor_t xd,
                                       cudnnTensorDescriptor_t dyd, cudnnConvolutionDescriptor_t cd,
                                       cudnnFilterDescriptor_t dwd, int requested, int *returned,
                                       cudnnConvolutionBwdFilterAlgoPerf_t *res)
{
    ENTER(api);
    NEED_HANDLE(api, h);
    tens x, y;
    filt w;
    convp p;
    if (!read_conv(api, cd, xd, dwd, dyd, &x, &w, &y, &p) || requested < 1 || !returned || !res)
        return CUDNN_STATUS_BAD_PARAM;
    FILL_PERF(FILTER, res, requested, returned, &x, &w, &y);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t h, const cudnnTensorDescriptor_t xd,
                                                            const cudnnTensorDescriptor_t dyd,
                                                            const cudnnConvolutionDescriptor_t cd,
                                                            const cudnnFilterDescriptor_t dwd,
                                                            const int requested, int *returned,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t *res)
{
    return filter_candidates("cudnnGetConvolutionBackwardFilterAlgorithm_v7", h, xd, dyd, cd, dwd,
                             requested, returned, res);
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(cudnnHandle_t h, const cudnnTensorDescriptor_t xd,
                                                          const cudnnTensorDescriptor_t dyd,
                                                          const cudnnConvolutionDescriptor_t cd,
                                                          const cudnnFilterDescriptor_t dwd,
                                                          const int requested, int *returned,
                                                          cudnnConvolutionBwdFilterAlgoPerf_t *res)
{
    return filter_candidates("cudnnFindConvolutionBackwardFilterAlgorithm", h, xd, dyd, cd, dwd,
                             requested, returned, res);
}

static cudnnStatus_t workspace_size(const char *api, int dir, int algo, cudnnHandle_t h,
                                    cudnnTensorDescriptor_t xd, cudnnFilterDescriptor_t wd,
                                    cudnnConvolutionDescriptor_t cd, cudnnTensorDescriptor_t yd,
                                    size_t *bytes)
{
    ENTER(api);
    NEED_HANDLE(api, h);
    tens x, y;
    filt w;
    convp p;
    if (!read_conv(api, cd, xd, wd, yd, &x, &w, &y, &p))
        return CUDNN_STATUS_BAD_PARAM;
    if (!row_for(dir, algo))
        return CUDNN_STATUS_NOT_SUPPORTED;
    *bytes = need_for(dir, algo, &x, &w, &y);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t xd,
                                                      const cudnnFilterDescriptor_t wd,
                                                      const cudnnConvolutionDescriptor_t cd,
                                                      const cudnnTensorDescriptor_t yd,
                                                      cudnnConvolutionFwdAlgo_t algo, size_t *bytes)
{
    return workspace_size("cudnnGetConvolutionForwardWorkspaceSize", FWD, algo, h, xd, wd, cd, yd, bytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t h, const cudnnFilterDescriptor_t wd,
                                                           const cudnnTensorDescriptor_t dyd,
                                                           const cudnnConvolutionDescriptor_t cd,
                                                           const cudnnTensorDescriptor_t dxd,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t *bytes)
{
    return workspace_size("cudnnGetConvolutionBackwardDataWorkspaceSize", DATA, algo, h, dxd, wd, cd,
                          dyd, bytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t xd,
                                                             const cudnnTensorDescriptor_t dyd,
                                                             const cudnnConvolutionDescriptor_t cd,
                                                             const cudnnFilterDescriptor_t dwd,
                                                             cudnnConvolutionBwdFilterAlgo_t algo,
                                                             size_t *bytes)
{
    return workspace_size("cudnnGetConvolutionBackwardFilterWorkspaceSize", FILTER, algo, h, xd, dwd,
                          cd, dyd, bytes);
}

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
static int tap(const conv_job *j, int oy, int ox, int r, int s, int *iy, int *ix, size_t *wi, int k,
               int c)
{
    *iy = oy * j->p.u - j->p.ph + r * j->p.dh;
    *ix = ox * j->p.v - j->p.pw + s * j->p.dw;
    int fr = j->p.flip ? j->w.r - 1 - r : r, fs = j->p.flip ? j->w.s - 1 - s : s;
    *wi = (((size_t)k * j->w.c + c) * j->w.r + fr) * j->w.s + fs;
    return *iy >= 0 && *iy < j->x.h && *ix >= 0 && *ix < j->x.w;
}

static void conv_run(void *a)
{
    conv_job *j = a;
    const tens *x = &j->x, *y = &j->y;
    const filt *w = &j->w;
    if (j->ws_bytes)
        memset(j->ws, 0xab, j->ws_bytes); /* nothing may rely on workspace contents */
    if (j->dir == FWD) {
        for (int n = 0; n < y->n; n++)
            for (int k = 0; k < y->c; k++)
                for (int oy = 0; oy < y->h; oy++)
                    for (int ox = 0; ox < y->w; ox++) {
                        double acc = 0.0;
                        for (int c = 0; c < w->c; c++)
                            for (int r = 0; r < w->r; r++)
                                for (int s = 0; s < w->s; s++) {
                                    int iy, ix;
                                    size_t wi;
                                    if (tap(j, oy, ox, r, s, &iy, &ix, &wi, k, c))
                                        acc += (double)j->in[at4(x, n, c, iy, ix)] * j->aux[wi];
                                }
                        blend(&j->out[at4(y, n, k, oy, ox)], acc, j->alpha, j->beta);
                    }
    } else if (j->dir == DATA) {
        size_t nx = (size_t)x->n * x->c * x->h * x->w;
        double *acc = calloc(nx, sizeof *acc);
        for (int n = 0; n < y->n; n++)
            for (int k = 0; k < y->c; k++)
                for (int oy = 0; oy < y->h; oy++)
                    for (int ox = 0; ox < y->w; ox++)
                        for (int c = 0; c < w->c; c++)
                            for (int r = 0; r < w->r; r++)
                                for (int s = 0; s < w->s; s++) {
                                    int iy, ix;
                                    size_t wi;
                                    if (tap(j, oy, ox, r, s, &iy, &ix, &wi, k, c))
                                        acc[(((size_t)n * x->c + c) * x->h + iy) * x->w + ix] +=
                                            (double)j->in[at4(y, n, k, oy, ox)] * j->aux[wi];
                                }
        for (int n = 0; n < x->n; n++)
            for (int c = 0; c < x->c; c++)
                for (int iy = 0; iy < x->h; iy++)
                    for (int ix = 0; ix < x->w; ix++)
                        blend(&j->out[at4(x, n, c, iy, ix)],
                              acc[(((size_t)n * x->c + c) * x->h + iy) * x->w + ix], j->alpha, j->beta);
        free(acc);
    } else {
        size_t nw = (size_t)w->k * w->c * w->r * w->s;
        double *acc = calloc(nw, sizeof *acc);
        for (int n = 0; n < y->n; n++)
            for (int k = 0; k < y->c; k++)
                for (int oy = 0; oy < y->h; oy++)
                    for (int ox = 0; ox < y->w; ox++)
                        for (int c = 0; c < w->c; c++)
                            for (int r = 0; r < w->r; r++)
                                for (int s = 0; s < w->s; s++) {
                                    int iy, ix;
                                    size_t wi;
                                    if (tap(j, oy, ox, r, s, &iy, &ix, &wi, k, c))
                                        acc[wi] += (double)j->aux[at4(y, n, k, oy, ox)] *
                                                   j->in[at4(x, n, c, iy, ix)];
                                }
        for (size_t i = 0; i < nw; i++)
            blend(&j->out[i], acc[i], j->alpha, j->beta);
        free(acc);
    }
    if (j->corrupt)
        j->out[0] += 1.0f;
}

static cudnnStatus_t conv_call(const char *api, int dir, cudnnHandle_t h, const void *alpha,
                               cudnnTensorDescriptor_t xd, cudnnFilterDescriptor_t wd,
                               cudnnConvolutionDescriptor_t cd, cudnnTensorDescriptor_t yd, int algo,
                               void *ws, size_t ws_bytes, const void *beta, const void *in,
                               const void *aux, void *out)
{
    ENTER(api);
    NEED_HANDLE(api, h);
    conv_job j = {.dir = dir, .in = in, .aux = aux, .out = out, .ws = ws, .ws_bytes = ws_bytes};
    if (!read_conv(api, cd, xd, wd, yd, &j.x, &j.w, &j.y, &j.p) ||
        !scalars(api, alpha, beta, &j.alpha, &j.beta))
        return CUDNN_STATUS_BAD_PARAM;
    const algo_row *row = row_for(dir, algo);
    if (!row) {
        BAD(api, "algorithm %d is not supported for this convolution", algo);
        return CUDNN_STATUS_NOT_SUPPORTED;
    }
    size_t need = need_for(dir, algo, &j.x, &j.w, &j.y);
    if (ws_bytes < need) {
        BAD(api, "algorithm %d needs %zu bytes of workspace, %zu given", algo, need, ws_bytes);
        return CUDNN_STATUS_BAD_PARAM;
    }
    if (ws_bytes && !dev(api, "workspace", ws, ws_bytes))
        return CUDNN_STATUS_BAD_PARAM;
    /* which tensor is which in this direction */
    size_t xb = j.x.bytes, yb = j.y.bytes, wb = filt_bytes(&j.w);
    int ok = dir == FWD ? dev(api, "x", in, xb) && dev(api, "w", aux, wb) && dev(api, "y", out, yb)
             : dir == DATA ? dev(api, "dy", in, yb) && dev(api, "w", aux, wb) && dev(api, "dx", out, xb)
                           : dev(api, "x", in, xb) && dev(api, "dy", aux, yb) && dev(api, "dw", out, wb);
    if (!ok)
        return CUDNN_STATUS_BAD_PARAM;
    last_algo[dir] = algo;
    j.corrupt = fk_take_corruption(api);
    conv_job *q = malloc(sizeof *q);
    *q = j;
    if (fk_enqueue(h->stream, api, conv_run, free, q, NULL, 0) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd,
                                      const void *x, const cudnnFilterDescriptor_t wd, const void *w,
                                      const cudnnConvolutionDescriptor_t cd, cudnnConvolutionFwdAlgo_t algo,
                                      void *ws, size_t ws_bytes, const void *beta,
                                      const cudnnTensorDescriptor_t yd, void *y)
{
    return conv_call("cudnnConvolutionForward", FWD, h, alpha, xd, wd, cd, yd, algo, ws, ws_bytes, beta,
                     x, w, y);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *alpha,
                                           const cudnnFilterDescriptor_t wd, const void *w,
                                           const cudnnTensorDescriptor_t dyd, const void *dy,
                                           const cudnnConvolutionDescriptor_t cd,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *ws, size_t ws_bytes,
                                           const void *beta, const cudnnTensorDescriptor_t dxd, void *dx)
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
                        double v = j->A[at4(a, a->n == 1 ? 0 : n, a->c == 1 ? 0 : k, a->h == 1 ? 0 : y,
                                            a->w == 1 ? 0 : x)];
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
    if (!read_tensor(api, reduce ? "dy" : "A", ad, &j.a) ||
        !read_tensor(api, reduce ? "db" : "C", cd, &j.c) || !scalars(api, alpha, beta, &j.alpha, &j.beta))
        return CUDNN_STATUS_BAD_PARAM;
    const tens *a = &j.a, *c = &j.c;
    if (reduce) {
        if (c->n != 1 || c->h != 1 || c->w != 1 || c->c != a->c) {
            BAD(api, "db must be 1x%dx1x1, is %dx%dx%dx%d", a->c, c->n, c->c, c->h, c->w);
            return CUDNN_STATUS_BAD_PARAM;
        }
    } else if ((a->n != c->n && a->n != 1) || (a->c != c->c && a->c != 1) || (a->h != c->h && a->h != 1) ||
               (a->w != c->w && a->w != 1)) {
        BAD(api, "A %dx%dx%dx%d does not broadcast to C %dx%dx%dx%d", a->n, a->c, a->h, a->w, c->n,
            c->c, c->h, c->w);
        return CUDNN_STATUS_BAD_PARAM;
    }
    if (!dev(api, reduce ? "dy" : "A", A, a->bytes) || !dev(api, reduce ? "db" : "C", C, c->bytes))
        return CUDNN_STATUS_BAD_PARAM;
    j.corrupt = fk_take_corruption(api);
    add_job *q = malloc(sizeof *q);
    *q = j;
    if (fk_enqueue(h->stream, api, add_run, free, q, NULL, 0) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnAddTensor(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t ad,
                             const void *A, const void *beta, const cudnnTensorDescriptor_t cd, void *C)
{
    return add_call("cudnnAddTensor", h, alpha, ad, A, beta, cd, C, 0);
}

cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t h, const void *alpha,
                                           const cudnnTensorDescriptor_t dyd, const void *dy,
                                           const void *beta, const cudnnTensorDescriptor_t dbd, void *db)
{
    return add_call("cudnnConvolutionBackwardBias", h, alpha, dyd, dy, beta, dbd, db, 1);
}

/* ---------------------------------------------------------------- pooling */

typedef struct pool_job {
    tens x, y;
    int wh, ww, ph, pw, sh, sw;
    float alpha, beta;
    const float *X, *Y, *dY;
    float *out; /* forward: y; backward: dx */
    int backward, corrupt;
} pool_job;

/* first maximum of window (n, c, oy, ox) in row-major order; -1 if empty */
static long pool_argmax(const pool_job *j, int n, int c, int oy, int ox, int *iy, int *ix)
{
    long best = -1;
    for (int r = 0; r < j->wh; r++)
        for (int s = 0; s < j->ww; s++) {
            int y = oy * j->sh - j->ph + r, x = ox * j->sw - j->pw + s;
            if (y < 0 || y >= j->x.h || x < 0 || x >= j->x.w)
                continue;
            long k = (long)at4(&j->x, n, c, y, x);
            if (best < 0 || j->X[k] > j->X[best]) {
                best = k;
                *iy = y;
                *ix = x;
            }
        }
    return best;
}

static void pool_run(void *p)
{
    pool_job *j = p;
    if (!j->backward) {
        for (int n = 0; n < j->y.n; n++)
            for (int c = 0; c < j->y.c; c++)
                for (int oy = 0; oy < j->y.h; oy++)
                    for (int ox = 0; ox < j->y.w; ox++) {
                        int iy, ix;
                        long k = pool_argmax(j, n, c, oy, ox, &iy, &ix);
                        blend(&j->out[at4(&j->y, n, c, oy, ox)], k < 0 ? 0.0 : j->X[k], j->alpha, j->beta);
                    }
    } else {
        size_t nx = (size_t)j->x.n * j->x.c * j->x.h * j->x.w;
        double *acc = calloc(nx, sizeof *acc);
        for (int n = 0; n < j->y.n; n++)
            for (int c = 0; c < j->y.c; c++)
                for (int oy = 0; oy < j->y.h; oy++)
                    for (int ox = 0; ox < j->y.w; ox++) {
                        int iy = 0, ix = 0;
                        long k = pool_argmax(j, n, c, oy, ox, &iy, &ix);
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
                              acc[(((size_t)n * j->x.c + c) * j->x.h + y) * j->x.w + x], j->alpha, j->beta);
        free(acc);
    }
    if (j->corrupt)
        j->out[0] += 1.0f;
}

static int read_pool(const char *api, cudnnPoolingDescriptor_t pd, cudnnTensorDescriptor_t xd,
                     cudnnTensorDescriptor_t yd, pool_job *j)
{
    cudnnPoolingMode_t mode;
    cudnnNanPropagation_t nan;
    if (cudnnGetPooling2dDescriptor(pd, &mode, &nan, &j->wh, &j->ww, &j->ph, &j->pw, &j->sh, &j->sw) !=
        CUDNN_STATUS_SUCCESS) {
        BAD(api, "not a readable 2-d pooling descriptor");
        return 0;
    }
    if (mode != CUDNN_POOLING_MAX && mode != CUDNN_POOLING_MAX_DETERMINISTIC) {
        BAD(api, "pooling mode %d (the fake does max pooling only)", (int)mode);
        return 0;
    }
    if (!read_tensor(api, "x", xd, &j->x) || !read_tensor(api, "y", yd, &j->y))
        return 0;
    int n, c, h, w;
    if (cudnnGetPooling2dForwardOutputDim(pd, xd, &n, &c, &h, &w) != CUDNN_STATUS_SUCCESS ||
        n != j->y.n || c != j->y.c || h != j->y.h || w != j->y.w) {
        BAD(api, "y is %dx%dx%dx%d, pooling x gives %dx%dx%dx%d", j->y.n, j->y.c, j->y.h, j->y.w, n, c,
            h, w);
        return 0;
    }
    return 1;
}

cudnnStatus_t cudnnPoolingForward(cudnnHandle_t h, const cudnnPoolingDescriptor_t pd, const void *alpha,
                                  const cudnnTensorDescriptor_t xd, const void *x, const void *beta,
                                  const cudnnTensorDescriptor_t yd, void *y)
{
    const char *api = "cudnnPoolingForward";
    ENTER(api);
    NEED_HANDLE(api, h);
    pool_job j = {.X = x, .out = y};
    if (!read_pool(api, pd, xd, yd, &j) || !scalars(api, alpha, beta, &j.alpha, &j.beta) ||
        !dev(api, "x", x, j.x.bytes) || !dev(api, "y", y, j.y.bytes))
        return CUDNN_STATUS_BAD_PARAM;
    j.corrupt = fk_take_corruption(api);
    pool_job *q = malloc(sizeof *q);
    *q = j;
    if (fk_enqueue(h->stream, api, pool_run, free, q, NULL, 0) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnPoolingBackward(cudnnHandle_t h, const cudnnPoolingDescriptor_t pd, const void *alpha,
                                   const cudnnTensorDescriptor_t yd, const void *y,
                                   const cudnnTensorDescriptor_t dyd, const void *dy,
                                   const cudnnTensorDescriptor_t xd, const void *x, const void *beta,
                                   const cudnnTensorDescriptor_t dxd, void *dx)
{
    const char *api = "cudnnPoolingBackward";
    ENTER(api);
    NEED_HANDLE(api, h);
    pool_job j = {.X = x, .Y = y, .dY = dy, .out = dx, .backward = 1};
    tens dyt, dxt;
    if (!read_pool(api, pd, xd, yd, &j) || !read_tensor(api, "dy", dyd, &dyt) ||
        !read_tensor(api, "dx", dxd, &dxt) || !scalars(api, alpha, beta, &j.alpha, &j.beta))
        return CUDNN_STATUS_BAD_PARAM;
    if (memcmp(&dyt, &j.y, sizeof dyt) || memcmp(&dxt, &j.x, sizeof dxt)) {
        BAD(api, "dy/dx descriptors differ from y/x");
        return CUDNN_STATUS_BAD_PARAM;
    }
    if (!dev(api, "y", y, j.y.bytes) || !dev(api, "dy", dy, j.y.bytes) || !dev(api, "x", x, j.x.bytes) ||
        !dev(api, "dx", dx, j.x.bytes))
        return CUDNN_STATUS_BAD_PARAM;
    j.corrupt = fk_take_corruption(api);
    pool_job *q = malloc(sizeof *q);
    *q = j;
    if (fk_enqueue(h->stream, api, pool_run, free, q, NULL, 0) != cudaSuccess)
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

cudnnStatus_t cudnnActivationForward(cudnnHandle_t h, cudnnActivationDescriptor_t ad, const void *alpha,
                                     const cudnnTensorDescriptor_t xd, const void *x, const void *beta,
                                     const cudnnTensorDescriptor_t yd, void *y)
{
    const char *api = "cudnnActivationForward";
    ENTER(api);
    NEED_HANDLE(api, h);
    act_job j = {.X = x, .out = y};
    tens yt;
    if (!read_act(api, ad) || !read_tensor(api, "x", xd, &j.t) || !read_tensor(api, "y", yd, &yt) ||
        !same_shape(api, &j.t, &yt, "x, y") || !scalars(api, alpha, beta, &j.alpha, &j.beta) ||
        !dev(api, "x", x, j.t.bytes) || !dev(api, "y", y, j.t.bytes))
        return CUDNN_STATUS_BAD_PARAM;
    j.corrupt = fk_take_corruption(api);
    act_job *q = malloc(sizeof *q);
    *q = j;
    if (fk_enqueue(h->stream, api, act_run, free, q, NULL, 0) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnActivationBackward(cudnnHandle_t h, cudnnActivationDescriptor_t ad, const void *alpha,
                                      const cudnnTensorDescriptor_t yd, const void *y,
                                      const cudnnTensorDescriptor_t dyd, const void *dy,
                                      const cudnnTensorDescriptor_t xd, const void *x, const void *beta,
                                      const cudnnTensorDescriptor_t dxd, void *dx)
{
    const char *api = "cudnnActivationBackward";
    ENTER(api);
    NEED_HANDLE(api, h);
    act_job j = {.X = x, .Y = y, .dY = dy, .out = dx, .backward = 1};
    tens yt, dyt, dxt;
    if (!read_act(api, ad) || !read_tensor(api, "x", xd, &j.t) || !read_tensor(api, "y", yd, &yt) ||
        !read_tensor(api, "dy", dyd, &dyt) || !read_tensor(api, "dx", dxd, &dxt) ||
        !same_shape(api, &j.t, &yt, "x, y") || !same_shape(api, &j.t, &dyt, "x, dy") ||
        !same_shape(api, &j.t, &dxt, "x, dx") || !scalars(api, alpha, beta, &j.alpha, &j.beta) ||
        !dev(api, "x", x, j.t.bytes) || !dev(api, "y", y, j.t.bytes) || !dev(api, "dy", dy, j.t.bytes) ||
        !dev(api, "dx", dx, j.t.bytes))
        return CUDNN_STATUS_BAD_PARAM;
    j.corrupt = fk_take_corruption(api);
    act_job *q = malloc(sizeof *q);
    *q = j;
    if (fk_enqueue(h->stream, api, act_run, free, q, NULL, 0) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}
