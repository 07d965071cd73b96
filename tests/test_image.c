/* test_image.c — the image pipeline on real files: decoding of every
 * format and pixel layout we promise, DCT scaling, channel conversion, and
 * the determinism contract between lazy (img_load) and preload
 * (img_load_base + img_augment). Resampling, crop and flip geometry are in
 * test_image_geom.c; bad input in test_image_bad.c. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include <stb/stb_image_write.h>

#include "image/image.h"
#include "image/internal.h"
#include "tests/support/helpers.h"
#include "tests/support/images.h"

static char *dir;
static void setup(void) { dir = tmpdir_make(); }
static void teardown(void) { tmpdir_remove(dir); }
TestSuite(image, .init = setup, .fini = teardown, .timeout = 60);

static img_params plain(int channels) { return (img_params){.channels = channels}; }

/* Load with no resize, crop or flip and expect exactly `hwc` (as CHW). */
static void expect_exact(const char *path, int channels, const uint8_t *hwc, int h, int w)
{
    img_ctx *c = img_ctx_create();
    img_params p = plain(channels);
    uint8_t *out = malloc((size_t)h * w * channels);
    rng r = rng_keyed(1, RNG_AUGMENT, 0, 0);
    errbuf e = {{0}};
    cr_assert_eq(img_load(c, path, &p, &r, out, h, w, &e), 0, "%s", e.msg);
    uint8_t *want = ti_chw(hwc, h, w, channels);
    for (size_t i = 0; i < (size_t)h * w * channels; i++)
        cr_assert_eq(out[i], want[i], "%s: byte %zu: %d != %d", path, i, out[i], want[i]);
    free(want);
    free(out);
    img_ctx_free(c);
}

Test(image, png_round_trips_exactly)
{
    const int h = 23, w = 37;
    uint8_t *rgb = ti_picture(h, w, 3, 1), *gray = ti_picture(h, w, 1, 2);
    char *p3 = ti_write_png(dir, "rgb.png", rgb, h, w, 3);
    char *p1 = ti_write_png(dir, "gray.png", gray, h, w, 1);
    expect_exact(p3, 3, rgb, h, w);
    expect_exact(p1, 1, gray, h, w);
    /* RGBA and gray + alpha: alpha dropped, not composited */
    uint8_t *rgba = ti_noise((size_t)h * w * 4, 3), *ga = ti_noise((size_t)h * w * 2, 4);
    uint8_t *rgb_of = malloc((size_t)h * w * 3), *g_of = malloc((size_t)h * w);
    for (int i = 0; i < h * w; i++) {
        memcpy(rgb_of + 3 * i, rgba + 4 * i, 3);
        g_of[i] = ga[2 * i];
    }
    char *p4 = ti_write_png(dir, "rgba.png", rgba, h, w, 4);
    char *p2 = ti_write_png(dir, "ga.png", ga, h, w, 2);
    expect_exact(p4, 3, rgb_of, h, w);
    expect_exact(p2, 1, g_of, h, w);
    free(rgb), free(gray), free(rgba), free(ga), free(rgb_of), free(g_of);
    free(p1), free(p2), free(p3), free(p4);
}

