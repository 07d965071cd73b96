/* bench_image.c — speed of the image pipeline, side by side with the bare
 * TurboJPEG decode (its floor) and with PIL + torchvision (its peer).
 *
 *   bench_image [--n N] [--runs R] [--peer CMD] E1_CSV [PNG_CSV]
 *
 * Every round measures, single-threaded, on the first N images of each CSV
 * (files in the page cache; the bare decoders get the bytes preloaded):
 *   E1 (512x384 JPEG -> resize 96x128 -> centre crop 64 -> flip -> u8 CHW)
 *     tj full      bare tjDecompress2 at full size
 *     tj 1/4       bare tjDecompress2 at the scale the pipeline picks (floor)
 *     ours dct     img_load: read, DCT-scaled decode, crop, flip, CHW
 *     ours full    img_load, full_decode: full decode + our resize + ...
 *     peer         CMD --set e1: PIL + torchvision, one process, one thread
 *   resampling only, 512x384 -> 96x128 RGB, on decoded images in memory:
 *     ours, and stb_image_resize v1 (triangle filter, the alternative)
 *   PNG set (channels 1, flip): bare stbi_load, ours, peer --set png
 * and prints the medians over rounds, the goal ratios, and (once) how far
 * our resize and stb_image_resize are from PIL's Resize((96, 128)) on the
 * same full-size decodes (peer --dump). Rounds interleave ours and the
 * peer, so a noisy machine slows both alike.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <stb/stb_image.h>
#include <stb/stb_image_resize.h>

#include "common/util.h"
#include "image/image.h"
#include "image/resize.h"
#include "loader/dataset.h"

enum { E1_H = 96, E1_W = 128, E1_CROP = 64, MAX_RUNS = 64 };

typedef struct set {
    const char *csv;
    int n;
    char **paths;
    uint8_t **bytes;
    size_t *len;
} set;

static int set_load(set *s, const char *csv, int n)
{
    dataset ds;
    errbuf e;
    if (dataset_load(&ds, csv, NULL, &e) != 0) {
        fprintf(stderr, "bench_image: %s\n", e.msg);
        return -1;
    }
    s->csv = csv;
    s->n = (int)ds.n < n ? (int)ds.n : n;
    s->paths = xcalloc((size_t)s->n, sizeof *s->paths);
    s->bytes = xcalloc((size_t)s->n, sizeof *s->bytes);
    s->len = xcalloc((size_t)s->n, sizeof *s->len);
    for (int i = 0; i < s->n; i++) {
        s->paths[i] = xstrdup(dataset_path(&ds, (uint32_t)i));
        s->bytes[i] = (uint8_t *)read_whole_file(s->paths[i], &s->len[i], &e);
        if (!s->bytes[i]) {
            fprintf(stderr, "bench_image: %s\n", e.msg);
            dataset_free(&ds);
            return -1;
        }
    }
    dataset_free(&ds);
    return 0;
}

static void set_free(set *s)
{
    for (int i = 0; i < s->n; i++) {
        free(s->paths[i]);
        free(s->bytes[i]);
    }
    free(s->paths);
    free(s->bytes);
    free(s->len);
}

static void die(const char *what, const char *why)
{
    fprintf(stderr, "bench_image: %s: %s\n", what, why);
    exit(1);
}

/* ---------------------------------------------------------------- measures
 * Each returns the CPU seconds (user + system, this process) that images
 * [from, to) took: a rate per core that a busy, shared machine disturbs
 * much less than wall time (a descheduled process accrues none). */

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double time_tj(const set *s, int from, int to, tjhandle tj, int scaled, uint8_t *out)
{
    double t0 = cpu_now();
    for (int i = from; i < to; i++) {
        int w, h, sub, cs;
        if (tjDecompressHeader3(tj, s->bytes[i], s->len[i], &w, &h, &sub, &cs) != 0)
            die(s->paths[i], tjGetErrorStr2(tj));
        int dw = scaled ? E1_W : w, dh = scaled ? E1_H : h;
        if (tjDecompress2(tj, s->bytes[i], s->len[i], out, dw, 0, dh, TJPF_RGB, 0) != 0)
            die(s->paths[i], tjGetErrorStr2(tj));
    }
    return cpu_now() - t0;
}

static double time_ours(const set *s, int from, int to, img_ctx *c, const img_params *p, int oh,
                        int ow, uint8_t *out)
{
    errbuf e;
    double t0 = cpu_now();
    for (int i = from; i < to; i++) {
        rng r = rng_keyed(1, RNG_AUGMENT, 0, (uint64_t)i);
        if (img_load(c, s->paths[i], p, &r, out, oh, ow, &e) != 0)
            die("img_load", e.msg);
    }
    return cpu_now() - t0;
}

