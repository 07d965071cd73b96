/* resize.c — separable antialiased bilinear resampling; see resize.h.
 *
 * For output index i along an axis of scale s = in/out, the kernel is the
 * triangle max(0, 1 - |t|) stretched to radius r = max(s, 1) and centred on
 * the source coordinate (i + 0.5) * s; source pixel j sits at j + 0.5.
 * Weights are normalised to sum 1 over the pixels inside the image (so edges
 * renormalise instead of clamping) and rounded to Q22. This is the
 * geometry PIL uses for Image.resize(..., BILINEAR), so results agree with
 * PIL to within rounding (measured in docs/BENCH-IMAGE.md).
 */
#define _POSIX_C_SOURCE 200809L
#include "image/resize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "image/simd.h"

static double tri(double t)
{
    t = fabs(t);
    return t < 1.0 ? 1.0 - t : 0.0;
}

static void axis_reserve(resize_axis *a, int count, int taps)
{
    if ((size_t)count > a->cap) {
        a->cap = (size_t)count;
        a->lo = xrealloc(a->lo, a->cap * sizeof *a->lo);
        a->n = xrealloc(a->n, a->cap * sizeof *a->n);
    }
    size_t need = (size_t)count * (size_t)taps;
    if (need > a->coef_cap) {
        a->coef_cap = need;
        a->coef = xrealloc(a->coef, need * sizeof *a->coef);
    }
}

/* The source pixels [*lo, *hi) under the kernel of radius `radius`
 * centred on `centre`, kept inside [bmin, bmax). */
static void tap_bounds(double centre, double radius, int bmin, int bmax, int *lo, int *hi)
{
    *lo = (int)floor(centre - radius + 0.5);
    *hi = (int)floor(centre + radius + 0.5);
    *lo = *lo < bmin ? bmin : *lo;
    *hi = *hi > bmax ? bmax : *hi;
}

/* The box [b0, b0 + blen) of a source `in` long, rounded out to whole
 * pixels and kept inside it: where the taps may reach. */
static void box_bounds(int in, double b0, double blen, int *bmin, int *bmax)
{
    *bmin = (int)floor(b0), *bmax = (int)ceil(b0 + blen);
    *bmin = *bmin < 0 ? 0 : *bmin;
    *bmax = *bmax > in ? in : *bmax;
}

void resize_span(int in, double b0, double blen, int out, int first, int count, int *lo, int *hi)
{
    int bmin, bmax, l, h;
    box_bounds(in, b0, blen, &bmin, &bmax);
    double scale = blen / (double)out, radius = scale > 1.0 ? scale : 1.0;
    tap_bounds(b0 + ((double)first + 0.5) * scale, radius, bmin, bmax, lo, &h);
    tap_bounds(b0 + ((double)(first + count - 1) + 0.5) * scale, radius, bmin, bmax, &l, hi);
}

/* Weights for output indices [first, first + count) of an axis that maps
 * the source box [b0, b0 + blen) (of a source `in` long; taps stay inside
 * the box, rounded out to whole pixels) onto `out` outputs; reuses the
 * previous ones when the geometry is unchanged. */
