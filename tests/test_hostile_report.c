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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "common/util.h"
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
    const char *base[] = {train_bin(), "--model", "probe",  "--batch",       "4", "--workers",
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
