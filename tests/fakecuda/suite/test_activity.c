/* test_activity.c — busy%, h2d% and ovl% from device activity records
 * (cuda/activity.c over the fake's CUPTI, tests/fakecuda/runtime/cupti.c), each
 * checked against the fake clock's own schedule (clock.c: the truth):
 *
 *   - a launch-bound step (launches far dearer than kernels): the step's
 *     event span says the device was busy nearly all the time, the kernels
 *     say about a quarter — busy must be the kernels;
 *   - E3's four runs (pin x non-blocking) of the whole program: busy, copy
 *     busy and overlap seconds of the epoch equal the clock's compute,
 *     host-to-device and overlap time;
 *   - --trace: the device spans are the clock's operations, one per kernel
 *     (named) and copy, on "compute" and "copy h2d".
 *
 * With the fake CUPTI on, the fake clock follows the program's clock (the
 * registered timestamp callback): simulated and measured seconds agree, so
 * the percentages mean something here (they do not in test_overlap.c).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cupti_result.h>

#include "cuda/gpu.h"
#include "tests/fakecuda/runtime/fake.h"
#include "tests/support/gpu_test.h"
#include "tests/support/helpers.h"

/* ---------------------------------------------------------------- in-process */

static void setup(void)
{
    fake_reset();
    fake_set_cupti(1);
}

TestSuite(activity, .init = setup);

static backend *start(void)
{
    backend *be = gt_backend();
    char why[400] = "";
    cr_assert(be->ops->activity_start && be->ops->activity_take, "the GPU backend has activity");
    cr_assert_eq(be->ops->activity_start(be, why, sizeof why), 1, "activity_start: %s", why);
    return be;
}

static double clock_ms(void)
{
    fake_clock_stats c;
    fake_clock(&c);
    return c.host_ms;
}

/* 1e-3 relative or a microsecond, whichever is more */
static int near(double a, double b) { return fabs(a - b) <= fmax(1e-3 * fabs(b), 1e-3); }

enum { N = 256, STEPS = 20, OPS = 10 };

Test(activity, launch_bound_busy_is_the_kernels_not_the_step_span)
{
    cr_assert_eq(fake_set_cost("launch_us", 100), 0);
    cr_assert_eq(fake_set_cost("kernel_us", 30), 0);
    backend *be = start();
    const backend_ops *o = be->ops;
    float *d = o->alloc(be, N * sizeof(float)), tmp;
    o->download(be, &tmp, d, sizeof tmp); /* the allocation's memset has ended */
    double t0 = now_sec(), c0 = clock_ms();
    for (int s = 0; s < STEPS; s++) {
        o->busy_begin(be);
        for (int k = 0; k < OPS; k++)
            o->relu_forward(be, d, d, N);
        o->busy_end(be);
    }
    double span_s = o->busy_take(be); /* waits for the last step */
    double t1 = now_sec(), c1 = clock_ms();
    backend_activity a;
    cr_assert_eq(o->activity_take(be, t0, t1, &a), 1);
    fake_clock_window_stats w;
    fake_clock_window(c0, c1, &w);
    double wall = t1 - t0;
    cr_log_info("launch-bound: %.1f ms; step spans %.1f%%, kernels %.1f%% (clock %.1f%%)",
                1e3 * wall, 100 * span_s / wall, 100 * a.compute_s / wall,
                100 * w.compute_ms / 1e3 / wall);
    cr_expect(near(1e3 * a.compute_s, w.compute_ms), "busy %.4f ms, the clock's kernels %.4f ms",
              1e3 * a.compute_s, w.compute_ms);
    cr_expect(near(w.compute_ms, STEPS * OPS * 0.030), "the clock ran %d kernels of 30 us: %.4f ms",
              STEPS * OPS, w.compute_ms);
    /* the spans cover the launches (the host's own time between calls,
     * real time here, is outside them): most of the run, and several
     * times the kernels */
    cr_expect(span_s / wall > 0.5 && span_s > 2.5 * a.compute_s,
              "the step spans cover the launches: %.1f%% (kernels %.1f%%)", 100 * span_s / wall,
              100 * a.compute_s / wall);
    cr_expect(a.compute_s / wall < 0.35, "the kernels are under a third of the time: %.1f%%",
              100 * a.compute_s / wall);
    cr_expect_eq(a.h2d_s, 0.0);
    cr_expect_eq(a.overlap_s, 0.0);
    o->free(be, d);
    gt_done(be);
}

/* Copies on the copy stream under compute on the compute stream, from a
 * pinned or a pageable buffer: h2d and overlap as the clock has them,
 * however the two interleave; a window cut in the middle of the run
 * measures only its part, and what ran after it is measured by the next */
