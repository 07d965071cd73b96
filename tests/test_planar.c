/* test_planar.c — the planar decode (jpeg_region.c, image.c) of the
 * random-resized crop and of the validation recipe (resize + centre
 * crop, below the rrc tests): luma and chroma taken from libjpeg before
 * upsampling and colour conversion, resampled each at its resolution,
 * converted to RGB at the output's. Against the exact path (full decode, crop, resample) on a
 * real photograph re-encoded in every layout; the flip; the layouts that
 * fall back to the RGB decode; the vector kernels against the portable
 * loops and the colour conversion against libjpeg's own. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "image/internal.h"
#include "image/simd.h"
#include "tests/support/helpers.h"
#include "tests/support/images.h"

static char *dir;

static void setup(void) { dir = tmpdir_make(); }
static void teardown(void) { tmpdir_remove(dir); }

TestSuite(planar, .init = setup, .fini = teardown);

/* A real photograph (mate-backgrounds, installed by `make photos`; 1600 x
 * 1203) cut to h x w from its 1/2-scale decode (full scale for sizes that
 * need it), RGB; a synthetic picture where the
 * package is missing. Caller frees. */
static uint8_t *photo(int h, int w, uint64_t seed)
{
    const char *src = "/usr/share/backgrounds/mate/nature/FreshFlower.jpg";
    errbuf e;
    size_t len;
    char *bytes = access(src, R_OK) == 0 ? read_whole_file(src, &len, &e) : NULL;
    if (!bytes)
        return ti_picture(h, w, 3, seed);
    tjhandle tj = tjInitDecompress();
    int W, H, sub, cs;
    cr_assert_eq(tjDecompressHeader3(tj, (uint8_t *)bytes, len, &W, &H, &sub, &cs), 0);
    const int half = (H + 1) / 2 >= h && (W + 1) / 2 >= w;
    const int sw = half ? (W + 1) / 2 : W, sh = half ? (H + 1) / 2 : H;
    cr_assert(sh >= h && sw >= w, "%s is %dx%d", src, H, W);
    uint8_t *full = malloc((size_t)sh * sw * 3), *px = malloc((size_t)h * w * 3);
    cr_assert_eq(tjDecompress2(tj, (uint8_t *)bytes, len, full, sw, 0, sh, TJPF_RGB, 0), 0);
    const int y0 = (int)(seed * 37 % (uint64_t)(sh - h + 1)),
              x0 = (int)(seed * 53 % (uint64_t)(sw - w + 1));
    for (int y = 0; y < h; y++)
        memcpy(px + (size_t)y * w * 3, full + ((size_t)(y0 + y) * sw + x0) * 3, (size_t)w * 3);
    tjDestroy(tj);
    free(full), free(bytes);
    return px;
}

/* Saturated colour squares of `side` pixels over a soft gradient: chroma
 * edges everywhere, where a misplaced chroma box shows. Caller frees. */
static uint8_t *squares(int h, int w, int side)
{
    static const uint8_t pal[6][3] = {{220, 30, 40},  {30, 180, 60},  {40, 60, 210},
                                      {230, 210, 40}, {200, 40, 190}, {30, 190, 200}};
    uint8_t *px = malloc((size_t)h * w * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const uint8_t *c = pal[(y / side * 5 + x / side) % 6];
            for (int ch = 0; ch < 3; ch++)
                px[((size_t)y * w + x) * 3 + ch] = (uint8_t)(c[ch] * 3 / 4 + (x + y) % 64);
        }
    return px;
}

static img_params rrc_params(int s, int decode, float hflip)
{
    img_params p = {
        .channels = 3, .crop_h = s, .crop_w = s, .rrc = 1, .hflip = hflip, .decode = decode};
    p.rrc_scale[0] = 0.08f, p.rrc_scale[1] = 1.0f;
    p.rrc_ratio[0] = 0.75f, p.rrc_ratio[1] = 4.0f / 3.0f;
    return p;
}

