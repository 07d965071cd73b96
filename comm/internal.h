/* internal.h — what comm/'s files share. Not for use outside comm/. */
#ifndef TRAIN_DIST_INTERNAL_H
#define TRAIN_DIST_INTERNAL_H

#include "comm/dist.h"

/* nccl.c (CUDA and MPI builds): the GPU backend's gradient sum on NCCL.
 * create bootstraps the communicator (rank 0's ncclUniqueId broadcast over
 * MPI; a collective), sets d->nccl and d->nccl_buckets and m's hooks:
 * buckets summed on a communication stream during backward, or one
 * ncclAllReduce over the slab on the compute stream after it
 * (TRAIN_NCCL_BUCKETS=1); -1 with e when NCCL or CUDA refuses. */
int dist_nccl_create(dist *d, model *m, errbuf *e);
void dist_nccl_free(dist *d);
/* dist_comm_device for the NCCL path */
double dist_nccl_comm_device(dist *d);

#endif
