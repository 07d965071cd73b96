/* test_image_bad.c — every kind of bad input gives exactly one line
 * `path: reason`, never a crash, hang or leak, and leaves the context usable
 * for the next (good) file. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stb/stb_image_write.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "image/image.h"
#include "tests/support/helpers.h"
#include "tests/support/images.h"

static char *dir, *good;
static uint8_t *jpeg, *png;
static size_t jpeg_len, png_len;

static void setup(void)
{
    dir = tmpdir_make();
    uint8_t *px = ti_picture(48, 64, 3, 21);
    jpeg = ti_jpeg(px, 48, 64, TJPF_RGB, TJSAMP_420, 90, 0, &jpeg_len);
    png = ti_png_bytes(64, 48, 8, 2, px, NULL, 0, &png_len);
    good = write_file(dir, "good.jpg", jpeg, jpeg_len);
    free(px);
}
static void teardown(void)
{
    free(jpeg);
    free(png);
    free(good);
    tmpdir_remove(dir);
}
TestSuite(image_bad, .init = setup, .fini = teardown, .timeout = 60);

/* Loading `path` fails with exactly "path: reason"; then the same context
 * still decodes a good JPEG. */
static void expect_error_ctx(img_ctx *c, const char *path, const img_params *p, const char *reason)
{
    const uint8_t *b;
    int bh, bw;
    errbuf e = {{0}};
    cr_assert_eq(img_load_base(c, path, p, &b, &bh, &bw, &e), -1, "%s loaded", path);
    char want[ERR_MAX];
    snprintf(want, sizeof want, "%s: %s", path, reason);
    cr_assert_str_eq(e.msg, want);
    cr_assert_null(strchr(e.msg, '\n'), "one line");
    img_params ok = {.channels = 3};
    cr_assert_eq(img_load_base(c, good, &ok, &b, &bh, &bw, &e), 0, "after %s: %s", path, e.msg);
    cr_assert(bh == 48 && bw == 64);
}

static void expect_error(const char *path, const char *reason)
{
    img_ctx *c = img_ctx_create();
    img_params p = {.channels = 3, .resize_h = 24, .resize_w = 32, .crop_h = 16, .crop_w = 16};
    expect_error_ctx(c, path, &p, reason);
    /* img_load, img_probe and img_read_only agree where they read the file */
    uint8_t out[3 * 16 * 16];
    rng r = rng_keyed(1, RNG_AUGMENT, 0, 0);
    errbuf e;
    cr_assert_eq(img_load(c, path, &p, &r, out, 16, 16, &e), -1);
    char want[ERR_MAX];
    snprintf(want, sizeof want, "%s: %s", path, reason);
    cr_assert_str_eq(e.msg, want);
    img_ctx_free(c);
}

static char *put(const char *name, const void *d, size_t n) { return write_file(dir, name, d, n); }

Test(image_bad, file_system_failures)
{
    char *empty = put("empty.jpg", "", 0);
    expect_error(empty, "empty file");
    char *missing = path_join(dir, "missing.png");
    expect_error(missing, "cannot open: No such file or directory");
    expect_error(dir, "is a directory");
    char *fifo = path_join(dir, "fifo.jpg");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    expect_error(fifo, "not a regular file"); /* and no hang waiting for a writer */
    char *notdir = path_join(good, "x.jpg");
    expect_error(notdir, "cannot open: Not a directory");
    char *loop = path_join(dir, "loop.jpg");
    cr_assert_eq(symlink(loop, loop), 0);
    expect_error(loop, "cannot open: Too many levels of symbolic links");
    if (geteuid() != 0) { /* root reads mode-000 files */
        char *locked = put("locked.jpg", jpeg, jpeg_len);
        chmod(locked, 0);
        expect_error(locked, "cannot open: Permission denied");
        free(locked);
    }
    int w, h, ch;
    errbuf e;
    cr_assert_eq(img_probe(missing, 0, &w, &h, &ch, &e), -1);
    cr_assert(strstr(e.msg, "No such file"));
    img_ctx *c = img_ctx_create();
    cr_assert_eq(img_read_only(c, empty, &(img_params){.channels = 3}, &e), -1);
    cr_assert_eq(img_read_only(c, good, &(img_params){.channels = 3, .cold = 1}, &e),
                 (long)jpeg_len);
    img_ctx_free(c);
    free(empty), free(missing), free(fifo), free(notdir), free(loop);
}

