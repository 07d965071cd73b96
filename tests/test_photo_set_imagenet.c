/* test_photo_set_imagenet.c — tools/photo-set --imagenet-sizes: a photo
 * set at ImageNet's size distribution with ImageNet's oddities.
 *
 * Two generated sources (the real photographs come with `make photos`, not
 * with `make deps`), 2 classes x 100 images: two blocks of 100, so every
 * oddity the tool promises per block shows at least once in each of its
 * forms. What each file is comes from its own bytes (PNG magic, the SOF
 * segment's components and sampling, Adobe APP14's transform, SOF2, the
 * APP1 Exif orientation), read here, not by the code under test. The
 * sources are gradients (red grows left to right, green top to bottom), so
 * "upright" is something a test can see: every file, turned by train's
 * EXIF reading, must show them that way, and an EXIF file read as stored
 * must not. Then train --check=decode and a one-epoch --loader-only run
 * read the whole set. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "common/rng.h"
#include "common/util.h"
#include "image/image.h"
#include "loader/dataset.h"
#include "tests/support/helpers.h"
#include "tests/support/images.h"

static char *dir;
static void setup(void) { dir = tmpdir_make(); }
static void teardown(void) { tmpdir_remove(dir); }
TestSuite(photo_set_imagenet, .init = setup, .fini = teardown);

enum { PER_CLASS = 100, NFILES = 2 * PER_CLASS };

/* dir/name: an h x w source, red = 30..220 left to right, green = 30..220
 * top to bottom, blue a texture (so JPEG has detail to code). */
static void gradient_source(const char *name, int h, int w, uint64_t seed)
{
    uint8_t *px = malloc((size_t)h * w * 3);
    rng r = rng_keyed(seed, RNG_TOOL, 29, 0);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = px + ((size_t)y * w + x) * 3;
            p[0] = (uint8_t)(30 + 190 * x / (w - 1));
            p[1] = (uint8_t)(30 + 190 * y / (h - 1));
            p[2] = (uint8_t)(88 + (int)(rng_next(&r) % 81));
        }
    free(ti_write_jpeg(dir, name, px, h, w, TJPF_RGB, TJSAMP_420, 90, 0));
    free(px);
}

/* What a file's bytes say it is. */
typedef struct finfo {
    int png;      /* PNG magic */
    int w, h;     /* as stored (SOF or IHDR) */
    int comps;    /* JPEG: components in SOF */
    int samp0;    /* JPEG: first component's sampling byte (0x22: 2x2) */
    int sof;      /* JPEG: 0xC0, 0xC1 or 0xC2 */
    int adobe;    /* Adobe APP14 transform, -1 none */
    int orient;   /* Exif orientation, 0 none */
    int exif_big; /* that Exif's TIFF is big-endian */
} finfo;

static unsigned be16(const uint8_t *p) { return (unsigned)p[0] << 8 | p[1]; }

static unsigned rd16(const uint8_t *p, int big)
{
    return big ? (unsigned)p[0] << 8 | p[1] : (unsigned)p[1] << 8 | p[0];
}

static unsigned rd32(const uint8_t *p, int big)
{
    return big ? (unsigned)p[0] << 24 | (unsigned)p[1] << 16 | (unsigned)p[2] << 8 | p[3]
               : (unsigned)p[3] << 24 | (unsigned)p[2] << 16 | (unsigned)p[1] << 8 | p[0];
}

/* Orientation (tag 0x0112) in IFD0 of a TIFF block, 0 when absent */
static int tiff_orientation(const uint8_t *t, size_t n, int *big)
{
    cr_assert(n >= 8 && (!memcmp(t, "II*\0", 4) || !memcmp(t, "MM\0*", 4)), "TIFF header");
    *big = t[0] == 'M';
    unsigned ifd = rd32(t + 4, *big);
    cr_assert(ifd + 2 <= n);
    unsigned count = rd16(t + ifd, *big);
    for (unsigned i = 0; i < count; i++) {
        const uint8_t *e = t + ifd + 2 + 12 * i;
        cr_assert(e + 12 <= t + n, "IFD0 entry %u past the segment", i);
        if (rd16(e, *big) == 0x0112) {
            cr_assert(rd16(e + 2, *big) == 3 && rd32(e + 4, *big) == 1, "one SHORT");
            return (int)rd16(e + 8, *big);
        }
    }
    return 0;
}

