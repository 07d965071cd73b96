/* simd_x86.c — the image pipeline's AVX2 kernels, chosen at run time
 * (resize.c and augment.c ask img_avx2 once per call); see simd.h.
 *
 * The resampler's passes give the portable loops' bytes exactly. Those sum u8 * Q22
 * weight products in 32 bits; here each weight w is split as
 * w = (w >> 15) * 2^15 + (w & 0x7fff), both halves fit int16, and pmaddwd
 * sums pairs of u8 * int16 products exactly. The two partial sums,
 * recombined as (hi << 15) + lo, are the same integer as the scalar sum
 * (every term is non-negative and the total stays below 2^31 as there), so
 * the rounding and clipping after it see the same value.
 *
 *   horizontal (3 channels): two rows at once, one per 128-bit lane; per
 *     output pixel, pairs of taps: 8 bytes of each row shuffled to
 *     (R0 R1 G0 G1 B0 B1 0 0) as int16, times the pair's weights
 *     (w0 w1 w0 w1 w0 w1 0 0) from resize_axis.pk -> (R G B 0) partial sums;
 *   vertical (any channels: it is bytes): 32 output bytes at a time with
 *     their accumulators in registers across all taps, two source rows
 *     interleaved byte by byte per pmaddwd.
 *
 * HWC -> CHW: 16 pixels (48 bytes, three loads) at a time; each plane's 16
 * bytes gathered from the three by pshufb and or-ed; a flip is the same
 * shuffles with the byte order reversed.
 *
 * Compiled for any x86-64 (the functions carry target("avx2"), the rest of
 * the program stays baseline); other machines get stubs resize.c never
 * calls.
 */
#define _POSIX_C_SOURCE 200809L
#include "image/simd.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

int img_avx2(void) { return __builtin_cpu_supports("avx2"); }

#define RS_AVX2 __attribute__((target("avx2")))

/* (hi << 15) + lo + half, >> RS_PRECISION: the 32-bit sums as the scalar
 * loop ends them (clipping comes from the saturating packs) */
RS_AVX2 static inline __m256i finish(__m256i hi, __m256i lo)
{
    const __m256i half = _mm256_set1_epi32(1 << (RS_PRECISION - 1));
    __m256i v = _mm256_add_epi32(_mm256_slli_epi32(hi, RS_SPLIT), lo);
    return _mm256_srai_epi32(_mm256_add_epi32(v, half), RS_PRECISION);
}

/* 8 bytes of a row from byte `pos` on, zeros past `avail` */
RS_AVX2 static inline __m128i load8(const uint8_t *row, size_t pos, size_t avail)
{
    if (pos + 8 <= avail)
        return _mm_loadl_epi64((const __m128i *)(const void *)(row + pos));
    uint8_t b[8] = {0};
    memcpy(b, row + pos, avail - pos);
    return _mm_loadl_epi64((const __m128i *)(const void *)b);
}

/* Output pixel i of both rows: lane k holds (R G B 0) of row k, final
 * values in 32 bits. `checked`: the loads may reach past `avail`. */
RS_AVX2 static inline __m256i hpixel(const uint8_t *in0, const uint8_t *in1, size_t avail,
                                     const resize_axis *ax, int off, int i, int checked)
{
    /* bytes R0 G0 B0 R1 G1 B1 -> int16 R0 R1 G0 G1 B0 B1 0 0, in each lane */
    const __m256i spread =
        _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1, 0, -1, 3, -1, 1,
                         -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
    const int16_t *w = ax->pk + (size_t)i * (size_t)ax->groups * 16;
    const int ng = (ax->n[i] + 1) / 2;
    size_t pos = (size_t)(ax->lo[i] - off) * 3;
    __m256i hi = _mm256_setzero_si256(), lo = _mm256_setzero_si256();
    for (int g = 0; g < ng; g++, pos += 6, w += 16) {
        __m128i a, b;
        if (checked) {
            a = load8(in0, pos, avail), b = load8(in1, pos, avail);
        } else {
            a = _mm_loadl_epi64((const void *)(in0 + pos));
            b = _mm_loadl_epi64((const void *)(in1 + pos));
        }
        __m256i x = _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
        x = _mm256_shuffle_epi8(x, spread);
        const __m256i wh = _mm256_broadcastsi128_si256(_mm_loadu_si128((const void *)w));
        const __m256i wl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const void *)(w + 8)));
        hi = _mm256_add_epi32(hi, _mm256_madd_epi16(x, wh));
        lo = _mm256_add_epi32(lo, _mm256_madd_epi16(x, wl));
    }
    return finish(hi, lo);
}

