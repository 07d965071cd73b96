/* step.c — a model's steps (model.h): convolution plans per batch size,
 * forward with the loss, backward (fused bn+relu, gradients flowing down
 * the ping-pong buffers, an add's straight into its shortcut's), SGD, and
 * the pending steps' results read back late. How a training step's
 * gradient is made and summed over chunks and ranks is sums.c's.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/internal.h"
#include "nn/kernels.h"

static void *layer_plan(model *m, model_layer *L, const conv_shape *cs)
{
    int lru = 0;
    m->tick++;
    for (int s = 0; s < MODEL_PLAN_SLOTS; s++) {
        if (L->plans[s].B == cs->B) {
            L->plans[s].used = m->tick;
            return L->plans[s].plan;
        }
        if (L->plans[s].used < L->plans[lru].used)
            lru = s;
    }
    backend *be = m->be;
    if (L->plans[lru].B)
        backend_conv_plan_free(be, L->plans[lru].plan);
    L->plans[lru].B = cs->B;
    L->plans[lru].plan = backend_conv_plan(be, cs);
    L->plans[lru].used = m->tick;
    return L->plans[lru].plan;
}

static void layer_conv_shape(const model_layer *L, int B, conv_shape *cs)
{
    conv_shape_init(cs, B, L->in_c, L->in_h, L->in_w, L->k, L->r, L->r, L->stride, L->pad);
}

int model_prepare_batches(model *m, const int *sizes, int n)
{
    int done[MODEL_PLAN_SLOTS], nd = 0;
    for (int k = 0; k < n; k++) {
        int B = sizes[k], seen = 0;
        for (int d = 0; d < nd; d++)
            seen |= done[d] == B;
        if (seen || B < 1 || B > m->max_batch || nd == MODEL_PLAN_SLOTS)
            continue;
        done[nd++] = B;
        for (int i = 0; i < m->nlayers; i++) {
            model_layer *L = &m->layers[i];
            if (L->kind != LAYER_CONV)
                continue;
            conv_shape cs;
            layer_conv_shape(L, B, &cs);
            layer_plan(m, L, &cs);
        }
    }
    return nd;
}

static float *tensor_ptr(float *base, const model *m, int t) { return base + m->tensors[t].offset; }

void nn_check_batch(const model *m, const int32_t *labels, int B, const char *fn)
{
    if (B < 1 || B > m->max_batch) {
        fprintf(stderr, "train: %s: batch of %d, the model was made for 1 to %d (internal error)\n",
                fn, B, m->max_batch);
        exit(1);
    }
    for (int b = 0; b < B; b++)
        if (labels[b] < 0 || labels[b] >= m->nclasses) {
            fprintf(stderr, "train: %s: label %d of sample %d is outside 0..%d (internal error)\n",
                    fn, (int)labels[b], b, m->nclasses - 1);
            exit(1);
        }
}

/* the output layer i reads (-1: the normalised input) */
static float *out_of(model *m, int i) { return i < 0 ? m->x : m->layers[i].out; }

static void layer_pool_shape(const model_layer *L, int B, maxpool_shape *ps)
{
    maxpool_shape_init_k(ps, B, L->in_c, L->in_h, L->in_w, L->r, L->stride, L->pad);
}

/* forward runs the fused ops (model_layer.fuse_bn) */
static int fuse_forward(const model *m, int train)
{
    const backend_ops *o = m->be->ops;
    return !m->no_fuse &&
           (train ? o->bn_relu_forward_train != NULL : o->bn_relu_forward_infer != NULL);
}

