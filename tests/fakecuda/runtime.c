/* runtime.c — the fake CUDA runtime: device memory registry, copies,
 * memsets, streams and events run lazily, page-locked host ranges, device
 * queries, errors, and the hooks the emulated kernels launch through.
 * See fake.h for the model and what it catches.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "internal.h"

/* ---------------------------------------------------------------- objects */

struct CUstream_st {
    unsigned flags;
    int live;
    struct fk_op *head, *tail;
    int pending;
};

struct CUevent_st {
    unsigned flags;
    int live;
    unsigned recorded, completed; /* sequence numbers of records issued / run */
    cudaStream_t stream;          /* where the last record was issued */
    double time_ms;               /* fake clock when the last record ran */
};

typedef struct fk_op {
    struct fk_op *next;
    const char *name;
    void (*run)(void *);
    void (*drop)(void *);
    void *arg;
    /* host range read when it runs, and its hash at enqueue */
    const void *host;
    size_t host_bytes;
    uint64_t host_hash;
    /* an event record, or a wait for an event's record number */
    cudaEvent_t rec, wait;
    cudaStream_t wait_stream; /* where the awaited record was issued */
    unsigned seq;
    int fault; /* running it raises the sticky asynchronous error */
} fk_op;

typedef struct alloc {
    char *base;
    size_t size;
    int live;
    int id;
} alloc;

typedef struct range {
    char *base;
    size_t size;
} range;

#define KNOB_MAX 16
typedef struct knob {
    char api[64];
    int status;
    int corrupt;
    int fault;
} knob;

static struct {
    alloc *allocs;
    int nallocs, cap;
    int next_id;
    size_t device_used;
    range pinned[64];
    int npinned;
    cudaStream_t streams[64];
    cudaEvent_t events[512];
    struct CUstream_st legacy; /* the legacy default stream (NULL) */
    double clock_ms;
    cudaError_t last_error;
    cudaError_t sticky; /* an asynchronous fault happened: every call fails */
    int fault_seen;     /* ... and a synchronising call has reported it */
    int violations, quiet;
    char last_violation[512];
    knob knobs[KNOB_MAX];
    struct {
        char api[64];
        int n;
    } calls[128];
    int ncalls;
    /* device configuration */
    int dev_count;
    cudaError_t dev_err;
    int driver_version;
    char dev_name[256];
    int cc_major, cc_minor;
    size_t mem_total;
    int current_device;
    int configured;
} F;

#define FAKE_MEM_TOTAL ((size_t)1 << 30)

static void configure_defaults(void)
{
    F.dev_count = 1;
    F.dev_err = cudaSuccess;
    F.driver_version = 13000;
    snprintf(F.dev_name, sizeof F.dev_name, "Fake GPU (tests/fakecuda)");
    F.cc_major = 8;
    F.cc_minor = 0;
    F.mem_total = FAKE_MEM_TOTAL;
    F.configured = 1;
}

static void init_once(void)
{
    if (!F.configured)
        configure_defaults();
}

/* ---------------------------------------------------------------- violations, knobs */

void fk_violation(const char *api, const char *fmt, ...)
{
    char msg[448];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(F.last_violation, sizeof F.last_violation, "fakecuda: %s: %s", api, msg);
    if (!F.quiet)
        fprintf(stderr, "%s\n", F.last_violation);
    F.violations++;
}

void fake_set_quiet(int quiet)
{
    F.quiet = quiet;
}

int fake_violations(void)
{
    return F.violations;
}

const char *fake_last_violation(void)
{
    return F.last_violation;
}

static knob *knob_for(const char *api, int create)
{
    for (int i = 0; i < KNOB_MAX; i++)
        if (F.knobs[i].api[0] && !strcmp(F.knobs[i].api, api))
            return &F.knobs[i];
    if (!create)
        return NULL;
    for (int i = 0; i < KNOB_MAX; i++)
        if (!F.knobs[i].api[0]) {
            snprintf(F.knobs[i].api, sizeof F.knobs[i].api, "%s", api);
            return &F.knobs[i];
        }
    abort();
}

