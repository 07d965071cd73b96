/* test_image_geom.c — resampling against hand-computed values and an
 * independent floating-point reference, crop placement (torchvision's
 * rounding), padding, flip, the rng draw order, and the size helpers. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "image/image.h"
#include "image/internal.h"
#include "image/resize.h"
#include "tests/support/helpers.h"
#include "tests/support/images.h"

static char *dir;
static void setup(void) { dir = tmpdir_make(); }
static void teardown(void) { tmpdir_remove(dir); }
TestSuite(image_geom, .init = setup, .fini = teardown, .timeout = 60);

static uint8_t *resize_full(const uint8_t *src, int sh, int sw, int c, int dh, int dw)
{
    resize_plan plan = {0};
    uint8_t *out = malloc((size_t)dh * dw * c);
    resize_apply(&plan, out, (size_t)dw * c, dh, dw, 0, 0, dh, dw, src, sh, sw, c);
    resize_plan_free(&plan);
    return out;
}

Test(image_geom, resize_known_values)
{
    /* 1x4 -> 1x2: a triangle of radius 2, renormalised at the edge:
     * (3*0 + 3*70 + 1*140) / 7 = 50, (1*70 + 3*140 + 3*210) / 7 = 160 */
    const uint8_t row4[4] = {0, 70, 140, 210};
    uint8_t *o = resize_full(row4, 1, 4, 1, 1, 2);
    cr_assert(o[0] == 50 && o[1] == 160, "%d %d", o[0], o[1]);
    free(o);
    /* 1x6 -> 1x2, radius 3: weights .25 .375 .25 .125 -> 37.5 rounds up to 38,
     * and .125 .25 .375 .25 -> 112.5 -> 113 (PIL gives the same) */
    const uint8_t row6[6] = {0, 30, 60, 90, 120, 150};
    o = resize_full(row6, 1, 6, 1, 1, 2);
    cr_assert(o[0] == 38 && o[1] == 113, "%d %d", o[0], o[1]);
    free(o);
    /* enlarging is plain bilinear with clamped edges */
    const uint8_t row2[2] = {0, 100};
    o = resize_full(row2, 1, 2, 1, 1, 4);
    cr_assert(o[0] == 0 && o[1] == 25 && o[2] == 75 && o[3] == 100);
    free(o);
    const uint8_t sq[4] = {0, 100, 100, 200};
    const uint8_t want[16] = {0,  25,  75,  100, 25,  50,  100, 125,
                              75, 100, 150, 175, 100, 125, 175, 200};
    o = resize_full(sq, 2, 2, 1, 4, 4);
    cr_assert_eq(memcmp(o, want, 16), 0);
    free(o);
    /* the same along y (a column) and per channel (3 interleaved) */
    o = resize_full(row4, 4, 1, 1, 2, 1);
    cr_assert(o[0] == 50 && o[1] == 160);
    free(o);
    uint8_t rgb4[12];
    for (int i = 0; i < 4; i++)
        rgb4[3 * i] = row4[i], rgb4[3 * i + 1] = row4[3 - i], rgb4[3 * i + 2] = 9;
    o = resize_full(rgb4, 1, 4, 3, 1, 2);
    cr_assert(o[0] == 50 && o[3] == 160 && o[1] == 160 && o[4] == 50 && o[2] == 9 && o[5] == 9);
    free(o);
}

Test(image_geom, resize_constant_stays_constant)
{
    const int sizes[][4] = {{97, 53, 31, 17}, {10, 10, 33, 7}, {5, 300, 5, 3}, {1, 1, 9, 4}};
    for (int k = 0; k < 4; k++) {
        int sh = sizes[k][0], sw = sizes[k][1], dh = sizes[k][2], dw = sizes[k][3];
        uint8_t *src = malloc((size_t)sh * sw * 3);
        memset(src, 201, (size_t)sh * sw * 3);
        uint8_t *o = resize_full(src, sh, sw, 3, dh, dw);
        for (int i = 0; i < dh * dw * 3; i++)
            cr_assert_eq(o[i], 201, "%dx%d -> %dx%d", sh, sw, dh, dw);
        free(src), free(o);
    }
}

/* The definition, in doubles: out(y, x) = sum_j,i tri_y(j) tri_x(i) src(j, i)
 * / (sum tri_y)(sum tri_x), each triangle of radius max(scale, 1) centred on
 * (o + 0.5) * scale in pixel-centre coordinates. */