/* relu L with its bn (and add): out = relu(bn(x) (+ the add's other operand)) */
static void bn_relu_forward(model *m, model_layer *L, int B, int train)
{
    backend *be = m->be;
    const model_layer *S = &m->layers[L->fuse_bn];
    const float *x = out_of(m, S->src);
    const float *res = L->fuse_add >= 0 ? out_of(m, m->layers[L->fuse_add].src2) : NULL;
    float *p = m->params, *sc = tensor_ptr(p, m, S->w_tensor), *sh = tensor_ptr(p, m, S->b_tensor);
    float *rm = tensor_ptr(p, m, S->rm_tensor), *rv = tensor_ptr(p, m, S->rv_tensor);
    int HW = S->in_h * S->in_w;
    if (train)
        be->ops->bn_relu_forward_train(be, L->out, S->save_mean, S->save_invstd, rm, rv, x, res, sc,
                                       sh, B, S->in_c, HW, MODEL_BN_MOMENTUM, MODEL_BN_EPS);
    else
        be->ops->bn_relu_forward_infer(be, L->out, x, res, sc, sh, rm, rv, B, S->in_c, HW,
                                       MODEL_BN_EPS);
}

static void layer_forward(model *m, model_layer *L, int B, int train, int fused)
{
    backend *be = m->be;
    const backend_ops *o = be->ops;
    const float *in = out_of(m, L->src);
    float *out = L->out, *p = m->params;
    size_t n = (size_t)B * layer_out_size(L);
    if (fused && L->fused_into >= 0)
        return; /* the relu it feeds runs it */
    if (fused && L->fuse_bn >= 0) {
        bn_relu_forward(m, L, B, train);
        return;
    }
    switch (L->kind) {
    case LAYER_CONV: {
        conv_shape cs;
        layer_conv_shape(L, B, &cs);
        o->conv_forward(be, layer_plan(m, L, &cs), out, in, tensor_ptr(p, m, L->w_tensor),
                        L->b_tensor < 0 ? NULL : tensor_ptr(p, m, L->b_tensor), &cs);
        break;
    }
    case LAYER_RELU: o->relu_forward(be, out, in, n); break;
    case LAYER_MAXPOOL: {
        maxpool_shape ps;
        layer_pool_shape(L, B, &ps);
        o->maxpool_forward(be, out, in, &ps);
        break;
    }
    case LAYER_FLATTEN: break;
    case LAYER_GAP: o->gap_forward(be, out, in, B, L->in_c, L->in_h * L->in_w); break;
    case LAYER_FC:
        o->fc_forward(be, out, in, tensor_ptr(p, m, L->w_tensor), tensor_ptr(p, m, L->b_tensor), B,
                      L->in_c, L->out_c);
        break;
    case LAYER_BN: {
        int HW = L->in_h * L->in_w;
        float *sc = tensor_ptr(p, m, L->w_tensor), *sh = tensor_ptr(p, m, L->b_tensor);
        float *rm = tensor_ptr(p, m, L->rm_tensor), *rv = tensor_ptr(p, m, L->rv_tensor);
        if (train)
            o->bn_forward_train(be, out, L->save_mean, L->save_invstd, rm, rv, in, sc, sh, B,
                                L->in_c, HW, MODEL_BN_MOMENTUM, MODEL_BN_EPS);
        else
            o->bn_forward_infer(be, out, in, sc, sh, rm, rv, B, L->in_c, HW, MODEL_BN_EPS);
        break;
    }
    case LAYER_ADD: o->add(be, out, in, out_of(m, L->src2), n); break;
    }
}

/* normalise, every layer forward (batch norm with the batch's statistics
 * when train, else the running ones), softmax cross-entropy; -1 when the
 * backend was cancelled on the way (the outputs are then undefined) */
int nn_forward_loss(model *m, const uint8_t *x, const int32_t *labels, const int32_t *dlabels,
                    int B, int train, int global_batch)
{
    backend *be = m->be;
    const backend_ops *o = be->ops;
    /* labels the stager copied with the batch (dlabels) are on the device
     * already; an upload here would wait for the copy engine and the host */
    if (!dlabels) {
        o->upload(be, m->labels, labels, (size_t)B * sizeof(int32_t));
        dlabels = m->labels;
    }
    o->normalize_u8(be, m->x, x, B, m->C, m->H * m->W, m->mean, m->std);
    int fused = fuse_forward(m, train);
    for (int i = 0; i < m->nlayers; i++) {
        layer_forward(m, &m->layers[i], B, train, fused);
        if (backend_cancelled(be))
            return -1;
    }
    /* the mean over the global batch when the ranks split it (model_split) */
    int over = train && global_batch > 0 ? global_batch : B;
    o->softmax_xent(be, m->dlogits, m->loss, m->pred, m->layers[m->nlayers - 1].out, dlabels, B,
                    m->nclasses, 1.0f / (float)over);
    return backend_cancelled(be) ? -1 : 0;
}