void fake_fail_next(const char *api, int status)
{
    knob *k = knob_for(api, 1);
    k->status = status;
}

void fake_corrupt_next(const char *api)
{
    knob *k = knob_for(api, 1);
    k->corrupt = 1;
}

void fake_fault_next(const char *api)
{
    knob_for(api, 1)->fault = 1;
}

/* clear a knob that has nothing left queued */
static void knob_done(knob *k)
{
    if (!k->status && !k->corrupt && !k->fault)
        k->api[0] = '\0';
}

int fk_take_failure(const char *api, int *status)
{
    knob *k = knob_for(api, 0);
    if (!k || !k->status)
        return 0;
    *status = k->status;
    k->status = 0;
    knob_done(k);
    return 1;
}

int fk_take_corruption(const char *api)
{
    knob *k = knob_for(api, 0);
    if (!k || !k->corrupt)
        return 0;
    k->corrupt = 0;
    knob_done(k);
    return 1;
}

static int take_fault(const char *api)
{
    knob *k = knob_for(api, 0);
    if (!k || !k->fault)
        return 0;
    k->fault = 0;
    knob_done(k);
    return 1;
}

void fk_count(const char *api)
{
    for (int i = 0; i < F.ncalls; i++)
        if (!strcmp(F.calls[i].api, api)) {
            F.calls[i].n++;
            return;
        }
    if (F.ncalls < (int)(sizeof F.calls / sizeof *F.calls)) {
        snprintf(F.calls[F.ncalls].api, sizeof F.calls[F.ncalls].api, "%s", api);
        F.calls[F.ncalls++].n = 1;
    }
}

int fake_calls(const char *api)
{
    for (int i = 0; i < F.ncalls; i++)
        if (!strcmp(F.calls[i].api, api))
            return F.calls[i].n;
    return 0;
}

/* Common prologue of every runtime call: count, device present, sticky
 * fault already reported, queued failure. */
#define ENTER(api)                                 \
    do {                                           \
        init_once();                               \
        fk_count(api);                             \
        if (F.dev_err != cudaSuccess)              \
            return ret(F.dev_err);                 \
        if (F.fault_seen)                          \
            return ret(F.sticky);                  \
        int st_;                                   \
        if (fk_take_failure(api, &st_))            \
            return ret((cudaError_t)st_);          \
    } while (0)

static cudaError_t ret(cudaError_t e)
{
    if (e != cudaSuccess)
        F.last_error = e;
    return e;
}

/* End of a synchronising call: report an asynchronous fault that ran. */
static cudaError_t sync_result(void)
{
    if (F.sticky) {
        F.fault_seen = 1;
        return ret(F.sticky);
    }
    return cudaSuccess;
}

cudaError_t fk_device_error(void)
{
    init_once();
    return F.dev_err;
}

cudaError_t fk_sticky_error(void)
{
    return F.fault_seen ? F.sticky : cudaSuccess;
}

/* ---------------------------------------------------------------- memory registry */

static alloc *find_alloc(const void *p, int live)
{
    const char *c = p;
    for (int i = F.nallocs - 1; i >= 0; i--) {
        alloc *a = &F.allocs[i];
        if (a->live == live && c >= a->base && c < a->base + (a->size ? a->size : 1))
            return a;
    }
    return NULL;
}

int fk_is_device(const void *p)
{
    return p && find_alloc(p, 1) != NULL;
}

const char *fk_describe(const void *p, char *buf, size_t len)
{
    alloc *a;
    if (!p)
        snprintf(buf, len, "NULL");
    else if ((a = find_alloc(p, 1)))
        snprintf(buf, len, "device allocation #%d + %zu of %zu bytes", a->id,
                 (size_t)((const char *)p - a->base), a->size);
    else if ((a = find_alloc(p, 0)))
        snprintf(buf, len, "freed device allocation #%d (use after cudaFree)", a->id);
    else
        snprintf(buf, len, "host memory %p, not a device allocation", p);
    return buf;
}

