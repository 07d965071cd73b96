/* ranks.c — the epoch loop's side of data parallelism (run_ctx.h): the
 * agreement before every step, and one epoch line for the whole job.
 *
 * Every rank runs the same jobs with the same number of batches (each
 * loads its slice of every global batch), so every rank reaches these
 * calls in the same order; dist.h says why each collective is preceded by
 * an agreement. With one process both calls do nothing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/ranks.h"
#include "app/run_ctx.h"
#include "loader/fingerprint.h"
#include "loader/sampler.h"
#include "nn/checkpoint.h"

static int agree(run_ctx *r, int status, int idle)
{
    if (!r->dist.active)
        return status;
    int st = idle ? dist_agree_idle(&r->dist, status) : dist_agree(&r->dist, status);
    if (st != RUN_OK && status == RUN_OK)
        r->dist_follow = 1;
    return st;
}

int ranks_agree(run_ctx *r, int status) { return agree(r, status, 0); }

int ranks_node_cache(run_ctx *r, errbuf *e)
{
    /* the builder agrees after its build (build_batch); which rank builds
     * was settled before MPI, so ask the cache, not MPI's local rank */
    if (!r->f.node_cache || (!r->f.cache.follower && !r->f.cache.ready))
        return RUN_OK;
    int st = agree(r, RUN_OK, 1); /* asleep: local rank 0 needs the cores to decode */
    if (st != RUN_OK)
        return st;
    return cache_node_check(&r->f.cache, e) == 0 ? RUN_OK : RUN_INTERNAL;
}

/* one job's step results summed over the ranks (exact: counts, and loss
 * sums in double) */
static void sum_stats(run_ctx *r, step_stats *s)
{
    double v[4] = {s->loss_sum, (double)s->correct, (double)s->n, (double)s->nonfinite};
    dist_sum(&r->dist, v, 4);
    s->loss_sum = v[0];
    s->correct = (long)v[1];
    s->n = (long)v[2];
    s->nonfinite = (long)v[3];
}

/* per rank, what ranks_epoch gathers */
enum { G_TIME, G_IMAGES, G_WAIT, G_COPY, G_COMPUTE, G_COMM, G_N };

void ranks_epoch(run_ctx *r, int tid, epoch_rec *er)
{
    er->ranks = r->dist.active ? r->dist.size : 1;
    er->comm_pct = er->wait_max_pct = NAN;
    if (er->ranks < 2)
        return;
    job_acc *a = &r->acc[tid];
    sum_stats(r, &a->stats);
    int vid = r->jobs[tid].val_job;
    if (vid >= 0)
        sum_stats(r, &r->acc[vid].stats);
    double mine[G_N] = {er->epoch_s, (double)a->images, a->wait, a->copy, a->compute, a->comm};
    double *all = xcalloc((size_t)er->ranks * G_N, sizeof(double));
    dist_gather(&r->dist, mine, G_N, all);
    /* images/s and wait% per rank, kept for the JSON writer */
    free(r->per_rank);
    double *per_rank = r->per_rank = xcalloc((size_t)er->ranks * 2, sizeof(double));
    /* the job's epoch lasts as long as its slowest rank's; shares are the
     * ranks' mean; images add up */
    double t = 0, images = 0, share[G_N] = {0};
    for (int k = 0; k < er->ranks; k++) {
        const double *g = all + (size_t)k * G_N;
        double tk = g[G_TIME] > 0 ? g[G_TIME] : 1e-9;
        t = g[G_TIME] > t ? g[G_TIME] : t;
        images += g[G_IMAGES];
        for (int j = G_WAIT; j < G_N; j++)
            share[j] += 100 * g[j] / tk / er->ranks;
        per_rank[2 * k] = g[G_IMAGES] / tk;
        per_rank[2 * k + 1] = 100 * g[G_WAIT] / tk;
        if (k == 0 || per_rank[2 * k + 1] > er->wait_max_pct) {
            er->wait_max_pct = per_rank[2 * k + 1];
            er->wait_max_rank = k;
        }
    }
    free(all);
    if (r->dist.rank != 0)
        return; /* only rank 0 reports; the gathered values are its alone */
    er->epoch_s = t;
    er->images = (uint64_t)images;
    er->images_per_s = images / (t > 0 ? t : 1e-9);
    er->data_wait_pct = share[G_WAIT];
    er->copy_pct = share[G_COPY];
    if (!isnan(er->compute_pct))
        er->compute_pct = share[G_COMPUTE];
    er->comm_pct = share[G_COMM];
    er->wait_max_host = dist_host_of(&r->dist, er->wait_max_rank);
    er->reduced_bytes = r->dist.reduced_bytes;
    er->per_rank = per_rank;
}

