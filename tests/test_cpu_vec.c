/* test_cpu_vec.c — the CPU backend's AVX2 / AVX-512 loops (cpu/vec_x86.c)
 * give the portable loops' bits (cpu/vec.c), op by op: batch-norm sums
 * and applies on channels of rows that are no multiple of the vector
 * width, with gaps between the rows and misaligned pointers; element-wise
 * ops on lengths around the widths, with -0, infinities, NaN and
 * denormals in the data; the loops fused with relu (and a residual add) as
 * well, and those give the bits of the separate loops run in turn. Also:
 * this machine gets a vector version, and the backend's ops give the same
 * bits with the portable path forced. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>

#include "cpu/internal.h"
#include "cpu/vec.h"
#include "tests/support/nn_fixtures.h"

TestSuite(cpu_vec);

static const size_t hws[] = {1, 7, 49, 196, 784, 1000};
static const int nrows[] = {1, 2, 3, 4, 5, 9};
static const int chans[] = {1, 3};
static const size_t offs[] = {0, 1, 3};

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))
#define SENTINEL 0x7fbadbadu /* a signalling NaN no op writes */

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* n floats of `off` + data: around `centre`, spread `spread`; with
 * `special`, one in 8 is -0, +-inf, a NaN, a denormal or huge */
static float *data(size_t n, uint64_t key, float centre, float spread, int special)
{
    float *p = xmalloc((n + 1) * sizeof(float));
    rng r = rng_keyed(777, RNG_TOOL, key, 3);
    static const uint32_t sp[] = {0x80000000u, 0x00000000u, 0x7f800000u, 0xff800000u,
                                  0x7fc00000u, 0x00000123u, 0x80400000u, 0x7e967699u};
    for (size_t i = 0; i < n; i++) {
        p[i] = centre + spread * (2.0f * rng_uniform(&r) - 1.0f);
        if (special && rng_below(&r, 8) == 0)
            p[i] = from_bits(sp[rng_below(&r, NELEMS(sp))]);
    }
    return p;
}

