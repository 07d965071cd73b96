/* test_hostile_csv.c — a data CSV and options as an attacker or a careless
 * user writes them (issue 26): device nodes and FIFOs given as the CSV,
 * a huge file, control bytes in file names, NUL bytes and UTF-16 text,
 * labels that only look whole, thousands of bad rows under --skip-bad, and
 * option values that could only fail later. Each test runs the real train
 * binary (or dataset_load) on real files and failed before its fix. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "common/util.h"
#include "loader/dataset.h"
#include "loader/fingerprint.h"
#include "tests/support/helpers.h"
#include "tests/support/images.h"

static char *dir;

static void setup(void) { dir = tmpdir_make(); }
static void teardown(void) { tmpdir_remove(dir); }

TestSuite(hostile_csv, .init = setup, .fini = teardown);

/* train with the arguments, at most `secs` seconds */
static void train(run_result *r, double secs, const char *const *args)
{
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)train_bin();
    for (; *args; args++)
        argv[n++] = (char *)*args;
    argv[n] = NULL;
    run_argv(argv, NULL, secs, r);
}

/* dir/name: an h x w RGB JPEG (a .png name too: the format is told by the bytes) */
static void jpeg(const char *name, int h, int w, uint64_t seed)
{
    uint8_t *px = ti_picture(h, w, 3, seed);
    free(ti_write_jpeg(dir, name, px, h, w, TJPF_RGB, TJSAMP_420, 90, 0));
    free(px);
}

static void png(const char *name, uint64_t seed) { jpeg(name, 8, 8, seed); }

/* ---------------------------------------------------------------- item 2 */

Test(hostile_csv, a_device_or_fifo_as_the_csv_is_refused_without_reading_it)
{
    png("img/a.png", 1);
    char *good = write_text(dir, "good.csv", "img/a.png,0\n");
    char *fifo = path_join(dir, "fifo.csv");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    const char *cases[][6] = {
        {"--epochs", "1", "/dev/zero", NULL},
        {"--epochs", "1", "--val", "/dev/zero", good, NULL},
        {"--epochs", "1", fifo, NULL},
        {"--check", "/dev/zero", NULL},
    };
    const char *kind[] = {"a character device", "a character device", "a FIFO",
                          "a character device"};
    for (int i = 0; i < 4; i++) {
        run_result r;
        train(&r, 30, cases[i]); /* /dev/zero: read until memory runs out; a FIFO: forever */
        cr_assert_eq(r.status, 2, "case %d: exit %d: %s", i, r.status, r.err);
        cr_assert(strstr(r.err, kind[i]) && strstr(r.err, "regular file"), "case %d: %s", i, r.err);
        cr_assert(strstr(r.err, i == 2 ? fifo : "/dev/zero"), "names the file: %s", r.err);
        run_free(&r);
    }
    free(fifo);
    free(good);
}

