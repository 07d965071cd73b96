/* test_errors.c — a failing CUDA, cuDNN or cuBLAS call inside an op is
 * reported with the statement, the function, file:line, the device and the
 * library's error text, and exits with status 1; TRAIN_CUDA_SYNC=1 moves an
 * asynchronous fault to the check right after the call that caused it; a
 * caller's contract violation is named. Each case runs in a forked child.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/gpu.h"
#include "tests/fakecuda/runtime/fake.h"
#include "tests/fakecuda/suite/forked.h"

static void setup(void)
{
    fake_reset();
    fake_set_quiet(1);
}

TestSuite(errors, .init = setup);

static backend *make(void)
{
    errbuf e;
    backend *be = backend_cuda_create(0, &e);
    if (!be) {
        fprintf(stderr, "create failed: %s\n", e.msg);
        exit(3);
    }
    return be;
}

static void expect_match(const char *text, const char *pattern)
{
    regex_t re;
    cr_assert_eq(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0);
    cr_expect_eq(regexec(&re, text, 0, NULL, 0), 0, "stderr does not match /%s/:\n%s", pattern,
                 text);
    regfree(&re);
}

static void alloc_fails(void *arg)
{
    (void)arg;
    backend *be = make();
    fake_fail_next("cudaMalloc", cudaErrorMemoryAllocation);
    be->ops->alloc(be, 1024);
}

Test(errors, cuda_check_names_statement_place_and_error)
{
    forked r;
    run_forked(alloc_fails, NULL, &r);
    cr_expect_eq(r.status, 1);
    expect_match(r.err, "CUDA error cudaErrorMemoryAllocation: out of device memory");
    expect_match(r.err, "in +cudaMalloc\\(&p, bytes\\)");
    expect_match(r.err, "at +cuda/backend\\.c:[0-9]+ \\(gpu_alloc\\), device 0");
    expect_match(r.err, "TRAIN_CUDA_SYNC=1");
    free(r.err);
}

static void conv_fails(void *arg)
{
    (void)arg;
    backend *be = make();
    conv_shape s;
    conv_shape_init(&s, 1, 1, 5, 5, 1, 3, 3, 1, 0);
    void *plan = be->ops->conv_plan(be, &s);
    float *x = be->ops->alloc(be, 100), *w = be->ops->alloc(be, 36), *b = be->ops->alloc(be, 4),
          *y = be->ops->alloc(be, 36);
    fake_fail_next("cudnnConvolutionForward", CUDNN_STATUS_EXECUTION_FAILED);
    be->ops->conv_forward(be, plan, y, x, w, b, &s);
}

Test(errors, cudnn_check_names_statement_place_and_error)
{
    forked r;
    run_forked(conv_fails, NULL, &r);
    cr_expect_eq(r.status, 1);
    expect_match(r.err, "cuDNN error CUDNN_STATUS_EXECUTION_FAILED");
    expect_match(r.err, "in +cudnnConvolutionForward\\(g->dnn, &one");
    expect_match(r.err, "at +cuda/conv\\.c:[0-9]+ \\(gpu_conv_forward\\)");
    free(r.err);
}

static void gemm_fails(void *arg)
{
    (void)arg;
    backend *be = make();
    float *in = be->ops->alloc(be, 8 * 4), *w = be->ops->alloc(be, 8 * 4),
          *b = be->ops->alloc(be, 4 * 4), *out = be->ops->alloc(be, 8 * 4);
    fake_fail_next("cublasSgemm", CUBLAS_STATUS_EXECUTION_FAILED);
    be->ops->fc_forward(be, out, in, w, b, 2, 2, 4);
}

Test(errors, cublas_check_names_statement_place_and_error)
{
    forked r;
    run_forked(gemm_fails, NULL, &r);
    cr_expect_eq(r.status, 1);
    expect_match(r.err, "cuBLAS error CUBLAS_STATUS_EXECUTION_FAILED");
    expect_match(r.err, "in +cublasSgemm\\(g->blas, CUBLAS_OP_T, CUBLAS_OP_N");
    expect_match(r.err, "at +cuda/layers\\.c:[0-9]+ \\(gpu_fc_forward\\)");
    free(r.err);
}

/* An asynchronous fault: the relu is enqueued fine and faults when it runs
 * on the device. Without TRAIN_CUDA_SYNC nothing notices at the relu call
 * (a later check would report it, far from the cause); with it, the check
 * of the relu call itself reports it. */
