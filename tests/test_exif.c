/* test_exif.c — --exif: JPEGs turned upright by their EXIF orientation.
 *
 * Real JPEGs (TurboJPEG) with four solid quadrants, red, green, blue and
 * white, and an APP1 Exif segment spliced in after SOI, in both TIFF byte
 * orders. What the upright corners must show comes from the EXIF table
 * written out below, not from the code under test. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "common/rng.h"
#include "tests/support/helpers.h"
#include "tests/support/images.h"

static char *dir;
static void setup(void) { dir = tmpdir_make(); }
static void teardown(void) { tmpdir_remove(dir); }
TestSuite(exif, .init = setup, .fini = teardown);

enum { H = 32, W = 48 };
enum { RED, GREEN, BLUE, WHITE };
static const uint8_t rgb[4][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 255}};

/* stored: red top-left, green top-right, blue bottom-left, white bottom-right */
static uint8_t *quadrants(void)
{
    uint8_t *px = malloc((size_t)H * W * 3);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            memcpy(px + ((size_t)y * W + x) * 3, rgb[(y >= H / 2) * 2 + (x >= W / 2)], 3);
    return px;
}

/* A JPEG of the quadrants with an Exif APP1 holding `orient` (0: none),
 * big- or little-endian; `damage` truncates the IFD. */
static char *exif_jpeg_of(const char *name, const uint8_t *px, int h, int w, int samp, int orient,
                          int big, int damage)
{
    size_t len;
    uint8_t *j = ti_jpeg(px, h, w, TJPF_RGB, samp, 95, 0, &len);
    uint8_t app[64];
    size_t n = 0;
    if (orient) {
        uint8_t tiff[26] = {0};
        memcpy(tiff, big ? "MM\0*" : "II*\0", 4);
        tiff[big ? 7 : 4] = 8; /* IFD0 at 8 */
        tiff[big ? 9 : 8] = 1; /* one entry */
        uint8_t *e = tiff + 10;
        e[big ? 0 : 1] = 0x01, e[big ? 1 : 0] = 0x12; /* Orientation */
        e[big ? 3 : 2] = 3;                           /* SHORT */
        e[big ? 7 : 4] = 1;                           /* count 1 */
        e[big ? 9 : 8] = (uint8_t)orient;
        size_t tlen = damage ? 16 : sizeof tiff;
        size_t seg = 2 + 6 + tlen;
        app[0] = 0xFF, app[1] = 0xE1, app[2] = (uint8_t)(seg >> 8), app[3] = (uint8_t)seg;
        memcpy(app + 4, "Exif\0\0", 6);
        memcpy(app + 10, tiff, tlen);
        n = 4 + 6 + tlen;
    }
    uint8_t *out = malloc(len + n);
    memcpy(out, j, 2);
    memcpy(out + 2, app, n);
    memcpy(out + 2 + n, j + 2, len - 2);
    char *path = write_file(dir, name, out, len + n);
    free(j), free(out);
    return path;
}

static char *exif_jpeg(const char *name, int orient, int big, int damage)
{
    uint8_t *px = quadrants();
    char *path = exif_jpeg_of(name, px, H, W, TJSAMP_444, orient, big, damage);
    free(px);
    return path;
}

/* Which quadrant colour (RED..WHITE) the pixel at (y, x) of a CHW image is */
static int colour_at(const uint8_t *chw, int h, int w, int y, int x)
{
    int best = -1, bd = 1 << 30;
    for (int q = 0; q < 4; q++) {
        int d = 0;
        for (int c = 0; c < 3; c++) {
            int v = chw[((size_t)c * h + y) * w + x] - rgb[q][c];
            d += v * v;
        }
        if (d < bd)
            bd = d, best = q;
    }
    return best;
}

static uint8_t *load(const char *path, img_params *p, int oh, int ow)
{
    img_ctx *c = img_ctx_create();
    uint8_t *out = malloc((size_t)3 * oh * ow);
    errbuf e;
    rng r = rng_keyed(1, 0, 0, 0);
    cr_assert_eq(img_load(c, path, p, &r, out, oh, ow, &e), 0, "%s", e.msg);
    img_ctx_free(c);
    return out;
}

/* EXIF 2.3's table: the stored quadrant at the upright top-left and
 * top-right corners, orientations 1..8 */
static const int want_tl[9] = {0, RED, GREEN, WHITE, BLUE, RED, BLUE, WHITE, GREEN};
static const int want_tr[9] = {0, GREEN, RED, BLUE, WHITE, BLUE, RED, GREEN, WHITE};

Test(exif, every_orientation_turns_upright_in_both_byte_orders)
{
    for (int big = 0; big < 2; big++)
        for (int o = 1; o <= 8; o++) {
            char name[32];
            snprintf(name, sizeof name, "o%d%s.jpg", o, big ? "mm" : "ii");
            char *path = exif_jpeg(name, o, big, 0);
            int uh = o >= 5 ? W : H, uw = o >= 5 ? H : W;
            int pw, ph, pc;
            errbuf e;
            cr_assert_eq(img_probe(path, 1, &pw, &ph, &pc, &e), 0, "%s", e.msg);
            cr_expect(ph == uh && pw == uw, "orientation %d: probed %dx%d", o, ph, pw);
            img_params p = {.channels = 3, .exif = 1};
            uint8_t *out = load(path, &p, uh, uw);
            cr_expect_eq(colour_at(out, uh, uw, 2, 2), want_tl[o], "orientation %d top-left", o);
            cr_expect_eq(colour_at(out, uh, uw, 2, uw - 3), want_tr[o], "orientation %d top-right",
                         o);
            free(out), free(path);
        }
}

