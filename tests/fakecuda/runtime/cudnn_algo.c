/* cudnn_algo.c — the fake cuDNN, part 2: algorithm candidates (the _v7
 * heuristics and cudnnFind* answer alike) and workspace sizes.
 *
 * The tables are built to trip naive selection code: the first candidates
 * returned are imprecise (FFT), TF32-eligible (default math) or
 * non-deterministic, and the deterministic backward-filter choice needs the
 * largest workspace of all, so a workspace sized from the forward pass
 * alone is caught when the filter pass runs.
 */
#define _GNU_SOURCE
#include <string.h>

#include "tests/fakecuda/runtime/fakednn.h"

/* ---------------------------------------------------------------- algorithm tables */

typedef struct algo_row {
    int algo;
    cudnnStatus_t status;
    cudnnDeterminism_t det;
    cudnnMathType_t math;
} algo_row;

static const algo_row fwd_rows[] = {
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH},
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC,
     CUDNN_DEFAULT_MATH},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, CUDNN_STATUS_NOT_SUPPORTED, CUDNN_DETERMINISTIC,
     CUDNN_FMA_MATH},
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC,
     CUDNN_FMA_MATH},
    {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH},
};
static const algo_row data_rows[] = {
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, CUDNN_STATUS_SUCCESS, CUDNN_NON_DETERMINISTIC,
     CUDNN_FMA_MATH},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC,
     CUDNN_FMA_MATH},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH},
};
static const algo_row filter_rows[] = {
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, CUDNN_STATUS_SUCCESS, CUDNN_NON_DETERMINISTIC,
     CUDNN_FMA_MATH},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, CUDNN_STATUS_SUCCESS, CUDNN_NON_DETERMINISTIC,
     CUDNN_FMA_MATH},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC,
     CUDNN_FMA_MATH},
};

static const algo_row *rows_of(int dir, int *n)
{
    switch (dir) {
    case FWD: *n = sizeof fwd_rows / sizeof *fwd_rows; return fwd_rows;
    case DATA: *n = sizeof data_rows / sizeof *data_rows; return data_rows;
    default: *n = sizeof filter_rows / sizeof *filter_rows; return filter_rows;
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
        case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return 0;
        case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
            return sizeof(int) * wd[1] * wd[2] * wd[3];
        case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return im2col;
        default:
            return f * ((size_t)xd[0] * xd[1] + (size_t)wd[0] * wd[1]) * (xd[2] + wd[2]) *
                   (xd[3] + wd[3]);
        }
    }
    if (dir == DATA) {
        switch (algo) {
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return 0;
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return f * xd[1] * xd[2] * xd[3];
        default:
            return 4 * f *
                   ((size_t)xd[0] * xd[1] * xd[2] * xd[3] + (size_t)wd[0] * wd[1] * wd[2] * wd[3]);
        }
    }
    switch (algo) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0: return 0;
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3: return 64;
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1: /* the largest of every deterministic choice */
        return im2col + f * xd[1] * xd[2] * xd[3] + sizeof(int) * wd[1] * wd[2] * wd[3] + 4096;
    default: return 1u << 20;
    }
}

