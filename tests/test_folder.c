/* test_folder.c — a folder of class folders as the data set:
 * the index torchvision's ImageFolder would build, on real files, and the
 * real binary's messages and --check on such a folder. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "loader/dataset.h"
#include "tests/support/helpers.h"
#include "tests/support/images.h"

static char *dir;

static void setup(void) { dir = tmpdir_make(); }
static void teardown(void) { tmpdir_remove(dir); }

TestSuite(folder, .init = setup, .fini = teardown);

/* dir/name: an h x w RGB JPEG. */
static void jpeg(const char *name, int h, int w, uint64_t seed)
{
    uint8_t *px = ti_picture(h, w, 3, seed);
    free(ti_write_jpeg(dir, name, px, h, w, TJPF_RGB, TJSAMP_420, 90, 0));
    free(px);
}

static const char *rel(const dataset *ds, uint32_t i)
{
    const char *p = dataset_path(ds, i);
    size_t n = strlen(dir);
    cr_assert(strncmp(p, dir, n) == 0 && p[n] == '/', "path %s is not under %s", p, dir);
    return p + n + 1;
}

Test(folder, classes_are_sorted_folder_names_and_images_are_found_at_any_depth)
{
    jpeg("set/zebra/b.jpg", 16, 16, 1);
    jpeg("set/zebra/a.JPEG", 16, 16, 2);
    jpeg("set/cat/x/deep.jpg", 16, 16, 3);
    jpeg("set/cat/1.jpg", 16, 16, 4);
    jpeg("set/ant/p.png.jpg", 16, 16, 5);
    free(write_text(dir, "set/ant/readme.txt", "not an image\n"));
    free(write_text(dir, "set/ant/.hidden.jpg", "hidden\n"));
    free(write_text(dir, "set/.git/config", "hidden folder\n"));
    free(write_text(dir, "set/list.csv", "a file beside the classes\n"));
    char *root = path_join(dir, "set");
    dataset ds;
    errbuf e = {{0}};
    char *notes = NULL;
    size_t notes_len = 0;
    FILE *warn = open_memstream(&notes, &notes_len);
    csv_opts o = CSV_OPTS_DEFAULT;
    o.warn = warn;
    cr_assert_eq(dataset_load(&ds, root, &o, &e), 0, "%s", e.msg);
    fclose(warn);
    cr_assert(ds.folder && ds.names);
    cr_assert_eq(ds.nclasses, 3);
    char buf[16];
    cr_assert_str_eq(dataset_class_name(&ds, 0, buf, sizeof buf), "ant");
    cr_assert_str_eq(dataset_class_name(&ds, 1, buf, sizeof buf), "cat");
    cr_assert_str_eq(dataset_class_name(&ds, 2, buf, sizeof buf), "zebra");
    cr_assert_eq(ds.n, 5, "hidden and non-image files are not samples");
    /* folder path, then name: cat's own files before cat/x's (os.walk sorted) */
    const char *want[5] = {"set/ant/p.png.jpg", "set/cat/1.jpg", "set/cat/x/deep.jpg",
                           "set/zebra/a.JPEG", "set/zebra/b.jpg"};
    const int labels[5] = {0, 1, 1, 2, 2};
    for (uint32_t i = 0; i < 5; i++) {
        cr_assert_str_eq(rel(&ds, i), want[i]);
        cr_assert_eq(ds.rows[i].label, labels[i], "row %u", i);
    }
    cr_assert_eq(ds.skipped_files, 2, "readme.txt and list.csv, not the hidden ones");
    cr_assert(strstr(notes, "skipped 2 files that are not images in a class folder") &&
                  strstr(notes, "set/list.csv: not in a class folder"),
              "%s", notes);
    dataset_free(&ds);
    free(notes), free(root);
}

