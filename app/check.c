/* check.c — `train --check[=decode]`: every row of the data sets and every
 * image file as training would read them (headers, or a full decode on
 * several threads), one line per bad row or file, then a count. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "app/check.h"
#include "app/feed.h"
#include "common/util.h"
#include "image/image.h"
#include "loader/dataset.h"

/* --check=decode: every image decoded in full (the exact path: the whole
 * file read to its end under training's policy on truncation and
 * corruption), by `threads` threads each with its own context; the
 * messages kept per row and printed in row order. */
typedef struct check_job {
    const dataset *ds;
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
        uint32_t i = j->next < j->ds->n ? j->next++ : UINT32_MAX;
        pthread_mutex_unlock(&j->lock);
        if (i == UINT32_MAX)
            break;
        if (j->msg[i])
            continue; /* its shard did not download */
        const uint8_t *base;
        int bh, bw;
        errbuf e;
        img_src at;
        char where[ERR_MAX], local[4096];
        /* remote shards: check_images fetched them (no downloads on threads) */
        if (dataset_src_local(j->ds, i, &at, where, sizeof where, local, sizeof local, 0, &e) !=
                0 ||
            img_load_base_src(c, &at, &p, &base, &bh, &bw, &e) != 0)
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
static uint32_t check_images(const dataset *ds, int decode, int threads)
{
    uint32_t bad = 0;
    char **msg = xcalloc(ds->n ? ds->n : 1, sizeof *msg);
    for (uint32_t i = 0; ds->remote && i < ds->n; i++) { /* each shard into the cache, here */
        img_src at;
        char where[ERR_MAX], local[4096];
        errbuf e;
        if (dataset_src_local(ds, i, &at, where, sizeof where, local, sizeof local, 1, &e) != 0)
            msg[i] = xstrdup(e.msg);
    }
    if (decode) {
        check_job j = {.ds = ds, .msg = msg};
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
        for (uint32_t i = 0; i < ds->n; i++) {
            int w, h, c;
            errbuf e;
            img_src at;
            char where[ERR_MAX], local[4096];
            if (msg[i])
                continue; /* its shard did not download */
            if (dataset_src_local(ds, i, &at, where, sizeof where, local, sizeof local, 0, &e) !=
                    0 ||
                img_probe_src(&at, 0, &w, &h, &c, &e) != 0)
                msg[i] = xstrdup(e.msg);
        }
    }
    fflush(stdout); /* the data set's lines before the files' (a pipe buffers) */
    for (uint32_t i = 0; i < ds->n; i++)
        if (msg[i]) {
            char line[2 * ERR_MAX];
            fprintf(stderr, "%s\n", dataset_row_message(ds, i, msg[i], line, sizeof line));
            bad++;
            free(msg[i]);
        }
    free(msg);
    return bad;
}

int check_main(const options *o)
{
    const char *csvs[2] = {o->csv, o->val_csv};
    uint32_t bad = 0, bad_rows = 0;
    for (int i = 0; i < 2; i++) {
        if (!csvs[i])
            continue;
        dataset ds;
        errbuf e;
        csv_opts co = o->csv_o;
        co.list_bad = stderr; /* every bad row, not only the first */
        shard_cache_opts sc;
        int temp;
        if (feed_shard_cache_open(o, &csvs[i], 1, &co, &sc, &temp, &e) != 0) {
            fprintf(stderr, "%s\n", e.msg);
            return 2;
        }
        if (dataset_load(&ds, csvs[i], &co, &e) != 0) {
            fprintf(stderr, "%s\n", e.msg);
            feed_shard_cache_close(&sc, temp);
            return 2;
        }
        char name[ESC_MAX];
        esc_path(csvs[i], name, sizeof name);
        if (ds.bad_rows) { /* listed as they were read; the good rows' files are checked too */
            if (ds.bad_rows > CSV_LIST_BAD)
                fprintf(stderr, "%s: %u bad rows (the first %d are listed above)\n", name,
                        ds.bad_rows, CSV_LIST_BAD);
            else
                fprintf(stderr, "%s: %u bad row%s (listed above)\n", name, ds.bad_rows,
                        ds.bad_rows == 1 ? "" : "s");
            bad_rows += ds.bad_rows;
        }
        if (ds.members)
            printf("%s: %u samples in %u shard%s, %u classes\n", name, ds.n, ds.nshards,
                   ds.nshards == 1 ? "" : "s", ds.nclasses);
        else if (ds.folder)
            printf("%s: %u images, %u class folders\n", name, ds.n, ds.nclasses);
        else
            printf("%s: %u rows, %u classes%s\n", name, ds.n, ds.nclasses,
                   ds.had_header ? " (header row)" : "");
        dataset_print_classes(&ds, stdout);
        int threads = 1;
        for (int k = 0; k < o->workers.n; k++)
            threads = o->workers.v[k] > threads ? o->workers.v[k] : threads;
        bad += check_images(&ds, o->check == 2, threads);
        dataset_free(&ds);
        feed_shard_cache_close(&sc, temp);
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
