/* test_fake.c — the fake catches what it promises to catch (fake.h): each
 * test commits one kind of misuse against the fake's CUDA, cuBLAS or cuDNN
 * directly and checks the error status and the message. Plus the stream
 * model: lazy queues, event ordering, the legacy stream. If these pass,
 * "no violation" from the backend tests means something.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include <math.h>
#include <string.h>

#include "tests/fakecuda/runtime/fake.h"

static void setup(void)
{
    fake_reset();
    fake_set_quiet(1);
}

TestSuite(fake, .init = setup);

static void *dmalloc(size_t n)
{
    void *p = NULL;
    cr_assert_eq(cudaMalloc(&p, n), cudaSuccess);
    return p;
}

#define EXPECT_VIOLATION(substr)                                                                   \
    do {                                                                                           \
        cr_expect_gt(fake_violations(), 0, "no violation reported");                               \
        cr_expect(strstr(fake_last_violation(), substr) != NULL, "message '%s' lacks '%s'",        \
                  fake_last_violation(), substr);                                                  \
    } while (0)

Test(fake, host_pointer_where_device_memory_is_required)
{
    float host[16] = {0}, src[16] = {0};
    cr_expect_eq(cudaMemcpyAsync(host, src, sizeof src, cudaMemcpyHostToDevice, NULL),
                 cudaErrorInvalidValue);
    EXPECT_VIOLATION("not a device allocation");
    cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
    cr_expect_eq(cudaGetLastError(), cudaSuccess, "cudaGetLastError resets");
}

Test(fake, copy_of_the_wrong_kind)
{
    float *d = dmalloc(64), host[16];
    /* device source declared as host-to-device */
    cr_expect_eq(cudaMemcpyAsync(d, d, 64, cudaMemcpyHostToDevice, NULL), cudaErrorInvalidValue);
    EXPECT_VIOLATION("src is device allocation");
    cr_expect_eq(cudaMemcpy(d, host, 64, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    EXPECT_VIOLATION("dst is device allocation");
    cudaFree(d);
}

Test(fake, extent_past_the_end)
{
    char *d = dmalloc(100), host[200] = {0};
    cr_expect_eq(cudaMemcpyAsync(d + 50, host, 60, cudaMemcpyHostToDevice, NULL),
                 cudaErrorInvalidValue);
    EXPECT_VIOLATION("past the end");
    cr_expect_eq(cudaMemsetAsync(d, 0, 101, NULL), cudaErrorInvalidValue);
    cudaFree(d);
}

Test(fake, use_after_free_and_double_free)
{
    char *d = dmalloc(32), host[32];
    cr_assert_eq(cudaFree(d), cudaSuccess);
    cr_expect_eq(cudaMemcpy(host, d, 32, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    EXPECT_VIOLATION("use after cudaFree");
    cr_expect_eq(cudaFree(d), cudaErrorInvalidValue);
    char *e = dmalloc(32);
    cr_expect_eq(cudaFree(e + 4), cudaErrorInvalidValue, "freeing the middle of an allocation");
    cudaFree(e);
}

Test(fake, fresh_device_memory_reads_as_nan)
{
    float *d = dmalloc(4 * sizeof(float)), h[4];
    cr_assert_eq(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < 4; i++)
        cr_expect(isnan(h[i]), "uninitialised device memory must not look like data");
    cudaFree(d);
}

Test(fake, sgemm_leading_dimension_and_scalars)
{
    cublasHandle_t h;
    cr_assert_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    float *A = dmalloc(6 * 4), *B = dmalloc(6 * 4), *C = dmalloc(4 * 4);
    float one = 1.0f, zero = 0.0f;
    /* A stored 2x3 (m=2, k=3): lda 1 is too small */
    cr_expect_eq(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A, 1, B, 3, &zero, C, 2),
                 CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_VIOLATION("leading dimension too small");
    /* a leading dimension that makes B run past its allocation */
    cr_expect_eq(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A, 2, B, 5, &zero, C, 2),
                 CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_VIOLATION("past the end");
    /* alpha in device memory while the pointer mode is host */
    cr_expect_eq(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, A, A, 2, B, 3, &zero, C, 2),
                 CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_VIOLATION("must be host memory");
    float nan = NAN;
    cr_expect_eq(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A, 2, B, 3, &nan, C, 2),
                 CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_VIOLATION("not finite");
    cr_expect_eq(
        cublasSgemm(h, (cublasOperation_t)7, CUBLAS_OP_N, 2, 2, 3, &one, A, 2, B, 3, &zero, C, 2),
        CUBLAS_STATUS_INVALID_VALUE);
    cudaFree(A), cudaFree(B), cudaFree(C);
    cublasDestroy(h);
}

/* column-major: C (2x2) = A (2x3) . B (3x2), and beta 0 ignores C's NaN */
Test(fake, sgemm_computes_column_major_and_beta_zero_ignores_c)
{
    fake_set_quiet(0);
    cublasHandle_t h;
    cr_assert_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    float a[6] = {1, 4, 2, 5, 3, 6}; /* [[1 2 3], [4 5 6]] */
    float b[6] = {1, 0, 1, 0, 1, 1}; /* [[1 0], [0 1], [1 1]] */
    float *A = dmalloc(24), *B = dmalloc(24), *C = dmalloc(16), c[4];
    cudaMemcpy(A, a, 24, cudaMemcpyHostToDevice);
    cudaMemcpy(B, b, 24, cudaMemcpyHostToDevice);
    float one = 1.0f, zero = 0.0f, two = 2.0f;
    cr_assert_eq(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A, 2, B, 3, &zero, C, 2),
                 CUBLAS_STATUS_SUCCESS);
    cudaMemcpy(c, C, 16, cudaMemcpyDeviceToHost);
    cr_expect(c[0] == 4 && c[1] == 10 && c[2] == 5 && c[3] == 11, "C = %g %g %g %g", c[0], c[1],
              c[2], c[3]);
    /* beta 2: C = A.B + 2 C */
    cr_assert_eq(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A, 2, B, 3, &two, C, 2),
                 CUBLAS_STATUS_SUCCESS);
    cudaMemcpy(c, C, 16, cudaMemcpyDeviceToHost);
    cr_expect(c[0] == 12 && c[3] == 33);
    /* transposed A: op(A) = A^T where A is stored 3x2 */
    cr_assert_eq(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 3, &one, A, 3, B, 3, &zero, C, 2),
                 CUBLAS_STATUS_SUCCESS);
    cudaMemcpy(c, C, 16, cudaMemcpyDeviceToHost);
    /* A as 3x2 column-major: [[1 5], [4 3], [2 6]]; A^T B = [[3 6], [11 9]] */
    cr_expect(c[0] == 3 && c[1] == 11 && c[2] == 6 && c[3] == 9, "C = %g %g %g %g", c[0], c[1],
              c[2], c[3]);
    cr_expect_eq(fake_violations(), 0);
    cudaFree(A), cudaFree(B), cudaFree(C);
    cublasDestroy(h);
}

