/* conv_direct.h — the direct AVX-512 kernel of conv.c's tap-by-tap
 * convolutions: stride 1, any R x S, pad <= S - 1, and of its stride-2
 * 3x3 pad-1 ones, one sample at a time (conv_direct.c). Which plans use it
 * is conv_choose's to say (conv_choice.c): with conv_caps.direct, which
 * other CPUs (and valgrind, which has no AVX-512) leave off. */
#ifndef TRAIN_CPU_CONV_DIRECT_H
#define TRAIN_CPU_CONV_DIRECT_H

#include <stddef.h>

#include "nn/backend.h"

/* output channels per block: the weights are laid out, and K padded, by it */
#define CONV_DIRECT_KB 8

/* Whether this CPU runs the kernel (AVX-512F, with the OS saving its
 * state): conv_caps_cpu's direct. */
int conv_direct_available(void);

/* floats of the padded input conv_direct needs for shape s (per thread) */
size_t conv_direct_xpad_n(const conv_shape *s);
/* floats of its weights for shape s: K rounded up to CONV_DIRECT_KB */
size_t conv_direct_w_n(const conv_shape *s);

/* wd (conv_direct_w_n(s) floats) from w (K x C x R x S): blocks of
 * CONV_DIRECT_KB output channels, [K / KB][C][R*S][KB], zeros past K */
void conv_direct_weights(float *wd, const float *w, const conv_shape *s);
/* the same for the input gradient as a convolution of dout: the weights
 * of shape ts (C_ts = s->K, K_ts = s->C) are w flipped and transposed,
 * wd[c / KB][k][R*S - 1 - t][c % KB] = w[k][c][t] */
void conv_direct_weights_flip(float *wd, const float *w, const conv_shape *s);

/* y (K x OH x OW) = the convolution of one sample x (C x H x W) with wd
 * (conv_direct_weights' layout), + bias (may be NULL); s->stride must be
 * 1 and s->pad <= s->S - 1; xp is scratch of conv_direct_xpad_n(s)
 * floats. Only when conv_direct_available(). */
void conv_direct(float *y, const float *x, const float *wd, const float *bias, const conv_shape *s,
                 float *xp);

/* out (cols x rows) = in (rows x cols) transposed. Only when
 * conv_direct_available(). */
void conv_direct_transpose(float *out, const float *in, int rows, int cols);

/* floats of the transposed dout conv_direct_dw needs for shape s (per
 * thread) */
size_t conv_direct_dyw_n(const conv_shape *s);

/* The weight gradient of one sample x (C x H x W), dy (K x OH x OW) of a
 * 3x3 shape s (stride 1, pad <= 2), transposed: rows (c, t) of wt (C*9 x
 * K) = (first ? 0 : wt) + the sample's dw[k][c][t]. xp and dyT are
 * scratch of conv_direct_xpad_n(s) and conv_direct_dyw_n(s) floats. Only
 * when conv_direct_available(). */
void conv_direct_dw(float *wt, const float *x, const float *dy, const conv_shape *s, int first,
                    float *xp, float *dyT);

/* Stride 2, 3x3, pad 1 (the resnets' downsampling convs): the
 * per-thread scratch the three calls below need (xp); the
 * floats of the input gradient's weights (wdf, from
 * conv_direct_s2_weights_flip: per din phase, blocks of CONV_DIRECT_KB
 * input channels c x K x the phase's taps x KB). The forward takes
 * conv_direct_weights' layout; conv_direct_s2_dw is conv_direct_dw's
 * contract (dyT of conv_direct_dyw_n(s) floats). Only when
 * conv_direct_available(). */
size_t conv_direct_s2_scratch_n(const conv_shape *s);
size_t conv_direct_s2_wf_n(const conv_shape *s);
void conv_direct_s2_weights_flip(float *wd, const float *w, const conv_shape *s);
void conv_direct_s2(float *y, const float *x, const float *wd, const float *bias,
                    const conv_shape *s, float *xp);
/* dx (C x H x W) = the input gradient of one sample's dy (K x OH x OW) */
void conv_direct_s2_din(float *dx, const float *dy, const float *wdf, const conv_shape *s,
                        float *xp);
void conv_direct_s2_dw(float *wt, const float *x, const float *dy, const conv_shape *s, int first,
                       float *xp, float *dyT);

#endif
