/* fake_nvml.c — a scripted stand-in for libnvidia-ml.so.1, built as
 * build/fakecuda/libfakenvml.so for the utilisation monitor's tests
 * (cuda/nvml.c loads it by path instead of the real library).
 *
 * FAKE_NVML selects the behaviour: unset or "ok" — utilisation samples
 * 10, 20, 30, 40, 50, 10, ... (one per call), 1 GiB + n MiB of 8 GiB used;
 * "not_supported" — utilisation answers NVML_ERROR_NOT_SUPPORTED;
 * "init_fails" — nvmlInit_v2 fails (driver not loaded); "no_device" — the
 * PCI bus id is unknown. Only the functions cuda/nvml.c uses exist.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

typedef struct {
    unsigned int gpu, memory;
} utilization;
typedef struct {
    unsigned long long total, free, used;
} memory;

static unsigned calls;

static int mode_is(const char *m)
{
    const char *v = getenv("FAKE_NVML");
    return v && !strcmp(v, m);
}

int nvmlInit_v2(void)
{
    calls = 0;
    return mode_is("init_fails") ? 9 : 0;
}

int nvmlShutdown(void) { return 0; }

const char *nvmlErrorString(int r)
{
    switch (r) {
    case 3: return "Not Supported (fake)";
    case 6: return "Not Found (fake)";
    case 9: return "Driver Not Loaded (fake)";
    default: return "Unknown Error (fake)";
    }
}

int nvmlDeviceGetHandleByPciBusId_v2(const char *id, void **dev)
{
    if (mode_is("no_device") || !id || !*id)
        return 6;
    *dev = (void *)&calls;
    return 0;
}

int nvmlDeviceGetUtilizationRates(void *dev, utilization *u)
{
    (void)dev;
    if (mode_is("not_supported"))
        return 3;
    u->gpu = 10 + 10 * (calls % 5);
    u->memory = 5;
    calls++;
    return 0;
}

int nvmlDeviceGetMemoryInfo(void *dev, memory *m)
{
    (void)dev;
    m->total = 8ull << 30;
    m->used = (1ull << 30) + ((unsigned long long)calls << 20);
    m->free = m->total - m->used;
    return 0;
}
