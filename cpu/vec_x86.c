/* vec_x86.c — AVX2 and AVX-512 versions of vec.h's loops, chosen at run
 * time (cpu_vec in vec.c asks __builtin_cpu_supports; a CPU or a valgrind
 * without AVX-512 gets AVX2, one without AVX2 the portable loops).
 *
 * The same bits as the portable loops (vec.h):
 *   - sums: CPU_VEC = 8 lanes are one 256-bit register, so a row's lanes
 *     are one accumulator adding one load per block, exactly the portable
 *     lane order; the tail and the lanes are then added in scalar code in
 *     the portable order. A row's chain of adds is serial, so several
 *     rows run at once (four; two for backward's pair of sums), their
 *     results still added to the double in row order. AVX-512 has no
 *     faster way to keep 8 lanes, so both levels use these.
 *   - element-wise: each element's operations as in nn/kernels.h, in the
 *     same order, multiply and add kept separate (the functions are
 *     compiled for avx2 without fma, and -std=c11 keeps gcc from
 *     contracting the AVX-512 ones); relu is a compare-greater and a mask,
 *     which gives +0 for -0 and NaN as the scalar `x > 0 ? x : 0` does.
 *     AVX-512 runs 16 at a time and does the tail under a mask (and a
 *     batch-norm row's head, up to its first 64-byte boundary).
 *   - the loops fused with relu (bn_apply_relu, bn_sums_relu,
 *     bn_grad_relu): the separate loops' operations per element, in their
 *     order, with the relu's compare-and-mask in between; bn_sums_relu's
 *     lanes are bn_sums' (AVX2 at both levels).
 *
 * Compiled for any x86-64 (the functions carry target attributes, the
 * rest of the program stays baseline); other machines get a stub.
 */
#define _POSIX_C_SOURCE 200809L
#include "cpu/vec.h"

#include <stdint.h>

#include "cpu/internal.h"
#include "nn/kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

_Static_assert(CPU_VEC == 8, "the AVX2 sums keep CPU_VEC lanes in one 256-bit register");

#define AVX2 __attribute__((target("avx2")))
#define AVX512 __attribute__((target("avx2,avx512f")))

/* ---------------------------------------------------------------- AVX2 sums */

/* a row's float sum: s (the tail's sum) plus lanes 0..7 in order */
AVX2 static inline float lanes_into(float s, __m256 acc)
{
    float l[CPU_VEC];
    _mm256_storeu_ps(l, acc);
    for (int k = 0; k < CPU_VEC; k++)
        s += l[k];
    return s;
}

AVX2 static double a2_sum(const float *x, size_t stride, int rows, size_t n)
{
    size_t nv = n / CPU_VEC * CPU_VEC;
    double s = 0.0;
    int b = 0;
    for (; b + 4 <= rows; b += 4) {
        const float *r0 = x + (size_t)b * stride, *r1 = r0 + stride, *r2 = r1 + stride,
                    *r3 = r2 + stride;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (size_t i = 0; i < nv; i += CPU_VEC) {
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(r0 + i));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(r1 + i));
            a2 = _mm256_add_ps(a2, _mm256_loadu_ps(r2 + i));
            a3 = _mm256_add_ps(a3, _mm256_loadu_ps(r3 + i));
        }
        float t0 = 0.0f, t1 = 0.0f, t2 = 0.0f, t3 = 0.0f;
        for (size_t i = nv; i < n; i++) {
            t0 += r0[i];
            t1 += r1[i];
            t2 += r2[i];
            t3 += r3[i];
        }
        s += lanes_into(t0, a0);
        s += lanes_into(t1, a1);
        s += lanes_into(t2, a2);
        s += lanes_into(t3, a3);
    }
    for (; b < rows; b++) {
        const float *r = x + (size_t)b * stride;
        __m256 a = _mm256_setzero_ps();
        for (size_t i = 0; i < nv; i += CPU_VEC)
            a = _mm256_add_ps(a, _mm256_loadu_ps(r + i));
        float t = 0.0f;
        for (size_t i = nv; i < n; i++)
            t += r[i];
        s += lanes_into(t, a);
    }
    return s;
}

