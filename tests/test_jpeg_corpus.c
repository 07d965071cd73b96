/* test_jpeg_corpus.c — every JPEG layout a decoder meets (tests/support/
 * jpeg_corpus.c: grey and YCbCr with every sampling factor libjpeg takes,
 * per-component oddities, RGB, CMYK, YCCK; baseline, progressive,
 * arithmetic, restart intervals, optimised Huffman; sizes around every MCU
 * boundary), generated here, judged by answers from outside the paths
 * under test:
 *
 *   - the exact path (full-size decode) against Pillow, an independent
 *     program driving the same libjpeg: within a level;
 *   - every fast path (auto and fast random-resized crops, the validation
 *     recipe; region, planar, DCT-scaled decodes) against the exact path
 *     within the stated fidelity bound;
 *   - the same bytes whatever was decoded before, in the same context or a
 *     fresh one (decoder state must not carry over, and nothing may read
 *     memory it did not write);
 *   - files missing their tables fail on their own, whatever came before;
 *   - train's batches identical with 0, 1 and 3 workers and on two runs;
 *   - valgrind's memcheck over the decode paths (it sees inside libjpeg's
 *     pools, where ASan does not).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/rng.h"
#include "image/image.h"
#include "tests/support/helpers.h"
#include "tests/support/images.h"
#include "tests/support/jpeg_corpus.h"

static char *dir;

static void setup(void) { dir = tmpdir_make(); }
static void teardown(void)
{
    if (dir)
        tmpdir_remove(dir);
    dir = NULL;
}

TestSuite(jpeg_corpus, .init = setup, .fini = teardown);

typedef struct corpus {
    jc_spec *spec;
    char **path; /* NULL where libjpeg refused the layout */
    int n, written;
} corpus;

/* The whole corpus written to dir (every `stride`-th file from `first`). */
static corpus write_corpus(int first, int stride)
{
    corpus c = {0};
    int total = jc_corpus(NULL, 0);
    jc_spec *all = calloc((size_t)total, sizeof *all);
    jc_corpus(all, total);
    c.spec = calloc((size_t)total, sizeof *c.spec);
    c.path = calloc((size_t)total, sizeof *c.path);
    for (int i = first; i < total; i += stride) {
        jc_spec *s = &c.spec[c.n];
        *s = all[i];
        size_t len;
        char why[200];
        uint8_t *f = jc_encode(s, (uint64_t)i + 1, &len, why);
        if (f) {
            c.path[c.n] = write_file(dir, s->name, f, len);
            c.written++;
        } else {
            cr_log_info("jpeg_corpus: libjpeg refuses %s: %s", s->name, why);
        }
        free(f);
        c.n++;
    }
    free(all);
    return c;
}

static void free_corpus(corpus *c)
{
    for (int i = 0; i < c->n; i++)
        free(c->path[i]);
    free(c->path);
    free(c->spec);
}

/* dir/corpus.csv listing the written files, labels 0..classes-1 in turn;
 * returns its path. */
static char *write_corpus_csv(const corpus *c, int classes)
{
    size_t cap = 64 + (size_t)c->n * 96, o = 0;
    char *csv = malloc(cap);
    o += (size_t)snprintf(csv + o, cap - o, "path,label\n");
    for (int i = 0; i < c->n; i++)
        if (c->path[i])
            o += (size_t)snprintf(csv + o, cap - o, "%s,%d\n", c->spec[i].name, i % classes);
    char *path = write_text(dir, "corpus.csv", csv);
    free(csv);
    return path;
}

static int channels_of(const jc_spec *s) { return s->space == JC_GREY ? 1 : 3; }

Test(jpeg_corpus, libjpeg_writes_every_layout)
{
    corpus c = write_corpus(0, 1);
    cr_log_info("jpeg_corpus: %d files of %d specs", c.written, c.n);
    cr_expect_geq(c.n, 500);
    /* libjpeg refuses no layout of the list: each is a file decoders meet */
    cr_expect_eq(c.written, c.n, "%d of %d layouts refused", c.n - c.written, c.n);
    free_corpus(&c);
}

