/* test_conv_direct.c — the direct AVX-512 convolution kernel
 * (cpu/conv_direct.c) against the GEMM path it replaces, through the CPU
 * backend's convolution ops: forward (with and without bias) and the
 * backward (input, weight and bias gradients) of the stride-1 "flip"
 * plans, on many shapes (channel counts that are and are not multiples of
 * the kernel's 8-channel block, sizes whose wide grid ends inside a
 * vector, pads 0-2, 2x2 and 3x3 kernels).
 *
 * The two paths sum in different orders, so they agree to rounding: each
 * result may be off by about n * eps times the sum of its terms' absolute
 * values (n terms), which the test gets from the GEMM path run on |x|,
 * |w|, |bias|. A dropped tap or a shifted position is far outside that.
 * On a CPU with AVX-512F the direct path must really run: some bits must
 * differ from the GEMM path's somewhere. The plans' caps leave Winograd's
 * forward and input gradient out: it would take the 3x3 pad-1 ones.
 */
#define _GNU_SOURCE
#include <float.h>

#include "cpu/conv_direct.h"
#include "tests/support/conv_pair.h"

/* the direct kernel itself, not Winograd (test_conv_wino.c), on the 3x3
 * pad-1 shapes */
static const conv_caps direct_caps = {.tap = 1, .direct = 1, .wino_dw = 1};

TestSuite(conv_direct);

Test(conv_direct, dispatch_follows_the_cpu)
{
    cr_assert_eq(conv_direct_available() != 0, have_avx512f(),
                 "conv_direct_available() %d but the CPU's avx512f is %d", conv_direct_available(),
                 have_avx512f());
    conv_caps cpu = conv_caps_cpu();
    cr_assert_eq(cpu.direct, have_avx512f());
    cr_assert_eq(cpu.wino, have_avx512f());
    cr_assert_eq(cpu.tap, 1);
    /* caps a test asks for lose what the CPU lacks */
    conv_caps all = conv_caps_and_cpu(&CONV_CAPS_ALL);
    cr_assert_eq(all.direct, have_avx512f());
    cr_assert_eq(conv_caps_and_cpu(&CONV_CAPS_GEMM).direct, 0);
    /* a backend's plans take the CPU's caps: the direct kernel with AVX-512 */
    backend *be = cpu_backend(1);
    conv_shape s;
    cr_assert_eq(conv_shape_init(&s, 2, 16, 14, 14, 16, 3, 3, 1, 1), 0);
    void *plan = be->ops->conv_plan(be, &s), *gemm = cpu_conv_plan_caps(be, &s, &CONV_CAPS_GEMM);
    cr_assert_eq(cpu_conv_plan_choice(plan).fwd, have_avx512f() ? CONV_FWD_DIRECT : CONV_FWD_TAP);
    cr_assert_eq(cpu_conv_plan_choice(gemm).fwd, CONV_FWD_TAP);
    be->ops->conv_plan_free(be, plan);
    be->ops->conv_plan_free(be, gemm);
    be->ops->destroy(be);
}

/* |got - want| <= 2 * (terms + 2) * eps * mag for every element (both
 * paths' rounding); counts the elements that differ at all into *ndiff */
static void assert_agree(const float *got, const float *want, const float *mag, size_t n, int terms,
                         const char *what, const conv_shape *s, long *ndiff)
{
    for (size_t i = 0; i < n; i++) {
        double tol = 2.0 * (terms + 2) * FLT_EPSILON * mag[i];
        double d = fabs((double)got[i] - want[i]);
        cr_assert(d <= tol,
                  "%s[%zu] (B %d C %d %dx%d K %d R %d stride %d pad %d): direct %.9g, "
                  "gemm %.9g, tolerance %.3g",
                  what, i, s->B, s->C, s->H, s->W, s->K, s->R, s->stride, s->pad, (double)got[i],
                  (double)want[i], tol);
        *ndiff += got[i] != want[i];
    }
}

/* One shape through both paths; returns how many results differ in any bit. */
static long compare_st(backend *be, int B, int C, int H, int W, int K, int R, int stride, int pad,
                       int with_bias, uint64_t key)
{
    conv_shape s;
    cr_assert_eq(conv_shape_init(&s, B, C, H, W, K, R, R, stride, pad), 0);
    conv_pair r = conv_pair_run(be, &s, &direct_caps, with_bias, key);
    long ndiff = 0;
    assert_agree(r.out[0], r.out[1], r.out[2], r.nout, C * R * R + 1, "out", &s, &ndiff);
    assert_agree(r.din[0], r.din[1], r.din[2], r.nin, K * R * R, "din", &s, &ndiff);
    assert_agree(r.dw[0], r.dw[1], r.dw[2], r.nw, B * s.OH * s.OW, "dw", &s, &ndiff);
    assert_agree(r.db[0], r.db[1], r.db[2], (size_t)K, B * s.OH * s.OW, "dbias", &s, &ndiff);
    conv_pair_free(be, &r);
    return ndiff;
}