AVX2 static inline __m256 sq_step(__m256 acc, const float *p, __m256 m)
{
    __m256 d = _mm256_sub_ps(_mm256_loadu_ps(p), m);
    return _mm256_add_ps(acc, _mm256_mul_ps(d, d));
}

AVX2 static double a2_sq(const float *x, size_t stride, int rows, size_t n, float m)
{
    size_t nv = n / CPU_VEC * CPU_VEC;
    __m256 vm = _mm256_set1_ps(m);
    double s = 0.0;
    int b = 0;
    for (; b + 4 <= rows; b += 4) {
        const float *r0 = x + (size_t)b * stride, *r1 = r0 + stride, *r2 = r1 + stride,
                    *r3 = r2 + stride;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (size_t i = 0; i < nv; i += CPU_VEC) {
            a0 = sq_step(a0, r0 + i, vm);
            a1 = sq_step(a1, r1 + i, vm);
            a2 = sq_step(a2, r2 + i, vm);
            a3 = sq_step(a3, r3 + i, vm);
        }
        float t0 = 0.0f, t1 = 0.0f, t2 = 0.0f, t3 = 0.0f;
        for (size_t i = nv; i < n; i++) {
            t0 += (r0[i] - m) * (r0[i] - m);
            t1 += (r1[i] - m) * (r1[i] - m);
            t2 += (r2[i] - m) * (r2[i] - m);
            t3 += (r3[i] - m) * (r3[i] - m);
        }
        s += lanes_into(t0, a0);
        s += lanes_into(t1, a1);
        s += lanes_into(t2, a2);
        s += lanes_into(t3, a3);
    }
    for (; b < rows; b++) {
        const float *r = x + (size_t)b * stride;
        __m256 a = _mm256_setzero_ps();
        for (size_t i = 0; i < nv; i += CPU_VEC)
            a = sq_step(a, r + i, vm);
        float t = 0.0f;
        for (size_t i = nv; i < n; i++)
            t += (r[i] - m) * (r[i] - m);
        s += lanes_into(t, a);
    }
    return s;
}

/* one block of batch norm backward's sums: a1 += dy, a2 += dy * xhat */
AVX2 static inline void sums_step(__m256 *a1, __m256 *a2, const float *x, const float *dy,
                                  __m256 mean, __m256 invstd)
{
    __m256 g = _mm256_loadu_ps(dy);
    __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x), mean), invstd);
    *a1 = _mm256_add_ps(*a1, g);
    *a2 = _mm256_add_ps(*a2, _mm256_mul_ps(g, xh));
}

/* the tail of a row, as the portable loop adds it */
AVX2 static inline void sums_tail(float *t1, float *t2, const float *x, const float *dy,
                                  size_t from, size_t n, float mean, float invstd)
{
    float r1 = 0.0f, r2 = 0.0f;
    for (size_t i = from; i < n; i++) {
        r1 += dy[i];
        r2 += dy[i] * ((x[i] - mean) * invstd);
    }
    *t1 = r1;
    *t2 = r2;
}

