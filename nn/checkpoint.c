/* checkpoint.c — the checkpoint file (checkpoint.h): build it in memory,
 * write it atomically; read it whole, verify, parse with bounds checks,
 * compare with the model, and only then upload.
 *
 * Left out: compression, reading versions other than 1 and 2, partial
 * loads (e.g. parameters without the optimiser state), big-endian hosts.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "nn/checkpoint.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint.c writes host-order (little-endian) numbers"
#endif

static const char MAGIC[8] = CKPT_MAGIC;
#define BOM 0x01020304u
#define HEADER_BYTES 24 /* magic, version, byte-order mark, file size */
#define STR_MAX 4096
/* The largest file read back: far above any model train builds (resnet18's
 * parameters and momentum are under 100 MB), far below what would exhaust
 * memory by accident. Only regular files are read (read_regular_file): a
 * FIFO or /dev/zero is refused, not read until memory runs out. */
#define CKPT_MAX_BYTES ((size_t)16 << 30)

/* ---------------------------------------------------------------- writing */
typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
} wbuf;

static void put(wbuf *w, const void *src, size_t n)
{
    if (w->len + n > w->cap) {
        w->cap = (w->len + n) * 2;
        w->p = xrealloc(w->p, w->cap);
    }
    memcpy(w->p + w->len, src, n);
    w->len += n;
}

static void put_u32(wbuf *w, uint32_t v) { put(w, &v, 4); }

static void put_u64(wbuf *w, uint64_t v) { put(w, &v, 8); }

static void put_f64(wbuf *w, double v) { put(w, &v, 8); }

static void put_str(wbuf *w, const char *s)
{
    size_t n = strlen(s);
    put_u32(w, (uint32_t)n);
    put(w, s, n);
}

int checkpoint_save(const char *path, const model *m, const char *const *classes,
                    const ckpt_state *st, errbuf *e)
{
    for (int i = 0; i < m->nclasses; i++)
        if (!classes || !classes[i] || strlen(classes[i]) > STR_MAX)
            return errf(e, "%s: class name %d is missing or longer than %d bytes", path, i,
                        STR_MAX);
    wbuf w = {0};
    put(&w, MAGIC, 8);
    put_u32(&w, CKPT_VERSION);
    put_u32(&w, BOM);
    put_u64(&w, 0); /* file size, patched below */
    put_str(&w, m->name);
    put_u32(&w, (uint32_t)m->C);
    put_u32(&w, (uint32_t)m->H);
    put_u32(&w, (uint32_t)m->W);
    put_u32(&w, (uint32_t)m->nclasses);
    put(&w, m->mean, (size_t)m->C * sizeof(float));
    put(&w, m->std, (size_t)m->C * sizeof(float));
    for (int i = 0; i < m->nclasses; i++)
        put_str(&w, classes[i]);
    put_u32(&w, (uint32_t)m->ntensors);
    for (int i = 0; i < m->ntensors; i++) {
        const model_tensor *t = &m->tensors[i];
        put_str(&w, t->name);
        put_u32(&w, (uint32_t)t->ndim);
        for (int d = 0; d < 4; d++)
            put_u32(&w, (uint32_t)t->shape[d]);
        put_u64(&w, t->offset);
        put_u64(&w, t->n);
    }
    put_u64(&w, m->nparams);
    put_u64(&w, (uint64_t)st->epoch);
    put_u64(&w, (uint64_t)st->step);
    put_u64(&w, st->seed);
    put_u64(&w, (uint64_t)st->epochs);
    put_u32(&w, (uint32_t)st->batch);
    put_u32(&w, (uint32_t)st->schedule);
    put_f64(&w, st->lr);
    put_f64(&w, st->momentum);
    put_f64(&w, st->wd);
    put_u64(&w, st->data.n); /* version 2 */
    put_u64(&w, st->data.nclasses);
    put_u64(&w, st->data.hash);
    size_t bytes = m->nparams * sizeof(float);
    float *host = xmalloc(bytes ? bytes : 1);
    m->be->ops->download(m->be, host, m->params, bytes);
    put(&w, host, bytes);
    m->be->ops->download(m->be, host, m->momentum, bytes);
    put(&w, host, bytes);
    free(host);
    uint64_t size = w.len + 8;
    memcpy(w.p + 16, &size, 8);
    put_u64(&w, hash64(w.p, w.len, 0));
    int rc = write_file_atomic(path, w.p, w.len, e);
    free(w.p);
    return rc;
}

/* ---------------------------------------------------------------- reading */
typedef struct rbuf {
    const uint8_t *p;
    size_t len, pos;
    int bad;
} rbuf;

static const void *take(rbuf *r, size_t n)
{
    if (r->bad || n > r->len - r->pos) {
        r->bad = 1;
        return NULL;
    }
    const void *q = r->p + r->pos;
    r->pos += n;
    return q;
}

