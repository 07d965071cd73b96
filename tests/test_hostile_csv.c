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
    dataset ix;
    errbuf e;
    cr_assert_neq(dataset_load(&ix, big, NULL, &e), 0);
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
    dataset ix;
    errbuf e;
    cr_assert_neq(dataset_load(&ix, bad, NULL, &e), 0);
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
    dataset ix;
    errbuf e;
    int rc = dataset_load(&ix, csv, NULL, &e);
    if (rc == 0)
        dataset_free(&ix);
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
    dataset ix;
    errbuf e;
    cr_assert_eq(dataset_load(&ix, ok, NULL, &e), 0, "%s", e.msg);
    int32_t want[] = {0, 1, 2, 3, 4, 1000000, 5, 0};
    cr_assert_eq(ix.n, 8);
    for (uint32_t i = 0; i < ix.n; i++)
        cr_assert_eq(ix.rows[i].label, want[i], "row %u: %d", i, ix.rows[i].label);
    dataset_free(&ix);
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