/* convolution set-up shared by the cuDNN misuse tests: x 1x1x4x4, w 1x1x3x3 */
typedef struct conv_env {
    cudnnHandle_t h;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t c;
    float *dx, *dw, *dy;
} conv_env;

static void conv_env_init(conv_env *e, cudnnConvolutionMode_t mode)
{
    cr_assert_eq(cudnnCreate(&e->h), CUDNN_STATUS_SUCCESS);
    cudnnCreateTensorDescriptor(&e->x);
    cudnnCreateTensorDescriptor(&e->y);
    cudnnCreateFilterDescriptor(&e->w);
    cudnnCreateConvolutionDescriptor(&e->c);
    cudnnSetTensor4dDescriptor(e->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 4, 4);
    cudnnSetTensor4dDescriptor(e->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 2, 2);
    cudnnSetFilter4dDescriptor(e->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 1, 1, 3, 3);
    cudnnSetConvolution2dDescriptor(e->c, 0, 0, 1, 1, 1, 1, mode, CUDNN_DATA_FLOAT);
    float x[16], w[9];
    for (int i = 0; i < 16; i++)
        x[i] = (float)i;
    for (int i = 0; i < 9; i++)
        w[i] = (float)(i == 0); /* picks the top-left tap, or the bottom-right when flipped */
    e->dx = dmalloc(sizeof x), e->dw = dmalloc(sizeof w), e->dy = dmalloc(16);
    cudaMemcpy(e->dx, x, sizeof x, cudaMemcpyHostToDevice);
    cudaMemcpy(e->dw, w, sizeof w, cudaMemcpyHostToDevice);
}

