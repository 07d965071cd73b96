/* model.c — shapes, parameters and the training step of a model (model.h).
 *
 * Layout: the layers' shapes follow from the input; each conv and fc layer
 * adds a weight and a bias tensor to the one parameter array (offsets
 * 64-byte aligned; the gaps stay zero in params, grads and momentum).
 * Activations: one device buffer per layer output (flatten reuses its
 * input), two ping-pong buffers for the gradients flowing down.
 *
 * Convolution plans are made per batch size on first use and cached
 * (MODEL_PLAN_SLOTS per layer, least recently used replaced), so the short
 * last batch of an epoch and the evaluation batches do not re-plan every
 * step.
 *
 * Left out: layers other than the six, per-tensor optimiser settings (weight
 * decay applies to every parameter, biases included, as PyTorch's default).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/rng.h"
#include "model_defs.h"

#define ALIGN_FLOATS 16

static size_t layer_out_size(const model_layer *L)
{
    return (size_t)L->out_c * L->out_h * L->out_w;
}

static size_t layer_in_size(const model_layer *L)
{
    return (size_t)L->in_c * L->in_h * L->in_w;
}

static int add_tensor(model *m, const char *name, int ndim, const int *shape, errbuf *e)
{
    if (m->ntensors == MODEL_MAX_TENSORS)
        return errf(e, "model %s: more than %d parameter tensors", m->name, MODEL_MAX_TENSORS);
    model_tensor *t = &m->tensors[m->ntensors];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->n = 1;
    for (int i = 0; i < 4; i++) {
        t->shape[i] = i < ndim ? shape[i] : 1;
        t->n *= (size_t)t->shape[i];
    }
    t->offset = m->nparams;
    m->nparams += (t->n + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
    m->nparams_used += t->n;
    return m->ntensors++;
}

/* Shapes, tensors and FLOPs of definition d; no memory on the backend. */
static int model_layout(model *m, const model_def *d, int C, int H, int W, int nclasses, errbuf *e)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", d->name);
    m->C = C;
    m->H = H;
    m->W = W;
    m->nclasses = nclasses;
    if (C < 1 || C > MODEL_MAX_CHANNELS || H < 1 || W < 1)
        return errf(e, "model %s: input %dx%dx%d: need 1 to %d channels and a positive size", d->name, C, H,
                    W, MODEL_MAX_CHANNELS);
    if (nclasses < 2)
        return errf(e, "model %s: %d classes: need at least 2", d->name, nclasses);
    m->nlayers = d->nlayers;
    m->layers = xcalloc((size_t)d->nlayers, sizeof *m->layers);
    int c = C, h = H, w = W, nconv = 0, nfc = 0, have_params = 0;
    for (int i = 0; i < d->nlayers; i++) {
        const layer_spec *sp = &d->layers[i];
        model_layer *L = &m->layers[i];
        L->kind = sp->kind;
        L->in_c = c;
        L->in_h = h;
        L->in_w = w;
        L->w_tensor = L->b_tensor = -1;
        L->need_din = have_params;
        char name[MODEL_NAME_MAX];
        switch (sp->kind) {
        case LAYER_CONV: {
            conv_shape cs;
            int k = sp->k ? sp->k : c;
            nconv++;
            if (conv_shape_init(&cs, 1, c, h, w, k, sp->r, sp->r, sp->stride, sp->pad) != 0)
                return errf(e, "model %s: input %dx%dx%d is too small (conv%d would get %dx%d)", d->name, C, H,
                            W, nconv, h, w);
            L->k = k;
            L->r = sp->r;
            L->stride = sp->stride;
            L->pad = sp->pad;
            c = k;
            h = cs.OH;
            w = cs.OW;
            int ws[4] = {k, L->in_c, sp->r, sp->r};
            snprintf(name, sizeof name, "conv%d.weight", nconv);
            if ((L->w_tensor = add_tensor(m, name, 4, ws, e)) < 0)
                return -1;
            snprintf(name, sizeof name, "conv%d.bias", nconv);
            if ((L->b_tensor = add_tensor(m, name, 1, &k, e)) < 0)
                return -1;
            m->flops += 2.0 * k * L->in_c * sp->r * sp->r * (double)h * w;
            break;
        }
        case LAYER_MAXPOOL:
            if (h < 2 || w < 2)
                return errf(e, "model %s: input %dx%dx%d is too small (a 2x2 pool would get %dx%d)", d->name, C,
                            H, W, h, w);
            h /= 2;
            w /= 2;
            break;
        case LAYER_FLATTEN:
            c = c * h * w;
            h = w = 1;
            break;
        case LAYER_GAP:
            h = w = 1;
            break;
        case LAYER_FC: {
            int n = sp->k ? sp->k : nclasses;
            if (h != 1 || w != 1)
                return errf(e, "model %s: layer %d: fc needs a flatten or global pool before it", d->name, i);
            nfc++;
            int ws[2] = {n, c};
            snprintf(name, sizeof name, "fc%d.weight", nfc);
            if ((L->w_tensor = add_tensor(m, name, 2, ws, e)) < 0)
                return -1;
            snprintf(name, sizeof name, "fc%d.bias", nfc);
            if ((L->b_tensor = add_tensor(m, name, 1, &n, e)) < 0)
                return -1;
            m->flops += 2.0 * c * n;
            c = n;
            break;
        }
        case LAYER_RELU:
            break;
        }
        L->out_c = c;
        L->out_h = h;
        L->out_w = w;
        if (L->w_tensor >= 0)
            have_params = 1;
    }
    if (c != nclasses || h != 1 || w != 1)
        return errf(e, "model %s: the last layer gives %dx%dx%d, not %d class scores", d->name, c, h, w,
                    nclasses);
    return 0;
}

