/* main.c — train's command line.
 *
 * Foundation stage: reads and validates the CSV index, and runs a
 * loader-only pass (read + decode every image in the main process) that
 * reports images/s. The nets, the worker pool and the report arrive with
 * later work; until then the program says plainly that it does not train.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stb/stb_image.h>

#include "common/util.h"
#include "loader/csv_index.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: train [options] data.csv\n"
            "\n"
            "Data (CSV with a path column and a label column):\n"
            "  --header | --no-header   first row is / is not a header (default: detect)\n"
            "  --path-col COL           path column, name or 0-based number (default path / 0)\n"
            "  --label-col COL          label column, name or 0-based number (default label / 1)\n"
            "  --root DIR               relative paths start here (default: the CSV's folder)\n"
            "  --skip-bad               drop bad rows with one counted warning\n"
            "  --check                  also stat every image file, report missing ones, exit\n"
            "  --val FILE.csv           validation set (checked like the training CSV)\n"
            "  --epochs N               passes over the data (default 1)\n"
            "  --help                   this text\n"
            "\n"
            "Exit status: 0 ok, 1 internal error, 2 bad input (CSV, images, arguments).\n");
}

typedef struct opts {
    const char *csv, *val;
    csv_opts c;
    int check;
    long long epochs;
} opts;

static int parse_args(int argc, char **argv, opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_ARG()                                                               \
    do {                                                                         \
        if (!next) {                                                             \
            fprintf(stderr, "train: %s needs a value (see --help)\n", a);        \
            return -1;                                                           \
        }                                                                        \
        i++;                                                                     \
    } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--header")) {
            o->c.header = 1;
        } else if (!strcmp(a, "--no-header")) {
            o->c.header = 0;
        } else if (!strcmp(a, "--path-col")) {
            NEED_ARG();
            o->c.path_col = next;
        } else if (!strcmp(a, "--label-col")) {
            NEED_ARG();
            o->c.label_col = next;
        } else if (!strcmp(a, "--root")) {
            NEED_ARG();
            o->c.root = next;
        } else if (!strcmp(a, "--skip-bad")) {
            o->c.skip_bad = 1;
        } else if (!strcmp(a, "--check")) {
            o->check = 1;
        } else if (!strcmp(a, "--val")) {
            NEED_ARG();
            o->val = next;
        } else if (!strcmp(a, "--epochs")) {
            NEED_ARG();
            if (parse_i64(next, &o->epochs) != 0 || o->epochs < 1) {
                fprintf(stderr, "train: --epochs: '%s' is not a positive integer\n", next);
                return -1;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "train: unknown option '%s' (see --help)\n", a);
            return -1;
        } else if (o->csv) {
            fprintf(stderr, "train: more than one data CSV ('%s' and '%s')\n", o->csv, a);
            return -1;
        } else {
            o->csv = a;
        }
#undef NEED_ARG
    }
    if (!o->csv) {
        fprintf(stderr, "train: no data CSV given (usage: train [options] data.csv; see --help)\n");
        return -1;
    }
    return 0;
}

/* Read and decode every image once; report images/s. */
static int loader_pass(const ds_index *ix, int epoch)
{
    double t0 = now_sec();
    uint64_t pixels = 0;
    for (uint32_t i = 0; i < ix->n; i++) {
        int w, h, c;
        unsigned char *px = stbi_load(ds_path(ix, i), &w, &h, &c, 0);
        if (!px) {
            fprintf(stderr, "%s:%u: %s: %s\n", ix->csv_path, ix->rows[i].line, ds_path(ix, i),
                    stbi_failure_reason());
            return 2;
        }
        pixels += (uint64_t)w * h;
        stbi_image_free(px);
    }
    double dt = now_sec() - t0;
    printf("epoch %d  %u images  %.2f s  %.0f images/s  (%.1f Mpixel)\n", epoch, ix->n, dt,
           ix->n / (dt > 0 ? dt : 1e-9), (double)pixels / 1e6);
    return 0;
}

int main(int argc, char **argv)
{
    opts o = {.c = CSV_OPTS_DEFAULT, .epochs = 1};
    o.c.warn = stderr;
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    ds_index train, val = {0};
    errbuf e;
    if (ds_index_load(&train, o.csv, &o.c, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 2;
    }
    if (o.val && ds_index_load(&val, o.val, &o.c, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        ds_index_free(&train);
        return 2;
    }
    printf("data: %s: %u rows, %u classes%s\n", o.csv, train.n, train.nclasses,
           train.had_header ? " (header row)" : "");
    ds_index_print_classes(&train, stdout);
    int rc = 0;
    if (o.check) {
        uint32_t bad = ds_index_check_files(&train, stderr);
        if (o.val)
            bad += ds_index_check_files(&val, stderr);
        printf("check: %u missing or unreadable file%s\n", bad, bad == 1 ? "" : "s");
        rc = bad ? 2 : 0;
    } else {
        printf("note: training is not implemented yet; running a loader-only pass "
               "(read + decode every image in one process)\n");
        for (int ep = 1; ep <= o.epochs && rc == 0; ep++)
            rc = loader_pass(&train, ep);
    }
    ds_index_free(&train);
    ds_index_free(&val);
    return rc;
}
