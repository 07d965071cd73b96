/* jpeg_set.c — an E1-shaped JPEG data set built from real Fashion-MNIST items.
 *
 *   jpeg_set [--n N] [--val M] [--out DIR] [--seed S] [--quality Q]
 *            [--width W] [--height H] [--src DIR]
 *
 * Each image is W x H (default 512 x 384) RGB: a textured, noisy background
 * in two random colours, with one Fashion-MNIST item upscaled (bilinear),
 * colourised and placed at a random position; JPEG quality Q (default 90,
 * 4:2:0). The item's class is the label, so the set stays learnable, and
 * the noise gives realistic file sizes (tens of KB) and decode costs.
 * Output: DIR/images/NNNNNN.jpg, DIR/train.csv (N rows from the training
 * split) and, with --val M, DIR/val.csv (M rows from the test split).
 * Everything depends only on the arguments: same seed, same bytes.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "common/rng.h"
#include "common/util.h"
#include "tools/idx.h"

typedef struct gen {
    int w, h, quality;
    uint64_t seed;
    uint8_t *rgb;
    float *sx, *sy, *sd;
    tjhandle tj;
} gen;

static uint8_t clamp_u8(float v) { return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)(v + 0.5f); }

/* Background: two colours blended by a sum of sinusoids along x, y and the
 * diagonal, plus per-pixel noise. */
static void background(gen *g, rng *r)
{
    float c0[3], c1[3];
    for (int k = 0; k < 3; k++) {
        c0[k] = 40 + 180 * rng_uniform(r);
        c1[k] = 40 + 180 * rng_uniform(r);
    }
    const float two_pi = 6.2831853f;
    float fx = 1 + 9 * rng_uniform(r), fy = 1 + 9 * rng_uniform(r), fd = 2 + 14 * rng_uniform(r);
    float px = two_pi * rng_uniform(r), py = two_pi * rng_uniform(r), pd = two_pi * rng_uniform(r);
    for (int x = 0; x < g->w; x++)
        g->sx[x] = sinf(two_pi * fx * (float)x / (float)g->w + px);
    for (int y = 0; y < g->h; y++)
        g->sy[y] = sinf(two_pi * fy * (float)y / (float)g->h + py);
    for (int d = 0; d < g->w + g->h; d++)
        g->sd[d] = sinf(two_pi * fd * (float)d / (float)(g->w + g->h) + pd);
    float amp = 6 + 14 * rng_uniform(r);
    for (int y = 0; y < g->h; y++) {
        uint8_t *row = g->rgb + (size_t)y * g->w * 3;
        for (int x = 0; x < g->w; x++) {
            float t = 0.5f + (g->sx[x] + g->sy[y] + g->sd[x + y]) / 6.0f;
            uint64_t bits = rng_next(r);
            for (int k = 0; k < 3; k++) {
                float noise = ((float)((bits >> (16 * k)) & 0xffff) / 65535.0f - 0.5f) * 2 * amp;
                row[3 * x + k] = clamp_u8(c0[k] + (c1[k] - c0[k]) * t + noise);
            }
        }
    }
}

/* Composite a 28x28 grey item, scaled to s x s, at (ox, oy) in colour fg. */
static void place_item(gen *g, const uint8_t *item, int side, int ox, int oy, const float fg[3])
{
    for (int y = 0; y < side; y++) {
        float sy = ((float)y + 0.5f) * 28.0f / (float)side - 0.5f;
        int y0 = (int)floorf(sy);
        float fy = sy - (float)y0;
        int y0c = y0 < 0 ? 0 : y0 > 27 ? 27 : y0, y1c = y0 + 1 > 27 ? 27 : y0 + 1 < 0 ? 0 : y0 + 1;
        uint8_t *row = g->rgb + ((size_t)(oy + y) * g->w + ox) * 3;
        for (int x = 0; x < side; x++) {
            float sx = ((float)x + 0.5f) * 28.0f / (float)side - 0.5f;
            int x0 = (int)floorf(sx);
            float fx = sx - (float)x0;
            int x0c = x0 < 0    ? 0
                      : x0 > 27 ? 27
                                : x0,
                x1c = x0 + 1 > 27  ? 27
                      : x0 + 1 < 0 ? 0
                                   : x0 + 1;
            float v = (1 - fy) * ((1 - fx) * item[y0c * 28 + x0c] + fx * item[y0c * 28 + x1c]) +
                      fy * ((1 - fx) * item[y1c * 28 + x0c] + fx * item[y1c * 28 + x1c]);
            float a = v / 255.0f;
            for (int k = 0; k < 3; k++)
                row[3 * x + k] = clamp_u8((float)row[3 * x + k] * (1 - a) + fg[k] * a);
        }
    }
}

static int make_image(gen *g, const uint8_t *item, uint64_t key, const char *path, size_t *bytes)
{
    rng r = rng_keyed(g->seed, RNG_TOOL, key, 0);
    background(g, &r);
    int maxside = g->h < g->w ? g->h : g->w;
    int side = maxside / 2 + (int)rng_below(&r, (uint32_t)(maxside / 3));
    int ox = (int)rng_below(&r, (uint32_t)(g->w - side + 1));
    int oy = (int)rng_below(&r, (uint32_t)(g->h - side + 1));
    float fg[3];
    for (int k = 0; k < 3; k++)
        fg[k] = 255 * rng_uniform(&r);
    place_item(g, item, side, ox, oy, fg);

    unsigned char *jpeg = NULL;
    unsigned long jlen = 0;
    if (tjCompress2(g->tj, g->rgb, g->w, 0, g->h, TJPF_RGB, &jpeg, &jlen, TJSAMP_420, g->quality,
                    TJFLAG_ACCURATEDCT) != 0) {
        fprintf(stderr, "%s: JPEG compression failed: %s\n", path, tjGetErrorStr2(g->tj));
        return -1;
    }
    errbuf e;
    int rc = write_file_atomic(path, jpeg, jlen, &e);
    if (rc != 0)
        fprintf(stderr, "%s\n", e.msg);
    *bytes += jlen;
    tjFree(jpeg);
    return rc;
}

