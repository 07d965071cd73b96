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
 * Not modelled: the host's own work between calls (the loader, the CPU
 * side of a step) takes no virtual time, so a run's simulated time is the
 * device pipeline's; several kernels at once on the compute engine; PCIe
 * contention between the two copy directions. FAKECUDA_DEBUG_CLOCK=1
 * prints every operation's place on the clock and every host wait.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fakecuda/internal.h"

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
} K;

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

double fk_host_ms(void) { return (load(), K.host_ms); }

void fk_host_pass(double ms)
{
    load();
    K.host_ms += ms > 0 ? ms : 0;
}

unsigned long fk_host_launches(void) { return (unsigned long)K.launches; }

void fk_host_issue(void)
{
    load();
    K.host_ms += K.c.launch_us / 1000.0;
    K.launches++;
}

void fk_host_wait_until(double t_ms)
{
    K.syncs++;
    if (getenv("FAKECUDA_DEBUG_CLOCK"))
        fprintf(stderr, "clock: host waits from %.3f to %.3f\n", K.host_ms, t_ms);
    if (t_ms > K.host_ms) {
        K.host_ms = t_ms;
        if (K.engine_free[FK_ENGINE_COMPUTE] <= t_ms)
            K.stalls++;
    }
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
    double start = ready_ms;
    if (K.host_ms > start)
        start = K.host_ms;
    if (K.engine_free[eng] > start)
        start = K.engine_free[eng];
    K.engine_free[eng] = start + cost_ms;
    K.engine_busy[eng] += cost_ms;
    return start + cost_ms;
}

void fake_clock(fake_clock_stats *st)
{
    load();
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

void fk_clock_reset(void) { memset(&K, 0, sizeof K); }
