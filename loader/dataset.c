/* dataset.c — read a data-set CSV with libcsv into a dataset.
 *
 * The CSV is fed to libcsv one physical line at a time so that every record
 * knows the line it started on, even when quoted fields hold newlines. The
 * first record is held back until the second arrives, because deciding
 * whether it is a header can need both. Labels are kept as text until the
 * end, when they are either integers already or strings mapped to ids in
 * sorted order.
 *
 * Not handled here: checking that the files exist (dataset_check_files
 * does that on request) or reading them (the loader's job).
 */
#define _POSIX_C_SOURCE 200809L
#include "loader/dataset.h"
#include "loader/fingerprint.h"

#include <csv.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* A growable byte buffer of NUL-terminated strings addressed by offset. */
typedef struct strbuf {
    char *p;
    size_t len, cap;
} strbuf;

static uint64_t strbuf_add(strbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (b->len + n + 1 > cap)
            cap *= 2;
        b->p = xrealloc(b->p, cap);
        b->cap = cap;
    }
    uint64_t off = b->len;
    memcpy(b->p + off, s, n);
    b->p[off + n] = '\0';
    b->len += n + 1;
    return off;
}

/* One record's fields, NUL-terminated, in a reused buffer. */
typedef struct record {
    strbuf text;
    size_t *off;
    int nf, cap;
    int nul_col; /* the first field holding a NUL byte, or -1 */
    uint32_t line;
} record;

static void record_add(record *r, const char *s, size_t n)
{
    if (r->nf == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 8;
        r->off = xrealloc(r->off, (size_t)r->cap * sizeof *r->off);
    }
    if (r->nul_col < 0 && n && memchr(s, '\0', n))
        r->nul_col = r->nf;
    r->off[r->nf++] = strbuf_add(&r->text, s, n);
}

static const char *record_field(const record *r, int i)
{
    return i < r->nf ? r->text.p + r->off[i] : NULL;
}

static void record_clear(record *r)
{
    r->text.len = 0;
    r->nf = 0;
    r->nul_col = -1;
    r->line = 0;
}

static void record_free(record *r)
{
    free(r->text.p);
    free(r->off);
}

#define LABEL_MAX 1000000

typedef struct tmp_row {
    uint64_t path;  /* offset in paths */
    uint64_t label; /* the integer label, or the offset of its text in labels */
    uint32_t line;
} tmp_row;

typedef struct parser {
    const char *csv;
    const csv_opts *o;
    char *base; /* folder relative paths are joined to, or NULL */

    record cur, first;
    int nrecords; /* non-blank records seen */
    int header_decided;
    int label_mode; /* 0 not yet known, 1 integers, 2 names */
    int path_idx, label_idx;
    uint32_t cur_line; /* line being fed */

    strbuf paths, labels;
    tmp_row *rows;
    size_t nrows, rows_cap;

    uint32_t bad;
    char first_bad[ERR_MAX];
    int failed;
    errbuf *e;
} parser;

/* A label written as a decimal number: -?D+(.D*)?([eE][+-]?D+)? or -?.D+...
 * (no hex, inf or nan, no spaces). */
static int is_decimal(const char *s)
{
    if (*s == '-' || *s == '+')
        s++;
    int digits = 0;
    while (isdigit((unsigned char)*s))
        s++, digits++;
    if (*s == '.')
        for (s++; isdigit((unsigned char)*s); s++)
            digits++;
    if (!digits)
        return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '-' || *s == '+')
            s++;
        if (!isdigit((unsigned char)*s))
            return 0;
        while (isdigit((unsigned char)*s))
            s++;
    }
    return *s == '\0';
}

/* Labels are numeric when the first data row's label is a decimal number.
 * An integer is taken as it is; any other decimal number whose value is
 * whole ("1.0", "2.00", "3e0", what pandas writes for an int column with
 * a missing value) is that integer; one with a fraction ("1.5",
 * "1.0000000000000001", "1e-400") is an error: classes are numbered, not
 * measured. Decided from the digits, exactly (a double would round
 * 0.99999999999999999 to 1). Returns 0 with *v set, 1 for a decimal with a
 * fraction, 2 for a whole number beyond LABEL_MAX (or -LABEL_MAX), -1 when
 * not a number. */
