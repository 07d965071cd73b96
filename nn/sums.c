/* sums.c — a training step's gradient across chunks and ranks (model.h's
 * model_split and model_dist): one pass, or canonical chunk trees (a pass
 * per chunk, or the backend told the chunks: model_groups_cheap), the zero
 * gradient of an empty slice, the ranks' sum after backward or in buckets
 * handed over during it (model_plan_buckets).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/internal.h"
#include "nn/kernels.h"

/* where the slab's gradients of layers below i end: once layers i and up
 * are through backward, [grads_end_below(m, i), nparams) is final (gaps and
 * running statistics are never written) */
static size_t grads_end_below(const model *m, int i)
{
    size_t end = 0;
    for (int j = 0; j < i; j++) {
        const model_layer *L = &m->layers[j];
        int ts[2] = {L->w_tensor, L->b_tensor}; /* bn's scale and shift too */
        for (int k = 0; k < 2; k++) {
            if (ts[k] < 0)
                continue;
            const model_tensor *t = &m->tensors[ts[k]];
            if (t->offset + t->n > end)
                end = t->offset + t->n;
        }
    }
    return end;
}

int model_plan_buckets(model *m, int want)
{
    model_dist *d = &m->dist;
    want = want < 1 ? 1 : want > MODEL_MAX_BUCKETS ? MODEL_MAX_BUCKETS : want;
    size_t target = (m->nparams + (size_t)want - 1) / (size_t)want, sent = m->nparams;
    d->nbuckets = 0;
    d->bucket_off[0] = sent;
    for (int i = m->nlayers - 1; i >= 0; i--) {
        size_t ready = grads_end_below(m, i);
        if (ready < sent && (sent - ready >= target || i == 0)) {
            d->bucket_after[d->nbuckets] = i;
            d->bucket_off[++d->nbuckets] = ready;
            sent = ready;
        }
    }
    return d->nbuckets;
}

/* Bucket k of the plan to dist.reduce_range */
static void bucket_send(model *m, int k)
{
    const model_dist *d = &m->dist;
    size_t lo = d->bucket_off[k + 1];
    d->reduce_range(d->ctx, m->grads, lo, d->bucket_off[k] - lo);
}

/* after layer i's backward: the buckets it completes (all from *next on
 * that are due after layer i) */
void nn_buckets_due(model *m, int i, int *next)
{
    while (*next < m->dist.nbuckets && m->dist.bucket_after[*next] == i)
        bucket_send(m, (*next)++);
}

/* A rank with nothing in this batch (or chunk): a zero gradient into the
 * sum. Copied on the device from a slab of zeros uploaded once, so an empty
 * chunk does not wait for the device each step (an upload does). */
static void zero_grads(model *m)
{
    const backend_ops *o = m->be->ops;
    if (!m->zeros) {
        float *zero = xcalloc(m->nparams, sizeof(float));
        m->zeros = o->alloc(m->be, m->nparams * sizeof(float));
        o->upload(m->be, m->zeros, zero, m->nparams * sizeof(float));
        free(zero);
    }
    o->copy(m->be, m->grads, m->zeros, m->nparams);
}

/* Chunk tree (model_split.nchunks): the gradient now in m->grads is the
 * next leaf; sums it into the levels like a binary counter, so 2^k leaves
 * end as one balanced tree in level k. */
static void tree_push(model *m, int *used)
{
    backend *be = m->be;
    size_t n = m->nparams;
    const float *cur = m->grads;
    int lv = 0;
    for (; *used >> lv & 1; lv++) { /* older (left) + newer (right) */
        be->ops->add(be, m->tree[lv], m->tree[lv], cur, n);
        cur = m->tree[lv];
        *used &= ~(1 << lv);
    }
    if (!m->tree[lv])
        m->tree[lv] = be->ops->alloc(be, n * sizeof(float));
    be->ops->copy(be, m->tree[lv], cur, n);
    *used |= 1 << lv;
}

/* The gradient chunk by chunk (b->split), the tree's root into grads.
 * Each chunk's losses and predictions land at its offset, so the step's
 * results are read back as one batch. -1 when cancelled. */
