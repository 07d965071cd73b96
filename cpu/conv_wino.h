/* conv_wino.h — Winograd F(2x2, 3x3) on AVX-512 for conv.c's 3x3,
 * stride-1, pad-1 convolutions (the resnets' "same" convs): the forward,
 * and the input gradient as the forward of dout with the flipped,
 * transposed weights (conv.c's p->ts). 16 multiplies per 2x2 outputs per
 * (input, output) channel pair instead of 36 (conv_wino.c). conv_choose
 * (conv_choice.c) says which plans take it: with conv_caps.wino, from 32
 * channels in and out, where it pays. */
#ifndef TRAIN_CPU_CONV_WINO_H
#define TRAIN_CPU_CONV_WINO_H

#include <stddef.h>

#include "nn/backend.h"

/* floats of the transformed weights for shape s (K rounded up to 8) */
size_t conv_wino_w_n(const conv_shape *s);
/* u (conv_wino_w_n(s) floats) = the 16 matrices G g G^T of w (K x C x 3
 * x 3), [16][K / 8][C][8], zeros past K */
void conv_wino_weights(float *u, const float *w, const conv_shape *s);
/* the same for the input gradient as a convolution of dout, of shape ts
 * (C_ts = s->K, K_ts = s->C): the weights w[k][c] flipped in both axes
 * and transposed (u takes conv_wino_w_n(ts) floats) */
void conv_wino_weights_flip(float *u, const float *w, const conv_shape *s);

/* floats of scratch conv_wino needs for shape s (per thread) */
size_t conv_wino_scratch_n(const conv_shape *s);
/* samples per forward task: enough 2x2 tiles for the GEMMs' columns */
int conv_wino_group(const conv_shape *s);

/* y (nb x K x H x W) = the convolution of nb consecutive samples x (nb x
 * C x H x W) with u (conv_wino_weights' layout), + bias (may be NULL).
 * scratch: conv_wino_scratch_n(s) floats. Each output is computed the same
 * way whatever nb is. Only when conv_direct_available(). */
void conv_wino(float *y, const float *x, int nb, const float *u, const float *bias,
               const conv_shape *s, float *scratch);

#endif
