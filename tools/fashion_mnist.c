/* fashion_mnist.c — Debian's Fashion-MNIST IDX files -> PNGs + CSVs.
 *
 *   fashion_mnist [--src DIR] [--out DIR] [--limit N]
 *
 * Writes OUT/train/NNNNN.png and OUT/test/NNNNN.png (28x28 grey) and
 * OUT/train.csv, OUT/test.csv with `path,label` rows (paths relative to
 * the CSV). --limit N keeps the first N images of each split. A finished
 * conversion leaves OUT/.complete naming its limit; running again with the
 * same limit does nothing. The CSVs are written last and atomically, so an
 * interrupted run never leaves a CSV naming missing images.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stb/stb_image_write.h>

#include "common/util.h"
#include "tools/idx.h"

static const char *class_names[10] = {"t-shirt", "trouser", "pullover", "dress", "coat",
                                      "sandal",  "shirt",   "sneaker",  "bag",   "ankle-boot"};

static int convert(const char *src, const char *out, const char *split, const char *prefix,
                   long limit)
{
    char ipath[4096], lpath[4096], dir[4200];
    snprintf(ipath, sizeof ipath, "%s/%s-images-idx3-ubyte.gz", src, prefix);
    snprintf(lpath, sizeof lpath, "%s/%s-labels-idx1-ubyte.gz", src, prefix);
    idx_set im, lab;
    if (idx_read(ipath, &im) != 0)
        return -1;
    if (idx_read(lpath, &lab) != 0 || lab.n != im.n) {
        if (lab.data)
            fprintf(stderr, "%s: %u labels for %u images\n", lpath, lab.n, im.n);
        free(im.data);
        free(lab.data);
        return -1;
    }
    uint32_t n = limit > 0 && (uint32_t)limit < im.n ? (uint32_t)limit : im.n;
    snprintf(dir, sizeof dir, "%s/%s", out, split);
    if (mkdir_p(dir, 0755) != 0) {
        fprintf(stderr, "%s: cannot create: %s\n", dir, strerror(errno));
        return -1;
    }
    size_t csv_cap = (size_t)n * 32 + 64, csv_len = 0;
    char *csv = xmalloc(csv_cap);
    csv_len += (size_t)snprintf(csv, csv_cap, "path,label\n");
    size_t px = (size_t)im.rows * im.cols;
    for (uint32_t i = 0; i < n; i++) {
        char rel[64], path[4300];
        snprintf(rel, sizeof rel, "%s/%05u.png", split, i);
        snprintf(path, sizeof path, "%s/%s", out, rel);
        if (!stbi_write_png(path, (int)im.cols, (int)im.rows, 1, im.data + i * px, (int)im.cols)) {
            fprintf(stderr, "%s: cannot write PNG\n", path);
            free(csv);
            return -1;
        }
        csv_len += (size_t)snprintf(csv + csv_len, csv_cap - csv_len, "%s,%u\n", rel, lab.data[i]);
    }
    char csv_path[4200];
    snprintf(csv_path, sizeof csv_path, "%s/%s.csv", out, split);
    errbuf e;
    int rc = write_file_atomic(csv_path, csv, csv_len, &e);
    if (rc != 0)
        fprintf(stderr, "%s\n", e.msg);
    else
        printf("fashion-mnist: %s: %u images (%ux%u grey PNG)\n", csv_path, n, im.cols, im.rows);
    free(csv);
    free(im.data);
    free(lab.data);
    return rc;
}

static void usage(FILE *f)
{
    /* by its bare name: tools/fashion-mnist here, bin/fashion-mnist in the bundle */
    fprintf(f, "usage: fashion-mnist [--src DIR] [--out DIR] [--limit N]\n"
               "  --src DIR    IDX files (default $TRAIN_FASHION_DIR, else\n"
               "               /usr/share/datasets/fashion-mnist)\n"
               "  --out DIR    output folder (default data/fashion-mnist)\n"
               "  --limit N    first N images of each split (default: all, 60000 + 10000)\n");
}

int main(int argc, char **argv)
{
    const char *src = fashion_mnist_dir(), *out = "data/fashion-mnist";
    long long limit = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--src") && i + 1 < argc)
            src = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--limit") && i + 1 < argc) {
            if (parse_i64(argv[++i], &limit) != 0 || limit < 0) {
                fprintf(stderr, "fashion-mnist: --limit: '%s' is not a count\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "fashion-mnist: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    char stamp[4200], want[64];
    snprintf(stamp, sizeof stamp, "%s/.complete", out);
    snprintf(want, sizeof want, "limit=%lld\n", limit);
    size_t len;
    char *have = read_whole_file(stamp, &len, NULL);
    if (have && strcmp(have, want) == 0) {
        printf("fashion-mnist: %s is up to date (--limit %lld)\n", out, limit);
        free(have);
        return 0;
    }
    free(have);
    unlink(stamp);
    if (mkdir_p(out, 0755) != 0) {
        fprintf(stderr, "%s: cannot create: %s\n", out, strerror(errno));
        return 1;
    }
    if (convert(src, out, "train", "train", (long)limit) != 0 ||
        convert(src, out, "test", "t10k", (long)limit) != 0)
        return 1;
    char names[256] = "";
    for (int c = 0; c < 10; c++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%d,%s\n", c, class_names[c]);
    char classes_path[4200];
    snprintf(classes_path, sizeof classes_path, "%s/classes.csv", out);
    errbuf e;
    if (write_file_atomic(classes_path, names, strlen(names), &e) != 0 ||
        write_file_atomic(stamp, want, strlen(want), &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    return 0;
}
