/* runtime.c — the fake's core: the device it pretends to be (count,
 * driver version, properties, or a configured absence), the prologue
 * every call runs (count, absent device, sticky fault, queued failure),
 * violations, the fail/corrupt/fault knobs, last-error bookkeeping and
 * error strings, and reset. Memory is in memory.c, streams and events in
 * streams.c, cuBLAS in cublas.c, cuDNN in cudnn*.c. See fake.h.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fakecuda/runtime/internal.h"

#define KNOB_MAX 16
typedef struct knob {
    char api[64];
    int status;
    int corrupt;
    int fault;
} knob;

static struct {
    cudaError_t last_error;
    cudaError_t sticky; /* an asynchronous fault happened: every call fails */
    int fault_seen;     /* ... and a synchronising call has reported it */
    int violations, quiet;
    char last_violation[512];
    knob knobs[KNOB_MAX];
    struct {
        char api[64];
        int n;
    } calls[128];
    int ncalls;
    /* device configuration */
    int dev_count;
    cudaError_t dev_err;
    int driver_version;
    char dev_name[256];
    int cc_major, cc_minor;
    size_t mem_total;
    int current_device;
    unsigned device_flags;
    int configured;
} F;

#define FAKE_MEM_TOTAL ((size_t)1 << 30)

static void configure_defaults(void)
{
    F.dev_count = 1;
    F.dev_err = cudaSuccess;
    F.driver_version = 13000;
    snprintf(F.dev_name, sizeof F.dev_name, "Fake GPU (tests/fakecuda)");
    F.cc_major = 8;
    F.cc_minor = 0;
    F.mem_total = FAKE_MEM_TOTAL;
    F.configured = 1;
    const char *copies = getenv("FAKECUDA_COPIES");
    fake_set_eager_copies(copies && !strcmp(copies, "eager"));
    const char *nccl = getenv("FAKECUDA_NCCL");
    fake_set_early_nccl(nccl && !strcmp(nccl, "early"));
}

static void init_once(void)
{
    if (!F.configured)
        configure_defaults();
}

/* ---------------------------------------------------------------- violations, knobs */

void fk_violation(const char *api, const char *fmt, ...)
{
    char msg[448];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(F.last_violation, sizeof F.last_violation, "fakecuda: %s: %s", api, msg);
    if (!F.quiet)
        fprintf(stderr, "%s\n", F.last_violation);
    F.violations++;
}

void fake_set_quiet(int quiet) { F.quiet = quiet; }

int fake_violations(void) { return F.violations; }

const char *fake_last_violation(void) { return F.last_violation; }

static knob *knob_for(const char *api, int create)
{
    for (int i = 0; i < KNOB_MAX; i++)
        if (F.knobs[i].api[0] && !strcmp(F.knobs[i].api, api))
            return &F.knobs[i];
    if (!create)
        return NULL;
    for (int i = 0; i < KNOB_MAX; i++)
        if (!F.knobs[i].api[0]) {
            snprintf(F.knobs[i].api, sizeof F.knobs[i].api, "%s", api);
            return &F.knobs[i];
        }
    abort();
}

void fake_fail_next(const char *api, int status)
{
    knob *k = knob_for(api, 1);
    k->status = status;
}

void fake_corrupt_next(const char *api)
{
    knob *k = knob_for(api, 1);
    k->corrupt = 1;
}

void fake_fault_next(const char *api) { knob_for(api, 1)->fault = 1; }

/* clear a knob that has nothing left queued */
static void knob_done(knob *k)
{
    if (!k->status && !k->corrupt && !k->fault)
        k->api[0] = '\0';
}

int fk_take_failure(const char *api, int *status)
{
    knob *k = knob_for(api, 0);
    if (!k || !k->status)
        return 0;
    *status = k->status;
    k->status = 0;
    knob_done(k);
    return 1;
}

int fk_take_corruption(const char *api)
{
    knob *k = knob_for(api, 0);
    if (!k || !k->corrupt)
        return 0;
    k->corrupt = 0;
    knob_done(k);
    return 1;
}

int fk_take_fault(const char *api)
{
    knob *k = knob_for(api, 0);
    if (!k || !k->fault)
        return 0;
    k->fault = 0;
    knob_done(k);
    return 1;
}

void fk_count(const char *api)
{
    for (int i = 0; i < F.ncalls; i++)
        if (!strcmp(F.calls[i].api, api)) {
            F.calls[i].n++;
            return;
        }
    if (F.ncalls < (int)(sizeof F.calls / sizeof *F.calls)) {
        snprintf(F.calls[F.ncalls].api, sizeof F.calls[F.ncalls].api, "%s", api);
        F.calls[F.ncalls++].n = 1;
    }
}

int fake_calls(const char *api)
{
    for (int i = 0; i < F.ncalls; i++)
        if (!strcmp(F.calls[i].api, api))
            return F.calls[i].n;
    return 0;
}

/* ---------------------------------------------------------------- the prologue, errors */

cudaError_t fk_ret(cudaError_t e)
{
    if (e != cudaSuccess)
        F.last_error = e;
    return e;
}

cudaError_t fk_enter(const char *api)
{
    init_once();
    fk_count(api);
    fk_touched_clear();
    if (F.dev_err != cudaSuccess)
        return fk_ret(F.dev_err);
    if (F.fault_seen)
        return fk_ret(F.sticky);
    int st;
    if (fk_take_failure(api, &st))
        return fk_ret((cudaError_t)st);
    return cudaSuccess;
}

