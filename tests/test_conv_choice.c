/* test_conv_choice.c — the CPU convolution's choice of algorithm per pass
 * (cpu/conv_choice.c).
 *
 * The table below is where the thresholds are written down as cases: a
 * shape, the kernels allowed (caps), and the forward / input gradient /
 * weight gradient conv_choose must pick, with the reason. conv_choose is
 * pure, so the table holds on any CPU. Then every algorithm is forced
 * through caps on a real plan and compared with im2col + GEMM (no caps)
 * within the GEMMs' rounding bound; on a CPU with AVX-512F every value of
 * every pass must have run.
 */
#define _GNU_SOURCE
#include <float.h>

#include "cpu/conv_choice.h"
#include "tests/support/conv_pair.h"

TestSuite(conv_choice);

#define N_OF(a) ((int)(sizeof a / sizeof a[0]))

/* caps by name */
enum { ALL, GEMM, IM2COL, NO_WINO, NO_WINO_DW, WINO_SMALL, NO_TAP };
static const conv_caps caps_of[] = {
    [ALL] = {.tap = 1, .direct = 1, .wino = 1, .wino_dw = 1},
    [GEMM] = {.tap = 1},
    [IM2COL] = {0},
    [NO_WINO] = {.tap = 1, .direct = 1, .wino_dw = 1},
    [NO_WINO_DW] = {.tap = 1, .direct = 1, .wino = 1},
    [WINO_SMALL] = {.tap = 1, .direct = 1, .wino = 1, .wino_dw = 1, .wino_small = 1},
    [NO_TAP] = {.direct = 1, .wino = 1, .wino_dw = 1},
};

typedef struct choice_case {
    int C, H, W, K, R, stride, pad, caps;
    const char *want; /* conv_choice_name's "fwd/din/dw" */
    const char *why;
} choice_case;

static const choice_case table[] = {
    /* a CPU with AVX-512F (caps ALL): the resnets' and lenet's shapes */
    {1, 28, 28, 20, 5, 1, 0, ALL, "gemm/gemm/gemm-t", "lenet conv1: 5x5 im2col; P 576 >= 128"},
    {20, 12, 12, 50, 5, 1, 0, ALL, "gemm/gemm/gemm", "lenet conv2: P 64 < 128, plain dw"},
    {3, 32, 32, 16, 3, 1, 1, ALL, "gemm/gemm/gemm-t", "resnet stem: 3 < 8 channels in"},
    {7, 28, 28, 8, 3, 1, 1, ALL, "gemm/gemm/gemm-t", "7 channels in: below the tap threshold"},
    {16, 28, 28, 16, 3, 1, 1, ALL, "direct/direct/direct", "16 channels: Winograd does not pay"},
    {31, 14, 14, 32, 3, 1, 1, ALL, "direct/direct/direct", "31 in: below Winograd's 32"},
    {32, 14, 14, 16, 3, 1, 1, ALL, "direct/direct/direct", "16 out: below Winograd's 32"},
    {32, 14, 14, 32, 3, 1, 1, ALL, "wino/wino/wino", "resnet20 stage 2"},
    {64, 7, 7, 64, 3, 1, 1, ALL, "wino/wino/wino", "resnet20 stage 3"},
    {64, 14, 14, 65, 3, 1, 1, ALL, "wino/wino/direct", "65 out: past the Winograd dw's 64"},
    {128, 8, 8, 128, 3, 1, 1, ALL, "wino/wino/direct", "resnet18 stage 2: dw past 64"},
    {16, 28, 28, 32, 3, 2, 1, ALL, "direct-s2/direct-s2/direct-s2", "resnet downsampling"},
    {3, 9, 9, 17, 3, 2, 1, ALL, "direct-s2/direct-s2/direct-s2", "stride 2: no channel limit"},
    {16, 28, 28, 32, 3, 2, 0, ALL, "gemm/gemm/gemm-t", "stride 2 unpadded: no kernel"},
    {3, 64, 64, 64, 7, 2, 3, ALL, "gemm/gemm/gemm-t", "resnet18 stem: 7x7/2"},
    {16, 14, 14, 32, 1, 1, 0, ALL, "gemm/gemm/gemm-t", "1x1: GEMM on the input, P 196"},
    {16, 8, 16, 16, 1, 1, 0, ALL, "gemm/gemm/gemm-t", "P 128: the col on the left from here"},
    {16, 9, 14, 16, 1, 1, 0, ALL, "gemm/gemm/gemm", "P 126: below it"},
    {64, 8, 8, 128, 1, 2, 0, ALL, "gemm/gemm/gemm", "1x1/2 shortcut at 4x4: P 16"},
    {16, 14, 15, 16, 3, 1, 0, ALL, "direct/direct/direct", "3x3 unpadded: direct, not Winograd"},
    {13, 7, 9, 8, 3, 1, 2, ALL, "direct/direct/direct", "pad 2 = S - 1: still on the grid"},
    {16, 14, 14, 16, 5, 1, 2, ALL, "gemm/gemm/gemm-t", "5x5: no tap plan past 3x3"},
    {8, 9, 9, 13, 2, 1, 0, ALL, "direct/direct/gemm", "2x2, P 64: dw by im2col"},
    {8, 28, 28, 8, 2, 1, 1, ALL, "direct/direct/tap", "2x2, P 841 >= 128: dw tap by tap"},
    /* another CPU (no AVX-512: caps GEMM) */
    {16, 28, 28, 16, 3, 1, 1, GEMM, "tap/tap/tap", "P 784 >= 128: the backward tap by tap"},
    {64, 7, 7, 64, 3, 1, 1, GEMM, "tap/gemm/gemm", "P 49 < 128: im2col + col2im backward"},
    {16, 28, 28, 32, 3, 2, 1, GEMM, "gemm/gemm/gemm-t", "stride 2 without the kernel"},
    {3, 32, 32, 16, 3, 1, 1, GEMM, "gemm/gemm/gemm-t", "stem: below the tap threshold"},
    /* caps a test builds */
    {16, 28, 28, 16, 3, 1, 1, IM2COL, "gemm/gemm/gemm-t", "the reference: im2col everywhere"},
    {32, 14, 14, 32, 3, 1, 1, NO_WINO, "direct/direct/wino", "Winograd dw alone"},
    {32, 14, 14, 32, 3, 1, 1, NO_WINO_DW, "wino/wino/direct", "Winograd forward and din alone"},
    {16, 28, 28, 16, 3, 1, 1, WINO_SMALL, "wino/wino/direct", "Winograd where it does not pay"},
    {8, 5, 5, 8, 3, 1, 1, WINO_SMALL, "wino/wino/direct", "8 channels: the least it takes"},
    {7, 5, 5, 8, 3, 1, 1, WINO_SMALL, "gemm/gemm/gemm", "7 channels: not even then"},
    {8, 28, 28, 8, 2, 1, 1, NO_TAP, "direct/direct/gemm-t", "no tap GEMMs: dw by im2col"},
};

