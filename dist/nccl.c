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
 */
#if defined(TRAIN_MPI) && defined(TRAIN_CUDA)
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/check.h"
#include "cuda/gpu.h"
#include "dist/internal.h"

typedef struct nccl_state {
    ncclComm_t comm;
    cudaStream_t stream;                  /* the backend's compute stream */
    cudaStream_t comm_stream;             /* overlap: the sums of the buckets */
    cudaEvent_t ready[MODEL_MAX_BUCKETS]; /* compute: bucket k's gradients written */
    cudaEvent_t done;                     /* comm_stream: every bucket summed */
    int next;                             /* the step's next bucket */
} nccl_state;

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
    MPI_Abort(MPI_COMM_WORLD, 1);
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
    NCCL_CHECK(d, ncclAllReduce(grads, grads, n, ncclFloat, ncclSum, s->comm, s->stream));
    d->comm_s += now_sec() - t0; /* the enqueue; the sum itself runs on the stream */
}

/* model.dist.reduce_range: one bucket, on the communication stream once the
 * compute stream has written it */
static void nccl_reduce_range(void *ctx, float *grads, size_t off, size_t n)
{
    dist *d = ctx;
    nccl_state *s = d->nccl;
    double t0 = now_sec();
    cudaEvent_t ev = s->ready[s->next++]; /* the model calls nbuckets times a step */
    CUDA_CHECK(cudaEventRecord(ev, s->stream));
    CUDA_CHECK(cudaStreamWaitEvent(s->comm_stream, ev, 0));
    NCCL_CHECK(
        d, ncclAllReduce(grads + off, grads + off, n, ncclFloat, ncclSum, s->comm, s->comm_stream));
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
    m->dist.reduce = nccl_reduce;
    d->nccl_buckets = 1;
    /* the same plan on every rank: it follows from the model alone. One
     * bucket (asked for, or no layer completes a tail of the slab): the
     * sum after backward on the compute stream overlaps as little */
    int nb = model_plan_buckets(m, buckets_wanted());
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
    d->nccl_buckets = nb;
    return 0;
}

void dist_nccl_free(dist *d)
{
    nccl_state *s = d->nccl;
    if (s->comm_stream) { /* queued sums finish before the stream goes */
        CUDA_CHECK(cudaStreamSynchronize(s->comm_stream));
        for (int k = 0; k < MODEL_MAX_BUCKETS; k++)
            if (s->ready[k])
                CUDA_CHECK(cudaEventDestroy(s->ready[k]));
        if (s->done)
            CUDA_CHECK(cudaEventDestroy(s->done));
        CUDA_CHECK(cudaStreamDestroy(s->comm_stream));
    }
    ncclCommDestroy(s->comm);
    free(s);
    d->nccl = NULL;
}
#endif
