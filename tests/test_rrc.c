/* test_rrc.c — the random-resized crop: torchvision's box draw,
 * the fused region decode against the unfused path (full decode, crop,
 * resample) on real JPEG files, and the command line around it. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "image/internal.h"
#include "tests/support/helpers.h"
#include "tests/support/images.h"

static char *dir;

static void setup(void) { dir = tmpdir_make(); }
static void teardown(void) { tmpdir_remove(dir); }

TestSuite(rrc, .init = setup, .fini = teardown);

static img_params rrc_params(int s, int decode)
{
    img_params p = {
        .channels = 3, .crop_h = s, .crop_w = s, .rrc = 1, .hflip = 0.5f, .decode = decode};
    p.rrc_scale[0] = 0.08f, p.rrc_scale[1] = 1.0f;
    p.rrc_ratio[0] = 0.75f, p.rrc_ratio[1] = 4.0f / 3.0f;
    return p;
}

/* When no try fits (scale 1 and a ratio the image is far outside), the
 * box is torchvision's centre fallback: the image clamped to the ratio. */
Test(rrc, the_fallback_is_torchvisions_centre_crop)
{
    img_params p = rrc_params(8, 0);
    p.rrc_scale[0] = p.rrc_scale[1] = 1.0f;
    rng r = rng_keyed(1, RNG_AUGMENT, 0, 0);
    int y, x, h, w;
    img_rrc_box(100, 50, &p, &r, &y, &x, &h, &w); /* 50/100 < 3/4: w = 50, h = round(50 / 0.75) */
    cr_assert(y == 16 && x == 0 && h == 67 && w == 50, "got %d,%d %dx%d", y, x, h, w);
    img_rrc_box(50, 100, &p, &r, &y, &x, &h, &w); /* wide: h = 50, w = round(50 * 4/3) = 67 */
    cr_assert(y == 0 && x == 16 && h == 50 && w == 67, "got %d,%d %dx%d", y, x, h, w);
    p.rrc_ratio[0] = p.rrc_ratio[1] = 1.0f;
    img_rrc_box(64, 64, &p, &r, &y, &x, &h, &w); /* fits on the first try: the whole image */
    cr_assert(y == 0 && x == 0 && h == 64 && w == 64, "got %d,%d %dx%d", y, x, h, w);
}

/* Every box lies inside the image, its area fraction within the scale
 * range and its aspect ratio within the ratio range (up to rounding), and
 * the same key gives the same box. */
Test(rrc, boxes_stay_inside_the_ranges_and_depend_only_on_the_key)
{
    img_params p = rrc_params(224, 0);
    double area_sum = 0;
    for (int k = 0; k < 2000; k++) {
        int H = 200 + k % 300, W = 500 - k % 250, y, x, h, w, y2, x2, h2, w2;
        rng r = rng_keyed(7, RNG_AUGMENT, 3, (uint64_t)k), r2 = r;
        img_rrc_box(H, W, &p, &r, &y, &x, &h, &w);
        img_rrc_box(H, W, &p, &r2, &y2, &x2, &h2, &w2);
        cr_assert(y == y2 && x == x2 && h == h2 && w == w2);
        cr_assert(y >= 0 && x >= 0 && h >= 1 && w >= 1 && y + h <= H && x + w <= W,
                  "%dx%d: %d,%d %dx%d", H, W, y, x, h, w);
        double frac = (double)h * w / ((double)H * W), ratio = (double)w / h;
        cr_assert(frac <= 1.0 && frac > 0.07, "area fraction %g", frac);
        cr_assert(ratio > 0.7 && ratio < 1.4, "ratio %g", ratio);
        area_sum += frac;
    }
    /* uniform on [0.08, 1] before rejection (mean 0.54), large boxes of
     * extreme ratios rejected more often: the mean is about 0.42 */
    cr_assert(area_sum / 2000 > 0.35 && area_sum / 2000 < 0.6, "mean area fraction %g",
              area_sum / 2000);
}

/* The samples of one file under three decodes, same keys. */
static void load_three(const char *path, int s, int k, uint8_t *ref, uint8_t *exact, uint8_t *fast,
                       uint8_t *aut)
{
    img_params p = rrc_params(s, IMG_DECODE_EXACT);
    p.full_decode = 1;
    img_ctx *c = img_ctx_create();
    errbuf e = {{0}};
    uint8_t *outs[4] = {ref, exact, fast, aut};
    const int modes[4] = {IMG_DECODE_EXACT, IMG_DECODE_EXACT, IMG_DECODE_FAST, IMG_DECODE_AUTO};
    for (int m = 0; m < 4; m++) {
        p.full_decode = m == 0;
        p.decode = modes[m];
        rng r = rng_keyed(5, RNG_AUGMENT, 1, (uint64_t)k);
        cr_assert_eq(img_load(c, path, &p, &r, outs[m], s, s, &e), 0, "%s", e.msg);
    }
    img_ctx_free(c);
}