static int label_value(const char *s, long long *v)
{
    if (!is_decimal(s))
        return -1;
    int neg = *s == '-';
    if (*s == '-' || *s == '+')
        s++;
    char digits[64];
    int nd = 0, lead = 1, big = 0;
    long long e10 = 0;
    for (; isdigit((unsigned char)*s) || *s == '.'; s++) {
        if (*s == '.') {
            for (s++; isdigit((unsigned char)*s); s++) {
                if (lead && *s == '0') {
                    e10--;
                    continue;
                }
                lead = 0;
                if (nd < (int)sizeof digits)
                    digits[nd++] = *s, e10--;
                else if (*s != '0')
                    return 1; /* a non-zero digit past 64 significant ones */
            }
            break;
        }
        if (lead && *s == '0')
            continue;
        lead = 0;
        if (nd < (int)sizeof digits)
            digits[nd++] = *s;
        else
            e10++, big = 1;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        int eneg = *s == '-';
        if (*s == '-' || *s == '+')
            s++;
        long long x = 0;
        for (; isdigit((unsigned char)*s); s++)
            x = x < 1000000 ? x * 10 + (*s - '0') : x;
        e10 += eneg ? -x : x;
    }
    while (nd > 0 && digits[nd - 1] == '0')
        nd--, e10++;
    if (nd == 0) {
        *v = 0;
        return 0;
    }
    if (e10 < 0)
        return 1;
    if (big || nd + e10 > 7)
        return 2;
    long long x = 0;
    for (int i = 0; i < nd; i++)
        x = x * 10 + (digits[i] - '0');
    for (long long i = 0; i < e10; i++)
        x *= 10;
    if (x > LABEL_MAX)
        return 2;
    *v = neg ? -x : x;
    return 0;
}

static int all_empty(const record *r)
{
    for (int i = 0; i < r->nf; i++)
        if (record_field(r, i)[0] != '\0')
            return 0;
    return 1;
}