int fk_dev_range(const char *api, const char *what, const void *p, size_t bytes)
{
    char d[160];
    alloc *a = p ? find_alloc(p, 1) : NULL;
    if (!a) {
        fk_violation(api, "%s: %s", what, fk_describe(p, d, sizeof d));
        return 0;
    }
    size_t off = (size_t)((const char *)p - a->base);
    if (bytes > a->size - off) {
        fk_violation(api, "%s: %zu bytes from offset %zu run %zu bytes past the end of device "
                          "allocation #%d (%zu bytes)",
                     what, bytes, off, bytes - (a->size - off), a->id, a->size);
        return 0;
    }
    return 1;
}

int fk_host_scalar(const char *api, const char *what, const void *p)
{
    char d[160];
    if (!p) {
        fk_violation(api, "%s is NULL", what);
        return 0;
    }
    if (find_alloc(p, 1) || find_alloc(p, 0)) {
        fk_violation(api, "%s points to %s; in host pointer mode it must be host memory", what,
                     fk_describe(p, d, sizeof d));
        return 0;
    }
    float v = *(const float *)p;
    if (!(v - v == 0.0f)) {
        fk_violation(api, "%s = %g is not finite", what, (double)v);
        return 0;
    }
    return 1;
}

int fake_live_allocations(void)
{
    int n = 0;
    for (int i = 0; i < F.nallocs; i++)
        n += F.allocs[i].live;
    return n;
}

cudaError_t cudaMalloc(void **p, size_t size)
{
    ENTER("cudaMalloc");
    if (!p)
        return ret(cudaErrorInvalidValue);
    *p = NULL;
    if (size == 0)
        return cudaSuccess;
    if (size > F.mem_total - F.device_used)
        return ret(cudaErrorMemoryAllocation);
    char *m = malloc(size);
    if (!m)
        return ret(cudaErrorMemoryAllocation);
    memset(m, 0xff, size); /* NaN floats: reading memory nobody wrote shows */
    if (F.nallocs == F.cap) {
        F.cap = F.cap ? 2 * F.cap : 64;
        F.allocs = realloc(F.allocs, F.cap * sizeof *F.allocs);
        if (!F.allocs)
            abort();
    }
    F.allocs[F.nallocs++] = (alloc){.base = m, .size = size, .live = 1, .id = ++F.next_id};
    F.device_used += size;
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    ENTER("cudaFree");
    if (!p)
        return cudaSuccess;
    fk_drain_all(); /* cudaFree waits for the device */
    alloc *a = find_alloc(p, 1);
    if (!a || a->base != p) {
        char d[160];
        fk_violation("cudaFree", "%s is not the start of a live allocation",
                     fk_describe(p, d, sizeof d));
        return ret(cudaErrorInvalidValue);
    }
    free(a->base);
    a->live = 0;
    F.device_used -= a->size;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
    ENTER("cudaMemGetInfo");
    *free_b = F.mem_total - F.device_used;
    *total = F.mem_total;
    return cudaSuccess;
}

/* ---------------------------------------------------------------- streams */

static struct CUstream_st *stream_of(cudaStream_t s)
{
    return s ? s : &F.legacy;
}

int fk_stream_ok(cudaStream_t s)
{
    if (!s)
        return 1;
    for (size_t i = 0; i < sizeof F.streams / sizeof *F.streams; i++)
        if (F.streams[i] == s)
            return s->live;
    return 0;
}

static int event_ok(cudaEvent_t e)
{
    if (!e)
        return 0;
    for (size_t i = 0; i < sizeof F.events / sizeof *F.events; i++)
        if (F.events[i] == e)
            return e->live;
    return 0;
}

static void run_until(struct CUstream_st *s, unsigned ev_seq, cudaEvent_t ev);

