/* test_cache.c — the preload cache (--mode preload --cache FILE) as its
 * users meet it: several runs sharing one cache path with different
 * transforms, one still reading while another rebuilds; the path never
 * holding a partial file; and every input the cached pixels depend on
 * (resize, crop, channels, the CSV's rows) making a stale file rebuilt —
 * checked by the losses, which must equal a run without a cache file. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/support/helpers.h"

static char *dir, *fm, *csv;

static void setup(void)
{
    dir = tmpdir_make();
    fm = make_fashion_subset(dir, 64);
    csv = path_join(fm, "train.csv");
}

static void teardown(void)
{
    spawn_kill_all();
    free(csv);
    free(fm);
    tmpdir_remove(dir);
}

TestSuite(cache, .init = setup, .fini = teardown, .timeout = 120);

/* ./train ARGS... (NULL-terminated; the CSV is one of them) */
static int train(run_result *r, const char *first, ...)
{
    char *argv[64];
    int n = 0;
    argv[n++] = (char *)train_bin();
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a; a = va_arg(ap, const char *))
        argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    return run_argv(argv, NULL, 100, r);
}

static char *first_loss(const char *json)
{
    char v[8][JSON_VALUE_MAX];
    cr_assert_geq(json_epoch_values(json, "loss", v, 8), 1);
    return strdup(v[0]);
}

