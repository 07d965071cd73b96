/* test_conv_wino_dw.c — the Winograd F(2x2, 3x3) weight gradient
 * (cpu/conv_wino_dw.c) through the CPU backend's conv_backward, against a
 * double-precision sum over positions computed here:
 *
 *   dw[k][c][r][q] = sum over b, oh, ow of dy[b][k][oh][ow] x[b][c][oh + r - 1][ow + q - 1]
 *
 * Winograd's transforms add and subtract up to 4 x 4 inputs and 2 x 2
 * gradients before multiplying, so its rounding scales with those sums,
 * not with the terms of the direct sum: each (k, c)'s 9 results must be
 * within 4 eps of the sum over tiles of (sum of |x| over the tile's 4x4
 * patch) x (sum of |dy| over its 2x2) — the worst seen over these shapes
 * is 0.77 eps, most are under 0.1 eps. A wrong transform coefficient, a
 * lost half tile at an odd size or a channel past a block of 16 is off by
 * the size of the values themselves. The shapes cover odd and even sizes (a half tile at the
 * bottom and right), 1-pixel rows and columns, channel counts that are and
 * are not multiples of 16, and batches that fill one, two and many
 * chunks; on an AVX-512 CPU the plan must really take the Winograd path
 * (its bits differ from the direct kernel's somewhere), and give the same
 * bits at any thread count.
 */
#define _GNU_SOURCE
#include <float.h>

#include "cpu/conv_direct.h"
#include "cpu/conv_wino_dw.h"
#include "tests/support/conv_pair.h"

TestSuite(wino_dw);

#define N_OF(a) ((int)(sizeof a / sizeof a[0]))

/* which shapes take it is conv_choose's (test_conv_choice.c); here, that
 * a backend's plans do where the CPU runs it */
Test(wino_dw, dispatch_follows_the_cpu)
{
    cr_assert_eq(wino_dw_available() != 0, have_avx512f());
    cr_assert_eq(conv_caps_cpu().wino_dw, have_avx512f());
    backend *be = cpu_backend(1);
    conv_shape s;
    cr_assert_eq(conv_shape_init(&s, 2, 32, 14, 14, 32, 3, 3, 1, 1), 0);
    void *plan = be->ops->conv_plan(be, &s);
    cr_assert_eq(cpu_conv_plan_choice(plan).dw, have_avx512f() ? CONV_DW_WINO : CONV_DW_TAP);
    be->ops->conv_plan_free(be, plan);
    be->ops->destroy(be);
}

/* dw of shape s in double into ref; into mag, per (k, c), the sum over
 * the Winograd tiles of (the sum of |x| over the tile's 4x4 input patch)
 * x (the sum of |dy| over its 2x2 outputs): what the transformed products
 * add up in magnitude, the scale of Winograd's rounding */
static void reference(double *ref, double *mag, const float *x, const float *dy,
                      const conv_shape *s)
{
    int C = s->C, K = s->K, H = s->H, W = s->W;
    for (int k = 0; k < K; k++)
        for (int c = 0; c < C; c++) {
            double m = 0;
            for (int b = 0; b < s->B; b++) {
                const float *xc = x + ((size_t)b * C + c) * H * W;
                const float *dk = dy + ((size_t)b * K + k) * H * W;
                for (int oh = 0; oh < H; oh++)
                    for (int ow = 0; ow < W; ow++)
                        for (int r = 0; r < 3; r++)
                            for (int q = 0; q < 3; q++) {
                                int h = oh + r - 1, w = ow + q - 1;
                                if (h >= 0 && h < H && w >= 0 && w < W)
                                    ref[(((size_t)k * C + c) * 3 + r) * 3 + q] +=
                                        (double)dk[oh * W + ow] * xc[h * W + w];
                            }
                for (int i = 0; i < (H + 1) / 2; i++)
                    for (int j = 0; j < (W + 1) / 2; j++) {
                        double ax = 0, ad = 0;
                        for (int h = 2 * i - 1; h <= 2 * i + 2; h++)
                            for (int w = 2 * j - 1; w <= 2 * j + 2; w++)
                                if (h >= 0 && h < H && w >= 0 && w < W)
                                    ax += fabs(xc[h * W + w]);
                        for (int h = 2 * i; h < 2 * i + 2 && h < H; h++)
                            for (int w = 2 * j; w < 2 * j + 2 && w < W; w++)
                                ad += fabs(dk[h * W + w]);
                        m += ax * ad;
                    }
            }
            mag[(size_t)k * C + c] = m;
        }
}

/* conv_backward's dw for shape s with Winograd's weight gradient allowed
 * or not (every other kernel allowed); the caller frees */
