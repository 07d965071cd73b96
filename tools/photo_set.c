/* photo_set.c — an ImageNet-shaped data set cut from real photographs.
 *
 *   photo_set [--src DIR]... [--out DIR] [--per-class N] [--val M] [--seed S]
 *             [--imagenet-sizes]
 *
 * Sources: every JPEG under each --src folder (default: Debian's
 * mate-backgrounds photographs, /usr/share/backgrounds/mate/nature, the
 * largest Elephants in .../abstract and GreenTraditional in .../desktop;
 * `make photos` installs the package). Each source photograph is a class,
 * named after its file (lower case, without extension).
 *
 * Samples are deterministic random views of the source, shaped like
 * ImageNet's: an aspect ratio w/h in [0.6, 1.8] (log-uniform), a crop of
 * 20-100% of the largest box of that ratio, resampled (antialiased
 * bilinear, image/resize.c) to a shorter side of 300-500 px; then JPEG at
 * quality 75-95, 4:2:0 (85%), 4:4:4 (10%) or grey (5%), progressive 15%.
 * Output: DIR/train/CLASS/CLASS_NNNN.jpg (N per class, default 200),
 * DIR/val/CLASS/... (M per class, default 25), and DIR/train.csv and
 * DIR/val.csv listing the same files (path,label with the class name).
 * Everything depends on the sources and the arguments only: same seed,
 * same bytes.
 *
 * --imagenet-sizes: sizes and oddities shaped like ImageNet's training set
 * instead (without the flag the output above is unchanged, byte for byte).
 * Sources are decoded to a shorter side of about 2048 (at most full size).
 * Sizes (longer side L, L / shorter side A, upright):
 *   L: 500 (60%, Flickr's "medium" size), log-uniform 333-700 (30%),
 *      log-uniform 700-2000 (8%, the tail), log-uniform 120-333 (2%);
 *   A: 4:3 (55%), 3:2 (20%), 1:1 (5%), 16:9 (5%), log-uniform 1-2 (15%);
 *   portrait (height > width) 20%.
 * So the median is 500x375 (375x500 upright portrait), most sides are
 * 333-700 and 3-4% have a side above 1200 (seed 1 on the
 * default sources: median 500x375, mean 543x399, 3.1% above 1200). A size the source cannot give
 * without upscaling shrinks (same ratio) to the largest box it has; the
 * view is then 20-100% of that box's area, never below the output size,
 * resampled as above. Colour JPEGs are quality 75-95, 4:2:0 (80%), 4:2:2
 * (5%) or 4:4:4 (15%); 15% of all JPEGs (oddities included) progressive.
 * Oddities: every block of 100 consecutive images of a split (in CSV
 * order) has, at places shuffled by the seed, exactly:
 *   2 grey JPEGs: one with 1x1 sampling, one whose one component has 2x2
 *     sampling (SOF says 0x22; written with libjpeg, TurboJPEG cannot);
 *   1 CMYK JPEG with an Adobe APP14 segment: plain inverted CMYK (Adobe
 *     transform 0, libjpeg, as Photoshop writes) in even blocks, YCCK
 *     (transform 2, TurboJPEG's TJPF_CMYK, 4:4:4) in odd ones; the inks are
 *     the ones PIL's Adobe reading (and train's) turns back into the RGB;
 *   2 JPEGs with an EXIF APP1 orientation, 6 (big-endian TIFF) and 8
 *     (little-endian): the pixels are stored turned, so that applying the
 *     tag (train --exif, PIL's exif_transpose) gives the upright view;
 *   1 PNG (RGB, 8 bit): named .JPEG ("disguised", as ImageNet's one PNG
 *     is) in even blocks, .png in odd ones.
 * Real ImageNet has fewer CMYK files (22) and PNGs (1) than this; they are
 * over-represented so that a benchmark of a few hundred images meets them.
 * Files are named CLASS_NNNN.JPEG (as ImageNet's), the PNGs of odd blocks
 * CLASS_NNNN.png.
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stb/stb_image_write.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <turbojpeg.h>
/* jpeglib.h needs size_t and FILE first */
#include <jpeglib.h>

#include "common/rng.h"
#include "common/util.h"
#include "image/resize.h"

