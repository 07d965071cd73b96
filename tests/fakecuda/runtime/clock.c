/* clock.c — the fake device's virtual time line. Data still moves when the
 * lazy queues of streams.c run; this file only says WHEN each operation
 * would have run on a device with one compute engine, one copy engine
 * per direction and a link for NCCL's sums, and how long the host was held
 * up.
 *
 * Scheduling happens when an operation is enqueued (list scheduling in
 * enqueue order): it starts at the latest of
 *   - the host clock (the host must have issued it),
 *   - the end of the previous operation on its stream (or the record time
 *     of an event the stream waits for, captured when the wait is issued),
 *   - the moment its engine is free (engines run one operation at a time,
 *     in the order they were issued),
 * and ends `cost` later. Operations on different engines overlap.
 *
 * Cost model (defaults; fake_set_cost and FAKECUDA_COST change them):
 *   launch_us   every enqueue costs the host this much (API + launch)
 *   h2d_gbps,   pinned host <-> device copies: bytes / bandwidth on the
 *   d2h_gbps    copy engine of that direction
 *   pageable    copies from or to pageable host memory run at half the
 *               bandwidth (staged through a driver buffer) and the calling
 *               host thread is blocked until the copy ends — what CUDA does
 *               for cudaMemcpyAsync with pageable memory
 *   kernel_us   every kernel / cuDNN / cuBLAS call costs at least this ...
 *   tflops,     ... plus flops / (tflops * 1e12) + bytes / (dev_gbps * 1e9)
 *   dev_gbps    when the call told the clock its flops and bytes
 *               (fk_cost_next); device-to-device copies and memsets go on
 *               the compute engine at dev_gbps
 *   link_gbps   an NCCL sum moves the bytes it is given (the fake NCCL:
 *               a ring's 2 (K-1)/K of the buffer) at this bandwidth on a
 *               link engine of its own, beside the compute engine: as if
 *               NCCL's kernels took nothing from the compute they overlap
 *               (optimistic: on a GPU they share the SMs)
 * A host synchronisation (stream, event or device synchronize, a blocking
 * cudaMemcpy, a pageable copy) moves the host clock to the end of what it
 * waits for and is counted. A wait that really waited (the host was ahead)
 * and ends with the compute engine out of work is also counted as a stall:
 * the host and the device took turns there, and the device idles for as
 * long as the host then needs to enqueue more (on a real machine, the CPU
 * side of the next step). A pipeline that reads results back late waits
 * for work that is followed by queued work, which is not a stall.
 * cudaEventQuery answers from the clock too: "not ready" while the host
 * clock is before the event's simulated time; a host that asks again with
 * nothing issued in between is polling, and its clock moves on by the
 * wall time between the two queries (so a polling loop ends).
 *
 * Real-time mode (timeline.c, FAKECUDA_REALTIME=1) ties this clock to the
 * wall clock for the fake NVML: the host clock catches up with the wall
 * clock before each launch and wait, and sleeps when it got ahead. The
 * CUPTI stand-in does the same through fk_clock_follow (below); the two
 * are not meant to be on together (each has its own time base).
 *
 * Not modelled (outside those modes): the host's own work between calls (the loader, the CPU
 * side of a step) takes no virtual time, so a run's simulated time is the
 * device pipeline's — except when the clock follows a real one
 * (fk_clock_follow, from the CUPTI stand-in's timestamp callback, cupti.c):
 * then the host's time is never behind that clock, and a launch or a wait
 * holds the caller (sleeping) until that clock reaches the simulated host
 * time, so the program's own clock readings and the activity records agree; several kernels at once on the compute engine; PCIe
 * contention between the two copy directions. FAKECUDA_DEBUG_CLOCK=1
 * prints every operation's place on the clock and every host wait.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/fakecuda/runtime/internal.h"

typedef struct cost_model {
    double launch_us, h2d_gbps, d2h_gbps, kernel_us, tflops, dev_gbps, link_gbps;
} cost_model;

static const cost_model defaults = {
    .launch_us = 5.0,
    .h2d_gbps = 12.0,
    .d2h_gbps = 12.0,
    .kernel_us = 10.0,
    .tflops = 10.0,
    .dev_gbps = 500.0,
    .link_gbps = 25.0,
};

static struct {
    cost_model c;
    double host_ms;
    double engine_free[FK_ENGINES];
    double engine_busy[FK_ENGINES];
    double next_flops, next_bytes; /* fk_cost_next, consumed by the next compute op */
    int syncs, launches, spins, stalls;
    int loaded; /* FAKECUDA_COST read */
    struct {
        double t0, t1;
    } * iv[FK_ENGINES]; /* every operation's place, per engine (the truth) */
    size_t niv[FK_ENGINES], capiv[FK_ENGINES];
    uint64_t (*now_ns)(void); /* fk_clock_follow: the clock the host follows ... */
    uint64_t anchor_ns;       /* ... and its reading at host_ms 0 */
} K;