static void conv_env_free(conv_env *e)
{
    cudaFree(e->dx), cudaFree(e->dw), cudaFree(e->dy);
    cudnnDestroyTensorDescriptor(e->x);
    cudnnDestroyTensorDescriptor(e->y);
    cudnnDestroyFilterDescriptor(e->w);
    cudnnDestroyConvolutionDescriptor(e->c);
    cudnnDestroy(e->h);
}

Test(fake, conv_modes_read_through_the_real_descriptors)
{
    float one = 1.0f, zero = 0.0f, y[4];
    conv_env e;
    conv_env_init(&e, CUDNN_CROSS_CORRELATION);
    cr_assert_eq(cudnnConvolutionForward(e.h, &one, e.x, e.dx, e.w, e.dw, e.c,
                                         CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero,
                                         e.y, e.dy),
                 CUDNN_STATUS_SUCCESS);
    cudaMemcpy(y, e.dy, 16, cudaMemcpyDeviceToHost);
    cr_expect(y[0] == 0 && y[1] == 1 && y[2] == 4 && y[3] == 5, "cross-correlation: %g %g %g %g",
              y[0], y[1], y[2], y[3]);
    cudnnSetConvolution2dDescriptor(e.c, 0, 0, 1, 1, 1, 1, CUDNN_CONVOLUTION, CUDNN_DATA_FLOAT);
    cr_assert_eq(cudnnConvolutionForward(e.h, &one, e.x, e.dx, e.w, e.dw, e.c,
                                         CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero,
                                         e.y, e.dy),
                 CUDNN_STATUS_SUCCESS);
    cudaMemcpy(y, e.dy, 16, cudaMemcpyDeviceToHost);
    cr_expect(y[0] == 10 && y[1] == 11 && y[2] == 14 && y[3] == 15,
              "convolution (flipped): %g %g %g %g", y[0], y[1], y[2], y[3]);
    conv_env_free(&e);
}

Test(fake, conv_workspace_shape_and_algorithm_misuse)
{
    float one = 1.0f, zero = 0.0f;
    conv_env e;
    conv_env_init(&e, CUDNN_CROSS_CORRELATION);
    /* GEMM needs an im2col workspace; none given */
    cr_expect_eq(cudnnConvolutionForward(e.h, &one, e.x, e.dx, e.w, e.dw, e.c,
                                         CUDNN_CONVOLUTION_FWD_ALGO_GEMM, NULL, 0, &zero, e.y,
                                         e.dy),
                 CUDNN_STATUS_BAD_PARAM);
    EXPECT_VIOLATION("needs");
    char msg[512];
    cudnnGetLastErrorString(msg, sizeof msg);
    cr_expect(strstr(msg, "workspace") != NULL,
              "cudnnGetLastErrorString gives the fake's reason: %s", msg);
    /* a workspace size larger than the buffer passed */
    void *ws = dmalloc(16);
    cr_expect_eq(cudnnConvolutionForward(e.h, &one, e.x, e.dx, e.w, e.dw, e.c,
                                         CUDNN_CONVOLUTION_FWD_ALGO_GEMM, ws, 1 << 20, &zero, e.y,
                                         e.dy),
                 CUDNN_STATUS_BAD_PARAM);
    EXPECT_VIOLATION("past the end");
    /* an output descriptor that does not match the convolution */
    cudnnSetTensor4dDescriptor(e.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 3, 3);
    cr_expect_eq(cudnnConvolutionForward(e.h, &one, e.x, e.dx, e.w, e.dw, e.c,
                                         CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero,
                                         e.y, e.dy),
                 CUDNN_STATUS_BAD_PARAM);
    EXPECT_VIOLATION("shapes disagree");
    /* an algorithm the fake's table marks unsupported */
    cudnnSetTensor4dDescriptor(e.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 2, 2);
    cr_expect_eq(cudnnConvolutionForward(e.h, &one, e.x, e.dx, e.w, e.dw, e.c,
                                         CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, NULL, 0, &zero, e.y,
                                         e.dy),
                 CUDNN_STATUS_NOT_SUPPORTED);
    /* a host pointer for x */
    float hx[16];
    cr_expect_eq(cudnnConvolutionForward(e.h, &one, e.x, hx, e.w, e.dw, e.c,
                                         CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero,
                                         e.y, e.dy),
                 CUDNN_STATUS_BAD_PARAM);
    EXPECT_VIOLATION("x: host memory");
    cudaFree(ws);
    conv_env_free(&e);
}