/* The full-size decode (the exact path's first step) of every file against
 * Pillow's: within one level (the same library under other code: only the
 * CMYK conversion's rounding may differ). */
Test(jpeg_corpus, the_exact_decode_is_pillows)
{
    if (system("/usr/bin/python3 -c 'import PIL' 2>/dev/null") != 0)
        cr_skip_test("Debian's python3-pil is not installed (make deps installs it)");
    corpus c = write_corpus(0, 1);
    char *script = write_text(dir, "pil.py",
                              "import os, sys\n"
                              "from PIL import Image\n"
                              "d = sys.argv[1]\n"
                              "for n in sorted(os.listdir(d)):\n"
                              "    if not n.endswith('.jpg'):\n"
                              "        continue\n"
                              "    try:\n"
                              "        im = Image.open(os.path.join(d, n))\n"
                              "        b = im.convert('L' if im.mode == 'L' else 'RGB').tobytes()\n"
                              "        open(os.path.join(d, n[:-4] + '.pil'), 'wb').write(b)\n"
                              "    except Exception as e:\n"
                              "        print(n, e)\n");
    char *argv[] = {"/usr/bin/python3", script, dir, NULL};
    run_result r;
    run_argv(argv, NULL, 120, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "", "Pillow refused: %s", r.out);
    img_ctx *ctx = img_ctx_create();
    int worse = 0, checked = 0;
    for (int i = 0; i < c.n; i++) {
        if (!c.path[i])
            continue;
        char pil[600];
        snprintf(pil, sizeof pil, "%.*s.pil", (int)strlen(c.path[i]) - 4, c.path[i]);
        size_t len;
        errbuf e = {{0}};
        char *want = read_whole_file(pil, &len, &e);
        cr_assert(want, "%s", e.msg);
        img_params p = {
            .channels = channels_of(&c.spec[i]), .full_decode = 1, .decode = IMG_DECODE_EXACT};
        const uint8_t *base;
        int bh, bw;
        cr_assert_eq(img_load_base(ctx, c.path[i], &p, &base, &bh, &bw, &e), 0, "%s", e.msg);
        cr_assert_eq((size_t)bh * bw * p.channels, len, "%s: %dx%dx%d vs Pillow's %zu bytes",
                     c.spec[i].name, bh, bw, p.channels, len);
        int mx;
        double mean = ti_mean_diff(base, (const uint8_t *)want, len, &mx);
        if (mx > 1) {
            worse++;
            cr_log_error("%s: %.3f mean, %d max levels from Pillow", c.spec[i].name, mean, mx);
        }
        checked++;
        free(want);
    }
    cr_expect_eq(worse, 0, "%d of %d files more than a level from Pillow", worse, checked);
    img_ctx_free(ctx);
    free(script);
    run_free(&r);
    free_corpus(&c);
}

static img_params rrc(int s, int decode, int channels)
{
    img_params p = {.channels = channels, .crop_h = s, .crop_w = s, .rrc = 1, .decode = decode};
    p.rrc_scale[0] = 0.08f, p.rrc_scale[1] = 1.0f;
    p.rrc_ratio[0] = 0.75f, p.rrc_ratio[1] = 4.0f / 3.0f;
    return p;
}

/* the validation recipe: shorter side to s * 8 / 7, centre crop s */
static img_params val(int s, int decode, int channels)
{
    img_params p = {.channels = channels,
                    .resize_short = s * 8 / 7,
                    .crop_h = s,
                    .crop_w = s,
                    .decode = decode};
    return p;
}

