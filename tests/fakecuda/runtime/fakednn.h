/* fakednn.h — what the fake cuDNN's files share (cudnn.c: handles and
 * descriptors read back; cudnn_algo.c: algorithm tables and workspace;
 * cudnn_ops.c: the compute calls). Not for tests. */
#ifndef TRAIN_FAKECUDA_FAKEDNN_H
#define TRAIN_FAKECUDA_FAKEDNN_H

#include <cudnn.h>
#include <stdio.h>

#include "tests/fakecuda/runtime/internal.h"

struct cudnnContext {
    cudaStream_t stream;
};

/* A violation that also becomes cudnnGetLastErrorString's answer. */
void fkd_bad(const char *api, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define BAD(api, ...) fkd_bad(api, __VA_ARGS__)

/* Prologue of every cuDNN call: counted, refused without a device or
 * after a reported fault, or failed as queued. */
#define ENTER(api)                                                                                 \
    do {                                                                                           \
        fk_count(api);                                                                             \
        if (fk_device_error() != cudaSuccess)                                                      \
            return CUDNN_STATUS_NOT_INITIALIZED;                                                   \
        if (fk_sticky_error() != cudaSuccess)                                                      \
            return CUDNN_STATUS_EXECUTION_FAILED;                                                  \
        int st_;                                                                                   \
        if (fk_take_failure(api, &st_))                                                            \
            return (cudnnStatus_t)st_;                                                             \
    } while (0)

int fkd_handle_ok(cudnnHandle_t h);
#define NEED_HANDLE(api, h)                                                                        \
    do {                                                                                           \
        if (!fkd_handle_ok(h)) {                                                                   \
            BAD(api, "%p is not a live handle", (void *)(h));                                      \
            return CUDNN_STATUS_BAD_PARAM;                                                         \
        }                                                                                          \
    } while (0)

/* ---- descriptors, read back through the real library's getters */
typedef struct tens {
    int n, c, h, w;
    int ns, cs, hs, ws; /* element strides */
    size_t bytes;
} tens;

static inline size_t at4(const tens *t, int n, int c, int h, int w)
{
    return (size_t)n * t->ns + (size_t)c * t->cs + (size_t)h * t->hs + (size_t)w * t->ws;
}

typedef struct filt {
    int k, c, r, s;
} filt;

typedef struct convp {
    int ph, pw, u, v, dh, dw;
    int flip; /* CUDNN_CONVOLUTION: the filter is flipped */
    cudnnMathType_t math;
} convp;

int fkd_read_tensor(const char *api, const char *what, cudnnTensorDescriptor_t d, tens *t);
int fkd_read_conv(const char *api, cudnnConvolutionDescriptor_t cd, cudnnTensorDescriptor_t xd,
                  cudnnFilterDescriptor_t wd, cudnnTensorDescriptor_t yd, tens *x, filt *w, tens *y,
                  convp *p);
size_t fkd_filt_bytes(const filt *f);
/* alpha, beta: host floats, finite */
int fkd_scalars(const char *api, const void *alpha, const void *beta, float *a, float *b);
/* device range check that also sets the last error string */
int fkd_dev(const char *api, const char *what, const void *p, size_t bytes);
/* out = alpha * v + beta * out; beta 0 never reads out */
static inline void blend(float *out, double v, float alpha, float beta)
{
    double r = alpha * v;
    if (beta != 0.0f)
        r += (double)beta * *out;
    *out = (float)r;
}

/* ---- algorithms (cudnn_algo.c) */
enum { FWD, DATA, FILTER };
/* the workspace algo needs for these shapes; 0 in *ok when the fake does
 * not support algo in that direction */
size_t fkd_need(int dir, int algo, const tens *x, const filt *w, const tens *y, int *ok);
void fkd_set_last_algo(int dir, int algo, cudnnMathType_t math);
/* fake_cudnn_default_math_only is on: candidates all report default math */
int fkd_default_math_only(void);
/* fake_cudnn_no_usable_algorithm is on */
int fkd_none_usable(void);
/* fake_cudnn_tensor_op_nondeterministic_only is on */
int fkd_tensor_op_nondet_only(void);

#endif