#define MAX_SOURCES 256
#define SOURCE_SHORT 1100          /* sources are decoded DCT-scaled to about this shorter side */
#define SOURCE_SHORT_IMAGENET 2048 /* the same with --imagenet-sizes (a tail to ~2000 px) */
#define ODD_BLOCK 100              /* --imagenet-sizes: oddities per block of images */

typedef struct source {
    char *path, *name;
    uint8_t *rgb; /* h x w x 3 */
    int h, w;
} source;

static const char *const default_src[] = {
    "/usr/share/backgrounds/mate/nature",
    "/usr/share/backgrounds/mate/abstract/Elephants_5640x3172.jpg",
    "/usr/share/backgrounds/mate/desktop/GreenTraditional.jpg",
};

static int cmp_src(const void *a, const void *b)
{
    return strcmp(((const source *)a)->name, ((const source *)b)->name);
}

static int is_jpeg_name(const char *n)
{
    size_t l = strlen(n);
    return (l > 4 && !strcasecmp(n + l - 4, ".jpg")) || (l > 5 && !strcasecmp(n + l - 5, ".jpeg"));
}

static void add_source(source *s, int *n, const char *path)
{
    if (*n == MAX_SOURCES)
        return;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char *name = xstrdup(base);
    char *dot = strrchr(name, '.');
    if (dot)
        *dot = '\0';
    for (char *p = name; *p; p++)
        *p = isalnum((unsigned char)*p) ? (char)tolower((unsigned char)*p) : '_';
    s[(*n)++] = (source){.path = xstrdup(path), .name = name};
}

/* A file, or every JPEG in a folder (not recursive). */
static int collect(source *s, int *n, const char *arg)
{
    struct stat st;
    if (stat(arg, &st) != 0) {
        fprintf(stderr, "photo-set: %s: %s%s\n", arg, strerror(errno),
                strncmp(arg, "/usr/share/backgrounds/mate", 27)
                    ? ""
                    : " (make photos installs mate-backgrounds)");
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        add_source(s, n, arg);
        return 0;
    }
    DIR *d = opendir(arg);
    if (!d) {
        fprintf(stderr, "photo-set: %s: %s\n", arg, strerror(errno));
        return -1;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.' && is_jpeg_name(de->d_name)) {
            char p[4200];
            snprintf(p, sizeof p, "%s/%s", arg, de->d_name);
            add_source(s, n, p);
        }
    closedir(d);
    return 0;
}

static int load_source(tjhandle tj, source *s, int short_side)
{
    errbuf e;
    size_t len;
    uint8_t *jpg = (uint8_t *)read_whole_file(s->path, &len, &e);
    if (!jpg) {
        fprintf(stderr, "photo-set: %s\n", e.msg);
        return -1;
    }
    int w, h, sub, cs;
    if (tjDecompressHeader3(tj, jpg, (unsigned long)len, &w, &h, &sub, &cs) != 0) {
        fprintf(stderr, "photo-set: %s: %s\n", s->path, tjGetErrorStr2(tj));
        free(jpg);
        return -1;
    }
    int num = 8; /* n/8: the smallest keeping the shorter side >= SOURCE_SHORT */
    while (num > 1 && (long)(w < h ? w : h) * (num - 1) >= (long)short_side * 8)
        num--;
    tjscalingfactor f = {num, 8};
    s->w = TJSCALED(w, f);
    s->h = TJSCALED(h, f);
    s->rgb = xmalloc((size_t)s->w * s->h * 3);
    int rc = tjDecompress2(tj, jpg, (unsigned long)len, s->rgb, s->w, 0, s->h, TJPF_RGB, 0);
    free(jpg);
    if (rc != 0 && tjGetErrorCode(tj) != TJERR_WARNING) {
        fprintf(stderr, "photo-set: %s: %s\n", s->path, tjGetErrorStr2(tj));
        return -1;
    }
    return 0;
}

/* One sample of source s into a JPEG; returns its bytes (tj-allocated).
 * A fresh TurboJPEG handle per image: libjpeg-turbo 2.1.5 keeps a
 * progressive scan script on a handle, so a baseline image compressed after
 * a progressive one on the same handle comes out corrupt ("bad Huffman
 * code", "extraneous bytes before marker"). */