/* Floats in the largest layer input or output of one sample: the size of
 * the input buffer's and the gradient ping-pong buffers' per-sample part. */
static size_t largest_activation(const model *m)
{
    size_t biggest = (size_t)m->C * m->H * m->W;
    for (int i = 0; i < m->nlayers; i++) {
        const model_layer *L = &m->layers[i];
        if (layer_out_size(L) > biggest)
            biggest = layer_out_size(L);
        if (layer_in_size(L) > biggest)
            biggest = layer_in_size(L);
    }
    return biggest;
}

uint64_t model_memory_bytes(const char *name, int C, int H, int W, int nclasses, int max_batch, int threads)
{
    const model_def *d = model_def_find(name);
    model m;
    errbuf e;
    if (!d)
        return 0;
    if (model_layout(&m, d, C, H, W, nclasses, &e) != 0) {
        free(m.layers);
        return 0;
    }
    /* what model_create allocates: parameters, gradients and momentum; the
     * input, each layer's output and two gradient buffers per sample ... */
    double B = max_batch, fl = sizeof(float);
    double floats = 3.0 * (double)m.nparams + 3.0 * B * (double)largest_activation(&m);
    for (int i = 0; i < m.nlayers; i++) {
        const model_layer *L = &m.layers[i];
        if (L->kind != LAYER_FLATTEN)
            floats += B * (double)layer_out_size(L);
        /* ... and each convolution's plan: im2col and its gradient, per
         * compute thread (nn/cpu_conv.c) */
        if (L->kind == LAYER_CONV)
            floats += 2.0 * (threads > 0 ? threads : 1) * (double)L->in_c * L->r * L->r * L->out_h * L->out_w;
    }
    free(m.layers);
    double bytes = floats * fl;
    return bytes > 1.8e19 ? UINT64_MAX : (uint64_t)bytes;
}

int model_create(model *m, const char *name, int C, int H, int W, int nclasses, int max_batch, backend *be,
                 errbuf *e)
{
    const model_def *d = model_def_find(name);
    memset(m, 0, sizeof *m);
    if (!d)
        return errf(e, "--model %s: unknown (try --model list)", name);
    if (max_batch < 1)
        return errf(e, "model %s: batch size %d: must be at least 1", name, max_batch);
    if (model_layout(m, d, C, H, W, nclasses, e) != 0) {
        free(m->layers);
        memset(m, 0, sizeof *m);
        return -1;
    }
    m->be = be;
    m->max_batch = max_batch;
    for (int c = 0; c < C; c++)
        m->mean[c] = m->std[c] = 0.5f;
    const backend_ops *o = be->ops;
    size_t B = (size_t)max_batch, fl = sizeof(float), biggest = largest_activation(m);
    m->params = o->alloc(be, m->nparams * fl);
    m->grads = o->alloc(be, m->nparams * fl);
    m->momentum = o->alloc(be, m->nparams * fl);
    m->x = o->alloc(be, B * biggest * fl);
    const float *prev = m->x;
    for (int i = 0; i < m->nlayers; i++) {
        model_layer *L = &m->layers[i];
        if (L->kind == LAYER_FLATTEN)
            L->out = (float *)prev;
        else
            L->out = o->alloc(be, B * layer_out_size(L) * fl);
        prev = L->out;
    }
    m->gbuf[0] = o->alloc(be, B * biggest * fl);
    m->gbuf[1] = o->alloc(be, B * biggest * fl);
    m->dlogits = o->alloc(be, B * nclasses * fl);
    /* losses then predictions in one allocation, read back in one copy */
    m->loss = o->alloc(be, B * fl + B * sizeof(int32_t));
    m->pred = (int32_t *)(m->loss + B);
    m->labels = o->alloc(be, B * sizeof(int32_t));
    m->loss_host = xcalloc(2 * B, sizeof(float));
    m->pred_host = (int32_t *)(m->loss_host + B);
    /* page-locked, so the read-back is one DMA the host waits for once,
     * not a copy from pageable memory that holds the host besides */
    errbuf pe;
    if (!be->host_visible && o->host_pin &&
        o->host_pin(be, m->loss_host, 2 * B * sizeof(float), &pe) == 0)
        m->results_pinned = 1;
    return 0;
}

