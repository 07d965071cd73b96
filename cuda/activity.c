/* activity.c — what the device did, from CUPTI's activity records (issue
 * 27): busy time as the union of kernel intervals, copy-engine time per
 * direction, and their overlap, per window of the host clock; and the
 * device tracks of --trace, one span per kernel and copy.
 *
 * Why not events: an event pair around a step's enqueue measures the
 * bracket, and on a launch-bound net the device idles inside it (an H100
 * ran LeNet's kernels in a few µs each while the host took 5-20 µs per
 * call: the bracket said 88% where NVML said 83, docs/GPU.md).
 *
 * The library: libcupti.so.<CUDA major>, opened with dlopen (like cuBLAS,
 * cublas_dl.c) from $TRAIN_CUPTI_LIB, else next to the libcudart in use
 * (the toolkit's lib64, or a pip wheel's nvidia/cu13/lib, where CUPTI
 * ships too), else the run path. Not linking it keeps the binary
 * starting without it; when it cannot be opened or the profiler refuses
 * (cuptiActivityEnable fails: another profiler, no permission), the
 * caller says so once and keeps the event bracket.
 *
 * The clock: cuptiActivityRegisterTimestampCallback, before any kind is
 * enabled, with CLOCK_MONOTONIC in ns — now_sec()'s clock — so a record's
 * start and end are host times, and an epoch's [t0, t1] cuts them without
 * calibration (the probe on an H100: every kernel record inside the host's
 * launch..sync bracket).
 *
 * The records: CONCURRENT_KERNEL (CUpti_ActivityKernel10), MEMCPY
 * (CUpti_ActivityMemcpy6) and MEMSET (CUpti_ActivityMemset4). CUPTI asks
 * for buffers and hands them back full or at a flush, possibly from its own
 * thread: the intervals go into one list under a mutex. Kernels whose name
 * starts with "nccl" are NCCL's sums (communication, on their own stream):
 * they are left out of compute. Memsets and device-to-device copies run on
 * the device without the PCIe link: they count as compute.
 *
 * The cost (H100, docs/GPU.md): 9.9 µs host time per launch with kernel
 * records against 4.6 µs without — --gpu-activity off turns it off.
 *
 * The fake runtime (tests/fakecuda/runtime/cupti.c) defines the same entry points
 * and emits records from its clock; in that variant the table points at
 * them instead of a library.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti_activity.h>
#include <cupti_result.h>
#include <cupti_version.h>

#include "cuda/internal.h"

#ifndef TRAIN_FAKECUDA
/* libcupti.so.<the CUDA major this was built with>: 13 for CUDA 13.x
 * (CUDART_VERSION 13000; stringifying the division would not compute it) */
static const char *cupti_soname(void)
{
    static char name[32];
    snprintf(name, sizeof name, "libcupti.so.%d", CUDART_VERSION / 1000);
    return name;
}
#endif

static struct {
    CUptiResult (*version)(uint32_t *);
    CUptiResult (*result_string)(CUptiResult, const char **);
    CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                      CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*register_timestamp)(CUpti_TimestampCallbackFunc);
    CUptiResult (*enable)(CUpti_ActivityKind);
    CUptiResult (*disable)(CUpti_ActivityKind);
    CUptiResult (*flush_all)(uint32_t);
    CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*dropped)(CUcontext, uint32_t, size_t *);
} fn;

/* one record's interval, ns on CLOCK_MONOTONIC */
enum { ACT_COMPUTE, ACT_H2D, ACT_D2H, ACT_KINDS };
typedef struct act_iv {
    uint64_t t0, t1;
} act_iv;

