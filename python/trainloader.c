/* trainloader.c — train's loader as a CPython extension (stable ABI, 3.11+).
 *
 * The Python side (python/trainloader/__init__.py) turns keyword arguments
 * into train's own command line and hands it here; app/options.c parses it
 * and app/feed.c sets up the data, the transforms and the loader exactly as
 * `train --loader-only` does. The one difference is how the loader's
 * processes start: a Python process that imported torch has threads, so
 * nothing is forked from it. The loader's shared memory is a memfd and its
 * supervisor is a separate program (trainloader-supervisor, beside this
 * module) started by posix_spawn; it parses the same command line, maps
 * the memfd and forks the workers from its own single-threaded state.
 *
 * Batches are views of the ring: Array objects with the buffer protocol
 * and DLPack pointing at the slot itself. A slot goes back to the workers
 * when the next batch is asked for; an Array of an earlier batch then
 * refuses new views (BufferError) and .copy() keeps a batch for longer.
 *
 * The shared mapping that holds the ring belongs to a Mapping object, not
 * to the loader: the Loader and every view Array hold a reference, and so
 * does every exported view through its Array (a memoryview or numpy array
 * through the buffer protocol, a DLPack capsule or torch tensor through its
 * deleter). close() stops the loader's processes at once, but the munmap
 * waits for the last reference: a batch kept past the loader's life reads
 * the bytes it had, never unmapped memory.
 */
#define _GNU_SOURCE
#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlpack/dlpack.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "app/feed.h"
#include "loader/sampler.h"

static PyObject *g_error, *g_bad_input, *g_worker_lost;

/* ---------------------------------------------------------------- errors */

/* Raise the loader exception for status (LOADER_BAD_SAMPLE, ...) with msg. */
static PyObject *raise_status(int status, const char *msg)
{
    PyObject *type = status == LOADER_BAD_SAMPLE || status == RUN_BAD_INPUT ? g_bad_input
                     : status == LOADER_WORKER_LOST                         ? g_worker_lost
                                                                            : g_error;
    PyObject *exc = PyObject_CallFunction(type, "s", msg);
    if (!exc)
        return NULL;
    PyObject *st = PyLong_FromLong(status);
    if (st) {
        PyObject_SetAttrString(exc, "status", st);
        Py_DECREF(st);
    }
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
    return NULL;
}

/* ---------------------------------------------------------------- Loader */

typedef struct epoch_stats {
    int epoch, complete;
    uint32_t batches;
    uint64_t images, skipped;
    double t0, t1, wait, fill, read, decode;
} epoch_stats;

/* The loader's shared mapping (loader_disown_map), unmapped on the last
 * reference. */
typedef struct MappingObject {
    PyObject ob_base;
    void *base;
    size_t len;
} MappingObject;

typedef struct LoaderObject {
    PyObject ob_base; /* PyObject_HEAD */
    feed *f;          /* the data side (app/feed.h), or NULL once closed */
    PyObject *map;    /* MappingObject of the ring, or NULL */
    options o;
    int o_parsed;
    char **argv, **spawn; /* owned copies; o.argv points into argv */
    int argc;
    int rank, ranks, train;
    int next_epoch;
    int job; /* the current pass's job id, or -1 */
    uint32_t nbatches, taken;
    int holding; /* a batch is out (held) */
    loader_batch held;
    uint64_t generation; /* bumped when the held batch goes back */
    int busy;            /* a call is inside the loader (GIL released) */
    int building;        /* the preload build is the posted job (L->job) */
    pid_t pid;           /* the process that made it: a forked child must not stop it */
    double build_t0;
    epoch_stats st;
} LoaderObject;

static PyTypeObject *g_loader_type, *g_array_type, *g_mapping_type;