static long compare(backend *be, int B, int C, int H, int W, int K, int R, int pad, int with_bias,
                    uint64_t key)
{
    return compare_st(be, B, C, H, W, K, R, 1, pad, with_bias, key);
}

static const int chans[] = {8, 13, 16, 32, 64};
static const int sizes[] = {7, 8, 14, 15, 28, 33};
#define N_OF(a) ((int)(sizeof a / sizeof a[0]))

/* every C, K pair at every size as H and as W (the other size cycling), a
 * batch of 1-3, bias on every other shape */
static void sweep(int threads, int kc)
{
    backend *be = cpu_backend(threads);
    long ndiff = 0;
    int n = 0;
    for (int ci = 0; ci < N_OF(chans); ci++) {
        int K = chans[kc], C = chans[ci];
        for (int hi = 0; hi < N_OF(sizes); hi++)
            for (int wi = 0; wi < N_OF(sizes); wi++, n++) {
                /* the largest shapes once per C, K pair: they cost the most */
                if (sizes[hi] * sizes[wi] > 28 * 15 && (hi + wi + ci) % 3)
                    continue;
                ndiff += compare(be, 1 + n % 3, C, sizes[hi], sizes[wi], K, 3, 1, n % 2,
                                 (uint64_t)(100 * n + kc));
            }
    }
    be->ops->destroy(be);
    if (conv_direct_available())
        cr_assert_gt(ndiff, 0, "the direct kernel never ran: every result is the GEMM path's");
}

Test(conv_direct, matches_gemm_k8) { sweep(1, 0); }
Test(conv_direct, matches_gemm_k13) { sweep(2, 1); }
Test(conv_direct, matches_gemm_k16) { sweep(1, 2); }
Test(conv_direct, matches_gemm_k32) { sweep(2, 3); }
Test(conv_direct, matches_gemm_k64) { sweep(1, 4); }

/* pads 0 and 2 of a 3x3, 2x2 kernels, a 1-row output, odd channel counts */
Test(conv_direct, matches_gemm_other_pads_and_kernels)
{
    backend *be = cpu_backend(2);
    long ndiff = 0;
    ndiff += compare(be, 2, 16, 14, 15, 16, 3, 0, 1, 1);
    ndiff += compare(be, 3, 13, 7, 9, 8, 3, 2, 0, 2);
    ndiff += compare(be, 2, 8, 8, 8, 13, 2, 0, 1, 3);
    ndiff += compare(be, 1, 9, 15, 14, 10, 2, 1, 1, 4);
    ndiff += compare(be, 2, 8, 3, 40, 17, 3, 0, 1, 5);
    ndiff += compare(be, 3, 33, 1, 1, 9, 3, 1, 1, 6);
    be->ops->destroy(be);
    if (conv_direct_available())
        cr_assert_gt(ndiff, 0);
}

/* stride 2, 3x3, pad 1 (conv_direct_s2*): odd and even H and W (the
 * phases' sizes differ; 33: rows of more than one vector), 1-3 pixel
 * inputs, channel counts that are and are not multiples of 8 and 16,
 * the resnets' 16->32 and 32->64 */
Test(conv_direct, matches_gemm_stride2)
{
    static const int hw[] = {1, 2, 3, 7, 8, 14, 15, 28, 33};
    static const int ck[][2] = {{16, 32}, {32, 64}, {13, 8}, {8, 21}, {3, 17}};
    backend *be = cpu_backend(2);
    long ndiff = 0;
    int n = 0;
    for (int i = 0; i < N_OF(ck); i++)
        for (int hi = 0; hi < N_OF(hw); hi++)
            for (int wi = 0; wi < N_OF(hw); wi++, n++) {
                if ((hi + wi + i) % 3 && !(hi == wi || hi + wi == N_OF(hw) - 1))
                    continue;
                ndiff += compare_st(be, 1 + n % 3, ck[i][0], hw[hi], hw[wi], ck[i][1], 3, 2, 1,
                                    n % 2, (uint64_t)(7000 + n));
            }
    be->ops->destroy(be);
    if (conv_direct_available())
        cr_assert_gt(ndiff, 0, "the stride-2 kernel never ran");
}

/* per-sample work: the same bits for 1 and 3 threads */
static void same_bits(int stride, int H, int W)
{
    conv_shape s;
    cr_assert_eq(conv_shape_init(&s, 7, 16, H, W, 24, 3, 3, stride, 1), 0);
    conv_same_bits(&s, &direct_caps);
}

Test(conv_direct, same_bits_any_thread_count) { same_bits(1, 15, 14); }
Test(conv_direct, same_bits_any_thread_count_stride2) { same_bits(2, 15, 14); }
