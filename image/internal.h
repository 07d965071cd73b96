/* internal.h — what the files of image/ share: image.c with its decoders
 * (jpeg.c, jpeg_region.c, png.c, webp.c, stb.c), the structural checks run
 * before them (check.c), EXIF orientation (exif.c) and augment.c. Not for
 * the rest of the program: use image.h. */
#ifndef TRAIN_IMAGE_INTERNAL_H
#define TRAIN_IMAGE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "image/image.h"
#include "image/resize.h"

struct img_ctx {
    void *tj;      /* tjhandle for decompression, made on the first JPEG */
    uint8_t *file; /* the file's bytes */
    size_t file_len, file_cap;
    const img_src *src; /* set by the _src entry points for their call: the
                           bytes to read instead of the path's file */
    uint8_t *dec;       /* decoded image, dh x dw x C */
    size_t dec_cap;
    uint8_t *tmp; /* CMYK pixels before conversion; a repaired PNG */
    size_t tmp_cap;
    uint8_t *out; /* resized and/or cropped base */
    size_t out_cap;
    resize_plan rs;
    resize_plan rs_c; /* the chroma planes' (another geometry than rs's luma) */
    uint8_t *pln;     /* resampled planes of a planar decode */
    size_t pln_cap;
    int no_planar; /* 1: the fused decodes (rrc, resize/centre crop) go through RGB */
    int max_side;
    uint64_t max_pixels;
    double read_s, decode_s;         /* seconds spent reading files and decoding them, so far */
    double phase_s[IMG_PHASES], lap; /* img_ctx_phases; lap: the last phase's end */
    /* hashes of the JPEGs this context has read to their end and accepted
     * (img_jpeg_verified): a partial decode of one of them need not read
     * the rest again. Open addressing, 0 = empty. */
    uint64_t *verified;
    size_t verified_cap, verified_n;
};

typedef enum img_format {
    IMG_FMT_UNKNOWN = 0,
    IMG_FMT_JPEG,
    IMG_FMT_PNG,
    IMG_FMT_GIF,
    IMG_FMT_BMP,
    IMG_FMT_TGA,
    IMG_FMT_PSD,
    IMG_FMT_PNM,
    IMG_FMT_WEBP,
} img_format;

/* What a header says. */
typedef struct img_info {
    img_format format;
    int w, h;
    int channels;   /* 1 gray, 3 colour */
    int cmyk;       /* JPEG stored as CMYK or YCCK */
    int orient;     /* EXIF orientation, 1..8 (1 unless the JPEG has the tag) */
    int tj_refused; /* a JPEG layout TurboJPEG 2.1 cannot classify (e.g. luma
                       sampled 1x4): libjpeg's own API decodes it */
    int bits;       /* bits per sample decoded: 16 (16-bit PNG, PSD, PNM) or 8 */
    /* the memory the decoder needs at once, from the header (the stb
     * formats; 0 for JPEG and WebP, which the pixel limit bounds) */
    uint64_t decode_bytes;
} img_info;

const char *img_format_name(img_format f);

/* Whether the random-resized crop may take the planar decode (on by
 * default; off for comparisons). */
void img_ctx_set_planar(img_ctx *c, int on);

/* Replace control and non-ASCII bytes of a library's message with '?'. */
void img_printable(char *s);

/* Grow *buf to at least need bytes (contents not kept); returns *buf. */
uint8_t *img_grow(uint8_t **buf, size_t *cap, size_t need);
/* The same, but NULL (and *cap 0) where memory runs out, for a decoder that
 * reports it (IMG_ENOMEM) rather than exit. */
uint8_t *img_try_grow(uint8_t **buf, size_t *cap, size_t need);

/* ITU-R 601 luma in Q16: 0.299 R + 0.587 G + 0.114 B, rounded. */
static inline uint8_t img_luma(unsigned r, unsigned g, unsigned b)
{
    return (uint8_t)((19595u * r + 38470u * g + 7471u * b + 0x8000u) >> 16);
}

/* exif.c — the EXIF orientation (1..8, 1 when absent or damaged) of the
 * JPEG in d[0..n); and src (h x w x C) turned upright into dst, which gets
 * w x h for orientations 5..8. */
int img_exif_orientation(const uint8_t *d, size_t n);
void img_orient(uint8_t *restrict dst, const uint8_t *restrict src, int h, int w, int C,
                int orient);

/* jpeg.c — c->file holds a JPEG. */
void img_jpeg_release(img_ctx *c); /* free the TurboJPEG handle */
int img_jpeg_header(img_ctx *c, const char *path, img_info *info, errbuf *e);
/* Decode into c->dec as C channels, DCT-scaled to the smallest size that is
 * still >= want_h x want_w (0 x 0: full size); *dh, *dw get that size. */
int img_jpeg_decode(img_ctx *c, const char *path, const img_info *info, int C, int want_h,
                    int want_w, int *dh, int *dw, errbuf *e);
/* Where a failed or warning decode ends: 0 to accept a benign warning in a
 * file with an end-of-image marker, else -1 with `path: reason`. */
int img_jpeg_failure_msg(img_ctx *c, const char *path, const char *msg, int warning, errbuf *e);
/* c->file has an end-of-image marker after its first scan. */
int img_jpeg_complete(const img_ctx *c);
/* CMYK as stored (Adobe-inverted) to C = 1 or 3 channels, as PIL reads it. */
void img_jpeg_cmyk(uint8_t *dst, const uint8_t *src, size_t npix, int C);

/* The key of c->file's bytes (their hash), whether this context read
 * those bytes to their end and accepted them before, and the record that
 * it did. */