static void copies_under_compute(int pinned)
{
    cr_assert_eq(fake_set_cost("kernel_us", 50), 0);
    cr_assert_eq(fake_set_cost("h2d_gbps", 0.05), 0); /* 16 KB: 0.33 ms pinned */
    backend *be = start();
    const backend_ops *o = be->ops;
    enum { BYTES = 16384 };
    uint8_t *host = calloc(1, BYTES);
    errbuf e;
    if (pinned)
        cr_assert_eq(o->host_pin(be, host, BYTES, &e), 0, "%s", e.msg);
    uint8_t *dev[2] = {o->alloc(be, BYTES), o->alloc(be, BYTES)};
    float *d = o->alloc(be, N * sizeof(float));
    o->download(be, host, d, 4); /* the allocations' memsets have ended */
    double t0 = now_sec(), c0 = clock_ms(), tm = 0, cm = 0;
    for (int s = 0; s < 12; s++) {
        if (s == 6) {
            o->stage_done(be, (s - 1) % 2, 1);
            tm = now_sec(), cm = clock_ms();
        }
        o->stage_copy(be, s % 2, dev[s % 2], host, BYTES);
        if (s > 0)
            o->stage_wait(be, (s - 1) % 2);
        for (int k = 0; k < 6; k++)
            o->relu_forward(be, d, d, N);
        if (s > 0)
            o->stage_release(be, (s - 1) % 2);
    }
    (void)o->busy_take(be);
    o->stage_done(be, 0, 1), o->stage_done(be, 1, 1);
    o->download(be, host, dev[0], 4); /* everything before it has ended */
    double t1 = now_sec(), c1 = clock_ms();
    backend_activity a, b;
    cr_assert_eq(o->activity_take(be, t0, tm, &a), 1);
    cr_assert_eq(o->activity_take(be, tm, t1, &b), 1);
    fake_clock_window_stats wa, wb;
    fake_clock_window(c0, cm, &wa);
    fake_clock_window(cm, c1, &wb);
    cr_log_info(
        "%s: compute %.3f+%.3f ms, h2d %.3f+%.3f ms, overlap %.3f+%.3f ms (clock: %.3f+%.3f, "
        "%.3f+%.3f, %.3f+%.3f)",
        pinned ? "pinned" : "pageable", 1e3 * a.compute_s, 1e3 * b.compute_s, 1e3 * a.h2d_s,
        1e3 * b.h2d_s, 1e3 * a.overlap_s, 1e3 * b.overlap_s, wa.compute_ms, wb.compute_ms,
        wa.h2d_ms, wb.h2d_ms, wa.overlap_ms, wb.overlap_ms);
    const struct {
        const char *what;
        double got_s, truth_ms;
    } fig[] = {{"compute, first window", a.compute_s, wa.compute_ms},
               {"compute, second window", b.compute_s, wb.compute_ms},
               {"h2d, first window", a.h2d_s, wa.h2d_ms},
               {"h2d, second window", b.h2d_s, wb.h2d_ms},
               {"d2h, second window", b.d2h_s, wb.d2h_ms},
               {"overlap, first window", a.overlap_s, wa.overlap_ms},
               {"overlap, second window", b.overlap_s, wb.overlap_ms}};
    for (size_t i = 0; i < sizeof fig / sizeof *fig; i++)
        cr_expect(near(1e3 * fig[i].got_s, fig[i].truth_ms), "%s: %.4f ms, the clock %.4f ms",
                  fig[i].what, 1e3 * fig[i].got_s, fig[i].truth_ms);
    cr_expect(wa.h2d_ms > 1.0 && wb.h2d_ms > 1.0, "both windows copied");
    if (pinned)
        cr_expect(wa.overlap_ms > 0.5 * wa.h2d_ms, "pinned copies run under compute");
    o->free(be, d);
    o->free(be, dev[0]), o->free(be, dev[1]);
    if (pinned)
        o->host_unpin(be, host);
    free(host);
    gt_done(be);
}

Test(activity, pinned_copies_and_overlap_match_the_clock) { copies_under_compute(1); }

Test(activity, pageable_copies_and_overlap_match_the_clock) { copies_under_compute(0); }

/* records come late: only at a flush, and only for work that has ended
 * by then, as CUPTI promises no more */
