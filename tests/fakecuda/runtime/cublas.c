/* cublas.c — the fake cuBLAS: handles bound to a stream, and SGEMM checked
 * the way the real library would need it to be right: operation codes,
 * sizes, leading dimensions against the stored matrix shapes, every operand
 * inside device memory, alpha/beta host scalars (pointer mode host), C not
 * read when beta is 0. The product runs naively in double when the stream
 * reaches it.
 */
#define _GNU_SOURCE
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fakecuda/runtime/internal.h"

struct cublasContext {
    int live;
    cudaStream_t stream;
};

static cublasHandle_t handles[16];

int fk_cublas_live(void)
{
    int n = 0;
    for (int i = 0; i < 16; i++)
        n += handles[i] != NULL;
    return n;
}

void fk_cublas_reset(void)
{
    for (int i = 0; i < 16; i++) {
        free(handles[i]);
        handles[i] = NULL;
    }
}

static int handle_ok(cublasHandle_t h)
{
    for (int i = 0; h && i < 16; i++)
        if (handles[i] == h)
            return 1;
    return 0;
}

#define ENTER(api)                                                                                 \
    do {                                                                                           \
        fk_count(api);                                                                             \
        if (fk_device_error() != cudaSuccess)                                                      \
            return CUBLAS_STATUS_NOT_INITIALIZED;                                                  \
        if (fk_sticky_error() != cudaSuccess)                                                      \
            return CUBLAS_STATUS_EXECUTION_FAILED;                                                 \
        int st_;                                                                                   \
        if (fk_take_failure(api, &st_))                                                            \
            return (cublasStatus_t)st_;                                                            \
    } while (0)

cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
    ENTER("cublasCreate");
    for (int i = 0; i < 16; i++)
        if (!handles[i]) {
            handles[i] = calloc(1, sizeof *handles[i]);
            handles[i]->live = 1;
            *h = handles[i];
            return CUBLAS_STATUS_SUCCESS;
        }
    return CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
    ENTER("cublasDestroy");
    for (int i = 0; i < 16; i++)
        if (handles[i] == h) {
            free(h);
            handles[i] = NULL;
            return CUBLAS_STATUS_SUCCESS;
        }
    fk_violation("cublasDestroy", "%p is not a live handle", (void *)h);
    return CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
    ENTER("cublasSetStream");
    if (!handle_ok(h) || !fk_stream_ok(s)) {
        fk_violation("cublasSetStream", "handle %p or stream %p is not alive", (void *)h,
                     (void *)s);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t h, cudaStream_t *s)
{
    if (!handle_ok(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    *s = h->stream;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    default: return "CUBLAS_STATUS_(other)";
    }
}

/* the fake is the library its headers describe */
cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value)
{
    if (!value)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (type) {
    case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUBLAS_VER_MINOR; return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}

const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "library not initialised (fake)";
    case CUBLAS_STATUS_INVALID_VALUE: return "an argument is invalid (fake)";
    default: return "failure (fake)";
    }
}

typedef struct gemm_job {
    int ta, tb, m, n, k, lda, ldb, ldc;
    float alpha, beta;
    const float *A, *B;
    float *C;
    int corrupt;
} gemm_job;

/* op(X)[r][c] for a column-major X with leading dimension ld */
/* Row r of op(A) dotted with column c of op(B), as strided walks: op(A)
 * (r, p) is A[r + p lda], or A[p + r lda] transposed. The call checked both
 * operands' extents in device memory, so the loop runs without the
 * sanitizers' per-load checks (the fake's arithmetic is most of the GPU
 * tests' run time). */
__attribute__((no_sanitize("address", "undefined"))) static double
row_dot_col(const float *A, size_t as, const float *B, size_t bs, int k)
{
    double acc = 0.0;
    for (int p = 0; p < k; p++)
        acc += (double)A[(size_t)p * as] * B[(size_t)p * bs];
    return acc;
}

static void gemm_run(void *a)
{
    gemm_job *j = a;
    for (int c = 0; c < j->n; c++)
        for (int r = 0; r < j->m; r++) {
            const float *a0 = j->ta ? j->A + (size_t)r * j->lda : j->A + r;
            const float *b0 = j->tb ? j->B + c : j->B + (size_t)c * j->ldb;
            double acc =
                row_dot_col(a0, j->ta ? 1 : (size_t)j->lda, b0, j->tb ? (size_t)j->ldb : 1, j->k);
            float *out = &j->C[(size_t)r + (size_t)c * j->ldc];
            double v = j->alpha * acc;
            if (j->beta != 0.0f) /* beta 0: C is not read (it may hold NaN) */
                v += (double)j->beta * *out;
            *out = (float)v;
        }
    if (j->corrupt)
        j->C[0] += 1.0f;
}

/* Bytes a column-major rows x cols matrix with leading dimension ld spans. */
static size_t span(int rows, int cols, int ld)
{
    if (rows == 0 || cols == 0)
        return 0;
    return ((size_t)ld * (cols - 1) + rows) * sizeof(float);
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t transa, cublasOperation_t transb,
                              int m, int n, int k, const float *alpha, const float *A, int lda,
                              const float *B, int ldb, const float *beta, float *C, int ldc)
{
    const char *api = "cublasSgemm";
    ENTER(api);
    if (!handle_ok(h)) {
        fk_violation(api, "%p is not a live handle", (void *)h);
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if ((transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) ||
        (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T)) {
        fk_violation(api, "operation codes %d, %d (N or T for real matrices)", transa, transb);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    int ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
    /* stored shapes: A is m x k (k x m when transposed), B is k x n (n x k) */
    int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    if (m < 0 || n < 0 || k < 0) {
        fk_violation(api, "negative size m=%d n=%d k=%d", m, n, k);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (lda < (ar > 1 ? ar : 1) || ldb < (br > 1 ? br : 1) || ldc < (m > 1 ? m : 1)) {
        fk_violation(api,
                     "leading dimension too small: lda=%d (A stored %dx%d), ldb=%d (B stored "
                     "%dx%d), ldc=%d (C %dx%d)",
                     lda, ar, ac, ldb, br, bc, ldc, m, n);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (!fk_host_scalar(api, "alpha", alpha) || !fk_host_scalar(api, "beta", beta))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    if ((k > 0 && (!fk_dev_range(api, "A", A, span(ar, ac, lda)) ||
                   !fk_dev_range(api, "B", B, span(br, bc, ldb)))) ||
        !fk_dev_range(api, "C", C, span(m, n, ldc)))
        return CUBLAS_STATUS_INVALID_VALUE;
    gemm_job *j = calloc(1, sizeof *j);
    *j =
        (gemm_job){ta, tb, m, n, k, lda, ldb, ldc, *alpha, *beta, A, B, C, fk_take_corruption(api)};
    fk_cost_next(2.0 * m * n * k, 4.0 * ((double)m * k + (double)k * n + 2.0 * m * n));
    if (fk_enqueue(h->stream, api, gemm_run, free, j, NULL, 0) != cudaSuccess)
        return CUBLAS_STATUS_EXECUTION_FAILED;
    return CUBLAS_STATUS_SUCCESS;
}