static float *sentinels(size_t n)
{
    float *p = xmalloc((n + 1) * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = from_bits(SENTINEL);
    return p;
}

static void same_bits(const void *a, const void *b, size_t bytes, const char *what,
                      const char *level, size_t hw, int rows, int C, size_t off)
{
    if (memcmp(a, b, bytes) == 0)
        return;
    const uint32_t *x = a, *y = b;
    size_t i = 0;
    while (i * 4 < bytes && x[i] == y[i])
        i++;
    cr_assert_fail("%s (%s, HW %zu, rows %d, C %d, offset %zu): word %zu is %08x, portable %08x",
                   what, level, hw, rows, C, off, i, i * 4 < bytes ? x[i] : 0,
                   i * 4 < bytes ? y[i] : 0);
}

/* every vector level this CPU runs (it may be none) */
static int levels(const cpu_vec_ops **v)
{
    int n = 0;
    for (int l = CPU_VEC_PORTABLE + 1; l < CPU_VEC_LEVELS; l++)
        if ((v[n] = cpu_vec_level(l)))
            n++;
    return n;
}

/* The fused loops on one channel (as check_bn_channel): level v against
 * the portable ones, and the portable ones against the separate loops
 * run in turn (bn_apply, add, relu_fwd; relu_bwd, bn_sums, bn_grad) */
static void check_fused_channel(const cpu_vec_ops *v, size_t hw, int rows, int C, size_t off,
                                int special)
{
    const cpu_vec_ops *p = cpu_vec_level(CPU_VEC_PORTABLE);
    size_t stride = (size_t)C * hw, total = off + (size_t)rows * stride + 16;
    size_t ooff = (off + 2) % 4;
    uint64_t key = hw * 1000 + (size_t)rows * 10 + off + (uint64_t)special * 7 + 500000;
    /* x around its mean, so that bn's output is negative about half the
     * time and the relu has work; yr (a relu output): zeros, -0 and
     * positives */
    float *xb = data(total, key, 3.0f, 2.0f, special),
          *gb = data(total, key + 1, 0.0f, 0.5f, special),
          *rb = data(total, key + 2, 0.0f, 1.0f, special),
          *ub = data(total, key + 3, 0.0f, 1.0f, special);
    for (size_t i = 0; i < total; i++)
        ub[i] = ub[i] < 0.0f ? (i % 3 ? 0.0f : -0.0f) : ub[i];
    const float *x = xb + off, *g = gb + off, *res = rb + (off + 1) % 4, *yr = ub + off;
    const char *lv = v->name;
    float *yv = sentinels(total), *yp = sentinels(total), *t = sentinels(total);
    for (int with_res = 0; with_res < 2; with_res++) {
        const float *r = with_res ? res : NULL;
        const char *what = with_res ? "bn_apply_relu (res)" : "bn_apply_relu";
        v->bn_apply_relu(yv + ooff, x, r, stride, rows, hw, 2.9f, 0.45f, 1.3f, -0.2f);
        p->bn_apply_relu(yp + ooff, x, r, stride, rows, hw, 2.9f, 0.45f, 1.3f, -0.2f);
        same_bits(yv, yp, total * 4, what, lv, hw, rows, C, off);
        /* the separate loops, row by row as the model's whole-tensor ops */
        float *tt = t + ooff;
        p->bn_apply(tt, x, stride, rows, hw, 2.9f, 0.45f, 1.3f, -0.2f);
        for (int b = 0; b < rows; b++) {
            float *row = tt + (size_t)b * stride;
            if (r)
                p->add_into(row, r + (size_t)b * stride, hw);
            p->relu_fwd(row, row, hw);
        }
        same_bits(yp, t, total * 4, what, "separate", hw, rows, C, off);
    }
    /* backward: dy = relu_bwd(g, yr) materialised, for the separate loops */
    float *dy = sentinels(total);
    for (int b = 0; b < rows; b++) {
        size_t o = (size_t)b * stride;
        p->relu_bwd(dy + off + o, g + o, yr + o, hw);
    }
    float m = 2.9f;
    if (!special) {
        double s[2], q[2], w[2];
        float *dv = sentinels(total), *dp = sentinels(total);
        v->bn_sums_relu(&s[0], &s[1], NULL, x, g, yr, stride, rows, hw, m, 0.7f);
        p->bn_sums_relu(&q[0], &q[1], NULL, x, g, yr, stride, rows, hw, m, 0.7f);
        same_bits(s, q, sizeof s, "bn_sums_relu", lv, hw, rows, C, off);
        p->bn_sums(&w[0], &w[1], x, dy + off, stride, rows, hw, m, 0.7f);
        same_bits(q, w, sizeof q, "bn_sums_relu", "separate", hw, rows, C, off);
        v->bn_sums_relu(&s[0], &s[1], dv + ooff, x, g, yr, stride, rows, hw, m, 0.7f);
        p->bn_sums_relu(&q[0], &q[1], dp + ooff, x, g, yr, stride, rows, hw, m, 0.7f);
        same_bits(s, w, sizeof s, "bn_sums_relu (stored)", lv, hw, rows, C, off);
        same_bits(q, w, sizeof q, "bn_sums_relu (stored)", "portable", hw, rows, C, off);
        same_bits(dv, dp, total * 4, "bn_sums_relu's dy", lv, hw, rows, C, off);
        /* the stored dy is relu_bwd's, rows only (the gaps keep the sentinels) */
        float *want = sentinels(total);
        for (int b = 0; b < rows; b++)
            memcpy(want + ooff + (size_t)b * stride, dy + off + (size_t)b * stride, hw * 4);
        same_bits(dp, want, total * 4, "bn_sums_relu's dy", "separate", hw, rows, C, off);
        free(dv), free(dp), free(want);
    }
    v->bn_grad_relu(yv + ooff, x, g, yr, stride, rows, hw, m, 0.45f, 0.6f, 0.013f, -0.07f);
    p->bn_grad_relu(yp + ooff, x, g, yr, stride, rows, hw, m, 0.45f, 0.6f, 0.013f, -0.07f);
    same_bits(yv, yp, total * 4, "bn_grad_relu", lv, hw, rows, C, off);
    p->bn_grad(t + ooff, x, dy + off, stride, rows, hw, m, 0.45f, 0.6f, 0.013f, -0.07f);
    same_bits(yp, t, total * 4, "bn_grad_relu", "separate", hw, rows, C, off);
    free(xb), free(gb), free(rb), free(ub), free(yv), free(yp), free(t), free(dy);
}

/* one batch-norm channel: rows of hw floats C * hw apart, from offset off */
static void check_bn_channel(const cpu_vec_ops *v, size_t hw, int rows, int C, size_t off,
                             int special)
{
    const cpu_vec_ops *p = cpu_vec_level(CPU_VEC_PORTABLE);
    size_t stride = (size_t)C * hw, total = off + (size_t)rows * stride + 16;
    uint64_t key = hw * 1000 + (size_t)rows * 10 + off + (uint64_t)special * 7;
    float *xb = data(total, key, 3.0f, 2.0f, special),
          *gb = data(total, key + 1, 0.01f, 0.5f, special);
    const float *x = xb + off, *dy = gb + off;
    const char *lv = v->name;

    if (!special) {
        double a = v->sum(x, stride, rows, hw), b = p->sum(x, stride, rows, hw);
        same_bits(&a, &b, sizeof a, "sum", lv, hw, rows, C, off);
        float m = (float)(b / ((double)rows * hw));
        a = v->sq(x, stride, rows, hw, m), b = p->sq(x, stride, rows, hw, m);
        same_bits(&a, &b, sizeof a, "sq", lv, hw, rows, C, off);
        double s[2], t[2];
        v->bn_sums(&s[0], &s[1], x, dy, stride, rows, hw, m, 0.7f);
        p->bn_sums(&t[0], &t[1], x, dy, stride, rows, hw, m, 0.7f);
        same_bits(s, t, sizeof s, "bn_sums", lv, hw, rows, C, off);
    }
    /* outputs start at another misalignment than the inputs */
    size_t ooff = (off + 2) % 4;
    float *yv = sentinels(total), *yp = sentinels(total);
    v->bn_apply(yv + ooff, x, stride, rows, hw, 2.9f, 0.45f, 1.3f, -0.2f);
    p->bn_apply(yp + ooff, x, stride, rows, hw, 2.9f, 0.45f, 1.3f, -0.2f);
    same_bits(yv, yp, total * 4, "bn_apply", lv, hw, rows, C, off);
    v->bn_grad(yv + ooff, x, dy, stride, rows, hw, 2.9f, 0.45f, 0.6f, 0.013f, -0.07f);
    p->bn_grad(yp + ooff, x, dy, stride, rows, hw, 2.9f, 0.45f, 0.6f, 0.013f, -0.07f);
    same_bits(yv, yp, total * 4, "bn_grad", lv, hw, rows, C, off);
    check_fused_channel(v, hw, rows, C, off, special);
    free(xb), free(gb), free(yv), free(yp);
}

Test(cpu_vec, fused_loops_give_the_separate_loops_bits)
{
    const cpu_vec_ops *p = cpu_vec_level(CPU_VEC_PORTABLE);
    for (size_t h = 0; h < NELEMS(hws); h++)
        for (size_t r = 0; r < NELEMS(nrows); r++)
            for (size_t o = 0; o < NELEMS(offs); o++)
                for (int special = 0; special < 2; special++)
                    check_fused_channel(p, hws[h], nrows[r], 2, offs[o], special);
}

Test(cpu_vec, bn_channels_match_the_portable_loops_bit_for_bit)
{
    const cpu_vec_ops *v[CPU_VEC_LEVELS];
    int nv = levels(v);
    for (int l = 0; l < nv; l++)
        for (size_t h = 0; h < NELEMS(hws); h++)
            for (size_t r = 0; r < NELEMS(nrows); r++)
                for (size_t c = 0; c < NELEMS(chans); c++)
                    for (size_t o = 0; o < NELEMS(offs); o++)
                        for (int special = 0; special < 2; special++)
                            check_bn_channel(v[l], hws[h], nrows[r], chans[c], offs[o], special);
}

/* the sums really are the 8-lane order: a sum whose bits depend on the
 * order of its adds (large and small values mixed) */
Test(cpu_vec, sums_keep_the_lane_order)
{
    const cpu_vec_ops *v[CPU_VEC_LEVELS];
    int nv = levels(v);
    enum { HW = 1000, ROWS = 7 };
    float *x = xmalloc(HW * ROWS * sizeof(float));
    rng r = rng_keyed(777, RNG_TOOL, 99, 3);
    for (size_t i = 0; i < HW * ROWS; i++)
        x[i] = (rng_below(&r, 5) == 0 ? 1e7f : 1.0f) * rng_uniform(&r);
    const cpu_vec_ops *p = cpu_vec_level(CPU_VEC_PORTABLE);
    double want = p->sum(x, HW, ROWS, HW), plain = 0.0;
    /* a plain left-to-right float sum per row is another number */
    for (int b = 0; b < ROWS; b++) {
        float s = 0.0f;
        for (int i = 0; i < HW; i++)
            s += x[b * HW + i];
        plain += s;
    }
    cr_assert_neq(want, plain, "the data does not tell the summation orders apart");
    for (int l = 0; l < nv; l++) {
        double got = v[l]->sum(x, HW, ROWS, HW);
        cr_assert_eq(memcmp(&got, &want, sizeof got), 0, "%s: %.17g, portable %.17g", v[l]->name,
                     got, want);
    }
    free(x);
}

static const size_t lens[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 49, 196, 784, 1000, 32768 + 5};

Test(cpu_vec, element_wise_ops_match_the_portable_loops_bit_for_bit)
{
    const cpu_vec_ops *v[CPU_VEC_LEVELS], *p = cpu_vec_level(CPU_VEC_PORTABLE);
    int nv = levels(v);
    for (int l = 0; l < nv; l++)
        for (size_t k = 0; k < NELEMS(lens); k++)
            for (size_t o = 0; o < 4; o++) {
                size_t n = lens[k], total = n + 24, oa = (o + 1) % 4, ob = (o + 3) % 4;
                float *a = data(total, n * 4 + o, 0.0f, 3.0f, 1);
                float *b = data(total, n * 4 + o + 100000, 0.0f, 3.0f, 1);
                float *ov = sentinels(total), *op = sentinels(total);
                const char *lv = v[l]->name;
                v[l]->relu_fwd(ov + o, a + oa, n);
                p->relu_fwd(op + o, a + oa, n);
                same_bits(ov, op, total * 4, "relu_fwd", lv, n, 1, 1, o);
                v[l]->relu_bwd(ov + o, a + oa, b + ob, n);
                p->relu_bwd(op + o, a + oa, b + ob, n);
                same_bits(ov, op, total * 4, "relu_bwd", lv, n, 1, 1, o);
                v[l]->add(ov + o, a + oa, b + ob, n);
                p->add(op + o, a + oa, b + ob, n);
                same_bits(ov, op, total * 4, "add", lv, n, 1, 1, o);
                v[l]->add_into(ov + o, b + ob, n);
                p->add_into(op + o, b + ob, n);
                same_bits(ov, op, total * 4, "add_into", lv, n, 1, 1, o);
                v[l]->copy(ov + o, a + oa, n);
                p->copy(op + o, a + oa, n);
                same_bits(ov, op, total * 4, "copy", lv, n, 1, 1, o);
                v[l]->fill(ov + o, -1.5f, n);
                p->fill(op + o, -1.5f, n);
                same_bits(ov, op, total * 4, "fill", lv, n, 1, 1, o);
                free(a), free(b), free(ov), free(op);
            }
}

/* internal.h's helpers, short runs inline and long ones through cpu_vec():
 * what a plain loop gives, on either side of CPU_VLONG, whichever version
 * runs */
Test(cpu_vec, conv_helpers_give_plain_loop_results_short_and_long)
{
    static const size_t ns[] = {3, 17, CPU_VLONG - 1, CPU_VLONG, CPU_VLONG + 13, 5000};
    for (int forced = -1; forced <= CPU_VEC_PORTABLE; forced++) {
        cpu_vec_force(forced);
        for (size_t k = 0; k < NELEMS(ns); k++) {
            size_t n = ns[k];
            float *a = data(n + 2, n, 0.0f, 3.0f, 0), *b = data(n + 2, n + 1, 0.0f, 3.0f, 0);
            float *o = sentinels(n + 3), *want = sentinels(n + 3);
            cpu_vfill(o + 1, 0.25f, n);
            for (size_t i = 0; i < n; i++)
                want[i + 1] = 0.25f;
            same_bits(o, want, (n + 3) * 4, "cpu_vfill", cpu_vec()->name, n, 1, 1, 1);
            cpu_vcopy(o + 1, a + 1, n);
            for (size_t i = 0; i < n; i++)
                want[i + 1] = a[i + 1];
            same_bits(o, want, (n + 3) * 4, "cpu_vcopy", cpu_vec()->name, n, 1, 1, 1);
            cpu_vadd(o + 1, b + 2, n);
            for (size_t i = 0; i < n; i++)
                want[i + 1] = a[i + 1] + b[i + 2];
            same_bits(o, want, (n + 3) * 4, "cpu_vadd", cpu_vec()->name, n, 1, 1, 1);
            free(a), free(b), free(o), free(want);
        }
    }
    cpu_vec_force(-1);
}

/* the CPU flags, as the kernel lists them */
static int cpuinfo_has(const char *flag)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return 0;
    char line[8192], want[64];
    snprintf(want, sizeof want, " %s ", flag);
    int has = 0;
    while (!has && fgets(line, sizeof line, f))
        if (strncmp(line, "flags", 5) == 0) {
            line[strcspn(line, "\n")] = ' ';
            has = strstr(line, want) != NULL;
        }
    fclose(f);
    return has;
}