static int make_split(gen *g, const char *src, const char *prefix, const char *out,
                      const char *csv_name, long n, long first_id)
{
    char ipath[4096], lpath[4096];
    snprintf(ipath, sizeof ipath, "%s/%s-images-idx3-ubyte.gz", src, prefix);
    snprintf(lpath, sizeof lpath, "%s/%s-labels-idx1-ubyte.gz", src, prefix);
    idx_set im, lab;
    if (idx_read(ipath, &im) != 0)
        return -1;
    if (idx_read(lpath, &lab) != 0 || im.rows != 28 || im.cols != 28) {
        free(im.data);
        free(lab.data);
        return -1;
    }
    size_t cap = (size_t)n * 40 + 64, len = 0, bytes = 0;
    char *csv = xmalloc(cap);
    len += (size_t)snprintf(csv, cap, "path,label\n");
    int rc = 0;
    for (long i = 0; i < n && rc == 0; i++) {
        uint32_t item = (uint32_t)(i % im.n);
        char rel[64], path[4200];
        snprintf(rel, sizeof rel, "images/%06ld.jpg", first_id + i);
        snprintf(path, sizeof path, "%s/%s", out, rel);
        rc = make_image(g, im.data + (size_t)item * 784, (uint64_t)(first_id + i), path, &bytes);
        len += (size_t)snprintf(csv + len, cap - len, "%s,%u\n", rel, lab.data[item]);
        if (isatty(2) && (i % 200 == 0 || i + 1 == n))
            fprintf(stderr, "\rjpeg-set: %s %ld/%ld", csv_name, i + 1, n);
    }
    if (isatty(2))
        fputc('\n', stderr);
    if (rc == 0) {
        char csv_path[4200];
        errbuf e;
        snprintf(csv_path, sizeof csv_path, "%s/%s", out, csv_name);
        rc = write_file_atomic(csv_path, csv, len, &e);
        if (rc)
            fprintf(stderr, "%s\n", e.msg);
        else
            printf("jpeg-set: %s: %ld JPEGs %dx%d q%d, mean %.1f KB\n", csv_path, n, g->w, g->h,
                   g->quality, (double)bytes / 1024.0 / (double)(n ? n : 1));
    }
    free(csv);
    free(im.data);
    free(lab.data);
    return rc;
}

static void usage(FILE *f)
{
    /* by its bare name: tools/jpeg-set here, bin/jpeg-set in the bundle */
    fprintf(f, "usage: jpeg-set [--n N] [--val M] [--out DIR] [--seed S] [--quality Q]\n"
               "                [--width W] [--height H] [--src DIR]\n"
               "  --n N        training images (default 2000)\n"
               "  --val M      validation images from the test split (default 0)\n"
               "  --out DIR    output folder (default data/e1)\n"
               "  --seed S     texture and placement seed (default 1)\n"
               "  --quality Q  JPEG quality (default 90)\n"
               "  --width W --height H   image size (default 512 x 384)\n"
               "  --src DIR    Fashion-MNIST IDX files (default $TRAIN_FASHION_DIR or\n"
               "               /usr/share/datasets/fashion-mnist)\n");
}

int main(int argc, char **argv)
{
    long long n = 2000, nval = 0, seed = 1, q = 90, w = 512, h = 384;
    const char *out = "data/e1", *src = fashion_mnist_dir();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long long *num = !strcmp(a, "--n")         ? &n
                         : !strcmp(a, "--val")     ? &nval
                         : !strcmp(a, "--seed")    ? &seed
                         : !strcmp(a, "--quality") ? &q
                         : !strcmp(a, "--width")   ? &w
                         : !strcmp(a, "--height")  ? &h
                                                   : NULL;
        if (num && i + 1 < argc) {
            if (parse_i64(argv[++i], num) != 0 || *num < 0) {
                fprintf(stderr, "jpeg-set: %s: '%s' is not a non-negative integer\n", a, argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--out") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(a, "--src") && i + 1 < argc) {
            src = argv[++i];
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "jpeg-set: unknown or incomplete argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (w < 56 || h < 56 || w > 8192 || h > 8192 || q < 1 || q > 100) {
        fprintf(stderr, "jpeg-set: size must be 56..8192 and quality 1..100\n");
        return 2;
    }
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/images", out);
    if ((mkdir(out, 0755) != 0 && errno != EEXIST) || (mkdir(dir, 0755) != 0 && errno != EEXIST)) {
        fprintf(stderr, "%s: cannot create: %s\n", dir, strerror(errno));
        return 1;
    }
    gen g = {.w = (int)w, .h = (int)h, .quality = (int)q, .seed = (uint64_t)seed};
    g.rgb = xmalloc((size_t)w * h * 3);
    g.sx = xmalloc((size_t)w * sizeof(float));
    g.sy = xmalloc((size_t)h * sizeof(float));
    g.sd = xmalloc((size_t)(w + h) * sizeof(float));
    g.tj = tjInitCompress();
    int rc = make_split(&g, src, "train", out, "train.csv", (long)n, 0);
    if (rc == 0 && nval > 0)
        rc = make_split(&g, src, "t10k", out, "val.csv", (long)nval, (long)n);
    tjDestroy(g.tj);
    free(g.rgb);
    free(g.sx);
    free(g.sy);
    free(g.sd);
    return rc ? 1 : 0;
}