Test(conv_choice, table_of_shapes_and_choices)
{
    for (int i = 0; i < N_OF(table); i++) {
        const choice_case *t = &table[i];
        conv_shape s;
        cr_assert_eq(conv_shape_init(&s, 4, t->C, t->H, t->W, t->K, t->R, t->R, t->stride, t->pad),
                     0, "case %d", i);
        char got[64];
        conv_choice c = conv_choose(&s, &caps_of[t->caps]);
        conv_choice_name(&c, got, sizeof got);
        cr_expect_str_eq(got, t->want, "case %d (%s): C %d %dx%d K %d R %d stride %d pad %d", i,
                         t->why, t->C, t->H, t->W, t->K, t->R, t->stride, t->pad);
        /* the batch size does not enter into it (nor the thread count:
         * conv_choose does not see it) */
        s.B = 1;
        conv_choice c1 = conv_choose(&s, &caps_of[t->caps]);
        cr_expect(c1.fwd == c.fwd && c1.din == c.din && c1.dw == c.dw, "case %d: B 1", i);
    }
}

Test(conv_choice, names)
{
    cr_assert_str_eq(conv_fwd_name(CONV_FWD_DIRECT_S2), "direct-s2");
    cr_assert_str_eq(conv_din_name(CONV_DIN_TAP), "tap");
    cr_assert_str_eq(conv_dw_name(CONV_DW_GEMM_T), "gemm-t");
    cr_assert_str_eq(conv_dw_name((conv_dw_algo)99), "?");
    char buf[8];
    conv_choice c = {CONV_FWD_WINO, CONV_DIN_WINO, CONV_DW_DIRECT};
    cr_assert_str_eq(conv_choice_name(&c, buf, sizeof buf), "wino/wi", "cut to the buffer");
}

/* A backend's plans, and its conv_describe, follow the CPU's caps. */
Test(conv_choice, backend_describes_its_plans)
{
    backend *be = cpu_backend(1);
    conv_shape s;
    cr_assert_eq(conv_shape_init(&s, 2, 32, 14, 14, 32, 3, 3, 1, 1), 0);
    char buf[64];
    cr_assert_eq(backend_conv_describe(be, &s, buf, sizeof buf), buf);
    cr_assert_str_eq(buf, have_avx512f() ? "wino/wino/wino" : "tap/tap/tap");
    void *plan = be->ops->conv_plan(be, &s);
    conv_choice c = cpu_conv_plan_choice(plan);
    cr_assert_eq(c.fwd, have_avx512f() ? CONV_FWD_WINO : CONV_FWD_TAP);
    be->ops->conv_plan_free(be, plan);
    be->ops->destroy(be);
}

/* |got - want| <= 2 (terms + 2) eps mag for every element (both paths'
 * rounding; Winograd's is within a twentieth of it, test_conv_wino.c);
 * returns how many differ in any bit */
