/* check.h — every CUDA, cuDNN and cuBLAS status is checked by one of these.
 *
 * A failure inside an operation is not recoverable (backend.h): the macro
 * prints the failing statement, the function, file:line, the device and the
 * library's error string to stderr and exits with status 1.
 *
 * Kernels and most copies are asynchronous: a fault shows up at some later
 * call. With TRAIN_CUDA_SYNC=1 in the environment every check first
 * synchronises the device, so an asynchronous fault is reported at the line
 * of the call that caused it (slow; for debugging only).
 *
 * The gpu_soft_* helpers turn a status into an errbuf message instead, for
 * start-up paths (creating handles, probing) where the caller decides.
 *
 * Usable from C (gcc) and CUDA C++ (nvcc); deliberately nothing else.
 */
#ifndef TRAIN_CUDA_CHECK_H
#define TRAIN_CUDA_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "common/util.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUDA_CHECK(call) gpu_check_cuda((call), #call, __func__, __FILE__, __LINE__)
#define CUDNN_CHECK(call) gpu_check_cudnn((call), #call, __func__, __FILE__, __LINE__)
#define CUBLAS_CHECK(call) gpu_check_cublas((call), #call, __func__, __FILE__, __LINE__)

void gpu_check_cuda(cudaError_t st, const char *stmt, const char *func, const char *file, int line);
void gpu_check_cudnn(cudnnStatus_t st, const char *stmt, const char *func, const char *file,
                     int line);
void gpu_check_cublas(cublasStatus_t st, const char *stmt, const char *func, const char *file,
                      int line);

/* 1 when TRAIN_CUDA_SYNC is set to something other than "0" (read once). */
int gpu_check_sync_enabled(void);

/* Fill e with "what: NAME: description" and return -1 (0 on success). */
int gpu_soft_cuda(errbuf *e, cudaError_t st, const char *what);
int gpu_soft_cudnn(errbuf *e, cudnnStatus_t st, const char *what);
int gpu_soft_cublas(errbuf *e, cublasStatus_t st, const char *what);

#ifdef __cplusplus
}
#endif

#endif
