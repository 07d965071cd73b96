/* check.c — structural checks of PNG and BMP files that stb_image does
 * not make, run before it (or, for PNG, libpng) is given the bytes.
 *
 * PNG: the IHDR must come first with valid fields; every chunk must lie
 * inside the file and IEND must be there ("truncated PNG" otherwise); the
 * IDAT data must be able to inflate to the pixels the header claims
 * (deflate expands at most 1032:1) — stb_image allocates the whole image
 * before it finds out. A palette shorter than 256 entries is padded with
 * black in a copy, because stb_image reads pixel indices past the end of
 * the palette from uninitialised memory (PIL shows them black too;
 * libpng, which decodes PNG now, pads its own copy with black). The zlib
 * header is checked as stb_image checked it, so the reason reads as before.
 * BMP: our own header parse (stb_image's info reports top-down images with
 * a negative height); the file must hold the rows the header claims
 * (stb_image allocates the image first); and for palette images every
 * pixel index must be inside the palette, for the same
 * uninitialised-memory reason.
 * PNM: our own header parse, because stb_image's overflows its int on a
 * long run of digits.
 */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "image/internal.h"

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8),
    p[3] = (uint8_t)v;
}

/* ---------------------------------------------------------------- PNG */

typedef struct png_summary {
    uint32_t w, h;
    int depth, color_type;
    uint64_t idat;   /* compressed pixel bytes */
    size_t plte;     /* offset of the PLTE chunk, 0 if none */
    uint8_t zhdr[2]; /* the zlib header: the first two bytes of IDAT data */
    int zhdr_n;
    const char *trns_bad; /* the first tRNS stb_image refused, in its words */
} png_summary;

static int png_ihdr_check(const png_summary *s, const char *path, errbuf *e)
{
    static const unsigned depths[7] = {/* valid bit depths per colour type, as bit masks */
                                       1u << 1 | 1u << 2 | 1u << 4 | 1u << 8 | 1u << 16,
                                       0,
                                       1u << 8 | 1u << 16,
                                       1u << 1 | 1u << 2 | 1u << 4 | 1u << 8,
                                       1u << 8 | 1u << 16,
                                       0,
                                       1u << 8 | 1u << 16};
    if (s->w == 0 || s->h == 0 || s->w > 0x7fffffffu || s->h > 0x7fffffffu)
        return errf(e, "%s: corrupt PNG (size %ux%u)", path, s->h, s->w);
    if (s->color_type > 6 || s->depth > 16 || !(depths[s->color_type] >> s->depth & 1))
        return errf(e, "%s: corrupt PNG (bit depth %d with colour type %d)", path, s->depth,
                    s->color_type);
    return 0;
}

static int png_walk(const uint8_t *d, size_t n, png_summary *s, const char *path, errbuf *e)
{
    size_t i = 8;
    int ihdr = 0;
    memset(s, 0, sizeof *s);
    while (i + 12 <= n) {
        uint32_t len = be32(d + i);
        const uint8_t *type = d + i + 4;
        if (len > 0x7fffffffu || (uint64_t)len + 12 > n - i)
            return errf(e, "%s: truncated PNG (a chunk runs past the end of the file)", path);
        if (!ihdr) {
            if (memcmp(type, "IHDR", 4) != 0 || len < 13)
                return errf(e, "%s: corrupt PNG (does not start with an IHDR chunk)", path);
            s->w = be32(d + i + 8);
            s->h = be32(d + i + 12);
            s->depth = d[i + 16];
            s->color_type = d[i + 17];
            if (png_ihdr_check(s, path, e) != 0)
                return -1;
            ihdr = 1;
        } else if (memcmp(type, "IDAT", 4) == 0) {
            s->idat += len;
            for (uint32_t k = 0; k < len && s->zhdr_n < 2; k++)
                s->zhdr[s->zhdr_n++] = d[i + 8 + k];
        } else if (memcmp(type, "tRNS", 4) == 0 && !s->trns_bad) {
            /* stb_image refused these (libpng ignores them, and so would
             * we: tRNS only ever made alpha) */
            uint32_t k = s->color_type == 2 ? 3 : 1;
            s->trns_bad = s->idat                                             ? "tRNS after IDAT"
                          : s->color_type == 3 && !s->plte                    ? "tRNS before PLTE"
                          : s->color_type == 3 && len > be32(d + s->plte) / 3 ? "bad tRNS len"
                          : s->color_type == 4 || s->color_type == 6          ? "tRNS with alpha"
                          : s->color_type != 3 && len != 2 * k                ? "bad tRNS len"
                                                                              : NULL;
        } else if (memcmp(type, "PLTE", 4) == 0 && !s->plte) {
            s->plte = i;
        } else if (memcmp(type, "IEND", 4) == 0) {
            return 0;
        }
        i += 12 + (size_t)len;
    }
    return errf(e, "%s: truncated PNG (%s)", path, ihdr ? "no IEND chunk" : "no IHDR chunk");
}

