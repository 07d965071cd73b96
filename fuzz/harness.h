/* harness.h — the image fuzz harness, shared by fuzz/fuzz_image.c (the
 * libFuzzer target and its plain replay build) and the corpus replay test
 * (tests/test_image_fuzz.c), so a crasher found by one fails the other.
 *
 * An input is one selector byte, which picks the parameters, followed by
 * the file's bytes. The harness writes the file, loads it, and checks the
 * invariants: a refusal is exactly one line `path: reason`; a success
 * gives img_load == img_load_base + img_augment byte for byte, and a second
 * load of the same file gives the same bytes. Then, differentially:
 *   - a fresh context gives the same outcome (bytes, or the same message):
 *     what a file decodes to must not depend on what the context decoded
 *     before (libjpeg keeps tables between images);
 *   - for JPEGs, the random-resized crop through the fused region decoder
 *     (libjpeg's API, --decode exact) equals the unfused path (TurboJPEG's
 *     full decode, then crop and resample) byte for byte, or both refuse;
 *     auto and fast accept whatever exact accepts.
 * A broken invariant aborts.
 * Limits are lowered (FUZZ_IMAGE_MAX_*) so that valid-but-huge headers are
 * refused cheaply instead of exhausting the fuzzer's memory.
 */
#ifndef TRAIN_FUZZ_HARNESS_H
#define TRAIN_FUZZ_HARNESS_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image/image.h"

#define FUZZ_IMAGE_MAX_SIDE 2048
#define FUZZ_IMAGE_MAX_PIXELS (4u << 20)

/* bit 0: gray; bits 1-2: resize none / 24x32 / shorter side 20 / 5x300;
 * bits 3-4: crop none / centre 16x16 / random 12x20 / centre 40x40;
 * bit 5: pad; bit 6: hflip 0.5 and --exif; bit 7: full-size JPEG decode. */
static inline void fuzz_image_params(uint8_t sel, img_params *p)
{
    static const int resize[4][3] = {{0, 0, 0}, {24, 32, 0}, {0, 0, 20}, {5, 300, 0}};
    static const int crop[4][3] = {{0, 0, 0}, {16, 16, 0}, {12, 20, 1}, {40, 40, 0}};
    memset(p, 0, sizeof *p);
    p->channels = sel & 1 ? 1 : 3;
    p->resize_h = resize[sel >> 1 & 3][0];
    p->resize_w = resize[sel >> 1 & 3][1];
    p->resize_short = resize[sel >> 1 & 3][2];
    p->crop_h = crop[sel >> 3 & 3][0];
    p->crop_w = crop[sel >> 3 & 3][1];
    p->random_crop = crop[sel >> 3 & 3][2];
    p->pad = sel >> 5 & 1;
    p->hflip = sel >> 6 & 1 ? 0.5f : 0.0f;
    p->exif = sel >> 6 & 1;
    p->full_decode = sel >> 7 & 1;
}

#define FUZZ_IMAGE_FAIL(...)                                                                       \
    do {                                                                                           \
        fprintf(stderr, "fuzz_image: invariant broken: " __VA_ARGS__);                             \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

static inline void fuzz_image_check_message(const char *path, const errbuf *e)
{
    size_t n = strlen(path);
    if (strncmp(e->msg, path, n) != 0 || strncmp(e->msg + n, ": ", 2) != 0 ||
        strlen(e->msg) <= n + 2 || strchr(e->msg, '\n'))
        FUZZ_IMAGE_FAIL("error is not one line `path: reason`: '%s'", e->msg);
}

/* The first round of checks; fuzz_image_one (below) adds the differential
 * ones. Returns 0 when the input loaded, 1 when it was refused properly. */
static inline int fuzz_image_core(img_ctx *c, const char *path, const uint8_t *data, size_t n)
{
    if (n == 0)
        return 1;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || (n > 1 && write(fd, data + 1, n - 1) != (ssize_t)(n - 1)) || close(fd) != 0)
        FUZZ_IMAGE_FAIL("cannot write %s", path);
    img_ctx_set_limits(c, FUZZ_IMAGE_MAX_SIDE, FUZZ_IMAGE_MAX_PIXELS);
    img_params p;
    fuzz_image_params(data[0], &p);
    const uint8_t *base;
    int bh, bw;
    errbuf e = {{0}}, e2 = {{0}};
    if (img_load_base(c, path, &p, &base, &bh, &bw, &e) != 0) {
        fuzz_image_check_message(path, &e);
        uint8_t one[3];
        rng r = rng_keyed(1, RNG_AUGMENT, 0, n);
        if (img_load(c, path, &p, &r, one, 1, 1, &e2) == 0 || strcmp(e.msg, e2.msg) != 0)
            FUZZ_IMAGE_FAIL("img_load disagrees with img_load_base: '%s' vs '%s'", e.msg, e2.msg);
        return 1;
    }
    if (bh <= 0 || bw <= 0 || bh > FUZZ_IMAGE_MAX_SIDE * 2 || bw > FUZZ_IMAGE_MAX_SIDE * 2)
        FUZZ_IMAGE_FAIL("base size %dx%d", bh, bw);
    int oh = p.crop_h > 0 ? p.crop_h : bh, ow = p.crop_h > 0 ? p.crop_w : bw;
    size_t nb = (size_t)bh * (size_t)bw * (size_t)p.channels;
    size_t no = (size_t)oh * (size_t)ow * (size_t)p.channels;
    uint8_t *copy = malloc(nb), *a = malloc(no), *b = malloc(no);
    if (!copy || !a || !b)
        FUZZ_IMAGE_FAIL("out of memory");
    memcpy(copy, base, nb);
    rng r1 = rng_keyed(1, RNG_AUGMENT, 0, n), r2 = r1;
    if (img_augment(a, oh, ow, copy, bh, bw, &p, &r1, &e) != 0)
        FUZZ_IMAGE_FAIL("augment of a loaded base failed: %s", e.msg);
    if (img_load(c, path, &p, &r2, b, oh, ow, &e) != 0)
        FUZZ_IMAGE_FAIL("second load failed: %s", e.msg);
    if (memcmp(a, b, no) != 0 || r1.s != r2.s)
        FUZZ_IMAGE_FAIL("img_load != img_load_base + img_augment");
    free(copy);
    free(a);
    free(b);
    return 0;
}