static int chunked_gradient(model *m, const model_batch *b)
{
    const model_split *sp = &b->split;
    size_t sample = (size_t)m->C * m->H * m->W;
    float *loss = m->loss;
    int32_t *pred = m->pred;
    int used = 0, off = 0, rc = 0;
    /* the batch's labels on the device once, each chunk reading its own
     * part of them: the stager's copy, else one upload for the batch (an
     * upload per chunk waited for the device every chunk) */
    const int32_t *dlabels = b->dev_labels;
    if (!dlabels && b->B > 0) {
        nn_check_batch(m, b->labels, b->B, "model_train_enqueue");
        m->be->ops->upload(m->be, m->labels, b->labels, (size_t)b->B * sizeof(int32_t));
        dlabels = m->labels;
    }
    for (int i = 0; i < sp->nchunks && rc == 0; i++) {
        int bc = sp->chunk[i];
        if (bc == 0) {
            zero_grads(m);
        } else {
            nn_check_batch(m, b->labels + off, bc, "model_train_enqueue");
            m->loss = loss + off;
            m->pred = pred + off;
            rc = nn_forward_loss(m, b->x + (size_t)off * sample, b->labels + off, dlabels + off, bc,
                                 1, sp->global_batch) != 0 ||
                 nn_backward(m, bc) != 0;
            m->loss = loss;
            m->pred = pred;
        }
        tree_push(m, &used);
        off += bc;
    }
    if (rc)
        return -1;
    int top = 0;
    while (used >> top != 1) /* a power of two of leaves: one level left */
        top++;
    m->be->ops->copy(m->be, m->grads, m->tree[top], m->nparams);
    return 0;
}

int model_groups_cheap(const model *m)
{
    if (!m->be->ops->batch_groups)
        return 0;
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i].kind == LAYER_BN) /* its statistics are the whole batch's */
            return 0;
    return 1;
}

/* The chunk tree computed by the backend (model_groups_cheap): one
 * forward and backward over the batch, the backend told the chunks. -1
 * when cancelled. */
static int grouped_gradient(model *m, const model_batch *b)
{
    if (b->B == 0) { /* every chunk empty: the tree of zeros */
        zero_grads(m);
        return 0;
    }
    nn_check_batch(m, b->labels, b->B, "model_train_enqueue");
    backend *be = m->be;
    be->ops->batch_groups(be, b->split.chunk, b->split.nchunks);
    int rc =
        nn_forward_loss(m, b->x, b->labels, b->dev_labels, b->B, 1, b->split.global_batch) != 0 ||
        nn_backward(m, b->B) != 0;
    be->ops->batch_groups(be, NULL, 0);
    return rc ? -1 : 0;
}

/* forward and backward of a training step into m->grads, the ranks' sum
 * included (model.dist); -1 when cancelled */
int nn_train_gradient(model *m, const model_batch *b)
{
    int B = b->B, nchunks = b->split.nchunks;
    if (nchunks < 0 || nchunks > MODEL_MAX_CHUNKS) {
        fprintf(stderr, "train: model_train_enqueue: %d chunks (internal error)\n", nchunks);
        exit(1);
    }
    /* buckets during backward (model_dist.reduce_range), else one sum after */
    int overlap = m->dist.reduce_range && m->dist.nbuckets > 0 && nchunks == 0;
    int next = 0, rc = 0;
    if (nchunks > 0 && model_groups_cheap(m)) {
        rc = grouped_gradient(m, b);
    } else if (nchunks > 0) {
        rc = chunked_gradient(m, b);
    } else if (B == 0 && m->dist.reduce) {
        zero_grads(m); /* the buckets follow below: the others' calls, all at once */
    } else {
        nn_check_batch(m, b->labels, B, "model_train_enqueue");
        /* the flag never goes back to 0, so an operation cut short anywhere
         * before here is seen here, before the update */
        rc = nn_forward_loss(m, b->x, b->labels, b->dev_labels, B, 1, b->split.global_batch) != 0 ||
             nn_backward_overlap(m, B, overlap ? &next : NULL) != 0;
    }
    if (overlap) {
        /* every rank makes the same calls each step, cancelled or not, so
         * the collectives of the ranks stay matched */
        while (next < m->dist.nbuckets)
            bucket_send(m, next++);
        m->dist.reduce_wait(m->dist.ctx);
    } else if (m->dist.reduce && rc == 0) {
        m->dist.reduce(m->dist.ctx, m->grads, m->nparams);
    }
    return rc ? -1 : 0;
}
