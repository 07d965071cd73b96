/* conv_wino_dw.h — the weight gradient of a 3x3, stride-1, pad-1 convolution
 * by Winograd's F(2x2, 3x3) on AVX-512 (conv_wino_dw.c): 16 multiplies per
 * 2x2 outputs per (c, k) where the direct kernel (conv_direct_dw) needs
 * 36. conv_choose (conv_choice.c) says which plans take it: with
 * conv_caps.wino_dw, at 32-64 channels in and out, where it pays. */
#ifndef TRAIN_CPU_WINO_DW_H
#define TRAIN_CPU_WINO_DW_H

#include <stddef.h>

#include "nn/backend.h"

/* Whether this CPU and this build run it (AVX-512F on x86-64):
 * conv_caps_cpu's wino_dw. */
int wino_dw_available(void);

/* floats of the per-thread scratch wino_dw_samples needs (16-float
 * aligned pieces inside), and of the per-thread sum acc */
size_t wino_dw_scratch_n(const conv_shape *s);
size_t wino_dw_acc_n(const conv_shape *s);

/* acc (wino_dw_acc_n floats) = the transformed gradient of nb >= 1
 * consecutive samples, from x (nb x C x H x W) and dy (nb x K x H x W),
 * summed in sample order */
void wino_dw_samples(float *acc, const float *x, const float *dy, const conv_shape *s, int nb,
                     float *scratch);

/* The weight gradient the sums in acc stand for, transposed as
 * conv_direct_dw writes it: rows (c, t) of wt (C*9 x K) = dw[k][c][t]
 * (overwritten). */
void wino_dw_finish(float *wt, const float *acc, const conv_shape *s);

#endif
