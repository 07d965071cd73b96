/* test_train_e2e.c — the whole train program on the GPU, as a real process
 * on a small real Fashion-MNIST subset (tools/fashion-mnist), against the
 * CPU binary on the same data.
 *
 * In run-fakecuda the program is build/fakecuda/train: every source of
 * build/asan/train plus cuda/ on the fake runtime, under ASan + UBSan, so a
 * sanitizer report, a leak, or misuse the fake saw ("fakecuda:" on stderr,
 * including device memory or streams still alive at exit) fails the test.
 * In run-gpu it is build/cuda/train, and every test skips ("no CUDA
 * device") where there is none.
 *
 * Checked: the first line names the GPU; --pin page-locks the ring (pinned
 * MB > 0 in the epoch line and the JSON) and --pin=off does not;
 * --non-blocking on and off; each combination's per-epoch losses match the
 * CPU binary's (--device cpu) within TWIN_RTOL_TRAIN; 0 and 2 workers give
 * bit-identical losses on the fake (which is deterministic); eager copies on
 * the fake change nothing; validation and preload go through the GPU too;
 * missing NVML gives n/a and one stderr note, a working one numbers;
 * --selftest passes.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/gpu.h"
#include "nn/twin.h"
#include "tests/support/helpers.h"

static char *dir, *fm_train, *fm_test;
static char gpu_bin[1024];

#ifdef TRAIN_FAKECUDA
#define GPU_BIN "build/fakecuda/train"
#define GPU_NAME "Fake GPU (tests/fakecuda)"
#else
#define GPU_BIN "build/cuda/train"
#define GPU_NAME ""
#endif

static void setup(void)
{
    gpu_info g;
    gpu_probe(0, &g);
    if (g.status != GPU_OK)
        cr_skip_test("no CUDA device (%s)", g.reason);
    const char *bin_env = getenv("TRAIN_GPU_BIN"); /* another build to test */
    if (bin_env)
        snprintf(gpu_bin, sizeof gpu_bin, "%s", bin_env);
    else
        snprintf(gpu_bin, sizeof gpu_bin, "%s/%s", source_root(), GPU_BIN);
    dir = tmpdir_make();
    char *fm = make_fashion_subset(dir, 192);
    fm_train = path_join(fm, "train.csv");
    fm_test = path_join(fm, "test.csv");
    free(fm);
}

static void teardown(void)
{
    if (!dir)
        return;
    free(fm_train);
    free(fm_test);
    tmpdir_remove(dir);
}

TestSuite(train_e2e, .init = setup, .fini = teardown);

/* Run `bin` with env (NULL-terminated, may be NULL) and the arguments after
 * it (NULL-terminated). */
static int run(run_result *r, const char *bin, char *const *env, ...)
{
    char *argv[64];
    int n = 0;
    argv[n++] = (char *)bin;
    va_list ap;
    va_start(ap, env);
    for (const char *a = va_arg(ap, const char *); a; a = va_arg(ap, const char *))
        argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    return run_argv(argv, env, 240, r);
}

/* Column `name` of the epoch lines in a run's stdout (the report's table). */
static int table_column(const char *out, const char *name, char vals[][48], int max)
{
    char *text = strdup(out), *save = NULL;
    int col = -1, n = 0;
    for (char *line = strtok_r(text, "\n", &save); line && n < max;
         line = strtok_r(NULL, "\n", &save)) {
        char *tok[40], *s2 = NULL;
        int nt = 0;
        for (char *t = strtok_r(line, " ", &s2); t && nt < 40; t = strtok_r(NULL, " ", &s2))
            tok[nt++] = t;
        if (nt > 0 && !strcmp(tok[0], "dev")) {
            for (int i = 0; i < nt; i++)
                if (!strcmp(tok[i], name))
                    col = i;
        } else if (col >= 0 && nt > col && (!strcmp(tok[0], "cuda") || !strcmp(tok[0], "cpu"))) {
            snprintf(vals[n++], 48, "%s", tok[col]);
        }
    }
    free(text);
    return n;
}

/* A GPU run went right: status 0, the device on the first line, nothing
 * from the fake, no sanitizer report (run_argv checks that). */
static void expect_gpu_run(const run_result *r)
{
    cr_assert_eq(r->status, 0, "status %d signal %d\nstdout:\n%s\nstderr:\n%s", r->status,
                 r->signal, r->out, r->err);
    cr_expect(!strncmp(r->out, "device: cuda:0 " GPU_NAME, strlen("device: cuda:0 " GPU_NAME)),
              "the first line names the GPU: %.200s", r->out);
    cr_expect(!strstr(r->err, "fakecuda:"), "the fake saw misuse or leaks:\n%s", r->err);
}

/* per-epoch losses of two runs within TWIN_RTOL_TRAIN; returns the largest
 * relative difference */