static void async_fault(void *arg)
{
    if (arg)
        setenv("TRAIN_CUDA_SYNC", "1", 1);
    backend *be = make();
    float *x = be->ops->alloc(be, 64), *y = be->ops->alloc(be, 64);
    fake_fault_next("cudnnActivationForward");
    be->ops->relu_forward(be, y, x, 16);
    fprintf(stderr, "relu returned\n");
}

Test(errors, train_cuda_sync_reports_async_faults_at_the_call)
{
    forked r;
    run_forked(async_fault, NULL, &r);
    cr_expect_eq(r.status, 0, "without the switch the fault is not seen here: %s", r.err);
    cr_expect(strstr(r.err, "relu returned") != NULL);
    free(r.err);
    run_forked(async_fault, (void *)1, &r);
    cr_expect_eq(r.status, 1);
    expect_match(r.err, "CUDA error cudaErrorIllegalAddress");
    expect_match(r.err, "in +cudnnActivationForward");
    expect_match(r.err, "at +cuda/layers\\.c:[0-9]+ \\(gpu_relu_forward\\)");
    expect_match(r.err, "asynchronous fault of earlier work, surfaced by TRAIN_CUDA_SYNC");
    cr_expect(strstr(r.err, "relu returned") == NULL);
    free(r.err);
}

static void kernel_gets_host_pointer(void *arg)
{
    (void)arg;
    fake_set_quiet(0);
    backend *be = make();
    float host[16] = {0};
    float *v = be->ops->alloc(be, sizeof host);
    be->ops->sgd_update(be, host, v, v, 16, 0.1f, 0.0f, 0.0f);
}

Test(errors, kernel_launch_with_host_pointer_is_caught_at_the_launch)
{
    forked r;
    run_forked(kernel_gets_host_pointer, NULL, &r);
    cr_expect_eq(r.status, 1);
    expect_match(r.err, "fakecuda: sgd_kernel: kernel argument 0 is host memory");
    expect_match(r.err, "CUDA error cudaErrorInvalidValue");
    expect_match(r.err, "in +launch sgd_kernel<<<");
    expect_match(r.err, "at +cuda/kernels\\.cu:[0-9]+ \\(gpu_launch_sgd\\)");
    free(r.err);
}

static void plan_for_other_shape(void *arg)
{
    (void)arg;
    backend *be = make();
    conv_shape a, b;
    conv_shape_init(&a, 1, 1, 5, 5, 1, 3, 3, 1, 0);
    conv_shape_init(&b, 2, 1, 5, 5, 1, 3, 3, 1, 0);
    void *plan = be->ops->conv_plan(be, &a);
    float *x = be->ops->alloc(be, 200), *w = be->ops->alloc(be, 36), *bias = be->ops->alloc(be, 4),
          *y = be->ops->alloc(be, 72);
    be->ops->conv_forward(be, plan, y, x, w, bias, &b);
}

static void too_many_channels(void *arg)
{
    (void)arg;
    backend *be = make();
    float mean[17] = {0}, sd[17];
    for (int c = 0; c < 17; c++)
        sd[c] = 1;
    uint8_t *in = be->ops->alloc(be, 17);
    float *out = be->ops->alloc(be, 17 * 4);
    be->ops->normalize_u8(be, out, in, 1, 17, 1, mean, sd);
}

Test(errors, caller_contract_violations_are_named)
{
    forked r;
    run_forked(plan_for_other_shape, NULL, &r);
    cr_expect_eq(r.status, 1);
    expect_match(r.err, "gpu_conv_forward: the plan was made for another shape");
    free(r.err);
    run_forked(too_many_channels, NULL, &r);
    cr_expect_eq(r.status, 1);
    expect_match(r.err, "gpu_normalize_u8: 17 channels \\(1\\.\\.16 supported\\)");
    free(r.err);
}

Test(errors, create_failure_is_an_errbuf_not_an_exit)
{
    fake_fail_next("cudnnCreate", CUDNN_STATUS_NOT_INITIALIZED);
    errbuf e = {{0}};
    cr_assert_null(backend_cuda_create(0, &e));
    cr_expect(strstr(e.msg, "cudnnCreate: CUDNN_STATUS_NOT_INITIALIZED"), "%s", e.msg);
    cr_expect_eq(fake_live_objects(), 0, "the half-made backend was taken apart");
    cr_expect_eq(fake_live_allocations(), 0);
}