/* Sample k of `path` through context c (planar or not). */
static void load(img_ctx *c, const char *path, const img_params *p, int k, uint8_t *out)
{
    errbuf e = {{0}};
    rng r = rng_keyed(3, RNG_AUGMENT, 2, (uint64_t)k);
    cr_assert_eq(img_load(c, path, p, &r, out, p->crop_h, p->crop_w, &e), 0, "%s", e.msg);
}

/* Within the bound of the exact path (mean <= 0.5 levels, 99th
 * percentile <= 4) on a photograph in every layout libjpeg-turbo writes
 * (and within 1 / 10 on saturated colour squares),
 * baseline and progressive, at the full scale and at DCT scales (the
 * 1100 x 1500 file: auto takes 4/8 for large boxes; fast smaller ones);
 * the planar path is taken (it differs from the RGB decode, which is the
 * exact bytes at full size); grey is the exact path within a level (only
 * the resampler's pass order differs). */
Test(planar, stays_within_the_bound_of_the_exact_path_in_every_layout)
{
    struct {
        int h, w, sub, flags, pf, decode, squares;
    } kinds[] = {
        {333, 501, TJSAMP_420, 0, TJPF_RGB, IMG_DECODE_AUTO, 1},
        {401, 299, TJSAMP_422, 0, TJPF_RGB, IMG_DECODE_AUTO, 1},
        {333, 501, TJSAMP_420, 0, TJPF_RGB, IMG_DECODE_AUTO, 0},
        {377, 505, TJSAMP_420, TJFLAG_PROGRESSIVE, TJPF_RGB, IMG_DECODE_AUTO, 0},
        {401, 299, TJSAMP_422, 0, TJPF_RGB, IMG_DECODE_AUTO, 0},
        {480, 357, TJSAMP_444, 0, TJPF_RGB, IMG_DECODE_AUTO, 0},
        {350, 421, TJSAMP_440, 0, TJPF_RGB, IMG_DECODE_AUTO, 0},
        {345, 470, TJSAMP_411, 0, TJPF_RGB, IMG_DECODE_AUTO, 0},
        {350, 420, TJSAMP_GRAY, 0, TJPF_GRAY, IMG_DECODE_AUTO, 0},
        {1100, 1500, TJSAMP_420, 0, TJPF_RGB, IMG_DECODE_AUTO, 0},
        {1100, 1500, TJSAMP_420, TJFLAG_PROGRESSIVE, TJPF_RGB, IMG_DECODE_FAST, 0},
    };
    const int S = 224;
    const size_t n = 3 * (size_t)S * S;
    uint8_t *ref = malloc(n), *got = malloc(n), *rgb = malloc(n);
    img_ctx *c = img_ctx_create(), *through_rgb = img_ctx_create();
    img_ctx_set_planar(through_rgb, 0);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const int h = kinds[i].h, w = kinds[i].w;
        uint8_t *px = kinds[i].squares ? squares(h, w, 41) : photo(h, w, 1 + i);
        if (kinds[i].pf == TJPF_GRAY)
            for (size_t j = 0; j < (size_t)h * w; j++)
                px[j] = img_luma(px[3 * j], px[3 * j + 1], px[3 * j + 2]);
        char name[32];
        snprintf(name, sizeof name, "p%zu.jpg", i);
        char *path =
            ti_write_jpeg(dir, name, px, h, w, kinds[i].pf, kinds[i].sub, 90, kinds[i].flags);
        ti_hist d = {{0}, 0};
        int differs = 0;
        for (int k = 0; k < 8; k++) {
            img_params p = rrc_params(S, IMG_DECODE_EXACT, 0.5f);
            p.full_decode = 1;
            load(c, path, &p, k, ref);
            p.full_decode = 0;
            p.decode = kinds[i].decode;
            load(c, path, &p, k, got);
            load(through_rgb, path, &p, k, rgb);
            ti_hist_add(&d, ref, got, n);
            differs |= memcmp(got, rgb, n) != 0;
        }
        int q, mx;
        double mean = ti_hist_mean(&d, &q, &mx);
        if (kinds[i].pf == TJPF_GRAY) {
            cr_assert(mx <= 1, "%s (grey): %d levels from the exact path", name, mx);
        } else {
            /* the bound on the photograph; saturated squares put
             * chroma edges everywhere (a misplaced chroma box doubles these) */
            const double mean_max = kinds[i].squares ? 1.0 : 0.5;
            const int p99_max = kinds[i].squares ? 10 : 4;
            cr_assert(mean <= mean_max && q <= p99_max, "%s: mean %.3f, p99 %d, max %d", name, mean,
                      q, mx);
            /* 4:1:1 chroma takes the RGB path (libjpeg replicates it,
             * which the planes' resampler does not imitate) */
            if (kinds[i].sub == TJSAMP_411)
                cr_assert(!differs, "%s: 4:1:1 took the planar path", name);
            else
                cr_assert(differs, "%s: the planar path was not taken", name);
        }
        free(px), free(path);
    }
    img_ctx_free(c), img_ctx_free(through_rgb);
    free(ref), free(got), free(rgb);
}

