/* test_mutant_kills.c — behaviour the generated mutants of issue 26's
 * review showed untested (tools/mutate-gen, docs/TESTING.md "Generated
 * mutants"): the verified-JPEG set over many files, the OS/2 BMP header,
 * BMP bit depths and compressions no decoder here reads, a --trace file
 * whose last flush fails, and an Exif segment after the first scan. Real
 * files (JPEGs by TurboJPEG, BMPs written byte by byte from the format's
 * layout) and a real run of the binary. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "image/internal.h"
#include "tests/support/helpers.h"
#include "tests/support/images.h"

static char *dir;
static void setup(void) { dir = tmpdir_make(); }
static void teardown(void) { tmpdir_remove(dir); }
TestSuite(mutant_kills, .init = setup, .fini = teardown);

/* ---------------------------------------------------------------- JPEG verified set */

/* The random-resized crop decodes a region; the first time a context meets
 * a file it reads the file to its end and remembers its hash, so later
 * epochs skip the tail. Over 64 files the set holds 64 entries in a table
 * that stays small (half full at most, from 1024 slots): a table that grew
 * on every insert doubles 64 times (gen-image-image-L75-ror-gt-ne). */
Test(mutant_kills, the_verified_jpeg_set_stays_small_over_many_files)
{
    enum { N = 64, S = 40 }; /* under the planar decode's minimum side: the RGB region path */
    char *paths[N];
    for (int k = 0; k < N; k++) {
        uint8_t *px = ti_picture(S, S, 3, 100 + (uint64_t)k);
        char name[32];
        snprintf(name, sizeof name, "v%02d.jpg", k);
        paths[k] = ti_write_jpeg(dir, name, px, S, S, TJPF_RGB, TJSAMP_420, 90, 0);
        free(px);
    }
    img_params p = {.channels = 3, .crop_h = 16, .crop_w = 16, .rrc = 1};
    p.rrc_scale[0] = 0.08f, p.rrc_scale[1] = 0.2f; /* small boxes: a tail below them to read */
    p.rrc_ratio[0] = 0.75f, p.rrc_ratio[1] = 4.0f / 3.0f;
    img_ctx *c = img_ctx_create();
    uint8_t out[3 * 16 * 16];
    for (int epoch = 0; epoch < 2; epoch++)
        for (int k = 0; k < N; k++) {
            rng r = rng_keyed(7, RNG_AUGMENT, (uint64_t)epoch, (uint64_t)k);
            errbuf e = {{0}};
            cr_assert_eq(img_load(c, paths[k], &p, &r, out, 16, 16, &e), 0, "%s", e.msg);
            size_t want = epoch ? N : (size_t)k + 1;
            cr_assert_eq(c->verified_n, want, "epoch %d file %d: %zu files remembered", epoch, k,
                         c->verified_n);
            /* 8 bytes a slot: at most 8 KiB for up to 512 files */
            cr_assert_leq(c->verified_cap, 1024, "epoch %d file %d: %zu slots for %zu files", epoch,
                          k, c->verified_cap, c->verified_n);
            cr_assert_geq(c->verified_cap, 2 * c->verified_n);
        }
    img_ctx_free(c);
    for (int k = 0; k < N; k++)
        free(paths[k]);
}

/* ---------------------------------------------------------------- BMP headers */

