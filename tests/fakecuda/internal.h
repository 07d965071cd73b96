/* internal.h — what the fake's files share: the call prologue and error
 * bookkeeping (runtime.c), the device-memory registry (memory.c), stream
 * queues (streams.c), violations and the fail/corrupt/fault knobs. Not for
 * tests: they use fake.h. */
#ifndef TRAIN_FAKECUDA_INTERNAL_H
#define TRAIN_FAKECUDA_INTERNAL_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "fake.h"

/* ---- runtime.c */
/* Every runtime call starts with this: counts the call, then fails it (as
 * its return value) for an absent device, a reported sticky fault or a
 * queued failure. */
#define FK_ENTER(api)                                                                              \
    do {                                                                                           \
        cudaError_t fk_e_ = fk_enter(api);                                                         \
        if (fk_e_ != cudaSuccess)                                                                  \
            return fk_e_;                                                                          \
    } while (0)
cudaError_t fk_enter(const char *api);
/* Record e as the last error (cudaGetLastError) when it is one; returns e. */
cudaError_t fk_ret(cudaError_t e);
/* Report misuse: "fakecuda: api: ..." on stderr, counted. */
void fk_violation(const char *api, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 1 when a failure was queued for api (status in *status); consumes it. */
int fk_take_failure(const char *api, int *status);
/* 1 when a corruption / a fault was queued for api; consumes it. */
int fk_take_corruption(const char *api);
int fk_take_fault(const char *api);
void fk_count(const char *api);
/* The device is configured as absent: the error every call returns, or cudaSuccess. */
cudaError_t fk_device_error(void);
/* A faulting operation ran (streams.c calls this) ... */
void fk_raise_fault(void);
/* ... the end of a synchronising call reports it, and from then on ... */
cudaError_t fk_sync_result(void);
/* ... every call fails with it. */
cudaError_t fk_sticky_error(void);
size_t fk_mem_total(void);

/* ---- memory.c */
/* [p, p + bytes) lies in one live device allocation; else a violation
 * naming api and what ("x", "workspace") and 0. bytes 0 checks p alone. */
int fk_dev_range(const char *api, const char *what, const void *p, size_t bytes);
/* p is inside a live device allocation */
int fk_is_device(const void *p);
/* describe what p is, for messages: "host memory", "freed allocation #3" */
const char *fk_describe(const void *p, char *buf, size_t len);
/* a host scalar (alpha/beta) pointer: non-NULL, not device memory, finite */
int fk_host_scalar(const char *api, const char *what, const void *p);
int fk_pinned_count(void);
void fk_memory_reset(void);

/* ---- streams.c */
/* Enqueue work on stream s (NULL = the legacy default stream). Returns
 * cudaErrorInvalidResourceHandle for a stream that is not alive. host/
 * host_bytes: a host range the op reads (checked for modification between
 * enqueue and run, and against cudaHostUnregister). */
cudaError_t fk_enqueue(cudaStream_t s, const char *name, void (*run)(void *), void (*drop)(void *),
                       void *arg, const void *host, size_t host_bytes);
/* 1 when s is a live stream or NULL */
int fk_stream_ok(cudaStream_t s);
/* Run every queue to the end. */
void fk_drain_all(void);
/* Run every blocking stream to the end (what the legacy stream waits for). */
void fk_legacy_barrier(void);
/* The name of a queued operation that reads [base, base + size), or NULL. */
const char *fk_queued_reader(const void *base, size_t size);
int fk_streams_live(void);
void fk_streams_reset(void);

/* ---- cudnn.c, cublas.c */
void fk_cudnn_reset(void);
void fk_cublas_reset(void);
int fk_cudnn_live(void);
int fk_cublas_live(void);

#endif
