/* test_hostile_report.c — what a run reports, as a new user and a full
 * disk meet it (issue 26): the --json file on a disk that fills (a
 * file-size limit in the child makes every write past it fail with EFBIG,
 * as ENOSPC would), the run record's transforms, the epoch line's shares
 * adding up to the epoch, the sweep table telling its rows apart, and
 * tools/plot's charts. Real processes on real JPEGs; each test failed
 * before its fix. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "app/report.h"
#include "common/util.h"
#include "nn/model.h"
#include "tests/support/helpers.h"
#include "tests/support/images.h"

static char *dir, *csv;

/* 12 JPEGs of h x w (two sizes, so a --resize is needed), labels k % 3 */
static void setup(void)
{
    dir = tmpdir_make();
    char text[1024] = "path,label\n";
    for (int k = 0; k < 12; k++) {
        int h = k % 2 ? 60 : 80, w = k % 2 ? 90 : 96;
        uint8_t *px = ti_picture(h, w, 3, (uint64_t)k + 1);
        char name[64];
        snprintf(name, sizeof name, "img/%d.jpg", k);
        free(ti_write_jpeg(dir, name, px, h, w, TJPF_RGB, TJSAMP_420, 90, 0));
        free(px);
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s,%d\n", name, k % 3);
    }
    csv = write_text(dir, "train.csv", text);
}

static void teardown(void)
{
    free(csv);
    tmpdir_remove(dir);
}

TestSuite(hostile_report, .init = setup, .fini = teardown);

/* argv of a small run: train --model probe --batch 4 --workers 0 --resize 32x32
 * --no-progress [extra...] csv, into argv (room for 48); returns the count */
static int small_run(char **argv, char *const extra[])
{
    int n = 0;
    const char *base[] = {train_bin(), "--model",  "probe", "--batch",       "4", "--workers",
                          "0",         "--resize", "32x32", "--no-progress", NULL};
    for (int i = 0; base[i]; i++)
        argv[n++] = (char *)base[i];
    for (int i = 0; extra && extra[i]; i++)
        argv[n++] = extra[i];
    argv[n++] = csv;
    argv[n] = NULL;
    return n;
}

/* the run under a file-size limit of `blocks` x 512 bytes, SIGXFSZ ignored
 * (so a write past it fails with EFBIG, as on a full disk) */
static void run_limited(run_result *r, int blocks, char *const extra[])
{
    char *inner[48], *argv[64], script[96];
    small_run(inner, extra);
    snprintf(script, sizeof script, "trap '' XFSZ; ulimit -f %d; exec \"$@\"", blocks);
    int n = 0;
    argv[n++] = "/bin/sh";
    argv[n++] = "-c";
    argv[n++] = script;
    argv[n++] = "sh";
    for (int i = 0; inner[i]; i++)
        argv[n++] = inner[i];
    argv[n] = NULL;
    run_argv(argv, NULL, 120, r);
}

/* --json on a full disk: said, naming the file and the reason, exit 1, the
 * table still printed, and no record left half-written */