static void axis_build(resize_axis *a, int in, double b0, double blen, int out, int first,
                       int count, double radius_px)
{
    if (a->lo && !a->q14_only && a->in == in && a->out == out && a->first == first &&
        a->count == count && a->b0 == b0 && a->blen == blen && a->radius == radius_px)
        return;
    a->q14_only = 0;
    a->b0 = b0;
    a->blen = blen;
    a->radius = radius_px;
    a->packed = 0;
    int bmin, bmax;
    box_bounds(in, b0, blen, &bmin, &bmax);
    double scale = blen / (double)out;
    double fscale = radius_px > 0.0 ? radius_px : scale > 1.0 ? scale : 1.0;
    double inv = 1.0 / fscale, radius = fscale;
    int taps = (int)ceil(radius) * 2 + 1;
    axis_reserve(a, count, taps);
    a->in = in;
    a->out = out;
    a->first = first;
    a->count = count;
    a->taps = taps;
    for (int i = 0; i < count; i++) {
        double centre = b0 + ((double)(first + i) + 0.5) * scale;
        int lo, hi;
        tap_bounds(centre, radius, bmin, bmax, &lo, &hi);
        int32_t *k = a->coef + (size_t)i * (size_t)taps;
        double sum = 0.0;
        for (int j = lo; j < hi; j++)
            sum += tri(((double)j - centre + 0.5) * inv);
        if (!(sum > 0.0)) { /* cannot happen for in, out >= 1; stay safe */
            int j = (int)centre;
            a->lo[i] = j < bmin ? bmin : j >= bmax ? bmax - 1 : j;
            a->n[i] = 1;
            k[0] = 1 << RS_PRECISION;
            continue;
        }
        int n = 0, first_nz = -1;
        for (int j = lo; j < hi; j++) {
            double w = tri(((double)j - centre + 0.5) * inv) / sum;
            int32_t q = (int32_t)floor(w * (double)(1 << RS_PRECISION) + 0.5);
            if (q == 0 && first_nz < 0)
                continue; /* leading zero weight: skip the tap */
            if (first_nz < 0)
                first_nz = j;
            k[n++] = q;
        }
        while (n > 1 && k[n - 1] == 0) /* trailing zero weights */
            n--;
        a->lo[i] = first_nz < 0 ? lo : first_nz;
        a->n[i] = n > 0 ? n : 1;
        if (n == 0)
            k[0] = 0;
    }
}

static void axis_build_box(resize_axis *a, int in, double b0, double blen, int out, int first,
                           int count)
{
    axis_build(a, in, b0, blen, out, first, count, 0.0);
}

static inline uint8_t clip8(int32_t v)
{
    if (v < 0)
        return 0;
    v >>= RS_PRECISION;
    return v > 255 ? 255 : (uint8_t)v;
}

/* The weights as the vector passes read them, per output and per pair of
 * taps (t, t + 1), a missing second tap weighing 0:
 *   RS_PACK_H (rs_hrows3_avx2): the high halves (wt wt1 wt wt1 wt wt1 0 0),
 *     then the low ones, one pair per channel of a pixel;
 *   RS_PACK_V (rs_vrow_avx2): (wt wt1) high halves, then (wt wt1) low;
 *   RS_PACK_Q14 (resize_plane, from axis_build_q14): (wt wt1) in Q14. */
enum { RS_PACK_H = 1, RS_PACK_V = 2, RS_PACK_Q14 = 3 };
static void axis_pack(resize_axis *a, int role)
{
    if (a->packed == role)
        return;
    const int per = role == RS_PACK_H ? 16 : 4;
    a->groups = (a->taps + 1) / 2;
    size_t need = (size_t)a->count * (size_t)a->groups * (size_t)per;
    if (need > a->pk_cap) {
        a->pk_cap = need;
        a->pk = xrealloc(a->pk, need * sizeof *a->pk);
    }
    for (int i = 0; i < a->count; i++) {
        const int32_t *k = a->coef + (size_t)i * (size_t)a->taps;
        int16_t *w = a->pk + (size_t)i * (size_t)a->groups * (size_t)per;
        for (int t = 0; t < a->n[i]; t += 2, w += per) {
            int32_t k0 = k[t], k1 = t + 1 < a->n[i] ? k[t + 1] : 0;
            const int16_t h0 = (int16_t)(k0 >> RS_SPLIT), h1 = (int16_t)(k1 >> RS_SPLIT),
                          l0 = (int16_t)(k0 & RS_SPLIT_MASK), l1 = (int16_t)(k1 & RS_SPLIT_MASK);
            if (role == RS_PACK_V) {
                w[0] = h0, w[1] = h1, w[2] = l0, w[3] = l1;
                continue;
            }
            for (int ch = 0; ch < 3; ch++) {
                w[2 * ch] = h0, w[2 * ch + 1] = h1;
                w[8 + 2 * ch] = l0, w[8 + 2 * ch + 1] = l1;
            }
            w[6] = w[7] = w[14] = w[15] = 0;
        }
    }
    a->packed = role;
}

