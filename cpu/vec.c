/* vec.c — the portable batch-norm and element-wise loops, and the choice
 * between them and vec_x86.c's (see vec.h).
 *
 * These are the loops bn.c and backend.c had inline, unchanged: fixed-count
 * inner loops over restrict pointers, which gcc -O2 vectorises 4 wide for
 * baseline x86-64 (some of them), and which define the bits every other
 * version must give.
 */
#define _POSIX_C_SOURCE 200809L
#include "cpu/vec.h"

#include "common/assert.h"
#include "cpu/internal.h"
#include "nn/kernels.h"

/* sum of x[i] over n floats, in float lanes */
static float row_sum(const float *restrict x, size_t n)
{
    float lane[CPU_VEC] = {0};
    size_t i = 0;
    for (; i + CPU_VEC <= n; i += CPU_VEC)
        for (int k = 0; k < CPU_VEC; k++)
            lane[k] += x[i + k];
    float s = 0.0f;
    for (; i < n; i++)
        s += x[i];
    for (int k = 0; k < CPU_VEC; k++)
        s += lane[k];
    return s;
}

/* sum of (x[i] - m)^2 */
static float row_sq(const float *restrict x, size_t n, float m)
{
    float lane[CPU_VEC] = {0};
    size_t i = 0;
    for (; i + CPU_VEC <= n; i += CPU_VEC)
        for (int k = 0; k < CPU_VEC; k++) {
            float d = x[i + k] - m;
            lane[k] += d * d;
        }
    float s = 0.0f;
    for (; i < n; i++)
        s += (x[i] - m) * (x[i] - m);
    for (int k = 0; k < CPU_VEC; k++)
        s += lane[k];
    return s;
}

static double p_sum(const float *x, size_t stride, int rows, size_t n)
{
    double s = 0.0;
    for (int b = 0; b < rows; b++)
        s += row_sum(x + (size_t)b * stride, n);
    return s;
}

static double p_sq(const float *x, size_t stride, int rows, size_t n, float m)
{
    double s = 0.0;
    for (int b = 0; b < rows; b++)
        s += row_sq(x + (size_t)b * stride, n, m);
    return s;
}

static void row_apply(float *restrict y, const float *restrict x, size_t n, float mean,
                      float invstd, float sc, float sh)
{
    size_t i = 0;
    for (; i + CPU_VEC <= n; i += CPU_VEC)
        for (int k = 0; k < CPU_VEC; k++)
            y[i + k] = k_bn_apply(x[i + k], mean, invstd, sc, sh);
    for (; i < n; i++)
        y[i] = k_bn_apply(x[i], mean, invstd, sc, sh);
}

static void p_bn_apply(float *y, const float *x, size_t stride, int rows, size_t n, float mean,
                       float invstd, float sc, float sh)
{
    for (int b = 0; b < rows; b++)
        row_apply(y + (size_t)b * stride, x + (size_t)b * stride, n, mean, invstd, sc, sh);
}

static void p_bn_sums(double *sdy, double *sdyx, const float *xs, const float *dys, size_t stride,
                      int rows, size_t n, float mean, float invstd)
{
    double s1 = 0.0, s2 = 0.0;
    for (int b = 0; b < rows; b++) {
        const float *restrict x = xs + (size_t)b * stride, *restrict dy = dys + (size_t)b * stride;
        float l1[CPU_VEC] = {0}, l2[CPU_VEC] = {0}, r1 = 0.0f, r2 = 0.0f;
        size_t i = 0;
        for (; i + CPU_VEC <= n; i += CPU_VEC)
            for (int k = 0; k < CPU_VEC; k++) {
                l1[k] += dy[i + k];
                l2[k] += dy[i + k] * ((x[i + k] - mean) * invstd);
            }
        for (; i < n; i++) {
            r1 += dy[i];
            r2 += dy[i] * ((x[i] - mean) * invstd);
        }
        for (int k = 0; k < CPU_VEC; k++)
            r1 += l1[k], r2 += l2[k];
        s1 += r1;
        s2 += r2;
    }
    *sdy = s1;
    *sdyx = s2;
}

static void row_grad(float *restrict dx, const float *restrict x, const float *restrict dy,
                     size_t n, float mean, float invstd, float si, float mdy, float mdyx)
{
    size_t i = 0;
    for (; i + CPU_VEC <= n; i += CPU_VEC)
        for (int k = 0; k < CPU_VEC; k++)
            dx[i + k] = k_bn_grad(dy[i + k], (x[i + k] - mean) * invstd, si, mdy, mdyx);
    for (; i < n; i++)
        dx[i] = k_bn_grad(dy[i], (x[i] - mean) * invstd, si, mdy, mdyx);
}

