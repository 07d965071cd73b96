/* images.c — see images.h. */
#define _GNU_SOURCE
#include "tests/support/images.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>
#include <zlib.h>

#include <stb/stb_image_write.h>

#include "common/rng.h"
#include "image/internal.h" /* img_ctx_set_planar */
#include "tests/support/helpers.h"

uint8_t *ti_picture(int h, int w, int c, uint64_t seed)
{
    uint8_t *px = malloc((size_t)h * w * c);
    rng r = rng_keyed(seed, RNG_TOOL, 77, 0);
    float cx = w * (0.3f + 0.4f * rng_uniform(&r)), cy = h * (0.3f + 0.4f * rng_uniform(&r));
    float rad = (h < w ? h : w) * (0.2f + 0.2f * rng_uniform(&r));
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            float in = ((x - cx) * (x - cx) + (y - cy) * (y - cy) < rad * rad) ? 1.0f : 0.0f;
            for (int k = 0; k < c; k++) {
                float v = 40 + 150.0f * x / w * (k != 1) + 120.0f * y / h * (k != 0) +
                          60 * in * (k + 1) / 3;
                v += (float)(rng_next(&r) % 9) - 4;
                px[((size_t)y * w + x) * c + k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
    return px;
}

uint8_t *ti_noise(size_t n, uint64_t seed)
{
    uint8_t *p = malloc(n ? n : 1);
    rng r = rng_keyed(seed, RNG_TOOL, 78, 0);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(rng_next(&r) >> 56);
    return p;
}

uint8_t *ti_jpeg(const uint8_t *px, int h, int w, int pf, int subsamp, int quality, int flags,
                 size_t *len)
{
    tjhandle tj = tjInitCompress();
    unsigned char *jpeg = NULL;
    unsigned long jlen = 0;
    cr_assert_eq(tjCompress2(tj, px, w, 0, h, pf, &jpeg, &jlen, subsamp, quality, flags), 0, "%s",
                 tjGetErrorStr2(tj));
    uint8_t *out = malloc(jlen);
    memcpy(out, jpeg, jlen);
    tjFree(jpeg);
    tjDestroy(tj);
    *len = jlen;
    return out;
}

char *ti_write_jpeg(const char *dir, const char *name, const uint8_t *px, int h, int w, int pf,
                    int subsamp, int quality, int flags)
{
    size_t len;
    uint8_t *j = ti_jpeg(px, h, w, pf, subsamp, quality, flags, &len);
    char *path = write_file(dir, name, j, len);
    free(j);
    return path;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static size_t chunk(uint8_t *out, const char *type, const uint8_t *data, uint32_t n)
{
    put32(out, n);
    memcpy(out + 4, type, 4);
    if (n)
        memcpy(out + 8, data, n);
    put32(out + 8 + n, (uint32_t)crc32(0, out + 4, 4 + n));
    return 12 + n;
}

uint8_t *ti_png_bytes(int w, int h, int depth, int color_type, const uint8_t *rows,
                      const uint8_t *plte, int plte_n, size_t *len)
{
    static const int comps[7] = {1, 0, 3, 1, 2, 0, 4};
    size_t rowb = ((size_t)w * comps[color_type] * depth + 7) / 8;
    size_t rawn = (rowb + 1) * h;
    uint8_t *raw = malloc(rawn);
    for (int y = 0; y < h; y++) {
        raw[y * (rowb + 1)] = 0; /* filter: none */
        memcpy(raw + y * (rowb + 1) + 1, rows + y * rowb, rowb);
    }
    uLongf zn = compressBound(rawn);
    uint8_t *z = malloc(zn);
    cr_assert_eq(compress2(z, &zn, raw, rawn, 6), Z_OK);
    uint8_t *png = malloc(8 + 25 + (size_t)plte_n * 3 + 12 + zn + 12 + 12);
    size_t n = 8;
    memcpy(png, "\x89PNG\r\n\x1a\n", 8);
    uint8_t ihdr[13];
    put32(ihdr, (uint32_t)w);
    put32(ihdr + 4, (uint32_t)h);
    ihdr[8] = (uint8_t)depth;
    ihdr[9] = (uint8_t)color_type;
    ihdr[10] = ihdr[11] = ihdr[12] = 0;
    n += chunk(png + n, "IHDR", ihdr, 13);
    if (plte)
        n += chunk(png + n, "PLTE", plte, (uint32_t)plte_n * 3);
    n += chunk(png + n, "IDAT", z, (uint32_t)zn);
    n += chunk(png + n, "IEND", NULL, 0);
    free(raw);
    free(z);
    *len = n;
    return png;
}

char *ti_write_png_raw(const char *dir, const char *name, int w, int h, int depth, int color_type,
                       const uint8_t *rows, const uint8_t *plte, int plte_n)
{
    size_t len;
    uint8_t *png = ti_png_bytes(w, h, depth, color_type, rows, plte, plte_n, &len);
    char *path = write_file(dir, name, png, len);
    free(png);
    return path;
}

char *ti_write_png(const char *dir, const char *name, const uint8_t *px, int h, int w, int c)
{
    char *path = path_join(dir, name);
    cr_assert(stbi_write_png(path, w, h, c, px, w * c), "stbi_write_png %s", path);
    return path;
}

/* LZW without compression: every pixel is its own 9-bit code, with a clear
 * code often enough that the decoder's code size never grows. */
char *ti_write_gif(const char *dir, const char *name, const uint8_t *idx, int h, int w,
                   const uint8_t palette[768])
{
    size_t npix = (size_t)w * h, cap = 64 + 768 + npix * 2 + npix / 100 + 64;
    uint8_t *g = calloc(1, cap), *bits = calloc(1, npix * 2 + 64);
    size_t n = 0, nbits = 0;
    memcpy(g, "GIF89a", 6);
    n = 6;
    g[n++] = (uint8_t)w, g[n++] = (uint8_t)(w >> 8), g[n++] = (uint8_t)h,
    g[n++] = (uint8_t)(h >> 8);
    g[n++] = 0xF7; /* global colour table, 256 entries */
    g[n++] = 0;
    g[n++] = 0;
    memcpy(g + n, palette, 768);
    n += 768;
    g[n++] = 0x2C; /* image descriptor at 0,0, w x h, no local table */
    g[n++] = 0, g[n++] = 0, g[n++] = 0, g[n++] = 0;
    g[n++] = (uint8_t)w, g[n++] = (uint8_t)(w >> 8), g[n++] = (uint8_t)h,
    g[n++] = (uint8_t)(h >> 8);
    g[n++] = 0;
    g[n++] = 8; /* LZW minimum code size */
#define EMIT(code)                                                                                 \
    do {                                                                                           \
        for (int b_ = 0; b_ < 9; b_++, nbits++)                                                    \
            if ((code) >> b_ & 1)                                                                  \
                bits[nbits / 8] |= (uint8_t)(1u << (nbits % 8));                                   \
    } while (0)
    for (size_t i = 0; i < npix; i++) {
        if (i % 200 == 0)
            EMIT(256u);
        EMIT((unsigned)idx[i]);
    }
    EMIT(257u);
#undef EMIT
    size_t nbytes = (nbits + 7) / 8;
    for (size_t off = 0; off < nbytes; off += 255) {
        size_t k = nbytes - off < 255 ? nbytes - off : 255;
        g[n++] = (uint8_t)k;
        memcpy(g + n, bits + off, k);
        n += k;
    }
    g[n++] = 0;    /* block terminator */
    g[n++] = 0x3B; /* trailer */
    char *path = write_file(dir, name, g, n);
    free(g);
    free(bits);
    return path;
}

char *ti_write_psd(const char *dir, const char *name, const uint8_t *rgb, int h, int w, int depth)
{
    size_t npix = (size_t)w * h, bps = (size_t)depth / 8, n = 0;
    uint8_t *p = calloc(1, 64 + npix * 3 * bps);
    memcpy(p, "8BPS", 4);
    p[5] = 1; /* version */
    n = 12;
    p[n++] = 0, p[n++] = 3; /* channels */
    put32(p + n, (uint32_t)h), n += 4;
    put32(p + n, (uint32_t)w), n += 4;
    p[n++] = 0, p[n++] = (uint8_t)depth;
    p[n++] = 0, p[n++] = 3; /* RGB */
    n += 4 + 4 + 4;         /* empty colour mode data, resources, layers */
    p[n++] = 0, p[n++] = 0; /* raw */
    for (int ch = 0; ch < 3; ch++)
        for (size_t i = 0; i < npix; i++) {
            p[n++] = rgb[i * 3 + ch];
            if (bps == 2)
                p[n++] = rgb[i * 3 + ch];
        }
    char *path = write_file(dir, name, p, n);
    free(p);
    return path;
}

static void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16),
    p[3] = (uint8_t)(v >> 24);
}

char *ti_write_bmp8(const char *dir, const char *name, const uint8_t *idx, int h, int w,
                    const uint8_t *pal, int n, int top_down)
{
    size_t stride = ((size_t)w + 3) & ~(size_t)3, off = 14 + 40 + 4 * (size_t)n;
    size_t total = off + stride * h;
    uint8_t *b = calloc(1, total);
    b[0] = 'B', b[1] = 'M';
    put_le32(b + 2, (uint32_t)total);
    put_le32(b + 10, (uint32_t)off);
    put_le32(b + 14, 40);
    put_le32(b + 18, (uint32_t)w);
    put_le32(b + 22, (uint32_t)(top_down ? -h : h));
    b[26] = 1, b[28] = 8;
    put_le32(b + 46, (uint32_t)n);
    for (int i = 0; i < n; i++)
        b[54 + 4 * i] = pal[3 * i + 2], b[55 + 4 * i] = pal[3 * i + 1], b[56 + 4 * i] = pal[3 * i];
    for (int y = 0; y < h; y++) {
        int row = top_down ? y : h - 1 - y;
        memcpy(b + off + stride * row, idx + (size_t)y * w, (size_t)w);
    }
    char *path = write_file(dir, name, b, total);
    free(b);
    return path;
}

char *ti_write_pnm(const char *dir, const char *name, const uint8_t *px, int h, int w, int c,
                   int maxval)
{
    size_t npx = (size_t)w * h * c, bps = maxval > 255 ? 2 : 1;
    uint8_t *p = malloc(64 + npx * bps);
    int n = snprintf((char *)p, 64, "P%c\n%d %d\n%d\n", c == 1 ? '5' : '6', w, h, maxval);
    for (size_t i = 0; i < npx; i++) {
        p[n++] = px[i];
        if (bps == 2)
            p[n++] = px[i];
    }
    char *path = write_file(dir, name, p, (size_t)n);
    free(p);
    return path;
}

uint8_t *ti_tj_decode(const char *path, int pf, int *h, int *w)
{
    size_t len;
    char *j = read_whole_file(path, &len, NULL);
    cr_assert_not_null(j);
    tjhandle tj = tjInitDecompress();
    int sub, cs;
    cr_assert_eq(tjDecompressHeader3(tj, (uint8_t *)j, len, w, h, &sub, &cs), 0);
    uint8_t *px = malloc((size_t)*w * *h * tjPixelSize[pf]);
    cr_assert_eq(tjDecompress2(tj, (uint8_t *)j, len, px, *w, 0, *h, pf, 0), 0, "%s",
                 tjGetErrorStr2(tj));
    tjDestroy(tj);
    free(j);
    return px;
}

uint8_t *ti_chw(const uint8_t *hwc, int h, int w, int c)
{
    uint8_t *o = malloc((size_t)h * w * c);
    for (int k = 0; k < c; k++)
        for (int i = 0; i < h * w; i++)
            o[(size_t)k * h * w + i] = hwc[(size_t)i * c + k];
    return o;
}

uint8_t *ti_base(const char *path, const img_params *p, int *bh, int *bw, errbuf *e)
{
    return ti_base_planar(path, p, 1, bh, bw, e);
}

uint8_t *ti_base_planar(const char *path, const img_params *p, int planar, int *bh, int *bw,
                        errbuf *e)
{
    img_ctx *c = img_ctx_create();
    img_ctx_set_planar(c, planar);
    const uint8_t *b;
    uint8_t *copy = NULL;
    if (img_load_base(c, path, p, &b, bh, bw, e) == 0) {
        size_t n = (size_t)*bh * *bw * p->channels;
        copy = malloc(n);
        memcpy(copy, b, n);
    }
    img_ctx_free(c);
    return copy;
}

double ti_mean_diff(const uint8_t *a, const uint8_t *b, size_t n, int *max)
{
    double s = 0;
    *max = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)a[i] - (int)b[i]);
        s += d;
        *max = d > *max ? d : *max;
    }
    return n ? s / (double)n : 0;
}

void ti_hist_add(ti_hist *d, const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d->hist[abs((int)a[i] - (int)b[i])]++;
    d->n += n;
}

double ti_hist_mean(const ti_hist *d, int *p99, int *max)
{
    double sum = 0;
    size_t acc = 0;
    *p99 = -1, *max = 0;
    for (int x = 0; x < 256; x++) {
        sum += (double)x * (double)d->hist[x];
        acc += d->hist[x];
        if (*p99 < 0 && acc >= d->n - d->n / 100)
            *p99 = x;
        if (d->hist[x])
            *max = x;
    }
    return d->n ? sum / (double)d->n : 0;
}
