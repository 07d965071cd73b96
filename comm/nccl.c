/* nccl.c — the GPU backend's gradient sum on NCCL (CUDA and MPI builds).
 *
 * One communicator per job: rank 0 makes an ncclUniqueId and broadcasts it
 * over MPI, then every rank joins with ncclCommInitRank on the device its
 * backend runs on. The host never waits for a sum: events order it.
 *
 * Overlap with backward (the default): the slab is cut into a few buckets
 * in backward order (model_plan_buckets; TRAIN_NCCL_BUCKETS, default 4).
 * As the model hands over a bucket (its last gradient is enqueued on the
 * compute stream), the bucket's event is recorded on the compute stream,
 * the communication stream waits for it (cudaStreamWaitEvent) and the
 * bucket's ncclAllReduce (sum, in place) goes on the communication stream,
 * so the sum of the last layers' gradients can run while the compute
 * stream goes on with the backward pass of the earlier layers. After the
 * last bucket the compute stream waits for the communication stream's
 * "done" event, so the update reads the sums.
 *
 * TRAIN_NCCL_BUCKETS=1 restores one ncclAllReduce over the whole slab on
 * the compute stream after backward (stream order alone orders it): no
 * second stream, no overlap.
 *
 * Time on the device: each sum is bracketed by two timing events on the
 * stream that runs it (recorded after the stream's wait for the bucket,
 * so the bracket is the sum alone, waiting for slower peers inside NCCL's
 * kernel included, and not the backward pass it waits for); the events
 * alternate between two sets, and a step's elapsed times are read one
 * step later, once its last sum is done: that is comm (dist_comm_device).
 *
 * Failures end instead of hanging: while the communicator lives, every
 * host wait of the GPU backend (cuda/wait.h: results, copies, stream
 * synchronisations, and the wait for a step's sums here) polls and calls
 * this file's watchdog between polls, which reads NCCL's asynchronous
 * error (ncclCommGetAsyncError) and the time waited; on an error, or past
 * TRAIN_NCCL_TIMEOUT seconds (default 300), the rank aborts the
 * communicator (ncclCommAbort: no collective, the peers may be gone),
 * says which rank, step and bucket and NCCL's error, and exits 1. Every
 * surviving rank does the same, so a dead peer leaves no rank asleep. A
 * failed NCCL call ends the rank the same way. The normal end calls
 * ncclCommFinalize before ncclCommDestroy.
 */
#define _POSIX_C_SOURCE 200809L
#if defined(TRAIN_MPI) && defined(TRAIN_CUDA)
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "comm/internal.h"
#include "cuda/check.h"
#include "cuda/gpu.h"
#include "cuda/wait.h"

/* TRAIN_NCCL_TIMEOUT: how long the host waits for a step's sums */
#define NCCL_TIMEOUT_DEFAULT_S 300.0

typedef struct nccl_state {
    ncclComm_t comm;
    cudaStream_t stream;                  /* the backend's compute stream */
    cudaStream_t comm_stream;             /* overlap: the sums of the buckets */
    cudaEvent_t ready[MODEL_MAX_BUCKETS]; /* compute: bucket k's gradients written */
    cudaEvent_t done;                     /* comm_stream: every bucket summed */
    int next;                             /* the step's next bucket */
    int nb;                               /* buckets per step */
    /* timing: per set (steps alternate), per bucket, the sum's start and end */
    cudaEvent_t t0[2][MODEL_MAX_BUCKETS], t1[2][MODEL_MAX_BUCKETS];
    int nrec[2];    /* per set: the sums its step bracketed */
    long steps;     /* steps whose sums were enqueued */
    long read;      /* steps whose sums were seen done and timed */
    double dev_s;   /* the read steps' sums, on the device (dist_comm_device) */
    double timeout; /* TRAIN_NCCL_TIMEOUT */
} nccl_state;

static double timeout_wanted(void)
{
    const char *v = getenv("TRAIN_NCCL_TIMEOUT");
    double t = v ? atof(v) : 0;
    return t > 0 ? t : NCCL_TIMEOUT_DEFAULT_S;
}