/* resize_plane's weights for outputs [0, out): axis_build's filter (box,
 * radius, taps), normalised and rounded straight to the Q14 pairs of
 * RS_PACK_Q14 (one division per output, not per tap). */
static void axis_build_q14(resize_axis *a, int in, double b0, double blen, int out, int first,
                           int count, double radius_px)
{
    if (a->lo && a->q14_only && a->in == in && a->out == out && a->first == first &&
        a->count == count && a->b0 == b0 && a->blen == blen && a->radius == radius_px)
        return;
    int bmin, bmax;
    box_bounds(in, b0, blen, &bmin, &bmax);
    const double scale = blen / (double)out;
    const double r = radius_px > 0.0 ? radius_px : scale > 1.0 ? scale : 1.0, inv = 1.0 / r;
    const int taps = (int)ceil(r) * 2 + 1;
    axis_reserve(a, count, 0);
    a->groups = (taps + 1) / 2;
    size_t need = (size_t)count * (size_t)a->groups * 2;
    if (need > a->pk_cap) {
        a->pk_cap = need;
        a->pk = xrealloc(a->pk, need * sizeof *a->pk);
    }
    for (int i = 0; i < count; i++) {
        const double centre = b0 + ((double)(i + first) + 0.5) * scale;
        int lo, hi;
        tap_bounds(centre, r, bmin, bmax, &lo, &hi);
        /* each tap's filter value once (up to 64 taps; wider filters
         * evaluate it again below), summed in tap order */
        double tv[64], sum = 0.0;
        for (int j = lo; j < hi; j++) {
            const double v = tri(((double)j - centre + 0.5) * inv);
            if (j - lo < 64)
                tv[j - lo] = v;
            sum += v;
        }
        int16_t *w = a->pk + (size_t)i * (size_t)a->groups * 2;
        int n = 0, lo_tap = -1;
        if (sum > 0.0) {
            const double q = (double)(1 << 14) / sum;
            for (int j = lo; j < hi; j++) {
                const double t = j - lo < 64 ? tv[j - lo] : tri(((double)j - centre + 0.5) * inv);
                /* t * q + 0.5 > 0: truncation is floor (no libm call) */
                const int16_t v = (int16_t)(t * q + 0.5);
                if (v == 0 && lo_tap < 0)
                    continue; /* leading zero weight: skip the tap */
                if (lo_tap < 0)
                    lo_tap = j;
                w[n++] = v;
            }
            while (n > 1 && w[n - 1] == 0) /* trailing zero weights */
                n--;
        }
        if (n == 0) { /* cannot happen for in, out >= 1; stay safe */
            const int j = (int)centre;
            lo_tap = j < bmin ? bmin : j >= bmax ? bmax - 1 : j;
            w[n++] = 1 << 14;
        }
        if (n % 2)
            w[n] = 0; /* the pair's missing second tap */
        a->lo[i] = lo_tap;
        a->n[i] = n;
    }
    a->in = in, a->out = out, a->first = first, a->count = count, a->taps = taps;
    a->b0 = b0, a->blen = blen, a->radius = radius_px;
    a->q14_only = 1;
    a->packed = RS_PACK_Q14;
}

/* The passes of resize_plane, portable: one output row from n source
 * rows `stride` apart, and one row of outputs from a source row whose
 * first byte is column `off`; weights in Q14 pairs (RS_PACK_Q14). */
static void plane_vrow(uint8_t *restrict out, const uint8_t *restrict rows, size_t stride,
                       const int16_t *restrict w, int n, size_t rowb)
{
    for (size_t x = 0; x < rowb; x++) {
        int32_t acc = 1 << 13;
        for (int j = 0; j < n; j++)
            acc += rows[(size_t)j * stride + x] * w[j];
        acc >>= 14;
        out[x] = (uint8_t)(acc > 255 ? 255 : acc);
    }
}