static void mapping_dealloc(PyObject *self)
{
    MappingObject *m = (MappingObject *)self;
    PyTypeObject *tp = Py_TYPE(self);
    if (m->base)
        munmap(m->base, m->len);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static PyType_Slot mapping_slots[] = {
    {Py_tp_dealloc, mapping_dealloc},
    {Py_tp_doc, "the loader's shared memory, unmapped when the last batch view goes"},
    {0, NULL}};

static PyType_Spec mapping_spec = {"trainloader._Mapping", sizeof(MappingObject), 0,
                                   Py_TPFLAGS_DEFAULT, mapping_slots};

/* ---------------------------------------------------------------- Array */

typedef struct ArrayObject {
    PyObject ob_base;
    LoaderObject *owner; /* a view of owner's ring; NULL: owns its memory */
    PyObject *map;       /* a view: the ring's MappingObject, kept mapped */
    uint64_t generation; /* owner's, when the view was made */
    uint64_t seq;        /* the batch's global number (views) */
    char *data;
    void *own;
    int ndim;
    Py_ssize_t shape[4], strides[4], itemsize;
    char format[2];
    DLDataTypeCode code;
} ArrayObject;

static Py_ssize_t array_nbytes(const ArrayObject *a)
{
    Py_ssize_t n = a->itemsize;
    for (int i = 0; i < a->ndim; i++)
        n *= a->shape[i];
    return n;
}

static int array_live(ArrayObject *a)
{
    if (a->owner && !a->owner->f) {
        PyErr_Format(PyExc_BufferError,
                     "batch %llu's loader is closed: take views before closing it (they stay "
                     "valid after), or keep a batch with .copy()",
                     (unsigned long long)a->seq);
        return 0;
    }
    if (a->owner && a->owner->generation != a->generation) {
        PyErr_Format(PyExc_BufferError,
                     "batch %llu's ring slot went back to the loader when the next batch was "
                     "asked for: take views before that, or keep a batch with .copy()",
                     (unsigned long long)a->seq);
        return 0;
    }
    return 1;
}

static ArrayObject *array_new(int ndim, const Py_ssize_t *shape, Py_ssize_t itemsize, char fmt,
                              DLDataTypeCode code)
{
    ArrayObject *a = PyObject_New(ArrayObject, g_array_type);
    if (!a)
        return NULL;
    a->owner = NULL;
    a->map = NULL;
    a->generation = a->seq = 0;
    a->data = NULL;
    a->own = NULL;
    a->ndim = ndim;
    a->itemsize = itemsize;
    a->format[0] = fmt;
    a->format[1] = 0;
    a->code = code;
    Py_ssize_t stride = itemsize;
    for (int i = ndim - 1; i >= 0; i--) {
        a->shape[i] = shape[i];
        a->strides[i] = stride;
        stride *= shape[i];
    }
    return a;
}

static void array_dealloc(PyObject *self)
{
    ArrayObject *a = (ArrayObject *)self;
    PyTypeObject *tp = Py_TYPE(self);
    Py_XDECREF((PyObject *)a->owner);
    Py_XDECREF(a->map); /* the last view of a closed loader's ring unmaps it */
    free(a->own);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static int array_getbuffer(PyObject *self, Py_buffer *v, int flags)
{
    ArrayObject *a = (ArrayObject *)self;
    if (!array_live(a))
        return -1;
    v->buf = a->data;
    v->obj = Py_NewRef(self);
    v->len = array_nbytes(a);
    v->readonly = 0;
    v->itemsize = a->itemsize;
    v->format = flags & PyBUF_FORMAT ? a->format : NULL;
    v->ndim = a->ndim;
    v->shape = a->shape;
    v->strides = a->strides;
    v->suboffsets = NULL;
    v->internal = NULL;
    return 0;
}

static void array_releasebuffer(PyObject *self, Py_buffer *v)
{
    (void)self;
    (void)v;
}

/* What a DLPack consumer holds: the tensor, its shape, and a reference to
 * the Array (which holds the ring's mapping). */
typedef struct dl_ctx {
    DLManagedTensor m;
    int64_t shape[4], strides[4];
    PyObject *base;
} dl_ctx;

static void dl_deleter(DLManagedTensor *m)
{
    dl_ctx *c = m->manager_ctx;
    PyGILState_STATE g = PyGILState_Ensure(); /* consumers may free without the GIL */
    Py_XDECREF(c->base);
    PyGILState_Release(g);
    free(c);
}

static void dl_capsule_free(PyObject *cap)
{
    if (!PyCapsule_IsValid(cap, "dltensor"))
        return; /* consumed: renamed "used_dltensor", the consumer calls the deleter */
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    if (m && m->deleter)
        m->deleter(m);
}

static PyObject *array_dlpack(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"stream", NULL};
    PyObject *stream = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$O", names, &stream))
        return NULL;
    if (stream != Py_None) {
        PyErr_SetString(PyExc_BufferError, "a host array takes no stream");
        return NULL;
    }
    ArrayObject *a = (ArrayObject *)self;
    if (!array_live(a))
        return NULL;
    dl_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return PyErr_NoMemory();
    for (int i = 0; i < a->ndim; i++) {
        c->shape[i] = a->shape[i];
        c->strides[i] = a->strides[i] / a->itemsize; /* DLPack counts elements */
    }
    c->base = Py_NewRef(self);
    DLTensor *t = &c->m.dl_tensor;
    t->data = a->data;
    t->device = (DLDevice){kDLCPU, 0};
    t->ndim = a->ndim;
    t->dtype = (DLDataType){(uint8_t)a->code, (uint8_t)(8 * a->itemsize), 1};
    t->shape = c->shape;
    t->strides = c->strides;
    t->byte_offset = 0;
    c->m.manager_ctx = c;
    c->m.deleter = dl_deleter;
    PyObject *cap = PyCapsule_New(&c->m, "dltensor", dl_capsule_free);
    if (!cap) {
        Py_DECREF(c->base);
        free(c);
    }
    return cap;
}

static PyObject *array_dlpack_device(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return Py_BuildValue("(ii)", (int)kDLCPU, 0);
}

static PyObject *array_copy(PyObject *self, PyObject *unused)
{
    (void)unused;
    ArrayObject *a = (ArrayObject *)self;
    if (!array_live(a))
        return NULL;
    ArrayObject *c = array_new(a->ndim, a->shape, a->itemsize, a->format[0], a->code);
    if (!c)
        return NULL;
    Py_ssize_t n = array_nbytes(a);
    c->own = malloc(n ? (size_t)n : 1);
    if (!c->own) {
        Py_DECREF((PyObject *)c);
        return PyErr_NoMemory();
    }
    memcpy(c->own, a->data, (size_t)n);
    c->data = c->own;
    return (PyObject *)c;
}

static PyObject *array_shape(PyObject *self, void *unused)
{
    (void)unused;
    ArrayObject *a = (ArrayObject *)self;
    PyObject *t = PyTuple_New(a->ndim);
    for (int i = 0; t && i < a->ndim; i++)
        PyTuple_SetItem(t, i, PyLong_FromSsize_t(a->shape[i]));
    return t;
}

static PyObject *array_dtype(PyObject *self, void *unused)
{
    (void)unused;
    return PyUnicode_FromString(((ArrayObject *)self)->format[0] == 'B' ? "uint8" : "int64");
}

static PyObject *array_data_ptr(PyObject *self, void *unused)
{
    (void)unused;
    return PyLong_FromVoidPtr(((ArrayObject *)self)->data);
}

static PyObject *array_is_view(PyObject *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(((ArrayObject *)self)->owner != NULL);
}

static Py_ssize_t array_len(PyObject *self) { return ((ArrayObject *)self)->shape[0]; }

static PyMethodDef array_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))array_dlpack, METH_VARARGS | METH_KEYWORDS,
     "DLPack capsule of this array (no copy)"},
    {"__dlpack_device__", array_dlpack_device, METH_NOARGS, "(kDLCPU, 0)"},
    {"copy", array_copy, METH_NOARGS, "an Array owning a copy of the data"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef array_getset[] = {
    {"shape", array_shape, NULL, "dimensions", NULL},
    {"dtype", array_dtype, NULL, "'uint8' or 'int64'", NULL},
    {"data_ptr", array_data_ptr, NULL, "address of the first element", NULL},
    {"is_view", array_is_view, NULL, "True for a view of the loader's ring", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot array_slots[] = {
    {Py_tp_dealloc, array_dealloc},
    {Py_tp_methods, array_methods},
    {Py_tp_getset, array_getset},
    {Py_bf_getbuffer, array_getbuffer},
    {Py_bf_releasebuffer, array_releasebuffer},
    {Py_sq_length, array_len},
    {Py_tp_doc,
     "A batch's images (uint8 N,C,H,W) or labels (int64 N): buffer protocol and DLPack."},
    {0, NULL}};

static PyType_Spec array_spec = {"trainloader.Array", sizeof(ArrayObject), 0, Py_TPFLAGS_DEFAULT,
                                 array_slots};

/* ---------------------------------------------------------------- Loader */

/* loader_config.should_stop: run Python's signal handlers (Ctrl-C raises
 * KeyboardInterrupt there) while loader_next waits without the GIL. */
static int py_should_stop(void *ctx)
{
    (void)ctx;
    PyGILState_STATE g = PyGILState_Ensure();
    int stop = PyErr_CheckSignals() != 0;
    PyGILState_Release(g);
    return stop;
}

static void free_strv(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* The held batch goes back to the ring (its Arrays stop making views). */
static void give_back(LoaderObject *L)
{
    if (!L->holding)
        return;
    loader_release(L->f->ldr, &L->held);
    L->holding = 0;
    L->generation++;
}

static void loader_close_impl(LoaderObject *L)
{
    if (!L->f)
        return;
    if (getpid() != L->pid) { /* a fork of the Python process (os.fork, multiprocessing):
                                 the loader is its parent's; forget it, stop nothing */
        L->f = NULL;
        L->holding = 0;
        L->generation++;
        Py_CLEAR(L->map);
        return;
    }
    L->holding = 0; /* not given back: no worker may refill the slot a kept view reads */
    feed *f = L->f;
    L->f = NULL;
    L->generation++;
    PyThreadState *ts = PyEval_SaveThread();
    feed_close(f); /* stops and reaps every loader process; the mapping stays */
    PyEval_RestoreThread(ts);
    free(f);
    Py_CLEAR(L->map); /* unmapped now, or when the last batch view goes */
}

static void loader_dealloc(PyObject *self)
{
    LoaderObject *L = (LoaderObject *)self;
    PyTypeObject *tp = Py_TYPE(self);
    loader_close_impl(L);
    Py_CLEAR(L->map);
    if (L->o_parsed)
        options_free(&L->o);
    free_strv(L->argv);
    free_strv(L->spawn);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static char **strv_from_list(PyObject *list, Py_ssize_t *n_out)
{
    Py_ssize_t n = PyList_Size(list);
    if (n < 0)
        return NULL;
    char **v = calloc((size_t)n + 1, sizeof *v);
    if (!v)
        return (char **)PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PyList_GetItem(list, i);
        /* the file system's encoding, as os.fsencode: a name that is not
         * UTF-8 (os.fsdecode of bytes) comes back as its own bytes */
        PyObject *b = s && PyUnicode_Check(s) ? PyUnicode_EncodeFSDefault(s) : NULL;
        if (s && !PyUnicode_Check(s))
            PyErr_Format(PyExc_TypeError, "argument %zd (%R) is not a str", i, s);
        char *u = NULL;
        Py_ssize_t len = 0;
        if (b && PyBytes_AsStringAndSize(b, &u, &len) == 0 && strlen(u) != (size_t)len) {
            /* C strings: a NUL would cut it short */
            PyErr_Format(PyExc_ValueError, "argument %zd (%R) contains a NUL character", i, s);
            u = NULL;
        }
        if (!u || !(v[i] = strdup(u))) {
            if (!PyErr_Occurred())
                PyErr_NoMemory();
            Py_XDECREF(b);
            free_strv(v);
            return NULL;
        }
        Py_DECREF(b);
    }
    *n_out = n;
    return v;
}

/* _trainloader.Loader(argv, supervisor, rank=0, world_size=1, train=True) */
static PyObject *loader_new_py(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"argv", "supervisor", "rank", "world_size", "train", NULL};
    PyObject *list;
    const char *sup;
    int rank = 0, ranks = 1, train = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!s|iip", names, &PyList_Type, &list, &sup, &rank,
                                     &ranks, &train))
        return NULL;
    if (ranks < 1 || rank < 0 || rank >= ranks) {
        PyErr_Format(PyExc_ValueError, "rank=%d, world_size=%d: need 0 <= rank < world_size", rank,
                     ranks);
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    LoaderObject *L = (LoaderObject *)alloc(type, 0);
    if (!L)
        return NULL;
    L->job = -1;
    L->pid = getpid();
    L->rank = rank;
    L->ranks = ranks;
    L->train = train;
    Py_ssize_t n = 0;
    if (!(L->argv = strv_from_list(list, &n)))
        goto fail;
    L->argc = (int)n;
    errbuf e = {{0}};
    if (options_parse_to(&L->o, L->argc, L->argv, &e) != 0) {
        L->o_parsed = 1;
        PyErr_SetString(PyExc_ValueError, e.msg[0] ? e.msg : "bad options");
        goto fail;
    }
    L->o_parsed = 1;
    if (options_is_sweep(&L->o)) {
        PyErr_SetString(PyExc_ValueError,
                        "one value per option: lists of values are train's sweeps (run one "
                        "Loader per configuration)");
        goto fail;
    }
    if (L->o.workers.v[0] < 0) {
        PyErr_SetString(PyExc_ValueError,
                        "workers='auto' is train's probe of the whole job: give a number here");
        goto fail;
    }
    /* the supervisor gets the same command line: argv[0] is its path */
    L->spawn = calloc((size_t)L->argc + 1, sizeof *L->spawn);
    if (!L->spawn || !(L->spawn[0] = strdup(sup))) {
        PyErr_NoMemory();
        goto fail;
    }
    for (int i = 1; i < L->argc; i++)
        if (!(L->spawn[i] = strdup(L->argv[i]))) {
            PyErr_NoMemory();
            goto fail;
        }
    feed *f = calloc(1, sizeof *f);
    if (!f) {
        PyErr_NoMemory();
        goto fail;
    }
    loader_config extra = {.spawn_argv = L->spawn, .should_stop = py_should_stop};
    int rc;
    PyThreadState *ts = PyEval_SaveThread();
    rc = feed_open(f, &L->o, FEED_SPAWN, rank, ranks, &e);
    if (rc == RUN_OK)
        rc = feed_loader(f, &extra, &e);
    if (rc != RUN_OK)
        feed_close(f);
    PyEval_RestoreThread(ts);
    if (rc != RUN_OK) {
        free(f);
        raise_status(rc, e.msg);
        goto fail;
    }
    MappingObject *m = PyObject_New(MappingObject, g_mapping_type);
    if (!m) {
        ts = PyEval_SaveThread();
        feed_close(f);
        PyEval_RestoreThread(ts);
        free(f);
        goto fail;
    }
    loader_disown_map(f->ldr, &m->base, &m->len); /* the Mapping unmaps it, last */
    L->map = (PyObject *)m;
    L->f = f;
    return (PyObject *)L;
fail:
    Py_DECREF((PyObject *)L);
    return NULL;
}

static int loader_usable(LoaderObject *L)
{
    if (L->f && getpid() != L->pid) {
        PyErr_SetString(PyExc_RuntimeError,
                        "this loader belongs to the process that made it, not to a fork of it: "
                        "make a Loader in the child");
        return 0;
    }
    if (!L->f) {
        PyErr_SetString(PyExc_ValueError, "the loader is closed");
        return 0;
    }
    if (L->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the loader is in use by another thread");
        return 0;
    }
    return 1;
}

static uint32_t pass_batches(const LoaderObject *L)
{
    const dataset *d = &L->f->train;
    int drop = L->train && L->o.drop_last;
    return sampler_batches(d->n, (uint32_t)L->f->batch, drop);
}

/* mode=preload, before the first pass: the workers decode every training
 * sample into the cache (a memfd, or the --cache file's temporary, that
 * the supervisor maps too), then a --cache file is committed. Without the
 * GIL. */
static int build_cache(LoaderObject *L, errbuf *e)
{
    feed *f = L->f;
    if (!L->building) { /* the build is a pass like the others: a Ctrl-C in it resumes */
        L->job = feed_post_build(f);
        L->nbatches = load_job_batches(f->ldr, L->job);
        L->taken = 0;
        L->building = 1;
        L->build_t0 = now_sec();
    }
    for (; L->taken < L->nbatches; L->taken++) {
        loader_batch b;
        int rc = loader_next(f->ldr, &b, e);
        if (rc != LOADER_OK)
            return rc;
        loader_release(f->ldr, &b);
    }
    L->building = 0;
    return feed_cache_built(f, L->build_t0, e) == 0 ? LOADER_OK : RUN_BAD_INPUT;
}

/* Loader.begin(epoch): post the pass over the data for epoch (finishing
 * the batches of an abandoned pass first); returns its batch count. */
static PyObject *loader_begin(PyObject *self, PyObject *args)
{
    LoaderObject *L = (LoaderObject *)self;
    int epoch;
    if (!PyArg_ParseTuple(args, "i", &epoch) || !loader_usable(L))
        return NULL;
    if (epoch < 0) {
        PyErr_Format(PyExc_ValueError, "epoch %d: must be >= 0", epoch);
        return NULL;
    }
    give_back(L);
    errbuf e = {{0}};
    int rc = LOADER_OK;
    L->busy = 1;
    /* batches are taken strictly in order: an abandoned pass's rest is
     * drained (loaded and dropped) before the next pass starts */
    PyThreadState *ts = PyEval_SaveThread();
    while (L->job >= 0 && L->taken < L->nbatches) {
        loader_batch b;
        rc = loader_next(L->f->ldr, &b, &e);
        if (rc != LOADER_OK)
            break;
        loader_release(L->f->ldr, &b);
        L->taken++;
    }
    if (rc == LOADER_OK && L->f->use_cache && !L->f->cache.ready)
        rc = build_cache(L, &e);
    PyEval_RestoreThread(ts);
    L->busy = 0;
    if (rc != LOADER_OK) {
        if (PyErr_Occurred())
            return NULL;
        loader_close_impl(L); /* a failed loader cannot go on: its processes stop now */
        return raise_status(rc, e.msg);
    }
    feed *f = L->f;
    load_job j = {.src = 0,
                  .kind = L->train ? LOAD_JOB_TRAIN : LOAD_JOB_EVAL,
                  .epoch = (uint32_t)epoch,
                  .shuffle = L->train && L->o.shuffle,
                  .drop_last = L->train && L->o.drop_last};
    L->job = feed_post_pass(f, j); /* this rank's share (feed_open) */
    L->nbatches = load_job_batches(f->ldr, L->job);
    L->taken = 0;
    memset(&L->st, 0, sizeof L->st);
    L->st.epoch = epoch;
    L->st.t0 = NAN;
    return PyLong_FromUnsignedLong(L->nbatches);
}

/* Loader.next(): (images, labels) of the next batch of the pass, or None
 * after its last. The previous batch's slot goes back first. */
static PyObject *loader_next_py(PyObject *self, PyObject *unused)
{
    (void)unused;
    LoaderObject *L = (LoaderObject *)self;
    if (!loader_usable(L))
        return NULL;
    give_back(L);
    double t = now_sec();
    if (L->job < 0 || L->taken >= L->nbatches) {
        if (L->job >= 0 && !L->st.complete) {
            L->st.complete = 1;
            L->st.t1 = t;
        }
        Py_RETURN_NONE;
    }
    if (isnan(L->st.t0))
        L->st.t0 = t;
    errbuf e = {{0}};
    int rc;
    L->busy = 1;
    PyThreadState *ts = PyEval_SaveThread();
    rc = loader_next(L->f->ldr, &L->held, &e);
    PyEval_RestoreThread(ts);
    L->busy = 0;
    if (rc != LOADER_OK) {
        if (PyErr_Occurred()) /* KeyboardInterrupt from py_should_stop: the loader can go on */
            return NULL;
        loader_close_impl(L); /* a failed loader cannot go on: its processes stop now */
        return raise_status(rc == LOADER_END ? LOADER_WORKER_LOST : rc,
                            rc == LOADER_END ? "internal: the loader ended early" : e.msg);
    }
    L->holding = 1;
    L->taken++;
    const loader_batch *b = &L->held;
    epoch_stats *s = &L->st;
    s->batches++;
    s->images += b->count;
    s->skipped += b->skipped;
    s->wait += b->wait_s;
    s->fill += b->fill_s;
    s->read += b->read_s;
    s->decode += b->decode_s;
    s->t1 = now_sec();
    const sample_setup *ss = &L->f->ss;
    Py_ssize_t ishape[4] = {b->count, ss->channels, ss->out_h, ss->out_w}, lshape[1] = {b->count};
    ArrayObject *img = array_new(4, ishape, 1, 'B', kDLUInt);
    ArrayObject *lab = array_new(1, lshape, 8, 'q', kDLInt);
    if (!img || !lab) {
        Py_XDECREF((PyObject *)img);
        Py_XDECREF((PyObject *)lab);
        return NULL;
    }
    img->owner = (LoaderObject *)Py_NewRef(self);
    img->map = Py_NewRef(L->map);
    img->generation = L->generation;
    img->seq = b->seq;
    img->data = (char *)b->data;
    lab->own = malloc(sizeof(int64_t) * (b->count ? b->count : 1));
    if (!lab->own) {
        Py_DECREF((PyObject *)img);
        Py_DECREF((PyObject *)lab);
        return PyErr_NoMemory();
    }
    for (uint32_t i = 0; i < b->count; i++)
        ((int64_t *)lab->own)[i] = b->labels[i];
    lab->data = lab->own;
    PyObject *idx = PyList_New(b->count);
    for (uint32_t i = 0; idx && i < b->count; i++)
        PyList_SetItem(idx, i, PyLong_FromUnsignedLong(b->indices[i]));
    if (!idx) {
        Py_DECREF((PyObject *)img);
        Py_DECREF((PyObject *)lab);
        return NULL;
    }
    return Py_BuildValue("(NNN)", img, lab, idx);
}

static PyObject *loader_close_py(PyObject *self, PyObject *unused)
{
    (void)unused;
    LoaderObject *L = (LoaderObject *)self;
    if (L->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the loader is in use by another thread");
        return NULL;
    }
    loader_close_impl(L);
    Py_RETURN_NONE;
}

static PyObject *loader_info(PyObject *self, PyObject *unused)
{
    (void)unused;
    LoaderObject *L = (LoaderObject *)self;
    if (!loader_usable(L))
        return NULL;
    feed *f = L->f;
    PyObject *classes = PyList_New(f->train.nclasses);
    for (uint32_t c = 0; classes && c < f->train.nclasses; c++) {
        char buf[16];
        PyList_SetItem(
            classes, c,
            /* a folder's name as os.fsdecode gives it (not UTF-8: escaped) */
            PyUnicode_DecodeFSDefault(dataset_class_name(&f->train, c, buf, sizeof buf)));
    }
    if (!classes)
        return NULL;
    size_t ring_bytes;
    void *ring = loader_ring(f->ldr, &ring_bytes);
    return Py_BuildValue(
        "{s:N,s:I,s:I,s:i,s:(iii),s:N,s:n,s:i,s:i,s:N,s:s,s:N}", "classes", classes, "samples",
        f->train.n, "batches_per_epoch", pass_batches(L), "batch", f->batch, "sample_shape",
        f->ss.channels, f->ss.out_h, f->ss.out_w, "ring_address", PyLong_FromVoidPtr(ring),
        "ring_bytes", (Py_ssize_t)ring_bytes, "workers", f->workers, "prefetch", f->prefetch,
        "data", PyUnicode_DecodeFSDefault(f->train.csv_path), "mode", mode_name(f->mode),
        "cache_note", PyUnicode_DecodeFSDefault(f->use_cache ? f->cache.note : ""));
}

static PyObject *loader_pids_py(PyObject *self, PyObject *unused)
{
    (void)unused;
    LoaderObject *L = (LoaderObject *)self;
    if (!L->f)
        return PyList_New(0);
    int pids[LOADER_MAX_WORKERS + 1];
    int n = loader_pids(L->f->ldr, pids, LOADER_MAX_WORKERS + 1);
    PyObject *l = PyList_New(n);
    for (int i = 0; l && i < n; i++)
        PyList_SetItem(l, i, PyLong_FromLong(pids[i]));
    return l;
}

static PyObject *loader_stats_py(PyObject *self, PyObject *unused)
{
    (void)unused;
    LoaderObject *L = (LoaderObject *)self;
    const epoch_stats *s = &L->st;
    double secs = isnan(s->t0) || s->batches == 0 ? 0 : s->t1 - s->t0;
    double transform = s->fill - s->read - s->decode;
    double build = L->f && L->f->use_cache ? L->f->build_s : 0.0;
    return Py_BuildValue(
        "{s:d,s:i,s:O,s:I,s:K,s:K,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d}", "build_s", build, "epoch",
        s->epoch, "complete", s->complete ? Py_True : Py_False, "batches", s->batches, "images",
        (unsigned long long)s->images, "skipped", (unsigned long long)s->skipped, "seconds", secs,
        "images_per_s", secs > 0 ? (double)s->images / secs : 0.0, "wait_s", s->wait, "wait_pct",
        secs > 0 ? 100 * s->wait / secs : 0.0, "fill_s", s->fill, "read_s", s->read, "decode_s",
        s->decode, "transform_s", transform > 0 ? transform : 0.0);
}

static PyMethodDef loader_methods[] = {
    {"begin", loader_begin, METH_VARARGS, "begin(epoch) -> batches: post the pass for epoch"},
    {"next", loader_next_py, METH_NOARGS,
     "next() -> (images, labels, indices) or None after the pass's last batch"},
    {"close", loader_close_py, METH_NOARGS, "stop and reap every loader process"},
    {"info", loader_info, METH_NOARGS, "the data set, sample shape and ring"},
    {"pids", loader_pids_py, METH_NOARGS, "pids of the supervisor and the live workers"},
    {"stats", loader_stats_py, METH_NOARGS, "the current or last pass's loader statistics"},
    {NULL, NULL, 0, NULL}};

static PyType_Slot loader_slots[] = {{Py_tp_new, loader_new_py},
                                     {Py_tp_dealloc, loader_dealloc},
                                     {Py_tp_methods, loader_methods},
                                     {Py_tp_doc, "train's loader (use trainloader.Loader)"},
                                     {0, NULL}};

static PyType_Spec loader_spec = {"trainloader._Loader", sizeof(LoaderObject), 0,
                                  Py_TPFLAGS_DEFAULT, loader_slots};

/* ---------------------------------------------------------------- module */

/* option_arg(name) -> 0 flag, 1 takes a value, 2 only as --name=VALUE, -1 unknown */
static PyObject *option_arg_py(PyObject *mod, PyObject *args)
{
    (void)mod;
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name))
        return NULL;
    return PyLong_FromLong(options_arg(name));
}