static void put16(uint8_t *p, unsigned v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A BMP: the 14-byte file header, an info header of hsz bytes (12: OS/2's
 * BITMAPCOREHEADER with 16-bit sizes and no compression field; 40:
 * BITMAPINFOHEADER), pal_n palette entries (3 bytes each after a core
 * header, 4 after an info header; colour k is (k*60, 255-k*60, k*30)) and
 * the pixel bytes as given. */
static char *bmp_file(const char *name, int hsz, int w, int h, int bpp, int compression, int pal_n,
                      const uint8_t *data, size_t data_len)
{
    const size_t entry = hsz == 12 ? 3 : 4, off = 14 + (size_t)hsz + entry * (size_t)pal_n;
    const size_t total = off + data_len;
    uint8_t *b = calloc(1, total);
    b[0] = 'B', b[1] = 'M';
    put32(b + 2, (uint32_t)total);
    put32(b + 10, (uint32_t)off);
    put32(b + 14, (uint32_t)hsz);
    if (hsz == 12) {
        put16(b + 18, (unsigned)w), put16(b + 20, (unsigned)h);
        put16(b + 22, 1), put16(b + 24, (unsigned)bpp);
    } else {
        put32(b + 18, (uint32_t)w), put32(b + 22, (uint32_t)h);
        put16(b + 26, 1), put16(b + 28, (unsigned)bpp);
        put32(b + 30, (uint32_t)compression);
        put32(b + 34, (uint32_t)data_len);
        put32(b + 46, (uint32_t)pal_n);
    }
    for (int k = 0; k < pal_n; k++) { /* stored B, G, R (, 0) */
        uint8_t *e = b + 14 + hsz + entry * (size_t)k;
        e[0] = (uint8_t)(k * 30), e[1] = (uint8_t)(255 - k * 60), e[2] = (uint8_t)(k * 60);
    }
    memcpy(b + off, data, data_len);
    char *path = write_file(dir, name, b, total);
    free(b);
    return path;
}

/* Loading fails with exactly "path: reason" */
static void expect_refused(const char *path, const char *reason)
{
    img_ctx *c = img_ctx_create();
    img_params p = {.channels = 3};
    const uint8_t *base;
    int bh, bw;
    errbuf e = {{0}};
    cr_assert_eq(img_load_base(c, path, &p, &base, &bh, &bw, &e), -1, "%s loaded", path);
    char want[ERR_MAX];
    snprintf(want, sizeof want, "%s: %s", path, reason);
    cr_assert_str_eq(e.msg, want);
    img_ctx_free(c);
}

/* OS/2's 12-byte core header has no compression field: a 24-bit one is
 * uncompressed, decodes to its pixels, and goes through the same checks as
 * a Windows header — bits per pixel no decoder reads refused from the
 * header (stb_image would allocate the image first), a file cut short
 * named truncated (gen-image-check-L161-const-0_1 gave it compression 1,
 * which skips the checks). */
Test(mutant_kills, an_os2_core_header_bmp_loads_and_is_checked)
{
    enum { H = 3, W = 5 };
    const size_t stride = (W * 3 + 3) & ~(size_t)3;
    uint8_t want[H * W * 3], data[H * 16];
    cr_assert_eq(stride, 16);
    memset(data, 0xEE, sizeof data); /* row padding: never read */
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            uint8_t *rgb = want + ((size_t)y * W + x) * 3;
            rgb[0] = (uint8_t)(40 * y + 7 * x), rgb[1] = (uint8_t)(200 - 30 * x),
            rgb[2] = (uint8_t)(11 * (x + y) + 3);
            uint8_t *bgr = data + (size_t)(H - 1 - y) * stride + (size_t)x * 3; /* bottom-up */
            bgr[0] = rgb[2], bgr[1] = rgb[1], bgr[2] = rgb[0];
        }
    char *ok = bmp_file("core24.bmp", 12, W, H, 24, 0, 0, data, sizeof data);
    img_ctx *c = img_ctx_create();
    img_params p = {.channels = 3};
    const uint8_t *base;
    int bh, bw;
    errbuf e = {{0}};
    cr_assert_eq(img_load_base(c, ok, &p, &base, &bh, &bw, &e), 0, "%s", e.msg);
    cr_assert(bh == H && bw == W, "%dx%d", bh, bw);
    cr_assert_arr_eq(base, want, sizeof want, "the pixels as written");
    img_ctx_free(c);

    /* 2 bits per pixel, with its 4-colour palette: no BMP reader here
     * decodes it */
    uint8_t idx[4 * 4] = {0x1B, 0, 0, 0, 0xE4, 0, 0, 0, 0x55, 0, 0, 0, 0xAA, 0, 0, 0};
    char *two = bmp_file("core2.bmp", 12, 4, 4, 2, 0, 4, idx, sizeof idx);
    expect_refused(two, "corrupt or unsupported BMP (2 bits per pixel)");

    /* the last row missing */
    char *cut = bmp_file("core24cut.bmp", 12, W, H, 24, 0, 0, data, sizeof data - stride);
    expect_refused(cut, "truncated BMP (the data ends before the image)");
    free(ok), free(two), free(cut);
}

/* Bits per pixel between the palette depths (2, 3, 5, 6, 7) are in no BMP
 * version: refused from the header naming the depth. A BMP that carries
 * another format (compression 5, BI_PNG, with biBitCount 0 as the format
 * says) or run lengths (compression 1) is refused for its compression, as
 * stb_image refuses it before allocating, not for a palette the header
 * never promised (gen-image-check-L205-ror-ne-gt sent bit counts under 8
 * other than 1, 4 and 8 to the palette check). */