/* The outcome of one load through a fresh context: 0 and the bytes in out
 * (oh x ow x C), or -1 and the message. */
static inline int fuzz_image_fresh(const char *path, const img_params *p, uint64_t key,
                                   uint8_t *out, int oh, int ow, errbuf *e)
{
    img_ctx *f = img_ctx_create();
    img_ctx_set_limits(f, FUZZ_IMAGE_MAX_SIDE, FUZZ_IMAGE_MAX_PIXELS);
    rng r = rng_keyed(1, RNG_AUGMENT, 0, key);
    int rc = img_load(f, path, p, &r, out, oh, ow, e);
    img_ctx_free(f);
    return rc;
}

/* The differential checks (above) of the file fuzz_image_one just wrote;
 * c is the context it used. */
static inline void fuzz_image_differential(img_ctx *c, const char *path, const uint8_t *data,
                                           size_t n)
{
    if (n < 3)
        return;
    img_params p;
    fuzz_image_params(data[0], &p);
    /* 1. a used context and a fresh one agree */
    int oh = p.crop_h > 0 ? p.crop_h : 0, ow = p.crop_h > 0 ? p.crop_w : 0;
    if (oh == 0) { /* the output size is the base's */
        const uint8_t *base;
        errbuf e = {{0}};
        if (img_load_base(c, path, &p, &base, &oh, &ow, &e) != 0)
            oh = ow = 1;
    }
    size_t no = (size_t)oh * (size_t)ow * (size_t)p.channels;
    uint8_t *a = malloc(no), *b = malloc(no);
    if (!a || !b)
        FUZZ_IMAGE_FAIL("out of memory");
    errbuf e1 = {{0}}, e2 = {{0}};
    rng r = rng_keyed(1, RNG_AUGMENT, 0, n);
    int ra = img_load(c, path, &p, &r, a, oh, ow, &e1);
    int rb = fuzz_image_fresh(path, &p, n, b, oh, ow, &e2);
    if (ra != rb || (ra == 0 && memcmp(a, b, no) != 0) || (ra != 0 && strcmp(e1.msg, e2.msg)))
        FUZZ_IMAGE_FAIL("a fresh context disagrees: %d '%s' vs %d '%s'%s", ra, e1.msg, rb, e2.msg,
                        ra == rb && ra == 0 ? " (other bytes)" : "");
    free(a);
    free(b);
    /* 2. JPEG: the fused region decode against the unfused path */
    if (data[1] != 0xFF || data[2] != 0xD8)
        return;
    const int S = 16;
    img_params q = {.channels = p.channels,
                    .crop_h = S,
                    .crop_w = S,
                    .rrc = 1,
                    .decode = IMG_DECODE_EXACT,
                    .exif = p.exif};
    size_t m = (size_t)S * S * (size_t)q.channels;
    uint8_t *x = malloc(m), *y = malloc(m), *z = malloc(m);
    if (!x || !y || !z)
        FUZZ_IMAGE_FAIL("out of memory");
    errbuf ex = {{0}}, ey = {{0}}, ez = {{0}};
    q.full_decode = 1;
    int rx = fuzz_image_fresh(path, &q, n, x, S, S, &ex);
    q.full_decode = 0;
    int ry = fuzz_image_fresh(path, &q, n, y, S, S, &ey);
    if (rx != ry || (rx == 0 && memcmp(x, y, m) != 0))
        FUZZ_IMAGE_FAIL("rrc: the region decode disagrees with the full decode: %d '%s' vs %d "
                        "'%s'%s",
                        rx, ex.msg, ry, ey.msg, rx == ry ? " (other bytes)" : "");
    for (int d = IMG_DECODE_AUTO; rx == 0 && d <= IMG_DECODE_FAST; d += 2) {
        q.decode = d;
        if (fuzz_image_fresh(path, &q, n, z, S, S, &ez) != 0)
            FUZZ_IMAGE_FAIL("rrc: --decode %s refuses what exact accepts: '%s'",
                            d == IMG_DECODE_AUTO ? "auto" : "fast", ez.msg);
    }
    free(x);
    free(y);
    free(z);
}

/* Returns 0 when the input loaded, 1 when it was refused properly. */
static inline int fuzz_image_one(img_ctx *c, const char *path, const uint8_t *data, size_t n)
{
    int rc = fuzz_image_core(c, path, data, n);
    if (n > 0)
        fuzz_image_differential(c, path, data, n);
    return rc;
}

#endif
