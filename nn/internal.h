/* internal.h — what nn/model.c, step.c and sums.c share of a model's step.
 * Private to nn/. */
#ifndef TRAIN_NN_INTERNAL_H
#define TRAIN_NN_INTERNAL_H

#include <stdint.h>

#include "nn/model.h"

static inline size_t layer_out_size(const model_layer *L)
{
    return (size_t)L->out_c * L->out_h * L->out_w;
}

static inline size_t layer_in_size(const model_layer *L)
{
    return (size_t)L->in_c * L->in_h * L->in_w;
}

/* SGD groups: with decay_weights_only the weights come first, then biases
 * and bn parameters, then running statistics, so SGD is two calls;
 * otherwise tensors lie in layer order (the layout of checkpoints written
 * before batch norm existed). */
static inline int tensor_group(const model *m, const model_tensor *t)
{
    if (!m->decay_weights_only)
        return 0;
    return t->role == TENSOR_WEIGHT ? 0 : t->role == TENSOR_STAT ? 2 : 1;
}

/* Exits naming fn when B is outside 0..max_batch or a label outside
 * 0..nclasses-1 (host labels: checked before any device work). */
void nn_check_batch(const model *m, const int32_t *labels, int B, const char *fn);
/* Normalise x, every layer forward (batch norm with the batch's
 * statistics when train, else the running ones), softmax cross-entropy
 * averaged over global_batch (0: B) samples; labels from dlabels on the
 * device, else uploaded from the host's. -1 when cancelled. */
int nn_forward_loss(model *m, const uint8_t *x, const int32_t *labels, const int32_t *dlabels,
                    int B, int train, int global_batch);
/* Every layer backward from dlogits; with next, the buckets of the plan
 * handed to dist.reduce_range as they complete (nn_buckets_due), *next the
 * first not handed yet. -1 when cancelled. */
int nn_backward_overlap(model *m, int B, int *next);
int nn_backward(model *m, int B);
/* After layer i's backward: the buckets it completes (sums.c). */
void nn_buckets_due(model *m, int i, int *next);
/* A training step's gradient into m->grads, summed as b->split and
 * m->dist say (sums.c). -1 when cancelled. */
int nn_train_gradient(model *m, const model_batch *b);

#endif