/* A row problem: fatal, or counted under skip_bad. Returns -1 when fatal. */
static int row_problem(parser *p, uint32_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int row_problem(parser *p, uint32_t line, const char *fmt, ...)
{
    char why[ERR_MAX - 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (!p->o->skip_bad && !p->o->list_bad) {
        errf(p->e, "%s:%u: %s", p->csv, line, why);
        p->failed = 1;
        return -1;
    }
    if (!p->o->skip_bad && p->bad < CSV_LIST_BAD) { /* --check: every bad row, counted */
        char a[ESC_MAX], b[ESC_MAX];
        fprintf(p->o->list_bad, "%s:%u: %s\n", esc_path(p->csv, a, sizeof a), line,
                esc_path(why, b, sizeof b));
    }
    if (p->bad++ == 0)
        snprintf(p->first_bad, sizeof p->first_bad, "%s:%u: %s", p->csv, line, why);
    return 0;
}

/* Usual column headings (any case): a label cell that names its column
 * rather than a class ("file.path,label" then "a.jpg,cat" is still a
 * header), and a path cell likewise. */
static const char *const label_headings[] = {"label",      "labels",    "class",    "classes",
                                             "class_name", "classname", "class_id", "target",
                                             "category",   "y",         NULL};
static const char *const path_headings[] = {
    "path", "file",       "filename",   "file_name", "filepath",  "file_path", "image",
    "img",  "image_path", "image_file", "imagepath", "file.path", NULL};

static int is_heading(const char *s, const char *const *names)
{
    for (; *names; names++)
        if (strcasecmp(s, *names) == 0)
            return 1;
    return 0;
}

/* The header's cells, quoted and comma-separated, for messages. */
static const char *header_cells(const record *hdr, char *cols, size_t len)
{
    cols[0] = '\0';
    for (int i = 0; i < hdr->nf && strlen(cols) + 56 < len; i++)
        snprintf(cols + strlen(cols), len - strlen(cols), "%s'%s'", i ? ", " : "",
                 record_field(hdr, i));
    return cols;
}

/* Column spec: a number, or a name looked up in the header row. */
static int resolve_column(parser *p, const char *spec, const char *dflt_name, int dflt_idx,
                          int have_header, const record *hdr)
{
    long long v;
    if (spec && parse_i64(spec, &v) == 0) {
        if (v < 0 || v > 100000) {
            errf(p->e, "%s: column number %s is out of range", p->csv, spec);
            return -1;
        }
        return (int)v;
    }
    const char *name = spec ? spec : dflt_name;
    if (have_header) {
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < hdr->nf; i++) {
                const char *f = record_field(hdr, i);
                if (pass == 0 ? strcmp(f, name) == 0 : strcasecmp(f, name) == 0)
                    return i;
            }
        /* no column by the default name: one by a usual heading ("Image",
         * "Class", "filename", ...) */
        if (!spec)
            for (int i = 0; i < hdr->nf; i++) {
                const char *f = record_field(hdr, i);
                if (is_heading(f, dflt_idx == 0 ? path_headings : label_headings))
                    return i;
            }
    }
    char cols[256];
    if (!spec && have_header && hdr->nf > 2) { /* which two of three or more: not a guess */
        errf(p->e, "%s:%u: no %s column in the header (it has %s): name it with --%s-col", p->csv,
             hdr->line, dflt_name, header_cells(hdr, cols, sizeof cols), dflt_name);
        return -1;
    }
    if (!spec)
        return dflt_idx;
    if (!have_header) {
        errf(p->e, "%s: column '%s' given by name but the CSV has no header row", p->csv, spec);
        return -1;
    }
    errf(p->e, "%s:%u: no column named '%s' (header has %s)", p->csv, hdr->line, spec,
         header_cells(hdr, cols, sizeof cols));
    return -1;
}

static int looks_like_path(const char *s)
{
    return strchr(s, '.') != NULL || strchr(s, '/') != NULL;
}

/* Decide whether `first` is a header, given the second record (or NULL). */
static int decide_header(parser *p, const record *second)
{
    const csv_opts *o = p->o;
    if (o->header >= 0)
        return o->header;
    long long v;
    if ((o->path_col && parse_i64(o->path_col, &v) != 0) ||
        (o->label_col && parse_i64(o->label_col, &v) != 0))
        return 1;
    int li = 1, pi = 0;
    if (o->label_col)
        parse_i64(o->label_col, &v), li = (int)v;
    if (o->path_col)
        parse_i64(o->path_col, &v), pi = (int)v;
    const char *lab = record_field(&p->first, li);
    if (!lab || is_decimal(lab))
        return 0;
    const char *lab2 = second ? record_field(second, li) : NULL;
    if ((lab2 && is_decimal(lab2)) || is_heading(lab, label_headings))
        return 1;
    const char *path = record_field(&p->first, pi);
    return path && !looks_like_path(path);
}

static void add_row(parser *p, const record *r)
{
    /* before the blank test: a line of NUL bytes reads as empty cells */
    if (r->nul_col >= 0) {
        row_problem(p, r->line, "NUL byte in column %d (a binary file, or not UTF-8 text?)",
                    r->nul_col);
        return;
    }
    if (all_empty(r))
        return; /* ",,," lines that spreadsheets leave behind */
    const char *path = record_field(r, p->path_idx);
    const char *label = record_field(r, p->label_idx);
    if (!path) {
        row_problem(p, r->line, "missing path column (row has %d field%s, path is column %d)",
                    r->nf, r->nf == 1 ? "" : "s", p->path_idx);
        return;
    }
    if (!label) {
        const char *sep = r->nf == 1 && strchr(path, ';')    ? "';'"
                          : r->nf == 1 && strchr(path, '\t') ? "tab"
                                                             : NULL;
        row_problem(p, r->line,
                    "missing label column (row has %d field%s, label is column %d)%s%s%s", r->nf,
                    r->nf == 1 ? "" : "s", p->label_idx, sep ? "; the line looks " : "",
                    sep ? sep : "", sep ? "-separated: train reads comma-separated CSV" : "");
        return;
    }
    if (!*path) {
        row_problem(p, r->line, "empty path");
        return;
    }
    if (!*label) {
        row_problem(p, r->line, "empty label");
        return;
    }
    if (p->label_mode == 0)
        p->label_mode = is_decimal(label) ? 1 : 2; /* the first data row decides */
    int64_t value = -1;
    if (p->label_mode == 1) {
        long long v;
        int kind = label_value(label, &v);
        if (kind == 1) {
            row_problem(p, r->line, "label '%s' is not a whole number (class labels are integers)",
                        label);
            return;
        }
        if (kind == 2 && label[0] != '-') {
            row_problem(p, r->line, "label %s is too large (limit %d)", label, LABEL_MAX);
            return;
        }
        if (kind == 2 || (kind == 0 && v < 0)) {
            row_problem(p, r->line, "label '%s' is negative", label);
            return;
        }
        if (kind != 0) {
            row_problem(p, r->line, "label '%s' is not an integer", label);
            return;
        }
        value = v;
    }
    if (p->nrows >= UINT32_MAX - 1) {
        row_problem(p, r->line, "too many rows (limit %u)", UINT32_MAX - 1);
        return;
    }
    if (p->nrows == p->rows_cap) {
        p->rows_cap = p->rows_cap ? p->rows_cap * 2 : 1024;
        p->rows = xrealloc(p->rows, p->rows_cap * sizeof *p->rows);
    }
    tmp_row *t = &p->rows[p->nrows++];
    t->line = r->line;
    t->label = value >= 0 ? (uint64_t)value : strbuf_add(&p->labels, label, strlen(label));
    if (path[0] == '/' || !p->base) {
        t->path = strbuf_add(&p->paths, path, strlen(path));
    } else {
        size_t bl = strlen(p->base), pl = strlen(path);
        char *joined = xmalloc(bl + pl + 2);
        memcpy(joined, p->base, bl);
        joined[bl] = '/';
        memcpy(joined + bl + 1, path, pl + 1);
        t->path = strbuf_add(&p->paths, joined, bl + pl + 1);
        free(joined);
    }
}

/* Called with the first record once we know enough to decide. */
static void settle_header(parser *p, const record *second)
{
    int hdr = decide_header(p, second);
    p->header_decided = 1;
    p->path_idx = resolve_column(p, p->o->path_col, "path", 0, hdr, &p->first);
    if (p->path_idx < 0) {
        p->failed = 1;
        return;
    }
    p->label_idx = resolve_column(p, p->o->label_col, "label", 1, hdr, &p->first);
    if (p->label_idx < 0) {
        p->failed = 1;
        return;
    }
    if (hdr && p->path_idx == p->label_idx && p->first.nf == 2 &&
        !(p->o->path_col && p->o->label_col)) {
        /* two columns, one found by its heading: the label (or path) is the other */
        if (p->o->label_col)
            p->path_idx = 1 - p->label_idx;
        else
            p->label_idx = 1 - p->path_idx;
    }
    if (p->path_idx == p->label_idx) {
        errf(p->e, "%s: path and label are the same column (%d)", p->csv, p->path_idx);
        p->failed = 1;
        return;
    }
    if (hdr && p->first.nul_col >= 0) {
        errf(p->e,
             "%s:%u: NUL byte in column %d of the header row (a binary file, or not UTF-8 "
             "text?)",
             p->csv, p->first.line, p->first.nul_col);
        p->failed = 1;
        return;
    }
    p->nrecords = hdr ? -1 : 0; /* remember the header for dataset.had_header */
    if (!hdr)
        add_row(p, &p->first);
}

static void on_field(void *s, size_t len, void *data)
{
    parser *p = data;
    if (p->cur.nf == 0 && p->cur.line == 0)
        p->cur.line = p->cur_line;
    record_add(&p->cur, s ? (const char *)s : "", s ? len : 0);
}

static void on_record(int c, void *data)
{
    (void)c;
    parser *p = data;
    if (p->failed || (all_empty(&p->cur) && p->cur.nul_col < 0)) {
        record_clear(&p->cur);
        return;
    }
    if (!p->header_decided) {
        if (p->first.nf == 0) {
            /* hold the first record back: swap buffers */
            record t = p->first;
            p->first = p->cur;
            p->cur = t;
        } else {
            settle_header(p, &p->cur);
            if (!p->failed)
                add_row(p, &p->cur);
        }
    } else {
        add_row(p, &p->cur);
    }
    record_clear(&p->cur);
}

static int cmp_label_text(const void *a, const void *b, void *ctx)
{
    const char *labels = ctx;
    const tmp_row *x = a, *y = b;
    int c = strcmp(labels + x->label, labels + y->label);
    if (c)
        return c;
    return (x->line > y->line) - (x->line < y->line);
}

/* glibc has qsort_r; declare it since -std=c11 hides it. */
void qsort_r(void *base, size_t nmemb, size_t size,
             int (*compar)(const void *, const void *, void *), void *arg);

static int line_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
            return 0;
    return 1;
}

