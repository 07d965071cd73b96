/* wino_dw.h — the weight gradient of a 3x3, stride-1, pad-1 convolution
 * by Winograd's F(2x2, 3x3) on AVX-512 (wino_dw.c): 16 multiplies per
 * 2x2 outputs per (c, k) where the direct kernel (conv_direct_dw) needs
 * 36. conv.c uses it for such shapes when wino_dw_fits() and
 * wino_dw_on(); else conv_direct_dw or its GEMMs. */
#ifndef TRAIN_CPU_WINO_DW_H
#define TRAIN_CPU_WINO_DW_H

#include <stddef.h>

#include "nn/backend.h"

/* Whether this CPU runs it (AVX-512F) and it is not switched off by
 * wino_dw_enable(0) (the tests' switch to the other paths). */
int wino_dw_on(void);
void wino_dw_enable(int on);

/* Whether s is a shape it takes: 3x3, stride 1, pad 1, 32 <= C, K <= 64
 * (measured per layer, one thread, batch 64: at 16 channels the
 * transforms cost what the products save, 1.00x at 28x28; 32 channels
 * at 14x14 1.36x, 64 at 7x7 1.16x, 64 at 14x14 1.6x). */
int wino_dw_fits(const conv_shape *s);

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