Test(hostile_csv, a_csv_larger_than_the_cap_is_refused_with_the_cap)
{
    char *big = write_text(dir, "big.csv", "img/a.png,0\n");
    int fd = open(big, O_WRONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(ftruncate(fd, (off_t)(1ll << 30) + 1), 0); /* sparse: costs no disk */
    close(fd);
    dataset ds;
    errbuf e;
    cr_assert_neq(dataset_load(&ds, big, NULL, &e), 0);
    cr_assert(strstr(e.msg, big) && strstr(e.msg, "1073741825 bytes") &&
                  strstr(e.msg, "limit 1 GiB"),
              "%s", e.msg);
    free(big);
}

/* ---------------------------------------------------------------- item 9 */

/* 3000 bad rows (text files named .png) after 4 good images: every bad
 * sample drawn is replaced by the next good one. Each bad file must be read
 * about once in the whole run, not once per bad row before it per epoch.
 * Counted independently of the program: inotify's IN_OPEN events on the
 * bad files' folder (a quadratic scan overflows the 16384-event queue). */
Test(hostile_csv, skip_bad_reads_each_bad_file_about_once)
{
    enum { NBAD = 3000, NGOOD = 4 };
    size_t cap = 64 + (size_t)(NBAD + NGOOD) * 24, len = 0;
    char *text = xmalloc(cap);
    len += (size_t)snprintf(text + len, cap - len, "path,label\n");
    for (int k = 0; k < NGOOD; k++) {
        char name[32];
        snprintf(name, sizeof name, "good/%d.png", k);
        png(name, (uint64_t)k + 1);
        len += (size_t)snprintf(text + len, cap - len, "%s,%d\n", name, k % 2);
    }
    free(write_text(dir, "bad/0.png", "not an image\n"));
    char *bad_dir = path_join(dir, "bad");
    for (int k = 0; k < NBAD; k++) {
        char name[32];
        snprintf(name, sizeof name, "%d.png", k);
        if (k)
            free(write_text(bad_dir, name, "not an image\n"));
        len += (size_t)snprintf(text + len, cap - len, "bad/%s,%d\n", name, k % 2);
    }
    char *csv = write_text(dir, "many-bad.csv", text);
    free(text);

    int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    cr_assert_geq(in, 0);
    cr_assert_geq(inotify_add_watch(in, bad_dir, IN_OPEN), 0);
    run_result r;
    const char *args[] = {
        "--skip-bad", "--loader-only", "--workers",     "2", "--batch", "8", "--epochs", "2",
        "--resize",   "8x8",           "--max-batches", "3", csv,       NULL};
    train(&r, 60, args);
    cr_assert_eq(r.status, 0, "exit %d: %.2000s", r.status, r.err);

    static int opens[NBAD];
    memset(opens, 0, sizeof opens);
    int total = 0, overflow = 0;
    char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            if (ev->mask & IN_Q_OVERFLOW)
                overflow = 1;
            else if (ev->len && atoi(ev->name) >= 0 && atoi(ev->name) < NBAD)
                opens[atoi(ev->name)]++, total++;
            p += sizeof *ev + ev->len;
        }
    close(in);
    cr_assert(!overflow, "more than 16384 opens of %d bad files: a quadratic rescan", NBAD);
    int most = 0;
    for (int k = 0; k < NBAD; k++)
        most = opens[k] > most ? opens[k] : most;
    cr_assert_gt(total, 0, "the bad files were read");
    /* each opened by at most the two workers racing on it */
    cr_assert_leq(most, 2, "a bad file opened %d times (%d opens in all)", most, total);
    cr_assert_leq(total, 2 * NBAD, "%d opens of %d bad files", total, NBAD);
    /* each named once */
    cr_assert_leq(count_lines(r.err), NBAD + 8, "%d lines", count_lines(r.err));
    run_free(&r);
    free(csv);
    free(bad_dir);
}

/* ---------------------------------------------------------------- item 10 */

Test(hostile_csv, skip_bad_with_preload_is_refused_up_front)
{
    png("img/a.png", 1);
    char *csv = write_text(dir, "one-bad.csv", "img/a.png,0\nimg/missing.png,1\n");
    const char *args[] = {"--skip-bad", "--mode", "lazy,preload", "--epochs", "1", "--loader-only",
                          csv,          NULL};
    run_result r;
    train(&r, 60, args);
    cr_assert_eq(r.status, 2, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "--skip-bad") && strstr(r.err, "--mode preload"), "%s", r.err);
    cr_assert(!strstr(r.err, "missing.png"), "refused before any image: %s", r.err);
    cr_assert(!strstr(r.out, "dev "), "no epoch: %s", r.out);
    run_free(&r);
    free(csv);
}

/* ---------------------------------------------------------------- item 12 */

/* no ESC, CR or other C0 byte but the newlines between lines */
static void assert_no_control_bytes(const char *s, const char *what)
{
    for (const unsigned char *u = (const unsigned char *)s; *u; u++)
        cr_assert(*u == '\n' || (*u >= 0x20 && *u != 0x7f), "%s: raw byte 0x%02x in: %s", what, *u,
                  s);
}

