/* options.h — train's command line, parsed once into one struct.
 *
 * Options that a sweep varies (--workers, --prefetch, --batch, --mode,
 * --pin, --non-blocking) accept comma lists; the parser records which argv
 * entries carried them so a sweep can re-run the program with one value of
 * each. Everything is validated here, with one line naming the option and
 * the bad value.
 */
#ifndef TRAIN_OPTIONS_H
#define TRAIN_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

#include "app/device.h"
#include "image/image.h"
#include "loader/dataset.h"
#include "loader/shard_cache.h"
#include "nn/schedule.h"

#define LIST_MAX 16

typedef struct int_list {
    int n;
    int v[LIST_MAX];
} int_list;

enum load_mode { MODE_LAZY = 0, MODE_PRELOAD = 1 };
/* --grad-chunks auto (the default) and off */
enum { GRAD_CHUNKS_AUTO = 0, GRAD_CHUNKS_OFF = -1 };
/* "lazy" or "preload" */
const char *mode_name(int mode);

/* What a diagnosis child measures (see diagnose.h). */
enum diag_phase {
    DIAG_NONE = 0,
    DIAG_READ_ONLY, /* the loader reads the files but does not decode */
    DIAG_REFEED,    /* the model trains on a few batches kept in device memory */
};

/* --order: the training order (loader.h LOAD_ORDER_*); auto is shards for
 * remote shards, global otherwise */
enum { ORDER_AUTO = -1, ORDER_GLOBAL = 0, ORDER_SHARDS = 1 };

typedef struct options {
    const char *csv; /* the training CSV (positional) */

    /* data */
    csv_opts csv_o;
    const char *val_csv;
    const char *shard_cache; /* --shard-cache as given (NULL: a temporary folder) */
    shard_cache_opts shards; /* --shard-cache-size, --io-timeout, --io-retries,
                                --s3-endpoint (its dir is the feed's to set) */
    int read_ahead;          /* --read-ahead: shards fetched ahead of the workers */
    int check;               /* --check: 1 headers, 2 decode every image */

    /* images */
    int channels;     /* 0 = auto (what the first image has), 1, 3 */
    img_params img;   /* resize, crop, flip (hflip < 0: default); with
                              img.rrc, resize and crop are evaluation's */
    int rrc_h, rrc_w; /* --random-resized-crop's output size */

    /* loader */
    int_list workers; /* -1 entry = auto */
    int_list prefetch;
    int_list batch;
    int_list mode; /* enum load_mode */
    int shuffle;
    int order;               /* ORDER_*: --order */
    uint32_t shuffle_buffer; /* --shuffle-buffer; 0: 4 shards' worth */
    uint64_t seed;
    int drop_last;
    double timeout;
    int respawn;
    const char *cache;
    int cold;
    uint64_t mem_limit; /* 0 = 80% of MemAvailable */
    int loader_only;

    /* model and training */
    const char *model;       /* NULL = by input size */
    const char *device;      /* auto | cpu | cuda, as given */
    device_kind device_want; /* the same, parsed */
    int threads;             /* 0 = every core */
    int grad_chunks; /* > 0: canonical gradient sums in this many chunks per batch; or GRAD_CHUNKS_* */
    double lr, momentum, wd; /* NaN = the model's default */
    int schedule_given;      /* 0 = the model's default schedule */
    lr_schedule schedule;
    int epochs;
    const char *save, *resume;
    int resume_any_data; /* --resume-any-data: resume on data other than the checkpoint's */
    float mean[4], std[4];
    int nmean, nstd;
    int normalize_imagenet; /* --normalize imagenet */

    /* GPU staging */
    int_list pin;          /* 0/1 */
    int_list non_blocking; /* 0/1 */
    int pin_force;         /* pin above half of MemAvailable */
    int gpu_activity;      /* --gpu-activity: CUPTI activity records (default 1) */
    int selftest;
    int version; /* --version */

    /* report */
    const char *json;
    const char *trace; /* --trace FILE */
    int warmup_epochs; /* -1: not given (1 on a GPU with 2+ epochs to run, else 0) */
    int diagnose;
    int progress;             /* -1 auto (a terminal), 0, 1 */
    double test_slow_load;    /* test hook: extra seconds per sample */
    int test_slow_rank;       /* test hook: ... on this rank only (-1: every rank) */
    double test_slow_step;    /* test hook: extra seconds per step */
    int diag_batches;         /* --diagnose: batches per phase (0 = default) */
    double diag_seconds;      /* --diagnose: seconds per phase (NaN = default, 0 = no limit) */
    int max_batches;          /* hidden: batches per training pass (diagnosis, auto) */
    double max_seconds;       /* hidden: end a training pass after the batch that passes this */
    const char *dump_batches; /* hidden: every batch's indices, labels and bytes to this file
                                 (tests compare the Python module's batches with it) */
    int diag_phase;           /* hidden: enum diag_phase */

    /* sweep plumbing */
    int sweep_child;
    const char *summary_out;
    int argc;
    char **argv;
    unsigned char *sweep_arg; /* argv[i] belongs to a swept option */
} options;

/* Parse argv into o. Returns 0, 1 when the program should exit 0 (after
 * --help), or -1 after printing the problem to stderr (exit 2). */
int options_parse(options *o, int argc, char **argv);
/* The same, for a caller without a terminal (the Python module): the
 * first problem goes into e (without the "train: " prefix), nothing to
 * stderr. --help is not for it (it prints to stdout and returns 1). */
int options_parse_to(options *o, int argc, char **argv, errbuf *e);
/* Whether option --name takes a value: 0 never, 1 always, 2 optionally
 * and then only as --name=VALUE (--pin=off); -1 no such option (or a hidden one). */
int options_arg(const char *name);
/* The --help section heading option --name is listed under ("Loader",
 * "Images", "Data (a CSV ...)"), or NULL (no such option, or hidden). */
const char *options_section(const char *name);
void options_free(options *o);
void options_usage(FILE *f);

/* True when any list option has more than one value. */
int options_is_sweep(const options *o);
/* Configurations in a sweep: the product of every comma list's length. */
int options_sweep_size(const options *o);
/* --trace FILE for configuration k (1-based) of a sweep: FILE with -cfgK
 * before its extension (t.json -> t-cfg2.json); free() it. */
char *options_trace_name(const char *path, int k);

#endif
