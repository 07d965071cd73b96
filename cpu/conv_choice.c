/* conv_choice.c — the CPU convolution's algorithm per pass (conv_choice.h):
 * every threshold, with the measurement behind it. The timings are from
 * docs/BENCH-NN.md's machine, one thread unless said otherwise;
 * tests/test_conv_choice.c holds the table of shapes and choices.
 */
#define _POSIX_C_SOURCE 200809L
#include "cpu/conv_choice.h"

#include <stdio.h>

#include "cpu/conv_direct.h"
#include "cpu/conv_wino_dw.h"

/* Output pixels (P = OH * OW) from which the weight gradient takes the col
 * on the left, dw^T = col . dout^T: OpenBLAS packs the large col far
 * faster in that orientation (resnet20's 16 channels at 28x28: 42 against
 * 119-183 us per sample); below it the plain dw = dout . col^T is as fast
 * or 5-20% faster. The same size is where the tap-by-tap backward pays
 * (CONV_DW_TAP, CONV_DIN_TAP): at 7x7 the 29% of junk columns on the
 * padded grid made it slower than im2col + col2im (30 against 27 ms per
 * resnet20 step). */
#define CONV_BIG_P 128

/* Channels in and out from which the tap-by-tap convolutions (and the
 * direct kernel that replaces their GEMMs) pay: 3x3 with at least 8 in and
 * out. lenet's 5x5s (one input channel, or a pad-4 input gradient of an
 * 8x8 dout) run 1.7-3x slower that way. */
#define CONV_TAP_MIN_CHANNELS 8

/* Channels in and out from which Winograd's forward and input gradient
 * replace the direct kernel (resnet20, per step: at 16 channels, 28x28,
 * the forward took 11.07 ms against 10.65 direct and the backward 20.99
 * against 20.85; at 32 channels, 14x14, 7.27 against 8.36 and 15.15
 * against 16.27; at 64, 7x7, 5.57 against 9.22 and 15.74 against 19.00) */
#define CONV_WINO_MIN_CHANNELS 32

/* Winograd's weight gradient from 32 to 64 channels in and out (per
 * layer, batch 64: at 16 channels the transforms cost what the products
 * save, 1.00x at 28x28; 32 channels at 14x14 1.36x, 64 at 7x7 1.16x, 64
 * at 14x14 1.6x); past 64, the direct kernel's */
#define CONV_WINO_DW_MIN_CHANNELS 32
#define CONV_WINO_DW_MAX_CHANNELS 64

conv_caps conv_caps_cpu(void)
{
    int direct = conv_direct_available() != 0;
    return (conv_caps){
        .tap = 1, .direct = direct, .wino = direct, .wino_dw = wino_dw_available() != 0};
}

conv_caps conv_caps_and_cpu(const conv_caps *caps)
{
    conv_caps cpu = conv_caps_cpu(), c = *caps;
    c.direct = c.direct && cpu.direct;
    c.wino = c.wino && cpu.wino;
    c.wino_dw = c.wino_dw && cpu.wino_dw;
    return c;
}

static int both_at_least(const conv_shape *s, int n) { return s->C >= n && s->K >= n; }

/* 3x3, stride 1, pad 1: the "same" convs Winograd F(2x2, 3x3) takes */
static int same_3x3(const conv_shape *s)
{
    return s->R == 3 && s->S == 3 && s->stride == 1 && s->pad == 1;
}

/* Stride 1, square kernels up to 3x3 padded by less than their size, with
 * enough channels: convolutions run tap by tap on the padded grid (the
 * direct kernel's shapes too, pad <= S - 1). A 1x1 unpadded one is a
 * plain GEMM already. */
static int takes_taps(const conv_shape *s)
{
    int one = s->R == 1 && s->S == 1 && s->pad == 0;
    return s->stride == 1 && !one && s->R == s->S && s->R <= 3 && s->pad <= s->R - 1 &&
           both_at_least(s, CONV_TAP_MIN_CHANNELS);
}

/* the direct kernel's shapes (caps->direct): the forward and din of every
 * tap shape; the weight gradient of its 3x3s, by Winograd where that pays */
static conv_choice choose_direct(const conv_shape *s, const conv_caps *caps, int P)
{
    conv_choice c = {CONV_FWD_DIRECT, CONV_DIN_DIRECT, CONV_DW_GEMM};
    if (s->R == 3 && s->S == 3) /* conv_direct_dw has no junk columns: any size */
        c.dw = caps->wino_dw && same_3x3(s) && both_at_least(s, CONV_WINO_DW_MIN_CHANNELS) &&
                       s->C <= CONV_WINO_DW_MAX_CHANNELS && s->K <= CONV_WINO_DW_MAX_CHANNELS
                   ? CONV_DW_WINO
                   : CONV_DW_DIRECT;
    else if (P >= CONV_BIG_P)
        c.dw = caps->tap ? CONV_DW_TAP : CONV_DW_GEMM_T;
    if (caps->wino && same_3x3(s) && (caps->wino_small || both_at_least(s, CONV_WINO_MIN_CHANNELS)))
        c.fwd = CONV_FWD_WINO, c.din = CONV_DIN_WINO;
    return c;
}

conv_choice conv_choose(const conv_shape *s, const conv_caps *caps)
{
    int P = s->OH * s->OW;
    /* the resnets' downsampling convs */
    if (caps->direct && s->stride == 2 && s->R == 3 && s->S == 3 && s->pad == 1)
        return (conv_choice){CONV_FWD_DIRECT_S2, CONV_DIN_DIRECT_S2, CONV_DW_DIRECT_S2};
    conv_choice c = {CONV_FWD_GEMM, CONV_DIN_GEMM, P >= CONV_BIG_P ? CONV_DW_GEMM_T : CONV_DW_GEMM};
    if (!takes_taps(s))
        return c;
    if (caps->direct)
        return choose_direct(s, caps, P);
    if (!caps->tap)
        return c;
    c.fwd = CONV_FWD_TAP;
    if (P >= CONV_BIG_P)
        c.din = CONV_DIN_TAP, c.dw = CONV_DW_TAP;
    return c;
}

const char *conv_fwd_name(conv_fwd_algo a)
{
    static const char *const n[] = {"gemm", "tap", "direct", "wino", "direct-s2"};
    return (unsigned)a < sizeof n / sizeof n[0] ? n[a] : "?";
}

const char *conv_din_name(conv_din_algo a)
{
    static const char *const n[] = {"gemm", "tap", "direct", "wino", "direct-s2"};
    return (unsigned)a < sizeof n / sizeof n[0] ? n[a] : "?";
}

const char *conv_dw_name(conv_dw_algo a)
{
    static const char *const n[] = {"gemm", "gemm-t", "tap", "direct", "wino", "direct-s2"};
    return (unsigned)a < sizeof n / sizeof n[0] ? n[a] : "?";
}

const char *conv_choice_name(const conv_choice *c, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s/%s", conv_fwd_name(c->fwd), conv_din_name(c->din),
             conv_dw_name(c->dw));
    return buf;
}
