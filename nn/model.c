/* model.c — building a model (model.h): shapes, parameters, buffers; the
 * catalogue. Its steps are step.c's, the sums across chunks and ranks
 * sums.c's (nn/internal.h between them).
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
#include "nn/internal.h"
#include "nn/kernels.h"
#include "nn/model_defs.h"

#define ALIGN_FLOATS 16

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

/* ---------------------------------------------------------------- catalogue */
/* "a/a/a" -> "a": one name when every pass runs the same algorithm */
static void algo_short(char *a)
{
    char *p1 = strchr(a, '/'), *p2 = p1 ? strchr(p1 + 1, '/') : NULL;
    if (!p2)
        return;
    size_t n = (size_t)(p1 - a);
    if ((size_t)(p2 - p1 - 1) == n && strlen(p2 + 1) == n && !strncmp(a, p1 + 1, n) &&
        !strncmp(a, p2 + 1, n))
        *p1 = '\0';
}

/* m's convolutions' algorithms on be (backend_conv_describe), in layer
 * order, a run of equal ones as "N x name"; nothing when be does not say */
static void print_conv_algos(FILE *fp, const model *m, backend *be)
{
    char prev[64] = "", cur[64];
    int run = 0, first = 1;
    for (int i = 0; i <= m->nlayers; i++) {
        const model_layer *L = i < m->nlayers ? &m->layers[i] : NULL;
        if (L && L->kind != LAYER_CONV)
            continue;
        cur[0] = '\0';
        if (L) {
            conv_shape cs;
            conv_shape_init(&cs, 1, L->in_c, L->in_h, L->in_w, L->k, L->r, L->r, L->stride, L->pad);
            if (!backend_conv_describe(be, &cs, cur, sizeof cur))
                return;
            algo_short(cur);
            if (run && !strcmp(cur, prev)) {
                run++;
                continue;
            }
        }
        if (run) {
            fprintf(fp, "%s", first ? "            cpu convs: " : ", ");
            if (run > 1)
                fprintf(fp, "%d x ", run);
            fprintf(fp, "%s", prev);
            first = 0;
        }
        snprintf(prev, sizeof prev, "%s", cur);
        run = 1;
    }
    if (!first)
        fprintf(fp, "\n");
}

void model_print_list(FILE *fp, int C, int H, int W, int nclasses, backend *be)
{
    fprintf(fp, "models for %dx%dx%d inputs, %d classes (FLOPs: forward, per sample, conv + fc):\n",
            C, H, W, nclasses);
    if (be && be->ops->conv_describe)
        fprintf(fp, "(cpu convs: each convolution's algorithms on the CPU backend, in layer order: "
                    "forward/input grad/weight grad, or one name for all three)\n");
    for (const char *const *n = model_names(); *n; n++) {
        const model_def *d = model_def_find(*n);
        model m;
        errbuf e;
        if (model_layout(&m, d, C, H, W, nclasses, &e) != 0) {
            fprintf(fp, "  %-8s  does not fit: %s\n", d->name, e.msg);
        } else {
            fprintf(fp, "  %-8s %9zu params %9.2f MFLOP  %s; defaults lr %g momentum %g wd %g %s\n",
                    d->name, m.nparams_used, m.flops / 1e6, d->desc, d->hp.lr, d->hp.momentum,
                    d->hp.wd, lr_schedule_name(d->hp.schedule));
            if (be)
                print_conv_algos(fp, &m, be);
        }
        free(m.layers);
    }
}