Test(image, png_16bit_palette_and_gray_alpha)
{
    const int h = 9, w = 13;
    /* 16-bit RGB: the high byte is kept */
    uint8_t *rgb = ti_picture(h, w, 3, 5), *rows16 = malloc((size_t)h * w * 6);
    for (int i = 0; i < h * w * 3; i++) {
        rows16[2 * i] = rgb[i];
        rows16[2 * i + 1] = (uint8_t)(i * 37);
    }
    char *p16 = ti_write_png_raw(dir, "rgb16.png", w, h, 16, 2, rows16, NULL, 0);
    expect_exact(p16, 3, rgb, h, w);

    /* 8-bit palette */
    uint8_t plte[4 * 3] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 17, 34, 51};
    uint8_t *ix = malloc((size_t)h * w), *want = malloc((size_t)h * w * 3);
    for (int i = 0; i < h * w; i++) {
        ix[i] = (uint8_t)((i * 7 + i / w) % 4);
        memcpy(want + 3 * i, plte + 3 * ix[i], 3);
    }
    char *pp = ti_write_png_raw(dir, "pal8.png", w, h, 8, 3, ix, plte, 4);
    expect_exact(pp, 3, want, h, w);

    /* 2-bit palette: four pixels per byte, rows padded to a byte */
    size_t rowb = ((size_t)w * 2 + 7) / 8;
    uint8_t *packed = calloc((size_t)h, rowb);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            packed[y * rowb + x / 4] |= (uint8_t)(ix[y * w + x] << (6 - 2 * (x % 4)));
    char *pp2 = ti_write_png_raw(dir, "pal2.png", w, h, 2, 3, packed, plte, 4);
    expect_exact(pp2, 3, want, h, w);

    /* 16-bit gray + alpha to one channel */
    uint8_t *ga16 = malloc((size_t)h * w * 4), *g = malloc((size_t)h * w);
    for (int i = 0; i < h * w; i++) {
        g[i] = (uint8_t)(i * 3);
        ga16[4 * i] = g[i], ga16[4 * i + 1] = 0x80, ga16[4 * i + 2] = 0x10, ga16[4 * i + 3] = 0;
    }
    char *pga = ti_write_png_raw(dir, "ga16.png", w, h, 16, 4, ga16, NULL, 0);
    expect_exact(pga, 1, g, h, w);
    free(rgb), free(rows16), free(ix), free(want), free(packed), free(ga16), free(g);
    free(p16), free(pp), free(pp2), free(pga);
}

Test(image, bmp_tga_gif_psd_pnm_exact)
{
    const int h = 17, w = 21;
    uint8_t *rgb = ti_picture(h, w, 3, 6), *gray = ti_picture(h, w, 1, 7);
    char *bmp = path_join(dir, "a.bmp");
    cr_assert(stbi_write_bmp(bmp, w, h, 3, rgb));
    expect_exact(bmp, 3, rgb, h, w);

    char *tga_rle = path_join(dir, "rle.tga"), *tga = path_join(dir, "raw.tga");
    stbi_write_tga_with_rle = 1;
    cr_assert(stbi_write_tga(tga_rle, w, h, 3, rgb));
    stbi_write_tga_with_rle = 0;
    cr_assert(stbi_write_tga(tga, w, h, 1, gray));
    stbi_write_tga_with_rle = 1;
    expect_exact(tga_rle, 3, rgb, h, w);
    expect_exact(tga, 1, gray, h, w);

    uint8_t pal[768], *ix = malloc((size_t)h * w), *want = malloc((size_t)h * w * 3);
    for (int i = 0; i < 768; i++)
        pal[i] = (uint8_t)(i * 101 + 7);
    for (int i = 0; i < h * w; i++) {
        ix[i] = (uint8_t)(i * 13 + i / 5);
        memcpy(want + 3 * i, pal + 3 * ix[i], 3);
    }
    char *gif = ti_write_gif(dir, "a.gif", ix, h, w, pal);
    expect_exact(gif, 3, want, h, w);

    char *psd8 = ti_write_psd(dir, "a8.psd", rgb, h, w, 8);
    char *psd16 = ti_write_psd(dir, "a16.psd", rgb, h, w, 16);
    expect_exact(psd8, 3, rgb, h, w);
    expect_exact(psd16, 3, rgb, h, w);

    char *ppm = ti_write_pnm(dir, "a.ppm", rgb, h, w, 3, 255);
    char *pgm16 = ti_write_pnm(dir, "a.pgm", gray, h, w, 1, 65535);
    expect_exact(ppm, 3, rgb, h, w);
    expect_exact(pgm16, 1, gray, h, w);

    /* the extension means nothing: a PNG named .jpg is read as PNG */
    char *liar = ti_write_png(dir, "liar.jpg", rgb, h, w, 3);
    expect_exact(liar, 3, rgb, h, w);
    free(rgb), free(gray), free(ix), free(want);
    free(bmp), free(tga_rle), free(tga), free(gif), free(psd8), free(psd16), free(ppm), free(pgm16),
        free(liar);
}