Test(fake, pooling_and_activation_backward_check_their_pairs)
{
    cudnnHandle_t h;
    cudnnCreate(&h);
    cudnnTensorDescriptor_t x, y;
    cudnnPoolingDescriptor_t p;
    cudnnActivationDescriptor_t a;
    cudnnCreateTensorDescriptor(&x), cudnnCreateTensorDescriptor(&y);
    cudnnCreatePoolingDescriptor(&p), cudnnCreateActivationDescriptor(&a);
    cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 2, 2);
    cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 1, 1);
    cudnnSetPooling2dDescriptor(p, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, 2, 2, 0, 0, 2, 2);
    cudnnSetActivationDescriptor(a, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0);
    float hx[4] = {1, 3, 2, -1}, hy[1] = {2}; /* 2 is not the max of x */
    float *dx = dmalloc(16), *dy = dmalloc(4), *gy = dmalloc(4), *gx = dmalloc(16);
    cudaMemcpy(dx, hx, 16, cudaMemcpyHostToDevice);
    cudaMemcpy(dy, hy, 4, cudaMemcpyHostToDevice);
    cudaMemcpy(gy, hy, 4, cudaMemcpyHostToDevice);
    float one = 1.0f, zero = 0.0f;
    cr_assert_eq(cudnnPoolingBackward(h, p, &one, y, dy, y, gy, x, dx, &zero, x, gx),
                 CUDNN_STATUS_SUCCESS);
    cudaDeviceSynchronize();
    EXPECT_VIOLATION("not the maximum");
    /* relu backward: y must be relu(x) */
    cr_assert_eq(cudnnActivationBackward(h, a, &one, x, dx, x, dx, x, gx, &zero, x, gx),
                 CUDNN_STATUS_SUCCESS);
    cudaDeviceSynchronize();
    EXPECT_VIOLATION("is not relu");
    cudaFree(dx), cudaFree(dy), cudaFree(gy), cudaFree(gx);
    cudnnDestroyTensorDescriptor(x), cudnnDestroyTensorDescriptor(y);
    cudnnDestroyPoolingDescriptor(p), cudnnDestroyActivationDescriptor(a);
    cudnnDestroy(h);
}

/* batch norm: spatial mode with the derived 1 x C x 1 x 1 parameter
 * descriptor only; the running variance is the unbiased one */