static int feed_all(parser *p, struct csv_parser *cp, const char *text, size_t len)
{
    size_t pos = 0;
    p->cur_line = 0;
    while (pos < len && !p->failed) {
        /* one physical line: up to \n, or a lone \r (old Mac files) */
        size_t end = pos;
        while (end < len && text[end] != '\n' &&
               !(text[end] == '\r' && (end + 1 >= len || text[end + 1] != '\n')))
            end++;
        if (end < len)
            end++;
        if (end < len && text[end - 1] == '\r' && text[end] == '\n')
            end++;
        p->cur_line++;
        if (p->cur.line == 0 && p->cur.nf == 0 && !line_blank(text + pos, end - pos))
            p->cur.line = p->cur_line;
        size_t n = csv_parse(cp, text + pos, end - pos, on_field, on_record, p);
        if (n != end - pos) {
            errf(p->e, "%s:%u: %s", p->csv, p->cur_line,
                 csv_error(cp) == CSV_EPARSE
                     ? "malformed quoted field (a quote inside an unquoted field, "
                       "or text after a closing quote)"
                     : csv_strerror(csv_error(cp)));
            return -1;
        }
        pos = end;
    }
    if (p->failed)
        return -1;
    uint32_t start = p->cur.line;
    if (csv_fini(cp, on_field, on_record, p) != 0) {
        errf(p->e, "%s:%u: unterminated quoted field", p->csv, start ? start : p->cur_line);
        return -1;
    }
    if (p->failed)
        return -1;
    if (!p->header_decided && p->first.nf > 0)
        settle_header(p, NULL);
    return p->failed ? -1 : 0;
}

