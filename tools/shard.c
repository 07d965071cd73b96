/* shard.c — write a data set (a CSV, a folder of class folders, or shards)
 * as WebDataset tar shards, which train, the `webdataset` library and
 * DALI's readers.webdataset all read.
 *
 *   shard [--out DIR] [--prefix NAME] [--shard-size MB] [--shard-samples N]
 *         [--root DIR] [--path-col COL] [--label-col COL] [--header|--no-header]
 *         DATA
 *
 * DATA is anything train takes (read by dataset_load, so the same rows,
 * labels and class ids as a run over it). Output, in DIR (default
 * "shards"):
 *   NAME-000000.tar ...  POSIX ustar archives (NAME default "train"); per
 *                        sample, in row order, KEY.cls (the class id as
 *                        decimal text) and KEY.EXT (the image's bytes, its
 *                        extension lower-cased, or named from its first
 *                        bytes when it has none we know); KEY is the row's
 *                        position, zero-padded to 6 digits or more, so
 *                        the keys sort in row order across the shards;
 *   NAME-000000.idx ...  each shard's index in DALI's wds2idx v1.2 format
 *                        (`v1.2 SAMPLES`, then per sample `ext offset size
 *                        name` for each member), written after its shard;
 *   NAME-000000.labels   each shard's labels (`train-labels v1 SAMPLES`, then
 *                        per sample `LABEL KEY`), so train reading the
 *                        shards over a network learns every label from
 *                        one small file per shard, not one request per
 *                        sample; webdataset and DALI pass it over;
 *   classes.txt          the class names in id order, when the labels
 *                        were names (a folder's, or a CSV's text labels).
 * A shard is closed before it would pass --shard-size MB (10^6 bytes;
 * default 256; a sample larger than that gets a shard of its own) or once
 * it holds --shard-samples samples. Every file is written to a temporary
 * and renamed when complete: a reader never sees half a shard. The same
 * input gives the same bytes: headers carry mode 0644, uid and gid 0, no
 * owner names and mtime 0. Older shards of the same NAME past the last
 * one written are removed, so the brace range printed at the end is
 * exactly the set.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "image/image.h"
#include "loader/dataset.h"

#define BLOCK 512

typedef struct writer {
    const char *out, *prefix;
    uint64_t max_bytes, max_samples;
    int key_width;
    atomic_file tar, idx_tmp;
    FILE *idx; /* the index's lines, kept in memory until the shard closes */
    char *idx_text;
    size_t idx_len;
    FILE *lab; /* the labels sidecar's lines, likewise */
    char *lab_text;
    size_t lab_len;
    uint64_t pos, samples; /* in the open shard */
    unsigned shard;        /* the open shard's number */
    int open;
} writer;

static void usage(FILE *f)
{
    fprintf(f, "usage: shard [--out DIR] [--prefix NAME] [--shard-size MB] [--shard-samples N]\n"
               "             [--root DIR] [--path-col COL] [--label-col COL] "
               "[--header|--no-header] DATA\n"
               "Writes DATA (a CSV, a folder of class folders, or shards) as WebDataset tar\n"
               "shards DIR/NAME-000000.tar ... with a wds2idx index beside each (defaults:\n"
               "DIR shards, NAME train, 256 MB a shard).\n");
}

static char *shard_path(const writer *w, unsigned k, const char *ext)
{
    size_t n = strlen(w->out) + strlen(w->prefix) + 32;
    char *p = xmalloc(n);
    snprintf(p, n, "%s/%s-%06u.%s", w->out, w->prefix, k, ext);
    return p;
}

/* A ustar header for a regular file `name` of `size` bytes. */
static void tar_header(uint8_t h[BLOCK], const char *name, uint64_t size)
{
    memset(h, 0, BLOCK);
    memcpy(h, name, strlen(name)); /* < 100: checked by the caller */
    memcpy(h + 100, "0000644", 7);
    memcpy(h + 108, "0000000", 7);
    memcpy(h + 116, "0000000", 7);
    snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
    memcpy(h + 136, "00000000000", 11);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < BLOCK; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum); /* six digits, NUL, then the space kept */
    h[155] = ' ';
}

