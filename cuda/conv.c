/* conv.c — convolution on cuDNN: plans, algorithm choice, workspace,
 * forward and both backward passes, bias add and bias gradient.
 *
 * Why the legacy (descriptor + cudnnConvolution*) API: cuDNN 9 keeps it,
 * deprecated but supported (it only warns when CUDNN_WARN_DEPRECATED is
 * defined), it needs a tenth of the code of the graph API for three fixed
 * NCHW fp32 convolutions, and its descriptor getters run without a GPU, so
 * the shape logic here is checked against the real library in the tests.
 *
 * A plan is made once per shape: descriptors, one algorithm per direction,
 * and the workspace they need (the backend's one shared workspace grows to
 * the largest plan; ops never allocate). Algorithms come from the _v7
 * heuristics (deterministic choice, no benchmarking, no allocation), or from
 * cudnnFind* (benchmarked on the device) when TRAIN_CUDNN_FIND=1. Among the
 * candidates we take, in the library's order, the first that succeeded,
 * is deterministic and uses plain FMA math (no TF32: fp32 results must match
 * the CPU to 1e-4), skipping FFT and non-fused Winograd for precision; then
 * such a candidate reported with default math, forced to FMA if cuDNN can
 * size it that way; only if none qualifies, the first that succeeded at all,
 * still forced to FMA math unless TRAIN_CUDNN_TF32=1 asks for its own
 * (TF32 on Ampere and newer).
 *
 * Deliberately left out: grouped or dilated convolution, NHWC, fusion.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/internal.h"
#include "cuda/wait.h"

typedef struct conv_plan {
    conv_shape s;
    cudnnTensorDescriptor_t x, y, bias;
    cudnnFilterDescriptor_t w;
    /* one per direction: each carries the math type of its algorithm */
    cudnnConvolutionDescriptor_t cf, cd, cw;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws_bytes; /* the largest of the three */
} conv_plan;

/* The three perf structs share one layout; this is it, typed neutrally. */
typedef struct algo_perf {
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
} algo_perf;

enum { DIR_FWD, DIR_DATA, DIR_FILTER };
#define ALGO_MAX 16

static int imprecise(int dir, int algo)
{
    switch (dir) {
    case DIR_FWD:
        return algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT ||
               algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
               algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
    case DIR_DATA:
        return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT ||
               algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
               algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
    default:
        return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
               algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
               algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
    }
}

static cudnnConvolutionDescriptor_t desc_of(conv_plan *p, int dir)
{
    return dir == DIR_FWD ? p->cf : dir == DIR_DATA ? p->cd : p->cw;
}

/* Set direction dir's descriptor to math and ask what algo needs then. */
static cudnnStatus_t probe_algo(gpu_ctx *g, conv_plan *p, int dir, int algo, cudnnMathType_t math,
                                size_t *ws)
{
    cudnnConvolutionDescriptor_t c = desc_of(p, dir);
    CUDNN_CHECK(cudnnSetConvolutionMathType(c, math));
    switch (dir) {
    case DIR_FWD:
        return cudnnGetConvolutionForwardWorkspaceSize(g->dnn, p->x, p->w, c, p->y,
                                                       (cudnnConvolutionFwdAlgo_t)algo, ws);
    case DIR_DATA:
        return cudnnGetConvolutionBackwardDataWorkspaceSize(
            g->dnn, p->w, p->y, c, p->x, (cudnnConvolutionBwdDataAlgo_t)algo, ws);
    default:
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(
            g->dnn, p->x, p->y, c, p->w, (cudnnConvolutionBwdFilterAlgo_t)algo, ws);
    }
}

/* TRAIN_CUDNN_TF32=1: the last-resort algorithm may keep TF32 math */
static int tf32_requested(void)
{
    const char *v = getenv("TRAIN_CUDNN_TF32");
    return v && *v && strcmp(v, "0") != 0;
}

/* The algorithm for direction dir among the library's candidates (in its
 * order), in tiers: deterministic, precise and reported as FMA math; then
 * deterministic and precise with default math, forced to FMA (accepted if
 * cuDNN can size it that way); last, anything that succeeded, forced to FMA
 * too unless TF32 was requested (then with its own math). The descriptor is left with the chosen math type; -1 if none. */
static int choose(gpu_ctx *g, conv_plan *p, int dir, const algo_perf *a, int n)
{
    for (int tier = 0; tier < 3; tier++)
        for (int i = 0; i < n; i++) {
            if (a[i].status != CUDNN_STATUS_SUCCESS)
                continue;
            int good = a[i].determinism == CUDNN_DETERMINISTIC && !imprecise(dir, a[i].algo);
            if (tier == 0 && !(good && a[i].math == CUDNN_FMA_MATH))
                continue;
            if (tier == 1 && !(good && a[i].math == CUDNN_DEFAULT_MATH))
                continue;
            size_t ws = 0;
            /* the last resort keeps its own math (TF32 on Ampere and newer)
             * only when asked to: fp32 results must match the CPU's */
            cudnnMathType_t math = tier < 2 || !tf32_requested() ? CUDNN_FMA_MATH : a[i].math;
            if (probe_algo(g, p, dir, a[i].algo, math, &ws) != CUDNN_STATUS_SUCCESS)
                continue;
            if (ws > p->ws_bytes)
                p->ws_bytes = ws;
            return a[i].algo;
        }
    return -1;
}