/* The flip mirrors every row of every plane; the unflipped sample is the
 * same bytes whatever the flip probability's draw consumed. */
Test(planar, the_flip_mirrors_each_row)
{
    const int h = 333, w = 501, S = 96;
    uint8_t *px = photo(h, w, 7);
    char *path = ti_write_jpeg(dir, "f.jpg", px, h, w, TJPF_RGB, TJSAMP_420, 90, 0);
    img_ctx *c = img_ctx_create();
    uint8_t a[3 * 96 * 96], b[3 * 96 * 96];
    for (int k = 0; k < 4; k++) {
        img_params p = rrc_params(S, IMG_DECODE_AUTO, 0.0f);
        load(c, path, &p, k, a);
        p.hflip = 1.0f; /* one more draw, after the box's */
        load(c, path, &p, k, b);
        for (int ch = 0; ch < 3; ch++)
            for (int y = 0; y < S; y++)
                for (int x = 0; x < S; x++)
                    cr_assert_eq(b[((size_t)ch * S + y) * S + x],
                                 a[((size_t)ch * S + y) * S + S - 1 - x],
                                 "sample %d channel %d (%d, %d)", k, ch, y, x);
    }
    img_ctx_free(c);
    free(px), free(path);
}

/* Layouts without a planar decode here take the RGB decode, the same
 * bytes as with the planar decode off: CMYK (Adobe). One output channel of a colour
 * file is the luma plane alone, the exact grey within a level (at the same
 * DCT scale). */
Test(planar, other_layouts_take_the_rgb_decode)
{
    const int h = 240, w = 320, S = 64;
    uint8_t *px = photo(h, w, 3), *cmyk = malloc((size_t)h * w * 4);
    for (size_t j = 0; j < (size_t)h * w; j++) {
        for (int ch = 0; ch < 3; ch++)
            cmyk[4 * j + ch] = (uint8_t)(255 - px[3 * j + ch]);
        cmyk[4 * j + 3] = (uint8_t)(j % 97);
    }
    char *cm = ti_write_jpeg(dir, "cmyk.jpg", cmyk, h, w, TJPF_CMYK, TJSAMP_420, 95, 0);
    char *col = ti_write_jpeg(dir, "c.jpg", px, h, w, TJPF_RGB, TJSAMP_420, 95, 0);
    img_ctx *c = img_ctx_create(), *through_rgb = img_ctx_create();
    img_ctx_set_planar(through_rgb, 0);
    uint8_t a[3 * 64 * 64], b[3 * 64 * 64];
    for (int k = 0; k < 4; k++) {
        img_params p = rrc_params(S, IMG_DECODE_AUTO, 0.5f);
        load(c, cm, &p, k, a);
        load(through_rgb, cm, &p, k, b);
        cr_assert(memcmp(a, b, sizeof a) == 0, "CMYK sample %d", k);
        p.channels = 1;
        load(c, col, &p, k, a);
        /* these boxes take a DCT scale of 5/8 to 7/8, which the planar
         * decode rounds up to 8/8 (img_jpeg_planar_scale): the RGB path
         * at the same scale is --decode exact's */
        img_params exact = rrc_params(S, IMG_DECODE_EXACT, 0.5f);
        exact.channels = 1;
        load(through_rgb, col, &exact, k, b);
        int mx;
        ti_mean_diff(a, b, (size_t)S * S, &mx);
        cr_assert(mx <= 1, "grey of colour, sample %d: %d levels", k, mx);
    }
    img_ctx_free(c), img_ctx_free(through_rgb);
    free(px), free(cmyk), free(cm), free(col);
}