static int put(writer *w, const void *d, size_t n, errbuf *e)
{
    if (n && fwrite(d, 1, n, w->tar.fp) != n)
        return errf(e, "%s: write failed: %s", w->tar.path, strerror(errno));
    w->pos += n;
    return 0;
}

static int put_member(writer *w, const char *name, const char *ext, const void *d, size_t n,
                      errbuf *e)
{
    uint8_t h[BLOCK];
    tar_header(h, name, n);
    static const uint8_t zeros[BLOCK];
    fprintf(w->idx, " %s %llu %zu %s", ext, (unsigned long long)(w->pos + BLOCK), n, name);
    if (put(w, h, BLOCK, e) != 0 || put(w, d, n, e) != 0)
        return -1;
    return put(w, zeros, (BLOCK - n % BLOCK) % BLOCK, e);
}

static int shard_open(writer *w, errbuf *e)
{
    char *p = shard_path(w, w->shard, "tar");
    int rc = atomic_file_open(&w->tar, p, e);
    free(p);
    if (rc != 0)
        return -1;
    w->idx = open_memstream(&w->idx_text, &w->idx_len);
    w->lab = open_memstream(&w->lab_text, &w->lab_len);
    w->pos = w->samples = 0;
    w->open = 1;
    return 0;
}

static int shard_close(writer *w, errbuf *e)
{
    static const uint8_t zeros[2 * BLOCK];
    if (put(w, zeros, sizeof zeros, e) != 0) /* the end-of-archive blocks */
        return -1;
    fclose(w->idx);
    w->idx = NULL;
    fclose(w->lab);
    w->lab = NULL;
    w->open = 0;
    if (atomic_file_commit(&w->tar, e) != 0)
        return -1;
    /* after the shard: the index is never older than its tar */
    char *p = shard_path(w, w->shard, "idx");
    size_t n = strlen(w->idx_text) + 64;
    char *text = xmalloc(n);
    /* the memstream holds "\n ext off size name ..." per sample: a line
     * each, without the leading space */
    size_t len = (size_t)snprintf(text, n, "v1.2 %llu", (unsigned long long)w->samples);
    for (const char *s = w->idx_text; *s; s++)
        if (!(*s == ' ' && s > w->idx_text && s[-1] == '\n'))
            text[len++] = *s;
    text[len++] = '\n';
    int rc = write_file_atomic(p, text, len, e);
    free(text);
    free(p);
    free(w->idx_text);
    w->idx_text = NULL;
    if (rc == 0) { /* the labels, so a reader over a network needs no member read */
        p = shard_path(w, w->shard, "labels");
        char *all;
        int al = asprintf(&all, "train-labels v1 %llu\n%s", (unsigned long long)w->samples,
                          w->lab_text ? w->lab_text : "");
        if (al < 0)
            abort();
        rc = write_file_atomic(p, all, (size_t)al, e);
        free(all);
        free(p);
    }
    free(w->lab_text);
    w->lab_text = NULL;
    w->shard++;
    return rc;
}

/* The member extension for an image: its own when train's decoder reads
 * that kind, else named by its first bytes. */
static void image_ext(const char *name, const uint8_t *d, size_t n, char *ext, size_t len)
{
    static const char *const known[] = {"jpg", "jpeg", "png", "ppm", "pgm",
                                        "pnm", "bmp",  "gif", "tga", "webp"};
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = strrchr(base, '.');
    if (dot && strlen(dot + 1) < len) {
        for (size_t i = 0; i < sizeof known / sizeof *known; i++)
            if (strcasecmp(dot + 1, known[i]) == 0) {
                snprintf(ext, len, "%s", known[i]);
                return;
            }
    }
    const char *kind = img_sniff_name(d, n);
    snprintf(ext, len, "%s",
             !kind                   ? "bin"
             : !strcmp(kind, "JPEG") ? "jpg"
             : !strcmp(kind, "PNG")  ? "png"
             : !strcmp(kind, "WebP") ? "webp"
             : !strcmp(kind, "GIF")  ? "gif"
             : !strcmp(kind, "BMP")  ? "bmp"
             : !strcmp(kind, "TGA")  ? "tga"
             : !strcmp(kind, "PNM")  ? "pnm"
                                     : "bin");
}