Test(hostile_csv, control_bytes_in_names_are_escaped_in_every_message)
{
    png("img/a.png", 1);
    /* a quoted cell: a missing file whose name clears the screen and
     * rewrites the line, and an invalid UTF-8 byte */
    char *csv = write_text(dir, "evil\x1b]0;title\x07.csv",
                           "path,label\nimg/a.png,0\n\"img/\x1b[2J\rall good\xff.png\",1\n");
    const char *runs[][8] = {
        {"--epochs", "1", "--batch", "2", "--loader-only", csv, NULL},
        {"--check", csv, NULL},
        {"--skip-bad", "--epochs", "1", "--batch", "2", "--loader-only", csv, NULL},
    };
    for (int i = 0; i < 3; i++) {
        run_result r;
        train(&r, 60, runs[i]);
        cr_assert_eq(r.status, i == 2 ? 0 : 2, "run %d: exit %d: %s", i, r.status, r.err);
        assert_no_control_bytes(r.err, "stderr");
        assert_no_control_bytes(r.out, "stdout");
        cr_assert(strstr(r.err, "img/\\x1b[2J\\x0dall good\\xff.png"), "run %d escaped: %s", i,
                  r.err);
        cr_assert(strstr(r.err, "evil\\x1b]0;title\\x07.csv:3:"), "run %d csv named: %s", i, r.err);
        run_free(&r);
    }
    /* a CSV cell in the CSV's own errors, and a class name */
    char *bad = write_text(dir, "label.csv", "path,label\nimg/a.png,1\nimg/a.png,\"2\x1b[1m\"\n");
    dataset ds;
    errbuf e;
    cr_assert_neq(dataset_load(&ds, bad, NULL, &e), 0);
    cr_assert(strstr(e.msg, "label '2\\x1b[1m' is not an integer"), "%s", e.msg);
    free(bad);
    free(csv);
}

Test(hostile_csv, esc_path_keeps_utf8_and_escapes_the_rest)
{
    char buf[128];
    cr_assert_str_eq(esc_path("caf\xc3\xa9/\xe6\x97\xa5.png", buf, sizeof buf),
                     "caf\xc3\xa9/\xe6\x97\xa5.png");
    cr_assert_str_eq(esc_path("a\tb\nc\x7f\xc2\x9b"
                              "d",
                              buf, sizeof buf),
                     "a\\x09b\\x0ac\\x7f\\xc2\\x9bd");
    /* overlong '/', a surrogate, a lone continuation byte, a cut sequence */
    cr_assert_str_eq(esc_path("\xc0\xaf\xed\xa0\x80\x80\xe6\x97", buf, sizeof buf),
                     "\\xc0\\xaf\\xed\\xa0\\x80\\x80\\xe6\\x97");
    /* cut at a whole escape when the buffer is small */
    cr_assert_str_eq(esc_path("ab\x1b", buf, 6), "ab");
}

/* ---------------------------------------------------------------- item 13 */

static void load_fails(const char *name, const char *text, size_t len, const char *want)
{
    char *csv = write_file(dir, name, text, len);
    dataset ds;
    errbuf e;
    int rc = dataset_load(&ds, csv, NULL, &e);
    if (rc == 0)
        dataset_free(&ds);
    cr_assert_neq(rc, 0, "%s loaded", name);
    cr_assert(strstr(e.msg, csv) && strstr(e.msg, want), "%s: want '%s' in: %s", name, want, e.msg);
    free(csv);
}

#define LOAD_FAILS(name, lit, want) load_fails(name, lit, sizeof lit - 1, want)

Test(hostile_csv, nul_bytes_and_utf16_are_named)
{
    LOAD_FAILS("nul-path.csv", "a.png,0\nb.png\0evil.png,1\n", ":2: NUL byte in column 0");
    LOAD_FAILS("nul-label.csv",
               "a.png,0\nb.png,1\0"
               "0\n",
               ":2: NUL byte in column 1");
    LOAD_FAILS("utf16le.csv",
               "\xff\xfe"
               "a\0.\0p\0n\0g\0,\0"
               "0\0\n\0",
               "looks like UTF-16 (byte-order mark FF FE); save it as UTF-8");
    LOAD_FAILS("utf16be.csv",
               "\xfe\xff\0a\0.\0p\0n\0g\0,\0"
               "0\0\n",
               "looks like UTF-16 (byte-order mark FE FF)");
    LOAD_FAILS("utf16-nobom.csv",
               "a\0.\0p\0n\0g\0,\0"
               "0\0\n\0b\0.\0p\0n\0g\0,\0"
               "1\0\n\0",
               "looks like UTF-16 (NUL bytes between the characters)");
    /* end to end: bad input, 2 */
    static const char nul[] = "a.png,0\nb\0.png,1\n";
    char *csv = write_file(dir, "e2e-nul.csv", nul, sizeof nul - 1);
    const char *args[] = {"--epochs", "1", csv, NULL};
    run_result r;
    train(&r, 60, args);
    cr_assert_eq(r.status, 2, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, ":2: NUL byte in column 0"), "%s", r.err);
    run_free(&r);
    free(csv);
}

