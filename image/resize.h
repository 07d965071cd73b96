/* resize.h — antialiased bilinear resampling of u8 HWC images.
 *
 * The filter is the triangle ("bilinear") kernel, widened by the scale
 * factor when shrinking so that every source pixel contributes (the
 * antialiasing of PIL's BILINEAR and of torchvision's Resize on PIL images);
 * when enlarging it is plain bilinear interpolation. Pixel centres sit at
 * (i + 0.5): output pixel i samples the source around (i + 0.5) * in/out.
 * Separable, one pass into a u8 intermediate, then the other (which goes
 * first depends on the geometry only); weights in Q22 fixed point with
 * 32-bit accumulators, rounded to nearest. On CPUs with AVX2 the passes run
 * as vector code chosen at run time (simd_x86.c), byte for byte what the
 * portable loops give.
 *
 * Only a window of the output may be computed (what a crop keeps): the
 * result equals the same window of the full resize, byte for byte.
 * A plan caches the weights of the last geometry, so resizing a data set of
 * equal-sized images builds them once. Deliberately no other filters, no
 * float images, no channel counts beyond 4.
 */
#ifndef TRAIN_RESIZE_H
#define TRAIN_RESIZE_H

#include <stddef.h>
#include <stdint.h>

/* Weights along one axis for output indices [first, first + count). */
typedef struct resize_axis {
    int in, out;      /* source size, full output size */
    int first, count; /* computed window of output indices */
    double b0, blen;  /* source box mapped onto the output */
    double radius;    /* the kernel's, in source pixels (0: max(scale, 1)) */
    int q14_only;     /* built by resize_plane: pk only, no coef */
    int taps;         /* stride of coef */
    int *lo;          /* (count) first source index of each output */
    int *n;           /* (count) number of taps of each output */
    int32_t *coef;    /* (count, taps) Q22 weights, each row sums to ~1 << 22 */
    size_t cap;       /* entries allocated in lo/n, and taps * cap in coef */
    size_t coef_cap;
    int16_t *pk; /* (count, groups, 16) the vector pass's weights, when packed */
    int groups;  /* pairs of taps per output in pk: (taps + 1) / 2 */
    int packed;  /* pk matches coef */
    size_t pk_cap;
} resize_axis;

typedef struct resize_plan {
    resize_axis y, x;
    uint8_t *tmp; /* horizontal-pass rows */
    size_t tmp_cap;
    int32_t *acc; /* one row of vertical-pass accumulators */
    size_t acc_cap;
    int scalar; /* 1: the portable loops even where vector code runs */
} resize_plan;

#define RS_PRECISION 22

/* Resize src (sh x sw x c, rows contiguous) to a dh x dw image, of which
 * only rows [y0, y0 + oh) and columns [x0, x0 + ow) are computed and written
 * to dst (row i of the window at dst + i * dst_stride). 1 <= c <= 4, the
 * window must lie inside dh x dw. A plan starts zeroed. */
void resize_apply(resize_plan *p, uint8_t *dst, size_t dst_stride, int dh, int dw, int y0, int x0,
                  int oh, int ow, const uint8_t *src, int sh, int sw, int c);

/* Resample the box [by, by + bh) x [bx, bx + bw) of src (sh x sw x c, rows
 * src_stride bytes apart; the box may be fractional and lies inside the
 * image) to a whole dh x dw image at dst (rows contiguous). Taps stay
 * inside the box rounded out to whole pixels, so a whole-pixel box gives
 * what cropping it and resizing the crop would (torchvision's
 * resized_crop); a fractional one is how a DCT-scaled decode of the crop
 * region is resampled. */
void resize_box(resize_plan *p, uint8_t *dst, int dh, int dw, const uint8_t *src, size_t src_stride,
                int sh, int sw, int c, double by, double bx, double bh, double bw);

/* A window of the resize of the box [by, by + bh) x [bx, bx + bw) onto
 * dh x dw, as resize_apply computes windows. The box may start before and
 * end after the source (a JPEG decoded at n/8 has ceil(h * n / 8) rows, of
 * which h * n / 8 are the picture; a region decode holds part of the
 * picture): as long as the source holds every pixel resize_span names for
 * the window, the result is the same bytes as from the whole picture. */
void resize_box_window(resize_plan *p, uint8_t *dst, size_t dst_stride, int dh, int dw, int y0,
                       int x0, int oh, int ow, const uint8_t *src, size_t src_stride, int sh,
                       int sw, int c, double by, double bx, double bh, double bw);

/* One channel (c = 1): the box of src (sh x sw, rows src_stride apart)
 * resampled to a whole dh x dw image at dst (rows dst_stride apart): the
 * filter of resize_box, with the triangle's radius ry, rx source pixels
 * where > 0 (a chroma plane's resampling standing in for upsampling +
 * resampling), but always the vertical pass first and the weights
 * rounded to Q14 (int16: a planar decode's luma and chroma, within
 * rounding of resize_box, not its bytes). On CPUs with AVX2 the
 * horizontal pass runs as a vertical one over the transposed rows, the
 * portable loops' bytes. */
void resize_plane(resize_plan *p, uint8_t *dst, size_t dst_stride, int dh, int dw,
                  const uint8_t *src, size_t src_stride, int sh, int sw, double by, double bx,
                  double bh, double bw, double ry, double rx);

/* A window of resize_plane's resample of the box onto dh x dw: rows
 * [y0, y0 + oh) and columns [x0, x0 + ow) to dst, the bytes resize_plane
 * gives there (a centre crop's planes: taps reach past the crop's edges,
 * as far as the box's rounded-out bounds and the source allow). */
void resize_plane_window(resize_plan *p, uint8_t *dst, size_t dst_stride, int dh, int dw, int y0,
                         int x0, int oh, int ow, const uint8_t *src, size_t src_stride, int sh,
                         int sw, double by, double bx, double bh, double bw, double ry, double rx);

/* The source pixels [*lo, *hi) that outputs [first, first + count) of an
 * axis read when the box [b0, b0 + blen) of a source `in` long maps onto
 * `out` outputs (a superset of the taps: what to decode for a window). */
void resize_span(int in, double b0, double blen, int out, int first, int count, int *lo, int *hi);

void resize_plan_free(resize_plan *p);

#endif