/* Row i's image bytes (a file, or a member of a shard). */
static uint8_t *read_image(const dataset *ds, uint32_t i, size_t *n, char *name, size_t nlen,
                           errbuf *e)
{
    img_src s;
    dataset_src(ds, i, &s, name, nlen);
    if (!s.file) {
        snprintf(name, nlen, "%s", s.name);
        return (uint8_t *)read_regular_file(s.name, IMG_MAX_FILE_BYTES, n, e);
    }
    int fd = open(s.file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        errf(e, "%s: %s", s.name, strerror(errno));
        return NULL;
    }
    uint8_t *d = xmalloc(s.len ? (size_t)s.len : 1);
    long got = pread_full(fd, d, (size_t)s.len, s.off);
    close(fd);
    if (got < 0 || (uint64_t)got < s.len) {
        free(d);
        errf(e, "%s: truncated", s.name);
        return NULL;
    }
    *n = (size_t)got;
    return d;
}

static int write_sample(writer *w, const dataset *ds, uint32_t i, errbuf *e)
{
    size_t n = 0;
    char where[ERR_MAX];
    uint8_t *d = read_image(ds, i, &n, where, sizeof where, e);
    if (!d)
        return -1;
    char ext[16], key[32], img[64], cls[64], label[16];
    image_ext(where, d, n, ext, sizeof ext);
    snprintf(key, sizeof key, "%0*u", w->key_width, i);
    snprintf(img, sizeof img, "%s.%s", key, ext);
    snprintf(cls, sizeof cls, "%s.cls", key);
    int ll = snprintf(label, sizeof label, "%d", ds->rows[i].label);
    uint64_t bytes = 3 * BLOCK + n + (size_t)ll;
    int rc = 0;
    if (w->open && w->samples > 0 &&
        (w->pos + bytes + 2 * BLOCK > w->max_bytes || w->samples >= w->max_samples))
        rc = shard_close(w, e);
    if (rc == 0 && !w->open)
        rc = shard_open(w, e);
    if (rc == 0) {
        fprintf(w->idx, "\n");
        fprintf(w->lab, "%d %s\n", ds->rows[i].label, key);
        /* members in their extensions' order, as webdataset's writer puts them */
        int cls_first = strcmp("cls", ext) < 0;
        rc = cls_first ? put_member(w, cls, "cls", label, (size_t)ll, e)
                       : put_member(w, img, ext, d, n, e);
        if (rc == 0)
            rc = cls_first ? put_member(w, img, ext, d, n, e)
                           : put_member(w, cls, "cls", label, (size_t)ll, e);
        w->samples++;
    }
    free(d);
    return rc;
}

static int write_classes(const writer *w, const dataset *ds, errbuf *e)
{
    size_t n = strlen(w->out) + 16;
    char *p = xmalloc(n);
    snprintf(p, n, "%s/classes.txt", w->out);
    if (!ds->names) {
        unlink(p); /* an older set's names must not relabel this one */
        free(p);
        return 0;
    }
    size_t len = 0, cap = 0;
    char *text = NULL;
    for (uint32_t c = 0; c < ds->nclasses; c++) {
        const char *name = ds->strs + ds->class_names[c];
        if (strchr(name, '\n') || strchr(name, '\r') || !*name) {
            free(text);
            free(p);
            return errf(e, "class %u's name has a line break or is empty: no classes.txt", c);
        }
        size_t l = strlen(name);
        if (len + l + 2 > cap) {
            cap = 2 * (len + l + 2);
            text = xrealloc(text, cap);
        }
        memcpy(text + len, name, l);
        len += l;
        text[len++] = '\n';
    }
    int rc = write_file_atomic(p, text, len, e);
    free(text);
    free(p);
    return rc;
}

/* Shards NAME-K.tar (and their .idx) for K past the last one written. */
static void remove_stale(const writer *w)
{
    for (unsigned k = w->shard;; k++) {
        char *t = shard_path(w, k, "tar"), *x = shard_path(w, k, "idx"),
             *l = shard_path(w, k, "labels");
        int gone = unlink(t) != 0 && errno == ENOENT;
        unlink(x);
        unlink(l);
        free(t);
        free(x);
        free(l);
        if (gone)
            break;
    }
}