static int p99(const uint8_t *a, const uint8_t *b, size_t n)
{
    size_t hist[256] = {0};
    for (size_t i = 0; i < n; i++)
        hist[abs((int)a[i] - (int)b[i])]++;
    size_t acc = 0;
    for (int d = 0; d < 256; d++)
        if ((acc += hist[d]) >= n - n / 100)
            return d;
    return 255;
}

/* A region decode at full size is the full decode's pixels: the fused
 * exact path equals full decode + crop + resample byte for byte, on
 * 4:2:0, 4:4:4, 4:2:2, progressive and grey files of odd sizes; the DCT-
 * scaled paths stay within the documented error (docs/BENCH-PHOTOS.md:
 * auto <= 0.5 mean and <= 4 at the 99th percentile). */
Test(rrc, the_fused_decode_matches_full_decode_crop_and_resample)
{
    struct {
        int h, w, sub, flags, pf;
    } kinds[] = {
        {333, 501, TJSAMP_420, 0, TJPF_RGB},   {480, 357, TJSAMP_444, 0, TJPF_RGB},
        {401, 299, TJSAMP_422, 0, TJPF_RGB},   {377, 505, TJSAMP_420, TJFLAG_PROGRESSIVE, TJPF_RGB},
        {350, 420, TJSAMP_GRAY, 0, TJPF_GRAY},
    };
    const int S = 64;
    uint8_t ref[3 * 64 * 64], exact[3 * 64 * 64], fast[3 * 64 * 64], aut[3 * 64 * 64];
    double fast_mean = 0, auto_mean = 0;
    int auto_p99 = 0, n = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        int c = kinds[i].pf == TJPF_GRAY ? 1 : 3;
        uint8_t *px = ti_picture(kinds[i].h, kinds[i].w, c, 40 + i);
        char name[32];
        snprintf(name, sizeof name, "k%zu.jpg", i);
        char *path = ti_write_jpeg(dir, name, px, kinds[i].h, kinds[i].w, kinds[i].pf, kinds[i].sub,
                                   88, kinds[i].flags);
        for (int k = 0; k < 12; k++, n++) {
            load_three(path, S, k, ref, exact, fast, aut);
            cr_assert(memcmp(ref, exact, sizeof ref) == 0,
                      "%s sample %d: exact region decode differs", name, k);
            int mx;
            fast_mean += ti_mean_diff(ref, fast, sizeof ref, &mx);
            auto_mean += ti_mean_diff(ref, aut, sizeof ref, &mx);
            int q = p99(ref, aut, sizeof ref);
            auto_p99 = q > auto_p99 ? q : auto_p99;
        }
        free(px), free(path);
    }
    fast_mean /= n, auto_mean /= n;
    cr_assert(auto_mean <= 0.5 && auto_p99 <= 4, "auto: mean %.3f p99 %d", auto_mean, auto_p99);
    cr_assert(fast_mean <= 2.0, "fast: mean %.3f", fast_mean);
    cr_assert(fast_mean > auto_mean, "the DCT scale is used: fast %.3f auto %.3f", fast_mean,
              auto_mean);
}

/* The validation recipe (Resize 256 + CenterCrop 224) decodes only the
 * region its crop reads; through RGB (the planar decode off: with it,
 * tests/test_planar.c) the result is the whole decode's crop byte for
 * byte, at full size and at a DCT scale (the 1500x1100 file: auto takes
 * 4/8), for every subsampling, progressive and grey, portrait and
 * landscape. The reference decodes the whole file with TurboJPEG at the
 * same scale and resamples the crop window of it. */
