/* check.c — reporting for the CUDA_CHECK family (see check.h).
 *
 * Prints to stderr and exits: these are internal faults of a running step,
 * not user errors, so there is nothing for a caller to recover. Leaves out
 * any retry or device reset.
 */
#define _POSIX_C_SOURCE 200809L
#include "cuda/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gpu_check_sync_enabled(void)
{
    static int cached = -1;
    if (cached < 0) {
        const char *v = getenv("TRAIN_CUDA_SYNC");
        cached = v && *v && strcmp(v, "0") != 0;
    }
    return cached;
}

/* With TRAIN_CUDA_SYNC, wait for the device; returns its (sticky) error. */
static cudaError_t sync_if_asked(void)
{
    if (!gpu_check_sync_enabled())
        return cudaSuccess;
    return cudaDeviceSynchronize();
}

static void report(const char *lib, const char *name, const char *desc, const char *stmt,
                   const char *func, const char *file, int line, int async)
{
    int dev = -1;
    if (cudaGetDevice(&dev) != cudaSuccess)
        dev = -1;
    fprintf(stderr, "train: %s error %s: %s\n", lib, name, desc);
    fprintf(stderr, "  in   %s\n  at   %s:%d (%s), device %d\n", stmt, file, line, func, dev);
    if (async)
        fprintf(stderr, "  (an asynchronous fault of earlier work, surfaced by TRAIN_CUDA_SYNC "
                        "at this check)\n");
    else if (!gpu_check_sync_enabled())
        fprintf(stderr, "  hint: asynchronous faults surface late; rerun with TRAIN_CUDA_SYNC=1 "
                        "to report them at the call that caused them\n");
    fflush(stderr);
    exit(1);
}

static void report_cuda(cudaError_t st, const char *stmt, const char *func, const char *file,
                        int line, int async)
{
    report("CUDA", cudaGetErrorName(st), cudaGetErrorString(st), stmt, func, file, line, async);
}

void gpu_check_cuda(cudaError_t st, const char *stmt, const char *func, const char *file, int line)
{
    cudaError_t as = sync_if_asked();
    if (st != cudaSuccess)
        report_cuda(st, stmt, func, file, line, 0);
    if (as != cudaSuccess)
        report_cuda(as, stmt, func, file, line, 1);
}

static const char *cudnn_name(cudnnStatus_t st)
{
    /* cudnnGetErrorString returns the enumerator's name */
    return cudnnGetErrorString(st);
}

void gpu_check_cudnn(cudnnStatus_t st, const char *stmt, const char *func, const char *file,
                     int line)
{
    cudaError_t as = sync_if_asked();
    if (st != CUDNN_STATUS_SUCCESS) {
        char last[256] = "";
        cudnnGetLastErrorString(last, sizeof last);
        report("cuDNN", cudnn_name(st), last[0] ? last : "(no further detail from cuDNN)", stmt,
               func, file, line, 0);
    }
    if (as != cudaSuccess)
        report_cuda(as, stmt, func, file, line, 1);
}

void gpu_check_cublas(cublasStatus_t st, const char *stmt, const char *func, const char *file,
                      int line)
{
    cudaError_t as = sync_if_asked();
    if (st != CUBLAS_STATUS_SUCCESS)
        report("cuBLAS", cublasGetStatusName(st), cublasGetStatusString(st), stmt, func, file, line,
               0);
    if (as != cudaSuccess)
        report_cuda(as, stmt, func, file, line, 1);
}

int gpu_soft_cuda(errbuf *e, cudaError_t st, const char *what)
{
    if (st == cudaSuccess)
        return 0;
    return errf(e, "%s: %s: %s", what, cudaGetErrorName(st), cudaGetErrorString(st));
}

int gpu_soft_cudnn(errbuf *e, cudnnStatus_t st, const char *what)
{
    if (st == CUDNN_STATUS_SUCCESS)
        return 0;
    return errf(e, "%s: %s", what, cudnn_name(st));
}

int gpu_soft_cublas(errbuf *e, cublasStatus_t st, const char *what)
{
    if (st == CUBLAS_STATUS_SUCCESS)
        return 0;
    return errf(e, "%s: %s: %s", what, cublasGetStatusName(st), cublasGetStatusString(st));
}
