/* provider.h — where a backend with a device of its own comes from.
 *
 * A provider finds its device, describes it, creates the backend on it and
 * samples the device's utilisation. app/device.c looks providers up by
 * name (backend_provider_find) and decides between the CPU and what it
 * finds without knowing what CUDA is: the CUDA build links cuda/'s
 * provider (cuda/provider.c), a CPU-only build the empty registry of
 * nn/provider_none.c (the Makefile links exactly one of the two). The CPU
 * backend needs no provider: it always exists (cpu/cpu.h).
 *
 * Sized for the two backends there are, not for fifteen.
 */
#ifndef TRAIN_PROVIDER_H
#define TRAIN_PROVIDER_H

#include <stdint.h>
#include <string.h>

#include "common/util.h"
#include "nn/backend.h"

/* A device's utilisation over one epoch (NVML on a GPU), read by a
 * thread between monitor_start and monitor_stop and cut to the epoch's
 * window [t0, t1] (now_sec()'s clock). */
typedef struct device_util {
    int available; /* utilisation: 0 = n/a, see why */
    char why[160];
    int samples;      /* utilisation samples behind util_avg/max (0 when n/a) */
    int windowed;     /* 1: NVML's timestamped samples whose period lies in the
                        * window; 0: the current rate polled (older GPUs) */
    double util_avg;  /* % of time a kernel was running, mean of the samples */
    double util_max;  /* max of the samples */
    int sm_available; /* GPM (Hopper and newer): 0 = n/a, see sm_why */
    char sm_why[160];
    double sm_util;    /* % of the SMs busy over the epoch (NVML_GPM_METRIC_SM_UTIL) */
    double sm_occ;     /* % of the warps resident vs the maximum (..._SM_OCCUPANCY) */
    uint64_t proc_mem; /* this process's device memory (NVML's process list), max
                        * over the epoch; 0 = n/a, see proc_why */
    char proc_why[160];
    uint64_t mem_used; /* device memory in use (all processes), max over the epoch */
    uint64_t mem_total;
} device_util;

typedef struct gpu_monitor gpu_monitor; /* a provider's sampler, opaque */

/* A usable device, as probe found it. */
typedef struct provider_device {
    int index;
    char pci_bus_id[32]; /* for matching the device in NVML */
    char desc[400];      /* "NVIDIA A100-SXM4-40GB (cc 8.0, 39.4 GB, driver CUDA 13.0)" */
} provider_device;

typedef struct backend_provider {
    const char *name; /* "cuda": what --device calls it */
    /* Device `index`: 0 with *d filled when it can run this build, else -1
     * with the reason in e ("no NVIDIA driver (libcuda.so.1 not found)"). */
    int (*probe)(int index, provider_device *d, errbuf *e);
    /* The backend on a probed device; NULL with e filled when it cannot start. */
    backend *(*create)(const provider_device *d, errbuf *e);
    /* The device libraries loaded, "cuDNN 9.19.0, cuBLAS 13.1.0", into buf;
     * warn gets why any is older than the headers built with, or "".
     * NULL: nothing to say. */
    const char *(*libraries)(char *buf, size_t len, char *warn, size_t wlen);
    /* The utilisation sampler (never NULL; stop says n/a and why when the
     * figures are not available) and its epoch brackets. */
    gpu_monitor *(*monitor_create)(const provider_device *d);
    void (*monitor_start)(gpu_monitor *m);
    /* the epoch ran over [t0, t1] of now_sec()'s clock (t0 = t1 = 0: from
     * monitor_start to this call) */
    void (*monitor_stop)(gpu_monitor *m, double t0, double t1, device_util *out);
    void (*monitor_free)(gpu_monitor *m);
} backend_provider;

/* The providers this build links, NULL-terminated (empty in a CPU-only
 * build). */
const backend_provider *const *backend_providers(void);

/* The provider called `name`, or NULL when this build has none. */
static inline const backend_provider *backend_provider_find(const char *name)
{
    for (const backend_provider *const *p = backend_providers(); *p; p++)
        if (!strcmp((*p)->name, name))
            return *p;
    return NULL;
}

#endif
