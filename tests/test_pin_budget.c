/* test_pin_budget.c — what --pin's guard measures the ring against
 * (device_pin_budget): MemAvailable, or the room left in the process's
 * memory cgroup when that is smaller (v2 memory.max - memory.current, v1
 * memory.limit_in_bytes - usage_in_bytes, a parent's limit binding its
 * children), read below $TRAIN_CGROUP_ROOT; RLIMIT_MEMLOCK is left out
 * because cudaHostRegister ignores it (docs/GPU.md, tools/pin_probe.cu).
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/device.h"
#include "common/util.h"

#define MB (1ull << 20)

static char root[256];

static void make_root(void)
{
    snprintf(root, sizeof root, "/tmp/train-cgroup-XXXXXX");
    cr_assert_not_null(mkdtemp(root));
    setenv(DEVICE_CGROUP_ROOT_ENV, root, 1);
}

static void put(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    /* the folders on the way */
    for (char *s = strchr(path + strlen(root) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        mkdir(path, 0755);
        *s = '/';
    }
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

static void clean(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    cr_expect_eq(system(cmd), 0);
}

TestSuite(pin_budget, .init = make_root, .fini = clean);

Test(pin_budget, no_cgroup_limit_is_mem_available)
{
    put("memory.max", "max\n");
    put("memory.current", "12345\n");
    char what[2048];
    uint64_t b = device_pin_budget(what, sizeof what);
    cr_expect_eq(b, mem_available_bytes());
    cr_expect_str_eq(what, "MemAvailable");
}

Test(pin_budget, cgroup_v2_room_when_smaller)
{
    cr_assert_gt(mem_available_bytes(), 400 * MB, "the test needs MemAvailable above 400 MB");
    put("memory.max", "1073741824\n");
    put("memory.current", "754974720\n"); /* 720 MB used of 1 GB: 304 MB left */
    char what[2048];
    uint64_t b = device_pin_budget(what, sizeof what);
    cr_expect_eq(b, 304 * MB);
    cr_expect(strstr(what, "memory cgroup") && strstr(what, root), "%s", what);
    errbuf e;
    cr_expect_eq(device_pin_check_of(200 * MB, b, what, 0, &e), -1, "66%% of the cgroup's room");
    cr_expect(strstr(e.msg, "of the memory cgroup's room"), "%s", e.msg);
    cr_expect_eq(device_pin_check_of(100 * MB, b, what, 0, &e), 0);
}

Test(pin_budget, cgroup_v1_limit_and_its_no_limit)
{
    put("memory/memory.limit_in_bytes", "9223372036854771712\n"); /* v1's "no limit" */
    put("memory/memory.usage_in_bytes", "1048576\n");
    char what[2048];
    cr_expect_eq(device_pin_budget(what, sizeof what), mem_available_bytes());
    put("memory/memory.limit_in_bytes", "536870912\n");
    put("memory/memory.usage_in_bytes", "134217728\n");
    cr_expect_eq(device_pin_budget(what, sizeof what), 384 * MB);
}

/* a limit on the folder above this process's own (from /proc/self/cgroup)
 * binds it; the smallest room of the chain counts */
Test(pin_budget, a_parent_limit_binds)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    cr_assert_not_null(f);
    char line[768], own[700] = "", *v1 = NULL;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2 && strcmp(c2 + 1, "/") && (!strncmp(c1, "::", 2) || !strncmp(c1, ":memory:", 8))) {
            snprintf(own, sizeof own, "%s", c2 + 1);
            v1 = strncmp(c1, "::", 2) ? "memory" : "";
            break;
        }
    }
    fclose(f);
    if (!own[0])
        cr_skip_test("this process's cgroup is the root: no folder above it to limit");
    char rel[1000], up[700];
    const char *lim = *v1 ? "memory.limit_in_bytes" : "memory.max";
    const char *use = *v1 ? "memory.usage_in_bytes" : "memory.current";
    snprintf(rel, sizeof rel, "%s%s/%s", v1, own, lim);
    put(rel, "1073741824\n");
    snprintf(rel, sizeof rel, "%s%s/%s", v1, own, use);
    put(rel, "0\n");
    snprintf(up, sizeof up, "%s", own);
    *strrchr(up, '/') = 0; /* the parent (the cgroup root when own is one level deep) */
    snprintf(rel, sizeof rel, "%s%s/%s", v1, up, lim);
    put(rel, "209715200\n");
    snprintf(rel, sizeof rel, "%s%s/%s", v1, up, use);
    put(rel, "104857600\n");
    char what[2048];
    cr_expect_eq(device_pin_budget(what, sizeof what), 100 * MB, "%s", what);
}

/* cudaHostRegister does not count against ulimit -l (measured on an H100,
 * as root and as uid 65534): a low limit must not refuse --pin */
Test(pin_budget, memlock_limit_is_not_the_budget)
{
    struct rlimit rl = {64 * 1024, 64 * 1024};
    cr_assert_eq(setrlimit(RLIMIT_MEMLOCK, &rl),
                 0); /* criterion runs each test in its own process */
    char what[2048];
    cr_expect_eq(device_pin_budget(what, sizeof what), mem_available_bytes());
    cr_expect_str_eq(what, "MemAvailable");
}
