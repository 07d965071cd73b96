/* test_conv_wino.c — Winograd F(2x2, 3x3) (cpu/conv_wino.c) against the
 * GEMM path it replaces, through the CPU backend's convolution ops: the
 * forward (with and without bias) and the input gradient of 3x3, stride-1,
 * pad-1 convolutions; the resnets' 28x28, 14x14 and 7x7 shapes, odd sizes
 * (the last tile half outside), rows of more than 16 tiles, single rows
 * and columns, channel counts that are not multiples of 8 or 16, batches
 * that cut the forward's sample groups and the backward's chunks unevenly,
 * and blocks of tile rows that split a sample.
 *
 * Winograd does not only sum in another order: its transforms add and
 * subtract neighbouring inputs (and weights) before the products, so an
 * output's rounding error scales with the magnitudes over its tile's 4x4
 * input patch and all 9 taps, not only its own terms. The bound checked
 * here is WINO_F times the direct kernel's (2 (n + 2) eps times the sum
 * of |x| |w| over the output's n terms, from the GEMM path on |x|, |w|,
 * |bias|); the largest ratios seen are logged: at most 0.009 of the
 * direct bound on these shapes, 1.6 eps times the output's sum of |x| |w|
 * (1.0-1.1 on the resnet shapes and with 160-200 channels), so WINO_F =
 * 0.05 (7-15 eps sum |x| |w| at 8-16 channels) leaves room for other
 * seeds, while a dropped tap, channel or tile is off by the size of a
 * term.
 */
#define _GNU_SOURCE
#include <float.h>

#include "cpu/conv_direct.h"
#include "tests/support/conv_pair.h"

#define WINO_F 0.05

/* the largest |winograd - gemm| / (eps sum |x| |w|) seen in a test */
static double worst_eps;

/* the kernel wherever it fits, not only where it pays (at 32 channels
 * and more): the tests' shapes are small */
static const conv_caps wino_caps = {
    .tap = 1, .direct = 1, .wino = 1, .wino_dw = 1, .wino_small = 1};
/* the direct kernel where Winograd would run */
static const conv_caps direct_caps = {.tap = 1, .direct = 1, .wino_dw = 1};

TestSuite(conv_wino);

/* |got - want| <= f * 2 (terms + 2) eps mag for every element; the
 * largest |got - want| / (2 (terms + 2) eps mag) into *worst, the count of
 * elements that differ at all into *ndiff */
static void assert_bound(const float *got, const float *want, const float *mag, size_t n, int terms,
                         double f, const char *what, const conv_shape *s, double *worst,
                         long *ndiff)
{
    for (size_t i = 0; i < n; i++) {
        double unit = 2.0 * (terms + 2) * FLT_EPSILON * mag[i];
        double d = fabs((double)got[i] - want[i]);
        cr_assert(d <= f * unit,
                  "%s[%zu] (B %d C %d %dx%d K %d): winograd %.9g, gemm %.9g, bound %.3g", what, i,
                  s->B, s->C, s->H, s->W, s->K, (double)got[i], (double)want[i], f * unit);
        if (unit > 0 && d / unit > *worst)
            *worst = d / unit;
        if (mag[i] > 0 && d / (FLT_EPSILON * mag[i]) > worst_eps)
            worst_eps = d / (FLT_EPSILON * mag[i]);
        *ndiff += got[i] != want[i];
    }
}

/* One shape through the GEMM path (no AVX-512 kernel) and a plan under
 * wino_caps (Winograd where it fits); returns how many results differ in any
 * bit, the worst ratio to the direct bound into *worst. */