Test(hostile_csv, labels_that_only_look_whole_are_fractions_and_huge_ones_too_large)
{
    LOAD_FAILS("l1.csv", "path,label\na.png,0\nb.png,1.0000000000000001\n",
               ":3: label '1.0000000000000001' is not a whole number");
    LOAD_FAILS("l2.csv", "path,label\na.png,0\nb.png,1e-400\n",
               ":3: label '1e-400' is not a whole number");
    LOAD_FAILS("l3.csv", "path,label\na.png,0\nb.png,0.99999999999999999\n",
               ":3: label '0.99999999999999999' is not a whole number");
    LOAD_FAILS("l4.csv", "path,label\na.png,0\nb.png,9223372036854775808\n",
               ":3: label 9223372036854775808 is too large (limit 1000000)");
    LOAD_FAILS("l5.csv", "path,label\na.png,0\nb.png,18446744073709551616\n",
               ":3: label 18446744073709551616 is too large (limit 1000000)");
    LOAD_FAILS("l6.csv", "path,label\na.png,0\nb.png,1e400\n",
               ":3: label 1e400 is too large (limit 1000000)");
    LOAD_FAILS("l7.csv", "path,label\na.png,0\nb.png,1000001\n",
               ":3: label 1000001 is too large (limit 1000000)");
    LOAD_FAILS("l8.csv", "path,label\na.png,0\nb.png,-9223372036854775809\n",
               ":3: label '-9223372036854775809' is negative");
    /* whole numbers written as floats stay what the README says */
    char *ok = write_text(dir, "whole.csv",
                          "path,label\na.png,0\nb.png,1.0\nc.png,2.00\nd.png,3e0\ne.png,0.4e1\n"
                          "f.png,1000000\ng.png,500e-2\nh.png,-0\n");
    dataset ds;
    errbuf e;
    csv_opts o = CSV_OPTS_DEFAULT;
    o.sparse_labels = 1; /* 1000000 among 0..5 is an outlier */
    cr_assert_eq(dataset_load(&ds, ok, &o, &e), 0, "%s", e.msg);
    int32_t want[] = {0, 1, 2, 3, 4, 1000000, 5, 0};
    cr_assert_eq(ds.n, 8);
    for (uint32_t i = 0; i < ds.n; i++)
        cr_assert_eq(ds.rows[i].label, want[i], "row %u: %d", i, ds.rows[i].label);
    dataset_free(&ds);
    free(ok);
}

/* ---------------------------------------------------------------- items 16, 18 */

