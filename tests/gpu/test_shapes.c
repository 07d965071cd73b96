/* test_shapes.c — the shape arithmetic of nn/backend.h (conv_shape_init,
 * maxpool_shape_init) and the byte sizes the backend allocates agree with the
 * real cuDNN's descriptor functions, over a grid of sizes. These run
 * without a GPU, in both suites.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <cudnn.h>

#include "nn/backend.h"

Test(gpu_shapes, conv_output_size_matches_cudnn)
{
    cudnnTensorDescriptor_t x;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t c;
    cr_assert_eq(cudnnCreateTensorDescriptor(&x), CUDNN_STATUS_SUCCESS);
    cr_assert_eq(cudnnCreateFilterDescriptor(&w), CUDNN_STATUS_SUCCESS);
    cr_assert_eq(cudnnCreateConvolutionDescriptor(&c), CUDNN_STATUS_SUCCESS);
    int checked = 0;
    for (int H = 1; H <= 13; H += 3)
        for (int W = 2; W <= 14; W += 4)
            for (int R = 1; R <= 5; R += 2)
                for (int S = 1; S <= 5; S += 2)
                    for (int stride = 1; stride <= 3; stride++)
                        for (int pad = 0; pad <= 2; pad++) {
                            conv_shape s;
                            int ours = conv_shape_init(&s, 2, 3, H, W, 4, R, S, stride, pad);
                            cr_assert_eq(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW,
                                                                    CUDNN_DATA_FLOAT, 2, 3, H, W),
                                         CUDNN_STATUS_SUCCESS);
                            cr_assert_eq(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT,
                                                                    CUDNN_TENSOR_NCHW, 4, 3, R, S),
                                         CUDNN_STATUS_SUCCESS);
                            cr_assert_eq(cudnnSetConvolution2dDescriptor(
                                             c, pad, pad, stride, stride, 1, 1,
                                             CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                                         CUDNN_STATUS_SUCCESS);
                            int n, k, oh, ow;
                            cudnnStatus_t st =
                                cudnnGetConvolution2dForwardOutputDim(c, x, w, &n, &k, &oh, &ow);
                            if (ours != 0) {
                                /* we call it empty: cuDNN must refuse or agree it is empty */
                                cr_expect(st != CUDNN_STATUS_SUCCESS || oh <= 0 || ow <= 0,
                                          "H%d W%d R%d S%d s%d p%d: we say empty, cuDNN %dx%d", H,
                                          W, R, S, stride, pad, oh, ow);
                                continue;
                            }
                            cr_assert_eq(st, CUDNN_STATUS_SUCCESS);
                            cr_expect(n == 2 && k == 4 && oh == s.OH && ow == s.OW,
                                      "H%d W%d R%d S%d s%d p%d: ours %dx%d, cuDNN %dx%d", H, W, R,
                                      S, stride, pad, s.OH, s.OW, oh, ow);
                            checked++;
                        }
    cr_assert_gt(checked, 500);
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(c);
}

Test(gpu_shapes, pool_output_size_matches_cudnn)
{
    cudnnTensorDescriptor_t x;
    cudnnPoolingDescriptor_t p;
    cr_assert_eq(cudnnCreateTensorDescriptor(&x), CUDNN_STATUS_SUCCESS);
    cr_assert_eq(cudnnCreatePoolingDescriptor(&p), CUDNN_STATUS_SUCCESS);
    cr_assert_eq(cudnnSetPooling2dDescriptor(p, CUDNN_POOLING_MAX_DETERMINISTIC,
                                             CUDNN_NOT_PROPAGATE_NAN, 2, 2, 0, 0, 2, 2),
                 CUDNN_STATUS_SUCCESS);
    for (int H = 2; H <= 30; H++)
        for (int W = 2; W <= 30; W += 3) {
            maxpool_shape s;
            cr_assert_eq(maxpool_shape_init(&s, 3, 5, H, W), 0);
            cr_assert_eq(
                cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 3, 5, H, W),
                CUDNN_STATUS_SUCCESS);
            int n, c, oh, ow;
            cr_assert_eq(cudnnGetPooling2dForwardOutputDim(p, x, &n, &c, &oh, &ow),
                         CUDNN_STATUS_SUCCESS);
            cr_expect(n == 3 && c == 5 && oh == s.OH && ow == s.OW,
                      "%dx%d: ours %dx%d, cuDNN %dx%d", H, W, s.OH, s.OW, oh, ow);
        }
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyPoolingDescriptor(p);
}

Test(gpu_shapes, tensor_bytes_match_cudnn)
{
    cudnnTensorDescriptor_t x;
    cr_assert_eq(cudnnCreateTensorDescriptor(&x), CUDNN_STATUS_SUCCESS);
    int dims[][4] = {
        {1, 1, 1, 1}, {64, 1, 28, 28}, {64, 20, 24, 24}, {100, 3, 64, 64}, {1, 1, 1, 737280}};
    for (size_t i = 0; i < sizeof dims / sizeof *dims; i++) {
        int *d = dims[i];
        cr_assert_eq(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d[0], d[1],
                                                d[2], d[3]),
                     CUDNN_STATUS_SUCCESS);
        size_t bytes = 0;
        cr_assert_eq(cudnnGetTensorSizeInBytes(x, &bytes), CUDNN_STATUS_SUCCESS);
        cr_expect_eq(bytes, (size_t)d[0] * d[1] * d[2] * d[3] * sizeof(float), "%dx%dx%dx%d", d[0],
                     d[1], d[2], d[3]);
    }
    cudnnDestroyTensorDescriptor(x);
}
