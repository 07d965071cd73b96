/* kernels.h — element-wise arithmetic shared by the CPU and GPU backends.
 *
 * Each function computes one element (or one row) of an operation. The CPU
 * backend calls them in loops; the CUDA kernels in cuda/ call them once per
 * thread. They compile as C11 with gcc and as CUDA C++ with nvcc (KERNEL_FN
 * becomes __host__ __device__ there), so the arithmetic the GPU runs is the
 * arithmetic the CPU tests check. Keep them free of libc beyond <math.h>
 * functions that exist on the device (expf, logf, fmaxf).
 */
#ifndef TRAIN_KERNELS_H
#define TRAIN_KERNELS_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define KERNEL_FN static inline __host__ __device__
#else
#define KERNEL_FN static inline
#endif

/* (v / 255 - mean) / std, with the reciprocal precomputed by the caller */
KERNEL_FN float k_normalize(uint8_t v, float mean, float inv_std)
{
    return ((float)v * (1.0f / 255.0f) - mean) * inv_std;
}

KERNEL_FN float k_relu(float x) { return x > 0.0f ? x : 0.0f; }

/* gradient through relu, given the forward output */
KERNEL_FN float k_relu_grad(float dout, float out) { return out > 0.0f ? dout : 0.0f; }

/* one parameter of SGD with momentum and L2 weight decay */
KERNEL_FN void k_sgd(float *w, float *v, float g, float lr, float momentum, float wd)
{
    float gd = g + wd * *w;
    float vn = momentum * *v + gd;
    *v = vn;
    *w = *w - lr * vn;
}

/* ---- element-wise add (backend.h's add; out may alias a or b) */
KERNEL_FN float k_add(float a, float b) { return a + b; }

/* ---- batch normalisation (backend.h's bn_*), per element of channel c */
KERNEL_FN float k_bn_apply(float x, float mean, float invstd, float scale, float shift)
{
    return (x - mean) * invstd * scale + shift;
}

/* 1 / sqrt(var + eps) */
KERNEL_FN float k_bn_invstd(float var, float eps) { return 1.0f / sqrtf(var + eps); }

/* a running statistic after one batch: (1 - momentum) r + momentum stat */
KERNEL_FN float k_bn_running(float r, float stat, float momentum)
{
    return (1.0f - momentum) * r + momentum * stat;
}

/* dx of one element in training mode, given the channel's sums over its N
 * elements: sum_dy = sum(dy), sum_dyxh = sum(dy * xhat), and
 * xhat = (x - mean) * invstd:
 *   dx = scale * invstd * (dy - sum_dy / N - xhat * sum_dyxh / N) */
KERNEL_FN float k_bn_grad(float dy, float xhat, float scale_invstd, float mean_dy, float mean_dyxh)
{
    return scale_invstd * (dy - mean_dy - xhat * mean_dyxh);
}

/* *pred of a sample whose label is outside 0..K-1 (k_softmax_xent_row) */
#define K_BAD_LABEL (-2147483647 - 1)

/* Softmax cross-entropy of one sample with K logits. Writes the row of
 * dlogits ((p - onehot) * scale), the argmax to *pred, returns the loss.
 * A label outside 0..K-1 reads nothing at it: the row of dlogits is zero
 * (no gradient), *pred is K_BAD_LABEL and the label itself is returned
 * (as a float, exact below 2^24) in place of the loss, so the caller can
 * name it. */
KERNEL_FN float k_softmax_xent_row(float *dlogits, int32_t *pred, const float *logits,
                                   int32_t label, int K, float scale)
{
    if (label < 0 || label >= K) {
        for (int k = 0; k < K; k++)
            dlogits[k] = 0.0f;
        *pred = K_BAD_LABEL;
        return (float)label;
    }
    float mx = logits[0];
    int32_t arg = 0;
    for (int k = 1; k < K; k++)
        if (logits[k] > mx) {
            mx = logits[k];
            arg = k;
        }
    float sum = 0.0f;
    for (int k = 0; k < K; k++)
        sum += expf(logits[k] - mx);
    float inv = 1.0f / sum;
    for (int k = 0; k < K; k++) {
        float p = expf(logits[k] - mx) * inv;
        dlogits[k] = (p - (k == label ? 1.0f : 0.0f)) * scale;
    }
    *pred = arg;
    /* K >= 1: sum >= expf(0) = 1 (the largest logit's term) */
    // cppcheck-suppress invalidFunctionArg
    return logf(sum) - (logits[label] - mx);
}

#endif