/* option_section(name) -> the --help section of --name, or None */
static PyObject *option_section_py(PyObject *mod, PyObject *args)
{
    (void)mod;
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name))
        return NULL;
    const char *t = options_section(name);
    if (!t)
        Py_RETURN_NONE;
    return PyUnicode_FromString(t);
}

static PyMethodDef module_methods[] = {
    {"option_section", option_section_py, METH_VARARGS,
     "the --help section train's option --NAME is listed under, or None"},
    {"option_arg", option_arg_py, METH_VARARGS,
     "whether train's option --NAME takes a value (0 no, 1 yes, 2 as --NAME=V, -1 unknown)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT,
                                        "_trainloader",
                                        "train's loader (see trainloader)",
                                        -1,
                                        module_methods,
                                        NULL,
                                        NULL,
                                        NULL,
                                        NULL};

PyMODINIT_FUNC PyInit__trainloader(void);
PyMODINIT_FUNC PyInit__trainloader(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    g_array_type = (PyTypeObject *)PyType_FromSpec(&array_spec);
    g_loader_type = (PyTypeObject *)PyType_FromSpec(&loader_spec);
    g_mapping_type = (PyTypeObject *)PyType_FromSpec(&mapping_spec);
    g_error = PyErr_NewExceptionWithDoc("trainloader.LoaderError",
                                        "the loader failed; .status is train's exit status",
                                        PyExc_RuntimeError, NULL);
    g_bad_input = PyErr_NewExceptionWithDoc(
        "trainloader.BadInput", "a file, row or option the loader cannot use (status 2)", g_error,
        NULL);
    g_worker_lost = PyErr_NewExceptionWithDoc(
        "trainloader.WorkerLost", "a loader worker died or timed out (status 3)", g_error, NULL);
    if (!g_array_type || !g_loader_type || !g_mapping_type || !g_error || !g_bad_input ||
        !g_worker_lost || PyModule_AddObjectRef(m, "Array", (PyObject *)g_array_type) < 0 ||
        PyModule_AddObjectRef(m, "_Loader", (PyObject *)g_loader_type) < 0 ||
        PyModule_AddObjectRef(m, "LoaderError", g_error) < 0 ||
        PyModule_AddObjectRef(m, "BadInput", g_bad_input) < 0 ||
        PyModule_AddObjectRef(m, "WorkerLost", g_worker_lost) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