AVX2 static void a2_bn_sums(double *sdy, double *sdyx, const float *x, const float *dy,
                            size_t stride, int rows, size_t n, float mean, float invstd)
{
    size_t nv = n / CPU_VEC * CPU_VEC;
    __m256 vm = _mm256_set1_ps(mean), vi = _mm256_set1_ps(invstd);
    double s1 = 0.0, s2 = 0.0;
    int b = 0;
    for (; b + 2 <= rows; b += 2) {
        const float *x0 = x + (size_t)b * stride, *x1 = x0 + stride;
        const float *g0 = dy + (size_t)b * stride, *g1 = g0 + stride;
        __m256 p0 = _mm256_setzero_ps(), q0 = p0, p1 = p0, q1 = p0;
        for (size_t i = 0; i < nv; i += CPU_VEC) {
            sums_step(&p0, &q0, x0 + i, g0 + i, vm, vi);
            sums_step(&p1, &q1, x1 + i, g1 + i, vm, vi);
        }
        float t1, t2;
        sums_tail(&t1, &t2, x0, g0, nv, n, mean, invstd);
        s1 += lanes_into(t1, p0);
        s2 += lanes_into(t2, q0);
        sums_tail(&t1, &t2, x1, g1, nv, n, mean, invstd);
        s1 += lanes_into(t1, p1);
        s2 += lanes_into(t2, q1);
    }
    for (; b < rows; b++) {
        const float *x0 = x + (size_t)b * stride, *g0 = dy + (size_t)b * stride;
        __m256 p0 = _mm256_setzero_ps(), q0 = p0;
        for (size_t i = 0; i < nv; i += CPU_VEC)
            sums_step(&p0, &q0, x0 + i, g0 + i, vm, vi);
        float t1, t2;
        sums_tail(&t1, &t2, x0, g0, nv, n, mean, invstd);
        s1 += lanes_into(t1, p0);
        s2 += lanes_into(t2, q0);
    }
    *sdy = s1;
    *sdyx = s2;
}

/* bn_sums_step with dy = relu_grad(g, yr) (kept in *dy for the store) */
AVX2 static inline void sums_relu_step(__m256 *a1, __m256 *a2, __m256 *dy, const float *x,
                                       const float *g, const float *yr, __m256 mean, __m256 invstd)
{
    __m256 on = _mm256_cmp_ps(_mm256_loadu_ps(yr), _mm256_setzero_ps(), _CMP_GT_OQ);
    __m256 d = _mm256_and_ps(on, _mm256_loadu_ps(g));
    __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x), mean), invstd);
    *a1 = _mm256_add_ps(*a1, d);
    *a2 = _mm256_add_ps(*a2, _mm256_mul_ps(d, xh));
    *dy = d;
}

/* the scalar tail of a row of bn_sums_relu, as the portable loop adds it */
AVX2 static inline void sums_relu_tail(float *t1, float *t2, float *dyo, const float *x,
                                       const float *g, const float *yr, size_t from, size_t n,
                                       float mean, float invstd)
{
    float r1 = 0.0f, r2 = 0.0f;
    for (size_t i = from; i < n; i++) {
        float dy = k_relu_grad(g[i], yr[i]);
        r1 += dy;
        r2 += dy * ((x[i] - mean) * invstd);
        if (dyo)
            dyo[i] = dy;
    }
    *t1 = r1;
    *t2 = r2;
}