void model_free(model *m)
{
    if (!m || !m->layers)
        return;
    backend *be = m->be;
    if (be) {
        const backend_ops *o = be->ops;
        for (int i = 0; i < m->nlayers; i++) {
            model_layer *L = &m->layers[i];
            for (int s = 0; s < MODEL_PLAN_SLOTS; s++)
                if (L->plans[s].B && o->conv_plan_free)
                    o->conv_plan_free(be, L->plans[s].plan);
            if (L->kind != LAYER_FLATTEN)
                o->free(be, L->out);
        }
        o->free(be, m->params);
        o->free(be, m->grads);
        o->free(be, m->momentum);
        o->free(be, m->x);
        o->free(be, m->gbuf[0]);
        o->free(be, m->gbuf[1]);
        o->free(be, m->dlogits);
        o->free(be, m->loss); /* m->pred lies in it */
        if (m->results_pinned)
            o->host_unpin(be, m->loss_host);
        o->free(be, m->labels);
    }
    free(m->loss_host); /* m->pred_host lies in it */
    free(m->layers);
    memset(m, 0, sizeof *m);
}

void model_init_params(model *m, uint64_t seed)
{
    float *h = xcalloc(m->nparams ? m->nparams : 1, sizeof(float));
    for (int i = 0; i < m->ntensors; i++) {
        const model_tensor *t = &m->tensors[i];
        if (t->ndim < 2)
            continue; /* biases start at zero */
        size_t fan_in = t->n / (size_t)t->shape[0];
        double sd = sqrt(2.0 / (double)fan_in);
        rng r = rng_keyed(seed, RNG_INIT, (uint64_t)i, 0);
        for (size_t j = 0; j < t->n; j++)
            h[t->offset + j] = (float)(sd * rng_normal(&r));
    }
    const backend_ops *o = m->be->ops;
    size_t bytes = m->nparams * sizeof(float);
    o->upload(m->be, m->params, h, bytes);
    memset(h, 0, bytes);
    o->upload(m->be, m->momentum, h, bytes);
    o->upload(m->be, m->grads, h, bytes);
    free(h);
}

int model_set_norm(model *m, const float *mean, const float *std, errbuf *e)
{
    if (std)
        for (int c = 0; c < m->C; c++)
            if (!(std[c] > 0.0f) || !isfinite(std[c]))
                return errf(e, "normalisation std of channel %d is %g: must be positive", c, (double)std[c]);
    if (mean)
        for (int c = 0; c < m->C; c++)
            if (!isfinite(mean[c]))
                return errf(e, "normalisation mean of channel %d is not finite", c);
    for (int c = 0; c < m->C; c++) {
        if (mean)
            m->mean[c] = mean[c];
        if (std)
            m->std[c] = std[c];
    }
    return 0;
}

/* ---------------------------------------------------------------- steps */
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
    if (L->plans[lru].B && be->ops->conv_plan_free)
        be->ops->conv_plan_free(be, L->plans[lru].plan);
    L->plans[lru].B = cs->B;
    L->plans[lru].plan = be->ops->conv_plan ? be->ops->conv_plan(be, cs) : NULL;
    L->plans[lru].used = m->tick;
    return L->plans[lru].plan;
}

static void layer_conv_shape(const model_layer *L, int B, conv_shape *cs)
{
    conv_shape_init(cs, B, L->in_c, L->in_h, L->in_w, L->k, L->r, L->r, L->stride, L->pad);
}

