/* backend.h — the one interface the CPU and GPU backends implement.
 *
 * A backend is a table of operations plus an opaque context (ggml's shape,
 * sized for our two backends). Every pointer an operation takes is a
 * *device* pointer of that backend — host memory for the CPU backend, CUDA
 * device memory for the GPU backend — unless its comment says "host".
 * Operations are enqueued in order on the backend's compute stream; only
 * `download`, `synchronize` and the waits of the optional entries wait for
 * them. Layouts are NCHW, fp32,
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

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "common/util.h"

typedef struct backend backend;

/* 2-D convolution with bias, cross-correlation as in every DL framework. */
typedef struct conv_shape {
    int B;       /* batch */
    int C, H, W; /* input channels and size */
    int K, R, S; /* output channels, kernel height and width */
    int stride, pad;
    int OH, OW; /* output size: (H + 2 pad - R) / stride + 1, same for W */
} conv_shape;

/* k x k max pooling with stride and padding (padding never wins: it is
 * -inf); OH = (H + 2 pad - k) / stride + 1 (floor), same for W. The 2x2/2
 * pool of lenet and convnet is k 2, stride 2, pad 0 (OH = H / 2). */
typedef struct maxpool_shape {
    int B, C, H, W;
    int OH, OW;
    int k, stride, pad;
} maxpool_shape;

/* Fill OH/OW; returns -1 when the output would be empty. */
int conv_shape_init(conv_shape *s, int B, int C, int H, int W, int K, int R, int S, int stride,
                    int pad);
int maxpool_shape_init(maxpool_shape *s, int B, int C, int H, int W); /* 2x2, stride 2 */
int maxpool_shape_init_k(maxpool_shape *s, int B, int C, int H, int W, int k, int stride, int pad);

/* One span of the device's timeline (backend_ops.timeline_take). */
typedef struct backend_span {
    const char *track, *name; /* string literals */
    double t0, dur;           /* seconds, now_sec()'s clock */
} backend_span;

/* What the device did in a window of the host clock (backend_ops.
 * activity_take), from its own activity records: the measure of the union
 * of the intervals, clipped to the window, in seconds. */
