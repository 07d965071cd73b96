/* dataset.h — the data set as listed in a CSV, as laid out in a folder
 * of class folders (dataset_folder.c), or as stored in WebDataset tar
 * shards (dataset_shards.c): paths, labels, classes.
 *
 * The whole CSV is read and validated before any work starts; every problem
 * is reported as `FILE:LINE: reason`. The result is two flat allocations
 * (a row array and one string buffer; shards add their members and
 * shard_first) so forked workers share it
 * copy-on-write without touching it: nothing in here is written after load.
 */
#ifndef TRAIN_DATASET_H
#define TRAIN_DATASET_H

#include <stdint.h>
#include <stdio.h>

#include "common/util.h"
#include "image/image.h"

typedef struct dataset_row {
    uint64_t path; /* offset of the resolved path in dataset.strs */
    int32_t label; /* class id, 0 .. nclasses-1 */
    uint32_t line; /* 1-based line in the CSV where the row starts (a
                      folder's rows: the sample's position) */
} dataset_row;

/* Where a shard row's image is: a member of the shard file that the row's
 * path names. */
typedef struct dataset_member {
    uint64_t off, len; /* the member's bytes in the shard */
    uint64_t name;     /* offset of the member's name in dataset.strs */
} dataset_member;

typedef struct dataset {
    char *csv_path;        /* the CSV or folder as given by the user (for messages) */
    char *strs;            /* NUL-terminated strings: paths, then class names */
    size_t strs_len;       /* bytes used in strs */
    dataset_row *rows;     /* n rows, followed in the same allocation by
                         nclasses class-name offsets when names is set */
    uint64_t *class_names; /* points into the rows allocation, or NULL */
    uint32_t n;
    uint32_t nclasses;
    uint32_t bad_rows; /* rows dropped under skip_bad, or listed under list_bad */
    int names;         /* labels were strings mapped to sorted ids */
    int had_header;
    int folder;              /* read from a folder of class folders */
    uint32_t skipped_files;  /* a folder's non-image files, skipped */
    dataset_member *members; /* read from tar shards: one per row (whose path is
                                its shard's); NULL for a CSV or a folder */
    uint32_t nshards;
    uint32_t *shard_first; /* shards: nshards + 1 entries, shard s holding rows
                              [shard_first[s], shard_first[s+1]) (a third flat
                              allocation); NULL for a CSV or a folder */
    int remote;            /* rows are URLs of shards (http://, https://, s3://), read
                   through the shard cache */
    const struct shard_cache_opts *cache; /* where remote shards are kept (the
                                             csv_opts' shard_cache), or NULL */
    uint64_t content_hash; /* of the rows (dataset_fingerprint) and the resolved root */
} dataset;

typedef struct csv_opts {
    int header;            /* -1 auto (default), 0 none, 1 first row is a header */
    const char *path_col;  /* column name or 0-based number; NULL: "path" or 0 */
    const char *label_col; /* column name or 0-based number; NULL: "label" or 1 */
    const char *root;      /* folder relative paths start from; NULL: the CSV's */
    int skip_bad;          /* drop bad rows with one counted warning */
    FILE *warn;            /* where the skip warning goes; NULL = silent */
    int sparse_labels;     /* integer labels whose largest is an outlier: warn, not refuse */
    FILE *list_bad;        /* --check: every bad row's problem (the first CSV_LIST_BAD) goes
                              here, the good rows load and bad_rows counts the rest; NULL:
                              the first bad row fails the load (unless skip_bad) */
    const struct shard_cache_opts *shard_cache; /* where shards named by URL are kept
                                                   (NULL: URLs are refused) */
} csv_opts;

#define CSV_LIST_BAD 20

#define CSV_OPTS_DEFAULT                                                                           \
    {                                                                                              \
        .header = -1, .path_col = NULL, .label_col = NULL, .root = NULL, .skip_bad = 0,            \
        .warn = NULL, .sparse_labels = 0, .list_bad = NULL, .shard_cache = NULL                    \
    }

/* Load and validate `csv_path`, a CSV or a folder (dataset_folder_load). On
 * failure returns -1 with e holding `FILE:LINE: reason` (or `FILE:
 * reason`) and leaves ds empty. */
int dataset_load(dataset *ds, const char *csv_path, const csv_opts *o, errbuf *e);

/* A folder with one sub-folder per class, as torchvision's ImageFolder
 * (rules in dataset_folder.c). Class names are the sorted folder names
 * (names = 1); skipped non-image files are counted in one note to o->warn.
 * The CSV options (header, columns, root) do not apply. */
int dataset_folder_load(dataset *ds, const char *root, const csv_opts *o, errbuf *e);

/* WebDataset tar shards (rules in dataset_shards.c): `spec` is one .tar, a
 * comma list of them, a pattern with brace ranges
 * (`shards/train-{000000..000009}.tar`), or a file listing them. Labels from each sample's .cls
 * member; class names from classes.txt beside the first shard, when there.
 * skip_bad drops bad samples with one counted warning. */
int dataset_shards_load(dataset *ds, const char *spec, const csv_opts *o, errbuf *e);

/* Whether dataset_load reads `spec` as shards: every name it expands to
 * ends in ".tar", or it is a file whose first line names shards. */
int dataset_is_shards(const char *spec);

/* Whether `spec` names shards behind URLs (the shard cache is needed). */
int dataset_is_remote(const char *spec);

/* Where row i's image is, for the image layer's _src functions: a shard
 * row's member (its byte range, named `SHARD: member NAME`, built in buf),
 * or any other row's whole file (s->file NULL, s->name its path).
 * Returns s. */
const img_src *dataset_src(const dataset *ds, uint32_t i, img_src *s, char *buf, size_t len);

/* dataset_src, with a remote shard row's file replaced by its copy in the
 * shard cache (in local, llen bytes): downloaded first when `fetch`;
 * without it, 1 when the shard is not in the cache now. 0, 1, or -1 with
 * e naming the shard and why (after the download's retries). */
int dataset_src_local(const dataset *ds, uint32_t i, img_src *s, char *buf, size_t len, char *local,
                      size_t llen, int fetch, errbuf *e);

/* One message about row i, in the form every site uses: `FILE:LINE: msg`
 * for a CSV; for a folder the image path itself is the location, so
 * `msg` when it already starts with the path, else `PATH: msg`; for
 * shards likewise with `SHARD: member NAME`. Returns buf. */
const char *dataset_row_message(const dataset *ds, uint32_t i, const char *msg, char *buf,
                                size_t len);
void dataset_free(dataset *ds);

static inline const char *dataset_path(const dataset *ds, uint32_t i)
{
    return ds->strs + ds->rows[i].path;
}

/* Class name for id c: the string label, or the number itself. */
const char *dataset_class_name(const dataset *ds, uint32_t c, char *buf, size_t len);

/* Print the class mapping (`class 0 = cat`, ...) when labels were strings. */
void dataset_print_classes(const dataset *ds, FILE *out);

/* stat() every path; print `FILE:LINE: path: reason` (a folder's: `path:
 * reason`) for each one that is missing or not a regular file. Returns the
 * number of such rows. */
uint32_t dataset_check_files(const dataset *ds, FILE *out);

#endif
