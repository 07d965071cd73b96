/* test_nvml_window.c — NVML's figures cut to the epoch (cuda/nvml.c)
 * against the fake NVML in timeline mode (tests/fakecuda/nvml/fake_nvml.c,
 * FAKE_NVML=timeline), which derives them from the fake runtime's clock in
 * real-time mode (tests/fakecuda/runtime/timeline.c): utilisation samples every
 * FAKE_NVML_PERIOD_MS whose value is the compute engine's busy share of
 * the period, GPM SM activity and occupancy from the same busy time times
 * the SM/occupancy knobs, this process's memory = what the fake allocated
 * + the context knob.
 *
 * The device is kept busy with cudaMemsetAsync on the compute engine
 * (kernel_us = 10 ms each); the loader is a host sleep (real time in
 * which the fake runs nothing new). The epochs are cut by now_sec() like
 * app/loop.c's: each test gives the monitor the same [t0, t1] the program
 * would.
 *
 * In-process suite `nvml_window`; `nvml_window_e2e` runs build/fakecuda/train.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/device.h"
#include "cuda/gpu.h"
#include "tests/fakecuda/runtime/fake.h"
#include "tests/support/helpers.h"

static const char *bus = "00000000:01:00.0";
static void *dev_buf;
static cudaStream_t stream;

static void setup(void)
{
    fake_reset();
    fake_set_realtime(1);
    cr_assert_eq(fake_set_cost("kernel_us", 10000.0), 0); /* 10 ms a memset */
    setenv("FAKE_NVML", "timeline", 1);
    setenv("FAKE_NVML_PERIOD_MS", "50", 1);
    cr_assert_eq(cudaMalloc(&dev_buf, 64), cudaSuccess);
    cr_assert_eq(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
}

static void teardown(void)
{
    cudaStreamDestroy(stream);
    cudaFree(dev_buf);
    fake_set_realtime(0);
}

TestSuite(nvml_window, .init = setup, .fini = teardown);

static void nap_ms(double ms)
{
    struct timespec t = {(time_t)(ms / 1e3), (long)fmod(ms * 1e6, 1e9)};
    while (nanosleep(&t, &t) != 0)
        ;
}

/* the device busy for about ms: 10 ms operations back to back, waited for */
static void busy_ms(int ms)
{
    for (int i = 0; i < ms / 10; i++)
        cr_assert_eq(cudaMemsetAsync(dev_buf, 0, 64, stream), cudaSuccess);
    cr_assert_eq(cudaStreamSynchronize(stream), cudaSuccess);
}

typedef struct {
    double t0, t1;
    double v0, v1; /* the fake's clock at t0, t1 */
} window;

static void begin(gpu_monitor *m, window *w)
{
    w->t0 = now_sec();
    w->v0 = fake_timeline_now_ms();
    gpu_monitor_start(m);
}

static device_util end(gpu_monitor *m, window *w)
{
    w->t1 = now_sec();
    w->v1 = fake_timeline_now_ms();
    device_util u;
    gpu_monitor_stop_window(m, w->t0, w->t1, &u);
    return u;
}

/* A busy epoch, then one waiting for the loader: the second's utilisation
 * holds only its own samples (the device idle, then one 10 ms kernel at
 * the end) — never the first's 100. */
Test(nvml_window, loader_bound_epoch_after_a_busy_one)
{
    gpu_monitor *m = gpu_monitor_create(bus, FAKE_NVML_LIB, 20);
    window w;
    begin(m, &w);
    busy_ms(600);
    device_util a = end(m, &w);
    cr_assert(a.available, "%s", a.why);
    cr_expect(a.windowed);
    cr_expect_geq(a.samples, 8, "600 ms of 50 ms periods: %d within", a.samples);
    cr_expect_geq(a.util_avg, 95, "busy throughout: %.1f", a.util_avg);

    begin(m, &w);
    nap_ms(600); /* the loader */
    busy_ms(10);
    device_util b = end(m, &w);
    gpu_monitor_free(m);
    cr_assert(b.available, "%s", b.why);
    cr_expect_geq(b.samples, 8, "%d samples", b.samples);
    /* one 10 ms kernel falls in at most two 50 ms periods: 20% at most */
    cr_expect_leq(b.util_max, 20, "max %.0f: a sample from the busy epoch came in", b.util_max);
    cr_expect_leq(b.util_avg, 5, "avg %.1f", b.util_avg);
}