static unsigned char *make_sample(resize_plan *rs, const source *s, rng *r, unsigned long *len)
{
    double ratio = exp(log(0.6) + (log(1.8) - log(0.6)) * rng_uniform_d(r));
    int side = 300 + (int)rng_below(r, 201);
    int oh = ratio >= 1 ? side : (int)lround(side / ratio),
        ow = ratio >= 1 ? (int)lround(side * ratio) : side;
    /* the largest box of that ratio, then 20-100% of its area */
    double bw = s->w, bh = bw / ratio;
    if (bh > s->h)
        bh = s->h, bw = bh * ratio;
    double a = sqrt(0.2 + 0.8 * rng_uniform_d(r));
    double cw = bw * a, ch = bh * a;
    if (ch < oh || cw < ow) /* never upscale */
        cw = bw, ch = bh;
    double y = (s->h - ch) * rng_uniform_d(r), x = (s->w - cw) * rng_uniform_d(r);
    uint8_t *px = xmalloc((size_t)oh * ow * 3);
    resize_box(rs, px, oh, ow, s->rgb, (size_t)s->w * 3, s->h, s->w, 3, y, x, ch, cw);
    int q = 75 + (int)rng_below(r, 21);
    double u = rng_uniform_d(r);
    int sub = u < 0.05 ? TJSAMP_GRAY : u < 0.15 ? TJSAMP_444 : TJSAMP_420;
    int flags = rng_uniform_d(r) < 0.15 ? TJFLAG_PROGRESSIVE : 0;
    unsigned char *out = NULL;
    *len = 0;
    tjhandle enc = tjInitCompress();
    if (!enc || tjCompress2(enc, px, ow, 0, oh, TJPF_RGB, &out, len, sub, q, flags) != 0) {
        fprintf(stderr, "photo-set: encoding failed: %s\n", tjGetErrorStr2(enc));
        tjFree(out);
        out = NULL;
    }
    if (enc)
        tjDestroy(enc);
    free(px);
    return out;
}

/* --imagenet-sizes ---------------------------------------------------- */

enum odd_kind {
    ODD_NONE,
    ODD_GREY,
    ODD_GREY22,
    ODD_CMYK,
    ODD_PNG,
    ODD_EXIF6,
    ODD_EXIF8,
    ODD_KINDS
};

static const char *const odd_name[ODD_KINDS] = {
    "plain", "grey", "grey 2x2", "CMYK", "PNG", "EXIF 6", "EXIF 8",
};

/* The oddity of image g of a split: its block's slots shuffled by the seed. */
static enum odd_kind odd_of(uint64_t seed, int val, long g)
{
    static const enum odd_kind slot[] = {ODD_GREY, ODD_GREY22, ODD_CMYK,
                                         ODD_PNG,  ODD_EXIF6,  ODD_EXIF8};
    int perm[ODD_BLOCK];
    for (int i = 0; i < ODD_BLOCK; i++)
        perm[i] = i;
    rng r = rng_keyed(seed, RNG_TOOL, 0x494d474eu + (uint64_t)val, (uint64_t)(g / ODD_BLOCK));
    for (int i = ODD_BLOCK - 1; i > 0; i--) {
        int j = (int)rng_below(&r, (uint32_t)i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    int p = perm[g % ODD_BLOCK];
    return p < (int)(sizeof slot / sizeof *slot) ? slot[p] : ODD_NONE;
}

static double log_uniform(rng *r, double lo, double hi)
{
    return exp(log(lo) + (log(hi) - log(lo)) * rng_uniform_d(r));
}

/* An upright size drawn from the ImageNet-like distribution (header). */
static void imagenet_size(rng *r, int *oh, int *ow)
{
    double u = rng_uniform_d(r);
    double L = u < 0.60   ? 500
               : u < 0.90 ? log_uniform(r, 333, 700)
               : u < 0.98 ? log_uniform(r, 700, 2000)
                          : log_uniform(r, 120, 333);
    double v = rng_uniform_d(r);
    double A = v < 0.55   ? 4.0 / 3
               : v < 0.75 ? 1.5
               : v < 0.80 ? 1.0
               : v < 0.85 ? 16.0 / 9
                          : log_uniform(r, 1, 2);
    int l = (int)lround(L), s = (int)lround(L / A);
    if (rng_uniform_d(r) < 0.2)
        *oh = l, *ow = s;
    else
        *oh = s, *ow = l;
}

typedef struct ljerr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
} ljerr;

static void lj_error_exit(j_common_ptr c)
{
    ljerr *e = (ljerr *)c->err;
    char msg[JMSG_LENGTH_MAX];
    c->err->format_message(c, msg);
    fprintf(stderr, "photo-set: libjpeg: %s\n", msg);
    longjmp(e->jb, 1);
}

/* A JPEG through the libjpeg API (what TurboJPEG cannot write): grey with
 * 2x2 sampling (comps 1) or Adobe CMYK (comps 4, in_color_space JCS_CMYK,
 * stored as CMYK with an Adobe APP14 segment, transform 0). Returns
 * tjAlloc'ed bytes, NULL on failure. */
static unsigned char *libjpeg_encode(const uint8_t *px, int h, int w, int comps, int q,
                                     int progressive, unsigned long *len)
{
    struct jpeg_compress_struct ci;
    ljerr err;
    unsigned char *mem = NULL;
    unsigned long mem_len = 0;
    unsigned char *volatile out = NULL;
    ci.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = lj_error_exit;
    if (setjmp(err.jb)) {
        jpeg_destroy_compress(&ci);
        free(mem);
        tjFree(out);
        return NULL;
    }
    jpeg_create_compress(&ci);
    jpeg_mem_dest(&ci, &mem, &mem_len);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = comps;
    ci.in_color_space = comps == 1 ? JCS_GRAYSCALE : JCS_CMYK;
    jpeg_set_defaults(&ci);
    jpeg_set_colorspace(&ci, comps == 1 ? JCS_GRAYSCALE : JCS_CMYK);
    if (comps == 1)
        ci.comp_info[0].h_samp_factor = ci.comp_info[0].v_samp_factor = 2;
    jpeg_set_quality(&ci, q, TRUE);
    if (progressive)
        jpeg_simple_progression(&ci);
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)ci.next_scanline * w * comps);
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    out = tjAlloc((int)mem_len);
    if (out)
        memcpy(out, mem, mem_len);
    *len = mem_len;
    jpeg_destroy_compress(&ci);
    free(mem);
    return out;
}