static finfo inspect(const uint8_t *d, size_t n, const char *path)
{
    finfo f = {.adobe = -1};
    if (n >= 24 && !memcmp(d, "\x89PNG\r\n\x1a\n", 8)) {
        f.png = 1;
        f.w = (int)rd32(d + 16, 1), f.h = (int)rd32(d + 20, 1);
        return f;
    }
    cr_assert(n > 4 && d[0] == 0xFF && d[1] == 0xD8, "%s: neither PNG nor JPEG", path);
    size_t at = 2;
    while (!f.sof) {
        cr_assert(at + 4 <= n && d[at] == 0xFF, "%s: bad marker at %zu", path, at);
        unsigned m = d[at + 1], len = be16(d + at + 2);
        const uint8_t *s = d + at + 4;
        cr_assert(len >= 2 && at + 2 + len <= n, "%s: segment past the end", path);
        cr_assert(m != 0xDA, "%s: scan before any SOF", path);
        if (m == 0xE1 && len >= 2 + 6 && !memcmp(s, "Exif\0\0", 6))
            f.orient = tiff_orientation(s + 6, len - 2 - 6, &f.exif_big);
        if (m == 0xEE && len >= 2 + 12 && !memcmp(s, "Adobe", 5))
            f.adobe = s[11];
        if (m == 0xC0 || m == 0xC1 || m == 0xC2) {
            f.sof = (int)m;
            f.h = (int)be16(s + 1), f.w = (int)be16(s + 3);
            f.comps = s[5];
            f.samp0 = s[7];
        }
        at += 2 + len;
    }
    return f;
}

/* Whether an image shows the sources' gradients upright: green grows
 * downwards, red rightwards (mean of the last quarter minus the first, in
 * levels, > 8; a view of the source is at least 0.45 of it on each side, so
 * upright gives >= 20, a quarter turn about 0). */
static int upright(const uint8_t *px, int h, int w)
{
    double top = 0, bottom = 0, left = 0, right = 0;
    int q = h / 4, qx = w / 4;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const uint8_t *p = px + ((size_t)y * w + x) * 3;
            top += y < q ? p[1] : 0, bottom += y >= h - q ? p[1] : 0;
            left += x < qx ? p[0] : 0, right += x >= w - qx ? p[0] : 0;
        }
    return (bottom - top) / ((double)q * w) > 8 && (right - left) / ((double)qx * h) > 8;
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static void make_set(const char *out, const char *seed)
{
    char *bin = path_join(tools_dir(), "photo_set"), *src = path_join(dir, "src");
    char *argv[] = {bin,         "--imagenet-sizes", "--src", src,     "--out",
                    (char *)out, "--per-class",      "100",   "--val", "0",
                    "--seed",    (char *)seed,       NULL};
    run_result r;
    run_argv(argv, NULL, 120, &r);
    cr_assert_eq(r.status, 0, "photo_set: %s", r.err);
    cr_assert(strstr(r.out, "oddities:"), "%s", r.out);
    run_free(&r);
    free(bin), free(src);
}

