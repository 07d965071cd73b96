/* test_run_checks.c — what a run checks before and while it works, found
 * by a new user on a folder of photographs (mixed sizes, several
 * megapixels, a bad first file): each test runs the real train binary on
 * real JPEG files and failed before its fix. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/support/helpers.h"
#include "tests/support/images.h"

static char *dir;

static void setup(void) { dir = tmpdir_make(); }
static void teardown(void) { tmpdir_remove(dir); }

TestSuite(runchecks, .init = setup, .fini = teardown);

/* dir/name: an h x w RGB JPEG of a textured picture. */
static void jpeg(const char *name, int h, int w, uint64_t seed)
{
    uint8_t *px = ti_picture(h, w, 3, seed);
    free(ti_write_jpeg(dir, name, px, h, w, TJPF_RGB, TJSAMP_420, 90, 0));
    free(px);
}

/* n JPEGs img/<prefix>K.jpg of h x w, labels K % 3, listed in dir/<csv>. */
static char *jpeg_set(const char *csv, const char *prefix, int n, int h, int w)
{
    char text[4096] = "path,label\n";
    for (int k = 0; k < n; k++) {
        char name[64];
        snprintf(name, sizeof name, "img/%s%d.jpg", prefix, k);
        jpeg(name, h, w, (uint64_t)k + 1);
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s,%d\n", name, k % 3);
    }
    return write_text(dir, csv, text);
}

static char *json_text(const char *path)
{
    size_t len;
    char *t = read_whole_file(path, &len, NULL);
    cr_assert_not_null(t, "%s", path);
    return t;
}

Test(runchecks, mixed_sizes_are_refused_up_front_naming_two_files_and_the_fix)
{
    char text[256];
    jpeg("img/wide.jpg", 48, 64, 1);
    jpeg("img/a.jpg", 48, 64, 2);
    jpeg("img/square.jpg", 40, 40, 3);
    snprintf(text, sizeof text, "path,label\nimg/wide.jpg,0\nimg/a.jpg,1\nimg/square.jpg,2\n");
    char *csv = write_text(dir, "mixed.csv", text);
    run_result r;
    run_train(&r, "--epochs", "1", "--batch", "2", csv, NULL);
    cr_assert_eq(r.status, 2, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "images differ in size"), "%s", r.err);
    cr_assert(strstr(r.err, "line 2 ") && strstr(r.err, "img/wide.jpg is 64x48") &&
                  strstr(r.err, "line 4 ") && strstr(r.err, "img/square.jpg is 40x40"),
              "both files, their lines and sizes: %s", r.err);
    cr_assert(strstr(r.err, "--resize"), "the fix: %s", r.err);
    cr_assert(!strstr(r.out, "dev "), "no epoch started: %s", r.out);
    run_free(&r);
    /* --resize N alone keeps the aspect ratio: said, since it looks like a fix */
    run_train(&r, "--epochs", "1", "--batch", "2", "--resize", "32", csv, NULL);
    cr_assert_eq(r.status, 2, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "(--resize 32 sets the shorter side only and keeps each aspect ratio)"),
              "%s", r.err);
    run_free(&r);
    /* the fix works */
    run_train(&r, "--epochs", "1", "--batch", "2", "--resize", "32x32", csv, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    free(csv);
}

Test(runchecks, a_model_too_big_for_memory_is_refused_with_the_number_and_the_fix)
{
    /* two 12-megapixel photographs at full size: convnet at batch 64
     * would need hundreds of GB on the CPU backend */
    char *csv = jpeg_set("big.csv", "big", 2, 3000, 4000);
    run_result r;
    run_train(&r, "--device", "cpu", "--epochs", "1", csv, NULL);
    cr_assert_eq(r.status, 2, "exit %d (137 = killed by the OOM killer): %s", r.status, r.err);
    cr_assert(strstr(r.err, "3x3000x4000") && strstr(r.err, "GB of memory") &&
                  strstr(r.err, "available"),
              "%s", r.err);
    cr_assert(strstr(r.err, "--resize") && strstr(r.err, "--batch"), "the fix: %s", r.err);
    cr_assert_lt(r.secs, 30, "refused in seconds, not after allocating: %.1f s", r.secs);
    run_free(&r);
    free(csv);
}

