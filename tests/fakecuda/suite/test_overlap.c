/* test_overlap.c — the whole train program (build/fakecuda/train) timed on
 * the fake's virtual clock (clock.c), to check what --pin and
 * --non-blocking promise rather than what the code happens to do:
 *
 *   - pinned + non-blocking: batch i+1's copy runs while step i computes,
 *     so the simulated run takes about max(copy, compute), not the sum;
 *   - blocking copies: the sum;
 *   - pageable + non-blocking: every copy holds the host, so at least the
 *     copies back to back at the pageable rate (and the run says so);
 *   - in steady state no host wait leaves the device idle (the fake counts
 *     a wait that ends with the compute engine out of work as a stall):
 *     losses and predictions come back a step late, never by waiting for
 *     the step just enqueued; event waits sleep (cudaEventBlockingSync).
 *
 * The cost model is set so that one batch's copy costs about as much as one
 * step's compute (FAKECUDA_COST), which is where overlap matters most.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/helpers.h"

static char *dir, *csv;
static char bin[1024];

enum { NIMG = 192, BATCH = 16, STEPS = NIMG / BATCH };

static void setup(void)
{
    snprintf(bin, sizeof bin, "%s/build/fakecuda/train", source_root());
    dir = tmpdir_make();
    char *fm = make_fashion_subset(dir, NIMG);
    csv = path_join(fm, "train.csv");
    free(fm);
}

static void teardown(void)
{
    if (!dir)
        return;
    free(csv);
    tmpdir_remove(dir);
}

TestSuite(overlap, .init = setup, .fini = teardown);

typedef struct clock_run {
    double host_ms, compute_ms, h2d_ms, d2h_ms;
    int host_syncs, launches, spin_waits, stall_syncs;
    char out[4096], err[4096];
} clock_run;

#define COST_BALANCED "FAKECUDA_COST=kernel_us=80,h2d_gbps=0.0375,launch_us=2"

/* `epochs` of the probe model at batch 16 with 2 workers; pin/nb as given,
 * costs `cost` (FAKECUDA_COST=...), --json to `json` unless NULL */
static void run_clocked_with(clock_run *c, int epochs, const char *pin, const char *nb,
                             const char *cost, const char *json);

static void run_clocked(clock_run *c, int epochs, const char *pin, const char *nb)
{
    run_clocked_with(c, epochs, pin, nb, COST_BALANCED, NULL);
}

