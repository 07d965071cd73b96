/* staging.c — the optional staging/timing block of backend.h on CUDA:
 * page-locking host memory, copies on the dedicated copy stream ordered by
 * events against the compute stream, and compute-busy time from events.
 *
 * Per staging buffer b two events:
 *   copied[b]   recorded on the copy stream after each copy into b; the
 *               compute stream waits for it (stage_wait) and the host polls
 *               it to release the ring slot the copy read (stage_done);
 *   released[b] recorded on the compute stream when compute is done reading
 *               b (stage_release); the next copy into b waits for it, so a
 *               copy never overwrites a batch that compute still reads.
 * Both are created with cudaEventDisableTiming (ordering only, cheaper) and
 * cudaEventBlockingSync: a host wait sleeps instead of spinning a core that
 * the loader's workers need ("If the cudaEventBlockingSync flag has not
 * been set, then the CPU thread will busy-wait").
 *
 * Results: an event per result slot, recorded after the read-back of a
 * step's losses on the compute stream, polled by the host a step later.
 *
 * Busy time: a ring of (begin, end) timing events on the compute stream.
 * The sum of end - begin over completed pairs is the time the device spent
 * on our compute; idle gaps between steps (waiting for data) are excluded.
 * Harvesting happens in busy_take, or when the ring is full (the oldest pair
 * is then long finished).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>

#include "cuda/internal.h"
#include "cuda/wait.h"

static void check_b(int b, const char *func)
{
    if (b < 0 || b >= BACKEND_STAGE_MAX)
        gpu_fatal(func, "staging buffer %d out of range 0..%d", b, BACKEND_STAGE_MAX - 1);
}

int gpu_host_pin(backend *be, void *p, size_t bytes, errbuf *e)
{
    gpu_ctx *g = gpu_of(be);
    int slot = -1;
    for (int i = 0; i < PIN_MAX; i++)
        if (!g->pinned[i]) {
            slot = i;
            break;
        }
    if (slot < 0)
        return errf(e, "page-locking: more than %d ranges", PIN_MAX);
    cudaError_t st = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
    if (st != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky, but clear it for the next check */
        char b[32];
        return errf(e, "page-locking %s with cudaHostRegister failed: %s (%s)",
                    fmt_bytes(b, sizeof b, bytes), cudaGetErrorString(st), cudaGetErrorName(st));
    }
    g->pinned[slot] = p;
    return 0;
}

void gpu_host_unpin(backend *be, void *p)
{
    gpu_ctx *g = gpu_of(be);
    for (int i = 0; i < PIN_MAX; i++)
        if (g->pinned[i] == p) {
            /* copies may still read p: finish them first */
            GPU_WAIT_STREAM(g->copy);
            CUDA_CHECK(cudaHostUnregister(p));
            g->pinned[i] = NULL;
            return;
        }
    gpu_fatal(__func__, "%p was not pinned by host_pin", p);
}

static cudaEvent_t stage_event(cudaEvent_t *ev)
{
    if (!*ev)
        CUDA_CHECK(cudaEventCreateWithFlags(ev, cudaEventDisableTiming | cudaEventBlockingSync));
    return *ev;
}

void gpu_stage_copy(backend *be, int b, void *dst, const void *src, size_t bytes)
{
    gpu_ctx *g = gpu_of(be);
    check_b(b, __func__);
    if (g->release_recorded[b])
        CUDA_CHECK(cudaStreamWaitEvent(g->copy, g->released[b], 0));
    gpu_timeline_copy_begin(g);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, g->copy));
    gpu_timeline_copy_end(g);
    CUDA_CHECK(cudaEventRecord(stage_event(&g->copied[b]), g->copy));
    g->copy_recorded[b] = 1;
}

int gpu_stage_done(backend *be, int b, int wait)
{
    gpu_ctx *g = gpu_of(be);
    check_b(b, __func__);
    if (!g->copy_recorded[b])
        return 1;
    if (wait) {
        GPU_WAIT_EVENT(g->copied[b]);
        return 1;
    }
    cudaError_t st = cudaEventQuery(g->copied[b]);
    if (st == cudaErrorNotReady)
        return 0;
    CUDA_CHECK(st);
    return 1;
}

void gpu_stage_wait(backend *be, int b)
{
    gpu_ctx *g = gpu_of(be);
    check_b(b, __func__);
    if (!g->copy_recorded[b])
        gpu_fatal(__func__, "nothing was copied into staging buffer %d", b);
    CUDA_CHECK(cudaStreamWaitEvent(g->compute, g->copied[b], 0));
}

void gpu_stage_release(backend *be, int b)
{
    gpu_ctx *g = gpu_of(be);
    check_b(b, __func__);
    CUDA_CHECK(cudaEventRecord(stage_event(&g->released[b]), g->compute));
    g->release_recorded[b] = 1;
}