/* bn_sums with dy = relu_grad(g, yr), two rows at once as a2_bn_sums */
AVX2 static void a2_bn_sums_relu(double *sdy, double *sdyx, float *dyo, const float *x,
                                 const float *g, const float *yr, size_t stride, int rows, size_t n,
                                 float mean, float invstd)
{
    size_t nv = n / CPU_VEC * CPU_VEC;
    __m256 vm = _mm256_set1_ps(mean), vi = _mm256_set1_ps(invstd), d0, d1;
    double s1 = 0.0, s2 = 0.0;
    int b = 0;
    for (; b + 2 <= rows; b += 2) {
        size_t o0 = (size_t)b * stride, o1 = o0 + stride;
        __m256 p0 = _mm256_setzero_ps(), q0 = p0, p1 = p0, q1 = p0;
        if (dyo)
            for (size_t i = 0; i < nv; i += CPU_VEC) {
                sums_relu_step(&p0, &q0, &d0, x + o0 + i, g + o0 + i, yr + o0 + i, vm, vi);
                sums_relu_step(&p1, &q1, &d1, x + o1 + i, g + o1 + i, yr + o1 + i, vm, vi);
                _mm256_storeu_ps(dyo + o0 + i, d0);
                _mm256_storeu_ps(dyo + o1 + i, d1);
            }
        else
            for (size_t i = 0; i < nv; i += CPU_VEC) {
                sums_relu_step(&p0, &q0, &d0, x + o0 + i, g + o0 + i, yr + o0 + i, vm, vi);
                sums_relu_step(&p1, &q1, &d1, x + o1 + i, g + o1 + i, yr + o1 + i, vm, vi);
            }
        float t1, t2;
        sums_relu_tail(&t1, &t2, dyo ? dyo + o0 : NULL, x + o0, g + o0, yr + o0, nv, n, mean,
                       invstd);
        s1 += lanes_into(t1, p0);
        s2 += lanes_into(t2, q0);
        sums_relu_tail(&t1, &t2, dyo ? dyo + o1 : NULL, x + o1, g + o1, yr + o1, nv, n, mean,
                       invstd);
        s1 += lanes_into(t1, p1);
        s2 += lanes_into(t2, q1);
    }
    for (; b < rows; b++) {
        size_t o0 = (size_t)b * stride;
        __m256 p0 = _mm256_setzero_ps(), q0 = p0;
        for (size_t i = 0; i < nv; i += CPU_VEC) {
            sums_relu_step(&p0, &q0, &d0, x + o0 + i, g + o0 + i, yr + o0 + i, vm, vi);
            if (dyo)
                _mm256_storeu_ps(dyo + o0 + i, d0);
        }
        float t1, t2;
        sums_relu_tail(&t1, &t2, dyo ? dyo + o0 : NULL, x + o0, g + o0, yr + o0, nv, n, mean,
                       invstd);
        s1 += lanes_into(t1, p0);
        s2 += lanes_into(t2, q0);
    }
    *sdy = s1;
    *sdyx = s2;
}

/* ---------------------------------------------------------------- AVX2 element-wise */

AVX2 static void a2_bn_apply(float *y, const float *x, size_t stride, int rows, size_t n,
                             float mean, float invstd, float sc, float sh)
{
    __m256 vm = _mm256_set1_ps(mean), vi = _mm256_set1_ps(invstd), vs = _mm256_set1_ps(sc),
           vh = _mm256_set1_ps(sh);
    for (int b = 0; b < rows; b++) {
        const float *r = x + (size_t)b * stride;
        float *o = y + (size_t)b * stride;
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(r + i), vm), vi);
            _mm256_storeu_ps(o + i, _mm256_add_ps(_mm256_mul_ps(v, vs), vh));
        }
        for (; i < n; i++)
            o[i] = k_bn_apply(r[i], mean, invstd, sc, sh);
    }
}

AVX2 static void a2_bn_grad(float *dx, const float *x, const float *dy, size_t stride, int rows,
                            size_t n, float mean, float invstd, float si, float mdy, float mdyx)
{
    __m256 vm = _mm256_set1_ps(mean), vi = _mm256_set1_ps(invstd), vs = _mm256_set1_ps(si),
           vg = _mm256_set1_ps(mdy), vx = _mm256_set1_ps(mdyx);
    for (int b = 0; b < rows; b++) {
        size_t off = (size_t)b * stride;
        const float *r = x + off, *g = dy + off;
        float *o = dx + off;
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(r + i), vm), vi);
            __m256 d =
                _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(g + i), vg), _mm256_mul_ps(xh, vx));
            _mm256_storeu_ps(o + i, _mm256_mul_ps(vs, d));
        }
        for (; i < n; i++)
            o[i] = k_bn_grad(g[i], (r[i] - mean) * invstd, si, mdy, mdyx);
    }
}

AVX2 static inline __m256 relu8(__m256 v)
{
    return _mm256_and_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ), v);
}

