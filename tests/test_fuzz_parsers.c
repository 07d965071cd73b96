/* test_fuzz_parsers.c — replay the committed corpora of the parsers' fuzz
 * targets (fuzz/corpus/csv, checkpoint, cache: seeds and every crasher
 * found) through the harnesses themselves, under ASan/UBSan, each input
 * with its recorded selector and then with every selector, so that a
 * crasher found by `make fuzz-csv` (or -checkpoint, -cache) fails here.
 * A broken invariant aborts inside the harness, which fails the test.
 * Beyond replay, each test checks that the corpus still reaches what it
 * was made to reach (inputs accepted, not only refused), so a format
 * change that turns every seed into a refusal is noticed. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/cache_harness.h"
#include "fuzz/checkpoint_harness.h"
#include "fuzz/csv_harness.h"
#include "tests/support/helpers.h"

typedef struct outcome {
    int files, ok, sweep_ok;
} outcome;

/* each file of fuzz/corpus/<name> through one(ctx, input, n): 0 = accepted */
static outcome replay(const char *name, int (*one)(void *ctx, const uint8_t *d, size_t n),
                      void *ctx)
{
    char *sub = path_join("fuzz/corpus", name), *corpus = path_join(source_root(), sub);
    DIR *d = opendir(corpus);
    cr_assert_not_null(d, "%s", corpus);
    outcome o = {0};
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.')
            continue;
        char *path = path_join(corpus, de->d_name);
        size_t n;
        errbuf e;
        char *data = read_whole_file(path, &n, &e);
        cr_assert_not_null(data, "%s", e.msg);
        cr_assert_gt(n, 0, "%s is empty (no selector byte)", path);
        o.ok += one(ctx, (const uint8_t *)data, n) == 0;
        for (int sel = 0; sel < 256; sel += 5) {
            data[0] = (char)sel;
            o.sweep_ok += one(ctx, (const uint8_t *)data, n) == 0;
        }
        o.files++;
        free(data);
        free(path);
    }
    closedir(d);
    free(corpus);
    free(sub);
    return o;
}

static int csv_one(void *ctx, const uint8_t *d, size_t n) { return fuzz_csv_one(ctx, d, n); }

Test(fuzz_parsers, csv_corpus_replays_cleanly, .timeout = 60)
{
    char *tmp = tmpdir_make(), *target = path_join(tmp, "input.csv");
    outcome o = replay("csv", csv_one, target);
    cr_assert_geq(o.files, 15, "the corpus has seeds of every shape (%d)", o.files);
    cr_assert_geq(o.ok, 10, "most seeds load with their selector (%d of %d)", o.ok, o.files);
    cr_assert_gt(o.sweep_ok, o.files * 10, "and with most selectors (%d)", o.sweep_ok);
    free(target);
    tmpdir_remove(tmp);
}

typedef struct ckpt_ctx {
    model *m;
    const char *path;
} ckpt_ctx;

static int ckpt_one(void *ctx, const uint8_t *d, size_t n)
{
    ckpt_ctx *c = ctx;
    return fuzz_checkpoint_one(c->m, c->path, d, n);
}

Test(fuzz_parsers, checkpoint_corpus_replays_cleanly, .timeout = 60)
{
    char *tmp = tmpdir_make(), *target = path_join(tmp, "ckpt");
    model m;
    backend *be;
    fuzz_ckpt_model(&m, &be);
    ckpt_ctx c = {&m, target};
    outcome o = replay("checkpoint", ckpt_one, &c);
    cr_assert_geq(o.files, 5, "%d files", o.files);
    /* the seeds are the harness's model's own checkpoints: each reads and
     * loads (version 2, and version 1 once its checksum is repaired) */
    cr_assert_eq(o.ok, o.files, "every seed reads and loads (%d of %d)", o.ok, o.files);
    model_free(&m);
    be->ops->destroy(be);
    free(target);
    tmpdir_remove(tmp);
}

static int cache_one(void *ctx, const uint8_t *d, size_t n) { return fuzz_cache_one(ctx, d, n); }

Test(fuzz_parsers, cache_corpus_replays_cleanly, .timeout = 60)
{
    char *tmp = tmpdir_make();
    fuzz_cache_env v;
    fuzz_cache_env_init(&v, tmp);
    outcome o = replay("cache", cache_one, &v);
    cr_assert_geq(o.files, 9, "%d files", o.files);
    /* "valid" is a file cache.c built and committed: reused as it is. This
     * also holds the harness's copy of the header layout to cache.c's. */
    cr_assert_geq(o.ok, 3, "the valid seeds are reused (%d of %d)", o.ok, o.files);
    fuzz_cache_env_free(&v);
    tmpdir_remove(tmp);
}
