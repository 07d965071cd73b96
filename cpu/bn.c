/* bn.c — batch normalisation, element-wise add and copy on the CPU
 * (the ops of backend.h that residual nets add).
 *
 * Batch norm runs one task per channel: a channel's N = B x HW values are
 * B rows of HW floats. Statistics are two-pass (mean first, then the sum of
 * squared deviations from it), so the variance does not suffer the
 * cancellation of E[x^2] - E[x]^2 when the mean is large; each row is summed
 * in float over CPU_VEC lanes, the rows are added in double in row order.
 * Every channel is one task whatever the thread count, so the numbers do
 * not depend on it (backend.c). The per-element arithmetic is
 * nn/kernels.h's, shared with the GPU build. The loops are vec.h's: AVX-512
 * or AVX2 where the CPU runs them, the portable loops' bits either way.
 *
 * Left out: fusing batch norm with the relu after it or the convolution
 * before it (the interface keeps them separate ops).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include "cpu/internal.h"
#include "cpu/vec.h"
#include "nn/kernels.h"

#define ELEM_BLOCK 32768

typedef struct bn_job {
    float *y, *save_mean, *save_invstd, *run_mean, *run_var, *dscale, *dshift;
    const float *x, *dy, *scale, *shift, *mean_in, *invstd_in, *rm, *rv;
    int B, C, HW;
    float momentum, eps;
    const cpu_vec_ops *v;
} bn_job;

static const float *row_of(const float *p, const bn_job *j, int b, int c)
{
    return p + ((size_t)b * j->C + c) * (size_t)j->HW;
}

static void bn_fwd_train_task(void *arg, int c, int thread)
{
    (void)thread;
    bn_job *j = arg;
    size_t HW = (size_t)j->HW, stride = (size_t)j->C * HW;
    const float *x = row_of(j->x, j, 0, c);
    double N = (double)j->B * (double)HW, s = j->v->sum(x, stride, j->B, HW);
    float mean = (float)(s / N);
    double var = j->v->sq(x, stride, j->B, HW, mean) / N;
    float invstd = k_bn_invstd((float)var, j->eps);
    j->v->bn_apply((float *)row_of(j->y, j, 0, c), x, stride, j->B, HW, mean, invstd, j->scale[c],
                   j->shift[c]);
    j->save_mean[c] = mean;
    j->save_invstd[c] = invstd;
    j->run_mean[c] = k_bn_running(j->run_mean[c], mean, j->momentum);
    j->run_var[c] =
        k_bn_running(j->run_var[c], (float)(N > 1.0 ? var * N / (N - 1.0) : var), j->momentum);
}

static void bn_fwd_infer_task(void *arg, int c, int thread)
{
    (void)thread;
    bn_job *j = arg;
    float invstd = k_bn_invstd(j->rv[c], j->eps);
    j->v->bn_apply((float *)row_of(j->y, j, 0, c), row_of(j->x, j, 0, c), (size_t)j->C * j->HW,
                   j->B, (size_t)j->HW, j->rm[c], invstd, j->scale[c], j->shift[c]);
}

static void bn_bwd_task(void *arg, int c, int thread)
{
    (void)thread;
    bn_job *j = arg;
    size_t HW = (size_t)j->HW, stride = (size_t)j->C * HW;
    const float *x = row_of(j->x, j, 0, c), *dy = row_of(j->dy, j, 0, c);
    float mean = j->mean_in[c], invstd = j->invstd_in[c];
    double sdy, sdyx;
    j->v->bn_sums(&sdy, &sdyx, x, dy, stride, j->B, HW, mean, invstd);
    j->dshift[c] = (float)sdy;
    j->dscale[c] = (float)sdyx;
    if (!j->y)
        return;
    double N = (double)j->B * (double)HW;
    float mdy = (float)(sdy / N), mdyx = (float)(sdyx / N), si = j->scale[c] * invstd;
    j->v->bn_grad((float *)row_of(j->y, j, 0, c), x, dy, stride, j->B, HW, mean, invstd, si, mdy,
                  mdyx);
}

void cpu_bn_forward_train(backend *be, float *y, float *save_mean, float *save_invstd,
                          float *run_mean, float *run_var, const float *x, const float *scale,
                          const float *shift, int B, int C, int HW, float momentum, float eps)
{
    bn_job j = {.y = y,
                .save_mean = save_mean,
                .save_invstd = save_invstd,
                .run_mean = run_mean,
                .run_var = run_var,
                .x = x,
                .scale = scale,
                .shift = shift,
                .B = B,
                .C = C,
                .HW = HW,
                .momentum = momentum,
                .eps = eps,
                .v = cpu_vec()};
    cpu_run(be, C, bn_fwd_train_task, &j);
}

void cpu_bn_forward_infer(backend *be, float *y, const float *x, const float *scale,
                          const float *shift, const float *run_mean, const float *run_var, int B,
                          int C, int HW, float eps)
{
    bn_job j = {.y = y,
                .x = x,
                .scale = scale,
                .shift = shift,
                .rm = run_mean,
                .rv = run_var,
                .B = B,
                .C = C,
                .HW = HW,
                .eps = eps,
                .v = cpu_vec()};
    cpu_run(be, C, bn_fwd_infer_task, &j);
}

void cpu_bn_backward(backend *be, float *dx, float *dscale, float *dshift, const float *dy,
                     const float *x, const float *scale, const float *save_mean,
                     const float *save_invstd, int B, int C, int HW)
{
    bn_job j = {.y = dx,
                .dscale = dscale,
                .dshift = dshift,
                .dy = dy,
                .x = x,
                .scale = scale,
                .mean_in = save_mean,
                .invstd_in = save_invstd,
                .B = B,
                .C = C,
                .HW = HW,
                .v = cpu_vec()};
    cpu_run(be, C, bn_bwd_task, &j);
}

/* ---------------------------------------------------------------- add, copy */
typedef struct add_job {
    float *out;
    const float *a, *b;
    size_t n;
    const cpu_vec_ops *v;
} add_job;

static void add_task(void *arg, int t, int thread)
{
    (void)thread;
    add_job *j = arg;
    size_t s = (size_t)t * ELEM_BLOCK, n = s + ELEM_BLOCK < j->n ? ELEM_BLOCK : j->n - s;
    float *o = j->out + s;
    const float *a = j->a + s, *b = j->b ? j->b + s : NULL;
    /* out may be a or b (the model's gradient sums are out == a); k_add is
     * commutative, so o + b and b + o are the same bits */
    if (!b)
        j->v->copy(o, a, n);
    else if (o == a)
        j->v->add_into(o, b, n);
    else if (o == b)
        j->v->add_into(o, a, n);
    else
        j->v->add(o, a, b, n);
}

void cpu_add(backend *be, float *out, const float *a, const float *b, size_t n)
{
    add_job j = {out, a, b, n, cpu_vec()};
    cpu_run(be, cpu_ntasks(n, ELEM_BLOCK), add_task, &j);
}

void cpu_copy_floats(backend *be, float *dst, const float *src, size_t n)
{
    add_job j = {dst, src, NULL, n, cpu_vec()};
    cpu_run(be, cpu_ntasks(n, ELEM_BLOCK), add_task, &j);
}
