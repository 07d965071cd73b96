/* test_csv.c — the CSV index on real files with the mess real CSVs have. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/dataset.h"
#include "tests/support/helpers.h"
#include "tests/support/images.h"

static char *dir;

static void setup(void) { dir = tmpdir_make(); }
static void teardown(void) { tmpdir_remove(dir); }

TestSuite(csv, .init = setup, .fini = teardown);

/* Load `text` written as dir/name; expect success. */
static void load_ok(dataset *ds, const char *name, const char *text, const csv_opts *o)
{
    char *p = write_text(dir, name, text);
    errbuf e = {{0}};
    int rc = dataset_load(ds, p, o, &e);
    cr_assert_eq(rc, 0, "load failed: %s", e.msg);
    free(p);
}

/* Load `text`; expect failure with exactly `want` after the CSV path. */
static void load_fails(const char *text, const csv_opts *o, const char *want)
{
    char *p = write_text(dir, "bad.csv", text);
    dataset ds;
    errbuf e = {{0}};
    cr_assert_eq(dataset_load(&ds, p, o, &e), -1, "expected failure: %s", want);
    char *full;
    cr_assert(asprintf(&full, "%s%s", p, want) > 0);
    cr_assert_str_eq(e.msg, full);
    cr_assert_null(ds.rows);
    free(full);
    free(p);
}

static const char *rel(const dataset *ds, uint32_t i)
{
    const char *p = dataset_path(ds, i);
    size_t n = strlen(dir);
    cr_assert(strncmp(p, dir, n) == 0 && p[n] == '/', "path %s is not under %s", p, dir);
    return p + n + 1;
}

/* Issue 11: a label column written as floats ("1.0", as pandas writes an
 * int column with a gap) became string classes "1.0", "2.00"... Whole
 * decimal numbers are the integers they equal, with or without a header. */
Test(csv, whole_float_labels_are_integers)
{
    dataset ds;
    load_ok(&ds, "data.csv", "path,label\na.png,1.0\nb.png,2.00\nc.png,3e0\nd.png,0\ne.png,1\n",
            NULL);
    cr_assert(ds.had_header);
    cr_assert_not(ds.names, "labels became names");
    cr_assert_eq(ds.nclasses, 4);
    const int32_t want[5] = {1, 2, 3, 0, 1};
    for (int i = 0; i < 5; i++)
        cr_assert_eq(ds.rows[i].label, want[i], "row %d", i);
    dataset_free(&ds);
    load_ok(&ds, "nohdr.csv", "a.png,4.0\nb.png,0.0\n", NULL);
    cr_assert_not(ds.had_header);
    cr_assert_not(ds.names);
    cr_assert_eq(ds.rows[0].label, 4);
    cr_assert_eq(ds.nclasses, 5);
    dataset_free(&ds);
}

/* A fraction is an error wherever it is, first row included: never
 * string classes by accident. Names stay names ("1.5" after "cat"). */
Test(csv, fractional_labels_are_an_error)
{
    load_fails("path,label\na.png,1.5\nb.png,2\n", NULL,
               ":2: label '1.5' is not a whole number (class labels are integers)");
    load_fails("path,label\na.png,1\nb.png,0.25\n", NULL,
               ":3: label '0.25' is not a whole number (class labels are integers)");
    load_fails("path,label\na.png,-1.0\n", NULL, ":2: label '-1.0' is negative");
    dataset ds;
    load_ok(&ds, "names.csv", "path,label\na.png,cat\nb.png,1.5\n", NULL);
    cr_assert(ds.names);
    cr_assert_eq(ds.nclasses, 2);
    dataset_free(&ds);
}

Test(csv, header_and_relative_paths)
{
    dataset ds;
    load_ok(&ds, "data.csv", "path,label\nimg/a.png,0\nimg/b.png,2\n", NULL);
    cr_assert_eq(ds.n, 2);
    cr_assert(ds.had_header);
    cr_assert_str_eq(rel(&ds, 0), "img/a.png");
    cr_assert_str_eq(rel(&ds, 1), "img/b.png");
    cr_assert_eq(ds.rows[0].label, 0);
    cr_assert_eq(ds.rows[1].label, 2);
    cr_assert_eq(ds.nclasses, 3);
    cr_assert_eq(ds.rows[0].line, 2);
    cr_assert_eq(ds.rows[1].line, 3);
    cr_assert(!ds.names);
    dataset_free(&ds);
}