AVX2 static void a2_bn_apply_relu(float *y, const float *x, const float *res, size_t stride,
                                  int rows, size_t n, float mean, float invstd, float sc, float sh)
{
    __m256 vm = _mm256_set1_ps(mean), vi = _mm256_set1_ps(invstd), vs = _mm256_set1_ps(sc),
           vh = _mm256_set1_ps(sh);
    for (int b = 0; b < rows; b++) {
        size_t off = (size_t)b * stride;
        const float *r = x + off, *a = res ? res + off : NULL;
        float *o = y + off;
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(r + i), vm), vi);
            v = _mm256_add_ps(_mm256_mul_ps(v, vs), vh);
            if (a)
                v = _mm256_add_ps(v, _mm256_loadu_ps(a + i));
            _mm256_storeu_ps(o + i, relu8(v));
        }
        for (; i < n; i++) {
            float v = k_bn_apply(r[i], mean, invstd, sc, sh);
            o[i] = k_relu(a ? k_add(v, a[i]) : v);
        }
    }
}

AVX2 static void a2_bn_grad_relu(float *dx, const float *x, const float *dy, const float *yr,
                                 size_t stride, int rows, size_t n, float mean, float invstd,
                                 float si, float mdy, float mdyx)
{
    __m256 vm = _mm256_set1_ps(mean), vi = _mm256_set1_ps(invstd), vs = _mm256_set1_ps(si),
           vg = _mm256_set1_ps(mdy), vx = _mm256_set1_ps(mdyx), z = _mm256_setzero_ps();
    for (int b = 0; b < rows; b++) {
        size_t off = (size_t)b * stride;
        const float *r = x + off, *g = dy + off, *u = yr + off;
        float *o = dx + off;
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(r + i), vm), vi);
            __m256 d = _mm256_and_ps(_mm256_cmp_ps(_mm256_loadu_ps(u + i), z, _CMP_GT_OQ),
                                     _mm256_loadu_ps(g + i));
            d = _mm256_sub_ps(_mm256_sub_ps(d, vg), _mm256_mul_ps(xh, vx));
            _mm256_storeu_ps(o + i, _mm256_mul_ps(vs, d));
        }
        for (; i < n; i++)
            o[i] = k_bn_grad(k_relu_grad(g[i], u[i]), (r[i] - mean) * invstd, si, mdy, mdyx);
    }
}

AVX2 static void a2_relu_fwd(float *o, const float *x, size_t n)
{
    const __m256 z = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        _mm256_storeu_ps(o + i, _mm256_and_ps(_mm256_cmp_ps(v, z, _CMP_GT_OQ), v));
    }
    for (; i < n; i++)
        o[i] = k_relu(x[i]);
}

AVX2 static void a2_relu_bwd(float *o, const float *g, const float *y, size_t n)
{
    const __m256 z = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 m = _mm256_cmp_ps(_mm256_loadu_ps(y + i), z, _CMP_GT_OQ);
        _mm256_storeu_ps(o + i, _mm256_and_ps(m, _mm256_loadu_ps(g + i)));
    }
    for (; i < n; i++)
        o[i] = k_relu_grad(g[i], y[i]);
}

AVX2 static void a2_add(float *o, const float *a, const float *b, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    for (; i < n; i++)
        o[i] = k_add(a[i], b[i]);
}

AVX2 static void a2_add_into(float *o, const float *x, size_t n) { a2_add(o, o, x, n); }

AVX2 static void a2_copy(float *o, const float *x, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_loadu_ps(x + i));
    for (; i < n; i++)
        o[i] = x[i];
}

AVX2 static void a2_fill(float *o, float v, size_t n)
{
    __m256 vv = _mm256_set1_ps(v);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, vv);
    for (; i < n; i++)
        o[i] = v;
}

/* ---------------------------------------------------------------- AVX-512 element-wise */

/* the lanes of a tail of r < 16 elements */
AVX512 static inline __mmask16 tail(size_t r) { return (__mmask16)((1u << r) - 1u); }

