/* backend.h — the one interface the CPU and GPU backends implement.
 *
 * A backend is a table of operations plus an opaque context (ggml's shape,
 * sized for our two backends). Every pointer an operation takes is a
 * *device* pointer of that backend — host memory for the CPU backend, CUDA
 * device memory for the GPU backend — unless its comment says "host".
 * Operations are enqueued in order on the backend's compute stream; only
 * `download` and `synchronize` wait for them. Layouts are NCHW, fp32,
 * contiguous. Argument order follows llm.c: outputs first, then inputs,
 * then parameters, then dimensions.
 *
 * Errors inside operations (a failed CUDA call, exhausted memory) are not
 * recoverable mid-step: the backend prints the failing call with file:line
 * and exits with status 1.
 *
 * The element-wise arithmetic both backends share lives in nn/kernels.h.
 */
#ifndef TRAIN_BACKEND_H
#define TRAIN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "../common/util.h"

typedef struct backend backend;

/* 2-D convolution with bias, cross-correlation as in every DL framework. */
typedef struct conv_shape {
    int B;          /* batch */
    int C, H, W;    /* input channels and size */
    int K, R, S;    /* output channels, kernel height and width */
    int stride, pad;
    int OH, OW;     /* output size: (H + 2 pad - R) / stride + 1, same for W */
} conv_shape;

/* 2x2 max pooling with stride 2; OH = H / 2, OW = W / 2 (floor). */
typedef struct pool_shape {
    int B, C, H, W;
    int OH, OW;
} pool_shape;

/* Fill OH/OW; returns -1 when the output would be empty. */
int conv_shape_init(conv_shape *s, int B, int C, int H, int W, int K, int R, int S, int stride, int pad);
int pool_shape_init(pool_shape *s, int B, int C, int H, int W);

typedef struct backend_ops {
    const char *name; /* "cpu", "cuda" */
    void (*destroy)(backend *be);

    /* ---- memory */
    void *(*alloc)(backend *be, size_t bytes); /* zero-filled device memory */
    void (*free)(backend *be, void *p);
    /* synchronous copies; src of upload and dst of download are host */
    void (*upload)(backend *be, void *dst, const void *src, size_t bytes);
    void (*download)(backend *be, void *dst, const void *src, size_t bytes);
    void (*synchronize)(backend *be);

    /* ---- input: out = (in / 255 - mean[c]) / std[c]
     * in: B x C x HW u8, out: B x C x HW; mean, std: host arrays of C */
    void (*normalize_u8)(backend *be, float *out, const uint8_t *in, int B, int C, int HW,
                         const float *mean, const float *std);

    /* ---- convolution. A plan holds what a backend wants to decide once per
     * shape (algorithms, workspace, scratch); conv_plan may return NULL. */
    void *(*conv_plan)(backend *be, const conv_shape *s);
    void (*conv_plan_free)(backend *be, void *plan);
    /* out: B x K x OH x OW; in: B x C x H x W; w: K x C x R x S; bias: K */
    void (*conv_forward)(backend *be, void *plan, float *out, const float *in, const float *w,
                         const float *bias, const conv_shape *s);
    /* din (may be NULL: nothing below needs it), dw and dbias are
     * overwritten, not accumulated */
    void (*conv_backward)(backend *be, void *plan, float *din, float *dw, float *dbias,
                          const float *dout, const float *in, const float *w, const conv_shape *s);

    /* ---- activation, n elements; relu_backward uses the forward output */
    void (*relu_forward)(backend *be, float *out, const float *in, size_t n);
    void (*relu_backward)(backend *be, float *din, const float *dout, const float *out, size_t n);

    /* ---- 2x2/2 max pooling; backward routes each gradient to the window's
     * maximum (the first one in row-major order on ties) */
    void (*maxpool_forward)(backend *be, float *out, const float *in, const pool_shape *s);
    void (*maxpool_backward)(backend *be, float *din, const float *dout, const float *out,
                             const float *in, const pool_shape *s);

    /* ---- fully connected: out (B x N) = in (B x M) . w^T + bias, w: N x M */
    void (*fc_forward)(backend *be, float *out, const float *in, const float *w, const float *bias,
                       int B, int M, int N);
    /* din may be NULL; dw, dbias overwritten */
    void (*fc_backward)(backend *be, float *din, float *dw, float *dbias, const float *dout,
                        const float *in, const float *w, int B, int M, int N);

    /* ---- global average pooling: out (B x C) = mean over HW of in (B x C x HW) */
    void (*gap_forward)(backend *be, float *out, const float *in, int B, int C, int HW);
    void (*gap_backward)(backend *be, float *din, const float *dout, int B, int C, int HW);

    /* ---- softmax cross-entropy over K classes, per sample:
     * loss[b] = -log softmax(logits[b])[labels[b]], pred[b] = argmax,
     * dlogits[b] = (softmax(logits[b]) - onehot(labels[b])) * scale
     * (scale = 1/B for a mean loss). labels, loss, pred are device arrays of B. */
    void (*softmax_xent)(backend *be, float *dlogits, float *loss, int32_t *pred,
                         const float *logits, const int32_t *labels, int B, int K, float scale);

    /* ---- SGD with momentum and L2 weight decay (PyTorch's convention):
     * g' = g + wd w;  v = momentum v + g';  w -= lr v */
    void (*sgd_update)(backend *be, float *w, float *v, const float *g, size_t n, float lr,
                       float momentum, float wd);
} backend_ops;

struct backend {
    const backend_ops *ops;
    void *ctx;
    int host_visible; /* device pointers are host pointers (the CPU backend) */
};

/* The CPU backend (im2col + OpenBLAS). threads: OpenBLAS threads, 0 = leave
 * OpenBLAS's own choice. */
backend *backend_cpu_create(int threads, errbuf *e);

#endif