typedef struct backend_activity {
    double compute_s; /* kernels, memsets and device-to-device copies (not NCCL's) */
    double h2d_s, d2h_s;
    double overlap_s;      /* compute and a copy (either direction) at once */
    unsigned long dropped; /* records the profiler dropped so far (0: none) */
} backend_activity;

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
    /* out: B x K x OH x OW; in: B x C x H x W; w: K x C x R x S; bias: K, or
     * NULL for none (a convolution followed by batch norm) */
    void (*conv_forward)(backend *be, void *plan, float *out, const float *in, const float *w,
                         const float *bias, const conv_shape *s);
    /* din (may be NULL: nothing below needs it), dw and dbias (NULL when
     * there is no bias) are overwritten, not accumulated */
    void (*conv_backward)(backend *be, void *plan, float *din, float *dw, float *dbias,
                          const float *dout, const float *in, const float *w, const conv_shape *s);
    /* The algorithms a plan of shape s runs, as "forward/input
     * gradient/weight gradient" (e.g. "wino/wino/direct"; the CPU
     * backend's names are in cpu/conv_choice.h) into buf (len bytes).
     * Optional: backend_conv_describe. */
    void (*conv_describe)(backend *be, const conv_shape *s, char *buf, size_t len);

    /* ---- activation, n elements; relu_backward uses the forward output */
    void (*relu_forward)(backend *be, float *out, const float *in, size_t n);
    void (*relu_backward)(backend *be, float *din, const float *dout, const float *out, size_t n);

    /* ---- max pooling (maxpool_shape); backward routes each gradient to the
     * window's maximum (the first one in row-major order on ties), adding
     * where windows overlap */
    void (*maxpool_forward)(backend *be, float *out, const float *in, const maxpool_shape *s);
    void (*maxpool_backward)(backend *be, float *din, const float *dout, const float *out,
                             const float *in, const maxpool_shape *s);

    /* ---- fully connected: out (B x N) = in (B x M) . w^T + bias, w: N x M */
    void (*fc_forward)(backend *be, float *out, const float *in, const float *w, const float *bias,
                       int B, int M, int N);
    /* din may be NULL; dw, dbias overwritten */
    void (*fc_backward)(backend *be, float *din, float *dw, float *dbias, const float *dout,
                        const float *in, const float *w, int B, int M, int N);

    /* ---- global average pooling: out (B x C) = mean over HW of in (B x C x HW) */
    void (*gap_forward)(backend *be, float *out, const float *in, int B, int C, int HW);
    void (*gap_backward)(backend *be, float *din, const float *dout, int B, int C, int HW);

    /* ---- batch normalisation, per channel c over the B x HW values of it;
     * x, y, dx, dy: B x C x HW; scale, shift, save_*, run_*, dscale, dshift: C.
     * Training: mean and biased variance of the batch,
     *   y = (x - mean) * invstd * scale[c] + shift[c], invstd = 1 / sqrt(var + eps),
     * save_mean and save_invstd kept for the backward pass, and
     *   run_mean = (1 - momentum) run_mean + momentum mean,
     *   run_var  = (1 - momentum) run_var + momentum var * N / (N - 1)
     * (N = B x HW; PyTorch's and cuDNN's conventions). Inference uses
     * run_mean and run_var instead of the batch's. Backward (training mode)
     * overwrites dscale, dshift and dx (dx may be NULL). */
    void (*bn_forward_train)(backend *be, float *y, float *save_mean, float *save_invstd,
                             float *run_mean, float *run_var, const float *x, const float *scale,
                             const float *shift, int B, int C, int HW, float momentum, float eps);
    void (*bn_forward_infer)(backend *be, float *y, const float *x, const float *scale,
                             const float *shift, const float *run_mean, const float *run_var, int B,
                             int C, int HW, float eps);
    void (*bn_backward)(backend *be, float *dx, float *dscale, float *dshift, const float *dy,
                        const float *x, const float *scale, const float *save_mean,
                        const float *save_invstd, int B, int C, int HW);

    /* ---- optional: batch norm fused with the relu after it (NULL: the
     * model runs the separate ops; a backend that has them gives the same
     * bits as those). res is NULL or a B x C x HW tensor added between the
     * two (a residual block's bn, add, relu). bn_relu_forward_train:
     *   y = relu(bn(x) + res), bn as bn_forward_train (save_*, run_* too);
     * bn_relu_forward_infer: the same with bn_forward_infer; the bn's (and
     * the add's) own output is written nowhere. bn_relu_backward:
     * bn_backward of dy = relu_backward(g, yr), g the gradient of the relu's
     * output yr, dy computed on the fly and, when dy_out is not NULL, also
     * stored there (the add's gradient, for its other operand). dx and
     * dy_out may be NULL; no output aliases an input. */
    void (*bn_relu_forward_train)(backend *be, float *y, float *save_mean, float *save_invstd,
                                  float *run_mean, float *run_var, const float *x, const float *res,
                                  const float *scale, const float *shift, int B, int C, int HW,
                                  float momentum, float eps);
    void (*bn_relu_forward_infer)(backend *be, float *y, const float *x, const float *res,
                                  const float *scale, const float *shift, const float *run_mean,
                                  const float *run_var, int B, int C, int HW, float eps);
    void (*bn_relu_backward)(backend *be, float *dx, float *dscale, float *dshift, float *dy_out,
                             const float *g, const float *yr, const float *x, const float *scale,
                             const float *save_mean, const float *save_invstd, int B, int C,
                             int HW);

    /* ---- element-wise: out = a + b (out may be a or b); dst = src */
    void (*add)(backend *be, float *out, const float *a, const float *b, size_t n);
    void (*copy)(backend *be, float *dst, const float *src, size_t n);

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

    /* ---- optional: staging and device timing. Backends with a separate
     * copy engine (the GPU) fill these; the CPU backend leaves them NULL;
     * callers go through the wrappers below the struct. A staging buffer b, 0 <= b < BACKEND_STAGE_MAX,
     * names one device input buffer the caller copies batches into; the
     * backend keeps two events per b: "copy into b done" (copy stream) and
     * "compute finished reading b" (compute stream). The caller remembers
     * which host ring slot it last copied into b.
     *
     * Page-lock [p, p + bytes) of host memory so copies from it are DMA that
     * overlaps compute. Returns -1 with e filled when the driver refuses; the
     * caller says so once and goes on with pageable memory. */
    int (*host_pin)(backend *be, void *p, size_t bytes, errbuf *e);
    void (*host_unpin)(backend *be, void *p); /* p as given to host_pin */
    /* Enqueue dst (device) <- src (host) on the copy stream, ordered after
     * the last stage_release(b), then record b's copy event. Returns at once:
     * src must stay untouched until stage_done(b) says 1. */
    void (*stage_copy)(backend *be, int b, void *dst, const void *src, size_t bytes);
    /* 1 when b's last stage_copy has completed (its host source may be
     * reused), else 0; wait = 1 blocks the host until it has. */
    int (*stage_done)(backend *be, int b, int wait);
    /* Compute operations enqueued after this wait for b's last copy
     * (a device-side wait: the host does not block). */
    void (*stage_wait)(backend *be, int b);
    /* Compute enqueued so far is all that reads b (e.g. after normalize_u8):
     * the next stage_copy into b may overwrite it once that has run. */
    void (*stage_release)(backend *be, int b);
    /* Compute-busy time from device events: busy_begin / busy_end bracket
     * one step's compute on the compute stream (begin after stage_wait, so
     * waiting for a copy is not counted); busy_take returns the seconds
     * inside completed brackets since its last call, waiting for the last
     * busy_end. */
    void (*busy_begin)(backend *be);
    void (*busy_end)(backend *be);
    double (*busy_take)(backend *be);
    /* The device's own timeline, for --trace (optional; see the wrappers
     * below): timeline_start begins recording a span per staging copy
     * (track "copy") and per busy bracket (track "compute"), timed by the
     * device; timeline_take waits for those recorded so far and moves up to
     * max of them into out, times in seconds of now_sec()'s clock; returns
     * how many. */
    void (*timeline_start)(backend *be);
    size_t (*timeline_take)(backend *be, backend_span *out, size_t max);
    /* Device activity records (optional; CUPTI on CUDA): activity_start
     * turns them on before any work is enqueued; returns 1, or 0 with the
     * reason in why (the library is missing, the profiler refused). Then
     * activity_take(t0, t1) waits for nothing but flushes the records of
     * work that has ended and measures them over [t0, t1] (now_sec()'s
     * clock: the records carry it); the timeline's device spans then come
     * from the records, one per kernel and copy, with kernel names. */
    int (*activity_start)(backend *be, char *why, size_t len);
    int (*activity_take)(backend *be, double t0, double t1, backend_activity *out);
    /* Results read back without waiting (optional; see the wrappers
     * below): result_copy enqueues dst (host, page-locked with host_pin)
     * <- src (device) on the compute stream, after everything enqueued so
     * far, as result slot r (0 <= r < BACKEND_RESULT_MAX); result_done says
     * 1 once slot r's last copy has completed (dst may be read), else 0;
     * wait = 1 blocks the host until it has. */
    void (*result_copy)(backend *be, int r, void *dst, const void *src, size_t bytes);
    int (*result_done)(backend *be, int r, int wait);
    /* Canonical sums over the batch (optional; the CPU backend has it).
     * Until the next call, every batch the ops see is n consecutive groups
     * of size[i] samples (the sizes add up to the ops' B; a group may be
     * empty; n a power of 2 up to BACKEND_GROUPS_MAX), and:
     * - fc_forward and fc_backward compute a sample's out and din in calls
     *   that see only its group, so they are the same bits whatever else
     *   the batch holds (conv, relu, pooling are per sample anyway);
     * - conv_backward and fc_backward compute each group's weight and bias
     *   gradient on its own, in an order fixed by the group's size, and add
     *   the n group sums as a balanced binary tree, left before right.
     * So a batch cut into parts of whole subtrees (the ranks of a job) gives
     * per-part sums that, added as the tree's top levels, are the bits the
     * whole batch gives. Batch norm is not covered: its statistics are the
     * batch's. n = 0: one group, the backend's own order. */
    void (*batch_groups)(backend *be, const int *size, int n);
} backend_ops;

