/* nvml.c — GPU utilisation and memory, sampled while epochs run.
 *
 * NVML is opened with dlopen("libnvidia-ml.so.1", or $TRAIN_NVML_LIB) at
 * run time: no header, no link dependency, so the binary starts on machines
 * without a driver.
 * The few functions used are declared here with NVML's C ABI (plain enums
 * returned as int, two small structs). A thread samples every period_ms
 * between gpu_monitor_start and gpu_monitor_stop (one epoch): the device's
 * utilisation ("percent of the last sample period in which a kernel ran",
 * averaged by the driver over 1/6 s to 1 s) and the memory in use on the
 * device. Anything missing — the library, the device, a NOT_SUPPORTED
 * answer — makes the figures n/a with the reason; never an error or exit.
 * Deliberately left out: per-process accounting, clocks, power, PCIe
 * throughput.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/gpu.h"

/* NVML's ABI, as documented in nvml.h */
typedef int nvml_ret;
enum { NVML_OK = 0, NVML_NOT_SUPPORTED = 3 };
typedef struct nvml_device_st *nvml_device;
typedef struct {
    unsigned int gpu, memory;
} nvml_utilization;
typedef struct {
    unsigned long long total, free, used;
} nvml_memory;

struct gpu_monitor {
    void *lib;
    nvml_ret (*init)(void);
    nvml_ret (*shutdown)(void);
    const char *(*error_string)(nvml_ret);
    nvml_ret (*by_pci)(const char *, nvml_device *);
    nvml_ret (*utilization)(nvml_device, nvml_utilization *);
    nvml_ret (*memory)(nvml_device, nvml_memory *);
    nvml_device dev;
    int ready; /* library and device usable */
    char why[160];
    int period_ms;

    pthread_t thread;
    int running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    /* the epoch's figures, guarded by mu */
    int samples;
    double sum, max;
    unsigned long long mem_used, mem_total;
    char epoch_why[160];
};

static const char *err_text(gpu_monitor *m, nvml_ret r)
{
    const char *s = m->error_string ? m->error_string(r) : NULL;
    return s ? s : "unknown NVML error";
}

gpu_monitor *gpu_monitor_create(const char *pci_bus_id, const char *libname, int period_ms)
{
    gpu_monitor *m = xcalloc(1, sizeof *m);
    m->period_ms = period_ms > 0 ? period_ms : 50;
    pthread_mutex_init(&m->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cv, &ca);
    pthread_condattr_destroy(&ca);

    /* TRAIN_NVML_LIB: another path to the library (a driver installed
     * outside the loader's path; the tests' scripted stand-in) */
    const char *env = getenv("TRAIN_NVML_LIB");
    const char *name = libname ? libname : env && *env ? env : "libnvidia-ml.so.1";
    m->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!m->lib) {
        snprintf(m->why, sizeof m->why, "NVML not available (%s)", name);
        return m;
    }
    *(void **)&m->init = dlsym(m->lib, "nvmlInit_v2");
    *(void **)&m->shutdown = dlsym(m->lib, "nvmlShutdown");
    *(void **)&m->error_string = dlsym(m->lib, "nvmlErrorString");
    *(void **)&m->by_pci = dlsym(m->lib, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&m->utilization = dlsym(m->lib, "nvmlDeviceGetUtilizationRates");
    *(void **)&m->memory = dlsym(m->lib, "nvmlDeviceGetMemoryInfo");
    if (!m->init || !m->shutdown || !m->by_pci || !m->utilization || !m->memory) {
        snprintf(m->why, sizeof m->why, "%s lacks the NVML functions used", name);
        dlclose(m->lib);
        m->lib = NULL;
        return m;
    }
    nvml_ret r = m->init();
    if (r != NVML_OK) {
        snprintf(m->why, sizeof m->why, "NVML init failed: %s", err_text(m, r));
        dlclose(m->lib);
        m->lib = NULL;
        return m;
    }
    if (!pci_bus_id || !*pci_bus_id) {
        snprintf(m->why, sizeof m->why, "the device's PCI bus id is unknown");
        return m;
    }
    r = m->by_pci(pci_bus_id, &m->dev);
    if (r != NVML_OK) {
        snprintf(m->why, sizeof m->why, "NVML does not know device %s: %s", pci_bus_id,
                 err_text(m, r));
        return m;
    }
    m->ready = 1;
    return m;
}

/* One sample into the epoch's figures; mu held. */
static void sample(gpu_monitor *m)
{
    nvml_utilization u;
    nvml_ret r = m->utilization(m->dev, &u);
    if (r == NVML_OK) {
        m->samples++;
        m->sum += u.gpu;
        if (u.gpu > m->max)
            m->max = u.gpu;
    } else if (!m->epoch_why[0]) {
        snprintf(m->epoch_why, sizeof m->epoch_why, "%s",
                 r == NVML_NOT_SUPPORTED ? "utilisation not supported on this device"
                                         : err_text(m, r));
    }
    nvml_memory mem;
    if (m->memory(m->dev, &mem) == NVML_OK) {
        if (mem.used > m->mem_used)
            m->mem_used = mem.used;
        m->mem_total = mem.total;
    }
}

static void *sampler(void *arg)
{
    gpu_monitor *m = arg;
    pthread_mutex_lock(&m->mu);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    while (!m->stop) { /* start took the first sample */
        next.tv_nsec += (long)m->period_ms * 1000000L;
        while (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        while (!m->stop && pthread_cond_timedwait(&m->cv, &m->mu, &next) == 0)
            ; /* woken early (spuriously or by stop): re-check */
        if (!m->stop)
            sample(m);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

void gpu_monitor_start(gpu_monitor *m)
{
    if (!m->ready || m->running)
        return;
    pthread_mutex_lock(&m->mu);
    m->samples = 0;
    m->sum = m->max = 0.0;
    m->mem_used = 0;
    m->epoch_why[0] = '\0';
    m->stop = 0;
    sample(m); /* one at once: even a short epoch has a figure */
    pthread_mutex_unlock(&m->mu);
    if (pthread_create(&m->thread, NULL, sampler, m) != 0) {
        snprintf(m->epoch_why, sizeof m->epoch_why, "cannot start the sampling thread");
        return;
    }
    m->running = 1;
}

void gpu_monitor_stop(gpu_monitor *m, device_util *out)
{
    memset(out, 0, sizeof *out);
    if (m->running) {
        pthread_mutex_lock(&m->mu);
        m->stop = 1;
        pthread_cond_signal(&m->cv);
        pthread_mutex_unlock(&m->mu);
        pthread_join(m->thread, NULL);
        m->running = 0;
    }
    if (!m->ready) {
        snprintf(out->why, sizeof out->why, "%s", m->why);
        return;
    }
    out->samples = m->samples;
    out->mem_used = m->mem_used;
    out->mem_total = m->mem_total;
    if (m->samples == 0) {
        snprintf(out->why, sizeof out->why, "%s",
                 m->epoch_why[0] ? m->epoch_why : "no sample taken (monitor not started)");
        return;
    }
    out->available = 1;
    out->util_avg = m->sum / m->samples;
    out->util_max = m->max;
}

void gpu_monitor_free(gpu_monitor *m)
{
    if (!m)
        return;
    if (m->running) {
        device_util u;
        gpu_monitor_stop(m, &u);
    }
    if (m->lib) {
        m->shutdown();
        dlclose(m->lib);
    }
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
}