Test(hostile_csv, option_values_that_can_only_fail_later_are_refused_up_front)
{
    jpeg("img/a.png", 100, 100, 7);
    jpeg("img/b.png", 100, 100, 8);
    char *csv = write_text(dir, "two.csv", "img/a.png,0\nimg/b.png,1\n");
    struct {
        const char *args[10];
        const char *want[2];
    } cases[] = {
        {{"--color-jitter", "200,0,0", "--skip-bad", csv, NULL}, {"--color-jitter", "0..100"}},
        {{"--color-jitter", "0,0,100.5", csv, NULL}, {"--color-jitter", "0..100"}},
        {{"--resize", "72", "--crop", "80", csv, NULL}, {"--crop 80x80", "--resize 72"}},
        {{"--resize", "90x60", "--crop", "64", csv, NULL}, {"--crop 64x64", "--resize 90x60"}},
        {{"--random-resized-crop", "80", "--resize", "72", "--val", csv, csv, NULL},
         {"--random-resized-crop 80x80", "--resize 72"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_result r;
        train(&r, 60, cases[i].args);
        cr_assert_eq(r.status, 2, "case %zu: exit %d: %s", i, r.status, r.err);
        cr_assert(strstr(r.err, cases[i].want[0]) && strstr(r.err, cases[i].want[1]),
                  "case %zu: %s", i, r.err);
        cr_assert(!strstr(r.err, "a.png") && !strstr(r.err, "skipped"),
                  "case %zu: the options blamed, not an image: %s", i, r.err);
        run_free(&r);
    }
    /* what can fit is not refused: a crop under the shorter side, one side
     * over it (a tall image fits), --pad, a random-resized crop without
     * validation (--resize is validation's) */
    const char *fine[][12] = {
        {"--resize", "80", "--crop", "72", "--loader-only", "--epochs", "1", csv, NULL},
        {"--resize", "72", "--crop", "80x64", "--check", csv, NULL},
        {"--resize", "72", "--crop", "80", "--pad", "--loader-only", "--epochs", "1", csv, NULL},
        {"--random-resized-crop", "80", "--resize", "72", "--loader-only", "--epochs", "1", csv,
         NULL},
    };
    for (size_t i = 0; i < sizeof fine / sizeof *fine; i++) {
        run_result r;
        train(&r, 60, fine[i]);
        cr_assert_eq(r.status, 0, "fine %zu: exit %d: %s", i, r.status, r.err);
        run_free(&r);
    }
    free(csv);
}

/* ---------------------------------------------------------------- item 17 */

Test(hostile_csv, timeout_messages_count_epochs_from_one_as_the_table)
{
    png("img/a.png", 1);
    png("img/b.png", 2);
    char *csv = write_text(dir, "slow.csv", "img/a.png,0\nimg/b.png,1\n");
    const char *args[] = {
        "--workers",        "1", "--batch", "2", "--timeout", "0.3", "--loader-only",
        "--test-slow-load", "2", csv,       NULL};
    run_result r;
    train(&r, 60, args);
    cr_assert_eq(r.status, 3, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "training batch 0 of epoch 1 not delivered"), "%s", r.err);
    run_free(&r);
    free(csv);
}

/* ------------------------------------------- the newcomer review (26b) */

/* a line of NUL bytes is not a blank line: before, it was skipped as one
 * (its cells read as empty strings) and --check passed with exit 0 */
Test(hostile_csv, a_line_of_only_nul_bytes_is_refused_naming_it)
{
    LOAD_FAILS("nul-line.csv", "path,label\nimgs/im_00.jpg,0\n\0\nimgs/im_02.jpg,2\n",
               ":3: NUL byte in column 0");
    LOAD_FAILS("nul-tail.csv", "path,label\nimgs/im_00.jpg,0\n\0\0\0", ":3: NUL byte in column 0");
    LOAD_FAILS("nul-cells.csv", "path,label\nimgs/im_00.jpg,0\n,\0\n", ":3: NUL byte in column 1");
    LOAD_FAILS("nul-header.csv", "\0\nimgs/im_00.jpg,0\n", ":1: NUL byte in column 0");
    png("imgs/im_00.jpg", 1);
    png("imgs/im_02.jpg", 2);
    static const char text[] = "path,label\nimgs/im_00.jpg,0\n\0\nimgs/im_02.jpg,2\n";
    char *csv = write_file(dir, "nul-check.csv", text, sizeof text - 1);
    const char *args[] = {"--check", csv, NULL};
    run_result r;
    train(&r, 60, args);
    cr_assert_eq(r.status, 2, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "nul-check.csv:3: NUL byte"), "%s", r.err);
    run_free(&r);
    free(csv);
}

/* a CSV of integer labels, `n` rows cycling through `used` labels, and
 * one row (line `at`) labelled `outlier` */
static char *label_csv(const char *name, int n, int used, int at, long outlier, int step)
{
    size_t cap = 64 + (size_t)n * 32, len = 0;
    char *text = xmalloc(cap);
    len += (size_t)snprintf(text + len, cap - len, "path,label\n");
    for (int i = 0; i < n; i++) {
        long l = i + 2 == at ? outlier : (long)(i % used) * step;
        len += (size_t)snprintf(text + len, cap - len, "imgs/%d.png,%ld\n", i, l);
    }
    char *csv = write_text(dir, name, text);
    free(text);
    return csv;
}

/* one typo label made a model of a million outputs (6 GB, a minute per
 * 40 images) without a word: refused naming the row, --sparse-labels
 * turns it into one warning */
