/* fake.h — the test-only host implementation of the CUDA runtime, cuBLAS
 * and cuDNN calls the GPU backend makes, and the knobs tests turn.
 *
 * The backend (cuda/ *.c) and the emulated kernels (cuda/kernels.cu built
 * with -DKERNEL_EMULATION) link against these definitions instead of
 * libcudart/libcublas; libcudnn is linked for its descriptor functions
 * only (they run without a GPU), and the fake reads every shape through
 * them. "Device" memory is malloc'd host memory in a registry, so misuse a
 * GPU would punish late or never is caught at the call: a host pointer
 * where device memory is required, a copy of the wrong kind, an extent past
 * the end of an allocation, a freed allocation, a leading dimension too
 * small, a workspace smaller than its algorithm needs, bad alpha/beta, a
 * pinned host buffer modified before the copy from it ran. Each violation
 * prints "fakecuda: <api>: <what>" to stderr, counts, and makes the call
 * return an error status, which the backend's CHECK macros then report
 * with file:line.
 *
 * Besides the data, a virtual clock (clock.c) times every operation: one
 * compute engine and a copy engine per direction, a documented cost model,
 * host waits moving the host clock (fake_clock, fake_set_cost,
 * FAKECUDA_COST). cudaFree of memory that enqueued work still uses at that
 * point of the clock is misuse: cudaFree only MAY synchronise.
 *
 * Streams are queues run lazily: nothing executes until a synchronisation
 * point demands it (stream/event/device synchronize, an event query, a
 * cross-stream wait being reached, cudaFree, a legacy-stream call). So work
 * that is not ordered by events runs in an order the code did not ask for,
 * and missing waits show up as wrong data. The fake is stricter than CUDA:
 * no copy completes before a sync point, even from pageable memory — unless
 * eager copies are on (fake_set_eager_copies), the opposite timing. A stream
 * carrying NCCL work can be made to run as early as its waits allow
 * (fake_set_early_nccl): the schedule that exposes a collective not ordered
 * after the kernels writing its buffer.
 *
 * Single-threaded: call it from one thread. Deliberately missing: sticky
 * errors, multiple devices, anything the backend does not call.
 */
#ifndef TRAIN_FAKECUDA_H
#define TRAIN_FAKECUDA_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

/* Back to a fresh device: every queue drained and dropped, every allocation
 * freed, knobs and counters cleared. */
void fake_reset(void);

/* Misuse detected since the last reset, and the last message. quiet: do
 * not print each one (tests that provoke misuse on purpose). */
void fake_set_quiet(int quiet);
int fake_violations(void);
/* ncclAllReduce calls so far (tests/fakecuda/runtime/nccl.c, MPI builds) */
unsigned long fake_nccl_allreduces(void);
/* ncclCommAbort calls so far */
unsigned long fake_nccl_aborts(void);
/* The sums that ran, and those that ran while another stream held a queued
 * kernel or library call not ordered after them (the overlap the schedule
 * shows: with fake_set_early_nccl, a bucket summed while the earlier
 * layers' backward pass is still to run) — counts and floats. */
typedef struct fake_nccl_stats {
    unsigned long sums, overtaking;
    double floats, floats_overtaking;
} fake_nccl_stats;
void fake_nccl_overlap(fake_nccl_stats *st);
const char *fake_last_violation(void);

/* Device allocations / host registrations / streams / events / handles
 * still alive (a backend's destroy must bring them all to 0). */
int fake_live_allocations(void);
int fake_live_objects(void);

/* What cudaGetDeviceCount and friends report. err != cudaSuccess makes
 * every device call fail with err (like a missing driver). */
void fake_set_devices(int count, cudaError_t err, int driver_version);
void fake_set_device_props(const char *name, int cc_major, int cc_minor, size_t mem_total);
/* What cudaSetDeviceFlags last set. */
unsigned fake_device_flags(void);

/* The next call of `api` (e.g. "cudaMalloc", "cudnnConvolutionForward")
 * returns `status` without doing anything. */
void fake_fail_next(const char *api, int status);
/* The next call of `api` computes, then adds 1.0 to its first output element. */
void fake_corrupt_next(const char *api);
/* The next operation of `api` (a cuDNN/cuBLAS call, a copy, or a kernel by
 * name) is enqueued fine but faults when it runs, like a kernel touching an
 * illegal address: from then on every synchronising call, and every call
 * after that (the error is sticky), returns cudaErrorIllegalAddress. */
void fake_fault_next(const char *api);

/* on: copies, memsets and event records run as soon as they reach the front
 * of their stream (and waits whose event has completed), while kernels,
 * cuDNN and cuBLAS stay lazy — a fast copy engine beside slow compute, so a
 * copy that is not ordered after the compute still reading its buffer
 * overwrites it. off (the default): everything lazy, so a host buffer
 * reused before its copy was waited for is caught. The environment
 * variable FAKECUDA_COPIES=eager turns it on at start-up (and after every
 * fake_reset), for the train binary on the fake. */
void fake_set_eager_copies(int on);