void fk_raise_fault(void) { F.sticky = cudaErrorIllegalAddress; }

cudaError_t fk_sync_result(void)
{
    if (F.sticky) {
        F.fault_seen = 1;
        return fk_ret(F.sticky);
    }
    return cudaSuccess;
}

cudaError_t fk_device_error(void)
{
    init_once();
    return F.dev_err;
}

cudaError_t fk_sticky_error(void) { return F.fault_seen ? F.sticky : cudaSuccess; }

size_t fk_mem_total(void)
{
    init_once();
    return F.mem_total;
}

/* ---------------------------------------------------------------- device queries */

void fake_set_devices(int count, cudaError_t err, int driver_version)
{
    init_once();
    F.dev_count = count;
    F.dev_err = err;
    F.driver_version = driver_version;
}

void fake_set_device_props(const char *name, int cc_major, int cc_minor, size_t mem_total)
{
    init_once();
    snprintf(F.dev_name, sizeof F.dev_name, "%s", name);
    F.cc_major = cc_major;
    F.cc_minor = cc_minor;
    F.mem_total = mem_total;
}

cudaError_t cudaGetDeviceCount(int *n)
{
    FK_ENTER("cudaGetDeviceCount");
    *n = F.dev_count;
    return F.dev_count > 0 ? cudaSuccess : fk_ret(cudaErrorNoDevice);
}

cudaError_t cudaDriverGetVersion(int *v)
{
    init_once();
    fk_count("cudaDriverGetVersion");
    *v = F.driver_version;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}

static cudaError_t check_device(int d)
{
    if (d < 0 || d >= F.dev_count)
        return fk_ret(cudaErrorInvalidDevice);
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
    FK_ENTER("cudaGetDeviceProperties");
    if (check_device(d))
        return cudaErrorInvalidDevice;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", F.dev_name);
    p->major = F.cc_major;
    p->minor = F.cc_minor;
    p->totalGlobalMem = F.mem_total;
    p->pciBusID = 1;
    return cudaSuccess;
}

/* Which physical GPU this process's fake device is, as its PCI domain: a
 * process on its own is 0; under a launcher each local rank has a GPU of
 * its own (its local rank), unless FAKECUDA_DEVICE_ID=N says the process
 * sits on GPU N, so that ranks given the same N share one GPU (what NCCL
 * refuses; fake NCCL checks it). */
int fake_device_identity(void)
{
    const char *keys[] = {"FAKECUDA_DEVICE_ID", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const char *v = getenv(keys[i]);
        if (v && *v)
            return atoi(v) & 0xffff;
    }
    return 0;
}

cudaError_t cudaDeviceGetPCIBusId(char *buf, int len, int d)
{
    FK_ENTER("cudaDeviceGetPCIBusId");
    if (check_device(d))
        return cudaErrorInvalidDevice;
    snprintf(buf, (size_t)len, "%08X:%02X:00.0", fake_device_identity(), d + 1);
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
    FK_ENTER("cudaSetDevice");
    if (check_device(d))
        return cudaErrorInvalidDevice;
    F.current_device = d;
    return cudaSuccess;
}

cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
    FK_ENTER("cudaSetDeviceFlags");
    F.device_flags = flags;
    return cudaSuccess;
}

unsigned fake_device_flags(void) { return F.device_flags; }

cudaError_t cudaGetDevice(int *d)
{
    FK_ENTER("cudaGetDevice");
    *d = F.current_device;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = F.last_error;
    F.last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return F.last_error; }

/* Our own wording: the names are the enumerators, the descriptions ours. */
static const struct {
    cudaError_t e;
    const char *name, *text;
} errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "an argument is out of range or wrong"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of device memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "the driver could not start"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "bad launch configuration"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "no such device"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle",
     "bad stream or event handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "work is not finished yet"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "the driver is older than the runtime (or missing)"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA device found"},
    {cudaErrorStubLibrary, "cudaErrorStubLibrary", "the driver library is a stub"},
    {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
     "host range already registered"},
    {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
     "host range not registered"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "illegal memory access"},
    {cudaErrorDevicesUnavailable, "cudaErrorDevicesUnavailable", "devices busy or unavailable"},
};

const char *cudaGetErrorName(cudaError_t e)
{
    for (size_t i = 0; i < sizeof errors / sizeof *errors; i++)
        if (errors[i].e == e)
            return errors[i].name;
    return "cudaErrorUnknown(fake)";
}

const char *cudaGetErrorString(cudaError_t e)
{
    for (size_t i = 0; i < sizeof errors / sizeof *errors; i++)
        if (errors[i].e == e)
            return errors[i].text;
    return "unknown error (fake)";
}

/* ---------------------------------------------------------------- reset */

int fake_live_objects(void)
{
    return fk_pinned_count() + fk_streams_live() + fk_cudnn_live() + fk_cublas_live();
}

void fake_reset(void)
{
    fk_streams_reset();
    fk_clock_reset();
    fk_cupti_reset();
    fk_memory_reset();
    fk_cudnn_reset();
    fk_cublas_reset();
    memset(&F, 0, sizeof F);
    configure_defaults();
}
