/* memory.c — the fake's device memory: a registry of malloc'd host buffers
 * standing in for device allocations (filled with NaN bytes, so reading
 * what nobody wrote shows), the checks every other part uses to tell device
 * from host memory and to bound extents, copies and memsets with their
 * kind checked, and page-locked host ranges. See fake.h.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fakecuda/runtime/internal.h"

typedef struct alloc {
    char *base;
    size_t size;
    int live;
    int id;
    double busy_until_ms; /* virtual clock: the last enqueued operation using it ends */
} alloc;

typedef struct range {
    char *base;
    size_t size;
} range;

static struct {
    alloc *allocs; /* live and freed, for use-after-free messages */
    int nallocs, cap;
    int next_id;
    size_t used;
    range pinned[64];
    int npinned;
    int touched[32]; /* allocations the current call's pointer checks found */
    int ntouched;
} M;

/* ---------------------------------------------------------------- registry */

static alloc *find_alloc(const void *p, int live)
{
    const char *c = p;
    for (int i = M.nallocs - 1; i >= 0; i--) {
        alloc *a = &M.allocs[i];
        if (a->live == live && c >= a->base && c < a->base + (a->size ? a->size : 1))
            return a;
    }
    return NULL;
}

static void touch(const alloc *a)
{
    int i = (int)(a - M.allocs);
    for (int k = 0; k < M.ntouched; k++)
        if (M.touched[k] == i)
            return;
    if (M.ntouched < (int)(sizeof M.touched / sizeof *M.touched))
        M.touched[M.ntouched++] = i;
}

void fk_touched_busy_until(double t_ms)
{
    for (int k = 0; k < M.ntouched; k++) {
        alloc *a = &M.allocs[M.touched[k]];
        if (t_ms > a->busy_until_ms)
            a->busy_until_ms = t_ms;
    }
    M.ntouched = 0;
}

void fk_touched_clear(void) { M.ntouched = 0; }

