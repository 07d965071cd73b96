/* img_stb.c — PNG, GIF, BMP, TGA, PSD and PNM through stb_image (libstb).
 *
 * stb_image loads 8 bits per channel (16-bit PNG/PSD/PNM keep their high
 * byte), expands palettes and returns the file's own channel count; we
 * convert to 1 or 3 channels ourselves so the luma weights match the JPEG
 * path, and drop alpha. GIF gives its first frame.
 *
 * stb_image reads past the end of its input as zeros, so a truncated BMP,
 * TGA, GIF, PSD or PNM would decode "successfully" with black rows; we
 * give it the bytes through callbacks instead and call the file truncated
 * when stb_image asks for more than there is.
 * PNG gets a structural check of our own first, because stb_image also
 * allocates the whole image before it finds out that the compressed data is
 * too short for it: the IHDR fields must be valid, the chunks must lie
 * inside the file and end with IEND ("truncated PNG" otherwise), and the
 * IDAT chunks must be able to inflate to the pixels the header claims
 * (deflate expands at most 1032:1) before stb_image decodes anything.
 * Deliberately not here: animation, colour management (gAMA, iCCP, sRGB are
 * ignored, as PIL ignores them), alpha compositing.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stb/stb_image.h>

#include "img_internal.h"

typedef struct png_summary {
    uint32_t w, h;
    int depth, color_type;
    uint64_t idat; /* compressed pixel bytes */
} png_summary;

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Valid bit depths per colour type, as bit masks of the depth. */
static int png_ihdr_check(const png_summary *s, const char *path, errbuf *e)
{
    static const unsigned depths[7] = {1u << 1 | 1u << 2 | 1u << 4 | 1u << 8 | 1u << 16, 0,
                                       1u << 8 | 1u << 16, 1u << 1 | 1u << 2 | 1u << 4 | 1u << 8,
                                       1u << 8 | 1u << 16, 0, 1u << 8 | 1u << 16};
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
        } else if (memcmp(type, "IEND", 4) == 0) {
            return 0;
        }
        i += 12 + (size_t)len;
    }
    return errf(e, "%s: truncated PNG (%s)", path, ihdr ? "no IEND chunk" : "no IHDR chunk");
}

/* The pixel bytes the header claims must fit what the IDAT data can
 * inflate to. */
static int png_plausible(const png_summary *s, const char *path, errbuf *e)
{
    static const int comps[7] = {1, 0, 3, 1, 2, 0, 4};
    int nc = comps[s->color_type]; /* checked by png_ihdr_check */
    uint64_t bits = (uint64_t)s->w * s->h * (uint64_t)(nc * s->depth);
    if (bits / 8 > (s->idat + 64) * 1032)
        return errf(e, "%s: corrupt PNG (%llu bytes of image data cannot hold %ux%u pixels)", path,
                    (unsigned long long)s->idat, s->w, s->h);
    return 0;
}

static const char *stb_reason(void)
{
    const char *r = stbi_failure_reason();
    return r ? r : "unknown reason";
}

int img_stb_header(img_ctx *c, const char *path, img_info *info, errbuf *e)
{
    info->cmyk = 0;
    if (info->format == IMG_FMT_PNG) { /* our own IHDR: exact sizes even
                                          where stb_image's info gives up */
        png_summary s;
        if (png_walk(c->file, c->file_len, &s, path, e) != 0)
            return -1;
        info->w = (int)s.w; /* <= 2^31 - 1, checked */
        info->h = (int)s.h;
        info->channels = s.color_type == 0 || s.color_type == 4 ? 1 : 3;
        return 0;
    }
    int w = 0, h = 0, n = 0;
    if (!stbi_info_from_memory(c->file, (int)c->file_len, &w, &h, &n))
        return errf(e, "%s: corrupt or unsupported %s (header not understood)", path,
                    img_format_name(info->format));
    info->w = w;
    info->h = h;
    info->channels = n <= 2 ? 1 : 3;
    return 0;
}

/* stb_image reading through callbacks, noting any request past the end.
 * stb_image asks for bytes in two ways: refills of its own 128-byte buffer
 * (always the same destination, the first request of a load; a short
 * refill is normal at the end of a file) and exact reads into an image or
 * chunk buffer (stbi__getn; the BMP, TGA and PNM loaders ignore a short
 * one, which would leave uninitialised pixels). Any short exact read, or a
 * refill that gets nothing, means the file ends before the image does. */
typedef struct reader {
    const uint8_t *d;
    size_t n, pos;
    const char *refill; /* stb_image's own buffer */
    int overrun;
} reader;

static int rd_read(void *user, char *data, int size)
{
    reader *r = user;
    if (!r->refill)
        r->refill = data;
    size_t k = r->n - r->pos < (size_t)size ? r->n - r->pos : (size_t)size;
    if (size > 0 && (k == 0 || (data != r->refill && k < (size_t)size)))
        r->overrun = 1;
    memcpy(data, r->d + r->pos, k);
    r->pos += k;
    return (int)k;
}

static void rd_skip(void *user, int n)
{
    reader *r = user;
    if (n < 0) {
        r->pos -= (size_t)-n < r->pos ? (size_t)-n : r->pos;
    } else if ((size_t)n > r->n - r->pos) {
        r->overrun = 1;
        r->pos = r->n;
    } else {
        r->pos += (size_t)n;
    }
}

static int rd_eof(void *user)
{
    reader *r = user;
    return r->pos >= r->n;
}

static void to_channels(uint8_t *dst, const uint8_t *src, size_t npix, int n, int C)
{
    if (n == C) {
        memcpy(dst, src, npix * (size_t)C);
        return;
    }
    for (size_t i = 0; i < npix; i++, src += n) {
        if (n <= 2) { /* gray, gray + alpha */
            if (C == 1)
                dst[i] = src[0];
            else
                dst[3 * i] = dst[3 * i + 1] = dst[3 * i + 2] = src[0];
        } else if (C == 1) { /* RGB(A) to gray */
            dst[i] = img_luma(src[0], src[1], src[2]);
        } else { /* RGBA to RGB */
            dst[3 * i] = src[0];
            dst[3 * i + 1] = src[1];
            dst[3 * i + 2] = src[2];
        }
    }
}

int img_stb_decode(img_ctx *c, const char *path, const img_info *info, int C, int *dh, int *dw,
                   errbuf *e)
{
    const char *name = img_format_name(info->format);
    if (info->format == IMG_FMT_PNG) {
        png_summary s;
        if (png_walk(c->file, c->file_len, &s, path, e) != 0 || png_plausible(&s, path, e) != 0)
            return -1;
    }
    int w = 0, h = 0, n = 0;
    reader rd = {.d = c->file, .n = c->file_len};
    const stbi_io_callbacks io = {rd_read, rd_skip, rd_eof};
    stbi_uc *px = stbi_load_from_callbacks(&io, &rd, &w, &h, &n, 0);
    if (rd.overrun) {
        stbi_image_free(px);
        return errf(e, "%s: truncated %s (the data ends before the image)", path, name);
    }
    if (!px)
        return errf(e, "%s: corrupt %s (%s)", path, name, stb_reason());
    if (w != info->w || h != info->h || n < 1 || n > 4) {
        stbi_image_free(px);
        return errf(e, "%s: corrupt %s (header says %dx%d, data %dx%d)", path, name, info->w,
                    info->h, w, h);
    }
    size_t npix = (size_t)w * (size_t)h;
    to_channels(img_grow(&c->dec, &c->dec_cap, npix * (size_t)C), px, npix, n, C);
    stbi_image_free(px);
    *dh = h;
    *dw = w;
    return 0;
}