static double ref_weight(int j, int o, double scale)
{
    double r = scale > 1 ? scale : 1, t = fabs(((double)j + 0.5 - ((double)o + 0.5) * scale) / r);
    return t < 1 ? 1 - t : 0;
}

Test(image_geom, resize_matches_a_float_reference)
{
    const int cases[][4] = {{40, 60, 13, 17}, {31, 29, 64, 50}, {96, 128, 32, 45}, {7, 50, 21, 9}};
    for (int k = 0; k < 4; k++) {
        int sh = cases[k][0], sw = cases[k][1], dh = cases[k][2], dw = cases[k][3];
        uint8_t *src = ti_noise((size_t)sh * sw, 100 + k);
        uint8_t *o = resize_full(src, sh, sw, 1, dh, dw);
        double sy = (double)sh / dh, sx = (double)sw / dw, total = 0;
        for (int y = 0; y < dh; y++)
            for (int x = 0; x < dw; x++) {
                double num = 0, wy = 0, wx = 0;
                for (int j = 0; j < sh; j++)
                    wy += ref_weight(j, y, sy);
                for (int i = 0; i < sw; i++)
                    wx += ref_weight(i, x, sx);
                for (int j = 0; j < sh; j++) {
                    double a = ref_weight(j, y, sy);
                    if (a == 0)
                        continue;
                    for (int i = 0; i < sw; i++)
                        num += a * ref_weight(i, x, sx) * src[j * sw + i];
                }
                double d = fabs(num / (wy * wx) - o[y * dw + x]);
                total += d;
                /* rounding the u8 intermediate and the result: at most 1 */
                cr_assert_leq(d, 1.0 + 1e-6, "%dx%d -> %dx%d at (%d, %d): %.2f vs %d", sh, sw, dh,
                              dw, y, x, num / (wy * wx), o[y * dw + x]);
            }
        cr_assert_lt(total / (dh * dw), 0.5, "mean error %.3f", total / (dh * dw));
        free(src), free(o);
    }
}

Test(image_geom, resize_window_equals_window_of_full)
{
    const int sh = 61, sw = 83, dh = 29, dw = 37, c = 3;
    uint8_t *src = ti_noise((size_t)sh * sw * c, 5);
    uint8_t *full = resize_full(src, sh, sw, c, dh, dw);
    resize_plan plan = {0};
    const int win[][4] = {{0, 0, 29, 37}, {3, 5, 20, 11}, {28, 36, 1, 1}, {10, 0, 5, 37}};
    for (int k = 0; k < 4; k++) {
        int y0 = win[k][0], x0 = win[k][1], oh = win[k][2], ow = win[k][3];
        uint8_t *o = malloc((size_t)oh * ow * c);
        resize_apply(&plan, o, (size_t)ow * c, dh, dw, y0, x0, oh, ow, src, sh, sw, c);
        for (int y = 0; y < oh; y++)
            cr_assert_eq(memcmp(o + (size_t)y * ow * c, full + ((size_t)(y0 + y) * dw + x0) * c,
                                (size_t)ow * c),
                         0, "window %d row %d", k, y);
        free(o);
    }
    resize_plan_free(&plan);
    free(src), free(full);
}

/* The vector passes (AVX2, where the CPU has it) give the portable loops'
 * bytes exactly, over geometries that take every path: either pass first,
 * rows one to one, enlarging, 40-tap shrinking, rows shorter than a vector,
 * odd output counts, windows, fractional boxes, 1, 3 and 4 channels, and
 * saturated pictures that clip. Sources are allocated to the byte, so a
 * read past a row's end shows under ASan. On a CPU without AVX2 both
 * sides are the portable loops. */
