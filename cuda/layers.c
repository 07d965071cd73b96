/* layers.c — activation and pooling on cuDNN, fully connected on cuBLAS.
 *
 * Fully connected in cuBLAS's column-major terms. A row-major R x C matrix
 * is, to cuBLAS, a column-major C x R matrix with leading dimension C (its
 * transpose). So with in (B x M), w (N x M), out (B x N) all row-major:
 *
 *   forward  out^T (N x B) = w (N x M) . in^T (M x B)
 *            = gemm(T, N, m=N, n=B, k=M, A=w lda=M, B=in ldb=M, C=out ldc=N)
 *   dw       dw^T (M x N) = in^T (M x B) . dout (B x N)
 *            = gemm(N, T, m=M, n=N, k=B, A=in lda=M, B=dout ldb=N, C=dw ldc=M)
 *   din      din^T (M x B) = w^T (M x N) . dout^T (N x B)
 *            = gemm(N, N, m=M, n=B, k=N, A=w lda=M, B=dout ldb=N, C=din ldc=M)
 *
 * Bias add and bias gradient treat out as a B x N x 1 x 1 tensor, so cuDNN's
 * broadcasting add and its bias-gradient reduction serve both layer types.
 *
 * ReLU backward: cuDNN's activation backward takes x and y; relu's gradient
 * only asks "was the input positive", and out > 0 exactly when in > 0, so
 * the forward output serves as both (the contract keeps only the output).
 *
 * Max pooling takes its window, stride and padding from the maxpool_shape (the
 * descriptor is re-set per call) with CUDNN_POOLING_MAX_DETERMINISTIC; cuDNN
 * documents no tie order, so on exact ties inside a window its gradient
 * may go to another maximum than the CPU's first-in-row-major one (after a
 * relu a tied window is nearly always all zeros, whose gradient is zero).
 *
 * Batch norm is cuDNN's spatial mode (CUDNN_BATCHNORM_SPATIAL): the scale,
 * shift, mean and variance descriptor is cudnnDeriveBNTensorDescriptor's
 * 1 x C x 1 x 1, x is B x C x HW x 1. cuDNN's running variance uses the
 * unbiased batch variance (N / (N - 1)), as backend.h and the CPU op do, and
 * its exponentialAverageFactor is our momentum. Its saved "inverse
 * variance" is 1 / sqrt(var + eps), our save_invstd. Backward uses the
 * saved mean and invstd; backend.h's bn_backward has no eps, so cuDNN gets
 * BN_BWD_EPS, which it only needs when nothing is saved (not our case).
 * cuDNN also refuses eps below CUDNN_BN_MIN_EPSILON; ours is 1e-5.
 */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>

#include "cuda/internal.h"

static const float one = 1.0f, zero = 0.0f;

static void set4(cudnnTensorDescriptor_t t, int n, int c, int h, int w)
{
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
}

/* a flat vector of n elements as a 1 x 1 x 1 x n tensor */
static void set_flat(cudnnTensorDescriptor_t t, size_t n, const char *func)
{
    if (n == 0 || n > INT_MAX)
        gpu_fatal(func, "%zu elements (1..%d supported)", n, INT_MAX);
    set4(t, 1, 1, 1, (int)n);
}

void gpu_relu_forward(backend *be, float *out, const float *in, size_t n)
{
    gpu_ctx *g = gpu_of(be);
    set_flat(g->ta, n, __func__);
    CUDNN_CHECK(cudnnActivationForward(g->dnn, g->relu, &one, g->ta, in, &zero, g->ta, out));
}

void gpu_relu_backward(backend *be, float *din, const float *dout, const float *out, size_t n)
{
    gpu_ctx *g = gpu_of(be);
    set_flat(g->ta, n, __func__);
    CUDNN_CHECK(cudnnActivationBackward(g->dnn, g->relu, &one, g->ta, out, g->ta, dout, g->ta, out,
                                        &zero, g->ta, din));
}

static void maxpool_descs(gpu_ctx *g, const maxpool_shape *s, const char *func)
{
    CUDNN_CHECK(cudnnSetPooling2dDescriptor(g->maxpool, CUDNN_POOLING_MAX_DETERMINISTIC,
                                            CUDNN_NOT_PROPAGATE_NAN, s->k, s->k, s->pad, s->pad,
                                            s->stride, s->stride));
    set4(g->ta, s->B, s->C, s->H, s->W);
    int n, c, h, w;
    CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(g->maxpool, g->ta, &n, &c, &h, &w));
    if (n != s->B || c != s->C || h != s->OH || w != s->OW)
        gpu_fatal(func, "maxpool_shape says %dx%dx%dx%d out, cuDNN says %dx%dx%dx%d", s->B, s->C,
                  s->OH, s->OW, n, c, h, w);
    set4(g->tb, n, c, h, w);
}