static int nccl_fail(errbuf *e, ncclResult_t r, const char *what)
{
    return errf(e, "NCCL: %s: %s", what, ncclGetErrorString(r));
}

/* a failed NCCL call inside a step is not recoverable, like a failed CUDA
 * call inside an op (cuda/check.h): say where, stop every rank */
#define NCCL_CHECK(d, call) nccl_check((d), (call), #call, __func__, __FILE__, __LINE__)
static void nccl_check(const dist *d, ncclResult_t r, const char *stmt, const char *func,
                       const char *file, int line)
{
    if (r == ncclSuccess)
        return;
    fprintf(stderr, "train: rank %d (%s): %s failed in %s (%s:%d): %s\n", d->rank, d->host, stmt,
            func, file, line, ncclGetErrorString(r));
    nccl_state *s = d->nccl;
    if (s && s->comm) /* its peers may be gone: no collective, no MPI */
        ncclCommAbort(s->comm);
    fflush(stderr);
    exit(1);
}

/* the first bucket of step `step` whose sum has not ended, -1 if none */
static int unfinished_bucket(nccl_state *s, long step)
{
    struct timespec ms = {0, 1000 * 1000};
    for (int k = 0; k < s->nrec[step & 1]; k++) /* asked twice, 1 ms apart */
        if (cudaEventQuery(s->t1[step & 1][k]) == cudaErrorNotReady &&
            (nanosleep(&ms, NULL), cudaEventQuery(s->t1[step & 1][k]) == cudaErrorNotReady))
            return k;
    return -1;
}

/* NCCL failed or the sums did not end in time: say so, abort, exit. The
 * communicator is aborted, not destroyed: its peers may be gone. */
static void nccl_give_up(dist *d, nccl_state *s, long step, ncclResult_t r, double waited)
{
    int k = unfinished_bucket(s, step);
    char where[96] = "";
    if (k >= 0)
        snprintf(where, sizeof where, ", bucket %d of %d", k + 1, s->nrec[step & 1]);
    if (r != ncclSuccess)
        fprintf(stderr,
                "train: rank %d (%s): NCCL failed in the gradient sum of step %ld%s: %s (%s); "
                "aborting the communicator\n",
                d->rank, d->host, step + 1, where, ncclGetErrorString(r),
                r == ncclRemoteError ? "ncclRemoteError" : "asynchronous error");
    else
        fprintf(stderr,
                "train: rank %d (%s): the gradient sum of step %ld%s has not ended after %.0f s "
                "(TRAIN_NCCL_TIMEOUT=%g): a rank is gone or stuck; aborting the communicator\n",
                d->rank, d->host, step + 1, where, waited, s->timeout);
    fflush(stderr);
    ncclCommAbort(s->comm);
    s->comm = NULL;
    exit(1);
}

/* The GPU backend's watchdog (cuda/wait.h), called between polls while the
 * host waits for device work: NCCL's asynchronous error, or a wait past
 * TRAIN_NCCL_TIMEOUT, ends this rank. The step named is the oldest whose
 * sums the host has not seen end. */
static void watchdog(void *ctx, double waited)
{
    dist *d = ctx;
    nccl_state *s = d->nccl;
    long step = s->read < s->steps ? s->read : s->steps - 1;
    ncclResult_t ar = ncclSuccess;
    ncclResult_t gr = ncclCommGetAsyncError(s->comm, &ar);
    if (gr != ncclSuccess)
        nccl_give_up(d, s, step, gr, waited);
    if (ar != ncclSuccess && ar != ncclInProgress)
        nccl_give_up(d, s, step, ar, waited);
    if (waited > s->timeout)
        nccl_give_up(d, s, step, ncclSuccess, waited);
}

/* the steps enqueued before the newest `keep` (0 or 1): wait for their sums
 * (bounded) and add their device time */
