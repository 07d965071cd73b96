/* fuzz_cache.c — libFuzzer target over the preload cache's file checks
 * (fuzz/cache_harness.h).
 *
 * Built two ways (mk/fuzz.mk):
 *   clang -fsanitize=fuzzer,address,undefined -DFUZZ_LIBFUZZER
 *       -> build/fuzz/fuzz_cache, run by `make fuzz-cache`
 *   gcc -> build/tools/fuzz_cache, a plain driver:
 *       fuzz_cache FILE...      replay inputs through the same harness
 *       fuzz_cache --seeds DIR  write the starting corpus: a cache file the
 *                               real code built and committed, as it is and
 *                               damaged under the selector's repairs
 * The harness needs a folder of its own: /dev/shm/fuzz_cache-PID (or
 * /tmp), removed at exit; a crash leaves its two small files.
 */
#define _POSIX_C_SOURCE 200809L
#include <sys/stat.h>

#include "fuzz/cache_harness.h"

static fuzz_cache_env fuzz_env;
static int fuzz_ready;

static void teardown(void)
{
    fuzz_cache_env_free(&fuzz_env);
    rmdir(fuzz_env.dir);
}

static void setup(void)
{
    if (fuzz_ready)
        return;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/fuzz_cache-%ld", base, (long)getpid());
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "fuzz_cache: %s: %s\n", dir, strerror(errno));
        exit(1);
    }
    fuzz_cache_env_init(&fuzz_env, dir);
    fuzz_ready = 1;
    atexit(teardown);
}

#ifdef FUZZ_LIBFUZZER

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    fuzz_cache_one(&fuzz_env, data, size);
    return 0;
}

#else

#include "fuzz/driver.h"

static int seeds(const char *dir)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: %s\n", dir, strerror(errno));
        return 1;
    }
    setup();
    /* a cache built and committed by the real code */
    preload_cache pc;
    errbuf e;
    unlink(fuzz_env.path);
    if (cache_open_shared(&pc, fuzz_env.path, &fuzz_env.ds, FUZZ_CACHE_C, FUZZ_CACHE_H,
                          FUZZ_CACHE_W, fuzz_env.key, 0, 0, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    for (size_t i = 0; i < fuzz_env.data_bytes; i++)
        pc.data[i] = (uint8_t)(i * 37 + 11);
    if (cache_commit(&pc, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    cache_close(&pc);
    size_t n;
    uint8_t *d = (uint8_t *)read_whole_file(fuzz_env.path, &n, &e);
    if (!d) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    int rc = fuzz_put_seed(dir, "valid", 0x00, d, n);
    rc |= fuzz_put_seed(dir, "valid-shareable", 0x10, d, n);
    rc |= fuzz_put_seed(dir, "valid-repaired", 0x0f, d, n);
    d[FUZZ_CACHE_HEADER + 1] ^= 1; /* a flipped data bit: rebuilt, committed */
    rc |= fuzz_put_seed(dir, "data-flipped-commit", 0x20, d, n);
    rc |= fuzz_put_seed(dir, "data-flipped-repaired", 0x04, d, n);
    d[FUZZ_CACHE_HEADER + 1] ^= 1;
    rc |= fuzz_put_seed(dir, "truncated", 0x00, d, n - 40);
    rc |= fuzz_put_seed(dir, "truncated-padded", 0x0f, d, n - 40);
    rc |= fuzz_put_seed(dir, "header-only", 0x03, d, FUZZ_CACHE_HEADER);
    d[12] ^= 1; /* another sample count, its header checksum repaired */
    rc |= fuzz_put_seed(dir, "other-count", 0x01, d, n);
    free(d);
    if (rc == 0)
        printf("fuzz_cache: seeds written to %s\n", dir);
    return rc ? 1 : 0;
}

static int one(const uint8_t *d, size_t n) { return fuzz_cache_one(&fuzz_env, d, n); }

int main(int argc, char **argv)
{
    static const fuzz_driver t = {"fuzz_cache",        seeds, setup, one, NULL, "reused",
                                  "rebuilt or refused"};
    return fuzz_driver_main(&t, argc, argv);
}

#endif
