/* internal.h — the GPU backend's context, shared by its files:
 * backend.c (create/destroy, memory, small ops), conv.c (convolution
 * plans), layers.c (pooling, activation, fully connected) and staging.c
 * (pinning, copy stream, events, busy timing). Not for use outside cuda/.
 */
#ifndef TRAIN_CUDA_INTERNAL_H
#define TRAIN_CUDA_INTERNAL_H

#include "cuda/check.h"
#include "nn/backend.h"

#define BUSY_RING 64 /* begin/end event pairs in flight before harvesting */
#define PIN_MAX 16   /* host ranges registered at once */

typedef struct gpu_ctx {
    int device;
    /* both created non-blocking: no implicit sync with the legacy stream */
    cudaStream_t compute; /* every op; the cuDNN and cuBLAS handles are bound to it */
    cudaStream_t copy;    /* stage_copy only */
    cudnnHandle_t dnn;
    cublasHandle_t blas;

    /* scratch descriptors re-set by each non-conv op (cuDNN reads them
     * during the call only, so one set serves every op in turn) */
    cudnnTensorDescriptor_t ta, tb;
    cudnnPoolingDescriptor_t maxpool;
    cudnnActivationDescriptor_t relu;

    /* one workspace for all convolutions: ops run in order on one stream */
    void *workspace;
    size_t workspace_bytes;

    /* staging: events created on first use of a buffer */
    cudaEvent_t copied[BACKEND_STAGE_MAX], released[BACKEND_STAGE_MAX];
    unsigned char copy_recorded[BACKEND_STAGE_MAX], release_recorded[BACKEND_STAGE_MAX];

    /* busy timing: a ring of (begin, end) event pairs */
    cudaEvent_t busy_ev[BUSY_RING][2];
    int busy_head, busy_count, busy_open;
    double busy_acc; /* seconds harvested since the last busy_take */

    void *pinned[PIN_MAX]; /* host_pin'ed ranges, unregistered at destroy */

    /* results read back late: an event per slot, after its copy */
    cudaEvent_t result_ev[BACKEND_RESULT_MAX];
    unsigned char result_recorded[BACKEND_RESULT_MAX];

    /* --trace: the device's spans (timeline.c) */
    int tl_on;
    cudaEvent_t tl_ref; /* recorded and waited for at timeline_start ... */
    double tl_ref_host; /* ... when now_sec() read this */
    cudaEvent_t tl_copy[BUSY_RING][2];
    int tl_head, tl_count;
    backend_span *tl_spans; /* harvested, not yet taken */
    size_t tl_n, tl_cap;
} gpu_ctx;

static inline gpu_ctx *gpu_of(backend *be) { return (gpu_ctx *)be->ctx; }

/* timeline.c */
void gpu_timeline_start(backend *be);
size_t gpu_timeline_take(backend *be, backend_span *out, size_t max);
/* around a staging copy on the copy stream, when the timeline is on */
void gpu_timeline_copy_begin(gpu_ctx *g);
void gpu_timeline_copy_end(gpu_ctx *g);
/* a busy bracket (begin, end) was harvested: add it as a compute span */
void gpu_timeline_compute(gpu_ctx *g, cudaEvent_t begin, float ms);
void gpu_timeline_free(gpu_ctx *g);

/* activity.c: CUPTI's activity records (busy, copy busy, overlap; the
 * trace's device spans) */
int gpu_activity_start(backend *be, char *why, size_t len);
int gpu_activity_take(backend *be, double t0, double t1, backend_activity *out);
int gpu_activity_on(void);
void gpu_activity_stop(void);
void gpu_activity_timeline_start(void);
size_t gpu_activity_timeline_take(backend_span *out, size_t max);

/* conv.c */
void *gpu_conv_plan(backend *be, const conv_shape *s);
void gpu_conv_plan_free(backend *be, void *plan);
/* "conv 3x8x8 -> 4 3x3 (batch 2): forward IMPLICIT_PRECOMP_GEMM (FMA), ..."
 * — the algorithms and math the plan chose; gpu_conv_plan prints it on
 * stderr when it makes the plan */
void gpu_conv_plan_describe(const void *plan, char *buf, size_t len);
void gpu_conv_forward(backend *be, void *plan, float *out, const float *in, const float *w,
                      const float *bias, const conv_shape *s);
void gpu_conv_backward(backend *be, void *plan, float *din, float *dw, float *dbias,
                       const float *dout, const float *in, const float *w, const conv_shape *s);
/* grow the shared workspace to at least `bytes` (synchronises the compute
 * stream before freeing the old one) */
void gpu_workspace_reserve(gpu_ctx *g, size_t bytes);

/* layers.c */
void gpu_relu_forward(backend *be, float *out, const float *in, size_t n);
void gpu_relu_backward(backend *be, float *din, const float *dout, const float *out, size_t n);
void gpu_maxpool_forward(backend *be, float *out, const float *in, const maxpool_shape *s);
void gpu_maxpool_backward(backend *be, float *din, const float *dout, const float *out,
                          const float *in, const maxpool_shape *s);
void gpu_fc_forward(backend *be, float *out, const float *in, const float *w, const float *bias,
                    int B, int M, int N);
void gpu_fc_backward(backend *be, float *din, float *dw, float *dbias, const float *dout,
                     const float *in, const float *w, int B, int M, int N);
void gpu_bn_forward_train(backend *be, float *y, float *save_mean, float *save_invstd,
                          float *run_mean, float *run_var, const float *x, const float *scale,
                          const float *shift, int B, int C, int HW, float momentum, float eps);
void gpu_bn_forward_infer(backend *be, float *y, const float *x, const float *scale,
                          const float *shift, const float *run_mean, const float *run_var, int B,
                          int C, int HW, float eps);
void gpu_bn_backward(backend *be, float *dx, float *dscale, float *dshift, const float *dy,
                     const float *x, const float *scale, const float *save_mean,
                     const float *save_invstd, int B, int C, int HW);

/* staging.c */
int gpu_host_pin(backend *be, void *p, size_t bytes, errbuf *e);
void gpu_host_unpin(backend *be, void *p);
void gpu_stage_copy(backend *be, int b, void *dst, const void *src, size_t bytes);
int gpu_stage_done(backend *be, int b, int wait);
void gpu_stage_wait(backend *be, int b);
void gpu_stage_release(backend *be, int b);
void gpu_busy_begin(backend *be);
void gpu_busy_end(backend *be);
double gpu_busy_take(backend *be);
void gpu_result_copy(backend *be, int r, void *dst, const void *src, size_t bytes);
int gpu_result_done(backend *be, int r, int wait);
void gpu_staging_free(gpu_ctx *g); /* events and remaining registrations */

/* cublas_dl.c (real CUDA builds only; the fake defines cuBLAS itself):
 * the library it opens, and whether the first cuBLAS call has opened it */
#define GPU_CUBLAS_STR2(x) #x
#define GPU_CUBLAS_STR(x) GPU_CUBLAS_STR2(x)
#define GPU_CUBLAS_SONAME "libcublas.so." GPU_CUBLAS_STR(CUBLAS_VER_MAJOR)
int gpu_cublas_loaded(void);

/* A contract violation by the caller (bad shape, size beyond int): print
 * and exit 1 like a failed CUDA call. */
void gpu_fatal(const char *func, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

#endif
