/* test_shards.c — WebDataset tar shards: tools/shard writes them, train
 * reads them (loader/dataset_shards.c) with the batches it gives the same
 * images through a CSV, and the peers agree: the `webdataset` library and
 * DALI read ours, and train reads webdataset's and plain tarfile's
 * (tests/shards_peer.py; a peer that is not installed skips its test).
 * Failures name shard and member. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
TestSuite(shards, .init = setup, .fini = teardown, .timeout = 180);

#define NSET 14
static const char *const classes[] = {"cat", "dog", "eel"};

/* dir/set: NSET 24x32 images, JPEGs and PNGs, and data.csv (path,label
 * with class names) listing them in a fixed order. */
static char *make_set(void)
{
    char csv[4096] = "path,label\n";
    for (int i = 0; i < NSET; i++) {
        char name[64];
        uint8_t *px = ti_picture(24, 32, 3, 100 + (uint64_t)i);
        if (i % 3 == 2) {
            snprintf(name, sizeof name, "set/imgs/%02d.png", i);
            free(ti_write_png(dir, name, px, 24, 32, 3));
        } else {
            snprintf(name, sizeof name, "set/imgs/%02d.jpg", i);
            free(ti_write_jpeg(dir, name, px, 24, 32, TJPF_RGB, TJSAMP_420, 90, 0));
        }
        free(px);
        snprintf(csv + strlen(csv), sizeof csv - strlen(csv), "%s,%s\n", name + 4,
                 classes[(i * 7) % 3]);
    }
    return write_text(dir, "set/data.csv", csv);
}

/* tools/shard DATA into dir/OUT with extra arguments (NULL-ended). */
static void shard(const char *data, const char *out, const char *a1, const char *a2)
{
    char *bin = path_join(tools_dir(), "shard"), *o = path_join(dir, out);
    char *argv[] = {bin, "--out", o, (char *)data, (char *)a1, (char *)a2, NULL};
    run_result r;
    run_argv(argv, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "shard %s: %s", data, r.err);
    run_free(&r);
    free(bin);
    free(o);
}

static char *slurp(const char *path, size_t *len)
{
    errbuf e;
    char *d = read_whole_file(path, len, &e);
    cr_assert(d, "%s", e.msg);
    return d;
}