/* The conversion is libjpeg's own: a 4:4:4 file decoded to its Y, Cb, Cr
 * planes and converted here gives TurboJPEG's RGB decode byte for byte,
 * flipped or not, the vector loop and the tail (n < 32) alike. */
Test(planar, the_colour_conversion_is_libjpegs)
{
    const int h = 64, w = 250;
    uint8_t *px = photo(h, w, 5);
    for (size_t j = 0; j < (size_t)w * 3 * 8; j++) /* saturated rows: the clamping */
        px[j] = (uint8_t)(j % 3 == 0 ? 255 : j % 3 == 1 ? 0 : j * 7);
    size_t len;
    uint8_t *jpg = ti_jpeg(px, h, w, TJPF_RGB, TJSAMP_444, 95, 0, &len);
    tjhandle tj = tjInitDecompress();
    uint8_t *rgb = malloc((size_t)h * w * 3), *pl = malloc((size_t)h * w * 3);
    uint8_t *planes[3] = {pl, pl + (size_t)h * w, pl + 2 * (size_t)h * w};
    int strides[3] = {w, w, w};
    cr_assert_eq(tjDecompress2(tj, jpg, len, rgb, w, 0, h, TJPF_RGB, 0), 0);
    cr_assert_eq(tjDecompressToYUVPlanes(tj, jpg, len, planes, w, strides, h, 0), 0);
    uint8_t r[250], g[250], b[250];
    for (int y = 0; y < h; y++)
        for (int flip = 0; flip < 2; flip++)
            for (int n = w; n > 0; n = n > 40 ? 40 : n > 17 ? 17 : 0) {
                const size_t o = (size_t)y * w;
                img_ycc_row(r, g, b, planes[0] + o, planes[1] + o, planes[2] + o, n, flip);
                for (int x = 0; x < n; x++) {
                    const uint8_t *want = rgb + (o + (size_t)(flip ? n - 1 - x : x)) * 3;
                    cr_assert(r[x] == want[0] && g[x] == want[1] && b[x] == want[2],
                              "row %d n %d flip %d pixel %d: %d %d %d, libjpeg %d %d %d", y, n,
                              flip, x, r[x], g[x], b[x], want[0], want[1], want[2]);
                }
            }
    tjDestroy(tj);
    free(px), free(jpg), free(rgb), free(pl);
}

/* resize_plane gives the portable loops' bytes with the vector passes
 * (the horizontal one run over the transpose), shrinking and enlarging,
 * fractional boxes, odd sizes; img_transpose is the transpose. */
Test(planar, the_vector_plane_resampler_gives_the_portable_bytes)
{
    const int sh = 301, sw = 283;
    uint8_t *src = ti_picture(sh, sw, 1, 11);
    const struct {
        double by, bx, bh, bw;
        int dh, dw;
    } g[] = {{0, 0, 301, 283, 224, 224},   {7.25, 3.5, 250.5, 240.75, 96, 130},
             {12, 9, 100, 90, 224, 224},   {0.5, 0.5, 150.25, 141.5, 224, 224},
             {100, 20, 201, 263, 33, 200}, {3, 4, 40, 41, 64, 40}};
    for (size_t k = 0; k < sizeof g / sizeof g[0]; k++) {
        const int dh = g[k].dh, dw = g[k].dw;
        uint8_t *a = malloc((size_t)dh * dw), *b = malloc((size_t)dh * dw);
        resize_plan vec = {0}, loop = {.scalar = 1};
        resize_plane(&vec, a, (size_t)dw, dh, dw, src, (size_t)sw, sh, sw, g[k].by, g[k].bx,
                     g[k].bh, g[k].bw, k == 1 ? 1.7 : 0.0, k == 3 ? 1.3 : 0.0);
        resize_plane(&loop, b, (size_t)dw, dh, dw, src, (size_t)sw, sh, sw, g[k].by, g[k].bx,
                     g[k].bh, g[k].bw, k == 1 ? 1.7 : 0.0, k == 3 ? 1.3 : 0.0);
        size_t at = 0;
        while (at < (size_t)dh * dw && a[at] == b[at])
            at++;
        cr_assert_eq(at, (size_t)dh * dw, "geometry %zu: byte %zu is %d, the loops give %d", k, at,
                     a[at < (size_t)dh * dw ? at : 0], b[at < (size_t)dh * dw ? at : 0]);
        resize_plan_free(&vec), resize_plan_free(&loop);
        free(a), free(b);
    }
    const int dims[][2] = {{16, 32}, {37, 45}, {224, 301}, {15, 70}, {48, 31}};
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++) {
        const int rows = dims[k][0], cols = dims[k][1];
        uint8_t *t = malloc((size_t)rows * cols);
        img_transpose(t, (size_t)rows, src, (size_t)sw, rows, cols);
        for (int y = 0; y < rows; y++)
            for (int x = 0; x < cols; x++)
                cr_assert_eq(t[(size_t)x * rows + y], src[(size_t)y * sw + x], "%dx%d at %d,%d",
                             rows, cols, y, x);
        free(t);
    }
    free(src);
}

