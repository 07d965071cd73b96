/* test_image_fuzz.c — replay the committed fuzz corpus
 * (tests/fuzz-corpus/image/: seeds of every format and every crasher the
 * fuzzer found) through the fuzz harness itself, under ASan/UBSan. A broken
 * invariant aborts inside the harness, which fails the test. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "image/fuzz_harness.h"
#include "tests/support/helpers.h"

Test(image_fuzz, corpus_replays_cleanly, .timeout = 60)
{
    char *corpus = path_join(source_root(), "tests/fuzz-corpus/image");
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
