/* internal.h — what the CPU backend's files share (not a public API).
 *
 * The CPU backend runs its own small thread pool and calls OpenBLAS
 * single-threaded from each of its threads. Every operation is cut into tasks
 * whose boundaries depend only on the shapes — never on the thread count —
 * and each reduction adds its partial results in a fixed order, so results
 * are bit-identical for 1, 2 or 8 threads (see backend.c).
 */
#ifndef TRAIN_CPU_INTERNAL_H
#define TRAIN_CPU_INTERNAL_H

#include <stddef.h>

#include "cpu/conv_choice.h"
#include "nn/backend.h"

/* ---- the backend's threads (threads.c) */
typedef struct cpu_threads cpu_threads;
/* one task; `thread` is in [0, threads) and indexes per-thread scratch */
typedef void (*cpu_task_fn)(void *arg, int task, int thread);

/* threads >= 1, counting the calling thread; the worker threads start on
 * the first run that has more than one task (so after the loader's fork). */
cpu_threads *cpu_threads_create(int threads);
void cpu_threads_free(cpu_threads *p);
/* Runs fn(arg, i, thread) for i in [0, ntasks) and returns when all are
 * done, or, once cancel is non-NULL and *cancel nonzero, when the tasks
 * already started are done (the rest never run). */
void cpu_threads_run(cpu_threads *p, int ntasks, cpu_task_fn fn, void *arg,
                     volatile sig_atomic_t *cancel);

typedef struct cpu_ctx {
    int threads;
    /* the convolutions' scratch (im2col, padded inputs, weight-gradient
     * partials), shared by every plan: operations run one at a time and
     * each rewrites what it reads, so one arena as large as the largest
     * plan needs is enough (conv.c) */
    float *conv_scratch;
    size_t conv_scratch_n; /* floats */
    /* the fully connected layers' tree levels (fc.c), grown on demand */
    float *fc_scratch;
    size_t fc_scratch_n; /* floats */
    cpu_threads *workers;
    /* the kernels new convolution plans may use: conv_caps_cpu() */
    conv_caps conv_caps;
    /* backend_ops.batch_groups: 0, or the groups every batch is cut into */
    int ngroups;
    int group[BACKEND_GROUPS_MAX];
} cpu_ctx;

static inline cpu_ctx *cpu_ctx_of(backend *be) { return (cpu_ctx *)be->ctx; }

/* The groups of a batch of B samples (backend_ops.batch_groups): into
 * size, returning how many; without groups, one group of B. Exits when the
 * groups set do not add up to B (an internal error). */
int cpu_groups(backend *be, int B, int *size, const char *op);

/* floats of scratch in *buf (holding *n), grown when n < need: only
 * between an operation's tasks, when nothing in it is live */
float *cpu_scratch(backend *be, float **buf, size_t *n, size_t need);

/* An operation's tasks on the backend's threads, cut short when the backend is
 * cancelled (backend.cancel). */
static inline void cpu_run(backend *be, int ntasks, cpu_task_fn fn, void *arg)
{
    cpu_threads_run(cpu_ctx_of(be)->workers, ntasks, fn, arg, be->cancel);
}

/* ---- memory (backend.c): 64-byte aligned, zero-filled, exits on OOM */
void *cpu_alloc(backend *be, size_t bytes);
void cpu_free(backend *be, void *p);

/* ---- convolution (conv.c); the algorithm of each pass is conv_choose's
 * (conv_choice.h) */
void *cpu_conv_plan(backend *be, const conv_shape *s);
/* a plan under caps (less what this CPU cannot run: conv_caps_and_cpu)
 * instead of the backend's: the tests' way to force an algorithm */
void *cpu_conv_plan_caps(backend *be, const conv_shape *s, const conv_caps *caps);
/* what a plan runs */
conv_choice cpu_conv_plan_choice(const void *plan);
/* backend_ops.conv_describe: "fwd/din/dw" of conv_choose for shape s */
void cpu_conv_describe(backend *be, const conv_shape *s, char *buf, size_t len);
void cpu_conv_plan_free(backend *be, void *plan);
void cpu_conv_forward(backend *be, void *plan, float *out, const float *in, const float *w,
                      const float *bias, const conv_shape *s);
void cpu_conv_backward(backend *be, void *plan, float *din, float *dw, float *dbias,
                       const float *dout, const float *in, const float *w, const conv_shape *s);

/* ---- fully connected (fc.c) */
void cpu_fc_forward(backend *be, float *out, const float *in, const float *w, const float *bias,
                    int B, int M, int N);
void cpu_fc_backward(backend *be, float *din, float *dw, float *dbias, const float *dout,
                     const float *in, const float *w, int B, int M, int N);

