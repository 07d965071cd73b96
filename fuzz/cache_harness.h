/* cache_harness.h — the preload cache's fuzz harness (loader/cache.c's
 * reading of a --cache FILE), shared by fuzz/fuzz_cache.c (libFuzzer
 * target and replay driver) and the corpus replay test
 * (tests/test_fuzz_parsers.c).
 *
 * The cache is for a fixed data set of 3 rows (their images do not exist,
 * so their stamps are zeros) at 1x2x3 bytes a sample, under --root
 * FUZZ_CACHE_ROOT so its hashes do not depend on where the harness runs.
 * An input is one selector byte, then the cache file's bytes. A fuzzer
 * does not get past 64-bit checksums by chance, so the selector can make
 * the harness write the true values (the header layout of cache.h's
 * format is repeated here; the replay test checks it against a file the
 * real code wrote):
 *   bit 0: the header checksum; bit 1: first the fields the run expects
 *   (magic, version, count, shape, key, sizes, CSV hash); bit 2: the data
 *   and stamp checksums; bit 3: the file cut or zero-padded to the size
 *   the run expects; bit 4: a shareable cache; bit 5: commit a rebuild.
 * Checked: a refusal is one line naming the file; a reused cache's data
 * are the file's; a rebuild's mapping holds every sample (written in
 * full), and until committed the file keeps the input's bytes and no
 * temporary file is left in the folder; a committed rebuild is reused by
 * the next open. A broken invariant aborts.
 */
#ifndef TRAIN_FUZZ_CACHE_HARNESS_H
#define TRAIN_FUZZ_CACHE_HARNESS_H

#include <dirent.h>
#include <stddef.h>

#include "fuzz/scratch.h"
#include "loader/cache.h"

#define FUZZ_CACHE_ROOT "/nonexistent-fuzz-root"
#define FUZZ_CACHE_C 1
#define FUZZ_CACHE_H 2
#define FUZZ_CACHE_W 3
/* cache.c's format: version, header size, stamp size, checksum seeds */
#define FUZZ_CACHE_VERSION 4u
#define FUZZ_CACHE_HEADER 4096u
#define FUZZ_CACHE_STAMP 32u

typedef struct fuzz_cache_header { /* as cache.c writes it (cache.h, "File format") */
    char magic[8];
    uint32_t version, n, c, h, w;
    uint64_t key, data_bytes, data_sum, csv_hash, stamps_sum, header_sum;
} fuzz_cache_header;

typedef struct fuzz_cache_env {
    char dir[4096], csv[4200], path[4200];
    dataset ds;
    uint64_t key;
    size_t data_bytes, file_bytes;
} fuzz_cache_env;

/* The data set, in folder dir (which exists and holds nothing else). */
static inline void fuzz_cache_env_init(fuzz_cache_env *v, const char *dir)
{
    snprintf(v->dir, sizeof v->dir, "%s", dir);
    snprintf(v->csv, sizeof v->csv, "%s/set.csv", dir);
    snprintf(v->path, sizeof v->path, "%s/cache", dir);
    static const char rows[] = "path,label\na.png,0\nb.png,1\nc.png,0\n";
    fuzz_write("fuzz_cache", v->csv, rows, sizeof rows - 1);
    csv_opts o = CSV_OPTS_DEFAULT;
    o.root = FUZZ_CACHE_ROOT;
    errbuf e;
    if (dataset_load(&v->ds, v->csv, &o, &e) != 0)
        FUZZ_FAIL("fuzz_cache", "%s", e.msg);
    img_params p = {.channels = FUZZ_CACHE_C, .resize_h = FUZZ_CACHE_H, .resize_w = FUZZ_CACHE_W};
    v->key = cache_key(&v->ds, &p, FUZZ_CACHE_H, FUZZ_CACHE_W);
    v->data_bytes = (size_t)v->ds.n * FUZZ_CACHE_C * FUZZ_CACHE_H * FUZZ_CACHE_W;
    v->file_bytes = FUZZ_CACHE_HEADER + v->data_bytes + (size_t)v->ds.n * FUZZ_CACHE_STAMP;
}

static inline void fuzz_cache_env_free(fuzz_cache_env *v)
{
    unlink(v->path);
    unlink(v->csv);
    dataset_free(&v->ds);
}

/* the selector's repairs of the file's bytes (f: len bytes, room for
 * file_bytes) */