void gpu_maxpool_forward(backend *be, float *out, const float *in, const maxpool_shape *s)
{
    gpu_ctx *g = gpu_of(be);
    maxpool_descs(g, s, __func__);
    CUDNN_CHECK(cudnnPoolingForward(g->dnn, g->maxpool, &one, g->ta, in, &zero, g->tb, out));
}

void gpu_maxpool_backward(backend *be, float *din, const float *dout, const float *out,
                          const float *in, const maxpool_shape *s)
{
    gpu_ctx *g = gpu_of(be);
    maxpool_descs(g, s, __func__);
    CUDNN_CHECK(cudnnPoolingBackward(g->dnn, g->maxpool, &one, g->tb, out, g->tb, dout, g->ta, in,
                                     &zero, g->ta, din));
}

void gpu_fc_forward(backend *be, float *out, const float *in, const float *w, const float *bias,
                    int B, int M, int N)
{
    gpu_ctx *g = gpu_of(be);
    if (B < 1 || M < 1 || N < 1)
        gpu_fatal(__func__, "bad size B=%d M=%d N=%d", B, M, N);
    CUBLAS_CHECK(
        cublasSgemm(g->blas, CUBLAS_OP_T, CUBLAS_OP_N, N, B, M, &one, w, M, in, M, &zero, out, N));
    set4(g->ta, 1, N, 1, 1);
    set4(g->tb, B, N, 1, 1);
    CUDNN_CHECK(cudnnAddTensor(g->dnn, &one, g->ta, bias, &one, g->tb, out));
}

void gpu_fc_backward(backend *be, float *din, float *dw, float *dbias, const float *dout,
                     const float *in, const float *w, int B, int M, int N)
{
    gpu_ctx *g = gpu_of(be);
    if (B < 1 || M < 1 || N < 1)
        gpu_fatal(__func__, "bad size B=%d M=%d N=%d", B, M, N);
    CUBLAS_CHECK(cublasSgemm(g->blas, CUBLAS_OP_N, CUBLAS_OP_T, M, N, B, &one, in, M, dout, N,
                             &zero, dw, M));
    if (din)
        CUBLAS_CHECK(cublasSgemm(g->blas, CUBLAS_OP_N, CUBLAS_OP_N, M, B, N, &one, w, M, dout, N,
                                 &zero, din, M));
    set4(g->ta, B, N, 1, 1);
    set4(g->tb, 1, N, 1, 1);
    CUDNN_CHECK(cudnnConvolutionBackwardBias(g->dnn, &one, g->ta, dout, &zero, g->tb, dbias));
}

/* ---------------------------------------------------------------- batch norm */

#define BN_BWD_EPS 1e-5

/* ta: x as B x C x HW x 1; tb: the derived 1 x C x 1 x 1 */
static void bn_descs(gpu_ctx *g, int B, int C, int HW, const char *func)
{
    if (B < 1 || C < 1 || HW < 1)
        gpu_fatal(func, "bad size B=%d C=%d HW=%d", B, C, HW);
    set4(g->ta, B, C, HW, 1);
    CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(g->tb, g->ta, CUDNN_BATCHNORM_SPATIAL));
}

void gpu_bn_forward_train(backend *be, float *y, float *save_mean, float *save_invstd,
                          float *run_mean, float *run_var, const float *x, const float *scale,
                          const float *shift, int B, int C, int HW, float momentum, float eps)
{
    gpu_ctx *g = gpu_of(be);
    bn_descs(g, B, C, HW, __func__);
    CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
        g->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, g->ta, x, g->ta, y, g->tb, scale, shift,
        (double)momentum, run_mean, run_var, (double)eps, save_mean, save_invstd));
}

void gpu_bn_forward_infer(backend *be, float *y, const float *x, const float *scale,
                          const float *shift, const float *run_mean, const float *run_var, int B,
                          int C, int HW, float eps)
{
    gpu_ctx *g = gpu_of(be);
    bn_descs(g, B, C, HW, __func__);
    CUDNN_CHECK(cudnnBatchNormalizationForwardInference(g->dnn, CUDNN_BATCHNORM_SPATIAL, &one,
                                                        &zero, g->ta, x, g->ta, y, g->tb, scale,
                                                        shift, run_mean, run_var, (double)eps));
}

void gpu_bn_backward(backend *be, float *dx, float *dscale, float *dshift, const float *dy,
                     const float *x, const float *scale, const float *save_mean,
                     const float *save_invstd, int B, int C, int HW)
{
    gpu_ctx *g = gpu_of(be);
    bn_descs(g, B, C, HW, __func__);
    /* cuDNN always writes dx: without a caller's dx it goes to scratch
     * (the workspace, grown once) */
    float *out = dx;
    if (!out) {
        size_t bytes = (size_t)B * C * HW * sizeof(float);
        gpu_workspace_reserve(g, bytes);
        out = g->workspace;
    }
    CUDNN_CHECK(cudnnBatchNormalizationBackward(
        g->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, g->ta, x, g->ta, dy, g->ta, out,
        g->tb, scale, dscale, dshift, BN_BWD_EPS, save_mean, save_invstd));
}