Test(csv, no_header_detected)
{
    dataset ds;
    load_ok(&ds, "data.csv", "a.png,1\nb.png,0\n", NULL);
    cr_assert_eq(ds.n, 2);
    cr_assert(!ds.had_header);
    cr_assert_eq(ds.rows[0].line, 1);
    dataset_free(&ds);
}

Test(csv, quoted_fields_with_commas_quotes_and_newlines)
{
    dataset ds;
    const char *text = "path,label,comment\n"
                       "\"x, y.png\",1,\"said \"\"hi\"\"\"\n"
                       "\"multi\nline.png\",0,\"a\nb\nc\"\n"
                       "z.png,1,plain\n";
    load_ok(&ds, "data.csv", text, NULL);
    cr_assert_eq(ds.n, 3);
    cr_assert_str_eq(rel(&ds, 0), "x, y.png");
    cr_assert_str_eq(rel(&ds, 1), "multi\nline.png");
    cr_assert_str_eq(rel(&ds, 2), "z.png");
    cr_assert_eq(ds.rows[1].line, 3);
    cr_assert_eq(ds.rows[2].line, 7, "line numbers count the newlines inside quotes");
    dataset_free(&ds);
}

Test(csv, line_numbers_after_quoted_newlines_in_errors)
{
    load_fails("path,label\n\"a\nb.png\",1\n\"c.png\",x\n", NULL,
               ":4: label 'x' is not an integer");
}

Test(csv, crlf_bom_trailing_blank_lines)
{
    dataset ds;
    const char *text = "\xEF\xBB\xBFpath,label\r\na.png,3\r\nb.png,1\r\n\r\n\r\n,,\r\n  \r\n";
    load_ok(&ds, "data.csv", text, NULL);
    cr_assert_eq(ds.n, 2);
    cr_assert(ds.had_header, "the BOM must not hide the header");
    cr_assert_str_eq(rel(&ds, 0), "a.png");
    cr_assert_str_eq(rel(&ds, 1), "b.png");
    cr_assert_eq(ds.rows[1].line, 3);
    cr_assert_eq(ds.nclasses, 4);
    dataset_free(&ds);
}

Test(csv, old_mac_line_endings)
{
    dataset ds;
    load_ok(&ds, "data.csv", "path,label\ra.png,0\rb.png,1\r", NULL);
    cr_assert_eq(ds.n, 2);
    cr_assert_eq(ds.rows[1].line, 3);
    dataset_free(&ds);
}

Test(csv, extra_columns_and_columns_by_name)
{
    dataset ds;
    load_ok(&ds, "data.csv", "id,label,split,path\n7,4,train,a.png\n8,2,val,b.png\n", NULL);
    cr_assert_eq(ds.n, 2);
    cr_assert_str_eq(rel(&ds, 0), "a.png");
    cr_assert_eq(ds.rows[0].label, 4);
    dataset_free(&ds);

    csv_opts o = CSV_OPTS_DEFAULT;
    o.path_col = "file";
    o.label_col = "Target"; /* case-insensitive fallback */
    load_ok(&ds, "named.csv", "target,file\n5,x.png\n6,y.png\n", &o);
    cr_assert_str_eq(rel(&ds, 1), "y.png");
    cr_assert_eq(ds.rows[1].label, 6);
    dataset_free(&ds);
}

Test(csv, columns_by_number_without_header)
{
    dataset ds;
    csv_opts o = CSV_OPTS_DEFAULT;
    o.path_col = "2";
    o.label_col = "0";
    load_ok(&ds, "data.csv", "1,ignored,a.png\n0,ignored,b.png\n", &o);
    cr_assert(!ds.had_header);
    cr_assert_str_eq(rel(&ds, 0), "a.png");
    cr_assert_eq(ds.rows[0].label, 1);
    dataset_free(&ds);
}