static float *tensor_ptr(float *base, const model *m, int t)
{
    return base + m->tensors[t].offset;
}

static void check_batch(const model *m, const int32_t *labels, int B, const char *fn)
{
    if (B < 1 || B > m->max_batch) {
        fprintf(stderr, "train: %s: batch of %d, the model was made for 1 to %d (internal error)\n", fn, B,
                m->max_batch);
        exit(1);
    }
    for (int b = 0; b < B; b++)
        if (labels[b] < 0 || labels[b] >= m->nclasses) {
            fprintf(stderr, "train: %s: label %d of sample %d is outside 0..%d (internal error)\n", fn,
                    (int)labels[b], b, m->nclasses - 1);
            exit(1);
        }
}

/* normalise, every layer forward, softmax cross-entropy; -1 when the
 * backend was cancelled on the way (the outputs are then undefined) */
static int forward_loss(model *m, const uint8_t *x, const int32_t *labels, int B)
{
    backend *be = m->be;
    const backend_ops *o = be->ops;
    /* labels the stager copied with the batch are on the device already;
     * an upload here would wait for the copy engine and then the host */
    const int32_t *dlabels = m->staged_labels;
    m->staged_labels = NULL;
    if (!dlabels) {
        o->upload(be, m->labels, labels, (size_t)B * sizeof(int32_t));
        dlabels = m->labels;
    }
    o->normalize_u8(be, m->x, x, B, m->C, m->H * m->W, m->mean, m->std);
    const float *in = m->x;
    for (int i = 0; i < m->nlayers; i++) {
        model_layer *L = &m->layers[i];
        float *out = L->out;
        switch (L->kind) {
        case LAYER_CONV: {
            conv_shape cs;
            layer_conv_shape(L, B, &cs);
            o->conv_forward(be, layer_plan(m, L, &cs), out, in, tensor_ptr(m->params, m, L->w_tensor),
                            tensor_ptr(m->params, m, L->b_tensor), &cs);
            break;
        }
        case LAYER_RELU:
            o->relu_forward(be, out, in, (size_t)B * layer_out_size(L));
            break;
        case LAYER_MAXPOOL: {
            pool_shape ps;
            pool_shape_init(&ps, B, L->in_c, L->in_h, L->in_w);
            o->maxpool_forward(be, out, in, &ps);
            break;
        }
        case LAYER_FLATTEN:
            break;
        case LAYER_GAP:
            o->gap_forward(be, out, in, B, L->in_c, L->in_h * L->in_w);
            break;
        case LAYER_FC:
            o->fc_forward(be, out, in, tensor_ptr(m->params, m, L->w_tensor),
                          tensor_ptr(m->params, m, L->b_tensor), B, L->in_c, L->out_c);
            break;
        }
        in = out;
        if (backend_cancelled(be))
            return -1;
    }
    o->softmax_xent(be, m->dlogits, m->loss, m->pred, in, dlabels, B, m->nclasses, 1.0f / (float)B);
    return backend_cancelled(be) ? -1 : 0;
}

/* every layer backward, from dlogits down to the lowest parameters; -1
 * when the backend was cancelled on the way */
static int backward(model *m, int B)
{
    backend *be = m->be;
    const backend_ops *o = be->ops;
    float *g = m->dlogits;
    for (int i = m->nlayers - 1; i >= 0; i--) {
        model_layer *L = &m->layers[i];
        if (!L->need_din && L->w_tensor < 0)
            break; /* nothing below needs a gradient */
        const float *in = i ? m->layers[i - 1].out : m->x;
        float *din = L->need_din ? (g == m->gbuf[0] ? m->gbuf[1] : m->gbuf[0]) : NULL;
        switch (L->kind) {
        case LAYER_CONV: {
            conv_shape cs;
            layer_conv_shape(L, B, &cs);
            o->conv_backward(be, layer_plan(m, L, &cs), din, tensor_ptr(m->grads, m, L->w_tensor),
                             tensor_ptr(m->grads, m, L->b_tensor), g, in,
                             tensor_ptr(m->params, m, L->w_tensor), &cs);
            break;
        }
        case LAYER_RELU:
            o->relu_backward(be, din, g, L->out, (size_t)B * layer_out_size(L));
            break;
        case LAYER_MAXPOOL: {
            pool_shape ps;
            pool_shape_init(&ps, B, L->in_c, L->in_h, L->in_w);
            o->maxpool_backward(be, din, g, L->out, in, &ps);
            break;
        }
        case LAYER_FLATTEN:
            din = g; /* same memory, new shape */
            break;
        case LAYER_GAP:
            o->gap_backward(be, din, g, B, L->in_c, L->in_h * L->in_w);
            break;
        case LAYER_FC:
            o->fc_backward(be, din, tensor_ptr(m->grads, m, L->w_tensor), tensor_ptr(m->grads, m, L->b_tensor),
                           g, in, tensor_ptr(m->params, m, L->w_tensor), B, L->in_c, L->out_c);
            break;
        }
        g = din;
        if (backend_cancelled(be))
            return -1;
    }
    return backend_cancelled(be) ? -1 : 0;
}

