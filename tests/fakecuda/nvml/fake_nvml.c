/* fake_nvml.c — a stand-in for libnvidia-ml.so.1, built as
 * build/fakecuda/libfakenvml.so for the utilisation monitor's tests
 * (cuda/nvml.c loads it by path instead of the real library).
 *
 * FAKE_NVML selects the behaviour:
 *   unset or "ok" — scripted: utilisation 10, 20, 30, 40, 50, 10, ... (one
 *     per nvmlDeviceGetUtilizationRates call), 1 GiB + n MiB of 8 GiB used;
 *     no timestamped samples, GPM or process list (NOT_SUPPORTED, as on
 *     older GPUs and drivers);
 *   "timeline" — every figure derived from the fake runtime's simulated
 *     time line (tests/fakecuda/runtime/timeline.c, found with dlsym in the
 *     process: a fake binary, in real-time mode, FAKECUDA_REALTIME=1):
 *       nvmlDeviceGetSamples(NVML_GPU_UTILIZATION_SAMPLES): one sample per
 *         FAKE_NVML_PERIOD_MS (default 200, the H100's) of the clock,
 *         period k covering virtual [k P, (k+1) P) ms, its value the
 *         percentage of the period the compute engine was busy, rounded;
 *         its timestamp the period's end in CLOCK_REALTIME microseconds
 *         (real-time mode makes virtual v = the wall clock's base + v);
 *         only complete periods, the newest FAKE_NVML_BUFFER (default 100)
 *         kept; NOT_FOUND when none is newer than lastSeenTimeStamp;
 *         FAKE_NVML_SAMPLES=0: NOT_SUPPORTED (a vGPU; train falls back to
 *         polling the rate);
 *       nvmlDeviceGetUtilizationRates: the newest complete sample;
 *       GPM (FAKE_NVML_GPM=0: unsupported): a sample holds the wall clock
 *         and the compute engine's busy time so far; between two samples
 *         SM_UTIL = busy fraction x FAKE_NVML_SM_ACTIVE (default 0.5: the
 *         share of the SMs a running kernel keeps busy) x 100 and
 *         SM_OCCUPANCY = busy fraction x FAKE_NVML_OCCUPANCY (default 0.25)
 *         x 100; other metrics NOT_SUPPORTED;
 *       nvmlDeviceGetComputeRunningProcesses_v3: this process alone, using
 *         what the fake allocated now + FAKE_NVML_CONTEXT_MB (default 500,
 *         the CUDA context); nvmlDeviceGetMemoryInfo: that plus
 *         FAKE_NVML_OTHER_MB (default 0: other processes' memory), of 8 GiB;
 *   "not_supported" — utilisation answers NVML_ERROR_NOT_SUPPORTED;
 *   "init_fails" — nvmlInit_v2 fails (driver not loaded); "no_device" — the
 *     PCI bus id is unknown.
 * Only the functions cuda/nvml.c uses exist.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    unsigned int gpu, memory;
} utilization;
typedef struct {
    unsigned long long total, free, used;
} memory;

typedef struct {
    unsigned long long timeStamp;
    union {
        double d;
        unsigned int ui;
        unsigned long long ull;
    } v;
} sample;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} process_info;
typedef struct {
    unsigned int version, isSupportedDevice;
} gpm_support;
typedef struct {
    double t_ms, busy_ms;
} gpm_sample;
typedef struct {
    unsigned int metricId;
    int nvmlReturn;
    double value;
    struct {
        char *shortName, *longName, *unit;
    } metricInfo;
} gpm_metric;
typedef struct {
    unsigned int version, numMetrics;
    gpm_sample *sample1, *sample2;
    gpm_metric metrics[1]; /* numMetrics of them: the caller's array */
} gpm_metrics_get;

enum {
    OK = 0,
    INVALID_ARGUMENT = 2,
    NOT_SUPPORTED = 3,
    NOT_FOUND = 6,
    INSUFFICIENT_SIZE = 7,
    UNKNOWN = 999,
    VERSION_MISMATCH = 25
};

