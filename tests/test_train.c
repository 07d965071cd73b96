/* test_train.c — the train binary end to end: real Fashion-MNIST PNGs and
 * E1-style JPEGs made by the tools, real forked workers, real signals. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/support/helpers.h"

static char *dir, *fm_train, *fm_test;

static void make_fashion(int n)
{
    char *fm = make_fashion_subset(dir, n);
    fm_train = path_join(fm, "train.csv");
    fm_test = path_join(fm, "test.csv");
    free(fm);
}

static void setup(void)
{
    dir = tmpdir_make();
    make_fashion(320);
}

static void teardown(void)
{
    spawn_kill_all();
    free(fm_train);
    free(fm_test);
    tmpdir_remove(dir);
}

TestSuite(train, .init = setup, .fini = teardown, .timeout = 240);

Test(train, workers_0_and_3_give_bit_identical_losses)
{
    run_result r;
    char *ja = path_join(dir, "a.json"), *jb = path_join(dir, "b.json");
    run_train(&r, "--workers", "0", "--epochs", "2", "--batch", "32", "--json", ja, fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "device: cpu"), "first line names the device: %s", r.out);
    run_free(&r);
    run_train(&r, "--workers", "3", "--prefetch", "3", "--epochs", "2", "--batch", "32", "--json",
              jb, fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    assert_same_losses(ja, jb, 2);
    free(ja);
    free(jb);
}

Test(train, preload_and_lazy_give_identical_losses)
{
    run_result r;
    char *ja = path_join(dir, "lazy.json"), *jb = path_join(dir, "pre.json");
    run_train(&r, "--mode", "lazy", "--workers", "2", "--batch", "32", "--json", ja, fm_train,
              NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run_train(&r, "--mode", "preload", "--workers", "2", "--batch", "32", "--json", jb, fm_train,
              NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "preload: decoded 320 samples"), "%s", r.out);
    run_free(&r);
    assert_same_losses(ja, jb, 1);
    free(ja);
    free(jb);
}

Test(train, json_records_carry_every_field)
{
    run_result r;
    char *j = path_join(dir, "r.json");
    run_train(&r, "--workers", "2", "--batch", "32", "--epochs", "2", "--warmup-epochs", "1",
              "--val", fm_test, "--json", j, fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    const char *keys[] = {
        "device",       "model",         "mode",      "workers",     "prefetch",
        "pin",          "non_blocking",  "batch",     "epoch",       "epoch_s",
        "images_per_s", "data_wait_pct", "copy_pct",  "compute_pct", "gpu_util_avg",
        "gpu_util_max", "loss",          "train_acc", "val_loss",    "val_acc",
        "rss_mb",       "pss_mb",        "pinned_mb", "skipped",     "cache",
        "cores",        "cpu_model",     "gpu_name",  "procs"};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        char v[8][JSON_VALUE_MAX];
        cr_assert_eq(json_epoch_values(j, keys[k], v, 8), 2, "%s", keys[k]);
    }
    char v[8][JSON_VALUE_MAX];
    json_epoch_values(j, "pss_mb", v, 8);
    cr_assert_gt(atof(v[1]), 1.0);
    json_epoch_values(j, "procs", v, 8);
    cr_assert_str_eq(v[1], "4", "main + supervisor + 2 workers measured");
    json_epoch_values(j, "val_acc", v, 8);
    cr_assert_gt(atof(v[1]), 0.2, "learns something in 2 epochs of 320 images");
    json_epoch_values(j, "gpu_util_avg", v, 8);
    cr_assert_str_eq(v[0], "null");
    json_epoch_values(j, "warmup", v, 8);
    cr_assert_str_eq(v[0], "true");
    cr_assert_str_eq(v[1], "false");
    size_t len;
    char *text = read_whole_file(j, &len, NULL);
    cr_assert(strstr(text, "\"record\":\"summary\""), "a summary record at the end");
    cr_assert(strstr(text, "\"epochs\":1,"), "the warm-up epoch is not counted: %s", text);
    free(text);
    free(j);
}

Test(train, bad_image_names_csv_line_and_exits_2)
{
    /* a real image first (for the size probe), then a text file named .png */
    char *src;
    cr_assert(asprintf(&src, "%s/fm/train/00000.png", dir) > 0);
    char *first = path_join(dir, "img/first.png");
    size_t len;
    char *bytes = read_whole_file(src, &len, NULL);
    free(write_file(dir, "img/first.png", bytes, len));
    free(bytes);
    free(write_text(dir, "img/fake.png", "this is not an image\n"));
    char *csv = write_text(dir, "bad.csv", "path,label\nimg/first.png,1\nimg/fake.png,2\n");
    run_result r;
    for (int w = 0; w <= 2; w += 2) {
        char ws[16];
        snprintf(ws, sizeof ws, "%d", w);
        run_train(&r, "--workers", ws, "--batch", "2", csv, NULL);
        cr_assert_eq(r.status, 2, "workers %d: %s", w, r.err);
        char *want;
        cr_assert(asprintf(&want, "%s:3: %s/img/fake.png: ", csv, dir) > 0);
        cr_assert(strstr(r.err, want), "want '%s' in: %s", want, r.err);
        free(want);
        /* and what to do about it, once */
        const char *hint = "--skip-bad goes on past such files";
        const char *at = strstr(r.err, hint);
        cr_assert(at && !strstr(at + 1, hint), "one hint in: %s", r.err);
        run_free(&r);
    }
    /* the first row's image bad (the size probe's): the same hint */
    char *first_bad = write_text(dir, "bad1.csv", "path,label\nimg/fake.png,2\nimg/first.png,1\n");
    run_train(&r, "--workers", "0", "--batch", "2", first_bad, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "img/fake.png: ") && strstr(r.err, "--skip-bad goes on past"), "%s",
              r.err);
    run_free(&r);
    free(first_bad);
    /* --skip-bad replaces it and counts it (no hint: it is in use) */
    run_train(&r, "--workers", "1", "--batch", "2", "--skip-bad", csv, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "    1 warm"), "one skipped sample in the epoch line: %s", r.out);
    cr_assert_null(strstr(r.err, "--skip-bad goes on"), "%s", r.err);
    run_free(&r);
    free(csv);
    free(first);
    free(src);
}