/* download the per-sample losses and predictions; stats in sample order */
static int collect(model *m, const int32_t *labels, int B, step_stats *st)
{
    backend *be = m->be;
    /* one copy: every loss slot, then the first B predictions */
    be->ops->download(be, m->loss_host, m->loss,
                      (size_t)m->max_batch * sizeof(float) + (size_t)B * sizeof(int32_t));
    step_stats s = {0, 0, B, 0};
    for (int b = 0; b < B; b++) {
        float l = m->loss_host[b];
        s.loss_sum += (double)l;
        s.correct += m->pred_host[b] == labels[b];
        s.nonfinite += !isfinite(l);
    }
    if (st)
        *st = s;
    return s.nonfinite ? MODEL_STEP_NONFINITE : MODEL_STEP_OK;
}

int model_forward_backward(model *m, const uint8_t *x, const int32_t *labels, int B, step_stats *st)
{
    check_batch(m, labels, B, "model_forward_backward");
    if (forward_loss(m, x, labels, B) != 0 || backward(m, B) != 0)
        return MODEL_STEP_CANCELLED;
    return collect(m, labels, B, st);
}

void model_sgd_step(model *m, float lr, float momentum, float wd)
{
    m->be->ops->sgd_update(m->be, m->params, m->momentum, m->grads, m->nparams, lr, momentum, wd);
}

void model_stage_labels(model *m, const int32_t *dev_labels) { m->staged_labels = dev_labels; }

int model_train_step(model *m, const uint8_t *x, const int32_t *labels, int B, float lr, float momentum,
                     float wd, step_stats *st)
{
    check_batch(m, labels, B, "model_train_step");
    /* the flag never goes back to 0, so an operation cut short anywhere
     * before here is seen here, before the update */
    if (forward_loss(m, x, labels, B) != 0 || backward(m, B) != 0)
        return MODEL_STEP_CANCELLED;
    model_sgd_step(m, lr, momentum, wd);
    return collect(m, labels, B, st);
}

int model_eval_step(model *m, const uint8_t *x, const int32_t *labels, int B, step_stats *st)
{
    check_batch(m, labels, B, "model_eval_step");
    if (forward_loss(m, x, labels, B) != 0)
        return MODEL_STEP_CANCELLED;
    return collect(m, labels, B, st);
}

void step_stats_add(step_stats *a, const step_stats *b)
{
    a->loss_sum += b->loss_sum;
    a->correct += b->correct;
    a->n += b->n;
    a->nonfinite += b->nonfinite;
}

const char *model_nonfinite_msg(char *buf, size_t len, long epoch, long batch, double loss, double lr)
{
    const char *what = isnan(loss) ? "nan" : loss > 0 ? "inf" : "-inf";
    snprintf(buf, len, "epoch %ld batch %ld: loss is %s (lr %g)", epoch, batch, what, lr);
    return buf;
}

/* ---------------------------------------------------------------- catalogue */
void model_print_list(FILE *fp, int C, int H, int W, int nclasses)
{
    fprintf(fp, "models for %dx%dx%d inputs, %d classes (FLOPs: forward, per sample, conv + fc):\n", C, H, W,
            nclasses);
    for (const char *const *n = model_names(); *n; n++) {
        const model_def *d = model_def_find(*n);
        model m;
        errbuf e;
        if (model_layout(&m, d, C, H, W, nclasses, &e) != 0)
            fprintf(fp, "  %-8s  does not fit: %s\n", d->name, e.msg);
        else
            fprintf(fp, "  %-8s %9zu params %9.2f MFLOP  %s; defaults lr %g momentum %g wd %g %s\n", d->name,
                    m.nparams_used, m.flops / 1e6, d->desc, d->hp.lr, d->hp.momentum, d->hp.wd,
                    lr_schedule_name(d->hp.schedule));
        free(m.layers);
    }
}