/* ------------------------------------------------ the validation recipe */

static img_params val_params(int decode)
{
    return (img_params){
        .channels = 3, .resize_short = 256, .crop_h = 224, .crop_w = 224, .decode = decode};
}

/* Sample k of `path` through context c, the output p's crop (or resize). */
static int load_val(img_ctx *c, const char *path, const img_params *p, int k, uint8_t *out,
                    errbuf *e)
{
    rng r = rng_keyed(3, RNG_AUGMENT, 5, (uint64_t)k);
    const int oh = p->crop_h > 0 ? p->crop_h : p->resize_h,
              ow = p->crop_w > 0 ? p->crop_w : p->resize_w;
    return img_load(c, path, p, &r, out, oh, ow, e);
}

/* The validation recipe (Resize 256 + CenterCrop 224) and a plain
 * --resize HxW take the planar decode for --decode auto/fast: within the
 * issue's bound of the exact path (mean <= 0.5, p99 <= 4) with auto on a
 * photograph in every layout, portrait and landscape, baseline and
 * progressive, at full scale and at a DCT scale (1100 x 1500: auto takes
 * 4/8); fast (a smaller DCT scale) within 0.2 levels of what the RGB
 * decode at its scale gives; grey the exact path within a level. */
Test(planar, the_validation_recipe_stays_within_the_bound_of_the_exact_path)
{
    struct {
        int h, w, sub, flags, pf, decode, resize_hw;
    } kinds[] = {
        {333, 501, TJSAMP_420, 0, TJPF_RGB, IMG_DECODE_AUTO, 0},
        {501, 333, TJSAMP_420, 0, TJPF_RGB, IMG_DECODE_AUTO, 0},
        {377, 505, TJSAMP_420, TJFLAG_PROGRESSIVE, TJPF_RGB, IMG_DECODE_AUTO, 0},
        {401, 299, TJSAMP_422, 0, TJPF_RGB, IMG_DECODE_AUTO, 0},
        {480, 357, TJSAMP_444, 0, TJPF_RGB, IMG_DECODE_AUTO, 0},
        {350, 421, TJSAMP_440, 0, TJPF_RGB, IMG_DECODE_AUTO, 0},
        {345, 470, TJSAMP_411, 0, TJPF_RGB, IMG_DECODE_AUTO, 0},
        {350, 420, TJSAMP_GRAY, 0, TJPF_GRAY, IMG_DECODE_AUTO, 0},
        {1100, 1500, TJSAMP_420, 0, TJPF_RGB, IMG_DECODE_AUTO, 0},
        {1100, 1500, TJSAMP_420, TJFLAG_PROGRESSIVE, TJPF_RGB, IMG_DECODE_FAST, 0},
        {501, 377, TJSAMP_420, 0, TJPF_RGB, IMG_DECODE_FAST, 0},
        {333, 501, TJSAMP_420, 0, TJPF_RGB, IMG_DECODE_AUTO, 1},
    };
    const size_t n = 3 * 224 * 224, big = 3 * 200 * 300;
    uint8_t *ref = malloc(big), *got = malloc(big), *rgb = malloc(big);
    img_ctx *c = img_ctx_create(), *through_rgb = img_ctx_create();
    img_ctx_set_planar(through_rgb, 0);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const int h = kinds[i].h, w = kinds[i].w;
        uint8_t *px = photo(h, w, 11 + i);
        if (kinds[i].pf == TJPF_GRAY)
            for (size_t j = 0; j < (size_t)h * w; j++)
                px[j] = img_luma(px[3 * j], px[3 * j + 1], px[3 * j + 2]);
        char name[32];
        snprintf(name, sizeof name, "v%zu.jpg", i);
        char *path =
            ti_write_jpeg(dir, name, px, h, w, kinds[i].pf, kinds[i].sub, 90, kinds[i].flags);
        img_params p = val_params(IMG_DECODE_EXACT);
        if (kinds[i].resize_hw) /* --resize 200x300, no crop */
            p = (img_params){.channels = 3, .resize_h = 200, .resize_w = 300};
        const size_t m = p.crop_h > 0 ? n : big;
        errbuf e = {{0}};
        cr_assert_eq(load_val(c, path, &p, 0, ref, &e), 0, "%s", e.msg);
        p.decode = kinds[i].decode;
        cr_assert_eq(load_val(c, path, &p, 0, got, &e), 0, "%s", e.msg);
        cr_assert_eq(load_val(through_rgb, path, &p, 0, rgb, &e), 0, "%s", e.msg);
        ti_hist d = {{0}, 0}, dr = {{0}, 0};
        ti_hist_add(&d, ref, got, m);
        ti_hist_add(&dr, ref, rgb, m);
        int q, mx, qr, mxr;
        double mean = ti_hist_mean(&d, &q, &mx), mean_rgb = ti_hist_mean(&dr, &qr, &mxr);
        if (kinds[i].pf == TJPF_GRAY) {
            cr_assert(mx <= 1, "%s (grey): %d levels from the exact path", name, mx);
            free(px), free(path);
            continue;
        }
        if (kinds[i].decode == IMG_DECODE_AUTO)
            cr_assert(mean <= 0.5 && q <= 4, "%s: mean %.3f, p99 %d, max %d", name, mean, q, mx);
        else
            cr_assert(mean <= mean_rgb + 0.2, "%s (fast): mean %.3f, through RGB %.3f", name, mean,
                      mean_rgb);
        if (kinds[i].sub == TJSAMP_411)
            cr_assert(!memcmp(got, rgb, m), "%s: 4:1:1 took the planar path", name);
        else
            cr_assert(memcmp(got, rgb, m) != 0, "%s: the planar path was not taken", name);
        free(px), free(path);
    }
    img_ctx_free(c), img_ctx_free(through_rgb);
    free(ref), free(got), free(rgb);
}