static unsigned calls;

/* the fake runtime's time line (tests/fakecuda/runtime/timeline.c) */
static struct {
    int (*realtime)(void);
    double (*now_ms)(void);
    long long (*base_us)(void);
    double (*busy_ms)(double, double);
    size_t (*device_bytes)(void);
} TL;

static int mode_is(const char *m)
{
    const char *v = getenv("FAKE_NVML");
    return v && !strcmp(v, m);
}

static double knob(const char *name, double dflt)
{
    const char *v = getenv(name);
    return v && *v ? atof(v) : dflt;
}

int nvmlInit_v2(void)
{
    calls = 0;
    if (mode_is("init_fails"))
        return 9;
    if (mode_is("timeline")) {
        *(void **)&TL.realtime = dlsym(RTLD_DEFAULT, "fake_timeline_realtime");
        *(void **)&TL.now_ms = dlsym(RTLD_DEFAULT, "fake_timeline_now_ms");
        *(void **)&TL.base_us = dlsym(RTLD_DEFAULT, "fake_timeline_realtime_base_us");
        *(void **)&TL.busy_ms = dlsym(RTLD_DEFAULT, "fake_timeline_busy_ms");
        *(void **)&TL.device_bytes = dlsym(RTLD_DEFAULT, "fake_timeline_device_bytes");
        if (!TL.realtime || !TL.now_ms || !TL.base_us || !TL.busy_ms || !TL.device_bytes) {
            fprintf(stderr, "fakenvml: FAKE_NVML=timeline needs the fake CUDA runtime's "
                            "fake_timeline_* in this process\n");
            return UNKNOWN;
        }
        if (!TL.realtime()) {
            fprintf(stderr, "fakenvml: FAKE_NVML=timeline needs the fake runtime's real-time "
                            "mode (FAKECUDA_REALTIME=1)\n");
            return UNKNOWN;
        }
    }
    return 0;
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

static double period_ms(void)
{
    double p = knob("FAKE_NVML_PERIOD_MS", 200);
    return p > 0 ? p : 200;
}

/* sample k: the compute engine's busy share of virtual [k P, (k+1) P) */
static unsigned sample_value(long k)
{
    double p = period_ms();
    return (unsigned)lround(100.0 * TL.busy_ms((double)k * p, (double)(k + 1) * p) / p);
}

static unsigned long long sample_stamp(long k)
{
    return (unsigned long long)(TL.base_us() + llround((double)(k + 1) * period_ms() * 1000.0));
}

int nvmlDeviceGetSamples(void *dev, int type, unsigned long long last_seen, int *val_type,
                         unsigned int *count, sample *out)
{
    (void)dev;
    if (!mode_is("timeline") || knob("FAKE_NVML_SAMPLES", 1) == 0)
        return NOT_SUPPORTED;
    if (type != 1 /* NVML_GPU_UTILIZATION_SAMPLES */)
        return NOT_SUPPORTED;
    if (!count || (out && *count == 0))
        return INVALID_ARGUMENT;
    long done = (long)floor(TL.now_ms() / period_ms()); /* complete periods */
    long keep = (long)knob("FAKE_NVML_BUFFER", 100);
    long k = done - keep > 0 ? done - keep : 0;
    while (k < done && sample_stamp(k) <= last_seen)
        k++;
    unsigned n = (unsigned)(done - k);
    if (n == 0)
        return NOT_FOUND;
    if (!out) {
        *count = n;
        return OK;
    }
    if (n > *count)
        n = *count;
    for (unsigned i = 0; i < n; i++) {
        out[i].timeStamp = sample_stamp(k + (long)i);
        out[i].v.ull = 0;
        out[i].v.ui = sample_value(k + (long)i);
    }
    *count = n;
    if (val_type)
        *val_type = 1; /* NVML_VALUE_TYPE_UNSIGNED_INT */
    return OK;
}

static unsigned long long process_bytes(void)
{
    return (unsigned long long)TL.device_bytes() +
           (unsigned long long)(knob("FAKE_NVML_CONTEXT_MB", 500) * 1024 * 1024);
}

int nvmlDeviceGetComputeRunningProcesses_v3(void *dev, unsigned int *count, process_info *infos)
{
    (void)dev;
    if (!mode_is("timeline"))
        return NOT_SUPPORTED;
    if (!count)
        return INVALID_ARGUMENT;
    if (*count < 1 || !infos) {
        *count = 1;
        return INSUFFICIENT_SIZE;
    }
    *count = 1;
    infos[0] = (process_info){.pid = (unsigned)getpid(),
                              .usedGpuMemory = process_bytes(),
                              .gpuInstanceId = 0xFFFFFFFFu,
                              .computeInstanceId = 0xFFFFFFFFu};
    return OK;
}

int nvmlGpmQueryDeviceSupport(void *dev, gpm_support *s)
{
    (void)dev;
    if (!s)
        return INVALID_ARGUMENT;
    if (s->version != 1)
        return VERSION_MISMATCH;
    s->isSupportedDevice = mode_is("timeline") && knob("FAKE_NVML_GPM", 1) != 0;
    return OK;
}

int nvmlGpmSampleAlloc(gpm_sample **s)
{
    if (!s)
        return INVALID_ARGUMENT;
    *s = calloc(1, sizeof **s);
    return *s ? OK : UNKNOWN;
}

int nvmlGpmSampleFree(gpm_sample *s)
{
    free(s);
    return OK;
}

int nvmlGpmSampleGet(void *dev, gpm_sample *s)
{
    (void)dev;
    if (!mode_is("timeline") || knob("FAKE_NVML_GPM", 1) == 0)
        return NOT_SUPPORTED;
    if (!s)
        return INVALID_ARGUMENT;
    s->t_ms = TL.now_ms();
    s->busy_ms = TL.busy_ms(0, s->t_ms);
    return OK;
}

int nvmlGpmMetricsGet(gpm_metrics_get *g)
{
    if (!g || !g->sample1 || !g->sample2)
        return INVALID_ARGUMENT;
    if (g->version != 1)
        return VERSION_MISMATCH;
    double dt = g->sample2->t_ms - g->sample1->t_ms;
    if (!(dt > 0))
        return INVALID_ARGUMENT;
    double busy = (g->sample2->busy_ms - g->sample1->busy_ms) / dt;
    for (unsigned i = 0; i < g->numMetrics; i++) {
        gpm_metric *m = &g->metrics[i];
        memset(&m->metricInfo, 0, sizeof m->metricInfo);
        m->nvmlReturn = OK;
        if (m->metricId == 2) /* NVML_GPM_METRIC_SM_UTIL */
            m->value = 100.0 * busy * knob("FAKE_NVML_SM_ACTIVE", 0.5);
        else if (m->metricId == 3) /* NVML_GPM_METRIC_SM_OCCUPANCY */
            m->value = 100.0 * busy * knob("FAKE_NVML_OCCUPANCY", 0.25);
        else
            m->nvmlReturn = NOT_SUPPORTED;
    }
    return OK;
}

int nvmlDeviceGetUtilizationRates(void *dev, utilization *u)
{
    (void)dev;
    if (mode_is("not_supported"))
        return 3;
    if (mode_is("timeline")) {
        long done = (long)floor(TL.now_ms() / period_ms());
        u->gpu = done > 0 ? sample_value(done - 1) : 0;
        u->memory = 0;
        return OK;
    }
    u->gpu = 10 + 10 * (calls % 5);
    u->memory = 5;
    calls++;
    return 0;
}

int nvmlDeviceGetMemoryInfo(void *dev, memory *m)
{
    (void)dev;
    m->total = 8ull << 30;
    m->used =
        mode_is("timeline")
            ? process_bytes() + (unsigned long long)(knob("FAKE_NVML_OTHER_MB", 0) * 1024 * 1024)
            : (1ull << 30) + ((unsigned long long)calls << 20);
    m->free = m->total - m->used;
    return 0;
}
