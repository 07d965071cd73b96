/* test_monitor.c — the NVML utilisation monitor (cuda/nvml.c) against a
 * scripted libnvidia-ml stand-in (build/fakecuda/libfakenvml.so, chosen by
 * FAKE_NVML): figures averaged over the samples actually taken, memory
 * maximum, and n/a with the reason for a missing library, a failing init,
 * an unknown device and NOT_SUPPORTED — never an error. Assertions hold
 * for any number of samples, so timing does not matter.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/device.h"
#include "cuda/gpu.h"

static const char *bus = "00000000:01:00.0";

static void nap_ms(int ms)
{
    struct timespec t = {0, ms * 1000000L};
    nanosleep(&t, NULL);
}

static device_util epoch(const char *mode, int ms)
{
    if (mode)
        setenv("FAKE_NVML", mode, 1);
    gpu_monitor *m = gpu_monitor_create(bus, FAKE_NVML_LIB, 20);
    device_util u;
    gpu_monitor_start(m);
    nap_ms(ms);
    gpu_monitor_stop(m, &u);
    gpu_monitor_free(m);
    return u;
}

Test(monitor, samples_average_and_max)
{
    device_util u = epoch("ok", 120);
    cr_assert(u.available, "%s", u.why);
    cr_assert_geq(u.samples, 1, "the first sample is taken at start");
    /* the fake answers 10, 20, 30, 40, 50, 10, ... */
    double sum = 0, max = 0;
    for (int i = 0; i < u.samples; i++) {
        double v = 10 + 10 * (i % 5);
        sum += v;
        max = v > max ? v : max;
    }
    cr_expect_float_eq(u.util_avg, sum / u.samples, 1e-9, "avg over %d samples", u.samples);
    cr_expect_float_eq(u.util_max, max, 1e-9);
    cr_expect_eq(u.mem_total, 8ull << 30);
    cr_expect_eq(u.mem_used, (1ull << 30) + ((unsigned long long)u.samples << 20),
                 "the maximum, after the last sample");
    char line[200];
    device_util_format(&u, line, sizeof line);
    cr_expect(strncmp(line, "gpu ", 4) == 0 && strstr(line, "% avg, ") && strstr(line, "/ 8.0 GB"),
              "%s", line);
}

Test(monitor, two_epochs_each_start_fresh)
{
    setenv("FAKE_NVML", "ok", 1);
    gpu_monitor *m = gpu_monitor_create(bus, FAKE_NVML_LIB, 20);
    device_util a, b;
    gpu_monitor_start(m);
    gpu_monitor_stop(m, &a);
    gpu_monitor_start(m);
    nap_ms(30);
    gpu_monitor_stop(m, &b);
    gpu_monitor_free(m);
    cr_expect(a.available && b.available);
    cr_expect_geq(a.samples, 1);
    cr_expect_geq(b.samples, 1);
    cr_expect(b.util_avg >= 10 && b.util_avg <= 50 && b.util_max <= 50);
}

Test(monitor, missing_library_is_na)
{
    gpu_monitor *m = gpu_monitor_create(bus, "/nonexistent/libnvidia-ml.so.1", 20);
    device_util u;
    gpu_monitor_start(m);
    gpu_monitor_stop(m, &u);
    gpu_monitor_free(m);
    cr_expect_eq(u.available, 0);
    cr_expect(strstr(u.why, "NVML not available"), "%s", u.why);
    char line[200];
    cr_expect_str_eq(device_util_format(&u, line, sizeof line),
                     "gpu n/a (NVML not available (/nonexistent/libnvidia-ml.so.1))");
}

Test(monitor, not_supported_is_na)
{
    device_util u = epoch("not_supported", 10);
    cr_expect_eq(u.available, 0);
    cr_expect(strstr(u.why, "utilisation not supported on this device"), "%s", u.why);
}

Test(monitor, init_failure_is_na)
{
    device_util u = epoch("init_fails", 0);
    cr_expect_eq(u.available, 0);
    cr_expect(strstr(u.why, "NVML init failed: Driver Not Loaded (fake)"), "%s", u.why);
}

Test(monitor, unknown_device_is_na)
{
    device_util u = epoch("no_device", 0);
    cr_expect_eq(u.available, 0);
    cr_expect(strstr(u.why, "NVML does not know device 00000000:01:00.0"), "%s", u.why);
}

Test(monitor, stop_without_start_and_free_while_running)
{
    setenv("FAKE_NVML", "ok", 1);
    gpu_monitor *m = gpu_monitor_create(bus, FAKE_NVML_LIB, 20);
    device_util u;
    gpu_monitor_stop(m, &u);
    cr_expect_eq(u.available, 0);
    gpu_monitor_start(m);
    gpu_monitor_free(m); /* joins the thread */
}

/* the wrapper the rest of train uses: NULL for the CPU, a monitor for a GPU */
Test(monitor, device_wrappers)
{
    device_choice cpu = {.kind = DEVICE_CPU};
    gpu_monitor *m = device_monitor_create(&cpu);
    cr_expect_null(m);
    device_util u;
    device_monitor_start(m);
    device_monitor_stop(m, 0, 0, &u);
    device_monitor_free(m);
    char line[200];
    cr_expect_str_eq(device_util_format(&u, line, sizeof line), "gpu n/a (no GPU)");
    device_choice gpu = {.kind = DEVICE_CUDA, .dev = {.pci_bus_id = "00000000:01:00.0"}};
    m = device_monitor_create(&gpu);
    cr_assert_not_null(m);
    device_monitor_start(m);
    device_monitor_stop(m, 0, 0, &u); /* real NVML or none: figures or a reason, never a failure */
    cr_expect(u.available || u.why[0], "n/a needs a reason");
    device_monitor_free(m);
}
