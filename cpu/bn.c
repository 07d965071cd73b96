/* bn.c — batch normalisation, element-wise add and copy on the CPU
 * (the ops of backend.h that residual nets add).
 *
 * Batch norm runs one task per channel, or per group of small channels
 * walked sample by sample (bn_run, below): a channel's N = B x HW values
 * are B rows of HW floats. Statistics are two-pass (mean first, then the sum of
 * squared deviations from it), so the variance does not suffer the
 * cancellation of E[x^2] - E[x]^2 when the mean is large; each row is summed
 * in float over CPU_VEC lanes, the rows are added in double in row order.
 * A channel's sums run in that order however the channels are grouped
 * into tasks, so the numbers depend on neither the grouping nor the
 * thread count (backend.c). The per-element arithmetic is
 * nn/kernels.h's, shared with the GPU build. The loops are vec.h's: AVX-512
 * or AVX2 where the CPU runs them, the portable loops' bits either way.
 *
 * The fused ops (bn_relu_*) run the same tasks with vec.h's fused loops:
 * the relu (and the residual add before it) applied in bn's last pass
 * forward, the relu's gradient computed on the fly in both passes
 * backward; the same operations per element in the same order, so the
 * same bits as the separate ops, with two to three passes over the tensor
 * fewer.
 *
 * Left out: fusing batch norm with the convolution before it.
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
    /* the fusions: relu after bn (res: the residual added before it, or
     * NULL); backward, yr is the relu's output (dy is then its gradient)
     * and dy_out, unless NULL, gets bn's dy */
    int relu;
    const float *res, *yr;
    float *dy_out;
    int B, C, HW;
    int G; /* channels per task (bn_run) */
    float momentum, eps;
    const cpu_vec_ops *v;
} bn_job;

static const float *row_of(const float *p, const bn_job *j, int b, int c)
{
    return p + ((size_t)b * j->C + c) * (size_t)j->HW;
}

/* channel c's output: y = bn(x), or relu(bn(x) + res) fused */
static void bn_apply(const bn_job *j, int c, float mean, float invstd)
{
    size_t HW = (size_t)j->HW, stride = (size_t)j->C * HW;
    float *y = (float *)row_of(j->y, j, 0, c);
    const float *x = row_of(j->x, j, 0, c);
    if (j->relu)
        j->v->bn_apply_relu(y, x, j->res ? row_of(j->res, j, 0, c) : NULL, stride, j->B, HW, mean,
                            invstd, j->scale[c], j->shift[c]);
    else
        j->v->bn_apply(y, x, stride, j->B, HW, mean, invstd, j->scale[c], j->shift[c]);
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
    bn_apply(j, c, mean, invstd);
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
    bn_apply(j, c, j->rm[c], k_bn_invstd(j->rv[c], j->eps));
}

static void bn_bwd_task(void *arg, int c, int thread)
{
    (void)thread;
    bn_job *j = arg;
    size_t HW = (size_t)j->HW, stride = (size_t)j->C * HW;
    const float *x = row_of(j->x, j, 0, c), *dy = row_of(j->dy, j, 0, c);
    float mean = j->mean_in[c], invstd = j->invstd_in[c];
    const float *yr = j->yr ? row_of(j->yr, j, 0, c) : NULL;
    float *dyo = j->dy_out ? (float *)row_of(j->dy_out, j, 0, c) : NULL;
    double sdy, sdyx;
    if (yr) /* dy = relu_backward(dy, yr) on the fly, kept in dyo */
        j->v->bn_sums_relu(&sdy, &sdyx, dyo, x, dy, yr, stride, j->B, HW, mean, invstd);
    else
        j->v->bn_sums(&sdy, &sdyx, x, dy, stride, j->B, HW, mean, invstd);
    j->dshift[c] = (float)sdy;
    j->dscale[c] = (float)sdyx;
    if (!j->y)
        return;
    double N = (double)j->B * (double)HW;
    float mdy = (float)(sdy / N), mdyx = (float)(sdyx / N), si = j->scale[c] * invstd;
    float *dx = (float *)row_of(j->y, j, 0, c);
    if (yr && !dyo)
        j->v->bn_grad_relu(dx, x, dy, yr, stride, j->B, HW, mean, invstd, si, mdy, mdyx);
    else /* dyo holds dy now: one stream to read instead of two */
        j->v->bn_grad(dx, x, dyo ? dyo : dy, stride, j->B, HW, mean, invstd, si, mdy, mdyx);
}

