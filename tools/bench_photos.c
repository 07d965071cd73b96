/* bench_photos.c — the ImageNet recipe on real photographs:
 * fidelity of the DCT-scaled decodes against the exact path, and speed per
 * core of every variant against the bare libjpeg-turbo decode (the floor).
 *
 *   bench_photos [--n N] [--runs R] [--keys K] [--fidelity-only|--speed-only|--phases] SET
 *                [BIG]
 *
 * SET is a folder of class folders or a CSV (tools/photo-set's data/photos
 * /train); N images are taken evenly spaced in its order (image
 * floor(k * total / N), the rule tools/peer_photos.py uses too). BIG
 * (optional) is a second set for fidelity only, e.g. the full-size source
 * photographs, where a 1/8 DCT scale is in play.
 *
 * Fidelity, K random-resized crops (224, flip off) per image and the
 * validation recipe (Resize 256 + CenterCrop 224): |ours - exact| over all
 * values: mean, 99th percentile, max, share > 2 levels. "exact" is the
 * unfused path: full-size decode, crop, resample (torchvision's order).
 *
 * Speed, single thread, CPU time of this process (per core), R rounds,
 * variants interleaved in blocks of 50 images; medians over rounds:
 *   rrc auto / fast / exact    img_load: read, region decode, resample,
 *                              flip, u8 CHW (fused)
 *   rrc unfused                full decode + crop + resample + flip + CHW
 *   floor: region @auto        the same region decodes at the auto scale,
 *                              bytes in memory, nothing else
 *   floor: tj full             tjDecompress2 at full size
 *   val ours                   Resize 256 + CenterCrop 224 + CHW
 *   floor: val decode          tjDecompress2 at the scale val picks
 *   rrc auto through RGB       rrc auto with the planar decode off: the
 *                              region decoded to RGB pixels (the path
 *                              before it, and --decode exact's)
 *   region decode as planes    the planar decode of the floor's region at
 *                              the planar decode's scale (the auto one
 *                              rounded up to 1, 2, 4 or 8 eighths),
 *                              no upsampling or colour conversion
 *   val through RGB            val ours with the planar decode off (the
 *                              path before it, and --decode exact's)
 * The set leaves out files that are not JPEGs, CMYK/YCCK JPEGs (the
 * floors decode to RGB, which libjpeg cannot make of them) and files
 * ./train's decoder refuses (each named), and says how many.
 * --phases: where ours' time goes instead, per image size class (the
 * longer side), for rrc auto and val: read, header, decode, resample and
 * store (img_ctx_phases), microseconds per image: each image's median
 * over R rounds after a warm-up pass (files in the page cache and already
 * verified to their end, as in every epoch after the first), averaged
 * over the images of its class.
 * Fidelity adds "through RGB" beside auto (planar) and fast, for rrc and
 * val.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <turbojpeg.h>

#include "common/util.h"
#include "image/internal.h"
#include "loader/dataset.h"

enum { S = 224, VAL_RESIZE = 256, BLOCK = 50, MAX_RUNS = 64, NVAR = 11 };

typedef struct set {
    int n;
    char **paths;
    uint8_t **bytes;
    size_t *len;
} set;

static img_params val(int full, int decode);

enum { KEEP, LEFT_CMYK, LEFT_REFUSED };

/* Whether a JPEG stays in the set: the floors decode to RGB, which
 * libjpeg cannot make of CMYK or YCCK, and a file ./train refuses
 * (truncated, corrupt; the reason in e) would be timed as its half-decode. */
static int left_out(img_ctx *c, tjhandle tj, const char *path, const uint8_t *bytes, size_t len,
                    errbuf *e)
{
    int w, h, sub, cs;
    if (tjDecompressHeader3(tj, bytes, (unsigned long)len, &w, &h, &sub, &cs) == 0 &&
        (cs == TJCS_CMYK || cs == TJCS_YCCK))
        return LEFT_CMYK;
    img_params p = val(1, IMG_DECODE_EXACT);
    rng r = rng_keyed(1, RNG_AUGMENT, 0, 0);
    static uint8_t out[3 * S * S];
    return img_load(c, path, &p, &r, out, S, S, e) != 0 ? LEFT_REFUSED : KEEP;
}