Test(cpu_vec, this_machine_gets_a_vector_version_and_the_portable_one_can_be_forced)
{
    const char *want = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f")
                           ? "avx512"
                       : __builtin_cpu_supports("avx2") ? "avx2"
                                                        : "portable";
    cr_log_info("cpu_vec: %s", cpu_vec()->name);
    cr_assert_str_eq(cpu_vec()->name, want);
    if (cpuinfo_has("avx2"))
        cr_assert_str_neq(cpu_vec()->name, "portable", "an AVX2 machine runs the portable loops");
    cpu_vec_force(CPU_VEC_PORTABLE);
    cr_assert_str_eq(cpu_vec()->name, "portable");
    cpu_vec_force(CPU_VEC_AVX2);
    cr_assert_str_eq(cpu_vec()->name, __builtin_cpu_supports("avx2") ? "avx2" : "portable");
    cpu_vec_force(-1);
    cr_assert_str_eq(cpu_vec()->name, want);
    cr_assert_null(cpu_vec_level(CPU_VEC_LEVELS));
}

/* ---------------------------------------------------------------- through the backend */
typedef struct bn_out {
    float *y, *mean, *invstd, *rmean, *rvar, *yi, *dx, *dscale, *dshift, *r, *rg, *s1, *s2, *s3,
        *cp;
    /* the fused ops: forward train with a residual, infer without, backward
     * storing dy */
    float *fy, *fmean, *finvstd, *frmean, *frvar, *fyi, *fdx, *fdscale, *fdshift, *fdy;
} bn_out;

