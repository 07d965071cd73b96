/* test_png_libpng.c — PNG decodes through libpng (image/png.c) give the
 * bytes stb_image gave before it (issue 29's follow-up), and Pillow's.
 *
 * The files are written here with libpng's writer: every colour type at
 * every bit depth the spec allows it, interlaced (Adam7) and not, with a
 * tRNS chunk and without (where the colour type may have one), palettes
 * shorter than the indices reach, colour-management chunks libpng must
 * not apply (gAMA, sRGB, cHRM, sBIT), several IDAT chunks, at 1x1, 3x5 and
 * 17x33. Each is loaded as 1 and 3 channels and compared byte for byte
 * with stb_image's decode of the same bytes (stbi_load_from_memory after
 * check.c's img_png_prepare, then stb.c's channel conversion: the old
 * path, an independent oracle), and the 8-bit grey, RGB and palette ones
 * also with Pillow's convert("RGB") / convert("L") for grey.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stb/stb_image.h>

#include "common/util.h"
#include "image/image.h"
#include "image/internal.h"
#include "tests/support/helpers.h"

static char *dir;
static void setup(void) { dir = tmpdir_make(); }
static void teardown(void) { tmpdir_remove(dir); }
TestSuite(png_libpng, .init = setup, .fini = teardown, .timeout = 120);

/* ---------------------------------------------------------------- writing */

typedef struct membuf {
    uint8_t *d;
    size_t n, cap;
} membuf;

static void mem_write(png_structp png, png_bytep data, size_t len)
{
    membuf *m = png_get_io_ptr(png);
    if (m->n + len > m->cap) {
        m->cap = (m->n + len) * 2;
        m->d = realloc(m->d, m->cap);
        cr_assert_not_null(m->d);
    }
    memcpy(m->d + m->n, data, len);
    m->n += len;
}

static void mem_flush(png_structp png) { (void)png; }

static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

typedef struct spec {
    int w, h, depth, ctype, interlace, trns, extras;
    int npal; /* palette entries written (palette images) */
} spec;

static char *spec_name(const spec *s)
{
    char *name = NULL;
    cr_assert(asprintf(&name, "c%d_d%d_%dx%d_i%d_t%d_x%d.png", s->ctype, s->depth, s->w, s->h,
                       s->interlace, s->trns, s->extras) > 0);
    return name;
}

static int samples_per_pixel(int ctype)
{
    return ctype == 0 || ctype == 3 ? 1 : ctype == 4 ? 2 : ctype == 2 ? 3 : 4;
}

