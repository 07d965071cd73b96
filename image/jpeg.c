/* jpeg.c — JPEG decoding through TurboJPEG (libjpeg-turbo 2.1 API).
 *
 * DCT-domain scaling: when the caller's target is smaller than the image,
 * decode at the smallest factor n/8 whose output is still >= the target in
 * both dimensions; the resampler does the rest. Gray output from a colour
 * JPEG is its Y plane; CMYK and YCCK JPEGs are decoded to CMYK and converted
 * here (TurboJPEG cannot go from CMYK to RGB).
 *
 * Warnings. TurboJPEG 2.1 returns -1 both for errors and for libjpeg
 * warnings (tjGetErrorCode says which, but reports TJERR_WARNING for a fatal
 * error that follows a warning), and keeps only the first warning's text.
 * Our policy:
 *   - benign warnings (allow-list below: extraneous bytes before a marker,
 *     unknown JFIF revision or Adobe transform, bad ICC or thumbnail data,
 *     an inconsistent progression, odd SOS parameters, surplus scanlines)
 *     leave every pixel decoded: the image is accepted, as PIL accepts it;
 *   - everything else is an error, in particular "Premature end of JPEG
 *     file" (a truncated file: libjpeg would pad it with grey) — reported as
 *     "truncated JPEG", other failures as "corrupt JPEG", or "truncated or
 *     corrupt JPEG" when the file has no EOI marker either;
 *   - because a benign first warning would hide a later truncation, an
 *     accepted warning also requires an EOI marker after the first SOS.
 * TurboJPEG 2.1 leaves its handle unusable after some header errors, so the
 * handle is dropped after any failure and made again on the next JPEG.
 * It is also made afresh for every image: libjpeg keeps the quantization
 * and Huffman tables of the last file it read (for abbreviated streams),
 * so a file that lacks its own tables would decode with the previous
 * image's -- whether it decodes, and to what, would depend on what the
 * worker read before (a new handle costs about 2 us, against the hundreds
 * a photograph takes).
 * Layouts TurboJPEG 2.1 cannot classify ("Could not determine subsampling
 * type": luma sampled 1x4, chroma denser than luma, ...) are valid JPEGs
 * that libjpeg and PIL decode: they go through libjpeg's own API
 * (jpeg_region.c) instead of being refused.
 * TJFLAG_LIMITSCANS refuses progressive files with absurd scan counts
 * (a decoder-time bomb). Deliberately not supported: 12-bit and lossless
 * JPEG (TurboJPEG 2.1 refuses them with a clear message).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <turbojpeg.h>

#include "image/internal.h"

static const char *const benign_warnings[] = {
    "extraneous bytes before marker",
    "unknown JFIF revision",
    "Unknown Adobe color transform",
    "bad ICC marker",
    "thumbnail image size does not match",
    "Inconsistent progression sequence",
    "Invalid SOS parameters for sequential JPEG",
    "Application transferred too many scanlines",
};

static int is_benign(const char *msg)
{
    for (size_t i = 0; i < sizeof benign_warnings / sizeof benign_warnings[0]; i++)
        if (strstr(msg, benign_warnings[i]))
            return 1;
    return 0;
}

/* An EOI marker (FF D9) somewhere after the first start of scan. The
 * segments before the scan are skipped by their lengths, so an embedded
 * thumbnail's EOI does not count. */
static int has_eoi(const uint8_t *d, size_t n)
{
    size_t i = 2;
    while (i + 4 <= n) {
        if (d[i] != 0xFF) { /* extraneous bytes: libjpeg skips them too */
            i++;
            continue;
        }
        uint8_t m = d[i + 1];
        if (m == 0xFF) { /* fill byte */
            i++;
            continue;
        }
        if (m == 0xDA)
            break;
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD8)) {
            i += 2;
            continue;
        }
        i += 2 + (size_t)(d[i + 2] << 8 | d[i + 3]);
    }
    for (; i + 1 < n; i++)
        if (d[i] == 0xFF && d[i + 1] == 0xD9)
            return 1;
    return 0;
}

static tjhandle handle(img_ctx *c)
{
    if (!c->tj)
        c->tj = tjInitDecompress();
    return c->tj;
}

static void drop_handle(img_ctx *c)
{
    if (c->tj)
        tjDestroy(c->tj);
    c->tj = NULL;
}

void img_jpeg_release(img_ctx *c) { drop_handle(c); }

int img_jpeg_complete(const img_ctx *c)
{
    const uint8_t *d = c->file;
    size_t n = c->file_len;
    return (n >= 2 && d[n - 2] == 0xFF && d[n - 1] == 0xD9) || has_eoi(d, n);
}

int img_jpeg_failure_msg(img_ctx *c, const char *path, const char *msg, int warning, errbuf *e)
{
    int eoi = img_jpeg_complete(c);
    if (warning && is_benign(msg)) {
        if (eoi)
            return 0;
        return errf(e, "%s: truncated JPEG (no end-of-image marker)", path);
    }
    /* one wording for one state, whichever decode met it: a file that
     * runs out before its end-of-image marker is "truncated" (libjpeg's
     * full decode says "Premature end of JPEG file", the region decode
     * checks the marker first); a scan that stops short inside a complete
     * file ("premature end of data segment": a marker where data should
     * be) is corrupt, not truncated */
    if (!eoi && (strstr(msg, "Premature end") || strstr(msg, "premature end")))
        return errf(e, "%s: truncated JPEG (no end-of-image marker)", path);
    if (strstr(msg, "Premature end of JPEG file"))
        return errf(e, "%s: truncated JPEG (%s)", path, msg);
    return errf(e, "%s: %s JPEG (%s)", path, eoi ? "corrupt" : "truncated or corrupt", msg);
}

