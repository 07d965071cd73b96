/* test_webp.c — WebP through libwebp (gnome-backgrounds ships
 * only WebP), on files made by Debian's cwebp: lossless ones decode to the
 * source pixels exactly, lossy ones closely, and the DCT-free path serves
 * resize, grey output and the random-resized crop like any other format. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/image.h"
#include "tests/support/helpers.h"
#include "tests/support/images.h"

static char *dir;

static void setup(void) { dir = tmpdir_make(); }
static void teardown(void) { tmpdir_remove(dir); }

TestSuite(webp, .init = setup, .fini = teardown);

/* dir/name.webp from px through a PPM and cwebp with the given options. */
static char *cwebp(const char *name, const uint8_t *px, int h, int w, const char *opt1,
                   const char *opt2)
{
    char ppm_name[64], webp_name[64];
    snprintf(ppm_name, sizeof ppm_name, "%s.ppm", name);
    snprintf(webp_name, sizeof webp_name, "%s.webp", name);
    char *ppm = ti_write_pnm(dir, ppm_name, px, h, w, 3, 255), *out = path_join(dir, webp_name);
    char *argv[] = {"/usr/bin/cwebp", "-quiet", (char *)opt1, (char *)opt2, ppm, "-o", out, NULL};
    run_result r;
    run_argv(argv, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "cwebp (package webp): %s", r.err);
    run_free(&r);
    free(ppm);
    return out;
}

Test(webp, lossless_decodes_exactly_and_lossy_closely)
{
    const int h = 37, w = 53;
    uint8_t *px = ti_picture(h, w, 3, 5);
    char *lossless = cwebp("ll", px, h, w, "-lossless", "-exact"),
         *lossy = cwebp("ly", px, h, w, "-q", "90");
    img_params p = {.channels = 3};
    int bh, bw, iw, ih, ic;
    errbuf e = {{0}};
    cr_assert_eq(img_probe(lossless, 0, &iw, &ih, &ic, &e), 0, "%s", e.msg);
    cr_assert(iw == w && ih == h && ic == 3);
    uint8_t *got = ti_base(lossless, &p, &bh, &bw, &e);
    cr_assert_not_null(got, "%s", e.msg);
    cr_assert(bh == h && bw == w && memcmp(got, px, (size_t)h * w * 3) == 0,
              "lossless WebP pixels differ");
    free(got);
    got = ti_base(lossy, &p, &bh, &bw, &e);
    cr_assert_not_null(got, "%s", e.msg);
    int mx;
    double mean = ti_mean_diff(got, px, (size_t)h * w * 3, &mx);
    cr_assert(mean < 4.0, "lossy q90 mean difference %.2f", mean);
    free(got);
    p.channels = 1;
    p.resize_h = 20, p.resize_w = 30;
    got = ti_base(lossless, &p, &bh, &bw, &e);
    cr_assert(got && bh == 20 && bw == 30, "%s", e.msg);
    free(got);
    free(px), free(lossless), free(lossy);
}

Test(webp, a_cut_webp_is_refused_by_name)
{
    uint8_t *px = ti_picture(64, 64, 3, 6);
    char *full = cwebp("a", px, 64, 64, "-q", "80");
    size_t len;
    char *bytes = read_whole_file(full, &len, NULL);
    char *cut = write_file(dir, "cut.webp", bytes, len / 2);
    img_params p = {.channels = 3};
    int bh, bw;
    errbuf e = {{0}};
    cr_assert_null(ti_base(cut, &p, &bh, &bw, &e));
    cr_assert(strstr(e.msg, "cut.webp: ") && strstr(e.msg, "WebP"), "%s", e.msg);
    free(px), free(full), free(bytes), free(cut);
}
