/* nccl.c — the GPU backend's gradient sum on NCCL (CUDA and MPI builds).
 *
 * One communicator per job: rank 0 makes an ncclUniqueId and broadcasts it
 * over MPI, then every rank joins with ncclCommInitRank on the device its
 * backend runs on. Each training step enqueues one ncclAllReduce (sum, in
 * place) over the whole gradient slab on the backend's compute stream,
 * after the backward pass and before the update: stream order is the only
 * synchronisation, the host does not wait. The slab is one allocation, so
 * one call moves it all (no bucketing to tune).
 *
 * Overlap with backward: the allreduce starts once the whole backward pass
 * is enqueued. Starting per layer as its gradient is ready would need a
 * call per tensor (or buckets); not done (see docs/DISTRIBUTED.md).
 */
#if defined(TRAIN_MPI) && defined(TRAIN_CUDA)
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/gpu.h"
#include "dist/internal.h"

typedef struct nccl_state {
    ncclComm_t comm;
    cudaStream_t stream;
} nccl_state;

static int nccl_fail(errbuf *e, ncclResult_t r, const char *what)
{
    return errf(e, "NCCL: %s: %s", what, ncclGetErrorString(r));
}

int dist_nccl_create(dist *d, backend *be, errbuf *e)
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
    s->stream = (cudaStream_t)backend_cuda_stream(be);
    r = ncclCommInitRank(&s->comm, d->size, id, d->rank);
    if (r != ncclSuccess) {
        free(s);
        return nccl_fail(e, r, "ncclCommInitRank");
    }
    d->nccl = s;
    return 0;
}

void dist_nccl_reduce(void *ctx, float *grads, size_t n)
{
    dist *d = ctx;
    nccl_state *s = d->nccl;
    double t0 = now_sec();
    ncclResult_t r = ncclAllReduce(grads, grads, n, ncclFloat, ncclSum, s->comm, s->stream);
    if (r != ncclSuccess) { /* like a failed CUDA call inside an op: not recoverable */
        fprintf(stderr, "train: rank %d (%s): ncclAllReduce of %zu floats: %s\n", d->rank, d->host,
                n, ncclGetErrorString(r));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    d->comm_s += now_sec() - t0; /* the enqueue; the sum itself runs on the stream */
}

void dist_nccl_free(dist *d)
{
    nccl_state *s = d->nccl;
    ncclCommDestroy(s->comm);
    free(s);
    d->nccl = NULL;
}
#endif