Test(cache, a_run_reading_the_cache_survives_another_run_rebuilding_it)
{
    /* run A reads the cache for six slow epochs; meanwhile run B, with
     * other transforms (a smaller sample), rebuilds the same path. A must
     * finish with exactly the losses of a run that has the cache to itself. */
    char *cache = path_join(dir, "shared.cache"), *ja = path_join(dir, "a.json"),
         *jr = path_join(dir, "ref.json"), *oa = path_join(dir, "a.out"),
         *ea = path_join(dir, "a.err");
    char *a_argv[] = {(char *)train_bin(),
                      "--mode",
                      "preload",
                      "--cache",
                      cache,
                      "--workers",
                      "2",
                      "--batch",
                      "16",
                      "--epochs",
                      "6",
                      "--lr-schedule",
                      "const",
                      "--test-slow-step",
                      "0.1",
                      "--no-progress",
                      "--json",
                      ja,
                      csv,
                      NULL};
    pid_t a = spawn_bg(a_argv, oa, ea);
    int started = 0;
    for (int t = 0; t < 2000 && !started; t++) {
        char *o = read_whole_file(oa, NULL, NULL);
        started = o && strstr(o, "|  1 ") != NULL; /* epoch 1 reported: reading the cache */
        free(o);
        if (!started)
            usleep(10000);
    }
    cr_assert(started, "run A never reported its first epoch");
    run_result r;
    train(&r, "--mode", "preload", "--cache", cache, "--resize", "32", "--crop", "24", "--batch",
          "16", "--max-batches", "1", "--no-progress", csv, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(
        strstr(
            r.out,
            "was built for other transforms (--resize, --crop, --channels, --decode): rebuilding"),
        "%s", r.out);
    run_free(&r);
    cr_assert(process_alive(a), "run A finished before run B rebuilt the cache: nothing tested");
    int st = spawn_wait(a, 100);
    char *e = read_whole_file(ea, NULL, NULL);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "run A: status 0x%x: %s", st, e);
    free(e);
    train(&r, "--mode", "preload", "--workers", "2", "--batch", "16", "--epochs", "6",
          "--lr-schedule", "const", "--no-progress", "--json", jr, csv, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    char va[8][JSON_VALUE_MAX], vr[8][JSON_VALUE_MAX];
    cr_assert_eq(json_epoch_values(ja, "loss", va, 8), 6);
    cr_assert_eq(json_epoch_values(jr, "loss", vr, 8), 6);
    for (int i = 0; i < 6; i++)
        cr_assert_str_eq(va[i], vr[i], "epoch %d: loss %s beside a rebuild, %s alone", i + 1, va[i],
                         vr[i]);
    /* the path now holds B's cache, complete */
    train(&r, "--mode", "preload", "--cache", cache, "--resize", "32", "--crop", "24", "--batch",
          "16", "--max-batches", "1", "--no-progress", csv, NULL);
    cr_assert(strstr(r.out, "matches: reusing it"), "%s", r.out);
    run_free(&r);
    free(cache);
    free(ja);
    free(jr);
    free(oa);
    free(ea);
}

/* How many of pid's mappings are of a file in folder other than name:
 * an unnamed build file (O_TMPFILE) shows as "folder/#INODE (deleted)". */
static int maps_other_file(pid_t pid, const char *folder, const char *name)
{
    char p[64], line[4096], want[1024];
    snprintf(p, sizeof p, "/proc/%d/maps", (int)pid);
    snprintf(want, sizeof want, "%s/", folder);
    FILE *f = fopen(p, "r");
    int n = 0;
    while (f && fgets(line, sizeof line, f)) {
        const char *at = strstr(line, want);
        n += at && strncmp(at + strlen(want), name, strlen(name)) != 0;
    }
    if (f)
        fclose(f);
    return n;
}

Test(cache, the_cache_path_never_holds_a_partial_file)
{
    /* a slow build (5 ms per sample) watched from outside: while it runs
     * the path is absent or a complete cache (its magic written last is
     * there), the data is written somewhere else in the same folder (a
     * file without a name, seen in the run's mappings, where the file
     * system has O_TMPFILE), and nothing but the cache is left afterwards */
    char *cdir = path_join(dir, "c"), *cache = path_join(dir, "c/fm.cache");
    char *out = path_join(dir, "b.out"), *err = path_join(dir, "b.err");
    mkdir(cdir, 0755);
    char *argv[] = {(char *)train_bin(),
                    "--mode",
                    "preload",
                    "--cache",
                    cache,
                    "--workers",
                    "1",
                    "--batch",
                    "16",
                    "--max-batches",
                    "1",
                    "--test-slow-load",
                    "0.005",
                    "--no-progress",
                    csv,
                    NULL};
    pid_t pid = spawn_bg(argv, out, err);
    int others = 0, polls = 0;
    while (process_alive(pid)) {
        polls++;
        FILE *f = fopen(cache, "rb");
        if (f) {
            char magic[8] = {0};
            size_t n = fread(magic, 1, 8, f);
            fclose(f);
            cr_assert(n == 8 && memcmp(magic, "TRAINPC\n", 8) == 0,
                      "%s exists before it is complete", cache);
        }
        DIR *d = opendir(cdir);
        struct dirent *de;
        while ((de = readdir(d)))
            if (de->d_name[0] != '.' && strcmp(de->d_name, "fm.cache") != 0)
                others++;
        closedir(d);
        others += maps_other_file(pid, cdir, "fm.cache"); /* unnamed (O_TMPFILE) */
        usleep(2000);
    }
    int st = spawn_wait(pid, 60);
    char *e = read_whole_file(err, NULL, NULL);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x: %s", st, e);
    free(e);
    cr_assert_gt(polls, 20, "the build was too quick to watch (%d looks)", polls);
    cr_assert_gt(others, 0, "the cache was never written to a file of its own beside the path");
    DIR *d = opendir(cdir);
    struct dirent *de;
    int left = 0, have = 0;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.') {
            have += strcmp(de->d_name, "fm.cache") == 0;
            left += strcmp(de->d_name, "fm.cache") != 0;
        }
    closedir(d);
    cr_assert(have == 1 && left == 0, "after the run: cache %d, other files %d", have, left);
    run_result r;
    train(&r, "--mode", "preload", "--cache", cache, "--batch", "16", "--max-batches", "1",
          "--no-progress", csv, NULL);
    cr_assert(strstr(r.out, "matches: reusing it"), "%s", r.out);
    run_free(&r);
    free(cdir);
    free(cache);
    free(out);
    free(err);
}

/* One batch trained from the cache at `cache` with the transforms in
 * args; it must say `note` and lose what a run without a cache file
 * loses. */