static void plane_hrow(uint8_t *restrict out, const uint8_t *restrict in, const resize_axis *ax,
                       int off)
{
    for (int i = 0; i < ax->count; i++) {
        const int16_t *w = ax->pk + (size_t)i * (size_t)ax->groups * 2;
        const uint8_t *s = in + (ax->lo[i] - off);
        int32_t acc = 1 << 13;
        for (int j = 0; j < ax->n[i]; j++)
            acc += s[j] * w[j];
        acc >>= 14;
        out[i] = (uint8_t)(acc > 255 ? 255 : acc);
    }
}

/* Whether this plan runs the vector passes. */
static int use_simd(const resize_plan *p) { return !p->scalar && img_avx2(); }

/* One row: ax->count outputs of c channels from a source row whose first
 * pixel is source column `off`. */
static void hpass(uint8_t *restrict out, const uint8_t *restrict in, const resize_axis *ax, int c,
                  int off)
{
    const int32_t half = 1 << (RS_PRECISION - 1);
    const int count = ax->count;
    const size_t taps = (size_t)ax->taps;
    const int32_t *restrict coef = ax->coef;
    const int *restrict lo = ax->lo, *restrict nt = ax->n;
    for (int i = 0; i < count; i++) {
        const int32_t *restrict k = coef + (size_t)i * taps;
        const uint8_t *restrict s = in + (size_t)(lo[i] - off) * (size_t)c;
        const int n = nt[i];
        if (c == 3) {
            int32_t s0 = half, s1 = half, s2 = half;
            for (int j = 0; j < n; j++, s += 3) {
                const int32_t w = k[j];
                s0 += s[0] * w;
                s1 += s[1] * w;
                s2 += s[2] * w;
            }
            out[3 * i] = clip8(s0);
            out[3 * i + 1] = clip8(s1);
            out[3 * i + 2] = clip8(s2);
        } else if (c == 1) {
            int32_t s0 = half;
            for (int j = 0; j < n; j++)
                s0 += s[j] * k[j];
            out[i] = clip8(s0);
        } else {
            for (int ch = 0; ch < c; ch++) {
                int32_t s0 = half;
                for (int j = 0; j < n; j++)
                    s0 += s[c * j + ch] * k[j];
                out[c * i + ch] = clip8(s0);
            }
        }
    }
}

/* Two rows through the horizontal pass (in1 may be in0 and out1 out0),
 * `avail` bytes readable from each row's start. */
static void hrows(const resize_plan *p, uint8_t *out0, uint8_t *out1, const uint8_t *in0,
                  const uint8_t *in1, size_t avail, const resize_axis *ax, int c, int off)
{
    if (c == 3 && ax->packed == RS_PACK_H && use_simd(p)) {
        rs_hrows3_avx2(out0, out1, in0, in1, avail, ax, off);
        return;
    }
    hpass(out0, in0, ax, c, off);
    if (out1 != out0)
        hpass(out1, in1, ax, c, off);
}

/* One output row of the vertical pass: n source rows `stride` apart,
 * weighted. The pointers are restrict so that gcc vectorises the loops
 * over the row (u8 rows cannot alias the int32 accumulators). */
static void vpass_row(uint8_t *restrict out, int32_t *restrict acc, const uint8_t *restrict rows,
                      size_t stride, const int32_t *restrict k, int n, size_t rowb)
{
    for (size_t x = 0; x < rowb; x++)
        acc[x] = 1 << (RS_PRECISION - 1);
    for (int j = 0; j < n; j++) {
        const uint8_t *restrict row = rows + (size_t)j * stride;
        const int32_t w = k[j];
        for (size_t x = 0; x < rowb; x++)
            acc[x] += row[x] * w;
    }
    for (size_t x = 0; x < rowb; x++)
        out[x] = clip8(acc[x]);
}

/* Output i of the vertical pass: ay->n[i] source rows `stride` apart from
 * `rows` on. */
