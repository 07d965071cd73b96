/* dist.h — data-parallel ranks: which of the K processes a launcher
 * (mpirun, srun, any MPI launcher) started this one is, the few collectives
 * the epoch loop needs, and the gradient sum handed to the model as its
 * hook (model.dist).
 *
 * Without a launcher this is rank 0 of 1, MPI is never initialised, and
 * every call below returns at once: the program is exactly the
 * one-process program. Built without MPI (make MPI=0), a launch with more
 * than one rank is refused by dist_from_env.
 *
 * Lockstep. Every rank calls the collectives in the same order; a rank
 * that fails must still meet the others at their next collective, so the
 * loop calls dist_agree before each step and before each pass's totals,
 * and a rank leaving for its own reason (a dead worker, a bad image, a
 * signal, a non-finite loss) says so there: every rank then stops at the
 * same agreement, and nobody waits in a collective for a rank that left.
 * dist_end, the last collective, carries the failing rank's message to
 * rank 0, which prints it once, naming the rank and host.
 *
 * Gradients: each rank's loss is scaled by 1 / (global batch), the slab is
 * summed over the ranks (MPI_Allreduce in place after backward on the CPU
 * backend; on the GPU backend ncclAllReduce of a few buckets of the slab
 * on a communication stream, each as soon as backward has written it, so
 * the sums overlap the rest of backward; its communicator bootstrapped
 * from an ncclUniqueId broadcast over MPI), and
 * every rank applies the same update. Parameters start identical (rank 0's
 * are broadcast once), so they stay identical.
 */
#ifndef TRAIN_DIST_H
#define TRAIN_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "common/util.h"
#include "nn/model.h"

#define DIST_HOST_MAX 64
/* gradient buckets summed during backward on GPUs, unless TRAIN_NCCL_BUCKETS
 * (1 to MODEL_MAX_BUCKETS) says otherwise; 1: one sum after backward */
#define DIST_NCCL_BUCKETS 4

typedef struct dist {
    int launched;               /* started by an MPI launcher (even with one rank) */
    int rank, size;             /* in the job (0 of 1 without a launcher) */
    int local_rank, local_size; /* on this node (shared-memory communicator) */
    int node;                   /* the job rank of the node's local rank 0 */
    char host[DIST_HOST_MAX];
    char job[48]; /* the launcher's job id (file-name safe), or its pid: one per job on a node */
    int active;   /* MPI initialised: the collectives below talk to the others */
    int over;     /* an agreement ended the run for every rank */
    /* accounting, taken by dist_take_comm */
    double comm_s;          /* seconds inside gradient sums (incl. waiting for a slower rank) */
    uint64_t reduced_bytes; /* bytes of gradient summed per step (the slab) */
    void *nccl;             /* the GPU's communicator state (comm/nccl.c), or NULL */
    int nccl_buckets;       /* its sums per step: 1 after backward, else during it */
    char *hosts;            /* rank 0: every rank's host name, DIST_HOST_MAX each */
    int canonical;          /* dist_canonical */
    float *scratch;         /* its receive buffer */
} dist;

/* From the launcher's environment only (no MPI call, so it can run before
 * the loader forks): rank, size and local rank of Open MPI, PMIx, PMI
 * (MPICH, Intel MPI) or Slurm. -1 with e when launched with several ranks
 * but built without MPI. */
int dist_from_env(dist *d, errbuf *e);

/* MPI_Init, the node's shared-memory communicator (local rank and size),
 * the host name. Call after the loader has forked (its processes never
 * see MPI) and before the backend is created (the GPU is chosen from the
 * local rank). No-op without a launcher. */
int dist_start(dist *d, errbuf *e);

/* Every rank offers its status (0 OK, else an exit status); returns the
 * highest offered. A non-zero result sets d->over. */
int dist_agree(dist *d, int status);
/* The same, for a rank that may wait long (seconds: another rank builds
 * the node's preload cache): it sleeps between looks instead of spinning
 * on a core the builder needs. Matches dist_agree on the other ranks. */
int dist_agree_idle(dist *d, int status);

/* v[0..n) summed over the ranks, in place, on every rank. */
void dist_sum(dist *d, double *v, int n);
/* every rank's v[0..n) to rank 0, rank r's at all[r*n ..]; all is
 * size * n doubles (ignored on other ranks) */
void dist_gather(dist *d, const double *v, int n, double *all);
/* every rank's `bytes` bytes at mine to every rank, rank r's at
 * all + r * bytes (all: size * bytes); one process: a copy */
void dist_allgather(dist *d, const void *mine, size_t bytes, void *all);
/* the host name of rank r, on rank 0 (after dist_start); "" elsewhere */
const char *dist_host_of(const dist *d, int r);

/* The model's data parallelism: rank 0's parameters (and momentum) to
 * every rank, then m->dist pointed at this dist's gradient sum (NCCL for a
 * GPU backend when built with it, else MPI through host memory). No-op
 * with one rank. */
int dist_attach(dist *d, model *m, errbuf *e);

/* Sum the gradients as the top levels of a fixed binary tree (recursive
 * doubling: rank r with r^1, then r^2, ...; the size a power of 2) instead
 * of MPI's own algorithm, whose order depends on the size: with the
 * model's chunk tree (model_dist.nchunks) the gradient then has the same
 * bits for any number of ranks. The CPU path only (NCCL picks its own). */
void dist_canonical(dist *d);

/* Seconds spent in gradient sums since the last call: the host's time in
 * the calls (on a GPU, enqueueing them). */
double dist_take_comm(dist *d);

/* On a GPU (NCCL): the seconds the device spent in the gradient sums of the
 * steps enqueued since the last call, from timing events around each sum
 * on the stream that runs it (waiting inside the sum for a slower rank
 * included); waits for the last step's sums first, bounded like every such
 * wait (TRAIN_NCCL_TIMEOUT: on an NCCL error or past it, this rank aborts
 * the communicator, says why and exits 1). NaN without NCCL. */
double dist_comm_device(dist *d);

/* Before NCCL starts: every rank gives the PCI bus id of its GPU ("" for
 * none) and its device index; 1 with msg (every rank the same) when two
 * ranks of one node would share a GPU, which NCCL refuses ("Duplicate GPU
 * detected"); 0 otherwise. A collective. */
int dist_check_gpus(dist *d, const char *bus_id, int device, char *msg, size_t len);

/* The end of the run, on every rank (the last collective): status is this
 * rank's outcome and msg its reason (without "train: "). Returns the status
 * the whole job exits with (the first failing rank's), and in out what this
 * rank prints: on rank 0 the first failing rank's message, prefixed with
 * "rank R (HOST): " when there are several ranks; nothing on the others.
 * Without a launcher: status and msg unchanged. */
int dist_end(dist *d, int status, const char *msg, char *out, size_t len);

/* MPI_Finalize and free; safe on a dist that never started. */
void dist_stop(dist *d);

/* "NCCL 2.28.9", the library loaded, into buf; warn (may be NULL) says when
 * it is older than the headers built with, else "". NULL where this build
 * has no NCCL (no MPI, or no CUDA). */
const char *dist_nccl_version(char *buf, size_t len, char *warn, size_t wlen);

#endif