/* A PNG of random rows (packed, big-endian 16-bit) with the spec's chunks. */
static uint8_t *write_png(const spec *s, uint32_t seed, size_t *len)
{
    membuf m = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    size_t rowbytes = ((size_t)s->w * samples_per_pixel(s->ctype) * s->depth + 7) / 8;
    uint8_t *rows = malloc(rowbytes * s->h);
    png_bytep *rp = malloc(sizeof *rp * s->h);
    if (setjmp(png_jmpbuf(png)))
        cr_assert_fail("libpng could not write %s", spec_name(s));
    png_set_write_fn(png, &m, mem_write, mem_flush);
    png_set_check_for_invalid_index(png, 0); /* indices past a short palette on purpose */
    if (s->extras)
        png_set_compression_buffer_size(png, 64); /* several IDAT chunks */
    png_set_IHDR(png, info, s->w, s->h, s->depth, s->ctype,
                 s->interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    uint32_t r = seed;
    for (size_t i = 0; i < rowbytes * s->h; i++)
        rows[i] = (uint8_t)lcg(&r);
    if (s->ctype == 3) {
        png_color pal[256];
        for (int i = 0; i < 256; i++)
            pal[i] = (png_color){(uint8_t)lcg(&r), (uint8_t)lcg(&r), (uint8_t)lcg(&r)};
        png_set_PLTE(png, info, pal, s->npal);
    }
    if (s->trns) {
        png_byte alpha[256];
        for (int i = 0; i < 256; i++)
            alpha[i] = (uint8_t)lcg(&r);
        /* the first pixel's value, so that stb_image marks some transparent */
        png_color_16 tc = {0};
        int mask = (1 << s->depth) - 1;
        if (s->ctype == 0)
            tc.gray = (png_uint_16)(s->depth == 16 ? rows[0] << 8 | rows[1]
                                                   : rows[0] >> (8 - s->depth) & mask);
        if (s->ctype == 2 && s->depth == 8)
            tc.red = rows[0], tc.green = rows[1], tc.blue = rows[2];
        if (s->ctype == 2 && s->depth == 16)
            tc.red = (png_uint_16)(rows[0] << 8 | rows[1]),
            tc.green = (png_uint_16)(rows[2] << 8 | rows[3]),
            tc.blue = (png_uint_16)(rows[4] << 8 | rows[5]);
        png_set_tRNS(png, info, alpha, s->ctype == 3 ? s->npal / 2 + 1 : 0, &tc);
    }
    if (s->extras) { /* colour management that must not be applied */
        png_set_gAMA(png, info, 0.8);
        png_set_cHRM(png, info, 0.3127, 0.329, 0.64, 0.33, 0.3, 0.6, 0.15, 0.06);
        png_color_8 sbit = {.red = 5, .green = 6, .blue = 5, .gray = 3, .alpha = 2};
        if (s->ctype != 3 && s->depth >= 8)
            png_set_sBIT(png, info, &sbit);
        png_text t = {.compression = PNG_TEXT_COMPRESSION_zTXt,
                      .key = "Comment",
                      .text = "a comment, compressed"};
        png_set_text(png, info, &t, 1);
    }
    png_write_info(png, info);
    for (int y = 0; y < s->h; y++)
        rp[y] = rows + (size_t)y * rowbytes;
    png_write_image(png, rp);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    free(rows);
    free(rp);
    *len = m.n;
    return m.d;
}

static char *put(const char *name, const uint8_t *d, size_t n)
{
    char *path = path_join(dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fwrite(d, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
    return path;
}

/* ---------------------------------------------------------------- oracles */

/* stb_image's decode of the bytes as stb.c gave it to stb_image (after
 * img_png_prepare), in C channels as stb.c converted them. */
static uint8_t *stb_decode(const uint8_t *d, size_t n, int C, int *h, int *w)
{
    img_ctx *c = img_ctx_create();
    img_info info = {.format = IMG_FMT_PNG};
    errbuf e = {{0}};
    const uint8_t *data = d;
    cr_assert_eq(img_png_header(d, n, &info, "x.png", &e), 0, "%s", e.msg);
    size_t len = n;
    cr_assert_eq(img_png_prepare(c, &data, &len, "x.png", &e), 0, "%s", e.msg);
    int k = 0;
    uint8_t *px = stbi_load_from_memory(data, (int)len, w, h, &k, 0);
    cr_assert_not_null(px, "stb_image: %s", stbi_failure_reason());
    size_t npix = (size_t)*w * *h;
    uint8_t *out = malloc(npix * C);
    for (size_t i = 0; i < npix; i++) {
        const uint8_t *s = px + i * k;
        if (k <= 2) {
            for (int j = 0; j < C; j++)
                out[i * C + j] = s[0];
        } else if (C == 1) {
            out[i] = img_luma(s[0], s[1], s[2]);
        } else {
            memcpy(out + i * 3, s, 3);
        }
    }
    stbi_image_free(px);
    img_ctx_free(c);
    return out;
}

/* Ours, through img_load_base (no resize: the decode itself). */
static uint8_t *our_decode(img_ctx *c, const char *path, int C, int *h, int *w)
{
    img_params p = {.channels = C};
    const uint8_t *base;
    errbuf e = {{0}};
    cr_assert_eq(img_load_base(c, path, &p, &base, h, w, &e), 0, "%s", e.msg);
    size_t n = (size_t)*h * *w * C;
    uint8_t *out = malloc(n);
    memcpy(out, base, n);
    return out;
}

static int compare(const char *what, const char *name, const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            cr_log_error("%s: %s: byte %zu: ours %d, %s %d", name, what, i, a[i], what, b[i]);
            return 1;
        }
    return 0;
}

/* ---------------------------------------------------------------- tests */

static int make_specs(spec *out)
{
    static const int depths[7][6] = {{1, 2, 4, 8, 16, 0}, {0}, {8, 16, 0}, {1, 2, 4, 8, 0},
                                     {8, 16, 0},          {0}, {8, 16, 0}};
    static const int sizes[3][2] = {{1, 1}, {3, 5}, {17, 33}};
    int n = 0;
    for (int ct = 0; ct <= 6; ct++)
        for (int di = 0; depths[ct][di]; di++)
            for (int si = 0; si < 3; si++)
                for (int il = 0; il < 2; il++)
                    for (int t = 0; t < (ct == 4 || ct == 6 ? 1 : 2); t++)
                        for (int x = 0; x < 2; x++) {
                            int d = depths[ct][di];
                            /* palettes: full, or shorter than the indices reach */
                            int npal = x ? (d == 8 ? 200 : (1 << d) - 1) : 1 << d;
                            out[n++] = (spec){.w = sizes[si][0],
                                              .h = sizes[si][1],
                                              .depth = d,
                                              .ctype = ct,
                                              .interlace = il,
                                              .trns = t,
                                              .extras = x,
                                              .npal = npal < 1 ? 1 : npal};
                        }
    return n;
}

Test(png_libpng, every_layout_decodes_to_stb_images_bytes)
{
    spec specs[400];
    int n = make_specs(specs);
    cr_log_info("png_libpng: %d files", n);
    cr_expect_geq(n, 200);
    img_ctx *c = img_ctx_create();
    int bad = 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        uint8_t *d = write_png(&specs[i], 7u + (uint32_t)i, &len);
        char *name = spec_name(&specs[i]);
        char *path = put(name, d, len);
        for (int C = 1; C <= 3; C += 2) {
            int h, w, sh, sw;
            uint8_t *ours = our_decode(c, path, C, &h, &w);
            uint8_t *want = stb_decode(d, len, C, &sh, &sw);
            cr_assert(h == specs[i].h && w == specs[i].w && sh == h && sw == w, "%s", name);
            bad += compare(C == 1 ? "stb_image (grey)" : "stb_image", name, ours, want,
                           (size_t)h * w * C);
            free(ours), free(want);
        }
        free(d), free(name), free(path);
    }
    cr_expect_eq(bad, 0, "%d decodes differ from stb_image's", bad);
    img_ctx_free(c);
}

/* stb_image checks neither CRCs nor the zlib stream's Adler-32, and libpng
 * is told to accept both as it did: the same bytes. */
Test(png_libpng, bad_crcs_and_adler32_are_accepted_as_stb_image_accepted_them)
{
    spec s = {.w = 17, .h = 33, .depth = 8, .ctype = 2, .extras = 1, .npal = 1};
    size_t len;
    uint8_t *d = write_png(&s, 99, &len);
    int h, w, sh, sw;
    uint8_t *want = stb_decode(d, len, 3, &sh, &sw);
    /* every chunk's CRC flipped, and the last IDAT's last 4 data bytes (the
     * Adler-32) */
    size_t last_idat_end = 0;
    for (size_t i = 8; i + 12 <= len;) {
        uint32_t cl = (uint32_t)d[i] << 24 | d[i + 1] << 16 | d[i + 2] << 8 | d[i + 3];
        if (memcmp(d + i + 4, "IDAT", 4) == 0)
            last_idat_end = i + 8 + cl;
        d[i + 8 + cl] ^= 0x5a;
        i += 12 + cl;
    }
    cr_assert_gt(last_idat_end, 4);
    d[last_idat_end - 1] ^= 0x33;
    char *path = put("crc.png", d, len);
    uint8_t *stb_too = stb_decode(d, len, 3, &sh, &sw);
    cr_assert_eq(memcmp(want, stb_too, (size_t)sh * sw * 3), 0, "stb_image accepts these");
    img_ctx *c = img_ctx_create();
    uint8_t *ours = our_decode(c, path, 3, &h, &w);
    cr_assert(h == sh && w == sw);
    cr_expect_eq(memcmp(ours, want, (size_t)h * w * 3), 0);
    img_ctx_free(c);
    free(d), free(want), free(stb_too), free(ours), free(path);
}

/* A broken zlib stream inside well-formed chunks is refused with libpng's
 * reason, in the one-line "path: corrupt PNG (...)" shape; nothing printed. */
Test(png_libpng, a_corrupt_stream_is_refused_in_one_line)
{
    spec s = {.w = 17, .h = 33, .depth = 8, .ctype = 2, .npal = 1};
    size_t len;
    uint8_t *d = write_png(&s, 5, &len);
    for (size_t i = 8; i + 12 <= len;) {
        uint32_t cl = (uint32_t)d[i] << 24 | d[i + 1] << 16 | d[i + 2] << 8 | d[i + 3];
        if (memcmp(d + i + 4, "IDAT", 4) == 0) {
            memset(d + i + 8 + 2, 0xff, cl - 6); /* the deflate data, after the zlib header */
            break;
        }
        i += 12 + cl;
    }
    char *path = put("stream.png", d, len);
    img_ctx *c = img_ctx_create();
    img_params p = {.channels = 3};
    const uint8_t *base;
    int h, w;
    errbuf e = {{0}};
    cr_assert_eq(img_load_base(c, path, &p, &base, &h, &w, &e), -1);
    char want[ERR_MAX];
    snprintf(want, sizeof want, "%s: corrupt PNG (", path);
    cr_expect_eq(strncmp(e.msg, want, strlen(want)), 0, "%s", e.msg);
    cr_expect_null(strchr(e.msg, '\n'));
    img_ctx_free(c);
    free(d), free(path);
}

/* A copy of the PNG d[0..n) with a chunk (CRC left 0: neither decoder
 * checks it) inserted before the first chunk of type `before`. */
static uint8_t *with_chunk(const uint8_t *d, size_t n, const char *before, const char *type,
                           const uint8_t *data, uint32_t len, size_t *out_n)
{
    size_t at = 0;
    for (size_t i = 8; i + 12 <= n && !at;) {
        uint32_t cl = (uint32_t)d[i] << 24 | d[i + 1] << 16 | d[i + 2] << 8 | d[i + 3];
        if (memcmp(d + i + 4, before, 4) == 0)
            at = i;
        i += 12 + cl;
    }
    cr_assert_gt(at, 0, "no %s chunk", before);
    uint8_t *o = calloc(1, n + 12 + len);
    memcpy(o, d, at);
    uint8_t *c = o + at;
    c[0] = (uint8_t)(len >> 24), c[1] = (uint8_t)(len >> 16), c[2] = (uint8_t)(len >> 8);
    c[3] = (uint8_t)len;
    memcpy(c + 4, type, 4);
    memcpy(c + 8, data, len);
    memcpy(c + 12 + len, d + at, n - at);
    *out_n = n + 12 + len;
    return o;
}

/* The tRNS chunks stb_image refused are refused in its words (libpng would
 * ignore them, as tRNS never changes our pixels); an unknown critical chunk
 * after the image data is refused as stb_image refused it. */
Test(png_libpng, what_stb_image_refused_in_chunks_is_refused)
{
    static const struct {
        int ctype;
        const char *before, *type;
        uint32_t len;
        const char *reason; /* ours; stb_image's is the same where stb is set */
        int stb;
    } cases[] = {
        {2, "IDAT", "tRNS", 4, "corrupt PNG (bad tRNS len)", 1},
        {0, "IDAT", "tRNS", 6, "corrupt PNG (bad tRNS len)", 1},
        {6, "IDAT", "tRNS", 6, "corrupt PNG (tRNS with alpha)", 1},
        {4, "IDAT", "tRNS", 2, "corrupt PNG (tRNS with alpha)", 1},
        {2, "IEND", "tRNS", 6, "corrupt PNG (tRNS after IDAT)", 1},
        {3, "IDAT", "tRNS", 200, "corrupt PNG (bad tRNS len)", 1},
        {3, "PLTE", "tRNS", 1, "corrupt PNG (tRNS before PLTE)", 1},
        {2, "IEND", "ABCD", 1, "corrupt PNG (ABCD: unhandled critical chunk)", 0},
    };
    uint8_t zeros[256] = {0};
    img_ctx *c = img_ctx_create();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        spec s = {.w = 5, .h = 3, .depth = 8, .ctype = cases[i].ctype, .npal = 16};
        size_t len, n;
        uint8_t *d = write_png(&s, 11, &len);
        uint8_t *b = with_chunk(d, len, cases[i].before, cases[i].type, zeros, cases[i].len, &n);
        char name[32];
        snprintf(name, sizeof name, "chunk%zu.png", i);
        char *path = put(name, b, n);
        img_params p = {.channels = 3};
        const uint8_t *base;
        int h, w, k;
        errbuf e = {{0}};
        cr_expect_eq(img_load_base(c, path, &p, &base, &h, &w, &e), -1, "%s loaded", name);
        char want[ERR_MAX];
        snprintf(want, sizeof want, "%s: %s", path, cases[i].reason);
        cr_expect_str_eq(e.msg, want);
        /* stb_image refused it too */
        uint8_t *px = stbi_load_from_memory(b, (int)n, &w, &h, &k, 0);
        cr_expect_null(px, "%s: stb_image accepted it", name);
        if (cases[i].stb && !px)
            cr_expect(strstr(cases[i].reason, stbi_failure_reason()), "%s: stb_image said %s", name,
                      stbi_failure_reason());
        stbi_image_free(px);
        free(d), free(b), free(path);
    }
    img_ctx_free(c);
}