/* the backend's ops on one seeded batch, every output kept */
static bn_out run_ops(backend *be, int B, int C, int HW)
{
    size_t n = (size_t)B * C * HW;
    bn_out o;
    float *x = data(n, 1, 1.5f, 2.0f, 0), *dy = data(n, 2, 0.0f, 0.3f, 0);
    float *sc = data((size_t)C, 3, 1.0f, 0.5f, 0), *sh = data((size_t)C, 4, 0.0f, 0.5f, 0);
    o.y = xcalloc(n, 4), o.yi = xcalloc(n, 4), o.dx = xcalloc(n, 4), o.r = xcalloc(n, 4);
    o.rg = xcalloc(n, 4), o.s1 = xcalloc(n, 4), o.cp = xcalloc(n, 4);
    o.mean = xcalloc((size_t)C, 4), o.invstd = xcalloc((size_t)C, 4);
    o.dscale = xcalloc((size_t)C, 4), o.dshift = xcalloc((size_t)C, 4);
    o.rmean = data((size_t)C, 5, 0.0f, 0.1f, 0), o.rvar = data((size_t)C, 6, 1.0f, 0.1f, 0);
    be->ops->bn_forward_train(be, o.y, o.mean, o.invstd, o.rmean, o.rvar, x, sc, sh, B, C, HW, 0.1f,
                              1e-5f);
    be->ops->bn_forward_infer(be, o.yi, x, sc, sh, o.rmean, o.rvar, B, C, HW, 1e-5f);
    be->ops->bn_backward(be, o.dx, o.dscale, o.dshift, dy, x, sc, o.mean, o.invstd, B, C, HW);
    be->ops->relu_forward(be, o.r, o.y, n);
    be->ops->relu_backward(be, o.rg, dy, o.r, n);
    be->ops->add(be, o.s1, o.y, dy, n);
    be->ops->add(be, o.s1, o.s1, x, n); /* out == a */
    o.s2 = data(n, 7, 0.0f, 1.0f, 0);
    be->ops->add(be, o.s2, x, o.s2, n); /* out == b */
    o.s3 = data(n, 8, 0.0f, 1.0f, 0);
    be->ops->copy(be, o.cp, o.s3, n);
    o.fy = xcalloc(n, 4), o.fyi = xcalloc(n, 4), o.fdx = xcalloc(n, 4), o.fdy = xcalloc(n, 4);
    o.fmean = xcalloc((size_t)C, 4), o.finvstd = xcalloc((size_t)C, 4);
    o.fdscale = xcalloc((size_t)C, 4), o.fdshift = xcalloc((size_t)C, 4);
    o.frmean = data((size_t)C, 5, 0.0f, 0.1f, 0), o.frvar = data((size_t)C, 6, 1.0f, 0.1f, 0);
    be->ops->bn_relu_forward_train(be, o.fy, o.fmean, o.finvstd, o.frmean, o.frvar, x, o.s2, sc, sh,
                                   B, C, HW, 0.1f, 1e-5f);
    be->ops->bn_relu_forward_infer(be, o.fyi, x, NULL, sc, sh, o.frmean, o.frvar, B, C, HW, 1e-5f);
    be->ops->bn_relu_backward(be, o.fdx, o.fdscale, o.fdshift, o.fdy, dy, o.r, x, sc, o.fmean,
                              o.finvstd, B, C, HW);
    free(x), free(dy), free(sc), free(sh);
    return o;
}