Test(image_geom, resize_vector_passes_equal_the_portable_loops)
{
    const struct {
        int sh, sw, c, dh, dw;
        double by, bx, bh, bw; /* bh == 0: resize_apply of the window below */
        int y0, x0, oh, ow;
    } g[] = {
        {300, 260, 3, 224, 224, 0, 0, 0, 0, 0, 0, 224, 224},
        {300, 260, 3, 60, 200, 0, 0, 0, 0, 0, 0, 60, 200},
        {300, 260, 3, 200, 60, 0, 0, 0, 0, 0, 0, 200, 60},
        {300, 260, 3, 224, 224, 0, 0, 0, 0, 13, 7, 101, 151},
        {333, 417, 3, 224, 224, 17.5, 31.25, 301.5, 370.75, 0, 0, 0, 0},
        {480, 360, 3, 224, 224, 200, 100, 280, 260, 0, 0, 0, 0},
        {700, 900, 3, 20, 23, 0, 0, 0, 0, 0, 0, 20, 23},
        {20, 15, 3, 77, 91, 0, 0, 0, 0, 0, 0, 77, 91},
        {1, 200, 3, 1, 50, 0, 0, 0, 0, 0, 0, 1, 50},
        {37, 200, 3, 37, 51, 0, 0, 0, 0, 0, 0, 37, 51},
        {5, 9, 3, 3, 4, 0, 0, 0, 0, 0, 0, 3, 4},
        {90, 11, 3, 31, 11, 0, 0, 0, 0, 0, 0, 31, 11},
        {64, 45, 3, 21, 11, 0, 0, 0, 0, 0, 0, 21, 11},
        {300, 260, 1, 224, 224, 0, 0, 0, 0, 0, 0, 224, 224},
        {120, 97, 4, 50, 33, 0, 0, 0, 0, 0, 0, 50, 33},
    };
    for (size_t k = 0; k < sizeof g / sizeof g[0]; k++)
        for (int pic = 0; pic < 3; pic++) {
            const int c = g[k].c, sh = g[k].sh, sw = g[k].sw, dh = g[k].dh, dw = g[k].dw;
            const size_t n = (size_t)sh * sw * c;
            uint8_t *src = pic == 0 ? ti_picture(sh, sw, c, 40 + k) : ti_noise(n, 60 + k);
            if (pic == 2)
                memset(src, 255, n / 2); /* the top half saturated */
            const int box = g[k].bh > 0;
            const int oh = box ? dh : g[k].oh, ow = box ? dw : g[k].ow;
            const size_t ob = (size_t)oh * ow * c;
            uint8_t *o[2] = {malloc(ob), malloc(ob)};
            for (int v = 0; v < 2; v++) {
                resize_plan plan = {.scalar = v == 0};
                if (box)
                    resize_box(&plan, o[v], dh, dw, src, (size_t)sw * c, sh, sw, c, g[k].by,
                               g[k].bx, g[k].bh, g[k].bw);
                else
                    resize_apply(&plan, o[v], (size_t)ow * c, dh, dw, g[k].y0, g[k].x0, oh, ow, src,
                                 sh, sw, c);
                resize_plan_free(&plan);
            }
            size_t bad = 0;
            while (bad < ob && o[0][bad] == o[1][bad])
                bad++;
            cr_assert_eq(bad, ob, "geometry %zu picture %d: byte %zu is %d, the loops give %d", k,
                         pic, bad, bad < ob ? o[1][bad] : 0, bad < ob ? o[0][bad] : 0);
            free(src), free(o[0]), free(o[1]);
        }
}

/* A gray PNG whose pixel (y, x) holds y * 16 + x, so every crop tells where
 * it came from. */
static char *coords_png(int h, int w)
{
    uint8_t *px = malloc((size_t)h * w);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            px[y * w + x] = (uint8_t)(y * 16 + x);
    char name[32];
    snprintf(name, sizeof name, "coords%dx%d.png", h, w);
    char *p = ti_write_png(dir, name, px, h, w, 1);
    free(px);
    return p;
}

Test(image_geom, centre_crop_rounds_half_to_even)
{
    /* torchvision: top = round((H - h) / 2) with Python's rounding:
     * H - h = 7 -> round(3.5) = 4, = 5 -> round(2.5) = 2, = 6 -> 3 */
    char *path = coords_png(11, 15);
    const int cases[][4] = {{4, 10, 4, 2}, {6, 9, 2, 3}, {5, 15, 3, 0}, {11, 15, 0, 0}};
    for (int k = 0; k < 4; k++) {
        img_params p = {.channels = 1, .crop_h = cases[k][0], .crop_w = cases[k][1]};
        int bh, bw;
        errbuf e;
        uint8_t *b = ti_base(path, &p, &bh, &bw, &e);
        cr_assert_not_null(b, "%s", e.msg);
        cr_assert(bh == cases[k][0] && bw == cases[k][1]);
        for (int y = 0; y < bh; y++)
            for (int x = 0; x < bw; x++)
                cr_assert_eq(b[y * bw + x], (cases[k][2] + y) * 16 + cases[k][3] + x,
                             "crop %dx%d at (%d, %d)", bh, bw, y, x);
        free(b);
    }
    free(path);
}

