/* streams.c — the fake's streams and events. Each stream is a queue of
 * operations that run only when something waits: a stream, event or
 * device synchronisation, an event query (which lets the stream progress
 * and answers from the clock: "not ready" while the host's simulated time
 * is before the record's), a cross-stream wait being reached, a
 * cudaFree or cudaStreamDestroy, or any call on the legacy default stream
 * (which first runs every blocking stream, and never the non-blocking
 * ones, like CUDA). With eager copies on, copies and event bookkeeping run
 * as soon as nothing orders them later; an early stream (a stream carrying
 * NCCL work, with fake_set_early_nccl) runs everything as soon as its waits
 * allow, including right after the record it waits for completes while
 * another stream runs. An operation with a host source
 * checks at run time
 * that the source was not modified since it was enqueued. Emulated kernels
 * are enqueued here too. An operation can be made to never complete
 * (fk_stick_next: the fake NCCL's FAKECUDA_NCCL_FAIL): its stream stops
 * there, streams waiting on records behind it stop too, queries say "not
 * ready" and host waits never return, until fk_release_stuck (the fake's
 * ncclCommAbort). See fake.h.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/fakecuda/runtime/internal.h"

struct CUstream_st {
    unsigned flags;
    int live;
    struct fk_op *head, *tail;
    int pending;
    double end_ms; /* virtual clock: when the last operation enqueued ends */
    int early;     /* runs each operation as soon as its waits allow (fake_set_early_nccl) */
    int blocked;   /* its front wait is running another stream to the awaited record */
};

struct CUevent_st {
    unsigned flags;
    int live;
    unsigned recorded, completed; /* sequence numbers of records issued / run */
    unsigned polled;              /* the record a query last answered "not ready" */
    unsigned long polled_at;      /* ... and the host's launch count then */
    double polled_wall;           /* ... and the wall clock then (ms) */
    cudaStream_t stream;          /* where the last record was issued */
    double sim_ms;                /* virtual clock: when the last record issued fires */
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
    int fault;           /* running it raises the sticky asynchronous error */
    int copy;            /* a copy or memset: the copy engine's work */
    int stuck;           /* never completes (fk_stick_next) until fk_release_stuck */
    unsigned long order; /* enqueue order over every stream */
} fk_op;

#define STREAM_MAX 64
#define EVENT_MAX 512

static struct {
    cudaStream_t streams[STREAM_MAX];
    cudaEvent_t events[EVENT_MAX];
    struct CUstream_st legacy; /* the legacy default stream (NULL) */
    int eager;                 /* fake_set_eager_copies */
    int early_nccl;            /* fake_set_early_nccl */
    int in_early;              /* run_early is running (it does not nest) */
    unsigned long order;       /* operations enqueued so far */
    const fk_op *running;      /* the operation whose run is running, and its stream */
    struct CUstream_st *running_on;
    int stick_next; /* fk_stick_next: the next operation enqueued never completes */
    int released;   /* fk_release_stuck: stuck operations end (without running) */
} S;

/* ---------------------------------------------------------------- queues */

static struct CUstream_st *stream_of(cudaStream_t s) { return s ? s : &S.legacy; }

int fk_stream_ok(cudaStream_t s)
{
    if (!s)
        return 1;
    for (size_t i = 0; i < STREAM_MAX; i++)
        if (S.streams[i] == s)
            return s->live;
    return 0;
}

static int event_ok(cudaEvent_t e)
{
    if (!e)
        return 0;
    for (size_t i = 0; i < EVENT_MAX; i++)
        if (S.events[i] == e)
            return e->live;
    return 0;
}

static void run_until(struct CUstream_st *s, unsigned ev_seq, cudaEvent_t ev);
static void run_early(void);

/* Run one op from the front of s; 0 when it cannot run (it is stuck, or
 * waits for a record behind a stuck operation): the stream stops there. */