Test(image, palette_bmp_both_row_orders_and_short_png_palette)
{
    const int h = 5, w = 7;
    const uint8_t pal[9] = {10, 20, 30, 200, 100, 50, 0, 255, 128};
    uint8_t ix[35], want[35 * 3];
    for (int i = 0; i < h * w; i++) {
        ix[i] = (uint8_t)((i * 5 + i / 3) % 3);
        memcpy(want + 3 * i, pal + 3 * ix[i], 3);
    }
    char *up = ti_write_bmp8(dir, "up.bmp", ix, h, w, pal, 3, 0);
    char *down = ti_write_bmp8(dir, "down.bmp", ix, h, w, pal, 3, 1);
    expect_exact(up, 3, want, h, w);
    expect_exact(down, 3, want, h, w);
    /* a PNG index past the end of its palette reads black (as in PIL), the
     * same every time: stb_image alone would read uninitialised memory */
    ix[4] = 9;
    memset(want + 12, 0, 3);
    char *png = ti_write_png_raw(dir, "short.png", w, h, 8, 3, ix, pal, 3);
    expect_exact(png, 3, want, h, w);
    free(up), free(down), free(png);
}

Test(image, channel_conversion_uses_luma_weights)
{
    const int h = 8, w = 32;
    uint8_t *rgb = ti_noise((size_t)h * w * 3, 8), *luma = malloc((size_t)h * w);
    for (int i = 0; i < h * w; i++) { /* 0.299 R + 0.587 G + 0.114 B, rounded */
        double y = 0.299 * rgb[3 * i] + 0.587 * rgb[3 * i + 1] + 0.114 * rgb[3 * i + 2];
        luma[i] = (uint8_t)(y + 0.5);
    }
    char *p3 = ti_write_png(dir, "c.png", rgb, h, w, 3);
    int bh, bw;
    errbuf e;
    img_params p = plain(1);
    uint8_t *got = ti_base(p3, &p, &bh, &bw, &e);
    cr_assert_not_null(got, "%s", e.msg);
    for (int i = 0; i < h * w; i++) /* Q16 weights may round differently at .5 */
        cr_assert(abs(got[i] - luma[i]) <= 1, "pixel %d: %d vs %d", i, got[i], luma[i]);
    cr_assert_eq(got[0], img_luma(rgb[0], rgb[1], rgb[2]));
    cr_assert_eq(img_luma(255, 255, 255), 255);
    cr_assert_eq(img_luma(0, 0, 0), 0);
    free(got);

    /* gray to RGB replicates */
    char *p1 = ti_write_png(dir, "g.png", luma, h, w, 1);
    p = plain(3);
    got = ti_base(p1, &p, &bh, &bw, &e);
    cr_assert_not_null(got, "%s", e.msg);
    for (int i = 0; i < h * w; i++)
        cr_assert(got[3 * i] == luma[i] && got[3 * i + 1] == luma[i] && got[3 * i + 2] == luma[i]);
    free(got), free(rgb), free(luma), free(p1), free(p3);
}

