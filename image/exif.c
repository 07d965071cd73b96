/* exif.c — the EXIF orientation of a JPEG (--exif), and turning decoded
 * pixels upright.
 *
 * The tag is read from the first APP1 "Exif" segment before the first scan:
 * a TIFF header (II or MM byte order), IFD0, tag 0x0112 (Orientation, a
 * SHORT). Anything missing, truncated or out of range reads as 1 (as
 * stored): a damaged EXIF block never fails a load. Orientations follow
 * the EXIF 2.3 table and PIL's ImageOps.exif_transpose:
 *   1 as stored        2 mirrored left-right   3 rotated 180
 *   4 mirrored top-bottom                      5 transposed (main diagonal)
 *   6 rotated 90 clockwise                     7 transversed (anti-diagonal)
 *   8 rotated 90 counter-clockwise
 * 5 to 8 swap height and width.
 */
#include <string.h>

#include "image/internal.h"

static unsigned rd16(const uint8_t *p, int big)
{
    return big ? (unsigned)p[0] << 8 | p[1] : (unsigned)p[1] << 8 | p[0];
}

static uint32_t rd32(const uint8_t *p, int big)
{
    return big ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
               : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* The orientation in one TIFF block t[0..n) */
static int tiff_orientation(const uint8_t *t, size_t n)
{
    if (n < 8)
        return 1;
    int big;
    if (t[0] == 'I' && t[1] == 'I')
        big = 0;
    else if (t[0] == 'M' && t[1] == 'M')
        big = 1;
    else
        return 1;
    if (rd16(t + 2, big) != 42)
        return 1;
    uint32_t ifd = rd32(t + 4, big);
    if (ifd > n || n - ifd < 2)
        return 1;
    unsigned count = rd16(t + ifd, big);
    for (unsigned i = 0; i < count; i++) {
        size_t at = ifd + 2 + (size_t)i * 12;
        if (at + 12 > n)
            return 1;
        if (rd16(t + at, big) != 0x0112)
            continue;
        if (rd16(t + at + 2, big) != 3 || rd32(t + at + 4, big) < 1) /* one SHORT */
            return 1;
        unsigned v = rd16(t + at + 8, big);
        return v >= 1 && v <= 8 ? (int)v : 1;
    }
    return 1;
}

int img_exif_orientation(const uint8_t *d, size_t n)
{
    if (n < 4 || d[0] != 0xFF || d[1] != 0xD8)
        return 1;
    size_t at = 2;
    while (at + 4 <= n) {
        if (d[at] != 0xFF)
            return 1;
        uint8_t m = d[at + 1];
        if (m == 0xFF) { /* fill byte */
            at++;
            continue;
        }
        if (m == 0xDA || m == 0xD9) /* start of scan, end of image: no EXIF before */
            return 1;
        size_t len = (size_t)d[at + 2] << 8 | d[at + 3];
        if (len < 2 || at + 2 + len > n)
            return 1;
        const uint8_t *seg = d + at + 4;
        size_t seg_len = len - 2;
        if (m == 0xE1 && seg_len >= 6 && memcmp(seg, "Exif\0\0", 6) == 0)
            return tiff_orientation(seg + 6, seg_len - 6);
        at += 2 + len;
    }
    return 1;
}

void img_orient(uint8_t *restrict dst, const uint8_t *restrict src, int h, int w, int C, int orient)
{
    const int swap = orient >= 5;
    const int oh = swap ? w : h, ow = swap ? h : w;
    for (int y = 0; y < oh; y++) {
        uint8_t *row = dst + (size_t)y * ow * C;
        for (int x = 0; x < ow; x++) {
            int sy, sx;
            switch (orient) {
            case 2: sy = y, sx = w - 1 - x; break;
            case 3: sy = h - 1 - y, sx = w - 1 - x; break;
            case 4: sy = h - 1 - y, sx = x; break;
            case 5: sy = x, sx = y; break;
            case 6: sy = h - 1 - x, sx = y; break;
            case 7: sy = h - 1 - x, sx = w - 1 - y; break;
            case 8: sy = x, sx = w - 1 - y; break;
            default: sy = y, sx = x; break;
            }
            memcpy(row + (size_t)x * C, src + ((size_t)sy * w + sx) * C, (size_t)C);
        }
    }
}