/* An add's gradient is also the gradient of its second operand: when it
 * is the first part that operand's gacc gets, it can be written there
 * directly and the add passes it on without a copy (grad_pass). Only when
 * the first operand is the layer just below and consumes the gradient
 * right away (not an add or flatten that would hand the buffer further
 * down while other parts are added into it). NULL when not. */
static float *add_grad_in_place(model *m, int a, const float *g)
{
    const model_layer *A = &m->layers[a];
    if (A->src2 < 0 || A->src != a - 1 || A->src == A->src2)
        return NULL;
    const model_layer *S = &m->layers[A->src], *T = &m->layers[A->src2];
    if (S->kind == LAYER_ADD || S->kind == LAYER_FLATTEN)
        return NULL;
    if (!T->need_grad || !T->gacc || T->gacc_set || T->gacc == g)
        return NULL;
    return T->gacc;
}

/* Where a layer writes the gradient of its input s: NULL when s needs none;
 * s's gacc for the first part it gets, gtmp for a later one (added by
 * grad_done); an add's second operand's gacc (add_grad_in_place); else the
 * ping-pong buffer that is not g. */
static float *grad_dst(model *m, int s, const float *g)
{
    if (s < 0 || !m->layers[s].need_grad)
        return NULL;
    const model_layer *S = &m->layers[s];
    if (S->gacc)
        return S->gacc_set ? m->gtmp : S->gacc;
    float *in_place = S->kind == LAYER_ADD ? add_grad_in_place(m, s, g) : NULL;
    if (in_place)
        return in_place;
    return g == m->gbuf[0] ? m->gbuf[1] : m->gbuf[0];
}

/* after writing dst = grad_dst(m, s, ..): sums a later part into s's gacc */
static void grad_done(model *m, int s, const float *dst, int B)
{
    if (!dst)
        return;
    model_layer *S = &m->layers[s];
    if (!S->gacc)
        return;
    if (S->gacc_set)
        m->be->ops->add(m->be, S->gacc, S->gacc, dst, (size_t)B * layer_out_size(S));
    S->gacc_set = 1;
}

/* g is also the gradient of input s (add, flatten): into s's gacc, or
 * returned as the next layer's gradient without a copy */
static const float *grad_pass(model *m, int s, const float *g, int B)
{
    if (s < 0 || !m->layers[s].need_grad)
        return NULL;
    model_layer *S = &m->layers[s];
    if (!S->gacc)
        return g;
    if (g == S->gacc && !S->gacc_set) {
        S->gacc_set = 1; /* written there already (add_grad_in_place) */
        return NULL;
    }
    size_t n = (size_t)B * layer_out_size(S);
    if (S->gacc_set)
        m->be->ops->add(m->be, S->gacc, S->gacc, g, n);
    else
        m->be->ops->copy(m->be, S->gacc, g, n);
    S->gacc_set = 1;
    return NULL;
}

/* Relu L's backward fused with its bn's (and add's), given g: dy =
 * relu'(g) straight into the bn's backward and, with an add, into the
 * add's other operand's gacc. Returns 0 (nothing done: the separate ops
 * run) when the buffers do not allow it; else 1, the bn and add marked
 * done and m->fused_g the gradient for the chain below. */
