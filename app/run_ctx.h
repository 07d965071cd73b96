/* run_ctx.h — the state of one run, shared by app/run.c (setting it up and
 * tearing it down) and app/loop.c (the epochs). Private to app/. */
#ifndef TRAIN_RUN_CTX_H
#define TRAIN_RUN_CTX_H

#include <stdio.h>

#include "app/device.h"
#include "app/feed.h"
#include "app/metrics.h"
#include "app/report.h"
#include "app/run.h"
#include "app/stage.h"
#include "comm/dist.h"
#include "loader/cache.h"
#include "loader/fingerprint.h"
#include "loader/loader.h"
#include "nn/model.h"

typedef struct pass_acc {
    double t0, t1, wait, copy, compute, busy;
    backend_activity act; /* the device's records over [t0, t1] ... */
    int act_on;           /* ... when activity records are on */
    double comm;          /* in gradient sums across ranks (part of each step, not in compute) */
    double made0, made1;  /* when the loader began its first batch and
                            finished its last (an epoch lasts at least
                            that long, whatever the ring held ahead) */
    step_stats stats;
    uint64_t images, skipped;
    double fill;  /* the batches' fill times summed (every filler's) */
    loader_io io; /* the batches' I/O summed */
    int started;
} pass_acc;

typedef struct pass_info {
    load_pass_kind kind;
    int epoch;    /* 0-based */
    int val_pass; /* for a training pass: the id of its validation pass, or -1 */
} pass_info;

typedef struct run_ctx {
    const options *o;
    run_choice c;
    feed f;          /* the data side: data sets, transforms, preload cache, loader, batch */
    data_fp data_fp; /* the training set's (checkpoints keep it; --resume and the ranks compare) */
    /* model */
    const char *model_name;
    model_hparams hp;
    int threads;
    /* device */
    device_choice dev;
    backend *be;
    stager *stager;
    model m;
    int model_made;
    gpu_monitor *monitor;    /* NVML sampler, NULL on the CPU */
    int activity;            /* the backend's activity records are on ... */
    char activity_line[600]; /* ... the header's line saying which and why */
    /* the passes posted to the loader, by id */
    pass_info *passes;
    pass_acc *acc;
    int npasses;
    int start_epoch;
    int warmup_epochs; /* --warmup-epochs as it applies (run.c resolves the default) */
    int build_pass;
    /* report */
    FILE *json;
    long long json_start; /* its size when opened: a sweep's children append */
    long long json_good;  /* its size after the last record written whole */
    int json_err;         /* the errno of the first write to it that failed, or 0 */
    struct trace *trace;  /* --trace, or NULL */
    FILE *dump;           /* --dump-batches, or NULL */
    machine_info mi;
    epoch_rec *recs;
    int nrecs;
    loader_io fetch_seen; /* the read-ahead's counters at the last epoch line */
    long steps;
    char **class_names;
    int progress;
    int said_util_na;
    int said_sm_na;      /* sm%/occ n/a: the reason said once (it can differ per epoch) */
    uint64_t table_hide; /* epoch-table columns left out (report_columns) */
    /* data-parallel ranks (one process: rank 0 of 1, inactive) */
    dist dist;
    int chunks;       /* canonical gradient sums in this many chunks per batch (0: none) */
    int dist_follow;  /* the run stopped because another rank failed */
    double *per_rank; /* the last epoch's images/s and wait% per rank (rank 0) */
} run_ctx;

/* process() status (never an exit status): the training pass reached
 * --max-seconds (hidden, set by --diagnose) and was reported; stop. */
enum { RUN_TIME_UP = -1 };

/* "cpu" or "cuda": the backend chosen */
static inline const char *run_ctx_device(const run_ctx *r)
{
    return r->dev.kind == DEVICE_CUDA ? "cuda" : "cpu";
}

/* The normalisation's mean and std per channel (channels values each):
 * --normalize, --mean/--std, else 0.5 (run.c). */
void run_norm_values(const options *o, int channels, float *mean, float *stdv);
/* With --json: the run record, first in the file (run_header.c). */
void run_write_header(run_ctx *r);
/* After a --json record's write returned err (report.h): the first
 * failure is said at once, naming the file and the reason; the run goes
 * on, and run_one ends with exit status 1, the file cut back to its
 * complete records (run.c). */
void run_json_wrote(run_ctx *r, int err);

/* Post every pass of the run (preload build, then training and validation
 * per epoch) to the loader. */
void run_post_passes(run_ctx *r);
/* The epochs: batches in order, staged, stepped, accounted and reported. */
int run_train_loop(run_ctx *r, errbuf *e);
/* --diag-phase refeed: the model alone on batches kept in device memory. */
int run_refeed_loop(run_ctx *r, errbuf *e);

/* ---- ranks.c: the epoch loop's side of data parallelism (comm/dist.h) */
/* Before each step and each pass's totals: every rank states its status
 * (RUN_OK: it goes on). Returns RUN_OK, or the worst status offered; a
 * rank that offered RUN_OK then stops too, quietly (r->dist_follow). For
 * one process: status. */
int ranks_agree(run_ctx *r, int status);
/* With one preload cache for the node's ranks (r->node_cache), before the
 * training passes are posted: every rank but a building local rank 0
 * waits here for the ranks' agreement that local rank 0 offers after
 * committing the cache (build_batch), or after its build failed; then
 * checks that the cache is complete. RUN_OK, or why not (in e). */
int ranks_node_cache(run_ctx *r, errbuf *e);
/* The job-wide numbers of the epoch ending with training pass tid (and its
 * validation pass): losses and counts summed over the ranks, images summed,
 * time shares averaged, the slowest rank's wait, comm%. A collective. */
void ranks_epoch(run_ctx *r, int tid, epoch_rec *er);
/* The split of training step on batch b (this rank's slice): the global
 * batch the loss is averaged over and, with chunks (r->chunks), this
 * rank's chunks of it. All zero for one process without chunks. */
void ranks_plan_step(run_ctx *r, const loader_batch *b, model_split *md);
/* r->chunks from --grad-chunks: auto's choice, or U checked against the
 * ranks (a power of 2 dividing it) and the batch; with chunks, turns
 * dist's canonical sum on. After the model is made. */
int ranks_check_chunks(run_ctx *r, errbuf *e);
/* After the device is chosen, before NCCL starts, on every rank (whatever
 * rc, this rank's status so far): two ranks of a node on one GPU (by PCI
 * bus id), which NCCL refuses, stop every rank with RUN_BAD_INPUT and a
 * message naming the node, the ranks and the GPU. Returns rc otherwise. A
 * collective; nothing for one process. */
int ranks_check_gpus(run_ctx *r, int rc, errbuf *e);
/* After the epochs (rank 0, several ranks): one line saying what limits
 * the job (ranks.h). */
void ranks_verdict(run_ctx *r);
/* After dist_start, before anything else talks to the other ranks: every
 * rank the same job as rank 0 (the data's fingerprints, the validation
 * set, model, input, batch, epochs, seed, the epoch a --resume starts at
 * (resumed: its state, or NULL), transforms and training settings), so
 * that no rank waits forever in a collective the others never reach, or
 * trains on other rows. RUN_OK, or RUN_BAD_INPUT on every rank: a rank
 * that differs says what (in e), the others follow (r->dist_follow). One
 * collective; nothing for one process. */
struct ckpt_state;
int ranks_check_same(run_ctx *r, const struct ckpt_state *resumed, errbuf *e);

#endif