/* Integer labels make max+1 classes. One typo (1000000 among 0..9) would
 * make a model of a million outputs, most of them never trained: refused
 * (or with --sparse-labels a warning) when the classes are mostly unused
 * (more than SPARSE_MIN, over SPARSE_RATIO times the labels used) and the
 * largest label is an outlier (over SPARSE_RATIO times the next one + 1).
 * A validation set's few rows of many classes have no such outlier. */
#define SPARSE_MIN 1000
#define SPARSE_RATIO 10

static int check_sparse_labels(parser *p, const int32_t *ids, int64_t maxl)
{
    if (maxl + 1 <= SPARSE_MIN)
        return 0;
    uint8_t *used = xcalloc((size_t)maxl + 1, 1);
    uint32_t line = 0;
    for (size_t i = 0; i < p->nrows; i++) {
        used[ids[i]] = 1;
        if (ids[i] == maxl && !line)
            line = p->rows[i].line;
    }
    int64_t distinct = 0, next = -1;
    for (int64_t c = 0; c <= maxl; c++)
        if (used[c]) {
            distinct++;
            if (c < maxl)
                next = c;
        }
    free(used);
    if (maxl + 1 <= SPARSE_RATIO * distinct || maxl <= SPARSE_RATIO * (next + 1))
        return 0;
    char why[ERR_MAX];
    snprintf(why, sizeof why,
             "label %lld makes %lld classes, of which %lld %s used; a typo? (the model gets %lld "
             "outputs; the next largest label is %lld",
             (long long)maxl, (long long)maxl + 1, (long long)distinct,
             distinct == 1 ? "is" : "are", (long long)maxl + 1, (long long)next);
    if (!p->o->sparse_labels) {
        errf(p->e, "%s:%u: %s; --sparse-labels accepts it)", p->csv, line, why);
        return -1;
    }
    if (p->o->warn) {
        char a[ESC_MAX];
        fprintf(p->o->warn, "train: warning: %s:%u: %s)\n", esc_path(p->csv, a, sizeof a), line,
                why);
    }
    return 0;
}