/* ---------------------------------------------------------------- groups
 * Small channels (resnet20's 64 x 7x7: 49-float rows 12.5 KB apart) make
 * each channel's B rows B separate streams of a few cache lines, and
 * their misses a wait each (a bn+relu backward over 64 x 64 x 49 floats
 * ran at 4 GB/s). A task then takes G channels and walks them sample by
 * sample: G consecutive rows, one stream, with all G channels' rows
 * still in L2 for the next pass. The rows are the same vec.h calls on
 * one row each, and each channel's row results are added in row order,
 * as the per-channel loops add them: the same bits whatever G. */

/* per-tensor bytes a task's channels may span (x 3-4 tensors in L2) */
#define BN_GROUP_BYTES (256 * 1024)
#define BN_GROUP_MAX 64

static const float *row_at(const float *p, const bn_job *j, int b, int c)
{
    return p ? row_of(p, j, b, c) : NULL;
}

static void bn_fwd_train_group(bn_job *j, int c0, int c1)
{
    const cpu_vec_ops *v = j->v;
    size_t HW = (size_t)j->HW;
    double s[BN_GROUP_MAX] = {0}, q[BN_GROUP_MAX] = {0};
    float mean[BN_GROUP_MAX], invstd[BN_GROUP_MAX];
    double N = (double)j->B * (double)HW;
    for (int b = 0; b < j->B; b++)
        for (int c = c0; c < c1; c++)
            s[c - c0] += v->sum(row_of(j->x, j, b, c), HW, 1, HW);
    for (int c = c0; c < c1; c++)
        mean[c - c0] = (float)(s[c - c0] / N);
    for (int b = 0; b < j->B; b++)
        for (int c = c0; c < c1; c++)
            q[c - c0] += v->sq(row_of(j->x, j, b, c), HW, 1, HW, mean[c - c0]);
    for (int c = c0; c < c1; c++) {
        double var = q[c - c0] / N;
        invstd[c - c0] = k_bn_invstd((float)var, j->eps);
        j->save_mean[c] = mean[c - c0];
        j->save_invstd[c] = invstd[c - c0];
        j->run_mean[c] = k_bn_running(j->run_mean[c], mean[c - c0], j->momentum);
        j->run_var[c] =
            k_bn_running(j->run_var[c], (float)(N > 1.0 ? var * N / (N - 1.0) : var), j->momentum);
    }
    for (int b = 0; b < j->B; b++)
        for (int c = c0; c < c1; c++) {
            float *y = (float *)row_of(j->y, j, b, c);
            const float *x = row_of(j->x, j, b, c);
            if (j->relu)
                v->bn_apply_relu(y, x, row_at(j->res, j, b, c), HW, 1, HW, mean[c - c0],
                                 invstd[c - c0], j->scale[c], j->shift[c]);
            else
                v->bn_apply(y, x, HW, 1, HW, mean[c - c0], invstd[c - c0], j->scale[c],
                            j->shift[c]);
        }
}

static void bn_fwd_infer_group(bn_job *j, int c0, int c1)
{
    size_t HW = (size_t)j->HW;
    for (int b = 0; b < j->B; b++)
        for (int c = c0; c < c1; c++) {
            float *y = (float *)row_of(j->y, j, b, c);
            const float *x = row_of(j->x, j, b, c);
            float invstd = k_bn_invstd(j->rv[c], j->eps);
            if (j->relu)
                j->v->bn_apply_relu(y, x, row_at(j->res, j, b, c), HW, 1, HW, j->rm[c], invstd,
                                    j->scale[c], j->shift[c]);
            else
                j->v->bn_apply(y, x, HW, 1, HW, j->rm[c], invstd, j->scale[c], j->shift[c]);
        }
}