Test(rrc, the_centre_crop_region_decode_equals_the_whole_decode)
{
    struct {
        int h, w, sub, flags, pf;
    } kinds[] = {
        {333, 501, TJSAMP_420, 0, TJPF_RGB},   {480, 357, TJSAMP_444, 0, TJPF_RGB},
        {401, 299, TJSAMP_422, 0, TJPF_RGB},   {377, 505, TJSAMP_420, TJFLAG_PROGRESSIVE, TJPF_RGB},
        {350, 420, TJSAMP_GRAY, 0, TJPF_GRAY}, {1100, 1500, TJSAMP_420, 0, TJPF_RGB},
        {1501, 1099, TJSAMP_420, 0, TJPF_RGB},
    };
    const int R = 256, S = 224;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const int h = kinds[i].h, w = kinds[i].w, c = kinds[i].pf == TJPF_GRAY ? 1 : 3;
        uint8_t *px = ti_picture(h, w, c, 60 + i);
        char name[32];
        snprintf(name, sizeof name, "v%zu.jpg", i);
        char *path =
            ti_write_jpeg(dir, name, px, h, w, kinds[i].pf, kinds[i].sub, 85, kinds[i].flags);
        img_params p = {.channels = c, .resize_short = R, .crop_h = S, .crop_w = S};
        int bh, bw;
        errbuf e;
        uint8_t *got = ti_base_planar(path, &p, 0, &bh, &bw, &e);
        cr_assert_not_null(got, "%s", e.msg);
        cr_assert(bh == S && bw == S);

        const int rh = w <= h ? R * h / w : R, rw = w <= h ? R : R * w / h;
        int sh, sw, num = 8;
        img_jpeg_scaled_size(w, h, 2 * rh, 2 * rw, &sh, &sw); /* --decode auto */
        for (int n = 1; n < 8; n++)
            if ((h * n + 7) / 8 == sh && (w * n + 7) / 8 == sw) {
                num = n;
                break;
            }
        cr_assert_eq(num, h > 1000 ? 4 : 8, "%s: scale %d/8", name, num);
        uint8_t *dec = malloc((size_t)sh * sw * c), *want = malloc((size_t)S * S * c);
        tjhandle tj = tjInitDecompress();
        size_t len;
        char *bytes = read_whole_file(path, &len, &e);
        cr_assert_eq(tjDecompress2(tj, (uint8_t *)bytes, len, dec, sw, 0, sh, kinds[i].pf, 0), 0);
        img_span cy, cx;
        img_span_centre(rh, S, 0, &cy);
        img_span_centre(rw, S, 0, &cx);
        resize_plan plan = {0};
        resize_box_window(&plan, want, (size_t)S * c, rh, rw, cy.src, cx.src, S, S, dec,
                          (size_t)sw * c, sh, sw, c, 0, 0, num < 8 ? h * num / 8.0 : sh,
                          num < 8 ? w * num / 8.0 : sw);
        size_t at = 0;
        while (at < (size_t)S * S * c && got[at] == want[at])
            at++;
        cr_assert_eq(at, (size_t)S * S * c, "%s: byte %zu is %d, the whole decode gives %d", name,
                     at, got[at < (size_t)S * S * c ? at : 0],
                     want[at < (size_t)S * S * c ? at : 0]);
        resize_plan_free(&plan);
        tjDestroy(tj);
        free(px), free(path), free(got), free(dec), free(want), free(bytes);
    }
}

/* The region decoder reads only the rows it needs, so it must still
 * refuse a file a full decode refuses: a truncated one, whatever crop. */
Test(rrc, a_truncated_jpeg_fails_whatever_the_crop)
{
    uint8_t *px = ti_picture(256, 256, 3, 9);
    size_t len;
    uint8_t *jpg = ti_jpeg(px, 256, 256, TJPF_RGB, TJSAMP_420, 90, 0, &len);
    char *path = write_file(dir, "cut.jpg", jpg, len * 2 / 3);
    img_params p = rrc_params(32, IMG_DECODE_FAST);
    p.rrc_scale[0] = 0.08f, p.rrc_scale[1] = 0.1f; /* small boxes, often in the intact rows */
    img_ctx *c = img_ctx_create();
    uint8_t out[3 * 32 * 32];
    for (int k = 0; k < 8; k++) {
        rng r = rng_keyed(1, RNG_AUGMENT, 0, (uint64_t)k);
        errbuf e = {{0}};
        cr_assert_eq(img_load(c, path, &p, &r, out, 32, 32, &e), -1, "sample %d decoded", k);
        cr_assert(strstr(e.msg, "truncated JPEG"), "%s", e.msg);
    }
    img_ctx_free(c);
    free(px), free(jpg), free(path);
}

/* The ImageNet recipe on a folder of mixed-size JPEGs: random-resized
 * crop for training, Resize + CenterCrop for validation; losses do not
 * depend on the worker count; preload is refused with the reason. */