static double expect_losses_close(const char *ja, const char *jb, const char *key, int epochs)
{
    char va[8][JSON_VALUE_MAX], vb[8][JSON_VALUE_MAX];
    cr_assert_eq(json_epoch_values(ja, key, va, 8), epochs);
    cr_assert_eq(json_epoch_values(jb, key, vb, 8), epochs);
    double worst = 0;
    for (int i = 0; i < epochs; i++) {
        double a = strtod(va[i], NULL), b = strtod(vb[i], NULL);
        double rel = fabs(a - b) / fabs(b);
        cr_expect(rel <= TWIN_RTOL_TRAIN, "epoch %d %s: gpu %s, cpu %s (relative %.2g)", i + 1, key,
                  va[i], vb[i], rel);
        if (rel > worst)
            worst = rel;
    }
    return worst;
}

#ifdef TRAIN_FAKECUDA
static void expect_same_text(const char *ja, const char *jb, const char *key, int epochs)
{
    char va[8][JSON_VALUE_MAX], vb[8][JSON_VALUE_MAX];
    cr_assert_eq(json_epoch_values(ja, key, va, 8), epochs);
    cr_assert_eq(json_epoch_values(jb, key, vb, 8), epochs);
    for (int i = 0; i < epochs; i++)
        cr_expect_str_eq(va[i], vb[i], "epoch %d %s: %s vs %s", i + 1, key, va[i], vb[i]);
}
#endif

static char *json_path(const char *name)
{
    char f[80];
    snprintf(f, sizeof f, "%.64s.json", name);
    return path_join(dir, f);
}

/* NVML absent everywhere (also on a real machine): the figures are n/a */
static char *no_nvml[] = {"TRAIN_NVML_LIB=/nonexistent/libnvidia-ml.so.1", NULL};

