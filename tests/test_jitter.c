/* test_jitter.c — --color-jitter (torchvision's ColorJitter on PIL images)
 * and --normalize imagenet. The factors are re-drawn here from
 * the documented draw order (image.h), so a change of order fails too. */
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

TestSuite(jitter, .init = setup, .fini = teardown);

enum { H = 24, W = 20 };

/* The order and the factors image.h says the jitter draws. */
static void expected_draws(rng *r, const float x[3], int order[3], double f[3])
{
    for (int k = 0; k < 3; k++)
        order[k] = k;
    for (int i = 2; i > 0; i--) {
        int j = (int)rng_below(r, (uint32_t)i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int k = 0; k < 3; k++) {
        f[k] = 1.0;
        if (x[k] > 0) {
            double lo = x[k] < 1 ? 1 - x[k] : 0;
            f[k] = lo + (1 + x[k] - lo) * rng_uniform_d(r);
        }
    }
}

static uint8_t rc(double v) { return v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)(v + 0.5); }

static uint8_t luma(int r, int g, int b)
{
    return (uint8_t)((19595u * r + 38470u * g + 7471u * b + 0x8000u) >> 16);
}

/* An independent CHW implementation of the three adjustments. */
static void reference(uint8_t *img, const int order[3], const double f[3], const float x[3])
{
    const size_t n = (size_t)H * W;
    for (int k = 0; k < 3; k++) {
        int op = order[k];
        if (!(x[op] > 0))
            continue;
        if (op == 0) {
            for (size_t i = 0; i < 3 * n; i++)
                img[i] = rc(img[i] * (float)f[0]);
        } else if (op == 1) {
            double sum = 0;
            for (size_t i = 0; i < n; i++)
                sum += luma(img[i], img[n + i], img[2 * n + i]);
            float m = (float)floor(sum / n + 0.5);
            for (size_t i = 0; i < 3 * n; i++)
                img[i] = rc(m + (float)f[1] * ((float)img[i] - m));
        } else {
            for (size_t i = 0; i < n; i++) {
                float y = luma(img[i], img[n + i], img[2 * n + i]);
                for (int c = 0; c < 3; c++)
                    img[c * n + i] = rc(y + (float)f[2] * ((float)img[c * n + i] - y));
            }
        }
    }
}

Test(jitter, adjustments_follow_torchvisions_definitions_in_the_drawn_order)
{
    uint8_t *hwc = ti_picture(H, W, 3, 3);
    const float cases[4][3] = {{0.4f, 0, 0}, {0, 0.6f, 0}, {0, 0, 0.9f}, {0.3f, 0.4f, 0.5f}};
    uint8_t got[3 * H * W];
    int orders_seen = 0;
    for (int cs = 0; cs < 4; cs++)
        for (int k = 0; k < 10; k++) {
            img_params p = {.channels = 3, .hflip = 0};
            memcpy(p.jitter, cases[cs], sizeof p.jitter);
            rng r = rng_keyed(2, RNG_AUGMENT, (uint64_t)cs, (uint64_t)k), r2 = r;
            errbuf e;
            cr_assert_eq(img_augment(got, H, W, hwc, H, W, &p, &r, &e), 0, "%s", e.msg);
            int order[3];
            double f[3];
            expected_draws(&r2, p.jitter, order, f);
            uint8_t *want = ti_chw(hwc, H, W, 3);
            reference(want, order, f, p.jitter);
            cr_assert(memcmp(want, got, sizeof got) == 0, "case %d sample %d (order %d%d%d)", cs, k,
                      order[0], order[1], order[2]);
            orders_seen |= 1 << (order[0] * 3 + order[1]);
            free(want);
            if (cs == 3 && k == 0) { /* the jitter did something */
                uint8_t *plain = ti_chw(hwc, H, W, 3);
                cr_assert(memcmp(plain, got, sizeof got) != 0);
                free(plain);
            }
        }
    cr_assert(__builtin_popcount((unsigned)orders_seen) >= 4, "orders vary: %x", orders_seen);
    free(hwc);
}

/* Grey stays grey: saturation leaves it alone, and a saturation factor
 * of 0 makes a colour image grey (its luma in every channel). */