uint64_t img_jpeg_key(const img_ctx *c);
int img_jpeg_verified(const img_ctx *c, uint64_t key);
void img_jpeg_set_verified(img_ctx *c, uint64_t key);

/* The smallest n/8 whose scaled image still covers want_h x want_w, as
 * img_jpeg_decode picks it (TurboJPEG's rounding up); 8 for 0 x 0. */
int img_jpeg_scale_num(const img_info *info, int want_h, int want_w);

/* jpeg_region.c — a rectangle of pixels: y, x, h, w inside an image of
 * sh x sw (scaled) pixels. */
typedef struct img_region {
    int y, x, h, w;
    int sh, sw;
} img_region;
/* The smallest n in 1..8 for which an image of w x h scaled by n/8 still
 * covers want_h x want_w (8 when want is 0 x 0). */
void img_jpeg_scale_for(int w, int h, int want_h, int want_w, int *num);
/* The scale the planar decode takes for img_jpeg_scale_for's n/8: the
 * next one up whose inverse DCT libjpeg-turbo vectorises (1, 2, 4, 8). */
int img_jpeg_planar_scale(int num);
/* Decode the region `want` (in pixels of the n/8-scaled image) of c->file
 * into c->dec as C channels; *got is the region decoded (columns widened
 * to iMCU boundaries), rows got->w * C bytes apart. */
int img_jpeg_decode_region(img_ctx *c, const char *path, const img_info *info, int C, int num,
                           const img_region *want, img_region *got, errbuf *e);

/* The header of a JPEG through libjpeg's own API (for the layouts
 * TurboJPEG 2.1 refuses to classify): size, channels, CMYK. */
int img_jpeg_header_libjpeg(img_ctx *c, const char *path, img_info *info, errbuf *e);

/* A region decoded as planes: the components' samples before upsampling
 * and colour conversion (grey: Y; colour: Y, Cb, Cr). Plane k's first
 * sample sits at the region's corner; it has fy[k] rows and fx[k] columns
 * per pixel of the region (1, or 1/2 for 4:2:0 chroma: JPEG's chroma
 * samples are centred, so sample edges scale with the pixel edges). */
typedef struct img_planes {
    int n;
    const uint8_t *p[3];
    size_t stride[3];
    int h[3], w[3];
    double fy[3], fx[3];
} img_planes;
/* img_jpeg_decode_region's region as planes, in c->dec: 0, or 1 without
 * decoding when the file's layout has no planar decode here (CMYK, YCCK,
 * RGB, luma below the full sampling); got->y may start up to a row group
 * (<= 3 rows) above want->y. */
int img_jpeg_decode_planes(img_ctx *c, const char *path, const img_info *info, int num,
                           const img_region *want, img_region *got, img_planes *pl, errbuf *e);

/* The DCT-scaled size TurboJPEG gives for the smallest factor n/8 whose
 * output is >= want in both dimensions (exposed for tests and benchmarks). */
void img_jpeg_scaled_size(int w, int h, int want_h, int want_w, int *sh, int *sw);

/* stb.c — c->file holds one of the stb_image formats. */
int img_stb_header(img_ctx *c, const char *path, img_info *info, errbuf *e);
int img_stb_decode(img_ctx *c, const char *path, const img_info *info, int C, int *dh, int *dw,
                   errbuf *e);

/* png.c — c->file holds a PNG (the header is img_stb_header's, which
 * calls check.c's img_png_header). */
int img_png_decode(img_ctx *c, const char *path, const img_info *info, int C, int *dh, int *dw,
                   errbuf *e);

/* webp.c — c->file holds a WebP (RIFF....WEBP). */
int img_webp_header(img_ctx *c, const char *path, img_info *info, errbuf *e);
int img_webp_decode(img_ctx *c, const char *path, const img_info *info, int C, int *dh, int *dw,
                    errbuf *e);

/* check.c — structural checks stb_image does not make. The headers
 * fill w, h, channels; the prepares run before decoding and may point *d
 * at a repaired copy in c->tmp (PNG palettes padded to 256 entries). */
int img_png_header(const uint8_t *d, size_t n, img_info *info, const char *path, errbuf *e);
int img_png_prepare(img_ctx *c, const uint8_t **d, size_t *n, const char *path, errbuf *e);
int img_bmp_header(const uint8_t *d, size_t n, img_info *info, const char *path, errbuf *e);
int img_bmp_prepare(const uint8_t *d, size_t n, const char *path, errbuf *e);
int img_pnm_header(const uint8_t *d, size_t n, img_info *info, const char *path, errbuf *e);

/* augment.c — which part of a `size`-long axis lands where in a `crop`-long
 * one: source [src, src + len) goes to [dst, dst + len). */
typedef struct img_span {
    int src, len, dst;
} img_span;
/* Centre: torchvision's CenterCrop placement; -1 when size < crop and !pad. */
int img_span_centre(int size, int crop, int pad, img_span *s);
/* img_augment's steps 2 and 3 for a caller that writes the CHW image
 * itself: the flip's draw, then the colour jitter (its draws) over out. */
int img_flip_draw(const img_params *p, rng *r);
void img_jitter_chw(uint8_t *out, int out_h, int out_w, const img_params *p, rng *r);

/* simd_x86.c / image.c — YCbCr (JPEG's full-range BT.601, libjpeg's
 * integer arithmetic: jdcolor.c) to R, G, B planes, n pixels of a row,
 * mirrored when flip. */
void img_ycc_row(uint8_t *r, uint8_t *g, uint8_t *b, const uint8_t *y, const uint8_t *cb,
                 const uint8_t *cr, int n, int flip);

#endif