/* Every descendant of pid (children, grandchildren). */
static int descendants(int pid, int *out, int max)
{
    int n = 0, queue[256], qn = 0;
    queue[qn++] = pid;
    for (int q = 0; q < qn && n < max; q++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/task", queue[q]);
        DIR *d = opendir(path);
        if (!d)
            continue;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            char cp[300];
            snprintf(cp, sizeof cp, "/proc/%d/task/%s/children", queue[q], de->d_name);
            FILE *f = fopen(cp, "r");
            if (!f)
                continue;
            int c;
            while (fscanf(f, "%d", &c) == 1 && n < max && qn < 256) {
                out[n++] = c;
                queue[qn++] = c;
            }
            fclose(f);
        }
        closedir(d);
    }
    return n;
}

/* Start ./train in the background with stdout/stderr to files, in its own
 * process group, killed with the test (helpers.h: spawn_bg). */
static pid_t start_train(char *const argv[], const char *out, const char *err)
{
    return spawn_bg(argv, out, err);
}

static void wait_for_workers(pid_t pid, int want, int *pids, int *n)
{
    for (int t = 0; t < 3000; t++) {
        *n = descendants(pid, pids, 64);
        if (*n >= want)
            return;
        usleep(10000);
    }
    cr_assert_fail("only %d of %d loader processes appeared", *n, want);
}

Test(train, sigint_exits_130_and_leaves_no_process)
{
    char *out = path_join(dir, "o.txt"), *err = path_join(dir, "e.txt");
    char *argv[] = {(char *)train_bin(), "--workers", "3",      "--batch", "16", "--epochs", "50",
                    "--test-slow-step",  "0.02",      fm_train, NULL};
    pid_t pid = start_train(argv, out, err);
    int pids[64], n;
    wait_for_workers(pid, 4, pids, &n); /* supervisor + 3 workers */
    usleep(300000);
    kill(pid, SIGINT);
    int st = spawn_wait(pid, 60);
    cr_assert(WIFEXITED(st), "killed by a signal instead of exiting");
    cr_assert_eq(WEXITSTATUS(st), 130);
    for (int i = 0; i < n; i++)
        cr_assert(wait_process_gone(pids[i], 1), "loader process %d outlived train", pids[i]);
    char *e = read_whole_file(err, NULL, NULL);
    cr_assert(strstr(e, "interrupted"), "%s", e);
    free(e);
    free(out);
    free(err);
}