/* Turn label text into ids: integers as they are, or names in sorted order. */
static int assign_labels(parser *p, dataset *ds, int32_t *ids)
{
    const char *lt = p->labels.p;
    ds->names = p->label_mode == 2;
    if (!ds->names) {
        int64_t maxl = -1;
        for (size_t i = 0; i < p->nrows; i++) {
            ids[i] = (int32_t)p->rows[i].label;
            if (ids[i] > maxl)
                maxl = ids[i];
        }
        ds->nclasses = (uint32_t)(maxl + 1);
        return check_sparse_labels(p, ids, maxl);
    }
    /* sort a copy of the rows by label text, walk the runs */
    tmp_row *sorted = xmalloc(p->nrows * sizeof *sorted);
    uint32_t *pos = xmalloc(p->nrows * sizeof *pos);
    memcpy(sorted, p->rows, p->nrows * sizeof *sorted);
    for (size_t i = 0; i < p->nrows; i++)
        sorted[i].path = i; /* reuse the field as the original position */
    qsort_r(sorted, p->nrows, sizeof *sorted, cmp_label_text, (void *)lt);
    uint32_t c = 0;
    for (size_t i = 0; i < p->nrows; i++) {
        if (i > 0 && strcmp(lt + sorted[i].label, lt + sorted[i - 1].label) != 0)
            c++;
        ids[sorted[i].path] = (int32_t)c;
        pos[c] = (uint32_t)i;
    }
    ds->nclasses = c + 1;
    /* class names go after the paths in the final string buffer */
    ds->class_names = (uint64_t *)(ds->rows + p->nrows);
    for (uint32_t k = 0; k < ds->nclasses; k++) {
        const char *name = lt + sorted[pos[k]].label;
        ds->class_names[k] = strbuf_add(&p->paths, name, strlen(name));
    }
    free(pos);
    free(sorted);
    return 0;
}

/* The largest CSV read (a million-row ImageNet list is about 60 MB). */
#define CSV_MAX_BYTES (1024ull * 1024 * 1024)
#define CSV_MAX_TEXT "1 GiB"

/* The whole CSV, refusing what is not a regular file before reading (the
 * open does not block on a FIFO: O_NONBLOCK until fstat has said what it
 * is) and what is larger than CSV_MAX_BYTES, also when it grows while read
 * (/proc files say size 0). */
static char *read_csv_file(const char *path, size_t *len, errbuf *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        errf(e, "%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    int flags;
    if (fstat(fd, &st) != 0 || (flags = fcntl(fd, F_GETFL)) < 0 ||
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        errf(e, "%s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        errf(e, "%s: %s, not a data CSV (a CSV must be a regular file)", path,
             file_kind(st.st_mode));
        close(fd);
        return NULL;
    }
    if ((unsigned long long)st.st_size > CSV_MAX_BYTES) {
        errf(e, "%s: %lld bytes, larger than a data CSV may be (limit " CSV_MAX_TEXT ")", path,
             (long long)st.st_size);
        close(fd);
        return NULL;
    }
    size_t cap = (size_t)st.st_size + 1 < 4096 ? 4096 : (size_t)st.st_size + 1, n = 0;
    char *buf = xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) {
            cap = cap * 2 > CSV_MAX_BYTES + 2 ? CSV_MAX_BYTES + 2 : cap * 2;
            buf = xrealloc(buf, cap);
        }
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            errf(e, "%s: read failed: %s", path, strerror(errno));
            break;
        }
        if (r == 0) {
            close(fd);
            buf[n] = '\0';
            *len = n;
            return buf;
        }
        n += (size_t)r;
        if (n > CSV_MAX_BYTES) {
            errf(e, "%s: more than " CSV_MAX_TEXT ", larger than a data CSV may be", path);
            break;
        }
    }
    free(buf);
    close(fd);
    return NULL;
}

/* UTF-16 text: a byte-order mark, or NUL bytes in many places of the
 * start (every other byte of ASCII text). */
