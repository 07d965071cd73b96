/* hostref.h — straightforward host loops for every op of backend.h: an
 * independent reference for the GPU op tests (tests/gpu/test_ops.c) and
 * the CPU convolution tests (tests/test_nn_ops.c), next to the CPU backend
 * twin (nn/twin.h) the self-test and test_twin.c compare with.
 *
 * Written for obviousness, not speed: direct loops in the contract's own
 * terms, double accumulation, no im2col, nothing shared with nn/kernels.h
 * or with the CPU backend, so agreement means something. All pointers are
 * host pointers; layouts as in backend.h.
 */
#ifndef TRAIN_HOSTREF_H
#define TRAIN_HOSTREF_H

#include <stddef.h>
#include <stdint.h>

#include "nn/backend.h"

void href_normalize_u8(float *out, const uint8_t *in, int B, int C, int HW, const float *mean,
                       const float *std);
void href_conv_forward(float *out, const float *in, const float *w, const float *bias,
                       const conv_shape *s);
void href_conv_backward(float *din, float *dw, float *dbias, const float *dout, const float *in,
                        const float *w, const conv_shape *s);
void href_relu_forward(float *out, const float *in, size_t n);
void href_relu_backward(float *din, const float *dout, const float *out, size_t n);
void href_maxpool_forward(float *out, const float *in, const maxpool_shape *s);
void href_maxpool_backward(float *din, const float *dout, const float *in, const maxpool_shape *s);
void href_fc_forward(float *out, const float *in, const float *w, const float *bias, int B, int M,
                     int N);
void href_fc_backward(float *din, float *dw, float *dbias, const float *dout, const float *in,
                      const float *w, int B, int M, int N);
void href_gap_forward(float *out, const float *in, int B, int C, int HW);
void href_gap_backward(float *din, const float *dout, int B, int C, int HW);
void href_softmax_xent(float *dlogits, float *loss, int32_t *pred, const float *logits,
                       const int32_t *labels, int B, int K, float scale);
void href_sgd(float *w, float *v, const float *g, size_t n, float lr, float momentum, float wd);

#endif
