/* test_cublas_dl.c — the CUDA build opens cuBLAS when the GPU backend
 * starts, not at program start (cuda/cublas_dl.c): linking it made every
 * process, CPU runs included, pay libcublasLt's initialisers (0.06 s,
 * ~200 MB resident). Runs in run-gpu without a device too; the fake
 * (run-fakecuda) defines cuBLAS itself and skips. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#ifndef TRAIN_FAKECUDA
#include <cublas_v2.h>

#include "cuda/internal.h"

static int mapped(void)
{
    void *h = dlopen(GPU_CUBLAS_SONAME, RTLD_NOW | RTLD_NOLOAD);
    if (h)
        dlclose(h);
    return h != NULL;
}
#endif

/* Criterion runs each test in its own process: nothing opened cuBLAS yet */
Test(cublas_dl, not_mapped_until_the_first_call_then_a_real_answer)
{
#ifdef TRAIN_FAKECUDA
    cr_skip("the fake runtime defines cuBLAS itself");
#else
    cr_assert(!mapped(), "%s is mapped at start: the binary links it", GPU_CUBLAS_SONAME);
    cr_assert(!gpu_cublas_loaded());
    cublasHandle_t h = NULL;
    cublasStatus_t st = cublasCreate(&h);
    cr_assert(gpu_cublas_loaded(), "cublasCreate did not open %s: %s", GPU_CUBLAS_SONAME,
              cublasGetStatusString(st));
    cr_assert(mapped());
    /* the library's own answers: no device here gives an error status, a
     * device a handle */
    if (st == CUBLAS_STATUS_SUCCESS)
        cr_assert_eq(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    else
        cr_assert(strncmp(cublasGetStatusName(st), "CUBLAS_STATUS_", 14) == 0, "%s",
                  cublasGetStatusName(st));
    cr_assert_str_eq(cublasGetStatusName(CUBLAS_STATUS_ALLOC_FAILED), "CUBLAS_STATUS_ALLOC_FAILED");
    cr_assert_str_eq(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE),
                     "CUBLAS_STATUS_INVALID_VALUE");
#endif
}
