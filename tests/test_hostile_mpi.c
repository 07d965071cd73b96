/* test_hostile_mpi.c — ranks that were not given the same job, and a
 * --resume on data other than the checkpoint's (issue 26, items 4 and 19).
 *
 * The ranks run under a real `mpirun` with a different command line each
 * (Open MPI's MPMD form `-np 1 A : -np 1 B`), on a tiny set of real PNGs:
 * a CSV with fewer rows on rank 1 used to leave both ranks spinning
 * forever in collectives that never match; now every rank stops at
 * start-up with exit 2 and one message naming rank 1 and what differs.
 * Every run is bounded by run_argv's timeout, so a hang fails the test.
 * Skipped in a build without MPI (except the --resume tests, which need
 * one process only).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/helpers.h"
#include "tests/support/images.h"
#include "tests/support/mpirun.h"

static char *dir, *imgs;

#define NIMG 12

static void setup(void)
{
    dir = tmpdir_make();
    imgs = path_join(dir, "imgs");
    cr_assert_eq(mkdir(imgs, 0755), 0);
    for (int i = 0; i < NIMG; i++) {
        uint8_t *px = ti_picture(8, 8, 1, (uint64_t)i + 1);
        char name[32];
        snprintf(name, sizeof name, "%02d.png", i);
        free(ti_write_png(imgs, name, px, 8, 8, 1));
        free(px);
    }
    if (mpi_available())
        mpi_test_env();
}

static void teardown(void)
{
    spawn_kill_all();
    tmpdir_remove(dir);
    free(imgs);
}

TestSuite(hostile_mpi, .init = setup, .fini = teardown);

#define NEED_MPI()                                                                                 \
    do {                                                                                           \
        if (!mpi_available())                                                                      \
            cr_skip_test("built without MPI or no mpirun");                                        \
    } while (0)

/* a CSV of rows 0..n-1 (image i, label i % 3), labels of rows a and b
 * swapped when a != b, in text */
static void csv_text(char *text, size_t len, int n, int a, int b)
{
    snprintf(text, len, "path,label\n");
    for (int i = 0; i < n; i++) {
        int label = i % 3;
        if (a != b && i == a)
            label = b % 3;
        else if (a != b && i == b)
            label = a % 3;
        snprintf(text + strlen(text), len - strlen(text), "%02d.png,%d\n", i, label);
    }
}

/* that CSV as imgs/NAME; returns the path */
static char *csv_of(const char *name, int n, int a, int b)
{
    char text[4096];
    csv_text(text, sizeof text, n, a, b);
    return write_text(imgs, name, text);
}

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* the common options of a tiny run: 1 epoch of probe on 8x8 grey images */
#define TINY                                                                                       \
    "--model", "probe", "--channels", "1", "--batch", "4", "--workers", "0", "--epochs", "1"

/* mpirun: rank 0 runs train with args0, rank 1 with args1 (NULL-ended
 * lists), at most 60 s (a hang fails the test) */
static void run_two(run_result *r, const char *const *args0, const char *const *args1)
{
    char *argv[80];
    int n = 0;
    argv[n++] = (char *)mpirun_path();
    argv[n++] = "-q";
    for (int k = 0; k < 2; k++) {
        const char *const *args = k ? args1 : args0;
        if (k)
            argv[n++] = ":";
        argv[n++] = "-np";
        argv[n++] = "1";
        argv[n++] = (char *)train_bin();
        for (int i = 0; args[i] && n < 78; i++)
            argv[n++] = (char *)args[i];
    }
    argv[n] = NULL;
    run_argv(argv, NULL, 60, r);
}

/* both ranks refused at start-up: exit 2, rank 1 named once with `want` */
static void assert_refused(run_result *r, const char *want)
{
    cr_assert_eq(r->status, 2, "exit %d (signal %d), want 2\nstdout:\n%s\nstderr:\n%s", r->status,
                 r->signal, r->out, r->err);
    cr_assert(strstr(r->err, "rank 1 ("), "the differing rank is named:\n%s", r->err);
    cr_assert(strstr(r->err, want), "says what differs (%s):\n%s", want, r->err);
    cr_assert_eq(count(r->err, "every rank must train on the same data"), 1,
                 "said once for the job:\n%s", r->err);
    cr_assert_null(strstr(r->out, "| "), "no epoch ran:\n%s", r->out);
}