Test(runchecks, preload_with_random_crop_trains_like_lazy)
{
    char *csv = jpeg_set("d.csv", "p", 6, 72, 80);
    char *ja = path_join(dir, "lazy.json"), *jb = path_join(dir, "pre.json");
    run_result r;
    run_train(&r, "--mode", "lazy", "--resize", "64x64", "--crop", "56", "--random-crop", "--batch",
              "2", "--epochs", "2", "--json", ja, csv, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run_train(&r, "--mode", "preload", "--resize", "64x64", "--crop", "56", "--random-crop",
              "--batch", "2", "--epochs", "2", "--json", jb, csv, NULL);
    cr_assert_eq(r.status, 0, "the standard recipe with preload: %s", r.err);
    run_free(&r);
    assert_same_losses(ja, jb, 2);
    free(ja), free(jb), free(csv);
}

static char *epoch_loss(const char *json)
{
    char v[8][JSON_VALUE_MAX];
    cr_assert_eq(json_epoch_values(json, "loss", v, 8), 1);
    return strdup(v[0]);
}

Test(runchecks, the_preload_cache_is_rebuilt_when_an_image_file_changes)
{
    char *csv = jpeg_set("d.csv", "c", 6, 40, 40);
    char *cache = path_join(dir, "x.cache"), *j = path_join(dir, "j.json");
    run_result r;
#define CACHED_RUN()                                                                               \
    run_train(&r, "--mode", "preload", "--resize", "32x32", "--batch", "3", "--epochs", "1",       \
              "--cache", cache, "--json", j, csv, NULL)
    CACHED_RUN();
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    CACHED_RUN();
    cr_assert(strstr(r.out, "matches: reusing it"), "%s", r.out);
    run_free(&r);

    /* touched: same bytes, new time stamps */
    char *victim = path_join(dir, "img/c3.jpg");
    struct timespec ts[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
    cr_assert_eq(utimensat(AT_FDCWD, victim, ts, 0), 0);
    CACHED_RUN();
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "1 image file changed") && strstr(r.out, "d.csv:5: ") &&
                  strstr(r.out, "img/c3.jpg, modified"),
              "%s", r.out);
    cr_assert(strstr(r.out, "preload: decoded 6 samples"), "rebuilt: %s", r.out);
    run_free(&r);

    /* replaced by another picture of the same size and time stamp */
    uint8_t *px = ti_picture(40, 40, 3, 99);
    free(ti_write_jpeg(dir, "img/c3.jpg", px, 40, 40, TJPF_RGB, TJSAMP_420, 90, 0));
    free(px);
    cr_assert_eq(utimensat(AT_FDCWD, victim, ts, 0), 0);
    CACHED_RUN();
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "changed since it was built"), "%s", r.out);
    run_free(&r);
    char *cached = epoch_loss(j);
    free(cached);

    /* edited in place: one quantisation value of the JPEG (same size, same
     * inode, modification time put back): only the change time tells */
    size_t len;
    uint8_t *bytes = (uint8_t *)read_whole_file(victim, &len, NULL);
    size_t q = 0;
    while (q + 12 < len && !(bytes[q] == 0xFF && bytes[q + 1] == 0xDB))
        q++;
    cr_assert(q + 12 < len, "a DQT segment in %s", victim);
    FILE *f = fopen(victim, "r+b");
    fseek(f, (long)q + 12, SEEK_SET);
    fputc(bytes[q + 12] == 1 ? 2 : bytes[q + 12] - 1, f);
    fclose(f);
    free(bytes);
    cr_assert_eq(utimensat(AT_FDCWD, victim, ts, 0), 0);
    CACHED_RUN();
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "changed since it was built"), "edited in place: %s", r.out);
    run_free(&r);
    cached = epoch_loss(j);
    run_train(&r, "--mode", "preload", "--resize", "32x32", "--batch", "3", "--epochs", "1",
              "--json", j, csv, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    char *fresh = epoch_loss(j);
    cr_assert_str_eq(cached, fresh, "the cache trains on the new pixels: %s vs %s", cached, fresh);
#undef CACHED_RUN
    free(cached), free(fresh), free(victim), free(cache), free(j), free(csv);
}

Test(runchecks, skip_bad_skips_a_bad_first_row_and_names_each_skipped_file_once)
{
    char *good = jpeg_set("good.csv", "g", 5, 32, 32);
    free(write_text(dir, "img/bad.jpg", "not a picture\n"));
    char *csv =
        write_text(dir, "d.csv",
                   "path,label\nimg/bad.jpg,0\nimg/missing.jpg,1\nimg/g0.jpg,0\nimg/g1.jpg,1\n"
                   "img/g2.jpg,2\nimg/g3.jpg,0\nimg/g4.jpg,1\n");
    run_result r;
    run_train(&r, "--skip-bad", "--workers", "2", "--batch", "3", "--epochs", "2", csv, NULL);
    cr_assert_eq(r.status, 0, "a bad first row is skipped like any other: %s", r.err);
    const char *a = strstr(r.err, "skipped "), *bad = strstr(r.err, "d.csv:2: "),
               *missing = strstr(r.err, "d.csv:3: ");
    cr_assert(strstr(r.err, "img/bad.jpg: not an image") &&
                  strstr(r.err, "img/missing.jpg: cannot open"),
              "%s", r.err);
    cr_assert(a && bad && missing, "each skipped file named with its line and reason: %s", r.err);
    cr_assert(!strstr(bad + 1, "d.csv:2:") && !strstr(missing + 1, "d.csv:3:"),
              "once, over 2 epochs: %s", r.err);
    run_free(&r);
    free(good), free(csv);
}

