/* driver.h — what the fuzz targets' plain drivers (the gcc builds in
 * build/tools, not the libFuzzer ones) share: writing a seed and replaying
 * files through a target. Header-only, like the harnesses.
 *
 *   TARGET FILE...      every file through the target, the counts printed
 *   TARGET --seeds DIR  the starting corpus, written by the target's seeds()
 */
#ifndef TRAIN_FUZZ_DRIVER_H
#define TRAIN_FUZZ_DRIVER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* DIR/NAME: the harness's selector byte sel, then d[0..n), written whole
 * (write_file_atomic). 0, or -1 after saying why. */
static inline int fuzz_put_seed(const char *dir, const char *name, uint8_t sel, const void *d,
                                size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    uint8_t *buf = xmalloc(n + 1);
    buf[0] = sel;
    memcpy(buf + 1, d, n);
    errbuf e;
    int rc = write_file_atomic(path, buf, n + 1, &e);
    if (rc)
        fprintf(stderr, "%s\n", e.msg);
    free(buf);
    return rc;
}

/* A target's plain driver. one(data, n) runs the harness on one input
 * (0: accepted, counted as ok_word; else no_word); setup before the first
 * and teardown after the last (either NULL). Returns main's status: 2 for
 * a usage error, 1 when a file cannot be read. */
typedef struct fuzz_driver {
    const char *who;
    int (*seeds)(const char *dir);
    void (*setup)(void);
    int (*one)(const uint8_t *data, size_t n);
    void (*teardown)(void);
    const char *ok_word, *no_word;
} fuzz_driver;

static inline int fuzz_driver_main(const fuzz_driver *t, int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--seeds") == 0)
        return t->seeds(argv[2]);
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: %s FILE...   |   %s --seeds DIR\n", t->who, t->who);
        return 2;
    }
    if (t->setup)
        t->setup();
    int ok = 0, no = 0;
    for (int i = 1; i < argc; i++) {
        size_t n;
        errbuf e;
        char *d = read_whole_file(argv[i], &n, &e);
        if (!d) {
            fprintf(stderr, "%s\n", e.msg);
            return 1;
        }
        if (t->one((const uint8_t *)d, n) == 0)
            ok++;
        else
            no++;
        free(d);
    }
    if (t->teardown)
        t->teardown();
    printf("%s: %d inputs: %d %s, %d %s, no invariant broken\n", t->who, argc - 1, ok, t->ok_word,
           no, t->no_word);
    return 0;
}

#endif