int img_png_header(const uint8_t *d, size_t n, img_info *info, const char *path, errbuf *e)
{
    static const int comps[7] = {1, 0, 3, 1, 2, 0, 4};
    png_summary s;
    if (png_walk(d, n, &s, path, e) != 0)
        return -1;
    /* from the header, so that a bomb is called corrupt before its size is
     * weighed (and by --check) */
    uint64_t bits = (uint64_t)s.w * s.h * (uint64_t)(comps[s.color_type] * s.depth);
    if (bits / 8 > (s.idat + 64) * 1032)
        return errf(e, "%s: corrupt PNG (%llu bytes of image data cannot hold %ux%u pixels)", path,
                    (unsigned long long)s.idat, s.h, s.w);
    info->w = (int)s.w; /* <= 2^31 - 1, checked */
    info->h = (int)s.h;
    info->channels = s.color_type == 0 || s.color_type == 4 ? 1 : 3;
    /* stb_image holds the inflated rows (a filter byte each) and the image
     * at its own depth (palette images expanded to RGBA) at once */
    const uint64_t k = (uint64_t)comps[s.color_type], px = (uint64_t)s.w * s.h;
    info->bits = s.depth == 16 ? 16 : 8;
    info->decode_bytes = (uint64_t)s.h * (1 + ((uint64_t)s.w * k * (uint64_t)s.depth + 7) / 8) +
                         px * (s.color_type == 3 ? 4 : k) * (uint64_t)(info->bits / 8);
    return 0;
}

int img_png_prepare(img_ctx *c, const uint8_t **d, size_t *n, const char *path, errbuf *e)
{
    png_summary s;
    if (png_walk(*d, *n, &s, path, e) != 0)
        return -1;
    /* the zlib header as stb_image checked it, in its words (libpng's zlib
     * would say "incorrect header check" or "unknown compression method") */
    if (s.trns_bad)
        return errf(e, "%s: corrupt PNG (%s)", path, s.trns_bad);
    if (s.zhdr_n == 2) {
        const char *bad = (s.zhdr[0] * 256 + s.zhdr[1]) % 31 != 0 ? "bad zlib header"
                          : s.zhdr[1] & 32                        ? "no preset dict"
                          : (s.zhdr[0] & 15) != 8                 ? "bad compression"
                                                                  : NULL;
        if (bad)
            return errf(e, "%s: corrupt PNG (%s)", path, bad);
    }
    uint32_t plen = s.plte ? be32(*d + s.plte) : 0;
    if (s.color_type != 3 || !s.plte || plen >= 768 || plen % 3 != 0)
        return 0; /* stb_image refuses a missing or odd-sized palette itself */
    /* a copy with the palette padded to 256 entries of black; the CRC is
     * left stale (stb_image does not check CRCs) */
    size_t at = s.plte, data_end = at + 8 + plen, pad = 768 - plen;
    uint8_t *p = img_grow(&c->tmp, &c->tmp_cap, *n + pad);
    memcpy(p, *d, data_end);
    put_be32(p + at, 768);
    memset(p + data_end, 0, pad);
    memcpy(p + data_end + pad, *d + data_end, *n - data_end);
    *d = p;
    *n += pad;
    return 0;
}

/* ---------------------------------------------------------------- BMP */

typedef struct bmp_summary {
    uint32_t offset, hsz;
    int w, h, bpp, compression;
} bmp_summary;

static int bmp_parse(const uint8_t *d, size_t n, bmp_summary *b, const char *path, errbuf *e)
{
    if (n < 26)
        return errf(e, "%s: truncated BMP (header)", path);
    b->offset = le32(d + 10);
    b->hsz = le32(d + 14);
    if (b->hsz == 12) {
        b->w = d[18] | d[19] << 8;
        b->h = d[20] | d[21] << 8;
        b->bpp = d[24] | d[25] << 8;
        b->compression = 0;
        return 0;
    }
    if (b->hsz != 40 && b->hsz != 56 && b->hsz != 108 && b->hsz != 124)
        return errf(e, "%s: corrupt or unsupported BMP (header size %u)", path, b->hsz);
    if (n < 34)
        return errf(e, "%s: truncated BMP (header)", path);
    int32_t w = (int32_t)le32(d + 18), h = (int32_t)le32(d + 22);
    if (w <= 0 || h == 0 || h == INT32_MIN)
        return errf(e, "%s: corrupt BMP (size %dx%d)", path, h, w);
    b->w = w;
    b->h = h < 0 ? -h : h; /* negative: rows stored top-down */
    b->bpp = d[28] | d[29] << 8;
    b->compression = (int)le32(d + 30);
    return 0;
}