static void load(void);

/* following a real clock: the host's time is at least that clock's */
static double real_ms(void) { return (double)(K.now_ns() - K.anchor_ns) / 1e6; }

static void catch_up(void)
{
    if (K.now_ns) {
        double r = real_ms();
        if (r > K.host_ms)
            K.host_ms = r;
    }
}

/* ... and the caller is held until that clock reaches the simulated host
 * time (a launch's cost, a wait for the device) */
static void hold(void)
{
    if (!K.now_ns)
        return;
    for (double gap; (gap = K.host_ms - real_ms()) > 0;)
        if (gap > 0.2) {
            struct timespec ts = {0, (long)((gap - 0.1) * 1e6)};
            nanosleep(&ts, NULL);
        }
}

void fk_clock_follow(uint64_t (*now_ns)(void))
{
    load();
    K.now_ns = now_ns;
    if (now_ns)
        K.anchor_ns = now_ns() - (uint64_t)llround(K.host_ms * 1e6);
}

uint64_t fk_clock_ns(double t_ms) { return K.anchor_ns + (uint64_t)llround(t_ms * 1e6); }

/* "kernel_us=30,h2d_gbps=0.025": unknown keys are a violation */
static void parse_costs(const char *spec)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        if (!eq || fake_set_cost((*eq = '\0', tok), atof(eq + 1)) != 0)
            fk_violation("FAKECUDA_COST",
                         "cannot use '%s' (keys: launch_us h2d_gbps d2h_gbps "
                         "kernel_us tflops dev_gbps link_gbps)",
                         tok);
    }
}

static void load(void)
{
    if (K.loaded)
        return;
    K.loaded = 1;
    K.c = defaults;
    const char *spec = getenv("FAKECUDA_COST");
    if (spec)
        parse_costs(spec);
}

int fake_set_cost(const char *key, double value)
{
    load();
    struct {
        const char *name;
        double *v;
    } keys[] = {{"launch_us", &K.c.launch_us}, {"h2d_gbps", &K.c.h2d_gbps},
                {"d2h_gbps", &K.c.d2h_gbps},   {"kernel_us", &K.c.kernel_us},
                {"tflops", &K.c.tflops},       {"dev_gbps", &K.c.dev_gbps},
                {"link_gbps", &K.c.link_gbps}};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (!strcmp(key, keys[i].name)) {
            if (!(value > 0.0) && strcmp(key, "launch_us"))
                return -1;
            *keys[i].v = value;
            return 0;
        }
    return -1;
}

double fk_host_ms(void)
{
    load();
    catch_up();
    K.host_ms = fk_realtime_catch_up(K.host_ms);
    return K.host_ms;
}

void fk_host_pass(double ms)
{
    load();
    K.host_ms += ms > 0 ? ms : 0;
}

unsigned long fk_host_launches(void) { return (unsigned long)K.launches; }

void fk_host_issue(void)
{
    load();
    catch_up();
    K.host_ms = fk_realtime_catch_up(K.host_ms) + K.c.launch_us / 1000.0;
    K.launches++;
    hold();
    fk_realtime_sleep_until(K.host_ms);
}

void fk_host_wait_until(double t_ms)
{
    catch_up();
    K.syncs++;
    K.host_ms = fk_realtime_catch_up(K.host_ms);
    if (getenv("FAKECUDA_DEBUG_CLOCK"))
        fprintf(stderr, "clock: host waits from %.3f to %.3f\n", K.host_ms, t_ms);
    if (t_ms > K.host_ms) {
        K.host_ms = t_ms;
        if (K.engine_free[FK_ENGINE_COMPUTE] <= t_ms)
            K.stalls++;
        fk_realtime_sleep_until(t_ms);
    }
    hold();
}

void fk_spin_wait(void) { K.spins++; }

void fk_cost_next(double flops, double bytes)
{
    K.next_flops = flops;
    K.next_bytes = bytes;
}

double fk_cost_ms(fk_engine eng, size_t bytes, int pageable)
{
    load();
    double ms;
    switch (eng) {
    case FK_ENGINE_H2D:
    case FK_ENGINE_D2H: {
        double gbps = eng == FK_ENGINE_H2D ? K.c.h2d_gbps : K.c.d2h_gbps;
        if (pageable)
            gbps /= 2;
        return (double)bytes / (gbps * 1e6);
    }
    case FK_ENGINE_LINK: return (double)bytes / (K.c.link_gbps * 1e6);
    case FK_ENGINE_COMPUTE:
    default:
        ms = K.c.kernel_us / 1000.0 + K.next_flops / (K.c.tflops * 1e9) +
             ((double)bytes + K.next_bytes) / (K.c.dev_gbps * 1e6);
        K.next_flops = K.next_bytes = 0;
        return ms;
    }
}