static uint32_t get_u32(rbuf *r)
{
    uint32_t v = 0;
    const void *q = take(r, 4);
    if (q)
        memcpy(&v, q, 4);
    return v;
}

static uint64_t get_u64(rbuf *r)
{
    uint64_t v = 0;
    const void *q = take(r, 8);
    if (q)
        memcpy(&v, q, 8);
    return v;
}

static double get_f64(rbuf *r)
{
    double v = 0;
    const void *q = take(r, 8);
    if (q)
        memcpy(&v, q, 8);
    return v;
}

/* a length-prefixed string into a malloc'd NUL-terminated copy */
static char *get_str(rbuf *r)
{
    uint32_t n = get_u32(r);
    if (n > STR_MAX) {
        r->bad = 1;
        return NULL;
    }
    const char *q = take(r, n);
    if (!q)
        return NULL;
    char *s = xmalloc((size_t)n + 1);
    memcpy(s, q, n);
    s[n] = '\0';
    return s;
}

/* everything in the file, parsed; params/momentum point into the buffer */
typedef struct ckpt_file {
    uint8_t *buf;
    ckpt_info info;
    int ntensors;
    model_tensor tensors[MODEL_MAX_TENSORS];
    const uint8_t *params, *momentum;
} ckpt_file;

static void ckpt_file_free(ckpt_file *f)
{
    ckpt_info_free(&f->info);
    free(f->buf);
    f->buf = NULL;
}

static int read_ckpt(const char *path, ckpt_file *f, errbuf *e)
{
    memset(f, 0, sizeof *f);
    size_t len;
    f->buf = (uint8_t *)read_regular_file(path, CKPT_MAX_BYTES, &len, e);
    if (!f->buf)
        return -1;
    ckpt_info *in = &f->info;
    if (len < 8 || memcmp(f->buf, MAGIC, 8) != 0)
        return errf(e, "%s: not a train checkpoint (no TRAINCKP magic)", path);
    rbuf r = {f->buf, len, 8, 0};
    uint32_t version = get_u32(&r), bom = get_u32(&r);
    uint64_t size = get_u64(&r);
    if (r.bad)
        return errf(e, "%s: truncated checkpoint (%zu bytes, not even a header)", path, len);
    if (bom != BOM)
        return errf(e, "%s: checkpoint written on a machine of another byte order", path);
    if (version != CKPT_VERSION && version != 1)
        return errf(e, "%s: checkpoint version %u, this program reads versions 1 to %d", path,
                    version, CKPT_VERSION);
    if (size != len)
        return errf(e, "%s: %s checkpoint: %zu bytes, its header says %llu", path,
                    len < size ? "truncated" : "oversized", len, (unsigned long long)size);
    if (len < HEADER_BYTES + 8)
        return errf(e, "%s: truncated checkpoint (%zu bytes)", path, len);
    uint64_t sum;
    memcpy(&sum, f->buf + len - 8, 8);
    if (hash64(f->buf, len - 8, 0) != sum)
        return errf(e, "%s: checkpoint is corrupt (checksum mismatch)", path);
    r.len = len - 8;

    char *name = get_str(&r);
    if (name) {
        snprintf(in->model, sizeof in->model, "%s", name);
        free(name);
    }
    in->C = (int)get_u32(&r);
    in->H = (int)get_u32(&r);
    in->W = (int)get_u32(&r);
    in->nclasses = (int)get_u32(&r);
    if (r.bad || in->C < 1 || in->C > MODEL_MAX_CHANNELS || in->H < 1 || in->W < 1 ||
        in->nclasses < 1 || in->nclasses > 1000000)
        return errf(e, "%s: checkpoint has an impossible model header", path);
    const void *q = take(&r, (size_t)in->C * sizeof(float));
    if (q)
        memcpy(in->mean, q, (size_t)in->C * sizeof(float));
    q = take(&r, (size_t)in->C * sizeof(float));
    if (q)
        memcpy(in->std, q, (size_t)in->C * sizeof(float));
    in->classes = xcalloc((size_t)in->nclasses, sizeof(char *));
    for (int i = 0; i < in->nclasses && !r.bad; i++)
        in->classes[i] = get_str(&r);
    uint32_t nt = get_u32(&r);
    if (r.bad || nt > MODEL_MAX_TENSORS)
        return errf(e, "%s: checkpoint has an impossible tensor table", path);
    f->ntensors = (int)nt;
    for (int i = 0; i < f->ntensors; i++) {
        model_tensor *t = &f->tensors[i];
        char *tn = get_str(&r);
        if (tn) {
            snprintf(t->name, sizeof t->name, "%s", tn);
            free(tn);
        }
        t->ndim = (int)get_u32(&r);
        for (int d = 0; d < 4; d++)
            t->shape[d] = (int)get_u32(&r);
        t->offset = get_u64(&r);
        t->n = get_u64(&r);
    }
    in->nparams = get_u64(&r);
    ckpt_state *st = &in->state;
    st->epoch = (int64_t)get_u64(&r);
    st->step = (int64_t)get_u64(&r);
    st->seed = get_u64(&r);
    st->epochs = (int64_t)get_u64(&r);
    st->batch = (int32_t)get_u32(&r);
    st->schedule = (int32_t)get_u32(&r);
    st->lr = get_f64(&r);
    st->momentum = get_f64(&r);
    st->wd = get_f64(&r);
    if (version >= 2) { /* the data's fingerprint; version 1 had none */
        st->data.n = get_u64(&r);
        st->data.nclasses = get_u64(&r);
        st->data.hash = get_u64(&r);
        st->has_data = st->data.n > 0; /* 0 samples: saved without (no data set has none) */
    }
    if (r.bad || in->nparams > (r.len - r.pos) / (2 * sizeof(float)))
        return errf(e, "%s: checkpoint is malformed (fields run past the end)", path);
    f->params = take(&r, in->nparams * sizeof(float));
    f->momentum = take(&r, in->nparams * sizeof(float));
    if (r.bad || r.pos != r.len)
        return errf(e, "%s: checkpoint is malformed (%zu unexplained bytes)", path, r.len - r.pos);
    return 0;
}