void ranks_plan_step(run_ctx *r, const loader_batch *b, model_split *md)
{
    memset(md, 0, sizeof *md);
    int K = r->dist.active ? r->dist.size : 1, U = r->chunks;
    if (K < 2 && U == 0)
        return; /* one process, one gradient in the backend's order */
    const dataset *ds = r->jobs[b->job].kind == LOAD_JOB_EVAL ? &r->f.val : &r->f.train;
    uint32_t c = sampler_batch_size(ds->n, (uint32_t)r->f.batch, b->index);
    md->global_batch = (int)c;
    md->nchunks = 0;
    if (U == 0)
        return;
    /* this rank's slice is chunks [rank U/K, (rank+1) U/K) of the batch's
     * U (sampler_slice's bounds: K divides U) */
    int first = r->dist.rank * (U / K);
    md->nchunks = U / K;
    for (int j = 0; j < md->nchunks; j++) {
        uint32_t at;
        md->chunk[j] = (int)sampler_slice(c, (uint32_t)(first + j), (uint32_t)U, &at);
    }
}

/* --grad-chunks auto: 4 chunks (K = 1, 2 and 4 give the same bits), or
 * one per rank when there are more ranks, if the backend sums chunks at
 * next to no cost (model_groups_cheap) and K is a power of 2; else none */
static int auto_chunks(run_ctx *r, int K)
{
    if (!model_groups_cheap(&r->m) || (K & (K - 1)) || K > MODEL_MAX_CHUNKS)
        return 0;
    int U = 1;
    while (U < 4 && 2 * U <= r->f.batch)
        U *= 2;
    return U > K ? U : K;
}

int ranks_check_gpus(run_ctx *r, int rc, errbuf *e)
{
    if (!r->dist.active)
        return rc;
    /* TRAIN_NCCL_GPU_CHECK=0 leaves it to NCCL (which refuses at its init):
     * for testing that refusal */
    const char *skip = getenv("TRAIN_NCCL_GPU_CHECK");
    int mine = rc == RUN_OK && r->dev.kind == DEVICE_CUDA && !(skip && !strcmp(skip, "0"));
    char msg[ERR_MAX];
    if (dist_check_gpus(&r->dist, mine ? r->dev.dev.pci_bus_id : "", r->dev.gpu, msg, sizeof msg) &&
        rc == RUN_OK)
        return fail(e, RUN_BAD_INPUT, "%s", msg);
    return rc;
}

int ranks_check_chunks(run_ctx *r, errbuf *e)
{
    int K = r->dist.active ? r->dist.size : 1, U = r->o->grad_chunks;
    r->chunks = 0;
    if (U == GRAD_CHUNKS_OFF || !r->model_made)
        return RUN_OK;
    if (U == GRAD_CHUNKS_AUTO) {
        if ((r->chunks = auto_chunks(r, K)) > 0)
            dist_canonical(&r->dist);
        return RUN_OK;
    }
    if ((K & (K - 1)) || U % K)
        return fail(e, RUN_BAD_INPUT,
                    "--grad-chunks %d with %d ranks: the ranks must be a power of 2 dividing "
                    "the chunks (each rank sums an aligned part of the tree)",
                    U, K);
    if (r->f.batch < U)
        return fail(e, RUN_BAD_INPUT, "--grad-chunks %d is more than --batch %d", U, r->f.batch);
    r->chunks = U;
    dist_canonical(&r->dist);
    return RUN_OK;
}

const char *ranks_verdict_text(double wait_mean, double wait_max, int rank, const char *host,
                               double comm, int ranks, char *buf, size_t len)
{
    double others = ranks > 1 ? (wait_mean * ranks - wait_max) / (ranks - 1) : wait_mean;
    if (wait_max >= 15 && wait_max - others >= 10)
        snprintf(buf, len,
                 "rank %d (%s) is the straggler: its loader keeps it waiting %.0f%% of the time "
                 "(the other ranks %.0f%%), and the others wait for it in the gradient sum "
                 "(comm %.0f%%); give that rank more --workers or faster storage",
                 rank, host, wait_max, others, comm);
    else if (comm >= 30)
        snprintf(buf, len,
                 "communication-bound: %.0f%% of the time in the gradient sum; a larger "
                 "--batch per rank, fewer ranks or a faster interconnect",
                 comm);
    else if (wait_mean >= 30)
        snprintf(buf, len,
                 "data-bound: the ranks wait for data %.0f%% of the time; more --workers per "
                 "rank (docs/DISTRIBUTED.md)",
                 wait_mean);
    else
        snprintf(buf, len, "compute-bound (wait %.0f%%, comm %.0f%%)", wait_mean, comm);
    return buf;
}