Test(image_bad, not_images_and_unsupported_formats)
{
    char *text = put("notes.jpg", "these are not the pixels you are looking for\n", 45);
    expect_error(text, "not an image (a text file)");
    uint8_t *junk = ti_noise(300, 1);
    junk[0] = 0x13; /* no magic, and not a plausible TGA header */
    junk[1] = 0x07;
    char *bin = put("junk.png", junk, 300);
    expect_error(bin, "unknown image format (not JPEG, PNG, WebP, GIF, BMP, TGA, PSD or PNM)");
    char *tiff = put("a.tif", "II*\0\x08\0\0\0\0\0\0\0", 12);
    expect_error(tiff, "unsupported image format: TIFF");
    char *webp = put("a.webp", "RIFF\x10\0\0\0WEBPVP8 \0\0\0\0", 20);
    expect_error(webp, "truncated WebP (the data ends before the header)");
    char *ascii = put("a.pgm", "P2\n2 1\n255\n0 255\n", 17);
    expect_error(ascii,
                 "unsupported image format: ASCII or 1-bit PNM (only binary P5/P6 are read)");
    free(junk), free(text), free(bin), free(tiff), free(webp), free(ascii);
}

Test(image_bad, truncated_and_corrupt_jpeg)
{
    char *half = put("half.jpg", jpeg, jpeg_len / 2);
    expect_error(half, "truncated JPEG (no end-of-image marker)");
    char *no_eoi = put("noeoi.jpg", jpeg, jpeg_len - 2);
    expect_error(no_eoi, "truncated JPEG (no end-of-image marker)");
    char *tables = put("tables.jpg", jpeg, 100); /* inside the quantisation tables */
    expect_error(tables, "truncated JPEG (no image data)");
    char *sof = put("sof.jpg", jpeg, 200); /* headers end before the scan */
    expect_error(sof,
                 "truncated or corrupt JPEG (Invalid JPEG file structure: missing SOS marker)");
    char *garbage = put("garbage.jpg", "\xff\xd8\xffhello world", 14);
    expect_error(garbage, "truncated or corrupt JPEG (Unsupported marker type 0x68)");

    uint8_t *k = malloc(jpeg_len + 3);
    memcpy(k, jpeg, jpeg_len);
    for (size_t i = 2; i + 4 < jpeg_len; i++)
        if (k[i] == 0xFF && k[i + 1] == 0xDB) {
            k[i + 4] = 0x09; /* quantisation table id 9 */
            break;
        }
    char *dqt = put("dqt.jpg", k, jpeg_len);
    expect_error(dqt, "corrupt JPEG (Bogus DQT index 9)");
    memcpy(k, jpeg, jpeg_len);
    for (size_t i = 2; i + 4 < jpeg_len; i++)
        if (k[i] == 0xFF && k[i + 1] == 0xC0) {
            k[i + 4] = 12;
            break;
        }
    char *prec = put("prec.jpg", k, jpeg_len);
    expect_error(prec, "corrupt JPEG (Unsupported JPEG data precision 12)");

    /* extraneous bytes before a marker are a benign warning: same pixels */
    size_t sos = 0;
    for (size_t i = 2; i + 1 < jpeg_len; i++)
        if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xDA) {
            sos = i;
            break;
        }
    memcpy(k, jpeg, sos);
    memcpy(k + sos, "\x01\x02\x03", 3);
    memcpy(k + sos + 3, jpeg + sos, jpeg_len - sos);
    char *extra = put("extra.jpg", k, jpeg_len + 3);
    img_params p = {.channels = 3};
    int bh, bw, gh, gw, mx;
    errbuf e;
    uint8_t *a = ti_base(extra, &p, &bh, &bw, &e), *b = ti_base(good, &p, &gh, &gw, &e);
    cr_assert_not_null(a, "%s", e.msg);
    cr_assert_eq(ti_mean_diff(a, b, (size_t)48 * 64 * 3, &mx), 0.0);
    /* ... but it must not hide a truncation behind it */
    char *extra_cut = put("extracut.jpg", k, (jpeg_len + 3) * 2 / 3);
    expect_error(extra_cut, "truncated JPEG (no end-of-image marker)");
    free(a), free(b), free(k);
    free(half), free(no_eoi), free(tables), free(sof), free(garbage), free(dqt), free(prec),
        free(extra), free(extra_cut);
}