Test(csv, korean_names_and_spaces)
{
    dataset ds;
    load_ok(&ds, "data.csv", "path,label\n사진/고양이 1.jpg,0\nmy photos/dog two.png,1\n", NULL);
    cr_assert_str_eq(rel(&ds, 0), "사진/고양이 1.jpg");
    cr_assert_str_eq(rel(&ds, 1), "my photos/dog two.png");
    dataset_free(&ds);
}

Test(csv, absolute_paths_and_root)
{
    dataset ds;
    load_ok(&ds, "data.csv", "path,label\n/abs/a.png,0\nrel/b.png,1\n", NULL);
    cr_assert_str_eq(dataset_path(&ds, 0), "/abs/a.png");
    dataset_free(&ds);

    csv_opts o = CSV_OPTS_DEFAULT;
    o.root = "/data/set";
    load_ok(&ds, "data.csv", "path,label\n/abs/a.png,0\nrel/b.png,1\n", &o);
    cr_assert_str_eq(dataset_path(&ds, 0), "/abs/a.png");
    cr_assert_str_eq(dataset_path(&ds, 1), "/data/set/rel/b.png");
    dataset_free(&ds);
}

Test(csv, string_labels_sorted)
{
    dataset ds;
    load_ok(&ds, "data.csv", "path,label\na.png,dog\nb.png,cat\nc.png,zebra\nd.png,cat\n", NULL);
    cr_assert(ds.names);
    cr_assert_eq(ds.nclasses, 3);
    char buf[16];
    cr_assert_str_eq(dataset_class_name(&ds, 0, buf, sizeof buf), "cat");
    cr_assert_str_eq(dataset_class_name(&ds, 1, buf, sizeof buf), "dog");
    cr_assert_str_eq(dataset_class_name(&ds, 2, buf, sizeof buf), "zebra");
    cr_assert_eq(ds.rows[0].label, 1);
    cr_assert_eq(ds.rows[1].label, 0);
    cr_assert_eq(ds.rows[2].label, 2);
    cr_assert_eq(ds.rows[3].label, 0);
    dataset_free(&ds);
}

Test(csv, string_labels_header_detection)
{
    dataset ds;
    /* "filename" does not look like a path: header */
    load_ok(&ds, "a.csv", "filename,class\ncat/1.jpg,cat\ndog/2.jpg,dog\n", NULL);
    cr_assert(ds.had_header);
    cr_assert_eq(ds.n, 2);
    dataset_free(&ds);
    /* a path heading that looks like a path, and a label heading: still a
     * header (it was read as an image "file.path" of class "label") */
    const char *headings[] = {"file.path,label", "image/path,Class", "img.file,TARGET"};
    for (int k = 0; k < 3; k++) {
        char text[128];
        snprintf(text, sizeof text, "%s\ncat/1.jpg,cat\ndog/2.jpg,dog\n", headings[k]);
        load_ok(&ds, "h.csv", text, NULL);
        cr_expect(ds.had_header, "%s", headings[k]);
        cr_expect_eq(ds.n, 2, "%s", headings[k]);
        cr_expect_eq(ds.nclasses, 2, "%s", headings[k]);
        dataset_free(&ds);
    }
    /* no column named path/label: one by a usual heading, or with two
     * columns the other one; three or more with neither is an error */
    const struct {
        const char *text;
        uint32_t classes;
    } named[] = {{"id,Image,Class\n1,cat/1.jpg,cat\n2,dog/2.jpg,dog\n", 2},
                 {"Class,Image\ncat,cat/1.jpg\ndog,dog/2.jpg\n", 2},
                 {"filename,species\ncat/1.jpg,cat\ndog/2.jpg,dog\n", 2}};
    for (int k = 0; k < 3; k++) {
        load_ok(&ds, "n.csv", named[k].text, NULL);
        cr_expect_eq(ds.nclasses, named[k].classes, "%s", named[k].text);
        char buf[16];
        cr_expect_str_eq(dataset_class_name(&ds, 0, buf, sizeof buf), "cat", "%s", named[k].text);
        cr_expect(strstr(dataset_path(&ds, 0), "cat/1.jpg"), "%s", named[k].text);
        dataset_free(&ds);
    }
    load_fails("a,b,c\n1,x.png,0\n2,y.png,1\n", NULL,
               ":1: no path column in the header (it has 'a', 'b', 'c'): name it with --path-col");
    /* no header: the first row is data */
    load_ok(&ds, "b.csv", "cat/1.jpg,cat\ndog/2.jpg,dog\n", NULL);
    cr_assert(!ds.had_header);
    cr_assert_eq(ds.n, 2);
    dataset_free(&ds);
    /* forced */
    csv_opts o = CSV_OPTS_DEFAULT;
    o.header = 0;
    load_ok(&ds, "c.csv", "path,label\n", &o);
    cr_assert_eq(ds.n, 1, "--no-header keeps the first row as data");
    cr_assert(ds.names);
    dataset_free(&ds);
}

