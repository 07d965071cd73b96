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
 * Max pooling is 2x2 stride 2 with CUDNN_POOLING_MAX_DETERMINISTIC; cuDNN
 * documents no tie order, so on exact ties inside a window its gradient
 * may go to another maximum than the CPU's first-in-row-major one (after a
 * relu a tied window is nearly always all zeros, whose gradient is zero).
 */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>

#include "internal.h"

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

static void pool_descs(gpu_ctx *g, const pool_shape *s, const char *func)
{
    set4(g->ta, s->B, s->C, s->H, s->W);
    int n, c, h, w;
    CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(g->pool, g->ta, &n, &c, &h, &w));
    if (n != s->B || c != s->C || h != s->OH || w != s->OW)
        gpu_fatal(func, "pool_shape says %dx%dx%dx%d out, cuDNN says %dx%dx%dx%d", s->B, s->C,
                  s->OH, s->OW, n, c, h, w);
    set4(g->tb, n, c, h, w);
}

void gpu_maxpool_forward(backend *be, float *out, const float *in, const pool_shape *s)
{
    gpu_ctx *g = gpu_of(be);
    pool_descs(g, s, __func__);
    CUDNN_CHECK(cudnnPoolingForward(g->dnn, g->pool, &one, g->ta, in, &zero, g->tb, out));
}

void gpu_maxpool_backward(backend *be, float *din, const float *dout, const float *out,
                          const float *in, const pool_shape *s)
{
    gpu_ctx *g = gpu_of(be);
    pool_descs(g, s, __func__);
    CUDNN_CHECK(cudnnPoolingBackward(g->dnn, g->pool, &one, g->tb, out, g->tb, dout, g->ta, in,
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