/* Whether output i's 8-byte loads all stay inside `avail`. */
static inline int hpixel_inside(const resize_axis *ax, int off, int i, size_t avail)
{
    const int ng = (ax->n[i] + 1) / 2;
    return (size_t)(ax->lo[i] - off) * 3 + (size_t)(ng - 1) * 6 + 8 <= avail;
}

RS_AVX2 void rs_hrows3_avx2(uint8_t *out0, uint8_t *out1, const uint8_t *in0, const uint8_t *in1,
                            size_t avail, const resize_axis *ax, int off)
{
    /* (R G B 0) x 4 -> R G B x 4, in each lane */
    const __m256i compact =
        _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, 0, 1, 2, 4, 5, 6,
                         8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    const int count = ax->count;
    int i = 0;
    /* four outputs at a time while their loads stay inside the rows */
    for (; i + 4 <= count && hpixel_inside(ax, off, i + 3, avail); i += 4) {
        const __m256i v0 = hpixel(in0, in1, avail, ax, off, i, 0);
        const __m256i v1 = hpixel(in0, in1, avail, ax, off, i + 1, 0);
        const __m256i v2 = hpixel(in0, in1, avail, ax, off, i + 2, 0);
        const __m256i v3 = hpixel(in0, in1, avail, ax, off, i + 3, 0);
        __m256i v = _mm256_packus_epi16(_mm256_packs_epi32(v0, v1), _mm256_packs_epi32(v2, v3));
        v = _mm256_shuffle_epi8(v, compact);
        const __m128i a = _mm256_castsi256_si128(v), b = _mm256_extracti128_si256(v, 1);
        _mm_storel_epi64((void *)(out0 + (size_t)i * 3), a);
        _mm_storel_epi64((void *)(out1 + (size_t)i * 3), b);
        const uint32_t a8 = (uint32_t)_mm_extract_epi32(a, 2),
                       b8 = (uint32_t)_mm_extract_epi32(b, 2);
        memcpy(out0 + (size_t)i * 3 + 8, &a8, 4);
        memcpy(out1 + (size_t)i * 3 + 8, &b8, 4);
    }
    for (; i < count; i++) {
        __m256i v = hpixel(in0, in1, avail, ax, off, i, 1);
        v = _mm256_packus_epi16(_mm256_packs_epi32(v, v), v); /* lane k: R G B 0 in bytes 0-3 */
        uint32_t a = (uint32_t)_mm_cvtsi128_si32(_mm256_castsi256_si128(v));
        uint32_t b = (uint32_t)_mm_cvtsi128_si32(_mm256_extracti128_si256(v, 1));
        memcpy(out0 + (size_t)i * 3, &a, 3);
        memcpy(out1 + (size_t)i * 3, &b, 3);
    }
}

/* A pair of int16 weights (t, t + 1) broadcast, as pmaddwd pairs them */
RS_AVX2 static inline __m256i pair(const int16_t *w)
{
    uint32_t v;
    memcpy(&v, w, sizeof v);
    return _mm256_set1_epi32((int)v);
}