/* An epoch shorter than a sample period has no sample of its own: n/a with
 * the reason, not the figure of the epoch before it. */
Test(nvml_window, epoch_shorter_than_a_period_is_na)
{
    setenv("FAKE_NVML_PERIOD_MS", "200", 1);
    gpu_monitor *m = gpu_monitor_create(bus, FAKE_NVML_LIB, 20);
    window w;
    begin(m, &w);
    busy_ms(700);
    device_util a = end(m, &w);
    cr_assert(a.available, "%s", a.why);
    cr_expect_geq(a.util_avg, 95);

    begin(m, &w);
    busy_ms(150);
    device_util b = end(m, &w);
    gpu_monitor_free(m);
    cr_expect(!b.available, "a %.2f s epoch got %.0f%% from %d samples", w.t1 - w.t0, b.util_avg,
              b.samples);
    cr_expect_eq(b.samples, 0);
    cr_expect(strstr(b.why, "lies within this"), "%s", b.why);
    char line[200];
    device_util_format(&b, line, sizeof line);
    cr_expect(!strncmp(line, "gpu n/a (", 9), "%s", line);
}

/* Busy for half the epoch: utilisation (a kernel was running) about 50,
 * SM activity the busy share x FAKE_NVML_SM_ACTIVE, occupancy x
 * FAKE_NVML_OCCUPANCY — side by side, as the time line says. */
Test(nvml_window, sm_activity_beside_utilisation)
{
    setenv("FAKE_NVML_SM_ACTIVE", "0.3", 1);
    setenv("FAKE_NVML_OCCUPANCY", "0.1", 1);
    gpu_monitor *m = gpu_monitor_create(bus, FAKE_NVML_LIB, 20);
    window w;
    begin(m, &w);
    busy_ms(300);
    nap_ms(300);
    device_util u = end(m, &w);
    gpu_monitor_free(m);
    double busy = fake_timeline_busy_ms(w.v0, w.v1) / (w.v1 - w.v0);
    cr_assert(u.available, "%s", u.why);
    cr_assert(u.sm_available, "%s", u.sm_why);
    cr_expect(busy > 0.4 && busy < 0.6, "busy share %.2f", busy);
    cr_expect(fabs(u.util_avg - 100 * busy) < 12, "utilisation %.1f, busy %.1f%%", u.util_avg,
              100 * busy);
    cr_expect(fabs(u.sm_util - 30 * busy) < 1.5, "SM %.2f, expected %.2f", u.sm_util, 30 * busy);
    cr_expect(fabs(u.sm_occ - 10 * busy) < 0.5, "occupancy %.2f, expected %.2f", u.sm_occ,
              10 * busy);
    cr_expect_lt(u.sm_util, u.util_avg / 2, "a kernel ran vs how much of the chip worked");
}

/* No GPM on the device: SM activity n/a with the reason, utilisation still there */
Test(nvml_window, no_gpm_is_na)
{
    setenv("FAKE_NVML_GPM", "0", 1);
    gpu_monitor *m = gpu_monitor_create(bus, FAKE_NVML_LIB, 20);
    window w;
    begin(m, &w);
    busy_ms(200);
    device_util u = end(m, &w);
    gpu_monitor_free(m);
    cr_expect(!u.sm_available);
    cr_expect(strstr(u.sm_why, "no GPM"), "%s", u.sm_why);
    cr_expect(u.available, "%s", u.why);
}

/* No timestamped samples (a vGPU): the current rate polled instead, said
 * as such (windowed 0) */
Test(nvml_window, no_samples_falls_back_to_polling)
{
    setenv("FAKE_NVML_SAMPLES", "0", 1);
    gpu_monitor *m = gpu_monitor_create(bus, FAKE_NVML_LIB, 20);
    window w;
    begin(m, &w);
    busy_ms(300);
    device_util u = end(m, &w);
    gpu_monitor_free(m);
    cr_assert(u.available, "%s", u.why);
    cr_expect(!u.windowed);
    cr_expect_geq(u.samples, 2, "polled every 20 ms: %d", u.samples);
}