int checkpoint_read_info(const char *path, ckpt_info *info, errbuf *e)
{
    ckpt_file f;
    memset(info, 0, sizeof *info);
    if (read_ckpt(path, &f, e) != 0) {
        ckpt_file_free(&f);
        return -1;
    }
    *info = f.info;
    memset(&f.info, 0, sizeof f.info);
    ckpt_file_free(&f);
    return 0;
}

void ckpt_info_free(ckpt_info *info)
{
    if (info->classes)
        for (int i = 0; i < info->nclasses; i++)
            free(info->classes[i]);
    free(info->classes);
    info->classes = NULL;
}

/* the file's model against the run's, field by field */
static int compare(const char *path, const ckpt_file *f, const model *m, const char *const *classes,
                   errbuf *e)
{
    const ckpt_info *in = &f->info;
    if (strcmp(in->model, m->name) != 0)
        return errf(e, "%s: checkpoint of model '%s', this run's model is '%s'", path, in->model,
                    m->name);
    if (in->C != m->C || in->H != m->H || in->W != m->W)
        return errf(e, "%s: checkpoint for %dx%dx%d inputs, this run's are %dx%dx%d", path, in->C,
                    in->H, in->W, m->C, m->H, m->W);
    if (in->nclasses != m->nclasses)
        return errf(e, "%s: checkpoint has %d classes, this run has %d", path, in->nclasses,
                    m->nclasses);
    if (classes)
        for (int i = 0; i < m->nclasses; i++)
            if (!classes[i] || strcmp(in->classes[i], classes[i]) != 0)
                return errf(e, "%s: class %d is '%s' in the checkpoint, '%s' in this run", path, i,
                            in->classes[i], classes[i] ? classes[i] : "(none)");
    if (f->ntensors != m->ntensors || in->nparams != m->nparams)
        return errf(e, "%s: checkpoint has %d tensors (%llu floats), the model %d (%zu floats)",
                    path, f->ntensors, (unsigned long long)in->nparams, m->ntensors, m->nparams);
    for (int i = 0; i < m->ntensors; i++) {
        const model_tensor *a = &f->tensors[i], *b = &m->tensors[i];
        if (strcmp(a->name, b->name) != 0 || a->ndim != b->ndim || a->offset != b->offset ||
            a->n != b->n || memcmp(a->shape, b->shape, sizeof a->shape) != 0)
            return errf(e,
                        "%s: tensor %d is %s [%d,%d,%d,%d] in the checkpoint, %s [%d,%d,%d,%d] in "
                        "the model",
                        path, i, a->name, a->shape[0], a->shape[1], a->shape[2], a->shape[3],
                        b->name, b->shape[0], b->shape[1], b->shape[2], b->shape[3]);
    }
    for (int c = 0; c < m->C; c++)
        if (!(in->std[c] > 0.0f))
            return errf(e, "%s: checkpoint has a non-positive normalisation std", path);
    return 0;
}

int checkpoint_load(const char *path, model *m, const char *const *classes, ckpt_state *st,
                    errbuf *e)
{
    ckpt_file f;
    if (read_ckpt(path, &f, e) != 0 || compare(path, &f, m, classes, e) != 0) {
        ckpt_file_free(&f);
        return -1;
    }
    /* everything checked: now change the model */
    size_t bytes = m->nparams * sizeof(float);
    m->be->ops->upload(m->be, m->params, f.params, bytes);
    m->be->ops->upload(m->be, m->momentum, f.momentum, bytes);
    memcpy(m->mean, f.info.mean, sizeof m->mean);
    memcpy(m->std, f.info.std, sizeof m->std);
    if (st)
        *st = f.info.state;
    ckpt_file_free(&f);
    return 0;
}