/* Run one op from the front of s. */
static void run_one(struct CUstream_st *s)
{
    fk_op *op = s->head;
    s->head = op->next;
    if (!s->head)
        s->tail = NULL;
    s->pending--;
    if (op->wait && op->wait->completed < op->seq)
        run_until(stream_of(op->wait_stream), op->seq, op->wait);
    if (op->host && hash64(op->host, op->host_bytes, 0) != op->host_hash)
        fk_violation(op->name, "the host buffer %p (%zu bytes) was modified after the copy was "
                               "enqueued and before it ran: it was reused before its copy "
                               "completed (wait for the copy's event)",
                     op->host, op->host_bytes);
    if (op->run)
        op->run(op->arg);
    if (op->fault)
        F.sticky = cudaErrorIllegalAddress;
    F.clock_ms += 0.001;
    if (op->rec) {
        if (op->seq > op->rec->completed)
            op->rec->completed = op->seq;
        op->rec->time_ms = F.clock_ms;
    }
    if (op->drop)
        op->drop(op->arg);
    free(op);
}

/* Run s until event ev has completed record number ev_seq (or s is empty). */
static void run_until(struct CUstream_st *s, unsigned ev_seq, cudaEvent_t ev)
{
    while (s->head && ev->completed < ev_seq)
        run_one(s);
}

static void run_all(struct CUstream_st *s)
{
    while (s->head)
        run_one(s);
}

void fk_drain_all(void)
{
    int more = 1;
    while (more) {
        more = 0;
        run_all(&F.legacy);
        for (size_t i = 0; i < sizeof F.streams / sizeof *F.streams; i++)
            if (F.streams[i] && F.streams[i]->head) {
                run_all(F.streams[i]);
                more = 1;
            }
    }
}

/* The legacy default stream synchronises with every blocking stream: work
 * on it runs after everything enqueued on them, and right away. */
static void legacy_barrier(void)
{
    for (size_t i = 0; i < sizeof F.streams / sizeof *F.streams; i++)
        if (F.streams[i] && !(F.streams[i]->flags & cudaStreamNonBlocking))
            run_all(F.streams[i]);
}

static cudaError_t push(cudaStream_t s, fk_op *op)
{
    struct CUstream_st *st = stream_of(s);
    if (!s)
        legacy_barrier();
    op->next = NULL;
    if (st->tail)
        st->tail->next = op;
    else
        st->head = op;
    st->tail = op;
    st->pending++;
    if (!s)
        run_all(st);
    return cudaSuccess;
}

cudaError_t fk_enqueue(cudaStream_t s, const char *name, void (*run)(void *), void (*drop)(void *),
                       void *arg, const void *host, size_t host_bytes)
{
    if (!fk_stream_ok(s)) {
        fk_violation(name, "stream %p is not a live stream", (void *)s);
        if (drop)
            drop(arg);
        return ret(cudaErrorInvalidResourceHandle);
    }
    fk_op *op = calloc(1, sizeof *op);
    op->name = name;
    op->fault = take_fault(name);
    op->run = run;
    op->drop = drop;
    op->arg = arg;
    if (host && host_bytes) {
        op->host = host;
        op->host_bytes = host_bytes;
        op->host_hash = hash64(host, host_bytes, 0);
    }
    return push(s, op);
}

int fake_pending(cudaStream_t s)
{
    return stream_of(s)->pending;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    ENTER("cudaStreamCreateWithFlags");
    for (size_t i = 0; i < sizeof F.streams / sizeof *F.streams; i++)
        if (!F.streams[i]) {
            F.streams[i] = calloc(1, sizeof *F.streams[i]);
            F.streams[i]->flags = flags;
            F.streams[i]->live = 1;
            *s = F.streams[i];
            return cudaSuccess;
        }
    return ret(cudaErrorMemoryAllocation);
}

cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    return cudaStreamCreateWithFlags(s, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    ENTER("cudaStreamDestroy");
    if (!s || !fk_stream_ok(s)) {
        fk_violation("cudaStreamDestroy", "%p is not a live stream", (void *)s);
        return ret(cudaErrorInvalidResourceHandle);
    }
    run_all(s); /* pending work completes, then the stream goes */
    for (size_t i = 0; i < sizeof F.streams / sizeof *F.streams; i++)
        if (F.streams[i] == s)
            F.streams[i] = NULL;
    free(s);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    ENTER("cudaStreamSynchronize");
    if (!fk_stream_ok(s)) {
        fk_violation("cudaStreamSynchronize", "%p is not a live stream", (void *)s);
        return ret(cudaErrorInvalidResourceHandle);
    }
    if (!s)
        legacy_barrier();
    run_all(stream_of(s));
    return sync_result();
}

cudaError_t cudaDeviceSynchronize(void)
{
    ENTER("cudaDeviceSynchronize");
    fk_drain_all();
    return sync_result();
}

/* ---------------------------------------------------------------- events */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    ENTER("cudaEventCreateWithFlags");
    for (size_t i = 0; i < sizeof F.events / sizeof *F.events; i++)
        if (!F.events[i]) {
            F.events[i] = calloc(1, sizeof *F.events[i]);
            F.events[i]->flags = flags;
            F.events[i]->live = 1;
            *e = F.events[i];
            return cudaSuccess;
        }
    return ret(cudaErrorMemoryAllocation);
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    return cudaEventCreateWithFlags(e, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    ENTER("cudaEventDestroy");
    if (!event_ok(e)) {
        fk_violation("cudaEventDestroy", "%p is not a live event", (void *)e);
        return ret(cudaErrorInvalidResourceHandle);
    }
    /* a record still queued completes first; waits on it were captured */
    if (e->completed < e->recorded)
        run_until(stream_of(e->stream), e->recorded, e);
    fk_drain_all(); /* queued waits hold the pointer */
    for (size_t i = 0; i < sizeof F.events / sizeof *F.events; i++)
        if (F.events[i] == e)
            F.events[i] = NULL;
    free(e);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    ENTER("cudaEventRecord");
    if (!event_ok(e) || !fk_stream_ok(s)) {
        fk_violation("cudaEventRecord", "event %p or stream %p is not alive", (void *)e, (void *)s);
        return ret(cudaErrorInvalidResourceHandle);
    }
    fk_op *op = calloc(1, sizeof *op);
    op->name = "cudaEventRecord";
    op->rec = e;
    op->seq = ++e->recorded;
    e->stream = s;
    return push(s, op);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
    ENTER("cudaStreamWaitEvent");
    if (!event_ok(e) || !fk_stream_ok(s) || flags != 0) {
        fk_violation("cudaStreamWaitEvent", "event %p or stream %p is not alive, or flags %u",
                     (void *)e, (void *)s, flags);
        return ret(cudaErrorInvalidResourceHandle);
    }
    if (e->recorded == 0)
        return cudaSuccess; /* never recorded: nothing to wait for */
    fk_op *op = calloc(1, sizeof *op);
    op->name = "cudaStreamWaitEvent";
    op->wait = e;
    op->wait_stream = e->stream;
    op->seq = e->recorded;
    return push(s, op);
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
    ENTER("cudaEventQuery");
    if (!event_ok(e)) {
        fk_violation("cudaEventQuery", "%p is not a live event", (void *)e);
        return ret(cudaErrorInvalidResourceHandle);
    }
    if (e->completed >= e->recorded)
        return cudaSuccess;
    /* not yet: say so, and let the device make progress for next time */
    run_until(stream_of(e->stream), e->recorded, e);
    return ret(cudaErrorNotReady);
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    ENTER("cudaEventSynchronize");
    if (!event_ok(e)) {
        fk_violation("cudaEventSynchronize", "%p is not a live event", (void *)e);
        return ret(cudaErrorInvalidResourceHandle);
    }
    run_until(stream_of(e->stream), e->recorded, e);
    return sync_result();
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    ENTER("cudaEventElapsedTime");
    if (!event_ok(start) || !event_ok(end)) {
        fk_violation("cudaEventElapsedTime", "an event is not alive");
        return ret(cudaErrorInvalidResourceHandle);
    }
    if ((start->flags | end->flags) & cudaEventDisableTiming) {
        fk_violation("cudaEventElapsedTime", "an event was created with cudaEventDisableTiming");
        return ret(cudaErrorInvalidResourceHandle);
    }
    if (!start->recorded || !end->recorded)
        return ret(cudaErrorInvalidResourceHandle);
    if (start->completed < start->recorded || end->completed < end->recorded)
        return ret(cudaErrorNotReady);
    *ms = (float)(end->time_ms - start->time_ms);
    return cudaSuccess;
}