Test(csv, class_mapping_printed)
{
    dataset ds;
    load_ok(&ds, "data.csv", "path,label\na.png,b\nb.png,a\n", NULL);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    dataset_print_classes(&ds, f);
    fclose(f);
    cr_assert_str_eq(buf, "classes (2, sorted): 0=a, 1=b\n");
    free(buf);
    dataset_free(&ds);
}

Test(csv, errors_name_file_line_and_reason)
{
    load_fails("path,label\na.png,1\nb.png,x\n", NULL, ":3: label 'x' is not an integer");
    load_fails("path,label\na.png,1\nb.png\n", NULL,
               ":3: missing label column (row has 1 field, label is column 1)");
    load_fails("path,label\na.png,-2\n", NULL, ":2: label '-2' is negative");
    load_fails("path,label\n,1\n", NULL, ":2: empty path");
    load_fails("path,label\na.png,\n", NULL, ":2: empty label");
    load_fails("path,label\n", NULL, ": no rows");
    load_fails("", NULL, ": no rows");
    load_fails("\n\n", NULL, ": no rows");
    load_fails("path,label\n\"a.png,1\n", NULL, ":2: unterminated quoted field");
    load_fails("path,label\na\"b.png,1\n", NULL,
               ":2: malformed quoted field (a quote inside an unquoted field, or text after a "
               "closing quote)");
    csv_opts o = CSV_OPTS_DEFAULT;
    o.label_col = "klass";
    load_fails("path,label\na.png,1\n", &o,
               ":1: no column named 'klass' (header has 'path', 'label')");
    load_fails("path,label\na.png,99999999\n", NULL,
               ":2: label 99999999 is too large (limit 1000000)");
    load_fails("path,label\na.png,1\nb.png,-1\n", NULL, ":3: label '-1' is negative");
}

Test(csv, missing_file)
{
    dataset ds;
    errbuf e;
    char *p = path_join(dir, "nope.csv");
    cr_assert_eq(dataset_load(&ds, p, NULL, &e), -1);
    char *want;
    cr_assert(asprintf(&want, "%s: No such file or directory", p) > 0);
    cr_assert_str_eq(e.msg, want);
    free(want);
    free(p);
}

Test(csv, skip_bad_counts_and_warns)
{
    dataset ds;
    char *wbuf = NULL;
    size_t wlen = 0;
    FILE *w = open_memstream(&wbuf, &wlen);
    csv_opts o = CSV_OPTS_DEFAULT;
    o.skip_bad = 1;
    o.warn = w;
    load_ok(&ds, "data.csv", "path,label\na.png,1\nb.png,x\nc.png\nd.png,0\n", &o);
    fclose(w);
    cr_assert_eq(ds.n, 2);
    cr_assert_eq(ds.bad_rows, 2);
    cr_assert_str_eq(rel(&ds, 1), "d.png");
    cr_assert(strstr(wbuf, "skipped 2 bad rows (first: ") != NULL, "%s", wbuf);
    cr_assert(strstr(wbuf, "data.csv:3: label 'x' is not an integer") != NULL, "%s", wbuf);
    free(wbuf);
    dataset_free(&ds);
}