void ranks_verdict(run_ctx *r)
{
    if (r->dist.size < 2 || r->dist.rank != 0 || r->nrecs == 0)
        return;
    double t = 0, wait = 0, wmax = 0, comm = 0;
    int counted = 0;
    for (int pass = 0; pass < 2 && counted == 0; pass++) /* warm-up epochs only if nothing else */
        for (int i = 0; i < r->nrecs; i++) {
            const epoch_rec *er = &r->recs[i];
            if (er->warmup && pass == 0)
                continue;
            t += er->epoch_s;
            wait += er->data_wait_pct * er->epoch_s;
            wmax += er->wait_max_pct * er->epoch_s;
            comm += er->comm_pct * er->epoch_s;
            counted++;
        }
    const epoch_rec *last = &r->recs[r->nrecs - 1];
    t = t > 0 ? t : 1e-9;
    char buf[512];
    printf("ranks: %s\n", ranks_verdict_text(wait / t, wmax / t, last->wait_max_rank,
                                             last->wait_max_host ? last->wait_max_host : "?",
                                             comm / t, r->dist.size, buf, sizeof buf));
    fflush(stdout);
}

/* ---------------------------------------------------------------- the same job everywhere */

/* What every rank must share for the ranks to run one job: the same
 * number of batches per pass (else they meet in different collectives and
 * spin there forever), the same rows in them, the same model and the same
 * arithmetic. One allgather of this at start-up; a rank that differs from
 * rank 0 names the first thing that differs. */
enum {
    S_TRAIN_N, /* data */
    S_TRAIN_CLASSES,
    S_TRAIN_HASH,
    S_VAL,
    S_VAL_N,
    S_VAL_CLASSES,
    S_VAL_HASH,
    S_MODEL, /* model and input */
    S_CHANNELS,
    S_HEIGHT,
    S_WIDTH,
    S_BATCH, /* the passes */
    S_EPOCHS,
    S_SEED,
    S_START_EPOCH,
    S_TRANSFORMS, /* hashes of options */
    S_SETTINGS,
    S_N
};

typedef struct same_job {
    uint64_t v[S_N];
    char model[32];
} same_job;

static uint64_t hash_img(const img_params *p, uint64_t h)
{
    img_params q = *p;
    q.cold = 0; /* how files are read, not what they give */
    return hash64(&q, sizeof q, h);
}

static void describe_job(const run_ctx *r, const ckpt_state *resumed, same_job *j)
{
    const options *o = r->o;
    memset(j, 0, sizeof *j);
    const data_fp *t = &r->data_fp; /* set after the data was read (run.c) */
    j->v[S_TRAIN_N] = t->n;
    j->v[S_TRAIN_CLASSES] = t->nclasses;
    j->v[S_TRAIN_HASH] = t->hash;
    j->v[S_VAL] = (uint64_t)r->f.have_val;
    if (r->f.have_val) {
        data_fp v = dataset_fingerprint(&r->f.val, o->csv_o.root);
        j->v[S_VAL_N] = v.n;
        j->v[S_VAL_CLASSES] = v.nclasses;
        j->v[S_VAL_HASH] = v.hash;
    }
    snprintf(j->model, sizeof j->model, "%s", r->model_name ? r->model_name : "?");
    j->v[S_MODEL] = hash64(j->model, strlen(j->model), 0);
    j->v[S_CHANNELS] = (uint64_t)r->f.ss.channels;
    j->v[S_HEIGHT] = (uint64_t)r->f.ss.out_h;
    j->v[S_WIDTH] = (uint64_t)r->f.ss.out_w;
    j->v[S_BATCH] = (uint64_t)r->f.batch;
    j->v[S_EPOCHS] = (uint64_t)o->epochs;
    j->v[S_SEED] = o->seed;
    j->v[S_START_EPOCH] = resumed ? (uint64_t)resumed->epoch : 0;
    j->v[S_TRANSFORMS] = hash_img(&r->f.ss.eval, hash_img(&r->f.ss.train, 0));
    /* what else changes the batches or the arithmetic */
    double hp[3] = {r->hp.lr, r->hp.momentum, r->hp.wd};
    int flags[9] = {(int)r->hp.schedule,   o->shuffle,     o->drop_last,
                    o->grad_chunks,        o->nmean,       o->nstd,
                    o->normalize_imagenet, o->loader_only, o->max_batches};
    uint64_t h = hash64(hp, sizeof hp, 0);
    h = hash64(flags, sizeof flags, h);
    h = hash64(o->mean, sizeof o->mean, h);
    j->v[S_SETTINGS] = hash64(o->std, sizeof o->std, h);
}