/* ---------------------------------------------------------------- copies */

typedef struct copy_job {
    void *dst;
    const void *src; /* NULL: memset with value */
    size_t n;
    int value;
} copy_job;

static void copy_run(void *a)
{
    copy_job *j = a;
    if (j->src)
        memcpy(j->dst, j->src, j->n);
    else
        memset(j->dst, j->value, j->n);
}

static const char *kind_name(enum cudaMemcpyKind k)
{
    switch (k) {
    case cudaMemcpyHostToHost:
        return "HostToHost";
    case cudaMemcpyHostToDevice:
        return "HostToDevice";
    case cudaMemcpyDeviceToHost:
        return "DeviceToHost";
    case cudaMemcpyDeviceToDevice:
        return "DeviceToDevice";
    default:
        return "Default";
    }
}

/* Check a copy against its kind; 1 when fine. */
static int copy_ok(const char *api, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    int dd = fk_is_device(dst), sd = fk_is_device(src);
    if (kind == cudaMemcpyDefault) {
        kind = dd ? (sd ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                  : (sd ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    }
    char d[160];
    int want_dd = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    int want_sd = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind > cudaMemcpyDefault) {
        fk_violation(api, "bad copy kind %d", (int)kind);
        return 0;
    }
    if (!want_dd && (dd || find_alloc(dst, 0))) {
        fk_violation(api, "%s copy: dst is %s, not host memory", kind_name(kind),
                     fk_describe(dst, d, sizeof d));
        return 0;
    }
    if (!want_sd && (sd || find_alloc(src, 0))) {
        fk_violation(api, "%s copy: src is %s, not host memory", kind_name(kind),
                     fk_describe(src, d, sizeof d));
        return 0;
    }
    if (want_dd && !fk_dev_range(api, "dst", dst, n))
        return 0;
    if (want_sd && !fk_dev_range(api, "src", src, n))
        return 0;
    if ((!dst || !src) && n) {
        fk_violation(api, "NULL pointer");
        return 0;
    }
    return 1;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                            cudaStream_t s)
{
    ENTER("cudaMemcpyAsync");
    if (!copy_ok("cudaMemcpyAsync", dst, src, n, kind))
        return ret(cudaErrorInvalidValue);
    if (n == 0)
        return cudaSuccess;
    copy_job *j = calloc(1, sizeof *j);
    *j = (copy_job){.dst = dst, .src = src, .n = n};
    /* a host source is read when the copy runs; a modification before that
     * is a violation (see run_one) */
    const void *host = fk_is_device(src) ? NULL : src;
    return fk_enqueue(s, "cudaMemcpyAsync", copy_run, free, j, host, host ? n : 0);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    ENTER("cudaMemcpy");
    if (!copy_ok("cudaMemcpy", dst, src, n, kind))
        return ret(cudaErrorInvalidValue);
    legacy_barrier(); /* waits for blocking streams only, like CUDA */
    memcpy(dst, src, n);
    return sync_result();
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s)
{
    ENTER("cudaMemsetAsync");
    if (!fk_dev_range("cudaMemsetAsync", "dst", p, n))
        return ret(cudaErrorInvalidValue);
    copy_job *j = calloc(1, sizeof *j);
    *j = (copy_job){.dst = p, .n = n, .value = value};
    return fk_enqueue(s, "cudaMemsetAsync", copy_run, free, j, NULL, 0);
}

cudaError_t cudaMemset(void *p, int value, size_t n)
{
    return cudaMemsetAsync(p, value, n, NULL);
}

/* ---------------------------------------------------------------- page-locked host memory */

cudaError_t cudaHostRegister(void *p, size_t size, unsigned int flags)
{
    ENTER("cudaHostRegister");
    (void)flags;
    char d[160];
    if (!p || !size || find_alloc(p, 1)) {
        fk_violation("cudaHostRegister", "cannot register %s (%zu bytes)", fk_describe(p, d, sizeof d),
                     size);
        return ret(cudaErrorInvalidValue);
    }
    const char *c = p;
    for (int i = 0; i < F.npinned; i++)
        if (c < F.pinned[i].base + F.pinned[i].size && F.pinned[i].base < c + size)
            return ret(cudaErrorHostMemoryAlreadyRegistered);
    if (F.npinned == (int)(sizeof F.pinned / sizeof *F.pinned))
        return ret(cudaErrorMemoryAllocation);
    F.pinned[F.npinned++] = (range){(char *)p, size};
    return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *p)
{
    ENTER("cudaHostUnregister");
    for (int i = 0; i < F.npinned; i++)
        if (F.pinned[i].base == p) {
            range r = F.pinned[i];
            /* a queued copy still reading this range would read pageable,
             * possibly unmapped memory on a real device */
            struct CUstream_st *all[66];
            int na = 0;
            all[na++] = &F.legacy;
            for (size_t k = 0; k < sizeof F.streams / sizeof *F.streams; k++)
                if (F.streams[k])
                    all[na++] = F.streams[k];
            for (int k = 0; k < na; k++)
                for (fk_op *op = all[k]->head; op; op = op->next)
                    if (op->host && (const char *)op->host < r.base + r.size &&
                        r.base < (const char *)op->host + op->host_bytes)
                        fk_violation("cudaHostUnregister",
                                     "%p is still read by a queued %s: synchronise first", p,
                                     op->name);
            F.pinned[i] = F.pinned[--F.npinned];
            return cudaSuccess;
        }
    return ret(cudaErrorHostMemoryNotRegistered);
}

/* ---------------------------------------------------------------- device queries */

void fake_set_devices(int count, cudaError_t err, int driver_version)
{
    init_once();
    F.dev_count = count;
    F.dev_err = err;
    F.driver_version = driver_version;
}

void fake_set_device_props(const char *name, int cc_major, int cc_minor, size_t mem_total)
{
    init_once();
    snprintf(F.dev_name, sizeof F.dev_name, "%s", name);
    F.cc_major = cc_major;
    F.cc_minor = cc_minor;
    F.mem_total = mem_total;
}

cudaError_t cudaGetDeviceCount(int *n)
{
    ENTER("cudaGetDeviceCount");
    *n = F.dev_count;
    return F.dev_count > 0 ? cudaSuccess : ret(cudaErrorNoDevice);
}

cudaError_t cudaDriverGetVersion(int *v)
{
    init_once();
    fk_count("cudaDriverGetVersion");
    *v = F.driver_version;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}

static cudaError_t check_device(int d)
{
    if (d < 0 || d >= F.dev_count)
        return ret(cudaErrorInvalidDevice);
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
    ENTER("cudaGetDeviceProperties");
    if (check_device(d))
        return cudaErrorInvalidDevice;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", F.dev_name);
    p->major = F.cc_major;
    p->minor = F.cc_minor;
    p->totalGlobalMem = F.mem_total;
    p->pciBusID = 1;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *buf, int len, int d)
{
    ENTER("cudaDeviceGetPCIBusId");
    if (check_device(d))
        return cudaErrorInvalidDevice;
    snprintf(buf, (size_t)len, "00000000:%02X:00.0", d + 1);
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
    ENTER("cudaSetDevice");
    if (check_device(d))
        return cudaErrorInvalidDevice;
    F.current_device = d;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *d)
{
    ENTER("cudaGetDevice");
    *d = F.current_device;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = F.last_error;
    F.last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    return F.last_error;
}

/* Our own wording: the names are the enumerators, the descriptions ours. */
static const struct {
    cudaError_t e;
    const char *name, *text;
} errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "an argument is out of range or wrong"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of device memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "the driver could not start"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "bad launch configuration"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "no such device"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "bad stream or event handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "work is not finished yet"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "the driver is older than the runtime (or missing)"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA device found"},
    {cudaErrorStubLibrary, "cudaErrorStubLibrary", "the driver library is a stub"},
    {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
     "host range already registered"},
    {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
     "host range not registered"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "illegal memory access"},
    {cudaErrorDevicesUnavailable, "cudaErrorDevicesUnavailable", "devices busy or unavailable"},
};