static int set_load(set *s, const char *where, int n)
{
    dataset ds;
    errbuf e;
    if (dataset_load(&ds, where, NULL, &e) != 0) {
        fprintf(stderr, "bench_photos: %s\n", e.msg);
        return -1;
    }
    const int want = (int)ds.n < n ? (int)ds.n : n;
    s->n = 0;
    s->paths = xcalloc((size_t)want, sizeof *s->paths);
    s->bytes = xcalloc((size_t)want, sizeof *s->bytes);
    s->len = xcalloc((size_t)want, sizeof *s->len);
    int other = 0, cmyk = 0, refused = 0;
    img_ctx *c = img_ctx_create();
    tjhandle tj = tjInitDecompress();
    for (int k = 0; k < want; k++) {
        uint32_t i = (uint32_t)((uint64_t)k * ds.n / (uint64_t)want);
        size_t len;
        uint8_t *bytes = (uint8_t *)read_whole_file(dataset_path(&ds, i), &len, &e);
        if (!bytes) {
            fprintf(stderr, "bench_photos: %s\n", e.msg);
            return -1;
        }
        /* the floors are JPEG decodes: PNG and the other formats a set may
         * hold (photo-set writes a few) are left out, and said so */
        if (len < 3 || bytes[0] != 0xFF || bytes[1] != 0xD8 || bytes[2] != 0xFF) {
            other++;
            free(bytes);
            continue;
        }
        const int why = left_out(c, tj, dataset_path(&ds, i), bytes, len, &e);
        if (why != KEEP) {
            if (why == LEFT_CMYK)
                cmyk++;
            else
                refused++, fprintf(stderr, "bench_photos: left out: %s\n", e.msg);
            free(bytes);
            continue;
        }
        s->paths[s->n] = xstrdup(dataset_path(&ds, i));
        s->bytes[s->n] = bytes;
        s->len[s->n++] = len;
    }
    tjDestroy(tj);
    img_ctx_free(c);
    if (other || cmyk || refused)
        fprintf(stderr,
                "bench_photos: %s: %d files: left out %d not JPEGs, %d CMYK JPEGs (the floors "
                "decode to RGB), %d refused (above); measuring the other %d\n",
                where, want, other, cmyk, refused, s->n);
    dataset_free(&ds);
    return s->n ? 0 : -1;
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static img_params rrc(int decode, int full)
{
    img_params p = {.channels = 3,
                    .crop_h = S,
                    .crop_w = S,
                    .rrc = 1,
                    .hflip = 0.5f,
                    .decode = decode,
                    .full_decode = full};
    p.rrc_scale[0] = 0.08f, p.rrc_scale[1] = 1.0f;
    p.rrc_ratio[0] = 0.75f, p.rrc_ratio[1] = 4.0f / 3.0f;
    return p;
}

static img_params val(int full, int decode)
{
    return (img_params){.channels = 3,
                        .resize_short = VAL_RESIZE,
                        .crop_h = S,
                        .crop_w = S,
                        .full_decode = full,
                        .decode = decode};
}

/* ---------------------------------------------------------------- fidelity */

typedef struct diffs {
    uint64_t hist[256], n;
    double sum;
} diffs;

static void diff_add(diffs *d, const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int x = abs((int)a[i] - (int)b[i]);
        d->hist[x]++;
        d->sum += x;
    }
    d->n += n;
}

static void diff_print(const char *what, const diffs *d)
{
    uint64_t acc = 0, over2 = 0;
    int p99 = -1, mx = 0;
    for (int x = 0; x < 256; x++) {
        acc += d->hist[x];
        if (p99 < 0 && acc >= d->n - d->n / 100)
            p99 = x;
        if (d->hist[x])
            mx = x;
        if (x > 2)
            over2 += d->hist[x];
    }
    printf("| %-40s | %6.3f | %3d | %3d | %5.2f%% |\n", what, d->sum / (double)d->n, p99, mx,
           100.0 * (double)over2 / (double)d->n);
}

