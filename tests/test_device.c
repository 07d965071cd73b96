/* test_device.c — `--device` and the pinning guard in this build of the
 * suite (the ASan build has no CUDA): asking for cuda says it was built
 * without it, auto falls back with the reason, and the page-locked memory
 * guard allows, warns and refuses at the right fractions of MemAvailable.
 * The CUDA build's decisions are tested on the fake runtime
 * (tests/fakecuda/test_select.c).
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../nn/device.h"

Test(device, parse)
{
    device_kind k;
    errbuf e;
    cr_expect(device_parse("auto", &k, &e) == 0 && k == DEVICE_AUTO);
    cr_expect(device_parse("cpu", &k, &e) == 0 && k == DEVICE_CPU);
    cr_expect(device_parse("cuda", &k, &e) == 0 && k == DEVICE_CUDA);
    cr_expect_eq(device_parse("gpu", &k, &e), -1);
    cr_expect_str_eq(e.msg, "--device: 'gpu' is not one of auto, cpu, cuda");
}

Test(device, cpu_only_build)
{
    cr_assert_eq(device_built_with_cuda(), 0, "the test build is compiled without TRAIN_CUDA");
    device_choice c;
    errbuf e = {{0}};
    cr_expect_eq(device_select(DEVICE_AUTO, &c, &e), 0);
    cr_expect_eq(c.kind, DEVICE_CPU);
    cr_expect_str_eq(c.line, "device: cpu (built without CUDA)");
    cr_expect_eq(device_select(DEVICE_CPU, &c, &e), 0);
    cr_expect_str_eq(c.line, "device: cpu (--device cpu)");
    cr_expect_eq(device_select(DEVICE_CUDA, &c, &e), -1);
    cr_expect(strstr(e.msg, "--device cuda: this train was built without CUDA"), "%s", e.msg);
    c.kind = DEVICE_CUDA;
    cr_expect_null(device_create_cuda(&c, &e));
    cr_expect_str_eq(e.msg, "this train was built without CUDA");
}

#define GB (1ull << 30)

Test(device, pin_guard)
{
    errbuf e = {{0}};
    cr_expect_eq(device_pin_check(4 * GB, 10 * GB, 0, &e), 0, "40%% is fine");
    cr_expect_eq(device_pin_check(5 * GB, 10 * GB, 0, &e), 0, "exactly the limit is fine");
    cr_expect_eq(device_pin_check(6 * GB, 10 * GB, 0, &e), -1, "60%% is refused");
    cr_expect_str_eq(
        e.msg, "--pin: pinning 6.0 GB would lock 60% of MemAvailable (10.0 GB); the limit is "
               "50% because page-locked memory cannot be swapped and can freeze the machine. "
               "Use fewer workers or a smaller --prefetch or batch, --pin=off, or --pin-force");
    cr_expect_eq(device_pin_check(6 * GB, 10 * GB, 1, &e), 1, "forced: allowed with a warning");
    cr_expect(strstr(e.msg, "above the 50% limit as forced"), "%s", e.msg);
    cr_expect_eq(device_pin_check(1 * GB, 0, 0, &e), 1, "unknown MemAvailable: allowed, said");
    cr_expect(strstr(e.msg, "MemAvailable is unknown"), "%s", e.msg);
    cr_expect_eq(device_pin_check(0, 10 * GB, 0, &e), 0);
}

Test(device, selftest_and_monitor_without_cuda)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_expect_eq(device_selftest(f), 2);
    fclose(f);
    cr_expect_str_eq(buf, "selftest: this train was built without CUDA; nothing to test\n");
    free(buf);
    device_choice c;
    errbuf e;
    device_select(DEVICE_AUTO, &c, &e);
    gpu_monitor *m = device_monitor_create(&c);
    cr_expect_null(m);
    device_util u;
    device_monitor_start(m);
    device_monitor_stop(m, &u);
    device_monitor_free(m);
    char line[100];
    cr_expect_str_eq(device_util_format(&u, line, sizeof line), "gpu n/a (no GPU)");
    u = (device_util){.available = 1,
                      .util_avg = 37.4,
                      .util_max = 88,
                      .mem_used = 1288490188,
                      .mem_total = 40ull << 30};
    cr_expect_str_eq(device_util_format(&u, line, sizeof line),
                     "gpu 37% avg, 88% max, mem 1.2 GB / 40.0 GB");
}