static int bn_relu_backward(model *m, model_layer *L, const float *g, int B)
{
    backend *be = m->be;
    model_layer *S = &m->layers[L->fuse_bn];
    model_layer *A = L->fuse_add >= 0 ? &m->layers[L->fuse_add] : NULL;
    float *dy_out = NULL;
    if (!be->ops->bn_relu_backward || m->no_fuse || !g)
        return 0;
    if (A && A->src2 >= 0 && m->layers[A->src2].need_grad) {
        if (!m->layers[A->src2].gacc) /* the part would have to travel the chain */
            return 0;
        dy_out = grad_dst(m, A->src2, g);
    }
    float *dx = grad_dst(m, S->src, g), *p = m->params, *gr = m->grads;
    if ((dx && dx == dy_out) || g == dx || g == dy_out)
        return 0;
    be->ops->bn_relu_backward(be, dx, tensor_ptr(gr, m, S->w_tensor),
                              tensor_ptr(gr, m, S->b_tensor), dy_out, g, L->out, out_of(m, S->src),
                              tensor_ptr(p, m, S->w_tensor), S->save_mean, S->save_invstd, B,
                              S->in_c, S->in_h * S->in_w);
    if (dy_out)
        grad_done(m, A->src2, dy_out, B);
    grad_done(m, S->src, dx, B);
    S->bwd_done = 1;
    if (A)
        A->bwd_done = 1;
    m->fused_g = dx && !m->layers[S->src].gacc ? dx : NULL;
    return 1;
}

/* layer L's backward pass given g, the gradient of its output; returns the
 * gradient of its input when that is the next one down the chain (NULL when
 * it went into a gacc or is not needed) */
static const float *layer_backward(model *m, model_layer *L, const float *g, int B)
{
    if (L->bwd_done) { /* the relu it fed did it (bn_relu_backward) */
        L->bwd_done = 0;
        return m->fused_g;
    }
    if (L->fuse_bn >= 0 && bn_relu_backward(m, L, g, B))
        return m->fused_g;
    backend *be = m->be;
    const backend_ops *o = be->ops;
    const float *in = out_of(m, L->src);
    float *din = grad_dst(m, L->src, g), *p = m->params, *gr = m->grads;
    size_t n = (size_t)B * layer_out_size(L);
    switch (L->kind) {
    case LAYER_CONV: {
        conv_shape cs;
        layer_conv_shape(L, B, &cs);
        o->conv_backward(be, layer_plan(m, L, &cs), din, tensor_ptr(gr, m, L->w_tensor),
                         L->b_tensor < 0 ? NULL : tensor_ptr(gr, m, L->b_tensor), g, in,
                         tensor_ptr(p, m, L->w_tensor), &cs);
        break;
    }
    case LAYER_RELU:
        if (din)
            o->relu_backward(be, din, g, L->out, n);
        break;
    case LAYER_MAXPOOL:
        if (din) {
            maxpool_shape ps;
            layer_pool_shape(L, B, &ps);
            o->maxpool_backward(be, din, g, L->out, in, &ps);
        }
        break;
    case LAYER_FLATTEN: return grad_pass(m, L->src, g, B);
    case LAYER_GAP:
        if (din)
            o->gap_backward(be, din, g, B, L->in_c, L->in_h * L->in_w);
        break;
    case LAYER_FC:
        o->fc_backward(be, din, tensor_ptr(gr, m, L->w_tensor), tensor_ptr(gr, m, L->b_tensor), g,
                       in, tensor_ptr(p, m, L->w_tensor), B, L->in_c, L->out_c);
        break;
    case LAYER_BN:
        o->bn_backward(be, din, tensor_ptr(gr, m, L->w_tensor), tensor_ptr(gr, m, L->b_tensor), g,
                       in, tensor_ptr(p, m, L->w_tensor), L->save_mean, L->save_invstd, B, L->in_c,
                       L->in_h * L->in_w);
        break;
    case LAYER_ADD: {
        /* the second operand first: the first may pass g on uncopied */
        grad_pass(m, L->src2, g, B);
        return grad_pass(m, L->src, g, B);
    }
    }
    grad_done(m, L->src, din, B);
    return din && !m->layers[L->src].gacc ? din : NULL;
}

/* every layer backward, from dlogits down to the lowest parameters, and
 * (next not NULL) the gradient buckets handed to dist.reduce_range as they
 * complete, *next the first not handed yet; -1 when the backend was
 * cancelled on the way */