static int run_one(struct CUstream_st *s)
{
    fk_op *op = s->head;
    if (op->stuck && !S.released)
        return 0;
    s->head = op->next;
    if (!s->head)
        s->tail = NULL;
    s->pending--;
    if (op->wait && op->wait->completed < op->seq) {
        s->blocked++;
        run_until(stream_of(op->wait_stream), op->seq, op->wait);
        s->blocked--;
        if (op->wait->completed < op->seq) { /* behind a stuck operation: put it back */
            op->next = s->head;
            s->head = op;
            if (!s->tail)
                s->tail = op;
            s->pending++;
            return 0;
        }
    }
    if (op->host && hash64(op->host, op->host_bytes, 0) != op->host_hash)
        fk_violation(op->name,
                     "the host buffer %p (%zu bytes) was modified after the copy was "
                     "enqueued and before it ran: it was reused before its copy "
                     "completed (wait for the copy's event)",
                     op->host, op->host_bytes);
    if (op->run && !op->stuck) { /* a released stuck operation did nothing */
        const fk_op *outer = S.running;
        struct CUstream_st *outer_on = S.running_on;
        S.running = op;
        S.running_on = s;
        op->run(op->arg);
        S.running = outer;
        S.running_on = outer_on;
    }
    if (op->fault)
        fk_raise_fault();
    int recorded = op->rec && op->seq > op->rec->completed;
    if (recorded)
        op->rec->completed = op->seq;
    if (op->drop)
        op->drop(op->arg);
    free(op);
    if (recorded) /* an early stream waiting for this record goes on now */
        run_early();
    return 1;
}

/* Run s until event ev has completed record number ev_seq (or s is empty). */
static void run_until(struct CUstream_st *s, unsigned ev_seq, cudaEvent_t ev)
{
    while (s->head && ev->completed < ev_seq && run_one(s))
        ;
}

/* 1 when anything ran */
static int run_all(struct CUstream_st *s)
{
    int ran = 0;
    while (s->head && run_one(s))
        ran = 1;
    return ran;
}

/* A host wait for work that never completes: it never returns, as on a
 * device whose collective waits for a peer that is gone. */
static void hang(const char *api)
{
    if (getenv("FAKECUDA_DEBUG_CLOCK"))
        fprintf(stderr, "fakecuda: %s waits forever (stuck operation)\n", api);
    for (;;)
        pause();
}

void fk_stick_next(void) { S.stick_next = 1; }

void fk_release_stuck(void)
{
    S.released = 1;
    fk_drain_all();
}

void fk_drain_all(void)
{
    int more = 1;
    while (more) {
        more = 0;
        run_all(&S.legacy);
        for (size_t i = 0; i < STREAM_MAX; i++)
            if (S.streams[i] && S.streams[i]->head && run_all(S.streams[i]))
                more = 1;
    }
}

/* The legacy default stream synchronises with every blocking stream: work
 * on it runs after everything enqueued on them, and right away. */
void fk_legacy_barrier(void)
{
    for (size_t i = 0; i < STREAM_MAX; i++)
        if (S.streams[i] && !(S.streams[i]->flags & cudaStreamNonBlocking))
            run_all(S.streams[i]);
}

/* Eager copies: an op the device would finish on its own, without anyone
 * waiting — a copy or memset, an event record, or a wait for a record that
 * already completed — runs as soon as it reaches the front of its stream.
 * Kernels, cuDNN and cuBLAS work stay lazy: a fast copy engine next to slow
 * compute, the case --non-blocking is for. */
static int runs_eagerly(const fk_op *op)
{
    if (op->wait)
        return op->wait->completed >= op->seq;
    return op->rec || op->copy;
}

static void progress(void)
{
    int more = 1;
    while (more) {
        more = 0;
        for (int i = -1; i < STREAM_MAX; i++) {
            struct CUstream_st *st = i < 0 ? &S.legacy : S.streams[i];
            while (st && st->head && runs_eagerly(st->head) && run_one(st))
                more = 1;
        }
    }
}

void fake_set_eager_copies(int on) { S.eager = on; }

/* Early streams (fake_set_early_nccl): every operation at the front of one
 * runs as soon as it is allowed to — at once, or the moment the record a
 * wait names completes (run_one calls this after each record) — while the
 * other streams stay lazy. */
static void run_early(void)
{
    if (S.in_early)
        return;
    S.in_early = 1;
    int more = 1;
    while (more) {
        more = 0;
        for (int i = 0; i < STREAM_MAX; i++) {
            struct CUstream_st *st = S.streams[i];
            while (st && st->early && st->head &&
                   (!st->head->wait || st->head->wait->completed >= st->head->seq) && run_one(st))
                more = 1;
        }
    }
    S.in_early = 0;
}

void fake_set_early_nccl(int on) { S.early_nccl = on; }

void fk_stream_carries_nccl(cudaStream_t s)
{
    if (S.early_nccl && s)
        s->early = 1;
}

/* ---------------------------------------------------------------- the clock */

