/* internal.h — what the fake's files share: the call prologue and error
 * bookkeeping (runtime.c), the device-memory registry (memory.c), stream
 * queues (streams.c), violations and the fail/corrupt/fault knobs. Not for
 * tests: they use fake.h. */
#ifndef TRAIN_FAKECUDA_INTERNAL_H
#define TRAIN_FAKECUDA_INTERNAL_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "tests/fakecuda/runtime/fake.h"

/* the engines of the virtual clock (clock.c); LINK: the NCCL sums */
typedef enum {
    FK_ENGINE_COMPUTE,
    FK_ENGINE_H2D,
    FK_ENGINE_D2H,
    FK_ENGINE_LINK,
    FK_ENGINES
} fk_engine;

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
/* Every allocation a pointer check of the current call found (fk_dev_range,
 * fk_is_device) is in use by the operation being enqueued until t_ms on the
 * clock: cudaFree before then is a violation (cudaFree may return before
 * the device is done with it). The list is cleared at each call's entry. */
void fk_touched_busy_until(double t_ms);
void fk_touched_clear(void);
void fk_memory_reset(void);

/* ---- streams.c */
/* Enqueue work on stream s (NULL = the legacy default stream). Returns
 * cudaErrorInvalidResourceHandle for a stream that is not alive. host/
 * host_bytes: a host range the op reads (checked for modification between
 * enqueue and run, and against cudaHostUnregister). */
cudaError_t fk_enqueue(cudaStream_t s, const char *name, void (*run)(void *), void (*drop)(void *),
                       void *arg, const void *host, size_t host_bytes);
/* ... with its place on the clock: the engine it runs on, its cost, and
 * whether the host blocks until it ends (a pageable copy) */
cudaError_t fk_enqueue_timed(cudaStream_t s, const char *name, void (*run)(void *),
                             void (*drop)(void *), void *arg, const void *host, size_t host_bytes,
                             fk_engine eng, double cost_ms, int host_blocks);
/* when everything enqueued so far on s ends */
double fk_stream_end_ms(cudaStream_t s);
/* 1 when s is a live stream or NULL */
int fk_stream_ok(cudaStream_t s);
/* s carries NCCL work: with fake_set_early_nccl on, it becomes an early
 * stream from now on (NULL, the legacy stream, never does). */
void fk_stream_carries_nccl(cudaStream_t s);
/* 1 when, while the operation now running runs, another stream holds a
 * queued kernel or library call that nothing orders after it (not behind a
 * wait that has not completed, on a stream not blocked waiting): on a
 * device both could be running at once — overlap, on the fake's schedule. */
int fk_running_overtakes_kernels(void);
/* The next operation enqueued never completes: its stream stops there, a
 * query of a record behind it answers "not ready" and a host wait for it
 * never returns (a collective whose peer is gone) ... */
void fk_stick_next(void);
/* ... until this: stuck operations end without running (ncclCommAbort). */
void fk_release_stuck(void);
/* Run every queue to the end (as far as nothing is stuck). */
void fk_drain_all(void);
/* Run every blocking stream to the end (what the legacy stream waits for). */
void fk_legacy_barrier(void);
/* The name of a queued operation that reads [base, base + size), or NULL. */
const char *fk_queued_reader(const void *base, size_t size);
int fk_streams_live(void);
void fk_streams_reset(void);

/* ---- clock.c: the virtual time line */
double fk_host_ms(void);
/* the host's clock moves on by ms (a host polling: the wall time between
 * its queries) */
void fk_host_pass(double ms);
/* operations the host has issued so far */
unsigned long fk_host_launches(void);
/* the host issues one operation: the launch cost */
void fk_host_issue(void);
/* a host synchronisation that returns at t_ms (counted) */
void fk_host_wait_until(double t_ms);
/* the next compute operation's flops and bytes (cuDNN/cuBLAS calls) */
void fk_cost_next(double flops, double bytes);
/* what an operation on eng moving bytes costs, in ms */
double fk_cost_ms(fk_engine eng, size_t bytes, int pageable);
/* schedule it: ready_ms is when its stream lets it start; returns its end */
double fk_schedule(fk_engine eng, double ready_ms, double cost_ms);
/* a host wait on an event without cudaEventBlockingSync had to wait: the
 * thread spins a core meanwhile (counted) */
void fk_spin_wait(void);
void fk_clock_reset(void);
/* From now on the host clock follows now_ns (the CUPTI timestamp
 * callback's clock, ns): the host's own work takes real time, and an
 * issue or a wait holds the caller until the real clock reaches the
 * simulated time. fk_clock_ns: a simulated time on that clock. */
void fk_clock_follow(uint64_t (*now_ns)(void));
uint64_t fk_clock_ns(double t_ms);

/* ---- cupti.c: activity records from the schedule */
/* an operation the clock placed on engine (an fk_engine) from t0 to t1 */
void fk_cupti_op(int engine, const char *name, double t0_ms, double t1_ms, cudaStream_t s);
/* the bytes of the next copy or memset fk_cupti_op hears of */
void fk_cupti_next_bytes(size_t bytes);
void fk_cupti_reset(void);

/* ---- timeline.c: the compute engine's busy intervals and real-time mode */
/* host_ms moved up to the wall clock in real-time mode (else unchanged) */
double fk_realtime_catch_up(double host_ms);
/* in real-time mode, sleep until the wall clock reaches host_ms */
void fk_realtime_sleep_until(double host_ms);
/* an operation scheduled on eng over [t0, t1) */
void fk_timeline_note(fk_engine eng, double t0, double t1);
void fk_timeline_reset(void);
/* device bytes allocated now (memory.c) */
size_t fk_mem_used(void);

/* ---- cudnn.c, cublas.c */
void fk_cudnn_reset(void);
void fk_cublas_reset(void);
int fk_cudnn_live(void);
int fk_cublas_live(void);

/* The emulated kernels' entries into the fake (tests/fakecuda/runtime/emu.h, C++,
 * declares them for the kernels; streams.c implements them). */
cudaError_t emu_enqueue(cudaStream_t s, const char *kernel, void (*run)(void *),
                        void (*drop)(void *), void *job);
int emu_check_arg(const char *kernel, int index, const void *p);
void emu_launch_failed(const char *kernel, cudaError_t err, const char *why);

#endif
