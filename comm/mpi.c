/* mpi.c — dist.h on MPI (built when MPI is found; comm/single.c otherwise).
 *
 * Every collective runs on MPI_COMM_WORLD from the main thread only
 * (MPI_THREAD_FUNNELED: the CPU backend's compute threads and the NVML
 * sampler never call MPI). Without a launcher nothing here calls MPI at all.
 */
#ifdef TRAIN_MPI
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/internal.h"

int dist_start(dist *d, errbuf *e)
{
    if (!d->launched)
        return 0;
    int provided;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return errf(e, "MPI_Init failed (rank %d of %d from the launcher)", d->rank, d->size);
    d->active = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &d->local_rank);
    MPI_Comm_size(node, &d->local_size);
    d->node = d->rank; /* the node's name: its local rank 0's rank in the job */
    MPI_Bcast(&d->node, 1, MPI_INT, 0, node);
    MPI_Comm_free(&node);
    if (gethostname(d->host, sizeof d->host) != 0)
        snprintf(d->host, sizeof d->host, "?");
    d->host[sizeof d->host - 1] = '\0';
    if (d->rank == 0)
        d->hosts = xcalloc((size_t)d->size, DIST_HOST_MAX);
    MPI_Gather(d->host, DIST_HOST_MAX, MPI_CHAR, d->hosts, DIST_HOST_MAX, MPI_CHAR, 0,
               MPI_COMM_WORLD);
    return 0;
}

const char *dist_host_of(const dist *d, int r)
{
    if (!d->hosts || r < 0 || r >= d->size)
        return d->rank == r ? d->host : "";
    return d->hosts + (size_t)r * DIST_HOST_MAX;
}

/* Every agreement is the same non-blocking collective (a blocking and a
 * non-blocking collective do not match in MPI), so that a rank may wait
 * in one asleep (dist_agree_idle) while another offers its status with
 * dist_agree (dist_end's, after a failure, included). */