/* 32 output bytes from n source rows `stride` apart at `rows` */
RS_AVX2 static inline __m256i vstrip(const uint8_t *rows, size_t stride, const int16_t *w, int n)
{
    const __m256i zero = _mm256_setzero_si256();
    __m256i h0 = zero, h1 = zero, h2 = zero, h3 = zero, l0 = zero, l1 = zero, l2 = zero, l3 = zero;
    for (int j = 0; j < n; j += 2, w += 4) {
        const __m256i a = _mm256_loadu_si256((const void *)(rows + (size_t)j * stride));
        const __m256i b =
            j + 1 < n ? _mm256_loadu_si256((const void *)(rows + (size_t)(j + 1) * stride)) : zero;
        const __m256i wh = pair(w), wl = pair(w + 2);
        const __m256i ab0 = _mm256_unpacklo_epi8(a, b), ab1 = _mm256_unpackhi_epi8(a, b);
        /* (a, b) int16 pairs of bytes 0-3|16-19, 4-7|20-23, 8-11|24-27, 12-15|28-31 */
        const __m256i p0 = _mm256_unpacklo_epi8(ab0, zero), p1 = _mm256_unpackhi_epi8(ab0, zero);
        const __m256i p2 = _mm256_unpacklo_epi8(ab1, zero), p3 = _mm256_unpackhi_epi8(ab1, zero);
        h0 = _mm256_add_epi32(h0, _mm256_madd_epi16(p0, wh));
        l0 = _mm256_add_epi32(l0, _mm256_madd_epi16(p0, wl));
        h1 = _mm256_add_epi32(h1, _mm256_madd_epi16(p1, wh));
        l1 = _mm256_add_epi32(l1, _mm256_madd_epi16(p1, wl));
        h2 = _mm256_add_epi32(h2, _mm256_madd_epi16(p2, wh));
        l2 = _mm256_add_epi32(l2, _mm256_madd_epi16(p2, wl));
        h3 = _mm256_add_epi32(h3, _mm256_madd_epi16(p3, wh));
        l3 = _mm256_add_epi32(l3, _mm256_madd_epi16(p3, wl));
    }
    /* the packs work within lanes, which puts the bytes back in order */
    const __m256i s01 = _mm256_packs_epi32(finish(h0, l0), finish(h1, l1));
    const __m256i s23 = _mm256_packs_epi32(finish(h2, l2), finish(h3, l3));
    return _mm256_packus_epi16(s01, s23);
}

RS_AVX2 void rs_vrow_avx2(uint8_t *out, const uint8_t *rows, size_t stride, const int16_t *w, int n,
                          size_t rowb)
{
    size_t x = 0;
    for (; x + 32 <= rowb; x += 32)
        _mm256_storeu_si256((void *)(out + x), vstrip(rows + x, stride, w, n));
    if (x < rowb) /* the last 32 bytes again, overlapping: same values */
        _mm256_storeu_si256((void *)(out + rowb - 32), vstrip(rows + rowb - 32, stride, w, n));
}

/* 32 output bytes of the Q14 vertical pass: one int16 pair of weights
 * per two rows, sums below 2^23, exact in 32 bits */
RS_AVX2 static inline __m256i vstrip14(const uint8_t *rows, size_t stride, const int16_t *w, int n)
{
    const __m256i zero = _mm256_setzero_si256();
    __m256i s0 = _mm256_set1_epi32(1 << 13), s1 = s0, s2 = s0, s3 = s0;
    for (int j = 0; j < n; j += 2, w += 2) {
        const __m256i a = _mm256_loadu_si256((const void *)(rows + (size_t)j * stride));
        __m256i b = zero; /* an odd last row pairs with zeros */
        if (j + 1 < n)
            b = _mm256_loadu_si256((const void *)(rows + (size_t)(j + 1) * stride));
        const __m256i wp = pair(w);
        const __m256i ab0 = _mm256_unpacklo_epi8(a, b), ab1 = _mm256_unpackhi_epi8(a, b);
        s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_unpacklo_epi8(ab0, zero), wp));
        s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_unpackhi_epi8(ab0, zero), wp));
        s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(_mm256_unpacklo_epi8(ab1, zero), wp));
        s3 = _mm256_add_epi32(s3, _mm256_madd_epi16(_mm256_unpackhi_epi8(ab1, zero), wp));
    }
    const __m256i s01 = _mm256_packs_epi32(_mm256_srai_epi32(s0, 14), _mm256_srai_epi32(s1, 14));
    const __m256i s23 = _mm256_packs_epi32(_mm256_srai_epi32(s2, 14), _mm256_srai_epi32(s3, 14));
    return _mm256_packus_epi16(s01, s23);
}