/* TurboJPEG, a fresh handle per image (see make_sample) */
static unsigned char *tj_encode(const uint8_t *px, int h, int w, int pf, int sub, int q,
                                int progressive, unsigned long *len)
{
    unsigned char *out = NULL;
    *len = 0;
    tjhandle enc = tjInitCompress();
    if (!enc || tjCompress2(enc, px, w, 0, h, pf, &out, len, sub, q,
                            progressive ? TJFLAG_PROGRESSIVE : 0) != 0) {
        fprintf(stderr, "photo-set: encoding failed: %s\n", tjGetErrorStr2(enc));
        tjFree(out);
        out = NULL;
    }
    if (enc)
        tjDestroy(enc);
    return out;
}

/* RGB to the inverted (Adobe, 255 = no ink) CMYK that PIL and train read
 * back as R = C' K' / 255: K' = max(R, G, B), C' = R * 255 / K'. */
static uint8_t *rgb_to_adobe_cmyk(const uint8_t *rgb, size_t npix)
{
    uint8_t *c = xmalloc(npix * 4);
    for (size_t i = 0; i < npix; i++) {
        const uint8_t *p = rgb + 3 * i;
        unsigned k = p[0] > p[1] ? p[0] : p[1];
        k = k > p[2] ? k : p[2];
        for (int j = 0; j < 3; j++)
            c[4 * i + j] = k ? (uint8_t)((p[j] * 255u + k / 2) / k) : 255;
        c[4 * i + 3] = (uint8_t)k;
    }
    return c;
}

/* The stored pixels (w x h) of an upright h x w image under EXIF
 * orientation 6 or 8: image/exif.c's img_orient of them gives it back. */
static uint8_t *turn_for_exif(const uint8_t *up, int h, int w, int orient)
{
    uint8_t *st = xmalloc((size_t)h * w * 3);
    const int sh = w, sw = h; /* stored */
    for (int y = 0; y < sh; y++)
        for (int x = 0; x < sw; x++) {
            /* orientation 6 shows stored (sh - 1 - x', y') at upright (y', x') */
            int uy = orient == 6 ? x : sw - 1 - x, ux = orient == 6 ? sh - 1 - y : y;
            memcpy(st + ((size_t)y * sw + x) * 3, up + ((size_t)uy * w + ux) * 3, 3);
        }
    return st;
}