static void fidelity(const char *name, const set *s, int keys)
{
    img_ctx *c = img_ctx_create();
    uint8_t *ref = xmalloc(3 * S * S), *got = xmalloc(3 * S * S);
    diffs d[7];
    memset(d, 0, sizeof d);
    img_ctx *rgb = img_ctx_create();
    img_ctx_set_planar(rgb, 0);
    const int modes[2] = {IMG_DECODE_AUTO, IMG_DECODE_FAST};
    errbuf e;
    for (int i = 0; i < s->n; i++) {
        for (int k = 0; k < keys; k++) {
            img_params p = rrc(IMG_DECODE_EXACT, 1);
            p.hflip = 0;
            rng r = rng_keyed(1, RNG_AUGMENT, (uint64_t)i, (uint64_t)k), r0 = r;
            if (img_load(c, s->paths[i], &p, &r, ref, S, S, &e) != 0) {
                fprintf(stderr, "bench_photos: %s\n", e.msg);
                exit(1);
            }
            for (int m = 0; m < 2; m++) {
                p.full_decode = 0;
                p.decode = modes[m];
                r = r0;
                if (img_load(c, s->paths[i], &p, &r, got, S, S, &e) == 0)
                    diff_add(&d[m], ref, got, 3 * S * S);
            }
            p.decode = IMG_DECODE_AUTO;
            r = r0;
            if (img_load(rgb, s->paths[i], &p, &r, got, S, S, &e) == 0)
                diff_add(&d[4], ref, got, 3 * S * S);
        }
        img_params pv = val(1, IMG_DECODE_EXACT);
        rng r = rng_keyed(1, RNG_AUGMENT, (uint64_t)i, 0);
        if (img_load(c, s->paths[i], &pv, &r, ref, S, S, &e) != 0)
            continue; /* smaller than the crop */
        for (int m = 0; m < 2; m++) {
            pv = val(0, modes[m]);
            if (img_load(c, s->paths[i], &pv, &r, got, S, S, &e) == 0)
                diff_add(&d[2 + m], ref, got, 3 * S * S);
            if (img_load(rgb, s->paths[i], &pv, &r, got, S, S, &e) == 0)
                diff_add(&d[5 + m], ref, got, 3 * S * S);
        }
    }
    printf("\nfidelity on %s (%d images, %d crops each), levels against the exact path:\n\n", name,
           s->n, keys);
    printf("| %-40s | mean | p99 | max | > 2 |\n|---|---:|---:|---:|---:|\n", "variant");
    diff_print("rrc 224, --decode auto (default)", &d[0]);
    diff_print("rrc 224, --decode fast", &d[1]);
    diff_print("rrc 224, auto through RGB (before)", &d[4]);
    diff_print("val: Resize 256 + CenterCrop 224, auto", &d[2]);
    diff_print("val: Resize 256 + CenterCrop 224, fast", &d[3]);
    diff_print("val: auto through RGB (before)", &d[5]);
    diff_print("val: fast through RGB (before)", &d[6]);
    free(ref), free(got);
    img_ctx_free(c);
    img_ctx_free(rgb);
}

/* ---------------------------------------------------------------- speed */

static const char *const var_name[NVAR] = {
    "ours: rrc 224 + flip, --decode auto",          "ours: rrc 224 + flip, --decode fast",
    "ours: rrc 224 + flip, --decode exact",         "unfused: full decode + crop + resample",
    "floor: region decode at the auto scale",       "floor: tjDecompress2 full size",
    "ours: val Resize 256 + CenterCrop 224, auto",  "floor: val decode at its DCT scale",
    "ours: rrc auto, decoded through RGB (before)", "region decode as planes (no upsampling)",
    "ours: val auto, decoded through RGB (before)",
};