Test(folder, symlinks_are_followed_and_a_loop_is_skipped)
{
    jpeg("real/dog/a.jpg", 16, 16, 1);
    jpeg("elsewhere/b.jpg", 16, 16, 2);
    jpeg("set/cat/c.jpg", 16, 16, 3);
    char *src = path_join(dir, "real/dog"), *link = path_join(dir, "set/dog");
    cr_assert_eq(symlink(src, link), 0);
    char *fsrc = path_join(dir, "elsewhere/b.jpg"), *flink = path_join(dir, "set/cat/b.jpg");
    cr_assert_eq(symlink(fsrc, flink), 0);
    char *loop = path_join(dir, "set/cat/again");
    char *catdir = path_join(dir, "set/cat");
    cr_assert_eq(symlink(catdir, loop), 0);
    char *root = path_join(dir, "set");
    dataset ds;
    errbuf e = {{0}};
    cr_assert_eq(dataset_load(&ds, root, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(ds.nclasses, 2);
    cr_assert_eq(ds.n, 3, "b.jpg through its link, dog through its link, and the loop once");
    cr_assert_str_eq(rel(&ds, 0), "set/cat/b.jpg");
    cr_assert_str_eq(rel(&ds, 1), "set/cat/c.jpg");
    cr_assert_str_eq(rel(&ds, 2), "set/dog/a.jpg");
    cr_assert_eq(ds.skipped_files, 0, "the loop is not a skipped file (its own note)");
    dataset_free(&ds);
    free(src), free(link), free(fsrc), free(flink), free(loop), free(catdir), free(root);
}

Test(folder, an_empty_class_or_no_class_folders_is_an_error_naming_the_folder)
{
    jpeg("set/cat/a.jpg", 16, 16, 1);
    free(write_text(dir, "set/dog/notes.txt", "no images here\n"));
    char *root = path_join(dir, "set");
    dataset ds;
    errbuf e = {{0}};
    cr_assert_eq(dataset_load(&ds, root, NULL, &e), -1);
    cr_assert(strstr(e.msg, "set/dog: no image files in this class folder"), "%s", e.msg);
    cr_assert_null(ds.rows);
    jpeg("flat/a.jpg", 16, 16, 1);
    char *flat = path_join(dir, "flat");
    cr_assert_eq(dataset_load(&ds, flat, NULL, &e), -1);
    cr_assert(strstr(e.msg, "flat: no class folders"), "%s", e.msg);
    free(root), free(flat);
}

Test(folder, row_messages_name_the_image_where_a_csv_names_its_line)
{
    jpeg("set/cat/a.jpg", 16, 16, 1);
    char *root = path_join(dir, "set");
    dataset ds;
    errbuf e = {{0}};
    cr_assert_eq(dataset_load(&ds, root, NULL, &e), 0, "%s", e.msg);
    char msg[ERR_MAX], out[2 * ERR_MAX];
    snprintf(msg, sizeof msg, "%s: corrupt JPEG", dataset_path(&ds, 0));
    cr_assert_str_eq(dataset_row_message(&ds, 0, msg, out, sizeof out), msg,
                     "the path is not said twice");
    char *want;
    cr_assert(asprintf(&want, "%s: class 'x' is odd", dataset_path(&ds, 0)) > 0);
    cr_assert_str_eq(dataset_row_message(&ds, 0, "class 'x' is odd", out, sizeof out), want);
    dataset_free(&ds);
    free(want), free(root);
}

/* The binary: --check on a folder names each bad image by its path, and a
 * training run takes folders for both sets, printing the classes. */
Test(folder, check_and_training_take_a_folder_wherever_a_csv_goes)
{
    for (int k = 0; k < 4; k++) {
        char name[64];
        snprintf(name, sizeof name, "train/%s/%d.jpg", k % 2 ? "dog" : "cat", k);
        jpeg(name, 40, 48, (uint64_t)k + 1);
        snprintf(name, sizeof name, "val/%s/%d.jpg", k % 2 ? "dog" : "cat", k);
        jpeg(name, 48, 40, (uint64_t)k + 11);
    }
    char *train = path_join(dir, "train"), *val = path_join(dir, "val");
    run_result r;
    run_train(&r, "--resize", "32x32", "--batch", "2", "--epochs", "1", "--workers", "1", "--val",
              val, train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "classes (2, sorted): 0=cat, 1=dog"), "%s", r.out);
    cr_expect(strstr(r.err, "class folder:") == NULL, "no CSV option given: %s", r.err);
    run_free(&r);
    /* a CSV option given for a folder is not dropped silently */
    run_train(&r, "--resize", "32x32", "--batch", "2", "--epochs", "1", "--root", dir, train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    char *note = NULL;
    cr_assert(asprintf(&note,
                       "train: note: %s is a class folder: --root and the other CSV options do "
                       "not apply to it (they do to a CSV given with --val)",
                       train) > 0);
    cr_expect(strstr(r.err, note), "%s", r.err);
    free(note);
    run_free(&r);

    free(write_text(dir, "train/dog/bad.jpg", "not a picture\n"));
    free(write_text(dir, "train/dog/notes.md", "skipped\n"));
    run_train(&r, "--check", train, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    char *bad = path_join(dir, "train/dog/bad.jpg"), *line;
    cr_assert(asprintf(&line, "\n%s: not an image (a text file)\n", bad) > 0);
    char *err = NULL;
    cr_assert(asprintf(&err, "\n%s", r.err) > 0);
    cr_assert(strstr(err, line), "the image path is the location: %s", r.err);
    cr_assert(strstr(r.err, "skipped 1 file that is not an image") &&
                  strstr(r.out, "5 images, 2 class folders"),
              "%s%s", r.out, r.err);
    run_free(&r);
    run_train(&r, "--resize", "32x32", "--batch", "2", "--epochs", "1", train, NULL);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, line + 1), "training names it the same way: %s", r.err);
    run_free(&r);
    free(train), free(val), free(bad), free(line), free(err);
}

/* tools/photo-set on two photographs (generated here: the real ones come
 * with `make photos`, not with `make deps`): a folder per class, the CSV
 * beside it listing the same files, shorter sides 300-500, deterministic,
 * and train reads both forms as the same set. */
Test(folder, photo_set_makes_a_class_folder_set_and_its_csv_deterministically)
{
    for (int k = 0; k < 2; k++) {
        char name[64];
        snprintf(name, sizeof name, "src/Photo %d.jpg", k);
        jpeg(name, 700, 900, (uint64_t)k + 5);
    }
    char *bin = path_join(tools_dir(), "photo_set"), *src = path_join(dir, "src"),
         *out = path_join(dir, "set"), *out2 = path_join(dir, "set2");
    char *argv[] = {bin, "--src", src, "--out", out, "--per-class", "10", "--val", "2", NULL};
    run_result r;
    run_argv(argv, NULL, 120, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    argv[4] = out2;
    run_argv(argv, NULL, 120, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    char *train = path_join(out, "train"), *csv = path_join(out, "train.csv");
    dataset a, b;
    errbuf e = {{0}};
    cr_assert_eq(dataset_load(&a, train, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(dataset_load(&b, csv, NULL, &e), 0, "%s", e.msg);
    cr_assert(a.n == 20 && b.n == 20 && a.nclasses == 2 && b.nclasses == 2, "%u %u", a.n, b.n);
    char buf[16];
    cr_assert_str_eq(dataset_class_name(&a, 0, buf, sizeof buf), "photo_0");
    int progressive = 0;
    for (uint32_t i = 0; i < 20; i++) {
        cr_assert_str_eq(dataset_path(&a, i), dataset_path(&b, i), "same files in the same order");
        cr_assert_eq(a.rows[i].label, b.rows[i].label);
        int w, h, c;
        cr_assert_eq(img_probe(dataset_path(&a, i), 0, &w, &h, &c, &e), 0, "%s", e.msg);
        int s = w < h ? w : h;
        cr_assert(s >= 300 && s <= 500, "%s is %dx%d", dataset_path(&a, i), w, h);
        img_params p = {.channels = 3};
        int bh, bw;
        uint8_t *px =
            ti_base(dataset_path(&a, i), &p, &bh, &bw, &e); /* every file decodes cleanly */
        cr_assert_not_null(px, "%s", e.msg);
        free(px);
        char other[4200];
        snprintf(other, sizeof other, "%s%s", out2, dataset_path(&a, i) + strlen(out));
        size_t l1, l2;
        char *x = read_whole_file(dataset_path(&a, i), &l1, NULL),
             *y = read_whole_file(other, &l2, NULL);
        cr_assert(x && y && l1 == l2 && memcmp(x, y, l1) == 0, "%s differs between runs", other);
        for (size_t k = 0; k + 1 < l1; k++)
            if ((uint8_t)x[k] == 0xFF && (uint8_t)x[k + 1] == 0xC2) {
                progressive++;
                break;
            }
        free(x), free(y);
    }
    cr_assert(progressive > 0 && progressive < 20, "progressive and baseline files mixed: %d",
              progressive);
    dataset_free(&a);
    dataset_free(&b);
    free(bin), free(src), free(out), free(out2), free(train), free(csv);
}

/* The class list of a folder goes into checkpoints like a CSV's: resuming
 * on the same folder works, on a folder whose class folders are named
 * differently it is refused, naming both. */
Test(folder, checkpoints_keep_the_folders_class_names)
{
    for (int k = 0; k < 4; k++) {
        char name[64];
        snprintf(name, sizeof name, "a/%s/%d.jpg", k % 2 ? "dog" : "cat", k);
        jpeg(name, 32, 32, (uint64_t)k + 1);
        snprintf(name, sizeof name, "b/%s/%d.jpg", k % 2 ? "dog" : "cow", k);
        jpeg(name, 32, 32, (uint64_t)k + 1);
    }
    char *a = path_join(dir, "a"), *b = path_join(dir, "b"), *ck = path_join(dir, "m.ckpt");
    run_result r;
    run_train(&r, "--batch", "2", "--epochs", "1", "--lr-schedule", "const", "--save", ck, a, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run_train(&r, "--batch", "2", "--epochs", "2", "--lr-schedule", "const", "--resume", ck, a,
              NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run_train(&r, "--batch", "2", "--epochs", "2", "--lr-schedule", "const", "--resume", ck, b,
              NULL);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "'cat' in the checkpoint, 'cow' in this run"), "%s", r.err);
    run_free(&r);
    free(a), free(b), free(ck);
}
