/* csv_harness.h — the CSV fuzz harness (loader/dataset.c's parser), shared
 * by fuzz/fuzz_csv.c (libFuzzer target and replay driver) and the corpus
 * replay test (tests/test_fuzz_parsers.c).
 *
 * An input is one selector byte, which picks the csv_opts, then the CSV's
 * bytes. The harness writes the CSV, loads it and checks: a refusal is one
 * line naming the CSV and leaves the data set empty; a load has n >= 1
 * rows, each label below nclasses, each path and class name a
 * NUL-terminated string inside strs, lines increasing, and loads the same
 * a second time (row count, content hash). A broken invariant aborts.
 */
#ifndef TRAIN_FUZZ_CSV_HARNESS_H
#define TRAIN_FUZZ_CSV_HARNESS_H

#include "fuzz/scratch.h"
#include "loader/dataset.h"

/* bits 0-1: header auto / none / first row / auto; bit 2: skip bad rows;
 * bit 3: list bad rows (--check); bit 4: sparse labels; bits 5-6: columns
 * default / "1","0" / "path","label" / "img","2"; bit 7: --root /r */
static inline void fuzz_csv_opts(uint8_t sel, csv_opts *o, FILE *sink)
{
    static const int header[4] = {-1, 0, 1, -1};
    static const char *const cols[4][2] = {
        {NULL, NULL}, {"1", "0"}, {"path", "label"}, {"img", "2"}};
    *o = (csv_opts)CSV_OPTS_DEFAULT;
    o->header = header[sel & 3];
    o->skip_bad = sel >> 2 & 1;
    o->warn = o->skip_bad ? sink : NULL;
    o->list_bad = sel >> 3 & 1 ? sink : NULL;
    o->sparse_labels = sel >> 4 & 1;
    o->path_col = cols[sel >> 5 & 3][0];
    o->label_col = cols[sel >> 5 & 3][1];
    o->root = sel >> 7 ? "/r" : NULL;
}

static inline void fuzz_csv_check_string(const dataset *ds, uint64_t off, const char *what)
{
    if (off >= ds->strs_len || !memchr(ds->strs + off, '\0', ds->strs_len - off))
        FUZZ_FAIL("fuzz_csv", "%s at %llu is not a string inside strs (%zu bytes)", what,
                  (unsigned long long)off, ds->strs_len);
}

/* Returns 0 when the CSV loaded, 1 when it was refused properly. */
static inline int fuzz_csv_one(const char *path, const uint8_t *data, size_t n)
{
    if (n == 0)
        return 1;
    fuzz_write("fuzz_csv", path, data + 1, n - 1);
    FILE *sink = fopen("/dev/null", "w");
    if (!sink)
        FUZZ_FAIL("fuzz_csv", "cannot open /dev/null");
    csv_opts o;
    fuzz_csv_opts(data[0], &o, sink);
    dataset ds;
    errbuf e = {{0}};
    int rc = dataset_load(&ds, path, &o, &e);
    if (rc != 0) {
        fuzz_check_message("fuzz_csv", path, e.msg);
        if (ds.n || ds.rows || ds.strs)
            FUZZ_FAIL("fuzz_csv", "a refused load left %u rows", ds.n);
        fclose(sink);
        return 1;
    }
    if (ds.n < 1 || ds.nclasses < 1)
        FUZZ_FAIL("fuzz_csv", "loaded %u rows of %u classes", ds.n, ds.nclasses);
    uint32_t line = 0;
    for (uint32_t i = 0; i < ds.n; i++) {
        const dataset_row *r = &ds.rows[i];
        if (r->label < 0 || (uint32_t)r->label >= ds.nclasses)
            FUZZ_FAIL("fuzz_csv", "row %u: label %d of %u classes", i, r->label, ds.nclasses);
        if (r->line <= line)
            FUZZ_FAIL("fuzz_csv", "row %u: line %u after line %u", i, r->line, line);
        line = r->line;
        fuzz_csv_check_string(&ds, r->path, "a path");
        if (!dataset_path(&ds, i)[0])
            FUZZ_FAIL("fuzz_csv", "row %u has an empty path", i);
        char buf[2 * ERR_MAX];
        dataset_row_message(&ds, i, "x", buf, sizeof buf);
    }
    for (uint32_t c = 0; c < ds.nclasses; c++) {
        if (ds.names)
            fuzz_csv_check_string(&ds, ds.class_names[c], "a class name");
        char buf[64];
        if (!dataset_class_name(&ds, c, buf, sizeof buf))
            FUZZ_FAIL("fuzz_csv", "class %u has no name", c);
    }
    dataset_print_classes(&ds, sink);
    dataset again;
    if (dataset_load(&again, path, &o, &e) != 0 || again.n != ds.n ||
        again.nclasses != ds.nclasses || again.content_hash != ds.content_hash)
        FUZZ_FAIL("fuzz_csv", "a second load of the same bytes differs");
    dataset_free(&again);
    dataset_free(&ds);
    fclose(sink);
    return 0;
}

#endif