Test(hostile_mpi, ranks_given_csvs_of_different_lengths_stop_at_start_up)
{
    NEED_MPI();
    char *a = csv_of("a.csv", NIMG, 0, 0), *b = csv_of("b.csv", 8, 0, 0);
    const char *r0[] = {TINY, a, NULL}, *r1[] = {TINY, b, NULL};
    run_result r;
    run_two(&r, r0, r1);
    char want[600];
    snprintf(want, sizeof want, "%s has 8 samples, rank 0's %d", b, NIMG);
    assert_refused(&r, want);
    run_free(&r);
    free(a);
    free(b);
}

Test(hostile_mpi, ranks_given_the_same_count_of_other_rows_stop_at_start_up)
{
    NEED_MPI();
    /* two labels swapped: the same samples and classes, other data */
    char *a = csv_of("a.csv", NIMG, 0, 0), *b = csv_of("swapped.csv", NIMG, 1, 2);
    const char *r0[] = {TINY, a, NULL}, *r1[] = {TINY, b, NULL};
    run_result r;
    run_two(&r, r0, r1);
    assert_refused(&r, "has other rows than rank 0's");
    run_free(&r);
    free(a);
    free(b);
}

Test(hostile_mpi, ranks_given_other_validation_sets_or_transforms_stop_at_start_up)
{
    NEED_MPI();
    /* rank 1 reads a copy of the training CSV elsewhere, --root pointing at
     * the same images (a node-local copy): the same rows, so what it is
     * refused for is the validation set that follows them */
    char *a = csv_of("a.csv", NIMG, 0, 0), *va = csv_of("va.csv", 6, 0, 0),
         *vb = csv_of("vb.csv", 5, 0, 0), text[4096];
    csv_text(text, sizeof text, NIMG, 0, 0);
    char *copy = write_text(dir, "copy/a.csv", text);
    const char *r0[] = {TINY, "--val", va, a, NULL},
               *r1[] = {TINY, "--val", vb, "--root", imgs, copy, NULL};
    run_result r;
    run_two(&r, r0, r1);
    char want[600];
    snprintf(want, sizeof want, "--val %s has 5 samples, rank 0's 6", vb);
    assert_refused(&r, want);
    run_free(&r);
    /* the same data, another flip probability: other batches */
    const char *f0[] = {TINY, a, NULL}, *f1[] = {TINY, "--hflip", "0", a, NULL};
    run_two(&r, f0, f1);
    assert_refused(&r, "other image transforms than rank 0");
    run_free(&r);
    free(a);
    free(va);
    free(vb);
    free(copy);
}

/* ---------------------------------------------------------------- --resume on other data */

