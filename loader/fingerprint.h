/* fingerprint.h — one number for "the same data": what a checkpoint
 * remembers of the set it was trained on (so --resume can say what
 * changed), and what MPI ranks compare at start-up (so no rank trains on
 * other rows than rank 0).
 *
 * The hash covers every row in order: its path relative to the data set's
 * folder (the CSV's folder, --root, the folder of class folders, or the
 * first shard's folder; an
 * absolute path as written), lexically normal ("./" segments dropped, "//"
 * taken as "/"; ".." and symlinks kept), and its class id. So the same CSV read from
 * another working directory, or the same data set copied elsewhere, has
 * the same fingerprint; a dropped, added, reordered or relabelled row
 * changes it. A shard's row is its shard's path and its image member's
 * name. Class names are not in it (checkpoints compare them
 * apart). The hash is common/util.c's hash64.
 */
#ifndef TRAIN_FINGERPRINT_H
#define TRAIN_FINGERPRINT_H

#include <stdint.h>

#include "loader/dataset.h"

typedef struct data_fp {
    uint64_t n;        /* samples */
    uint64_t nclasses; /* classes */
    uint64_t hash;     /* the rows: relative path and class id, in order */
} data_fp;

/* The fingerprint of ds, loaded from its csv_path with --root `root`
 * (NULL: none; ignored for a folder). */
data_fp dataset_fingerprint(const dataset *ds, const char *root);

#endif