static void load(img_ctx *c, const char *path, const img_params *p, int k, uint8_t *out)
{
    errbuf e = {{0}};
    rng r = rng_keyed(5, RNG_AUGMENT, 1, (uint64_t)k);
    cr_assert_eq(img_load(c, path, p, &r, out, p->crop_h, p->crop_w, &e), 0, "%s", e.msg);
}

/* The crop size for a file: 224 for the large ones, 24 for small ones */
static int crop_for(const jc_spec *s) { return s->h >= 300 ? 224 : 24; }

/* auto and fast, random-resized crops and the validation recipe, against
 * the exact path (full-size decode, crop, resample), per file. The bounds:
 * on the large files the photographs' (docs/BENCH-PHOTOS.md): auto mean
 * 0.5 / p99 4 levels, fast 1.0 / 6; on files of 1-70 pixels, whose few
 * chroma samples weigh more, auto 1.0 / 4 and fast 3.0 / 12 (measured
 * worst: 0.74 / 4 and 2.7 / 10, 4:1:1-type chroma at DCT scale 7/8). The
 * defects this suite found were 45-120 levels off. */
Test(jpeg_corpus, fast_paths_stay_within_their_bound_of_the_exact_path)
{
    corpus c = write_corpus(0, 1);
    img_ctx *ctx = img_ctx_create();
    int bad = 0;
    for (int i = 0; i < c.n; i++) {
        if (!c.path[i])
            continue;
        const int S = crop_for(&c.spec[i]), C = channels_of(&c.spec[i]);
        const size_t n = (size_t)S * S * C;
        uint8_t *ref = malloc(n), *got = malloc(n);
        for (int recipe = 0; recipe < 2; recipe++)
            for (int decode = IMG_DECODE_AUTO; decode <= IMG_DECODE_FAST; decode += 2) {
                ti_hist d = {{0}, 0};
                for (int k = 0; k < (recipe ? 1 : 4); k++) {
                    img_params p =
                        recipe ? val(S, IMG_DECODE_EXACT, C) : rrc(S, IMG_DECODE_EXACT, C);
                    p.full_decode = 1;
                    load(ctx, c.path[i], &p, k, ref);
                    p.full_decode = 0;
                    p.decode = decode;
                    load(ctx, c.path[i], &p, k, got);
                    ti_hist_add(&d, ref, got, n);
                }
                int q, mx;
                double mean = ti_hist_mean(&d, &q, &mx);
                const int big = c.spec[i].h >= 300, fast = decode == IMG_DECODE_FAST;
                const double mean_max = big ? (fast ? 1.0 : 0.5) : (fast ? 3.0 : 1.0);
                const int q_max = big ? (fast ? 6 : 4) : (fast ? 12 : 4);
                if (mean > mean_max || q > q_max) {
                    bad++;
                    cr_log_error("%s, %s %s: mean %.3f, p99 %d, max %d", c.spec[i].name,
                                 recipe ? "validation" : "rrc",
                                 decode == IMG_DECODE_AUTO ? "auto" : "fast", mean, q, mx);
                }
            }
        free(ref);
        free(got);
    }
    cr_expect_eq(bad, 0, "%d path/file pairs outside the bound", bad);
    img_ctx_free(ctx);
    free_corpus(&c);
}

/* Every path's bytes for every file: in corpus order through one context,
 * in reverse order through another, and from a fresh context each: equal. */