RS_AVX2 void rs_vrow14_avx2(uint8_t *out, const uint8_t *rows, size_t stride, const int16_t *w,
                            int n, size_t rowb)
{
    size_t x = 0;
    for (; x + 32 <= rowb; x += 32)
        _mm256_storeu_si256((void *)(out + x), vstrip14(rows + x, stride, w, n));
    if (x < rowb) /* the tail: the last 32 bytes, overlapping */
        _mm256_storeu_si256((void *)(out + rowb - 32), vstrip14(rows + rowb - 32, stride, w, n));
}

/* pshufb masks: out byte o of plane p from chunk q (bytes 16q..16q+15 of
 * the 48) is source byte 3o + p - 16q where that lies in the chunk, else
 * zero (-1); flipped, out byte o takes pixel 15 - o */
RS_AVX2 static inline __m128i chw_mask(int p, int q, int flip)
{
    const __m128i three_o =
        flip ? _mm_setr_epi8(45, 42, 39, 36, 33, 30, 27, 24, 21, 18, 15, 12, 9, 6, 3, 0)
             : _mm_setr_epi8(0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 42, 45);
    const __m128i i = _mm_add_epi8(three_o, _mm_set1_epi8((char)(p - 16 * q)));
    const __m128i out =
        _mm_or_si128(_mm_cmplt_epi8(i, _mm_setzero_si128()), _mm_cmpgt_epi8(i, _mm_set1_epi8(15)));
    return _mm_or_si128(i, out);
}

RS_AVX2 void img_chw3_row_avx2(uint8_t *r, uint8_t *g, uint8_t *b, const uint8_t *s, int n,
                               int flip)
{
    if (n < 16) {
        for (int x = 0; x < n; x++) {
            const int d = flip ? n - 1 - x : x;
            r[d] = s[3 * x], g[d] = s[3 * x + 1], b[d] = s[3 * x + 2];
        }
        return;
    }
    __m128i m[3][3];
    for (int p = 0; p < 3; p++)
        for (int q = 0; q < 3; q++)
            m[p][q] = chw_mask(p, q, flip);
    uint8_t *const plane[3] = {r, g, b};
    for (int x = 0;; x += 16) {
        if (x > n - 16) /* the last 16 pixels again, overlapping: same bytes */
            x = n - 16;
        const __m128i c0 = _mm_loadu_si128((const void *)(s + 3 * (size_t)x));
        const __m128i c1 = _mm_loadu_si128((const void *)(s + 3 * (size_t)x + 16));
        const __m128i c2 = _mm_loadu_si128((const void *)(s + 3 * (size_t)x + 32));
        const size_t d = (size_t)(flip ? n - 16 - x : x);
        for (int p = 0; p < 3; p++) {
            const __m128i v = _mm_or_si128(
                _mm_or_si128(_mm_shuffle_epi8(c0, m[p][0]), _mm_shuffle_epi8(c1, m[p][1])),
                _mm_shuffle_epi8(c2, m[p][2]));
            _mm_storeu_si128((void *)(plane[p] + d), v);
        }
        if (x == n - 16)
            return;
    }
}

/* One round of the transpose: a[2i], a[2i + 1] interleaved into b[i]
 * (low halves) and b[i + 8] (high halves), per 128-bit lane, by elements
 * of 8, 16, 32 or 64 bits */
#define TR_ROUND(name, lo, hi)                                                                     \
    RS_AVX2 static inline void name(__m256i *b, const __m256i *a)                                  \
    {                                                                                              \
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)                                        \
        {                                                                                          \
            b[i] = lo(a[2 * i], a[2 * i + 1]);                                                     \
            b[i + 8] = hi(a[2 * i], a[2 * i + 1]);                                                 \
        }                                                                                          \
    }
TR_ROUND(tr8, _mm256_unpacklo_epi8, _mm256_unpackhi_epi8)
TR_ROUND(tr16, _mm256_unpacklo_epi16, _mm256_unpackhi_epi16)
TR_ROUND(tr32, _mm256_unpacklo_epi32, _mm256_unpackhi_epi32)
TR_ROUND(tr64, _mm256_unpacklo_epi64, _mm256_unpackhi_epi64)

