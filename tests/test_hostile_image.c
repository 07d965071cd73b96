/* test_hostile_image.c — images whose decode would cost far more memory
 * than their size suggests, and a good image met with too little memory
 * (issue 26, item 8).
 *
 * The hostile files are real and valid as far as their bytes go: a PNG of
 * 16-bit RGBA zeros (a deflate stream built from one compressed chunk
 * repeated, so writing it is cheap although it inflates to 650 MB), a
 * 35-byte GIF whose logical screen is 16384 x 16384, a BMP header of
 * 16384 x 16384 without its pixels. Each must be refused from its header,
 * naming the size and the limit, while the process stays small: the peak
 * RSS of the train processes a test ran (getrusage(RUSAGE_CHILDREN): the
 * tests run in processes of their own) is measured, not assumed.
 *
 * Memory pressure is made with RLIMIT_AS (`ulimit -v`) on the build
 * without sanitizers (ASan reserves terabytes of address space): a good
 * PNG that needs more than is left must be reported as out of memory,
 * exit 5, and --skip-bad must not drop it. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/util.h"
#include "image/image.h"
#include "tests/support/helpers.h"
#include "tests/support/images.h"

static char *dir;

static void setup(void) { dir = tmpdir_make(); }
static void teardown(void) { tmpdir_remove(dir); }
TestSuite(hostile_image, .init = setup, .fini = teardown);

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8),
    p[3] = (uint8_t)v;
}

static void put_chunk(FILE *f, const char *type, const uint8_t *d, uint32_t n)
{
    uint8_t hdr[8];
    put32(hdr, n);
    memcpy(hdr + 4, type, 4);
    uLong crc = crc32(crc32(0, hdr + 4, 4), d, n);
    uint8_t tail[4];
    put32(tail, (uint32_t)crc);
    cr_assert(fwrite(hdr, 1, 8, f) == 8 && (n == 0 || fwrite(d, 1, n, f) == n) &&
              fwrite(tail, 1, 4, f) == 4);
}

/* Deflate n zero bytes as a block ended by a full flush: the same bytes
 * wherever it sits in a stream. */