Test(mutant_kills, bmp_bit_depths_and_compressions_without_a_reader_are_refused)
{
    uint8_t idx[16] = {0x1B, 0x2C, 0, 0, 0xE4, 0x3F, 0, 0, 0x55, 0x12, 0, 0, 0xAA, 0x7F, 0, 0};
    const int depths[] = {2, 3, 5, 6, 7};
    for (size_t i = 0; i < sizeof depths / sizeof *depths; i++) {
        char name[32], reason[96];
        snprintf(name, sizeof name, "bpp%d.bmp", depths[i]);
        char *path = bmp_file(name, 40, 4, 4, depths[i], 0, 1 << depths[i], idx, sizeof idx);
        snprintf(reason, sizeof reason, "corrupt or unsupported BMP (%d bits per pixel)",
                 depths[i]);
        expect_refused(path, reason);
        free(path);
    }
    /* a PNG inside a BMP (what Windows' BI_PNG allows) */
    size_t png_len;
    uint8_t rows[4 * 4 * 3] = {0};
    uint8_t *png = ti_png_bytes(4, 4, 8, 2, rows, NULL, 0, &png_len);
    char *bi_png = bmp_file("bipng.bmp", 40, 4, 4, 0, 5, 0, png, png_len);
    expect_refused(bi_png, "corrupt BMP (BMP JPEG/PNG)");
    /* 2 bits per pixel said to be run-length coded */
    char *rle = bmp_file("rle2.bmp", 40, 4, 4, 2, 1, 0, idx, sizeof idx);
    expect_refused(rle, "corrupt BMP (BMP RLE)");
    free(png), free(bi_png), free(rle);
}

/* ---------------------------------------------------------------- EXIF after the scan */

/* An Exif APP1 with orientation 6 (turned a quarter: the upright image is
 * w x h for an h x w file); returns its length, written to app. */
static size_t exif_app1(uint8_t app[40])
{
    static const uint8_t tiff[26] = {'I',  'I',  42, 0, 8, 0, 0, 0,             /* IFD0 at 8 */
                                     1,    0,                                   /* one entry */
                                     0x12, 0x01, 3,  0, 1, 0, 0, 0, 6, 0, 0, 0, /* Orientation 6 */
                                     0,    0,    0,  0};
    const size_t seg = 2 + 6 + sizeof tiff;
    app[0] = 0xFF, app[1] = 0xE1, app[2] = (uint8_t)(seg >> 8), app[3] = (uint8_t)seg;
    memcpy(app + 4, "Exif\0\0", 6);
    memcpy(app + 10, tiff, sizeof tiff);
    return 4 + 6 + sizeof tiff;
}

/* Where the first scan's entropy-coded data starts (after the SOS segment) */
static size_t scan_data(const uint8_t *j, size_t n)
{
    size_t at = 2;
    while (at + 4 <= n && j[at] == 0xFF) {
        size_t len = (size_t)j[at + 2] << 8 | j[at + 3];
        if (j[at + 1] == 0xDA)
            return at + 2 + len;
        at += 2 + len;
    }
    cr_assert_fail("no SOS in the JPEG");
    return 0;
}

/* As PIL and libjpeg, the loader looks for the Exif segment before the
 * first scan only. One after it is not read, even where the scan's first
 * bytes are a stuffed 0xFF (FF 00) and two bytes that, read as a segment
 * length, lead exactly to it (gen-image-exif-L75-const-0xDA_0xD9 walked on
 * past the scan's header). The same segment before the scan is read. */
Test(mutant_kills, an_exif_segment_after_the_first_scan_is_not_read)
{
    enum { H = 24, W = 40 };
    uint8_t *px = ti_picture(H, W, 3, 5);
    size_t len;
    uint8_t *j = ti_jpeg(px, H, W, TJPF_RGB, TJSAMP_444, 90, 0, &len);
    cr_assert(j[len - 2] == 0xFF && j[len - 1] == 0xD9);
    uint8_t app[40];
    const size_t alen = exif_app1(app), sd = scan_data(j, len), elen = len - 2 - sd;
    cr_assert_lt(elen + 2, 65536);

    /* before: SOI, the Exif segment, the rest */
    uint8_t *f = malloc(len + alen + 4);
    memcpy(f, j, 2);
    memcpy(f + 2, app, alen);
    memcpy(f + 2 + alen, j + 2, len - 2);
    char *before = write_file(dir, "before.jpg", f, len + alen);
    /* after: ... SOS, FF 00 and a length reaching past the entropy-coded
     * data, that data, the Exif segment, EOI */
    const size_t skip = elen + 2;
    uint8_t look[4] = {0xFF, 0x00, (uint8_t)(skip >> 8), (uint8_t)skip};
    size_t n = 0;
    memcpy(f + n, j, sd), n += sd;
    memcpy(f + n, look, 4), n += 4;
    memcpy(f + n, j + sd, elen), n += elen;
    cr_assert_eq(sd + 2 + skip, n, "the length leads to the segment");
    memcpy(f + n, app, alen), n += alen;
    f[n++] = 0xFF, f[n++] = 0xD9;
    char *after = write_file(dir, "after.jpg", f, n);

    int w, h, ch;
    errbuf e = {{0}};
    cr_assert_eq(img_probe(before, 1, &w, &h, &ch, &e), 0, "%s", e.msg);
    cr_assert(w == H && h == W, "before the scan: turned, %dx%d", h, w);
    cr_assert_eq(img_probe(after, 1, &w, &h, &ch, &e), 0, "%s", e.msg);
    cr_assert(w == W && h == H, "after the scan: not read, %dx%d", h, w);
    free(px), free(j), free(f), free(before), free(after);
}