/* The planar validation sample is img_load_base + img_augment byte for
 * byte (the preload contract): the centre crop with the flip and colour
 * jitter, and a resize followed by a random crop; the flip mirrors the
 * unflipped sample. */
Test(planar, the_validation_sample_is_the_base_plus_augment)
{
    uint8_t *px = photo(333, 501, 9);
    char *path = ti_write_jpeg(dir, "pre.jpg", px, 333, 501, TJPF_RGB, TJSAMP_420, 90, 0);
    img_ctx *lazy = img_ctx_create(), *pre = img_ctx_create();
    const size_t n = 3 * 224 * 224;
    uint8_t *a = malloc(n), *b = malloc(n), *flat = malloc(n);
    for (int kind = 0; kind < 2; kind++) {
        img_params p = val_params(IMG_DECODE_AUTO);
        p.hflip = 0.5f;
        p.jitter[0] = p.jitter[1] = p.jitter[2] = 0.3f;
        if (kind == 1) {
            p.resize_short = 0, p.resize_h = 256, p.resize_w = 300;
            p.random_crop = 1;
        }
        const uint8_t *base;
        int bh, bw;
        errbuf e = {{0}};
        cr_assert_eq(img_load_base(pre, path, &p, &base, &bh, &bw, &e), 0, "%s", e.msg);
        for (int k = 0; k < 6; k++) {
            cr_assert_eq(load_val(lazy, path, &p, k, a, &e), 0, "%s", e.msg);
            rng r = rng_keyed(3, RNG_AUGMENT, 5, (uint64_t)k);
            cr_assert_eq(img_augment(b, 224, 224, base, bh, bw, &p, &r, &e), 0, "%s", e.msg);
            cr_assert(memcmp(a, b, n) == 0, "kind %d sample %d: lazy != base + augment", kind, k);
        }
    }
    img_params p = val_params(IMG_DECODE_AUTO);
    errbuf e = {{0}};
    cr_assert_eq(load_val(lazy, path, &p, 0, flat, &e), 0, "%s", e.msg);
    p.hflip = 1.0f;
    cr_assert_eq(load_val(lazy, path, &p, 0, a, &e), 0, "%s", e.msg);
    for (size_t row = 0; row < 3 * 224; row++)
        for (int x = 0; x < 224; x++)
            cr_assert_eq(a[row * 224 + x], flat[row * 224 + 223 - x], "row %zu column %d", row, x);
    img_ctx_free(lazy), img_ctx_free(pre);
    free(px), free(path), free(a), free(b), free(flat);
}