static struct {
    pthread_mutex_t mu;
    int on;
    act_iv *iv[ACT_KINDS]; /* not yet measured past a take's t1 */
    size_t n[ACT_KINDS], cap[ACT_KINDS];
    unsigned long dropped;
    int timeline;        /* --trace: keep spans too */
    backend_span *spans; /* for gpu_timeline_take */
    size_t nspans, capspans;
    const char **names; /* interned kernel names: spans keep them ... */
    char **orig;        /* ... and as CUPTI gave them */
    size_t nnames, capnames;
} A = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void cupti_fail(CUptiResult st, const char *stmt, const char *func, const char *file,
                       int line)
{
    const char *s = "?";
    if (fn.result_string)
        fn.result_string(st, &s);
    fprintf(stderr, "train: CUPTI error at %s:%d in %s: %s: %s (%d)\n", file, line, func, stmt, s,
            (int)st);
    exit(1);
}
#define CUPTI_CHECK(call)                                                                          \
    do {                                                                                           \
        CUptiResult st_ = (call);                                                                  \
        if (st_ != CUPTI_SUCCESS)                                                                  \
            cupti_fail(st_, #call, __func__, __FILE__, __LINE__);                                  \
    } while (0)

static const char *result_str(CUptiResult st)
{
    const char *s = "unknown CUPTI error";
    if (fn.result_string)
        fn.result_string(st, &s);
    return s;
}

static uint64_t CUPTIAPI host_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* now_sec()'s clock (common/util.c) */
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#ifdef TRAIN_FAKECUDA
static int open_cupti(char *why, size_t len)
{
    (void)why, (void)len;
    fn.version = cuptiGetVersion;
    fn.result_string = cuptiGetResultString;
    fn.register_callbacks = cuptiActivityRegisterCallbacks;
    fn.register_timestamp = cuptiActivityRegisterTimestampCallback;
    fn.enable = cuptiActivityEnable;
    fn.disable = cuptiActivityDisable;
    fn.flush_all = cuptiActivityFlushAll;
    fn.next_record = cuptiActivityGetNextRecord;
    fn.dropped = cuptiActivityGetNumDroppedRecords;
    return 0;
}
#else
/* $TRAIN_CUPTI_LIB, then next to the libcudart in use, then the run path */
static void *dlopen_cupti(char *tried, size_t len)
{
    const char *env = getenv("TRAIN_CUPTI_LIB");
    if (env && *env) {
        snprintf(tried, len, "%s", env);
        return dlopen(env, RTLD_NOW | RTLD_LOCAL);
    }
    Dl_info di;
    if (dladdr((void *)cudaGetDeviceCount, &di) && di.dli_fname && strchr(di.dli_fname, '/')) {
        char path[4096];
        snprintf(path, sizeof path, "%s", di.dli_fname);
        *strrchr(path, '/') = '\0';
        size_t l = strlen(path);
        snprintf(path + l, sizeof path - l, "/%s", cupti_soname());
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
    }
    snprintf(tried, len, "%s", cupti_soname());
    return dlopen(cupti_soname(), RTLD_NOW | RTLD_LOCAL);
}

static int open_cupti(char *why, size_t len)
{
    char tried[512];
    void *h = dlopen_cupti(tried, sizeof tried);
    if (!h) {
        const char *m = dlerror();
        snprintf(why, len, "cannot open %s: %s", tried, m ? m : "?");
        return -1;
    }
    static const char *const names[] = {"cuptiGetVersion",
                                        "cuptiGetResultString",
                                        "cuptiActivityRegisterCallbacks",
                                        "cuptiActivityRegisterTimestampCallback",
                                        "cuptiActivityEnable",
                                        "cuptiActivityDisable",
                                        "cuptiActivityFlushAll",
                                        "cuptiActivityGetNextRecord",
                                        "cuptiActivityGetNumDroppedRecords"};
    void **slot[] = {(void **)&fn.version,
                     (void **)&fn.result_string,
                     (void **)&fn.register_callbacks,
                     (void **)&fn.register_timestamp,
                     (void **)&fn.enable,
                     (void **)&fn.disable,
                     (void **)&fn.flush_all,
                     (void **)&fn.next_record,
                     (void **)&fn.dropped};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        *slot[i] = dlsym(h, names[i]);
        if (!*slot[i]) {
            snprintf(why, len, "%s has no %s (too old a CUPTI)", tried, names[i]);
            memset(&fn, 0, sizeof fn);
            dlclose(h);
            return -1;
        }
    }
    return 0;
}
#endif

/* ---------------------------------------------------------------- records */

static void push_iv(int k, uint64_t t0, uint64_t t1)
{
    if (t1 <= t0)
        return;
    if (A.n[k] == A.cap[k]) {
        A.cap[k] = A.cap[k] ? 2 * A.cap[k] : 1024;
        A.iv[k] = xrealloc(A.iv[k], A.cap[k] * sizeof *A.iv[k]);
    }
    A.iv[k][A.n[k]++] = (act_iv){t0, t1};
}

