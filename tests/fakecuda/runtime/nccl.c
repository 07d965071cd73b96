/* nccl.c — the fake NCCL: the calls comm/nccl.c makes, implemented on MPI
 * so that the GPU backend's real NCCL calls run between processes on the
 * fake CUDA runtime (built when MPI is; nothing without it).
 *
 * A communicator is MPI_COMM_WORLD duplicated. ncclGetUniqueId draws a
 * random id; ncclCommInitRank checks what NCCL would otherwise deadlock or
 * fail on: every rank holds the same id (a missing broadcast gives each
 * rank its own), nranks and rank are MPI's. ncclAllReduce checks its
 * buffers are device memory of the right extent and enqueues the sum on
 * the given stream like any kernel: it runs when the stream does (at the
 * next synchronisation), so stream order and events are what order it, as
 * on a GPU; with fake_set_early_nccl (FAKECUDA_NCCL=early) its stream runs
 * it as early as those allow instead. Each call is counted
 * (fake_nccl_allreduces), and each sum that ran, with whether it ran beside
 * queued work of another stream (fake_nccl_overlap), for tests.
 *
 * Device identity: ncclCommInitRank gathers each rank's host and the PCI
 * bus id of its current device (fake_device_identity: FAKECUDA_DEVICE_ID,
 * else the local rank) and, as NCCL does, refuses two ranks on one GPU on
 * every rank with ncclInvalidUsage ("Duplicate GPU detected", printed
 * with NCCL_DEBUG=WARN or INFO as NCCL prints it).
 *
 * Failure on demand: FAKECUDA_NCCL_FAIL=after:N lets this process's first N
 * ncclAllReduce calls sum; the next one is enqueued as an operation that
 * never completes (its stream stops there and a host wait behind it never
 * returns, as when a peer died inside the collective), and from then on
 * ncclCommGetAsyncError reports ncclRemoteError and further collectives
 * return it (NCCL checks a communicator's error at every launch).
 * FAKECUDA_NCCL_FAIL=hang:N is the same sum that never ends without any
 * error reported (a peer alive but stuck): only a bound ends the wait.
 * ncclCommAbort ends the stuck operations (without summing) and frees the
 * communicator, without talking to the other ranks.
 *
 * Only what train calls: ncclFloat sums, no groups, no other collectives.
 */
#define _GNU_SOURCE
#ifdef TRAIN_MPI
#include <mpi.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "tests/fakecuda/runtime/internal.h"

#define FAKE_ID_MAGIC "fakenccl"

struct ncclComm {
    MPI_Comm comm;
    int rank, nranks;
    ncclResult_t async; /* the asynchronous error (FAKECUDA_NCCL_FAIL) */
    int finalized;
};

static unsigned long allreduces, aborts;
static fake_nccl_stats ran;

unsigned long fake_nccl_allreduces(void) { return allreduces; }

void fake_nccl_overlap(fake_nccl_stats *st) { *st = ran; }

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error (fake NCCL)";
    case ncclInvalidArgument: return "invalid argument (fake NCCL)";
    case ncclInvalidUsage: return "invalid usage (fake NCCL)";
    case ncclRemoteError: return "remote process exited or there was a network error (fake NCCL)";
    case ncclInProgress: return "NCCL operation in progress (fake NCCL)";
    default: return "error (fake NCCL)";
    }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0, sizeof *id);
    memcpy(id->internal, FAKE_ID_MAGIC, sizeof FAKE_ID_MAGIC);
    uint64_t v = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL) ^ (uint64_t)clock();
    memcpy(id->internal + 16, &v, sizeof v);
    return ncclSuccess;
}

/* NCCL's check at init (init.cc): two ranks of one host on the same GPU
 * ("Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000"),
 * found by every rank from the same gathered table */
typedef struct peer_info {
    char host[64];
    char bus[32];
} peer_info;

