/* kernels.cu — the small kernels the GPU backend needs besides cuDNN and
 * cuBLAS: u8 -> float normalisation, softmax cross-entropy with its
 * gradient, the SGD-momentum update, global average pooling and the residual add.
 *
 * The arithmetic is nn/kernels.h's (shared with the CPU backend, tested
 * with gcc); these files only map threads to elements. One thread per
 * element (per sample for the loss), grid-stride loops, no shared memory:
 * tiny tensors, and the serial emulation (launch.h, tests/fakecuda/runtime/emu.h) stays exact.
 * Deliberately no fused or vectorised variants.
 */
#include <stdint.h>

#include "cuda/gpu_kernels.h"
#include "cuda/launch.h"
#include "nn/kernels.h"

struct norm_params {
    float mean[GPU_NORM_MAX_C];
    float inv_std[GPU_NORM_MAX_C];
};

static __global__ void normalize_u8_kernel(float *out, const uint8_t *in, size_t n, int C, int HW,
                                           norm_params p)
{
    KERNEL_LOOP(i, n)
    {
        int c = (int)((i / (size_t)HW) % (size_t)C);
        out[i] = k_normalize(in[i], p.mean[c], p.inv_std[c]);
    }
}

static __global__ void softmax_xent_kernel(float *dlogits, float *loss, int32_t *pred,
                                           const float *logits, const int32_t *labels, int B, int K,
                                           float scale)
{
    KERNEL_LOOP(b, (size_t)B)
    {
        size_t row = b * (size_t)K;
        loss[b] = k_softmax_xent_row(dlogits + row, pred + b, logits + row, labels[b], K, scale);
    }
}

static __global__ void sgd_kernel(float *w, float *v, const float *g, size_t n, float lr,
                                  float momentum, float wd)
{
    KERNEL_LOOP(i, n) { k_sgd(w + i, v + i, g[i], lr, momentum, wd); }
}

static __global__ void gap_forward_kernel(float *out, const float *in, size_t BC, int HW)
{
    KERNEL_LOOP(j, BC)
    {
        const float *p = in + j * (size_t)HW;
        float s = 0.0f;
        for (int k = 0; k < HW; k++)
            s += p[k];
        out[j] = s / (float)HW;
    }
}

static __global__ void gap_backward_kernel(float *din, const float *dout, size_t n, int HW)
{
    KERNEL_LOOP(i, n) { din[i] = dout[i / (size_t)HW] / (float)HW; }
}

static __global__ void add_kernel(float *out, const float *a, const float *b, size_t n)
{
    KERNEL_LOOP(i, n) { out[i] = k_add(a[i], b[i]); }
}

extern "C" void gpu_launch_add(cudaStream_t st, float *out, const float *a, const float *b,
                               size_t n)
{
    LAUNCH(add_kernel, kernel_blocks(n), KERNEL_THREADS, st, out, a, b, n);
}

extern "C" void gpu_launch_normalize_u8(cudaStream_t st, float *out, const uint8_t *in, int B,
                                        int C, int HW, const float *mean, const float *std)
{
    norm_params p = {};
    for (int c = 0; c < C && c < GPU_NORM_MAX_C; c++) {
        p.mean[c] = mean[c];
        p.inv_std[c] = 1.0f / std[c];
    }
    size_t n = (size_t)B * C * HW;
    LAUNCH(normalize_u8_kernel, kernel_blocks(n), KERNEL_THREADS, st, out, in, n, C, HW, p);
}

extern "C" void gpu_launch_softmax_xent(cudaStream_t st, float *dlogits, float *loss, int32_t *pred,
                                        const float *logits, const int32_t *labels, int B, int K,
                                        float scale)
{
    LAUNCH(softmax_xent_kernel, kernel_blocks((size_t)B), KERNEL_THREADS, st, dlogits, loss, pred,
           logits, labels, B, K, scale);
}

extern "C" void gpu_launch_sgd(cudaStream_t st, float *w, float *v, const float *g, size_t n,
                               float lr, float momentum, float wd)
{
    LAUNCH(sgd_kernel, kernel_blocks(n), KERNEL_THREADS, st, w, v, g, n, lr, momentum, wd);
}

extern "C" void gpu_launch_gap_forward(cudaStream_t st, float *out, const float *in, int B, int C,
                                       int HW)
{
    size_t bc = (size_t)B * C;
    LAUNCH(gap_forward_kernel, kernel_blocks(bc), KERNEL_THREADS, st, out, in, bc, HW);
}

extern "C" void gpu_launch_gap_backward(cudaStream_t st, float *din, const float *dout, int B,
                                        int C, int HW)
{
    size_t n = (size_t)B * C * HW;
    LAUNCH(gap_backward_kernel, kernel_blocks(n), KERNEL_THREADS, st, din, dout, n, HW);
}