static void free_out(bn_out *o)
{
    float *p[] = {o->y,      o->mean,    o->invstd,  o->rmean,   o->rvar,   o->yi,    o->dx,
                  o->dscale, o->dshift,  o->r,       o->rg,      o->s1,     o->s2,    o->s3,
                  o->cp,     o->fy,      o->fmean,   o->finvstd, o->frmean, o->frvar, o->fyi,
                  o->fdx,    o->fdscale, o->fdshift, o->fdy};
    for (size_t i = 0; i < NELEMS(p); i++)
        free(p[i]);
}

/* every output of two run_ops, bit for bit */
static void same_outputs(const bn_out *v, const bn_out *p, int B, int C, int HW, const char *lv)
{
    size_t n = (size_t)B * C * HW;
    struct {
        const char *what;
        float *a, *b;
        size_t n;
    } cmp[] = {{"bn y", v->y, p->y, n},
               {"bn mean", v->mean, p->mean, C},
               {"bn invstd", v->invstd, p->invstd, C},
               {"bn running mean", v->rmean, p->rmean, C},
               {"bn running var", v->rvar, p->rvar, C},
               {"bn infer y", v->yi, p->yi, n},
               {"bn dx", v->dx, p->dx, n},
               {"bn dscale", v->dscale, p->dscale, C},
               {"bn dshift", v->dshift, p->dshift, C},
               {"relu", v->r, p->r, n},
               {"relu grad", v->rg, p->rg, n},
               {"add", v->s1, p->s1, n},
               {"add into b", v->s2, p->s2, n},
               {"copy", v->cp, p->cp, n},
               {"bn+add+relu y", v->fy, p->fy, n},
               {"bn+add+relu mean", v->fmean, p->fmean, C},
               {"bn+add+relu invstd", v->finvstd, p->finvstd, C},
               {"bn+add+relu running mean", v->frmean, p->frmean, C},
               {"bn+add+relu running var", v->frvar, p->frvar, C},
               {"bn+relu infer y", v->fyi, p->fyi, n},
               {"bn+relu dx", v->fdx, p->fdx, n},
               {"bn+relu dscale", v->fdscale, p->fdscale, C},
               {"bn+relu dshift", v->fdshift, p->fdshift, C},
               {"bn+relu dy", v->fdy, p->fdy, n}};
    for (size_t i = 0; i < NELEMS(cmp); i++)
        same_bits(cmp[i].a, cmp[i].b, cmp[i].n * 4, cmp[i].what, lv, (size_t)HW, B, C, 0);
}