static inline size_t fuzz_cache_repair(const fuzz_cache_env *v, uint8_t sel, uint8_t *f, size_t len)
{
    if (sel & 8) {
        if (len < v->file_bytes)
            memset(f + len, 0, v->file_bytes - len);
        len = v->file_bytes;
    }
    if (len < sizeof(fuzz_cache_header))
        return len;
    fuzz_cache_header h;
    memcpy(&h, f, sizeof h);
    if (sel & 2) {
        memcpy(h.magic, CACHE_MAGIC, 8);
        h.version = FUZZ_CACHE_VERSION;
        h.n = v->ds.n, h.c = FUZZ_CACHE_C, h.h = FUZZ_CACHE_H, h.w = FUZZ_CACHE_W;
        h.key = v->key;
        h.data_bytes = v->data_bytes;
        h.csv_hash = v->ds.content_hash;
    }
    if (sel & 4 && len == v->file_bytes) {
        h.data_sum = hash64(f + FUZZ_CACHE_HEADER, v->data_bytes, 0x64617461);
        h.stamps_sum = hash64(f + FUZZ_CACHE_HEADER + v->data_bytes,
                              (size_t)v->ds.n * FUZZ_CACHE_STAMP, 0x7374616d);
    }
    if (sel & 1)
        h.header_sum = hash64(&h, offsetof(fuzz_cache_header, header_sum), 0x68656164);
    memcpy(f, &h, sizeof h);
    return len;
}

/* entries of the folder besides . and .. */
static inline int fuzz_cache_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int k = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        k += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    if (d)
        closedir(d);
    return k;
}

static inline void fuzz_cache_same_file(const char *path, const uint8_t *f, size_t len)
{
    size_t n = 0;
    errbuf e;
    char *now = read_whole_file(path, &n, &e);
    if (!now || n != len || memcmp(now, f, len) != 0)
        FUZZ_FAIL("fuzz_cache", "%s changed without a commit", path);
    free(now);
}

/* Returns 0 when the file was reused, 1 when it was rebuilt or refused
 * properly. */
static inline int fuzz_cache_one(const fuzz_cache_env *v, const uint8_t *data, size_t n)
{
    if (n == 0)
        return 1;
    uint8_t sel = data[0];
    size_t len = n - 1, room = len > v->file_bytes ? len : v->file_bytes;
    uint8_t *f = malloc(room);
    if (!f)
        FUZZ_FAIL("fuzz_cache", "out of memory");
    memcpy(f, data + 1, len);
    len = fuzz_cache_repair(v, sel, f, len);
    fuzz_write("fuzz_cache", v->path, f, len);
    preload_cache pc;
    errbuf e = {{0}};
    int rc = cache_open_shared(&pc, v->path, &v->ds, FUZZ_CACHE_C, FUZZ_CACHE_H, FUZZ_CACHE_W,
                               v->key, 0, sel >> 4 & 1, &e);
    int reused = 0;
    if (rc != 0) {
        fuzz_check_message("fuzz_cache", v->path, e.msg);
        fuzz_cache_same_file(v->path, f, len);
    } else if (pc.ready) {
        reused = 1;
        if (len != v->file_bytes || memcmp(pc.data, f + FUZZ_CACHE_HEADER, v->data_bytes) != 0)
            FUZZ_FAIL("fuzz_cache", "reused a cache whose data are not the file's (%s)", pc.note);
        cache_close(&pc);
    } else {
        memset(pc.data, 0x5a, v->data_bytes);
        if (sel & 32) {
            if (cache_commit(&pc, &e) != 0)
                FUZZ_FAIL("fuzz_cache", "commit failed: %s", e.msg);
            cache_close(&pc);
            if (cache_open_shared(&pc, v->path, &v->ds, FUZZ_CACHE_C, FUZZ_CACHE_H, FUZZ_CACHE_W,
                                  v->key, 0, 0, &e) != 0 ||
                !pc.ready || pc.data[v->data_bytes - 1] != 0x5a)
                FUZZ_FAIL("fuzz_cache", "a committed rebuild is not reused: %s", pc.note);
            cache_close(&pc);
        } else {
            cache_close(&pc);
            fuzz_cache_same_file(v->path, f, len);
        }
    }
    if (fuzz_cache_entries(v->dir) != 2)
        FUZZ_FAIL("fuzz_cache", "%d files in %s, not the CSV and the cache",
                  fuzz_cache_entries(v->dir), v->dir);
    free(f);
    return reused ? 0 : 1;
}

#endif