/* ---------------------------------------------------------------- --trace on a full disk */

/* A run's trace is written at the end, through stdio: a small one stays in
 * the stream's buffer until fclose, so a disk that is full by then shows
 * only in fclose's result (gen-app-trace-L125-del-stmt dropped it and said
 * nothing). Under a file-size limit of 0 (SIGXFSZ ignored: writes fail with
 * EFBIG, as on a full disk) the run says the trace was not written, naming
 * the file and the reason. */
Test(mutant_kills, a_trace_whose_last_flush_fails_is_said)
{
    char text[256] = "path,label\n";
    for (int k = 0; k < 4; k++) {
        uint8_t *px = ti_picture(16, 16, 3, 40 + (uint64_t)k);
        char name[32];
        snprintf(name, sizeof name, "t%d.jpg", k);
        free(ti_write_jpeg(dir, name, px, 16, 16, TJPF_RGB, TJSAMP_420, 90, 0));
        free(px);
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s,%d\n", name, k % 2);
    }
    char *csv = write_text(dir, "t.csv", text), *tr = path_join(dir, "t.trace.json");
    char *argv[] = {"/bin/sh",
                    "-c",
                    "trap '' XFSZ; ulimit -f \"$0\"; exec \"$@\"",
                    "unlimited",
                    (char *)train_bin(),
                    "--model",
                    "probe",
                    "--batch",
                    "4",
                    "--workers",
                    "0",
                    "--no-progress",
                    "--trace",
                    tr,
                    csv,
                    NULL};
    run_result r;
    run_argv(argv, NULL, 120, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    struct stat st;
    cr_assert_eq(stat(tr, &st), 0);
    /* the premise: the whole trace fits one stdio buffer (st_blksize) */
    cr_assert_lt(st.st_size, st.st_blksize, "a %lld-byte trace", (long long)st.st_size);
    run_free(&r);
    unlink(tr);

    argv[3] = "0";
    run_argv(argv, NULL, 120, &r);
    cr_assert(strstr(r.err, tr) && strstr(r.err, "--trace") && strstr(r.err, strerror(EFBIG)),
              "exit %d, names the trace and the reason:\n%s", r.status, r.err);
    cr_assert(strstr(r.out, "probe "), "the epoch line is still printed:\n%s", r.out);
    /* as --json: a report not written is exit 1, and no half-written file */
    cr_expect_eq(r.status, 1, "%s", r.err);
    cr_expect_neq(access(tr, F_OK), 0, "the cut trace is removed");
    run_free(&r);
    free(csv), free(tr);
}

/* A TGA's decode memory is its own 3 bytes a pixel, not a GIF's 9: an
 * 11000 x 11000 run-length TGA (3.8 MB on disk, 363 MB decoded) passes
 * the header check, which a 9-byte estimate (1.09 GB) would refuse.
 * (gen-image-stb-L69: every format after GIF estimated as a GIF.) */
Test(mutant_kills, a_big_run_length_tga_is_estimated_at_its_own_size)
{
    enum { SIDE = 11000 };
    char *path = path_join(dir, "big.tga");
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    /* 18-byte header: type 10 (RLE true colour), 24 bpp, top-left origin */
    const uint8_t hdr[18] = {0, 0, 10, 0,           0,         0,           0,         0,  0,
                             0, 0, 0,  SIDE & 0xff, SIDE >> 8, SIDE & 0xff, SIDE >> 8, 24, 0x20};
    cr_assert_eq(fwrite(hdr, 1, sizeof hdr, f), sizeof hdr);
    const uint64_t px = (uint64_t)SIDE * SIDE;
    static uint8_t run[4096];
    for (size_t i = 0; i < sizeof run; i += 4) /* a 128-pixel run of one colour */
        run[i] = 0xFF, run[i + 1] = 10, run[i + 2] = 20, run[i + 3] = 30;
    uint64_t runs = px / 128;
    while (runs > 0) {
        size_t k = runs > sizeof run / 4 ? sizeof run / 4 : (size_t)runs;
        cr_assert_eq(fwrite(run, 4, k, f), k);
        runs -= k;
    }
    if (px % 128) {
        const uint8_t last[4] = {(uint8_t)(0x80 | (px % 128 - 1)), 10, 20, 30};
        cr_assert_eq(fwrite(last, 1, 4, f), 4u);
    }
    cr_assert_eq(fclose(f), 0);
    char *csv = write_text(dir, "tga.csv", "big.tga,0\n");
    run_result r;
    run_train(&r, "--check", csv, NULL);
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "check: 0 files"), "%s%s", r.out, r.err);
    run_free(&r);
    free(csv);
    free(path);
}