static uint8_t *zero_block(size_t n, size_t *len)
{
    z_stream z = {0};
    cr_assert_eq(deflateInit2(&z, 1, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
    uint8_t *in = calloc(1, n ? n : 1), *out = malloc(deflateBound(&z, n) + 64);
    z.next_in = in, z.avail_in = (uInt)n;
    z.next_out = out, z.avail_out = (uInt)(deflateBound(&z, n) + 64);
    cr_assert_eq(deflate(&z, Z_FULL_FLUSH), Z_OK);
    cr_assert_eq(z.avail_in, 0u);
    *len = z.total_out;
    deflateEnd(&z);
    free(in);
    return out;
}

/* A valid all-zero (black) PNG of w x h at the given depth and colour
 * type, unfiltered, written without ever holding its raw rows. */
static char *zero_png(const char *name, uint32_t w, uint32_t h, int depth, int ctype)
{
    static const int comps[7] = {1, 0, 3, 1, 2, 0, 4};
    const uint64_t raw = (uint64_t)h * (1 + ((uint64_t)w * comps[ctype] * depth + 7) / 8);
    const size_t piece = 1 << 20;
    size_t blen, rlen;
    uint8_t *block = zero_block(piece, &blen), *rest = zero_block(raw % piece, &rlen);
    const uint64_t pieces = raw / piece;
    size_t zlen = 2 + pieces * blen + rlen + 2 + 4;
    uint8_t *z = malloc(zlen), *p = z;
    *p++ = 0x78, *p++ = 0x01; /* deflate, 32K window; (0x7801 % 31 == 0) */
    for (uint64_t i = 0; i < pieces; i++, p += blen)
        memcpy(p, block, blen);
    memcpy(p, rest, rlen), p += rlen;
    *p++ = 0x03, *p++ = 0x00; /* the last block: fixed codes, end of block only */
    /* Adler-32 of raw zero bytes: a stays 1, b adds 1 per byte */
    put32(p, (uint32_t)(raw % 65521) << 16 | 1u);
    char *path = path_join(dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite("\x89PNG\r\n\x1a\n", 1, 8, f), 8u);
    uint8_t ihdr[13] = {0};
    put32(ihdr, w);
    put32(ihdr + 4, h);
    ihdr[8] = (uint8_t)depth;
    ihdr[9] = (uint8_t)ctype;
    put_chunk(f, "IHDR", ihdr, 13);
    put_chunk(f, "IDAT", z, (uint32_t)zlen);
    put_chunk(f, "IEND", NULL, 0);
    cr_assert_eq(fclose(f), 0);
    free(block), free(rest), free(z);
    return path;
}

/* 35 bytes: a 16384 x 16384 logical screen with one 1 x 1 frame (LZW
 * codes clear, 0, end in 3 bits each). */
static char *tiny_gif(const char *name)
{
    static const uint8_t g[] = {'G',  'I', 'F', '8', '9',  'a',  0x00, 0x40, 0x00, 0x40, 0x80, 0x00,
                                0x00, 0,   0,   0,   255,  255,  255,  0x2C, 0,    0,    0,    0,
                                1,    0,   1,   0,   0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3B};
    _Static_assert(sizeof g == 35, "35 bytes");
    return write_file(dir, name, g, sizeof g);
}

/* A 24-bit BMP header for 16384 x 16384 and no pixels. */
static char *headless_bmp(const char *name)
{
    uint8_t b[54] = {'B', 'M'};
    b[10] = 54;                 /* pixels' offset */
    b[14] = 40;                 /* BITMAPINFOHEADER */
    b[19] = 0x40, b[23] = 0x40; /* 16384 wide, 16384 high */
    b[26] = 1, b[28] = 24;      /* planes, bits per pixel */
    return write_file(dir, name, b, sizeof b);
}

static char *small_png(const char *name)
{
    uint8_t *px = ti_picture(12, 12, 3, 7);
    char *p = ti_write_png(dir, name, px, 12, 12, 3);
    free(px);
    return p;
}

/* The message of loading `path` in this process (where nothing is
 * allocated for a refused file either). */
static void expect_refused(const char *path, const char *reason)
{
    img_ctx *c = img_ctx_create();
    img_params p = {.channels = 3, .resize_h = 8, .resize_w = 8};
    const uint8_t *b;
    int bh, bw;
    errbuf e = {{0}};
    cr_assert_eq(img_load_base(c, path, &p, &b, &bh, &bw, &e), -1, "%s loaded", path);
    char want[ERR_MAX];
    snprintf(want, sizeof want, "%s: %s", path, reason);
    cr_assert_str_eq(e.msg, want);
    img_ctx_free(c);
}

static long children_maxrss_mb(void)
{
    struct rusage ru;
    cr_assert_eq(getrusage(RUSAGE_CHILDREN, &ru), 0);
    return ru.ru_maxrss / 1024;
}

Test(hostile_image, decoders_that_would_need_gigabytes_are_refused_from_the_header)
{
    /* 9000 x 9000 16-bit RGBA: 648 MB of rows and 648 MB of image; as
     * 8-bit it would need 972 MB, under the limit */
    char *png = zero_png("deep.png", 9000, 9000, 16, 6);
    char *gif = tiny_gif("screen.gif");
    char *bmp = headless_bmp("headless.bmp");
    struct stat st;
    cr_assert(stat(png, &st) == 0 && st.st_size < 4 << 20, "the PNG is small on disk");
    expect_refused(png, "image too large: 9000x9000 16-bit PNG would need 1.2 GB to decode (the "
                        "limit is 1.0 GB)");
    expect_refused(gif, "image too large: 16384x16384 GIF would need 2.2 GB to decode (the limit "
                        "is 1.0 GB)");
    expect_refused(bmp, "truncated BMP (the data ends before the image)");

    /* the program: each named with its line and refused (exit 2), or
     * skipped with --skip-bad; its processes stay small and quick */
    char *good = small_png("good.png");
    char csv[512];
    snprintf(csv, sizeof csv, "path,label\ngood.png,0\ndeep.png,1\nscreen.gif,0\nheadless.bmp,1\n");
    char *csv_path = write_text(dir, "data.csv", csv);
    char *deep_csv = write_text(dir, "deep.csv", "path,label\ngood.png,0\ndeep.png,1\n");
    run_result r;
    run_train(&r, "--loader-only", "--workers", "0", "--epochs", "1", "--batch", "2", "--resize",
              "8x8", deep_csv, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    char want[1024];
    snprintf(want, sizeof want, "%s:3: %s: image too large: 9000x9000 16-bit PNG", deep_csv, png);
    cr_assert(strstr(r.err, want), "%s", r.err);
    run_free(&r);
    run_train(&r, "--loader-only", "--workers", "1", "--skip-bad", "--epochs", "1", "--batch", "2",
              "--resize", "8x8", csv_path, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *lines[3][2] = {
        {"4", "GIF would need"}, {"5", "truncated BMP"}, {"3", "16-bit PNG"}};
    for (int k = 0; k < 3; k++) {
        snprintf(want, sizeof want, "train: skipped %s:%s: ", csv_path, lines[k][0]);
        const char *at = strstr(r.err, want);
        cr_assert(at && strstr(at, lines[k][1]), "%s", r.err);
    }
    cr_assert_lt(r.secs, 20, "took %.1f s", r.secs);
    run_free(&r);
    long rss = children_maxrss_mb();
    cr_assert_lt(rss, 200, "a train process reached %ld MB", rss);
    free(png), free(gif), free(bmp), free(good), free(csv_path), free(deep_csv);
}

/* The generator's PNGs are images (a stream of repeated flushed blocks
 * inflates to the rows): the refused ones above are refused for their
 * size, not for their bytes. */
Test(hostile_image, generated_zero_pngs_decode_as_black)
{
    char *png8 = zero_png("flat8.png", 600, 400, 8, 6);
    char *png16 = zero_png("flat16.png", 600, 400, 16, 6);
    img_ctx *c = img_ctx_create();
    img_params p = {.channels = 3, .resize_h = 4, .resize_w = 6};
    const uint8_t *b;
    int bh, bw;
    errbuf e;
    cr_assert_eq(img_load_base(c, png8, &p, &b, &bh, &bw, &e), 0, "%s", e.msg);
    cr_assert_eq(img_load_base(c, png16, &p, &b, &bh, &bw, &e), 0, "%s", e.msg);
    for (int i = 0; i < bh * bw * 3; i++)
        cr_assert_eq(b[i], 0, "black");
    img_ctx_free(c);
    free(png8), free(png16);
}

/* The build without sanitizers, for RLIMIT_AS; NULL (the test skips)
 * when it is not built. */
static char *plain_train(void)
{
    char *bin = path_join(source_root(), "build/cpu/train");
    if (access(bin, X_OK) == 0)
        return bin;
    free(bin);
    return NULL;
}

static void run_limited(run_result *r, const char *bin, long kb, const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "ulimit -v %ld && exec %s %s", kb, bin, args);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    run_argv(argv, NULL, 60, r);
}

Test(hostile_image, out_of_memory_is_said_and_never_skipped)
{
    char *bin = plain_train();
    if (!bin)
        cr_skip_test("no build/cpu/train (make test builds it): RLIMIT_AS needs a build "
                     "without ASan");
    /* 12900 x 12900 RGB: 499 MB of rows and 499 MB of image, under the
     * limit; the first allocation alone is beyond 500 MB of address
     * space, which a run on a small image fits in */
    char *big = zero_png("big.png", 12900, 12900, 8, 2);
    char *good = small_png("good.png");
    char *small_csv = write_text(dir, "small.csv", "path,label\ngood.png,0\ngood.png,1\n");
    char *big_csv = write_text(dir, "big.csv", "path,label\ngood.png,0\nbig.png,1\n");
    const long kb = 500 * 1024;
    char args[1024];
    run_result r;
    snprintf(args, sizeof args, "--loader-only --workers 0 --epochs 1 --batch 1 --resize 8x8 %s",
             small_csv);
    run_limited(&r, bin, kb, args);
    if (r.status != 0) {
        run_free(&r);
        cr_skip_test("a run on a small image does not fit in %ld KB of address space here", kb);
    }
    run_free(&r);
    for (int skip = 0; skip < 2; skip++)
        for (int workers = 0; workers < 2; workers++) {
            snprintf(args, sizeof args,
                     "--loader-only --workers %d %s --epochs 1 --batch 1 --resize 8x8 %s", workers,
                     skip ? "--skip-bad" : "", big_csv);
            run_limited(&r, bin, kb, args);
            cr_assert_eq(r.status, 5, "workers %d skip %d: %s", workers, skip, r.err);
            char want[1024];
            snprintf(want, sizeof want,
                     "%s:3: %s: out of memory decoding this 12900x12900 PNG (it needs about "
                     "952.2 MB)",
                     big_csv, big);
            cr_assert(strstr(r.err, want), "want %s in:\n%s", want, r.err);
            cr_assert_null(strstr(r.err, "skipped"), "%s", r.err);
            cr_assert_null(strstr(r.err, "corrupt"), "%s", r.err);
            run_free(&r);
        }
    free(bin), free(big), free(good), free(small_csv), free(big_csv);
}

/* Every bit depth PNG allows for each colour type without a palette (the
 * PNG spec's table) loads, as black; the depths it does not allow are
 * refused from the header. A generated oracle: the spec's table, not the
 * check's own. */
Test(hostile_image, every_png_depth_the_spec_allows_loads_and_no_other)
{
    static const struct {
        int ctype, depths[5];
    } spec[] = {{0, {1, 2, 4, 8, 16}}, {2, {8, 16}}, {4, {8, 16}}, {6, {8, 16}}};
    img_ctx *c = img_ctx_create();
    img_params p = {.channels = 3, .resize_h = 4, .resize_w = 4};
    for (size_t t = 0; t < sizeof spec / sizeof *spec; t++)
        for (int depth = 1; depth <= 16; depth *= 2) {
            int allowed = 0;
            for (int k = 0; k < 5; k++)
                allowed |= spec[t].depths[k] == depth;
            char name[32];
            snprintf(name, sizeof name, "c%d-d%d.png", spec[t].ctype, depth);
            char *png = zero_png(name, 8, 8, depth, spec[t].ctype);
            const uint8_t *b;
            int bh, bw;
            errbuf e = {{0}};
            int rc = img_load_base(c, png, &p, &b, &bh, &bw, &e);
            if (allowed) {
                cr_assert_eq(rc, 0, "colour type %d depth %d: %s", spec[t].ctype, depth, e.msg);
                for (int i = 0; i < bh * bw * 3; i++)
                    cr_assert_eq(b[i], 0, "colour type %d depth %d: not black", spec[t].ctype,
                                 depth);
            } else {
                cr_assert_neq(rc, 0, "colour type %d depth %d accepted", spec[t].ctype, depth);
                cr_assert(strstr(e.msg, "bit depth"), "%s", e.msg);
            }
            free(png);
        }
    img_ctx_free(c);
}