/* Images [a, b) of variant v; returns CPU seconds. */
static double run_block(int v, const set *s, int a, int b, img_ctx *c, tjhandle tj, uint8_t *out,
                        uint8_t *scratch)
{
    errbuf e;
    double t0 = cpu_now();
    for (int i = a; i < b; i++) {
        rng r = rng_keyed(2, RNG_AUGMENT, 0, (uint64_t)i);
        img_params p = v < 3 ? rrc(v == 0   ? IMG_DECODE_AUTO
                                   : v == 1 ? IMG_DECODE_FAST
                                            : IMG_DECODE_EXACT,
                                   0)
                       : v == 3 ? rrc(IMG_DECODE_EXACT, 1)
                                : val(0, IMG_DECODE_AUTO);
        if (v == 8 || v == 10) {
            static img_ctx *rgb; /* the fused decode to RGB pixels, not planes */
            if (!rgb) {
                rgb = img_ctx_create();
                img_ctx_set_planar(rgb, 0);
            }
            p = v == 8 ? rrc(IMG_DECODE_AUTO, 0) : val(0, IMG_DECODE_AUTO);
            if (img_load(rgb, s->paths[i], &p, &r, out, S, S, &e) != 0)
                fprintf(stderr, "bench_photos: %s\n", e.msg);
            continue;
        }
        if (v <= 3 || v == 6) {
            if (img_load(c, s->paths[i], &p, &r, out, S, S, &e) != 0)
                fprintf(stderr, "bench_photos: %s\n", e.msg);
            continue;
        }
        int w, h, sub, cs;
        tjDecompressHeader3(tj, s->bytes[i], (unsigned long)s->len[i], &w, &h, &sub, &cs);
        if (v == 4 ||
            v == 9) { /* the box and scale img_load would use, then just the region decode */
            img_info info = {.format = IMG_FMT_JPEG, .w = w, .h = h, .channels = 3, .cmyk = 0};
            int by, bx, bh, bw, num;
            img_rrc_box(h, w, &p, &r, &by, &bx, &bh, &bw);
            img_jpeg_scale_for(bw, bh, 2 * S, 2 * S, &num);
            if (v == 9) /* the planar decode's own scale (1, 2, 4 or 8 eighths) */
                num = img_jpeg_planar_scale(num);
            double f = num / 8.0;
            img_region want = {(int)(by * f), (int)(bx * f) - 16, 0, 0, 0, 0}, got;
            want.h = (int)((by + bh) * f + 0.999) - want.y;
            want.w = (int)((bx + bw) * f + 0.999) + 16 - want.x;
            static img_ctx *fc; /* a context of its own: its file buffer is borrowed */
            if (!fc)
                fc = img_ctx_create();
            fc->file = s->bytes[i];
            fc->file_len = s->len[i];
            img_planes pl;
            if ((v == 4 ? img_jpeg_decode_region(fc, s->paths[i], &info, 3, num, &want, &got, &e)
                        : img_jpeg_decode_planes(fc, s->paths[i], &info, num, &want, &got, &pl,
                                                 &e)) < 0)
                fprintf(stderr, "bench_photos: %s\n", e.msg);
            fc->file = NULL;
            continue;
        }
        int sh = h, sw = w;
        if (v == 7) {
            long long rh = w < h ? (long long)VAL_RESIZE * h / w : VAL_RESIZE,
                      rw = w < h ? VAL_RESIZE : (long long)VAL_RESIZE * w / h;
            img_jpeg_scaled_size(w, h, 2 * (int)rh, 2 * (int)rw, &sh,
                                 &sw); /* --decode auto's scale */
        }
        tjDecompress2(tj, s->bytes[i], (unsigned long)s->len[i], scratch, sw, 0, sh, TJPF_RGB, 0);
    }
    return cpu_now() - t0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void speed(const set *s, int runs)
{
    img_ctx *c = img_ctx_create();
    tjhandle tj = tjInitDecompress();
    size_t maxpix = 0;
    for (int i = 0; i < s->n; i++) {
        int w, h, sub, cs;
        if (tjDecompressHeader3(tj, s->bytes[i], (unsigned long)s->len[i], &w, &h, &sub, &cs) ==
                0 &&
            (size_t)w * h > maxpix)
            maxpix = (size_t)w * h;
    }
    uint8_t *out = xmalloc(3 * S * S), *scratch = xmalloc(3 * maxpix);
    double rate[NVAR][MAX_RUNS];
    for (int v = 0; v < NVAR; v++) /* warm-up: page cache, handles, buffers */
        run_block(v, s, 0, s->n < BLOCK ? s->n : BLOCK, c, tj, out, scratch);
    for (int r = 0; r < runs; r++) {
        double t[NVAR] = {0};
        for (int a = 0; a < s->n; a += BLOCK)
            for (int v = 0; v < NVAR; v++)
                t[v] +=
                    run_block(v, s, a, a + BLOCK < s->n ? a + BLOCK : s->n, c, tj, out, scratch);
        for (int v = 0; v < NVAR; v++)
            rate[v][r] = s->n / t[v];
        fprintf(stderr, "round %d:", r + 1);
        for (int v = 0; v < NVAR; v++)
            fprintf(stderr, " %.0f", rate[v][r]);
        fprintf(stderr, "\n");
    }
    /* runs >= 1 (main): [0, runs) filled below */
    double med[NVAR], ratio_floor[MAX_RUNS] = {0}, ratio_val[MAX_RUNS] = {0},
                      ratio_old[MAX_RUNS] = {0}, ratio_val_old[MAX_RUNS] = {0};
    for (int r = 0; r < runs; r++) {
        ratio_floor[r] = rate[0][r] / rate[4][r];
        ratio_old[r] = rate[8][r] / rate[4][r];
        ratio_val[r] = rate[6][r] / rate[7][r];
        ratio_val_old[r] = rate[6][r] / rate[10][r];
    }
    for (int v = 0; v < NVAR; v++) {
        qsort(rate[v], (size_t)runs, sizeof(double), cmp_d);
        med[v] = rate[v][runs / 2];
    }
    qsort(ratio_floor, (size_t)runs, sizeof(double), cmp_d);
    qsort(ratio_val, (size_t)runs, sizeof(double), cmp_d);
    qsort(ratio_old, (size_t)runs, sizeof(double), cmp_d);
    qsort(ratio_val_old, (size_t)runs, sizeof(double), cmp_d);
    printf("\nspeed per core (%d images, %d round%s, medians):\n\n| %-44s | images/s | us/image "
           "|\n|---|---:|---:|\n",
           s->n, runs, runs == 1 ? "" : "s", "variant");
    for (int v = 0; v < NVAR; v++)
        printf("| %-44s | %8.0f | %8.0f |\n", var_name[v], med[v], 1e6 / med[v]);
    printf("\nratios (medians of per-round ratios): rrc auto / region-decode floor %.3f; val / its "
           "decode floor %.3f\n",
           ratio_floor[runs / 2], ratio_val[runs / 2]);
    printf("speedup of the fused auto path over unfused: %.2fx\n", med[0] / med[3]);
    printf("rrc auto through RGB (before planar) / floor %.3f; planar over it %.2fx\n",
           ratio_old[runs / 2], med[0] / med[8]);
    printf("val planar over val through RGB (median of per-round ratios) %.3fx\n",
           ratio_val_old[runs / 2]);
    free(out), free(scratch);
    tjDestroy(tj);
    img_ctx_free(c);
}

/* ---------------------------------------------------------------- phases */

enum { NCLASS = 5 };
static const char *class_name[NCLASS] = {"< 500", "500", "501-700", "701-1200", "> 1200"};

static int size_class(int w, int h)
{
    const int m = w > h ? w : h;
    return m < 500 ? 0 : m == 500 ? 1 : m <= 700 ? 2 : m <= 1200 ? 3 : 4;
}

static void phases(const set *s, int runs)
{
    static const char *phase_name[IMG_PHASES] = {"read", "header", "decode", "resample", "store"};
    img_ctx *c = img_ctx_create();
    tjhandle tj = tjInitDecompress();
    uint8_t *out = xmalloc(3 * S * S);
    int *cls = xmalloc((size_t)s->n * sizeof *cls);
    for (int i = 0; i < s->n; i++) {
        int w = 0, h = 0, sub, cs;
        tjDecompressHeader3(tj, s->bytes[i], (unsigned long)s->len[i], &w, &h, &sub, &cs);
        cls[i] = size_class(w, h);
    }
    double *t = xmalloc((size_t)s->n * (size_t)runs * IMG_PHASES * sizeof *t);
    printf("\nwhere the time goes (%d JPEGs, median of %d round%s per image, then the mean "
           "over a class; us per image):\n\n| recipe | longer side | images |",
           s->n, runs, runs == 1 ? "" : "s");
    for (int k = 0; k < IMG_PHASES; k++)
        printf(" %s |", phase_name[k]);
    printf(" total |\n|---|---|---:|");
    for (int k = 0; k <= IMG_PHASES; k++)
        printf("---:|");
    printf("\n");
    for (int v = 0; v < 2; v++) {
        const img_params p = v == 0 ? rrc(IMG_DECODE_AUTO, 0) : val(0, IMG_DECODE_AUTO);
        errbuf e;
        for (int r = -1; r < runs; r++) /* round -1: the warm-up */
            for (int i = 0; i < s->n; i++) {
                rng g = rng_keyed(2, RNG_AUGMENT, (uint64_t)(r < 0 ? 0 : r), (uint64_t)i);
                double a[IMG_PHASES], b[IMG_PHASES];
                img_ctx_phases(c, a);
                if (img_load(c, s->paths[i], &p, &g, out, S, S, &e) != 0)
                    fprintf(stderr, "bench_photos: %s\n", e.msg);
                img_ctx_phases(c, b);
                if (r >= 0)
                    for (int k = 0; k < IMG_PHASES; k++)
                        t[((size_t)i * (size_t)runs + (size_t)r) * IMG_PHASES + (size_t)k] =
                            b[k] - a[k];
            }
        double sum[NCLASS + 1][IMG_PHASES] = {{0}};
        int count[NCLASS + 1] = {0};
        for (int i = 0; i < s->n; i++) {
            count[cls[i]]++, count[NCLASS]++;
            for (int k = 0; k < IMG_PHASES; k++) {
                double m[MAX_RUNS] = {0}; /* [0, runs) filled below */
                for (int r = 0; r < runs; r++)
                    m[r] = t[((size_t)i * (size_t)runs + (size_t)r) * IMG_PHASES + (size_t)k];
                qsort(m, (size_t)runs, sizeof(double), cmp_d);
                sum[cls[i]][k] += m[runs / 2];
                sum[NCLASS][k] += m[runs / 2];
            }
        }
        for (int q = 0; q <= NCLASS; q++) {
            if (!count[q])
                continue;
            double total = 0;
            printf("| %s | %s | %d |", v == 0 ? "rrc 224 + flip" : "val 256/224",
                   q < NCLASS ? class_name[q] : "**all**", count[q]);
            for (int k = 0; k < IMG_PHASES; k++) {
                const double us = 1e6 * sum[q][k] / count[q];
                total += us;
                printf(" %.0f |", us);
            }
            printf(" %.0f |\n", total);
        }
    }
    free(t), free(cls), free(out);
    tjDestroy(tj);
    img_ctx_free(c);
}

int main(int argc, char **argv)
{
    int n = 1000, runs = 3, keys = 4, fid_only = 0, speed_only = 0, phase_only = 0;
    const char *where[2] = {NULL, NULL};
    int nw = 0;
    for (int i = 1; i < argc; i++) {
        long long v;
        if (!strcmp(argv[i], "--n") && i + 1 < argc && parse_i64(argv[i + 1], &v) == 0 && v > 0)
            n = (int)v, i++;
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc && parse_i64(argv[i + 1], &v) == 0 &&
                 v > 0 && v <= MAX_RUNS)
            runs = (int)v, i++;
        else if (!strcmp(argv[i], "--keys") && i + 1 < argc && parse_i64(argv[i + 1], &v) == 0 &&
                 v > 0)
            keys = (int)v, i++;
        else if (!strcmp(argv[i], "--fidelity-only"))
            fid_only = 1;
        else if (!strcmp(argv[i], "--speed-only"))
            speed_only = 1;
        else if (!strcmp(argv[i], "--phases"))
            phase_only = 1;
        else if (argv[i][0] != '-' && nw < 2)
            where[nw++] = argv[i];
        else {
            fprintf(stderr, "usage: bench_photos [--n N] [--runs R] [--keys K] "
                            "[--fidelity-only|--speed-only|--phases] SET [BIG]\n");
            return 2;
        }
    }
    if (fid_only + speed_only + phase_only > 1) {
        fprintf(stderr, "bench_photos: --fidelity-only, --speed-only and --phases are "
                        "alternatives: give one\n");
        return 2;
    }
    if (!nw) {
        fprintf(stderr, "usage: bench_photos [--n N] [--runs R] [--keys K] "
                        "[--fidelity-only|--speed-only|--phases] SET [BIG]\n");
        return 2;
    }
    set s;
    if (set_load(&s, where[0], n) != 0)
        return 1;
    if (phase_only) {
        phases(&s, runs);
        return 0;
    }
    if (!speed_only)
        fidelity(where[0], &s, keys);
    if (nw == 2 && !speed_only) {
        set big;
        if (set_load(&big, where[1], n) != 0)
            return 1;
        fidelity(where[1], &big, keys);
    }
    if (!fid_only)
        speed(&s, runs);
    return 0;
}
