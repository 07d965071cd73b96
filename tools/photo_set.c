/* photo_set.c — an ImageNet-shaped data set cut from real photographs.
 *
 *   photo_set [--src DIR]... [--out DIR] [--per-class N] [--val M] [--seed S]
 *
 * Sources: every JPEG under each --src folder (default: Debian's
 * mate-backgrounds photographs, /usr/share/backgrounds/mate/nature, the
 * largest Elephants in .../abstract and GreenTraditional in .../desktop;
 * `make photos` installs the package). Each source photograph is a class,
 * named after its file (lower case, without extension).
 *
 * Samples are deterministic random views of the source, shaped like
 * ImageNet's: an aspect ratio w/h in [0.6, 1.8] (log-uniform), a crop of
 * 20-100% of the largest box of that ratio, resampled (antialiased
 * bilinear, image/resize.c) to a shorter side of 300-500 px; then JPEG at
 * quality 75-95, 4:2:0 (85%), 4:4:4 (10%) or grey (5%), progressive 15%.
 * Output: DIR/train/CLASS/CLASS_NNNN.jpg (N per class, default 200),
 * DIR/val/CLASS/... (M per class, default 25), and DIR/train.csv and
 * DIR/val.csv listing the same files (path,label with the class name).
 * Everything depends on the sources and the arguments only: same seed,
 * same bytes.
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <turbojpeg.h>

#include "common/rng.h"
#include "common/util.h"
#include "image/resize.h"

#define MAX_SOURCES 256
#define SOURCE_SHORT 1100 /* sources are decoded DCT-scaled to about this shorter side */

typedef struct source {
    char *path, *name;
    uint8_t *rgb; /* h x w x 3 */
    int h, w;
} source;

static const char *const default_src[] = {
    "/usr/share/backgrounds/mate/nature",
    "/usr/share/backgrounds/mate/abstract/Elephants_5640x3172.jpg",
    "/usr/share/backgrounds/mate/desktop/GreenTraditional.jpg",
};

static int cmp_src(const void *a, const void *b)
{
    return strcmp(((const source *)a)->name, ((const source *)b)->name);
}

static int is_jpeg_name(const char *n)
{
    size_t l = strlen(n);
    return (l > 4 && !strcasecmp(n + l - 4, ".jpg")) || (l > 5 && !strcasecmp(n + l - 5, ".jpeg"));
}

static void add_source(source *s, int *n, const char *path)
{
    if (*n == MAX_SOURCES)
        return;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char *name = xstrdup(base);
    char *dot = strrchr(name, '.');
    if (dot)
        *dot = '\0';
    for (char *p = name; *p; p++)
        *p = isalnum((unsigned char)*p) ? (char)tolower((unsigned char)*p) : '_';
    s[(*n)++] = (source){.path = xstrdup(path), .name = name};
}

/* A file, or every JPEG in a folder (not recursive). */
static int collect(source *s, int *n, const char *arg)
{
    struct stat st;
    if (stat(arg, &st) != 0) {
        fprintf(stderr, "photo-set: %s: %s%s\n", arg, strerror(errno),
                strncmp(arg, "/usr/share/backgrounds/mate", 27)
                    ? ""
                    : " (make photos installs mate-backgrounds)");
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        add_source(s, n, arg);
        return 0;
    }
    DIR *d = opendir(arg);
    if (!d) {
        fprintf(stderr, "photo-set: %s: %s\n", arg, strerror(errno));
        return -1;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.' && is_jpeg_name(de->d_name)) {
            char p[4200];
            snprintf(p, sizeof p, "%s/%s", arg, de->d_name);
            add_source(s, n, p);
        }
    closedir(d);
    return 0;
}