static void run_clocked_with(clock_run *c, int epochs, const char *pin, const char *nb,
                             const char *cost, const char *json)
{
    char *cf = path_join(dir, "clock.txt");
    remove(cf);
    char env_clock[1100], ep[8];
    snprintf(env_clock, sizeof env_clock, "FAKECUDA_CLOCK=%s", cf);
    snprintf(ep, sizeof ep, "%d", epochs);
    /* a batch of 16 Fashion-MNIST images copies in about 1 ms at 0.0375 GB/s;
     * the probe model's operations a step at 80 us take about as long */
    char *env[] = {env_clock, (char *)cost, "TRAIN_NVML_LIB=/nonexistent/libnvidia-ml.so.1", NULL};
    char *argv[] = {bin, "--model",   "probe",    "--epochs", ep,   "--batch", "16", "--workers",
                    "2", (char *)pin, (char *)nb, csv,        NULL, NULL,      NULL};
    if (json) {
        argv[11] = "--json";
        argv[12] = (char *)json;
        argv[13] = csv;
    }
    run_result r;
    run_argv(argv, env, 240, &r);
    cr_assert_eq(r.status, 0, "status %d\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
    cr_expect(!strstr(r.err, "fakecuda:"), "the fake saw misuse:\n%s", r.err);
    snprintf(c->out, sizeof c->out, "%s", r.out);
    snprintf(c->err, sizeof c->err, "%s", r.err);
    run_free(&r);
    FILE *f = fopen(cf, "r");
    cr_assert(f, "the fake wrote no clock to %s", cf);
    char key[32];
    double v;
    while (fscanf(f, "%31s %lf", key, &v) == 2) {
        if (!strcmp(key, "host_ms"))
            c->host_ms = v;
        else if (!strcmp(key, "compute_ms"))
            c->compute_ms = v;
        else if (!strcmp(key, "h2d_ms"))
            c->h2d_ms = v;
        else if (!strcmp(key, "d2h_ms"))
            c->d2h_ms = v;
        else if (!strcmp(key, "host_syncs"))
            c->host_syncs = (int)v;
        else if (!strcmp(key, "launches"))
            c->launches = (int)v;
        else if (!strcmp(key, "spin_waits"))
            c->spin_waits = (int)v;
        else if (!strcmp(key, "stall_syncs"))
            c->stall_syncs = (int)v;
    }
    fclose(f);
    free(cf);
    cr_log_info("%s %s, %d epoch(s): simulated %.2f ms; compute %.2f, h2d %.2f, d2h %.2f ms; "
                "%d host syncs (%d stalling), %d spinning waits, %d launches",
                pin, nb, epochs, c->host_ms, c->compute_ms, c->h2d_ms, c->d2h_ms, c->host_syncs,
                c->stall_syncs, c->spin_waits, c->launches);
}

static double maxd(double a, double b) { return a > b ? a : b; }

Test(overlap, pinned_non_blocking_takes_about_max_of_copy_and_compute)
{
    clock_run c;
    run_clocked(&c, 1, "--pin", "--non-blocking");
    double mx = maxd(c.compute_ms, c.h2d_ms), sum = c.compute_ms + c.h2d_ms + c.d2h_ms;
    cr_expect(c.h2d_ms > 0.5 * c.compute_ms && c.h2d_ms < 2 * c.compute_ms,
              "the cost model puts copy (%.2f ms) near compute (%.2f ms)", c.h2d_ms, c.compute_ms);
    cr_expect(c.host_ms < mx + 0.3 * (sum - mx),
              "copies overlap compute: simulated %.2f ms, max(copy, compute) %.2f, sum %.2f",
              c.host_ms, mx, sum);
}

Test(overlap, blocking_copies_take_the_sum)
{
    clock_run c;
    run_clocked(&c, 1, "--pin", "--no-non-blocking");
    double sum = c.compute_ms + c.h2d_ms;
    cr_expect(c.host_ms >= 0.95 * sum, "blocking: simulated %.2f ms, copy + compute %.2f",
              c.host_ms, sum);
}

/* CUDA holds the host in cudaMemcpyAsync from pageable memory while the
 * bytes are staged (the fake: until the half-speed copy ends). Compute
 * already enqueued still runs meanwhile, so the run takes at least every
 * copy back to back, and is slower than the pinned run by the copies'
 * slowdown; the run says why */
Test(overlap, pageable_non_blocking_blocks_the_host_as_cuda_does)
{
    clock_run c, pinned;
    run_clocked(&c, 1, "--pin=off", "--non-blocking");
    run_clocked(&pinned, 1, "--pin", "--non-blocking");
    cr_expect(c.host_ms >= 0.95 * c.h2d_ms, "pageable: simulated %.2f ms, the copies alone %.2f",
              c.host_ms, c.h2d_ms);
    cr_expect(c.host_ms >= 1.3 * pinned.host_ms, "pageable %.2f ms, pinned %.2f ms", c.host_ms,
              pinned.host_ms);
    cr_expect(strstr(c.out, "pageable") || strstr(c.err, "pageable"),
              "the run says that non-blocking copies from pageable memory block:\n%s\n%s", c.out,
              c.err);
}
/* The steady state of one more epoch: the second epoch of a two-epoch run
 * minus a one-epoch run, so set-up and tear-down cancel. The host may
 * sleep once per step (it is faster than the device, so something must
 * hold it back: the oldest step's results, or the oldest ring slot's
 * copy), but never so that the device runs dry: no step waits for its own
 * results, and the only stalls are the epoch's end (its losses and busy
 * time) */
Test(overlap, no_step_stalls_the_device_in_steady_state)
{
    /* counted from real threads: on a loaded machine one run in several
     * gets an extra wait at set-up or tear-down that the difference does
     * not cancel; a defect shows in every run, so two tries */
    clock_run one, two;
    int per_epoch = 0, stalls = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        run_clocked(&one, 1, "--pin", "--non-blocking");
        run_clocked(&two, 2, "--pin", "--non-blocking");
        per_epoch = two.host_syncs - one.host_syncs;
        stalls = two.stall_syncs - one.stall_syncs;
        cr_log_info("one more epoch: %.2f ms simulated, %d host waits, %d stalling",
                    two.host_ms - one.host_ms, per_epoch, stalls);
        if (stalls <= 1 && per_epoch <= STEPS + 2 && two.spin_waits == 0)
            break;
    }
    cr_expect(stalls <= 1,
              "%d host waits left the device idle in a %d-step epoch (bound: 1, at "
              "the epoch's end)",
              stalls, STEPS);
    cr_expect(per_epoch <= STEPS + 2, "%d host synchronisations in a %d-step epoch", per_epoch,
              STEPS);
    cr_expect_eq(two.spin_waits, 0, "%d event waits spun a core (no cudaEventBlockingSync)",
                 two.spin_waits);
}

/* the busy seconds of epoch `epoch` in a --json file: gpu_busy_pct of
 * epoch_s */