/* The floats from o to its next 64-byte boundary, at most n: the rows of a
 * channel start anywhere in a line (HW = 49, 196), and a 64-byte access
 * that splits two lines costs more than a masked head. */
static inline size_t head(const float *o, size_t n)
{
    size_t h = ((64 - ((uintptr_t)o & 63)) & 63) / sizeof(float);
    return h < n ? h : n;
}

AVX512 static inline __m512 apply16(__m512 x, __m512 vm, __m512 vi, __m512 vs, __m512 vh)
{
    return _mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(x, vm), vi), vs), vh);
}

AVX512 static void a5_bn_apply(float *y, const float *x, size_t stride, int rows, size_t n,
                               float mean, float invstd, float sc, float sh)
{
    __m512 vm = _mm512_set1_ps(mean), vi = _mm512_set1_ps(invstd), vs = _mm512_set1_ps(sc),
           vh = _mm512_set1_ps(sh);
    for (int b = 0; b < rows; b++) {
        const float *r = x + (size_t)b * stride;
        float *o = y + (size_t)b * stride;
        size_t i = head(o, n);
        __mmask16 m = tail(i);
        if (m)
            _mm512_mask_storeu_ps(o, m, apply16(_mm512_maskz_loadu_ps(m, r), vm, vi, vs, vh));
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(o + i, apply16(_mm512_loadu_ps(r + i), vm, vi, vs, vh));
        m = tail(n - i);
        if (m)
            _mm512_mask_storeu_ps(o + i, m,
                                  apply16(_mm512_maskz_loadu_ps(m, r + i), vm, vi, vs, vh));
    }
}

AVX512 static inline __m512 grad16(__m512 x, __m512 g, __m512 vm, __m512 vi, __m512 vs, __m512 vg,
                                   __m512 vx)
{
    __m512 xh = _mm512_mul_ps(_mm512_sub_ps(x, vm), vi);
    return _mm512_mul_ps(vs, _mm512_sub_ps(_mm512_sub_ps(g, vg), _mm512_mul_ps(xh, vx)));
}

AVX512 static void a5_bn_grad(float *dx, const float *x, const float *dy, size_t stride, int rows,
                              size_t n, float mean, float invstd, float si, float mdy, float mdyx)
{
    __m512 vm = _mm512_set1_ps(mean), vi = _mm512_set1_ps(invstd), vs = _mm512_set1_ps(si),
           vg = _mm512_set1_ps(mdy), vx = _mm512_set1_ps(mdyx);
    for (int b = 0; b < rows; b++) {
        size_t off = (size_t)b * stride;
        const float *r = x + off, *g = dy + off;
        float *o = dx + off;
        size_t i = head(o, n);
        __mmask16 m = tail(i);
        if (m)
            _mm512_mask_storeu_ps(o, m,
                                  grad16(_mm512_maskz_loadu_ps(m, r), _mm512_maskz_loadu_ps(m, g),
                                         vm, vi, vs, vg, vx));
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(
                o + i, grad16(_mm512_loadu_ps(r + i), _mm512_loadu_ps(g + i), vm, vi, vs, vg, vx));
        m = tail(n - i);
        if (m)
            _mm512_mask_storeu_ps(o + i, m,
                                  grad16(_mm512_maskz_loadu_ps(m, r + i),
                                         _mm512_maskz_loadu_ps(m, g + i), vm, vi, vs, vg, vx));
    }
}

/* apply16 with the residual (r) added and the relu */
AVX512 static inline __m512 apply_relu16(__m512 x, __m512 vm, __m512 vi, __m512 vs, __m512 vh)
{
    __m512 v = apply16(x, vm, vi, vs, vh);
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ), v);
}

AVX512 static inline __m512 apply_add_relu16(__m512 x, __m512 r, __m512 vm, __m512 vi, __m512 vs,
                                             __m512 vh)
{
    __m512 v = _mm512_add_ps(apply16(x, vm, vi, vs, vh), r);
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ), v);
}