Test(train, killed_worker_is_named_exit_3_and_respawn_recovers)
{
    char *out = path_join(dir, "o.txt"), *err = path_join(dir, "e.txt");
    char *ja = path_join(dir, "ref.json"), *jb = path_join(dir, "resp.json");
    for (int respawn = 0; respawn < 2; respawn++) {
        char *argv[] = {(char *)train_bin(),
                        "--workers",
                        "2",
                        "--batch",
                        "16",
                        "--epochs",
                        "2",
                        "--test-slow-load",
                        "0.005",
                        "--json",
                        jb,
                        fm_train,
                        respawn ? "--respawn" : NULL,
                        NULL};
        pid_t pid = start_train(argv, out, err);
        int pids[64], n;
        wait_for_workers(pid, 3, pids, &n);
        /* a few batches in, long before the end: 640 samples at 5 ms over
         * 2 workers take 1.6 s (at 2 ms and a kill 0.4 s in, a quiet CI
         * machine once finished the run first, and nothing was said) */
        usleep(150000);
        /* pids[0] is the supervisor, pids[1..] its workers */
        kill(pids[n - 1], SIGKILL);
        int st = spawn_wait(pid, 120);
        char *e = read_whole_file(err, NULL, NULL);
        char want[96];
        snprintf(want, sizeof want, "(pid %d) was killed by signal 9 (Killed)", pids[n - 1]);
        cr_assert(strstr(e, want), "want '%s' in: %s", want, e);
        if (!respawn) {
            cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 3, "status %d: %s", WEXITSTATUS(st), e);
            cr_assert(strstr(e, "--respawn replaces dead workers"), "%s", e);
        } else {
            cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", WEXITSTATUS(st), e);
        }
        free(e);
    }
    run_result r;
    run_train(&r, "--workers", "0", "--batch", "16", "--epochs", "2", "--json", ja, fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    assert_same_losses(ja, jb, 2);
    free(out);
    free(err);
    free(ja);
    free(jb);
}