Test(image_geom, pad_only_when_asked)
{
    char *path = coords_png(3, 4);
    img_params p = {.channels = 1, .crop_h = 6, .crop_w = 3};
    int bh, bw;
    errbuf e;
    uint8_t *b = ti_base(path, &p, &bh, &bw, &e);
    cr_assert_null(b);
    char want[600];
    snprintf(want, sizeof want, "%s: image is 3x4, smaller than the 6x3 crop (--pad pads it)",
             path);
    cr_assert_str_eq(e.msg, want);
    p.pad = 1; /* rows padded: image at top floor((6 - 3) / 2) = 1; columns cropped */
    b = ti_base(path, &p, &bh, &bw, &e);
    cr_assert_not_null(b, "%s", e.msg);
    cr_assert(bh == 6 && bw == 3);
    for (int y = 0; y < 6; y++)
        for (int x = 0; x < 3; x++) {
            int want_v = (y >= 1 && y < 4) ? (y - 1) * 16 + 0 + x : 0; /* left round(0.5) = 0 */
            cr_assert_eq(b[y * 3 + x], want_v, "(%d, %d)", y, x);
        }
    free(b);
    /* with a resize the message says so */
    img_params q = {.channels = 1, .resize_short = 8, .crop_h = 9, .crop_w = 9};
    cr_assert_null(ti_base(path, &q, &bh, &bw, &e));
    snprintf(want, sizeof want,
             "%s: image is 8x10 after resize, smaller than the 9x9 crop (--pad pads it)", path);
    cr_assert_str_eq(e.msg, want);
    free(path);
}

Test(image_geom, flip_and_draw_order)
{
    char *path = coords_png(12, 14);
    img_params p = {.channels = 1, .crop_h = 5, .crop_w = 6, .random_crop = 1, .hflip = 0.5f};
    img_ctx *c = img_ctx_create();
    uint8_t out[30];
    int seen_top[8] = {0}, seen_left[9] = {0}, flips = 0;
    for (uint64_t i = 0; i < 400; i++) {
        rng r = rng_keyed(3, RNG_AUGMENT, 0, i), m = r;
        errbuf e;
        cr_assert_eq(img_load(c, path, &p, &r, out, 5, 6, &e), 0, "%s", e.msg);
        /* the documented order: top, then left, then the flip */
        int top = (int)rng_below(&m, 12 - 5 + 1), left = (int)rng_below(&m, 14 - 6 + 1);
        int flip = rng_uniform(&m) < 0.5f;
        cr_assert_eq(r.s, m.s, "img_load drew a different number of times");
        for (int y = 0; y < 5; y++)
            for (int x = 0; x < 6; x++) {
                int sx = flip ? 5 - x : x;
                cr_assert_eq(out[y * 6 + x], (top + y) * 16 + left + sx);
            }
        seen_top[top]++, seen_left[left]++, flips += flip;
    }
    for (int k = 0; k < 8; k++)
        cr_assert_gt(seen_top[k], 0, "top offset %d never drawn", k);
    for (int k = 0; k < 9; k++)
        cr_assert_gt(seen_left[k], 0, "left offset %d never drawn", k);
    cr_assert(flips > 150 && flips < 250, "%d flips in 400", flips);

    /* hflip 1 always mirrors, 0 never does and draws nothing */
    img_params all = {.channels = 1, .hflip = 1.0f}, none = {.channels = 1};
    uint8_t full[12 * 14];
    rng r = rng_keyed(1, RNG_AUGMENT, 0, 0), r0 = r;
    errbuf e;
    cr_assert_eq(img_load(c, path, &all, &r, full, 12, 14, &e), 0, "%s", e.msg);
    for (int y = 0; y < 12; y++)
        for (int x = 0; x < 14; x++)
            cr_assert_eq(full[y * 14 + x], y * 16 + 13 - x);
    r = r0;
    cr_assert_eq(img_load(c, path, &none, &r, full, 12, 14, &e), 0, "%s", e.msg);
    cr_assert_eq(r.s, r0.s, "no flip, no crop: no draws");
    cr_assert_eq(full[1], 1);
    img_ctx_free(c);
    free(path);
}