/* Turn a failed call into `path: reason`, or accept a benign warning (0). */
static int failure(img_ctx *c, const char *path, int sizes_known, errbuf *e)
{
    tjhandle tj = c->tj;
    char msg[256];
    snprintf(msg, sizeof msg, "%s", tjGetErrorStr2(tj));
    img_printable(msg);
    int warning = tjGetErrorCode(tj) == TJERR_WARNING;
    drop_handle(c);
    return img_jpeg_failure_msg(c, path, msg, warning && sizes_known, e);
}

int img_jpeg_header(img_ctx *c, const char *path, img_info *info, errbuf *e)
{
    drop_handle(c); /* no tables from the previous image */
    tjhandle tj = handle(c);
    if (!tj)
        return errf(e, "%s: cannot start the JPEG decoder: %s", path, tjGetErrorStr2(NULL));
    int w = 0, h = 0, sub = 0, cs = -1;
    if (tjDecompressHeader3(tj, c->file, (unsigned long)c->file_len, &w, &h, &sub, &cs) != 0) {
        if (strstr(tjGetErrorStr2(tj), "Could not determine subsampling type")) {
            drop_handle(c);
            return img_jpeg_header_libjpeg(c, path, info, e);
        }
        if (failure(c, path, w > 0 && h > 0, e) != 0)
            return -1;
    }
    if (w <= 0 || h <= 0) { /* TurboJPEG 2.1 returns 0 for a tables-only stream */
        drop_handle(c);
        return errf(e, "%s: truncated JPEG (no image data)", path);
    }
    info->format = IMG_FMT_JPEG;
    info->w = w;
    info->h = h;
    info->cmyk = cs == TJCS_CMYK || cs == TJCS_YCCK;
    info->channels = cs == TJCS_GRAY ? 1 : 3;
    return 0;
}

int img_jpeg_scale_num(const img_info *info, int want_h, int want_w)
{
    for (int n = 1; n < 8 && want_h > 0 && want_w > 0; n++)
        if ((info->h * n + 7) / 8 >= want_h && (info->w * n + 7) / 8 >= want_w)
            return n;
    return 8;
}

void img_jpeg_scaled_size(int w, int h, int want_h, int want_w, int *sh, int *sw)
{
    *sh = h;
    *sw = w;
    if (want_h <= 0 || want_w <= 0)
        return;
    int nsf = 0;
    tjscalingfactor *sf = tjGetScalingFactors(&nsf);
    tjscalingfactor best = {1, 1};
    for (int i = 0; sf && i < nsf; i++) {
        if (sf[i].num > sf[i].denom)
            continue; /* never upscale in the decoder */
        if (TJSCALED(w, sf[i]) < want_w || TJSCALED(h, sf[i]) < want_h)
            continue;
        if ((long)sf[i].num * best.denom < (long)best.num * sf[i].denom)
            best = sf[i];
    }
    *sh = TJSCALED(h, best);
    *sw = TJSCALED(w, best);
}

/* One CMYK ink as PIL reads Adobe JPEGs: stored values are inverted
 * (255 = no ink), and a colour channel is (1 - ink) * (1 - black). */
static inline uint8_t cmyk_to_channel(unsigned stored_ink, unsigned stored_k)
{
    unsigned ink = 255 - stored_ink, nk = stored_k;
    unsigned t = ink * nk + 128;
    return (uint8_t)(nk - (((t >> 8) + t) >> 8)); /* nk - ink * nk / 255 */
}

void img_jpeg_cmyk(uint8_t *dst, const uint8_t *src, size_t npix, int C)
{
    for (size_t i = 0; i < npix; i++, src += 4) {
        uint8_t r = cmyk_to_channel(src[0], src[3]), g = cmyk_to_channel(src[1], src[3]),
                b = cmyk_to_channel(src[2], src[3]);
        if (C == 1) {
            dst[i] = img_luma(r, g, b);
        } else {
            dst[3 * i] = r;
            dst[3 * i + 1] = g;
            dst[3 * i + 2] = b;
        }
    }
}

int img_jpeg_decode(img_ctx *c, const char *path, const img_info *info, int C, int want_h,
                    int want_w, int *dh, int *dw, errbuf *e)
{
    int sh, sw;
    img_jpeg_scaled_size(info->w, info->h, want_h, want_w, &sh, &sw);
    if (info->tj_refused) { /* the whole image through libjpeg at the same scale */
        const int num = img_jpeg_scale_num(info, want_h, want_w);
        img_region whole = {.y = 0, .x = 0, .h = sh, .w = sw}, got;
        if (img_jpeg_decode_region(c, path, info, C, num, &whole, &got, e) != 0)
            return -1;
        *dh = got.h;
        *dw = got.w;
        return 0;
    }
    size_t npix = (size_t)sh * (size_t)sw;
    uint8_t *dec = img_grow(&c->dec, &c->dec_cap, npix * (size_t)C);
    uint8_t *dst = info->cmyk ? img_grow(&c->tmp, &c->tmp_cap, npix * 4) : dec;
    int pf = info->cmyk ? TJPF_CMYK : C == 1 ? TJPF_GRAY : TJPF_RGB;
    tjhandle tj = handle(c);
    if (!tj)
        return errf(e, "%s: cannot start the JPEG decoder: %s", path, tjGetErrorStr2(NULL));
    if (tjDecompress2(tj, c->file, (unsigned long)c->file_len, dst, sw, 0, sh, pf,
                      TJFLAG_LIMITSCANS) != 0 &&
        failure(c, path, 1, e) != 0)
        return -1;
    if (info->cmyk)
        img_jpeg_cmyk(dec, dst, npix, C);
    *dh = sh;
    *dw = sw;
    return 0;
}