static long compare(backend *be, int B, int C, int H, int W, int K, int with_bias, uint64_t key,
                    double *worst)
{
    conv_shape s;
    cr_assert_eq(conv_shape_init(&s, B, C, H, W, K, 3, 3, 1, 1), 0);
    conv_pair r = conv_pair_run(be, &s, &wino_caps, with_bias, key);
    size_t nin = r.nin, nout = r.nout, nw = r.nw;
    float **out = r.out, **din = r.din, **dw = r.dw, **db = r.db;
    long ndiff = 0;
    double unused = 0;
    assert_bound(out[0], out[1], out[2], nout, C * 9 + 1, WINO_F, "out", &s, worst, &ndiff);
    assert_bound(din[0], din[1], din[2], nin, K * 9, WINO_F, "din", &s, worst, &ndiff);
    /* the weight and bias gradients do not take Winograd: the direct
     * kernel's bound */
    long nd = 0;
    assert_bound(dw[0], dw[1], dw[2], nw, B * H * W, 1, "dw", &s, &unused, &nd);
    assert_bound(db[0], db[1], db[2], (size_t)K, B * H * W, 1, "dbias", &s, &unused, &nd);
    conv_pair_free(be, &r);
    return ndiff;
}

static void expect_ran(long ndiff, double worst, const char *what)
{
    cr_log_info("conv_wino %s: worst error %.4f of the direct bound, %.2f eps sum |x| |w|", what,
                worst, worst_eps);
    if (have_avx512f())
        cr_assert_gt(ndiff, 0, "Winograd never ran: every result is the GEMM path's");
}

/* the resnets' 3x3s (B 9: forward groups of 4, 4, 1; two uneven chunks) */
Test(conv_wino, matches_gemm_resnet_shapes)
{
    backend *be = cpu_backend(2);
    double worst = 0;
    long ndiff = 0;
    ndiff += compare(be, 2, 16, 28, 28, 16, 1, 1, &worst);
    /* resnet20's backward chunk at 28x28: blocks of tile rows that end
     * inside a sample */
    ndiff += compare(be, 8, 16, 28, 28, 16, 0, 5, &worst);
    ndiff += compare(be, 3, 32, 14, 14, 32, 0, 2, &worst);
    ndiff += compare(be, 9, 64, 7, 7, 64, 1, 3, &worst);
    ndiff += compare(be, 5, 64, 7, 7, 64, 0, 4, &worst);
    be->ops->destroy(be);
    expect_ran(ndiff, worst, "resnet shapes");
}

/* odd sizes, single rows and columns, rows of more than 16 tiles (33,
 * 35), channel counts off 8 and 16 */
Test(conv_wino, matches_gemm_odd_shapes)
{
    static const int shapes[][5] = {
        /* B, C, H, W, K */
        {2, 13, 5, 5, 8},  {3, 8, 9, 7, 21},   {2, 16, 1, 37, 9}, {1, 9, 23, 1, 16},
        {2, 8, 33, 35, 8}, {1, 24, 2, 2, 17},  {3, 11, 1, 1, 10}, {2, 17, 6, 33, 12},
        {1, 8, 3, 100, 8}, {2, 10, 4, 16, 11},
    };
    backend *be = cpu_backend(1);
    double worst = 0;
    long ndiff = 0;
    for (int i = 0; i < (int)(sizeof shapes / sizeof shapes[0]); i++)
        ndiff += compare(be, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], shapes[i][4],
                         i % 2, (uint64_t)(100 + 10 * i), &worst);
    be->ops->destroy(be);
    expect_ran(ndiff, worst, "odd shapes");
}

/* many channels: blocks of a few tile rows, a sample split over blocks,
 * blocks across samples */
Test(conv_wino, matches_gemm_wide_channels)
{
    backend *be = cpu_backend(2);
    double worst = 0;
    long ndiff = 0;
    ndiff += compare(be, 2, 160, 18, 18, 160, 1, 200, &worst);
    ndiff += compare(be, 11, 200, 6, 6, 24, 0, 300, &worst);
    be->ops->destroy(be);
    expect_ran(ndiff, worst, "wide channels");
}

/* Winograd against the direct kernel it replaces: the same bound, and
 * different bits (it really ran) */
