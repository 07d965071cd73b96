/* resize_simd.h — the resampler's vector passes (resize_x86.c), for
 * resize.c only. Each gives the portable loop's bytes exactly. */
#ifndef TRAIN_RESIZE_SIMD_H
#define TRAIN_RESIZE_SIMD_H

#include <stddef.h>
#include <stdint.h>

#include "image/resize.h"

/* A Q22 weight as two int16 halves: (w >> RS_SPLIT, w & RS_SPLIT_MASK). */
#define RS_SPLIT 15
#define RS_SPLIT_MASK ((1 << RS_SPLIT) - 1)

/* Whether this CPU runs the AVX2 passes. */
int rs_avx2_available(void);

/* The horizontal pass of two 3-channel rows (in1 may be in0, out1 out0):
 * ax->count outputs each, from rows whose first pixel is source column
 * `off`, of which `avail` bytes may be read; needs ax->pk. */
void rs_hrows3_avx2(uint8_t *out0, uint8_t *out1, const uint8_t *in0, const uint8_t *in1,
                    size_t avail, const resize_axis *ax, int off);

/* One output row of the vertical pass (rowb >= 32 bytes): n source rows
 * `stride` apart weighted by k. */
void rs_vrow_avx2(uint8_t *out, const uint8_t *rows, size_t stride, const int32_t *k, int n,
                  size_t rowb);

#endif
