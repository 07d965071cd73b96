/* test_conv_plan.c — algorithm choice and workspace sizing in conv_plan,
 * against the fake's tables (tests/fakecuda/runtime/cudnn.c) built to trip naive
 * selection: imprecise FFT first, a TF32-eligible entry, non-deterministic
 * backward algorithms, and a backward-filter choice that needs more
 * workspace than the forward one. Both the _v7 heuristics and cudnnFind*
 * (TRAIN_CUDNN_FIND=1) paths.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <cudnn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda/gpu.h"
#include "cuda/internal.h"
#include "tests/fakecuda/runtime/fake.h"
#include "tests/support/gpu_test.h"

static void setup(void)
{
    fake_reset();
    unsetenv("TRAIN_CUDNN_FIND");
    unsetenv("TRAIN_CUDNN_TF32");
}

TestSuite(conv_plan, .init = setup);

static void run_once(backend *be, const conv_shape *s)
{
    const backend_ops *o = be->ops;
    size_t nx = (size_t)s->B * s->C * s->H * s->W, nw = (size_t)s->K * s->C * s->R * s->S;
    size_t ny = (size_t)s->B * s->K * s->OH * s->OW;
    float *x = o->alloc(be, nx * 4), *w = o->alloc(be, nw * 4), *b = o->alloc(be, s->K * 4);
    float *y = o->alloc(be, ny * 4), *dx = o->alloc(be, nx * 4), *dw = o->alloc(be, nw * 4),
          *db = o->alloc(be, s->K * 4);
    void *plan = o->conv_plan(be, s);
    o->conv_forward(be, plan, y, x, w, b, s);
    o->conv_backward(be, plan, dx, dw, db, y, x, w, s);
    o->synchronize(be);
    o->conv_plan_free(be, plan);
    float *all[] = {x, w, b, y, dx, dw, db};
    for (int i = 0; i < 7; i++)
        o->free(be, all[i]);
}

static void expect_choices(void)
{
    for (int dir = 0; dir < 3; dir++)
        cr_expect_eq(fake_last_math(dir), CUDNN_FMA_MATH, "direction %d ran with FMA math", dir);
    cr_expect_eq(fake_last_algo(0), CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                 "forward: not FFT (imprecise), not the default-math entry (TF32)");
    cr_expect_eq(fake_last_algo(1), CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
                 "backward data: deterministic");
    cr_expect_eq(fake_last_algo(2), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                 "backward filter: deterministic");
}

Test(conv_plan, heuristic_choice_and_shared_workspace)
{
    backend *be = gt_backend();
    conv_shape s;
    conv_shape_init(&s, 2, 3, 10, 10, 4, 3, 3, 1, 1);
    run_once(be, &s); /* the fake refuses a workspace smaller than an algorithm needs */
    expect_choices();
    cr_expect_eq(fake_calls("cudnnGetConvolutionForwardAlgorithm_v7"), 1);
    cr_expect_eq(fake_calls("cudnnFindConvolutionForwardAlgorithm"), 0);
    /* a larger second shape grows the workspace; the first plan's still fits */
    conv_shape big;
    conv_shape_init(&big, 2, 8, 20, 20, 4, 5, 5, 1, 2);
    run_once(be, &big);
    run_once(be, &s);
    cr_expect_eq(fake_calls("cudnnConvolutionBackwardFilter"), 3);
    gt_done(be);
}

Test(conv_plan, find_path_on_request)
{
    setenv("TRAIN_CUDNN_FIND", "1", 1);
    backend *be = gt_backend();
    conv_shape s;
    conv_shape_init(&s, 1, 2, 7, 9, 3, 3, 3, 2, 0);
    run_once(be, &s);
    expect_choices();
    cr_expect_eq(fake_calls("cudnnFindConvolutionForwardAlgorithm"), 1);
    cr_expect_eq(fake_calls("cudnnFindConvolutionBackwardDataAlgorithm"), 1);
    cr_expect_eq(fake_calls("cudnnFindConvolutionBackwardFilterAlgorithm"), 1);
    cr_expect_eq(fake_calls("cudnnGetConvolutionForwardAlgorithm_v7"), 0);
    gt_done(be);
}

/* a library that reports every candidate with default math (TF32-eligible
 * on Ampere): the deterministic, precise ones are still taken, forced to FMA */