Test(image_bad, truncated_and_corrupt_png)
{
    char *half = put("half.png", png, png_len / 2);
    expect_error(half, "truncated PNG (a chunk runs past the end of the file)");
    char *no_iend = put("noiend.png", png, png_len - 12);
    expect_error(no_iend, "truncated PNG (no IEND chunk)");
    char *sig = put("sig.png", png, 8);
    expect_error(sig, "truncated PNG (no IHDR chunk)");
    uint8_t *q = malloc(png_len);
    memcpy(q, png, png_len);
    q[41] ^= 0x55; /* first bytes of the IDAT data: the zlib header */
    char *zlib = put("zlib.png", q, png_len);
    expect_error(zlib, "corrupt PNG (bad zlib header)");
    memcpy(q, png, png_len);
    q[19] = 0; /* width 0 */
    char *w0 = put("w0.png", q, png_len);
    expect_error(w0, "corrupt PNG (size 48x0)");
    memcpy(q, png, png_len);
    q[24] = 7;
    char *depth = put("depth.png", q, png_len);
    expect_error(depth, "corrupt PNG (bit depth 7 with colour type 2)");
    memcpy(q, png, png_len);
    memcpy(q + 12, "IDAT", 4);
    char *first = put("first.png", q, png_len);
    expect_error(first, "corrupt PNG (does not start with an IHDR chunk)");
    /* a header claiming 16000 x 16000 over a few hundred bytes of data is
     * refused before anything the size of the image is allocated */
    memcpy(q, png, png_len);
    q[16] = 0, q[17] = 0, q[18] = 0x3e, q[19] = 0x80; /* 16000 */
    q[20] = 0, q[21] = 0, q[22] = 0x3e, q[23] = 0x80;
    char *bomb = put("bomb.png", q, png_len);
    char reason[200];
    snprintf(reason, sizeof reason,
             "corrupt PNG (%u bytes of image data cannot hold 16000x16000 pixels)",
             (unsigned)(png[33] << 24 | png[34] << 16 | png[35] << 8 | png[36]));
    expect_error(bomb, reason);
    free(q), free(half), free(no_iend), free(sig), free(zlib), free(w0), free(depth), free(first),
        free(bomb);
}

