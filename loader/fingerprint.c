/* fingerprint.c — see fingerprint.h. */
#include "loader/fingerprint.h"

#include <stdlib.h>
#include <string.h>

/* The folder dataset_load joined relative paths to (its rules: --root,
 * else the CSV's folder, "/x.csv" -> "/"; a folder of class folders: the
 * root without trailing slashes; shards: the first shard's folder): a
 * string and its length *len, or NULL
 * when paths were kept as written (a CSV named without a folder). */
static const char *base_of(const dataset *ds, const char *root, size_t *len)
{
    if (ds->members) { /* shards: the first one's folder, however they were named */
        const char *first = ds->n ? dataset_path(ds, 0) : "";
        const char *slash = strrchr(first, '/');
        *len = slash ? (slash > first ? (size_t)(slash - first) : 1) : 0;
        return slash ? first : NULL;
    }
    const char *b = ds->folder ? ds->csv_path : root;
    if (b) {
        size_t n = strlen(b);
        if (ds->folder)
            while (n > 1 && b[n - 1] == '/')
                n--;
        *len = n;
        return b;
    }
    const char *slash = strrchr(ds->csv_path, '/');
    if (!slash)
        return NULL;
    *len = slash > ds->csv_path ? (size_t)(slash - ds->csv_path) : 1;
    return ds->csv_path;
}

/* Hash `p` as its lexical normal form: "." segments dropped and runs of
 * '/' taken as one ("./imgs//x.png" is "imgs/x.png"); ".." and symlinks
 * are kept as written (resolving them could name another file). */
static uint64_t hash_norm_path(const char *p, uint64_t h)
{
    char *buf = xmalloc(strlen(p) + 2);
    size_t n = 0;
    if (*p == '/')
        buf[n++] = '/';
    for (const char *s = p; *s;) {
        while (*s == '/')
            s++;
        const char *e = s;
        while (*e && *e != '/')
            e++;
        size_t l = (size_t)(e - s);
        if (l && !(l == 1 && s[0] == '.')) {
            if (n && buf[n - 1] != '/')
                buf[n++] = '/';
            memcpy(buf + n, s, l);
            n += l;
        }
        s = e;
    }
    buf[n++] = '\0'; /* an already normal path hashes as before: its bytes and the NUL */
    h = hash64(buf, n, h);
    free(buf);
    return h;
}

data_fp dataset_fingerprint(const dataset *ds, const char *root)
{
    data_fp fp = {.n = ds->n, .nclasses = ds->nclasses};
    size_t bl = 0;
    const char *base = base_of(ds, root, &bl);
    uint64_t h = hash64("train-data-fp", 13, 1);
    for (uint32_t i = 0; i < ds->n; i++) {
        const char *p = dataset_path(ds, i);
        /* base + "/" + relative path: hash the relative part */
        if (base && strncmp(p, base, bl) == 0 && p[bl] == '/')
            p += bl + 1;
        h = hash_norm_path(p, h);
        if (ds->members) /* a shard's row: the member too */
            h = hash_norm_path(ds->strs + ds->members[i].name, h);
        int32_t label = ds->rows[i].label;
        h = hash64(&label, sizeof label, h);
    }
    fp.hash = h;
    return fp;
}