static const char *intern(const char *name)
{
    if (!name)
        return "kernel";
    for (size_t i = 0; i < A.nnames; i++)
        if (!strcmp(A.orig[i], name))
            return A.names[i];
    if (A.nnames == A.capnames) {
        A.capnames = A.capnames ? 2 * A.capnames : 64;
        A.names = xrealloc(A.names, A.capnames * sizeof *A.names);
        A.orig = xrealloc(A.orig, A.capnames * sizeof *A.orig);
    }
    A.orig[A.nnames] = xstrdup(name);
    /* the trace writes names into JSON as they are: no quote, backslash
     * or control byte gets there */
    char *c = xstrdup(name);
    for (char *p = c; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
            *p = '_';
    return A.names[A.nnames++] = c;
}

static void push_span(const char *track, const char *name, uint64_t t0, uint64_t t1)
{
    if (!A.timeline)
        return;
    name = intern(name);
    if (A.nspans == A.capspans) {
        A.capspans = A.capspans ? 2 * A.capspans : 1024;
        A.spans = xrealloc(A.spans, A.capspans * sizeof *A.spans);
    }
    /* seconds of now_sec()'s clock: t0 in whole seconds plus the rest
     * keeps ns over any uptime (a double has 15 digits) */
    A.spans[A.nspans++] = (backend_span){
        // NOLINTNEXTLINE(bugprone-integer-division): whole seconds, then the ns apart: exact
        track, name, (double)(t0 / 1000000000ull) + (double)(t0 % 1000000000ull) / 1e9,
        (double)(t1 - t0) / 1e9};
}

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    *size = 1 << 20;
    *buf = aligned_alloc(8, *size);
    *max_records = 0; /* as many as fit */
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                                      size_t valid)
{
    (void)size;
    CUpti_Activity *r = NULL;
    pthread_mutex_lock(&A.mu);
    while (fn.next_record(buf, valid, &r) == CUPTI_SUCCESS) {
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
            r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
            int comm = k->name && !strncmp(k->name, "nccl", 4);
            if (!comm)
                push_iv(ACT_COMPUTE, k->start, k->end);
            push_span(comm ? "nccl" : "compute", k->name, k->start, k->end);
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)r;
            int k = m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD   ? ACT_H2D
                    : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? ACT_D2H
                                                                     : ACT_COMPUTE;
            push_iv(k, m->start, m->end);
            push_span(k == ACT_H2D   ? "copy h2d"
                      : k == ACT_D2H ? "copy d2h"
                                     : "compute",
                      k == ACT_COMPUTE ? "memcpy DtoD" : "memcpy", m->start, m->end);
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)r;
            push_iv(ACT_COMPUTE, m->start, m->end);
            push_span("compute", "memset", m->start, m->end);
        }
    }
    size_t dropped = 0;
    if (fn.dropped(ctx, stream, &dropped) == CUPTI_SUCCESS)
        A.dropped += dropped;
    pthread_mutex_unlock(&A.mu);
    free(buf);
}

static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                           CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};
static const char *const kname[] = {"CONCURRENT_KERNEL", "MEMCPY", "MEMSET"};

int gpu_activity_start(backend *be, char *why, size_t len)
{
    (void)be;
    if (A.on)
        return 1;
    uint32_t ver = 0;
    CUptiResult st;
    if (!fn.version && open_cupti(why, len) != 0)
        return 0;
    if ((st = fn.version(&ver)) != CUPTI_SUCCESS) {
        snprintf(why, len, "cuptiGetVersion: %s", result_str(st));
        return 0;
    }
    /* the clock first: records made before it would carry CUPTI's own */
    if ((st = fn.register_timestamp(host_ns)) != CUPTI_SUCCESS) {
        snprintf(why, len, "cuptiActivityRegisterTimestampCallback: %s", result_str(st));
        return 0;
    }
    if ((st = fn.register_callbacks(buffer_requested, buffer_completed)) != CUPTI_SUCCESS) {
        snprintf(why, len, "cuptiActivityRegisterCallbacks: %s", result_str(st));
        return 0;
    }
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if ((st = fn.enable(kinds[i])) != CUPTI_SUCCESS) {
            snprintf(why, len, "cuptiActivityEnable(%s): %s", kname[i], result_str(st));
            return 0;
        }
    A.on = 1;
    return 1;
}

int gpu_activity_on(void) { return A.on; }

/* at the backend's destroy: the records stop, the lists go (the interned
 * names stay: a trace written later still points at them) */
void gpu_activity_stop(void)
{
    if (!A.on)
        return;
    CUPTI_CHECK(fn.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        CUPTI_CHECK(fn.disable(kinds[i]));
    pthread_mutex_lock(&A.mu);
    for (int k = 0; k < ACT_KINDS; k++) {
        free(A.iv[k]);
        A.iv[k] = NULL;
        A.n[k] = A.cap[k] = 0;
    }
    free(A.spans);
    A.spans = NULL;
    A.nspans = A.capspans = 0;
    A.timeline = 0;
    A.dropped = 0;
    A.on = 0;
    pthread_mutex_unlock(&A.mu);
}

/* ---------------------------------------------------------------- measures */

static int cmp_iv(const void *a, const void *b)
{
    const act_iv *x = a, *y = b;
    return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

/* v[0..n) clipped to [lo, hi], sorted and merged into disjoint intervals
 * in out (room for n); returns how many */
static size_t union_of(const act_iv *v, size_t n, uint64_t lo, uint64_t hi, act_iv *out)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t a = v[i].t0 > lo ? v[i].t0 : lo, b = v[i].t1 < hi ? v[i].t1 : hi;
        if (a < b)
            out[m++] = (act_iv){a, b};
    }
    qsort(out, m, sizeof *out, cmp_iv);
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        if (k && out[i].t0 <= out[k - 1].t1) {
            if (out[i].t1 > out[k - 1].t1)
                out[k - 1].t1 = out[i].t1;
        } else {
            out[k++] = out[i];
        }
    }
    return k;
}