static int same_file_bytes(const char *a, const char *b)
{
    size_t la, lb;
    char *x = slurp(a, &la), *y = slurp(b, &lb);
    int same = la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

/* train --loader-only over data with a random crop and flips, batches
 * into dir/dump, under --order ORDER (NULL: the default; shards: with
 * --shuffle-buffer 3); returns the dump's path. */
static char *dump_with(const char *data, const char *workers, const char *mode, const char *order,
                       const char *tag)
{
    char name[64];
    snprintf(name, sizeof name, "dump-%s-%s-%s-%s", tag, workers, mode, order ? order : "");
    char *dump = path_join(dir, name);
    char *argv[] = {(char *)train_bin(),
                    "--loader-only",
                    "--epochs",
                    "2",
                    "--batch",
                    "4",
                    "--seed",
                    "5",
                    "--workers",
                    (char *)workers,
                    "--mode",
                    (char *)mode,
                    "--random-crop",
                    "--crop",
                    "20",
                    "--hflip",
                    "0.5",
                    "--no-progress",
                    "--dump-batches",
                    dump,
                    (char *)data,
                    "--order",
                    (char *)order,
                    "--shuffle-buffer",
                    "3",
                    NULL};
    if (!order) /* the default order: the arguments end at the data */
        argv[21] = NULL;
    else if (strcmp(order, "shards"))
        argv[23] = NULL;
    run_result r;
    run_argv(argv, NULL, 120, &r);
    cr_assert_eq(r.status, 0, "%s, workers %s, %s, --order %s: %s", data, workers, mode,
                 order ? order : "(default)", r.err);
    run_free(&r);
    return dump;
}

static char *dump_run(const char *data, const char *workers, const char *mode, const char *tag)
{
    return dump_with(data, workers, mode, NULL, tag);
}

Test(shards, the_tool_writes_deterministic_ustar_shards_with_a_wds2idx_index_and_the_classes)
{
    char *csv = make_set();
    shard(csv, "a", "--shard-samples", "4");
    shard(csv, "b", "--shard-samples", "4");
    const char *files[] = {"train-000000.tar", "train-000000.idx", "train-000003.tar",
                           "train-000003.idx", "classes.txt"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char *a = path_join(dir, "a"), *b = path_join(dir, "b");
        char *pa = path_join(a, files[i]), *pb = path_join(b, files[i]);
        cr_assert(same_file_bytes(pa, pb), "%s differs between two runs on the same input",
                  files[i]);
        free(a), free(b), free(pa), free(pb);
    }
    char *four = path_join(dir, "a/train-000004.tar");
    cr_assert(access(four, F_OK) != 0, "14 samples at 4 a shard make 4 shards, not 5");
    size_t len;
    char *cls_path = path_join(dir, "a/classes.txt"), *cls = slurp(cls_path, &len);
    cr_assert_str_eq(cls, "cat\ndog\neel\n");
    /* the index: wds2idx's v1.2 lines, offsets of the members' data */
    char *idx_path = path_join(dir, "a/train-000001.idx"), *idx = slurp(idx_path, &len);
    cr_assert(!strncmp(idx, "v1.2 4\ncls 512 1 000004.cls jpg 1536 ", 37), "%s", idx);
    cr_assert_eq(count_lines(idx), 5, "%s", idx);
    /* the rows read back: same labels and bytes as the CSV's files */
    dataset sh, cv;
    errbuf e;
    char *spec = path_join(dir, "a/train-{000000..000003}.tar");
    cr_assert_eq(dataset_load(&sh, spec, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(dataset_load(&cv, csv, NULL, &e), 0, "%s", e.msg);
    cr_assert(sh.members && sh.names && sh.nshards == 4);
    cr_assert_eq(sh.n, NSET);
    cr_assert_eq(sh.nclasses, 3);
    for (uint32_t i = 0; i < sh.n; i++) {
        cr_assert_eq(sh.rows[i].label, cv.rows[i].label, "row %u", i);
        size_t fl;
        char *want = slurp(dataset_path(&cv, i), &fl);
        cr_assert_eq(sh.members[i].len, fl, "row %u", i);
        int fd = open(dataset_path(&sh, i), O_RDONLY);
        char *got = xmalloc(fl);
        cr_assert_eq(pread(fd, got, fl, (off_t)sh.members[i].off), (ssize_t)fl);
        close(fd);
        cr_assert(!memcmp(got, want, fl), "row %u: the member is not the file's bytes", i);
        free(got), free(want);
    }
    dataset_free(&sh), dataset_free(&cv);
    free(spec), free(idx), free(idx_path), free(cls), free(cls_path), free(four), free(csv);
}

Test(shards, a_run_over_shards_gives_the_batches_of_the_csv_for_0_and_2_workers_and_preload)
{
    char *csv = make_set();
    shard(csv, "s", "--shard-samples", "5");
    char *spec = path_join(dir, "s/train-{000000..000002}.tar");
    struct {
        const char *workers, *mode;
    } cfg[] = {{"0", "lazy"}, {"2", "lazy"}, {"2", "preload"}};
    for (size_t k = 0; k < sizeof cfg / sizeof *cfg; k++) {
        char *a = dump_run(csv, cfg[k].workers, cfg[k].mode, "csv");
        char *b = dump_run(spec, cfg[k].workers, cfg[k].mode, "shards");
        cr_assert(same_file_bytes(a, b),
                  "workers %s, %s: the shards' batches differ from the CSV's", cfg[k].workers,
                  cfg[k].mode);
        free(a), free(b);
    }
    /* the index is a shortcut, not a source of other rows */
    for (int k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "s/train-%06d.idx", k);
        char *p = path_join(dir, name);
        cr_assert_eq(unlink(p), 0);
        free(p);
    }
    char *a = dump_run(csv, "2", "lazy", "csv2");
    char *b = dump_run(spec, "2", "lazy", "noidx");
    cr_assert(same_file_bytes(a, b), "without the index (headers read): other batches");
    free(a), free(b), free(spec), free(csv);
}

/* The rows of dir/s/train-000000.tar with its index replaced by `idx`. */
static void expect_headers_read(const dataset *want, const char *idx, const char *why)
{
    char *tar = path_join(dir, "s/train-000000.tar");
    free(write_text(dir, "s/train-000000.idx", idx)); /* written after the shard: not stale */
    dataset got;
    errbuf e;
    cr_assert_eq(dataset_load(&got, tar, NULL, &e), 0, "%s: %s", why, e.msg);
    cr_assert_eq(got.n, want->n, "%s", why);
    for (uint32_t i = 0; i < got.n; i++)
        cr_assert(got.members[i].off == want->members[i].off &&
                      got.members[i].len == want->members[i].len &&
                      !strcmp(got.strs + got.members[i].name, want->strs + want->members[i].name),
                  "%s: row %u is not the headers'", why, i);
    dataset_free(&got);
    free(tar);
}

Test(shards, an_index_that_does_not_fit_its_shard_is_passed_over_for_the_headers)
{
    char *csv = make_set();
    shard(csv, "s", "--shard-samples", "5");
    char *tar = path_join(dir, "s/train-000000.tar"), *idx = path_join(dir, "s/train-000000.idx");
    size_t len;
    char *good = slurp(idx, &len);
    cr_assert_eq(unlink(idx), 0);
    dataset want;
    errbuf e;
    cr_assert_eq(dataset_load(&want, tar, NULL, &e), 0, "%s", e.msg);
    /* a size that would wrap the offset past the end of the shard */
    char *bad = xstrdup(good), *at = strstr(bad, " 000001.cls jpg ");
    cr_assert(at);
    char huge[4096];
    at += strlen(" 000001.cls jpg ");
    const char *size = strchr(at, ' ') + 1;
    snprintf(huge, sizeof huge, "%.*s18446744073709551615%s", (int)(size - bad), bad,
             strchr(size, ' '));
    expect_headers_read(&want, huge, "a member's size past the end");
    /* another sample count than it lists */
    char *count = xstrdup(good);
    count[5] = '4';
    expect_headers_read(&want, count, "a wrong sample count");
    expect_headers_read(&want, "v1.1 5\n", "another version");
    /* an index whose first member's name is not the shard's */
    char *misnamed = xstrdup(good);
    memcpy(strstr(misnamed, "000000.cls"), "000009.cls", 10);
    expect_headers_read(&want, misnamed, "a name not the shard's");
    free(misnamed);
    /* another shard's index */
    char *other_path = path_join(dir, "s/train-000001.idx"), *other = slurp(other_path, &len);
    expect_headers_read(&want, other, "another shard's index");
    free(other), free(other_path);
    /* the good index gives the same rows */
    expect_headers_read(&want, good, "the tool's own index");
    /* ... and is what is read: a name changed in it shows */
    char *renamed = xstrdup(good);
    memcpy(strstr(renamed, "000001.jpg"), "000001.JPG", 10);
    free(write_text(dir, "s/train-000000.idx", renamed));
    dataset got;
    cr_assert_eq(dataset_load(&got, tar, NULL, &e), 0, "%s", e.msg);
    cr_assert_str_eq(got.strs + got.members[1].name, "000001.JPG");
    dataset_free(&got);
    free(renamed);
    dataset_free(&want);
    free(count), free(bad), free(good), free(idx), free(tar), free(csv);
}

Test(shards, a_comma_list_and_brace_alternatives_name_the_same_shards_as_a_range)
{
    char *csv = make_set();
    shard(csv, "s", "--shard-samples", "5");
    char *range = path_join(dir, "s/train-{000000..000002}.tar");
    char *alt = path_join(dir, "s/train-00000{0,1,2}.tar");
    char list[4096];
    snprintf(list, sizeof list, "%s/s/train-000000.tar,%s/s/train-00000{1..2}.tar", dir, dir);
    /* a list file: names relative to its folder, a pattern, comments */
    char *file = write_text(dir, "s/shards.txt",
                            "# training shards\ntrain-000000.tar\n\n  train-00000{1..2}.tar\n");
    dataset x, y, z, f;
    errbuf e;
    cr_assert_eq(dataset_load(&x, range, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(dataset_load(&y, alt, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(dataset_load(&z, list, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(dataset_load(&f, file, NULL, &e), 0, "%s", e.msg);
    cr_assert(x.n == NSET && y.n == NSET && z.n == NSET && f.n == NSET);
    cr_assert_eq(x.content_hash, y.content_hash);
    cr_assert_eq(x.content_hash, z.content_hash);
    cr_assert_eq(x.content_hash, f.content_hash);
    cr_assert(dataset_is_shards(file) && !dataset_is_shards(csv), "told apart by the first line");
    dataset_free(&f);
    free(file);
    cr_assert(dataset_is_shards("a.tar") && dataset_is_shards("x/{0..3}.tar"));
    cr_assert(!dataset_is_shards("data.csv") && !dataset_is_shards("a.tar,b.csv"));
    dataset_free(&x), dataset_free(&y), dataset_free(&z);
    free(range), free(alt), free(csv);
}

/* Run the peer script with pyenv's python3 (where webdataset and DALI
 * live); 77: the peer is not installed. */
static int peer(run_result *r, const char *a1, const char *a2, const char *a3, const char *a4,
                const char *a5, const char *a6)
{
    char *script = path_join(source_root(), "tests/shards_peer.py");
    char *argv[] = {"/usr/bin/env", "python3",  script,     (char *)a1, (char *)a2,
                    (char *)a3,     (char *)a4, (char *)a5, (char *)a6, NULL};
    run_argv(argv, NULL, 150, r);
    free(script);
    return r->status;
}

Test(shards, shards_written_by_the_tool_are_read_by_the_webdataset_library)
{
    char *csv = make_set();
    shard(csv, "s", "--shard-samples", "5");
    char *spec = path_join(dir, "s/train-{000000..000002}.tar");
    run_result r;
    if (peer(&r, "read-wds", spec, csv, NULL, NULL, NULL) == 77)
        cr_skip_test("python3 has no webdataset module (make test-build installs it: "
                     "build/shard-peers.stamp)");
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "ok 14"), "%s", r.out);
    run_free(&r);
    free(spec), free(csv);
}

Test(shards, shards_written_by_the_tool_are_read_by_dali_with_their_index)
{
    char *csv = make_set();
    shard(csv, "s", "--shard-samples", "5");
    char *t[3];
    for (int k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "s/train-%06d.tar", k);
        t[k] = path_join(dir, name);
    }
    run_result r;
    if (peer(&r, "read-dali", csv, t[0], t[1], t[2], NULL) == 77)
        cr_skip_test("python3 has no nvidia.dali (make bench-deps installs it)");
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "ok 14"), "%s", r.out);
    run_free(&r);
    for (int k = 0; k < 3; k++)
        free(t[k]);
    free(csv);
}

Test(shards, the_index_is_the_one_dalis_wds2idx_writes_byte_for_byte)
{
    char *csv = make_set();
    shard(csv, "s", "--shard-samples", "5");
    char *tar = path_join(dir, "s/train-000001.tar"), *ours = path_join(dir, "s/train-000001.idx");
    char *theirs = path_join(dir, "wds2idx.idx");
    char *argv[] = {"/usr/bin/env",
                    "python3",
                    "-c",
                    "import sys\n"
                    "try:\n    import wds2idx\nexcept ImportError:\n    sys.exit(77)\n"
                    "wds2idx.IndexCreator(sys.argv[1], sys.argv[2], verbose=False).create_index()",
                    tar,
                    theirs,
                    NULL};
    run_result r;
    run_argv(argv, NULL, 60, &r);
    if (r.status == 77)
        cr_skip_test("python3 has no wds2idx (DALI's; make bench-deps installs it)");
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_assert(same_file_bytes(ours, theirs), "tools/shard's index differs from wds2idx's");
    run_free(&r);
    free(tar), free(ours), free(theirs), free(csv);
}

Test(shards, shards_written_by_webdataset_and_by_tarfile_are_read_by_train_as_the_csv)
{
    char *csv = make_set();
    char *out = path_join(dir, "wds");
    run_result r;
    int wds = peer(&r, "write-wds", out, csv, "6", NULL, NULL) != 77;
    if (wds) {
        cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
        char *spec = path_join(dir, "wds-{000000..000002}.tar");
        const char *workers[] = {"0", "2"};
        for (int k = 0; k < 2; k++) {
            char *a = dump_run(csv, workers[k], "lazy", "csv");
            char *b = dump_run(spec, workers[k], "lazy", "wds");
            cr_assert(same_file_bytes(a, b),
                      "workers %s: webdataset's shards give other batches than the CSV",
                      workers[k]);
            free(a), free(b);
        }
        free(spec);
    }
    run_free(&r);
    /* tarfile (PAX headers, a folder entry, the image before its label,
     * keys inside a folder), with Debian's python3: no peer needed */
    char *tar = path_join(dir, "plain.tar"),
         *script = path_join(source_root(), "tests/shards_peer.py");
    char *argv[] = {"/usr/bin/python3", script, "write-tar", tar, csv, NULL};
    run_argv(argv, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    run_free(&r);
    /* class ids without classes.txt: the CSV's names are sorted, so the ids agree */
    char *a = dump_run(csv, "2", "lazy", "csv3");
    char *b = dump_run(tar, "2", "lazy", "tarfile");
    cr_assert(same_file_bytes(a, b), "tarfile's shard gives other batches than the CSV");
    free(a), free(b), free(tar), free(script), free(out), free(csv);
    if (!wds)
        cr_skip_test("python3 has no webdataset module: only the tarfile shard was read");
}

/* ---------------------------------------------------------------- failures */

/* A copy of dir/s/train-000000.tar cut to `keep` bytes, and of its
 * index, whole and written after it (so not stale by its time: the reader
 * must see that it does not fit the shard). */
static char *cut_shard(const char *name, off_t keep)
{
    char *src = path_join(dir, "s/train-000000.tar"), *dst = path_join(dir, name);
    size_t len;
    char *d = slurp(src, &len);
    cr_assert((size_t)keep < len);
    free(write_file(dir, name, d, (size_t)keep));
    free(d), free(src);
    char idx[64];
    snprintf(idx, sizeof idx, "%.*s.idx", (int)strlen(name) - 4, name);
    src = path_join(dir, "s/train-000000.idx");
    d = slurp(src, &len);
    free(write_file(dir, idx, d, len));
    free(d), free(src);
    return dst;
}

Test(shards, a_truncated_shard_names_shard_and_member_and_skip_bad_keeps_the_whole_samples)
{
    char *csv = make_set();
    shard(csv, "s", "--shard-samples", "5");
    /* 40 bytes into the third sample's image, 000002.png */
    dataset ds;
    errbuf e;
    char *first = path_join(dir, "s/train-000000.tar");
    cr_assert_eq(dataset_load(&ds, first, NULL, &e), 0, "%s", e.msg);
    cr_assert_str_eq(ds.strs + ds.members[2].name, "000002.png");
    char *cut = cut_shard("cut.tar", (off_t)ds.members[2].off + 40);
    dataset_free(&ds);
    free(first);
    run_result r;
    run_train(&r, "--loader-only", "--no-progress", cut, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    char want[4200];
    snprintf(want, sizeof want, "%s: member 000002.png: truncated", cut);
    cr_assert(strstr(r.err, want), "wanted '%s' in: %s", want, r.err);
    run_free(&r);
    run_train(&r, "--loader-only", "--no-progress", "--skip-bad", cut, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.err, "skipped 1 bad sample") && strstr(r.err, want), "%s", r.err);
    cr_assert(strstr(r.out, "cut.tar, 2 samples"), "the two whole samples stay: %s", r.out);
    run_free(&r);
    free(cut), free(csv);
}

Test(shards, a_sample_without_a_label_a_missing_shard_and_a_corrupt_jpeg_are_named)
{
    char *csv = make_set();
    shard(csv, "s", "--shard-samples", "5");
    char *tar = path_join(dir, "s/train-000000.tar");
    size_t len;
    char *d = slurp(tar, &len);
    /* 000001.cls renamed 000001.txt (its header's checksum redone) */
    char *h = NULL;
    for (size_t off = 0; off + 512 <= len && !h; off += 512)
        if (!memcmp(d + off, "000001.cls", 11))
            h = d + off;
    cr_assert(h, "no header of 000001.cls");
    memcpy(h + 7, "txt", 3);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += (unsigned char)h[i];
    snprintf(h + 148, 8, "%06o", sum);
    char *nolabel = write_file(dir, "nolabel.tar", d, len);
    free(d);
    run_result r;
    run_train(&r, "--loader-only", "--no-progress", nolabel, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "nolabel.tar: member 000001.jpg: no label"), "%s", r.err);
    run_free(&r);
    run_train(&r, "--loader-only", "--no-progress", "--skip-bad", nolabel, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "nolabel.tar, 4 samples"), "%s", r.out);
    run_free(&r);

    char *missing = path_join(dir, "s/train-{000000..000003}.tar");
    run_train(&r, "--loader-only", "--no-progress", "--skip-bad", missing, NULL);
    cr_assert_eq(r.status, 2, "a missing shard is a missing input, not a bad sample: %s", r.err);
    cr_assert(strstr(r.err, "train-000003.tar: cannot open the shard: No such file"), "%s", r.err);
    run_free(&r);

    /* a JPEG member cut to half (the shard itself whole): found by the decoder */
    uint8_t *px = ti_picture(24, 32, 3, 7);
    free(ti_write_jpeg(dir, "bad/imgs/00.jpg", px, 24, 32, TJPF_RGB, TJSAMP_420, 90, 0));
    free(ti_write_jpeg(dir, "bad/imgs/01.jpg", px, 24, 32, TJPF_RGB, TJSAMP_420, 90, 0));
    free(ti_write_jpeg(dir, "bad/imgs/02.jpg", px, 24, 32, TJPF_RGB, TJSAMP_420, 90, 0));
    free(px);
    char *j = path_join(dir, "bad/imgs/01.jpg");
    cr_assert_eq(truncate(j, 300), 0);
    char *bcsv = write_text(dir, "bad/data.csv", "imgs/00.jpg,0\nimgs/01.jpg,1\nimgs/02.jpg,0\n");
    shard(bcsv, "b", NULL, NULL);
    char *btar = path_join(dir, "b/train-000000.tar");
    run_train(&r, "--loader-only", "--no-progress", "--batch", "3", btar, NULL);
    cr_assert_neq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.err, "train-000000.tar: member 000001.jpg: truncated or corrupt JPEG"), "%s",
              r.err);
    run_free(&r);
    run_train(&r, "--loader-only", "--no-progress", "--batch", "3", "--skip-bad", btar, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.err, "member 000001.jpg"), "the skipped sample is named: %s", r.err);
    run_free(&r);
    free(btar), free(bcsv), free(j), free(missing), free(nolabel), free(tar), free(csv);
}