Test(train, resume_is_bit_exact)
{
    run_result r;
    char *c1 = path_join(dir, "straight.ckpt"), *c2 = path_join(dir, "resumed.ckpt");
    char *ja = path_join(dir, "a.json"), *jb = path_join(dir, "b.json");
    /* a constant lr: cosine and step schedules depend on --epochs, which a
     * shorter first leg changes */
    run_train(&r, "--epochs", "2", "--batch", "32", "--lr-schedule", "const", "--save", c1,
              "--json", ja, fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run_train(&r, "--epochs", "1", "--batch", "32", "--lr-schedule", "const", "--save", c2,
              fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run_train(&r, "--epochs", "2", "--batch", "32", "--lr-schedule", "const", "--resume", c2,
              "--save", c2, "--json", jb, fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    char va[4][JSON_VALUE_MAX], vb[4][JSON_VALUE_MAX];
    cr_assert_eq(json_epoch_values(ja, "loss", va, 4), 2);
    cr_assert_eq(json_epoch_values(jb, "loss", vb, 4), 1);
    cr_assert_str_eq(va[1], vb[0], "epoch 2 loss straight %s vs resumed %s", va[1], vb[0]);
    size_t la, lb;
    char *a = read_whole_file(c1, &la, NULL), *b = read_whole_file(c2, &lb, NULL);
    cr_assert(a && b && la == lb && memcmp(a, b, la) == 0,
              "the final checkpoints (parameters, momentum, counters) are identical");
    free(a);
    free(b);
    /* a damaged checkpoint is refused */
    FILE *f = fopen(c2, "r+b");
    fseek(f, (long)lb / 2, SEEK_SET);
    fputc(0x5a, f);
    fclose(f);
    run_train(&r, "--epochs", "3", "--resume", c2, fm_train, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, c2), "names the file: %s", r.err);
    run_free(&r);
    free(c1);
    free(c2);
    free(ja);
    free(jb);
}

Test(train, nan_loss_stops_with_status_4)
{
    run_result r;
    run_train(&r, "--lr", "1e9", "--batch", "32", fm_train, NULL);
    cr_assert_eq(r.status, 4, "%s", r.err);
    cr_assert(strstr(r.err, "epoch 1 batch ") && strstr(r.err, ": loss is ") &&
                  strstr(r.err, " (lr "),
              "%s", r.err);
    run_free(&r);
}

Test(train, preload_cache_reused_invalidated_and_checked)
{
    run_result r;
    char *cache = path_join(dir, "fm.cache");
    run_train(&r, "--mode", "preload", "--cache", cache, "--workers", "2", "--batch", "32",
              fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "does not exist: building it"), "%s", r.out);
    cr_assert(strstr(r.out, "preload: decoded 320 samples"), "%s", r.out);
    run_free(&r);
    run_train(&r, "--mode", "preload", "--cache", cache, "--workers", "2", "--batch", "32",
              fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "matches: reusing it, nothing to decode"), "%s", r.out);
    cr_assert(!strstr(r.out, "preload: decoded"), "%s", r.out);
    run_free(&r);
    /* other transforms: rebuilt */
    run_train(&r, "--mode", "preload", "--cache", cache, "--crop", "24", "--batch", "32", fm_train,
              NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(
        strstr(
            r.out,
            "was built for other transforms (--resize, --crop, --channels, --decode): rebuilding"),
        "%s", r.out);
    run_free(&r);
    /* truncated */
    struct stat st;
    stat(cache, &st);
    cr_assert_eq(truncate(cache, st.st_size - 100), 0);
    run_train(&r, "--mode", "preload", "--cache", cache, "--crop", "24", "--batch", "32", fm_train,
              NULL);
    cr_assert(strstr(r.out, "has the wrong size (truncated?): rebuilding"), "%s", r.out);
    run_free(&r);
    /* one flipped byte in the pixels (just past the 4096-byte header), then
     * one in the file stamps at the end: each has its own checksum */
    for (int where = 0; where < 2; where++) {
        FILE *f = fopen(cache, "r+b");
        fseek(f, where ? -10 : 4096 + 10, where ? SEEK_END : SEEK_SET);
        int ch = fgetc(f);
        fseek(f, where ? -10 : 4096 + 10, where ? SEEK_END : SEEK_SET);
        fputc(ch ^ 0xff, f);
        fclose(f);
        run_train(&r, "--mode", "preload", "--cache", cache, "--crop", "24", "--batch", "32",
                  fm_train, NULL);
        cr_assert(strstr(r.out, "corrupt (checksum mismatch): rebuilding"), "%s: %s",
                  where ? "stamps" : "pixels", r.out);
        if (!where)
            run_free(&r);
    }
    run_free(&r);
    /* a changed CSV (one row fewer): rebuilt */
    size_t clen;
    char *text = read_whole_file(fm_train, &clen, NULL);
    *strrchr(text, '\n') = '\0';
    *(strrchr(text, '\n') + 1) = '\0';
    char *fewer = write_text(dir, "fm/fewer.csv", text);
    free(text);
    run_train(&r, "--mode", "preload", "--cache", cache, "--crop", "24", "--batch", "32", fewer,
              NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(
        strstr(r.out, "was built from another CSV (its content or --root changed): rebuilding"),
        "%s", r.out);
    cr_assert(strstr(r.out, "preload: decoded 319 samples"), "%s", r.out);
    run_free(&r);
    /* another --decode makes other base pixels: rebuilt */
    run_train(&r, "--mode", "preload", "--cache", cache, "--crop", "24", "--batch", "32",
              "--decode", "exact", fewer, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(
        strstr(
            r.out,
            "was built for other transforms (--resize, --crop, --channels, --decode): rebuilding"),
        "%s", r.out);
    run_free(&r);
    free(fewer);
    /* no temporary file left behind */
    DIR *d = opendir(dir);
    struct dirent *de;
    while ((de = readdir(d)))
        cr_assert(!strstr(de->d_name, ".tmp."), "left %s", de->d_name);
    closedir(d);
    free(cache);
}

Test(train, two_runs_building_one_cache_at_once)
{
    char *cache = path_join(dir, "shared.cache");
    char *o1 = path_join(dir, "o1"), *e1 = path_join(dir, "e1"), *o2 = path_join(dir, "o2"),
         *e2 = path_join(dir, "e2");
    char *argv[] = {
        (char *)train_bin(), "--mode", "preload",       "--cache", cache, "--workers", "1",
        "--batch",           "32",     "--no-progress", fm_train,  NULL};
    pid_t a = start_train(argv, o1, e1), b = start_train(argv, o2, e2);
    int sa = spawn_wait(a, 120), sb = spawn_wait(b, 120);
    cr_assert(WIFEXITED(sa) && WEXITSTATUS(sa) == 0 && WIFEXITED(sb) && WEXITSTATUS(sb) == 0);
    /* whichever rename came last, the file is complete and valid */
    run_result r;
    run_train(&r, "--mode", "preload", "--cache", cache, "--batch", "32", fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "matches: reusing it, nothing to decode"), "%s", r.out);
    run_free(&r);
    free(cache);
    free(o1);
    free(e1);
    free(o2);
    free(e2);
}

Test(train, memory_guard_refuses_preload)
{
    run_result r;
    run_train(&r, "--mode", "preload", "--mem-limit", "100K", fm_train, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err,
                     "preload needs 735.0 KB (320 samples of 3x28x28) but the limit is 100.0 "
                     "KB (--mem-limit"),
              "%s", r.err);
    cr_assert(strstr(r.err, "use --mode lazy, or --cache FILE"), "%s", r.err);
    run_free(&r);
}

Test(train, sweep_runs_each_configuration_and_summarises)
{
    run_result r;
    char *j = path_join(dir, "s.json");
    run_train(&r, "--workers", "0,1", "--batch", "32", "--json", j, fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "== configuration 1/2: mode lazy, workers 0"), "%s", r.out);
    cr_assert(strstr(r.out, "== configuration 2/2: mode lazy, workers 1"), "%s", r.out);
    char *s = strstr(r.out, "summary (median epoch time");
    cr_assert_not_null(s, "%s", r.out);
    cr_assert(strstr(s, "1.00x"), "the first row is the baseline: %s", s);
    cr_assert_eq(count_lines(s), 4, "title, header, two rows: %s", s);
    size_t len;
    char *text = read_whole_file(j, &len, NULL);
    int summaries = 0;
    for (char *p = text; (p = strstr(p, "\"record\":\"summary\"")); p++)
        summaries++;
    cr_assert_eq(summaries, 2);
    free(text);
    run_free(&r);

    /* and tools/plot turns it into charts */
    char *plot = path_join(source_root(), "tools/plot");
    char *argv[] = {plot, j, "--out", dir, NULL};
    run_argv(argv, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    const char *pngs[] = {"s_epoch_time.png", "s_utilisation.png"}; /* named after s.json */
    for (int i = 0; i < 2; i++) {
        char *p = path_join(dir, pngs[i]);
        size_t png_len;
        char *png = read_whole_file(p, &png_len, NULL);
        cr_assert(png && png_len > 1000 && memcmp(png, "\x89PNG", 4) == 0, "%s is not a PNG", p);
        free(png);
        free(p);
    }
    free(plot);
    free(j);
}

Test(train, cpu_only_device_and_pin_messages)
{
    run_result r;
    run_train(&r, "--device", "cuda", "--batch", "32", fm_train, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "cuda"), "%s", r.err);
    run_free(&r);
    run_train(&r, "--workers", "4", "--pin", "--prefetch", "2", "--batch", "32", fm_train, NULL);
    cr_assert_eq(r.status, 0, "the user's own command line works: %s", r.err);
    cr_assert(strstr(r.err, "--pin has no effect without a GPU"), "%s", r.err);
    run_free(&r);
    /* this build has no GPU backend: the selftest says so, exit 2 */
    run_train(&r, "--selftest", NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.out, "built without CUDA; nothing to test"), "%s%s", r.out, r.err);
    run_free(&r);
}