/* The 3-channel HWC -> CHW copy (a vector kernel on AVX2 CPUs, 16 pixels
 * at a time) against a loop written here: rows narrower and wider than a
 * vector and not multiples of it, crops inside the image and padded
 * canvases, flipped and not, at every draw. */
Test(image_geom, rgb_crop_flip_chw_equals_a_reference_loop)
{
    const int sizes[][4] = {{9, 15, 9, 15},     {20, 16, 20, 16},     {31, 17, 23, 17},
                            {40, 250, 35, 224}, {224, 224, 224, 224}, {12, 40, 16, 47},
                            {50, 33, 64, 64},   {30, 20, 10, 37},     {3, 1, 3, 1}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int bh = sizes[k][0], bw = sizes[k][1], oh = sizes[k][2], ow = sizes[k][3];
        const size_t n = (size_t)3 * oh * ow;
        uint8_t *base = ti_noise((size_t)bh * bw * 3, 70 + k), *out = malloc(n), *want = malloc(n);
        img_params p = {
            .channels = 3, .crop_h = oh, .crop_w = ow, .random_crop = 1, .pad = 1, .hflip = 0.5f};
        for (uint64_t i = 0; i < 12; i++) {
            rng r = rng_keyed(5, RNG_AUGMENT, k, i), m = r;
            errbuf e;
            cr_assert_eq(img_augment(out, oh, ow, base, bh, bw, &p, &r, &e), 0, "%s", e.msg);
            /* the draws: top, left (offsets in the image, or of the image in
             * the canvas), then the flip */
            int oy = (int)rng_below(&m, (uint32_t)abs(bh - oh) + 1),
                ox = (int)rng_below(&m, (uint32_t)abs(bw - ow) + 1);
            int flip = rng_uniform(&m) < 0.5f;
            for (int ch = 0; ch < 3; ch++)
                for (int y = 0; y < oh; y++)
                    for (int x = 0; x < ow; x++) {
                        int xs = flip ? ow - 1 - x : x; /* canvas column before the flip */
                        int sy = bh >= oh ? y + oy : y - oy, sx = bw >= ow ? xs + ox : xs - ox;
                        want[((size_t)ch * oh + y) * ow + x] =
                            sy >= 0 && sy < bh && sx >= 0 && sx < bw
                                ? base[((size_t)sy * bw + sx) * 3 + ch]
                                : 0;
                    }
            size_t at = 0;
            while (at < n && out[at] == want[at])
                at++;
            cr_assert_eq(at, n, "%dx%d -> %dx%d draw %d flip %d: byte %zu", bh, bw, oh, ow, (int)i,
                         flip, at);
        }
        free(base), free(out), free(want);
    }
}

Test(image_geom, random_crop_with_padding_places_image_in_canvas)
{
    char *path = coords_png(4, 10);
    img_params p = {.channels = 3, .crop_h = 7, .crop_w = 6, .random_crop = 1, .pad = 1};
    img_ctx *c = img_ctx_create();
    uint8_t out[3 * 7 * 6];
    for (uint64_t i = 0; i < 50; i++) {
        rng r = rng_keyed(9, RNG_AUGMENT, 1, i), m = r;
        errbuf e;
        cr_assert_eq(img_load(c, path, &p, &r, out, 7, 6, &e), 0, "%s", e.msg);
        int dy = (int)rng_below(&m, 7 - 4 + 1), left = (int)rng_below(&m, 10 - 6 + 1);
        for (int ch = 0; ch < 3; ch++)
            for (int y = 0; y < 7; y++)
                for (int x = 0; x < 6; x++) {
                    int in = y >= dy && y < dy + 4;
                    cr_assert_eq(out[(ch * 7 + y) * 6 + x], in ? (y - dy) * 16 + left + x : 0);
                }
    }
    p.pad = 0;
    rng r = rng_keyed(9, RNG_AUGMENT, 1, 0);
    errbuf e;
    cr_assert_eq(img_load(c, path, &p, &r, out, 7, 6, &e), -1);
    char want[600];
    snprintf(want, sizeof want, "%s: image is 4x10, smaller than the 7x6 crop (--pad pads it)",
             path);
    cr_assert_str_eq(e.msg, want);
    img_ctx_free(c);
    free(path);
}