/* A JPEG with an Exif APP1 (little-endian) of orientation `orient`. */
static char *with_orientation(const char *name, const uint8_t *px, int h, int w, int orient)
{
    size_t len;
    uint8_t *j = ti_jpeg(px, h, w, TJPF_RGB, TJSAMP_420, 90, 0, &len);
    /* APP1: "Exif\0\0", a TIFF header (II, IFD0 at 8), one entry:
     * Orientation (0x0112), SHORT, count 1, the value; no next IFD */
    uint8_t head[36] = {0xFF, 0xE1, 0, 34, 'E', 'x', 'i',  'f', 0, 0, 'I', 'I', '*', 0,
                        8,    0,    0, 0,  1,   0,   0x12, 1,   3, 0, 1,   0,   0,   0};
    head[28] = (uint8_t)orient;
    uint8_t *out = malloc(len + sizeof head);
    memcpy(out, j, 2);
    memcpy(out + 2, head, sizeof head);
    memcpy(out + 2 + sizeof head, j + 2, len - 2);
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(out, 1, len + sizeof head, f), len + sizeof head);
    fclose(f);
    free(j), free(out);
    return path;
}

/* The validation recipe's fallbacks are the RGB path's bytes, as with the
 * planar decode off: --decode exact, CMYK, an EXIF-turned file (--exif),
 * PNG, a JPEG without its end-of-image marker; one channel of a colour
 * file is the luma plane, the RGB path's grey within a level. */
