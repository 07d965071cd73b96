/* fingerprint.c — see fingerprint.h. */
#include "loader/fingerprint.h"

#include <string.h>

/* The folder dataset_load joined relative paths to (its rules: --root,
 * else the CSV's folder, "/x.csv" -> "/"; a folder of class folders: the
 * root without trailing slashes): a string and its length *len, or NULL
 * when paths were kept as written (a CSV named without a folder). */
static const char *base_of(const dataset *ix, const char *root, size_t *len)
{
    const char *b = ix->folder ? ix->csv_path : root;
    if (b) {
        size_t n = strlen(b);
        if (ix->folder)
            while (n > 1 && b[n - 1] == '/')
                n--;
        *len = n;
        return b;
    }
    const char *slash = strrchr(ix->csv_path, '/');
    if (!slash)
        return NULL;
    *len = slash > ix->csv_path ? (size_t)(slash - ix->csv_path) : 1;
    return ix->csv_path;
}

data_fp dataset_fingerprint(const dataset *ix, const char *root)
{
    data_fp fp = {.n = ix->n, .nclasses = ix->nclasses};
    size_t bl = 0;
    const char *base = base_of(ix, root, &bl);
    uint64_t h = hash64("train-data-fp", 13, 1);
    for (uint32_t i = 0; i < ix->n; i++) {
        const char *p = dataset_path(ix, i);
        /* base + "/" + relative path: hash the relative part */
        if (base && strncmp(p, base, bl) == 0 && p[bl] == '/')
            p += bl + 1;
        h = hash64(p, strlen(p) + 1, h);
        int32_t label = ix->rows[i].label;
        h = hash64(&label, sizeof label, h);
    }
    fp.hash = h;
    return fp;
}
