/* main.c — train's entry point: parse the command line, then one of
 * --model list, --selftest, --check, a sweep of configurations, or one
 * training run (app/run.c). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/device.h"
#include "app/diagnose.h"
#include "app/options.h"
#include "app/run.h"
#include "app/selftest.h"
#include "app/sweep.h"
#include "comm/dist.h"
#include "cpu/cpu.h"
#include "loader/dataset.h"
#include "nn/model.h"

/* --model list's lines for the data's inputs (or two usual ones); cpu
 * (may be NULL) names each model's convolutions' algorithms */
static int model_list_print(const options *o, backend *cpu)
{
    if (!o->csv) {
        printf("for 1x28x28 inputs (Fashion-MNIST) and 10 classes:\n");
        model_print_list(stdout, 1, 28, 28, 10, cpu);
        printf("\nfor 3x64x64 inputs (E1 crops) and 10 classes:\n");
        model_print_list(stdout, 3, 64, 64, 10, cpu);
        return 0;
    }
    dataset ix;
    errbuf e;
    if (dataset_load(&ix, o->csv, &o->csv_o, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 2;
    }
    int w, h, c, oh, ow;
    img_src at;
    char where[ERR_MAX];
    if (img_probe_src(dataset_src(&ix, 0, &at, where, sizeof where), o->img.exif, &w, &h, &c, &e) !=
        0) {
        char line[2 * ERR_MAX];
        fprintf(stderr, "%s\n", dataset_row_message(&ix, 0, e.msg, line, sizeof line));
        dataset_free(&ix);
        return 2;
    }
    img_params p = o->img;
    if (p.rrc)
        p.crop_h = o->rrc_h, p.crop_w = o->rrc_w;
    img_output_size(&p, h, w, &oh, &ow);
    int ch = o->channels ? o->channels : (c >= 3 ? 3 : 1);
    printf("for %dx%dx%d inputs and %u classes (%s):\n", ch, oh, ow, ix.nclasses, o->csv);
    model_print_list(stdout, ch, oh, ow, (int)ix.nclasses, cpu);
    dataset_free(&ix);
    return 0;
}

/* --model list, with the algorithms the CPU backend picks (a backend of
 * one thread: it makes no plan, conv_describe only names the choice) */
static int model_list(const options *o)
{
    errbuf e;
    backend *cpu = backend_cpu_create(1, &e);
    int rc = model_list_print(o, cpu);
    if (cpu)
        cpu->ops->destroy(cpu);
    return rc;
}

/* --check=decode: every image decoded in full (the exact path: the whole
 * file read to its end under training's policy on truncation and
 * corruption), by `threads` threads each with its own context; the
 * messages kept per row and printed in row order. */
typedef struct check_job {
    const dataset *ix;
    char **msg; /* per row: NULL, or the message */
    uint32_t next;
    pthread_mutex_t lock;
} check_job;

static void *check_thread(void *arg)
{
    check_job *j = arg;
    img_ctx *c = img_ctx_create();
    img_params p = {.channels = 3, .full_decode = 1, .decode = IMG_DECODE_EXACT};
    for (;;) {
        pthread_mutex_lock(&j->lock);
        uint32_t i = j->next < j->ix->n ? j->next++ : UINT32_MAX;
        pthread_mutex_unlock(&j->lock);
        if (i == UINT32_MAX)
            break;
        const uint8_t *base;
        int bh, bw;
        errbuf e;
        img_src at;
        char where[ERR_MAX];
        if (img_load_base_src(c, dataset_src(j->ix, i, &at, where, sizeof where), &p, &base, &bh,
                              &bw, &e) != 0)
            j->msg[i] = xstrdup(e.msg);
    }
    img_ctx_free(c);
    return NULL;
}

/* Every image file as training reads it: its header (headers mode: it
 * exists, is a regular non-empty file, is a format train decodes -- told
 * by its first bytes: a TIFF or SVG is refused here as in training -- and
 * is within the size limits), or all of it (decode mode). One line per bad
 * file: CSV:LINE: path: reason (a folder's: path: reason). Returns the
 * count. */
static uint32_t check_images(const dataset *ix, int decode, int threads)
{
    uint32_t bad = 0;
    char **msg = xcalloc(ix->n ? ix->n : 1, sizeof *msg);
    if (decode) {
        check_job j = {.ix = ix, .msg = msg};
        pthread_mutex_init(&j.lock, NULL);
        pthread_t t[64];
        int n = threads < 1 ? 1 : threads > 64 ? 64 : threads, started = 0;
        for (int k = 0; k < n; k++)
            started += pthread_create(&t[started], NULL, check_thread, &j) == 0;
        if (!started)
            check_thread(&j);
        for (int k = 0; k < started; k++)
            pthread_join(t[k], NULL);
        pthread_mutex_destroy(&j.lock);
    } else {
        for (uint32_t i = 0; i < ix->n; i++) {
            int w, h, c;
            errbuf e;
            img_src at;
            char where[ERR_MAX];
            if (img_probe_src(dataset_src(ix, i, &at, where, sizeof where), 0, &w, &h, &c, &e) != 0)
                msg[i] = xstrdup(e.msg);
        }
    }
    fflush(stdout); /* the data set's lines before the files' (a pipe buffers) */
    for (uint32_t i = 0; i < ix->n; i++)
        if (msg[i]) {
            char line[2 * ERR_MAX];
            fprintf(stderr, "%s\n", dataset_row_message(ix, i, msg[i], line, sizeof line));
            bad++;
            free(msg[i]);
        }
    free(msg);
    return bad;
}

static int check(const options *o)
{
    const char *csvs[2] = {o->csv, o->val_csv};
    uint32_t bad = 0, bad_rows = 0;
    for (int i = 0; i < 2; i++) {
        if (!csvs[i])
            continue;
        dataset ix;
        errbuf e;
        csv_opts co = o->csv_o;
        co.list_bad = stderr; /* every bad row, not only the first */
        if (dataset_load(&ix, csvs[i], &co, &e) != 0) {
            fprintf(stderr, "%s\n", e.msg);
            return 2;
        }
        char name[ESC_MAX];
        esc_path(csvs[i], name, sizeof name);
        if (ix.bad_rows) { /* listed as they were read; the good rows' files are checked too */
            if (ix.bad_rows > CSV_LIST_BAD)
                fprintf(stderr, "%s: %u bad rows (the first %d are listed above)\n", name,
                        ix.bad_rows, CSV_LIST_BAD);
            else
                fprintf(stderr, "%s: %u bad row%s (listed above)\n", name, ix.bad_rows,
                        ix.bad_rows == 1 ? "" : "s");
            bad_rows += ix.bad_rows;
        }
        if (ix.members)
            printf("%s: %u samples in %u shard%s, %u classes\n", name, ix.n, ix.nshards,
                   ix.nshards == 1 ? "" : "s", ix.nclasses);
        else if (ix.folder)
            printf("%s: %u images, %u class folders\n", name, ix.n, ix.nclasses);
        else
            printf("%s: %u rows, %u classes%s\n", name, ix.n, ix.nclasses,
                   ix.had_header ? " (header row)" : "");
        dataset_print_classes(&ix, stdout);
        int threads = 1;
        for (int k = 0; k < o->workers.n; k++)
            threads = o->workers.v[k] > threads ? o->workers.v[k] : threads;
        bad += check_images(&ix, o->check == 2, threads);
        dataset_free(&ix);
    }
    char rows[64] = "";
    if (bad_rows)
        snprintf(rows, sizeof rows, "%u bad CSV row%s and ", bad_rows, bad_rows == 1 ? "" : "s");
    if (o->check == 2)
        printf("check: %s%u file%s that training would refuse\n", rows, bad, bad == 1 ? "" : "s");
    else
        printf("check: %s%u file%s whose header training would refuse (headers only: "
               "--check=decode decodes every image and finds damaged ones)\n",
               rows, bad, bad == 1 ? "" : "s");
    return bad || bad_rows ? 2 : 0;
}

/* Under an MPI launcher a run is one configuration: sweeps, --diagnose and
 * --workers auto start train again per configuration, which a launcher's
 * ranks cannot do (each child would join the job as another rank). */
static int launcher_refuses(const options *o)
{
    dist d;
    errbuf e;
    if (dist_from_env(&d, &e) != 0) {
        fprintf(stderr, "train: %s\n", e.msg);
        return 1;
    }
    int auto_workers = 0;
    for (int i = 0; i < o->workers.n; i++)
        auto_workers |= o->workers.v[i] < 0;
    const char *what = o->diagnose           ? "--diagnose"
                       : auto_workers        ? "--workers auto"
                       : options_is_sweep(o) ? "a sweep (a comma list)"
                                             : NULL;
    if (!d.launched || !what || o->sweep_child)
        return 0;
    if (d.rank == 0)
        fprintf(stderr,
                "train: %s runs train once per configuration and cannot run under an MPI "
                "launcher; run it without mpirun, or give one configuration per job\n",
                what);
    return 1;
}

int main(int argc, char **argv)
{
    cpu_blas_single(); /* before anything else: OpenBLAS's idle pool spins */
    options o;
    int rc = options_parse(&o, argc, argv);
    if (rc != 0) {
        options_free(&o);
        return rc > 0 ? 0 : 2;
    }
    if (launcher_refuses(&o)) {
        options_free(&o);
        return 2;
    }
    for (int i = 0; i < o.workers.n && !o.sweep_child && !o.check && !o.diagnose; i++)
        if (o.workers.v[i] < 0) { /* --workers auto: measure once, use everywhere */
            int w = autotune_workers(&o);
            if (w < 0) {
                options_free(&o);
                return 2;
            }
            for (int k = 0; k < o.workers.n; k++)
                if (o.workers.v[k] < 0)
                    o.workers.v[k] = w;
        }
    if (o.model && !strcmp(o.model, "list"))
        rc = model_list(&o);
    else if (o.diagnose && !o.sweep_child)
        rc = diagnose_run(&o);
    else if (o.version)
        rc = run_print_version(stdout);
    else if (o.selftest)
        rc = selftest_main(stdout);
    else if (o.check)
        rc = check(&o);
    else if (options_is_sweep(&o) && !o.sweep_child)
        rc = sweep_run(&o);
    else {
        run_choice c;
        run_choice_first(&o, &c);
        run_install_signals();
        rc = run_one(&o, &c);
    }
    options_free(&o);
    return rc;
}