Test(cpu_vec, backend_ops_give_the_portable_bits)
{
    enum { B = 5, C = 3, HW = 49 };
    backend *be = cpu_backend(2);
    cpu_vec_force(CPU_VEC_PORTABLE);
    bn_out p = run_ops(be, B, C, HW);
    cpu_vec_force(-1);
    bn_out v = run_ops(be, B, C, HW);
    same_outputs(&v, &p, B, C, HW, cpu_vec()->name);
    free_out(&p);
    free_out(&v);
    be->ops->destroy(be);
}

/* Small channels run in groups, sample by sample (cpu/bn.c's bn_run):
 * one thread takes 12 of these 24 channels a task; 12 threads, one
 * channel a task, the per-channel loops. Both must give the same bits;
 * and so must a mixed split (5 threads: 3 channels a task) of an odd
 * channel count, on rows that are no multiple of the vector width. */
Test(cpu_vec, batch_norm_channel_groups_give_the_per_channel_bits)
{
    static const int shape[][3] = {{5, 24, 49}, {3, 19, 7}, {4, 30, 196}};
    for (size_t i = 0; i < NELEMS(shape); i++) {
        int B = shape[i][0], C = shape[i][1], HW = shape[i][2];
        backend *one = cpu_backend(1), *each = cpu_backend(C), *mid = cpu_backend(5);
        bn_out g = run_ops(one, B, C, HW), c = run_ops(each, B, C, HW), m = run_ops(mid, B, C, HW);
        same_outputs(&g, &c, B, C, HW, "groups vs per channel");
        same_outputs(&m, &c, B, C, HW, "other groups vs per channel");
        free_out(&g);
        free_out(&c);
        free_out(&m);
        one->ops->destroy(one);
        each->ops->destroy(each);
        mid->ops->destroy(mid);
    }
}

/* vec.h's "the pointers of one call do not overlap" is an ASSERT
 * (common/assert.h), live in this sanitized build: an overlapping copy
 * stops with its file:line instead of giving wrong bits. */
Test(cpu_vec, an_overlapping_long_copy_fails_its_assert, .signal = SIGABRT)
{
    float *a = calloc(2 * CPU_VLONG, sizeof *a);
    cr_assert_not_null(a);
    cpu_vcopy_long(a + 1, a, CPU_VLONG);
    free(a); /* not reached */
}
