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
#include "loader/sampler.h"

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
    if (!r->node_cache || (!r->cache.follower && !r->cache.ready))
        return RUN_OK;
    int st = agree(r, RUN_OK, 1); /* asleep: local rank 0 needs the cores to decode */
    if (st != RUN_OK)
        return st;
    return cache_node_check(&r->cache, e) == 0 ? RUN_OK : RUN_INTERNAL;
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

void ranks_plan_step(run_ctx *r, const loader_batch *b)
{
    model_dist *md = &r->m.dist;
    int K = r->dist.active ? r->dist.size : 1, U = r->chunks;
    if (K < 2 && U == 0)
        return; /* one process, one gradient in the backend's order */
    const dataset *ds = r->jobs[b->job].kind == LOAD_JOB_EVAL ? &r->val : &r->train;
    uint32_t c = sampler_batch_size(ds->n, (uint32_t)r->batch, b->index);
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
    while (U < 4 && 2 * U <= r->batch)
        U *= 2;
    return U > K ? U : K;
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
    if (r->batch < U)
        return fail(e, RUN_BAD_INPUT, "--grad-chunks %d is more than --batch %d", U, r->batch);
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