int fk_is_device(const void *p)
{
    alloc *a = p ? find_alloc(p, 1) : NULL;
    if (a)
        touch(a);
    return a != NULL;
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
    touch(a);
    size_t off = (size_t)((const char *)p - a->base);
    if (bytes > a->size - off) {
        fk_violation(api,
                     "%s: %zu bytes from offset %zu run %zu bytes past the end of device "
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
    for (int i = 0; i < M.nallocs; i++)
        n += M.allocs[i].live;
    return n;
}

int fk_pinned_count(void) { return M.npinned; }

size_t fk_mem_used(void) { return M.used; }

void fk_memory_reset(void)
{
    for (int i = 0; i < M.nallocs; i++)
        if (M.allocs[i].live)
            free(M.allocs[i].base);
    free(M.allocs);
    memset(&M, 0, sizeof M);
}

cudaError_t cudaMalloc(void **p, size_t size)
{
    FK_ENTER("cudaMalloc");
    if (!p)
        return fk_ret(cudaErrorInvalidValue);
    *p = NULL;
    if (size == 0)
        return cudaSuccess;
    if (size > fk_mem_total() - M.used)
        return fk_ret(cudaErrorMemoryAllocation);
    char *m = malloc(size);
    if (!m)
        return fk_ret(cudaErrorMemoryAllocation);
    memset(m, 0xff, size); /* NaN floats: reading memory nobody wrote shows */
    if (M.nallocs == M.cap) {
        M.cap = M.cap ? 2 * M.cap : 64;
        M.allocs = realloc(M.allocs, M.cap * sizeof *M.allocs);
        if (!M.allocs)
            abort();
    }
    M.allocs[M.nallocs++] = (alloc){.base = m, .size = size, .live = 1, .id = ++M.next_id};
    M.used += size;
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    FK_ENTER("cudaFree");
    if (!p)
        return cudaSuccess;
    /* The data runs first, so that later reads see no freed memory; but
     * cudaFree only MAY wait for the device ("may synchronize"): freeing
     * what enqueued work still uses at this point of the virtual clock is
     * misuse, whatever the driver happens to do. */
    fk_drain_all();
    alloc *a = find_alloc(p, 1);
    if (!a || a->base != p) {
        char d[160];
        fk_violation("cudaFree", "%s is not the start of a live allocation",
                     fk_describe(p, d, sizeof d));
        return fk_ret(cudaErrorInvalidValue);
    }
    if (a->busy_until_ms > fk_host_ms() + 1e-9)
        fk_violation("cudaFree",
                     "device allocation #%d is used by work that ends at %.3f ms on the "
                     "virtual clock, and the host is at %.3f ms: cudaFree may return before "
                     "the device is done; synchronise the stream that uses it first",
                     a->id, a->busy_until_ms, fk_host_ms());
    free(a->base);
    a->live = 0;
    M.used -= a->size;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
    FK_ENTER("cudaMemGetInfo");
    *free_b = fk_mem_total() - M.used;
    *total = fk_mem_total();
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
    case cudaMemcpyHostToHost: return "HostToHost";
    case cudaMemcpyHostToDevice: return "HostToDevice";
    case cudaMemcpyDeviceToHost: return "DeviceToHost";
    case cudaMemcpyDeviceToDevice: return "DeviceToDevice";
    default: return "Default";
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

static int is_pinned(const void *p, size_t n)
{
    const char *c = p;
    for (int i = 0; i < M.npinned; i++)
        if (c >= M.pinned[i].base && c + n <= M.pinned[i].base + M.pinned[i].size)
            return 1;
    return 0;
}

/* The engine a copy runs on (clock.c), and whether its host side is
 * pageable (half bandwidth, and the host blocks until it ends). */
static fk_engine copy_engine(const void *dst, const void *src, size_t n, int *pageable)
{
    int dd = fk_is_device(dst), sd = fk_is_device(src);
    *pageable = 0;
    if (dd && sd)
        return FK_ENGINE_COMPUTE;
    *pageable = !is_pinned(dd ? src : dst, n);
    return dd ? FK_ENGINE_H2D : FK_ENGINE_D2H;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                            cudaStream_t s)
{
    FK_ENTER("cudaMemcpyAsync");
    if (!copy_ok("cudaMemcpyAsync", dst, src, n, kind))
        return fk_ret(cudaErrorInvalidValue);
    if (n == 0)
        return cudaSuccess;
    copy_job *j = calloc(1, sizeof *j);
    *j = (copy_job){.dst = dst, .src = src, .n = n};
    /* a host source is read when the copy runs; a modification before that
     * is a violation (see run_one) */
    const void *host = fk_is_device(src) ? NULL : src;
    int pageable;
    fk_engine eng = copy_engine(dst, src, n, &pageable);
    fk_cupti_next_bytes(n);
    return fk_enqueue_timed(s, "cudaMemcpyAsync", copy_run, free, j, host, host ? n : 0, eng,
                            fk_cost_ms(eng, n, pageable), pageable);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    FK_ENTER("cudaMemcpy");
    if (!copy_ok("cudaMemcpy", dst, src, n, kind))
        return fk_ret(cudaErrorInvalidValue);
    fk_legacy_barrier(); /* waits for blocking streams only, like CUDA */
    memcpy(dst, src, n);
    int pageable;
    fk_engine eng = copy_engine(dst, src, n, &pageable);
    double cost = fk_cost_ms(eng, n, pageable);
    double end = fk_schedule(eng, fk_stream_end_ms(NULL), cost);
    fk_cupti_next_bytes(n);
    fk_cupti_op(eng, "cudaMemcpy", end - cost, end, NULL);
    fk_host_wait_until(end);
    return fk_sync_result();
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s)
{
    FK_ENTER("cudaMemsetAsync");
    if (!fk_dev_range("cudaMemsetAsync", "dst", p, n))
        return fk_ret(cudaErrorInvalidValue);
    copy_job *j = calloc(1, sizeof *j);
    *j = (copy_job){.dst = p, .n = n, .value = value};
    fk_cupti_next_bytes(n);
    return fk_enqueue_timed(s, "cudaMemsetAsync", copy_run, free, j, NULL, 0, FK_ENGINE_COMPUTE,
                            fk_cost_ms(FK_ENGINE_COMPUTE, n, 0), 0);
}

cudaError_t cudaMemset(void *p, int value, size_t n) { return cudaMemsetAsync(p, value, n, NULL); }

/* ---------------------------------------------------------------- page-locked host memory */

cudaError_t cudaHostRegister(void *p, size_t size, unsigned int flags)
{
    FK_ENTER("cudaHostRegister");
    (void)flags;
    char d[160];
    if (!p || !size || find_alloc(p, 1)) {
        fk_violation("cudaHostRegister", "cannot register %s (%zu bytes)",
                     fk_describe(p, d, sizeof d), size);
        return fk_ret(cudaErrorInvalidValue);
    }
    /* Byte ranges, not pages: on an H100 (CUDA 13.0, tools/pin_probe.cu) a
     * second range sharing a page with the first but none of its bytes was
     * accepted, overlapping bytes were refused with this error, and
     * cudaPointerGetAttributes called the bytes of a shared page outside
     * the range unregistered (so is_pinned asks about the bytes too). */
    const char *c = p;
    for (int i = 0; i < M.npinned; i++)
        if (c < M.pinned[i].base + M.pinned[i].size && M.pinned[i].base < c + size)
            return fk_ret(cudaErrorHostMemoryAlreadyRegistered);
    if (M.npinned == (int)(sizeof M.pinned / sizeof *M.pinned))
        return fk_ret(cudaErrorMemoryAllocation);
    /* a driver that will lock no more (the train binary's tests) */
    const char *fail = getenv("FAKECUDA_HOST_REGISTER");
    if (fail && !strcmp(fail, "fail"))
        return fk_ret(cudaErrorMemoryAllocation);
    M.pinned[M.npinned++] = (range){(char *)p, size};
    return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *p)
{
    FK_ENTER("cudaHostUnregister");
    for (int i = 0; i < M.npinned; i++)
        if (M.pinned[i].base == p) {
            range r = M.pinned[i];
            /* a queued copy still reading this range would read pageable,
             * possibly unmapped memory on a real device */
            const char *reader = fk_queued_reader(r.base, r.size);
            if (reader)
                fk_violation("cudaHostUnregister",
                             "%p is still read by a queued %s: synchronise first", p, reader);
            M.pinned[i] = M.pinned[--M.npinned];
            return cudaSuccess;
        }
    /* an address inside a registered range that is not its start: the H100
     * (CUDA 13.0, tools/pin_probe.cu) answered cudaErrorInvalidValue */
    if (is_pinned(p, 1))
        return fk_ret(cudaErrorInvalidValue);
    return fk_ret(cudaErrorHostMemoryNotRegistered);
}
