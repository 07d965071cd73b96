/* stb.c — GIF, BMP, TGA, PSD and PNM through stb_image (libstb), and the
 * PNG header (check.c's; png.c decodes PNG through libpng, which inflates
 * faster, to the bytes stb_image gave).
 *
 * stb_image loads 8 bits per channel (16-bit PSD/PNM keep their high
 * byte), expands palettes and returns the file's own channel count; we
 * convert to 1 or 3 channels ourselves so the luma weights match the JPEG
 * path, and drop alpha. GIF gives its first frame.
 *
 * stb_image reads past the end of its input as zeros, so a truncated BMP,
 * TGA, GIF, PSD or PNM would decode "successfully" with black rows; we
 * give it the bytes through callbacks instead and call the file truncated
 * when stb_image asks for more than there is. BMP gets structural checks
 * of our own first (check.c; PNG too, before libpng). The headers
 * estimate what stb_image will allocate (img_info.decode_bytes; for PNG,
 * what it did allocate, which is more than libpng needs), which image.c
 * holds to IMG_MAX_DECODE_BYTES; memory that runs out anyway is reported as such
 * (IMG_ENOMEM), never as a corrupt file.
 * Deliberately not here: animation, colour management (gAMA, iCCP, sRGB are
 * ignored, as PIL ignores them), alpha compositing.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stb/stb_image.h>

#include "image/internal.h"

/* stb_image's reason, printable: for an unknown chunk it copies the raw
 * chunk type bytes into its message. */
static const char *stb_reason(char *buf, size_t len)
{
    const char *r = stbi_failure_reason();
    snprintf(buf, len, "%s", r ? r : "unknown reason");
    img_printable(buf);
    return buf;
}

/* stb_image ran out of memory: its reason says so, or (where it forgets
 * to set one, as when the inflated PNG rows cannot be allocated) malloc's
 * errno does, which the caller checks. */
static int stb_out_of_memory(void)
{
    const char *r = stbi_failure_reason();
    return r && strcmp(r, "outofmem") == 0;
}

int img_stb_header(img_ctx *c, const char *path, img_info *info, errbuf *e)
{
    info->cmyk = 0;
    if (info->format == IMG_FMT_PNG) /* exact sizes even where stb_image gives up */
        return img_png_header(c->file, c->file_len, info, path, e);
    if (info->format == IMG_FMT_BMP) /* stb_image's info: negative top-down heights */
        return img_bmp_header(c->file, c->file_len, info, path, e);
    if (info->format == IMG_FMT_PNM) /* stb_image's info: int overflow on long numbers */
        return img_pnm_header(c->file, c->file_len, info, path, e);
    int w = 0, h = 0, n = 0;
    if (!stbi_info_from_memory(c->file, (int)c->file_len, &w, &h, &n))
        return errf(e, "%s: corrupt or unsupported %s (header not understood)", path,
                    img_format_name(info->format));
    info->w = w;
    info->h = h;
    info->channels = n <= 2 ? 1 : 3;
    /* what stb_image allocates: a GIF's three canvases of the logical
     * screen (RGBA, background, history: 9 bytes a pixel) whatever the
     * frame's size; a PSD as RGBA (16-bit: and its 8-bit copy) */
    const uint64_t px = (uint64_t)w * (uint64_t)h;
    info->bits = 8;
    if (info->format == IMG_FMT_GIF) {
        info->decode_bytes = 9 * px;
    } else if (info->format == IMG_FMT_PSD) {
        info->bits = stbi_is_16_bit_from_memory(c->file, (int)c->file_len) ? 16 : 8;
        info->decode_bytes = px * (info->bits == 16 ? 12 : 4);
    } else {
        info->decode_bytes = px * (uint64_t)(n < 1 ? 4 : n);
    }
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
    const uint8_t *data = c->file;
    size_t len = c->file_len;
    if (info->format == IMG_FMT_BMP && img_bmp_prepare(data, len, path, e) != 0)
        return -1;
    int w = 0, h = 0, n = 0;
    reader rd = {.d = data, .n = len};
    const stbi_io_callbacks io = {rd_read, rd_skip, rd_eof};
    errno = 0;
    stbi_uc *px = stbi_load_from_callbacks(&io, &rd, &w, &h, &n, 0);
    int nomem = !px && (errno == ENOMEM || stb_out_of_memory());
    char why[64];
    if (rd.overrun) {
        stbi_image_free(px);
        return errf(e, "%s: truncated %s (the data ends before the image)", path, name);
    }
    if (nomem) {
        char need[32];
        fmt_bytes(need, sizeof need, info->decode_bytes);
        errf(e, "%s: out of memory decoding this %dx%d %s (it needs about %s)", path, info->h,
             info->w, name, need);
        return IMG_ENOMEM;
    }
    if (!px)
        return errf(e, "%s: corrupt %s (%s)", path, name, stb_reason(why, sizeof why));
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