Test(fake, batch_norm_descriptor_and_running_variance)
{
    cudnnHandle_t h;
    cudnnCreate(&h);
    cudnnTensorDescriptor_t x, p, bad;
    cudnnCreateTensorDescriptor(&x), cudnnCreateTensorDescriptor(&p),
        cudnnCreateTensorDescriptor(&bad);
    cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 1, 1, 1);
    cr_assert_eq(cudnnDeriveBNTensorDescriptor(p, x, CUDNN_BATCHNORM_SPATIAL),
                 CUDNN_STATUS_SUCCESS);
    cudnnSetTensor4dDescriptor(bad, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 1, 1, 1);
    float hx[2] = {1, 3}, one1[1] = {1}, zero1[1] = {0};
    float *dx = dmalloc(8), *dy = dmalloc(8), *sc = dmalloc(4), *sh = dmalloc(4), *rm = dmalloc(4),
          *rv = dmalloc(4), *sm = dmalloc(4), *si = dmalloc(4);
    cudaMemcpy(dx, hx, 8, cudaMemcpyHostToDevice);
    cudaMemcpy(sc, one1, 4, cudaMemcpyHostToDevice);
    cudaMemcpy(sh, zero1, 4, cudaMemcpyHostToDevice);
    cudaMemcpy(rm, zero1, 4, cudaMemcpyHostToDevice);
    cudaMemcpy(rv, zero1, 4, cudaMemcpyHostToDevice);
    float one = 1.0f, zero = 0.0f;
    cr_expect_eq(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, x,
                                                        dx, x, dy, bad, sc, sh, 1.0, rm, rv, 1e-5,
                                                        sm, si),
                 CUDNN_STATUS_BAD_PARAM);
    char msg[256];
    cudnnGetLastErrorString(msg, sizeof msg);
    cr_expect(strstr(msg, "spatial mode wants 1x1x1x1") != NULL, "%s", msg);
    cr_expect_eq(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_PER_ACTIVATION, &one,
                                                        &zero, x, dx, x, dy, p, sc, sh, 1.0, rm, rv,
                                                        1e-5, sm, si),
                 CUDNN_STATUS_BAD_PARAM);
    int refused = fake_violations();
    cr_expect_eq(refused, 2, "both misuses reported");
    cr_assert_eq(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, x,
                                                        dx, x, dy, p, sc, sh, 1.0, rm, rv, 0.0, sm,
                                                        si),
                 CUDNN_STATUS_SUCCESS);
    float y[2], m, v, inv;
    cudaMemcpy(y, dy, 8, cudaMemcpyDeviceToHost);
    cudaMemcpy(&m, rm, 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(&v, rv, 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(&inv, si, 4, cudaMemcpyDeviceToHost);
    cr_expect(y[0] == -1.0f && y[1] == 1.0f, "y %g %g", (double)y[0], (double)y[1]);
    cr_expect(m == 2.0f && inv == 1.0f, "mean %g, inverse std %g (biased variance 1)", (double)m,
              (double)inv);
    cr_expect_eq(v, 2.0f, "running variance %g: unbiased (N - 1 = 1)", (double)v);
    cr_expect_eq(fake_violations(), refused, "%s", fake_last_violation());
    cudaFree(dx), cudaFree(dy), cudaFree(sc), cudaFree(sh), cudaFree(rm), cudaFree(rv);
    cudaFree(sm), cudaFree(si);
    cudnnDestroyTensorDescriptor(x), cudnnDestroyTensorDescriptor(p),
        cudnnDestroyTensorDescriptor(bad);
    cudnnDestroy(h);
}

Test(fake, kernel_argument_must_be_device_memory)
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float host[4] = {0};
    float *d = dmalloc(16);
    /* the emulated launch checks pointer arguments like a device would fault */
    cr_expect_eq(emu_check_arg("k", 0, host), -1);
    EXPECT_VIOLATION("kernel argument 0 is host memory");
    cr_expect_eq(emu_check_arg("k", 1, d), 0);
    cr_expect_eq(emu_check_arg("k", 2, NULL), 0);
    cudaFree(d);
    cudaStreamDestroy(s);
}

Test(fake, streams_run_lazily_and_events_order_them)
{
    fake_set_quiet(0);
    cudaStream_t a, b;
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
    cudaEvent_t ev;
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    unsigned char *d = dmalloc(8), h[8] = {7, 7, 7, 7, 7, 7, 7, 7}, out[8];
    cr_assert_eq(fake_set_cost("h2d_gbps", 1e-6), 0);     /* 8 bytes: 8 ms on the clock */
    cr_assert_eq(cudaHostRegister(h, 8, 0), cudaSuccess); /* pageable would hold the host */
    cr_assert_eq(cudaMemcpyAsync(d, h, 8, cudaMemcpyHostToDevice, a), cudaSuccess);
    cr_expect_eq(fake_pending(a), 1, "nothing runs before a sync point");
    cudaEventRecord(ev, a);
    cr_expect_eq(cudaEventQuery(ev), cudaErrorNotReady, "the copy ends 8 ms after the host's now");
    cr_expect_eq(cudaGetLastError(), cudaErrorNotReady,
                 "NotReady is reported as the last error too");
    cr_expect_eq(fake_pending(a), 0, "the query let the stream progress");
    cr_expect_eq(cudaEventQuery(ev), cudaErrorNotReady, "still before the record on the clock");
    cr_assert_eq(cudaEventSynchronize(ev), cudaSuccess);
    cr_expect_eq(cudaEventQuery(ev), cudaSuccess, "the host's clock is past the record");
    /* b waits for a's next record before its memset */
    cudaMemsetAsync(d, 1, 8, a);
    cudaEventRecord(ev, a);
    cudaStreamWaitEvent(b, ev, 0);
    cudaMemsetAsync(d, 2, 4, b);
    cr_assert_eq(cudaMemcpyAsync(out, d, 8, cudaMemcpyDeviceToHost, b), cudaSuccess);
    cudaStreamSynchronize(b);
    cr_expect(out[0] == 2 && out[3] == 2 && out[4] == 1 && out[7] == 1,
              "a's memset ran before b's");
    cr_expect_eq(fake_violations(), 0);
    cudaHostUnregister(h);
    cudaFree(d);
    cudaEventDestroy(ev);
    cudaStreamDestroy(a), cudaStreamDestroy(b);
}