Test(hostile_csv, one_outlier_label_making_mostly_unused_classes_is_refused)
{
    char *csv = label_csv("typo.csv", 40, 2, 17, 1000000, 1); /* 0, 1 and the typo */
    dataset ds;
    errbuf e;
    cr_assert_neq(dataset_load(&ds, csv, NULL, &e), 0, "loaded");
    cr_assert(strstr(e.msg, "typo.csv:17: label 1000000 makes 1000001 classes, of which 3 are "
                            "used; a typo?") &&
                  strstr(e.msg, "--sparse-labels"),
              "%s", e.msg);
    /* the override: loads, one warning naming the row */
    char *warn_path = path_join(dir, "warn.txt");
    FILE *warn = fopen(warn_path, "w+");
    cr_assert(warn);
    csv_opts o = CSV_OPTS_DEFAULT;
    o.sparse_labels = 1;
    o.warn = warn;
    cr_assert_eq(dataset_load(&ds, csv, &o, &e), 0, "%s", e.msg);
    cr_assert_eq(ds.nclasses, 1000001);
    dataset_free(&ds);
    fclose(warn);
    char *notes = read_whole_file(warn_path, NULL, &e);
    cr_assert(notes, "%s", e.msg);
    cr_assert_eq(count_lines(notes), 1, "%s", notes);
    cr_assert(strstr(notes, "typo.csv:17: label 1000000 makes 1000001 classes"), "%s", notes);
    free(notes);
    /* not an outlier: many classes, few rows of them each (a validation
     * set of a 2000-class problem), and a 1001-class set using them all */
    char *val = label_csv("val.csv", 60, 60, 0, 0, 33); /* 0, 33, .. 1947 */
    for (int i = 0; i < 2; i++) {
        char *ok = i ? label_csv("dense.csv", 1001, 1001, 0, 0, 1) : val;
        cr_assert_eq(dataset_load(&ds, ok, NULL, &e), 0, "%s", e.msg);
        cr_assert_eq(ds.nclasses, i ? 1001u : 1948u);
        dataset_free(&ds);
        if (i)
            free(ok);
    }
    /* end to end: exit 2 before any model is built */
    const char *args[] = {"--epochs", "1", csv, NULL};
    run_result r;
    train(&r, 60, args);
    cr_assert_eq(r.status, 2, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "typo.csv:17: label 1000000") && !strstr(r.out, "parameters"),
              "%s / %s", r.err, r.out);
    run_free(&r);
    free(val);
    free(warn_path);
    free(csv);
}

/* "./imgs/x.png" and "imgs//x.png" name the files "imgs/x.png" does: the
 * same rows for --resume and for the preload cache (which also ignores
 * CRLF line ends, the header and other columns); ".." is not resolved */
Test(hostile_csv, the_same_rows_written_differently_have_one_fingerprint)
{
    const char *texts[] = {
        "path,label\nimgs/a.png,0\nimgs/b.png,1\n",
        "path,label\n./imgs/a.png,0\nimgs/./b.png,1\n",
        "path,label\nimgs//a.png,0\n.//imgs/b.png,1\n",
        "path,label,note\r\nimgs/a.png,0,x\r\nimgs/b.png,1,y\r\n",
        "imgs/a.png,0\nimgs/b.png,1\n",
        "path,label\nimgs/../imgs/a.png,0\nimgs/b.png,1\n", /* other */
        "path,label\nimgs/b.png,0\nimgs/a.png,1\n",         /* other */
    };
    data_fp fp0 = {0};
    uint64_t key0 = 0;
    for (int i = 0; i < 7; i++) {
        char name[32];
        snprintf(name, sizeof name, "same%d.csv", i);
        char *csv = write_text(dir, name, texts[i]);
        dataset ds;
        errbuf e;
        cr_assert_eq(dataset_load(&ds, csv, NULL, &e), 0, "%s", e.msg);
        data_fp fp = dataset_fingerprint(&ds, NULL);
        if (i == 0) {
            fp0 = fp;
            key0 = ds.content_hash;
        } else if (i < 5) {
            cr_assert_eq(fp.hash, fp0.hash, "csv %d: another fingerprint", i);
            cr_assert_eq(ds.content_hash, key0, "csv %d: another cache key", i);
        } else {
            cr_assert_neq(fp.hash, fp0.hash, "csv %d: the same fingerprint", i);
            cr_assert_neq(ds.content_hash, key0, "csv %d: the same cache key", i);
        }
        dataset_free(&ds);
        free(csv);
    }
    /* end to end: a checkpoint of the plain CSV resumes on the "./" one */
    png("imgs/a.png", 1);
    png("imgs/b.png", 2);
    char *plain = write_text(dir, "plain.csv", texts[0]);
    char *dotted = write_text(dir, "dotted.csv", texts[1]);
    char *ck = path_join(dir, "fp.ckpt");
    const char *first[] = {"--epochs", "1",     "--batch", "2", "--workers", "0",
                           "--model",  "probe", "--save",  ck,  plain,       NULL};
    const char *again[] = {"--epochs", "2", "--batch", "2", "--workers", "0", "--model", "probe",
                           "--resume", ck,  "--save",  ck,  dotted,      NULL};
    run_result r;
    train(&r, 60, first);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    run_free(&r);
    train(&r, 60, again);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    run_free(&r);
    free(plain), free(dotted), free(ck);
}