/* 16 rows x 32 columns of src to 32 rows x 16 columns of dst: each lane
 * transposes a 16 x 16 block by four rounds of interleaving, which leave
 * column col[k] in register k. (Unrolled so that the arrays live in
 * registers: simd_x86.c is built at -O2.) */
RS_AVX2 static void transpose16x32(uint8_t *dst, size_t ds, const uint8_t *src, size_t ss)
{
    static const int col[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};
    __m256i a[16], b[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        a[i] = _mm256_loadu_si256((const void *)(src + (size_t)i * ss));
    tr8(b, a);
    tr16(a, b);
    tr32(b, a);
    tr64(a, b);
#pragma GCC unroll 16
    for (int k = 0; k < 16; k++) {
        _mm_storeu_si128((void *)(dst + (size_t)col[k] * ds), _mm256_castsi256_si128(a[k]));
        _mm_storeu_si128((void *)(dst + (size_t)(col[k] + 16) * ds),
                         _mm256_extracti128_si256(a[k], 1));
    }
}

void img_transpose(uint8_t *dst, size_t dst_stride, const uint8_t *src, size_t src_stride, int rows,
                   int cols)
{
    const int vec = img_avx2();
    int r = 0;
    for (; vec && r + 16 <= rows; r += 16) {
        int c = 0;
        for (; c + 32 <= cols; c += 32)
            transpose16x32(dst + (size_t)c * dst_stride + (size_t)r, dst_stride,
                           src + (size_t)r * src_stride + (size_t)c, src_stride);
        if (c < cols && cols >= 32) { /* the last 32 columns again, overlapping */
            c = cols - 32;
            transpose16x32(dst + (size_t)c * dst_stride + (size_t)r, dst_stride,
                           src + (size_t)r * src_stride + (size_t)c, src_stride);
            c = cols;
        }
        for (; c < cols; c++)
            for (int i = r; i < r + 16; i++)
                dst[(size_t)c * dst_stride + (size_t)i] = src[(size_t)i * src_stride + (size_t)c];
    }
    for (; r < rows; r++)
        for (int c = 0; c < cols; c++)
            dst[(size_t)c * dst_stride + (size_t)r] = src[(size_t)r * src_stride + (size_t)c];
}

/* (a * k + 32768) >> 16 per int16 lane, exactly: the 32-bit product is
 * (mulhi << 16) + mullo (unsigned), and adding half carries into the high
 * half when mullo's top bit is set */
RS_AVX2 static inline __m256i mul_round16(__m256i a, short k)
{
    const __m256i kk = _mm256_set1_epi16(k);
    return _mm256_sub_epi16(_mm256_mulhi_epi16(a, kk),
                            _mm256_srai_epi16(_mm256_mullo_epi16(a, kk), 15));
}

/* R, G, B of 16 pixels (int16, one register each) from Y, U = Cb - 128,
 * V = Cr - 128:
 *   R = Y + (91881 V + h) >> 16 = Y + V + (26345 V + h) >> 16,
 *   B = Y + (116130 U + h) >> 16 = Y + 2U + (-14942 U + h) >> 16,
 *   G = Y + (-22554 U - 46802 V + h) >> 16
 *     = Y - V + (-22554 U + 18734 V + h) >> 16, h = 32768:
 * image.c's loop, term by term */
RS_AVX2 static inline void ycc16(__m256i l, __m256i u, __m256i v, __m256i *R, __m256i *G,
                                 __m256i *B)
{
    const __m256i half = _mm256_set1_epi32(32768);
    const __m256i kg = _mm256_set1_epi32((int)((uint32_t)18734 << 16 | (uint16_t)-22554));
    *R = _mm256_add_epi16(_mm256_add_epi16(l, v), mul_round16(v, 26345));
    *B = _mm256_add_epi16(_mm256_add_epi16(l, _mm256_add_epi16(u, u)), mul_round16(u, -14942));
    const __m256i g0 = _mm256_srai_epi32(
        _mm256_add_epi32(_mm256_madd_epi16(_mm256_unpacklo_epi16(u, v), kg), half), 16);
    const __m256i g1 = _mm256_srai_epi32(
        _mm256_add_epi32(_mm256_madd_epi16(_mm256_unpackhi_epi16(u, v), kg), half), 16);
    *G = _mm256_add_epi16(_mm256_sub_epi16(l, v), _mm256_packs_epi32(g0, g1));
}

RS_AVX2 void img_ycc_row_avx2(uint8_t *r, uint8_t *g, uint8_t *b, const uint8_t *y,
                              const uint8_t *cb, const uint8_t *cr, int n, int flip)
{
    /* n >= 32: 32 pixels a step, bytes widened within lanes (pixels 0-7
     * and 16-23 in one register, 8-15 and 24-31 in the other), which the
     * packs put back in order */
    const __m256i zero = _mm256_setzero_si256(), c128 = _mm256_set1_epi16(128);
    const __m256i rev = _mm256_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 15,
                                         14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    for (int x = 0;; x += 32) {
        if (x > n - 32) /* the last 32 pixels again, overlapping: same bytes */
            x = n - 32;
        const __m256i Y = _mm256_loadu_si256((const void *)(y + x));
        const __m256i U = _mm256_loadu_si256((const void *)(cb + x));
        const __m256i V = _mm256_loadu_si256((const void *)(cr + x));
        __m256i R0, G0, B0, R1, G1, B1;
        ycc16(_mm256_unpacklo_epi8(Y, zero), _mm256_sub_epi16(_mm256_unpacklo_epi8(U, zero), c128),
              _mm256_sub_epi16(_mm256_unpacklo_epi8(V, zero), c128), &R0, &G0, &B0);
        ycc16(_mm256_unpackhi_epi8(Y, zero), _mm256_sub_epi16(_mm256_unpackhi_epi8(U, zero), c128),
              _mm256_sub_epi16(_mm256_unpackhi_epi8(V, zero), c128), &R1, &G1, &B1);
        __m256i o[3] = {_mm256_packus_epi16(R0, R1), _mm256_packus_epi16(G0, G1),
                        _mm256_packus_epi16(B0, B1)};
        if (flip)
            for (int p = 0; p < 3; p++)
                o[p] = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(o[p], rev), 0x4e);
        const size_t d = (size_t)(flip ? n - 32 - x : x);
        _mm256_storeu_si256((void *)(r + d), o[0]);
        _mm256_storeu_si256((void *)(g + d), o[1]);
        _mm256_storeu_si256((void *)(b + d), o[2]);
        if (x == n - 32)
            return;
    }
}

