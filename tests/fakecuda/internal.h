/* internal.h — what the fake's files share: the device-memory registry,
 * stream queues, violations and the fail/corrupt knobs. Not for tests. */
#ifndef TRAIN_FAKECUDA_INTERNAL_H
#define TRAIN_FAKECUDA_INTERNAL_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "fake.h"

/* Report misuse: "fakecuda: api: ..." on stderr, counted. */
void fk_violation(const char *api, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* 1 when a failure was queued for api (status in *status); consumes it. */
int fk_take_failure(const char *api, int *status);
/* 1 when a corruption was queued for api; consumes it. */
int fk_take_corruption(const char *api);
/* count a call */
void fk_count(const char *api);

/* [p, p + bytes) lies in one live device allocation; else a violation
 * naming api and what ("x", "workspace") and 0. bytes 0 checks p alone. */
int fk_dev_range(const char *api, const char *what, const void *p, size_t bytes);
/* p is inside a live device allocation */
int fk_is_device(const void *p);
/* describe what p is, for messages: "host memory", "freed allocation #3" */
const char *fk_describe(const void *p, char *buf, size_t len);
/* a host scalar (alpha/beta) pointer: non-NULL, not device memory, finite */
int fk_host_scalar(const char *api, const char *what, const void *p);

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
/* The device is configured as absent: the error every call returns, or cudaSuccess. */
cudaError_t fk_device_error(void);
/* An asynchronous fault has been reported: every later call fails. */
cudaError_t fk_sticky_error(void);

void fk_cudnn_reset(void);
void fk_cublas_reset(void);
int fk_cudnn_live(void);
int fk_cublas_live(void);

#endif
