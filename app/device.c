/* device.c — backend selection and the pinning guard (see device.h).
 *
 * The GPU comes from nn/provider.h's registry (the "cuda" provider, linked
 * in CUDA builds only), so this file compiles the same in every build and
 * a CPU-only build's registry answers "built without CUDA".
 */
#define _POSIX_C_SOURCE 200809L
#include "app/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* the GPU provider this build links, or NULL (CPU-only) */
static const backend_provider *gpu_provider(void) { return backend_provider_find("cuda"); }

int device_built_with_cuda(void) { return gpu_provider() != NULL; }

static void choose_cpu(device_choice *c, const char *why)
{
    c->kind = DEVICE_CPU;
    snprintf(c->line, sizeof c->line, "device: cpu (%s)", why);
}

/* Device local_rank modulo the devices the provider can probe (ranks of a
 * node share its GPUs round robin; one visible device serves every rank). */
static int probe_for_rank(const backend_provider *p, int local_rank, provider_device *d, errbuf *e)
{
    int rc = p->probe(local_rank, d, e);
    if (rc == 0 || local_rank == 0)
        return rc;
    int count = 0;
    errbuf ce;
    while (count < 64 && p->probe(count, d, &ce) == 0)
        count++;
    return p->probe(count ? local_rank % count : 0, d, e);
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
    const backend_provider *p = gpu_provider();
    if (!p) {
        if (want == DEVICE_CUDA)
            return errf(e, "--device cuda: this train was built without CUDA (rebuild where the "
                           "CUDA toolkit with cuDNN is installed: make CUDA=1)");
        choose_cpu(c, "built without CUDA");
        return 0;
    }
    errbuf pe;
    if (probe_for_rank(p, local_rank, &c->dev, &pe) != 0) {
        if (want == DEVICE_CUDA)
            return errf(e, "--device cuda: no usable GPU: %s", pe.msg);
        char why[480];
        snprintf(why, sizeof why, "no usable GPU: %.400s", pe.msg);
        choose_cpu(c, why);
        return 0;
    }
    c->kind = DEVICE_CUDA;
    c->gpu = c->dev.index;
    snprintf(c->line, sizeof c->line, "device: cuda:%d %s", c->dev.index, c->dev.desc);
    return 0;
}

backend *device_create_cuda(const device_choice *c, errbuf *e)
{
    const backend_provider *p = gpu_provider();
    if (!p) {
        errf(e, "this train was built without CUDA");
        return NULL;
    }
    if (c->kind != DEVICE_CUDA) {
        errf(e, "device_create_cuda: the choice is not a GPU");
        return NULL;
    }
    return p->create(&c->dev, e);
}

const char *device_gpu_libraries(char *buf, size_t len, char *warn, size_t wlen)
{
    const backend_provider *p = gpu_provider();
    if (!p || !p->libraries)
        return NULL;
    return p->libraries(buf, len, warn, wlen);
}

int device_pin_check(uint64_t bytes, uint64_t mem_available, int force, errbuf *e)
{
    return device_pin_check_of(bytes, mem_available, "MemAvailable", force, e);
}

int device_pin_check_of(uint64_t bytes, uint64_t budget, const char *what, int force, errbuf *e)
{
    char need[32], avail[32];
    fmt_bytes(need, sizeof need, bytes);
    if (budget == 0) {
        errf(e, "--pin: MemAvailable is unknown (no /proc/meminfo); pinning %s unchecked", need);
        return 1;
    }
    fmt_bytes(avail, sizeof avail, budget);
    double frac = (double)bytes / (double)budget;
    if (frac <= DEVICE_PIN_MAX_FRACTION)
        return 0;
    if (force) {
        errf(e, "--pin: pinning %s, %.0f%% of %s (%s), above the %.0f%% limit as forced", need,
             100.0 * frac, what, avail, 100.0 * DEVICE_PIN_MAX_FRACTION);
        return 1;
    }
    return errf(e,
                "--pin: pinning %s would lock %.0f%% of %s (%s); the limit is %.0f%% "
                "because page-locked memory cannot be swapped and can freeze the machine. Use "
                "fewer workers or a smaller --prefetch or batch, --pin=off, or --pin-force",
                need, 100.0 * frac, what, avail, 100.0 * DEVICE_PIN_MAX_FRACTION);
}