Test(image_geom, shorter_side_resize_and_sizes)
{
    uint8_t *px = ti_picture(384, 512, 3, 4);
    char *path = ti_write_jpeg(dir, "w.jpg", px, 384, 512, TJPF_RGB, TJSAMP_420, 85, 0);
    img_params p = {.channels = 3, .resize_short = 100}; /* 100 x int(100 * 512 / 384) */
    int bh, bw;
    errbuf e;
    uint8_t *b = ti_base(path, &p, &bh, &bw, &e);
    cr_assert_not_null(b, "%s", e.msg);
    cr_assert(bh == 100 && bw == 133, "%dx%d", bh, bw);
    free(b);
    int oh, ow;
    cr_assert_eq(img_base_size(&p, 0, 0, &bh, &bw), -1);
    cr_assert_eq(img_base_size(&p, 384, 512, &bh, &bw), 0);
    cr_assert(bh == 100 && bw == 133);
    img_output_size(&p, 512, 384, &oh, &ow); /* portrait */
    cr_assert(oh == 133 && ow == 100, "%dx%d", oh, ow);
    p.crop_h = p.crop_w = 64;
    img_output_size(&p, 0, 0, &oh, &ow);
    cr_assert(oh == 64 && ow == 64);
    cr_assert_eq(img_base_size(&p, 0, 0, &bh, &bw), 0);
    cr_assert(bh == 64 && bw == 64);
    p.random_crop = 1; /* the base is the resized image */
    cr_assert_eq(img_base_size(&p, 0, 0, &bh, &bw), -1);
    img_params q = {.channels = 1,
                    .resize_h = 96,
                    .resize_w = 128,
                    .crop_h = 64,
                    .crop_w = 64,
                    .random_crop = 1};
    cr_assert_eq(img_base_size(&q, 0, 0, &bh, &bw), 0);
    cr_assert(bh == 96 && bw == 128);
    img_params none = {.channels = 1};
    img_output_size(&none, 28, 28, &oh, &ow);
    cr_assert(oh == 28 && ow == 28);
    img_output_size(&none, 0, 0, &oh, &ow);
    cr_assert(oh == 0 && ow == 0);
    free(px), free(path);
}

Test(image_geom, parse_size_and_check_params)
{
    int h, w, single;
    cr_assert_eq(img_parse_size("96x128", &h, &w, &single), 0);
    cr_assert(h == 96 && w == 128 && !single);
    cr_assert_eq(img_parse_size("64", &h, &w, &single), 0);
    cr_assert(h == 64 && w == 64 && single);
    cr_assert_eq(img_parse_size("7X9", &h, &w, &single), 0);
    cr_assert(h == 7 && w == 9);
    const char *bad[] = {"",    "x",     "0",       "-3",  "96x", "x128",  "96x0",
                         "1.5", "16385", "3x16385", "12 ", " 12", "2x3x4", "abc"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(img_parse_size(bad[i], &h, &w, &single), -1, "'%s' accepted", bad[i]);

    errbuf e;
    img_params ok = {
        .channels = 3, .resize_h = 96, .resize_w = 128, .crop_h = 64, .crop_w = 64, .hflip = 0.5f};
    cr_assert_eq(img_params_check(&ok, &e), 0, "%s", e.msg);
    struct {
        img_params p;
        const char *msg;
    } cases[] = {
        {{.channels = 2}, "channels must be 1 or 3, not 2"},
        {{.channels = 3, .resize_h = 5}, "resize must be HxW with sides in 1..16384"},
        {{.channels = 3, .resize_short = 20000}, "resize must be in 1..16384"},
        {{.channels = 3, .resize_short = 5, .resize_h = 5, .resize_w = 5},
         "resize: either HxW or the shorter side, not both"},
        {{.channels = 3, .crop_w = 5}, "crop must be HxW or N with sides in 1..16384"},
        {{.channels = 3, .random_crop = 1}, "a random crop needs a crop size"},
        {{.channels = 3, .hflip = 1.5f}, "hflip must be a probability in [0, 1]"},
        {{.channels = 3, .hflip = NAN}, "hflip must be a probability in [0, 1]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(img_params_check(&cases[i].p, &e), -1);
        cr_assert_str_eq(e.msg, cases[i].msg);
    }
}