Test(rrc, the_imagenet_recipe_trains_on_mixed_sizes_whatever_the_workers)
{
    for (int k = 0; k < 6; k++) {
        char name[64];
        int h = 60 + 17 * k, w = 90 - 5 * k;
        uint8_t *px = ti_picture(h, w, 3, (uint64_t)k + 1);
        snprintf(name, sizeof name, "set/%s/%d.jpg", k % 2 ? "b" : "a", k);
        free(ti_write_jpeg(dir, name, px, h, w, TJPF_RGB, k % 3 ? TJSAMP_420 : TJSAMP_444, 85, 0));
        free(px);
    }
    char *set = path_join(dir, "set"), *j0 = path_join(dir, "w0.json"),
         *j2 = path_join(dir, "w2.json");
    run_result r;
    run_train(&r, "--random-resized-crop", "32", "--resize", "36", "--crop", "32", "--batch", "3",
              "--epochs", "2", "--workers", "0", "--val", set, "--json", j0, set, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run_train(&r, "--random-resized-crop", "32", "--resize", "36", "--crop", "32", "--batch", "3",
              "--epochs", "2", "--workers", "2", "--val", set, "--json", j2, set, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    char a[8][JSON_VALUE_MAX], b[8][JSON_VALUE_MAX];
    cr_assert_eq(json_epoch_values(j0, "loss", a, 8), 2);
    cr_assert_eq(json_epoch_values(j2, "loss", b, 8), 2);
    for (int i = 0; i < 2; i++)
        cr_assert_str_eq(a[i], b[i], "epoch %d", i + 1);
    run_train(&r, "--random-resized-crop", "32", "--mode", "preload", set, NULL);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "use --mode lazy"), "%s", r.err);
    run_free(&r);
    run_train(&r, "--random-resized-crop", "32,0.5", set, NULL);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "S,SMIN,SMAX"), "%s", r.err);
    run_free(&r);
    free(set), free(j0), free(j2);
}

/* A reference resample in double: the triangle kernel of resize.h over
 * the box, one output pixel (y, x) of channel ch. */
static double ref_pixel(const uint8_t *src, int sh, int sw, int c, double by, double bx, double bh,
                        double bw, int dh, int dw, int y, int x, int ch)
{
    double sy = bh / dh, sx = bw / dw, ry = sy > 1 ? sy : 1, rx = sx > 1 ? sx : 1;
    double cy = by + (y + 0.5) * sy, cx = bx + (x + 0.5) * sx, sum = 0, wsum = 0;
    int y0 = (int)floor(by), y1 = (int)ceil(by + bh), x0 = (int)floor(bx), x1 = (int)ceil(bx + bw);
    for (int j = y0; j < y1 && j < sh; j++) {
        double wy = 1 - fabs((j + 0.5 - cy) / ry);
        if (wy <= 0)
            continue;
        for (int i = x0; i < x1 && i < sw; i++) {
            double wx = 1 - fabs((i + 0.5 - cx) / rx);
            if (wx <= 0)
                continue;
            sum += wy * wx * src[((size_t)j * sw + i) * c + ch];
            wsum += wy * wx;
        }
    }
    return sum / wsum;
}

/* Whichever pass the resampler runs first (vertical first when it shrinks
 * much more vertically), a window equals the same window of the whole
 * output byte for byte, and both stay within 1.5 levels of the double
 * reference, fractional boxes included. */
Test(rrc, the_resampler_agrees_with_a_reference_in_either_pass_order)
{
    const int sh = 300, sw = 260, c = 3;
    uint8_t *src = ti_picture(sh, sw, c, 21);
    const struct {
        double by, bx, bh, bw;
        int dh, dw;
    } g[] = {{0, 0, 300, 260, 60, 200},
             {0, 0, 300, 260, 200, 60},
             {7.25, 3.5, 250.5, 240.75, 50, 120},
             {0, 0, 300, 260, 224, 224},
             {12, 9, 100, 90, 150, 140}};
    for (size_t k = 0; k < sizeof g / sizeof g[0]; k++) {
        int dh = g[k].dh, dw = g[k].dw;
        uint8_t *full = malloc((size_t)dh * dw * c), *win = malloc((size_t)20 * 30 * c);
        resize_plan p = {0};
        resize_box(&p, full, dh, dw, src, (size_t)sw * c, sh, sw, c, g[k].by, g[k].bx, g[k].bh,
                   g[k].bw);
        double worst = 0;
        for (int y = 0; y < dh; y++)
            for (int x = 0; x < dw; x++)
                for (int ch = 0; ch < c; ch++) {
                    double d = fabs(full[((size_t)y * dw + x) * c + ch] -
                                    ref_pixel(src, sh, sw, c, g[k].by, g[k].bx, g[k].bh, g[k].bw,
                                              dh, dw, y, x, ch));
                    worst = d > worst ? d : worst;
                }
        cr_assert(worst <= 1.5, "geometry %zu: %.2f levels from the reference", k, worst);
        if (g[k].by == 0 && g[k].bh == sh && g[k].bw == sw) { /* a window of the plain resize */
            resize_plan q = {0};
            resize_apply(&q, win, (size_t)30 * c, dh, dw, 5, 7, 20, 30, src, sh, sw, c);
            for (int y = 0; y < 20; y++)
                cr_assert(memcmp(win + (size_t)y * 30 * c, full + ((size_t)(y + 5) * dw + 7) * c,
                                 (size_t)30 * c) == 0,
                          "geometry %zu row %d", k, y);
            resize_plan_free(&q);
        }
        resize_plan_free(&p);
        free(full), free(win);
    }
    free(src);
}