AVX512 static void a5_bn_apply_relu(float *y, const float *x, const float *res, size_t stride,
                                    int rows, size_t n, float mean, float invstd, float sc,
                                    float sh)
{
    __m512 vm = _mm512_set1_ps(mean), vi = _mm512_set1_ps(invstd), vs = _mm512_set1_ps(sc),
           vh = _mm512_set1_ps(sh);
    for (int b = 0; b < rows; b++) {
        size_t off = (size_t)b * stride;
        const float *r = x + off;
        float *o = y + off;
        size_t i = head(o, n);
        __mmask16 m = tail(i);
        if (res) {
            const float *a = res + off;
            if (m)
                _mm512_mask_storeu_ps(o, m,
                                      apply_add_relu16(_mm512_maskz_loadu_ps(m, r),
                                                       _mm512_maskz_loadu_ps(m, a), vm, vi, vs,
                                                       vh));
            for (; i + 16 <= n; i += 16)
                _mm512_storeu_ps(o + i, apply_add_relu16(_mm512_loadu_ps(r + i),
                                                         _mm512_loadu_ps(a + i), vm, vi, vs, vh));
            m = tail(n - i);
            if (m)
                _mm512_mask_storeu_ps(o + i, m,
                                      apply_add_relu16(_mm512_maskz_loadu_ps(m, r + i),
                                                       _mm512_maskz_loadu_ps(m, a + i), vm, vi, vs,
                                                       vh));
        } else {
            if (m)
                _mm512_mask_storeu_ps(o, m,
                                      apply_relu16(_mm512_maskz_loadu_ps(m, r), vm, vi, vs, vh));
            for (; i + 16 <= n; i += 16)
                _mm512_storeu_ps(o + i, apply_relu16(_mm512_loadu_ps(r + i), vm, vi, vs, vh));
            m = tail(n - i);
            if (m)
                _mm512_mask_storeu_ps(
                    o + i, m, apply_relu16(_mm512_maskz_loadu_ps(m, r + i), vm, vi, vs, vh));
        }
    }
}

/* the relu's gradient: g where yr > 0, else +0 (m: the lanes to load) */
AVX512 static inline __m512 relu_grad16(__mmask16 m, const float *g, const float *yr)
{
    __mmask16 on =
        _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(m, yr), _mm512_setzero_ps(), _CMP_GT_OQ);
    return _mm512_maskz_loadu_ps(m & on, g);
}

AVX512 static void a5_bn_grad_relu(float *dx, const float *x, const float *dy, const float *yr,
                                   size_t stride, int rows, size_t n, float mean, float invstd,
                                   float si, float mdy, float mdyx)
{
    __m512 vm = _mm512_set1_ps(mean), vi = _mm512_set1_ps(invstd), vs = _mm512_set1_ps(si),
           vg = _mm512_set1_ps(mdy), vx = _mm512_set1_ps(mdyx);
    for (int b = 0; b < rows; b++) {
        size_t off = (size_t)b * stride;
        const float *r = x + off, *g = dy + off, *u = yr + off;
        float *o = dx + off;
        size_t i = head(o, n);
        __mmask16 m = tail(i);
        if (m)
            _mm512_mask_storeu_ps(
                o, m,
                grad16(_mm512_maskz_loadu_ps(m, r), relu_grad16(m, g, u), vm, vi, vs, vg, vx));
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(o + i, grad16(_mm512_loadu_ps(r + i),
                                           relu_grad16(0xffff, g + i, u + i), vm, vi, vs, vg, vx));
        m = tail(n - i);
        if (m)
            _mm512_mask_storeu_ps(o + i, m,
                                  grad16(_mm512_maskz_loadu_ps(m, r + i),
                                         relu_grad16(m, g + i, u + i), vm, vi, vs, vg, vx));
    }
}