static size_t need_for(int dir, int algo, const tens *x, const filt *w, const tens *y)
{
    int xd[4] = {x->n, x->c, x->h, x->w}, wd[4] = {w->k, w->c, w->r, w->s},
        yd[4] = {y->n, y->c, y->h, y->w};
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

size_t fkd_need(int dir, int algo, const tens *x, const filt *w, const tens *y, int *ok)
{
    *ok = row_for(dir, algo) != NULL;
    return need_for(dir, algo, x, w, y);
}

/* Fill perf results (each direction's struct has this layout). */
#define FILL_PERF(dir, res, requested, returned, x, w, y)                                          \
    do {                                                                                           \
        int n_;                                                                                    \
        const algo_row *r_ = rows_of(dir, &n_);                                                    \
        if (n_ > (requested))                                                                      \
            n_ = (requested);                                                                      \
        for (int i_ = 0; i_ < n_; i_++) {                                                          \
            memset(&(res)[i_], 0, sizeof(res)[i_]);                                                \
            (res)[i_].algo = r_[i_].algo;                                                          \
            (res)[i_].status = fkd_none_usable() ? CUDNN_STATUS_NOT_SUPPORTED : r_[i_].status;     \
            (res)[i_].time = 0.1f * (float)(i_ + 1);                                               \
            (res)[i_].memory = need_for(dir, r_[i_].algo, x, w, y);                                \
            (res)[i_].determinism =                                                                \
                fkd_tensor_op_nondet_only() ? CUDNN_NON_DETERMINISTIC : r_[i_].det;                \
            (res)[i_].mathType = fkd_tensor_op_nondet_only() ? CUDNN_TENSOR_OP_MATH                \
                                 : fkd_default_math_only()   ? CUDNN_DEFAULT_MATH                  \
                                                             : r_[i_].math;                          \
        }                                                                                          \
        *(returned) = n_;                                                                          \
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
    if (!fkd_read_conv(api, cd, xd, wd, yd, &x, &w, &y, &p) || requested < 1 || !returned || !res)
        return CUDNN_STATUS_BAD_PARAM;
    FILL_PERF(FWD, res, requested, returned, &x, &w, &y);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t h, const cudnnTensorDescriptor_t xd, const cudnnFilterDescriptor_t wd,
    const cudnnConvolutionDescriptor_t cd, const cudnnTensorDescriptor_t yd, const int requested,
    int *returned, cudnnConvolutionFwdAlgoPerf_t *res)
{
    return fwd_candidates("cudnnGetConvolutionForwardAlgorithm_v7", h, xd, wd, cd, yd, requested,
                          returned, res);
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(
    cudnnHandle_t h, const cudnnTensorDescriptor_t xd, const cudnnFilterDescriptor_t wd,
    const cudnnConvolutionDescriptor_t cd, const cudnnTensorDescriptor_t yd, const int requested,
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
    if (!fkd_read_conv(api, cd, dxd, wd, dyd, &x, &w, &y, &p) || requested < 1 || !returned || !res)
        return CUDNN_STATUS_BAD_PARAM;
    FILL_PERF(DATA, res, requested, returned, &x, &w, &y);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t h, const cudnnFilterDescriptor_t wd, const cudnnTensorDescriptor_t dyd,
    const cudnnConvolutionDescriptor_t cd, const cudnnTensorDescriptor_t dxd, const int requested,
    int *returned, cudnnConvolutionBwdDataAlgoPerf_t *res)
{
    return data_candidates("cudnnGetConvolutionBackwardDataAlgorithm_v7", h, wd, dyd, cd, dxd,
                           requested, returned, res);
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(
    cudnnHandle_t h, const cudnnFilterDescriptor_t wd, const cudnnTensorDescriptor_t dyd,
    const cudnnConvolutionDescriptor_t cd, const cudnnTensorDescriptor_t dxd, const int requested,
    int *returned, cudnnConvolutionBwdDataAlgoPerf_t *res)
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
    if (!fkd_read_conv(api, cd, xd, dwd, dyd, &x, &w, &y, &p) || requested < 1 || !returned || !res)
        return CUDNN_STATUS_BAD_PARAM;
    FILL_PERF(FILTER, res, requested, returned, &x, &w, &y);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t h, const cudnnTensorDescriptor_t xd, const cudnnTensorDescriptor_t dyd,
    const cudnnConvolutionDescriptor_t cd, const cudnnFilterDescriptor_t dwd, const int requested,
    int *returned, cudnnConvolutionBwdFilterAlgoPerf_t *res)
{
    return filter_candidates("cudnnGetConvolutionBackwardFilterAlgorithm_v7", h, xd, dyd, cd, dwd,
                             requested, returned, res);
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(
    cudnnHandle_t h, const cudnnTensorDescriptor_t xd, const cudnnTensorDescriptor_t dyd,
    const cudnnConvolutionDescriptor_t cd, const cudnnFilterDescriptor_t dwd, const int requested,
    int *returned, cudnnConvolutionBwdFilterAlgoPerf_t *res)
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
    if (!fkd_read_conv(api, cd, xd, wd, yd, &x, &w, &y, &p))
        return CUDNN_STATUS_BAD_PARAM;
    if (!row_for(dir, algo))
        return CUDNN_STATUS_NOT_SUPPORTED;
    *bytes = need_for(dir, algo, &x, &w, &y);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t h,
                                                      const cudnnTensorDescriptor_t xd,
                                                      const cudnnFilterDescriptor_t wd,
                                                      const cudnnConvolutionDescriptor_t cd,
                                                      const cudnnTensorDescriptor_t yd,
                                                      cudnnConvolutionFwdAlgo_t algo, size_t *bytes)
{
    return workspace_size("cudnnGetConvolutionForwardWorkspaceSize", FWD, algo, h, xd, wd, cd, yd,
                          bytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t h, const cudnnFilterDescriptor_t wd, const cudnnTensorDescriptor_t dyd,
    const cudnnConvolutionDescriptor_t cd, const cudnnTensorDescriptor_t dxd,
    cudnnConvolutionBwdDataAlgo_t algo, size_t *bytes)
{
    return workspace_size("cudnnGetConvolutionBackwardDataWorkspaceSize", DATA, algo, h, dxd, wd,
                          cd, dyd, bytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t h, const cudnnTensorDescriptor_t xd, const cudnnTensorDescriptor_t dyd,
    const cudnnConvolutionDescriptor_t cd, const cudnnFilterDescriptor_t dwd,
    cudnnConvolutionBwdFilterAlgo_t algo, size_t *bytes)
{
    return workspace_size("cudnnGetConvolutionBackwardFilterWorkspaceSize", FILTER, algo, h, xd,
                          dwd, cd, dyd, bytes);
}