Test(activity, records_arrive_only_for_work_that_ended)
{
    cr_assert_eq(fake_set_cost("kernel_us", 5000), 0);
    backend *be = start();
    const backend_ops *o = be->ops;
    float *d = o->alloc(be, N * sizeof(float)), tmp;
    o->download(be, &tmp, d, sizeof tmp);
    double t0 = now_sec();
    backend_activity a;
    cr_assert_eq(o->activity_take(be, 0, t0, &a), 1); /* what ran before */
    unsigned long before = fake_cupti_delivered();
    o->relu_forward(be, d, d, N); /* 5 ms on the device */
    cr_assert_eq(o->activity_take(be, t0, now_sec(), &a), 1);
    cr_expect_eq(fake_cupti_delivered(), before, "a running kernel has no record yet");
    cr_expect_eq(a.compute_s, 0.0);
    (void)o->busy_take(be);
    o->download(be, &tmp, d, sizeof tmp);
    double t1 = now_sec();
    cr_assert_eq(o->activity_take(be, t0, t1, &a), 1);
    cr_expect(fabs(a.compute_s - 0.005) < 1e-5, "the kernel, once ended: %.6f s", a.compute_s);
    o->free(be, d);
    gt_done(be);
}

/* a full buffer is handed over without a flush, from inside whatever
 * call filled it (CUPTI may do it from its own thread): those records
 * count like the rest */
Test(activity, full_buffers_arrive_without_a_flush)
{
    cr_assert_eq(fake_set_cost("kernel_us", 1), 0);
    cr_assert_eq(fake_set_cost("launch_us", 2), 0);
    backend *be = start();
    const backend_ops *o = be->ops;
    float *d = o->alloc(be, 16 * sizeof(float)), tmp;
    o->download(be, &tmp, d, sizeof tmp);
    double t0 = now_sec(), c0 = clock_ms();
    unsigned long before = fake_cupti_delivered();
    enum { LAUNCHES = 6000 }; /* more than a 1 MB buffer's kernel records */
    for (int i = 0; i < LAUNCHES; i++)
        o->relu_forward(be, d, d, 16);
    unsigned long early = fake_cupti_delivered() - before;
    o->download(be, &tmp, d, sizeof tmp);
    double t1 = now_sec(), c1 = clock_ms();
    backend_activity a;
    cr_assert_eq(o->activity_take(be, t0, t1, &a), 1);
    fake_clock_window_stats w;
    fake_clock_window(c0, c1, &w);
    cr_expect(early > 1000 && early < LAUNCHES, "%lu records arrived before any flush", early);
    cr_expect(near(1e3 * a.compute_s, w.compute_ms), "busy %.4f ms, the clock %.4f ms",
              1e3 * a.compute_s, w.compute_ms);
    o->free(be, d);
    gt_done(be);
}

/* the profiler refuses (no permission, another tool holds it): the
 * backend says why and the caller keeps the event spans */
Test(activity, a_refusing_profiler_is_said_not_fatal)
{
    backend *be = gt_backend();
    fake_fail_next("cuptiActivityEnable", CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);
    char why[400] = "";
    cr_expect_eq(be->ops->activity_start(be, why, sizeof why), 0);
    cr_expect(strstr(why, "cuptiActivityEnable") && strstr(why, "PRIVILEGES"), "%s", why);
    backend_activity a;
    cr_expect_eq(be->ops->activity_take(be, 0, 1, &a), 0);
    gt_done(be);
}

/* ---------------------------------------------------------------- the program */

static char *dir, *csv;
static char bin[1024];
enum { NIMG = 384, E2E_STEPS = NIMG / 16 };

static void e2e_setup(void)
{
    snprintf(bin, sizeof bin, "%s/build/fakecuda/train", source_root());
    dir = tmpdir_make();
    char *fm = make_fashion_subset(dir, NIMG);
    csv = path_join(fm, "train.csv");
    free(fm);
}

static void e2e_teardown(void)
{
    if (!dir)
        return;
    free(csv);
    tmpdir_remove(dir);
}

TestSuite(activity_e2e, .init = e2e_setup, .fini = e2e_teardown);

typedef struct truth {
    double compute_ms, h2d_ms, d2h_ms, overlap_ms;
} truth;

typedef struct figures {
    double epoch_s, busy, span, h2d, d2h, ovl; /* % of the epoch */
    char from[32];
} figures;

static double json_field(const char *line, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    cr_assert(p, "no %s in %s", key, line);
    p += strlen(pat);
    return strncmp(p, "null", 4) ? atof(p) : NAN;
}

/* one epoch of the probe model, batch 16, 2 workers, pin/nb as given, the
 * fake CUPTI on; the clock's totals and the epoch's figures */