/* When work enqueued now on s may start: after the stream's last operation;
 * on the legacy stream after every blocking stream's too, and on a blocking
 * stream after the legacy stream's (the legacy stream's implicit barrier). */
static double ready_ms(cudaStream_t s)
{
    struct CUstream_st *st = stream_of(s);
    double t = st->end_ms;
    if (!s) {
        for (size_t i = 0; i < STREAM_MAX; i++)
            if (S.streams[i] && !(S.streams[i]->flags & cudaStreamNonBlocking) &&
                S.streams[i]->end_ms > t)
                t = S.streams[i]->end_ms;
    } else if (!(st->flags & cudaStreamNonBlocking) && S.legacy.end_ms > t) {
        t = S.legacy.end_ms;
    }
    return t;
}

double fk_stream_end_ms(cudaStream_t s) { return ready_ms(s); }

static double device_end_ms(void)
{
    double t = S.legacy.end_ms;
    for (size_t i = 0; i < STREAM_MAX; i++)
        if (S.streams[i] && S.streams[i]->end_ms > t)
            t = S.streams[i]->end_ms;
    return t;
}

static cudaError_t push(cudaStream_t s, fk_op *op)
{
    struct CUstream_st *st = stream_of(s);
    if (!s)
        fk_legacy_barrier();
    op->next = NULL;
    op->order = ++S.order;
    if (st->tail)
        st->tail->next = op;
    else
        st->head = op;
    st->tail = op;
    st->pending++;
    if (!s)
        run_all(st);
    if (S.eager)
        progress();
    if (st->early)
        run_early();
    return cudaSuccess;
}

cudaError_t fk_enqueue(cudaStream_t s, const char *name, void (*run)(void *), void (*drop)(void *),
                       void *arg, const void *host, size_t host_bytes)
{
    return fk_enqueue_timed(s, name, run, drop, arg, host, host_bytes, FK_ENGINE_COMPUTE,
                            fk_cost_ms(FK_ENGINE_COMPUTE, 0, 0), 0);
}

cudaError_t fk_enqueue_timed(cudaStream_t s, const char *name, void (*run)(void *),
                             void (*drop)(void *), void *arg, const void *host, size_t host_bytes,
                             fk_engine eng, double cost_ms, int host_blocks)
{
    if (!fk_stream_ok(s)) {
        fk_violation(name, "stream %p is not a live stream", (void *)s);
        if (drop)
            drop(arg);
        return fk_ret(cudaErrorInvalidResourceHandle);
    }
    fk_op *op = calloc(1, sizeof *op);
    op->name = name;
    op->fault = fk_take_fault(name);
    op->run = run;
    op->drop = drop;
    op->arg = arg;
    op->copy = !strcmp(name, "cudaMemcpyAsync") || !strcmp(name, "cudaMemsetAsync");
    op->stuck = S.stick_next;
    S.stick_next = 0;
    if (host && host_bytes) {
        op->host = host;
        op->host_bytes = host_bytes;
        op->host_hash = hash64(host, host_bytes, 0);
    }
    fk_host_issue();
    double end = fk_schedule(eng, ready_ms(s), cost_ms);
    fk_cupti_op(eng, name, end - cost_ms, end, s);
    if (getenv("FAKECUDA_DEBUG_CLOCK"))
        fprintf(stderr, "clock: %-28s stream %p engine %d host %.3f end %.3f cost %.3f\n", name,
                (void *)s, (int)eng, fk_host_ms(), end, cost_ms);
    stream_of(s)->end_ms = end;
    fk_touched_busy_until(end);
    if (host_blocks)
        fk_host_wait_until(end);
    return push(s, op);
}

int fake_pending(cudaStream_t s) { return stream_of(s)->pending; }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    FK_ENTER("cudaStreamCreateWithFlags");
    for (size_t i = 0; i < STREAM_MAX; i++)
        if (!S.streams[i]) {
            S.streams[i] = calloc(1, sizeof *S.streams[i]);
            S.streams[i]->flags = flags;
            S.streams[i]->live = 1;
            *s = S.streams[i];
            return cudaSuccess;
        }
    return fk_ret(cudaErrorMemoryAllocation);
}

cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    return cudaStreamCreateWithFlags(s, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    FK_ENTER("cudaStreamDestroy");
    if (!s || !fk_stream_ok(s)) {
        fk_violation("cudaStreamDestroy", "%p is not a live stream", (void *)s);
        return fk_ret(cudaErrorInvalidResourceHandle);
    }
    run_all(s); /* pending work completes, then the stream goes */
    for (size_t i = 0; i < STREAM_MAX; i++)
        if (S.streams[i] == s)
            S.streams[i] = NULL;
    free(s);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    FK_ENTER("cudaStreamSynchronize");
    if (!fk_stream_ok(s)) {
        fk_violation("cudaStreamSynchronize", "%p is not a live stream", (void *)s);
        return fk_ret(cudaErrorInvalidResourceHandle);
    }
    if (!s)
        fk_legacy_barrier();
    run_all(stream_of(s));
    if (stream_of(s)->head)
        hang("cudaStreamSynchronize");
    fk_host_wait_until(ready_ms(s));
    return fk_sync_result();
}

cudaError_t cudaDeviceSynchronize(void)
{
    FK_ENTER("cudaDeviceSynchronize");
    fk_drain_all();
    if (S.legacy.head)
        hang("cudaDeviceSynchronize");
    for (size_t i = 0; i < STREAM_MAX; i++)
        if (S.streams[i] && S.streams[i]->head)
            hang("cudaDeviceSynchronize");
    fk_host_wait_until(device_end_ms());
    return fk_sync_result();
}

/* ---------------------------------------------------------------- events */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    FK_ENTER("cudaEventCreateWithFlags");
    for (size_t i = 0; i < EVENT_MAX; i++)
        if (!S.events[i]) {
            S.events[i] = calloc(1, sizeof *S.events[i]);
            S.events[i]->flags = flags;
            S.events[i]->live = 1;
            *e = S.events[i];
            return cudaSuccess;
        }
    return fk_ret(cudaErrorMemoryAllocation);
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    return cudaEventCreateWithFlags(e, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    FK_ENTER("cudaEventDestroy");
    if (!event_ok(e)) {
        fk_violation("cudaEventDestroy", "%p is not a live event", (void *)e);
        return fk_ret(cudaErrorInvalidResourceHandle);
    }
    /* a record still queued completes first; waits on it were captured */
    if (e->completed < e->recorded)
        run_until(stream_of(e->stream), e->recorded, e);
    fk_drain_all(); /* queued waits hold the pointer */
    for (size_t i = 0; i < EVENT_MAX; i++)
        if (S.events[i] == e)
            S.events[i] = NULL;
    free(e);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    FK_ENTER("cudaEventRecord");
    if (!event_ok(e) || !fk_stream_ok(s)) {
        fk_violation("cudaEventRecord", "event %p or stream %p is not alive", (void *)e, (void *)s);
        return fk_ret(cudaErrorInvalidResourceHandle);
    }
    fk_op *op = calloc(1, sizeof *op);
    op->name = "cudaEventRecord";
    op->rec = e;
    op->seq = ++e->recorded;
    e->stream = s;
    fk_host_issue();
    double t = ready_ms(s), h = fk_host_ms();
    e->sim_ms = t > h ? t : h;
    return push(s, op);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
    FK_ENTER("cudaStreamWaitEvent");
    if (!event_ok(e) || !fk_stream_ok(s) || flags != 0) {
        fk_violation("cudaStreamWaitEvent", "event %p or stream %p is not alive, or flags %u",
                     (void *)e, (void *)s, flags);
        return fk_ret(cudaErrorInvalidResourceHandle);
    }
    if (e->recorded == 0)
        return cudaSuccess; /* never recorded: nothing to wait for */
    fk_op *op = calloc(1, sizeof *op);
    op->name = "cudaStreamWaitEvent";
    op->wait = e;
    op->wait_stream = e->stream;
    op->seq = e->recorded;
    fk_host_issue();
    if (e->sim_ms > stream_of(s)->end_ms)
        stream_of(s)->end_ms = e->sim_ms;
    return push(s, op);
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
    FK_ENTER("cudaEventQuery");
    if (!event_ok(e)) {
        fk_violation("cudaEventQuery", "%p is not a live event", (void *)e);
        return fk_ret(cudaErrorInvalidResourceHandle);
    }
    /* the data moves now (lazy queues), but the answer comes from the
     * clock: a device that has not reached the record by the host's time
     * says "not ready" */
    run_until(stream_of(e->stream), e->recorded, e);
    if (e->completed < e->recorded) /* behind a stuck operation */
        return fk_ret(cudaErrorNotReady);
    /* asked again with nothing issued since: a host polling, whose clock
     * moves on by the wall time between its queries (the host's own time
     * takes none otherwise), up to the record (then counted as a wait) */
    double wall = now_sec() * 1000.0;
    if (e->recorded && e->polled == e->recorded && e->polled_at == fk_host_launches()) {
        double t = fk_host_ms() + (wall - e->polled_wall);
        if (t >= e->sim_ms)
            fk_host_wait_until(e->sim_ms);
        else
            fk_host_pass(t - fk_host_ms());
    }
    if (!e->recorded || e->sim_ms <= fk_host_ms())
        return cudaSuccess;
    e->polled = e->recorded;
    e->polled_at = fk_host_launches();
    e->polled_wall = wall;
    return fk_ret(cudaErrorNotReady);
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    FK_ENTER("cudaEventSynchronize");
    if (!event_ok(e)) {
        fk_violation("cudaEventSynchronize", "%p is not a live event", (void *)e);
        return fk_ret(cudaErrorInvalidResourceHandle);
    }
    run_until(stream_of(e->stream), e->recorded, e);
    if (e->completed < e->recorded)
        hang("cudaEventSynchronize");
    if (e->recorded) {
        if (!(e->flags & cudaEventBlockingSync) && e->sim_ms > fk_host_ms())
            fk_spin_wait();
        fk_host_wait_until(e->sim_ms);
    }
    return fk_sync_result();
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    FK_ENTER("cudaEventElapsedTime");
    if (!event_ok(start) || !event_ok(end)) {
        fk_violation("cudaEventElapsedTime", "an event is not alive");
        return fk_ret(cudaErrorInvalidResourceHandle);
    }
    if ((start->flags | end->flags) & cudaEventDisableTiming) {
        fk_violation("cudaEventElapsedTime", "an event was created with cudaEventDisableTiming");
        return fk_ret(cudaErrorInvalidResourceHandle);
    }
    if (!start->recorded || !end->recorded)
        return fk_ret(cudaErrorInvalidResourceHandle);
    if (start->completed < start->recorded || end->completed < end->recorded)
        return fk_ret(cudaErrorNotReady);
    *ms = (float)(end->sim_ms - start->sim_ms);
    return cudaSuccess;
}