static void read_steps(dist *d, long keep)
{
    nccl_state *s = d->nccl;
    while (s->read < s->steps - keep) {
        long step = s->read;
        if (s->nrec[step & 1] > 0) /* bounded: the watchdog is set */
            GPU_WAIT_EVENT(s->t1[step & 1][s->nrec[step & 1] - 1]);
        for (int k = 0; k < s->nrec[step & 1]; k++) {
            float ms = 0;
            CUDA_CHECK(cudaEventElapsedTime(&ms, s->t0[step & 1][k], s->t1[step & 1][k]));
            s->dev_s += ms / 1000.0;
        }
        s->read++;
    }
}

/* a step's sums are all enqueued: time the one before (its events are
 * reused by the next step) */
static void step_enqueued(dist *d)
{
    nccl_state *s = d->nccl;
    s->steps++;
    read_steps(d, 1);
}

double dist_nccl_comm_device(dist *d)
{
    nccl_state *s = d->nccl;
    read_steps(d, 0);
    double t = s->dev_s;
    s->dev_s = 0;
    return t;
}

/* TRAIN_NCCL_BUCKETS: 1 to MODEL_MAX_BUCKETS, else the default */
static int buckets_wanted(void)
{
    const char *v = getenv("TRAIN_NCCL_BUCKETS");
    int n = v ? atoi(v) : 0;
    return n >= 1 && n <= MODEL_MAX_BUCKETS ? n : DIST_NCCL_BUCKETS;
}

/* model.dist.reduce: the whole slab at once on the compute stream */
static void nccl_reduce(void *ctx, float *grads, size_t n)
{
    dist *d = ctx;
    nccl_state *s = d->nccl;
    double t0 = now_sec();
    CUDA_CHECK(cudaEventRecord(s->t0[s->steps & 1][0], s->stream));
    NCCL_CHECK(d, ncclAllReduce(grads, grads, n, ncclFloat, ncclSum, s->comm, s->stream));
    CUDA_CHECK(cudaEventRecord(s->t1[s->steps & 1][0], s->stream));
    s->nrec[s->steps & 1] = 1;
    d->comm_s += now_sec() - t0; /* the enqueue; the sum itself runs on the stream */
    step_enqueued(d);
}

/* model.dist.reduce_range: one bucket, on the communication stream once the
 * compute stream has written it */
static void nccl_reduce_range(void *ctx, float *grads, size_t off, size_t n)
{
    dist *d = ctx;
    nccl_state *s = d->nccl;
    double t0 = now_sec();
    int k = s->next++; /* the model calls nbuckets times a step */
    cudaEvent_t ev = s->ready[k];
    CUDA_CHECK(cudaEventRecord(ev, s->stream));
    CUDA_CHECK(cudaStreamWaitEvent(s->comm_stream, ev, 0));
    CUDA_CHECK(cudaEventRecord(s->t0[s->steps & 1][k], s->comm_stream));
    NCCL_CHECK(
        d, ncclAllReduce(grads + off, grads + off, n, ncclFloat, ncclSum, s->comm, s->comm_stream));
    CUDA_CHECK(cudaEventRecord(s->t1[s->steps & 1][k], s->comm_stream));
    s->nrec[s->steps & 1] = k + 1;
    d->comm_s += now_sec() - t0;
}

/* model.dist.reduce_wait: what the compute stream enqueues next (the
 * update) comes after every bucket's sum */
static void nccl_reduce_wait(void *ctx)
{
    dist *d = ctx;
    nccl_state *s = d->nccl;
    CUDA_CHECK(cudaEventRecord(s->done, s->comm_stream));
    CUDA_CHECK(cudaStreamWaitEvent(s->stream, s->done, 0));
    s->next = 0;
    step_enqueued(d);
}

static int create_timing(nccl_state *s, int nb, errbuf *e)
{
    for (int set = 0; set < 2; set++)
        for (int k = 0; k < nb; k++)
            if (gpu_soft_cuda(e, cudaEventCreate(&s->t0[set][k]),
                              "creating an NCCL timing event") ||
                gpu_soft_cuda(e, cudaEventCreate(&s->t1[set][k]), "creating an NCCL timing event"))
                return -1;
    return 0;
}