static void vrow(const resize_plan *p, uint8_t *out, const uint8_t *rows, size_t stride,
                 const resize_axis *ay, int i, size_t rowb)
{
    if (rowb >= 32 && ay->packed == RS_PACK_V && use_simd(p))
        rs_vrow_avx2(out, rows, stride, ay->pk + (size_t)i * (size_t)ay->groups * 4, ay->n[i],
                     rowb);
    else
        vpass_row(out, p->acc, rows, stride, ay->coef + (size_t)i * (size_t)ay->taps, ay->n[i],
                  rowb);
}

/* The source box of both axes: [y, y + h) x [x, x + w), source pixels. */
typedef struct resize_window {
    double y, x, h, w;
} resize_window;

/* Which pass goes first: the one that leaves the other fewer pixels. The
 * horizontal pass costs more per product (its taps vary per output; the
 * portable loop is scalar, the AVX2 one does a pixel's pair of taps per
 * instruction), the vertical one vectorises over the row, so shrinking
 * vertically first pays when the horizontal pass would otherwise filter
 * many more source rows than there are output rows. Decided from the box
 * and the full output size only, so a window is computed the way the whole
 * image is (byte for byte), and the same with or without AVX2 (the 4x was
 * tuned for the scalar pass and kept: changing it changes results). PIL
 * always goes horizontal first; the order changes results by rounding. */
static int vertical_first(resize_window b, int dh, int dw)
{
    double tx = 2.0 * (b.w > dw ? b.w / dw : 1.0) + 1.0,
           ty = 2.0 * (b.h > dh ? b.h / dh : 1.0) + 1.0;
    double hfirst = b.h * dw * tx * 4.0 + (double)dh * dw * ty; /* scalar work counted 4x */
    double vfirst = (double)dh * b.w * ty + (double)dh * dw * tx * 4.0;
    return vfirst < hfirst;
}

static void grow_tmp(resize_plan *p, size_t bytes, size_t accs)
{
    if (bytes > p->tmp_cap) {
        p->tmp_cap = bytes;
        p->tmp = xrealloc(p->tmp, bytes);
    }
    if (accs > p->acc_cap) {
        p->acc_cap = accs;
        p->acc = xrealloc(p->acc, accs * sizeof *p->acc);
    }
}

/* Both axes built: each output row is the vertical pass over the source
 * columns the horizontal taps need, then the horizontal pass of that row
 * (two rows at a time). */
static void resize_vfirst(resize_plan *p, uint8_t *dst, size_t dst_stride, int oh,
                          const uint8_t *src, size_t src_stride, int c)
{
    const resize_axis *ax = &p->x, *ay = &p->y;
    int clo = ax->lo[0], chi = clo;
    for (int i = 0; i < ax->count; i++) {
        int end = ax->lo[i] + ax->n[i];
        clo = ax->lo[i] < clo ? ax->lo[i] : clo;
        chi = end > chi ? end : chi;
    }
    const size_t cwb = (size_t)(chi - clo) * (size_t)c;
    grow_tmp(p, 2 * cwb, cwb);
    for (int i = 0; i < oh; i += 2) {
        const int rows = i + 1 < oh ? 2 : 1;
        for (int r = 0; r < rows; r++)
            vrow(p, p->tmp + (size_t)r * cwb,
                 src + (size_t)ay->lo[i + r] * src_stride + (size_t)clo * (size_t)c, src_stride, ay,
                 i + r, cwb);
        uint8_t *d = dst + (size_t)i * dst_stride;
        hrows(p, d, d + (size_t)(rows - 1) * dst_stride, p->tmp, p->tmp + (size_t)(rows - 1) * cwb,
              cwb, ax, c, clo);
    }
}

/* Identity along an axis: the box is whole pixels, as many as the output. */
static int box_identity(double b0, double blen, int out)
{
    return b0 == floor(b0) && blen == (double)out;
}

