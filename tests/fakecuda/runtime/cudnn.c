/* cudnn.c — the fake cuDNN, part 1: handles bound to streams, the last
 * error string, and descriptors read back (the algorithm tables are in
 * cudnn_algo.c, the compute calls in cudnn_ops.c). The fake as a whole
 * implements the calls the backend makes: convolution forward / backward
 * data / backward filter / backward bias, add tensor, pooling, activation,
 * and algorithm choice with workspace sizes.
 *
 * Descriptors are the real library's: the real libcudnn is linked, and
 * every shape, stride, padding, mode and data type is read back through its
 * getters (cudnnGetTensor4dDescriptor, cudnnGetFilter4dDescriptor,
 * cudnnGetConvolution2dDescriptor, cudnnGetPooling2dDescriptor,
 * cudnnGetConvolution2dForwardOutputDim, cudnnGetTensorSizeInBytes, ...),
 * which work without a GPU. What a call means is then computed naively
 * from those numbers, in double, honouring strides, cross-correlation vs
 * convolution and alpha/beta (beta 0 never reads the output). The shapes
 * are captured at the call: a descriptor changed afterwards does not affect
 * queued work, as on a device. Deliberately missing: NHWC, groups, modes
 * other than max pooling and relu, half precision.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fakecuda/runtime/fakednn.h"

static cudnnHandle_t handles[16];
static char last_message[512];
static int last_algo[3] = {-1, -1, -1};
static cudnnMathType_t last_math[3];
static int default_math_only;
static int tensor_op_nondet_only;
static int none_usable;

int fk_cudnn_live(void)
{
    int n = 0;
    for (int i = 0; i < 16; i++)
        n += handles[i] != NULL;
    return n;
}

void fk_cudnn_reset(void)
{
    for (int i = 0; i < 16; i++) {
        free(handles[i]);
        handles[i] = NULL;
    }
    last_message[0] = '\0';
    last_algo[0] = last_algo[1] = last_algo[2] = -1;
    default_math_only = 0;
    tensor_op_nondet_only = 0;
    none_usable = 0;
}

int fake_last_algo(int dir) { return dir >= 0 && dir < 3 ? last_algo[dir] : -1; }

int fake_last_math(int dir) { return dir >= 0 && dir < 3 ? (int)last_math[dir] : -1; }

void fkd_set_last_algo(int dir, int algo, cudnnMathType_t math)
{
    last_algo[dir] = algo;
    last_math[dir] = math;
}

void fake_cudnn_default_math_only(int on) { default_math_only = on; }

int fkd_default_math_only(void) { return default_math_only; }

void fake_cudnn_tensor_op_nondeterministic_only(int on) { tensor_op_nondet_only = on; }

void fake_cudnn_no_usable_algorithm(int on) { none_usable = on; }

int fkd_none_usable(void) { return none_usable; }

int fkd_tensor_op_nondet_only(void) { return tensor_op_nondet_only; }

int fkd_handle_ok(cudnnHandle_t h)
{
    for (int i = 0; h && i < 16; i++)
        if (handles[i] == h)
            return 1;
    return 0;
}

void fkd_bad(const char *api, const char *fmt, ...)
{
    char msg[448];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fk_violation(api, "%s", msg);
    snprintf(last_message, sizeof last_message, "%s", fake_last_violation());
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *h)
{
    ENTER("cudnnCreate");
    /* a card whose cuDNN does not start (a driver/library mismatch): the
     * probe saw a device, the backend cannot start on it */
    const char *fail = getenv("FAKECUDA_CUDNN_CREATE");
    if (fail && !strcmp(fail, "fail"))
        return CUDNN_STATUS_NOT_INITIALIZED;
    for (int i = 0; i < 16; i++)
        if (!handles[i]) {
            handles[i] = calloc(1, sizeof *handles[i]);
            *h = handles[i];
            return CUDNN_STATUS_SUCCESS;
        }
    return CUDNN_STATUS_ALLOC_FAILED;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t h)
{
    ENTER("cudnnDestroy");
    NEED_HANDLE("cudnnDestroy", h);
    for (int i = 0; i < 16; i++)
        if (handles[i] == h)
            handles[i] = NULL;
    free(h);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s)
{
    ENTER("cudnnSetStream");
    NEED_HANDLE("cudnnSetStream", h);
    if (!fk_stream_ok(s)) {
        BAD("cudnnSetStream", "%p is not a live stream", (void *)s);
        return CUDNN_STATUS_BAD_PARAM;
    }
    h->stream = s;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t h, cudaStream_t *s)
{
    NEED_HANDLE("cudnnGetStream", h);
    *s = h->stream;
    return CUDNN_STATUS_SUCCESS;
}

/* The fake's own message when it refused the last call, else the real
 * library's (descriptor calls are real). */