/* a cgroup file's one number; 0 when absent, unreadable or "max" */
static uint64_t cgroup_value(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char buf[64] = "";
    uint64_t v = 0;
    if (fgets(buf, sizeof buf, f) && buf[0] >= '0' && buf[0] <= '9')
        v = strtoull(buf, NULL, 10);
    fclose(f);
    return v;
}

/* limit - usage of the memory cgroup at dir (v2: memory.max and
 * memory.current; v1: memory.limit_in_bytes and memory.usage_in_bytes,
 * whose "no limit" is a number near 2^63); 0 with *limited 0 when none */
static uint64_t cgroup_room(const char *dir, int *limited)
{
    uint64_t lim = cgroup_value(dir, "memory.max"), use = cgroup_value(dir, "memory.current");
    if (!lim) {
        lim = cgroup_value(dir, "memory.limit_in_bytes");
        use = cgroup_value(dir, "memory.usage_in_bytes");
    }
    *limited = lim > 0 && lim < (UINT64_C(1) << 62);
    return *limited && lim > use ? lim - use : 0;
}

/* this process's cgroup folders below the cgroup root: the v2 one
 * ("0::/PATH" in /proc/self/cgroup) and the v1 memory controller's
 * ("N:memory:/PATH"); "" when absent or "/" */
static void own_cgroups(char *v2, char *v1, size_t len)
{
    v2[0] = v1[0] = 0;
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return;
    char line[768];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || !strcmp(c2 + 1, "/"))
            continue;
        *c2 = 0;
        if (!strcmp(c1 + 1, ""))
            snprintf(v2, len, "%.700s", c2 + 1);
        else if (!strcmp(c1 + 1, "memory"))
            snprintf(v1, len, "%.700s", c2 + 1);
    }
    fclose(f);
}

/* the least room of the cgroup folder base+path and each folder above it
 * up to base (a parent's limit binds its children); 0 with *limited 0
 * when none of them has a limit */
static uint64_t cgroup_tree_room(const char *base, const char *path, int *limited, char *where,
                                 size_t wlen)
{
    char p[800], dir[2048];
    snprintf(p, sizeof p, "%s", path);
    uint64_t best = 0;
    *limited = 0;
    for (;;) {
        snprintf(dir, sizeof dir, "%s%s", base, p);
        int lim;
        uint64_t room = cgroup_room(dir, &lim);
        if (lim && (!*limited || room < best)) {
            best = room;
            *limited = 1;
            snprintf(where, wlen, "%s", dir);
        }
        char *slash = strrchr(p, '/');
        if (!slash)
            break;
        *slash = 0;
    }
    return best;
}

uint64_t device_pin_budget(char *what, size_t len)
{
    uint64_t avail = mem_available_bytes();
    snprintf(what, len, "MemAvailable");
    const char *root = getenv(DEVICE_CGROUP_ROOT_ENV);
    if (!root || !*root)
        root = "/sys/fs/cgroup";
    char v2[800], v1[800], base[1024], where[2048] = "";
    own_cgroups(v2, v1, sizeof v2);
    /* inside a container with its own cgroup namespace the paths are "/"
     * and the root's files are the container's */
    for (int v = 0; v < 2; v++) {
        snprintf(base, sizeof base, "%s%s", root, v ? "/memory" : "");
        int limited;
        uint64_t room = cgroup_tree_room(base, v ? v1 : v2, &limited, where, sizeof where);
        if (!limited)
            continue;
        if (!avail || room < avail) {
            avail = room ? room : 1;
            snprintf(what, len, "the memory cgroup's room (limit - usage, %s)", where);
        }
        break;
    }
    return avail;
}

gpu_monitor *device_monitor_create(const device_choice *c)
{
    const backend_provider *p = gpu_provider();
    return p && c->kind == DEVICE_CUDA ? p->monitor_create(&c->dev) : NULL;
}

void device_monitor_start(gpu_monitor *m)
{
    if (m)
        gpu_provider()->monitor_start(m);
}

void device_monitor_stop(gpu_monitor *m, double t0, double t1, device_util *out)
{
    if (m) {
        gpu_provider()->monitor_stop(m, t0, t1, out);
        return;
    }
    memset(out, 0, sizeof *out);
    snprintf(out->why, sizeof out->why, "no GPU");
}

void device_monitor_free(gpu_monitor *m)
{
    if (m)
        gpu_provider()->monitor_free(m);
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