Test(image, jpeg_baseline_progressive_gray_within_tolerance)
{
    const int h = 96, w = 128;
    uint8_t *rgb = ti_picture(h, w, 3, 9), *gray = ti_picture(h, w, 1, 10);
    char *base = ti_write_jpeg(dir, "b.jpg", rgb, h, w, TJPF_RGB, TJSAMP_444, 95, 0);
    char *prog =
        ti_write_jpeg(dir, "p.jpg", rgb, h, w, TJPF_RGB, TJSAMP_420, 90, TJFLAG_PROGRESSIVE);
    char *gj = ti_write_jpeg(dir, "g.jpg", gray, h, w, TJPF_GRAY, TJSAMP_GRAY, 95, 0);
    const char *paths[2] = {base, prog};
    for (int k = 0; k < 2; k++) {
        int bh, bw, th, tw, mx;
        errbuf e;
        img_params p = plain(3);
        uint8_t *got = ti_base(paths[k], &p, &bh, &bw, &e);
        cr_assert_not_null(got, "%s", e.msg);
        cr_assert(bh == h && bw == w);
        double md = ti_mean_diff(got, rgb, (size_t)h * w * 3, &mx);
        cr_assert_lt(md, 3.0, "%s: mean error %.2f", paths[k], md);
        cr_assert_lt(mx, 60, "%s: max error %d", paths[k], mx);
        /* and exactly what TurboJPEG itself gives at full size */
        uint8_t *ref = ti_tj_decode(paths[k], TJPF_RGB, &th, &tw);
        cr_assert_eq(memcmp(got, ref, (size_t)h * w * 3), 0, "%s", paths[k]);
        free(ref), free(got);
    }
    int bh, bw, mx;
    errbuf e;
    img_params p = plain(1);
    uint8_t *g1 = ti_base(gj, &p, &bh, &bw, &e);
    cr_assert_not_null(g1, "%s", e.msg);
    cr_assert_lt(ti_mean_diff(g1, gray, (size_t)h * w, &mx), 2.0);
    p = plain(3);
    uint8_t *g3 = ti_base(gj, &p, &bh, &bw, &e);
    cr_assert_not_null(g3, "%s", e.msg);
    for (int i = 0; i < h * w; i++)
        cr_assert(g3[3 * i] == g1[i] && g3[3 * i + 1] == g1[i] && g3[3 * i + 2] == g1[i]);
    /* a colour JPEG read as gray is close to the luma of its RGB decode */
    uint8_t *c1 = ti_base(base, &(img_params){.channels = 1}, &bh, &bw, &e);
    cr_assert_not_null(c1, "%s", e.msg);
    uint8_t *c3 = ti_base(base, &(img_params){.channels = 3}, &bh, &bw, &e);
    for (int i = 0; i < h * w; i++)
        cr_assert(abs(c1[i] - img_luma(c3[3 * i], c3[3 * i + 1], c3[3 * i + 2])) <= 2, "pixel %d",
                  i);
    free(g1), free(g3), free(c1), free(c3), free(rgb), free(gray), free(base), free(prog), free(gj);
}

Test(image, cmyk_jpeg_is_read_as_adobe_inverted)
{
    const int h = 32, w = 48;
    uint8_t *cmyk = malloc((size_t)h * w * 4), *want = malloc((size_t)h * w * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) { /* smooth, so JPEG error stays small */
            uint8_t *q = cmyk + 4 * (y * w + x);
            q[0] = (uint8_t)(40 + 5 * x), q[1] = (uint8_t)(200 - 4 * y),
            q[2] = (uint8_t)(90 + 2 * x + y);
            q[3] = (uint8_t)(255 - 3 * y);
            for (int k = 0; k < 3; k++) /* stored values inverted: R = C * K / 255 */
                want[3 * (y * w + x) + k] = (uint8_t)(q[k] * q[3] / 255.0 + 0.5);
        }
    char *path = ti_write_jpeg(dir, "cmyk.jpg", cmyk, h, w, TJPF_CMYK, TJSAMP_444, 98, 0);
    int bh, bw, mx, ph, pw, pc;
    errbuf e;
    cr_assert_eq(img_probe(path, 0, &pw, &ph, &pc, &e), 0, "%s", e.msg);
    cr_assert(pw == w && ph == h && pc == 3);
    uint8_t *got = ti_base(path, &(img_params){.channels = 3}, &bh, &bw, &e);
    cr_assert_not_null(got, "%s", e.msg);
    double md = ti_mean_diff(got, want, (size_t)h * w * 3, &mx);
    cr_assert_lt(md, 2.0, "mean error %.2f", md);
    cr_assert_lt(mx, 16, "max error %d", mx);
    uint8_t *g = ti_base(path, &(img_params){.channels = 1}, &bh, &bw, &e);
    cr_assert_not_null(g, "%s", e.msg);
    for (int i = 0; i < h * w; i++)
        cr_assert_eq(g[i], img_luma(got[3 * i], got[3 * i + 1], got[3 * i + 2]));
    free(cmyk), free(want), free(got), free(g), free(path);
}