static void bn_bwd_group(bn_job *j, int c0, int c1)
{
    const cpu_vec_ops *v = j->v;
    size_t HW = (size_t)j->HW;
    double s1[BN_GROUP_MAX] = {0}, s2[BN_GROUP_MAX] = {0};
    for (int b = 0; b < j->B; b++)
        for (int c = c0; c < c1; c++) {
            const float *x = row_of(j->x, j, b, c), *dy = row_of(j->dy, j, b, c);
            double r1, r2;
            if (j->yr)
                v->bn_sums_relu(&r1, &r2, (float *)row_at(j->dy_out, j, b, c), x, dy,
                                row_of(j->yr, j, b, c), HW, 1, HW, j->mean_in[c], j->invstd_in[c]);
            else
                v->bn_sums(&r1, &r2, x, dy, HW, 1, HW, j->mean_in[c], j->invstd_in[c]);
            s1[c - c0] += r1;
            s2[c - c0] += r2;
        }
    for (int c = c0; c < c1; c++) {
        j->dshift[c] = (float)s1[c - c0];
        j->dscale[c] = (float)s2[c - c0];
    }
    if (!j->y)
        return;
    double N = (double)j->B * (double)HW;
    for (int b = 0; b < j->B; b++)
        for (int c = c0; c < c1; c++) {
            float mean = j->mean_in[c], invstd = j->invstd_in[c], si = j->scale[c] * invstd;
            float mdy = (float)(s1[c - c0] / N), mdyx = (float)(s2[c - c0] / N);
            float *dx = (float *)row_of(j->y, j, b, c);
            const float *x = row_of(j->x, j, b, c), *dy = row_of(j->dy, j, b, c);
            if (j->yr && !j->dy_out)
                v->bn_grad_relu(dx, x, dy, row_of(j->yr, j, b, c), HW, 1, HW, mean, invstd, si, mdy,
                                mdyx);
            else
                v->bn_grad(dx, x, j->dy_out ? row_of(j->dy_out, j, b, c) : dy, HW, 1, HW, mean,
                           invstd, si, mdy, mdyx);
        }
}

typedef struct bn_run_arg {
    bn_job *j;
    cpu_task_fn one;                   /* a channel (G = 1) */
    void (*group)(bn_job *, int, int); /* channels [c0, c1) */
} bn_run_arg;

static void bn_run_task(void *arg, int t, int thread)
{
    bn_run_arg *a = arg;
    int G = a->j->G, c0 = t * G, c1 = c0 + G < a->j->C ? c0 + G : a->j->C;
    if (G == 1)
        a->one(a->j, t, thread);
    else
        a->group(a->j, c0, c1);
}

/* one task a channel, or a group of channels when they are small: as
 * many as fit BN_GROUP_BYTES, but at least 2 tasks per thread (C
 * permitting). G depends on the shape and the thread count, the bits on
 * neither. */
static void bn_run(backend *be, bn_job *j, cpu_task_fn one, void (*group)(bn_job *, int, int))
{
    size_t chan = (size_t)j->B * (size_t)j->HW * sizeof(float);
    int threads = cpu_ctx_of(be)->threads;
    int G = chan >= BN_GROUP_BYTES ? 1 : (int)(BN_GROUP_BYTES / chan);
    int most = (j->C + 2 * threads - 1) / (2 * threads); /* G for 2 tasks a thread */
    G = G > most ? most : G;
    G = G > BN_GROUP_MAX ? BN_GROUP_MAX : G < 1 ? 1 : G;
    j->G = G;
    bn_run_arg a = {j, one, group};
    cpu_run(be, (j->C + G - 1) / G, bn_run_task, &a);
}