static void resize_core(resize_plan *p, uint8_t *dst, size_t dst_stride, int dh, int dw, int y0,
                        int x0, int oh, int ow, const uint8_t *src, size_t src_stride, int sh,
                        int sw, int c, resize_window b)
{
    const int horiz = !box_identity(b.x, b.w, dw), vert = !box_identity(b.y, b.h, dh);
    const size_t rowb = (size_t)ow * (size_t)c;
    if (oh <= 0 || ow <= 0)
        return;
    /* a whole-pixel box (which may start before a region's source): the
     * source shifted instead, added to in-range indices only */
    const int sx0 = horiz ? 0 : (int)b.x, sy0 = vert ? 0 : (int)b.y;
    if (horiz) {
        axis_build_box(&p->x, sw, b.x, b.w, dw, x0, ow);
        if (c == 3 && use_simd(p))
            axis_pack(&p->x, RS_PACK_H);
    }
    const size_t avail = (size_t)sw * (size_t)c; /* readable bytes of a source row */
    if (!vert) {                                 /* rows map one to one */
        for (int i = 0; i < oh; i += 2) {
            const int two = i + 1 < oh;
            const uint8_t *s = src + (size_t)(sy0 + y0 + i) * src_stride;
            uint8_t *d = dst + (size_t)i * dst_stride;
            if (horiz) {
                hrows(p, d, two ? d + dst_stride : d, s, two ? s + src_stride : s, avail, &p->x, c,
                      0);
                continue;
            }
            memcpy(d, s + (size_t)(sx0 + x0) * (size_t)c, rowb);
            if (two)
                memcpy(d + dst_stride, s + src_stride + (size_t)(sx0 + x0) * (size_t)c, rowb);
        }
        return;
    }
    axis_build_box(&p->y, sh, b.y, b.h, dh, y0, oh);
    if (use_simd(p))
        axis_pack(&p->y, RS_PACK_V);
    const resize_axis *ay = &p->y;
    if (horiz && vertical_first(b, dh, dw)) {
        resize_vfirst(p, dst, dst_stride, oh, src, src_stride, c);
        return;
    }
    int rlo = ay->lo[0], rhi = rlo;
    for (int i = 0; i < oh; i++) {
        int end = ay->lo[i] + ay->n[i];
        rlo = ay->lo[i] < rlo ? ay->lo[i] : rlo;
        rhi = end > rhi ? end : rhi;
    }
    const uint8_t *rows;
    size_t rstride;
    if (horiz) { /* horizontal pass over the source rows the window needs */
        grow_tmp(p, (size_t)(rhi - rlo) * rowb, rowb);
        for (int r = rlo; r < rhi; r += 2) {
            const int two = r + 1 < rhi;
            const uint8_t *s = src + (size_t)r * src_stride;
            uint8_t *t = p->tmp + (size_t)(r - rlo) * rowb;
            hrows(p, t, two ? t + rowb : t, s, two ? s + src_stride : s, avail, &p->x, c, 0);
        }
        rows = p->tmp;
        rstride = rowb;
    } else {
        rows = src + (size_t)rlo * src_stride + (size_t)(sx0 + x0) * (size_t)c;
        rstride = src_stride;
    }
    grow_tmp(p, 0, rowb);
    for (int i = 0; i < oh; i++)
        vrow(p, dst + (size_t)i * dst_stride, rows + (size_t)(ay->lo[i] - rlo) * rstride, rstride,
             ay, i, rowb);
}

void resize_apply(resize_plan *p, uint8_t *dst, size_t dst_stride, int dh, int dw, int y0, int x0,
                  int oh, int ow, const uint8_t *src, int sh, int sw, int c)
{
    resize_window b = {0.0, 0.0, (double)sh, (double)sw};
    resize_core(p, dst, dst_stride, dh, dw, y0, x0, oh, ow, src, (size_t)sw * (size_t)c, sh, sw, c,
                b);
}

void resize_box(resize_plan *p, uint8_t *dst, int dh, int dw, const uint8_t *src, size_t src_stride,
                int sh, int sw, int c, double by, double bx, double bh, double bw)
{
    resize_window b = {by, bx, bh, bw};
    resize_core(p, dst, (size_t)dw * (size_t)c, dh, dw, 0, 0, dh, dw, src, src_stride, sh, sw, c,
                b);
}