/* This process's memory is what it allocated + its context, not the
 * device's (other processes' memory beside it). */
Test(nvml_window, process_memory_is_ours_not_the_devices)
{
    setenv("FAKE_NVML_CONTEXT_MB", "300", 1);
    setenv("FAKE_NVML_OTHER_MB", "1000", 1);
    void *big;
    cr_assert_eq(cudaMalloc(&big, 64u << 20), cudaSuccess);
    gpu_monitor *m = gpu_monitor_create(bus, FAKE_NVML_LIB, 20);
    window w;
    begin(m, &w);
    busy_ms(100);
    device_util u = end(m, &w);
    gpu_monitor_free(m);
    cudaFree(big);
    unsigned long long mine = (64ull << 20) + 64 + (300ull << 20);
    cr_expect_eq(u.proc_mem, mine, "process %llu, expected %llu (%s)",
                 (unsigned long long)u.proc_mem, mine, u.proc_why);
    cr_expect_eq(u.mem_used, mine + (1000ull << 20), "the device's, every process");
}

/* ---- the train program on the fake, NVML in timeline mode */

static char *dir, *fm_train;

static void e2e_setup(void)
{
    dir = tmpdir_make();
    char *fm = make_fashion_subset(dir, 192);
    fm_train = path_join(fm, "train.csv");
    free(fm);
}

static void e2e_teardown(void)
{
    free(fm_train);
    tmpdir_remove(dir);
}

TestSuite(nvml_window_e2e, .init = e2e_setup, .fini = e2e_teardown);

/* The epoch records carry this process's memory (gpu_proc_mb: the fake's
 * allocations + the 300 MB context knob, not the device's 1000 MB more),
 * the device's apart (gpu_dev_mem_mb), the samples counted and SM
 * activity; the table shows sm%/occ and gpu_MB. */
Test(nvml_window_e2e, epoch_records_carry_process_memory_and_sm)
{
    char bin[1024];
    snprintf(bin, sizeof bin, "%s/build/fakecuda/train", source_root());
    char *j = path_join(dir, "nvml.json");
    char *env[] = {"TRAIN_NVML_LIB=" FAKE_NVML_LIB, "FAKE_NVML=timeline",
                   "FAKECUDA_REALTIME=1",           "FAKECUDA_COST=kernel_us=2000",
                   "FAKE_NVML_PERIOD_MS=20",        "FAKE_NVML_CONTEXT_MB=300",
                   "FAKE_NVML_OTHER_MB=1000",       NULL};
    char *argv[] = {bin,  "--model", "probe", "--epochs", "2", "--batch",
                    "32", "--json",  j,       fm_train,   NULL};
    run_result r;
    run_argv(argv, env, 240, &r);
    cr_assert_eq(r.status, 0, "stdout:\n%s\nstderr:\n%s", r.out, r.err);
    cr_expect(!strstr(r.err, "fakecuda:") && !strstr(r.err, "fakenvml:"), "%s", r.err);
    cr_expect(strstr(r.out, "sm%/occ") && strstr(r.out, "gpu_MB"), "%s", r.out);
    char proc[4][JSON_VALUE_MAX], devm[4][JSON_VALUE_MAX], n[4][JSON_VALUE_MAX],
        sm[4][JSON_VALUE_MAX], util[4][JSON_VALUE_MAX];
    cr_assert_eq(json_epoch_values(j, "gpu_proc_mb", proc, 4), 2, "%s", r.out);
    cr_assert_eq(json_epoch_values(j, "gpu_dev_mem_mb", devm, 4), 2);
    cr_assert_eq(json_epoch_values(j, "gpu_util_samples", n, 4), 2);
    cr_assert_eq(json_epoch_values(j, "gpu_sm_pct", sm, 4), 2);
    cr_assert_eq(json_epoch_values(j, "gpu_util_avg", util, 4), 2);
    for (int i = 0; i < 2; i++) {
        double p = strtod(proc[i], NULL), d = strtod(devm[i], NULL);
        cr_expect(p > 300 && p < 400, "epoch %d: process %s MB (context 300 + allocations)", i + 1,
                  proc[i]);
        cr_expect(fabs(d - p - 1000) < 0.01, "epoch %d: device %s MB = process %s + 1000", i + 1,
                  devm[i], proc[i]);
        cr_expect(strcmp(n[i], "null") && strtod(n[i], NULL) >= 1, "epoch %d: %s samples", i + 1,
                  n[i]);
        cr_expect(strcmp(sm[i], "null") && strtod(sm[i], NULL) > 0, "epoch %d: sm %s", i + 1,
                  sm[i]);
        cr_expect(strcmp(util[i], "null"), "epoch %d: utilisation %s", i + 1, util[i]);
    }
    cr_expect(!strstr(r.err, "sm%/occ n/a"), "SM activity was there: %s", r.err);
    run_free(&r);
    /* without GPM: sm%/occ n/a, and why, said once (utilisation still there) */
    char *env2[] = {"TRAIN_NVML_LIB=" FAKE_NVML_LIB,
                    "FAKE_NVML=timeline",
                    "FAKECUDA_REALTIME=1",
                    "FAKECUDA_COST=kernel_us=2000",
                    "FAKE_NVML_PERIOD_MS=20",
                    "FAKE_NVML_GPM=0",
                    NULL};
    run_argv(argv, env2, 240, &r);
    cr_assert_eq(r.status, 0, "stderr:\n%s", r.err);
    const char *say = strstr(r.err, "train: sm%/occ n/a in epoch 1 (no GPM");
    cr_expect(say, "%s", r.err);
    cr_expect(!say || !strstr(say + strlen("train: sm%/occ n/a"), "sm%/occ n/a"), "said once: %s",
              r.err);
    run_free(&r);
    free(j);
}

