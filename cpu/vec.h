/* vec.h — the CPU backend's batch-norm and element-wise loops (bn.c,
 * backend.c), in a portable version (vec.c) and AVX2 / AVX-512 versions
 * (vec_x86.c) chosen at run time by what the CPU runs.
 *
 * Every version gives the portable loops' bits: the element-wise ones
 * compute each element with the same operations in the same order (a
 * separate multiply and add, never a fused one), and the sums keep the
 * portable order: per row, CPU_VEC float lanes (lane k adds elements
 * k, k + CPU_VEC, ... of the row's whole blocks), the tail added in order
 * to a float starting at 0, then the lanes 0..CPU_VEC-1 added to it in
 * order; rows added in double in row order. The vector versions are faster
 * because they run those lanes in registers and several rows' chains at
 * once, not because they sum differently.
 *
 * A batch-norm channel is `rows` rows of n floats, row b at p + b * stride
 * (for x, dy and their outputs alike).
 */
#ifndef TRAIN_CPU_VEC_H
#define TRAIN_CPU_VEC_H

#include <stddef.h>

typedef struct cpu_vec_ops {
    const char *name; /* "portable", "avx2", "avx512" */
    /* sum of every x */
    double (*sum)(const float *x, size_t stride, int rows, size_t n);
    /* sum of (x - m)^2 */
    double (*sq)(const float *x, size_t stride, int rows, size_t n, float m);
    /* y = k_bn_apply(x, mean, invstd, sc, sh) */
    void (*bn_apply)(float *y, const float *x, size_t stride, int rows, size_t n, float mean,
                     float invstd, float sc, float sh);
    /* *sdy = sum of dy, *sdyx = sum of dy * ((x - mean) * invstd) */
    void (*bn_sums)(double *sdy, double *sdyx, const float *x, const float *dy, size_t stride,
                    int rows, size_t n, float mean, float invstd);
    /* dx = k_bn_grad(dy, (x - mean) * invstd, si, mdy, mdyx) */
    void (*bn_grad)(float *dx, const float *x, const float *dy, size_t stride, int rows, size_t n,
                    float mean, float invstd, float si, float mdy, float mdyx);
    /* the fusions with the relu after batch norm (backend.h's bn_relu_*):
     * y = k_relu(k_add(k_bn_apply(x, ...), r)), or k_relu(k_bn_apply(x, ...))
     * when r is NULL (r: rows like x); bn_sums and bn_grad with
     * dy = k_relu_grad(g, yr) (yr: the relu's output), bn_sums_relu also
     * storing that dy into dyo unless it is NULL */
    void (*bn_apply_relu)(float *y, const float *x, const float *r, size_t stride, int rows,
                          size_t n, float mean, float invstd, float sc, float sh);
    void (*bn_sums_relu)(double *sdy, double *sdyx, float *dyo, const float *x, const float *g,
                         const float *yr, size_t stride, int rows, size_t n, float mean,
                         float invstd);
    void (*bn_grad_relu)(float *dx, const float *x, const float *g, const float *yr, size_t stride,
                         int rows, size_t n, float mean, float invstd, float si, float mdy,
                         float mdyx);
    /* element-wise over n floats: o = k_relu(x); o = k_relu_grad(g, y);
     * o = k_add(o, x); o = k_add(a, b); o = x; o = v (the pointers of one
     * call do not overlap) */
    void (*relu_fwd)(float *o, const float *x, size_t n);
    void (*relu_bwd)(float *o, const float *g, const float *y, size_t n);
    void (*add_into)(float *o, const float *x, size_t n);
    void (*add)(float *o, const float *a, const float *b, size_t n);
    void (*copy)(float *o, const float *x, size_t n);
    void (*fill)(float *o, float v, size_t n);
} cpu_vec_ops;

enum { CPU_VEC_PORTABLE, CPU_VEC_AVX2, CPU_VEC_AVX512, CPU_VEC_LEVELS };

/* The best version this CPU runs (or the one cpu_vec_force chose). Cheap:
 * the ops call it once per operation. */
const cpu_vec_ops *cpu_vec(void);

/* The version of `level`, or NULL when this CPU (or build) lacks it. */
const cpu_vec_ops *cpu_vec_level(int level);

/* For tests and benchmarks: cpu_vec() returns `level`'s version from now
 * on (when the CPU runs it), or the best again with -1. Not thread-safe:
 * call it between operations. */
void cpu_vec_force(int level);

/* vec_x86.c: the AVX2 and AVX-512 tables, NULL where the CPU lacks them */
const cpu_vec_ops *cpu_vec_x86(int level);

#endif
