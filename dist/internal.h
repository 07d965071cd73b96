/* internal.h — what dist/'s files share. Not for use outside dist/. */
#ifndef TRAIN_DIST_INTERNAL_H
#define TRAIN_DIST_INTERNAL_H

#include "dist/dist.h"

/* nccl.c (CUDA and MPI builds): the GPU backend's gradient sum, one
 * ncclAllReduce over the slab on the backend's compute stream. create
 * bootstraps the communicator (rank 0's ncclUniqueId broadcast over MPI;
 * a collective) and sets d->nccl; -1 with e when NCCL refuses. */
int dist_nccl_create(dist *d, backend *be, errbuf *e);
void dist_nccl_reduce(void *ctx, float *grads, size_t n); /* ctx: the dist */
void dist_nccl_free(dist *d);

#endif