#define BACKEND_STAGE_MAX 16
#define BACKEND_RESULT_MAX 8
#define BACKEND_GROUPS_MAX 64

struct backend {
    const backend_ops *ops;
    void *ctx;
    int host_visible; /* device pointers are host pointers (the CPU backend) */
    /* Cancellation hook, set by the owner (train points it at its SIGINT /
     * SIGTERM flag); NULL never cancels. Once *cancel is nonzero, operations
     * may stop early and leave their outputs undefined (the CPU backend
     * stops between thread-pool tasks; sgd_update always runs to the end, so
     * parameters are never half-updated), and model steps return
     * MODEL_STEP_CANCELLED. The flag must not go back to 0 during a step. */
    volatile sig_atomic_t *cancel;
};

/* 1 once the owner asked the backend to stop (see backend.cancel). */
static inline int backend_cancelled(const backend *be) { return be->cancel && *be->cancel; }

/* The optional entries, for callers that do not care whether the backend
 * has them (the CPU backend has none of them: it has no separate device).
 * Without busy timing, backend_busy_take returns 0 and backend_has_busy
 * says 0 (the report shows n/a). */
static inline int backend_has_busy(const backend *be) { return be->ops->busy_take != NULL; }

/* The staging block (host_pin ... stage_release) comes whole or not at all. */
static inline int backend_has_staging(const backend *be) { return be->ops->stage_copy != NULL; }