Test(jpeg_corpus, the_same_bytes_whatever_was_decoded_before)
{
    corpus c = write_corpus(0, 3);
    const int paths = 4;
    uint8_t **first = calloc((size_t)c.n * paths, sizeof *first);
    img_ctx *fwd = img_ctx_create(), *rev = img_ctx_create();
    int bad = 0;
    for (int pass = 0; pass < 3; pass++)
        for (int j = 0; j < c.n; j++) {
            const int i = pass == 1 ? c.n - 1 - j : j;
            if (!c.path[i])
                continue;
            const int S = crop_for(&c.spec[i]), C = channels_of(&c.spec[i]);
            const size_t n = (size_t)S * S * C;
            img_ctx *ctx = pass == 0 ? fwd : pass == 1 ? rev : img_ctx_create();
            for (int k = 0; k < paths; k++) {
                img_params p = k < 2 ? rrc(S, k == 0 ? IMG_DECODE_AUTO : IMG_DECODE_FAST, C)
                                     : val(S, k == 2 ? IMG_DECODE_AUTO : IMG_DECODE_FAST, C);
                uint8_t *out = malloc(n);
                load(ctx, c.path[i], &p, k, out);
                uint8_t **slot = &first[(size_t)i * paths + k];
                if (!*slot) {
                    *slot = out;
                } else {
                    if (memcmp(*slot, out, n) != 0 && bad++ < 20)
                        cr_log_error("%s, path %d: other bytes on pass %d", c.spec[i].name, k,
                                     pass);
                    free(out);
                }
            }
            if (pass == 2)
                img_ctx_free(ctx);
        }
    cr_expect_eq(bad, 0, "%d decodes depended on what came before", bad);
    for (int i = 0; i < c.n * paths; i++)
        free(first[i]);
    free(first);
    img_ctx_free(fwd);
    img_ctx_free(rev);
    free_corpus(&c);
}

/* One decode of path through ctx as path k (0: exact base, 1: rrc auto,
 * 2: validation auto): the bytes, or NULL with the message in msg. */
static uint8_t *outcome(img_ctx *ctx, const char *path, int k, int C, char msg[ERR_MAX])
{
    const int S = 24;
    errbuf e = {{0}};
    msg[0] = 0;
    if (k == 0) {
        img_params p = {.channels = C, .full_decode = 1, .decode = IMG_DECODE_EXACT};
        const uint8_t *base;
        int bh, bw;
        if (img_load_base(ctx, path, &p, &base, &bh, &bw, &e) != 0) {
            snprintf(msg, ERR_MAX, "%s", e.msg);
            return NULL;
        }
        uint8_t *out = malloc((size_t)bh * bw * C);
        memcpy(out, base, (size_t)bh * bw * C);
        return out;
    }
    img_params p = k == 1 ? rrc(S, IMG_DECODE_AUTO, C) : val(S, IMG_DECODE_AUTO, C);
    uint8_t *out = malloc((size_t)S * S * C);
    rng r = rng_keyed(5, RNG_AUGMENT, 1, 0);
    if (img_load(ctx, path, &p, &r, out, S, S, &e) != 0) {
        snprintf(msg, ERR_MAX, "%s", e.msg);
        free(out);
        return NULL;
    }
    return out;
}

/* Whether a file decodes, and to what, depends on its bytes alone: a file
 * stripped of its quantization tables (DQT) fails after a file that had
 * them exactly as in a fresh context; one stripped of its Huffman tables
 * (DHT) has the same outcome either way; duplicated tables change
 * nothing. */
