/* image.c — the image pipeline's driver: read the file, recognise the
 * format by its first bytes, check the header against the size limits,
 * decode (jpeg.c, stb.c), resize and centre-crop into the base
 * image (resize.c), then augment (augment.c). Also the geometry helpers and
 * argument parsing the rest of the program needs. See image.h.
 *
 * Files are read whole with one read() into a reused buffer; only regular
 * files are opened for reading (O_NONBLOCK first, so a FIFO named like an
 * image cannot hang a worker). Deliberately no mmap: the files are small,
 * and a file truncated while mapped would raise SIGBUS in a worker. An
 * image inside a larger file (a tar shard's member: img_src) is its byte
 * range read with pread, then the same path as a file's bytes.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/internal.h"
#include "image/simd.h"

/* ---------------------------------------------------------------- context */

img_ctx *img_ctx_create(void)
{
    img_ctx *c = xcalloc(1, sizeof *c);
    c->max_side = IMG_MAX_SIDE;
    c->max_pixels = IMG_MAX_PIXELS;
    return c;
}

void img_ctx_free(img_ctx *c)
{
    if (!c)
        return;
    img_jpeg_release(c);
    free(c->file);
    free(c->dec);
    free(c->tmp);
    free(c->out);
    free(c->pln);
    free(c->verified);
    resize_plan_free(&c->rs);
    resize_plan_free(&c->rs_c);
    free(c);
}

void img_ctx_set_planar(img_ctx *c, int on) { c->no_planar = !on; }

uint64_t img_jpeg_key(const img_ctx *c)
{
    uint64_t h = hash64(c->file, c->file_len, 0x6a70656776726679ull);
    return h ? h : 1; /* never 0, the empty slot */
}

/* The slot of key k in a table of cap (a power of 2) slots: its own, or
 * the empty one where it would go. */
static size_t verified_slot(const uint64_t *t, size_t cap, uint64_t k)
{
    size_t i = k & (cap - 1);
    while (t[i] && t[i] != k)
        i = (i + 1) & (cap - 1);
    return i;
}

int img_jpeg_verified(const img_ctx *c, uint64_t key)
{
    return c->verified_n && c->verified[verified_slot(c->verified, c->verified_cap, key)] == key;
}

void img_jpeg_set_verified(img_ctx *c, uint64_t key)
{
    if (2 * (c->verified_n + 1) > c->verified_cap) { /* grow (a power of 2, half full at most) */
        size_t cap = c->verified_cap ? 2 * c->verified_cap : 1024;
        uint64_t *t = xcalloc(cap, sizeof *t);
        for (size_t j = 0; j < c->verified_cap; j++)
            if (c->verified[j])
                t[verified_slot(t, cap, c->verified[j])] = c->verified[j];
        free(c->verified);
        c->verified = t, c->verified_cap = cap;
    }
    size_t i = verified_slot(c->verified, c->verified_cap, key);
    if (!c->verified[i]) {
        c->verified[i] = key;
        c->verified_n++;
    }
}

/* Whether a JPEG may take the planar decode: not CMYK/YCCK, and both sides
 * at least PLANAR_MIN_SIDE pixels. Chroma resampled from its own samples
 * stands in for libjpeg's fancy upsampling well where there are many
 * samples; on small files with coarse chroma it does not: over the
 * generated corpus (tests/test_jpeg_corpus.c) files with a side under 48
 * strayed up to 6.6 levels on average from the exact path (4:1:1 at 1x8,
 * 4:2:0 at 32x70 1.3), those of 48 and more at most 0.74. Below the size
 * the RGB path costs next to nothing anyway. */
#define PLANAR_MIN_SIDE 64
static int planar_fits(const img_ctx *c, const img_info *info)
{
    return !c->no_planar && !info->cmyk && info->w >= PLANAR_MIN_SIDE && info->h >= PLANAR_MIN_SIDE;
}

void img_ctx_set_limits(img_ctx *c, int max_side, uint64_t max_pixels)
{
    c->max_side = max_side > 0 && max_side < IMG_MAX_SIDE ? max_side : IMG_MAX_SIDE;
    c->max_pixels = max_pixels > 0 && max_pixels < IMG_MAX_PIXELS ? max_pixels : IMG_MAX_PIXELS;
}

uint8_t *img_try_grow(uint8_t **buf, size_t *cap, size_t need)
{
    if (need > *cap || !*buf) {
        free(*buf);             /* contents are not kept: no copy */
        *cap = need + need / 4; /* slack: sizes vary a little between files */
        *buf = malloc(*cap ? *cap : 1);
        if (!*buf) /* without the slack */
            *buf = malloc((*cap = need) ? need : 1);
        if (!*buf)
            *cap = 0;
    }
    return *buf;
}

uint8_t *img_grow(uint8_t **buf, size_t *cap, size_t need)
{
    if (!img_try_grow(buf, cap, need)) /* xmalloc's out-of-memory exit, or a late success */
        *buf = xmalloc(*cap = need ? need : 1);
    return *buf;
}

void img_printable(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            *s = '?';
}

const char *img_format_name(img_format f)
{
    static const char *const names[] = {"image", "JPEG", "PNG", "GIF", "BMP",
                                        "TGA",   "PSD",  "PNM", "WebP"};
    return (unsigned)f < sizeof names / sizeof names[0] ? names[f] : "image";
}

/* ---------------------------------------------------------------- reading */