Test(hostile_report, json_on_a_full_disk_is_said_and_leaves_no_partial_record)
{
    char *json = path_join(dir, "full.json");
    char *extra[] = {"--json", json, NULL};
    run_result r;
    /* the limit below the run record: nothing is written whole */
    run_limited(&r, 1, extra);
    cr_assert_eq(r.status, 1, "exit %d\n%s\n%s", r.status, r.out, r.err);
    cr_assert(strstr(r.err, json) && strstr(r.err, strerror(EFBIG)), "names file and reason: %s",
              r.err);
    cr_assert(strstr(r.out, "probe "), "the epoch line is still printed: %s", r.out);
    struct stat st;
    cr_assert(stat(json, &st) != 0 && errno == ENOENT, "a partial file is left (%lld bytes)",
              (long long)st.st_size);
    run_free(&r);

    /* a limit that the run record fits and the epoch record does not: the
     * complete record stays, the partial one goes */
    char *argv[48];
    small_run(argv, extra);
    run_argv(argv, NULL, 120, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    char *whole = read_whole_file(json, NULL, NULL);
    size_t first = strcspn(whole, "\n") + 1;
    int blocks = (int)(first / 512) + 1;
    cr_assert_lt((size_t)blocks * 512, strlen(whole), "the limit must cut the file");
    run_free(&r);
    unlink(json);
    run_limited(&r, blocks, extra);
    cr_assert_eq(r.status, 1, "exit %d\n%s", r.status, r.err);
    cr_assert(strstr(r.err, json) && strstr(r.err, strerror(EFBIG)), "%s", r.err);
    char *left = read_whole_file(json, NULL, NULL);
    cr_assert_not_null(left, "the complete run record is kept");
    cr_assert_eq(strlen(left), first, "only the run record, whole: %s", left);
    cr_assert(!strncmp(left, "{\"record\":\"run\",", 16) && left[first - 1] == '\n', "%s", left);
    free(left);
    free(whole);
    run_free(&r);
    free(json);
}

/* the first line of path (the run record), malloc'd */
static char *first_line(const char *path)
{
    char *text = read_whole_file(path, NULL, NULL);
    cr_assert_not_null(text, "%s", path);
    char *line = strndup(text, strcspn(text, "\n"));
    free(text);
    return line;
}

static void assert_has(const char *line, const char *const want[])
{
    for (int i = 0; want[i]; i++)
        cr_assert(strstr(line, want[i]), "no %s in\n%s", want[i], line);
}

/* The run record carries every transform and setting that changes the
 * batches, with the values given: the random-resized crop beside the
 * --resize/--crop that validation uses, colour jitter, normalisation,
 * decode, EXIF, shuffle, drop-last */
Test(hostile_report, run_record_has_every_transform_as_given)
{
    char *json = path_join(dir, "rec.json");
    run_result r;
    char *argv[48];
    char *extra[] = {"--json",       json,          "--random-resized-crop",
                     "64,0.5,0.9",   "--resize",    "72",
                     "--crop",       "64",          "--color-jitter",
                     "0.4,0.3,0.2",  "--normalize", "imagenet",
                     "--decode",     "exact",       "--exif",
                     "--no-shuffle", "--drop-last", NULL};
    small_run(argv, extra);
    argv[7] = "--hflip"; /* in place of small_run's --resize 32x32 */
    argv[8] = "0.5";
    run_argv(argv, NULL, 120, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    char *line = first_line(json);
    const char *want[] = {"\"resize_short\":72,",
                          "\"crop\":[64,64]",
                          "\"random_resized_crop\":{\"size\":[64,64],\"scale\":[0.5,0.9],"
                          "\"ratio\":[0.75,1.33333]}",
                          "\"color_jitter\":[0.4,0.3,0.2]",
                          "\"normalize\":{\"preset\":\"imagenet\",\"mean\":[0.485,0.456,0.406],"
                          "\"std\":[0.229,0.224,0.225]}",
                          "\"decode\":\"exact\"",
                          "\"exif\":true",
                          "\"shuffle\":false",
                          "\"drop_last\":true",
                          "\"input\":[3,64,64]",
                          NULL};
    assert_has(line, want);
    free(line);
    run_free(&r);

    /* --mean/--std as given (one value: every channel), nothing else on */
    char *extra2[] = {"--json", json, "--mean", "0.1,0.2,0.3", "--std", "0.25", NULL};
    small_run(argv, extra2);
    run_argv(argv, NULL, 120, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    line = first_line(json);
    const char *want2[] = {"\"resize\":[32,32]",
                           "\"random_resized_crop\":null",
                           "\"color_jitter\":null",
                           "\"normalize\":{\"preset\":null,\"mean\":[0.1,0.2,0.3],"
                           "\"std\":[0.25,0.25,0.25]}",
                           "\"decode\":\"auto\"",
                           "\"exif\":false",
                           "\"shuffle\":true",
                           "\"drop_last\":false",
                           NULL};
    assert_has(line, want2);
    free(line);
    run_free(&r);
    free(json);
}

/* the value of column `name` in the table line `row` under header `head`
 * (columns are space-separated and never empty) */
static double column(const char *head, const char *row, const char *name)
{
    char h[1024], w[1024], *hs, *rs;
    snprintf(h, sizeof h, "%s", head);
    snprintf(w, sizeof w, "%s", row);
    char *ht = strtok_r(h, " ", &hs), *rt = strtok_r(w, " ", &rs);
    for (; ht && rt; ht = strtok_r(NULL, " ", &hs), rt = strtok_r(NULL, " ", &rs))
        if (!strcmp(ht, name))
            return atof(rt);
    cr_assert_fail("no column %s in\n%s\n%s", name, head, row);
    return NAN;
}

static char *line_starting(const char *out, const char *prefix, int k)
{
    for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, prefix, strlen(prefix)) && k-- == 0)
            return strndup(p, strcspn(p, "\n"));
    cr_assert_fail("no line %d starting '%s' in:\n%s", k, prefix, out);
    return NULL;
}

/* wait% + copy% + comp% + other% account for the whole epoch, in the
 * table and in the JSON, on a run whose loader fills the ring ahead (most
 * of the epoch is the loader's, before the main process asks) */
Test(hostile_report, epoch_shares_add_up_to_the_epoch)
{
    char *json = path_join(dir, "shares.json");
    char *argv[48];
    char *extra[] = {"--json", json, "--epochs", "2", "--prefetch", "4", NULL};
    small_run(argv, extra);
    argv[6] = "2"; /* --workers 2 */
    run_result r;
    run_argv(argv, NULL, 120, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    char *head = line_starting(r.out, "dev ", 0);
    for (int k = 0; k < 2; k++) {
        char *row = line_starting(r.out, "cpu ", k);
        double sum = column(head, row, "wait%") + column(head, row, "copy%") +
                     column(head, row, "comp%") + column(head, row, "other%");
        cr_assert(fabs(sum - 100) <= 0.2, "epoch %d: the shares sum to %.2f:\n%s\n%s", k + 1, sum,
                  head, row);
        free(row);
    }
    const char *keys[] = {"data_wait_pct", "copy_pct", "compute_pct", "other_pct"};
    double sum[2] = {0, 0};
    for (int i = 0; i < 4; i++) {
        char v[2][JSON_VALUE_MAX];
        cr_assert_eq(json_epoch_values(json, keys[i], v, 2), 2, "%s", keys[i]);
        for (int k = 0; k < 2; k++)
            sum[k] += atof(v[k]);
    }
    for (int k = 0; k < 2; k++)
        cr_assert(fabs(sum[k] - 100) <= 1e-3, "epoch %d: JSON shares sum to %g", k + 1, sum[k]);
    free(head);
    run_free(&r);
    free(json);
}

static int count_of(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

/* A sweep over --pin on the CPU: its rows say what was asked beside what
 * ran, the "--pin has no effect" note comes once, every run record names
 * the sweep's command line, and --trace makes one timeline per
 * configuration */
Test(hostile_report, pin_sweep_on_the_cpu_tells_rows_apart_and_notes_once)
{
    char *json = path_join(dir, "sweep.json"), *tr = path_join(dir, "tl.json");
    char *argv[48];
    char *extra[] = {"--json", json, "--prefetch", "1,2", "--pin=off,on", "--trace", tr, NULL};
    small_run(argv, extra);
    run_result r;
    run_argv(argv, NULL, 120, &r);
    cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
    cr_assert_eq(count_of(r.err, "--pin has no effect"), 1, "the note once:\n%s", r.err);
    const char *table = strstr(r.out, "\nsummary ");
    cr_assert_not_null(table, "%s", r.out);
    cr_assert_eq(count_of(table, " on->off "), 2, "pin asked on, ran off:\n%s", table);
    int rows = 0;
    for (const char *p = table; (p = strstr(p, "\ncpu ")); p++)
        rows++;
    cr_assert_eq(rows, 4, "%s", table);
    /* the user's command line in every run record, not the configuration's */
    char v[4][JSON_VALUE_MAX];
    cr_assert_eq(json_record_values(json, "run", "argv", v, 4), 4);
    char *text = read_whole_file(json, NULL, NULL);
    cr_assert_eq(count_of(text, "\"argv\":[\""), 4, "%s", text);
    cr_assert_eq(count_of(text, "\"--pin=off,on\",\"--trace\""), 4, "the user's argv: %s", text);
    free(text);
    /* one timeline per configuration, none at the plain name */
    for (int k = 1; k <= 4; k++) {
        char name[32];
        snprintf(name, sizeof name, "tl-cfg%d.json", k);
        char *p = path_join(dir, name);
        char *t = read_whole_file(p, NULL, NULL);
        cr_assert(t && strstr(t, "traceEvents"), "%s: %s", p, t ? t : "missing");
        free(t);
        free(p);
    }
    cr_assert(access(tr, F_OK) != 0, "%s written as well", tr);
    run_free(&r);
    free(json);
    free(tr);
}

/* tools/plot names its charts after the JSON file, so two runs in one
 * folder keep their own; a run of one configuration plots (a point)
 * without gnuplot's warnings */
Test(hostile_report, plot_names_charts_after_the_json_and_draws_one_configuration)
{
    char *plot = path_join(source_root(), "tools/plot");
    const char *names[] = {"a", "b"};
    char *workers[] = {"0", "1"};
    for (int i = 0; i < 2; i++) {
        char file[16];
        snprintf(file, sizeof file, "%s.json", names[i]);
        char *json = path_join(dir, file);
        char *argv[48];
        char *extra[] = {"--json", json, NULL};
        small_run(argv, extra);
        argv[6] = workers[i];
        run_result r;
        run_argv(argv, NULL, 120, &r);
        cr_assert_eq(r.status, 0, "%s", r.err);
        run_free(&r);
        char *pargv[] = {plot, json, NULL};
        run_argv(pargv, NULL, 60, &r);
        cr_assert_eq(r.status, 0, "tools/plot: %s\n%s", r.out, r.err);
        cr_assert(!strcasestr(r.err, "warning"), "gnuplot warned:\n%s", r.err);
        run_free(&r);
        free(json);
    }
    /* both runs' charts, each a PNG of its own */
    char *png[2][2];
    size_t len[2][2];
    const char *kinds[] = {"epoch_time", "utilisation"};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) {
            char file[48];
            snprintf(file, sizeof file, "%s_%s.png", names[i], kinds[k]);
            char *p = path_join(dir, file);
            png[i][k] = read_whole_file(p, &len[i][k], NULL);
            cr_assert(png[i][k] && len[i][k] > 1000 && !memcmp(png[i][k], "\x89PNG", 4), "%s", p);
            free(p);
        }
    for (int k = 0; k < 2; k++) {
        cr_assert(len[0][k] != len[1][k] || memcmp(png[0][k], png[1][k], len[0][k]) != 0,
                  "a's and b's %s charts are the same picture", kinds[k]);
        free(png[0][k]);
        free(png[1][k]);
    }
    char *fixed = path_join(dir, "epoch_time.png");
    cr_assert(access(fixed, F_OK) != 0, "a fixed name is still written: %s", fixed);
    free(fixed);
    free(plot);
}

/* Ctrl-C says which signal stopped the run ("interrupted by SIGINT",
 * not strsignal's "interrupted by Interrupt") */
Test(hostile_report, interrupt_message_names_the_signal)
{
    char *argv[48];
    char *extra[] = {"--epochs", "200", "--test-slow-step", "0.02", NULL};
    small_run(argv, extra);
    char *out = path_join(dir, "int.out"), *err = path_join(dir, "int.err");
    pid_t pid = spawn_bg(argv, out, err);
    int seen = 0;
    for (int t = 0; t < 2000 && !seen; t++) { /* the first epoch line: the loop runs */
        char *o = read_whole_file(out, NULL, NULL);
        seen = o && strstr(o, "probe ");
        free(o);
        if (!seen)
            usleep(10000);
    }
    cr_assert(seen, "no epoch line");
    kill(pid, SIGINT);
    int st = spawn_wait(pid, 60);
    char *e = read_whole_file(err, NULL, NULL);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status %d: %s", st, e);
    cr_assert(strstr(e, "train: interrupted by SIGINT (Ctrl-C); loader stopped"), "%s", e);
    free(e);
    free(out);
    free(err);
}

/* The epoch table's columns line up under their names for every model
 * name (resnet18, the longest, pushed the rest of its line one place to
 * the right) */
Test(hostile_report, table_columns_line_up_for_every_model_name)
{
    for (const char *const *m = model_names(); *m; m++) {
        epoch_rec er;
        memset(&er, 0, sizeof er);
        er.cfg = (run_config){.device = "cpu", .model = *m, .mode = "preload", .batch = 64};
        er.epoch = 1;
        er.ranks = 1;
        er.cache = "warm";
        er.gpu_util_avg = er.gpu_busy_pct = er.val_acc = er.comm_pct = NAN;
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        uint64_t hide = report_columns(&er, 0);
        report_header(f, hide);
        report_epoch_line(f, &er, hide);
        fclose(f);
        const char *row = strchr(text, '\n') + 1;
        cr_assert_eq(strchr(text, '|') - text, strchr(row, '|') - row, "%s: misaligned\n%s", *m,
                     text);
        free(text);
    }
}

/* The data tools name themselves as the user runs them, tools/NAME here
 * and bin/NAME in the bundle: by the bare name, never "tools/..." */
Test(hostile_report, data_tools_usage_names_the_bare_tool)
{
    const char *bins[] = {"jpeg_set", "fashion_mnist"}, *names[] = {"jpeg-set", "fashion-mnist"};
    for (int i = 0; i < 2; i++) {
        char *bin = path_join(tools_dir(), bins[i]);
        char *argv[] = {bin, "--help", NULL};
        run_result r;
        run_argv(argv, NULL, 30, &r);
        cr_assert_eq(r.status, 0, "%s: %s", bin, r.err);
        char want[64];
        snprintf(want, sizeof want, "usage: %s [", names[i]);
        cr_assert(!strncmp(r.out, want, strlen(want)), "%s", r.out);
        run_free(&r);
        free(bin);
    }
}

/* ------------------------------------------------ tools/plot's series */

/* one summary record as train writes it (the configuration's keys, then
 * the measurements), epoch_s and compute_pct given */
static void summary_line(FILE *f, const char *mode, int workers, int prefetch, int batch,
                         double epoch_s, double compute, int status)
{
    fprintf(f,
            "{\"record\":\"summary\",\"device\":\"cpu\",\"model\":\"probe\",\"mode\":\"%s\","
            "\"workers\":%d,\"prefetch\":%d,\"pin\":false,\"non_blocking\":false,\"batch\":%d,"
            "\"epochs\":1,\"status\":%d,\"error\":null,\"epoch_s_median\":%g,"
            "\"images_per_s\":500,\"data_wait_pct\":%g,\"copy_pct\":0,\"compute_pct\":%g,"
            "\"other_pct\":0.5,\"gpu_util_avg\":null,\"final_loss\":2.3,\"final_train_acc\":0.1,"
            "\"final_val_acc\":null,\"pss_mb_max\":14,\"preload_build_s\":%s,\"cores\":2,"
            "\"cpu_model\":\"x\",\"gpu_name\":null}\n",
            mode, workers, prefetch, batch, status, epoch_s, 99.5 - compute, compute,
            strcmp(mode, "preload") ? "null" : "0.02");
}

/* tools/plot --data on the files: its output, malloc'd */
static char *plot_data(char *const jsons[])
{
    char *plot = path_join(source_root(), "tools/plot");
    char *argv[8] = {plot, "--data"};
    int n = 2;
    for (int i = 0; jsons[i]; i++)
        argv[n++] = jsons[i];
    argv[n] = NULL;
    run_result r;
    run_argv(argv, NULL, 30, &r);
    cr_assert_eq(r.status, 0, "tools/plot --data: %s\n%s", r.out, r.err);
    char *out = strdup(r.out);
    run_free(&r);
    free(plot);
    return out;
}

/* A sweep over batch x workers x mode is drawn as one line per mode AND
 * batch (the batch-8 and batch-16 points were averaged into one line
 * per mode), the legend naming the settings that vary; the same
 * configuration in a second file (a sweep run again) is one series, its
 * points the median; a failed configuration is left out */
Test(hostile_report, plot_draws_one_line_per_configuration_other_than_workers)
{
    char *a = path_join(dir, "bw.json"), *b = path_join(dir, "bw-again.json");
    FILE *f = fopen(a, "w");
    const char *modes[] = {"lazy", "preload"};
    for (int m = 0; m < 2; m++)
        for (int batch = 8; batch <= 16; batch += 8)
            for (int w = 0; w <= 1; w++) /* epoch_s: 0.1 lazy, + batch/1000, + w/100 */
                summary_line(f, modes[m], w, 2, batch, 0.1 * (m + 1) + batch / 1000.0 + w / 100.0,
                             50 + batch + w, 0);
    summary_line(f, "lazy", 2, 2, 8, 9.9, 1, 3); /* failed: status 3 */
    fclose(f);
    f = fopen(b, "w"); /* lazy b8 w0 twice more: median of 0.108, 0.3, 0.5 */
    summary_line(f, "lazy", 0, 2, 8, 0.3, 10, 0);
    summary_line(f, "lazy", 0, 2, 8, 0.5, 20, 0);
    fclose(f);
    char *files[] = {a, b, NULL};
    char *out = plot_data(files);
    const char *want = "# series\tworkers\tepoch_s\tcompute_pct\tgpu_util\twait_pct\tbuild_s\n"
                       "lazy b8\t0\t0.3\t20\tNaN\t79.5\tNaN\n"
                       "lazy b8\t1\t0.118\t59\tNaN\t40.5\tNaN\n"
                       "lazy b16\t0\t0.116\t66\tNaN\t33.5\tNaN\n"
                       "lazy b16\t1\t0.126\t67\tNaN\t32.5\tNaN\n"
                       "preload b8\t0\t0.208\t58\tNaN\t41.5\t0.02\n"
                       "preload b8\t1\t0.218\t59\tNaN\t40.5\t0.02\n"
                       "preload b16\t0\t0.216\t66\tNaN\t33.5\t0.02\n"
                       "preload b16\t1\t0.226\t67\tNaN\t32.5\t0.02\n";
    cr_assert_str_eq(out, want, "tools/plot --data gave\n%s", out);
    free(out);

    /* only prefetch varies (README's E3 axis): one line per prefetch */
    f = fopen(a, "w");
    for (int pf = 1; pf <= 4; pf *= 2)
        summary_line(f, "lazy", 2, pf, 100, 1.0 / pf, 50, 0);
    fclose(f);
    char *one[] = {a, NULL};
    out = plot_data(one);
    cr_assert_str_eq(out,
                     "# series\tworkers\tepoch_s\tcompute_pct\tgpu_util\twait_pct\tbuild_s\n"
                     "pf1\t2\t1\t50\tNaN\t49.5\tNaN\n"
                     "pf2\t2\t0.5\t50\tNaN\t49.5\tNaN\n"
                     "pf4\t2\t0.25\t50\tNaN\t49.5\tNaN\n",
                     "%s", out);
    free(out);
    free(a);
    free(b);
}

/* The same on a real sweep's JSON: one series per batch, each point the
 * summary's own epoch time, and the charts drawn without warnings */
Test(hostile_report, plot_splits_a_real_batch_sweep)
{
    char *json = path_join(dir, "real.json");
    char *argv[48];
    char *extra[] = {"--json", json, NULL};
    small_run(argv, extra);
    argv[4] = "4,6";
    argv[6] = "0,1";
    run_result r;
    run_argv(argv, NULL, 120, &r);
    cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
    run_free(&r);
    char t[4][JSON_VALUE_MAX], bt[4][JSON_VALUE_MAX], wk[4][JSON_VALUE_MAX];
    cr_assert_eq(json_record_values(json, "summary", "epoch_s_median", t, 4), 4);
    cr_assert_eq(json_record_values(json, "summary", "batch", bt, 4), 4);
    cr_assert_eq(json_record_values(json, "summary", "workers", wk, 4), 4);
    char *files[] = {json, NULL};
    char *out = plot_data(files);
    for (int i = 0; i < 4; i++) {
        char line[128];
        snprintf(line, sizeof line, "\nb%s\t%s\t%s\t", bt[i], wk[i], t[i]);
        cr_assert(strstr(out, line), "no '%s' in\n%s", line + 1, out);
    }
    cr_assert_eq(count_lines(out), 5, "%s", out);
    free(out);
    char *plot = path_join(source_root(), "tools/plot");
    char *pargv[] = {plot, json, NULL};
    run_argv(pargv, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "tools/plot: %s\n%s", r.out, r.err);
    cr_assert(!strcasestr(r.err, "warning"), "gnuplot warned:\n%s", r.err);
    run_free(&r);
    free(plot);
    free(json);
}

/* ------------------------------------------------ the loss column */

/* where the cell under header column `name` ends in `row`: the header's
 * right-aligned name ends at the same place */
static void assert_loss_fits(const char *text, double loss)
{
    const char *row = strchr(text, '\n') + 1;
    const char *h = strstr(text, " loss "), *a = strstr(text, "    acc ");
    cr_assert(h && a && a < row, "%s", text);
    long end = h + 5 - text, acc_end = a + 7 - text;
    /* the acc cell (0.125) ends under "acc": nothing pushed right */
    const char *cell_acc = strstr(row, " 0.125 ");
    cr_assert(cell_acc && cell_acc + 6 - row == acc_end, "loss %g: misaligned\n%s", loss, text);
    /* the loss cell ends under "loss" and reads back as the loss */
    const char *c = row + end;
    while (c > row && c[-1] != ' ')
        c--;
    cr_assert_eq(row[end], ' ', "loss %g: the cell runs past its column\n%s", loss, text);
    double back = strtod(c, NULL);
    if (isinf(loss))
        cr_assert(isinf(back), "%s", text);
    else
        cr_assert(fabs(back - loss) <= 0.05 * fabs(loss) + 5e-5, "loss %g printed as %.*s\n%s",
                  loss, (int)(row + end - c), c, text);
}

/* A loss blown up by a large --lr (7.9e+28 printed as 29 digits) or a
 * tiny one keeps its column: at most 7 characters, readable */
Test(hostile_report, table_loss_column_keeps_its_width_for_any_loss)
{
    const double losses[] = {2.302585,  0,       123.456789, 99999.7,  7.9354610488156241e28,
                             1.2345e-7, 0.00042, -3.25,      INFINITY, 3.4e38};
    for (size_t i = 0; i < sizeof losses / sizeof losses[0]; i++) {
        epoch_rec er;
        memset(&er, 0, sizeof er);
        er.cfg = (run_config){.device = "cpu", .model = "probe", .mode = "lazy", .batch = 4};
        er.epoch = 1;
        er.ranks = 1;
        er.cache = "warm";
        er.gpu_util_avg = er.gpu_busy_pct = er.val_acc = er.comm_pct = NAN;
        er.loss = losses[i];
        er.train_acc = 0.125;
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        uint64_t hide = report_columns(&er, 0);
        report_header(f, hide);
        report_epoch_line(f, &er, hide);
        fclose(f);
        assert_loss_fits(text, losses[i]);
        free(text);
    }
}

/* The same on a real run whose loss blows up (a large --lr, still
 * finite): every epoch line as long as the header up to the last
 * column, the JSON keeping every digit */
Test(hostile_report, huge_loss_keeps_the_table_aligned_in_a_real_run)
{
    char *json = path_join(dir, "lr.json");
    char *argv[48];
    char *extra[] = {"--json", json, "--lr", "5", "--epochs", "3", NULL};
    small_run(argv, extra);
    run_result r;
    run_argv(argv, NULL, 120, &r);
    cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
    char v[3][JSON_VALUE_MAX];
    cr_assert_eq(json_epoch_values(json, "loss", v, 3), 3, "%s", r.err);
    double last = atof(v[2]);
    cr_assert(last > 1e7 && isfinite(last), "the loss must blow up and stay finite: %s", v[2]);
    char *head = line_starting(r.out, "dev ", 0);
    long end = strstr(head, " loss ") + 5 - head, acc = strstr(head, " acc ") + 4 - head;
    for (int k = 0; k < 3; k++) {
        char *row = line_starting(r.out, "cpu ", k);
        cr_assert(row[end] == ' ' && row[acc] == ' ' && row[acc - 1] != ' ',
                  "epoch %d misaligned:\n%s\n%s", k + 1, head, row);
        const char *c = row + end;
        while (c[-1] != ' ')
            c--;
        double shown = strtod(c, NULL), exact = atof(v[k]);
        cr_assert(fabs(shown - exact) <= 0.05 * fabs(exact) + 5e-5, "epoch %d: %g shown for %s",
                  k + 1, shown, v[k]);
        free(row);
    }
    cr_assert(strlen(v[2]) > 12, "the JSON keeps full precision: %s", v[2]);
    free(head);
    run_free(&r);
    free(json);
}

/* --workers auto says how many batches each worker count really read: a
 * 12-image set at --batch 4 has 3, not the 30 it asks for (and the
 * probes read the run's batch size, not the model's default) */
Test(hostile_report, workers_auto_says_the_batches_it_read)
{
    char *argv[48];
    small_run(argv, NULL);
    argv[6] = "auto";
    run_result r;
    run_argv(argv, NULL, 120, &r);
    cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
    cr_assert(!strstr(r.out, "30 batches per count"), "%s", r.out);
    cr_assert(strstr(r.out, "(12 images in "), "%s", r.out);
    cr_assert(strstr(r.out, "; each count read 3 batches of 4, the whole epoch)"), "%s", r.out);
    run_free(&r);
}