Test(planar, the_validation_fallbacks_take_the_rgb_path)
{
    const int h = 300, w = 400;
    uint8_t *px = photo(h, w, 4), *cmyk = malloc((size_t)h * w * 4);
    for (size_t j = 0; j < (size_t)h * w; j++) {
        for (int ch = 0; ch < 3; ch++)
            cmyk[4 * j + ch] = (uint8_t)(255 - px[3 * j + ch]);
        cmyk[4 * j + 3] = (uint8_t)(j % 89);
    }
    char *col = ti_write_jpeg(dir, "vc.jpg", px, h, w, TJPF_RGB, TJSAMP_420, 90, 0);
    char *cm = ti_write_jpeg(dir, "vcmyk.jpg", cmyk, h, w, TJPF_CMYK, TJSAMP_420, 95, 0);
    char *six = with_orientation("vsix.jpg", px, h, w, 6);
    char *png = ti_write_png(dir, "v.png", px, h, w, 3);
    size_t len;
    uint8_t *jpg = ti_jpeg(px, h, w, TJPF_RGB, TJSAMP_420, 90, 0, &len);
    char *cut = malloc(strlen(dir) + 16);
    sprintf(cut, "%s/vcut.jpg", dir);
    FILE *f = fopen(cut, "wb");
    cr_assert_eq(fwrite(jpg, 1, len - 2, f), len - 2); /* no end-of-image marker */
    fclose(f);
    int ph, pw, pc;
    errbuf pe;
    cr_assert_eq(img_probe(six, 1, &pw, &ph, &pc, &pe), 0, "%s", pe.msg);
    cr_assert(ph == w && pw == h, "the Exif orientation is read: %dx%d", ph, pw);
    img_ctx *c = img_ctx_create(), *through_rgb = img_ctx_create();
    img_ctx_set_planar(through_rgb, 0);
    const size_t n = 3 * 224 * 224;
    uint8_t *a = malloc(n), *b = malloc(n);
    const struct {
        const char *path;
        int decode, exif;
    } cases[] = {{col, IMG_DECODE_EXACT, 0},
                 {cm, IMG_DECODE_AUTO, 0},
                 {six, IMG_DECODE_AUTO, 1},
                 {png, IMG_DECODE_AUTO, 0},
                 {cut, IMG_DECODE_AUTO, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        img_params p = val_params(cases[i].decode);
        p.exif = cases[i].exif;
        p.hflip = 0.5f;
        errbuf e1 = {{0}}, e2 = {{0}};
        int r1 = load_val(c, cases[i].path, &p, (int)i, a, &e1);
        int r2 = load_val(through_rgb, cases[i].path, &p, (int)i, b, &e2);
        cr_assert_eq(r1, r2, "case %zu: %s / %s", i, e1.msg, e2.msg);
        cr_assert_str_eq(e1.msg, e2.msg, "case %zu", i);
        cr_assert(r1 != 0 || memcmp(a, b, n) == 0, "case %zu: not the RGB path's bytes", i);
    }
    img_params p = val_params(IMG_DECODE_AUTO);
    p.channels = 1;
    errbuf e = {{0}};
    cr_assert_eq(load_val(c, col, &p, 0, a, &e), 0, "%s", e.msg);
    cr_assert_eq(load_val(through_rgb, col, &p, 0, b, &e), 0, "%s", e.msg);
    int mx;
    ti_mean_diff(a, b, 224 * 224, &mx);
    cr_assert(mx <= 1, "grey of colour: %d levels", mx);
    img_ctx_free(c), img_ctx_free(through_rgb);
    free(px), free(cmyk), free(col), free(cm), free(six), free(png), free(jpg), free(cut);
    free(a), free(b);
}

/* The planar decode's hook checks itself against the libjpeg loaded before
 * its first use (image/jpeg_planar.c) and says so; TRAIN_NO_PLANAR turns
 * it off, with the reason, and the decode still works (the pixel path). */
Test(planar, the_hook_checks_itself_and_says_so)
{
    const char *v = img_decoder_versions();
    cr_expect(strstr(v, "libjpeg 2.") || strstr(v, "libjpeg 3."), "%s", v);
    cr_expect(strstr(v, "planar decode on"), "this build has jpegint.h: %s", v);
}

Test(planar, train_no_planar_turns_it_off)
{
    setenv("TRAIN_NO_PLANAR", "1", 1);
    const char *v = img_decoder_versions();
    cr_expect(strstr(v, "planar decode off: TRAIN_NO_PLANAR is set"), "%s", v);
    const int S = 64;
    uint8_t *px = photo(240, 320, 2), *a = malloc(3 * S * S), *b = malloc(3 * S * S);
    char *path = ti_write_jpeg(dir, "np.jpg", px, 240, 320, TJPF_RGB, TJSAMP_420, 90, 0);
    img_ctx *c = img_ctx_create(), *rgb = img_ctx_create();
    img_ctx_set_planar(rgb, 0);
    img_params p = rrc_params(S, IMG_DECODE_AUTO, 0.0f);
    load(c, path, &p, 1, a);
    load(rgb, path, &p, 1, b);
    cr_expect(!memcmp(a, b, 3 * (size_t)S * S), "off means the pixel path's bytes");
    img_ctx_free(c), img_ctx_free(rgb);
    free(px), free(a), free(b), free(path);
}