static int need(int i, int argc, char **argv)
{
    if (i + 1 >= argc) {
        fprintf(stderr, "shard: %s needs a value\n", argv[i]);
        exit(2);
    }
    return i + 1;
}

int main(int argc, char **argv)
{
    writer w = {
        .out = "shards", .prefix = "train", .max_bytes = 256000000ull, .max_samples = UINT64_MAX};
    csv_opts o = CSV_OPTS_DEFAULT;
    o.warn = stderr;
    const char *data = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        double mb;
        long long v;
        if (!strcmp(a, "--out"))
            w.out = argv[i = need(i, argc, argv)];
        else if (!strcmp(a, "--prefix"))
            w.prefix = argv[i = need(i, argc, argv)];
        else if (!strcmp(a, "--shard-size")) {
            i = need(i, argc, argv);
            if (parse_f64(argv[i], &mb) != 0 || !(mb >= 0.001 && mb <= 1e7)) {
                fprintf(stderr, "shard: --shard-size %s: megabytes, 0.001 to 10000000\n", argv[i]);
                return 2;
            }
            w.max_bytes = (uint64_t)(mb * 1e6);
        } else if (!strcmp(a, "--shard-samples")) {
            i = need(i, argc, argv);
            if (parse_i64(argv[i], &v) != 0 || v < 1) {
                fprintf(stderr, "shard: --shard-samples %s: a count of 1 or more\n", argv[i]);
                return 2;
            }
            w.max_samples = (uint64_t)v;
        } else if (!strcmp(a, "--root"))
            o.root = argv[i = need(i, argc, argv)];
        else if (!strcmp(a, "--path-col"))
            o.path_col = argv[i = need(i, argc, argv)];
        else if (!strcmp(a, "--label-col"))
            o.label_col = argv[i = need(i, argc, argv)];
        else if (!strcmp(a, "--header"))
            o.header = 1;
        else if (!strcmp(a, "--no-header"))
            o.header = 0;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (a[0] == '-' || data) {
            usage(stderr);
            return 2;
        } else
            data = a;
    }
    if (!data) {
        usage(stderr);
        return 2;
    }
    if (!*w.prefix || strchr(w.prefix, '/') || strlen(w.prefix) > 60) {
        fprintf(stderr, "shard: --prefix %s: a file name of 1..60 bytes without '/'\n", w.prefix);
        return 2;
    }
    if (mkdir_p(w.out, 0777) != 0) {
        fprintf(stderr, "shard: %s: %s\n", w.out, strerror(errno));
        return 1;
    }
    dataset ds;
    errbuf e;
    if (dataset_load(&ds, data, &o, &e) != 0) {
        fprintf(stderr, "shard: %s\n", e.msg);
        return 2;
    }
    w.key_width = 6;
    for (uint64_t m = 1000000; m <= ds.n - 1 && w.key_width < 10; m *= 10)
        w.key_width++;
    int rc = 0;
    for (uint32_t i = 0; i < ds.n && rc == 0; i++)
        rc = write_sample(&w, &ds, i, &e);
    if (rc == 0 && w.open)
        rc = shard_close(&w, &e);
    if (rc == 0)
        rc = write_classes(&w, &ds, &e);
    if (rc != 0) {
        if (w.open) {
            fclose(w.idx);
            free(w.idx_text);
            fclose(w.lab);
            free(w.lab_text);
            atomic_file_abort(&w.tar);
        }
        fprintf(stderr, "shard: %s\n", e.msg);
        dataset_free(&ds);
        return 1;
    }
    remove_stale(&w);
    printf("%u samples, %u classes in %u shard%s: %s/%s-", ds.n, ds.nclasses, w.shard,
           w.shard == 1 ? "" : "s", w.out, w.prefix);
    if (w.shard == 1)
        printf("000000.tar\n");
    else
        printf("{000000..%06u}.tar\n", w.shard - 1);
    dataset_free(&ds);
    return 0;
}