int dist_nccl_create(dist *d, model *m, errbuf *e)
{
    ncclUniqueId id;
    ncclResult_t r = ncclSuccess;
    if (d->rank == 0)
        r = ncclGetUniqueId(&id);
    /* every rank learns whether rank 0 got one, so nobody waits for it */
    int ok = r == ncclSuccess;
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!ok)
        return d->rank == 0 ? nccl_fail(e, r, "ncclGetUniqueId")
                            : errf(e, "NCCL: rank 0 could not create a communicator id");
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    nccl_state *s = xcalloc(1, sizeof *s);
    s->stream = (cudaStream_t)backend_cuda_stream(m->be);
    r = ncclCommInitRank(&s->comm, d->size, id, d->rank);
    if (r != ncclSuccess) {
        free(s);
        return nccl_fail(e, r, "ncclCommInitRank");
    }
    d->nccl = s;
    s->timeout = timeout_wanted();
    gpu_set_watchdog(watchdog, d); /* every host wait from now on is bounded */
    s->nb = 1;
    m->dist.reduce = nccl_reduce;
    d->nccl_buckets = 1;
    /* the same plan on every rank: it follows from the model alone. One
     * bucket (asked for, or no layer completes a tail of the slab): the
     * sum after backward on the compute stream overlaps as little */
    int nb = model_plan_buckets(m, buckets_wanted());
    if (create_timing(s, nb < 2 ? 1 : nb, e) != 0)
        return -1;
    if (nb < 2)
        return 0;
    if (gpu_soft_cuda(e, cudaStreamCreateWithFlags(&s->comm_stream, cudaStreamNonBlocking),
                      "creating the NCCL stream") != 0)
        return -1;
    for (int k = 0; k < nb; k++)
        if (gpu_soft_cuda(e, cudaEventCreateWithFlags(&s->ready[k], cudaEventDisableTiming),
                          "creating a gradient bucket event") != 0)
            return -1;
    if (gpu_soft_cuda(e, cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming),
                      "creating the NCCL stream's event") != 0)
        return -1;
    m->dist.reduce_range = nccl_reduce_range;
    m->dist.reduce_wait = nccl_reduce_wait;
    d->nccl_buckets = s->nb = nb;
    return 0;
}

void dist_nccl_free(dist *d)
{
    nccl_state *s = d->nccl;
    if (s->comm)
        read_steps(d, 0); /* bounded: the queued sums end, or this rank does */
    for (int set = 0; set < 2; set++)
        for (int k = 0; k < MODEL_MAX_BUCKETS; k++) {
            if (s->t0[set][k])
                CUDA_CHECK(cudaEventDestroy(s->t0[set][k]));
            if (s->t1[set][k])
                CUDA_CHECK(cudaEventDestroy(s->t1[set][k]));
        }
    if (s->comm_stream) { /* queued sums finish before the stream goes */
        GPU_WAIT_STREAM(s->comm_stream);
        for (int k = 0; k < MODEL_MAX_BUCKETS; k++)
            if (s->ready[k])
                CUDA_CHECK(cudaEventDestroy(s->ready[k]));
        if (s->done)
            CUDA_CHECK(cudaEventDestroy(s->done));
        CUDA_CHECK(cudaStreamDestroy(s->comm_stream));
    }
    gpu_set_watchdog(NULL, NULL);
    if (s->comm) { /* finalize: completes its operations, may talk to the peers */
        ncclResult_t r = ncclCommFinalize(s->comm);
        if (r != ncclSuccess)
            fprintf(stderr, "train: rank %d (%s): ncclCommFinalize: %s\n", d->rank, d->host,
                    ncclGetErrorString(r));
        ncclCommDestroy(s->comm);
    }
    free(s);
    d->nccl = NULL;
}
#endif