Test(jpeg_corpus, a_file_without_its_tables_fails_on_its_own)
{
    jc_spec specs[2] = {{.h = 96,
                         .w = 128,
                         .space = JC_YCC,
                         .samp = {{2, 2}, {1, 1}, {1, 1}},
                         .coding = JC_BASELINE,
                         .quality = 80,
                         .name = "with.jpg"},
                        {.h = 80,
                         .w = 72,
                         .space = JC_GREY,
                         .samp = {{1, 1}},
                         .coding = JC_BASELINE,
                         .quality = 90,
                         .name = "other.jpg"}};
    size_t la, lb;
    char why[200];
    uint8_t *a = jc_encode(&specs[0], 1, &la, why), *b = jc_encode(&specs[1], 2, &lb, why);
    cr_assert(a && b);
    char *pa = write_file(dir, "with.jpg", a, la), *pb = write_file(dir, "other.jpg", b, lb);
    struct {
        const char *name;
        uint8_t *bytes;
        size_t len;
        int must_fail;
    } cases[3];
    cases[0].name = "no-dqt.jpg", cases[0].must_fail = 1;
    cases[0].bytes = jc_drop_segments(b, lb, 0xDB, &cases[0].len);
    cases[1].name = "no-dht.jpg", cases[1].must_fail = 0;
    cases[1].bytes = jc_drop_segments(b, lb, 0xC4, &cases[1].len);
    cases[2].name = "dup-dqt.jpg", cases[2].must_fail = 0;
    cases[2].bytes = jc_duplicate_segment(b, lb, 0xDB, &cases[2].len);
    for (int i = 0; i < 3; i++) {
        cr_assert(cases[i].bytes, "%s: no such segment", cases[i].name);
        char *p = write_file(dir, cases[i].name, cases[i].bytes, cases[i].len);
        for (int k = 0; k < 3; k++) {
            char m_fresh[ERR_MAX], m_after[ERR_MAX], m_tmp[ERR_MAX];
            img_ctx *fresh = img_ctx_create(), *used = img_ctx_create();
            uint8_t *x = outcome(fresh, p, k, 1, m_fresh);
            free(outcome(used, pa, k, 1, m_tmp)); /* a file with tables first */
            uint8_t *y = outcome(used, p, k, 1, m_after);
            cr_expect_str_eq(m_fresh, m_after,
                             "%s, path %d: the outcome depends on the file before", cases[i].name,
                             k);
            if (cases[i].must_fail)
                cr_expect(!x && strstr(m_fresh, cases[i].name), "%s, path %d: decoded",
                          cases[i].name, k);
            if (x && y) {
                size_t n = k == 0 ? (size_t)specs[1].h * specs[1].w : 24 * 24;
                cr_expect(!memcmp(x, y, n), "%s, path %d: other bytes after another file",
                          cases[i].name, k);
            }
            if (i == 2) { /* duplicated tables: the original's bytes */
                uint8_t *z = outcome(fresh, pb, k, 1, m_tmp);
                size_t n = k == 0 ? (size_t)specs[1].h * specs[1].w : 24 * 24;
                cr_expect(x && z && !memcmp(x, z, n), "%s, path %d", cases[i].name, k);
                free(z);
            }
            free(x);
            free(y);
            img_ctx_free(fresh);
            img_ctx_free(used);
        }
        free(p);
        free(cases[i].bytes);
    }
    free(a), free(b), free(pa), free(pb);
}

/* The corpus through train's loader: the same batches, byte for byte,
 * with 0, 1 and 3 workers and on a second run (--dump-batches), for the
 * random-resized crop and the validation recipe. */
Test(jpeg_corpus, train_gives_the_same_batches_for_any_worker_count)
{
    corpus c = write_corpus(1, 5);
    char *csv_path = write_corpus_csv(&c, 3);
    const char *recipes[2][4] = {{"--random-resized-crop", "32", "--hflip", "0.5"},
                                 {"--resize", "40", "--crop", "32"}};
    for (int rcp = 0; rcp < 2; rcp++) {
        char *first = NULL;
        size_t first_len = 0;
        const char *workers[] = {"0", "1", "3", "3"};
        for (int run = 0; run < 4; run++) {
            char out[64];
            snprintf(out, sizeof out, "dump-%d-%d", rcp, run);
            char *dump = path_join(dir, out);
            run_result r;
            run_train(&r, "--loader-only", "--epochs", "1", "--batch", "8", "--seed", "3",
                      "--workers", workers[run], recipes[rcp][0], recipes[rcp][1], recipes[rcp][2],
                      recipes[rcp][3], "--no-progress", "--dump-batches", dump, csv_path, NULL);
            cr_assert_eq(r.status, 0, "workers %s: %s", workers[run], r.err);
            size_t len;
            errbuf e;
            char *bytes = read_whole_file(dump, &len, &e);
            cr_assert(bytes && len > (size_t)c.written * 32 * 32 * 3, "%s: %zu bytes", dump, len);
            if (!first) {
                first = bytes, first_len = len;
            } else {
                cr_expect(len == first_len && !memcmp(bytes, first, len),
                          "%s, workers %s (run %d): other batches than with 0 workers",
                          recipes[rcp][0], workers[run], run);
                free(bytes);
            }
            run_free(&r);
            free(dump);
        }
        free(first);
    }
    free(csv_path);
    free_corpus(&c);
}

