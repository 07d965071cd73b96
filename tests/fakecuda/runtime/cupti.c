/* cupti.c — a stand-in for CUPTI's activity API (the entry points
 * cuda/activity.c calls), emitting records from the fake clock's schedule.
 *
 * Every operation the clock places (clock.c: an engine, a start and an end)
 * becomes one record when its kind is enabled: kernels, cuDNN and cuBLAS
 * calls a CONCURRENT_KERNEL record (CUpti_ActivityKernel10) named by the
 * kernel or the library call, NCCL's sums a kernel named
 * "ncclDevKernel_AllReduce" as NCCL's own kernels are named; copies a
 * MEMCPY record (CUpti_ActivityMemcpy6) with its direction and bytes;
 * memsets a MEMSET record. Timestamps are the registered timestamp
 * callback's clock: once cuptiActivityRegisterTimestampCallback is called
 * the fake clock follows that clock (fk_clock_follow: the host's own work
 * takes real time, and a host wait lasts until the real clock reaches the
 * simulated end), so a record's start and end are where the fake put the
 * operation, on the caller's clock.
 *
 * What CUPTI promises and no more: records arrive late — only when a buffer
 * fills or at cuptiActivityFlushAll, and only for work that has ended by
 * then on the clock (a forced flush delivers the rest too); buffers come
 * from the caller's request callback and go back through its completion
 * callback, which owns them.
 *
 * Off unless asked for (FAKECUDA_CUPTI=on in the environment, read at
 * start-up and at fake_reset, or fake_set_cupti): then cuptiGetVersion
 * answers CUPTI_ERROR_NOT_INITIALIZED, as a machine without a usable
 * CUPTI, and the train binary keeps its event bracket (and a purely
 * virtual clock). fake_fail_next("cuptiActivityEnable", status) makes the
 * profiler refuse, as it does without permission or beside another one.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cupti_activity.h>
#include <cupti_result.h>
#include <cupti_version.h>

#include "tests/fakecuda/runtime/internal.h"

typedef struct fk_rec {
    CUpti_ActivityKind kind;
    uint8_t copy_kind;
    double t0, t1; /* ms on the fake clock */
    uint64_t bytes;
    const char *name;
    uint32_t stream;
} fk_rec;

static struct {
    int present, loaded;
    unsigned enabled; /* 1 << CUpti_ActivityKind */
    CUpti_BuffersCallbackRequestFunc request;
    CUpti_BuffersCallbackCompleteFunc complete;
    CUpti_TimestampCallbackFunc now;
    fk_rec *recs; /* scheduled, not delivered, in issue order */
    size_t n, cap;
    size_t buf_records; /* what the last buffer held: a full one is delivered */
    size_t next_bytes;
    unsigned long delivered;
} C;

static void load(void)
{
    if (C.loaded)
        return;
    C.loaded = 1;
    const char *e = getenv("FAKECUDA_CUPTI");
    C.present = e && !strcmp(e, "on");
}

void fake_set_cupti(int on)
{
    load();
    C.present = on;
}

unsigned long fake_cupti_delivered(void) { return C.delivered; }

void fk_cupti_reset(void)
{
    free(C.recs);
    memset(&C, 0, sizeof C);
}

void fk_cupti_next_bytes(size_t bytes) { C.next_bytes = bytes; }

static int enabled(CUpti_ActivityKind k) { return C.present && C.now && (C.enabled >> k & 1); }

static uint32_t stream_id(cudaStream_t s) { return (uint32_t)((uintptr_t)s >> 4 & 0xffffff); }

void fk_cupti_op(int engine, const char *name, double t0_ms, double t1_ms, cudaStream_t s)
{
    size_t bytes = C.next_bytes;
    C.next_bytes = 0;
    fk_rec r = {.t0 = t0_ms, .t1 = t1_ms, .bytes = bytes, .name = name, .stream = stream_id(s)};
    int copy = !strcmp(name, "cudaMemcpyAsync") || !strcmp(name, "cudaMemcpy");
    if (!strcmp(name, "cudaMemsetAsync")) {
        r.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    } else if (copy) {
        r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
        r.copy_kind = engine == FK_ENGINE_H2D   ? CUPTI_ACTIVITY_MEMCPY_KIND_HTOD
                      : engine == FK_ENGINE_D2H ? CUPTI_ACTIVITY_MEMCPY_KIND_DTOH
                                                : CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
    } else {
        r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        if (engine == FK_ENGINE_LINK)
            r.name = "ncclDevKernel_AllReduce";
    }
    if (!enabled(r.kind))
        return;
    if (C.n == C.cap) {
        C.cap = C.cap ? 2 * C.cap : 1024;
        C.recs = realloc(C.recs, C.cap * sizeof *C.recs);
    }
    C.recs[C.n++] = r;
    /* a buffer's worth: CUPTI hands it over without a flush */
    size_t per = C.buf_records ? C.buf_records : 4096;
    if (C.n >= per)
        cuptiActivityFlushAll(0);
}

