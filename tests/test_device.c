/* test_device.c — `--device` and the pinning guard in this build of the
 * suite (the ASan build has no CUDA): asking for cuda says it was built
 * without it, auto falls back with the reason, and the page-locked memory
 * guard allows, warns and refuses at the right fractions of MemAvailable.
 * The CUDA build's decisions are tested on the fake runtime
 * (tests/fakecuda/suite/test_select.c); here, the CUDA-enabled binary itself
 * (build/cuda/train, made when the toolkit is found) runs end to end where
 * it finds no usable GPU and falls back to the CPU with its reason.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/device.h"
#include "app/selftest.h"
#include "tests/support/helpers.h"

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
    cr_expect_eq(selftest_main(f), 2);
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
    device_monitor_stop(m, 0, 0, &u);
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

/* ---- build/cuda/train without a usable GPU. CUDA_VISIBLE_DEVICES="" hides
 * any device, so this holds on GPU machines too (there the reason reads "no
 * CUDA device" instead of "no NVIDIA driver"). */

static char *cuda_dir, *cuda_csv, *cuda_train;

static void cuda_setup(void)
{
    cuda_train = path_join(source_root(), "build/cuda/train");
    if (access(cuda_train, X_OK) != 0) {
        fprintf(stderr, "test_device: skipped: no %s (CUDA toolkit not found)\n", cuda_train);
        cr_skip_test("skipped: no build/cuda/train (CUDA toolkit not found)");
    }
    cuda_dir = tmpdir_make();
    char *fm = make_fashion_subset(cuda_dir, 64);
    cuda_csv = path_join(fm, "train.csv");
    free(fm);
}

static void cuda_teardown(void)
{
    free(cuda_train);
    if (!cuda_dir)
        return;
    free(cuda_csv);
    tmpdir_remove(cuda_dir);
}

TestSuite(cuda_build, .init = cuda_setup, .fini = cuda_teardown);

static char *hide_gpus[] = {"CUDA_VISIBLE_DEVICES=", NULL};

Test(cuda_build, auto_trains_on_the_cpu_and_says_why)
{
    char *argv[] = {cuda_train, "--model", "probe", "--epochs", "1",
                    "--batch",  "32",      "--pin", cuda_csv,   NULL};
    run_result r;
    run_argv(argv, hide_gpus, 120, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(!strncmp(r.out, "device: cpu (no usable GPU: ", 28), "first line: %.200s", r.out);
    cr_expect(strstr(r.out, "\ncpu   probe "), "an epoch trained on the CPU:\n%s", r.out);
    cr_expect(strstr(r.err, "note: --pin has no effect without a GPU"), "%s", r.err);
    run_free(&r);
}

Test(cuda_build, device_cuda_exits_2_with_the_reason)
{
    char *argv[] = {cuda_train, "--device", "cuda",   "--model", "probe",
                    "--epochs", "1",        cuda_csv, NULL};
    run_result r;
    run_argv(argv, hide_gpus, 120, &r);
    cr_expect_eq(r.status, 2, "%s", r.err);
    cr_expect(strstr(r.err, "train: --device cuda: no usable GPU: "), "%s", r.err);
    cr_expect(!strstr(r.out, "device: "), "no run started: %s", r.out);
    run_free(&r);
}

Test(cuda_build, selftest_says_there_is_no_gpu)
{
    char *argv[] = {cuda_train, "--selftest", NULL};
    run_result r;
    run_argv(argv, hide_gpus, 60, &r);
    cr_expect_eq(r.status, 2);
    cr_expect(!strncmp(r.out, "selftest: no usable GPU: ", 25), "%s", r.out);
    run_free(&r);
}