void resize_box_window(resize_plan *p, uint8_t *dst, size_t dst_stride, int dh, int dw, int y0,
                       int x0, int oh, int ow, const uint8_t *src, size_t src_stride, int sh,
                       int sw, int c, double by, double bx, double bh, double bw)
{
    resize_window b = {by, bx, bh, bw};
    resize_core(p, dst, dst_stride, dh, dw, y0, x0, oh, ow, src, src_stride, sh, sw, c, b);
}

void resize_plane_window(resize_plan *p, uint8_t *dst, size_t dst_stride, int dh, int dw, int y0,
                         int x0, int oh, int ow, const uint8_t *src, size_t src_stride, int sh,
                         int sw, double by, double bx, double bh, double bw, double ry, double rx)
{
    if (oh <= 0 || ow <= 0)
        return;
    resize_axis *ay = &p->y, *ax = &p->x;
    axis_build_q14(ay, sh, by, bh, dh, y0, oh, ry);
    axis_build_q14(ax, sw, bx, bw, dw, x0, ow, rx);
    int clo = ax->lo[0], chi = clo;
    for (int i = 0; i < ow; i++) {
        const int end = ax->lo[i] + ax->n[i];
        clo = ax->lo[i] < clo ? ax->lo[i] : clo;
        chi = end > chi ? end : chi;
    }
    const size_t cw = (size_t)(chi - clo);
    if (use_simd(p) && oh >= 32 && cw >= 32) {
        /* the horizontal pass as a vertical one over the transpose:
         * A = vertical pass (oh x cw), A' (cw x oh), B' = A' through the
         * x weights (ow x oh), dst = B'' */
        const size_t a = (size_t)oh * cw, bt = (size_t)ow * (size_t)oh;
        grow_tmp(p, 2 * a + bt, 0);
        uint8_t *A = p->tmp, *At = p->tmp + a, *Bt = p->tmp + 2 * a;
        for (int i = 0; i < oh; i++)
            rs_vrow14_avx2(A + (size_t)i * cw, src + (size_t)ay->lo[i] * src_stride + (size_t)clo,
                           src_stride, ay->pk + (size_t)i * (size_t)ay->groups * 2, ay->n[i], cw);
        img_transpose(At, (size_t)oh, A, cw, oh, (int)cw);
        for (int j = 0; j < ow; j++)
            rs_vrow14_avx2(Bt + (size_t)j * (size_t)oh, At + (size_t)(ax->lo[j] - clo) * (size_t)oh,
                           (size_t)oh, ax->pk + (size_t)j * (size_t)ax->groups * 2, ax->n[j],
                           (size_t)oh);
        img_transpose(dst, dst_stride, Bt, (size_t)oh, ow, oh);
        return;
    }
    grow_tmp(p, (size_t)oh * cw, 0);
    for (int i = 0; i < oh; i++)
        plane_vrow(p->tmp + (size_t)i * cw, src + (size_t)ay->lo[i] * src_stride + (size_t)clo,
                   src_stride, ay->pk + (size_t)i * (size_t)ay->groups * 2, ay->n[i], cw);
    for (int i = 0; i < oh; i++)
        plane_hrow(dst + (size_t)i * dst_stride, p->tmp + (size_t)i * cw, ax, clo);
}

void resize_plane(resize_plan *p, uint8_t *dst, size_t dst_stride, int dh, int dw,
                  const uint8_t *src, size_t src_stride, int sh, int sw, double by, double bx,
                  double bh, double bw, double ry, double rx)
{
    resize_plane_window(p, dst, dst_stride, dh, dw, 0, 0, dh, dw, src, src_stride, sh, sw, by, bx,
                        bh, bw, ry, rx);
}

static void axis_free(resize_axis *a)
{
    free(a->lo);
    free(a->n);
    free(a->coef);
    free(a->pk);
}

void resize_plan_free(resize_plan *p)
{
    if (!p)
        return;
    axis_free(&p->x);
    axis_free(&p->y);
    free(p->tmp);
    free(p->acc);
    memset(p, 0, sizeof *p);
}
