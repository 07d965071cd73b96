/* backend.c — the GPU backend (nn/backend.h): create/destroy, device
 * memory, the kernel-backed ops and the ops table. Convolution is in
 * conv.c, pooling/activation/fully connected in layers.c, the copy stream
 * and timing in staging.c.
 *
 * One device, two non-blocking streams (compute, copy), one cuDNN and one
 * cuBLAS handle bound to the compute stream. Every op is enqueued on the
 * compute stream and returns without waiting; upload/download/synchronize
 * wait. fp32 throughout. Deliberately no multi-GPU, no memory pool (the
 * model allocates once), no CUDA graphs.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/gpu.h"
#include "cuda/gpu_kernels.h"
#include "cuda/internal.h"
#include "cuda/wait.h"

void gpu_fatal(const char *func, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "train: GPU backend: %s: ", func);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stderr);
    exit(1);
}

/* ---------------------------------------------------------------- memory */

static void *gpu_alloc(backend *be, size_t bytes)
{
    gpu_ctx *g = gpu_of(be);
    void *p = NULL;
    if (bytes == 0)
        bytes = 1; /* a distinct pointer, like malloc(1) */
    CUDA_CHECK(cudaMalloc(&p, bytes));
    /* zero-filled per the contract; synchronised so that a later copy on
     * the copy stream cannot be overtaken by this memset */
    CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, g->compute));
    GPU_WAIT_STREAM(g->compute);
    return p;
}

/* cudaFree only MAY wait for the device ("may synchronize"), so both of our
 * streams are finished first: no op can still use p. Frees happen at
 * set-up and tear-down, never per step. */
static void gpu_free(backend *be, void *p)
{
    if (!p)
        return;
    gpu_ctx *g = gpu_of(be);
    GPU_WAIT_STREAM(g->compute);
    GPU_WAIT_STREAM(g->copy);
    CUDA_CHECK(cudaFree(p));
}

/* Copies go on the compute stream, so they are ordered after every op
 * enqueued so far (a cudaMemcpy on the legacy stream would not wait for our
 * non-blocking streams). */
static void gpu_upload(backend *be, void *dst, const void *src, size_t bytes)
{
    gpu_ctx *g = gpu_of(be);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, g->compute));
    GPU_WAIT_STREAM(g->compute);
}

static void gpu_download(backend *be, void *dst, const void *src, size_t bytes)
{
    gpu_ctx *g = gpu_of(be);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, g->compute));
    GPU_WAIT_STREAM(g->compute);
}

static void gpu_synchronize(backend *be) { GPU_WAIT_STREAM(gpu_of(be)->compute); }

/* ---------------------------------------------------------------- kernel ops */

static void gpu_normalize_u8(backend *be, float *out, const uint8_t *in, int B, int C, int HW,
                             const float *mean, const float *std)
{
    if (C < 1 || C > GPU_NORM_MAX_C)
        gpu_fatal(__func__, "%d channels (1..%d supported)", C, GPU_NORM_MAX_C);
    for (int c = 0; c < C; c++)
        if (!(std[c] > 0.0f))
            gpu_fatal(__func__, "std[%d] = %g is not positive", c, (double)std[c]);
    gpu_launch_normalize_u8(gpu_of(be)->compute, out, in, B, C, HW, mean, std);
}

static void gpu_gap_forward(backend *be, float *out, const float *in, int B, int C, int HW)
{
    gpu_launch_gap_forward(gpu_of(be)->compute, out, in, B, C, HW);
}

static void gpu_gap_backward(backend *be, float *din, const float *dout, int B, int C, int HW)
{
    gpu_launch_gap_backward(gpu_of(be)->compute, din, dout, B, C, HW);
}

static void gpu_add(backend *be, float *out, const float *a, const float *b, size_t n)
{
    if (n)
        gpu_launch_add(gpu_of(be)->compute, out, a, b, n);
}

/* device to device on the compute stream: ordered like every other op */
static void gpu_copy(backend *be, float *dst, const float *src, size_t n)
{
    if (n)
        CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice,
                                   gpu_of(be)->compute));
}

static void gpu_softmax_xent(backend *be, float *dlogits, float *loss, int32_t *pred,
                             const float *logits, const int32_t *labels, int B, int K, float scale)
{
    gpu_launch_softmax_xent(gpu_of(be)->compute, dlogits, loss, pred, logits, labels, B, K, scale);
}

static void gpu_sgd_update(backend *be, float *w, float *v, const float *g, size_t n, float lr,
                           float momentum, float wd)
{
    gpu_launch_sgd(gpu_of(be)->compute, w, v, g, n, lr, momentum, wd);
}

/* ---------------------------------------------------------------- create/destroy */