Test(conv_wino, differs_from_direct_within_the_bound)
{
    if (!conv_direct_available())
        return;
    backend *be = cpu_backend(1);
    conv_shape s;
    cr_assert_eq(conv_shape_init(&s, 3, 16, 14, 14, 16, 3, 3, 1, 1), 0);
    size_t nin = (size_t)s.B * s.C * 196, nout = (size_t)s.B * s.K * 196,
           nw = (size_t)s.K * s.C * 9;
    float *in = rand_floats(nin, -1, 1, 41), *w = rand_floats(nw, -1, 1, 42);
    float *ain = absdup(in, nin), *aw = absdup(w, nw);
    float *o[3];
    for (int i = 0; i < 3; i++)
        o[i] = be->ops->alloc(be, nout * 4);
    void *wino = cpu_conv_plan_caps(be, &s, &wino_caps);
    void *direct = cpu_conv_plan_caps(be, &s, &direct_caps);
    cr_assert_eq(cpu_conv_plan_choice(wino).fwd, CONV_FWD_WINO);
    cr_assert_eq(cpu_conv_plan_choice(direct).fwd, CONV_FWD_DIRECT);
    be->ops->conv_forward(be, wino, o[0], in, w, NULL, &s);
    be->ops->conv_forward(be, direct, o[1], in, w, NULL, &s);
    be->ops->conv_forward(be, direct, o[2], ain, aw, NULL, &s);
    double worst = 0;
    long ndiff = 0;
    assert_bound(o[0], o[1], o[2], nout, s.C * 9, WINO_F, "out", &s, &worst, &ndiff);
    cr_assert_gt(ndiff, nout / 4, "Winograd and direct agree bit for bit on %ld of %zu",
                 nout - ndiff, nout);
    be->ops->conv_plan_free(be, wino);
    be->ops->conv_plan_free(be, direct);
    for (int i = 0; i < 3; i++)
        be->ops->free(be, o[i]);
    be->ops->destroy(be);
    free(in), free(w), free(ain), free(aw);
}

/* the same bits for 1 and 3 threads (forward groups and backward chunks
 * land on different threads) */
static void same_bits(int B, int C, int H, int W, int K)
{
    conv_shape s;
    cr_assert_eq(conv_shape_init(&s, B, C, H, W, K, 3, 3, 1, 1), 0);
    conv_same_bits(&s, &wino_caps);
}

Test(conv_wino, same_bits_any_thread_count) { same_bits(7, 16, 15, 14, 24); }
Test(conv_wino, same_bits_any_thread_count_7x7) { same_bits(13, 64, 7, 7, 64); }

/* one forward of a C -> C 3x3 pad-1 conv at H x H in a plan under caps,
 * or the backend's own plan (caps NULL) */
static float *forward_under(const conv_caps *caps, int C, int H)
{
    conv_shape s;
    cr_assert_eq(conv_shape_init(&s, 2, C, H, H, C, 3, 3, 1, 1), 0);
    size_t nin = (size_t)2 * C * H * H, nw = (size_t)C * C * 9;
    float *in = rand_floats(nin, -1, 1, 51), *w = rand_floats(nw, -1, 1, 52),
          *res = xmalloc(nin * 4);
    backend *be = cpu_backend(1);
    void *plan = caps ? cpu_conv_plan_caps(be, &s, caps) : be->ops->conv_plan(be, &s);
    float *out = be->ops->alloc(be, nin * 4);
    be->ops->conv_forward(be, plan, out, in, w, NULL, &s);
    memcpy(res, out, nin * 4);
    be->ops->free(be, out);
    be->ops->conv_plan_free(be, plan);
    be->ops->destroy(be);
    free(in), free(w);
    return res;
}

/* the backend's own plans: resnet20's 16 channels stay on the direct
 * kernel (the same bits as Winograd left out), its 32 take Winograd */
Test(conv_wino, default_takes_winograd_from_32_channels)
{
    if (!conv_direct_available())
        return;
    float *d16 = forward_under(&direct_caps, 16, 28), *w16 = forward_under(NULL, 16, 28);
    float *d32 = forward_under(&direct_caps, 32, 14), *w32 = forward_under(NULL, 32, 14);
    cr_assert_eq(memcmp(d16, w16, (size_t)2 * 16 * 28 * 28 * 4), 0, "16 channels took Winograd");
    cr_assert_neq(memcmp(d32, w32, (size_t)2 * 32 * 14 * 14 * 4), 0, "32 channels stayed direct");
    free(d16), free(w16), free(d32), free(w32);
}
