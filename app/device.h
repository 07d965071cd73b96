/* device.h — which backend runs: `--device auto|cpu|cuda`, and the guard
 * on page-locked memory.
 *
 * The same code in every build: the GPU, when this build has one, comes
 * from nn/provider.h's registry, and nowhere else decides between
 * backends. Selection only says which device and why; the caller creates
 * the backend (backend_cpu_create for DEVICE_CPU, device_create_cuda for
 * DEVICE_CUDA).
 */
#ifndef TRAIN_DEVICE_H
#define TRAIN_DEVICE_H

#include <stdint.h>
#include <stdio.h>

#include "common/util.h"
#include "nn/backend.h"
#include "nn/provider.h"

typedef enum device_kind {
    DEVICE_AUTO = 0, /* a request only: CUDA when built with it and usable, else CPU */
    DEVICE_CPU,
    DEVICE_CUDA,
} device_kind;

typedef struct device_choice {
    device_kind kind;    /* DEVICE_CPU or DEVICE_CUDA */
    int gpu;             /* CUDA device index */
    provider_device dev; /* DEVICE_CUDA: the device as its provider probed it */
    /* the line to print first: "device: cuda:0 NVIDIA A100 (...)" or
     * "device: cpu (no usable GPU: no NVIDIA driver ...)" */
    char line[512];
} device_choice;

/* "auto", "cpu", "cuda" -> *out; -1 with e for anything else. */
int device_parse(const char *s, device_kind *out, errbuf *e);

/* 1 when this binary was built with the GPU backend. */
int device_built_with_cuda(void);

/* Decide. `want` DEVICE_AUTO falls back to the CPU with the reason in
 * c->line; DEVICE_CUDA without a usable device (or in a CPU-only build)
 * returns -1 with the reason in e (the program exits with status 2). */
int device_select(device_kind want, device_choice *c, errbuf *e);
/* The same for data-parallel rank `local_rank` of its node: GPU
 * local_rank modulo the devices visible (CUDA_VISIBLE_DEVICES set per rank
 * overrides: it leaves one, which every rank then takes). */
int device_select_gpu(device_kind want, int local_rank, device_choice *c, errbuf *e);

/* The GPU backend for a DEVICE_CUDA choice; NULL with e filled when it
 * cannot start (or in a CPU-only build). */
backend *device_create_cuda(const device_choice *c, errbuf *e);

/* The GPU libraries loaded ("cuDNN 9.19.0, cuBLAS 13.1.0") into buf, warn
 * naming any older than the headers ("" if none); NULL in a CPU-only
 * build. */
const char *device_gpu_libraries(char *buf, size_t len, char *warn, size_t wlen);

/* Page-locked memory guard: pinning `bytes` when `mem_available` bytes are
 * available (mem_available_bytes(); 0 = unknown). Returns 0 when fine, 1
 * when allowed with a warning in e (unknown MemAvailable, or above the limit
 * with force), -1 when refused: above DEVICE_PIN_MAX_FRACTION of
 * MemAvailable without force, message in e. */
#define DEVICE_PIN_MAX_FRACTION 0.5
int device_pin_check(uint64_t bytes, uint64_t mem_available, int force, errbuf *e);
/* The same against `budget` bytes named `what` in the messages. */
int device_pin_check_of(uint64_t bytes, uint64_t budget, const char *what, int force, errbuf *e);

/* What page-locking is measured against: the smaller of MemAvailable (the
 * host's figure, also inside a container) and the room left in this
 * process's memory cgroup (v2 memory.max - memory.current, v1
 * memory.limit_in_bytes - usage_in_bytes), which is what a container may
 * still use before its OOM killer runs; `what` names the one that won.
 * RLIMIT_MEMLOCK (ulimit -l) is not part of it: cudaHostRegister and
 * cudaMallocHost ignore it, as root and not (H100, CUDA 13.0, driver 580:
 * a uid-65534 process with a 64 KB limit registered 256 MB, and VmLck
 * stayed 0; tools/pin_probe.cu). 0 when nothing is known. The cgroup
 * folder is read below $TRAIN_CGROUP_ROOT when set (tests), else
 * /sys/fs/cgroup. */
#define DEVICE_CGROUP_ROOT_ENV "TRAIN_CGROUP_ROOT"
uint64_t device_pin_budget(char *what, size_t len);

/* ---- GPU utilisation per epoch (device_util, nn/provider.h), from NVML
 * (cuda/nvml.c): its timestamped samples cut to the epoch, SM activity
 * (GPM) and this process's memory, read by a thread while an epoch runs. */
/* NULL for a CPU choice or in a CPU-only build; every call below accepts
 * NULL (stop then reports n/a). Create after the workers were forked. */
gpu_monitor *device_monitor_create(const device_choice *c);
void device_monitor_start(gpu_monitor *m);
/* the epoch ran over [t0, t1] of now_sec()'s clock; 0, 0: from start to now */
void device_monitor_stop(gpu_monitor *m, double t0, double t1, device_util *out);
void device_monitor_free(gpu_monitor *m);
/* "gpu 37% avg, 88% max, mem 1.2 GB / 40.0 GB" or "gpu n/a (why)" */
const char *device_util_format(const device_util *u, char *buf, size_t len);

#endif