/* Pillow's convert("RGB") of the 8-bit grey, RGB and palette files: those
 * with full palettes (Pillow 9.4 shows an index past a short palette as
 * grey i, i, i; stb_image after img_png_prepare, and libpng, as black). */
Test(png_libpng, eight_bit_files_match_pillow)
{
    if (system("/usr/bin/python3 -c 'import PIL' 2>/dev/null") != 0)
        cr_skip_test("Debian's python3-pil is not installed (make deps installs it)");
    spec specs[400], keep[400];
    int n = make_specs(specs), k = 0;
    for (int i = 0; i < n; i++)
        if (specs[i].depth == 8 && (specs[i].ctype == 0 || specs[i].ctype == 2 ||
                                    (specs[i].ctype == 3 && specs[i].npal == 256)))
            keep[k++] = specs[i];
    cr_assert_gt(k, 30);
    for (int i = 0; i < k; i++) {
        size_t len;
        uint8_t *d = write_png(&keep[i], 1000u + (uint32_t)i, &len);
        char *name = spec_name(&keep[i]);
        free(put(name, d, len));
        free(d), free(name);
    }
    char *script =
        write_text(dir, "pil.py",
                   "import os, sys\n"
                   "from PIL import Image\n"
                   "d = sys.argv[1]\n"
                   "for n in sorted(os.listdir(d)):\n"
                   "    if n.endswith('.png'):\n"
                   "        b = Image.open(os.path.join(d, n)).convert('RGB').tobytes()\n"
                   "        open(os.path.join(d, n[:-4] + '.pil'), 'wb').write(b)\n");
    char *argv[] = {"/usr/bin/python3", script, dir, NULL};
    run_result r;
    run_argv(argv, NULL, 120, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    img_ctx *c = img_ctx_create();
    int bad = 0;
    for (int i = 0; i < k; i++) {
        char *name = spec_name(&keep[i]);
        char *path = path_join(dir, name);
        char pil[600];
        snprintf(pil, sizeof pil, "%.*s.pil", (int)strlen(path) - 4, path);
        size_t len;
        errbuf e = {{0}};
        char *want = read_whole_file(pil, &len, &e);
        cr_assert(want, "%s", e.msg);
        int h, w;
        uint8_t *ours = our_decode(c, path, 3, &h, &w);
        cr_assert_eq((size_t)h * w * 3, len, "%s", name);
        bad += compare("Pillow", name, ours, (const uint8_t *)want, len);
        free(ours), free(want), free(name), free(path);
    }
    cr_expect_eq(bad, 0, "%d of %d decodes differ from Pillow's", bad, k);
    img_ctx_free(c);
    free(script);
    run_free(&r);
}