/* what differs between mine and rank 0's (theirs), first thing first */
static void say_difference(const run_ctx *r, const same_job *mine, const same_job *theirs, int k,
                           char *buf, size_t len)
{
    const options *o = r->o;
    unsigned long long a = mine->v[k], b = theirs->v[k];
    const char *val = r->f.have_val ? o->val_csv : "--val";
    switch (k) {
    case S_TRAIN_N: snprintf(buf, len, "%s has %llu samples, rank 0's %llu", o->csv, a, b); break;
    case S_TRAIN_CLASSES:
        snprintf(buf, len, "%s has %llu classes, rank 0's %llu", o->csv, a, b);
        break;
    case S_TRAIN_HASH:
        snprintf(buf, len,
                 "%s has other rows than rank 0's (the same %llu samples and %llu classes, but "
                 "other paths, labels or order)",
                 o->csv, (unsigned long long)mine->v[S_TRAIN_N],
                 (unsigned long long)mine->v[S_TRAIN_CLASSES]);
        break;
    case S_VAL:
        snprintf(buf, len, "%s",
                 a ? "--val given here, not on rank 0" : "no --val here, rank 0 has one");
        break;
    case S_VAL_N: snprintf(buf, len, "--val %s has %llu samples, rank 0's %llu", val, a, b); break;
    case S_VAL_CLASSES:
        snprintf(buf, len, "--val %s has %llu classes, rank 0's %llu", val, a, b);
        break;
    case S_VAL_HASH:
        snprintf(buf, len,
                 "--val %s has other rows than rank 0's (the same %llu samples, but other paths, "
                 "labels or order)",
                 val, (unsigned long long)mine->v[S_VAL_N]);
        break;
    case S_MODEL: snprintf(buf, len, "model %s, rank 0's %s", mine->model, theirs->model); break;
    case S_CHANNELS: snprintf(buf, len, "%llu input channels, rank 0 %llu", a, b); break;
    case S_HEIGHT:
    case S_WIDTH:
        snprintf(buf, len, "inputs of %llux%llu, rank 0's %llux%llu",
                 (unsigned long long)mine->v[S_HEIGHT], (unsigned long long)mine->v[S_WIDTH],
                 (unsigned long long)theirs->v[S_HEIGHT], (unsigned long long)theirs->v[S_WIDTH]);
        break;
    case S_BATCH: snprintf(buf, len, "--batch %llu, rank 0 %llu", a, b); break;
    case S_EPOCHS: snprintf(buf, len, "--epochs %llu, rank 0 %llu", a, b); break;
    case S_SEED: snprintf(buf, len, "--seed %llu, rank 0 %llu", a, b); break;
    case S_START_EPOCH:
        snprintf(buf, len, "resumes after epoch %llu, rank 0 after %llu", a, b);
        break;
    case S_TRANSFORMS:
        snprintf(buf, len,
                 "other image transforms than rank 0 (--resize, --crop, --random-crop, --pad, "
                 "--hflip, --random-resized-crop, --color-jitter, --decode or --exif)");
        break;
    default:
        snprintf(buf, len,
                 "other training settings than rank 0 (--lr, --momentum, --wd, --lr-schedule, "
                 "--mean, --std, --normalize, --shuffle, --drop-last or --grad-chunks)");
        break;
    }
}

int ranks_check_same(run_ctx *r, const ckpt_state *resumed, errbuf *e)
{
    if (!r->dist.active || r->dist.size < 2)
        return RUN_OK;
    same_job mine, *all = xcalloc((size_t)r->dist.size, sizeof *all);
    describe_job(r, resumed, &mine);
    dist_allgather(&r->dist, &mine, sizeof mine, all);
    int differs = -1, any = 0;
    for (int q = 1; q < r->dist.size; q++) {
        int k = 0;
        while (k < S_N && all[q].v[k] == all[0].v[k])
            k++;
        any |= k < S_N;
        if (q == r->dist.rank && k < S_N)
            differs = k;
    }
    int rc = RUN_OK;
    if (differs >= 0) { /* this rank says what differs (dist_end: rank 0 prints it, naming us) */
        char what[ERR_MAX - 128];
        say_difference(r, &mine, &all[0], differs, what, sizeof what);
        rc = fail(e, RUN_BAD_INPUT,
                  "%s; every rank must train on the same data with the same settings", what);
    } else if (any) { /* another rank differs: stop with it, quietly */
        r->dist_follow = 1;
        rc = RUN_BAD_INPUT;
    }
    free(all);
    return rc;
}