int nn_backward_overlap(model *m, int B, int *next)
{
    backend *be = m->be;
    const float *g = m->dlogits;
    for (int i = 0; i < m->nlayers; i++)
        m->layers[i].gacc_set = m->layers[i].bwd_done = 0;
    m->fused_g = NULL;
    for (int i = m->nlayers - 1; i >= 0; i--) {
        model_layer *L = &m->layers[i];
        if (!L->need_grad) {
            g = NULL; /* nothing below needs a gradient through here */
        } else {
            if (L->gacc)
                g = L->gacc;
            g = layer_backward(m, L, g, B);
            if (backend_cancelled(be))
                return -1;
        }
        if (next)
            nn_buckets_due(m, i, next);
    }
    return backend_cancelled(be) ? -1 : 0;
}

int nn_backward(model *m, int B) { return nn_backward_overlap(m, B, NULL); }

/* Enqueue the read-back of the per-sample losses and predictions (one
 * copy: every loss slot, then the first B predictions) into the next free
 * results slot, with the step's labels and the caller's tag. */
static void results_enqueue(model *m, const int32_t *labels, int B, step_tag tag)
{
    if (m->pend_n == MODEL_RESULTS_MAX) {
        fprintf(stderr, "train: model: %d steps' results pending, none taken (internal error)\n",
                MODEL_RESULTS_MAX);
        exit(1);
    }
    int slot = (m->pend_head + m->pend_n) % MODEL_RESULTS_MAX;
    size_t MB = (size_t)m->max_batch;
    memcpy(m->results_labels + (size_t)slot * MB, labels, (size_t)B * sizeof(int32_t));
    m->pend[slot].B = B;
    m->pend[slot].tag = tag;
    m->pend_n++;
    backend_result_copy(m->be, slot, m->results_host + (size_t)slot * 2 * MB, m->loss,
                        MB * sizeof(float) + (size_t)B * sizeof(int32_t));
}

int model_results_take(model *m, int wait, step_stats *st, step_tag *tag)
{
    if (m->pend_n == 0)
        return 0;
    int slot = m->pend_head;
    if (!backend_result_done(m->be, slot, wait))
        return 0;
    size_t MB = (size_t)m->max_batch;
    const float *loss = m->results_host + (size_t)slot * 2 * MB;
    // cppcheck-suppress invalidPointerCast ; the int32 half, as model_create lays it out
    const int32_t *pred = (const int32_t *)(loss + MB);
    const int32_t *labels = m->results_labels + (size_t)slot * MB;
    int B = m->pend[slot].B;
    /* in sample order, in double: the same sum whatever the backend */
    step_stats s = {0, 0, B, 0, 0, 0, 0};
    for (int b = 0; b < B; b++) {
        float l = loss[b];
        if (pred[b] == K_BAD_LABEL) { /* the loss is the label (k_softmax_xent_row) */
            if (!s.bad_labels++) {
                s.bad_sample = b;
                s.bad_label = (long)l;
            }
            s.nonfinite++;
            continue;
        }
        s.loss_sum += (double)l;
        s.correct += pred[b] == labels[b];
        s.nonfinite += !isfinite(l);
    }
    if (st)
        *st = s;
    if (tag)
        *tag = m->pend[slot].tag;
    m->pend_head = (m->pend_head + 1) % MODEL_RESULTS_MAX;
    m->pend_n--;
    return 1;
}

int model_results_pending(const model *m) { return m->pend_n; }

/* A synchronous step must not mix with enqueued ones: its results would
 * not be the oldest. */
static void check_none_pending(const model *m, const char *fn)
{
    if (m->pend_n != 0) {
        fprintf(stderr, "train: %s: %d enqueued steps' results not taken (internal error)\n", fn,
                m->pend_n);
        exit(1);
    }
}

/* an enqueued step (rc) and its results, waited for */
static int step_now(model *m, int rc, step_stats *st)
{
    if (rc != MODEL_STEP_OK)
        return rc;
    step_stats s;
    model_results_take(m, 1, &s, NULL);
    if (st)
        *st = s;
    return s.nonfinite ? MODEL_STEP_NONFINITE : MODEL_STEP_OK;
}