/* ---------------------------------------------------------------- results */

/* A step's losses and predictions, read back on the compute stream (so
 * after the step's work and before the next step's overwrites them) into
 * page-locked memory, then polled: the host waits for them a step later,
 * while the next step runs, instead of draining the device every step. */
void gpu_result_copy(backend *be, int r, void *dst, const void *src, size_t bytes)
{
    gpu_ctx *g = gpu_of(be);
    if (r < 0 || r >= BACKEND_RESULT_MAX)
        gpu_fatal(__func__, "result slot %d out of range 0..%d", r, BACKEND_RESULT_MAX - 1);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, g->compute));
    CUDA_CHECK(cudaEventRecord(stage_event(&g->result_ev[r]), g->compute));
    g->result_recorded[r] = 1;
}

int gpu_result_done(backend *be, int r, int wait)
{
    gpu_ctx *g = gpu_of(be);
    if (r < 0 || r >= BACKEND_RESULT_MAX)
        gpu_fatal(__func__, "result slot %d out of range 0..%d", r, BACKEND_RESULT_MAX - 1);
    if (!g->result_recorded[r])
        return 1;
    if (wait) {
        GPU_WAIT_EVENT(g->result_ev[r]);
        return 1;
    }
    cudaError_t st = cudaEventQuery(g->result_ev[r]);
    if (st == cudaErrorNotReady)
        return 0;
    CUDA_CHECK(st);
    return 1;
}

/* ---------------------------------------------------------------- busy timing */

/* wait = 0: the pair is known to have completed (a later event on the
 * same stream was waited for) */
static void harvest_oldest(gpu_ctx *g, int wait)
{
    int i = (g->busy_head - g->busy_count + BUSY_RING) % BUSY_RING;
    float ms = 0.0f;
    if (wait)
        GPU_WAIT_EVENT(g->busy_ev[i][1]);
    CUDA_CHECK(cudaEventElapsedTime(&ms, g->busy_ev[i][0], g->busy_ev[i][1]));
    gpu_timeline_compute(g, g->busy_ev[i][0], ms);
    g->busy_acc += ms / 1000.0;
    g->busy_count--;
}

void gpu_busy_begin(backend *be)
{
    gpu_ctx *g = gpu_of(be);
    if (g->busy_open)
        gpu_fatal(__func__, "busy_begin twice without busy_end");
    if (g->busy_count == BUSY_RING)
        harvest_oldest(g, 1);
    cudaEvent_t *pair = g->busy_ev[g->busy_head];
    if (!pair[0]) {
        CUDA_CHECK(cudaEventCreateWithFlags(&pair[0], cudaEventBlockingSync));
        CUDA_CHECK(cudaEventCreateWithFlags(&pair[1], cudaEventBlockingSync));
    }
    CUDA_CHECK(cudaEventRecord(pair[0], g->compute));
    g->busy_open = 1;
}

void gpu_busy_end(backend *be)
{
    gpu_ctx *g = gpu_of(be);
    if (!g->busy_open)
        gpu_fatal(__func__, "busy_end without busy_begin");
    CUDA_CHECK(cudaEventRecord(g->busy_ev[g->busy_head][1], g->compute));
    g->busy_open = 0;
    g->busy_head = (g->busy_head + 1) % BUSY_RING;
    g->busy_count++;
}

double gpu_busy_take(backend *be)
{
    gpu_ctx *g = gpu_of(be);
    /* one host wait for the newest pair: the compute stream ran the older
     * ones before it */
    if (g->busy_count > 0)
        GPU_WAIT_EVENT(g->busy_ev[(g->busy_head + BUSY_RING - 1) % BUSY_RING][1]);
    while (g->busy_count > 0)
        harvest_oldest(g, 0);
    double s = g->busy_acc;
    g->busy_acc = 0.0;
    return s;
}

void gpu_staging_free(gpu_ctx *g)
{
    gpu_timeline_free(g);
    for (int i = 0; i < PIN_MAX; i++)
        if (g->pinned[i]) {
            CUDA_CHECK(cudaHostUnregister(g->pinned[i]));
            g->pinned[i] = NULL;
        }
    for (int b = 0; b < BACKEND_STAGE_MAX; b++) {
        if (g->copied[b])
            CUDA_CHECK(cudaEventDestroy(g->copied[b]));
        if (g->released[b])
            CUDA_CHECK(cudaEventDestroy(g->released[b]));
    }
    for (int r = 0; r < BACKEND_RESULT_MAX; r++)
        if (g->result_ev[r])
            CUDA_CHECK(cudaEventDestroy(g->result_ev[r]));
    for (int i = 0; i < BUSY_RING; i++)
        for (int k = 0; k < 2; k++)
            if (g->busy_ev[i][k])
                CUDA_CHECK(cudaEventDestroy(g->busy_ev[i][k]));
}
