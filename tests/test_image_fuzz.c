/* test_image_fuzz.c — replay the committed fuzz corpus
 * (fuzz/corpus/image/: seeds of every format and every crasher the
 * fuzzer found) through the fuzz harness itself, under ASan/UBSan, then a
 * bounded differential fuzzing run: the corpus and generated JPEGs of
 * every layout (tests/support/jpeg_corpus.c), mutated at random, through
 * the same harness for $TRAIN_FUZZ_SECONDS (default 20). A broken invariant
 * aborts inside the harness, which fails the test; the input under test is
 * kept in the folder named on stderr. The coverage-guided libFuzzer run is
 * `make fuzz` (clang). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include <stdio.h>
#include <time.h>

#include "common/rng.h"
#include "fuzz/harness.h"
#include "tests/support/helpers.h"
#include "tests/support/jpeg_corpus.h"

Test(image_fuzz, corpus_replays_cleanly, .timeout = 60)
{
    char *corpus = path_join(source_root(), "fuzz/corpus/image");
    char *tmp = tmpdir_make(), *target = path_join(tmp, "input");
    DIR *d = opendir(corpus);
    cr_assert_not_null(d, "%s", corpus);
    img_ctx *c = img_ctx_create();
    int files = 0, loaded = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char *path = path_join(corpus, de->d_name);
        size_t n;
        errbuf e;
        char *data = read_whole_file(path, &n, &e);
        cr_assert_not_null(data, "%s", e.msg);
        /* the recorded selector, then a sweep over the parameter paths */
        loaded += fuzz_image_one(c, target, (const uint8_t *)data, n) == 0;
        for (int sel = 0; n > 0 && sel < 256; sel += 7) {
            data[0] = (char)sel;
            loaded += fuzz_image_one(c, target, (const uint8_t *)data, n) == 0;
        }
        files++;
        free(data);
        free(path);
    }
    closedir(d);
    img_ctx_free(c);
    cr_assert_geq(files, 15, "the corpus has seeds of every format");
    cr_assert_gt(loaded, files * 10, "most inputs should load with most parameters (%d)", loaded);
    free(target);
    tmpdir_remove(tmp);
    free(corpus);
}

typedef struct seed {
    uint8_t *d; /* selector byte + file */
    size_t n;
} seed;

static double mono(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One of the mutations a fuzzer makes, in place (*n may shrink or grow
 * within cap). */
static void mutate(rng *r, uint8_t *d, size_t *n, size_t cap)
{
    size_t len = *n;
    if (len < 4)
        return;
    size_t at = 1 + rng_below(r, (uint32_t)(len - 1));
    switch (rng_below(r, 7)) {
    case 0: d[at] ^= (uint8_t)(1u << rng_below(r, 8)); break; /* a bit */
    case 1: d[at] = (uint8_t)rng_below(r, 256); break;        /* a byte */
    case 2: d[at] = (uint8_t)(rng_below(r, 2) ? 0xFF : 0x00); break;
    case 3: *n = at + 1; break; /* truncate */
    case 4: {                   /* a run of bytes copied from elsewhere in the file */
        size_t from = 1 + rng_below(r, (uint32_t)(len - 1)), k = 1 + rng_below(r, 16);
        if (at + k <= len && from + k <= len)
            memmove(d + at, d + from, k);
        break;
    }
    case 5: /* insert a marker byte pair */
        if (len + 2 <= cap) {
            memmove(d + at + 2, d + at, len - at);
            d[at] = 0xFF, d[at + 1] = (uint8_t)(0xC0 + rng_below(r, 64));
            *n = len + 2;
        }
        break;
    default: d[0] = (uint8_t)rng_below(r, 256); break; /* the parameters */
    }
}

Test(image_fuzz, mutated_inputs_keep_every_invariant)
{
    const char *env = getenv("TRAIN_FUZZ_SECONDS");
    const double seconds = env ? atof(env) : 20.0;
    seed seeds[160];
    int ns = 0;
    /* the committed corpus */
    char *corpus = path_join(source_root(), "fuzz/corpus/image");
    DIR *dd = opendir(corpus);
    cr_assert_not_null(dd, "%s", corpus);
    for (struct dirent *de; (de = readdir(dd)) && ns < 60;) {
        if (de->d_name[0] == '.')
            continue;
        char *path = path_join(corpus, de->d_name);
        errbuf e;
        seeds[ns].d = (uint8_t *)read_whole_file(path, &seeds[ns].n, &e);
        cr_assert_not_null(seeds[ns].d, "%s", e.msg);
        ns++;
        free(path);
    }
    closedir(dd);
    /* a JPEG of every layout the corpus generator knows, small */
    int total = jc_corpus(NULL, 0);
    jc_spec *all = calloc((size_t)total, sizeof *all);
    jc_corpus(all, total);
    for (int i = 0; i < total && ns < 160; i += 7) {
        if (all[i].h > 80)
            continue;
        size_t len;
        char why[200];
        uint8_t *f = jc_encode(&all[i], (uint64_t)i, &len, why);
        if (!f)
            continue;
        seeds[ns].d = malloc(len + 1);
        seeds[ns].d[0] = (uint8_t)(i * 37);
        memcpy(seeds[ns].d + 1, f, len);
        seeds[ns].n = len + 1;
        ns++;
        free(f);
    }
    free(all);
    char *tmp = tmpdir_make(), *target = path_join(tmp, "input"),
         *last = path_join(tmp, "input.last");
    fprintf(stderr, "image_fuzz: %d seeds mutated for %.0f s; the input under test is %s\n", ns,
            seconds, last);
    img_ctx *c = img_ctx_create();
    rng r = rng_keyed(2026, RNG_TOOL, 25, 0);
    size_t cap = 1 << 17;
    uint8_t *buf = malloc(cap);
    long runs = 0;
    const double end = mono() + seconds;
    while (mono() < end) {
        const seed *s = &seeds[rng_below(&r, (uint32_t)ns)];
        size_t n = s->n < cap ? s->n : cap;
        memcpy(buf, s->d, n);
        for (int k = 1 + (int)rng_below(&r, 4); k > 0; k--)
            mutate(&r, buf, &n, cap);
        free(write_file(tmp, "input.last", buf, n));
        fuzz_image_one(c, target, buf, n);
        runs++;
    }
    img_ctx_free(c);
    fprintf(stderr, "image_fuzz: %ld mutated inputs, no invariant broken\n", runs);
    cr_expect_gt(runs, 100, "only %ld inputs in %.0f s", runs, seconds);
    for (int i = 0; i < ns; i++)
        free(seeds[i].d);
    free(buf);
    free(target);
    free(last);
    tmpdir_remove(tmp);
    free(corpus);
}