static int want_find(void)
{
    const char *v = getenv("TRAIN_CUDNN_FIND");
    return v && *v && strcmp(v, "0") != 0;
}

#define COPY_PERF(dst, src, n)                                                                     \
    for (int i_ = 0; i_ < (n); i_++) {                                                             \
        (dst)[i_].algo = (int)(src)[i_].algo;                                                      \
        (dst)[i_].status = (src)[i_].status;                                                       \
        (dst)[i_].time = (src)[i_].time;                                                           \
        (dst)[i_].memory = (src)[i_].memory;                                                       \
        (dst)[i_].determinism = (src)[i_].determinism;                                             \
        (dst)[i_].math = (src)[i_].mathType;                                                       \
    }

/* cuDNN's candidates for each direction, as algo_perf; returns the count */
static int candidates(gpu_ctx *g, conv_plan *p, int dir, algo_perf *a)
{
    int max = 0, n = 0;
    switch (dir) {
    case DIR_FWD: {
        cudnnConvolutionFwdAlgoPerf_t r[ALGO_MAX];
        CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(g->dnn, &max));
        max = max < 1 || max > ALGO_MAX ? ALGO_MAX : max;
        if (want_find())
            CUDNN_CHECK(
                cudnnFindConvolutionForwardAlgorithm(g->dnn, p->x, p->w, p->cf, p->y, max, &n, r));
        else
            CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(g->dnn, p->x, p->w, p->cf, p->y, max,
                                                               &n, r));
        COPY_PERF(a, r, n);
        break;
    }
    case DIR_DATA: {
        cudnnConvolutionBwdDataAlgoPerf_t r[ALGO_MAX];
        CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(g->dnn, &max));
        max = max < 1 || max > ALGO_MAX ? ALGO_MAX : max;
        if (want_find())
            CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(g->dnn, p->w, p->y, p->cd, p->x,
                                                                  max, &n, r));
        else
            CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(g->dnn, p->w, p->y, p->cd, p->x,
                                                                    max, &n, r));
        COPY_PERF(a, r, n);
        break;
    }
    default: {
        cudnnConvolutionBwdFilterAlgoPerf_t r[ALGO_MAX];
        CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(g->dnn, &max));
        max = max < 1 || max > ALGO_MAX ? ALGO_MAX : max;
        if (want_find())
            CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(g->dnn, p->x, p->y, p->cw, p->w,
                                                                    max, &n, r));
        else
            CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(g->dnn, p->x, p->y, p->cw,
                                                                      p->w, max, &n, r));
        COPY_PERF(a, r, n);
        break;
    }
    }
    return n;
}

static int choose_dir(gpu_ctx *g, conv_plan *p, int dir, const char *what)
{
    algo_perf a[ALGO_MAX];
    int n = candidates(g, p, dir, a);
    int algo = choose(g, p, dir, a, n);
    if (algo < 0)
        gpu_fatal("gpu_conv_plan", "cuDNN offers no usable %s algorithm for this convolution",
                  what);
    return algo;
}

void gpu_workspace_reserve(gpu_ctx *g, size_t bytes)
{
    if (bytes <= g->workspace_bytes)
        return;
    if (g->workspace) {
        /* cudaFree only MAY wait for the device: finish every op that uses
         * the workspace first (all of them run on the compute stream). A
         * plan is made once per layer and batch size, so this sync happens
         * in the first steps only. */
        GPU_WAIT_STREAM(g->compute);
        CUDA_CHECK(cudaFree(g->workspace));
    }
    g->workspace = NULL;
    CUDA_CHECK(cudaMalloc(&g->workspace, bytes));
    g->workspace_bytes = bytes;
}

static void set_conv_desc(cudnnConvolutionDescriptor_t c, const conv_shape *s)
{
    /* cross-correlation, like every DL framework and the CPU backend */
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(c, s->pad, s->pad, s->stride, s->stride, 1, 1,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionMathType(c, CUDNN_FMA_MATH));
}