static int load_source(tjhandle tj, source *s)
{
    errbuf e;
    size_t len;
    uint8_t *jpg = (uint8_t *)read_whole_file(s->path, &len, &e);
    if (!jpg) {
        fprintf(stderr, "photo-set: %s\n", e.msg);
        return -1;
    }
    int w, h, sub, cs;
    if (tjDecompressHeader3(tj, jpg, (unsigned long)len, &w, &h, &sub, &cs) != 0) {
        fprintf(stderr, "photo-set: %s: %s\n", s->path, tjGetErrorStr2(tj));
        free(jpg);
        return -1;
    }
    int num = 8; /* n/8: the smallest keeping the shorter side >= SOURCE_SHORT */
    while (num > 1 && (long)(w < h ? w : h) * (num - 1) >= (long)SOURCE_SHORT * 8)
        num--;
    tjscalingfactor f = {num, 8};
    s->w = TJSCALED(w, f);
    s->h = TJSCALED(h, f);
    s->rgb = xmalloc((size_t)s->w * s->h * 3);
    int rc = tjDecompress2(tj, jpg, (unsigned long)len, s->rgb, s->w, 0, s->h, TJPF_RGB, 0);
    free(jpg);
    if (rc != 0 && tjGetErrorCode(tj) != TJERR_WARNING) {
        fprintf(stderr, "photo-set: %s: %s\n", s->path, tjGetErrorStr2(tj));
        return -1;
    }
    return 0;
}

/* One sample of source s into a JPEG; returns its bytes (tj-allocated).
 * A fresh TurboJPEG handle per image: libjpeg-turbo 2.1.5 keeps a
 * progressive scan script on a handle, so a baseline image compressed after
 * a progressive one on the same handle comes out corrupt ("bad Huffman
 * code", "extraneous bytes before marker"). */
static unsigned char *make_sample(resize_plan *rs, const source *s, rng *r, unsigned long *len)
{
    double ratio = exp(log(0.6) + (log(1.8) - log(0.6)) * rng_uniform_d(r));
    int side = 300 + (int)rng_below(r, 201);
    int oh = ratio >= 1 ? side : (int)lround(side / ratio),
        ow = ratio >= 1 ? (int)lround(side * ratio) : side;
    /* the largest box of that ratio, then 20-100% of its area */
    double bw = s->w, bh = bw / ratio;
    if (bh > s->h)
        bh = s->h, bw = bh * ratio;
    double a = sqrt(0.2 + 0.8 * rng_uniform_d(r));
    double cw = bw * a, ch = bh * a;
    if (ch < oh || cw < ow) /* never upscale */
        cw = bw, ch = bh;
    double y = (s->h - ch) * rng_uniform_d(r), x = (s->w - cw) * rng_uniform_d(r);
    uint8_t *px = xmalloc((size_t)oh * ow * 3);
    resize_box(rs, px, oh, ow, s->rgb, (size_t)s->w * 3, s->h, s->w, 3, y, x, ch, cw);
    int q = 75 + (int)rng_below(r, 21);
    double u = rng_uniform_d(r);
    int sub = u < 0.05 ? TJSAMP_GRAY : u < 0.15 ? TJSAMP_444 : TJSAMP_420;
    int flags = rng_uniform_d(r) < 0.15 ? TJFLAG_PROGRESSIVE : 0;
    unsigned char *out = NULL;
    *len = 0;
    tjhandle enc = tjInitCompress();
    if (!enc || tjCompress2(enc, px, ow, 0, oh, TJPF_RGB, &out, len, sub, q, flags) != 0) {
        fprintf(stderr, "photo-set: encoding failed: %s\n", tjGetErrorStr2(enc));
        tjFree(out);
        out = NULL;
    }
    if (enc)
        tjDestroy(enc);
    free(px);
    return out;
}

