/* probe.c — is there a GPU this build can use, and if not, why not.
 *
 * Uses only calls that do not create a context (cudaGetDeviceCount,
 * cudaDriverGetVersion, cudaGetDeviceProperties), so it is safe before the
 * loader forks its workers. Maps the runtime's answers to the user's
 * vocabulary: no driver, driver too old, no device, or a device this build
 * cannot run (compute capability below the oldest -gencode target).
 * Leaves out choosing among several GPUs: the caller names the index.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "cuda/check.h"
#include "cuda/gpu.h"

/* the oldest real architecture in the Makefile's GENCODE (sm_80) */
#define OLDEST_CC_MAJOR 8

static void ver(char *buf, size_t len, int v)
{
    snprintf(buf, len, "%d.%d", v / 1000, (v % 1000) / 10);
}

void gpu_probe(int device, gpu_info *g)
{
    memset(g, 0, sizeof *g);
    g->device = device;
    g->status = GPU_UNUSABLE;
    cudaRuntimeGetVersion(&g->runtime_version);
    if (cudaDriverGetVersion(&g->driver_version) != cudaSuccess)
        g->driver_version = 0;
    char rt[16], drv[16];
    ver(rt, sizeof rt, g->runtime_version);
    ver(drv, sizeof drv, g->driver_version);

    cudaError_t st = cudaGetDeviceCount(&g->count);
    (void)cudaGetLastError();
    if (st != cudaSuccess)
        g->count = 0;
    switch (st) {
    case cudaSuccess: break;
    case cudaErrorInsufficientDriver:
        if (g->driver_version == 0) {
            g->status = GPU_NO_DRIVER;
            snprintf(g->reason, sizeof g->reason,
                     "no NVIDIA driver (libcuda.so.1 not found); this build needs a driver for "
                     "CUDA %s (R580 or newer)",
                     rt);
        } else {
            g->status = GPU_OLD_DRIVER;
            snprintf(g->reason, sizeof g->reason,
                     "the NVIDIA driver supports CUDA %s but this build needs CUDA %s; update the "
                     "driver (R580 or newer)",
                     drv, rt);
        }
        return;
    case cudaErrorNoDevice:
        g->status = GPU_NO_DEVICE;
        snprintf(g->reason, sizeof g->reason, "the NVIDIA driver (CUDA %s) sees no CUDA device%s",
                 drv, "; check nvidia-smi and CUDA_VISIBLE_DEVICES");
        return;
    case cudaErrorStubLibrary:
        snprintf(g->reason, sizeof g->reason,
                 "libcuda.so is the toolkit's stub, not a driver (%s); install the NVIDIA driver "
                 "and do not put lib64/stubs on LD_LIBRARY_PATH",
                 cudaGetErrorName(st));
        return;
    default:
        snprintf(g->reason, sizeof g->reason, "the CUDA runtime cannot use the driver: %s (%s)",
                 cudaGetErrorString(st), cudaGetErrorName(st));
        return;
    }
    if (g->count < 1) {
        g->status = GPU_NO_DEVICE;
        snprintf(g->reason, sizeof g->reason, "the NVIDIA driver (CUDA %s) reports no device", drv);
        return;
    }
    if (device < 0 || device >= g->count) {
        snprintf(g->reason, sizeof g->reason, "device %d does not exist (%d visible)", device,
                 g->count);
        return;
    }
    struct cudaDeviceProp p;
    st = cudaGetDeviceProperties(&p, device);
    if (st != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(g->reason, sizeof g->reason, "device %d: cannot read its properties: %s (%s)",
                 device, cudaGetErrorString(st), cudaGetErrorName(st));
        return;
    }
    snprintf(g->name, sizeof g->name, "%s", p.name);
    g->cc_major = p.major;
    g->cc_minor = p.minor;
    g->mem_total = p.totalGlobalMem;
    if (cudaDeviceGetPCIBusId(g->pci_bus_id, sizeof g->pci_bus_id, device) != cudaSuccess) {
        (void)cudaGetLastError();
        g->pci_bus_id[0] = '\0';
    }
    if (p.major < OLDEST_CC_MAJOR) {
        snprintf(g->reason, sizeof g->reason,
                 "%.100s has compute capability %d.%d; this build's kernels start at 8.0 (add its "
                 "-gencode to the Makefile's GENCODE and rebuild)",
                 g->name, p.major, p.minor);
        return;
    }
    g->status = GPU_OK;
}

const char *gpu_describe(const gpu_info *g, char *buf, size_t len)
{
    char mem[32], drv[16];
    fmt_bytes(mem, sizeof mem, g->mem_total);
    ver(drv, sizeof drv, g->driver_version);
    snprintf(buf, len, "%.100s (cc %d.%d, %s, driver CUDA %s)", g->name, g->cc_major, g->cc_minor,
             mem, drv);
    return buf;
}