static int agree(dist *d, int status, int idle)
{
    if (!d->active)
        return status;
    int worst = status;
    MPI_Request req;
    MPI_Iallreduce(&status, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req);
    if (idle) {
        int done = 0;
        struct timespec ms = {0, 1000 * 1000};
        while (MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done)
            nanosleep(&ms, NULL);
    } else {
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    if (worst != 0)
        d->over = 1;
    return worst;
}

int dist_agree(dist *d, int status) { return agree(d, status, 0); }

int dist_agree_idle(dist *d, int status) { return agree(d, status, 1); }

void dist_sum(dist *d, double *v, int n)
{
    if (d->active)
        MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

void dist_gather(dist *d, const double *v, int n, double *all)
{
    if (!d->active) {
        memcpy(all, v, sizeof(double) * (size_t)n);
        return;
    }
    MPI_Gather(v, n, MPI_DOUBLE, all, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

void dist_allgather(dist *d, const void *mine, size_t bytes, void *all)
{
    if (!d->active) {
        memcpy(all, mine, bytes);
        return;
    }
    MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
}

/* ---------------------------------------------------------------- gradients */

void dist_canonical(dist *d) { d->canonical = 1; }

/* the tree's top levels: at level k, rank r and r ^ 2^k hold the sums of
 * adjacent subtrees and both compute left + right */
static void reduce_doubling(dist *d, float *g, size_t n)
{
    if (!d->scratch)
        d->scratch = xmalloc(n * sizeof(float));
    float *other = d->scratch;
    for (int mask = 1; mask < d->size; mask <<= 1) {
        int partner = d->rank ^ mask;
        MPI_Sendrecv(g, (int)n, MPI_FLOAT, partner, 0, other, (int)n, MPI_FLOAT, partner, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (d->rank < partner)
            for (size_t i = 0; i < n; i++)
                g[i] = g[i] + other[i];
        else
            for (size_t i = 0; i < n; i++)
                g[i] = other[i] + g[i];
    }
}

/* model.dist.reduce on the CPU backend: the slab is host memory */
static void reduce_host(void *ctx, float *grads, size_t n)
{
    dist *d = ctx;
    double t0 = now_sec();
    if (d->canonical)
        reduce_doubling(d, grads, n);
    else
        MPI_Allreduce(MPI_IN_PLACE, grads, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    d->comm_s += now_sec() - t0;
}

/* rank 0's slab p (device, n floats) to every rank, through host memory */
static void bcast_slab(backend *be, float *p, size_t n)
{
    if (be->host_visible) {
        MPI_Bcast(p, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
        return;
    }
    float *h = xmalloc(n * sizeof(float));
    be->ops->download(be, h, p, n * sizeof(float));
    MPI_Bcast(h, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    be->ops->upload(be, p, h, n * sizeof(float));
    free(h);
}

int dist_attach(dist *d, model *m, errbuf *e)
{
    if (!d->active || d->size < 2)
        return 0;
    if (m->nparams > (size_t)0x7fffffff)
        return errf(e, "%zu parameters: more than one MPI call can carry", m->nparams);
    bcast_slab(m->be, m->params, m->nparams);
    bcast_slab(m->be, m->momentum, m->nparams);
    m->dist.ctx = d;
    if (m->be->host_visible) {
        m->dist.reduce = reduce_host;
    } else {
#ifdef TRAIN_CUDA
        if (dist_nccl_create(d, m, e) != 0)
            return -1;
#else
        return errf(e, "internal: a device backend in a build without CUDA");
#endif
    }
    d->reduced_bytes = m->nparams * sizeof(float);
    return 0;
}

double dist_comm_device(dist *d)
{
#ifdef TRAIN_CUDA
    if (d->nccl)
        return dist_nccl_comm_device(d);
#endif
    (void)d;
    return NAN;
}

typedef struct gpu_slot {
    int node, device;
    char bus[32];
} gpu_slot;

int dist_check_gpus(dist *d, const char *bus_id, int device, char *msg, size_t len)
{
    msg[0] = '\0';
    if (!d->active || d->size < 2)
        return 0;
    gpu_slot mine = {.node = d->node, .device = device};
    snprintf(mine.bus, sizeof mine.bus, "%s", bus_id ? bus_id : "");
    gpu_slot *all = xcalloc((size_t)d->size, sizeof *all);
    MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE,
                  MPI_COMM_WORLD);
    char host[DIST_HOST_MAX] = "";
    int a = -1, b = -1, count = 0;
    for (int i = 0; i < d->size; i++)
        for (int j = 0; j < i && all[i].bus[0]; j++)
            if (all[j].node == all[i].node && !strcmp(all[j].bus, all[i].bus)) {
                if (a < 0) {
                    a = j;
                    b = i;
                }
                count++;
            }
    if (a >= 0) { /* the node's name: rank a's host, sent by rank a to all */
        if (d->rank == a)
            snprintf(host, sizeof host, "%s", d->host);
        MPI_Bcast(host, (int)sizeof host, MPI_CHAR, a, MPI_COMM_WORLD);
        snprintf(msg, len,
                 "ranks %d and %d on node %s share GPU cuda:%d (PCI %s)%s: NCCL refuses two "
                 "ranks on one GPU (\"Duplicate GPU detected\"); start at most as many ranks "
                 "per node as it has GPUs, or give each rank its own with CUDA_VISIBLE_DEVICES",
                 a, b, host, all[a].device, all[a].bus,
                 count > 1 ? " (and more ranks share GPUs)" : "");
    }
    free(all);
    return a >= 0;
}

double dist_take_comm(dist *d)
{
    double s = d->comm_s;
    d->comm_s = 0;
    return s;
}

/* ---------------------------------------------------------------- the end */

typedef struct outcome {
    int status;
    char msg[ERR_MAX];
} outcome;

int dist_end(dist *d, int status, const char *msg, char *out, size_t len)
{
    if (!d->active) {
        snprintf(out, len, "%s", status ? msg : "");
        return status;
    }
    int agreed = d->over ? status : dist_agree(d, status);
    outcome mine = {.status = status};
    snprintf(mine.msg, sizeof mine.msg, "%s", msg ? msg : "");
    outcome *all = d->rank == 0 ? xcalloc((size_t)d->size, sizeof *all) : NULL;
    MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, 0,
               MPI_COMM_WORLD);
    int first = -1;
    /* the first rank that failed for its own reason (it has a message);
     * the others stopped because it did */
    for (int r = 0; all && r < d->size && first < 0; r++)
        if (all[r].status != 0 && all[r].msg[0])
            first = r;
    int final = first >= 0 ? all[first].status : agreed;
    out[0] = '\0';
    if (first >= 0 && d->size > 1)
        snprintf(out, len, "rank %d (%s): %s", first, dist_host_of(d, first), all[first].msg);
    else if (first >= 0)
        snprintf(out, len, "%s", all[first].msg);
    free(all);
    MPI_Bcast(&final, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return final;
}

void dist_stop(dist *d)
{
#ifdef TRAIN_CUDA
    if (d->nccl)
        dist_nccl_free(d);
#endif
    free(d->hosts);
    d->hosts = NULL;
    free(d->scratch);
    d->scratch = NULL;
    if (d->active)
        MPI_Finalize();
    d->active = 0;
}
#endif