double fk_schedule(fk_engine eng, double ready_ms, double cost_ms)
{
    catch_up();
    double start = ready_ms;
    if (K.host_ms > start)
        start = K.host_ms;
    if (K.engine_free[eng] > start)
        start = K.engine_free[eng];
    K.engine_free[eng] = start + cost_ms;
    K.engine_busy[eng] += cost_ms;
    fk_timeline_note(eng, start, start + cost_ms);
    if (K.niv[eng] == K.capiv[eng]) {
        K.capiv[eng] = K.capiv[eng] ? 2 * K.capiv[eng] : 256;
        K.iv[eng] = realloc(K.iv[eng], K.capiv[eng] * sizeof *K.iv[eng]);
    }
    K.iv[eng][K.niv[eng]].t0 = start;
    K.iv[eng][K.niv[eng]++].t1 = start + cost_ms;
    return start + cost_ms;
}

/* the time the compute engine and a copy engine (either) were busy at
 * once, inside [lo, hi]: each engine runs one operation at a time in start
 * order, so the compute list is sorted and disjoint; the two copy lists
 * are merged into one sorted union first */
typedef struct span_ms {
    double t0, t1;
} span_ms;

static int cmp_span(const void *a, const void *b)
{
    const span_ms *x = a, *y = b;
    return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

static double overlap_in(double lo, double hi)
{
    size_t n = K.niv[FK_ENGINE_H2D] + K.niv[FK_ENGINE_D2H], m = 0;
    span_ms *u = malloc((n + 1) * sizeof *u);
    for (int e = FK_ENGINE_H2D; e <= FK_ENGINE_D2H; e++)
        for (size_t j = 0; j < K.niv[e]; j++)
            u[m++] = (span_ms){K.iv[e][j].t0, K.iv[e][j].t1};
    qsort(u, m, sizeof *u, cmp_span);
    size_t k = 0;
    for (size_t j = 0; j < m; j++)
        if (k && u[j].t0 <= u[k - 1].t1) {
            if (u[j].t1 > u[k - 1].t1)
                u[k - 1].t1 = u[j].t1;
        } else {
            u[k++] = u[j];
        }
    double sum = 0;
    size_t j = 0;
    for (size_t i = 0; i < K.niv[FK_ENGINE_COMPUTE]; i++) {
        double a = K.iv[FK_ENGINE_COMPUTE][i].t0, b = K.iv[FK_ENGINE_COMPUTE][i].t1;
        a = a > lo ? a : lo, b = b < hi ? b : hi;
        while (j < k && u[j].t1 <= a)
            j++;
        for (size_t q = j; q < k && u[q].t0 < b; q++) {
            double x = u[q].t0 > a ? u[q].t0 : a, y = u[q].t1 < b ? u[q].t1 : b;
            if (x < y)
                sum += y - x;
        }
    }
    free(u);
    return sum;
}

/* the busy time of engine eng inside [lo, hi] */
static double busy_in(int eng, double lo, double hi)
{
    double sum = 0;
    for (size_t i = 0; i < K.niv[eng]; i++) {
        double a = K.iv[eng][i].t0 > lo ? K.iv[eng][i].t0 : lo;
        double b = K.iv[eng][i].t1 < hi ? K.iv[eng][i].t1 : hi;
        if (a < b)
            sum += b - a;
    }
    return sum;
}

void fake_clock_window(double lo_ms, double hi_ms, fake_clock_window_stats *w)
{
    load();
    w->compute_ms = busy_in(FK_ENGINE_COMPUTE, lo_ms, hi_ms);
    w->h2d_ms = busy_in(FK_ENGINE_H2D, lo_ms, hi_ms);
    w->d2h_ms = busy_in(FK_ENGINE_D2H, lo_ms, hi_ms);
    w->overlap_ms = overlap_in(lo_ms, hi_ms);
}

void fake_clock(fake_clock_stats *st)
{
    load();
    catch_up();
    st->overlap_ms = overlap_in(-1e300, 1e300);
    st->host_ms = K.host_ms;
    st->compute_ms = K.engine_busy[FK_ENGINE_COMPUTE];
    st->h2d_ms = K.engine_busy[FK_ENGINE_H2D];
    st->d2h_ms = K.engine_busy[FK_ENGINE_D2H];
    st->link_ms = K.engine_busy[FK_ENGINE_LINK];
    st->host_syncs = K.syncs;
    st->launches = K.launches;
    st->spin_waits = K.spins;
    st->stall_syncs = K.stalls;
}

void fk_clock_reset(void)
{
    for (int e = 0; e < FK_ENGINES; e++)
        free(K.iv[e]);
    memset(&K, 0, sizeof K);
    fk_timeline_reset();
}