Test(exif, off_by_default_and_damaged_tags_read_as_stored)
{
    char *turned = exif_jpeg("six.jpg", 6, 0, 0), *damaged = exif_jpeg("bad.jpg", 6, 1, 1);
    int w, h, c;
    errbuf e;
    cr_assert_eq(img_probe(turned, 0, &w, &h, &c, &e), 0, "%s", e.msg);
    cr_expect(h == H && w == W);
    img_params p = {.channels = 3};
    uint8_t *out = load(turned, &p, H, W);
    cr_expect_eq(colour_at(out, H, W, 2, 2), RED);
    free(out);
    p.exif = 1; /* the IFD is cut short: as stored, no error */
    out = load(damaged, &p, H, W);
    cr_expect_eq(colour_at(out, H, W, 2, 2), RED);
    cr_expect_eq(colour_at(out, H, W, H - 3, W - 3), WHITE);
    free(out), free(turned), free(damaged);
}

/* Resize and crop apply to the upright image: a 90-degree turn then a
 * resize equals the resize of the turned pixels to within one level (the
 * two passes swap roles) */
Test(exif, resize_and_crop_see_the_upright_image)
{
    char *plain = exif_jpeg("plain.jpg", 0, 0, 0), *six = exif_jpeg("six6.jpg", 6, 0, 0);
    img_params p = {.channels = 3, .exif = 1, .resize_h = 24, .resize_w = 16, .full_decode = 1};
    uint8_t *turned = load(six, &p, 24, 16);
    img_params q = {.channels = 3, .resize_h = 16, .resize_w = 24, .full_decode = 1};
    uint8_t *stored = load(plain, &q, 16, 24);
    int worst = 0;
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < 24; y++)
            for (int x = 0; x < 16; x++) { /* rotated 90 clockwise: (y, x) <- (15 - x, y) */
                int a = turned[((size_t)c * 24 + y) * 16 + x];
                int b = stored[((size_t)c * 16 + (15 - x)) * 24 + y];
                int d = abs(a - b);
                worst = d > worst ? d : worst;
            }
    cr_expect_leq(worst, 1, "turned-then-resized vs resized-then-turned differ by %d", worst);
    free(turned), free(stored);
    /* a random-resized crop draws its box on the upright size: with scale 1
     * and a ratio range only the upright aspect fits, it is the whole
     * upright image */
    img_params r = {.channels = 3, .exif = 1, .rrc = 1, .crop_h = 24, .crop_w = 16};
    r.rrc_scale[0] = r.rrc_scale[1] = 1.0f;
    r.rrc_ratio[0] = 0.6f, r.rrc_ratio[1] = 0.7f; /* upright 32/48 fits; stored 48/32 not */
    uint8_t *out = load(six, &r, 24, 16);
    /* the whole upright image: the colours change at the middle column */
    cr_expect_eq(colour_at(out, 24, 16, 1, 1), BLUE);
    cr_expect_eq(colour_at(out, 24, 16, 1, 5), BLUE);
    cr_expect_eq(colour_at(out, 24, 16, 1, 10), RED);
    cr_expect_eq(colour_at(out, 24, 16, 22, 5), WHITE);
    cr_expect_eq(colour_at(out, 24, 16, 22, 14), GREEN);
    free(out), free(plain), free(six);
}

/* Resize + centre crop of a turned JPEG decoded at a DCT scale whose last
 * pixel is partial (501 x 377 at 5/8): an orientation that reverses an
 * axis moves that part-pixel to the start, and the resampler must map the
 * picture from there. Before, orientations 2-4 and 6-8 were 0.7-1.7 levels
 * off the exact path on average (p99 to 17), 1 and 5 within 0.5. */
Test(exif, a_turned_dct_scaled_picture_keeps_its_extent)
{
    const int h = 377, w = 501, S = 64;
    uint8_t *px = ti_picture(h, w, 3, 31);
    for (int o = 1; o <= 8; o++) {
        char name[32];
        snprintf(name, sizeof name, "t%d.jpg", o);
        char *path = exif_jpeg_of(name, px, h, w, TJSAMP_420, o, o % 2, 0);
        img_params p = {.channels = 3,
                        .resize_short = 72,
                        .crop_h = S,
                        .crop_w = S,
                        .exif = 1,
                        .decode = IMG_DECODE_AUTO};
        uint8_t *got = load(path, &p, S, S);
        p.decode = IMG_DECODE_EXACT;
        p.full_decode = 1;
        uint8_t *ref = load(path, &p, S, S);
        int mx;
        double mean = ti_mean_diff(got, ref, (size_t)3 * S * S, &mx);
        cr_expect(mean <= 0.5 && mx <= 4,
                  "orientation %d: %.2f levels from the exact path (max %d)", o, mean, mx);
        free(got), free(ref), free(path);
    }
    free(px);
}