static double time_stbi(const set *s)
{
    double t0 = cpu_now();
    for (int i = 0; i < s->n; i++) {
        int w, h, n;
        uint8_t *px = stbi_load_from_memory(s->bytes[i], (int)s->len[i], &w, &h, &n, 0);
        if (!px)
            die(s->paths[i], stbi_failure_reason());
        stbi_image_free(px);
    }
    return cpu_now() - t0;
}

/* resampling only: full-size decodes made once, resized n times */
typedef struct decoded {
    int n, h, w;
    uint8_t *px; /* n images of h x w x 3 */
} decoded;

static void decode_all(const set *s, tjhandle tj, decoded *d)
{
    int sub, cs;
    if (tjDecompressHeader3(tj, s->bytes[0], s->len[0], &d->w, &d->h, &sub, &cs) != 0)
        die(s->paths[0], tjGetErrorStr2(tj));
    d->n = s->n;
    size_t one = (size_t)d->h * d->w * 3;
    d->px = xmalloc(one * (size_t)s->n);
    for (int i = 0; i < s->n; i++)
        if (tjDecompress2(tj, s->bytes[i], s->len[i], d->px + one * i, d->w, 0, d->h, TJPF_RGB, 0))
            die(s->paths[i], "not all E1 images have the first one's size");
}

static double time_resize(const decoded *d, int use_stbir, uint8_t *out)
{
    resize_plan plan = {0};
    size_t one = (size_t)d->h * d->w * 3;
    double t0 = cpu_now();
    for (int i = 0; i < d->n; i++) {
        const uint8_t *src = d->px + one * i;
        if (use_stbir)
            stbir_resize_uint8_generic(src, d->w, d->h, 0, out, E1_W, E1_H, 0, 3,
                                       STBIR_ALPHA_CHANNEL_NONE, 0, STBIR_EDGE_CLAMP,
                                       STBIR_FILTER_TRIANGLE, STBIR_COLORSPACE_LINEAR, NULL);
        else
            resize_apply(&plan, out, E1_W * 3, E1_H, E1_W, 0, 0, E1_H, E1_W, src, d->h, d->w, 3);
    }
    double t = cpu_now() - t0;
    resize_plan_free(&plan);
    return t;
}

/* ---------------------------------------------------------------- the peer */

static double run_peer(const char *cmd, const set *s, const char *which)
{
    char line[8192], full[8192];
    snprintf(full, sizeof full, "%s --csv '%s' --n %d --set %s", cmd, s->csv, s->n, which);
    FILE *f = popen(full, "r");
    if (!f)
        die("popen", full);
    double rate = -1;
    while (fgets(line, sizeof line, f)) {
        const char *r = strstr(line, "cpu_rate=");
        if (r)
            rate = atof(r + 9);
    }
    if (pclose(f) != 0 || rate <= 0)
        die("peer failed", full);
    return rate;
}

/* |ours - PIL| and |stbir - PIL| over K images, both from full-size decodes */
static void agreement(const char *cmd, const set *s, tjhandle tj)
{
    const int k = s->n < 50 ? s->n : 50;
    const size_t one = (size_t)E1_H * E1_W * 3;
    char dump[] = "/tmp/bench-image-pil-XXXXXX", full[8192];
    int fd = mkstemp(dump);
    if (fd < 0)
        die("mkstemp", dump);
    close(fd);
    snprintf(full, sizeof full, "%s --csv '%s' --n %d --dump %s", cmd, s->csv, k, dump);
    if (system(full) != 0)
        die("peer --dump failed", full);
    size_t len;
    errbuf e;
    uint8_t *pil = (uint8_t *)read_whole_file(dump, &len, &e);
    unlink(dump);
    if (!pil || len != one * (size_t)k)
        die("peer dump", pil ? "wrong size" : e.msg);
    set sub = *s;
    sub.n = k;
    decoded d;
    decode_all(&sub, tj, &d);
    img_ctx *c = img_ctx_create();
    img_params p = {.channels = 3, .resize_h = E1_H, .resize_w = E1_W, .full_decode = 1};
    img_params q = p;
    q.full_decode = 0;
    q.decode = IMG_DECODE_FAST; /* the smallest scale, as this benchmark documents */
    uint8_t *st = xmalloc(one);
    double sum[3] = {0};
    int max[3] = {0};
    long long off1[3] = {0}; /* pixels that differ at all */
    for (int i = 0; i < k; i++) {
        const uint8_t *ref = pil + one * (size_t)i, *b;
        int bh, bw;
        stbir_resize_uint8_generic(d.px + (size_t)d.h * d.w * 3 * i, d.w, d.h, 0, st, E1_W, E1_H, 0,
                                   3, STBIR_ALPHA_CHANNEL_NONE, 0, STBIR_EDGE_CLAMP,
                                   STBIR_FILTER_TRIANGLE, STBIR_COLORSPACE_LINEAR, NULL);
        for (int m = 0; m < 3; m++) {
            const uint8_t *got = st;
            if (m < 2) {
                if (img_load_base(c, s->paths[i], m == 0 ? &p : &q, &b, &bh, &bw, &e) != 0)
                    die("img_load_base", e.msg);
                got = b;
            }
            for (size_t j = 0; j < one; j++) {
                int dv = abs((int)got[j] - (int)ref[j]);
                sum[m] += dv;
                max[m] = dv > max[m] ? dv : max[m];
                off1[m] += dv != 0;
            }
        }
    }
    const char *names[3] = {"ours, full decode + resize", "ours, DCT-scaled decode",
                            "stb_image_resize v1 triangle"};
    printf(
        "\nagreement with PIL + torchvision Resize((96, 128)) on %d E1 images (%zu values each):\n",
        k, one);
    for (int m = 0; m < 3; m++)
        printf("  %-30s mean |d| %.4f   max |d| %3d   values that differ %.3f%%\n", names[m],
               sum[m] / (double)(one * (size_t)k), max[m],
               100.0 * (double)off1[m] / (double)(one * (size_t)k));
    free(st);
    free(pil);
    free(d.px);
    img_ctx_free(c);
}