/* probe model, 2 epochs of 192 images at batch 32, 2 workers; pin, nb as given */
static void pin_nb_case(const char *pin, const char *nb)
{
    char name[64];
    snprintf(name, sizeof name, "gpu-%s-%s", pin + 2, nb + 2);
    char *jg = json_path(name), *jc = json_path("cpu");
    run_result r;
    run(&r, train_bin(), NULL, "--device", "cpu", "--model", "probe", "--epochs", "2", "--batch",
        "32", "--workers", "2", "--json", jc, fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run(&r, gpu_bin, no_nvml, "--model", "probe", "--epochs", "2", "--batch", "32", "--workers",
        "2", pin, nb, "--json", jg, fm_train, NULL);
    expect_gpu_run(&r);
    int pinned = !strcmp(pin, "--pin");
    char pmb[8][JSON_VALUE_MAX], col[8][JSON_VALUE_MAX], tnb[8][JSON_VALUE_MAX],
        tpin[8][JSON_VALUE_MAX];
    cr_assert_eq(json_epoch_values(jg, "pinned_mb", pmb, 8), 2);
    cr_assert_eq(table_column(r.out, "pin_MB", col, 8), 2, "%s", r.out);
    cr_assert_eq(table_column(r.out, "nb", tnb, 8), 2);
    cr_assert_eq(table_column(r.out, "pin", tpin, 8), 2);
    for (int i = 0; i < 2; i++) {
        cr_expect_eq(strtod(pmb[i], NULL) > 0, pinned, "JSON pinned_mb %s with %s", pmb[i], pin);
        cr_expect_eq(strtod(col[i], NULL) > 0, pinned, "pin_MB column %s with %s", col[i], pin);
        cr_expect_str_eq(tpin[i], pinned ? "on" : "off");
        cr_expect_str_eq(tnb[i], strcmp(nb, "--non-blocking") ? "off" : "on");
    }
    double worst = expect_losses_close(jg, jc, "loss", 2);
    cr_log_info("probe %s %s: losses within %.2g of the CPU's", pin, nb, worst);
    run_free(&r);
    free(jg);
    free(jc);
}

Test(train_e2e, pin_off_blocking) { pin_nb_case("--pin=off", "--no-non-blocking"); }
Test(train_e2e, pin_off_non_blocking) { pin_nb_case("--pin=off", "--non-blocking"); }
Test(train_e2e, pin_on_blocking) { pin_nb_case("--pin", "--no-non-blocking"); }
Test(train_e2e, pin_on_non_blocking) { pin_nb_case("--pin", "--non-blocking"); }

/* 0 workers: one ring slot, so non-blocking cannot look ahead; 2 workers
 * look ahead. Same losses, to the bit on the fake. */
Test(train_e2e, workers_0_and_2_same_losses)
{
    char *j0 = json_path("w0"), *j2 = json_path("w2");
    run_result r;
    run(&r, gpu_bin, no_nvml, "--model", "probe", "--epochs", "2", "--batch", "32", "--workers",
        "0", "--pin", "--non-blocking", "--json", j0, fm_train, NULL);
    expect_gpu_run(&r);
    run_free(&r);
    run(&r, gpu_bin, no_nvml, "--model", "probe", "--epochs", "2", "--batch", "32", "--workers",
        "2", "--prefetch", "3", "--pin", "--non-blocking", "--json", j2, fm_train, NULL);
    expect_gpu_run(&r);
    run_free(&r);
#ifdef TRAIN_FAKECUDA
    expect_same_text(j0, j2, "loss", 2);
#else
    expect_losses_close(j0, j2, "loss", 2);
#endif
    free(j0);
    free(j2);
}

#ifdef TRAIN_FAKECUDA
/* A fast copy engine beside slow compute (the fake's eager copies): the
 * copies now finish before anyone waits, the numbers must not move. */
Test(train_e2e, eager_copies_change_nothing)
{
    char *jl = json_path("lazy"), *je = json_path("eager");
    char *eager[] = {"FAKECUDA_COPIES=eager", no_nvml[0], NULL};
    run_result r;
    run(&r, gpu_bin, no_nvml, "--model", "probe", "--epochs", "2", "--batch", "32", "--workers",
        "2", "--pin", "--non-blocking", "--json", jl, fm_train, NULL);
    expect_gpu_run(&r);
    run_free(&r);
    run(&r, gpu_bin, eager, "--model", "probe", "--epochs", "2", "--batch", "32", "--workers", "2",
        "--pin", "--non-blocking", "--json", je, fm_train, NULL);
    expect_gpu_run(&r);
    run_free(&r);
    expect_same_text(jl, je, "loss", 2);
    free(jl);
    free(je);
}
#endif

#ifdef TRAIN_FAKECUDA
/* A device that probes fine but whose cuDNN does not start: --device auto
 * trains on the CPU and says why; --device cuda refuses (exit 2). */
Test(train_e2e, auto_falls_back_to_the_cpu_when_the_gpu_backend_does_not_start)
{
    char *fail[] = {"FAKECUDA_CUDNN_CREATE=fail", no_nvml[0], NULL};
    run_result r;
    run(&r, gpu_bin, fail, "--model", "probe", "--epochs", "1", "--batch", "32", "--max-batches",
        "2", fm_train, NULL);
    cr_assert_eq(r.status, 0, "falls back: %s", r.err);
    cr_assert(strstr(r.out, "device: cpu (the GPU was found but its backend did not start:"), "%s",
              r.out);
    cr_assert(strstr(r.out, "cudnnCreate") || strstr(r.out, "CUDNN_STATUS"), "the reason: %s",
              r.out);
    cr_assert(strstr(r.out, "\ncpu "), "the epoch ran on the cpu: %s", r.out);
    run_free(&r);
    run(&r, gpu_bin, fail, "--device", "cuda", "--model", "probe", "--epochs", "1", fm_train, NULL);
    cr_assert_eq(r.status, 2, "--device cuda insists: %d %s", r.status, r.err);
    run_free(&r);
}
#endif

/* lenet on one channel with a validation set, pinned and non-blocking: the
 * training and the evaluation batches both cross to the GPU */
Test(train_e2e, lenet_with_validation_matches_the_cpu)
{
    char *jg = json_path("lenet-gpu"), *jc = json_path("lenet-cpu");
    run_result r;
    run(&r, train_bin(), NULL, "--device", "cpu", "--channels", "1", "--epochs", "2", "--batch",
        "32", "--max-batches", "3", "--workers", "2", "--val", fm_test, "--json", jc, fm_train,
        NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run(&r, gpu_bin, no_nvml, "--channels", "1", "--epochs", "2", "--batch", "32", "--max-batches",
        "3", "--workers", "2", "--pin", "--non-blocking", "--val", fm_test, "--json", jg, fm_train,
        NULL);
    expect_gpu_run(&r);
    cr_expect(strstr(r.out, "model lenet:"), "%s", r.out);
    double wl = expect_losses_close(jg, jc, "loss", 2),
           wv = expect_losses_close(jg, jc, "val_loss", 2);
    cr_log_info("lenet: losses within %.2g, validation losses within %.2g of the CPU's", wl, wv);
    run_free(&r);
    free(jg);
    free(jc);
}

/* --mode preload: the cache is built by the workers, then epochs read it */
static void preload_case(const char *nb)
{
    char *jg = json_path("pre-gpu"), *jc = json_path("pre-cpu");
    run_result r;
    run(&r, train_bin(), NULL, "--device", "cpu", "--model", "probe", "--mode", "preload",
        "--epochs", "2", "--batch", "32", "--workers", "2", "--json", jc, fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run(&r, gpu_bin, no_nvml, "--model", "probe", "--mode", "preload", "--epochs", "2", "--batch",
        "32", "--workers", "2", "--pin", nb, "--json", jg, fm_train, NULL);
    expect_gpu_run(&r);
    cr_expect(strstr(r.out, "preload: decoded 192 samples"), "%s", r.out);
    expect_losses_close(jg, jc, "loss", 2);
    run_free(&r);
    free(jg);
    free(jc);
}

Test(train_e2e, preload_blocking_matches_the_cpu) { preload_case("--no-non-blocking"); }

/* The first training batch waits for every preload build batch
 * (after_previous), so the look-ahead must not fetch it while a build batch
 * is still held: this run once stopped with "every ring slot is held". */
Test(train_e2e, preload_non_blocking_matches_the_cpu) { preload_case("--non-blocking"); }

/* NVML missing: every epoch says n/a, stderr says why exactly once */
Test(train_e2e, nvml_missing_is_na_with_one_note)
{
    char *j = json_path("nonvml");
    run_result r;
    run(&r, gpu_bin, no_nvml, "--model", "probe", "--epochs", "3", "--batch", "64", "--json", j,
        fm_train, NULL);
    expect_gpu_run(&r);
    char col[8][JSON_VALUE_MAX], js[8][JSON_VALUE_MAX];
    cr_assert_eq(table_column(r.out, "gpu%avg/mx", col, 8), 3, "%s", r.out);
    cr_assert_eq(json_epoch_values(j, "gpu_util_avg", js, 8), 3);
    for (int i = 0; i < 3; i++) {
        cr_expect_str_eq(col[i], "n/a");
        cr_expect_str_eq(js[i], "null");
    }
    const char *note = "train: gpu n/a (NVML not available (/nonexistent/libnvidia-ml.so.1))\n";
    const char *at = strstr(r.err, note);
    cr_expect(at != NULL, "stderr:\n%s", r.err);
    cr_expect(at && !strstr(at + strlen(note), "gpu n/a"), "the note comes once:\n%s", r.err);
    run_free(&r);
    free(j);
}

#ifdef TRAIN_FAKECUDA
/* NVML present (the scripted stand-in: samples 10, 20, 30, 40, 50, ...):
 * numbers in the table and the JSON, no note; NOT_SUPPORTED: n/a, one note */
Test(train_e2e, nvml_present_gives_utilisation)
{
    char *j = json_path("nvml");
    char *env[] = {"TRAIN_NVML_LIB=" FAKE_NVML_LIB, "FAKE_NVML=ok", NULL};
    run_result r;
    run(&r, gpu_bin, env, "--model", "probe", "--epochs", "2", "--batch", "64", "--json", j,
        fm_train, NULL);
    expect_gpu_run(&r);
    char col[8][JSON_VALUE_MAX], avg[8][JSON_VALUE_MAX], mx[8][JSON_VALUE_MAX];
    cr_assert_eq(table_column(r.out, "gpu%avg/mx", col, 8), 2, "%s", r.out);
    cr_assert_eq(json_epoch_values(j, "gpu_util_avg", avg, 8), 2);
    cr_assert_eq(json_epoch_values(j, "gpu_util_max", mx, 8), 2);
    for (int i = 0; i < 2; i++) {
        double a = strtod(avg[i], NULL), m = strtod(mx[i], NULL);
        cr_expect(a >= 10 && a <= 50 && m >= a && m <= 50, "epoch %d: avg %s max %s", i + 1, avg[i],
                  mx[i]);
        cr_expect(strchr(col[i], '/') && strcmp(col[i], "n/a"), "table shows %s", col[i]);
    }
    cr_expect(!strstr(r.err, "gpu n/a"), "%s", r.err);
    run_free(&r);
    char *ns[] = {"TRAIN_NVML_LIB=" FAKE_NVML_LIB, "FAKE_NVML=not_supported", NULL};
    run(&r, gpu_bin, ns, "--model", "probe", "--epochs", "2", "--batch", "64", fm_train, NULL);
    expect_gpu_run(&r);
    const char *ns_note = "train: gpu n/a (utilisation not supported on this device)\n";
    const char *at = strstr(r.err, ns_note);
    cr_expect(at && !strstr(at + strlen(ns_note), "gpu n/a"), "one note:\n%s", r.err);
    run_free(&r);
    free(j);
}
#endif

Test(train_e2e, selftest_passes)
{
    run_result r;
    run(&r, gpu_bin, NULL, "--selftest", NULL);
    cr_expect_eq(r.status, 0, "%s\n%s", r.out, r.err);
    cr_expect(
        !strncmp(r.out, "selftest: device 0: " GPU_NAME, strlen("selftest: device 0: " GPU_NAME)),
        "%s", r.out);
    cr_expect(strstr(r.out, "selftest: PASS: "), "%s", r.out);
    cr_expect(!strstr(r.err, "fakecuda:"), "%s", r.err);
    run_free(&r);
}