#else

int img_avx2(void) { return 0; }
void img_transpose(uint8_t *dst, size_t dst_stride, const uint8_t *src, size_t src_stride, int rows,
                   int cols)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            dst[(size_t)c * dst_stride + (size_t)r] = src[(size_t)r * src_stride + (size_t)c];
}
void rs_hrows3_avx2(uint8_t *out0, uint8_t *out1, const uint8_t *in0, const uint8_t *in1,
                    size_t avail, const resize_axis *ax, int off)
{
    (void)out0, (void)out1, (void)in0, (void)in1, (void)avail, (void)ax, (void)off;
}
void rs_vrow_avx2(uint8_t *out, const uint8_t *rows, size_t stride, const int16_t *w, int n,
                  size_t rowb)
{
    (void)out, (void)rows, (void)stride, (void)w, (void)n, (void)rowb;
}
void rs_vrow14_avx2(uint8_t *out, const uint8_t *rows, size_t stride, const int16_t *w, int n,
                    size_t rowb)
{
    (void)out, (void)rows, (void)stride, (void)w, (void)n, (void)rowb;
}
void img_chw3_row_avx2(uint8_t *r, uint8_t *g, uint8_t *b, const uint8_t *s, int n, int flip)
{
    (void)r, (void)g, (void)b, (void)s, (void)n, (void)flip;
}
void img_ycc_row_avx2(uint8_t *r, uint8_t *g, uint8_t *b, const uint8_t *y, const uint8_t *cb,
                      const uint8_t *cr, int n, int flip)
{
    (void)r, (void)g, (void)b, (void)y, (void)cb, (void)cr, (void)n, (void)flip;
}

#endif
