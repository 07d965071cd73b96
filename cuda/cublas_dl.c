/* cublas_dl.c — cuBLAS opened when the GPU backend starts, not when
 * ./train starts.
 *
 * Linking libcublas runs libcublasLt's static initialisers in every
 * process: a bare `int main(void) { return 0; }` linked with -lcublas
 * takes 0.06 s and peaks at 217 MB resident (CUDA 13, measured on a
 * machine without a GPU), against 0.00 s and 1.4 MB with -lcudart or
 * -lcudnn alone. The CUDA build charged that to every CPU run and every
 * --loader-only run, and to the RSS and PSS it reports. So the CUDA
 * build does not link libcublas: these definitions of the entry points
 * the backend calls (cuda/layers.c, cuda/backend.c, cuda/check.c)
 * forward to the library, opened with dlopen on the first call — in
 * practice cublasCreate, when the backend starts on a device. dlopen finds
 * it through the binary's run path (CUDA_HOME/lib64), as the linker did.
 * A library that cannot be opened makes cublasCreate return
 * CUBLAS_STATUS_NOT_INITIALIZED, and the status string says why, so the
 * backend's start fails with the reason and ./train falls back to the CPU.
 *
 * The fake runtime (tests/fakecuda/runtime/cublas.c) defines the same symbols,
 * so this file is empty in the fakecuda variant.
 */
#ifndef TRAIN_FAKECUDA
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include <cublas_v2.h>

#include "cuda/internal.h"

static struct {
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const float *, const float *, int, const float *, int, const float *,
                            float *, int);
    const char *(*name)(cublasStatus_t);
    const char *(*string)(cublasStatus_t);
    cublasStatus_t (*property)(libraryPropertyType, int *);
} fn;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded;
static char why[512] = "cuBLAS not opened yet";

/* every symbol or none: a partial table would call NULL */
static void open_cublas(void)
{
    void *h = dlopen(GPU_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *m = dlerror();
        snprintf(why, sizeof why, "cannot open %s: %s", GPU_CUBLAS_SONAME, m ? m : "?");
        return;
    }
    static const char *const names[] = {
        "cublasCreate_v2",     "cublasDestroy_v2",      "cublasSetStream_v2", "cublasSgemm_v2",
        "cublasGetStatusName", "cublasGetStatusString", "cublasGetProperty"};
    void **slot[] = {(void **)&fn.create,  (void **)&fn.destroy, (void **)&fn.set_stream,
                     (void **)&fn.sgemm,   (void **)&fn.name,    (void **)&fn.string,
                     (void **)&fn.property};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        *slot[i] = dlsym(h, names[i]);
        if (!*slot[i]) {
            snprintf(why, sizeof why, "%s has no %s", GPU_CUBLAS_SONAME, names[i]);
            dlclose(h);
            return;
        }
    }
    loaded = 1;
}

static int ready(void)
{
    pthread_once(&once, open_cublas);
    return loaded;
}

int gpu_cublas_loaded(void) { return loaded; }

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    return ready() ? fn.create(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    return ready() ? fn.destroy(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream)
{
    return ready() ? fn.set_stream(handle, stream) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float *alpha,
                              const float *A, int lda, const float *B, int ldb, const float *beta,
                              float *C, int ldc)
{
    return ready() ? fn.sgemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
                   : CUBLAS_STATUS_NOT_INITIALIZED;
}

const char *cublasGetStatusName(cublasStatus_t status)
{
    if (ready())
        return fn.name(status);
    return status == CUBLAS_STATUS_NOT_INITIALIZED ? "CUBLAS_STATUS_NOT_INITIALIZED"
                                                   : "CUBLAS_STATUS_(unknown: cuBLAS not opened)";
}

/* the version of the library opened (cuda/versions.c) */
cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value)
{
    return ready() ? fn.property(type, value) : CUBLAS_STATUS_NOT_INITIALIZED;
}

const char *cublasGetStatusString(cublasStatus_t status)
{
    return ready() ? fn.string(status) : why;
}
#endif