void *gpu_conv_plan(backend *be, const conv_shape *s)
{
    gpu_ctx *g = gpu_of(be);
    conv_plan *p = xcalloc(1, sizeof *p);
    p->s = *s;
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->bias));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->cf));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->cd));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->cw));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s->B, s->C,
                                           s->H, s->W));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s->K, s->C,
                                           s->R, s->S));
    set_conv_desc(p->cf, s);
    set_conv_desc(p->cd, s);
    set_conv_desc(p->cw, s);
    int n, c, h, w;
    CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->cf, p->x, p->w, &n, &c, &h, &w));
    if (n != s->B || c != s->K || h != s->OH || w != s->OW)
        gpu_fatal(__func__, "conv_shape says %dx%dx%dx%d out, cuDNN says %dx%dx%dx%d", s->B, s->K,
                  s->OH, s->OW, n, c, h, w);
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
    CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(p->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, s->K, 1, 1));
    p->fwd = (cudnnConvolutionFwdAlgo_t)choose_dir(g, p, DIR_FWD, "forward");
    p->bwd_data = (cudnnConvolutionBwdDataAlgo_t)choose_dir(g, p, DIR_DATA, "backward-data");
    p->bwd_filter =
        (cudnnConvolutionBwdFilterAlgo_t)choose_dir(g, p, DIR_FILTER, "backward-filter");
    gpu_workspace_reserve(g, p->ws_bytes);
    char desc[256];
    gpu_conv_plan_describe(p, desc, sizeof desc);
    fprintf(stderr, "train: cuDNN %s\n", desc); /* once per layer and batch size */
    return p;
}

static const char *algo_name(int dir, int algo)
{
    static const char *const fwd[] = {
        "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
        "WINOGRAD",      "WINOGRAD_NONFUSED"};
    static const char *const data[] = {"ALGO_0",     "ALGO_1",   "FFT",
                                       "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
    static const char *const filt[] = {
        "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
    const char *const *t = dir == DIR_FWD ? fwd : dir == DIR_DATA ? data : filt;
    int n = dir == DIR_FWD ? 8 : dir == DIR_DATA ? 6 : 7;
    return algo >= 0 && algo < n ? t[algo] : "?";
}

static const char *math_name(cudnnConvolutionDescriptor_t c)
{
    cudnnMathType_t m = CUDNN_DEFAULT_MATH;
    CUDNN_CHECK(cudnnGetConvolutionMathType(c, &m));
    return m == CUDNN_FMA_MATH ? "FMA" : m == CUDNN_DEFAULT_MATH ? "default math" : "TF32";
}

void gpu_conv_plan_describe(const void *plan, char *buf, size_t len)
{
    const conv_plan *p = plan;
    const conv_shape *s = &p->s;
    snprintf(buf, len,
             "conv %dx%dx%d -> %d %dx%d (batch %d): forward %s (%s), backward data %s (%s), "
             "backward filter %s (%s)",
             s->C, s->H, s->W, s->K, s->R, s->S, s->B, algo_name(DIR_FWD, p->fwd), math_name(p->cf),
             algo_name(DIR_DATA, p->bwd_data), math_name(p->cd),
             algo_name(DIR_FILTER, p->bwd_filter), math_name(p->cw));
}

void gpu_conv_plan_free(backend *be, void *plan)
{
    (void)be;
    conv_plan *p = plan;
    if (!p)
        return;
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(p->x));
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(p->y));
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(p->bias));
    CUDNN_CHECK(cudnnDestroyFilterDescriptor(p->w));
    CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(p->cf));
    CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(p->cd));
    CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(p->cw));
    free(p);
}

static conv_plan *plan_for(void *plan, const conv_shape *s, const char *func)
{
    conv_plan *p = plan;
    if (!p)
        gpu_fatal(func, "no plan (call conv_plan for this shape first)");
    if (memcmp(&p->s, s, sizeof *s) != 0)
        gpu_fatal(func, "the plan was made for another shape");
    return p;
}

static const float one = 1.0f, zero = 0.0f;

void gpu_conv_forward(backend *be, void *plan, float *out, const float *in, const float *w,
                      const float *bias, const conv_shape *s)
{
    gpu_ctx *g = gpu_of(be);
    conv_plan *p = plan_for(plan, s, __func__);
    CUDNN_CHECK(cudnnConvolutionForward(g->dnn, &one, p->x, in, p->w, w, p->cf, p->fwd,
                                        g->workspace, g->workspace_bytes, &zero, p->y, out));
    if (bias) /* NULL: a convolution without bias (before a batch norm) */
        CUDNN_CHECK(cudnnAddTensor(g->dnn, &one, p->bias, bias, &one, p->y, out));
}

void gpu_conv_backward(backend *be, void *plan, float *din, float *dw, float *dbias,
                       const float *dout, const float *in, const float *w, const conv_shape *s)
{
    gpu_ctx *g = gpu_of(be);
    conv_plan *p = plan_for(plan, s, __func__);
    if (dbias)
        CUDNN_CHECK(cudnnConvolutionBackwardBias(g->dnn, &one, p->y, dout, &zero, p->bias, dbias));
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(g->dnn, &one, p->x, in, p->y, dout, p->cw,
                                               p->bwd_filter, g->workspace, g->workspace_bytes,
                                               &zero, p->w, dw));
    if (din)
        CUDNN_CHECK(cudnnConvolutionBackwardData(g->dnn, &one, p->w, w, p->y, dout, p->cd,
                                                 p->bwd_data, g->workspace, g->workspace_bytes,
                                                 &zero, p->x, din));
}