/* a flag with its --no- twin was last-wins: refused, naming both */
Test(hostile_csv, a_flag_and_its_no_twin_together_are_refused)
{
    png("img/a.png", 1);
    char *csv = write_text(dir, "pair.csv", "img/a.png,0\n");
    const char *pairs[][2] = {{"--header", "--no-header"},
                              {"--no-shuffle", "--shuffle"},
                              {"--pin=on", "--no-pin"},
                              {"--non-blocking", "--no-non-blocking"},
                              {"--progress", "--no-progress"}};
    for (int i = 0; i < 5; i++) {
        const char *args[] = {pairs[i][0], pairs[i][1], "--check", csv, NULL};
        run_result r;
        train(&r, 30, args);
        cr_assert_eq(r.status, 2, "%s %s: exit %d: %s", pairs[i][0], pairs[i][1], r.status, r.err);
        cr_assert(strstr(r.err, pairs[i][0]) && strstr(r.err, pairs[i][1]) &&
                      strstr(r.err, "contradict"),
                  "%s", r.err);
        run_free(&r);
    }
    /* either alone, or twice, is fine */
    const char *fine[] = {"--no-header", "--no-header", "--check", csv, NULL};
    run_result r;
    train(&r, 30, fine);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    run_free(&r);
    free(csv);
}

/* dog/loop -> .. pulled every class into dog (torchvision follows it);
 * only a loop back into the class itself was skipped */
Test(hostile_csv, a_symlinked_folder_back_into_the_data_is_not_followed)
{
    png("set/cat/a.jpg", 1);
    png("set/cat/b.jpg", 2);
    png("set/dog/c.jpg", 3);
    png("set/zebra/d.jpg", 4);
    png("outside/e.jpg", 5);
    png("stray.jpg", 6); /* beside the data root: only a link above it reaches it */
    const char *links[][2] = {
        {"..", "set/dog/loop"},           /* the data root */
        {"../..", "set/dog/up"},          /* above it */
        {"../zebra", "set/dog/zebras"},   /* another class, not read yet */
        {"../cat", "set/dog/cats"},       /* another class, read already */
        {"../../outside", "set/dog/ext"}, /* outside the data: followed */
    };
    for (int i = 0; i < 5; i++) {
        char *at = path_join(dir, links[i][1]);
        cr_assert_eq(symlink(links[i][0], at), 0);
        free(at);
    }
    char *root = path_join(dir, "set");
    char *warn_path = path_join(dir, "folder-warn.txt");
    FILE *warn = fopen(warn_path, "w+");
    cr_assert(warn);
    csv_opts o = CSV_OPTS_DEFAULT;
    o.warn = warn;
    dataset ds;
    errbuf e;
    cr_assert_eq(dataset_load(&ds, root, &o, &e), 0, "%s", e.msg);
    fclose(warn);
    cr_assert_eq(ds.nclasses, 3);
    int per_class[3] = {0};
    for (uint32_t i = 0; i < ds.n; i++)
        per_class[ds.rows[i].label]++;
    cr_assert_eq(ds.n, 5, "%u samples", ds.n);
    cr_assert(per_class[0] == 2 && per_class[1] == 2 && per_class[2] == 1,
              "cat %d, dog %d (c.jpg and the outside e.jpg), zebra %d", per_class[0], per_class[1],
              per_class[2]);
    dataset_free(&ds);
    char *notes = read_whole_file(warn_path, NULL, &e);
    cr_assert(notes, "%s", e.msg);
    cr_assert_eq(count_lines(notes), 1, "said once: %s", notes);
    cr_assert(strstr(notes, "did not follow 4 symlinked folders") && strstr(notes, "set/dog/"),
              "%s", notes);
    free(notes), free(warn_path), free(root);
}