/* valgrind's memcheck over every decode path of the corpus (one loader
 * process: --workers 0), in the optimised build without sanitizers:
 * memcheck sees reads past a row inside libjpeg's pools, which ASan
 * cannot (the grey-JPEG over-read stayed inside them). */
Test(jpeg_corpus, memcheck_sees_no_bad_read_in_any_decode_path)
{
    if (system("valgrind --version >/dev/null 2>&1") != 0)
        cr_skip_test("valgrind is not installed (make deps installs it)");
    char *bin = path_join(source_root(), "build/cpu/train");
    if (access(bin, X_OK) != 0)
        cr_skip_test("no %s (make test builds it)", bin);
    corpus c = write_corpus(2, 4);
    char *csv_path = write_corpus_csv(&c, 2);
    const char *recipes[][6] = {
        {"--random-resized-crop", "32", "--decode", "auto", "--hflip", "0.5"},
        {"--random-resized-crop", "32", "--decode", "exact", "--hflip", "0"},
        {"--resize", "40", "--crop", "32", "--decode", "fast"},
    };
    for (size_t k = 0; k < sizeof recipes / sizeof *recipes; k++) {
        char *argv[] = {"/usr/bin/valgrind",
                        "--quiet",
                        "--error-exitcode=99",
                        "--track-origins=no",
                        bin,
                        "--loader-only",
                        "--epochs",
                        "1",
                        "--workers",
                        "0",
                        "--batch",
                        "16",
                        (char *)recipes[k][0],
                        (char *)recipes[k][1],
                        (char *)recipes[k][2],
                        (char *)recipes[k][3],
                        (char *)recipes[k][4],
                        (char *)recipes[k][5],
                        "--no-progress",
                        csv_path,
                        NULL};
        char *env[] = {"PATH=/usr/bin:/bin", NULL};
        run_result r;
        run_argv(argv, env, 280, &r);
        cr_expect_eq(r.status, 0, "%s %s %s %s: memcheck: %s", recipes[k][0], recipes[k][1],
                     recipes[k][2], recipes[k][3], r.err);
        run_free(&r);
    }
    free(csv_path);
    free(bin);
    free_corpus(&c);
}

/* A file whose scan stops short (its last rows missing, an end-of-image
 * marker after them) is refused by every path and every crop, the
 * random-resized crops whose box lies above the damage included, in a
 * fresh context and in one that has decoded other files. */