static int mkdirs(const char *path)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(tmp, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

/* Every sample of one split; the CSV text is appended to *csv. */
static int write_split(const char *out, const char *split, source *src, int nsrc, int per,
                       uint64_t seed, char **csv, size_t *csv_len, size_t *bytes)
{
    resize_plan rs = {0};
    int rc = 0;
    size_t cap = 0;
    for (int c = 0; c < nsrc && rc == 0; c++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s/%s", out, split, src[c].name);
        if (mkdirs(dir) != 0) {
            fprintf(stderr, "photo-set: %s: %s\n", dir, strerror(errno));
            rc = -1;
            break;
        }
        for (int k = 0; k < per && rc == 0; k++) {
            rng r =
                rng_keyed(seed, RNG_TOOL, (uint64_t)c * 1000003u + (split[0] == 'v'), (uint64_t)k);
            unsigned long len;
            unsigned char *jpg = make_sample(&rs, &src[c], &r, &len);
            char rel[512], path[4800];
            snprintf(rel, sizeof rel, "%s/%s/%s_%04d.jpg", split, src[c].name, src[c].name, k);
            snprintf(path, sizeof path, "%s/%s", out, rel);
            errbuf e;
            if (!jpg || write_file_atomic(path, jpg, len, &e) != 0) {
                if (jpg)
                    fprintf(stderr, "photo-set: %s\n", e.msg);
                rc = -1;
            }
            *bytes += len;
            tjFree(jpg);
            size_t need = *csv_len + strlen(rel) + strlen(src[c].name) + 4;
            if (need > cap) {
                cap = need * 2;
                *csv = xrealloc(*csv, cap);
            }
            *csv_len += (size_t)sprintf(*csv + *csv_len, "%s,%s\n", rel, src[c].name);
        }
    }
    resize_plan_free(&rs);
    return rc;
}

static int write_csv(const char *out, const char *split, const char *rows, size_t len)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.csv", out, split);
    size_t hl = strlen("path,label\n");
    char *text = xmalloc(hl + len + 1);
    memcpy(text, "path,label\n", hl);
    memcpy(text + hl, rows ? rows : "", len);
    errbuf e;
    int rc = write_file_atomic(path, text, hl + len, &e);
    if (rc != 0)
        fprintf(stderr, "photo-set: %s\n", e.msg);
    free(text);
    return rc;
}

static void usage(void)
{
    fprintf(
        stderr,
        "usage: photo-set [--src DIR|FILE]... [--out DIR] [--per-class N] [--val M] [--seed S]\n");
}

int main(int argc, char **argv)
{
    const char *out = "data/photos", *srcs[MAX_SOURCES];
    int nsrcs = 0;
    long long per = 200, val = 25, seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help")) {
            usage();
            return 0;
        }
        if (!v) {
            usage();
            return 2;
        }
        i++;
        if (!strcmp(a, "--src") && nsrcs < MAX_SOURCES)
            srcs[nsrcs++] = v;
        else if (!strcmp(a, "--out"))
            out = v;
        else if (!strcmp(a, "--per-class") && parse_i64(v, &per) == 0 && per >= 1 && per <= 100000)
            ;
        else if (!strcmp(a, "--val") && parse_i64(v, &val) == 0 && val >= 0 && val <= 100000)
            ;
        else if (!strcmp(a, "--seed") && parse_i64(v, &seed) == 0 && seed >= 0)
            ;
        else {
            fprintf(stderr, "photo-set: bad option %s %s\n", a, v);
            usage();
            return 2;
        }
    }
    if (!nsrcs)
        for (size_t i = 0; i < sizeof default_src / sizeof *default_src; i++)
            srcs[nsrcs++] = default_src[i];
    static source src[MAX_SOURCES];
    int n = 0;
    for (int i = 0; i < nsrcs; i++)
        if (collect(src, &n, srcs[i]) != 0)
            return 1;
    if (n == 0) {
        fprintf(stderr, "photo-set: no JPEG sources found\n");
        return 1;
    }
    qsort(src, (size_t)n, sizeof *src, cmp_src);
    for (int i = 1; i < n; i++)
        if (!strcmp(src[i].name, src[i - 1].name)) {
            fprintf(stderr, "photo-set: two sources named %s (%s, %s)\n", src[i].name,
                    src[i - 1].path, src[i].path);
            return 1;
        }
    tjhandle tj = tjInitDecompress();
    for (int i = 0; i < n; i++)
        if (load_source(tj, &src[i]) != 0)
            return 1;
    tjDestroy(tj);
    char *csv = NULL;
    size_t len = 0, bytes = 0;
    int rc = write_split(out, "train", src, n, (int)per, (uint64_t)seed, &csv, &len, &bytes);
    rc = rc ? rc : write_csv(out, "train", csv, len);
    len = 0;
    if (rc == 0 && val > 0) {
        rc = write_split(out, "val", src, n, (int)val, (uint64_t)seed, &csv, &len, &bytes);
        rc = rc ? rc : write_csv(out, "val", csv, len);
    }
    if (rc == 0)
        printf("photo-set: %s: %d classes from real photographs, %lld train + %lld val images per "
               "class, "
               "mean %.1f KB\n",
               out, n, per, val, bytes / 1024.0 / (double)(n * (per + val)));
    free(csv);
    for (int i = 0; i < n; i++)
        free(src[i].path), free(src[i].name), free(src[i].rgb);
    return rc ? 1 : 0;
}
