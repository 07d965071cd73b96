/* wait.c — host waits for device work, bounded by a watchdog (wait.h). */
#define _POSIX_C_SOURCE 200809L
#include "cuda/wait.h"

#include <time.h>

#include "common/util.h"
#include "cuda/check.h"

static struct {
    gpu_watchdog fn;
    void *ctx;
    cudaEvent_t mark; /* recorded on a stream a wait polls */
} W;

void gpu_set_watchdog(gpu_watchdog fn, void *ctx)
{
    if (!fn && W.mark) {
        CUDA_CHECK(cudaEventDestroy(W.mark));
        W.mark = NULL;
    }
    W.fn = fn;
    W.ctx = ctx;
}

/* poll ev until it completes, calling the watchdog between polls */
static void poll_event(cudaEvent_t ev, const char *what, const char *func, const char *file,
                       int line)
{
    double t0 = now_sec();
    long ns = 10 * 1000; /* doubling up to 100 us: a wait ends at most 100 us late */
    for (;;) {
        cudaError_t st = cudaEventQuery(ev);
        if (st == cudaSuccess)
            return;
        if (st != cudaErrorNotReady)
            gpu_check_cuda(st, what, func, file, line);
        W.fn(W.ctx, now_sec() - t0);
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        ns = ns * 2 < 100 * 1000 ? ns * 2 : 100 * 1000;
    }
}

void gpu_wait_event(cudaEvent_t ev, const char *what, const char *func, const char *file, int line)
{
    if (!W.fn) {
        gpu_check_cuda(cudaEventSynchronize(ev), what, func, file, line);
        return;
    }
    poll_event(ev, what, func, file, line);
}

void gpu_wait_stream(cudaStream_t s, const char *what, const char *func, const char *file, int line)
{
    if (!W.fn) {
        gpu_check_cuda(cudaStreamSynchronize(s), what, func, file, line);
        return;
    }
    if (!W.mark)
        gpu_check_cuda(cudaEventCreateWithFlags(&W.mark, cudaEventDisableTiming), what, func, file,
                       line);
    gpu_check_cuda(cudaEventRecord(W.mark, s), what, func, file, line);
    poll_event(W.mark, what, func, file, line);
}