const char *cudaGetErrorName(cudaError_t e)
{
    for (size_t i = 0; i < sizeof errors / sizeof *errors; i++)
        if (errors[i].e == e)
            return errors[i].name;
    return "cudaErrorUnknown(fake)";
}

const char *cudaGetErrorString(cudaError_t e)
{
    for (size_t i = 0; i < sizeof errors / sizeof *errors; i++)
        if (errors[i].e == e)
            return errors[i].text;
    return "unknown error (fake)";
}

/* ---------------------------------------------------------------- emulated kernels */

cudaError_t emu_enqueue(cudaStream_t s, const char *kernel, void (*run)(void *), void (*drop)(void *),
                        void *job)
{
    init_once();
    fk_count(kernel);
    if (F.dev_err != cudaSuccess) {
        drop(job);
        return ret(F.dev_err);
    }
    return fk_enqueue(s, kernel, run, drop, job, NULL, 0);
}

int emu_check_arg(const char *kernel, int index, const void *p)
{
    if (!p || fk_is_device(p))
        return 0;
    char d[160];
    fk_violation(kernel, "kernel argument %d is %s", index, fk_describe(p, d, sizeof d));
    return -1;
}

void emu_launch_failed(const char *kernel, cudaError_t err, const char *why)
{
    fk_violation(kernel, "launch failed: %s", why);
    ret(err);
}

