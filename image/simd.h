/* simd.h — the image pipeline's vector kernels (simd_x86.c): the
 * resampler's two passes and the HWC -> CHW copy, for resize.c and
 * augment.c only. Each gives the portable loop's bytes exactly; callers
 * ask img_avx2() and keep the loop for other CPUs. */
#ifndef TRAIN_IMAGE_SIMD_H
#define TRAIN_IMAGE_SIMD_H

#include <stddef.h>
#include <stdint.h>

#include "image/resize.h"

/* A Q22 weight as two int16 halves: (w >> RS_SPLIT, w & RS_SPLIT_MASK). */
#define RS_SPLIT 15
#define RS_SPLIT_MASK ((1 << RS_SPLIT) - 1)

/* Whether this CPU runs the AVX2 kernels. */
int img_avx2(void);

/* The horizontal pass of two 3-channel rows (in1 may be in0, out1 out0):
 * ax->count outputs each, from rows whose first pixel is source column
 * `off`, of which `avail` bytes may be read; needs ax->pk. */
void rs_hrows3_avx2(uint8_t *out0, uint8_t *out1, const uint8_t *in0, const uint8_t *in1,
                    size_t avail, const resize_axis *ax, int off);

/* One output row of the vertical pass (rowb >= 32 bytes): n source rows
 * `stride` apart weighted by w, per pair of taps (t, t + 1) the int16
 * halves (hi_t hi_t1 lo_t lo_t1). */
void rs_vrow_avx2(uint8_t *out, const uint8_t *rows, size_t stride, const int16_t *w, int n,
                  size_t rowb);

/* rs_vrow_avx2 with Q14 weights: per pair of taps (t, t + 1) the int16
 * (w_t w_t1); resize_plane's vertical pass. */
void rs_vrow14_avx2(uint8_t *out, const uint8_t *rows, size_t stride, const int16_t *w, int n,
                    size_t rowb);

/* 3-channel HWC -> CHW of n pixels from s: planes r, g, b, each written at
 * [0, n), or reversed (pixel x to [n - 1 - x]) when flip. */
void img_chw3_row_avx2(uint8_t *r, uint8_t *g, uint8_t *b, const uint8_t *s, int n, int flip);

/* dst (cols x rows, rows dst_stride apart) = the transpose of src (rows x
 * cols); 16 x 32 blocks with AVX2, a plain loop otherwise. */
void img_transpose(uint8_t *dst, size_t dst_stride, const uint8_t *src, size_t src_stride, int rows,
                   int cols);

/* img_ycc_row (image.c): YCbCr to R, G, B planes, n >= 32 pixels,
 * mirrored when flip; the same bytes. */
void img_ycc_row_avx2(uint8_t *r, uint8_t *g, uint8_t *b, const uint8_t *y, const uint8_t *cb,
                      const uint8_t *cr, int n, int flip);

#endif