AVX512 static void a5_relu_fwd(float *o, const float *x, size_t n)
{
    const __m512 z = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        _mm512_storeu_ps(o + i, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, z, _CMP_GT_OQ), v));
    }
    __mmask16 t = tail(n - i);
    if (t) {
        __m512 v = _mm512_maskz_loadu_ps(t, x + i);
        _mm512_mask_storeu_ps(o + i, t,
                              _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, z, _CMP_GT_OQ), v));
    }
}

AVX512 static void a5_relu_bwd(float *o, const float *g, const float *y, size_t n)
{
    const __m512 z = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __mmask16 m = _mm512_cmp_ps_mask(_mm512_loadu_ps(y + i), z, _CMP_GT_OQ);
        _mm512_storeu_ps(o + i, _mm512_maskz_loadu_ps(m, g + i));
    }
    __mmask16 t = tail(n - i);
    if (t) {
        __mmask16 m = _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(t, y + i), z, _CMP_GT_OQ);
        _mm512_mask_storeu_ps(o + i, t, _mm512_maskz_loadu_ps(m, g + i));
    }
}

AVX512 static void a5_add(float *o, const float *a, const float *b, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(o + i, _mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
    __mmask16 t = tail(n - i);
    if (t)
        _mm512_mask_storeu_ps(
            o + i, t,
            _mm512_add_ps(_mm512_maskz_loadu_ps(t, a + i), _mm512_maskz_loadu_ps(t, b + i)));
}

AVX512 static void a5_add_into(float *o, const float *x, size_t n) { a5_add(o, o, x, n); }

AVX512 static void a5_copy(float *o, const float *x, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(o + i, _mm512_loadu_ps(x + i));
    __mmask16 t = tail(n - i);
    if (t)
        _mm512_mask_storeu_ps(o + i, t, _mm512_maskz_loadu_ps(t, x + i));
}

AVX512 static void a5_fill(float *o, float v, size_t n)
{
    __m512 vv = _mm512_set1_ps(v);
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(o + i, vv);
    __mmask16 t = tail(n - i);
    if (t)
        _mm512_mask_storeu_ps(o + i, t, vv);
}

static const cpu_vec_ops avx2 = {
    .name = "avx2",
    .sum = a2_sum,
    .sq = a2_sq,
    .bn_apply = a2_bn_apply,
    .bn_sums = a2_bn_sums,
    .bn_grad = a2_bn_grad,
    .bn_apply_relu = a2_bn_apply_relu,
    .bn_sums_relu = a2_bn_sums_relu,
    .bn_grad_relu = a2_bn_grad_relu,
    .relu_fwd = a2_relu_fwd,
    .relu_bwd = a2_relu_bwd,
    .add_into = a2_add_into,
    .add = a2_add,
    .copy = a2_copy,
    .fill = a2_fill,
};

/* the sums stay AVX2's (see the top) */
static const cpu_vec_ops avx512 = {
    .name = "avx512",
    .sum = a2_sum,
    .sq = a2_sq,
    .bn_apply = a5_bn_apply,
    .bn_sums = a2_bn_sums,
    .bn_grad = a5_bn_grad,
    .bn_apply_relu = a5_bn_apply_relu,
    .bn_sums_relu = a2_bn_sums_relu,
    .bn_grad_relu = a5_bn_grad_relu,
    .relu_fwd = a5_relu_fwd,
    .relu_bwd = a5_relu_bwd,
    .add_into = a5_add_into,
    .add = a5_add,
    .copy = a5_copy,
    .fill = a5_fill,
};

const cpu_vec_ops *cpu_vec_x86(int level)
{
    if (level == CPU_VEC_AVX2 && __builtin_cpu_supports("avx2"))
        return &avx2;
    if (level == CPU_VEC_AVX512 && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("avx512f"))
        return &avx512;
    return NULL;
}

#else
const cpu_vec_ops *cpu_vec_x86(int level)
{
    (void)level;
    return NULL;
}
#endif