int model_forward_backward(model *m, const uint8_t *x, const int32_t *labels, int B, step_stats *st)
{
    nn_check_batch(m, labels, B, "model_forward_backward");
    check_none_pending(m, "model_forward_backward");
    if (nn_forward_loss(m, x, labels, NULL, B, 1, 0) != 0 || nn_backward(m, B) != 0)
        return MODEL_STEP_CANCELLED;
    results_enqueue(m, labels, B, (step_tag){0, 0, 0});
    return step_now(m, MODEL_STEP_OK, st);
}

void model_sgd_step(model *m, float lr, float momentum, float wd)
{
    backend *be = m->be;
    if (!m->decay_weights_only) {
        be->ops->sgd_update(be, m->params, m->momentum, m->grads, m->nparams, lr, momentum, wd);
        return;
    }
    /* place_tensors: [weights | biases and bn parameters | running statistics] */
    size_t start[3] = {m->nparams, m->nparams, m->nparams};
    for (int i = m->ntensors - 1; i >= 0; i--) {
        const model_tensor *t = &m->tensors[i];
        int g = tensor_group(m, t);
        if (t->offset < start[g])
            start[g] = t->offset;
    }
    size_t end0 = start[1] < start[2] ? start[1] : start[2];
    if (end0 > start[0] && start[0] < m->nparams)
        be->ops->sgd_update(be, m->params, m->momentum, m->grads, end0, lr, momentum, wd);
    if (start[1] < start[2])
        be->ops->sgd_update(be, m->params + start[1], m->momentum + start[1], m->grads + start[1],
                            start[2] - start[1], lr, momentum, 0.0f);
}

int model_train_enqueue(model *m, const model_batch *b, float lr, float momentum, float wd,
                        step_tag tag)
{
    if (nn_train_gradient(m, b) != 0)
        return MODEL_STEP_CANCELLED;
    model_sgd_step(m, lr, momentum, wd);
    results_enqueue(m, b->labels, b->B, tag);
    return MODEL_STEP_OK;
}

int model_eval_enqueue(model *m, const model_batch *b, step_tag tag)
{
    if (b->B == 0 && m->dist.reduce) { /* this rank's slice of a short batch is empty */
        results_enqueue(m, b->labels, 0, tag);
        return MODEL_STEP_OK;
    }
    nn_check_batch(m, b->labels, b->B, "model_eval_enqueue");
    if (nn_forward_loss(m, b->x, b->labels, b->dev_labels, b->B, 0, 0) != 0)
        return MODEL_STEP_CANCELLED;
    results_enqueue(m, b->labels, b->B, tag);
    return MODEL_STEP_OK;
}

int model_train_batch(model *m, const model_batch *b, float lr, float momentum, float wd,
                      step_stats *st)
{
    check_none_pending(m, "model_train_step");
    return step_now(m, model_train_enqueue(m, b, lr, momentum, wd, (step_tag){0, 0, 0}), st);
}

int model_train_step(model *m, const uint8_t *x, const int32_t *labels, int B, float lr,
                     float momentum, float wd, step_stats *st)
{
    model_batch b = {.x = x, .labels = labels, .B = B};
    return model_train_batch(m, &b, lr, momentum, wd, st);
}

int model_eval_step(model *m, const uint8_t *x, const int32_t *labels, int B, step_stats *st)
{
    check_none_pending(m, "model_eval_step");
    model_batch b = {.x = x, .labels = labels, .B = B};
    return step_now(m, model_eval_enqueue(m, &b, (step_tag){0, 0, 0}), st);
}
void step_stats_add(step_stats *a, const step_stats *b)
{
    a->loss_sum += b->loss_sum;
    a->correct += b->correct;
    a->n += b->n;
    a->nonfinite += b->nonfinite;
    if (b->bad_labels && !a->bad_labels) {
        a->bad_sample = b->bad_sample;
        a->bad_label = b->bad_label;
    }
    a->bad_labels += b->bad_labels;
}

const char *model_nonfinite_msg(char *buf, size_t len, long epoch, long batch, double loss,
                                double lr)
{
    const char *what = isnan(loss) ? "nan" : loss > 0 ? "inf" : "-inf";
    snprintf(buf, len, "epoch %ld batch %ld: loss is %s (lr %g)", epoch, batch, what, lr);
    return buf;
}
