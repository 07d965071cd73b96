/* test_select.c — `--device` in the CUDA build (app/device.c compiled with
 * TRAIN_CUDA against the fake): the probe's answers mapped to what the
 * user reads — no driver, driver too old, no device, the toolkit's stub
 * libcuda, a device too old for this build — and auto / cuda / cpu
 * deciding on them.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <string.h>

#include "app/device.h"
#include "cuda/gpu.h"
#include "tests/fakecuda/runtime/fake.h"

static void setup(void) { fake_reset(); }

TestSuite(select, .init = setup);

Test(select, auto_picks_a_usable_gpu)
{
    device_choice c;
    errbuf e;
    cr_assert_eq(device_select(DEVICE_AUTO, &c, &e), 0);
    cr_expect_eq(c.kind, DEVICE_CUDA);
    cr_expect_eq(c.gpu, 0);
    cr_expect_str_eq(c.line,
                     "device: cuda:0 Fake GPU (tests/fakecuda) (cc 8.0, 1.0 GB, driver CUDA 13.0)");
    cr_expect_str_eq(c.dev.pci_bus_id, "00000000:01:00.0");
    cr_expect(device_built_with_cuda());
    backend *be = device_create_cuda(&c, &e);
    cr_assert_not_null(be, "%s", e.msg);
    cr_expect_str_eq(be->ops->name, "cuda");
    cr_expect_eq(fake_device_flags() & cudaDeviceScheduleMask, cudaDeviceScheduleBlockingSync,
                 "the host thread sleeps, not spins, while it waits for the device");
    be->ops->destroy(be);
    cr_expect_eq(fake_live_objects(), 0);
}

/* the device answers, `want` asked, expected kind (or -1 for an error),
 * and a phrase the user must read */
static void expect_choice(device_kind want, int rc_want, device_kind kind, const char *phrase)
{
    device_choice c;
    errbuf e = {{0}};
    int rc = device_select(want, &c, &e);
    cr_assert_eq(rc, rc_want, "rc %d: %s / %s", rc, e.msg, c.line);
    const char *text = rc ? e.msg : c.line;
    if (rc == 0)
        cr_expect_eq(c.kind, kind);
    cr_expect(strstr(text, phrase) != NULL, "'%s' lacks '%s'", text, phrase);
}

Test(select, no_driver)
{
    fake_set_devices(0, cudaErrorInsufficientDriver, 0);
    expect_choice(DEVICE_AUTO, 0, DEVICE_CPU,
                  "device: cpu (no usable GPU: no NVIDIA driver (libcuda.so.1 "
                  "not found); this build needs a driver for CUDA 13.0");
    expect_choice(DEVICE_CUDA, -1, DEVICE_CPU, "--device cuda: no usable GPU: no NVIDIA driver");
}

Test(select, driver_too_old)
{
    fake_set_devices(1, cudaErrorInsufficientDriver, 12080);
    expect_choice(DEVICE_AUTO, 0, DEVICE_CPU,
                  "the NVIDIA driver supports CUDA 12.8 but this build needs "
                  "CUDA 13.0; update the driver (R580 or newer)");
    expect_choice(DEVICE_CUDA, -1, DEVICE_CPU, "supports CUDA 12.8");
}

Test(select, no_device)
{
    fake_set_devices(0, cudaSuccess, 13000);
    expect_choice(DEVICE_AUTO, 0, DEVICE_CPU,
                  "sees no CUDA device; check nvidia-smi and CUDA_VISIBLE_DEVICES");
    expect_choice(DEVICE_CUDA, -1, DEVICE_CPU, "sees no CUDA device");
}

Test(select, stub_library_instead_of_a_driver)
{
    fake_set_devices(0, cudaErrorStubLibrary, 0);
    expect_choice(DEVICE_AUTO, 0, DEVICE_CPU, "libcuda.so is the toolkit's stub");
}

Test(select, other_driver_failure_quotes_the_runtime)
{
    fake_set_devices(0, cudaErrorDevicesUnavailable, 13000);
    expect_choice(DEVICE_CUDA, -1, DEVICE_CPU,
                  "cannot use the driver: devices busy or unavailable "
                  "(cudaErrorDevicesUnavailable)");
}

Test(select, device_older_than_the_build)
{
    fake_set_device_props("Tesla T4", 7, 5, (size_t)16 << 30);
    expect_choice(DEVICE_AUTO, 0, DEVICE_CPU,
                  "Tesla T4 has compute capability 7.5; this build's kernels "
                  "start at 8.0");
    expect_choice(DEVICE_CUDA, -1, DEVICE_CPU, "compute capability 7.5");
}

Test(select, cpu_on_request_without_probing)
{
    fake_set_devices(0, cudaErrorInsufficientDriver, 0);
    expect_choice(DEVICE_CPU, 0, DEVICE_CPU, "device: cpu (--device cpu)");
    cr_expect_eq(fake_calls("cudaGetDeviceCount"), 0, "--device cpu does not touch CUDA");
}

Test(select, probe_reports_the_device)
{
    fake_set_device_props("NVIDIA H100", 9, 0, (size_t)80 << 30);
    gpu_info g;
    gpu_probe(0, &g);
    cr_expect_eq(g.status, GPU_OK);
    cr_expect_eq(g.count, 1);
    cr_expect_eq(g.driver_version, 13000);
    cr_expect_eq(g.runtime_version, CUDART_VERSION);
    char d[400];
    cr_expect_str_eq(gpu_describe(&g, d, sizeof d),
                     "NVIDIA H100 (cc 9.0, 80.0 GB, driver CUDA 13.0)");
    gpu_probe(3, &g);
    cr_expect_eq(g.status, GPU_UNUSABLE);
    cr_expect(strstr(g.reason, "device 3 does not exist (1 visible)"), "%s", g.reason);
}

/* gpu_probe "always fills *out": what a failed probe did not reach reads as
 * zero and empty, not as whatever the caller's memory held */
Test(select, a_failed_probe_leaves_no_stale_fields)
{
    const struct {
        cudaError_t err;
        int driver;
    } cases[] = {{cudaErrorInsufficientDriver, 0}, {cudaErrorNoDevice, 13000}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fake_reset();
        fake_set_devices(1, cases[i].err, cases[i].driver);
        gpu_info g;
        memset(&g, 0x5a, sizeof g);
        gpu_probe(0, &g);
        cr_expect_neq(g.status, GPU_OK);
        cr_expect_str_eq(g.name, "", "case %zu", i);
        cr_expect_str_eq(g.pci_bus_id, "", "case %zu", i);
        cr_expect_eq(g.cc_major, 0, "case %zu", i);
        cr_expect_eq(g.cc_minor, 0, "case %zu", i);
        cr_expect_eq(g.mem_total, 0, "case %zu", i);
        cr_expect_eq(g.count, 0, "case %zu", i);
    }
}