static void run_e2e(const char *cost, const char *pin, const char *nb, const char *trace, truth *t,
                    figures *fg)
{
    char *cf = path_join(dir, "clock.txt"), *js = path_join(dir, "run.json");
    remove(cf);
    remove(js);
    char env_clock[1100];
    snprintf(env_clock, sizeof env_clock, "FAKECUDA_CLOCK=%s", cf);
    char *env[] = {env_clock, (char *)cost, "FAKECUDA_CUPTI=on",
                   "TRAIN_NVML_LIB=/nonexistent/libnvidia-ml.so.1", NULL};
    char *argv[] = {bin,  "--model",   "probe", "--epochs",  "1",        "--batch",
                    "16", "--workers", "2",     (char *)pin, (char *)nb, "--json",
                    js,   csv,         NULL,    NULL,        NULL};
    if (trace) {
        argv[13] = "--trace";
        argv[14] = (char *)trace;
        argv[15] = csv;
    }
    run_result r;
    run_argv(argv, env, 240, &r);
    cr_assert_eq(r.status, 0, "status %d\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
    cr_expect(!strstr(r.err, "fakecuda:"), "the fake saw misuse:\n%s", r.err);
    cr_expect(strstr(r.out, "gpu activity: CUPTI activity records"), "the header says so:\n%s",
              r.out);
    run_free(&r);
    FILE *f = fopen(cf, "r");
    cr_assert(f, "the fake wrote no clock to %s", cf);
    char key[32];
    double v;
    memset(t, 0, sizeof *t);
    while (fscanf(f, "%31s %lf", key, &v) == 2) {
        if (!strcmp(key, "compute_ms"))
            t->compute_ms = v;
        else if (!strcmp(key, "h2d_ms"))
            t->h2d_ms = v;
        else if (!strcmp(key, "d2h_ms"))
            t->d2h_ms = v;
        else if (!strcmp(key, "overlap_ms"))
            t->overlap_ms = v;
    }
    fclose(f);
    f = fopen(js, "r");
    cr_assert(f, "no %s", js);
    char line[8192];
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "\"record\":\"epoch\"")) {
            fg->epoch_s = json_field(line, "epoch_s");
            fg->busy = json_field(line, "gpu_busy_pct");
            fg->span = json_field(line, "gpu_span_pct");
            fg->h2d = json_field(line, "gpu_h2d_pct");
            fg->d2h = json_field(line, "gpu_d2h_pct");
            fg->ovl = json_field(line, "gpu_overlap_pct");
            const char *p = strstr(line, "\"gpu_busy_from\":\"");
            snprintf(fg->from, sizeof fg->from, "%.*s", p ? 8 : 0,
                     p ? p + strlen("\"gpu_busy_from\":\"") : "");
            found = 1;
        }
    fclose(f);
    cr_assert(found, "no epoch record in %s", js);
    free(cf);
    free(js);
}

/* an epoch's figure (percent of epoch_s) against the clock's total for the
 * whole run: the run's set-up (weights, plans) is outside the epoch, so
 * the epoch holds at most the total and, here, nearly all of it */
static void expect_epoch_share(const char *what, double pct, double epoch_s, double total_ms)
{
    double ms = pct / 100 * epoch_s * 1e3;
    cr_expect(ms <= total_ms * 1.001 + 1e-3 && ms >= 0.9 * total_ms,
              "%s: %.3f ms in the epoch, the clock's whole run %.3f ms", what, ms, total_ms);
}

#define COST_LAUNCH_BOUND "FAKECUDA_COST=kernel_us=20,launch_us=150,h2d_gbps=5"
#define COST_BALANCED "FAKECUDA_COST=kernel_us=80,h2d_gbps=0.0375,launch_us=2"

Test(activity_e2e, launch_bound_busy_is_the_kernels)
{
    truth t;
    figures fg;
    run_e2e(COST_LAUNCH_BOUND, "--pin", "--non-blocking", NULL, &t, &fg);
    cr_log_info("launch-bound: epoch %.3f s, span %.1f%%, busy %.1f%% (clock %.3f ms compute)",
                fg.epoch_s, fg.span, fg.busy, t.compute_ms);
    cr_expect_str_eq(fg.from, "activity");
    expect_epoch_share("busy", fg.busy, fg.epoch_s, t.compute_ms);
    cr_expect(fg.span > 2 * fg.busy, "the step span (%.1f%%) is not the kernels (%.1f%%)", fg.span,
              fg.busy);
}

