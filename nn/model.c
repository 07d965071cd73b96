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
 * Batch norm runs fused with the relu after it, and with a residual add
 * between them, where the backend has the ops (backend.h's bn_relu_*) and
 * the bn's and add's outputs have no other reader (plan_fusions): the same
 * bits, whole passes over the activations fewer; an add's gradient is
 * written straight into its shortcut's gradient buffer (add_grad_in_place).
 *
 * Left out: layers other than the six, per-tensor optimiser settings (weight
 * decay applies to every parameter, biases included, as PyTorch's default).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/rng.h"
#include "nn/kernels.h"
#include "nn/model_defs.h"

#define ALIGN_FLOATS 16

static size_t layer_out_size(const model_layer *L)
{
    return (size_t)L->out_c * L->out_h * L->out_w;
}

static size_t layer_in_size(const model_layer *L) { return (size_t)L->in_c * L->in_h * L->in_w; }

static int add_tensor(model *m, const char *name, int ndim, const int *shape, tensor_role role,
                      errbuf *e)
{
    if (m->ntensors == MODEL_MAX_TENSORS)
        return errf(e, "model %s: more than %d parameter tensors", m->name, MODEL_MAX_TENSORS);
    model_tensor *t = &m->tensors[m->ntensors];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->role = role;
    t->n = 1;
    for (int i = 0; i < 4; i++) {
        t->shape[i] = i < ndim ? shape[i] : 1;
        t->n *= (size_t)t->shape[i];
    }
    if (role != TENSOR_STAT)
        m->nparams_used += t->n;
    return m->ntensors++;
}

/* SGD groups: with decay_weights_only the weights come first, then biases
 * and bn parameters, then running statistics, so SGD is two calls;
 * otherwise tensors lie in layer order (the layout of checkpoints written
 * before batch norm existed). */
static int tensor_group(const model *m, const model_tensor *t)
{
    if (!m->decay_weights_only)
        return 0;
    return t->role == TENSOR_WEIGHT ? 0 : t->role == TENSOR_STAT ? 2 : 1;
}

static void place_tensors(model *m)
{
    m->nparams = 0;
    for (int g = 0; g < 3; g++)
        for (int i = 0; i < m->ntensors; i++) {
            model_tensor *t = &m->tensors[i];
            if (tensor_group(m, t) != g)
                continue;
            t->offset = m->nparams;
            m->nparams += (t->n + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
        }
}

/* One layer's shape from its spec; c, h, w: its input, updated to its
 * output. nconv/nfc/nbn number the tensors. */
static int layer_shape(model *m, const model_def *d, int i, int *c, int *h, int *w, int counts[3],
                       errbuf *e)
{
    const layer_spec *sp = &d->layers[i];
    model_layer *L = &m->layers[i];
    char name[MODEL_NAME_MAX];
    switch (sp->kind) {
    case LAYER_CONV: {
        conv_shape cs;
        int k = sp->k ? sp->k : *c;
        int nconv = ++counts[0];
        if (conv_shape_init(&cs, 1, *c, *h, *w, k, sp->r, sp->r, sp->stride, sp->pad) != 0)
            return errf(e, "model %s: input %dx%dx%d is too small (conv%d would get %dx%d)",
                        d->name, m->C, m->H, m->W, nconv, *h, *w);
        L->k = k;
        L->r = sp->r;
        L->stride = sp->stride;
        L->pad = sp->pad;
        int ws[4] = {k, *c, sp->r, sp->r};
        snprintf(name, sizeof name, "conv%d.weight", nconv);
        if ((L->w_tensor = add_tensor(m, name, 4, ws, TENSOR_WEIGHT, e)) < 0)
            return -1;
        if (!(i + 1 < d->nlayers && d->layers[i + 1].kind == LAYER_BN &&
              d->layers[i + 1].in == 0)) {
            snprintf(name, sizeof name, "conv%d.bias", nconv);
            if ((L->b_tensor = add_tensor(m, name, 1, &k, TENSOR_BIAS, e)) < 0)
                return -1;
        }
        m->flops += 2.0 * k * *c * sp->r * sp->r * (double)cs.OH * cs.OW;
        *c = k;
        *h = cs.OH;
        *w = cs.OW;
        return 0;
    }
    case LAYER_MAXPOOL: {
        maxpool_shape ps;
        L->r = sp->r ? sp->r : 2;
        L->stride = sp->r ? sp->stride : 2;
        L->pad = sp->r ? sp->pad : 0;
        if (maxpool_shape_init_k(&ps, 1, *c, *h, *w, L->r, L->stride, L->pad) != 0)
            return errf(e, "model %s: input %dx%dx%d is too small (a %dx%d pool would get %dx%d)",
                        d->name, m->C, m->H, m->W, L->r, L->r, *h, *w);
        *h = ps.OH;
        *w = ps.OW;
        return 0;
    }
    case LAYER_FLATTEN:
        *c = *c * *h * *w;
        *h = *w = 1;
        return 0;
    case LAYER_GAP: *h = *w = 1; return 0;
    case LAYER_FC: {
        int n = sp->k ? sp->k : m->nclasses;
        if (*h != 1 || *w != 1)
            return errf(e, "model %s: layer %d: fc needs a flatten or global pool before it",
                        d->name, i);
        int nfc = ++counts[1];
        int ws[2] = {n, *c};
        snprintf(name, sizeof name, "fc%d.weight", nfc);
        if ((L->w_tensor = add_tensor(m, name, 2, ws, TENSOR_WEIGHT, e)) < 0)
            return -1;
        snprintf(name, sizeof name, "fc%d.bias", nfc);
        if ((L->b_tensor = add_tensor(m, name, 1, &n, TENSOR_BIAS, e)) < 0)
            return -1;
        m->flops += 2.0 * *c * n;
        *c = n;
        return 0;
    }
    case LAYER_BN: {
        static const char *const what[4] = {"weight", "bias", "running_mean", "running_var"};
        static const tensor_role role[4] = {TENSOR_SCALE, TENSOR_BIAS, TENSOR_STAT, TENSOR_STAT};
        int *slot[4] = {&L->w_tensor, &L->b_tensor, &L->rm_tensor, &L->rv_tensor};
        int nbn = ++counts[2];
        for (int t = 0; t < 4; t++) {
            snprintf(name, sizeof name, "bn%d.%s", nbn, what[t]);
            if ((*slot[t] = add_tensor(m, name, 1, c, role[t], e)) < 0)
                return -1;
        }
        return 0;
    }
    case LAYER_ADD: {
        int s2 = sp->in2 - 1;
        if (s2 < 0 || s2 >= i)
            return errf(e, "model %s: layer %d: add names layer %d as its second operand", d->name,
                        i, s2);
        const model_layer *o = &m->layers[s2];
        if (o->out_c != *c || o->out_h != *h || o->out_w != *w)
            return errf(e, "model %s: layer %d: add of %dx%dx%d and %dx%dx%d", d->name, i, *c, *h,
                        *w, o->out_c, o->out_h, o->out_w);
        L->src2 = s2;
        return 0;
    }
    case LAYER_RELU: return 0;
    }
    return errf(e, "model %s: layer %d: unknown kind", d->name, i);
}

/* need_grad, need_din and branch of every layer, from its inputs */
static void layer_flow(model *m)
{
    int *readers = xcalloc((size_t)m->nlayers + 1, sizeof(int));
    for (int i = 0; i < m->nlayers; i++) {
        model_layer *L = &m->layers[i];
        int srcs[2] = {L->src, L->src2};
        L->need_din = L->src >= 0 && m->layers[L->src].need_grad;
        L->need_grad =
            L->w_tensor >= 0 || L->need_din || (L->src2 >= 0 && m->layers[L->src2].need_grad);
        for (int k = 0; k < 2; k++) {
            if (srcs[k] < 0)
                continue;
            readers[srcs[k]]++;
            if (srcs[k] != i - 1 || k == 1)
                m->layers[srcs[k]].branch = 1;
        }
    }
    for (int i = 0; i < m->nlayers; i++) {
        model_layer *L = &m->layers[i];
        L->branch = L->need_grad && L->kind != LAYER_FLATTEN && (L->branch || readers[i] > 1);
    }
    free(readers);
}

/* The relus that run with the batch norm before them (model_layer.fuse_bn):
 * bn -> relu, or bn -> add -> relu, each output read only by the next
 * layer (so no other reader misses it and none has a gradient buffer);
 * the add's other operand is not the bn's input (backward would write the
 * two gradients into one buffer). */
static void plan_fusions(model *m)
{
    int *readers = xcalloc((size_t)m->nlayers + 1, sizeof(int));
    for (int i = 0; i < m->nlayers; i++) {
        model_layer *L = &m->layers[i];
        L->fuse_bn = L->fuse_add = L->fused_into = -1;
        if (L->src >= 0)
            readers[L->src]++;
        if (L->src2 >= 0)
            readers[L->src2]++;
    }
    for (int i = 2; i < m->nlayers; i++) {
        model_layer *R = &m->layers[i];
        int s = i - 1, a = -1;
        if (R->kind != LAYER_RELU || R->src != s || readers[s] != 1)
            continue;
        if (m->layers[s].kind == LAYER_ADD) {
            const model_layer *A = &m->layers[s];
            if (A->src != s - 1 || A->src2 == A->src || A->src2 == m->layers[s - 1].src)
                continue;
            a = s--;
            if (readers[s] != 1)
                continue;
        }
        if (m->layers[s].kind != LAYER_BN || m->layers[s].src < 0)
            continue;
        R->fuse_bn = s;
        R->fuse_add = a;
        m->layers[s].fused_into = i;
        if (a >= 0)
            m->layers[a].fused_into = i;
    }
    free(readers);
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
    m->decay_weights_only = d->decay_weights_only;
    if (C < 1 || C > MODEL_MAX_CHANNELS || H < 1 || W < 1)
        return errf(e, "model %s: input %dx%dx%d: need 1 to %d channels and a positive size",
                    d->name, C, H, W, MODEL_MAX_CHANNELS);
    if (nclasses < 2)
        return errf(e, "model %s: %d classes: need at least 2", d->name, nclasses);
    m->nlayers = d->nlayers;
    m->layers = xcalloc((size_t)d->nlayers, sizeof *m->layers);
    int c = C, h = H, w = W, counts[3] = {0, 0, 0};
    for (int i = 0; i < d->nlayers; i++) {
        const layer_spec *sp = &d->layers[i];
        model_layer *L = &m->layers[i];
        int src = sp->in ? sp->in - 1 : i - 1;
        if (src >= i)
            return errf(e, "model %s: layer %d reads layer %d", d->name, i, src);
        L->kind = sp->kind;
        L->src = src;
        L->src2 = -1;
        c = src < 0 ? C : m->layers[src].out_c;
        h = src < 0 ? H : m->layers[src].out_h;
        w = src < 0 ? W : m->layers[src].out_w;
        L->in_c = c;
        L->in_h = h;
        L->in_w = w;
        L->w_tensor = L->b_tensor = L->rm_tensor = L->rv_tensor = -1;
        if (layer_shape(m, d, i, &c, &h, &w, counts, e) != 0)
            return -1;
        L->out_c = c;
        L->out_h = h;
        L->out_w = w;
    }
    if (c != nclasses || h != 1 || w != 1)
        return errf(e, "model %s: the last layer gives %dx%dx%d, not %d class scores", d->name, c,
                    h, w, nclasses);
    place_tensors(m);
    layer_flow(m);
    plan_fusions(m);
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

uint64_t model_memory_bytes(const char *name, int C, int H, int W, int nclasses, int max_batch,
                            int threads)
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
    double B = max_batch, fl = sizeof(float), T = threads > 0 ? threads : 1;
    double floats = 3.0 * (double)m.nparams + 4.0 * B * (double)largest_activation(&m);
    double conv_scratch = 0.0;
    for (int i = 0; i < m.nlayers; i++) {
        const model_layer *L = &m.layers[i];
        if (L->kind != LAYER_FLATTEN)
            floats += B * (double)layer_out_size(L);
        if (L->branch) /* its gradient buffer */
            floats += B * (double)layer_out_size(L);
        /* ... and the convolutions' scratch, one arena the size of the
         * largest need (cpu/conv.c): im2col and its gradient and a padded
         * input per compute thread, and up to 16 weight-gradient partials */
        if (L->kind == LAYER_CONV) {
            double crs = (double)L->in_c * L->r * L->r, p = (double)L->out_h * L->out_w;
            double pad = (double)L->in_c * (L->in_h + 2 * L->pad) * (L->in_w + 2 * L->pad);
            double chunks = B < 16 ? B : 16;
            double need = T * (2.0 * crs * p + pad) + chunks * L->out_c * (crs + 1.0);
            conv_scratch = need > conv_scratch ? need : conv_scratch;
        }
    }
    floats += conv_scratch;
    free(m.layers);
    double bytes = floats * fl;
    return bytes > 1.8e19 ? UINT64_MAX : (uint64_t)bytes;
}

/* Zeroed whole pages, for host memory that is page-locked: aligned to the
 * page and its size rounded up to one. */
static size_t page_round(size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (n + pg - 1) / pg * pg;
}

static void *page_alloc(size_t n)
{
    void *p = NULL;
    size_t len = page_round(n ? n : 1);
    if (posix_memalign(&p, (size_t)sysconf(_SC_PAGESIZE), len) != 0) {
        fprintf(stderr, "train: out of memory allocating %zu bytes of pages\n", len);
        exit(1);
    }
    memset(p, 0, len);
    return p;
}

int model_create(model *m, const char *name, int C, int H, int W, int nclasses, int max_batch,
                 backend *be, errbuf *e)
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
    const backend_ops *o = be->ops;
    for (int i = 0; i < m->nlayers; i++) {
        layer_kind k = m->layers[i].kind;
        if ((k == LAYER_BN && !(o->bn_forward_train && o->bn_forward_infer && o->bn_backward)) ||
            ((k == LAYER_ADD || m->layers[i].branch) && !(o->add && o->copy))) {
            free(m->layers);
            memset(m, 0, sizeof *m);
            return errf(e, "model %s: the %s backend has no %s yet", name, o->name,
                        k == LAYER_BN ? "batch norm" : "residual add");
        }
    }
    m->be = be;
    m->max_batch = max_batch;
    const char *fuse = getenv("TRAIN_FUSE");
    m->no_fuse = fuse && strcmp(fuse, "0") == 0;
    for (int c = 0; c < C; c++)
        m->mean[c] = m->std[c] = 0.5f;
    size_t B = (size_t)max_batch, fl = sizeof(float), biggest = largest_activation(m);
    m->params = o->alloc(be, m->nparams * fl);
    m->grads = o->alloc(be, m->nparams * fl);
    m->momentum = o->alloc(be, m->nparams * fl);
    m->x = o->alloc(be, B * biggest * fl);
    for (int i = 0; i < m->nlayers; i++) {
        model_layer *L = &m->layers[i];
        if (L->kind == LAYER_FLATTEN)
            L->out = L->src < 0 ? m->x : m->layers[L->src].out;
        else
            L->out = o->alloc(be, B * layer_out_size(L) * fl);
        if (L->branch)
            L->gacc = o->alloc(be, B * layer_out_size(L) * fl);
        if (L->kind == LAYER_BN) {
            L->save_mean = o->alloc(be, (size_t)L->out_c * fl);
            L->save_invstd = o->alloc(be, (size_t)L->out_c * fl);
        }
    }
    m->gbuf[0] = o->alloc(be, B * biggest * fl);
    m->gbuf[1] = o->alloc(be, B * biggest * fl);
    m->gtmp = o->alloc(be, B * biggest * fl);
    m->dlogits = o->alloc(be, B * nclasses * fl);
    /* losses then predictions in one allocation, read back in one copy */
    m->loss = o->alloc(be, B * fl + B * sizeof(int32_t));
    /* the allocation is untyped memory: the int32 half is only ever read as int32 */
    // cppcheck-suppress invalidPointerCast
    m->pred = (int32_t *)(m->loss + B);
    m->labels = o->alloc(be, B * sizeof(int32_t));
    /* per pending step: its losses then its predictions, and its labels */
    m->results_host = page_alloc(MODEL_RESULTS_MAX * 2 * B * sizeof(float));
    m->results_labels = xcalloc(MODEL_RESULTS_MAX * B, sizeof(int32_t));
    /* page-locked, so a read-back is one DMA that needs no host wait to
     * start, not a copy from pageable memory that holds the host. Whole
     * pages of its own: cudaHostRegister locks whole pages, and a block
     * from calloc would lock its neighbours' bytes with it. A refusal is
     * kept (model_results_unpinned) and said by the caller: every step
     * would then wait for its read-back. */
    errbuf pe;
    if (!be->host_visible && o->host_pin) {
        if (o->host_pin(be, m->results_host, page_round(MODEL_RESULTS_MAX * 2 * B * sizeof(float)),
                        &pe) == 0)
            m->results_pinned = 1;
        else
            snprintf(m->results_pin_error, sizeof m->results_pin_error, "%.250s", pe.msg);
    }
    return 0;
}

const char *model_results_unpinned(const model *m)
{
    return m->results_pin_error[0] ? m->results_pin_error : NULL;
}

void model_free(model *m)
{
    if (!m || !m->layers)
        return;
    backend *be = m->be;
    if (be) {
        const backend_ops *o = be->ops;
        /* results still on their way into results_host */
        while (model_results_take(m, 1, NULL, NULL))
            ;
        for (int i = 0; i < m->nlayers; i++) {
            model_layer *L = &m->layers[i];
            for (int s = 0; s < MODEL_PLAN_SLOTS; s++)
                if (L->plans[s].B)
                    backend_conv_plan_free(be, L->plans[s].plan);
            if (L->kind != LAYER_FLATTEN)
                o->free(be, L->out);
            if (L->gacc)
                o->free(be, L->gacc);
            if (L->save_mean) {
                o->free(be, L->save_mean);
                o->free(be, L->save_invstd);
            }
        }
        o->free(be, m->params);
        for (int t = 0; t < 7; t++)
            if (m->tree[t])
                o->free(be, m->tree[t]);
        o->free(be, m->grads);
        o->free(be, m->momentum);
        o->free(be, m->x);
        o->free(be, m->gbuf[0]);
        o->free(be, m->gbuf[1]);
        o->free(be, m->gtmp);
        o->free(be, m->dlogits);
        o->free(be, m->loss); /* m->pred lies in it */
        if (m->zeros)
            o->free(be, m->zeros);
        if (m->results_pinned)
            o->host_unpin(be, m->results_host);
        o->free(be, m->labels);
    }
    free(m->results_host);
    free(m->results_labels);
    free(m->layers);
    memset(m, 0, sizeof *m);
}

void model_init_params(model *m, uint64_t seed)
{
    float *h = xcalloc(m->nparams ? m->nparams : 1, sizeof(float));
    for (int i = 0; i < m->ntensors; i++) {
        const model_tensor *t = &m->tensors[i];
        int one =
            t->role == TENSOR_SCALE || (t->role == TENSOR_STAT && strstr(t->name, "running_var"));
        if (one)
            for (size_t j = 0; j < t->n; j++)
                h[t->offset + j] = 1.0f;
        if (t->role != TENSOR_WEIGHT)
            continue; /* biases, shifts and running means start at zero */
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

void model_set_fusion(model *m, int on) { m->no_fuse = !on; }

int model_set_norm(model *m, const float *mean, const float *std, errbuf *e)
{
    if (std)
        for (int c = 0; c < m->C; c++)
            if (!(std[c] > 0.0f) || !isfinite(std[c]))
                return errf(e, "normalisation std of channel %d is %g: must be positive", c,
                            (double)std[c]);
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

static void check_batch(const model *m, const int32_t *labels, int B, const char *fn)
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
static int forward_loss(model *m, const uint8_t *x, const int32_t *labels, const int32_t *dlabels,
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
static void buckets_due(model *m, int i, int *next)
{
    while (*next < m->dist.nbuckets && m->dist.bucket_after[*next] == i)
        bucket_send(m, (*next)++);
}

/* every layer backward, from dlogits down to the lowest parameters, and
 * (next not NULL) the gradient buckets handed to dist.reduce_range as they
 * complete, *next the first not handed yet; -1 when the backend was
 * cancelled on the way */
static int backward_overlap(model *m, int B, int *next)
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
            buckets_due(m, i, next);
    }
    return backend_cancelled(be) ? -1 : 0;
}

static int backward(model *m, int B) { return backward_overlap(m, B, NULL); }

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
    check_batch(m, labels, B, "model_forward_backward");
    check_none_pending(m, "model_forward_backward");
    if (forward_loss(m, x, labels, NULL, B, 1, 0) != 0 || backward(m, B) != 0)
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
        check_batch(m, b->labels, b->B, "model_train_enqueue");
        m->be->ops->upload(m->be, m->labels, b->labels, (size_t)b->B * sizeof(int32_t));
        dlabels = m->labels;
    }
    for (int i = 0; i < sp->nchunks && rc == 0; i++) {
        int bc = sp->chunk[i];
        if (bc == 0) {
            zero_grads(m);
        } else {
            check_batch(m, b->labels + off, bc, "model_train_enqueue");
            m->loss = loss + off;
            m->pred = pred + off;
            rc = forward_loss(m, b->x + (size_t)off * sample, b->labels + off, dlabels + off, bc, 1,
                              sp->global_batch) != 0 ||
                 backward(m, bc) != 0;
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
    check_batch(m, b->labels, b->B, "model_train_enqueue");
    backend *be = m->be;
    be->ops->batch_groups(be, b->split.chunk, b->split.nchunks);
    int rc = forward_loss(m, b->x, b->labels, b->dev_labels, b->B, 1, b->split.global_batch) != 0 ||
             backward(m, b->B) != 0;
    be->ops->batch_groups(be, NULL, 0);
    return rc ? -1 : 0;
}

/* forward and backward of a training step into m->grads, the ranks' sum
 * included (model.dist); -1 when cancelled */
static int train_gradient(model *m, const model_batch *b)
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
        check_batch(m, b->labels, B, "model_train_enqueue");
        /* the flag never goes back to 0, so an operation cut short anywhere
         * before here is seen here, before the update */
        rc = forward_loss(m, b->x, b->labels, b->dev_labels, B, 1, b->split.global_batch) != 0 ||
             backward_overlap(m, B, overlap ? &next : NULL) != 0;
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

int model_train_enqueue(model *m, const model_batch *b, float lr, float momentum, float wd,
                        step_tag tag)
{
    if (train_gradient(m, b) != 0)
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
    check_batch(m, b->labels, b->B, "model_eval_enqueue");
    if (forward_loss(m, b->x, b->labels, b->dev_labels, b->B, 0, 0) != 0)
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

/* ---------------------------------------------------------------- catalogue */
void model_print_list(FILE *fp, int C, int H, int W, int nclasses)
{
    fprintf(fp, "models for %dx%dx%d inputs, %d classes (FLOPs: forward, per sample, conv + fc):\n",
            C, H, W, nclasses);
    for (const char *const *n = model_names(); *n; n++) {
        const model_def *d = model_def_find(*n);
        model m;
        errbuf e;
        if (model_layout(&m, d, C, H, W, nclasses, &e) != 0)
            fprintf(fp, "  %-8s  does not fit: %s\n", d->name, e.msg);
        else
            fprintf(fp, "  %-8s %9zu params %9.2f MFLOP  %s; defaults lr %g momentum %g wd %g %s\n",
                    d->name, m.nparams_used, m.flops / 1e6, d->desc, d->hp.lr, d->hp.momentum,
                    d->hp.wd, lr_schedule_name(d->hp.schedule));
        free(m.layers);
    }
}