/* the emulated launch's entry (tests/fakecuda/runtime/emu.h is C++) */
cudaError_t emu_enqueue(cudaStream_t s, const char *kernel, void (*run)(void *),
                        void (*drop)(void *), void *job);
static void mark_ran(void *p) { ++*(int *)p; }
static void keep(void *p) { (void)p; }

Test(fake, eager_copies_run_at_once_and_compute_stays_lazy)
{
    fake_set_quiet(0);
    fake_set_eager_copies(1);
    cudaStream_t copy, comp;
    cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&comp, cudaStreamNonBlocking);
    cudaEvent_t copied, released;
    cudaEventCreateWithFlags(&copied, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&released, cudaEventDisableTiming);
    unsigned char *d = dmalloc(8), h1[8] = {1, 1, 1, 1, 1, 1, 1, 1},
                  h2[8] = {2, 2, 2, 2, 2, 2, 2, 2};
    cudaMemcpyAsync(d, h1, 8, cudaMemcpyHostToDevice, copy);
    cudaEventRecord(copied, copy);
    cr_expect_eq(fake_pending(copy), 0, "the copy and its record ran at once");
    cr_expect_eq(cudaEventQuery(copied), cudaSuccess);
    int ran = 0;
    cudaStreamWaitEvent(comp, copied, 0);
    emu_enqueue(comp, "reader", mark_ran, keep, &ran);
    cudaEventRecord(released, comp);
    cr_expect_eq(ran, 0, "a kernel waits for someone to wait for it");
    cr_expect_eq(fake_pending(comp), 2, "and so does the record behind it");
    /* the next copy into d, ordered after the reader: it must not run yet */
    cudaStreamWaitEvent(copy, released, 0);
    cudaMemcpyAsync(d, h2, 8, cudaMemcpyHostToDevice, copy);
    cr_expect_eq(fake_pending(copy), 2, "a copy ordered after lazy compute waits for it");
    cudaStreamSynchronize(copy);
    cr_expect_eq(ran, 1, "synchronising the copy ran the reader first");
    /* unordered, it would have overwritten d under the reader */
    unsigned char out[8];
    cudaMemcpyAsync(out, d, 8, cudaMemcpyDeviceToHost, copy);
    cudaStreamSynchronize(copy);
    cr_expect_eq(out[0], 2);
    cr_expect_eq(fake_violations(), 0);
    cudaFree(d);
    cudaEventDestroy(copied), cudaEventDestroy(released);
    cudaStreamDestroy(copy), cudaStreamDestroy(comp);
}

Test(fake, legacy_stream_does_not_wait_for_non_blocking_streams)
{
    cudaStream_t nb, blk;
    cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking);
    cudaStreamCreate(&blk);
    unsigned char *d = dmalloc(4), out[4];
    cudaMemsetAsync(d, 0, 4, NULL);
    cudaMemsetAsync(d, 5, 4, nb);
    cudaMemcpy(out, d, 4, cudaMemcpyDeviceToHost); /* legacy: ignores nb */
    cr_expect_eq(out[0], 0, "a non-blocking stream's work is not awaited by cudaMemcpy");
    cudaMemsetAsync(d, 9, 4, blk);
    cudaMemcpy(out, d, 4, cudaMemcpyDeviceToHost); /* legacy: awaits blk (and runs nb? no) */
    cr_expect_eq(out[0], 9, "a blocking stream's work is awaited by cudaMemcpy");
    cudaStreamSynchronize(nb);
    cudaFree(d);
    cudaStreamDestroy(nb), cudaStreamDestroy(blk);
}