static double busy_of_epoch(const char *json, int epoch)
{
    FILE *f = fopen(json, "r");
    cr_assert(f, "no %s", json);
    char line[8192], want[32];
    snprintf(want, sizeof want, "\"epoch\":%d,", epoch);
    double busy = -1;
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, "\"record\":\"epoch\"") || !strstr(line, want))
            continue;
        char *t = strstr(line, "\"epoch_s\":"), *b = strstr(line, "\"gpu_busy_pct\":");
        cr_assert(t && b, "%s", line);
        busy = atof(b + strlen("\"gpu_busy_pct\":")) / 100 * atof(t + strlen("\"epoch_s\":"));
    }
    fclose(f);
    cr_assert(busy >= 0, "no epoch %d record with a busy time in %s", epoch, json);
    return busy;
}

/* busy% is the device's own time on the step's work, read from events:
 * on the fake, one epoch's busy seconds equal the simulated time the
 * compute engine worked in that epoch (plus the results' read-back, which
 * is on the compute stream), however long the epoch took. Copies cost
 * three times the compute here, so the compute stream waits for every
 * batch: a busy time that counted the waits, or the step's span on the
 * host, would come out about three times too large. */
Test(overlap, busy_time_is_the_simulated_device_time)
{
    const char *cost = "FAKECUDA_COST=kernel_us=80,h2d_gbps=0.0125,launch_us=2";
    char *j1 = path_join(dir, "busy1.json"), *j2 = path_join(dir, "busy2.json");
    clock_run one, two;
    run_clocked_with(&one, 1, "--pin", "--non-blocking", cost, j1);
    run_clocked_with(&two, 2, "--pin", "--non-blocking", cost, j2);
    double device_ms = (two.compute_ms - one.compute_ms) + (two.d2h_ms - one.d2h_ms);
    double busy_ms = 1e3 * busy_of_epoch(j2, 2), wall_ms = two.host_ms - one.host_ms;
    cr_log_info("epoch 2: busy %.3f ms from events, compute engine %.3f ms, simulated epoch "
                "%.3f ms",
                busy_ms, device_ms, wall_ms);
    cr_expect(wall_ms > 2 * device_ms, "the copies dominate: %.3f ms for %.3f ms of compute",
              wall_ms, device_ms);
    cr_expect(fabs(busy_ms - device_ms) <= 0.03 * device_ms,
              "busy %.3f ms, the device computed %.3f ms", busy_ms, device_ms);
    free(j1);
    free(j2);
}

/* --trace on the fake shows the simulated device: a "device" process with
 * copy and compute tracks, and batch i+1's copy overlapping step i */
Test(overlap, the_trace_shows_copies_under_compute)
{
    if (access("/usr/bin/python3", X_OK) != 0)
        cr_skip_test("no /usr/bin/python3 to parse the trace");
    char *tr = path_join(dir, "trace.json");
    char *env[] = {"FAKECUDA_COST=kernel_us=80,h2d_gbps=0.0375,launch_us=2",
                   "TRAIN_NVML_LIB=/nonexistent/libnvidia-ml.so.1", NULL};
    char *argv[] = {bin, "--model", "probe",          "--epochs", "1", "--batch", "16", "--workers",
                    "2", "--pin",   "--non-blocking", "--trace",  tr,  csv,       NULL};
    run_result r;
    run_argv(argv, env, 240, &r);
    cr_assert_eq(r.status, 0, "status %d\n%s\n%s", r.status, r.out, r.err);
    run_free(&r);
    static const char *py =
        "import json, sys\n"
        "ev = json.load(open(sys.argv[1]))['traceEvents']\n"
        "procs = {e['pid']: e['args']['name'] for e in ev if e['ph'] == 'M' and e['name'] == "
        "'process_name'}\n"
        "tracks = {(e['pid'], e['tid']): e['args']['name'] for e in ev if e['ph'] == 'M' and "
        "e['name'] == 'thread_name'}\n"
        "dev = [e for e in ev if e['ph'] == 'X' and procs[e['pid']] == 'device']\n"
        "copy = [e for e in dev if tracks[(e['pid'], e['tid'])] == 'copy']\n"
        "comp = [e for e in dev if tracks[(e['pid'], e['tid'])] == 'compute']\n"
        "assert len(comp) == 12, 'compute spans: %d' % len(comp)\n"
        "assert len(copy) == 24, 'copy spans: %d (labels and pixels per batch)' % len(copy)\n"
        "big = [c for c in copy if c['dur'] > 100]\n"
        "under = [c for c in big if any(s['ts'] < c['ts'] + c['dur'] and c['ts'] < s['ts'] + "
        "s['dur'] for s in comp)]\n"
        "assert len(under) >= 10, 'only %d of %d batch copies overlap a step' % (len(under), "
        "len(big))\n"
        "print('ok', len(under))\n";
    char *pyf = write_text(dir, "check.py", py);
    char *pargv[] = {"/usr/bin/python3", pyf, tr, NULL};
    run_argv(pargv, NULL, 60, &r);
    cr_expect_eq(r.status, 0, "the trace does not show the overlap:\n%s%s", r.out, r.err);
    run_free(&r);
    free(pyf);
    free(tr);
}