static float *backend_dw(int threads, int wino, const float *x, const float *dy, const float *w,
                         const conv_shape *s)
{
    backend *be = cpu_backend(threads);
    conv_caps caps = CONV_CAPS_ALL;
    caps.wino_dw = wino;
    void *plan = cpu_conv_plan_caps(be, s, &caps);
    size_t nw = (size_t)s->K * s->C * 9;
    float *dw = be->ops->alloc(be, nw * 4), *out = xmalloc(nw * 4);
    be->ops->conv_backward(be, plan, NULL, dw, NULL, dy, x, w, s);
    memcpy(out, dw, nw * 4);
    be->ops->free(be, dw);
    be->ops->conv_plan_free(be, plan);
    be->ops->destroy(be);
    return out;
}

/* one shape: Winograd within its bound of the double sum; returns how
 * many elements differ in any bit from the path without it */
static long check(int B, int C, int H, int W, int K, int threads, uint64_t key)
{
    conv_shape s;
    cr_assert_eq(conv_shape_init(&s, B, C, H, W, K, 3, 3, 1, 1), 0);
    size_t nin = (size_t)B * C * H * W, nout = (size_t)B * K * H * W, nw = (size_t)K * C * 9;
    float *x = rand_floats(nin, -1, 1, key), *dy = rand_floats(nout, -1, 1, key + 1),
          *w = rand_floats(nw, -1, 1, key + 2);
    double *ref = xcalloc(nw, sizeof *ref), *mag = xmalloc(nw / 9 * sizeof *mag);
    reference(ref, mag, x, dy, &s);
    float *got = backend_dw(threads, 1, x, dy, w, &s),
          *other = backend_dw(threads, 0, x, dy, w, &s);
    long ndiff = 0;
    for (size_t i = 0; i < nw; i++) {
        double tol = 4.0 * FLT_EPSILON * mag[i / 9];
        cr_assert(fabs(got[i] - ref[i]) <= tol,
                  "dw[%zu] (B %d C %d %dx%d K %d, %d threads): %.9g, want %.9g (tolerance %.3g)", i,
                  B, C, H, W, K, threads, (double)got[i], ref[i], tol);
        ndiff += got[i] != other[i];
    }
    free(x), free(dy), free(w), free(ref), free(mag), free(got), free(other);
    return ndiff;
}

Test(wino_dw, matches_the_double_sum_at_the_resnet_shapes)
{
    long ndiff = 0;
    ndiff += check(3, 32, 28, 28, 32, 1, 1);
    ndiff += check(6, 32, 14, 14, 32, 2, 2);
    ndiff += check(9, 64, 7, 7, 64, 2, 3); /* chunks of 5 and 4 */
    if (have_avx512f())
        cr_assert_gt(ndiff, 0, "the Winograd path never ran");
}

Test(wino_dw, matches_the_double_sum_at_odd_sizes_and_channel_counts)
{
    static const int hw[] = {1, 2, 3, 5, 7, 15, 18};
    static const int ck[][2] = {{32, 33}, {33, 32}, {47, 48}, {64, 63}, {40, 64}};
    long ndiff = 0;
    int n = 0;
    for (int i = 0; i < N_OF(ck); i++)
        for (int hi = 0; hi < N_OF(hw); hi++)
            for (int wi = 0; wi < N_OF(hw); wi++, n++) {
                if ((hi + wi + i) % 4 && hi != wi)
                    continue;
                ndiff += check(1 + n % 3, ck[i][0], hw[hi], hw[wi], ck[i][1], 1 + n % 2,
                               (uint64_t)(100 + 3 * n));
            }
    if (have_avx512f())
        cr_assert_gt(ndiff, 0, "the Winograd path never ran");
}

/* fixed chunks, fixed order: 1 and 3 threads give the same bits */
Test(wino_dw, same_bits_any_thread_count)
{
    conv_shape s;
    cr_assert_eq(conv_shape_init(&s, 19, 33, 7, 6, 32, 3, 3, 1, 1), 0);
    size_t nin = (size_t)s.B * s.C * s.H * s.W, nout = (size_t)s.B * s.K * s.H * s.W;
    float *x = rand_floats(nin, -1, 1, 40), *dy = rand_floats(nout, -1, 1, 41),
          *w = rand_floats((size_t)s.K * s.C * 9, -1, 1, 42);
    float *a = backend_dw(1, 1, x, dy, w, &s), *b = backend_dw(3, 1, x, dy, w, &s);
    cr_assert_eq(memcmp(a, b, (size_t)s.K * s.C * 9 * 4), 0);
    free(x), free(dy), free(w), free(a), free(b);
}