static uint64_t measure(const act_iv *v, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i].t1 - v[i].t0;
    return s;
}

/* the measure of (a ∩ b), both disjoint and sorted */
static uint64_t intersect(const act_iv *a, size_t na, const act_iv *b, size_t nb)
{
    uint64_t s = 0;
    size_t i = 0, j = 0;
    while (i < na && j < nb) {
        uint64_t lo = a[i].t0 > b[j].t0 ? a[i].t0 : b[j].t0;
        uint64_t hi = a[i].t1 < b[j].t1 ? a[i].t1 : b[j].t1;
        if (lo < hi)
            s += hi - lo;
        if (a[i].t1 < b[j].t1)
            i++;
        else
            j++;
    }
    return s;
}

static uint64_t to_ns(double sec) { return sec <= 0 ? 0 : (uint64_t)(sec * 1e9 + 0.5); }

int gpu_activity_take(backend *be, double t0, double t1, backend_activity *out)
{
    (void)be;
    memset(out, 0, sizeof *out);
    if (!A.on)
        return 0;
    CUPTI_CHECK(fn.flush_all(0)); /* the records of work that has ended */
    uint64_t lo = to_ns(t0), hi = to_ns(t1);
    pthread_mutex_lock(&A.mu);
    act_iv *u[ACT_KINDS];
    size_t nu[ACT_KINDS];
    for (int k = 0; k < ACT_KINDS; k++) {
        u[k] = xmalloc((A.n[k] + 1) * sizeof *u[k]);
        nu[k] = union_of(A.iv[k], A.n[k], lo, hi, u[k]);
    }
    out->compute_s = (double)measure(u[ACT_COMPUTE], nu[ACT_COMPUTE]) / 1e9;
    out->h2d_s = (double)measure(u[ACT_H2D], nu[ACT_H2D]) / 1e9;
    out->d2h_s = (double)measure(u[ACT_D2H], nu[ACT_D2H]) / 1e9;
    /* copies in either direction, as one union, against compute */
    act_iv *both = xmalloc((nu[ACT_H2D] + nu[ACT_D2H] + 1) * sizeof *both);
    act_iv *cat = xmalloc((nu[ACT_H2D] + nu[ACT_D2H] + 1) * sizeof *cat);
    memcpy(cat, u[ACT_H2D], nu[ACT_H2D] * sizeof *cat);
    memcpy(cat + nu[ACT_H2D], u[ACT_D2H], nu[ACT_D2H] * sizeof *cat);
    size_t nb = union_of(cat, nu[ACT_H2D] + nu[ACT_D2H], lo, hi, both);
    out->overlap_s = (double)intersect(u[ACT_COMPUTE], nu[ACT_COMPUTE], both, nb) / 1e9;
    out->dropped = A.dropped;
    free(both);
    free(cat);
    /* what ended by t1 is measured; the rest (a copy for the next pass
     * already running) waits for the next window */
    for (int k = 0; k < ACT_KINDS; k++) {
        free(u[k]);
        size_t m = 0;
        for (size_t i = 0; i < A.n[k]; i++)
            if (A.iv[k][i].t1 > hi)
                A.iv[k][m++] = A.iv[k][i];
        A.n[k] = m;
    }
    pthread_mutex_unlock(&A.mu);
    return 1;
}

/* ---------------------------------------------------------------- --trace */

void gpu_activity_timeline_start(void)
{
    pthread_mutex_lock(&A.mu);
    A.timeline = 1;
    pthread_mutex_unlock(&A.mu);
}

size_t gpu_activity_timeline_take(backend_span *out, size_t max)
{
    if (!A.on)
        return 0;
    CUPTI_CHECK(fn.flush_all(0));
    pthread_mutex_lock(&A.mu);
    size_t n = A.nspans < max ? A.nspans : max;
    memcpy(out, A.spans, n * sizeof *out);
    memmove(A.spans, A.spans + n, (A.nspans - n) * sizeof *A.spans);
    A.nspans -= n;
    pthread_mutex_unlock(&A.mu);
    return n;
}