Test(train, arguments_are_checked)
{
    run_result r;
    run_train(&r, "--workers", "x", fm_train, NULL);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "--workers: 'x' is not an integer in 0..64"), "%s", r.err);
    run_free(&r);
    run_train(&r, "--pin=maybe", fm_train, NULL);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "--pin: 'maybe' is not on or off"), "%s", r.err);
    run_free(&r);
    run_train(&r, "--frobnicate", fm_train, NULL);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "unknown option '--frobnicate'"), "%s", r.err);
    run_free(&r);
    run_train(&r, "--help", NULL);
    cr_assert_eq(r.status, 0);
    cr_assert(strstr(r.out, "--workers") && strstr(r.out, "--non-blocking"), "%s", r.out);
    run_free(&r);
    run_train(&r, "--model", "list", NULL);
    cr_assert_eq(r.status, 0);
    cr_assert(strstr(r.out, "lenet") && strstr(r.out, "probe") && strstr(r.out, "convnet"), "%s",
              r.out);
    cr_assert(strstr(r.out, "\n            cpu convs: gemm/gemm/gemm-t"), "%s", r.out);
    run_free(&r);
    /* "--check decode" (a space, not '='): the value read as a second CSV,
     * and the fix said */
    run_train(&r, "--check", "decode", fm_train, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "--check takes its value after '=': --check=decode"), "%s", r.err);
    run_free(&r);
    /* --model list for a data set that cannot be read: bad input (2), the
     * file named, as training would say */
    char *bad = write_text(dir, "list-bad.csv", "path,label\nno/such.png,0\nalso.png,x\n");
    run_train(&r, "--model", "list", bad, NULL);
    cr_expect_eq(r.status, 2, "%s", r.err);
    cr_expect(strstr(r.err, bad), "%s", r.err);
    run_free(&r);
    free(bad);
}