/* ---- batch norm (alone and fused with relu), add, copy (bn.c); see backend.h */
void cpu_bn_forward_train(backend *be, float *y, float *save_mean, float *save_invstd,
                          float *run_mean, float *run_var, const float *x, const float *scale,
                          const float *shift, int B, int C, int HW, float momentum, float eps);
void cpu_bn_forward_infer(backend *be, float *y, const float *x, const float *scale,
                          const float *shift, const float *run_mean, const float *run_var, int B,
                          int C, int HW, float eps);
void cpu_bn_backward(backend *be, float *dx, float *dscale, float *dshift, const float *dy,
                     const float *x, const float *scale, const float *save_mean,
                     const float *save_invstd, int B, int C, int HW);
void cpu_bn_relu_forward_train(backend *be, float *y, float *save_mean, float *save_invstd,
                               float *run_mean, float *run_var, const float *x, const float *res,
                               const float *scale, const float *shift, int B, int C, int HW,
                               float momentum, float eps);
void cpu_bn_relu_forward_infer(backend *be, float *y, const float *x, const float *res,
                               const float *scale, const float *shift, const float *run_mean,
                               const float *run_var, int B, int C, int HW, float eps);
void cpu_bn_relu_backward(backend *be, float *dx, float *dscale, float *dshift, float *dy_out,
                          const float *g, const float *yr, const float *x, const float *scale,
                          const float *save_mean, const float *save_invstd, int B, int C, int HW);
void cpu_add(backend *be, float *out, const float *a, const float *b, size_t n);
void cpu_copy_floats(backend *be, float *dst, const float *src, size_t n);

/* Small loops in a shape gcc vectorises at -O2 (its "very cheap" cost
 * model takes fixed-count inner loops over restrict pointers, not loops
 * that need a runtime epilogue or alias check). */
#define CPU_VEC 8

/* Copies and fills go through 16-byte vectors held opaque to the optimiser:
 * gcc otherwise turns them into memcpy/memset calls, which cost more than
 * the 8-24 floats im2col moves at a time. Runs of CPU_VLONG floats or more
 * go to the widest version the CPU runs instead (vec.h's fill, copy and
 * add_into: the same bits), through a call that short runs would not
 * repay. */
typedef float cpu_f4 __attribute__((vector_size(16), aligned(4), may_alias));
#if defined(__x86_64__) || defined(__i386__)
#define CPU_OPAQUE(v) __asm__("" : "+x"(v))
#else
#define CPU_OPAQUE(v) ((void)0)
#endif

#define CPU_VLONG 256
/* vec.c: the fill, copy and o += x of cpu_vec() */
void cpu_vfill_long(float *o, float v, size_t n);
void cpu_vcopy_long(float *o, const float *x, size_t n);
void cpu_vadd_long(float *o, const float *x, size_t n);

static inline void cpu_vfill_short(float *restrict o, float v, size_t n)
{
    cpu_f4 vv = {v, v, v, v};
    CPU_OPAQUE(vv);
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        *(cpu_f4 *)(o + i) = vv;
    for (; i < n; i++) {
        float s = v;
        CPU_OPAQUE(s);
        o[i] = s;
    }
}

static inline void cpu_vcopy_short(float *restrict o, const float *restrict x, size_t n)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        cpu_f4 v = *(const cpu_f4 *)(x + i);
        CPU_OPAQUE(v);
        *(cpu_f4 *)(o + i) = v;
    }
    for (; i < n; i++) {
        float s = x[i];
        CPU_OPAQUE(s);
        o[i] = s;
    }
}

/* o += x */
static inline void cpu_vadd_short(float *restrict o, const float *restrict x, size_t n)
{
    size_t i = 0;
    for (; i + CPU_VEC <= n; i += CPU_VEC)
        for (int k = 0; k < CPU_VEC; k++)
            o[i + k] += x[i + k];
    for (; i < n; i++)
        o[i] += x[i];
}

static inline void cpu_vfill(float *restrict o, float v, size_t n)
{
    if (n >= CPU_VLONG)
        cpu_vfill_long(o, v, n);
    else
        cpu_vfill_short(o, v, n);
}

static inline void cpu_vcopy(float *restrict o, const float *restrict x, size_t n)
{
    if (n >= CPU_VLONG)
        cpu_vcopy_long(o, x, n);
    else
        cpu_vcopy_short(o, x, n);
}

/* o += x */
static inline void cpu_vadd(float *restrict o, const float *restrict x, size_t n)
{
    if (n >= CPU_VLONG)
        cpu_vadd_long(o, x, n);
    else
        cpu_vadd_short(o, x, n);
}

/* Ranges of a fixed-size split: task t covers [t*block, min(n, (t+1)*block)). */
static inline int cpu_ntasks(size_t n, size_t block)
{
    return n == 0 ? 0 : (int)((n + block - 1) / block);
}

#endif