static size_t rec_size(CUpti_ActivityKind k)
{
    switch (k) {
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    default: return sizeof(CUpti_ActivityKernel10);
    }
}

static size_t put(uint8_t *p, const fk_rec *r)
{
    uint64_t t0 = fk_clock_ns(r->t0), t1 = fk_clock_ns(r->t1);
    memset(p, 0, rec_size(r->kind));
    if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)p;
        m->kind = r->kind;
        m->copyKind = r->copy_kind;
        m->bytes = r->bytes;
        m->start = t0;
        m->end = t1;
        m->streamId = r->stream;
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        CUpti_ActivityMemset4 *m = (CUpti_ActivityMemset4 *)p;
        m->kind = r->kind;
        m->bytes = r->bytes;
        m->start = t0;
        m->end = t1;
        m->streamId = r->stream;
    } else {
        CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)p;
        k->kind = r->kind;
        k->start = t0;
        k->end = t1;
        k->streamId = r->stream;
        k->name = r->name;
    }
    return rec_size(r->kind);
}

CUptiResult cuptiGetVersion(uint32_t *version)
{
    load();
    if (!C.present)
        return CUPTI_ERROR_NOT_INITIALIZED;
    *version = CUPTI_API_VERSION;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult result, const char **str)
{
    switch (result) {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_NOT_INITIALIZED:
        *str = "CUPTI_ERROR_NOT_INITIALIZED (the fake CUPTI is off: FAKECUDA_CUPTI=on)";
        break;
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: *str = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"; break;
    case CUPTI_ERROR_MAX_LIMIT_REACHED: *str = "CUPTI_ERROR_MAX_LIMIT_REACHED"; break;
    case CUPTI_ERROR_INVALID_PARAMETER: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    default: *str = "CUPTI_ERROR_UNKNOWN"; break;
    }
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc now)
{
    load();
    if (!C.present)
        return CUPTI_ERROR_NOT_INITIALIZED;
    if (C.enabled) /* CUPTI: before any kind is enabled */
        fk_violation("cuptiActivityRegisterTimestampCallback",
                     "called after cuptiActivityEnable: earlier records carry another clock");
    C.now = now;
    fk_clock_follow(now);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                           CUpti_BuffersCallbackCompleteFunc complete)
{
    load();
    if (!C.present)
        return CUPTI_ERROR_NOT_INITIALIZED;
    if (!request || !complete)
        return CUPTI_ERROR_INVALID_PARAMETER;
    C.request = request;
    C.complete = complete;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
    load();
    int status;
    if (!C.present)
        return CUPTI_ERROR_NOT_INITIALIZED;
    if (fk_take_failure("cuptiActivityEnable", &status))
        return (CUptiResult)status;
    if (!C.request)
        fk_violation("cuptiActivityEnable", "no buffer callbacks registered");
    C.enabled |= 1u << kind;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind)
{
    load();
    if (!C.present)
        return CUPTI_ERROR_NOT_INITIALIZED;
    C.enabled &= ~(1u << kind);
    return CUPTI_SUCCESS;
}

/* hand over the records of work that ended by now on the clock (all of
 * them when forced), a requested buffer at a time */
CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
    load();
    if (!C.present)
        return CUPTI_ERROR_NOT_INITIALIZED;
    double now = fk_host_ms();
    int forced = flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED;
    for (;;) {
        size_t ready = 0;
        for (size_t i = 0; i < C.n; i++)
            ready += forced || C.recs[i].t1 <= now;
        if (!ready || !C.request)
            return CUPTI_SUCCESS;
        uint8_t *buf = NULL;
        size_t size = 0, maxrec = 0;
        C.request(&buf, &size, &maxrec);
        if (!buf || size < sizeof(CUpti_ActivityKernel10)) {
            fk_violation("cuptiActivityFlushAll", "the request callback gave no usable buffer");
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        size_t used = 0, k = 0, put_n = 0;
        for (size_t i = 0; i < C.n; i++) {
            fk_rec *r = &C.recs[i];
            int go = (forced || r->t1 <= now) && used + rec_size(r->kind) <= size &&
                     (!maxrec || put_n < maxrec);
            if (go) {
                used += put(buf + used, r);
                put_n++;
            } else {
                C.recs[k++] = *r;
            }
        }
        C.n = k;
        C.buf_records = size / sizeof(CUpti_ActivityKernel10);
        C.delivered += put_n;
        C.complete(NULL, 0, buf, size, used);
    }
}

CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record)
{
    size_t off = 0;
    if (*record)
        off = (size_t)((uint8_t *)*record - buffer) + rec_size((*record)->kind);
    if (off >= valid) {
        *record = NULL;
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    }
    *record = (CUpti_Activity *)(buffer + off);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *dropped)
{
    (void)ctx, (void)stream;
    *dropped = 0;
    return CUPTI_SUCCESS;
}