Test(image, dct_scale_choice)
{
    int sh, sw;
    img_jpeg_scaled_size(512, 384, 96, 128, &sh, &sw); /* E1: exactly 1/4 */
    cr_assert(sh == 96 && sw == 128, "%dx%d", sh, sw);
    img_jpeg_scaled_size(512, 384, 97, 128, &sh, &sw); /* one more row: 3/8 */
    cr_assert(sh == 144 && sw == 192, "%dx%d", sh, sw);
    img_jpeg_scaled_size(512, 384, 48, 64, &sh, &sw);
    cr_assert(sh == 48 && sw == 64);
    img_jpeg_scaled_size(512, 384, 10, 10, &sh, &sw); /* 1/8 is the floor */
    cr_assert(sh == 48 && sw == 64);
    img_jpeg_scaled_size(512, 384, 300, 300, &sh, &sw); /* 7/8: 448 x 336 */
    cr_assert(sh == 336 && sw == 448, "%dx%d", sh, sw);
    img_jpeg_scaled_size(512, 384, 400, 600, &sh, &sw); /* upscale: full size */
    cr_assert(sh == 384 && sw == 512);
    img_jpeg_scaled_size(500, 375, 94, 125, &sh, &sw); /* rounds up: ceil(375 / 4) */
    cr_assert(sh == 94 && sw == 125);
    img_jpeg_scaled_size(512, 384, 0, 0, &sh, &sw);
    cr_assert(sh == 384 && sw == 512);
}

Test(image, dct_scaled_decode_close_to_full_decode_and_resize)
{
    const int h = 384, w = 512;
    uint8_t *rgb = ti_picture(h, w, 3, 11);
    char *path = ti_write_jpeg(dir, "e1.jpg", rgb, h, w, TJPF_RGB, TJSAMP_420, 90, 0);
    const int sizes[3][2] = {{96, 128}, {120, 150}, {64, 64}};
    for (int k = 0; k < 3; k++) {
        img_params p = {.channels = 3, .resize_h = sizes[k][0], .resize_w = sizes[k][1]};
        int bh, bw, fh, fw, mx;
        errbuf e;
        uint8_t *dct = ti_base(path, &p, &bh, &bw, &e);
        cr_assert_not_null(dct, "%s", e.msg);
        p.full_decode = 1;
        uint8_t *full = ti_base(path, &p, &fh, &fw, &e);
        cr_assert_not_null(full, "%s", e.msg);
        cr_assert(bh == sizes[k][0] && bw == sizes[k][1] && fh == bh && fw == bw);
        double md = ti_mean_diff(dct, full, (size_t)bh * bw * 3, &mx);
        cr_assert_lt(md, 1.0, "%dx%d: mean difference %.2f", bh, bw, md);
        cr_assert_lt(mx, 24, "%dx%d: max difference %d", bh, bw, mx);
        cr_assert_gt(md, 0.0, "the two paths cannot be identical"); /* really two paths */
        free(dct), free(full);
    }
    free(rgb), free(path);
}