/* ---------------------------------------------------------------- emulated kernels */

cudaError_t emu_enqueue(cudaStream_t s, const char *kernel, void (*run)(void *),
                        void (*drop)(void *), void *job)
{
    fk_count(kernel);
    if (fk_device_error() != cudaSuccess) {
        drop(job);
        return fk_ret(fk_device_error());
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
    fk_ret(err);
}

/* ---------------------------------------------------------------- queries for the other parts,
 * reset */

const char *fk_queued_reader(const void *base, size_t size)
{
    const char *b = base;
    cudaStream_t all[STREAM_MAX + 1];
    int n = 0;
    all[n++] = &S.legacy;
    for (int k = 0; k < STREAM_MAX; k++)
        if (S.streams[k])
            all[n++] = S.streams[k];
    for (int k = 0; k < n; k++)
        for (fk_op *op = all[k]->head; op; op = op->next)
            if (op->host && (const char *)op->host < b + size &&
                b < (const char *)op->host + op->host_bytes)
                return op->name;
    return NULL;
}

int fk_running_overtakes_kernels(void)
{
    if (!S.running)
        return 0;
    for (int k = -1; k < STREAM_MAX; k++) {
        struct CUstream_st *st = k < 0 ? &S.legacy : S.streams[k];
        if (!st || st == S.running_on || st->blocked)
            continue; /* a blocked stream waits for the running one: its work comes after */
        for (const fk_op *op = st->head; op; op = op->next) {
            if (op->wait && op->wait->completed < op->seq)
                break; /* what follows may wait for the running operation */
            if (op->run && !op->copy)
                return 1;
        }
    }
    return 0;
}

int fk_streams_live(void)
{
    int n = 0;
    for (int i = 0; i < STREAM_MAX; i++)
        n += S.streams[i] != NULL;
    for (int i = 0; i < EVENT_MAX; i++)
        n += S.events[i] != NULL;
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

void fk_streams_reset(void)
{
    drop_queue(&S.legacy);
    for (int i = 0; i < STREAM_MAX; i++)
        if (S.streams[i]) {
            drop_queue(S.streams[i]);
            free(S.streams[i]);
        }
    for (int i = 0; i < EVENT_MAX; i++)
        free(S.events[i]);
    memset(&S, 0, sizeof S);
}
