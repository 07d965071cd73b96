/* report.h — the per-epoch line, its JSON twin and the per-configuration
 * summary. Values that do not apply (no GPU, no validation set) are NaN and
 * print as n/a / null. */
#ifndef TRAIN_REPORT_H
#define TRAIN_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "app/metrics.h"
#include "image/image.h"

typedef struct run_config {
    const char *device; /* cpu, cuda */
    const char *model;  /* or "none" for --loader-only */
    const char *mode;   /* lazy, preload */
    int workers, prefetch, pin, non_blocking, batch;
} run_config;

typedef struct epoch_rec {
    run_config cfg;
    int epoch;  /* 1-based */
    int warmup; /* left out of summaries */
    uint64_t images;
    double epoch_s, images_per_s;
    double data_wait_pct, copy_pct, compute_pct;
    double gpu_util_avg, gpu_util_max;
    /* device compute time / epoch time: the union of kernel intervals from
     * activity records, else the step spans (events); NaN without a GPU */
    double gpu_busy_pct;
    const char *gpu_busy_from;       /* "activity", "span" (events), NULL without a GPU */
    double gpu_span_pct;             /* the step spans (an event pair per step) / epoch time */
    double gpu_h2d_pct, gpu_d2h_pct; /* copy engines busy, per direction (activity; else NaN) */
    double gpu_overlap_pct;          /* compute and a copy at once / epoch time (activity) */
    unsigned long gpu_act_dropped;   /* activity records the profiler dropped (0: none) */
    double gpu_util_n;               /* NVML samples behind gpu_util_avg/max: those whose period
                                      * lies within the epoch (0: too short, the figures n/a); NaN
                                      * if n/a */
    double gpu_sm_pct, gpu_occ_pct;  /* SM activity and occupancy (NVML GPM); NaN if n/a */
    double gpu_proc_mb;    /* this process's device memory, max over the epoch (NVML); NaN if n/a */
    double gpu_dev_mem_mb; /* the device's memory in use, every process (NVML); NaN if n/a */
    double loss, train_acc, val_loss, val_acc;
    double rss_mb, pss_mb, pinned_mb;
    int procs; /* processes in rss/pss: main, supervisor, workers */
    uint64_t skipped;
    const char *cache; /* warm | cold | preload */
    double lr;
    /* I/O of the training pass (loader_io: its batches' and the read-ahead's);
     * zeros for local data */
    int io_remote; /* the training set is remote (URLs): the table shows the I/O */
    uint64_t io_bytes, io_requests, io_retries, cache_hits, cache_downloads;
    double io_wait_s; /* seconds the fillers waited for shards */
    double io_mb_s;   /* io_bytes (MiB) / epoch_s */
    double fill_s;    /* the batches' fill times summed, io_wait_s's whole */
    /* data-parallel ranks (ranks 1: the rest is unused and not reported) */
    int ranks;
    double comm_pct;           /* time in gradient sums, mean over the ranks */
    double wait_max_pct;       /* the slowest rank's data wait ... */
    int wait_max_rank;         /* ... that rank ... */
    const char *wait_max_host; /* ... and its host */
    uint64_t reduced_bytes;    /* gradient bytes summed per step */
    const double *per_rank;    /* ranks x (images/s, wait%), valid while reporting */
} epoch_rec;

typedef struct summary_rec {
    run_config cfg;
    int epochs; /* counted (not warm-up) */
    double epoch_s_median;
    double images_per_s; /* over the counted epochs */
    double data_wait_pct, copy_pct, compute_pct, gpu_util_avg;
    double comm_pct; /* NaN for one process */
    double final_loss, final_train_acc, final_val_acc;
    double pss_mb_max;
    double preload_build_s; /* NaN when not preloading */
    /* I/O over the counted epochs (epoch_rec's, summed) */
    int io_remote;
    uint64_t io_bytes, io_requests;
    double io_wait_s, fill_s;
    int status;              /* exit status of the run */
    const char *reason;      /* why it failed (NULL when status is 0) */
    const char *note;        /* the note the run printed on stderr (--pin without a GPU), or NULL */
    int asked_pin, asked_nb; /* a sweep's row: what was asked (-1: not known), beside what ran */
} summary_rec;