Test(image, probe_reports_header_facts)
{
    uint8_t *rgb = ti_picture(30, 40, 3, 12), *gray = ti_picture(30, 40, 1, 12);
    char *a = ti_write_jpeg(dir, "a.jpg", rgb, 30, 40, TJPF_RGB, TJSAMP_420, 80, 0);
    char *b = ti_write_jpeg(dir, "b.jpg", gray, 30, 40, TJPF_GRAY, TJSAMP_GRAY, 80, 0);
    char *c = ti_write_png(dir, "c.png", gray, 30, 40, 1);
    char *d = ti_write_png(dir, "d.png", rgb, 30, 40, 3);
    const char *paths[4] = {a, b, c, d};
    const int chans[4] = {3, 1, 1, 3};
    for (int k = 0; k < 4; k++) {
        int w, h, ch;
        errbuf e;
        cr_assert_eq(img_probe(paths[k], 0, &w, &h, &ch, &e), 0, "%s", e.msg);
        cr_assert(w == 40 && h == 30 && ch == chans[k], "%s: %d %d %d", paths[k], w, h, ch);
    }
    free(rgb), free(gray), free(a), free(b), free(c), free(d);
}

/* The determinism contract: a sample depends only on its rng key, and
 * lazy loading equals preload's base + augment byte for byte. */
Test(image, same_key_same_sample_and_lazy_equals_preload)
{
    uint8_t *rgb = ti_picture(120, 160, 3, 13);
    char *path = ti_write_jpeg(dir, "s.jpg", rgb, 120, 160, TJPF_RGB, TJSAMP_420, 90, 0);
    img_params p = {.channels = 3,
                    .resize_h = 72,
                    .resize_w = 96,
                    .crop_h = 48,
                    .crop_w = 40,
                    .random_crop = 1,
                    .hflip = 0.5f};
    img_ctx *lazy = img_ctx_create(), *pre = img_ctx_create();
    const uint8_t *base;
    int bh, bw;
    errbuf e;
    cr_assert_eq(img_load_base(pre, path, &p, &base, &bh, &bw, &e), 0, "%s", e.msg);
    cr_assert(bh == 72 && bw == 96);
    int oh, ow;
    img_output_size(&p, 0, 0, &oh, &ow);
    cr_assert(oh == 48 && ow == 40);
    size_t n = (size_t)3 * oh * ow;
    uint8_t *a = malloc(n), *b = malloc(n), *a2 = malloc(n);
    int distinct = 0;
    for (uint64_t idx = 0; idx < 40; idx++) {
        rng r1 = rng_keyed(7, RNG_AUGMENT, 3, idx), r2 = r1, r3 = r1;
        cr_assert_eq(img_load(lazy, path, &p, &r1, a, oh, ow, &e), 0, "%s", e.msg);
        cr_assert_eq(img_augment(b, oh, ow, base, bh, bw, &p, &r2, &e), 0, "%s", e.msg);
        cr_assert_eq(memcmp(a, b, n), 0, "sample %llu: lazy != preload", (unsigned long long)idx);
        cr_assert_eq(r1.s, r2.s, "both drew the same number of times");
        cr_assert_eq(img_load(lazy, path, &p, &r3, a2, oh, ow, &e), 0, "%s", e.msg);
        cr_assert_eq(memcmp(a, a2, n), 0, "same key, different sample");
        if (idx > 0 && memcmp(a, b, n) == 0) {
            rng rp = rng_keyed(7, RNG_AUGMENT, 3, idx - 1);
            uint8_t *prev = malloc(n);
            img_augment(prev, oh, ow, base, bh, bw, &p, &rp, &e);
            distinct += memcmp(prev, a, n) != 0;
            free(prev);
        }
    }
    cr_assert_gt(distinct, 30, "different keys should give different crops");
    img_ctx_free(lazy), img_ctx_free(pre);
    free(a), free(b), free(a2), free(rgb), free(path);
}