/* One job builder per pass kind; the plain ops are the fused ones
 * without the relu (relu 0, no res, yr or dy_out). */
static void bn_train(backend *be, float *y, float *save_mean, float *save_invstd, float *run_mean,
                     float *run_var, const float *x, int relu, const float *res, const float *scale,
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
                .relu = relu,
                .res = res,
                .B = B,
                .C = C,
                .HW = HW,
                .momentum = momentum,
                .eps = eps,
                .v = cpu_vec()};
    bn_run(be, &j, bn_fwd_train_task, bn_fwd_train_group);
}

static void bn_infer(backend *be, float *y, const float *x, int relu, const float *res,
                     const float *scale, const float *shift, const float *run_mean,
                     const float *run_var, int B, int C, int HW, float eps)
{
    bn_job j = {.y = y,
                .x = x,
                .scale = scale,
                .shift = shift,
                .rm = run_mean,
                .rv = run_var,
                .relu = relu,
                .res = res,
                .B = B,
                .C = C,
                .HW = HW,
                .eps = eps,
                .v = cpu_vec()};
    bn_run(be, &j, bn_fwd_infer_task, bn_fwd_infer_group);
}

void cpu_bn_forward_train(backend *be, float *y, float *save_mean, float *save_invstd,
                          float *run_mean, float *run_var, const float *x, const float *scale,
                          const float *shift, int B, int C, int HW, float momentum, float eps)
{
    bn_train(be, y, save_mean, save_invstd, run_mean, run_var, x, 0, NULL, scale, shift, B, C, HW,
             momentum, eps);
}

void cpu_bn_forward_infer(backend *be, float *y, const float *x, const float *scale,
                          const float *shift, const float *run_mean, const float *run_var, int B,
                          int C, int HW, float eps)
{
    bn_infer(be, y, x, 0, NULL, scale, shift, run_mean, run_var, B, C, HW, eps);
}

void cpu_bn_backward(backend *be, float *dx, float *dscale, float *dshift, const float *dy,
                     const float *x, const float *scale, const float *save_mean,
                     const float *save_invstd, int B, int C, int HW)
{
    cpu_bn_relu_backward(be, dx, dscale, dshift, NULL, dy, NULL, x, scale, save_mean, save_invstd,
                         B, C, HW);
}

/* ---------------------------------------------------------------- fused with relu */
void cpu_bn_relu_forward_train(backend *be, float *y, float *save_mean, float *save_invstd,
                               float *run_mean, float *run_var, const float *x, const float *res,
                               const float *scale, const float *shift, int B, int C, int HW,
                               float momentum, float eps)
{
    bn_train(be, y, save_mean, save_invstd, run_mean, run_var, x, 1, res, scale, shift, B, C, HW,
             momentum, eps);
}

void cpu_bn_relu_forward_infer(backend *be, float *y, const float *x, const float *res,
                               const float *scale, const float *shift, const float *run_mean,
                               const float *run_var, int B, int C, int HW, float eps)
{
    bn_infer(be, y, x, 1, res, scale, shift, run_mean, run_var, B, C, HW, eps);
}

/* yr NULL: the plain backward (cpu_bn_backward) */
void cpu_bn_relu_backward(backend *be, float *dx, float *dscale, float *dshift, float *dy_out,
                          const float *g, const float *yr, const float *x, const float *scale,
                          const float *save_mean, const float *save_invstd, int B, int C, int HW)
{
    bn_job j = {.y = dx,
                .dscale = dscale,
                .dshift = dshift,
                .dy = g,
                .yr = yr,
                .dy_out = dy_out,
                .x = x,
                .scale = scale,
                .mean_in = save_mean,
                .invstd_in = save_invstd,
                .B = B,
                .C = C,
                .HW = HW,
                .v = cpu_vec()};
    bn_run(be, &j, bn_bwd_task, bn_bwd_group);
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