/* The epoch table. `hide` is a mask of columns left out (0: every one):
 * report_columns chooses it once per run from the first epoch's record
 * and the width available (report_width; 0 = unlimited). When the whole
 * table fits, nothing is hidden; else the columns that do not apply to
 * this run are: on the CPU pin, nb, copy% and pin_MB, and any column that
 * is n/a in the first epoch (gpu%avg/mx, busy%, sm%/occ, gpu_MB, comp%,
 * loss, acc, val). The I/O columns (io_MB MB/s req retry hit%) exist
 * only for a remote training set, the ranks' (comm%, wmax%@rk) only with
 * several ranks.
 * The JSON records always carry everything. */
uint64_t report_columns(const epoch_rec *first, int width);
/* The columns of f: its terminal's when f is one, else $COLUMNS when set
 * to a positive number, else 0 (a pipe or file: unlimited). */
int report_width(FILE *f);
void report_header(FILE *f, uint64_t hide);
/* The share of an epoch (percent) that is none of waiting for data,
 * copying, computing and the gradient sum (NaN terms count 0): the main
 * process's own work between batches, and the time the loader took to
 * make the epoch's batches beyond the main process's span (it filled the
 * ring before the epoch was asked for). Never below 0; NaN when wait is. */
double report_other_pct(double wait, double copy, double compute, double comm);
/* hit%: the share (percent) of shard lookups the shard cache answered
 * without a download; NaN when there were none */
double report_hit_pct(uint64_t hits, uint64_t downloads);
void report_epoch_line(FILE *f, const epoch_rec *r, uint64_t hide);
/* The first record of a --json file (one per configuration in a sweep):
 * what was run, on what, when. */
typedef struct run_header {
    int argc;
    char *const *argv;      /* the command line as given */
    const char *version;    /* the build's git revision */
    const char *data, *val; /* CSV paths; val NULL without --val */
    uint32_t samples, val_samples, classes;
    int first_h, first_w;       /* the first image's size on disk */
    int channels, out_h, out_w; /* one sample as the model sees it */
    const img_params *img;      /* training's transforms */
    const img_params *eval;     /* validation's: Resize + CenterCrop (with the
                                   random-resized crop: the --resize and --crop) */
    const float *mean, *std;    /* normalisation per channel (channels values) */
    int normalize_imagenet;     /* --normalize imagenet chose them */
    int shuffle, drop_last;
    uint64_t seed;
    int epochs;
    run_config cfg;
    const char *sweep_argv; /* a sweep's configuration: the user's command line as a
                               JSON array (argv is then this configuration's own);
                               NULL otherwise */
} run_header;

/* {"record":"run", ...}: time is now, ISO 8601 UTC. Each record is
 * flushed; each returns 0, or the errno of a write that failed (a full
 * disk: ENOSPC, EFBIG) and f's error indicator stays set. */
int report_run_json(FILE *f, const run_header *h, const machine_info *m);
int report_epoch_json(FILE *f, const epoch_rec *r, const machine_info *m);
int report_summary_json(FILE *f, const summary_rec *s, const machine_info *m);

/* Summary of the counted epochs of one configuration. */
void report_summarise(const epoch_rec *recs, int n, double build_s, summary_rec *s);

/* Parse one summary record back (sweeps read their children's); -1 if the
 * line is not one. */
int report_parse_summary(const char *line, summary_rec *s, char *strbuf, size_t strlen_);

/* The sweep's closing table, one row per configuration, with the speed-up
 * over the first. */
void report_sweep_table(FILE *f, const summary_rec *s, int n);

/* Progress bar on stderr (only when enabled). */
void report_progress(int enabled, const char *what, uint64_t done, uint64_t total, double elapsed,
                     uint64_t images);
void report_progress_end(int enabled);

#endif