Test(image_bad, truncated_other_formats)
{
    uint8_t *px = ti_picture(20, 30, 3, 22);
    char *bmp = path_join(dir, "a.bmp"), *tga = path_join(dir, "a.tga");
    cr_assert(stbi_write_bmp(bmp, 30, 20, 3, px));
    stbi_write_tga_with_rle = 0;
    cr_assert(stbi_write_tga(tga, 30, 20, 3, px));
    stbi_write_tga_with_rle = 1;
    uint8_t pal[768] = {0}, ix[600] = {0};
    char *gif = ti_write_gif(dir, "a.gif", ix, 20, 30, pal);
    char *psd = ti_write_psd(dir, "a.psd", px, 20, 30, 8);
    char *ppm = ti_write_pnm(dir, "a.ppm", px, 20, 30, 3, 255);
    const char *paths[5] = {bmp, tga, gif, psd, ppm};
    const char *names[5] = {"BMP", "TGA", "GIF", "PSD", "PNM"};
    for (int k = 0; k < 5; k++) {
        size_t n;
        char *d = read_whole_file(paths[k], &n, NULL);
        char name[32], reason[100];
        snprintf(name, sizeof name, "cut%d", k);
        char *cut = put(name, d, n * 2 / 3);
        snprintf(reason, sizeof reason, "truncated %s (the data ends before the image)", names[k]);
        expect_error(cut, reason);
        free(d), free(cut);
    }
    char *hdr = put("hdr.bmp", "BM\x10\0\0\0\0\0\0\0\x0e\0\0\0\x05\0", 16);
    expect_error(hdr, "truncated BMP (header)");
    uint8_t odd[40] = {'B', 'M', [10] = 40, [14] = 99};
    char *hsz = put("hsz.bmp", odd, sizeof odd);
    expect_error(hsz, "corrupt or unsupported BMP (header size 99)");
    const uint8_t pal2[6] = {1, 2, 3, 4, 5, 6};
    uint8_t ix2[12] = {0, 1, 1, 0, 1, 5, 0, 0, 1, 1, 1, 1};
    char *outside = ti_write_bmp8(dir, "outside.bmp", ix2, 3, 4, pal2, 2, 0);
    expect_error(outside, "corrupt BMP (pixel index 5 outside the 2-colour palette)");
    char *digits = put("long.pgm", "P5\n1111111111 2\n255\n", 20);
    expect_error(digits, "corrupt PNM (a number in the header is too long)");
    char *zero = put("zero.ppm", "P6\n0 5\n255\n\1\2\3", 14);
    expect_error(zero, "corrupt PNM (size 5x0, maximum value 255)");
    free(hsz), free(outside), free(digits), free(zero);
    free(px), free(bmp), free(tga), free(gif), free(psd), free(ppm), free(hdr);
}

Test(image_bad, absurd_dimensions_refused_from_the_header)
{
    uint8_t *q = malloc(png_len);
    memcpy(q, png, png_len);
    q[16] = 0, q[17] = 0, q[18] = 0x4e, q[19] = 0x20; /* 20000 wide */
    char *wide = put("wide.png", q, png_len);
    expect_error(wide,
                 "image too large: 48x20000 (the limit is 16384 per side and 268435456 pixels)");
    uint8_t *k = malloc(jpeg_len);
    memcpy(k, jpeg, jpeg_len);
    for (size_t i = 2; i + 9 < jpeg_len; i++)
        if (k[i] == 0xFF && k[i + 1] == 0xC0) {
            k[i + 5] = 0x75, k[i + 6] = 0x30; /* 30000 high */
            break;
        }
    char *tall = put("tall.jpg", k, jpeg_len);
    expect_error(tall,
                 "image too large: 30000x64 (the limit is 16384 per side and 268435456 pixels)");
    /* the pixel limit, lowered for the test */
    img_ctx *c = img_ctx_create();
    img_ctx_set_limits(c, 100, 4000);
    uint8_t *px = ti_picture(60, 80, 1, 3);
    char *p = ti_write_png(dir, "p.png", px, 60, 80, 1);
    expect_error_ctx(c, p, &(img_params){.channels = 3},
                     "image too large: 60x80 (the limit is 100 per side and 4000 pixels)");
    free(px);
    img_ctx_set_limits(c, 0, 0);
    /* a shorter-side resize of a thin image would be enormous */
    uint8_t thin[300];
    memset(thin, 9, sizeof thin);
    char *tp = ti_write_png(dir, "thin.png", thin, 300, 1, 1);
    expect_error_ctx(c, tp, &(img_params){.channels = 1, .resize_short = 16384},
                     "image too large after resize: 4915200x16384");
    /* bad parameters are reported with the path too */
    expect_error_ctx(c, good, &(img_params){.channels = 4}, "channels must be 1 or 3, not 4");
    img_ctx_free(c);
    free(q), free(k), free(wide), free(tall), free(p), free(tp);
}