/* The loop fetches the next epoch's first batch before this epoch's line
 * (--pin --non-blocking: results one step late), so the next window opens
 * while this one is still open. Each epoch still gets its own samples and
 * SM activity (on the H100 every epoch after the first read n/a: the
 * second start was dropped and the stop after it had nothing), and on the
 * fake utilisation follows the compute engine's busy share. */
Test(nvml_window_e2e, epochs_fetched_ahead_each_get_their_own_figures)
{
    char bin[1024];
    snprintf(bin, sizeof bin, "%s/build/fakecuda/train", source_root());
    char *j = path_join(dir, "ahead.json");
    char *env[] = {"TRAIN_NVML_LIB=" FAKE_NVML_LIB, "FAKE_NVML=timeline",     "FAKECUDA_REALTIME=1",
                   "FAKECUDA_COST=kernel_us=2000",  "FAKE_NVML_PERIOD_MS=20", NULL};
    char *argv[] = {bin,       "--model",    "probe", "--epochs",       "3",
                    "--batch", "32",         "--pin", "--non-blocking", "--workers",
                    "2",       "--prefetch", "2",     "--json",         j,
                    fm_train,  NULL};
    run_result r;
    run_argv(argv, env, 240, &r);
    cr_assert_eq(r.status, 0, "stdout:\n%s\nstderr:\n%s", r.out, r.err);
    char util[4][JSON_VALUE_MAX], sm[4][JSON_VALUE_MAX], busy[4][JSON_VALUE_MAX];
    cr_assert_eq(json_epoch_values(j, "gpu_util_avg", util, 4), 3, "%s", r.out);
    cr_assert_eq(json_epoch_values(j, "gpu_sm_pct", sm, 4), 3);
    cr_assert_eq(json_epoch_values(j, "gpu_busy_pct", busy, 4), 3);
    for (int i = 0; i < 3; i++) {
        cr_expect(strcmp(util[i], "null"), "epoch %d: utilisation n/a:\n%s%s", i + 1, r.out, r.err);
        cr_expect(strcmp(sm[i], "null"), "epoch %d: SM activity n/a:\n%s%s", i + 1, r.out, r.err);
        if (strcmp(util[i], "null") && strcmp(busy[i], "null"))
            cr_expect(fabs(strtod(util[i], NULL) - strtod(busy[i], NULL)) < 20,
                      "epoch %d: utilisation %s against the compute engine's %s", i + 1, util[i],
                      busy[i]);
    }
    run_free(&r);
    free(j);
}