Test(csv, check_files_reports_missing_with_lines)
{
    dataset ds;
    free(write_text(dir, "img/ok.png", "x"));
    free(write_text(dir, "img/empty.png", ""));
    load_ok(&ds, "data.csv", "path,label\nimg/ok.png,0\nimg/gone.png,1\nimg,0\nimg/empty.png,1\n",
            NULL);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(dataset_check_files(&ds, f), 3);
    fclose(f);
    cr_assert(strstr(buf, "data.csv:3: ") && strstr(buf, "img/gone.png: No such file or directory"),
              "%s", buf);
    cr_assert(strstr(buf, "data.csv:4: ") && strstr(buf, "/img: is a directory"), "%s", buf);
    cr_assert(strstr(buf, "data.csv:5: ") && strstr(buf, "img/empty.png: empty file"), "%s", buf);
    free(buf);
    dataset_free(&ds);
}

Test(csv, big_csv_is_flat)
{
    /* 50k rows: loads, and the row array and strings are single blocks */
    size_t cap = 50000 * 24 + 32, len = 0;
    char *text = malloc(cap);
    len += (size_t)sprintf(text, "path,label\n");
    for (int i = 0; i < 50000; i++)
        len += (size_t)sprintf(text + len, "im/%05d.png,%d\n", i, i % 7);
    dataset ds;
    load_ok(&ds, "big.csv", text, NULL);
    cr_assert_eq(ds.n, 50000);
    cr_assert_eq(ds.nclasses, 7);
    cr_assert_str_eq(rel(&ds, 49999), "im/49999.png");
    cr_assert_eq(ds.rows[49999].line, 50001);
    cr_assert_eq(ds.rows[49999].label, 49999 % 7);
    free(text);
    dataset_free(&ds);
}

Test(csv, content_hash_changes_with_content)
{
    dataset a, b, c;
    load_ok(&a, "h1.csv", "path,label\na.png,0\n", NULL);
    load_ok(&b, "h2.csv", "path,label\na.png,0\n", NULL);
    load_ok(&c, "h3.csv", "path,label\na.png,1\n", NULL);
    cr_assert_eq(a.content_hash, b.content_hash);
    cr_assert_neq(a.content_hash, c.content_hash);
    dataset_free(&a);
    dataset_free(&b);
    dataset_free(&c);
}

/* The binary: a bad CSV exits 2 before any work, naming file and line. */
Test(csv, train_binary_reports_and_exits_2)
{
    char *p = write_text(dir, "d.csv", "path,label\na.png,0\nb.png,cat\n");
    char *argv[] = {(char *)train_bin(), p, NULL};
    run_result r;
    run_argv(argv, NULL, 60, &r);
    cr_assert_eq(r.status, 2, "status %d, stderr: %s", r.status, r.err);
    char *want;
    cr_assert(asprintf(&want, "%s:3: label 'cat' is not an integer\n", p) > 0);
    cr_assert(strstr(r.err, want), "stderr: %s", r.err);
    free(want);
    run_free(&r);
    free(p);
}

/* A real baseline TIFF (little-endian, 2x2 8-bit grey, one uncompressed
 * strip), laid out by hand from the TIFF 6.0 field list. */
static char *write_tiff(const char *d, const char *name)
{
    uint8_t t[166] = {'I', 'I', 42, 0, 8, 0, 0, 0};
    static const uint16_t tags[11][3] = {/* tag, type (3 SHORT, 4 LONG, 5 RATIONAL), value */
                                         {256, 3, 2}, {257, 3, 2},   {258, 3, 8},  {259, 3, 1},
                                         {262, 3, 1}, {273, 4, 162}, {277, 3, 1},  {278, 3, 2},
                                         {279, 4, 4}, {282, 5, 146}, {283, 5, 154}};
    size_t at = 8;
    t[at++] = 11;
    t[at++] = 0;
    for (int i = 0; i < 11; i++, at += 12) {
        t[at] = (uint8_t)tags[i][0], t[at + 1] = (uint8_t)(tags[i][0] >> 8);
        t[at + 2] = (uint8_t)tags[i][1];
        t[at + 4] = 1; /* count */
        t[at + 8] = (uint8_t)tags[i][2], t[at + 9] = (uint8_t)(tags[i][2] >> 8);
    }
    at += 4;                                             /* no next IFD */
    t[146] = 72, t[150] = 1;                             /* XResolution 72/1 */
    t[154] = 72, t[158] = 1;                             /* YResolution 72/1 */
    t[162] = 0, t[163] = 85, t[164] = 170, t[165] = 255; /* the pixels */
    cr_assert_eq(at, 146);
    return write_file(d, name, t, sizeof t);
}