/* on: a stream that has carried an ncclAllReduce runs every operation as
 * early as it is allowed — as soon as it is enqueued, or the moment the
 * event record it waits for (cudaStreamWaitEvent) completes — while the
 * other streams stay lazy: the schedule in which a collective that is
 * not ordered after the kernels writing its buffer reads it before they
 * ran, and the communication overlaps the compute where events allow.
 * Off (the default), that stream is lazy too, so work the compute stream
 * does not wait for runs after the work it should precede. The
 * environment variable FAKECUDA_NCCL=early turns it on at start-up (and
 * after every fake_reset), for the train binary on the fake. */
void fake_set_early_nccl(int on);

/* The PCI domain of this process's fake GPU (cudaDeviceGetPCIBusId):
 * FAKECUDA_DEVICE_ID, else the launcher's local rank, else 0. Processes
 * with the same identity on one host share a GPU: fake NCCL refuses them
 * as NCCL does ("Duplicate GPU detected"). */
int fake_device_identity(void);

/* Operations enqueued on s and not yet run. */
int fake_pending(cudaStream_t s);
/* Number of calls of `api` since the reset. */
int fake_calls(const char *api);
/* The algorithm the last convolution of each direction ran with
 * (0 forward, 1 backward data, 2 backward filter); -1 if none. */
int fake_last_algo(int dir);
/* ... and the math type its descriptor carried (a cudnnMathType_t). */
int fake_last_math(int dir);
/* on: every candidate reports CUDNN_DEFAULT_MATH, as a library might that
 * does not distinguish FMA kernels in its perf results. */
void fake_cudnn_default_math_only(int on);
/* on: every candidate reports non-deterministic tensor-op (TF32) math, so
 * the plan's last resort is all there is */
void fake_cudnn_tensor_op_nondeterministic_only(int on);
/* on: every candidate of every direction reports CUDNN_STATUS_NOT_SUPPORTED
 * (a library built without kernels for this shape or card) */
void fake_cudnn_no_usable_algorithm(int on);
/* Workspace the fake's algorithm tables demand for the last plan's
 * directions, for checks of the sizing logic. */
size_t fake_workspace_need(int dir, int algo, const int *xdims, const int *wdims, const int *ydims);

/* The virtual clock (clock.c has the cost model): simulated host time,
 * busy time of the compute engine and of each copy engine, host
 * synchronisations (stream/event/device synchronize, blocking cudaMemcpy,
 * copies to or from pageable memory) and enqueues since the reset. */
typedef struct fake_clock_stats {
    double host_ms, compute_ms, h2d_ms, d2h_ms;
    double link_ms; /* NCCL sums, on a link engine of their own */
    int host_syncs, launches;
    int spin_waits;    /* event waits that had to wait, on events without cudaEventBlockingSync */
    int stall_syncs;   /* host waits that waited and left the compute engine with nothing queued */
    double overlap_ms; /* the compute engine and a copy engine busy at once */
} fake_clock_stats;
void fake_clock(fake_clock_stats *st);
/* The same, inside [lo_ms, hi_ms] of the clock (the truth an epoch's
 * activity figures are checked against). */
typedef struct fake_clock_window_stats {
    double compute_ms, h2d_ms, d2h_ms, overlap_ms;
} fake_clock_window_stats;
void fake_clock_window(double lo_ms, double hi_ms, fake_clock_window_stats *w);
/* Set one cost ("launch_us", "h2d_gbps", "d2h_gbps", "kernel_us",
 * "tflops", "dev_gbps", "link_gbps"); -1 for an unknown key or a value <= 0. The
 * environment variable FAKECUDA_COST="kernel_us=30,h2d_gbps=0.5" does the
 * same at start-up. fake_reset goes back to the defaults. */
int fake_set_cost(const char *key, double value);

/* Real-time mode (tests/fakecuda/runtime/timeline.c): the virtual clock follows
 * the wall clock — the host clock catches up with CLOCK_MONOTONIC (since
 * the last reset) before every launch and host wait, and a host that got
 * ahead of it sleeps — so the fake NVML's samples, timestamped on
 * CLOCK_REALTIME, can be cut by the program's epoch boundaries. Off by
 * default; FAKECUDA_REALTIME=1 turns it on at start-up and after every
 * fake_reset. */
void fake_set_realtime(int on);
/* What libfakenvml.so reads (through dlsym: the fake binaries export
 * them): whether real-time mode is on, the wall clock now in virtual ms,
 * CLOCK_REALTIME in microseconds at virtual 0, the compute engine's busy
 * time within [v0, v1) ms, and the device bytes allocated now. Callable
 * from another thread. */
int fake_timeline_realtime(void);
double fake_timeline_now_ms(void);
long long fake_timeline_realtime_base_us(void);
double fake_timeline_busy_ms(double v0, double v1);
size_t fake_timeline_device_bytes(void);
/* The CUPTI stand-in (cupti.c): on, cuptiGetVersion and the activity API
 * answer, and records come from the clock (which then follows the
 * registered timestamp callback's clock); off (the default, unless
 * FAKECUDA_CUPTI=on), every call answers CUPTI_ERROR_NOT_INITIALIZED.
 * fake_cupti_delivered: records handed to the caller's buffers so far. */
void fake_set_cupti(int on);
unsigned long fake_cupti_delivered(void);

/* The emulated launch's pointer check (tests/fakecuda/runtime/emu.h), callable from C tests. */
int emu_check_arg(const char *kernel, int index, const void *p);

#endif