Test(runchecks, drop_last_with_a_batch_larger_than_the_set_is_refused)
{
    char *csv = jpeg_set("d.csv", "d", 4, 32, 32);
    char *j = path_join(dir, "j.json");
    run_result r;
    run_train(&r, "--drop-last", "--batch", "10", "--json", j, csv, NULL);
    cr_assert_eq(r.status, 2, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "--batch 10") && strstr(r.err, "has 4"), "the numbers: %s", r.err);
    run_free(&r);
    char *t = json_text(j);
    cr_assert(strstr(t, "\"status\":2"), "%s", t);
    free(t), free(j), free(csv);
}

Test(runchecks, an_unwritable_save_path_is_refused_before_training)
{
    char *csv = jpeg_set("d.csv", "s", 4, 32, 32);
    char *bad = path_join(dir, "no/such/folder/m.ckpt");
    run_result r;
    run_train(&r, "--save", bad, "--epochs", "1", csv, NULL);
    cr_assert_eq(r.status, 2, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "--save") && strstr(r.err, "no/such/folder"), "%s", r.err);
    cr_assert(!strstr(r.out, "dev "), "no epoch ran: %s", r.out);
    run_free(&r);
    run_train(&r, "--save", dir, "--epochs", "1", csv, NULL);
    cr_assert_eq(r.status, 2, "a directory: exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "is a directory"), "%s", r.err);
    run_free(&r);
    free(bad), free(csv);
}

Test(runchecks, loader_only_preload_rates_never_exceed_what_the_loader_made)
{
    /* 6 samples, batch 2: the ring (2 workers x 2) holds more than an
     * epoch ahead. Each sample costs 0.05 s of CPU in a worker, so 2
     * workers make at most 40 samples/s. */
    char *csv = jpeg_set("d.csv", "r", 6, 32, 32);
    char *j = path_join(dir, "j.json");
    run_result r;
    run_train(&r, "--loader-only", "--mode", "preload", "--resize", "32x32", "--workers", "2",
              "--batch", "2", "--epochs", "3", "--test-slow-load", "0.05", "--json", j, csv, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    char v[8][JSON_VALUE_MAX];
    cr_assert_eq(json_epoch_values(j, "images_per_s", v, 8), 3);
    for (int i = 0; i < 3; i++)
        cr_assert_leq(atof(v[i]), 40 * 1.05, "epoch %d: %s img/s from workers that make at most 40",
                      i + 1, v[i]);
    free(j), free(csv);
}

Test(runchecks, mean_with_more_values_than_channels_names_both_counts)
{
    char *csv = jpeg_set("d.csv", "m", 4, 32, 32);
    run_result r;
    run_train(&r, "--mean", "0.485,0.456,0.406", "--channels", "1", csv, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "--mean has 3 values") && strstr(r.err, "1 channel"), "%s", r.err);
    run_free(&r);
    free(csv);
}

Test(runchecks, pin_on_the_cpu_is_reported_as_off)
{
    char *csv = jpeg_set("d.csv", "n", 4, 32, 32);
    char *j = path_join(dir, "j.json");
    run_result r;
    run_train(&r, "--device", "cpu", "--pin", "--epochs", "1", "--json", j, csv, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.err, "continuing unpinned"), "%s", r.err);
    cr_assert(strstr(r.out, " off off "), "the table says what ran: %s", r.out);
    run_free(&r);
    char v[8][JSON_VALUE_MAX];
    cr_assert_eq(json_epoch_values(j, "pin", v, 8), 1);
    cr_assert_str_eq(v[0], "false");
    free(j), free(csv);
}

Test(runchecks, the_json_file_says_why_a_run_failed_or_was_interrupted)
{
    char *csv = jpeg_set("d.csv", "f", 6, 32, 32);
    char *badcsv =
        write_text(dir, "bad.csv", "path,label\nimg/f0.jpg,0\nimg/f1.jpg,1\nimg/nope.jpg,2\n");
    char *j = path_join(dir, "j.json");
    run_result r;
    run_train(&r, "--batch", "2", "--json", j, badcsv, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    run_free(&r);
    char *t = json_text(j);
    cr_assert(strstr(t, "\"record\":\"summary\"") && strstr(t, "\"status\":2") &&
                  strstr(t, "img/nope.jpg"),
              "a bad file in the first epoch: %s", t);
    free(t);

    /* SIGINT in the first epoch (each step made to take 0.5 s) */
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "'%s' --batch 2 --epochs 3 --test-slow-step 0.5 --json '%s' '%s' & p=$!; sleep 1.5; "
             "kill -INT $p; "
             "wait $p",
             train_bin(), j, csv);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    run_argv(argv, NULL, 60, &r);
    cr_assert_eq(r.status, 130, "%d: %s", r.status, r.err);
    run_free(&r);
    t = json_text(j);
    cr_assert(strstr(t, "\"status\":130") && strstr(t, "\"error\":\"Interrupt"), "%s", t);
    free(t), free(j), free(csv), free(badcsv);
}
