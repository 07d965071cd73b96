/* provider.c — the GPU backend as nn/provider.h's "cuda" provider: the
 * registry of a CUDA build. app/device.c finds it by name; nothing above
 * cuda/ calls cuda/ any other way.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>

#include "cuda/gpu.h"
#include "nn/provider.h"

static int cuda_probe(int index, provider_device *d, errbuf *e)
{
    gpu_info g;
    gpu_probe(index, &g);
    if (g.status != GPU_OK)
        return errf(e, "%s", g.reason);
    d->index = g.device;
    snprintf(d->pci_bus_id, sizeof d->pci_bus_id, "%s", g.pci_bus_id);
    gpu_describe(&g, d->desc, sizeof d->desc);
    return 0;
}

static backend *cuda_create(const provider_device *d, errbuf *e)
{
    return backend_cuda_create(d->index, e);
}

/* NVML read every 50 ms; the library named by $TRAIN_NVML_LIB, else
 * the driver's libnvidia-ml.so.1 */
static gpu_monitor *cuda_monitor_create(const provider_device *d)
{
    return gpu_monitor_create(d->pci_bus_id, NULL, 50);
}

static const backend_provider cuda_provider = {
    .name = "cuda",
    .probe = cuda_probe,
    .create = cuda_create,
    .libraries = gpu_libraries_line,
    .monitor_create = cuda_monitor_create,
    .monitor_start = gpu_monitor_start,
    .monitor_stop = gpu_monitor_stop_window,
    .monitor_free = gpu_monitor_free,
};

const backend_provider *const *backend_providers(void)
{
    static const backend_provider *const list[] = {&cuda_provider, NULL};
    return list;
}