static void e3(const char *pin, const char *nb)
{
    truth t;
    figures fg;
    run_e2e(COST_BALANCED, pin, nb, NULL, &t, &fg);
    cr_log_info("%s %s: epoch %.3f s; busy %.2f%% span %.2f%% h2d %.2f%% ovl %.2f%%; clock "
                "compute %.3f h2d %.3f overlap %.3f ms",
                pin, nb, fg.epoch_s, fg.busy, fg.span, fg.h2d, fg.ovl, t.compute_ms, t.h2d_ms,
                t.overlap_ms);
    cr_expect_str_eq(fg.from, "activity");
    expect_epoch_share("busy", fg.busy, fg.epoch_s, t.compute_ms);
    expect_epoch_share("h2d", fg.h2d, fg.epoch_s, t.h2d_ms);
    double ovl_ms = fg.ovl / 100 * fg.epoch_s * 1e3;
    cr_expect(fabs(ovl_ms - t.overlap_ms) <= 0.1 * t.overlap_ms + 0.05,
              "overlap: %.3f ms in the epoch, the clock %.3f ms", ovl_ms, t.overlap_ms);
}

Test(activity_e2e, e3_pinned_non_blocking) { e3("--pin", "--non-blocking"); }
Test(activity_e2e, e3_pinned_blocking) { e3("--pin", "--no-non-blocking"); }
Test(activity_e2e, e3_pageable_non_blocking) { e3("--pin=off", "--non-blocking"); }
Test(activity_e2e, e3_pageable_blocking) { e3("--pin=off", "--no-non-blocking"); }

/* --trace: the device's spans are the clock's operations — named kernels
 * on "compute", every staging copy on "copy h2d" — and add up to the
 * clock's busy time */
Test(activity_e2e, trace_device_spans_are_the_records)
{
    if (access("/usr/bin/python3", X_OK) != 0)
        cr_skip_test("no /usr/bin/python3 to parse the trace");
    char *tr = path_join(dir, "trace.json");
    truth t;
    figures fg;
    run_e2e(COST_BALANCED, "--pin", "--non-blocking", tr, &t, &fg);
    char want[256];
    snprintf(want, sizeof want, "%.6f %.6f", t.compute_ms, t.h2d_ms);
    static const char *py =
        "import json, sys\n"
        "ev = json.load(open(sys.argv[1]))['traceEvents']\n"
        "comp_ms, h2d_ms = map(float, sys.argv[2].split())\n"
        "procs = {e['pid']: e['args']['name'] for e in ev if e['ph'] == 'M' and e['name'] == "
        "'process_name'}\n"
        "tracks = {(e['pid'], e['tid']): e['args']['name'] for e in ev if e['ph'] == 'M' and "
        "e['name'] == 'thread_name'}\n"
        "dev = [e for e in ev if e['ph'] == 'X' and procs[e['pid']] == 'device']\n"
        "comp = [e for e in dev if tracks[(e['pid'], e['tid'])] == 'compute']\n"
        "h2d = [e for e in dev if tracks[(e['pid'], e['tid'])] == 'copy h2d']\n"
        "names = set(e['name'] for e in comp)\n"
        "assert 'cudnnConvolutionForward' in names, 'kernel names: %s' % sorted(names)\n"
        "assert len(h2d) >= 2 * int(sys.argv[3]), 'h2d spans: %d (labels and pixels per batch)' % "
        "len(h2d)\n"
        "sc = sum(e['dur'] for e in comp) / 1e3\n"
        "sh = sum(e['dur'] for e in h2d) / 1e3\n"
        "assert 0.9 * comp_ms <= sc <= comp_ms * 1.001 + 0.01, 'compute spans %.3f ms, clock "
        "%.3f' % (sc, comp_ms)\n"
        "assert 0.98 * h2d_ms <= sh <= h2d_ms * 1.001 + 0.01, 'h2d spans %.3f ms, clock %.3f' % "
        "(sh, h2d_ms)\n"
        "comp.sort(key=lambda e: e['ts'])\n"
        "assert all(a['ts'] + a['dur'] <= b['ts'] + 0.001 for a, b in zip(comp, comp[1:])), "
        "'compute spans overlap: one engine runs one at a time'\n"
        "print('ok', len(comp), len(h2d))\n";
    char *pyf = write_text(dir, "check.py", py);
    char steps[16];
    snprintf(steps, sizeof steps, "%d", E2E_STEPS);
    char *pargv[] = {"/usr/bin/python3", pyf, tr, want, steps, NULL};
    run_result r;
    run_argv(pargv, NULL, 60, &r);
    cr_expect_eq(r.status, 0, "the trace's device spans are not the clock's:\n%s%s", r.out, r.err);
    run_free(&r);
    free(pyf);
    free(tr);
}