/* one epoch of the tiny run on csv, saved to ck */
static void save_after_one_epoch(const char *csv, const char *ck)
{
    run_result r;
    run_train(&r, TINY, "--save", ck, csv, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
}

Test(hostile_mpi, resume_on_an_edited_csv_says_what_changed_and_refuses)
{
    char *a = csv_of("r.csv", NIMG, 0, 0), *ck = path_join(dir, "r.ckpt");
    save_after_one_epoch(a, ck);
    run_result r;
    /* half the rows gone and two classes' labels swapped */
    char *half = csv_of("r.csv", NIMG / 2, 1, 2);
    run_train(&r, TINY, "--epochs", "2", "--resume", ck, a, NULL);
    cr_assert_eq(r.status, 2, "exit %d\n%s", r.status, r.err);
    char want[700];
    snprintf(want, sizeof want,
             "--resume %s: %s now has %d samples of 3 classes; the checkpoint "
             "was trained on %d samples of 3 classes",
             ck, a, NIMG / 2, NIMG);
    cr_assert(strstr(r.err, want), "want %s in:\n%s", want, r.err);
    cr_assert(strstr(r.err, "--resume-any-data"), "names the override:\n%s", r.err);
    cr_assert_null(strstr(r.out, "| "), "no epoch ran:\n%s", r.out);
    run_free(&r);
    /* all the rows, two labels swapped: the same counts, other rows */
    free(csv_of("r.csv", NIMG, 1, 2));
    run_train(&r, TINY, "--epochs", "2", "--resume", ck, a, NULL);
    cr_assert_eq(r.status, 2, "exit %d\n%s", r.status, r.err);
    cr_assert(strstr(r.err, "other rows (paths, labels or their order changed)"), "%s", r.err);
    run_free(&r);
    /* the override: a warning saying the same, and the run goes on */
    run_train(&r, TINY, "--epochs", "2", "--resume", ck, "--resume-any-data", a, NULL);
    cr_assert_eq(r.status, 0, "exit %d\n%s", r.status, r.err);
    cr_assert(strstr(r.err, "warning") && strstr(r.err, "other rows"), "%s", r.err);
    run_free(&r);
    free(half);
    free(a);
    free(ck);
}

Test(hostile_mpi, resume_on_the_same_rows_named_another_way_is_silent)
{
    char *a = csv_of("s.csv", NIMG, 0, 0), *ck = path_join(dir, "s.ckpt");
    save_after_one_epoch(a, ck);
    /* the same CSV through another spelling of its folder, and a copy of
     * it elsewhere with --root: the rows' paths are the same relative to
     * the data's folder */
    char *dotted = path_join(imgs, "./s.csv"), text[4096];
    csv_text(text, sizeof text, NIMG, 0, 0);
    char *copy = write_text(dir, "elsewhere/s.csv", text);
    run_result r;
    run_train(&r, TINY, "--epochs", "2", "--resume", ck, dotted, NULL);
    cr_assert_eq(r.status, 0, "exit %d\n%s", r.status, r.err);
    cr_assert_null(strstr(r.err, "differ"), "%s", r.err);
    cr_assert_null(strstr(r.err, "other rows"), "%s", r.err);
    run_free(&r);
    run_train(&r, TINY, "--epochs", "2", "--resume", ck, "--root", imgs, copy, NULL);
    cr_assert_eq(r.status, 0, "exit %d\n%s", r.status, r.err);
    cr_assert_null(strstr(r.err, "other rows"), "%s", r.err);
    run_free(&r);
    free(copy);
    free(dotted);
    free(a);
    free(ck);
}

/* a folder of class folders c0, c1 (NIMG / 2 images each) at dir/name */
static char *class_tree(const char *name)
{
    char *root = path_join(dir, name);
    cr_assert_eq(mkdir(root, 0755), 0);
    for (int c = 0; c < 2; c++) {
        char sub[16];
        snprintf(sub, sizeof sub, "c%d", c);
        char *cd = path_join(root, sub);
        cr_assert_eq(mkdir(cd, 0755), 0);
        for (int i = c; i < NIMG; i += 2) {
            uint8_t *px = ti_picture(8, 8, 1, (uint64_t)i + 1);
            char f[32];
            snprintf(f, sizeof f, "%02d.png", i);
            free(ti_write_png(cd, f, px, 8, 8, 1));
            free(px);
        }
        free(cd);
    }
    return root;
}

Test(hostile_mpi, a_folder_data_set_resumed_from_another_path_is_the_same_data)
{
    /* the fingerprint keeps class/file, not the folder's own name or
     * place: a copy of the tree elsewhere (and its path with a trailing
     * slash) resumes silently; a tree with a file moved to the other
     * class does not */
    char *a = class_tree("tree_a"), *b = class_tree("tree_b"), *ck = path_join(dir, "t.ckpt");
    save_after_one_epoch(a, ck);
    char slashed[600];
    snprintf(slashed, sizeof slashed, "%s/", b);
    run_result r;
    run_train(&r, TINY, "--epochs", "2", "--resume", ck, slashed, NULL);
    cr_assert_eq(r.status, 0, "exit %d\n%s", r.status, r.err);
    cr_assert_null(strstr(r.err, "other rows"), "%s", r.err);
    run_free(&r);
    char from[700], to[700];
    snprintf(from, sizeof from, "%s/c0/00.png", b);
    snprintf(to, sizeof to, "%s/c1/00.png", b);
    cr_assert_eq(rename(from, to), 0);
    run_train(&r, TINY, "--epochs", "2", "--resume", ck, b, NULL);
    cr_assert_eq(r.status, 2, "a file moved to another class resumed: %s", r.err);
    run_free(&r);
    free(a);
    free(b);
    free(ck);
}