static void cached_run(const char *cache, const char *data, const char *note, char *const args[])
{
    char *j1 = path_join(dir, "c1.json"), *j2 = path_join(dir, "c2.json");
    char *argv[40];
    for (int with = 0; with < 2; with++) {
        int n = 0;
        argv[n++] = (char *)train_bin();
        argv[n++] = "--mode";
        argv[n++] = "preload";
        if (with) {
            argv[n++] = "--cache";
            argv[n++] = (char *)cache;
        }
        for (int i = 0; args[i]; i++)
            argv[n++] = args[i];
        char *tail[] = {"--batch",
                        "16",
                        "--max-batches",
                        "1",
                        "--lr-schedule",
                        "const",
                        "--no-progress",
                        "--json",
                        with ? j2 : j1,
                        (char *)data,
                        NULL};
        for (int i = 0; tail[i]; i++)
            argv[n++] = tail[i];
        argv[n] = NULL;
        run_result r;
        run_argv(argv, NULL, 60, &r);
        cr_assert_eq(r.status, 0, "%s", r.err);
        if (with)
            cr_assert(strstr(r.out, note), "%s: want '%s' in:\n%s", args[0] ? args[0] : "", note,
                      r.out);
        run_free(&r);
    }
    char *a = first_loss(j1), *b = first_loss(j2);
    cr_assert_str_eq(a, b, "loss %s without the cache file, %s with it (%s)", a, b, note);
    free(a);
    free(b);
    free(j1);
    free(j2);
}

Test(cache, every_transform_and_the_csv_rows_are_in_the_key)
{
    /* each step changes one input but keeps the cached sample's size (so
     * the header's sizes cannot tell), then one that changes the size */
    char *cache = path_join(dir, "key.cache");
    const char *rebuilt =
        "was built for other transforms (--resize, --crop, --channels, --decode): rebuilding";
    const char *other_csv =
        "was built from another CSV (its content or --root changed): rebuilding";
    cached_run(cache, csv, "does not exist: building it",
               (char *[]){"--resize", "32x32", "--crop", "28", NULL});
    cached_run(cache, csv, "matches: reusing it",
               (char *[]){"--resize", "32x32", "--crop", "28", NULL});
    cached_run(cache, csv, rebuilt, (char *[]){"--resize", "32x30", "--crop", "28", NULL});
    cached_run(cache, csv, rebuilt, (char *[]){"--resize", "30x30", "--crop", "28", NULL});
    cached_run(cache, csv, rebuilt, (char *[]){"--resize", "30", "--crop", "28", NULL});
    cached_run(cache, csv, rebuilt, (char *[]){"--resize", "32", "--crop", "28", NULL});
    cached_run(cache, csv, "matches: reusing it",
               (char *[]){"--resize", "32", "--crop", "28", NULL});
    /* the same files in another order: sample i is another image */
    size_t len;
    char *text = read_whole_file(csv, &len, NULL);
    cr_assert_not_null(text);
    char *rows[80], *save = NULL;
    int n = 0;
    for (char *l = strtok_r(text, "\n", &save); l && n < 80; l = strtok_r(NULL, "\n", &save))
        rows[n++] = l;
    char *rev = malloc(len + 2);
    size_t k = (size_t)sprintf(rev, "%s\n", rows[0]);
    for (int i = n - 1; i >= 1; i--)
        k += (size_t)sprintf(rev + k, "%s\n", rows[i]);
    char *rcsv = write_text(fm, "reversed.csv", rev);
    free(rev);
    free(text);
    cached_run(cache, rcsv, other_csv, (char *[]){"--resize", "32", "--crop", "28", NULL});
    cached_run(cache, rcsv, "matches: reusing it",
               (char *[]){"--resize", "32", "--crop", "28", NULL});
    /* sizes the header already tells apart */
    cached_run(cache, rcsv, rebuilt,
               (char *[]){"--resize", "32", "--crop", "28", "--channels", "1", NULL});
    cached_run(cache, rcsv, rebuilt, (char *[]){"--resize", "28", "--channels", "1", NULL});
    free(rcsv);
    free(cache);
}
