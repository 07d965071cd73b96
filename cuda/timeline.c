/* timeline.c — the device's own timeline for --trace: when each staging
 * copy ran on the copy stream and each step's compute (a busy bracket) on
 * the compute stream, from CUDA timing events.
 *
 * Device times become host times through one reference event: recorded on
 * the compute stream and waited for at timeline_start, when now_sec() is
 * read; an event's host time is that reading plus its elapsed time from the
 * reference. (On the fake runtime event times are its virtual clock, so the
 * tracks show the simulated device, anchored at that moment.)
 *
 * Copies: a (begin, end) pair of timing events around each copy, in a ring;
 * when the ring is full the oldest pair is waited for (long done) and
 * harvested. Compute: staging.c's busy brackets, as they are harvested.
 * Events are made with cudaEventBlockingSync, so waits sleep.
 *
 * With activity records on (activity.c) none of this runs: the spans come
 * from the records, one per kernel and copy, on the host's clock already
 * (no reference event, so no wake-up latency of its sync shifts them).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "cuda/internal.h"
#include "cuda/wait.h"

static void add_span(gpu_ctx *g, const char *track, const char *name, double t0, double dur)
{
    if (g->tl_n == g->tl_cap) {
        g->tl_cap = g->tl_cap ? 2 * g->tl_cap : 256;
        g->tl_spans = xrealloc(g->tl_spans, g->tl_cap * sizeof *g->tl_spans);
    }
    g->tl_spans[g->tl_n++] = (backend_span){track, name, t0, dur};
}

/* host time of a completed timing event */
static double host_time(gpu_ctx *g, cudaEvent_t e)
{
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, g->tl_ref, e));
    return g->tl_ref_host + ms / 1000.0;
}

void gpu_timeline_start(backend *be)
{
    gpu_ctx *g = gpu_of(be);
    if (g->tl_on)
        return;
    CUDA_CHECK(cudaEventCreateWithFlags(&g->tl_ref, cudaEventBlockingSync));
    CUDA_CHECK(cudaEventRecord(g->tl_ref, g->compute));
    GPU_WAIT_EVENT(g->tl_ref);
    g->tl_ref_host = now_sec();
    g->tl_on = 1;
    if (gpu_activity_on()) /* the spans come from the records: no event pairs */
        gpu_activity_timeline_start();
}

static void harvest_copy(gpu_ctx *g, int wait)
{
    int i = (g->tl_head - g->tl_count + BUSY_RING) % BUSY_RING;
    if (wait)
        GPU_WAIT_EVENT(g->tl_copy[i][1]);
    double t0 = host_time(g, g->tl_copy[i][0]), t1 = host_time(g, g->tl_copy[i][1]);
    add_span(g, "copy", "copy", t0, t1 - t0);
    g->tl_count--;
}

void gpu_timeline_copy_begin(gpu_ctx *g)
{
    if (!g->tl_on || gpu_activity_on())
        return;
    if (g->tl_count == BUSY_RING)
        harvest_copy(g, 1);
    cudaEvent_t *pair = g->tl_copy[g->tl_head];
    if (!pair[0]) {
        CUDA_CHECK(cudaEventCreateWithFlags(&pair[0], cudaEventBlockingSync));
        CUDA_CHECK(cudaEventCreateWithFlags(&pair[1], cudaEventBlockingSync));
    }
    CUDA_CHECK(cudaEventRecord(pair[0], g->copy));
}

void gpu_timeline_copy_end(gpu_ctx *g)
{
    if (!g->tl_on || gpu_activity_on())
        return;
    CUDA_CHECK(cudaEventRecord(g->tl_copy[g->tl_head][1], g->copy));
    g->tl_head = (g->tl_head + 1) % BUSY_RING;
    g->tl_count++;
}

void gpu_timeline_compute(gpu_ctx *g, cudaEvent_t begin, float ms)
{
    if (g->tl_on && !gpu_activity_on())
        add_span(g, "compute", "step", host_time(g, begin), ms / 1000.0);
}

size_t gpu_timeline_take(backend *be, backend_span *out, size_t max)
{
    gpu_ctx *g = gpu_of(be);
    if (!g->tl_on)
        return 0;
    if (gpu_activity_on())
        return gpu_activity_timeline_take(out, max);
    if (g->tl_count > 0) /* the newest copy: the copy stream ran the older ones first */
        GPU_WAIT_EVENT(g->tl_copy[(g->tl_head + BUSY_RING - 1) % BUSY_RING][1]);
    while (g->tl_count > 0)
        harvest_copy(g, 0);
    size_t n = g->tl_n < max ? g->tl_n : max;
    for (size_t i = 0; i < n; i++)
        out[i] = g->tl_spans[i];
    for (size_t i = n; i < g->tl_n; i++)
        g->tl_spans[i - n] = g->tl_spans[i];
    g->tl_n -= n;
    return n;
}

void gpu_timeline_free(gpu_ctx *g)
{
    for (int i = 0; i < BUSY_RING; i++)
        for (int k = 0; k < 2; k++)
            if (g->tl_copy[i][k])
                CUDA_CHECK(cudaEventDestroy(g->tl_copy[i][k]));
    if (g->tl_ref)
        CUDA_CHECK(cudaEventDestroy(g->tl_ref));
    free(g->tl_spans);
}