Test(photo_set_imagenet, sizes_oddities_determinism_and_train_reads_them_all)
{
    gradient_source("src/a.jpg", 1500, 2000, 1); /* landscape: the tail above 1200 */
    gradient_source("src/b.jpg", 1800, 1350, 2); /* portrait */
    char *out = path_join(dir, "set"), *out2 = path_join(dir, "set2"),
         *out3 = path_join(dir, "set3");
    make_set(out, "7");
    make_set(out2, "7");
    make_set(out3, "8");
    char *train = path_join(out, "train");
    dataset ds;
    errbuf e = {{0}};
    cr_assert_eq(dataset_load(&ds, train, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(ds.n, NFILES);
    int shorter[NFILES], longer[NFILES], portrait = 0, over1200 = 0, mid = 0;
    int grey11 = 0, grey22 = 0, cmyk = 0, ycck = 0, png_jpeg = 0, png_png = 0, exif6 = 0, exif8 = 0,
        progressive = 0, jpegs = 0, other_seed_differs = 0;
    for (uint32_t i = 0; i < ds.n; i++) {
        const char *path = dataset_path(&ds, i);
        size_t n, n2;
        uint8_t *d = (uint8_t *)read_whole_file(path, &n, NULL);
        cr_assert_not_null(d, "%s", path);
        finfo f = inspect(d, n, path);
        /* same seed, same bytes; another seed, other files */
        char other[4200];
        snprintf(other, sizeof other, "%s%s", out2, path + strlen(out));
        uint8_t *d2 = (uint8_t *)read_whole_file(other, &n2, NULL);
        cr_assert(d2 && n2 == n && memcmp(d, d2, n) == 0, "%s differs between runs", other);
        free(d2);
        snprintf(other, sizeof other, "%s%s", out3, path + strlen(out));
        d2 = (uint8_t *)read_whole_file(other, &n2, NULL);
        other_seed_differs += !d2 || n2 != n || memcmp(d, d2, n) != 0;
        free(d2);
        free(d);

        size_t pl = strlen(path);
        int named_png = pl > 4 && !strcmp(path + pl - 4, ".png");
        cr_assert(named_png || (pl > 5 && !strcmp(path + pl - 5, ".JPEG")), "%s: name", path);
        cr_assert(!named_png || f.png, "%s: only PNGs are named .png", path);
        if (f.png) {
            png_jpeg += !named_png, png_png += named_png;
        } else {
            jpegs++;
            progressive += f.sof == 0xC2;
            if (f.comps == 1) {
                cr_assert(f.samp0 == 0x11 || f.samp0 == 0x22, "%s: grey sampling %02x", path,
                          f.samp0);
                grey11 += f.samp0 == 0x11, grey22 += f.samp0 == 0x22;
            } else if (f.comps == 4) {
                cr_assert(f.adobe == 0 || f.adobe == 2, "%s: CMYK without Adobe APP14", path);
                cmyk += f.adobe == 0, ycck += f.adobe == 2;
            } else {
                cr_assert_eq(f.comps, 3, "%s", path);
            }
            if (f.orient) {
                cr_assert(f.orient == 6 || f.orient == 8, "%s: orientation %d", path, f.orient);
                cr_assert(f.comps == 3 && f.adobe == -1, "%s: EXIF on a colour JPEG", path);
                cr_assert_eq(f.exif_big, f.orient == 6, "%s: 6 big-endian, 8 little", path);
                exif6 += f.orient == 6, exif8 += f.orient == 8;
            }
        }
        int uw = f.orient >= 5 ? f.h : f.w, uh = f.orient >= 5 ? f.w : f.h; /* upright */
        shorter[i] = uw < uh ? uw : uh, longer[i] = uw < uh ? uh : uw;
        portrait += uh > uw;
        over1200 += longer[i] > 1200;
        mid += longer[i] >= 333 && longer[i] <= 700;

        /* upright once turned by train's EXIF reading; an EXIF file as stored is not */
        img_params p = {.channels = 3, .exif = 1};
        int bh, bw;
        uint8_t *px = ti_base(path, &p, &bh, &bw, &e);
        cr_assert_not_null(px, "%s", e.msg);
        cr_assert(bh == uh && bw == uw, "%s: decoded %dx%d, upright %dx%d", path, bw, bh, uw, uh);
        cr_assert(upright(px, bh, bw), "%s (%dx%d, orientation %d, %d components) is not upright",
                  path, bw, bh, f.orient, f.comps);
        free(px);
        if (f.orient) {
            p.exif = 0;
            px = ti_base(path, &p, &bh, &bw, &e);
            cr_assert_not_null(px, "%s", e.msg);
            cr_assert(!upright(px, bh, bw), "%s: stored upright, tagged %d", path, f.orient);
            free(px);
        }
    }
    /* ImageNet's sizes: median about 500x375, some portrait, a tail */
    qsort(shorter, NFILES, sizeof *shorter, cmp_int);
    qsort(longer, NFILES, sizeof *longer, cmp_int);
    int ms = (shorter[NFILES / 2 - 1] + shorter[NFILES / 2]) / 2,
        ml = (longer[NFILES / 2 - 1] + longer[NFILES / 2]) / 2;
    cr_assert(ms >= 333 && ms <= 400, "median shorter side %d", ms);
    cr_assert(ml >= 450 && ml <= 550, "median longer side %d", ml);
    cr_assert(portrait >= NFILES / 10 && portrait <= NFILES * 3 / 10, "%d portrait", portrait);
    cr_assert(over1200 >= 1 && over1200 <= NFILES / 10, "%d with a side above 1200", over1200);
    cr_assert(longer[NFILES - 1] <= 2000, "longest side %d", longer[NFILES - 1]);
    cr_assert(mid >= NFILES * 8 / 10, "%d of %d with the longer side 333-700", mid, NFILES);
    /* the oddities: their counts per block of 100, both forms of each */
    cr_assert(grey11 == 2 && grey22 == 2, "grey: %d 1x1, %d 2x2", grey11, grey22);
    cr_assert(cmyk == 1 && ycck == 1, "CMYK: %d Adobe CMYK, %d YCCK", cmyk, ycck);
    cr_assert(png_jpeg == 1 && png_png == 1, "PNG: %d named .JPEG, %d .png", png_jpeg, png_png);
    cr_assert(exif6 == 2 && exif8 == 2, "EXIF: %d orientation 6, %d orientation 8", exif6, exif8);
    cr_assert(progressive >= jpegs * 8 / 100 && progressive <= jpegs * 25 / 100,
              "%d of %d JPEGs progressive (about 15%%)", progressive, jpegs);
    cr_assert(other_seed_differs > NFILES / 2, "another seed, the same set (%d files differ)",
              other_seed_differs);
    dataset_free(&ds);

    /* train reads every file: --check=decode, then one epoch of the loader */
    run_result r;
    run_train(&r, "--check=decode", train, NULL);
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "check: 0 files that training would refuse"), "%s", r.out);
    run_free(&r);
    char *json = path_join(dir, "run.json");
    run_train(&r, "--loader-only", "--exif", "--resize", "72", "--crop", "64", "--batch", "32",
              "--workers", "2", "--epochs", "1", "--json", json, train, NULL);
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    run_free(&r);
    char vals[2][JSON_VALUE_MAX];
    cr_assert_eq(json_epoch_values(json, "images", vals, 2), 1);
    cr_assert_str_eq(vals[0], "200");
    cr_assert_eq(json_epoch_values(json, "skipped", vals, 2), 1);
    cr_assert_str_eq(vals[0], "0");
    free(json), free(train), free(out), free(out2), free(out3);
}