/* ---------------------------------------------------------------- reset */

int fake_live_objects(void)
{
    int n = F.npinned + fk_cudnn_live() + fk_cublas_live();
    for (size_t i = 0; i < sizeof F.streams / sizeof *F.streams; i++)
        n += F.streams[i] != NULL;
    for (size_t i = 0; i < sizeof F.events / sizeof *F.events; i++)
        n += F.events[i] != NULL;
    return n;
}

static void drop_queue(struct CUstream_st *s)
{
    while (s->head) {
        fk_op *op = s->head;
        s->head = op->next;
        if (op->drop)
            op->drop(op->arg);
        free(op);
    }
    s->tail = NULL;
    s->pending = 0;
}

void fake_reset(void)
{
    drop_queue(&F.legacy);
    for (size_t i = 0; i < sizeof F.streams / sizeof *F.streams; i++)
        if (F.streams[i]) {
            drop_queue(F.streams[i]);
            free(F.streams[i]);
            F.streams[i] = NULL;
        }
    for (size_t i = 0; i < sizeof F.events / sizeof *F.events; i++) {
        free(F.events[i]);
        F.events[i] = NULL;
    }
    for (int i = 0; i < F.nallocs; i++)
        if (F.allocs[i].live)
            free(F.allocs[i].base);
    free(F.allocs);
    fk_cudnn_reset();
    fk_cublas_reset();
    memset(&F, 0, sizeof F);
    configure_defaults();
}