int img_bmp_header(const uint8_t *d, size_t n, img_info *info, const char *path, errbuf *e)
{
    bmp_summary b;
    if (bmp_parse(d, n, &b, path, e) != 0)
        return -1;
    info->w = b.w;
    info->h = b.h;
    info->channels = 3;
    info->decode_bytes = (uint64_t)b.w * (uint64_t)b.h * (b.bpp == 32 ? 4 : 3);
    return 0;
}

int img_bmp_prepare(const uint8_t *d, size_t n, const char *path, errbuf *e)
{
    bmp_summary b;
    if (bmp_parse(d, n, &b, path, e) != 0)
        return -1;
    /* stb_image allocates the whole image before reading a row: rows it
     * cannot read are refused first (it refuses RLE and the other
     * compressions itself, before allocating) */
    if (b.compression == 0 || b.compression == 3) {
        if (b.bpp != 1 && b.bpp != 4 && b.bpp != 8 && b.bpp != 16 && b.bpp != 24 && b.bpp != 32)
            return errf(e, "%s: corrupt or unsupported BMP (%d bits per pixel)", path, b.bpp);
        uint64_t stride = ((uint64_t)b.w * (uint64_t)b.bpp + 31) / 32 * 4;
        if ((uint64_t)b.offset + stride * (uint64_t)b.h > n)
            return errf(e, "%s: truncated BMP (the data ends before the image)", path);
    }
    if (b.bpp != 1 && b.bpp != 4 && b.bpp != 8)
        return 0;
    /* palette entries as stb_image counts them (from the pixel offset) */
    long long room = (long long)b.offset - 14 - (b.hsz == 12 ? 24 : b.hsz);
    long long psize = b.hsz == 12 ? room / 3 : room / 4;
    if (room < 0 || psize < 1 || psize > 256)
        return errf(e, "%s: corrupt BMP (no room for a palette before the pixels)", path);
    if (psize >= (1 << b.bpp))
        return 0; /* every index is inside */
    size_t row = b.bpp == 1   ? ((size_t)b.w + 7) / 8
                 : b.bpp == 4 ? ((size_t)b.w + 1) / 2
                              : (size_t)b.w;
    size_t stride = (row + 3) & ~(size_t)3, pos = b.offset;
    for (int y = 0; y < b.h && pos < n; y++, pos += stride)
        for (int x = 0; x < b.w; x++) {
            size_t at = pos + (size_t)x * (size_t)b.bpp / 8;
            if (at >= n)
                break; /* truncated: stb_image's reader notices */
            int shift = b.bpp == 8 ? 0 : 8 - b.bpp - (int)((size_t)x * (size_t)b.bpp % 8);
            int v = d[at] >> shift & ((1 << b.bpp) - 1);
            if (v >= psize)
                return errf(e, "%s: corrupt BMP (pixel index %d outside the %lld-colour palette)",
                            path, v, psize);
        }
    return 0;
}

/* ---------------------------------------------------------------- PNM */

static int pnm_space(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* Whitespace and # comments, as stb_image skips them; then a decimal
 * number of at most 9 digits. */
static long pnm_number(const uint8_t *d, size_t n, size_t *i)
{
    for (;;) {
        while (*i < n && pnm_space(d[*i]))
            (*i)++;
        if (*i >= n || d[*i] != '#')
            break;
        while (*i < n && d[*i] != '\n' && d[*i] != '\r')
            (*i)++;
    }
    long v = 0;
    int digits = 0;
    while (*i < n && d[*i] >= '0' && d[*i] <= '9') {
        if (++digits > 9)
            return -2;
        v = v * 10 + (d[(*i)++] - '0');
    }
    return digits ? v : -1;
}

int img_pnm_header(const uint8_t *d, size_t n, img_info *info, const char *path, errbuf *e)
{
    size_t i = 2;
    long w = pnm_number(d, n, &i), h = pnm_number(d, n, &i), maxval = pnm_number(d, n, &i);
    if (w == -2 || h == -2 || maxval == -2)
        return errf(e, "%s: corrupt PNM (a number in the header is too long)", path);
    if (w < 0 || h < 0 || maxval < 0)
        return errf(e, "%s: %s PNM (header)", path, i >= n ? "truncated" : "corrupt");
    if (w == 0 || h == 0 || maxval == 0 || maxval > 65535)
        return errf(e, "%s: corrupt PNM (size %ldx%ld, maximum value %ld)", path, h, w, maxval);
    info->w = (int)w;
    info->h = (int)h;
    info->channels = d[1] == '5' ? 1 : 3;
    /* 16-bit: the 16-bit image and its 8-bit copy */
    info->bits = maxval > 255 ? 16 : 8;
    info->decode_bytes =
        (uint64_t)w * (uint64_t)h * (uint64_t)info->channels * (maxval > 255 ? 3 : 1);
    return 0;
}