static inline void backend_busy_begin(backend *be)
{
    if (be->ops->busy_begin)
        be->ops->busy_begin(be);
}

static inline void backend_busy_end(backend *be)
{
    if (be->ops->busy_end)
        be->ops->busy_end(be);
}

static inline double backend_busy_take(backend *be)
{
    return be->ops->busy_take ? be->ops->busy_take(be) : 0.0;
}

/* Without result_copy, the copy is a download: done when it returns. */
static inline void backend_result_copy(backend *be, int r, void *dst, const void *src, size_t bytes)
{
    if (be->ops->result_copy)
        be->ops->result_copy(be, r, dst, src, bytes);
    else
        be->ops->download(be, dst, src, bytes);
}

static inline int backend_result_done(backend *be, int r, int wait)
{
    return be->ops->result_done ? be->ops->result_done(be, r, wait) : 1;
}

static inline void *backend_conv_plan(backend *be, const conv_shape *s)
{
    return be->ops->conv_plan ? be->ops->conv_plan(be, s) : NULL;
}

static inline void backend_conv_plan_free(backend *be, void *plan)
{
    if (be->ops->conv_plan_free)
        be->ops->conv_plan_free(be, plan);
}

/* buf with the algorithms of shape s (backend_ops.conv_describe), or NULL
 * when the backend does not say */
static inline const char *backend_conv_describe(backend *be, const conv_shape *s, char *buf,
                                                size_t len)
{
    if (!be->ops->conv_describe || len == 0)
        return NULL;
    be->ops->conv_describe(be, s, buf, len);
    return buf;
}

/* 1 and *out filled when activity records are on (activity_start said
 * so), else 0 */
static inline int backend_activity_take(backend *be, double t0, double t1, backend_activity *out)
{
    return be->ops->activity_take ? be->ops->activity_take(be, t0, t1, out) : 0;
}

static inline int backend_has_timeline(const backend *be) { return be->ops->timeline_take != NULL; }

static inline void backend_timeline_start(backend *be)
{
    if (be->ops->timeline_start)
        be->ops->timeline_start(be);
}

static inline size_t backend_timeline_take(backend *be, backend_span *out, size_t max)
{
    return be->ops->timeline_take ? be->ops->timeline_take(be, out, max) : 0;
}

#endif