Test(jitter, saturation_zero_gives_the_luma_and_grey_is_left_alone)
{
    uint8_t *rgb = ti_picture(H, W, 3, 4), *grey = ti_picture(H, W, 1, 4);
    img_params p = {.channels = 3, .hflip = 0, .jitter = {0, 0, 1.0f}};
    uint8_t out[3 * H * W];
    errbuf e;
    int zero_seen = 0;
    for (int k = 0; k < 200 && !zero_seen; k++) {
        rng r = rng_keyed(3, RNG_AUGMENT, 0, (uint64_t)k), r2 = r;
        int order[3];
        double f[3];
        expected_draws(&r2, p.jitter, order, f);
        cr_assert_eq(img_augment(out, H, W, rgb, H, W, &p, &r, &e), 0);
        if (f[2] < 0.01) {
            zero_seen = 1;
            for (size_t i = 0; i < (size_t)H * W; i++) {
                int y = luma(rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2]);
                cr_assert(abs(out[i] - y) <= 2 && abs(out[H * W + i] - y) <= 2, "pixel %zu", i);
            }
        }
    }
    cr_assert(zero_seen, "no factor near 0 in 200 draws");
    p.channels = 1;
    rng r = rng_keyed(3, RNG_AUGMENT, 1, 0);
    cr_assert_eq(img_augment(out, H, W, grey, H, W, &p, &r, &e), 0);
    cr_assert(memcmp(out, grey, (size_t)H * W) == 0, "grey image changed by saturation");
    free(rgb), free(grey);
}

/* --normalize imagenet is exactly ImageNet's numbers given by hand; the
 * jitter changes training and works in preload mode too. */
Test(jitter, normalize_imagenet_is_the_preset_and_jitter_trains_lazy_and_preloaded)
{
    for (int k = 0; k < 6; k++) {
        char name[64];
        uint8_t *px = ti_picture(40, 40, 3, (uint64_t)k + 1);
        snprintf(name, sizeof name, "set/%c/%d.jpg", 'a' + k % 2, k);
        free(ti_write_jpeg(dir, name, px, 40, 40, TJPF_RGB, TJSAMP_420, 90, 0));
        free(px);
    }
    char *set = path_join(dir, "set");
    const char *names[5] = {"a.json", "b.json", "c.json", "d.json", "e.json"};
    char *j[5];
    for (int i = 0; i < 5; i++)
        j[i] = path_join(dir, names[i]);
    run_result r;
#define RUN(json, ...)                                                                             \
    do {                                                                                           \
        run_train(&r, "--resize", "32x32", "--batch", "3", "--epochs", "1", "--json", json,        \
                  __VA_ARGS__, set, NULL);                                                         \
        cr_assert_eq(r.status, 0, "%s", r.err);                                                    \
        run_free(&r);                                                                              \
    } while (0)
    RUN(j[0], "--normalize", "imagenet");
    RUN(j[1], "--mean", "0.485,0.456,0.406", "--std", "0.229,0.224,0.225");
    RUN(j[2], "--mean", "0.5");
    RUN(j[3], "--color-jitter", "0.4,0.4,0.4");
    RUN(j[4], "--color-jitter", "0.4,0.4,0.4", "--mode", "preload");
#undef RUN
    char v[5][1][JSON_VALUE_MAX];
    for (int i = 0; i < 5; i++)
        cr_assert_eq(json_epoch_values(j[i], "loss", v[i], 1), 1);
    cr_assert_str_eq(v[0][0], v[1][0], "the preset is ImageNet's mean and std");
    cr_assert_str_neq(v[0][0], v[2][0], "and not the default");
    cr_assert_str_neq(v[3][0], v[2][0], "jitter changes the samples");
    cr_assert_str_eq(v[3][0], v[4][0], "lazy and preload jitter the same way");
    run_train(&r, "--normalize", "imagenet", "--mean", "0.5", set, NULL);
    cr_assert_eq(r.status, 2);
    run_free(&r);
    for (int i = 0; i < 5; i++)
        free(j[i]);
    free(set);
}