/* An APP1 Exif segment holding IFD0 with one entry, Orientation, spliced
 * in after the JFIF APP0 (or SOI). Frees jpg; returns tjAlloc'ed bytes. */
static unsigned char *add_exif(unsigned char *jpg, unsigned long *len, int orient, int big)
{
    uint8_t tiff[26] = {0};
    memcpy(tiff, big ? "MM\0*" : "II*\0", 4);
    tiff[big ? 7 : 4] = 8;                        /* IFD0 at offset 8 */
    tiff[big ? 9 : 8] = 1;                        /* one entry */
    uint8_t *e = tiff + 10;                       /* tag, type, count, value */
    e[big ? 0 : 1] = 0x01, e[big ? 1 : 0] = 0x12; /* 0x0112 Orientation */
    e[big ? 3 : 2] = 3;                           /* SHORT */
    e[big ? 7 : 4] = 1;                           /* count 1 */
    e[big ? 9 : 8] = (uint8_t)orient;             /* next IFD offset: 0 */
    const size_t seg = 2 + 6 + sizeof tiff, n = 2 + seg;
    size_t at = 2;
    if (*len > 6 && jpg[2] == 0xFF && jpg[3] == 0xE0)
        at = 4 + ((size_t)jpg[4] << 8 | jpg[5]);
    unsigned char *out = tjAlloc((int)(*len + n));
    if (out) {
        memcpy(out, jpg, at);
        uint8_t *a = out + at;
        a[0] = 0xFF, a[1] = 0xE1, a[2] = (uint8_t)(seg >> 8), a[3] = (uint8_t)seg;
        memcpy(a + 4, "Exif\0\0", 6);
        memcpy(a + 10, tiff, sizeof tiff);
        memcpy(out + at + n, jpg + at, *len - at);
        *len += n;
    }
    tjFree(jpg);
    return out;
}

typedef struct membuf {
    unsigned char *p;
    size_t n, cap;
} membuf;

static void membuf_write(void *ctx, void *data, int size)
{
    membuf *m = ctx;
    if (m->n + (size_t)size > m->cap) {
        m->cap = (m->n + (size_t)size) * 2;
        m->p = xrealloc(m->p, m->cap);
    }
    memcpy(m->p + m->n, data, (size_t)size);
    m->n += (size_t)size;
}

static unsigned char *png_encode(const uint8_t *px, int h, int w, unsigned long *len)
{
    membuf m = {0};
    unsigned char *out = NULL;
    if (stbi_write_png_to_func(membuf_write, &m, w, h, 3, px, w * 3) && m.n > 0 &&
        (out = tjAlloc((int)m.n)) != NULL) {
        memcpy(out, m.p, m.n);
        *len = m.n;
    } else {
        fprintf(stderr, "photo-set: PNG encoding failed\n");
    }
    free(m.p);
    return out;
}

/* One --imagenet-sizes sample of source s: an image of oddity `odd`
 * (block parity `odd_block` picks CMYK vs YCCK and .JPEG vs .png); returns
 * tjAlloc'ed bytes and the file name's extension. */