Test(fake, host_source_modified_before_its_copy_ran)
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    unsigned char *d = dmalloc(64), h[64] = {1};
    cudaHostRegister(h, sizeof h, cudaHostRegisterDefault);
    cudaMemcpyAsync(d, h, 64, cudaMemcpyHostToDevice, s);
    h[10] = 99; /* the slot reused too early */
    cudaStreamSynchronize(s);
    EXPECT_VIOLATION("modified after the copy was enqueued");
    /* unregistering with a copy still queued */
    cudaMemcpyAsync(d, h, 64, cudaMemcpyHostToDevice, s);
    cr_expect_eq(cudaHostUnregister(h), cudaSuccess);
    EXPECT_VIOLATION("still read by a queued cudaMemcpyAsync");
    cudaStreamSynchronize(s);
    cudaFree(d);
    cudaStreamDestroy(s);
}

Test(fake, host_register_rules)
{
    char buf[256];
    cr_expect_eq(cudaHostRegister(buf, 128, 0), cudaSuccess);
    cr_expect_eq(cudaHostRegister(buf + 64, 128, 0), cudaErrorHostMemoryAlreadyRegistered);
    /* inside a range, not its start: what an H100 answered (tools/pin_probe.cu) */
    cr_expect_eq(cudaHostUnregister(buf + 1), cudaErrorInvalidValue);
    cr_expect_eq(cudaHostUnregister(buf + 200), cudaErrorHostMemoryNotRegistered);
    cr_expect_eq(cudaHostUnregister(buf), cudaSuccess);
    void *d = dmalloc(16);
    cr_expect_eq(cudaHostRegister(d, 16, 0), cudaErrorInvalidValue);
    cudaFree(d);
}

Test(fake, event_timing_rules)
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaEvent_t a, b, n;
    cudaEventCreate(&a), cudaEventCreate(&b), cudaEventCreateWithFlags(&n, cudaEventDisableTiming);
    float ms = -1;
    void *d = dmalloc(4);
    cudaEventRecord(a, s);
    cudaMemsetAsync(d, 0, 4, s);
    cudaEventRecord(b, s);
    cr_expect_eq(cudaEventElapsedTime(&ms, a, b), cudaErrorNotReady, "not run yet");
    cudaEventSynchronize(b);
    cr_expect_eq(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
    cr_expect_gt(ms, 0.0f);
    cudaEventRecord(n, s);
    cudaStreamSynchronize(s);
    cr_expect_eq(cudaEventElapsedTime(&ms, a, n), cudaErrorInvalidResourceHandle);
    EXPECT_VIOLATION("cudaEventDisableTiming");
    cudaEventDestroy(a), cudaEventDestroy(b), cudaEventDestroy(n);
    cudaStreamDestroy(s);
    cudaFree(d);
}

Test(fake, reset_reports_and_clears_leaks)
{
    void *d = dmalloc(8);
    (void)d;
    cudaStream_t s;
    cudaStreamCreate(&s);
    cr_expect_eq(fake_live_allocations(), 1);
    cr_expect_eq(fake_live_objects(), 1);
    fake_reset();
    cr_expect_eq(fake_live_allocations(), 0);
    cr_expect_eq(fake_live_objects(), 0);
}

Test(fake, absent_driver_fails_every_call)
{
    fake_set_devices(0, cudaErrorInsufficientDriver, 0);
    void *p = NULL;
    int n = -1, v = -1;
    cr_expect_eq(cudaMalloc(&p, 16), cudaErrorInsufficientDriver);
    cr_expect_eq(cudaGetDeviceCount(&n), cudaErrorInsufficientDriver);
    cr_expect_eq(cudaDriverGetVersion(&v), cudaSuccess);
    cr_expect_eq(v, 0);
    cudnnHandle_t h;
    cr_expect_neq(cudnnCreate(&h), CUDNN_STATUS_SUCCESS);
}