/* c->src's bytes, named `name` in messages: as read_file, with pread. */
static long read_range(img_ctx *c, const img_src *s, const char *name, int cold, errbuf *e)
{
    if (s->len == 0)
        return errf(e, "%s: empty (0 bytes)", name);
    if (s->len > IMG_MAX_FILE_BYTES)
        return errf(e, "%s: too large (%llu bytes; the limit is %llu)", name,
                    (unsigned long long)s->len, IMG_MAX_FILE_BYTES);
    int fd = open(s->file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return errf(e, "%s: cannot open: %s", name, strerror(errno));
    struct stat st;
    long rc = -1;
    if (fstat(fd, &st) != 0) {
        errf(e, "%s: cannot stat: %s", name, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        errf(e, "%s: not a regular file", name);
    } else {
        size_t want = (size_t)s->len;
        uint8_t *buf = img_grow(&c->file, &c->file_cap, want);
        long got = pread_full(fd, buf, want, s->off);
        if (got < 0)
            errf(e, "%s: read error: %s", name, strerror(errno));
        else if ((size_t)got < want) /* a shard cut short after it was indexed */
            errf(e, "%s: truncated (the file ends %ld bytes into its %zu)", name, got, want);
        else {
            c->file_len = (size_t)got;
            rc = got;
        }
        if (cold)
            (void)posix_fadvise(fd, (off_t)s->off, (off_t)s->len, POSIX_FADV_DONTNEED);
    }
    close(fd);
    return rc;
}

static long read_file(img_ctx *c, const char *path, int cold, errbuf *e)
{
    if (c->src && c->src->file)
        return read_range(c, c->src, path, cold, e);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return errf(e, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    long rc = -1;
    if (fstat(fd, &st) != 0) {
        errf(e, "%s: cannot stat: %s", path, strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        errf(e, "%s: is a directory", path);
    } else if (!S_ISREG(st.st_mode)) {
        errf(e, "%s: not a regular file", path);
    } else if (st.st_size == 0) {
        errf(e, "%s: empty file", path);
    } else if ((unsigned long long)st.st_size > IMG_MAX_FILE_BYTES) {
        errf(e, "%s: file too large (%lld bytes; the limit is %llu)", path, (long long)st.st_size,
             IMG_MAX_FILE_BYTES);
    } else {
        size_t want = (size_t)st.st_size, got = 0;
        uint8_t *buf = img_grow(&c->file, &c->file_cap, want);
        int err = 0;
        while (got < want) {
            ssize_t r = read(fd, buf + got, want - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0) {
                err = errno;
                break;
            }
            if (r == 0)
                break; /* shrank since fstat: use what is there */
            got += (size_t)r;
        }
        if (err) {
            errf(e, "%s: read error: %s", path, strerror(err));
        } else if (got == 0) {
            errf(e, "%s: empty file", path);
        } else {
            c->file_len = got;
            rc = (long)got;
        }
        if (cold)
            (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    }
    close(fd);
    return rc;
}

/* The phase k ends now (img_ctx_phases): one clock read. */
static void phase_end(img_ctx *c, int k)
{
    const double t = now_sec();
    c->phase_s[k] += t - c->lap;
    c->lap = t;
}

/* ---------------------------------------------------------------- formats */

static int is_tga(const uint8_t *d, size_t n)
{
    if (n < 18 || d[1] > 1)
        return 0;
    int type = d[2], bpp = d[16];
    int w = d[12] | d[13] << 8, h = d[14] | d[15] << 8;
    int mapped = type == 1 || type == 9;
    if (!(mapped || type == 2 || type == 3 || type == 10 || type == 11))
        return 0;
    if (mapped &&
        (d[1] != 1 || !(d[7] == 8 || d[7] == 15 || d[7] == 16 || d[7] == 24 || d[7] == 32) ||
         !(bpp == 8 || bpp == 16)))
        return 0;
    return w > 0 && h > 0 && (bpp == 8 || bpp == 15 || bpp == 16 || bpp == 24 || bpp == 32);
}

static int is_text(const uint8_t *d, size_t n)
{
    size_t m = n < 256 ? n : 256;
    for (size_t i = 0; i < m; i++)
        if (d[i] < 0x20 && d[i] != '\n' && d[i] != '\r' && d[i] != '\t')
            return 0;
    return 1;
}

/* sniff's *other for a text (P1-P3) or 1-bit (P4) PNM: a PNM all the same */
static const char pnm_unread[] = "ASCII or 1-bit PNM (only binary P5/P6 are read)";

/* The format from the first bytes; for formats we recognise but do not
 * decode, *other names them. */
static img_format sniff(const uint8_t *d, size_t n, const char **other)
{
    static const struct {
        size_t off, len;
        const char *magic, *name;
    } unsupported[] = {
        {0, 4, "II*\0", "TIFF"},
        {0, 4, "MM\0*", "TIFF"},
        {0, 10, "#?RADIANCE", "Radiance HDR"},
        {0, 6, "#?RGBE", "Radiance HDR"},
        {0, 4, "S\x80\xf6\x34", "Softimage PIC"},
        {0, 4, "\0\0\1\0", "ICO"},
        {0, 8, "\0\0\0\x0cjP  ", "JPEG 2000"},
        {0, 4, "\xff\x4f\xff\x51", "JPEG 2000"},
        {4, 8, "ftypheic", "HEIF"},
        {4, 8, "ftypmif1", "HEIF"},
        {4, 8, "ftypavif", "AVIF"},
        {0, 4, "qoif", "QOI"},
        {0, 4, "v/1\x01", "OpenEXR"},
        {0, 4, "DDS ", "DDS"},
        {0, 2, "\xff\x0a", "JPEG XL"},
    };
    *other = NULL;
    if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF)
        return IMG_FMT_JPEG;
    if (n >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0)
        return IMG_FMT_PNG;
    if (n >= 6 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0))
        return IMG_FMT_GIF;
    if (n >= 2 && d[0] == 'B' && d[1] == 'M')
        return IMG_FMT_BMP;
    if (n >= 4 && memcmp(d, "8BPS", 4) == 0)
        return IMG_FMT_PSD;
    if (n >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0)
        return IMG_FMT_WEBP;
    if (n >= 3 && d[0] == 'P' && d[1] >= '1' && d[1] <= '6' &&
        (d[2] == ' ' || d[2] == '\n' || d[2] == '\r' || d[2] == '\t')) {
        if (d[1] == '5' || d[1] == '6')
            return IMG_FMT_PNM;
        *other = pnm_unread;
        return IMG_FMT_UNKNOWN;
    }
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (n >= unsupported[i].off + unsupported[i].len &&
            memcmp(d + unsupported[i].off, unsupported[i].magic, unsupported[i].len) == 0) {
            *other = unsupported[i].name;
            return IMG_FMT_UNKNOWN;
        }
    if (is_tga(d, n))
        return IMG_FMT_TGA;
    return IMG_FMT_UNKNOWN;
}

const char *img_sniff_name(const uint8_t *d, size_t n)
{
    const char *other;
    const img_format f = sniff(d, n, &other);
    if (f != IMG_FMT_UNKNOWN)
        return img_format_name(f);
    return other == pnm_unread ? "PNM" : other;
}

/* Read `path` and its header; check the size limits. */
static int read_header(img_ctx *c, const char *path, int cold, img_info *info, errbuf *e)
{
    const double t0 = now_sec();
    c->lap = t0; /* a load starts with its file */
    long n = read_file(c, path, cold, e);
    phase_end(c, IMG_PH_READ);
    c->read_s += c->lap - t0;
    if (n < 0)
        return -1;
    const char *other;
    memset(info, 0, sizeof *info);
    info->format = sniff(c->file, c->file_len, &other);
    if (info->format == IMG_FMT_UNKNOWN) {
        if (other)
            return errf(e, "%s: unsupported image format: %s", path, other);
        if (is_text(c->file, c->file_len))
            return errf(e, "%s: not an image (a text file)", path);
        return errf(e, "%s: unknown image format (not JPEG, PNG, WebP, GIF, BMP, TGA, PSD or PNM)",
                    path);
    }
    int rc = info->format == IMG_FMT_JPEG   ? img_jpeg_header(c, path, info, e)
             : info->format == IMG_FMT_WEBP ? img_webp_header(c, path, info, e)
                                            : img_stb_header(c, path, info, e);
    if (rc != 0)
        return -1;
    info->orient = info->format == IMG_FMT_JPEG ? img_exif_orientation(c->file, c->file_len) : 1;
    if (info->w <= 0 || info->h <= 0)
        return errf(e, "%s: corrupt %s (zero size)", path, img_format_name(info->format));
    if (info->w > c->max_side || info->h > c->max_side ||
        (uint64_t)info->w * (uint64_t)info->h > c->max_pixels)
        return errf(e, "%s: image too large: %dx%d (the limit is %d per side and %llu pixels)",
                    path, info->h, info->w, c->max_side, (unsigned long long)c->max_pixels);
    if (info->decode_bytes > IMG_MAX_DECODE_BYTES) {
        char need[32], lim[32];
        return errf(e, "%s: image too large: %dx%d %s%s would need %s to decode (the limit is %s)",
                    path, info->h, info->w, info->bits == 16 ? "16-bit " : "",
                    img_format_name(info->format), fmt_bytes(need, sizeof need, info->decode_bytes),
                    fmt_bytes(lim, sizeof lim, IMG_MAX_DECODE_BYTES));
    }
    phase_end(c, IMG_PH_HEADER);
    return 0;
}

/* A JPEG decoded at n/8 has ceil(h * n / 8) rows, of which h * n / 8 are
 * the picture (the last row is partly padding): the resampler maps that
 * extent, not the whole last pixel, onto the output, or the image shifts
 * by up to half a decoded pixel. The scale is the one the decode took, not
 * one guessed from the decoded size: below 8 pixels several scales give
 * the same size (7 rows at 7/8 and at 8/8), and the guess shrank a 7x7
 * image's full decode to 6.125 pixels and stretched it back. */
static void dct_extent(const img_info *info, int num, double *bh, double *bw)
{
    *bh = info->h * num / 8.0;
    *bw = info->w * num / 8.0;
}

/* The decoded image (c->dec, *dh x *dw) turned upright by orientation
 * `orient` (exif.c); *dh, *dw get its new size. */
static void turn_upright(img_ctx *c, int C, int orient, int *dh, int *dw)
{
    if (orient == 1)
        return;
    size_t n = (size_t)*dh * (size_t)*dw * (size_t)C;
    img_grow(&c->tmp, &c->tmp_cap, n);
    img_orient(c->tmp, c->dec, *dh, *dw, C, orient);
    uint8_t *b = c->dec;
    size_t cap = c->dec_cap;
    c->dec = c->tmp, c->dec_cap = c->tmp_cap;
    c->tmp = b, c->tmp_cap = cap;
    if (orient >= 5) {
        int t = *dh;
        *dh = *dw, *dw = t;
    }
}

/* The orientation a load applies: the file's with --exif, else as stored. */
static int orientation(const img_params *p, const img_info *info)
{
    return p->exif ? info->orient : 1;
}

/* The image's size once turned by orientation `orient`. */
static void upright_size(const img_info *info, int orient, int *h, int *w)
{
    *h = orient >= 5 ? info->w : info->h;
    *w = orient >= 5 ? info->h : info->w;
}

/* Any format but JPEG, at full size into c->dec. */
static int decode_other(img_ctx *c, const char *path, const img_info *info, int C, int *dh, int *dw,
                        errbuf *e)
{
    if (info->format == IMG_FMT_WEBP)
        return img_webp_decode(c, path, info, C, dh, dw, e);
    if (info->format == IMG_FMT_PNG)
        return img_png_decode(c, path, info, C, dh, dw, e);
    return img_stb_decode(c, path, info, C, dh, dw, e);
}

/* ---------------------------------------------------------------- geometry */

int img_params_check(const img_params *p, errbuf *e)
{
    const int m = IMG_MAX_SIDE;
    if (p->channels != 1 && p->channels != 3)
        return errf(e, "channels must be 1 or 3, not %d", p->channels);
    if (p->resize_h < 0 || p->resize_w < 0 || p->resize_h > m || p->resize_w > m ||
        (p->resize_h > 0) != (p->resize_w > 0))
        return errf(e, "resize must be HxW with sides in 1..%d", m);
    if (p->resize_short < 0 || p->resize_short > m)
        return errf(e, "resize must be in 1..%d", m);
    if (p->resize_short > 0 && p->resize_h > 0)
        return errf(e, "resize: either HxW or the shorter side, not both");
    if (p->crop_h < 0 || p->crop_w < 0 || p->crop_h > m || p->crop_w > m ||
        (p->crop_h > 0) != (p->crop_w > 0))
        return errf(e, "crop must be HxW or N with sides in 1..%d", m);
    if (p->random_crop && p->crop_h <= 0)
        return errf(e, "a random crop needs a crop size");
    if (!(p->hflip >= 0.0f && p->hflip <= 1.0f))
        return errf(e, "hflip must be a probability in [0, 1]");
    for (int k = 0; k < 3; k++)
        if (!(p->jitter[k] >= 0.0f && p->jitter[k] <= 100.0f))
            return errf(e, "colour jitter strengths must be in 0..100");
    if (p->rrc && p->crop_h <= 0)
        return errf(e, "a random-resized crop needs an output size");
    if (p->rrc && p->random_crop)
        return errf(e, "a random-resized crop and a random crop cannot both apply");
    if (p->rrc_scale[0] != 0.0f || p->rrc_scale[1] != 0.0f)
        if (!(p->rrc_scale[0] > 0.0f && p->rrc_scale[0] <= p->rrc_scale[1] &&
              p->rrc_scale[1] <= 1.0f))
            return errf(e, "random-resized-crop scale must be 0 < min <= max <= 1");
    if (p->rrc_ratio[0] != 0.0f || p->rrc_ratio[1] != 0.0f)
        if (!(p->rrc_ratio[0] > 0.0f && p->rrc_ratio[0] <= p->rrc_ratio[1] &&
              p->rrc_ratio[1] < 1000.0f))
            return errf(e, "random-resized-crop ratio must be 0 < min <= max");
    return 0;
}

/* The size an h x w image has after the resize step (64-bit: a shorter-side
 * resize of a thin image can be huge, and is refused by the caller). */
static void resized_size(const img_params *p, int h, int w, long long *rh, long long *rw)
{
    if (p->resize_h > 0) {
        *rh = p->resize_h;
        *rw = p->resize_w;
    } else if (p->resize_short > 0) {
        long long n = p->resize_short; /* torchvision: int(n * long / short) */
        if (w <= h) {
            *rw = n;
            *rh = n * h / w;
        } else {
            *rh = n;
            *rw = n * w / h;
        }
    } else {
        *rh = h;
        *rw = w;
    }
}

static void base_from(const img_params *p, int h, int w, int *bh, int *bw)
{
    long long rh, rw;
    resized_size(p, h, w, &rh, &rw);
    *bh = p->crop_h > 0 && !p->random_crop ? p->crop_h : (int)(rh < INT32_MAX ? rh : 0);
    *bw = p->crop_h > 0 && !p->random_crop ? p->crop_w : (int)(rw < INT32_MAX ? rw : 0);
}

int img_base_size(const img_params *p, int fixed_h, int fixed_w, int *base_h, int *base_w)
{
    if (p->rrc)
        return -1; /* every sample is cut from the decoded file */
    if ((p->crop_h > 0 && !p->random_crop) || p->resize_h > 0) {
        base_from(p, 1, 1, base_h, base_w); /* the image's size does not matter */
        return 0;
    }
    if (fixed_h <= 0 || fixed_w <= 0)
        return -1;
    base_from(p, fixed_h, fixed_w, base_h, base_w);
    return *base_h > 0 && *base_w > 0 ? 0 : -1;
}

void img_output_size(const img_params *p, int fixed_h, int fixed_w, int *out_h, int *out_w)
{
    if (p->crop_h > 0) {
        *out_h = p->crop_h;
        *out_w = p->crop_w;
    } else if (img_base_size(p, fixed_h, fixed_w, out_h, out_w) != 0) {
        *out_h = *out_w = 0;
    }
}

int img_parse_size(const char *s, int *h, int *w, int *single)
{
    long long a, b;
    const char *x = s ? strpbrk(s, "xX") : NULL;
    if (!s)
        return -1;
    if (!x) {
        if (parse_i64(s, &a) != 0 || a < 1 || a > IMG_MAX_SIDE)
            return -1;
        *h = *w = (int)a;
        *single = 1;
        return 0;
    }
    char buf[32];
    size_t n = (size_t)(x - s);
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (parse_i64(buf, &a) != 0 || parse_i64(x + 1, &b) != 0 || a < 1 || b < 1 ||
        a > IMG_MAX_SIDE || b > IMG_MAX_SIDE)
        return -1;
    *h = (int)a;
    *w = (int)b;
    *single = 0;
    return 0;
}

/* ---------------------------------------------------------------- pipeline */

/* The DCT scale img_jpeg_decode would take for want_h x want_w, the
 * picture's extent at that scale (box_h x box_w), and the decoded rows
 * [y0, y1) and columns [x0, x1) the resampler reads for the crop window
 * sy x sx of the rh x rw resize. */
static int centre_window(const img_info *info, int want_h, int want_w, int rh, int rw, img_span sy,
                         img_span sx, double *box_h, double *box_w, int *y0, int *y1, int *x0,
                         int *x1, int planar)
{
    int num = img_jpeg_scale_num(info, want_h, want_w);
    if (planar)
        num = img_jpeg_planar_scale(num);
    const int dh = (info->h * num + 7) / 8, dw = (info->w * num + 7) / 8;
    dct_extent(info, num, box_h, box_w);
    resize_span(dh, 0.0, *box_h, rh, sy.src, sy.len, y0, y1);
    resize_span(dw, 0.0, *box_w, rw, sx.src, sx.len, x0, x1);
    return num;
}

/* The centre crop's JPEG path: decode (at the scale img_jpeg_decode
 * would take) only the rows and columns the resampler reads for the crop
 * window sy x sx of the rh x rw resize, into c->dec; *got says which. The
 * rows below are never decoded, those above only entropy-decoded, the
 * columns outside skip the IDCT, upsampling and colour conversion (12-30%
 * of the pixels of a Resize 256 + CenterCrop 224 on ImageNet-shaped
 * photos). 16 columns of margin each side keep the resampler off the
 * edge columns a cropped decode upsamples differently (jpeg_region.c), so
 * the crop is the same bytes as from the whole decode. */
static int decode_centre_region(img_ctx *c, const char *path, const img_info *info, int C,
                                int want_h, int want_w, int rh, int rw, img_span sy, img_span sx,
                                img_region *got, errbuf *e)
{
    int y0, y1, x0, x1;
    double box_h, box_w;
    const int num =
        centre_window(info, want_h, want_w, rh, rw, sy, sx, &box_h, &box_w, &y0, &y1, &x0, &x1, 0);
    img_region want = {.y = y0, .x = x0 - 16, .h = y1 - y0, .w = x1 - x0 + 32};
    return img_jpeg_decode_region(c, path, info, C, num, &want, got, e);
}

static int base_planar(img_ctx *c, const char *path, const img_info *info, int C, int want_h,
                       int want_w, int rh, int rw, img_span sy, img_span sx, int *n, errbuf *e);

/* img_load_base; a planar decode leaves *planes (> 0) resampled planes of
 * the base in c->pln instead of pixels (*base NULL). */
static int load_base(img_ctx *c, const char *path, const img_params *p, const uint8_t **base,
                     int *bh, int *bw, int *planes, errbuf *e)
{
    *planes = 0;
    errbuf pe;
    if (img_params_check(p, &pe) != 0)
        return errf(e, "%s: %s", path, pe.msg);
    if (p->rrc)
        return errf(e, "%s: a random-resized crop has no base image (it is cut from the file)",
                    path);
    img_info info;
    if (read_header(c, path, p->cold, &info, e) != 0)
        return -1;
    const int orient = orientation(p, &info), swap = orient >= 5;
    int uh, uw;
    upright_size(&info, orient, &uh, &uw);
    long long rh64, rw64;
    resized_size(p, uh, uw, &rh64, &rw64);
    if (rh64 > c->max_side || rw64 > c->max_side || (uint64_t)(rh64 * rw64) > c->max_pixels)
        return errf(e, "%s: image too large after resize: %lldx%lld", path, rh64, rw64);
    const int rh = (int)rh64, rw = (int)rw64, C = p->channels;
    const int resized = rh != info.h || rw != info.w;
    if (p->crop_h > 0 && !p->pad && (rh < p->crop_h || rw < p->crop_w))
        return errf(e, "%s: image is %dx%d%s, smaller than the %dx%d crop (--pad pads it)", path,
                    rh, rw, resized ? " after resize" : "", p->crop_h, p->crop_w);

    const int centre = p->crop_h > 0 && !p->random_crop;
    img_span sy = {0, rh, 0}, sx = {0, rw, 0};
    int oh = rh, ow = rw;
    if (centre) {
        img_span_centre(rh, p->crop_h, p->pad, &sy);
        img_span_centre(rw, p->crop_w, p->pad, &sx);
        oh = p->crop_h;
        ow = p->crop_w;
    }
    int dh, dw, rc;
    double box_h, box_w;  /* the picture's extent in the decoded pixels */
    img_region got = {0}; /* the decoded part of the picture (all of it but below) */
    const int m = p->decode == IMG_DECODE_AUTO ? 2 : 1,
              exact = p->full_decode || p->decode == IMG_DECODE_EXACT;
    const int want_h = exact ? 0 : m * (swap ? rw : rh), want_w = exact ? 0 : m * (swap ? rh : rw);
    /* --decode auto/fast of a stored-upright JPEG that is resized: YCbCr
     * (or grey) planes resampled each at its resolution (img_jpeg_complete:
     * a truncated file takes the whole decode, which names how) */
    if (info.format == IMG_FMT_JPEG && !exact && planar_fits(c, &info) && orient == 1 &&
        (centre || resized) && sy.len == oh && sx.len == ow && img_jpeg_complete(c)) {
        rc = base_planar(c, path, &info, C, want_h, want_w, rh, rw, sy, sx, planes, e);
        if (rc < 0)
            return -1;
        if (rc == 0) {
            *base = NULL;
            *bh = oh;
            *bw = ow;
            return 0;
        }
        *planes = 0; /* no planar layout: the RGB decode */
    }
    double dec0 = now_sec();
    if (info.format == IMG_FMT_JPEG) {
        /* (a file without its end-of-image marker takes the whole decode,
         * which names how it is truncated) */
        if (centre && orient == 1 && sy.len == oh && sx.len == ow && img_jpeg_complete(c)) {
            rc = decode_centre_region(c, path, &info, C, want_h, want_w, rh, rw, sy, sx, &got, e);
            dh = got.sh, dw = got.sw;
        } else {
            rc = img_jpeg_decode(c, path, &info, C, want_h, want_w, &dh, &dw, e);
        }
        dct_extent(&info, img_jpeg_scale_num(&info, want_h, want_w), &box_h, &box_w);
    } else {
        rc = decode_other(c, path, &info, C, &dh, &dw, e);
        box_h = dh, box_w = dw;
    }
    c->decode_s += now_sec() - dec0;
    if (rc != 0)
        return rc == IMG_ENOMEM ? IMG_ENOMEM : -1;
    phase_end(c, IMG_PH_DECODE);
    double oy = 0, ox = 0; /* where the picture starts in the decoded pixels */
    if (got.h == 0) {      /* the whole picture */
        turn_upright(c, C, orient, &dh, &dw);
        if (swap) {
            double t = box_h;
            box_h = box_w, box_w = t;
        }
        /* the part-pixel of a DCT-scaled decode is at the end of each stored
         * axis; an orientation that reverses an axis puts it at the start */
        if (orient == 3 || orient == 4 || orient == 7 || orient == 8)
            oy = dh - box_h;
        if (orient == 2 || orient == 3 || orient == 6 || orient == 7)
            ox = dw - box_w;
        got = (img_region){.y = 0, .x = 0, .h = dh, .w = dw, .sh = dh, .sw = dw};
    }

    const int whole = box_h == dh && box_w == dw;
    if (!centre && whole && dh == rh && dw == rw) { /* the decoded image is the base */
        *base = c->dec;
        *bh = dh;
        *bw = dw;
        return 0;
    }
    size_t row = (size_t)ow * (size_t)C;
    uint8_t *out = img_grow(&c->out, &c->out_cap, (size_t)oh * row);
    if (sy.len < oh || sx.len < ow)
        memset(out, 0, (size_t)oh * row);
    /* resizes only the rows and columns the crop keeps (copies when the
     * decoded image already has the target size) */
    resize_box_window(&c->rs, out + (size_t)sy.dst * row + (size_t)sx.dst * (size_t)C, row, rh, rw,
                      sy.src, sx.src, sy.len, sx.len, c->dec, (size_t)got.w * (size_t)C, got.h,
                      got.w, C, oy - got.y, ox - got.x, box_h, box_w);
    phase_end(c, IMG_PH_RESAMPLE);
    *base = out;
    *bh = oh;
    *bw = ow;
    return 0;
}

/* The n resampled planes in c->pln (oh x ow each) as C-channel HWC at
 * out: converted to RGB where there are three, luma copied otherwise. */
static void planes_hwc(img_ctx *c, uint8_t *out, int oh, int ow, int n, int C)
{
    const size_t np = (size_t)oh * (size_t)ow;
    const uint8_t *rs = c->pln;
    uint8_t *row = img_grow(&c->tmp, &c->tmp_cap, 3 * (size_t)ow);
    for (int i = 0; i < oh; i++) {
        const size_t o = (size_t)i * (size_t)ow;
        uint8_t *d = out + o * (size_t)C;
        if (n == 3) {
            img_ycc_row(row, row + ow, row + 2 * (size_t)ow, rs + o, rs + np + o, rs + 2 * np + o,
                        ow, 0);
            for (int x = 0; x < ow; x++)
                for (int ch = 0; ch < 3; ch++)
                    d[(size_t)x * 3 + (size_t)ch] = row[(size_t)ch * (size_t)ow + (size_t)x];
        } else {
            for (int x = 0; x < ow; x++)
                for (int ch = 0; ch < C; ch++)
                    d[(size_t)x * (size_t)C + (size_t)ch] = rs[o + (size_t)x];
        }
    }
}

/* The n resampled planes in c->pln (oh x ow each) as C-channel CHW at
 * out, mirrored when flip. */
static void planes_chw(img_ctx *c, uint8_t *out, int oh, int ow, int n, int C, int flip);

int img_load_base(img_ctx *c, const char *path, const img_params *p, const uint8_t **base, int *bh,
                  int *bw, errbuf *e)
{
    int planes, rc = load_base(c, path, p, base, bh, bw, &planes, e);
    if (rc != 0)
        return rc;
    if (planes) {
        uint8_t *out =
            img_grow(&c->out, &c->out_cap, (size_t)*bh * (size_t)*bw * (size_t)p->channels);
        planes_hwc(c, out, *bh, *bw, planes, p->channels);
        *base = out;
    }
    return 0;
}

/* ---------------------------------------------------------------- random-resized crop */

static double round_half_even(double v)
{
    double f = floor(v), d = v - f;
    if (d > 0.5 || (d == 0.5 && fmod(f, 2.0) != 0.0))
        return f + 1.0;
    return f;
}

void img_rrc_box(int h, int w, const img_params *p, rng *r, int *by, int *bx, int *bh, int *bw)
{
    double smin = p->rrc_scale[1] > 0 ? p->rrc_scale[0] : 0.08,
           smax = p->rrc_scale[1] > 0 ? p->rrc_scale[1] : 1.0;
    double rmin = p->rrc_ratio[1] > 0 ? p->rrc_ratio[0] : 3.0 / 4.0;
    double rmax = p->rrc_ratio[1] > 0 ? p->rrc_ratio[1] : 4.0 / 3.0;
    double area = (double)h * (double)w, lr0 = log(rmin), lr1 = log(rmax);
    for (int t = 0; t < 10; t++) {
        double target = area * (smin + (smax - smin) * rng_uniform_d(r));
        double ar = exp(lr0 + (lr1 - lr0) * rng_uniform_d(r));
        double cw = round_half_even(sqrt(target * ar)), ch = round_half_even(sqrt(target / ar));
        if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
            *bh = (int)ch;
            *bw = (int)cw;
            *by = (int)rng_below(r, (uint32_t)(h - *bh + 1));
            *bx = (int)rng_below(r, (uint32_t)(w - *bw + 1));
            return;
        }
    }
    double in_ratio = (double)w / (double)h;
    if (in_ratio < rmin) {
        *bw = w;
        *bh = (int)round_half_even(w / rmin);
    } else if (in_ratio > rmax) {
        *bh = h;
        *bw = (int)round_half_even(h * rmax);
    } else {
        *bw = w;
        *bh = h;
    }
    *bh = *bh < 1 ? 1 : *bh > h ? h : *bh;
    *bw = *bw < 1 ? 1 : *bw > w ? w : *bw;
    *by = (h - *bh) / 2;
    *bx = (w - *bw) / 2;
}

/* The box (by, bx, bh, bw) of the file, resampled to out_h x out_w HWC in
 * c->out: from a DCT-scaled decode of just that region for a JPEG, from a
 * full decode otherwise (and with full_decode, the unfused reference). */
static int rrc_resample(img_ctx *c, const char *path, const img_info *info, const img_params *p,
                        int by, int bx, int bh, int bw, int out_h, int out_w, errbuf *e)
{
    const int C = p->channels;
    uint8_t *dst = img_grow(&c->out, &c->out_cap, (size_t)out_h * (size_t)out_w * (size_t)C);
    const int orient = orientation(p, info);
    /* the fused decode cuts the stored image; a turned one takes the full
     * decode (the exact path), turned upright before the crop */
    if (info->format == IMG_FMT_JPEG && !p->full_decode && orient == 1) {
        int num = 8, m = p->decode == IMG_DECODE_FAST ? 1 : 2;
        if (p->decode != IMG_DECODE_EXACT)
            img_jpeg_scale_for(bw, bh, m * out_h, m * out_w, &num);
        const double f = num / 8.0;
        img_region want, got;
        /* 16 columns more each side: a cropped decode's first and last
         * columns are upsampled (4:2:x chroma) as if they were the image's
         * edge; kept out of the resampler's reach they change nothing */
        want.y = (int)floor(by * f);
        want.x = (int)floor(bx * f) - 16;
        want.h = (int)ceil((by + bh) * f) - want.y;
        want.w = (int)ceil((bx + bw) * f) + 16 - want.x;
        double t0 = now_sec();
        int rc = img_jpeg_decode_region(c, path, info, C, num, &want, &got, e);
        c->decode_s += now_sec() - t0;
        phase_end(c, IMG_PH_DECODE);
        if (rc != 0)
            return -1;
        double y0 = by * f - got.y, x0 = bx * f - got.x, hh = bh * f, ww = bw * f;
        if (y0 + hh > got.h) /* the last scaled row rounds up; stay inside */
            hh = got.h - y0;
        if (x0 + ww > got.w)
            ww = got.w - x0;
        resize_box(&c->rs, dst, out_h, out_w, c->dec, (size_t)got.w * (size_t)C, got.h, got.w, C,
                   y0, x0, hh, ww);
        phase_end(c, IMG_PH_RESAMPLE);
        return 0;
    }
    double t0 = now_sec();
    int dh, dw,
        rc = info->format == IMG_FMT_JPEG ? img_jpeg_decode(c, path, info, C, 0, 0, &dh, &dw, e)
                                          : decode_other(c, path, info, C, &dh, &dw, e);
    c->decode_s += now_sec() - t0;
    if (rc != 0)
        return rc == IMG_ENOMEM ? IMG_ENOMEM : -1;
    turn_upright(c, C, orient, &dh, &dw);
    phase_end(c, IMG_PH_DECODE);
    resize_box(&c->rs, dst, out_h, out_w, c->dec, (size_t)dw * (size_t)C, dh, dw, C, by, bx, bh,
               bw);
    phase_end(c, IMG_PH_RESAMPLE);
    return 0;
}

void img_ycc_row(uint8_t *r, uint8_t *g, uint8_t *b, const uint8_t *y, const uint8_t *cb,
                 const uint8_t *cr, int n, int flip)
{
    if (n >= 32 && img_avx2()) {
        img_ycc_row_avx2(r, g, b, y, cb, cr, n, flip);
        return;
    }
    /* jdcolor.c's tables as arithmetic: FIX(x) = round(x * 2^16) */
    for (int i = 0; i < n; i++) {
        const int32_t l = y[i], u = cb[i] - 128, v = cr[i] - 128;
        int32_t R = l + ((91881 * v + 32768) >> 16);
        int32_t G = l + ((-22554 * u - 46802 * v + 32768) >> 16);
        int32_t B = l + ((116130 * u + 32768) >> 16);
        const int o = flip ? n - 1 - i : i;
        r[o] = (uint8_t)(R < 0 ? 0 : R > 255 ? 255 : R);
        g[o] = (uint8_t)(G < 0 ? 0 : G > 255 ? 255 : G);
        b[o] = (uint8_t)(B < 0 ? 0 : B > 255 ? 255 : B);
    }
}

/* n bytes of s to d, mirrored when flip. */
static void copy_row(uint8_t *d, const uint8_t *s, int n, int flip)
{
    if (!flip) {
        memcpy(d, s, (size_t)n);
        return;
    }
    for (int i = 0; i < n; i++)
        d[n - 1 - i] = s[i];
}

/* The triangle's radius, in samples, for a plane of `ratio` samples per
 * pixel along an axis the luma shrinks by `scale` (0: the resampler's own,
 * max(scale, 1)). The exact path upsamples 2x-subsampled chroma by linear
 * interpolation (libjpeg's fancy upsampling: a triangle of radius 2
 * pixels) and then resamples with a triangle of radius max(scale, 1)
 * pixels; one triangle of the summed variance (r^2 / 6 each) stands in
 * for both, in half-resolution samples: sqrt(1 + max(scale, 1)^2 / 4).
 * Other ratios keep the resampler's (4x: libjpeg replicates). */
static double chroma_radius(double ratio, double scale)
{
    if (ratio != 0.5)
        return 0.0;
    const double s = scale > 1.0 ? scale : 1.0;
    return sqrt(1.0 + s * s / 4.0);
}

/* The random-resized crop of the box (by, bx, bh, bw) from a planar
 * decode of it at n/8 (jpeg_region.c): luma and chroma resampled each at
 * its own resolution, then converted to RGB at the output's (or luma
 * alone for one channel, as libjpeg makes grey of colour), written as CHW
 * with the flip, then the jitter. 1 without decoding when the file has no
 * planar layout here. */
static int rrc_planar(img_ctx *c, const char *path, const img_info *info, const img_params *p,
                      rng *r, int by, int bx, int bh, int bw, int num, uint8_t *out, int out_h,
                      int out_w, errbuf *e)
{
    const double f = num / 8.0;
    img_region want, got;
    want.y = (int)floor(by * f);
    want.x = (int)floor(bx * f);
    want.h = (int)ceil((by + bh) * f) - want.y;
    want.w = (int)ceil((bx + bw) * f) - want.x;
    img_planes pl;
    double t0 = now_sec();
    int rc = img_jpeg_decode_planes(c, path, info, num, &want, &got, &pl, e);
    c->decode_s += now_sec() - t0;
    phase_end(c, IMG_PH_DECODE);
    if (rc != 0)
        return rc;
    const int C = p->channels, n = C == 1 ? 1 : pl.n;
    const size_t np = (size_t)out_h * (size_t)out_w;
    uint8_t *rs = img_grow(&c->pln, &c->pln_cap, (size_t)n * np);
    for (int k = 0; k < n; k++) {
        double y0 = (by * f - got.y) * pl.fy[k], x0 = (bx * f - got.x) * pl.fx[k];
        double hh = bh * f * pl.fy[k], ww = bw * f * pl.fx[k];
        if (y0 + hh > pl.h[k]) /* the last scaled row rounds up; stay inside */
            hh = pl.h[k] - y0;
        if (x0 + ww > pl.w[k])
            ww = pl.w[k] - x0;
        resize_plane(k ? &c->rs_c : &c->rs, rs + (size_t)k * np, (size_t)out_w, out_h, out_w,
                     pl.p[k], pl.stride[k], pl.h[k], pl.w[k], y0, x0, hh, ww,
                     chroma_radius(pl.fy[k], bh * f / out_h),
                     chroma_radius(pl.fx[k], bw * f / out_w));
    }
    phase_end(c, IMG_PH_RESAMPLE);
    planes_chw(c, out, out_h, out_w, n, C, img_flip_draw(p, r));
    img_jitter_chw(out, out_h, out_w, p, r);
    phase_end(c, IMG_PH_STORE);
    return 0;
}

static void planes_chw(img_ctx *c, uint8_t *out, int oh, int ow, int n, int C, int flip)
{
    const size_t np = (size_t)oh * (size_t)ow;
    const uint8_t *rs = c->pln;
    for (int i = 0; i < oh; i++) {
        const size_t o = (size_t)i * (size_t)ow;
        if (n == 3)
            img_ycc_row(out + o, out + np + o, out + 2 * np + o, rs + o, rs + np + o,
                        rs + 2 * np + o, ow, flip);
        else
            for (int ch = 0; ch < C; ch++)
                copy_row(out + (size_t)ch * np + o, rs + o, ow, flip);
    }
}

/* The planar base's margin, in decoded luma pixels each side, beyond what
 * the luma's taps read: the chroma's wider triangle (chroma_radius) and a
 * 4:1:1 plane's one-sample radius reach further. */
#define PLANAR_MARGIN 8

/* The window sy x sx of the rh x rw resize of a YCbCr or grey JPEG (the
 * centre crop, or the whole resize) through the planar decode: the region
 * the window's taps read (decode_centre_region's, PLANAR_MARGIN wider)
 * decoded as planes at the scale the RGB path takes, each plane resampled
 * at its own resolution over the whole picture's box (as the exact path
 * resizes the whole image and then crops) into c->pln: *n planes of
 * sy.len x sx.len (luma alone for one channel). 1 without decoding when
 * the file has no planar layout here. */
static int base_planar(img_ctx *c, const char *path, const img_info *info, int C, int want_h,
                       int want_w, int rh, int rw, img_span sy, img_span sx, int *n, errbuf *e)
{
    int y0, y1, x0, x1;
    double box_h, box_w;
    const int num =
        centre_window(info, want_h, want_w, rh, rw, sy, sx, &box_h, &box_w, &y0, &y1, &x0, &x1, 1);
    const img_region want = {.y = y0 - PLANAR_MARGIN,
                             .x = x0 - PLANAR_MARGIN,
                             .h = y1 - y0 + 2 * PLANAR_MARGIN,
                             .w = x1 - x0 + 2 * PLANAR_MARGIN};
    img_region got;
    img_planes pl;
    double t0 = now_sec();
    int rc = img_jpeg_decode_planes(c, path, info, num, &want, &got, &pl, e);
    c->decode_s += now_sec() - t0;
    phase_end(c, IMG_PH_DECODE);
    if (rc != 0)
        return rc;
    *n = C == 1 ? 1 : pl.n;
    const size_t np = (size_t)sy.len * (size_t)sx.len;
    uint8_t *rs = img_grow(&c->pln, &c->pln_cap, (size_t)*n * np);
    for (int k = 0; k < *n; k++)
        resize_plane_window(k ? &c->rs_c : &c->rs, rs + (size_t)k * np, (size_t)sx.len, rh, rw,
                            sy.src, sx.src, sy.len, sx.len, pl.p[k], pl.stride[k], pl.h[k], pl.w[k],
                            -got.y * pl.fy[k], -got.x * pl.fx[k], box_h * pl.fy[k],
                            box_w * pl.fx[k], chroma_radius(pl.fy[k], box_h / rh),
                            chroma_radius(pl.fx[k], box_w / rw));
    phase_end(c, IMG_PH_RESAMPLE);
    return 0;
}

static int load_rrc(img_ctx *c, const char *path, const img_params *p, rng *r, uint8_t *out,
                    int out_h, int out_w, errbuf *e)
{
    if (out_h != p->crop_h || out_w != p->crop_w)
        return errf(e, "%s: output is %dx%d but the crop is %dx%d", path, out_h, out_w, p->crop_h,
                    p->crop_w);
    img_info info;
    if (read_header(c, path, p->cold, &info, e) != 0)
        return -1;
    int uh, uw, by, bx, bh, bw;
    upright_size(&info, orientation(p, &info), &uh, &uw);
    img_rrc_box(uh, uw, p, r, &by, &bx, &bh, &bw);
    if (info.format == IMG_FMT_JPEG && !p->full_decode && orientation(p, &info) == 1 &&
        p->decode != IMG_DECODE_EXACT && planar_fits(c, &info)) {
        int num, m = p->decode == IMG_DECODE_FAST ? 1 : 2;
        img_jpeg_scale_for(bw, bh, m * out_h, m * out_w, &num);
        num = img_jpeg_planar_scale(num);
        int rc = rrc_planar(c, path, &info, p, r, by, bx, bh, bw, num, out, out_h, out_w, e);
        if (rc <= 0)
            return rc;
    }
    int rc = rrc_resample(c, path, &info, p, by, bx, bh, bw, out_h, out_w, e);
    if (rc != 0)
        return rc;
    img_params flip_only = *p;
    flip_only.rrc = 0;
    flip_only.random_crop = 0;
    errbuf ae;
    if (img_augment(out, out_h, out_w, c->out, out_h, out_w, &flip_only, r, &ae) != 0)
        return errf(e, "%s: %s", path, ae.msg);
    phase_end(c, IMG_PH_STORE);
    return 0;
}

int img_load(img_ctx *c, const char *path, const img_params *p, rng *r, uint8_t *out, int out_h,
             int out_w, errbuf *e)
{
    if (p->rrc) {
        errbuf pe;
        if (img_params_check(p, &pe) != 0)
            return errf(e, "%s: %s", path, pe.msg);
        return load_rrc(c, path, p, r, out, out_h, out_w, e);
    }
    const uint8_t *base;
    int bh, bw, planes, rc = load_base(c, path, p, &base, &bh, &bw, &planes, e);
    if (rc != 0)
        return rc;
    if (planes && !p->random_crop && out_h == bh && out_w == bw) {
        /* img_augment's draws and bytes, straight from the planes */
        planes_chw(c, out, out_h, out_w, planes, p->channels, img_flip_draw(p, r));
        img_jitter_chw(out, out_h, out_w, p, r);
        phase_end(c, IMG_PH_STORE);
        return 0;
    }
    if (planes) {
        uint8_t *hwc =
            img_grow(&c->out, &c->out_cap, (size_t)bh * (size_t)bw * (size_t)p->channels);
        planes_hwc(c, hwc, bh, bw, planes, p->channels);
        base = hwc;
    }
    errbuf ae;
    if (img_augment(out, out_h, out_w, base, bh, bw, p, r, &ae) != 0)
        return errf(e, "%s: %s", path, ae.msg);
    phase_end(c, IMG_PH_STORE);
    return 0;
}

long img_read_only(img_ctx *c, const char *path, const img_params *p, errbuf *e)
{
    double t0 = now_sec();
    long n = read_file(c, path, p ? p->cold : 0, e);
    c->read_s += now_sec() - t0;
    return n;
}

void img_ctx_phases(const img_ctx *c, double s[IMG_PHASES])
{
    for (int k = 0; k < IMG_PHASES; k++)
        s[k] = c->phase_s[k];
}

void img_ctx_times(const img_ctx *c, double *read_s, double *decode_s)
{
    *read_s = c->read_s;
    *decode_s = c->decode_s;
}

static int probe(const img_src *src, const char *path, int exif, int *w, int *h, int *channels,
                 errbuf *e)
{
    img_ctx *c = img_ctx_create();
    c->src = src;
    img_info info;
    int rc = read_header(c, path, 0, &info, e);
    if (rc == 0) {
        upright_size(&info, exif ? info.orient : 1, h, w);
        *channels = info.channels;
    }
    img_ctx_free(c);
    return rc;
}

int img_probe(const char *path, int exif, int *w, int *h, int *channels, errbuf *e)
{
    return probe(NULL, path, exif, w, h, channels, e);
}

/* ---------------------------------------------------------------- byte ranges */

int img_probe_src(const img_src *s, int exif, int *w, int *h, int *channels, errbuf *e)
{
    return probe(s, s->name, exif, w, h, channels, e);
}

int img_load_base_src(img_ctx *c, const img_src *s, const img_params *p, const uint8_t **base,
                      int *bh, int *bw, errbuf *e)
{
    c->src = s;
    int rc = img_load_base(c, s->name, p, base, bh, bw, e);
    c->src = NULL;
    return rc;
}

int img_load_src(img_ctx *c, const img_src *s, const img_params *p, rng *r, uint8_t *out, int out_h,
                 int out_w, errbuf *e)
{
    c->src = s;
    int rc = img_load(c, s->name, p, r, out, out_h, out_w, e);
    c->src = NULL;
    return rc;
}

long img_read_only_src(img_ctx *c, const img_src *s, const img_params *p, errbuf *e)
{
    c->src = s;
    long n = img_read_only(c, s->name, p, e);
    c->src = NULL;
    return n;
}