static int duplicate_gpu(int rank, int nranks)
{
    peer_info me = {{0}, {0}};
    gethostname(me.host, sizeof me.host - 1);
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetPCIBusId(me.bus, (int)sizeof me.bus, dev) != cudaSuccess)
        snprintf(me.bus, sizeof me.bus, "?");
    peer_info *all = calloc((size_t)nranks, sizeof *all);
    MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, MPI_COMM_WORLD);
    int dup = 0;
    for (int i = 0; i < nranks && !dup; i++)
        for (int j = 0; j < i && !dup; j++)
            if (!strcmp(all[i].host, all[j].host) && !strcmp(all[i].bus, all[j].bus)) {
                dup = 1;
                const char *dbg = getenv("NCCL_DEBUG");
                if (dbg && (!strcasecmp(dbg, "WARN") || !strcasecmp(dbg, "INFO")) &&
                    (i == rank || j == rank))
                    fprintf(stderr,
                            "%s:%d: NCCL WARN Duplicate GPU detected : rank %d and rank %d both on "
                            "CUDA device %s (fake NCCL)\n",
                            me.host, (int)getpid(), i, j, all[i].bus);
            }
    free(all);
    return dup;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    int mr, ms;
    MPI_Comm_rank(MPI_COMM_WORLD, &mr);
    MPI_Comm_size(MPI_COMM_WORLD, &ms);
    if (memcmp(id.internal, FAKE_ID_MAGIC, sizeof FAKE_ID_MAGIC) != 0 || nranks != ms ||
        rank != mr) {
        fk_violation("ncclCommInitRank", "rank %d of %d (MPI: %d of %d), id %s", rank, nranks, mr,
                     ms, memcmp(id.internal, FAKE_ID_MAGIC, 8) ? "not from ncclGetUniqueId" : "ok");
        return ncclInvalidArgument;
    }
    /* every rank must hold rank 0's id: compare against it */
    ncclUniqueId root = id;
    MPI_Bcast(&root, (int)sizeof root, MPI_BYTE, 0, MPI_COMM_WORLD);
    int same = memcmp(&root, &id, sizeof id) == 0, all;
    MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!all) {
        fk_violation("ncclCommInitRank", "the ranks hold different ids (was rank 0's broadcast?)");
        return ncclInvalidUsage;
    }
    if (duplicate_gpu(rank, ms))
        return ncclInvalidUsage;
    struct ncclComm *c = calloc(1, sizeof *c);
    MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
    c->rank = rank;
    c->nranks = nranks;
    *comm = c;
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    if (!comm)
        return ncclInvalidArgument;
    if (comm->async != ncclSuccess)
        return comm->async;
    comm->finalized = 1;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm)
        return ncclInvalidArgument;
    MPI_Comm_free(&comm->comm);
    free(comm);
    return ncclSuccess;
}

/* ends the communicator's stuck operations (they sum nothing) and frees it
 * locally: no MPI call, the peers may be gone */
ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!comm)
        return ncclInvalidArgument;
    aborts++;
    fk_release_stuck();
    free(comm); /* its MPI communicator is left: freeing it is collective */
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err)
{
    if (!comm || !err)
        return ncclInvalidArgument;
    *err = comm->async;
    return ncclSuccess;
}

unsigned long fake_nccl_aborts(void) { return aborts; }

/* FAKECUDA_NCCL_FAIL=after:N or hang:N: how many sums run before the
 * failure (-1: none), and whether it reports an error */
static long fail_after(int *reported)
{
    const char *v = getenv("FAKECUDA_NCCL_FAIL");
    *reported = v && !strncmp(v, "after:", 6);
    if (!v || (!*reported && strncmp(v, "hang:", 5) != 0))
        return -1;
    return atol(strchr(v, ':') + 1);
}

typedef struct allreduce_op {
    float *buf;
    size_t n;
    MPI_Comm comm;
} allreduce_op;

static void run_allreduce(void *arg)
{
    allreduce_op *op = arg;
    ran.sums++;
    ran.floats += (double)op->n;
    if (fk_running_overtakes_kernels()) {
        ran.overtaking++;
        ran.floats_overtaking += (double)op->n;
    }
    MPI_Allreduce(MPI_IN_PLACE, op->buf, (int)op->n, MPI_FLOAT, MPI_SUM, op->comm);
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t red, ncclComm_t comm, cudaStream_t stream)
{
    const char *api = "ncclAllReduce";
    fk_touched_clear();
    if (!comm || type != ncclFloat || red != ncclSum) {
        fk_violation(api, "only float sums on a live communicator are faked");
        return ncclInvalidArgument;
    }
    if (send != recv) {
        fk_violation(api, "only in-place sums are faked (send %p, recv %p)", send, recv);
        return ncclInvalidArgument;
    }
    if (!fk_dev_range(api, "buffer", recv, count * sizeof(float)))
        return ncclInvalidArgument;
    if (comm->async != ncclSuccess)
        return comm->async;
    int reported;
    long after = fail_after(&reported);
    if (after >= 0 && allreduces == (unsigned long)after) {
        if (reported) /* the peer is gone: this sum never ends */
            comm->async = ncclRemoteError;
        fk_stick_next();
    }
    fk_stream_carries_nccl(stream);
    allreduce_op *op = malloc(sizeof *op);
    *op = (allreduce_op){.buf = recv, .n = count, .comm = comm->comm};
    /* a ring sends and receives 2 (K-1)/K of the buffer per rank */
    size_t moved = 2 * (size_t)(comm->nranks - 1) * count * sizeof(float) / (size_t)comm->nranks;
    if (fk_enqueue_timed(stream, api, run_allreduce, free, op, NULL, 0, FK_ENGINE_LINK,
                         fk_cost_ms(FK_ENGINE_LINK, moved, 0), 0) != cudaSuccess)
        return ncclInvalidUsage;
    allreduces++;
    return ncclSuccess;
}
#endif