void cudnnGetLastErrorString(char *message, size_t max_size)
{
    if (last_message[0]) {
        snprintf(message, max_size, "%s", last_message);
        last_message[0] = '\0';
        return;
    }
    void (*real)(char *, size_t);
    *(void **)&real = dlsym(RTLD_NEXT, "cudnnGetLastErrorString");
    if (real)
        real(message, max_size);
    else if (max_size)
        message[0] = '\0';
}

/* ---------------------------------------------------------------- descriptors, read back */

int fkd_read_tensor(const char *api, const char *what, cudnnTensorDescriptor_t d, tens *t)
{
    cudnnDataType_t dt;
    if (cudnnGetTensor4dDescriptor(d, &dt, &t->n, &t->c, &t->h, &t->w, &t->ns, &t->cs, &t->hs,
                                   &t->ws) != CUDNN_STATUS_SUCCESS ||
        cudnnGetTensorSizeInBytes(d, &t->bytes) != CUDNN_STATUS_SUCCESS) {
        BAD(api, "%s: not a readable 4-d tensor descriptor", what);
        return 0;
    }
    if (dt != CUDNN_DATA_FLOAT) {
        BAD(api, "%s: data type %d, only float is used", what, (int)dt);
        return 0;
    }
    return 1;
}

static int read_filter(const char *api, cudnnFilterDescriptor_t d, filt *f)
{
    cudnnDataType_t dt;
    cudnnTensorFormat_t fmt;
    if (cudnnGetFilter4dDescriptor(d, &dt, &fmt, &f->k, &f->c, &f->r, &f->s) !=
        CUDNN_STATUS_SUCCESS) {
        BAD(api, "w: not a readable 4-d filter descriptor");
        return 0;
    }
    if (dt != CUDNN_DATA_FLOAT || fmt != CUDNN_TENSOR_NCHW) {
        BAD(api, "w: data type %d, format %d (float NCHW expected)", (int)dt, (int)fmt);
        return 0;
    }
    return 1;
}

size_t fkd_filt_bytes(const filt *f) { return (size_t)f->k * f->c * f->r * f->s * sizeof(float); }

/* Read the convolution and check x, w, y agree with it through the real
 * cudnnGetConvolution2dForwardOutputDim. */
int fkd_read_conv(const char *api, cudnnConvolutionDescriptor_t cd, cudnnTensorDescriptor_t xd,
                  cudnnFilterDescriptor_t wd, cudnnTensorDescriptor_t yd, tens *x, filt *w, tens *y,
                  convp *p)
{
    if (!fkd_read_tensor(api, "x", xd, x) || !read_filter(api, wd, w) ||
        !fkd_read_tensor(api, "y", yd, y))
        return 0;
    cudnnConvolutionMode_t mode;
    cudnnDataType_t ct;
    int groups = 1;
    if (cudnnGetConvolution2dDescriptor(cd, &p->ph, &p->pw, &p->u, &p->v, &p->dh, &p->dw, &mode,
                                        &ct) != CUDNN_STATUS_SUCCESS ||
        cudnnGetConvolutionGroupCount(cd, &groups) != CUDNN_STATUS_SUCCESS ||
        cudnnGetConvolutionMathType(cd, &p->math) != CUDNN_STATUS_SUCCESS) {
        BAD(api, "not a readable 2-d convolution descriptor");
        return 0;
    }
    if (ct != CUDNN_DATA_FLOAT || groups != 1) {
        BAD(api, "compute type %d, %d groups (float, 1 group supported by the fake)", (int)ct,
            groups);
        return 0;
    }
    p->flip = mode == CUDNN_CONVOLUTION;
    int n, c, h, ww;
    if (cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &n, &c, &h, &ww) !=
        CUDNN_STATUS_SUCCESS) {
        BAD(api, "x and w do not make a valid convolution");
        return 0;
    }
    if (w->c != x->c || n != y->n || c != y->c || h != y->h || ww != y->w) {
        BAD(api, "shapes disagree: x %dx%dx%dx%d, w %dx%dx%dx%d give %dx%dx%dx%d, y is %dx%dx%dx%d",
            x->n, x->c, x->h, x->w, w->k, w->c, w->r, w->s, n, c, h, ww, y->n, y->c, y->h, y->w);
        return 0;
    }
    return 1;
}

/* alpha, beta: host floats */
int fkd_scalars(const char *api, const void *alpha, const void *beta, float *a, float *b)
{
    if (!fk_host_scalar(api, "alpha", alpha) || !fk_host_scalar(api, "beta", beta)) {
        snprintf(last_message, sizeof last_message, "%s", fake_last_violation());
        return 0;
    }
    *a = *(const float *)alpha;
    *b = *(const float *)beta;
    return 1;
}

int fkd_dev(const char *api, const char *what, const void *p, size_t bytes)
{
    if (fk_dev_range(api, what, p, bytes))
        return 1;
    snprintf(last_message, sizeof last_message, "%s", fake_last_violation());
    return 0;
}