static void gpu_destroy(backend *be)
{
    if (!be)
        return;
    gpu_ctx *g = gpu_of(be);
    if (g->compute)
        GPU_WAIT_STREAM(g->compute);
    if (g->copy)
        GPU_WAIT_STREAM(g->copy);
    gpu_activity_stop();
    gpu_staging_free(g);
    if (g->workspace)
        CUDA_CHECK(cudaFree(g->workspace));
    if (g->ta)
        CUDNN_CHECK(cudnnDestroyTensorDescriptor(g->ta));
    if (g->tb)
        CUDNN_CHECK(cudnnDestroyTensorDescriptor(g->tb));
    if (g->maxpool)
        CUDNN_CHECK(cudnnDestroyPoolingDescriptor(g->maxpool));
    if (g->relu)
        CUDNN_CHECK(cudnnDestroyActivationDescriptor(g->relu));
    if (g->dnn)
        CUDNN_CHECK(cudnnDestroy(g->dnn));
    if (g->blas)
        CUBLAS_CHECK(cublasDestroy(g->blas));
    if (g->copy)
        CUDA_CHECK(cudaStreamDestroy(g->copy));
    if (g->compute)
        CUDA_CHECK(cudaStreamDestroy(g->compute));
    free(g);
    free(be);
}

static const backend_ops gpu_ops = {
    .name = "cuda",
    .destroy = gpu_destroy,
    .alloc = gpu_alloc,
    .free = gpu_free,
    .upload = gpu_upload,
    .download = gpu_download,
    .synchronize = gpu_synchronize,
    .normalize_u8 = gpu_normalize_u8,
    .conv_plan = gpu_conv_plan,
    .conv_plan_free = gpu_conv_plan_free,
    .conv_forward = gpu_conv_forward,
    .conv_backward = gpu_conv_backward,
    .relu_forward = gpu_relu_forward,
    .relu_backward = gpu_relu_backward,
    .maxpool_forward = gpu_maxpool_forward,
    .maxpool_backward = gpu_maxpool_backward,
    .fc_forward = gpu_fc_forward,
    .fc_backward = gpu_fc_backward,
    .gap_forward = gpu_gap_forward,
    .gap_backward = gpu_gap_backward,
    .bn_forward_train = gpu_bn_forward_train,
    .bn_forward_infer = gpu_bn_forward_infer,
    .bn_backward = gpu_bn_backward,
    .add = gpu_add,
    .copy = gpu_copy,
    .softmax_xent = gpu_softmax_xent,
    .sgd_update = gpu_sgd_update,
    .host_pin = gpu_host_pin,
    .host_unpin = gpu_host_unpin,
    .stage_copy = gpu_stage_copy,
    .stage_done = gpu_stage_done,
    .stage_wait = gpu_stage_wait,
    .timeline_start = gpu_timeline_start,
    .timeline_take = gpu_timeline_take,
    .stage_release = gpu_stage_release,
    .busy_begin = gpu_busy_begin,
    .busy_end = gpu_busy_end,
    .busy_take = gpu_busy_take,
    .activity_start = gpu_activity_start,
    .activity_take = gpu_activity_take,
    .result_copy = gpu_result_copy,
    .result_done = gpu_result_done,
};

backend *backend_cuda_create(int device, errbuf *e)
{
    backend *be = xcalloc(1, sizeof *be);
    gpu_ctx *g = xcalloc(1, sizeof *g);
    be->ops = &gpu_ops;
    be->ctx = g;
    be->host_visible = 0;
    g->device = device;
    /* Block, do not spin, while waiting for the device: the loader's
     * workers need the CPU more than a sync needs microseconds. */
    if (gpu_soft_cuda(e, cudaSetDevice(device), "cudaSetDevice") ||
        gpu_soft_cuda(e, cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync),
                      "cudaSetDeviceFlags") ||
        gpu_soft_cuda(e, cudaStreamCreateWithFlags(&g->compute, cudaStreamNonBlocking),
                      "creating the compute stream") ||
        gpu_soft_cuda(e, cudaStreamCreateWithFlags(&g->copy, cudaStreamNonBlocking),
                      "creating the copy stream") ||
        gpu_soft_cudnn(e, cudnnCreate(&g->dnn), "cudnnCreate") ||
        gpu_soft_cudnn(e, cudnnSetStream(g->dnn, g->compute), "cudnnSetStream") ||
        gpu_soft_cublas(e, cublasCreate(&g->blas), "cublasCreate") ||
        gpu_soft_cublas(e, cublasSetStream(g->blas, g->compute), "cublasSetStream") ||
        gpu_soft_cudnn(e, cudnnCreateTensorDescriptor(&g->ta), "cudnnCreateTensorDescriptor") ||
        gpu_soft_cudnn(e, cudnnCreateTensorDescriptor(&g->tb), "cudnnCreateTensorDescriptor") ||
        gpu_soft_cudnn(e, cudnnCreatePoolingDescriptor(&g->maxpool),
                       "cudnnCreatePoolingDescriptor") ||
        gpu_soft_cudnn(e, cudnnCreateActivationDescriptor(&g->relu),
                       "cudnnCreateActivationDescriptor")) {
        gpu_destroy(be);
        return NULL;
    }
    CUDNN_CHECK(
        cudnnSetActivationDescriptor(g->relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    return be;
}

void *backend_cuda_stream(backend *be) { return gpu_of(be)->compute; }