static const char *utf16_bom(const unsigned char *t, size_t len)
{
    if (len >= 2 && t[0] == 0xFF && t[1] == 0xFE)
        return "byte-order mark FF FE";
    if (len >= 2 && t[0] == 0xFE && t[1] == 0xFF)
        return "byte-order mark FE FF";
    size_t n = len < 256 ? len : 256, zeros = 0;
    for (size_t i = 0; i < n; i++)
        zeros += t[i] == 0;
    return n >= 4 && zeros * 4 >= n ? "NUL bytes between the characters" : NULL;
}

/* Every message dataset_load makes carries the CSV's path or a cell: a
 * name holding ESC or CR must not act on the terminal. */
static void esc_msg(char *msg, size_t n)
{
    char tmp[ESC_MAX];
    snprintf(msg, n, "%s", esc_path(msg, tmp, sizeof tmp));
}

static int csv_load(dataset *ds, const char *csv_path, const csv_opts *o, errbuf *e);

int dataset_load(dataset *ds, const char *csv_path, const csv_opts *o, errbuf *e)
{
    int rc = csv_load(ds, csv_path, o, e);
    if (rc != 0 && e)
        esc_msg(e->msg, sizeof e->msg);
    return rc;
}

static int csv_load(dataset *ds, const char *csv_path, const csv_opts *o, errbuf *e)
{
    memset(ds, 0, sizeof *ds);
    csv_opts defaults = CSV_OPTS_DEFAULT;
    if (!o)
        o = &defaults;
    struct stat st;
    if (dataset_is_shards(csv_path)) /* names ending in .tar: WebDataset shards */
        return dataset_shards_load(ds, csv_path, o, e);
    if (stat(csv_path, &st) == 0 && S_ISDIR(st.st_mode)) {
        /* the CSV options may be meant for the other set (--val): a note */
        const char *unused = o->root          ? "--root"
                             : o->path_col    ? "--path-col"
                             : o->label_col   ? "--label-col"
                             : o->header >= 0 ? (o->header ? "--header" : "--no-header")
                                              : NULL;
        if (unused && o->warn)
            fprintf(o->warn,
                    "train: note: %s is a class folder: %s and the other CSV options do not "
                    "apply to it (they do to a CSV given with --val)\n",
                    csv_path, unused);
        return dataset_folder_load(ds, csv_path, o, e);
    }
    size_t len;
    errbuf re;
    char *text = read_csv_file(csv_path, &len, &re);
    if (!text)
        return errf(e, "%s", re.msg);
    const char *utf16 = utf16_bom((const unsigned char *)text, len);
    if (utf16) {
        free(text);
        return errf(e, "%s: looks like UTF-16 (%s); save it as UTF-8", csv_path, utf16);
    }

    parser p = {.csv = csv_path, .o = o, .e = e};
    p.cur.nul_col = p.first.nul_col = -1;
    if (o->root) {
        p.base = xstrdup(o->root);
    } else {
        const char *slash = strrchr(csv_path, '/');
        if (slash) {
            size_t n = (size_t)(slash - csv_path);
            p.base = xmalloc(n + 2);
            memcpy(p.base, csv_path, n ? n : 1); /* "/x.csv" -> "/" */
            p.base[n ? n : 1] = '\0';
        }
    }
    size_t skip = 0;
    if (len >= 3 && (unsigned char)text[0] == 0xEF && (unsigned char)text[1] == 0xBB &&
        (unsigned char)text[2] == 0xBF)
        skip = 3; /* UTF-8 byte-order mark from spreadsheet exports */

    struct csv_parser cp;
    int rc = -1;
    if (csv_init(&cp, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0) {
        errf(e, "%s: cannot initialise the CSV parser", csv_path);
        goto out;
    }
    rc = feed_all(&p, &cp, text + skip, len - skip);
    csv_free(&cp);
    if (rc != 0)
        goto out;
    rc = -1;
    ds->had_header = p.nrecords < 0;
    if (p.nrows == 0) {
        if (p.bad)
            errf(e, "%s: no usable rows (%u bad; first: %s)", csv_path, p.bad, p.first_bad);
        else
            errf(e, "%s: no rows", csv_path);
        goto out;
    }

    ds->n = (uint32_t)p.nrows;
    /* worst case: every row its own class name */
    ds->rows = xmalloc(p.nrows * sizeof(dataset_row) + p.nrows * sizeof(uint64_t));
    int32_t *ids = xmalloc(p.nrows * sizeof *ids);
    if (assign_labels(&p, ds, ids) != 0) {
        free(ids);
        free(ds->rows);
        goto out;
    }
    for (size_t i = 0; i < p.nrows; i++) {
        ds->rows[i].path = p.rows[i].path;
        ds->rows[i].label = ids[i];
        ds->rows[i].line = p.rows[i].line;
    }
    free(ids);
    ds->rows = xrealloc(ds->rows, p.nrows * sizeof(dataset_row) +
                                      (ds->names ? ds->nclasses * sizeof(uint64_t) : 0));
    if (ds->names)
        ds->class_names = (uint64_t *)(ds->rows + p.nrows);
    ds->strs = xrealloc(p.paths.p, p.paths.len);
    ds->strs_len = p.paths.len;
    p.paths.p = NULL;
    ds->csv_path = xstrdup(csv_path);
    ds->bad_rows = p.bad;
    /* the rows as the checkpoint's fingerprint sees them (paths relative
     * to the base, lexically normal; class ids), then the base: a CRLF
     * copy, a reordered or extra column, a header or "./" in the paths is
     * the same CSV; other rows or another --root are not */
    ds->content_hash = hash64("train-csv", 9, dataset_fingerprint(ds, o->root).hash);
    if (p.base)
        ds->content_hash = hash64(p.base, strlen(p.base), ds->content_hash);
    if (p.bad && o->warn && !o->list_bad) { /* --check listed them */
        char a[ESC_MAX], b[ESC_MAX];
        fprintf(o->warn, "train: warning: %s: skipped %u bad row%s (first: %s)\n",
                esc_path(csv_path, a, sizeof a), p.bad, p.bad == 1 ? "" : "s",
                esc_path(p.first_bad, b, sizeof b));
    }
    rc = 0;
out:
    record_free(&p.cur);
    record_free(&p.first);
    free(p.paths.p);
    free(p.labels.p);
    free(p.rows);
    free(p.base);
    free(text);
    if (rc != 0)
        memset(ds, 0, sizeof *ds);
    return rc;
}

void dataset_free(dataset *ds)
{
    free(ds->csv_path);
    free(ds->strs);
    free(ds->rows);
    free(ds->members);
    free(ds->shard_first);
    memset(ds, 0, sizeof *ds);
}

const char *dataset_class_name(const dataset *ds, uint32_t c, char *buf, size_t len)
{
    if (ds->names && c < ds->nclasses)
        return ds->strs + ds->class_names[c];
    snprintf(buf, len, "%u", c);
    return buf;
}

void dataset_print_classes(const dataset *ds, FILE *out)
{
    if (!ds->names)
        return;
    fprintf(out, "classes (%u, sorted):", ds->nclasses);
    char esc[ESC_MAX];
    for (uint32_t c = 0; c < ds->nclasses; c++)
        fprintf(out, "%s %u=%s", c ? "," : "", c,
                esc_path(ds->strs + ds->class_names[c], esc, sizeof esc));
    fputc('\n', out);
}

uint32_t dataset_check_files(const dataset *ds, FILE *out)
{
    uint32_t bad = 0;
    for (uint32_t i = 0; i < ds->n; i++) {
        struct stat st;
        const char *path = dataset_path(ds, i);
        const char *why = NULL;
        if (stat(path, &st) != 0)
            why = strerror(errno);
        else if (S_ISDIR(st.st_mode))
            why = "is a directory";
        else if (!S_ISREG(st.st_mode))
            why = "not a regular file";
        else if (st.st_size == 0)
            why = "empty file";
        if (why) {
            bad++;
            char msg[ERR_MAX], line[2 * ERR_MAX];
            snprintf(msg, sizeof msg, "%s: %s", path, why);
            if (out)
                fprintf(out, "%s\n", dataset_row_message(ds, i, msg, line, sizeof line));
        }
    }
    return bad;
}