/* --check lists every bad row (up to 20) with its line, not only the first:
 * a user fixing a CSV by hand wants them all at once */
Test(hostile_csv, check_lists_every_bad_row_and_counts_them)
{
    char text[4096] = "path,label\n";
    for (int i = 0; i < 30; i++) /* rows 2..31: every third one bad */
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s,%s\n",
                 i % 3 == 1 ? "" : "img.png", i % 3 == 2 ? "x" : "1");
    char *csv = write_text(dir, "bad.csv", text);
    run_result r;
    run_train_for(&r, 60, "--check", csv, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    char want[512];
    snprintf(want, sizeof want, "%s:3: empty path\n%s:4: label 'x' is not an integer\n", csv, csv);
    cr_expect(strstr(r.err, want), "%s", r.err);
    snprintf(want, sizeof want, "%s:31: label 'x' is not an integer\n", csv);
    cr_expect(strstr(r.err, want), "the last bad row too: %s", r.err);
    snprintf(want, sizeof want, "%s: 20 bad rows (listed above)", csv);
    cr_expect(strstr(r.err, want), "%s", r.err);
    /* and the good rows' files are still checked: img.png does not exist */
    snprintf(want, sizeof want, "%s:2: ", csv);
    cr_expect(strstr(r.err, want) && strstr(r.err, "img.png"), "%s", r.err);
    cr_expect(strstr(r.out, "check: 20 bad CSV rows and 10 files"), "%s", r.out);
    run_free(&r);
    /* over the limit: the first 20 and the count */
    char big[8192] = "path,label\n";
    for (int i = 0; i < 25; i++)
        snprintf(big + strlen(big), sizeof big - strlen(big), "img.png,\n");
    free(csv);
    csv = write_text(dir, "bad2.csv", big);
    run_train_for(&r, 60, "--check", csv, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    snprintf(want, sizeof want, "%s: no usable rows (25 bad; first: %s:2: empty label)", csv, csv);
    cr_expect(strstr(r.err, want), "%s", r.err);
    snprintf(want, sizeof want, "%s:21: empty label", csv);
    cr_expect(strstr(r.err, want), "%s", r.err);
    snprintf(want, sizeof want, "%s:22: empty label", csv);
    cr_expect(strstr(r.err, want) == NULL, "20 listed, no more: %s", r.err);
    run_free(&r);
    free(csv);
}

/* a header the detection misses (a path-like name, a label heading it does
 * not know) makes line 1 a row whose file cannot open: the message says
 * how to fix it */
Test(hostile_csv, an_undetected_header_row_gets_a_hint)
{
    char *csv = write_text(dir, "hdr.csv", "file.name,species\nimg.png,cat\nimg2.png,dog\n");
    run_result r;
    run_train_for(&r, 60, "--check", csv, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    char want[512];
    snprintf(want, sizeof want, "%s:1: ", csv);
    const char *at = strstr(r.err, want);
    cr_assert(at, "%s", r.err);
    cr_expect(strstr(at, "(line 1 was read as data: if it is a header, give --header)"), "%s",
              r.err);
    snprintf(want, sizeof want, "%s:2: ", csv);
    at = strstr(r.err, want);
    cr_assert(at, "%s", r.err);
    const char *eol = strchr(at, '\n');
    cr_expect(!strstr(at, "give --header") || (eol && strstr(at, "give --header") > eol),
              "only line 1 gets the hint: %s", r.err);
    run_free(&r);
    free(csv);
}