static void p_bn_grad(float *dx, const float *x, const float *dy, size_t stride, int rows, size_t n,
                      float mean, float invstd, float si, float mdy, float mdyx)
{
    for (int b = 0; b < rows; b++) {
        size_t o = (size_t)b * stride;
        row_grad(dx + o, x + o, dy + o, n, mean, invstd, si, mdy, mdyx);
    }
}

/* ---- batch norm fused with the relu after it (and the residual add
 * between them): each element's operations are the separate loops', in
 * their order, so the bits are those of bn_apply, add and relu_fwd in turn,
 * or of relu_bwd then bn_sums and bn_grad */
static void row_apply_relu(float *restrict y, const float *restrict x, size_t n, float mean,
                           float invstd, float sc, float sh)
{
    size_t i = 0;
    for (; i + CPU_VEC <= n; i += CPU_VEC)
        for (int k = 0; k < CPU_VEC; k++)
            y[i + k] = k_relu(k_bn_apply(x[i + k], mean, invstd, sc, sh));
    for (; i < n; i++)
        y[i] = k_relu(k_bn_apply(x[i], mean, invstd, sc, sh));
}

static void row_apply_add_relu(float *restrict y, const float *restrict x, const float *restrict r,
                               size_t n, float mean, float invstd, float sc, float sh)
{
    size_t i = 0;
    for (; i + CPU_VEC <= n; i += CPU_VEC)
        for (int k = 0; k < CPU_VEC; k++)
            y[i + k] = k_relu(k_add(k_bn_apply(x[i + k], mean, invstd, sc, sh), r[i + k]));
    for (; i < n; i++)
        y[i] = k_relu(k_add(k_bn_apply(x[i], mean, invstd, sc, sh), r[i]));
}

static void p_bn_apply_relu(float *y, const float *x, const float *r, size_t stride, int rows,
                            size_t n, float mean, float invstd, float sc, float sh)
{
    for (int b = 0; b < rows; b++) {
        size_t o = (size_t)b * stride;
        if (r)
            row_apply_add_relu(y + o, x + o, r + o, n, mean, invstd, sc, sh);
        else
            row_apply_relu(y + o, x + o, n, mean, invstd, sc, sh);
    }
}

static void p_bn_sums_relu(double *sdy, double *sdyx, float *dyos, const float *xs, const float *gs,
                           const float *yrs, size_t stride, int rows, size_t n, float mean,
                           float invstd)
{
    double s1 = 0.0, s2 = 0.0;
    for (int b = 0; b < rows; b++) {
        size_t o = (size_t)b * stride;
        const float *restrict x = xs + o, *restrict g = gs + o, *restrict yr = yrs + o;
        float *restrict dyo = dyos ? dyos + o : NULL;
        float l1[CPU_VEC] = {0}, l2[CPU_VEC] = {0}, r1 = 0.0f, r2 = 0.0f;
        size_t i = 0;
        for (; i + CPU_VEC <= n; i += CPU_VEC)
            for (int k = 0; k < CPU_VEC; k++) {
                float dy = k_relu_grad(g[i + k], yr[i + k]);
                l1[k] += dy;
                l2[k] += dy * ((x[i + k] - mean) * invstd);
                if (dyo)
                    dyo[i + k] = dy;
            }
        for (; i < n; i++) {
            float dy = k_relu_grad(g[i], yr[i]);
            r1 += dy;
            r2 += dy * ((x[i] - mean) * invstd);
            if (dyo)
                dyo[i] = dy;
        }
        for (int k = 0; k < CPU_VEC; k++)
            r1 += l1[k], r2 += l2[k];
        s1 += r1;
        s2 += r2;
    }
    *sdy = s1;
    *sdyx = s2;
}

static void row_grad_relu(float *restrict dx, const float *restrict x, const float *restrict g,
                          const float *restrict yr, size_t n, float mean, float invstd, float si,
                          float mdy, float mdyx)
{
    size_t i = 0;
    for (; i + CPU_VEC <= n; i += CPU_VEC)
        for (int k = 0; k < CPU_VEC; k++)
            dx[i + k] = k_bn_grad(k_relu_grad(g[i + k], yr[i + k]), (x[i + k] - mean) * invstd, si,
                                  mdy, mdyx);
    for (; i < n; i++)
        dx[i] = k_bn_grad(k_relu_grad(g[i], yr[i]), (x[i] - mean) * invstd, si, mdy, mdyx);
}