/* ---------------------------------------------------------------- report */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double t[MAX_RUNS];
    memcpy(t, v, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

enum {
    R_TJ_FULL,
    R_TJ_SCALED,
    R_OURS_DCT,
    R_OURS_FULL,
    R_PEER_E1,
    R_RS_OURS,
    R_RS_STBIR,
    R_PNG_STBI,
    R_PNG_OURS,
    R_PNG_PEER,
    R_COUNT
};
static const char *row_names[R_COUNT] = {
    "E1  bare TurboJPEG decode, full size",
    "E1  bare TurboJPEG decode at 1/4 (floor)",
    "E1  ours: DCT-scaled pipeline",
    "E1  ours: full decode + resize pipeline",
    "E1  PIL + torchvision",
    "    resize only 512x384->96x128, ours",
    "    resize only, stb_image_resize v1",
    "PNG bare stbi_load",
    "PNG ours (decode, flip, CHW)",
    "PNG PIL + torchvision",
};

int main(int argc, char **argv)
{
    long long n = 1000, runs = 5;
    const char *peer = NULL, *csv[2] = {NULL, NULL};
    int ncsv = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc) {
            if (parse_i64(argv[++i], &n) || n < 1)
                die("--n", argv[i]);
        } else if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
            if (parse_i64(argv[++i], &runs) || runs < 1 || runs > MAX_RUNS)
                die("--runs (1..64)", argv[i]);
        } else if (!strcmp(argv[i], "--peer") && i + 1 < argc) {
            peer = argv[++i];
        } else if (argv[i][0] != '-' && ncsv < 2) {
            csv[ncsv++] = argv[i];
        } else {
            fprintf(stderr,
                    "usage: bench_image [--n N] [--runs R] [--peer CMD] E1_CSV [PNG_CSV]\n");
            return 2;
        }
    }
    if (!ncsv)
        die("usage", "bench_image [--n N] [--runs R] [--peer CMD] E1_CSV [PNG_CSV]");
    set e1 = {0}, png = {0};
    if (set_load(&e1, csv[0], (int)n) != 0 || (csv[1] && set_load(&png, csv[1], (int)n) != 0))
        return 1;
    tjhandle tj = tjInitDecompress();
    img_ctx *c = img_ctx_create();
    uint8_t out[3 * E1_CROP * E1_CROP], small[28 * 28];
    img_params pd = {.channels = 3,
                     .resize_h = E1_H,
                     .resize_w = E1_W,
                     .crop_h = E1_CROP,
                     .crop_w = E1_CROP,
                     .hflip = 0.5f,
                     .decode = IMG_DECODE_FAST};
    img_params pf = pd;
    pf.full_decode = 1;
    img_params pp = {.channels = 1, .hflip = 0.5f};
    decoded dec;
    decode_all(&e1, tj, &dec);
    uint8_t *buf = xmalloc((size_t)dec.h * dec.w * 3); /* bare decodes land here */
    double rate[R_COUNT][MAX_RUNS] = {{0}};
    int have[R_COUNT] = {0};
    /* warm up: page cache, buffers, coefficient plans */
    time_ours(&e1, 0, e1.n, c, &pd, E1_CROP, E1_CROP, out);
    time_ours(&e1, 0, e1.n, c, &pf, E1_CROP, E1_CROP, out);
    double ratio_peer[MAX_RUNS], ratio_floor[MAX_RUNS], ratio_png[MAX_RUNS];
    for (int r = 0; r < runs; r++) {
        /* the four E1 decoders take turns on blocks of 50 images */
        double t[4] = {0};
        for (int b = 0; b < e1.n; b += 50) {
            int to = b + 50 < e1.n ? b + 50 : e1.n;
            t[0] += time_tj(&e1, b, to, tj, 0, buf);
            t[1] += time_tj(&e1, b, to, tj, 1, buf);
            t[2] += time_ours(&e1, b, to, c, &pd, E1_CROP, E1_CROP, out);
            t[3] += time_ours(&e1, b, to, c, &pf, E1_CROP, E1_CROP, out);
        }
        rate[R_TJ_FULL][r] = e1.n / t[0];
        rate[R_TJ_SCALED][r] = e1.n / t[1];
        rate[R_OURS_DCT][r] = e1.n / t[2];
        rate[R_OURS_FULL][r] = e1.n / t[3];
        ratio_floor[r] = rate[R_OURS_DCT][r] / rate[R_TJ_SCALED][r];
        rate[R_RS_OURS][r] = dec.n / time_resize(&dec, 0, buf);
        rate[R_RS_STBIR][r] = dec.n / time_resize(&dec, 1, buf);
        have[R_TJ_FULL] = have[R_TJ_SCALED] = have[R_OURS_DCT] = have[R_OURS_FULL] = 1;
        have[R_RS_OURS] = have[R_RS_STBIR] = 1;
        if (peer) {
            rate[R_PEER_E1][r] = run_peer(peer, &e1, "e1");
            ratio_peer[r] = rate[R_OURS_DCT][r] / rate[R_PEER_E1][r];
            have[R_PEER_E1] = 1;
        }
        if (png.n) {
            rate[R_PNG_STBI][r] = png.n / time_stbi(&png);
            rate[R_PNG_OURS][r] = png.n / time_ours(&png, 0, png.n, c, &pp, 28, 28, small);
            have[R_PNG_STBI] = have[R_PNG_OURS] = 1;
            if (peer) {
                rate[R_PNG_PEER][r] = run_peer(peer, &png, "png");
                ratio_png[r] = rate[R_PNG_OURS][r] / rate[R_PNG_PEER][r];
                have[R_PNG_PEER] = 1;
            }
        }
        fprintf(stderr, "bench_image: round %d/%lld done\n", r + 1, runs);
    }
    double med[R_COUNT] = {0};
    printf("bench_image: E1 %d images (%s)%s%s, %lld rounds, one thread;\n"
           "medians of images per CPU-second (= per core) and CPU microseconds per image\n",
           e1.n, e1.csv, png.n ? ", PNG " : "", png.n ? png.csv : "", runs);
    printf("  %-44s %10s %10s   %s\n", "", "images/s", "us/image", "all rounds (images/s)");
    for (int k = 0; k < R_COUNT; k++) {
        if (!have[k])
            continue;
        med[k] = median(rate[k], (int)runs);
        printf("  %-44s %10.0f %10.1f  ", row_names[k], med[k], 1e6 / med[k]);
        for (int r = 0; r < runs; r++)
            printf(" %.0f", rate[k][r]);
        printf("\n");
    }
    printf("\ngoals (E1, per core; medians of the per-round ratios, measured side by side):\n");
    if (have[R_PEER_E1])
        printf("  ours / PIL + torchvision          %5.2fx   (goal >= 2.5x)\n",
               median(ratio_peer, (int)runs));
    printf(
        "  ours / bare decode at 1/4         %5.2f    (goal >= 0.85: within 15%% of the floor)\n",
        median(ratio_floor, (int)runs));
    printf("  full decode + resize / DCT path   %5.2f\n", med[R_OURS_FULL] / med[R_OURS_DCT]);
    printf("  our resize / stb_image_resize     %5.2fx faster\n", med[R_RS_OURS] / med[R_RS_STBIR]);
    if (have[R_PNG_PEER])
        printf("  PNG: ours / PIL + torchvision     %5.2fx\n", median(ratio_png, (int)runs));
    if (peer)
        agreement(peer, &e1, tj);
    free(buf);
    free(dec.px);
    img_ctx_free(c);
    tjDestroy(tj);
    set_free(&e1);
    if (png.n)
        set_free(&png);
    return 0;
}