Test(jpeg_corpus, a_damaged_tail_is_refused_whatever_the_crop)
{
    jc_spec sp[2] = {{.h = 240,
                      .w = 320,
                      .space = JC_YCC,
                      .samp = {{2, 2}, {1, 1}, {1, 1}},
                      .coding = JC_BASELINE,
                      .quality = 85},
                     {.h = 200,
                      .w = 150,
                      .space = JC_GREY,
                      .samp = {{1, 1}},
                      .coding = JC_BASELINE,
                      .quality = 85}};
    for (int f = 0; f < 2; f++) {
        size_t len;
        char why[200];
        uint8_t *ok = jc_encode(&sp[f], 7, &len, why);
        cr_assert(ok, "%s", why);
        /* keep 80% of the file, then an end-of-image marker */
        size_t cut = len * 8 / 10;
        ok[cut] = 0xFF, ok[cut + 1] = 0xD9;
        char *path = write_file(dir, "tail.jpg", ok, cut + 2);
        img_ctx *used = img_ctx_create();
        char msg[ERR_MAX];
        for (int k = 0; k < 24; k++) {
            img_ctx *ctx = k % 2 ? used : img_ctx_create();
            const int C = f ? 1 : 3;
            img_params p = k < 16 ? rrc(32, k % 4 < 2 ? IMG_DECODE_AUTO : IMG_DECODE_EXACT, C)
                                  : val(32, k % 4 < 2 ? IMG_DECODE_AUTO : IMG_DECODE_FAST, C);
            if (p.rrc)
                p.rrc_scale[1] = 0.1f; /* small boxes, mostly clear of the damage */
            uint8_t out[32 * 32 * 3];
            errbuf e = {{0}};
            rng r = rng_keyed(9, RNG_AUGMENT, (uint64_t)f, (uint64_t)k);
            int rc = img_load(ctx, path, &p, &r, out, 32, 32, &e);
            snprintf(msg, sizeof msg, "%s", e.msg);
            cr_expect_neq(rc, 0, "file %d, crop %d: a damaged file accepted", f, k);
            cr_expect(strstr(msg, "tail.jpg: truncated JPEG") ||
                          strstr(msg, "tail.jpg: corrupt JPEG"),
                      "%s", msg);
            if (ctx != used)
                img_ctx_free(ctx);
        }
        img_ctx_free(used);
        free(path);
        free(ok);
    }
}

/* --check reads headers; --check=decode decodes every image (threads) and
 * lists every damaged file at once, in row order, naming CSV:LINE. */
Test(jpeg_corpus, check_decode_lists_every_damaged_file)
{
    jc_spec sp = {.h = 64,
                  .w = 80,
                  .space = JC_YCC,
                  .samp = {{2, 2}, {1, 1}, {1, 1}},
                  .coding = JC_BASELINE,
                  .quality = 85};
    size_t len;
    char why[200];
    uint8_t *f = jc_encode(&sp, 3, &len, why);
    cr_assert(f);
    char name[32];
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "%d.jpg", i);
        size_t n = len;
        if (i == 2 || i == 4) { /* the scan cut short, an end-of-image after it */
            n = len * 7 / 10;
            f[n] = 0xFF, f[n + 1] = 0xD9, n += 2;
        }
        free(write_file(dir, name, f, n));
        if (i == 2 || i == 4) {
            free(f);
            f = jc_encode(&sp, 3, &len, why);
        }
    }
    char *csv = write_text(dir, "d.csv",
                           "path,label\n0.jpg,0\n1.jpg,1\n2.jpg,0\n3.jpg,1\n4.jpg,0\n5.jpg,1\n");
    run_result r;
    run_train(&r, "--check", csv, NULL);
    cr_expect_eq(r.status, 0, "headers pass: %s", r.err);
    cr_expect(strstr(r.out, "check: 0 files whose header training would refuse"), "%s", r.out);
    cr_expect(strstr(r.out, "--check=decode"), "headers mode says what it does not prove: %s",
              r.out);
    run_free(&r);
    run_train(&r, "--check=decode", "--workers", "3", csv, NULL);
    cr_expect_eq(r.status, 2, "%s", r.out);
    cr_expect(strstr(r.out, "check: 2 files that training would refuse"), "%s", r.out);
    const char *a = strstr(r.err, "d.csv:4: "), *b = strstr(r.err, "d.csv:6: ");
    cr_expect(a && b && a < b, "rows 4 and 6 named, in order: %s", r.err);
    cr_expect(strstr(r.err, "2.jpg: corrupt JPEG") && strstr(r.err, "4.jpg: corrupt JPEG"), "%s",
              r.err);
    run_free(&r);
    run_train(&r, "--check=everything", csv, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "--check: 'everything' is not headers or decode"), "%s", r.err);
    run_free(&r);
    free(csv);
    free(f);
}