Test(conv_plan, default_math_candidates_are_forced_to_fma)
{
    fake_cudnn_default_math_only(1);
    backend *be = gt_backend();
    conv_shape s;
    conv_shape_init(&s, 2, 3, 6, 6, 2, 3, 3, 1, 1);
    run_once(be, &s);
    cr_expect_eq(fake_last_algo(0), CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                 "the first deterministic precise candidate, now that none says FMA");
    cr_expect_eq(fake_last_algo(2), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1);
    for (int dir = 0; dir < 3; dir++)
        cr_expect_eq(fake_last_math(dir), CUDNN_FMA_MATH, "direction %d forced to FMA", dir);
    gt_done(be);
}

/* the property the fake's tables encode: the filter pass's choice needs
 * more than the forward's, so sizing from the forward alone would fail */
Test(conv_plan, fake_tables_make_the_filter_pass_the_largest)
{
    int x[4] = {2, 3, 10, 10}, w[4] = {4, 3, 3, 3}, y[4] = {2, 4, 10, 10};
    size_t f = fake_workspace_need(0, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, x, w, y);
    size_t d = fake_workspace_need(1, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, x, w, y);
    size_t k = fake_workspace_need(2, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, x, w, y);
    cr_expect_gt(k, f);
    cr_expect_gt(k, d);
}

/* only non-deterministic tensor-op candidates: the last resort is taken,
 * with FMA math unless TF32 was asked for (TRAIN_CUDNN_TF32=1) */
Test(conv_plan, the_last_resort_keeps_tf32_only_on_request)
{
    fake_cudnn_tensor_op_nondeterministic_only(1);
    backend *be = gt_backend();
    conv_shape s;
    conv_shape_init(&s, 2, 3, 6, 6, 2, 3, 3, 1, 1);
    run_once(be, &s);
    for (int dir = 0; dir < 3; dir++)
        cr_expect_eq(fake_last_math(dir), CUDNN_FMA_MATH, "direction %d: no TF32 unasked", dir);
    gt_done(be);
    fake_reset();
    fake_cudnn_tensor_op_nondeterministic_only(1);
    setenv("TRAIN_CUDNN_TF32", "1", 1);
    be = gt_backend();
    run_once(be, &s);
    for (int dir = 0; dir < 3; dir++)
        cr_expect_eq(fake_last_math(dir), CUDNN_TENSOR_OP_MATH, "direction %d: TF32 asked for",
                     dir);
    gt_done(be);
}

/* the chosen algorithms and their math are named (train prints this line
 * for every plan it makes) */
Test(conv_plan, the_plan_names_its_algorithms_and_math)
{
    backend *be = gt_backend();
    conv_shape s;
    conv_shape_init(&s, 2, 3, 8, 8, 4, 3, 3, 1, 1);
    void *plan = be->ops->conv_plan(be, &s);
    char d[256];
    gpu_conv_plan_describe(plan, d, sizeof d);
    cr_expect_str_eq(d, "conv 3x8x8 -> 4 3x3 (batch 2): forward IMPLICIT_PRECOMP_GEMM (FMA), "
                        "backward data ALGO_1 (FMA), backward filter ALGO_1 (FMA)");
    be->ops->conv_plan_free(be, plan);
    gt_done(be);
}

/* every candidate of a tier failing is an error naming the direction, never
 * algorithm 0 run anyway (a plan is made in a child: gpu_fatal exits) */
Test(conv_plan, no_usable_algorithm_stops_with_the_direction_named)
{
    fflush(NULL);
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        fake_cudnn_no_usable_algorithm(1);
        backend *be = gt_backend();
        conv_shape s;
        conv_shape_init(&s, 2, 3, 6, 6, 2, 3, 3, 1, 1);
        void *plan = be->ops->conv_plan(be, &s);
        (void)plan;
        _exit(0); /* reached only when the plan was made anyway */
    }
    close(fd[1]);
    char buf[4096];
    size_t n = 0;
    ssize_t k;
    while (n < sizeof buf - 1 && (k = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)k;
    buf[n] = '\0';
    close(fd[0]);
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) != 0, "the plan was made with no usable algorithm");
    cr_expect(strstr(buf, "cuDNN offers no usable forward algorithm"), "stderr: %s", buf);
}