/* --check refuses what training refuses: a TIFF and an SVG, each with CSV
 * line, file and reason; the PNG and the WebP (made by Debian's cwebp from
 * a real PPM; decoded) beside them pass. */
Test(csv, train_binary_check_sniffs_formats_training_refuses)
{
    uint8_t *px = ti_picture(8, 8, 3, 7);
    free(ti_write_png(dir, "good.png", px, 8, 8, 3));
    char *ppm = ti_write_pnm(dir, "src.ppm", px, 8, 8, 3, 255);
    free(px);
    char *webp = path_join(dir, "photo.webp");
    char *cw[] = {"/usr/bin/cwebp", "-quiet", "-lossless", ppm, "-o", webp, NULL};
    run_result r;
    run_argv(cw, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "cwebp (package webp, make deps installs it): %s", r.err);
    run_free(&r);
    free(write_tiff(dir, "scan.tif"));
    free(
        write_text(dir, "logo.svg",
                   "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"8\" "
                   "height=\"8\"><rect width=\"8\" height=\"8\" fill=\"red\"/></svg>\n"));
    char *p =
        write_text(dir, "d.csv", "path,label\ngood.png,0\nphoto.webp,1\nscan.tif,0\nlogo.svg,1\n");
    char *argv[] = {(char *)train_bin(), "--check", p, NULL};
    run_argv(argv, NULL, 60, &r);
    cr_assert_eq(r.status, 2, "status %d, stderr: %s", r.status, r.err);
    const char *want[] = {"d.csv:4: ", "scan.tif: unsupported image format: TIFF\n",
                          "d.csv:5: ", "logo.svg: not an image (a text file)\n"};
    for (int i = 0; i < 4; i++)
        cr_assert(strstr(r.err, want[i]), "no '%s' in stderr: %s", want[i], r.err);
    cr_assert(!strstr(r.err, "good.png") && !strstr(r.err, "photo.webp"),
              "PNG and WebP are fine: %s", r.err);
    cr_assert(strstr(r.out, "check: 2 files whose header training would refuse"), "%s", r.out);
    run_free(&r);
    free(p);
    free(ppm);
    free(webp);
}

Test(csv, train_binary_check_reports_missing_files)
{
    free(write_text(dir, "a.png", "not really a png"));
    char *p = write_text(dir, "d.csv", "path,label\na.png,0\nmissing.png,1\n");
    char *argv[] = {(char *)train_bin(), "--check", p, NULL};
    run_result r;
    run_argv(argv, NULL, 60, &r);
    cr_assert_eq(r.status, 2, "status %d, stderr: %s", r.status, r.err);
    cr_assert(strstr(r.err, "d.csv:3: ") &&
                  strstr(r.err, "missing.png: cannot open: No such file or directory"),
              "stderr: %s", r.err);
    cr_assert(strstr(r.err, "d.csv:2: ") && strstr(r.err, "a.png: not an image (a text file)"),
              "stderr: %s", r.err);
    run_free(&r);
    free(p);
}

/* a ';'- or tab-separated file reads as one column: the message says so */
Test(csv, another_separator_is_named)
{
    load_fails("a.png;0\nb.png;1\n", NULL,
               ":1: missing label column (row has 1 field, label is column 1); the line looks "
               "';'-separated: train reads comma-separated CSV");
    load_fails("a.png\t0\nb.png\t1\n", NULL,
               ":1: missing label column (row has 1 field, label is column 1); the line looks "
               "tab-separated: train reads comma-separated CSV");
}