static unsigned char *make_imagenet_sample(resize_plan *rs, const source *s, rng *r,
                                           enum odd_kind odd, int odd_block, unsigned long *len,
                                           const char **ext)
{
    int oh, ow;
    imagenet_size(r, &oh, &ow);
    double ratio = (double)ow / oh;
    /* the largest box of that ratio; shrink the output if the box is smaller */
    double bw = s->w, bh = bw / ratio;
    if (bh > s->h)
        bh = s->h, bw = bh * ratio;
    if (oh > bh || ow > bw) {
        double f = fmin(bh / oh, bw / ow);
        oh = (int)floor(oh * f), ow = (int)floor(ow * f);
    }
    double a = sqrt(0.2 + 0.8 * rng_uniform_d(r));
    a = fmax(a, fmax(oh / bh, ow / bw));
    double cw = bw * a, ch = bh * a;
    double y = (s->h - ch) * rng_uniform_d(r), x = (s->w - cw) * rng_uniform_d(r);
    int q = 75 + (int)rng_below(r, 21);
    double u = rng_uniform_d(r);
    int sub = u < 0.80 ? TJSAMP_420 : u < 0.85 ? TJSAMP_422 : TJSAMP_444;
    int prog = rng_uniform_d(r) < 0.15;
    uint8_t *px = xmalloc((size_t)oh * ow * 3);
    resize_box(rs, px, oh, ow, s->rgb, (size_t)s->w * 3, s->h, s->w, 3, y, x, ch, cw);
    *ext = "JPEG";
    unsigned char *out = NULL;
    switch (odd) {
    case ODD_GREY:
    case ODD_GREY22: {
        uint8_t *g = xmalloc((size_t)oh * ow);
        for (size_t i = 0; i < (size_t)oh * ow; i++) /* ITU-R BT.601 luma, as libjpeg */
            g[i] = (uint8_t)((299 * px[3 * i] + 587 * px[3 * i + 1] + 114 * px[3 * i + 2] + 500) /
                             1000);
        out = odd == ODD_GREY ? tj_encode(g, oh, ow, TJPF_GRAY, TJSAMP_GRAY, q, prog, len)
                              : libjpeg_encode(g, oh, ow, 1, q, prog, len);
        free(g);
        break;
    }
    case ODD_CMYK: {
        uint8_t *c = rgb_to_adobe_cmyk(px, (size_t)oh * ow);
        out = odd_block % 2 == 0 ? libjpeg_encode(c, oh, ow, 4, q, prog, len)
                                 : tj_encode(c, oh, ow, TJPF_CMYK, TJSAMP_444, q, prog, len);
        free(c);
        break;
    }
    case ODD_PNG:
        out = png_encode(px, oh, ow, len);
        *ext = odd_block % 2 == 0 ? "JPEG" : "png";
        break;
    case ODD_EXIF6:
    case ODD_EXIF8: {
        int orient = odd == ODD_EXIF6 ? 6 : 8;
        uint8_t *st = turn_for_exif(px, oh, ow, orient);
        out = tj_encode(st, ow, oh, TJPF_RGB, sub, q, prog, len);
        free(st);
        if (out)
            out = add_exif(out, len, orient, orient == 6);
        break;
    }
    default: out = tj_encode(px, oh, ow, TJPF_RGB, sub, q, prog, len); break;
    }
    free(px);
    return out;
}

/* Every sample of one split; the CSV text is appended to *csv. */
static int write_split(const char *out, const char *split, source *src, int nsrc, int per,
                       uint64_t seed, int imagenet, char **csv, size_t *csv_len, size_t *bytes,
                       long odd_count[ODD_KINDS])
{
    resize_plan rs = {0};
    int rc = 0;
    size_t cap = 0;
    for (int c = 0; c < nsrc && rc == 0; c++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s/%s", out, split, src[c].name);
        if (mkdir_p(dir, 0777) != 0) {
            fprintf(stderr, "photo-set: %s: %s\n", dir, strerror(errno));
            rc = -1;
            break;
        }
        for (int k = 0; k < per && rc == 0; k++) {
            rng r =
                rng_keyed(seed, RNG_TOOL, (uint64_t)c * 1000003u + (split[0] == 'v'), (uint64_t)k);
            unsigned long len;
            unsigned char *jpg;
            const char *ext = "jpg";
            if (imagenet) {
                long g = (long)c * per + k;
                enum odd_kind odd = odd_of(seed, split[0] == 'v', g);
                odd_count[odd]++;
                jpg = make_imagenet_sample(&rs, &src[c], &r, odd, (int)(g / ODD_BLOCK), &len, &ext);
            } else {
                jpg = make_sample(&rs, &src[c], &r, &len);
            }
            char rel[512], path[4800];
            snprintf(rel, sizeof rel, "%s/%s/%s_%04d.%s", split, src[c].name, src[c].name, k, ext);
            snprintf(path, sizeof path, "%s/%s", out, rel);
            errbuf e;
            if (!jpg || write_file_atomic(path, jpg, len, &e) != 0) {
                if (jpg)
                    fprintf(stderr, "photo-set: %s\n", e.msg);
                rc = -1;
            }
            *bytes += len;
            tjFree(jpg);
            size_t need = *csv_len + strlen(rel) + strlen(src[c].name) + 4;
            if (need > cap) {
                cap = need * 2;
                *csv = xrealloc(*csv, cap);
            }
            *csv_len += (size_t)sprintf(*csv + *csv_len, "%s,%s\n", rel, src[c].name);
        }
    }
    resize_plan_free(&rs);
    return rc;
}