static long agree(const float *got, const float *want, const float *mag, size_t n, int terms,
                  const char *what, int i)
{
    long ndiff = 0;
    for (size_t k = 0; k < n; k++) {
        double tol = 2.0 * (terms + 2) * FLT_EPSILON * mag[k];
        double d = fabs((double)got[k] - want[k]);
        cr_assert(d <= tol, "case %d %s[%zu]: %.9g, im2col %.9g, tolerance %.3g", i, what, k,
                  (double)got[k], (double)want[k], tol);
        ndiff += got[k] != want[k];
    }
    return ndiff;
}

/* shapes and caps that between them force every algorithm of every pass
 * (B 3 or 5: backward chunks of unequal sizes) */
static const choice_case forced[] = {
    {16, 15, 14, 16, 3, 1, 1, ALL, "direct/direct/direct", ""},
    {32, 9, 9, 32, 3, 1, 1, ALL, "wino/wino/wino", ""},
    {8, 15, 14, 8, 2, 1, 1, ALL, "direct/direct/tap", ""},
    {16, 15, 14, 24, 3, 2, 1, ALL, "direct-s2/direct-s2/direct-s2", ""},
    {16, 15, 14, 16, 3, 1, 1, GEMM, "tap/tap/tap", ""},
    {13, 8, 8, 8, 3, 1, 1, GEMM, "tap/gemm/gemm", ""},
};

Test(conv_choice, every_algorithm_matches_im2col)
{
    backend *be = cpu_backend(2);
    int seen_fwd[CONV_FWD_DIRECT_S2 + 1] = {0};
    int seen_din[CONV_DIN_DIRECT_S2 + 1] = {0};
    int seen_dw[CONV_DW_DIRECT_S2 + 1] = {0};
    for (int i = 0; i < N_OF(forced); i++) {
        const choice_case *t = &forced[i];
        conv_shape s;
        cr_assert_eq(conv_shape_init(&s, 3 + 2 * (i % 2), t->C, t->H, t->W, t->K, t->R, t->R,
                                     t->stride, t->pad),
                     0);
        const conv_caps *caps = &caps_of[t->caps];
        void *plan = cpu_conv_plan_caps(be, &s, caps),
             *ref = cpu_conv_plan_caps(be, &s, &caps_of[IM2COL]);
        conv_choice c = cpu_conv_plan_choice(plan), r = cpu_conv_plan_choice(ref);
        char got[64];
        conv_choice_name(&c, got, sizeof got);
        /* the AVX-512 kernels where the CPU has them, else the GEMM path */
        if (have_avx512f() || !caps->direct)
            cr_assert_str_eq(got, t->want, "case %d", i);
        cr_assert(r.fwd == CONV_FWD_GEMM && r.din == CONV_DIN_GEMM &&
                      (r.dw == CONV_DW_GEMM || r.dw == CONV_DW_GEMM_T),
                  "case %d: the reference is im2col", i);
        seen_fwd[c.fwd] = seen_fwd[r.fwd] = 1;
        seen_din[c.din] = seen_din[r.din] = 1;
        seen_dw[c.dw] = seen_dw[r.dw] = 1;
        be->ops->conv_plan_free(be, plan);
        be->ops->conv_plan_free(be, ref);

        conv_pair p = conv_pair_run_ref(be, &s, caps, &caps_of[IM2COL], i % 2, (uint64_t)(900 + i));
        long nd = agree(p.out[0], p.out[1], p.out[2], p.nout, s.C * s.R * s.S + 1, "out", i);
        nd += agree(p.din[0], p.din[1], p.din[2], p.nin, s.K * s.R * s.S, "din", i);
        nd += agree(p.dw[0], p.dw[1], p.dw[2], p.nw, s.B * s.OH * s.OW, "dw", i);
        agree(p.db[0], p.db[1], p.db[2], (size_t)s.K, s.B * s.OH * s.OW, "dbias", i);
        conv_pair_free(be, &p);
        if (c.fwd != r.fwd || c.din != r.din || c.dw != r.dw)
            cr_assert_gt(nd, 0, "case %d (%s): the same bits as im2col: did it run?", i, got);
    }
    be->ops->destroy(be);
    for (int a = 0; a <= CONV_FWD_DIRECT_S2; a++)
        if (have_avx512f() || a == CONV_FWD_GEMM || a == CONV_FWD_TAP)
            cr_expect(seen_fwd[a], "forward %s never ran", conv_fwd_name((conv_fwd_algo)a));
    for (int a = 0; a <= CONV_DIN_DIRECT_S2; a++)
        if (have_avx512f() || a == CONV_DIN_GEMM || a == CONV_DIN_TAP)
            cr_expect(seen_din[a], "input gradient %s never ran", conv_din_name((conv_din_algo)a));
    for (int a = 0; a <= CONV_DW_DIRECT_S2; a++)
        if (have_avx512f() || a <= CONV_DW_TAP)
            cr_expect(seen_dw[a], "weight gradient %s never ran", conv_dw_name((conv_dw_algo)a));
}
