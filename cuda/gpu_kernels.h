/* gpu_kernels.h — launchers of the small kernels in kernels.cu, callable
 * from C. Each enqueues one kernel on `stream` and checks the launch; the
 * arithmetic is nn/kernels.h's. Pointers are device pointers.
 */
#ifndef TRAIN_GPU_KERNELS_H
#define TRAIN_GPU_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPU_NORM_MAX_C 16 /* channels normalize_u8 takes by value */

/* out (B x C x HW) = k_normalize(in, mean[c], 1/std[c]); mean, std: host, C <= GPU_NORM_MAX_C */
void gpu_launch_normalize_u8(cudaStream_t st, float *out, const uint8_t *in, int B, int C, int HW,
                             const float *mean, const float *std);
/* per sample: k_softmax_xent_row */
void gpu_launch_softmax_xent(cudaStream_t st, float *dlogits, float *loss, int32_t *pred,
                             const float *logits, const int32_t *labels, int B, int K, float scale);
/* k_sgd over n parameters */
void gpu_launch_sgd(cudaStream_t st, float *w, float *v, const float *g, size_t n, float lr,
                    float momentum, float wd);
/* out (B x C) = mean over HW; backward spreads dout / HW */
void gpu_launch_gap_forward(cudaStream_t st, float *out, const float *in, int B, int C, int HW);
void gpu_launch_gap_backward(cudaStream_t st, float *din, const float *dout, int B, int C, int HW);
/* out = k_add(a, b) over n elements; out may be a or b */
void gpu_launch_add(cudaStream_t st, float *out, const float *a, const float *b, size_t n);

#ifdef __cplusplus
}
#endif

#endif