static char *dump_order(const char *data, const char *workers, const char *order)
{
    return dump_with(data, workers, "lazy", order, "order");
}

Test(shards, the_streaming_order_gives_the_same_batches_for_any_workers_and_not_the_global_ones)
{
    char *csv = make_set();
    shard(csv, "s", "--shard-samples", "5");
    char *spec = path_join(dir, "s/train-{000000..000002}.tar");
    char *a = dump_order(spec, "0", "shards"), *b = dump_order(spec, "2", "shards");
    char *g = dump_order(spec, "2", "global");
    cr_assert(same_file_bytes(a, b), "--order shards: workers 0 and 2 give other batches");
    cr_assert(!same_file_bytes(a, g), "--order shards gave the global order's batches");
    free(a), free(b), free(g), free(spec);
    /* a CSV has no shards to stream */
    run_result r;
    run_train(&r, "--loader-only", "--epochs", "1", "--order", "shards", "--no-progress", csv,
              NULL);
    cr_assert_eq(r.status, 2, "--order shards on a CSV: status %d", r.status);
    cr_assert(strstr(r.err, "--order shards") && strstr(r.err, "not tar shards"), "%s", r.err);
    run_free(&r);
    free(csv);
}

/* A brace group that is neither a range nor a list (a typo's third dot)
 * is refused as such, not read as one literal shard name; an unclosed
 * one too, also behind a URL (never taken for a CSV). */
Test(shards, a_malformed_brace_pattern_is_named)
{
    run_result r;
    char *spec = path_join(dir, "s/train-{000000...000002}.tar");
    run_train(&r, "--loader-only", "--no-progress", spec, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "{000000...000002} is neither a range {A..B} of numbers nor a list"),
              "%s", r.err);
    run_free(&r);
    run_train(&r, "--loader-only", "--no-progress", "http://127.0.0.1:9/t-{000000..000002.tar",
              NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "unbalanced or nested '{'"), "%s", r.err);
    run_free(&r);
    free(spec);
}
