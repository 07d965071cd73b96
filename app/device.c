/* device.c — backend selection and the pinning guard (see device.h).
 *
 * The only file outside cuda/ that knows about CUDA, and only under
 * TRAIN_CUDA: a CPU-only build compiles the same decisions with "built
 * without CUDA" as the answer.
 */
#define _POSIX_C_SOURCE 200809L
#include "app/device.h"

#include <stdio.h>
#include <string.h>

#ifdef TRAIN_CUDA
#include "cuda/gpu.h"
#endif

int device_parse(const char *s, device_kind *out, errbuf *e)
{
    if (!strcmp(s, "auto"))
        *out = DEVICE_AUTO;
    else if (!strcmp(s, "cpu"))
        *out = DEVICE_CPU;
    else if (!strcmp(s, "cuda"))
        *out = DEVICE_CUDA;
    else
        return errf(e, "--device: '%s' is not one of auto, cpu, cuda", s);
    return 0;
}

int device_built_with_cuda(void)
{
#ifdef TRAIN_CUDA
    return 1;
#else
    return 0;
#endif
}

static void choose_cpu(device_choice *c, const char *why)
{
    c->kind = DEVICE_CPU;
    snprintf(c->line, sizeof c->line, "device: cpu (%s)", why);
}

int device_select(device_kind want, device_choice *c, errbuf *e)
{
    return device_select_gpu(want, 0, c, e);
}

int device_select_gpu(device_kind want, int local_rank, device_choice *c, errbuf *e)
{
    memset(c, 0, sizeof *c);
    if (want == DEVICE_CPU) {
        choose_cpu(c, "--device cpu");
        return 0;
    }
#ifdef TRAIN_CUDA
    gpu_info g;
    gpu_probe(0, &g);
    if (g.status == GPU_OK && local_rank > 0 && local_rank % g.count != 0)
        gpu_probe(local_rank % g.count, &g);
    if (g.status != GPU_OK) {
        if (want == DEVICE_CUDA)
            return errf(e, "--device cuda: no usable GPU: %s", g.reason);
        char why[sizeof g.reason + 32];
        snprintf(why, sizeof why, "no usable GPU: %s", g.reason);
        choose_cpu(c, why);
        return 0;
    }
    c->kind = DEVICE_CUDA;
    c->gpu = g.device;
    snprintf(c->pci_bus_id, sizeof c->pci_bus_id, "%s", g.pci_bus_id);
    char desc[360];
    snprintf(c->line, sizeof c->line, "device: cuda:%d %s", g.device,
             gpu_describe(&g, desc, sizeof desc));
    return 0;
#else
    (void)local_rank;
    if (want == DEVICE_CUDA)
        return errf(e, "--device cuda: this train was built without CUDA (rebuild where the CUDA "
                       "toolkit with cuDNN is installed: make CUDA=1)");
    choose_cpu(c, "built without CUDA");
    return 0;
#endif
}

backend *device_create_cuda(const device_choice *c, errbuf *e)
{
#ifdef TRAIN_CUDA
    if (c->kind != DEVICE_CUDA) {
        errf(e, "device_create_cuda: the choice is not a GPU");
        return NULL;
    }
    return backend_cuda_create(c->gpu, e);
#else
    (void)c;
    errf(e, "this train was built without CUDA");
    return NULL;
#endif
}

int device_pin_check(uint64_t bytes, uint64_t mem_available, int force, errbuf *e)
{
    char need[32], avail[32];
    fmt_bytes(need, sizeof need, bytes);
    if (mem_available == 0) {
        errf(e, "--pin: MemAvailable is unknown (no /proc/meminfo); pinning %s unchecked", need);
        return 1;
    }
    fmt_bytes(avail, sizeof avail, mem_available);
    double frac = (double)bytes / (double)mem_available;
    if (frac <= DEVICE_PIN_MAX_FRACTION)
        return 0;
    if (force) {
        errf(e, "--pin: pinning %s, %.0f%% of MemAvailable (%s), above the %.0f%% limit as forced",
             need, 100.0 * frac, avail, 100.0 * DEVICE_PIN_MAX_FRACTION);
        return 1;
    }
    return errf(e,
                "--pin: pinning %s would lock %.0f%% of MemAvailable (%s); the limit is %.0f%% "
                "because page-locked memory cannot be swapped and can freeze the machine. Use "
                "fewer workers or a smaller --prefetch or batch, --pin=off, or --pin-force",
                need, 100.0 * frac, avail, 100.0 * DEVICE_PIN_MAX_FRACTION);
}

int device_selftest(FILE *out)
{
#ifdef TRAIN_CUDA
    return gpu_selftest(out);
#else
    fprintf(out, "selftest: this train was built without CUDA; nothing to test\n");
    return 2;
#endif
}

gpu_monitor *device_monitor_create(const device_choice *c)
{
#ifdef TRAIN_CUDA
    if (c->kind == DEVICE_CUDA)
        return gpu_monitor_create(c->pci_bus_id, NULL, 50);
#else
    (void)c;
#endif
    return NULL;
}

void device_monitor_start(gpu_monitor *m)
{
#ifdef TRAIN_CUDA
    if (m)
        gpu_monitor_start(m);
#else
    (void)m;
#endif
}

void device_monitor_stop(gpu_monitor *m, device_util *out)
{
#ifdef TRAIN_CUDA
    if (m) {
        gpu_monitor_stop(m, out);
        return;
    }
#else
    (void)m;
#endif
    memset(out, 0, sizeof *out);
    snprintf(out->why, sizeof out->why, "no GPU");
}

void device_monitor_free(gpu_monitor *m)
{
#ifdef TRAIN_CUDA
    gpu_monitor_free(m);
#else
    (void)m;
#endif
}

const char *device_util_format(const device_util *u, char *buf, size_t len)
{
    if (!u->available) {
        snprintf(buf, len, "gpu n/a (%s)", u->why[0] ? u->why : "no data");
        return buf;
    }
    char used[32], total[32];
    if (u->mem_total)
        snprintf(buf, len, "gpu %.0f%% avg, %.0f%% max, mem %s / %s", u->util_avg, u->util_max,
                 fmt_bytes(used, sizeof used, u->mem_used),
                 fmt_bytes(total, sizeof total, u->mem_total));
    else
        snprintf(buf, len, "gpu %.0f%% avg, %.0f%% max, mem n/a", u->util_avg, u->util_max);
    return buf;
}