static int write_csv(const char *out, const char *split, const char *rows, size_t len)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.csv", out, split);
    size_t hl = strlen("path,label\n");
    char *text = xmalloc(hl + len + 1);
    memcpy(text, "path,label\n", hl);
    memcpy(text + hl, rows ? rows : "", len);
    errbuf e;
    int rc = write_file_atomic(path, text, hl + len, &e);
    if (rc != 0)
        fprintf(stderr, "photo-set: %s\n", e.msg);
    free(text);
    return rc;
}

static void usage(void)
{
    fprintf(
        stderr,
        "usage: photo-set [--src DIR|FILE]... [--out DIR] [--per-class N] [--val M] [--seed S]\n"
        "                 [--imagenet-sizes]\n");
}

int main(int argc, char **argv)
{
    const char *out = "data/photos", *srcs[MAX_SOURCES];
    int nsrcs = 0;
    long long per = 200, val = 25, seed = 1;
    int imagenet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help")) {
            usage();
            return 0;
        }
        if (!strcmp(a, "--imagenet-sizes")) {
            imagenet = 1;
            continue;
        }
        if (!v) {
            usage();
            return 2;
        }
        i++;
        if (!strcmp(a, "--src") && nsrcs < MAX_SOURCES)
            srcs[nsrcs++] = v;
        else if (!strcmp(a, "--out"))
            out = v;
        else if (!strcmp(a, "--per-class") && parse_i64(v, &per) == 0 && per >= 1 && per <= 100000)
            ;
        else if (!strcmp(a, "--val") && parse_i64(v, &val) == 0 && val >= 0 && val <= 100000)
            ;
        else if (!strcmp(a, "--seed") && parse_i64(v, &seed) == 0 && seed >= 0)
            ;
        else {
            fprintf(stderr, "photo-set: bad option %s %s\n", a, v);
            usage();
            return 2;
        }
    }
    if (!nsrcs)
        for (size_t i = 0; i < sizeof default_src / sizeof *default_src; i++)
            srcs[nsrcs++] = default_src[i];
    static source src[MAX_SOURCES];
    int n = 0;
    for (int i = 0; i < nsrcs; i++)
        if (collect(src, &n, srcs[i]) != 0)
            return 1;
    if (n == 0) {
        fprintf(stderr, "photo-set: no JPEG sources found\n");
        return 1;
    }
    qsort(src, (size_t)n, sizeof *src, cmp_src);
    for (int i = 1; i < n; i++)
        if (!strcmp(src[i].name, src[i - 1].name)) {
            fprintf(stderr, "photo-set: two sources named %s (%s, %s)\n", src[i].name,
                    src[i - 1].path, src[i].path);
            return 1;
        }
    tjhandle tj = tjInitDecompress();
    for (int i = 0; i < n; i++)
        if (load_source(tj, &src[i], imagenet ? SOURCE_SHORT_IMAGENET : SOURCE_SHORT) != 0)
            return 1;
    tjDestroy(tj);
    char *csv = NULL;
    size_t len = 0, bytes = 0;
    long odd_count[ODD_KINDS] = {0};
    int rc = write_split(out, "train", src, n, (int)per, (uint64_t)seed, imagenet, &csv, &len,
                         &bytes, odd_count);
    rc = rc ? rc : write_csv(out, "train", csv, len);
    len = 0;
    if (rc == 0 && val > 0) {
        rc = write_split(out, "val", src, n, (int)val, (uint64_t)seed, imagenet, &csv, &len, &bytes,
                         odd_count);
        rc = rc ? rc : write_csv(out, "val", csv, len);
    }
    if (rc == 0)
        printf("photo-set: %s: %d classes from real photographs, %lld train + %lld val images per "
               "class, "
               "mean %.1f KB\n",
               out, n, per, val, bytes / 1024.0 / (double)(n * (per + val)));
    if (rc == 0 && imagenet) {
        printf("photo-set: ImageNet sizes; oddities:");
        for (int k = 1; k < ODD_KINDS; k++)
            printf(" %ld %s%s", odd_count[k], odd_name[k], k + 1 < ODD_KINDS ? "," : "\n");
    }
    free(csv);
    for (int i = 0; i < n; i++)
        free(src[i].path), free(src[i].name), free(src[i].rgb);
    return rc ? 1 : 0;
}