static void p_bn_grad_relu(float *dx, const float *x, const float *g, const float *yr,
                           size_t stride, int rows, size_t n, float mean, float invstd, float si,
                           float mdy, float mdyx)
{
    for (int b = 0; b < rows; b++) {
        size_t o = (size_t)b * stride;
        row_grad_relu(dx + o, x + o, g + o, yr + o, n, mean, invstd, si, mdy, mdyx);
    }
}

static void p_relu_fwd(float *restrict o, const float *restrict x, size_t n)
{
    size_t i = 0;
    for (; i + CPU_VEC <= n; i += CPU_VEC)
        for (int k = 0; k < CPU_VEC; k++)
            o[i + k] = k_relu(x[i + k]);
    for (; i < n; i++)
        o[i] = k_relu(x[i]);
}

static void p_relu_bwd(float *restrict o, const float *restrict g, const float *restrict y,
                       size_t n)
{
    size_t i = 0;
    for (; i + CPU_VEC <= n; i += CPU_VEC)
        for (int k = 0; k < CPU_VEC; k++)
            o[i + k] = k_relu_grad(g[i + k], y[i + k]);
    for (; i < n; i++)
        o[i] = k_relu_grad(g[i], y[i]);
}

/* o = o + x (k_add is commutative: a + b and b + a are the same bits) */
static void p_add_into(float *restrict o, const float *restrict x, size_t n)
{
    size_t i = 0;
    for (; i + CPU_VEC <= n; i += CPU_VEC)
        for (int k = 0; k < CPU_VEC; k++)
            o[i + k] = k_add(o[i + k], x[i + k]);
    for (; i < n; i++)
        o[i] = k_add(o[i], x[i]);
}

static void p_add(float *restrict o, const float *restrict a, const float *restrict b, size_t n)
{
    size_t i = 0;
    for (; i + CPU_VEC <= n; i += CPU_VEC)
        for (int k = 0; k < CPU_VEC; k++)
            o[i + k] = k_add(a[i + k], b[i + k]);
    for (; i < n; i++)
        o[i] = k_add(a[i], b[i]);
}

static void p_copy(float *o, const float *x, size_t n) { cpu_vcopy_short(o, x, n); }

static void p_fill(float *o, float v, size_t n) { cpu_vfill_short(o, v, n); }

static const cpu_vec_ops portable = {
    .name = "portable",
    .sum = p_sum,
    .sq = p_sq,
    .bn_apply = p_bn_apply,
    .bn_sums = p_bn_sums,
    .bn_grad = p_bn_grad,
    .bn_apply_relu = p_bn_apply_relu,
    .bn_sums_relu = p_bn_sums_relu,
    .bn_grad_relu = p_bn_grad_relu,
    .relu_fwd = p_relu_fwd,
    .relu_bwd = p_relu_bwd,
    .add_into = p_add_into,
    .add = p_add,
    .copy = p_copy,
    .fill = p_fill,
};

static int forced = -1;

const cpu_vec_ops *cpu_vec_level(int level)
{
    if (level == CPU_VEC_PORTABLE)
        return &portable;
    if (level < 0 || level >= CPU_VEC_LEVELS)
        return NULL;
    return cpu_vec_x86(level);
}

const cpu_vec_ops *cpu_vec(void)
{
    const cpu_vec_ops *v;
    if (forced >= 0 && (v = cpu_vec_level(forced)))
        return v;
    for (int l = CPU_VEC_LEVELS - 1; l > CPU_VEC_PORTABLE; l--)
        if ((v = cpu_vec_level(l)))
            return v;
    return &portable;
}

void cpu_vec_force(int level) { forced = level; }

void cpu_vfill_long(float *o, float v, size_t n) { cpu_vec()->fill(o, v, n); }

/* vec.h: "the pointers of one call do not overlap" (the vector versions
 * load several blocks before they store) */
#define DISJOINT(o, x, n) ((o) + (n) <= (x) || (x) + (n) <= (o))

void cpu_vcopy_long(float *o, const float *x, size_t n)
{
    ASSERT(DISJOINT(o, x, n));
    cpu_vec()->copy(o, x, n);
}

void cpu_vadd_long(float *o, const float *x, size_t n)
{
    ASSERT(DISJOINT(o, x, n));
    cpu_vec()->add_into(o, x, n);
}
