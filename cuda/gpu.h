/* gpu.h — cuda/'s functions behind its provider (cuda/provider.c, the
 * "cuda" entry of nn/provider.h's registry): probing for a device,
 * creating the GPU backend and the utilisation monitor. The rest of train
 * reaches them through the registry only; the GPU tests call them
 * directly. Plain C types only.
 */
#ifndef TRAIN_GPU_H
#define TRAIN_GPU_H

#include <stdint.h>
#include <stdio.h>

#include "common/util.h"
#include "nn/backend.h"
#include "nn/provider.h"

/* ---- probing. Initialises the driver but creates no context. Processes
 * forked afterwards must not call CUDA themselves (the loader's workers do
 * not), the same rule as PyTorch's forked DataLoader workers. */
typedef enum gpu_status {
    GPU_OK = 0,
    GPU_NO_DRIVER,  /* libcuda.so.1 missing: no NVIDIA driver installed */
    GPU_OLD_DRIVER, /* driver older than the CUDA runtime this was built with */
    GPU_NO_DEVICE,  /* driver present, no device (or CUDA_VISIBLE_DEVICES hides them) */
    GPU_UNUSABLE,   /* a device exists but cannot run this build (see reason) */
} gpu_status;

typedef struct gpu_info {
    gpu_status status;
    int device;          /* the index probed */
    int count;           /* devices visible */
    int driver_version;  /* CUDA version the driver supports, 13000 = 13.0; 0 = none */
    int runtime_version; /* CUDA runtime linked in */
    char name[256];
    int cc_major, cc_minor;
    uint64_t mem_total;
    char pci_bus_id[32]; /* for matching NVML's device */
    char reason[320];    /* one line: why status != GPU_OK */
} gpu_info;

/* Probe device `device` (0 for the first). Always fills *out. */
void gpu_probe(int device, gpu_info *out);

/* One-line description of a usable device: "NVIDIA A100 (cc 8.0, 40.0 GB,
 * driver CUDA 13.0)". */
const char *gpu_describe(const gpu_info *g, char *buf, size_t len);

/* ---- the backend (nn/backend.h) on device `device`; NULL with e filled
 * when a handle or stream cannot be created. Fill-in of every op and of the
 * optional staging/timing block. */
backend *backend_cuda_create(int device, errbuf *e);

/* ---- the libraries loaded (cuda/versions.c): name, the loaded version
 * (major -1: not loaded) and the major.minor of the headers built with */
typedef struct gpu_lib_version {
    const char *name;
    int major, minor, patch;
    int hdr_major, hdr_minor;
} gpu_lib_version;
/* cuDNN's and cuBLAS's (cuBLAS opened if it was not), into v; their count */
int gpu_library_versions(gpu_lib_version *v, int max);
/* "cuDNN 9.19.0, cuBLAS 13.1.0"; warn (may be NULL) gets a sentence per
 * library whose loaded major.minor is older than its headers', or "" */
void gpu_versions_format(const gpu_lib_version *v, int n, char *buf, size_t len, char *warn,
                         size_t wlen);
int gpu_version_older(int major, int minor, int hdr_major, int hdr_minor);
/* both of the above for this process: buf */
const char *gpu_libraries_line(char *buf, size_t len, char *warn, size_t wlen);
/* Its compute stream (a cudaStream_t), for work another library enqueues
 * in the backend's order: comm/'s ncclAllReduce of the gradients. */
void *backend_cuda_stream(backend *be);

/* ---- utilisation monitor: NVML, loaded with dlopen at run time, sampled
 * every period_ms by a thread between start and stop (the figures are
 * device_util, nn/provider.h). Missing NVML, a device NVML does not know,
 * or NVML_ERROR_NOT_SUPPORTED all give available = 0 with the reason,
 * never an error. The rest of train reaches it through device_monitor_*
 * (app/device.h) and the provider. */
/* pci_bus_id from gpu_info; libname NULL = $TRAIN_NVML_LIB if set, else
 * "libnvidia-ml.so.1". Never NULL. */
gpu_monitor *gpu_monitor_create(const char *pci_bus_id, const char *libname, int period_ms);
void gpu_monitor_start(gpu_monitor *m);                  /* begin an epoch */
void gpu_monitor_stop(gpu_monitor *m, device_util *out); /* end it; the epoch's figures */
/* ... for the epoch [t0, t1] of now_sec()'s clock (0, 0: start to now) */
void gpu_monitor_stop_window(gpu_monitor *m, double t0, double t1, device_util *out);
void gpu_monitor_free(gpu_monitor *m);

#endif
