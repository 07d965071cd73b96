/* webp.c — WebP through libwebp (Debian's libwebp-dev): lossy and
 * lossless, with or without alpha (dropped, not composited, as PIL's
 * convert("RGB")); grey output is the ITU-R 601 luma of the RGB pixels.
 * Deliberately not supported: animated WebP (refused by name). The header
 * is read before any pixel memory is allocated, so the size limits apply
 * as for every other format. */
#define _POSIX_C_SOURCE 200809L
#include <webp/decode.h>

#include "image/internal.h"

int img_webp_header(img_ctx *c, const char *path, img_info *info, errbuf *e)
{
    WebPBitstreamFeatures f;
    VP8StatusCode st = WebPGetFeatures(c->file, c->file_len, &f);
    if (st == VP8_STATUS_NOT_ENOUGH_DATA)
        return errf(e, "%s: truncated WebP (the data ends before the header)", path);
    if (st != VP8_STATUS_OK)
        return errf(e, "%s: corrupt WebP (bad header, status %d)", path, (int)st);
    if (f.has_animation)
        return errf(e, "%s: unsupported image format: animated WebP", path);
    info->format = IMG_FMT_WEBP;
    info->w = f.width;
    info->h = f.height;
    info->channels = 3;
    return 0;
}

int img_webp_decode(img_ctx *c, const char *path, const img_info *info, int C, int *dh, int *dw,
                    errbuf *e)
{
    size_t npix = (size_t)info->w * (size_t)info->h;
    uint8_t *rgb = C == 3 ? img_grow(&c->dec, &c->dec_cap, npix * 3)
                          : img_grow(&c->tmp, &c->tmp_cap, npix * 3);
    if (!WebPDecodeRGBInto(c->file, c->file_len, rgb, npix * 3, info->w * 3))
        return errf(e, "%s: corrupt or truncated WebP (the decoder stopped)", path);
    if (C == 1) {
        uint8_t *g = img_grow(&c->dec, &c->dec_cap, npix);
        for (size_t i = 0; i < npix; i++)
            g[i] = img_luma(rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2]);
    }
    *dh = info->h;
    *dw = info->w;
    return 0;
}
