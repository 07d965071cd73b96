/* nvml.c — GPU utilisation, SM activity and memory over one epoch, from NVML.
 *
 * NVML is opened with dlopen("libnvidia-ml.so.1", or $TRAIN_NVML_LIB) at
 * run time: no header, no link dependency, so the binary starts on machines
 * without a driver. The functions used are declared here with NVML's C ABI
 * (nvml.h of CUDA 13: plain enums returned as int, a few small structs).
 *
 * Utilisation ("percent of a sample period in which a kernel ran") comes
 * from the driver's timestamped samples (nvmlDeviceGetSamples,
 * NVML_GPU_UTILIZATION_SAMPLES: one every ~200 ms on an H100, each stamped
 * with the end of its period in CPU microseconds — CLOCK_REALTIME, as
 * gettimeofday). A thread reads the new ones every period_ms between
 * gpu_monitor_start and gpu_monitor_stop; a sample's period runs from the
 * sample before it to its own stamp. At stop the stamps are moved onto
 * now_sec()'s clock (CLOCK_MONOTONIC) by the offset between the two clocks
 * read there, and only the samples whose whole period lies within the
 * epoch [t0, t1] count: their mean, maximum and number. An epoch no whole
 * period fits in (shorter than ~2 periods) is n/a, never a figure from the
 * epoch before. A sample with no sample before it (the first the driver
 * had) has no known period and is not counted. Where the samples are not
 * supported (older GPUs, vGPUs), nvmlDeviceGetUtilizationRates is polled
 * instead (windowed = 0): the driver's current figure, which lags by up
 * to its period and smears across epochs.
 *
 * SM activity on GPUs with GPM (nvmlGpmQueryDeviceSupport; Hopper and
 * newer): a GPM sample at start and at stop, NVML_GPM_METRIC_SM_UTIL (the
 * share of the SMs busy) and NVML_GPM_METRIC_SM_OCCUPANCY (warps resident
 * vs the maximum) between them. One small kernel running all the time
 * reads 100% utilisation and a few % SM activity. NVML asks for more than
 * 100 ms between the two samples: shorter epochs are n/a.
 *
 * This process's device memory: nvmlDeviceGetComputeRunningProcesses_v3,
 * the entry for getpid() (usedGpuMemory: its allocations and its CUDA
 * context), the maximum over the epoch's reads. In a container whose pid
 * namespace differs from the driver's, the pid is not in the list: n/a.
 * The device's memory in use (every process) is kept beside it.
 *
 * Anything missing — the library, the device, a NOT_SUPPORTED answer —
 * makes the figure n/a with the reason; never an error or exit.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda/gpu.h"

/* NVML's ABI, as documented in nvml.h */
typedef int nvml_ret;
enum {
    NVML_OK = 0,
    NVML_NOT_SUPPORTED = 3,
    NVML_NOT_FOUND = 6,
    NVML_INSUFFICIENT_SIZE = 7,
    NVML_GPU_UTILIZATION_SAMPLES = 1,
    NVML_GPM_METRIC_SM_UTIL = 2,
    NVML_GPM_METRIC_SM_OCCUPANCY = 3,
    NVML_GPM_METRIC_MAX = 333, /* nvml.h of CUDA 13; older headers had fewer */
    NVML_GPM_VERSION = 1,      /* NVML_GPM_METRICS_GET_VERSION, NVML_GPM_SUPPORT_VERSION */
};
typedef struct nvml_device_st *nvml_device;
typedef struct nvml_gpm_sample_st *nvml_gpm_sample;
typedef struct {
    unsigned int gpu, memory;
} nvml_utilization;
typedef struct {
    unsigned long long total, free, used;
} nvml_memory;
typedef union {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    unsigned short usVal;
} nvml_value;
typedef struct {
    unsigned long long timeStamp; /* CPU time, microseconds */
    nvml_value sampleValue;
} nvml_sample;
typedef struct { /* nvmlProcessInfo_t (v2 layout, what _v3 fills) */
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvml_process;
typedef struct {
    unsigned int version, isSupportedDevice;
} nvml_gpm_support;
typedef struct {
    unsigned int metricId;
    nvml_ret nvmlReturn;
    double value;
    struct {
        char *shortName, *longName, *unit;
    } metricInfo;
} nvml_gpm_metric;
typedef struct {
    unsigned int version, numMetrics;
    nvml_gpm_sample sample1, sample2;
    nvml_gpm_metric metrics[NVML_GPM_METRIC_MAX];
} nvml_gpm_metrics_get;

typedef struct {
    unsigned long long ts;
    double v;
} util_sample;

struct gpu_monitor {
    void *lib;
    nvml_ret (*init)(void);
    nvml_ret (*shutdown)(void);
    const char *(*error_string)(nvml_ret);
    nvml_ret (*by_pci)(const char *, nvml_device *);
    nvml_ret (*utilization)(nvml_device, nvml_utilization *);
    nvml_ret (*memory)(nvml_device, nvml_memory *);
    /* optional: a driver without them gives n/a or the fallback */
    nvml_ret (*get_samples)(nvml_device, int, unsigned long long, int *, unsigned int *,
                            nvml_sample *);
    nvml_ret (*processes)(nvml_device, unsigned int *, nvml_process *);
    nvml_ret (*gpm_support)(nvml_device, nvml_gpm_support *);
    nvml_ret (*gpm_alloc)(nvml_gpm_sample *);
    nvml_ret (*gpm_free)(nvml_gpm_sample);
    nvml_ret (*gpm_get)(nvml_device, nvml_gpm_sample);
    nvml_ret (*gpm_metrics)(nvml_gpm_metrics_get *);
    nvml_device dev;
    int ready; /* library and device usable */
    char why[160];
    int period_ms;
    int windowed;           /* timestamped samples answer */
    nvml_gpm_sample gpm[3]; /* the window's start, its end, the next window's start */
    nvml_gpm_metrics_get *gpm_req;
    char gpm_why[120];

    pthread_t thread;
    int running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    int active;     /* between start and stop */
    double started; /* now_sec() at start */
    /* the epoch's figures, guarded by mu */
    int samples; /* polled rates (fallback) */
    double sum, max;
    util_sample *ws; /* timestamped samples newer than prev_ts */
    size_t nws, capws;
    unsigned long long last_ts; /* the newest stamp seen, ever */
    unsigned long long prev_ts; /* the newest stamp before the epoch's first */
    nvml_sample *buf;
    unsigned int capbuf;
    nvml_process *procs;
    unsigned int capprocs;
    unsigned long long proc_mem;
    char proc_why[120];
    int gpm_started;
    /* the next epoch started before this one's figures were taken (the
     * loop fetches ahead): its start, kept until the stop rolls over */
    int next_pending, next_gpm_ok;
    double next_start;
    unsigned long long mem_used, mem_total;
    char epoch_why[160];
};

static const char *err_text(gpu_monitor *m, nvml_ret r)
{
    const char *s = m->error_string ? m->error_string(r) : NULL;
    return s ? s : "unknown NVML error";
}

/* The optional functions, and what this device answers to them. */
static void probe_extras(gpu_monitor *m)
{
    *(void **)&m->get_samples = dlsym(m->lib, "nvmlDeviceGetSamples");
    *(void **)&m->processes = dlsym(m->lib, "nvmlDeviceGetComputeRunningProcesses_v3");
    *(void **)&m->gpm_support = dlsym(m->lib, "nvmlGpmQueryDeviceSupport");
    *(void **)&m->gpm_alloc = dlsym(m->lib, "nvmlGpmSampleAlloc");
    *(void **)&m->gpm_free = dlsym(m->lib, "nvmlGpmSampleFree");
    *(void **)&m->gpm_get = dlsym(m->lib, "nvmlGpmSampleGet");
    *(void **)&m->gpm_metrics = dlsym(m->lib, "nvmlGpmMetricsGet");
    if (m->get_samples) {
        unsigned int n = 0;
        int type;
        nvml_ret r = m->get_samples(m->dev, NVML_GPU_UTILIZATION_SAMPLES, 0, &type, &n, NULL);
        m->windowed = r == NVML_OK || r == NVML_NOT_FOUND; /* NOT_FOUND: none yet */
    }
    if (!m->processes)
        snprintf(m->proc_why, sizeof m->proc_why, "NVML lacks the process list (_v3)");
    if (!m->gpm_support || !m->gpm_alloc || !m->gpm_free || !m->gpm_get || !m->gpm_metrics) {
        snprintf(m->gpm_why, sizeof m->gpm_why, "NVML lacks GPM (driver before R520)");
        return;
    }
    nvml_gpm_support s = {.version = NVML_GPM_VERSION};
    nvml_ret r = m->gpm_support(m->dev, &s);
    if (r != NVML_OK || !s.isSupportedDevice) {
        snprintf(m->gpm_why, sizeof m->gpm_why, "no GPM on this GPU (%s)",
                 r != NVML_OK ? err_text(m, r) : "Hopper or newer has it");
        return;
    }
    if ((r = m->gpm_alloc(&m->gpm[0])) != NVML_OK || (r = m->gpm_alloc(&m->gpm[1])) != NVML_OK ||
        (r = m->gpm_alloc(&m->gpm[2])) != NVML_OK) {
        snprintf(m->gpm_why, sizeof m->gpm_why, "GPM sample: %s", err_text(m, r));
        return;
    }
    m->gpm_req = xcalloc(1, sizeof *m->gpm_req);
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
    probe_extras(m);
    return m;
}

static double sample_value(int type, nvml_value v)
{
    switch (type) {
    case 0: return v.dVal;
    case 2: return (double)v.ulVal;
    case 3: return (double)v.ullVal;
    case 4: return (double)v.sllVal;
    case 5: return v.siVal;
    case 6: return v.usVal;
    case 1:
    default: return v.uiVal;
    }
}

/* The samples stamped after last_ts, appended to ws (keep: else only
 * last_ts moves); mu held. */
static void read_samples(gpu_monitor *m, int keep)
{
    unsigned int n = 0;
    int type = 1;
    nvml_ret r = m->get_samples(m->dev, NVML_GPU_UTILIZATION_SAMPLES, m->last_ts, &type, &n, NULL);
    if (r == NVML_OK && n > 0) {
        if (n > m->capbuf) {
            m->capbuf = n + 64;
            m->buf = xrealloc(m->buf, m->capbuf * sizeof *m->buf);
        }
        n = m->capbuf;
        r = m->get_samples(m->dev, NVML_GPU_UTILIZATION_SAMPLES, m->last_ts, &type, &n, m->buf);
    }
    if (r == NVML_NOT_FOUND || (r == NVML_OK && n == 0))
        return; /* none newer */
    if (r != NVML_OK) {
        if (!m->epoch_why[0])
            snprintf(m->epoch_why, sizeof m->epoch_why, "utilisation samples: %s", err_text(m, r));
        return;
    }
    for (unsigned int i = 0; i < n; i++) {
        if (m->buf[i].timeStamp <= m->last_ts && keep)
            continue;
        if (keep) {
            if (m->nws == m->capws) {
                m->capws = m->capws ? 2 * m->capws : 64;
                m->ws = xrealloc(m->ws, m->capws * sizeof *m->ws);
            }
            m->ws[m->nws++] =
                (util_sample){m->buf[i].timeStamp, sample_value(type, m->buf[i].sampleValue)};
        }
    }
    for (unsigned int i = 0; i < n; i++)
        if (m->buf[i].timeStamp > m->last_ts)
            m->last_ts = m->buf[i].timeStamp;
}

/* This process's device memory now, into the epoch's maximum; mu held. */
static void read_process_memory(gpu_monitor *m)
{
    if (!m->processes)
        return;
    unsigned int n = m->capprocs;
    nvml_ret r = m->processes(m->dev, &n, m->procs);
    for (int tries = 0; r == NVML_INSUFFICIENT_SIZE && tries < 3; tries++) {
        m->capprocs = n + 8; /* more may start meanwhile */
        m->procs = xrealloc(m->procs, m->capprocs * sizeof *m->procs);
        n = m->capprocs;
        r = m->processes(m->dev, &n, m->procs);
    }
    if (r != NVML_OK) {
        snprintf(m->proc_why, sizeof m->proc_why, "process list: %s", err_text(m, r));
        return;
    }
    unsigned int me = (unsigned int)getpid();
    for (unsigned int i = 0; i < n; i++)
        if (m->procs[i].pid == me) {
            if (m->procs[i].usedGpuMemory != (unsigned long long)-1 /* NVML_VALUE_NOT_AVAILABLE */
                && m->procs[i].usedGpuMemory > m->proc_mem)
                m->proc_mem = m->procs[i].usedGpuMemory;
            return;
        }
    snprintf(m->proc_why, sizeof m->proc_why,
             "pid %u is not in NVML's process list (another pid namespace?)", me);
}

/* One reading into the epoch's figures; mu held. */
static void sample(gpu_monitor *m)
{
    if (m->windowed) {
        read_samples(m, 1);
    } else {
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
    }
    read_process_memory(m);
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
    if (!m->ready)
        return;
    if (m->running) { /* the window before is still open: this one starts at its stop */
        pthread_mutex_lock(&m->mu);
        if (!m->next_pending) {
            m->next_pending = 1;
            m->next_start = now_sec();
            m->next_gpm_ok = m->gpm_req && m->gpm_get(m->dev, m->gpm[2]) == NVML_OK;
        }
        pthread_mutex_unlock(&m->mu);
        return;
    }
    pthread_mutex_lock(&m->mu);
    m->started = now_sec();
    m->samples = 0;
    m->sum = m->max = 0.0;
    m->mem_used = 0;
    m->proc_mem = 0;
    m->epoch_why[0] = '\0';
    m->stop = 0;
    m->nws = 0;
    m->active = 1;
    if (m->windowed) {
        read_samples(m, 0); /* what came before: only the newest stamp matters */
        m->prev_ts = m->last_ts;
    }
    m->gpm_started = m->gpm_req && m->gpm_get(m->dev, m->gpm[0]) == NVML_OK;
    sample(m); /* one at once: even a short epoch has a figure */
    pthread_mutex_unlock(&m->mu);
    if (pthread_create(&m->thread, NULL, sampler, m) != 0) {
        snprintf(m->epoch_why, sizeof m->epoch_why, "cannot start the sampling thread");
        return;
    }
    m->running = 1;
}

/* CLOCK_REALTIME minus CLOCK_MONOTONIC, in seconds, read now */
static double realtime_offset(void)
{
    struct timespec a, r, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    clock_gettime(CLOCK_REALTIME, &r);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double mono =
        ((double)a.tv_sec + (double)b.tv_sec) / 2 + ((double)a.tv_nsec + (double)b.tv_nsec) / 2e9;
    return (double)r.tv_sec + (double)r.tv_nsec * 1e-9 - mono;
}

static int by_stamp(const void *a, const void *b)
{
    const util_sample *x = a, *y = b;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* The samples whose period lies in [t0, t1] into out; mu held. */
static void window(gpu_monitor *m, double t0, double t1, device_util *out)
{
    qsort(m->ws, m->nws, sizeof *m->ws, by_stamp);
    double off = realtime_offset();
    double sum = 0, max = 0, gap = 0;
    int n = 0;
    unsigned long long prev = m->prev_ts;
    for (size_t i = 0; i < m->nws; i++) {
        unsigned long long p0 = prev, p1 = m->ws[i].ts;
        prev = p1;
        if (!p0) /* the first sample the driver had: its period is unknown */
            continue;
        gap = (double)(p1 - p0) * 1e-6;
        double s0 = (double)p0 * 1e-6 - off, s1 = (double)p1 * 1e-6 - off;
        if (s0 < t0 || s1 > t1)
            continue;
        n++;
        sum += m->ws[i].v;
        if (m->ws[i].v > max)
            max = m->ws[i].v;
    }
    out->windowed = 1;
    if (n == 0) {
        if (m->epoch_why[0])
            snprintf(out->why, sizeof out->why, "%s", m->epoch_why);
        else if (gap > 0)
            snprintf(out->why, sizeof out->why,
                     "no NVML utilisation sample period (%.0f ms) lies within this %.2f s epoch",
                     gap * 1e3, t1 - t0);
        else
            snprintf(out->why, sizeof out->why,
                     "no NVML utilisation sample within this %.2f s epoch", t1 - t0);
        return;
    }
    out->available = 1;
    out->samples = n;
    out->util_avg = sum / n;
    out->util_max = max;
}

/* SM activity between the GPM samples at start and now; mu held. */
static void sm_activity(gpu_monitor *m, double seconds, device_util *out)
{
    if (!m->gpm_req) {
        snprintf(out->sm_why, sizeof out->sm_why, "%s", m->gpm_why);
        return;
    }
    nvml_ret r = NVML_OK;
    if (!m->gpm_started || (r = m->gpm_get(m->dev, m->gpm[1])) != NVML_OK) {
        snprintf(out->sm_why, sizeof out->sm_why, "GPM sample: %s",
                 m->gpm_started ? err_text(m, r) : "none at the epoch's start");
        return;
    }
    if (seconds < 0.1) {
        snprintf(out->sm_why, sizeof out->sm_why,
                 "GPM needs more than 100 ms between samples (epoch %.3f s)", seconds);
        return;
    }
    nvml_gpm_metrics_get *g = m->gpm_req;
    memset(g, 0, sizeof *g);
    g->version = NVML_GPM_VERSION;
    g->numMetrics = 2;
    g->sample1 = m->gpm[0];
    g->sample2 = m->gpm[1];
    g->metrics[0].metricId = NVML_GPM_METRIC_SM_UTIL;
    g->metrics[1].metricId = NVML_GPM_METRIC_SM_OCCUPANCY;
    r = m->gpm_metrics(g);
    if (r == NVML_OK && (r = g->metrics[0].nvmlReturn) == NVML_OK &&
        (r = g->metrics[1].nvmlReturn) == NVML_OK) {
        out->sm_available = 1;
        out->sm_util = g->metrics[0].value;
        out->sm_occ = g->metrics[1].value;
    } else {
        snprintf(out->sm_why, sizeof out->sm_why, "GPM metrics: %s", err_text(m, r));
    }
}

/* The next window, started while this one was open, becomes the current
 * one: samples that ended before its start are dropped (the newest of them
 * is the period's start for the first kept), its GPM sample becomes the
 * start one, the maxima start again. The sampling thread goes on; mu held. */
static void roll_over(gpu_monitor *m)
{
    double off = realtime_offset();
    unsigned long long cut = (unsigned long long)((m->next_start + off) * 1e6);
    size_t k = 0;
    for (size_t i = 0; i < m->nws; i++) /* sorted by window() */
        if (m->ws[i].ts <= cut)
            m->prev_ts = m->ws[i].ts;
        else
            m->ws[k++] = m->ws[i];
    m->nws = k;
    nvml_gpm_sample t = m->gpm[0];
    m->gpm[0] = m->gpm[2];
    m->gpm[2] = t;
    m->gpm_started = m->next_gpm_ok;
    m->started = m->next_start;
    m->active = 1;
    m->next_pending = 0;
    m->samples = 0;
    m->sum = m->max = 0.0;
    m->mem_used = 0;
    m->proc_mem = 0;
    m->epoch_why[0] = '\0';
}

void gpu_monitor_stop_window(gpu_monitor *m, double t0, double t1, device_util *out)
{
    memset(out, 0, sizeof *out);
    double stopped = now_sec();
    pthread_mutex_lock(&m->mu);
    int carry_on = m->running && m->next_pending;
    pthread_mutex_unlock(&m->mu);
    if (m->running && !carry_on) {
        pthread_mutex_lock(&m->mu);
        m->stop = 1;
        pthread_cond_signal(&m->cv);
        pthread_mutex_unlock(&m->mu);
        pthread_join(m->thread, NULL);
        m->running = 0;
    }
    if (!m->ready) {
        snprintf(out->why, sizeof out->why, "%s", m->why);
        snprintf(out->sm_why, sizeof out->sm_why, "%s", m->why);
        snprintf(out->proc_why, sizeof out->proc_why, "%s", m->why);
        return;
    }
    if (t0 <= 0 && t1 <= 0) {
        t0 = m->started;
        t1 = stopped;
    }
    pthread_mutex_lock(&m->mu);
    int was_active = m->active;
    if (m->active && m->windowed) { /* what came in since the last read */
        read_samples(m, 1);
        read_process_memory(m);
    }
    if (m->active)
        sm_activity(m, stopped - m->started, out);
    else
        snprintf(out->sm_why, sizeof out->sm_why, "monitor not started");
    m->active = m->gpm_started = 0;
    out->mem_used = m->mem_used;
    out->mem_total = m->mem_total;
    out->proc_mem = m->proc_mem;
    snprintf(out->proc_why, sizeof out->proc_why, "%s", m->proc_mem ? "" : m->proc_why);
    if (was_active && m->windowed) {
        window(m, t0, t1, out);
    } else if (m->samples == 0) {
        snprintf(out->why, sizeof out->why, "%s",
                 m->epoch_why[0] ? m->epoch_why : "no sample taken (monitor not started)");
    } else {
        out->samples = m->samples;
        out->available = 1;
        out->util_avg = m->sum / m->samples;
        out->util_max = m->max;
    }
    if (carry_on)
        roll_over(m);
    pthread_mutex_unlock(&m->mu);
}

void gpu_monitor_stop(gpu_monitor *m, device_util *out) { gpu_monitor_stop_window(m, 0, 0, out); }

void gpu_monitor_free(gpu_monitor *m)
{
    if (!m)
        return;
    if (m->running) {
        device_util u;
        pthread_mutex_lock(&m->mu);
        m->next_pending = 0; /* no window after this one: the thread stops */
        pthread_mutex_unlock(&m->mu);
        gpu_monitor_stop(m, &u);
    }
    if (m->lib) {
        for (int i = 0; i < 3; i++)
            if (m->gpm[i])
                m->gpm_free(m->gpm[i]);
        m->shutdown();
        dlclose(m->lib);
    }
    free(m->gpm_req);
    free(m->ws);
    free(m->buf);
    free(m->procs);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
}
