/* wait.h — every host wait for device work in the GPU backend goes through
 * here, so that a wait for work queued behind a collective that never ends
 * (a peer gone) can end: with a watchdog set (comm/nccl.c sets one while a
 * communicator lives), a wait polls (cudaEventQuery, sleeps from 10 us up
 * to 100 us) and calls the watchdog between polls with the seconds waited so
 * far; the watchdog may end the process. Without one, a wait is the plain
 * cudaEventSynchronize / cudaStreamSynchronize.
 *
 * Statuses are checked like CUDA_CHECK's, naming the caller's line.
 */
#ifndef TRAIN_CUDA_WAIT_H
#define TRAIN_CUDA_WAIT_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*gpu_watchdog)(void *ctx, double waited_s);

/* Set (fn non-NULL) or clear the watchdog. Not thread-safe: the host
 * thread that issues the work sets it and waits. */
void gpu_set_watchdog(gpu_watchdog fn, void *ctx);

#define GPU_WAIT_EVENT(ev) gpu_wait_event((ev), #ev, __func__, __FILE__, __LINE__)
#define GPU_WAIT_STREAM(s) gpu_wait_stream((s), #s, __func__, __FILE__, __LINE__)
void gpu_wait_event(cudaEvent_t ev, const char *what, const char *func, const char *file, int line);
void gpu_wait_stream(cudaStream_t s, const char *what, const char *func, const char *file,
                     int line);

#ifdef __cplusplus
}
#endif

#endif
